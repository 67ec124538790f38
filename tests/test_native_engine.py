"""The native engine's semantics one feature at a time (issue 43), each against
`tokenizers` on a small BPE trained here: every Split behavior, ByteLevel and Metaspace
options, the normalizers, the model's prefix, suffix, byte fallback, UNK and
ignore_merges, added tokens cut as `tokenizers` cuts them, the split-regex features
Oniguruma gives and the matcher reproduces; what it refuses says why; which engine a
build takes, also where the module is missing."""
from __future__ import annotations

import functools
import json

import pytest

import engine_corpus
from mintdim_beam.core import errors
from mintdim_beam.core.tokenizer import engine_choice, native_bpe
from mintdim_beam.core.tokenizer.tokenizers import HuggingFaceTokenizer

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EXTRA = ["", " ", "  leading and trailing  ", "a\n\nb\r\n c\t\td", "hello<|im_end|>world",
         "<|im_start|>user\nhi there<|im_end|>\n", " <|endoftext|> spaced <|endoftext|>",
         "im_start im_end <|im_start", "x ﬁ ｆｕｌｌ Å Å é e\u0301 ½ ㍿", "'s 'S 'ſ 'LL 'll've",
         "123456789 ١٢٣ ½", "字字字 かな 한국어 😀👍🏽", "aaaaaaaaaaaaaaaaaaaaaaaa", "\u00a0\u3000\u2028x"]


@functools.lru_cache(maxsize=None)
def _lines() -> tuple[str, ...]:
    return engine_corpus.stdlib_segments()[:2500] + engine_corpus.multilingual_segments()[:1500]


def _texts() -> list[str]:
    return list(_lines()[::4]) + EXTRA


def _trained(pre_tokenizer=None, normalizer=None, byte_level=True, model=None, trainer=None,
             decoder=None) -> dict:
    """A BPE of 700 ids trained on real text with these parts (its tokenizer.json)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(**(model or {})))
    if normalizer is not None:
        tk.normalizer = normalizer
    if pre_tokenizer is not None:
        tk.pre_tokenizer = pre_tokenizer
    options = {"vocab_size": 700, "special_tokens": list(SPECIALS), "show_progress": False,
               **(trainer or {})}
    if byte_level:
        options["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
    tk.train_from_iterator(_lines(), trainers.BpeTrainer(**options))
    return json.loads(tk.to_str())


def _byte_level_split(regex: str, behavior="isolated", invert=False):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior, invert=invert),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def _tokenizers(spec: dict):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(spec))


def _engine(spec: dict):
    engine, why = native_bpe.native_engine(json.dumps(spec).encode(), spec, _tokenizers(spec))
    assert engine is not None, why
    return engine


def _ids_or_none(tk, text):
    try:
        return tk.encode(text, add_special_tokens=False).ids
    except Exception:  # noqa: BLE001 - a text `tokenizers` refuses
        return None


def _same(spec: dict, texts=None, left=()):
    """The native engine takes the tokenizer and gives `tokenizers`' ids, as template
    text and as content, leaving only the texts at `left` to it."""
    texts = _texts() if texts is None else texts
    tk, engine = _tokenizers(spec), _engine(spec)
    for plain in (False, True):
        tk.encode_special_tokens = plain
        try:
            want = [e.ids for e in tk.encode_batch(texts, add_special_tokens=False)]
        except Exception:  # noqa: BLE001 - one text fails: the others, one by one
            want = [_ids_or_none(tk, text) for text in texts]
        got, gave = engine.encode_many(texts, plain)
        assert gave == [i if i >= 0 else len(texts) + i for i in left]
        assert [g for i, g in enumerate(got) if i not in gave] == \
            [w for i, w in enumerate(want) if i not in gave]
    return engine


@pytest.mark.parametrize("behavior", ["removed", "isolated", "merged_with_previous",
                                      "merged_with_next", "contiguous"])
@pytest.mark.parametrize("invert", [False, True])
def test_every_split_behavior_inverted_or_not(behavior, invert):
    _same(_trained(_byte_level_split(r"\s+|[,.;:]", behavior, invert)))


@pytest.mark.parametrize("behavior", ["removed", "isolated", "merged_with_next"])
def test_a_split_on_a_literal_string(behavior):
    from tokenizers import pre_tokenizers

    _same(_trained(pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior), pre_tokenizers.Split("e", "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])))


@pytest.mark.parametrize("prefix_space", [False, True])
@pytest.mark.parametrize("use_regex", [False, True])
def test_byte_level_alone_with_its_prefix_space_and_regex(prefix_space, use_regex):
    from tokenizers import pre_tokenizers

    _same(_trained(pre_tokenizers.ByteLevel(add_prefix_space=prefix_space, use_regex=use_regex)))


@pytest.mark.parametrize("scheme", ["always", "first", "never"])
@pytest.mark.parametrize("split", [False, True])
def test_metaspace_schemes_with_byte_fallback(scheme, split):
    """Metaspace's prepending (on the text's first piece only for "first": not after an
    added token) and its split, on a BPE with byte fallback whose alphabet lacks most
    characters of the multilingual text."""
    from tokenizers import pre_tokenizers

    spec = _trained(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=split),
                    byte_level=False, model={"byte_fallback": True, "unk_token": "<unk>"},
                    trainer={"limit_alphabet": 120, "special_tokens": SPECIALS + ["<unk>"]})
    _add_byte_tokens(spec)
    _same(spec)


def _add_byte_tokens(spec: dict) -> None:
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))


@pytest.mark.parametrize("fuse", [False, True])
def test_unknown_characters_fused_or_not_and_dropped_without_unk(fuse):
    from tokenizers import pre_tokenizers

    for unk in ("<unk>", None):
        spec = _trained(pre_tokenizers.Metaspace(), byte_level=False,
                        model={"unk_token": unk, "fuse_unk": fuse},
                        trainer={"limit_alphabet": 80, "special_tokens": SPECIALS + ["<unk>"]})
        spec["model"]["unk_token"] = unk
        _same(spec)


def test_an_unk_token_missing_from_the_vocabulary_is_left_to_tokenizers():
    """`tokenizers` fails on the first unknown character when its UNK token is not in
    the vocabulary; the native engine leaves such a text (to `tokenizers`, which says
    so) and encodes the others."""
    from tokenizers import pre_tokenizers

    spec = _trained(pre_tokenizers.Metaspace(), byte_level=False,
                    trainer={"limit_alphabet": 80})
    spec["model"]["unk_token"] = "<nowhere>"
    _same(spec, ["the cat sat on the mat", "字 is unknown", "so is ꦲ"], left=[1, 2])
    with pytest.raises(Exception, match="nowhere"):
        _tokenizers(spec).encode("字")


@pytest.mark.parametrize("prefix,suffix", [("##", None), (None, "</w>"), ("##", "</w>")])
def test_continuing_subword_prefix_and_end_of_word_suffix(prefix, suffix):
    trainer = {k: v for k, v in (("continuing_subword_prefix", prefix),
                                 ("end_of_word_suffix", suffix)) if v}
    model = {k: v for k, v in (("continuing_subword_prefix", prefix),
                               ("end_of_word_suffix", suffix)) if v}
    _same(_trained(_byte_level_split(r"\w+|[^\w\s]+", "removed"), model=model, trainer=trainer))


def test_ignore_merges_takes_a_whole_word_that_is_a_token():
    spec = _trained(_byte_level_split(r" ?\p{L}+| ?\p{N}+|\s+|."))
    spec["model"]["ignore_merges"] = True
    # A token no merge makes: taken whole with ignore_merges, merged apart without.
    spec["model"]["vocab"]["ĠVi" + "á»ĩc"] = len(spec["model"]["vocab"])
    _same(spec, _texts() + [" Việc", "Việc Việc"])
    spec["model"]["ignore_merges"] = False
    _same(spec, _texts() + [" Việc"])


@pytest.mark.parametrize("form", ["NFC", "NFKC", "NFD", "NFKD"])
def test_unicode_normalizers_on_every_character(form):
    from tokenizers import normalizers

    spec = _trained(_byte_level_split(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"),
                    normalizer=getattr(normalizers, form)())
    points = [chr(c) for c in range(0x80, 0x32000) if not 0xD800 <= c < 0xE000]
    texts = ["he said " + "".join(points[i:i + 48]) for i in range(0, len(points), 48)]
    _same(spec, _texts() + texts)


def test_prepend_and_replace_normalizers_as_llama_2_files_have_them():
    from tokenizers import normalizers

    spec = _trained(None, normalizers.Sequence([normalizers.Prepend("▁"),
                                                normalizers.Replace(" ", "▁")]),
                    byte_level=False, model={"byte_fallback": True},
                    trainer={"limit_alphabet": 150})
    _add_byte_tokens(spec)
    _same(spec)


def test_added_tokens_strip_normalize_and_stay_text_as_tokenizers_says():
    """lstrip and rstrip take the spaces beside a token; a normalized token matches the
    normalized text (here NFKC: its fullwidth form too); in content, special tokens are
    text and non-special ones still cut, also where a special one overlaps them."""
    from tokenizers import normalizers

    spec = _trained(_byte_level_split(r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"),
                    normalizer=normalizers.NFKC())
    vocab = spec["model"]["vocab"]
    added = [("<left>", dict(lstrip=True)), ("<right>", dict(rstrip=True)),
             ("<both>", dict(lstrip=True, rstrip=True)), ("Ｎorm", dict(normalized=True)),
             ("im_start", dict(special=False)), ("<|im_start|>", dict(special=True))]
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != "<|im_start|>"]
    for content, flags in added:
        spec["added_tokens"].append({"id": len(vocab), "content": content, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False,
                                     "special": True, **flags})
        vocab[content] = len(vocab)
    texts = ["a <left> b", "a   <left>b", "<left>", "x<right>   y", "  <both>  z", "Norm Ｎorm norm",
             "<|im_start|>user", "x im_start y", "<|im_start|><left> <right>", "Ｎorm<both>Ｎorm"]
    _same(spec, _texts() + texts)


def test_a_single_word_token_is_left_to_tokenizers():
    """Whether a `single_word` token stands alone is `\\w` of Rust's regex tables: a text
    holding one is left to `tokenizers`; the others are encoded."""
    spec = _trained(_byte_level_split(r" ?\p{L}+|\s+|."))
    spec["added_tokens"].append({"id": 900, "content": "cat", "single_word": True, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": False})
    spec["model"]["vocab"]["<cat>"] = 900
    _same(spec, ["a dog sat", "a cat sat", "concatenate", "dog"], left=[1, 2])


@pytest.mark.parametrize("regex", [
    r"\p{L}+?\p{N}|\s+",  # lazy
    r"\p{L}{2,3}?|\p{L}|\s",  # lazy count
    r"\d{1,3}|\d{2}|[a-z]{,2}|\s+",  # counts
    r"\w+(?=\s)|\w+(?!\w)|\s+",  # lookaheads
    r"(?:ab|c[de])+|(?:x(?:y|z))*w|\S",  # nested repeated groups
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d|hello)|\p{L}+|\s+",  # case folded literals
    r"\s*",  # empty matches
    r"a*|b",  # an empty match right after a match
    r"[^\s\p{L}]|[\p{Lu}&&[A-M]]+|[[:alpha:]]+|\h+",  # classes Oniguruma reads
    r"\x41|\u00e9|\x{1F600}|\t|\.|\-|\ ",  # escapes
    r"(ab)|.",  # a capture group, dot
])
def test_split_regex_features_match_as_oniguruma_matches(regex):
    _same(_trained(_byte_level_split(regex)),
          _texts() + ["ab ab cde cdcd xyzw xzxyw w", "Hello HELLO 'S 'Ll", "AAA\t. - é😀",
                      "aaa b aab", "1234567 12 a bb ccc"])


@pytest.mark.parametrize("regex, says", [
    (r"^a|\s", "anchor"), (r"(a)\1|\s", "escape \\1"), (r"(?<=a)b|\s", "group option"),
    (r"a++|\s", "possessive"), (r"(?i:é)|\s", "non-ASCII"), (r"(?i:ss)|\s", "single character"),
    (r"(?:a*)+|\s", "can match empty"), (r"a{1000}|\s", "count"), (r"(?x) a|\s", "group option"),
])
def test_what_the_matcher_does_not_reproduce_is_refused_with_the_reason(regex, says):
    spec = _trained(_byte_level_split(r"\s+"))
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    native, why = native_bpe.native_engine(json.dumps(spec).encode(), spec, _tokenizers(spec))
    assert native is None and says in why


@pytest.mark.parametrize("change, says", [
    (lambda s: s.update(normalizer={"type": "Lowercase"}), "normalizer Lowercase"),
    (lambda s: s.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizer Whitespace"),
    (lambda s: s["model"].update(dropout=0.1), "dropout"),
    (lambda s: s.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False}]}),
     "after ByteLevel"),
])
def test_a_tokenizer_outside_the_structure_is_refused_with_the_reason(change, says):
    spec = _trained(_byte_level_split(r"\s+"))
    change(spec)
    native, why = native_bpe.native_engine(json.dumps(spec).encode(), spec, _tokenizers(spec))
    assert native is None and says in why


def test_auto_takes_the_native_engine_and_asking_for_it_where_it_cannot_is_a_config_error():
    ok = HuggingFaceTokenizer(json.dumps(_trained(_byte_level_split(r"\s+|\S+"))).encode(), "ok.json")
    engine, why = engine_choice.choose_engine(ok, "auto", [], "ok.json")
    assert engine == "native" and "natively" in why
    spec = _trained(_byte_level_split(r"\s+"))
    spec["normalizer"] = {"type": "Lowercase"}
    lower = HuggingFaceTokenizer(json.dumps(spec).encode(), "lower.json")
    engine, why = engine_choice.choose_engine(lower, "auto", [], "lower.json")
    assert engine == "tokenizers" and "native: normalizer Lowercase" in why
    with pytest.raises(errors.TokenizerValidationError) as info:
        engine_choice.choose_engine(lower, "native", [], "lower.json")
    assert "tokenizer.engine native is not exact for lower.json" in info.value.english


def test_without_the_module_auto_takes_tiktoken_and_a_worker_encodes_with_tokenizers(monkeypatch):
    """Where the native module is not built (or was built for another `tokenizers`),
    auto falls back to tiktoken's engine; a worker told to use the native engine that
    cannot encodes with `tokenizers`, and its view says so."""
    spec = _trained(_byte_level_split(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"))
    data = json.dumps(spec).encode()
    monkeypatch.setattr(native_bpe, "module", lambda: (None, "the native module is not built"))
    tokenizer = HuggingFaceTokenizer(data, "t.json")
    engine, why = engine_choice.choose_engine(tokenizer, "auto", [], "t.json")
    assert engine in ("tiktoken", "tokenizers") and "native: the native module is not built" in why
    view = HuggingFaceTokenizer(data, "t.json").with_engine("native")
    assert view.engine == "tokenizers"
    assert view.encode_many(_texts()) == tokenizer.encode_many(_texts())
