"""Each stage alone, with TestPipeline + assert_that."""
import dataclasses
import hashlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from mintdim_beam.unit_build.transforms.read import COUNTS, ReadJSONL
from mintdim_beam.unit_build.transforms.render import ERRORS, Render
from mintdim_beam.unit_build.transforms.stats import BuildStats
from mintdim_beam.core.config.unit_config import Dataset, InputFile
from mintdim_beam.core.inputs.source import plan_ranges
from mintdim_beam.core.render.template import compile_template

OPTIONS = ["--runner=FnApiRunner"]


def _dataset(path: str, batch: int = 2) -> Dataset:
    return Dataset(index=0, files=(InputFile(0, "in.jsonl", path),), fields=("q",), template="<{q}>",
                   template_file_index=0, tokenizer_kind="sentencepiece", tokenizer_given="t",
                   tokenizer_path="t", sizes=(8,), build_batch=batch, output_given="o",
                   output_path="o", samples_per_shard=2)


class _Plan:
    def __init__(self, dataset):
        self.dataset = dataset
        self.template = compile_template(dataset.template, list(dataset.fields), "in.jsonl")


def test_read_jsonl_batches_and_range_counts(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"q": "a"}\n\n{"q": "b"}\r\n  \r{"q": "c"}\n{"q": "d"}')
    dataset = _dataset(str(path))
    ranges = plan_ranges([dataset], range_bytes=16)
    with TestPipeline(argv=OPTIONS) as p:
        out = p | ReadJSONL(ranges, {0: 2})
        lines = out["batches"] | beam.FlatMap(lambda b: [(e[1], e[2]) for e in b[1]])
        counts = out[COUNTS] | beam.Map(lambda kv: kv[1]) | beam.combiners.ToList() | beam.Map(
            lambda cs: (sum(c[0] for c in cs), sum(c[1] for c in cs)))
        assert_that(counts, equal_to([(6, 4)]), label="counts")
        assert_that(lines | beam.Map(lambda e: e[1]),
                    equal_to(['{"q": "a"}', '{"q": "b"}', '{"q": "c"}', '{"q": "d"}']), label="lines")


def test_render_hashes_the_whole_rendered_text_and_reports_bad_lines():
    plan = _Plan(_dataset("unused"))
    batch = ((0, 0, 0, 0), [(0, 0, '{"q": "x"}', None), (1, 1, '{"q": 5}', None),
                            (2, 2, '{"z": 1}', None), (3, 3, "nope", None)])
    with TestPipeline(argv=OPTIONS) as p:
        out = p | beam.Create([batch]) | Render({0: plan})
        digests = out["rendered"] | beam.FlatMap(lambda e: e[1]["digests"])
        assert_that(digests, equal_to([hashlib.sha256(b"<x>").hexdigest(),
                                       hashlib.sha256(b"<5>").hexdigest()]), label="digests")
        kinds = out[ERRORS] | beam.Map(lambda e: (e.cls, e.local_line))
        assert_that(kinds, equal_to([("SampleSchemaError", 2), ("SourceParseError", 3)]), label="errors")


BAD_JSON = ['{"q": "x"} {"q": "y"}', '{"q": "x"},', '\ufeff{"q": "x"}', '{"q": "x"', '{"q": x}',
            '{"q": "a\tb"}', '{"q": "x",}', "{'q': 'x'}", '{"q": "x"}]', "NaNx", '{"q": 1e}']


def test_render_reports_exactly_json_loads_message_for_each_syntax_error():
    """Render calls the JSON scanner directly; its errors must read as json.loads's."""
    import json

    plan = _Plan(_dataset("unused"))
    lines = ['{"q": "ok"}'] + BAD_JSON + ['{"q": 1.5e3}', '{"q": true}', '{"q": NaN}']
    batch = ((0, 0, 0, 0), [(i, i, text, None) for i, text in enumerate(lines)])
    expected = []
    for i, text in enumerate(lines):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            expected.append((i, f"invalid JSON syntax: {exc.msg}"))
    assert len(expected) == len(BAD_JSON)
    with TestPipeline(argv=OPTIONS) as p:
        out = p | beam.Create([batch]) | Render({0: plan})
        reasons = out[ERRORS] | beam.Map(lambda e: (e.local_line, e.kwargs["reason"]))
        assert_that(reasons, equal_to(expected), label="errors")
        digests = out["rendered"] | beam.FlatMap(lambda e: e[1]["digests"])
        assert_that(digests, equal_to([hashlib.sha256(t.encode()).hexdigest()
                                       for t in ("<ok>", "<1500.0>", "<True>", "<nan>")]),
                    label="digests")


def test_build_stats_combines_partials_per_dataset():
    trip = {"segments_checked": 4, "lossy_segments": 1, "lossy_samples": 1,
            "lossy_kinds": {"whitespace": 1}}
    partials = [(0, {"total_samples": 2, "total_tokens": 10, "samples_with_unk": 1, "unk_tokens": 3,
                     "unit_distribution": {8: 2}, **trip, "engines": {"native": 2}}),
                (0, {"total_samples": 1, "total_tokens": 4, "samples_with_unk": 0, "unk_tokens": 0,
                     "unit_distribution": {8: 1, 16: 0}, **trip, "lossy_kinds": {"unknown": 1},
                     "engines": {"native": 1}}),
                (1, {"total_samples": 1, "total_tokens": 9, "samples_with_unk": 0, "unk_tokens": 0,
                     "unit_distribution": {16: 1}})]  # a partial without the round-trip keys
    none = {"segments_checked": 0, "lossy_segments": 0, "lossy_samples": 0}
    with TestPipeline(argv=OPTIONS) as p:
        stats = p | beam.Create(partials) | BuildStats()
        assert_that(stats, equal_to([
            (0, {"total_samples": 3, "total_tokens": 14, "samples_with_unk": 1, "unk_tokens": 3,
                 "segments_checked": 8, "lossy_segments": 2, "lossy_samples": 2,
                 "unit_distribution": {8: 3, 16: 0},
                 "lossy_kinds": {"whitespace": 1, "unknown": 1}, "engines": {"native": 3}}),
            (1, {"total_samples": 1, "total_tokens": 9, "samples_with_unk": 0, "unk_tokens": 0,
                 **none, "unit_distribution": {16: 1}, "lossy_kinds": {}, "engines": {}})]))


def test_hash_buckets_take_the_first_48_bits_of_each_digest():
    import random

    from mintdim_beam.unit_build.transforms.assign import hash_buckets

    rng = random.Random(3)
    digests = [hashlib.sha256(str(rng.random()).encode()).hexdigest() for _ in range(500)]
    for buckets in (1, 7, 1000, 2 ** 40 + 3):
        assert hash_buckets(bytes.fromhex("".join(digests)), buckets).tolist() == [
            int(d[:12], 16) % buckets for d in digests]


def _hash_pieces(entries, rng, size=70):
    """Hash entries (digest, sample_id, file, line) as group-by values: several pieces per
    file, in no particular order."""
    import numpy as np

    pieces = []
    for start in range(0, len(entries), size):
        chunk = entries[start:start + size]
        for fp in (0, 1):
            part = [e for e in chunk if e[2] == fp]
            if part:
                pieces.append((bytes.fromhex("".join(e[0] for e in part)),
                               np.array([e[1] for e in part]), fp,
                               np.array([e[3] for e in part])))
    rng.shuffle(pieces)
    return pieces


def _want_groups(entries):
    """digest -> members (sample_id, file, line) in sample order, for groups of 2+."""
    groups = {}
    for digest, sid, fp, line in entries:
        groups.setdefault(digest, []).append((sid, ["in.jsonl", "b.jsonl"][fp], line))
    return {d: sorted(m) for d, m in groups.items() if len(m) > 1}


def _two_file_plan(out=None):
    dataset = _dataset("unused")
    files = dataset.files + (InputFile(1, "b.jsonl", "b.jsonl"),)
    dataset = dataclasses.replace(dataset, files=files, **({"output_path": out} if out else {}))
    return _Plan(dataset)


def test_duplicate_groups_by_hash_in_sample_order_across_pieces():
    import json
    import random

    from mintdim_beam.unit_build.transforms.duplicates import group_members

    rng = random.Random(5)
    pool = [hashlib.sha256(bytes([i])).hexdigest() for i in range(40)]
    entries = [(pool[rng.randrange(40)], sid, rng.randrange(2), rng.randrange(1, 999))
               for sid in rng.sample(range(10_000), 300)]
    rows = list(group_members(((0, 3), _hash_pieces(entries, rng)), {0: _two_file_plan()}))
    want = _want_groups(entries)
    assert len(rows) == len(want)
    assert [first for first, _, _ in rows] == sorted(m[0][0] for m in want.values())
    for first, count, row in rows:
        doc = json.loads(row)
        members = want[doc["hash"]]
        assert (first, count) == (members[0][0], len(members))
        assert [(m["sample_id"], m["source_file"], m["source_line"])
                for m in doc["samples"]] == members


@pytest.mark.parametrize("chunk", [None, 1, 4096])
def test_duplicate_parts_hold_every_repeat_in_order_through_scratch_files(tmp_path, monkeypatch,
                                                                         chunk):
    """Issue 28: with each sample repeated many times, the rows go through the buckets'
    scratch files and only (bucket, rows) references reach the part group-by; the parts
    joined are the duplicate index of all the entries, byte for byte, whatever the
    read chunk (1 byte: each row read alone; 4096: rows split across reads)."""
    import random

    from mintdim_beam.core.files import checksums
    from mintdim_beam.core.formats import mintdim as fmt
    from mintdim_beam.unit_build.transforms import duplicates

    if chunk:
        monkeypatch.setattr(duplicates.WriteDuplicatePartFn, "READ_BUDGET", 0)
        monkeypatch.setattr(duplicates.WriteDuplicatePartFn, "MIN_CHUNK", chunk)
        monkeypatch.setattr(duplicates, "_CHUNK", chunk)
    rng = random.Random(7)
    pool = [hashlib.sha256(bytes([i])).hexdigest() for i in range(25)]
    records = [(pool[rng.randrange(25)], rng.randrange(2), rng.randrange(1, 999))
               for _ in range(25)]
    entries = [(records[sid % 25][0], sid, records[sid % 25][1], records[sid % 25][2] + sid)
               for sid in range(1000)]  # 25 records cycled: each about 40 times
    plan = _two_file_plan(str(tmp_path / "out"))
    buckets = {}
    for entry in entries:
        buckets.setdefault(int(entry[0], 16) % 3, []).append(entry)
    refs = {}
    for bucket, members in buckets.items():
        for key, ref in duplicates.group_rows(((0, bucket), _hash_pieces(members, rng)), {0: plan}):
            assert len(ref) == 3  # (bucket, lo, hi): a reference, never the rows
            refs.setdefault(key, []).append(ref)
    parts = []
    for key in sorted(refs):
        refs[key].reverse()  # a group-by's values come in no set order
        parts += duplicates.WriteDuplicatePartFn({0: plan}).process((key, refs[key]))
    want = sorted(_want_groups(entries).items(), key=lambda kv: kv[1][0][0])
    joined = b"".join(open(path, "rb").read() for _, _, path, _, _, _ in parts)
    for _, _, path, _, _, summed in parts:  # each part summed as it was written
        assert summed == checksums.file_sum(path)
    assert joined.decode() == "".join(fmt.duplicate_row(d, m) for d, m in want)
    assert sum(p[3] for p in parts) == len(want)
    assert sum(p[4] for p in parts) == 1000


def test_packed_side_input_round_trips_and_pickles_as_one_blob():
    import pickle

    from mintdim_beam.unit_build.packed import Packed

    value = {0: {("k", i): [i, str(i)] for i in range(1000)}}
    packed = pickle.loads(pickle.dumps(Packed(value)))
    assert packed.unpack() == value
    assert packed.unpack() is packed.unpack()  # unpickled once
    assert list(vars(pickle.loads(pickle.dumps(packed)))) == ["_blob", "_value"]


def test_gather_index_concatenates_ranges():
    import numpy as np

    from mintdim_beam.unit_build.transforms.stage import gather_index

    starts, counts = np.array([5, 0, 9, 2]), np.array([3, 2, 0, 1])
    assert gather_index(starts, counts).tolist() == [5, 6, 7, 0, 1, 2]
    assert gather_index(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("runner", ["FnApiRunner", "BundleBasedDirectRunner"])
def test_apply_to_all_sees_exactly_one_output_of_a_multi_output_pardo(runner):
    """The BundleBasedDirectRunner once handed ApplyToAll every output's elements."""
    from mintdim_beam.runtime.apply_to_all import ApplyToAll

    def split(x):
        yield beam.pvalue.TaggedOutput("side", ("s", x))
        yield x

    with TestPipeline(argv=[f"--runner={runner}"]) as p:
        out = p | beam.Create([3, 1, 2]) | beam.ParDo(split).with_outputs("side", main="main")
        total = out.side | "Side" >> ApplyToAll(lambda items: sorted(items))
        assert_that(total, equal_to([[("s", 1), ("s", 2), ("s", 3)]]), label="side")
        empty = (out.main | beam.Filter(lambda x: x > 10)
                 | "Empty" >> ApplyToAll(lambda items, k: (len(items), k),
                                         beam.pvalue.AsSingleton(p | "K" >> beam.Create(["k"]))))
        assert_that(empty, equal_to([(0, "k")]), label="empty")
