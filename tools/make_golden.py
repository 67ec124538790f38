#!/usr/bin/env python3
"""(Re)generate the golden test cases under ``tests/golden/`` with mintdim 0.2.1.

The expected outputs are produced by the public reference implementation,
``mintdim`` 0.2.1, which needs Python >= 3.12. Create a dedicated venv:

    python3.12 -m venv V
    V/bin/pip install mintdim==0.2.1 'sentencepiece==0.2.1' tokenizers

NOTE on sentencepiece: mintdim 0.2.1 reads UNK surfaces with
``encode(..., out_type="immutable_proto")``. The sentencepiece 0.2.2 and
0.2.3 wheels available here reject that return type with a ValueError, so
mintdim crashes on the first SentencePiece UNK with them. 0.2.1 works.
(The pin ``'sentencepiece<0.2.3'`` is NOT enough.)

Then, from the repository root:

    V/bin/python tools/make_golden.py            # all cases
    V/bin/python tools/make_golden.py chat_multiturn_sp_unigram qa_sp_bpe_multi
    V/bin/python tools/make_golden.py --list
    V/bin/python tools/make_golden.py --keep-tokenizers   # reuse tests/golden/_tokenizers

(``/tmp/golden312`` on the development machine is such a venv.)

Everything is deterministic: data come from seeded ``random.Random`` generators
(``tools/textgen.py``), tokenizers are trained single-threaded on generated
corpora, and the reference is run on a temporary copy of each case directory
(cwd = the copy), so every path recorded in the outputs is the relative string
written in ``case.json``.

Layout of one case (``tests/golden/<case>/``):

    case.json               the exact API arguments (paths relative to the case dir)
    data/*.jsonl            inputs
    tok/...                 per-case tokenizers (shared ones live in ../_tokenizers/)
    expected/<out>/...      the complete mintdim 0.2.1 output (absent for error cases)

``case.json`` keys: files, fields, templates, tokenizer {type, files}, sizes,
build_batch, output (str or list), samples_per_shard, on_overflow,
on_template_unk, expect_error (null or an exception class name), plus
``description`` (free text, informational only).

Cases recorded with ``"on_overflow": "extend"`` were produced by driving
mintdim's interactive overflow prompt through a pseudo-terminal, answering
[2] extend, new unit_size = the sample's token_count, scope [2] all (mintdim
0.2.1 has no non-interactive "extend" policy). When one build holds several
output datasets the prompt is asked again for each of them; the script answers
it the same way every time.

Internal mode (used by the script itself): ``make_golden.py --worker RESULT.json
ON_OVERFLOW`` runs the build described by ./case.json in the current directory.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOLDEN = ROOT / "tests" / "golden"
SHARED_TOK = GOLDEN / "_tokenizers"
SHARED_TOK_REL = "../_tokenizers"

sys.path.insert(0, str(HERE))
import textgen as tg  # noqa: E402


# ---------------------------------------------------------------------------
# Worker: run one build with the reference implementation (cwd = case copy)
# ---------------------------------------------------------------------------

def worker_main(result_path: str, on_overflow: str) -> int:
    cfg = json.loads(Path("case.json").read_text(encoding="utf-8"))
    result: dict
    try:
        from mintdim import pipeline

        job = pipeline("unit-build").source.jsonl(
            files=cfg["files"], fields=cfg["fields"], templates=cfg["templates"],
        )
        tok = cfg["tokenizer"]
        if tok["type"] == "sentencepiece":
            job = job.tokenizer.sentencepiece(files=tok["files"])
        else:
            job = job.tokenizer.hf_json(files=tok["files"])
        job = job.units(sizes=cfg["sizes"], build_batch=cfg["build_batch"])
        job = job.output.dir(cfg["output"], samples_per_shard=cfg["samples_per_shard"])
        ret = job.run(on_template_unk=cfg["on_template_unk"], on_overflow=on_overflow)
        result = {"status": "ok", "return": ret}
    except Exception as exc:  # noqa: BLE001 - we record whatever mintdim raises
        result = {"status": "error", "class": type(exc).__name__, "message": str(exc)}
    Path(result_path).write_text(json.dumps(result, ensure_ascii=False, indent=2),
                                 encoding="utf-8")
    return 0


# ---------------------------------------------------------------------------
# Running the worker, plainly or under a pseudo-terminal answering prompts
# ---------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_reference(workdir: Path, on_overflow: str, prompt_action: str | None) -> dict:
    """Run the worker in ``workdir``. ``prompt_action`` = "1"/"2"/"3" answers every
    overflow prompt (truncate/extend/skip) with scope "2" (all)."""
    result_path = workdir / "_result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(result_path),
           on_overflow]
    env = dict(os.environ, PYTHONHASHSEED="0", TOKENIZERS_PARALLELISM="false")
    log = ""
    if prompt_action is None:
        proc = subprocess.run(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=900)
        log = proc.stderr
        if proc.returncode != 0:
            raise RuntimeError(f"worker failed:\n{proc.stdout}\n{proc.stderr}")
    else:
        log = _run_under_pty(cmd, workdir, env, prompt_action)
    res = json.loads(result_path.read_text(encoding="utf-8"))
    result_path.unlink()
    res["log"] = log
    return res


def _run_under_pty(cmd, workdir: Path, env, action: str) -> str:
    master, slave = os.openpty()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    raw = b""
    answered = 0          # characters of the cleaned transcript already handled
    prompts = {"action": 0, "size": 0, "scope": 0}
    deadline = time.time() + 900

    def send(text: str) -> None:
        os.write(master, (text + "\n").encode())

    try:
        while True:
            if time.time() > deadline:
                proc.kill()
                raise RuntimeError("pty worker timed out")
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:        # EIO: child closed the pty
                    chunk = b""
                if not chunk:
                    if proc.poll() is not None:
                        break
                    continue
                raw += chunk
            elif proc.poll() is not None:
                break
            text = _ANSI.sub("", raw.decode("utf-8", "replace"))
            # Answer the prompts in the order they appear in the transcript.
            while True:
                rest = text[answered:]
                m_action = rest.find("[1/2/3] > ")
                m_size = re.search(r"must be an integer >= (\d+)\s*\n\s*> ", rest)
                m_scope = rest.find("[1/2] > ")
                cands = []
                if m_action >= 0:
                    cands.append((m_action, "action", len("[1/2/3] > "), None))
                if m_size:
                    cands.append((m_size.start(), "size", m_size.end() - m_size.start(),
                                  m_size.group(1)))
                if m_scope >= 0:
                    cands.append((m_scope, "scope", len("[1/2] > "), None))
                if not cands:
                    break
                pos, kind, ln, arg = min(cands)
                answered += pos + ln
                prompts[kind] += 1
                if kind == "action":
                    send(action)
                elif kind == "size":
                    send(arg)          # new unit_size = the sample's token_count
                else:
                    send("2")          # apply to all subsequent overflow samples
    finally:
        os.close(master)
        proc.wait()
    if proc.returncode != 0:
        raise RuntimeError("pty worker failed:\n" + raw.decode("utf-8", "replace"))
    out = _ANSI.sub("", raw.decode("utf-8", "replace"))
    return out + f"\n[make_golden] prompts answered: {prompts}\n"


# ---------------------------------------------------------------------------
# Tokenizer training (deterministic)
# ---------------------------------------------------------------------------

def train_sp(lines: list[str], out_path: Path, **opts) -> None:
    """Train a SentencePiece model from memory (no file paths end up in the proto,
    so the bytes are reproducible)."""
    import sentencepiece as spm

    out_path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    args = dict(
        sentence_iterator=iter(lines), model_writer=buf, num_threads=1,
        minloglevel=2, input_sentence_size=0, shuffle_input_sentence=False,
        hard_vocab_limit=False,
    )
    args.update(opts)
    spm.SentencePieceTrainer.train(**args)
    out_path.write_bytes(buf.getvalue())


def _hf_finish(tok, out_path: Path, pad_token: str) -> None:
    pad_id = tok.token_to_id(pad_token)
    assert pad_id is not None, pad_token
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_path), pretty=True)


def train_hf_bpe(lines, out_path: Path, *, vocab_size: int, special: list[str],
                 unk: str, pad: str, fuse_unk: bool = False, nfkc: bool = True,
                 pre: str = "whitespace") -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers, decoders

    tok = Tokenizer(models.BPE(unk_token=unk, fuse_unk=fuse_unk))
    if nfkc:
        tok.normalizer = normalizers.NFKC()
    if pre == "whitespace":
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  min_frequency=2, show_progress=False)
    tok.train_from_iterator(lines, trainer=trainer)
    _hf_finish(tok, out_path, pad)


def train_hf_wordpiece(lines, out_path: Path, *, vocab_size: int) -> None:
    """WordPiece with a vocabulary chosen by simple, deterministic counting.

    (tokenizers' WordPieceTrainer assigns ids, and even picks tokens, in a
    run-to-run varying order, so it cannot give reproducible golden files.)
    Vocab: specials, every character seen >= 2 times (plain and ##-prefixed),
    then the most frequent whole words and ##suffixes, ties broken by string.
    """
    from collections import Counter

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders

    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                            lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words: Counter[str] = Counter()
    for line in lines:
        for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(line)):
            words[w] += 1
    chars: Counter[str] = Counter()
    suffixes: Counter[str] = Counter()
    for w, n in words.items():
        for ch in w:
            chars[ch] += n
        for k in (2, 3, 4):
            if len(w) > k:
                suffixes["##" + w[-k:]] += n
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    alphabet = sorted(ch for ch, n in chars.items() if n >= 2)
    vocab_list = specials + alphabet + ["##" + ch for ch in alphabet]
    budget = vocab_size - len(vocab_list)
    top_words = [w for w, n in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
                 if len(w) > 1 and n >= 2][: budget * 3 // 4]
    top_suffixes = [s for s, n in sorted(suffixes.items(), key=lambda kv: (-kv[1], kv[0]))
                    if n >= 2][: budget - len(top_words)]
    for tok_str in top_words + top_suffixes:
        if tok_str not in vocab_list:
            vocab_list.append(tok_str)
    vocab = {t: i for i, t in enumerate(vocab_list)}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=40))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(specials)
    _hf_finish(tok, out_path, "[PAD]")


def train_hf_bytelevel(lines, out_path: Path, *, vocab_size: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=["<|endoftext|>", "<unk>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer=trainer)
    _hf_finish(tok, out_path, "<pad>")


def english_corpus(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.3:
            out.append(tg.en_answer(rng).replace("\n", " "))
        elif r < 0.5:
            out.append(tg.en_question(rng))
        elif r < 0.65:
            out.append(tg.en_instruction(rng))
        elif r < 0.8:
            out.append(tg.en_paragraph(rng, 2, 6))
        else:
            out.extend(tg.py_snippet(rng).split("\n"))
    # every printable ASCII character, so that only non-ASCII text can be UNK
    ascii_line = " ".join(chr(c) for c in range(33, 127))
    out.extend([ascii_line] * 5)
    out.extend(["Question: Context: Answer: <|user|> <|assistant|> <|system|>",
                "### Task Solution ``` # file: id= score= passed= { } [ ] ( ) : ; , . ! ? -"])
    return out


def multilingual_corpus(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = english_corpus(seed + 1, n // 2)
    for _ in range(n):
        lang, text = tg.multilingual_text(rng)
        out.append(f"[{lang}] {text}".replace("\n", " "))
    for s in tg.VI + tg.ZH + tg.JA + tg.KO:
        out.append(s)
    return out


SHARED_TOKENIZERS = {
    "sp_unigram_en.model": "SentencePiece unigram, vocab 1200, English+code corpus, nmt_nfkc, "
                           "user symbols <|system|>/<|user|>/<|assistant|>, unk=0 bos=1 eos=2 pad=3",
    "sp_bpe_multi.model": "SentencePiece BPE, vocab 2000, multilingual corpus (en/vi/zh/ja/ko/emoji), "
                          "character_coverage 0.9995, pad=0 unk=1 bos=2 eos=-1",
    "sp_tiny_en.model": "SentencePiece unigram, vocab 120, tiny English corpus, identity normalization, "
                        "character_coverage 0.98 -> heavy UNK; unk=0 bos=1 eos=2 pad=3",
    "hf_bpe_en.json": "HF BPE(unk [UNK]) + NFKC + Whitespace pre-tokenizer, vocab 1500, English+code; "
                      "special tokens [UNK] [PAD] <|system|> <|user|> <|assistant|>; padding [PAD]",
    "hf_wordpiece.json": "HF WordPiece([UNK], max 40 chars/word) + BertNormalizer(lowercase) + "
                         "BertPreTokenizer, vocab 1000, English+Vietnamese; padding [PAD]=0",
    "hf_bytelevel.json": "HF ByteLevel BPE (unk <unk>, never produced), vocab 1200, English+code; "
                         "special <|endoftext|>=0 <unk>=1 <pad>=2; padding <pad>",
}


def build_shared_tokenizers() -> None:
    SHARED_TOK.mkdir(parents=True, exist_ok=True)
    en = english_corpus(1001, 6000)
    train_sp(en, SHARED_TOK / "sp_unigram_en.model", model_type="unigram", vocab_size=1200,
             character_coverage=1.0, pad_id=3,
             user_defined_symbols=["<|system|>", "<|user|>", "<|assistant|>"])
    multi = multilingual_corpus(1002, 5000)
    train_sp(multi, SHARED_TOK / "sp_bpe_multi.model", model_type="bpe", vocab_size=2000,
             character_coverage=0.9995, pad_id=0, unk_id=1, bos_id=2, eos_id=-1)
    rng = random.Random(1003)
    tiny = [tg.en_sentence(rng, "cooking") for _ in range(3000)]
    train_sp(tiny, SHARED_TOK / "sp_tiny_en.model", model_type="unigram", vocab_size=120,
             character_coverage=0.98, pad_id=3, normalization_rule_name="identity")
    train_hf_bpe(en, SHARED_TOK / "hf_bpe_en.json", vocab_size=1500,
                 special=["[UNK]", "[PAD]", "<|system|>", "<|user|>", "<|assistant|>"],
                 unk="[UNK]", pad="[PAD]")
    rng = random.Random(1004)
    wp = english_corpus(1005, 3000) + [tg.vi_text(rng, 1, 2) for _ in range(1500)]
    train_hf_wordpiece(wp, SHARED_TOK / "hf_wordpiece.json", vocab_size=1000)
    train_hf_bytelevel(english_corpus(1006, 5000), SHARED_TOK / "hf_bytelevel.json",
                       vocab_size=1200)
    (SHARED_TOK / "README.md").write_text(
        "# Shared tokenizers for the golden cases\n\n"
        "Trained by `tools/make_golden.py` (deterministic, single-threaded) on synthetic\n"
        "corpora from `tools/textgen.py`. Cases refer to them as `../_tokenizers/<file>`;\n"
        "that exact string is what mintdim records in `manifest.json`.\n\n"
        + "".join(f"- `{k}`: {v}\n" for k, v in SHARED_TOKENIZERS.items()),
        encoding="utf-8")


# ---------------------------------------------------------------------------
# Helpers to write JSONL data byte-exactly
# ---------------------------------------------------------------------------

def jline(obj, rng: random.Random | None = None, ascii_p: float = 0.15) -> str:
    ensure_ascii = bool(rng and rng.random() < ascii_p)
    if rng and rng.random() < 0.1:
        return json.dumps(obj, ensure_ascii=ensure_ascii, separators=(",", ":"))
    return json.dumps(obj, ensure_ascii=ensure_ascii)


def lines_to_bytes(lines: list[str], eol: str = "\n", final_eol: bool = True) -> bytes:
    text = eol.join(lines) + (eol if final_eol else "")
    return text.encode("utf-8")


def with_blank_lines(rng: random.Random, lines: list[str], p: float = 0.05) -> list[str]:
    out = []
    for ln in lines:
        if rng.random() < p:
            out.append(rng.choice(["", "   ", "\t", " \t "]))
        out.append(ln)
    return out


def add_duplicates(rng: random.Random, rows: list[dict], k: int) -> list[dict]:
    rows = list(rows)
    for _ in range(k):
        src = rng.choice(rows)
        rows.insert(rng.randrange(len(rows) + 1), dict(src))
    return rows


# ---------------------------------------------------------------------------
# Case registry
# ---------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    description: str
    files: dict[str, bytes]
    config: dict
    expect_error: str | None = None
    prompt_action: str | None = None          # "2" -> extend via prompt, "1" -> truncate
    record_on_overflow: str | None = None     # what case.json says when prompted
    tokenizers: list[Callable[[Path], None]] = field(default_factory=list)
    checks: list[Callable[[Path], None]] = field(default_factory=list)
    compare_with_policy: str | None = None    # prompt run must equal this plain policy


CASES: dict[str, Callable[[], Case]] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def cfg(files, fields, templates, tok_type, tok_files, sizes, build_batch, output,
        samples_per_shard, on_overflow="truncate", on_template_unk="abort"):
    return {
        "files": files, "fields": fields, "templates": templates,
        "tokenizer": {"type": tok_type, "files": tok_files},
        "sizes": sizes, "build_batch": build_batch, "output": output,
        "samples_per_shard": samples_per_shard,
        "on_overflow": on_overflow, "on_template_unk": on_template_unk,
    }


SP_UNI = f"{SHARED_TOK_REL}/sp_unigram_en.model"
SP_BPE = f"{SHARED_TOK_REL}/sp_bpe_multi.model"
SP_TINY = f"{SHARED_TOK_REL}/sp_tiny_en.model"
HF_BPE = f"{SHARED_TOK_REL}/hf_bpe_en.json"
HF_WP = f"{SHARED_TOK_REL}/hf_wordpiece.json"
HF_BL = f"{SHARED_TOK_REL}/hf_bytelevel.json"


# --- checks on expected output ---------------------------------------------

def _rows(out: Path, name: str) -> list[dict]:
    text = (out / name).read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines() if x]


def need_unk(min_rows: int = 1):
    def check(out: Path):
        n = len(_rows(out, "unk_index.jsonl"))
        assert n >= min_rows, f"{out}: expected >= {min_rows} unk rows, got {n}"
    return check


def need_unk_in_segment_kind(kind: str):
    def check(out: Path):
        lf = json.loads((out / "length_field.json").read_text(encoding="utf-8"))
        kinds = [f["kind"] for f in lf["length_fields"]]
        hits = [i for r in _rows(out, "unk_index.jsonl") for i in r["unk_field_indices"]
                if kinds[i] == kind]
        assert hits, f"{out}: no UNK in a {kind} segment"
    return check


def need_dups(min_groups: int = 1, cross_file: bool = False):
    def check(out: Path):
        rows = _rows(out, "duplicate_index.jsonl")
        assert len(rows) >= min_groups, f"{out}: {len(rows)} duplicate groups"
        if cross_file:
            assert any(len({s["source_file"] for s in r["samples"]}) > 1 for r in rows), \
                f"{out}: no cross-file duplicate"
    return check


def need_overflow(action: str, min_rows: int = 1):
    def check(out: Path):
        rows = [r for r in _rows(out, "overflow_index.jsonl") if r["action"] == action]
        assert len(rows) >= min_rows, f"{out}: {len(rows)} overflow rows with {action}"
    return check


def need_no_overflow(out: Path):
    assert not _rows(out, "overflow_index.jsonl"), f"{out}: unexpected overflow rows"


def need_empty_fields(out: Path):
    assert any(r["empty_fields"] for r in _rows(out, "sample_index.jsonl")), \
        f"{out}: no empty_fields"


def need_empty_unit(out: Path):
    assert list(out.glob("unit_*/EMPTY_UNIT.md")), f"{out}: no EMPTY_UNIT.md"


def need_multi_shards(min_shards: int = 2):
    def check(out: Path):
        best = max(len(list(d.glob("shard_*.bin"))) for d in out.glob("unit_*"))
        assert best >= min_shards, f"{out}: at most {best} shards in a unit"
    return check


def need_extend_shape(out: Path):
    """Added sizes are running maxima; some overflowing samples reuse an added size."""
    rows = _rows(out, "overflow_index.jsonl")
    ext = [r for r in rows if r["action"] == "extend"]
    assert len(ext) >= 3, f"{out}: only {len(ext)} extend rows"
    news = [r["new_unit_size"] for r in ext]
    assert news == sorted(news) and all(r["new_unit_size"] == r["token_count"] for r in ext)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    declared_max = min(r["max_unit_size"] for r in ext)
    reuse = [r for r in _rows(out, "sample_index.jsonl")
             if r["token_count"] > declared_max and r["unit_size"] != r["token_count"]]
    assert reuse, f"{out}: no overflowing sample reused an earlier added size"
    assert set(news) <= set(manifest["units"]["sizes"])


def need_lines(out: Path, file: str, lines: set[int]):
    got = {r["source_line"] for r in _rows(out, "sample_index.jsonl") if r["source_file"] == file}
    assert lines <= got, f"{out}: missing lines {sorted(lines - got)} of {file}"


# ---------------------------------------------------------------------------
# Data builders shared by several cases
# ---------------------------------------------------------------------------

def chat_rows(rng: random.Random, n: int, *, multilingual: float = 0.1,
              long_p: float = 0.05) -> list[dict]:
    rows = []
    for i in range(n):
        topic = rng.choice(sorted(tg.TOPICS))
        prompt = tg.en_question(rng, topic)
        if rng.random() < 0.3:
            prompt += " " + tg.en_sentence(rng, topic)
        if rng.random() < long_p:
            response = tg.en_long(rng, rng.randint(12, 30), topic)
        else:
            response = tg.en_answer(rng, 1, 5, topic)
        if rng.random() < multilingual:
            prompt = tg.sprinkle_emoji(rng, prompt + " " + rng.choice(tg.VI), 0.7)
        rows.append({"prompt": prompt, "response": response})
    return rows


def qa_rows(rng: random.Random, n: int, *, vi_p: float = 0.0, long_p: float = 0.05,
            extras: bool = True) -> list[dict]:
    rows = []
    for i in range(n):
        topic = rng.choice(sorted(tg.TOPICS))
        fact = rng.choice(tg.TOPICS[topic]["facts"])
        n_ctx = rng.randint(12, 30) if rng.random() < long_p else rng.randint(1, 4)
        ctx_sents = [tg.en_sentence(rng, topic) for _ in range(n_ctx)]
        ctx_sents.insert(rng.randrange(len(ctx_sents) + 1), fact)
        context = " ".join(ctx_sents)
        q = rng.choice([
            f"According to the text, what is true about the {rng.choice(tg.TOPICS[topic]['nouns'])}?",
            "What is the main point of the passage?",
            tg.en_question(rng, topic),
            "Which statement in the context is a general fact?",
        ])
        a = fact if rng.random() < 0.7 else rng.choice(["Yes.", "No.", "It depends on the context.",
                                                       fact.split(",")[0] + "."])
        if rng.random() < vi_p:
            q = rng.choice(tg.VI)
            context = tg.vi_text(rng, 2, 4)
            a = rng.choice(tg.VI)
        row = {"question": q, "context": context, "answer": a}
        if extras and rng.random() < 0.3:
            row["id"] = f"q{i:05d}"
            row["meta"] = {"topic": topic, "difficulty": rng.randint(1, 5), "tags": [topic]}
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------

@case
def chat_multiturn_sp_unigram() -> Case:
    rng = random.Random(101)
    rows = []
    systems = ["You are a helpful assistant.", "You are a concise assistant. Answer briefly.",
               "You are a friendly cooking coach.", "You are a senior software engineer.", ""]
    for i in range(260):
        topic = rng.choice(sorted(tg.TOPICS))
        r = {"system": rng.choice(systems),
             "user_1": tg.en_question(rng, topic),
             "assistant_1": tg.en_answer(rng, 1, 4, topic)}
        if rng.random() < 0.65:
            r["user_2"] = rng.choice(["Thanks! Can you give an example?", "Why is that?",
                                      "Can you make it shorter?", tg.en_question(rng, topic)])
            r["assistant_2"] = (tg.en_long(rng, rng.randint(14, 28), topic)
                                if rng.random() < 0.08 else tg.en_answer(rng, 1, 3, topic))
        else:
            r["user_2"] = ""
            r["assistant_2"] = ""
        if rng.random() < 0.08:
            r["user_1"] = tg.sprinkle_emoji(rng, r["user_1"] + " " + rng.choice(tg.VI), 0.8)
        rows.append(r)
    rows = add_duplicates(rng, rows, 6)
    lines = with_blank_lines(rng, [jline(r, rng) for r in rows], 0.02)
    tmpl = ("<|system|>\n{system}\n<|user|>\n{user_1}\n<|assistant|>\n{assistant_1}\n"
            "<|user|>\n{user_2}\n<|assistant|>\n{assistant_2}")
    return Case(
        "chat_multiturn_sp_unigram",
        "Two-turn chat rendered with role markers (<|system|>/<|user|>/<|assistant|>, "
        "user_defined_symbols of the SP unigram model); second turn often empty "
        "(empty_fields), empty system prompts, a few long answers truncated, "
        "Vietnamese/emoji in user turns -> UNK (SP merges a run of unknown chars into one UNK).",
        {"data/chat.jsonl": lines_to_bytes(lines)},
        cfg(["data/chat.jsonl"],
            [["system", "user_1", "assistant_1", "user_2", "assistant_2"]], [tmpl],
            "sentencepiece", [SP_UNI], [[128, 256, 384, 512]], [64], "out", [40],
            on_overflow="truncate"),
        checks=[need_empty_fields, need_unk(), need_dups(), need_overflow("truncate")],
    )


@case
def chat_hf_bpe_added_tokens() -> Case:
    rng = random.Random(102)
    rows = chat_rows(rng, 300, multilingual=0.08, long_p=0.06)
    # A user who pastes the role marker into the prompt: it is an added special
    # token of the tokenizer and is matched inside the field too.
    rows[17]["prompt"] = "What does <|assistant|> mean in a chat template?"
    rows[42]["response"] = "The string <|user|> marks the start of a user turn."
    rows = add_duplicates(rng, rows, 5)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "chat_hf_bpe_added_tokens",
        "Single-turn chat, HF BPE with [UNK] + Whitespace pre-tokenizer and added special "
        "tokens for the role markers (vocab_size counts added tokens). The '\\n' literals "
        "encode to zero tokens (Whitespace drops them). Role markers also appear inside "
        "field text. Long samples are skipped (on_overflow=skip).",
        {"data/conversations.jsonl": lines_to_bytes(lines)},
        cfg(["data/conversations.jsonl"], [["prompt", "response"]],
            ["<|user|>\n{prompt}\n<|assistant|>\n{response}"],
            "hf_json", [HF_BPE], [[32, 64, 128, 256]], [100], "out", [64],
            on_overflow="skip"),
        checks=[need_overflow("skip"), need_unk(), need_dups()],
    )


@case
def qa_sp_bpe_multi() -> Case:
    rng = random.Random(103)
    rows = qa_rows(rng, 220, vi_p=0.15, long_p=0.0)
    rows = add_duplicates(rng, rows, 3)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "qa_sp_bpe_multi",
        "Question/context/answer (three fields) with English and Vietnamese rows, extra "
        "keys (id, nested meta) ignored, SentencePiece BPE (pad_id=0, unk_id=1). Nothing "
        "overflows, run with on_overflow=abort.",
        {"data/qa.jsonl": lines_to_bytes(lines)},
        cfg(["data/qa.jsonl"], [["question", "context", "answer"]],
            ["Question: {question}\nContext: {context}\nAnswer: {answer}"],
            "sentencepiece", [SP_BPE], [[64, 128, 256, 512]], [50], "out", [50],
            on_overflow="abort"),
        checks=[need_no_overflow, need_dups()],
    )


@case
def qa_hf_wordpiece_vi() -> Case:
    rng = random.Random(104)
    rows = qa_rows(rng, 180, vi_p=0.3, long_p=0.06)
    for i in rng.sample(range(len(rows)), 12):
        rows[i]["answer"] = tg.sprinkle_emoji(rng, rows[i]["answer"] + " " + rng.choice(tg.ZH), 0.6)
    rows[5]["context"] += " See https://example.com/a/very/long/path/that-keeps-going-and-going-forever"
    rows[6]["answer"] = "Supercalifragilisticexpialidociousnessandthensomemoreletters"
    lines = [jline(r, rng) for r in rows]
    return Case(
        "qa_hf_wordpiece_vi",
        "QA with Vietnamese diacritics through HF WordPiece (BertNormalizer lowercases and "
        "strips accents; offsets still point into the original text, so unk_chars are original "
        "substrings). CJK chars are split one per word -> one [UNK] each; emoji and words "
        "longer than 40 chars become one [UNK] for the whole word. Truncation on.",
        {"data/qa_vi.jsonl": lines_to_bytes(lines)},
        cfg(["data/qa_vi.jsonl"], [["question", "context", "answer"]],
            ["[Q] {question}\n[C] {context}\n[A] {answer}"],
            "hf_json", [HF_WP], [[32, 64, 128, 256]], [32], "out", [25],
            on_overflow="truncate"),
        checks=[need_unk(5), need_overflow("truncate")],
    )


@case
def code_sp_bytefallback() -> Case:
    rng = random.Random(105)
    rows = []
    for i in range(200):
        lang, task, code = tg.code_task(rng)
        if rng.random() < 0.05:
            code += "\n# TODO: xử lý lỗi 🐛 later"
        rows.append({"language": lang, "task": task, "code": code})
    rows = add_duplicates(rng, rows, 4)
    lines = [jline(r, rng) for r in rows]
    tmpl = "### Task ({language})\n{task}\n### Solution\n```{language}\n{code}\n```\n"

    def tok(case_dir: Path) -> None:
        corpus = []
        for r in rows[:150]:
            corpus.extend(tmpl.format(**r).split("\n"))
        train_sp(corpus, case_dir / "tok" / "code_bpe_bytefallback.model", model_type="bpe",
                 vocab_size=800, byte_fallback=True, normalization_rule_name="identity",
                 remove_extra_whitespaces=False, split_digits=True,
                 allow_whitespace_only_pieces=True, character_coverage=1.0, pad_id=3)

    return Case(
        "code_sp_bytefallback",
        "Python/JS/C snippets (tabs and 4-space indentation, braces, f-strings with {x} "
        "that are field text, not placeholders); repeated field {language}; per-case "
        "SentencePiece BPE trained on the case data with byte_fallback, identity "
        "normalization and remove_extra_whitespaces=False (newlines and tabs become byte "
        "pieces <0x0A>/<0x09>, no UNK).",
        {"data/code.jsonl": lines_to_bytes(lines)},
        cfg(["data/code.jsonl"], [["language", "task", "code"]], [tmpl],
            "sentencepiece", ["tok/code_bpe_bytefallback.model"], [[64, 128, 256]], [64],
            "out", [32], on_overflow="truncate"),
        tokenizers=[tok],
        checks=[need_dups()],
    )


@case
def code_hf_bytelevel() -> Case:
    rng = random.Random(106)
    rows = []
    for i in range(200):
        lang, task, code = tg.code_task(rng)
        ext = {"python": "py", "javascript": "js", "c": "c"}[lang]
        path = f"src/{rng.choice(['utils', 'core', 'api', 'jobs'])}/{rng.choice(tg._FUNC)}_{i}.{ext}"
        if rng.random() < 0.08:
            code = "# 注释：读取数据 🚀\n" + code
        rows.append({"path": path, "code": code, "lang": lang})
    lines = [jline(r, rng) for r in rows]
    return Case(
        "code_hf_bytelevel",
        "Source files through a HF ByteLevel BPE (GPT-2 style, tabs/newlines/CJK/emoji all "
        "byte-encoded, so no UNK at all); literal <|endoftext|> is an added special token; "
        "extra key 'lang' ignored; on_overflow=abort with nothing overflowing.",
        {"data/snippets.jsonl": lines_to_bytes(lines)},
        cfg(["data/snippets.jsonl"], [["path", "code"]], ["# file: {path}\n{code}\n<|endoftext|>"],
            "hf_json", [HF_BL], [[64, 128, 256, 512]], [128], "out", [30],
            on_overflow="abort"),
        checks=[need_no_overflow],
    )


@case
def multilingual_sp_bpe() -> Case:
    rng = random.Random(107)
    rows = []
    for i in range(300):
        lang, text = tg.multilingual_text(rng)
        rows.append({"lang": lang, "text": text})
    rows[3]["text"] = "龘靐齉爩 are rare characters; so is 𓀀 (U+13000) and 🜲."
    rows[4]["text"] = "ＦＵＬＬＷＩＤＴＨ ａｂｃ １２３ ｶﾀｶﾅ and ﬁ ligature ①②③"
    rows = add_duplicates(rng, rows, 5)
    lines = [jline(r, rng, ascii_p=0.3) for r in rows]
    return Case(
        "multilingual_sp_bpe",
        "Multilingual text (English, Vietnamese, Chinese, Japanese, Korean, Cyrillic, Greek, "
        "Arabic, Hebrew, Devanagari, emoji incl. ZWJ sequences and flags, full-width forms "
        "normalized by nmt_nfkc) through SentencePiece BPE with character_coverage 0.9995: "
        "rare characters are UNK and unk_chars are the original surfaces. Many rows written "
        "with \\u escapes.",
        {"data/multi.jsonl": lines_to_bytes(lines)},
        cfg(["data/multi.jsonl"], [["lang", "text"]], ["[{lang}] {text}"],
            "sentencepiece", [SP_BPE], [[16, 32, 64, 128]], [100], "out", [40],
            on_overflow="truncate"),
        checks=[need_unk(3), need_dups()],
    )


@case
def multilingual_hf_bpe_fused_unk() -> Case:
    rng = random.Random(108)
    rows = []
    for i in range(250):
        lang, text = tg.multilingual_text(rng)
        rows.append({"lang": lang, "text": text})
    lines = [jline(r, rng) for r in rows]

    def tok(case_dir: Path) -> None:
        r2 = random.Random(1080)
        corpus = english_corpus(1081, 2500) + [tg.vi_text(r2, 1, 2) for _ in range(300)]
        train_hf_bpe(corpus, case_dir / "tok" / "tokenizer.json", vocab_size=900,
                     special=["<unk>", "<pad>"], unk="<unk>", pad="<pad>", fuse_unk=True,
                     nfkc=False, pre="metaspace")

    return Case(
        "multilingual_hf_bpe_fused_unk",
        "Multilingual text through a per-case HF BPE trained on English+Vietnamese only, "
        "Metaspace pre-tokenizer, fuse_unk=True: a run of unknown characters (a CJK sentence, "
        "an emoji cluster) becomes ONE <unk> whose unk_chars entry is the whole run.",
        {"data/mixed.jsonl": lines_to_bytes(lines)},
        cfg(["data/mixed.jsonl"], [["lang", "text"]], ["{lang}: {text}"],
            "hf_json", ["tok/tokenizer.json"], [[32, 64, 128]], [50], "out", [50],
            on_overflow="truncate"),
        tokenizers=[tok],
        checks=[need_unk(20)],
    )


def _notes_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        title = rng.choice(["Shopping list", "Recipe idea", "Meeting notes", "Travel plan",
                            "Quick Zoom sync", "Q&A", "Daily journal", "Packing list"])
        body = tg.en_paragraph(rng, 1, 3, "cooking")
        r = rng.random()
        if r < 0.25:
            body += " " + rng.choice(tg.ZH)
        elif r < 0.45:
            body = tg.sprinkle_emoji(rng, body, 1.0)
        elif r < 0.6:
            body += " " + rng.choice(tg.VI)
        elif r < 0.7:
            body += f" Price: {rng.randint(1, 99)}.{rng.randint(0, 99):02d} € (≈ {rng.randint(1, 99)}$)"
        rows.append({"title": title, "body": body})
    return rows


@case
def heavy_unk_sp_tiny_template_continue() -> Case:
    rng = random.Random(109)
    rows = _notes_rows(rng, 200)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "heavy_unk_sp_tiny_template_continue",
        "Heavy UNK: a 120-piece SentencePiece unigram (identity normalization, "
        "character_coverage 0.98, trained on simple English) fed CJK, emoji, Vietnamese, "
        "digits, capitals and symbols. The template literals 【 】 ➜ ✓ are UNK too "
        "(on_template_unk=continue), so every record has literal UNK rows in unk_index.",
        {"data/notes.jsonl": lines_to_bytes(lines)},
        cfg(["data/notes.jsonl"], [["title", "body"]], ["【{title}】 ➜ {body} ✓"],
            "sentencepiece", [SP_TINY], [[64, 128, 256, 512]], [64], "out", [50],
            on_overflow="truncate", on_template_unk="continue"),
        checks=[need_unk(150), need_unk_in_segment_kind("literal"),
                need_unk_in_segment_kind("field")],
    )


@case
def template_unk_abort() -> Case:
    rng = random.Random(110)
    rows = _notes_rows(rng, 40)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "template_unk_abort",
        "Same tokenizer/template as heavy_unk_sp_tiny_template_continue but "
        "on_template_unk=abort: TemplateTokenizerError before anything is written.",
        {"data/notes.jsonl": lines_to_bytes(lines)},
        cfg(["data/notes.jsonl"], [["title", "body"]], ["【{title}】 ➜ {body} ✓"],
            "sentencepiece", [SP_TINY], [[64, 128, 256, 512]], [64], "out", [50],
            on_overflow="truncate", on_template_unk="abort"),
        expect_error="TemplateTokenizerError",
    )


@case
def template_unk_hf_wordpiece_continue() -> Case:
    rng = random.Random(111)
    rows = []
    for i in range(120):
        topic = rng.choice(sorted(tg.TOPICS))
        rows.append({"headline": tg.en_instruction(rng, topic),
                     "summary": tg.en_paragraph(rng, 1, 3, topic)})
    lines = [jline(r, rng) for r in rows]
    return Case(
        "template_unk_hf_wordpiece_continue",
        "HF WordPiece with template literals that are UNK ('📌' and '→' are not in the "
        "vocab; on_template_unk=continue): each record gets the literal UNKs at fixed "
        "segment indices; field text is plain English (few or no field UNKs).",
        {"data/headlines.jsonl": lines_to_bytes(lines)},
        cfg(["data/headlines.jsonl"], [["headline", "summary"]],
            ["📌 {headline}\n→ {summary}"],
            "hf_json", [HF_WP], [[32, 64, 128]], [40], "out", [40],
            on_overflow="truncate", on_template_unk="continue"),
        checks=[need_unk(120), need_unk_in_segment_kind("literal")],
    )


@case
def scalar_field_values() -> Case:
    rng = random.Random(112)
    rows = []
    specials = [0, -1, 1.0, 0.1, 2.5e-07, 1e+20, 123456789012345678901234567890, -0.0,
                True, False, 3.14159, 1e16, 12345.678, 7, "7", "0.5", "True"]
    for i in range(150):
        score = rng.choice([rng.randint(-100, 1000), round(rng.uniform(0, 1), rng.randint(1, 6)),
                            rng.choice(specials)])
        passed = rng.choice([True, False, True, "yes", 1, 0])
        rows.append({"id": i if rng.random() < 0.8 else f"case-{i}",
                     "score": score, "passed": passed,
                     "note": rng.choice(["", tg.en_sentence(rng), tg.en_review(rng)])})
    raw = [jline(r, rng) for r in rows]
    # Hand-written lines to pin number spellings (JSON text -> Python float -> str()).
    raw[10] = '{"id": 10, "score": 1E5, "passed": true, "note": "exponent upper-case"}'
    raw[11] = '{"id": 11, "score": 1e400, "passed": false, "note": "overflows to inf"}'
    raw[12] = '{"id": 12, "score": -0.0, "passed": true, "note": "negative zero"}'
    raw[13] = '{"id": 13, "score": 0.30000000000000004, "passed": true, "note": "float repr"}'
    raw[14] = '{"id": 14, "score": 1.50, "passed": true, "note": "trailing zero dropped"}'
    raw[15] = '{"id": 15, "score": 2E-3, "passed": true, "note": "2E-3 is 0.002"}'
    raw[16] = '{"id": 16, "score": 5e-324, "passed": true, "note": "smallest subnormal"}'
    raw[17] = '{"id": 17, "score": 1.7976931348623157e308, "passed": true, "note": "max double"}'
    raw[18] = '{"id": -9007199254740993, "score": 9007199254740993, "passed": false, "note": "big ints stay exact"}'
    return Case(
        "scalar_field_values",
        "Numbers and booleans as field values rendered with Python str(): ints, big ints "
        "(exact), floats incl. 1E5 -> 100000.0, 1e400 -> inf, -0.0, 5e-324, 0.30000000000000004, "
        "1e+20, 2.5e-07; true/false -> True/False; also numeric-looking strings and empty "
        "notes (empty_fields). Long notes never overflow here; on_overflow=skip.",
        {"data/metrics.jsonl": lines_to_bytes(raw)},
        cfg(["data/metrics.jsonl"], [["id", "score", "passed", "note"]],
            ["#{id} score={score} passed={passed}: {note}"],
            "sentencepiece", [SP_UNI], [[16, 32, 64, 128]], [32], "out", [40],
            on_overflow="skip"),
        checks=[need_empty_fields],
    )


@case
def json_quirks() -> Case:
    lines = [
        '{"key": "nan", "value": NaN}',
        '{"key": "inf", "value": Infinity}',
        '{"key": "-inf", "value": -Infinity}',
        '{"key": "dup", "value": "first", "value": "second wins"}',
        '{"value": "keys in another order", "key": "order"}',
        '{"key": "escapes", "value": "caf\\u00e9 \\ud83d\\ude00 tab\\there \\"quoted\\" back\\\\slash"}',
        '{"key": "newline escape", "value": "line one\\nline two\\r\\nline three"}',
        '   {"key": "padded", "value": "leading and trailing spaces around the object"}   ',
        '\t{"key":"tabs","value":"tab before the object"}\t',
        '{ "key" : "spaced" , "value" : "spaces inside the JSON syntax" }',
        '{"key": "extra", "value": "extra keys are ignored", "null_extra": null, "list": [1, 2], "obj": {"a": {}}}',
        '{"key": "unicode separators", "value": "para\u2029graph and line\u2028sep and nel\u0085end"}',
        '{"key": "zero width", "value": "zero\u200bwidth\u200djoiner\ufeffbom-inside"}',
        '{"key": "braces", "value": "{value} {key} {{}}"}',
        '{"key": "empty", "value": ""}',
        '{"key": "", "value": "empty key value"}',
        '{"key": "bool", "value": false}',
        '{"key": "float", "value": 1.0e-3}',
        '{"key": "dup", "value": "first", "value": "second wins"}',
    ]
    rng = random.Random(113)
    for i in range(40):
        lines.append(jline({"key": f"k{i}", "value": tg.en_sentence(rng)}, rng, 0.5))
    return Case(
        "json_quirks",
        "JSON parsing corner cases as Python's json module sees them: NaN/Infinity/-Infinity "
        "accepted (rendered nan/inf/-inf), duplicate keys (last wins), key order, \\u escapes "
        "and surrogate pairs, escaped \\n/\\r\\n inside strings, whitespace and tabs around "
        "the object, raw U+2028/U+2029/U+0085 inside strings (NOT line breaks), zero-width "
        "chars, field text containing {braces}, extra keys of any type ignored, duplicate rows.",
        {"data/quirks.jsonl": lines_to_bytes(lines)},
        cfg(["data/quirks.jsonl"], [["key", "value"]], ["{key} = {value}"],
            "hf_json", [HF_BPE], [[8, 16, 32, 64]], [16], "out", [20],
            on_overflow="truncate"),
        checks=[need_empty_fields, need_dups()],
    )


@case
def empty_field_values() -> Case:
    rng = random.Random(114)
    rows = []
    for i in range(150):
        topic = rng.choice(sorted(tg.TOPICS))
        r = {"instruction": tg.en_instruction(rng, topic),
             "input": "" if rng.random() < 0.55 else tg.en_paragraph(rng, 1, 2, topic),
             "output": tg.en_answer(rng, 1, 4, topic)}
        if rng.random() < 0.08:
            r["output"] = ""
        if rng.random() < 0.04:
            r["input"] = rng.choice([" ", "\n", "\t"])   # whitespace is not empty
        rows.append(r)
    rows[7] = {"instruction": "", "input": "", "output": ""}
    rows[8] = {"instruction": "", "input": "", "output": ""}
    rows[9] = {"instruction": "Say nothing.", "input": "", "output": ""}
    lines = [jline(r, rng) for r in rows]
    return Case(
        "empty_field_values",
        "Alpaca-style instruction/input/output with many empty inputs, some empty outputs, "
        "two all-empty rows (a record of literal tokens only; also duplicates of each other) "
        "and whitespace-only values (not empty). empty_fields lists field segments in order.",
        {"data/alpaca_like.jsonl": lines_to_bytes(lines)},
        cfg(["data/alpaca_like.jsonl"], [["instruction", "input", "output"]],
            ["{instruction}\n\n{input}\n\n{output}"],
            "sentencepiece", [SP_UNI], [[32, 64, 128, 256]], [64], "out", [50],
            on_overflow="truncate"),
        checks=[need_empty_fields, need_dups()],
    )


@case
def repeated_fields() -> Case:
    rng = random.Random(115)
    words = [("apple", "quả táo"), ("water", "nước"), ("book", "quyển sách"),
             ("friend", "bạn bè"), ("coffee", "cà phê"), ("train", "tàu hỏa"),
             ("rain", "mưa"), ("teacher", "giáo viên"), ("market", "chợ"), ("river", "sông"),
             ("computer", "máy tính"), ("family", "gia đình"), ("", "rỗng"), ("thank you", "")]
    rows = []
    for i in range(120):
        w, t = rng.choice(words)
        if rng.random() < 0.2:
            w = rng.choice(tg.VI).split(",")[0]
            t = tg.en_sentence(rng)
        rows.append({"word": w, "translation": t})
    lines = [jline(r, rng) for r in rows]
    return Case(
        "repeated_fields",
        "A field used twice and two placeholders adjacent with no literal between them: "
        "'{word} {translation} {word}{translation}' -> sequence_template word, token_template, "
        "translation, token_template, word, translation. Empty values appear twice in "
        "empty_fields. Vietnamese translations via SentencePiece BPE.",
        {"data/glossary.jsonl": lines_to_bytes(lines)},
        cfg(["data/glossary.jsonl"], [["word", "translation"]],
            ["{word} {translation} {word}{translation}"],
            "sentencepiece", [SP_BPE], [[8, 16, 32, 64]], [16], "out", [20],
            on_overflow="truncate"),
        checks=[need_empty_fields, need_dups()],
    )


@case
def literal_braces() -> Case:
    rng = random.Random(116)
    rows = []
    for i in range(90):
        name = rng.choice(tg.NAMES)
        text = tg.en_sentence(rng)
        if rng.random() < 0.2:
            text = rng.choice(["use {name} as a placeholder", "set {} = {{}}", "dict = {'a': 1}",
                               "f'{x!r}'", "}{", "{text}"]) + " " + text
        rows.append({"name": name, "text": text})
    lines = [jline(r, rng) for r in rows]
    tmpl = "{{name}} says { not a placeholder } {text} {} {9x} {a-b} }{"
    return Case(
        "literal_braces",
        "Braces that are not placeholders are literal text: template "
        "'{{name}} says { not a placeholder } {text} {} {9x} {a-b} }{' has exactly two "
        "placeholders ({name} inside the doubled braces, and {text}); '{}', '{9x}', '{a-b}', "
        "'{ not a placeholder }' and '}{' stay literal. Field values contain {braces} and "
        "are not re-formatted. build_batch=1.",
        {"data/quotes.jsonl": lines_to_bytes(lines)},
        cfg(["data/quotes.jsonl"], [["name", "text"]], [tmpl],
            "hf_json", [HF_BPE], [[16, 32, 64, 128]], [1], "out", [16],
            on_overflow="truncate"),
    )


@case
def overflow_truncate_multisegment() -> Case:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(SHARED_TOK / "sp_unigram_en.model"))
    rng = random.Random(117)
    max_size = 48
    # Pick rows by where the cut falls, measured with the case's own tokenizer:
    # key = index of the segment in which the running token count reaches 48
    # (None = fits), plus rows of exactly 48 and 49 tokens.
    want = {None: 35, 1: 15, 2: 10, 3: 35, 4: 10, 5: 35, "eq": 4, "eq+1": 4}
    got: dict = {k: [] for k in want}
    for _ in range(200000):
        if all(len(got[k]) >= want[k] for k in want):
            break
        topic = rng.choice(sorted(tg.TOPICS))
        q = (tg.en_long(rng, rng.randint(2, 5), topic) if rng.random() < 0.12
             else tg.en_question(rng, topic))
        c = "" if rng.random() < 0.1 else tg.en_paragraph(rng, 1, 3, topic)
        a = tg.en_paragraph(rng, 1, 3, topic) if rng.random() < 0.5 else rng.choice(
            ["Yes.", "No.", tg.en_sentence(rng, topic)])
        segs = ["Question: ", q, "\nContext: ", c, "\nAnswer: ", a]
        lens = [len(x) for x in sp.encode(segs, out_type=int)]
        total = sum(lens)
        if total == max_size:
            key = "eq"
        elif total == max_size + 1:
            key = "eq+1"
        elif total < max_size:
            key = None
        else:
            run = 0
            for key, ln in enumerate(lens):
                run += ln
                if run >= max_size:
                    break
        if len(got[key]) < want[key]:
            got[key].append({"question": q, "context": c, "answer": a})
    rows = [r for k in want for r in got[k]]
    rng.shuffle(rows)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "overflow_truncate_multisegment",
        "on_overflow=truncate with small units (16/32/48) and a three-field template. Rows "
        "were chosen so the cut lands in every segment after the first: inside question, "
        "inside the '\\nContext: ' literal, inside context, inside the '\\nAnswer: ' literal, "
        "inside answer; segments after the cut keep 0 tokens (also literals). Also rows of "
        "exactly 48 (fit, no overflow row) and 49 tokens. sample_index token_count is the "
        "truncated count (48); overflow_index keeps the original count.",
        {"data/qa.jsonl": lines_to_bytes(lines)},
        cfg(["data/qa.jsonl"], [["question", "context", "answer"]],
            ["Question: {question}\nContext: {context}\nAnswer: {answer}"],
            "sentencepiece", [SP_UNI], [[16, 32, max_size]], [25], "out", [20],
            on_overflow="truncate"),
        checks=[need_overflow("truncate", 50), need_empty_fields],
    )


@case
def overflow_skip_with_duplicates() -> Case:
    rng = random.Random(118)
    rows = chat_rows(rng, 150, long_p=0.15)
    long_rows = [r for r in rows if len(r["response"]) > 600][:3]
    for r in long_rows:                           # duplicates of skipped samples
        rows.insert(rng.randrange(len(rows)), dict(r))
    rows = add_duplicates(rng, rows, 3)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "overflow_skip_with_duplicates",
        "on_overflow=skip: skipped samples keep their sample_id (gaps in sample_index), get "
        "an overflow row with action skip, and are not counted in stats or duplicates "
        "(identical long samples are skipped and produce no duplicate group).",
        {"data/chat.jsonl": lines_to_bytes(lines)},
        cfg(["data/chat.jsonl"], [["prompt", "response"]], ["User: {prompt}\nBot: {response}"],
            "hf_json", [HF_BPE], [[24, 48, 96]], [40], "out", [25],
            on_overflow="skip"),
        checks=[need_overflow("skip", 10)],
    )


def _extend_rows(rng: random.Random, n: int, plan: dict[int, int]) -> list[dict]:
    rows = []
    for i in range(n):
        if i in plan:
            text = tg.en_long(rng, plan[i])
        else:
            text = tg.en_paragraph(rng, 1, 3)
        rows.append({"title": rng.choice(["Note", "Tip", "Fact", "Idea"]), "text": text})
    return rows


@case
def overflow_extend_prompt() -> Case:
    rng = random.Random(119)
    # sentence counts of long samples, in file order: up, down, up, down...
    plan = {5: 6, 11: 5, 20: 9, 26: 7, 33: 8, 47: 14, 52: 4, 60: 12, 71: 15, 80: 10, 95: 20,
            110: 13, 130: 19}
    rows = _extend_rows(rng, 150, plan)
    lines = [jline(r, rng) for r in rows]
    return Case(
        "overflow_extend_prompt",
        "Extend, produced through mintdim's interactive prompt ([2] extend, new unit_size = "
        "token_count, [2] all): added sizes are the running maxima of overflowing token "
        "counts; later overflowing samples that fit an added size go there silently (no "
        "overflow row); every added size gets its own unit dir and appears in manifest sizes.",
        {"data/notes.jsonl": lines_to_bytes(lines)},
        cfg(["data/notes.jsonl"], [["title", "text"]], ["{title}: {text}"],
            "sentencepiece", [SP_BPE], [[32, 64]], [16], "out", [10],
            on_overflow="extend"),
        prompt_action="2", record_on_overflow="extend",
        checks=[need_extend_shape],
    )


@case
def overflow_extend_shared_files() -> Case:
    rng = random.Random(120)
    a = _extend_rows(rng, 60, {3: 5, 9: 8, 15: 4, 30: 10, 44: 7})
    b = _extend_rows(rng, 50, {2: 6, 10: 12, 25: 9, 40: 14})
    b.insert(7, dict(a[9]))        # cross-file duplicate of an overflowing sample
    return Case(
        "overflow_extend_shared_files",
        "Extend (via prompt) across two files of one shared dataset with build_batch=4: "
        "sample_ids continue across files, sizes added while reading file 1 are reused in "
        "file 2; a cross-file duplicate of an extended sample. HF WordPiece.",
        {"data/part1.jsonl": lines_to_bytes([jline(r, rng) for r in a]),
         "data/part2.jsonl": lines_to_bytes([jline(r, rng) for r in b])},
        cfg(["data/part1.jsonl", "data/part2.jsonl"], [["title", "text"]],
            ["{title} - {text}"], "hf_json", [HF_WP], [[24, 48]], [4], "out", [5],
            on_overflow="extend"),
        prompt_action="2", record_on_overflow="extend",
        checks=[need_extend_shape, need_dups(cross_file=True)],
    )


@case
def overflow_extend_mapped() -> Case:
    rng = random.Random(121)
    a = _extend_rows(rng, 70, {4: 6, 12: 9, 20: 5, 33: 12, 50: 8, 60: 15})
    b = chat_rows(rng, 60, long_p=0.2)
    return Case(
        "overflow_extend_mapped",
        "Extend (via prompt) with two output datasets: mintdim asks again for the second "
        "dataset (policy latched per dataset); each dataset's added sizes are independent.",
        {"data/notes.jsonl": lines_to_bytes([jline(r, rng) for r in a]),
         "data/chat.jsonl": lines_to_bytes([jline(r, rng) for r in b])},
        cfg(["data/notes.jsonl", "data/chat.jsonl"], [["title", "text"], ["prompt", "response"]],
            ["{title}: {text}", "<|user|>\n{prompt}\n<|assistant|>\n{response}"],
            "sentencepiece", [SP_UNI], [[32, 64], [48, 96]], [8, 1000], ["out_notes", "out_chat"],
            [6, 9], on_overflow="extend"),
        prompt_action="2", record_on_overflow="extend",
        checks=[need_extend_shape],
    )


@case
def overflow_abort() -> Case:
    rng = random.Random(122)
    rows = _extend_rows(rng, 60, {37: 10})
    return Case(
        "overflow_abort",
        "on_overflow=abort: the first sample longer than max(sizes) (line 38) raises "
        "UnitOverflowError; no expected output.",
        {"data/notes.jsonl": lines_to_bytes([jline(r, rng) for r in rows])},
        cfg(["data/notes.jsonl"], [["title", "text"]], ["{title}: {text}"],
            "sentencepiece", [SP_UNI], [[32, 64, 96]], [16], "out", [10],
            on_overflow="abort"),
        expect_error="UnitOverflowError",
    )


@case
def overflow_prompt_truncate_all() -> Case:
    rng = random.Random(123)
    rows = qa_rows(rng, 100, long_p=0.15)
    return Case(
        "overflow_prompt_truncate_all",
        "Produced through the interactive prompt answering [1] truncate, [2] all; the "
        "script checks the result is byte-identical to on_overflow=truncate, so it is "
        "recorded as truncate.",
        {"data/qa.jsonl": lines_to_bytes([jline(r, rng) for r in rows])},
        cfg(["data/qa.jsonl"], [["question", "context", "answer"]],
            ["Q: {question}\nC: {context}\nA: {answer}"],
            "sentencepiece", [SP_BPE], [[32, 64, 96]], [20], "out", [15],
            on_overflow="truncate"),
        prompt_action="1", record_on_overflow="truncate", compare_with_policy="truncate",
        checks=[need_overflow("truncate", 5)],
    )


@case
def shared_three_files_duplicates() -> Case:
    rng = random.Random(124)
    a = chat_rows(rng, 120)
    b = chat_rows(rng, 90)
    c = chat_rows(rng, 60)
    b.insert(10, dict(a[3]))
    b.insert(40, dict(a[3]))
    c.insert(5, dict(a[50]))
    c.insert(20, dict(b[20]))
    a = add_duplicates(rng, a, 3)
    for r in c:                       # renamed extra keys in the third file
        r["source"] = "forum"
    return Case(
        "shared_three_files_duplicates",
        "Three files into one output dataset (all list configs of length 1): sample_ids run "
        "across files in order, duplicate groups within and across files (one group spans "
        "all three files), samples_per_shard=7 so units have several shards.",
        {"data/a.jsonl": lines_to_bytes([jline(r, rng) for r in a]),
         "data/b.jsonl": lines_to_bytes([jline(r, rng) for r in b]),
         "data/c.jsonl": lines_to_bytes([jline(r, rng) for r in c])},
        cfg(["data/a.jsonl", "data/b.jsonl", "data/c.jsonl"], [["prompt", "response"]],
            ["<|user|>\n{prompt}\n<|assistant|>\n{response}"],
            "sentencepiece", [SP_UNI], [[32, 64, 128, 256]], [50], "out", [7],
            on_overflow="truncate"),
        checks=[need_dups(3, cross_file=True), need_multi_shards(3)],
    )


@case
def mapped_two_outputs() -> Case:
    rng = random.Random(125)
    inst = []
    for i in range(110):
        topic = rng.choice(sorted(tg.TOPICS))
        inst.append({"instruction": tg.en_instruction(rng, topic),
                     "output": tg.en_answer(rng, 1, 4, topic)})
    chat = chat_rows(rng, 90, multilingual=0.15)
    return Case(
        "mapped_two_outputs",
        "Fully mapped: each file has its own fields, template, tokenizer (HF BPE vs HF "
        "WordPiece), sizes, build_batch, output dir and samples_per_shard; sample_ids restart "
        "at 0 in each output; each manifest lists only its own file.",
        {"data/instructions.jsonl": lines_to_bytes([jline(r, rng) for r in inst]),
         "data/chat.jsonl": lines_to_bytes([jline(r, rng) for r in chat])},
        cfg(["data/instructions.jsonl", "data/chat.jsonl"],
            [["instruction", "output"], ["prompt", "response"]],
            ["{instruction}\n\n{output}", "User says: {prompt}\nAssistant replies: {response}"],
            "hf_json", [HF_BPE, HF_WP], [[32, 64, 128], [16, 48, 96, 192]], [16, 1000],
            ["out_a", "out_b"], [5, 11], on_overflow="truncate", on_template_unk="continue"),
        checks=[need_multi_shards(3)],
    )


@case
def mixed_shared_template_mapped_tokenizer() -> Case:
    rng = random.Random(126)
    en = qa_rows(rng, 80, extras=False)
    vi = qa_rows(rng, 70, vi_p=0.9, extras=False)
    en2 = qa_rows(rng, 50, extras=False)
    en2.insert(3, dict(en[0]))     # same sample in another dataset: not a duplicate there
    return Case(
        "mixed_shared_template_mapped_tokenizer",
        "Mixed: shared fields/template/sizes/build_batch/samples_per_shard, tokenizer mapped "
        "per file (SP unigram, SP BPE, SP unigram again with the same path string) and one "
        "output dir per file. Duplicates are per output dataset only.",
        {"data/en.jsonl": lines_to_bytes([jline(r, rng) for r in en]),
         "data/vi.jsonl": lines_to_bytes([jline(r, rng) for r in vi]),
         "data/en2.jsonl": lines_to_bytes([jline(r, rng) for r in en2])},
        cfg(["data/en.jsonl", "data/vi.jsonl", "data/en2.jsonl"],
            [["question", "context", "answer"]], ["Q: {question}\nC: {context}\nA: {answer}"],
            "sentencepiece", [SP_UNI, SP_BPE, SP_UNI], [[32, 64, 128, 256]], [30],
            ["out_en", "out_vi", "out_en2"], [12], on_overflow="truncate"),
    )


@case
def multishard_empty_units() -> Case:
    rng = random.Random(127)
    a, b = [], []
    for i in range(70):
        a.append({"text": rng.choice([tg.en_sentence(rng), rng.choice(tg.VI),
                                      " ".join(rng.choice(tg.NAMES) for _ in range(rng.randint(1, 3)))])})
    for i in range(45):
        b.append({"text": tg.en_paragraph(rng, 1, 4)})
    return Case(
        "multishard_empty_units",
        "Many units, two files into one dataset, samples_per_shard=3, build_batch=10: "
        "several shards per unit (the last one short), shard boundaries across batches and "
        "files, a 1-token unit, and declared units that receive nothing (unit_256, unit_512, "
        "unit_1024 -> EMPTY_UNIT.md).",
        {"data/short.jsonl": lines_to_bytes([jline(r, rng) for r in a]),
         "data/long.jsonl": lines_to_bytes([jline(r, rng) for r in b])},
        cfg(["data/short.jsonl", "data/long.jsonl"], [["text"]], ["{text}"],
            "sentencepiece", [SP_BPE], [[1, 2, 8, 16, 24, 32, 64, 128, 256, 512, 1024]], [10],
            "out", [3], on_overflow="abort"),
        checks=[need_empty_unit, need_multi_shards(5), need_no_overflow,
                lambda out: [(out / f"unit_{u}" / "EMPTY_UNIT.md").stat() for u in (256, 512, 1024)]],
    )


@case
def line_endings_whitespace() -> Case:
    rng = random.Random(128)
    rows = chat_rows(rng, 160, long_p=0.0)
    rows[5]["prompt"] = "Line\u2028separator, next\u0085line and para\u2029graph are not line breaks."
    rows[6]["response"] = "Escaped breaks stay inside the value:\nline 2\r\nline 3\rline 4"
    js = [jline(r, rng) for r in rows]

    # File 1: CRLF everywhere, blank CRLF lines, whitespace-only lines.
    f1 = []
    for i, ln in enumerate(js[:60]):
        if i in (0, 13, 27):
            f1.append("")
        if i in (8, 30):
            f1.append("   \t  ")
        f1.append(ln)
    f1.append(js[2])                 # duplicate inside the file
    crlf = "\r\n".join(f1) + "\r\n"

    # File 2: mixed \n, \r\n and lone \r; unicode whitespace-only lines; no final newline.
    eols = ["\n", "\r\n", "\r"]
    # whitespace-only line contents: skipped (str.strip() == "") but never line breaks
    ws_only = ["\u3000", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
               "\u2029", "\u00a0", " \t ", ""]
    parts = ["\r\n"]                  # file starts with an empty line
    for i, ln in enumerate(js[60:140]):
        lead = rng.choice(["", "", "", " ", "\t"])
        trail = rng.choice(["", "", "", "  ", "\t"])
        parts.append(lead + ln + trail)
        parts.append(eols[i % 3])
        if i % 7 == 3:
            parts.append(ws_only[(i // 7) % len(ws_only)])
            parts.append(eols[(i // 7) % 2])      # "\n" or "\r\n" after it
    parts.append(js[0])              # cross-file duplicate, last line, no newline
    mixed = "".join(parts)

    # File 3: LF, single sample per line, last line without newline.
    f3 = "\n".join(js[140:]) + "\n\n" + js[70]

    return Case(
        "line_endings_whitespace",
        "Line splitting and blank lines: a CRLF file with blank and whitespace-only lines; a "
        "file mixing \\n, \\r\\n and lone \\r, starting with an empty line, with leading/"
        "trailing spaces/tabs around JSON, lines made only of unicode whitespace (U+3000, "
        "\\f, \\v, \\x1c, U+0085, U+2028, NBSP: skipped, but they do not split lines) and no "
        "final newline; a third LF file ending without newline. Raw U+2028/U+0085 inside a "
        "JSON string are part of the value. source_line counts physical lines.",
        {"data/crlf.jsonl": crlf.encode("utf-8"), "data/mixed_eol.jsonl": mixed.encode("utf-8"),
         "data/lf_no_final_newline.jsonl": f3.encode("utf-8")},
        cfg(["data/crlf.jsonl", "data/mixed_eol.jsonl", "data/lf_no_final_newline.jsonl"],
            [["prompt", "response"]], ["<|user|>\n{prompt}\n<|assistant|>\n{response}"],
            "sentencepiece", [SP_UNI], [[16, 32, 64, 128, 256]], [16], "out", [10],
            on_overflow="truncate"),
        checks=[need_dups(2, cross_file=True)],
    )


def _error_case(name, desc, seed, lines, expect, fields=None, template=None):
    return Case(
        name, desc, {"data/train.jsonl": lines_to_bytes(lines)},
        cfg(["data/train.jsonl"], [fields or ["instruction", "output"]],
            [template or "{instruction}\n{output}"], "sentencepiece", [SP_UNI],
            [[32, 64, 128, 256]], [8], "out", [10], on_overflow="truncate"),
        expect_error=expect,
    )


def _ok_lines(rng, n):
    return [jline({"instruction": tg.en_instruction(rng), "output": tg.en_answer(rng, 1, 3)}, rng)
            for _ in range(n)]


@case
def error_invalid_json() -> Case:
    rng = random.Random(129)
    lines = _ok_lines(rng, 45)
    lines[22] = "{'instruction': 'single quotes are not JSON', 'output': 'x'}"
    lines[30] = '{"instruction": "trailing comma", "output": "x",}'
    return _error_case("error_invalid_json",
                       "Line 23 is not valid JSON (single quotes) after 22 good lines: "
                       "SourceParseError naming data/train.jsonl line 23 (build_batch=8, so "
                       "earlier batches were already written when it fails).",
                       129, lines, "SourceParseError")


@case
def error_json_array_line() -> Case:
    rng = random.Random(130)
    lines = _ok_lines(rng, 40)
    lines[17] = '[{"instruction": "an array of objects", "output": "is not an object"}]'
    return _error_case("error_json_array_line",
                       "Line 18 is a JSON array (valid JSON, not an object): SourceParseError.",
                       130, lines, "SourceParseError")


@case
def error_missing_field() -> Case:
    rng = random.Random(131)
    lines = _ok_lines(rng, 40)
    lines[25] = json.dumps({"instruction": "where is the output?", "answer": "wrong key"})
    return _error_case("error_missing_field",
                       "Line 26 lacks the declared field 'output' (has 'answer' instead): "
                       "SampleSchemaError.", 131, lines, "SampleSchemaError")


@case
def error_utf8_bom() -> Case:
    rng = random.Random(132)
    lines = _ok_lines(rng, 40)
    lines[0] = "\ufeff" + lines[0]
    return _error_case("error_utf8_bom",
                       "The file starts with a UTF-8 BOM: the first line is not valid JSON "
                       "for Python's json.loads (utf-8, not utf-8-sig): SourceParseError at "
                       "line 1.", 132, lines, "SourceParseError")


# ---------------------------------------------------------------------------
# Generation driver
# ---------------------------------------------------------------------------

def _copy_case_inputs(case_dir: Path, dest: Path) -> None:
    for name in ("case.json", "data", "tok"):
        src = case_dir / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        elif src.exists():
            shutil.copy2(src, dest / name)


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _out_dirs(config: dict) -> list[str]:
    out = config["output"]
    return [out] if isinstance(out, str) else list(dict.fromkeys(out))


def _run_in_temp(case_dir: Path, config_on_overflow: str, prompt_action: str | None):
    tmp = Path(tempfile.mkdtemp(prefix="mintdim_golden_"))
    try:
        shutil.copytree(SHARED_TOK, tmp / "_tokenizers")
        work = tmp / case_dir.name
        work.mkdir()
        _copy_case_inputs(case_dir, work)
        res = run_reference(work, config_on_overflow, prompt_action)
        trees = {}
        if res["status"] == "ok":
            for d in _out_dirs(json.loads((work / "case.json").read_text("utf-8"))):
                trees[d] = work / d
            # copy out before the temp dir goes away
            keep = Path(tempfile.mkdtemp(prefix="mintdim_golden_out_"))
            for d, p in trees.items():
                shutil.copytree(p, keep / d)
                trees[d] = keep / d
        return res, trees
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def verify_output(out: Path) -> None:
    for name in ("manifest.json", "length_field.json", "histogram.json", "stats.json",
                 "sample_index.jsonl", "unk_index.jsonl", "overflow_index.jsonl",
                 "duplicate_index.jsonl"):
        assert (out / name).is_file(), f"{out}: missing {name}"
    units = sorted(out.glob("unit_*"))
    assert units, f"{out}: no unit dirs"
    shards = list(out.glob("unit_*/shard_*.bin"))
    assert shards, f"{out}: no shards"
    for u in units:
        has = list(u.glob("shard_*.bin"))
        assert has or (u / "EMPTY_UNIT.md").is_file(), f"{u}: neither shards nor EMPTY_UNIT.md"
        assert not (u / "UNIT_BUILD_FAILED.md").exists()
    rows = _rows(out, "sample_index.jsonl")
    assert rows, f"{out}: empty sample_index"
    lf = json.loads((out / "length_field.json").read_text("utf-8"))
    n = len(lf["sequence_template"])
    bpt = 2 if lf["token_dtype"] == "uint16" else 4
    total = 0
    for u in units:
        size = int(u.name.split("_")[1])
        for s in u.glob("shard_*.bin"):
            sz = s.stat().st_size
            rec = (1 + n + size) * bpt
            assert sz > 0 and sz % rec == 0, f"{s}: size {sz} not a multiple of {rec}"
            total += sz // rec
    assert total == len(rows), f"{out}: {total} records in shards, {len(rows)} index rows"


def generate_case(name: str) -> dict:
    c = CASES[name]()
    assert c.name == name, (c.name, name)
    case_dir = GOLDEN / name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    for rel, data in c.files.items():
        p = case_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    for train in c.tokenizers:
        train(case_dir)

    config = dict(c.config)
    recorded = c.record_on_overflow or config["on_overflow"]
    run_policy = "prompt" if c.prompt_action else config["on_overflow"]
    case_json = {"description": c.description, **config, "on_overflow": recorded,
                 "expect_error": None}
    # What the worker sees: the policy it must pass to run().
    (case_dir / "case.json").write_text(
        json.dumps({**case_json, "on_overflow": run_policy}, ensure_ascii=False, indent=2) + "\n",
        encoding="utf-8")
    res, trees = _run_in_temp(case_dir, run_policy, c.prompt_action)
    info = {"case": name, "status": res["status"]}
    try:
        if res["status"] == "error":
            if c.expect_error != res["class"]:
                raise AssertionError(f"{name}: mintdim raised {res['class']}: {res['message']}"
                                     f" (expected {c.expect_error})")
            case_json["expect_error"] = res["class"]
            info["error"] = res["class"]
            info["message"] = res["message"]
        else:
            if c.expect_error:
                raise AssertionError(f"{name}: expected {c.expect_error}, build succeeded")
            if c.prompt_action:
                m = re.search(r"prompts answered: (\{.*\})", res["log"])
                info["prompts"] = m.group(1) if m else "?"
                assert m and "'action': 0" not in m.group(1), f"{name}: no prompt was answered"
            if c.compare_with_policy:
                # Same inputs, plain non-interactive policy: must be byte-identical.
                (case_dir / "case.json").write_text(json.dumps(
                    {**case_json, "on_overflow": c.compare_with_policy}, ensure_ascii=False,
                    indent=2) + "\n", encoding="utf-8")
                res2, trees2 = _run_in_temp(case_dir, c.compare_with_policy, None)
                assert res2["status"] == "ok", res2
                for d in trees:
                    same = _tree_bytes(trees[d]) == _tree_bytes(trees2[d])
                    info["identical_to_" + c.compare_with_policy] = same
                    assert same, f"{name}: prompt run differs from on_overflow={c.compare_with_policy}"
                    shutil.rmtree(trees2[d].parent, ignore_errors=True)
            for d, src in trees.items():
                dest = case_dir / "expected" / d
                shutil.copytree(src, dest)
                verify_output(dest)
                for chk in c.checks:
                    chk(dest)
            info["outputs"] = {
                d: json.loads((case_dir / "expected" / d / "stats.json").read_text("utf-8"))
                for d in trees}
    finally:
        for src in trees.values():
            shutil.rmtree(src.parent, ignore_errors=True)
    (case_dir / "case.json").write_text(
        json.dumps(case_json, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return info


README_HEAD = """\
# Golden cases: expected output of mintdim 0.2.1

Each directory is one build, generated by `tools/make_golden.py` and run with the
public reference implementation, `mintdim` 0.2.1. The product (`mintdim_beam`)
must reproduce every `expected/` tree byte for byte.

## Layout

- `case.json`: the exact API arguments. Paths are relative to the case directory,
  and the build runs with the case directory as the working directory. Keys:
  `files`, `fields`, `templates`, `tokenizer {type, files}`, `sizes`, `build_batch`,
  `output` (a string, or a list with one dir per file), `samples_per_shard`,
  `on_overflow`, `on_template_unk`, `expect_error` (null, or the name of the
  exception class mintdim raised), and `description` (informational only).
- `data/*.jsonl`: the inputs. Write them byte-exactly; some have CRLF, lone CR,
  BOM and unicode whitespace on purpose.
- `tok/`: tokenizers trained for this case only. Shared tokenizers live in
  `_tokenizers/` and are referenced as `../_tokenizers/<file>`. That string is
  recorded verbatim in `manifest.json` (see `_tokenizers/README.md`).
- `expected/<output dir>/`: the complete mintdim output. Error cases have none:
  compare the exception class with `expect_error`. (mintdim leaves partial
  output with `UNIT_BUILD_FAILED.md` behind; the golden set does not pin its contents.)

`"on_overflow": "extend"` cases come from mintdim's interactive prompt, driven
through a pseudo-terminal with the answers [2] extend, new unit_size =
token_count, [2] all. mintdim asks again for each output dataset.
`overflow_prompt_truncate_all` was made with [1] truncate, [2] all. The
generator checks that it is byte-identical to `on_overflow="truncate"`, so it is
recorded as truncate.

## Regenerate / check

    python3.12 -m venv V && V/bin/pip install mintdim==0.2.1 'sentencepiece==0.2.1' tokenizers
    V/bin/python tools/make_golden.py                 # all cases (about 15 s), deterministic
    V/bin/python tools/make_golden.py CASE ...        # some cases
    python tools/crosscheck_golden.py                 # any env with sentencepiece/tokenizers/numpy

You need sentencepiece 0.2.1. mintdim reads UNK surfaces with
`out_type="immutable_proto"`, and the 0.2.2 and 0.2.3 wheels reject that, so the
first SentencePiece UNK crashes mintdim. `crosscheck_golden.py` is an independent,
mintdim-free model of FORMAT.md. It re-derives every case and compares bytes. With
sentencepiece 0.2.3 / tokenizers 0.23.3 (the product's environment) all cases match,
so the token ids do not depend on the sentencepiece version.

## Behaviour of mintdim 0.2.1 pinned by these cases

- Lines are split by Python universal newlines (`\\n`, `\\r\\n`, lone `\\r`). `\\v`,
  `\\f`, `\\x1c`-`\\x1e`, U+0085, U+2028 and U+2029 do NOT end a line. A line that is
  only (unicode) whitespace is skipped and uses no sample_id. `source_line` is the
  physical line number.
- Python `json.loads` semantics: NaN/Infinity accepted, duplicate keys (last wins),
  big ints exact; `str()` rendering (`1E5` gives `100000.0`, `1e400` gives `inf`, `true`
  gives `True`). A UTF-8 BOM makes line 1 invalid JSON (mintdim-beam skips it on purpose:
  docs/compatibility.md).
- Each segment is encoded separately, so a whitespace-only literal can be 0 tokens
  (SentencePiece nmt_nfkc maps `\\n` to a space and drops it; HF Whitespace drops
  it). A literal's length can be 0 even though it is never listed in `empty_fields`.
- `empty_fields` is computed from the rendered text, before truncation. A field cut
  to 0 tokens by truncation is not listed.
- Truncation keeps segments from the start, so every segment after the cut has
  length 0, literals included.
- UNK surfaces (`unk_chars`): SentencePiece puts a run of unknown characters into ONE
  UNK piece, and the surface is the original text (before nmt_nfkc). HF BPE gives
  one [UNK] per character, or one per run with `fuse_unk`. HF WordPiece gives one
  [UNK] per pre-token "word": the whole word, accents kept, and each CJK char is its
  own word. ByteLevel BPE never produces UNK.
- Skipped samples keep their sample_id and are absent from stats and duplicates.

## Cases
"""


def write_readme() -> None:
    parts = [README_HEAD]
    for name in CASES:
        c = json.loads((GOLDEN / name / "case.json").read_text("utf-8"))
        outs = [c["output"]] if isinstance(c["output"], str) else c["output"]
        meta = (f"{c['tokenizer']['type']} `{', '.join(dict.fromkeys(c['tokenizer']['files']))}`; "
                f"on_overflow={c['on_overflow']}, on_template_unk={c['on_template_unk']}; "
                + (f"expect_error={c['expect_error']}" if c["expect_error"]
                   else f"outputs: {', '.join(f'`{o}`' for o in outs)}"))
        parts.append(f"\n### `{name}`\n\n{c['description']}\n\n_{meta}_\n")
    (GOLDEN / "README.md").write_text("".join(parts), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1], argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-tokenizers", action="store_true",
                    help="reuse tests/golden/_tokenizers instead of retraining")
    args = ap.parse_args(argv)
    if args.list:
        for n in CASES:
            print(n)
        return 0
    import mintdim
    if mintdim.__version__ != "0.2.1":
        print(f"mintdim {mintdim.__version__} found; 0.2.1 required", file=sys.stderr)
        return 2
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s): {unknown}")
    if not (args.keep_tokenizers and SHARED_TOK.is_dir()):
        build_shared_tokenizers()
    if not args.cases:
        for stale in GOLDEN.iterdir() if GOLDEN.is_dir() else []:
            if stale.is_dir() and not stale.name.startswith("_") and stale.name not in CASES:
                shutil.rmtree(stale)
    summary = []
    for n in names:
        t0 = time.time()
        info = generate_case(n)
        info["seconds"] = round(time.time() - t0, 1)
        summary.append(info)
        short = info.get("error") or ", ".join(
            f"{d}: {s['total_samples']} samples/{s['samples_with_unk']} unk/"
            f"{s['duplicate_groups']} dup" for d, s in info.get("outputs", {}).items())
        print(f"[make_golden] {n}: {info['status']} ({short}) {info['seconds']}s", flush=True)
    if all((GOLDEN / n / "case.json").exists() for n in CASES):
        write_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
