"""The tokenizer card: what a build's tokenizer is and what text it cannot carry,
recorded in the manifest (`tokenizer_card`) and shown by `report` beside the lossy
cases the build met (`round_trip`).

What it cannot represent is read from the tokenizer's structure: a normalizer that
rewrites Unicode compatibility forms or case, whitespace that is collapsed or split
away, characters outside a vocabulary without byte fallback (UNK).
"""
from __future__ import annotations

_NORMALIZER_LOSSES = {
    "NFKC": "Unicode compatibility forms (fullwidth letters, ligatures, circled digits) "
            "become their plain forms (NFKC)",
    "NFKD": "Unicode compatibility forms are decomposed (NFKD)",
    "NFD": "composed characters are decomposed (NFD)",
    "NFC": "decomposed characters are composed (NFC)",
    "Lowercase": "upper case becomes lower case",
    "StripAccents": "accents are removed",
    "Strip": "leading and trailing whitespace is removed",
    "Replace": "some text is replaced before encoding (a Replace normalizer)",
    "Precompiled": "a SentencePiece normalization table rewrites some characters",
}


def build_card(tokenizer, facts) -> dict:
    """The card of `tokenizer` (an adapter of `core.tokenizer.tokenizers`) for a dataset whose
    special tokens are `facts` (`special_tokens.TokenizerFacts`)."""
    if tokenizer.kind == "sentencepiece":
        card = _sentencepiece(tokenizer)
    else:
        card = _hugging_face(tokenizer)
    special = {} if facts is None else facts.manifest_block()
    card["special_tokens"] = {name: value for name, value in special.items() if value}
    symbols = getattr(tokenizer, "symbols", None)
    if symbols is not None:
        card["symbols"] = len(symbols)
    return {"kind": tokenizer.kind, "vocab_size": tokenizer.vocab_size, **card}


def _sentencepiece(tokenizer) -> dict:
    model = tokenizer.model
    losses = []
    if model.normalizer not in ("identity",):
        losses.append(f"normalizer {model.normalizer}: " + {
            "nmt_nfkc": "NFKC (fullwidth letters, ligatures, circled digits become plain "
                        "forms); tabs and newlines become spaces",
            "nfkc": "NFKC (fullwidth letters, ligatures, circled digits become plain forms)",
            "nmt_nfkc_cf": "NFKC and case folding; tabs and newlines become spaces",
            "nfkc_cf": "NFKC and case folding",
        }.get(model.normalizer, "rewrites some characters"))
    if model.remove_extra_whitespaces:
        losses.append("runs of whitespace collapse to one space; leading and trailing "
                      "whitespace is dropped")
    if not model.byte_fallback:
        losses.append("characters outside the vocabulary become UNK (no byte fallback)")
    return {"model": model.model_type, "normalizer": model.normalizer,
            "add_dummy_prefix": model.add_dummy_prefix,
            "remove_extra_whitespaces": model.remove_extra_whitespaces,
            "byte_fallback": model.byte_fallback, "byte_level": False,
            "user_defined_symbols": len(model.user_defined),
            "cannot_represent": losses}


def _steps(node, key: str) -> list[dict]:
    """A Sequence's steps (`normalizers` / `pretokenizers` / `decoders`), or the node."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [step for child in node.get(key) or [] for step in _steps(child, key)]
    return [node]


def _hugging_face(tokenizer) -> dict:
    spec = tokenizer.spec
    model = spec.get("model") or {}
    normalizers = _steps(spec.get("normalizer"), "normalizers")
    pre = _steps(spec.get("pre_tokenizer"), "pretokenizers")
    decoders = _steps(spec.get("decoder"), "decoders")
    losses = []
    for step in normalizers:
        kind = step.get("type")
        if kind == "BertNormalizer":
            if step.get("lowercase"):
                losses.append(_NORMALIZER_LOSSES["Lowercase"])
            if step.get("strip_accents") or (step.get("strip_accents") is None and step.get("lowercase")):
                losses.append(_NORMALIZER_LOSSES["StripAccents"])
            if step.get("clean_text"):
                losses.append("control characters are removed and whitespace becomes spaces")
        elif kind in _NORMALIZER_LOSSES:
            losses.append(_NORMALIZER_LOSSES[kind])
    kinds = {step.get("type") for step in pre}
    if kinds & {"Whitespace", "WhitespaceSplit", "BertPreTokenizer"}:
        losses.append("whitespace is split away: decoded text has single spaces between "
                      "tokens, or none")
    if not tokenizer.byte_level:
        losses.append("characters outside the vocabulary become UNK (no byte fallback)")
    return {"model": model.get("type"),
            "normalizer": [step.get("type") for step in normalizers] or None,
            "pre_tokenizer": [step.get("type") for step in pre] or None,
            "decoder": [step.get("type") for step in decoders] or None,
            "byte_fallback": bool(model.get("byte_fallback")),
            "byte_level": tokenizer.byte_level,
            "added_tokens": len(spec.get("added_tokens") or []),
            "cannot_represent": losses}
