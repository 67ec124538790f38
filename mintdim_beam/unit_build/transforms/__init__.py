"""One PTransform per unit-build stage (read, render, tokenize, stage, assign, decide,
write, duplicates, stats, spill, finalize); `unit_build.graph` wires them together."""
