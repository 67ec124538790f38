"""The report's tokenizer card and round-trip section: what the tokenizer is and cannot
represent (the manifest's `tokenizer_card`), what the template's own text became
(`round_trip.template`), and the lossy samples this build met (`lossy_index.jsonl`):
per segment and kind, with the first examples."""
from __future__ import annotations

from collections import Counter

from mintdim_beam.audit.plain_files import csv_bytes, jsonl_rows
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.render.template_checks import notice_text
from mintdim_beam.core.tokenizer.round_trip import KINDS

EXAMPLES = 5
LOSSY_CSV = "lossy_per_segment"


def round_trip_figures(out: str, manifest: dict, segments: list) -> dict | None:
    """The section's figures, None for a build without the check (mintdim 0.2.1, ours
    before 0.2.0)."""
    block = manifest.get("round_trip")
    if block is None:
        return None
    per_segment: Counter = Counter()
    examples, rows = [], 0
    for row in jsonl_rows(out, fmt.LOSSY_INDEX):
        rows += 1
        per_segment.update(zip(row["segments"], row["kinds"]))
        if len(examples) < EXAMPLES:
            examples.append(row)
    table = [{"segment_index": i, "segment_name": segments[i] if i < len(segments) else "?",
              **{kind: per_segment[(i, kind)] for kind in KINDS}}
             for i in sorted({i for i, _ in per_segment})]
    consistency = []
    if rows != block["lossy_samples"]:
        consistency.append(f"rows in {fmt.LOSSY_INDEX}: {rows} (measured) but manifest.json "
                           f"round_trip.lossy_samples says {block['lossy_samples']}")
    return {"block": block, "card": manifest.get("tokenizer_card") or {}, "rows": rows,
            "per_segment": table, "examples": examples, "consistency": consistency}


def round_trip_csvs(fig: dict | None) -> dict[str, bytes]:
    """lossy_per_segment.csv: lossy segments per segment and kind."""
    if fig is None:
        return {}
    return {f"{LOSSY_CSV}.csv": csv_bytes(
        ("segment_index", "segment_name", *KINDS),
        [(r["segment_index"], r["segment_name"], *(r[k] for k in KINDS))
         for r in fig["per_segment"]])}


def _share(numerator: int, denominator: int) -> str:
    return f"{100 * numerator / denominator:.1f}%" if denominator else "n/a"


def card_lines(card: dict) -> list[str]:
    """The tokenizer card as Markdown lines."""
    lines = ["## Tokenizer card", "", "| property | value |", "|---|---|"]
    for key in ("kind", "model", "vocab_size", "normalizer", "pre_tokenizer", "decoder",
                "add_dummy_prefix", "remove_extra_whitespaces", "byte_fallback", "byte_level",
                "user_defined_symbols", "symbols", "added_tokens"):
        if key in card:
            value = card[key]
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            lines.append(f"| {key} | `{shown}` |")
    for name, token in sorted((card.get("special_tokens") or {}).items()):
        lines.append(f"| {name} | id {token['id']} `{token['token']}` ({token['source']}) |")
    lines.append("")
    losses = card.get("cannot_represent") or []
    lines += ["What it cannot represent:", ""]
    lines += [f"- {loss}" for loss in losses] or ["- nothing: every text round-trips"]
    lines.append("")
    return lines


def markdown_section(fig: dict | None, records: int) -> list[str]:
    if fig is None:
        return []
    block = fig["block"]
    lines = card_lines(fig["card"])
    checked, lossy = block["segments_checked"], block["lossy_segments"]
    lines += ["## Round trip", "",
              f"Every field segment's ids were decoded and compared with its source text: "
              f"{checked:,} segments checked, {lossy:,} lossy ({_share(lossy, checked)}); "
              f"{block['lossy_samples']:,} of {records:,} records hold one "
              f"({_share(block['lossy_samples'], records)}). One row each in "
              f"`{fmt.LOSSY_INDEX}`; data: [{LOSSY_CSV}.csv]({LOSSY_CSV}.csv).", "",
              "| kind | lossy segments |", "|---|---:|"]
    lines += [f"| {kind} | {block['kinds'][kind]:,} |" for kind in KINDS]
    lines.append("")
    if fig["per_segment"]:
        lines += ["| segment | name | " + " | ".join(KINDS) + " |",
                  "|---:|---|" + "---:|" * len(KINDS)]
        lines += [f"| {r['segment_index']} | `{r['segment_name']}` | "
                  + " | ".join(f"{r[k]:,}" for k in KINDS) + " |" for r in fig["per_segment"]]
        lines.append("")
    if fig["examples"]:
        lines += ["First lossy samples (source and decoded text from their first difference):",
                  "", "| sample | source line | segment | kind | source | decoded |",
                  "|---:|---|---|---|---|---|"]
        for row in fig["examples"]:
            lines.append(f"| {row['sample_id']} | {row['source_file']}:{row['source_line']} | "
                         f"`{row['segment_names'][0]}` | {row['kinds'][0]} | "
                         f"`{_cell(row['source'])}` | `{_cell(row['decoded'])}` |")
        lines.append("")
    if block["template"]:
        lines += ["The template's own text, checked before the build:", ""]
        lines += [f"- {notice_text(notice)}" for notice in block["template"]]
        lines.append("")
    return lines


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace(
        "|", "\\|").replace("`", "'")
