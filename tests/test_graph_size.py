"""The job graph stays small and planning stays cheap at 100,000 input files.

The serialized pipeline (what Dataflow caps at 10 MB) is built, not run, for a synthetic
plan of 100,000 files and 1 TB (the launcher's own `on_storage` and graph functions);
its size must not grow with the files. Planning 100,000 `gs://` objects found by a glob
makes listing requests only (counted at the emulator's proxy), never one per object;
the files are planned by the workers that take them (`source.FileToPlan`), with the
same ranges, bytes and manifest entries as when the launcher probes them.
"""
from __future__ import annotations

import bz2
import dataclasses
import json
import time
import tracemalloc
from pathlib import Path

import pytest

from conftest import (IN_MEMORY, MULTI_PROCESS, counted_store, populate_gcs, read_tree,
                      write_jsonl)
from mintdim_beam import errors
from mintdim_beam.core.errors.failures import WorkerFailure, recover

FILES = 100_000
TERABYTE = 1 << 40
LIMIT = 2 << 20  # the bound; Dataflow refuses 10 MB


def _raw(files, tok: Path, out: str) -> dict:
    return {"source": {"files": files, "fields": [["q", "a"]], "templates": ["{q}\n{a}"]},
            "tokenizer": {"type": "hf_json", "files": [str(tok)]},
            "units": {"sizes": [[16, 64]], "build_batch": [8]},
            "output": {"dir": out, "samples_per_shard": [4]}}


def _synthetic_files(count: int):
    from mintdim_beam.core.config.unit_config import InputFile

    return tuple(InputFile(i, f"gs://corpus/part-{i:06d}.jsonl",
                           f"gs://corpus/part-{i:06d}.jsonl", "gs://corpus/*.jsonl")
                 for i in range(count))


def _synthetic_ranges(files, total: int):
    from mintdim_beam.core.inputs.source import ByteRange

    size = total // len(files)
    return [ByteRange(0, i, f.path, 0, 0, size, given=f.given,
                      identity=(("size", size), ("generation", 1_700_000_000_000_000 + i),
                                ("ends", f"{i:024x}")))
            for i, f in enumerate(files)]


def _graph_bytes(expand) -> int:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    # Worker processes: the graph with every spreading step, as a cluster runs it.
    p = beam.Pipeline(options=PipelineOptions(MULTI_PROCESS))
    expand(p)
    return len(p.to_runner_api().SerializeToString())


def _unit_graph(tmp_path, tokenizers_dir, count: int) -> int:
    from mintdim_beam.core.config.prepare import prepare
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.unit_build.graph import expand_unit_build
    from mintdim_beam.unit_build.launch import on_storage
    from mintdim_beam.unit_build.units import fixed_chooser

    one = write_jsonl(tmp_path / "one.jsonl", [{"q": "a", "a": "b"}])
    (dataset,) = resolve_datasets(_raw([str(one)], tokenizers_dir / "hf_bpe.json",
                                       str(tmp_path / f"out{count}")))
    files = _synthetic_files(count)
    dataset = dataclasses.replace(dataset, files=files, run_id=f"run{count}")
    plans = {0: prepare(dataset)}
    ranges = _synthetic_ranges(files, TERABYTE)
    return _graph_bytes(lambda p: expand_unit_build(p, *on_storage(plans, ranges),
                                                    {0: fixed_chooser("abort")}))


def _pack_graph(tmp_path, tokenizers_dir, count: int) -> int:
    from mintdim_beam.core.config.pack_config import prepare_pack, resolve_pack, with_run
    from mintdim_beam.pack_build.graph import expand_pack_build
    from mintdim_beam.pack_build.launch import on_storage

    one = write_jsonl(tmp_path / "one.jsonl", [{"q": "a", "a": "b"}])
    raw = _raw([str(one)], tokenizers_dir / "hf_bpe.json", str(tmp_path / f"pack{count}"))
    raw = {"source": raw["source"], "tokenizer": raw["tokenizer"],
           "pack": {"eod": "[PAD]", "seed": 0}, "output": {"dir": raw["output"]["dir"]}}
    config = with_run(resolve_pack(raw), f"run{count}")
    files = _synthetic_files(count)
    config = dataclasses.replace(config, files=files, fields=config.fields * count,
                                 templates=config.templates * count)
    plan = dataclasses.replace(prepare_pack(dataclasses.replace(
        config, files=config.files[:1], fields=config.fields[:1],
        templates=config.templates[:1])), config=config)
    ranges = _synthetic_ranges(files, TERABYTE)
    return _graph_bytes(lambda p: expand_pack_build(p, *on_storage(plan, ranges)))


@pytest.mark.parametrize("graph", [_unit_graph, _pack_graph], ids=["unit-build", "pack-build"])
def test_the_graph_of_100k_files_and_a_terabyte_stays_small(tmp_path, tokenizers_dir, graph):
    small = graph(tmp_path, tokenizers_dir, 100)
    large = graph(tmp_path, tokenizers_dir, FILES)
    print(f"{graph.__name__}: {small} bytes at 100 files, {large} bytes at {FILES} files "
          f"and 1 TB ({large / LIMIT:.1%} of 2 MB)")
    assert large < LIMIT
    # One reference per chunk of 1,024 ranges is all that grows: about 100 bytes each.
    assert large - small < 64 << 10


def test_the_plan_on_storage_reads_back_as_planned(tmp_path):
    import pickle

    from mintdim_beam.core.inputs import planned

    files = _synthetic_files(3000)
    ranges = _synthetic_ranges(files, TERABYTE)
    scratch = str(tmp_path / "_mintdim_tmp" / "run")  # as storage.run_scratch names it
    chunks = planned.store_ranges(ranges, lambda ds: scratch)
    assert [len(c) for c in chunks] == [1024, 1024, 952]
    assert all(len(pickle.dumps(c)) < 400 for c in chunks)  # a reference, not the ranges
    planned.forget_loaded()  # as a worker process that never saw them
    again = [r for c in pickle.loads(pickle.dumps(chunks)) for r in c]
    assert again == ranges
    stored = planned.store(files, scratch, "files.pkl")
    planned.forget_loaded()
    assert len(stored) == 3000 and stored[2999] == files[2999] and tuple(stored) == files
    (Path(scratch) / planned.PLAN_DIR / "files.pkl").write_bytes(pickle.dumps(()))
    planned.forget_loaded()
    with pytest.raises(WorkerFailure) as info:  # carried across the runner as its class
        stored[0]
    error = recover(info.value)
    assert type(error) is errors.OutputWriteError and error.kwargs["directory"] == str(tmp_path)
    assert "is not the one this run wrote" in error.kwargs["reason"]
    (Path(scratch) / planned.PLAN_DIR / "files.pkl").unlink()
    with pytest.raises(WorkerFailure) as info:
        stored[0]
    assert "files.pkl is not there" in recover(info.value).kwargs["reason"]


def test_planning_100k_gcs_objects_makes_listing_requests_only(tmp_path, tokenizers_dir):
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.core.inputs.source import FileToPlan, plan_ranges

    populate_gcs(tmp_path, ((f"corpus/part-{i:06d}.jsonl",
                             b'{"q": "q%d", "a": "a"}\n' % i * (1 + i % 7)) for i in range(FILES)))
    with counted_store("gcs", data_dir=tmp_path) as (root, _, proxy):
        raw = _raw([f"{root}/corpus/*.jsonl"], tokenizers_dir / "hf_bpe.json", f"{root}/out")

        def plan():
            (dataset,) = resolve_datasets(raw)
            return plan_ranges([dataset], defer=True)

        mark = proxy.mark()
        began, cpu = time.perf_counter(), time.process_time()
        ranges = plan()
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        exchanges = proxy.since(mark)
        tracemalloc.start()  # again, traced (tracing slows it): the planning's own memory
        del ranges
        ranges = plan()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    media = [e for e in exchanges if "alt=media" in e.query or "/download/" in e.path]
    print(f"planned {len(ranges)} gs:// objects in {wall:.1f} s wall, {cpu:.1f} s CPU, "
          f"{len(exchanges)} requests, peak traced memory {peak / 1e6:.0f} MB")
    assert len(ranges) == FILES and all(isinstance(r, FileToPlan) for r in ranges)
    assert [r.given for r in ranges[:2]] == [f"{root}/corpus/part-000000.jsonl",
                                             f"{root}/corpus/part-000001.jsonl"]
    assert ranges[7].end == len(b'{"q": "q7", "a": "a"}\n')
    assert media == []  # no object's content was read
    assert len(exchanges) <= FILES // 1000 + 20  # listing pages, not a request per object


def _mixed_inputs(folder: Path) -> dict:
    """name -> bytes: every format a listed remote file can be, several ranges of one."""
    import gzip
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"q": f"question {i} " + "word " * (i % 9), "a": f"answer {i}"} for i in range(60)]
    lines = lambda part: "".join(json.dumps(r) + "\n" for r in part).encode()  # noqa: E731
    table = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows[30:45]), table, row_group_size=4)
    return {"a.jsonl": lines(rows[:20]),
            "b.jsonl.gz": gzip.compress(lines(rows[20:25]), mtime=0),
            "c.json": json.dumps(rows[25:30]).encode(),
            "d.parquet": table.getvalue(),
            "e.jsonl": b"\xef\xbb\xbf" + lines(rows[45:60])}


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in-process", "workers"])
def test_files_planned_by_workers_build_the_bytes_the_launcher_plans(tmp_path, tokenizers_dir,
                                                                     options):
    from mintdim_beam.unit_build.launch import run_build

    inputs = _mixed_inputs(tmp_path)
    for name, data in inputs.items():
        (tmp_path / "local").mkdir(exist_ok=True)
        (tmp_path / "local" / name).write_bytes(data)
    tok = tokenizers_dir / "hf_bpe.json"
    flags = [*options, "--input_range_bytes=300"]  # a.jsonl and e.jsonl in several ranges
    with counted_store("gcs") as (root, fs, _):
        fs.pipe({f"{root}/listed/{name}": data for name, data in inputs.items()})
        out = f"{root}/out"
        run_build(_raw([f"{root}/listed"], tok, out), on_template_unk="abort",
                  on_overflow="truncate", pipeline_options=flags)
        remote = tmp_path / "remote"
        fs.get(f"{out}/", str(remote), recursive=True)
    local = [str(tmp_path / "local" / name) for name in sorted(inputs)]
    run_build(_raw(local, tok, str(tmp_path / "out")), on_template_unk="abort",
              on_overflow="truncate", pipeline_options=flags)
    prefix = (f"{root}/listed/".encode(), f"{tmp_path / 'local'}/".encode())
    mine = {rel: data if rel.endswith(".bin") else data.replace(*prefix)
            for rel, data in read_tree(remote).items()}
    assert mine == read_tree(tmp_path / "out") and "manifest.json" in mine
    how = lambda entry: {k: entry.get(k) for k in ("compression", "format", "bom")}  # noqa: E731
    remote_inputs = json.loads((remote / "manifest.json").read_text())["inputs"]
    local_inputs = json.loads((tmp_path / "out" / "manifest.json").read_text())["inputs"]
    assert [how(e) for e in remote_inputs] == [how(e) for e in local_inputs] == [
        {"compression": None, "format": None, "bom": None},
        {"compression": "gzip", "format": None, "bom": None},
        {"compression": None, "format": "json_array", "bom": None},
        {"compression": None, "format": "parquet", "bom": None},
        {"compression": None, "format": None, "bom": True}]
    assert [e["file"] for e in remote_inputs] == [f"{root}/listed/{n}" for n in sorted(inputs)]
    assert all("generation" in e and "ends" in e for e in remote_inputs)
    assert not list(remote.rglob("*.pkl"))  # the planned files went with the scratch


def test_a_listed_file_of_another_format_fails_the_build_as_its_class(tmp_path, tokenizers_dir):
    from mintdim_beam.unit_build.launch import run_build

    with counted_store("gcs") as (root, fs, _):
        fs.pipe({f"{root}/in/a.jsonl": b'{"q": "x", "a": "y"}\n',
                 f"{root}/in/b.jsonl": bz2.compress(b'{"q": "x", "a": "y"}\n')})
        out = f"{root}/out"
        with pytest.raises(errors.SourceFormatError) as info:
            run_build(_raw([f"{root}/in"], tokenizers_dir / "hf_bpe.json", out),
                      on_template_unk="abort", on_overflow="truncate",
                      pipeline_options=IN_MEMORY)
        assert info.value.kwargs["file"] == f"{root}/in/b.jsonl"
        assert "bzip2" in info.value.kwargs["found"]
        fs.invalidate_cache()
        assert not fs.exists(f"{out}/manifest.json")  # nothing that looks complete


def test_a_listed_file_replaced_before_its_worker_plans_it_is_a_changed_source(tmp_path,
                                                                              tokenizers_dir):
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.core.inputs.source import plan_ranges

    with counted_store("gcs") as (root, fs, _):
        fs.pipe({f"{root}/in/a.jsonl": b'{"q": "x", "a": "y"}\n'})
        (dataset,) = resolve_datasets(_raw([f"{root}/in"], tokenizers_dir / "hf_bpe.json",
                                           f"{root}/out"))
        (planned,) = plan_ranges([dataset], defer=True)
        fs.pipe({f"{root}/in/a.jsonl": b'{"q": "z", "a": "y"}\n'})  # same size, new generation
        with pytest.raises(errors.SourceChangedError) as info:
            planned.ranges()
        assert info.value.kwargs["file"] == f"{root}/in/a.jsonl"
