"""Tokenizer adapters: load a SentencePiece `.model`, a Hugging Face `tokenizer.json` or
a tiktoken BPE file from any fsspec path and encode many texts per call.

The tokenizer file is the source of truth for the vocabulary and the UNK id (None for a
byte-level model without one); the ids a build pads with or puts around samples are
resolved from these adapters' facts by `special_tokens`. We never add special tokens,
pad or truncate on the tokenizer side.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass

import numpy as np

from mintdim_beam.core.errors import (MintDimFileNotFoundError, TokenizerSpecialTokenError,
                                      TokenizerValidationError)
from mintdim_beam.core.files import storage
from mintdim_beam.core.tokenizer import fast_bpe, native_bpe, sp_native, tiktoken_files

KINDS = ("sentencepiece", "hf_json", "tiktoken")


class SentencePieceTokenizer:
    kind = "sentencepiece"
    threads = -1  # native threads per batch call: -1 is every core

    def __init__(self, data: bytes, display_path: str):
        import sentencepiece as spm

        self._data = data
        self._sp = spm.SentencePieceProcessor(model_proto=data)
        self._inner_sp = None  # the same model without its dummy prefix (`_inner`)
        self._native_checked, self._native_engine, self.native_reason = False, None, None
        self.vocab_size = int(self._sp.get_piece_size())
        self.unk_id = _require_id(int(self._sp.unk_id()), "unk_id", display_path,
                                  f"SentencePiece returned unk_id={self._sp.unk_id()}")
        # Special ids as the model declares them (None when < 0); the pad a build uses is
        # resolved from these and the user's options by `special_tokens.resolve_facts`.
        self.model_pad_id = _declared(self._sp.pad_id())
        self.model_bos_id = _declared(self._sp.bos_id())
        self.model_eos_id = _declared(self._sp.eos_id())
        self.byte_level = False
        self.id_bound = self.vocab_size  # ids are 0 .. piece_size - 1
        self.model = sp_model_facts(data)
        sp = self._sp
        self.byte_ids = frozenset(i for i in range(self.vocab_size) if sp.is_byte(i))
        # Pieces a template's own text means as ids: control (`<s>`, `[INST]`),
        # unknown and user-defined symbols. Never looked for in message content.
        self.symbols = {sp.id_to_piece(i): i for i in range(self.vocab_size)
                        if (sp.is_control(i) or sp.is_unknown(i) or i in self.model.user_defined)
                        and sp.id_to_piece(i)}

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        native = self._native()
        if native is not None:
            try:
                return sp_native.encode(native, texts, self.threads)
            except RuntimeError:  # sentencepiece reported an error: let it say which
                pass
        return self._sp.encode(texts, out_type=int, num_threads=self.threads)

    def _native(self):
        """The native engine (`sp_native`), checked once per adapter; None where it is
        missing or differs (`native_reason` says why)."""
        if self._native_checked is False:
            self._native_engine, self.native_reason = sp_native.engine(
                self._data, self._sp, list(self.symbols))
            self._native_checked = True
        return self._native_engine

    def __getstate__(self):
        # The native engine is a capsule: a copy checks its own again where it lands.
        return {**self.__dict__, "_native_checked": False, "_native_engine": None,
                "native_reason": None}

    @property
    def engine_used(self) -> str:
        """What encodes here: the native module `sp_ids`, or sentencepiece's Python API
        (a process where the module is missing or differs)."""
        return sp_native.NAME if self._native() is not None else "sentencepiece"

    def native_path(self) -> str:
        """How this adapter turns text into ids, for the tokenizer card."""
        if self._native() is not None:
            return (f"ids through sentencepiece's normalizer and model in the native "
                    f"module {sp_native.NAME}")
        return f"ids through sentencepiece's Python API ({self.native_reason})"

    # SentencePiece never reads special tokens out of text: plain text is any text.
    encode_plain_many = encode_many

    def encode_plain_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return flat_ids(self.encode_many(texts))

    def _inner(self):
        """The model with `add_dummy_prefix` off: text that continues a record after a
        special token or a segment boundary gets no '▁' of its own (as Hugging Face's
        Metaspace with prepend_scheme "first" and `legacy=False` tokenizers do)."""
        if self._inner_sp is None:
            import sentencepiece as spm
            from sentencepiece import sentencepiece_model_pb2

            proto = sentencepiece_model_pb2.ModelProto()
            proto.ParseFromString(self._data)
            proto.normalizer_spec.add_dummy_prefix = False
            self._inner_sp = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
        return self._inner_sp

    def encode_runs(self, runs: list[str], starts: list[bool]) -> list[list[int]]:
        """Runs of template text between special tokens: a run that starts a record
        encodes as the model encodes a text; any other run as the continuation of one
        (no dummy prefix; a model that removes extra whitespace keeps one '▁' for a run
        that starts with whitespace, as it would inside one text)."""
        collapse = self.model.remove_extra_whitespaces
        first = [i for i, (run, start) in enumerate(zip(runs, starts))
                 if start or (collapse and run[:1].isspace())]
        out = [None] * len(runs)
        if first:
            for i, ids in zip(first, self.encode_many([runs[i] for i in first])):
                out[i] = ids
        rest = [i for i, ids in enumerate(out) if ids is None]
        if rest:
            inner = self._inner().encode([runs[i] for i in rest], out_type=int,
                                         num_threads=self.threads)
            for i, ids in zip(rest, inner):
                out[i] = ids
        return out

    def decode_many(self, ids: list[list[int]]) -> list[str]:
        return self._sp.decode(ids)

    def normalize(self, text: str) -> str:
        """The model's normalizer alone ("▁" for spaces, the dummy prefix included)."""
        return self._sp.normalize(text)

    def surfaces(self, text: str, positions: list[int]) -> list[str]:
        """Source substring of the tokens at `positions`: SentencePiece's piece surface."""
        try:
            pieces = self._sp.encode(text, out_type="immutable_proto").pieces
        except ValueError:  # sentencepiece >= 0.2.2 only offers return_type="proto"
            pieces = self._sp.encode(text, return_type="proto").pieces
        return [pieces[i].surface if i < len(pieces) else "" for i in positions]

    def token_id(self, token: str) -> int | None:
        """The id of the piece `token`, None when it is not in the vocabulary."""
        found = int(self._sp.piece_to_id(token))
        return found if 0 <= found < self.vocab_size and self._sp.id_to_piece(found) == token else None

    def token_text(self, token_id: int) -> str:
        return self._sp.id_to_piece(int(token_id))

    def pieces(self, ids) -> list[str]:
        return [self._sp.id_to_piece(int(i)) for i in ids]

    def special_tokens(self) -> list[str]:
        """The control and unknown pieces (`<s>`, `</s>`, `<pad>`, `<unk>`, ...)."""
        sp = self._sp
        return [sp.id_to_piece(i) for i in range(self.vocab_size)
                if sp.is_control(i) or sp.is_unknown(i)]

    def template_tokens(self) -> list[str]:
        """Text a chat template may write for a token: every symbol (control, unknown
        and user-defined pieces); message content holding one is kept as plain text."""
        return list(self.symbols)


@dataclass(frozen=True)
class SentencePieceModel:
    """What a `.model` file says beyond the processor's API: how it normalizes text and
    which pieces are user-defined symbols (matched in any text) or bytes."""

    model_type: str
    normalizer: str
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool
    escape_whitespaces: bool
    treat_whitespace_as_suffix: bool
    byte_fallback: bool
    user_defined: frozenset


def sp_model_facts(data: bytes) -> SentencePieceModel:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(data)
    norm, trainer = proto.normalizer_spec, proto.trainer_spec
    types = sentencepiece_model_pb2.TrainerSpec.ModelType
    user = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    return SentencePieceModel(
        model_type=types.Name(trainer.model_type).lower(), normalizer=norm.name or "identity",
        add_dummy_prefix=bool(norm.add_dummy_prefix),
        remove_extra_whitespaces=bool(norm.remove_extra_whitespaces),
        escape_whitespaces=bool(norm.escape_whitespaces),
        treat_whitespace_as_suffix=bool(trainer.treat_whitespace_as_suffix),
        byte_fallback=bool(trainer.byte_fallback),
        user_defined=frozenset(i for i, p in enumerate(proto.pieces) if p.type == user))


class HuggingFaceTokenizer:
    kind = "hf_json"
    engine = fast_bpe.ENGINE_TOKENIZERS  # `with_engine` gives a view on another engine
    # The engines that encode in place of `tokenizers` where they are exact.
    ENGINES = (native_bpe.ENGINE_NATIVE, fast_bpe.ENGINE_TIKTOKEN)

    def __init__(self, data: bytes, display_path: str, spec: dict | None = None):
        from tokenizers import Tokenizer

        text = data.decode("utf-8") if spec is None else json.dumps(spec)
        self._tk = Tokenizer.from_str(text)
        spec = json.loads(text) if spec is None else spec
        self._data = data if data else None  # the file as read (the native engine parses it)
        self._engines: dict = {}  # engine name -> (engine or None, why), built on first use
        self.spec = spec
        self.symbols = None  # added tokens: the tokenizer itself reads them out of text
        self.vocab_size = int(self._tk.get_vocab_size())
        # Above every id it can produce: a vocabulary with gaps (an added token at 70000
        # in 60,001 entries) needs more than get_vocab_size() says.
        ids = self._tk.get_vocab(with_added_tokens=True).values()
        self.id_bound = max(self.vocab_size, max(ids, default=-1) + 1)
        self.byte_level = _is_byte_level(spec)
        self.unk_id = _hf_unk_id(self._tk, spec, display_path, self.byte_level)
        self.padding = _hf_padding(self._tk)  # (id, token) or None
        self.model_pad_id = self.padding[0] if self.padding else None
        self.model_bos_id = self.model_eos_id = None  # only a tokenizer config names them
        # Record padding comes from our shard layout; tokenizer-side padding or
        # truncation would silently change segment lengths.
        self._tk.no_padding()
        self._tk.no_truncation()

    @property
    def engine_used(self) -> str:
        """The engine that encodes in this process (a worker without the native module
        encodes with `tokenizers`: `with_engine`)."""
        return self.engine

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        if self.engine in self.ENGINES:
            return self._engine_many(texts, plain=False)
        return self._hf_many(texts)

    def encode_plain_many(self, texts: list[str]) -> list[list[int]]:
        """Special-token strings in `texts` (user content) as plain text, never as ids."""
        if self.engine in self.ENGINES:
            return self._engine_many(texts, plain=True)
        return self._hf_plain_many(texts)

    def encode_plain_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode_plain_many` as (every text's ids back to back, each text's count): the
        native engine's own arrays, never a Python int per token."""
        if self.engine == native_bpe.ENGINE_NATIVE:
            ids, counts, left = self._engines[self.engine][0].encode_flat(texts, plain=True)
            if not left:
                return ids, counts
            # The texts it left have no ids in `ids`: theirs go in at their places.
            slow = self._hf_plain_many([texts[i] for i in left])
            starts = np.concatenate([[0], np.cumsum(counts)])
            counts, pieces, after = counts.copy(), [], 0
            for i, got in zip(left, slow):
                pieces += [ids[starts[after]:starts[i]], np.asarray(got, dtype=np.uint32)]
                counts[i], after = len(got), i + 1
            pieces.append(ids[starts[after]:])
            return np.concatenate(pieces), counts
        return flat_ids(self.encode_plain_many(texts))

    def _hf_many(self, texts: list[str]) -> list[list[int]]:
        # `encode_batch_fast` (tokenizers >= 0.21): the same ids without the offsets.
        batch = getattr(self._tk, "encode_batch_fast", self._tk.encode_batch)
        return [enc.ids for enc in batch(texts, add_special_tokens=False)]

    def _hf_plain_many(self, texts: list[str]) -> list[list[int]]:
        self._tk.encode_special_tokens = True
        try:
            return self._hf_many(texts)
        finally:
            self._tk.encode_special_tokens = False

    def _engine_many(self, texts: list[str], plain: bool) -> list[list[int]]:
        """The engine's ids; the texts it leaves (added-token text, bytes its regex
        would drop, a lone surrogate) are encoded by `tokenizers`."""
        out, left = self._engines[self.engine][0].encode_many(texts, plain)
        if left:
            slow = (self._hf_plain_many if plain else self._hf_many)([texts[i] for i in left])
            for i, ids in zip(left, slow):
                out[i] = ids
        return out

    def view(self, engine: str):
        """(a view of this tokenizer encoding with `engine`, why) where its structure
        allows the engine and it gives this tokenizer's ids on probe texts; else (None,
        why not)."""
        if engine not in self._engines:
            built, why = self._build(engine)
            self._engines[engine] = (built, why)
            if built is not None:
                probes = list(fast_bpe.PROBES) + self.special_tokens()[:8]
                wrong = self._differs(engine, probes)
                if wrong is not None:
                    self._engines[engine] = (None, f"differs from tokenizers on the probe {wrong!r}")
        found, why = self._engines[engine]
        if found is None:
            return None, why
        return self.with_engine(engine), why

    def _differs(self, engine: str, texts: list[str]) -> str | None:
        """The first text `engine` encodes otherwise than `tokenizers`, as content or as
        template text, or None."""
        view = copy.copy(self)
        view.engine = engine
        for plain in (False, True):
            slow = self._hf_plain_many(texts) if plain else self._hf_many(texts)
            fast = view._engine_many(texts, plain)
            for text, a, b in zip(texts, slow, fast):
                if a != b:
                    return text
        return None

    def fast_view(self):
        """`view` on tiktoken's BPE (`fast_bpe`)."""
        return self.view(fast_bpe.ENGINE_TIKTOKEN)

    def native_view(self):
        """`view` on the native engine (`native_bpe`)."""
        return self.view(native_bpe.ENGINE_NATIVE)

    def _build(self, engine: str):
        if engine == native_bpe.ENGINE_NATIVE:
            data = self._data if self._data is not None else json.dumps(self.spec).encode()
            return native_bpe.native_engine(data, self.spec, self._tk)
        return fast_bpe.fast_engine(self.spec, self._tk.token_to_id, self._tk.model)

    def with_engine(self, engine: str):
        """This tokenizer encoding with `engine` (a plan's decision, `engine_choice`).
        Where the native engine cannot be had here (a worker without the module, or
        with another `tokenizers`), the view encodes with `tokenizers`, the same ids;
        its `engine` says which it is."""
        if engine == self.engine or engine not in self.ENGINES + (fast_bpe.ENGINE_TOKENIZERS,):
            return self
        if engine in self.ENGINES and engine not in self._engines:
            self._engines[engine] = self._build(engine)
        if engine in self.ENGINES and self._engines[engine][0] is None:
            if engine == native_bpe.ENGINE_NATIVE:
                engine = fast_bpe.ENGINE_TOKENIZERS
            else:
                raise TokenizerValidationError(
                    component="engine",
                    problem=f"the {engine} engine is not exact here: {self._engines[engine][1]}")
        view = copy.copy(self)
        view.engine = engine
        return view

    def surfaces(self, text: str, positions: list[int]) -> list[str]:
        """Source substring of the tokens at `positions`, from the tokenizer's offsets."""
        offsets = self._tk.encode(text, add_special_tokens=False).offsets
        return [text[offsets[i][0]:offsets[i][1]] if i < len(offsets) else "" for i in positions]

    def token_id(self, token: str) -> int | None:
        found = self._tk.token_to_id(token)
        return None if found is None else int(found)

    def token_text(self, token_id: int) -> str | None:
        return self._tk.id_to_token(int(token_id))

    def pieces(self, ids) -> list[str | None]:
        return [self._tk.id_to_token(int(i)) for i in ids]

    def decode_many(self, ids: list[list[int]]) -> list[str]:
        return self._tk.decode_batch(ids, skip_special_tokens=False)

    def special_tokens(self) -> list[str]:
        """The added tokens marked special=True, in tokenizer.json order."""
        return [t["content"] for t in self.spec.get("added_tokens") or []
                if isinstance(t, dict) and t.get("special") and isinstance(t.get("content"), str)]

    # Message content with special-token text is encoded plain (`encode_plain_many`).
    template_tokens = special_tokens


class TiktokenTokenizer(HuggingFaceTokenizer):
    """A tiktoken BPE file as its equivalent tokenizer.json (`tiktoken_files`), with the
    split regex and special tokens of the tokenizer block (`TokenizerOptions.tiktoken`)."""

    kind = "tiktoken"

    def __init__(self, data: bytes, display_path: str, definition: tuple):
        family, pattern, given = definition
        ranks = tiktoken_files.read_ranks(data)
        specials = {}
        if family is not None:
            family_pattern, family_specials = tiktoken_files.FAMILIES[family]
            pattern = pattern or family_pattern
            specials = family_specials(len(ranks))
        specials.update(dict(given))
        self._ranks, self._pattern = ranks, pattern
        super().__init__(b"", display_path, tiktoken_files.tokenizer_json(ranks, pattern, specials))

    def _build(self, engine: str):
        """The ranks are tiktoken's own: no merges to check."""
        if engine == fast_bpe.ENGINE_TIKTOKEN:
            return fast_bpe.engine_from_ranks(self._ranks, self._pattern, None, self.spec, (),
                                              self._tk.token_to_id)
        return super()._build(engine)


def flat_ids(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ids as (their ids back to back, each one's count)."""
    counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(counts.sum()))
    return ids, counts


def describe_file(data: bytes) -> str:
    """What a tokenizer file that failed to load looks like, and the type that reads it."""
    head = data[:64].lstrip()
    if head.startswith((b"{", b"[")):
        return "it looks like JSON: a Hugging Face tokenizer.json is type hf_json"
    if tiktoken_files.looks_like_tiktoken(data):
        return ("it looks like a tiktoken BPE file (a base64 token and a rank per line, "
                "Meta's Llama 3 tokenizer.model): use type tiktoken with family "
                f"({', '.join(tiktoken_files.FAMILIES)}) or pattern and special_tokens")
    if not data:
        return "the file is empty"
    try:
        text = data[:40].decode("utf-8")
        return f"it is text beginning {text!r}, not a tokenizer this tool reads"
    except UnicodeDecodeError:
        return f"it is binary data beginning {data[:8].hex(' ')}, not a SentencePiece model"


def _declared(value) -> int | None:
    value = int(value)
    return value if value >= 0 else None


def _require_id(value: int, name: str, path: str, problem: str) -> int:
    if value < 0:
        raise TokenizerSpecialTokenError(tokenizer=path, special_token=name, problem=problem)
    return value


def _is_byte_level(spec: dict) -> bool:
    """Every byte has a token: a ByteLevel pre-tokenizer (GPT-2, Llama 3, Qwen2) or a BPE
    with byte_fallback. Such a tokenizer can encode any text without an UNK."""
    model = spec.get("model") or {}
    if model.get("byte_fallback") is True:
        return True

    def has_byte_level(node) -> bool:
        if isinstance(node, dict):
            return node.get("type") == "ByteLevel" or any(map(has_byte_level, node.values()))
        if isinstance(node, list):
            return any(map(has_byte_level, node))
        return False

    return has_byte_level(spec.get("pre_tokenizer"))


def _hf_unk_id(tk, spec: dict, path: str, byte_level: bool) -> int | None:
    """The model's UNK id; None for a byte-level model that declares none (it can never
    produce one)."""
    model = spec.get("model") or {}
    if model.get("type") == "Unigram":
        unk = model.get("unk_id")
        if isinstance(unk, int) and unk >= 0:
            return unk
        declared = unk is not None
    else:
        token = model.get("unk_token")
        if isinstance(token, str) and tk.token_to_id(token) is not None:
            return int(tk.token_to_id(token))
        declared = token is not None
    if byte_level and not declared:
        return None
    raise TokenizerSpecialTokenError(
        tokenizer=path, special_token="unk_id",
        problem="missing unk_id: the tokenizer model declares no usable unk token",
        fix=None if declared else "unk")


def _hf_padding(tk) -> tuple[int, str | None] | None:
    """(pad id, pad token) from tokenizer.json's padding config, or None."""
    padding = tk.padding
    if isinstance(padding, dict):
        token = padding.get("pad_token")
        token = token if isinstance(token, str) else None
        if padding.get("pad_id") is not None:
            return int(padding["pad_id"]), token
        if token is not None and tk.token_to_id(token) is not None:
            return int(tk.token_to_id(token)), token
    return None


def load_tokenizer(kind: str, path: str, display_path: str | None = None, options=None):
    """Load from a resolved path (local or URL); `display_path` is what the user wrote;
    `options` (`TokenizerOptions`) say how a tiktoken file is read."""
    shown = display_path or path
    if kind not in KINDS:
        raise TokenizerValidationError(unsupported_format=True)
    return tokenizer_from_bytes(kind, read_tokenizer_file(path, shown), shown,
                                tiktoken_definition(options))


def read_tokenizer_file(path: str, shown: str) -> bytes:
    if not storage.exists(path):
        raise MintDimFileNotFoundError(context="tokenizer", missing_file=shown)
    return storage.read_bytes(path)


def tiktoken_definition(options) -> tuple | None:
    """(family, split regex, special tokens) from the block's options, for a tiktoken
    file."""
    if options is None or getattr(options, "tiktoken", None) is None:
        return None
    return options.tiktoken


def tokenizer_from_bytes(kind: str, data: bytes, shown: str, definition: tuple | None = None):
    """A tokenizer from the file's bytes; `shown` names the file in errors; `definition`
    the (family, split regex, special tokens) a tiktoken file is read with."""
    try:
        if kind == "sentencepiece":
            return SentencePieceTokenizer(data, shown)
        if kind == "tiktoken":
            if definition is None:
                raise TokenizerValidationError(
                    component="family",
                    problem=f"{shown}: a tiktoken file needs tokenizer.family or tokenizer.pattern")
            return TiktokenTokenizer(data, shown, definition)
        return HuggingFaceTokenizer(data, shown)
    except (TokenizerSpecialTokenError, TokenizerValidationError):
        raise
    except Exception as exc:  # a corrupt or mismatched file
        raise TokenizerValidationError(
            component="files",
            problem=f"{shown} could not be loaded as {kind}: {type(exc).__name__}: {exc}; "
                    f"{describe_file(data)}") from None


# One loaded tokenizer per (kind, path, definition) per worker process: DoFn instances
# share it.
_CACHE: dict[tuple, object] = {}


def cached_tokenizer(kind: str, path: str, options=None, display_path: str | None = None):
    """The tokenizer loaded once per process: the launcher's plan and an in-process
    worker share it. `display_path` names the file in errors (the first load's)."""
    shown = display_path or path
    if kind not in KINDS:
        raise TokenizerValidationError(unsupported_format=True)
    data = read_tokenizer_file(path, shown)
    # Keyed by content too: a file rewritten at the same path is loaded again.
    key = (kind, path, repr(tiktoken_definition(options)), hashlib.blake2b(data).digest())
    if key not in _CACHE:
        if len(_CACHE) >= 8:  # a long-lived process keeps the recent ones, not all
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = tokenizer_from_bytes(kind, data, shown, tiktoken_definition(options))
    return _CACHE[key]
