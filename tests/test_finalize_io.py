"""A whole build on a bucket, on worker processes, with a counting proxy between gcsfs
and the GCS emulator: the build reads back almost nothing of its own temporary parts
(Finalize composes the index files on the server), where it once downloaded more than
the index files themselves (1.26x at 100k samples). `benchmarks/finalize_io.py` runs
the same at 100k samples and records the numbers."""
from __future__ import annotations

import random

import pytest

from conftest import MULTI_PROCESS, REPO, counted_store, run_build, sentence, write_jsonl

INDEX_FILES = ("sample_index.jsonl", "unk_index.jsonl", "overflow_index.jsonl",
               "duplicate_index.jsonl", "lossy_index.jsonl")


def scratch_downloads(exchanges) -> int:
    """Bytes the clients downloaded of objects in the build's scratch dir."""
    return sum(e.received for e in exchanges if e.method == "GET" and "_mintdim_tmp" in e.path)


@pytest.mark.slow
def test_a_bucket_build_downloads_at_most_5_percent_of_its_index_bytes(tmp_path):
    rng = random.Random(7)
    data = write_jsonl(tmp_path / "in.jsonl", ({"text": sentence(rng, 3, 12)}
                                               for _ in range(20_000)))
    with counted_store("gcs") as (root, fs, proxy):
        out = f"{root}/out"
        mark = proxy.mark()
        run_build(tmp_path, files=[str(data)], fields=[["text"]], templates=["{text}"],
                  tokenizer="sentencepiece",
                  tokenizer_files=[str(REPO / "examples/tokenizer/demo.model")],
                  sizes=[[16, 32, 64]], build_batch=[512], output=out,
                  samples_per_shard=[4096], options=MULTI_PROCESS + ["--input_range_bytes=65536"])
        downloaded = scratch_downloads(proxy.since(mark))
        index = sum(fs.size(f"{out}/{name}") for name in INDEX_FILES)
        tables = fs.find(f"{out}/checksums")
    print(f"index files {index:,} B; scratch downloaded {downloaded:,} B "
          f"({downloaded / index:.2%}); part tables {len(tables)}")
    assert tables  # several parts were composed
    assert downloaded <= 0.05 * index
