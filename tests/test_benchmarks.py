"""The benchmark's measuring: peak RSS is the sum over the whole process tree."""
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from measure import run_measured  # noqa: E402

PARENT = """
import subprocess, sys
held = bytearray(200 << 20)
subprocess.run([sys.executable, "-c", "import time; held = bytearray(300 << 20); time.sleep(1.5)"])
print("done")
"""


def test_peak_rss_counts_a_child_started_after_the_parent():
    result = run_measured([sys.executable, "-c", PARENT], walk_every=3)
    assert result["stdout"].strip() == "done"
    assert 500 <= result["peak_rss_mb"] < 700  # both at once: 200 MB + 300 MB + interpreters
