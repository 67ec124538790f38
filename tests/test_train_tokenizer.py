"""train-tokenizer as a pipeline: the same word table and tokenizer on every runner,
worker count, range size and retry; every source kind and input format; held-out rows;
bad rows; each config and corpus error before any output (exit 2, nothing written); and
what comes out works where it is meant to: transformers' AutoTokenizer, our own unit-
and pack-builds (the fast engine included), `clean`, a gs:// output."""
from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from conftest import (BUNDLE_RETRYING, IN_MEMORY, MULTI_PROCESS, REPO, cli, gcs_emulator,
                      write_jsonl)
from mintdim_beam import pipeline
from mintdim_beam.core import errors

sys.path.insert(0, str(REPO))
from tools import textgen  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BYTE_LEVEL = {"vocab_size": 1500, "pre_tokenizer": "byte_level",
              "initial_alphabet": "byte_level", "special_tokens": SPECIALS}


def _rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            q, a = textgen.en_question(rng), textgen.en_answer(rng, 1, 4)
        elif kind == 1:
            task, snippet, a = textgen.code_task(rng)
            q = task + "\n" + snippet
        else:
            q, a = textgen.multilingual_text(rng)[1], textgen.en_sentence(rng)
        out.append({"question": q, "answer": a})
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three files, three formats: JSONL, Parquet, a gzipped JSON array."""
    root = tmp_path_factory.mktemp("train_corpus")
    a, b, c = _rows(1, 900), _rows(2, 700), _rows(3, 600)
    write_jsonl(root / "a.jsonl", a)
    pq.write_table(pa.Table.from_pylist(b), root / "b.parquet", row_group_size=100)
    with gzip.open(root / "c.json.gz", "wt", encoding="utf-8") as f:
        json.dump(c, f, ensure_ascii=False)
    root.joinpath("texts.json").write_text(json.dumps(
        [f"{r['question']}\n{r['answer']}" for r in a + b + c], ensure_ascii=False))
    return root


def _texts(corpus) -> list[str]:
    return json.loads((corpus / "texts.json").read_text())


def _job(corpus, out, trainer=None, **rows):
    job = pipeline("train-tokenizer").source.jsonl(
        files=[str(corpus / n) for n in ("a.jsonl", "b.parquet", "c.json.gz")],
        fields=[["question", "answer"]], templates=["{question}\n{answer}"])
    job = job.trainer.bpe(**(trainer or BYTE_LEVEL)).output.dir(str(out))
    if rows:
        job = job.rows(**rows)
    return job


def _oracle(texts, vocab_size=1500) -> dict:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return json.loads(tokenizer.to_str())


def _manifest(out) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _table(out) -> list:
    return [(p["part"], p["sha256"]) for p in _manifest(out)["word_table"]["parts"]]


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("train_ref") / "out"
    _job(corpus, out).run(pipeline_options=IN_MEMORY)
    return out


def test_every_format_s_rows_are_trained_on_as_train_from_iterator_would(corpus, reference):
    ours = json.loads((reference / "tokenizer.json").read_text(encoding="utf-8"))
    assert ours == _oracle(_texts(corpus))
    manifest = _manifest(reference)
    assert manifest["rows"] == {"rows": 2200, "trained": 2200, "held_out": 0, "left_out": 0,
                                "empty": 0}
    assert [e["file"] for e in manifest["inputs"]] == [
        str(corpus / n) for n in ("a.jsonl", "b.parquet", "c.json.gz")]
    assert len(manifest["word_table"]["parts"]) == 64
    assert manifest["words"]["distinct"] == sum(p["words"] for p in
                                                manifest["word_table"]["parts"])
    assert manifest["engine"]["name"] == "native"
    assert set(manifest["versions"]) == {"tokenizers", "sentencepiece", "apache-beam"}


@pytest.mark.parametrize("options", [
    MULTI_PROCESS + ["--input_range_bytes=4096"],
    IN_MEMORY + ["--input_range_bytes=1000"],
], ids=["worker-processes", "small-ranges"])
def test_the_same_table_and_tokenizer_on_other_runners_and_ranges(corpus, reference, tmp_path,
                                                                  options):
    _job(corpus, tmp_path / "out").run(pipeline_options=options)
    assert _table(tmp_path / "out") == _table(reference)
    for name in ("tokenizer.json", "tokenizer_config.json", "report_text.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (reference / name).read_bytes()


def test_injected_retries_give_the_same_table(corpus, reference, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize,write,finalize@{markers}")
    _job(corpus, tmp_path / "out").run(
        pipeline_options=BUNDLE_RETRYING + ["--input_range_bytes=8192"])
    assert {p.name.split("-")[0] for p in markers.iterdir()} == {"tokenize", "write",
                                                                  "finalize"}
    assert _table(tmp_path / "out") == _table(reference)
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == \
        (reference / "tokenizer.json").read_bytes()


@pytest.mark.slow
def test_the_portable_runner_gives_the_same_table(corpus, reference, tmp_path, portable_flags):
    _job(corpus, tmp_path / "out").run(pipeline_options=portable_flags)
    assert _table(tmp_path / "out") == _table(reference)


def _fate(seed: int, text: str) -> float:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=seed.to_bytes(8, "little"),
                             person=b"row".ljust(16, b"\0"))
    return int.from_bytes(digest.digest(), "little") / 2.0 ** 64


def test_held_out_rows_are_left_out_of_training_and_kept_for_report(corpus, tmp_path):
    _job(corpus, tmp_path / "out", holdout=0.1, seed=9).run(pipeline_options=IN_MEMORY)
    texts = _texts(corpus)
    kept = [t for t in texts if _fate(9, t) >= 0.1]
    held = [t for t in texts if _fate(9, t) < 0.1]
    assert 150 < len(held) < 300
    ours = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))
    assert ours == _oracle(kept)
    report = [json.loads(line)["text"]
              for line in (tmp_path / "out" / "report_text.jsonl").read_text().splitlines()]
    assert sorted(report) == sorted(held)
    manifest = _manifest(tmp_path / "out")
    assert manifest["rows"]["held_out"] == len(held)
    assert manifest["report_text"] == {"file": "report_text.jsonl", "rows": len(held),
                                       "held_out": True}


def test_a_sample_trains_on_that_fraction_of_the_rest(corpus, tmp_path):
    _job(corpus, tmp_path / "out", holdout=0.1, sample=0.5, seed=3).run(
        pipeline_options=IN_MEMORY)
    kept = [t for t in _texts(corpus) if 0.1 <= _fate(3, t) < 0.1 + 0.5 * 0.9]
    ours = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))
    assert ours == _oracle(kept)
    assert _manifest(tmp_path / "out")["rows"]["left_out"] == 2200 - len(kept) - sum(
        1 for t in _texts(corpus) if _fate(3, t) < 0.1)


def test_text_and_chat_sources(tmp_path):
    """A text field, and dialogues whose contents are joined as the user says (MiniMind
    joins them with newlines), OpenAI and ShareGPT layouts."""
    chat = REPO / "examples/chat/dialogues.jsonl"
    dialogues = [json.loads(line) for line in chat.read_text().splitlines() if line.strip()]
    joined = ["\n".join(m["content"] for m in d["messages"] if m.get("content") is not None)
              for d in dialogues]
    (pipeline("train-tokenizer").source.chat(files=[str(chat)], join="\n")
     .trainer.bpe(**BYTE_LEVEL).output.dir(str(tmp_path / "chat")).run(
        pipeline_options=IN_MEMORY))
    assert json.loads((tmp_path / "chat" / "tokenizer.json").read_text()) == _oracle(joined)
    write_jsonl(tmp_path / "plain.jsonl", [{"body": t} for t in joined])
    (pipeline("train-tokenizer").source.text(files=[str(tmp_path / "plain.jsonl")], field="body")
     .trainer.bpe(**BYTE_LEVEL).output.dir(str(tmp_path / "text")).run(
        pipeline_options=IN_MEMORY))
    assert (tmp_path / "text" / "tokenizer.json").read_bytes() == \
        (tmp_path / "chat" / "tokenizer.json").read_bytes()
    sharegpt = REPO / "examples/chat/dialogues_sharegpt.jsonl"
    rows = [json.loads(line) for line in sharegpt.read_text().splitlines() if line.strip()]
    (pipeline("train-tokenizer").source.chat(files=[str(sharegpt)], format="sharegpt", join="")
     .trainer.bpe(**BYTE_LEVEL).output.dir(str(tmp_path / "sharegpt")).run(
        pipeline_options=IN_MEMORY))
    want = _oracle(["".join(turn["value"] for turn in r["conversations"]) for r in rows])
    assert json.loads((tmp_path / "sharegpt" / "tokenizer.json").read_text()) == want


def test_a_bad_row_stops_the_run_naming_its_file_and_line(corpus, tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answer": "a"}, "{not json",
                                               {"question": "only"}])
    job = (pipeline("train-tokenizer").source.jsonl(files=[str(bad)], fields=[["question", "answer"]],
                                                    templates=["{question} {answer}"])
           .trainer.bpe(**BYTE_LEVEL).output.dir(str(tmp_path / "out")))
    with pytest.raises(errors.SourceParseError) as caught:
        job.run(pipeline_options=IN_MEMORY)
    assert caught.value.kwargs["line"] == 2 and caught.value.kwargs["file"] == str(bad)
    assert "bad.jsonl:3: SampleSchemaError" in "\n".join(caught.value.__notes__)
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert (tmp_path / "out" / "TRAIN_TOKENIZER_FAILED.md").exists()
    assert cli(tmp_path, "clean", tmp_path / "out").returncode == 0
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_bad_rows_skipped_are_listed(tmp_path):
    rows = [{"question": f"q{i} text", "answer": "a"} for i in range(200)]
    rows[7] = "{not json"
    bad = write_jsonl(tmp_path / "bad.jsonl", rows)
    (pipeline("train-tokenizer").source.jsonl(files=[str(bad)], fields=[["question", "answer"]],
                                              templates=["{question} {answer}"])
     .trainer.bpe(**BYTE_LEVEL).output.dir(str(tmp_path / "out"))
     .run(on_bad_row="skip", pipeline_options=IN_MEMORY))
    rejected = [json.loads(line) for line in
                (tmp_path / "out" / "rejected_index.jsonl").read_text().splitlines()]
    assert [(r["source_file"], r["source_line"]) for r in rejected] == [(str(bad), 8)]
    manifest = _manifest(tmp_path / "out")
    assert manifest["rejected"] == 1 and manifest["rows"]["trained"] == 199
    assert "rejected_index.jsonl" in manifest["checksums"]["files"]


CONFIG_ERRORS = {
    "unknown_key": ({"vocab_size": 500, "pre_tokenizer": "byte_level", "min_frequncy": 2},
                    "ConfigUnknownKeyError", "min_frequency"),
    "repeated_special": ({"vocab_size": 500, "pre_tokenizer": "byte_level",
                          "special_tokens": ["<s>", "</s>", "<s>"]},
                         "SpecialTokenRepeatedError", "<s>"),
    "vocab_under_alphabet": ({"vocab_size": 200, "pre_tokenizer": "byte_level",
                              "initial_alphabet": "byte_level"},
                             "TrainerVocabSizeError", "256"),
    "hash_order": ({"vocab_size": 500, "pre_tokenizer": "byte_level",
                    "continuing_subword_prefix": "##"}, "TrainerValidationError", "hash map"),
    "no_unk": ({"vocab_size": 500, "pre_tokenizer": "whitespace"},
               "TrainerValidationError", "unk_token"),
    "bad_pre_tokenizer": ({"vocab_size": 500, "pre_tokenizer": {"type": "NoSuchThing"}},
                          "TrainerValidationError", "NoSuchThing"),
    "sp_split_symbol": ({"type": "sentencepiece_bpe", "vocab_size": 500,
                         "user_defined_symbols": ["<a b>"]}, "SpecialTokenSplitError", "<a"),
    "min_frequency_nothing": ({"vocab_size": 1500, "pre_tokenizer": "byte_level",
                               "min_frequency": 10 ** 9}, "TrainerMinFrequencyError",
                              "min_frequency: 1,000,000,000"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_ERRORS))
def test_each_error_exits_2_in_both_languages_with_nothing_written(case, corpus, tmp_path,
                                                                   capsys):
    """The command's own `main` in this process (one case through the installed command
    below: the same code, without a Beam import per case)."""
    from mintdim_beam.cli import main

    trainer, name, said = CONFIG_ERRORS[case]
    config = {"source": {"type": "jsonl", "files": [str(corpus / "a.jsonl")],
                         "fields": [["question", "answer"]],
                         "templates": ["{question}\n{answer}"]},
              "trainer": {"type": "bpe", **trainer}, "output": {"dir": str(tmp_path / "out")}}
    (tmp_path / "train.json").write_text(json.dumps(config))
    assert main(["train", str(tmp_path / "train.json"), "--runner=FnApiRunner"]) == 2
    err = capsys.readouterr().err
    assert f"[english] {name}" in err and f"[vietnam] {name}" in err
    assert said in err
    assert not (tmp_path / "out").exists()


def test_an_empty_corpus_is_refused_with_nothing_written(tmp_path):
    empty = write_jsonl(tmp_path / "empty.jsonl", [{"text": ""}, {"text": ""}])
    (tmp_path / "train.yaml").write_text(
        f"source: {{type: text, files: [{empty}]}}\n"
        "trainer: {type: bpe, vocab_size: 400, pre_tokenizer: byte_level}\n"
        f"output: {{dir: {tmp_path / 'out'}}}\n")
    done = cli(tmp_path, "train", tmp_path / "train.yaml")
    assert done.returncode == 2
    assert "[english] TrainEmptyCorpusError" in done.stderr
    assert "Rows read: 2" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def chatml_tokenizer(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("chatml") / "tok"
    (_job(corpus, out).tokenizer_config(bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template="chatml",
                                        model_max_length=2048)
     .run(pipeline_options=IN_MEMORY))
    return out


def test_transformers_loads_the_directory_and_encodes_as_tokenizers_does(chatml_tokenizer,
                                                                         corpus):
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(chatml_tokenizer))
    plain = Tokenizer.from_file(str(chatml_tokenizer / "tokenizer.json"))
    for text in _texts(corpus)[:300] + ["<|im_start|>user\nhi<|im_end|>", "日本語 ✓ x"]:
        assert auto(text, add_special_tokens=False)["input_ids"] == plain.encode(
            text, add_special_tokens=False).ids
        assert auto.decode(plain.encode(text).ids) == text
    assert [auto.bos_token, auto.eos_token, auto.pad_token] == SPECIALS[1:] + SPECIALS[:1]
    assert auto.model_max_length == 2048
    rendered = auto.apply_chat_template([{"role": "user", "content": "Hello"}], tokenize=False,
                                        add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    ids = auto(rendered, add_special_tokens=False)["input_ids"]
    assert ids == plain.encode(rendered, add_special_tokens=False).ids
    assert ids[0] == plain.token_to_id("<|im_start|>") == 1  # one id: a special token


def test_unit_and_pack_builds_take_it_with_the_fast_engine(chatml_tokenizer, corpus, tmp_path):
    tokenizer = {"type": "hf_json", "files": [str(chatml_tokenizer / "tokenizer.json")],
                 "config": str(chatml_tokenizer / "tokenizer_config.json")}
    unit = (pipeline("unit-build").source.jsonl(
        files=[str(corpus / "a.jsonl")], fields=[["question", "answer"]],
        templates=["Q: {question}\nA: {answer}"])
        .tokenizer.hf_json(files=tokenizer["files"], config=tokenizer["config"])
        .units(sizes=[[128, 512, 2048]], build_batch=[256])
        .output.dir(str(tmp_path / "units"), samples_per_shard=[300])
        .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=IN_MEMORY))
    assert unit["outputs"][0]["total_samples"] == 900
    manifest = json.loads((tmp_path / "units" / "manifest.json").read_text())
    assert manifest["tokenizer_card"]["engine"]["name"] == "native"
    assert cli(tmp_path, "verify", tmp_path / "units").returncode == 0
    pack = (pipeline("pack-build").source.jsonl(files=[str(corpus / "a.jsonl")],
                                               fields=[["question", "answer"]],
                                               templates=["{question}\n{answer}"])
            .tokenizer.hf_json(files=tokenizer["files"], config=tokenizer["config"])
            .pack(eod="<|endoftext|>").output.dir(str(tmp_path / "pack"))
            .run(pipeline_options=IN_MEMORY))
    assert pack["documents"] == 900 and pack["eod_id"] == 0
    assert cli(tmp_path, "verify", tmp_path / "pack").returncode == 0


def test_a_sentencepiece_model_feeds_a_unit_build(corpus, tmp_path):
    (pipeline("train-tokenizer").source.jsonl(
        files=[str(corpus / "a.jsonl")], fields=[["question", "answer"]],
        templates=["{question}\n{answer}"])
     .trainer.sentencepiece_bpe(vocab_size=800, pad_id=3).output.dir(str(tmp_path / "sp"))
     .run(pipeline_options=IN_MEMORY))
    result = (pipeline("unit-build").source.jsonl(
        files=[str(corpus / "a.jsonl")], fields=[["question", "answer"]],
        templates=["{question} => {answer}"])
        .tokenizer.sentencepiece(files=[str(tmp_path / "sp" / "tokenizer.model")])
        .units(sizes=[[256, 2048]], build_batch=[256])
        .output.dir(str(tmp_path / "units"), samples_per_shard=[500])
        .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=IN_MEMORY))
    assert result["outputs"][0]["total_samples"] == 900


def test_a_complete_output_is_refused_and_not_cleaned(chatml_tokenizer, corpus, tmp_path):
    with pytest.raises(errors.OutputValidationError):
        _job(corpus, chatml_tokenizer).run(pipeline_options=IN_MEMORY)
    done = cli(tmp_path, "clean", chatml_tokenizer)
    assert done.returncode == 1 and "complete build" in done.stderr


def test_inputs_and_output_on_gcs(corpus, reference, tmp_path):
    with gcs_emulator() as (root, fs):
        for name in ("a.jsonl", "b.parquet", "c.json.gz"):
            fs.put(str(corpus / name), f"{root}/in/{name}")
        job = pipeline("train-tokenizer").source.jsonl(
            files=[f"{root}/in/a.jsonl", f"{root}/in/b.parquet", f"{root}/in/c.json.gz"],
            fields=[["question", "answer"]], templates=["{question}\n{answer}"])
        job.trainer.bpe(**BYTE_LEVEL).output.dir(f"{root}/tok").run(
            pipeline_options=MULTI_PROCESS)
        assert fs.cat(f"{root}/tok/tokenizer.json") == (reference / "tokenizer.json").read_bytes()
        manifest = json.loads(fs.cat(f"{root}/tok/manifest.json"))
        assert [(p["part"], p["sha256"]) for p in manifest["word_table"]["parts"]] == \
            _table(reference)
        assert not fs.exists(f"{root}/tok/_mintdim_tmp")


def test_report_measures_the_held_out_rows_with_the_trained_tokenizer(corpus, tmp_path):
    out = tmp_path / "out"
    _job(corpus, out, holdout=0.1, seed=9).run(pipeline_options=IN_MEMORY)
    done = cli(tmp_path, "report", out)
    assert done.returncode == 0, done.stderr
    held = [t for t in _texts(corpus) if _fate(9, t) < 0.1]
    plain = Tokenizer.from_file(str(out / "tokenizer.json"))
    tokens = sum(len(plain.encode(t, add_special_tokens=False).ids) for t in held)
    chars = sum(len(t) for t in held)
    md = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert "held-out rows (never trained on)" in md
    assert f"**{chars / tokens:.3f} characters per token**" in md
    rows = (out / "report" / "frequency_rank.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "rank,id,token,count"
    counts = [int(r.rsplit(",", 1)[1]) for r in rows[1:]]
    assert sum(counts) == tokens and counts == sorted(counts, reverse=True)
    assert (out / "report" / "frequency_rank.png").read_bytes()[:4] == b"\x89PNG"
    assert "| 1 | `<\\|im_start\\|>` |" in md  # the reserved ids


def test_verify_proves_a_trained_tokenizer_and_names_a_changed_file(chatml_tokenizer, tmp_path):
    import shutil

    done = cli(tmp_path, "verify", chatml_tokenizer)
    assert done.returncode == 0 and "trained tokenizer (hf_json), vocabulary 1500" in done.stdout
    copy = tmp_path / "copy"
    shutil.copytree(chatml_tokenizer, copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["eos_token"] = "<|im_stop|>"
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    done = cli(tmp_path, "verify", copy)
    assert done.returncode == 1
    assert "tokenizer_config.json: content changed" in done.stdout
    assert "eos_token '<|im_stop|>' is not one token of tokenizer.json" in done.stdout
