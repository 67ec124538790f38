"""Hugging Face BPE from the summed word table, with `tokenizers`' own trainer.

The native program `bpe_train` (native/bpe_train, built by `make setup` over the crate in
the sdist of the venv's `tokenizers`) runs `BpeTrainer::do_train` on the table: the
very function `train_from_iterator` ends in, given the same word counts, so the
vocabulary and merges are the same (tested against `train_from_iterator`). Without the
program (no cargo, another `tokenizers` version), the table's words are fed to the
Python package's own trainer, each as often as it was counted, through a tokenizer that
neither normalizes nor splits them again: the same counts, so the same result, at the
cost of one pass over every occurrence.

Both refuse what `tokenizers` would get wrong without a word: a `limit_alphabet` cut
among characters of equal count (kept by hash order) and a pair counted past the
trainer's 32-bit signed counts (wrapped)."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter

from mintdim_beam.core.errors.train import (TrainerAlphabetTieError, TrainerCountOverflowError,
                                            TrainerMinFrequencyError, TrainerVocabSizeError)
from mintdim_beam.train_tokenizer import table

PROGRAM = os.path.join(os.path.dirname(__file__), "bpe_train")
PROGRAM_ENV = "MINTDIM_BPE_TRAIN"  # another build of the program (tests)
I32_MAX = (1 << 31) - 1


def native_program() -> tuple[str | None, str]:
    """(the program's path or None, why)."""
    import tokenizers

    path = os.environ.get(PROGRAM_ENV) or PROGRAM
    if not os.access(path, os.X_OK):
        return None, f"no native trainer at {path} (make setup builds it with cargo)"
    try:
        found = subprocess.run([path, "--version"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"the native trainer at {path} does not run: {exc}"
    if found != tokenizers.__version__:
        return None, (f"the native trainer was built over tokenizers {found}, this process "
                      f"imports {tokenizers.__version__}")
    return path, f"tokenizers {found}'s BpeTrainer over the summed counts (native)"


def _alphabet_counts(words) -> Counter:
    counts: Counter = Counter()
    for word, count in words:
        for char in word:
            counts[char] += count
    return counts


def kept_alphabet(spec, char_counts: Counter) -> set:
    """The characters the trainer keeps; a tie at the `limit_alphabet` cut raises."""
    counts = dict(char_counts)
    for char in spec.initial_alphabet:
        counts[char] = 1 << 64
    remove = 0 if spec.limit_alphabet is None else max(0, len(counts) - spec.limit_alphabet)
    if remove == 0:
        return set(counts)
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]))
    cut = ranked[remove - 1][1]
    if remove < len(ranked) and ranked[remove][1] == cut:
        tied = "".join(c for c, n in ranked if n == cut)
        above = sum(1 for _, n in ranked if n > cut)
        raise TrainerAlphabetTieError(limit_alphabet=spec.limit_alphabet, count=cut, tied=tied,
                                      limits=[above, above + len(tied)])
    return {c for c, _ in ranked[remove:]}


def largest_pair(words, kept: set) -> tuple[int, str]:
    """(count, pair) of the most frequent pair of adjacent kept characters."""
    pairs: Counter = Counter()
    for word, count in words:
        chars = [c for c in word if c in kept]
        for a, b in zip(chars, chars[1:]):
            pairs[a + b] += count
    if not pairs:
        return 0, ""
    return max((n, p) for p, n in pairs.items())


def _check_room(spec, alphabet: set) -> None:
    vocabulary = set(spec.special_tokens) | alphabet
    if len(vocabulary) >= spec.vocab_size:
        raise TrainerVocabSizeError(vocab_size=spec.vocab_size, special=len(spec.special_tokens),
                                    alphabet=len(alphabet), where="characters of the corpus")


def _python_model(spec, parts: list[str]) -> tuple[str, int, str]:
    """(model JSON, largest pair count, pair) through the Python package's trainer."""
    from tokenizers import Tokenizer, models

    def words():
        for path in parts:
            with open(path, "rb") as handle:
                yield from table.decode(handle.read())

    kept = kept_alphabet(spec, _alphabet_counts(words()))
    _check_room(spec, kept)
    count, pair = largest_pair(words(), kept)
    if count > I32_MAX:
        raise TrainerCountOverflowError(pair=pair, count=count)

    def occurrences():
        for word, n in words():
            for _ in range(n):
                yield word

    bare = Tokenizer(models.BPE(unk_token=spec.unk_token))  # no normalizer, no pre-tokenizer
    bare.train_from_iterator(occurrences(), spec.trainer())
    return json.dumps(json.loads(bare.to_str())["model"]), count, pair


def _native_model(program: str, spec, parts: list[str], alphabet: set) -> tuple[str, int, str]:
    from tokenizers import models

    if spec.limit_alphabet is None:  # else the program's cut decides the alphabet
        _check_room(spec, alphabet | set(spec.initial_alphabet))
    with tempfile.TemporaryDirectory(prefix="mintdim-bpe-") as work:
        trainer_json = os.path.join(work, "trainer.json")
        model_json = os.path.join(work, "model.json")
        out_json = os.path.join(work, "trained.json")
        state = spec.trainer().__getstate__()
        with open(trainer_json, "wb") as f:
            f.write(state if isinstance(state, bytes) else state.encode("utf-8"))
        model = models.BPE(unk_token=spec.unk_token).__getstate__()
        with open(model_json, "wb") as f:
            f.write(model if isinstance(model, bytes) else model.encode("utf-8"))
        done = subprocess.run([program, trainer_json, model_json, out_json, *parts],
                              capture_output=True, text=True)
        said = done.stderr.strip().splitlines()
        last = said[-1] if said else ""
        if done.returncode == 3:  # overflow COUNT PAIR
            _, count, pair = last.split(" ", 2)
            raise TrainerCountOverflowError(pair=json.loads(pair), count=int(count))
        if done.returncode == 4:  # tie COUNT LIMIT_NONE LIMIT_ALL CHARS
            _, count, none, every, chars = last.split(" ", 4)
            raise TrainerAlphabetTieError(limit_alphabet=spec.limit_alphabet,
                                          count=int(count), tied=json.loads(chars),
                                          limits=[int(none), int(every)])
        if done.returncode != 0:
            raise RuntimeError(f"bpe_train failed ({done.returncode}): {done.stderr.strip()}")
        with open(out_json, encoding="utf-8") as f:
            trained = f.read()
        largest = [line for line in done.stdout.splitlines() if line.startswith("largest ")]
        count, pair = 0, ""
        if largest:
            _, n, shown = largest[-1].split(" ", 2)
            count, pair = int(n), json.loads(shown)
    if spec.limit_alphabet is not None:
        vocab = json.loads(trained)["vocab"]
        _check_room(spec, {t for t in vocab if len(t) == 1} - set(spec.special_tokens))
    return trained, count, pair


def train_bpe(spec, parts: list[str], alphabet: set) -> tuple[str, dict]:
    """(tokenizer.json's text, what trained it) from the table's local part files.
    `alphabet`: every character of the table's words."""
    from tokenizers import Tokenizer

    program, why = native_program()
    if program is not None:
        model, count, pair = _native_model(program, spec, parts, alphabet)
        engine = {"name": "native", "why": why}
    else:
        model, count, pair = _python_model(spec, parts)
        engine = {"name": "python", "why": why + "; fed the counted words to tokenizers' "
                                                 "own trainer"}
    trained = json.loads(model)
    if not trained.get("merges") and spec.min_frequency > 0:
        raise TrainerMinFrequencyError(min_frequency=spec.min_frequency, largest=count,
                                       pair=pair)
    # The pipeline around the model as `train_from_iterator` leaves it: the special
    # tokens added, in `tokenizers`' own serialization.
    tokenizer = Tokenizer.from_str(spec.tokenizer_json())
    tokenizer.train_from_iterator([], spec.trainer())
    doc = json.loads(tokenizer.to_str())
    doc["model"] = trained
    return Tokenizer.from_str(json.dumps(doc)).to_str(), engine
