"""`pack-build` output (Megatron's indexed-dataset layout) read by the real consumers:
megatron-core's `IndexedDataset`, its `GPTDataset` built by `BlendedMegatronDatasetBuilder`
(with and without `--per-dataset-sequences-path`'s counts), and datatrove's
`DatatroveFolderDataset` and `check_dataset`.

`packed_output` runs the real `pipeline("pack-build")` on a generated JSONL corpus, once
per token dtype:
- uint16: a byte-level BPE (vocabulary 400) trained here, its EOS `<|endoftext|>` named
  in a tokenizer_config.json (pack.eod left to default to it); the output dir is given
  RELATIVE to the working directory ("out");
- int32: a WordLevel tokenizer.json over 70,000 words (vocab_size 70,002 > 65,536; ids
  past 65,535 occur in the documents), pack.eod given explicitly; the output dir is
  given as an ABSOLUTE path.
The corpus has documents of varied lengths, one longer than shard_tokens, one with the
literal text `<|endoftext|>` (which must stay text), a blank line and an empty text (no
document), and is cut into several shards.

What each shard should hold is computed here independently of the writer: its
provenance CSV (`start,end,id,src,loc`) names each document's input line; that line is
rendered and tokenized with the `tokenizers` library (special-token strings as plain
text) and the EOD id appended. Every consumer is checked against those sequences.

Not part of `make test`: `make test-interop` installs the pinned torch, megatron-core and
datatrove into the venv and runs this folder."""
import csv
import gzip
import json
import os
import random
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("megatron.core")
pytest.importorskip("datatrove")

import torch.distributed as dist  # noqa: E402
from datatrove.io import get_datafolder  # noqa: E402
from datatrove.tools.check_dataset import check_dataset  # noqa: E402
from datatrove.utils.dataset import DatatroveFolderDataset  # noqa: E402
from megatron.core.datasets.blended_dataset import BlendedDataset  # noqa: E402
from megatron.core.datasets.blended_megatron_dataset_builder import (  # noqa: E402
    BlendedMegatronDatasetBuilder,
)
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset  # noqa: E402
from tokenizers import (AddedToken, Tokenizer, decoders, models,  # noqa: E402
                        pre_tokenizers, trainers)

from mintdim_beam import pipeline  # noqa: E402

# megatron-core warns at import that Transformer Engine / Apex are absent (CPU only)
pytestmark = pytest.mark.filterwarnings("ignore:Transformer Engine and Apex")

SEQUENCES_JSON = "per_dataset_sequences.json"
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}  # MMIDIDX dtype codes
SEQ_LEN = 16
EOD_TOKEN = "<|endoftext|>"
SOURCE = "data/docs.jsonl"  # as given to pack-build, relative to the working directory
TOKENIZER = "tok/tokenizer.json"
TOKENIZER_CONFIG = "tok/tokenizer_config.json"
# a small in-memory run; several byte ranges, so the shuffle merges ranges into shards
PIPELINE_OPTIONS = ["--runner=FnApiRunner", "--input_range_bytes=2048"]
INT32_WORDS = 70_000  # WordLevel ids: [UNK] 0, w0..w69999 1..70000, <|endoftext|> 70001
ENGLISH = ("the model reads every sample and writes shards of fixed width for training "
           "data tokens units padding overflow template field value question answer code "
           "python function return list dict string number hello world").split()
UNICODE = ["xin chào các bạn", "café naïve", "你好 世界", "emoji 😀 ok"]


# --- the pack-build run ----------------------------------------------------------------

@dataclass(frozen=True)
class Shard:
    name: str  # shard_NNNNNN
    prefix: str  # absolute path without .bin / .idx
    key: str  # its key in per_dataset_sequences.json, as pack-build wrote it
    sequences: list  # expected id lists, EOD included, in provenance (= .bin) order
    rows: list  # provenance rows (start, end, id, src, loc)


@dataclass(frozen=True)
class Packed:
    work: Path  # the working directory pack-build ran in
    directory: Path  # the output directory (absolute)
    given: str  # the output directory as given to pack-build
    tokenizer: Path
    vocab_size: int
    eod: int
    dtype: np.dtype
    manifest: dict
    shards: tuple  # Shard, in name order

    @property
    def documents(self) -> list:
        """Every document (without its EOD) in shard-name order, then file order."""
        return [s[:-1] for shard in self.shards for s in shard.sequences]


@contextmanager
def _cwd(path: Path):
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def _english_texts(rng: random.Random) -> list:
    """~60 texts: short to a few hundred words, one of 700 words (longer than the
    uint16 run's shard_tokens), one with the EOD string typed in it, some non-ASCII."""
    def words(n):
        return " ".join(rng.choice(ENGLISH) for _ in range(n))

    texts = []
    for i in range(60):
        n = rng.choice([rng.randint(1, 3), rng.randint(4, 30), rng.randint(30, 150)])
        text = words(n)
        if i % 7 == 3:
            text += " " + UNICODE[i % len(UNICODE)]
        texts.append(text)
    texts[5] = words(700)
    texts[9] = f"{words(6)} {EOD_TOKEN} typed inside a document {words(4)}"
    return texts


def _word_texts(rng: random.Random) -> list:
    """~60 texts of words w0..w69999 (1 token each): ids spread over the vocabulary, so
    many past 65535; one of 400 words (longer than the int32 run's shard_tokens), one
    with the EOD string typed in it, one with words outside the vocabulary ([UNK])."""
    def words(n):
        return " ".join(f"w{rng.randrange(INT32_WORDS)}" for _ in range(n))

    texts = [words(rng.choice([rng.randint(1, 3), rng.randint(4, 30), rng.randint(30, 90)]))
             for _ in range(60)]
    texts[3] = words(400)
    texts[9] = f"w65535 w69999 {EOD_TOKEN} w1 w{INT32_WORDS - 1}"
    texts[12] = "w7 nonsense w3 w66000"
    return texts


def _train_bpe(work: Path, texts: list) -> None:
    """A byte-level BPE (no UNK) with `<|endoftext|>` as a special token, and a
    tokenizer_config.json naming it the EOS."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[EOD_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    (work / TOKENIZER).parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(work / TOKENIZER))
    (work / TOKENIZER_CONFIG).write_text(json.dumps({"eos_token": EOD_TOKEN}))


def _word_level(work: Path) -> None:
    """WordLevel over w0..w69999 with a whitespace pre-tokenizer; `<|endoftext|>` a
    special added token after them (vocab_size 70,002)."""
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(INT32_WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken(EOD_TOKEN, special=True)])
    (work / TOKENIZER).parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(work / TOKENIZER))


def _write_corpus(path: Path, texts: list) -> None:
    """One JSON row per text; a blank line and a row whose text is empty in between
    (neither is a document, but both count in the 1-based line numbers)."""
    lines = [json.dumps({"text": t, "n": i}, ensure_ascii=False) for i, t in enumerate(texts)]
    lines.insert(20, "")
    lines.insert(30, json.dumps({"text": ""}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _encoder(tokenizer: Path):
    """Our own tokenization of a rendered text: no special tokens added, and special-token
    strings typed in the text encoded as text (as pack-build must)."""
    tk = Tokenizer.from_file(str(tokenizer))
    tk.encode_special_tokens = True
    return lambda text: tk.encode(text, add_special_tokens=False).ids


def _provenance(path: Path) -> list:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        return [(int(s), int(e), i, src, int(loc)) for s, e, i, src, loc in csv.reader(handle)]


def _read_back(work: Path, directory: Path, given: str, tokenizer: Path, eod: int) -> tuple:
    """The shards with their expected sequences, from the provenance CSVs and a direct
    tokenization of each named input line ("{text}" template)."""
    encode = _encoder(tokenizer)
    inputs = {}  # (src, 1-based line) -> expected ids without EOD, for every document
    empty = 0
    for line, raw in enumerate((work / SOURCE).read_text(encoding="utf-8").split("\n"), 1):
        if raw.strip():
            ids = encode(json.loads(raw)["text"])
            if ids:
                inputs[(SOURCE, line)] = ids
            else:
                empty += 1
    assert empty == 1
    names = sorted(p.name[:-len(".idx")] for p in directory.glob("*.idx"))
    assert names == [f"shard_{i:06d}" for i in range(len(names))]
    shards, seen = [], set()
    for name in names:
        rows = _provenance(directory / f"{name}.csv.gz")
        sequences = []
        for start, end, _, src, loc in rows:
            assert (src, loc) in inputs and (src, loc) not in seen, (name, src, loc)
            seen.add((src, loc))
            sequences.append(inputs[(src, loc)] + [eod])
            assert end - start == len(sequences[-1]), (name, src, loc)
        assert [r[0] for r in rows] == [0] + [r[1] for r in rows[:-1]]
        shards.append(Shard(name, str(directory / name), f"{os.path.abspath(directory)}/{name}",
                            sequences, rows))
    assert seen == set(inputs), "some input lines are in no shard"
    return tuple(shards)


VARIANTS = {
    # dtype: (texts, tokenizer maker, pack.eod, shard_tokens, output dir given absolute?)
    "uint16": (_english_texts, _train_bpe, None, 500, False),
    "int32": (_word_texts, lambda work, texts: _word_level(work), EOD_TOKEN, 250, True),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def packed_output(request, tmp_path_factory) -> Packed:
    """A real pack-build (see the module docstring) and what each shard should hold."""
    make_texts, make_tokenizer, eod_text, shard_tokens, absolute = VARIANTS[request.param]
    work = tmp_path_factory.mktemp(f"pack_{request.param}")
    texts = make_texts(random.Random(17))
    make_tokenizer(work, texts)
    _write_corpus(work / SOURCE, texts)
    given = str(work / "out") if absolute else "out"
    tokenizer_options = {} if absolute else {"config": TOKENIZER_CONFIG}
    with _cwd(work):
        summary = (pipeline("pack-build")
                   .source.jsonl(files=[SOURCE], fields=[["text"]], templates=["{text}"])
                   .tokenizer.hf_json(files=[TOKENIZER], **tokenizer_options)
                   .pack(eod=eod_text, seed=0, shard_tokens=shard_tokens)
                   .output.dir(given)
                   .run(pipeline_options=list(PIPELINE_OPTIONS)))
    directory = work / "out"
    manifest = json.loads((directory / "manifest.json").read_text())
    tokenizer = Tokenizer.from_file(str(work / TOKENIZER))
    eod = tokenizer.token_to_id(EOD_TOKEN)
    dtype = np.dtype(request.param)
    assert summary["dtype"] == manifest["dtype"] == request.param
    assert summary["eod_id"] == manifest["eod"]["id"] == eod
    assert manifest["tokenizer"]["vocab_size"] == tokenizer.get_vocab_size()
    assert (tokenizer.get_vocab_size() > 65536) == (dtype == np.int32)

    shards = _read_back(work, directory, given, work / TOKENIZER, eod)
    packed = Packed(work, directory, given, work / TOKENIZER, tokenizer.get_vocab_size(), eod,
                    dtype, manifest, shards)
    # the corpus is what the tests need: several shards, each long enough for a GPT
    # sample, one document longer than shard_tokens, the typed EOD kept as text, and (for
    # int32) ids that do not fit 16 bits
    assert [s["name"] for s in manifest["shards"]] == [s.name for s in shards]
    assert manifest["documents"] == summary["documents"] == len(packed.documents) == len(texts)
    assert manifest["empty_documents"] == 1
    assert manifest["tokens"] == sum(len(q) for s in shards for q in s.sequences)
    assert len(shards) >= 3, [len(s.sequences) for s in shards]
    assert all(sum(map(len, s.sequences)) > 2 * (SEQ_LEN + 1) for s in shards)
    assert max(map(len, packed.documents)) > shard_tokens
    assert all(eod not in d for d in packed.documents)
    typed = [s.sequences[i] for s in shards for i, r in enumerate(s.rows) if r[4] == 10]
    assert len(typed) == 1 and len(typed[0]) > 4  # line 10 = texts[9], the typed EOD
    if dtype == np.int32:
        assert max(max(d) for d in packed.documents) == INT32_WORDS  # w69999
        assert sum(t > 65535 for d in packed.documents for t in d) > 20
    return packed


# --- helpers ---------------------------------------------------------------------------

class _Tokenizer:
    """What GPTDatasetConfig / GPTDataset read from a tokenizer: `vocab_size` (> 65536
    means int32 tokens, else uint16, for the per-dataset-sequences path), `eod` (masks),
    `pad` (padding of partial samples), `unique_identifiers` (the cache key). Here with
    the real tokenizer's vocab_size (added tokens included, as Megatron's
    HuggingFaceTokenizer reports it: len(tokenizer))."""

    def __init__(self, packed: Packed):
        self.eod = packed.eod
        self.pad = -1  # never a real id
        self.vocab_size = packed.vocab_size

    @property
    def unique_identifiers(self) -> dict:
        return {"class": "_Tokenizer", "eod": self.eod, "vocab_size": self.vocab_size}


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    """A one-process gloo group, as in Megatron training: BlendedDataset asks for the rank
    whenever its indices are cached (torch.distributed.get_rank raises without a group)."""
    if dist.is_initialized():
        yield
        return
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _build_gpt(prefixes: list, packed: Packed, cache: Path, sequences=None):
    config = GPTDatasetConfig(
        random_seed=1234, sequence_length=SEQ_LEN, blend=(prefixes, None), split="1,0,0",
        path_to_cache=str(cache), tokenizer=_Tokenizer(packed),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=True,
        create_attention_mask=False, sequences_per_dataset=sequences)
    train, valid, test = BlendedMegatronDatasetBuilder(
        GPTDataset, [None, None, None], lambda: True, config).build()
    assert valid is None and test is None
    return train


def _text(sample: dict) -> np.ndarray:
    """The seq_length + 1 ids a GPTDataset sample was cut from."""
    tokens, labels = sample["tokens"], sample["labels"]
    assert torch.equal(tokens[1:], labels[:-1])
    return torch.cat([tokens, labels[-1:]]).numpy()


def _positions(lengths: list, start: int, size: int) -> np.ndarray:
    """Position in its document of each token of the stream window [start, start+size);
    a window starts at position 0 (datatrove's convention)."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    where = np.arange(start, start + size)
    doc_start = starts[np.searchsorted(starts, where, side="right") - 1]
    return where - np.maximum(doc_start, start)


# --- megatron-core ---------------------------------------------------------------------

@pytest.mark.parametrize("mmap", [True, False])
def test_megatron_indexed_dataset_reads_every_document(packed_output, mmap):
    packed = packed_output
    for shard in packed.shards:
        sequences = shard.sequences
        assert IndexedDataset.exists(shard.prefix)
        ds = IndexedDataset(shard.prefix, mmap=mmap)
        assert ds.index.dtype == packed.dtype.type and len(ds) == len(sequences)
        assert np.array_equal(ds.sequence_lengths, [len(s) for s in sequences])
        assert np.array_equal(ds.index.sequence_pointers,
                              [r[0] * packed.dtype.itemsize for r in shard.rows])
        assert np.array_equal(ds.document_indices, np.arange(len(sequences) + 1))
        for i, seq in enumerate(sequences):
            assert ds[i].dtype == packed.dtype and ds[i].tolist() == seq, (shard.name, i)
            assert ds.get(i, offset=len(seq) - 1).tolist() == [packed.eod]
            assert ds.get(i, offset=0, length=min(3, len(seq))).tolist() == seq[:3]
        assert [s.tolist() for s in ds[0:len(ds)]] == sequences


def test_megatron_per_dataset_sequences_json(packed_output, monkeypatch):
    """The counts JSON lets IndexedDataset skip the .idx header: then the token dtype comes
    from the tokenizer's vocab_size (GPTDatasetConfig.token_dtype_code), not the file.

    pack-build writes the keys as the shards' absolute prefixes
    (`/abs/out/shard_NNNNNN`, whether the output dir was given relative or absolute), and
    Megatron looks each `--data-path` prefix up in the JSON verbatim, so a user passes
    exactly those strings as data paths. That is what this test (and the GPT one) does."""
    packed = packed_output
    counts = json.loads((packed.directory / SEQUENCES_JSON).read_text())
    assert list(counts) == [s.key for s in packed.shards]
    assert all(Path(k).is_absolute() for k in counts)
    config = GPTDatasetConfig(random_seed=0, sequence_length=SEQ_LEN, tokenizer=_Tokenizer(packed),
                              reset_position_ids=False, reset_attention_mask=False,
                              eod_mask_loss=False)
    # Megatron's dtype rule from vocab_size is pack-build's: the same code as in the .idx
    assert config.token_dtype_code == DTYPE_CODES[packed.dtype] == packed.manifest["dtype_code"]
    monkeypatch.chdir(packed.work)
    for shard in packed.shards:
        assert counts[shard.key] == [len(shard.sequences), len(shard.sequences) + 1]
        ds = IndexedDataset(shard.key, sequences_per_dataset=tuple(counts[shard.key]),
                            dtype_code=config.token_dtype_code)
        assert [ds[i].tolist() for i in range(len(ds))] == shard.sequences


def test_megatron_gpt_dataset_samples_are_stream_windows(packed_output, tmp_path, process_group):
    """One epoch over all shards (blend without weights, no size): each shard's GPTDataset
    cuts samples of SEQ_LEN + 1 ids at a stride of SEQ_LEN from its documents concatenated
    in its (shuffled) document_index order, served in shuffle_index order; the
    BlendedDataset serves every sample of every shard exactly once."""
    packed = packed_output
    shards = packed.shards
    train = _build_gpt([s.prefix for s in shards], packed, tmp_path / "cache")
    parts = train.datasets if isinstance(train, BlendedDataset) else [train]
    assert [d.dataset_path for d in parts] == [s.prefix for s in shards]

    expected_all = []
    for gpt, shard in zip(parts, shards):
        sequences = shard.sequences
        assert sorted(gpt.document_index.tolist()) == list(range(len(sequences)))  # one epoch
        stream = np.concatenate([sequences[d] for d in gpt.document_index])
        assert len(gpt) == (len(stream) - 1) // SEQ_LEN > 0
        assert sorted(gpt.shuffle_index.tolist()) == list(range(len(gpt)))
        for j in range(len(gpt)):
            u = int(gpt.shuffle_index[j])
            window = stream[u * SEQ_LEN:u * SEQ_LEN + SEQ_LEN + 1]
            sample = gpt[j]
            assert np.array_equal(_text(sample), window), (gpt.dataset_path, j)
            # eod_mask_loss: the EOD ids (and only they) are left out of the loss
            assert np.array_equal(sample["loss_mask"].numpy(),
                                  (window[:-1] != packed.eod).astype(np.float32))
            expected_all.append(tuple(window.tolist()))

    assert len(train) == len(expected_all)
    got_all = [tuple(_text(train[i]).tolist()) for i in range(len(train))]
    assert sorted(got_all) == sorted(expected_all)
    if isinstance(train, BlendedDataset):
        pairs = set(zip(train.dataset_index.tolist(), train.dataset_sample_index.tolist()))
        assert len(pairs) == len(train)


def test_megatron_gpt_dataset_with_per_dataset_sequences(packed_output, tmp_path, monkeypatch,
                                                         process_group):
    """--per-dataset-sequences-path: the same samples as from the .idx headers. The JSON is
    loaded as Megatron-LM loads it (json.load, values [S, D]) and the data paths passed are
    its keys verbatim (see test_megatron_per_dataset_sequences_json), read from the
    directory pack-build ran in."""
    packed = packed_output
    counts = json.loads((packed.directory / SEQUENCES_JSON).read_text())
    keys = [s.key for s in packed.shards]
    plain = _build_gpt([s.prefix for s in packed.shards], packed, tmp_path / "plain")
    monkeypatch.chdir(packed.work)
    fast = _build_gpt(keys, packed, tmp_path / "fast", sequences=counts)
    assert len(fast) == len(plain)
    for i in range(len(plain)):
        assert torch.equal(fast[i]["tokens"], plain[i]["tokens"])
        assert torch.equal(fast[i]["labels"], plain[i]["labels"])
    if not Path(packed.given).is_absolute():
        # the same files named by another string (relative, as given) are not in the JSON
        relative = [f"{packed.given}/{s.name}" for s in packed.shards]
        assert not set(relative) & set(counts)
        with pytest.raises(KeyError):
            _build_gpt(relative, packed, tmp_path / "relative", sequences=counts)


# --- datatrove -------------------------------------------------------------------------

@pytest.mark.parametrize("positions_from", ["eod", "index"])
def test_datatrove_folder_dataset_windows(packed_output, positions_from):
    """`*.bin` token files (no header) found in sorted name order; per file, windows of
    SEQ_LEN + 1 ids at a stride of SEQ_LEN + 1, the tail dropped; positions restart at
    each document, computed from the EOD id or read from `<name>.bin.index`."""
    packed = packed_output
    ds = DatatroveFolderDataset(
        str(packed.directory), seq_len=SEQ_LEN, filename_pattern="*.bin",
        token_size=packed.dtype.itemsize, return_positions=True,
        positions_from_eos_token_id=packed.eod if positions_from == "eod" else None)
    assert [f.file_path for f in ds.files] == [s.name + ".bin" for s in packed.shards]

    expected = []
    for shard in packed.shards:
        stream = np.concatenate(shard.sequences)
        lengths = [len(s) for s in shard.sequences]
        # the .bin.index datatrove reads: cumulative document ends, uint64, no leading 0
        index = np.fromfile(f"{shard.prefix}.bin.index", dtype="<u8")
        assert index.tolist() == np.cumsum(lengths).tolist()
        for k in range(len(stream) // (SEQ_LEN + 1)):
            start = k * (SEQ_LEN + 1)
            expected.append((stream[start:start + SEQ_LEN + 1],
                             _positions(lengths, start, SEQ_LEN + 1)))
    assert len(ds) == len(expected) > 0
    if packed.dtype == np.int32:  # datatrove reads 4-byte tokens as uint32: ids past 16 bits
        assert max(int(w.max()) for w, _ in expected) > 65535
    for i, (window, positions) in enumerate(expected):
        item = ds[i]
        assert item["input_ids"].dtype == torch.long
        assert np.array_equal(item["input_ids"].numpy(), window), i
        assert np.array_equal(item["positions"].numpy(), positions), i


def _check_dataset_view(directory: Path, view: Path, index_of=None) -> None:
    """check_dataset lists `*.ds` + `*.ds.index`: link each shard's `.bin` and `.bin.index`
    under those names (index_of(bytes) -> bytes rewrites an index instead)."""
    view.mkdir()
    for token_file in sorted(directory.glob("*.bin")):
        (view / f"{token_file.stem}.ds").symlink_to(token_file)
        index = Path(f"{token_file}.index")
        if index_of is None:
            (view / f"{token_file.stem}.ds.index").symlink_to(index)
        else:
            (view / f"{token_file.stem}.ds.index").write_bytes(index_of(index.read_bytes()))


def test_datatrove_check_dataset(packed_output, tmp_path):
    """Every document of every shard ends with the EOD, by the `.bin.index` ends and the
    pack's own tokenizer.json (datatrove maps the EOD string to its id with it)."""
    packed = packed_output
    if packed.dtype.itemsize != 2:
        pytest.skip("datatrove's check_dataset reads 2-byte tokens only ('<H')")
    _check_dataset_view(packed.directory, tmp_path / "view")
    check_dataset(get_datafolder(str(tmp_path / "view")), str(packed.tokenizer), EOD_TOKEN)

    # the check is not vacuous: a document end moved one token back misses its EOD
    def shifted(raw: bytes) -> bytes:
        ends = np.frombuffer(raw, dtype="<u8").astype(np.int64)
        first = int(np.argmax(np.diff(ends, prepend=0) > 1))  # a document with content
        ends[first] -= 1
        return ends.astype("<u8").tobytes()
    _check_dataset_view(packed.directory, tmp_path / "broken", index_of=shifted)
    with pytest.raises(AssertionError, match="no EOS at doc end"):
        check_dataset(get_datafolder(str(tmp_path / "broken")), str(packed.tokenizer), EOD_TOKEN)
