"""What a launch knows about its run before the pipeline exists: the runner, whether it
is local, range and line sizes, the disk check, helper encoders to start early. For the
default run (no pipeline options) all of it is known without importing Beam."""
from __future__ import annotations

import contextlib

from mintdim_beam.core.errors import OutputWriteError, PipelineValidationError
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES, DEFAULT_RANGE_BYTES
from mintdim_beam.runtime.local_default import DEFAULT_RUNNER, auto_encoder_processes
from mintdim_beam.runtime.progress import Progress, range_size


class RunShape:
    """What the launcher needs to know about the run before the pipeline exists. For the
    default run (no pipeline options) it is known without importing Beam."""

    def __init__(self, pipeline_options):
        if pipeline_options is None:
            self.options, self.runner, self.local = None, DEFAULT_RUNNER, True
            self.range_bytes, self.early_helpers = DEFAULT_RANGE_BYTES, auto_encoder_processes()
            self.max_line_bytes = DEFAULT_MAX_LINE_BYTES
            self.disk_check, self.one_process = True, True
            self.shared_disk = True
            return
        from mintdim_beam.runtime.options import (checks_disk, encoder_processes, is_local,
                                                  is_single_process, make_options, max_line_bytes,
                                                  range_bytes, runner_name, workers_share_disk)

        self.options = make_options(pipeline_options)
        self.runner, self.local = runner_name(self.options), is_local(self.options)
        self.range_bytes = range_bytes(self.options)
        self.max_line_bytes = max_line_bytes(self.options)
        self.disk_check = checks_disk(self.options)
        self.one_process = is_single_process(self.options)
        self.shared_disk = workers_share_disk(self.options)
        # Helpers for an in-process worker start before the pipeline is built.
        self.early_helpers = (encoder_processes(self.options)
                              if is_single_process(self.options) else 0)

    def check_paths(self, named) -> None:
        """`named`: (what, path as given, path resolved) of everything the workers open
        (inputs, the tokenizer, outputs), checked before any output:

        - memory:// lives in one process, so with worker processes it is refused (not a
          worker's failure to find its files);
        - on a runner whose workers do not share this machine's disk, a local or
          relative path would be looked up on each worker's own disk (an input "no
          longer exists", scratch written on one worker and read on another): refused,
          naming each path and the two ways out."""
        found = sorted({p for _, _, p in named if p and str(p).startswith("memory://")})
        if found and not self.one_process:
            raise PipelineValidationError(missing=[
                f"paths other than memory:// ({', '.join(found[:3])}) for a runner with "
                "worker processes (memory:// is one process's: use --runner=FnApiRunner "
                "in memory, or a local path or gs:// / s3:// URL)"])
        if self.shared_disk:
            return
        local = [(what, given) for what, given, _ in named
                 if given and not storage.is_url(str(given))]
        if local:
            raise PipelineValidationError(missing=[
                f"a URL (gs://, s3://) for {what} {given!r}: the workers of {self.runner} do not "
                "share this machine's disk (or, if they do, say so with --shared_filesystem: "
                "an NFS or a volume mounted at the same path on every worker)"
                for what, given in local])

    def missing_output(self, directory: str, path: str) -> OutputWriteError:
        """The error of a job that ended without its output where the launcher reads it."""
        return OutputWriteError(directory=directory, reason=(
            f"the job ended but {path} is not there: its workers wrote the output elsewhere "
            "(a local path on workers that do not share this disk?)"))

    def beam_options(self):
        from mintdim_beam.runtime.options import make_options

        if self.options is None:
            self.options = make_options(None)
        return self.options


def shown_progress(run, ranges, label: str = "unit-build"):
    """Live progress for a local run (`progress.Progress`); nothing for a cloud one,
    whose UI shows the Beam counters."""
    if not run.local:
        return contextlib.nullcontext()
    return Progress(sum(range_size(r) for r in ranges), label)
