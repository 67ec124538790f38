"""Readers at scale: `python benchmarks/read.py --synthetic 1000000,10000000,100000000`
(or `python benchmarks/read_scale.py --sizes ...`).

For each size N, synthetic builds of N records (`synthetic_build.py`: a unit-build of
small records, lengths only, and a pack-build of N documents, written with numpy in
seconds), read by one rank (`--rank 3` of `--world 8`) of three readers: UnitReader
unpacked and packed (`--pack-length 256`) at `--tokens-per-step` 65536, and
PackReader (`--seq-len 256`, `--pack-batch 32` a rank). Each measurement runs in a
fresh process, on a warm page cache:

  cold    the reader's cache removed first: open, first batch, then the epoch's plan
          (`len()`: every packing window; unpacked, every unit's order), and the state
          of the epoch's middle step saved; what the first rank of a machine pays once
  first   import + open + first batch, the cache written (what every other rank and
          every later start pays)
  resume  import + open + load_state_dict of that state + the next batch, checked
          against the batch the saving process read there

`--rounds` interleaved rounds of first and resume (each reader in turn); min and median
of the times. Memory of each process at its end, from /proc/self/smaps by mapping:
anonymous (the reader's own arrays), the cache's files (`.npy` pages mapped), the
build's own data files (shards / `.bin` pages mapped: page cache, shared by the ranks of
a machine; a page fault maps the pages around it too, 64 KB or a large folio, so a
random read of a 14-byte record maps far more than it reads), other files (libraries);
and peak RSS (VmHWM). Writes `benchmarks/.work/results_read_scale.json` (`--json
benchmarks/results_read_scale.json` records a run).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("unpacked", "packed", "pack")
GOALS = {"first_s": 1.0, "resume_s": 1.0, "resident_mb": 200.0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000000,10000000,100000000")
    parser.add_argument("--workdir", default=str(HERE / ".work" / "scale"))
    parser.add_argument("--json", default=str(HERE / ".work" / "results_read_scale.json"),
                        help="where to write the results (default: the untracked work dir; "
                             "name benchmarks/results_read_scale.json to record them)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--tokens-per-step", type=int, default=65536)
    parser.add_argument("--pack-length", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--pack-batch", type=int, default=32)
    parser.add_argument("--per-shard", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(json.loads(args.worker))))
        return 0
    sys.path.insert(0, str(HERE))
    import synthetic_build

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    report = {"cores": os.cpu_count(), "world": args.world, "rank": args.rank,
              "tokens_per_step": args.tokens_per_step, "pack_length": args.pack_length,
              "seq_len": args.seq_len, "pack_batch": args.pack_batch, "rounds": args.rounds,
              "sizes": {}}
    for n in [int(s) for s in args.sizes.split(",") if s]:
        t0 = time.perf_counter()
        unit = synthetic_build.unit_build(work / f"unit_{n}", n, per_shard=args.per_shard)
        pack = synthetic_build.pack_build(work / f"pack_{n}", n, shards=max(1, n // 25_000_000))
        made = time.perf_counter() - t0
        for root in (unit, pack):
            shutil.rmtree(f"{root}.reader-cache", ignore_errors=True)  # a cold start
            _warm(root)
        base = {"unit": str(unit), "pack": str(pack), "world": args.world, "rank": args.rank,
                "tokens_per_step": args.tokens_per_step, "pack_length": args.pack_length,
                "seq_len": args.seq_len, "pack_batch": args.pack_batch,
                "state": str(work / f"state_{n}")}
        row = {"records": n, "write_s": round(made, 2),
               "unit_disk_mb": round(synthetic_build.disk_bytes(unit) / 1e6, 1),
               "pack_idx_mb": round(sum(p.stat().st_size for p in pack.glob("*.idx")) / 1e6, 1),
               "cold": {}, "first": {k: [] for k in KINDS}, "resume": {k: [] for k in KINDS}}
        for kind in KINDS:
            row["cold"][kind] = worker(dict(base, kind=kind, phase="cold"))
            _progress(n, kind, "cold", row["cold"][kind])
        for _ in range(max(1, args.rounds)):
            for kind in KINDS:
                for phase in ("first", "resume"):
                    got = worker(dict(base, kind=kind, phase=phase))
                    row[phase][kind].append(got)
                    _progress(n, kind, phase, got)
        row["cache_disk_mb"] = {name: round(_tree_bytes(Path(f"{root}.reader-cache")) / 1e6, 1)
                                for name, root in (("unit", unit), ("pack", pack))}
        row["summary"] = summary(row)
        report["sizes"][str(n)] = row
    _print(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _warm(root: Path) -> None:
    """Every data file read once: each reader starts on a warm page cache."""
    for path in sorted(root.rglob("*.bin")):
        with open(path, "rb") as handle:
            while handle.read(1 << 24):
                pass


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def worker(spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    env.pop("MINTDIM_BEAM_READER_CACHE", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker",
                           json.dumps(spec)], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"{spec['kind']} {spec['phase']} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = round(time.perf_counter() - start, 3)
    return out


def summary(row: dict) -> dict:
    out = {}
    for kind in KINDS:
        for phase in ("first", "resume"):
            runs = row[phase][kind]
            times = [r["total_s"] for r in runs]
            own = [r["memory"]["resident_mb"] - r["memory"]["build_mb"] for r in runs]
            out[f"{kind}_{phase}"] = {
                "total_s_min": min(times), "total_s_median": round(statistics.median(times), 3),
                "batch_s_median": round(statistics.median(r["batch_s"] for r in runs), 4),
                "resident_mb_max": max(r["memory"]["resident_mb"] for r in runs),
                "resident_without_build_pages_mb_max": round(max(own), 1),
                "anon_mb_max": max(r["memory"]["anon_mb"] for r in runs),
                "cache_pages_mb_max": max(r["memory"]["cache_mb"] for r in runs),
                "build_pages_mb_max": max(r["memory"]["build_mb"] for r in runs),
                "peak_rss_mb_max": max(r["memory"]["peak_rss_mb"] for r in runs),
                "matches": all(r.get("matches", True) for r in runs)}
        cold = row["cold"][kind]
        out[f"{kind}_cold"] = {"open_first_s": round(cold["total_s"], 3), "plan_s": cold["plan_s"],
                               "peak_rss_mb": cold["memory"]["peak_rss_mb"],
                               "anon_mb": cold["memory"]["anon_mb"]}
    return out


# -- the worker (a fresh process) ---------------------------------------------------------
def resident_by_kind(build: str, cache: str) -> dict:
    """This process's resident memory (MB) by mapping, from /proc/self/smaps: `anon_mb`
    (anonymous), `cache_mb` (files under `cache`), `build_mb` (files under `build`),
    `files_mb` (other files), `resident_mb` (all), `peak_rss_mb` (VmHWM)."""
    out = dict.fromkeys(("anon_mb", "cache_mb", "build_mb", "files_mb"), 0.0)
    kind = "anon_mb"
    with open("/proc/self/smaps") as handle:
        for line in handle:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) > 5 else ""
                kind = ("anon_mb" if not path.startswith("/") else
                        "cache_mb" if path.startswith(cache) else
                        "build_mb" if path.startswith(build) else "files_mb")
            elif first == "Rss:":
                out[kind] += int(line.split()[1]) / 1024
    out = {k: round(v, 1) for k, v in out.items()}
    out["resident_mb"] = round(sum(out.values()), 1)
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                out["peak_rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    return out


def _reader(spec: dict):
    from mintdim_beam import PackReader, UnitReader

    common = dict(seed=0, rank=spec["rank"], world_size=spec["world"])
    if spec["kind"] == "pack":
        return PackReader(spec["pack"], spec["seq_len"], batch_size=spec["pack_batch"], **common)
    pack_length = spec["pack_length"] if spec["kind"] == "packed" else None
    return UnitReader(spec["unit"], tokens_per_step=spec["tokens_per_step"],
                      pack_length=pack_length, **common)


def _ids(batch) -> str:
    ids = batch.tokens if hasattr(batch, "tokens") else batch.input_ids
    return hashlib.sha256(ids.tobytes()).hexdigest()


def run_worker(spec: dict) -> dict:
    t0 = time.perf_counter()
    import mintdim_beam.read  # noqa: F401

    t1 = time.perf_counter()
    reader = _reader(spec)
    t2 = time.perf_counter()
    state_file = Path(f"{spec['state']}_{spec['kind']}.json")
    saved = json.loads(state_file.read_text()) if spec["phase"] == "resume" else None
    if saved:
        reader.load_state_dict(saved["state"])
    t3 = time.perf_counter()
    batch = next(iter(reader))
    t4 = time.perf_counter()
    out = {"import_s": round(t1 - t0, 4), "open_s": round(t2 - t1, 4), "load_s": round(t3 - t2, 4),
           "batch_s": round(t4 - t3, 4), "total_s": round(t4 - t0, 4)}
    if saved:
        out["matches"] = _ids(batch) == saved["sha256"]
    if spec["phase"] == "cold":  # the epoch's whole plan, and the middle step's state
        steps = len(reader)
        if spec["kind"] == "unpacked":
            reader.padding_fraction()  # every unit's order
        middle = steps // 2
        if spec["kind"] == "pack":
            state = dict(reader.state_dict(), position=middle * reader.global_batch)
            after = reader.batch_at(middle)
        else:
            state = reader.state_at(middle)
            after = reader.batch_at(middle)
        out["plan_s"] = round(time.perf_counter() - t4, 3)
        out["steps"] = steps
        state_file.write_text(json.dumps({"state": state, "sha256": _ids(after)}))
    root = spec["pack"] if spec["kind"] == "pack" else spec["unit"]
    out["memory"] = resident_by_kind(root + "/", root + ".reader-cache/")
    return out


def _progress(n: int, kind: str, phase: str, row: dict) -> None:
    mem = row["memory"]
    print(f"  {n:>11,} {kind:8} {phase:6} {row['total_s']:7.3f} s  resident {mem['resident_mb']:7.1f} MB "
          f"(anon {mem['anon_mb']}, cache {mem['cache_mb']}, build pages {mem['build_mb']}), "
          f"peak {mem['peak_rss_mb']} MB", file=sys.stderr)


NAMES = {"unpacked": "UnitReader", "packed": "UnitReader packed", "pack": "PackReader"}


def _print(report: dict) -> None:
    print(f"\nrank {report['rank']} of {report['world']}, {report['cores']} cores; "
          f"min / median of {report['rounds']} rounds, fresh processes")
    print(f"{'records':>12} {'reader':18} {'first s':>14} {'resume s':>14} {'resident MB':>12} "
          f"{'anon':>6} {'cache':>6} {'build':>7} {'peak':>7} {'cold s':>8} {'plan s':>7} {'cold peak':>9}")
    for n, row in report["sizes"].items():
        s = row["summary"]
        for kind in KINDS:
            f, r, c = s[f"{kind}_first"], s[f"{kind}_resume"], s[f"{kind}_cold"]
            worst = max(f["resident_mb_max"], r["resident_mb_max"])
            print(f"{int(n):>12,} {NAMES[kind]:18} {f['total_s_min']:6.3f}/{f['total_s_median']:<7.3f}"
                  f" {r['total_s_min']:6.3f}/{r['total_s_median']:<7.3f} {worst:12.1f} "
                  f"{max(f['anon_mb_max'], r['anon_mb_max']):6.1f} "
                  f"{max(f['cache_pages_mb_max'], r['cache_pages_mb_max']):6.1f} "
                  f"{max(f['build_pages_mb_max'], r['build_pages_mb_max']):7.1f} "
                  f"{max(f['peak_rss_mb_max'], r['peak_rss_mb_max']):7.1f} "
                  f"{c['open_first_s']:8.2f} {c['plan_s']:7.2f} {c['peak_rss_mb']:9.1f}"
                  + ("" if r["matches"] else "  RESUME MISMATCH"))
    print("\n[goals at the largest size] first batch and resume < 1 s; resident memory "
          "< 200 MB (without the build's own mapped data pages: page cache, see above)")
    n, row = list(report["sizes"].items())[-1]
    for kind in KINDS:
        s = row["summary"]
        first, resume = s[f"{kind}_first"], s[f"{kind}_resume"]
        own = max(first["resident_without_build_pages_mb_max"],
                  resume["resident_without_build_pages_mb_max"])
        ok = (first["total_s_median"] < GOALS["first_s"] and resume["total_s_median"] < GOALS["resume_s"]
              and own < GOALS["resident_mb"])
        print(f"  {NAMES[kind]:18} {int(n):,} records: first {first['total_s_median']} s, resume "
              f"{resume['total_s_median']} s, resident without build pages {own} MB "
              f"(with them {max(first['resident_mb_max'], resume['resident_mb_max'])} MB)"
              f"  {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())
