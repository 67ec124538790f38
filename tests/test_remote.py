"""gs:// and s3:// everywhere, against real protocol peers on loopback: the
gcp-storage-emulator (through gcsfs) and moto's S3 server (through s3fs). Worker
processes inherit the endpoint settings from the environment."""
import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from conftest import (IN_MEMORY, MULTI_PROCESS, OUR_FILES, REPO, free_port, gcs_emulator,
                      reference_manifest, serve_emulator, stop_emulator)
from mintdim_beam.unit_build.launch import launch
from mintdim_beam.core import errors

GOLDEN = REPO / "tests/golden"
CASE = "shared_three_files_duplicates"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def gcs():
    with gcs_emulator() as found:
        yield found


@pytest.fixture(scope="module")
def s3():
    port = free_port()
    proc, saved = serve_emulator([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], port, {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    fsspec.AbstractFileSystem.clear_instance_cache()
    fs = fsspec.filesystem("s3")
    fs.mkdir("mintdim-test")
    yield "s3://mintdim-test", fs
    stop_emulator(proc, saved)


def _case() -> dict:
    return json.loads((GOLDEN / CASE / "case.json").read_text())


def _upload(fs, root: str, prefix: str) -> dict:
    """Upload the case's inputs; returns {local path as written in case.json: URL}."""
    case = _case()
    mapping = {}
    for rel in case["files"] + case["tokenizer"]["files"]:
        url = f"{root}/{prefix}/{rel.replace('../', '')}"
        fs.put_file(str((GOLDEN / CASE / rel).resolve()), url)
        mapping[rel] = url
    return mapping


def _config(mapping: dict, out: str) -> dict:
    case = _case()
    return {"source": {"files": [mapping[f] for f in case["files"]], "fields": case["fields"],
                       "templates": case["templates"]},
            "tokenizer": {"type": case["tokenizer"]["type"],
                          "files": [mapping[f] for f in case["tokenizer"]["files"]]},
            "units": {"sizes": case["sizes"], "build_batch": case["build_batch"]},
            "output": {"dir": out, "samples_per_shard": case["samples_per_shard"]}}


def _download(fs, url: str) -> dict:
    base = fs._strip_protocol(url).rstrip("/")
    return {path[len(base) + 1:]: fs.cat_file(path) for path in fs.find(base)}


def _localized(tree: dict, mapping: dict) -> dict:
    """Recorded paths differ by design (source_file is the path as given); swap them back."""
    out = {}
    for name, data in tree.items():
        if name.endswith((".jsonl", ".json")):
            text = data.decode("utf-8")
            for local, url in mapping.items():
                text = text.replace(json.dumps(url), json.dumps(local))
            data = text.encode("utf-8")
        out[name] = data
    return out


def _expected() -> dict:
    root = GOLDEN / CASE / "expected" / _case()["output"]
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_bucket_build_equals_the_local_build(store, request):
    root, fs = request.getfixturevalue(store)
    mapping = _upload(fs, root, "in")
    out = f"{root}/out-{store}"
    outputs, _ = launch(_config(mapping, out), "abort", _case()["on_overflow"],
                        MULTI_PROCESS + ["--input_range_bytes=4096"])  # 31 ranges
    assert outputs[0]["output_dir"] == out and outputs[0]["total_samples"] > 0
    tree = _localized(_download(fs, out), mapping)
    assert not [k for k in tree if "_mintdim_tmp" in k or k.endswith(".tmp")]
    expected = _expected()
    assert all(name in tree for name in OUR_FILES)  # our additions to mintdim's files
    ours = [k for k in tree if k in OUR_FILES or k.startswith("checksums/")]  # part tables
    assert sorted(k for k in tree if not k.endswith("EMPTY_UNIT.md") and k not in ours) == \
        sorted(k for k in expected if not k.endswith("EMPTY_UNIT.md"))
    for name, data in expected.items():
        if name == "manifest.json":
            manifest = json.loads(tree[name])
            assert [i["file"] for i in manifest["inputs"]] == manifest["source"]["files"]
            assert reference_manifest(manifest) == json.loads(data)
        elif not name.endswith("EMPTY_UNIT.md"):
            assert tree[name] == data, name

    # The same rules hold remotely: a non-empty output is refused before any work.
    with pytest.raises(errors.OutputValidationError):
        launch(_config(mapping, out), "abort", "truncate", IN_MEMORY)


@pytest.mark.slow
def test_missing_object_and_remote_config_through_the_cli(gcs):
    root, fs = gcs
    mapping = _upload(fs, root, "cli")
    config = _config(mapping, f"{root}/out-cli")
    config["on_overflow"] = "truncate"
    config["on_template_unk"] = "abort"
    fs.pipe_file(f"{root}/configs/build.json", json.dumps(config).encode())
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run(["mintdim-beam", "build", f"{root}/configs/build.json",
                           "--runner=FnApiRunner"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["outputs"][0]["total_samples"] > 0
    assert fs.exists(f"{root}/out-cli/manifest.json")

    config["source"]["files"][0] = f"{root}/cli/data/nope.jsonl"
    with pytest.raises(errors.MintDimFileNotFoundError) as info:
        launch(config, "abort", "truncate", IN_MEMORY)
    assert f"Missing file: {root}/cli/data/nope.jsonl" in info.value.english


def test_memory_filesystem_in_process(tmp_path):
    fs = fsspec.filesystem("memory")
    case = _case()
    mapping = {}
    for rel in case["files"] + case["tokenizer"]["files"]:
        url = f"memory://in/{rel.replace('../', '')}"
        fs.pipe_file(url, (GOLDEN / CASE / rel).read_bytes())
        mapping[rel] = url
    outputs, _ = launch(_config(mapping, "memory://out"), "abort", case["on_overflow"], IN_MEMORY)
    tree = _localized(_download(fs, "memory://out"), mapping)
    expected = _expected()
    for name in ("sample_index.jsonl", "duplicate_index.jsonl", "stats.json"):
        assert tree[name] == expected[name]


@pytest.mark.parametrize("store", ["gcs", "s3"])
def test_a_bucket_output_is_claimed_by_one_build(store, request):
    """The ownership marker on object stores: a later claim is refused naming the holder;
    on S3 two claims at the same instant are settled by the store's If-None-Match
    precondition (the GCS emulator ignores ifGenerationMatch, which gcsfs sends and real
    GCS enforces, so only claims one after the other are tested there)."""
    from test_ownership import _race

    from mintdim_beam.core.files.ownership import Claim, release

    root, fs = request.getfixturevalue(store)
    out = f"{root}/claimed-{store}"
    Claim("first-run").take([(out, out)])
    with pytest.raises(errors.OutputValidationError) as info:
        Claim("second-run").take([(out, out)])
    assert info.value.kwargs["problem"] == "held" and "run first-run" in str(info.value)
    release(out)
    Claim("third-run").take([(out, out)])  # released: free again
    if store == "s3":
        _race(lambda i: f"{root}/race-{i}")


def test_memory_paths_with_worker_processes_are_refused_before_any_output(tmp_path):
    """memory:// is one process's filesystem: worker processes would not find the inputs
    (issue 25: a 66-line failure before). A config error, nothing written."""
    fs = fsspec.filesystem("memory")
    case = _case()
    mapping = {}
    for rel in case["files"] + case["tokenizer"]["files"]:
        url = f"memory://refuse/{rel.replace('../', '')}"
        fs.pipe_file(url, (GOLDEN / CASE / rel).read_bytes())
        mapping[rel] = url
    with pytest.raises(errors.PipelineValidationError) as info:
        launch(_config(mapping, "memory://refuse-out"), "abort", case["on_overflow"],
               MULTI_PROCESS)
    assert "memory:// is one process's" in info.value.english
    assert not fs.exists("memory://refuse-out")
