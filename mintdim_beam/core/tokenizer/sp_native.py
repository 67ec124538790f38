"""SentencePiece ids through `sp_ids`, the native module `tools/build_sp_ids.sh` builds
(`make setup` does): sentencepiece's own normalizer and model, the ids taken from the
model's result without the protobuf sentencepiece fills and frees for every id call
(about half of its instructions; `benchmarks/README.md`).

Used only where it is shown equal: the module must come from the sentencepiece version
this process imports, and a model's engine must give sentencepiece's ids on probe texts
(its own pieces, whitespace, unknown and control text) before any build uses it. Where
the module is missing, or a model fails the check, `engine` returns None with the
reason, and the adapter encodes through sentencepiece's Python API: the same ids.
"""
from __future__ import annotations

import functools

NAME = "sp_ids"  # the tokenizer card's name for this path
MAX_PIECES = 20_000  # pieces of a vocabulary probed, evenly spread (an 8k one: 0.08 s)

# Text no vocabulary holds whole: whitespace runs and edges, digits, newlines and tabs,
# scripts and symbols a small model has never seen, bytes of a byte-fallback model.
_PROBES = ("", " ", "  ", "\n", "a", " a", "a ", "  a  b  ", "a\nb\tc\r\nd", "x\u3000y",
           "12345 67.89", "ｈｅｌｌｏ　ｗｏｒｌｄ", "naïve café", "𓀀𓁐 ᚠᚢᚦ 🜲🜁 ꦲꦏ",
           "日本語のテキスト", "\u2581a \u2581", "a\u200bb", "<unk><s></s>", "\x00\x01 \x7f",
           "Ünïcödé ﬁ ﬀ ½ ²", "emoji 😀👍🏽 end")


@functools.lru_cache(maxsize=1)
def module():
    """(the `sp_ids` module, None) or (None, why not)."""
    try:
        from mintdim_beam.core.tokenizer import sp_ids
    except ImportError:
        return None, "the native module is not built (tools/build_sp_ids.sh)"
    from importlib.metadata import version

    installed = version("sentencepiece")
    if sp_ids.SENTENCEPIECE_VERSION != installed:
        return None, (f"the native module was built from sentencepiece "
                      f"{sp_ids.SENTENCEPIECE_VERSION}, this process imports {installed}")
    return sp_ids, None


def engine(data: bytes, processor, symbols):
    """(engine, None) for the model `data` when its ids equal `processor`'s (a loaded
    `SentencePieceProcessor`) on the probes, else (None, why). `symbols`: the model's
    control, unknown and user-defined pieces, probed as text too."""
    native, why = module()
    if native is None:
        return None, why
    try:
        loaded = native.load(data)
    except ValueError as exc:
        return None, f"the native module refused the model: {exc}"
    size = processor.get_piece_size()
    stride = max(1, size // MAX_PIECES)  # a 256k vocabulary: every 12th piece
    pieces = [processor.id_to_piece(i).replace("\u2581", " ") for i in range(0, size, stride)]
    probes = list(_PROBES) + pieces + list(symbols) + [" ".join(pieces[:400])]
    try:
        got = native.encode(loaded, probes, 1)
    except RuntimeError as exc:
        return None, str(exc)
    want = processor.encode(probes, out_type=int)
    for text, a, b in zip(probes, want, got):
        if list(a) != b:
            return None, f"differs from sentencepiece on {text[:40]!r}"
    return loaded, None


def encode(loaded, texts: list[str], threads: int) -> list[list[int]]:
    """Ids of each text; `threads`: native threads (<= 0: every core)."""
    native, _ = module()
    return native.encode(loaded, texts, threads)
