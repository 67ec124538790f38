"""Chat and preference data through the whole pipeline: real byte-level BPE tokenizers,
real runners, bytes compared across runners and input shapes, transformers' own
`apply_chat_template` as the reference for the token ids, and every policy the issue
names (extra turns, truncation that would leave nothing to train on, injection)."""
import json
import random
from pathlib import Path

import numpy as np
import pytest

from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.formats import mintdim as fmt

from conftest import BUNDLE_RETRYING, IN_MEMORY, MULTI_PROCESS, byte_level_bpe, read_tree

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
WORDS = ("the model answers questions about data shards tokens training loss mask turn "
         "please explain why how what when where could you tell me more about this "
         "xin chào các bạn 你好 世界 café naïve").split()


def sentence(rng, low=3, high=12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def dialogue(rng, exchanges: int, system: bool) -> list:
    messages = [{"role": "system", "content": sentence(rng)}] if system else []
    for _ in range(exchanges):
        messages += [{"role": "user", "content": sentence(rng)},
                     {"role": "assistant", "content": sentence(rng, 1, 30)}]
    return messages


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    """A byte-level BPE without UNK (like Llama 3 or Qwen), pad and eos in its config."""
    rng = random.Random(7)
    work = tmp_path_factory.mktemp("tok")
    byte_level_bpe(work, [sentence(rng, 5, 20) for _ in range(3000)], SPECIALS, 800, {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>"})
    return work


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _chat(tmp, tok, files, out, *, template="chatml", fmt="messages", turns=2,
          extra="split", sizes=(32, 64, 128), overflow="truncate", options=IN_MEMORY):
    return (pipeline("unit-build")
            .source.chat(files=[str(f) for f in files], format=fmt, chat_template=template,
                         max_turns=turns, on_extra_turns=extra)
            .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                               config=str(tok / "tokenizer_config.json"))
            .units(sizes=[list(sizes)], build_batch=[16])
            .output.dir(str(out), samples_per_shard=[50])
            .run(on_overflow=overflow, on_template_unk="abort", pipeline_options=list(options)))


def _records(out: Path):
    """(sample rows, records as (segment lengths, payload ids)) in sample_index order."""
    layout = json.loads((out / "length_field.json").read_text())
    n = len(layout["sequence_template"])
    rows = [json.loads(line) for line in (out / "sample_index.jsonl").read_text().splitlines()]
    shards, records = {}, []
    for row in rows:
        if row["shard_path"] not in shards:
            unit = row["unit_size"]
            data = np.fromfile(out / row["shard_path"], dtype="<u2").reshape(-1, 1 + n + unit)
            shards[row["shard_path"]] = iter(data)
        record = next(shards[row["shard_path"]])
        lengths = record[1:1 + n].astype(int)
        records.append((lengths, record[1 + n:1 + n + lengths.sum()].astype(int).tolist()))
    return rows, records


@pytest.fixture(scope="module")
def dialogues(tmp_path_factory) -> Path:
    rng = random.Random(11)
    rows = [{"messages": dialogue(rng, 1 + i % 3, i % 4 == 0)} for i in range(120)]
    return _write(tmp_path_factory.mktemp("data") / "chat.jsonl", rows)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tok, dialogues) -> Path:
    """The default build of `dialogues` (in memory, ChatML, two trained turns a record,
    split): what the other runners, retries, ShareGPT and the command are compared with."""
    out = tmp_path_factory.mktemp("reference") / "out"
    _chat(out.parent, tok, [dialogues], out)
    return out


def test_same_bytes_on_every_runner_and_range_size(tmp_path, tok, dialogues, reference):
    _chat(tmp_path, tok, [dialogues], tmp_path / "b",
          options=MULTI_PROCESS + ["--input_range_bytes=700"])
    assert read_tree(reference) == read_tree(tmp_path / "b")
    rows, records = _records(reference)
    assert len(rows) > 120  # dialogues with 3 trained turns split into two records
    assert [r["part"] for r in rows if r["sample_id"] == 2] == [0, 1]


@pytest.mark.slow
def test_injected_retries_give_the_same_bytes(tmp_path, tok, dialogues, reference, monkeypatch):
    """Every bundle's first attempt fails (tokenize, write, finalize); the retrying runner
    must give the bytes of a clean build."""
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize,write,finalize@{markers}")
    _chat(tmp_path, tok, [dialogues], tmp_path / "retried",
          options=BUNDLE_RETRYING + ["--input_range_bytes=3000"])
    assert any(markers.iterdir())
    assert read_tree(reference) == read_tree(tmp_path / "retried")


@pytest.mark.slow
def test_portable_runner_gives_the_same_bytes(tmp_path, tok, dialogues, reference,
                                              portable_flags):
    _chat(tmp_path, tok, [dialogues], tmp_path / "b",
          options=portable_flags + ["--input_range_bytes=1000"])
    assert read_tree(reference) == read_tree(tmp_path / "b")


@pytest.mark.parametrize("template", ["chatml", "llama3"])
def test_segment_ids_equal_transformers_apply_chat_template(tmp_path, tok, dialogues, template):
    """The trained and context segments of each record, concatenated, are exactly what
    transformers' apply_chat_template(tokenize=True) gives for the same dialogue."""
    from transformers import PreTrainedTokenizerFast

    from mintdim_beam.core.chat import builtin_template

    out = tmp_path / "out"
    _chat(tmp_path, tok, [dialogues], out, template=template, turns=3, sizes=(256,))
    reference = PreTrainedTokenizerFast(tokenizer_file=str(tok / "tokenizer.json"),
                                        bos_token="<|begin_of_text|>", eos_token="<|im_end|>")
    reference.chat_template = builtin_template(template)
    rows, records = _records(out)
    lines = dialogues.read_text(encoding="utf-8").splitlines()
    assert len(rows) == len(lines)
    for row, (lengths, ids) in zip(rows, records):
        messages = json.loads(lines[row["source_line"] - 1])["messages"]
        expected = reference.apply_chat_template(messages, tokenize=True)
        expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
        assert ids == expected, row["source_line"]
        trained = sum(lengths[1::2])
        assert trained > 0


def _through_turn(messages: list, turn: int) -> list:
    """The messages up to and including the `turn`-th trained assistant turn."""
    trained = [k for k, m in enumerate(messages)
               if m["role"] == "assistant" and m.get("weight", 1)]
    return messages[:trained[turn] + 1]


@pytest.mark.parametrize("template", ["chatml", "llama3"])
def test_split_records_equal_transformers_on_each_prefix_of_the_dialogue(tmp_path, tok,
                                                                         dialogues, template):
    """With one trained turn per record, part j of a dialogue holds everything up to its
    turn: exactly apply_chat_template of those messages. Its history is the ids the part
    before it holds (reused, not encoded again), so part j-1 is a prefix of part j."""
    from transformers import PreTrainedTokenizerFast

    from mintdim_beam.core.chat import builtin_template

    out = tmp_path / "out"
    _chat(tmp_path, tok, [dialogues], out, template=template, turns=1, sizes=(256,))
    reference = PreTrainedTokenizerFast(tokenizer_file=str(tok / "tokenizer.json"),
                                        bos_token="<|begin_of_text|>", eos_token="<|im_end|>")
    reference.chat_template = builtin_template(template)
    rows, records = _records(out)
    lines = dialogues.read_text(encoding="utf-8").splitlines()
    parts = [r["part"] for r in rows]
    assert max(parts) == 2 and len(rows) > len(lines)
    previous = None
    for row, (lengths, ids) in zip(rows, records):
        messages = json.loads(lines[row["source_line"] - 1])["messages"]
        last = row["part"] + 1 == sum(m["role"] == "assistant" for m in messages)
        upto = messages if last else _through_turn(messages, row["part"])
        expected = reference.apply_chat_template(upto, tokenize=True)
        expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
        assert ids == expected, (row["source_line"], row["part"])
        if row["part"]:
            assert ids[:len(previous)] == previous and lengths[0] > len(previous)
        previous = ids


def test_sharegpt_and_messages_give_the_same_records(tmp_path, tok, dialogues, reference):
    aliases = {"user": "human", "assistant": "gpt", "system": "system"}
    rows = [json.loads(line) for line in dialogues.read_text(encoding="utf-8").splitlines()]
    share = _write(tmp_path / "share.jsonl", [{"conversations": [
        {"from": aliases[m["role"]], "value": m["content"]} for m in r["messages"]]} for r in rows])
    _chat(tmp_path, tok, [share], tmp_path / "b", fmt="sharegpt")
    a, b = read_tree(reference), read_tree(tmp_path / "b")
    for name in a:
        if name.endswith(".bin") or name == "length_field.json":
            assert a[name] == b[name], name
    hashes = [[json.loads(x)["hash"] for x in t["sample_index.jsonl"].splitlines()] for t in (a, b)]
    assert hashes[0] == hashes[1]


@pytest.mark.parametrize("bad, index, words", [
    ({"messages": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x"}]},
     0, "assistant"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                   {"role": "assistant", "content": "c"}]}, 1, "user"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None}]},
     1, "assistant"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]},
     1, "role"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "url": "x"}]},
                   {"role": "assistant", "content": "b"}]}, 0, "image"),
])
def test_a_messy_dialogue_names_file_line_and_message(tmp_path, tok, bad, index, words):
    rng = random.Random(3)
    rows = [{"messages": dialogue(rng, 1, False)} for _ in range(5)]
    data = _write(tmp_path / "data.jsonl", rows[:3] + [bad] + rows[3:])
    with pytest.raises(errors.SampleSchemaError) as info:
        _chat(tmp_path, tok, [data], tmp_path / "out")
    kwargs = info.value.kwargs
    assert kwargs["file"] == str(data) and kwargs["line"] == 4
    assert kwargs["message_index"] == index and words in kwargs["problem"]
    assert "Message index" in info.value.english and "Vị trí message" in info.value.vietnamese
    assert not (tmp_path / "out/manifest.json").exists()


def test_extra_turns_abort_and_skip(tmp_path, tok):
    rng = random.Random(5)
    rows = [{"messages": dialogue(rng, 1, False)}, {"messages": dialogue(rng, 3, False)},
            {"messages": dialogue(rng, 1, False)}]
    data = _write(tmp_path / "data.jsonl", rows)
    with pytest.raises(errors.SampleSchemaError) as info:
        _chat(tmp_path, tok, [data], tmp_path / "abort", turns=2, extra="abort")
    assert info.value.kwargs["line"] == 2
    _chat(tmp_path, tok, [data], tmp_path / "skip", turns=2, extra="skip")
    index = [json.loads(x) for x in (tmp_path / "skip/sample_index.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in index] == [0, 2] and "part" not in index[0]
    overflow = [json.loads(x) for x in (tmp_path / "skip/overflow_index.jsonl").read_text().splitlines()]
    assert overflow == [{"sample_id": 1, "source_file": str(data), "source_line": 2,
                         "token_count": None, "max_unit_size": 128, "action": "skip",
                         "trained_turns": 3}]


def test_truncation_never_leaves_a_record_without_a_whole_trained_turn(tmp_path, tok):
    rng = random.Random(9)
    long_prompt = " ".join(rng.choice(WORDS) for _ in range(120))
    rows = [{"messages": [{"role": "user", "content": "Hi."},
                          {"role": "assistant", "content": "Hello there."}]},
            {"messages": [{"role": "user", "content": long_prompt},
                          {"role": "assistant", "content": "Short answer."}]},
            {"messages": [{"role": "user", "content": "Hi."},
                          {"role": "assistant", "content": long_prompt}]}]
    data = _write(tmp_path / "data.jsonl", rows)
    _chat(tmp_path, tok, [data], tmp_path / "out", turns=1, sizes=(16, 32))
    overflow = {r["sample_id"]: r for r in map(
        json.loads, (tmp_path / "out/overflow_index.jsonl").read_text().splitlines())}
    # a long prompt leaves no room for the reply; a reply cut mid-way would train a
    # model to stop without its end-of-turn: both records are skipped and indexed
    for sid in (1, 2):
        assert overflow[sid]["action"] == "skip"
        assert overflow[sid]["reason"] == fmt.CUT_REASON_CHAT
    rows, records = _records(tmp_path / "out")
    assert [r["sample_id"] for r in rows] == [0]
    assert all(lengths[1] > 0 for lengths, _ in records)


def test_special_token_text_in_user_content_is_plain_text(tmp_path, tok):
    from tokenizers import Tokenizer

    data = _write(tmp_path / "data.jsonl", [{"messages": [
        {"role": "user", "content": "Say <|im_end|> please."},
        {"role": "assistant", "content": "Done <|im_start|>system"}]}])
    _chat(tmp_path, tok, [data], tmp_path / "out", turns=1)
    rows, [(lengths, ids)] = _records(tmp_path / "out")
    tokenizer = Tokenizer.from_file(str(tok / "tokenizer.json"))
    im_start, im_end = tokenizer.token_to_id("<|im_start|>"), tokenizer.token_to_id("<|im_end|>")
    # Template text keeps its specials: each turn opens with <|im_start|> and closes with
    # <|im_end|>; the user's and the assistant's typed ones are plain text.
    assert ids.count(im_start) == 2 and ids.count(im_end) == 2
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert text.count("<|im_end|>") == 3 and text.count("<|im_start|>") == 3


def test_preference_pairs_strings_and_messages_and_even_truncation(tmp_path, tok):
    rng = random.Random(13)
    long = " ".join(rng.choice(WORDS) for _ in range(80))
    rows = [{"prompt": "Question: " + sentence(rng), "chosen": " " + sentence(rng),
             "rejected": " " + sentence(rng)},
            {"prompt": [{"role": "user", "content": sentence(rng)}],
             "chosen": [{"role": "assistant", "content": sentence(rng)}],
             "rejected": [{"role": "assistant", "content": long}]},
            {"chosen": [{"role": "user", "content": "Same prompt."},
                        {"role": "assistant", "content": long}],
             "rejected": [{"role": "user", "content": "Same prompt."},
                          {"role": "assistant", "content": "No."}]}]
    data = _write(tmp_path / "pairs.jsonl", rows)
    (pipeline("unit-build")
     .source.preference(files=[str(data)], chat_template="chatml")
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"))
     .units(sizes=[[64]], build_batch=[4])
     .output.dir(str(tmp_path / "out"), samples_per_shard=[10])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=list(IN_MEMORY)))
    layout = json.loads((tmp_path / "out/length_field.json").read_text())
    assert layout["sequence_template"] == ["prompt", "chosen", "rejected"]
    assert [f["kind"] for f in layout["length_fields"]] == ["context", "trained", "trained"]
    rows, records = _records(tmp_path / "out")
    assert len(records) == 3
    (p0, c0, r0), _ = records[0]
    assert sum((p0, c0, r0)) <= 64
    (p1, c1, r1), _ = records[1]  # rejected was long: cut, chosen kept whole
    (p2, c2, r2), _ = records[2]  # chosen was long: cut, rejected kept whole
    assert p1 + c1 + r1 == 64 and r1 > c1 and p2 + c2 + r2 == 64 and c2 > r2
    overflow = [json.loads(x) for x in (tmp_path / "out/overflow_index.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["action"]) for r in overflow] == [(1, "truncate"), (2, "truncate")]


def test_a_config_file_builds_chat_through_the_command(tmp_path, tok, dialogues, reference):
    import os
    import subprocess
    import sys

    config = {"source": {"type": "chat", "files": [str(dialogues)], "format": "messages",
                         "chat_template": "chatml", "max_turns": 2},
              "tokenizer": {"type": "hf_json", "files": [str(tok / "tokenizer.json")],
                            "config": str(tok / "tokenizer_config.json")},
              "units": {"sizes": [[32, 64, 128]], "build_batch": [16]},
              "output": {"dir": str(tmp_path / "cli"), "samples_per_shard": [50]},
              "on_overflow": "truncate", "on_template_unk": "abort"}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(config))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run([str(Path(sys.executable).parent / "mintdim-beam"), "build", str(path),
                           "--runner=FnApiRunner"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cli, api = read_tree(tmp_path / "cli"), read_tree(reference)
    assert {k: v for k, v in cli.items() if k.endswith(".bin")} == \
        {k: v for k, v in api.items() if k.endswith(".bin")}
    manifest = json.loads((tmp_path / "cli/manifest.json").read_text())
    assert manifest["source"]["type"] == "chat" and manifest["tokenizer"]["unk_id"] is None


def test_a_chat_config_error_comes_before_any_output(tmp_path, tok, dialogues):
    with pytest.raises(errors.PipelineValidationError):
        _chat(tmp_path, tok, [dialogues], tmp_path / "out", template="tokenizer")  # none in config
    with pytest.raises(errors.MintDimFileNotFoundError):
        _chat(tmp_path, tok, [dialogues], tmp_path / "out", template=str(tmp_path / "x.jinja"))
    with pytest.raises(errors.PipelineValidationError):
        _chat(tmp_path, tok, [dialogues], tmp_path / "out", extra="sometimes")
    for bound in (1, 0, "many", 2.5):
        with pytest.raises(errors.PipelineValidationError, match="max_messages"):
            (pipeline("unit-build")
             .source.chat(files=[str(dialogues)], chat_template="chatml", max_messages=bound)
             .tokenizer.hf_json(files=[str(tok / "tokenizer.json")])
             .units(sizes=[[64]], build_batch=[16])
             .output.dir(str(tmp_path / "out"), samples_per_shard=[10])
             .run(pipeline_options=IN_MEMORY))
    assert not (tmp_path / "out").exists()


def test_plan_histograms_count_the_records_a_build_writes(tmp_path, tok, dialogues):
    """`mintdim-beam plan` on a chat source: one count per record (split ones too)."""
    from mintdim_beam.audit.plan import token_histograms

    raw = {"source": {"type": "chat", "files": [str(dialogues)], "format": "messages",
                      "chat_template": "chatml", "max_turns": 2},
           "tokenizer": {"type": "hf_json", "files": [str(tok / "tokenizer.json")],
                         "config": str(tok / "tokenizer_config.json")},
           "units": {"sizes": [[32, 64, 128]], "build_batch": [16]},
           "output": {"dir": str(tmp_path / "plan"), "samples_per_shard": [50]}}
    _, histograms = token_histograms(raw, list(IN_MEMORY))
    _chat(tmp_path, tok, [dialogues], tmp_path / "out", sizes=(1000,))
    rows, _ = _records(tmp_path / "out")
    counts = {}
    for row in rows:
        counts[row["token_count"]] = counts.get(row["token_count"], 0) + 1
    assert histograms[0] == counts


def test_a_template_printing_a_function_is_a_config_error_before_any_output(tmp_path, tok):
    """`{{ strftime_now }}` without a call would write a per-process memory address into
    every record (issue 25): the probe render finds it, nothing is written."""
    template = tmp_path / "bad.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}{{ strftime_now }}")
    data = _write(tmp_path / "d.jsonl", [{"messages": dialogue(random.Random(1), 1, False)}])
    with pytest.raises(errors.PipelineValidationError) as info:
        _chat(tmp_path, tok, [data], tmp_path / "out", template=str(template))
    assert "prints a function" in str(info.value) and "line 1" in str(info.value)
    assert not (tmp_path / "out").exists()


def _long_dialogue(rng, messages: int) -> list:
    out = []
    for i in range(messages // 2):
        out += [{"role": "user", "content": f"question {i}: {sentence(rng, 4, 6)}"},
                {"role": "assistant", "content": f"answer {i}: {sentence(rng, 4, 6)}"}]
    return out


def _limited_build(tmp_path, tok, name: str, rows) -> "subprocess.CompletedProcess":
    """`mintdim-beam build` of `rows` (split, one trained turn per record) in a process
    whose address space is limited to 3 GiB (a real rlimit)."""
    import resource
    import subprocess
    import sys

    data = _write(tmp_path / f"{name}.jsonl", rows)
    config = {"source": {"type": "chat", "files": [str(data)], "format": "messages",
                         "chat_template": "chatml", "max_turns": 1, "on_extra_turns": "split"},
              "tokenizer": {"type": "hf_json", "files": [str(tok / "tokenizer.json")],
                            "config": str(tok / "tokenizer_config.json")},
              "units": {"sizes": [[64, 256, 1024]], "build_batch": [64]},
              "output": {"dir": str(tmp_path / name), "samples_per_shard": [100]}}
    (tmp_path / f"{name}.json").write_text(json.dumps(config))
    limit = 3 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "build",
                           str(tmp_path / f"{name}.json"), "--on_overflow=skip"],
                          capture_output=True, text=True, timeout=300, preexec_fn=cap)


@pytest.mark.slow
def test_a_10000_turn_dialogue_is_a_bad_row_under_a_memory_limit(tmp_path, tok):
    """The probe's row: 10,000 messages (about 800 KB, far under --max_line_bytes) used to
    pass 12 GiB; over max_messages it is a SampleSchemaError at its file and line, before
    it is rendered, and no output looks complete."""
    rng = random.Random(3)
    rows = [{"messages": _long_dialogue(rng, 4)}, {"messages": _long_dialogue(rng, 10_000)},
            {"messages": _long_dialogue(rng, 4)}]
    proc = _limited_build(tmp_path, tok, "big", rows)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "SampleSchemaError" in proc.stderr and "big.jsonl" in proc.stderr
    assert "10,000 messages, more than max_messages=1,024" in proc.stderr
    assert not (tmp_path / "big/manifest.json").exists()


@pytest.mark.slow
def test_a_long_split_dialogue_builds_under_a_memory_limit_each_part_on_the_last(tmp_path,
                                                                                 tok):
    """1,000 messages under `split` with one trained turn per record: 500 parts, each
    holding the one before it (its ids reused, not encoded again); the parts too long
    for the largest unit are indexed as overflow."""
    rng = random.Random(4)
    rows = [{"messages": _long_dialogue(rng, 4)}, {"messages": _long_dialogue(rng, 1000)},
            {"messages": _long_dialogue(rng, 6)}]
    proc = _limited_build(tmp_path, tok, "mid", rows)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "mid"
    kept, records = _records(out)
    overflow = [json.loads(x) for x in (out / fmt.OVERFLOW_INDEX).read_text().splitlines()]
    parts = sorted([r["part"] for r in kept if r["source_line"] == 2]
                   + [r["part"] for r in overflow if r["source_line"] == 2])
    assert parts == list(range(500)) and overflow
    long = [ids for row, (_, ids) in zip(kept, records) if row["source_line"] == 2]
    assert len(long) > 20 and all(a == b[:len(a)] for a, b in zip(long, long[1:]))
