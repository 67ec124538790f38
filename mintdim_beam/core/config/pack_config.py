"""A pack-build's configuration, validated on the driver before any output: JSONL files
with per-file fields and templates (one each, or one per file), one tokenizer, the
`pack:` block (eod, seed, shard_tokens) and one output directory; then prepared: the
tokenizer loaded once to resolve the EOD id and the token dtype.

`PackConfig` looks like a unit-build `Dataset` where the shared code needs one (`index`,
`files`, `run_id`): range planning, line numbering and error locations are the same."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mintdim_beam.core.config import schema
from mintdim_beam.core.config.schema import PACK_BUILD, check_keys, check_run_options
from mintdim_beam.core.config.unit_config import (InputFile, check_arity, check_source,
                                                  check_tokenizer)
from mintdim_beam.core.errors import PackValidationError, PipelineValidationError
from mintdim_beam.core.files import storage
from mintdim_beam.core.formats.megatron import dtype_for_vocab
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.render.template import CompiledTemplate, compile_template
from mintdim_beam.core.tokenizer.engine_choice import choose_engine
from mintdim_beam.core.tokenizer.special_tokens import (TokenizerOptions, read_tokenizer_config,
                                                       tiktoken_keys)
from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer

DEFAULT_SHARD_TOKENS = 1 << 29  # 1 GiB of uint16 tokens per shard, as Dolma's default file cap
PACK_KEYS = tuple(schema.PACK.keys)  # eod, seed, shard_tokens: declared in the schema


@dataclass(frozen=True)
class PackConfig:
    files: tuple[InputFile, ...]
    fields: tuple[tuple[str, ...], ...]  # per file
    templates: tuple[CompiledTemplate, ...]  # per file
    tokenizer_kind: str
    tokenizer_given: str
    tokenizer_path: str
    config_given: str | None  # tokenizer_config.json
    config_path: str | None
    bos: bool
    eod: str | None
    seed: int
    shard_tokens: int
    output_given: str
    output_path: str
    index: int = 0  # the one "dataset" of range planning and numbering
    run_id: str = ""
    tokenizer_options: TokenizerOptions = TokenizerOptions()  # engine, a tiktoken file's regex

    @property
    def scratch_path(self) -> str:
        return storage.run_scratch(self.output_path, self.run_id)


@dataclass(frozen=True)
class PackPlan:
    """What workers need beyond the config: resolved on the driver."""

    config: PackConfig
    vocab_size: int
    dtype: str  # "uint16" or "int32" (Megatron's codes 8 and 4), from `id_bound`
    eod_id: int
    eod_token: str
    eod_source: str
    bos_id: int | None
    id_bound: int = 0  # above every id the tokenizer can produce
    engine: str = "tokenizers"  # what encodes the text (`engine_choice`), used by workers
    engine_why: str = ""


def _bad(component: str, rule: str, value) -> PackValidationError:
    return PackValidationError(component=component, rule=rule, value=repr(value))


def _check_missing(raw: dict) -> None:
    missing = []
    source = raw.get("source")
    if not isinstance(source, dict) or not source:
        missing += ["source.files", "source.fields", "source.templates"]
    else:
        missing += [f"source.{k}" for k in ("files", "fields", "templates") if not source.get(k)]
    if not isinstance(raw.get("tokenizer"), dict) or not raw.get("tokenizer"):
        missing.append("tokenizer")
    output = raw.get("output")
    if not isinstance(output, dict) or not output.get("dir"):
        missing.append("output.dir")
    if missing:
        raise PipelineValidationError(missing=missing)


def _check_pack(block) -> tuple[str | None, int, int]:
    block = {} if block is None else block
    if not isinstance(block, dict):
        raise PipelineValidationError(missing=["pack (a mapping: eod, seed, shard_tokens)"])
    check_keys(block, schema.PACK, "pack.")
    eod = block.get("eod")
    if eod is not None and (type(eod) is not str or not eod):
        raise _bad("pack.eod", "eod_type", eod)
    seed = block.get("seed", 0)
    if type(seed) is not int or not 0 <= seed < 1 << 63:
        raise _bad("pack.seed", "seed", seed)
    shard_tokens = block.get("shard_tokens", DEFAULT_SHARD_TOKENS)
    if type(shard_tokens) is not int or shard_tokens <= 0:
        raise _bad("pack.shard_tokens", "shard_tokens", shard_tokens)
    return eod, seed, shard_tokens


def resolve_pack(raw: dict, records: bool = False) -> PackConfig:
    """Validate `raw` (blocks source, tokenizer, pack, output) in unit-build's order,
    after the declared schema's unknown keys (`schema.PACK_BUILD`)."""
    check_keys(raw, PACK_BUILD)
    check_run_options(raw, PACK_BUILD)  # where a config's run options came along
    _check_missing(raw)
    source = raw["source"]
    if source.get("type", "jsonl") != "jsonl":
        raise _bad("source.type", "source_type", source.get("type"))
    files, fields, templates, _ = check_source(source, records)
    kind, tokenizers, options = check_tokenizer(raw["tokenizer"])
    for name in ("pad_token", "pad_id", "literal_specials"):  # a pack has no literals
        if getattr(options, name) is not None:
            raise _bad(f"tokenizer.{name}", "tokenizer_option", name)
    if options.eos:
        raise _bad("tokenizer.eos", "tokenizer_option", "eos")
    if len(tokenizers) != 1:
        raise _bad("tokenizer.files", "tokenizers", tokenizers)
    output = raw["output"]
    if not isinstance(output["dir"], str):
        raise _bad("output.dir", "output_dir", output["dir"])
    if "samples_per_shard" in output:
        raise _bad("output.samples_per_shard", "samples_per_shard", output["samples_per_shard"])
    eod, seed, shard_tokens = _check_pack(raw.get("pack"))
    # also through a symlink, a hard link, a glob; a user's records have no files
    repeat = None if records else file_list.first_repeat(files)
    if repeat is not None:
        first, again = repeat
        value = (repr(again.given) if again.given == first.given
                 else f"{again.given!r} (the same file as {first.given!r})")
        raise PackValidationError(component="source.files", rule="duplicate_file", value=value)
    n = len(file_list.as_list(source["files"]))  # entries: a directory counts once
    check_arity(n, fields, templates, tokenizers, [[1]], [1], [output["dir"]], [1])
    pick = (lambda values, i: values[0] if len(values) == 1 else values[i])
    compiled = {}  # per entry: its files share the template
    for f in files:
        if f.entry not in compiled:
            compiled[f.entry] = compile_template(pick(templates, f.entry), pick(fields, f.entry),
                                                 f.given)
    if records:  # the records of a user's pipeline: no file, one template
        return PackConfig(
            files=(), fields=(tuple(fields[0]),), templates=(compiled[0],),
            tokenizer_kind=kind, tokenizer_given=tokenizers[0],
            tokenizer_path=storage.resolve(tokenizers[0]), config_given=options.config_given,
            config_path=options.config_path, bos=options.bos, eod=eod, seed=seed,
            shard_tokens=shard_tokens, output_given=output["dir"],
            output_path=storage.resolve(output["dir"]), tokenizer_options=options)
    return PackConfig(
        files=tuple(InputFile(i, f.given, f.path, f.entry_text if f.expanded else "", f.listed)
                    for i, f in enumerate(files)),
        fields=tuple(tuple(pick(fields, f.entry)) for f in files),
        templates=tuple(compiled[f.entry] for f in files),
        tokenizer_kind=kind, tokenizer_given=tokenizers[0],
        tokenizer_path=storage.resolve(tokenizers[0]), config_given=options.config_given,
        config_path=options.config_path, bos=options.bos, eod=eod, seed=seed,
        shard_tokens=shard_tokens, output_given=output["dir"],
        output_path=storage.resolve(output["dir"]), tokenizer_options=options)


def prepare_pack(config: PackConfig) -> PackPlan:
    """Load the tokenizer once: the EOD id (pack.eod, else the tokenizer's EOS), the BOS
    id when asked for, and the dtype every id fits."""
    tokenizer = cached_tokenizer(config.tokenizer_kind, config.tokenizer_path,
                                 config.tokenizer_options, config.tokenizer_given)
    engine, engine_why = choose_engine(
        tokenizer, config.tokenizer_options.engine,
        [f.path for f in config.files], config.tokenizer_given)
    tokenizer_config = ({} if config.config_path is None
                        else read_tokenizer_config(config.config_given, config.config_path))
    if config.eod is not None:
        eod_id, source = tokenizer.token_id(config.eod), "pack.eod"
        if eod_id is None:
            raise _bad("pack.eod", "eod_unknown", config.eod)
        eod_token = config.eod
    else:
        eod_id, eod_token, source = _eos(tokenizer, tokenizer_config, config)
    if eod_token not in tokenizer.special_tokens():
        raise _bad("pack.eod", "eod_not_special", eod_token)
    bos_id = None
    if config.bos:
        bos_id = (tokenizer.model_bos_id if tokenizer.kind == "sentencepiece"
                  else tokenizer.token_id(tokenizer_config.get("bos_token") or ""))
        if bos_id is None:
            raise PipelineValidationError(missing=[
                "a BOS token for tokenizer.bos (the SentencePiece model's bos_id, or a "
                "tokenizer config naming bos_token)"])
    return PackPlan(config=config, vocab_size=tokenizer.vocab_size,
                    id_bound=tokenizer.id_bound, eod_id=int(eod_id),
                    dtype=dtype_for_vocab(tokenizer.id_bound),  # every id it can produce
                    eod_token=eod_token, eod_source=source,
                    bos_id=None if bos_id is None else int(bos_id), engine=engine,
                    engine_why=engine_why)


def _eos(tokenizer, tokenizer_config: dict, config: PackConfig):
    if tokenizer.kind == "sentencepiece":
        if tokenizer.model_eos_id is None:
            raise _bad("pack.eod", "no_eos", "the SentencePiece model's eos_id is -1")
        eos = tokenizer.model_eos_id
        return eos, tokenizer.token_text(eos), "the SentencePiece model's eos_id"
    token = tokenizer_config.get("eos_token")
    if token is None:
        where = ("no eos_token in " + config.config_given if config.config_given
                 else "tokenizer.json alone does not say which token is EOS")
        raise _bad("pack.eod", "no_eos", where)
    found = tokenizer.token_id(token)
    if found is None:
        raise _bad("pack.eod", "eod_unknown", token)
    return found, token, f"eos_token of {config.config_given}"


def with_run(config: PackConfig, run_id: str) -> PackConfig:
    return dataclasses.replace(config, run_id=run_id)


def pack_raw(config: PackConfig) -> dict:
    """The config as a pack-build config file would say it (paths as given), recorded in
    the manifest (`build_config`) so `verify --deep` rebuilds it with `resolve_pack`."""
    tokenizer = {"type": config.tokenizer_kind, "files": [config.tokenizer_given],
                 **tiktoken_keys(config.tokenizer_options)}
    if config.tokenizer_options.engine != "auto":
        tokenizer["engine"] = config.tokenizer_options.engine
    if config.config_given is not None:
        tokenizer["config"] = config.config_given
    if config.bos:
        tokenizer["bos"] = True
    return {"source": {"files": [f.given for f in config.files],
                       "fields": [list(f) for f in config.fields],
                       "templates": [t.raw for t in config.templates]},
            "tokenizer": tokenizer,
            "pack": {"eod": config.eod, "seed": config.seed, "shard_tokens": config.shard_tokens},
            "output": {"dir": config.output_given}}
