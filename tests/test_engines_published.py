"""Every engine against `tokenizers` on published tokenizers (issues 28 and 43): the
native engine (`tokenizers`' own BPE, natively) on all of them, tiktoken's BPE where it
is proven equal. Llama 3.2 in both forms users have (`ignore_merges` true and false),
DeepSeek V3, GPT-2 and Qwen (their tiktoken files read as tokenizers), Mistral 7B's
byte-fallback BPE with the Metaspace pre-tokenizer and with the older Prepend + Replace
normalizers (`make test` makes them: tools/published_tokenizers.py). Texts: 70k
paragraphs of Python's library, 30k multilingual segments, adversarial strings (1 MB
lines, long runs), every code point from U+0080 to U+31FFF in context."""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest

import engine_corpus
from conftest import REPO
from mintdim_beam.core.tokenizer.tokenizers import tokenizer_from_bytes

PUBLISHED = Path(os.environ.get("MINTDIM_PUBLISHED", REPO / ".tools/published"))
FILES = {  # name: (type, file, tiktoken family)
    "llama3.2": ("hf_json", "llama3.2.json", None),
    "llama3.2_legacy": ("hf_json", "llama3.2_legacy.json", None),
    "deepseek_v3": ("hf_json", "deepseek_v3.json", None),
    "gpt2": ("tiktoken", "gpt2.tiktoken", "gpt2"),
    "qwen": ("tiktoken", "qwen.tiktoken", "qwen"),
    "mistral_v1": ("hf_json", "mistral_v1.json", None),
    "mistral_v1_legacy": ("hf_json", "mistral_v1_legacy.json", None),
}
# Where tiktoken's merge-by-rank rule is proven to be `tokenizers`' (the others: merges
# that do not make every token from its bytes, a byte-fallback BPE without ByteLevel).
TIKTOKEN_EQUAL = {"llama3.2", "deepseek_v3", "gpt2", "qwen"}


@functools.lru_cache(maxsize=None)
def _tokenizer(name: str):
    kind, file, family = FILES[name]
    path = PUBLISHED / file
    if not path.exists():
        pytest.fail(f"{path} is missing: `make test` makes it (tools/published_tokenizers.py)")
    return tokenizer_from_bytes(kind, path.read_bytes(), file, (family, None, ()) if family else None)


@pytest.fixture(scope="module", autouse=True)
def _forget_tokenizers():
    yield
    _tokenizer.cache_clear()


@pytest.mark.parametrize("name", list(FILES))
def test_every_engine_gives_the_ids_of_tokenizers(name):
    """100k real segments as template text, every tenth and the adversarial strings as
    content (special-token text plain) and as flat arrays: the native engine's ids are
    `tokenizers`'; tiktoken's where its rule is proven equal, and only there."""
    tokenizer = _tokenizer(name)
    adversarial = list(engine_corpus.adversarial())
    texts = list(engine_corpus.stdlib_segments()) + list(engine_corpus.multilingual_segments())
    reference = tokenizer.encode_many(texts + adversarial)
    native, why = tokenizer.native_view()
    assert native is not None, why
    assert native.encode_many(texts + adversarial) == reference
    sample = texts[::10] + adversarial
    plain = tokenizer.encode_plain_many(sample)
    assert native.encode_plain_many(sample) == plain
    ids, counts = native.encode_plain_flat(sample)
    assert counts.tolist() == [len(p) for p in plain]
    assert np.array_equal(ids, np.fromiter((i for p in plain for i in p), dtype=np.int64))
    fast, why = tokenizer.fast_view()
    assert (fast is not None) == (name in TIKTOKEN_EQUAL), why
    if fast is not None:  # tiktoken on whole 1 MB pieces is quadratic: real text only
        assert fast.encode_many(texts) == reference[:len(texts)]
        assert fast.encode_plain_many(texts[::10]) == plain[:len(texts[::10])]


def _every_character(contexts=(" {}1 2{}'s", "{}")) -> list[str]:
    """Every code point from U+0080 to U+31FFF (surrogates aside), 16 to a text, set
    between letters, digits, spaces and apostrophes, and alone: the characters Unicode
    assigned after one engine's tables and before the other's are the ones that part
    them."""
    points = [chr(c) for c in range(0x80, 0x32000) if not 0xD800 <= c < 0xE000]
    runs = ["".join(points[i:i + 16]) for i in range(0, len(points), 16)]
    return [context.replace("{}", run) for context in contexts for run in runs]


@pytest.mark.parametrize("name", list(FILES))
def test_every_character_gets_the_ids_of_tokenizers(name):
    """The native engine's character classes are Oniguruma's own: every code point in
    context gets `tokenizers`' ids; tiktoken's split regexes run in `tokenizers`' Split
    where they would differ (DeepSeek V3's)."""
    tokenizer = _tokenizer(name)
    texts = _every_character()
    reference = tokenizer.encode_many(texts)
    native, why = tokenizer.native_view()
    assert native.encode_many(texts) == reference, why
    fast, _ = tokenizer.fast_view()
    if fast is not None:
        assert fast.encode_many(texts) == reference


@pytest.mark.parametrize("name", ["llama3.2", "mistral_v1"])
def test_a_lone_surrogate_is_left_to_tokenizers_which_reports_it(name):
    """A text JSON decoded from an unpaired surrogate escape is no UTF-8: the native
    engine leaves it, and `tokenizers` raises what it raises without the engine."""
    tokenizer = _tokenizer(name)
    native, _ = tokenizer.native_view()
    for text in engine_corpus.lone_surrogates():
        with pytest.raises(Exception) as slow:
            tokenizer.encode_many(["fine", text])
        with pytest.raises(Exception) as fast:
            native.encode_many(["fine", text])
        assert type(fast.value) is type(slow.value)
        _, _, left = native._engines["native"][0].encode_flat(["fine", text], plain=False)
        assert left == [1]
