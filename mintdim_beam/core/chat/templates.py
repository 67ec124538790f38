"""Chat templates: the built-in ones by name, and `ChatTemplate`, which renders
normalized messages with a Jinja template in the sandbox of `jinja_env`.

A template is source text: a built-in's (`builtin_template(name)`), a `.jinja` file's
text, or a tokenizer's own `chat_template` string (the caller reads files). Variables
passed, as transformers' `apply_chat_template` passes them: `messages` (plain dicts:
role, content, then the message's non-null extras), `tools` and `documents` (None
unless `template_vars` gives them), `add_generation_prompt`, `bos_token`, `eos_token`,
then every `template_vars` entry (including `date`, see `jinja_env`).

Built-ins (ours, written in the style of the public templates):
- `chatml`: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message (Qwen style; an
  assistant's `tool_calls` as `<tool_call>` JSON blocks; `template_vars["default_system"]`
  adds a system message when the dialogue has none); generation prompt
  `<|im_start|>assistant\\n`.
- `llama3`: `{bos_token}` then `<|start_header_id|>{role}<|end_header_id|>\\n\\n{content|trim}<|eot_id|>`
  per message (a tool turn's header is `ipython`; one tool call per assistant turn, as
  JSON `{"name", "parameters"}`); generation prompt
  `<|start_header_id|>assistant<|end_header_id|>\\n\\n`. Pass
  `bos_token="<|begin_of_text|>"`.
- `alpaca`: plain text: `{bos_token}`, the system message (or the standard Alpaca
  preamble), then `\\n\\n### Instruction:\\n{user}` and `\\n\\n### Response:\\n{assistant}{eos_token}`;
  generation prompt `\\n\\n### Response:\\n`. Pass `eos_token` so the model learns to stop;
  a tool turn is a problem.
"""
from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Mapping, Sequence

import jinja2
import jinja2.nodes

from mintdim_beam.core.chat.jinja_env import TemplateValueError, fixed_now, make_environment
from mintdim_beam.core.chat.messages import DialogueProblem, Message

CHATML = """\
{%- if default_system is defined and default_system and (messages | length == 0 or messages[0]['role'] != 'system') %}
{{- '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] }}
{%- if message['tool_calls'] is defined %}
{%- for call in message['tool_calls'] %}
{%- set fn = call['function'] if call['function'] is defined else call %}
{{- ('\\n' if message['content'] or not loop.first else '') + '<tool_call>\\n' }}
{{- {'name': fn['name'], 'arguments': fn['arguments']} | tojson + '\\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

LLAMA3 = """\
{{- bos_token }}
{%- for message in messages %}
{%- set role = 'ipython' if message['role'] == 'tool' else message['role'] %}
{{- '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' + message['content'] | trim }}
{%- if message['tool_calls'] is defined %}
{%- if message['tool_calls'] | length != 1 %}
{{- raise_exception('the llama3 template renders exactly one tool call per assistant turn') }}
{%- endif %}
{%- set call = message['tool_calls'][0] %}
{%- set fn = call['function'] if call['function'] is defined else call %}
{{- {'name': fn['name'], 'parameters': fn['arguments']} | tojson }}
{%- endif %}
{{- '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

ALPACA = """\
{{- bos_token }}
{%- if messages | length > 0 and messages[0]['role'] == 'system' %}
{{- messages[0]['content'] }}
{%- else %}
{{- 'Below is an instruction that describes a task. Write a response that appropriately completes the request.' }}
{%- endif %}
{%- for message in messages %}
{%- if message['role'] == 'user' %}
{{- '\\n\\n### Instruction:\\n' + message['content'] }}
{%- elif message['role'] == 'assistant' %}
{{- '\\n\\n### Response:\\n' + message['content'] + eos_token }}
{%- elif message['role'] == 'tool' %}
{{- raise_exception('the alpaca template has no tool role') }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '\\n\\n### Response:\\n' }}
{%- endif %}
"""

BUILTIN_TEMPLATES: dict[str, str] = {"chatml": CHATML, "llama3": LLAMA3, "alpaca": ALPACA}
_SKELETON_EXACT = frozenset(BUILTIN_TEMPLATES.values())
_RESERVED = ("messages", "add_generation_prompt")
# What a template can raise on a sample's data (raise_exception, undefined values,
# sandbox refusals, type errors in its expressions): a problem for that sample.
_RENDER_ERRORS = (jinja2.TemplateError, TypeError, ValueError, LookupError, ArithmeticError,
                  AttributeError, RecursionError)


class TemplateSourceError(ValueError):
    """A template that does not compile, or unusable template variables: a
    configuration error, raised before any sample is read."""


class TemplateBug(DialogueProblem):
    """A sample's render failed on the template itself (`TemplateValueError`): it
    printed something that is not text, or computed an absurd value. A problem for the
    sample at build time; a config error when the probe render meets it."""


def _template_line(exc: BaseException) -> int | None:
    """The template line an error was raised at (Jinja maps its frames to the source)."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def builtin_template(name: str) -> str:
    """The source text of a built-in template."""
    try:
        return BUILTIN_TEMPLATES[name]
    except KeyError:
        raise TemplateSourceError(f"no built-in chat template {name!r} "
                                  f"(built-in: {', '.join(sorted(BUILTIN_TEMPLATES))})") from None


@functools.lru_cache(maxsize=16)
def _compiled(source: str, now: datetime):
    """(compiled template, every name it reads), once per process: a DoFn's template is
    unpickled for every bundle, and compiling costs 40 ms (a Jinja template renders
    without state of its own, so one serves every copy)."""
    env = make_environment(now)
    template = env.from_string(source)
    # Every name the template reads (context variables and globals like strftime_now).
    variables = frozenset(node.name for node in env.parse(source).find_all(jinja2.nodes.Name)
                          if node.ctx == "load")
    return template, variables


class ChatTemplate:
    """A compiled chat template and the variables it renders with. Pickles as its
    constructor arguments (build it in a DoFn's `setup()` or pickle it: both work)."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "",
                 template_vars: Mapping[str, Any] | None = None, name: str | None = None):
        self.source = source
        self.name = name
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.template_vars = dict(template_vars or {})
        reserved = [key for key in _RESERVED if key in self.template_vars]
        if reserved:
            raise TemplateSourceError(f"template_vars may not set {', '.join(reserved)}")
        try:
            self.now: datetime = fixed_now(self.template_vars)
        except ValueError as exc:
            raise TemplateSourceError(str(exc)) from None
        try:
            self._template, self.variables = _compiled(source, self.now)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateSourceError(f"chat template{'' if name is None else ' ' + repr(name)} "
                                      f"does not compile (line {exc.lineno}): {exc.message}") from None
        self._base = {"tools": None, "documents": None, "bos_token": bos_token,
                      "eos_token": eos_token, **self.template_vars}
        # The built-ins print each message's content as given (llama3: trimmed) and
        # branch only on roles, empty contents and the other keys: a dialogue's render is
        # its structure's skeleton render with the contents put in (`skeleton`), which
        # the fast path then uses without rendering. Not for any other source.
        self.skeleton_exact = source in _SKELETON_EXACT

    @classmethod
    def builtin(cls, name: str, **kwargs) -> "ChatTemplate":
        return cls(builtin_template(name), name=name, **kwargs)

    @property
    def now_text(self) -> str:
        """The fixed datetime `strftime_now` formats, ISO 8601 (for the manifest)."""
        return self.now.isoformat()

    @property
    def reads_clock(self) -> bool:
        """Whether the template calls `strftime_now` (so `now_text` shapes its output)."""
        return "strftime_now" in self.variables

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = False) -> str:
        return self.render_dicts([m.template_dict() for m in messages],
                                 add_generation_prompt=add_generation_prompt)

    def render_dicts(self, dicts: Sequence[dict], *, add_generation_prompt: bool = False) -> str:
        """Render plain message dicts (`Message.template_dict()`); a template error is a
        `DialogueProblem` (no message index: the template does not say which)."""
        try:
            return self._template.render(messages=list(dicts),
                                         add_generation_prompt=add_generation_prompt, **self._base)
        except TemplateValueError as exc:
            line = _template_line(exc)
            where = f"chat template {self.name or ''} line {line}".replace("  ", " ") \
                if line else f"chat template {self.name or ''}".strip()
            raise TemplateBug(f"{where}: {exc}") from None
        except _RENDER_ERRORS as exc:
            raise DialogueProblem(f"chat template error: {exc}") from None

    def __getstate__(self):
        return {"source": self.source, "name": self.name, "bos_token": self.bos_token,
                "eos_token": self.eos_token, "template_vars": self.template_vars}

    def __setstate__(self, state):
        self.__init__(state.pop("source"), **state)

    def __repr__(self) -> str:
        what = repr(self.name) if self.name else f"<{len(self.source)} chars>"
        return f"ChatTemplate({what}, now={self.now_text})"
