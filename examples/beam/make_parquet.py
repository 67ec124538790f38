"""Write examples/beam/instructions.parquet from the bundled JSONL: its rows, with the
file they came from and their line (`file`, `row`), the key the example sorts by."""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "data/instructions.jsonl"


def main(out: Path = HERE / "instructions.parquet") -> None:
    rows = [(n, json.loads(line)) for n, line in
            enumerate(SOURCE.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    table = pa.table({
        "file": ["instructions.jsonl"] * len(rows), "row": [n for n, _ in rows],
        **{f: [r[f] for _, r in rows] for f in ("instruction", "input", "output")}})
    pq.write_table(table, out, row_group_size=500, compression="zstd")


if __name__ == "__main__":
    main()
