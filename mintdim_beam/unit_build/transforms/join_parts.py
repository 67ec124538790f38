"""Between the part writers and Finalize: each index file's parts, in order, keyed by
(dataset, file name). Finalize joins them where they lie (`core.files.compose`), which
S3 allows only for parts of 5 MiB or more: on an `s3://` output the runs of smaller
parts (`compose.s3_runs`) are joined here first, each run by a worker of its own, so
no single step reads a corpus-sized file. Elsewhere the parts pass through as written.
"""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.files import checksums, compose, storage
from mintdim_beam.core.formats import mintdim as fmt

INDEX_NAMES = {"sample": fmt.SAMPLE_INDEX, "unk": fmt.UNK_INDEX, "lossy": fmt.LOSSY_INDEX}


def keyed_index_part(element):
    kind, chunk_key, path, summed = element
    return (chunk_key[0], INDEX_NAMES[kind]), (tuple(chunk_key[1:]), path, summed)


def keyed_duplicate_part(element):
    ds, part, path, _, _, summed = element
    return (ds, fmt.DUPLICATE_INDEX), ((part,), path, summed)


def runs_of(element, plans: dict):
    """(file, [(order, path, FileSum)]) -> (file, run number, [parts of the run]): one
    part a run, or on S3 the runs `compose.s3_runs` makes."""
    (ds, name), parts = element
    parts = sorted(parts, key=lambda part: part[0])
    if compose.protocol(plans[ds].dataset.output_path) == "s3":
        runs = compose.s3_runs([summed.size for _, _, summed in parts])
    else:
        runs = [[i] for i in range(len(parts))]
    for number, run in enumerate(runs):
        yield (ds, name), number, [parts[i] for i in run]


def join_run(paths: list[str], target: str, output_dir: str):
    """The parts joined into `target` through this worker: their FileSum, taken as the
    bytes pass (this is the one place a part's bytes are read back)."""
    summer = checksums.Summer()

    def chunks():
        for part in paths:
            data = storage.read_bytes(part)
            summer.update(data)
            yield data

    storage.write_stream_atomic(target, chunks(), output_dir)
    return summer.result()


class JoinRunFn(beam.DoFn):
    """A run of several parts -> one scratch part, summed as it is written (named by
    its place, so a retry rewrites the same file); a run of one passes as it is."""

    def __init__(self, plans: dict):
        self._plans = plans

    def process(self, element):
        (ds, name), number, run = element
        if len(run) == 1:
            yield (ds, name), number, run[0][1], run[0][2]
            return
        dataset = self._plans[ds].dataset
        path = storage.join(dataset.scratch_path, "parts", "joined", f"{name}-{number:09d}")
        summed = join_run([part for _, part, _ in run], path, dataset.output_path)
        yield (ds, name), number, path, summed


class PartsOfFiles(beam.PTransform):
    """(index parts, duplicate parts) -> ((dataset, file name), run number, path,
    FileSum): what Finalize joins, parts of one file numbered in their order."""

    def __init__(self, plans: dict):
        super().__init__()
        self._plans = plans

    def expand(self, pcolls):
        index_parts, dup_parts = pcolls
        return ((index_parts | "KeyIndexParts" >> beam.Map(keyed_index_part),
                 dup_parts | "KeyDuplicateParts" >> beam.Map(keyed_duplicate_part))
                | "AllParts" >> beam.Flatten()
                | "GroupByFile" >> beam.GroupByKey()
                | "Runs" >> beam.FlatMap(runs_of, self._plans)
                | "SpreadRuns" >> beam.Reshuffle()
                | "JoinRun" >> beam.ParDo(JoinRunFn(self._plans)))
