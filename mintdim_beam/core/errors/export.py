"""The errors of `mintdim-beam export`, in the seed's two languages: a setting it cannot
honour and an input build that does not verify, both raised before any output."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError

RULES = {
    "format": ("--format must be parquet, hdf5 or mds, got {value}",
               "--format phải là parquet, hdf5 hoặc mds, nhận {value}"),
    "seq_len": ("a pack-build is exported as samples of seq_len + 1 tokens: give --seq-len "
                "(a positive int), got {value}",
                "pack-build được xuất thành các mẫu seq_len + 1 token: hãy đặt --seq-len "
                "(số nguyên dương), nhận {value}"),
    "pack_length": ("--pack-length is a unit-build setting (records packed into rows), "
                    "got {value}",
                    "--pack-length là thiết lập của unit-build (ghép record thành dòng), "
                    "nhận {value}"),
    "positive": ("{value} must be a positive integer", "{value} phải là số nguyên dương"),
    "h5py": ("--format hdf5 needs h5py (pip install mintdim-beam[hdf5]): {value}",
             "--format hdf5 cần h5py (pip install mintdim-beam[hdf5]): {value}"),
    "pairs_packed": ("a preference build's pairs are exported unpacked: drop --pack-length "
                     "({value})",
                     "cặp preference được xuất không đóng gói: bỏ --pack-length ({value})"),
    "not_a_build": ("{value} is not a finished unit-build or pack-build (no manifest.json of "
                    "one)",
                    "{value} không phải một unit-build hay pack-build đã hoàn tất (không có "
                    "manifest.json của chúng)"),
}


class ExportValidationError(MintDimError):
    """Raised before any output when an export setting is invalid; `rule` names which."""

    def __init__(self, *, component: str, rule: str, value: str):
        if rule not in RULES:
            raise TypeError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
        kw = {"component": str(component), "rule": rule, "value": str(value)}
        en, vi = (text.format(value=kw["value"]) for text in RULES[rule])
        self._set(kw, ["Invalid export setting.", f"Component: {kw['component']}",
                       f"Problem: {en}"],
                  ["Thiết lập export không hợp lệ.", f"Thành phần: {kw['component']}",
                   f"Vấn đề: {vi}"])


class ExportInputError(MintDimError):
    """Raised before any output when the build to export does not pass `verify`: an
    export of a changed or damaged build would carry its damage under a new name."""

    def __init__(self, *, build: str, problems: list):
        kw = {"build": str(build), "problems": [str(p) for p in problems]}
        shown = "\n".join(f"  {p}" for p in kw["problems"][:10])
        self._set(kw, ["The build to export does not verify.", f"Build: {kw['build']}",
                       f"Problems:\n{shown}",
                       "Fix: rebuild it, or restore the files verify names."],
                  ["Build cần xuất không qua được verify.", f"Build: {kw['build']}",
                   f"Vấn đề:\n{shown}",
                   "Cách sửa: build lại, hoặc khôi phục các file mà verify nêu tên."])
