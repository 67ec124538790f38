"""Hugging Face BPE tokenizers encoded natively: `bpe_ids`, the module
`tools/build_bpe_ids.sh` builds (`make setup` does) from `native/bpe_ids`.

It is `tokenizers`' own algorithm rather than a proof that another one agrees: the
file's merges and their ranks (lowest first, leftmost on a tie, a stale pair skipped as
`tokenizers` skips it), `ignore_merges`, byte fallback, the continuing-subword prefix
and end-of-word suffix, UNK fusing; the pre-tokenizer steps (`Split` with any delimiter
behavior, `ByteLevel`, `Metaspace`) and normalizers (NFC, NFKC, NFD, NFKD, `Prepend`,
literal `Replace`) as `tokenizers` applies them piece by piece; added tokens cut as its
added vocabulary cuts them (leftmost-longest, raw then normalized, lstrip and rstrip,
special ones as text in content). Split regexes run on a matcher of its own whose
character classes are asked of Oniguruma, the regex library `tokenizers` is built with,
and NFC/NFKC come from the crate it uses: the module is built against the versions of
the `tokenizers` it was built for (`TOKENIZERS_VERSION`), and is not used with another.

What it cannot vouch for it leaves to `tokenizers`: a tokenizer outside that structure
(the reason is given), and per text, a lone surrogate, a `single_word` added token, an
UNK token the vocabulary lacks. `engine_choice` still compares its ids with `tokenizers`
on probe texts and the build's own sample before a build uses it.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np

ENGINE_NATIVE = "native"
NAME = "bpe_ids"  # the module

_NORMALIZERS = ("NFC", "NFKC", "NFD", "NFKD")
_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


@functools.lru_cache(maxsize=1)
def module():
    """(the `bpe_ids` module, None) or (None, why not)."""
    try:
        from mintdim_beam.core.tokenizer import bpe_ids
    except ImportError:
        return None, "the native module is not built (tools/build_bpe_ids.sh)"
    from importlib.metadata import version

    installed = version("tokenizers")
    if bpe_ids.TOKENIZERS_VERSION != installed:
        return None, (f"the native module was built for tokenizers {bpe_ids.TOKENIZERS_VERSION}'s "
                      f"regex and normalizer libraries, this process imports {installed}")
    return bpe_ids, None


def cache_dir() -> str:
    """Where the members of each split-regex class are kept once computed (about 0.1 s
    of Oniguruma per class): `MINTDIM_BEAM_CACHE`, else the user's cache folder."""
    root = os.environ.get("MINTDIM_BEAM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "mintdim-beam")
    return os.path.join(root, "onig-classes")


def _normalizers(state) -> tuple[list | None, str | None]:
    """The engine's normalizer list for the loaded tokenizer's normalizer (its own
    serialization), or the reason it is not reproduced."""
    if state is None:
        return [], None
    kind = state.get("type")
    if kind == "Sequence":
        out = []
        for inner in state.get("normalizers") or []:
            got, why = _normalizers(inner)
            if why:
                return None, why
            out += got
        return out, None
    if kind in _NORMALIZERS:
        return [{"kind": kind}], None
    if kind == "Prepend":
        return [{"kind": kind, "prepend": state["prepend"]}], None
    if kind == "Replace":
        pattern = state.get("pattern") or {}
        if isinstance(pattern.get("String"), str) and pattern["String"]:
            return [{"kind": kind, "from": pattern["String"], "to": state["content"]}], None
        return None, "normalizer Replace of a regex"
    return None, f"normalizer {kind}"


def _steps(state) -> tuple[list | None, bool, str | None]:
    """(engine steps, byte-level, None) for the loaded pre-tokenizer, or the reason."""
    if state is None:
        return [], False, None
    nodes = state.get("pretokenizers") if state.get("type") == "Sequence" else [state]
    steps, byte_level = [], False
    for k, node in enumerate(nodes or []):
        kind = node.get("type")
        if byte_level:
            return None, False, "a pre-tokenizer after ByteLevel"
        if kind == "Split":
            pattern = node.get("pattern") or {}
            behavior = node.get("behavior")
            if behavior not in _BEHAVIORS:
                return None, False, f"Split behavior {behavior}"
            step = {"kind": "Split", "behavior": behavior, "invert": bool(node.get("invert"))}
            if isinstance(pattern.get("Regex"), str):
                step["regex"] = pattern["Regex"]
            elif isinstance(pattern.get("String"), str):
                step["literal"] = pattern["String"]
            else:
                return None, False, "a Split without pattern"
            steps.append(step)
        elif kind == "ByteLevel":
            if node.get("add_prefix_space"):
                steps.append({"kind": "PrefixSpace"})
            if node.get("use_regex", True):
                from mintdim_beam.core.tokenizer.fast_bpe import GPT2_PATTERN

                steps.append({"kind": "Split", "regex": GPT2_PATTERN, "behavior": "Isolated",
                              "invert": False})
            byte_level = True
        elif kind == "Metaspace":
            steps.append({"kind": "Metaspace", "replacement": node["replacement"],
                          "prepend_scheme": node.get("prepend_scheme", "always"),
                          "split": node.get("split", True)})
        else:
            return None, False, f"pre-tokenizer {kind} is not one the native engine reproduces"
    return steps, byte_level, None


def engine_config(spec: dict, tokenizer) -> tuple[dict | None, str | None]:
    """The engine's config for a parsed tokenizer.json and its loaded `tokenizers`
    Tokenizer (whose own normalizer and pre-tokenizer serializations fill in defaults),
    or the reason the engine cannot reproduce it."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        return None, f"model {model.get('type')} is not BPE"
    if model.get("dropout") not in (None, 0, 0.0):
        return None, f"the BPE has dropout {model.get('dropout')!r}"
    state = (lambda part: None if part is None else json.loads(part.__getstate__()))
    normalizers, why = _normalizers(state(tokenizer.normalizer))
    if why:
        return None, why
    steps, byte_level, why = _steps(state(tokenizer.pre_tokenizer))
    if why:
        return None, why
    added = []
    for token in spec.get("added_tokens") or []:
        if not isinstance(token, dict) or not isinstance(token.get("content"), str):
            continue
        found = tokenizer.token_to_id(token["content"])
        added.append({"content": token["content"],
                      "id": int(token["id"] if found is None else found),
                      **{flag: bool(token.get(flag, flag == "normalized" and not token.get("special")))
                         for flag in ("special", "lstrip", "rstrip", "single_word", "normalized")}})
    return {"normalizers": normalizers, "steps": steps, "byte_level": byte_level,
            "added": added, "cache_dir": cache_dir()}, None


class NativeBPE:
    """One tokenizer in `bpe_ids`; rebuilt where it is unpickled (a native object does
    not travel)."""

    def __init__(self, data: bytes, config: dict):
        native, _ = module()
        self._data, self._config = data, config
        self._engine = native.Engine(data, json.dumps(config))

    def __reduce__(self):
        return NativeBPE, (self._data, self._config)

    def encode_flat(self, texts: list[str], plain: bool) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(every text's ids back to back as uint32, each text's count as int64, the
        indices of the texts left to `tokenizers`: count 0 there)."""
        ids, counts, left = self._engine.encode(texts, plain)
        return (np.frombuffer(ids, dtype="<u4"), np.frombuffer(counts, dtype="<u8").astype(np.int64),
                left)

    def encode_many(self, texts: list[str], plain: bool) -> tuple[list, list[int]]:
        """(ids per text, None for the texts left to `tokenizers`; their indices)."""
        ids, counts, left = self.encode_flat(texts, plain)
        flat = ids.tolist()
        out, at = [], 0
        for count in counts.tolist():
            out.append(flat[at:at + count])
            at += count
        for i in left:
            out[i] = None
        return out, left


def native_engine(data: bytes, spec: dict, tokenizer) -> tuple[NativeBPE | None, str]:
    """The native engine for a tokenizer.json (`data`, parsed as `spec`, loaded as
    `tokenizer`), or None and the reason."""
    native, why = module()
    if native is None:
        return None, why
    config, why = engine_config(spec, tokenizer)
    if config is None:
        return None, why
    try:
        return NativeBPE(data, config), ""
    except ValueError as exc:
        return None, f"the native engine refuses it: {exc}"
