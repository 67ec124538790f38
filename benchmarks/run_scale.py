"""Scale benchmark: `python benchmarks/run_scale.py [--scales 100000,1000000,3000000]
[--corpus plain,repeating] [--reference-python PY] [--reference-max N]`.

For each corpus kind and size (written once per size under `--workdir`): "plain", the
benchmark corpus of `corpus.py` (2% of its records repeat), and "repeating", its first
50,000 records cycled (`write_repeating_corpus`: each record about 60 times at 3M, so
every sample is in a duplicate group; issue 28), the default local build of ours
(`targets.py ours`, the SentencePiece 8k tokenizer of `run.py`) and, when a Python with
mintdim 0.2.1 is given, mintdim's own build (`targets.py reference`, up to
`--reference-max` samples: it takes about 5 minutes a million here), each once, in its
own process tree: wall time and peak RSS of the whole tree (`measure.py`, read every
50 ms). Then the growth of peak memory per million samples between the smallest and
each larger size of each kind, and the scratch disk a build of ours used at its peak
(the output directory's size, sampled every 0.5 s), per million samples and per input
byte. Prints a table; writes `benchmarks/.work/results_scale.json` (`--json
benchmarks/results_scale.json` records a run). 10M samples (about 7.4 GB of JSONL) is
for a run by hand: `--scales 100000,1000000,10000000`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import train_tokenizers, write_corpus, write_repeating_corpus  # noqa: E402
from measure import run_measured  # noqa: E402


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class DiskPeak:
    """The largest size a directory tree reached while a command ran."""

    def __init__(self, path: Path, interval: float = 0.5):
        self.path, self.interval, self.peak = path, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.interval):
            if self.path.exists():
                self.peak = max(self.peak, _tree_bytes(self.path))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self.path.exists():
            self.peak = max(self.peak, _tree_bytes(self.path))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="100000,1000000,3000000")
    parser.add_argument("--corpus", default="plain,repeating",
                        help="corpus kinds, comma-separated: plain (2%% repeats), repeating "
                             "(50,000 records cycled)")
    parser.add_argument("--workdir", default=str(HERE / ".work"))
    parser.add_argument("--json", default=str(HERE / ".work" / "results_scale.json"),
                        help="where to write the results (default: the untracked work dir; "
                             "name benchmarks/results_scale.json to record them)")
    parser.add_argument("--reference-python", default=os.environ.get("MINTDIM_REFERENCE_PYTHON"))
    parser.add_argument("--reference-max", type=int, default=1_000_000,
                        help="largest size mintdim 0.2.1 is run at (it is slow)")
    parser.add_argument("--beam-flag", action="append", default=[])
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    scales = [int(s) for s in args.scales.split(",")]
    first = write_corpus(work / "corpus_100000.jsonl", 100_000)
    tokenizer = str(train_tokenizers(first, work)["sentencepiece"])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    targets = str(HERE / "targets.py")
    kinds = [k for k in args.corpus.split(",") if k]
    unknown = sorted(set(kinds) - set(CORPORA))
    if unknown:
        parser.error(f"--corpus: unknown kind {', '.join(unknown)} (known: {', '.join(CORPORA)})")
    report = {"scales": scales, "corpora": kinds, "cores": os.cpu_count(),
              "results": {kind: {} for kind in kinds}}
    for kind in kinds:  # one build at a time: each is measured alone
        for n in scales:
            corpus = CORPORA[kind](work, n)
            row = _measure(args, work, kind, n, corpus, tokenizer, env, targets)
            report["results"][kind][str(n)] = row
            _print(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


CORPORA = {
    "plain": lambda work, n: write_corpus(work / f"corpus_{n}.jsonl", n),
    "repeating": lambda work, n: write_repeating_corpus(work / f"corpus_repeating_{n}.jsonl", n),
}


def _measure(args, work: Path, kind: str, n: int, corpus: Path, tokenizer: str, env: dict,
             targets: str) -> dict:
    """One size of one corpus kind: our build (and mintdim's, when asked), each alone."""
    row = {"samples": n, "corpus_bytes": corpus.stat().st_size}
    out = work / f"scale_out_{kind}_{n}"
    shutil.rmtree(out, ignore_errors=True)
    with DiskPeak(out) as disk:
        ours = run_measured([sys.executable, targets, "ours", str(corpus), "sentencepiece",
                             tokenizer, str(out), *args.beam_flag], env=env)
    final = _tree_bytes(out)
    row["ours"] = {"seconds": round(ours["seconds"], 1),
                   "peak_rss_mb": round(ours["peak_rss_mb"], 1),
                   "disk_peak_mb": round(disk.peak / 1e6, 1),
                   "output_mb": round(final / 1e6, 1),
                   "disk_peak_per_input_byte": round(disk.peak / row["corpus_bytes"], 2)}
    shutil.rmtree(out, ignore_errors=True)
    if args.reference_python and n <= args.reference_max:
        ref_out = work / f"scale_ref_{kind}_{n}"
        shutil.rmtree(ref_out, ignore_errors=True)
        ref = run_measured([args.reference_python, targets, "reference", str(corpus),
                            "sentencepiece", tokenizer, str(ref_out)], env=env)
        row["mintdim"] = {"seconds": round(ref["seconds"], 1),
                          "peak_rss_mb": round(ref["peak_rss_mb"], 1)}
        shutil.rmtree(ref_out, ignore_errors=True)
    return row


def _growth(results: dict, who: str) -> dict:
    rows = [r for r in results.values() if who in r]
    if len(rows) < 2:
        return {}
    base = rows[0]
    return {r["samples"]: round((r[who]["peak_rss_mb"] - base[who]["peak_rss_mb"])
                                / ((r["samples"] - base["samples"]) / 1e6), 1)
            for r in rows[1:]}


def _print(report: dict) -> None:
    print(f"\n{'corpus':>9} {'samples':>10} {'input MB':>9} | {'ours s':>7} {'peak MB':>8} "
          f"{'disk peak MB':>12} {'x input':>7} | {'mintdim s':>9} {'peak MB':>8}")
    for kind, results in report["results"].items():
        for row in results.values():
            ours, ref = row["ours"], row.get("mintdim", {})
            print(f"{kind:>9} {row['samples']:>10,} {row['corpus_bytes'] / 1e6:>9,.0f} | "
                  f"{ours['seconds']:>7} {ours['peak_rss_mb']:>8} {ours['disk_peak_mb']:>12} "
                  f"{ours['disk_peak_per_input_byte']:>7} | {ref.get('seconds', '-'):>9} "
                  f"{ref.get('peak_rss_mb', '-'):>8}")
    report["growth_mb_per_million"] = {}
    for kind, results in report["results"].items():
        report["growth_mb_per_million"][kind] = {who: _growth(results, who)
                                                 for who in ("ours", "mintdim")}
        for who, growth in report["growth_mb_per_million"][kind].items():
            if growth:
                shown = ", ".join(f"to {n:,}: {g} MB" for n, g in growth.items())
                print(f"peak memory growth per million samples, {kind} corpus, {who} "
                      f"(from the smallest): {shown}")


if __name__ == "__main__":
    sys.exit(main())
