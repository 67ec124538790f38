"""Throughput benchmark: `python benchmarks/run.py [--samples N] [--json PATH]`.

Generates the corpus and trains a SentencePiece and a Hugging Face BPE tokenizer (8k
pieces each, cached under benchmarks/.work), then measures per tokenizer, in one run:
(a) the bound: json parse + encoding every segment in one process (the bare
`tokenizers` floor: `encode_batch_fast`, `encode_batch` before tokenizers 0.21); (b) mintdim-beam's
default local build; (c) mintdim 0.2.1, when a Python with it is given by
--reference-python or MINTDIM_REFERENCE_PYTHON (skipped with a notice otherwise);
(b0) the same build by another version of mintdim-beam (--baseline-python: a Python
that imports it, e.g. a venv holding a `git worktree` of the commit before a change), so
a change is measured against what it changed in the same interleaved rounds. Prints wall and CPU seconds (min and median over
the rounds), samples/s, tokens/s, peak RSS and the ratios b/a, c/b, c/a and b/b0 (by
the minimum), and b's CPU over a's (issue 43: <= 0.5 for the byte-level BPEs, which the
native engine encodes); writes JSON. `--load N` runs N busy processes beside every round.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus import train_tokenizers, write_corpus  # noqa: E402
from measure import background_load, run_measured  # noqa: E402


# Published tokenizer.json files (`make test`: tools/published_tokenizers.py).
PUBLISHED = {"deepseek_v3": "deepseek_v3.json", "llama3.2": "llama3.2.json",
             "llama3.2_legacy": "llama3.2_legacy.json"}
BYTE_LEVEL = {"hf_bytelevel", *PUBLISHED}  # the native engine's: b's CPU <= 0.5x a's
CPU_GOAL = 0.5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--json", default=str(HERE / ".work" / "results.json"),
                        help="where to write the results (default: the untracked work dir)")
    parser.add_argument("--workdir", default=str(HERE / ".work"))
    parser.add_argument("--reference-python", default=os.environ.get("MINTDIM_REFERENCE_PYTHON"))
    parser.add_argument("--tokenizers", default="sentencepiece,hf_json,hf_bytelevel",
                        help="comma-separated: sentencepiece, hf_json, hf_bytelevel (trained "
                             "here) and deepseek_v3, llama3.2, llama3.2_legacy (the published "
                             "tokenizer.json files `make test` puts under .tools/published; no "
                             "(c) for them)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of (a), (b), (c); the fastest run of each counts "
                             "(this machine is noisy)")
    parser.add_argument("--beam-flag", action="append", default=[],
                        help="Beam flag for (b), repeatable; default: the local default run")
    parser.add_argument("--baseline-python", default=None,
                        help="a Python importing another version of mintdim-beam, built as (b0)")
    parser.add_argument("--baseline-default-run", action="store_true",
                        help="(b0) is the default local run, without --beam-flag: with "
                             "--baseline-python set to this Python, b/b0 is what a runner "
                             "(e.g. --beam-flag=--runner=PrismRunner) costs over the default")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes (one core's worth each) running beside every "
                             "round: the same load on any machine; c/a says what a build "
                             "spending nothing beyond the bound would reach under it")
    args = parser.parse_args(argv)

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / f"corpus_{args.samples}.jsonl", args.samples)
    labels = args.tokenizers.split(",")
    tokenizers = {}
    if set(labels) - set(PUBLISHED):  # the published ones need no training
        tokenizers = train_tokenizers(work / "corpus_100000.jsonl" if (work / "corpus_100000.jsonl").exists()
                                      else corpus, work)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    targets = str(HERE / "targets.py")
    report = {"samples": args.samples, "corpus_bytes": corpus.stat().st_size, "cores": os.cpu_count(),
              "repeat": args.repeat, "beam_flags": args.beam_flag, "load": args.load,
              "loadavg_before": os.getloadavg()[0], "results": {}}
    published = Path(os.environ.get("MINTDIM_PUBLISHED", HERE.parent / ".tools" / "published"))
    for label, file in PUBLISHED.items():  # `make test` puts them there
        tokenizers[label] = published / file
    for label in labels:
        tok = str(tokenizers[label])
        kind = "sentencepiece" if label == "sentencepiece" else "hf_json"  # the config's type
        commands = {"bound": ([sys.executable, targets, "bound", str(corpus), kind, tok], None)}
        out = work / f"out_{label}"
        commands["ours"] = ([sys.executable, targets, "ours", str(corpus), kind, tok, str(out)]
                            + args.beam_flag, out)
        if args.baseline_python:
            base_out = work / f"base_{label}"
            base_flags = [] if args.baseline_default_run else args.beam_flag
            commands["baseline"] = ([args.baseline_python, targets, "ours", str(corpus), kind,
                                     tok, str(base_out)] + base_flags, base_out)
        if args.reference_python and label in PUBLISHED:
            print(f"notice: mintdim 0.2.1 takes no pad token, which {PUBLISHED[label]} "
                  "lacks: skipping (c) for it", file=sys.stderr)
        elif args.reference_python:
            ref_out = work / f"ref_{label}"
            commands["reference"] = ([args.reference_python, targets, "reference", str(corpus),
                                      kind, tok, str(ref_out)], ref_out)
        else:
            print("notice: no mintdim 0.2.1 Python given (--reference-python or "
                  "MINTDIM_REFERENCE_PYTHON): skipping (c)", file=sys.stderr)
        # Rounds interleave the commands, so a slow spell on this shared machine hits them
        # alike; min and median of each are reported, ratios by the minimum.
        runs: dict = {}
        with background_load(args.load):
            for _ in range(max(1, args.repeat)):
                for name, (cmd, out_dir) in commands.items():
                    if out_dir is not None:
                        shutil.rmtree(out_dir, ignore_errors=True)
                    runs.setdefault(name, []).append(run_measured(cmd, env=env))
        tokens = json.loads(runs["bound"][0]["stdout"].strip().splitlines()[-1])["tokens"]
        row = {}
        for name, results in runs.items():
            walls = [r["seconds"] for r in results]
            cpus = [r["cpu_seconds"] for r in results]
            row[name] = {"seconds": round(min(walls), 2),
                         "median_seconds": round(statistics.median(walls), 2),
                         "cpu_seconds": round(min(cpus), 2),
                         "median_cpu_seconds": round(statistics.median(cpus), 2),
                         "samples_per_s": round(args.samples / min(walls)),
                         "tokens_per_s": round(tokens / min(walls)),
                         "peak_rss_mb": round(max(r["peak_rss_mb"] for r in results), 1)}
        row["b_over_a"] = round(row["ours"]["seconds"] / row["bound"]["seconds"], 2)
        row["b_over_a_cpu"] = round(row["ours"]["cpu_seconds"] / row["bound"]["cpu_seconds"], 3)
        row["b_over_a_cpu_median"] = round(row["ours"]["median_cpu_seconds"]
                                           / row["bound"]["median_cpu_seconds"], 3)
        if "baseline" in row:
            row["b_over_b0"] = round(row["ours"]["seconds"] / row["baseline"]["seconds"], 3)
            row["b_over_b0_cpu"] = round(row["ours"]["cpu_seconds"] / row["baseline"]["cpu_seconds"], 3)
            row["identical_to_baseline"] = _same_output(work / f"out_{label}", work / f"base_{label}")
        if "reference" in row:
            row["c_over_b"] = round(row["reference"]["seconds"] / row["ours"]["seconds"], 2)
            # The bound encodes with the build's tokenizer and does nothing else: on an
            # engine the build shares with it, c/b stays under about this.
            row["c_over_a"] = round(row["reference"]["seconds"] / row["bound"]["seconds"], 2)
            row["identical_to_reference"] = _same_output(work / f"out_{label}", work / f"ref_{label}")
        manifest = json.loads((work / f"out_{label}" / "manifest.json").read_text())
        row["engine"] = (manifest.get("tokenizer_card") or {}).get("engine", {}).get("name")
        report["results"][label] = row
    report["loadavg_after"] = os.getloadavg()[0]
    _print(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def _same_output(ours: Path, ref: Path) -> bool:
    for path in ref.rglob("*"):
        if path.is_file() and path.name not in ("manifest.json", "EMPTY_UNIT.md"):
            if (ours / path.relative_to(ref)).read_bytes() != path.read_bytes():
                return False
    return True


def _print(report: dict) -> None:
    print(f"\n{report['samples']} samples, {report['corpus_bytes'] / 1e6:.1f} MB, {report['cores']} cores, "
          f"{report['load']} busy processes beside, load average {report['loadavg_before']:.1f} "
          f"before, {report['loadavg_after']:.1f} after")
    for kind, row in report["results"].items():
        print(f"\n[{kind}, engine {row.get('engine')}]  {'':10} {'wall min':>8} {'median':>8} {'CPU min':>8} {'median':>8} "
              f"{'samples/s':>10} {'tokens/s':>10} {'peak MB':>8}")
        for name in ("bound", "ours", "baseline", "reference"):
            if name in row:
                r = row[name]
                print(f"  {name:18} {r['seconds']:8.2f} {r['median_seconds']:8.2f} "
                      f"{r['cpu_seconds']:8.2f} {r['median_cpu_seconds']:8.2f} "
                      f"{r['samples_per_s']:10} {r['tokens_per_s']:10} {r['peak_rss_mb']:8.1f}")
        line = (f"  b/a = {row['b_over_a']} (CPU {row['b_over_a_cpu']} min, "
                f"{row['b_over_a_cpu_median']} median"
                + (f"; goal <= {CPU_GOAL}: {'met' if row['b_over_a_cpu'] <= CPU_GOAL else 'MISSED'}"
                   if kind in BYTE_LEVEL else "") + ")")
        if "b_over_b0" in row:
            line += (f"   b/b0 = {row['b_over_b0']} (CPU {row['b_over_b0_cpu']}), "
                     f"identical to baseline: {row['identical_to_baseline']}")
        if "c_over_b" in row:
            line += (f"   c/b = {row['c_over_b']} (CPU "
                     f"{round(row['reference']['cpu_seconds'] / row['ours']['cpu_seconds'], 2)})"
                     f"   c/a = {row['c_over_a']}"
                     f"   identical to mintdim 0.2.1: {row['identical_to_reference']}")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
