"""Workers that share nothing with the launcher but the object store: Beam's job service
and an EXTERNAL worker pool whose disk is its own (a tmpfs over the launcher's working
folder, in the pool's own mount namespace, with its own TMPDIR), the GCS emulator apart.
With `gs://` inputs, tokenizer and outputs, both pipelines give the bytes of the default
local run of the same config. (Local paths on workers elsewhere are refused before any
output: `tests/test_shared_disk.py`.)"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import gcs_emulator, isolated_job_service, read_tree  # noqa: E402

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def bucket():
    with gcs_emulator() as found:
        yield found


@pytest.fixture(scope="module")
def isolated_flags(bucket, tmp_path_factory):
    """The job service, and a worker pool that cannot see the launcher's folder (the
    emulator's settings, in this process's environment, reach it)."""
    hidden = tmp_path_factory.mktemp("launcher")
    with isolated_job_service(hidden) as flags:
        yield hidden, flags


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


def _run(folder: Path, name: str, config: dict, flags) -> subprocess.CompletedProcess:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "mintdim-beam"), name.split("_")[0], str(path), *flags],
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


def test_both_pipelines_on_workers_that_share_nothing_give_the_local_bytes(bucket,
                                                                          isolated_flags):
    hidden, flags = isolated_flags
    urls = _upload(bucket, "inputs")
    root, _ = bucket
    trees = {}
    for label, extra in (("local", []), ("isolated", flags)):
        configs = _configs(urls, f"{root}/{label}")
        for name, config in configs.items():
            proc = _run(hidden, name, config, extra)
            assert proc.returncode == 0, (label, name, proc.stderr[-3000:])
        trees[label] = {out: _download(bucket, f"{root}/{label}/{out}", hidden / label / out)
                        for out in ("instructions", "chat", "dialogues", "pretrain")}
    for out in trees["local"]:
        local, isolated = trees["local"][out], trees["isolated"][out]
        assert sorted(local) == sorted(isolated) and len(local) > 5, out
        assert [n for n in local if local[n] != isolated[n]] == [], out
