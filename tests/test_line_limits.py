"""One huge line: a documented bound (--max_line_bytes) past which a line is an error
naming file and line (or, with on_overflow=skip, a skipped and indexed sample), read
without ever holding it; and a helper encoder that dies names the batch it was on."""
import io
import json
import os
import shutil
import signal
import threading
import time
import tracemalloc

import pytest

from conftest import IN_MEMORY, MULTI_PROCESS, REPO, encoder_helpers_of, run_build, write_jsonl
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.errors import EncoderCrashError, SourceParseError
from mintdim_beam.core.inputs.source import ByteRange, RangeBatches, iter_range_lines

DEMO_MODEL = REPO / "examples/tokenizer/demo.model"
LIMIT = 1000
LONG = {"q": "x" * 5000}  # a line of 5,009 bytes
LONG_BYTES = len(json.dumps(LONG))
OVERFLOW = {"q": "hello world " * 30}  # more tokens than the largest size, under LIMIT bytes
REFERENCE_KEYS = ("pipeline", "mintdim_version", "tokenizer", "token_storage",
                  "sequence_template", "length_field_metadata", "units", "source", "output")


def _build(workdir, rows, options, on_overflow="abort", batch=2):
    shutil.copy(DEMO_MODEL, workdir / "tok.model")
    write_jsonl(workdir / "data.jsonl", rows)
    return run_build(workdir, files=["data.jsonl"], fields=[["q"]], templates=["{q}"],
                     tokenizer="sentencepiece", tokenizer_files=["tok.model"], sizes=[[16]],
                     build_batch=[batch], output="out", samples_per_shard=[2],
                     options=list(options), on_overflow=on_overflow)


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in_memory", "multi_process"])
def test_a_line_over_the_bound_is_a_parse_error_naming_file_and_line(tmp_path, options):
    rows = [{"q": "hello world"}, {"q": "data tokens"}, LONG, {"q": "units padding"}]
    with pytest.raises(SourceParseError) as caught:
        _build(tmp_path, rows, [*options, f"--max_line_bytes={LIMIT}"])
    assert caught.value.kwargs == {
        "file": "data.jsonl", "line": 3,
        "reason": f"line of {LONG_BYTES} bytes exceeds --max_line_bytes {LIMIT}"}
    assert caught.value.phase == "build"
    assert not (tmp_path / "out" / fmt.MANIFEST).exists()


def _comparable(root):
    """Every output file; the manifest reduced to mintdim's own keys."""
    tree = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == fmt.MANIFEST:
                doc = json.loads(data)
                data = json.dumps({k: doc[k] for k in REFERENCE_KEYS}).encode()
            tree[str(path.relative_to(root))] = data
    return tree


def test_under_skip_a_long_line_is_skipped_indexed_and_keeps_its_sample_id(tmp_path):
    """The same build with that line replaced by an overflowing short one differs only
    in that line's overflow row."""
    rows = [{"q": "hello world"}, OVERFLOW, LONG, {"q": "data tokens"}, {"q": "units"},
            {"q": "hello world"}]
    flags = [*IN_MEMORY, f"--max_line_bytes={LIMIT}"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _build(tmp_path / "a", rows, flags, "skip")
    _build(tmp_path / "b", rows[:2] + [OVERFLOW] + rows[3:], flags, "skip")
    built, reference = _comparable(tmp_path / "a/out"), _comparable(tmp_path / "b/out")
    rows_a = built.pop(fmt.OVERFLOW_INDEX).decode().splitlines(keepends=True)
    rows_b = reference.pop(fmt.OVERFLOW_INDEX).decode().splitlines(keepends=True)
    assert built == reference
    assert rows_a[0] == rows_b[0]  # a normal sample's row, byte for byte
    assert json.loads(rows_a[1]) == {
        "sample_id": 2, "source_file": "data.jsonl", "source_line": 3, "token_count": None,
        "max_unit_size": 16, "action": "skip", "line_bytes": LONG_BYTES}
    assert list(json.loads(rows_a[1])) == list(json.loads(rows_b[1])) + ["line_bytes"]
    assert len(rows_a) == 2
    assert (tmp_path / "a/out" / fmt.MANIFEST).exists()


def test_a_huge_line_is_scanned_never_held(tmp_path):
    """A 50 MB line with a 1 MiB bound: memory stays at a few blocks, not the line."""
    from mintdim_beam.core.inputs.source import LongLine

    path = tmp_path / "huge.jsonl"
    size = 50 * 1000 * 1000
    with open(path, "wb") as handle:
        handle.write(b'{"a": 1}\r\n{"q": "')
        handle.write(b"y" * size)
        handle.write(b'"}\r\n{"b": 2}\n')
    total = path.stat().st_size
    tracemalloc.start()
    try:
        with open(path, "rb") as handle:
            lines = list(iter_range_lines(handle, 0, total, limit=1 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert lines[0] == b'{"a": 1}' and lines[2] == b'{"b": 2}' and len(lines) == 3
    assert isinstance(lines[1], LongLine) and lines[1].nbytes == size + 9

    with open(path, "rb") as handle:  # the reader's batches: the long line keeps its number
        batches = RangeBatches(handle, ByteRange(0, 0, str(path), 0, 0, total), 8, 1 << 20)
        (key, entries), = list(batches)
    assert [e[:3] for e in entries] == [(0, 0, '{"a": 1}'), (1, 1, None), (2, 2, '{"b": 2}')]
    assert entries[1][3].nbytes == size + 9 and (batches.lines, batches.samples) == (3, 3)


def test_a_long_blank_line_stays_blank():
    data = b'{"a": 1}\n' + b" \t" * 5000 + b"\r\n" + b'{"b": 2}'
    lines = list(iter_range_lines(io.BytesIO(data), 0, len(data), block=64, limit=100))
    assert lines == [b'{"a": 1}', b"", b'{"b": 2}']


def test_the_head_start_cuts_the_pipelines_batches_around_a_long_line(tmp_path):
    """A helper's head start reads with the same bound: its shares are the pipeline's."""
    from mintdim_beam.runtime.encoder_process import encode_head_start
    from mintdim_beam.core.config.unit_config import Dataset, InputFile
    from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder, share_entries
    from mintdim_beam.core.config.prepare import prepare
    from mintdim_beam.core.render.render_batch import Layout, render_entries
    from mintdim_beam.core.tokenizer.tokenizers import load_tokenizer

    path = write_jsonl(tmp_path / "in.jsonl", [{"q": "hello world"}, LONG, {"q": "data"},
                                                {"q": "units padding"}, {"q": "hello"}])
    plan = prepare(Dataset(
        index=0, files=(InputFile(0, str(path), str(path)),), fields=("q",), template="{q}",
        template_file_index=0, tokenizer_kind="sentencepiece", tokenizer_given=str(DEMO_MODEL),
        tokenizer_path=str(DEMO_MODEL), sizes=(16,), build_batch=4, output_given="o",
        output_path="o", samples_per_shard=2))
    encoders = {0: BatchEncoder(plan, load_tokenizer("sentencepiece", str(DEMO_MODEL)))}
    byte_range = ByteRange(0, 0, str(path), 0, 0, path.stat().st_size)
    for share in range(2):
        with open(path, "rb") as handle:
            want = [render_entries(Layout(plan), key, share_entries(entries, share, 2))[0]
                    for key, entries in RangeBatches(handle, byte_range, 4, LIMIT)]
        got = list(encode_head_start(encoders, {0: plan}, byte_range, 4, share, 2, 100, LIMIT))
        assert [texts for _, texts, _ in got] == [b["texts"] for b in want if b is not None]
    assert all("x" * 100 not in str(texts) for _, texts, _ in got)


def test_a_helper_killed_mid_batch_names_the_file_and_lines(tmp_path):
    """The real helper of an in-process build is stopped, then killed with SIGKILL, as
    the out-of-memory killer would: the build fails naming that batch's lines."""
    rows = [{"q": f"hello world {i}"} for i in range(12)]
    outcome = {}

    def build():
        try:
            _build(tmp_path, rows, [*IN_MEMORY, "--encoder_processes=1"], batch=4)
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome["error"] = exc

    before = set(encoder_helpers_of(os.getpid()))
    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 60
    helpers = []
    while not helpers and time.monotonic() < deadline and thread.is_alive():
        helpers = [pid for pid in encoder_helpers_of(os.getpid()) if pid not in before]
        time.sleep(0.005)
    assert helpers, "no helper encoder process was started"
    os.kill(helpers[0], signal.SIGSTOP)  # it answers nothing from now on
    time.sleep(1.0)  # the pipeline is built and its first batch sent meanwhile
    os.kill(helpers[0], signal.SIGKILL)
    thread.join(timeout=120)
    error = outcome.get("error")
    assert isinstance(error, EncoderCrashError), repr(error)
    assert error.kwargs["file"] == "data.jsonl"
    assert error.kwargs["lines"] == "lines 1-4"
    assert "SIGKILL" in error.kwargs["reason"]
    assert not (tmp_path / "out" / fmt.MANIFEST).exists()
