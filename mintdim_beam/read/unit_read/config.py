"""Validation of a unit-read configuration, rule for rule as mintdim 0.2.1 checks it and
in the same order (queue entries one by one, then the layout, then the target), so a bad
configuration gives the same error class and component; the text is in both languages.

A directory `path` becomes one queue entry per direct `*.bin` child, sorted by name."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mintdim_beam.core.errors import UnitReadValidationError
from mintdim_beam.read.unit_read import files

QUEUE_KEYS = ("accum", "batch", "path", "unit")


@dataclass(frozen=True)
class QueueEntry:
    path: str
    unit: int
    batch: int
    accum: int


@dataclass(frozen=True)
class UnitReadConfig:
    queue: tuple[QueueEntry, ...]
    sequence_template: tuple[str, ...]
    target_fields: tuple[str, ...]
    target_index: tuple[int, ...]
    ignore_id: int


def _fail(block: str, component: str, en: str, vi: str):
    raise UnitReadValidationError(component=component, problem=en, problem_vi=vi, rules=block)


def validate(queue, layout, target) -> UnitReadConfig:
    entries = validate_queue(queue)
    template = validate_layout(layout)
    fields, index, ignore_id = validate_target(target, template)
    return UnitReadConfig(entries, template, fields, index, ignore_id)


def validate_queue(raw) -> tuple[QueueEntry, ...]:
    if not isinstance(raw, Mapping):
        _fail("queue", "queue", "queue block is missing or is not a mapping",
              "thiếu khối queue hoặc nó không phải mapping")
    entries = raw.get("entries")
    if not isinstance(entries, list) or not entries:
        _fail("queue", "queue.entries", "queue.entries must be a non-empty list",
              "queue.entries phải là một list không rỗng")
    out: list[QueueEntry] = []
    for i, entry in enumerate(entries):
        out.extend(_entry(entry, f"queue.entries[{i}]"))
    return tuple(out)


def _entry(entry, where: str) -> list[QueueEntry]:
    if not isinstance(entry, Mapping):
        kind = type(entry).__name__
        _fail("queue", where, f"entry must be a mapping, got {kind}",
              f"entry phải là mapping, nhận {kind}")
    keys = set(entry)
    missing = sorted(set(QUEUE_KEYS) - keys)
    if missing:
        _fail("queue", where, f"missing required keys: {missing}", f"thiếu khoá bắt buộc: {missing}")
    unknown = sorted(keys - set(QUEUE_KEYS), key=str)
    if unknown:
        _fail("queue", where, f"unknown keys: {unknown}", f"khoá không hợp lệ: {unknown}")
    path = entry["path"]
    if not isinstance(path, str):
        kind = type(path).__name__
        _fail("queue", f"{where}.path", f"path must be str, got {kind}",
              f"path phải là str, nhận {kind}")
    unit, batch, accum = (_positive(entry[k], f"{where}.{k}") for k in ("unit", "batch", "accum"))
    return [QueueEntry(p, unit, batch, accum) for p in _shard_paths(path, f"{where}.path")]


def _positive(value, component: str) -> int:
    if type(value) is not int or value <= 0:
        _fail("queue", component, f"value must be a positive integer, got {value!r}",
              f"giá trị phải là số nguyên dương, nhận {value!r}")
    return value


def _shard_paths(path: str, component: str) -> tuple[str, ...]:
    kind = files.kind(path)
    if kind is None:
        _fail("queue", component, f"path does not exist: {path}", f"path không tồn tại: {path}")
    if kind == "file":
        if not path.rstrip("/").endswith(".bin") or files.name(path) == ".bin":
            _fail("queue", component, f"file path must point to a .bin shard: {path}",
                  f"path của file phải trỏ tới một shard .bin: {path}")
        return (files.normal(path),)
    if kind == "dir":
        shards = files.direct_bin_files(path)
        if not shards:
            _fail("queue", component,
                  f"directory contains no direct .bin shard files: {path}; non-.bin files "
                  "and child directories are ignored",
                  f"thư mục không chứa trực tiếp file shard .bin nào: {path}; file không phải "
                  ".bin và thư mục con bị bỏ qua")
        return shards
    _fail("queue", component, f"path is neither a file nor a directory: {path}",
          f"path không phải file cũng không phải thư mục: {path}")


def validate_layout(raw) -> tuple[str, ...]:
    if not isinstance(raw, Mapping):
        _fail("layout", "layout", "layout block is missing or is not a mapping",
              "thiếu khối layout hoặc nó không phải mapping")
    where = "layout.sequence_template"
    template = raw.get("sequence_template")
    if isinstance(template, str) or not template:
        _fail("layout", where, "sequence_template must be a non-empty sequence, not a string",
              "sequence_template phải là một dãy không rỗng, không phải chuỗi")
    try:
        names = tuple(template)
    except TypeError as exc:
        _fail("layout", where, f"sequence_template is not iterable: {exc}",
              f"sequence_template không duyệt được: {exc}")
    if not names:
        _fail("layout", where, "sequence_template must not be empty",
              "sequence_template không được rỗng")
    if any(not isinstance(n, str) or not n for n in names):
        _fail("layout", where, "all segment names must be non-empty strings",
              "mọi tên segment phải là chuỗi không rỗng")
    return names


def validate_target(raw, template: tuple[str, ...]):
    if not isinstance(raw, Mapping):
        _fail("target", "target", "target block is missing or is not a mapping",
              "thiếu khối target hoặc nó không phải mapping")
    if "fields" not in raw or "index" not in raw:
        _fail("target", "target", "target must declare both fields and index",
              "target phải khai báo cả fields và index")
    fields = _target_fields(raw["fields"], template)
    index = _target_index(raw["index"], template)
    _pairs(fields, index, template)
    ignore_id = raw.get("ignore_id", -100)
    if type(ignore_id) is not int:
        kind = type(ignore_id).__name__
        _fail("target", "target.ignore_id", f"ignore_id must be int, got {kind}",
              f"ignore_id phải là int, nhận {kind}")
    return fields, index, ignore_id


def _sequence(raw, component: str, what_en: str, what_vi: str) -> tuple:
    if raw is None:
        return ()
    name = component.split(".")[-1]
    if isinstance(raw, str):
        _fail("target", component, f"{name} must be a sequence of {what_en}, not a string",
              f"{name} phải là một dãy {what_vi}, không phải chuỗi")
    try:
        return tuple(raw)
    except TypeError as exc:
        _fail("target", component, f"{name} is not iterable: {exc}",
              f"{name} không duyệt được: {exc}")


def _target_fields(raw, template) -> tuple[str, ...]:
    fields = _sequence(raw, "target.fields", "segment names", "tên segment")
    if any(not isinstance(f, str) or not f for f in fields):
        _fail("target", "target.fields", "all target fields must be non-empty strings",
              "mọi field của target phải là chuỗi không rỗng")
    unknown = [f for f in fields if f not in set(template)]
    if unknown:
        _fail("target", "target.fields",
              f"target fields not present in layout.sequence_template: {unknown}",
              f"field của target không có trong layout.sequence_template: {unknown}")
    return fields


def _target_index(raw, template) -> tuple[int, ...]:
    index = _sequence(raw, "target.index", "0-base integer segment indices",
                      "chỉ số segment nguyên (đếm từ 0)")
    if any(type(i) is not int for i in index):
        _fail("target", "target.index", "all target index entries must be integers",
              "mọi chỉ số target phải là số nguyên")
    bad = [i for i in index if not 0 <= i < len(template)]
    if bad:
        _fail("target", "target.index",
              f"target index entries are 0-base and must satisfy 0 <= index < {len(template)}; "
              f"invalid: {bad}",
              f"chỉ số target đếm từ 0 và phải thoả 0 <= index < {len(template)}; "
              f"không hợp lệ: {bad}")
    return index


def _pairs(fields, index, template) -> None:
    if not fields or not index:
        _fail("target", "target", "target.fields and target.index must both be non-empty",
              "target.fields và target.index đều phải không rỗng")
    if len(fields) != len(index):
        _fail("target", "target",
              "target.fields and target.index must have the same length; each field is "
              "paired with the segment index it targets",
              "target.fields và target.index phải dài bằng nhau; mỗi field đi cặp với chỉ số "
              "segment mà nó nhắm tới")
    wrong = [f"{f}@{i} points to {template[i]!r}" for f, i in zip(fields, index)
             if template[i] != f]
    if wrong:
        listed = ", ".join(wrong)
        _fail("target", "target",
              f"target field/index pairs must match layout.sequence_template: {listed}",
              f"cặp field/chỉ số của target phải khớp layout.sequence_template: {listed}")
