"""UnitReader on real builds (templated with SentencePiece, chat and preference with a
byte-level BPE): every record once per epoch across ranks, lockstep, the same global
order for every world size, seeded shuffles, exact and elastic resume, labels and pairs
against masks computed here from length_field.json, corruption named by shard and row,
and a memory:// copy read like the local build."""
import json
import pickle
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import (IN_MEMORY, build_qa_units, chatml_bpe, copy_to_memory_fs, sentence,
                      write_jsonl)
from mintdim_beam import UnitReader, pipeline
from mintdim_beam.core import errors

TOKENS = 512  # rows per global batch: 32 (unit 16), 16 (unit 32), 8 (unit 64)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test's readers share a cache of their own (a memory:// copy's would go to
    the user's cache folder, kept across runs)."""
    monkeypatch.setenv("MINTDIM_BEAM_READER_CACHE", str(tmp_path / "reader-cache"))


@pytest.fixture(scope="module")
def templated(tmp_path_factory, tokenizers_dir) -> Path:
    """~300 records over three units, 7 per shard; overflow `skip` leaves gaps in the
    sample ids, so ids and ordinals differ."""
    return build_qa_units(tmp_path_factory.mktemp("templated"), tokenizers_dir, samples=320,
                          seed=5, long_every=9, per_shard=7)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> Path:
    return chatml_bpe(tmp_path_factory.mktemp("bpe"), 7, 400)


def _bpe_job(source, bpe, out, sizes, overflow="truncate", **tokenizer):
    return (source.tokenizer.hf_json(files=[str(bpe / "tokenizer.json")],
                                     config=str(bpe / "tokenizer_config.json"), **tokenizer)
            .units(sizes=[sizes], build_batch=[8]).output.dir(str(out), samples_per_shard=[9])
            .run(on_overflow=overflow, on_template_unk="abort", pipeline_options=list(IN_MEMORY)))


def _dialogues(work: Path, count: int = 60) -> Path:
    """`count` dialogues of one or two trained turns (none is split at max_turns=2, so
    sample ids are unique), a system message in every third."""
    rng = random.Random(11)
    rows = []
    for i in range(count):
        messages = [{"role": "system", "content": sentence(rng, 2, 5)}] if i % 3 == 0 else []
        for _ in range(1 + i % 2):
            messages += [{"role": "user", "content": sentence(rng, 2, 8)},
                         {"role": "assistant", "content": sentence(rng, 1, 12)}]
        rows.append({"messages": messages})
    return write_jsonl(work / "chat.jsonl", rows)


def _chat_build(work: Path, bpe: Path, **tokenizer) -> Path:
    source = pipeline("unit-build").source.chat(files=[str(_dialogues(work))], format="messages",
                                                chat_template="chatml", max_turns=2)
    _bpe_job(source, bpe, work / "out", [64, 128], **tokenizer)
    return work / "out"


@pytest.fixture(scope="module")
def chat(tmp_path_factory, bpe) -> Path:
    return _chat_build(tmp_path_factory.mktemp("chat"), bpe)


@pytest.fixture(scope="module")
def pad_is_eos(tmp_path_factory, bpe) -> Path:
    """The same dialogues with pad = EOS (`<|im_end|>`, which ends every turn)."""
    return _chat_build(tmp_path_factory.mktemp("pad-eos"), bpe, pad_token="<|im_end|>")


@pytest.fixture(scope="module")
def preference(tmp_path_factory, bpe) -> Path:
    work = tmp_path_factory.mktemp("pref")
    rng = random.Random(13)
    rows = [{"prompt": [{"role": "user", "content": sentence(rng, 2, 8)}],
             "chosen": [{"role": "assistant", "content": sentence(rng, 1, 10)}],
             "rejected": [{"role": "assistant", "content": sentence(rng, 1, 16)}]}
            for _ in range(50)]
    write_jsonl(work / "pairs.jsonl", rows)
    _bpe_job(pipeline("unit-build").source.preference(files=[str(work / "pairs.jsonl")],
                                                      chat_template="chatml"),
             bpe, work / "out", [64, 128])
    return work / "out"


# -- an independent view of a build: sample_index rows, records read with np.fromfile ----
def _records(out: Path) -> dict:
    """sample_id -> (unit, segment lengths, payload ids) straight from the files."""
    layout = json.loads((out / "length_field.json").read_text())
    n = len(layout["sequence_template"])
    dtype = {"uint16": "<u2", "uint32": "<u4"}[layout["token_dtype"]]
    shards, seen, found = {}, {}, {}
    for line in (out / "sample_index.jsonl").read_text().splitlines():
        row = json.loads(line)
        unit, path = row["unit_size"], row["shard_path"]
        if path not in shards:
            shards[path] = np.fromfile(out / path, dtype=dtype).reshape(-1, 1 + n + unit)
        k = seen.get(path, 0)
        seen[path] = k + 1
        record = shards[path][k].astype(np.int64)
        found[row["sample_id"]] = (unit, record[1:1 + n], record[1 + n:])
    return found


def _epoch(out, world, **kw) -> list:
    """Per step: (unit, [each rank's batch])."""
    tokens = kw.pop("tokens", TOKENS)
    readers = [UnitReader(str(out), tokens_per_step=tokens, rank=r, world_size=world, **kw)
               for r in range(world)]
    return _steps(readers)


def _steps(readers) -> list:
    per_rank = [list(r) for r in readers]
    assert len({len(p) for p in per_rank}) == 1  # lockstep: same step count on every rank
    return [(batches[0].unit_size, list(batches)) for batches in zip(*per_rank)]


def _global_ids(steps) -> list:
    return [np.concatenate([b.sample_ids for b in batches]).tolist() for _, batches in steps]


@pytest.mark.parametrize("world", [1, 2, 4])
def test_every_record_exactly_once_per_epoch_in_lockstep(templated, world):
    records = _records(templated)
    steps = _epoch(templated, world, seed=3)
    ids = [i for step in _global_ids(steps) for i in step if i >= 0]
    assert sorted(ids) == sorted(records) and len(ids) == len(set(ids))
    assert max(records) > len(records)  # skipped overflows left gaps in the sample ids
    for unit, batches in steps:
        rows = max(1, TOKENS // unit)
        assert {b.input_ids.shape for b in batches} == {(rows // world, unit)}
        for batch in batches:
            assert batch.input_ids.dtype == batch.labels.dtype == batch.sample_ids.dtype == np.int64
            for sid, ids_row in zip(batch.sample_ids, batch.input_ids):
                if sid >= 0:
                    assert records[sid][0] == unit
                    assert ids_row.tolist() == records[sid][2].tolist()


def test_partial_batches_are_padding_rows_at_the_end(templated):
    pad = json.loads((templated / "length_field.json").read_text())["pad_token_id"]
    steps = _epoch(templated, 4)
    padded = 0
    for unit, batches in steps:
        global_ids = np.concatenate([b.sample_ids for b in batches])
        real = global_ids >= 0
        assert real[:real.sum()].all()  # real rows first, then padding
        for b in batches:
            assert (b.input_ids[~b.valid] == pad).all() and (b.labels[~b.valid] == -100).all()
        padded += (~real).sum()
    counts = json.loads((templated / "histogram.json").read_text())
    assert padded == sum(-c % max(1, TOKENS // int(u)) for u, c in counts.items())
    assert len(_epoch(templated, 2, last="drop")) == sum(
        c // max(1, TOKENS // int(u)) for u, c in counts.items())


def test_the_global_sequence_is_the_same_for_every_world_size(templated):
    one = _global_ids(_epoch(templated, 1, seed=9))
    assert one == _global_ids(_epoch(templated, 2, seed=9)) == _global_ids(_epoch(templated, 4, seed=9))


def test_a_pickled_reader_carries_no_shard_bytes(templated):
    reader = UnitReader(str(templated), tokens_per_step=TOKENS)
    first = reader.batch_at(0)
    copy = pickle.loads(pickle.dumps(reader))
    assert len(pickle.dumps(reader)) < 20_000
    assert np.array_equal(copy.batch_at(0).input_ids, first.input_ids)


def test_order_depends_on_seed_and_epoch_only(templated):
    def order(seed, epoch):
        reader = UnitReader(str(templated), tokens_per_step=TOKENS, seed=seed)
        reader.set_epoch(epoch)
        return [b.sample_ids.tolist() for b in reader]

    base = order(1, 0)
    assert base == order(1, 0)
    assert base != order(2, 0) and base != order(1, 1) and order(1, 1) == order(1, 1)
    units = [UnitReader(str(templated), tokens_per_step=TOKENS, seed=s).batch_at(0).unit_size
             for s in range(12)]
    assert len(set(units)) > 1  # the steps of the units are interleaved, not unit by unit


@pytest.mark.parametrize("before, after", [(2, 2), (1, 4), (4, 2)])
def test_resume_continues_exactly_also_with_another_world_size(templated, before, after):
    whole = _global_ids(_epoch(templated, 1, seed=5))
    k = 5
    first = [UnitReader(str(templated), tokens_per_step=TOKENS, seed=5, rank=r, world_size=before)
             for r in range(before)]
    head = []
    for reader in first:
        reader.set_epoch(0)
        it = iter(reader)
        head.append([next(it) for _ in range(k)])
    state = json.loads(json.dumps(first[0].state_dict()))
    assert state["step"] == k and all(r.state_dict() == first[0].state_dict() for r in first)
    assert len(json.dumps(state)) < 400
    rest = []
    for r in range(after):
        reader = UnitReader(str(templated), tokens_per_step=TOKENS, seed=5, rank=r, world_size=after)
        reader.load_state_dict(state)
        reader.set_epoch(0)  # the usual loop: the same epoch does not restart it
        rest.append(reader)
    got = [np.concatenate([h[i].sample_ids for h in head]).tolist() for i in range(k)]
    got += _global_ids(_steps(rest))
    assert got == whole
    assert rest[0].state_dict()["step"] == len(whole)
    rest[0].set_epoch(1)
    assert rest[0].state_dict()["step"] == 0


def test_a_state_of_another_build_or_order_is_refused(templated, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(templated, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["note"] = "another build"
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    state = UnitReader(str(templated), tokens_per_step=TOKENS).state_dict()
    with pytest.raises(errors.ReaderStateError) as info:
        UnitReader(str(copy), tokens_per_step=TOKENS).load_state_dict(state)
    assert info.value.kwargs["key"] == "fingerprint" and "Khoá" in info.value.vietnamese
    with pytest.raises(errors.ReaderStateError, match="tokens_per_step"):
        UnitReader(str(templated), tokens_per_step=1024).load_state_dict(state)
    with pytest.raises(errors.ReaderStateError, match="seed"):
        UnitReader(str(templated), tokens_per_step=TOKENS, seed=1).load_state_dict(state)


def test_a_world_size_that_does_not_divide_a_batch_is_refused(templated):
    with pytest.raises(ValueError, match="unit 64: 2 rows"):
        UnitReader(str(templated), tokens_per_step=128, world_size=4)


@pytest.mark.parametrize("step, shown", [(-1, "-1"), ("past", None), ("3", "'3'"),
                                         (3.0, "3.0"), (True, "True"), (None, "missing")])
def test_a_state_step_outside_the_epoch_or_not_an_int_is_refused(templated, step, shown):
    reader = UnitReader(str(templated), tokens_per_step=TOKENS, seed=2)
    reader.set_epoch(1)
    steps = len(reader)
    state = reader.state_dict()
    if step is None:
        del state["step"]
    else:
        state["step"] = steps + 1 if step == "past" else step
    fresh = UnitReader(str(templated), tokens_per_step=TOKENS, seed=2)
    with pytest.raises(errors.ReaderStateError) as info:
        fresh.load_state_dict(state)
    assert info.value.kwargs["key"] == "step"
    assert info.value.kwargs["found"] == (shown or str(steps + 1))
    assert f"an int in 0..{steps} (epoch 1 has {steps} steps" in info.value.english
    assert f"trong khoảng 0..{steps}" in info.value.vietnamese
    assert (fresh.epoch, fresh.step) == (0, 0)  # a refused state leaves the reader as it was
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is errors.ReaderStateError and str(copy) == str(info.value)


def test_a_state_at_the_end_of_its_epoch_is_accepted_and_bad_epochs_are_not(templated):
    reader = UnitReader(str(templated), tokens_per_step=TOKENS, seed=2)
    whole = [b.sample_ids.tolist() for b in reader]
    state = reader.state_dict()
    assert state["step"] == len(whole)
    resumed = UnitReader(str(templated), tokens_per_step=TOKENS, seed=2)
    resumed.load_state_dict(state)
    assert [b.sample_ids.tolist() for b in resumed] == whole  # after the end: the epoch again
    for epoch in (-1, "0", 0.0):
        with pytest.raises(errors.ReaderStateError, match="epoch"):
            resumed.load_state_dict({**state, "epoch": epoch})
    with pytest.raises(errors.ReaderStateError, match="steps_in_epoch"):
        resumed.load_state_dict({**state, "steps_in_epoch": len(whole) + 1})
    with pytest.raises(errors.ReaderStateError, match="seed"):
        resumed.load_state_dict({**state, "seed": 2.0})  # equal, but not an int
    with pytest.raises(errors.ReaderStateError, match="a dict made by state_dict"):
        resumed.load_state_dict(json.dumps(state))


@pytest.mark.parametrize("step", [-1, "past", "0", 0.0, False])
def test_batch_at_takes_a_step_of_the_epoch_only(templated, step):
    reader = UnitReader(str(templated), tokens_per_step=TOKENS)
    steps = len(reader)
    assert reader.batch_at(np.int64(steps - 1)).step == steps - 1  # numpy ints are ints
    with pytest.raises(errors.ReaderArgumentError) as info:
        reader.batch_at(steps if step == "past" else step)
    assert isinstance(info.value, ValueError) and info.value.kwargs["argument"] == "step"
    assert f"an int in 0..{steps - 1} (epoch 0 has {steps} steps)" in str(info.value)


@pytest.mark.parametrize("argument, value, allowed", [
    ("tokens_per_step", 10**9, "an int in 1..16,777,216 (2**24"),
    ("tokens_per_step", (1 << 24) + 1, "an int in 1..16,777,216"),
    ("tokens_per_step", 0, "an int in 1..16,777,216"),
    ("tokens_per_step", "512", "an int in 1..16,777,216"),
    ("tokens_per_step", 512.0, "an int in 1..16,777,216"),
    ("seed", -1, "an int in 0..9,223,372,036,854,775,807"),
    ("seed", True, "an int in 0.."),
    ("world_size", 0, "an int >= 1"),
    ("rank", 2, "an int in 0..1 (world_size 2)"),
    ("last", "keep", "'pad' or 'drop'"),
    ("pairs", 1, "True or False"),
])
def test_reader_arguments_out_of_range_are_refused_with_the_range(templated, argument, value,
                                                                  allowed):
    kw = dict(tokens_per_step=TOKENS, world_size=2)
    kw[argument] = value
    with pytest.raises(errors.ReaderArgumentError) as info:
        UnitReader(str(templated), **kw)
    assert info.value.kwargs["argument"] == argument and allowed in info.value.kwargs["allowed"]
    assert info.value.kwargs["value"] == repr(value)
    assert "Cho phép" in info.value.vietnamese


def test_the_bound_of_tokens_per_step_itself_and_epochs_are_checked(templated):
    reader = UnitReader(str(templated), tokens_per_step=1 << 24)  # made; no batch is read
    assert reader.state_dict()["tokens_per_step"] == 1 << 24
    for epoch in (-1, "1", 1.0):
        with pytest.raises(errors.ReaderArgumentError, match="epoch"):
            reader.set_epoch(epoch)
    reader.set_epoch(np.int64(3))
    assert reader.state_dict()["epoch"] == 3


def _expected_labels(out: Path, lengths, ids, targets, ignore=-100) -> list:
    """Labels from length_field.json and the segment lengths, one position at a time."""
    names = json.loads((out / "length_field.json").read_text())["sequence_template"]
    labels = [ignore] * len(ids)
    pos = 0
    for name, length in zip(names, lengths):
        for p in range(pos, pos + int(length)):
            if targets(name):
                labels[p] = int(ids[p])
        pos += int(length)
    return labels


def _check_labels(out, steps, targets, ignore=-100):
    records = _records(out)
    checked = 0
    for _, batches in steps:
        for b in batches:
            for sid, row, labels in zip(b.sample_ids, b.input_ids, b.labels):
                if sid >= 0:
                    _, lengths, _ = records[sid]
                    assert labels.tolist() == _expected_labels(out, lengths, row, targets, ignore)
                    checked += 1
    assert checked == len(records)


def test_templated_labels_default_to_the_last_field(templated):
    _check_labels(templated, _epoch(templated, 2), lambda name: name == "a")
    _check_labels(templated, _epoch(templated, 1, target=["q", "token_*"], ignore_id=-1),
                  lambda name: name != "a", ignore=-1)
    with pytest.raises(ValueError, match="matches no segment"):
        UnitReader(str(templated), tokens_per_step=TOKENS, target=["answer"])


def test_chat_labels_default_to_the_trained_turns(chat):
    layout = json.loads((chat / "length_field.json").read_text())
    assert "trained" in [f["kind"] for f in layout["length_fields"]]
    _check_labels(chat, _epoch(chat, 2, tokens=256), lambda name: name.startswith("assistant_"))
    _check_labels(chat, _epoch(chat, 1, tokens=256, target=["assistant_1"]),
                  lambda name: name == "assistant_1")


def test_lengths_and_attention_mask_come_from_segment_lengths_when_pad_is_eos(pad_is_eos, bpe):
    pad = json.loads((pad_is_eos / "length_field.json").read_text())["pad_token_id"]
    vocab = json.loads((bpe / "tokenizer.json").read_text())["added_tokens"]
    assert pad == next(t["id"] for t in vocab if t["content"] == "<|im_end|>")
    records = _records(pad_is_eos)
    rows = eos_inside = 0
    for unit, batches in _epoch(pad_is_eos, 2, tokens=256):
        for b in batches:
            assert b.lengths.dtype == b.attention_mask.dtype == np.int64
            assert b.attention_mask.shape == b.input_ids.shape
            for sid, ids, mask, n in zip(b.sample_ids, b.input_ids, b.attention_mask, b.lengths):
                n = int(n)
                assert n == (int(records[sid][1].sum()) if sid >= 0 else 0)
                assert mask.tolist() == [1] * n + [0] * (unit - n)
                eos_inside += int((ids[:n] == pad).sum())
                rows += sid >= 0
    assert rows == len(records)
    # every record ends its turns with EOS = pad: `ids != pad` would drop them all
    assert eos_inside >= rows


def test_preference_pairs(preference):
    layout = json.loads((preference / "length_field.json").read_text())
    names = layout["sequence_template"]
    pad = layout["pad_token_id"]
    assert names[-3:] == ["prompt", "chosen", "rejected"]
    records = _records(preference)
    with pytest.raises(ValueError, match="pairs=True"):
        UnitReader(str(preference), tokens_per_step=256)
    seen = []
    for unit, batches in _epoch(preference, 2, tokens=256, pairs=True):
        for b in batches:
            assert b.input_ids is None and b.chosen_input_ids.shape == (len(b.sample_ids), unit)
            for i, sid in enumerate(b.sample_ids):
                if sid < 0:
                    continue
                seen.append(int(sid))
                _, lengths, payload = records[sid]
                p, c, r = int(lengths[:-2].sum()), int(lengths[-2]), int(lengths[-1])
                prompt = payload[:p].tolist()
                chosen = payload[p:p + c].tolist()
                rejected = payload[p + c:p + c + r].tolist()
                fill = lambda seq: seq + [pad] * (unit - len(seq))  # noqa: E731
                assert b.chosen_input_ids[i].tolist() == fill(prompt + chosen)
                assert b.rejected_input_ids[i].tolist() == fill(prompt + rejected)
                assert b.chosen_labels[i].tolist() == [-100] * p + chosen + [-100] * (unit - p - c)
                assert b.rejected_labels[i].tolist() == [-100] * p + rejected + [-100] * (unit - p - r)
                assert (b.chosen_lengths[i], b.rejected_lengths[i]) == (p + c, p + r)
                assert b.chosen_attention_mask[i].tolist() == [1] * (p + c) + [0] * (unit - p - c)
                assert b.rejected_attention_mask[i].tolist() == [1] * (p + r) + [0] * (unit - p - r)
    assert sorted(seen) == sorted(records)


def _corrupt(templated, tmp_path, slot, value):
    """A copy of the build with one token slot of unit 32's shard 1, row 3 rewritten."""
    copy = tmp_path / "bad"
    shutil.copytree(templated, copy)
    layout = json.loads((copy / "length_field.json").read_text())
    width = 1 + len(layout["sequence_template"]) + 32
    path = copy / "unit_32/shard_000001.bin"
    data = np.fromfile(path, dtype="<u2").reshape(-1, width)
    data[3, slot] = value
    data.tofile(path)
    return copy


@pytest.mark.parametrize("slot, value, words", [(0, 7, "magic is 7"),
                                                (1, 30, "more than the unit size 32")])
def test_a_corrupt_record_names_its_shard_and_row(templated, tmp_path, slot, value, words):
    copy = _corrupt(templated, tmp_path, slot, value)
    reader = UnitReader(str(copy), tokens_per_step=TOKENS)
    with pytest.raises(errors.ShardRecordError) as info:
        for _ in reader:
            pass
    assert info.value.kwargs["shard"] == "unit_32/shard_000001.bin"
    assert info.value.kwargs["row"] == 3 and words in info.value.kwargs["problem"]


def test_a_short_or_missing_shard_is_refused_when_opened(templated, tmp_path):
    copy = tmp_path / "short"
    shutil.copytree(templated, copy)
    path = copy / "unit_16/shard_000000.bin"
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(errors.ShardRecordError, match="unit_16/shard_000000.bin"):
        UnitReader(str(copy), tokens_per_step=TOKENS)
    path.unlink()
    with pytest.raises(errors.ShardRecordError, match="missing"):
        UnitReader(str(copy), tokens_per_step=TOKENS)


def test_a_memory_copy_reads_the_same_batches(templated):
    import fsspec

    fs = fsspec.filesystem("memory")
    root = "memory://reader-test/build"
    copy_to_memory_fs(templated, root)
    try:
        for world in (1, 2):
            local, remote = _epoch(templated, world, seed=4), _epoch(root, world, seed=4)
            assert len(local) == len(remote)
            for (_, a), (_, b) in zip(local, remote):
                for x, y in zip(a, b):
                    assert np.array_equal(x.sample_ids, y.sample_ids)
                    assert np.array_equal(x.input_ids, y.input_ids)
                    assert np.array_equal(x.labels, y.labels)
        state = UnitReader(str(templated), tokens_per_step=TOKENS).state_dict()
        UnitReader(root, tokens_per_step=TOKENS).load_state_dict(state)  # the same build
    finally:
        fs.rm("/reader-test", recursive=True)


# -- packed steps ------------------------------------------------------------------------
PACK = 64  # the largest unit of `templated`: its longest records fill a row alone


def _bfd_reference(lengths, capacity) -> list:
    """Best-fit decreasing the plain way: longest first (ties in order), each into the
    open row with the least room that holds it (the lowest such row), else a new row."""
    rooms, rows = [], [None] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fits = [(room, r) for r, room in enumerate(rooms) if room >= lengths[i]]
        if fits:
            _, r = min(fits)
        else:
            r = len(rooms)
            rooms.append(capacity)
        rooms[r] -= lengths[i]
        rows[i] = r
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_best_fit_decreasing_is_the_plain_algorithm(seed):
    from mintdim_beam.read import packing

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 300, size=400)
    lengths[::7] = 300  # rows filled exactly and many ties
    rows = packing.best_fit_decreasing(lengths, 300)
    assert rows.tolist() == _bfd_reference(lengths.tolist(), 300)
    assert np.bincount(rows, weights=lengths).max() <= 300


def test_a_pack_plan_holds_every_record_once_in_rows_of_one_window():
    from mintdim_beam.read import packing

    lengths = np.random.default_rng(1).integers(1, 100, size=3000)
    plan = packing.pack_plan(lengths, 128, 8, 4, seed=3, epoch=2, last="pad")
    records, starts = plan.every_row()
    assert sorted(records.tolist()) == list(range(3000))
    fill = np.add.reduceat(lengths[records], starts[:-1])
    assert fill.max() <= 128 and plan.rows == len(fill)
    # windows: ~8 rows' worth of tokens of the epoch's order each, packed alone
    perm = np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 2, 2, 0]))).permutation(3000)
    position = np.empty(3000, dtype=np.int64)
    position[perm] = np.arange(3000)
    window = packing.window_ids(lengths[perm], 8 * 128)[position]
    firsts = []
    for lo, hi in zip(starts[:-1], starts[1:]):
        members = records[lo:hi]
        assert len(set(window[members])) == 1  # a row never spans two windows
        assert (np.diff(position[members]) > 0).all()  # in window order within the row
        firsts.append(position[members[0]])
    assert firsts == sorted(firsts)  # rows follow the order, window after window
    assert len(set(window.tolist())) > 20
    again = packing.pack_plan(lengths, 128, 8, 4, seed=3, epoch=2, last="pad")
    other = packing.pack_plan(lengths, 128, 8, 4, seed=3, epoch=3, last="pad")
    assert all(np.array_equal(a, b) for a, b in zip(again.every_row(), (records, starts)))
    assert not np.array_equal(other.every_row()[0], records)


def _packed(out, world, tokens=TOKENS, pack_length=PACK, **kw) -> list:
    """Per step: (pack_length, [each rank's packed batch])."""
    return _steps([UnitReader(str(out), tokens_per_step=tokens, rank=r, world_size=world,
                              pack_length=pack_length, **kw) for r in range(world)])


def _check_packed_rows(out, batch, records, targets, ignore=-100) -> list:
    """Each row against the records read straight from the files: the records' own ids
    one after another, their labels (ignore at each first token), positions from 0,
    document ids, lengths and cu_seqlens; padding after them. Returns the sample ids."""
    pad = json.loads((out / "length_field.json").read_text())["pad_token_id"]
    width = batch.pack_length
    seen, segments = [], []
    for i in range(len(batch.input_ids)):
        ids, labels, positions, docs = [], [], [], []
        count = int((batch.sample_ids[i] >= 0).sum())
        assert (batch.sample_ids[i][count:] == -1).all() and (batch.seq_lens[i][count:] == 0).all()
        for j in range(count):
            _, lengths, payload = records[int(batch.sample_ids[i][j])]
            n = int(lengths.sum())
            assert batch.seq_lens[i][j] == n
            mine = _expected_labels(out, lengths, payload, targets, ignore)[:n]
            ids += payload[:n].tolist()
            labels += [ignore] + mine[1:]
            positions += list(range(n))
            docs += [j] * n
            segments.append(n)
            seen.append(int(batch.sample_ids[i][j]))
        tail = width - len(ids)
        assert tail >= 0 and batch.lengths[i] == len(ids)
        assert batch.valid[i] == (count > 0)
        assert batch.input_ids[i].tolist() == ids + [pad] * tail
        assert batch.labels[i].tolist() == labels + [ignore] * tail
        assert batch.position_ids[i].tolist() == positions + list(range(tail))
        assert batch.document_ids[i].tolist() == docs + [-1] * tail
        segments += [tail] if tail else []
    assert batch.cu_seqlens.dtype == np.int32
    assert batch.cu_seqlens.tolist() == np.concatenate([[0], np.cumsum(segments)]).tolist()
    assert batch.max_seqlen == max(segments) and batch.cu_seqlens[-1] == batch.input_ids.size
    return seen


@pytest.mark.parametrize("world", [1, 2, 4])
def test_packed_rows_hold_every_record_once_with_its_own_ids_and_labels(templated, world):
    records = _records(templated)
    steps = _packed(templated, world, seed=3)
    seen = []
    for width, batches in steps:
        assert width == PACK
        for batch in batches:  # lockstep: one shape for every rank and step
            assert batch.input_ids.shape == (TOKENS // PACK // world, PACK)
            assert batch.attention_mask is None  # ones over a packed row would be wrong
            for name in ("input_ids", "labels", "position_ids", "document_ids", "seq_lens"):
                assert getattr(batch, name).dtype == np.int64, name
            seen += _check_packed_rows(templated, batch, records, lambda name: name == "a")
    assert sorted(seen) == sorted(records)  # every record exactly once
    reader = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=3)
    used = sum(int(b.seq_lens.sum()) for _, bs in steps for b in bs)
    assert reader.padding_fraction() == pytest.approx(1 - used / (len(steps) * TOKENS))
    counts = [len(set(b.units[b.units >= 0].tolist())) for _, bs in steps for b in bs]
    assert max(counts) == 3  # records of all three units share steps


def test_packed_labels_ignore_every_records_first_token_even_in_a_target(templated):
    """With every segment a target the unpacked label at a record's first token is the
    token itself; packed it is ignore_id (the shifted loss would cross into it)."""
    records = _records(templated)
    seen = []
    for _, (batch,) in _packed(templated, 1, seed=6, target=["*"], ignore_id=-1):
        seen += _check_packed_rows(templated, batch, records, lambda name: True, ignore=-1)
        starts = batch.position_ids == 0
        assert (batch.labels[starts & (batch.document_ids >= 0)] == -1).all()
    assert sorted(seen) == sorted(records)
    unpacked = UnitReader(str(templated), tokens_per_step=TOKENS, target=["*"]).batch_at(0)
    assert (unpacked.labels[unpacked.valid, 0] != -100).all()


def test_the_block_causal_mask_lets_each_record_see_only_its_own_past(templated):
    batch = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK,
                       seed=2).batch_at(1)
    mask = batch.block_causal_mask()
    assert mask.shape == (len(batch.input_ids), 1, PACK, PACK) and mask.dtype == bool
    for row, doc in enumerate(batch.document_ids.tolist()):
        for i in range(PACK):
            assert np.flatnonzero(mask[row, 0, i]).tolist() == [
                j for j in range(i + 1) if doc[j] == doc[i]]
    with pytest.raises(errors.ReaderArgumentError, match="pack_length=L"):
        UnitReader(str(templated), tokens_per_step=TOKENS).batch_at(0).block_causal_mask()


def test_packed_chat_labels_are_the_trained_turns(chat):
    records = _records(chat)
    seen = []
    for _, batches in _packed(chat, 2, tokens=512, pack_length=256, seed=1):
        for batch in batches:
            seen += _check_packed_rows(chat, batch, records,
                                       lambda name: name.startswith("assistant_"))
    assert sorted(seen) == sorted(records)


def test_packed_global_sequence_and_resume_are_the_same_for_every_world_size(templated):
    def ids(steps):  # per step, the global batch's rows in rank order, each its records
        return [[[i for i in row if i >= 0] for b in bs for row in b.sample_ids.tolist()]
                for _, bs in steps]

    whole = ids(_packed(templated, 1, seed=5))
    assert whole == ids(_packed(templated, 2, seed=5)) == ids(_packed(templated, 4, seed=5))
    k = 3
    first = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=5)
    head = ids([(0, [b]) for _, b in zip(range(k), first)])
    state = json.loads(json.dumps(first.state_dict()))
    assert (state["step"], state["pack_length"], state["pack_window"]) == (k, PACK, 1024)
    rest = []
    for r in range(4):
        reader = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=5,
                            rank=r, world_size=4)
        reader.load_state_dict(state)
        rest.append(reader)
    assert head + ids(_steps(rest)) == whole
    epoch_one = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=5)
    epoch_one.set_epoch(1)
    assert ids([(0, [b]) for b in epoch_one]) != whole


def test_packed_states_are_refused_by_other_packings(templated):
    kw = dict(tokens_per_step=TOKENS, seed=5)
    state = UnitReader(str(templated), pack_length=PACK, **kw).state_dict()
    for other, key in ((dict(pack_length=128), "pack_length"),
                       (dict(pack_length=PACK, pack_window=16), "pack_window"), ({}, "pack_length")):
        with pytest.raises(errors.ReaderStateError) as info:
            UnitReader(str(templated), **other, **kw).load_state_dict(state)
        assert info.value.kwargs["key"] == key
    with pytest.raises(errors.ReaderStateError, match="pack_length"):
        UnitReader(str(templated), pack_length=PACK, **kw).load_state_dict(
            UnitReader(str(templated), **kw).state_dict())


def test_a_record_longer_than_the_pack_length_is_refused_naming_its_unit(templated):
    tokens = {u: np.array([json.loads(line)["token_count"] for line in
                           (templated / "sample_index.jsonl").read_text().splitlines()
                           if json.loads(line)["unit_size"] == u]) for u in (16, 32, 64)}
    longest = int(tokens[64].max())
    with pytest.raises(errors.ReaderArgumentError) as info:
        UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=longest - 1)
    allowed = info.value.kwargs["allowed"]
    assert info.value.kwargs["argument"] == "pack_length"
    assert allowed.startswith(f"at least {longest}, the longest record (unit 64, record ")
    assert f"records longer than {longest - 1} tokens: unit 64: {(tokens[64] >= longest).sum()};" in allowed
    with pytest.raises(errors.ReaderArgumentError) as info:  # two units' records too long
        UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=30)
    assert (f"unit 32: {(tokens[32] > 30).sum()}, unit 64: {(tokens[64] > 30).sum()};"
            in info.value.kwargs["allowed"])
    assert isinstance(info.value, ValueError) and "Cho phép: ít nhất" in info.value.vietnamese
    UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=longest)  # fits
    for value in (0, "64", 64.0, (1 << 24) + 1):
        with pytest.raises(errors.ReaderArgumentError, match="pack_length"):
            UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=value)
    with pytest.raises(errors.ReaderArgumentError, match="pack_window"):
        UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, pack_window=0)
    with pytest.raises(errors.ReaderArgumentError, match="global batch of 2 rows"):
        UnitReader(str(templated), tokens_per_step=128, pack_length=PACK, world_size=4)


def test_packed_last_drop_and_pad(templated):
    pad = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=2)
    drop = UnitReader(str(templated), tokens_per_step=TOKENS, pack_length=PACK, seed=2,
                      last="drop")
    rows = pad._epoch_plan().rows
    per_step = TOKENS // PACK
    assert rows % per_step  # this epoch ends with a partial step
    assert (len(pad), len(drop)) == (-(-rows // per_step), rows // per_step)
    last = pad.batch_at(len(pad) - 1)
    assert (~last.valid).sum() == per_step - rows % per_step  # empty rows fill the step
    assert (last.input_ids[~last.valid] == pad.build.pad_id).all()
    assert (last.document_ids[~last.valid] == -1).all()
    kept = [b.sample_ids.tolist() for b in drop]
    assert kept == [pad.batch_at(k).sample_ids.tolist() for k in range(len(drop))]


def test_a_token_count_that_disagrees_with_the_record_is_named(templated, tmp_path):
    """The plan takes each record's tokens from its own segment lengths in the shard,
    locally and for a URL build (by byte ranges into the reader's cache, never from
    sample_index.jsonl), so a wrong `token_count` in sample_index.jsonl changes nothing;
    a record rewritten in place after the cache was written (its shard's size and mtime
    kept) disagrees with the cached count, and is named when it is read."""
    import os

    import fsspec

    copy = tmp_path / "counts"
    shutil.copytree(templated, copy)
    lines = (copy / "sample_index.jsonl").read_text().splitlines()
    row = json.loads(lines[3])
    row["token_count"] -= 1
    lines[3] = json.dumps(row)
    (copy / "sample_index.jsonl").write_text("\n".join(lines) + "\n")
    kw = dict(tokens_per_step=TOKENS, pack_length=PACK)
    expected = [b.input_ids.tolist() for b in UnitReader(str(templated), **kw)]
    assert [b.input_ids.tolist() for b in UnitReader(str(copy), **kw)] == expected
    fs = fsspec.filesystem("memory")
    root = "memory://reader-test/counts"
    copy_to_memory_fs(copy, root)
    try:
        assert [b.input_ids.tolist() for b in UnitReader(root, **kw, cache_dir=tmp_path / "c")] \
            == expected
    finally:
        fs.rm("/reader-test", recursive=True)
    layout = json.loads((copy / "length_field.json").read_text())
    width = 1 + len(layout["sequence_template"]) + 32
    path = copy / "unit_32/shard_000001.bin"
    seen = path.stat()
    data = np.fromfile(path, dtype="<u2").reshape(-1, width)
    data[3, 1] -= 1  # its first segment one token shorter: still a valid record
    data.tofile(path)
    os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
    reader = UnitReader(str(copy), **kw)
    with pytest.raises(errors.ShardRecordError) as info:
        for _ in reader:
            pass
    assert "the reader's cached token count says" in info.value.kwargs["problem"]
    assert info.value.kwargs["shard"] == "unit_32/shard_000001.bin"
    assert info.value.kwargs["row"] == 3


def test_a_memory_copy_reads_the_same_packed_batches(templated):
    import fsspec

    fs = fsspec.filesystem("memory")
    root = "memory://reader-test/packed"
    for path in templated.rglob("*"):
        if path.is_file():
            fs.pipe(f"{root}/{path.relative_to(templated).as_posix()}", path.read_bytes())
    try:
        local, remote = _packed(templated, 2, seed=4), _packed(root, 2, seed=4)
        assert len(local) == len(remote)
        for (_, a), (_, b) in zip(local, remote):
            for x, y in zip(a, b):
                for name in ("sample_ids", "input_ids", "labels", "position_ids", "cu_seqlens"):
                    assert np.array_equal(getattr(x, name), getattr(y, name)), name
    finally:
        fs.rm("/reader-test", recursive=True)


@pytest.fixture(scope="module")
def bundled_chat(tmp_path_factory) -> Path:
    """The bundled dialogues built by examples/chat/chat_build.yaml, as `make demo` does."""
    import subprocess
    import sys

    from conftest import REPO

    work = tmp_path_factory.mktemp("bundled")
    shutil.copytree(REPO / "examples" / "chat", work / "examples" / "chat")
    subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "build",
                    "examples/chat/chat_build.yaml", "--runner=FnApiRunner"],
                   cwd=work, check=True, capture_output=True)
    return work / "artifacts" / "chat_dialogues"


@pytest.mark.parametrize("length", [2048, 1024, 768])
def test_packing_the_bundled_dialogues_leaves_at_most_3_percent_padding(bundled_chat, length):
    """One row a step, so the figure is the rows' own padding; beside it the unpacked
    reader's padding at the same tokens a step, from the histogram and token counts."""
    rows = [json.loads(line) for line in (bundled_chat / "sample_index.jsonl").read_text().splitlines()]
    tokens = sum(row["token_count"] for row in rows)
    assert max(row["token_count"] for row in rows) <= 768
    reader = UnitReader(str(bundled_chat), tokens_per_step=length, pack_length=length, seed=0)
    steps = len(reader)
    assert reader.padding_fraction() == pytest.approx(1 - tokens / (steps * length))
    assert reader.padding_fraction() <= 0.03
    assert steps - tokens / length < 2  # within two rows of the bound
    unpacked = UnitReader(str(bundled_chat), tokens_per_step=length)
    histogram = json.loads((bundled_chat / "histogram.json").read_text())
    slots = sum(-(-count // max(1, length // int(unit))) * max(1, length // int(unit)) * int(unit)
                for unit, count in histogram.items())
    assert unpacked.padding_fraction() == pytest.approx(1 - tokens / slots)
    assert unpacked.padding_fraction() > 0.3


# -- the plan a window at a time, record lengths from the shards -------------------------
@pytest.mark.parametrize("capacity, top", [(300, 300), (64, 20), (40000, 40000)])
def test_best_fit_decreasing_by_runs_of_one_length_is_the_plain_algorithm(capacity, top):
    """Long runs of one length (placed together), rows filled exactly, items of exactly
    half a row; 40000 sorts without the int16 keys. Zero lengths come last and take no
    room: they go to the open row with the least room left (not a full one), so the
    other items' rows are the plain algorithm's on them alone."""
    from mintdim_beam.read import packing

    rng = np.random.default_rng(capacity)
    lengths = rng.choice([0, 1, capacity // 2, capacity // 3, top, *rng.integers(1, top, 6)],
                         size=500)
    rows = packing.best_fit_decreasing(lengths, capacity)
    real = lengths > 0
    assert rows[real].tolist() == _bfd_reference(lengths[real].tolist(), capacity)
    fill = np.bincount(rows, weights=lengths)
    assert fill.max() <= capacity
    open_rows = np.flatnonzero(fill < capacity)
    assert (rows[~real] == open_rows[np.argmax(fill[open_rows])]).all()


def _eager_plan(lengths, pack_length, window_rows, seed, epoch) -> list:
    """The epoch's rows (each a list of records) made the plain way, all windows at once."""
    n = len(lengths)
    perm = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, 2, 0]))).permutation(n)
    in_order = np.asarray(lengths)[perm]
    window = (np.cumsum(in_order) - in_order) // (window_rows * pack_length)
    rows = []
    for w in sorted(set(window.tolist())):
        positions = np.flatnonzero(window == w).tolist()
        local = _bfd_reference([int(in_order[p]) for p in positions], pack_length)
        members = {}  # each row's positions in the order, ascending
        for p, r in zip(positions, local):
            members.setdefault(r, []).append(p)
        rows += [[int(perm[p]) for p in m] for m in sorted(members.values(), key=lambda m: m[0])]
    return rows


@pytest.mark.parametrize("pack_length, window_rows, top, seed",
                         [(128, 8, 100, 0), (128, 1, 128, 1), (100, 3, 60, 2), (40000, 2, 30000, 3)])
def test_the_plan_a_window_at_a_time_is_the_whole_plan(pack_length, window_rows, top, seed):
    from mintdim_beam.read import packing

    lengths = np.random.default_rng(seed).integers(1, top + 1, size=1500)
    expected = _eager_plan(lengths, pack_length, window_rows, seed, 4)
    plan = packing.pack_plan(lengths, pack_length, window_rows, 4, seed=seed, epoch=4, last="pad")
    assert plan.rows == len(expected)
    records, starts = plan.every_row()
    assert [records[a:b].tolist() for a, b in zip(starts[:-1], starts[1:])] == expected
    fresh = packing.pack_plan(lengths, pack_length, window_rows, 4, seed=seed, epoch=4, last="pad")
    taken = []
    for step in range(len(plan)):  # step by step, 2 ranks, packing as it goes
        for rank in range(2):
            first, end, count = fresh.rank_rows(step, rank, 2)
            records, per_row = fresh.take(first, end)
            assert count == 2 and len(per_row) == end - first
            taken += np.split(records, np.cumsum(per_row)[:-1]) if len(per_row) else []
        assert fresh.at_end(step + 1) == (step + 1 == len(plan))
    assert [t.tolist() for t in taken] == expected


def test_a_plan_packs_only_the_windows_a_step_needs_and_checks_an_anchor():
    from mintdim_beam.read import packing

    lengths = np.random.default_rng(5).integers(1, 100, size=3000)
    args = (lengths, 128, 4, 4)
    whole = packing.pack_plan(*args, seed=1, epoch=0, last="pad")
    records, starts = whole.every_row()
    rows = [records[a:b].tolist() for a, b in zip(starts[:-1], starts[1:])]
    assert whole.windows > 50
    fresh = packing.pack_plan(*args, seed=1, epoch=0, last="pad")
    assert fresh.take(*fresh.rank_rows(0, 0, 1)[:2])[0].tolist() == sum(rows[:4], [])
    assert len(fresh._packed) <= 2  # the first step's window(s) only
    # a step whose first row is not its window's first, past the first window
    step = next(k for k in range(len(whole)) if 0 < whole.step_window(k)[1] < 4 * k)
    w, first = whole.step_window(step)
    resumed = packing.pack_plan(*args, seed=1, epoch=0, last="pad")
    assert resumed.anchor(w, first, 4 * step)
    assert resumed.take(4 * step, 4 * step + 4)[0].tolist() == sum(rows[4 * step:4 * step + 4], [])
    assert min(resumed._packed) == w  # none of the windows before it
    assert resumed.take(0, 4)[0].tolist() == sum(rows[:4], [])  # from the start too, consistent
    for bad in [(w, 4 * step + 1), (w - 1, first), (whole.windows, first), (w, -1)]:
        assert not packing.pack_plan(*args, seed=1, epoch=0, last="pad").anchor(*bad, 4 * step)
    wrong = packing.pack_plan(*args, seed=1, epoch=0, last="pad")
    assert wrong.anchor(w, first + 1, 4 * step)  # holds the row, but is not the window's
    with pytest.raises(packing.PlanMismatch, match="does not belong to this plan"):
        wrong.take(0, whole.rows)


def test_packed_resume_packs_the_steps_window_only_and_falls_back_when_it_cannot(templated):
    kw = dict(tokens_per_step=TOKENS, pack_length=PACK, seed=7, pack_window=2)
    whole = UnitReader(str(templated), **kw)
    steps = len(whole)
    assert whole._epoch_plan().windows > 10
    expected = [whole.batch_at(k).sample_ids.tolist() for k in range(steps)]
    saving = UnitReader(str(templated), **kw)
    it = iter(saving)
    for k in range(1, steps):  # a step whose first row is not its window's first
        next(it)
        if 0 < saving.state_dict()["window"]["first_row"] < k * TOKENS // PACK:
            break
    state = json.loads(json.dumps(saving.state_dict()))
    assert state["window"]["epoch"] == 0 and state["step"] == k
    resumed = UnitReader(str(templated), **kw)
    resumed.load_state_dict(state)
    assert next(iter(resumed)).sample_ids.tolist() == expected[k]
    assert min(resumed._epoch_plan()._packed) == state["window"]["index"] > 0
    assert [b.sample_ids.tolist() for b in resumed] == expected[k + 1:]
    window = state["window"]
    for changed in ({"window": None}, {"window": {**window, "index": "3"}},
                    {"window": {**window, "first_row": k * TOKENS // PACK + 1}},
                    {"step": steps - 1}, {"step": 0}):
        other = UnitReader(str(templated), **kw)
        other.load_state_dict({**state, **changed})
        assert next(iter(other)).sample_ids.tolist() == expected[{**state, **changed}["step"]]
    epoch_one = UnitReader(str(templated), **kw)
    epoch_one.set_epoch(1)
    moved = UnitReader(str(templated), **kw)
    other_epoch = {key: v for key, v in state.items() if key != "steps_in_epoch"}
    moved.load_state_dict({**other_epoch, "epoch": 1})  # the window is epoch 0's: not used
    assert next(iter(moved)).sample_ids.tolist() == epoch_one.batch_at(k).sample_ids.tolist()
    with pytest.raises(errors.ReaderStateError, match="step"):
        UnitReader(str(templated), **kw).load_state_dict({**state, "step": steps + 1})


def test_token_counts_come_from_the_shards_and_equal_the_sample_index(templated, chat):
    from mintdim_beam.read.build import parse_sample_index

    for out in (templated, chat):
        build = UnitReader(str(out), tokens_per_step=TOKENS).build
        indexed = parse_sample_index(build)
        for unit in build.sizes:
            assert build.token_counts(unit).tolist() == indexed[unit][1].tolist()


@pytest.mark.parametrize("slot, value, words", [(0, 7, "magic is 7"),
                                                (1, 30, "more than the unit size 32")])
def test_a_corrupt_record_is_named_when_a_packed_reader_is_made(templated, tmp_path, slot,
                                                                value, words):
    copy = _corrupt(templated, tmp_path, slot, value)
    with pytest.raises(errors.ShardRecordError) as info:
        UnitReader(str(copy), tokens_per_step=TOKENS, pack_length=PACK)
    assert info.value.kwargs["shard"] == "unit_32/shard_000001.bin"
    assert info.value.kwargs["row"] == 3 and words in info.value.kwargs["problem"]


def test_the_plans_windows_are_where_the_window_ids_change():
    """The cut by bisection at each multiple of the window's tokens, with zero-length
    records (also last, at a multiple) and records longer than a window."""
    from mintdim_beam.read import packing

    rng = np.random.default_rng(0)
    for trial in range(200):
        lengths = rng.choice([0, 0, 1, 3, 5, 8, 30], size=int(rng.integers(1, 60)))
        window_rows, pack_length = int(rng.integers(1, 6)), int(rng.integers(30, 40))
        plan = packing.pack_plan(lengths, pack_length, window_rows, 2, trial, 0, "pad")
        ids = packing.window_ids(lengths[plan._perm], window_rows * pack_length)
        assert plan._cuts.tolist() == [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(lengths)]


@pytest.mark.parametrize("world, last", [(1, "pad"), (2, "drop"), (4, "pad")])
def test_packed_steps_made_together_when_iterated_are_the_steps_made_alone(templated, world,
                                                                         last):
    """Iterating makes a few steps at once (`PACK_AHEAD_TOKENS`); each is the batch
    `batch_at` makes alone, array for array, the last step's empty rows included."""
    kw = dict(tokens_per_step=TOKENS, pack_length=PACK, seed=9, world_size=world, last=last)
    names = ("input_ids", "labels", "position_ids", "document_ids", "seq_lens", "cu_seqlens",
             "lengths", "sample_ids", "units", "ordinals", "valid")
    for rank in range(world):
        reader = UnitReader(str(templated), rank=rank, **kw)
        alone = UnitReader(str(templated), rank=rank, **kw)
        steps = list(reader)
        assert [b.step for b in steps] == list(range(len(alone)))
        for batch in steps:
            single = alone.batch_at(batch.step)
            for name in names:
                got, want = getattr(batch, name), getattr(single, name)
                assert got.dtype == want.dtype and np.array_equal(got, want), name
            assert batch.max_seqlen == single.max_seqlen
    assert all(getattr(b, name).flags.c_contiguous for b in steps for name in names[:7])


@pytest.mark.parametrize("pack_length", [None, PACK])
def test_state_at_a_step_is_the_state_the_reader_gives_standing_there(templated, pack_length):
    """What the torch adapter saves for the step after the batch the loop last used: the
    same state (packed: with that step's window, so a resume packs it alone) as a reader
    moved there, and it resumes the same batches."""
    kw = dict(tokens_per_step=TOKENS, pack_length=pack_length, seed=5)
    reader = UnitReader(str(templated), **kw)
    reader.set_epoch(1)
    steps = len(reader)
    for step in sorted({0, 1, steps // 2, steps - 1, steps}):
        walked = UnitReader(str(templated), **kw)
        walked.set_epoch(1)
        for _ in range(step):
            next(iter(walked))
        assert walked.step == step
        assert reader.state_at(step) == walked.state_dict()
    k = steps // 2
    resumed = UnitReader(str(templated), **kw)
    resumed.load_state_dict(json.loads(json.dumps(reader.state_at(k))))
    assert resumed.step == k and resumed.epoch == 1
    got, expected = next(iter(resumed)), reader.batch_at(k)
    assert np.array_equal(got.input_ids, expected.input_ids)
    if pack_length is not None:
        assert min(resumed._epoch_plan()._packed) == reader.state_at(k)["window"]["index"]
    for bad in (-1, steps + 1, "2", 1.0):
        with pytest.raises(errors.ReaderArgumentError, match="step"):
            reader.state_at(bad)
