"""Run a command and measure wall time, CPU time and the peak RSS of its whole process
tree (a multi-process Beam run is several processes)."""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import subprocess
import sys
import time

_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux): an orphan (e.g. the
    forkserver of datatrove's multiprocess pool, which its parent never waits for) is
    reparented here instead of to init, so we can wait for it and its CPU time, with that
    of the children it waited for, reaches RUSAGE_CHILDREN."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _orphans(known: set[int]) -> list[int]:
    """Children of this process that it did not start (reparented orphans)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in known:
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                if int(handle.read().rsplit(")", 1)[1].split()[1]) == me:
                    found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _reap_orphans(existing: set[int], timeout: float = 30.0) -> int:
    """Wait (up to `timeout` s) for the orphans of the measured tree reparented to us:
    our children now that were not before the command started."""
    deadline, reaped = time.monotonic() + timeout, 0
    while True:
        pending = _orphans(existing)
        if not pending:
            return reaped
        for pid in pending:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped += 1
            except ChildProcessError:
                pass
        if time.monotonic() > deadline:
            return reaped
        time.sleep(0.02)


def _tree_pids(root: int) -> list[int]:
    """`root` and its descendants, from a walk over /proc (about 4 ms here)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(children.get(pid, []))
    return pids


def _rss_kb(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_measured(cmd: list[str], cwd=None, env=None, interval: float = 0.05,
                 walk_every: int = 10) -> dict:
    """Wall time and peak tree RSS. The RSS of the known tree is read every `interval`;
    the tree itself is found again every `walk_every` polls. Why: walking all of /proc
    every poll took 8% of a core, taken from a build that uses both.

    CPU time is that of the whole tree: this process becomes a child subreaper first, so
    descendants whose parent exits without waiting for them are waited for here (up to
    30 s after the command ends; `orphans_reaped` counts them)."""
    subreaper = _become_subreaper()
    existing = set(_orphans(set())) if subreaper else set()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak, polls, pids = 0, 0, [proc.pid]
    while proc.poll() is None:
        if polls % walk_every == 0:
            pids = _tree_pids(proc.pid)
        peak = max(peak, _rss_kb(pids))
        polls += 1
        time.sleep(interval)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    # Orphans of the tree are now our children: wait for them.
    orphans = _reap_orphans(existing | {proc.pid}) if subreaper else 0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the child and of every descendant it waited for (helpers included).
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak / 1024, "stdout": out,
            "stderr": err, "orphans_reaped": orphans, "cpu_complete": subreaper}


BUSY = "while True: pass"  # one core's worth of load, nothing else


@contextlib.contextmanager
def background_load(processes: int):
    """`processes` busy loops beside whatever runs inside: the "under load" condition,
    made the same on every machine (another engineer's suite is not). Yields their pids;
    they are killed and waited for on the way out. They are this process's children
    before any measured command starts, so `run_measured` neither counts their CPU nor
    waits for them as orphans."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(max(0, processes))]
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def encode_jsonl(corpus, render, encode_batch, batch_size: int) -> tuple[int, int]:
    """The bound's loop: every non-blank line parsed and rendered to one text, the texts
    encoded `batch_size` at a time; returns (texts, tokens)."""
    texts = tokens = 0
    batch = []
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            batch.append(render(json.loads(line)))
            if len(batch) >= batch_size:
                tokens += sum(len(e.ids) for e in encode_batch(batch, add_special_tokens=False))
                texts += len(batch)
                batch = []
    if batch:
        tokens += sum(len(e.ids) for e in encode_batch(batch, add_special_tokens=False))
        texts += len(batch)
    return texts, tokens


def harness_arguments(parser, results: str, targets: str) -> None:
    """The flags every harness takes: where the results go (`results`: the recorded
    file's name), the work dir, and the rounds of `targets` (e.g. "(a), (b)")."""
    from pathlib import Path

    work = Path(__file__).resolve().parent / ".work"
    parser.add_argument("--json", default=str(work / results),
                        help="where to write the results (default: the untracked work dir; "
                             f"name benchmarks/{results} to record them)")
    parser.add_argument("--workdir", default=str(work))
    parser.add_argument("--repeat", type=int, default=1,
                        help=f"rounds of {targets}; the fastest run of each counts "
                             "(this machine is noisy)")


def write_results(path: str, report: dict) -> None:
    """The report as indented JSON at `path` (its folder made)."""
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2) + "\n")

