"""SentencePiece from what the pipeline counted, with `SentencePieceTrainer` itself.

BPE: SentencePiece's BPE trainer keeps only the word counts and the character counts of
what it loaded (bpe_model_trainer.cc: `SplitSentencesByWhitespace`, then merges over the
sorted words), so its own `tsv` input of `word<TAB>count` lines, made of the summed table,
gives the same pieces and scores as its text input. The words are already normalized
(`words.SentencePieceWords`), so the tsv run normalizes with `identity` and no prefix or
whitespace rules; the model then gets the normalizer spec a text run records (taken from
a text run of the trainer on a few lines with the same rules) and its trainer spec loses
the tsv run's own settings (input format, the length limit already applied per line).

Unigram: its seed pieces come from a suffix array over whole sentences, which counts
cannot give, so it trains on the pipeline's sample (`input_sentence_size` sentences of
smallest seeded hash) as a text file: the model is the trainer's own on that file."""
from __future__ import annotations

import io
import os
import re
import tempfile

from mintdim_beam.core.errors.train import TrainerValidationError, TrainerVocabSizeError
from mintdim_beam.train_tokenizer import table

# Set only for the tsv run (and taken back out of the model's trainer spec after it).
_TSV_ONLY = {"input_format": "tsv", "max_sentence_length": 1 << 30}  # the most it takes
_NORMALIZER_KEYS = ("normalization_rule_name", "add_dummy_prefix", "remove_extra_whitespaces")


def _trainer_args(spec) -> dict:
    args = {"model_type": spec.model_type, "vocab_size": spec.vocab_size, "minloglevel": 2}
    for key, value in spec.options:
        args[key] = list(value) if isinstance(value, tuple) else value
    if spec.model_type == "unigram":
        args["input_sentence_size"] = spec.sample_size
        # unigram's scores depend on the thread count (its sums run per thread): fixed
        # here, SentencePiece's own default, whatever the machine
        args.setdefault("num_threads", spec.option("num_threads"))
    return args


def _model(**args) -> bytes:
    import sentencepiece as spm

    writer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(model_writer=writer, **args)
    except RuntimeError as exc:
        # "Vocabulary size is smaller than required_chars. 8 vs 10.": required characters
        # and meta pieces against vocab_size
        found = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(exc))
        if found:
            raise TrainerVocabSizeError(vocab_size=int(found.group(1)), special=0,
                                        alphabet=int(found.group(2)) - 1,
                                        where="characters SentencePiece must keep, with its "
                                              "meta pieces") from None
        raise
    return writer.getvalue()


def _text_normalizer(spec, work: str):
    """A model of a text run with these rules: its normalizer and denormalizer specs are
    what a text run records."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    probe = os.path.join(work, "probe.txt")
    with open(probe, "w", encoding="utf-8") as f:
        f.write("a\n" * 4)
    args = {key: spec.option(key) for key in _NORMALIZER_KEYS if key in dict(spec.options)}
    model = pb.ModelProto()
    model.ParseFromString(_model(input=probe, model_type="bpe", vocab_size=8,
                                 hard_vocab_limit=False, minloglevel=2, **args))
    return model


def _write_tsv(parts: list[str], path: str) -> int:
    """The table as `word<TAB>count` lines; a word holding a TAB cannot be one."""
    words = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for part in parts:
            with open(part, "rb") as handle:
                for word, count in table.decode(handle.read()):
                    if "\t" in word:
                        raise TrainerValidationError(
                            component="trainer.normalization_rule_name",
                            rule="sentencepiece_option",
                            value=repr("a rule that keeps tabs (a word holds one: "
                                       f"{word!r}); use nmt_nfkc, which makes them spaces"))
                    out.write(f"{word}\t{count}\n")
                    words += 1
    return words


def train_sentencepiece(spec, parts: list[str], sample: str | None, inputs: list[str]):
    """(the .model's bytes, what trained it). `parts`: the table's local part files
    (BPE); `sample`: the local sample file (unigram); `inputs`: the source files as given,
    recorded as the trainer spec's input."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    args = _trainer_args(spec)
    with tempfile.TemporaryDirectory(prefix="mintdim-spm-") as work:
        if spec.model_type == "unigram":
            data = _model(input=sample, **args)
            engine = {"name": "sentencepiece", "why": "SentencePieceTrainer on the "
                      f"pipeline's sample of {spec.sample_size} sentences"}
        else:
            tsv = os.path.join(work, "words.tsv")
            _write_tsv(parts, tsv)
            counted = {k: v for k, v in args.items() if k not in _NORMALIZER_KEYS}
            counted.update(_TSV_ONLY, normalization_rule_name="identity",
                           add_dummy_prefix=False, remove_extra_whitespaces=False)
            data = _model(input=tsv, **counted)
            engine = {"name": "sentencepiece", "why": "SentencePieceTrainer's tsv input "
                      "from the summed word counts"}
            reference = _text_normalizer(spec, work)
        model = pb.ModelProto()
        model.ParseFromString(data)
        if spec.model_type == "bpe":
            for name in ("normalizer_spec", "denormalizer_spec"):
                model.ClearField(name)
                if reference.HasField(name):
                    getattr(model, name).CopyFrom(getattr(reference, name))
            model.trainer_spec.ClearField("input_format")
            model.trainer_spec.ClearField("max_sentence_length")
            if "max_sentence_length" in dict(spec.options):
                model.trainer_spec.max_sentence_length = spec.option("max_sentence_length")
        del model.trainer_spec.input[:]
        model.trainer_spec.input.extend(inputs)
        return model.SerializeToString(), engine
