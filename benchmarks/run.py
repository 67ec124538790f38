"""Throughput benchmark: `python benchmarks/run.py [--samples N] [--json PATH]`.

Generates the corpus and trains a SentencePiece and a Hugging Face BPE tokenizer (8k
pieces each, cached under benchmarks/.work), then measures per tokenizer, in one run:
(a) the bound: json parse + encoding every segment in one process; (b) mintdim-beam's
default local build; (c) mintdim 0.2.1, when a Python with it is given by
--reference-python or MINTDIM_REFERENCE_PYTHON (skipped with a notice otherwise).
Prints seconds, samples/s, tokens/s, peak RSS and the ratios b/a and c/b; writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus import train_tokenizers, write_corpus  # noqa: E402
from measure import run_measured  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--json", default=str(HERE / "results.json"))
    parser.add_argument("--workdir", default=str(HERE / ".work"))
    parser.add_argument("--reference-python", default=os.environ.get("MINTDIM_REFERENCE_PYTHON"))
    parser.add_argument("--tokenizers", default="sentencepiece,hf_json")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of (a), (b), (c); the fastest run of each counts "
                             "(this machine is noisy)")
    parser.add_argument("--beam-flag", action="append", default=[],
                        help="Beam flag for (b), repeatable; default: the local default run")
    args = parser.parse_args(argv)

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / f"corpus_{args.samples}.jsonl", args.samples)
    tokenizers = train_tokenizers(work / "corpus_100000.jsonl" if (work / "corpus_100000.jsonl").exists()
                                  else corpus, work)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    targets = str(HERE / "targets.py")
    report = {"samples": args.samples, "corpus_bytes": corpus.stat().st_size, "cores": os.cpu_count(),
              "repeat": args.repeat, "beam_flags": args.beam_flag, "results": {}}
    for kind in args.tokenizers.split(","):
        tok = str(tokenizers[kind])
        commands = {"bound": ([sys.executable, targets, "bound", str(corpus), kind, tok], None)}
        out = work / f"out_{kind}"
        commands["ours"] = ([sys.executable, targets, "ours", str(corpus), kind, tok, str(out)]
                            + args.beam_flag, out)
        if args.reference_python:
            ref_out = work / f"ref_{kind}"
            commands["reference"] = ([args.reference_python, targets, "reference", str(corpus),
                                      kind, tok, str(ref_out)], ref_out)
        else:
            print("notice: no mintdim 0.2.1 Python given (--reference-python or "
                  "MINTDIM_REFERENCE_PYTHON): skipping (c)", file=sys.stderr)
        # Rounds interleave the three, so a slow spell on this shared machine hits them
        # alike; the fastest run of each counts.
        runs: dict = {}
        for _ in range(max(1, args.repeat)):
            for name, (cmd, out_dir) in commands.items():
                if out_dir is not None:
                    shutil.rmtree(out_dir, ignore_errors=True)
                result = run_measured(cmd, env=env)
                if name not in runs or result["seconds"] < runs[name]["seconds"]:
                    runs[name] = result
        tokens = json.loads(runs["bound"]["stdout"].strip().splitlines()[-1])["tokens"]
        row = {}
        for name, r in runs.items():
            row[name] = {"seconds": round(r["seconds"], 2),
                         "samples_per_s": round(args.samples / r["seconds"]),
                         "tokens_per_s": round(tokens / r["seconds"]),
                         "peak_rss_mb": round(r["peak_rss_mb"], 1)}
        row["b_over_a"] = round(row["ours"]["seconds"] / row["bound"]["seconds"], 2)
        if "reference" in row:
            row["c_over_b"] = round(row["reference"]["seconds"] / row["ours"]["seconds"], 2)
            row["identical_to_reference"] = _same_output(work / f"out_{kind}", work / f"ref_{kind}")
        report["results"][kind] = row
    _print(report)
    Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def _same_output(ours: Path, ref: Path) -> bool:
    for path in ref.rglob("*"):
        if path.is_file() and path.name not in ("manifest.json", "EMPTY_UNIT.md"):
            if (ours / path.relative_to(ref)).read_bytes() != path.read_bytes():
                return False
    return True


def _print(report: dict) -> None:
    print(f"\n{report['samples']} samples, {report['corpus_bytes'] / 1e6:.1f} MB, {report['cores']} cores")
    for kind, row in report["results"].items():
        print(f"\n[{kind}]  {'':10} {'seconds':>8} {'samples/s':>10} {'tokens/s':>10} {'peak MB':>8}")
        for name in ("bound", "ours", "reference"):
            if name in row:
                r = row[name]
                print(f"  {name:18} {r['seconds']:8.2f} {r['samples_per_s']:10} {r['tokens_per_s']:10} "
                      f"{r['peak_rss_mb']:8.1f}")
        line = f"  b/a = {row['b_over_a']}"
        if "c_over_b" in row:
            line += f"   c/b = {row['c_over_b']}   identical to mintdim 0.2.1: {row['identical_to_reference']}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
