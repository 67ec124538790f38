"""train-tokenizer, SentencePiece: BPE trained from the summed word counts (its tsv
input) gives the model `SentencePieceTrainer` gives on the text itself (every piece,
score and type, the normalizer and denormalizer specs, the trainer spec but for its
input); unigram trains on a hashed sample of `input_sentence_size` sentences, and its
model is the trainer's own on that sample as a file."""
from __future__ import annotations

import hashlib
import io
import json

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

import train_corpus
from conftest import IN_MEMORY, MULTI_PROCESS, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.core import errors


def _rows() -> list[str]:
    """Prose, code and multilingual rows, about 1 MB (SentencePiece's BPE is slow)."""
    rows = train_corpus.rows()
    return list(rows[:1200]) + list(rows[5000:6500]) + list(rows[-4000:])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_sp")
    rows = _rows()
    # the same rows as a text file: the oracle's input (a row's lines are its sentences)
    (root / "corpus.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return write_jsonl(root / "corpus.jsonl", [{"text": t} for t in rows])


def _model(**args) -> pb.ModelProto:
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(model_writer=writer, minloglevel=2, **args)
    model = pb.ModelProto()
    model.ParseFromString(writer.getvalue())
    return model


def _read(path) -> pb.ModelProto:
    model = pb.ModelProto()
    model.ParseFromString(path.read_bytes())
    return model


def _same(ours: pb.ModelProto, want: pb.ModelProto) -> None:
    assert [(p.piece, p.score, p.type) for p in ours.pieces] == \
        [(p.piece, p.score, p.type) for p in want.pieces]
    assert ours.normalizer_spec == want.normalizer_spec
    assert ours.denormalizer_spec == want.denormalizer_spec
    for model in (ours, want):
        del model.trainer_spec.input[:]
    assert ours.trainer_spec == want.trainer_spec
    ours.ClearField("trainer_spec")
    want.ClearField("trainer_spec")
    assert ours.SerializeToString() == want.SerializeToString()


def train(corpus, out, kind: str, options=IN_MEMORY, **settings) -> dict:
    job = pipeline("train-tokenizer").source.text(files=[str(corpus)])
    return (getattr(job.trainer, kind)(**settings).output.dir(str(out))
            .run(pipeline_options=list(options)))


BPE_CASES = {
    "defaults": {"vocab_size": 4000},
    "byte_fallback_symbols_digits": {"vocab_size": 3000, "byte_fallback": True,
                                     "user_defined_symbols": ["<sep>", "<cls>"],
                                     "control_symbols": ["<ctl>"], "split_digits": True,
                                     "character_coverage": 0.9995},
    "no_prefix_keep_spaces": {"vocab_size": 3000, "add_dummy_prefix": False,
                              "remove_extra_whitespaces": False,
                              "allow_whitespace_only_pieces": True,
                              "character_coverage": 1.0, "max_sentencepiece_length": 8},
    "nfkc_cf_short_lines": {"vocab_size": 2500, "normalization_rule_name": "nmt_nfkc_cf",
                            "max_sentence_length": 300, "pad_id": 3, "bos_id": -1},
}


@pytest.mark.parametrize("case", sorted(BPE_CASES))
def test_bpe_from_counts_is_the_trainer_s_model_on_the_text(case, corpus, tmp_path):
    settings = BPE_CASES[case]
    result = train(corpus, tmp_path / "out", "sentencepiece_bpe", **settings)
    assert result["tokenizer"] == "tokenizer.model"
    ours = _read(tmp_path / "out" / "tokenizer.model")
    want = _model(input=str(corpus.parent / "corpus.txt"), model_type="bpe", **settings)
    assert list(ours.trainer_spec.input) == [str(corpus)]  # the sources, as given
    _same(ours, want)


def _sentence_hash(seed: int, line: str) -> int:
    digest = hashlib.blake2b(line.encode("utf-8"), digest_size=8, key=seed.to_bytes(8, "little"),
                             person=b"sentence".ljust(16, b"\0"))
    return int.from_bytes(digest.digest(), "little")


def test_unigram_trains_on_the_hashed_sample(corpus, tmp_path):
    size = 2500
    settings = {"vocab_size": 2000, "input_sentence_size": size, "seed": 5,
                "character_coverage": 0.9995}
    train(corpus, tmp_path / "a", "sentencepiece_unigram", **settings)
    sample = (tmp_path / "a" / "unigram_sample.txt").read_text(encoding="utf-8")
    # the `size` sentences of smallest hash, in hash order: lines a text file of the rows
    # gives the trainer (non-empty, not over max_sentence_length, no U+2585)
    lines = [line for row in _rows() for line in row.split("\n")
             if line and len(line.encode()) <= 4192 and "\u2585" not in line]
    assert len(lines) > 2 * size
    want = sorted((_sentence_hash(5, line), line) for line in lines)[:size]
    assert sample == "".join(f"{line}\n" for _, line in want)
    ours = _read(tmp_path / "a" / "tokenizer.model")
    args = {k: v for k, v in settings.items() if k != "seed"}
    oracle = _model(input=str(tmp_path / "a" / "unigram_sample.txt"), model_type="unigram",
                    num_threads=16, **args)
    _same(ours, oracle)
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sample_sentences"] == size
    assert manifest["trainer"]["input_sentence_size"] == size


def test_unigram_s_sample_and_model_on_worker_processes_and_small_ranges(corpus, tmp_path):
    settings = {"vocab_size": 1500, "input_sentence_size": 2000}
    train(corpus, tmp_path / "a", "sentencepiece_unigram", **settings)
    train(corpus, tmp_path / "b", "sentencepiece_unigram",
          options=MULTI_PROCESS + ["--input_range_bytes=65536"], **settings)
    for name in ("unigram_sample.txt", "tokenizer.model"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_symbol_with_whitespace_is_refused(corpus, tmp_path):
    with pytest.raises(errors.SpecialTokenSplitError) as caught:
        train(corpus, tmp_path / "out", "sentencepiece_bpe", vocab_size=500,
              user_defined_symbols=["<a b>"])
    assert caught.value.kwargs["pieces"] == ["<a", "b>"]
    assert not (tmp_path / "out").exists()


def test_a_symbol_listed_twice_is_refused(corpus, tmp_path):
    with pytest.raises(errors.SpecialTokenRepeatedError) as caught:
        train(corpus, tmp_path / "out", "sentencepiece_bpe", vocab_size=500,
              user_defined_symbols=["<a>", "<b>"], control_symbols=["<a>"])
    assert caught.value.kwargs["positions"] == [0, 2]


def test_options_counts_cannot_give_are_refused(corpus, tmp_path):
    for key, value in (("split_by_whitespace", False), ("treat_whitespace_as_suffix", True),
                       ("input_sentence_size", 1000)):
        with pytest.raises(errors.TrainerValidationError) as caught:
            train(corpus, tmp_path / "out", "sentencepiece_bpe", vocab_size=500,
                  **{key: value})
        assert caught.value.kwargs["component"] == f"trainer.{key}"
    assert not (tmp_path / "out").exists()


def test_too_small_a_vocabulary_for_the_characters_is_refused_before_output(corpus, tmp_path):
    with pytest.raises(errors.TrainerVocabSizeError) as caught:
        train(corpus, tmp_path / "out", "sentencepiece_bpe", vocab_size=40,
              character_coverage=1.0)
    assert caught.value.kwargs["vocab_size"] == 40
    assert not (tmp_path / "out").exists()
