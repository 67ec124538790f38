"""`mintdim-beam plan`: the exact padding optimizer against brute force, the histogram
pass against a real build of the same config, and the command line."""
import itertools
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import IN_MEMORY, MULTI_PROCESS, run_build, sentence, write_jsonl
from mintdim_beam.audit.plan import (min_padding, optimal_sizes, padding_report,
                                     token_histograms)
from mintdim_beam.core.errors import SourceParseError, UnitValidationError

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------- brute force helpers

def direct_padding(histogram, sizes, max_size=None):
    """Padding computed sample by sample: smallest size >= count (0 needs a size >= 1)."""
    total = 0
    for count, samples in histogram.items():
        if max_size is not None and count > max_size:
            continue
        fits = [s for s in sizes if s >= count]
        assert fits, (count, sizes)
        total += (min(fits) - count) * samples
    return total


def brute_force(histogram, k, max_size=None, candidates=None):
    """Least padding over every set of at most k positive sizes drawn from `candidates`
    (default: the distinct fitting counts, 0 replaced by 1) that fits every fitting sample."""
    fitting = [c for c in histogram if max_size is None or c <= max_size]
    if not fitting:
        return 0
    if candidates is None:
        candidates = sorted({max(c, 1) for c in fitting})
    need = max(max(fitting), 1)
    best = None
    for r in range(1, k + 1):
        for combo in itertools.combinations(candidates, r):
            if max(combo) < need:
                continue
            value = direct_padding(histogram, combo, max_size)
            best = value if best is None else min(best, value)
    return best


def random_histogram(rng, max_count=40, max_distinct=9, zero=False):
    hist = {rng.randint(1, max_count): rng.randint(1, 20) for _ in range(rng.randint(1, max_distinct))}
    if zero:
        hist[0] = rng.randint(1, 5)
    return hist


def check_result(hist, k, max_size, sizes):
    fitting = [c for c in hist if max_size is None or c <= max_size]
    assert sizes == sorted(set(sizes)) and len(sizes) <= k
    assert all(type(s) is int and s >= 1 for s in sizes)
    if fitting:
        assert sizes[-1] == max(max(fitting), 1)
        assert len(sizes) == min(k, len({max(c, 1) for c in fitting}))
    else:
        assert sizes == []


# ---------------------------------------------------------------------------- optimizer

@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("with_max", [False, True])
def test_optimal_sizes_equals_brute_force(k, with_max):
    rng = random.Random(1000 * k + with_max)
    for trial in range(60):
        hist = random_histogram(rng, zero=trial % 4 == 0)
        max_size = rng.randint(1, 45) if with_max else None
        sizes = optimal_sizes(hist, k, max_size)
        check_result(hist, k, max_size, sizes)
        best = brute_force(hist, k, max_size)
        assert direct_padding(hist, sizes, max_size) == best, (hist, k, max_size, sizes)
        assert min_padding(hist, k, max_size) == best
        report = padding_report(hist, sizes)
        if max_size is None:
            assert report["pad_slots"] == best and report["overflow_samples"] == 0


def test_observed_counts_suffice_against_every_integer_size():
    """Brute force over *all* size sets in 1..14, not just observed counts."""
    rng = random.Random(7)
    for trial in range(40):
        hist = random_histogram(rng, max_count=14, max_distinct=6, zero=trial % 3 == 0)
        k = rng.randint(1, 3)
        max_size = rng.choice([None, rng.randint(1, 14)])
        best = brute_force(hist, k, max_size, candidates=range(1, 15))
        sizes = optimal_sizes(hist, k, max_size)
        assert direct_padding(hist, sizes, max_size) == best, (hist, k, max_size, sizes)


def test_k_at_least_distinct_counts_returns_them():
    hist = {9: 2, 2: 3, 5: 1}
    assert optimal_sizes(hist, 3) == [2, 5, 9]
    assert optimal_sizes(hist, 10) == [2, 5, 9]
    assert min_padding(hist, 10) == 0
    assert padding_report(hist, [2, 5, 9])["pad_slots"] == 0


def test_zero_token_samples_need_a_positive_size():
    hist = {0: 4, 3: 1, 7: 2}
    assert optimal_sizes(hist, 1) == [7]
    assert min_padding(hist, 1) == 4 * 7 + 4
    # a size of 1 for the four empty samples beats a size of 3 for the single 3-token one
    assert optimal_sizes(hist, 2) == [1, 7]
    assert min_padding(hist, 2) == 4 * 1 + 4
    assert optimal_sizes(hist, 3) == [1, 3, 7] and min_padding(hist, 3) == 4
    assert optimal_sizes({0: 5}, 3) == [1] and min_padding({0: 5}, 3) == 5
    report = padding_report(hist, [1, 3, 7])
    assert report["pad_slots"] == 4 and report["payload_slots"] == 4 + 3 + 14
    assert report["padding_ratio"] == pytest.approx(4 / 21)


def test_max_size_reports_longer_samples_as_overflow():
    hist = {3: 2, 10: 1, 50: 3, 100: 1}
    sizes = optimal_sizes(hist, 2, max_size=20)
    assert sizes == [3, 10]
    report = padding_report(hist, sizes)
    assert report["samples"] == 7 and report["tokens"] == 6 + 10 + 150 + 100
    assert report["overflow_samples"] == 4 and report["overflow_tokens"] == 250
    assert report["overflow_tokens_beyond"] == 3 * 40 + 90
    assert report["pad_slots"] == 0 and report["padding_ratio"] == 0.0
    # the largest size is the largest count <= max_size, even with one size
    assert optimal_sizes(hist, 1, max_size=60) == [50]
    assert min_padding(hist, 1, max_size=60) == 2 * 47 + 40
    # nothing fits: no sizes, everything is overflow
    assert optimal_sizes(hist, 3, max_size=2) == []
    assert padding_report(hist, [])["overflow_samples"] == 7


def test_invalid_arguments_and_empty_histogram():
    assert optimal_sizes({}, 3) == []
    with pytest.raises(ValueError):
        optimal_sizes({3: 1}, 0)
    with pytest.raises(ValueError):
        optimal_sizes({3: 1}, 2, max_size=0)


def test_large_histogram_is_fast_and_no_worse_than_greedy_choices():
    import time

    rng = random.Random(3)
    hist = Counter(int(rng.lognormvariate(5, 0.8)) + 1 for _ in range(200_000))
    assert len(hist) > 1000
    start = time.perf_counter()
    sizes = optimal_sizes(hist, 8)
    assert time.perf_counter() - start < 10
    best = padding_report(hist, sizes)["pad_slots"]
    assert best == min_padding(hist, 8)
    top = max(hist)
    for _ in range(50):  # random 8-sets containing the largest count are never better
        other = sorted(set(rng.sample(sorted(hist), 7)) | {top})
        assert padding_report(hist, other)["pad_slots"] >= best


# ------------------------------------------------------------------- the Beam pass

def _corpus(tmp_path, rows=400, seed=11):
    rng = random.Random(seed)
    data = []
    for i in range(rows):
        # a mix of short and long samples so several unit sizes matter
        high = rng.choice([4, 12, 30, 60])
        data.append({"prompt": sentence(rng, 1, high), "response": sentence(rng, 0, high)})
    data[0]["response"] = ""  # an empty field
    return write_jsonl(tmp_path / "data" / "corpus.jsonl", data)


def _raw(corpus, tokenizers_dir, out, sizes=(32, 64, 128, 256)):
    return {
        "source": {"files": [str(corpus)], "fields": [["prompt", "response"]],
                   "templates": ["question {prompt} answer {response}"]},
        "tokenizer": {"type": "sentencepiece", "files": [str(tokenizers_dir / "sp.model")]},
        "units": {"sizes": [list(sizes)], "build_batch": [32]},
        "output": {"dir": str(out), "samples_per_shard": [100]},
    }


def _build_counts(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "sample_index.jsonl").read_text().splitlines()]
    return dict(Counter(row["token_count"] for row in rows))


def test_histogram_matches_real_build_and_recommendation_pads_less(tmp_path, tokenizers_dir):
    corpus = _corpus(tmp_path)
    out = tmp_path / "out"
    naive = [32, 64, 128, 256]
    raw = _raw(corpus, tokenizers_dir, out, naive)
    result = run_build(tmp_path, files=raw["source"]["files"], fields=raw["source"]["fields"],
                       templates=raw["source"]["templates"], tokenizer="sentencepiece",
                       tokenizer_files=raw["tokenizer"]["files"], sizes=[naive], build_batch=[32],
                       output=str(out), samples_per_shard=[100])
    assert result["outputs"][0]["total_samples"] == 400
    built = _build_counts(out)
    assert sum(built.values()) == 400 and len(built) > 20

    # the output directory is full now: plan neither needs it empty nor touches it
    before = sorted(p.name for p in out.iterdir())
    plans, histograms = token_histograms(raw, IN_MEMORY)
    assert sorted(p.name for p in out.iterdir()) == before
    assert list(histograms) == [0]
    assert histograms[0] == built

    recommended = optimal_sizes(histograms[0], 4)
    assert len(recommended) == 4 and recommended[-1] == max(built)
    naive_report = padding_report(built, naive)
    rec_report = padding_report(built, recommended)
    assert naive_report["overflow_samples"] == 0 and rec_report["overflow_samples"] == 0
    assert rec_report["pad_slots"] < naive_report["pad_slots"]
    assert rec_report["padding_ratio"] < naive_report["padding_ratio"]
    # no other 4-set of observed counts that fits every sample pads less
    rng = random.Random(4)
    counts = sorted(built)
    for _ in range(300):
        other = sorted(set(rng.sample(counts[:-1], 3)) | {counts[-1]})
        assert padding_report(built, other)["pad_slots"] >= rec_report["pad_slots"]


def test_histogram_same_on_worker_processes_and_small_ranges(tmp_path, tokenizers_dir):
    corpus = _corpus(tmp_path, rows=150, seed=5)
    raw = _raw(corpus, tokenizers_dir, tmp_path / "out")
    _, in_memory = token_histograms(raw, IN_MEMORY)
    _, spread = token_histograms(raw, MULTI_PROCESS + ["--input_range_bytes=700"])
    assert in_memory == spread and sum(in_memory[0].values()) == 150


def test_bad_line_raises_the_builds_error(tmp_path, tokenizers_dir):
    rng = random.Random(2)
    rows = [{"prompt": sentence(rng, 1, 9), "response": sentence(rng, 1, 9)} for _ in range(30)]
    rows[17] = '{"prompt": "unterminated'
    rows[23] = "not json at all"
    corpus = write_jsonl(tmp_path / "bad.jsonl", rows)
    raw = _raw(corpus, tokenizers_dir, tmp_path / "plan_out")
    with pytest.raises(SourceParseError) as planned:
        token_histograms(raw, IN_MEMORY + ["--input_range_bytes=300"])
    assert planned.value.kwargs["line"] == 18 and planned.value.kwargs["file"] == str(corpus)
    assert planned.value.phase == "build"
    with pytest.raises(SourceParseError) as built:
        run_build(tmp_path, files=[str(corpus)], fields=[["prompt", "response"]],
                  templates=["question {prompt} answer {response}"], tokenizer="sentencepiece",
                  tokenizer_files=[str(tokenizers_dir / "sp.model")], sizes=[[32, 64, 128, 256]],
                  build_batch=[32], output=str(tmp_path / "build_out"), samples_per_shard=[100])
    assert str(planned.value) == str(built.value)
    assert not (tmp_path / "plan_out").exists()


def test_config_errors_are_the_builds(tmp_path, tokenizers_dir):
    corpus = _corpus(tmp_path, rows=5)
    raw = _raw(corpus, tokenizers_dir, tmp_path / "out", sizes=(64, 32))
    with pytest.raises(UnitValidationError):
        token_histograms(raw, IN_MEMORY)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ command line

def _cli(args, cwd):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "plan", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=env)


def test_cli_prints_table_and_json(tmp_path, tokenizers_dir):
    corpus = _corpus(tmp_path, rows=120, seed=9)
    raw = _raw(corpus, tokenizers_dir, tmp_path / "out")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(dict(raw, on_overflow="abort", on_template_unk="abort")))
    proc = _cli([str(config), "--units", "3", "--runner=FnApiRunner"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table, document = proc.stdout.rsplit("\n\n", 1)
    assert "current" in table and "recommended" in table
    docs = json.loads(document)
    assert len(docs) == 1
    doc = docs[0]
    assert set(doc) == {"dataset", "output_dir", "current", "recommended", "histogram"}
    assert doc["dataset"] == 0 and doc["output_dir"] == str(tmp_path / "out")
    hist = {int(c): n for c, n in doc["histogram"].items()}
    assert list(hist) == sorted(hist) and sum(hist.values()) == 120
    assert doc["current"]["sizes"] == [32, 64, 128, 256]
    assert doc["recommended"]["sizes"] == optimal_sizes(hist, 3)
    assert doc["recommended"]["pad_slots"] == min_padding(hist, 3)
    assert doc["recommended"]["pad_slots"] <= doc["current"]["pad_slots"]
    assert not (tmp_path / "out").exists()

    capped = _cli([str(config), "--units", "2", "--max-size", "20", "--runner=FnApiRunner"],
                  tmp_path)
    assert capped.returncode == 0, capped.stderr[-3000:]
    rec = json.loads(capped.stdout.rsplit("\n\n", 1)[1])[0]["recommended"]
    assert rec["sizes"][-1] == max(c for c in hist if c <= 20)
    assert rec["overflow_samples"] == sum(n for c, n in hist.items() if c > 20) > 0


def test_cli_config_error_exits_2_and_bad_input_exits_1(tmp_path, tokenizers_dir):
    corpus = _corpus(tmp_path, rows=10)
    config = tmp_path / "bad_config.yaml"
    config.write_text(yaml.safe_dump(_raw(corpus, tokenizers_dir, tmp_path / "out",
                                          sizes=(128, 64))))
    proc = _cli([str(config), "--units", "3", "--runner=FnApiRunner"], tmp_path)
    assert proc.returncode == 2
    assert "[english] UnitValidationError" in proc.stderr
    assert "[vietnam] UnitValidationError" in proc.stderr

    proc = _cli([str(tmp_path / "missing.yaml"), "--units", "3"], tmp_path)
    assert proc.returncode == 2 and "MintDimFileNotFoundError" in proc.stderr

    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"prompt": "hi", "response": "there"}',
                                               '{"prompt": "x"}'])
    config = tmp_path / "bad_input.yaml"
    config.write_text(yaml.safe_dump(_raw(bad, tokenizers_dir, tmp_path / "out")))
    proc = _cli([str(config), "--units", "3", "--runner=FnApiRunner"], tmp_path)
    assert proc.returncode == 1
    assert "SampleSchemaError" in proc.stderr and "Line: 2" in proc.stderr
