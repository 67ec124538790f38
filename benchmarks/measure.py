"""Run a command and measure wall time and the peak RSS of its whole process tree
(a multi-process Beam run is several processes)."""
from __future__ import annotations

import os
import subprocess
import time


def _tree_rss_kb(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as handle:
                pages = int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def run_measured(cmd: list[str], cwd=None, env=None, interval: float = 0.05) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(interval)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": peak / 1024, "stdout": out, "stderr": err}
