"""Normalizing chat rows: both input shapes give equal messages, every messy dialogue is
a problem naming its message, weights make assistant turns context."""
import pickle

import pytest

from mintdim_beam.core.chat import ROLE_ALIASES, DialogueProblem, Message, normalize_row
from mintdim_beam.core.errors import SampleSchemaError

OPENAI = {"messages": [
    {"role": "system", "content": "Bạn là trợ lý."},
    {"role": "user", "content": "猫可以吃巧克力吗？"},
    {"role": "assistant", "content": "不可以，巧克力对猫有毒。"},
    {"role": "user", "content": [{"type": "text", "text": "Why "}, {"type": "text", "text": "not?"}]},
    {"role": "assistant", "content": "Theobromine.", "weight": 0},
]}
SHAREGPT = {"conversations": [
    {"from": "system", "value": "Bạn là trợ lý."},
    {"from": "human", "value": "猫可以吃巧克力吗？"},
    {"from": "gpt", "value": "不可以，巧克力对猫有毒。"},
    {"from": "human", "value": "Why not?"},
    {"from": "gpt", "value": "Theobromine.", "weight": 0},
]}


def test_openai_and_sharegpt_normalize_to_equal_messages():
    a, b = normalize_row(OPENAI), normalize_row(SHAREGPT)
    assert a == b
    assert [m.role for m in a] == ["system", "user", "assistant", "user", "assistant"]
    assert a[3].content == "Why not?"  # text parts joined with no separator
    assert [m.trained for m in a] == [False, False, True, False, False]
    assert [m.weight for m in a] == [0, 0, 1, 0, 0]


def test_messages_key_with_sharegpt_shape_and_conversations_with_openai_shape():
    # Real exports mix the names (minimind: {"conversations": [{"role", "content"}]}).
    swapped = {"conversations": OPENAI["messages"]}
    assert normalize_row(swapped) == normalize_row(OPENAI)
    assert normalize_row({"dialog": SHAREGPT["conversations"]}, key="dialog") == normalize_row(SHAREGPT)


@pytest.mark.parametrize("alias,role", sorted(ROLE_ALIASES.items()))
def test_every_role_alias(alias, role):
    assert ROLE_ALIASES[alias] == role
    first = [] if role in ("system", "user") else [{"from": "human", "value": "q"}]
    if role == "tool":
        first.append({"from": "gpt", "value": "calling"})
    row = {"conversations": first + [{"from": alias.upper(), "value": "x"}]}
    assert normalize_row(row)[-1].role == role


def test_extras_are_kept_as_given_and_null_extras_are_not_set():
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    row = {"messages": [
        {"role": "user", "content": "go", "name": "alice"},
        {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done", "reasoning": "thought"},
    ]}
    msgs = normalize_row(row)
    assert msgs[0].extra == {"name": "alice"}
    assert msgs[1] == Message("assistant", "", 1, {"tool_calls": calls})  # null: not set
    assert msgs[1].template_dict() == {"role": "assistant", "content": "", "tool_calls": calls}
    assert msgs[2].extra == {"tool_call_id": "c1"}
    d = msgs[3].template_dict()
    assert d["reasoning_content"] == d["thinking"] == "thought"
    assert pickle.loads(pickle.dumps(msgs)) == msgs


def _problem(messages, key="messages"):
    with pytest.raises(DialogueProblem) as info:
        normalize_row({key: messages} if key else messages)
    return info.value


U = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}
S = {"role": "system", "content": "s"}


@pytest.mark.parametrize("messages,index,words", [
    ([S, A, U, A], 1, "first non-system turn is from the assistant"),
    ([{"role": "tool", "content": "r"}, A], 0, "first non-system turn is a tool result"),
    ([U, U, A], 1, "two user turns in a row"),
    ([U, A, A], 2, "two assistant turns in a row"),
    ([U, {"role": "assistant", "content": ""}], 1, "empty or null assistant content"),
    ([U, {"role": "assistant", "content": None}], 1, "empty or null assistant content"),
    ([U, {"role": "assistant", "content": "  \n"}], 1, "empty or null assistant content"),
    ([U, {"role": "assistant"}], 1, "empty or null assistant content"),
    ([U, {"role": "narrator", "content": "x"}], 1, "unknown role 'narrator'"),
    ([U, {"role": 3, "content": "x"}], 1, "unknown role 3"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, A], 0,
     "non-text content part (type 'image_url')"),
    ([{"role": "user", "content": ["plain"]}, A], 0, "content part is a JSON string"),
    ([{"role": "user", "content": [{"type": "text", "text": 5}]}, A], 0, "'text'"),
    ([{"role": "user", "content": 42}, A], 0, "content is a JSON number"),
    ([{"role": "user", "content": None}, A], 0, "null content in a user turn"),
    ([U, A, S, U, A], 2, "system message is not the first message"),
    ([S, S, U, A], 1, "system message is not the first message"),
    ([U, {"role": "tool", "content": "r"}], 1, "tool turn does not follow an assistant"),
    ([U, dict(A, weight=2)], 1, "weight must be 0 or 1"),
    ([U, dict(A, weight=True)], 1, "weight must be 0 or 1"),
    ([dict(U, weight=1), A], 0, "weight 1 on a user turn"),
    (["hello", A], 0, "message is a JSON string, not an object"),
    ([{"speaker": "user", "text": "q"}, A], 0, "neither 'role' nor 'from'"),
])
def test_messy_dialogues_are_problems_naming_the_message(messages, index, words):
    problem = _problem(messages)
    assert problem.message_index == index
    assert words in problem.problem


@pytest.mark.parametrize("row,words", [
    ({"text": "hi"}, "no 'messages' or 'conversations' key (keys: text)"),
    ({"messages": [U, A], "conversations": [U, A]}, "both 'messages' and 'conversations'"),
    ({"messages": []}, "dialogue has no messages"),
    ({"messages": {"role": "user"}}, "messages is a JSON object, not an array"),
])
def test_row_level_problems_have_no_message_index(row, words):
    with pytest.raises(DialogueProblem) as info:
        normalize_row(row)
    assert info.value.message_index is None and words in info.value.problem


def test_row_level_problems_with_named_key():
    with pytest.raises(DialogueProblem, match="row has no 'dialog' key"):
        normalize_row({"messages": [U, A]}, key="dialog")


def test_documented_normalizations():
    # weight 0 on a user turn is accepted and ignored; weight 0 makes an assistant turn context
    msgs = normalize_row({"messages": [dict(U, weight=0), dict(A, weight=0), U, dict(A, weight=1)]})
    assert [m.trained for m in msgs] == [False, False, False, True]
    # a dialogue ending on a user turn is fine here (the segment layer keeps it as context)
    assert normalize_row({"messages": [U, A, U]})[-1].role == "user"
    # Message defaults: assistant trained, others not
    assert Message("assistant", "x").weight == 1 and Message("user", "x").weight == 0


def test_problem_becomes_sample_schema_error_with_file_and_line():
    problem = _problem([U, U, A])
    error = problem.to_error(file="data/chat.jsonl", line=17)
    assert isinstance(error, SampleSchemaError)
    assert error.kwargs == {"file": "data/chat.jsonl", "line": 17,
                            "problem": "two user turns in a row", "message_index": 1}
    assert "Message index: 1" in str(error)
