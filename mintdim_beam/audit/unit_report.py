"""The unit-build report: a finished unit-build described from its own files
(`mintdim-beam report OUT [--dest DIR]` dispatches here, `audit.report`).

Writes into DIR (default `OUT/report/`):

- `report.md`: the manifest facts and the measured ratios, each with its numerator and
  denominator, and the figures embedded with relative links;
- `samples_per_unit.png` + `.csv`  (unit_size,samples)
- `token_counts.png` + `.csv`      (token_count,samples), unit boundaries drawn in the plot
- `padding_per_unit.png` + `.csv`  (unit_size,records,tokens,pad_slots,padding_fraction)
- `unk_per_field.png` + `.csv`     (segment_index,segment_name,unk_tokens)
- chat and preference builds only: trained and context tokens, read from the shards'
  record headers (`mintdim_beam.audit.report_dialogues`, which says what it adds).

Each CSV is exactly the data its figure plots. Everything is read from the build's own
files (manifest.json, stats.json, histogram.json, length_field.json and the four JSON
Lines indices, `sample_index.jsonl` streamed line by line); shards are opened only for
the record headers of a dialogue build.
Every path may be local or an fsspec URL (all I/O goes through `storage`).

Definitions (a ratio whose denominator is 0 is `None`, printed as "n/a"):

- padding ratio = total pad slots / total payload slots, where a unit's payload slots =
  records * unit_size and its pad slots = payload slots - tokens of its records (the
  magic and length header of each record are not payload and are not counted);
- truncation ratio = tokens cut / tokens before truncation, where tokens cut = sum over
  overflow rows with action `truncate` of (original token_count in the overflow row -
  kept token_count in sample_index), and tokens before truncation = tokens written
  (sum of sample_index token_count) + tokens cut;
- skip rate = skipped samples (overflow rows with action `skip`) / (records written +
  skipped samples);
- duplicate rate = duplicate_samples / total_samples (stats.json);
- UNK token rate = unk_tokens / total_tokens; UNK sample rate = samples_with_unk /
  total_samples (stats.json).
"""
from __future__ import annotations

import json
from collections import Counter

from mintdim_beam.audit import report_dialogues as dialogues
from mintdim_beam.audit import report_round_trip as round_trip
from mintdim_beam.audit.plain_files import csv_bytes, jsonl_rows
from mintdim_beam.audit.report_rejected import markdown_section as rejected_section
from mintdim_beam.audit.report_rejected import rejected_figures
from mintdim_beam.audit.report_common import (REPORT_DIR, REPORT_MD, ReportInputError, bar_chart,
                                              md_cell, new_figure, no_data, png, ratio, share,
                                              write_report_files)
from mintdim_beam.core.errors import MintDimFileNotFoundError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt

SAMPLES_PER_UNIT = "samples_per_unit"
TOKEN_COUNTS = "token_counts"
PADDING_PER_UNIT = "padding_per_unit"
UNK_PER_FIELD = "unk_per_field"
FIGURES = (SAMPLES_PER_UNIT, TOKEN_COUNTS, PADDING_PER_UNIT, UNK_PER_FIELD)
TOP_UNK_CHARS = 10



def _read_json(out: str, name: str):
    path = storage.join(out, name)
    if not storage.exists(path):
        raise MintDimFileNotFoundError(context=f"report: the build at {out} has no {name}",
                                       missing_file=path)
    return json.loads(storage.read_bytes(path).decode("utf-8"))


def _require_manifest(out: str) -> dict:
    path = storage.join(out, fmt.MANIFEST)
    if not storage.is_file(path):
        raise MintDimFileNotFoundError(
            context=(f"report: {out} has no {fmt.MANIFEST}; it is not the output of a "
                     "completed unit-build (the manifest is written last)"),
            missing_file=path)
    return json.loads(storage.read_bytes(path).decode("utf-8"))


def compute_figures(out: str) -> dict:
    """Every figure of the report, from the build's own files (no writing)."""
    manifest = _require_manifest(out)
    stats = _read_json(out, fmt.STATS)
    histogram = {int(k): int(v) for k, v in _read_json(out, fmt.HISTOGRAM).items()}
    length_field = _read_json(out, fmt.LENGTH_FIELD)
    segments = list(length_field.get("sequence_template") or manifest.get("sequence_template") or [])

    # Overflow rows first: the truncated ids are needed while streaming sample_index.
    actions = Counter()
    truncated_original: dict[int, int] = {}
    added_sizes: list[int] = []
    for row in jsonl_rows(out, fmt.OVERFLOW_INDEX):
        actions[row["action"]] += 1
        if row["action"] == "truncate":
            truncated_original[dialogues.record_key(row)] = int(row["token_count"])
        if "new_unit_size" in row:
            added_sizes.append(int(row["new_unit_size"]))

    records = Counter()
    unit_tokens = Counter()
    token_counts = Counter()
    truncated_kept: dict[int, int] = {}
    for row in jsonl_rows(out, fmt.SAMPLE_INDEX):
        count, unit = int(row["token_count"]), int(row["unit_size"])
        records[unit] += 1
        unit_tokens[unit] += count
        token_counts[count] += 1
        sample_id = dialogues.record_key(row)  # (sample_id, part) in a split dialogue
        if sample_id in truncated_original:
            truncated_kept[sample_id] = count
    missing = sorted(set(truncated_original) - set(truncated_kept))
    if missing:
        raise ReportInputError(
            f"{fmt.OVERFLOW_INDEX} has truncate rows whose sample_id is not in "
            f"{fmt.SAMPLE_INDEX}: {missing[:10]}{' ...' if len(missing) > 10 else ''}")

    sizes = sorted(set(int(s) for s in manifest.get("units", {}).get("sizes", [])) | set(records))
    units = []
    for size in sizes:
        payload = records[size] * size
        pad = payload - unit_tokens[size]
        units.append({"unit_size": size, "records": records[size], "tokens": unit_tokens[size],
                      "payload_slots": payload, "pad_slots": pad,
                      "padding_fraction": ratio(pad, payload)})
    written_records = sum(records.values())
    written_tokens = sum(unit_tokens.values())
    payload_slots = sum(u["payload_slots"] for u in units)
    pad_slots = sum(u["pad_slots"] for u in units)

    tokens_cut = sum(truncated_original[i] - truncated_kept[i] for i in truncated_original)
    truncated_before = sum(truncated_original.values())
    tokens_before = written_tokens + tokens_cut

    skipped = actions.get("skip", 0)

    dup_groups = dup_samples = largest_group = 0
    for row in jsonl_rows(out, fmt.DUPLICATE_INDEX):
        dup_groups += 1
        dup_samples += int(row["count"])
        largest_group = max(largest_group, int(row["count"]))

    unk_by_segment = Counter()
    unk_chars = Counter()
    unk_rows = unk_index_tokens = 0
    for row in jsonl_rows(out, fmt.UNK_INDEX):
        unk_rows += 1
        unk_index_tokens += int(row["unk_count"])
        unk_by_segment.update(int(i) for i in row["unk_field_indices"])
        unk_chars.update(row.get("unk_chars", []))
    indices = sorted(set(range(len(segments))) | set(unk_by_segment))
    unk_per_field = [{"segment_index": i,
                      "segment_name": segments[i] if i < len(segments) else "?",
                      "unk_tokens": unk_by_segment[i]} for i in indices]

    total_samples = int(stats["total_samples"])
    total_tokens = int(stats["total_tokens"])
    stats_dup_samples = int(stats["duplicate_samples"])
    consistency = []

    def check(what, measured, source, expected):
        if measured != expected:
            consistency.append(f"{what}: {measured} (measured) but {source} says {expected}")

    check(f"records in {fmt.SAMPLE_INDEX}", written_records, "stats.json total_samples", total_samples)
    check(f"sum of token_count in {fmt.SAMPLE_INDEX}", written_tokens, "stats.json total_tokens",
          total_tokens)
    check(f"records per unit in {fmt.SAMPLE_INDEX}", {k: v for k, v in sorted(records.items()) if v},
          fmt.HISTOGRAM, dict(sorted(histogram.items())))
    check(f"groups in {fmt.DUPLICATE_INDEX}", dup_groups, "stats.json duplicate_groups",
          int(stats["duplicate_groups"]))
    check(f"records in {fmt.DUPLICATE_INDEX} groups", dup_samples, "stats.json duplicate_samples",
          stats_dup_samples)
    check(f"rows in {fmt.UNK_INDEX}", unk_rows, "stats.json samples_with_unk",
          int(stats["samples_with_unk"]))
    check(f"sum of unk_count in {fmt.UNK_INDEX}", unk_index_tokens, "stats.json unk_tokens",
          int(stats["unk_tokens"]))

    dialogue = dialogues.dialogue_figures(out, manifest, length_field, stats)
    consistency += dialogue["consistency"] if dialogue else []
    trip = round_trip.round_trip_figures(out, manifest, segments)
    consistency += trip["consistency"] if trip else []
    return {
        "out": out,
        "manifest": manifest,
        "dialogue": dialogue,  # trained / context tokens of a chat or preference build
        "round_trip": trip,  # the tokenizer card and the lossy samples (report_round_trip)
        "segments": segments,
        "total_samples": total_samples,
        "total_tokens": total_tokens,
        # per-unit tables
        "samples_per_unit": {u["unit_size"]: u["records"] for u in units},
        "histogram": histogram,
        "token_counts": dict(sorted(token_counts.items())),
        "units": units,
        "unk_per_field": unk_per_field,
        # padding
        "payload_slots": payload_slots,
        "pad_slots": pad_slots,
        "padding_ratio": ratio(pad_slots, payload_slots),
        # overflow
        "overflow_actions": dict(sorted(actions.items())),
        "added_unit_sizes": added_sizes,
        "truncated_samples": len(truncated_original),
        "tokens_cut": tokens_cut,
        "tokens_before_truncation": tokens_before,
        "truncation_ratio": ratio(tokens_cut, tokens_before),
        "truncated_samples_tokens_before": truncated_before,
        "truncated_samples_cut_ratio": ratio(tokens_cut, truncated_before),
        "truncated_sample_rate": ratio(len(truncated_original), written_records),
        "written_samples": written_records,
        "skipped_samples": skipped,
        "skip_rate": ratio(skipped, written_records + skipped),
        # duplicates
        "duplicate_groups": int(stats["duplicate_groups"]),
        "duplicate_samples": stats_dup_samples,
        "duplicate_rate": ratio(stats_dup_samples, total_samples),
        "duplicate_extra_copies": stats_dup_samples - int(stats["duplicate_groups"]),
        "largest_duplicate_group": largest_group,
        # UNK
        "unk_tokens": int(stats["unk_tokens"]),
        "samples_with_unk": int(stats["samples_with_unk"]),
        "unk_token_rate": ratio(int(stats["unk_tokens"]), total_tokens),
        "unk_sample_rate": ratio(int(stats["samples_with_unk"]), total_samples),
        "top_unk_chars": unk_chars.most_common(TOP_UNK_CHARS),
        "rejected": rejected_figures(out, manifest),  # on_bad_row: skip
        "consistency": consistency,
    }


# --------------------------------------------------------------------------- CSV

def _csvs(fig: dict) -> dict[str, bytes]:
    return {
        f"{SAMPLES_PER_UNIT}.csv": csv_bytes(("unit_size", "samples"), fig["samples_per_unit"].items()),
        f"{TOKEN_COUNTS}.csv": csv_bytes(("token_count", "samples"), fig["token_counts"].items()),
        f"{PADDING_PER_UNIT}.csv": csv_bytes(
            ("unit_size", "records", "tokens", "pad_slots", "padding_fraction"),
            [(u["unit_size"], u["records"], u["tokens"], u["pad_slots"], u["padding_fraction"])
             for u in fig["units"]]),
        f"{UNK_PER_FIELD}.csv": csv_bytes(
            ("segment_index", "segment_name", "unk_tokens"),
            [(r["segment_index"], r["segment_name"], r["unk_tokens"]) for r in fig["unk_per_field"]]),
        **dialogues.dialogue_csvs(fig),
        **round_trip.round_trip_csvs(fig["round_trip"]),
    }


# --------------------------------------------------------------------------- figures

def _plot_samples_per_unit(fig: dict) -> bytes:
    per_unit = fig["samples_per_unit"]
    return bar_chart(f"Records per unit (total {fig['written_samples']})",
                      [str(s) for s in per_unit], list(per_unit.values()), "#4C72B0",
                      "unit size (tokens)", "records", "no unit sizes")


def _plot_token_counts(fig: dict) -> bytes:
    import numpy as np

    figure, ax = new_figure(f"Token count per record ({fig['written_samples']} records)")
    counts = fig["token_counts"]
    sizes = [u["unit_size"] for u in fig["units"]]
    if counts:
        low, high = min(counts), max(counts)
        dense = np.zeros(high - low + 1, dtype=np.int64)
        for value, samples in counts.items():
            dense[value - low] = samples
        # One bin per integer token count: exactly the rows of token_counts.csv.
        ax.stairs(dense, np.arange(low - 0.5, high + 1.5), fill=True, color="#4C72B0")
    else:
        no_data(ax, "no records")
    for size in sizes:
        ax.axvline(size + 0.5, color="#C44E52", linestyle="--", linewidth=1)
        ax.annotate(f"unit {size}", xy=(size + 0.5, 1), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", rotation=90, va="top",
                    fontsize=8, color="#C44E52")
    ax.set_xlabel("token_count (after truncation); dashed lines: unit sizes, drawn at size + 0.5")
    ax.set_ylabel("records")
    return png(figure)


def _plot_padding(fig: dict) -> bytes:
    ratio = fig["padding_ratio"]
    title = "Padding fraction per unit (pad slots / payload slots)"
    figure, ax = new_figure(title)
    units = fig["units"]
    labels = [str(u["unit_size"]) for u in units]
    values = [u["padding_fraction"] or 0.0 for u in units]
    bars = ax.bar(labels, values, color="#55A868")
    ax.bar_label(bars, labels=["empty" if u["padding_fraction"] is None
                               else f"{u['padding_fraction']:.1%}" for u in units])
    if ratio is not None:
        ax.axhline(ratio, color="#C44E52", linestyle="--", linewidth=1,
                   label=f"all units: {ratio:.1%}")
        ax.legend(loc="upper right")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("unit size (tokens)")
    ax.set_ylabel("pad slots / payload slots")
    if not units:
        no_data(ax, "no unit sizes")
    return png(figure)


def _plot_unk(fig: dict) -> bytes:
    rows = fig["unk_per_field"]
    return bar_chart(f"UNK tokens per template segment (total {fig['unk_tokens']})",
                      [f"{r['segment_index']}: {r['segment_name']}" for r in rows],
                      [r["unk_tokens"] for r in rows], "#8172B2", "segment (index: name)",
                      "UNK tokens", "no segments", rotate=True)


def _pngs(fig: dict) -> dict[str, bytes]:
    return {f"{SAMPLES_PER_UNIT}.png": _plot_samples_per_unit(fig),
            f"{TOKEN_COUNTS}.png": _plot_token_counts(fig),
            f"{PADDING_PER_UNIT}.png": _plot_padding(fig),
            f"{UNK_PER_FIELD}.png": _plot_unk(fig), **dialogues.dialogue_pngs(fig)}


# --------------------------------------------------------------------------- markdown

def _unk_text(tok: dict) -> str:
    """The manifest's unk_id; null is a tokenizer without UNK (byte-level BPE)."""
    if "unk_id" in tok and tok["unk_id"] is None:
        return "none (the tokenizer has no UNK token: every byte is in its vocabulary)"
    return str(tok.get("unk_id"))


def _markdown(fig: dict) -> str:
    m = fig["manifest"]
    tok = m.get("tokenizer", {})
    storage_ = m.get("token_storage", {})
    units_cfg = m.get("units", {})
    source = m.get("source", {})
    added = set(fig["added_unit_sizes"])
    sizes_text = ", ".join(f"{s} (added by extend)" if s in added else str(s)
                           for s in units_cfg.get("sizes", []))
    extras = {k: v for k, v in m.items() if k not in {
        "pipeline", "mintdim_version", "tokenizer", "token_storage", "sequence_template",
        "length_field_metadata", "units", "source", "output"}}
    n = fig["total_samples"]
    lines = [
        "# Unit-build report", "",
        f"Build: `{fig['out']}`. Every number below is read or counted from this build's own "
        "files (manifest.json, stats.json, histogram.json, length_field.json, sample_index.jsonl, "
        "unk_index.jsonl, overflow_index.jsonl, duplicate_index.jsonl). \"Records\" are the "
        "samples written to shards (stats.json `total_samples`).", "",
        "## Build", "",
        f"- pipeline: `{m.get('pipeline')}`, format version (mintdim): `{m.get('mintdim_version')}`",
        f"- tokenizer: {tok.get('type')} `{tok.get('path')}`, vocab_size {tok.get('vocab_size')}, "
        f"unk_id {_unk_text(tok)}, pad_id {tok.get('pad_id')}",
        f"- token dtype: {storage_.get('dtype')} ({storage_.get('bytes_per_token')} bytes per token), "
        f"magic {storage_.get('magic')}",
        f"- unit sizes: {sizes_text}; build_batch {units_cfg.get('build_batch')}",
        f"- samples_per_shard: {m.get('output', {}).get('samples_per_shard')}",
        f"- sequence template ({len(fig['segments'])} segments): "
        + ", ".join(f"{i}: `{s}`" for i, s in enumerate(fig["segments"])),
        "- sources: " + ", ".join(f"`{f}`" for f in source.get("files", [])),
    ] + (dialogues.source_lines(source) or [
        "- fields: " + "; ".join(", ".join(f"`{x}`" for x in fs) for fs in source.get("fields", [])),
        "- templates: " + "; ".join(f"`{md_cell(t)}`" for t in source.get("templates", []))])
    for key, value in extras.items():
        lines.append(f"- {key}: `{json.dumps(value, ensure_ascii=False)}`")
    lines += ["", f"Records: {n:,}. Tokens in records (after truncation): {fig['total_tokens']:,}.", ""]

    lines += [
        "## Figures at a glance", "",
        "| figure | value (numerator / denominator) | definition |",
        "|---|---|---|",
        f"| padding ratio | {share(fig['pad_slots'], fig['payload_slots'])} | pad slots / payload "
        "slots, over all units; payload slots = records x unit_size; the per-record magic and "
        "length header are not counted |",
        f"| truncation ratio | {share(fig['tokens_cut'], fig['tokens_before_truncation'])} | tokens "
        "cut / tokens the records had before truncation (tokens in records + tokens cut) |",
        f"| tokens cut within truncated records | {share(fig['tokens_cut'], fig['truncated_samples_tokens_before'])}"
        " | tokens cut / original token_count of the truncated records only |",
        f"| truncated records | {share(fig['truncated_samples'], fig['written_samples'])} | "
        "overflow rows with action truncate / records |",
        f"| skip rate | {share(fig['skipped_samples'], fig['written_samples'] + fig['skipped_samples'])}"
        " | samples skipped for overflow / (records + skipped samples) |",
        f"| duplicate rate | {share(fig['duplicate_samples'], n)} | records in a group of 2+ "
        "identical hashes / records |",
        f"| UNK token rate | {share(fig['unk_tokens'], fig['total_tokens'])} | UNK tokens / "
        "tokens in records |",
        f"| records with UNK | {share(fig['samples_with_unk'], n)} | records with at least one "
        "UNK / records |",
        *dialogues.glance_rows(fig),
        "",
    ]

    lines += ["## Records per unit", "",
              f"![Records per unit]({SAMPLES_PER_UNIT}.png)", "",
              f"Data: [{SAMPLES_PER_UNIT}.csv]({SAMPLES_PER_UNIT}.csv) (unit_size,samples); "
              f"the counts sum to {fig['written_samples']:,} records.", "",
              "| unit size | records | share of records |", "|---:|---:|---:|"]
    for size, count in fig["samples_per_unit"].items():
        lines.append(f"| {size} | {count:,} | {share(count, fig['written_samples'])} |")
    lines.append("")

    counts = fig["token_counts"]
    lines += ["## Token counts", "",
              f"![Token count distribution]({TOKEN_COUNTS}.png)", "",
              f"Data: [{TOKEN_COUNTS}.csv]({TOKEN_COUNTS}.csv) (token_count,samples), one row per "
              "distinct token_count of sample_index.jsonl (after truncation), one plot bin per "
              "integer. Dashed lines mark the unit sizes at size + 0.5: a record goes to the "
              "first unit whose line lies to its right."]
    if counts:
        lines.append(f"Token counts range from {min(counts):,} to {max(counts):,} over "
                     f"{fig['written_samples']:,} records ({len(counts):,} distinct values).")
    lines.append("")

    lines += ["## Padding per unit", "",
              f"![Padding fraction per unit]({PADDING_PER_UNIT}.png)", "",
              f"Data: [{PADDING_PER_UNIT}.csv]({PADDING_PER_UNIT}.csv) "
              "(unit_size,records,tokens,pad_slots,padding_fraction); padding_fraction = pad_slots "
              "/ (records x unit_size), empty for a unit without records.", "",
              "| unit size | records | tokens | payload slots | pad slots | padding fraction |",
              "|---:|---:|---:|---:|---:|---:|"]
    for u in fig["units"]:
        lines.append(f"| {u['unit_size']} | {u['records']:,} | {u['tokens']:,} | "
                     f"{u['payload_slots']:,} | {u['pad_slots']:,} | "
                     f"{share(u['pad_slots'], u['payload_slots'])} |")
    lines.append(f"| all | {fig['written_samples']:,} | {fig['total_tokens']:,} | "
                 f"{fig['payload_slots']:,} | {fig['pad_slots']:,} | "
                 f"{share(fig['pad_slots'], fig['payload_slots'])} |")
    lines.append("")

    actions = fig["overflow_actions"]
    lines += ["## Overflow", "",
              "Rows of overflow_index.jsonl by action: "
              + (", ".join(f"{a} {c:,}" for a, c in actions.items()) if actions else "none") + ".", ""]
    if fig["truncated_samples"]:
        lines.append(f"- truncate: {fig['truncated_samples']:,} records kept "
                     f"{fig['truncated_samples_tokens_before'] - fig['tokens_cut']:,} of their "
                     f"{fig['truncated_samples_tokens_before']:,} original tokens; "
                     f"{fig['tokens_cut']:,} tokens cut.")
    if fig["skipped_samples"]:
        lines.append(f"- skip: {fig['skipped_samples']:,} samples were not written (no record, "
                     "not in stats or duplicates).")
    if fig["added_unit_sizes"]:
        lines.append("- extend: unit sizes added: "
                     + ", ".join(str(s) for s in fig["added_unit_sizes"]) + ".")
    lines.append("")

    lines += ["## Duplicates", "",
              f"{fig['duplicate_groups']:,} groups of records sharing one hash hold "
              f"{fig['duplicate_samples']:,} of {n:,} records "
              f"({share(fig['duplicate_samples'], n)}); "
              f"{fig['duplicate_extra_copies']:,} of them are copies beyond the first of their group. "
              f"Largest group: {fig['largest_duplicate_group']:,} records.", ""]

    lines += ["## UNK tokens", "",
              f"![UNK tokens per segment]({UNK_PER_FIELD}.png)", "",
              f"Data: [{UNK_PER_FIELD}.csv]({UNK_PER_FIELD}.csv) "
              "(segment_index,segment_name,unk_tokens), counted from unk_field_indices in "
              f"unk_index.jsonl. {fig['unk_tokens']:,} UNK tokens of {fig['total_tokens']:,} "
              f"tokens ({share(fig['unk_tokens'], fig['total_tokens'])}); "
              f"{fig['samples_with_unk']:,} of {n:,} records have at least one "
              f"({share(fig['samples_with_unk'], n)}).", "",
              "| segment | name | UNK tokens | share of UNK tokens |", "|---:|---|---:|---:|"]
    for r in fig["unk_per_field"]:
        lines.append(f"| {r['segment_index']} | `{r['segment_name']}` | {r['unk_tokens']:,} | "
                     f"{share(r['unk_tokens'], fig['unk_tokens'])} |")
    lines.append("")
    if fig["top_unk_chars"]:
        lines += [f"Most frequent UNK source texts (unk_chars, top {TOP_UNK_CHARS}):", "",
                  "| text | UNK tokens |", "|---|---:|"]
        for text, count in fig["top_unk_chars"]:
            lines.append(f"| `{md_cell(text)}` | {count:,} |")
        lines.append("")

    lines += dialogues.markdown_section(fig)
    lines += round_trip.markdown_section(fig["round_trip"], n)
    lines += rejected_section(fig.get("rejected"))
    lines += ["## Consistency of the build's files", ""]
    if fig["consistency"]:
        lines += [f"- {item}" for item in fig["consistency"]]
    else:
        lines.append("sample_index.jsonl, histogram.json, duplicate_index.jsonl and "
                     "unk_index.jsonl agree with stats.json on every count above.")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- API

def write_unit_report(out: str, dest: str | None = None) -> dict:
    """Write report.md, the four figures and their CSVs into `dest` (default OUT/report).

    Returns the computed figures: the ratios (`padding_ratio`, `truncation_ratio`,
    `skip_rate`, `duplicate_rate`, `unk_token_rate`, `unk_sample_rate`, ...) with their
    numerators and denominators, the per-unit tables (`samples_per_unit`, `units`,
    `token_counts`, `unk_per_field`), plus `dest` and `files` (names written).
    Raises MintDimFileNotFoundError if OUT has no manifest.json.
    """
    out = storage.resolve(out)
    dest = storage.resolve(dest) if dest else storage.join(out, REPORT_DIR)
    figures = compute_figures(out)
    files = {**_csvs(figures), **_pngs(figures)}
    files[REPORT_MD] = _markdown(figures).encode("utf-8")  # last: written after its figures
    return write_report_files(dest, files, figures)
