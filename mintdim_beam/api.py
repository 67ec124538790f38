"""The fluent builder, same shape as MintDim's: nothing runs before `run()`."""
from __future__ import annotations

from typing import Sequence


class _Block:
    def __init__(self, job: "UnitBuildJob"):
        self._job = job


class _Source(_Block):
    def jsonl(self, *, files: Sequence[str], fields: Sequence[Sequence[str]],
              templates: Sequence[str]) -> "UnitBuildJob":
        self._job._raw["source"] = {"files": _listed(files), "fields": _listed(fields),
                                    "templates": _listed(templates)}
        return self._job

    def chat(self, *, files: Sequence[str], format: str = "messages", chat_template: str,
             template_vars: dict | None = None, max_turns: int = 1,
             on_extra_turns: str = "split", max_messages: int = 1024) -> "UnitBuildJob":
        """Dialogues (OpenAI `messages` or ShareGPT `conversations`), one trained segment
        `assistant_<i>` per assistant turn, context between (see README, Chat data)."""
        self._job._raw["source"] = {
            "type": "chat", "files": _listed(files), "format": format,
            "chat_template": chat_template, "template_vars": dict(template_vars or {}),
            "max_turns": max_turns, "on_extra_turns": on_extra_turns,
            "max_messages": max_messages}
        return self._job

    def preference(self, *, files: Sequence[str], chat_template: str | None = None,
                   template_vars: dict | None = None) -> "UnitBuildJob":
        """Preference pairs `{prompt, chosen, rejected}`: one record with segments
        `prompt`, `chosen`, `rejected` (TRL's shapes; strings or message lists)."""
        self._job._raw["source"] = {
            "type": "preference", "files": _listed(files), "chat_template": chat_template,
            "template_vars": dict(template_vars or {})}
        return self._job


class _Tokenizer(_Block):
    """Options (all keyword-only, for every file of the block; validated at run()):
    config: a tokenizer_config.json (pad / bos / eos tokens, chat_template);
    pad_token / pad_id: the pad to use (one of them); bos / eos: put the tokenizer's BOS /
    EOS id around every sample, as segments named `bos` / `eos` (a preference pair's EOS
    ends each completion); literal_specials: special-token text in a JSONL template's
    literals as "ids" or "text" (default: as the tokenizer does, SentencePiece text)."""

    def sentencepiece(self, *, files: Sequence[str], config: str | None = None,
                      pad_token: str | None = None, pad_id: int | None = None,
                      bos: bool | None = None, eos: bool | None = None,
                      literal_specials: str | None = None) -> "UnitBuildJob":
        return self._set("sentencepiece", files, config=config, pad_token=pad_token,
                         pad_id=pad_id, bos=bos, eos=eos, literal_specials=literal_specials)

    def hf_json(self, *, files: Sequence[str], config: str | None = None,
                pad_token: str | None = None, pad_id: int | None = None,
                bos: bool | None = None, eos: bool | None = None,
                literal_specials: str | None = None) -> "UnitBuildJob":
        return self._set("hf_json", files, config=config, pad_token=pad_token, pad_id=pad_id,
                         bos=bos, eos=eos, literal_specials=literal_specials)

    def _set(self, kind: str, files, **options) -> "UnitBuildJob":
        block = {"type": kind, "files": _listed(files)}
        block.update((k, v) for k, v in options.items() if v is not None)
        self._job._raw["tokenizer"] = block
        return self._job


class _Output(_Block):
    def dir(self, path: str | Sequence[str], *, samples_per_shard: Sequence[int]) -> "UnitBuildJob":
        self._job._raw["output"] = {"dir": path if isinstance(path, str) else _listed(path),
                                    "samples_per_shard": _listed(samples_per_shard)}
        return self._job


def _listed(value):
    """Lists stay lists; strings and scalars are left for validation to name."""
    if isinstance(value, (list, tuple)):
        return [list(v) if isinstance(v, tuple) else v for v in value]
    return value


class UnitBuildJob:
    def __init__(self):
        self._raw: dict = {}
        self.source = _Source(self)
        self.tokenizer = _Tokenizer(self)
        self.output = _Output(self)

    def units(self, *, sizes: Sequence[Sequence[int]], build_batch: Sequence[int]) -> "UnitBuildJob":
        self._raw["units"] = {"sizes": _listed(sizes), "build_batch": _listed(build_batch)}
        return self

    def config(self) -> dict:
        """The raw config this job describes (the same shape as a CONFIG file)."""
        return {k: v for k, v in self._raw.items()}

    def run(self, *, on_template_unk: str = "prompt", on_overflow: str = "prompt",
            on_lossy: str = "continue", on_bad_row: str = "abort",
            max_rejected: float | None = None, pipeline_options=None) -> dict:
        """`on_lossy`: text the tokenizer cannot carry (a template literal, a sample)
        is a warning and indexed ("continue"), or an error ("abort"). `on_bad_row`: a
        row that cannot become a sample stops the build ("abort") or is left out and
        listed in rejected_index.jsonl ("skip"), up to `max_rejected` (default 0.01) of
        the rows."""
        from mintdim_beam.unit_build.launch import run_build

        return run_build(self._raw, on_template_unk=on_template_unk, on_overflow=on_overflow,
                         pipeline_options=pipeline_options, on_lossy=on_lossy,
                         on_bad_row=on_bad_row, max_rejected=max_rejected)


class _PackSource(_Block):
    def jsonl(self, *, files: Sequence[str], fields: Sequence[Sequence[str]],
              templates: Sequence[str]) -> "PackBuildJob":
        self._job._raw["source"] = {"files": _listed(files), "fields": _listed(fields),
                                    "templates": _listed(templates)}
        return self._job


class _PackOutput(_Block):
    def dir(self, path: str) -> "PackBuildJob":
        self._job._raw["output"] = {"dir": path}
        return self._job


class PackBuildJob:
    """pack-build: every input file into one globally shuffled token stream in Megatron's
    indexed-dataset layout (see README, Pretraining corpora); nothing runs before `run()`."""

    def __init__(self):
        self._raw: dict = {}
        self.source = _PackSource(self)
        self.tokenizer = _Tokenizer(self)
        self.output = _PackOutput(self)

    def pack(self, *, eod: str | None = None, seed: int = 0,
             shard_tokens: int | None = None) -> "PackBuildJob":
        """`eod`: the end-of-document token's text (default: the tokenizer's EOS);
        `seed`: the document order; `shard_tokens`: about how many tokens per shard."""
        block = {"eod": eod, "seed": seed}
        if shard_tokens is not None:
            block["shard_tokens"] = shard_tokens
        self._raw["pack"] = block
        return self

    def config(self) -> dict:
        return {k: v for k, v in self._raw.items()}

    def run(self, *, on_bad_row: str = "abort", max_rejected: float | None = None,
            pipeline_options=None) -> dict:
        """`on_bad_row` and `max_rejected` as for unit-build's `run()`."""
        from mintdim_beam.pack_build.launch import run_pack

        return run_pack(self._raw, pipeline_options=pipeline_options, on_bad_row=on_bad_row,
                        max_rejected=max_rejected)


class _TrainSource(_Block):
    def jsonl(self, *, files: Sequence[str], fields: Sequence[Sequence[str]],
              templates: Sequence[str]) -> "TrainTokenizerJob":
        self._job._raw["source"] = {"type": "jsonl", "files": _listed(files),
                                    "fields": _listed(fields), "templates": _listed(templates)}
        return self._job

    def text(self, *, files: Sequence[str], field: str = "text") -> "TrainTokenizerJob":
        self._job._raw["source"] = {"type": "text", "files": _listed(files), "field": field}
        return self._job

    def chat(self, *, files: Sequence[str], format: str = "messages",
             join: str = "\n") -> "TrainTokenizerJob":
        """A dialogue's message contents joined by `join` make a row's text."""
        self._job._raw["source"] = {"type": "chat", "files": _listed(files), "format": format,
                                    "join": join}
        return self._job


class _Trainer(_Block):
    """The trainers' own key names (`tokenizers`' BpeTrainer, SentencePieceTrainer)."""

    def bpe(self, *, vocab_size: int, **settings) -> "TrainTokenizerJob":
        return self._set("bpe", vocab_size, settings)

    def sentencepiece_bpe(self, *, vocab_size: int, **settings) -> "TrainTokenizerJob":
        return self._set("sentencepiece_bpe", vocab_size, settings)

    def sentencepiece_unigram(self, *, vocab_size: int, **settings) -> "TrainTokenizerJob":
        return self._set("sentencepiece_unigram", vocab_size, settings)

    def _set(self, kind: str, vocab_size: int, settings: dict) -> "TrainTokenizerJob":
        self._job._raw["trainer"] = {"type": kind, "vocab_size": vocab_size,
                                     **{k: _listed(v) for k, v in settings.items()}}
        return self._job


class TrainTokenizerJob:
    """train-tokenizer: count a corpus's words on a Beam runner, train a tokenizer from the
    summed counts (see README, Training a tokenizer); nothing runs before `run()`."""

    def __init__(self):
        self._raw: dict = {}
        self.source = _TrainSource(self)
        self.trainer = _Trainer(self)
        self.output = _PackOutput(self)

    def tokenizer_config(self, **keys) -> "TrainTokenizerJob":
        """bos_token, eos_token, pad_token, unk_token, chat_template, model_max_length."""
        self._raw["tokenizer_config"] = dict(keys)
        return self

    def rows(self, *, holdout: float = 0.0, sample: float = 1.0,
             seed: int = 0) -> "TrainTokenizerJob":
        """`holdout`: the fraction of rows kept out of training for `report`; `sample`:
        the fraction of the rest trained on; both by a seeded hash of each row's text."""
        self._raw.update(holdout=holdout, sample=sample, seed=seed)
        return self

    def config(self) -> dict:
        return {k: v for k, v in self._raw.items()}

    def run(self, *, on_bad_row: str = "abort", max_rejected: float | None = None,
            pipeline_options=None) -> dict:
        from mintdim_beam.train_tokenizer.launch import run_train

        return run_train(self._raw, pipeline_options=pipeline_options, on_bad_row=on_bad_row,
                         max_rejected=max_rejected)


def pipeline(name: str):
    """`"unit-build"` (a `UnitBuildJob`), `"pack-build"` (a `PackBuildJob`),
    `"train-tokenizer"` (a `TrainTokenizerJob`) or `"unit-read"` (mintdim's reader,
    `read.unit_read.UnitReadPipeline`)."""
    if name == "pack-build":
        return PackBuildJob()
    if name == "train-tokenizer":
        return TrainTokenizerJob()
    if name == "unit-read":
        from mintdim_beam.read.unit_read import UnitReadPipeline

        return UnitReadPipeline()
    if name != "unit-build":
        from mintdim_beam.core.errors import PipelineValidationError

        raise PipelineValidationError(
            missing=[f"pipeline name 'unit-build', 'pack-build', 'train-tokenizer' or "
                     f"'unit-read' (got {name!r})"])
    return UnitBuildJob()
