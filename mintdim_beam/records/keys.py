"""Sort keys: a caller's key (str, bytes, int or a tuple of them) as bytes that sort as
the key does, and the source a record stands for in the indices.

Why bytes: keys travel to the bucket that holds their range and are compared there;
one encoding orders every kind (bytes < str < int < tuple, then by value; a tuple
component by component, as Python compares them) and never raises on a mix."""
from __future__ import annotations

import json

_BYTES, _STR, _INT, _TUPLE = b"\x01", b"\x02", b"\x03", b"\x04"
_END = b"\x00\x00"  # ends a str or bytes: sorts before any byte that goes on
_INT_BIAS = 1 << 63


class KeyTypeError(TypeError):
    """A key that is none of str, bytes, int or a tuple of them (`str(exc)` says why)."""


def sort_key(key) -> bytes:
    """`key` as bytes whose order is the key's order (see the module)."""
    kind = type(key)
    if kind is str:
        return _STR + _escaped(key.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return _BYTES + _escaped(key)
    if kind is int:
        if not -_INT_BIAS <= key < _INT_BIAS:
            raise KeyTypeError(f"the int {key} is outside 64 bits")
        return _INT + (key + _INT_BIAS).to_bytes(8, "big")
    if kind is tuple:
        return _TUPLE + b"".join(sort_key(part) for part in key) + _END
    raise KeyTypeError(f"a key is a str, bytes, int or a tuple of them, not "
                       f"{type(key).__name__}")


def _escaped(raw: bytes) -> bytes:
    return raw.replace(b"\x00", b"\x00\xff") + _END


def key_text(key) -> str:
    """The key as the indices name it: a str as is, bytes in hex, a tuple as a JSON
    list (its bytes in hex)."""
    if type(key) is str:
        return key
    if type(key) is bytes:
        return key.hex()
    if type(key) is tuple:
        return json.dumps([p.hex() if type(p) is bytes else p for p in key],
                          ensure_ascii=False)
    return str(key)


def source_of(key, given=None) -> tuple[str, int]:
    """(source_file, source_line) of a record: the caller's provenance fields when
    `given`, a key (str, int) as file and line (the key of a line of a file), else the
    key's text at line 1."""
    if given is not None:
        return given
    if (type(key) is tuple and len(key) == 2 and type(key[0]) is str
            and type(key[1]) is int and key[1] >= 1):
        return key
    return key_text(key), 1
