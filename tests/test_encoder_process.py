"""Helper encoder processes: the same arrays as encoding in place, errors that reach the
caller, a dead child reported, and no re-run of the user's unguarded script."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import REPO, encoder_helpers_of
from mintdim_beam.runtime.encoder_process import (EncoderProcess, EncoderProcessError,
                                                  tokenizer_files_of)
from mintdim_beam.core.config.unit_config import Dataset, InputFile
from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder
from mintdim_beam.core.errors import TokenizerValidationError
from mintdim_beam.core.config.prepare import prepare
from mintdim_beam.core.tokenizer.tokenizers import load_tokenizer

TEXTS = [["hello world", "the model reads 😀 字"], ["", "code python function"],
         ["unit padding", "ü ÿ ☃ tokens"]]


def _plan(tokenizer_kind: str, tokenizer_path: str):
    dataset = Dataset(index=0, files=(InputFile(0, "in.jsonl", "in.jsonl"),), fields=("q", "a"),
                      template="Q: {q} ☃\nA: {a}", template_file_index=0,
                      tokenizer_kind=tokenizer_kind, tokenizer_given=tokenizer_path,
                      tokenizer_path=tokenizer_path, sizes=(8, 64), build_batch=4,
                      output_given="o", output_path="o", samples_per_shard=2)
    return prepare(dataset)


@pytest.mark.parametrize("kind,name,threads", [("sentencepiece", "sp.model", 0),
                                               ("sentencepiece", "sp.model", 1),
                                               ("hf_json", "hf_wordpiece.json", 1)])
def test_helper_returns_what_encoding_in_place_returns(tokenizers_dir, kind, name, threads):
    plan = _plan(kind, str(tokenizers_dir / name))
    local = BatchEncoder(plan, load_tokenizer(kind, plan.dataset.tokenizer_path))
    helper = EncoderProcess({0: plan}, threads=threads)
    try:
        for texts in (TEXTS, TEXTS[::-1]):
            helper.submit(0, texts)
        assert helper.outstanding == 2
        for texts in (TEXTS, TEXTS[::-1]):  # replies come back in submission order
            lengths, tokens, unks, lossy, engine = helper.collect()
            want_lengths, want_tokens, want_unks, want_lossy, want_engine = local.encode(texts)
            np.testing.assert_array_equal(lengths, want_lengths)
            assert tokens.dtype == want_tokens.dtype
            np.testing.assert_array_equal(tokens, want_tokens)
            assert unks == want_unks and unks  # the texts do produce UNKs
            assert lossy == want_lossy
            assert engine == want_engine and engine  # what encoded, for the manifest
        assert helper.outstanding == 0
    finally:
        helper.close()
    assert helper._proc.poll() == 0  # ends at end of input, skipping interpreter teardown


def test_an_error_in_the_helper_reaches_the_caller_with_its_class(tokenizers_dir, tmp_path):
    model = tmp_path / "sp.model"
    shutil.copy(tokenizers_dir / "sp.model", model)
    plan = _plan("sentencepiece", str(model))
    model.write_bytes(b"not a model")  # replaced between planning and encoding
    helper = EncoderProcess({0: plan})
    try:
        helper.submit(0, TEXTS)
        with pytest.raises(TokenizerValidationError) as caught:
            helper.collect()
        assert str(model) in str(caught.value)
        assert any("raised in the encoder process" in note for note in caught.value.__notes__)
    finally:
        helper.close()


def test_the_helper_gets_the_tokenizer_from_the_parent_not_the_path(tokenizers_dir, tmp_path):
    """memory:// (or credentials, or a chdir) exists only in the parent process."""
    import fsspec

    url = "memory://helper-test/sp.model"
    fsspec.filesystem("memory").pipe_file(url, (tokenizers_dir / "sp.model").read_bytes())
    plan = _plan("sentencepiece", url)
    helper = EncoderProcess({0: plan})
    try:
        helper.submit(0, TEXTS)
        lengths, tokens, unks, _, _ = helper.collect()
        np.testing.assert_array_equal(tokens, BatchEncoder(
            plan, load_tokenizer("sentencepiece", url)).encode(TEXTS)[1])
    finally:
        helper.close()


def test_a_helper_that_dies_is_reported(tokenizers_dir):
    helper = EncoderProcess({0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))})
    try:
        helper.submit(0, TEXTS)
        helper.collect()
        os.kill(helper._proc.pid, signal.SIGKILL)
        helper.submit(0, TEXTS)
        with pytest.raises(EncoderProcessError, match="exited with code -9"):
            helper.collect()
    finally:
        helper.close()


def test_a_helper_goes_on_while_its_replies_wait_to_be_collected(tokenizers_dir):
    """Replies are read off the pipe as they come: the child never blocks on a reply
    nobody has collected yet (each here is far larger than a 64 KiB pipe)."""
    import time

    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    local = BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))
    batches = [[[f"{k} sample {i} " * 40, "more words " * 30] for i in range(300)]
               for k in range(4)]
    helper = EncoderProcess({0: plan}, threads=1)
    try:
        for texts in batches:
            helper.submit(0, texts)
        deadline = time.monotonic() + 120
        while helper._replies.qsize() < len(batches) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert helper._replies.qsize() == len(batches)  # all answered, none collected
        for texts in batches:
            got, want = helper.collect(), local.encode(texts)
            assert got[1].nbytes > 64 << 10
            np.testing.assert_array_equal(got[1], want[1])
        if sys.platform.startswith("linux"):
            import fcntl

            for pipe in (helper._proc.stdin, helper._proc.stdout):
                assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == 1 << 20
    finally:
        helper.close()


@pytest.mark.parametrize("role", ["writer", "reader"])
def test_a_helper_stopped_from_its_own_feed_or_drain_thread_still_stops(tokenizers_dir, role):
    """An abandoned client's finalizer runs on whichever thread the collector runs on,
    which may be one of the client's own: it must not join itself, and must still end
    the child and close its output."""
    import threading

    from mintdim_beam.runtime.encoder_process import stop_child

    helper = EncoderProcess({0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))})
    helper.submit(0, TEXTS * 200)  # a reply may be on its way meanwhile
    failures = []

    def stop_here():
        here = threading.current_thread()
        try:
            stop_child(helper._requests, helper._proc,
                        here if role == "writer" else helper._writer,
                        here if role == "reader" else helper._reader)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=stop_here)
    thread.start()
    thread.join(timeout=60)
    try:
        assert not thread.is_alive() and failures == []
        assert helper._proc.poll() is not None and helper._proc.stdout.closed
    finally:
        helper.close()


def test_an_unguarded_user_script_runs_once(tokenizers_dir, tmp_path):
    """multiprocessing's spawn would import the user's __main__ again in every helper; a
    script without `if __name__ == "__main__"` would then build again and again."""
    (tmp_path / "in.jsonl").write_text('{"q": "hello", "a": "world"}\n' * 50, encoding="utf-8")
    shutil.copy(tokenizers_dir / "sp.model", tmp_path / "sp.model")
    script = tmp_path / "build.py"
    script.write_text(textwrap.dedent("""
        from mintdim_beam import pipeline
        with open("runs.txt", "a") as handle:
            handle.write("run\\n")
        (pipeline("unit-build").source.jsonl(files=["in.jsonl"], fields=[["q", "a"]],
                                            templates=["{q} {a}"])
         .tokenizer.sentencepiece(files=["sp.model"]).units(sizes=[[16]], build_batch=[8])
         .output.dir("out", samples_per_shard=[20])
         .run(pipeline_options=["--runner=FnApiRunner", "--encoder_processes=2"]))
    """))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "runs.txt").read_text() == "run\n"
    assert len(list((tmp_path / "out").rglob("shard_*.bin"))) == 3
    assert encoder_helpers_of(os.getpid()) == []


def test_split_points_cut_batches_into_balanced_contiguous_parts():
    from mintdim_beam.core.tokenizer.encode_batch import split_points

    sizes = [20] * 6 + [100] * 2
    assert split_points(sizes, 1) == [0, 8]
    assert split_points(sizes, 2) == [0, 6, 8]  # 126 (with one per line), then 202
    assert split_points([1], 4) == [0, 1]
    assert split_points([], 2) == [0, 0]
    parts = split_points(list(range(1, 40)), 3)
    assert parts[0] == 0 and parts[-1] == 39 and len(parts) == 4 and parts == sorted(set(parts))


def test_the_helpers_shares_of_a_batch_are_the_pipelines_shares(tokenizers_dir):
    """A head start renders only its share of the lines; the pipeline cuts the rendered
    batch at the same samples, also when a part holds bad lines only (it is empty)."""
    from mintdim_beam.core.tokenizer.encode_batch import share_bounds, share_entries
    from mintdim_beam.core.render.render_batch import Layout, render_entries

    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    good = [json.dumps({"q": "x" * n, "a": "y"}) for n in (5, 50, 7, 80, 3, 9)]
    lines = [good[0], "{bad", "[1]", good[1], good[2], "{bad", good[3], good[4], good[5]]
    entries = [(10 + i, 20 + i, text, None) for i, text in enumerate(lines)]
    entries[5] = (15, 25, None, "invalid UTF-8")
    key = (0, 0, 0, 0)
    batch = render_entries(Layout(plan), key, entries)[0]
    assert len(batch["texts"]) == 6 and batch["first_sample"] == 10
    for shares in (1, 2, 3, 4, 9, 12):
        bounds = share_bounds(batch, shares)
        assert bounds[0] == 0 and bounds[-1] == 6 and bounds == sorted(bounds)
        for share, (start, end) in enumerate(zip(bounds, bounds[1:])):
            mine = render_entries(Layout(plan), key, share_entries(entries, share, shares))[0]
            assert (mine["texts"] if mine else []) == batch["texts"][start:end]
        assert share_entries(entries, len(bounds) - 1, shares) == []  # no such part
    only_bad = [(0, 0, "{bad", None), (1, 1, "{bad", None), (2, 2, json.dumps({"q": "a" * 90, "a": ""}), None)]
    batch = render_entries(Layout(plan), key, only_bad)[0]
    assert share_bounds(batch, 2) == [0, 0, 1]  # the first part's lines are all bad


def test_merged_shares_equal_the_whole_batch_encoded_at_once(tokenizers_dir):
    from mintdim_beam.unit_build.transforms.tokenize import merge_shares

    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    encoder = BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))
    texts = TEXTS * 5
    parts = [0, 2, 2, 7, len(texts)]  # an empty share too (its lines were all bad)
    merged = merge_shares([encoder.encode(texts[a:b]) for a, b in zip(parts, parts[1:])], parts)
    whole = encoder.encode(texts)
    np.testing.assert_array_equal(merged[0], whole[0])
    np.testing.assert_array_equal(merged[1], whole[1])
    assert merged[2] == whole[2] and len(whole[2]) == len(texts)  # the literal has UNKs


def test_an_abandoned_helper_stops_its_child(tokenizers_dir):
    """A runner may drop a failed DoFn without calling teardown."""
    import gc

    helper = EncoderProcess({0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))})
    helper.submit(0, TEXTS)
    proc = helper._proc
    del helper
    gc.collect()
    assert proc.wait(timeout=30) == 0


def test_helpers_default_to_the_cores_of_the_in_process_run_only(monkeypatch):
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam.runtime.local_default import MAX_AUTO_ENCODERS
    from mintdim_beam.runtime.options import encoder_processes

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert encoder_processes(PipelineOptions(["--runner=FnApiRunner"])) == 2
    assert encoder_processes(PipelineOptions([])) == 2
    assert encoder_processes(PipelineOptions([
        "--runner=FnApiRunner", "--direct_running_mode=multi_processing",
        "--direct_num_workers=2"])) == 0
    assert encoder_processes(PipelineOptions(["--runner=PortableRunner"])) == 0
    assert encoder_processes(PipelineOptions(["--runner=FnApiRunner", "--encoder_processes=0"])) == 0
    assert encoder_processes(PipelineOptions(["--runner=PortableRunner", "--encoder_processes=3"])) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert encoder_processes(PipelineOptions(["--runner=FnApiRunner"])) == 0
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert encoder_processes(PipelineOptions(["--runner=FnApiRunner"])) == MAX_AUTO_ENCODERS


def test_warm_helpers_are_handed_out_once_and_the_rest_stopped(tokenizers_dir):
    from mintdim_beam.runtime.warm_helpers import adopt_warm, warm_helpers

    plans = {0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))}
    local = BatchEncoder(plans[0], load_tokenizer("sentencepiece", plans[0].dataset.tokenizer_path))
    with warm_helpers(plans, 3) as key:
        assert len(encoder_helpers_of(os.getpid())) == 3
        first = adopt_warm(key, 1)
        assert len(first) == 1 and adopt_warm("another build", 2) == []
        first[0].submit(0, TEXTS)  # an adopted helper works like a fresh one
        np.testing.assert_array_equal(first[0].collect()[1], local.encode(TEXTS)[1])
    # the two nobody adopted are stopped with the block; the adopted one is ours to close
    assert len(encoder_helpers_of(os.getpid())) == 1
    first[0].close()
    assert encoder_helpers_of(os.getpid()) == []
    with warm_helpers(plans, 0) as key:
        assert adopt_warm(key, 2) == [] and encoder_helpers_of(os.getpid()) == []


def test_the_heap_is_frozen_for_the_block_only_unless_the_caller_froze_it():
    import gc

    from mintdim_beam.runtime.frozen_heap import frozen_heap

    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(KeyError):
        with frozen_heap():
            raise KeyError("a failed run")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with frozen_heap():
            pass
        assert gc.get_freeze_count() == frozen  # the caller's own freeze is left alone
    finally:
        gc.unfreeze()


def test_every_helper_of_a_tokenize_step_gets_one_native_thread(tokenizers_dir):
    """Adopted or started in `setup`, several helpers share the cores: one thread each,
    also when `setup` adopts fewer warm helpers than it needs and starts the rest."""
    from mintdim_beam.runtime.warm_helpers import warm_helpers
    from mintdim_beam.unit_build.transforms.tokenize import TokenizeFn

    plans = {0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))}
    with warm_helpers(plans, 2) as key:
        tokenize = TokenizeFn(plans, 3, key)
        tokenize.setup()  # adopts the two warm helpers, starts a third
        try:
            assert len({h._proc.pid for h in tokenize._helpers}) == 3
            assert [h._proc.args[-1] for h in tokenize._helpers] == ["1"] * 3
        finally:
            tokenize.teardown()
    assert encoder_helpers_of(os.getpid()) == []


def _head_start_file(tmp_path):
    """8 lines: a blank one, a bad one and UNK-producing text among them."""
    path = tmp_path / "in.jsonl"
    rows = [json.dumps({"q": q, "a": a}, ensure_ascii=False) for q, a in (
        ("hello world", "the model reads 😀 字"), ("", "code python function"),
        ("unit padding", "ü ÿ ☃ tokens"), ("a", "b"))]
    path.write_text("\n".join([rows[0], "", rows[1], "{not json", rows[2], rows[3], rows[0],
                               rows[2]]) + "\n", encoding="utf-8")
    return path


def _pipeline_shares(plan, path, shares):
    """What the Tokenize DoFn sends helper i for each batch: the same reader and split."""
    from mintdim_beam.core.tokenizer.encode_batch import share_bounds
    from mintdim_beam.core.render.render_batch import Layout, render_entries
    from mintdim_beam.core.inputs.source import RangeBatches, plan_ranges

    byte_range = plan_ranges([plan.dataset])[0]
    per_share = [[] for _ in range(shares)]
    with open(path, "rb") as handle:
        for key, entries in RangeBatches(handle, byte_range, plan.dataset.build_batch):
            batch = render_entries(Layout(plan), key, entries)[0]
            parts = share_bounds(batch, shares)
            for share, (start, end) in enumerate(zip(parts, parts[1:])):
                per_share[share].append(batch["texts"][start:end])
    return byte_range, per_share


def _file_plan(tokenizers_dir, path):
    import dataclasses

    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    return dataclasses.replace(plan, dataset=dataclasses.replace(
        plan.dataset, files=(InputFile(0, str(path), str(path)),)))


def test_a_head_start_answers_the_shares_the_pipeline_then_asks_for(tokenizers_dir, tmp_path):
    """Each helper encodes its share of the first batches before any request; the same
    shares asked later come back from it, equal to encoding them in place."""
    path = _head_start_file(tmp_path)
    plan = _file_plan(tokenizers_dir, path)
    local = BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))
    byte_range, per_share = _pipeline_shares(plan, path, 2)
    helpers = [EncoderProcess({0: plan}, threads=1) for _ in range(2)]
    try:
        for share, helper in enumerate(helpers):
            helper.head_start(byte_range, plan.dataset.build_batch, share, 2)
        ahead = [helper.head_start_done() for helper in helpers]
        assert ahead == [sum(map(len, texts)) for texts in per_share] and sum(ahead) == 6
        for helper, batches in zip(helpers, per_share):
            for texts in batches + batches[:1]:  # the last one again: encoded anew
                helper.submit(0, texts)
            for texts in batches + batches[:1]:
                lengths, tokens, unks, _, _ = helper.collect()
                want = local.encode(texts)
                np.testing.assert_array_equal(lengths, want[0])
                np.testing.assert_array_equal(tokens, want[1])
                assert unks == want[2]
        assert [h.head_start_samples for h in helpers] == ahead  # the repeat was not
        assert any(encoded.unks for encoded in [local.encode(t) for b in per_share for t in b])
    finally:
        for helper in helpers:
            helper.close()


def test_a_head_start_the_helper_cannot_make_leaves_it_working(tokenizers_dir, tmp_path):
    """A file the child cannot open (another filesystem, gone) means no head start."""
    from mintdim_beam.core.inputs.source import ByteRange

    plan = _plan("sentencepiece", str(tokenizers_dir / "sp.model"))
    local = BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))
    helper = EncoderProcess({0: plan}, threads=1)
    try:
        helper.head_start(ByteRange(0, 0, str(tmp_path / "missing.jsonl"), 0, 0, 100), 4, 0, 1)
        helper.submit(0, TEXTS)  # no need to wait for the head start: collect reads it first
        np.testing.assert_array_equal(helper.collect()[1], local.encode(TEXTS)[1])
        assert helper.head_start_samples == 0 and helper.head_start_done() == 0
    finally:
        helper.close()


def test_a_head_start_reads_its_range_up_to_its_limit(tokenizers_dir, tmp_path):
    import dataclasses

    from mintdim_beam.runtime.encoder_process import answered_ahead, encode_head_start

    path = _head_start_file(tmp_path)
    plan = _file_plan(tokenizers_dir, path)
    encoders = {0: BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))}
    byte_range, (batches,) = _pipeline_shares(plan, path, 1)
    assert [len(b) for b in batches] == [3, 3]  # 4 lines a batch; one bad, a blank skipped

    def start(max_samples):
        return list(encode_head_start(encoders, {0: plan}, byte_range, 4, 0, 1, max_samples))

    assert [texts for _, texts, _ in start(100)] == batches
    assert [texts for _, texts, _ in start(4)] == batches[:1]  # 4 lines read: enough
    done = start(100)
    assert answered_ahead(done, 0, [list(t) for t in batches[1]])[0] == "ok"
    assert [texts for _, texts, _ in done] == [batches[0]]  # answered once
    assert answered_ahead(done, 1, batches[0]) is None  # another dataset
    assert answered_ahead(done, 0, batches[0][:1]) is None
    unknown = dataclasses.replace(byte_range, dataset=5)  # nothing to encode it with
    assert list(encode_head_start(encoders, {0: plan}, unknown, 4, 0, 1, 100)) == []


def test_a_head_start_ends_at_the_first_request_and_answers_it_from_what_it_encoded(
        tokenizers_dir, tmp_path):
    """The serving loop, in this process: the first request comes after two shares were
    encoded ahead; the head start ends there (its end comes before that reply, which
    is answered from it), an empty request does not end it, the shares it encoded
    ahead still answer the requests for them, and the first one past them is encoded
    anew."""
    import io

    from mintdim_beam.runtime.encoder_process import read_message, serve, write_message

    path = tmp_path / "in.jsonl"
    rows = [{"q": f"question {i} about units", "a": "answer " * (i % 5)} for i in range(24)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    plan = _file_plan(tokenizers_dir, path)
    local = BatchEncoder(plan, load_tokenizer("sentencepiece", plan.dataset.tokenizer_path))
    byte_range, (mine, _) = _pipeline_shares(plan, path, 2)
    assert len(mine) == 6 and all(mine)
    requests = io.BytesIO()
    for message in (("plans", {0: plan}, tokenizer_files_of({0: plan})),
                    ("head_start", byte_range, plan.dataset.build_batch, 0, 2, 100),
                    ("encode", 0, []), ("encode", 0, mine[0]), ("encode", 0, mine[1]),
                    ("encode", 0, mine[2]), ("encode", 0, mine[3])):
        write_message(requests, message)
    requests.seek(0)
    # Before each head-start step: is a request waiting? Two shares are encoded, then
    # the empty request is read, then a third share, then the first real request ends it.
    script = iter([False, False, True, False, True])
    replies = io.BytesIO()
    serve(requests, replies, 0, waiting=lambda _: next(script))
    replies.seek(0)
    got = []
    while replies.tell() < len(replies.getvalue()):
        got.append(read_message(replies))
    assert [(status, ahead) for status, _, ahead in got] == [
        ("ok", False), ("head_start", False), ("ok", True), ("ok", True), ("ok", True),
        ("ok", False)]
    assert got[1][1] == len(mine[0]) + len(mine[1]) + len(mine[2])  # encoded ahead
    for (_, payload, _), texts in zip([g for g in got if g[0] == "ok"],
                                      [[], mine[0], mine[1], mine[2], mine[3]]):
        want = local.encode(texts)
        np.testing.assert_array_equal(payload[0], want[0])
        np.testing.assert_array_equal(payload[1], want[1])
        assert payload[2] == want[2]


def test_request_waiting_sees_unread_bytes_and_a_closed_pipe():
    from mintdim_beam.runtime.encoder_process import request_waiting

    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as requests:
        assert not request_waiting(requests)
        os.write(write_fd, b"x")
        assert request_waiting(requests)
        assert requests.read(1) == b"x" and not request_waiting(requests)
        os.close(write_fd)
        assert request_waiting(requests)  # end of input: the head start stops too


def test_no_head_start_for_a_remote_file(tokenizers_dir, tmp_path):
    """A helper may lack the driver's credentials and would wait on the network."""
    from mintdim_beam.runtime.warm_helpers import WARM, warm_helpers
    from mintdim_beam.core.inputs.source import ByteRange

    plans = {0: _plan("sentencepiece", str(tokenizers_dir / "sp.model"))}
    path = _head_start_file(tmp_path)
    local = ByteRange(0, 0, str(path), 0, 0, path.stat().st_size)
    remote = ByteRange(0, 0, "gs://bucket/in.jsonl", 0, 0, 100)
    with warm_helpers(plans, 1, local) as key:
        assert [h.head_start_done() for h in WARM[key]] == [6]
    with warm_helpers(plans, 1, remote) as key:
        assert [h._head_start_sent for h in WARM[key]] == [False]  # never asked


def test_the_default_run_skips_only_the_construction_type_check():
    """No options: the in-process runner, without Beam's construction-time type check
    (our fixed graph is checked by every other run); given flags are taken as they are."""
    from apache_beam.options.pipeline_options import StandardOptions, TypeOptions

    from mintdim_beam.runtime.options import make_options

    default = make_options(None)
    assert default.view_as(StandardOptions).runner == "FnApiRunner"
    assert default.view_as(TypeOptions).pipeline_type_check is False
    assert default.view_as(TypeOptions).runtime_type_check is False
    given = make_options(["--runner=FnApiRunner"])
    assert given.view_as(TypeOptions).pipeline_type_check is True


def test_the_default_run_known_without_beam_is_the_default_flags_run(monkeypatch):
    """`launch` decides a default run's shape before importing Beam: it must be what
    the default flags give, or the head start would read the wrong ranges."""
    from mintdim_beam.runtime.run_shape import RunShape
    from mintdim_beam.runtime.options import default_flags

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    fast, full = RunShape(None), RunShape(default_flags())
    assert fast.options is None  # nothing from Beam yet
    shape = lambda run: (run.runner, run.local, run.range_bytes, run.early_helpers)  # noqa: E731
    assert shape(fast) == shape(full) == ("FnApiRunner", True, 64 << 20, 2)
    assert fast.beam_options().get_all_options() == full.options.get_all_options()


def test_a_helper_process_does_not_import_fsspec_to_read_local_files(tmp_path):
    """fsspec is about 0.06 s of each helper's start-up, which competes with the driver
    loading Beam; local reads (the head start's) use Python's own files."""
    data = tmp_path / "x.jsonl"
    data.write_bytes(b'{"q": 1}\n')
    code = textwrap.dedent(f"""
        import sys
        import mintdim_beam.runtime.encoder_process, mintdim_beam.core.tokenizer.tokenizers, mintdim_beam.core.render.render_batch
        from mintdim_beam.core.files import storage
        with storage.open_read({str(data)!r}) as handle:
            assert handle.read() == b'{{"q": 1}}\\n'
        print("fsspec" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_chat_head_start_ends_at_the_first_request_it_answered(tokenizers_dir, tmp_path):
    """Dialogues: the pipeline renders every line itself, so the head start stops at the
    first request (answered from what it encoded ahead) instead of rendering later
    lines a second time; the next request, which it never encoded, is encoded anew."""
    import io

    from conftest import chatml_bpe, write_jsonl
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.core.inputs.source import plan_ranges
    from mintdim_beam.runtime.encoder_process import (encode_head_start, read_message, serve,
                                                      write_message)

    tokenizer = chatml_bpe(tmp_path, seed=3, vocab=400) / "tokenizer.json"
    path = write_jsonl(tmp_path / "chat.jsonl", [
        {"messages": [{"role": "user", "content": f"question {i} about units"},
                      {"role": "assistant", "content": "answer " * (1 + i % 4)}]}
        for i in range(12)])
    [dataset] = resolve_datasets({
        "source": {"type": "chat", "files": [str(path)], "format": "messages",
                   "chat_template": "chatml"},
        "tokenizer": {"type": "hf_json", "files": [str(tokenizer)],
                      "config": str(tokenizer.parent / "tokenizer_config.json")},
        "units": {"sizes": [[64, 256]], "build_batch": [4]},
        "output": {"dir": [str(tmp_path / "out")], "samples_per_shard": [100]}})
    plan = prepare(dataset)
    byte_range = plan_ranges([plan.dataset])[0]
    # The head start's own first batches, as it yields them: the requests to send.
    helper_side = BatchEncoder(plan, load_tokenizer("hf_json", str(tokenizer)))
    shares = [texts for _, texts, _ in encode_head_start({0: helper_side}, {0: plan},
                                                         byte_range, 4, 0, 1, 100)]
    assert len(shares) == 3
    requests = io.BytesIO()
    for message in (("plans", {0: plan}, tokenizer_files_of({0: plan})),
                    ("head_start", byte_range, 4, 0, 1, 100),
                    ("encode", 0, shares[0]), ("encode", 0, shares[1])):
        write_message(requests, message)
    requests.seek(0)
    script = iter([False, True, False, True])  # a share ahead, then the first request
    replies = io.BytesIO()
    serve(requests, replies, 0, waiting=lambda _: next(script, True))
    replies.seek(0)
    got = []
    while replies.tell() < len(replies.getvalue()):
        got.append(read_message(replies))
    assert [(status, ahead) for status, _, ahead in got] == [
        ("head_start", False), ("ok", True), ("ok", False)]
    assert got[0][1] == len(shares[0])  # one share encoded ahead, no more
    for (_, payload, _), texts in zip(got[1:], shares[:2]):
        want = helper_side.encode(texts)
        np.testing.assert_array_equal(payload[1], want[1])


@pytest.mark.parametrize("kind,name", [("sentencepiece", "sp.model"), ("hf_json", "byte_bpe")])
def test_helpers_spawned_before_planning_encode_once_the_plans_come(tokenizers_dir, tmp_path,
                                                                      kind, name):
    """`spawn_helpers` starts helpers that load the tokenizer before the datasets are
    planned; `warm_helpers` gives them the plans (stopping any over the run's count),
    and they encode as a helper started with its plans does, on the planned engine."""
    from mintdim_beam.runtime.warm_helpers import adopt_warm, spawn_helpers, warm_helpers

    if name == "byte_bpe":
        path = _padded_bpe(tmp_path, 3, 400)
    else:
        path = tokenizers_dir / name
    plans = {0: _plan(kind, str(path))}
    if kind == "hf_json":
        assert plans[0].engine == "native"  # the preloaded engine is the one used
    local = BatchEncoder(plans[0], load_tokenizer(kind, plans[0].dataset.tokenizer_path))
    before = set(encoder_helpers_of(os.getpid()))  # this test looks at its own helpers only

    def running():
        return set(encoder_helpers_of(os.getpid())) - before

    spawned = spawn_helpers([plans[0].dataset], 3)
    try:
        assert running() == {helper._proc.pid for helper in spawned}
        with warm_helpers(plans, 2, spawned=spawned) as key:
            # the third is not needed
            assert running() == {helper._proc.pid for helper in spawned[:2]}
            helpers = adopt_warm(key, None)
            assert helpers == spawned[:2]
            for helper in helpers:
                helper.submit(0, TEXTS)
            want = local.encode(TEXTS)
            for helper in helpers:
                got = helper.collect()
                np.testing.assert_array_equal(got[0], want[0])
                np.testing.assert_array_equal(got[1], want[1])
                assert got[2:] == want[2:]
    finally:
        for helper in spawned:
            helper.close()
    assert running() == set()


def _padded_bpe(work, seed: int, vocab: int):
    from tokenizers import Tokenizer

    from conftest import byte_level_bpe, sentence

    rng = random.Random(seed)
    path = byte_level_bpe(work, [sentence(rng, 5, 20) for _ in range(500)], ["<pad>"], vocab,
                          {}) / "tokenizer.json"
    padded = Tokenizer.from_file(str(path))
    padded.enable_padding(pad_id=padded.token_to_id("<pad>"), pad_token="<pad>")
    padded.save(str(path))
    return path


def test_a_tokenizer_file_rewritten_after_the_helpers_started_is_loaded_again(tmp_path):
    """Helpers spawned before planning load the file as it was then; the plans bring it
    as read after planning, and a helper whose bytes differ loads those instead of
    encoding with the tokenizer it preloaded."""
    from mintdim_beam.runtime.warm_helpers import adopt_warm, spawn_helpers, warm_helpers

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = _padded_bpe(tmp_path / "old", 1, 300), _padded_bpe(tmp_path / "new", 2, 420)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(old.read_bytes())
    plan = _plan("hf_json", str(path))
    spawned = spawn_helpers([plan.dataset], 1)
    try:
        path.write_bytes(new.read_bytes())  # rewritten while the launcher plans
        plans = {0: _plan("hf_json", str(path))}
        want = BatchEncoder(plans[0], load_tokenizer("hf_json", str(path))).encode(TEXTS)
        stale = BatchEncoder(plan, load_tokenizer("hf_json", str(old))).encode(TEXTS)
        assert stale[1].tolist() != want[1].tolist()  # the two tokenizers differ here
        with warm_helpers(plans, 1, spawned=spawned) as key:
            helper, = adopt_warm(key, None)
            helper.submit(0, TEXTS)
            np.testing.assert_array_equal(helper.collect()[1], want[1])
    finally:
        for helper in spawned:
            helper.close()


def test_a_config_error_found_while_planning_stops_the_helpers_started_for_it(
        tokenizers_dir, tmp_path, monkeypatch):
    """A default run starts its helpers before planning; a config error found while
    planning (here a template literal the tokenizer cannot encode, under "abort") is
    raised as it was, with no output and no helper left running."""
    from mintdim_beam import pipeline
    from mintdim_beam.core.errors import TemplateTokenizerError
    from mintdim_beam.runtime import warm_helpers

    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a default run with two helpers
    started = []

    def spawn_recorded(datasets, count):
        helpers = real_spawn(datasets, count)
        started.extend(helpers)
        return helpers

    real_spawn = warm_helpers.spawn_helpers
    monkeypatch.setattr("mintdim_beam.unit_build.launch.spawn_helpers", spawn_recorded)
    before = set(encoder_helpers_of(os.getpid()))
    data = tmp_path / "in.jsonl"
    data.write_text('{"q": "hello world", "a": "code python"}\n', encoding="utf-8")
    job = (pipeline("unit-build").source.jsonl(files=[str(data)], fields=[["q", "a"]],
                                                templates=["Q: {q} ☃\nA: {a}"])
           .tokenizer.sentencepiece(files=[str(tokenizers_dir / "sp.model")])
           .units(sizes=[[8, 64]], build_batch=[4])
           .output.dir(str(tmp_path / "out"), samples_per_shard=[2]))
    with pytest.raises(TemplateTokenizerError):
        job.run(on_template_unk="abort", on_overflow="truncate")
    assert len(started) == 2 and all(h._proc.poll() is not None for h in started)
    assert set(encoder_helpers_of(os.getpid())) - before == set()  # none the run started
    assert not (tmp_path / "out").exists()


def test_helpers_preload_the_fast_engine_only_where_a_dataset_may_use_it(tmp_path, monkeypatch):
    """A helper loading a tokenizer before the plans builds its faster engine (the
    native one, as `engine_choice` would take; tiktoken's is not built then) only when
    a dataset of that file may use it: not when every one sets `engine: tokenizers`."""
    import dataclasses

    from mintdim_beam.core.tokenizer import fast_bpe, native_bpe
    from mintdim_beam.runtime.encoder_process import (dataset_tokenizer_files, fast_engine_keys,
                                                      preload_tokenizers)

    auto = _plan("hf_json", str(_padded_bpe(tmp_path, 3, 400))).dataset
    off = dataclasses.replace(auto, index=1, tokenizer_options=dataclasses.replace(
        auto.tokenizer_options, engine="tokenizers"))
    files = dataset_tokenizer_files([auto, off])
    key, = files  # one file for both
    assert fast_engine_keys([off]) == frozenset() and fast_engine_keys([auto, off]) == {key}
    built, real = [], native_bpe.native_engine
    monkeypatch.setattr(native_bpe, "native_engine", lambda *a, **k: built.append(1) or real(*a, **k))
    tiktoken_built, real_fast = [], fast_bpe.fast_engine
    monkeypatch.setattr(fast_bpe, "fast_engine",
                        lambda *a, **k: tiktoken_built.append(1) or real_fast(*a, **k))
    preload_tokenizers(files, fast_engine_keys([off]))
    assert built == []
    loaded = preload_tokenizers(files, fast_engine_keys([auto, off]))
    assert built == [1] and loaded[key][1].with_engine("native").engine == "native"
    assert built == [1] and tiktoken_built == []  # kept: the plans' engine is not built again
