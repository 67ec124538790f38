"""Tokenizers as they are published (issue 16): byte-level BPE without UNK, a
tokenizer_config.json beside tokenizer.json, pad resolution with its source recorded,
and SentencePiece BOS / EOS as their own segments. Real tokenizers, trained here."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import IN_MEMORY, MANIFEST_REFERENCE_KEYS, sentence, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.audit.report import write_report
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core import errors
from mintdim_beam.core.config.unit_config import resolve_datasets
from mintdim_beam.core.config.prepare import prepare

BOT, EOT, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"
ROWS = [{"q": "hello world", "a": "the model reads 😀 字 ü"},
        {"q": "code python", "a": "ĳ ﬁ ☃ never seen before"},
        {"q": "", "a": "padding overflow template"},
        {"q": "hello world", "a": "the model reads 😀 字 ü"}]


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """bytebpe.json: a byte-level BPE like Llama 3's (no unk_token, no padding, specials
    as added tokens); sp_plain.model: SentencePiece with bos/eos, no pad; sp_bare.model:
    without bos/eos/pad; sp_pad.model: pad_id 3 and a user symbol <extra>."""
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("published")
    rng = random.Random(16)
    lines = [sentence(rng, 3, 20) for _ in range(1500)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=400, special_tokens=[BOT, EOT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(root / "bytebpe.json"))
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = dict(input=str(corpus), vocab_size=80, hard_vocab_limit=False, num_threads=1,
                  character_coverage=1.0, minloglevel=2)
    spm.SentencePieceTrainer.train(model_prefix=str(root / "sp_plain"), **common)
    spm.SentencePieceTrainer.train(model_prefix=str(root / "sp_bare"), bos_id=-1, eos_id=-1,
                                   **common)
    spm.SentencePieceTrainer.train(model_prefix=str(root / "sp_pad"), pad_id=3,
                                   user_defined_symbols=["<extra>"], **common)
    return root


def _config(path: Path, **doc) -> str:
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path.name


@pytest.fixture
def workdir(tmp_path, published, monkeypatch) -> Path:
    for name in ("bytebpe.json", "sp_plain.model", "sp_bare.model", "sp_pad.model"):
        (tmp_path / name).write_bytes((published / name).read_bytes())
    write_jsonl(tmp_path / "data.jsonl", ROWS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _job(kind: str, files=("bytebpe.json",), data=("data.jsonl",), out="out", sizes=(8, 16, 32),
         **options):
    job = pipeline("unit-build").source.jsonl(files=list(data), fields=[["q", "a"]],
                                              templates=["Q: {q}\nA: {a}"])
    job = getattr(job.tokenizer, kind)(files=list(files), **options)
    return job.units(sizes=[list(sizes)], build_batch=[2]).output.dir(out, samples_per_shard=[2])


def _plan(kind: str, files=("bytebpe.json",), **options):
    block = {"type": kind, "files": list(files), **options}
    raw = _job(kind, files).config()
    raw["tokenizer"] = block
    return [prepare(d) for d in resolve_datasets(raw)]


def _records(out: Path, dtype, n: int) -> list[tuple[list[int], list[int]]]:
    """(segment lengths, payload tokens) of every record in every shard."""
    found = []
    for shard in sorted(out.glob("unit_*/shard_*.bin")):
        unit = int(shard.parent.name.split("_")[1])
        data = np.fromfile(shard, dtype=dtype).reshape(-1, 1 + n + unit)
        for row in data.tolist():
            lengths = row[1:1 + n]
            found.append((lengths, row[1 + n:1 + n + sum(lengths)]))
    return found


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def test_byte_level_bpe_without_unk_builds_end_to_end(workdir):
    config = _config(workdir / "tokenizer_config.json", bos_token=BOT,
                     eos_token={"content": EOT, "special": True}, pad_token=PAD)
    _job("hf_json", config=config).run(on_template_unk="abort", on_overflow="truncate",
                                       pipeline_options=IN_MEMORY)
    out = workdir / "out"
    assert (out / "unk_index.jsonl").read_bytes() == b""
    manifest = _manifest(out)
    assert list(manifest)[:len(MANIFEST_REFERENCE_KEYS)] == MANIFEST_REFERENCE_KEYS
    assert manifest["tokenizer"]["unk_id"] is None
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(workdir / "bytebpe.json"))
    assert manifest["tokenizer"]["pad_id"] == tk.token_to_id(PAD)
    assert manifest["special_tokens"] == {
        "pad": {"id": tk.token_to_id(PAD), "token": PAD, "source": "tokenizer_config pad_token"},
        "bos": {"id": tk.token_to_id(BOT), "token": BOT, "source": "tokenizer_config bos_token"},
        "eos": {"id": tk.token_to_id(EOT), "token": EOT, "source": "tokenizer_config eos_token"},
        "unk": None}
    assert json.loads((out / "stats.json").read_text())["unk_tokens"] == 0
    # every sample's text comes back from its tokens: nothing was lost to an UNK
    records = _records(out, np.uint16, 4)
    assert len(records) == len(ROWS)
    decoded = sorted(tk.decode(tokens, skip_special_tokens=False) for _, tokens in records)
    assert decoded == sorted(f"Q: {r['q']}\nA: {r['a']}" for r in ROWS)
    result = verify_output(str(out))
    assert result.ok, result.problems
    report = write_report(str(out))
    text = Path(report["report"]).read_text(encoding="utf-8")
    assert "unk_id none (the tokenizer has no UNK token" in text


def test_a_non_byte_level_tokenizer_without_unk_is_still_refused(workdir):
    spec = json.loads((workdir / "bytebpe.json").read_text())
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    (workdir / "plain.json").write_text(json.dumps(spec))
    with pytest.raises(errors.TokenizerSpecialTokenError) as info:
        _plan("hf_json", files=["plain.json"], pad_token=PAD)
    assert "Special token: unk_id" in info.value.english and "ByteLevel" in info.value.english


def _with_padding(workdir: Path) -> str:
    spec = json.loads((workdir / "bytebpe.json").read_text())
    spec["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None,
                       "pad_id": 1, "pad_type_id": 0, "pad_token": EOT}
    (workdir / "padded.json").write_text(json.dumps(spec))
    return "padded.json"


def test_pad_resolution_order_and_sources(workdir):
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(workdir / "bytebpe.json"))
    padded = _with_padding(workdir)
    config = _config(workdir / "tokenizer_config.json", pad_token=PAD, bos_token=BOT,
                     eos_token=EOT)

    def pad(**kw):
        (plan,) = _plan("hf_json", **kw)
        assert plan.pad_id == plan.facts.pad.id
        return plan.facts.pad.as_json()

    # an explicit argument wins over everything
    assert pad(files=[padded], config=config, pad_id=5) == {
        "id": 5, "token": tk.id_to_token(5), "source": "pad_id argument"}
    assert pad(files=[padded], config=config, pad_token=BOT) == {
        "id": tk.token_to_id(BOT), "token": BOT, "source": "pad_token argument"}
    # then tokenizer.json's padding, then the tokenizer config's pad_token
    assert pad(files=[padded], config=config) == {
        "id": 1, "token": EOT, "source": "tokenizer.json padding"}
    assert pad(config=config) == {
        "id": tk.token_to_id(PAD), "token": PAD, "source": "tokenizer_config pad_token"}
    # SentencePiece: the tokenizer config's pad_token before the model's pad_id
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(workdir / "sp_pad.model"))
    (plan,) = _plan("sentencepiece", files=["sp_pad.model"])
    assert plan.facts.pad.as_json() == {"id": 3, "token": sp.id_to_piece(3),
                                        "source": "sentencepiece model"}
    sp_config = _config(workdir / "sp_config.json", pad_token="<extra>")
    (plan,) = _plan("sentencepiece", files=["sp_pad.model"], config=sp_config)
    assert plan.facts.pad.as_json() == {"id": sp.piece_to_id("<extra>"), "token": "<extra>",
                                        "source": "tokenizer_config pad_token"}


def test_missing_pad_says_how_to_set_one_and_writes_nothing(workdir):
    config = _config(workdir / "tokenizer_config.json", bos_token=BOT, eos_token=EOT)
    with pytest.raises(errors.TokenizerSpecialTokenError) as info:
        _job("hf_json", config=config).run(on_template_unk="abort", on_overflow="truncate",
                                           pipeline_options=IN_MEMORY)
    exc = info.value
    assert "Special token: pad_id" in exc.english
    assert 'pad_token="<token text>"' in exc.english and "pad_id=<id>" in exc.english
    assert "Cách đặt" in exc.vietnamese
    assert "EOS token is used as pad only when you name it" in exc.english
    assert not (workdir / "out").exists()
    # the same error survives a process boundary
    assert errors.error_from_payload(exc.to_payload()).english == exc.english


def test_pad_token_may_be_the_eos_text_and_is_recorded(workdir):
    from tokenizers import Tokenizer

    eot = Tokenizer.from_file(str(workdir / "bytebpe.json")).token_to_id(EOT)
    _job("hf_json", pad_token=EOT).run(on_template_unk="abort", on_overflow="truncate",
                                       pipeline_options=IN_MEMORY)
    manifest = _manifest(workdir / "out")
    assert manifest["tokenizer"]["pad_id"] == eot
    assert manifest["special_tokens"]["pad"] == {"id": eot, "token": EOT,
                                                 "source": "pad_token argument"}
    assert manifest["special_tokens"]["bos"] is None and manifest["special_tokens"]["eos"] is None
    length_field = json.loads((workdir / "out/length_field.json").read_text())
    assert length_field["pad_token_id"] == eot
    assert verify_output(str(workdir / "out")).ok


def test_sentencepiece_bos_eos_are_their_own_segments_with_the_model_ids(workdir):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(workdir / "sp_plain.model"))
    pad = sp.piece_to_id("<unk>")  # sp_plain has no pad: name one
    _job("sentencepiece", files=["sp_plain.model"], sizes=(64, 128), bos=True, eos=True,
         pad_id=pad).run(
        on_template_unk="continue", on_overflow="truncate", pipeline_options=IN_MEMORY)
    out = workdir / "out"
    length_field = json.loads((out / "length_field.json").read_text())
    assert length_field["sequence_template"] == ["bos", "token_template", "q", "token_template",
                                                 "a", "eos"]
    assert length_field["length_fields"][0] == {"index": 0, "name": "bos", "kind": "literal",
                                                "content": sp.id_to_piece(sp.bos_id())}
    assert length_field["length_fields"][-1] == {"index": 5, "name": "eos", "kind": "literal",
                                                 "content": sp.id_to_piece(sp.eos_id())}
    records = _records(out, np.uint16, 6)
    assert len(records) == len(ROWS)
    for lengths, tokens in records:
        assert lengths[0] == 1 and lengths[-1] == 1
        assert tokens[0] == sp.bos_id() and tokens[-1] == sp.eos_id()
        assert sp.bos_id() not in tokens[1:-1]  # "<s>" is never encoded as text
    manifest = _manifest(out)
    assert manifest["sequence_template"] == length_field["sequence_template"]
    assert manifest["special_tokens"]["bos"] == {"id": sp.bos_id(), "token": "<s>",
                                                 "source": "sentencepiece model"}
    # the hash covers the template's text only: as a build without bos / eos
    import hashlib

    rows = [json.loads(line) for line in (out / "sample_index.jsonl").read_text().splitlines()]
    first = ROWS[rows[0]["sample_id"]]
    text = f"Q: {first['q']}\nA: {first['a']}"
    assert rows[0]["hash"] == hashlib.sha256(text.encode()).hexdigest()
    assert verify_output(str(out)).ok


def test_bos_without_an_id_is_a_special_token_error(workdir):
    with pytest.raises(errors.TokenizerSpecialTokenError) as info:
        _job("sentencepiece", files=["sp_bare.model"], bos=True, pad_id=0).run(
            on_template_unk="continue", on_overflow="truncate", pipeline_options=IN_MEMORY)
    assert "Special token: bos_id" in info.value.english
    assert "bos_id / eos_id >= 0" in info.value.english
    assert not (workdir / "out").exists()
    with pytest.raises(errors.TokenizerSpecialTokenError) as info:  # hf_json: no config
        _plan("hf_json", pad_token=PAD, eos=True)
    assert "Special token: eos_id" in info.value.english


def test_hf_bos_eos_come_from_the_tokenizer_config(workdir):
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(workdir / "bytebpe.json"))
    config = _config(workdir / "tokenizer_config.json", pad_token=PAD,
                     bos_token={"content": BOT, "lstrip": False}, eos_token=EOT)
    (plan,) = _plan("hf_json", config=config, bos=True, eos=True)
    assert plan.template.sequence_template[0] == "bos"
    assert plan.template.sequence_template[-1] == "eos"
    assert plan.literal_ids[0] == (tk.token_to_id(BOT),)
    assert plan.literal_ids[-1] == (tk.token_to_id(EOT),)


def test_tokenizer_facts_expose_template_and_special_strings(workdir):
    config = _config(workdir / "tokenizer_config.json", pad_token={"content": PAD},
                     bos_token=BOT, eos_token={"content": EOT, "special": True},
                     chat_template=[{"name": "tool_use", "template": "T"},
                                    {"name": "default", "template": "{{ bos_token }}D"}])
    (plan,) = _plan("hf_json", config=config)
    facts = plan.facts
    assert facts.chat_template == "{{ bos_token }}D"
    assert (facts.bos_token, facts.eos_token) == (BOT, EOT)
    assert facts.special_tokens == (BOT, EOT, PAD)
    assert facts.unk is None
    _config(workdir / "tokenizer_config.json", pad_token=PAD, chat_template="S")
    (plan,) = _plan("hf_json", config="tokenizer_config.json")
    assert plan.facts.chat_template == "S" and plan.facts.bos_token is None


def test_options_apply_to_every_tokenizer_of_a_per_file_list(workdir):
    (workdir / "bytebpe2.json").write_bytes((workdir / "bytebpe.json").read_bytes())
    write_jsonl(workdir / "data2.jsonl", ROWS[:2])
    config = _config(workdir / "tokenizer_config.json", pad_token=PAD)
    raw = _job("hf_json", files=["bytebpe.json", "bytebpe2.json"],
               data=["data.jsonl", "data2.jsonl"], out=["o1", "o2"]).config()
    raw["tokenizer"]["config"] = config
    raw["output"]["samples_per_shard"] = [2]
    plans = [prepare(d) for d in resolve_datasets(raw)]
    assert [p.dataset.tokenizer_given for p in plans] == ["bytebpe.json", "bytebpe2.json"]
    assert [p.facts.pad.source for p in plans] == ["tokenizer_config pad_token"] * 2


def test_an_unknown_tokenizer_key_is_an_unknown_key_before_any_output(workdir):
    """Was a TokenizerValidationError; issue 30: headed as an unknown key, with the
    nearest known key (`core.config.schema`)."""
    raw = _job("hf_json").config()
    raw["tokenizer"]["padding"] = 0
    with pytest.raises(errors.ConfigUnknownKeyError) as info:
        resolve_datasets(raw)
    assert info.value.kwargs["key"] == "tokenizer.padding"
    assert info.value.kwargs["suggestion"] == "pad_id"
    assert not (workdir / "out").exists()


@pytest.mark.parametrize("options,component", [
    ({"bos": "yes"}, "bos"),
    ({"eos": 1}, "eos"),
    ({"pad_id": "3"}, "pad_id"),
    ({"pad_id": True}, "pad_id"),
    ({"pad_id": -1}, "pad_id"),
    ({"config": 5}, "config"),
    ({"pad_token": ""}, "pad_token"),
    ({"pad_token": PAD, "pad_id": 2}, "pad_token"),
])
def test_bad_tokenizer_options_are_validation_errors_before_any_output(workdir, options, component):
    raw = _job("hf_json").config()
    raw["tokenizer"].update(options)
    with pytest.raises(errors.TokenizerValidationError) as info:
        resolve_datasets(raw)
    assert info.value.kwargs["component"] == component
    assert not (workdir / "out").exists()


def test_api_options_are_keyword_only_and_validated_at_run(workdir):
    with pytest.raises(TypeError):
        pipeline("unit-build").tokenizer.hf_json(["bytebpe.json"])  # noqa
    with pytest.raises(errors.TokenizerValidationError):
        _job("hf_json", pad_id="3").run(on_template_unk="abort", on_overflow="truncate",
                                        pipeline_options=IN_MEMORY)
    assert not (workdir / "out").exists()


def test_pad_not_in_the_vocabulary_and_missing_config(workdir):
    with pytest.raises(errors.TokenizerValidationError) as info:
        _plan("hf_json", pad_token="<no such token>")
    assert info.value.kwargs["component"] == "pad_token"
    with pytest.raises(errors.TokenizerValidationError) as info:
        _plan("hf_json", pad_id=10 ** 6)
    assert info.value.kwargs["component"] == "pad_id"
    with pytest.raises(errors.MintDimFileNotFoundError) as info:
        _plan("hf_json", pad_token=PAD, config="nowhere/tokenizer_config.json")
    assert info.value.kwargs == {"context": "tokenizer config",
                                 "missing_file": "nowhere/tokenizer_config.json"}


def test_a_mintdim_config_keeps_its_tokenizer_block_and_gains_sources(workdir, tokenizers_dir):
    """The 0.2.1 path: manifest.tokenizer as before; our record comes after `output`."""
    (workdir / "hf_bpe.json").write_bytes((tokenizers_dir / "hf_bpe.json").read_bytes())
    _job("hf_json", files=["hf_bpe.json"]).run(on_template_unk="continue",
                                               on_overflow="truncate", pipeline_options=IN_MEMORY)
    manifest = _manifest(workdir / "out")
    keys = list(manifest)
    assert keys[:len(MANIFEST_REFERENCE_KEYS)] == MANIFEST_REFERENCE_KEYS
    assert keys.index("special_tokens") > keys.index("output")
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(workdir / "hf_bpe.json"))
    assert manifest["tokenizer"] == {"type": "hf_json", "path": "hf_bpe.json",
                                     "vocab_size": tk.get_vocab_size(),
                                     "unk_id": tk.token_to_id("[UNK]"),
                                     "pad_id": tk.token_to_id("[PAD]")}
    assert manifest["special_tokens"] == {
        "pad": {"id": tk.token_to_id("[PAD]"), "token": "[PAD]", "source": "tokenizer.json padding"},
        "bos": None, "eos": None,
        "unk": {"id": tk.token_to_id("[UNK]"), "token": "[UNK]", "source": "tokenizer.json model"}}
    assert manifest["sequence_template"] == ["token_template", "q", "token_template", "a"]
