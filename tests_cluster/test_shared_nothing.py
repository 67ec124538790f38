"""Workers that share nothing with the launcher but the object store: Beam's job service
(deploy/local/job_service.py, on the worker count the job asks for) and two EXTERNAL
worker pools, each on a host of its own (`hosts.py`: a network namespace, hostname,
and a disk of its own over the launcher's folder), the GCS emulator on a fourth. With
`gs://` config, inputs, tokenizer and outputs, both pipelines give the bytes of the
default local run of the same config. (Local paths on workers elsewhere are refused
before any output: `tests/test_shared_disk.py`.)"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import gcs_emulator, read_tree, wait_port  # noqa: E402
from hosts import separate_hosts  # noqa: E402

BIN = Path(sys.executable).parent
JOB_PORT, POOL_PORT = 8099, 50000  # each host has ports of its own


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(bucket, the launcher's folder, the logs' folder, launcher flags): the emulator,
    the job service and two worker pools on hosts of their own, none of which sees the
    launcher's folder (the emulator's settings, in this process's environment, reach
    them)."""
    hidden = tmp_path_factory.mktemp("launcher")
    logs = tmp_path_factory.mktemp("hosts")
    with separate_hosts(["storage", "jobs", "pool1", "pool2"], logs, hidden) as hosts:
        with gcs_emulator(hosts.address["storage"], tuple(hosts.prefix_for("storage"))) as bucket:
            pools = []
            for name in ("pool1", "pool2"):
                pools.append(hosts.run(name, [sys.executable, "-m",
                                              "apache_beam.runners.worker.worker_pool_main",
                                              "--service_port", str(POOL_PORT)],
                                       log=logs / f"{name}.log"))
            jobs = hosts.run("jobs", [sys.executable, str(REPO / "deploy/local/job_service.py"),
                                      "--port", str(JOB_PORT), "--host", hosts.address["jobs"],
                                      "--pool_port", str(POOL_PORT),
                                      "--pools", f"pool1:{POOL_PORT},pool2:{POOL_PORT}"],
                             log=logs / "jobs.log")
            for name, proc in zip(("pool1", "pool2"), pools):
                wait_port(POOL_PORT, proc, host=hosts.address[name])
            wait_port(JOB_PORT, jobs, host=hosts.address["jobs"])
            yield bucket, hidden, logs, [
                "--runner=PortableRunner", f"--job_endpoint={hosts.address['jobs']}:{JOB_PORT}",
                "--environment_type=EXTERNAL", f"--environment_config=localhost:{POOL_PORT}",
                "--direct_num_workers=2"]


def _upload(bucket, prefix: str) -> dict:
    root, fs = bucket
    names = ["data/instructions.jsonl", "data/chat.jsonl", "tokenizer/demo.model",
             "chat/dialogues.jsonl", "chat/tokenizer.json", "chat/tokenizer_config.json"]
    for name in names:
        fs.put_file(str(REPO / "examples" / name), f"{root}/{prefix}/{name}")
    return {name: f"{root}/{prefix}/{name}" for name in names}


def _configs(urls: dict, out: str) -> dict:
    unit = {"source": {"files": [urls["data/instructions.jsonl"], urls["data/chat.jsonl"]],
                       "fields": [["instruction", "input", "output"], ["prompt", "response"]],
                       "templates": ["{instruction}\n\n{input}\n\n{output}", "{prompt} {response}"]},
            "tokenizer": {"type": "sentencepiece", "files": [urls["tokenizer/demo.model"]]},
            "units": {"sizes": [[128, 256, 512], [64, 128, 256]], "build_batch": [256]},
            "output": {"dir": [f"{out}/instructions", f"{out}/chat"], "samples_per_shard": [300]},
            "on_overflow": "truncate", "on_template_unk": "continue"}
    chat = {"source": {"type": "chat", "files": [urls["chat/dialogues.jsonl"]],
                       "format": "messages", "chat_template": "tokenizer", "max_turns": 2},
            "tokenizer": {"type": "hf_json", "files": [urls["chat/tokenizer.json"]],
                          "config": urls["chat/tokenizer_config.json"]},
            "units": {"sizes": [[128, 256, 512, 1024]], "build_batch": [128]},
            "output": {"dir": f"{out}/dialogues", "samples_per_shard": [300]},
            "on_overflow": "truncate", "on_template_unk": "abort"}
    pack = {"source": unit["source"],
            "tokenizer": {"type": "hf_json", "files": [urls["chat/tokenizer.json"]],
                          "config": urls["chat/tokenizer_config.json"]},
            "pack": {"eod": None, "seed": 3, "shard_tokens": 100000},
            "output": {"dir": f"{out}/pretrain"}}
    return {"build_unit": unit, "build_chat": chat, "pack": pack}


def _run(bucket, folder: Path, name: str, config: dict, flags) -> subprocess.CompletedProcess:
    root, fs = bucket
    url = f"{root}/configs/{name}-{len(flags)}.json"
    fs.pipe(url, json.dumps(config).encode())
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "mintdim-beam"), name.split("_")[0], url, *flags],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=900)


def _download(bucket, url: str, into: Path) -> dict:
    _, fs = bucket
    fs.get(url, str(into), recursive=True)
    tree = read_tree(into)
    tree.pop("per_dataset_sequences.json", None)  # names the output's own URL
    if "pack" in json.loads(tree["manifest.json"]).get("pipeline", ""):
        doc = json.loads((into / "manifest.json").read_text())
        doc.pop("build_config")  # the config as given: it names the output's own URL
        tree["manifest.json"] = json.dumps(doc).encode()
    return tree


def test_both_pipelines_on_workers_that_share_nothing_give_the_local_bytes(cluster):
    bucket, hidden, logs, flags = cluster
    urls = _upload(bucket, "inputs")
    root, _ = bucket
    trees = {}
    for label, extra in (("local", []), ("isolated", flags)):
        configs = _configs(urls, f"{root}/{label}")
        for name, config in configs.items():
            proc = _run(bucket, hidden, name, config, extra)
            assert proc.returncode == 0, (label, name, proc.stderr[-3000:])
        trees[label] = {out: _download(bucket, f"{root}/{label}/{out}", hidden / label / out)
                        for out in ("instructions", "chat", "dialogues", "pretrain")}
    for out in trees["local"]:
        local, isolated = trees["local"][out], trees["isolated"][out]
        assert sorted(local) == sorted(isolated) and len(local) > 5, out
        assert [n for n in local if local[n] != isolated[n]] == [], out
    # Each job ran on two workers, one started on each pool's host.
    for name in ("pool1", "pool2"):
        started = (logs / f"{name}.log").read_text().count("Starting worker")
        assert started == 3, (name, started)
