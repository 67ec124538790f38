"""`mintdim_beam.transforms` in a user's own pipeline: rows from beam.Create or
ReadFromParquet, keyed (file, line), through TokenizeRecords and WriteUnitBuild give
the bytes of the file build (shards, indices, histogram, stats, summary) on the
in-process and multi-process runners; a repeated key, a bad config and a taken output
are refused as the build refuses them."""
import json

import pytest

from conftest import IN_MEMORY, MULTI_PROCESS
from records_corpus import (FIELDS, SIZES, TEMPLATE, TOKENIZER, build_from_files,
                            build_from_rows, file_rows, pack_from_files, pack_from_rows,
                            same_build, same_pack, write_corpus)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    work = tmp_path_factory.mktemp("records")
    write_corpus(work)
    summary = build_from_files(work, "from_files", IN_MEMORY)
    return work, summary


def _without_dir(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "output_dir"}


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in-process", "multi-process"])
def test_rows_keyed_by_file_and_line_give_the_file_build_bytes(corpus, options):
    work, want = corpus
    name = f"rows_{len(options)}"
    got, = build_from_rows(work, name, options)
    assert same_build(work, name, "from_files") == []
    assert _without_dir(got) == _without_dir(want)
    assert want["rejected_rows"] == 2 and want["total_samples"] > 290  # the corpus has them
    index = (work / name / "sample_index.jsonl").read_text().splitlines()
    first = json.loads(index[0])
    assert (first["source_file"], first["source_line"]) == ("a.jsonl", 1)
    from mintdim_beam.audit.verify import verify_output

    assert verify_output(str(work / name)).ok
    deep = verify_output(str(work / name), deep=2)  # no input files to re-read: said so
    assert ["no input files to re-read" in p.what for p in deep.problems] == [True]


def test_the_key_decides_the_sample_ids_not_the_order_rows_arrive(corpus):
    work, _ = corpus
    rows = file_rows(work)
    got, = build_from_rows(work, "reversed", IN_MEMORY, rows=rows[::-1], key_buckets=1)
    assert same_build(work, "reversed", "from_files") == []
    assert got["total_samples"] > 0


def test_rows_read_from_parquet_with_provenance_fields(corpus):
    """ReadFromParquet -> keyed by the row's own (file, line) columns, named as its
    provenance: the same build."""
    import apache_beam as beam
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild

    work, want = corpus
    rows = file_rows(work)
    table = pa.table({**{f: [r.get(f) for _, r in rows] for f in FIELDS},
                      "src": [k[0] for k, _ in rows], "ln": [k[1] for k, _ in rows]})
    pq.write_table(table, work / "rows.parquet", row_group_size=64)
    tokenize = TokenizeRecords(TOKENIZER, fields=FIELDS, template=TEMPLATE, build_batch=40,
                               provenance=("src", "ln"))
    with beam.Pipeline(options=PipelineOptions(IN_MEMORY)) as p:
        (p
         | beam.io.ReadFromParquet(str(work / "rows.parquet"))
         # a missing field comes back as None from Parquet: drop it, as the JSONL lacks it
         | beam.Map(lambda r: ((r["src"], r["ln"]), {k: v for k, v in r.items() if v is not None}))
         | tokenize
         | WriteUnitBuild(str(work / "parquet"), SIZES, tokenize=tokenize, samples_per_shard=70,
                          on_overflow="truncate", on_bad_row="skip"))
    # the one difference: the missing field's reason lists the row's keys, src and ln too
    assert same_build(work, "parquet", "from_files") == ["rejected_index.jsonl"]
    got, want = ([json.loads(line) for line in (work / name / "rejected_index.jsonl")
                  .read_text().splitlines()] for name in ("parquet", "from_files"))
    assert [{**row, "reason": ""} for row in got] == [{**row, "reason": ""} for row in want]
    assert "src, ln" in got[0]["reason"]


def test_a_repeated_key_stops_the_build_naming_it(tmp_path):
    from mintdim_beam.errors import RecordKeyError

    write_corpus(tmp_path)
    rows = file_rows(tmp_path)[:50]
    rows.append((rows[7][0], rows[9][1]))  # another row under the key of the eighth
    with pytest.raises(Exception) as caught:
        build_from_rows(tmp_path, "repeated", IN_MEMORY, rows=rows)
    from mintdim_beam.core.errors.failures import recover

    error = recover(caught.value)
    assert isinstance(error, RecordKeyError), caught.value
    assert error.kwargs["key"] == json.dumps(["a.jsonl", rows[7][0][1]])
    out = tmp_path / "repeated"
    assert not (out / "manifest.json").exists()
    notice = (out / "unit_64" / "UNIT_BUILD_FAILED.md").read_text()
    assert "RecordKeyError" in notice
    assert json.loads((out / "_mintdim_build.json").read_text())["state"] == "failed"


def test_keys_order_across_kinds_and_components():
    from mintdim_beam.records.keys import sort_key

    keys = [b"", b"\x00", b"a", "", "a", "a\x00", "ab", "é", -5, 0, 7, 1 << 40,
            ("a", 2), ("a", 10), ("a\x00", 1), ("b", "x"), ("b", -1)]
    assert sorted(keys, key=sort_key) == keys
    assert [sort_key(k) for k in keys] == sorted(sort_key(k) for k in keys)


def test_bad_arguments_are_refused_before_any_output(tmp_path):
    from mintdim_beam.errors import (RecordKeyError, TransformArgumentError,  # noqa: F401
                                     UnitValidationError, OutputValidationError)
    from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild
    import apache_beam as beam

    tokenize = TokenizeRecords(TOKENIZER, fields=FIELDS, template=TEMPLATE)
    with pytest.raises(TransformArgumentError):
        WriteUnitBuild(str(tmp_path / "o"), SIZES, tokenize="not a TokenizeRecords")
    with pytest.raises(TransformArgumentError):
        WriteUnitBuild(str(tmp_path / "o"), SIZES, tokenize=tokenize, on_overflow="prompt")
    p = beam.Pipeline()
    rows = p | beam.Create([(("a", 1), {"instruction": "x", "input": "", "output": "y"})])
    with pytest.raises(UnitValidationError):
        rows | "Bad units" >> WriteUnitBuild(str(tmp_path / "o"), [0, 64], tokenize=tokenize)
    assert not (tmp_path / "o").exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "somebody.txt").write_text("mine")
    with pytest.raises(OutputValidationError):
        rows | "Taken" >> WriteUnitBuild(str(tmp_path / "taken"), SIZES, tokenize=tokenize)
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["somebody.txt"]


def test_dialogues_split_into_records_give_the_file_build_bytes(tmp_path):
    """Chat rows whose extra turns split them into several records (the parts of one
    key), through the tokenizer's own chat template: the file build's bytes."""
    import shutil

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam import pipeline
    from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild
    from records_corpus import REPO

    chat = REPO / "examples/chat"
    for name in ("dialogues.jsonl", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(chat / name, tmp_path / name)
    source = {"format": "messages", "chat_template": "tokenizer", "max_turns": 1,
              "on_extra_turns": "split"}
    tokenizer = {"type": "hf_json", "files": [str(tmp_path / "tokenizer.json")],
                 "config": str(tmp_path / "tokenizer_config.json")}
    job = pipeline("unit-build").source.chat(files=[str(tmp_path / "dialogues.jsonl")], **source)
    job = job.tokenizer.hf_json(files=tokenizer["files"], config=tokenizer["config"]).units(
        sizes=[[128, 256, 512]], build_batch=[64]).output.dir(
        str(tmp_path / "from_files"), samples_per_shard=[100])
    want = job.run(on_overflow="truncate", on_template_unk="abort",
                   pipeline_options=list(IN_MEMORY))["outputs"][0]
    rows = [((str(tmp_path / "dialogues.jsonl"), n), json.loads(line)) for n, line in
            enumerate((tmp_path / "dialogues.jsonl").read_text().splitlines(), 1)
            if line.strip()]
    tokenize = TokenizeRecords(tokenizer, chat={"type": "chat", **source}, build_batch=64)
    with beam.Pipeline(options=PipelineOptions(IN_MEMORY)) as p:
        (p | beam.Create(rows) | tokenize
         | WriteUnitBuild(str(tmp_path / "rows"), [128, 256, 512], tokenize=tokenize,
                          samples_per_shard=100, on_overflow="truncate", key_buckets=2))
    assert same_build(tmp_path, "rows", "from_files") == []
    index = [json.loads(line) for line in
             (tmp_path / "rows" / "sample_index.jsonl").read_text().splitlines()]
    assert any(row.get("part", 0) > 0 for row in index)  # dialogues were split
    assert want["total_samples"] == len(index)


@pytest.fixture(scope="module")
def packed(corpus):
    work, _ = corpus
    return pack_from_files(work, "pack_from_files", IN_MEMORY)


@pytest.mark.parametrize("options", [IN_MEMORY, MULTI_PROCESS], ids=["in-process", "multi-process"])
def test_documents_keyed_by_file_and_line_give_the_file_pack_bytes(corpus, packed, options):
    """The same shuffle (the order hash of each document's file and line), shards, .idx,
    provenance CSV and datatrove index; the rejected row at its file and line."""
    from mintdim_beam.audit.verify import verify_output

    work, _ = corpus
    name = f"pack_rows_{len(options)}"
    got = pack_from_rows(work, name, options, key_buckets=None if len(options) > 1 else 2)
    assert same_pack(work, name, "pack_from_files") == []
    assert {**got, "output_dir": ""} == {**packed, "output_dir": ""}
    assert packed["shards"] == 3 and packed["rejected_rows"] == 2
    result = verify_output(str(work / name))
    assert result.ok, result.problems


def test_a_pack_verify_of_records_still_finds_a_wrong_row(corpus, packed, tmp_path):
    """The records mode of the pack verify is not blind: a provenance row moved out of
    the pack order is found."""
    import gzip
    import shutil

    from mintdim_beam.audit.verify import verify_output

    work, _ = corpus
    pack_from_rows(work, "pack_rows_check", IN_MEMORY)
    out = tmp_path / "pack"
    shutil.copytree(work / "pack_rows_check", out)
    csv = out / "shard_000000.csv.gz"
    rows = gzip.decompress(csv.read_bytes()).decode().splitlines()
    fields = rows[3].split(",")
    fields[4] = str(int(fields[4]) + 1)  # another line: another id and order key
    rows[3] = ",".join(fields)
    csv.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode(), mtime=0))
    result = verify_output(str(out))
    assert not result.ok
    assert any("shard_000000.csv.gz" == p.file for p in result.problems), result.problems


def test_bare_rows_give_bare_records_with_the_file_builds_ids(corpus):
    """TokenizeRecords alone, on dicts without keys: one record per row, its segments'
    ids those the file build wrote for the row (read back from its shards)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from conftest import shard_records
    from mintdim_beam.transforms import TokenizeRecords

    work, _ = corpus
    rows = [row for _, row in file_rows(work)[:160] if "output" in row]
    saved = work / "bare_records.jsonl"
    tokenize = TokenizeRecords(TOKENIZER, fields=FIELDS, template=TEMPLATE, build_batch=7)

    def save(records):
        from mintdim_beam.transforms import segment_ids

        saved.write_text("\n".join(json.dumps(
            {"hash": r["hash"], "lengths": r["lengths"],
             "ids": [s.tolist() for s in segment_ids(r)],
             "segments": list(r["segments"]), "kinds": list(r["kinds"])}) for r in records))

    with beam.Pipeline(options=PipelineOptions(IN_MEMORY)) as p:
        (p | beam.Create(rows) | tokenize | beam.combiners.ToList() | beam.Map(save))
    got = {r["hash"]: r for r in map(json.loads, saved.read_text().splitlines())}
    assert len(got) == len({json.dumps(r, sort_keys=True) for r in rows})  # one per distinct row
    _, built = shard_records(work / "from_files")
    by_hash = {row["hash"]: segments for row, segments in built if row["token_count"] <= 128}
    compared = 0
    for digest, record in got.items():
        if digest in by_hash and sum(record["lengths"]) <= 128:  # not truncated
            assert [len(s) for s in by_hash[digest]] == record["lengths"]
            assert by_hash[digest] == record["ids"]
            compared += 1
    assert compared > 40
    assert next(iter(got.values()))["kinds"][:2] == ["literal", "field"]


@pytest.mark.parametrize("element, says", [
    ((1.5, {"instruction": "x", "input": "", "output": "y"}), "not float"),
    ({"instruction": "x", "input": "", "output": "y"}, "(key, record) pairs"),
], ids=["float key", "no key"])
def test_a_key_no_order_takes_stops_the_build(tmp_path, element, says):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam.core.errors.failures import recover
    from mintdim_beam.errors import RecordKeyError
    from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild

    tokenize = TokenizeRecords(TOKENIZER, fields=FIELDS, template=TEMPLATE)
    with pytest.raises(Exception) as caught:
        with beam.Pipeline(options=PipelineOptions(IN_MEMORY)) as p:
            (p | beam.Create([element]) | tokenize
             | WriteUnitBuild(str(tmp_path / "out"), SIZES, tokenize=tokenize))
    error = recover(caught.value)
    assert isinstance(error, RecordKeyError) and says in error.kwargs["problem"], caught.value
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_retried_bundles_give_the_same_bytes(corpus, packed, tmp_path, monkeypatch):
    """Every first attempt of a tokenize, write and finalize bundle fails (a runner that
    retries them): the unit-build and the pack of records are still the file builds'
    bytes, with no failure notice left behind. The file build on that runner too: its
    rejected rows were once lost there (read as a side input straight from a
    multi-output step), and the build exited 0 with shifted ids."""
    from conftest import BUNDLE_RETRYING

    work, want = corpus
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MINTDIM_FAULTS", f"tokenize,write,finalize@{markers}")
    retried = build_from_files(work, "retried_files", BUNDLE_RETRYING)
    assert same_build(work, "retried_files", "from_files") == []
    assert {**retried, "output_dir": ""} == {**want, "output_dir": ""}
    got, = build_from_rows(work, "retried_units", BUNDLE_RETRYING)
    assert same_build(work, "retried_units", "from_files") == []
    assert {**got, "output_dir": ""} == {**want, "output_dir": ""}
    got = pack_from_rows(work, "retried_pack", BUNDLE_RETRYING)
    assert same_pack(work, "retried_pack", "pack_from_files") == []
    assert {**got, "output_dir": ""} == {**packed, "output_dir": ""}
    assert len(list(markers.iterdir())) > 2  # the faults were injected, and retried
    for name in ("retried_units", "retried_pack"):
        assert not [p for p in (work / name).rglob("*FAILED*")]
