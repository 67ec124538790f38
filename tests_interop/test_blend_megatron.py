"""`BlendedPackReader` against megatron-core's `BlendedDataset` over the same two
pack-builds, with the same weights, size and seed: sample i of our blend epoch 0 is
`BlendedDataset[i]`, for every i, and so is its source (`dataset_id`).

Each build (its shards merged into one indexed dataset with megatron-core's own
`IndexedDatasetBuilder`, as `test_pack_reader_megatron.py` does) is one `--data-path`
of the blend; megatron-core's builder makes a `GPTDataset` per path with
`random_seed=seed` and blends them with `helpers.build_blending_indices`. The size is
one our sources give within their first epoch (megatron-core asks each for its share
and a 0.5% surplus, which stays inside one epoch here), where PackReader is GPTDataset.

Not part of `make test`: `make test-interop` installs megatron-core."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("megatron.core")

from megatron.core.datasets.blended_dataset import BlendedDataset  # noqa: E402
from megatron.core.datasets.blended_megatron_dataset_builder import (  # noqa: E402
    BlendedMegatronDatasetBuilder,
)
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402

from mintdim_beam.read.blended import BlendedPackReader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import chat_pack_inputs, pack_build_chat  # noqa: E402
from test_pack_reader_megatron import _merged, _Tokenizer, process_group  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:Transformer Engine and Apex")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = []
    for name, shard_tokens in (("blend_a", 30_000), ("blend_b", 45_000)):
        work = chat_pack_inputs(tmp_path_factory, name)
        if name == "blend_b":  # another corpus: the chat pairs twice, in reverse order
            rows = (work / "chat.jsonl").read_text().splitlines()
            (work / "chat.jsonl").write_text("\n".join(rows[::-1] + rows) + "\n")
        pack_build_chat(work, str(work / "out"), shard_tokens=shard_tokens)
        out.append(work / "out")
    return out


@pytest.mark.parametrize("weights,seq_len,seed", [([0.3, 0.7], 128, 1234), ([2.0, 1.0], 64, 7)])
def test_the_blend_equals_megatron_blended_dataset(builds, tmp_path, process_group, weights,
                                                   seq_len, seed):
    probe = BlendedPackReader([str(b) for b in builds], weights, seq_len, seed=seed)
    asked = int(probe.size * 0.9)  # within the sources' first epochs, with megatron's surplus
    merged = [_merged(b, probe.sources[0].build.dtype.type) for b in builds]
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len,
        blend_per_split=[(merged, list(weights)), None, None],
        path_to_cache=str(tmp_path / "cache"),
        tokenizer=_Tokenizer(probe.sources[0].build.eod, 2000), reset_position_ids=True,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False)
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [asked, None, None], lambda: True,
                                                config).build()
    # megatron-core's blend holds each dataset's ceil(weight * asked): its size is theirs sum
    size = len(train)
    assert isinstance(train, BlendedDataset) and asked <= size <= asked + 2
    ours = BlendedPackReader([str(b) for b in builds], weights, seq_len, seed=seed, size=size)
    assert ours.samples == size
    batch = ours.samples_at(np.arange(size))
    for i in range(size):
        sample = train[i]
        assert int(sample["dataset_id"]) == int(batch.dataset_ids[i]), i
        text = torch.cat([sample["tokens"], sample["labels"][-1:]]).numpy()
        assert np.array_equal(batch.tokens[i], text), i
    counts = np.bincount(batch.dataset_ids, minlength=2)
    share = np.asarray(weights) / sum(weights)
    assert np.all(np.abs(counts - share * size) <= 1)
