"""A small corpus built twice: from its files by the launcher, and as rows in a user's
Beam pipeline through `mintdim_beam.transforms` with keys (file, line); shared by the
in-process and multi-process tests (`test_records_transforms`) and Prism's
(`tests_cluster/test_prism`)."""
import json
import os
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOKENIZER = {"type": "sentencepiece", "files": [str(REPO / "examples/tokenizer/demo.model")]}
FIELDS = ["instruction", "input", "output"]
TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"
SIZES = [64, 128]
FILES = ("a.jsonl", "b.jsonl")


def write_corpus(work: Path) -> None:
    """Two files of the bundled instructions: blank lines (lines are not row numbers),
    rows over the largest unit (truncated), repeated rows (duplicate groups), empty
    fields, and one row without `output` (rejected under on_bad_row=skip)."""
    rows = [json.loads(line) for line in
            (REPO / "examples/data/instructions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    rng = random.Random(3)
    for n, name in enumerate(FILES):
        lines = []
        for row in rows[n * 150:(n + 1) * 150]:
            lines.append(json.dumps(row, ensure_ascii=False))
            if rng.random() < 0.1:
                lines.append("")  # a blank line takes no sample
            if rng.random() < 0.05:
                lines.append(json.dumps(row, ensure_ascii=False))  # a duplicate
        lines.insert(40, json.dumps({"instruction": "no output here", "input": ""}))
        (work / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def file_rows(work: Path):
    """((file, line), row) of every non-blank line, as the build numbers its lines."""
    out = []
    for name in FILES:
        for line, text in enumerate((work / name).read_text(encoding="utf-8").splitlines(), 1):
            if text.strip():
                out.append(((name, line), json.loads(text)))
    return out


def build_from_files(work: Path, output: str, options) -> dict:
    from mintdim_beam import pipeline

    previous = os.getcwd()
    os.chdir(work)
    try:
        job = pipeline("unit-build").source.jsonl(files=list(FILES), fields=[FIELDS],
                                                  templates=[TEMPLATE])
        job = job.tokenizer.sentencepiece(files=TOKENIZER["files"]).units(
            sizes=[SIZES], build_batch=[40]).output.dir(output, samples_per_shard=[70])
        return job.run(on_overflow="truncate", on_template_unk="continue",
                       on_bad_row="skip", pipeline_options=list(options))["outputs"][0]
    finally:
        os.chdir(previous)


def build_from_rows(work: Path, output: str, options, rows=None, key_buckets: int = 3) -> list:
    """The same build in a user's pipeline; returns the summaries the sink gave."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild

    rows = file_rows(work) if rows is None else rows
    summaries = work / f"{output}.summary.jsonl"
    tokenize = TokenizeRecords(TOKENIZER, fields=FIELDS, template=TEMPLATE, build_batch=40)
    with beam.Pipeline(options=PipelineOptions(list(options))) as p:
        summary = (p
                   | "Rows" >> beam.Create(rows)
                   | "Tokenize" >> tokenize
                   | "Write" >> WriteUnitBuild(str(work / output), SIZES, tokenize=tokenize,
                                               samples_per_shard=70, on_overflow="truncate",
                                               on_bad_row="skip", key_buckets=key_buckets))
        summary | "Save" >> beam.Map(lambda s: summaries.write_text(json.dumps(s)))
    return [json.loads(summaries.read_text())]


def same_build(work: Path, got: str, want: str) -> list:
    """The files that differ between two builds, beyond the manifest's source and our
    own keys (a keyed build has no input files) and the part tables (how the workers cut
    the index files)."""
    from conftest import reference_manifest

    differ = []
    trees = []
    for name in (got, want):
        root = work / name
        trees.append({str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                      if p.is_file() and p.relative_to(root).parts[0] != "checksums"})
    a, b = trees
    if sorted(a) != sorted(b):
        return [f"files: {sorted(set(a) ^ set(b))}"]
    for name in a:
        if name == "manifest.json":
            ma, mb = (reference_manifest(json.loads(t[name])) for t in (a, b))
            ma["source"].pop("files"), mb["source"].pop("files")
            if ma != mb:
                differ.append(name)
        elif a[name] != b[name]:
            differ.append(name)
    return differ


PACK_TOKENIZER = {"type": "hf_json", "files": [str(REPO / "examples/chat/tokenizer.json")],
                  "config": str(REPO / "examples/chat/tokenizer_config.json")}
PACK_TEMPLATE = "{instruction}\n\n{input}\n\n{output}"


def pack_from_files(work: Path, output: str, options) -> dict:
    from mintdim_beam import pipeline

    previous = os.getcwd()
    os.chdir(work)
    try:
        job = pipeline("pack-build").source.jsonl(files=list(FILES), fields=[FIELDS],
                                                  templates=[PACK_TEMPLATE])
        job = job.tokenizer.hf_json(files=PACK_TOKENIZER["files"],
                                    config=PACK_TOKENIZER["config"])
        job = job.pack(seed=5, shard_tokens=12000).output.dir(output)
        return job.run(on_bad_row="skip", pipeline_options=list(options))
    finally:
        os.chdir(previous)


def pack_from_rows(work: Path, output: str, options, rows=None, key_buckets=None) -> dict:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from mintdim_beam.transforms import TokenizeRecords, WritePackBuild

    rows = file_rows(work) if rows is None else rows
    saved = work / f"{output}.summary.json"
    tokenize = TokenizeRecords(PACK_TOKENIZER, fields=FIELDS, template=PACK_TEMPLATE,
                               documents=True, build_batch=50)
    with beam.Pipeline(options=PipelineOptions(list(options))) as p:
        summary = (p | "Rows" >> beam.Create(rows) | "Documents" >> tokenize
                   | "Pack" >> WritePackBuild(str(work / output), tokenize=tokenize, seed=5,
                                              shard_tokens=12000, on_bad_row="skip",
                                              key_buckets=key_buckets))
        summary | "Save" >> beam.Map(lambda s: saved.write_text(json.dumps(s)))
    return json.loads(saved.read_text())


def same_pack(work: Path, got: str, want: str) -> list:
    """The files that differ between two packs beyond the manifest's sources and our
    keys (a keyed pack has no input files) and the sequences file (it names its dir)."""
    trees = []
    for name in (got, want):
        root = work / name
        trees.append({str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                      if p.is_file()})
    a, b = trees
    if sorted(a) != sorted(b):
        return [f"files: {sorted(set(a) ^ set(b))}"]
    differ = []
    for name in a:
        if name == "manifest.json":
            ma, mb = (json.loads(t[name]) for t in (a, b))
            for doc in (ma, mb):
                for key in ("source", "sources", "inputs", "build_config", "checksums"):
                    doc.pop(key, None)
                doc["tokenizer"]["engine"].pop("why")  # the file build's counts its sample
            if ma != mb:
                differ.append(name)
        elif name != "per_dataset_sequences.json" and a[name] != b[name]:
            differ.append(name)
    return differ
