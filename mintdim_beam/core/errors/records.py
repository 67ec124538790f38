"""Errors of the public transforms (`mintdim_beam.transforms`): a record whose sort key
cannot order it or repeats, and arguments the transforms refuse before any output."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError


class RecordKeyError(MintDimError):
    """Raised when a record's sort key repeats (two rows would claim one sample id),
    is not a str, bytes, int or tuple of them, or its provenance fields are unusable.
    A repeated key is never a silent reorder: the build stops and names the key."""

    def __init__(self, *, key: str, problem: str):
        kw = {"key": str(key), "problem": str(problem)}
        self._set(
            kw,
            ["A record's sort key cannot place it in the build.", f"Key: {kw['key']}",
             f"Problem: {kw['problem']}",
             "Fix: give every row one key of its own (str, bytes, int or a tuple of them), "
             "for example (source file, line)."],
            ["Khóa sắp xếp của một bản ghi không xếp được nó vào build.", f"Khóa: {kw['key']}",
             f"Vấn đề: {kw['problem']}",
             "Cách sửa: cho mỗi dòng một khóa riêng (str, bytes, int hoặc tuple của chúng), "
             "ví dụ (file nguồn, dòng)."],
        )


class TransformArgumentError(MintDimError, ValueError):
    """Raised when a public transform is applied with an argument it cannot take (a
    `tokenize=` that is not a `TokenizeRecords`, a non-positive `key_buckets`), before
    the graph is built further and before any output exists."""

    def __init__(self, *, transform: str, argument: str, problem: str):
        kw = {"transform": str(transform), "argument": str(argument), "problem": str(problem)}
        self._set(
            kw,
            [f"{kw['transform']} cannot take this argument.", f"Argument: {kw['argument']}",
             f"Problem: {kw['problem']}"],
            [f"{kw['transform']} không nhận được đối số này.", f"Đối số: {kw['argument']}",
             f"Vấn đề: {kw['problem']}"],
        )
