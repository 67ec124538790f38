"""Beam pipeline options: ours (`--input_range_bytes`) and the local defaults."""
from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES, DEFAULT_RANGE_BYTES
from mintdim_beam.runtime.local_default import DEFAULT_RUNNER, auto_encoder_processes

LOCAL_RUNNERS = {None, "DirectRunner", "FnApiRunner", "BundleBasedDirectRunner",
                 "SwitchingDirectRunner"}
# The command's own options, which a mistyped one is compared with too (`check_flags`).
COMMAND_OPTIONS = ("config", "on_overflow", "on_template_unk", "on_lossy")


class MintDimOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--input_range_bytes", type=int, default=DEFAULT_RANGE_BYTES,
                            help="size of the byte ranges input files are read in (default 64 MiB)")
        parser.add_argument("--max_line_bytes", type=_positive_int,
                            default=DEFAULT_MAX_LINE_BYTES,
                            help="longest input line read, in bytes (default 16 MiB): a longer "
                                 "line is a SourceParseError naming file and line, or with "
                                 "on_overflow=skip a skipped sample in overflow_index.jsonl; "
                                 "tokenizing one line can take 165 times its size in memory")
        parser.add_argument("--no_wait", action="store_true", default=False,
                            help="submit the job and return without waiting (templated launches); "
                                 "the pipeline still finalizes the output itself")
        parser.add_argument("--encoder_processes", type=int, default=-1,
                            help="helper processes that encode batches while the worker renders "
                                 "the next ones; 0 encodes in the worker (default -1: one per "
                                 "core, at most 8, for the local in-process run, else 0)")
        parser.add_argument("--disk_check", choices=("on", "off"), default="on",
                            help="on: a local output whose disk has less free space than the "
                                 "build's estimate (README, Disk) is an error before any "
                                 "output; off: skip the check")
        parser.add_argument("--shared_filesystem", action="store_true", default=False,
                            help="every worker sees this machine's local paths (an NFS or a "
                                 "volume mounted alike everywhere): local paths are allowed on "
                                 "a runner whose workers run elsewhere")
        parser.add_argument("--stage_records", choices=("auto", "off"), default="auto",
                            help="auto: records of samples that fit a declared unit go to block "
                                 "files in the output's scratch dir as soon as they are "
                                 "tokenized, for local outputs (as much scratch disk as the "
                                 "shards, until the build ends); off: they travel in the "
                                 "pipeline, as for gs:// and s3:// outputs")


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {value}")
    return value


def default_flags() -> list[str]:
    """The local default run (see `local_default`). It skips Beam's construction-time
    type check: the graph is ours and fixed, type-checked in every other run (the tests
    run it on every runner with the check on), and the check took 0.15 to 0.2 s of each
    build's planning here."""
    return [f"--runner={DEFAULT_RUNNER}", "--no_pipeline_type_check"]


def is_single_process(options: PipelineOptions) -> bool:
    """The in-process FnApiRunner with one worker (the local default)."""
    from apache_beam.options.pipeline_options import DirectOptions

    if runner_name(options) not in ("FnApiRunner", "DirectRunner", None):
        return False
    direct = options.view_as(DirectOptions)
    return (direct.direct_running_mode in (None, "in_memory")
            and (direct.direct_num_workers or 1) == 1)


def encoder_processes(options: PipelineOptions) -> int:
    """Helper encoder processes per Tokenize instance (see `encoder_process`).

    Auto gives the in-process local run one per core: there a single Python process does
    everything, and a tokenizer that holds the GIL stalls it. Multi-process and cloud
    runners already run a worker per core, where helpers would only compete."""
    count = options.view_as(MintDimOptions).encoder_processes
    if count < 0:
        return auto_encoder_processes() if is_single_process(options) else 0
    return count


def check_flags(flags, extra_known=COMMAND_OPTIONS) -> None:
    """Every `--flag` is one Beam or we know, else a config error (exit 2) with a "did
    you mean": Beam itself only warns about a flag it cannot parse, so a mistyped
    `--runnr=DataflowRunner` or `--max_line_byte` would quietly run something else.
    `extra_known`: the command's own options (`--on_overflow`, ...), for suggestions."""
    import argparse
    import difflib

    from mintdim_beam.core.errors import PipelineValidationError

    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    for cls in _subclasses(PipelineOptions):
        cls._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(list(flags))
    unknown = [arg for arg in unknown if arg.startswith("-")]
    if not unknown:
        return
    known = sorted({o.lstrip("-") for a in parser._actions for o in a.option_strings
                    if o.startswith("--")} | set(extra_known))
    problems = []
    for arg in unknown:
        name = arg.lstrip("-").split("=", 1)[0]
        close = difflib.get_close_matches(name.replace("-", "_"), known, n=1, cutoff=0.75)
        problems.append(f"{arg.split('=', 1)[0]} is a flag neither Beam nor mintdim-beam "
                        "knows" + (f" (did you mean --{close[0]}?)" if close else ""))
    raise PipelineValidationError(missing=problems)


def _subclasses(cls) -> set:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def make_options(pipeline_options) -> PipelineOptions:
    if pipeline_options is None:
        options = PipelineOptions(default_flags())
    elif isinstance(pipeline_options, PipelineOptions):
        options = pipeline_options
    else:
        check_flags(pipeline_options)
        options = PipelineOptions(list(pipeline_options))
    standard = options.view_as(StandardOptions)
    if standard.runner is None:
        standard.runner = DEFAULT_RUNNER  # DirectRunner would first try to download Prism
    return options


def runner_name(options: PipelineOptions) -> str:
    runner = options.view_as(StandardOptions).runner
    return runner if isinstance(runner, str) or runner is None else type(runner).__name__


def is_local(options: PipelineOptions) -> bool:
    return runner_name(options) in LOCAL_RUNNERS


def range_bytes(options: PipelineOptions) -> int:
    return options.view_as(MintDimOptions).input_range_bytes


def max_line_bytes(options: PipelineOptions) -> int:
    return options.view_as(MintDimOptions).max_line_bytes


def waits(options: PipelineOptions) -> bool:
    """False for a templated launch: the launcher must not wait for the job."""
    return not options.view_as(MintDimOptions).no_wait


def checks_disk(options: PipelineOptions) -> bool:
    return options.view_as(MintDimOptions).disk_check == "on"


def stages_records(options: PipelineOptions) -> bool:
    """Whether StageRecords may stage local outputs' records (`--stage_records`)."""
    return options.view_as(MintDimOptions).stage_records == "auto"


def _loopback(address) -> bool:
    """Whether a host[:port] (or a URL) names this machine by a loopback address."""
    if not address:
        return False
    text = str(address).split("://", 1)[-1]
    host = text[1:text.index("]")] if text.startswith("[") and "]" in text else text.rsplit(":", 1)[0]
    return host in ("localhost", "::1") or host.startswith("127.")


def workers_share_disk(options: PipelineOptions) -> bool:
    """Whether every worker of this run sees this machine's local paths: the in-process
    and multi-process FnApiRunner; a PortableRunner, FlinkRunner or PrismRunner whose job
    endpoint, Flink master and worker endpoints are all loopback addresses (workers
    started as processes or in loopback mode, never in containers); or any runner with
    --shared_filesystem. Dataflow and anything else: no."""
    from apache_beam.options.pipeline_options import PortableOptions

    if options.view_as(MintDimOptions).shared_filesystem:
        return True
    runner = runner_name(options)
    if runner in LOCAL_RUNNERS:
        return True
    if runner not in ("PortableRunner", "FlinkRunner", "PrismRunner"):
        return False
    portable = options.view_as(PortableOptions)
    if portable.job_endpoint and portable.job_endpoint != "embed" \
            and not _loopback(portable.job_endpoint):
        return False
    if runner == "FlinkRunner":
        from apache_beam.options.pipeline_options import FlinkRunnerOptions

        master = options.view_as(FlinkRunnerOptions).flink_master
        if master not in (None, "[auto]", "[local]") and not _loopback(master):
            return False
    environment = (portable.environment_type or ("LOOPBACK" if runner == "PrismRunner"
                                                 else "DOCKER")).upper()
    if environment in ("LOOPBACK", "PROCESS"):
        return True
    if environment == "EXTERNAL":
        config = portable.environment_config or ""
        return bool(config) and all(_loopback(part) for part in config.split(","))
    return False  # DOCKER: each worker has a container's filesystem
