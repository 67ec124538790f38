"""The three pipelines on Beam's Prism runner (a Go program, built by `make test-cluster`
from the Go module proxy at the venv's Beam version) give the bytes of the default local
run: a unit-build of two templated datasets, a dialogue build, a pack-build and a
trained tokenizer (the same word table and tokenizer).

Prism runs its workers in loopback mode, on this machine, so local paths hold
(`runtime.options.workers_share_disk`). Not part of `make test`: it needs the binary."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import read_tree  # noqa: E402

PRISM = os.environ.get("MINTDIM_PRISM", str(REPO / ".tools/bin/prism"))
BIN = Path(sys.executable).parent
BUILDS = [("build", "examples/unit_build.yaml", ["instruction_units", "chat_units"]),
          ("build", "examples/chat/chat_build.yaml", ["chat_dialogues"]),
          ("pack", "examples/pack/pack_build.yaml", ["pretrain"])]


def _run(work: Path, command: str, config: str, flags=()) -> None:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(BIN / "mintdim-beam"), command, config, *flags], cwd=work,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _tree(out: Path) -> dict:
    tree = read_tree(out)
    tree.pop("per_dataset_sequences.json", None)  # names the absolute output path
    return tree


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("local")
    shutil.copytree(REPO / "examples", work / "examples")
    for command, config, _ in BUILDS:
        _run(work, command, config)
    return work


@pytest.mark.parametrize("command, config, outputs", BUILDS, ids=[b[1] for b in BUILDS])
def test_prism_gives_the_bytes_of_the_local_run(local_run, tmp_path, command, config, outputs):
    assert Path(PRISM).is_file(), f"no Prism binary at {PRISM}: `make test-cluster` builds it"
    work = tmp_path / "prism"
    work.mkdir()
    shutil.copytree(REPO / "examples", work / "examples")
    _run(work, command, config, ["--runner=PrismRunner", f"--prism_location={PRISM}"])
    for name in outputs:
        got, want = _tree(work / "artifacts" / name), _tree(local_run / "artifacts" / name)
        assert sorted(got) == sorted(want)
        assert [n for n in got if got[n] != want[n]] == []


def test_prism_counts_the_word_table_and_trains_the_local_tokenizer(tmp_path):
    import json

    assert Path(PRISM).is_file(), f"no Prism binary at {PRISM}: `make test-cluster` builds it"
    outs = {}
    for name, flags in (("local", []), ("prism", ["--runner=PrismRunner",
                                                  f"--prism_location={PRISM}",
                                                  "--input_range_bytes=65536"])):
        work = tmp_path / name
        work.mkdir()
        shutil.copytree(REPO / "examples", work / "examples")
        _run(work, "train", "examples/train_tokenizer.yaml", flags)
        outs[name] = work / "artifacts" / "tokenizer"
    manifests = {k: json.loads((v / "manifest.json").read_text()) for k, v in outs.items()}
    for key in ("word_table", "words", "rows", "checksums", "tokenizer_card"):
        assert manifests["prism"][key] == manifests["local"][key], key
    for name in ("tokenizer.json", "tokenizer_config.json", "report_text.jsonl"):
        assert (outs["prism"] / name).read_bytes() == (outs["local"] / name).read_bytes()


def _verify(work: Path, out: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "mintdim-beam"), "verify", out, "--runner=PrismRunner",
                           f"--prism_location={PRISM}"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)


def test_verify_on_prism_gives_the_local_verdicts_on_a_gs_build(local_run, tmp_path):
    """The content proof of `verify --runner` on Prism's workers, reading a gs:// build
    from the GCS emulator: OK on the good copy, the changed shard named on the other."""
    from conftest import gcs_emulator

    good = local_run / "artifacts" / "instruction_units"
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    shard = sorted(bad.glob("unit_*/shard_*.bin"))[0]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(bytes(data))
    with gcs_emulator() as (root, fs):
        fs.put(str(good), f"{root}/good", recursive=True)
        fs.put(str(bad), f"{root}/bad", recursive=True)
        ok, failed = _verify(tmp_path, f"{root}/good"), _verify(tmp_path, f"{root}/bad")
    assert ok.returncode == 0, ok.stdout + ok.stderr[-3000:]
    assert "OK on PrismRunner" in ok.stdout
    assert failed.returncode == 1, failed.stdout + failed.stderr[-3000:]
    assert f"{shard.relative_to(bad)}: content changed: sha256" in failed.stdout


def test_prism_runs_the_public_transforms_to_the_file_builds_bytes(tmp_path):
    """Rows through TokenizeRecords + WriteUnitBuild / WritePackBuild in a pipeline of
    the user's, on Prism, give the bytes of the file builds of the same rows."""
    assert Path(PRISM).is_file(), f"no Prism binary at {PRISM}: `make test-cluster` builds it"
    sys.path.insert(0, str(REPO / "tests"))
    from records_corpus import (build_from_files, build_from_rows, pack_from_files,
                                pack_from_rows, same_build, same_pack, write_corpus)

    prism = ["--runner=PrismRunner", f"--prism_location={PRISM}"]
    write_corpus(tmp_path)
    want = build_from_files(tmp_path, "from_files", ["--runner=FnApiRunner"])
    got, = build_from_rows(tmp_path, "rows", prism)
    assert same_build(tmp_path, "rows", "from_files") == []
    assert {**got, "output_dir": ""} == {**want, "output_dir": ""}
    want = pack_from_files(tmp_path, "pack_from_files", ["--runner=FnApiRunner"])
    got = pack_from_rows(tmp_path, "pack_rows", prism)
    assert same_pack(tmp_path, "pack_rows", "pack_from_files") == []
    assert {**got, "output_dir": ""} == {**want, "output_dir": ""}
