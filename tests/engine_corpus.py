"""Real text for the engine equality tests: 70k paragraphs of Python's own library
(code, docstrings, prose), multilingual segments (pycountry's translations of country,
language, currency and script names into 163 locales, CPython's CJK test texts), and
adversarial strings (long runs of one character, mixed scripts, 1 MB lines)."""
from __future__ import annotations

import functools
import gettext
import importlib.resources
import json
import sysconfig
from pathlib import Path

STDLIB_SEGMENTS = 70_000
MULTILINGUAL_SEGMENTS = 30_000


@functools.lru_cache(maxsize=None)
def stdlib_segments() -> tuple[str, ...]:
    """70k paragraphs (up to 400 characters) of the stdlib's sources, in path order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        out += [block[:400] for block in text.split("\n\n") if block.strip()]
        if len(out) >= STDLIB_SEGMENTS:
            break
    assert len(out) >= STDLIB_SEGMENTS
    return tuple(out[:STDLIB_SEGMENTS])


@functools.lru_cache(maxsize=None)
def multilingual_segments() -> tuple[str, ...]:
    """30k segments in many scripts: each locale's translations joined a few at a time
    (as names appear in running text), every locale in turn, then the CJK texts."""
    root = importlib.resources.files("pycountry") / "locales"
    per_locale: list[list[str]] = []
    for locale in sorted(p.name for p in root.iterdir() if p.is_dir()):
        names: list[str] = []
        for mo in sorted((root / locale / "LC_MESSAGES").iterdir(), key=lambda p: p.name):
            with mo.open("rb") as handle:
                catalog = gettext.GNUTranslations(handle)._catalog
            names += [v for k, v in sorted(catalog.items(), key=lambda kv: str(kv[0]))
                      if k and isinstance(v, str) and v.strip()]
        per_locale.append([", ".join(names[i:i + 6]) for i in range(0, len(names), 6)])
    out: list[str] = []
    depth = 0
    while len(out) < MULTILINGUAL_SEGMENTS and any(depth < len(s) for s in per_locale):
        out += [s[depth] for s in per_locale if depth < len(s)]
        depth += 1
    cjk = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"
    for path in sorted(cjk.glob("*-utf8.txt")):
        out += [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    return tuple(out[:MULTILINGUAL_SEGMENTS])


@functools.lru_cache(maxsize=None)
def adversarial() -> tuple[str, ...]:
    """Long runs of one character (letters, spaces, newlines, digits, emoji, a letter
    that case-folds to 's'), runs that end otherwise than they began, scripts mixed
    character by character, contractions in every case, and 1 MB lines (real text, and
    one character)."""
    real = " ".join(multilingual_segments()[:3000] + stdlib_segments()[:3000])
    mixed = "".join(a + b for a, b in zip("abcdefghijklmnopqrstuvwxyz" * 40,
                                          "字ﺏש١２ä😀ñ \u0301ſK\u200d\u00a0\t\n۰ক" * 40))
    return (
        "a" * 1_000_000,
        " " * 200_000 + "x",
        "\n" * 100_000,
        " \n" * 50_000 + "end",
        "7" * 300_000,
        "😀" * 100_000,
        "ſ" * 50_000 + "'ſ'S'LL'Re'vE",
        "\u00a0" * 20_000 + "\u3000" * 20_000 + "字" * 20_000,
        mixed,
        "It's 'S 'ſ 'T 'RE 'Ve 'M 'LL 'D 'll've I'M YOU'RE we'Ve they'LL",
        "数字123456和汉字かなカナ mixed ١٢٣ text", "2024年12月1日 v1.2.3 x\x00y", "ab12cd\u0301",
        real[:1_000_000],
    )


def lone_surrogates() -> tuple[str, ...]:
    """Texts as JSON gives them for unpaired surrogate escapes: not UTF-8 at all."""
    return tuple(json.loads(s) for s in ('"\\ud800"', '"a \\udc00 b"', '"\\ud83d x \\ude00"'))
