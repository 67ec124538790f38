"""PackReader on real object stores: the same pack-build run locally and into the
gcp-storage-emulator (gcsfs) and moto's S3 server (s3fs), read back by byte ranges.
The bucket builds' shards are byte for byte the local one's; the remote reader yields
exactly the local reader's batches (both ranks of world size 2, a whole epoch,
document_ids and position_ids included), the first reader reading every .idx's lengths
and pointers in one request into its cache and the second reading none, then fetching
only the batch's tokens in one `cat_ranges` call a batch; a state saved mid-epoch remotely resumes the same sequence,
and one saved locally resumes on a byte copy of the local build in a bucket (the same
manifest); a truncated or missing shard is refused when the reader is made."""
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import chat_pack_inputs, pack_build_chat, record_cat_ranges
from mintdim_beam import PackReader
from mintdim_beam.core import errors
from test_remote import gcs, s3  # noqa: F401  (the emulators, module-scoped fixtures)

pytestmark = pytest.mark.slow

SEQ = 48
WORLD = 2
PER_RANK = 3
SEED = 6
STORES = ["gcs", "s3"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test's readers share a cache of its own (a bucket build's goes to the user's
    cache folder otherwise, kept across runs)."""
    monkeypatch.setenv("MINTDIM_BEAM_READER_CACHE", str(tmp_path / "reader-cache"))


def _build(work: Path, out: str) -> None:
    pack_build_chat(work, out, shard_tokens=30_000)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    return chat_pack_inputs(tmp_path_factory, "packread-remote")


@pytest.fixture(scope="module")
def local(inputs) -> Path:
    out = inputs / "out"
    _build(inputs, str(out))
    assert len(json.loads((out / "manifest.json").read_text())["shards"]) >= 3
    return out


def _local_files(local: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(local.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def remotes(inputs, local, gcs, s3) -> dict:  # noqa: F811
    """store -> URL of the same pack-build run into that bucket."""
    out = {}
    for store, (root, fs) in (("gcs", gcs), ("s3", s3)):
        url = f"{root}/pack/build"
        _build(inputs, url)
        base = fs._strip_protocol(url)
        fs.invalidate_cache()
        shards = {p[len(base) + 1:]: fs.cat_file(p) for p in fs.find(base)
                  if p.endswith((".bin", ".idx"))}
        # the bucket build's shards are the local one's (its manifest names other paths)
        assert shards == {n: b for n, b in _local_files(local).items()
                          if n.endswith((".bin", ".idx"))}, store
        out[store] = url
    return out


def _ranks(path) -> list:
    return [PackReader(str(path), SEQ, seed=SEED, rank=r, world_size=WORLD, batch_size=PER_RANK)
            for r in range(WORLD)]


def _same(remote: list, local: list) -> None:
    assert len(remote) == len(local) > 0
    for b, a in zip(remote, local):
        assert (b.step, b.epoch) == (a.step, a.epoch)
        for name in ("tokens", "sample_ids", "document_ids", "position_ids"):
            x, y = getattr(a, name), getattr(b, name)
            assert y.dtype == x.dtype and np.array_equal(y, x), (a.step, name)


@pytest.fixture(scope="module")
def local_epoch(local) -> list:
    """Each rank's batches of epoch 1 from the local build."""
    epoch = []
    for reader in _ranks(local):
        reader.set_epoch(1)
        epoch.append(list(reader))
    return epoch


@pytest.mark.parametrize("store", STORES)
def test_a_bucket_build_reads_the_local_batches_by_byte_ranges(store, remotes, local,
                                                              local_epoch, monkeypatch):
    url = remotes[store]
    calls = record_cat_ranges(url, monkeypatch)
    readers = _ranks(url)
    # the first made with one request for every shard's header, lengths and pointers,
    # which are all it reads of each .idx (not the document index after them), into the
    # cache; the second opens the cache and reads nothing of the .idx files
    manifest = json.loads((local / "manifest.json").read_text())
    shards = manifest["shards"]
    made = [(f"{url}/{s['name']}.idx", 0, 34 + 12 * s["documents"]) for s in shards]
    assert calls == [made]
    calls.clear()
    for reader in readers:
        reader.set_epoch(1)
    _same([b for r in readers for b in r], [b for rank in local_epoch for b in rank])

    # one call per batch, the batch's tokens and no more, inside this build's .bin files
    itemsize = np.dtype(manifest["dtype"]).itemsize
    assert len(calls) == sum(len(rank) for rank in local_epoch)
    for call, batch in zip(calls, [b for rank in local_epoch for b in rank]):
        assert sum(end - start for _, start, end in call) == \
            batch.tokens.size * itemsize
        assert all(path.startswith(f"{url}/shard_") and path.endswith(".bin")
                   for path, _, _ in call)


@pytest.mark.parametrize("store", STORES)
def test_a_state_saved_mid_epoch_resumes_the_same_sequence_remotely(store, remotes, local,
                                                                   local_epoch, request):
    url = remotes[store]
    steps = len(local_epoch[0])
    k = steps // 2
    assert 0 < k < steps - 1
    first = _ranks(url)
    for reader in first:
        reader.set_epoch(1)
        it = iter(reader)
        for _ in range(k):
            next(it)
    states = [json.loads(json.dumps(reader.state_dict())) for reader in first]
    assert states[0] == states[1] and states[0]["position"] == k * WORLD * PER_RANK

    saved_locally = _ranks(local)[0]
    saved_locally.set_epoch(1)
    it = iter(saved_locally)
    for _ in range(k):
        next(it)
    local_state = saved_locally.state_dict()
    # the same position; another fingerprint (the bucket build's manifest names its paths)
    assert {**local_state, "fingerprint": None} == {**states[0], "fingerprint": None}
    with pytest.raises(errors.ReaderStateError, match="fingerprint"):
        _ranks(url)[0].load_state_dict(local_state)
    copy, _ = _copy(request, store, local, "copy")
    for rank, reader in enumerate(_ranks(copy)):
        reader.load_state_dict(local_state)
        _same(list(reader), local_epoch[rank][k:])

    for rank, reader in enumerate(_ranks(url)):
        reader.load_state_dict(states[0])
        _same(list(reader), local_epoch[rank][k:])
        assert reader.position == steps * WORLD * PER_RANK
    # on one rank of the whole global batch: the same samples, in rank order
    whole = PackReader(url, SEQ, seed=SEED, batch_size=WORLD * PER_RANK)
    whole.load_state_dict(states[0])
    batch = next(iter(whole))
    assert np.array_equal(batch.tokens, np.concatenate([local_epoch[r][k].tokens
                                                        for r in range(WORLD)]))


def _copy(request, store, local: Path, name: str) -> tuple:
    root, fs = request.getfixturevalue(store)
    url = f"{root}/pack/{name}-{store}"
    files = [p for p in sorted(local.iterdir()) if p.is_file()]
    fs.put([str(p) for p in files], [f"{url}/{p.name}" for p in files])
    return url, fs


@pytest.mark.parametrize("store", STORES)
def test_a_truncated_or_missing_remote_shard_is_refused_when_the_reader_is_made(store, local,
                                                                                request):
    url, fs = _copy(request, store, local, "short")
    data = fs.cat_file(f"{url}/shard_000001.bin")
    fs.pipe_file(f"{url}/shard_000001.bin", data[:-2])
    with pytest.raises(ValueError, match=f"shard_000001.bin: {len(data) - 2} bytes, "
                                         f"its .idx needs {len(data)}"):
        PackReader(url, SEQ)
    idx = fs.cat_file(f"{url}/shard_000002.idx")
    fs.pipe_file(f"{url}/shard_000001.bin", data)
    fs.pipe_file(f"{url}/shard_000002.idx", idx[:-8])
    with pytest.raises(ValueError, match="shard_000002.idx: .* bytes, the header's counts"):
        PackReader(url, SEQ)
    fs.rm(f"{url}/shard_000002.idx")
    with pytest.raises(FileNotFoundError, match="shard_000002.idx: missing"):
        PackReader(url, SEQ)
    fs.rm(f"{url}/manifest.json")
    with pytest.raises(errors.ReaderArgumentError, match="no manifest.json"):
        PackReader(url, SEQ)
