"""The interactive prompts, answered through a real pseudo-terminal on a local run."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import write_jsonl
from mintdim_beam.audit.verify import verify_output

CHILD = textwrap.dedent("""
    import json, sys
    from mintdim_beam import pipeline
    result = (pipeline("unit-build")
        .source.jsonl(files=["data/in.jsonl"], fields=[["q", "a"]], templates=[sys.argv[1]])
        .tokenizer.sentencepiece(files=["tok/sp.model"])
        .units(sizes=[[8, 16]], build_batch=[2])
        .output.dir("out", samples_per_shard=[4])
        .run(pipeline_options=["--runner=FnApiRunner", "--input_range_bytes=64"]))
    print(json.dumps(result))
""")


def _run_in_pty(workdir, answers: str, template: str):
    master, slave = os.openpty()
    os.write(master, answers.encode())
    (workdir / "child.py").write_text(CHILD)
    proc = subprocess.run([sys.executable, "child.py", template], cwd=workdir, stdin=slave,
                          capture_output=True, text=True, timeout=300)
    os.close(slave)
    os.close(master)
    return proc


def _setup(tmp_path, tokenizers_dir):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    long = " ".join(["hello world data tokens"] * 6)
    rows = [{"q": "hello", "a": "world"}, {"q": long, "a": "x"}, {"q": "data", "a": "units"},
            {"q": long + " model", "a": "y"}, {"q": long + " model reads", "a": "z"}]
    write_jsonl(tmp_path / "data/in.jsonl", rows)


def test_overflow_prompt_extend_once_then_skip_all(tmp_path, tokenizers_dir):
    _setup(tmp_path, tokenizers_dir)
    proc = _run_in_pty(tmp_path, "2\n200\n1\n3\n2\n", "{q} {a}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[unit-build] Sample exceeds max unit_size" in proc.stderr
    assert "VN: Xử lý sample này thế nào?" in proc.stderr
    assert "mọi sample overflow tiếp theo trong lần build này" in proc.stderr
    assert proc.stderr.count("[1/2/3] >") == 1 + 0  # sample 3 fits the added 200: no prompt
    rows = [json.loads(l) for l in (tmp_path / "out/overflow_index.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["action"]) for r in rows] == [(1, "extend")]
    assert rows[0]["new_unit_size"] == 200
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["outputs"][0]["sizes"] == [8, 16, 200]
    # a size picked larger than the sample's token count is a valid build
    check = verify_output(str(tmp_path / "out"))
    assert check.ok, [str(p) for p in check.problems]


def test_overflow_prompt_truncate_only_then_skip_all(tmp_path, tokenizers_dir):
    _setup(tmp_path, tokenizers_dir)
    proc = _run_in_pty(tmp_path, "1\n1\n3\n2\n", "{q} {a}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("[1/2/3] >") == 2
    rows = [json.loads(l) for l in (tmp_path / "out/overflow_index.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["action"]) for r in rows] == [(1, "truncate"), (3, "skip"), (4, "skip")]
    samples = [json.loads(l)["sample_id"] for l in (tmp_path / "out/sample_index.jsonl").read_text().splitlines()]
    assert samples == [0, 1, 2]
    check = verify_output(str(tmp_path / "out"))
    assert check.ok, [str(p) for p in check.problems]


def test_template_unk_prompt_yes_continues_and_no_aborts(tmp_path, tokenizers_dir):
    _setup(tmp_path, tokenizers_dir)
    proc = _run_in_pty(tmp_path, "n\n", "{q} 😀 {a}")
    assert proc.returncode != 0
    assert "Tiếp tục build?" in proc.stderr and "TemplateTokenizerError" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = _run_in_pty(tmp_path, "y\n3\n2\n", "{q} 😀 {a}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    unk = [json.loads(l) for l in (tmp_path / "out/unk_index.jsonl").read_text().splitlines()]
    assert unk and all("😀" in row["unk_chars"] for row in unk)


def test_prompt_without_tty_is_an_overflow_error(tmp_path, tokenizers_dir):
    _setup(tmp_path, tokenizers_dir)
    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.run([sys.executable, "child.py", "{q} {a}"], cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "UnitOverflowError" in proc.stderr and "Sample: data/in.jsonl:2" in proc.stderr
