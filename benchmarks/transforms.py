"""The public transforms against the file build they share their stages with: the same
rows, built from their JSONL file by `mintdim-beam build` and through a user's pipeline
(ReadFromParquet of the same rows keyed by (file, line) -> TokenizeRecords ->
WriteUnitBuild), each in its own process on the default local runner, in interleaved
rounds; the outputs compared byte for byte every round. Prints wall and CPU (min and
median) and the ratio of the transforms over the file build.

    python benchmarks/transforms.py --samples 100000 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from corpus import train_tokenizers, write_corpus  # noqa: E402
from measure import harness_arguments, run_measured, write_results  # noqa: E402
from targets import BATCH, FIELDS, SIZES, TEMPLATE  # noqa: E402

PIPELINE = '''
import sys
import apache_beam as beam
from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild
parquet, tokenizer, out = sys.argv[1:4]
tokenize = TokenizeRecords({"type": "hf_json", "files": [tokenizer]}, fields=%(fields)r,
                           template=%(template)r, build_batch=%(batch)d)
with beam.Pipeline() as p:
    (p | beam.io.ReadFromParquet(parquet)
       | beam.Map(lambda r: ((r.pop("file"), r.pop("line")), r))
       | tokenize
       | WriteUnitBuild(out, %(sizes)r, tokenize=tokenize, samples_per_shard=20000,
                        on_overflow="truncate"))
''' % {"fields": FIELDS, "template": TEMPLATE, "batch": BATCH, "sizes": SIZES}


def parquet_of(corpus: Path, name: str) -> Path:
    """The corpus's rows with their (file, line) as columns, once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = corpus.with_suffix(".parquet")
    if not path.exists():
        rows = [(n, json.loads(line)) for n, line in
                enumerate(corpus.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
        pq.write_table(pa.table({"file": [name] * len(rows), "line": [n for n, _ in rows],
                                 **{f: [r[f] for _, r in rows] for f in FIELDS}}), path,
                       row_group_size=20000)
    return path


def tree(root: Path) -> dict:
    """The build's files but the manifest and part tables (what may differ: the inputs)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "manifest.json"
            and p.relative_to(root).parts[0] != "checksums"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=8000, help="the byte-level BPE's size")
    harness_arguments(parser, "results_transforms.json", "(file build, transforms)")
    args = parser.parse_args(argv)
    work = Path(args.workdir) / f"transforms_{args.samples}"
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / "corpus.jsonl", args.samples)
    tokenizer = train_tokenizers(corpus, work, args.vocab)["hf_bytelevel"]
    parquet = parquet_of(corpus, "corpus.jsonl")
    (work / "pipeline.py").write_text(PIPELINE)
    config = {"source": {"files": ["corpus.jsonl"], "fields": [FIELDS], "templates": [TEMPLATE]},
              "tokenizer": {"type": "hf_json", "files": [str(tokenizer)]},
              "units": {"sizes": [SIZES], "build_batch": [BATCH]},
              "output": {"dir": "out_files", "samples_per_shard": [20000]},
              "on_overflow": "truncate", "on_template_unk": "continue"}
    (work / "build.json").write_text(json.dumps(config))
    bin_dir = Path(sys.executable).parent
    targets = {"file build": [str(bin_dir / "mintdim-beam"), "build", "build.json"],
               "transforms": [sys.executable, "pipeline.py", str(parquet), str(tokenizer),
                              "out_rows"]}
    runs = {name: [] for name in targets}
    for round_no in range(args.repeat):  # interleaved: a file build, then the transforms
        for out in ("out_files", "out_rows"):
            shutil.rmtree(work / out, ignore_errors=True)
        for name, cmd in targets.items():
            measured = run_measured(cmd, cwd=work)
            runs[name].append({k: measured[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb")})
            print(f"round {round_no + 1} {name}: {measured['seconds']:.1f} s wall, "
                  f"{measured['cpu_seconds']:.1f} s CPU, {measured['peak_rss_mb']:.0f} MB",
                  flush=True)
        same = tree(work / "out_rows") == tree(work / "out_files")
        print(f"round {round_no + 1}: the same bytes: {same}", flush=True)
        if not same:
            raise SystemExit("the transforms' build differs from the file build")
    report = {"samples": args.samples, "tokenizer": f"byte-level BPE {args.vocab}", "runs": runs}
    for stat in ("min", "median"):
        pick = min if stat == "min" else statistics.median
        for key in ("seconds", "cpu_seconds", "peak_rss_mb"):
            base = pick(r[key] for r in runs["file build"])
            ours = pick(r[key] for r in runs["transforms"])
            report[f"{stat}_{key}"] = {"file build": base, "transforms": ours,
                                       "ratio": ours / base}
            print(f"{stat} {key}: file build {base:.1f}, transforms {ours:.1f}, "
                  f"ratio {ours / base:.2f}x")
    write_results(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
