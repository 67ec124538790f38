"""`verify` and `report` on real chat, split-chat and preference builds: clean builds
verify clean, each damage only a dialogue build can have is named, and the report's
trained / context tokens equal a direct count of the shards' segment lengths."""
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import IN_MEMORY, REPO, byte_level_bpe, copy_to_memory_fs, without_checksums
from mintdim_beam import pipeline
from mintdim_beam.audit.report import write_report
from mintdim_beam.audit.verify import verify_output
from mintdim_beam.core.formats import mintdim as fmt

GOLDEN = REPO / "tests/golden/overflow_truncate_multisegment/expected/out"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>"]
WORDS = ("the model answers questions about data shards tokens training loss mask turn "
         "user assistant system hello world please explain why how what when").split()


def sentence(rng, low, high) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    """A tiny byte-level BPE without UNK; pad, bos and eos from its tokenizer_config."""
    rng = random.Random(0)
    work = tmp_path_factory.mktemp("audit_dialogue_tok")
    byte_level_bpe(work, [sentence(rng, 5, 15) for _ in range(1500)], SPECIALS, 500, {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>"})
    return work


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _dialogues() -> list:
    """1-3 exchanges, some with a system prompt, some long (truncated), some with a
    system prompt too long to leave a trained token, repeated dialogues and one whose
    two exchanges are identical (its split records are duplicates of each other)."""
    rng = random.Random(5)
    rows = []
    for i in range(90):
        messages = [{"role": "system", "content": sentence(rng, 3, 8)}] if i % 4 == 0 else []
        if i % 17 == 3:
            messages = [{"role": "system", "content": sentence(rng, 60, 70)}]
        for _ in range(1 + i % 3):
            messages += [{"role": "user", "content": sentence(rng, 2, 8)},
                         {"role": "assistant",
                          "content": sentence(rng, 30, 40) if i % 7 == 1 else sentence(rng, 1, 12)}]
        rows.append({"messages": messages})
        if i % 20 == 0:
            rows.append({"messages": list(messages)})
    same = [{"role": "user", "content": "Hello world."}, {"role": "assistant", "content": "Hello."}]
    rows += [{"messages": same + same}, {"messages": same + same}]
    return rows


def _pairs() -> list:
    rng = random.Random(6)
    rows = []
    for i in range(40):
        if i % 2:
            chosen = sentence(rng, 30, 40) if i % 5 == 1 else sentence(rng, 2, 10)  # 30+: cut
            rows.append({"prompt": [{"role": "user", "content": sentence(rng, 2, 8)}],
                         "chosen": [{"role": "assistant", "content": chosen}],
                         "rejected": [{"role": "assistant", "content": sentence(rng, 1, 6)}]})
        else:
            rows.append({"prompt": sentence(rng, 2, 6), "chosen": " " + sentence(rng, 1, 8),
                         "rejected": " " + sentence(rng, 1, 5)})
    return rows


def _chat_build(tok, out: Path, data: Path, *, turns, extra, sizes, bos=None, eos=None,
                options=()) -> Path:
    (pipeline("unit-build")
     .source.chat(files=[str(data)], chat_template="chatml", max_turns=turns,
                  on_extra_turns=extra)
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"), bos=bos, eos=eos)
     .units(sizes=[list(sizes)], build_batch=[16])
     .output.dir(str(out), samples_per_shard=[20])
     .run(on_overflow="truncate", on_template_unk="abort",
          pipeline_options=[*IN_MEMORY, *options]))
    return out


@pytest.fixture(scope="module")
def builds(tok, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("audit_dialogues")
    chat = _write(root / "data/chat.jsonl", _dialogues())
    pairs = _write(root / "data/pairs.jsonl", _pairs())
    out = {
        # every dialogue fits: one record per line, bos and eos literal segments around
        "chat": _chat_build(tok, root / "chat", chat, turns=3, extra="abort",
                            sizes=(32, 64, 128), bos=True, eos=True),
        # one record per exchange; skips: a record whose one trained turn does not fit
        "split": _chat_build(tok, root / "split", chat, turns=1, extra="split", sizes=(16, 32, 48)),
        "skip": _chat_build(tok, root / "skip", chat, turns=2, extra="skip", sizes=(64, 128)),
    }
    (pipeline("unit-build")
     .source.preference(files=[str(pairs)], chat_template="chatml")
     .tokenizer.hf_json(files=[str(tok / "tokenizer.json")],
                        config=str(tok / "tokenizer_config.json"), eos=True)
     .units(sizes=[[24, 48]], build_batch=[16])
     .output.dir(str(root / "preference"), samples_per_shard=[8])
     .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=IN_MEMORY))
    out["preference"] = root / "preference"
    return out


def _rows(out: Path, name=fmt.SAMPLE_INDEX) -> list:
    return [json.loads(line) for line in (out / name).read_text("utf-8").splitlines()]


def _write_rows(out: Path, rows, name=fmt.SAMPLE_INDEX) -> None:
    (out / name).write_text("".join(fmt.jsonl_row(r) for r in rows), encoding="utf-8")


def _copy(builds, name, tmp_path) -> Path:
    copy = tmp_path / name
    shutil.copytree(builds[name], copy)
    return without_checksums(copy)  # the structural checks alone


def _problems(out: Path) -> list[str]:
    result = verify_output(str(out), max_problems=200)
    assert not result.ok
    return [str(p) for p in result.problems]


def _has(problems, *words) -> bool:
    return any(all(w in p for w in words) for p in problems)


# ------------------------------------------------------------------ clean builds

@pytest.mark.parametrize("name", ["chat", "split", "skip", "preference"])
def test_dialogue_builds_verify_clean(builds, name):
    out = builds[name]
    result = verify_output(str(out))
    assert result.ok, [str(p) for p in result.problems]
    stats = json.loads((out / fmt.STATS).read_text())
    assert (result.records, result.tokens) == (stats["total_samples"], stats["total_tokens"])


def test_the_builds_hold_what_the_checks_are_about(builds):
    """The fixtures really have parts, skips, duplicates across parts and literals."""
    split = _rows(builds["split"])
    assert all(list(r)[-1] == "part" for r in split)
    keys = [(r["sample_id"], r["part"]) for r in split]
    assert keys == sorted(keys) and len({k[0] for k in keys}) < len(keys)
    overflow = _rows(builds["split"], fmt.OVERFLOW_INDEX)
    # truncate keeps whole turns: a record's one trained turn that does not fit is a skip
    assert {r["action"] for r in overflow} == {"skip"}
    assert all(list(r)[-1] == "part" for r in overflow)
    assert any(r.get("reason") == fmt.CUT_REASON_CHAT for r in overflow)
    pair_cuts = _rows(builds["preference"], fmt.OVERFLOW_INDEX)
    assert {r["action"] for r in pair_cuts} == {"truncate"}
    groups = _rows(builds["split"], fmt.DUPLICATE_INDEX)  # two parts, two groups, one first id
    firsts = [g["samples"][0]["sample_id"] for g in groups]
    assert len(set(firsts)) < len(firsts)
    assert all("part" not in r for r in _rows(builds["chat"]))
    assert _rows(builds["chat"], fmt.DUPLICATE_INDEX)
    skipped = _rows(builds["skip"], fmt.OVERFLOW_INDEX)
    assert skipped and all(r["token_count"] is None and "trained_turns" in r for r in skipped)
    layout = json.loads((builds["chat"] / fmt.LENGTH_FIELD).read_text())["length_fields"]
    assert [f["kind"] for f in layout] == ["literal", "context", "trained", "context", "trained",
                                           "context", "trained", "context", "literal"]
    pref = json.loads((builds["preference"] / fmt.LENGTH_FIELD).read_text())["length_fields"]
    assert [f["name"] for f in pref] == ["prompt", "chosen", "rejected"]  # EOS ends each
    assert _rows(builds["preference"], fmt.OVERFLOW_INDEX)


# ------------------------------------------------------------------ damage in split builds

def _first_split_sid(rows) -> int:
    """Index of the first row whose sample_id has a next part."""
    return next(i for i in range(len(rows) - 1)
                if rows[i]["sample_id"] == rows[i + 1]["sample_id"])


def test_wrong_part_order(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    i = _first_split_sid(rows)
    rows[i]["part"], rows[i + 1]["part"] = rows[i + 1]["part"], rows[i]["part"]
    _write_rows(out, rows)
    problems = _problems(out)
    assert _has(problems, f"sample_index.jsonl (line {i + 2})", "(sample_id, part)",
                "ascending by (sample_id, part)")


def test_missing_part_key_in_a_split_dataset(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    del rows[5]["part"]
    _write_rows(out, rows)
    problems = _problems(out)
    assert _has(problems, "sample_index.jsonl (line 6)", "no part key")
    assert len(problems) == 1  # the row is still joined with its record


def test_missing_part_key_in_an_overflow_row(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out, fmt.OVERFLOW_INDEX)
    del rows[0]["part"]
    _write_rows(out, rows, fmt.OVERFLOW_INDEX)
    assert _has(_problems(out), "overflow_index.jsonl (line 1)", "no part key")


def test_part_key_in_a_dataset_that_is_not_split(builds, tmp_path):
    out = _copy(builds, "chat", tmp_path)
    rows = _rows(out)
    rows[3]["part"] = 0
    _write_rows(out, rows)
    problems = _problems(out)
    assert _has(problems, "sample_index.jsonl (line 4)", "part key in a dataset that is not split")


def test_split_record_with_sample_id_out_of_order(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    i = next(i for i in range(len(rows) - 1)
             if rows[i]["sample_id"] != rows[i + 1]["sample_id"] and rows[i]["part"] > 0)
    rows[i], rows[i + 1] = rows[i + 1], rows[i]
    _write_rows(out, rows)
    assert _has(_problems(out), f"sample_index.jsonl (line {i + 2})", "is not above the previous",
                "ascending by (sample_id, part)")


def test_a_part_number_skipped(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    i = _first_split_sid(rows)
    last = max(j for j, r in enumerate(rows) if r["sample_id"] == rows[i]["sample_id"])
    rows[last]["part"] += 1
    _write_rows(out, rows)
    assert _has(_problems(out), f"sample_index.jsonl (line {last + 1})",
                f"part {rows[last]['part']} of sample_id {rows[i]['sample_id']} where part "
                f"{rows[last]['part'] - 1} is due")


def test_parts_of_one_sample_id_share_the_source_line(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    i = _first_split_sid(rows)
    rows[i + 1]["source_line"] += 1
    _write_rows(out, rows)
    assert _has(_problems(out), f"sample_index.jsonl (line {i + 2})",
                "not the source of its earlier parts")


def test_empty_fields_are_always_empty_in_a_dialogue_dataset(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out)
    rows[0]["empty_fields"] = ["context_1"]
    _write_rows(out, rows)
    assert _has(_problems(out), "sample_index.jsonl (line 1)", "are not []")


def test_skip_row_with_a_part_is_still_a_part(builds, tmp_path):
    """A skipped record keeps its part number: deleting its overflow row leaves a gap."""
    out = _copy(builds, "split", tmp_path)
    rows = _rows(out, fmt.OVERFLOW_INDEX)
    parts = {(r["sample_id"], r["part"]) for r in rows + _rows(out)}
    j = next(j for j, r in enumerate(rows)
             if r["action"] == "skip" and (r["sample_id"], r["part"] + 1) in parts)
    sid, part = rows[j]["sample_id"], rows[j]["part"]
    del rows[j]
    _write_rows(out, rows, fmt.OVERFLOW_INDEX)
    assert _has(_problems(out), f"part {part + 1} of sample_id {sid} where part {part} is due")


# ------------------------------------------------------------------ damage in layouts

def _relayout(out: Path, edit) -> None:
    doc = json.loads((out / fmt.LENGTH_FIELD).read_text())
    edit(doc["length_fields"])
    (out / fmt.LENGTH_FIELD).write_text(fmt.json_document(doc), encoding="utf-8")


def test_segment_kind_other_than_context_trained_or_literal(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    _relayout(out, lambda fields: fields[0].update(kind="field", field="context_0"))
    problems = _problems(out)
    assert problems == ["length_field.json: length_fields[0].kind 'field' is not context, "
                        "trained or literal (the segment kinds of a dialogue dataset)"]


def test_context_and_trained_swapped(builds, tmp_path):
    out = _copy(builds, "preference", tmp_path)
    _relayout(out, lambda fields: (fields[0].update(kind="trained"),
                                   fields[2].update(kind="context")))
    problems = _problems(out)
    assert _has(problems, "length_fields[0] 'prompt' is trained")
    assert _has(problems, "length_fields[2] 'rejected' is context")


def test_dialogue_kinds_in_a_templated_build_are_still_wrong(tmp_path):
    """A mintdim build keeps mintdim's rules: context / trained kinds are not its own."""
    out = tmp_path / "golden"
    shutil.copytree(GOLDEN, out)
    assert verify_output(str(out)).ok
    _relayout(out, lambda fields: fields[1].update(kind="trained", content=None))
    assert _problems(out) == ["length_field.json: length_fields[1].kind 'trained' is not "
                              "field or literal"]


def test_manifest_source_of_a_dialogue_build(builds, tmp_path):
    out = _copy(builds, "split", tmp_path)
    manifest = json.loads((out / fmt.MANIFEST).read_text())
    manifest["source"]["max_turns"] = 2
    (out / fmt.MANIFEST).write_text(fmt.json_document(manifest), encoding="utf-8")
    assert _has(_problems(out), "manifest.json", "is not the layout of max_turns 2")


# ------------------------------------------------------------------ report

def _direct_count(out: Path) -> dict:
    """Tokens by kind and by unit, from the shards' headers and length_field.json."""
    layout = json.loads((out / fmt.LENGTH_FIELD).read_text())
    kinds = [f["kind"] for f in layout["length_fields"]]
    n = len(kinds)
    dtype = fmt.NP_DTYPES[layout["token_dtype"]]
    totals = {"trained": 0, "context": 0, "literal": 0}
    per_unit = {}
    for unit_dir in sorted(out.glob("unit_*")):
        unit = int(unit_dir.name.split("_")[1])
        counts = {"trained": 0, "context": 0, "literal": 0}
        for shard in sorted(unit_dir.glob("shard_*.bin")):
            records = np.fromfile(shard, dtype=dtype).reshape(-1, 1 + n + unit)
            assert (records[:, 0] == layout["magic"]).all()
            for i, kind in enumerate(kinds):
                counts[kind] += int(records[:, 1 + i].astype(np.int64).sum())
        per_unit[unit] = counts
        for kind in totals:
            totals[kind] += counts[kind]
    return {"totals": totals, "per_unit": per_unit}


@pytest.mark.parametrize("name", ["chat", "split", "preference"])
def test_report_counts_trained_and_context_tokens_from_the_shards(builds, tmp_path, name):
    out = builds[name]
    result = write_report(str(out), str(tmp_path / "report"))
    want = _direct_count(out)
    d = result["dialogue"]
    assert {k: d[f"{k}_tokens"] for k in want["totals"]} == want["totals"]
    assert d["tokens"] == json.loads((out / fmt.STATS).read_text())["total_tokens"]
    assert d["trained_fraction"] == want["totals"]["trained"] / d["tokens"]
    assert {u["unit_size"]: {k: u[k] for k in want["totals"]} for u in d["units"]} == want["per_unit"]
    assert d["records_without_trained"] == 0 and result["consistency"] == []
    md = (tmp_path / "report/report.md").read_text()
    trained, tokens = want["totals"]["trained"], d["tokens"]
    assert f"- trained: {trained / tokens:.4%} ({trained:,} / {tokens:,}) of the tokens" in md
    assert "## Trained and context tokens" in md and "- fields:" not in md
    per_unit_csv = (tmp_path / "report/trained_per_unit.csv").read_text().splitlines()
    assert per_unit_csv[0] == ("unit_size,records,trained_tokens,context_tokens,literal_tokens,"
                               "trained_fraction")
    assert len(per_unit_csv) == 1 + len(want["per_unit"])
    segments = (tmp_path / "report/tokens_per_segment.csv").read_text().splitlines()
    assert sum(int(line.split(",")[-1]) for line in segments[1:]) == tokens
    assert (tmp_path / "report/trained_per_unit.png").read_bytes()[:4] == b"\x89PNG"


def test_report_of_a_split_build_names_split_dialogues_and_skips(builds, tmp_path):
    write_report(str(builds["split"]), str(tmp_path / "r"))
    md = (tmp_path / "r/report.md").read_text()
    assert "source lines with records gave more than one record" in md
    assert fmt.CUT_REASON_CHAT in md
    write_report(str(builds["skip"]), str(tmp_path / "s"))
    assert "more trained turns than max_turns" in (tmp_path / "s/report.md").read_text()


def test_report_of_a_templated_build_has_no_dialogue_part(tmp_path):
    result = write_report(str(GOLDEN), str(tmp_path / "r"))
    assert result["dialogue"] is None
    assert not any(name.startswith(("trained_per_unit", "tokens_per_segment"))
                   for name in result["files"])
    assert "Trained and context" not in (tmp_path / "r/report.md").read_text()


def test_verify_and_report_read_fsspec_urls(builds, tmp_path):
    import fsspec

    fs, root = fsspec.filesystem("memory"), "/audit_dialogues_url"
    copy_to_memory_fs(builds["split"], f"memory://{root}")
    try:
        result = verify_output(f"memory://{root}")
        assert result.ok, [str(p) for p in result.problems]
        remote = write_report(f"memory://{root}", str(tmp_path / "r"))["dialogue"]
        local = write_report(str(builds["split"]), str(tmp_path / "l"))["dialogue"]
        assert remote == local and remote["trained_tokens"] > 0
    finally:
        fs.rm(root, recursive=True)


# ------------------------------------------------------------------ content (issue 25)

@pytest.mark.parametrize("name", ["chat", "split", "skip", "preference"])
def test_deep_verify_re_tokenizes_every_record_to_its_bytes(builds, name):
    """--deep rebuilds the build from its manifest and re-tokenizes the source lines: each
    record, cut as `truncate` cut it (whole turns, even completions with their EOS, the
    bos / eos ids kept), a split part from the part before it, equals what is stored."""
    out = builds[name]
    result = verify_output(str(out), deep=10_000)
    assert result.ok, [str(p) for p in result.problems]
    rows = _rows(out)
    assert len(result.deep) == len(rows) > 20
    overflow = _rows(out, fmt.OVERFLOW_INDEX)
    assert name in ("split", "skip") or any(r["action"] == "truncate" for r in overflow)
    assert result.checksummed == len(json.loads((out / fmt.MANIFEST).read_text())
                                     ["checksums"]["files"])


def _first_record(out: Path):
    """(shard path, its records as an array, segment count) of the first shard."""
    layout = json.loads((out / fmt.LENGTH_FIELD).read_text())
    n = len(layout["length_fields"])
    row = _rows(out)[0]
    data = np.fromfile(out / row["shard_path"], dtype=layout["token_dtype"])
    return out / row["shard_path"], data.reshape(-1, 1 + n + row["unit_size"]), n


def test_a_moved_loss_mask_boundary_is_named_by_its_checksum_and_by_deep(builds, tmp_path):
    """The boundary between a record's context and its first trained turn moved by one
    token, the total kept: the structure still holds (the probe's case), the checksum
    names the shard, and --deep, without checksums, names the sample."""
    out = tmp_path / "chat"
    shutil.copytree(builds["chat"], out)
    path, records, n = _first_record(out)
    names = json.loads((out / fmt.LENGTH_FIELD).read_text())["sequence_template"]
    context, trained = names.index("context_0"), names.index("assistant_0")
    assert records[0, 1 + context] > 1 and records[0, 1 + trained] > 1
    records[0, 1 + context] -= 1
    records[0, 1 + trained] += 1
    records.tofile(path)
    rel = path.relative_to(out).as_posix()
    problems = _problems(out)
    assert problems == [f"{rel}: content changed: sha256 " + problems[0].split("sha256 ")[1]]
    without_checksums(out)
    plain = verify_output(str(out))
    assert plain.ok and plain.checksummed is None  # the structure cannot see it
    assert "content not proven" in plain.summary()
    deep = verify_output(str(out), deep=10_000)
    assert [p.file for p in deep.problems] == [rel]
    assert "sample 0 " in deep.problems[0].what and "segment lengths" in deep.problems[0].what
