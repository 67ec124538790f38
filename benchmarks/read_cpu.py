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
sys.path.insert(0, str(HERE))  # read.py, beside this file
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
    """read.py's gather bound (`read.bound_plan`, `read.bound_gather`): one unit's rows a
    step in the reader's own order, gathered shard by shard from np.memmap into int64;
    `steps` steps' worth of tokens planned before timing."""
    import read

    bound = read.bound_plan(root, tokens_per_step, steps * tokens_per_step)
    planned = bound["steps"]
    cursor = iter(range(1 << 62))

    def step():
        read.bound_gather(bound, planned[next(cursor) % len(planned)])

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
