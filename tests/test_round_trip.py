"""Round-trip evidence (issue 24): every field segment's ids are decoded and compared with
its source; lossy samples are indexed with their kind, the manifest counts them,
`verify` checks the index and `report` shows it with the tokenizer card; a template's
own text that the tokenizer cannot carry is a warning before any output, or an error
under on_lossy="abort". Real tokenizers, trained here or bundled."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from conftest import IN_MEMORY, REPO, byte_level_bpe, sentence, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.audit.report import write_report
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core import errors
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.tokenizer.round_trip import Decoder, excerpts, kind_of
from mintdim_beam.core.tokenizer.tokenizers import load_tokenizer

DEMO_SP = REPO / "examples/tokenizer/demo.model"
PROBES = ["ｈｅｌｌｏ world", "the ﬁle", "step ① done", "tab\tand  two spaces", "plain words"]


@pytest.fixture(scope="module")
def toks(tmp_path_factory, tokenizers_dir) -> dict:
    """Tokenizers of every decoder kind the table emulates, and one it does not."""
    import sentencepiece as spm
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("round_trip_toks")
    rng = random.Random(24)
    lines = [sentence(rng, 3, 25) for _ in range(2000)] + ["Ünïcödé 漢字 😀 ﬁ ①"] * 20
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # Llama-like: BPE, identity normalizer, byte fallback, symbols of both kinds.
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(root / "llama_like"), vocab_size=400,
        model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, user_defined_symbols=["<|user|>"],
        control_symbols=["[INST]", "[/INST]"], character_coverage=1.0, num_threads=1,
        minloglevel=2)
    out = {"sp_nfkc": tokenizers_dir / "sp.model", "sp_demo": DEMO_SP,
           "sp_llama_like": root / "llama_like.model",
           "hf_whitespace_bpe": tokenizers_dir / "hf_bpe.json"}  # no decoder: joined by spaces
    wordpiece = Tokenizer.from_file(str(tokenizers_dir / "hf_wordpiece.json"))
    wordpiece.decoder = decoders.WordPiece()  # not a concatenation: decoded by the tokenizer
    wordpiece.save(str(root / "wordpiece.json"))
    out["hf_wordpiece"] = root / "wordpiece.json"
    (root / "bytelevel").mkdir()
    byte_level_bpe(root / "bytelevel", lines, ["<|im_end|>"], 600, {})
    out["hf_byte_level"] = root / "bytelevel" / "tokenizer.json"
    meta = Tokenizer(models.Unigram())
    meta.pre_tokenizer = pre_tokenizers.Metaspace()
    meta.decoder = decoders.Metaspace()
    meta.train_from_iterator(lines, trainers.UnigramTrainer(vocab_size=300, unk_token="<unk>",
                                                            special_tokens=["<unk>"]))
    meta.save(str(root / "metaspace.json"))
    out["hf_metaspace"] = root / "metaspace.json"
    llama = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    llama.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                             normalizers.Replace(" ", "\u2581")])
    llama.pre_tokenizer = pre_tokenizers.Split(Regex("\u2581"), behavior="merged_with_next")
    llama.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                       decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    llama.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<unk>"] + [f"<0x{b:02X}>" for b in range(256)]))
    llama.save(str(root / "llama_hf.json"))
    out["hf_llama_style"] = root / "llama_hf.json"
    return out


def _tokenizer(path: Path):
    kind = "sentencepiece" if path.suffix == ".model" else "hf_json"
    return load_tokenizer(kind, str(path))


@pytest.mark.parametrize("name,emulated", [
    ("sp_nfkc", True), ("sp_demo", True), ("sp_llama_like", True), ("hf_whitespace_bpe", True),
    ("hf_byte_level", True), ("hf_metaspace", True), ("hf_llama_style", True),
    ("hf_wordpiece", False)])
def test_the_decoder_table_decodes_as_the_tokenizer_does(toks, name, emulated):
    tokenizer = _tokenizer(toks[name])
    decoder = Decoder(tokenizer)
    assert decoder.emulated is emulated
    rng = random.Random(3)
    texts = PROBES + [sentence(rng, 0, 30) + rng.choice(["", " ", "\n", " 😀", "  x"])
                      for _ in range(400)] + [" leading", "  two", "trailing ", ""]
    encoded = tokenizer.encode_many(texts)
    real = tokenizer.decode_many(encoded)
    unk = tokenizer.unk_id
    for text, ids, want in zip(texts, encoded, real):
        if unk is not None and unk in ids:
            continue  # an UNK decodes to a byte no text holds, on purpose
        assert decoder.decode(ids, True).decode("utf-8", "replace") == want, text


def test_kinds_and_excerpts():
    assert kind_of("ｈｅｌｌｏ", "hello", False) == "normalization"
    assert kind_of("Hello World", "hello world", False) == "normalization"
    assert kind_of("a\t\tb  c", "a b c", False) == "whitespace"
    assert kind_of("line\n", "line", False) == "whitespace"
    assert kind_of("x 😀", "x \ufffd", True) == "unknown"
    assert kind_of("cat", "dog", False) == "other"
    source, decoded = excerpts("a" * 100 + "ｂ" + "c" * 100, "a" * 100 + "b" + "c" * 100)
    assert source.startswith("a" * 8 + "ｂ") and decoded.startswith("a" * 8 + "b")


def _build(work: Path, rows, template="{q}", fields=("q",), out="out", tokenizer=DEMO_SP,
           on_lossy="continue", **tokenizer_options):
    data = write_jsonl(work / "data.jsonl", rows)
    kind = "sentencepiece" if Path(tokenizer).suffix == ".model" else "hf_json"
    job = (pipeline("unit-build")
           .source.jsonl(files=[str(data)], fields=[list(fields)], templates=[template]))
    job = getattr(job.tokenizer, kind)(files=[str(tokenizer)], **tokenizer_options)
    return (job.units(sizes=[[64, 256]], build_batch=[4])
            .output.dir(str(work / out), samples_per_shard=[3])
            .run(on_overflow="truncate", on_template_unk="continue", on_lossy=on_lossy,
                 pipeline_options=IN_MEMORY))


def _jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_lossy_samples_are_indexed_counted_verified_and_reported(tmp_path):
    rows = [{"q": text} for text in PROBES]
    result = _build(tmp_path, rows, template="Q:{q}")
    out = tmp_path / "out"
    assert result["outputs"][0]["lossy_samples"] == 4
    lossy = _jsonl(out / fmt.LOSSY_INDEX)
    assert [r["sample_id"] for r in lossy] == [0, 1, 2, 3]  # "plain words" round-trips
    assert [r["kinds"] for r in lossy] == [["normalization"]] * 3 + [["whitespace"]]
    assert lossy[0] == {"sample_id": 0, "source_file": str(tmp_path / "data.jsonl"),
                        "source_line": 1, "segments": [1], "segment_names": ["q"],
                        "kinds": ["normalization"], "source": "ｈｅｌｌｏ world",
                        "decoded": "hello world"}
    manifest = json.loads((out / fmt.MANIFEST).read_text())
    assert manifest["round_trip"] == {
        "segments_checked": 5, "lossy_segments": 4, "lossy_samples": 4,
        "kinds": {"normalization": 3, "whitespace": 1, "unknown": 0, "other": 0},
        "index": fmt.LOSSY_INDEX, "template": []}
    card = manifest["tokenizer_card"]
    assert card["normalizer"] == "nmt_nfkc" and card["remove_extra_whitespaces"] is True
    assert any("NFKC" in loss for loss in card["cannot_represent"])
    assert verify_output(str(out)).ok
    md = Path(write_report(str(out))["report"]).read_text(encoding="utf-8")
    assert "## Tokenizer card" in md and "## Round trip" in md
    assert "5 segments checked, 4 lossy (80.0%)" in md
    assert "`ｈｅｌｌｏ world` | `hello world`" in md
    csv = (out / "report" / "lossy_per_segment.csv").read_text()
    assert csv.splitlines() == ["segment_index,segment_name,normalization,whitespace,unknown,other",
                                "1,q,3,1,0,0"]


def test_verify_names_a_lossy_index_that_disagrees(tmp_path):
    _build(tmp_path, [{"q": text} for text in PROBES])
    out = tmp_path / "out"
    good = (out / fmt.LOSSY_INDEX).read_text(encoding="utf-8").splitlines(keepends=True)
    damages = {
        "dropped row": "".join(good[1:]),
        "wrong segment": good[0].replace('"segments": [0]', '"segments": [5]') + "".join(good[1:]),
        "wrong kind": good[0].replace('"normalization"', '"magic"', 1) + "".join(good[1:]),
        "not a record": good[0].replace('"sample_id": 0', '"sample_id": 99') + "".join(good[1:]),
    }
    for what, text in damages.items():
        (out / fmt.LOSSY_INDEX).write_text(text, encoding="utf-8")
        result = verify_output(str(out))
        assert not result.ok, what
        assert any(p.file in (fmt.LOSSY_INDEX, fmt.MANIFEST) for p in result.problems), what
    (out / fmt.LOSSY_INDEX).unlink()
    assert any("lossy_index.jsonl" in str(p) and "missing" in str(p)
               for p in verify_output(str(out)).problems)


def test_a_literal_that_encodes_to_nothing_is_a_warning_before_any_output(tmp_path, capfd):
    _build(tmp_path, [{"q": "hello"}, {"q": "world"}], template="{q}\n")
    err = capfd.readouterr().err
    assert 'the literal "\\n" encodes to no token' in err
    assert err.index("warning") < err.index("[unit-build] start")
    manifest = json.loads((tmp_path / "out" / fmt.MANIFEST).read_text())
    assert manifest["round_trip"]["template"] == [{
        "kind": "lossy_literal", "where": f"template of {tmp_path / 'data.jsonl'}", "segment": 1,
        "literal": "\n", "tokens": 0, "decoded": "", "loss": "whitespace"}]


def test_on_lossy_abort_refuses_a_lossy_literal_before_any_output(tmp_path):
    with pytest.raises(errors.TemplateRoundTripError) as info:
        _build(tmp_path, [{"q": "hello"}], template="{q}\n", on_lossy="abort")
    assert "encodes to no token" in info.value.english and "Vấn đề" in info.value.vietnamese
    assert not (tmp_path / "out").exists()


def test_on_lossy_abort_stops_the_build_at_the_first_lossy_sample(tmp_path):
    rows = [{"q": "plain words"}, {"q": "more plain words"}, {"q": "the ﬁle"}, {"q": "ｈｅｌｌｏ"}]
    with pytest.raises(errors.SampleRoundTripError) as info:
        _build(tmp_path, rows, on_lossy="abort")
    kw = info.value.kwargs
    assert (kw["file"], kw["line"], kw["segment"], kw["kind"]) == (
        str(tmp_path / "data.jsonl"), 3, "q", "normalization")
    assert (kw["source"], kw["decoded"]) == ("the ﬁle", "the file")
    out = tmp_path / "out"
    assert not (out / fmt.MANIFEST).exists() and list(out.glob("unit_*/UNIT_BUILD_FAILED.md"))


def test_a_bad_on_lossy_is_a_config_error(tmp_path):
    with pytest.raises(errors.ConfigValueError, match="Key: on_lossy"):
        _build(tmp_path, [{"q": "x"}], on_lossy="warn")


def test_a_lossless_tokenizer_has_an_empty_index(tmp_path, toks):
    rows = [{"q": text} for text in PROBES]
    _build(tmp_path, rows, template="Q: {q}\n", tokenizer=toks["hf_byte_level"],
           pad_token="<|im_end|>")
    out = tmp_path / "out"
    assert (out / fmt.LOSSY_INDEX).read_text() == ""
    manifest = json.loads((out / fmt.MANIFEST).read_text())
    assert manifest["round_trip"]["segments_checked"] == 5
    assert manifest["round_trip"]["lossy_samples"] == 0
    assert manifest["tokenizer_card"]["byte_level"] is True
    assert verify_output(str(out)).ok


def test_same_lossy_index_on_every_runner(tmp_path):
    from conftest import MULTI_PROCESS

    rng = random.Random(5)
    rows = [{"q": sentence(rng, 1, 8) + rng.choice(["", "  x", " ｆｕｌｌ", "\tt"])}
            for _ in range(60)]
    _build(tmp_path, rows, out="a")
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    (pipeline("unit-build").source.jsonl(files=[str(data)], fields=[["q"]], templates=["{q}"])
     .tokenizer.sentencepiece(files=[str(DEMO_SP)]).units(sizes=[[64, 256]], build_batch=[4])
     .output.dir(str(tmp_path / "b"), samples_per_shard=[3])
     .run(on_overflow="truncate", on_template_unk="continue",
          pipeline_options=MULTI_PROCESS + ["--input_range_bytes=300"]))
    a, b = (tmp_path / "a" / fmt.LOSSY_INDEX).read_bytes(), (tmp_path / "b" / fmt.LOSSY_INDEX).read_bytes()
    assert a == b and a.count(b"\n") > 10
    shutil.rmtree(tmp_path / "b")


def test_the_index_row_shows_the_first_lossy_segment_of_its_record(tmp_path):
    """A record lossy in a non-ASCII field and a later ASCII one (found by different
    passes): the row names both, in order, with the first one's excerpts."""
    _build(tmp_path, [{"q": "ｆｕｌｌ width", "a": "two  spaces"}], template="{q}|{a}",
           fields=("q", "a"))
    (row,) = _jsonl(tmp_path / "out" / fmt.LOSSY_INDEX)
    assert row["segment_names"] == ["q", "a"] and row["kinds"] == ["normalization", "whitespace"]
    assert (row["source"], row["decoded"]) == ("ｆｕｌｌ width", "full width")
