"""The on-disk format in one place: file names, record layout, index rows and summary
files, shared by the pipeline, tests and any reader.
"""
from __future__ import annotations

import functools
import json
import operator

import numpy as np

from mintdim_beam.core.errors import TokenDTypeCapacityError
from mintdim_beam.core.tokenizer.round_trip import KINDS as ROUND_TRIP_KINDS

FORMAT_VERSION = "0.2.1"  # the mintdim version whose output we reproduce byte for byte

SAMPLE_INDEX = "sample_index.jsonl"
UNK_INDEX = "unk_index.jsonl"
OVERFLOW_INDEX = "overflow_index.jsonl"
DUPLICATE_INDEX = "duplicate_index.jsonl"
LOSSY_INDEX = "lossy_index.jsonl"  # ours: samples whose ids do not decode to their text
REJECTED_INDEX = "rejected_index.jsonl"  # ours: rows left out under on_bad_row="skip"
# Why `truncate` skipped a dialogue record (an overflow row's "reason", ours).
CUT_REASON_CHAT = "no whole trained turn fits the largest unit"
CUT_REASON_PREFERENCE = ("no preference left after truncation: the completions are cut to "
                         "nothing or to the same tokens")
CUT_REASON_BEFORE = "no trained tokens left after truncation"  # builds before 0.2.0
CUT_REASONS = (CUT_REASON_CHAT, CUT_REASON_PREFERENCE, CUT_REASON_BEFORE)
HISTOGRAM = "histogram.json"
STATS = "stats.json"
LENGTH_FIELD = "length_field.json"
MANIFEST = "manifest.json"
EMPTY_UNIT = "EMPTY_UNIT.md"
FAILED_UNIT = "UNIT_BUILD_FAILED.md"
RECOMMENDED_SHARD_MIB = 512

NP_DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}
DTYPE_MAX = {name: int(np.iinfo(dtype).max) for name, dtype in NP_DTYPES.items()}


def unit_dir(size: int) -> str:
    return f"unit_{size}"


@functools.lru_cache(maxsize=4096)  # called for every sample's index row
def shard_name(size: int, shard: int) -> str:
    return f"unit_{size}/shard_{shard:06d}.bin"


def jsonl_row(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def json_document(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


def record_bytes(unit: int, n_segments: int, bytes_per_token: int) -> int:
    """Bytes of one record of `unit`: magic, the segment lengths, the padded payload."""
    return (1 + n_segments + unit) * bytes_per_token


def build_records(tokens: np.ndarray, lengths: np.ndarray, unit: int, magic: int,
                  pad_id: int, dtype: str) -> np.ndarray:
    """Records `[magic][len_0..len_n-1][payload padded to unit]`, one row per sample.

    `tokens` is every sample's payload concatenated in order; `lengths` is (m, n).
    A unit or length the dtype cannot hold is refused: numpy would silently wrap it.
    """
    m, n = lengths.shape
    limit = DTYPE_MAX[dtype]
    largest = max(unit, int(lengths.max()) if lengths.size else 0)
    if largest > limit:
        raise TokenDTypeCapacityError(dtype=dtype, max_value=limit, unit_size=largest)
    records = np.full((m, 1 + n + unit), pad_id, dtype=NP_DTYPES[dtype])
    records[:, 0] = magic
    records[:, 1:1 + n] = lengths
    counts = lengths.sum(axis=1)
    mask = np.arange(unit)[None, :] < counts[:, None]
    records[:, 1 + n:][mask] = tokens
    return records


def json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


# json.dumps(text, ensure_ascii=False) of a str is this, without the encoder's set-up
_string = json.encoder.encode_basestring


def _json_list(values) -> str:
    return json.dumps(values, ensure_ascii=False) if values else "[]"


def _int_list(values) -> str:
    """json.dumps of a list of ints, without the encoder's generality."""
    return f"[{', '.join(map(str, values))}]"


@functools.lru_cache(maxsize=256)
def _json_names(names: tuple) -> str:
    return json.dumps(list(names), ensure_ascii=False)


# The hot rows are formatted directly; tests check they equal json.dumps of the dict.
def sample_row(sample_id, digest, token_count, unit, source_file_json, source_line, shard, empty,
               part=None):
    """`source_file_json` is `json_string(source_file)`, computed once per file. `part`:
    which record of a dialogue split by `on_extra_turns="split"` (a key of ours, last)."""
    return (f'{{"sample_id": {sample_id}, "hash": "{digest}", "token_count": {token_count}, '
            f'"unit_size": {unit}, "source_file": {source_file_json}, '
            f'"source_line": {source_line}, "shard_path": "{shard}", '
            f'"empty_fields": {_json_names(tuple(empty)) if empty else "[]"}'
            f'{"" if part is None else f", {chr(34)}part{chr(34)}: {part}"}}}\n')


def unk_row(sample_id, digest, source_file_json, source_line, positions, fields, chars,
            part=None):
    return (f'{{"sample_id": {sample_id}, "hash": "{digest}", "source_file": {source_file_json}, '
            f'"source_line": {source_line}, "unk_count": {len(positions)}, '
            f'"unk_positions": {_int_list(positions)}, "unk_field_indices": {_int_list(fields)}, '
            f'"unk_chars": {_json_list(chars)}'
            f'{"" if part is None else f", {chr(34)}part{chr(34)}: {part}"}}}\n')


_SEGMENT_KIND = operator.itemgetter(0, 1)  # a lossy segment's (segment, kind)


def lossy_fields(lossy, names) -> str:
    """A `lossy_index.jsonl` row's keys after the source line, for a record's lossy
    segments (`round_trip`'s tuples, in segment order): their indices, names and kinds,
    and excerpts of the first one's source and decoded text. Made where the segments are
    found (the helper encoders), so the shard step only adds the record's place."""
    _, _, source, decoded = lossy[0]
    head = _lossy_head(tuple(map(_SEGMENT_KIND, lossy)), names)
    return f'{head}"source": {_string(source)}, "decoded": {_string(decoded)}'


@functools.lru_cache(maxsize=4096)
def _lossy_head(segments: tuple, names: tuple) -> str:
    """The segments, names and kinds of a lossy row, for (segment, kind) pairs: a few
    shapes repeat over a whole build."""
    return (f'"segments": {_int_list([s for s, _ in segments])}, '
            f'"segment_names": {_json_names(tuple(names[s] for s, _ in segments))}, '
            f'"kinds": {_json_names(tuple(k for _, k in segments))}, ')


def lossy_row(sample_id, source_file_json, source_line, fields: str, part=None) -> str:
    """A `lossy_index.jsonl` row; `fields` from `lossy_fields`."""
    return (f'{{"sample_id": {sample_id}, "source_file": {source_file_json}, '
            f'"source_line": {source_line}, {fields}'
            f'{"" if part is None else f", {chr(34)}part{chr(34)}: {part}"}}}\n')


def round_trip_doc(stats: dict, plan) -> dict:
    """The manifest's `round_trip` block: the build's per-sample checks (written
    records only) and the template's own findings (`template_checks`)."""
    kinds = stats.get("lossy_kinds") or {}
    return {"segments_checked": stats.get("segments_checked", 0),
            "lossy_segments": stats.get("lossy_segments", 0),
            "lossy_samples": stats.get("lossy_samples", 0),
            "kinds": {kind: int(kinds.get(kind, 0)) for kind in ROUND_TRIP_KINDS},
            "index": LOSSY_INDEX, "template": [dict(n) for n in plan.notices]}


def duplicate_row(digest, members) -> str:
    """`members`: (sample_id, source_file, source_line) in ascending sample_id."""
    return jsonl_row({"hash": digest, "count": len(members), "samples": [
        {"sample_id": s, "source_file": f, "source_line": line} for s, f, line in members]})


def histogram_doc(distribution: dict) -> str:
    return json_document({str(k): distribution[k] for k in sorted(distribution)})


def stats_doc(stats: dict, token_dtype: str, bytes_per_token: int, dup_groups: int,
              dup_samples: int) -> str:
    dist = stats["unit_distribution"]
    return json_document({
        "total_samples": stats["total_samples"], "total_tokens": stats["total_tokens"],
        "token_dtype": token_dtype, "bytes_per_token": bytes_per_token,
        "duplicate_groups": dup_groups, "duplicate_samples": dup_samples,
        "samples_with_unk": stats["samples_with_unk"], "unk_tokens": stats["unk_tokens"],
        "unit_distribution": {str(k): dist[k] for k in sorted(dist)}})


def length_field_doc(plan) -> str:
    return json_document({
        "magic": plan.magic, "sequence_template": plan.template.sequence_template,
        "length_fields": plan.template.length_fields(), "token_dtype": plan.token_dtype,
        "pad_token_id": plan.pad_id})


def manifest_doc(plan, sizes, extra: dict) -> str:
    ds = plan.dataset
    doc = {
        "pipeline": "unit-build",
        "mintdim_version": FORMAT_VERSION,
        "tokenizer": {"type": ds.tokenizer_kind, "path": ds.tokenizer_given,
                      "vocab_size": plan.vocab_size, "unk_id": plan.unk_id,
                      "pad_id": plan.pad_id},
        "token_storage": {"dtype": plan.token_dtype, "bytes_per_token": plan.bytes_per_token,
                          "magic": plan.magic},
        "sequence_template": plan.template.sequence_template,
        "length_field_metadata": LENGTH_FIELD,
        "units": {"sizes": list(sizes), "build_batch": ds.build_batch},
        "source": _source_block(plan),
        "output": {"samples_per_shard": ds.samples_per_shard},
    }
    doc.update(extra)
    return json_document(doc)


def _source_block(plan) -> dict:
    """mintdim's `source` for templated fields; a dialogue dataset's settings otherwise,
    with the date a chat template's `strftime_now` printed (fixed, so rebuilds agree)."""
    ds = plan.dataset
    files = [f.given for f in ds.files]
    if ds.dialogue is None:
        return {"files": files, "fields": [list(ds.fields)], "templates": [ds.template]}
    block = ds.dialogue.manifest_block(files)
    if plan.chat_template is not None and plan.chat_template.reads_clock:
        block["strftime_now"] = plan.chat_template.now_text
    return block


def empty_unit_notice(size: int) -> str:
    return (f"# Empty unit\n\nUnit size: {size}\n\n"
            "The build completed and assigned no sample to this unit. The directory is "
            "kept so that every declared (or added) unit size is visible on disk.\n")


def failed_unit_notice(size: int, reason: str) -> str:
    return (f"# Unit build failed\n\nUnit size: {size}\n\n"
            "The build stopped before this output was finalized; shards here may be "
            "missing or partial and there is no manifest.json.\n\n"
            f"Failure:\n\n{reason}\n")


def format_mib(nbytes: int) -> str:
    return f"{nbytes / (1024 * 1024):.1f} MiB"


def shard_progress_lines(shard: int, samples: int, nbytes: int, unit: int) -> list[str]:
    """The seed's line per closed shard, plus its warning past the recommended size."""
    lines = [f"[unit-build] shard={shard:06d} samples={samples} bytes={format_mib(nbytes)} unit={unit}"]
    if nbytes > RECOMMENDED_SHARD_MIB * 1024 * 1024:
        lines.append(f"[unit-build:warning] shard={shard:06d} size={format_mib(nbytes)} exceeds "
                     f"recommended {RECOMMENDED_SHARD_MIB} MiB.\n"
                     "Build continues because sharding is controlled by samples_per_shard.")
    return lines
