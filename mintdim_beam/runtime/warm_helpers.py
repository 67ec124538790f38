"""Helper encoders a default local run starts before its pipeline exists.

Why: a helper needs 0.1 to 0.5 s of CPU to start Python and load the tokenizer (1.7 s
for DeepSeek V3's 128k tokens with its fast engine). `spawn_helpers` starts them as
soon as the config is read, so that load overlaps the driver planning the datasets;
`warm_helpers` gives them the plans and starts their head start (the first batches,
encoded while Beam loads); the Tokenize DoFn of the same process adopts them
(`adopt_warm`).
"""
from __future__ import annotations

import contextlib
import threading
import uuid

from mintdim_beam.core.files.storage import is_url
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES
from mintdim_beam.runtime.encoder_process import (EncoderProcess, dataset_tokenizer_files,
                                                  fast_engine_keys, helper_threads,
                                                  start_helpers, tokenizer_files_of)

# Helpers started by the driver before the pipeline exists, waiting for the Tokenize
# DoFn of the same process to adopt them: {key: [EncoderProcess]}.
WARM: dict[str, list] = {}
WARM_LOCK = threading.Lock()


def spawn_helpers(datasets, count: int) -> list[EncoderProcess]:
    """`count` helpers started before the datasets are planned, each loading the local
    tokenizer files of `datasets` (and the fast engine, unless every dataset of a file
    sets `engine: tokenizers`) while the driver plans them (`warm_helpers` sends them
    the plans). A remote tokenizer file is fetched once, with the plans."""
    if count <= 0:
        return []
    datasets = list(datasets)
    files = dataset_tokenizer_files(datasets, local_only=True)
    fast_keys = fast_engine_keys(datasets)
    helpers = [EncoderProcess(None, helper_threads(count)) for _ in range(count)]
    for helper in helpers:
        helper.preload(files, fast_keys)
    return helpers


@contextlib.contextmanager
def warm_helpers(plans: dict, count: int, first_range=None,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, spawned: list | None = None):
    """Start `count` helpers now (or give the plans to those `spawned`, stopping any
    over `count`) and yield the key a Tokenize DoFn adopts them by.

    Started here, their start overlaps the driver loading Beam and planning the
    pipeline instead of delaying the first batches. With `first_range` (the first
    `source.ByteRange`) in a local file, each helper then encodes its share of that
    range's first batches (`head_start`) while the driver is still busy; not for remote
    files, where a helper without the driver's credentials could wait on the network
    while the first batch waits for it. Helpers nobody adopted stop when the block ends."""
    key = uuid.uuid4().hex
    spawned = list(spawned or ())
    for helper in spawned[count:]:
        helper.close()
    del spawned[count:]
    if count:
        files = tokenizer_files_of(plans)  # as read now: a helper reloads a rewritten file
        for helper in spawned:
            helper.send_plans(plans, files)
        helpers = spawned + start_helpers(plans, count - len(spawned), helper_threads(count),
                                          files)
        if first_range is not None and not is_url(first_range.path):
            size = plans[first_range.dataset].dataset.build_batch
            for share, helper in enumerate(helpers):
                helper.head_start(first_range, size, share, count,
                                  max_line_bytes=max_line_bytes)
        with WARM_LOCK:
            WARM[key] = helpers
    try:
        yield key
    finally:
        for helper in adopt_warm(key, None):
            helper.close()


def adopt_warm(key: str | None, count: int | None) -> list:
    """Up to `count` (None: all) helpers started under `key` in this process; each is
    handed out once. A worker in another process finds none and starts its own."""
    with WARM_LOCK:
        waiting = WARM.get(key, []) if key else []
        taken = waiting[:len(waiting) if count is None else count]
        del waiting[:len(taken)]
        if key in WARM and not waiting:
            del WARM[key]
    return taken
