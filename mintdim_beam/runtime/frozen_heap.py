"""Keep Python's cyclic garbage collector off the heap that exists before a run, and
out of the way during it.

Why: importing Beam and building the pipeline leaves a large, long-lived heap (modules,
protos, the graph). Every full collection during the run walks all of it again: 0.32 s
of a 100k-sample local build here, on the thread that reads, renders and assigns.
`gc.freeze()` moves those objects out of the collector's generations for the run;
`gc.unfreeze()` hands them back afterwards, so nothing is kept alive longer than one
run. A caller that froze objects itself keeps its own arrangement: we then do nothing.

The young generation's threshold is also raised for the run (`fewer_collections`): a
batch of 4,096 samples allocates tens of thousands of containers that live until the
batch is done (rendered texts, replies, rows), so with the default of 700 each was
walked by a young collection, promoted and walked again by the older ones: 940 young,
86 middle and 7 full collections, 0.35 s of the driver in a 100k build; with 20,000 the
import and the run take next to none (0.11 s remain, all before the launch). Cyclic
garbage still goes, only some thousands of allocations later.
"""
from __future__ import annotations

import contextlib
import gc

# Container allocations between young collections during a run (Python's default: 700).
YOUNG_THRESHOLD = 20_000


@contextlib.contextmanager
def fewer_collections(young: int = YOUNG_THRESHOLD):
    """Young collections every `young` allocations for the block, unless the collector
    is off or set to collect even less often already (a caller's setting stays)."""
    before = gc.get_threshold()
    if not before[0] or before[0] >= young:
        yield
        return
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def frozen_heap():
    """Freeze the current heap for the `with` block, unless something else froze it,
    with `fewer_collections` meanwhile."""
    with fewer_collections():
        if gc.get_freeze_count():
            yield
            return
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
