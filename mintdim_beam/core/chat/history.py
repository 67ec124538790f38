"""A split record's history, handed to the tokenizer by reference.

Record j > 0 of a split dialogue has as its `context_0` everything record j-1 holds,
then the context up to its own first turn (`segments.lay_out`). Spelling that out and
encoding it again makes a dialogue of T turns cost T^2 (a 10,000-turn dialogue never
ends). Instead its value is `Continued(gap)`: "the ids of the previous record's
segments, in order, then the ids of `gap`", so each piece of text is encoded once and
the history's ids are exactly the ones the previous record trained on. The encoder
(`encode_batch.BatchEncoder`) resolves it; the records of one dialogue are always in one
batch, one after the other.
"""
from __future__ import annotations


class Continued:
    """The value of a continuing record's `context_0`: the previous record's segments,
    then `gap` (a string, or `(piece, is_plain)` pieces)."""

    __slots__ = ("gap",)

    def __init__(self, gap):
        self.gap = gap

    def __getstate__(self):
        return self.gap

    def __setstate__(self, gap):
        self.gap = gap

    def __eq__(self, other) -> bool:
        return type(other) is Continued and other.gap == self.gap

    def __repr__(self) -> str:
        return f"Continued({self.gap!r})"


def value_text(value) -> str:
    """A segment value's own text: a string, pieces joined, a continuation's gap."""
    if type(value) is str:
        return value
    if type(value) is Continued:
        return value_text(value.gap)
    return "".join(piece for piece, _ in value)
