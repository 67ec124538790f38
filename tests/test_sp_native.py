"""The native SentencePiece ids (`sp_native`, `native/sp_ids`): the ids of
sentencepiece's own Python API on real text and real models, and the fallback where the
module is missing, from another sentencepiece, or differs."""
import copy
import json
import pickle
import sys
from pathlib import Path

import pytest
import sentencepiece as spm

from conftest import REPO

from mintdim_beam.core.tokenizer import sp_native
from mintdim_beam.core.tokenizer.tokenizers import SentencePieceTokenizer

sys.path.insert(0, str(REPO / "benchmarks"))
import corpus as benchmark_corpus  # noqa: E402

# Models Google ships in sentencepiece's own sdist (`make setup` fetches it to build the
# module): an English unigram and a Japanese one.
SDIST_MODELS = sorted((REPO / ".tools" / "sp_ids").glob("sentencepiece-*/test/test*_model.model"))


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    """The 105,000 field values of 35,000 rows of the benchmark corpus: answers, QA,
    code, translations, long texts, rare scripts."""
    rows = benchmark_corpus.write_corpus(tmp_path_factory.mktemp("corpus") / "c.jsonl", 35_000)
    out = []
    for line in rows.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out += [row[field] for field in benchmark_corpus.FIELDS]
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, segments):
    """Models trained here on that text: a unigram with byte fallback, user-defined
    symbols and split digits; a BPE model; one with the identity normalizer."""
    root = tmp_path_factory.mktemp("models")
    text = root / "train.txt"
    text.write_text("\n".join(segments[:15_000]), encoding="utf-8")
    specs = {
        "unigram_bytes": dict(model_type="unigram", vocab_size=2000, byte_fallback=True,
                              user_defined_symbols=["<tool>", "@@"], split_digits=True),
        "bpe": dict(model_type="bpe", vocab_size=1500),
        "identity": dict(model_type="unigram", vocab_size=1000,
                         normalization_rule_name="identity", remove_extra_whitespaces=False),
    }
    paths = {}
    for name, options in specs.items():
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(root / name),
                                       character_coverage=0.995, num_threads=1, minloglevel=2,
                                       **options)
        paths[name] = root / f"{name}.model"
    return paths


def _adapter(path: Path) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(path.read_bytes(), str(path))


def test_setup_builds_the_module_from_the_sentencepiece_it_imports():
    native, why = sp_native.module()
    assert why is None, why
    from importlib.metadata import version

    assert native.SENTENCEPIECE_VERSION == version("sentencepiece")
    assert SDIST_MODELS, "make setup keeps sentencepiece's sdist under .tools/sp_ids"


@pytest.mark.parametrize("name", ["unigram_bytes", "bpe", "identity", "tests", "sdist"])
def test_ids_equal_sentencepiece_on_100k_segments(name, trained, segments, tokenizers_dir):
    paths = {"tests": [tokenizers_dir / "sp.model"], "sdist": SDIST_MODELS}.get(
        name, [trained.get(name)])
    extra = ["  two  spaces ", "tab\there", "<tool> @@x 12345", "\u2581lead", "", "𓀀"]
    for path in paths:
        adapter = _adapter(path)
        got = adapter.encode_many(segments + extra)
        assert adapter._native() is not None, adapter.native_reason
        want = adapter._sp.encode(segments + extra, out_type=int, num_threads=1)
        assert len(got) == len(segments) + len(extra)
        assert got == want, path.name


def test_threads_split_a_batch_without_changing_it(trained, segments):
    adapter = _adapter(trained["unigram_bytes"])
    engine = adapter._native()
    texts = segments[:5000]
    assert sp_native.encode(engine, texts, 1) == sp_native.encode(engine, texts, 2) \
        == sp_native.encode(engine, texts, 0) == sp_native.encode(engine, texts, 7)


def test_a_model_whose_native_ids_differ_is_encoded_by_sentencepiece(trained, monkeypatch):
    native, _ = sp_native.module()

    class Off:
        SENTENCEPIECE_VERSION = native.SENTENCEPIECE_VERSION
        load = staticmethod(native.load)

        @staticmethod
        def encode(engine, texts, threads):  # one id off on a text with digits
            return [ids[:-1] + [ids[-1] + 1] if "1" in text and ids else ids
                    for text, ids in zip(texts, native.encode(engine, texts, threads))]

    monkeypatch.setattr(sp_native, "module", lambda: (Off, None))
    adapter = _adapter(trained["unigram_bytes"])
    texts = ["12345 67.89", "plain words"]
    assert adapter.encode_many(texts) == adapter._sp.encode(texts, out_type=int)
    assert adapter._native() is None
    assert "differs from sentencepiece on '12345 67.89'" in adapter.native_path()


def test_without_the_module_or_with_another_sentencepiece_ids_come_from_its_api(
        trained, monkeypatch):
    texts = ["plain words", "x"]
    sp_native.module.cache_clear()
    import mintdim_beam.core.tokenizer as package

    monkeypatch.setitem(sys.modules, "mintdim_beam.core.tokenizer.sp_ids", None)
    monkeypatch.delattr(package, "sp_ids", raising=False)  # as if never built
    try:
        adapter = _adapter(trained["bpe"])
        assert adapter.encode_many(texts) == adapter._sp.encode(texts, out_type=int)
        assert "the native module is not built" in adapter.native_path()
    finally:
        sp_native.module.cache_clear()
    monkeypatch.undo()  # the module again, from another sentencepiece
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1")
    try:
        adapter = _adapter(trained["bpe"])
        assert adapter.encode_many(texts) == adapter._sp.encode(texts, out_type=int)
        assert "this process imports 0.0.1" in adapter.native_path()
    finally:
        sp_native.module.cache_clear()


def test_a_copy_checks_its_engine_again(trained):
    adapter = _adapter(trained["identity"])
    texts = ["a  b", " lead and trail "]
    want = adapter.encode_many(texts)
    for other in (pickle.loads(pickle.dumps(adapter)), copy.copy(adapter)):
        assert other._native_engine is None  # a capsule does not travel
        assert other.encode_many(texts) == want and other._native() is not None
