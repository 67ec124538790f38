"""The error of a build that skips bad rows (`on_bad_row="skip"`) and found more of them
than `max_rejected` allows: most often a wrong schema or the wrong files, which would
otherwise yield a quietly empty or thinned dataset."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError, bullets, num


class TooManyRejectedError(MintDimError):
    """Raised at the end of the build, before its manifest is written, when the share of
    rejected rows is over `max_rejected`."""

    def __init__(self, *, output: str, rejected: int, rows: int, max_rejected: float,
                 first: list = ()):
        kw = {"output": str(output), "rejected": int(rejected), "rows": int(rows),
              "max_rejected": float(max_rejected), "first": [str(x) for x in first]}
        share = 100.0 * kw["rejected"] / max(kw["rows"], 1)
        self._set(kw, [
            "Too many rows could not become samples (on_bad_row: skip).",
            f"Output: {kw['output']}",
            f"Rejected: {num(kw['rejected'], ',')} of {num(kw['rows'], ',')} rows "
            f"({share:.2f}%); max_rejected is {kw['max_rejected']:g} "
            f"({100 * kw['max_rejected']:g}%)",
            "First rejected rows:\n" + bullets(kw["first"]),
            "Fix: check source.fields / the source type against the data, or raise "
            "max_rejected if these rows are expected. No manifest was written.",
        ], [
            "Quá nhiều dòng không thành sample được (on_bad_row: skip).",
            f"Output: {kw['output']}",
            f"Bị loại: {num(kw['rejected'], '.')} trên {num(kw['rows'], '.')} dòng "
            f"({share:.2f}%); max_rejected là {kw['max_rejected']:g} "
            f"({100 * kw['max_rejected']:g}%)",
            "Các dòng bị loại đầu tiên:\n" + bullets(kw["first"]),
            "Cách sửa: kiểm tra source.fields / loại source so với dữ liệu, hoặc tăng "
            "max_rejected nếu các dòng này là dự kiến. Chưa ghi manifest.",
        ])
