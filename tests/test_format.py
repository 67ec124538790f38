"""Record layout and progress lines."""
import numpy as np

from mintdim_beam import format as fmt


def test_records_are_magic_lengths_payload_then_pad():
    lengths = np.array([[1, 2], [0, 0], [3, 0]])
    tokens = np.array([5, 6, 7, 8, 9, 10])
    records = fmt.build_records(tokens, lengths, unit=4, magic=65535, pad_id=0, dtype="uint16")
    assert records.dtype == np.dtype("<u2")
    assert records.tolist() == [[65535, 1, 2, 5, 6, 7, 0],
                                [65535, 0, 0, 0, 0, 0, 0],
                                [65535, 3, 0, 8, 9, 10, 0]]


def test_progress_line_and_large_shard_warning():
    assert fmt.shard_progress_lines(12, 100000, int(241.8 * 1024 * 1024), 512) == [
        "[unit-build] shard=000012 samples=100000 bytes=241.8 MiB unit=512"]
    lines = fmt.shard_progress_lines(12, 100000, int(684.3 * 1024 * 1024), 512)
    assert lines[1] == ("[unit-build:warning] shard=000012 size=684.3 MiB exceeds recommended 512 MiB.\n"
                        "Build continues because sharding is controlled by samples_per_shard.")
