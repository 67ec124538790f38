"""Errors of the `source.files` list beyond the seed's missing file: a directory or a
pattern that names no input, and one file named twice for one output. Raised by the
config checks before any output exists, by both pipelines."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError

# rule -> (English, Vietnamese); {entry} is the source.files entry, {other} the earlier
# name of the same file, {output} the output it feeds.
RULES = {
    "empty_directory": (
        "the directory {entry} holds no input file (its direct children named *.jsonl, "
        "*.json, *.jsonl.gz, *.jsonl.zst or *.parquet; subdirectories and hidden files "
        "are not read)",
        "thư mục {entry} không chứa file đầu vào nào (các file con trực tiếp có tên *.jsonl, "
        "*.json, *.jsonl.gz, *.jsonl.zst hoặc *.parquet; thư mục con và file ẩn không được "
        "đọc)"),
    "no_match": (
        "the pattern {entry} matches no file",
        "mẫu {entry} không khớp với file nào"),
    "duplicate": (
        "{entry} is the same file as {other} (listed twice, or reached again through a "
        "symlink, a hard link, a directory or a pattern), both for {output}: a document is "
        "known by its file and line, so each file may feed an output once (to weight a "
        "file, copy it under another name or use the trainer's blend weights)",
        "{entry} là cùng một file với {other} (liệt kê hai lần, hoặc gặp lại qua symlink, "
        "hard link, thư mục hay mẫu glob), cả hai cho {output}: mỗi tài liệu được xác định "
        "bằng file và dòng nên mỗi file chỉ được đưa vào một output một lần (muốn tăng "
        "trọng số, hãy chép file sang tên khác hoặc dùng blend weights của trainer)"),
}


class SourceFilesError(MintDimError):
    """Raised before any output when a `source.files` entry names no input (an empty
    directory, a pattern without a match) or names a file an earlier entry already gave
    the same output; `rule` says which (a key of `RULES`)."""

    def __init__(self, *, entry: str, rule: str, other: str = "", output: str = ""):
        if rule not in RULES:
            raise TypeError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
        kw = {"entry": str(entry), "rule": rule, "other": str(other), "output": str(output)}
        en, vi = (text.format(**kw) for text in RULES[rule])
        self._set(kw, ["Invalid source.files entry.", f"Entry: {kw['entry']}",
                       f"Problem: {en}"],
                  ["Mục source.files không hợp lệ.", f"Mục: {kw['entry']}", f"Vấn đề: {vi}"])
