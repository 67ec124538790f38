"""Byte-range reading must give exactly Python's universal-newline lines, whatever the
range size: each line read once, by the range holding its first byte."""
import io
import random

import pytest

from mintdim_beam.core.inputs.source import first_line_start, iter_range_lines, number_ranges


def python_lines(data: bytes) -> list[bytes]:
    text = io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None)
    return [line.rstrip("\n").encode("latin-1") for line in text]


def ranged_lines(data: bytes, size: int, block: int = 1 << 20) -> list[bytes]:
    handle = io.BytesIO(data)
    out = []
    for start in range(0, max(len(data), 1), size):
        out.extend(iter_range_lines(handle, start, min(start + size, len(data)), block))
    return out


EDGE_CASES = [
    b"", b"\n", b"\r", b"\r\n", b"a", b"a\n", b"a\r", b"a\r\n", b"\n\n", b"\r\r\n\n",
    b"a\r\nb\rc\nd", b"\r\n\r\n", b"ab\r\r\r\ncd\n\r", b" \n\t\n  x  \r\n",
]


@pytest.mark.parametrize("data", EDGE_CASES)
@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_edge_cases_every_range_size(data, block):
    """Lines are read block by block: a line or a '\\r\\n' may straddle two blocks."""
    for size in range(1, len(data) + 2):
        assert ranged_lines(data, size, block) == python_lines(data), (data, size, block)


def test_random_files_every_range_size():
    rng = random.Random(3)
    for _ in range(300):
        data = bytes(rng.choice(b"ab \r\n\r\n") for _ in range(rng.randint(0, 40)))
        expected = python_lines(data)
        for size in (1, 2, 3, 5, 8, 13, 64):
            for block in (1, 2, 5, 1 << 20):
                assert ranged_lines(data, size, block) == expected, (data, size, block)


def test_first_line_start_skips_the_line_feed_of_a_split_crlf():
    handle = io.BytesIO(b"ab\r\ncd")
    assert first_line_start(handle, 3) == 4
    assert first_line_start(handle, 4) == 4
    assert first_line_start(handle, 2) == 4
    assert first_line_start(io.BytesIO(b"ab\rcd"), 3) == 3
    assert first_line_start(io.BytesIO(b"abcd"), 2) is None


class _Dataset:
    def __init__(self, index, n_files):
        self.index = index
        self.files = [None] * n_files


def test_numbering_restarts_lines_per_file_and_runs_ids_across_files():
    counts = {(0, 0, 0): (5, 3), (0, 0, 1): (4, 4), (0, 1, 0): (2, 1), (1, 0, 0): (7, 7)}
    offsets = number_ranges([_Dataset(0, 2), _Dataset(1, 1)], counts)
    assert offsets == {(0, 0, 0): (0, 0), (0, 0, 1): (5, 3), (0, 1, 0): (0, 7),
                       (1, 0, 0): (0, 0)}


def test_lines_of_a_range_come_as_they_are_read():
    """A range's first batch can leave before the rest of the range is read."""
    from mintdim_beam.core.inputs.source import iter_range_lines

    data = b"".join(b'{"q": "%d"}\n' % i for i in range(10000))
    handle = io.BytesIO(data)
    lines = iter_range_lines(handle, 0, len(data), block=4096)
    assert next(lines) == b'{"q": "0"}'
    assert handle.tell() <= 4096
    assert [next(lines) for _ in range(2)] == [b'{"q": "1"}', b'{"q": "2"}']
    assert len(list(lines)) == 9997
