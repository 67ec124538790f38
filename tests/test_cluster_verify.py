"""`verify OUT --runner=...` proves the content on a Beam runner's workers (one task per
summed file and per block of part-table rows) and gives the local verify's verdicts:
OK on a good build, and on a corrupted one the same checksum problems, file by file.
Here on worker processes with a gs:// build; tests_cluster runs it on Prism."""
from __future__ import annotations

import random
import shutil

import pytest

from conftest import MULTI_PROCESS, REPO, gcs_emulator, run_build, sentence, write_jsonl
from mintdim_beam.audit import cluster_verify
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.cli import main


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster_verify")
    rng = random.Random(3)
    data = write_jsonl(work / "in.jsonl", ({"text": sentence(rng, 2, 14)} for _ in range(3000)))
    run_build(work, files=[str(data)], fields=[["text"]], templates=["{text}"],
              tokenizer="sentencepiece",
              tokenizer_files=[str(REPO / "examples/tokenizer/demo.model")],
              sizes=[[16, 32, 64]], build_batch=[200], output=str(work / "out"),
              samples_per_shard=[500], options=["--runner=FnApiRunner",
                                                "--input_range_bytes=20000"])
    return work / "out"


def _corrupt(out, how: str) -> None:
    if how == "shard byte":
        shard = sorted(out.glob("unit_16/shard_*.bin"))[1]
        data = bytearray(shard.read_bytes())
        data[100] ^= 1
        shard.write_bytes(bytes(data))
    elif how == "index part byte":
        path = out / "sample_index.jsonl"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] = ord("#")
        path.write_bytes(bytes(data))
    elif how == "index cut":
        path = out / "sample_index.jsonl"
        path.write_bytes(path.read_bytes()[:-10])
    elif how == "table row":
        table = out / "checksums/sample_index.parts.jsonl"
        lines = table.read_text().splitlines(keepends=True)
        table.write_text("".join(lines[:-1]))
    elif how == "missing shard":
        sorted(out.glob("unit_32/shard_*.bin"))[0].unlink()


def _checksum_problems(result) -> list:
    return sorted((p.file, p.what) for p in result.problems if "content changed" in p.what
                  or "missing" in p.what or "part table" in p.what)


CASES = ["good", "shard byte", "index part byte", "index cut", "table row", "missing shard"]


@pytest.mark.slow
def test_verify_on_worker_processes_gives_the_local_verdicts_on_a_gs_build(build):
    with gcs_emulator() as (root, fs):
        for case in CASES:
            local = build.parent / f"copy-{case.replace(' ', '_')}"
            shutil.copytree(build, local)
            _corrupt(local, case)
            url = f"{root}/{local.name}"
            fs.put(str(local), url, recursive=True)
            want = verify_output(str(local))
            got = verify_output(url, runner_options=cluster_verify_options())
            print(case, "->", got.summary(), [str(p) for p in got.problems])
            assert got.ok == want.ok == (case == "good"), case
            assert got.runner == "FnApiRunner" and got.tasks > 1
            if case == "good":
                assert got.checksummed == want.checksummed
                assert "OK on FnApiRunner" in got.summary()
            else:
                assert _checksum_problems(got) == _checksum_problems(want) != [], case


def cluster_verify_options():
    from mintdim_beam.runtime.options import make_options

    return make_options(MULTI_PROCESS)


def test_the_graph_holds_a_task_per_block_of_part_rows_never_per_part(build, monkeypatch):
    monkeypatch.setattr(cluster_verify, "TABLE_BLOCK", 2)
    import json

    block = json.loads((build / "manifest.json").read_text())["checksums"]
    rows = len((build / "checksums/sample_index.parts.jsonl").read_text().splitlines())
    work, problems = cluster_verify.tasks(block, lambda n: (build / n).exists(),
                                          lambda n: open(build / n, "rb"))
    assert problems == []
    parts = [t for t in work if t[0] == "parts" and t[1] == "sample_index.jsonl"]
    assert [t[3] for t in parts] == list(range(0, rows, 2))
    assert sum(t[4] for t in parts) == rows


def test_the_command_takes_beam_flags_and_refuses_a_mistyped_one(build, capsys):
    assert main(["verify", str(build), "--runner=FnApiRunner"]) == 0
    assert "OK on FnApiRunner" in capsys.readouterr().out
    assert main(["verify", str(build), "--runnr=FnApiRunner"]) == 2
    assert "did you mean --runner" in capsys.readouterr().out
