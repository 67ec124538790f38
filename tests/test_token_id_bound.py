"""The token dtype holds every id the tokenizer can produce (issue 25): a vocabulary with
gaps (60,001 entries, one added token at id 70000) is stored as uint32 / int32, never
wrapped, in a unit-build and a pack-build; both verify clean and read back the id."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from conftest import IN_MEMORY, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core.errors import TokenDTypeCapacityError
from mintdim_beam.core.formats.megatron import check_ids

HIGH = 70_000


@pytest.fixture(scope="module")
def gapped(tmp_path_factory) -> Path:
    vocab = {f"w{i}": i for i in range(60_000)}
    vocab["[UNK]"] = 60_000
    vocab["<|high|>"] = HIGH  # 60,002 entries, ids up to 70,000
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [{"id": HIGH, "content": "<|high|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": False,
                             "special": True}]
    spec["padding"] = None
    root = tmp_path_factory.mktemp("gapped")
    (root / "tokenizer.json").write_text(json.dumps(spec))
    (root / "tokenizer_config.json").write_text(json.dumps(
        {"pad_token": "[UNK]", "eos_token": "<|high|>"}))
    check = Tokenizer.from_file(str(root / "tokenizer.json"))
    assert check.get_vocab_size() < 65_536 and check.encode("w1 <|high|>").ids == [1, HIGH]
    return root


def test_unit_build_stores_the_high_id_as_uint32(tmp_path, gapped):
    data = write_jsonl(tmp_path / "in.jsonl", [{"q": "w1 w2 <|high|>"}, {"q": "w5"}])
    out = tmp_path / "units"
    (pipeline("unit-build").source.jsonl(files=[str(data)], fields=[["q"]], templates=["{q}"])
     .tokenizer.hf_json(files=[str(gapped / "tokenizer.json")],
                        config=str(gapped / "tokenizer_config.json"))
     .units(sizes=[[8]], build_batch=[4]).output.dir(str(out), samples_per_shard=[4])
     .run(on_overflow="abort", on_template_unk="abort", pipeline_options=IN_MEMORY))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["token_storage"]["dtype"] == "uint32" and manifest["token_ids"] == {
        "bound": HIGH + 1}
    records = np.fromfile(out / "unit_8/shard_000000.bin", dtype="<u4").reshape(2, 1 + 1 + 8)
    assert records[0, 2:5].tolist() == [1, 2, HIGH]
    assert verify_output(str(out)).ok


def _pack(tmp_path, gapped, rows, name="pack"):
    data = write_jsonl(tmp_path / f"{name}.jsonl", rows)
    out = tmp_path / name
    (pipeline("pack-build").source.jsonl(files=[str(data)], fields=[["text"]],
                                         templates=["{text}"])
     .tokenizer.hf_json(files=[str(gapped / "tokenizer.json")],
                        config=str(gapped / "tokenizer_config.json"))
     .pack(seed=0).output.dir(str(out)).run(pipeline_options=IN_MEMORY))
    return out


def test_pack_build_stores_the_high_id_as_int32(tmp_path, gapped):
    out = _pack(tmp_path, gapped, [{"text": "w1 w3"}, {"text": "w4"}])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dtype"] == "int32" and manifest["tokenizer"]["id_bound"] == HIGH + 1
    tokens = np.fromfile(out / "shard_000000.bin", dtype="<i4").tolist()
    assert sorted(tokens) == [1, 3, 4, HIGH, HIGH]  # each document, then the EOD: no wrap
    assert verify_output(str(out)).ok


def test_a_document_whose_text_encodes_to_the_eod_is_an_error_at_its_line(tmp_path, gapped):
    """The vocabulary has the EOD's text as a word, so plain text produces the EOD id
    (issue 25): written, it would end the document; the build names the line instead."""
    from mintdim_beam.core import errors

    with pytest.raises(errors.SampleSchemaError) as info:
        _pack(tmp_path, gapped, [{"text": "w1"}, {"text": "w1 <|high|> w3"}])
    assert info.value.kwargs["line"] == 2 and "EOD id 70000" in info.value.kwargs["problem"]
    assert not (tmp_path / "pack" / "manifest.json").exists()


def test_a_write_refuses_an_id_its_dtype_cannot_hold():
    check_ids(np.asarray([0, 65_535]), "uint16")
    with pytest.raises(TokenDTypeCapacityError) as info:
        check_ids(np.asarray([3, HIGH]), "uint16")
    assert info.value.kwargs["token_id"] == HIGH and "Token id: 70,000" in info.value.english
