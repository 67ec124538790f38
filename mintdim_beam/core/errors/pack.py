"""The configuration errors of pack-build beyond the ones it shares with unit-build
(missing blocks, files, templates, tokenizer files): its `pack:` block, its one
tokenizer, its one output directory. Raised before any output exists."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError

# rule -> (English, Vietnamese); {value} is the offending value as given.
RULES = {
    "shard_tokens": ("pack.shard_tokens must be a positive integer (tokens per shard), got {value}",
                     "pack.shard_tokens phải là số nguyên dương (số token mỗi shard), nhận {value}"),
    "seed": ("pack.seed must be an integer from 0 to 2**63-1, got {value}",
             "pack.seed phải là số nguyên từ 0 đến 2**63-1, nhận {value}"),
    "eod_type": ("pack.eod must be the text of one token, or null for the tokenizer's EOS; "
                 "got {value}",
                 "pack.eod phải là văn bản của một token, hoặc null để dùng EOS của tokenizer; "
                 "nhận {value}"),
    "eod_unknown": ("pack.eod {value} is not a token of the tokenizer's vocabulary",
                    "pack.eod {value} không phải một token trong vocabulary của tokenizer"),
    "no_eos": ("the tokenizer declares no EOS token ({value}); give pack.eod, e.g. "
               "eod: \"<|endoftext|>\", or a tokenizer config naming eos_token",
               "tokenizer không khai báo token EOS ({value}); hãy đặt pack.eod, ví dụ "
               "eod: \"<|endoftext|>\", hoặc một tokenizer config có eos_token"),
    "tokenizers": ("pack-build writes one token stream, so it takes one tokenizer file for "
                   "all inputs; got {value}",
                   "pack-build ghi một dòng token duy nhất nên chỉ nhận một file tokenizer cho "
                   "mọi đầu vào; nhận {value}"),
    "output_dir": ("output.dir must be one directory (a path string) for the whole stream, "
                   "got {value}",
                   "output.dir phải là một thư mục (chuỗi đường dẫn) cho cả dòng token, "
                   "nhận {value}"),
    "samples_per_shard": ("output.samples_per_shard is a unit-build setting; a pack's shard "
                          "size is pack.shard_tokens (got {value})",
                          "output.samples_per_shard là thiết lập của unit-build; kích thước "
                          "shard của pack là pack.shard_tokens (nhận {value})"),
    "source_type": ("pack-build reads JSONL with fields and templates; source type {value} "
                    "is for unit-build",
                    "pack-build đọc JSONL với fields và templates; source loại {value} dành "
                    "cho unit-build"),
    "eod_not_special": ("pack.eod {value} is an ordinary token of the vocabulary: documents "
                        "could contain it and a reader would cut them there; name a special "
                        "token (an added special token, a SentencePiece control piece)",
                        "pack.eod {value} là một token thường trong vocabulary: tài liệu có thể "
                        "chứa nó và reader sẽ cắt tài liệu tại đó; hãy dùng một token đặc biệt "
                        "(added special token, control piece của SentencePiece)"),
    "duplicate_file": ("source.files lists {value} more than once: a document is known by its "
                       "file and line, so each file may appear once (to weight a file, "
                       "copy it under another name or use the trainer's blend weights)",
                       "source.files liệt kê {value} nhiều lần: mỗi tài liệu được xác định bằng "
                       "file và dòng nên mỗi file chỉ được xuất hiện một lần (muốn tăng trọng "
                       "số, hãy chép file sang tên khác hoặc dùng blend weights của trainer)"),
    "tokenizer_option": ("tokenizer.{value} does not apply to pack-build: documents end with "
                         "pack.eod, nothing is padded and each document's text is encoded "
                         "whole, as plain text",
                         "tokenizer.{value} không áp dụng cho pack-build: mỗi tài liệu kết thúc "
                         "bằng pack.eod, không có padding và văn bản của mỗi tài liệu được "
                         "encode nguyên vẹn như văn bản thuần"),
    # No longer raised (an unknown key is a ConfigUnknownKeyError, `core.config.schema`);
    # kept so that a payload of an earlier version still rebuilds.
    "unknown_key": ("unknown key {value} in the pack block (eod, seed, shard_tokens)",
                    "khoá {value} không hợp lệ trong khối pack (eod, seed, shard_tokens)"),
}


class PackValidationError(MintDimError):
    """Raised before any output when a pack-build setting is invalid; `rule` names which
    (a key of `RULES`), `value` is the offending value as given."""

    def __init__(self, *, component: str, rule: str, value: str):
        if rule not in RULES:
            raise TypeError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
        kw = {"component": str(component), "rule": rule, "value": str(value)}
        en, vi = (text.format(value=kw["value"]) for text in RULES[rule])
        self.component = kw["component"]
        self._set(kw, ["Invalid pack-build configuration.", f"Component: {kw['component']}",
                       f"Problem: {en}"],
                  ["Cấu hình pack-build không hợp lệ.", f"Thành phần: {kw['component']}",
                   f"Vấn đề: {vi}"])


class PackEmptyError(MintDimError):
    """Raised when a pack-build's inputs hold no document with tokens (every line was
    blank or rendered to text that tokenizes to nothing): no shard could be written, and
    an output a trainer cannot read must not look complete."""

    def __init__(self, *, files: list, empty: int):
        kw = {"files": [str(f) for f in files], "empty": int(empty)}
        shown = ", ".join(kw["files"])
        self._set(kw, ["No document to pack.", f"Files: {shown}",
                       f"Empty documents: {kw['empty']}",
                       "Fix: check source.fields and source.templates select the text."],
                  ["Không có tài liệu nào để pack.", f"File: {shown}",
                   f"Tài liệu rỗng: {kw['empty']}",
                   "Cách sửa: kiểm tra source.fields và source.templates có chọn đúng văn bản."])
