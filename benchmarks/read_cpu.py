"""CPU time a step of UnitReader against the memmap gather bound, in one process.

    python benchmarks/read_cpu.py [--build DIR] [--rounds 10] [--steps 100]

`read.py` times each reader alone in a process of its own (wall time, the fastest of a
few runs); on a shared machine a slow spell can hit one run and not the other. Here the
bound (`read.py`'s gather: the rows UnitReader reads at `--tokens-per-step`, one unit a
step, gathered shard by shard from `np.memmap` into int64) and three readers take turns
in one process, `--steps` steps each per round: UnitReader unpacked, packed
(`pack_length=2048`: `input_ids` and `labels`) and packed with `position_ids` and
`document_ids` used too (made on first use). Each reports its process CPU time
(user + system) and wall time per step, min and median over the rounds, and its ratio
to the bound's. The readers' first steps (their plans, first maps) are taken before the
rounds; the packed plan's later windows are packed as the steps reach them, inside the
rounds. Default build: `benchmarks/.work/read_build_1000000` (made by `read.py`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACK_LENGTH = 2048
TARGET = "output"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(HERE / ".work" / "read_build_1000000"))
    parser.add_argument("--tokens-per-step", type=int, default=65536)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100, help="steps of each reader a round")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    root = Path(args.build)
    if not (root / "manifest.json").exists():
        parser.error(f"{root}: no manifest.json (make the build with benchmarks/read.py)")
    runs = {"bound": _bound(root, args.tokens_per_step, args.rounds * args.steps),
            **_readers(root, args.tokens_per_step)}
    times = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, step in runs.items():
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(args.steps):
                step()
            times[name].append(((time.process_time() - cpu) / args.steps * 1e3,
                                (time.perf_counter() - wall) / args.steps * 1e3))
    report = {}
    for name, rows in times.items():
        cpu, wall = [r[0] for r in rows], [r[1] for r in rows]
        report[name] = {"cpu_ms_min": min(cpu), "cpu_ms_median": statistics.median(cpu),
                        "wall_ms_min": min(wall), "wall_ms_median": statistics.median(wall)}
    print(f"{root.name}: {args.tokens_per_step} tokens a step, {args.rounds} rounds of "
          f"{args.steps} steps each; ms a step (ratio to the bound)")
    bound = report["bound"]
    for name, row in report.items():
        shown = "  ".join(f"{key} {value:.3f}" + ("" if name == "bound" else
                                                   f" ({value / bound[key]:.2f}x)")
                          for key, value in row.items())
        print(f"  {name:12} {shown}")
    print(json.dumps(report))
    return 0


def _bound(root: Path, tokens_per_step: int, steps: int):
    """read.py's gather bound: one unit's rows a step (the reader's own order), gathered
    shard by shard from np.memmap into int64; `steps` steps planned before timing."""
    import numpy as np

    from mintdim_beam.read import order

    layout = json.loads((root / "length_field.json").read_text())
    per_shard = json.loads((root / "manifest.json").read_text())["output"]["samples_per_shard"]
    counts = {int(k): int(v) for k, v in json.loads((root / "histogram.json").read_text()).items()
              if int(v)}
    dtype = {"uint16": np.uint16, "uint32": np.uint32}[layout["token_dtype"]]
    nseg, pad = len(layout["sequence_template"]), int(layout["pad_token_id"])
    maps = {}
    for unit, count in counts.items():
        for shard in range(-(-count // per_shard)):
            rows = min(per_shard, count - shard * per_shard)
            maps[unit, shard] = np.memmap(root / f"unit_{unit}" / f"shard_{shard:06d}.bin",
                                          dtype=dtype, mode="r", shape=(rows, 1 + nseg + unit))
    plan = order.epoch_plan(counts, tokens_per_step, 0, 0, "pad")
    perms = {u: order.unit_permutation(c, 0, 0, u) for u, c in counts.items()}
    steps_planned = []
    for k in range(min(steps, len(plan))):
        unit = int(plan.units[k])
        rows = order.rows_per_step(tokens_per_step, unit)
        ordinals = order.rank_ordinals(perms[unit], int(plan.index[k]), rows, 0, 1)
        real = ordinals >= 0
        shard_of, row_of = np.divmod(ordinals[real], per_shard)
        positions = np.flatnonzero(real)
        groups = [(maps[unit, int(s)], row_of[shard_of == s], positions[shard_of == s])
                  for s in np.unique(shard_of)]
        steps_planned.append((unit, rows, groups, ~real))
    cursor = iter(range(1 << 62))

    def step():
        unit, rows, groups, padding = steps_planned[next(cursor) % len(steps_planned)]
        out = np.empty((rows, unit), dtype=np.int64)
        for mm, picked, positions in groups:
            out[positions] = mm[picked, 1 + nseg:]
        out[padding] = pad

    return step


def _readers(root: Path, tokens_per_step: int) -> dict:
    """Each reader as a step function, over its epochs in a row, after one step."""
    from mintdim_beam.read import UnitReader

    def steps(reader, names):
        def batches():
            epoch = 0
            while True:
                reader.set_epoch(epoch)
                yield from reader
                epoch += 1

        it = batches()
        next(it)

        def step():
            batch = next(it)
            for name in names:
                getattr(batch, name)

        return step

    def make(**kw):
        return UnitReader(str(root), tokens_per_step=tokens_per_step, seed=0, target=[TARGET], **kw)

    ids = ["input_ids", "labels"]
    return {"unpacked": steps(make(), ids),
            "packed": steps(make(pack_length=PACK_LENGTH), ids),
            "packed_all": steps(make(pack_length=PACK_LENGTH),
                                ids + ["position_ids", "document_ids"])}


if __name__ == "__main__":
    sys.exit(main())
