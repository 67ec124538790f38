"""Errors of the round-trip checks (`on_lossy="abort"`), in both languages: a template's
own text the tokenizer cannot carry (before any output), and a sample whose ids do not
decode to its source (the build fails at its file and line)."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError


class TemplateRoundTripError(MintDimError):
    """Raised before any output under `on_lossy="abort"` when a template's own text does
    not survive the tokenizer: a literal that encodes to nothing or decodes to other
    text, a marker that is not a token, special-token text a literal keeps as text."""

    def __init__(self, *, where: str, problem: str):
        kw = {"where": str(where), "problem": str(problem)}
        self._set(
            kw,
            ["The template's text does not survive the tokenizer.", f"Where: {kw['where']}",
             f"Problem: {kw['problem']}",
             "Fix: change the template or the tokenizer, or run with on_lossy: continue "
             "to build anyway (the loss is recorded in manifest.json)."],
            ["Văn bản của template không được tokenizer giữ nguyên.", f"Vị trí: {kw['where']}",
             f"Vấn đề: {kw['problem']}",
             "Cách sửa: sửa template hoặc đổi tokenizer, hoặc chạy với on_lossy: continue để "
             "vẫn build (mất mát được ghi trong manifest.json)."],
        )


class SampleRoundTripError(MintDimError):
    """Raised under `on_lossy="abort"` when a sample's tokens do not decode back to its
    source text; names the first such sample (file and line) and what was lost."""

    def __init__(self, *, file: str, line: int, segment: str, kind: str, source: str,
                 decoded: str):
        kw = {"file": str(file), "line": int(line), "segment": str(segment),
              "kind": str(kind), "source": str(source), "decoded": str(decoded)}
        self._set(
            kw,
            ["A sample's tokens do not decode back to its text.", f"File: {kw['file']}",
             f"Line: {kw['line']}", f"Segment: {kw['segment']}", f"Loss: {kw['kind']}",
             f"Source: {kw['source']!r}", f"Decoded: {kw['decoded']!r}",
             "Fix: use a tokenizer that keeps this text, clean the input, or run with "
             "on_lossy: continue (lossy samples are listed in lossy_index.jsonl)."],
            ["Token của một mẫu không giải mã lại đúng văn bản gốc.", f"File: {kw['file']}",
             f"Dòng: {kw['line']}", f"Đoạn: {kw['segment']}", f"Mất mát: {kw['kind']}",
             f"Gốc: {kw['source']!r}", f"Giải mã: {kw['decoded']!r}",
             "Cách sửa: dùng tokenizer giữ được văn bản này, làm sạch dữ liệu, hoặc chạy với "
             "on_lossy: continue (các mẫu mất mát được liệt kê trong lossy_index.jsonl)."],
        )
