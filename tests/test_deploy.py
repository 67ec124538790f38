"""Deployment files agree with the entry point: Flex Template parameters, the launch
path that does not wait, and the shared portable flags."""
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from mintdim_beam.cli import accepted_options

REPO = Path(__file__).resolve().parents[1]


def test_every_template_parameter_is_an_entry_point_option_and_back():
    metadata = json.loads((REPO / "deploy/dataflow/metadata.json").read_text())
    params = {p["name"]: p for p in metadata["parameters"]}
    accepted = accepted_options()
    assert set(params) <= accepted, set(params) - accepted
    # The entry point's one required input is the config; the template must require it.
    assert params["config"]["isOptional"] is False
    assert all(p["isOptional"] for name, p in params.items() if name != "config")


def test_dockerfile_runs_the_entry_point_the_test_exercises():
    dockerfile = (REPO / "deploy/dataflow/Dockerfile").read_text()
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/template/pipelines/unit_build.py" in dockerfile
    assert (REPO / "pipelines/unit_build.py").is_file()
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in dockerfile


def test_flink_submit_uses_the_same_portable_flags_as_the_local_setup():
    submit = (REPO / "deploy/flink/submit.sh").read_text()
    local = (REPO / "deploy/local/portable.sh").read_text()
    assert "deploy/portable-flags.sh" in submit and "deploy/portable-flags.sh" in local
    flags = subprocess.run([str(REPO / "deploy/portable-flags.sh"), "host:1", "host:2"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert flags == ["--runner=PortableRunner", "--job_endpoint=host:1",
                     "--environment_type=EXTERNAL", "--environment_config=host:2"]
    compose = yaml.safe_load((REPO / "deploy/flink/docker-compose.yml").read_text())
    assert compose["services"]["python-worker-pool"]["network_mode"] == "service:taskmanager"


def test_template_launch_submits_without_waiting_and_the_job_finalizes_itself(tmp_path):
    config = yaml.safe_load((REPO / "examples/unit_build.yaml").read_text())
    config["output"]["dir"] = [str(tmp_path / "a"), str(tmp_path / "b")]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    env = dict(os.environ, FLEX_TEMPLATE_PYTHON_PY_FILE="/template/pipelines/unit_build.py")
    proc = subprocess.run([sys.executable, "-m", "pipelines.unit_build", f"--config={path}",
                           "--runner=FnApiRunner", "--input_range_bytes=65536"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert [o["state"] for o in result["outputs"]] == ["submitted", "submitted"]
    # Finalization is a pipeline step: the manifest is there without the launcher's help.
    assert (tmp_path / "a/manifest.json").exists() and (tmp_path / "b/manifest.json").exists()
