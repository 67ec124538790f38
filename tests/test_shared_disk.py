"""Which runs share this machine's disk, and what a run whose workers do not is refused:
local paths are a config error before any output (issue 27), naming each path and the
two ways out (a URL, or --shared_filesystem); `plan` returns its histograms through a
URL there; a job whose output is not where the launcher looks ends as a failed build
with its notices, never a bare FileNotFoundError."""
import json
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from conftest import REPO, cli, demo_model_config
from mintdim_beam.core import errors
from mintdim_beam.runtime.options import workers_share_disk

REMOTE = ["--runner=PortableRunner", "--job_endpoint=10.254.0.9:8099",
          "--environment_type=EXTERNAL", "--environment_config=10.254.0.9:50000"]


@pytest.mark.parametrize("flags, shared", [
    ([], True),
    (["--runner=FnApiRunner", "--direct_running_mode=multi_processing",
      "--direct_num_workers=2"], True),
    (["--runner=BundleBasedDirectRunner"], True),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=EXTERNAL",
      "--environment_config=localhost:50000"], True),
    (["--runner=PortableRunner", "--job_endpoint=127.0.0.1:8099", "--environment_type=PROCESS",
      "--environment_config={}"], True),
    (["--runner=PrismRunner"], True),
    (["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=LOOPBACK"], True),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], False),  # DOCKER workers
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=EXTERNAL",
      "--environment_config=10.254.0.9:50000"], False),
    (REMOTE, False),
    (["--runner=FlinkRunner", "--flink_master=flink-jobmanager:8081",
      "--environment_type=LOOPBACK"], False),
    (["--runner=DataflowRunner"], False),
    (["--runner=DataflowRunner", "--shared_filesystem"], True),
    (REMOTE + ["--shared_filesystem"], True),
])
def test_which_runs_share_this_machines_disk(flags, shared):
    assert workers_share_disk(PipelineOptions(flags)) is shared


def _config(tmp_path, output) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data/rows.jsonl").write_text('{"text": "hello"}\n')
    return demo_model_config(tmp_path, {"files": ["data/rows.jsonl"], "fields": [["text"]],
                                        "templates": ["{text}"]}, output)


def test_local_paths_on_workers_elsewhere_are_a_config_error_before_any_output(tmp_path):
    """The probe's `SourceChangedError ... no longer exists` for a relative input on a
    worker that never had it: now exit 2 before the job is submitted (the job endpoint
    here answers nothing, so nothing may try it), every local path named."""
    proc = cli(tmp_path, "build", _config(tmp_path, "out"), *REMOTE)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "PipelineValidationError" in proc.stderr
    for what, path in (("input", "data/rows.jsonl"), ("output", "out"),
                       ("tokenizer", str(REPO / "examples/tokenizer/demo.model"))):
        assert f"for {what} '{path}'" in proc.stderr
    assert "--shared_filesystem" in proc.stderr and "gs://" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_pack_build_and_plan_keep_the_same_rule(tmp_path):
    pack = {"source": {"files": ["data/rows.jsonl"], "fields": [["text"]], "templates": ["{text}"]},
            "tokenizer": {"type": "hf_json", "files": [str(REPO / "examples/chat/tokenizer.json")],
                          "config": str(REPO / "examples/chat/tokenizer_config.json")},
            "pack": {"eod": None}, "output": {"dir": "pack_out"}}
    _config(tmp_path, "out")
    (tmp_path / "pack.json").write_text(json.dumps(pack))
    proc = cli(tmp_path, "pack", tmp_path / "pack.json", *REMOTE)
    assert proc.returncode == 2 and "for input 'data/rows.jsonl'" in proc.stderr
    assert not (tmp_path / "pack_out").exists()
    proc = cli(tmp_path, "plan", _config(tmp_path, "out"), "--units", "2", *REMOTE)
    assert proc.returncode == 2 and "for input 'data/rows.jsonl'" in proc.stderr


def test_plan_on_workers_elsewhere_needs_a_temp_location_url():
    """The histograms come back through storage: a local temporary file would be
    written on a worker's own disk (the probe's FileNotFoundError in 'Save/Apply'). With
    every path a URL and no --temp_location URL, it is a config error before the job
    is submitted (the endpoint here answers nothing)."""
    from conftest import gcs_emulator
    from mintdim_beam.audit.plan import token_histograms

    with gcs_emulator() as (root, fs):
        fs.pipe(f"{root}/plan/rows.jsonl", b'{"text": "hello"}\n')
        fs.put_file(str(REPO / "examples/tokenizer/demo.model"), f"{root}/plan/demo.model")
        raw = {"source": {"files": [f"{root}/plan/rows.jsonl"], "fields": [["text"]],
                          "templates": ["{text}"]},
               "tokenizer": {"type": "sentencepiece", "files": [f"{root}/plan/demo.model"]},
               "units": {"sizes": [[64]], "build_batch": [8]},
               "output": {"dir": f"{root}/plan/out", "samples_per_shard": [10]}}
        for extra in ([], ["--temp_location=/tmp/not-a-url"]):
            with pytest.raises(errors.PipelineValidationError) as info:
                token_histograms(raw, REMOTE + extra, policies=("continue", "truncate"))
            assert "--temp_location=gs://" in str(info.value)
