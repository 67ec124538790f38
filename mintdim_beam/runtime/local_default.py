"""What the default local run is (no pipeline flags given), known without loading Beam.

Why: importing Beam takes about a second. A default run knows its runner, range size
and helper count before that, so the launcher starts the helper encoders first and they
encode the first batches while Beam loads (see `warm_helpers`)."""
from __future__ import annotations

import os

# The fastest local run measured here: the in-process FnApiRunner, with helper encoder
# processes. Beam's worker processes (multi_processing) were slower because every stage
# boundary is serialized between processes (see README, Throughput).
DEFAULT_RUNNER = "FnApiRunner"

# One worker reads, parses and renders about 100k samples/s here, while one encoder
# process encodes about 10k: beyond this many, more helpers would wait for the worker.
MAX_AUTO_ENCODERS = 8


def auto_encoder_processes() -> int:
    """Helpers for the in-process run when not set: one per core, at most
    MAX_AUTO_ENCODERS; none on one core, where they would only compete."""
    cores = os.cpu_count() or 1
    return min(cores, MAX_AUTO_ENCODERS) if cores > 1 else 0
