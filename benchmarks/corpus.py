"""A realistic benchmark corpus, generated deterministically: instruction / input /
output samples from a few tokens to past the largest unit, some duplicates, some text
the tokenizers will not know (rare scripts, emoji)."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import textgen  # noqa: E402

TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"
FIELDS = ["instruction", "input", "output"]
SIZES = [64, 128, 256, 512, 1024]
RARE = ["𓀀𓁐", "ᚠᚢᚦ", "ꦲꦏ", "🜲🜁", "ⴰⵣⵓⵍ", "𐎠𐎡"]
SYLLABLES = ("ka ro mi sen tal vo ri dan el mor qu ash lin pe tor za ne ul gra fen bi "
             "stro hal ju nix cor dra vel ob sta min yu rek ter pha lo wen gis").split()


def name(rng: random.Random) -> str:
    """Proper nouns and identifiers: the long tail that makes a real vocabulary."""
    word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
    style = rng.random()
    if style < 0.5:
        return word.capitalize()
    if style < 0.7:
        return f"{word}_{rng.choice(SYLLABLES)}{rng.randint(0, 99)}"
    if style < 0.85:
        return f"{word}{rng.randint(1, 9999)}"
    return word


def sprinkle_names(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    for _ in range(rng.randint(1, 4)):
        words.insert(rng.randint(0, len(words)), name(rng))
    return " ".join(words)


def sample(rng: random.Random) -> dict:
    kind = rng.random()
    if kind < 0.55:
        row = {"instruction": textgen.en_instruction(rng), "input": "",
               "output": textgen.en_answer(rng, 1, 4)}
    elif kind < 0.75:
        row = {"instruction": textgen.en_question(rng), "input": textgen.en_paragraph(rng, 1, 3),
               "output": textgen.en_answer(rng, 2, 8)}
    elif kind < 0.85:
        task, snippet, answer = textgen.code_task(rng)
        row = {"instruction": task, "input": snippet, "output": answer}
    elif kind < 0.95:
        source, target = textgen.multilingual_text(rng)
        row = {"instruction": "Translate the text.", "input": source, "output": target}
    else:  # long: past the largest unit
        row = {"instruction": textgen.en_instruction(rng), "input": textgen.en_long(rng, 60),
               "output": textgen.en_long(rng, 40)}
    row["output"] = sprinkle_names(rng, row["output"])
    if rng.random() < 0.5:
        row["instruction"] = sprinkle_names(rng, row["instruction"])
    if rng.random() < 0.03:
        row["output"] += " " + rng.choice(RARE)
    return row


def write_corpus(path: Path, n: int, seed: int = 2026, make_row=None) -> Path:
    """`n` rows of `make_row(rng)` (default: `sample`), 2% of them repeats of earlier
    rows; written once (an existing file is kept)."""
    make_row = make_row or sample
    if path.exists():
        return path
    rng = random.Random(seed)
    pool = []
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as handle:
        for i in range(n):
            if pool and rng.random() < 0.02:
                row = rng.choice(pool)  # duplicates
            else:
                row = make_row(rng)
                if len(pool) < 2000:
                    pool.append(row)
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.rename(path)
    return path


def write_repeating_corpus(path: Path, n: int, distinct: int = 50_000, seed: int = 2026) -> Path:
    """`n` rows: the first `distinct` rows of `write_corpus` cycled, so each record
    occurs about n / distinct times (60 at 3 million): the corpus of issue 28 item 4,
    where every sample is in a duplicate group. Written once (an existing file is kept)."""
    if path.exists():
        return path
    with open(write_corpus(path.with_name(f"corpus_{distinct}.jsonl"), distinct, seed),
              encoding="utf-8") as src:
        rows = src.readlines()
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(rows[i % len(rows)])
    tmp.rename(path)
    return path


def train_tokenizers(corpus: Path, workdir: Path, vocab: int = 8000) -> dict:
    """A SentencePiece unigram, a Hugging Face BPE (whitespace pre-tokenizer) and a
    byte-level BPE (GPT-2's pre-tokenizer, what the fast engine takes), `vocab` pieces."""
    import sentencepiece as spm
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    sp_path, hf_path = workdir / "sp8k.model", workdir / "hf_bpe8k.json"
    text = workdir / "train_text.txt"
    if not text.exists():
        with open(corpus, encoding="utf-8") as src, open(text, "w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if i >= 30000:
                    break
                row = json.loads(line)
                dst.write("\n".join(row[f] for f in FIELDS if row[f]) + "\n")
    if not sp_path.exists():
        spm.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(sp_path.with_suffix("")), vocab_size=vocab,
            pad_id=3, character_coverage=0.9995, num_threads=1, minloglevel=2,
            input_sentence_size=200000, shuffle_input_sentence=False)
    if not hf_path.exists():
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train([str(text)], trainers.BpeTrainer(vocab_size=vocab, special_tokens=["[UNK]", "[PAD]"],
                                                  limit_alphabet=300))
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
        tok.save(str(hf_path))
    byte_path = workdir / "hf_bytelevel8k.json"
    if not byte_path.exists():
        from tokenizers import decoders

        tok = Tokenizer(models.BPE(unk_token="[UNK]"))  # mintdim 0.2.1 asks for an UNK
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train([str(text)], trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=["[UNK]", "[PAD]"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
        tok.save(str(byte_path))
    return {"sentencepiece": sp_path, "hf_json": hf_path, "hf_bytelevel": byte_path}
