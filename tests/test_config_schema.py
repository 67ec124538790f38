"""The declared config schema (issue 30, item 5): an unknown key is refused in every block
with a "did you mean", an error's heading says what kind of problem it is (unknown key,
bad value, missing key), names are the config's own, and the names of built-in chat
templates and tokenizer types are listed when one is not found."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mintdim_beam import pipeline
from mintdim_beam.core import errors
from mintdim_beam.core.config import schema
from mintdim_beam.core.config.config_file import KEYS, PACK_KEYS, load_config
from mintdim_beam.core.config.pack_config import resolve_pack
from mintdim_beam.core.config.unit_config import resolve_datasets

REPO = Path(__file__).resolve().parents[1]
UNIT = yaml.safe_load((REPO / "examples/unit_build.yaml").read_text())
CHAT = yaml.safe_load((REPO / "examples/chat/chat_build.yaml").read_text())
PREFERENCE = yaml.safe_load((REPO / "examples/chat/preference_build.yaml").read_text())
PACK = yaml.safe_load((REPO / "examples/pack/pack_build.yaml").read_text())
TIKTOKEN = {"type": "tiktoken", "files": ["x.tiktoken"], "family": "gpt2"}


@pytest.fixture(autouse=True)
def at_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the examples' paths are relative to the repository


def _with(doc: dict, path: str, value) -> dict:
    """A copy of `doc` with `value` at the dotted `path` (None: the key removed)."""
    doc = copy.deepcopy(doc)
    *blocks, key = path.split(".")
    target = doc
    for block in blocks:
        target = target[block]
    if value is None:
        target.pop(key)
    else:
        target[key] = value
    return doc


def _dump(tmp_path: Path, doc: dict, name="config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return path


def _cli(*args, cwd=REPO):
    bin_dir = Path(sys.executable).parent
    return subprocess.run([str(bin_dir / "mintdim-beam"), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _bilingual(error, cls):
    assert type(error) is cls
    assert error.english.startswith(f"[english] {cls.__name__}: ")
    assert error.vietnamese.startswith(f"[vietnam] {cls.__name__}: ")
    assert str(errors.error_from_payload(json.loads(json.dumps(error.to_payload())))) == str(error)


# --- the cases of the issue ------------------------------------------------------------

@pytest.mark.parametrize("path,value,key,near", [
    ("output.shards", 3, "output.shards", None),
    ("units.size", [1], "units.size", "sizes"),
    ("output.sampels_per_shard", [500], "output.sampels_per_shard", "samples_per_shard"),
])
def test_a_typo_in_units_or_output_is_an_unknown_key(path, value, key, near, tmp_path):
    doc = _with(UNIT, path, value)
    if path == "output.sampels_per_shard":  # the typo replaces the real key
        doc["output"].pop("samples_per_shard")
    for load in (lambda: resolve_datasets(doc), lambda: load_config(str(_dump(tmp_path, doc)))):
        with pytest.raises(errors.ConfigUnknownKeyError) as info:
            load()
        _bilingual(info.value, errors.ConfigUnknownKeyError)
        assert info.value.kwargs["key"] == key
        assert info.value.kwargs["suggestion"] == near
        assert "[english] ConfigUnknownKeyError: Unknown config key." in info.value.english
        assert f"Key: {key}" in info.value.english
        if near:
            assert f"Did you mean: {near}?" in info.value.english
        assert "Missing" not in info.value.english


def test_a_unit_build_with_an_unknown_output_key_exits_2_before_any_output(tmp_path):
    doc = _with(UNIT, "output.shards", 3)
    doc["output"]["dir"] = [str(tmp_path / "a"), str(tmp_path / "b")]
    proc = _cli("build", _dump(tmp_path, doc), "--runner=FnApiRunner")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "ConfigUnknownKeyError" in proc.stderr and "output.shards" in proc.stderr
    assert not (tmp_path / "a").exists()


def test_a_pack_output_overwrite_is_refused_not_built(tmp_path):
    doc = _with(PACK, "output.dir", str(tmp_path / "out"))
    doc["output"]["overwrite"] = True
    with pytest.raises(errors.ConfigUnknownKeyError) as info:
        resolve_pack(doc)
    assert info.value.kwargs["key"] == "output.overwrite"
    proc = _cli("pack", _dump(tmp_path, doc), "--runner=FnApiRunner")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "ConfigUnknownKeyError" in proc.stderr and "output.overwrite" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("how", ["api", "config"])
def test_a_bad_policy_is_a_bad_value_with_the_allowed_values_and_a_suggestion(how, tmp_path):
    if how == "api":
        job = pipeline("unit-build").source.jsonl(**UNIT["source"])
        job = job.tokenizer.sentencepiece(files=UNIT["tokenizer"]["files"]).units(**UNIT["units"])
        job = job.output.dir(str(tmp_path / "out"), samples_per_shard=[4])
        with pytest.raises(errors.ConfigValueError) as info:
            job.run(on_overflow="truncat", on_template_unk="continue")
    else:
        with pytest.raises(errors.ConfigValueError) as info:
            load_config(str(_dump(tmp_path, {**UNIT, "on_overflow": "truncat"})))
    _bilingual(info.value, errors.ConfigValueError)
    text = info.value.english
    assert text.startswith("[english] ConfigValueError: Invalid config value.")
    assert "Key: on_overflow\n" in text and "run.on_overflow" not in text
    assert "Value: 'truncat'" in text and "Did you mean: truncate?" in text
    assert "Allowed values: prompt, abort, truncate, skip, extend" in text
    assert isinstance(info.value, errors.PipelineValidationError)  # caught as before
    assert not (tmp_path / "out").exists()


def test_an_unknown_tokenizer_type_lists_the_type_names():
    doc = _with(UNIT, "tokenizer.type", "huggingface")
    with pytest.raises(errors.TokenizerValidationError) as info:
        resolve_datasets(doc)
    text = info.value.english
    # The seed's text first, unchanged; then the names a config can write.
    assert text.startswith("[english] TokenizerValidationError: Unsupported tokenizer format.\n\n"
                           "Supported formats:\n\n• sentencepiece (.model)\n"
                           "• huggingface tokenizer (.json)")
    assert "Known types: sentencepiece, hf_json, tiktoken" in text
    assert "Did you mean: hf_json?" in text
    assert "Các loại hợp lệ: sentencepiece, hf_json, tiktoken" in info.value.vietnamese
    # The seed's own form (no type given by a config) is the seed's text alone.
    assert errors.TokenizerValidationError(unsupported_format=True).kwargs == {
        "component": "files", "problem": "", "unsupported_format": True}


def _chat_job(tmp_path, template):
    return (pipeline("unit-build")
            .source.chat(files=CHAT["source"]["files"], chat_template=template)
            .tokenizer.hf_json(files=CHAT["tokenizer"]["files"], config=CHAT["tokenizer"]["config"])
            .units(sizes=[[256, 512]], build_batch=[64])
            .output.dir(str(tmp_path / "out"), samples_per_shard=[100]))


def test_a_chat_template_name_that_is_not_built_in_lists_the_built_in_names(tmp_path):
    with pytest.raises(errors.ConfigValueError) as info:
        _chat_job(tmp_path, "qwen").run(on_overflow="truncate", on_template_unk="continue",
                                        pipeline_options=["--runner=FnApiRunner"])
    _bilingual(info.value, errors.ConfigValueError)
    assert info.value.kwargs["key"] == "source.chat_template"
    assert info.value.kwargs["allowed"] == ["tokenizer", "alpaca", "chatml", "llama3"]
    assert "Missing file" not in info.value.english
    assert not (tmp_path / "out").exists()
    # A path (a slash or .jinja) is a file, and a missing one is still the seed's error.
    for path in ("templates/qwen.jinja", "qwen.jinja"):
        with pytest.raises(errors.MintDimFileNotFoundError, match="Missing file: " + path):
            _chat_job(tmp_path, path).run(on_overflow="truncate", on_template_unk="continue",
                                          pipeline_options=["--runner=FnApiRunner"])
    near = errors.ConfigValueError  # a near miss of a built-in name is suggested
    with pytest.raises(near, match="Did you mean: chatml"):
        _chat_job(tmp_path, "chatlm").run(on_overflow="truncate", on_template_unk="continue",
                                          pipeline_options=["--runner=FnApiRunner"])


def test_samples_per_shard_given_as_an_int_says_a_list_is_expected(tmp_path):
    """The seed's contract is a list (`samples_per_shard → list of positive ints`): an
    int stays an error, one that says a list is expected, not `samples_per_shard[0]`."""
    job = pipeline("unit-build").source.jsonl(**UNIT["source"])
    job = job.tokenizer.sentencepiece(files=UNIT["tokenizer"]["files"]).units(**UNIT["units"])
    job = job.output.dir(str(tmp_path / "out"), samples_per_shard=1000)
    with pytest.raises(errors.SamplesPerShardError) as info:
        job.run(on_overflow="truncate", on_template_unk="continue")
    _bilingual(info.value, errors.SamplesPerShardError)
    assert ("Problem: samples_per_shard must be a list of positive ints (one entry, or one per "
            "input file), got 1000") in info.value.english
    assert "samples_per_shard[0]" not in info.value.english
    assert not (tmp_path / "out").exists()
    for key, value in (("units.sizes", [256, 512]), ("units.build_batch", 64)):
        with pytest.raises(errors.UnitValidationError, match=rf"got {value!r}".replace("[", r"\[")):
            resolve_datasets(_with(UNIT, key, value))


def test_a_missing_key_is_still_the_seeds_incomplete_configuration():
    with pytest.raises(errors.PipelineValidationError) as info:
        resolve_datasets(_with(UNIT, "output.samples_per_shard", None))
    assert type(info.value) is errors.PipelineValidationError
    assert info.value.english == ("[english] PipelineValidationError: Pipeline configuration is "
                                  "incomplete.\n\nMissing:\n\n• output.samples_per_shard")


def test_bad_values_of_dialogue_settings_are_bad_values():
    for key, value in (("source.format", "sharegtp"), ("source.on_extra_turns", "splitt"),
                       ("source.max_turns", 0), ("source.type", "chats")):
        with pytest.raises(errors.ConfigValueError) as info:
            resolve_datasets(_with(CHAT, key, value))
        assert info.value.kwargs["key"] == key
    with pytest.raises(errors.ConfigValueError, match="Did you mean: sharegpt"):
        resolve_datasets(_with(CHAT, "source.format", "sharegtp"))


def test_bad_row_keys_are_known_and_their_values_checked(tmp_path):
    for doc, keys in ((UNIT, KEYS), (PACK, PACK_KEYS)):
        ok = {**doc, "on_bad_row": "skip", "max_rejected": 0.05}
        assert load_config(str(_dump(tmp_path, ok)), keys) == ok
        with pytest.raises(errors.ConfigValueError, match="Did you mean: skip"):
            load_config(str(_dump(tmp_path, {**doc, "on_bad_row": "skp"})), keys)
        for bad in (2, -0.1, "0.1", True):
            with pytest.raises(errors.ConfigValueError, match="max_rejected"):
                load_config(str(_dump(tmp_path, {**doc, "max_rejected": bad})), keys)
    for resolve, doc in ((resolve_datasets, UNIT), (resolve_pack, PACK)):  # the API's path
        with pytest.raises(errors.ConfigValueError, match="Key: on_bad_row"):
            resolve({**doc, "on_bad_row": "skp"})
    assert schema.UNIT_BUILD.keys["on_bad_row"].default == "abort"
    assert schema.PACK_BUILD.keys["max_rejected"].default == 0.01


# --- every block refuses an unknown key, with a suggestion -------------------------------

UNIT_BLOCKS = {  # (config, where, typo, the key it is close to)
    "top": (UNIT, "", "on_overflw", "on_overflow"),
    "source-jsonl": (UNIT, "source", "templats", "templates"),
    "source-chat": (CHAT, "source", "max_turn", "max_turns"),
    "source-preference": (PREFERENCE, "source", "chat_templat", "chat_template"),
    "tokenizer-sentencepiece": (UNIT, "tokenizer", "engin", "engine"),
    "tokenizer-hf_json": (CHAT, "tokenizer", "confg", "config"),
    "tokenizer-tiktoken": ({**UNIT, "tokenizer": TIKTOKEN}, "tokenizer", "familly", "family"),
    "units": (UNIT, "units", "build_bach", "build_batch"),
    "output": (UNIT, "output", "dirr", "dir"),
}
PACK_BLOCKS = {
    "top": (PACK, "", "pak", "pack"),
    "source": (PACK, "source", "fieldz", "fields"),
    "tokenizer": (PACK, "tokenizer", "confg", "config"),
    "pack": (PACK, "pack", "shard_token", "shard_tokens"),
    "output": (PACK, "output", "dri", "dir"),
}
CASES = ([("unit-build", name, *case) for name, case in UNIT_BLOCKS.items()]
         + [("pack-build", name, *case) for name, case in PACK_BLOCKS.items()])


@pytest.mark.parametrize("entry", ["api", "config_file"])
@pytest.mark.parametrize("command,name,doc,where,typo,near", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_block_refuses_an_unknown_key_with_a_suggestion(
        command, name, doc, where, typo, near, entry, tmp_path):
    doc = copy.deepcopy(doc)
    (doc[where] if where else doc)[typo] = 1
    key = f"{where}.{typo}" if where else typo
    if entry == "api":  # what `run()` validates (the fluent builder's raw config)
        resolve = resolve_datasets if command == "unit-build" else resolve_pack
        call = lambda: resolve(doc)  # noqa: E731
    else:
        path = _dump(tmp_path, doc)
        call = lambda: load_config(str(path), KEYS if command == "unit-build" else PACK_KEYS)  # noqa: E731
    with pytest.raises(errors.ConfigUnknownKeyError) as info:
        call()
    _bilingual(info.value, errors.ConfigUnknownKeyError)
    assert info.value.kwargs["key"] == key
    assert info.value.kwargs["suggestion"] == near
    assert f"Did you mean: {near}?" in info.value.english
    assert f"Có phải ý bạn là: {near}?" in info.value.vietnamese


def test_a_key_of_another_type_says_which_type_has_it():
    doc = _with(CHAT, "tokenizer.family", "gpt2")
    with pytest.raises(errors.ConfigUnknownKeyError) as info:
        resolve_datasets(doc)
    assert "family is a key of tokenizer type tiktoken, not of 'hf_json'" in info.value.english
    with pytest.raises(errors.ConfigUnknownKeyError, match="source type chat"):
        resolve_datasets(_with(PREFERENCE, "source.max_turns", 2))
    with pytest.raises(errors.ConfigUnknownKeyError):  # a unit-build key in a pack config
        resolve_pack({**PACK, "units": UNIT["units"]})


def test_the_cli_refuses_an_unknown_key_in_a_block(tmp_path):
    doc = _with(UNIT, "units.size", [1])
    doc["output"]["dir"] = [str(tmp_path / "a"), str(tmp_path / "b")]
    proc = _cli("build", _dump(tmp_path, doc))
    assert proc.returncode == 2
    assert "[english] ConfigUnknownKeyError" in proc.stderr and "units.size" in proc.stderr
    assert "Did you mean: sizes?" in proc.stderr and "[vietnam] ConfigUnknownKeyError" in proc.stderr


# --- the schema covers every block -------------------------------------------------------

FREE_MAPPINGS = {"template_vars", "special_tokens"}  # the user's own names inside


def _mappings(doc: dict, block: schema.Block, where=""):
    """(dotted key, schema Key) of every mapping value in `doc`."""
    known = block.known(doc)
    for key, value in doc.items():
        if isinstance(value, dict):
            yield f"{where}{key}", known[key]
            if known[key].block is not None:
                yield from _mappings(value, known[key].block, f"{where}{key}.")


@pytest.mark.parametrize("doc,block", [
    (UNIT, schema.UNIT_BUILD), (CHAT, schema.UNIT_BUILD), (PREFERENCE, schema.UNIT_BUILD),
    (PACK, schema.PACK_BUILD),
    ({**UNIT, "tokenizer": {**TIKTOKEN, "special_tokens": {"<|x|>": 5}}}, schema.UNIT_BUILD)])
def test_every_mapping_of_a_config_is_a_declared_block_or_a_free_mapping(doc, block):
    """A block added to a config without its keys declared fails here: so an unknown
    key is refused in it too (`check_keys` walks every declared block)."""
    found = list(_mappings(doc, block))
    assert found
    for key, spec in found:
        assert spec.block is not None or key.rsplit(".", 1)[-1] in FREE_MAPPINGS, key


def test_the_tokenizer_validators_keys_are_the_schemas():
    from mintdim_beam.core.tokenizer.special_tokens import BLOCK_KEYS

    every = set(schema.TOKENIZER.keys)
    for keys in schema.TOKENIZER.variants.values():
        every |= set(keys)
    assert set(BLOCK_KEYS) == every
    from mintdim_beam.core.tokenizer.tokenizers import KINDS
    assert set(schema.TOKENIZER.variants) == set(KINDS)


def test_the_example_configs_pass_the_schema(tmp_path):
    for name, keys in (("examples/unit_build.yaml", KEYS), ("examples/chat/chat_build.yaml", KEYS),
                       ("examples/chat/llama3_build.yaml", KEYS),
                       ("examples/chat/preference_build.yaml", KEYS),
                       ("examples/pack/pack_build.yaml", PACK_KEYS)):
        assert load_config(name, keys)
