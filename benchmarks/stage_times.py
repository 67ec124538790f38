"""Where a default local build's time goes, stage by stage: `python benchmarks/stage_times.py
CORPUS KIND TOKENIZER OUT [--json PATH]`.

Runs `targets.py ours` (the `mintdim-beam build` command) in this process and times each
bundle Beam's in-process runner executes: when it started (seconds from the run's
start), its wall time and the driver's CPU time in it, and the transforms fused into
it. The stages after the last encode run on the driver alone while the helpers idle,
so their wall time is the build's single-core tail. Beam's private
`FnApiRunner._execute_bundle` is wrapped for this: a diagnostic, not a harness.
"""
from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def timed_build(corpus: str, kind: str, tokenizer: str, out: str) -> list[dict]:
    """The build's bundles in the order they ran: start, wall, cpu, transforms."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    import targets

    execute = fn_runner.FnApiRunner._execute_bundle
    bundles, start = [], time.perf_counter()

    def timed(self, context, bundle_context, *args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return execute(self, context, bundle_context, *args, **kwargs)
        finally:
            bundles.append({"start": round(wall - start, 3),
                            "wall": round(time.perf_counter() - wall, 3),
                            "cpu": round(time.process_time() - cpu, 3),
                            "transforms": transforms_of(bundle_context.stage.name)})

    fn_runner.FnApiRunner._execute_bundle = timed
    frozen = gc.get_freeze_count()
    try:
        targets.ours(corpus, kind, tokenizer, out)
    finally:
        fn_runner.FnApiRunner._execute_bundle = execute
        if not frozen:  # the command freezes the heap for its exit; this process goes on
            gc.unfreeze()
    bundles.append({"end": round(time.perf_counter() - start, 3)})
    return bundles


def transforms_of(stage_name: str) -> list[str]:
    """The user-named transforms of a fused stage's name (Beam spells them
    `ref_AppliedPTransform_<Name>-<Step>_<n>`), in order, each once."""
    names = re.findall(r"ref_AppliedPTransform_([A-Za-z]+)", stage_name)
    return list(dict.fromkeys(names))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("kind", choices=["sentencepiece", "hf_json"])
    parser.add_argument("tokenizer")
    parser.add_argument("out", help="the build's output directory (must not hold a build)")
    parser.add_argument("--json", default=str(HERE / ".work" / "stage_times.json"))
    args = parser.parse_args(argv)
    bundles = timed_build(args.corpus, args.kind, args.tokenizer, args.out)
    end = bundles[-1]["end"]
    print(f"{'start':>7} {'wall':>7} {'cpu':>7}  transforms (run ended at {end:.2f} s)")
    for row in bundles[:-1]:
        print(f"{row['start']:7.2f} {row['wall']:7.3f} {row['cpu']:7.3f}  "
              f"{', '.join(row['transforms'])}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(bundles, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
