"""`mintdim-beam export` (issue 42): each kind of row (records, preference pairs, packed
rows, pack-build samples) holds exactly what the readers give, in each format (Parquet
read with pyarrow, HDF5 with h5py, MDS decoded by its documented layout; the real
consumers, datasets, TRL and mosaicml-streaming, in tests_interop); the same bytes on
worker processes, small parts and injected retries; verify first, every setting checked
before any output, and an interrupted export leaves its notice and no manifest."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import BUNDLE_RETRYING, IN_MEMORY, MULTI_PROCESS, REPO, cli
from mintdim_beam import PackReader, UnitReader, pipeline
from mintdim_beam.core import errors
from mintdim_beam.export.launch import run_export
from mintdim_beam.read.build import open_build

CHAT = REPO / "examples/chat"
TOKENIZER = dict(files=[str(CHAT / "tokenizer.json")], config=str(CHAT / "tokenizer_config.json"))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_builds")
    opts = ["--runner=FnApiRunner"]
    (pipeline("unit-build").source.jsonl(
        files=[str(REPO / "examples/data/instructions.jsonl")],
        fields=[["instruction", "input", "output"]],
        templates=["### Instruction:\n{instruction}\n{input}\n### Response:\n{output}"])
     .tokenizer.hf_json(**TOKENIZER).units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
     .output.dir(str(root / "units"), samples_per_shard=[300])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=opts))
    (pipeline("unit-build").source.preference(files=[str(CHAT / "preference.jsonl")],
                                              chat_template="tokenizer")
     .tokenizer.hf_json(**TOKENIZER).units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
     .output.dir(str(root / "pairs"), samples_per_shard=[500])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=opts))
    (pipeline("pack-build").source.jsonl(files=[str(REPO / "examples/data/chat.jsonl")],
                                         fields=[["prompt", "response"]],
                                         templates=["{prompt}\n\n{response}"])
     .tokenizer.hf_json(**TOKENIZER).pack(eod=None, seed=0, shard_tokens=30_000)
     .output.dir(str(root / "pack")).run(pipeline_options=opts))
    return root


def _parquet(out) -> dict:
    tables = [pq.read_table(p) for p in sorted((out / "data").glob("*.parquet"))]
    return {name: [v for t in tables for v in t.column(name).to_pylist()]
            for name in tables[0].column_names}


def _records(build_dir):
    """(sample_id -> (ids, lengths)) of every record of a unit-build."""
    build = open_build(str(build_dir))
    n = len(build.segments)
    out = {}
    for unit in build.sizes:
        ids = build.sample_ids(unit)
        got = build.records(unit, np.arange(len(ids)))
        for sid, row in zip(ids.tolist(), got):
            lengths = row[1:1 + n].astype(np.int64)
            out[sid] = (row[1 + n:1 + n + lengths.sum()].astype(np.int64).tolist(), lengths)
    return build, out


def test_records_to_parquet_hold_each_record_its_labels_and_provenance(builds, tmp_path):
    result = run_export(str(builds / "units"), "parquet", str(tmp_path / "out"),
                        pipeline_options=IN_MEMORY)
    assert result["what"] == "records" and result["rows"] == 1996
    cols = _parquet(tmp_path / "out")
    build, records = _records(builds / "units")
    assert cols["sample_id"] == list(range(1996))
    index = [json.loads(line) for line in (builds / "units" / "sample_index.jsonl").read_text()
             .splitlines()]
    output = [s.name for s in build.segments].index("output")
    for i, sid in enumerate(cols["sample_id"]):
        ids, lengths = records[sid]
        assert cols["input_ids"][i] == ids and cols["attention_mask"][i] == [1] * len(ids)
        start = int(lengths[:output].sum())
        want = [-100] * len(ids)
        want[start:start + lengths[output]] = ids[start:start + lengths[output]]
        assert cols["labels"][i] == want
        assert cols["completion_mask"][i] == cols["assistant_masks"][i] == [
            int(x != -100) for x in want]
        assert (cols["source_file"][i], cols["source_line"][i]) == (
            index[sid]["source_file"], index[sid]["source_line"])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["build"]["checksums"] == json.loads(
        (builds / "units" / "manifest.json").read_text())["checksums"]
    assert "data/part-00000-of-00001.parquet" in manifest["checksums"]["files"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert card.startswith("---\nconfigs:") and "1,996 in 1 files" in card
    assert cli(tmp_path, "clean", tmp_path / "out").returncode == 1  # complete: refused


def test_pairs_are_trl_s_prompt_chosen_rejected_ids(builds, tmp_path):
    run_export(str(builds / "pairs"), "parquet", str(tmp_path / "out"), pipeline_options=IN_MEMORY)
    cols = _parquet(tmp_path / "out")
    assert set(cols) == {"prompt_ids", "chosen_ids", "rejected_ids", "sample_id", "source_file",
                         "source_line"}
    reader = UnitReader(str(builds / "pairs"), tokens_per_step=1 << 14, pairs=True)
    seen = 0
    for batch in reader:
        for row, sid in enumerate(batch.sample_ids.tolist()):
            if sid < 0:
                continue
            i = cols["sample_id"].index(sid)
            prompt, chosen = cols["prompt_ids"][i], cols["chosen_ids"][i]
            n = int(batch.chosen_lengths[row])
            assert prompt + chosen == batch.chosen_input_ids[row, :n].tolist()
            assert cols["rejected_ids"][i] == batch.rejected_input_ids[
                row, len(prompt):int(batch.rejected_lengths[row])].tolist()
            seen += 1
    assert seen == 300


def test_packed_rows_are_the_readers_rows(builds, tmp_path):
    run_export(str(builds / "units"), "parquet", str(tmp_path / "out"), pack_length=1024,
               seed=3, pipeline_options=IN_MEMORY, part_rows=50)
    cols = _parquet(tmp_path / "out")
    reader = UnitReader(str(builds / "units"), tokens_per_step=1024, pack_length=1024, seed=3)
    rows = reader.epoch_items(0)
    assert len(cols["input_ids"]) == rows and len(list((tmp_path / "out/data").iterdir())) > 1
    want = reader.rows_at(0, 0, rows)
    assert np.array_equal(np.asarray(cols["input_ids"]), want["input_ids"])
    assert np.array_equal(np.asarray(cols["labels"]), want["labels"])
    for i in range(rows):
        lens = [x for x in want["seq_lens"][i].tolist() if x]
        tail = 1024 - sum(lens)
        assert cols["seq_lengths"][i] == lens + ([tail] if tail else [])
        assert cols["position_ids"][i][:lens[0]] == list(range(lens[0]))


def test_pack_samples_are_the_pack_reader_s_in_every_format(builds, tmp_path):
    reader = PackReader(str(builds / "pack"), 128, seed=5)
    tokens, _ = reader.samples_at(reader.sample_order())
    for fmt in ("parquet", "hdf5", "mds"):
        run_export(str(builds / "pack"), fmt, str(tmp_path / fmt), seq_len=128, seed=5,
                   pipeline_options=IN_MEMORY, part_rows=300)
    cols = _parquet(tmp_path / "parquet")
    assert np.array_equal(np.asarray(cols["tokens"]), tokens)
    assert np.array_equal(np.asarray(cols["input_ids"]), tokens[:, :128])
    assert all(sum(s) == 128 for s in cols["seq_lengths"])
    chunks = sorted((tmp_path / "hdf5").glob("chunk_*.h5"))
    assert len(chunks) == 3
    stacked = np.concatenate([h5py.File(c)["sequence"][:] for c in chunks])
    assert np.array_equal(stacked, tokens)
    index = json.loads((tmp_path / "mds" / "index.json").read_text())
    assert [s["samples"] for s in index["shards"]] == [300, 300, reader.samples - 600]
    first = _mds_sample(tmp_path / "mds" / "shard.00000.mds", 0, index["shards"][0])
    assert np.array_equal(first["tokens"], tokens[0])


def _mds_sample(path, i: int, shard: dict) -> dict:
    """Sample i of an MDS shard, decoded by the layout `export/mds_out.py` documents."""
    data = path.read_bytes()
    n = int(np.frombuffer(data[:4], np.uint32)[0])
    offsets = np.frombuffer(data[4:4 + 4 * (n + 1)], np.uint32)
    sample = data[offsets[i]:offsets[i + 1]]
    names, encodings = shard["column_names"], shard["column_encodings"]
    variable = [e != "int64" for e in encodings]
    sizes = list(np.frombuffer(sample[:4 * sum(variable)], np.uint32))
    at, out = 4 * sum(variable), {}
    for name, encoding, var in zip(names, encodings, variable):
        size = int(sizes.pop(0)) if var else 8
        raw = sample[at:at + size]
        at += size
        if encoding == "int64":
            out[name] = int(np.frombuffer(raw, np.int64)[0])
        elif encoding.startswith("ndarray:"):
            ndim, code = raw[0] >> 2, raw[0] & 3
            shape_dtype = [np.uint8, np.uint16, np.uint32, np.uint64][code]
            width = np.dtype(shape_dtype).itemsize
            shape = np.frombuffer(raw[1:1 + ndim * width], shape_dtype)
            out[name] = np.frombuffer(raw[1 + ndim * width:], encoding.split(":")[1]).reshape(shape)
        else:
            out[name] = raw.decode()
    return out


@pytest.mark.parametrize("options", [MULTI_PROCESS, BUNDLE_RETRYING], ids=["workers", "retries"])
def test_the_same_bytes_on_worker_processes_and_retries(builds, tmp_path, options, monkeypatch):
    run_export(str(builds / "units"), "mds", str(tmp_path / "a"), pipeline_options=IN_MEMORY,
               part_bytes=200_000)
    if options is BUNDLE_RETRYING:
        markers = tmp_path / "markers"
        markers.mkdir()
        monkeypatch.setenv("MINTDIM_FAULTS", f"write@{markers}")
    run_export(str(builds / "units"), "mds", str(tmp_path / "b"), pipeline_options=options,
               part_bytes=200_000)
    a = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    b = {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}
    assert a == b and len([n for n in a if n.endswith(".mds")]) > 1


@pytest.mark.parametrize("args, rule", [
    (["--format", "csv"], "format"),
    (["--format", "parquet", "--seq-len", "128"], "seq_len"),
    (["--format", "parquet", "--pack-length", "0"], "positive"),
])
def test_settings_it_cannot_honour_exit_2_with_nothing_written(builds, tmp_path, args, rule):
    done = cli(tmp_path, "export", builds / "units", "--out", tmp_path / "out", *args)
    assert done.returncode == 2, done.stderr
    assert "[english] ExportValidationError" in done.stderr and "[vietnam]" in done.stderr
    assert not (tmp_path / "out").exists()
    done = cli(tmp_path, "export", builds / "pack", "--out", tmp_path / "out", "--format",
               "parquet", "--pack-length", "64")
    assert done.returncode == 2 and "pack-length is a unit-build setting" in done.stderr


def test_a_build_that_does_not_verify_is_not_exported(builds, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(builds / "units", broken)
    shard = sorted(broken.glob("unit_*/shard_*.bin"))[0]
    data = bytearray(shard.read_bytes())
    data[-3] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(errors.ExportInputError) as caught:
        run_export(str(broken), "parquet", str(tmp_path / "out"), pipeline_options=IN_MEMORY)
    assert shard.name in "\n".join(caught.value.kwargs["problems"])
    assert not (tmp_path / "out").exists()


def test_an_export_that_fails_leaves_its_notice_and_no_manifest(builds, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"write@{markers}")
    with pytest.raises(Exception):
        run_export(str(builds / "units"), "parquet", str(tmp_path / "out"),
                   pipeline_options=IN_MEMORY)
    out = tmp_path / "out"
    assert (out / "EXPORT_FAILED.md").read_text().startswith("# export failed")
    assert not (out / "manifest.json").exists()
    assert cli(tmp_path, "clean", out).returncode == 0
