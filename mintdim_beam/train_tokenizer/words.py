"""A row's text, and the words a trainer counts in it, as the trainer itself cuts them.

Hugging Face: `Tokenizer.train_from_iterator` normalizes each text and pre-tokenizes it,
then counts the pieces (`tokenizers`' `Tokenizer::train` -> `BpeTrainer::feed`); here that
very feed counts each batch (`HfWords`).

SentencePiece: its trainer reads a text file a line at a time (a row's text is one line
per `\\n`), skips empty lines, lines over `max_sentence_length` bytes and lines holding
U+2585, normalizes the rest (its own normalizer: `SentencePieceNormalizer`, with the
whitespace escaped to U+2581) and, for BPE, cuts each into words at U+2581
(`SplitIntoWords`, model_interface.cc) and counts them. Its tsv input then takes
`word<TAB>count` lines (`sentencepiece_train`).

Which rows are trained on, held out or left out of a sample is a seeded hash of the
row's text (`row_fate`): the same on every runner and range size, and a repeated row
shares its copies' fate, so a held-out row never also appears in training.
"""
from __future__ import annotations

import hashlib
from collections import Counter

from mintdim_beam.core.chat.messages import DialogueProblem, normalize_row
from mintdim_beam.core.render.document_text import Renderer, pending, unicode_text

TRAIN, HELD_OUT, LEFT_OUT = 0, 1, 2
UNK_CHAR = "\u2585"  # SentencePiece's trainer skips a line that holds it
SPACE = "\u2581"
_CHAT_KEYS = {"messages": "messages", "sharegpt": "conversations"}


def text_hash(seed: int, text: str, domain: bytes = b"row") -> int:
    """A 64-bit hash of `text` under `seed`: blake2b, stable across Python processes."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8,
                             key=seed.to_bytes(8, "little"), person=domain.ljust(16, b"\0"))
    return int.from_bytes(digest.digest(), "little")


def row_fate(seed: int, holdout: float, sample: float, text: str) -> tuple[int, int]:
    """(TRAIN, HELD_OUT or LEFT_OUT, the row's hash): held out below `holdout`, trained
    on within the next `sample` of the rest."""
    h = text_hash(seed, text)
    if holdout == 0 and sample == 1:
        return TRAIN, h
    u = h / 2.0 ** 64
    if u < holdout:
        return HELD_OUT, h
    return (TRAIN if (u - holdout) < sample * (1 - holdout) else LEFT_OUT), h


class RowTexts:
    """A parsed row -> (its text, None) or (None, a pending error at its line)."""

    def __init__(self, config):
        self._chat = config.kind == "chat"
        if self._chat:
            self._key, self._join = _CHAT_KEYS[config.chat_format], config.join
        else:
            self._renderers = [Renderer(f, t) for f, t in zip(config.fields, config.templates)]

    def text(self, key, local_line, row):
        if not self._chat:
            return self._renderers[key[1]].text(key, local_line, row)
        try:
            messages = normalize_row(row, self._key)
        except DialogueProblem as exc:
            return None, pending(key, local_line, "SampleSchemaError", {
                "problem": exc.problem, "message_index": exc.message_index})
        return unicode_text(key, local_line,
                            self._join.join(m.content for m in messages if m.content is not None))


class HfWords:
    """The words `tokenizers`' trainer counts, counted by that trainer: a batch of texts
    goes through `train_from_iterator` (its own normalizer, pre-tokenizer and `feed`,
    in Rust, on the library's threads) with a `BpeTrainer` that learns nothing
    (`vocab_size` 0, `limit_alphabet` 0), and the counts are read back from the trainer's
    state (`words`). The same table as `normalize_str` + `pre_tokenize_str` counted in
    Python (tested), with about a quarter less CPU on batches of `BATCH` texts."""

    BATCH = 8192

    def __init__(self, spec):
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_str(spec.tokenizer_json())

    def count(self, texts, counts: Counter) -> None:
        import json

        from tokenizers import trainers

        trainer = trainers.BpeTrainer(vocab_size=0, limit_alphabet=0, show_progress=False)
        self._tokenizer.train_from_iterator(texts, trainer)
        counts.update(json.loads(trainer.__getstate__())["BpeTrainer"]["words"])


def sentencepiece_normalizer(spec):
    """SentencePiece's own normalizer as its trainer sets it up (whitespace escaped)."""
    import sentencepiece as spm

    return spm.SentencePieceNormalizer(
        rule_name=spec.option("normalization_rule_name"),
        add_dummy_prefix=spec.option("add_dummy_prefix"), escape_whitespaces=True,
        remove_extra_whitespaces=spec.option("remove_extra_whitespaces"))


def sentences(text: str, max_bytes: int):
    """The lines of `text` SentencePiece's trainer would load from a file of it."""
    for line in text.split("\n"):
        if line and UNK_CHAR not in line and len(line.encode("utf-8")) <= max_bytes:
            yield line


def split_into_words(text: str, allow_whitespace_only_pieces: bool) -> list[str]:
    """SentencePiece's `SplitIntoWords` (whitespace as a prefix): a word starts at the
    text's start and at each U+2581 (a run of them stays one word when whitespace-only
    pieces are allowed)."""
    words: list[str] = []
    start, in_ws = 0, False
    for i, char in enumerate(text):
        is_ws = char == SPACE
        if i == 0 or (is_ws and (not in_ws or not allow_whitespace_only_pieces)):
            if i > start:
                words.append(text[start:i])
            start, in_ws = i, True
        if in_ws and not is_ws:
            in_ws = False
    if text:
        words.append(text[start:])
    return words


class SentencePieceWords:
    """The words SentencePiece's BPE trainer counts (see the module's note)."""

    BATCH = 1024

    def __init__(self, spec):
        self._normalizer = sentencepiece_normalizer(spec)
        self._max = spec.option("max_sentence_length")
        self._ws_only = spec.option("allow_whitespace_only_pieces")

    def count(self, texts, counts: Counter) -> None:
        lines = [line for text in texts for line in sentences(text, self._max)]
        if not lines:
            return
        for normalized in self._normalizer.normalize(lines):
            if normalized:
                counts.update(split_into_words(normalized, self._ws_only))


def word_counter(spec):
    """What counts words for `spec`'s trainer, or None (unigram trains on a sample)."""
    if spec.counts_words_with == "tokenizers":
        return HfWords(spec)
    if spec.counts_words_with == "sentencepiece":
        return SentencePieceWords(spec)
    return None
