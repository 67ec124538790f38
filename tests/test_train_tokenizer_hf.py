"""train-tokenizer, Hugging Face BPE: the tokenizer.json the pipeline writes is the one
`Tokenizer.train_from_iterator` gives with the same trainer on the same text, whole
(vocabulary and merges in order, added tokens, normalizer, pre-tokenizer, decoder), on
about 2.6 MB of real text (`train_corpus`), for MiniMind's exact settings and other
vocabulary sizes and pipelines; both engines (the native trainer and the Python
package's); what `tokenizers` would decide by hash order or wrap is refused."""
from __future__ import annotations

import json
import struct

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

import train_corpus
from conftest import IN_MEMORY, write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.train_tokenizer import table, train_hf
from mintdim_beam.train_tokenizer.spec import LLAMA3_SPLIT, hf_bpe_spec

# MiniMind's 36 reserved tokens: ids 0-2 ChatML, 21/22 tool calls, 25/26 thinking, the
# nine buffers last (the seed's table), the others Qwen-style placeholders.
MINIMIND_SPECIALS = (
    ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    + [f"<|{name}|>" for name in ("object_ref_start", "object_ref_end", "box_start", "box_end",
                                  "quad_start", "quad_end", "vision_start", "vision_end",
                                  "vision_pad", "image_pad", "video_pad", "audio_start",
                                  "audio_end", "audio_pad")]
    + ["<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>",
       "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>",
       "</think>"]
    + [f"<|buffer{i}|>" for i in range(1, 10)])
assert len(MINIMIND_SPECIALS) == 36 and MINIMIND_SPECIALS.index("<think>") == 25


def _byte_level(tokenizer):
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()


def _llama3(tokenizer):
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()


def _whitespace_nfkc(tokenizer):
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()


def _metaspace(tokenizer):
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()


# name: (our trainer block, the oracle's pipeline, its BpeTrainer and BPE arguments)
CASES = {
    "minimind": ({"vocab_size": 6400, "pre_tokenizer": "byte_level",
                  "initial_alphabet": "byte_level", "special_tokens": MINIMIND_SPECIALS},
                 _byte_level, {"vocab_size": 6400, "special_tokens": MINIMIND_SPECIALS,
                               "initial_alphabet": pre_tokenizers.ByteLevel.alphabet()}, {}),
    "byte_level_20k": ({"vocab_size": 20000, "pre_tokenizer": "byte_level",
                        "initial_alphabet": "byte_level", "special_tokens": ["<|endoftext|>"]},
                       _byte_level, {"vocab_size": 20000, "special_tokens": ["<|endoftext|>"],
                                     "initial_alphabet": pre_tokenizers.ByteLevel.alphabet()},
                       {}),
    "llama3_8k": ({"vocab_size": 8000, "pre_tokenizer": "llama3",
                   "initial_alphabet": "byte_level",
                   "special_tokens": ["<|begin_of_text|>", "<|end_of_text|>"]},
                  _llama3, {"vocab_size": 8000,
                            "special_tokens": ["<|begin_of_text|>", "<|end_of_text|>"],
                            "initial_alphabet": pre_tokenizers.ByteLevel.alphabet()}, {}),
    "whitespace_nfkc": ({"vocab_size": 5000, "pre_tokenizer": "whitespace",
                         "normalizer": "nfkc", "min_frequency": 3, "unk_token": "[UNK]",
                         "special_tokens": ["[UNK]", "[PAD]"]},
                        _whitespace_nfkc, {"vocab_size": 5000, "min_frequency": 3,
                                           "special_tokens": ["[UNK]", "[PAD]"]},
                        {"unk_token": "[UNK]"}),
    "metaspace_limits": ({"vocab_size": 3000, "pre_tokenizer": "metaspace",
                          "max_token_length": 6, "limit_alphabet": 1000, "unk_token": "<unk>",
                          "special_tokens": ["<unk>", "<s>", "</s>"]},
                         _metaspace, {"vocab_size": 3000, "max_token_length": 6,
                                      "limit_alphabet": 1000,
                                      "special_tokens": ["<unk>", "<s>", "</s>"]},
                         {"unk_token": "<unk>"}),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("train_hf") / "corpus.jsonl"
    return write_jsonl(path, [{"text": t} for t in train_corpus.rows()])


def oracle(rows, pipeline_setup, trainer_args, model_args) -> dict:
    tokenizer = Tokenizer(models.BPE(**model_args))
    pipeline_setup(tokenizer)
    trainer = trainers.BpeTrainer(show_progress=False, **trainer_args)
    tokenizer.train_from_iterator(list(rows), trainer)
    return json.loads(tokenizer.to_str())


def train(corpus, out, trainer: dict, options=IN_MEMORY) -> dict:
    return (pipeline("train-tokenizer").source.text(files=[str(corpus)])
            .trainer.bpe(**trainer).output.dir(str(out)).run(pipeline_options=list(options)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_tokenizer_is_train_from_iterator_s(case, corpus, tmp_path):
    ours_block, setup, trainer_args, model_args = CASES[case]
    result = train(corpus, tmp_path / "out", ours_block)
    assert result["engine"] == "native"
    ours = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))
    want = oracle(train_corpus.rows(), setup, trainer_args, model_args)
    assert list(ours["model"]["vocab"].items()) == list(want["model"]["vocab"].items())
    assert ours["model"]["merges"] == want["model"]["merges"]
    assert ours == want  # the whole file: added tokens, pipeline, model settings
    assert len(ours["model"]["vocab"]) == trainer_args["vocab_size"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["rows"]["trained"] == sum(1 for t in train_corpus.rows() if t.strip())


def test_minimind_s_layout(corpus, tmp_path):
    """36 reserved ids, then the 256 bytes, then 6,108 merges (the seed's count)."""
    train(corpus, tmp_path / "out", CASES["minimind"][0])
    doc = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    assert [t for t, i in sorted(vocab.items(), key=lambda kv: kv[1])][:36] == MINIMIND_SPECIALS
    assert sorted(vocab[c] for c in pre_tokenizers.ByteLevel.alphabet()) == list(range(36, 292))
    assert len(doc["model"]["merges"]) == 6400 - 36 - 256
    assert [(t["id"], t["content"], t["special"]) for t in doc["added_tokens"]] == [
        (i, t, True) for i, t in enumerate(MINIMIND_SPECIALS)]


def test_the_python_engine_gives_the_same_tokenizer(corpus, tmp_path, monkeypatch):
    """Without the native trainer the counted words go to tokenizers' Python trainer."""
    rows = train_corpus.rows()[:3000]
    small = write_jsonl(tmp_path / "small.jsonl", [{"text": t} for t in rows])
    monkeypatch.setenv(train_hf.PROGRAM_ENV, str(tmp_path / "no-such-program"))
    block = {"vocab_size": 2000, "pre_tokenizer": "byte_level", "initial_alphabet": "byte_level",
             "special_tokens": ["<|endoftext|>"], "min_frequency": 2}
    result = train(small, tmp_path / "out", block)
    assert result["engine"] == "python"
    ours = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))
    assert ours == oracle(rows, _byte_level, {"vocab_size": 2000, "min_frequency": 2,
                                              "special_tokens": ["<|endoftext|>"],
                                              "initial_alphabet":
                                                  pre_tokenizers.ByteLevel.alphabet()}, {})


def test_a_program_built_over_another_tokenizers_is_not_used(tmp_path, monkeypatch):
    fake = tmp_path / "bpe_train"
    fake.write_text("#!/bin/sh\necho 0.0.1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(train_hf.PROGRAM_ENV, str(fake))
    program, why = train_hf.native_program()
    assert program is None and "0.0.1" in why


def _table(tmp_path, counts: dict) -> list[str]:
    path = tmp_path / "words-00000.bin"
    path.write_bytes(table.encode(sorted(counts.items())))
    return [str(path)]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_tie_at_the_limit_alphabet_cut_is_refused(engine, tmp_path, monkeypatch):
    """a, b, c seen 5 times each, z 9: limit_alphabet 2 keeps z and one of three."""
    if engine == "python":
        monkeypatch.setenv(train_hf.PROGRAM_ENV, str(tmp_path / "none"))
    spec = hf_bpe_spec({"type": "bpe", "pre_tokenizer": "byte_level", "vocab_size": 50, "limit_alphabet": 2})
    parts = _table(tmp_path, {"ab": 5, "c": 5, "zz": 3, "z": 3})
    with pytest.raises(errors.TrainerAlphabetTieError) as caught:
        train_hf.train_bpe(spec, parts, set("abcz"))
    assert caught.value.kwargs["tied"] == "abc" and caught.value.kwargs["count"] == 5
    assert caught.value.kwargs["limits"] == [1, 4]
    ok = hf_bpe_spec({"type": "bpe", "pre_tokenizer": "byte_level", "vocab_size": 50, "limit_alphabet": 1})
    text, _ = train_hf.train_bpe(ok, parts, set("abcz"))
    assert "z" in json.loads(text)["model"]["vocab"]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_pair_past_the_trainer_s_32_bits_is_refused(engine, tmp_path, monkeypatch):
    if engine == "python":
        monkeypatch.setenv(train_hf.PROGRAM_ENV, str(tmp_path / "none"))
    spec = hf_bpe_spec({"type": "bpe", "pre_tokenizer": "byte_level", "vocab_size": 50})
    parts = _table(tmp_path, {"th": 2_000_000_000, "xthe": 200_000_000, "a": 7})
    # (the Python engine would feed 2.2 billion words: the check comes first)
    with pytest.raises(errors.TrainerCountOverflowError) as caught:
        train_hf.train_bpe(spec, parts, set("thexa"))
    assert caught.value.kwargs == {"pair": "th", "count": 2_200_000_000}
    fits = _table(tmp_path, {"th": 2_000_000_000, "xthe": 100_000_000})
    if engine == "native":  # 2.1e9 <= 2**31 - 1: trained, th the first merge
        text, _ = train_hf.train_bpe(spec, fits, set("thex"))
        assert json.loads(text)["model"]["merges"][0] == ["t", "h"]


def test_min_frequency_that_leaves_nothing_is_refused(tmp_path):
    spec = hf_bpe_spec({"type": "bpe", "pre_tokenizer": "byte_level", "vocab_size": 50, "min_frequency": 10})
    parts = _table(tmp_path, {"ab": 4, "cd": 3})
    with pytest.raises(errors.TrainerMinFrequencyError) as caught:
        train_hf.train_bpe(spec, parts, set("abcd"))
    assert caught.value.kwargs == {"min_frequency": 10, "largest": 4, "pair": "ab"}


def test_a_vocabulary_the_alphabet_fills_is_refused(tmp_path):
    spec = hf_bpe_spec({"type": "bpe", "pre_tokenizer": "byte_level", "vocab_size": 5, "special_tokens": ["<s>"]})
    parts = _table(tmp_path, {"abcd": 4})
    with pytest.raises(errors.TrainerVocabSizeError) as caught:
        train_hf.train_bpe(spec, parts, set("abcd"))
    assert caught.value.kwargs["alphabet"] == 4 and caught.value.kwargs["special"] == 1


def test_table_records_round_trip():
    items = [("Ġthe", 12), ("", 1), ("日本", 1 << 40), ("a\tb\n", 3)]
    data = table.encode(items)
    assert list(table.decode(data)) == items
    assert data[:4] == struct.pack("<I", len("Ġthe".encode()))


@pytest.mark.parametrize("case", ["minimind", "llama3_8k", "whitespace_nfkc", "metaspace_limits"])
def test_the_trainer_s_own_feed_counts_what_the_pre_tokenizer_gives(case):
    """Workers count through `train_from_iterator`'s feed (`words.HfWords`): the same
    table as the normalizer and pre-tokenizer objects give, counted in Python."""
    from collections import Counter

    from mintdim_beam.train_tokenizer.words import HfWords

    spec = hf_bpe_spec({"type": "bpe", **CASES[case][0]})
    rows = train_corpus.rows()[::3]
    fed: Counter = Counter()
    words = HfWords(spec)
    for i in range(0, len(rows), 1000):
        words.count(rows[i:i + 1000], fed)
    tokenizer = Tokenizer.from_str(spec.tokenizer_json())
    by_hand: Counter = Counter()
    for text in rows:
        if tokenizer.normalizer is not None:
            text = tokenizer.normalizer.normalize_str(text)
        by_hand.update(piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text))
    assert fed == by_hand and sum(fed.values()) > 100_000
