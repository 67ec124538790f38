"""Reading inputs: which format a file is (`formats`: JSONL, JSON array, Parquet, or
refused), JSONL in byte ranges and physical lines (`source`), Parquet by row groups
(`parquet`), JSON arrays element by element (`json_array`), each planned file's
identity checked as it is read (`input_files`), and gzip / zstd streams
(`compression`)."""
