"""Packing padding against TRL's best-fit-decreasing packing (`trl.pack_dataset`,
strategy "bfd", what `SFTConfig(packing=True)` uses) on the same record lengths at
L = 2048: ours (`UnitReader(pack_length=2048)`, one row a step so no step's empty rows
count) is never more padding than TRL's, on the bundled dialogues built by
examples/chat/chat_build.yaml and on a long-tailed length distribution (seeded
log-normal; no real dialogue length list is in the repository). Both figures are
printed (`pytest -s`). TRL's rows are each padded to L, as its collator pads them
(or, padding-free, as the same L-token budget a step).

Not part of `make test`: `make test-interop` installs the pinned trl."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
from datasets import Dataset  # noqa: E402
from trl import pack_dataset  # noqa: E402

from mintdim_beam import UnitReader  # noqa: E402
from mintdim_beam.read.packing import pack_plan  # noqa: E402
from mintdim_beam.read.reader import DEFAULT_PACK_WINDOW  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
L = 2048


def _trl_padding(lengths, **map_kwargs) -> tuple[float, int]:
    """(padding fraction, rows) of TRL's BFD packing of records of these lengths."""
    data = Dataset.from_dict({"input_ids": [[1] * int(n) for n in lengths]})
    packed = pack_dataset(data, L, strategy="bfd", map_kwargs=map_kwargs)
    rows = len(packed)
    got = sum(len(r) for r in packed["input_ids"])
    assert got == int(np.sum(lengths))  # nothing truncated: every record <= L
    return 1.0 - got / (rows * L), rows


@pytest.fixture(scope="module")
def bundled_chat(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bundled")
    shutil.copytree(REPO / "examples" / "chat", work / "examples" / "chat")
    subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "build",
                    "examples/chat/chat_build.yaml", "--runner=FnApiRunner"],
                   cwd=work, check=True, capture_output=True)
    return work / "artifacts" / "chat_dialogues"


def test_bundled_dialogues_pad_no_more_than_trl_bfd(bundled_chat):
    lengths = [json.loads(line)["token_count"]
               for line in (bundled_chat / "sample_index.jsonl").read_text().splitlines()]
    trl, trl_rows = _trl_padding(lengths)  # TRL's default: map batches of 1,000 records
    whole, whole_rows = _trl_padding(lengths, batch_size=None)  # one BFD over all records
    ours = [UnitReader(str(bundled_chat), tokens_per_step=L, pack_length=L, seed=s)
            .padding_fraction() for s in range(3)]
    print(f"\nbundled dialogues ({len(lengths)} records, {sum(lengths)} tokens) at {L}: "
          f"ours {max(ours):.2%} (seeds 0-2), TRL bfd {trl:.2%} ({trl_rows} rows), "
          f"TRL bfd over all records at once {whole:.2%} ({whole_rows} rows)")
    assert max(ours) <= trl
    assert max(ours) <= 0.03


@pytest.mark.parametrize("seed", [0, 1])
def test_a_long_tailed_distribution_pads_no_more_than_trl_bfd(seed):
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(400), 1.0, 20_000), 16, L).astype(np.int64)
    plan = pack_plan(lengths, L, DEFAULT_PACK_WINDOW, 1, seed, 0, "pad")  # the reader default
    ours = 1.0 - lengths.sum() / (plan.rows * L)
    trl, trl_rows = _trl_padding(lengths)
    print(f"\nlog-normal (median 400, sigma 1, {len(lengths)} records, mean "
          f"{lengths.mean():.0f}) at {L}: ours {ours:.2%} ({plan.rows} rows), "
          f"TRL bfd {trl:.2%} ({trl_rows} rows)")
    assert sorted(plan.every_row()[0].tolist()) == list(range(len(lengths)))  # each record once
    assert ours <= trl
