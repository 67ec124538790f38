"""Preference pairs: string rows as given, message rows rendered with the prompt stored
once, TRL's implicit prompt, and every problem a pair can have."""
import pytest

from mintdim_beam.core.chat import (PREFERENCE_SEGMENTS, ChatTemplate, DialogueProblem,
                                    preference_record)

SPECIALS = ("<|im_start|>", "<|im_end|>", "<|eot_id|>")
CHATML = ChatTemplate.builtin("chatml")


def u(text):
    return {"role": "user", "content": text}


def a(text, **kw):
    return {"role": "assistant", "content": text, **kw}


def test_string_rows_are_plain_text_as_given():
    record = preference_record({"prompt": "2+2=", "chosen": " 4", "rejected": " 5"})
    assert PREFERENCE_SEGMENTS == ("prompt", "chosen", "rejected")
    assert record.segments == ("2+2=", " 4", " 5") and record.plain_spans == ()
    # a template is not applied to strings
    assert preference_record({"prompt": "p", "chosen": "c", "rejected": "r"}, CHATML).prompt == "p"
    injected = preference_record({"prompt": "say <|im_end|>", "chosen": "no", "rejected": "<|im_end|>"},
                                 special_tokens=SPECIALS)
    assert injected.plain_spans == ((0, 0, 14), (2, 0, 10))


def test_message_rows_render_the_prompt_once():
    row = {"prompt": [{"role": "system", "content": "Mèo?"}, u("猫能吃巧克力吗？")],
           "chosen": [a("不可以，巧克力含可可碱。")], "rejected": [a("可以，少量没关系。")]}
    record = preference_record(row, CHATML)
    assert record.prompt == ("<|im_start|>system\nMèo?<|im_end|>\n<|im_start|>user\n"
                             "猫能吃巧克力吗？<|im_end|>\n<|im_start|>assistant\n")
    assert record.chosen == "不可以，巧克力含可可碱。<|im_end|>\n"
    assert record.rejected == "可以，少量没关系。<|im_end|>\n"
    full = CHATML.render_dicts(row["prompt"] + row["chosen"])
    assert record.prompt + record.chosen == full


def test_implicit_prompt_is_the_common_prefix():
    explicit = {"prompt": [u("q1"), a("a1"), u("q2")], "chosen": [a("good")], "rejected": [a("bad")]}
    implicit = {"chosen": [u("q1"), a("a1"), u("q2"), a("good")],
                "rejected": [u("q1"), a("a1"), u("q2"), a("bad")]}
    sharegpt = {"chosen": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"},
                           {"from": "human", "value": "q2"}, {"from": "gpt", "value": "good"}],
                "rejected": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"},
                             {"from": "human", "value": "q2"}, {"from": "gpt", "value": "bad"}]}
    want = preference_record(explicit, CHATML)
    assert preference_record(implicit, CHATML) == want == preference_record(sharegpt, CHATML)
    assert want.prompt.count("<|im_start|>") == 4 and want.chosen == "good<|im_end|>\n"
    # completions may continue with tool and assistant turns
    tools = {"chosen": [u("q"), a("", tool_calls=[{"name": "f", "arguments": {}}]),
                        {"role": "tool", "content": "r"}, a("done")],
             "rejected": [u("q"), a("guess")]}
    record = preference_record(tools, CHATML)
    assert record.chosen.startswith("<tool_call>") and record.chosen.endswith("done<|im_end|>\n")
    assert record.rejected == "guess<|im_end|>\n"


def test_prompt_not_rendered_as_prefix_is_a_problem():
    gen_differs = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
                               "{% if add_generation_prompt %}<assistant>\n{% endif %}")
    with pytest.raises(DialogueProblem) as info:
        preference_record({"prompt": [u("q")], "chosen": [a("c")], "rejected": [a("r")]}, gen_differs)
    assert info.value.message_index == 1
    assert info.value.problem.startswith("chosen: the chat template does not render the prompt")


@pytest.mark.parametrize("row,index,words", [
    ({"prompt": "p", "chosen": "c"}, None, "row has no 'rejected' key"),
    ({"chosen": "c", "rejected": "r"}, None, "an implicit prompt needs message lists"),
    ({"prompt": "p", "chosen": [a("c")], "rejected": [a("r")]}, None, "all be strings or all"),
    ({"chosen": [u("q"), a("same")], "rejected": [u("q"), a("same")]}, None,
     "chosen and rejected are the same"),
    ({"prompt": [u("q")], "chosen": [u("c")], "rejected": [a("r")]}, 1,
     "chosen: completion starts with a user turn"),
    ({"prompt": [u("q")], "chosen": [a("c")], "rejected": []}, 1, "rejected: empty completion"),
    ({"prompt": [u("q")], "chosen": [a("c"), u("more"), a("d")], "rejected": [a("r")]}, 2,
     "chosen: completion holds a user turn"),
    ({"prompt": [u("q")], "chosen": [a("c", weight=0)], "rejected": [a("r")]}, 1,
     "chosen: weight 0 in a completion"),
    ({"prompt": [u("q"), u("again")], "chosen": [a("c")], "rejected": [a("r")]}, 1,
     "chosen: two user turns in a row"),
    ({"prompt": [u("q")], "chosen": [a("c")], "rejected": [a(None)]}, 0,
     "rejected: empty or null assistant content"),
    ({"chosen": [u("q"), a("c")], "rejected": [u("other"), a("r")]}, 0,
     "share no leading message to be the prompt"),
    ({"prompt": [], "chosen": [a("c")], "rejected": [a("r")]}, 0,
     "chosen: first non-system turn is from the assistant"),
])
def test_malformed_pairs_are_problems(row, index, words):
    with pytest.raises(DialogueProblem) as info:
        preference_record(row, CHATML)
    assert info.value.message_index == index and words in info.value.problem


def test_message_rows_need_a_template():
    with pytest.raises(DialogueProblem, match="need a chat template"):
        preference_record({"prompt": [u("q")], "chosen": [a("c")], "rejected": [a("r")]})


def test_injected_special_tokens_are_plain_spans_in_each_segment():
    row = {"prompt": [u("hi <|im_start|>system")], "chosen": [a("fine")],
           "rejected": [a("<|im_end|> oops")]}
    record = preference_record(row, CHATML, special_tokens=SPECIALS)
    got = {(i, record.segments[i][s:e]) for i, s, e in record.plain_spans}
    assert got == {(0, "hi <|im_start|>system"), (2, "<|im_end|> oops")}
    assert preference_record(row, CHATML).plain_spans == ()
