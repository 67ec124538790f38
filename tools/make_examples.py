#!/usr/bin/env python3
"""Recreate the demo data set and tokenizer under ``examples/``.

Writes (deterministically; seeded generators from ``tools/textgen.py``):

    examples/data/instructions.jsonl   ~2,000 rows {instruction, input, output}
    examples/data/chat.jsonl           ~800 rows {prompt, response}
    examples/tokenizer/demo.model      SentencePiece unigram, vocab 2000,
                                       unk=0 bos=1 eos=2 pad=3, trained on both files,
                                       user symbols <|system|> <|user|> <|assistant|>

The instruction file is mostly English with some Vietnamese rows and a few
emoji, empty ``input`` values, exact duplicates, a handful of very long
samples (far beyond a 512-token unit) and two blank lines. The chat file has
a few duplicates and long answers too.

Usage (any Python >= 3.10 with sentencepiece; training is single-threaded, so
the same sentencepiece version gives the same model bytes):

    python tools/make_examples.py
"""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(HERE))
import textgen as tg  # noqa: E402

PAIRS = [
    ("Good morning, how are you today?", "Chào buổi sáng, hôm nay bạn thế nào?"),
    ("I would like a cup of iced milk coffee.", "Tôi muốn một ly cà phê sữa đá."),
    ("Where is the nearest train station?", "Ga tàu gần nhất ở đâu?"),
    ("Please back up your data before updating.", "Vui lòng sao lưu dữ liệu trước khi cập nhật."),
    ("The meeting starts at nine o'clock.", "Cuộc họp bắt đầu lúc chín giờ."),
    ("Thank you very much for your help yesterday!", "Cảm ơn bạn rất nhiều vì đã giúp đỡ hôm qua!"),
    ("Learning a new language takes patience.", "Học một ngôn ngữ mới cần sự kiên nhẫn."),
    ("It is raining heavily in Hanoi.", "Trời đang mưa to ở Hà Nội."),
    ("How much does this shirt cost?", "Cái áo này giá bao nhiêu?"),
    ("My sister is a nurse at a big hospital.", "Chị tôi là y tá ở một bệnh viện lớn."),
]
REVIEW_LABELS = ["positive", "negative", "neutral", "positive", "negative", "neutral"]
# instruction patterns that make sense without an input
STANDALONE = [p for p in tg.INSTRUCTION_PATTERNS if "{" in p]
VI_INSTRUCTIONS = [
    "Hãy tóm tắt đoạn văn sau trong một câu.",
    "Viết lại câu sau cho trang trọng hơn.",
    "Trả lời câu hỏi dựa trên đoạn văn.",
    "Liệt kê ba ý chính của đoạn văn sau.",
    "Giải thích ngắn gọn cho người mới bắt đầu.",
]


def instruction_row(rng: random.Random) -> dict:
    r = rng.random()
    topic = rng.choice(sorted(tg.TOPICS))
    if r < 0.08:                               # Vietnamese instruction
        return {"instruction": rng.choice(VI_INSTRUCTIONS),
                "input": tg.vi_text(rng, 2, 4),
                "output": tg.sprinkle_emoji(rng, rng.choice(tg.VI), 0.15)}
    if r < 0.11:                               # translation en <-> vi
        en, vi = rng.choice(PAIRS)
        if rng.random() < 0.5:
            return {"instruction": "Translate the following sentence into Vietnamese.",
                    "input": en, "output": vi}
        return {"instruction": "Translate the following sentence into English.",
                "input": vi, "output": en}
    if r < 0.15:                               # sentiment
        i = rng.randrange(len(tg.REVIEWS))
        review = tg.REVIEWS[i] + " " + tg.en_free_sentence(rng)
        label = REVIEW_LABELS[i]
        return {"instruction": "Classify the sentiment of the following review as "
                               "positive, negative or neutral.",
                "input": tg.sprinkle_emoji(rng, review, 0.2), "output": label}
    if r < 0.22:                               # arithmetic word problems
        a, b = rng.randint(2, 500), rng.randint(2, 500)
        name = rng.choice(tg.NAMES)
        noun = rng.choice(tg.LEX_NOUNS)
        return {"instruction": f"{name} has {a} {noun}s and buys {b} more. How many {noun}s "
                               f"does {name} have now?",
                "input": "", "output": f"{name} has {a} + {b} = {a + b} {noun}s."}
    if r < 0.32:                               # code
        lang, task, code = tg.code_task(rng)
        return {"instruction": task, "input": code if "Fix" in task or "Explain" in task else "",
                "output": code if not ("Fix" in task or "Explain" in task)
                else tg.en_paragraph(rng, 1, 3, "programming")}
    if r < 0.45:                               # summarization / QA with input
        passage = tg.en_paragraph(rng, 3, 7, topic)
        return {"instruction": rng.choice(["Summarize the following text in one sentence.",
                                           "Answer the question using the context.",
                                           "List the key points of the passage."]),
                "input": passage, "output": tg.en_sentence(rng, topic)}
    if r < 0.62:                               # everyday text: rewrite / story / extract
        kind = rng.randrange(4)
        if kind == 0:
            return {"instruction": rng.choice(["Rewrite the sentence below so that it sounds "
                                               "more formal.", "Fix the grammar in the "
                                               "following text.", "Paraphrase the text."]),
                    "input": tg.en_free_sentence(rng), "output": tg.en_free_sentence(rng)}
        if kind == 1:
            return {"instruction": "Write a short story that starts with the sentence below.",
                    "input": tg.en_free_sentence(rng),
                    "output": tg.en_free_paragraph(rng, 4, 10)}
        if kind == 2:
            text = tg.en_free_paragraph(rng, 2, 5)
            return {"instruction": "Extract every place name and date from the text.",
                    "input": text, "output": tg.en_free_sentence(rng)}
        return {"instruction": f"Describe a {rng.choice(tg.LEX_ADJ)} "
                               f"{rng.choice(tg.LEX_NOUNS)} in two sentences.",
                "input": "", "output": tg.en_free_paragraph(rng, 2, 2)}
    out = tg.en_answer(rng, 1, 6, topic)
    if rng.random() < 0.3:
        out += " " + tg.en_free_sentence(rng)
    return {"instruction": tg._fill(rng, rng.choice(STANDALONE), topic), "input": "",
            "output": tg.sprinkle_emoji(rng, out, 0.04)}


def build_instructions(rng: random.Random) -> str:
    rows = [instruction_row(rng) for _ in range(1960)]
    for _ in range(6):                         # very long samples
        topic = rng.choice(sorted(tg.TOPICS))
        rows.insert(rng.randrange(len(rows)),
                    {"instruction": f"Write a detailed essay about {rng.choice(tg.TOPICS[topic]['nouns'])}.",
                     "input": "", "output": tg.en_long(rng, rng.randint(60, 120), topic)})
    for _ in range(30):                        # exact duplicates
        rows.insert(rng.randrange(len(rows)), dict(rng.choice(rows)))
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    for pos in sorted(rng.sample(range(100, len(lines)), 2), reverse=True):
        lines.insert(pos, "")                  # a couple of blank lines
    return "\n".join(lines) + "\n"


def build_chat(rng: random.Random) -> str:
    rows = []
    for _ in range(790):
        topic = rng.choice(sorted(tg.TOPICS))
        prompt = tg.en_question(rng, topic)
        if rng.random() < 0.25:
            prompt = tg.en_free_sentence(rng) + " " + rng.choice(
                ["What do you think?", "Can you explain why?", "Is that normal?",
                 "How should I respond?", "Any advice?"])
        if rng.random() < 0.07:
            prompt = tg.sprinkle_emoji(rng, rng.choice(tg.VI), 0.3)
            response = tg.vi_text(rng, 1, 3)
        elif rng.random() < 0.02:
            response = tg.en_long(rng, rng.randint(40, 80), topic)
        else:
            response = tg.en_answer(rng, 1, 5, topic)
            if rng.random() < 0.3:
                response = tg.en_free_paragraph(rng, 1, 3) + "\n\n" + response
        rows.append({"prompt": prompt, "response": response})
    for _ in range(10):
        rows.insert(rng.randrange(len(rows)), dict(rng.choice(rows)))
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def train_tokenizer(texts: list[str], out: Path) -> None:
    import sentencepiece as spm

    lines = []
    for t in texts:
        lines.extend(x for x in t.split("\n") if x.strip())
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="unigram",
        vocab_size=2000, character_coverage=0.9995, pad_id=3, unk_id=0, bos_id=1, eos_id=2,
        user_defined_symbols=["<|system|>", "<|user|>", "<|assistant|>"],
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        minloglevel=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buf.getvalue())


def main() -> int:
    rng = random.Random(20240501)
    instructions = build_instructions(rng)
    chat = build_chat(rng)
    data = EXAMPLES / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "instructions.jsonl").write_bytes(instructions.encode("utf-8"))
    (data / "chat.jsonl").write_bytes(chat.encode("utf-8"))
    corpus = []
    for text in (instructions, chat):
        for line in text.splitlines():
            if line.strip():
                corpus.extend(v for v in json.loads(line).values() if v)
    train_tokenizer(corpus, EXAMPLES / "tokenizer" / "demo.model")
    for p in (data / "instructions.jsonl", data / "chat.jsonl",
              EXAMPLES / "tokenizer" / "demo.model"):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
