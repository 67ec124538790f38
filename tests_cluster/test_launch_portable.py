"""Launches the way a cluster would see them, on Beam's job service with an EXTERNAL
worker pool (the Fn API path Flink and Dataflow Runner v2 use): the Flex Template's
entry point with every template parameter, and a job whose output lands on a worker's
own disk. In `make test-cluster`, beside Prism and the shared-nothing runs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import (cli, demo_model_config, isolated_job_service,  # noqa: E402
                      portable_service, read_tree)


@pytest.fixture(scope="module")
def portable_flags(tmp_path_factory):
    with portable_service(tmp_path_factory.mktemp("portable")) as flags:
        yield flags


def _config(tmp_path, output) -> Path:
    return demo_model_config(tmp_path, {"files": [str(REPO / "examples/data/chat.jsonl")],
                                        "fields": [["prompt", "response"]],
                                        "templates": ["{prompt} {response}"]}, output)


def test_the_template_entry_point_with_every_template_parameter_on_the_portable_runner(
        tmp_path, portable_flags):
    """What the Flex Template launcher does, with each parameter of metadata.json given
    as the launcher passes it (`--name=value`), against the portable runner (the Fn API
    path Dataflow Runner v2 uses): submitted without waiting, finalized by the job, the
    bytes of the same build run by `mintdim-beam build`."""
    metadata = json.loads((REPO / "deploy/dataflow/metadata.json").read_text())
    values = {"on_overflow": "truncate", "on_template_unk": "continue",
              "on_lossy": "continue", "on_bad_row": "skip", "max_rejected": "0.01",
              "input_range_bytes": "65536"}
    config = yaml.safe_load((REPO / "examples/unit_build.yaml").read_text())
    for key in ("source", "tokenizer"):
        text = json.dumps(config[key]).replace("examples/", f"{REPO}/examples/")
        config[key] = json.loads(text)
    runs = {}
    for name, extra in (("template", True), ("command", False)):
        config["output"]["dir"] = [str(tmp_path / name / "a"), str(tmp_path / name / "b")]
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config, allow_unicode=True))
        params = {p["name"]: (str(path) if p["name"] == "config" else values[p["name"]])
                  for p in metadata["parameters"]}
        args = [f"--{k}={v}" for k, v in params.items()] + portable_flags
        if extra:
            env = dict(os.environ, FLEX_TEMPLATE_PYTHON_PY_FILE="/template/pipelines/unit_build.py")
            cmd = [sys.executable, "-m", "pipelines.unit_build", *args]
        else:
            env = dict(os.environ)
            cmd = [sys.executable, "-m", "mintdim_beam.cli", "build", *args]
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs = json.loads(proc.stdout)["outputs"]
        if extra:  # the launcher is gone; the job runs on and finalizes its outputs
            assert [o["state"] for o in outputs] == ["submitted", "submitted"]
            import time

            deadline = time.monotonic() + 300
            # Finalize writes the manifest, then releases the claim (the marker goes).
            while not all((tmp_path / name / d / "manifest.json").exists()
                          and not (tmp_path / name / d / "_mintdim_build.json").exists()
                          for d in ("a", "b")):
                assert time.monotonic() < deadline, "the submitted job never finalized"
                time.sleep(0.2)
        runs[name] = {d: read_tree(tmp_path / name / d) for d in ("a", "b")}
    assert runs["template"] == runs["command"]
    assert "rejected_index.jsonl" in runs["template"]["a"]  # on_bad_row reached the build


def test_a_finished_job_whose_output_is_elsewhere_is_a_failed_build(tmp_path):
    """A worker pool with a disk of its own (`isolated_job_service`) and an output there
    declared shared when it is not: the workers cannot read the plan the launcher wrote
    into the output's scratch, so the job stops at its first step instead of building on
    the wrong disk. It ends as the build's failure (exit 1, an OutputWriteError naming the
    directory), its notices written and the marker marked failed, not a
    FileNotFoundError outside the failure handling (Beam's job service logs the worker's
    traceback before; the launcher's own report after it has none)."""
    private = tmp_path / "here"  # the worker pool has a disk of its own there
    private.mkdir()
    with isolated_job_service(private) as portable:
        out = private / "out"
        flags = portable + ["--shared_filesystem"]
        config = _config(tmp_path, str(out))
        proc = cli(tmp_path, "build", config, "--on_template_unk=continue",
                   "--on_overflow=truncate", *flags, timeout=600)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "OutputWriteError" in proc.stderr and str(out) in proc.stderr
        report = proc.stderr.split("[unit-build] failed: OutputWriteError", 1)[1]
        assert "Traceback" not in report and "is not there" in report
        assert "FileNotFoundError" not in proc.stderr
        marker = json.loads((out / "_mintdim_build.json").read_text())
        assert marker["state"] == "failed" and "OutputWriteError" in marker["reason"]
        assert (out / "unit_64/UNIT_BUILD_FAILED.md").exists()
        assert not (out / "manifest.json").exists()
