"""Config validation: every error class, raised before any output exists."""
import json

import pytest

from conftest import write_jsonl
from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.config.unit_config import resolve_datasets


@pytest.fixture
def workdir(tmp_path, tokenizers_dir, monkeypatch):
    write_jsonl(tmp_path / "data/a.jsonl", [{"q": "hello world", "a": "the answer"}])
    write_jsonl(tmp_path / "data/b.jsonl", [{"q": "data tokens", "a": "units"}])
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok/sp.model").write_bytes((tokenizers_dir / "sp.model").read_bytes())
    (tmp_path / "tok/hf.json").write_bytes((tokenizers_dir / "hf_bpe.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def raw(**overrides):
    config = {
        "source": {"files": ["data/a.jsonl"], "fields": [["q", "a"]], "templates": ["{q}\n{a}"]},
        "tokenizer": {"type": "sentencepiece", "files": ["tok/sp.model"]},
        "units": {"sizes": [[8, 16, 32]], "build_batch": [16]},
        "output": {"dir": "out", "samples_per_shard": [4]},
    }
    for path, value in overrides.items():
        block, key = path.split(".")
        if value is None:
            config[block].pop(key)
        else:
            config[block][key] = value
    return config


CASES = [
    ({"source.files": None, "units.build_batch": None}, errors.PipelineValidationError,
     ["• source.files", "• units.build_batch"]),
    ({"source.files": ["data/missing.jsonl"]}, errors.MintDimFileNotFoundError,
     ["Context: source", "Missing file: data/missing.jsonl"]),
    ({"tokenizer.files": ["tok/none.model"]}, errors.MintDimFileNotFoundError,
     ["Context: tokenizer"]),
    ({"tokenizer.files": [3]}, errors.TokenizerValidationError,
     ["tokenizer file path must be str, got int"]),
    ({"tokenizer.type": "wordpiece"}, errors.TokenizerValidationError, ["Unsupported tokenizer format."]),
    ({"units.sizes": [[16, 8]]}, errors.UnitValidationError, ["sorted ascending"]),
    ({"units.sizes": [[8, 8]]}, errors.UnitValidationError, ["duplicates"]),
    ({"units.sizes": [[0, 8]]}, errors.UnitValidationError, ["positive"]),
    ({"units.build_batch": [0]}, errors.UnitValidationError, ["build_batch[0]"]),
    ({"output.samples_per_shard": [0]}, errors.SamplesPerShardError,
     ["samples_per_shard[0] must be a positive int, got 0"]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "source.fields": [["q", "a"]] * 3},
     errors.FieldMappingError, ["Received 2 input files but 3 field configs."]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "source.templates": ["{q}{a}"] * 3},
     errors.TemplateMappingError, ["Received 2 input files but 3 templates."]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "tokenizer.files": ["tok/sp.model"] * 3},
     errors.TokenizerMappingError, ["Received 2 input files but 3 tokenizers."]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "units.sizes": [[8]] * 3},
     errors.UnitMappingError, ["Received 2 input files but 3 unit configs."]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "output.dir": ["o1", "o2", "o3"]},
     errors.OutputMappingError, ["Received 2 input files but 3 output directories."]),
    ({"source.files": ["data/a.jsonl", "data/b.jsonl"], "output.samples_per_shard": [1, 2, 3]},
     errors.SamplesPerShardError, ["Received 2 input files but 3 samples_per_shard entries"]),
]


@pytest.mark.parametrize("overrides,cls,fragments", CASES)
def test_config_errors(workdir, overrides, cls, fragments):
    with pytest.raises(cls) as info:
        resolve_datasets(raw(**overrides))
    assert type(info.value) is cls
    for fragment in fragments:
        assert fragment in info.value.english
    assert info.value.vietnamese.startswith(f"[vietnam] {cls.__name__}:")


def test_same_output_dir_with_different_settings_is_rejected(workdir):
    config = raw(**{"source.files": ["data/a.jsonl", "data/b.jsonl"],
                    "tokenizer.files": ["tok/sp.model", "tok/sp.model"],
                    "units.sizes": [[8, 16], [8, 32]]})
    with pytest.raises(errors.OutputMappingError) as info:
        resolve_datasets(config)
    assert "sizes" in info.value.english and "out" in info.value.english


def test_same_output_dir_with_equal_settings_is_one_dataset(workdir):
    config = raw(**{"source.files": ["data/a.jsonl", "data/b.jsonl"],
                    "tokenizer.files": ["tok/sp.model", "./tok/sp.model"],
                    "output.dir": ["out", "./out"]})
    with pytest.raises(errors.OutputMappingError):  # tokenizer paths differ as written
        resolve_datasets(config)
    config["tokenizer"]["files"] = ["tok/sp.model", "tok/sp.model"]
    datasets = resolve_datasets(config)
    assert len(datasets) == 1 and [f.given for f in datasets[0].files] == ["data/a.jsonl", "data/b.jsonl"]


def test_mapped_config_gives_one_dataset_per_file(workdir):
    config = raw(**{"source.files": ["data/a.jsonl", "data/b.jsonl"], "output.dir": ["o1", "o2"]})
    datasets = resolve_datasets(config)
    assert [d.output_given for d in datasets] == ["o1", "o2"]
    assert [len(d.files) for d in datasets] == [1, 1]


def _job(**overrides):
    config = raw(**overrides)
    job = pipeline("unit-build").source.jsonl(**config["source"])
    kind = config["tokenizer"]["type"]
    job = getattr(job.tokenizer, kind)(files=config["tokenizer"]["files"])
    return job.units(**config["units"]).output.dir(
        config["output"]["dir"], samples_per_shard=config["output"]["samples_per_shard"])


def _assert_nothing_written(workdir):
    assert not (workdir / "out").exists()


def test_template_unk_abort_and_prompt_without_tty_before_any_output(workdir):
    job = _job(**{"source.templates": ["{q}😀{a}"]})
    for policy in ("abort", "prompt"):
        with pytest.raises(errors.TemplateTokenizerError) as info:
            job.run(on_template_unk=policy, on_overflow="truncate", pipeline_options=["--runner=FnApiRunner"])
        assert "File index: 0" in info.value.english and "'😀'" in info.value.english
    _assert_nothing_written(workdir)


def test_special_token_missing(workdir, tokenizers_dir):
    spec = json.loads((workdir / "tok/hf.json").read_text())
    spec["padding"] = None
    (workdir / "tok/nopad.json").write_text(json.dumps(spec))
    job = _job(**{"tokenizer.type": "hf_json", "tokenizer.files": ["tok/nopad.json"]})
    with pytest.raises(errors.TokenizerSpecialTokenError) as info:
        job.run(on_template_unk="continue", on_overflow="truncate", pipeline_options=["--runner=FnApiRunner"])
    assert "Special token: pad_id" in info.value.english
    _assert_nothing_written(workdir)


def test_output_dir_not_empty(workdir):
    (workdir / "out").mkdir()
    (workdir / "out/keep.txt").write_text("x")
    with pytest.raises(errors.OutputValidationError) as info:
        _job().run(on_template_unk="continue", on_overflow="truncate", pipeline_options=["--runner=FnApiRunner"])
    assert "Directory: out" in info.value.english
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["keep.txt"]


def test_second_output_dir_not_empty_is_found_before_the_first_is_written(workdir):
    (workdir / "o2").mkdir()
    (workdir / "o2/x").write_text("x")
    job = _job(**{"source.files": ["data/a.jsonl", "data/b.jsonl"], "output.dir": ["o1", "o2"]})
    with pytest.raises(errors.OutputValidationError):
        job.run(on_template_unk="continue", on_overflow="truncate", pipeline_options=["--runner=FnApiRunner"])
    assert not (workdir / "o1").exists()


def test_bad_policy_names(workdir):
    with pytest.raises(errors.PipelineValidationError):
        _job().run(on_overflow="sometimes")


def test_dtype_selection():
    from mintdim_beam.core.config.prepare import select_dtype

    assert select_dtype(65535) == ("uint16", 65535, 2)
    assert select_dtype(65536) == ("uint32", 4294967295, 4)
    with pytest.raises(errors.TokenDTypeCapacityError) as info:
        select_dtype(5_000_000_000)
    assert "Tokenizer vocab_size: 5,000,000,000" in info.value.english
    assert "5.000.000.000" in info.value.vietnamese


def test_sentencepiece_is_the_version_mintdim_021_runs_with():
    # 0.2.2+ break ties differently ("999" -> "9"+"99" instead of "99"+"9"), which
    # changes shard bytes; mintdim 0.2.1 itself only runs on sentencepiece 0.2.1.
    import sentencepiece

    assert sentencepiece.__version__ == "0.2.1"
