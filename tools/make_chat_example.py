#!/usr/bin/env python3
"""Recreate the bundled chat example under ``examples/chat/`` (or OUT_DIR).

Writes, deterministically (one seeded generator, tools/textgen.py's vocabulary, BPE
training single-threaded):

    dialogues.jsonl            1,000 dialogues, OpenAI `messages` form: a third with
                               a system prompt, 1-3 user/assistant exchanges (520 /
                               300 / 180), short and long answers, code, arithmetic,
                               translation, Vietnamese, Chinese, Japanese, Korean and
                               emoji lines, 33 with `weight: 0` on their first
                               assistant turn (context, not trained), two quoting
                               special-token text (kept as plain text by a build) and
                               a few exact duplicates (short chit-chat)
    dialogues_sharegpt.jsonl   the first 200 of them as ShareGPT `conversations`
                               (from: system / human / gpt, value, weight)
    preference.jsonl           300 preference pairs in TRL's three shapes: strings
                               {prompt, chosen, rejected}; message lists with an
                               explicit prompt; full message lists with an implicit
                               prompt (no `prompt` key)
    tokenizer.json             byte-level BPE (ByteLevel pre-tokenizer and decoder, no
                               UNK), vocab 2,000, trained on the text above; special
                               tokens <|endoftext|> <|im_start|> <|im_end|>
                               <|begin_of_text|> <|start_header_id|> <|end_header_id|>
                               <|eot_id|> (ids 0-6)
    tokenizer_config.json      bos <|begin_of_text|>, eos <|im_end|>, pad <|endoftext|>,
                               chat_template: the built-in ChatML template

Usage (from the repository root, with the package installed for the template text):

    python tools/make_chat_example.py [OUT_DIR]      # default examples/chat
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

# The BPE trainer counts words on threads; one thread leaves nothing to scheduling.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import textgen as tg  # noqa: E402

SEED = 20250716
N_DIALOGUES = 1000
N_SHAREGPT = 200
N_PREFERENCE = 300
VOCAB_SIZE = 2000
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt"}

SYSTEM_PROMPTS = {  # by the dialogue's language
    "en": [
        "You are a helpful assistant.",
        "You are a helpful assistant. Answer clearly and keep it short.",
        "You are a friendly cooking assistant. Give practical advice that works in a home kitchen.",
        "You are a patient programming tutor. Explain your reasoning and show small, runnable examples.",
        "You are a careful assistant. If you are not sure about something, say so.",
        "You are a travel assistant for people visiting Vietnam and Japan.",
        "Answer in plain English that a beginner can follow. Use numbered steps when it helps.",
    ],
    "vi": ["Bạn là một trợ lý hữu ích. Hãy trả lời ngắn gọn bằng tiếng Việt."],
    "zh": ["你是一个乐于助人的助手，请用简体中文回答。"],
}
FOLLOW_UPS = [
    "Can you give me a concrete example?",
    "Thanks! What is the most common mistake people make?",
    "Could you make that shorter?",
    "Why does that work?",
    "And if I only have ten minutes?",
    "Great. What should I do next?",
    "Is there a cheaper way to do it?",
    "What would you do differently for a beginner?",
    "Can you summarize that in one sentence?",
    "Hmm, that did not work for me. Any other ideas?",
]
SHORT_ANSWERS = [
    "In one sentence: {fact}",
    "Short version: {fact}",
    "{fact} That is the main idea.",
]
CHITCHAT = [
    ("Hi!", "Hello! How can I help you today?"),
    ("Thank you, that was really helpful.", "You're welcome! Feel free to come back with more questions."),
    ("Good morning 👋", "Good morning! ☕ What are you working on today?"),
    ("Can you tell me a joke?", "Why did the developer go broke? Because they used up all their cache. 😄"),
    ("What can you do?", "I can answer questions, explain concepts, help you write and review code, "
                         "translate short texts and plan small projects."),
]
PAIRS = [  # (English, Vietnamese)
    ("Good morning, how are you today?", "Chào buổi sáng, hôm nay bạn thế nào?"),
    ("I would like a cup of iced milk coffee.", "Tôi muốn một ly cà phê sữa đá."),
    ("Where is the nearest train station?", "Ga tàu gần nhất ở đâu?"),
    ("Please back up your data before updating.", "Vui lòng sao lưu dữ liệu trước khi cập nhật."),
    ("The meeting starts at nine o'clock.", "Cuộc họp bắt đầu lúc chín giờ."),
    ("It is raining heavily in Hanoi.", "Trời đang mưa to ở Hà Nội."),
    ("How much does this shirt cost?", "Cái áo này giá bao nhiêu?"),
]
CJK = {  # language: (how a user asks for it, lines of that language)
    "zh": ("请用中文回答：", tg.zh_text),
    "ja": ("日本語で答えてください：", tg.ja_text),
    "ko": ("한국어로 대답해 주세요: ", tg.ko_text),
}
SPECIAL_TEXT_TURNS = [
    ("In a ChatML prompt, what does the string <|im_end|> mean?",
     "It marks the end of one message. Every turn is written as `<|im_start|>role`, a "
     "newline, the text, then the end marker, so the model learns where a reply stops."),
    ("My log shows <|endoftext|> in the middle of a reply. Is the model broken?",
     "Probably not. That string is the end-of-text marker; if it shows up as text, the "
     "output was decoded without skipping special tokens, or two documents were joined."),
]
RUDE = ["Just search it online.", "I don't know.", "That is a strange question.",
        "Figure it out yourself.", "Why would anyone want to do that?"]


def clean(text: str) -> str:
    """No leading or trailing whitespace: the llama3 template trims contents."""
    return text.strip()


def general_exchange(rng: random.Random, topic: str) -> tuple[str, str]:
    question = tg.en_question(rng, topic)
    if rng.random() < 0.2:
        question = tg.en_free_sentence(rng) + " " + question
    if rng.random() < 0.05:
        question = tg.sprinkle_emoji(rng, question, 1.0)
    r = rng.random()
    if r < 0.15:
        answer = rng.choice(SHORT_ANSWERS).format(fact=rng.choice(tg.TOPICS[topic]["facts"]))
    elif r < 0.20:
        answer = tg.en_long(rng, rng.randint(15, 40), topic)
    else:
        answer = tg.en_answer(rng, 1, 6, topic)
    return question, answer


def code_exchange(rng: random.Random) -> tuple[str, str]:
    lang, task, code = tg.code_task(rng)
    if "Fix" in task or "Explain" in task or "Refactor" in task or "Add type" in task:
        question = f"{task}\n\n```{lang}\n{code}\n```"
        answer = tg.en_paragraph(rng, 1, 3, "programming")
        if rng.random() < 0.5:
            answer += f"\n\n```{lang}\n{tg.py_snippet(rng) if lang == 'python' else code}\n```"
    else:
        question = task if rng.random() < 0.7 else f"{task} Please use {lang}."
        answer = f"Here is one way to do it:\n\n```{lang}\n{code}\n```\n\n" + tg.en_paragraph(
            rng, 1, 2, "programming")
    return question, answer


def math_exchange(rng: random.Random) -> tuple[str, str]:
    a, b, c = rng.randint(2, 500), rng.randint(2, 500), rng.randint(2, 12)
    name, noun = rng.choice(tg.NAMES), rng.choice(tg.LEX_NOUNS)
    if rng.random() < 0.5:
        return (f"{name} has {a} {noun}s and buys {b} more. How many {noun}s does {name} have now?",
                f"{name} starts with {a} and adds {b}, so {a} + {b} = {a + b}. "
                f"{name} has {a + b} {noun}s.")
    return (f"A box holds {c} {noun}s. How many boxes do I need for {a} {noun}s?",
            f"{a} / {c} = {a / c:.2f}, and a part of a box still needs a whole box, so you need "
            f"{-(-a // c)} boxes.")


def translation_exchange(rng: random.Random) -> tuple[str, str]:
    en, vi = rng.choice(PAIRS)
    if rng.random() < 0.5:
        return f"Translate into Vietnamese: {en}", vi
    return f"Dịch sang tiếng Anh: {vi}", en


def vietnamese_exchange(rng: random.Random) -> tuple[str, str]:
    return (tg.sprinkle_emoji(rng, rng.choice(tg.VI), 0.3),
            tg.vi_text(rng, 1, 3))


def cjk_exchange(rng: random.Random, lang: str) -> tuple[str, str]:
    ask, text = CJK[lang]
    return ask + text(rng, 1, 2), tg.sprinkle_emoji(rng, text(rng, 1, 3), 0.2)


def first_exchange(rng: random.Random, topic: str) -> tuple[str, str, str]:
    """(kind, user, assistant): the kind picks the system prompt and the follow-ups."""
    r = rng.random()
    if r < 0.60:
        return ("en",) + general_exchange(rng, topic)
    if r < 0.76:
        return ("en",) + code_exchange(rng)
    if r < 0.84:
        return ("en",) + math_exchange(rng)
    if r < 0.88:
        return ("en",) + translation_exchange(rng)
    if r < 0.92:
        return ("vi",) + vietnamese_exchange(rng)
    if r < 0.96:
        lang = rng.choice(sorted(CJK))
        return (lang,) + cjk_exchange(rng, lang)
    return ("en",) + rng.choice(CHITCHAT)


def follow_up(rng: random.Random, kind: str, topic: str) -> tuple[str, str]:
    if kind == "vi":
        return vietnamese_exchange(rng)
    if kind in CJK:
        return cjk_exchange(rng, kind)
    if rng.random() < 0.3:
        return general_exchange(rng, topic)
    return rng.choice(FOLLOW_UPS), tg.en_answer(rng, 1, 4, topic)


def dialogue(rng: random.Random) -> list[dict]:
    topic = rng.choice(sorted(tg.TOPICS))
    kind, user, assistant = first_exchange(rng, topic)
    exchanges = rng.choices([1, 2, 3], weights=[50, 30, 20])[0]
    messages = []
    if rng.random() < 0.33 and kind in SYSTEM_PROMPTS:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS[kind])})
    for turn in range(exchanges):
        if turn:
            user, assistant = follow_up(rng, kind, topic)
        messages += [{"role": "user", "content": clean(user)},
                     {"role": "assistant", "content": clean(assistant)}]
    # A few dialogues keep an early answer as context only (a draft the user did not
    # like, a greeting): weight 0 on their first assistant turn.
    if exchanges > 1 and rng.random() < 0.06:
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        messages[first]["weight"] = 0
    return messages


def build_dialogues(rng: random.Random) -> list[list[dict]]:
    rows = [dialogue(rng) for _ in range(N_DIALOGUES)]
    # Special-token text typed by users: kept as plain text by the build. One lands in
    # the ShareGPT part, one after it.
    for (user, assistant), at in zip(SPECIAL_TEXT_TURNS, (37, 611)):
        rows[at] = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return rows


def sharegpt(messages: list[dict]) -> dict:
    turns = []
    for m in messages:
        turn = {"from": SHAREGPT_ROLES[m["role"]], "value": m["content"]}
        if "weight" in m:
            turn["weight"] = m["weight"]
        turns.append(turn)
    return {"conversations": turns}


def rejected_answer(rng: random.Random, topic: str, good: str) -> str:
    r = rng.random()
    if r < 0.3:
        return rng.choice(RUDE)
    if r < 0.6:  # off topic
        other = rng.choice([t for t in sorted(tg.TOPICS) if t != topic])
        return tg.en_answer(rng, 1, 3, other)
    if r < 0.8:  # far too short
        return good.split(". ")[0].rstrip(".") + "."
    return tg.en_free_paragraph(rng, 1, 3)  # rambling


def preference_pair(rng: random.Random, index: int) -> dict:
    topic = rng.choice(sorted(tg.TOPICS))
    if rng.random() < 0.15:  # arithmetic: the rejected answer gets the sum wrong
        a, b = rng.randint(2, 500), rng.randint(2, 500)
        name, noun = rng.choice(tg.NAMES), rng.choice(tg.LEX_NOUNS)
        question = f"{name} has {a} {noun}s and buys {b} more. How many {noun}s does {name} have now?"
        chosen = f"{name} starts with {a} and adds {b}, so {a} + {b} = {a + b}. {name} has {a + b} {noun}s."
        wrong = a + b + rng.choice([-10, -1, 1, 10, 100])
        rejected = f"{a} + {b} = {wrong}, so {name} has {wrong} {noun}s."
    else:
        question, chosen = general_exchange(rng, topic)
        rejected = rejected_answer(rng, topic, chosen)
    question, chosen, rejected = clean(question), clean(chosen), clean(rejected)
    if chosen == rejected:
        rejected = rng.choice(RUDE)
    shape = index % 3
    if shape == 0:  # standard: strings, no template
        return {"prompt": question, "chosen": chosen, "rejected": rejected}
    prompt = []
    if rng.random() < 0.3:
        prompt.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS["en"])})
    prompt.append({"role": "user", "content": question})
    chosen_turn = [{"role": "assistant", "content": chosen}]
    rejected_turn = [{"role": "assistant", "content": rejected}]
    if shape == 1:  # conversational, explicit prompt
        return {"prompt": prompt, "chosen": chosen_turn, "rejected": rejected_turn}
    return {"chosen": prompt + chosen_turn, "rejected": prompt + rejected_turn}  # implicit


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def corpus(dialogues, pairs) -> list[str]:
    """Every text the tokenizer will see, and the role names the templates write."""
    texts = []
    for messages in dialogues:
        for m in messages:
            texts += [m["role"], m["content"]]
    for pair in pairs:
        for value in pair.values():
            if isinstance(value, str):
                texts.append(value)
            else:
                for m in value:
                    texts += [m["role"], m["content"]]
    return texts


def train_tokenizer(texts: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer.to_str(pretty=True) + "\n"


def tokenizer_config() -> str:
    from mintdim_beam.core.chat import builtin_template

    doc = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "chat_template": builtin_template("chatml"),
    }
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "examples" / "chat"
    rng = random.Random(SEED)
    dialogues = build_dialogues(rng)
    pairs = [preference_pair(rng, i) for i in range(N_PREFERENCE)]
    files = {
        "dialogues.jsonl": jsonl({"messages": m} for m in dialogues),
        "dialogues_sharegpt.jsonl": jsonl(sharegpt(m) for m in dialogues[:N_SHAREGPT]),
        "preference.jsonl": jsonl(pairs),
        "tokenizer.json": train_tokenizer(corpus(dialogues, pairs)).encode("utf-8"),
        "tokenizer_config.json": tokenizer_config().encode("utf-8"),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
