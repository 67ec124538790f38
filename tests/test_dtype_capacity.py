"""Every value written fits its dtype: unit sizes and segment lengths above what the
token dtype holds stop the build with TokenDTypeCapacityError, never wrap."""
import io
import json
import shutil
import sys

import numpy as np
import pytest

from conftest import REPO, run_build, write_jsonl
from mintdim_beam.unit_build.packed import Packed
from mintdim_beam.unit_build.prompts import InteractiveChooser, ask_overflow
from mintdim_beam.unit_build.transforms.decide import abort_errors
from mintdim_beam.unit_build.units import Candidate, decide_overflows, fixed_chooser
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.config.unit_config import Dataset, InputFile
from mintdim_beam.core.errors import TokenDTypeCapacityError, error_from_payload
from mintdim_beam.core.errors.failures import resolve
from mintdim_beam.core.config.prepare import prepare

DEMO_MODEL = REPO / "examples/tokenizer/demo.model"  # 2,000 pieces: uint16
UINT16_MAX, UINT32_MAX = 2**16 - 1, 2**32 - 1


@pytest.fixture(scope="module")
def big_vocab_json(tmp_path_factory):
    """A real Hugging Face WordLevel tokenizer.json with 70,002 entries: uint32 ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1, **{f"w{i}": i + 2 for i in range(70000)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.enable_padding(pad_id=1, pad_token="[PAD]")
    path = tmp_path_factory.mktemp("big_vocab") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def _build(workdir, tokenizer_kind, tokenizer_file, sizes, on_overflow="abort", rows=None):
    name = "tok.json" if tokenizer_kind == "hf_json" else "tok.model"
    shutil.copy(tokenizer_file, workdir / name)
    write_jsonl(workdir / "data.jsonl", rows or [{"q": "hello world"}, {"q": "w1 w2 w3"}])
    return run_build(workdir, files=["data.jsonl"], fields=[["q"]], templates=["{q}"],
                     tokenizer=tokenizer_kind, tokenizer_files=[name], sizes=[sizes],
                     build_batch=[4], output="out", samples_per_shard=[8],
                     on_overflow=on_overflow)


@pytest.mark.parametrize("kind,size,dtype,limit", [
    ("sentencepiece", 400000, "uint16", UINT16_MAX),
    ("hf_json", UINT32_MAX + 1, "uint32", UINT32_MAX),
])
def test_a_declared_size_above_the_dtype_is_a_config_error_before_any_output(
        tmp_path, big_vocab_json, kind, size, dtype, limit):
    tokenizer_file = DEMO_MODEL if kind == "sentencepiece" else big_vocab_json
    with pytest.raises(TokenDTypeCapacityError) as caught:
        _build(tmp_path, kind, tokenizer_file, [16, size])
    assert caught.value.kwargs["dtype"] == dtype
    assert caught.value.kwargs["max_value"] == limit
    assert caught.value.kwargs["unit_size"] == size
    assert caught.value.kwargs["vocab_size"] == (2000 if kind == "sentencepiece" else 70002)
    assert getattr(caught.value, "phase", None) != "build"  # a config error (exit 2)
    assert not (tmp_path / "out").exists()
    (tmp_path / "edge").mkdir()  # the largest size the dtype holds is a valid build
    _build(tmp_path / "edge", kind, tokenizer_file, [16, limit])
    assert (tmp_path / "edge/out/manifest.json").exists()


def _long_sample_rows():
    """Line 3 renders to more than 65,535 tokens of the demo model."""
    return [{"q": "hello world"}, {"q": "data tokens"},
            {"q": "hello world " * 15000}, {"q": "units padding"}]


def _demo_token_count(text: str) -> int:
    import sentencepiece as spm

    return len(spm.SentencePieceProcessor(model_file=str(DEMO_MODEL)).encode(text))


def test_extend_of_a_sample_longer_than_uint16_fails_naming_it_skip_skips_it(tmp_path):
    with pytest.raises(TokenDTypeCapacityError) as caught:
        _build(tmp_path, "sentencepiece", DEMO_MODEL, [16], "extend", _long_sample_rows())
    count = _demo_token_count(_long_sample_rows()[2]["q"])
    assert count > UINT16_MAX
    assert caught.value.kwargs == {"vocab_size": 2000, "dtype": "uint16",
                                   "max_value": UINT16_MAX, "unit_size": None,
                                   "sample": "data.jsonl:3", "token_count": count}
    assert caught.value.phase == "build"  # exit 1
    assert not (tmp_path / "out/manifest.json").exists()
    assert (tmp_path / "out/unit_16" / fmt.FAILED_UNIT).exists()

    (tmp_path / "skip").mkdir()  # skip still skips and indexes such a sample, as before
    _build(tmp_path / "skip", "sentencepiece", DEMO_MODEL, [16], "skip", _long_sample_rows())
    out = tmp_path / "skip/out"
    rows = [json.loads(line) for line in (out / fmt.OVERFLOW_INDEX).open()]
    assert rows == [{"sample_id": 2, "source_file": "data.jsonl", "source_line": 3,
                     "token_count": count, "max_unit_size": 16, "action": "skip"}]
    assert json.loads((out / fmt.STATS).read_text())["total_samples"] == 3


def _uint32_plan(big_vocab_json):
    dataset = Dataset(index=0, files=(InputFile(0, "big.jsonl", "big.jsonl"),), fields=("q",),
                      template="{q}", template_file_index=0, tokenizer_kind="hf_json",
                      tokenizer_given=str(big_vocab_json), tokenizer_path=str(big_vocab_json),
                      sizes=(8,), build_batch=4, output_given="o", output_path="o",
                      samples_per_shard=2)
    return prepare(dataset)


def test_the_decision_refuses_an_extend_past_uint32_without_such_data(big_vocab_json):
    """No 4-billion-token sample is built: the decision sees only its token count."""
    plan = _uint32_plan(big_vocab_json)
    assert (plan.token_dtype, plan.magic) == ("uint32", UINT32_MAX)
    order = (0, 0, 0, 0, 1, 6)  # (dataset, file, range, batch, j, local line)
    cands = [Candidate(order=(0, 0, 0, 0, 0, 2), sample_id=1, token_count=UINT32_MAX,
                       source_file="big.jsonl", source_line=3),
             Candidate(order=order, sample_id=5, token_count=UINT32_MAX + 1,
                       source_file="big.jsonl", source_line=7)]
    decided = decide_overflows((8,), cands, fixed_chooser("extend"), capacity=plan.magic)
    assert decided.sizes == [8, UINT32_MAX]  # the largest length uint32 holds is fine
    assert decided.abort is cands[1] and decided.abort_reason == "capacity"

    pending, = abort_errors(Packed({0: decided}), {0: plan})
    error = error_from_payload(resolve(pending, {(0, 0, 0): (0, 0)}, {0: plan.dataset}))
    assert isinstance(error, TokenDTypeCapacityError)
    assert error.kwargs == {"vocab_size": 70002, "dtype": "uint32", "max_value": UINT32_MAX,
                            "unit_size": None, "sample": "big.jsonl:7",
                            "token_count": UINT32_MAX + 1}
    # without a capacity (the old rule) the same candidates would be extended
    assert decide_overflows((8,), cands, fixed_chooser("extend")).abort is None


def test_records_refuse_values_the_dtype_cannot_hold():
    tokens = np.arange(3, dtype=np.uint16)
    with pytest.raises(TokenDTypeCapacityError):
        fmt.build_records(tokens, np.array([[1, 2]]), UINT16_MAX + 1, 65535, 0, "uint16")
    with pytest.raises(TokenDTypeCapacityError):  # a length past the dtype, whatever the unit
        fmt.build_records(tokens, np.array([[UINT16_MAX + 4, -(UINT16_MAX + 1)]]), 8, 65535, 0,
                          "uint16")
    records = fmt.build_records(tokens, np.array([[1, 2]]), UINT16_MAX, 65535, 0, "uint16")
    assert records.shape == (1, 3 + UINT16_MAX) and records[0, :3].tolist() == [65535, 1, 2]


def _ask(monkeypatch, answers: str, token_count: int, capacity):
    cand = Candidate(order=(0,), sample_id=0, token_count=token_count, source_file="f.jsonl",
                     source_line=1)
    monkeypatch.setattr(sys, "stdin", io.StringIO(answers))
    errors = io.StringIO()
    monkeypatch.setattr(sys, "stderr", errors)
    return ask_overflow(cand, 16, capacity), errors.getvalue()


def test_the_prompt_does_not_offer_an_extend_the_dtype_cannot_store(monkeypatch):
    # extend (refused: too long), then truncate, for this sample only
    choice, said = _ask(monkeypatch, "2\n1\n1\n", UINT16_MAX + 1, UINT16_MAX)
    assert choice == ("truncate", None, "only")
    assert "extend is not possible" in said and "không thể extend" in said
    # a sample that fits may be extended, but not to a size past the dtype
    choice, said = _ask(monkeypatch, "2\n70000\n100\n2\n", 40, UINT16_MAX)
    assert choice == ("extend", 100, "all") and "must be >= 40 and <= 65535" in said


def test_an_extend_for_all_asks_again_for_a_sample_too_long_to_store():
    asked = []

    def ask(cand, max_size, capacity):
        asked.append(cand.sample_id)
        return ("extend", cand.token_count, "all") if len(asked) == 1 else ("skip", None, "only")

    chooser = InteractiveChooser(ask, capacity=UINT16_MAX)
    cands = [Candidate((i,), i, t, "f.jsonl", i + 1) for i, t in
             enumerate((100, 200, UINT16_MAX + 1, 300))]
    assert [chooser(c, 16) for c in cands] == [("extend", 100), ("extend", 200), ("skip", None),
                                               ("extend", 300)]
    assert asked == [0, 2]
