"""Each stage alone, with TestPipeline + assert_that."""
import hashlib

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from mintdim_beam.config import Dataset, InputFile
from mintdim_beam.source import plan_ranges
from mintdim_beam.template import compile_template
from mintdim_beam.transforms.read import COUNTS, ReadJSONL
from mintdim_beam.transforms.render import ERRORS, Render
from mintdim_beam.transforms.stats import BuildStats

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


def test_build_stats_combines_partials_per_dataset():
    partials = [(0, {"total_samples": 2, "total_tokens": 10, "samples_with_unk": 1, "unk_tokens": 3,
                     "unit_distribution": {8: 2}}),
                (0, {"total_samples": 1, "total_tokens": 4, "samples_with_unk": 0, "unk_tokens": 0,
                     "unit_distribution": {8: 1, 16: 0}}),
                (1, {"total_samples": 1, "total_tokens": 9, "samples_with_unk": 0, "unk_tokens": 0,
                     "unit_distribution": {16: 1}})]
    with TestPipeline(argv=OPTIONS) as p:
        stats = p | beam.Create(partials) | BuildStats()
        assert_that(stats, equal_to([
            (0, {"total_samples": 3, "total_tokens": 14, "samples_with_unk": 1, "unk_tokens": 3,
                 "unit_distribution": {8: 3, 16: 0}}),
            (1, {"total_samples": 1, "total_tokens": 9, "samples_with_unk": 0, "unk_tokens": 0,
                 "unit_distribution": {16: 1}})]))
