"""PackReader on a real pack-build output made here (the bundled chat data and
tokenizer, cut into several shards, and in one): every sample is the seq_len + 1 ids of the
epoch's shuffled document stream at a stride of seq_len, read from the shards' bytes
through datatrove's `.bin.index` (not the `.idx` the reader parses); document_ids and
position_ids follow the documents' ends; the global sequence is the same for any world
size; a state resumes exactly (also on another world size); a memory:// copy gives the
same batches by byte ranges; wrong directories, lengths, sample ids and states are
refused.
(tests_interop/test_pack_reader_megatron.py compares it with megatron-core itself.)"""
import json
import pickle
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest

from conftest import build_qa_units, chat_pack_inputs, pack_build_chat
from mintdim_beam import PackReader
from mintdim_beam.core import errors

SEQ = 64


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test's readers share a cache of their own (a memory:// copy's would go to
    the user's cache folder, kept across runs)."""
    monkeypatch.setenv("MINTDIM_BEAM_READER_CACHE", str(tmp_path / "reader-cache"))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return chat_pack_inputs(tmp_path_factory, "packread")


def _build(work: Path, name: str, **pack) -> Path:
    out = work / name
    pack_build_chat(work, str(out), **pack)
    return out


@pytest.fixture(scope="module")
def build(work) -> Path:
    return _build(work, "out", shard_tokens=30_000)


def _documents(build: Path) -> list:
    """Every document's ids (EOD included), shards in name order, from the .bin and
    datatrove's cumulative document ends."""
    manifest = json.loads((build / "manifest.json").read_text())
    docs = []
    for shard in manifest["shards"]:
        ids = np.fromfile(build / f"{shard['name']}.bin", dtype=manifest["dtype"]).astype(np.int64)
        ends = np.fromfile(build / f"{shard['name']}.bin.index", dtype="<u8").astype(np.int64)
        docs += [ids[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    assert len(docs) == manifest["documents"]
    return docs


@pytest.fixture(scope="module")
def documents(build) -> list:
    assert len(json.loads((build / "manifest.json").read_text())["shards"]) >= 3
    return _documents(build)


def _stream(documents, seed: int, epoch: int):
    """The epoch's documents in their shuffled order as one stream, and each token's
    document (its place in that order)."""
    rs = np.random.RandomState(seed if epoch == 0 else [seed, epoch])
    order = np.arange(len(documents), dtype=np.int32)
    rs.shuffle(order)
    parts = [documents[d] for d in order]
    owner = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    return np.concatenate(parts), owner


def _all(reader) -> list:
    return list(reader)


@pytest.mark.parametrize("seed,epoch", [(0, 0), (9, 0), (9, 2)])
def test_samples_are_windows_of_the_shuffled_stream(build, documents, seed, epoch):
    reader = PackReader(build, SEQ, seed=seed, batch_size=8)
    reader.set_epoch(epoch)
    stream, owner = _stream(documents, seed, epoch)
    assert reader.samples == (len(stream) - 1) // SEQ
    batches = _all(reader)
    assert len(batches) == reader.steps == reader.samples // 8
    ids = np.concatenate([b.sample_ids for b in batches])
    assert len(set(ids.tolist())) == len(ids) and ids.max() < reader.samples  # each once
    eod = json.loads((build / "manifest.json").read_text())["eod"]["id"]
    for b in batches:
        assert b.tokens.shape == (8, SEQ + 1) and b.tokens.dtype == np.int64
        assert np.array_equal(b.input_ids, b.tokens[:, :-1])
        assert np.array_equal(b.labels, b.tokens[:, 1:])
        for row, s in enumerate(b.sample_ids.tolist()):
            window = slice(s * SEQ, s * SEQ + SEQ + 1)
            assert np.array_equal(b.tokens[row], stream[window])
            docs = owner[window]
            assert np.array_equal(b.document_ids[row], docs - docs[0])
            starts = np.r_[0, np.flatnonzero(np.diff(docs)) + 1]
            want = np.arange(SEQ + 1) - np.repeat(starts, np.diff(np.r_[starts, SEQ + 1]))
            assert np.array_equal(b.position_ids[row], want)
            # a document's EOD is its last token: the next token starts the next one
            assert (b.tokens[row, :-1][np.diff(b.document_ids[row]) == 1] == eod).all()
    other = PackReader(build, SEQ, seed=seed + 1, batch_size=8)
    other.set_epoch(epoch)
    assert not np.array_equal(other.sample_order(), reader.sample_order())


def test_one_shard_reads_the_same_stream(work):
    """One shard (every document in one .bin: the gather that never splits by shard)
    gives the windows of the same shuffled stream."""
    one = _build(work, "one")
    assert len(json.loads((one / "manifest.json").read_text())["shards"]) == 1
    documents = _documents(one)
    stream, owner = _stream(documents, 4, 1)
    reader = PackReader(one, SEQ, seed=4, batch_size=16)
    reader.set_epoch(1)
    for b in reader:
        for row, s in enumerate(b.sample_ids.tolist()):
            window = slice(s * SEQ, s * SEQ + SEQ + 1)
            assert np.array_equal(b.tokens[row], stream[window])
            assert np.array_equal(b.document_ids[row], owner[window] - owner[window][0])
    ids = [0, reader.samples - 1, 7]
    tokens, _ = reader.samples_at(ids)
    assert all(np.array_equal(tokens[i], stream[s * SEQ:s * SEQ + SEQ + 1])
               for i, s in enumerate(ids))
    for bad in ([reader.samples], [-1], [3, reader.samples + 5]):
        with pytest.raises(errors.ReaderArgumentError, match="sample_ids"):
            reader.samples_at(bad)


@pytest.mark.parametrize("world,per_rank", [(2, 4), (4, 2), (3, 1), (8, 1)])
def test_the_global_sequence_is_the_same_for_any_world_size(build, world, per_rank):
    one = PackReader(build, SEQ, seed=3, batch_size=world * per_rank)
    ranks = [PackReader(build, SEQ, seed=3, rank=r, world_size=world, batch_size=per_rank)
             for r in range(world)]
    assert all(len(r) == len(one) for r in ranks)  # lockstep
    for step, whole in enumerate(_all(one)):
        parts = [r.batch_at(step) for r in ranks]
        assert np.array_equal(np.concatenate([p.tokens for p in parts]), whole.tokens)
        assert np.array_equal(np.concatenate([p.sample_ids for p in parts]), whole.sample_ids)


def test_state_resumes_exactly_also_on_another_world_size(build):
    reader = PackReader(build, SEQ, seed=5, rank=1, world_size=2, batch_size=3)
    reader.set_epoch(1)
    it = iter(reader)
    for _ in range(4):
        next(it)
    state = json.loads(json.dumps(reader.state_dict()))
    assert len(json.dumps(state)) < 300
    rest = list(it)
    again = PackReader(build, SEQ, seed=5, rank=1, world_size=2, batch_size=3)
    again.load_state_dict(state)
    resumed = list(again)
    assert [b.step for b in resumed] == [b.step for b in rest] and len(rest) > 0
    for a, b in zip(resumed, rest):
        assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.document_ids, b.document_ids)
    # 4 steps of 6 samples = 24 read; on 4 ranks of 3 a step that is step 2
    wide = [PackReader(build, SEQ, seed=5, rank=r, world_size=4, batch_size=3) for r in range(4)]
    for w in wide:
        w.load_state_dict(state)
    first = [next(iter(w)) for w in wide]
    ref = PackReader(build, SEQ, seed=5, batch_size=12)
    ref.set_epoch(1)
    assert np.array_equal(np.concatenate([f.tokens for f in first]), ref.batch_at(2).tokens)
    assert pickle.loads(pickle.dumps(again)).state_dict() == again.state_dict()
    mid = PackReader(build, SEQ, seed=5, rank=1, world_size=2, batch_size=3)
    mid.load_state_dict(state)
    next(iter(mid))  # the plan made
    copy = pickle.loads(pickle.dumps(mid))
    assert len(pickle.dumps(mid)) < 100_000 and copy.state_dict() == mid.state_dict()
    assert [b.tokens.tolist() for b in copy] == [b.tokens.tolist() for b in rest[1:]]


def test_a_memory_url_gives_the_local_batches(build):
    fs = fsspec.filesystem("memory")
    root = "memory://packreader/out"
    for p in sorted(build.iterdir()):
        fs.pipe(f"{root}/{p.name}", p.read_bytes())
    try:
        remote = PackReader(root, SEQ, seed=2, rank=1, world_size=2, batch_size=4)
        local = PackReader(build, SEQ, seed=2, rank=1, world_size=2, batch_size=4)
        for a, b in zip(_all(remote), _all(local)):
            assert np.array_equal(a.tokens, b.tokens)
            assert np.array_equal(a.position_ids, b.position_ids)
        fs.pipe(f"{root}/shard_000001.bin", (build / "shard_000001.bin").read_bytes()[:-2])
        with pytest.raises(ValueError, match="shard_000001.bin: .* bytes, its .idx needs"):
            PackReader(root, SEQ)
    finally:
        fs.rm("memory://packreader", recursive=True)


def test_a_pointer_that_is_not_where_the_lengths_put_it_is_refused(build, tmp_path):
    """A corrupt .idx pointer would read another document's tokens with exit 0."""
    from mintdim_beam.core.formats import megatron

    copy = tmp_path / "copy"
    shutil.copytree(build, copy)
    idx = copy / "shard_000001.idx"
    data = bytearray(idx.read_bytes())
    count = len(megatron.read_idx(bytes(data)).lengths)
    at = megatron.HEADER_BYTES + 4 * count + 8 * 2  # document 2's pointer
    data[at:at + 8] = (int.from_bytes(data[at:at + 8], "little") + 2).to_bytes(8, "little")
    idx.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"shard_000001.idx: document 2 starts at byte \d+, "
                                         r"its lengths put it at \d+"):
        PackReader(copy, SEQ)
    assert len(_all(PackReader(build, SEQ))) > 0  # the build itself opens


def test_not_a_pack_build_is_refused(build, tmp_path, tokenizers_dir):
    with pytest.raises(errors.ReaderArgumentError, match="no manifest.json"):
        PackReader(tmp_path, SEQ)
    (tmp_path / "u").mkdir()
    units = build_qa_units(tmp_path / "u", tokenizers_dir, samples=12, seed=1, long_every=5,
                           per_shard=4)
    with pytest.raises(errors.ReaderArgumentError, match="'unit-build' build"):
        PackReader(units, SEQ)


def test_lengths_and_arguments_out_of_range_are_refused(build, documents):
    total = sum(len(d) for d in documents)
    assert PackReader(build, total - 1).samples == 1  # the whole stream is one sample
    with pytest.raises(errors.ReaderArgumentError, match=f"0 samples .* {total} tokens"):
        PackReader(build, total)
    with pytest.raises(errors.ReaderArgumentError, match="batch_size"):
        PackReader(build, total // 2 - 1, batch_size=3)
    for kwargs in ({"seq_len": 0}, {"seq_len": 2.0}, {"seed": -1}, {"seed": 1 << 32},
                   {"rank": 2, "world_size": 2}, {"world_size": 0}, {"batch_size": True}):
        args = {"seq_len": SEQ, **kwargs}
        with pytest.raises(errors.ReaderArgumentError):
            PackReader(build, args.pop("seq_len"), **args)
    reader = PackReader(build, SEQ, batch_size=8)
    with pytest.raises(errors.ReaderArgumentError):
        reader.batch_at(reader.steps)
    with pytest.raises(errors.ReaderArgumentError):
        reader.batch_at(-1)


def test_bad_states_are_refused_and_leave_the_reader_where_it_was(build):
    reader = PackReader(build, SEQ, seed=1, batch_size=4)
    it = iter(reader)
    next(it)
    good = reader.state_dict()
    end = reader.steps * 4
    bad = {"seed": 2, "seq_len": SEQ + 1, "fingerprint": "0" * 64, "reader": "unit",
           "epoch": -1, "position": -4}
    cases = [{**good, k: v} for k, v in bad.items()]
    cases += [{**good, "position": 6}, {**good, "position": "4"}, {**good, "position": 4.0},
              {**good, "epoch": True}, {k: v for k, v in good.items() if k != "position"},
              {**good, "position": end + 4 * 1000}, "not a state"]
    for state in cases:
        with pytest.raises(errors.ReaderStateError):
            reader.load_state_dict(state)
        assert reader.state_dict() == good
    reader.load_state_dict({**good, "position": end})  # the epoch's end: done
    assert list(reader) == []


def test_a_position_past_the_last_step_of_a_larger_batch_is_the_epochs_end(build):
    """Saved by one rank of batch 1 after its epoch (all samples read): a reader whose
    global batch leaves a remainder out has nothing left of that epoch."""
    whole = PackReader(build, SEQ, seed=1)
    whole.set_epoch(2)
    list(whole)
    state = whole.state_dict()
    assert state["position"] == whole.samples
    g = next(g for g in range(2, 50) if whole.samples % g)
    wider = PackReader(build, SEQ, seed=1, batch_size=g)
    wider.load_state_dict(state)
    assert (wider.epoch, list(wider)) == (2, [])
    wider.set_epoch(3)
    assert len(list(wider)) == wider.samples // g
