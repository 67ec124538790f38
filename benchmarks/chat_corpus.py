"""A realistic chat benchmark corpus, generated deterministically (issue 16): OpenAI-style
`{"messages": [...]}` dialogues, a system prompt in about a third of them, 1 to 3
user/assistant exchanges, answers from a few tokens to past the largest unit (about 3%
of dialogues are long), code, translations and free chat with non-ASCII text
(Vietnamese, CJK, emoji, rare scripts), 2% duplicates. And a byte-level BPE tokenizer
trained on it (8k vocabulary, ChatML special tokens) with its tokenizer_config.json."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from corpus import RARE, name, sprinkle_names, write_corpus  # noqa: E402
from tools import textgen  # noqa: E402

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer in as few words as you can.",
    "You are a patient tutor. Explain each step and check the student's understanding.",
    "You are a senior software engineer reviewing code. Be precise and point out bugs.",
    "You are a translator. Keep the tone and the formatting of the original text.",
    "You are {name}, the support assistant of {name2}. Be friendly and stay on topic.",
]
SHORT_ANSWERS = ["Yes.", "No.", "Sure.", "Done.", "42.", "You're welcome!", "Happy to help.",
                 "Correct.", "Not quite: try again.", "Thanks, noted."]
FOLLOW_UPS = ["Can you explain that in more detail?", "Why is that?", "Thanks! And what about {noun}?",
              "Could you give me an example?", "Shorter, please.", "What would you do differently?",
              "Is there a faster way?", "Can you translate that into Vietnamese?"]


def _exchange(rng: random.Random, first: bool) -> tuple[str, str]:
    """One (user, assistant) pair."""
    kind = rng.random()
    if not first and kind < 0.35:
        user = rng.choice(FOLLOW_UPS).format(noun=name(rng))
        answer = textgen.en_answer(rng, 1, 5)
    elif kind < 0.45:
        user = textgen.en_question(rng)
        if rng.random() < 0.4:
            user += "\n\n" + textgen.en_paragraph(rng, 1, 3)
        answer = textgen.en_answer(rng, 1, 6)
    elif kind < 0.60:
        user = textgen.en_instruction(rng)
        answer = textgen.en_answer(rng, 2, 8)
    elif kind < 0.72:
        lang, task, code = textgen.code_task(rng)
        user = f"{task}\n\n```{lang}\n{code}\n```"
        _, _, fixed = textgen.code_task(rng)
        answer = f"{textgen.en_sentence(rng, 'programming')}\n\n```{lang}\n{fixed}\n```"
    elif kind < 0.84:
        source, target = textgen.multilingual_text(rng)
        user = f"Translate the text.\n\n{source}"
        answer = target
    elif kind < 0.94:
        user = textgen.en_free_paragraph(rng, 1, 3)
        answer = (rng.choice(SHORT_ANSWERS) if rng.random() < 0.5
                  else textgen.en_free_paragraph(rng, 1, 4))
    elif kind < 0.983:
        user = textgen.en_instruction(rng)
        answer = rng.choice(SHORT_ANSWERS)
    else:  # long: past the largest unit (2048 tokens)
        user = textgen.en_instruction(rng) + "\n\n" + textgen.en_long(rng, rng.randint(20, 60))
        answer = textgen.en_long(rng, rng.randint(120, 200))
    answer = sprinkle_names(rng, answer) if rng.random() < 0.5 else answer
    if rng.random() < 0.5:
        user = sprinkle_names(rng, user)
    if rng.random() < 0.03:
        answer += " " + rng.choice(RARE)
    if rng.random() < 0.05:
        user = textgen.sprinkle_emoji(rng, user, 1.0)
    return user, answer


def dialogue(rng: random.Random) -> dict:
    messages = []
    if rng.random() < 0.35:
        prompt = rng.choice(SYSTEM_PROMPTS).format(name=name(rng), name2=name(rng))
        messages.append({"role": "system", "content": prompt})
    exchanges = rng.choices([1, 2, 3], weights=[45, 35, 20])[0]
    for i in range(exchanges):
        user, answer = _exchange(rng, i == 0)
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return {"messages": messages}


def write_chat_corpus(path: Path, n: int, seed: int = 2016) -> Path:
    return write_corpus(path, n, seed, make_row=dialogue)


def train_chat_tokenizer(corpus: Path, workdir: Path, vocab: int = 8000,
                         lines: int = 30000) -> tuple[Path, Path]:
    """A byte-level BPE (GPT-2 style pre-tokenizer, `vocab` entries, the ChatML special
    tokens) trained on the first `lines` dialogues, and its tokenizer_config.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok_path, config_path = workdir / "chat_bpe8k.json", workdir / "chat_bpe8k_config.json"
    if not tok_path.exists():
        def texts():
            with open(corpus, encoding="utf-8") as handle:
                for i, line in enumerate(handle):
                    if i >= lines:
                        break
                    for message in json.loads(line)["messages"]:
                        yield f"{message['role']}\n{message['content']}"

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL_TOKENS,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(texts(), trainer)
        tok.save(str(tok_path))
    if not config_path.exists():
        config_path.write_text(json.dumps({"bos_token": None, "eos_token": "<|im_end|>",
                                           "pad_token": "<|endoftext|>"}))
    return tok_path, config_path
