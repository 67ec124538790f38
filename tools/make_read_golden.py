#!/usr/bin/env python3
"""(Re)generate the reader golden fixtures under ``tests/golden_read/`` with mintdim 0.2.1.

Why: our reader claims compatibility with the batches that mintdim 0.2.1's
``pipeline("unit-read")`` returns (queue of shards with per-entry cursors,
wrap-around inside a shard, ``accum_index``/``should_step``, next-token targets
and ``target_mask``), and with the errors it raises for bad configurations.
These fixtures record what the reference actually does, so tests can compare
against them without mintdim installed.

How: mintdim 0.2.1 needs Python >= 3.12 (``/tmp/ref312`` on the development
machine is such a venv: ``python3.12 -m venv V && V/bin/pip install mintdim==0.2.1``).
From the repository root:

    /tmp/ref312/bin/python tools/make_read_golden.py

The inputs are the complete mintdim builds already stored under
``tests/golden/<case>/expected/out/`` plus one tiny build this script writes
itself (``tests/golden_read/_builds/pad_is_eos/``, no tokenizer needed).
mintdim is run with the current directory = ``tests/golden_read`` and relative
paths, so the span paths recorded are exactly the strings mintdim returns.

Everything is deterministic: fixed inputs, a seeded numpy generator for the
hand-made build, and ``batches.npz`` written through ``zipfile`` with a fixed
date, so two runs produce byte-identical trees. See ``tests/golden_read/README.md``
(written by this script) for the layout.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "golden_read"
MINTDIM_VERSION = "0.2.1"

# Paths are relative to tests/golden_read (mintdim runs with that cwd).
QA = "../golden/qa_sp_bpe_multi/expected/out"
CHAT = "../golden/chat_multiturn_sp_unigram/expected/out"
REPEATED = "../golden/repeated_fields/expected/out"
MULTI = "../golden/multishard_empty_units/expected/out"
PAD_EOS = "_builds/pad_is_eos"
NO_META = "_builds/no_length_field"

QA_TEMPLATE = ["token_template", "question", "token_template", "context",
               "token_template", "answer"]
CHAT_TEMPLATE = ["token_template", "system", "token_template", "user_1", "token_template",
                 "assistant_1", "token_template", "user_2", "token_template", "assistant_2"]
REPEATED_TEMPLATE = ["word", "token_template", "translation", "token_template", "word",
                     "translation"]
PAD_EOS_TEMPLATE = ["prompt", "token_template", "answer"]

ZIP_DATE = (1980, 1, 1, 0, 0, 0)


# ---------------------------------------------------------------------------
# Scenarios (successful reads)
# ---------------------------------------------------------------------------

def _entry(path: str, unit: int, batch: int, accum: int) -> dict:
    return {"path": path, "unit": unit, "batch": batch, "accum": accum}


def _target(fields: list, index: list, ignore_id: int = -100) -> dict:
    return {"fields": fields, "index": index, "ignore_id": ignore_id}


def scenarios() -> dict[str, dict]:
    return {
        "single_shard_wrap": {
            "description": "One .bin file (50 rows), batch 8, accum 2: reads 6 and 12 (0-based) "
                           "wrap past the shard end into its start (two spans).",
            "entries": [_entry(f"{QA}/unit_128/shard_000000.bin", 128, 8, 2)],
            "sequence_template": QA_TEMPLATE,
            "target": _target(["answer"], [5]),
            "reads": 15,
        },
        "unit_dir_four_shards": {
            "description": "A unit directory (4 shards of 50,50,50,23 rows) expands to "
                           "one queue entry per shard; batch 16, accum 3. Each shard is "
                           "read until a batch reaches its end (wrapping inside it), then "
                           "the queue moves on; shard 0 resumes at its kept cursor.",
            "entries": [_entry(f"{QA}/unit_128", 128, 16, 3)],
            "sequence_template": QA_TEMPLATE,
            "target": _target(["answer"], [5]),
            "reads": 20,
        },
        "two_entries_small_shard": {
            "description": "Two queue entries: unit_64 (a single row) with batch 4 "
                           "(one batch repeats that row four times as four spans), accum "
                           "3, and unit_256 (49 rows) batch 3 accum 2. accum_index is "
                           "carried across entries, taken modulo the current entry's "
                           "accum; read 17 (0-based) wraps unit_256, read 18 is unit_64 again.",
            "entries": [_entry(f"{QA}/unit_64", 64, 4, 3),
                        _entry(f"{QA}/unit_256", 256, 3, 2)],
            "sequence_template": QA_TEMPLATE,
            "target": _target(["answer"], [5]),
            "reads": 20,
        },
        "queue_cycle_cursor_kept": {
            "description": "Two single-shard entries of one build (16 and 9 rows) with "
                           "different batch/accum; the queue alternates after each "
                           "shard-end batch and every entry keeps its own cursor.",
            "entries": [_entry(f"{REPEATED}/unit_16/shard_000002.bin", 16, 5, 2),
                        _entry(f"{REPEATED}/unit_32/shard_000000.bin", 32, 4, 3)],
            "sequence_template": REPEATED_TEMPLATE,
            "target": _target(["translation", "word"], [5, 4]),
            "reads": 12,
        },
        "chat_two_targets": {
            "description": "Chat build, unit_256 directory (40,40,40,27 rows), targets "
                           "assistant_1@5 and assistant_2@9, batch 5, accum 4.",
            "entries": [_entry(f"{CHAT}/unit_256", 256, 5, 4)],
            "sequence_template": CHAT_TEMPLATE,
            "target": _target(["assistant_1", "assistant_2"], [5, 9]),
            "reads": 15,
        },
        "repeated_fields_second_occurrence": {
            "description": "Template with duplicate names; only index 5 ('translation', "
                           "its second occurrence) is learned, ignore_id -1. unit_16 "
                           "directory (20,20,16 rows), batch 6, accum 2.",
            "entries": [_entry(f"{REPEATED}/unit_16", 16, 6, 2)],
            "sequence_template": REPEATED_TEMPLATE,
            "target": _target(["translation"], [5], -1),
            "reads": 12,
        },
        "multishard_tiny_shards": {
            "description": "One unit directory with 16 shards of 3 rows; batch 2, accum "
                           "1: two reads per shard (the second wraps), then the next "
                           "shard; after 32 reads shard 0 resumes at cursor 1.",
            "entries": [_entry(f"{MULTI}/unit_16", 16, 2, 1)],
            "sequence_template": ["text"],
            "target": _target(["text"], [0]),
            "reads": 34,
        },
        "unit_1_single_token": {
            "description": "unit 1 (one row): the only target position is the last one, "
                           "set to ignore_id, so target_mask is all False.",
            "entries": [_entry(f"{MULTI}/unit_1", 1, 3, 2)],
            "sequence_template": ["text"],
            "target": _target(["text"], [0]),
            "reads": 3,
        },
        "pad_is_eos": {
            "description": "Hand-made build where pad_token_id 2 is also the EOS token "
                           "ending every answer (and occurring inside some answers). "
                           "mintdim drops every target equal to the pad id from "
                           "target_mask, including these real EOS tokens (our reader "
                           "deliberately keeps them).",
            "entries": [_entry(f"{PAD_EOS}/unit_32/shard_000000.bin", 32, 4, 1)],
            "sequence_template": PAD_EOS_TEMPLATE,
            "target": _target(["answer"], [2]),
            "reads": 5,
        },
    }


# ---------------------------------------------------------------------------
# Hand-made builds
# ---------------------------------------------------------------------------

def pad_is_eos_length_field() -> dict:
    """Same keys and structure as a mintdim length_field.json."""
    return {
        "magic": 65535,
        "sequence_template": PAD_EOS_TEMPLATE,
        "length_fields": [
            {"index": 0, "name": "prompt", "kind": "field", "content": None,
             "field": "prompt"},
            {"index": 1, "name": "token_template", "kind": "literal",
             "content": "\nAnswer: "},
            {"index": 2, "name": "answer", "kind": "field", "content": None,
             "field": "answer"},
        ],
        "token_dtype": "uint16",
        "pad_token_id": 2,
    }


PAD_EOS_UNIT = 32
PAD_EOS_ID = 2
LITERAL_TOKENS = [11, 12, 13]
# (prompt length, answer length incl. final EOS, inner EOS positions in the answer)
PAD_EOS_RECORDS = [
    (5, 6, []), (3, 8, [3]), (8, 1, []), (0, 4, []), (10, 10, [2, 6]),
    (4, 5, []), (12, 17, [8]), (6, 3, [0]), (2, 9, [4, 5]), (7, 7, []),
    (9, 20, [10]), (1, 2, []),
]


def pad_is_eos_record(rng: np.random.Generator, prompt_len: int, answer_len: int,
                      inner_eos: list[int]) -> np.ndarray:
    prompt = rng.integers(100, 1000, size=prompt_len)
    answer = rng.integers(100, 1000, size=answer_len)
    answer[-1] = PAD_EOS_ID
    answer[inner_eos] = PAD_EOS_ID
    tokens = np.concatenate([prompt, LITERAL_TOKENS, answer])
    assert tokens.size <= PAD_EOS_UNIT
    payload = np.full(PAD_EOS_UNIT, PAD_EOS_ID, dtype=np.int64)
    payload[: tokens.size] = tokens
    header = [65535, prompt_len, len(LITERAL_TOKENS), answer_len]
    return np.concatenate([header, payload]).astype(np.uint16)


def write_pad_is_eos_build(base: Path) -> None:
    rng = np.random.default_rng(20240601)
    rows = [pad_is_eos_record(rng, *spec) for spec in PAD_EOS_RECORDS]
    (base / f"unit_{PAD_EOS_UNIT}").mkdir(parents=True, exist_ok=True)
    (base / "length_field.json").write_text(
        json.dumps(pad_is_eos_length_field(), indent=2) + "\n", encoding="utf-8")
    np.stack(rows).astype("<u2").tofile(base / f"unit_{PAD_EOS_UNIT}" / "shard_000000.bin")


def write_no_length_field_build(base: Path) -> None:
    """A valid-looking one-segment shard whose build has no length_field.json."""
    (base / "unit_4").mkdir(parents=True, exist_ok=True)
    np.array([65535, 2, 5, 6, 0, 0], dtype="<u2").tofile(base / "unit_4" / "shard_000000.bin")


# ---------------------------------------------------------------------------
# Running mintdim
# ---------------------------------------------------------------------------

def build_pipeline(entries: list, template: list, target: dict):
    from mintdim import pipeline

    return (pipeline("unit-read").queue(entries=entries)
            .layout(sequence_template=template).target(**target))


def batch_record(batch) -> dict:
    arrays = {"input_ids": batch.input_ids, "target_ids": batch.target_ids,
              "target_mask": batch.target_mask}
    return {
        "source_spans": [[s.path, s.start, s.count] for s in batch.source_spans],
        "accum_index": batch.accum_index,
        "should_step": batch.should_step,
        "shape": list(batch.input_ids.shape),
        "dtypes": {name: str(arr.dtype) for name, arr in arrays.items()},
        "mask_true": int(batch.target_mask.sum()),
    }


def pad_id_of(entries: list) -> int:
    """pad_token_id of the first entry's build (length_field.json beside unit_<N>/)."""
    path = Path(entries[0]["path"])
    unit_dir = path.parent if path.is_file() else path
    meta = json.loads((unit_dir.parent / "length_field.json").read_text(encoding="utf-8"))
    return meta["pad_token_id"]


def run_scenario(name: str, spec: dict) -> tuple[dict, dict]:
    pipe = build_pipeline(spec["entries"], spec["sequence_template"], spec["target"])
    records, arrays = [], {}
    for i in range(spec["reads"]):
        batch = pipe.read()
        records.append(batch_record(batch))
        arrays[f"input_ids_{i}"] = batch.input_ids
        arrays[f"target_ids_{i}"] = batch.target_ids
        arrays[f"target_mask_{i}"] = batch.target_mask
    scenario = {
        "description": spec["description"],
        "mintdim_version": MINTDIM_VERSION,
        "entries": spec["entries"],
        "sequence_template": spec["sequence_template"],
        "target": spec["target"],
        "pad_id": pad_id_of(spec["entries"]),
        "reads": spec["reads"],
        "batches": records,
    }
    return scenario, arrays


# ---------------------------------------------------------------------------
# Output files (byte-stable)
# ---------------------------------------------------------------------------

def write_json(path: Path, payload) -> None:
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def write_npz(path: Path, arrays: dict) -> None:
    """Like np.savez_compressed (np.load reads it), but with a fixed zip date so the
    bytes do not depend on when the script ran."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


# ---------------------------------------------------------------------------
# Error cases
# ---------------------------------------------------------------------------

BASE_ENTRY = _entry(f"{QA}/unit_128/shard_000000.bin", 128, 2, 1)
BASE_QUEUE = {"entries": [BASE_ENTRY]}
BASE_LAYOUT = {"sequence_template": QA_TEMPLATE}
BASE_TARGET = _target(["answer"], [5])


def _case(name: str, *, queue=BASE_QUEUE, layout=BASE_LAYOUT, target=BASE_TARGET,
          call: str = "builder", read_twice: bool = False) -> dict:
    return {"name": name, "call": call, "queue": queue, "layout": layout,
            "target": target, "read_twice": read_twice}


def _with_entry(**changes) -> dict:
    return {"entries": [{**BASE_ENTRY, **changes}]}


def _with_target(**changes) -> dict:
    return {**BASE_TARGET, **changes}


def queue_cases() -> list[dict]:
    entry_missing = {"path": BASE_ENTRY["path"], "unit": 128}
    cases = [
        _case("queue_missing", queue=None),
        _case("queue_not_mapping_raw", queue=[BASE_ENTRY], call="raw"),
        _case("entries_missing_raw", queue={}, call="raw"),
        _case("entries_empty", queue={"entries": []}),
        _case("entries_not_list_raw", queue={"entries": BASE_ENTRY}, call="raw"),
        _case("entries_mapping_builder", queue={"entries": BASE_ENTRY}),
        _case("entries_string_builder", queue={"entries": "abc"}),
        _case("entry_not_mapping_raw", queue={"entries": [5]}, call="raw"),
        _case("entry_not_mapping_builder", queue={"entries": [5]}),
        _case("entry_missing_keys", queue={"entries": [entry_missing]}),
        _case("entry_unknown_key", queue=_with_entry(shuffle=True)),
        _case("second_entry_invalid",
              queue={"entries": [BASE_ENTRY, {**BASE_ENTRY, "batch": 0}]}),
        _case("path_not_str", queue=_with_entry(path=5)),
    ]
    for key in ("unit", "batch", "accum"):
        for label, value in (("zero", 0), ("negative", -1), ("true", True), ("float", 2.0)):
            cases.append(_case(f"{key}_{label}", queue=_with_entry(**{key: value})))
    cases += [
        _case("path_nonexistent", queue=_with_entry(path=f"{QA}/unit_128/missing.bin")),
        _case("path_not_bin", queue=_with_entry(path=f"{QA}/length_field.json")),
        _case("dir_without_bin_build_root", queue=_with_entry(path=QA)),
        _case("dir_without_bin_empty_unit", queue=_with_entry(path=f"{QA}/unit_512")),
    ]
    return cases


def layout_cases() -> list[dict]:
    with_number = QA_TEMPLATE[:-1] + [5]
    with_empty = QA_TEMPLATE[:-1] + [""]
    return [
        _case("layout_missing", layout=None),
        _case("layout_not_mapping_raw", layout=QA_TEMPLATE, call="raw"),
        _case("template_string", layout={"sequence_template": "token_template"}),
        _case("template_empty", layout={"sequence_template": []}),
        _case("template_contains_empty_string", layout={"sequence_template": with_empty},
              target=_target(["question"], [1])),
        _case("template_contains_number", layout={"sequence_template": with_number},
              target=_target(["question"], [1])),
    ]


def target_cases() -> list[dict]:
    no_index = {"fields": ["answer"], "ignore_id": -100}
    return [
        _case("target_missing", target=None),
        _case("target_without_index_builder", target=no_index),
        _case("target_without_index_raw", target=no_index, call="raw"),
        _case("fields_string", target=_with_target(fields="answer")),
        _case("index_string", target=_with_target(index="5")),
        _case("field_not_in_template", target=_target(["label"], [5])),
        _case("index_out_of_range", target=_target(["answer"], [6])),
        _case("index_negative", target=_target(["answer"], [-1])),
        _case("index_float", target=_target(["answer"], [5.0])),
        _case("index_bool", target=_target(["question"], [True])),
        _case("fields_index_length_differ", target=_target(["answer"], [5, 3])),
        _case("fields_empty", target=_target([], [5])),
        _case("field_index_pair_mismatch", target=_target(["answer"], [3])),
        _case("ignore_id_string", target=_with_target(ignore_id="x")),
        _case("ignore_id_float", target=_with_target(ignore_id=-100.0)),
        _case("ignore_id_null", target=_with_target(ignore_id=None)),
    ]


def read_time_cases() -> list[dict]:
    chat_shard = f"{CHAT}/unit_256/shard_000000.bin"
    return [
        _case("layout_mismatch_metadata", layout={"sequence_template": ["text"]},
              target=_target(["text"], [0])),
        _case("layout_mismatch_second_entry",
              queue={"entries": [_entry(f"{QA}/unit_64", 64, 1, 1),
                                 _entry(chat_shard, 256, 2, 1)]},
              read_twice=True),
        _case("unit_not_dividing_shard", queue=_with_entry(unit=64)),
        _case("unit_dividing_shard_but_wrong", queue=_with_entry(unit=143)),
        _case("missing_length_field",
              queue={"entries": [_entry(f"{NO_META}/unit_4/shard_000000.bin", 4, 1, 1)]},
              layout={"sequence_template": ["text"]}, target=_target(["text"], [0])),
    ]


def error_cases() -> list[dict]:
    return queue_cases() + layout_cases() + target_cases() + read_time_cases()


def apply_builder(case: dict):
    from mintdim import pipeline

    pipe = pipeline("unit-read")
    if case["queue"] is not None:
        pipe = pipe.queue(**case["queue"])
    if case["layout"] is not None:
        pipe = pipe.layout(**case["layout"])
    if case["target"] is not None:
        pipe = pipe.target(**case["target"])
    return pipe


def first_read_must_succeed(pipe) -> None:
    try:
        pipe.read()
    except Exception as exc:
        raise RuntimeError("read_twice case: the first read must succeed") from exc


def run_error_case(case: dict) -> dict:
    """Run one invalid configuration; record the exception class and component."""
    from mintdim.apis.unit_read.runtime import run_unit_read_pipeline

    try:
        if case["call"] == "raw":
            run_unit_read_pipeline({key: case[key] for key in ("queue", "layout", "target")})
        else:
            pipe = apply_builder(case)
            if case["read_twice"]:
                first_read_must_succeed(pipe)
            pipe.read()
    except Exception as exc:  # noqa: BLE001 - we record whatever mintdim raises
        return {**case, "error": type(exc).__name__,
                "component": getattr(exc, "component", None),
                "problem": getattr(exc, "problem", None)}
    raise RuntimeError(f"error case {case['name']!r} did not raise")


# ---------------------------------------------------------------------------
# README and main
# ---------------------------------------------------------------------------

README = """\
# Reader golden fixtures (mintdim 0.2.1 `pipeline("unit-read")`)

What mintdim 0.2.1's reader returns for fixed inputs, so our compatible reader
can be tested against it without mintdim installed. Generated by
`tools/make_read_golden.py` (run from the repository root with a Python 3.12
venv holding mintdim 0.2.1: `/tmp/ref312/bin/python tools/make_read_golden.py`);
do not edit by hand. The generator is deterministic: a rerun gives
byte-identical files.

Inputs are the mintdim builds stored under `../golden/<case>/expected/out/` and
two tiny builds the generator writes itself under `_builds/`:

- `_builds/pad_is_eos/`: template `prompt, token_template, answer`
  (field/literal/field), `pad_token_id` 2 standing for an EOS id, uint16, magic
  65535; `unit_32/shard_000000.bin` has 12 records whose answers end with 2 and
  some contain 2 inside. mintdim drops all those EOS targets from
  `target_mask` (`target_ids != pad_id`); our reader deliberately keeps them.
- `_builds/no_length_field/unit_4/shard_000000.bin`: a shard without
  `length_field.json` (used by one error case).

mintdim was run with the current directory = `tests/golden_read`, so every
path (in `entries`, `source_spans` and the error configs) is relative to this
directory and the span paths are exactly the strings mintdim returned.

## Layout

    <scenario>/scenario.json
    <scenario>/batches.npz
    errors.json
    _builds/...

`scenario.json`:

- `description`, `mintdim_version`
- `entries`: the list passed to `.queue(entries=...)`
- `sequence_template`: passed to `.layout(sequence_template=...)`
- `target`: `{fields, index, ignore_id}` passed to `.target(...)`
- `pad_id`: `pad_token_id` from the build's `length_field.json`
- `reads`: how many times `.read()` was called on the same pipeline object
- `batches[i]` for read i: `source_spans` (`[[path, start, count], ...]`),
  `accum_index`, `should_step`, `shape` (`[rows, unit]`), `dtypes` of
  `input_ids`/`target_ids`/`target_mask`, `mask_true` (number of True in
  `target_mask`, informational)

`batches.npz` (read with `np.load`): `input_ids_<i>`, `target_ids_<i>`,
`target_mask_<i>` for each read i. It is a deflated zip of `.npy` files like
`np.savez_compressed` writes, but with a fixed zip date so it is byte-stable.

`errors.json`: a list of invalid configurations, each
`{name, call, queue, layout, target, read_twice, error, component, problem}`:

- `call: "builder"`: the public chain. `queue`, `layout`, `target` are either
  null (that method is not called) or an object whose keys are passed as
  keyword arguments: `pipeline("unit-read").queue(**queue).layout(**layout)
  .target(**target)`, then `.read()` (twice on the same object if
  `read_twice`; the first read then succeeds).
- `call: "raw"`: the dict `{"queue", "layout", "target"}` is given as is to
  mintdim's `mintdim.apis.unit_read.runtime.run_unit_read_pipeline` (what
  `.read()` validates internally); used for shapes the builder cannot
  produce (e.g. a queue that is not a mapping).
- `error`: the exception class name mintdim raised; `component`: its
  `component` attribute, or null when it has none (UnitReadShardError,
  UnitReadMetadataError and plain Python errors); `problem`: its `problem`
  attribute or null (informational).

## Scenarios

{scenarios}

## mintdim behaviours worth knowing

- A directory entry becomes one queue entry per direct `*.bin` child, sorted.
- A batch that reaches the end of its shard is filled from the start of the
  *same* shard (two spans); the queue then moves to the next entry. Every
  entry keeps its cursor, so when the queue comes back it resumes where the
  wrap left it, not at 0.
- batch > rows: the shard is repeated, one span per pass
  (e.g. four `[path, 0, 1]` spans for a one-row shard and batch 4).
- `accum_index` is one counter for the whole queue, advanced modulo the
  *current* entry's `accum`; `should_step` is `(accum_index + 1) % accum == 0`.
- `target_mask` = target-segment positions (position t is selected when
  token t+1 lies in a selected segment) `& target_ids != pad_id &
  target_ids != ignore_id`; the last position's target is `ignore_id`.
- `unit` is checked against a shard only through the file size (not
  divisible: UnitReadShardError) and the magic of every record.
- The configured layout is compared with `length_field.json` at each read,
  for the entry being read (UnitReadRuntimeError).
"""


def readme_text(specs: dict) -> str:
    lines = [f"- `{name}` ({spec['reads']} reads): {spec['description']}"
             for name, spec in specs.items()]
    return README.replace("{scenarios}", "\n".join(lines))


def reset_output() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)


def main() -> int:
    reset_output()
    os.chdir(OUT)
    write_pad_is_eos_build(Path(PAD_EOS))
    write_no_length_field_build(Path(NO_META))
    specs = scenarios()
    for name, spec in specs.items():
        scenario, arrays = run_scenario(name, spec)
        Path(name).mkdir()
        write_json(Path(name) / "scenario.json", scenario)
        write_npz(Path(name) / "batches.npz", arrays)
        print(f"{name}: {spec['reads']} reads")
    errors = [run_error_case(case) for case in error_cases()]
    write_json(Path("errors.json"), errors)
    for err in errors:
        print(f"error {err['name']}: {err['error']} / {err['component']}")
    Path("README.md").write_text(readme_text(specs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
