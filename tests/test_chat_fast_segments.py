"""The skeleton fast path of `render_dialogue` / `chat_records` (`chat.skeleton`) gives
exactly the exact prefix-render procedure's result (`fast=False`), and renders less."""
import random

import pytest

from mintdim_beam.core.chat import ChatTemplate, DialogueProblem, Message, chat_records
from mintdim_beam.core.chat import skeleton
from mintdim_beam.core.chat.segments import render_dialogue

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>"]

TRIM = """\
{%- for m in messages %}
{{- '[' + m['role'] + ']\\n' + m['content'] | trim + '\\n[/' + m['role'] + ']\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '[assistant]\\n' }}{% endif %}
"""

BRANCH = """\
{%- for m in messages %}
{%- if m['content'].startswith('#') %}
{{- '<h ' + m['role'] + '>' + m['content'][1:] + '</h>' }}
{%- elif m['content'] | length > 60 %}
{{- '<long ' + m['role'] + '>' + m['content'] + '</long>' }}
{%- elif not m['content'] %}
{{- '<empty ' + m['role'] + '/>' }}
{%- else %}
{{- '<' + m['role'] + '>' + m['content'] + '</' + m['role'] + '>' }}
{%- endif %}
{%- if m['tool_calls'] is defined %}{{- m['tool_calls'] | tojson }}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<assistant>' }}{% endif %}
"""

# Renders the last message differently (not as prefixes): every dialogue with a trained
# turn before the last message is a problem, in both paths.
LAST = """\
{%- for m in messages %}
{{- ('<LAST>' if loop.last else '<') + m['role'] + '>' + m['content'] + '\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<assistant>' }}{% endif %}
"""

# Uses the private-use characters the sentinels would otherwise start with.
PRIVATE = "\ue000{%- for m in messages %}{{- '\ue001' + m['content'] + '\ue000' }}{% endfor %}" \
          "{%- if add_generation_prompt %}{{- '\ue001' }}{% endif %}"


def _templates():
    return {
        "chatml": ChatTemplate.builtin("chatml"),
        "chatml_system": ChatTemplate.builtin("chatml", template_vars={"default_system": "Be kind."}),
        "llama3": ChatTemplate.builtin("llama3", bos_token="<|begin_of_text|>"),
        "alpaca": ChatTemplate.builtin("alpaca", eos_token="</s>"),
        "trim": ChatTemplate(TRIM, name="trim"),
        "branch": ChatTemplate(BRANCH, name="branch"),
        "last": ChatTemplate(LAST, name="last"),
        "private": ChatTemplate(PRIVATE, name="private"),
    }


WORDS = ["hello", "world", "Xin chào", "你好", "🙂", "code", "```py\nx = 1\n```", "#title",
         "\ue000", "\ue0010\ue001", "a" * 70, "<|im_end|>", "<|eot_id|>", "answer"]
BLANKS = ["", " ", "\n", "  \n", "\t"]


def _content(rng, allow_empty=False):
    if allow_empty and rng.random() < 0.1:
        return rng.choice(BLANKS)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.6:
        text = rng.choice(["", "Hi.", "#", "A long prefix " * 6])[:rng.randint(0, 90)] + text
    if rng.random() < 0.15:
        text = rng.choice(BLANKS[1:]) + text
    if rng.random() < 0.15:
        text = text + rng.choice(BLANKS[1:])
    return text


def _dialogue(rng):
    messages = []
    if rng.random() < 0.4:
        messages.append(Message("system", _content(rng, allow_empty=True)))
    for _ in range(rng.randint(1, 4)):
        messages.append(Message("user", _content(rng, allow_empty=True)))
        if rng.random() < 0.15:  # an empty tool-call turn, its result, then an answer
            call = {"function": {"name": "lookup", "arguments": {"q": rng.choice(WORDS)}}}
            messages.append(Message("assistant", "", rng.choice([0, 1]), {"tool_calls": [call]}))
            messages.append(Message("tool", _content(rng)))
        weight = 0 if rng.random() < 0.2 else 1
        messages.append(Message("assistant", _content(rng), weight))
    return tuple(messages)


def _dialogues(n=400, seed=16):
    rng = random.Random(seed)
    pool = [_dialogue(rng) for _ in range(n // 2)]
    # Structures repeat in real data: also draw plain dialogues of few shapes.
    for _ in range(n - len(pool)):
        rng2 = random.Random(rng.randint(0, 10**9))
        messages = [Message("system", rng2.choice(["Be brief.", "You help."]))] \
            if rng2.random() < 0.35 else []
        for _ in range(rng2.randint(1, 3)):
            messages += [Message("user", rng2.choice(WORDS) + " question?"),
                         Message("assistant", rng2.choice(WORDS) + " answer.",
                                 0 if rng2.random() < 0.1 else 1)]
        pool.append(tuple(messages))
    return pool


def _outcome(fn):
    try:
        return ("ok", fn())
    except DialogueProblem as exc:
        return ("problem", str(exc), exc.message_index)


class _Counting:
    def __init__(self, template):
        self.count = 0
        self.render_dicts = template.render_dicts

    def wrap(self, template):
        def counting(*args, **kwargs):
            self.count += 1
            return self.render_dicts(*args, **kwargs)
        template.render_dicts = counting
        return self


@pytest.fixture(autouse=True)
def _fresh_caches():
    skeleton.clear_caches()
    yield
    skeleton.clear_caches()


@pytest.mark.parametrize("name", sorted(_templates()))
def test_fast_equals_slow(name):
    template = _templates()[name]
    counter = _Counting(template).wrap(template)
    dialogues = _dialogues()
    slow = []
    counter.count = 0
    for d in dialogues:
        slow.append(_outcome(lambda: render_dialogue(template, d, special_tokens=SPECIALS,
                                                     fast=False)))
    slow_renders = counter.count
    passes = []
    for _ in range(3):  # a structure's skeleton is built when seen twice: pass 3 hits
        counter.count = 0
        for d, expected in zip(dialogues, slow):
            got = _outcome(lambda: render_dialogue(template, d, special_tokens=SPECIALS))
            assert got == expected, (name, d)
        passes.append(counter.count)
    oks = sum(o[0] == "ok" for o in slow)
    if name == "last":
        assert oks < len(dialogues)  # problems, the same ones
    else:
        assert oks > len(dialogues) // 3
    # a structure seen twice costs its skeleton's renders once more
    assert passes[0] <= 2 * slow_renders and passes[1] <= 2 * slow_renders
    if name in ("chatml", "chatml_system", "llama3", "alpaca", "trim", "private"):
        assert passes[2] < 0.6 * slow_renders, (passes, slow_renders)
    else:
        assert passes[2] <= slow_renders, (passes, slow_renders)


@pytest.mark.parametrize("name", ["chatml", "llama3", "branch"])
@pytest.mark.parametrize("policy", ["split", "abort", "skip"])
@pytest.mark.parametrize("max_turns", [1, 2, 4])
def test_chat_records_fast_equals_slow(name, policy, max_turns):
    template = _templates()[name]
    for d in _dialogues(200, seed=max_turns):
        kwargs = dict(max_turns=max_turns, on_extra_turns=policy, special_tokens=SPECIALS)
        expected = _outcome(lambda: chat_records(template, d, fast=False, **kwargs))
        for _ in range(2):
            assert _outcome(lambda: chat_records(template, d, **kwargs)) == expected


def _repeating_dialogues():
    rng = random.Random(3)
    return [(Message("user", f"q{i} {rng.random()}"), Message("assistant", f"a{i}"),
             Message("user", "more?"), Message("assistant", f"yes {i}")) for i in range(100)]


def test_one_render_per_dialogue_when_structures_repeat():
    template = ChatTemplate(TRIM, name="trim")
    assert not template.skeleton_exact
    counter = _Counting(template).wrap(template)
    for d in _repeating_dialogues():
        render_dialogue(template, d)
    # seen once: exact (4 renders); twice: skeleton (4) + one; then one each
    assert counter.count == 4 + 4 + 1 + 98


@pytest.mark.parametrize("name", ["chatml", "llama3", "alpaca"])
def test_builtins_render_repeated_structures_from_their_skeleton(name):
    template = _templates()[name]
    assert template.skeleton_exact
    counter = _Counting(template).wrap(template)
    dialogues = _repeating_dialogues()
    got = [render_dialogue(template, d) for d in dialogues]
    # seen once: the skeleton's renders (4, as many as the exact procedure's); then none
    assert counter.count == 4
    skeleton.clear_caches()
    assert got == [render_dialogue(template, d, fast=False) for d in dialogues]


def test_skeleton_exact_only_for_the_builtin_sources():
    assert ChatTemplate.builtin("chatml", template_vars={"default_system": "Be kind."}).skeleton_exact
    assert not ChatTemplate(ChatTemplate.builtin("chatml").source + " ").skeleton_exact
    assert not ChatTemplate(BRANCH).skeleton_exact


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(skeleton, "MAX_STRUCTURES", 8)
    template = ChatTemplate.builtin("chatml")
    for d in _dialogues(300, seed=5) * 2:
        assert _outcome(lambda: render_dialogue(template, d)) == \
            _outcome(lambda: render_dialogue(template, d, fast=False))
    assert len(skeleton.cache_for(template).entries) <= 8


def test_duck_typed_template_without_weakref():
    class Plain:
        __slots__ = ("inner",)

        def __init__(self, inner):
            self.inner = inner

        def render_dicts(self, dicts, add_generation_prompt=False):
            return self.inner.render_dicts(dicts, add_generation_prompt=add_generation_prompt)

    template = Plain(ChatTemplate.builtin("chatml"))
    d = (Message("user", "hi"), Message("assistant", "hello"))
    for _ in range(3):
        assert render_dialogue(template, d) == render_dialogue(template, d, fast=False)
