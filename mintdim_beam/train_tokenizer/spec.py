"""The `trainer:` block of a train-tokenizer config, checked before any output, in the
trainers' own key names: Hugging Face BPE (`type: bpe`, the keys of `tokenizers`'
`BpeTrainer`, a normalizer and a pre-tokenizer) or SentencePiece (`sentencepiece_bpe`,
`sentencepiece_unigram`, the keys of `SentencePieceTrainer`).

Why presets and JSON both: most users want GPT-2 / Llama 3 / MiniMind byte-level or a
Metaspace BPE, said in one word; anyone else writes the `tokenizers` JSON of the
normalizer and pre-tokenizer they want, which `tokenizers` itself builds and checks.
What `tokenizers` would decide by hash order (`continuing_subword_prefix`,
`end_of_word_suffix`) is refused, not trained differently."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from mintdim_beam.core.config.trainer_keys import SP_FLAGS, SP_INT, SP_LISTS, SP_TEXT
from mintdim_beam.core.errors.train import (SpecialTokenRepeatedError, SpecialTokenSplitError,
                                            TrainerValidationError, TrainerVocabSizeError)

TRAINER_TYPES = ("bpe", "sentencepiece_bpe", "sentencepiece_unigram")

# Llama 3's split (and OpenAI's cl100k): contractions, letters, 1-3 digits, punctuation,
# newlines, other whitespace; the bytes then mapped by ByteLevel without its own regex.
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
_METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
              "split": True}
PRE_TOKENIZERS = {
    "byte_level": _BYTE_LEVEL,  # GPT-2 and MiniMind (add_prefix_space false)
    "llama3": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated",
         "invert": False},
        {**_BYTE_LEVEL, "use_regex": False}]},
    "whitespace": {"type": "Whitespace"},
    "whitespace_split": {"type": "WhitespaceSplit"},
    "metaspace": _METASPACE,
}
NORMALIZERS = {"nfc": {"type": "NFC"}, "nfkc": {"type": "NFKC"}, "nfd": {"type": "NFD"},
               "nfkd": {"type": "NFKD"}, "lowercase": {"type": "Lowercase"}}
BYTE_LEVEL_ALPHABET = "byte_level"

DEFAULT_SAMPLE = 1_000_000  # unigram: sentences, as SentencePiece's docs suggest
# The rule SentencePiece's `character_coverage` defaults to; we say it in the manifest.
DEFAULT_COVERAGE = 0.9995


def _bad(key: str, rule: str, value) -> TrainerValidationError:
    return TrainerValidationError(component=f"trainer.{key}", rule=rule, value=repr(value))


def _int(block: dict, key: str, default, low: int = 0):
    value = block.get(key, default)
    if value is None and default is None:
        return None
    if type(value) is not int or value < low:
        raise _bad(key, "positive" if low > 0 else "count", f"trainer.{key} ({value!r})")
    return value


def _tokens(block: dict, key: str) -> tuple[str, ...]:
    value = block.get(key) or []
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(t, str) and t for t in value):
        raise _bad(key, "token_list", f"trainer.{key}")
    return tuple(value)


def _no_repeats(key: str, tokens) -> None:
    seen: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        seen.setdefault(token, []).append(i)
    for token, at in seen.items():
        if len(at) > 1:
            raise SpecialTokenRepeatedError(component=f"trainer.{key}", token=token,
                                            positions=at)


@dataclass(frozen=True)
class HfBpeSpec:
    """Hugging Face BPE: the trainer's settings and the tokenizer's pipeline as JSON."""

    vocab_size: int
    min_frequency: int
    special_tokens: tuple[str, ...]
    initial_alphabet: tuple[str, ...]  # sorted characters
    initial_alphabet_given: str | None  # "byte_level", or None for a list
    limit_alphabet: int | None
    max_token_length: int | None
    pre_tokenizer: dict | None
    normalizer: dict | None
    decoder: dict | None
    unk_token: str | None
    type: str = "bpe"
    sample_size: int = 0  # trains on counted words, not on a sample of sentences

    @property
    def counts_words_with(self) -> str:
        return "tokenizers"

    def tokenizer_json(self) -> str:
        """The untrained tokenizer: `tokenizers`' own serialization of a new
        `Tokenizer(BPE(unk_token=...))` with the normalizer, pre-tokenizer, decoder."""
        from tokenizers import Tokenizer, models

        tokenizer = Tokenizer(models.BPE(unk_token=self.unk_token))
        doc = json.loads(tokenizer.to_str())
        doc.update(normalizer=self.normalizer, pre_tokenizer=self.pre_tokenizer,
                   decoder=self.decoder)
        return json.dumps(doc, ensure_ascii=False)

    def trainer(self):
        """`tokenizers.trainers.BpeTrainer` with these settings (no progress bar)."""
        from tokenizers import trainers

        kwargs = {"vocab_size": self.vocab_size, "min_frequency": self.min_frequency,
                  "special_tokens": list(self.special_tokens), "show_progress": False,
                  "initial_alphabet": list(self.initial_alphabet)}
        if self.limit_alphabet is not None:
            kwargs["limit_alphabet"] = self.limit_alphabet
        if self.max_token_length is not None:
            kwargs["max_token_length"] = self.max_token_length
        return trainers.BpeTrainer(**kwargs)

    def manifest_block(self) -> dict:
        return {"type": "bpe", "vocab_size": self.vocab_size,
                "min_frequency": self.min_frequency, "special_tokens": list(self.special_tokens),
                "initial_alphabet": (self.initial_alphabet_given
                                     or "".join(self.initial_alphabet)),
                "limit_alphabet": self.limit_alphabet, "max_token_length": self.max_token_length,
                "normalizer": self.normalizer, "pre_tokenizer": self.pre_tokenizer,
                "decoder": self.decoder, "unk_token": self.unk_token}


@dataclass(frozen=True)
class SentencePieceSpec:
    """SentencePiece BPE or unigram: the trainer's keyword arguments as the user gave
    them (with its defaults where not), and our unigram sample's size and seed."""

    type: str  # sentencepiece_bpe | sentencepiece_unigram
    vocab_size: int
    options: tuple = ()  # sorted (key, value) pairs given, SentencePieceTrainer's names
    sample_size: int = 0  # unigram: sentences sampled by hash
    seed: int = 0  # the sample's hash seed
    symbols: tuple[str, ...] = field(default=())  # user-defined then control symbols

    @property
    def model_type(self) -> str:
        return "bpe" if self.type == "sentencepiece_bpe" else "unigram"

    @property
    def counts_words_with(self) -> str:
        return "sentencepiece" if self.type == "sentencepiece_bpe" else "sample"

    def option(self, key: str):
        given = dict(self.options)
        if key in given:
            return given[key]
        for defaults in (SP_INT, SP_FLAGS, SP_TEXT):
            if key in defaults:
                return defaults[key]
        return None

    def meta_pieces(self) -> int:
        """unk/bos/eos/pad pieces that take an id, and the symbols."""
        ids = sum(1 for key in ("unk_id", "bos_id", "eos_id", "pad_id") if self.option(key) >= 0)
        return ids + len(self.symbols) + (256 if self.option("byte_fallback") else 0)

    def manifest_block(self) -> dict:
        doc = {"type": self.type, "vocab_size": self.vocab_size, **dict(self.options)}
        if self.type == "sentencepiece_unigram":
            doc.update(input_sentence_size=self.sample_size, seed=self.seed)
        return doc


def _pipeline_part(block: dict, key: str, presets: dict, rule: str):
    """A preset's JSON, a mapping checked by `tokenizers` itself, or None."""
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if value not in presets:
            raise _bad(key, rule, f"got {value!r}")
        return json.loads(json.dumps(presets[value]))
    if not isinstance(value, dict) or "type" not in value:
        raise _bad(key, rule, f"got {value!r}")
    from tokenizers import Tokenizer

    probe = json.loads(Tokenizer.from_str(
        '{"version":"1.0","model":{"type":"BPE","vocab":{},"merges":[]}}').to_str())
    probe[key] = value
    try:
        Tokenizer.from_str(json.dumps(probe))
    except Exception as exc:  # noqa: BLE001 - tokenizers says what is wrong
        raise _bad(key, rule, f"tokenizers cannot build {value!r}: {exc}") from None
    return value


def _decoder_for(pre_tokenizer: dict | None) -> dict | None:
    """The decoder that undoes the pre-tokenizer's mapping: ByteLevel's bytes-as-text,
    Metaspace's ▁ (found anywhere in a Sequence)."""
    text = json.dumps(pre_tokenizer or {})
    if '"ByteLevel"' in text:
        return {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                "use_regex": True}
    if '"Metaspace"' in text:
        found = _find_type(pre_tokenizer, "Metaspace")
        return {"type": "Metaspace", "replacement": found.get("replacement", "\u2581"),
                "prepend_scheme": found.get("prepend_scheme", "always"),
                "split": found.get("split", True)}
    return None


def _find_type(node, name: str):
    if isinstance(node, dict):
        if node.get("type") == name:
            return node
        for value in node.values():
            found = _find_type(value, name)
            if found is not None:
                return found
    if isinstance(node, list):
        for value in node:
            found = _find_type(value, name)
            if found is not None:
                return found
    return None


def _alphabet(block: dict) -> tuple[tuple[str, ...], str | None]:
    value = block.get("initial_alphabet")
    if value is None:
        return (), None
    if value == BYTE_LEVEL_ALPHABET:
        from tokenizers import pre_tokenizers

        return tuple(sorted(pre_tokenizers.ByteLevel.alphabet())), BYTE_LEVEL_ALPHABET
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(c, str) and len(c) == 1 for c in value):
        raise _bad("initial_alphabet", "initial_alphabet", value)
    return tuple(sorted(set(value))), None


def hf_bpe_spec(block: dict) -> HfBpeSpec:
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if block.get(key) is not None:
            raise _bad(key, "hash_order", f"trainer.{key}")
    vocab_size = block.get("vocab_size")
    if type(vocab_size) is not int or vocab_size <= 0:
        raise _bad("vocab_size", "vocab_size", vocab_size)
    special = _tokens(block, "special_tokens")
    _no_repeats("special_tokens", special)
    alphabet, alphabet_given = _alphabet(block)
    pre_tokenizer = _pipeline_part(block, "pre_tokenizer", PRE_TOKENIZERS, "pre_tokenizer")
    normalizer = _pipeline_part(block, "normalizer", NORMALIZERS, "normalizer")
    decoder = block.get("decoder", _decoder_for(pre_tokenizer))
    if decoder is not None and (not isinstance(decoder, dict) or "type" not in decoder):
        raise _bad("decoder", "pre_tokenizer", f"a decoder must be a mapping with a type, got "
                                               f"{decoder!r}")
    unk = block.get("unk_token")
    if unk is not None and (not isinstance(unk, str) or not unk):
        raise _bad("unk_token", "text", "trainer.unk_token")
    if unk is None and '"ByteLevel"' not in json.dumps(pre_tokenizer):
        raise _bad("unk_token", "no_unk", f"pre_tokenizer {block.get('pre_tokenizer')!r}")
    limit = _int(block, "limit_alphabet", None)
    spec = HfBpeSpec(vocab_size=vocab_size, min_frequency=_int(block, "min_frequency", 0),
                     special_tokens=special, initial_alphabet=alphabet,
                     initial_alphabet_given=alphabet_given, limit_alphabet=limit,
                     max_token_length=_int(block, "max_token_length", None, low=1),
                     pre_tokenizer=pre_tokenizer, normalizer=normalizer, decoder=decoder,
                     unk_token=unk)
    kept_alphabet = len(alphabet) if limit is None else min(limit, len(alphabet))
    if vocab_size <= len(special) + kept_alphabet:
        raise TrainerVocabSizeError(vocab_size=vocab_size, special=len(special),
                                    alphabet=kept_alphabet, where="initial_alphabet")
    return spec


def _sp_value(block: dict, key: str):
    value = block[key]
    if key in SP_FLAGS:
        if type(value) is not bool:
            raise _bad(key, "flag", f"trainer.{key}")
    elif key in SP_TEXT:
        if not isinstance(value, str) or (not value and key != "required_chars"):
            raise _bad(key, "text", f"trainer.{key}")
    elif key in ("character_coverage", "shrinking_factor"):
        if type(value) not in (int, float) or not 0 < value <= 1:
            raise _bad(key, "fraction", f"trainer.{key} ({value!r})")
    elif key in ("unk_id", "bos_id", "eos_id", "pad_id"):
        if type(value) is not int or value < -1:
            raise _bad(key, "count", f"trainer.{key} ({value!r}; -1 turns it off)")
    elif type(value) is not int or value <= 0:
        raise _bad(key, "positive", f"trainer.{key} ({value!r})")
    return value


def sentencepiece_spec(block: dict, kind: str) -> SentencePieceSpec:
    vocab_size = block.get("vocab_size", 8000)
    if type(vocab_size) is not int or vocab_size <= 0:
        raise _bad("vocab_size", "vocab_size", vocab_size)
    options = {}
    for key in block:
        if key in ("type", "vocab_size", "input_sentence_size", "seed", *SP_LISTS):
            continue
        options[key] = _sp_value(block, key)
    symbols = []
    for key in SP_LISTS:
        tokens = _tokens(block, key)
        if tokens:
            options[key] = list(tokens)
        for token in tokens:
            _whole_word(key, token)
        symbols += tokens
    _no_repeats(" and ".join(f"trainer.{k}" for k in SP_LISTS), symbols)
    if kind == "sentencepiece_bpe":
        for key, default in (("split_by_whitespace", True), ("treat_whitespace_as_suffix", False)):
            if options.get(key, default) != default:
                raise _bad(key, "sentencepiece_option", f"trainer.{key}: {options[key]!r}")
        if block.get("input_sentence_size") not in (None, 0):
            raise _bad("input_sentence_size", "sentencepiece_option",
                       "trainer.input_sentence_size (sentencepiece_bpe counts every sentence; "
                       "its memory is the word table's)")
        sample = 0
    else:
        if options.get("treat_whitespace_as_suffix", False):
            raise _bad("treat_whitespace_as_suffix", "sentencepiece_option",
                       "trainer.treat_whitespace_as_suffix: True")
        sample = block.get("input_sentence_size", DEFAULT_SAMPLE)
        if type(sample) is not int or sample <= 0:
            raise _bad("input_sentence_size", "positive",
                       f"trainer.input_sentence_size ({sample!r})")
    seed = block.get("seed", 0)
    if type(seed) is not int or not 0 <= seed < 1 << 63:
        raise _bad("seed", "count", f"trainer.seed ({seed!r})")
    spec = SentencePieceSpec(type=kind, vocab_size=vocab_size,
                             options=tuple(sorted((k, _frozen(v)) for k, v in options.items())),
                             sample_size=sample, seed=seed, symbols=tuple(symbols))
    if vocab_size <= spec.meta_pieces():
        raise TrainerVocabSizeError(vocab_size=vocab_size, special=spec.meta_pieces(),
                                    alphabet=0, where="before counting")
    return spec


def _whole_word(key: str, token: str) -> None:
    """SentencePiece cuts sentences into words at whitespace (▁ after the escape) before
    it matches symbols: a symbol may start with ▁, never hold one or a space later."""
    body = token[1:] if token.startswith("\u2581") else token
    if "\u2581" in body or any(c.isspace() for c in token):
        pieces = [p for p in re.split(r"[\s\u2581]+", token) if p]
        raise SpecialTokenSplitError(component=f"trainer.{key}", token=token,
                                     pieces=pieces or [""])


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def trainer_spec(block) -> HfBpeSpec | SentencePieceSpec:
    """The checked `trainer:` block (unknown keys were refused by the schema)."""
    if not isinstance(block, dict):
        raise _bad("type", "trainer_type", block)
    kind = block.get("type")
    if kind not in TRAINER_TYPES:
        raise _bad("type", "trainer_type", kind)
    if kind == "bpe":
        return hf_bpe_spec(block)
    return sentencepiece_spec(block, kind)
