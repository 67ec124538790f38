"""Every block of README.md and docs/*.md runs, so the guide cannot drift from the code.

Each page's blocks run in order in a fresh directory holding a copy of `examples/` (so a
later block can use what an earlier one built, as a reader following the page would):
`bash` blocks with `bash -euo pipefail`, the venv's `mintdim-beam` first on PATH;
`python` blocks as a script of their own; `yaml` blocks are whole configs, checked by
the validators a build runs first (tokenizer loaded, templates compiled, nothing
written); `json` blocks parse. `text` blocks show output or layouts and are not run.
`make TARGET` inside a bash block is checked with `make -n` against the Makefile (it
exists and its recipe expands): `make test` cannot run inside itself, and what `make
demo` runs is run by `tests/test_demo.py`."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
RUN = ("bash", "python", "yaml", "json")
SHOWN = ("text",)
FENCE = re.compile(r"^```(\S*)\s*$")
MAX_README_LINES = 450


def blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, text, first line) of every fenced block of `path`."""
    out, lang, start, body = [], None, 0, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = FENCE.match(line)
        if lang is None and match:
            lang, start, body = match.group(1), number, []
        elif lang is not None and line.strip() == "```":
            out.append((lang, "\n".join(body) + "\n", start))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"{path.name}: a block opened at line {start} is never closed"
    return out


def _sandbox(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(REPO / "examples", work / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return work


def _env(work: Path) -> dict:
    bin_dir = Path(sys.executable).parent
    make_shim = work / ".shims"
    make_shim.mkdir(exist_ok=True)
    shim = make_shim / "make"
    shim.write_text(f'#!/usr/bin/env bash\nexec {shutil.which("make")} -n -s -C {REPO} "$@" '
                    ">/dev/null\n")
    shim.chmod(0o755)
    return dict(os.environ, PATH=f"{make_shim}:{bin_dir}:{os.environ['PATH']}",
                PYTHONPATH=str(REPO), MINTDIM_PROGRESS_INTERVAL="600")


def _check_config(doc: dict, work: Path) -> None:
    """What a build checks before any output: a train-tokenizer config (it has
    `trainer`), a pack config (it has `pack`) or a unit-build config, resolved and
    prepared from `work`."""
    here = os.getcwd()
    os.chdir(work)
    try:
        if "trainer" in doc:
            from mintdim_beam.train_tokenizer.config import resolve_train

            resolve_train(doc)
        elif "pack" in doc:
            from mintdim_beam.core.config.pack_config import prepare_pack, resolve_pack

            prepare_pack(resolve_pack(doc))
        else:
            from mintdim_beam.core.config.prepare import prepare
            from mintdim_beam.core.config.unit_config import resolve_datasets

            for dataset in resolve_datasets(doc):
                prepare(dataset)
    finally:
        os.chdir(here)


def _run_block(lang: str, text: str, work: Path, env: dict, where: str) -> None:
    if lang == "bash":
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
    elif lang == "python":
        proc = subprocess.run([sys.executable, "-c", text], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
    elif lang == "yaml":
        _check_config(yaml.safe_load(text), work)
        return
    else:
        import json

        json.loads(text)
        return
    assert proc.returncode == 0, (f"{where} ({lang}) exited {proc.returncode}\n"
                                  f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_block_of_the_page_runs(page, tmp_path):
    found = blocks(page)
    work = _sandbox(tmp_path)
    env = _env(work)
    for lang, text, line in found:
        if lang in RUN:
            _run_block(lang, text, work, env, f"{page.name}:{line}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_block_says_what_it_is_and_every_link_resolves(page):
    """A block without a language would be skipped silently; a link outside the
    repository is broken in any clone."""
    for lang, _, line in blocks(page):
        assert lang in RUN + SHOWN, f"{page.name}:{line}: block language {lang!r}"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.exists(), f"{page.name}: link {target} does not exist"
        assert REPO in resolved.parents or resolved == REPO, f"{page.name}: {target} leaves the repo"


def test_the_readme_is_a_guide_not_a_reference():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < MAX_README_LINES
    assert "../shared" not in text and all(p.exists() for p in PAGES)
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in text, f"README does not link {page.name}"


def test_the_runner_sees_blocks_and_fails_a_failing_one(tmp_path):
    """The checker itself: a page's blocks are found with their languages and lines,
    and a failing command fails the run."""
    page = tmp_path / "page.md"
    page.write_text("intro\n```bash\ntrue\n```\n\n```text\nnot run\n```\n```python\n"
                    "raise SystemExit(3)\n```\n")
    assert [(lang, line) for lang, _, line in blocks(page)] == [("bash", 2), ("text", 6),
                                                                 ("python", 9)]
    work = _sandbox(tmp_path)
    with pytest.raises(AssertionError, match="exited 3"):
        _run_block("python", "raise SystemExit(3)\n", work, _env(work), "page.md:9")
