"""Reading inputs: JSONL in byte ranges and physical lines (`source`), each planned
file's identity checked as it is read (`input_files`), and gzip / zstd streams
(`compression`)."""
