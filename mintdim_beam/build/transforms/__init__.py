"""One PTransform per pipeline stage (read, render, tokenize, stage, assign, write,
duplicates, stats, finalize); `build.graph` wires them together."""
