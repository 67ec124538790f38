"""Never a wrong "done": an input changed between planning and reading (replaced by mv,
truncated at a line boundary, appended to) stops the build with SourceChangedError
naming the file as given, and leaves no manifest.json; on every runner, locally, on
memory:// and on the S3 and GCS emulators. A finished build records its inputs'
identities in the manifest, and `verify` says whether each still matches.

The change is made deterministically right after the real planning, by wrapping the
launcher's `plan_ranges`."""
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from test_remote import gcs, s3  # noqa: F401 - the emulator fixtures

from conftest import IN_MEMORY, MANIFEST_REFERENCE_KEYS, MULTI_PROCESS, sentence
from mintdim_beam.unit_build import launch as runner
from mintdim_beam.core import errors
from mintdim_beam.core.inputs.input_files import open_range
from mintdim_beam.core.inputs.source import RangeBatches, plan_ranges

ROWS = 300


def _rows(seed: int, count: int = ROWS) -> list[bytes]:
    rng = random.Random(seed)
    return [json.dumps({"q": sentence(rng, 1, 10), "a": sentence(rng, 1, 25)}).encode() + b"\n"
            for _ in range(count)]


ORIGINAL = b"".join(_rows(1))
# Each change keeps the file valid JSONL, so only the identity check can tell.
CHANGES = {
    "replaced": lambda data: b"".join(_rows(2, ROWS + 1)),  # another file, moved over it
    "truncated": lambda data: b"".join(data.splitlines(keepends=True)[:ROWS * 3 // 5]),
    "appended": lambda data: data + b"".join(_rows(3, 40)),
}


def _raw(files, tokenizer: str, out: str) -> dict:
    return {"source": {"files": files, "fields": [["q", "a"]], "templates": ["Q: {q}\nA: {a}"]},
            "tokenizer": {"type": "sentencepiece", "files": [tokenizer]},
            "units": {"sizes": [[8, 16, 64]], "build_batch": [16]},
            "output": {"dir": out, "samples_per_shard": [40]}}


def _change_after_planning(monkeypatch, change):
    """The launcher plans as usual, then `change()` runs before any range is read."""
    real = runner.plan_ranges

    def plan_then_change(*args, **kwargs):
        ranges = real(*args, **kwargs)
        change()
        return ranges

    monkeypatch.setattr(runner, "plan_ranges", plan_then_change)


def _change_local(path: Path, how: str):
    def change():
        new = CHANGES[how](path.read_bytes())
        if how == "replaced":  # a new file moved over the old name, as `mv` does
            other = path.with_name("other.jsonl")
            other.write_bytes(new)
            os.replace(other, path)
        elif how == "truncated":
            os.truncate(path, len(new))
        else:
            with open(path, "ab") as handle:
                handle.write(new[len(ORIGINAL):])
    return change


def _local_case(tmp_path: Path, tokenizers_dir: Path, name: str = "data.jsonl",
                data: bytes = ORIGINAL) -> Path:
    (tmp_path / name).write_bytes(data)
    (tmp_path / "sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    return tmp_path / name


def _expect_changed(raw: dict, options, given: str, has_manifest) -> errors.SourceChangedError:
    with pytest.raises(errors.SourceChangedError) as info:
        runner.launch(raw, "continue", "truncate", list(options))
    assert info.value.kwargs["file"] == given
    assert info.value.kwargs["planned"] != info.value.kwargs["found"]
    assert not has_manifest()
    return info.value


def _in(tmp_path: Path, raw_files, out: str = "out"):
    """Run in tmp_path, so the recorded paths are the relative ones given."""
    return _raw(raw_files, "sp.model", out)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


LOCAL_RUNNERS = {"in_memory": IN_MEMORY, "multi_process": MULTI_PROCESS}


@pytest.mark.parametrize("how", sorted(CHANGES))
@pytest.mark.parametrize("runner_name", sorted(LOCAL_RUNNERS))
def test_local_input_changed_after_planning(workdir, tokenizers_dir, monkeypatch, how, runner_name):
    path = _local_case(workdir, tokenizers_dir)
    _change_after_planning(monkeypatch, _change_local(path, how))
    _expect_changed(_in(workdir, ["data.jsonl"]), LOCAL_RUNNERS[runner_name] + [
        "--input_range_bytes=2000"], "data.jsonl", (workdir / "out/manifest.json").exists)


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(CHANGES))
def test_local_input_changed_on_the_portable_runner(workdir, tokenizers_dir, monkeypatch,
                                                    portable_flags, how):
    path = _local_case(workdir, tokenizers_dir)
    _change_after_planning(monkeypatch, _change_local(path, how))
    _expect_changed(_in(workdir, [str(path)]), portable_flags + ["--input_range_bytes=2000"],
                    str(path), (workdir / "out/manifest.json").exists)


def test_compressed_input_replaced_after_planning(workdir, tokenizers_dir, monkeypatch):
    path = _local_case(workdir, tokenizers_dir, "data.jsonl.gz", gzip.compress(ORIGINAL))

    def change():
        other = workdir / "other.gz"
        other.write_bytes(gzip.compress(CHANGES["replaced"](ORIGINAL)))
        os.replace(other, path)

    _change_after_planning(monkeypatch, change)
    _expect_changed(_in(workdir, ["data.jsonl.gz"]), IN_MEMORY, "data.jsonl.gz",
                    (workdir / "out/manifest.json").exists)


def test_second_file_changed_is_named(workdir, tokenizers_dir, monkeypatch):
    _local_case(workdir, tokenizers_dir, "first.jsonl")
    second = _local_case(workdir, tokenizers_dir, "second.jsonl")
    _change_after_planning(monkeypatch, _change_local(second, "truncated"))
    _expect_changed(_in(workdir, ["first.jsonl", "second.jsonl"]), IN_MEMORY, "second.jsonl",
                    (workdir / "out/manifest.json").exists)


def test_plan_command_notices_a_changed_input(workdir, tokenizers_dir, monkeypatch):
    """`mintdim-beam plan` reads the same ranges through the same checks."""
    import mintdim_beam.core.inputs.source as source
    from mintdim_beam.audit.plan import token_histograms

    path = _local_case(workdir, tokenizers_dir)
    real, change = source.plan_ranges, _change_local(path, "appended")

    def plan_then_change(*args, **kwargs):
        ranges = real(*args, **kwargs)
        change()
        return ranges

    monkeypatch.setattr(source, "plan_ranges", plan_then_change)
    with pytest.raises(errors.SourceChangedError) as info:
        token_histograms(_in(workdir, ["data.jsonl"]), IN_MEMORY)
    assert info.value.kwargs["file"] == "data.jsonl"


def test_file_shrinking_while_its_range_is_read(tmp_path):
    """The check after reading: a file truncated between two blocks of one range."""
    from mintdim_beam.core.config.unit_config import Dataset, InputFile

    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join(_rows(4, 20000)))  # > 1 MiB: read in several blocks
    dataset = Dataset(0, (InputFile(0, "big.jsonl", str(path)),), ("q", "a"), "{q}{a}", 0,
                      "sentencepiece", "sp", "sp", (8,), 64, "out", str(tmp_path / "out"), 10)
    (byte_range,) = plan_ranges([dataset])
    with pytest.raises(errors.SourceChangedError) as info:
        with open_range(byte_range) as handle:
            for n, _ in enumerate(RangeBatches(handle, byte_range, 64)):
                if n == 0:
                    os.truncate(path, path.stat().st_size // 2)
    assert info.value.kwargs["file"] == "big.jsonl"


# ------------------------------------------------------------------- memory:// and buckets

def _memory_case(prefix: str, tokenizers_dir: Path) -> tuple[str, dict]:
    fs = fsspec.filesystem("memory")
    url = f"memory://{prefix}/in/data.jsonl"
    fs.pipe_file(url, ORIGINAL)
    fs.pipe_file(f"memory://{prefix}/sp.model", (tokenizers_dir / "sp.model").read_bytes())
    return url, _raw([url], f"memory://{prefix}/sp.model", f"memory://{prefix}/out")


def _change_object(fs, url: str, how: str, append: bool = False):
    def change():
        new = CHANGES[how](fs.cat_file(url))
        if how == "appended" and append:
            with fs.open(url, "ab") as handle:
                handle.write(new[len(ORIGINAL):])
        else:
            fs.pipe_file(url, new)  # object stores: a new object under the same name
    return change


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_memory_input_changed_after_planning(tokenizers_dir, monkeypatch, how):
    fs = fsspec.filesystem("memory")
    prefix = f"identity-{how}"
    url, raw = _memory_case(prefix, tokenizers_dir)
    try:
        _change_after_planning(monkeypatch, _change_object(fs, url, how, append=True))
        _expect_changed(raw, IN_MEMORY + ["--input_range_bytes=2000"], url,
                        lambda: fs.exists(f"/{prefix}/out/manifest.json"))
    finally:
        fs.rm(f"/{prefix}", recursive=True)


def _bucket_case(fs, root: str, prefix: str, tokenizers_dir: Path) -> tuple[str, dict]:
    url = f"{root}/{prefix}/in/data.jsonl"
    fs.pipe_file(url, ORIGINAL)
    fs.pipe_file(f"{root}/{prefix}/sp.model", (tokenizers_dir / "sp.model").read_bytes())
    return url, _raw([url], f"{root}/{prefix}/sp.model", f"{root}/{prefix}/out")


BUCKET_CASES = [(store, how, IN_MEMORY) for store in ("gcs", "s3") for how in sorted(CHANGES)] + [
    (store, "replaced", MULTI_PROCESS) for store in ("gcs", "s3")]


@pytest.mark.slow
@pytest.mark.parametrize("store, how, options", BUCKET_CASES,
                         ids=[f"{s}-{h}-{'mp' if o is MULTI_PROCESS else 'mem'}"
                              for s, h, o in BUCKET_CASES])
def test_bucket_input_changed_after_planning(request, tokenizers_dir, monkeypatch, store, how,
                                             options):
    root, fs = request.getfixturevalue(store)
    prefix = f"identity-{how}-{'mp' if options is MULTI_PROCESS else 'mem'}"
    url, raw = _bucket_case(fs, root, prefix, tokenizers_dir)
    _change_after_planning(monkeypatch, _change_object(fs, url, how))

    def has_manifest():
        fs.invalidate_cache()
        return fs.exists(f"{root}/{prefix}/out/manifest.json")

    _expect_changed(raw, options + ["--input_range_bytes=2000"], url, has_manifest)


@pytest.mark.slow
@pytest.mark.parametrize("store, stamp", [("gcs", "generation"), ("s3", "etag")])
def test_bucket_manifest_records_the_object_version(request, tokenizers_dir, store, stamp):
    root, fs = request.getfixturevalue(store)
    url, raw = _bucket_case(fs, root, "identity-recorded", tokenizers_dir)
    runner.launch(raw, "continue", "truncate", IN_MEMORY)
    manifest = json.loads(fs.cat_file(f"{root}/identity-recorded/out/manifest.json"))
    (entry,) = manifest["inputs"]
    assert entry["file"] == url and entry["size"] == len(ORIGINAL) and entry[stamp]


# ------------------------------------------------------------------- manifest and verify

def test_manifest_records_inputs_after_our_version(workdir, tokenizers_dir):
    _local_case(workdir, tokenizers_dir, "a.jsonl")
    _local_case(workdir, tokenizers_dir, "b.jsonl.gz", gzip.compress(ORIGINAL))
    runner.launch(_in(workdir, ["a.jsonl", "b.jsonl.gz"]), "continue", "truncate", IN_MEMORY)
    manifest = json.loads((workdir / "out/manifest.json").read_text())
    keys = list(manifest)
    assert keys[:len(MANIFEST_REFERENCE_KEYS)] == MANIFEST_REFERENCE_KEYS
    assert keys[len(MANIFEST_REFERENCE_KEYS):] == [
        "mintdim_beam_version", "inputs", "build_config", "special_tokens", "token_ids",
        "round_trip", "tokenizer_card", "checksums"]
    a, b = manifest["inputs"]
    ends = hashlib.blake2b(ORIGINAL, digest_size=12).hexdigest()  # a file under one block
    assert a == {"file": "a.jsonl", "size": len(ORIGINAL),
                 "mtime_ns": (workdir / "a.jsonl").stat().st_mtime_ns, "ends": ends}
    assert b["file"] == "b.jsonl.gz" and b["size"] == (workdir / "b.jsonl.gz").stat().st_size
    assert b["compression"] == "gzip" and list(b) == ["file", "size", "mtime_ns", "ends",
                                                      "compression"]


def _verify(out: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run([sys.executable, "-m", "mintdim_beam.cli", "verify", str(out)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_verify_reports_inputs_and_whether_they_still_match(workdir, tokenizers_dir):
    path = _local_case(workdir, tokenizers_dir)
    _local_case(workdir, tokenizers_dir, "kept.jsonl")
    runner.launch(_in(workdir, ["data.jsonl", "kept.jsonl"]), "continue", "truncate", IN_MEMORY)
    proc = _verify(workdir / "out", workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "input data.jsonl: unchanged" in proc.stdout
    assert "input kept.jsonl: unchanged" in proc.stdout

    with open(path, "ab") as handle:  # changed after the build: reported, not a failure
        handle.write(_rows(9, 1)[0])
    (workdir / "kept.jsonl").unlink()
    proc = _verify(workdir / "out", workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "input data.jsonl: changed since the build" in proc.stdout
    assert "input kept.jsonl: not found" in proc.stdout


def test_verify_of_a_reference_build_without_inputs_is_fine():
    """mintdim 0.2.1 records no inputs: nothing to say about them, and still OK."""
    from conftest import GOLDEN

    out = next(p for p in sorted(GOLDEN.glob("*/expected/*")) if (p / "manifest.json").is_file())
    proc = _verify(out, out)
    assert proc.returncode == 0, proc.stdout
    assert "\n  input " not in proc.stdout


# ------------------------------------------------------------------- the interactive survey

SURVEY_CHILD = """
import json, sys
from mintdim_beam import pipeline
from mintdim_beam.unit_build import launch as runner
if sys.argv[2] == "append":  # the input grows right after planning
    real = runner.plan_ranges
    def plan_then_change(*args, **kwargs):
        ranges = real(*args, **kwargs)
        with open(sys.argv[1], "ab") as handle:
            handle.write(b'{"q": "late", "a": "row"}\\n')
        return ranges
    runner.plan_ranges = plan_then_change
try:
    (pipeline("unit-build")
        .source.jsonl(files=[sys.argv[1]], fields=[["q", "a"]], templates=["{q} {a}"])
        .tokenizer.sentencepiece(files=["sp.model"])
        .units(sizes=[[8, 16]], build_batch=[4])
        .output.dir("out", samples_per_shard=[4])
        .run(pipeline_options=["--runner=FnApiRunner", "--input_range_bytes=2000"]))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "kwargs": getattr(exc, "kwargs", None)}))
"""


def run_survey_child(workdir: Path, given: str, mode: str) -> dict:
    """A build whose overflow policy is the prompt, on a real pseudo-terminal: its
    planning pass (the survey) reads every range first."""
    master, slave = os.openpty()
    (workdir / "survey_child.py").write_text(SURVEY_CHILD)
    try:
        proc = subprocess.run([sys.executable, "survey_child.py", given, mode], cwd=workdir,
                              stdin=slave, capture_output=True, text=True, timeout=300)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_interactive_survey_notices_a_changed_input(workdir, tokenizers_dir):
    _local_case(workdir, tokenizers_dir)
    found = run_survey_child(workdir, "data.jsonl", "append")
    assert found["error"] == "SourceChangedError" and found["kwargs"]["file"] == "data.jsonl"
    assert not (workdir / "out/manifest.json").exists()


def test_a_same_size_rewrite_with_its_mtime_put_back_is_seen(workdir, tokenizers_dir,
                                                             monkeypatch):
    """Size and modification time the same (`touch -r`, `rsync --times`, a copy
    tool), one byte changed: the digest of the file's ends differs (issue 25)."""
    path = _local_case(workdir, tokenizers_dir)
    stat = path.stat()

    def rewrite():
        data = bytearray(path.read_bytes())
        data[5] = ord("X") if data[5] != ord("X") else ord("Y")
        path.write_bytes(bytes(data))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns

    _change_after_planning(monkeypatch, rewrite)
    error = _expect_changed(_in(workdir, ["data.jsonl"]), IN_MEMORY, "data.jsonl",
                            lambda: (workdir / "out/manifest.json").exists())
    assert "first and last blocks" in error.kwargs["planned"]
