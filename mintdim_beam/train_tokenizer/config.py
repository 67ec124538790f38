"""A train-tokenizer config, checked on the launcher before any output: the `source`
block (the same files, formats and bad-row policy as the builds; a row's text from
fields and templates, one text field, or a dialogue's contents joined), the `trainer`
block (`spec`), what `tokenizer_config.json` says, and one output directory.

`TrainConfig` reads like a unit-build `Dataset` where the shared code needs one
(`index`, `files`, `run_id`, `output_given`): range planning, line numbering, error
locations and the output's ownership are the builds' own."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mintdim_beam.core.config.schema import (CHAT_FORMATS, TRAIN_TOKENIZER, check_choice,
                                            check_keys, check_run_options)
from mintdim_beam.core.config.unit_config import InputFile, check_arity
from mintdim_beam.core.errors import (MintDimFileNotFoundError, PipelineValidationError,
                                      SourceFilesError)
from mintdim_beam.core.errors.train import TrainerValidationError
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.render.template import CompiledTemplate, compile_template
from mintdim_beam.train_tokenizer.spec import HfBpeSpec, SentencePieceSpec, trainer_spec

CHAT_TEMPLATES = ("chatml", "llama3", "alpaca")
CHATML_MARKERS = ("<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class TokenizerConfigSpec:
    """What `tokenizer_config.json` names: the special tokens' texts, the chat template
    (a built-in's name or a file's text) and `model_max_length`."""

    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    chat_template: str | None = None  # as given: a name or a path
    chat_template_text: str | None = None
    model_max_length: int | None = None


@dataclass(frozen=True)
class TrainConfig:
    files: tuple[InputFile, ...]
    kind: str  # "jsonl" | "text" | "chat"
    fields: tuple[tuple[str, ...], ...]  # per file (jsonl, text)
    templates: tuple[CompiledTemplate, ...]  # per file (jsonl, text)
    chat_format: str | None
    join: str
    trainer: HfBpeSpec | SentencePieceSpec
    tokenizer_config: TokenizerConfigSpec
    holdout: float
    sample: float
    seed: int
    output_given: str
    output_path: str
    index: int = 0  # the one "dataset" of range planning and numbering
    run_id: str = ""

    @property
    def scratch_path(self) -> str:
        return storage.run_scratch(self.output_path, self.run_id)


def _bad(component: str, rule: str, value) -> TrainerValidationError:
    return TrainerValidationError(component=component, rule=rule, value=repr(value))


def _check_missing(raw: dict) -> None:
    missing = []
    source = raw.get("source")
    if not isinstance(source, dict) or not source.get("files"):
        missing.append("source.files")
    elif source.get("type", "jsonl") == "jsonl":
        missing += [f"source.{k}" for k in ("fields", "templates") if not source.get(k)]
    if not isinstance(raw.get("trainer"), dict) or not raw.get("trainer"):
        missing.append("trainer")
    output = raw.get("output")
    if not isinstance(output, dict) or not output.get("dir"):
        missing.append("output.dir")
    if missing:
        raise PipelineValidationError(missing=missing)


def _files(source: dict):
    files = file_list.as_list(source["files"])
    if not isinstance(files, (list, tuple)) or not all(isinstance(f, str) for f in files):
        raise PipelineValidationError(missing=["source.files (a list of paths)"])
    listed = file_list.expand(list(files), context="source")
    repeat = file_list.first_repeat(listed)
    if repeat is not None:
        first, again = repeat
        raise SourceFilesError(entry=again.given, rule="duplicate", other=first.given,
                               output="the trained tokenizer")
    return list(files), listed


def _texts(source: dict, kind: str, entries: int, listed):
    """(fields, templates) per file: a jsonl source's own, or `{field}` for text."""
    if kind == "text":
        name = source.get("field", "text")
        if not isinstance(name, str) or not name:
            raise _bad("source.field", "text", name)
        fields, templates = [[name]], ["{" + name + "}"]
    elif kind == "jsonl":
        fields, templates = source["fields"], source["templates"]
        if isinstance(fields, str) or not all(
                isinstance(g, (list, tuple)) and all(isinstance(f, str) for f in g)
                for g in fields):
            raise PipelineValidationError(missing=["source.fields (a list of lists of field "
                                                   "names)"])
        if isinstance(templates, str) or not all(isinstance(t, str) for t in templates):
            raise PipelineValidationError(missing=["source.templates (a list of template "
                                                   "strings)"])
        check_arity(entries, fields, templates, ["-"], [[1]], [1], ["-"], [1])
    else:
        return (), ()
    pick = (lambda values, i: values[0] if len(values) == 1 else values[i])
    compiled = {}
    for f in listed:
        if f.entry not in compiled:
            compiled[f.entry] = compile_template(pick(templates, f.entry),
                                                 list(pick(fields, f.entry)), f.given)
    return (tuple(tuple(pick(fields, f.entry)) for f in listed),
            tuple(compiled[f.entry] for f in listed))


def _specials(spec) -> set[str]:
    """The texts the trained vocabulary holds as one token each."""
    if isinstance(spec, HfBpeSpec):
        return set(spec.special_tokens)
    pieces = {spec.option(f"{name}_piece") for name in ("unk", "bos", "eos", "pad")
              if spec.option(f"{name}_id") >= 0}
    return pieces | set(spec.symbols)


def _tokenizer_config(block, spec) -> TokenizerConfigSpec:
    block = block or {}
    if not isinstance(block, dict):
        raise PipelineValidationError(missing=["tokenizer_config (a mapping)"])
    specials = _specials(spec)
    tokens = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = block.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise _bad(f"tokenizer_config.{key}", "text", f"tokenizer_config.{key}")
        if value not in specials:
            raise _bad(f"tokenizer_config.{key}", "config_token", f"{key}: {value!r}")
        tokens[key] = value
    if isinstance(spec, HfBpeSpec) and spec.unk_token is not None \
            and spec.unk_token not in specials:
        raise _bad("trainer.unk_token", "config_token", f"unk_token: {spec.unk_token!r}")
    template, text = block.get("chat_template"), None
    if template is not None:
        if not isinstance(template, str) or not template:
            raise _bad("tokenizer_config.chat_template", "chat_template", template)
        if template in CHAT_TEMPLATES:
            from mintdim_beam.core.chat.templates import builtin_template

            text = builtin_template(template)
            if template == "chatml":
                for marker in CHATML_MARKERS:
                    if marker not in specials:
                        raise _bad("tokenizer_config.chat_template", "config_token",
                                   f"chat_template: chatml uses {marker!r}")
        elif template.endswith(".jinja"):
            path = storage.resolve(template)
            if not storage.is_file(path):
                raise MintDimFileNotFoundError(context="chat_template", missing_file=template)
            text = storage.read_bytes(path).decode("utf-8")
        else:
            raise _bad("tokenizer_config.chat_template", "chat_template", template)
    length = block.get("model_max_length")
    if length is not None and (type(length) is not int or length <= 0):
        raise _bad("tokenizer_config.model_max_length", "positive",
                   f"tokenizer_config.model_max_length ({length!r})")
    return TokenizerConfigSpec(chat_template=template, chat_template_text=text,
                               model_max_length=length, **tokens)


def _fraction(raw: dict, key: str, default: float, low_open: bool) -> float:
    value = raw.get(key, default)
    if value is None:
        value = default
    if type(value) not in (int, float) or not (0 < value <= 1 if low_open else 0 <= value < 1):
        raise _bad(key, "fraction", f"{key} ({value!r})")
    return float(value)


def resolve_train(raw: dict) -> TrainConfig:
    """Validate `raw` (blocks source, trainer, tokenizer_config, output; holdout,
    sample, seed) after the declared schema's unknown keys."""
    check_keys(raw, TRAIN_TOKENIZER)
    check_run_options(raw, TRAIN_TOKENIZER)
    _check_missing(raw)
    source = raw["source"]
    kind = source.get("type", "jsonl")
    check_choice("source.type", kind, ("jsonl", "text", "chat"))
    spec = trainer_spec(raw["trainer"])
    chat_format, join = None, "\n"
    if kind == "chat":
        chat_format = source.get("format", "messages")
        check_choice("source.format", chat_format, CHAT_FORMATS)
        join = source.get("join", "\n")
        if not isinstance(join, str):
            raise _bad("source.join", "text", "source.join (a string; \"\" joins with nothing)")
    output = raw["output"]
    if not isinstance(output["dir"], str):
        raise _bad("output.dir", "output_dir", output["dir"])
    tokenizer_config = _tokenizer_config(raw.get("tokenizer_config"), spec)
    entries, listed = _files(source)
    fields, templates = _texts(source, kind, len(entries), listed)
    seed = raw.get("seed", 0)
    if type(seed) is not int or not 0 <= seed < 1 << 63:
        raise _bad("seed", "count", f"seed ({seed!r})")
    return TrainConfig(
        files=tuple(InputFile(i, f.given, f.path, f.entry_text if f.expanded else "", f.listed)
                    for i, f in enumerate(listed)),
        kind=kind, fields=fields, templates=templates, chat_format=chat_format, join=join,
        trainer=spec, tokenizer_config=tokenizer_config,
        holdout=_fraction(raw, "holdout", 0.0, low_open=False),
        sample=_fraction(raw, "sample", 1.0, low_open=True), seed=seed,
        output_given=output["dir"], output_path=storage.resolve(output["dir"]))


def with_run(config: TrainConfig, run_id: str) -> TrainConfig:
    return dataclasses.replace(config, run_id=run_id)


def train_raw(config: TrainConfig) -> dict:
    """The config as a file would say it (paths as given), for the manifest."""
    source: dict = {"type": config.kind, "files": [f.given for f in config.files]}
    if config.kind == "jsonl":
        source.update(fields=[list(f) for f in config.fields],
                      templates=[t.raw for t in config.templates])
    elif config.kind == "text":
        source["field"] = config.fields[0][0] if config.fields else "text"
    else:
        source.update(format=config.chat_format, join=config.join)
    tc = config.tokenizer_config
    block = {k: getattr(tc, k) for k in ("bos_token", "eos_token", "pad_token", "unk_token",
                                         "chat_template", "model_max_length")
             if getattr(tc, k) is not None}
    return {"source": source, "trainer": config.trainer.manifest_block(),
            "tokenizer_config": block, "output": {"dir": config.output_given},
            "holdout": config.holdout, "sample": config.sample, "seed": config.seed}
