"""`PackReader` against megatron-core's `GPTDataset` over the same pack-build output.

The build (the bundled pack example's data and tokenizer, cut into several shards) is
read by PackReader as one stream of every shard's documents in shard order. Megatron's
`GPTDataset` reads one indexed dataset (over several `--data-path`s it blends one
dataset per shard, whose samples never cross a shard), so the shards are concatenated
into one with megatron-core's own `IndexedDatasetBuilder.add_index`, and a `GPTDataset`
with `random_seed=seed` over it is compared with PackReader's epoch 0: sample j's
`seq_len + 1` ids are equal for every j (the same order, so the multisets too), and
PackReader's document_ids / position_ids agree with Megatron's `reset_position_ids`
positions (restarting after each EOD).

Not part of `make test`: `make test-interop` installs megatron-core."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("megatron.core")

import torch.distributed as dist  # noqa: E402
from megatron.core.datasets.blended_megatron_dataset_builder import (  # noqa: E402
    BlendedMegatronDatasetBuilder,
)
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder  # noqa: E402

from mintdim_beam import PackReader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import chat_pack_inputs, pack_build_chat  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Transformer Engine and Apex")


class _Tokenizer:
    """What GPTDatasetConfig reads from a tokenizer."""

    def __init__(self, eod: int, vocab_size: int):
        self.eod, self.pad, self.vocab_size = eod, -1, vocab_size

    @property
    def unique_identifiers(self) -> dict:
        return {"class": "_Tokenizer", "eod": self.eod, "vocab_size": self.vocab_size}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    work = chat_pack_inputs(tmp_path_factory, "packreader")
    pack_build_chat(work, str(work / "out"), shard_tokens=30_000)
    return work / "out"


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    if dist.is_initialized():
        yield
        return
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _merged(build: Path, dtype) -> str:
    """Every shard of the build as one Megatron indexed dataset, in shard order."""
    prefixes = sorted(str(p.with_suffix("")) for p in build.glob("shard_*.idx"))
    assert len(prefixes) >= 3
    merged = str(build.parent / "merged")
    builder = IndexedDatasetBuilder(merged + ".bin", dtype=dtype)
    for prefix in prefixes:
        builder.add_index(prefix)
    builder.finalize(merged + ".idx")
    return merged


@pytest.mark.parametrize("seq_len,seed", [(128, 1234), (37, 0), (2048, 5)])
def test_samples_equal_megatron_gpt_dataset(build, tmp_path, process_group, seq_len, seed):
    reader = PackReader(build, seq_len, seed=seed)
    merged = _merged(build, reader.build.dtype.type)
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len, blend=([merged], None), split="1,0,0",
        path_to_cache=str(tmp_path / "cache"), tokenizer=_Tokenizer(reader.build.eod, 2000),
        reset_position_ids=True, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=False)
    (gpt,) = [d for d in BlendedMegatronDatasetBuilder(
        GPTDataset, [None, None, None], lambda: True, config).build() if d is not None]
    assert isinstance(gpt, GPTDataset)
    assert len(gpt) == reader.samples
    ours = [reader.batch_at(j) for j in range(reader.steps)]
    assert reader.steps == len(gpt)
    for j, batch in enumerate(ours):
        sample = gpt[j]
        text = torch.cat([sample["tokens"], sample["labels"][-1:]]).numpy()
        assert np.array_equal(batch.tokens[0], text), j
        assert np.array_equal(batch.input_ids[0], sample["tokens"].numpy())
        assert np.array_equal(batch.labels[0], sample["labels"].numpy())
        # Megatron restarts positions after each EOD of the input; ours at each document
        assert np.array_equal(batch.position_ids[0, :-1], sample["position_ids"].numpy()), j
    # the multisets too (the same order here, so this follows; kept for the claim)
    got = sorted(tuple(b.tokens[0].tolist()) for b in ours)
    want = sorted(tuple(torch.cat([gpt[j]["tokens"], gpt[j]["labels"][-1:]]).tolist())
                  for j in range(len(gpt)))
    assert got == want
