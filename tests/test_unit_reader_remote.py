"""UnitReader on real object stores: one small local build uploaded to the
gcp-storage-emulator (gcsfs) and to moto's S3 server (s3fs), read back by byte ranges
through `cat_ranges`. The remote reader must yield exactly the local reader's batches
(both ranks of world size 2, a full epoch), resume mid-epoch from a state saved
remotely, name a corrupt record by shard and row, refuse a truncated or missing shard
when made, and refuse a URL without manifest.json."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import build_qa_units, record_cat_ranges
from mintdim_beam import UnitReader
from mintdim_beam.core import errors
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats.mintdim import record_bytes
from test_remote import gcs, s3  # noqa: F401  (the emulators, module-scoped fixtures)

pytestmark = pytest.mark.slow

TOKENS = 128  # rows per global batch: 8 (unit 16), 4 (unit 32), 2 (unit 64); all even
WORLD = 2
SEED = 4
PER_SHARD = 5
STORES = ["gcs", "s3"]
BATCH_ARRAYS = ("sample_ids", "valid", "input_ids", "labels")


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizers_dir) -> Path:
    """~110 records over three units, 5 per shard (several shards per unit); overflow
    `skip` leaves gaps in the sample ids, so ids and record ordinals differ."""
    return build_qa_units(tmp_path_factory.mktemp("reader-remote"), tokenizers_dir,
                          samples=120, seed=21, long_every=7, per_shard=PER_SHARD)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test's readers share a cache of its own (a bucket build's goes to the user's
    cache folder otherwise, kept across runs)."""
    monkeypatch.setenv("MINTDIM_BEAM_READER_CACHE", str(tmp_path / "reader-cache"))


def _local_files(local: Path) -> dict:
    return {p.relative_to(local).as_posix(): p for p in sorted(local.rglob("*")) if p.is_file()}


def _upload(fs, local: Path, url: str, skip=()) -> str:
    """The whole build tree under `url` by one fsspec `put` (lists of paths)."""
    files = {rel: p for rel, p in _local_files(local).items() if rel not in skip}
    fs.put([str(p) for p in files.values()], [f"{url}/{rel}" for rel in files])
    return url


@pytest.fixture(scope="module")
def remotes(built, gcs, s3) -> dict:  # noqa: F811
    """store -> (URL of the uploaded build, its filesystem)."""
    out = {}
    for store, (root, fs) in (("gcs", gcs), ("s3", s3)):
        url = _upload(fs, built, f"{root}/reader/build")
        base = fs._strip_protocol(url)
        uploaded = {p[len(base) + 1:]: fs.cat_file(p) for p in fs.find(base)}
        local = {rel: p.read_bytes() for rel, p in _local_files(built).items()}
        assert uploaded == local, store  # the upload is a byte-for-byte copy
        out[store] = (url, fs)
    return out


def _readers(path, world=WORLD, **kw):
    return [UnitReader(str(path), tokens_per_step=TOKENS, seed=SEED, rank=r, world_size=world, **kw)
            for r in range(world)]


def _epoch(path) -> list:
    """Each rank's batches of one epoch."""
    return [list(reader) for reader in _readers(path)]


def _assert_same_batches(local: list, remote: list) -> None:
    assert len(remote) == len(local)
    for b, a in zip(remote, local):
        where = (a.step, a.unit_size)
        assert (b.step, b.epoch, b.unit_size) == (a.step, a.epoch, a.unit_size), where
        for name in BATCH_ARRAYS:
            x, y = getattr(a, name), getattr(b, name)
            assert y.dtype == x.dtype and y.shape == x.shape, (where, name)
            assert np.array_equal(y, x), (where, name)


def _layout(built: Path) -> dict:
    return json.loads((built / "length_field.json").read_text())


def _record_nbytes(built: Path, unit: int) -> int:
    layout = _layout(built)
    itemsize = {"uint16": 2, "uint32": 4}[layout["token_dtype"]]
    return record_bytes(unit, len(layout["sequence_template"]), itemsize)


@pytest.fixture(scope="module")
def local_epoch(built) -> list:
    """The local reader's epoch, checked to be a useful reference: every record once,
    several units with several shards each, padding rows at the end of some units."""
    epoch = _epoch(built)
    index = [json.loads(line) for line in (built / "sample_index.jsonl").read_text().splitlines()]
    ids = [int(i) for rank in epoch for b in rank for i in b.sample_ids if i >= 0]
    assert sorted(ids) == sorted(row["sample_id"] for row in index)
    assert max(ids) >= len(ids)  # skipped overflows left gaps in the sample ids
    reader = UnitReader(str(built), tokens_per_step=TOKENS)
    assert len(reader.build.sizes) == 3 and reader.build.is_local
    assert all(reader.build.shard_count(u) >= 2 for u in reader.build.sizes)
    assert any(not b.valid.all() for rank in epoch for b in rank)
    assert [b.step for b in epoch[0]] == list(range(len(epoch[0]))) == [b.step for b in epoch[1]]
    return epoch


@pytest.mark.parametrize("store", STORES)
def test_a_bucket_copy_reads_the_same_batches_by_byte_ranges(store, remotes, built, local_epoch,
                                                            monkeypatch):
    url, _ = remotes[store]
    calls = record_cat_ranges(url, monkeypatch)
    readers = _readers(url)
    assert not readers[0].build.is_local
    remote_epoch = [list(reader) for reader in readers]
    for rank in range(WORLD):
        _assert_same_batches(local_epoch[rank], remote_epoch[rank])

    # One cat_ranges call per batch holding real rows, fetching those rows' bytes only
    # (never a whole shard), every range inside this build's shards.
    with_rows = [b for rank in local_epoch for b in rank if b.valid.any()]
    assert len(calls) == len(with_rows)
    assert sum(end - start for call in calls for _, start, end in call) == \
        sum(int(b.valid.sum()) * _record_nbytes(built, b.unit_size) for b in with_rows)
    fs = storage.filesystem(url)
    prefix = fs._strip_protocol(url)
    assert all(fs._strip_protocol(path).startswith(prefix + "/unit_") and path.endswith(".bin")
               for call in calls for path, _, _ in call)


@pytest.mark.parametrize("store", STORES)
def test_a_state_saved_mid_epoch_remotely_resumes_the_same_sequence(store, remotes, built,
                                                                   local_epoch):
    url, _ = remotes[store]
    steps = len(local_epoch[0])
    k = steps // 2
    assert 0 < k < steps - 1

    first = _readers(url)
    for reader in first:
        reader.set_epoch(0)
        it = iter(reader)
        for _ in range(k):
            next(it)
    states = [json.loads(json.dumps(reader.state_dict())) for reader in first]
    assert states[0]["step"] == k and states[1] == states[0]

    local = _readers(built)[0]
    local_iter = iter(local)
    for _ in range(k):
        next(local_iter)
    assert states[0] == local.state_dict()  # same fingerprint: the manifest's bytes

    for rank, reader in enumerate(_readers(url)):
        reader.load_state_dict(states[0])
        reader.set_epoch(0)  # the usual loop: the same epoch does not restart it
        _assert_same_batches(local_epoch[rank][k:], list(reader))
        assert reader.state_dict()["step"] == steps


def _fresh_copy(request, store, built, name, skip=()) -> tuple:
    root, fs = request.getfixturevalue(store)
    url = f"{root}/reader/{name}-{store}"
    return _upload(fs, built, url, skip=skip), fs


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("slot, value, words", [(0, 7, "magic is 7"),
                                                (1, 33, "more than the unit size 32")])
def test_a_corrupt_remote_record_names_its_shard_and_row(store, slot, value, words, built,
                                                         request):
    unit, shard, row = 32, 1, 3
    name = f"unit_{unit}/shard_{shard:06d}.bin"
    url, fs = _fresh_copy(request, store, built, f"corrupt-{slot}")
    layout = _layout(built)
    itemsize = {"uint16": 2, "uint32": 4}[layout["token_dtype"]]
    nbytes = _record_nbytes(built, unit)
    data = bytearray(fs.cat_file(f"{url}/{name}"))
    assert len(data) == PER_SHARD * nbytes and row < PER_SHARD
    offset = row * nbytes + slot * itemsize
    before = int.from_bytes(data[offset:offset + itemsize], "little")
    assert before != value and (slot != 0 or before == layout["magic"])
    data[offset:offset + itemsize] = value.to_bytes(itemsize, "little")
    fs.pipe_file(f"{url}/{name}", bytes(data))

    # The step that holds this record, from the intact local build (one rank).
    local = UnitReader(str(built), tokens_per_step=TOKENS, seed=SEED)
    sample_id = int(local.build.sample_ids(unit)[shard * PER_SHARD + row])
    at = [b.step for b in local if sample_id in b.sample_ids.tolist()]
    assert len(at) == 1

    reader = UnitReader(url, tokens_per_step=TOKENS, seed=SEED)  # made fine: sizes are right
    read = []
    with pytest.raises(errors.ShardRecordError) as info:
        for batch in reader:
            read.append(batch.step)
    assert read == list(range(at[0]))  # every step before it read, the failing one not
    assert info.value.kwargs["shard"] == name and info.value.kwargs["row"] == row
    assert words in info.value.kwargs["problem"]


@pytest.mark.parametrize("store", STORES)
def test_a_truncated_or_missing_remote_shard_is_refused_when_the_reader_is_made(store, built,
                                                                                request):
    name = "unit_16/shard_000000.bin"
    url, fs = _fresh_copy(request, store, built, "short")
    data = fs.cat_file(f"{url}/{name}")
    assert len(data) == PER_SHARD * _record_nbytes(built, 16)
    fs.pipe_file(f"{url}/{name}", data[:-2])
    with pytest.raises(errors.ShardRecordError) as info:
        UnitReader(url, tokens_per_step=TOKENS)
    assert info.value.kwargs["shard"] == name and info.value.kwargs["row"] is None
    problem = info.value.kwargs["problem"]
    assert f"{len(data) - 2} bytes, expected {len(data)} bytes" in problem

    fs.rm(f"{url}/{name}")
    with pytest.raises(errors.ShardRecordError) as info:
        UnitReader(url, tokens_per_step=TOKENS)
    assert info.value.kwargs["shard"] == name and "missing" in info.value.kwargs["problem"]


@pytest.mark.parametrize("store", STORES)
def test_a_url_without_manifest_is_not_a_build(store, built, request):
    url, _ = _fresh_copy(request, store, built, "unfinished", skip={"manifest.json"})
    for path in (url, f"{url}-nothing-here"):
        with pytest.raises(FileNotFoundError) as info:
            UnitReader(path, tokens_per_step=TOKENS)
        assert "manifest.json" in str(info.value) and path in str(info.value)


@pytest.mark.parametrize("store", STORES)
def test_a_remote_unit_without_any_shard_is_refused_like_a_local_one(store, built, request,
                                                                     tmp_path):
    name = "unit_64/shard_000000.bin"
    local = tmp_path / "build"
    shutil.copytree(built, local)
    shutil.rmtree(local / "unit_64")
    with pytest.raises(errors.ShardRecordError) as info:
        UnitReader(str(local), tokens_per_step=TOKENS)
    assert info.value.kwargs["shard"] == name and "missing" in info.value.kwargs["problem"]

    url, fs = _fresh_copy(request, store, built, "no-unit-64")
    fs.rm(f"{url}/unit_64", recursive=True)
    assert not fs.find(f"{url}/unit_64")
    with pytest.raises(errors.ShardRecordError) as info:
        UnitReader(url, tokens_per_step=TOKENS)
    assert info.value.kwargs["shard"] == name and "missing" in info.value.kwargs["problem"]
