"""Read benchmark: `python benchmarks/read.py [--samples N] [--build DIR] [--json PATH]`.

Builds (or reuses, `--build DIR`) the benchmark's unit-build of N samples (default 1M;
the corpus and SentencePiece 8k tokenizer of `run.py`, built by `targets.py ours`), then
measures, each reader in a fresh process of its own, on a warm page cache:

  bound        np.memmap of the shards: the same rows UnitReader reads (a random
               gather, the order precomputed) into int64; and a contiguous slice of
               as many rows (the floor of any reader)
  UnitReader   one rank, and 8 simulated ranks (8 readers, rank 0..7, in one process,
               consumed round-robin, tokens summed); at `--tokens-per-step` (default
               65536) and at the batch shape of mintdim's unit-read (8 x unit tokens)
  packed       UnitReader(pack_length=2048) at `--tokens-per-step`, against the gather
               bound at the same tokens a step (token slots delivered, padding included);
               `input_ids` and `labels` of each step, and again with `position_ids` and
               `document_ids` (made on first use) used too
  pack-build   PackReader(seq_len=2048, tokens_per_step // 2048 samples a step) on a
               pack-build of the same corpus and tokenizer, against a memmap gather of
               as many random windows of 2049 tokens of a shard's .bin into int64
  unit-read    ours, `mintdim_beam.pipeline("unit-read")` (skipped with a notice while
               it does not exist), and mintdim 0.2.1's, run by `--reference-python` or
               MINTDIM_REFERENCE_PYTHON: batch 8 of the most populated unit, sequential

Tokens are token slots delivered (`input_ids.size`, padding included), after one
untimed warm-up batch (a first open fills the reader's memory-mapped cache). Each
reader reads until `--tokens` tokens or `--seconds` seconds (mintdim:
`--reference-seconds`), whichever comes first, in `--repeat` interleaved rounds (the
fastest run counts; mintdim's runs once). Also, each in a fresh process: time to
the first batch (import + open + first batch; for the packed and pack readers too)
and to resume (import + open +
load_state_dict of a state saved mid-epoch + next batch, checked against the batch the
saving reader read next); and peak memory of a UnitReader process reading
`--memory-steps` steps on the `--memory-samples` build (default 100k) against this one.
Prints tokens/s and the ratios with their goals; writes `benchmarks/.work/results_read.json`
(`--json benchmarks/results_read.json` records a run).

`--synthetic 1000000,10000000,100000000` measures the readers at scale instead
(`read_scale.py`: synthetic builds of that many records, lengths only; first batch,
resume and resident memory of one rank of 8 for UnitReader unpacked and packed and
PackReader, min and median of `--rounds` interleaved rounds; writes
`benchmarks/.work/results_read_scale.json` unless `--json` names another file).

(`--worker SPEC` runs one measurement; the reference Python runs this file that way.)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNIT_READ_BATCH = 8
TARGET = "output"
GOALS = {"packed_blend_cost": 1.10, "pack_blend_cost": 1.10,
         "unit_reader_over_mintdim": 20.0, "bound_over_unit_reader": 3.0,
         "first_batch_s": 1.0, "resume_s": 1.0, "bound_over_packed": 3.0,
         "bound_over_pack_reader": 2.0, "start_packed_s": 0.5}
PACK_LENGTH = 2048  # packed steps' rows and PackReader's seq_len


# -- the driver -------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--build", help="an existing unit-build to read (default: build one)")
    parser.add_argument("--workdir", default=str(HERE / ".work"))
    parser.add_argument("--json", default=str(HERE / ".work" / "results_read.json"),
                        help="where to write the results (default: the untracked work dir; "
                             "name benchmarks/results_read.json to record them)")
    parser.add_argument("--reference-python", default=os.environ.get("MINTDIM_REFERENCE_PYTHON"))
    parser.add_argument("--tokens-per-step", type=int, default=65536)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=50_000_000,
                        help="tokens per reader (the run stops earlier at --seconds)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time budget per reader")
    parser.add_argument("--reference-seconds", type=float, default=30.0,
                        help="time budget of mintdim 0.2.1's unit-read")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of the throughput runs; the fastest run of each counts")
    parser.add_argument("--memory-samples", type=int, default=100_000,
                        help="the smaller build for the peak-memory comparison (0: skip)")
    parser.add_argument("--memory-steps", type=int, default=300)
    parser.add_argument("--repeat-start", type=int, default=3,
                        help="fresh processes timed for first batch and for resume")
    parser.add_argument("--vocab", type=int, default=8000, help=argparse.SUPPRESS)
    parser.add_argument("--synthetic", help="record counts, comma-separated: the readers at "
                                            "scale on synthetic builds (read_scale.py)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of the --synthetic measurements")
    args = parser.parse_args(argv)
    if args.synthetic:
        sys.path.insert(0, str(HERE))
        import read_scale

        default = parser.get_default("json")
        return read_scale.main(["--sizes", args.synthetic, "--rounds", str(args.rounds),
                                "--workdir", str(Path(args.workdir) / "scale"),
                                *(["--json", args.json] if args.json != default else [])])
    if args.worker:
        print(json.dumps(WORKERS[json.loads(args.worker)["kind"]](json.loads(args.worker))))
        return 0

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if args.build:
        build, build_seconds = Path(args.build).resolve(), None
    else:
        build, build_seconds = ensure_build(args.samples, work, args.vocab)
    histogram = {int(k): int(v) for k, v in json.loads((build / "histogram.json").read_text()).items()}
    unit = max((c, u) for u, c in histogram.items())[1]
    layout = json.loads((build / "length_field.json").read_text())
    shards = sorted(build.glob("unit_*/shard_*.bin"))
    report = {"build": str(build), "samples": sum(histogram.values()), "build_seconds": build_seconds,
              "build_bytes": sum(p.stat().st_size for p in shards), "shards": len(shards),
              "sample_index_bytes": (build / "sample_index.jsonl").stat().st_size,
              "histogram": histogram, "unit": unit, "unit_records": histogram[unit],
              "token_dtype": layout["token_dtype"], "tokens_per_step": args.tokens_per_step,
              "ranks": args.ranks, "cores": os.cpu_count(), "budget_tokens": args.tokens,
              "budget_seconds": args.seconds, "repeat": args.repeat, "results": {}}
    pack = ensure_pack_build(build, report["samples"], work)
    report["pack_build"] = str(pack)
    warm_page_cache(build)
    warm_page_cache(pack)
    small_step = UNIT_READ_BATCH * unit
    state_file = work / "read_state.json"
    base = {"build": str(build), "unit": unit, "tokens": args.tokens, "seconds": args.seconds}
    runs = {
        "bound_gather": dict(base, kind="bound", mode="gather", tokens_per_step=args.tokens_per_step),
        "bound_slice": dict(base, kind="bound", mode="slice", tokens_per_step=args.tokens_per_step),
        "bound_gather_ranks": dict(base, kind="bound", mode="gather",
                                   tokens_per_step=args.tokens_per_step, world_size=args.ranks),
        "unit_reader": dict(base, kind="unit_reader", tokens_per_step=args.tokens_per_step,
                            world_size=1, state_file=str(state_file)),
        "unit_reader_ranks": dict(base, kind="unit_reader", tokens_per_step=args.tokens_per_step,
                                  world_size=args.ranks),
        "bound_gather_small": dict(base, kind="bound", mode="gather", tokens_per_step=small_step),
        "bound_slice_small": dict(base, kind="bound", mode="slice", tokens_per_step=small_step),
        "unit_reader_small": dict(base, kind="unit_reader", tokens_per_step=small_step, world_size=1),
        "ours_unit_read": dict(base, kind="unit_read", module="mintdim_beam"),
        "unit_reader_packed": dict(base, kind="packed", tokens_per_step=args.tokens_per_step,
                                   state_file=str(work / "read_state_packed.json")),
        "unit_reader_packed_all": dict(base, kind="packed", tokens_per_step=args.tokens_per_step,
                                       arrays="all"),
        "pack_bound": dict(base, kind="pack_bound", pack=str(pack), tokens_per_step=args.tokens_per_step),
        "pack_reader": dict(base, kind="pack_reader", pack=str(pack), tokens_per_step=args.tokens_per_step,
                            state_file=str(work / "read_state_pack.json")),
        # blends (issue 42): the build twice, half and half, against the single reader
        "unit_reader_packed_blend": dict(base, kind="packed", tokens_per_step=args.tokens_per_step,
                                         blend=True),
        "pack_reader_blend": dict(base, kind="pack_reader", pack=str(pack),
                                  tokens_per_step=args.tokens_per_step, blend=True),
    }
    if args.reference_python:
        runs["mintdim_unit_read"] = dict(base, kind="unit_read", module="mintdim",
                                         seconds=args.reference_seconds)
    else:
        print("notice: no mintdim 0.2.1 Python given (--reference-python or "
              "MINTDIM_REFERENCE_PYTHON): skipping its unit-read", file=sys.stderr)
    # Rounds interleave the readers, so a slow spell of this shared machine hits them
    # alike; the fastest run of each counts. mintdim's unit-read runs once, for its own
    # time budget (thousands of reads).
    for round_ in range(max(1, args.repeat)):
        for name, spec in runs.items():
            if name == "mintdim_unit_read" and round_:
                continue
            python = args.reference_python if name == "mintdim_unit_read" else sys.executable
            result = worker(python, spec)
            best = report["results"].get(name)
            if "skipped" not in result:
                result["every_run_tokens_per_s"] = (best or {}).get("every_run_tokens_per_s", []) + [
                    result["tokens_per_s"]]
            if best is None or result.get("tokens_per_s", 0) > best.get("tokens_per_s", 0):
                report["results"][name] = result
            else:
                best["every_run_tokens_per_s"] = result["every_run_tokens_per_s"]
            _progress(name, result)

    start = {"first_batch": [], "resume": []}
    for _ in range(max(1, args.repeat_start)):
        start["first_batch"].append(worker(sys.executable, dict(
            base, kind="first_batch", tokens_per_step=args.tokens_per_step)))
        start["resume"].append(worker(sys.executable, dict(
            base, kind="resume", tokens_per_step=args.tokens_per_step, state_file=str(state_file))))
    for which, state in (("packed", "read_state_packed.json"), ("pack", "read_state_pack.json")):
        spec = dict(base, pack=str(pack), tokens_per_step=args.tokens_per_step, reader=which,
                    state_file=str(work / state))
        start[f"first_batch_{which}"] = [worker(sys.executable, dict(spec, kind="start", resume=False))
                                         for _ in range(max(1, args.repeat_start))]
        start[f"resume_{which}"] = [worker(sys.executable, dict(spec, kind="start", resume=True))
                                    for _ in range(max(1, args.repeat_start))]
    report["start"] = start

    memory = {"this": worker(sys.executable, dict(base, kind="memory", tokens_per_step=args.tokens_per_step,
                                                  steps=args.memory_steps))}
    memory["this"]["samples"] = report["samples"]
    if args.memory_samples and args.memory_samples != report["samples"]:
        small, _ = ensure_build(args.memory_samples, work, args.vocab)
        warm_page_cache(small)
        memory["small"] = worker(sys.executable, dict(base, kind="memory", build=str(small),
                                                      tokens_per_step=args.tokens_per_step,
                                                      steps=args.memory_steps))
        memory["small"]["samples"] = args.memory_samples
    report["memory"] = memory
    report["ratios"] = ratios(report)
    _print(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def ensure_build(samples: int, work: Path, vocab: int = 8000) -> tuple[Path, float | None]:
    """The benchmark build of `samples` samples (SentencePiece 8k) under `work`, built
    by `targets.py ours` unless a complete one is there; returns (dir, build seconds)."""
    sys.path.insert(0, str(HERE))
    from corpus import train_tokenizers, write_corpus

    out = (work / f"read_build_{samples}").resolve()
    if (out / "manifest.json").exists():
        return out, None
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / f"corpus_{samples}.jsonl", samples)
    full = work / "corpus_100000.jsonl"
    tokenizer = train_tokenizers(full if full.exists() else corpus, work, vocab)["sentencepiece"]
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    start = time.perf_counter()
    subprocess.run([sys.executable, str(HERE / "targets.py"), "ours", str(corpus.resolve()),
                    "sentencepiece", str(Path(tokenizer).resolve()), str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return out, round(time.perf_counter() - start, 2)


def ensure_pack_build(build: Path, samples: int, work: Path) -> Path:
    """A pack-build of the corpus and tokenizer the unit-build `build` was made from
    (every sample one document, the same template), unless a complete one is there."""
    out = (work / f"read_pack_{samples}").resolve()
    if (out / "manifest.json").exists():
        return out
    sys.path.insert(0, str(HERE))
    from targets import FIELDS, TEMPLATE

    from mintdim_beam import pipeline

    manifest = json.loads((build / "manifest.json").read_text())
    tokenizer, corpus = manifest["tokenizer"], manifest["source"]["files"][0]
    shutil.rmtree(out, ignore_errors=True)
    job = pipeline("pack-build").source.jsonl(files=[corpus], fields=[FIELDS], templates=[TEMPLATE])
    job = getattr(job.tokenizer, tokenizer["type"])(files=[tokenizer.get("path") or tokenizer["file"]])
    job.pack(seed=0).output.dir(str(out)).run()
    return out


def warm_page_cache(build: Path) -> None:
    """Read every shard and the sample index once, so every reader starts warm."""
    for path in [*sorted(build.glob("unit_*/shard_*.bin")), *sorted(build.glob("shard_*.bin")),
                 *[p for p in [build / "sample_index.jsonl"] if p.exists()]]:
        with open(path, "rb") as handle:
            while handle.read(1 << 24):
                pass


def worker(python: str, spec: dict) -> dict:
    """Run one measurement in a fresh `python` process; its last stdout line is JSON."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if python == sys.executable:  # this checkout's code, not whatever the venv has installed
        env["PYTHONPATH"] = str(HERE.parent)
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                          capture_output=True, text=True, env=env, cwd=str(HERE))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{spec['kind']} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = round(wall, 3)
    # user + system CPU of the worker's process tree (it waits for its own children)
    result["process_cpu_s"] = round(after.ru_utime + after.ru_stime
                                    - before.ru_utime - before.ru_stime, 3)
    return result


def ratios(report: dict) -> dict:
    res, out = report["results"], {}

    def tps(name):
        row = res.get(name) or {}
        return row.get("tokens_per_s")

    def ratio(a, b):
        return round(a / b, 2) if a and b else None

    out["unit_reader_over_mintdim_same_shape"] = ratio(tps("unit_reader_small"), tps("mintdim_unit_read"))
    out["unit_reader_over_mintdim"] = ratio(tps("unit_reader"), tps("mintdim_unit_read"))
    out["unit_reader_ranks_over_mintdim"] = ratio(tps("unit_reader_ranks"), tps("mintdim_unit_read"))
    out["ours_unit_read_over_mintdim"] = ratio(tps("ours_unit_read"), tps("mintdim_unit_read"))
    out["bound_over_unit_reader"] = ratio(tps("bound_gather"), tps("unit_reader"))
    out["bound_over_unit_reader_ranks"] = ratio(tps("bound_gather_ranks"), tps("unit_reader_ranks"))
    out["bound_over_unit_reader_same_shape"] = ratio(tps("bound_gather_small"), tps("unit_reader_small"))
    out["slice_over_unit_reader"] = ratio(tps("bound_slice"), tps("unit_reader"))
    out["slice_over_gather"] = ratio(tps("bound_slice"), tps("bound_gather"))
    out["bound_over_packed"] = ratio(tps("bound_gather"), tps("unit_reader_packed"))
    out["bound_over_packed_all"] = ratio(tps("bound_gather"), tps("unit_reader_packed_all"))
    out["bound_over_pack_reader"] = ratio(tps("pack_bound"), tps("pack_reader"))
    # a blended step's cost over a single build's (issue 42: at most 1.10)
    out["packed_blend_cost"] = ratio(tps("unit_reader_packed"), tps("unit_reader_packed_blend"))
    out["pack_blend_cost"] = ratio(tps("pack_reader"), tps("pack_reader_blend"))
    starts = report["start"]
    for which in ("packed", "pack"):
        out[f"first_batch_{which}_s"] = max(r["total_s"] for r in starts[f"first_batch_{which}"])
        out[f"resume_{which}_s"] = max(r["total_s"] for r in starts[f"resume_{which}"])
        out[f"resume_{which}_matches"] = all(r["matches"] for r in starts[f"resume_{which}"])
    out["first_batch_s"] = max(r["import_open_first_s"] for r in starts["first_batch"])
    out["resume_s"] = max(r["import_open_resume_s"] for r in starts["resume"])
    out["resume_matches"] = all(r["matches"] for r in starts["resume"])
    mem = report["memory"]
    if "small" in mem:
        out["peak_rss_large_over_small"] = ratio(mem["this"]["peak_rss_mb"], mem["small"]["peak_rss_mb"])
        out["peak_anon_large_over_small"] = ratio(mem["this"]["peak_anon_mb"], mem["small"]["peak_anon_mb"])
    return out


def _progress(name: str, row: dict) -> None:
    if "skipped" in row:
        print(f"  {name}: skipped ({row['skipped']})", file=sys.stderr)
    else:
        print(f"  {name}: {row['tokens_per_s']:,} tokens/s", file=sys.stderr)


LABELS = {
    "bound_gather": "bound: memmap gather, same rows",
    "bound_gather_ranks": "bound: the same, {ranks} ranks' rows apart",
    "bound_slice": "bound: memmap contiguous slice",
    "unit_reader": "UnitReader, 1 rank",
    "unit_reader_ranks": "UnitReader, {ranks} ranks in 1 process",
    "bound_gather_small": "bound: memmap gather, same rows",
    "bound_slice_small": "bound: memmap contiguous slice",
    "unit_reader_small": "UnitReader, 1 rank",
    "ours_unit_read": "our unit-read (batch 8, unit {unit})",
    "mintdim_unit_read": "mintdim 0.2.1 unit-read (batch 8, unit {unit})",
    "unit_reader_packed": "UnitReader pack_length=2048, 1 rank",
    "unit_reader_packed_all": "the same, position_ids, document_ids used",
    "pack_bound": "bound: memmap gather of random 2049-token windows",
    "pack_reader": "PackReader seq_len=2048, 1 rank",
}


def _print(report: dict) -> None:
    r, res = report["ratios"], report["results"]
    print(f"\n{report['samples']} records, {report['build_bytes'] / 1e6:.0f} MB in {report['shards']} "
          f"shards, sample_index {report['sample_index_bytes'] / 1e6:.0f} MB; most populated unit "
          f"{report['unit']} ({report['unit_records']} records); {report['cores']} cores")
    groups = [(f"tokens_per_step {report['tokens_per_step']}",
               ["bound_gather", "bound_slice", "unit_reader", "bound_gather_ranks",
                "unit_reader_ranks"]),
              (f"tokens_per_step {UNIT_READ_BATCH * report['unit']} (= batch 8 x unit {report['unit']})",
               ["bound_gather_small", "bound_slice_small", "unit_reader_small"]),
              ("unit-read: sequential batches of one unit", ["ours_unit_read", "mintdim_unit_read"]),
              (f"packed and pack-build, tokens_per_step {report['tokens_per_step']}",
               ["bound_gather", "unit_reader_packed", "unit_reader_packed_all", "pack_bound",
                "pack_reader"])]
    for title, names in groups:
        print(f"\n[{title}]{'':4} {'tokens/s':>14} {'tokens':>12} {'seconds':>8} {'peak MB':>8}")
        for name in names:
            if name not in res:
                continue
            row = res[name]
            label = LABELS[name].format(ranks=report["ranks"], unit=report["unit"])
            if "skipped" in row:
                print(f"  {label:44} skipped: {row['skipped']}")
                continue
            print(f"  {label:44} {row['tokens_per_s']:14,} {row['tokens']:12,} {row['seconds']:8.2f} "
                  f"{row['peak_rss_mb']:8.0f}")

    def line(text, value, goal, ok):
        mark = "" if value is None else ("  met" if ok(value) else "  MISSED")
        shown = "n/a" if value is None else value
        print(f"  {text:58} {str(shown):>8}  goal {goal}{mark}")

    print("\n[goals]")
    line("UnitReader / mintdim unit-read, same batch shape (x)", r["unit_reader_over_mintdim_same_shape"],
         ">= 20", lambda v: v >= GOALS["unit_reader_over_mintdim"])
    line(f"UnitReader / mintdim unit-read, tokens_per_step {report['tokens_per_step']} (x)",
         r["unit_reader_over_mintdim"], ">= 20", lambda v: v >= GOALS["unit_reader_over_mintdim"])
    line(f"UnitReader {report['ranks']} ranks / mintdim unit-read (x)", r["unit_reader_ranks_over_mintdim"],
         ">= 20", lambda v: v >= GOALS["unit_reader_over_mintdim"])
    line("our unit-read / mintdim unit-read (x)", r["ours_unit_read_over_mintdim"], "(info)", lambda v: True)
    line(f"bound / UnitReader, tokens_per_step {report['tokens_per_step']} (x)", r["bound_over_unit_reader"],
         "<= 3", lambda v: v <= GOALS["bound_over_unit_reader"])
    line(f"bound / UnitReader {report['ranks']} ranks (x)", r["bound_over_unit_reader_ranks"],
         "<= 3", lambda v: v <= GOALS["bound_over_unit_reader"])
    line("bound / UnitReader, same batch shape as unit-read (x)", r["bound_over_unit_reader_same_shape"],
         "<= 3", lambda v: v <= GOALS["bound_over_unit_reader"])
    line("contiguous slice / UnitReader (x)", r["slice_over_unit_reader"], "(info)", lambda v: True)
    fb = report["start"]["first_batch"]
    line("first batch, fresh process: import + open + batch (s, worst)", r["first_batch_s"], "< 1",
         lambda v: v < GOALS["first_batch_s"])
    print("    " + "; ".join(f"import {x['import_s']} open {x['open_s']} batch {x['first_batch_s']} "
                             f"(sample_index parse alone {x['parse_s']})"
                             for x in fb))
    rs = report["start"]["resume"]
    line("resume, fresh process: import + open + load + batch (s, worst)", r["resume_s"], "< 1",
         lambda v: v < GOALS["resume_s"])
    print("    " + "; ".join(f"step {x['step']}: import {x['import_s']} open {x['open_s']} load "
                             f"{x['load_s']} batch {x['batch_s']}, process {x['process_wall_s']}"
                             for x in rs) + f"; same batch as the saving reader: {r['resume_matches']}")
    line("bound / UnitReader packed steps (x)", r["bound_over_packed"], "<= 3",
         lambda v: v <= GOALS["bound_over_packed"])
    line("bound / UnitReader packed, position and document ids used (x)",
         r["bound_over_packed_all"], "(info)", lambda v: True)
    line("pack bound / PackReader (x)", r["bound_over_pack_reader"], "<= 2",
         lambda v: v <= GOALS["bound_over_pack_reader"])
    line("UnitReader packed / its blend of two builds, a step's cost (x)", r["packed_blend_cost"],
         "<= 1.10", lambda v: v <= GOALS["packed_blend_cost"])
    line("PackReader / its blend of two builds, a step's cost (x)", r["pack_blend_cost"],
         "<= 1.10", lambda v: v <= GOALS["pack_blend_cost"])
    for which, name in (("packed", "UnitReader packed"), ("pack", "PackReader")):
        for what in ("first_batch", "resume"):
            rows = report["start"][f"{what}_{which}"]
            line(f"{name}: {what.replace('_', ' ')}, fresh process (s, worst)", r[f"{what}_{which}_s"],
                 "< 0.5", lambda v: v < GOALS["start_packed_s"])
            print("    " + "; ".join(f"import {x['import_s']} open {x['open_s']} load {x['load_s']} "
                                     f"batch {x['batch_s']}" for x in rows)
                  + (f"; same batch as the saving reader: {r[f'resume_{which}_matches']}"
                     if what == "resume" else ""))
    mem = report["memory"]
    for key in ("small", "this"):
        if key in mem:
            m = mem[key]
            print(f"  memory, {m['samples']:>8} records, {m['steps']} steps: peak RSS {m['peak_rss_mb']} MB, "
                  f"peak anonymous {m['peak_anon_mb']} MB; at the end anonymous {m['anon_mb']} MB, "
                  f"mapped file pages {m['file_mb']} MB")
    if "small" in mem:
        # RSS counts the mapped shards' pages (page cache, reclaimable): it grows with
        # what was read, not with what the reader holds; anonymous memory is the reader's.
        line("peak RSS, this build / the small build (x)", r["peak_rss_large_over_small"],
             "(info: mapped file pages)", lambda v: True)
        line("peak anonymous memory, this build / the small build (x)", r["peak_anon_large_over_small"],
             "<= 1.5", lambda v: v <= 1.5)


# -- the workers (a fresh process each; only the standard library at import) ------------
def _status_mb() -> dict:
    out = {}
    with open("/proc/self/status") as handle:
        for row in handle:
            key, _, value = row.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def _peak_rss_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _done(spec, tokens, start) -> bool:
    return tokens >= spec["tokens"] or time.perf_counter() - start >= spec["seconds"]


def _result(tokens, steps, seconds, **extra) -> dict:
    return dict(tokens=int(tokens), steps=steps, seconds=round(seconds, 3),
                tokens_per_s=round(tokens / seconds), peak_rss_mb=_peak_rss_mb(), **extra)


def _reader(spec, world_size=1, rank=0, build=None):
    from mintdim_beam.read import UnitReader

    return UnitReader(build or spec["build"], tokens_per_step=spec["tokens_per_step"], seed=0,
                      rank=rank, world_size=world_size, target=[TARGET], ignore_id=-100)


def w_unit_reader(spec) -> dict:
    """UnitReader, `world_size` readers in this process (rank 0..W-1, round-robin)."""
    world = spec["world_size"]
    readers = [_reader(spec, world, rank) for rank in range(world)]
    for reader in readers:
        reader.batch_at(0)  # warm-up: sample_index parse, first maps; not timed
    tokens = steps = epoch = 0
    start = time.perf_counter()
    done = False
    while not done:
        for reader in readers:
            reader.set_epoch(epoch)
        iters = [iter(reader) for reader in readers]
        for _ in range(len(readers[0])):
            for it in iters:
                tokens += next(it).input_ids.size
            steps += 1
            if _done(spec, tokens, start):
                done = True
                break
        epoch += 1
    seconds = time.perf_counter() - start
    extra = {"epochs_started": epoch, "steps_in_epoch": len(readers[0])}
    if spec.get("state_file"):  # the resume measurement's state, saved mid-epoch
        reader = readers[0]
        state = reader.state_dict()
        after = next(iter(reader))
        Path(spec["state_file"]).write_text(json.dumps({
            "state": state, "step": after.step,
            "sample_ids_sha256": hashlib.sha256(after.sample_ids.tobytes()).hexdigest()}))
        extra["saved_state_step"] = state["step"]
    return _result(tokens, steps, seconds, **extra)


def bound_plan(root: Path, tokens_per_step: int, tokens: int, world: int = 1) -> dict:
    """The gather bound's set-up, outside any timing: every shard memory-mapped, and the
    steps of one epoch (or as many as `tokens` needs) as UnitReader seed 0 orders them,
    each rank's rows of W (`world`) a step of its own: (unit, rows, [(map, shard rows,
    places)], padding places). Also what `read_cpu.py` times against."""
    import numpy as np

    from mintdim_beam.read import order

    layout = json.loads((root / "length_field.json").read_text())
    per_shard = json.loads((root / "manifest.json").read_text())["output"]["samples_per_shard"]
    counts = {int(k): int(v) for k, v in json.loads((root / "histogram.json").read_text()).items() if int(v)}
    dtype = {"uint16": np.uint16, "uint32": np.uint32}[layout["token_dtype"]]
    nseg, pad = len(layout["sequence_template"]), int(layout["pad_token_id"])
    maps = {}
    for unit, count in counts.items():
        width = 1 + nseg + unit
        for shard in range(-(-count // per_shard)):
            rows = min(per_shard, count - shard * per_shard)
            maps[unit, shard] = np.memmap(root / f"unit_{unit}" / f"shard_{shard:06d}.bin", dtype=dtype,
                                          mode="r", shape=(rows, width))
    plan = order.epoch_plan(counts, tokens_per_step, 0, 0, "pad")
    perms = {u: order.unit_permutation(c, 0, 0, u) for u, c in counts.items()}
    steps, planned = [], 0
    for k in range(len(plan)):  # one epoch, or the steps the token budget needs
        unit = int(plan.units[k])
        rows = order.rows_per_step(tokens_per_step, unit)
        for rank in range(world):
            ordinals = order.rank_ordinals(perms[unit], int(plan.index[k]), rows, rank, world)
            real = ordinals >= 0
            shard_of, row_of = np.divmod(ordinals[real], per_shard)
            positions = np.flatnonzero(real)
            groups = [(maps[unit, int(s)], row_of[shard_of == s], positions[shard_of == s])
                      for s in np.unique(shard_of)]
            steps.append((unit, len(ordinals), groups, ~real))
        planned += rows * unit
        if planned >= tokens:
            break
    return {"maps": maps, "counts": counts, "per_shard": per_shard, "nseg": nseg, "pad": pad,
            "steps": steps}


def bound_gather(bound: dict, step):
    """One planned step's rows gathered shard by shard into int64, padding rows filled."""
    import numpy as np

    unit, rows, groups, padding = step
    nseg = bound["nseg"]
    out = np.empty((rows, unit), dtype=np.int64)
    for mm, picked, positions in groups:
        out[positions] = mm[picked, 1 + nseg:]
    out[padding] = bound["pad"]
    return out


def w_bound(spec) -> dict:
    """The same rows as UnitReader rank 0 of 1 (order precomputed with the reader's own
    `order` functions), gathered from np.memmap of the shards into int64; or as many
    rows per step as one contiguous slice of a shard."""
    import numpy as np

    bound = bound_plan(Path(spec["build"]), spec["tokens_per_step"], spec["tokens"],
                       spec.get("world_size", 1))
    maps, counts, per_shard, nseg = bound["maps"], bound["counts"], bound["per_shard"], bound["nseg"]
    steps = bound["steps"]
    cursor = {u: (0, 0) for u in counts}
    tokens = n = 0
    start = time.perf_counter()
    while not _done(spec, tokens, start):
        step = steps[n % len(steps)]
        if spec["mode"] == "gather":
            out = bound_gather(bound, step)
        else:  # as many rows, one slice of one shard, walking the unit's shards
            unit, rows = step[0], step[1]
            shard, row = cursor[unit]
            if row + rows > maps[unit, shard].shape[0]:
                shard, row = (shard + 1) % -(-counts[unit] // per_shard), 0
            out = maps[unit, shard][row:row + rows, 1 + nseg:].astype(np.int64)
            cursor[unit] = (shard, row + len(out))
        tokens += out.size
        n += 1
    return _result(tokens, n, time.perf_counter() - start, planned_steps=len(steps))


def w_unit_read(spec) -> dict:
    """pipeline("unit-read") of `module` (mintdim or mintdim_beam): batch 8 of one unit,
    sequential reads, one warm-up read not timed."""
    import importlib

    root = Path(spec["build"])
    unit = spec["unit"]
    try:
        pipeline = importlib.import_module(spec["module"]).pipeline
        template = json.loads((root / "length_field.json").read_text())["sequence_template"]
        p = (pipeline("unit-read")
             .queue(entries=[{"path": str(root / f"unit_{unit}"), "unit": unit,
                              "batch": UNIT_READ_BATCH, "accum": 1}])
             .layout(sequence_template=template)
             .target(fields=[TARGET], index=[template.index(TARGET)], ignore_id=-100))
        first = p.read()
    except Exception as exc:  # not there yet (ours is being written)
        return {"skipped": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"}
    assert first.input_ids.shape == (UNIT_READ_BATCH, unit), first.input_ids.shape
    tokens = steps = 0
    start = time.perf_counter()
    while not _done(spec, tokens, start):
        tokens += p.read().input_ids.size
        steps += 1
    return _result(tokens, steps, time.perf_counter() - start)


def w_first_batch(spec) -> dict:
    t0 = time.perf_counter()
    from mintdim_beam.read import UnitReader  # noqa: F401

    t1 = time.perf_counter()
    reader = _reader(spec)
    t2 = time.perf_counter()
    batch = next(iter(reader))
    t3 = time.perf_counter()
    from mintdim_beam.read.build import parse_sample_index

    parse_sample_index(reader.build)  # again, alone: how much of the first batch it is
    parse = time.perf_counter() - t3
    return {"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3), "first_batch_s": round(t3 - t2, 3),
            "import_open_first_s": round(t3 - t0, 3), "parse_s": round(parse, 3),
            "rows": int(batch.input_ids.shape[0]), "unit_size": batch.unit_size, "peak_rss_mb": _peak_rss_mb()}


def w_resume(spec) -> dict:
    saved = json.loads(Path(spec["state_file"]).read_text())
    t0 = time.perf_counter()
    from mintdim_beam.read import UnitReader  # noqa: F401

    t1 = time.perf_counter()
    reader = _reader(spec)
    t2 = time.perf_counter()
    reader.load_state_dict(saved["state"])
    reader.set_epoch(saved["state"]["epoch"])  # the usual loop after a resume; changes nothing
    t3 = time.perf_counter()
    batch = next(iter(reader))
    t4 = time.perf_counter()
    matches = (batch.step == saved["step"] and
               hashlib.sha256(batch.sample_ids.tobytes()).hexdigest() == saved["sample_ids_sha256"])
    return {"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3), "load_s": round(t3 - t2, 4),
            "batch_s": round(t4 - t3, 3), "import_open_resume_s": round(t4 - t0, 3),
            "step": saved["state"]["step"], "epoch": saved["state"]["epoch"], "matches": matches,
            "peak_rss_mb": _peak_rss_mb()}


def w_memory(spec) -> dict:
    """Peak RSS (getrusage) and peak anonymous memory (RssAnon sampled every 2 ms by a
    thread) of one UnitReader reading `steps` steps; mapped file pages at the end."""
    import threading

    peak = {"anon": 0.0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak["anon"] = max(peak["anon"], _status_mb()["RssAnon"])
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    reader = _reader(spec)
    steps = epoch = 0
    while steps < spec["steps"]:
        reader.set_epoch(epoch)
        for _ in reader:
            steps += 1
            if steps >= spec["steps"]:
                break
        epoch += 1
    status = _status_mb()
    stop.set()
    thread.join()
    peak["anon"] = max(peak["anon"], status["RssAnon"])
    return {"steps": steps, "peak_rss_mb": _peak_rss_mb(), "peak_anon_mb": round(peak["anon"], 1),
            "anon_mb": round(status["RssAnon"], 1), "file_mb": round(status["RssFile"], 1)}


def _packed_reader(spec):
    from mintdim_beam.read import UnitReader

    kw = dict(tokens_per_step=spec["tokens_per_step"], seed=0, target=[TARGET], ignore_id=-100,
              pack_length=PACK_LENGTH)
    if spec.get("blend"):  # the build as two sources, half and half
        from mintdim_beam.read.blended import BlendedUnitReader

        return BlendedUnitReader([spec["build"], spec["build"]], [1, 1], **kw)
    return UnitReader(spec["build"], **kw)


def _pack_reader(spec):
    from mintdim_beam.read import PackReader

    tokens = json.loads((Path(spec["pack"]) / "manifest.json").read_text())["tokens"]
    per_step = max(1, min(spec["tokens_per_step"] // PACK_LENGTH, (tokens - 1) // PACK_LENGTH))
    if spec.get("blend"):
        from mintdim_beam.read.blended import BlendedPackReader

        return BlendedPackReader([spec["pack"], spec["pack"]], [1, 1], PACK_LENGTH, seed=0,
                                 batch_size=per_step)
    return PackReader(spec["pack"], PACK_LENGTH, seed=0, batch_size=per_step)


def _save_next(reader, spec, ids) -> dict:
    """Save the state mid-run and the hash of the batch that follows it."""
    state = reader.state_dict()
    after = next(iter(reader))
    Path(spec["state_file"]).write_text(json.dumps({
        "state": state, "sha256": hashlib.sha256(ids(after).tobytes()).hexdigest()}))
    return state


def w_packed(spec) -> dict:
    """UnitReader packed steps, one rank, epochs in a row, `input_ids` and `labels` of
    each (with `arrays="all"` also `position_ids` and `document_ids`, made on first use);
    the first step is not timed, the packing of each later window of the plan is (it
    is done when the steps reach it)."""
    reader = _packed_reader(spec)
    reader.batch_at(0)
    used = ["input_ids", "labels"] + (["position_ids", "document_ids"]
                                      if spec.get("arrays") == "all" else [])
    tokens = steps = epoch = 0
    start = time.perf_counter()
    while not _done(spec, tokens, start):
        reader.set_epoch(epoch)
        for batch in reader:
            arrays = [getattr(batch, name) for name in used]
            tokens += arrays[0].size
            steps += 1
            if _done(spec, tokens, start):
                break
        epoch += 1
    seconds = time.perf_counter() - start
    if not spec.get("state_file"):
        return _result(tokens, steps, seconds)
    # (a blend's state is checked by tests/test_blend.py)
    if steps and reader.state_dict()["step"] >= len(reader):  # at an epoch's end: save mid-epoch
        # (a step changed by hand: the state's window no longer holds it, so loading it
        # checks the step against the whole plan; the state saved next names its window)
        reader.load_state_dict(dict(reader.state_dict(), step=len(reader) // 2))
    _save_next(reader, spec, lambda b: b.input_ids)
    return _result(tokens, steps, seconds, steps_in_epoch=len(reader))


def w_pack_reader(spec) -> dict:
    reader = _pack_reader(spec)
    reader.batch_at(0)
    tokens = steps = epoch = 0
    cpu = time.process_time()
    start = time.perf_counter()
    while not _done(spec, tokens, start):
        reader.set_epoch(epoch)
        for batch in reader:
            tokens += batch.tokens.size
            steps += 1
            if _done(spec, tokens, start):
                break
        epoch += 1
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    if not spec.get("state_file"):  # a blend: its state is checked by tests/test_blend.py
        return _result(tokens, steps, seconds, cpu_s=round(cpu, 3),
                       tokens_per_cpu_s=round(tokens / cpu))
    if reader.position >= reader.steps * reader.global_batch:
        reader.load_state_dict(dict(reader.state_dict(),
                                    position=reader.steps // 2 * reader.global_batch))
    _save_next(reader, spec, lambda b: b.tokens)
    return _result(tokens, steps, seconds, steps_in_epoch=len(reader), cpu_s=round(cpu, 3),
                   tokens_per_cpu_s=round(tokens / cpu))


def w_pack_bound(spec) -> dict:
    """As many windows of PACK_LENGTH + 1 tokens a step as PackReader reads, at random
    starts in the largest shard's .bin, gathered from its np.memmap into int64."""
    import numpy as np

    root = Path(spec["pack"])
    manifest = json.loads((root / "manifest.json").read_text())
    shard = max(manifest["shards"], key=lambda s: s["tokens"])
    mm = np.memmap(root / f"{shard['name']}.bin", dtype=manifest["dtype"], mode="r")
    width = PACK_LENGTH + 1
    per_step = max(1, min(spec["tokens_per_step"] // PACK_LENGTH, (manifest["tokens"] - 1) // PACK_LENGTH))
    rng = np.random.default_rng(0)
    span = max(1, len(mm) - width)
    steps = [rng.integers(0, span, per_step)[:, None] + np.arange(min(width, len(mm)))
             for _ in range(64)]
    tokens = n = 0
    cpu = time.process_time()
    start = time.perf_counter()
    while not _done(spec, tokens, start):
        out = mm[steps[n % len(steps)]].astype(np.int64)
        tokens += out.size
        n += 1
    cpu = time.process_time() - cpu
    return _result(tokens, n, time.perf_counter() - start, cpu_s=round(cpu, 3),
                   tokens_per_cpu_s=round(tokens / cpu))


def w_start(spec) -> dict:
    """Fresh process: import + open + (load the saved state) + the first batch, for the
    packed UnitReader or PackReader; a resumed batch checked against the saved one."""
    t0 = time.perf_counter()
    import mintdim_beam.read  # noqa: F401

    t1 = time.perf_counter()
    packed = spec["reader"] == "packed"
    reader = _packed_reader(spec) if packed else _pack_reader(spec)
    t2 = time.perf_counter()
    saved = json.loads(Path(spec["state_file"]).read_text()) if spec["resume"] else None
    if saved:
        reader.load_state_dict(saved["state"])
    t3 = time.perf_counter()
    batch = next(iter(reader))
    t4 = time.perf_counter()
    ids = batch.input_ids if packed else batch.tokens
    matches = saved is None or hashlib.sha256(ids.tobytes()).hexdigest() == saved["sha256"]
    return {"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3), "load_s": round(t3 - t2, 4),
            "batch_s": round(t4 - t3, 3), "total_s": round(t4 - t0, 3), "matches": matches,
            "peak_rss_mb": _peak_rss_mb()}


WORKERS = {"packed": w_packed, "pack_reader": w_pack_reader, "pack_bound": w_pack_bound,
           "start": w_start, "unit_reader": w_unit_reader, "bound": w_bound, "unit_read": w_unit_read,
           "first_batch": w_first_batch, "resume": w_resume, "memory": w_memory}


if __name__ == "__main__":
    sys.exit(main())
