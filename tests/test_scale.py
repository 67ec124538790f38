"""Scale-out: the same bytes on every runner, range size and retry; no group wider than
one shard; no temporary files left."""
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from conftest import (BUNDLE_RETRYING, IN_MEMORY, MULTI_PROCESS, encoder_helpers_of, read_tree,
                      sentence, write_jsonl)
from mintdim_beam.unit_build.launch import group_size_stats, launch

SPS = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tokenizers_dir) -> Path:
    """~0.9 MB in two files of one dataset: hundreds of 4 KiB ranges, CRLF, blanks,
    duplicates, UNKs and samples past the largest unit."""
    root = tmp_path_factory.mktemp("scale")
    rng = random.Random(11)
    for name, n, newline in (("a.jsonl", 4200, "\n"), ("b.jsonl", 2200, "\r\n")):
        rows = []
        for i in range(n):
            q = sentence(rng, 0, 10)
            a = sentence(rng, 1, 40 if i % 50 else 120) + (" 😀 字" if i % 23 == 0 else "")
            rows.append({"q": q, "a": a} if i % 31 else {"q": "hello", "a": "world"})
            if i % 97 == 0:
                rows.append(" \t")
        write_jsonl(root / "data" / name, rows, newline=newline)
    (root / "tok").mkdir()
    shutil.copy(tokenizers_dir / "sp.model", root / "tok/sp.model")
    return root


def _config(out: Path) -> dict:
    return {"source": {"files": ["data/a.jsonl", "data/b.jsonl"], "fields": [["q", "a"]],
                       "templates": ["Q: {q}\\nA: {a}"]},
            "tokenizer": {"type": "sentencepiece", "files": ["tok/sp.model"]},
            "units": {"sizes": [[16, 32, 64]], "build_batch": [64]},
            "output": {"dir": str(out), "samples_per_shard": [SPS]}}


def _build(corpus: Path, name: str, options, monkeypatch):
    out = corpus / "out" / name
    monkeypatch.chdir(corpus)
    outputs, result = launch(_config(out), "continue", "extend", list(options))
    assert outputs[0]["total_samples"] == 6400
    return out, result


@pytest.fixture(scope="module")
def reference(corpus):
    """The in-process build with two helper encoders (the default's count on two cores),
    the bytes every other build is compared with. Watched while it runs: the helpers
    Tokenize started of its own and the state samplers' periods; then what it left
    (helper processes, a frozen heap, the samplers' default period)."""
    import gc

    from apache_beam.runners.worker import statesampler
    from apache_beam.utils.counters import CounterFactory

    from mintdim_beam.unit_build.transforms import tokenize

    seen = {"started_in_setup": [], "periods": []}
    real_helpers, real_start = tokenize.start_helpers, statesampler.StateSampler.start
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(tokenize, "start_helpers", lambda plans, count, threads: (
            seen["started_in_setup"].append(count) or real_helpers(plans, count, threads)))
        mp.setattr(statesampler.StateSampler, "start", lambda self: (
            seen["periods"].append(self.sampling_period_ms), real_start(self))[1])
        out, result = _build(corpus, "reference", IN_MEMORY + ["--encoder_processes=2"], mp)
        seen["helpers_left"] = encoder_helpers_of(os.getpid())
        seen["frozen"] = gc.get_freeze_count()
        after = statesampler.StateSampler("after", CounterFactory())
        seen["period_after"] = after.sampling_period_ms
    finally:
        mp.undo()
    return read_tree(out), result, out, seen


def _assert_clean_and_equal(out: Path, reference_tree):
    assert not list(out.rglob("*.tmp")) and not (out / "_mintdim_tmp").exists()
    assert read_tree(out) == reference_tree


def test_reference_build_spreads_units_over_many_shards(reference):
    tree, result, _, _ = reference
    shards = [k for k in tree if k.endswith(".bin")]
    assert len(shards) > 100
    manifest = json.loads(tree["manifest.json"])
    assert len(manifest["units"]["sizes"]) > 3  # extend added sizes
    stats = group_size_stats(result)
    assert stats["sum"] == 6400 and stats["count"] == len(shards)
    assert stats["max"] == SPS  # the widest group is one shard's records


@pytest.mark.slow
@pytest.mark.parametrize("name,options", [
    ("in_memory_4KiB", IN_MEMORY + ["--input_range_bytes=4096"]),
    ("in_memory_no_helper_64KiB", IN_MEMORY + ["--encoder_processes=0", "--input_range_bytes=65536"]),
    ("in_memory_3_helpers_4KiB", IN_MEMORY + ["--encoder_processes=3", "--input_range_bytes=4096"]),
    ("multi_4KiB", MULTI_PROCESS + ["--input_range_bytes=4096"]),
    ("multi_64KiB", MULTI_PROCESS + ["--input_range_bytes=65536"]),
])
def test_same_bytes_across_runners_and_range_sizes(corpus, reference, monkeypatch, name, options):
    out, result = _build(corpus, name, options, monkeypatch)
    _assert_clean_and_equal(out, reference[0])
    assert group_size_stats(result)["max"] <= SPS
    assert encoder_helpers_of(os.getpid()) == []  # helper encoder processes were stopped


def test_the_in_process_run_adopts_the_helpers_the_driver_started(reference):
    """Helpers start before the pipeline is built; Tokenize starts none of its own (the
    reference build, which every other build here must equal)."""
    _, _, out, seen = reference
    assert seen["started_in_setup"] == [0]
    assert not list(out.rglob("*.tmp")) and not (out / "_mintdim_tmp").exists()
    assert seen["helpers_left"] == [] and seen["frozen"] == 0


def test_the_in_process_build_samples_states_every_10_ms(reference):
    """Every bundle's state sampler runs with the short tick (its thread is joined at
    the bundle's end); Beam's default is back once the build returns (the reference
    build)."""
    _, _, _, seen = reference
    assert len(seen["periods"]) > 5 and set(seen["periods"]) == {10}
    assert seen["period_after"] == 200


def test_the_default_run_answers_the_first_batches_from_the_helpers_head_start(
        corpus, reference, monkeypatch):
    """No pipeline options: helpers start before Beam loads and encode the first range's
    batches ahead. Here the pipeline waits for their head start to end, so every batch
    of the first file (one range) is answered from it; the bytes stay the same."""
    import contextlib

    from apache_beam.metrics.metric import MetricsFilter

    from mintdim_beam.runtime import warm_helpers
    from mintdim_beam.unit_build import launch as runner

    real, ahead = runner.warm_helpers, []

    @contextlib.contextmanager
    def finished_head_start(plans, count, first_range, *bounds):
        with real(plans, count, first_range, *bounds) as key:
            ahead.extend(helper.head_start_done() for helper in warm_helpers.WARM[key])
            yield key

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(runner, "warm_helpers", finished_head_start)
    out = corpus / "out" / "head_start"
    monkeypatch.chdir(corpus)
    outputs, result = launch(_config(out), "continue", "extend", None)
    first_file = 4200  # a.jsonl's samples, well under HEAD_START_SAMPLES
    assert len(ahead) == 2 and sum(ahead) == first_file and min(ahead) > 0
    used = result.metrics().query(MetricsFilter().with_name("head_start_samples"))["counters"]
    assert sum(c.committed for c in used) == first_file
    _assert_clean_and_equal(out, reference[0])
    assert encoder_helpers_of(os.getpid()) == []


def test_a_default_run_starts_its_helpers_before_loading_beam(corpus, tmp_path):
    """The head start only pays if the helpers run while Beam is imported: a default
    run starts them before planning (Beam not loaded), and the Tokenize step adopts
    both, starting none of its own."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "order.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, sys
        os.cpu_count = lambda: 2
        from mintdim_beam.runtime import encoder_process
        seen, start = [], encoder_process.start_helpers
        def started(plans, count, *rest):
            seen.append(["start", count])
            return start(plans, count, *rest)
        encoder_process.start_helpers = started  # before the modules that import it
        from mintdim_beam.unit_build import launch as runner
        spawn = runner.spawn_helpers
        def spawned(datasets, count):
            seen.append(["spawn", "apache_beam" in sys.modules, count])
            return spawn(datasets, count)
        runner.spawn_helpers = spawned
        config = {json.dumps(_config(tmp_path / "out"))}
        runner.launch(config, "continue", "extend", None)
        print(json.dumps(seen))
    """))
    done = subprocess.run([sys.executable, str(script)], cwd=corpus, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, *later = json.loads(done.stdout.splitlines()[-1])
    assert first == ["spawn", False, 2] and later and all(c == ["start", 0] for c in later)


@pytest.mark.slow
def test_portable_runner_with_external_worker_pool(corpus, reference, monkeypatch, portable_flags):
    out, _ = _build(corpus, "portable_4KiB", portable_flags + ["--input_range_bytes=4096"], monkeypatch)
    _assert_clean_and_equal(out, reference[0])


@pytest.mark.slow
def test_retried_bundles_after_injected_faults_give_the_same_bytes(corpus, reference, monkeypatch, tmp_path):
    markers = tmp_path / "faults"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize,write,finalize@{markers}")
    out, _ = _build(corpus, "faults", BUNDLE_RETRYING + ["--input_range_bytes=65536"], monkeypatch)
    failed_stages = {p.name.split("-")[0] for p in markers.iterdir()}
    assert failed_stages == {"tokenize", "write", "finalize"}  # a bundle of each stage failed once
    _assert_clean_and_equal(out, reference[0])


@pytest.mark.slow
def test_retried_tokenize_bundles_with_helper_encoders_give_the_same_bytes(
        corpus, reference, monkeypatch, tmp_path):
    """The fault fires on a bundle's first reply while newer batches are still inside the
    helpers, so the retry must start from fresh helpers, not read stale replies."""
    markers = tmp_path / "faults"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize@{markers}")
    out, _ = _build(corpus, "faults_helpers", BUNDLE_RETRYING + [
        "--input_range_bytes=65536", "--encoder_processes=2"], monkeypatch)
    assert any(p.name.startswith("tokenize-") for p in markers.iterdir())
    _assert_clean_and_equal(out, reference[0])
    assert encoder_helpers_of(os.getpid()) == []
