"""Signals and failures of a launch, the same for both pipelines: SIGTERM handled like
Ctrl-C (`on_signals`), the error a failed run raises (ours, rebuilt from any runner's
wrapping, or `BuildInterruptedError`), and `failed_build`, which writes the notices with
a second signal held off."""
from __future__ import annotations

import contextlib
import logging
import signal

from mintdim_beam.core.errors import BuildInterruptedError
from mintdim_beam.core.errors.failures import recover


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised like KeyboardInterrupt so every layer unwinds the same
    way (`on_signals` installs it; the command line does)."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name


received: list = []  # signals received during this launch (Beam re-wraps the exception);
# a launch clears it first


def on_signals() -> None:
    """Handle SIGTERM (sent by `timeout`, Docker, Kubernetes, Slurm) like Ctrl-C: the
    build stops, removes its scratch files and leaves its failure notices."""
    def interrupt(signum, frame):
        name = signal.Signals(signum).name
        received.append(name)
        # Beam logs the unwinding of every stage it was in; the user asked to stop and
        # gets one line from the command instead (logging is back once the build ends).
        logging.disable(logging.CRITICAL)
        raise Interrupted(name)

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


@contextlib.contextmanager
def signals_held():
    """A second Ctrl-C or SIGTERM must not cut the clean-up short (main thread only)."""
    held = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            held[sig] = signal.signal(sig, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals cannot reach this clean-up anyway
        pass
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def build_error(exc: BaseException):
    """The error to raise for a failed build: ours, rebuilt from any runner's wrapping,
    or BuildInterruptedError for Ctrl-C / SIGTERM (which Beam may have re-raised as a
    RuntimeError from inside a transform); None for anything else."""
    interrupt = interrupt_in(exc)
    if interrupt is not None:
        return BuildInterruptedError(signal=interrupt)
    return recover(exc)


def interrupt_in(exc: BaseException) -> str | None:
    if received:
        return received[-1]
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt):
            return getattr(exc, "signal_name", "SIGINT")
        exc = exc.__cause__ or exc.__context__
    return None


def failed_build(exc: BaseException, write_notices, say):
    """A build that started failed: its notices written (`write_notices(reason)`),
    signals held meanwhile, one line said; returns our error to raise (marked as a
    failure of the build, not of the config) or None for anything else."""
    with signals_held():
        error = build_error(exc)
        reason = f"{type(error or exc).__name__}: {error or exc}"
        write_notices(reason)
        say(f"failed: {reason.splitlines()[0]}")
        logging.disable(logging.NOTSET)
    if error is not None:
        error.phase = "build"
    return error
