"""What every report writes and draws with: the report directory and file names,
`ReportInputError`, the writer that puts a report's files in place, and the figure
helpers (a bare matplotlib Figure on the Agg canvas, no pyplot state)."""
from __future__ import annotations

import io
import uuid

from mintdim_beam.core.files import storage

REPORT_DIR = "report"  # under OUT by default; verify allows it and checks nothing in it
REPORT_MD = "report.md"


class ReportInputError(ValueError):
    """The build's files contradict each other in a way the report cannot compute around."""


# --------------------------------------------------------------------------- reading


def write_report_files(dest: str, files: dict, figures: dict) -> dict:
    """Write `files` ({name: bytes}, in order) into `dest` under temporary names, then
    the result a report call returns: the figures (not the manifest) and what was
    written where."""
    scratch = storage.join(dest, f"_report_tmp_{uuid.uuid4().hex}")
    try:
        for name, data in files.items():
            storage.write_atomic(storage.join(dest, name), data, dest, scratch=scratch)
    finally:
        storage.remove_tree(scratch)
    result = {k: v for k, v in figures.items() if k != "manifest"}
    result["dest"] = dest
    result["report"] = storage.join(dest, REPORT_MD)
    result["files"] = list(files)
    return result


def png(figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def new_figure(title: str):
    # A bare Figure on the Agg canvas: no pyplot, no global backend state, no display.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.add_subplot()
    ax.set_title(title)
    return figure, ax


def no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")


def bar_chart(title: str, labels: list, values: list, color: str, xlabel: str, ylabel: str,
               empty_text: str, rotate: bool = False) -> bytes:
    """A labelled bar chart, or a "no data" note when there are no bars."""
    figure, ax = new_figure(title)
    ax.bar_label(ax.bar(labels, values, color=color))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if rotate:
        ax.tick_params(axis="x", labelrotation=30)
    if not labels:
        no_data(ax, empty_text)
    return png(figure)


def share(numerator, denominator) -> str:
    if not denominator:
        return f"n/a ({numerator} / {denominator}: the denominator is 0)"
    return f"{numerator / denominator:.4%} ({numerator:,} / {denominator:,})"


def md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", "\\n")


def ratio(numerator, denominator):
    """numerator / denominator, or None when the denominator is 0 (printed "n/a")."""
    return numerator / denominator if denominator else None
