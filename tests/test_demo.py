"""`make demo` (examples/demo.py) builds the bundled data and prints its summary: the
totals, the round trip and the tokenizer card of each build (issue 24)."""
import re
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_the_demo_prints_round_trips_and_tokenizer_cards(tmp_path):
    proc = subprocess.run([sys.executable, "examples/demo.py", str(tmp_path / "demo_out")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    trips = re.findall(r"round trip: (\d+) segments checked, (\d+) lossy .* in (\d+) samples", out)
    assert len(trips) == 4 and out.count("tokenizer card:") == 2
    (checked, lossy, _), _, (_, dialogue_lossy, _), _ = trips
    assert int(checked) == 3 * 1996 and int(lossy) > 0  # the SentencePiece model loses "\n"
    assert dialogue_lossy == "0"  # the byte-level BPE keeps every text
    assert "cannot represent: nothing: every text round-trips" in out
    assert "warning: template of examples/data/instructions.jsonl" in proc.stderr
    # the tokenizer it trains (MiniMind's layout) and the dialogues built with it
    trained = re.search(r"tokenizer\.json, vocabulary 2000 \(36 reserved ids first\), (\d+) "
                        r"distinct words from (\d+) rows \(native trainer\)", out)
    assert trained and int(trained.group(2)) > 2500
    per_token = re.search(r"held-out rows \((\d+)\): ([\d.]+) characters per token", out)
    assert per_token and int(per_token.group(1)) > 100 and 2.0 < float(per_token.group(2)) < 8.0
    assert re.search(r"dialogues built with it: 1163 records, \d+ tokens", out)
    assert (tmp_path / "demo_out/tokenizer/report/frequency_rank.png").exists()
    shares = re.search(r"30/70, packed rows of 1024: \d+ steps, (\d+) \+ (\d+) rows", out)
    assert shares and abs(int(shares.group(1)) / (int(shares.group(1)) + int(shares.group(2)))
                          - 0.3) < 0.01
    assert "exported 1996 records of instruction_units to Parquet" in out
    assert list((tmp_path / "demo_out/instructions_parquet/data").glob("*.parquet"))
