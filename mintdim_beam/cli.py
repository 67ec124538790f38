"""`mintdim-beam build CONFIG [beam flags]` (unit-build), `mintdim-beam pack CONFIG
[beam flags]` (pack-build) and `mintdim-beam train CONFIG [beam flags]` (train-tokenizer): exit 0 on success, 2 on a config error, 1 when the build
itself fails, 130 on Ctrl-C and 143 on SIGTERM; `verify`, `report`, `clean`, `plan`."""
from __future__ import annotations

import argparse
import json
import sys

from mintdim_beam.cli_help import CONFIG_HELP, FLAGS_HELP, PACK_HELP, TRAIN_HELP
from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.version import __version__

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mintdim-beam", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mintdim-beam {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="run a unit-build from a CONFIG file",
                           epilog=CONFIG_HELP + "\n" + FLAGS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("config", nargs="?", help="path or URL of the YAML/JSON config")
    build.add_argument("--config", dest="config_flag", metavar="CONFIG",
                       help="the same, as a flag (what a Flex Template passes)")
    build.add_argument("--on_overflow", "--on-overflow", dest="on_overflow", default=None,
                       help="overrides the config's on_overflow")
    build.add_argument("--on_template_unk", "--on-template-unk", dest="on_template_unk",
                       default=None, help="overrides the config's on_template_unk")
    build.add_argument("--on_lossy", "--on-lossy", dest="on_lossy", default=None,
                       help="overrides the config's on_lossy")
    _bad_row_flags(build)
    pack = sub.add_parser("pack", help="run a pack-build (pretraining token stream) from a "
                                       "CONFIG file", epilog=PACK_HELP + "\n" + FLAGS_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    pack.add_argument("config", nargs="?", help="path or URL of the YAML/JSON config")
    pack.add_argument("--config", dest="config_flag", metavar="CONFIG",
                      help="the same, as a flag (what a Flex Template passes)")
    _bad_row_flags(pack)
    train = sub.add_parser("train", help="train a tokenizer (BPE or SentencePiece) from a "
                                         "CONFIG file", epilog=TRAIN_HELP + "\n" + FLAGS_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("config", nargs="?", help="path or URL of the YAML/JSON config")
    train.add_argument("--config", dest="config_flag", metavar="CONFIG",
                       help="the same, as a flag")
    _bad_row_flags(train)
    export = sub.add_parser("export", help="write a finished build for another trainer's "
                                           "reader: Parquet, HDF5 or MosaicML MDS")
    export.add_argument("build", help="the build (a unit-build or pack-build output)")
    export.add_argument("--format", required=True, help="parquet | hdf5 | mds")
    export.add_argument("--out", required=True, help="the export's directory (new or empty)")
    export.add_argument("--pack-length", dest="pack_length", type=int, default=None,
                        help="unit-build: rows of this many tokens, records packed")
    export.add_argument("--seq-len", dest="seq_len", type=int, default=None,
                        help="pack-build: samples of seq_len + 1 tokens")
    export.add_argument("--seed", type=int, default=0, help="the packing or sample order")
    export.add_argument("--target", action="append", default=None,
                        help="unit-build: a segment that carries labels (repeatable; "
                             "default: the reader's)")
    export.add_argument("--rows-per-part", dest="part_rows", type=int, default=None,
                        help="packed rows or samples a part holds (default 65536)")
    verify = sub.add_parser("verify", help="check a finished build from its own files")
    verify.add_argument("out", help="output directory (local path or fsspec URL)")
    verify.add_argument("--max-problems", type=int, default=50)
    verify.add_argument("--deep", action="store_true",
                        help="also re-tokenize a sample of the source lines and compare "
                             "each with its record (needs the inputs and the tokenizer)")
    verify.add_argument("--deep-samples", dest="deep_samples", type=int, default=64,
                        help="records re-tokenized by --deep (evenly spaced; default 64)")
    report = sub.add_parser("report", help="write report.md, figures and plot data for a build")
    report.add_argument("out", help="output directory (local path or fsspec URL)")
    report.add_argument("--dest", default=None, help="where to write (default OUT/report)")
    clean = sub.add_parser("clean", help="remove an incomplete (failed, interrupted or killed) "
                                         "build from an output directory")
    clean.add_argument("out", help="output directory (local path or fsspec URL)")
    plan = sub.add_parser("plan", help="recommend unit sizes that minimize padding")
    plan.add_argument("config", help="path or URL of the YAML/JSON config (as for build)")
    plan.add_argument("--units", type=int, required=True, help="how many unit sizes (K)")
    plan.add_argument("--max-size", type=int, default=None,
                      help="largest size allowed; longer samples count as overflow")
    return parser


def _bad_row_flags(command) -> None:
    command.add_argument("--on_bad_row", "--on-bad-row", dest="on_bad_row", default=None,
                         help="overrides the config's on_bad_row (abort | skip)")
    command.add_argument("--max_rejected", "--max-rejected", dest="max_rejected", type=float,
                         default=None, help="overrides the config's max_rejected (a fraction)")


def _bad_row_policy(args, doc) -> dict:
    """The run's on_bad_row and max_rejected: the flag, else the config's key."""
    return {"on_bad_row": args.on_bad_row or doc.get("on_bad_row") or "abort",
            "max_rejected": (args.max_rejected if args.max_rejected is not None
                             else doc.get("max_rejected"))}


def accepted_options() -> set[str]:
    """Every --option the build entry point understands itself (Beam's own flags aside)."""
    from mintdim_beam.runtime.options import MintDimOptions

    build = _parser()._subparsers._group_actions[0].choices["build"]
    names = {opt for action in build._actions for opt in action.option_strings}
    probe = __import__("argparse").ArgumentParser()
    MintDimOptions._add_argparse_args(probe)
    names |= {opt for action in probe._actions for opt in action.option_strings}
    return {n.lstrip("-") for n in names if n.startswith("--")}


def build_command(args, beam_flags: list[str]) -> int:
    from mintdim_beam.unit_build.launch import run_build

    def run(doc):
        raw = {k: doc.get(k) for k in ("source", "tokenizer", "units", "output")}
        return run_build(
            raw,
            on_template_unk=args.on_template_unk or doc.get("on_template_unk") or "prompt",
            on_overflow=args.on_overflow or doc.get("on_overflow") or "prompt",
            pipeline_options=beam_flags or None,
            on_lossy=args.on_lossy or doc.get("on_lossy") or "continue",
            **_bad_row_policy(args, doc))

    return _config_command(args, run, "build")


def pack_command(args, beam_flags: list[str]) -> int:
    from mintdim_beam.pack_build.launch import run_pack

    def run(doc):
        raw = {k: v for k, v in doc.items() if k not in ("on_bad_row", "max_rejected")}
        return run_pack(raw, pipeline_options=beam_flags or None, **_bad_row_policy(args, doc))

    return _config_command(args, run, "pack")


def train_command(args, beam_flags: list[str]) -> int:
    from mintdim_beam.train_tokenizer.launch import run_train

    def run(doc):
        raw = {k: v for k, v in doc.items() if k not in ("on_bad_row", "max_rejected")}
        return run_train(raw, pipeline_options=beam_flags or None, **_bad_row_policy(args, doc))

    return _config_command(args, run, "train")


def export_command(args, beam_flags: list[str]) -> int:
    from mintdim_beam.export.launch import run_export

    def run(_):
        return run_export(args.build, args.format, args.out, pipeline_options=beam_flags or None,
                          pack_length=args.pack_length, seq_len=args.seq_len, seed=args.seed,
                          target=args.target, part_rows=args.part_rows)

    return _run_command(run, None)


def _config_command(args, run, command: str) -> int:
    """Load CONFIG, run it with Ctrl-C and SIGTERM handled, print the result as JSON."""
    from mintdim_beam.core.config.config_file import KEYS, PACK_KEYS, TRAIN_KEYS, load_config
    from mintdim_beam.core.errors import PipelineValidationError

    def load():
        config = args.config_flag or args.config
        if not config:
            raise PipelineValidationError(missing=["CONFIG (a path or URL, positional or --config)"])
        return load_config(config, {"pack": PACK_KEYS, "train": TRAIN_KEYS}.get(command, KEYS))

    return _run_command(run, load)


def _run_command(run, load) -> int:
    """`run(load())` with Ctrl-C and SIGTERM handled; its result printed as JSON, our
    errors as their text (exit 1 for a failed run, 2 for a config error)."""
    from mintdim_beam.core.errors import BuildInterruptedError
    from mintdim_beam.runtime.signals import on_signals

    try:
        doc = load() if load is not None else None
        on_signals()
        result = run(doc)
    except BuildInterruptedError as exc:
        return _interrupted(exc.kwargs["signal"], "scratch files removed, no manifest.json; "
                            "run `mintdim-beam clean OUT` before building into it again")
    except KeyboardInterrupt as exc:  # before the output was claimed: nothing written
        return _interrupted(getattr(exc, "signal_name", "SIGINT"), "nothing was written")
    except MintDimError as exc:
        print("\n\n".join([str(exc), *getattr(exc, "__notes__", ())]), file=sys.stderr)
        return 1 if getattr(exc, "phase", None) == "build" else 2
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


def _interrupted(signal: str, what: str) -> int:
    """One line, and the shell's exit code for the signal (128 + its number)."""
    print(f"[unit-build] interrupted by {signal}: {what}", file=sys.stderr)
    return 143 if signal == "SIGTERM" else 130


def clean_command(args) -> int:
    """Remove an incomplete build of ours; exit 1 (and remove nothing) when the directory
    holds a complete build, a running one, or files that are not ours."""
    from mintdim_beam.core.errors import OutputCleanError
    from mintdim_beam.core.files import storage
    from mintdim_beam.core.files.ownership import clean

    try:
        removed = clean(storage.resolve(args.out), args.out)
    except OutputCleanError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"cleaned {args.out}: removed {', '.join(removed)}" if removed
          else f"nothing to clean in {args.out}")
    return 0


def main(argv=None) -> int:
    args, extra = _parser().parse_known_args(argv)
    if args.command == "build":
        return build_command(args, extra)
    if args.command == "pack":
        return pack_command(args, extra)
    if args.command == "train":
        return train_command(args, extra)
    if args.command == "export":
        return export_command(args, extra)
    if args.command == "verify":
        from mintdim_beam.audit.verify import verify_command

        return verify_command(args, extra)
    if args.command == "report":
        from mintdim_beam.audit.report import report_command

        return report_command(args)
    if args.command == "clean":
        return clean_command(args)
    if args.command == "plan":
        from mintdim_beam.audit.plan import plan_command

        return plan_command(args, extra)
    return 2


def before_exit() -> None:
    """For a process that ends right after the command: freezing the heap skips the
    interpreter's last full garbage collection over Beam's modules and the finished
    pipeline (0.23 s -> 0.05 s of exit after a 100k build here); the operating system
    frees that memory anyway. Never for in-process callers, whose heap lives on."""
    import gc

    gc.freeze()


def console_main(argv=None) -> int:
    """The `mintdim-beam` command: `main`, then `before_exit`."""
    code = main(argv)
    before_exit()
    return code


if __name__ == "__main__":
    sys.exit(console_main())
