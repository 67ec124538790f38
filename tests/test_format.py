"""Record layout and progress lines."""
import numpy as np

from mintdim_beam.core.formats import mintdim as fmt


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


def test_fast_rows_equal_json_dumps_of_the_documented_dicts():
    import json
    import random

    rng = random.Random(5)
    names = ['data/a.jsonl', 'dữ liệu/"quoted"\\\\back.jsonl', "tab\there\n.jsonl", "😀/漢字.jsonl"]
    for _ in range(200):
        source = rng.choice(names)
        empty = rng.choice([[], ["input"], ["a", "ä\"b"]])
        row = {"sample_id": rng.randint(0, 10**9), "hash": "ab" * 32, "token_count": rng.randint(0, 4096),
               "unit_size": 512, "source_file": source, "source_line": rng.randint(1, 10**7),
               "shard_path": "unit_512/shard_000003.bin", "empty_fields": empty}
        assert fmt.sample_row(row["sample_id"], row["hash"], row["token_count"], row["unit_size"],
                              fmt.json_string(source), row["source_line"], row["shard_path"],
                              empty) == json.dumps(row, ensure_ascii=False) + "\n"
        chars = rng.choice([["😀"], ["\\\\", "\""], ["\u2028", "x\ny"]])
        unk = {"sample_id": 7, "hash": "cd" * 32, "source_file": source, "source_line": 9,
               "unk_count": len(chars), "unk_positions": list(range(len(chars))),
               "unk_field_indices": [1] * len(chars), "unk_chars": chars}
        assert fmt.unk_row(7, unk["hash"], fmt.json_string(source), 9, unk["unk_positions"],
                           unk["unk_field_indices"], chars) == json.dumps(unk, ensure_ascii=False) + "\n"
