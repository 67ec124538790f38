"""The declared schema of every config block: which keys each block has (per source
type and per tokenizer type), which values a choice allows, and what each key holds.
Every config (a CONFIG file, the Python API's, a manifest's `build_config`) is walked
against it before anything else, so an unknown key is refused in every block, with the
nearest known name as a suggestion (`difflib`), and a block added here is checked like
the others: there is no per-block unknown-key code to forget. A key whose value is a
mapping of its own (`template_vars`, `special_tokens`) is declared free (`block=None`).

Why a small in-house declaration (dicts of key -> `Key`), not pydantic or jsonschema:
the values are still checked by the checks that raise the seed's classes, in the seed's
fail-fast order (missing keys first as `PipelineValidationError`, then source,
tokenizer, units, output, list arities), because mintdim 0.2.1's error for a mistake
must stay the error for it. A schema library validates a whole document at once and
returns its own error list; every one of its errors would have to be mapped back to a
seed class and text, case by case, and the order would be the library's. What is left
for a schema to say (keys per block and variant, choices, a number's range) is a few
dicts; difflib gives the suggestions. No new dependency on the workers either.

The errors it raises: `ConfigUnknownKeyError` (a key no block of that kind has) and
`ConfigValueError` (a value a key does not allow), both `PipelineValidationError`s.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable

from mintdim_beam.core.config.bad_rows import FRACTION_WHAT, POLICY_WHAT
from mintdim_beam.core.config.bad_rows import POLICIES as BAD_ROW_CHOICES
from mintdim_beam.core.errors import ConfigUnknownKeyError, ConfigValueError
from mintdim_beam.core.tokenizer.tiktoken_files import FAMILIES
from mintdim_beam.core.tokenizer.tokenizers import KINDS as TOKENIZER_KINDS

# The run options' values (`unit_build.units` and `launch` use these).
OVERFLOW_POLICIES = ("prompt", "abort", "truncate", "skip", "extend")
TEMPLATE_UNK_POLICIES = ("prompt", "abort", "continue")
LOSSY_POLICIES = ("continue", "abort")
BAD_ROW_POLICIES = BAD_ROW_CHOICES  # `bad_rows`
# Source and tokenizer values (`sources`, `special_tokens` use these).
SOURCE_KINDS = ("jsonl", "chat", "preference")
CHAT_FORMATS = ("messages", "sharegpt")
EXTRA_TURN_POLICIES = ("split", "abort", "skip")
ENGINES = ("auto", "native", "tiktoken", "tokenizers")
LITERAL_SPECIALS = ("text", "ids")
# Names people write for a kind we call otherwise: the suggestion difflib cannot find.
ALIASES = {"huggingface": "hf_json", "hugging_face": "hf_json", "hf": "hf_json",
           "hf_tokenizer": "hf_json", "tokenizer.json": "hf_json", "json": "hf_json",
           "spm": "sentencepiece", "sp": "sentencepiece", "sentence_piece": "sentencepiece",
           "openai": "tiktoken", "sharegpt_format": "sharegpt", "openai_messages": "messages"}


def _fraction(value) -> bool:
    return type(value) in (int, float) and 0 <= value <= 1


@dataclass(frozen=True)
class Key:
    """One key of a block: what it holds in words (messages, docs), the values a choice
    allows, a nested block checked the same way, a test of the value and its default."""

    what: str
    choices: tuple = ()
    block: "Block | None" = None
    valid: Callable[[Any], bool] | None = None
    default: Any = None


@dataclass(frozen=True)
class Block:
    """A mapping's keys: `keys` in every variant, plus the keys of the variant that
    `pick(mapping)` names (a source's or tokenizer's `type`). A mapping of a variant the
    schema does not know is checked against every variant's keys (a typo is still one);
    its `type` itself is reported by the block's own check, with the seed's class."""

    keys: dict
    variants: dict = field(default_factory=dict)
    pick: Callable[[dict], Any] | None = None
    variant_name: str = ""  # "source type", "tokenizer type": for the notes

    def known(self, mapping: dict) -> dict:
        if not self.variants:
            return dict(self.keys)
        variant = self.pick(mapping)
        if variant in self.variants:
            return {**self.keys, **self.variants[variant]}
        every = dict(self.keys)
        for keys in self.variants.values():
            every.update(keys)
        return every


def suggest(word, names) -> str | None:
    """The known name nearest to `word` (an alias, else difflib's closest), or None."""
    if not isinstance(word, str):
        return None
    names = [str(n) for n in names]
    alias = ALIASES.get(word.lower())
    if alias in names:
        return alias
    lowered = {n.lower(): n for n in names}
    if word.lower() in lowered:
        return lowered[word.lower()]
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def check_choice(key: str, value, choices, what: str | None = None) -> None:
    """`value` is one of `choices`, else a `ConfigValueError` listing them."""
    if isinstance(value, str) and value in choices:
        return
    raise ConfigValueError(key=key, value=value, expected=what or "one of the allowed values",
                           allowed=list(choices), suggestion=suggest(value, choices))


def check_keys(mapping: dict, block: Block, where: str = "") -> None:
    """Refuse a key `block` does not declare, here and in every nested block."""
    known = block.known(mapping)
    for key in mapping:
        name = f"{where}{key}"
        if key not in known:
            raise ConfigUnknownKeyError(key=name, known=list(known),
                                        suggestion=suggest(key, known),
                                        note=_elsewhere(block, mapping, key))
        nested = known[key].block
        if nested is not None and isinstance(mapping[key], dict):
            check_keys(mapping[key], nested, f"{name}.")


def _elsewhere(block: Block, mapping: dict, key) -> str:
    """Which variants do have `key` (a tiktoken key in an hf_json tokenizer block)."""
    owners = [name for name, keys in block.variants.items() if key in keys]
    if not owners:
        return ""
    return (f"{key} is a key of {block.variant_name} {' and '.join(owners)}, "
            f"not of {block.pick(mapping)!r}")


def check_run_options(doc: dict, block: Block) -> None:
    """The top-level run options' values (choices and ranges), where given."""
    for key, spec in block.keys.items():
        value = doc.get(key)
        if value is None or spec.block is not None:
            continue
        if spec.choices:
            check_choice(key, value, spec.choices)
        elif spec.valid is not None and not spec.valid(value):
            raise ConfigValueError(key=key, value=value, expected=spec.what)


def source_kind(source: dict) -> str | None:
    """A source's kind: `type` when given; a chat source may say so by `format` alone."""
    kind = source.get("type")
    if kind is None:
        return "chat" if "format" in source else "jsonl"
    return kind


SOURCE = Block(
    keys={"type": Key(f"the kind of source: {', '.join(SOURCE_KINDS)}", SOURCE_KINDS,
                      default="jsonl"),
          # How the entries are checked and resolved is `unit_config._check_files`.
          "files": Key("the input files: a list of paths or URLs")},
    variants={
        "jsonl": {"fields": Key("a list of lists of field names, one or one per file"),
                  "templates": Key("a list of template strings, one or one per file")},
        "chat": {"format": Key("the dialogue layout", CHAT_FORMATS, default="messages"),
                 "chat_template": Key('"tokenizer", a built-in template name or a .jinja file'),
                 "template_vars": Key("a mapping of template variable names to values"),
                 "max_turns": Key("trained assistant turns per record (a positive int)", default=1),
                 "on_extra_turns": Key("a dialogue with more trained turns",
                                       EXTRA_TURN_POLICIES, default="split"),
                 "max_messages": Key("the most messages of a dialogue (an int >= 2)",
                                     default=1024)},
        "preference": {"chat_template": Key('"tokenizer", a built-in template name or a .jinja file'),
                       "template_vars": Key("a mapping of template variable names to values")},
    },
    pick=source_kind, variant_name="source type")

TOKENIZER = Block(
    keys={"type": Key(f"the tokenizer kind: {', '.join(TOKENIZER_KINDS)}", TOKENIZER_KINDS),
          "files": Key("a non-empty list of tokenizer file paths"),
          "config": Key("a tokenizer_config.json path"),
          "pad_token": Key("the pad token's text"),
          "pad_id": Key("the pad id (an int >= 0)"),
          "bos": Key("true or false: the BOS id before every sample"),
          "eos": Key("true or false: the EOS id after every sample"),
          "literal_specials": Key("special-token text in template literals", LITERAL_SPECIALS),
          "engine": Key("which engine encodes text", ENGINES, default="auto")},
    variants={"sentencepiece": {}, "hf_json": {},
              "tiktoken": {"family": Key("the split regex and specials of a tiktoken file",
                                         tuple(FAMILIES)),
                           "pattern": Key("a split regex string"),
                           "special_tokens": Key("a mapping of token text to ids")}},
    pick=lambda block: block.get("type"), variant_name="tokenizer type")

UNITS = Block(keys={"sizes": Key("a list of ascending lists of positive ints"),
                    "build_batch": Key("a list of positive ints (samples per tokenizer batch)")})

OUTPUT = Block(keys={"dir": Key("an output directory path, or a list of them"),
                     "samples_per_shard": Key("a list of positive ints, one or one per file")})

# pack-build's output is one directory; `samples_per_shard` is known so that its own
# rule (`PackValidationError`: a unit-build key, use pack.shard_tokens) can say so.
PACK_OUTPUT = Block(keys={"dir": Key("the output directory (one path)"),
                          "samples_per_shard": Key("not a pack-build key: pack.shard_tokens")})

PACK = Block(keys={"eod": Key("the end-of-document token's text, or null for EOS"),
                   "seed": Key("the document order's seed (an int from 0 to 2**63-1)", default=0),
                   "shard_tokens": Key("about how many tokens per shard (a positive int)")})

# Rows that cannot become samples, and how many may (the bad-row policy's keys).
BAD_ROWS = {"on_bad_row": Key(POLICY_WHAT, BAD_ROW_POLICIES, default="abort"),
            "max_rejected": Key(FRACTION_WHAT, valid=_fraction, default=0.01)}

UNIT_BUILD = Block(keys={
    "source": Key("the input files and what a sample is", block=SOURCE),
    "tokenizer": Key("the tokenizer", block=TOKENIZER),
    "units": Key("the unit sizes", block=UNITS),
    "output": Key("the output directories", block=OUTPUT),
    "on_overflow": Key("a sample longer than the largest unit", OVERFLOW_POLICIES,
                       default="prompt"),
    "on_template_unk": Key("template literals the tokenizer maps to UNK",
                           TEMPLATE_UNK_POLICIES, default="prompt"),
    "on_lossy": Key("text the tokenizer cannot carry", LOSSY_POLICIES, default="continue"),
    **BAD_ROWS})

PACK_BUILD = Block(keys={
    "source": Key("the input files and the text of a document", block=SOURCE),
    "tokenizer": Key("the tokenizer", block=TOKENIZER),
    "pack": Key("the stream: eod, seed, shard_tokens", block=PACK),
    "output": Key("the output directory", block=PACK_OUTPUT),
    **BAD_ROWS})

# train-tokenizer: the source of its text, the trainer (its own key names, per type), the
# tokenizer_config.json it writes and one output directory (`train_tokenizer.config`).
TRAIN_SOURCE_KINDS = ("jsonl", "text", "chat")
TRAIN_SOURCE = Block(
    keys={"type": Key(f"the kind of source: {', '.join(TRAIN_SOURCE_KINDS)}",
                      TRAIN_SOURCE_KINDS, default="jsonl"),
          "files": Key("the input files: a list of paths or URLs")},
    variants={
        "jsonl": {"fields": Key("a list of lists of field names, one or one per file"),
                  "templates": Key("a list of template strings, one or one per file")},
        "text": {"field": Key("the field that holds a row's text", default="text")},
        "chat": {"format": Key("the dialogue layout", CHAT_FORMATS, default="messages"),
                 "join": Key("the string between a dialogue's message contents",
                             default="\n")},
    },
    pick=lambda source: source.get("type", "jsonl"), variant_name="source type")


def _trainer_keys(names, what) -> dict:
    return {name: Key(what.get(name, f"SentencePieceTrainer's {name}")) for name in names}


_HF_WHAT = {
    "type": "bpe, sentencepiece_bpe or sentencepiece_unigram",
    "vocab_size": "the vocabulary's size, special tokens and alphabet included",
    "min_frequency": "the least count of a pair that becomes a merge",
    "special_tokens": "special tokens, ids from 0 in this order",
    "initial_alphabet": "byte_level, or a list of characters always in the vocabulary",
    "limit_alphabet": "the most characters kept before merging",
    "max_token_length": "the longest token (characters)",
    "pre_tokenizer": "byte_level, llama3, whitespace, whitespace_split, metaspace or JSON",
    "normalizer": "null, nfc, nfkc, nfd, nfkd, lowercase or JSON",
    "decoder": "a tokenizers decoder as JSON (default: the pre-tokenizer's)",
    "unk_token": "the BPE model's unknown token",
    "continuing_subword_prefix": "refused: tokenizers numbers tokens by hash order with it",
    "end_of_word_suffix": "refused: tokenizers numbers tokens by hash order with it"}
_SP_WHAT = {"type": _HF_WHAT["type"], "vocab_size": "the vocabulary's size",
            "input_sentence_size": "unigram: sentences sampled by a seeded hash",
            "seed": "unigram: the sample's hash seed"}


def _train_trainer_block():
    from mintdim_beam.core.config.trainer_keys import HF_KEYS, SP_KEYS

    sp = _trainer_keys(SP_KEYS, _SP_WHAT)
    return Block(keys={"type": Key(_HF_WHAT["type"])},
                 variants={"bpe": _trainer_keys(HF_KEYS, _HF_WHAT), "sentencepiece_bpe": sp,
                           "sentencepiece_unigram": sp},
                 pick=lambda block: block.get("type"), variant_name="trainer type")


TRAINER = _train_trainer_block()
TOKENIZER_CONFIG = Block(keys={
    "bos_token": Key("the BOS token's text"), "eos_token": Key("the EOS token's text"),
    "pad_token": Key("the pad token's text"), "unk_token": Key("the unknown token's text"),
    "chat_template": Key("chatml, llama3, alpaca or a .jinja file"),
    "model_max_length": Key("the longest input a model takes (tokens)")})
TRAIN_OUTPUT = Block(keys={"dir": Key("the output directory (one path)")})
TRAIN_TOKENIZER = Block(keys={
    "source": Key("the input files and the text of a row", block=TRAIN_SOURCE),
    "trainer": Key("the trainer and its settings", block=TRAINER),
    "tokenizer_config": Key("what tokenizer_config.json says", block=TOKENIZER_CONFIG),
    "output": Key("the output directory", block=TRAIN_OUTPUT),
    "holdout": Key("a fraction of rows kept out of training, for report",
                   valid=_fraction, default=0),
    "sample": Key("the fraction of rows trained on (by a seeded hash of their text)",
                  valid=_fraction, default=1),
    "seed": Key("the seed of holdout and sample (an int from 0 to 2**63-1)", default=0),
    **BAD_ROWS})
