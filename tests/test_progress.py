"""Live progress and counters of a build: plain progress lines when stderr is not a
terminal (the bytes read of the total, then the phase after the global step), Beam
counters every runner reports, and nothing left behind (no progress directory, no
scratch, no spilled batches)."""
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from apache_beam.metrics.metric import MetricsFilter

from conftest import IN_MEMORY, MULTI_PROCESS, REPO
from mintdim_beam.runtime.progress import KEYS, Progress
from mintdim_beam.unit_build.launch import launch

BIN = Path(sys.executable).parent
READING = re.compile(r"^\[unit-build\] reading: (\d+)% \(([\d,]+) of ([\d,]+) MB\), "
                     r"([\d,]+) samples, ([\d,]+) tokens, ([\d,]+) samples/s, ETA \d+:\d\d$")
WRITING = re.compile(r"^\[unit-build\] writing: ([\d,]+) of ([\d,]+) samples assigned "
                     r"\((\d+)%\), ([\d,]+) shards written, \d+ s$")


def _demo_config(tmp: Path) -> Path:
    text = (REPO / "examples/unit_build.yaml").read_text().replace("artifacts/", f"{tmp}/out/")
    text = text.replace("examples/", f"{REPO}/examples/")
    path = tmp / "demo.yaml"
    path.write_text(text)
    return path


def _progress_dirs(tmp: Path) -> list:
    return glob.glob(os.path.join(tmp, "mintdim-progress-*"))


def test_progress_lines_while_a_build_runs_and_nothing_left_after(tmp_path):
    """The build's temporary directory is one of this test's own (TMPDIR), so what is
    left there is the build's, whatever else runs on the machine."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", MINTDIM_PROGRESS_INTERVAL="0.05",
               TMPDIR=str(private_tmp))
    proc = subprocess.run([str(BIN / "mintdim-beam"), "build", str(_demo_config(tmp_path))],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    reading = [READING.match(line) for line in lines if "] reading:" in line]
    writing = [WRITING.match(line) for line in lines if "] writing:" in line]
    assert reading and all(reading), [l for l in lines if "] reading:" in l and not READING.match(l)]
    assert all(writing), [l for l in lines if "] writing:" in l]
    inputs_mb = sum(os.path.getsize(REPO / "examples/data" / f)
                    for f in ("instructions.jsonl", "chat.jsonl")) / 1e6
    assert {m.group(3) for m in reading} == {f"{inputs_mb:,.0f}"}
    samples = [int(m.group(4).replace(",", "")) for m in reading]
    assert samples == sorted(samples)  # counts only grow
    shown = [int(m.group(1)) for m in reading]
    assert shown == sorted(shown) and max(shown) <= 100
    total = sum(o["total_samples"] for o in json.loads(proc.stdout)["outputs"])
    for m in writing:
        assert int(m.group(1).replace(",", "")) <= int(m.group(2).replace(",", "")) <= total + 5
    # the progress directory and the scratch files (spilled batches among them) are gone
    assert not _progress_dirs(private_tmp)
    for out in (tmp_path / "out").iterdir():
        assert not (out / "_mintdim_tmp").exists(), sorted(p.name for p in out.iterdir())


class _Writes:
    """A stream that keeps each write call apart."""

    def __init__(self):
        self.calls = []

    def write(self, text):
        self.calls.append(text)

    def flush(self):
        pass


def test_each_line_beside_the_progress_thread_is_one_write(monkeypatch):
    """`print` writes a line's text and its newline apart: a worker thread's shard line
    written in between glued it to a progress line (`... unit=128[unit-build] writing:
    ...`), which the test above then failed to read, more often on a busy machine. The
    progress lines and the launchers' lines (and the shard writer's, through the same
    `say`) are one write each."""
    from mintdim_beam.pack_build import launch as pack_launch
    from mintdim_beam.unit_build import launch as unit_launch

    monkeypatch.setenv("MINTDIM_PROGRESS_INTERVAL", "600")  # no line of the thread's own
    stream = _Writes()
    with Progress(2_000_000, stream=stream) as progress:
        progress.show(dict.fromkeys(KEYS, 0))
        progress.show({**dict.fromkeys(KEYS, 3), "assigned": 2})
    lines = stream.calls
    assert len(lines) == 2 and all(line.count("\n") == 1 and line.endswith("\n")
                                   for line in lines), lines
    assert READING.match(lines[0][:-1]) and WRITING.match(lines[1][:-1]), lines
    monkeypatch.setattr(sys, "stderr", _Writes())
    unit_launch.log("start")
    pack_launch.log("start")
    assert sys.stderr.calls == ["[unit-build] start\n", "[pack-build] start\n"]


def test_beam_counters_count_the_work(tmp_path):
    """Counters (namespace mintdim) that Dataflow and Flink show: bytes read, samples
    read, tokenized and assigned, tokens, shards written; the same on every runner."""
    rows = [{"text": " ".join(["word"] * (1 + i % 40))} for i in range(300)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = {"source": {"files": [str(data)], "fields": [["text"]], "templates": ["{text}"]},
           "tokenizer": {"type": "sentencepiece", "files": [str(REPO / "examples/tokenizer/demo.model")]},
           "units": {"sizes": [[16, 32, 64]], "build_batch": [64]},
           "output": {"dir": str(tmp_path / "out_mem"), "samples_per_shard": [50]}}
    found = {}
    for name, flags in (("mem", IN_MEMORY), ("multi", MULTI_PROCESS)):
        raw["output"]["dir"] = str(tmp_path / f"out_{name}")
        outputs, result = launch(raw, on_template_unk="continue", on_overflow="truncate",
                                 pipeline_options=flags + ["--input_range_bytes=2000"])
        counters = {}
        for key in ("bytes", "samples", "tokenized", "tokens", "assigned", "shards"):
            hits = result.metrics().query(MetricsFilter().with_namespace("mintdim")
                                          .with_name(key))["counters"]
            counters[key] = sum(h.committed for h in hits)
        assert counters["bytes"] == data.stat().st_size
        assert counters["samples"] == counters["tokenized"] == counters["assigned"] == 300
        assert counters["tokens"] >= outputs[0]["total_tokens"] > 0  # before truncation
        shards = list((tmp_path / f"out_{name}").glob("unit_*/shard_*.bin"))
        assert counters["shards"] == len(shards) > 1
        assert outputs[0]["total_samples"] == 300
        found[name] = counters
    assert found["mem"] == found["multi"]
