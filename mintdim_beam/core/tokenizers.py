"""Tokenizer adapters: load a SentencePiece `.model` or a Hugging Face `tokenizer.json`
from any fsspec path and encode many texts per call.

The tokenizer file is the single source of truth for vocabulary and special ids; we
never add special tokens, pad or truncate on the tokenizer side.
"""
from __future__ import annotations

import json

from mintdim_beam.core import storage
from mintdim_beam.core.errors import (MintDimFileNotFoundError, TokenizerSpecialTokenError,
                                      TokenizerValidationError)

KINDS = ("sentencepiece", "hf_json")


class SentencePieceTokenizer:
    kind = "sentencepiece"
    threads = -1  # native threads per batch call: -1 is every core

    def __init__(self, data: bytes, display_path: str):
        import sentencepiece as spm

        self._sp = spm.SentencePieceProcessor(model_proto=data)
        self.vocab_size = int(self._sp.get_piece_size())
        self.unk_id = _require_id(int(self._sp.unk_id()), "unk_id", display_path,
                                  f"SentencePiece returned unk_id={self._sp.unk_id()}")
        self.pad_id = _require_id(int(self._sp.pad_id()), "pad_id", display_path,
                                  f"SentencePiece returned pad_id={self._sp.pad_id()}")

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        return self._sp.encode(texts, out_type=int, num_threads=self.threads)

    def surfaces(self, text: str, positions: list[int]) -> list[str]:
        """Source substring of the tokens at `positions`: SentencePiece's piece surface."""
        try:
            pieces = self._sp.encode(text, out_type="immutable_proto").pieces
        except ValueError:  # sentencepiece >= 0.2.2 only offers return_type="proto"
            pieces = self._sp.encode(text, return_type="proto").pieces
        return [pieces[i].surface if i < len(pieces) else "" for i in positions]


class HuggingFaceTokenizer:
    kind = "hf_json"

    def __init__(self, data: bytes, display_path: str):
        from tokenizers import Tokenizer

        text = data.decode("utf-8")
        self._tk = Tokenizer.from_str(text)
        spec = json.loads(text)
        self.vocab_size = int(self._tk.get_vocab_size())
        self.unk_id = _hf_unk_id(self._tk, spec, display_path)
        self.pad_id = _hf_pad_id(self._tk, display_path)
        # Record padding comes from our shard layout; tokenizer-side padding or
        # truncation would silently change segment lengths.
        self._tk.no_padding()
        self._tk.no_truncation()

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        return [enc.ids for enc in self._tk.encode_batch(texts, add_special_tokens=False)]

    def surfaces(self, text: str, positions: list[int]) -> list[str]:
        """Source substring of the tokens at `positions`, from the tokenizer's offsets."""
        offsets = self._tk.encode(text, add_special_tokens=False).offsets
        return [text[offsets[i][0]:offsets[i][1]] if i < len(offsets) else "" for i in positions]


def _require_id(value: int, name: str, path: str, problem: str) -> int:
    if value < 0:
        raise TokenizerSpecialTokenError(tokenizer=path, special_token=name, problem=problem)
    return value


def _hf_unk_id(tk, spec: dict, path: str) -> int:
    model = spec.get("model") or {}
    if model.get("type") == "Unigram":
        unk = model.get("unk_id")
        if isinstance(unk, int) and unk >= 0:
            return unk
    else:
        token = model.get("unk_token")
        if isinstance(token, str) and tk.token_to_id(token) is not None:
            return int(tk.token_to_id(token))
    raise TokenizerSpecialTokenError(
        tokenizer=path, special_token="unk_id",
        problem="missing unk_id: the tokenizer model declares no usable unk token")


def _hf_pad_id(tk, path: str) -> int:
    padding = tk.padding
    if isinstance(padding, dict):
        if padding.get("pad_id") is not None:
            return int(padding["pad_id"])
        token = padding.get("pad_token")
        if isinstance(token, str) and tk.token_to_id(token) is not None:
            return int(tk.token_to_id(token))
    raise TokenizerSpecialTokenError(
        tokenizer=path, special_token="pad_id",
        problem="missing pad_id: tokenizer.json has no padding config with pad_id or pad_token")


def load_tokenizer(kind: str, path: str, display_path: str | None = None):
    """Load from a resolved path (local or URL); `display_path` is what the user wrote."""
    shown = display_path or path
    if kind not in KINDS:
        raise TokenizerValidationError(unsupported_format=True)
    return tokenizer_from_bytes(kind, read_tokenizer_file(path, shown), shown)


def read_tokenizer_file(path: str, shown: str) -> bytes:
    if not storage.exists(path):
        raise MintDimFileNotFoundError(context="tokenizer", missing_file=shown)
    return storage.read_bytes(path)


def tokenizer_from_bytes(kind: str, data: bytes, shown: str):
    """A tokenizer from the file's bytes; `shown` names the file in errors."""
    try:
        if kind == "sentencepiece":
            return SentencePieceTokenizer(data, shown)
        return HuggingFaceTokenizer(data, shown)
    except TokenizerSpecialTokenError:
        raise
    except Exception as exc:  # a corrupt or mismatched file
        raise TokenizerValidationError(
            component="files",
            problem=f"{shown} could not be loaded as {kind}: {type(exc).__name__}: {exc}") from None


# One loaded tokenizer per (kind, path) per worker process: DoFn instances share it.
_CACHE: dict[tuple[str, str], object] = {}


def cached_tokenizer(kind: str, path: str):
    key = (kind, path)
    if key not in _CACHE:
        _CACHE[key] = load_tokenizer(kind, path)
    return _CACHE[key]
