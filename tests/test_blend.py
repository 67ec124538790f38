"""Blended readers (issue 42): megatron-core's error-minimizing choice per item, weights
checked, what a source that runs out does, and the readers over pack- and unit-builds:
each row the source reader's own, the same global sequence on every world size, a
state of a few hundred bytes that resumes on another world size."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import REPO
from mintdim_beam import pipeline
from mintdim_beam.core.errors import ReaderArgumentError, ReaderStateError
from mintdim_beam.read import blend
from mintdim_beam.read.blended import BlendedPackReader, BlendedUnitReader
from mintdim_beam.read.pack_reader import PackReader
from mintdim_beam.read.reader import UnitReader

CHAT_TOKENIZER = dict(files=[str(REPO / "examples/chat/tokenizer.json")],
                      config=str(REPO / "examples/chat/tokenizer_config.json"))
SOURCES = [(REPO / "examples/data/chat.jsonl", [["prompt", "response"]],
            ["{prompt}\n\n{response}"]),
           (REPO / "examples/data/instructions.jsonl", [["instruction", "input", "output"]],
            ["{instruction}\n{input}\n{output}"])]


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend_packs")
    out = []
    for i, (path, fields, templates) in enumerate(SOURCES):
        (pipeline("pack-build").source.jsonl(files=[str(path)], fields=fields, templates=templates)
         .tokenizer.hf_json(**CHAT_TOKENIZER).pack(eod=None, seed=0, shard_tokens=30_000)
         .output.dir(str(root / f"p{i}")).run(pipeline_options=["--runner=FnApiRunner"]))
        out.append(str(root / f"p{i}"))
    return out


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend_units")
    out = []
    for i, (path, fields, templates) in enumerate(SOURCES):
        (pipeline("unit-build").source.jsonl(files=[str(path)], fields=fields, templates=templates)
         .tokenizer.hf_json(**CHAT_TOKENIZER)
         .units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
         .output.dir(str(root / f"u{i}"), samples_per_shard=[300])
         .run(on_overflow="truncate", on_template_unk="abort",
              pipeline_options=["--runner=FnApiRunner"]))
        out.append(str(root / f"u{i}"))
    return out


# --- the rule ---------------------------------------------------------------------------

def _megatron_rule(weights, size):
    """megatron-core's helpers.build_blending_indices, written out from its description."""
    counts, out = [0] * len(weights), []
    for i in range(size):
        x = max(i, 1)
        errors = [w * x - c for w, c in zip(weights, counts)]
        d = errors.index(max(errors))
        out.append((d, counts[d]))
        counts[d] += 1
    return out


@pytest.mark.parametrize("weights", [[0.3, 0.7], [1, 1, 1], [5, 1, 0.25, 3], [0.999, 0.001]])
def test_the_rule_is_megatron_s_and_keeps_each_share_within_one(weights):
    w = blend.weights_of(weights, len(weights))
    source, taken = blend.indices(w, 5000)
    assert list(zip(source.tolist(), taken.tolist())) == _megatron_rule(w, 5000)
    counts = np.zeros(len(w))
    for n, d in enumerate(source.tolist(), 1):
        counts[d] += 1
        assert np.all(np.abs(counts - np.asarray(w) * n) <= 1.0 + 1e-9), n


@pytest.mark.parametrize("weights, why", [
    ([0.5, -0.5], "negative"), ([0, 0], "all zero"), ([float("nan"), 1], "not finite"),
    ([math.inf, 1], "not finite"), ([1, 2, 3], "3 weights for 2 builds"),
    (["1", 2], "not a number"), ([True, 1], "not a number"), (0.5, "not a list")])
def test_weights_that_cannot_be_a_blend_are_refused_with_the_rule(weights, why):
    with pytest.raises(ReaderArgumentError) as caught:
        blend.weights_of(weights, 2)
    assert why in caught.value.kwargs["value"]
    assert "finite numbers >= 0" in caught.value.kwargs["allowed"]
    assert caught.value.vietnamese


def test_a_source_running_out_repeats_stops_or_leaves():
    w = blend.weights_of([1, 1], 2)
    source, taken = blend.indices(w, 100, [10, 1000], "repeat")
    assert len(source) == 100 and taken[source == 0].max() == 49  # 0 runs on past its 10
    source, taken = blend.indices(w, 100, [10, 1000], "stop")
    assert len(source) == 20 and sorted(taken[source == 0].tolist()) == list(range(10))
    source, taken = blend.indices(w, 100, [10, 1000], "renormalize")
    assert len(source) == 100 and (source == 0).sum() == 10
    assert taken[source == 1].tolist() == list(range(90))
    assert blend.full_size(w, [10, 1000]) == 20


# --- pack-builds ------------------------------------------------------------------------

def test_a_pack_blend_s_rows_are_its_sources_samples(packs):
    reader = BlendedPackReader(packs, [0.3, 0.7], 64, seed=3, batch_size=8)
    sources = [PackReader(p, 64, seed=3) for p in packs]
    assert reader.size == reader.samples == blend.full_size(
        reader.weights, [s.samples for s in sources])
    taken = [0, 0]
    for step in range(reader.steps):
        batch = reader.batch_at(step)
        for row, d in enumerate(batch.dataset_ids.tolist()):
            want = sources[d].sample_order()[taken[d]]
            assert batch.sample_ids[row] == want
            tokens, _ = sources[d].samples_at([want])
            assert np.array_equal(batch.tokens[row], tokens[0])
            taken[d] += 1
    share = np.asarray(taken) / sum(taken)
    assert np.all(np.abs(share * sum(taken) - np.asarray([0.3, 0.7]) * sum(taken)) <= 1)


def test_a_pack_blend_is_the_same_on_every_world_size_and_resumes_across_them(packs):
    one = BlendedPackReader(packs, [2, 1], 48, seed=1, batch_size=8)
    whole = [b.tokens for b in one]
    for world in (2, 4):
        ranks = [BlendedPackReader(packs, [2, 1], 48, seed=1, batch_size=8 // world,
                                   rank=r, world_size=world) for r in range(world)]
        got = [np.concatenate([r.batch_at(k).tokens for r in ranks]) for k in range(one.steps)]
        assert all(np.array_equal(a, b) for a, b in zip(got, whole))
    reader = BlendedPackReader(packs, [2, 1], 48, seed=1, batch_size=8)
    for step, _ in enumerate(reader):
        if step == 4:
            break
    state = reader.state_dict()
    assert len(json.dumps(state)) < 600
    later = BlendedPackReader(packs, [2, 1], 48, seed=1, batch_size=2, rank=3, world_size=4)
    later.load_state_dict(state)
    assert np.array_equal(next(iter(later)).tokens, whole[5][6:8])
    other = BlendedPackReader(packs, [1, 2], 48, seed=1, batch_size=8)
    with pytest.raises(ReaderStateError) as caught:
        other.load_state_dict(state)
    assert caught.value.kwargs["key"] == "weights"


def test_a_pack_blend_past_a_source_s_epoch_reads_its_next_epochs(packs):
    small = PackReader(packs[0], 64, seed=2)
    reader = BlendedPackReader(packs, [0.5, 0.5], 64, seed=2, batch_size=4,
                               size=4 * small.samples)
    taken = {}
    for k in range(reader.steps):
        batch = reader.batch_at(k)
        for d, e, s in zip(batch.dataset_ids.tolist(), batch.source_epochs.tolist(),
                           batch.sample_ids.tolist()):
            taken.setdefault((d, e), []).append(s)
    epochs_of_0 = sorted(e for d, e in taken if d == 0)
    assert epochs_of_0 == [0, 1]  # 2x its samples: its epochs 0 and 1, each whole
    for e in epochs_of_0:
        assert sorted(taken[(0, e)]) == list(range(small.samples))
    reader.set_epoch(1)  # the next blend epoch reads build 0's epochs 2 and 3
    assert set(reader.batch_at(0).source_epochs[reader.batch_at(0).dataset_ids == 0]) <= {2, 3}


# --- unit-builds --------------------------------------------------------------------------

def test_a_packed_unit_blend_mixes_each_step_from_the_builds_own_rows(units):
    reader = BlendedUnitReader(units, [1, 3], tokens_per_step=8192, pack_length=1024, seed=1)
    sources = [UnitReader(u, tokens_per_step=8192, pack_length=1024, seed=1) for u in units]
    taken = [0, 0]
    rows_of = [s.epoch_items(0) for s in sources]
    for step in range(len(reader)):
        batch = reader.batch_at(step)
        assert batch.input_ids.shape == (8, 1024)
        for row, d in enumerate(batch.dataset_ids.tolist()):
            want = sources[d].rows_at(0, taken[d], taken[d] + 1)
            assert np.array_equal(batch.input_ids[row], want["input_ids"][0])
            assert np.array_equal(batch.labels[row], want["labels"][0])
            k = int((want["seq_lens"][0] > 0).sum())
            assert np.array_equal(batch.seq_lens[row, :k], want["seq_lens"][0, :k])
            taken[d] += 1
        # segments of every row in their new order: positions restart per record
        lens = batch.seq_lens[batch.seq_lens > 0]
        assert int(batch.cu_seqlens[-1]) == 8 * 1024 and lens.sum() == batch.lengths.sum()
        assert (batch.position_ids[batch.document_ids == 0] >= 0).all()
    assert taken[1] / sum(taken) == pytest.approx(0.75, abs=1 / sum(taken))
    assert taken[0] <= rows_of[0] and taken[1] <= rows_of[1]
    ids = reader.batch_at(0).sample_ids
    assert ids.shape == reader.batch_at(0).seq_lens.shape and (ids[:, 0] >= 0).all()


def test_a_unit_blend_is_the_same_on_every_world_size_and_resumes(units):
    whole = BlendedUnitReader(units, [1, 3], tokens_per_step=8192, pack_length=1024, seed=4)
    steps = [b.input_ids for b in whole]
    halves = [BlendedUnitReader(units, [1, 3], tokens_per_step=8192, pack_length=1024, seed=4,
                                rank=r, world_size=2) for r in range(2)]
    for k, want in enumerate(steps):
        assert np.array_equal(np.concatenate([h.batch_at(k).input_ids for h in halves]), want)
    state = halves[1].state_at(3)
    assert len(json.dumps(state)) < 800
    again = BlendedUnitReader(units, [1, 3], tokens_per_step=8192, pack_length=1024, seed=4,
                              rank=3, world_size=4)
    again.load_state_dict(state)
    assert np.array_equal(next(iter(again)).input_ids, steps[3][6:8])


def test_an_unpacked_unit_blend_takes_whole_steps_of_each_build(units):
    reader = BlendedUnitReader(units, [1, 1], tokens_per_step=4096, seed=2)
    sources = [UnitReader(u, tokens_per_step=4096, seed=2) for u in units]
    taken = [0, 0]
    for step in range(len(reader)):
        batch = reader.batch_at(step)
        (d,) = set(batch.dataset_ids.tolist())
        want = sources[d].batch_at(taken[d])
        assert np.array_equal(batch.input_ids, want.input_ids)
        assert np.array_equal(batch.sample_ids, want.sample_ids)
        taken[d] += 1
    assert abs(taken[0] - taken[1]) <= 1 and len(reader) == 2 * min(len(s) for s in sources)


@pytest.mark.parametrize("exhausted", ["stop", "renormalize"])
def test_a_unit_blend_that_runs_a_build_out(units, exhausted):
    reader = BlendedUnitReader(units, [1, 1], tokens_per_step=8192, pack_length=1024,
                               size=10 ** 6, exhausted=exhausted)
    rows = [UnitReader(u, tokens_per_step=8192, pack_length=1024).epoch_items(0) for u in units]
    seen = [0, 0]
    for batch in reader:
        for d in batch.dataset_ids.tolist():
            seen[d] += 1
    if exhausted == "stop":
        assert seen[0] <= rows[0] and abs(seen[0] - seen[1]) <= 1
    else:  # every row of both builds, but for the last partial step
        assert sum(seen) == (rows[0] + rows[1]) // 8 * 8 and seen[0] == rows[0]


# --- the label convention ---------------------------------------------------------------

def test_each_reader_says_its_labels_and_shifts_them_when_asked(units, packs):
    kw = dict(tokens_per_step=4096, pack_length=1024, seed=5)
    aligned = UnitReader(units[0], **kw).batch_at(1)
    shifted = UnitReader(units[0], labels="shifted", **kw).batch_at(1)
    assert (aligned.label_shift, shifted.label_shift) == ("aligned", "shifted")
    assert np.array_equal(shifted.labels[:, :-1], aligned.labels[:, 1:])
    assert (shifted.labels[:, -1] == -100).all()
    unpacked = UnitReader(units[0], tokens_per_step=4096, labels="shifted", seed=5).batch_at(0)
    plain = UnitReader(units[0], tokens_per_step=4096, seed=5).batch_at(0)
    assert np.array_equal(unpacked.labels[:, :-1], plain.labels[:, 1:])
    pack = PackReader(packs[0], 64, seed=5, batch_size=2, labels="aligned").batch_at(0)
    megatron = PackReader(packs[0], 64, seed=5, batch_size=2).batch_at(0)
    assert (pack.label_shift, megatron.label_shift) == ("aligned", "shifted")
    assert np.array_equal(pack.labels, pack.input_ids)
    assert np.array_equal(megatron.labels, megatron.tokens[:, 1:])
    blended = BlendedUnitReader(units, [1, 1], labels="shifted", **kw).batch_at(0)
    both = BlendedUnitReader(units, [1, 1], **kw).batch_at(0)
    assert np.array_equal(blended.labels[:, :-1], both.labels[:, 1:])
    with pytest.raises(ReaderArgumentError):
        UnitReader(units[0], tokens_per_step=4096, labels="left")
    state = UnitReader(units[0], labels="shifted", **kw).state_dict()
    with pytest.raises(ReaderStateError) as caught:
        UnitReader(units[0], **kw).load_state_dict(state)
    assert caught.value.kwargs["key"] == "labels"
    with pytest.raises(ReaderStateError):
        PackReader(packs[0], 64).load_state_dict(PackReader(packs[0], 64,
                                                            labels="aligned").state_dict())
