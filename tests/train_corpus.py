"""Real text for the tokenizer-training tests, about 2.6 MB: English prose (botchan.txt,
shipped in sentencepiece's sdist, which `make setup` unpacks for sp_ids), code (the
Python sources apache-beam ships), multilingual rows (CPython's CJK test texts and the
project's generated Vietnamese / Chinese / Japanese / Korean / mixed rows)."""
from __future__ import annotations

import functools
import random
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BOTCHAN = REPO / ".tools/sp_ids/sentencepiece-0.2.1/test/botchan.txt"


@functools.lru_cache(maxsize=None)
def rows() -> tuple[str, ...]:
    """The corpus as row texts, in a fixed order."""
    if not BOTCHAN.exists():
        pytest.fail(f"{BOTCHAN} is missing: `make setup` unpacks sentencepiece's sdist there")
    out: list[str] = []
    lines = BOTCHAN.read_text(encoding="utf-8").split("\n")
    out += ["\n".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]
    import apache_beam

    root = Path(apache_beam.__file__).parent
    code = 0
    for path in sorted(root.rglob("*.py")):
        for block in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            if block.strip():
                out.append(block)
                code += len(block)
        if code > 1_500_000:
            break
    cjk = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"
    for path in sorted(cjk.glob("*-utf8.txt")):
        out += [p for p in path.read_text(encoding="utf-8").split("\n") if p.strip()]
    sys.path.insert(0, str(REPO))
    from tools import textgen

    rng = random.Random(41)
    out += [textgen.multilingual_text(rng)[1] for _ in range(6000)]
    return tuple(out)
