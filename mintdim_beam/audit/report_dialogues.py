"""The dialogue part of `mintdim-beam report`: trained and context tokens of a chat or
preference build (manifest `source.type` "chat" or "preference").

What a trainer learns from is the `trained` segments (assistant turns; both completions
of a preference pair), everything else is context it only reads: length_field.json
gives each segment's kind, and the records' own length headers give each segment's
token count. So, unlike the rest of the report, this part opens the shards, but reads
only the header slots of each record (magic and lengths), in record-aligned chunks.

Adds to the report of a dialogue build (a templated build's report is unchanged):

- `tokens_per_segment.csv`  (segment_index,segment_name,kind,tokens)
- `trained_per_unit.png` + `.csv`
  (unit_size,records,trained_tokens,context_tokens,literal_tokens,trained_fraction)
- report.md: the source settings instead of fields and templates, two rows in the
  figures table, and a section with the totals, the per-unit and per-segment tables,
  split dialogues (records per source line) and the dialogue skips by reason.

Definitions: trained fraction = trained tokens / all tokens of the records (trained +
context + literal, i.e. stats.json total_tokens); context tokens per trained token =
context tokens / trained tokens.
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

from mintdim_beam.audit.plain_files import csv_bytes, jsonl_rows
from mintdim_beam.audit.report_common import new_figure, png, ratio, share
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt

DIALOGUE_KINDS = ("chat", "preference")
KINDS = ("trained", "context", "literal")
TOKENS_PER_SEGMENT = "tokens_per_segment"
TRAINED_PER_UNIT = "trained_per_unit"
CHUNK_RECORDS = 1 << 14


def record_key(row: dict):
    """A record's key in the index files: sample_id, or (sample_id, part) when split."""
    sid = int(row["sample_id"])
    return sid if row.get("part") is None else (sid, int(row["part"]))




def _header_sums(path: str, n: int, unit: int, dtype, kinds: list[str]):
    """(records, per-segment token sums, records without a trained token) of a shard,
    from the record headers only."""
    width = 1 + n + unit
    rec_bytes = width * dtype.itemsize
    trained = np.array([k == "trained" for k in kinds], dtype=bool)
    records, sums, untrained = 0, np.zeros(n, dtype=np.int64), 0
    with storage.open_read(path) as handle:
        while True:
            data = handle.read(CHUNK_RECORDS * rec_bytes)
            count = len(data) // rec_bytes
            if not count:
                break
            lengths = np.frombuffer(data[:count * rec_bytes], dtype=dtype).reshape(
                count, width)[:, 1:1 + n].astype(np.int64)
            sums += lengths.sum(axis=0)
            untrained += int(np.count_nonzero(lengths[:, trained].sum(axis=1) == 0))
            records += count
    return records, sums, untrained


def dialogue_figures(out: str, manifest: dict, length_field: dict, stats: dict):
    """The trained / context figures of a dialogue build; None for a templated build."""
    source = manifest.get("source") or {}
    if source.get("type") not in DIALOGUE_KINDS:
        return None
    entries = length_field.get("length_fields") or []
    names = [e.get("name") for e in entries]
    kinds = [e.get("kind") if e.get("kind") in KINDS else "context" for e in entries]
    n = len(entries)
    dtype = fmt.NP_DTYPES[length_field.get("token_dtype")
                          or manifest.get("token_storage", {}).get("dtype")]
    per_shard = int(manifest.get("output", {}).get("samples_per_shard") or 1)
    histogram = {int(k): int(v) for k, v in
                 json.loads(storage.read_bytes(storage.join(out, fmt.HISTOGRAM))).items()}
    consistency = []
    segment_tokens = np.zeros(n, dtype=np.int64)
    units, untrained = [], 0
    for size in sorted(set(int(s) for s in manifest.get("units", {}).get("sizes", []))
                       | set(histogram)):
        records, sums = 0, np.zeros(n, dtype=np.int64)
        for k in range(-(-histogram.get(size, 0) // per_shard)):
            path = storage.join(out, fmt.shard_name(size, k))
            if not storage.exists(path):
                consistency.append(f"{fmt.shard_name(size, k)} is missing (histogram.json "
                                   f"gives unit_{size} {histogram[size]} records)")
                continue
            got, shard_sums, none = _header_sums(path, n, size, dtype, kinds)
            records, sums, untrained = records + got, sums + shard_sums, untrained + none
        segment_tokens += sums
        by_kind = {kind: int(sums[[k == kind for k in kinds]].sum()) for kind in KINDS}
        units.append({"unit_size": size, "records": records, **by_kind,
                      "trained_fraction": ratio(by_kind["trained"], int(sums.sum()))})
    totals = {kind: sum(u[kind] for u in units) for kind in KINDS}
    all_tokens = sum(totals.values())
    if all_tokens != int(stats.get("total_tokens", all_tokens)):
        consistency.append(f"segment lengths in the shards' record headers: {all_tokens} "
                           f"(measured) but stats.json total_tokens says {stats['total_tokens']}")

    parts_per_line = Counter()
    for row in jsonl_rows(out, fmt.SAMPLE_INDEX):
        parts_per_line[(row["source_file"], row["sample_id"])] += 1
    skips = Counter()
    for row in jsonl_rows(out, fmt.OVERFLOW_INDEX):
        if row.get("action") == "skip":
            skips[row["reason"] if "reason" in row else
                  "more trained turns than max_turns" if "trained_turns" in row else
                  "line over --max_line_bytes" if "line_bytes" in row else
                  "overflow (on_overflow skip)"] += 1
    return {
        "type": source["type"],
        "segments": [{"segment_index": i, "segment_name": names[i], "kind": kinds[i],
                      "tokens": int(segment_tokens[i])} for i in range(n)],
        "units": units,
        "trained_tokens": totals["trained"],
        "context_tokens": totals["context"],
        "literal_tokens": totals["literal"],
        "tokens": all_tokens,
        "trained_fraction": ratio(totals["trained"], all_tokens),
        "context_per_trained": ratio(totals["context"], totals["trained"]),
        "records_without_trained": untrained,
        "lines": len(parts_per_line),
        "split_lines": sum(1 for c in parts_per_line.values() if c > 1),
        "most_records_per_line": max(parts_per_line.values(), default=0),
        "skips": dict(sorted(skips.items())),
        "consistency": consistency,
    }


# --------------------------------------------------------------------------- files

def dialogue_csvs(fig: dict) -> dict[str, bytes]:
    d = fig.get("dialogue")
    if not d:
        return {}
    return {
        f"{TOKENS_PER_SEGMENT}.csv": csv_bytes(
            ("segment_index", "segment_name", "kind", "tokens"),
            [(s["segment_index"], s["segment_name"], s["kind"], s["tokens"])
             for s in d["segments"]]),
        f"{TRAINED_PER_UNIT}.csv": csv_bytes(
            ("unit_size", "records", "trained_tokens", "context_tokens", "literal_tokens",
             "trained_fraction"),
            [(u["unit_size"], u["records"], u["trained"], u["context"], u["literal"],
              u["trained_fraction"]) for u in d["units"]]),
    }


def dialogue_pngs(fig: dict) -> dict[str, bytes]:
    d = fig.get("dialogue")
    if not d:
        return {}
    figure, ax = new_figure(
        f"Trained and context tokens per unit (trained: "
        f"{'n/a' if d['trained_fraction'] is None else format(d['trained_fraction'], '.1%')})")
    labels = [str(u["unit_size"]) for u in d["units"]]
    bottom = np.zeros(len(labels))
    for kind, color in zip(KINDS, ("#C44E52", "#4C72B0", "#8C8C8C")):
        values = np.array([u[kind] for u in d["units"]], dtype=float)
        if kind != "literal" or values.any():
            ax.bar(labels, values, bottom=bottom, color=color, label=kind)
        bottom += values
    ax.set_xlabel("unit size (tokens)")
    ax.set_ylabel("tokens (from the records' segment lengths)")
    if labels:
        ax.legend(loc="upper right")
    return {f"{TRAINED_PER_UNIT}.png": png(figure)}


# --------------------------------------------------------------------------- markdown

def source_lines(source: dict) -> list[str] | None:
    """The report's lines for a dialogue source's settings (None: a templated source)."""
    if source.get("type") not in DIALOGUE_KINDS:
        return None
    settings = {k: v for k, v in source.items() if k not in ("files", "type")}
    return [f"- source type: {source['type']}; "
            + ", ".join(f"{k} `{json.dumps(v, ensure_ascii=False)}`" for k, v in settings.items())]


def glance_rows(fig: dict) -> list[str]:
    d = fig.get("dialogue")
    if not d:
        return []
    return [f"| trained tokens | {share(d['trained_tokens'], d['tokens'])} | tokens of trained "
            "segments / all tokens of the records (shards' segment lengths) |",
            "| context tokens per trained token | "
            + ("n/a" if d["context_per_trained"] is None else f"{d['context_per_trained']:.3f}")
            + f" ({d['context_tokens']:,} / {d['trained_tokens']:,}) | context tokens / "
            "trained tokens |"]


def markdown_section(fig: dict) -> list[str]:
    d = fig.get("dialogue")
    if not d:
        return []
    learned = "the assistant turns" if d["type"] == "chat" else "chosen and rejected"
    lines = ["## Trained and context tokens", "",
             f"Counted from the segment lengths in every record's header (the shards), with "
             f"each segment's kind from length_field.json: trained segments are what a "
             f"trainer learns from ({learned}), "
             "context segments are only read, literal ones are bos / eos.", "",
             f"- trained: {share(d['trained_tokens'], d['tokens'])} of the tokens",
             f"- context: {share(d['context_tokens'], d['tokens'])}",
             f"- literal: {share(d['literal_tokens'], d['tokens'])}",
             f"- records without a trained token: {d['records_without_trained']:,}", "",
             f"![Trained and context tokens per unit]({TRAINED_PER_UNIT}.png)", "",
             f"Data: [{TRAINED_PER_UNIT}.csv]({TRAINED_PER_UNIT}.csv) and "
             f"[{TOKENS_PER_SEGMENT}.csv]({TOKENS_PER_SEGMENT}.csv).", "",
             "| unit size | records | trained | context | literal | trained fraction |",
             "|---:|---:|---:|---:|---:|---:|"]
    for u in d["units"]:
        lines.append(f"| {u['unit_size']} | {u['records']:,} | {u['trained']:,} | "
                     f"{u['context']:,} | {u['literal']:,} | "
                     f"{share(u['trained'], u['trained'] + u['context'] + u['literal'])} |")
    lines.append(f"| all | {sum(u['records'] for u in d['units']):,} | {d['trained_tokens']:,} | "
                 f"{d['context_tokens']:,} | {d['literal_tokens']:,} | "
                 f"{share(d['trained_tokens'], d['tokens'])} |")
    lines += ["", "| segment | name | kind | tokens | share of tokens |", "|---:|---|---|---:|---:|"]
    for s in d["segments"]:
        lines.append(f"| {s['segment_index']} | `{s['segment_name']}` | {s['kind']} | "
                     f"{s['tokens']:,} | {share(s['tokens'], d['tokens'])} |")
    lines.append("")
    if d["split_lines"]:
        lines += [f"Split dialogues: {d['split_lines']:,} of {d['lines']:,} source lines with "
                  f"records gave more than one record (at most {d['most_records_per_line']:,}; "
                  "sample_index.jsonl `part`).", ""]
    if d["skips"]:
        lines += ["Skipped (overflow_index.jsonl, action skip) by reason: "
                  + ", ".join(f"{reason} {count:,}" for reason, count in d["skips"].items())
                  + ".", ""]
    return lines
