"""The report's section on rows left out under `on_bad_row="skip"`: how many, of how
many rows, by error class, and the first ones (from `rejected_index.jsonl`)."""
from __future__ import annotations

from collections import Counter

from mintdim_beam.audit.plain_files import jsonl_rows
from mintdim_beam.core.formats import mintdim as fmt

FIRST = 10  # rows listed in the report


def rejected_figures(out: str, manifest: dict) -> dict | None:
    """None for a build that did not skip bad rows."""
    block = manifest.get("bad_rows")
    if not isinstance(block, dict):
        return None
    classes, first, rows = Counter(), [], 0
    for row in jsonl_rows(out, fmt.REJECTED_INDEX):
        rows += 1
        classes[row["error"]] += 1
        if len(first) < FIRST:
            first.append(row)
    return {"rows": block.get("rows"), "rejected": rows, "recorded": manifest.get("rejected"),
            "max_rejected": block.get("max_rejected"), "by_error": dict(classes.most_common()),
            "first": first}


def markdown_section(fig: dict | None) -> list[str]:
    if fig is None:
        return []
    total = fig["rows"] or 0
    share = 100.0 * fig["rejected"] / total if total else 0.0
    lines = ["## Rejected rows", "",
             f"The build ran with `on_bad_row: skip`: {fig['rejected']:,} of {total:,} rows "
             f"({share:.2f}%) could not become samples and were left out (max_rejected "
             f"{fig['max_rejected']:g}). Each is a row of `{fmt.REJECTED_INDEX}`; sample ids "
             "are dense over the rows kept.", ""]
    if fig["recorded"] != fig["rejected"]:
        lines += [f"**manifest.json counts {fig['recorded']} rejected rows, "
                  f"{fmt.REJECTED_INDEX} holds {fig['rejected']}.**", ""]
    if not fig["by_error"]:
        return lines
    lines += ["| error | rows |", "|---|---:|"]
    lines += [f"| {name} | {count:,} |" for name, count in fig["by_error"].items()]
    lines += ["", f"First {len(fig['first'])}:", "",
              "| file | line | error | reason |", "|---|---:|---|---|"]
    for row in fig["first"]:
        reason = str(row["reason"]).replace("|", "\\|")
        lines.append(f"| {row['source_file']} | {row['source_line']} | {row['error']} | "
                     f"{reason} |")
    return lines + [""]
