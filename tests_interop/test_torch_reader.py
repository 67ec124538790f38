"""`mintdim_beam.torch.UnitReaderDataset` with a real PyTorch, on real builds (the
fixtures of tests/test_unit_reader.py): tensors equal the numpy reader's arrays; a
DataLoader with 0, 2 or 3 workers (fork and spawn) yields exactly the reader's
sequence; a state saved after k batches with workers resumes with batch k+1; persistent
workers are refused; `import mintdim_beam` loads no torch.

Not part of `make test` (which collects `tests/` only): `make test-interop` installs a
CPU torch into the venv and runs this folder."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import tokenizers_dir  # noqa: E402,F401  (fixture used by `templated`)
from test_unit_reader import TOKENS, _records, bpe, preference, templated  # noqa: E402,F401
from torch.utils.data import DataLoader  # noqa: E402

import mintdim_beam.torch  # noqa: E402
from mintdim_beam import UnitReader  # noqa: E402
from mintdim_beam.errors import ReaderArgumentError  # noqa: E402
from mintdim_beam.torch import UnitReaderDataset  # noqa: E402

# 3 workers on a 2-CPU machine is what the uneven split needs, not a speed question
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")

PLAIN = ("input_ids", "labels", "attention_mask", "lengths")
PAIRS = tuple(f"{side}_{name}" for side in ("chosen", "rejected") for name in PLAIN)


def _reader_epoch(path, epoch=0, **kw) -> list:
    reader = UnitReader(str(path), **kw)
    reader.set_epoch(epoch)
    return list(reader)


def _loader(dataset, workers, context=None, **kw):
    if workers == 0:
        return DataLoader(dataset, batch_size=None, num_workers=0, **kw)
    return DataLoader(dataset, batch_size=None, num_workers=workers,
                      multiprocessing_context=context, **kw)


def _assert_same(tensor_batch: dict, batch, names) -> None:
    """One tensor dict against the numpy reader's batch of the same step."""
    assert tensor_batch["step"] == batch.step and tensor_batch["epoch"] == batch.epoch
    assert tensor_batch["unit_size"] == batch.unit_size
    assert tensor_batch["sample_ids"].dtype == torch.int64
    assert tensor_batch["valid"].dtype == torch.bool
    assert np.array_equal(tensor_batch["sample_ids"].numpy(), batch.sample_ids)
    assert np.array_equal(tensor_batch["valid"].numpy(), batch.valid)
    for name in names:
        assert tensor_batch[name].dtype == torch.int64, name
        assert np.array_equal(tensor_batch[name].numpy(), getattr(batch, name)), name
    absent = PAIRS if names == PLAIN else PLAIN
    assert not set(absent) & set(tensor_batch)


def _assert_sequence(got: list, expected: list, names=PLAIN) -> None:
    assert [b["step"] for b in got] == [b.step for b in expected]
    for tensor_batch, batch in zip(got, expected):
        _assert_same(tensor_batch, batch, names)


def test_tensors_equal_the_reader_arrays(templated, preference):
    plain = UnitReaderDataset(str(templated), tokens_per_step=TOKENS, seed=2)
    got = list(plain)
    _assert_sequence(got, _reader_epoch(templated, tokens_per_step=TOKENS, seed=2))
    assert len(got) == len(plain) and any((~b["valid"]).any() for b in got)  # padding rows too
    assert plain.state_dict()["step"] == len(got)  # iterated here: the reader moved

    kw = dict(tokens_per_step=256, seed=1, rank=1, world_size=2, pairs=True, ignore_id=-1)
    pairs = UnitReaderDataset(str(preference), **kw)
    _assert_sequence(list(pairs), _reader_epoch(preference, **kw), names=PAIRS)


@pytest.mark.parametrize("workers, context", [(0, None), (2, "fork"), (3, "fork"),
                                              (2, "spawn")])
def test_a_dataloader_yields_the_reader_sequence(templated, workers, context):
    """Each step once, in the reader's order, for any number of workers (3 does not
    divide the steps of the epoch); spawn pickles the dataset (without memory maps)."""
    kw = dict(tokens_per_step=TOKENS, seed=7, rank=1, world_size=2)
    dataset = UnitReaderDataset(str(templated), **kw)
    loader = _loader(dataset, workers, context)
    for epoch in (0, 1):
        dataset.set_epoch(epoch)
        expected = _reader_epoch(templated, epoch, **kw)
        assert len(expected) % 3 and len(expected) > 10
        _assert_sequence(list(loader), expected)


def test_pairs_through_workers(preference):
    kw = dict(tokens_per_step=256, seed=3, pairs=True)
    loader = _loader(UnitReaderDataset(str(preference), **kw), 2, "fork")
    _assert_sequence(list(loader), _reader_epoch(preference, **kw), names=PAIRS)


@pytest.mark.parametrize("workers, k", [(2, 5), (3, 4), (0, 5), (2, 1)])
def test_resume_after_k_batches_continues_with_batch_k_plus_1(templated, workers, k):
    kw = dict(tokens_per_step=TOKENS, seed=5)
    whole = _reader_epoch(templated, 1, **kw)
    dataset = UnitReaderDataset(str(templated), **kw)
    dataset.set_epoch(1)
    it = iter(_loader(dataset, workers, "fork"))
    head = [next(it) for _ in range(k)]
    state = json.loads(json.dumps(dataset.state_dict(after=head[-1])))
    del it  # the run stops here (workers shut down)
    assert state["epoch"] == 1 and state["step"] == k
    if workers:  # the batches were made in worker copies: this process's reader never moved
        assert dataset.state_dict()["step"] == 0
    else:
        assert dataset.state_dict() == state

    resumed = UnitReaderDataset(str(templated), **kw)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # the usual loop: the same epoch does not restart it
    rest = list(_loader(resumed, workers, "fork"))
    assert rest[0]["step"] == k
    _assert_sequence(head + rest, whole)
    # resuming the resumed run after its second batch
    state = resumed.state_dict(after=rest[1])
    again = UnitReaderDataset(str(templated), **kw)
    again.load_state_dict(state)
    again.set_epoch(1)
    _assert_sequence(list(_loader(again, workers, "fork")), whole[k + 2:])


def test_a_state_at_the_end_of_an_epoch_goes_on_with_the_next(templated):
    kw = dict(tokens_per_step=TOKENS, seed=5)
    dataset = UnitReaderDataset(str(templated), **kw)
    last = list(_loader(dataset, 2, "fork"))[-1]
    resumed = UnitReaderDataset(str(templated), **kw)
    resumed.load_state_dict(dataset.state_dict(after=last))
    resumed.set_epoch(1)
    _assert_sequence(list(_loader(resumed, 2, "fork")), _reader_epoch(templated, 1, **kw))


def test_persistent_workers_are_refused(templated):
    dataset = UnitReaderDataset(str(templated), tokens_per_step=TOKENS)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context="fork")
    assert len(list(loader)) == len(dataset)
    dataset.set_epoch(1)
    with pytest.raises(RuntimeError, match="persistent_workers"):
        list(loader)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batching", [{}, {"batch_size": 1}, {"batch_size": 4},
                                      {"batch_size": 4, "collate_fn": list}],
                         ids=["default", "1", "4", "4-own-collate"])
def test_a_loader_that_batches_the_batches_again_is_refused(templated, workers, batching):
    """DataLoader's default batch_size=1 gave [1, rows, unit] tensors silently, and 4
    crashed in torch.stack on steps of two unit sizes: both are refused, saying why."""
    dataset = UnitReaderDataset(str(templated), tokens_per_step=TOKENS)
    loader = DataLoader(dataset, num_workers=workers, **batching,
                        **({"multiprocessing_context": "fork"} if workers else {}))
    # in a worker torch re-raises our error as a RuntimeError holding its text
    with pytest.raises(RuntimeError if workers else ReaderArgumentError) as info:
        next(iter(loader))
    text = str(info.value)
    assert "DataLoader batch_size" in text and "DataLoader(dataset, batch_size=None)" in text
    assert "raise tokens_per_step" in text and "Cho phép" in text


def test_the_documented_loop_runs_as_written(templated):
    """The module docstring's loop, as it stands, on a real build: no collate_fn, 2-D
    tensors, every record of each epoch once on this rank and the other one, and the
    state of its last batch going on with the next epoch."""
    import itertools
    import textwrap

    lines = mintdim_beam.torch.__doc__.splitlines()[2:]  # after the title and a blank line
    block = itertools.takewhile(lambda line: not line or line.startswith("    "), lines)
    code = textwrap.dedent("\n".join(block)).strip() + "\n"
    assert "batch_size=None" in code and "collate_fn" not in code
    seen = {}
    for rank in (0, 1):
        scope = {"path": str(templated), "rank": rank, "world_size": 2, "start_epoch": 0,
                 "epochs": 2}
        names = {**scope, "seen": seen, "__name__": "doc"}
        exec(compile(code + "        seen.setdefault(epoch, []).append(batch)\n", "doc", "exec"),
             names)
        state, steps = names["state"], len(names["dataset"])
        assert (state["epoch"], state["step"]) == (1, steps)  # the end of the last epoch
        resumed = UnitReaderDataset(str(templated), tokens_per_step=65536, rank=rank,
                                    world_size=2)
        resumed.load_state_dict(state)
        resumed.set_epoch(2)
        _assert_sequence(list(_loader(resumed, 0)),
                         _reader_epoch(templated, 2, tokens_per_step=65536, rank=rank,
                                       world_size=2))
    for epoch, batches in seen.items():
        ids = [i for b in batches for i in b["sample_ids"].tolist() if i >= 0]
        assert sorted(ids) == sorted(set(ids)) and len(ids) == len(_records(templated))
        for b in batches:
            rows, unit = b["input_ids"].shape
            assert unit == b["unit_size"] and b["labels"].shape == b["attention_mask"].shape
            assert b["lengths"].shape == b["sample_ids"].shape == b["valid"].shape == (rows,)
            assert torch.equal(b["attention_mask"].sum(1), b["lengths"])


def test_importing_the_package_loads_no_torch():
    code = ("import sys, mintdim_beam, mintdim_beam.read;"
            "from mintdim_beam import UnitReader, pipeline;"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = "import sys, mintdim_beam.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# -- packed batches ----------------------------------------------------------------------
PACKED = ("input_ids", "labels", "position_ids", "document_ids", "seq_lens", "lengths",
          "cu_seqlens")


def _assert_same_packed(tensor_batch: dict, batch) -> None:
    assert tensor_batch["step"] == batch.step and tensor_batch["max_seqlen"] == batch.max_seqlen
    assert "attention_mask" not in tensor_batch
    for name in PACKED + ("sample_ids", "valid"):
        assert np.array_equal(tensor_batch[name].numpy(), getattr(batch, name)), name
    assert tensor_batch["cu_seqlens"].dtype == torch.int32


@pytest.mark.parametrize("workers", [0, 2])
def test_packed_batches_through_a_dataloader_are_the_reader_sequence(templated, workers):
    kw = dict(tokens_per_step=TOKENS, pack_length=64, seed=4, rank=1, world_size=2)
    dataset = UnitReaderDataset(str(templated), **kw)
    dataset.set_epoch(1)
    got = list(_loader(dataset, workers, "fork"))
    expected = _reader_epoch(templated, 1, **kw)
    assert [b["step"] for b in got] == [b.step for b in expected] and len(got) > 5
    for tensor_batch, batch in zip(got, expected):
        _assert_same_packed(tensor_batch, batch)
    state = dataset.state_dict(after=got[2])
    # the step after it, with its packing window: the resume packs that window alone
    assert state["step"] == 3 and state["window"] == dataset.reader.state_at(3)["window"]
    resumed = UnitReaderDataset(str(templated), **kw)
    resumed.load_state_dict(state)
    assert min(resumed.reader._epoch_plan()._packed) == state["window"]["index"]
    resumed.set_epoch(1)
    rest = list(_loader(resumed, workers, "fork"))
    assert [b["step"] for b in rest] == [b.step for b in expected[3:]]
    _assert_same_packed(rest[0], expected[3])


def test_the_block_causal_mask_in_torch_and_numpy(templated):
    from mintdim_beam.read import masks

    batch = UnitReaderDataset(str(templated), tokens_per_step=TOKENS, pack_length=64).reader.batch_at(0)
    tensors = mintdim_beam.torch.to_tensors(batch)
    mask = mintdim_beam.torch.block_causal_mask(tensors)
    assert mask.dtype == torch.bool and mask.shape == (8, 1, 64, 64)
    assert np.array_equal(mask.numpy(), masks.block_causal_mask(batch.document_ids))
    doc = batch.document_ids
    for row in range(len(doc)):
        for i in range(64):
            allowed = [j for j in range(64) if j <= i and doc[row, j] == doc[row, i]]
            assert np.flatnonzero(mask[row, 0, i].numpy()).tolist() == allowed
    additive = mintdim_beam.torch.block_causal_mask(tensors["document_ids"], dtype=torch.float32)
    assert torch.equal(additive == 0, mask) and additive.min() == torch.finfo(torch.float32).min


class TinyLM(torch.nn.Module):
    """Embedding + learned positions, one attention layer (SDPA), an LM head."""

    def __init__(self, vocab: int, width: int = 32, heads: int = 4, positions: int = 64):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Embedding(positions, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, ids, positions, mask=None):
        rows, length = ids.shape
        x = self.embed(ids) + self.position(positions)
        q, k, v = self.qkv(x).view(rows, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None)
        return self.head(x + self.out(attended.transpose(1, 2).reshape(rows, length, -1)))


def _loss(logits, labels):
    """The usual shifted next-token loss, summed (position t predicts label t+1)."""
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             labels[:, 1:].reshape(-1), ignore_index=-100,
                                             reduction="sum")


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_a_packed_loss_is_the_sum_of_the_records_losses(templated, dtype, tolerance):
    """Over a whole packed epoch, with the block mask from document_ids and the
    position_ids: the loss equals the records' losses one at a time, each with the
    unpacked reader's ids and labels (its own positions from 0, plain causal attention).
    Without the mask, or without the positions, it does not."""
    torch.manual_seed(0)
    unpacked = {int(sid): (ids[:n], labels[:n])
                for batch in _reader_epoch(templated, tokens_per_step=TOKENS, target=["*"])
                for sid, ids, labels, n in zip(batch.sample_ids, batch.input_ids, batch.labels,
                                              batch.lengths) if sid >= 0}
    vocab = 1 + max(int(ids.max()) for ids, _ in unpacked.values())
    model = TinyLM(vocab).to(dtype)
    dataset = UnitReaderDataset(str(templated), tokens_per_step=TOKENS, pack_length=64, seed=1,
                                target=["*"])
    packed = plain = unplaced = 0.0
    seen = []
    with torch.no_grad():
        for batch in _loader(dataset, 0):
            ids, positions = batch["input_ids"], batch["position_ids"]
            mask = mintdim_beam.torch.block_causal_mask(batch)
            packed += _loss(model(ids, positions, mask), batch["labels"]).item()
            plain += _loss(model(ids, positions), batch["labels"]).item()
            unplaced += _loss(model(ids, torch.arange(64).expand_as(ids), mask),
                              batch["labels"]).item()
            seen += [int(s) for s in batch["sample_ids"].flatten() if s >= 0]
        assert sorted(seen) == sorted(unpacked)
        alone = sum(_loss(model(torch.from_numpy(ids)[None], torch.arange(len(ids))[None]),
                          torch.from_numpy(labels)[None]).item()
                    for ids, labels in unpacked.values())
    assert packed == pytest.approx(alone, rel=tolerance)
    if dtype == torch.float64:  # far outside the tolerance, where it is tight
        assert abs(plain - alone) > 1e-5 * alone  # records attending to each other
        assert abs(unplaced - alone) > 1e-5 * alone  # positions not restarted
