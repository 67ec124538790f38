"""Exports read by their consumers (issue 42): `datasets.load_dataset("parquet")`; TRL's
`SFTTrainer` data preparation, with a tiny model, keeping our ids and labels unchanged
(records, and packed rows padding-free through `seq_lengths`); TRL's DPO collator on
our pairs; mosaicml-streaming's `StreamingDataset` on our MDS, whose bytes equal its own
`MDSWriter`'s for the same rows; `h5py` on the HDF5.

Not part of `make test`: `make test-interop` installs torch, TRL (and datasets) and
mosaicml-streaming."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
streaming = pytest.importorskip("streaming")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_export import TOKENIZER, builds  # noqa: E402,F401 (the fixture)

from mintdim_beam.export.launch import run_export  # noqa: E402

IN_MEMORY = ["--runner=FnApiRunner"]


def _tokenizer():
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=TOKENIZER["files"][0], pad_token="<|endoftext|>",
                                   eos_token="<|im_end|>")


def _model(vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=2, max_position_embeddings=4096))


def _load(out: Path):
    return datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"),
                                 split="train")


def test_sft_trainer_takes_our_records_as_they_are(builds, tmp_path):
    from trl import SFTConfig, SFTTrainer

    run_export(str(builds / "units"), "parquet", str(tmp_path / "out"), pipeline_options=IN_MEMORY)
    ours = _load(tmp_path / "out")
    assert ours.num_rows == 1996 and "labels" in ours.column_names
    tokenizer = _tokenizer()
    trainer = SFTTrainer(model=_model(len(tokenizer)), processing_class=tokenizer,
                         train_dataset=ours,
                         args=SFTConfig(output_dir=str(tmp_path / "sft"), max_length=None,
                                        report_to=[], per_device_train_batch_size=4, bf16=False,
                                        use_cpu=True))
    prepared = trainer.train_dataset
    assert prepared.num_rows == ours.num_rows
    for i in range(0, ours.num_rows, 97):
        assert prepared[i]["input_ids"] == ours[i]["input_ids"]
        assert prepared[i]["labels"] == ours[i]["labels"]
    batch = trainer.data_collator([prepared[i] for i in range(4)])
    for row in range(4):
        n = len(ours[row]["input_ids"])
        assert batch["input_ids"][row, :n].tolist() == ours[row]["input_ids"]
        assert batch["labels"][row, :n].tolist() == ours[row]["labels"]


def test_sft_trainer_takes_packed_rows_padding_free(builds, tmp_path):
    from trl import SFTConfig, SFTTrainer

    run_export(str(builds / "units"), "parquet", str(tmp_path / "out"), pack_length=1024,
               pipeline_options=IN_MEMORY)
    ours = _load(tmp_path / "out")
    tokenizer = _tokenizer()
    trainer = SFTTrainer(model=_model(len(tokenizer)), processing_class=tokenizer,
                         train_dataset=ours,
                         args=SFTConfig(output_dir=str(tmp_path / "sft"), max_length=None,
                                        padding_free=True, report_to=[], bf16=False, use_cpu=True,
                                        per_device_train_batch_size=2))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    flat_ids = ours[0]["input_ids"] + ours[1]["input_ids"]
    assert batch["input_ids"][0].tolist() == flat_ids
    assert batch["labels"][0].tolist() == ours[0]["labels"] + ours[1]["labels"]
    assert batch["position_ids"][0].tolist() == ours[0]["position_ids"] + ours[1]["position_ids"]


def test_the_dpo_collator_takes_our_pairs(builds, tmp_path):
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    run_export(str(builds / "pairs"), "parquet", str(tmp_path / "out"), pipeline_options=IN_MEMORY)
    ours = _load(tmp_path / "out")
    rows = [ours[i] for i in range(3)]
    batch = DataCollatorForPreference(pad_token_id=0)(rows)
    for i, row in enumerate(rows):
        chosen = row["prompt_ids"] + row["chosen_ids"]
        rejected = row["prompt_ids"] + row["rejected_ids"]
        assert batch["input_ids"][i, :len(chosen)].tolist() == chosen
        assert batch["input_ids"][3 + i, :len(rejected)].tolist() == rejected
        mask = batch["completion_mask"][i, :len(chosen)].tolist()
        assert mask == [0] * len(row["prompt_ids"]) + [1] * len(row["chosen_ids"])


def test_streaming_reads_our_mds_and_its_writer_writes_the_same_bytes(builds, tmp_path):
    from streaming import MDSWriter, StreamingDataset

    run_export(str(builds / "units"), "mds", str(tmp_path / "mds"), pipeline_options=IN_MEMORY)
    run_export(str(builds / "units"), "parquet", str(tmp_path / "pq"), pipeline_options=IN_MEMORY)
    ours = _load(tmp_path / "pq")
    read = StreamingDataset(local=str(tmp_path / "mds"), shuffle=False, batch_size=1)
    assert len(read) == ours.num_rows
    for i in range(0, ours.num_rows, 101):
        assert read[i]["input_ids"].tolist() == ours[i]["input_ids"]
        assert read[i]["labels"].tolist() == ours[i]["labels"]
        assert read[i]["source_file"] == ours[i]["source_file"]
    index = json.loads((tmp_path / "mds" / "index.json").read_text())
    shard = index["shards"][0]
    columns = dict(zip(shard["column_names"], shard["column_encodings"]))
    theirs = tmp_path / "theirs"
    with MDSWriter(out=str(theirs), columns=columns, size_limit=None) as writer:
        for row in ours:
            writer.write({k: np.asarray(row[k], dtype=e.split(":")[1]) if e.startswith("ndarray")
                          else row[k] for k, e in columns.items()})
    assert (theirs / "shard.00000.mds").read_bytes() == \
        (tmp_path / "mds" / "shard.00000.mds").read_bytes()
    assert json.loads((theirs / "index.json").read_text()) == index
