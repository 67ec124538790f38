"""The benchmark's measuring (peak RSS is the sum over the whole process tree) and the
chat harness (issue 16) on a tiny corpus."""
import json
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from measure import background_load, run_measured  # noqa: E402

PARENT = """
import subprocess, sys
held = bytearray(200 << 20)
subprocess.run([sys.executable, "-c", "import time; held = bytearray(300 << 20); time.sleep(1.5)"])
print("done")
"""


def test_peak_rss_counts_a_child_started_after_the_parent():
    result = run_measured([sys.executable, "-c", PARENT], walk_every=3)
    assert result["stdout"].strip() == "done"
    assert 500 <= result["peak_rss_mb"] < 700  # both at once: 200 MB + 300 MB + interpreters



def _state(pid: int) -> str | None:
    """The /proc state letter of `pid` (None once it is gone and waited for)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def test_background_load_outlives_the_measured_runs_and_is_gone_after():
    with background_load(2) as pids:
        assert len(set(pids)) == 2
        result = run_measured([sys.executable, "-c", "print('measured')"])
        # Started before the command, the busy loops are not its orphans: still running.
        assert result["stdout"].strip() == "measured" and result["orphans_reaped"] == 0
        assert all(_state(pid) in ("R", "S") for pid in pids)
    assert [_state(pid) for pid in pids] == [None, None]  # killed and waited for
    with background_load(0) as none:
        assert none == []

# The chat harness (issue 16) on a tiny corpus: it runs end to end and reports what it
# should. No timing assertions: these numbers only mean something on the full corpus.
import chat_corpus  # noqa: E402
import run_chat  # noqa: E402


def test_chat_corpus_is_deterministic_and_realistic(tmp_path):
    first = chat_corpus.write_chat_corpus(tmp_path / "a.jsonl", 400)
    again = chat_corpus.write_chat_corpus(tmp_path / "b.jsonl", 400)
    assert first.read_bytes() == again.read_bytes()
    rows = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 400
    exchanges = set()
    for row in rows:
        messages = row["messages"]
        roles = [m["role"] for m in messages]
        if roles[0] == "system":
            roles = roles[1:]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        exchanges.add(len(roles) // 2)
    assert exchanges == {1, 2, 3}
    assert any(row["messages"][0]["role"] == "system" for row in rows)
    assert any(not row["messages"][0]["content"].isascii() or not row["messages"][-1]["content"].isascii()
               for row in rows)


def test_chat_harness_runs_on_a_tiny_corpus(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert run_chat.main(["--dialogues", "120", "--train-dialogues", "120", "--repeat", "2",
                          "--parts", "yes", "--parts-dialogues", "60",
                          "--workdir", str(tmp_path / "work"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["dialogues"] == 120 and report["tokens"] > 0
    for name in ("bound", "ours"):
        row = report["results"][name]
        assert len(row["every_run_seconds"]) == 2
        assert row["seconds"] == min(row["every_run_seconds"]) > 0
        assert row["peak_rss_mb"] > 0 and row["tokens_per_s"] > 0
    assert report["b_over_a"] > 0 and report["within_goal"] == (report["b_over_a"] <= 1.5)
    assert report["ours_output"]["total_samples"] >= 120  # split dialogues give two records
    parts = report["parts"]
    # The built-in ChatML takes a seen structure's text from its skeleton render: the
    # counted pass (its structures all seen) renders fewer dialogues than it reads.
    assert parts["dialogues"] == 60 and 0 <= parts["renders"] < 60
    assert parts["tokens_segments_unsplit"] == parts["tokens_rendered"]
    printed = capsys.readouterr().out
    assert "b/a =" in printed and "where the time goes" in printed
    tokenizer = json.loads((tmp_path / "work" / "chat_bpe8k.json").read_text(encoding="utf-8"))
    assert {t["content"] for t in tokenizer["added_tokens"]} >= {"<|im_start|>", "<|im_end|>"}


# The read benchmark (issue 17) on a tiny build: every reader and measurement runs and
# reports; no timing assertions (those numbers only mean something on the 1M build).
import read as read_benchmark  # noqa: E402


def test_read_benchmark_runs_on_a_tiny_build(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert read_benchmark.main(["--samples", "300", "--memory-samples", "150", "--vocab", "600",
                                "--tokens", "20000", "--seconds", "0.3", "--repeat", "1",
                                "--repeat-start", "1", "--memory-steps", "5", "--reference-python", "",
                                "--workdir", str(tmp_path / "work"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["samples"] == 300 and str(report["unit"]) in report["histogram"]
    for name in ("bound_gather", "bound_slice", "unit_reader", "unit_reader_ranks", "unit_reader_small",
                 "unit_reader_packed", "pack_bound", "pack_reader"):
        assert report["results"][name]["tokens"] > 0 and report["results"][name]["tokens_per_s"] > 0
    assert "mintdim_unit_read" not in report["results"]  # no reference Python given
    assert report["results"]["ours_unit_read"]["tokens_per_s"] > 0
    assert report["ratios"]["resume_matches"] is True
    assert report["ratios"]["resume_packed_matches"] is True and report["ratios"]["resume_pack_matches"] is True
    assert report["memory"]["small"]["samples"] == 150 and report["memory"]["this"]["peak_rss_mb"] > 0
    assert "[goals]" in capsys.readouterr().out
    # read_cpu.py: the same bound and readers taking turns in one process, on that build
    import read_cpu

    assert read_cpu.main(["--build", report["build"], "--rounds", "2", "--steps", "2"]) == 0
    cpu = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(cpu) == {"bound", "unpacked", "packed", "packed_all"}
    assert all(row["wall_ms_min"] > 0 and row["cpu_ms_median"] >= row["cpu_ms_min"] >= 0
               for row in cpu.values())


def test_unit_benchmark_takes_the_published_deepseek_tokenizer(tmp_path, capsys):
    """`run.py --tokenizers deepseek_v3`: the published tokenizer.json, with the pad token
    it lacks given; the native engine encodes it; mintdim 0.2.1, which takes no pad token,
    is skipped for it with a notice; `--load 1` runs the rounds beside a busy process and
    says so (no timing assertions)."""
    import run as unit_benchmark

    out = tmp_path / "results.json"
    assert unit_benchmark.main(["--samples", "200", "--tokenizers", "deepseek_v3",
                                "--reference-python", sys.executable, "--load", "1",
                                "--workdir", str(tmp_path / "work"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    row = report["results"]["deepseek_v3"]
    assert row["engine"] == "native" and "reference" not in row
    assert row["ours"]["tokens_per_s"] > 0 and row["bound"]["tokens_per_s"] > 0
    assert report["load"] == 1 and report["loadavg_after"] >= 0
    printed = capsys.readouterr()
    assert "takes no pad token" in printed.err
    assert "1 busy processes beside" in printed.out


# The pack benchmark (issue 18) on a tiny corpus at two scales: bound, ours and (when a
# Python with datatrove is found, e.g. benchmarks/.work/dt_venv) datatrove run and hold
# the same documents; no timing assertions.
import run_pack  # noqa: E402


def test_pack_benchmark_runs_on_a_tiny_corpus(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert run_pack.main(["--scale", "100,200", "--vocab", "1000", "--train-lines", "100",
                          "--repeat", "1", "--workdir", str(tmp_path / "work"),
                          "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    for n in ("100", "200"):
        row = report["results"][n]
        assert row["documents"] == int(n) and row["tokens"] == row["text_tokens"] + int(n)
        assert row["same_counts"] and row["outputs"]["ours"]["manifest_tokens"] == row["tokens"]
        assert row["ours"]["peak_rss_mb"] > 0 and row["ours_over_bound"] > 0
        if report["datatrove"]["python"]:
            assert row["same_documents_as_datatrove"] and row["datatrove_over_ours"] > 0
        else:
            assert "datatrove" not in row
    assert report["peak_rss"]["large"] == 200 and report["peak_rss"]["ratio"] > 0
    tokenizer = json.loads((tmp_path / "work" / "pack_bpe1000.json").read_text(encoding="utf-8"))
    assert tokenizer["pre_tokenizer"]["type"] == "ByteLevel"
    assert [t["content"] for t in tokenizer["added_tokens"]] == ["<|endoftext|>"]
    assert "b/a =" in capsys.readouterr().out
    # (e) Megatron-LM runs only from a checkout given (MINTDIM_MEGATRON_LM), else it is
    # skipped and says why.
    megatron = report["megatron"]
    if megatron.get("python"):
        assert all(report["results"][n]["same_documents_as_megatron"] for n in ("100", "200"))
    else:
        assert megatron["why"] and "megatron" not in report["results"]["100"]


# Megatron-LM's preprocess_data.py as peer (e): what the harness gives it and reads back,
# checked without Megatron's code (its checkout and torch are the user's).
import pack_targets  # noqa: E402


def test_pack_benchmark_refuses_a_megatron_path_that_is_no_checkout(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_pack.main(["--scale", "100", "--workdir", str(tmp_path / "work"),
                       "--megatron-lm", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "is not a Megatron-LM checkout" in err and pack_targets.MEGATRON_TAG in err


def test_pack_benchmark_skips_megatron_when_told(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert run_pack.main(["--scale", "100", "--vocab", "1000", "--train-lines", "100",
                          "--repeat", "1", "--workdir", str(tmp_path / "work"), "--json", str(out),
                          "--datatrove-python", "", "--dolma", "", "--megatron-lm", ""]) == 0
    report = json.loads(out.read_text())
    assert report["megatron"]["why"] == "disabled (--megatron-lm '')"
    assert set(report["results"]["100"]["outputs"]) == {"bound", "ours"}
    assert "skipping (e) Megatron-LM" in capsys.readouterr().err


def test_megatron_checkout_names_its_script_and_version(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "preprocess_data.py").write_text("")
    with pytest.raises(ValueError, match="not a Megatron-LM checkout"):
        pack_targets.megatron_checkout(tmp_path)
    (tmp_path / "megatron" / "core").mkdir(parents=True)
    (tmp_path / "megatron" / "core" / "package_info.py").write_text(
        'MAJOR = 0\nMINOR = 16\nPATCH = 1\nPRE_RELEASE = ""\n')
    info = pack_targets.megatron_checkout(tmp_path)
    assert info["version"] == "0.16.1" == pack_targets.MEGATRON_TAG.removeprefix("core_v")
    assert info["script"] == str((tmp_path / "tools" / "preprocess_data.py").resolve())
    command = pack_targets.megatron_command("py", info["script"], "in.jsonl", "tok", tmp_path / "o", 2)
    assert command[:2] == ["py", info["script"]] and "--append-eod" in command
    assert command[command.index("--tokenizer-type") + 1] == "HuggingFaceTokenizer"
    assert command[command.index("--output-prefix") + 1] == str(tmp_path / "o" / "megatron")


def test_megatron_tokenizer_folder_encodes_as_ours(tmp_path):
    """Megatron's HuggingFaceTokenizer is `AutoTokenizer.from_pretrained(folder,
    use_fast=False)`, its ids `convert_tokens_to_ids(tokenize(text))`, its EOD the
    eos_token's id: on the folder the harness writes, the same ids as our tokenizer.json
    and the EOD id 0."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    from corpus import write_corpus

    corpus = write_corpus(tmp_path / "corpus.jsonl", 200)
    tokenizer = pack_targets.train_pack_tokenizer(corpus, tmp_path / "bpe.json", 1000, 200)
    folder = pack_targets.megatron_tokenizer_dir(tokenizer, tmp_path / "megatron_tok")
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder), use_fast=False)
    ours = Tokenizer.from_file(str(tokenizer))
    ours.encode_special_tokens = True
    assert theirs.convert_tokens_to_ids([theirs.eos_token]) == [0]
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        text = pack_targets.render(row)
        expected = ours.encode(text, add_special_tokens=False).ids
        assert theirs.convert_tokens_to_ids(theirs.tokenize(text)) == expected


def test_read_megatron_reads_one_sequence_per_document(tmp_path):
    """preprocess_data.py's output is the `.bin`/`.idx` layout of ours: read with our
    reader, each document's tokens hashed as `read_ours` hashes ours."""
    import numpy as np

    from mintdim_beam.core.formats.megatron import idx_bytes

    documents = [[5, 6, 0], [7, 0], [5, 6, 0]]
    (tmp_path / "megatron_text_document.bin").write_bytes(
        np.array(sum(documents, []), dtype="<u2").tobytes())
    (tmp_path / "megatron_text_document.idx").write_bytes(
        idx_bytes(np.array([len(d) for d in documents]), "uint16"))
    read = pack_targets.read_megatron(tmp_path)
    assert read["documents"] == 3 and read["tokens"] == 8
    assert read["digests"] == sorted(hash(np.array(d, dtype="<u4").tobytes()) for d in documents)
    # A vocabulary past 65,536 ids: int32 tokens, the same digests (ids compared as uint32).
    (tmp_path / "megatron_text_document.bin").write_bytes(
        np.array(sum(documents, []), dtype="<i4").tobytes())
    (tmp_path / "megatron_text_document.idx").write_bytes(
        idx_bytes(np.array([len(d) for d in documents]), "int32"))
    assert pack_targets.read_megatron(tmp_path)["digests"] == read["digests"]


@pytest.mark.parametrize("script", ["run.py", "run_chat.py", "run_pack.py", "run_scale.py",
                                    "read.py", "train_tokenizer.py", "transforms.py"])
def test_a_benchmark_writes_its_results_to_the_untracked_work_dir_unless_told(script):
    """Recorded results (benchmarks/results_*.json) change only when a run is asked to
    record them (`--json`), never on a small run's default."""
    import ast

    tree = ast.parse((REPO / "benchmarks" / script).read_text())
    defaults = [kw.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                and node.args and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "--json" for kw in node.keywords if kw.arg == "default"]
    shared = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and getattr(node.func, "id", None) == "harness_arguments"]
    assert len(defaults) + len(shared) == 1
    if defaults:
        assert "'.work'" in ast.unparse(defaults[0]), ast.unparse(defaults[0])
    else:  # the flags every harness takes (`measure.harness_arguments`)
        import argparse

        from measure import harness_arguments

        parser = argparse.ArgumentParser()
        harness_arguments(parser, "results_x.json", "(a)")
        default = Path(parser.parse_args([]).json)
        assert default == REPO / "benchmarks" / ".work" / "results_x.json"


def test_stage_times_names_each_stage_of_a_tiny_build(tokenizers_dir, tmp_path, capsys):
    """`stage_times.py`: a real build, every bundle timed and named by its transforms;
    the build itself is the one `run.py` times (no timing assertions)."""
    import corpus as benchmark_corpus
    import stage_times

    rows = benchmark_corpus.write_corpus(tmp_path / "corpus.jsonl", 150)
    out, record = tmp_path / "out", tmp_path / "stages.json"
    assert stage_times.main([str(rows), "sentencepiece", str(tokenizers_dir / "sp.model"),
                             str(out), "--json", str(record)]) == 0
    bundles = json.loads(record.read_text())
    stages, end = bundles[:-1], bundles[-1]["end"]
    named = [name for row in stages for name in row["transforms"]]
    # Reading and tokenizing come before assigning, which comes before the shard writes.
    assert named.index("Tokenize") < named.index("AssignUnit") < named.index("ShardWrite")
    assert all(0 <= row["start"] <= end and row["wall"] >= 0 for row in stages)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["total_samples"] == 150  # `targets.ours` truncates what overflows
    assert "AssignUnit" in capsys.readouterr().out
    import apache_beam.runners.portability.fn_api_runner.fn_runner as fn_runner
    assert fn_runner.FnApiRunner._execute_bundle.__name__ == "_execute_bundle"  # unwrapped
    import gc

    assert gc.get_freeze_count() == 0  # the command's exit freeze is undone in-process


def test_train_tokenizer_benchmark_runs_on_a_tiny_corpus(tmp_path, capsys):
    """Three targets, the same tokenizer.json from each, the table's size printed."""
    import train_tokenizer

    code = train_tokenizer.main(["--rows", "600", "--vocab", "900", "--workdir",
                                 str(tmp_path), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["identical_to_train_from_iterator"] == {"b_ours_in_process": [True],
                                                          "c_ours_2_workers": [True]}
    assert report["word_table"]["distinct_words"] > 5000
    assert "counting on 2 worker processes against one" in out
    assert set(report["summary"]) == {"a_train_from_iterator", "b_ours_in_process",
                                      "c_ours_2_workers"}


def test_transforms_benchmark_runs_on_a_tiny_corpus(tmp_path, capsys):
    """Both targets, the same bytes each round, the ratios printed and recorded."""
    import transforms

    code = transforms.main(["--samples", "400", "--vocab", "400", "--workdir", str(tmp_path),
                            "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "round 1: the same bytes: True" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["runs"]) == {"file build", "transforms"}
    assert report["min_cpu_seconds"]["ratio"] > 0
