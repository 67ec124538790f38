"""SentencePiece chat templates keep their control tokens (issue 24): a chat build with
Mistral's own SentencePiece tokenizers (v1 with text markers, v2/v3/v7 with `[INST]` as
control ids) and the chat template mistral-common generates for each gives, record for
record, the ids of mistral-common's own `encode_chat_completion`, with the EOS id after
every trained reply. mistral-common is a test-only dependency; its wheel ships the
tokenizer files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import IN_MEMORY, REPO, shard_records
from mintdim_beam import pipeline

mistral_common = pytest.importorskip("mistral_common")
from mistral_common.integrations.chat_templates.chat_templates import (  # noqa: E402
    convert_tokenizer_to_chat_template)
from mistral_common.protocol.instruct.request import ChatCompletionRequest  # noqa: E402
from mistral_common.protocol.instruct.validator import ValidationMode  # noqa: E402
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer  # noqa: E402

DATA = Path(mistral_common.__file__).parent / "data"
DIALOGUES = REPO / "examples/chat/dialogues.jsonl"
EOS = 2


def _dialogues(system_in_last_turn: bool) -> list[dict]:
    """The bundled dialogues. v2 and v3 put the system prompt in the last user turn, so a
    dialogue with a system prompt and several turns does not render its turns as
    prefixes (a SampleSchemaError, tested in test_chat_render): those are left out."""
    rows = [json.loads(line) for line in DIALOGUES.read_text(encoding="utf-8").splitlines()]
    if not system_in_last_turn:
        return rows
    return [r for r in rows if r["messages"][0]["role"] != "system"
            or sum(m["role"] == "user" for m in r["messages"]) == 1]


@pytest.mark.slow
@pytest.mark.parametrize("name,system_in_last_turn", [
    ("tokenizer.model.v1", False),
    ("mistral_instruct_tokenizer_240216.model.v2", True),
    ("mistral_instruct_tokenizer_240323.model.v3", True),
    ("mistral_instruct_tokenizer_241114.model.v7", False)])
def test_records_equal_mistral_commons_encode_chat_completion(tmp_path, name, system_in_last_turn):
    rows = _dialogues(system_in_last_turn)
    data = tmp_path / "dialogues.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    template = tmp_path / "mistral.jinja"
    template.write_text(convert_tokenizer_to_chat_template(str(DATA / name)), encoding="utf-8")
    out = tmp_path / "out"
    (pipeline("unit-build")
     .source.chat(files=[str(data)], chat_template=str(template), max_turns=3,
                  on_extra_turns="abort")
     .tokenizer.sentencepiece(files=[str(DATA / name)], pad_token="</s>")  # no pad: EOS, named
     .units(sizes=[[256, 512, 1024, 2048]], build_batch=[128])
     .output.dir(str(out), samples_per_shard=[500])
     .run(on_overflow="abort", on_template_unk="abort", pipeline_options=IN_MEMORY))

    reference = MistralTokenizer.from_file(str(DATA / name), mode=ValidationMode.finetuning)
    layout, records = shard_records(out)
    kinds = [f["kind"] for f in layout["length_fields"]]
    assert len(records) == len(rows) > 800
    for (row, segments), source in zip(records, rows):
        messages = [{"role": m["role"], "content": m["content"]} for m in source["messages"]]
        want = reference.encode_chat_completion(ChatCompletionRequest(messages=messages)).tokens
        assert [i for s in segments for i in s] == want, row["sample_id"]
        trained = [s for s, kind in zip(segments, kinds) if kind == "trained" and s]
        assert len(trained) == sum(m["role"] == "assistant" and m.get("weight", 1)
                                   for m in source["messages"])
        assert all(s[-1] == EOS and EOS not in s[:-1] for s in trained)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["round_trip"]["lossy_samples"] == 0  # identity normalizer, byte fallback
    # v1 writes [INST] as text (it is no token there): said before the build; later
    # versions have it, and </s>, as control tokens
    markers = [n["marker"] for n in manifest["round_trip"]["template"]]
    assert markers == (["[INST]", "[/INST]"] if name.endswith(".v1") else [])


@pytest.mark.slow
def test_split_records_equal_mistral_common_on_each_prefix(tmp_path):
    """One trained turn per record (`split`) with the v7 tokenizer: part j of a dialogue
    is mistral-common's encoding of the messages through its turn (the last part: the
    whole dialogue), so a part's history, taken from the part before it, is exact."""
    name = "mistral_instruct_tokenizer_241114.model.v7"
    rows = [r for r in _dialogues(False)
            if sum(m["role"] == "assistant" and m.get("weight", 1) for m in r["messages"]) > 1]
    rows = rows[:150]
    data = tmp_path / "dialogues.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    template = tmp_path / "mistral.jinja"
    template.write_text(convert_tokenizer_to_chat_template(str(DATA / name)), encoding="utf-8")
    out = tmp_path / "out"
    (pipeline("unit-build")
     .source.chat(files=[str(data)], chat_template=str(template), max_turns=1,
                  on_extra_turns="split")
     .tokenizer.sentencepiece(files=[str(DATA / name)], pad_token="</s>")
     .units(sizes=[[256, 512, 1024, 2048]], build_batch=[128])
     .output.dir(str(out), samples_per_shard=[500])
     .run(on_overflow="abort", on_template_unk="abort", pipeline_options=IN_MEMORY))

    reference = MistralTokenizer.from_file(str(DATA / name), mode=ValidationMode.finetuning)
    _, records = shard_records(out)
    assert len(rows) >= 100 and len(records) > len(rows)
    for row, segments in records:
        source = rows[row["source_line"] - 1]["messages"]
        messages = [{"role": m["role"], "content": m["content"]} for m in source]
        replies = [k for k, m in enumerate(source)
                   if m["role"] == "assistant" and m.get("weight", 1)]
        part = row.get("part", 0)
        upto = messages if part + 1 == len(replies) else messages[:replies[part] + 1]
        want = reference.encode_chat_completion(ChatCompletionRequest(messages=upto)).tokens
        assert [i for s in segments for i in s] == want, (row["source_line"], part)
