"""The bundled chat example (examples/chat): its configs build through the console
script, the records hold what the chat template renders (each trained segment decodes
to the assistant's reply and its end-of-turn), and tools/make_chat_example.py recreates
the bundled files byte for byte."""
import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
import pytest
import yaml
from tokenizers import Tokenizer

from conftest import shard_records

REPO = Path(__file__).resolve().parents[1]
CHAT = REPO / "examples/chat"
IM_END = "<|im_end|>\n"


def _run(args, cwd=REPO):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _build(tmp_path: Path, name: str, **source_changes) -> Path:
    """Build examples/chat/<name>.yaml as users do (from the repository root), its output
    redirected to tmp_path."""
    doc = yaml.safe_load((CHAT / f"{name}.yaml").read_text())
    out = tmp_path / name
    doc["output"]["dir"] = str(out)
    doc["source"].update(source_changes)
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(doc, allow_unicode=True))
    proc = _run(["mintdim-beam", "build", str(config), "--runner=FnApiRunner"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[:3000]
    assert json.loads(proc.stdout)["outputs"][0]["output_dir"] == str(out)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("chat_example")
    return {name: _build(root, name) for name in ("chat_build", "llama3_build", "preference_build")}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(CHAT / "tokenizer.json"))


def _lines(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _fields(layout) -> list:
    return [(f["name"], f["kind"]) for f in layout["length_fields"]]


def _trained_replies(messages) -> list:
    return [m["content"] for m in messages if m["role"] == "assistant" and m.get("weight", 1) == 1]


def _render(messages, **kw) -> str:
    """The tokenizer config's chat template, rendered by plain Jinja (as transformers does)."""
    template = json.loads((CHAT / "tokenizer_config.json").read_text())["chat_template"]
    return jinja2.Environment().from_string(template).render(messages=messages, **kw)


def test_chatml_records_hold_each_reply_and_its_end_of_turn(built, tokenizer):
    dialogues = [row["messages"] for row in _lines(CHAT / "dialogues.jsonl")]
    layout, records = shard_records(built["chat_build"])
    assert _fields(layout) == [("context_0", "context"), ("assistant_0", "trained"),
                               ("context_1", "context"), ("assistant_1", "trained"),
                               ("context_2", "context")]
    replies = [_trained_replies(m) for m in dialogues]
    # max_turns 2, split: a dialogue with T trained replies gives ceil(T / 2) records
    assert len(records) == sum(-(-len(r) // 2) for r in replies) == 1163
    assert sum(1 for m in dialogues if any(t.get("weight") == 0 for t in m)) > 10
    assert (built["chat_build"] / "overflow_index.jsonl").read_text() == ""
    parts = {}
    for row, segments in records:
        dialogue, part = row["sample_id"], row["part"]
        assert row["source_line"] == dialogue + 1
        assert part == parts.get(dialogue, -1) + 1
        parts[dialogue] = part
        own = replies[dialogue][2 * part:2 * part + 2]
        for i in range(2):
            text = tokenizer.decode(segments[2 * i + 1], skip_special_tokens=False)
            assert text == (own[i] + IM_END if i < len(own) else ""), (row, i)
        if 2 * part + 2 >= len(replies[dialogue]):  # the last record ends where the dialogue ends
            whole = tokenizer.decode(sum(segments, []), skip_special_tokens=False)
            assert whole == _render(dialogues[dialogue])
    assert len(parts) == len(dialogues)


def test_llama3_records_use_the_header_tokens_and_eot(built, tokenizer):
    dialogues = [row["messages"] for row in _lines(CHAT / "dialogues.jsonl")]
    layout, records = shard_records(built["llama3_build"])
    assert [name for name, _ in _fields(layout)] == [
        "context_0", "assistant_0", "context_1", "assistant_1", "context_2", "assistant_2",
        "context_3"]
    assert len(records) == len(dialogues)  # max_turns 3: every bundled dialogue fits one record
    special = {tokenizer.token_to_id(t) for t in ("<|begin_of_text|>", "<|start_header_id|>",
                                                  "<|end_header_id|>", "<|eot_id|>")}
    assert None not in special
    for row, segments in records:
        assert segments[0][0] == tokenizer.token_to_id("<|begin_of_text|>")
        assert tokenizer.decode(segments[0][:2], skip_special_tokens=False) == \
            "<|begin_of_text|><|start_header_id|>"
        replies = _trained_replies(dialogues[row["sample_id"]])
        for i, reply in enumerate(replies):
            assert tokenizer.decode(segments[2 * i + 1], skip_special_tokens=False) == \
                reply.strip() + "<|eot_id|>"


def test_sharegpt_copy_gives_the_sameshard_records(built, tmp_path):
    out = _build(tmp_path, "chat_build", files=["examples/chat/dialogues_sharegpt.jsonl"],
                 format="sharegpt")
    _, shared = shard_records(out)
    _, messages = shard_records(built["chat_build"])
    first = [(r["sample_id"], r["part"], s) for r, s in messages if r["sample_id"] < 200]
    assert [(r["sample_id"], r["part"], s) for r, s in shared] == first


def test_preferenceshard_records(built, tokenizer):
    pairs = _lines(CHAT / "preference.jsonl")
    layout, records = shard_records(built["preference_build"])
    assert _fields(layout) == [("prompt", "context"), ("chosen", "trained"),
                               ("rejected", "trained")]
    assert len(records) == len(pairs) == 300
    shapes = set()
    for row, segments in records:
        pair = pairs[row["sample_id"]]
        prompt, chosen, rejected = (tokenizer.decode(s, skip_special_tokens=False)
                                    for s in segments)
        if isinstance(pair["chosen"], str):  # TRL's standard shape: the strings as given
            shapes.add("strings")
            assert (prompt, chosen, rejected) == (pair["prompt"], pair["chosen"], pair["rejected"])
            continue
        shapes.add("explicit" if "prompt" in pair else "implicit")
        asked = pair.get("prompt") or pair["chosen"][:-1]
        assert prompt == _render(asked, add_generation_prompt=True)
        assert prompt.endswith("<|im_start|>assistant\n")
        assert chosen == pair["chosen"][-1]["content"] + IM_END
        assert rejected == pair["rejected"][-1]["content"] + IM_END
    assert shapes == {"strings", "explicit", "implicit"}


def test_make_chat_example_is_deterministic_and_made_the_bundled_files(tmp_path):
    runs = []
    for name in ("a", "b"):
        proc = _run([sys.executable, str(REPO / "tools/make_chat_example.py"), str(tmp_path / name)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert runs[0] == runs[1]
    assert sorted(runs[0]) == ["dialogues.jsonl", "dialogues_sharegpt.jsonl", "preference.jsonl",
                               "tokenizer.json", "tokenizer_config.json"]
    # The data and config are pure Python; tokenizer.json is the bundled one with the
    # tokenizers version that trained it (other versions may merge ties differently).
    for name in ("dialogues.jsonl", "dialogues_sharegpt.jsonl", "preference.jsonl",
                 "tokenizer_config.json"):
        assert runs[0][name] == (CHAT / name).read_bytes(), name
    assert sum(len(data) for data in runs[0].values()) < 1_500_000
