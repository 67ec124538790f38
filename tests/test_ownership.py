"""One build per output directory, and honest endings: a second build is refused while
the first holds the directory; SIGTERM, Ctrl-C and SIGKILL leave a directory that says
it holds an incomplete build, which `mintdim-beam clean` removes, after which the same
command gives the same bytes as a fresh build; a full disk and a read-only output give
one clear error."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import fsspec
import pytest

from conftest import REPO, read_tree
from mintdim_beam.core import errors
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.files.ownership import MARKER, Claim, check_free, clean, inspect

BIN = Path(sys.executable).parent
TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """40k samples of the benchmark corpus: a build runs long enough to be stopped."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import corpus as bench_corpus

    path = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    bench_corpus.write_corpus(path, 40_000)
    return path


def _config(tmp: Path, data: Path, out: Path) -> Path:
    doc = {"source": {"files": [str(data)], "fields": [["instruction", "input", "output"]],
                      "templates": [TEMPLATE]},
           "tokenizer": {"type": "sentencepiece",
                         "files": [str(REPO / "examples/tokenizer/demo.model")]},
           "units": {"sizes": [[64, 128, 256, 512, 1024]], "build_batch": [2048]},
           "output": {"dir": str(out), "samples_per_shard": [5000]},
           "on_overflow": "truncate", "on_template_unk": "continue"}
    path = tmp / f"{out.name}.json"
    path.write_text(json.dumps(doc))
    return path


def _cli(*args, **kw):
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.run([str(BIN / "mintdim-beam"), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, **kw)


def _start(*args) -> subprocess.Popen:
    """A build in its own process group, as a shell would run it in the foreground."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    return subprocess.Popen([str(BIN / "mintdim-beam"), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for(predicate, proc, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"build ended early: {proc.returncode} {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)
    raise TimeoutError


def _tokenizing(out: Path):
    """True once the build has staged record blocks: it is inside the pipeline."""
    return lambda: any((out / "_mintdim_tmp").glob("*/blocks/*.bin"))


@pytest.fixture(scope="module")
def fresh(corpus, tmp_path_factory) -> dict:
    """The bytes of an undisturbed build, to compare every recovered build with."""
    tmp = tmp_path_factory.mktemp("fresh")
    out = tmp / "out"
    proc = _cli("build", _config(tmp, corpus, out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (out / MARKER).exists() and not (out / "_mintdim_tmp").exists()
    return read_tree(out)


def _assert_incomplete_then_clean_then_same_bytes(tmp, corpus, out, fresh):
    config = _config(tmp, corpus, out)
    again = _cli("build", config)
    assert again.returncode == 2
    assert "OutputValidationError" in again.stderr and "incomplete" in again.stderr
    assert f"mintdim-beam clean {out}" in again.stderr
    cleaned = _cli("clean", out)
    assert cleaned.returncode == 0, cleaned.stderr
    assert list(out.iterdir()) == []
    rebuilt = _cli("build", config)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert read_tree(out) == fresh


def _clean_as_another_host(out: Path) -> subprocess.CompletedProcess:
    """`mintdim-beam clean OUT` on a host whose name differs (so a pid cannot be checked)."""
    code = ("import socket, sys; socket.gethostname = lambda: 'another-host'\n"
            "from mintdim_beam.cli import main; sys.exit(main(['clean', sys.argv[1]]))")
    return subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def held(corpus, tmp_path_factory) -> dict:
    """A real build, and what was tried while it held its directory: from the moment its
    marker exists, a second build of the same output; from the moment it tokenizes,
    `clean` from another host. The two tests below read what each found."""
    tmp = tmp_path_factory.mktemp("held")
    out = tmp / "out"
    first = _start("build", _config(tmp, corpus, out))
    found = {"out": out, "pid": first.pid}
    _wait_for(lambda: (out / MARKER).exists(), first)

    def second_build():
        found["second"] = _cli("build", _config(tmp, corpus, out))
        found["first_running"] = first.poll() is None
        if found["first_running"]:
            found["marker"] = json.loads((out / MARKER).read_text())

    second = threading.Thread(target=second_build)
    second.start()
    try:
        _wait_for(_tokenizing(out), first)
        found["refused"] = _clean_as_another_host(out)
    finally:
        second.join()
        _, found["err"] = first.communicate(timeout=600)
    found["returncode"] = first.returncode
    return found


@pytest.mark.slow
def test_a_second_build_is_refused_while_the_first_holds_the_directory(held, fresh):
    second = held["second"]
    assert held["first_running"], "the first build should still be running"
    assert second.returncode == 2
    assert "OutputValidationError" in second.stderr
    assert "Another build holds this output directory" in second.stderr
    assert f"pid {held['pid']}" in second.stderr and held["marker"]["started"] in second.stderr
    assert held["returncode"] == 0, held["err"][-2000:]
    assert read_tree(held["out"]) == fresh  # the refused build touched nothing


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_clean_then_rebuild_gives_the_same_bytes(corpus, fresh, tmp_path):
    out = tmp_path / "out"
    proc = _start("build", _config(tmp_path, corpus, out))
    _wait_for(_tokenizing(out), proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("[unit-build] interrupted by SIGTERM")
    assert not (out / "_mintdim_tmp").exists() and not (out / "manifest.json").exists()
    for size in (64, 128, 256, 512, 1024):
        assert "BuildInterruptedError" in (out / f"unit_{size}/UNIT_BUILD_FAILED.md").read_text()
    marker = json.loads((out / MARKER).read_text())
    assert marker["state"] == "failed" and "SIGTERM" in marker["reason"]
    _assert_incomplete_then_clean_then_same_bytes(tmp_path, corpus, out, fresh)


@pytest.mark.slow
def test_ctrl_c_exits_130_with_one_line_and_no_helper_left(corpus, tmp_path):
    out = tmp_path / "out"
    proc = _start("build", _config(tmp_path, corpus, out))
    _wait_for(_tokenizing(out), proc)
    helpers = subprocess.run(["pgrep", "-f", "-g", str(proc.pid), "mintdim_beam.runtime.encoder_process"],
                             capture_output=True, text=True).stdout.split()
    assert helpers, "the default run has helper encoder processes"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the foreground group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    # the lines before the build (the template's round-trip warnings) and its start aside
    lines = [line for line in err.splitlines() if not line.startswith((
        "[unit-build] start", "[unit-build] warning:", "WARNING:root:apitools"))]
    assert lines[-1].startswith("[unit-build] interrupted by SIGINT"), err[-3000:]
    assert len(lines) <= 3, err
    time.sleep(0.5)
    assert all(not Path(f"/proc/{pid}").exists() for pid in helpers)
    assert not (out / "_mintdim_tmp").exists()


@pytest.mark.slow
def test_sigkill_leaves_an_incomplete_build_that_clean_removes(corpus, fresh, tmp_path):
    out = tmp_path / "out"
    proc = _start("build", _config(tmp_path, corpus, out))
    _wait_for(_tokenizing(out), proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert (out / MARKER).exists() and not (out / "manifest.json").exists()
    again = _cli("build", _config(tmp_path, corpus, out))
    assert "that process no longer runs (killed?)" in again.stderr
    _assert_incomplete_then_clean_then_same_bytes(tmp_path, corpus, out, fresh)


def _mount_tmpfs(path: Path, options: str):
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    """A real 1.5 MB filesystem: the demo build needs more."""
    path = tmp_path / "small"
    _mount_tmpfs(path, "size=1500k")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def read_only_disk(tmp_path):
    path = tmp_path / "ro"
    _mount_tmpfs(path, "ro,size=1m")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


def _demo_config(tmp: Path, out_root: Path) -> Path:
    text = (REPO / "examples/unit_build.yaml").read_text().replace("artifacts/", f"{out_root}/")
    text = text.replace("examples/", f"{REPO}/examples/")
    path = tmp / "demo.yaml"
    path.write_text(text)
    return path


def test_a_full_disk_is_one_clear_error_and_the_scratch_goes_first(tmp_path, small_disk):
    # past the up-front estimate (--disk_check=off): the disk fills during the build
    proc = _cli("build", _demo_config(tmp_path, small_disk), "--disk_check=off")
    assert proc.returncode == 1
    assert "OutputWriteError" in proc.stderr and "No space left on device" in proc.stderr
    assert f"Directory: {small_disk}/" in proc.stderr
    assert "Traceback" not in proc.stderr and "Errno" not in proc.stderr
    for out in small_disk.iterdir():
        assert not (out / "_mintdim_tmp").exists() and not (out / "manifest.json").exists()
        assert json.loads((out / MARKER).read_text())["state"] == "failed"
        notices = list(out.glob("unit_*/UNIT_BUILD_FAILED.md"))
        assert notices and all("OutputWriteError" in n.read_text() for n in notices)


def test_a_disk_too_small_for_the_estimate_fails_before_any_output(tmp_path, small_disk):
    proc = _cli("build", _demo_config(tmp_path, small_disk))
    assert proc.returncode == 2
    assert "ScratchSpaceError" in proc.stderr and f"Directory: {small_disk}/" in proc.stderr
    assert "Không đủ dung lượng đĩa" in proc.stderr and "Traceback" not in proc.stderr
    assert list(small_disk.iterdir()) == []


def test_a_read_only_output_is_a_config_error_and_nothing_is_written(tmp_path, read_only_disk):
    proc = _cli("build", _demo_config(tmp_path, read_only_disk / "nested"))
    assert proc.returncode == 2
    assert "OutputValidationError" in proc.stderr and "Read-only file system" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(read_only_disk.iterdir()) == []


def test_an_unwritable_output_leaves_no_directory_behind(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = _cli("build", _demo_config(tmp_path, blocker / "sub"))
    assert proc.returncode == 2 and "cannot be written" in proc.stderr
    assert blocker.read_text() == "not a directory"


# --- the claim itself -------------------------------------------------------------------

def _race(url_of, rounds=20):
    """Two threads claim the same fresh directory at the same moment, `rounds` times:
    exactly one wins each time, the other is told who holds it."""
    for i in range(rounds):
        out = url_of(i)
        barrier, results = threading.Barrier(2), {}

        def claim(name):
            barrier.wait()
            try:
                Claim(name).take([(out, out)])
                results[name] = "won"
            except errors.OutputValidationError as exc:
                results[name] = exc.kwargs.get("problem")

        threads = [threading.Thread(target=claim, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results.values()) == ["held", "won"], results


def test_claims_at_the_same_instant_local(tmp_path):
    _race(lambda i: str(tmp_path / f"out{i}"))


def test_a_claim_that_meets_the_winners_marker_half_written_says_held(tmp_path):
    """The winner creates the marker, then fills it: a loser reading in between (a busy
    machine made it happen in CI) waits for the marker before it judges, so the holder
    is named, not taken for an incomplete build."""
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_bytes(b"")  # created, not yet written
    import socket

    marker = json.dumps({"run_id": "winner", "state": "running", "pid": os.getpid(),
                         "host": socket.gethostname(), "started": "2026-12-01T00:00:00Z"})
    filled = threading.Timer(0.3, lambda: (out / MARKER).write_text(marker))
    filled.start()
    try:
        with pytest.raises(errors.OutputValidationError) as info:
            Claim("loser").take([(str(out), str(out))])
    finally:
        filled.join()
    assert info.value.kwargs["problem"] == "held"
    assert "run winner" in info.value.kwargs["detail"]


def test_claims_at_the_same_instant_memory():
    try:
        _race(lambda i: f"memory://claims/out{i}")
    finally:
        fsspec.filesystem("memory").rm("memory://claims", recursive=True)


def test_a_claim_that_finds_a_finished_build_backs_off(tmp_path):
    """The race the marker closes: the directory was empty when checked, and another
    build finished there before this one claimed it."""
    out = tmp_path / "out"
    check_free(str(out), "out")
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    with pytest.raises(errors.OutputValidationError) as info:
        Claim("late").take([(str(out), "out")])
    assert "not empty" in str(info.value)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


def test_a_refused_claim_undoes_the_claims_it_already_took(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    second.mkdir()
    (second / "user.txt").write_text("mine")
    with pytest.raises(errors.OutputValidationError):
        Claim("r").take([(str(first), "a"), (str(second), "b")])
    assert not first.exists()
    assert [p.name for p in second.iterdir()] == ["user.txt"]


def test_scratch_files_are_per_run(tmp_path):
    from mintdim_beam.unit_build.transforms.stage import block_path
    from mintdim_beam.unit_build.transforms.write import part_path
    from mintdim_beam.core.config.unit_config import resolve_datasets

    data = tmp_path / "d.jsonl"
    data.write_text('{"q": "a"}\n')
    raw = {"source": {"files": [str(data)], "fields": [["q"]], "templates": ["{q}"]},
           "tokenizer": {"type": "sentencepiece",
                         "files": [str(REPO / "examples/tokenizer/demo.model")]},
           "units": {"sizes": [[8]], "build_batch": [4]},
           "output": {"dir": str(tmp_path / "out"), "samples_per_shard": [4]}}
    import dataclasses

    dataset = resolve_datasets(raw)[0]
    one, two = (dataclasses.replace(dataset, run_id=r) for r in ("run-1", "run-2"))
    key = (0, 0, 0, 0)
    assert block_path(one, key) != block_path(two, key)
    assert part_path(one, "sample", key) != part_path(two, "sample", key)
    assert block_path(one, key).startswith(str(tmp_path / "out" / "_mintdim_tmp" / "run-1"))


# --- clean refuses what is not an incomplete build of ours ------------------------------

def test_clean_refuses_a_complete_build_foreign_files_and_a_running_build(tmp_path):
    complete = tmp_path / "complete"
    (complete / "unit_8").mkdir(parents=True)
    (complete / "manifest.json").write_text("{}")
    (complete / "unit_8/shard_000000.bin").write_bytes(b"\0\0")
    foreign = tmp_path / "foreign"
    (foreign / "unit_8").mkdir(parents=True)
    (foreign / "unit_8/UNIT_BUILD_FAILED.md").write_text("x")
    (foreign / "notes.txt").write_text("a user's file")
    running = tmp_path / "running"
    Claim("live").take([(str(running), "running")])  # this process holds it
    for out, why in ((complete, "complete build"), (foreign, "notes.txt"),
                     (running, "a build still runs there")):
        before = read_tree(out)
        proc = _cli("clean", out)
        assert proc.returncode == 1 and "OutputCleanError" in proc.stderr and why in proc.stderr
        assert read_tree(out) == before


def test_clean_removes_a_failed_build_and_says_what(tmp_path):
    out = tmp_path / "out"
    (out / "unit_8").mkdir(parents=True)
    (out / "unit_8/UNIT_BUILD_FAILED.md").write_text(fmt.failed_unit_notice(8, "x"))
    (out / "unit_8/shard_000000.bin").write_bytes(b"\0\0")
    (out / "sample_index.jsonl").write_text("")
    contents = inspect(str(out))
    assert contents.ours and not contents.complete
    assert sorted(clean(str(out), "out")) == ["sample_index.jsonl", "unit_8"]
    assert list(out.iterdir()) == []
    assert _cli("clean", out).stdout.startswith("nothing to clean")


# --- clean touches only what a build of ours provably made (issue 25) ----------------------

@pytest.mark.parametrize("files", [
    {"shard_000000.bin": b"\0" * 8, "shard_000000.idx": b"MMIDIDX\0\0"},  # Megatron's names
    {"stats.json": b"{}", "histogram.json": b"{}"},  # many tools' summaries
    {"unit_128/shard_000000.bin": b"\0" * 8},  # our layout's names, nobody's proof
    {"unit_8/UNIT_BUILD_FAILED.md": b"a notice of someone else's", "sample_index.jsonl": b""}])
def test_clean_refuses_a_directory_nothing_proves_ours(tmp_path, files):
    out = tmp_path / "out"
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    before = read_tree(out)
    proc = _cli("clean", out)
    assert proc.returncode == 1 and "nothing proves a build of mintdim-beam made it" in proc.stderr
    assert "it would not touch" in proc.stderr
    assert read_tree(out) == before


def test_clean_of_a_marked_directory_lists_the_files_it_would_not_touch(tmp_path):
    out = tmp_path / "out"
    Claim("gone").take([(str(out), "out")])
    (out / "sample_index.jsonl").write_text("")
    (out / "notes.txt").write_text("a user's file")
    doc = json.loads((out / MARKER).read_text())
    (out / MARKER).write_text(json.dumps({**doc, "pid": 2 ** 22 + 7}))  # no such process
    proc = _cli("clean", out)
    assert proc.returncode == 1 and "it would not touch" in proc.stderr
    assert "notes.txt" in proc.stderr and (out / "sample_index.jsonl").exists()


@pytest.mark.slow
def test_clean_from_another_host_refuses_a_build_whose_heartbeat_is_fresh(held, tmp_path):
    """A real build runs; `clean` run as another host (its hostname differs, so the pid
    cannot be checked) sees the marker touched seconds ago and refuses; the build ends
    complete. The same marker, untouched for longer than HEARTBEAT_FRESH, is cleanable."""
    from mintdim_beam.core.files import ownership

    refused = held["refused"]
    assert refused.returncode == 1 and "a build still runs there" in refused.stderr
    assert "touched" in refused.stderr
    assert held["returncode"] == 0, held["err"][-2000:]
    out = held["out"]
    assert (out / "manifest.json").exists() and not (out / MARKER).exists()

    stale = tmp_path / "stale"
    Claim("elsewhere").take([(str(stale), "stale")])
    (stale / "sample_index.jsonl").write_text("")
    doc = json.loads((stale / MARKER).read_text())
    (stale / MARKER).write_text(json.dumps({**doc, "host": "a-third-host"}))
    assert _clean_as_another_host(stale).returncode == 1  # just written: fresh
    old = time.time() - ownership.HEARTBEAT_FRESH - 5
    os.utime(stale / MARKER, (old, old))
    done = _clean_as_another_host(stale)
    assert done.returncode == 0, done.stderr
    assert list(stale.iterdir()) == []


def test_the_heartbeat_touches_markers_and_never_brings_one_back(tmp_path, monkeypatch):
    from mintdim_beam.core.files import ownership

    monkeypatch.setattr(ownership, "HEARTBEAT_SECONDS", 0.05)
    out, gone = tmp_path / "out", tmp_path / "gone"
    Claim("beating").take([(str(out), "out"), (str(gone), "gone")])
    old = time.time() - 3600
    os.utime(out / MARKER, (old, old))
    ownership.release(str(gone))  # Finalize removed it: a touch must not re-create it
    with ownership.Heartbeat([str(out), str(gone), "memory://bucket/out"]):
        time.sleep(0.3)
    assert time.time() - (out / MARKER).stat().st_mtime < 5
    assert not (gone / MARKER).exists()


def test_a_filesystem_without_hard_links_can_be_claimed(tmp_path, monkeypatch):
    """FUSE and some NFS mounts refuse link(): the claim is an exclusive create (issue 25;
    it was called "cannot be written" before), and a second claim is still refused."""
    def no_links(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    out = tmp_path / "out"
    first = Claim("first")
    first.take([(str(out), "out")])
    assert json.loads((out / MARKER).read_text())["run_id"] == "first"
    with pytest.raises(errors.OutputValidationError) as info:
        Claim("second").take([(str(out), "out")])
    assert info.value.kwargs["problem"] == "held"
    first.undo()
    assert not out.exists()
