"""A JSON array file (`[{...}, {...}]`, what `datasets`' `to_json(lines=False)` writes):
each element is a row, and its `source_line` is the element's 1-based position in the
array.

An array cannot be split, so the file is one range, decoded element by element with
`json.JSONDecoder.raw_decode` over a window of the text: a multi-GB file's text and its
objects are never held at once, only the window and one batch of rows. A malformed
array cannot be read past (where the next element starts is unknown): it is a
SourceParseError naming the file and the element, whatever the bad-row policy.
"""
from __future__ import annotations

import codecs
import json
import re

from mintdim_beam.core.errors import SourceParseError

_BLOCK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")
_NEXT = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode
_SCAN = json.JSONDecoder().scan_once  # raw_decode without its wrapper


class _Window:
    """The decoded text of a binary stream, read on demand; `pos` indexes `text`."""

    def __init__(self, stream, file: str):
        self._stream, self._file = stream, file
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.text, self.pos, self.eof = "", 0, False
        self.element = 0  # the element being read, 1-based, for errors
        self.broken = None  # why the bytes after the text are not UTF-8

    def fail(self, reason: str):
        if self.broken is not None:
            reason = f"invalid UTF-8: {self.broken}"
        raise SourceParseError(file=self._file, line=max(self.element, 1),
                               reason=f"malformed JSON array at element {max(self.element, 1)}: "
                                      f"{reason}")

    def more(self, at_least: int = _BLOCK) -> bool:
        """Read on (at least `at_least` bytes); False at the end of the stream."""
        if self.eof:
            return False
        data = self._stream.read(max(at_least, _BLOCK))
        try:
            decoded = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            # The text ends where the bytes stop being UTF-8, so the element holding
            # them is the one that fails, with this reason.
            decoded = exc.object[:exc.start].decode("utf-8", "ignore")
            self.broken, data = exc.reason, b""
        if not data:
            self.eof = True
        if self.pos > _BLOCK:  # drop what was read: the window stays small
            self.text, self.pos = self.text[self.pos:], 0
        self.text += decoded
        return True

    def skip_space(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""


def iter_elements(stream, file: str, limit: int):
    """The array's elements in order. `limit` bounds the text of one element (a
    longer one, or one that never ends, is a SourceParseError)."""
    window = _Window(stream, file)
    window.more()
    if window.text.startswith("\ufeff"):
        window.pos = 1
    if window.skip_space() != "[":
        window.fail("the file does not start with '['")
    window.pos += 1
    if window.skip_space() == "]":
        window.pos += 1
    else:
        while True:
            window.element += 1
            yield _element(window, limit)
            # the common case in one match: a comma and the next element's first byte
            found = _NEXT.match(window.text, window.pos)
            if found is not None and found.end() < len(window.text):
                window.pos = found.end()
                continue
            following = window.skip_space()
            if following == "]":
                window.pos += 1
                break
            if following != ",":
                window.fail("the file ends inside the array" if not following else
                            f"expected ',' or ']' after the element, found {following!r}")
            window.pos += 1
            if window.skip_space() == "":
                window.fail("the file ends inside the array")
    if window.skip_space() != "":
        window.element += 1
        window.fail("data after the array's closing ']'")


def _element(window: _Window, limit: int):
    if window.pos >= len(window.text) or window.text[window.pos] in " \t\n\r":
        window.skip_space()
    while True:
        try:
            try:
                value, end = _SCAN(window.text, window.pos)
            except StopIteration:
                value, end = _DECODE(window.text, window.pos)  # raises, with the message
        except json.JSONDecodeError as exc:
            if not _read_on(window, limit):
                window.fail(exc.msg if not window.eof or exc.pos < len(window.text)
                            else "the file ends inside the element")
            continue
        except RecursionError:
            window.fail("nested too deeply")
        if end >= len(window.text) and _read_on(window, limit):
            continue  # a number may go on in the next block
        if end - window.pos > limit:
            window.fail(f"the element is over --max_line_bytes {limit}")
        window.pos = end
        return value


def _read_on(window: _Window, limit: int) -> bool:
    """More text for an element not yet complete; False at the end or past `limit`."""
    pending = len(window.text) - window.pos
    if pending > limit:
        window.fail(f"the element is over --max_line_bytes {limit} (or never ends)")
    return window.more(pending)
