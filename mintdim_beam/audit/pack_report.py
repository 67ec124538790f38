"""`mintdim-beam report OUT [--dest DIR]` for a pack-build (manifest.json says
`"pipeline": "pack-build"`): the token stream described from its own files.

Writes into DIR (default `OUT/report/`), like the unit-build report
(`mintdim_beam.audit.report`, whose figure and table helpers it uses):

- `report.md`: the manifest facts (documents, tokens, empty documents, shards, dtype,
  EOD, seed, ...), the document-length distribution, tokens and documents per source
  file and per shard, and whether the files agree with the manifest;
- `document_lengths.png` + `.csv`  (length_min,length_max,documents,tokens): documents
  per log2 length bin [2^k, 2^(k+1) - 1], every bin from the shortest document's to the
  longest's (empty ones included, so the rows are exactly the plotted bars);
- `tokens_per_source.png` + `.csv` (file,documents,tokens,empty_documents)
- `tokens_per_shard.png` + `.csv`  (shard,documents,tokens,bin_bytes)

A document's length is its sequence's length in the `.idx` (tokens written for it: the
document's tokens, the BOS when the manifest has a bos_id, and the EOD), so the lengths
sum to the manifest's `tokens`. Lengths are read from every shard's `.idx` (one shard at
a time); documents and tokens per source are counted from the provenance `.csv.gz` rows
(streamed); empty documents (lines whose text gave no token, never written) come from the
manifest, the only place they are recorded. Percentiles are nearest-rank: the p-th is
the smallest length at least p% of the documents do not exceed.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import posixpath
from collections import Counter

import numpy as np

from mintdim_beam.audit.plain_files import csv_bytes
from mintdim_beam.audit.report_rejected import markdown_section as rejected_section
from mintdim_beam.audit.report_rejected import rejected_figures
from mintdim_beam.audit.report_common import (REPORT_DIR, REPORT_MD, ReportInputError, bar_chart,
                                              md_cell, new_figure, no_data, png, share,
                                              write_report_files)
from mintdim_beam.core.errors import MintDimFileNotFoundError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import megatron
from mintdim_beam.core.formats import mintdim as fmt

PIPELINE = "pack-build"
DOC_LENGTHS = "document_lengths"
PER_SOURCE = "tokens_per_source"
PER_SHARD = "tokens_per_shard"
FIGURES = (DOC_LENGTHS, PER_SOURCE, PER_SHARD)
PERCENTILES = (50, 90, 99)


def is_pack_build(out: str) -> bool:
    """Whether OUT's manifest.json (if any) is a pack-build's."""
    path = storage.join(out, fmt.MANIFEST)
    try:
        if not storage.is_file(path):
            return False
        doc = json.loads(storage.read_bytes(path).decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("pipeline") == PIPELINE


# --------------------------------------------------------------------------- reading

def _read_idx(out: str, name: str) -> megatron.Index:
    path = storage.join(out, name + ".idx")
    if not storage.exists(path):
        raise MintDimFileNotFoundError(context=f"report: the pack-build at {out} has no "
                                       f"{name}.idx, listed in its manifest.json",
                                       missing_file=path)
    try:
        return megatron.read_idx(storage.read_bytes(path))
    except ValueError as exc:
        raise ReportInputError(f"{name}.idx: {exc}") from None


def _provenance_rows(out: str, name: str):
    """(src, tokens) per row of a shard's provenance, streamed; absent file: no rows."""
    path = storage.join(out, name + ".csv.gz")
    if not storage.exists(path):
        return
    with storage.open_read(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped, \
            io.TextIOWrapper(unzipped, encoding="utf-8", newline="") as text:
        for line, row in enumerate(csv.reader(text), 1):
            if len(row) != 5:
                raise ReportInputError(f"{name}.csv.gz row {line} has {len(row)} fields, not 5")
            yield row[3], int(row[1]) - int(row[0])


def _log2_bins(counts: dict[int, int]) -> list[dict]:
    """Documents and tokens per bin [2^k, 2^(k+1) - 1], from the shortest's bin to the
    longest's."""
    if not counts:
        return []
    low = int(min(counts)).bit_length() - 1
    high = int(max(counts)).bit_length() - 1
    bins = [{"length_min": 1 << k, "length_max": (1 << (k + 1)) - 1, "documents": 0, "tokens": 0}
            for k in range(low, high + 1)]
    for length, docs in counts.items():
        b = bins[int(length).bit_length() - 1 - low]
        b["documents"] += docs
        b["tokens"] += length * docs
    return bins


def _length_stats(counts: dict[int, int]) -> dict:
    if not counts:
        return {}
    lengths = np.array(sorted(counts), dtype=np.int64)
    docs = np.array([counts[v] for v in lengths.tolist()], dtype=np.int64)
    total = int(docs.sum())
    cumulative = np.cumsum(docs)
    stats = {"min": int(lengths[0]), "max": int(lengths[-1]),
             "mean": float((lengths * docs).sum() / total)}
    for p in PERCENTILES:
        rank = -(-p * total // 100)  # ceil(p% of the documents), at least 1
        stats[f"p{p}"] = int(lengths[np.searchsorted(cumulative, max(1, rank))])
    return stats


def compute_pack_figures(out: str) -> dict:
    """Every figure of a pack-build's report, from its own files (no writing)."""
    path = storage.join(out, fmt.MANIFEST)
    if not storage.is_file(path):
        raise MintDimFileNotFoundError(context=f"report: {out} has no {fmt.MANIFEST}",
                                       missing_file=path)
    manifest = json.loads(storage.read_bytes(path).decode("utf-8"))
    listed_sources = [s["file"] for s in manifest.get("sources", [])]
    empty = {s["file"]: int(s.get("empty_documents", 0)) for s in manifest.get("sources", [])}

    counts: Counter = Counter()
    shards = []
    source_docs: Counter = Counter()
    source_tokens: Counter = Counter()
    for entry in manifest.get("shards", []):
        name = entry["name"]
        index = _read_idx(out, name)
        lengths = index.lengths.astype(np.int64)
        values, docs = np.unique(lengths, return_counts=True)
        counts.update(dict(zip(values.tolist(), docs.tolist())))
        bin_path = storage.join(out, name + ".bin")
        shards.append({"shard": name, "documents": int(lengths.size),
                       "tokens": int(lengths.sum()),
                       "bin_bytes": storage.size(bin_path) if storage.exists(bin_path) else None})
        for src, tokens in _provenance_rows(out, name):
            source_docs[src] += 1
            source_tokens[src] += tokens
    names = listed_sources + sorted(set(source_docs) - set(listed_sources))
    sources = [{"file": f, "documents": source_docs[f], "tokens": source_tokens[f],
                "empty_documents": empty.get(f)} for f in names]
    documents = sum(counts.values())
    tokens = sum(length * docs for length, docs in counts.items())

    consistency = []

    def check(what, measured, source, expected):
        if measured != expected:
            consistency.append(f"{what}: {measured} (measured) but {source} says {expected}")

    check("documents (sequences in the .idx files)", documents, "manifest.json documents",
          manifest.get("documents"))
    check("tokens (sum of the .idx lengths)", tokens, "manifest.json tokens", manifest.get("tokens"))
    check("provenance rows", sum(source_docs.values()), "the .idx files", documents)
    check("tokens in provenance rows", sum(source_tokens.values()), "the .idx files", tokens)
    for s, listed in zip(shards, manifest.get("shards", [])):
        for key in ("documents", "tokens", "bin_bytes"):
            check(f"{s['shard']} {key}", s[key], "manifest.json shards", listed.get(key))
    by_file = {s["file"]: s for s in manifest.get("sources", [])}
    for s in sources:
        listed = by_file.get(s["file"])
        if listed is None:
            consistency.append(f"provenance names source {s['file']!r}, which manifest.json "
                               "sources does not list")
            continue
        for key in ("documents", "tokens"):
            check(f"source {s['file']!r} {key} (provenance rows)", s[key],
                  "manifest.json sources", listed.get(key))
    check("empty documents of the sources", sum(v or 0 for v in empty.values()),
          "manifest.json empty_documents", manifest.get("empty_documents"))

    return {
        "out": out,
        "manifest": manifest,
        "documents": documents,
        "tokens": tokens,
        "empty_documents": manifest.get("empty_documents"),
        "length_counts": dict(sorted(counts.items())),
        "length_bins": _log2_bins(counts),
        "length_stats": _length_stats(counts),
        "sources": sources,
        "shards": shards,
        "rejected": rejected_figures(out, manifest),  # on_bad_row: skip
        "consistency": consistency,
    }


# --------------------------------------------------------------------------- CSV, figures

def _csvs(fig: dict) -> dict[str, bytes]:
    return {
        f"{DOC_LENGTHS}.csv": csv_bytes(
            ("length_min", "length_max", "documents", "tokens"),
            [(b["length_min"], b["length_max"], b["documents"], b["tokens"])
             for b in fig["length_bins"]]),
        f"{PER_SOURCE}.csv": csv_bytes(
            ("file", "documents", "tokens", "empty_documents"),
            [(s["file"], s["documents"], s["tokens"], s["empty_documents"])
             for s in fig["sources"]]),
        f"{PER_SHARD}.csv": csv_bytes(
            ("shard", "documents", "tokens", "bin_bytes"),
            [(s["shard"], s["documents"], s["tokens"], s["bin_bytes"]) for s in fig["shards"]]),
    }


def _plot_lengths(fig: dict) -> bytes:
    figure, ax = new_figure(f"Document length ({fig['documents']:,} documents, log2 bins)")
    bins = fig["length_bins"]
    if bins:
        edges = [b["length_min"] for b in bins] + [bins[-1]["length_max"] + 1]
        ax.stairs([b["documents"] for b in bins], edges, fill=True, color="#4C72B0")
        ax.set_xscale("log", base=2)
        stats = fig["length_stats"]
        ax.axvline(stats["p50"], color="#C44E52", linestyle="--", linewidth=1,
                   label=f"median {stats['p50']:,}")
        ax.legend(loc="upper right")
    else:
        no_data(ax, "no documents")
    ax.set_xlabel("tokens per document (its .idx sequence: the document's tokens and the EOD)")
    ax.set_ylabel("documents")
    return png(figure)


def _plot_sources(fig: dict) -> bytes:
    rows = fig["sources"]
    return bar_chart(f"Tokens per source file (total {fig['tokens']:,})",
                      [f"{i}: {posixpath.basename(s['file'].rstrip('/'))}" for i, s in enumerate(rows)],
                      [s["tokens"] for s in rows], "#55A868", "source file (index: name)",
                      "tokens (EOD included)", "no source files", rotate=True)


def _plot_shards(fig: dict) -> bytes:
    figure, ax = new_figure(f"Tokens per shard ({len(fig['shards'])} shards)")
    rows = fig["shards"]
    ax.bar([s["shard"].removeprefix("shard_") for s in rows], [s["tokens"] for s in rows],
           color="#8172B2")
    target = fig["manifest"].get("shard_tokens")
    if rows and isinstance(target, int):
        ax.axhline(target, color="#C44E52", linestyle="--", linewidth=1,
                   label=f"shard_tokens {target:,}")
        ax.legend(loc="lower right")
    if not rows:
        no_data(ax, "no shards")
    ax.set_xlabel("shard")
    ax.set_ylabel("tokens (EOD included)")
    ax.tick_params(axis="x", labelrotation=90 if len(rows) > 20 else 0)
    return png(figure)


def _pngs(fig: dict) -> dict[str, bytes]:
    return {f"{DOC_LENGTHS}.png": _plot_lengths(fig), f"{PER_SOURCE}.png": _plot_sources(fig),
            f"{PER_SHARD}.png": _plot_shards(fig)}


# --------------------------------------------------------------------------- markdown

def _markdown(fig: dict) -> str:
    m = fig["manifest"]
    tok = m.get("tokenizer", {})
    eod = m.get("eod", {})
    source = m.get("source", {})
    n, tokens = fig["documents"], fig["tokens"]
    empty = fig["empty_documents"]
    lines = [
        "# Pack-build report", "",
        f"Build: `{fig['out']}`. Every number below is read or counted from this build's own "
        "files: manifest.json, each shard's `.idx` (document lengths) and `.csv.gz` "
        "(provenance: documents and tokens per source file). A document's length is its "
        "sequence in the `.idx`: its tokens plus the EOD"
        + (" and the BOS" if m.get("bos_id") is not None else "") + ".", "",
        "## Build", "",
        f"- pipeline: `{m.get('pipeline')}`, mintdim-beam {m.get('mintdim_beam_version')}, "
        f"format `{m.get('format')}`",
        f"- documents: {n:,}; tokens: {tokens:,} (EOD included); empty documents (no token, "
        f"not written): {empty if empty is None else format(empty, ',')}",
        f"- shards: {len(fig['shards'])} (shard_tokens {m.get('shard_tokens')})",
        f"- dtype: {m.get('dtype')} (Megatron code {m.get('dtype_code')})",
        f"- EOD: id {eod.get('id')}, token `{md_cell(eod.get('token'))}`, from {eod.get('source')}",
        f"- BOS: {'none' if m.get('bos_id') is None else 'id ' + str(m.get('bos_id'))}",
        f"- seed: {m.get('seed')}",
        f"- tokenizer: {tok.get('type')} `{tok.get('file')}`"
        + (f" (config `{tok.get('config')}`)" if tok.get("config") else "")
        + f", vocab_size {tok.get('vocab_size')}",
        "- sources: " + ", ".join(f"`{f}`" for f in source.get("files", [])),
        "- fields: " + "; ".join(", ".join(f"`{x}`" for x in fs) for fs in source.get("fields", [])),
        "- templates: " + "; ".join(f"`{md_cell(t)}`" for t in source.get("templates", [])),
        f"- order: {m.get('order')}",
        "",
    ]

    stats, bins = fig["length_stats"], fig["length_bins"]
    lines += ["## Document lengths", "",
              f"![Document length distribution]({DOC_LENGTHS}.png)", "",
              f"Data: [{DOC_LENGTHS}.csv]({DOC_LENGTHS}.csv) (length_min,length_max,documents,"
              "tokens), one row per log2 bin [2^k, 2^(k+1) - 1] from the shortest document's "
              f"bin to the longest's; the documents sum to {n:,}.", ""]
    if stats:
        lines += [f"Lengths range from {stats['min']:,} to {stats['max']:,} tokens; mean "
                  f"{stats['mean']:,.1f}; median (p50) {stats['p50']:,}, p90 {stats['p90']:,}, "
                  f"p99 {stats['p99']:,} (nearest rank).", ""]
    lines += ["| length (tokens) | documents | share of documents | tokens | share of tokens |",
              "|---|---:|---:|---:|---:|"]
    for b in bins:
        lines.append(f"| {b['length_min']:,}-{b['length_max']:,} | {b['documents']:,} | "
                     f"{share(b['documents'], n)} | {b['tokens']:,} | {share(b['tokens'], tokens)} |")
    lines.append("")

    lines += ["## Sources", "",
              f"![Tokens per source file]({PER_SOURCE}.png)", "",
              f"Data: [{PER_SOURCE}.csv]({PER_SOURCE}.csv) (file,documents,tokens,"
              "empty_documents); documents and tokens counted from the provenance rows, empty "
              "documents from manifest.json.", "",
              "| # | file | documents | share of documents | tokens | share of tokens | "
              "empty documents |", "|---:|---|---:|---:|---:|---:|---:|"]
    for i, s in enumerate(fig["sources"]):
        lines.append(f"| {i} | `{md_cell(s['file'])}` | {s['documents']:,} | "
                     f"{share(s['documents'], n)} | {s['tokens']:,} | "
                     f"{share(s['tokens'], tokens)} | "
                     f"{'' if s['empty_documents'] is None else format(s['empty_documents'], ',')} |")
    lines.append("")

    lines += ["## Shards", "",
              f"![Tokens per shard]({PER_SHARD}.png)", "",
              f"Data: [{PER_SHARD}.csv]({PER_SHARD}.csv) (shard,documents,tokens,bin_bytes); "
              "shards are ranges of the documents' seeded hash, cut where the running token "
              f"count crosses shard_tokens ({m.get('shard_tokens')}).", "",
              "| shard | documents | tokens | .bin bytes |", "|---|---:|---:|---:|"]
    for s in fig["shards"]:
        size = "missing" if s["bin_bytes"] is None else f"{s['bin_bytes']:,}"
        lines.append(f"| {s['shard']} | {s['documents']:,} | {s['tokens']:,} | {size} |")
    lines.append("")

    lines += rejected_section(fig.get("rejected"))
    lines += ["## Consistency of the build's files", ""]
    if fig["consistency"]:
        lines += [f"- {item}" for item in fig["consistency"]]
    else:
        lines.append("The .idx files, the provenance rows and the .bin sizes agree with "
                     "manifest.json on every count above (`mintdim-beam verify` checks the "
                     "tokens themselves).")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- API

def write_pack_report(out: str, dest: str | None = None) -> dict:
    """Write report.md, the three figures and their CSVs into `dest` (default
    OUT/report). Returns the computed figures (`documents`, `tokens`, `length_bins`,
    `length_stats`, `sources`, `shards`, `consistency`, ...) plus `dest`, `report` and
    `files` (names written)."""
    out = storage.resolve(out)
    dest = storage.resolve(dest) if dest else storage.join(out, REPORT_DIR)
    figures = compute_pack_figures(out)
    files = {**_csvs(figures), **_pngs(figures)}
    files[REPORT_MD] = _markdown(figures).encode("utf-8")  # last: written after its figures
    return write_report_files(dest, files, figures)
