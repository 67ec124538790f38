"""The console script and `python -m pipelines.unit_build`: exit codes and messages."""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _config(tmp_path, **changes) -> Path:
    doc = yaml.safe_load((REPO / "examples/unit_build.yaml").read_text())
    doc["output"]["dir"] = [str(tmp_path / "a"), str(tmp_path / "b")]
    doc.update(changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return path


def _run(args, cwd=REPO):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_build_example_config_succeeds(tmp_path):
    proc = _run(["mintdim-beam", "build", str(_config(tmp_path)), "--runner=FnApiRunner"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert [o["total_samples"] for o in result["outputs"]] == [1996, 800]
    assert (tmp_path / "a/manifest.json").exists() and (tmp_path / "b/manifest.json").exists()
    # Beam's import warns that BigQuery's clients are missing: not ours to show a user.
    assert "apitools" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr[:2000]


def test_config_error_exits_2_with_both_languages(tmp_path):
    config = _config(tmp_path, units={"sizes": [[256, 128]], "build_batch": [64]})
    proc = _run([sys.executable, "-m", "pipelines.unit_build", "--config", str(config)])
    assert proc.returncode == 2
    assert "[english] UnitValidationError" in proc.stderr and "[vietnam] UnitValidationError" in proc.stderr
    assert not (tmp_path / "a").exists()


def test_build_failure_exits_1(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hi", "response": "there"}\n{"prompt": "x"}\n')
    config = _config(tmp_path, source={"files": [str(bad)], "fields": [["prompt", "response"]],
                                       "templates": ["{prompt}\n{response}"]},
                     units={"sizes": [[64, 128]], "build_batch": [64]})
    doc = yaml.safe_load(config.read_text())
    doc["output"]["dir"] = str(tmp_path / "c")
    config.write_text(yaml.safe_dump(doc))
    proc = _run(["mintdim-beam", "build", str(config), "--runner=FnApiRunner"])
    assert proc.returncode == 1
    assert "SampleSchemaError" in proc.stderr and "Line: 2" in proc.stderr
    assert (tmp_path / "c/unit_64/UNIT_BUILD_FAILED.md").exists()
    assert not (tmp_path / "c/manifest.json").exists()


def test_missing_config_and_unknown_keys_exit_2(tmp_path):
    proc = _run(["mintdim-beam", "build", str(tmp_path / "nope.yaml")])
    assert proc.returncode == 2 and "MintDimFileNotFoundError" in proc.stderr
    config = _config(tmp_path, extra_key=1)
    proc = _run(["mintdim-beam", "build", str(config)])
    assert proc.returncode == 2 and "extra_key" in proc.stderr


def test_the_command_leaves_its_heap_to_the_os_but_main_does_not(tmp_path):
    """`console_main` (the console script, `python -m mintdim_beam.cli`) freezes the heap
    before the process exits; `main`, which tests and embedders call, never does."""
    probe = ("import gc, sys\n"
             "from mintdim_beam import cli\n"
             "code = getattr(cli, sys.argv[1])(['verify', sys.argv[2]])\n"
             "print(code, gc.get_freeze_count() > 0)\n")
    for entry, frozen in (("main", False), ("console_main", True)):
        proc = _run([sys.executable, "-c", probe, entry, str(tmp_path / "missing")])
        assert proc.stdout.splitlines()[-1].split() == ["2", str(frozen)], proc.stderr


@pytest.mark.parametrize("flag,hint", [
    ("--max_line_byte=100", "did you mean --max_line_bytes?"),
    ("--disk-check=off", "did you mean --disk_check?"),
    ("--runnr=DataflowRunner", "did you mean --runner?"),
    ("--on_overflw=skip", "did you mean --on_overflow?"),
    ("--seed=3", "neither Beam nor mintdim-beam knows")])
def test_a_flag_nobody_knows_is_a_config_error_before_any_output(tmp_path, flag, hint):
    """Beam only warns about a flag it cannot parse: a typo would quietly build with the
    default (or on the laptop instead of Dataflow). Issue 25: refused, exit 2."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({
        "source": {"files": ["in.jsonl"], "fields": [["q"]], "templates": ["{q}"]},
        "tokenizer": {"type": "sentencepiece", "files": [str(REPO / "examples/tokenizer/demo.model")]},
        "units": {"sizes": [[64]], "build_batch": [4]},
        "output": {"dir": str(tmp_path / "out"), "samples_per_shard": [4]}}))
    (tmp_path / "in.jsonl").write_text('{"q": "hello"}\n')
    proc = _run(["mintdim-beam", "build", str(config), flag], cwd=tmp_path)
    assert proc.returncode == 2 and hint in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_bad_progress_interval_is_a_config_error_before_the_claim(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({
        "source": {"files": ["in.jsonl"], "fields": [["q"]], "templates": ["{q}"]},
        "tokenizer": {"type": "sentencepiece", "files": [str(REPO / "examples/tokenizer/demo.model")]},
        "units": {"sizes": [[64]], "build_batch": [4]},
        "output": {"dir": str(tmp_path / "out"), "samples_per_shard": [4]}}))
    (tmp_path / "in.jsonl").write_text('{"q": "hello"}\n')
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               MINTDIM_PROGRESS_INTERVAL="abc")
    proc = subprocess.run(["mintdim-beam", "build", str(config)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "MINTDIM_PROGRESS_INTERVAL" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_version_is_the_package_version():
    from mintdim_beam import __version__

    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "--version"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"mintdim-beam {__version__}"


def _help(command: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "mintdim_beam.cli", command, "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_build_help_names_every_key_the_config_accepts_and_every_flag_of_ours():
    """The validators' own key sets, so a key added there and not here fails."""
    from mintdim_beam.core.config.sources import CHAT_KEYS, CHAT_FORMATS, PREFERENCE_KEYS
    from mintdim_beam.core.tokenizer.special_tokens import BLOCK_KEYS
    from mintdim_beam.runtime.options import MintDimOptions

    text = _help("build")
    keys = (CHAT_KEYS | PREFERENCE_KEYS | set(BLOCK_KEYS) | set(CHAT_FORMATS)
            | {"fields", "templates", "sizes", "build_batch", "dir", "samples_per_shard",
               "on_overflow", "on_template_unk", "on_lossy", "preference", "chat"})
    missing = sorted(k for k in keys if not re.search(rf"\b{k}\b", text))
    assert not missing, missing
    probe = argparse.ArgumentParser()
    MintDimOptions._add_argparse_args(probe)
    flags = {o for action in probe._actions for o in action.option_strings if o != "-h"
             and o != "--help"}
    assert flags and not sorted(f for f in flags if f not in text)
    assert "MINTDIM_PROGRESS_INTERVAL" in text and "docs/config.md" in text


def test_pack_help_names_every_pack_key():
    from mintdim_beam.core.config.pack_config import PACK_KEYS

    text = _help("pack")
    assert all(re.search(rf"\b{k}\b", text) for k in PACK_KEYS + ("source", "tokenizer",
                                                                 "output", "dir"))
    assert "--input_range_bytes" in text and "docs/pack_build.md" in text
