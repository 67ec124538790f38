"""What a bucket build downloads of its own scratch: `python benchmarks/finalize_io.py
[--samples 100000] [--json PATH]`. A unit-build of `--samples` one-line samples (the
bundled SentencePiece demo tokenizer, batches of 4096) to gs:// on the GCS emulator, on
two worker processes, with `tools/counting_proxy.py` between gcsfs and the emulator:
prints the bytes of the final index files, the bytes downloaded of objects under
`_mintdim_tmp/` (by scratch folder) and their ratio. Issue 40 measured 1.26x at 100k
samples before Finalize composed on the server; the goal is at most 5%.
"""
from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import (MULTI_PROCESS, counted_store, run_build, sentence,  # noqa: E402
                      write_jsonl)
from test_finalize_io import INDEX_FILES  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as work, counted_store("gcs") as (root, fs, proxy):
        work = Path(work)
        data = write_jsonl(work / "in.jsonl", ({"text": sentence(rng, 3, 40)}
                                               for _ in range(args.samples)))
        out = f"{root}/out"
        mark, start = proxy.mark(), time.perf_counter()
        run_build(work, files=[str(data)], fields=[["text"]], templates=["{text}"],
                  tokenizer="sentencepiece",
                  tokenizer_files=[str(REPO / "examples/tokenizer/demo.model")],
                  sizes=[[32, 64, 128]], build_batch=[4096], output=out,
                  samples_per_shard=[16384], options=MULTI_PROCESS)
        wall = time.perf_counter() - start
        exchanges = proxy.since(mark)
        index = sum(fs.size(f"{out}/{name}") for name in INDEX_FILES)
    by_folder = collections.Counter()
    for e in exchanges:
        if e.method == "GET" and "_mintdim_tmp" in e.path:
            tail = e.path.partition("_mintdim_tmp")[2].strip("/").split("/")
            by_folder["/".join(tail[1:-1]) or "(listings, top files)"] += e.received
    downloaded = sum(by_folder.values())
    report = {"samples": args.samples, "index_bytes": index, "scratch_downloaded": downloaded,
              "ratio": round(downloaded / index, 4), "by_folder": dict(by_folder),
              "uploaded": sum(e.sent for e in exchanges), "wall_s": round(wall, 1)}
    print(f"{args.samples:,} samples: index files {index:,} B, scratch downloaded "
          f"{downloaded:,} B = {downloaded / index:.2%} of it (goal <= 5%), build {wall:.1f} s")
    for folder, count in by_folder.most_common():
        print(f"  {folder:<24} {count:>12,} B")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
