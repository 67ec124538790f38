"""The sandboxed Jinja environment chat templates run in, without `transformers`.

Like transformers' `chat_template_utils`: `ImmutableSandboxedEnvironment` with
`trim_blocks=True, lstrip_blocks=True`, the `loopcontrols` extension, a
`{% generation %}...{% endgeneration %}` tag that renders its body unchanged, and the
helpers templates expect:

- `raise_exception(msg)`: raises `jinja2.TemplateError`; the renderer turns it into a
  problem for that sample;
- `strftime_now(fmt)`: formats a FIXED datetime, never the clock, so the same input
  gives the same bytes tomorrow. The datetime is `template_vars["date"]` (ISO 8601,
  `2026-11-30` or `2026-11-30T09:15:00`) or `DEFAULT_NOW`; the value used is exposed
  (`ChatTemplate.now_text`) for the manifest;
- the `tojson` filter: `json.dumps` keeping non-ASCII (`ensure_ascii=False`), with the
  `indent`, `separators` and `sort_keys` arguments transformers supports;
- `dict(...)` and a `namespace(...)` that refuses underscore-prefixed names.

Two guards keep a template from breaking determinism or the machine: only strings,
numbers and lists of them become text (`{{ strftime_now }}` without a call would print
a function's memory address, different per process), and `*` / `**` refuse results
over `MAX_VALUE` (`'x' * 2**32`: 4 GiB; intercepted, so Jinja no longer folds such
constants at compile time). Either is a `TemplateValueError`.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATE_VAR = "date"
DEFAULT_NOW = "2025-01-01T00:00:00"
MAX_VALUE = 1 << 24  # items of a string or list a template may make with `*`; digits of `**`


class TemplateValueError(jinja2.exceptions.SecurityError):
    """A template printed something that is not text, or computed an absurd value."""


def _text_value(value):
    """Jinja's `finalize`: what `{{ ... }}` may print."""
    if value is None or isinstance(value, (str, int, float, jinja2.Undefined)):
        return value if value is not None else _refuse(value)
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, int, float)) for v in value):
        return value
    return _refuse(value)


def _refuse(value):
    shown = repr(value)
    raise TemplateValueError(
        f"the template prints a {type(value).__name__} ({shown[:60]}), which is not text: only "
        "strings, numbers and lists of them are (call the function, or pick the field)")


def fixed_now(template_vars: Mapping[str, Any] | None) -> datetime:
    """The datetime `strftime_now` formats: `template_vars["date"]` or `DEFAULT_NOW`."""
    value = (template_vars or {}).get(DATE_VAR, DEFAULT_NOW)
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"template_vars[{DATE_VAR!r}] must be an ISO 8601 date string, got {value!r}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"template_vars[{DATE_VAR!r}] is not an ISO 8601 date: {value!r}") from None


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters and non-ASCII; templates expect neither.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class _TemplateDict:
    """`dict(...)` for templates, without exposing the `dict` type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """`namespace(...)` refusing underscore-prefixed attributes (no CPython internals)."""

    def __init__(*args, **kwargs):  # noqa: N805 - Jinja's signature trick: `namespace(self=...)` works
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes: {name!r}")


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}body{% endgeneration %}` renders `body` unchanged (transformers
    uses the tag to track assistant text; our segments come from prefix renders)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Transformers' sandbox, with `*` and `**` bounded (`MAX_VALUE`)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int) \
                        and len(seq) * times > MAX_VALUE:
                    raise TemplateValueError(
                        f"the template makes a {type(seq).__name__} of {len(seq)} x {times} "
                        f"items (more than {MAX_VALUE:,})")
        if operator == "**" and isinstance(left, int) and isinstance(right, int) \
                and abs(left) > 1 and right * max(1, abs(left).bit_length()) > MAX_VALUE:
            raise TemplateValueError(f"the template computes {left} ** {right}, a number of "
                                     f"more than {MAX_VALUE:,} bits")
        return super().call_binop(context, operator, left, right)


def make_environment(now: datetime) -> ImmutableSandboxedEnvironment:
    """A fresh sandbox whose `strftime_now` formats `now`."""
    env = _BoundedSandbox(trim_blocks=True, lstrip_blocks=True, finalize=_text_value,
                          extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception

    def strftime_now(fmt):
        return now.strftime(fmt)

    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env
