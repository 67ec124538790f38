"""Validate a raw unit-build config and resolve it into output datasets.

Mirrors the seed's fail-fast order (missing blocks, source, tokenizer, units, output,
then list arities) so the same mistake raises the same error class as mintdim.
"""
from __future__ import annotations

from dataclasses import dataclass

from mintdim_beam.core.config.schema import UNIT_BUILD, check_keys, check_run_options, suggest
from mintdim_beam.core.config.sources import DialogueSource, dialogue_source, source_kind
from mintdim_beam.core.errors import (FieldMappingError, MintDimFileNotFoundError,
                                      OutputMappingError, PipelineValidationError,
                                      SamplesPerShardError, SourceFilesError,
                                      TemplateMappingError, TokenizerMappingError,
                                      TokenizerValidationError, UnitMappingError,
                                      UnitValidationError)
from mintdim_beam.core.files import storage
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.inputs.file_list import ListedFile
from mintdim_beam.core.tokenizer.special_tokens import (TokenizerOptions, check_options,
                                                       tiktoken_keys)
from mintdim_beam.core.tokenizer.tokenizers import KINDS


@dataclass(frozen=True)
class InputFile:
    index: int  # position among the files source.files gives (entries expanded)
    given: str  # the path as the user wrote it, or as its entry spells it (index rows)
    path: str  # resolved path used for I/O
    entry: str = ""  # the source.files entry that gave it (a directory, a pattern): manifest
    listed: tuple = ()  # a remote file's identity from that entry's listing (`file_list`)


@dataclass(frozen=True)
class Dataset:
    """One output directory and everything that builds it."""

    index: int
    files: tuple[InputFile, ...]
    fields: tuple[str, ...]
    template: str
    template_file_index: int
    tokenizer_kind: str
    tokenizer_given: str
    tokenizer_path: str
    sizes: tuple[int, ...]
    build_batch: int
    output_given: str
    output_path: str
    samples_per_shard: int
    run_id: str = ""  # set by the launcher: this run's scratch files are its own
    # the tokenizer block's options (tokenizer_config.json, pad, bos/eos): for all files
    tokenizer_options: TokenizerOptions = TokenizerOptions()
    dialogue: DialogueSource | None = None  # chat or preference source; None: templated fields

    @property
    def scratch_path(self) -> str:
        """Where this run keeps its parts and blocks until Finalize removes them."""
        return storage.run_scratch(self.output_path, self.run_id)


def _pick(values: list, index: int):
    return values[0] if len(values) == 1 else values[index]


def _check_missing(raw: dict) -> None:
    missing: list[str] = []
    source = raw.get("source")
    dialogue = isinstance(source, dict) and source_kind(source) != "jsonl"
    blocks = {
        "source": ("source", ["files", "fields", "templates"], ["source.files", "source.fields", "source.templates"]),
        "units": ("units", ["sizes", "build_batch"], ["units.sizes", "units.build_batch"]),
        "output": ("output", ["dir", "samples_per_shard"], ["output.dir", "output.samples_per_shard"]),
    }
    for block in ("source", "tokenizer", "units", "output"):
        value = raw.get(block)
        if block == "tokenizer":
            if not value or not isinstance(value, dict):
                missing.append("tokenizer")
            continue
        _, keys, labels = blocks[block]
        if block == "source" and dialogue:  # a dialogue source has no fields/templates
            keys, labels = keys[:1], labels[:1]
        if not value or not isinstance(value, dict):
            missing.extend(labels)
            continue
        missing.extend(label for key, label in zip(keys, labels) if not value.get(key))
    if missing:
        raise PipelineValidationError(missing=missing)


def _is_int(value) -> bool:
    return type(value) is int


def _check_files(files) -> list[str]:
    files = file_list.as_list(files)  # one path string: a list of one
    if not isinstance(files, (list, tuple)):
        raise PipelineValidationError(missing=["source.files (a list of JSONL paths)"])
    for i, path in enumerate(files):
        if not isinstance(path, str):
            raise PipelineValidationError(
                missing=[f"source.files[{i}] (a path string, got {type(path).__name__})"])
    return list(files)


def _existing(files: list[str]) -> list[ListedFile]:
    """The entries' files (directories and patterns expanded, `file_list`); the per-file
    lists (fields, templates, tokenizers, units, outputs) count entries, not files."""
    return file_list.expand(files, context="source")


def _refuse_repeats(files: list[ListedFile], output: str) -> None:
    """One file named twice for one output (a repeat, a symlink, a hard link, a pattern
    and a path) would feed every document twice."""
    repeat = file_list.first_repeat(files)
    if repeat is not None:
        first, again = repeat
        raise SourceFilesError(entry=again.given, rule="duplicate", other=first.given,
                               output=output)


def check_source(source: dict, records: bool = False):
    """(files, fields, templates, dialogue settings or None); files as `ListedFile`s,
    each with the position of its entry (the arity of the per-file lists). Shared with
    pack-build's config (`pack_config`), as are `check_tokenizer` and `check_arity`."""
    kind = source_kind(source)
    if kind != "jsonl":
        dialogue = dialogue_source(source, kind)
        return _listed(source, records), [[]], [""], dialogue
    files, fields, templates = _check_files(source["files"]), source["fields"], source["templates"]
    if isinstance(fields, str) or not all(
            isinstance(group, (list, tuple)) and all(isinstance(f, str) for f in group)
            for group in fields):
        raise PipelineValidationError(missing=["source.fields (a list of lists of field names)"])
    if isinstance(templates, str) or not all(isinstance(t, str) for t in templates):
        raise PipelineValidationError(missing=["source.templates (a list of template strings)"])
    return _listed(source, records), [list(g) for g in fields], list(templates), None


def _listed(source: dict, records: bool) -> list[ListedFile]:
    """The source's files; for the records of a user's pipeline (`records`), no file:
    one placeholder entry that the arity rules count and no dataset keeps."""
    files = _check_files(source["files"])
    if records:
        return [ListedFile(0, files[0], files[0], files[0])]
    return _existing(files)


def check_tokenizer(tokenizer: dict) -> tuple[str, list[str], TokenizerOptions]:
    """(kind, files, options) of the `tokenizer` block."""
    kind = tokenizer.get("type")
    if kind not in KINDS:
        if kind is None:  # the seed's form
            raise TokenizerValidationError(unsupported_format=True)
        raise TokenizerValidationError(unsupported_format=True, given_type=str(kind),
                                       known_types=list(KINDS), suggestion=suggest(kind, KINDS))
    files = file_list.as_list(tokenizer.get("files"))  # one path string: a list of one
    if not isinstance(files, (list, tuple)) or not files:
        raise TokenizerValidationError(
            component="files", problem="tokenizer.files must be a non-empty list of paths")
    for path in files:
        if not isinstance(path, str):
            raise TokenizerValidationError(
                component="files",
                problem=f"tokenizer file path must be str, got {type(path).__name__}")
    for path in files:
        if not storage.is_file(storage.resolve(path)):
            raise MintDimFileNotFoundError(context="tokenizer", missing_file=path)
    return kind, list(files), check_options(tokenizer)


def _check_units(units: dict) -> tuple[list[list[int]], list[int]]:
    sizes, batches = units["sizes"], units["build_batch"]
    if not isinstance(sizes, (list, tuple)):
        raise UnitValidationError(problem=f"sizes must be a list of lists of ints (one, or one "
                                          f"per input file), got {sizes!r}")
    if sizes and all(_is_int(value) for value in sizes):  # one list of sizes, not nested
        raise UnitValidationError(problem=f"sizes must be a list of lists of ints (one list, or "
                                          f"one per input file): got {list(sizes)!r}, did you "
                                          f"mean {[list(sizes)]!r}?")
    for i, group in enumerate(sizes):
        if not isinstance(group, (list, tuple)) or not group:
            raise UnitValidationError(problem=f"sizes[{i}] must be a non-empty list of ints, got {group!r}")
        for value in group:
            if not _is_int(value) or value <= 0:
                raise UnitValidationError(
                    problem=f"sizes[{i}] must hold positive ints, got {value!r}")
        if len(set(group)) != len(group):
            raise UnitValidationError(problem=f"sizes[{i}] has duplicates: {list(group)}")
        if list(group) != sorted(group):
            raise UnitValidationError(problem=f"sizes[{i}] must be sorted ascending, got {list(group)}")
    if not isinstance(batches, (list, tuple)):
        raise UnitValidationError(problem=f"build_batch must be a list of positive ints (one, "
                                          f"or one per input file), got {batches!r}")
    for i, value in enumerate(batches):
        if not _is_int(value) or value <= 0:
            raise UnitValidationError(
                problem=f"build_batch[{i}] must be a positive int, got {value!r}")
    return [list(g) for g in sizes], list(batches)


def _check_output(output: dict) -> tuple[list[str], list[int]]:
    paths = output["dir"]
    paths = [paths] if isinstance(paths, str) else paths
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) and p for p in paths):
        raise PipelineValidationError(missing=["output.dir (a path string or a list of them)"])
    counts = output["samples_per_shard"]
    if not isinstance(counts, (list, tuple)):  # the seed's contract: a list, also of one
        raise SamplesPerShardError(value=counts, not_list=True)
    for i, value in enumerate(counts):
        if not _is_int(value) or value <= 0:
            raise SamplesPerShardError(index=i, value=value)
    return list(paths), list(counts)


def check_arity(n: int, fields, templates, tokenizers, sizes, batches, outputs, counts) -> None:
    """Every per-file list has one entry or one per input file."""
    def ok(k: int) -> bool:
        return k == 1 or k == n

    if not ok(len(fields)):
        raise FieldMappingError(input_files=n, field_configs=len(fields))
    if not ok(len(templates)):
        raise TemplateMappingError(input_files=n, templates=len(templates))
    if not ok(len(tokenizers)):
        raise TokenizerMappingError(input_files=n, tokenizers=len(tokenizers))
    if not ok(len(sizes)):
        raise UnitMappingError(input_files=n, unit_configs=len(sizes))
    if not ok(len(batches)):
        raise UnitMappingError(input_files=n, unit_configs=len(batches))
    if not ok(len(outputs)):
        raise OutputMappingError(input_files=n, output_dirs=len(outputs))
    if not ok(len(counts)):
        raise SamplesPerShardError(input_files=n, entries=len(counts))


_SETTINGS = ("fields", "template", "tokenizer", "sizes", "build_batch", "samples_per_shard")


def resolve_datasets(raw: dict, records: bool = False) -> list[Dataset]:
    """Validate `raw` and return the output datasets in input-file order. Unknown keys
    first (the declared schema, `schema.UNIT_BUILD`: a mistake the seed's API cannot
    make), then the seed's order: missing keys, source, tokenizer, units, output."""
    check_keys(raw, UNIT_BUILD)
    check_run_options(raw, UNIT_BUILD)  # where a config's run options came along
    _check_missing(raw)
    files, fields, templates, dialogue = check_source(raw["source"], records)
    kind, tokenizers, tokenizer_options = check_tokenizer(raw["tokenizer"])
    sizes, batches = _check_units(raw["units"])
    outputs, counts = _check_output(raw["output"])
    n = len(_check_files(raw["source"]["files"]))  # entries: a directory counts once
    check_arity(n, fields, templates, tokenizers, sizes, batches, outputs, counts)

    per_file = []
    for pos, listed in enumerate(files):
        i = listed.entry
        per_file.append({
            "file": InputFile(pos, listed.given, listed.path,
                              listed.entry_text if listed.expanded else "", listed.listed),
            "listed": listed,
            "fields": tuple(_pick(fields, i)),
            "template": _pick(templates, i),
            "template_file_index": 0 if len(templates) == 1 else i,
            "tokenizer": _pick(tokenizers, i),
            "sizes": tuple(_pick(sizes, i)),
            "build_batch": _pick(batches, i),
            "output": _pick(outputs, i),
            "samples_per_shard": _pick(counts, i),
        })

    # Files sharing an output directory form one dataset, in input order; mintdim would
    # build the first and fail on the second, we reject real conflicts up front.
    groups: dict[str, list[dict]] = {}
    for entry in per_file:
        groups.setdefault(storage.resolve(entry["output"]), []).append(entry)
    datasets = []
    for out_path, members in groups.items():
        first = members[0]
        if not records:  # a user's records have no files to repeat
            _refuse_repeats([m["listed"] for m in members], first["output"])
        differing = [name for name in _SETTINGS
                     if any(m[name] != first[name] for m in members[1:])]
        if differing:
            raise OutputMappingError(conflict_dir=first["output"],
                                     files=[m["file"].given for m in members],
                                     differing=differing)
        datasets.append(Dataset(
            index=len(datasets),
            files=() if records else tuple(m["file"] for m in members),
            fields=first["fields"],
            template=first["template"],
            template_file_index=first["template_file_index"],
            tokenizer_kind=kind,
            tokenizer_given=first["tokenizer"],
            tokenizer_path=storage.resolve(first["tokenizer"]),
            sizes=first["sizes"],
            build_batch=first["build_batch"],
            output_given=first["output"],
            output_path=out_path,
            samples_per_shard=first["samples_per_shard"],
            tokenizer_options=tokenizer_options,
            dialogue=dialogue,
        ))
    return datasets


def dataset_config(dataset: Dataset) -> dict:
    """One dataset as a config of its own (paths as given), recorded in the manifest
    (`build_config`) so `verify --deep` can rebuild exactly what rendered and tokenized
    it: `resolve_datasets` of it gives this dataset back."""
    files = [f.given for f in dataset.files]
    dialogue = dataset.dialogue
    if dialogue is None:
        source = {"files": files, "fields": [list(dataset.fields)], "templates": [dataset.template]}
    else:
        source = {"type": dialogue.kind, "files": files, "chat_template": dialogue.chat_template,
                  "template_vars": dialogue.variables}
        if dialogue.kind == "chat":
            source.update(format=dialogue.format, max_turns=dialogue.max_turns,
                          on_extra_turns=dialogue.on_extra_turns,
                          max_messages=dialogue.max_messages)
    options = dataset.tokenizer_options
    tokenizer = {"type": dataset.tokenizer_kind, "files": [dataset.tokenizer_given]}
    for key, value in (("config", options.config_given), ("pad_token", options.pad_token),
                       ("pad_id", options.pad_id), ("bos", options.bos or None),
                       ("eos", options.eos or None),
                       ("literal_specials", options.literal_specials),
                       ("engine", None if options.engine == "auto" else options.engine)):
        if value is not None:
            tokenizer[key] = value
    tokenizer.update(tiktoken_keys(options))
    return {"source": source, "tokenizer": tokenizer,
            "units": {"sizes": [list(dataset.sizes)], "build_batch": [dataset.build_batch]},
            "output": {"dir": dataset.output_given,
                       "samples_per_shard": [dataset.samples_per_shard]}}
