"""Special tokens of a published tokenizer: the tokenizer block's options, the
`tokenizer_config.json` beside a Hugging Face `tokenizer.json`, and where a build's
pad / BOS / EOS / UNK ids come from.

Why a module of its own: mintdim 0.2.1 takes every special id from the tokenizer file
and refuses a tokenizer without UNK or pad. Published tokenizers (Llama 3, Qwen2.5,
GPT-2, Mistral's Tekken) have no UNK (byte-level: every byte is a token) and keep pad
and BOS/EOS in `tokenizer_config.json`. A config with none of these options resolves
exactly as 0.2.1 does (the tokenizer file's UNK and pad), so its bytes do not change.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from mintdim_beam.core.config.schema import (ENGINES, LITERAL_SPECIALS, TOKENIZER, check_keys,
                                            suggest)
from mintdim_beam.core.errors import (MintDimFileNotFoundError, TokenizerSpecialTokenError,
                                      TokenizerValidationError)
from mintdim_beam.core.files import storage

OPTION_KEYS = ("config", "pad_token", "pad_id", "bos", "eos", "literal_specials", "engine",
               "family", "pattern", "special_tokens")
BLOCK_KEYS = ("type", "files") + OPTION_KEYS  # = the schema's TOKENIZER keys (a test says so)

# Where a special id came from (the manifest's `special_tokens.<name>.source`).
FROM_PAD_ID = "pad_id argument"
FROM_PAD_TOKEN = "pad_token argument"
FROM_PADDING = "tokenizer.json padding"
FROM_CONFIG = "tokenizer_config {}"  # .format(key): pad_token / bos_token / eos_token
FROM_MODEL = "sentencepiece model"
FROM_HF_MODEL = "tokenizer.json model"


@dataclass(frozen=True)
class TokenizerOptions:
    """The tokenizer block's options; they apply to every tokenizer file of the block."""

    config_given: str | None = None  # tokenizer_config.json as the user wrote it
    config_path: str | None = None  # resolved for I/O
    pad_token: str | None = None
    pad_id: int | None = None
    bos: bool = False
    eos: bool = False
    # How special-token text in a JSONL template's literals is encoded: None as the
    # tokenizer does (SentencePiece: text, as mintdim 0.2.1; Hugging Face: ids), "ids"
    # or "text" (`template_checks.encode_literal`).
    literal_specials: str | None = None
    # Which engine encodes text (`engine_choice`): auto, tiktoken or tokenizers.
    engine: str = "auto"
    # How a tiktoken file is read (type tiktoken): (family or None, split regex or None,
    # ((special token, id), ...)); None for other types.
    tiktoken: tuple | None = None


def check_options(block: dict) -> TokenizerOptions:
    """Validate the tokenizer block's keys and option types (before any output)."""
    # Keys of the declared schema (`core.config.schema`): a tiktoken key in another
    # type's block is left to `_tiktoken` below, which says so in the seed's class.
    check_keys({k: v for k, v in block.items() if k not in OPTION_KEYS}, TOKENIZER, "tokenizer.")

    def given(key, types, what):
        value = block.get(key)
        if value is None:
            return None
        if type(value) not in types or (type(value) is str and not value):
            raise TokenizerValidationError(
                component=key, problem=f"tokenizer.{key} must be {what}, got {value!r}")
        return value

    config = given("config", (str,), "a path string (tokenizer_config.json)")
    pad_token = given("pad_token", (str,), "a non-empty token string")
    pad_id = given("pad_id", (int,), "an int id")
    if pad_id is not None and pad_id < 0:
        raise TokenizerValidationError(
            component="pad_id", problem=f"tokenizer.pad_id must be an id >= 0, got {pad_id}")
    if pad_token is not None and pad_id is not None:
        raise TokenizerValidationError(
            component="pad_token", problem="give tokenizer.pad_token or tokenizer.pad_id, not both")
    bos = given("bos", (bool,), "true or false")
    eos = given("eos", (bool,), "true or false")
    literal_specials = given("literal_specials", (str,), "'text' or 'ids'")
    if literal_specials is not None and literal_specials not in LITERAL_SPECIALS:
        raise TokenizerValidationError(
            component="literal_specials",
            problem=f"tokenizer.literal_specials must be 'text' or 'ids', got "
                    f"{literal_specials!r}{_nearest(literal_specials, LITERAL_SPECIALS)}")
    if config is not None and not storage.is_file(storage.resolve(config)):
        raise MintDimFileNotFoundError(context="tokenizer config", missing_file=config)
    engine = given("engine", (str,), f"one of {', '.join(ENGINES)}") or "auto"
    if engine not in ENGINES:
        raise TokenizerValidationError(
            component="engine",
            problem=f"tokenizer.engine must be one of {', '.join(ENGINES)}, got {engine!r}"
                    f"{_nearest(engine, ENGINES)}")
    return TokenizerOptions(
        config_given=config, config_path=None if config is None else storage.resolve(config),
        pad_token=pad_token, pad_id=pad_id, bos=bool(bos), eos=bool(eos),
        literal_specials=literal_specials, engine=engine, tiktoken=_tiktoken(block, given))


def _nearest(value, names) -> str:
    near = suggest(value, names)
    return "" if near is None else f" (did you mean {near!r}?)"


def tiktoken_keys(options: TokenizerOptions) -> dict:
    """The tokenizer-block keys that say how a tiktoken file is read (a config as given)."""
    if options.tiktoken is None:
        return {}
    family, pattern, specials = options.tiktoken
    keys = {"family": family, "pattern": pattern, "special_tokens": dict(specials) or None}
    return {key: value for key, value in keys.items() if value is not None}


def _tiktoken(block: dict, given) -> tuple | None:
    """(family, pattern, specials) of a tiktoken block; None for other types."""
    from mintdim_beam.core.tokenizer.tiktoken_files import FAMILIES

    family = given("family", (str,), f"one of {', '.join(FAMILIES)}")
    pattern = given("pattern", (str,), "a split regex string")
    specials = block.get("special_tokens")
    if block.get("type") != "tiktoken":
        for key in ("family", "pattern", "special_tokens"):
            if block.get(key) is not None:
                raise TokenizerValidationError(
                    component=key, problem=f"tokenizer.{key} is for type tiktoken only")
        return None
    if family is not None and family not in FAMILIES:
        raise TokenizerValidationError(
            component="family",
            problem=f"tokenizer.family must be one of {', '.join(FAMILIES)}, got {family!r}"
                    f"{_nearest(family, FAMILIES)}")
    if family is None and pattern is None:
        raise TokenizerValidationError(
            component="family",
            problem="a tiktoken file holds no split regex: give tokenizer.family "
                    f"({', '.join(FAMILIES)}) or tokenizer.pattern")
    if specials is not None and (not isinstance(specials, dict) or any(
            not isinstance(k, str) or not k or type(v) is not int or v < 0
            for k, v in specials.items())):
        raise TokenizerValidationError(
            component="special_tokens",
            problem="tokenizer.special_tokens must map token strings to ids >= 0")
    return family, pattern, tuple(sorted((specials or {}).items(), key=lambda kv: kv[1]))


@dataclass(frozen=True)
class SpecialToken:
    id: int
    token: str | None
    source: str

    def as_json(self) -> dict:
        return {"id": self.id, "token": self.token, "source": self.source}


@dataclass(frozen=True)
class TokenizerFacts:
    """What a dataset's tokenizer says about its special tokens, resolved on the driver.

    `bos_token` / `eos_token` are the token strings (from the tokenizer config, else the
    SentencePiece model's pieces); `bos` / `eos` their ids when the vocabulary has them.
    `add_bos` / `add_eos`: the build puts them around every sample as their own segments.
    `special_tokens`: the strings of the tokenizer's special tokens, which message content
    holding them keeps as plain text (Hugging Face added tokens with special=True;
    SentencePiece control, unknown and user-defined pieces)."""

    pad: SpecialToken
    unk: SpecialToken | None
    bos: SpecialToken | None
    eos: SpecialToken | None
    bos_token: str | None
    eos_token: str | None
    chat_template: str | None
    special_tokens: tuple[str, ...]
    add_bos: bool = False
    add_eos: bool = False

    def manifest_block(self) -> dict:
        """The manifest's `special_tokens` (after the reference keys)."""
        return {name: None if token is None else token.as_json()
                for name, token in (("pad", self.pad), ("bos", self.bos),
                                    ("eos", self.eos), ("unk", self.unk))}


def _token_text(value) -> str | None:
    """A token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _chat_template(value) -> str | None:
    """A string, or a list of {"name", "template"} of which "default" is taken."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for entry in value:
            if isinstance(entry, dict) and entry.get("name") == "default":
                template = entry.get("template")
                return template if isinstance(template, str) else None
    return None


def read_tokenizer_config(given: str, path: str) -> dict:
    """{pad_token, bos_token, eos_token, chat_template} of a tokenizer_config.json."""
    if not storage.exists(path):
        raise MintDimFileNotFoundError(context="tokenizer config", missing_file=given)
    try:
        doc = json.loads(storage.read_bytes(path).decode("utf-8"))
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except (UnicodeDecodeError, ValueError) as exc:
        raise TokenizerValidationError(
            component="config",
            problem=f"{given} is not a tokenizer_config.json: {type(exc).__name__}: {exc}") from None
    return {"pad_token": _token_text(doc.get("pad_token")),
            "bos_token": _token_text(doc.get("bos_token")),
            "eos_token": _token_text(doc.get("eos_token")),
            "chat_template": _chat_template(doc.get("chat_template"))}


def _named(tokenizer, token: str, source: str) -> SpecialToken | None:
    found = tokenizer.token_id(token)
    return None if found is None else SpecialToken(found, token, source)


def _resolve_pad(tokenizer, options: TokenizerOptions, config: dict, shown: str) -> SpecialToken:
    """Explicit option; tokenizer.json padding; tokenizer config pad_token; SentencePiece
    pad_id. Never EOS unless the user names it."""
    if options.pad_id is not None:
        if options.pad_id >= tokenizer.vocab_size:
            raise TokenizerValidationError(
                component="pad_id", problem=f"tokenizer.pad_id {options.pad_id} is not an id of "
                f"{shown} (vocab_size {tokenizer.vocab_size})")
        return SpecialToken(options.pad_id, tokenizer.token_text(options.pad_id), FROM_PAD_ID)
    if options.pad_token is not None:
        pad = _named(tokenizer, options.pad_token, FROM_PAD_TOKEN)
        if pad is None:
            raise TokenizerValidationError(
                component="pad_token", problem=f"tokenizer.pad_token {options.pad_token!r} is "
                f"not a token of {shown}")
        return pad
    padding = getattr(tokenizer, "padding", None)
    if padding is not None:
        return SpecialToken(padding[0], padding[1], FROM_PADDING)
    if config.get("pad_token") is not None:
        pad = _named(tokenizer, config["pad_token"], FROM_CONFIG.format("pad_token"))
        if pad is None:
            raise TokenizerSpecialTokenError(
                tokenizer=shown, special_token="pad_id", fix="pad",
                problem=f"the tokenizer config's pad_token {config['pad_token']!r} is not in "
                        "the vocabulary")
        return pad
    if tokenizer.kind == "sentencepiece":
        if tokenizer.model_pad_id is not None:
            pad_id = tokenizer.model_pad_id
            return SpecialToken(pad_id, tokenizer.token_text(pad_id), FROM_MODEL)
        problem = "SentencePiece returned pad_id=-1"
    else:
        problem = "missing pad_id: tokenizer.json has no padding config with pad_id or pad_token"
    raise TokenizerSpecialTokenError(tokenizer=shown, special_token="pad_id", problem=problem,
                                     fix="pad")


def _resolve_edge(tokenizer, name: str, config: dict) -> SpecialToken | None:
    """BOS or EOS: the SentencePiece model's id, or the tokenizer config's token."""
    if tokenizer.kind == "sentencepiece":
        model_id = getattr(tokenizer, f"model_{name}_id")
        return None if model_id is None else SpecialToken(
            model_id, tokenizer.token_text(model_id), FROM_MODEL)
    token = config.get(f"{name}_token")
    return None if token is None else _named(tokenizer, token, FROM_CONFIG.format(f"{name}_token"))


def resolve_facts(tokenizer, options: TokenizerOptions, shown: str) -> TokenizerFacts:
    """The special tokens a dataset's build uses; raises before any output when pad is
    unknown or a requested BOS / EOS has no id."""
    config = ({} if options.config_path is None
              else read_tokenizer_config(options.config_given, options.config_path))
    pad = _resolve_pad(tokenizer, options, config, shown)
    edges = {}
    for name, wanted in (("bos", options.bos), ("eos", options.eos)):
        edges[name] = _resolve_edge(tokenizer, name, config)
        if wanted and edges[name] is None:
            where = (f"the SentencePiece model has no {name}_id (it is -1)"
                     if tokenizer.kind == "sentencepiece" else
                     f"no tokenizer config {name}_token in the vocabulary"
                     if options.config_path else
                     f"{name}=True needs a tokenizer config (config=...) naming {name}_token")
            raise TokenizerSpecialTokenError(tokenizer=shown, special_token=f"{name}_id",
                                             problem=where, fix="bos_eos")
    unk = None
    if tokenizer.unk_id is not None:
        unk = SpecialToken(tokenizer.unk_id, tokenizer.token_text(tokenizer.unk_id),
                           FROM_MODEL if tokenizer.kind == "sentencepiece" else FROM_HF_MODEL)

    def text(name):
        return config.get(f"{name}_token") or (edges[name].token if edges[name] else None)

    return TokenizerFacts(
        pad=pad, unk=unk, bos=edges["bos"], eos=edges["eos"], bos_token=text("bos"),
        eos_token=text("eos"), chat_template=config.get("chat_template"),
        special_tokens=tuple(tokenizer.template_tokens()), add_bos=options.bos,
        add_eos=options.eos)
