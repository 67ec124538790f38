"""The readers at scale (issue 40, part 3): what UnitReader (unpacked and packed) and
PackReader need of every record, and each epoch's orders and plans, are written once
into the reader's cache and memory-mapped. Checked here on real files, with the
readers themselves: the cache is written once and reused (a second open reads no shard
or .idx data: bytes counted by the kernel, /proc/self/io, and by the storage layer for
a URL); concurrent opens converge on one copy and the same batches; a URL build never
opens sample_index.jsonl to start (the storage layer spied on); and on synthetic builds
of 0.2M and 3M records, a fresh process's anonymous memory after its first batch and a
resume does not grow with the records (bytes, never time)."""
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, build_qa_units, copy_to_memory_fs, record_cat_ranges
from mintdim_beam import PackReader, UnitReader
from mintdim_beam.core.files import storage

sys.path.insert(0, str(REPO / "benchmarks"))
import read_scale  # noqa: E402
import synthetic_build  # noqa: E402

TOKENS, PACK = 4096, 256


def _rchar() -> int:
    """Bytes this process has read through read(2) and friends (not through maps)."""
    with open("/proc/self/io") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("rchar:"))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("synthetic")
    return {"unit": synthetic_build.unit_build(root / "unit", 300_000, per_shard=40_000),
            "pack": synthetic_build.pack_build(root / "pack", 300_000, shards=3)}


def _packed(path, **kw):
    return UnitReader(str(path), tokens_per_step=TOKENS, pack_length=PACK, **kw)


def _artifacts(cache: Path) -> dict:
    """name -> mtime of each artifact folder of the one build under `cache`."""
    (key,) = [p for p in cache.iterdir() if p.is_dir()]
    return {p.name: p.stat().st_mtime_ns for p in key.iterdir() if p.is_dir()}


def test_the_cache_is_written_once_and_a_second_open_reads_no_shard_data(synthetic, tmp_path):
    unit, pack = synthetic["unit"], synthetic["pack"]
    shards = sum(p.stat().st_size for p in unit.glob("unit_*/shard_*.bin"))
    cache = tmp_path / "cache"
    before = _rchar()
    first = _packed(unit, cache_dir=cache)
    steps, batch = len(first), first.batch_at(3)
    assert _rchar() - before >= shards  # every record's length slots, read once
    made = _artifacts(cache)
    assert {n.split(".")[0] for n in made} == {"lengths", "pack-order", "pack-windows",
                                                "pack-rows"}
    before = _rchar()
    again = _packed(unit, cache_dir=cache)
    assert len(again) == steps
    assert np.array_equal(again.batch_at(3).input_ids, batch.input_ids)
    assert _rchar() - before < 64 << 10  # the manifest and its JSON companions only
    assert _artifacts(cache) == made  # nothing written again

    idx = sum(12 * s["documents"] for s in json.loads((pack / "manifest.json").read_text())["shards"])
    before = _rchar()
    reader = PackReader(pack, 128, batch_size=8, cache_dir=tmp_path / "pack-cache")
    tokens = reader.batch_at(5).tokens
    assert _rchar() - before >= idx  # every .idx's lengths and pointers, checked once
    before = _rchar()
    again = PackReader(pack, 128, batch_size=8, cache_dir=tmp_path / "pack-cache")
    assert np.array_equal(again.batch_at(5).tokens, tokens)
    assert _rchar() - before < 64 << 10


def test_a_url_builds_cache_is_filled_by_byte_ranges_once(synthetic, tmp_path, monkeypatch):
    """The token counts of a URL build come from its shards' length slots by `cat_ranges`
    (whole rows, these records being small), once; a second open asks for nothing, and
    both read the local batches."""
    unit = synthetic["unit"]
    url = "memory://reader-scale/unit"
    copy_to_memory_fs(unit, url)
    try:
        calls = record_cat_ranges(url, monkeypatch)
        remote = _packed(url, cache_dir=tmp_path / "c")
        shards = {p.relative_to(unit).as_posix(): p.stat().st_size
                  for p in unit.glob("unit_*/shard_*.bin")}
        fetched = {}
        for call in calls:
            for path, start, end in call:
                fetched[path.split("/unit/", 1)[1]] = fetched.get(path.split("/unit/", 1)[1], 0) \
                    + end - start
        assert fetched == shards and len(calls) >= 2  # in calls of about 64 MB at most
        calls.clear()
        again = _packed(url, cache_dir=tmp_path / "c")
        assert calls == [] and len(again) == len(remote)
        local = _packed(unit, cache_dir=tmp_path / "local")
        for step in (0, len(local) // 2, len(local) - 1):
            assert np.array_equal(again.batch_at(step).input_ids, local.batch_at(step).input_ids)
    finally:
        storage.filesystem(url).rm("/reader-scale", recursive=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizers_dir) -> Path:
    return build_qa_units(tmp_path_factory.mktemp("scale-qa"), tokenizers_dir, samples=160,
                          seed=3, long_every=8, per_shard=9)


def _spy_opens(fs, monkeypatch) -> list:
    """Every path the storage layer opens or reads whole on `fs`, as it happens."""
    seen = []
    for name in ("open", "_open", "cat_file", "cat", "open_async"):
        real = getattr(fs, name, None)
        if real is None:
            continue

        def spy(path, *args, _real=real, **kw):
            seen.append(str(path))
            return _real(path, *args, **kw)

        monkeypatch.setattr(fs, name, spy)
    real_ranges = fs.cat_ranges
    monkeypatch.setattr(fs, "cat_ranges", lambda paths, *a, **kw: (
        seen.extend(map(str, paths)), real_ranges(paths, *a, **kw))[1])
    return seen


@pytest.mark.parametrize("pack_length", [None, 64])
def test_a_url_build_never_opens_sample_index_to_start(built, tmp_path, monkeypatch,
                                                      pack_length):
    url = f"memory://reader-scale/qa-{pack_length}"
    copy_to_memory_fs(built, url)
    try:
        seen = _spy_opens(storage.filesystem(url), monkeypatch)
        kw = dict(tokens_per_step=256, pack_length=pack_length, seed=2, world_size=2)
        readers = [UnitReader(url, rank=r, cache_dir=tmp_path / "c", **kw) for r in range(2)]
        epoch = [list(reader) for reader in readers]
        state = readers[0].state_at(len(readers[0]) // 2)
        resumed = UnitReader(url, cache_dir=tmp_path / "c", **kw)
        resumed.load_state_dict(state)
        next(iter(resumed))
        assert seen and not [p for p in seen if p.endswith("sample_index.jsonl")]
        # asked for, the sample ids are read from it once, into the cache
        local = [list(UnitReader(str(built), rank=r, cache_dir=tmp_path / "l", **kw))
                 for r in range(2)]
        for rank in range(2):
            assert [b.sample_ids.tolist() for b in epoch[rank]] == \
                [b.sample_ids.tolist() for b in local[rank]]
        assert len([p for p in seen if p.endswith("sample_index.jsonl")]) >= 1
        opened = len(seen)
        again = UnitReader(url, cache_dir=tmp_path / "c", **kw)
        again.batch_at(0).sample_ids
        assert not [p for p in seen[opened:] if p.endswith("sample_index.jsonl")]
    finally:
        storage.filesystem(url).rm("/reader-scale", recursive=True)


CONCURRENT = textwrap.dedent("""
    import hashlib, json, sys, time
    from mintdim_beam import PackReader, UnitReader
    unit, pack, cache, start = sys.argv[1:5]
    time.sleep(max(0.0, float(start) - time.time()))  # all start together
    out = {}
    for name, reader in (("packed", UnitReader(unit, tokens_per_step=4096, pack_length=256,
                                               world_size=2, rank=1, cache_dir=cache)),
                         ("unpacked", UnitReader(unit, tokens_per_step=4096, cache_dir=cache)),
                         ("pack", PackReader(pack, 128, batch_size=8, cache_dir=cache))):
        ids = [getattr(reader.batch_at(k), "tokens" if name == "pack" else "input_ids")
               for k in (0, 1, len(reader) // 2)]
        out[name] = [len(reader), hashlib.sha256(b"".join(i.tobytes() for i in ids)).hexdigest()]
    print(json.dumps(out))
""")


def test_concurrent_opens_converge_on_one_cache_and_the_same_batches(synthetic, tmp_path):
    cache = tmp_path / "shared"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(synthetic["unit"]),
                               str(synthetic["pack"]), str(cache), str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert all(o == outs[0] for o in outs)
    # and what a reader made afterwards gives, from the cache they left
    reader = PackReader(synthetic["pack"], 128, batch_size=8, cache_dir=cache)
    assert len(reader) == outs[0]["pack"][0]
    keys = [p for p in cache.iterdir() if p.is_dir()]
    assert len(keys) == 2  # one folder for each build
    for key in keys:
        names = [p.name for p in key.iterdir()]
        assert not [n for n in names if ".tmp-" in n]  # every temp folder renamed or gone
        folders = [n for n in names if not n.startswith(".")]
        assert len(folders) == len(set(folders)) >= 2
        for folder in folders:
            meta = json.loads((key / folder / "meta.json").read_text())
            assert sorted(p.stem for p in (key / folder).glob("*.npy")) == meta["arrays"]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory) -> dict:
    """Synthetic builds of 0.2M and 3M records and documents, each read cold once (its
    cache written, the middle step's state saved), then in fresh processes: the first
    batch, and a resume of that state."""
    root = tmp_path_factory.mktemp("scaled")
    out = {}
    for n in (200_000, 3_000_000):
        unit = synthetic_build.unit_build(root / f"unit_{n}", n, per_shard=250_000)
        pack = synthetic_build.pack_build(root / f"pack_{n}", n, shards=2)
        base = dict(unit=str(unit), pack=str(pack), world=8, rank=3, tokens_per_step=65536,
                    pack_length=PACK, seq_len=256, pack_batch=32, state=str(root / f"state_{n}"))
        out[n] = {}
        for kind in read_scale.KINDS:
            read_scale.worker(dict(base, kind=kind, phase="cold"))
            out[n][kind] = {phase: read_scale.worker(dict(base, kind=kind, phase=phase))
                            for phase in ("first", "resume")}
    return out


@pytest.mark.parametrize("kind", read_scale.KINDS)
def test_a_ranks_memory_does_not_grow_with_the_records(scaled, kind):
    """15 times the records: the reader's own (anonymous) memory is the same within
    4 MB (an array of 2 bytes a record would add 5.6 MB), and what the process holds
    besides the build's own mapped data pages (page cache the ranks of a machine share,
    mapped a fault-around or a large folio at a time) stays under 150 MB; the resumed
    batch is the one the saving process read."""
    small, large = scaled[200_000][kind], scaled[3_000_000][kind]
    for phase in ("first", "resume"):
        a, b = small[phase]["memory"], large[phase]["memory"]
        assert b["anon_mb"] - a["anon_mb"] < 4, (phase, a, b)
        assert b["anon_mb"] < 64, (phase, b)
        assert b["resident_mb"] - b["build_mb"] < 150, (phase, b)
    assert small["resume"]["matches"] and large["resume"]["matches"]


def test_the_scale_benchmark_runs_on_a_tiny_size(tmp_path, capsys):
    """`read.py --synthetic`: every reader cold, first and resumed, its memory by mapping
    (no timing assertions)."""
    import read as read_benchmark

    out = tmp_path / "results.json"
    assert read_benchmark.main(["--synthetic", "30000", "--rounds", "1", "--workdir",
                                str(tmp_path / "work"), "--json", str(out)]) == 0
    row = json.loads(out.read_text())["sizes"]["30000"]
    for kind in read_scale.KINDS:
        assert row["summary"][f"{kind}_resume"]["matches"]
        memory = row["first"][kind][0]["memory"]
        assert memory["resident_mb"] >= memory["anon_mb"] > 0 and memory["peak_rss_mb"] > 0
    assert "[goals at the largest size]" in capsys.readouterr().out
