"""A shard's `length_field.json` as unit-read needs it (magic, token dtype, pad id, the
segment names), checked as mintdim 0.2.1 checks it. mintdim reads the file again at
every `read()`; here it is parsed once per file identity, so a rewritten file is still
seen at the next read."""
from __future__ import annotations

import json
from dataclasses import dataclass

from mintdim_beam.core.errors import UnitReadMetadataError
from mintdim_beam.core.files import storage
from mintdim_beam.read.unit_read import files

DTYPES = ("uint16", "uint32")
# mintdim knows the first three; our chat and preference builds add the last two.
_KINDS = ("literal", "field", "unknown", "context", "trained")


@dataclass(frozen=True)
class Metadata:
    magic: int
    sequence_template: tuple[str, ...]
    token_dtype: str
    pad_id: int


class MetadataCache:
    """Parsed `length_field.json` per path, valid while the file's identity holds."""

    def __init__(self):
        self._parsed: dict[str, tuple[tuple, Metadata]] = {}

    def for_shard(self, shard: str) -> Metadata:
        path = files.join(files.metadata_dir(shard), "length_field.json")
        ident = files.identity(path)
        if ident is None:
            raise UnitReadMetadataError(path=path, problem="length_field.json was not found",
                                        problem_vi="không tìm thấy length_field.json")
        cached = self._parsed.get(path)
        if cached is None or cached[0] != ident:
            cached = (ident, parse(_read(path), path))
            self._parsed[path] = cached
        return cached[1]


def _read(path: str) -> bytes:
    if storage.is_url(path):
        return storage.read_bytes(path)
    with open(path, "rb") as handle:
        return handle.read()


def _bad(path: str, en: str, vi: str):
    raise UnitReadMetadataError(path=path, problem=en, problem_vi=vi)


def parse(data: bytes, path: str) -> Metadata:
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _bad(path, f"invalid JSON: {exc}", f"JSON không hợp lệ: {exc}")
    if not isinstance(payload, dict):
        kind = type(payload).__name__
        _bad(path, f"metadata root must be a JSON object, got {kind}",
             f"gốc metadata phải là object JSON, nhận {kind}")
    magic = _int(payload, "magic", path)
    token_dtype = payload.get("token_dtype")
    if not isinstance(token_dtype, str) or not token_dtype:
        kind = type(token_dtype).__name__
        _bad(path, f"token_dtype must be a non-empty string, got {kind}",
             f"token_dtype phải là chuỗi không rỗng, nhận {kind}")
    pad_id = _int(payload, "pad_token_id", path)
    if token_dtype not in DTYPES:
        _bad(path, f"unsupported token_dtype: {token_dtype!r}",
             f"token_dtype không được hỗ trợ: {token_dtype!r}")
    template = payload.get("sequence_template")
    if not isinstance(template, list) or not template:
        _bad(path, "sequence_template must be a non-empty list",
             "sequence_template phải là list không rỗng")
    if any(not isinstance(n, str) or not n for n in template):
        _bad(path, "sequence_template entries must be non-empty strings",
             "các phần tử của sequence_template phải là chuỗi không rỗng")
    _check_length_fields(payload.get("length_fields"), template, path)
    return Metadata(magic=magic, sequence_template=tuple(template), token_dtype=token_dtype,
                    pad_id=pad_id)


def _int(payload: dict, key: str, path: str) -> int:
    value = payload.get(key)
    if type(value) is not int:
        kind = type(value).__name__
        _bad(path, f"{key} must be an integer, got {kind}", f"{key} phải là số nguyên, nhận {kind}")
    return value


def _check_length_fields(rows, template: list, path: str) -> None:
    """`length_fields`, when present, describes the template's segments in order."""
    if rows is None:
        return
    if not isinstance(rows, list):
        _bad(path, "length_fields must be a list when present",
             "length_fields phải là list khi có mặt")
    if len(rows) != len(template):
        _bad(path, f"length_fields must have the same length as sequence_template: "
                   f"{len(rows)} != {len(template)}",
             f"length_fields phải dài bằng sequence_template: {len(rows)} != {len(template)}")
    for i, row in enumerate(rows):
        at = f"length_fields[{i}]"
        if not isinstance(row, dict):
            _bad(path, f"{at} must be an object", f"{at} phải là object")
        if row.get("index") != i:
            _bad(path, f"{at}.index must be {i}", f"{at}.index phải là {i}")
        row_name = row.get("name")
        if not isinstance(row_name, str) or not row_name:
            _bad(path, f"{at}.name must be a non-empty string", f"{at}.name phải là chuỗi không rỗng")
        if row_name != template[i]:
            _bad(path, f"{at}.name must match sequence_template[{i}] {template[i]!r}, got "
                       f"{row_name!r}",
                 f"{at}.name phải khớp sequence_template[{i}] {template[i]!r}, nhận {row_name!r}")
        if row.get("kind") not in _KINDS:
            _bad(path, f"{at}.kind must be literal, field, unknown, context or trained",
                 f"{at}.kind phải là literal, field, unknown, context hoặc trained")
        for key, rule_en, rule_vi in (("content", "a string or null", "chuỗi hoặc null"),
                                      ("field", "a string when present", "chuỗi khi có mặt")):
            value = row.get(key)
            if value is not None and not isinstance(value, str):
                _bad(path, f"{at}.{key} must be {rule_en}", f"{at}.{key} phải là {rule_vi}")
