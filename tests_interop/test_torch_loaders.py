"""The step datasets with real loaders (issue 42): `PackReaderDataset` and the blended
datasets through torch's `DataLoader` (0 and 2 workers) yield their reader's sequence;
torchdata's `StatefulDataLoader` resumes exactly from its own `state_dict()` after k
batches, with and without workers, for every reader; `step_loader` takes a
torchtitan-style local batch size and refuses one that would stack steps; and the two
label conventions are what their consumers compute: a Hugging Face model's own loss on
"aligned" labels equals a plain cross-entropy on "shifted" ones.

Not part of `make test`: `make test-interop` installs torch, torchdata and transformers."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torch.utils.data import DataLoader  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_blend import CHAT_TOKENIZER, SOURCES  # noqa: E402

from mintdim_beam import PackReader, UnitReader, pipeline  # noqa: E402
from mintdim_beam.errors import ReaderArgumentError  # noqa: E402
from mintdim_beam.torch import (BlendedPackReaderDataset, BlendedUnitReaderDataset,  # noqa: E402
                                PackReaderDataset, UnitReaderDataset, step_loader)

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaders")
    packs, units = [], []
    for i, (path, fields, templates) in enumerate(SOURCES):
        (pipeline("pack-build").source.jsonl(files=[str(path)], fields=fields, templates=templates)
         .tokenizer.hf_json(**CHAT_TOKENIZER).pack(eod=None, seed=0, shard_tokens=30_000)
         .output.dir(str(root / f"p{i}")).run(pipeline_options=["--runner=FnApiRunner"]))
        (pipeline("unit-build").source.jsonl(files=[str(path)], fields=fields, templates=templates)
         .tokenizer.hf_json(**CHAT_TOKENIZER).units(sizes=[[128, 256, 512, 1024]],
                                                    build_batch=[256])
         .output.dir(str(root / f"u{i}"), samples_per_shard=[300])
         .run(on_overflow="truncate", on_template_unk="abort",
              pipeline_options=["--runner=FnApiRunner"]))
        packs.append(str(root / f"p{i}"))
        units.append(str(root / f"u{i}"))
    return {"packs": packs, "units": units}


DATASETS = {
    "pack": lambda b: PackReaderDataset(b["packs"][1], 64, seed=2, batch_size=4),
    "pack_blend": lambda b: BlendedPackReaderDataset(b["packs"], [0.3, 0.7], 64, seed=2,
                                                     batch_size=4),
    "unit_packed": lambda b: UnitReaderDataset(b["units"][1], tokens_per_step=4096,
                                               pack_length=1024, seed=2),
    "unit_blend": lambda b: BlendedUnitReaderDataset(b["units"], [1, 3], tokens_per_step=4096,
                                                     pack_length=1024, seed=2),
}


def _same(a: dict, b: dict) -> None:
    assert a["step"] == b["step"] and a["epoch"] == b["epoch"]
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    if "dataset_ids" in a:
        assert torch.equal(a["dataset_ids"], b["dataset_ids"])


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_yields_the_reader_sequence(builds, name, workers):
    dataset = DATASETS[name](builds)
    want = [dataset._tensors(dataset.reader.batch_at(k)) for k in range(len(dataset))]
    got = list(DataLoader(dataset, batch_size=None, num_workers=workers))
    assert len(got) == len(want) > 4
    for a, b in zip(got, want):
        _same(a, b)


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_after_k_batches(builds, name, workers):
    dataset = DATASETS[name](builds)
    want = [dataset._tensors(dataset.reader.batch_at(k)) for k in range(len(dataset))]
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=workers)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    del it, loader
    again = StatefulDataLoader(DATASETS[name](builds), batch_size=None, num_workers=workers)
    again.load_state_dict(state)
    rest = list(again)
    assert len(rest) == len(want) - 3
    for a, b in zip(rest, want[3:]):
        _same(a, b)


def test_step_loader_takes_a_torchtitan_batch_size_and_refuses_one_that_stacks_steps(builds):
    dataset = PackReaderDataset(builds["packs"][0], 64, seed=1, batch_size=8, rank=1,
                                world_size=2)
    loader = step_loader(dataset, batch_size=8, num_workers=2)
    assert isinstance(loader, StatefulDataLoader)
    first = next(iter(loader))
    assert first["input_ids"].shape == (8, 64)
    with pytest.raises(ReaderArgumentError) as caught:
        step_loader(dataset, batch_size=16)
    assert "8, the rows one step gives this rank" in caught.value.kwargs["allowed"]
    packed = UnitReaderDataset(builds["units"][0], tokens_per_step=8192, pack_length=1024,
                               rank=0, world_size=2)
    assert next(iter(step_loader(packed, batch_size=4)))["input_ids"].shape == (4, 1024)
    unpacked = UnitReaderDataset(builds["units"][0], tokens_per_step=8192)
    with pytest.raises(ReaderArgumentError):
        step_loader(unpacked, batch_size=4)


def _tiny_llama(vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=2048)
    return LlamaForCausalLM(config).eval()


def _plain_loss(logits, shifted, ignore_id=-100):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), shifted.flatten(),
                                             ignore_index=ignore_id)


def test_aligned_labels_are_what_a_hugging_face_model_takes_shifted_what_a_plain_loss_does(builds):
    """One record batch: the HF model's own loss over `labels="aligned"` equals a plain
    cross-entropy of its logits over `labels="shifted"` (UnitReader and PackReader)."""
    model = _tiny_llama(2000)
    kw = dict(tokens_per_step=2048, pack_length=1024, seed=3, target=["response"])
    aligned = UnitReader(builds["units"][0], **kw).batch_at(0)
    shifted = UnitReader(builds["units"][0], labels="shifted", **kw).batch_at(0)
    assert (aligned.label_shift, shifted.label_shift) == ("aligned", "shifted")
    ids = torch.from_numpy(aligned.input_ids)
    with torch.no_grad():
        out = model(input_ids=ids, labels=torch.from_numpy(aligned.labels))
        plain = _plain_loss(model(input_ids=ids).logits, torch.from_numpy(shifted.labels))
    assert torch.allclose(out.loss, plain, atol=1e-5)
    pack_shifted = PackReader(builds["packs"][0], 128, seed=3, batch_size=2).batch_at(0)
    pack_aligned = PackReader(builds["packs"][0], 128, seed=3, batch_size=2,
                              labels="aligned").batch_at(0)
    assert np.array_equal(pack_aligned.labels, pack_aligned.input_ids)
    ids = torch.from_numpy(np.ascontiguousarray(pack_aligned.input_ids))
    with torch.no_grad():
        hf = model(input_ids=ids, labels=torch.from_numpy(np.ascontiguousarray(
            pack_aligned.labels))).loss
        logits = model(input_ids=ids).logits
    # Megatron's shifted labels over every position: the same targets, one more
    megatron = _plain_loss(logits, torch.from_numpy(np.ascontiguousarray(pack_shifted.labels)))
    ours_hf = _plain_loss(logits[:, :-1], torch.from_numpy(np.ascontiguousarray(
        pack_shifted.labels[:, :-1])))
    assert torch.allclose(hf, ours_hf, atol=1e-5) and not torch.isnan(megatron)
