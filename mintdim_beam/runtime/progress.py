"""Live progress of a build: what workers have done, shown on the machine that launched
it, and Beam counters that the Dataflow and Flink UIs display.

Workers count with `tally(...)`: bytes read, samples read, samples tokenized, tokens,
samples assigned, shards written. Each count is a Beam counter (namespace `mintdim`),
and, in a local run, also goes to a small JSON file per worker process in a directory
the launcher made (`MINTDIM_PROGRESS_DIR`, inherited by every local worker process), at
most twice a second. The launcher's `Progress` thread sums those files: on a terminal
one updating tqdm line (bytes read of total, samples, samples per second, ETA; after
the global step, samples assigned of those read, and shards written), otherwise a plain
line every `MINTDIM_PROGRESS_INTERVAL` seconds (default 10). Remote workers (Dataflow,
Flink) have no such directory and only count in Beam."""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

ENV = "MINTDIM_PROGRESS_DIR"
INTERVAL_ENV = "MINTDIM_PROGRESS_INTERVAL"
KEYS = ("bytes", "samples", "tokenized", "tokens", "assigned", "shards")
_FLUSH_SECONDS = 0.5


class _Tally:
    """This process's counts, flushed to its progress file now and then."""

    def __init__(self):
        self.counts = dict.fromkeys(KEYS, 0)
        self._flushed = 0.0
        self._lock = threading.Lock()
        self._counters = {}

    def add(self, **amounts) -> None:
        with self._lock:
            for key, amount in amounts.items():
                self.counts[key] += int(amount)
                counter = self._counters.get(key)
                if counter is None:
                    from apache_beam.metrics import Metrics

                    counter = self._counters[key] = Metrics.counter("mintdim", key)
                counter.inc(int(amount))
            if time.monotonic() - self._flushed >= _FLUSH_SECONDS:
                self._write()

    def flush(self) -> None:
        with self._lock:
            self._write()

    def _write(self) -> None:
        directory = os.environ.get(ENV)
        if not directory or not os.path.isdir(directory):
            return
        self._flushed = time.monotonic()
        path = os.path.join(directory, f"{socket.gethostname()}-{os.getpid()}.json")
        temp = f"{path}.tmp"
        try:
            with open(temp, "w") as handle:
                json.dump(self.counts, handle)
            os.replace(temp, path)
        except OSError:
            pass  # progress is best effort: never fail a build for it


_TALLY = _Tally()


def tally(**amounts) -> None:
    """Count work done in this worker (keys of `KEYS`)."""
    _TALLY.add(**amounts)


def flush() -> None:
    """Write this process's counts now (at the end of a bundle)."""
    _TALLY.flush()


def say(line: str, stream=None) -> None:
    """`line` and its newline in one write, then flushed: `print` writes them apart, and
    a thread writing to the same stream in between (the progress thread beside a
    worker's shard lines) glued two lines into one."""
    stream = sys.stderr if stream is None else stream
    stream.write(line + "\n")
    stream.flush()


def range_size(byte_range) -> int:
    """The bytes a range stands for in progress reports: its span of a plain file, the
    whole (compressed) size of a compressed one."""
    if byte_range.codec == "plain" and byte_range.format != "json_array":
        return byte_range.end - byte_range.start
    return int(dict(byte_range.identity).get("size", 0))


def _totals(directory: str) -> dict:
    totals = dict.fromkeys(KEYS, 0)
    for name in os.listdir(directory):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                counts = json.load(handle)
        except (OSError, ValueError):
            continue
        for key in KEYS:
            totals[key] += int(counts.get(key, 0))
    return totals


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"


def progress_interval() -> float:
    """`MINTDIM_PROGRESS_INTERVAL` in seconds (default 10), checked by the launchers
    before they claim an output: a bad value is a config error, not a traceback later."""
    text = os.environ.get(INTERVAL_ENV, "10")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        from mintdim_beam.core.errors import PipelineValidationError

        raise PipelineValidationError(missing=[
            f"{INTERVAL_ENV} as a positive number of seconds (got {text!r})"])
    return value


class Progress:
    """The launcher's side: a thread showing the workers' totals until `stop()`."""

    def __init__(self, total_bytes: int, label: str = "unit-build", stream=None):
        self.total_bytes = max(int(total_bytes), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.directory = tempfile.mkdtemp(prefix="mintdim-progress-")
        self.interval = progress_interval()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mintdim-progress", daemon=True)
        self._started = time.monotonic()
        self._bar = None
        self._previous_env = None

    def __enter__(self):
        self._previous_env = os.environ.get(ENV)
        os.environ[ENV] = self.directory
        _TALLY.counts = dict.fromkeys(KEYS, 0)  # an in-process run starts from zero
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        if self._bar is not None:
            self._bar.close()
        if self._previous_env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._previous_env
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self) -> None:
        wait = 0.25 if self.tty else self.interval
        while not self._stop.wait(wait):
            flush()  # this process's own counts (the in-process runner's workers)
            self.show(_totals(self.directory))

    def line(self, totals: dict) -> str:
        """The plain text of one progress report."""
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = totals["samples"] / elapsed
        if totals["assigned"]:
            share = totals["assigned"] / max(totals["samples"], 1)
            return (f"[{self.label}] writing: {totals['assigned']:,} of {totals['samples']:,} "
                    f"samples assigned ({share:.0%}), {totals['shards']:,} shards written, "
                    f"{elapsed:.0f} s")
        share = min(totals["bytes"] / self.total_bytes, 1.0)
        eta = (elapsed / share - elapsed) if share > 0 else 0.0
        return (f"[{self.label}] reading: {share:.0%} ({totals['bytes'] / 1e6:,.0f} of "
                f"{self.total_bytes / 1e6:,.0f} MB), {totals['samples']:,} samples, "
                f"{totals['tokens']:,} tokens, {rate:,.0f} samples/s, ETA {_eta(eta)}")

    def show(self, totals: dict) -> None:
        if not self.tty:
            say(self.line(totals), self.stream)
            return
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=self.total_bytes, unit="B", unit_scale=True, file=self.stream,
                             desc=f"[{self.label}] reading", dynamic_ncols=True, leave=False)
        if totals["assigned"]:
            self._bar.set_description(f"[{self.label}] writing")
            self._bar.total = max(totals["samples"], 1)
            self._bar.unit, self._bar.unit_scale = " samples", False
            self._bar.n = totals["assigned"]
            self._bar.set_postfix_str(f"{totals['shards']} shards", refresh=False)
        else:
            self._bar.n = min(totals["bytes"], self.total_bytes)
            self._bar.set_postfix_str(f"{totals['samples']:,} samples", refresh=False)
        self._bar.refresh()
