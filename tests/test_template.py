"""Template compilation: segments, placeholders, literal braces, mismatches."""
import pytest

from mintdim_beam.core.errors import TemplateFieldMismatchError
from mintdim_beam.core.render.template import compile_template, json_kind, render_value


def test_segments_in_order_with_literals_named_token_template():
    t = compile_template("{instruction}\n\n{input}\n\n{output}", ["instruction", "input", "output"], "a.jsonl")
    assert t.sequence_template == ["instruction", "token_template", "input", "token_template", "output"]
    assert [s.content for s in t.segments] == [None, "\n\n", None, "\n\n", None]
    assert t.length_fields()[1] == {"index": 1, "name": "token_template", "kind": "literal", "content": "\n\n"}
    assert t.length_fields()[0] == {"index": 0, "name": "instruction", "kind": "field", "content": None,
                                    "field": "instruction"}


def test_other_braces_are_literal_and_fields_may_repeat():
    t = compile_template("{{ x }} {a} { b } {a}{1x}", ["a"], "a.jsonl")
    assert t.sequence_template == ["token_template", "a", "token_template", "a", "token_template"]
    assert t.segments[0].content == "{{ x }} " and t.segments[4].content == "{1x}"
    # Like mintdim, "{{x}}" still holds the placeholder "{x}".
    with pytest.raises(TemplateFieldMismatchError):
        compile_template("{{x}} {a}", ["a"], "a.jsonl")


def test_placeholder_not_declared():
    with pytest.raises(TemplateFieldMismatchError) as info:
        compile_template("{instruction}\n\n{prompt}\n\n{output}", ["instruction", "input", "output"],
                         "./data/train.jsonl")
    assert "Field causing template mismatch: prompt" in info.value.english
    assert "template dùng {prompt}" in info.value.vietnamese


def test_declared_field_not_used():
    with pytest.raises(TemplateFieldMismatchError) as info:
        compile_template("{instruction}\n\n{output}", ["instruction", "input", "output"], "./data/train.jsonl")
    assert "fields declares this field, but template does not use {input}" in info.value.english


def test_value_rendering_follows_python_str_and_refuses_containers():
    assert [render_value(v) for v in ("x", 7, 0.5, True, False)] == ["x", "7", "0.5", "True", "False"]
    assert [render_value(v) for v in (None, [1], {"a": 1})] == [None, None, None]
    assert [json_kind(v) for v in (None, [1], {"a": 1}, True, 2.5, "s")] == [
        "null", "array", "object", "boolean", "number", "string"]
