"""Shared fixtures: tiny real tokenizers trained in seconds, and a helper that runs a
real build in a working directory (paths are recorded as given, so tests chdir)."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# The longest test files, longest first (`make test`'s durations): `--dist loadfile`
# hands files out in collection order, so a long file collected last keeps one worker
# busy while the other idles (xdist's own reorder, by test count, put them last).
LONG_FILES = (
    "test_golden.py", "test_engines_published.py", "test_graph_size.py", "test_docs.py",
    "test_input_identity.py", "test_fast_engine.py", "test_pack_reader_remote.py",
    "test_sp_native.py", "test_parquet_inputs.py", "test_benchmarks.py",
    "test_native_engine.py", "test_ownership.py", "test_chat_pipeline.py", "test_compose.py",
    "test_remote.py", "test_pack.py", "test_bad_rows.py", "test_scale.py",
    "test_cluster_verify.py", "test_pipeline.py", "test_compressed_inputs.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable


GOLDEN = Path(__file__).parent / "golden"
IN_MEMORY = ["--runner=FnApiRunner"]
BUNDLE_RETRYING = ["--runner=BundleBasedDirectRunner"]  # retries a failed bundle up to 4 times
MULTI_PROCESS = ["--runner=FnApiRunner", "--direct_running_mode=multi_processing",
                 "--direct_num_workers=2"]

WORDS = ("the model reads every sample and writes shards of fixed width for training "
         "data tokens units padding overflow template field value question answer code "
         "python function return list dict string number hello world").split()


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def byte_level_bpe(work: Path, texts, specials, vocab: int, config: dict) -> Path:
    """A real byte-level BPE without UNK (like Llama 3 or Qwen) trained on `texts`,
    saved as `work/tokenizer.json` beside a `tokenizer_config.json` holding `config`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(list(texts), trainer)
    tokenizer.save(str(work / "tokenizer.json"))
    (work / "tokenizer_config.json").write_text(json.dumps(config))
    return work


CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def chatml_bpe(work: Path, seed: int, vocab: int, **config) -> Path:
    """A byte-level BPE with ChatML's tokens, trained on 2,000 sentences; eos
    `<|im_end|>` and pad `<|endoftext|>` in its config (plus `config`)."""
    rng = random.Random(seed)
    return byte_level_bpe(work, [sentence(rng, 5, 20) for _ in range(2000)], CHATML_SPECIALS,
                          vocab, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", **config})


def write_jsonl(path: Path, rows, newline="\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + newline)
    return path


@pytest.fixture(scope="session")
def tokenizers_dir(tmp_path_factory) -> Path:
    """A SentencePiece unigram model and HF BPE / WordPiece / Unigram tokenizer.json files."""
    import sentencepiece as spm
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("tokenizers")
    rng = random.Random(7)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(sentence(rng, 3, 30) for _ in range(3000)) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(root / "sp"),
                                   vocab_size=120, hard_vocab_limit=False, pad_id=3, num_threads=1,
                                   character_coverage=1.0, minloglevel=2)
    specs = {
        "bpe": (models.BPE(unk_token="[UNK]"), trainers.BpeTrainer(
            vocab_size=300, special_tokens=["[UNK]", "[PAD]"])),
        "wordpiece": (models.WordPiece(unk_token="[UNK]"), trainers.WordPieceTrainer(
            vocab_size=300, special_tokens=["[UNK]", "[PAD]"])),
        "unigram": (models.Unigram(), trainers.UnigramTrainer(
            vocab_size=200, special_tokens=["[UNK]", "[PAD]"], unk_token="[UNK]")),
    }
    for name, (model, trainer) in specs.items():
        tok = Tokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train([str(corpus)], trainer)
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
        tok.save(str(root / f"hf_{name}.json"))
    return root


def run_build(workdir: Path, *, files, fields, templates, tokenizer, tokenizer_files, sizes,
              build_batch, output, samples_per_shard, options=IN_MEMORY,
              on_overflow="abort", on_template_unk="abort"):
    """Run a real build with `workdir` as the working directory."""
    from mintdim_beam import pipeline

    previous = os.getcwd()
    os.chdir(workdir)
    try:
        job = pipeline("unit-build").source.jsonl(files=files, fields=fields, templates=templates)
        job = getattr(job.tokenizer, tokenizer)(files=tokenizer_files)
        job = job.units(sizes=sizes, build_batch=build_batch).output.dir(
            output, samples_per_shard=samples_per_shard)
        return job.run(on_overflow=on_overflow, on_template_unk=on_template_unk,
                       pipeline_options=list(options))
    finally:
        os.chdir(previous)


MANIFEST_REFERENCE_KEYS = ["pipeline", "mintdim_version", "tokenizer", "token_storage",
                           "sequence_template", "length_field_metadata", "units", "source",
                           "output"]


def reference_manifest(doc: dict) -> dict:
    """The manifest's reference keys only: ours (version, inputs, ...) all come after
    the reference's last key, `output`, and differ between copies of a build."""
    keys = list(doc)
    last = keys.index("output") if "output" in keys else len(keys) - 1
    return {k: doc[k] for k in keys[:last + 1]}


def read_tree(root: Path, drop_manifest_extras: bool = True) -> dict:
    """Every file below `root` as bytes; the manifest without our own extra keys, and
    without our part tables (`checksums/`: how this run's workers cut the index files,
    which varies with the range size; the files they describe do not)."""
    tree = {}
    for path in sorted(root.rglob("*")):
        if drop_manifest_extras and path.relative_to(root).parts[0] == "checksums":
            continue
        if path.is_file():
            data = path.read_bytes()
            if drop_manifest_extras and path.name == "manifest.json":
                doc = reference_manifest(json.loads(data))
                data = json.dumps(doc, ensure_ascii=False, indent=2).encode()
            tree[str(path.relative_to(root))] = data
    return tree


def shard_records(out: Path):
    """(length_field.json, [(sample_index row, token ids per segment)]) of a build, in
    sample_index order, read straight from the shards (magic and padding checked)."""
    layout = json.loads((out / "length_field.json").read_text())
    n = len(layout["length_fields"])
    shards, records = {}, []
    for line in (out / "sample_index.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["shard_path"] not in shards:
            data = np.fromfile(out / row["shard_path"], dtype=layout["token_dtype"])
            shards[row["shard_path"]] = iter(data.reshape(-1, 1 + n + row["unit_size"]))
        record = next(shards[row["shard_path"]])
        assert record[0] == layout["magic"]
        lengths = record[1:1 + n].astype(int)
        ends = np.cumsum(lengths)
        payload = record[1 + n:].astype(int).tolist()
        assert all(t == layout["pad_token_id"] for t in payload[ends[-1]:])
        records.append((row, [payload[e - k:e] for k, e in zip(lengths, ends)]))
    return layout, records


def content_tree(root: Path) -> dict:
    """Like read_tree but without notices whose prose is ours (EMPTY_UNIT.md)."""
    return {k: v for k, v in read_tree(root).items() if not k.endswith("EMPTY_UNIT.md")}


# Files a build of ours adds to mintdim 0.2.1's (FORMAT.md: additions, never changes).
OUR_FILES = ("lossy_index.jsonl",)


def mintdim_tree(root: Path) -> dict:
    """The files mintdim 0.2.1 writes too, as `content_tree` reads them: what a build
    of ours is compared with the reference on; our additions must exist."""
    tree = content_tree(root)
    assert all(name in tree for name in OUR_FILES), sorted(tree)
    return {k: v for k, v in tree.items() if k not in OUR_FILES}


def demo_model_config(folder: Path, source: dict, output: str) -> Path:
    """`folder/build.json`: a unit-build of `source` with the bundled demo tokenizer, one
    unit of 64 tokens, batches of 8 and shards of 10, written to `output`."""
    config = {"source": source,
              "tokenizer": {"type": "sentencepiece",
                            "files": [str(REPO / "examples/tokenizer/demo.model")]},
              "units": {"sizes": [[64]], "build_batch": [8]},
              "output": {"dir": output, "samples_per_shard": [10]}}
    path = folder / "build.json"
    path.write_text(json.dumps(config))
    return path


def cli(cwd: Path, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`mintdim-beam ARGS` in `cwd`, the venv's console scripts first on PATH."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run([str(bin_dir / "mintdim-beam"), *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def portable_service(state: Path):
    """Beam's Python job service + an EXTERNAL worker pool on free loopback ports,
    started and stopped with deploy/local/portable.sh (what the docs tell users to run),
    its state in `state`: yields the launcher flags."""
    env = dict(os.environ, VENV=sys.prefix, MINTDIM_PORTABLE_STATE=str(state))
    script = str(REPO / "deploy/local/portable.sh")
    subprocess.run([script, "start", str(free_port()), str(free_port())], env=env, check=True,
                   capture_output=True, timeout=120)
    try:
        yield subprocess.run([script, "flags"], env=env, check=True, capture_output=True,
                             text=True).stdout.split()
    finally:
        subprocess.run([script, "stop"], env=env, timeout=60)


@pytest.fixture(scope="session")
def portable_flags(tmp_path_factory):
    with portable_service(tmp_path_factory.mktemp("portable")) as flags:
        yield flags


@contextlib.contextmanager
def isolated_job_service(hidden: Path):
    """Beam's job service and an EXTERNAL worker pool whose disk is its own where the
    launcher keeps `hidden`: the pool runs in a mount namespace of its own with a tmpfs
    over `hidden` and its TMPDIR inside it (the repository and the venv, wherever a
    clone lives, stay visible). Yields the launcher flags."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for workers with a disk of their own")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    job_port, pool_port = free_port(), free_port()
    pool = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs tmpfs {hidden} && mkdir {hidden}/tmp && TMPDIR={hidden}/tmp exec "
         f"{sys.executable} -m apache_beam.runners.worker.worker_pool_main "
         f"--service_port {pool_port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jobs = subprocess.Popen([sys.executable, "-m",
                             "apache_beam.runners.portability.local_job_service_main",
                             "--port", str(job_port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(pool_port, pool)
        wait_port(job_port, jobs)
        yield ["--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}",
               "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}"]
    finally:
        for proc in (jobs, pool):
            proc.terminate()
            proc.wait(timeout=30)


def encoder_helpers_of(pid: int) -> list[int]:
    """Live helper encoder processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"mintdim_beam.runtime.encoder_process" in cmdline and int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def copy_to_memory_fs(local_root: Path, url: str) -> None:
    """Every file under `local_root` into fsspec's in-process memory filesystem at `url`."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for path in local_root.rglob("*"):
        if path.is_file():
            fs.pipe(f"{url}/{path.relative_to(local_root).as_posix()}", path.read_bytes())


def _golden_inputs(tmp_path_factory, name: str) -> Path:
    root = tmp_path_factory.mktemp(name)
    shutil.copytree(GOLDEN, root / "golden", ignore=shutil.ignore_patterns("expected"))
    return root / "golden"


@pytest.fixture(scope="module")
def golden_copy(tmp_path_factory) -> Path:
    """The golden cases' inputs (not their expected outputs) in a scratch dir, one per
    test module: builds write their outputs next to the inputs."""
    return _golden_inputs(tmp_path_factory, "golden")


def run_golden_case(golden_copy: Path, name: str, options, output=None):
    """Build golden case `name` as its case.json says, in its copy under `golden_copy`
    (the working directory), with `options`; into `output` instead of its own if given."""
    case = json.loads((GOLDEN / name / "case.json").read_text())
    return run_build(golden_copy / name, files=case["files"], fields=case["fields"],
                     templates=case["templates"], tokenizer=case["tokenizer"]["type"],
                     tokenizer_files=case["tokenizer"]["files"], sizes=case["sizes"],
                     build_batch=case["build_batch"],
                     output=case["output"] if output is None else output,
                     samples_per_shard=case["samples_per_shard"], options=options,
                     on_overflow=case["on_overflow"], on_template_unk=case["on_template_unk"])


def piece_kind(piece) -> str:
    """What ShardWrite joined into a shard: "block" (a range of a batch's staged block),
    "overflow block" (a range of the block of records built after the global step) or
    "bytes"."""
    if isinstance(piece, bytes):
        return "bytes"
    return "overflow block" if piece[0].endswith(".overflow.bin") else "block"


@contextlib.contextmanager
def pieces_spy():
    """The kinds of the pieces ShardWrite joins in this process while inside."""
    from mintdim_beam.core.files import storage

    seen, real = [], storage.write_pieces_atomic

    def spy(path, pieces, output_dir):
        if path.endswith(".bin"):  # a shard (Finalize joins the index files so too)
            seen.extend(piece_kind(piece) for piece in pieces)
        return real(path, pieces, output_dir)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(storage, "write_pieces_atomic", spy)
        yield seen


GOLDEN_IN_MEMORY = IN_MEMORY + ["--input_range_bytes=1024"]


@pytest.fixture(scope="session")
def golden_in_memory(tmp_path_factory):
    """`build(name)`: golden case `name` built once a session on GOLDEN_IN_MEMORY, the
    build test_golden compares with mintdim 0.2.1's bytes and test_stage with what
    ShardWrite joined. Gives (the case's working directory, the build's result or the
    MintDimError it raised, the kinds of the pieces joined)."""
    from mintdim_beam.core.errors import MintDimError

    root = _golden_inputs(tmp_path_factory, "golden_in_memory")
    built = {}

    def build(name: str):
        if name not in built:
            with pieces_spy() as kinds:
                try:
                    outcome = run_golden_case(root, name, GOLDEN_IN_MEMORY)
                except MintDimError as exc:
                    outcome = exc
            built[name] = (root / name, outcome, kinds)
        return built[name]

    return build


def build_qa_units(work: Path, tokenizers_dir: Path, *, samples: int, seed: int,
                   long_every: int, per_shard: int) -> Path:
    """A small templated unit-build for reader tests: `samples` QA rows, every
    `long_every`-th answer too long for the largest unit (16/32/64), overflow `skip` (so
    sample ids have gaps and differ from record ordinals), `per_shard` records a shard;
    returns the output directory."""
    rng = random.Random(seed)
    rows = [{"q": sentence(rng, 1, 6),
             "a": sentence(rng, 1, 14) if i % long_every else sentence(rng, 20, 90)}
            for i in range(samples)]
    write_jsonl(work / "data.jsonl", rows)
    (work / "tok").mkdir()
    shutil.copy(tokenizers_dir / "sp.model", work / "tok/sp.model")
    run_build(work, files=["data.jsonl"], fields=[["q", "a"]], templates=["Q: {q}\nA: {a}"],
              tokenizer="sentencepiece", tokenizer_files=["tok/sp.model"], sizes=[[16, 32, 64]],
              build_batch=[16], output="out", samples_per_shard=[per_shard], on_overflow="skip",
              on_template_unk="continue")
    return work / "out"


def without_checksums(out: Path) -> Path:
    """`out` with the manifest's `checksums` taken out (rewritten canonically): what the
    structural checks of `verify` find in damaged copies, alone. With the checksums each
    damaged file would also be named as changed (tests/test_checksums.py)."""
    from mintdim_beam.core.formats import mintdim as fmt

    path = out / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.pop("checksums", None)
    path.write_text(fmt.json_document(manifest), encoding="utf-8")
    return out


# --- storage emulators (real protocol peers on loopback) ------------------------------

EMULATOR_BIN = Path(sys.executable).parent  # the venv's console scripts


def wait_port(port: int, proc, timeout: float = 60.0, host: str = "127.0.0.1"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            socket.create_connection((host, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"port {port} did not open")


def serve_emulator(cmd, port, env_updates, host: str = "127.0.0.1", cwd=None):
    import fsspec

    # The servers log every request: never a pipe nobody reads (it fills and they stall).
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    wait_port(port, proc, host=host)
    saved = {k: os.environ.get(k) for k in env_updates}
    os.environ.update(env_updates)
    # fsspec reads FSSPEC_* settings at import; this process imported it already.
    fsspec.config.set_conf_env(fsspec.config.conf)
    return proc, saved


def stop_emulator(proc, saved):
    import fsspec

    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    for protocol in ("gcs", "s3"):
        fsspec.config.conf.pop(protocol, None)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    fsspec.AbstractFileSystem.clear_instance_cache()


@contextlib.contextmanager
def gcs_emulator(host: str = "127.0.0.1", prefix: tuple = ()):
    """The gcp-storage-emulator on a free port of `host` (loopback unless `prefix`, a
    command it runs under, puts it on a host of its own), this process (and any it
    starts) pointed at it, with bucket gs://mintdim-test: yields (root URL, filesystem)."""
    import fsspec

    port = free_port()
    proc, saved = serve_emulator([*prefix, str(EMULATOR_BIN / "gcp-storage-emulator"), "start",
                                  "--host", host, "--port", str(port), "--in-memory"], port, {
        "STORAGE_EMULATOR_HOST": f"http://{host}:{port}",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",  # else a gRPC bucket probe stalls 60 s
        "FSSPEC_GCS_TOKEN": "anon", "FSSPEC_GCS_PROJECT": "test"}, host=host)
    fsspec.AbstractFileSystem.clear_instance_cache()
    fs = fsspec.filesystem("gs")
    fs.mkdir("mintdim-test")
    try:
        yield "gs://mintdim-test", fs
    finally:
        stop_emulator(proc, saved)


@contextlib.contextmanager
def counted_store(kind: str, data_dir: Path | None = None):
    """The GCS ("gcs") or S3 ("s3") emulator behind `tools.counting_proxy`, this process
    (and any it starts) pointed at the proxy: yields (root URL, filesystem, proxy),
    the proxy counting every byte the clients send and receive, object by object.
    `data_dir` (GCS only): the emulator serves the bucket `populate_gcs` wrote there."""
    import fsspec

    sys.path.insert(0, str(REPO / "tools"))
    from counting_proxy import CountingProxy

    port = free_port()
    if kind == "gcs":
        cmd = [str(EMULATOR_BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1",
               "--port", str(port), *([] if data_dir else ["--in-memory"])]
        env = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", "FSSPEC_GCS_TOKEN": "anon",
               "FSSPEC_GCS_PROJECT": "test"}
    else:
        cmd = [str(EMULATOR_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}
    with CountingProxy(port) as proxy:
        env["STORAGE_EMULATOR_HOST" if kind == "gcs" else "FSSPEC_S3_ENDPOINT_URL"] = proxy.url
        proc, saved = serve_emulator(cmd, port, env, cwd=data_dir)
        fsspec.AbstractFileSystem.clear_instance_cache()
        fs = fsspec.filesystem("gs" if kind == "gcs" else "s3")
        if data_dir is None:
            fs.mkdir("mintdim-test")
        try:
            yield ("gs" if kind == "gcs" else "s3") + "://mintdim-test", fs, proxy
        finally:
            stop_emulator(proc, saved)


def populate_gcs(data_dir: Path, objects) -> None:
    """Write bucket mintdim-test holding `objects` ((name, bytes) pairs) into `data_dir`
    the way the GCS emulator stores them, through its own storage code, saving its
    metadata once: uploading 100,000 objects one by one would rewrite it each time."""
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.handlers import objects as handlers
    from gcp_storage_emulator.storage import Storage

    store = Storage(use_memory_fs=False, data_dir=str(data_dir))
    save = store._write_config_to_file
    store._write_config_to_file = lambda: None
    buckets.create_bucket("mintdim-test", store)
    for name, data in objects:
        obj = handlers._make_object_resource("http://127.0.0.1", "mintdim-test", name,
                                             "application/octet-stream", str(len(data)))
        store.create_file("mintdim-test", name, data, handlers._checksums(data, obj))
    save()


def record_cat_ranges(url: str, monkeypatch) -> list:
    """The byte ranges every `cat_ranges` call on `url`'s filesystem asks for, one list of
    (path, start, end) a call, appended as they happen: what a remote reader fetches.
    The instance is the one the readers use (fsspec caches instances)."""
    from mintdim_beam.core.files import storage

    fs = storage.filesystem(url)
    calls: list = []
    real_cat_ranges = fs.cat_ranges

    def spy(paths, starts, ends, **kw):
        calls.append(list(zip(paths, starts, ends)))
        return real_cat_ranges(paths, starts, ends, **kw)

    monkeypatch.setattr(fs, "cat_ranges", spy)
    return calls


def chat_pack_inputs(tmp_path_factory, name: str) -> Path:
    """A fresh folder holding the bundled chat example (`chat/`: tokenizer.json and its
    config) and `chat.jsonl`, what `pack_build_chat` builds from."""
    work = tmp_path_factory.mktemp(name)
    shutil.copytree(REPO / "examples/chat", work / "chat")
    shutil.copy(REPO / "examples/data/chat.jsonl", work / "chat.jsonl")
    return work


def pack_build_chat(work: Path, out: str, **pack) -> None:
    """The bundled chat pairs pack-built with their byte-level BPE into `out` (a local
    path or a bucket URL), no EOD, seed 0, the `pack` options given."""
    from mintdim_beam import pipeline

    (pipeline("pack-build")
     .source.jsonl(files=[str(work / "chat.jsonl")], fields=[["prompt", "response"]],
                   templates=["{prompt}\n\n{response}"])
     .tokenizer.hf_json(files=[str(work / "chat/tokenizer.json")],
                        config=str(work / "chat/tokenizer_config.json"))
     .pack(eod=None, seed=0, **pack)
     .output.dir(out)
     .run())
