"""`truncate` keeps the ends (issue 24): the bos / eos ids of a JSONL build survive, a
chat record keeps whole trained turns (each with its end-of-turn text), a preference
pair puts EOS after each completion and keeps it when the completions are cut, a pair
cut to the same tokens is skipped, and every index count is the record's. Also: `null`
message keys mean "not set", and string preference rows get the checks message rows
get. Real builds with real tokenizers; each checked by `verify`."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import IN_MEMORY, chatml_bpe, sentence, shard_records, write_jsonl
from mintdim_beam import UnitReader, pipeline
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core import errors
from mintdim_beam.core.formats import mintdim as fmt

@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    return chatml_bpe(tmp_path_factory.mktemp("truncation_tok"), 4, 600,
                      bos_token="<|im_start|>")


def _jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _ids(tok: Path, name: str) -> int:
    spec = json.loads((tok / "tokenizer.json").read_text())
    return next(t["id"] for t in spec["added_tokens"] if t["content"] == name)


def test_jsonl_truncation_keeps_bos_and_eos(tmp_path, tokenizers_dir):
    rng = random.Random(1)
    rows = [{"q": sentence(rng, 1, 3), "a": sentence(rng, 20, 40)} for _ in range(12)]
    rows.append({"q": "short", "a": "answer"})
    data = write_jsonl(tmp_path / "qa.jsonl", rows)
    out = tmp_path / "out"
    (pipeline("unit-build")
     .source.jsonl(files=[str(data)], fields=[["q", "a"]], templates=["Q {q} A {a}"])
     .tokenizer.sentencepiece(files=[str(tokenizers_dir / "sp.model")], bos=True, eos=True)
     .units(sizes=[[16, 32]], build_batch=[4])
     .output.dir(str(out), samples_per_shard=[5])
     .run(on_overflow="truncate", on_template_unk="continue", pipeline_options=IN_MEMORY))
    layout, records = shard_records(out)
    names = [f["name"] for f in layout["length_fields"]]
    assert names[0] == "bos" and names[-1] == "eos"
    truncated = {r["sample_id"] for r in _jsonl(out / fmt.OVERFLOW_INDEX) if r["action"] == "truncate"}
    assert len(truncated) >= 6
    for row, segments in records:
        assert segments[0] == [1] and segments[-1] == [2]  # the model's bos and eos ids
        if row["sample_id"] in truncated:
            assert row["token_count"] == 32 == row["unit_size"]  # the content was cut
    assert verify_output(str(out)).ok


def _chat(tok: Path, tmp_path: Path, rows, sizes, turns=2, name="out", eos=None) -> Path:
    data = write_jsonl(tmp_path / f"{name}.jsonl", rows)
    out = tmp_path / name
    (pipeline("unit-build")
     .source.chat(files=[str(data)], chat_template="chatml", max_turns=turns,
                  on_extra_turns="abort")
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"), eos=eos)
     .units(sizes=[list(sizes)], build_batch=[4])
     .output.dir(str(out), samples_per_shard=[4])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=IN_MEMORY))
    return out


def test_chat_truncation_keeps_whole_trained_turns(tmp_path, tok):
    rng = random.Random(2)
    long_reply = " ".join(sentence(rng, 30, 30) for _ in range(3))
    rows = [
        # the first exchange fits, the second reply does not: record cut after the first
        {"messages": [{"role": "user", "content": "Hi."},
                      {"role": "assistant", "content": "Hello there."},
                      {"role": "user", "content": "Tell me more."},
                      {"role": "assistant", "content": long_reply}]},
        # nothing whole to train on: skipped and indexed
        {"messages": [{"role": "user", "content": "Hi."},
                      {"role": "assistant", "content": long_reply}]},
        # fits as it is
        {"messages": [{"role": "user", "content": "Hi."},
                      {"role": "assistant", "content": "Hello."}]},
    ]
    out = _chat(tok, tmp_path, rows, sizes=(16, 32, 64), eos=True)
    end = _ids(tok, "<|im_end|>")
    layout, records = shard_records(out)
    kinds = [f["kind"] for f in layout["length_fields"]]
    names = [f["name"] for f in layout["length_fields"]]
    assert names[-1] == "eos"
    by_sid = {row["sample_id"]: (row, segs) for row, segs in records}
    assert sorted(by_sid) == [0, 2]
    row, segs = by_sid[0]
    trained = [s for s, k in zip(segs, kinds) if k == "trained"]
    assert trained[0] and trained[0][-2] == end  # the whole reply, <|im_end|> then "\n"
    assert trained[1] == [] and segs[names.index("context_1")] == []  # dropped with after
    assert segs[-1] == [end]  # eos=True: kept
    assert row["token_count"] == sum(map(len, segs)) < 64
    assert row["unit_size"] == min(u for u in (16, 32, 64) if u >= row["token_count"])
    overflow = {r["sample_id"]: r for r in _jsonl(out / fmt.OVERFLOW_INDEX)}
    assert overflow[0]["action"] == "truncate" and overflow[0]["token_count"] > 64
    assert overflow[1]["action"] == "skip" and overflow[1]["reason"] == fmt.CUT_REASON_CHAT
    assert verify_output(str(out)).ok


def _preference(tok: Path, tmp_path: Path, rows, sizes, name="pairs") -> Path:
    data = write_jsonl(tmp_path / f"{name}.jsonl", rows)
    out = tmp_path / name
    (pipeline("unit-build")
     .source.preference(files=[str(data)], chat_template="chatml")
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"), eos=True)
     .units(sizes=[list(sizes)], build_batch=[4])
     .output.dir(str(out), samples_per_shard=[4])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=IN_MEMORY))
    return out


def test_preference_eos_ends_each_completion_and_survives_the_cut(tmp_path, tok):
    rng = random.Random(3)
    rows = []
    for i in range(10):
        rows.append({"prompt": sentence(rng, 2, 5) + "?",
                     "chosen": " " + sentence(rng, 2, 30 if i % 2 else 4),
                     "rejected": " " + sentence(rng, 2, 25 if i % 3 else 3)})
    # a shared opening longer than the room the cut leaves: no preference left
    opening = " " + sentence(rng, 25, 25)
    rows.append({"prompt": "Go on?", "chosen": opening + " yes", "rejected": opening + " no"})
    out = _preference(tok, tmp_path, rows, sizes=(24, 33))
    eos = _ids(tok, "<|im_end|>")
    layout, records = shard_records(out)
    assert [f["name"] for f in layout["length_fields"]] == ["prompt", "chosen", "rejected"]
    overflow = {r["sample_id"]: r for r in _jsonl(out / fmt.OVERFLOW_INDEX)}
    assert overflow[10]["action"] == "skip"
    assert overflow[10]["reason"] == fmt.CUT_REASON_PREFERENCE
    cut = [sid for sid, r in overflow.items() if r["action"] == "truncate"]
    assert len(cut) >= 3
    for row, (prompt, chosen, rejected) in records:
        assert chosen[-1] == eos and rejected[-1] == eos
        assert eos not in chosen[:-1] and eos not in rejected[:-1]
        assert row["token_count"] == len(prompt) + len(chosen) + len(rejected)  # odd room too
        if row["sample_id"] in cut:
            assert chosen != rejected
            assert row["token_count"] <= 33
    assert verify_output(str(out)).ok
    reader = UnitReader(str(out), tokens_per_step=33 * 4, pairs=True, seed=0)
    seen = 0
    for batch in reader:
        for r in range(len(batch.ordinals)):
            if batch.valid[r]:
                labels = batch.chosen_labels[r][batch.chosen_labels[r] != -100]
                assert labels[-1] == eos
                seen += 1
    assert seen == len(records)


@pytest.mark.parametrize("row,problem", [
    ({"prompt": "Q?", "chosen": " same", "rejected": " same"}, "chosen and rejected are the same"),
    ({"prompt": "Q?", "chosen": "  ", "rejected": " no"}, "chosen: empty completion"),
    ({"prompt": "Q?", "chosen": " yes", "rejected": ""}, "rejected: empty completion")])
def test_string_pairs_get_the_checks_message_pairs_get(tmp_path, tok, row, problem):
    with pytest.raises(errors.SampleSchemaError) as info:
        _preference(tok, tmp_path, [{"prompt": "Q?", "chosen": " a", "rejected": " b"}, row],
                    sizes=(64,))
    assert info.value.kwargs["line"] == 2 and problem in info.value.kwargs["problem"]


def test_null_message_keys_mean_not_set(tmp_path, tok):
    """What `datasets.Dataset.from_list(rows).to_json()` writes: every key of any message
    in every message, null where unset."""
    plain = [{"messages": [{"role": "user", "content": "Hi."},
                           {"role": "assistant", "content": "Hello.", "weight": 0},
                           {"role": "user", "content": "And?"},
                           {"role": "assistant", "content": "Bye."}]}]
    padded = [{"messages": [{**m, **{k: m.get(k) for k in ("weight", "name", "tool_calls")}}
                            for m in plain[0]["messages"]]}]
    assert padded[0]["messages"][0]["weight"] is None
    a = _chat(tok, tmp_path, plain, sizes=(64,), name="plain")
    b = _chat(tok, tmp_path, padded, sizes=(64,), name="padded")
    for name in ("sample_index.jsonl", "unit_64/shard_000000.bin"):
        if name.endswith(".jsonl"):
            assert [{**r, "source_file": ""} for r in _jsonl(a / name)] == \
                [{**r, "source_file": ""} for r in _jsonl(b / name)]
        else:
            assert np.array_equal(np.fromfile(a / name, "<u2"), np.fromfile(b / name, "<u2"))
