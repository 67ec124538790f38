"""What the pack benchmark (issue 18) times, each run in its own process, and the
untimed helpers around it:

  bound      json parse of every line + the template rendered to one text per document
             + `Tokenizer.encode_batch` of the texts (byte-level BPE,
             add_special_tokens=False, encode_special_tokens=True as the pack-build
             encodes documents), BATCH documents a call, `.ids` of each; one process
  ours       `mintdim-beam pack CONFIG` (console_main in this process, as run.py runs
             `mintdim-beam build`), or with the Beam flags given
  datatrove  datatrove's LocalPipelineExecutor: JsonlReader -> DocumentTokenizer
             (TASKS tasks, TASKS workers), then DocumentTokenizerMerger (1 task), on the
             pre-rendered text files; run with a Python that has datatrove 0.10.1
  dolma      `dolma tokens` (dolma 1.2.1's CLI, its console script run by
             run_pack.py, not through this file): the same pre-rendered files, EOS = the
             EOD id after each document, no BOS, encode_special_tokens as ours
  megatron   Megatron-LM's `tools/preprocess_data.py` (a checkout the user made at
             MEGATRON_TAG, run unmodified by run_pack.py with the Python of its venv):
             one pre-rendered file, HuggingFaceTokenizer on the same tokenizer.json,
             --append-eod, WORKERS encoder processes

Untimed (imported by run_pack.py): the tokenizer training, the pre-rendered JSONL for
datatrove, dolma and Megatron-LM, the `dolma tokens` and `preprocess_data.py` command
lines, Megatron's tokenizer folder, and the readers of the outputs (documents, tokens
and the multiset of the documents' token sequences).

usage: python pack_targets.py bound CORPUS TOKENIZER
       python pack_targets.py ours CONFIG [beam flags...]
       python pack_targets.py datatrove TEXT_DIR TOKENIZER OUT TASKS [SHUFFLE_DOCUMENTS]
"""
import json
import os
import sys
import time

TEMPLATE = "{instruction}\n\n{input}\n\n{output}"
FIELDS = ["instruction", "input", "output"]
EOD = "<|endoftext|>"
MEGATRON_TAG = "core_v0.16.1"  # the Megatron-LM tag the README pins (megatron-core 0.16.1)
BATCH = 4096  # documents per encode_batch call in the bound


def render(row: dict) -> str:
    """TEMPLATE with the row's fields, as the pack-build renders it (string fields)."""
    return f"{row['instruction']}\n\n{row['input']}\n\n{row['output']}"


def bound(corpus, tokenizer):
    from measure import encode_jsonl  # this script's directory
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(tokenizer)
    tk.no_padding()
    tk.no_truncation()
    tk.encode_special_tokens = True
    # The bare floor: `encode_batch_fast` (tokenizers >= 0.21) skips the offsets.
    encode = getattr(tk, "encode_batch_fast", tk.encode_batch)

    documents, tokens = encode_jsonl(corpus, render, encode, BATCH)
    # One EOD after each document, as both outputs hold.
    return {"documents": documents, "text_tokens": tokens, "tokens": tokens + documents}


def ours(config, *flags):
    """`mintdim-beam pack CONFIG [flags]`: the console script's own entry in this
    process; returns the printed summary."""
    import contextlib
    import io

    from mintdim_beam.cli import console_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = console_main(["pack", config, *flags])
    if code:
        raise SystemExit(code)
    return json.loads(printed.getvalue())


def datatrove(text_dir, tokenizer, out, tasks, shuffle_documents="true", eod=EOD):
    """datatrove's tokenization as its docs show it: DocumentTokenizer over `tasks`
    tasks (its defaults but the seed: shuffle_documents=True, batch_size=10000, no
    local_working_dir), then DocumentTokenizerMerger (shuffle=True, its default) into
    one output (uint32 tokens when the vocabulary passes 65,536 ids: datatrove's own
    rule). Its logs and progress bars go to OUT/datatrove.log (fd 1 and 2 of this
    process and its workers), not into the measuring pipes."""
    tasks = int(tasks)
    os.makedirs(out, exist_ok=True)
    result_fd = os.dup(1)
    log = os.open(os.path.join(out, "datatrove.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    from importlib.metadata import version

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer, DocumentTokenizerMerger

    tokenize = LocalPipelineExecutor(
        pipeline=[JsonlReader(text_dir),
                  DocumentTokenizer(output_folder=os.path.join(out, "tokenized"),
                                    tokenizer_name_or_path=tokenizer, eos_token=eod, seed=0,
                                    shuffle_documents=shuffle_documents == "true")],
        tasks=tasks, workers=tasks, logging_dir=os.path.join(out, "logs_tokenize"))
    merge = LocalPipelineExecutor(
        pipeline=[DocumentTokenizerMerger(input_folder=os.path.join(out, "tokenized"),
                                          output_folder=os.path.join(out, "merged"),
                                          save_filename="pack", seed=0)],
        tasks=1, workers=1, logging_dir=os.path.join(out, "logs_merge"), depends=tokenize)
    merge.run()
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(result_fd, 1)
    return {"datatrove_version": version("datatrove"), "tokenizers_version": version("tokenizers")}


# ---- untimed helpers (run_pack.py) -------------------------------------------------

def train_pack_tokenizer(corpus, path, vocab: int = 8000, lines: int = 30000):
    """A byte-level BPE (GPT-2 style pre-tokenizer and decoder, `vocab` entries, the
    special token <|endoftext|> as id 0) trained on the rendered texts of the corpus's
    first `lines` documents. The generator is prefix-stable (corpus_N's first lines are
    the same for every N), so every corpus of at least `lines` documents gives the same
    tokenizer. Written once (an existing file is kept)."""
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = Path(path)
    if path.exists():
        return path

    def texts():
        with open(corpus, encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                if i >= lines:
                    break
                if line.strip():
                    yield render(json.loads(line))

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts(), trainer)
    tmp = path.with_suffix(".partial")
    tok.save(str(tmp))
    tmp.rename(path)
    return path


RENDERED_VERSION = "text+id"  # the marker's content: files of an older layout are rewritten


def write_rendered(corpus, folder, parts: int):
    """The corpus's rendered texts as `parts` JSONL files of {"text": ..., "id": LINE}
    (contiguous line ranges of equal size), what datatrove's JsonlReader and `dolma
    tokens` read: both split work between tasks by file (dolma needs an id field, its
    default `id`). Written once (kept when its marker FOLDER.done holds this layout: the
    marker is outside, as the readers take every file in the folder)."""
    from pathlib import Path

    folder = Path(folder)
    done = folder.with_name(folder.name + ".done")
    if done.exists() and done.read_text().split() == [str(parts), RENDERED_VERSION]:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    with open(corpus, encoding="utf-8") as handle:
        count = sum(1 for line in handle if line.strip())
    per = -(-count // parts)
    outs = [open(folder / f"part_{part:03d}.jsonl", "w", encoding="utf-8") for part in range(parts)]
    try:
        with open(corpus, encoding="utf-8") as handle:
            rows = (line for line in handle if line.strip())
            for i, line in enumerate(rows):
                outs[i // per].write(json.dumps({"text": render(json.loads(line)), "id": str(i)},
                                                ensure_ascii=False) + "\n")
    finally:
        for out in outs:
            out.close()
    done.write_text(f"{parts} {RENDERED_VERSION}\n")
    return folder


def _digests(data, ends):
    """Hashes of the documents in `data` (tokens: raw uint16 bytes, or an array of any
    integer type) cut at token `ends`, each as its ids in uint32 (outputs of either
    token width compare)."""
    import numpy as np

    tokens = np.frombuffer(data, dtype="<u2") if isinstance(data, bytes) else np.asarray(data)
    tokens = tokens.astype("<u4")
    digests, start = [], 0
    for end in ends:
        digests.append(hash(tokens[start:end].tobytes()))
        start = end
    return digests


def read_ours(out) -> dict:
    """Documents and tokens of our output, from its .idx files (not the manifest), and
    the sorted hashes of the documents' token sequences (EOD included)."""
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mintdim_beam.core.formats.megatron import read_idx

    out = Path(out)
    manifest = json.loads((out / "manifest.json").read_text())
    documents = tokens = 0
    digests = []
    for idx in sorted(out.glob("*.idx")):
        index = read_idx(idx.read_bytes())
        data = np.fromfile(idx.with_suffix(".bin"), dtype=manifest["dtype"])
        documents += len(index.lengths)
        tokens += int(index.lengths.sum())
        digests += _digests(data, np.cumsum(index.lengths, dtype=np.int64).tolist())
    return {"documents": documents, "tokens": tokens, "digests": sorted(digests),
            "manifest_documents": manifest["documents"], "manifest_tokens": manifest["tokens"],
            "engine": (manifest.get("tokenizer") or {}).get("engine")}


def read_datatrove(out, dtype: str = "uint16") -> dict:
    """Documents and tokens of datatrove's merged output (.ds token files with their
    .ds.index document ends), and the sorted hashes of the documents' token sequences."""
    from pathlib import Path

    import numpy as np

    merged = Path(out) / "merged"
    documents = tokens = 0
    digests = []
    for ds in sorted(merged.glob("*.ds")):
        ends = np.fromfile(str(ds) + ".index", dtype="<u8")
        data = np.fromfile(ds, dtype=dtype)
        documents += len(ends)
        tokens += len(data)
        digests += _digests(data, ends.tolist())
    return {"documents": documents, "tokens": tokens, "digests": sorted(digests)}


def dolma_command(dolma, text_dir, tokenizer, out, processes: int, eod_id: int = 0,
                  dtype: str = "uint16") -> list:
    """`dolma tokens` as its README shows it, set to write what our pack writes: each
    document's ids then the EOD id (`--tokenizer.eos_token_id`, no BOS; dolma appends
    the EOS unless the ids already end with it, which our EOD-free texts never do),
    special-token text encoded as plain text (`encode_special_tokens`, as the pack-build
    encodes documents), uint16, PROCESSES writers over the pre-rendered files. dolma
    strips each text and skips empty ones: the benchmark corpus has no text with
    leading or trailing whitespace (run_pack.py counts them). DTYPE: uint32 for a
    vocabulary past uint16."""
    from pathlib import Path

    return [str(dolma), "tokens", "--documents", str(Path(text_dir) / "*.jsonl"),
            "--destination", str(out), "--tokenizer.name_or_path", str(tokenizer),
            "--tokenizer.eos_token_id", str(eod_id), "--tokenizer.pad_token_id", str(eod_id),
            "--tokenizer.encode_special_tokens", "--dtype", dtype,
            "--processes", str(processes), "--seed", "0"]


def legacy_tokenizer(tokenizer, path):
    """The same tokenizer.json for tokenizers <= 0.19 (dolma 1.2.1 requires it), which
    reads merges only as "a b" strings, not as the [a, b] pairs that 0.20 and later
    write. Byte-level BPE pieces hold no space, so the strings are unambiguous; the
    outputs are compared after the runs anyway. Untimed; written once."""
    from pathlib import Path

    path = Path(path)
    if path.exists():
        return path
    data = json.loads(Path(tokenizer).read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    if merges and not isinstance(merges[0], str):
        assert not any(" " in a or " " in b for a, b in merges)
        data["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tmp.rename(path)
    return path


def megatron_tokenizer_dir(tokenizer, folder, eod=EOD):
    """A folder that `transformers.AutoTokenizer` (Megatron's HuggingFaceTokenizer)
    loads as the same tokenizer: the tokenizer.json, and a tokenizer_config.json naming
    EOD as its eos_token, whose id is what `--append-eod` appends (Megatron's `eod` is
    the eos_token's id; without one it has none). Untimed; written once."""
    from pathlib import Path

    folder = Path(folder)
    config = folder / "tokenizer_config.json"
    if config.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_bytes(Path(tokenizer).read_bytes())
    tmp = folder / "tokenizer_config.partial"
    tmp.write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eod})
                   + "\n", encoding="utf-8")
    tmp.rename(config)
    return folder


def megatron_checkout(path) -> dict:
    """What a Megatron-LM checkout is: its tools/preprocess_data.py and the
    megatron-core version its megatron/core/package_info.py states. ValueError when
    PATH is not a checkout (no tools/preprocess_data.py or no megatron/ package)."""
    import re
    from pathlib import Path

    root = Path(path)
    script = root / "tools" / "preprocess_data.py"
    info = root / "megatron" / "core" / "package_info.py"
    if not script.is_file() or not info.is_file():
        raise ValueError(f"{path} is not a Megatron-LM checkout (it needs tools/preprocess_data.py "
                         f"and megatron/core/package_info.py; clone Megatron-LM at {MEGATRON_TAG})")
    parts = dict(re.findall(r"^(MAJOR|MINOR|PATCH|PRE_RELEASE) = ['\"]?([^'\"\n]*)['\"]?$",
                            info.read_text(encoding="utf-8"), re.M))
    version = ".".join(parts.get(k, "?") for k in ("MAJOR", "MINOR", "PATCH")) + parts.get("PRE_RELEASE", "")
    return {"root": str(root.resolve()), "script": str(script.resolve()), "version": version}


def megatron_command(python, script, text_file, tokenizer_dir, out, workers: int) -> list:
    """`tools/preprocess_data.py` as Megatron-LM's data-preparation guide shows it for GPT
    data (HuggingFaceTokenizer, --append-eod, one input file, document level), the
    `text` key, WORKERS encoder processes. It writes OUT/megatron_text_document.{bin,idx}."""
    from pathlib import Path

    return [str(python), str(script), "--input", str(text_file),
            "--output-prefix", str(Path(out) / "megatron"),
            "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer_dir),
            "--json-keys", "text", "--append-eod", "--workers", str(workers)]


def read_megatron(out) -> dict:
    """Documents and tokens of preprocess_data.py's output (OUT/megatron_text_document:
    the same `.bin`/`.idx` layout as ours, read with our own reader), and the sorted
    hashes of the documents' token sequences (the EOD included)."""
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from mintdim_beam.core.formats.megatron import read_idx

    idx = Path(out) / "megatron_text_document.idx"
    index = read_idx(idx.read_bytes())
    data = np.fromfile(idx.with_suffix(".bin"), dtype=index.dtype)
    # One sequence per document (no --split-sentences): the document index is 0..N.
    if index.documents.tolist() != list(range(len(index.lengths) + 1)):
        raise ValueError(f"{idx}: not one sequence per document")
    ends = np.cumsum(index.lengths, dtype=np.int64).tolist()
    return {"documents": len(index.lengths), "tokens": int(index.lengths.sum()),
            "digests": sorted(_digests(data, ends))}


def read_dolma(out, dtype: str = "uint16") -> dict:
    """Documents and tokens of `dolma tokens`' output (part-*.npy: the tokens as a raw
    memmap, uint16; part-*.csv.gz: one row per document, start,end,id,src,loc), and the
    sorted hashes of the documents' token sequences (the EOS included)."""
    import csv
    import gzip
    from pathlib import Path

    import numpy as np

    documents = tokens = 0
    digests = []
    for npy in sorted(Path(out).glob("*.npy")):
        data = np.memmap(npy, dtype=dtype, mode="r")
        with gzip.open(npy.with_suffix(".csv.gz"), "rt", newline="") as handle:
            rows = [(int(r[0]), int(r[1])) for r in csv.reader(handle)]
        for start, end in rows:
            digests.append(hash(data[start:end].astype("<u4").tobytes()))
        documents += len(rows)
        tokens += sum(end - start for start, end in rows)
    return {"documents": documents, "tokens": tokens, "digests": sorted(digests)}


if __name__ == "__main__":
    target, *args = sys.argv[1:]
    start = time.perf_counter()
    result = {"bound": bound, "ours": ours, "datatrove": datatrove}[target](*args)
    result["inner_seconds"] = time.perf_counter() - start
    print(json.dumps(result))
