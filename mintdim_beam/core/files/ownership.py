"""One build per output directory: the ownership marker, what a directory holds, and
`mintdim-beam clean`.

Why: the "new or empty" check alone leaves a window in which two builds both see an
empty directory and then write into each other's shards. A build therefore claims its
directory by creating `_mintdim_build.json` exclusively (O_EXCL locally, a
create-if-absent precondition on object stores: GCS `ifGenerationMatch=0`, S3
`If-None-Match: *`), looks again, and only then writes. The marker names the run and
stays until Finalize has written `manifest.json` and removed the scratch dir; a failed
build marks it failed, a killed one leaves it as it was. So a later build (or `clean`)
can always tell "another build holds this", "an incomplete build of ours is here" and
"a complete build is here" apart.

`clean` deletes only what a build of ours provably made: a directory whose ownership
marker or failure notice (our own prose) is there, and in it only the names our builds
write; anything else is refused with the list of what it would not touch. A running
build touches its marker every `HEARTBEAT_SECONDS` (local and shared filesystems: the
marker's mtime), so `clean` from another host refuses a build whose marker is fresh.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from mintdim_beam.core.errors import OutputCleanError, OutputValidationError
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt

MARKER = "_mintdim_build.json"

# Every name a build of ours writes at the top of its output directory.
_TOP_FILES = {fmt.SAMPLE_INDEX, fmt.UNK_INDEX, fmt.OVERFLOW_INDEX, fmt.DUPLICATE_INDEX,
              fmt.LOSSY_INDEX, fmt.HISTOGRAM, fmt.STATS, fmt.LENGTH_FIELD, fmt.MANIFEST, MARKER}
# ... and of a pack-build (`pack_build/`): its shards, sequence counts and failure notice.
_PACK_FILE = re.compile(r"^(shard_\d{6}\.(bin|bin\.index|idx|csv\.gz)|per_dataset_sequences\.json)$")
PACK_FAILED = "PACK_BUILD_FAILED.md"
# ... and of a train-tokenizer (`train_tokenizer/outputs.py`).
_TRAIN_FILE = re.compile(r"^(tokenizer\.json|tokenizer\.model|tokenizer_config\.json|"
                         r"report_text\.jsonl|unigram_sample\.txt|rejected_index\.jsonl)$")
TRAIN_FAILED = "TRAIN_TOKENIZER_FAILED.md"
# ... and of an export (`export/`): its parts, their index and card.
_EXPORT_FILE = re.compile(r"^(chunk_\d{5}\.h5|shard\.\d{5}\.mds|index\.json|README\.md)$")
_EXPORT_DATA = re.compile(r"^part-\d{5}-of-\d{5}\.parquet$")
EXPORT_FAILED = "EXPORT_FAILED.md"
_UNIT_DIR = re.compile(r"^unit_\d+$")
_UNIT_FILE = re.compile(r"^(shard_\d{6}\.bin|EMPTY_UNIT\.md|UNIT_BUILD_FAILED\.md)$")
_PART_TABLE = re.compile(r"^[a-z_]+\.parts\.jsonl$")  # in checksums.PARTS_DIR
_MEMORY_CLAIMS = threading.Lock()  # memory:// has no atomic create: one process, one lock
# The first line of each failure notice of ours: the proof `clean` accepts besides a marker.
_NOTICE_HEADS = {fmt.FAILED_UNIT: b"# Unit build failed\n", PACK_FAILED: b"# pack-build failed\n",
                 TRAIN_FAILED: b"# train-tokenizer failed\n", EXPORT_FAILED: b"# export failed\n"}
HEARTBEAT_SECONDS = 10  # a running build touches its marker this often
HEARTBEAT_FRESH = 60  # a marker touched this recently belongs to a build that runs


def new_run_id() -> str:
    """A run's name: scratch files live under `_mintdim_tmp/<run id>/`."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def marker_path(output_dir: str) -> str:
    return storage.join(output_dir, MARKER)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _base(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class Contents:
    """What an output directory holds, as far as a new build or `clean` cares."""

    names: list  # top-level entry names
    marker: dict | None  # the ownership marker's content, if any
    foreign: list  # paths that no build of ours writes
    failed_units: list  # unit dirs holding UNIT_BUILD_FAILED.md (or a pack's notice)
    notices: list = None  # paths of our failure notices (UNIT_BUILD_FAILED.md, ...)

    @property
    def empty(self) -> bool:
        return not self.names

    @property
    def complete(self) -> bool:
        return fmt.MANIFEST in self.names and self.marker is None and not self.failed_units

    @property
    def ours(self) -> bool:
        return bool(self.names) and not self.foreign


def inspect(output_dir: str) -> Contents:
    """List `output_dir` (absent: empty) and sort its entries into ours and foreign."""
    names, foreign, failed, notices = [], [], [], []
    marker = None
    for entry in storage.list_dir(output_dir):
        name = _base(entry)
        if name.startswith(MARKER + ".") and name.endswith(".tmp"):
            continue  # another claim being written at this instant: its link decides
        names.append(name)
        path = storage.join(output_dir, name)
        if name == MARKER:
            marker = read_marker(output_dir)
        elif (name == storage.TMP_DIR_NAME or name in _TOP_FILES or _PACK_FILE.match(name)
              or _TRAIN_FILE.match(name) or _EXPORT_FILE.match(name)):
            continue
        elif name == "data" and storage.is_dir(path):
            foreign.extend(storage.join(path, n) for n in map(_base, storage.list_dir(path))
                           if not _EXPORT_DATA.match(n))
        elif name in (PACK_FAILED, TRAIN_FAILED, EXPORT_FAILED):
            failed.append(name)
            notices.append(path)
        elif name == checksums.PARTS_DIR and storage.is_dir(path):
            foreign.extend(storage.join(path, n) for n in map(_base, storage.list_dir(path))
                           if not _PART_TABLE.match(n))
        elif _UNIT_DIR.match(name) and storage.is_dir(path):
            inner = [_base(p) for p in storage.list_dir(path)]
            foreign.extend(storage.join(path, n) for n in inner if not _UNIT_FILE.match(n))
            if fmt.FAILED_UNIT in inner:
                failed.append(name)
                notices.append(storage.join(path, fmt.FAILED_UNIT))
        else:
            foreign.append(path)
    return Contents(sorted(names), marker, sorted(foreign), sorted(failed), sorted(notices))


def _our_notice(path: str) -> bool:
    """A failure notice written by a build of ours (its first line is our prose)."""
    try:
        with storage.open_read(path) as handle:
            head = handle.read(64)
    except OSError:
        return False
    return head.startswith(_NOTICE_HEADS[_base(path)])


def marker_age(output_dir: str) -> float | None:
    """Seconds since the marker was last touched (a running build's heartbeat), None when
    the store does not say."""
    path = marker_path(output_dir)
    try:
        if not storage.is_url(path):
            return max(0.0, time.time() - os.stat(path).st_mtime)
        info = storage.filesystem(path).info(path)
    except (OSError, ValueError):
        return None
    stamp = info.get("mtime") or info.get("updated") or info.get("LastModified")
    if isinstance(stamp, str):
        try:
            stamp = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(stamp, datetime.datetime):
        stamp = stamp.timestamp()
    return max(0.0, time.time() - float(stamp)) if isinstance(stamp, (int, float)) else None


def still_running(output_dir: str, marker: dict | None) -> str | None:
    """Why the build holding `marker` counts as running (None: it does not): its process
    is alive on this host, or (on any other host) its heartbeat is fresh."""
    if marker is None or marker.get("state") != "running":
        return None
    alive = _holder_alive(marker)
    if alive is not None:
        return describe(marker) if alive else None
    age = marker_age(output_dir)
    if age is not None and age < HEARTBEAT_FRESH:
        return f"{describe(marker)}, its marker touched {age:.0f} s ago"
    return None


class Heartbeat:
    """While a build runs: touch each local output's marker every HEARTBEAT_SECONDS
    (a touch never re-creates a marker Finalize has removed). Object stores have no
    touch: there the marker's own time is what `clean` judges."""

    def __init__(self, output_dirs):
        self._paths = [marker_path(d) for d in output_dirs if not storage.is_url(d)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mintdim-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for path in self._paths:
                try:
                    os.utime(path)
                except OSError:  # released (or gone): nothing to keep alive
                    pass

    def __enter__(self):
        if self._paths:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return False


MARKER_WRITE_WAIT = 2.0  # seconds a claim that lost waits for the winner's marker to be whole


def _marker_once_written(output_dir: str) -> None:
    """A claim that lost the create reads the winner's marker: it may meet it between
    the create and the one write that fills it, so wait (briefly) until it parses
    before judging, or the holder would look like an incomplete build."""
    deadline = time.monotonic() + MARKER_WRITE_WAIT
    while read_marker(output_dir).get("state") == "unreadable" and time.monotonic() < deadline:
        time.sleep(0.01)


def read_marker(output_dir: str) -> dict:
    try:
        doc = json.loads(storage.read_bytes(marker_path(output_dir)))
        return doc if isinstance(doc, dict) else {"state": "unreadable"}
    except (OSError, ValueError):  # a half-written marker is still a marker
        return {"state": "unreadable"}


def _holder_alive(marker: dict) -> bool | None:
    """True/False when the holding process is on this host; None when it cannot be known."""
    if marker.get("host") != socket.gethostname() or not isinstance(marker.get("pid"), int):
        return None
    try:
        os.kill(marker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(marker["pid"])


def _zombie(pid: int) -> bool:
    """A killed process not yet reaped by its parent still answers kill(pid, 0)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def describe(marker: dict) -> str:
    """One line about a marker: which run, where, since when, in which state."""
    parts = [f"run {marker.get('run_id', '?')}", f"pid {marker.get('pid', '?')} on host "
             f"{marker.get('host', '?')}", f"since {marker.get('started', '?')}"]
    state = marker.get("state", "?")
    if state == "failed":
        parts.append(f"failed: {marker.get('reason', '?')}")
    elif state == "running" and _holder_alive(marker) is False:
        parts.append("that process no longer runs (killed?)")
    return ", ".join(parts)


def refusal(output_given: str, contents: Contents) -> OutputValidationError | None:
    """Why a new build may not start in a directory holding `contents`, or None."""
    if contents.empty:
        return None
    marker = contents.marker
    if marker is not None and marker.get("state") == "running" and _holder_alive(marker) is not False:
        detail = describe(marker)
        if _holder_alive(marker) is None:
            detail += (f" (another host, or unknown; if that build is gone, "
                       f"run: mintdim-beam clean {output_given})")
        return OutputValidationError(directory=output_given, problem="held", detail=detail)
    if contents.ours and not contents.complete:
        found = describe(marker) if marker is not None else (
            f"{', '.join(contents.failed_units)} hold UNIT_BUILD_FAILED.md" if contents.failed_units
            else "shards or scratch files without manifest.json")
        return OutputValidationError(directory=output_given, problem="incomplete", detail=found)
    return OutputValidationError(directory=output_given)


def check_free(output_dir: str, output_given: str) -> None:
    """The seed's new-or-empty rule, naming a holder or an incomplete build of ours."""
    error = refusal(output_given, inspect(output_dir))
    if error is not None:
        raise error


def _create_exclusive(path: str, data: bytes) -> None:
    """Create `path` only if it does not exist (FileExistsError otherwise), atomically."""
    if not storage.is_url(path):
        # O_EXCL: the create fails if the name exists, on every filesystem (hard links,
        # used before, are missing on FUSE and some NFS). The marker is one small write;
        # a reader that meets it half-written still counts it (`read_marker`).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return
    fs = storage.filesystem(path)
    if path.startswith("memory://"):
        with _MEMORY_CLAIMS:
            if fs.exists(path):
                raise FileExistsError(path)
            fs.pipe_file(path, data)
        return
    # Look first (cheap, and enough for claims seconds apart), then create with the
    # store's precondition for claims at the same instant, then read back.
    if storage.exists(path):
        raise FileExistsError(path)
    try:
        fs.pipe_file(path, data, mode="create")  # gcsfs: ifGenerationMatch=0; s3fs: If-None-Match
    except FileExistsError:
        raise
    except OSError as exc:  # a failed precondition (412) is how object stores say "exists"
        if "412" in str(exc) or "PreconditionFailed" in str(exc) or "conditionNotMet" in str(exc):
            raise FileExistsError(path) from exc
        raise
    if storage.read_bytes(path) != data:
        raise FileExistsError(path)


class Claim:
    """This run's hold on its output directories: `take` them all (or none), `release`
    one when its manifest is in place, `fail` them when the build stops."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.created: list = []  # (output dir, directories this claim created)

    def _marker_doc(self, state: str, reason: str | None = None) -> bytes:
        doc = {"run_id": self.run_id, "state": state, "pid": os.getpid(),
               "host": socket.gethostname(), "started": self._started}
        if reason is not None:
            doc["reason"] = reason
        return fmt.json_document(doc).encode("utf-8")

    def take(self, outputs) -> None:
        """Claim every (output dir, output as given) or raise, leaving nothing behind:
        OutputValidationError `held`/`incomplete`/not empty, or `unwritable`."""
        self._started = _now()
        try:
            for output_dir, given in outputs:
                self._take_one(output_dir, given)
        except BaseException:
            self.undo()
            raise

    def _take_one(self, output_dir: str, given: str) -> None:
        made = storage.missing_dirs(output_dir)
        try:
            storage.makedirs(output_dir)
            _create_exclusive(marker_path(output_dir), self._marker_doc("running"))
        except FileExistsError:
            _remove_dirs(made)
            _marker_once_written(output_dir)
            check_free(output_dir, given)  # names the holder
            raise OutputValidationError(directory=given, problem="held",
                                        detail="another build claimed it just now") from None
        except OSError as exc:
            _remove_dirs(made)
            raise OutputValidationError(directory=given, problem="unwritable",
                                        detail=_os_reason(exc)) from None
        self.created.append((output_dir, made))
        # Look again: a build that ended between our check and our claim left files.
        contents = inspect(output_dir)
        if contents.names != [MARKER]:
            contents.names.remove(MARKER)
            contents.marker = None
            raise refusal(given, contents) or OutputValidationError(directory=given)

    def undo(self) -> None:
        """Before anything was written: drop our markers and the directories we made."""
        for output_dir, made in reversed(self.created):
            _remove(marker_path(output_dir))
            _remove_dirs(made)
        self.created = []

    def fail(self, output_dir: str, reason: str) -> None:
        """Mark the build failed (a rerun and `clean` then say so)."""
        try:
            storage.write_atomic(marker_path(output_dir),
                                 self._marker_doc("failed", reason.splitlines()[0][:500]),
                                 output_dir, scratch=output_dir)  # the scratch dir is gone
        except Exception:  # noqa: BLE001 - the marker stays "running" then, still ours
            pass


def release(output_dir: str) -> None:
    """The build is complete: the marker goes (Finalize, after manifest and scratch)."""
    _remove(marker_path(output_dir))


def _remove(path: str) -> None:
    try:
        if storage.exists(path):
            storage.filesystem(path).rm(path)
    except FileNotFoundError:
        pass


def _remove_dirs(made: list) -> None:
    for path in made:  # deepest first
        try:
            os.rmdir(path)
        except OSError:
            pass


def _os_reason(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return f"{text} ({exc.filename})" if getattr(exc, "filename", None) else text


# --- mintdim-beam clean ---------------------------------------------------------------

def clean(output_dir: str, output_given: str) -> list[str]:
    """Remove an incomplete build of ours; returns what was removed. Refuses (with
    OutputCleanError, removing nothing) a complete build, a directory without our
    marker or failure notice, one holding anything a build of ours does not write, and
    a build that still runs (here, or with a fresh heartbeat anywhere)."""
    contents = inspect(output_dir)
    if contents.empty:
        return []
    marker = contents.marker
    if contents.complete:
        raise OutputCleanError(directory=output_given, reason="it holds a complete build "
                               "(manifest.json); remove it yourself if you mean to")
    if marker is None and not any(_our_notice(path) for path in contents.notices):
        shown = ", ".join(contents.names[:10]) + (" ..." if len(contents.names) > 10 else "")
        raise OutputCleanError(directory=output_given, reason=(
            "nothing proves a build of mintdim-beam made it (no ownership marker "
            f"{MARKER}, no failure notice of ours); it would not touch: {shown}"))
    if contents.foreign:
        shown = ", ".join(contents.foreign[:10]) + (" ..." if len(contents.foreign) > 10 else "")
        raise OutputCleanError(directory=output_given, reason=(
            f"holds files that are not from mintdim-beam; it would not touch: {shown}"))
    running = still_running(output_dir, marker)
    if running is not None:
        raise OutputCleanError(directory=output_given, reason=f"a build still runs there: {running}")
    removed = []
    for name in contents.names:
        if name == MARKER:
            continue  # last: until everything else is gone the directory stays ours
        path = storage.join(output_dir, name)
        storage.remove_tree(path)
        removed.append(name)
    _remove(marker_path(output_dir))
    if marker is not None:
        removed.append(MARKER)
    return removed
