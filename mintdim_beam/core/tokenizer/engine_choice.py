"""Which engine encodes a build's text, decided once on the launcher before any output.

`tokenizer.engine: auto` (the default) takes the first of the native engine
(`native_bpe`: `tokenizers`' own BPE, natively) and tiktoken's BPE (`fast_bpe`, where it
is proven equal) that the tokenizer's structure allows and that gives the ids of
`tokenizers` on probe texts and on a sample of the build's own segments (the strings of
the first rows of every input file); else `tokenizers`, with the reasons. `native` or
`tiktoken` asks for that engine and makes its absence a config error; `tokenizers`
keeps both off. Workers take the decision from the plan, never decide again; a worker
without the native module encodes with `tokenizers` (the same ids) and says so in the
range's record (`engines_used` in the manifest).
"""
from __future__ import annotations

import json

from mintdim_beam.core.errors import MintDimError, TokenizerValidationError
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs import compression
from mintdim_beam.core.tokenizer.fast_bpe import ENGINE_TIKTOKEN, ENGINE_TOKENIZERS
from mintdim_beam.core.tokenizer.native_bpe import ENGINE_NATIVE

ENGINE_SENTENCEPIECE = "sentencepiece"
SAMPLE_BYTES = 1 << 18  # per input file
SAMPLE_SEGMENTS = 4000  # per build


def _strings(value, out: list) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the build reports its line
            return
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def sample_segments(paths: list[str], limit: int = SAMPLE_SEGMENTS) -> list[str]:
    """The strings of the first rows of each input file (up to `SAMPLE_BYTES` of each,
    decompressed; of a Parquet file the rows whose JSON takes that much), at most
    `limit` in all; unreadable rows are skipped (the build reports them with file and
    line)."""
    per_file = max(1, limit // max(1, len(paths)))
    found: list[str] = []
    for path in paths:
        strings: list[str] = []
        try:
            for row in _head_rows(path):
                _strings(row, strings)
                if len(strings) >= per_file:
                    break
        except Exception:  # noqa: BLE001 - the build's own reading reports the file
            pass
        found += strings[:per_file]
    return found[:limit]


def _head_rows(path: str):
    """The parsed rows of the file's first `SAMPLE_BYTES` (`inputs.formats`)."""
    from mintdim_beam.core.inputs import formats

    with storage.open_read(path) as raw:
        head = raw.read(SAMPLE_BYTES)
    if head.startswith(formats.PARQUET_MAGIC):
        yield from _parquet_head_rows(path)
        return
    codec, _ = compression.sniff(head)
    if codec is None:
        return
    if codec != compression.PLAIN:
        with storage.open_read(path) as raw:
            head = compression.decompressed(raw, codec).read(SAMPLE_BYTES)
    kind, bom = formats.text_format(head)
    if kind == formats.JSON_ARRAY:
        import io

        from mintdim_beam.core.inputs.json_array import iter_elements

        try:
            yield from iter_elements(io.BytesIO(head), path, SAMPLE_BYTES)
        except MintDimError:  # the sample's end cut the array
            pass
        return
    lines = head[len(formats.BOM) if bom else 0:].splitlines()
    if len(head) == SAMPLE_BYTES:
        lines = lines[:-1]  # cut by the sample's end
    for line in lines:
        try:
            yield json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue


def _parquet_head_rows(path: str):
    from mintdim_beam.core.inputs import parquet

    with storage.open_read(path) as raw:
        used, groups = 0, parquet.row_group_count(raw)
        for row in parquet.iter_rows(raw, 0, groups, 256, path):
            used += len(json.dumps(row, ensure_ascii=False)) + 1
            if used > SAMPLE_BYTES:
                return
            yield row


def _first_difference(tokenizer, fast, texts: list[str]) -> str | None:
    for plain in (False, True):
        slow_ids = tokenizer.encode_plain_many(texts) if plain else tokenizer.encode_many(texts)
        fast_ids = fast.encode_plain_many(texts) if plain else fast.encode_many(texts)
        for text, a, b in zip(texts, slow_ids, fast_ids):
            if list(a) != list(b):
                return f"differs from tokenizers on {text[:60]!r}"
    return None


def choose_engine(tokenizer, wanted: str, paths: list[str], shown: str) -> tuple[str, str]:
    """(engine, why) for `tokenizer` (an adapter of `tokenizers.py`); `paths`: the
    build's input files, sampled only when an engine could take the tokenizer."""
    if tokenizer.kind == "sentencepiece":
        return ENGINE_SENTENCEPIECE, ("SentencePiece encodes SentencePiece models; "
                                      + tokenizer.native_path())
    if wanted == ENGINE_TOKENIZERS:
        return ENGINE_TOKENIZERS, "tokenizer.engine: tokenizers"
    samples, reasons = None, []
    for engine in (ENGINE_NATIVE, ENGINE_TIKTOKEN) if wanted == "auto" else (wanted,):
        view, reason = tokenizer.view(engine)
        if view is not None:
            samples = sample_segments(paths) if samples is None else samples
            difference = _first_difference(tokenizer, view, samples) if samples else None
            if difference is None:
                passed = f" (not {'; '.join(reasons)})" if reasons else ""
                return engine, _WHY[engine].format(samples=len(samples)) + passed
            reason = f"the build's own text: {difference}"
        if engine == wanted:
            raise TokenizerValidationError(
                component="engine",
                problem=f"tokenizer.engine {engine} is not exact for {shown}: {reason}")
        reasons.append(f"{engine}: {reason}")
    return ENGINE_TOKENIZERS, "; ".join(reasons)


_WHY = {ENGINE_NATIVE: ("tokenizers' BPE natively (bpe_ids): the same ids as tokenizers on "
                        "probe texts and {samples:,} sampled segments"),
        ENGINE_TIKTOKEN: ("byte-level BPE: the same ids as tokenizers on probe texts "
                          "and {samples:,} sampled segments")}
