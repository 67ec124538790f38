"""examples/beam/: the Parquet -> beam.Filter -> unit-build pipeline runs as a user runs
it, keeps exactly the long rows in their order, and its Parquet is what its script
makes from the bundled JSONL."""
import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples/beam"


def test_the_bundled_parquet_is_the_one_its_script_makes(tmp_path):
    import pyarrow.parquet as pq

    sys.path.insert(0, str(EXAMPLE))
    try:
        import make_parquet
    finally:
        sys.path.remove(str(EXAMPLE))
    make_parquet.main(tmp_path / "made.parquet")
    assert pq.read_table(tmp_path / "made.parquet").equals(
        pq.read_table(EXAMPLE / "instructions.parquet"))


def test_the_example_pipeline_builds_the_long_rows_in_key_order(tmp_path):
    import pyarrow.parquet as pq

    from mintdim_beam.audit.verify import verify_output

    out = tmp_path / "units"
    proc = subprocess.run([sys.executable, str(EXAMPLE / "parquet_to_units.py"), "--output",
                           str(out), "--min_words", "25", "--runner=FnApiRunner"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    rows = pq.read_table(EXAMPLE / "instructions.parquet").to_pylist()
    long_rows = [r["row"] for r in rows if len(r["output"].split()) >= 25]
    assert 0 < len(long_rows) < len(rows)  # the filter drops some, keeps some
    assert summary["total_samples"] == len(long_rows)
    index = [json.loads(line) for line in (out / "sample_index.jsonl").read_text().splitlines()]
    assert [r["source_line"] for r in index] == long_rows  # sample ids in key order
    assert {r["source_file"] for r in index} == {"instructions.jsonl"}
    assert verify_output(str(out)).ok
