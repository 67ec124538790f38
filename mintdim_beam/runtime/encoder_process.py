"""A helper process that encodes batches while the Beam worker renders the next ones.

Why: sentencepiece holds the GIL for a whole batch call (its native threads only run
the Viterbi part), so in one process nothing else moves while it encodes. The local
default run is one in-process Beam worker; handing the encoding to helper processes
(one per core, each encoding a share of every batch) lets reading, JSON parsing,
rendering and hashing run at the same time, and the encoding use every core.

The child is a plain `python -m mintdim_beam.runtime.encoder_process` (not multiprocessing), so
it never re-imports the user's `__main__`. Requests and replies are length-prefixed
pickles on its stdin/stdout, answered strictly in order; a writer thread feeds stdin so
the caller never blocks while the child is busy.

Head start: helpers the driver starts before Beam loads (`warm_helpers`) read, render and
encode their shares of the first batches themselves until the pipeline's first request.
A request whose texts equal such a share is answered from it: the same texts give the
same tokens, so the output is unchanged whatever the runner does first. It stops there
because every line it reaches is rendered twice (by it and by the pipeline): going on
past the first request cost the byte-level build 2 to 5% more CPU and the SentencePiece
build nothing it measurably gained back (`benchmarks/README.md`).
"""
from __future__ import annotations

import collections
import gc
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import traceback
import weakref

from mintdim_beam.core.files.storage import is_url
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES
from mintdim_beam.core.tokenizer.encode_batch import share_entries
from mintdim_beam.core.tokenizer.fast_bpe import ENGINE_TIKTOKEN, ENGINE_TOKENIZERS
from mintdim_beam.core.tokenizer.native_bpe import ENGINE_NATIVE
from mintdim_beam.core.tokenizer.tokenizers import read_tokenizer_file, tiktoken_definition

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_HEADER = struct.Struct("<Q")
PIPE_BYTES = 1 << 20  # Linux's default limit for an unprivileged process

# Lines a helper's head start reads at most (it keeps its share of them encoded until
# asked): at 4096 samples a batch, 16 batches, more than Beam's import and the
# pipeline's catching up last.
HEAD_START_SAMPLES = 1 << 16


def write_message(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_exactly(stream, size: int) -> bytes:
    """`size` bytes, also from an unbuffered stream (which may return fewer per read)."""
    data = stream.read(size)
    if len(data) == size or not data:
        return data
    pieces, got = [data], len(data)
    while got < size:
        piece = stream.read(size - got)
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)


def _read_frame(stream) -> bytes | None:
    """One message's pickled bytes; None at the end of the stream (or a cut message)."""
    header = _read_exactly(stream, _HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = _read_exactly(stream, size)
    return data if len(data) == size else None


def read_message(stream):
    data = _read_frame(stream)
    if data is None:
        raise EOFError
    return pickle.loads(data)


class EncoderProcessError(RuntimeError):
    """The encoder process stopped or failed; carries its traceback text, and its exit
    code (`returncode`, negative for a signal) when it died."""

    returncode: int | None = None


class EncoderProcess:
    """Client side: `submit(ds, texts)` queues a batch, `collect()` returns the oldest
    submitted batch's (lengths, tokens, unks), in submission order. `head_start_samples`
    counts the samples answered from the child's head start."""

    def __init__(self, plans: dict | None, threads: int = 0, tokenizer_files: dict | None = None):
        """`threads`: native encoding threads in the child; 0 keeps the tokenizer's
        default (every core). `tokenizer_files`: from `tokenizer_files_of(plans)`, when
        several helpers start at once (read here otherwise). `plans=None`: the child
        starts and waits for them (`send_plans`), loading what `preload` names meanwhile."""
        package_root = os.path.dirname(_PACKAGE_DIR)  # the directory holding mintdim_beam/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        if threads:
            env["RAYON_NUM_THREADS"] = str(threads)  # Hugging Face tokenizers' thread pool
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mintdim_beam.runtime.encoder_process", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        for pipe in (self._proc.stdin, self._proc.stdout):
            _widen_pipe(pipe)
        self._requests: queue.Queue = queue.Queue()
        self._outstanding = 0
        self._head_start_sent = False
        self._early: collections.deque = collections.deque()  # replies read before the head start's end
        self.head_start_samples = 0
        self._write_errors: list = []
        # The writer thread and the finalizer hold the queue and the process, never
        # `self`: an abandoned client (a runner that drops a failed DoFn without
        # teardown) is collected, and its child then sees end of input and exits.
        self._writer = threading.Thread(target=_feed, name="mintdim-encoder-feed", daemon=True,
                                        args=(self._requests, self._proc, self._write_errors))
        self._writer.start()
        # Replies are read as they come, so the child never waits for us to take one
        # before it goes on (with the next request, or with its head start).
        self._replies: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=_drain, name="mintdim-encoder-drain",
                                        daemon=True, args=(self._proc, self._replies))
        self._reader.start()
        if plans is not None:
            self.send_plans(plans, tokenizer_files or tokenizer_files_of(plans))
        self._stop = weakref.finalize(self, stop_child, self._requests, self._proc,
                                      self._writer, self._reader)

    def preload(self, tokenizer_files: dict, fast_keys: frozenset) -> None:
        """Before the plans: the child loads `tokenizer_files`, and builds the fast engine
        of those in `fast_keys` (`preload_tokenizers`)."""
        self._requests.put(("tokenizers", tokenizer_files, fast_keys))

    def send_plans(self, plans: dict, tokenizer_files: dict) -> None:
        """The datasets to encode, once per child, before any request: a child started
        without them (`spawn_helpers`) waits for them."""
        self._requests.put(("plans", plans, tokenizer_files))

    def head_start(self, byte_range, batch_size: int, share: int, shares: int,
                   max_samples: int = HEAD_START_SAMPLES,
                   max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        """Have the child encode share `share` of `shares` of each batch of `batch_size`
        samples at the start of `byte_range` (a `source.ByteRange`), as the Tokenize
        DoFn will split them, while every request is one it encoded ahead. Lines over
        `max_line_bytes` are left out as the pipeline's reader leaves them out."""
        self._requests.put(("head_start", byte_range, batch_size, share, shares, max_samples,
                            max_line_bytes))
        self._head_start_sent = True

    def head_start_done(self) -> int:
        """Wait for the head start to end; the number of samples it encoded ahead.
        Replies that come first are kept for `collect`."""
        if not self._head_start_sent:
            return 0
        while True:
            status, payload, ahead = self._reply()
            if status == "head_start":
                self._head_start_sent = False
                return payload
            self._early.append((status, payload, ahead))

    def submit(self, ds: int, texts: list) -> None:
        self._outstanding += 1
        self._requests.put(("encode", ds, texts))

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def collect(self):
        status, payload, ahead = self._next_reply()
        self._outstanding -= 1
        if status == "error":
            exc, text = payload
            if isinstance(exc, BaseException):
                exc.add_note(f"raised in the encoder process:\n{text}")
                raise exc
            raise EncoderProcessError(text)
        if ahead:
            self.head_start_samples += len(payload[0])
        return payload

    def _next_reply(self):
        """The oldest batch's reply; the head start's end may come before or among them."""
        if self._early:
            return self._early.popleft()
        while True:
            reply = self._reply()
            if reply[0] != "head_start":
                return reply
            self._head_start_sent = False

    def _reply(self):
        data = self._replies.get()
        if data is not None:
            return pickle.loads(data)
        self._replies.put(None)  # the end stays the end for later calls
        code = self._proc.wait()
        error = EncoderProcessError(
            f"the encoder process exited with code {code} before answering "
            f"(killed for memory?); see its output above")
        error.returncode = code
        raise error from (self._write_errors[0] if self._write_errors else None)

    @property
    def closed(self) -> bool:
        return not self._stop.alive

    def close(self, kill: bool = False) -> None:
        """Stop the child: end of input makes it exit; unread replies are dropped.
        `kill`: at once, for a child whose work nobody wants (a launch that failed
        while the child still loaded a large tokenizer would otherwise wait for it)."""
        if kill and self._stop.alive:
            self._proc.kill()
        self._stop()
        self._outstanding = 0


def tokenizer_files_of(plans: dict) -> dict:
    """{(kind, path, definition): (file bytes, path as given)}. The tokenizer travels as
    bytes: the child may not see the parent's filesystems (memory://, credentials, a
    working directory set in-process). `definition`: how a tiktoken file is read."""
    return dataset_tokenizer_files(plan.dataset for plan in plans.values())


def dataset_tokenizer_files(datasets, local_only: bool = False) -> dict:
    """`tokenizer_files_of` for datasets (`local_only`: not the files behind a URL)."""
    files = {}
    for dataset in datasets:
        key = dataset_tokenizer_key(dataset)
        if key not in files and not (local_only and is_url(key[1])):
            shown = dataset.tokenizer_given
            files[key] = (read_tokenizer_file(key[1], shown), shown)
    return files


def tokenizer_key(plan) -> tuple:
    return dataset_tokenizer_key(plan.dataset)


def dataset_tokenizer_key(dataset) -> tuple:
    return (dataset.tokenizer_kind, dataset.tokenizer_path,
            tiktoken_definition(dataset.tokenizer_options))


def fast_engine_keys(datasets) -> frozenset:
    """The tokenizer keys a dataset may encode with the fast engine: all but those only
    set to `engine: tokenizers`, whose engine a helper need not build."""
    return frozenset(dataset_tokenizer_key(d) for d in datasets
                     if d.tokenizer_options.engine != ENGINE_TOKENIZERS)


def helper_threads(count: int) -> int:
    """Native threads per helper: several helpers share the cores, one thread each."""
    return 1 if count > 1 else 0


def start_helpers(plans: dict, count: int, threads: int,
                  files: dict | None = None) -> list[EncoderProcess]:
    """`count` helpers of `threads` native threads each (see `helper_threads`)."""
    if files is None:
        files = tokenizer_files_of(plans) if count else {}
    return [EncoderProcess(plans, threads, files) for _ in range(count)]


def _feed(requests: queue.Queue, proc: subprocess.Popen, errors: list) -> None:
    try:
        while True:
            message = requests.get()
            if message is None:
                break
            write_message(proc.stdin, message)
    except BaseException as exc:  # the child died: collect() reports it
        errors.append(exc)
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _widen_pipe(pipe) -> None:
    """Make room in the pipe for a whole request or reply (about 1 MB per share of a
    4096-sample batch), so its writer goes on at once and its reader takes it in one
    read, not in 16 of the default 64 KiB. Linux only; elsewhere pipes stay as they are."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # no such call, or over the system limit
        pass


def _drain(proc: subprocess.Popen, replies: queue.Queue) -> None:
    """Move each reply's bytes from the child's stdout to `replies`; None at the end."""
    try:
        while (data := _read_frame(proc.stdout)) is not None:
            replies.put(data)
    except (OSError, ValueError):  # closed under us
        pass
    finally:
        replies.put(None)


def stop_child(requests: queue.Queue, proc: subprocess.Popen, writer: threading.Thread,
                reader: threading.Thread) -> None:
    """End of input makes the child exit; its replies are drained meanwhile. As the
    finalizer of an abandoned client this may run on the writer or drain thread itself
    (the collector runs where it is triggered): that thread is not joined, and when it is
    the drain thread nobody reads the child's output any more, so it is closed first."""
    here = threading.current_thread()
    requests.put(None)
    try:
        if here is reader:
            _close(proc.stdout)  # a reply being written then fails and the child exits
        if here is not writer:
            writer.join(timeout=10)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if here is not reader:
            reader.join(timeout=10)
    finally:
        _close(proc.stdout)


def _close(stream) -> None:
    try:
        stream.close()
    except (OSError, RuntimeError, ValueError):  # gone, or in use by this very thread
        pass


def serve(requests, replies, threads: int, waiting=None) -> None:
    """Answer requests in order; `waiting(requests)` (default `request_waiting`) says
    whether one has arrived while a head start runs."""
    from mintdim_beam.core.tokenizer.encode_batch import BatchEncoder
    from mintdim_beam.core.tokenizer.tokenizers import SentencePieceTokenizer, tokenizer_from_bytes

    if threads:
        SentencePieceTokenizer.threads = threads

    waiting = waiting or request_waiting
    encoders, plans, setup_error, loaded = {}, {}, None, {}
    head = None  # the head start's shares still to encode, while it lasts
    ahead: list = []  # (dataset, texts, encoded) from the head start, not yet asked for
    encoded_ahead = 0

    def end_head_start():
        nonlocal head
        head.close()  # its file
        head = None
        write_message(replies, ("head_start", encoded_ahead, False))

    try:
        while True:
            if head is not None and not waiting(requests):
                done = next(head, None)  # one share, then look for requests again
                if done is None:
                    end_head_start()
                else:
                    ahead.append(done)
                    encoded_ahead += len(done[1])
                continue
            try:
                message = read_message(requests)
            except EOFError:
                return
            if message[0] == "head_start":
                head = encode_head_start(encoders, plans, *message[1:])
                continue
            if message[0] == "tokenizers":  # before the plans: `spawn_helpers`
                loaded = preload_tokenizers(*message[1:])
                continue
            if message[0] == "plans":
                _, plans, tokenizer_files = message
                try:
                    tokenizers = {key: loaded[key][1] if loaded.get(key, (None,))[0] == data
                                  else tokenizer_from_bytes(key[0], data, shown, key[2])
                                  for key, (data, shown) in tokenizer_files.items()}
                    encoders = {ds: BatchEncoder(p, tokenizers[tokenizer_key(p)])
                                for ds, p in plans.items()}
                except Exception as exc:  # noqa: BLE001 - reported with the first batch
                    setup_error = _error_reply(exc)
                continue
            _, ds, texts = message
            reply = setup_error or answered_ahead(ahead, ds, texts)
            if head is not None and texts:  # the pipeline is here: the head start ends
                end_head_start()
                if reply is None:  # in order, it asked for all of them; else it never will
                    ahead.clear()
            if reply is None:
                # A batch allocates one list per segment and nothing cyclic: the
                # collector's passes over them (3 to 4% of a helper's time) are pure cost.
                gc.disable()
                try:
                    reply = _encode_reply(encoders[ds], texts)
                finally:
                    gc.enable()
            write_message(replies, reply)
    except BrokenPipeError:  # the client stopped listening: nothing left to do
        return


def preload_tokenizers(tokenizer_files: dict, fast_keys: frozenset = frozenset()) -> dict:
    """{key: (file bytes, tokenizer)} of the files that load (a failure is met again,
    and reported, when the plans name the file); for the keys in `fast_keys` (a dataset
    may use a faster engine: `fast_engine_keys`) the Hugging Face tokenizer's native
    engine is built too, or where it cannot be, tiktoken's (the plans decide which is
    used). The
    plans bring the file as read after planning: a preloaded tokenizer serves only when
    its bytes are those (the file was not rewritten in between)."""
    from mintdim_beam.core.tokenizer.tokenizers import tokenizer_from_bytes

    loaded = {}
    for key, (data, shown) in tokenizer_files.items():
        try:
            tokenizer = tokenizer_from_bytes(key[0], data, shown, key[2])
        except Exception:  # noqa: BLE001, S112 - loaded again with the plans, and reported
            continue
        loaded[key] = (data, tokenizer)
        if key in fast_keys and getattr(tokenizer, "engine", None) == ENGINE_TOKENIZERS:
            for engine in (ENGINE_NATIVE, ENGINE_TIKTOKEN):  # `engine_choice`'s order
                try:
                    if tokenizer.with_engine(engine).engine == engine:  # built and kept
                        break
                except Exception:  # noqa: BLE001, S110 - not exact here: the plans say so
                    pass
    return loaded


def _encode_reply(encoder, texts):
    try:
        return ("ok", encoder.encode(texts), False)
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
        return _error_reply(exc)


def request_waiting(requests) -> bool:
    """True when the caller has sent something (or closed the pipe): the head start
    yields to it. `requests` is unbuffered, so select sees every unread byte."""
    return bool(select.select([requests], [], [], 0)[0])


def encode_head_start(encoders, plans, byte_range, batch_size, share, shares, max_samples,
                max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Share `share` of `shares` of each batch at the start of `byte_range`, rendered and
    encoded as the pipeline would, one (dataset, texts, encoded) at a time, until
    `max_samples` lines are read. Only this share's lines are rendered. Bad lines are
    left out as the pipeline leaves them out (it reports them itself); anything
    unexpected (a file this process cannot open, a dataset it has no encoder for) only
    ends the head start."""
    from mintdim_beam.core.inputs.input_files import open_range
    from mintdim_beam.core.inputs.source import RangeBatches
    from mintdim_beam.core.render.render_batch import layout_for, render_entries

    ds, read = byte_range.dataset, 0
    try:
        encoder, layout = encoders[ds], layout_for(plans[ds])
        # open_range raises SourceChangedError for a file changed since planning: the
        # head start ends, and the build's own read of the range reports it.
        with open_range(byte_range) as handle:
            for chunk_key, entries in RangeBatches(handle, byte_range, batch_size,
                                                   max_line_bytes):
                batch, _ = render_entries(layout, chunk_key, share_entries(entries, share, shares))
                if batch is not None:
                    gc.disable()
                    try:
                        encoded = encoder.encode(batch["texts"])
                    finally:
                        gc.enable()
                    yield ds, batch["texts"], encoded
                read += len(entries)
                if read >= max_samples:
                    return
    except Exception:  # noqa: BLE001, S110 - no head start; the build itself reports it
        return


def answered_ahead(ahead: list, ds: int, texts: list):
    """The reply for `texts` when the head start already encoded exactly these."""
    for i, (done_ds, done_texts, encoded) in enumerate(ahead):
        if done_ds == ds and len(done_texts) == len(texts) and done_texts == texts:
            del ahead[i]
            return ("ok", encoded, True)
    return None


def _error_reply(exc: Exception):
    """The exception itself when it survives a pickle round trip, and its traceback."""
    text = traceback.format_exc()
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001
        exc = None
    return ("error", (exc, text), False)


def main() -> None:
    # Ctrl-C reaches the whole foreground process group: the build that owns this
    # helper handles it and closes our input, which ends us. No traceback of our own.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Requests, replies and the head start's rendering allocate batch-sized lists: young
    # collections every few allocations walked them again and again (`frozen_heap`).
    from mintdim_beam.runtime.frozen_heap import YOUNG_THRESHOLD

    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    # Replies own the real stdout; anything a library prints goes to stderr instead.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # Unbuffered requests: the head start polls them with select (`request_waiting`).
    serve(sys.stdin.buffer.raw, replies, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    # Every reply is written and flushed, and nothing else needs cleaning up: skip the
    # interpreter's teardown of numpy and the tokenizer, which the build waits for when
    # it stops its helpers (0.1 s at the end of every build).
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
