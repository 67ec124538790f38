"""The export pipeline: Tasks -> Spread -> WritePart (one part file per task, summed as
written) -> Finalize (MDS's index.json, the dataset card, the manifest last).

A task's part depends only on the build, the task's range and the settings, so the
same bytes come out on every runner, worker count and retry."""
from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam

from mintdim_beam.core.files import checksums, storage
from mintdim_beam.export import rows as export_rows
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.faults import BundleFaults, maybe_fail


@dataclass(frozen=True)
class Part:
    number: int
    name: str
    rows: int
    size: int
    sha256: str
    mds_config: dict | None


def writer(fmt: str):
    if fmt == "parquet":
        from mintdim_beam.export import parquet_out as module
    elif fmt == "hdf5":
        from mintdim_beam.export import hdf5_out as module
    else:
        from mintdim_beam.export import mds_out as module
    return module


class WritePartFn(beam.DoFn):
    def __init__(self, plan):
        self._plan = plan
        self._faults = BundleFaults("write")

    def setup(self):
        self._source = self._plan.open_source()

    def start_bundle(self):
        self._faults.start_bundle()

    def process(self, task):
        plan = self._plan
        if task.kind == "records":
            cols = export_rows.records(self._source, export_rows.index_lines(
                plan.build_path, task.start, task.end), plan.targets, plan.chosen,
                plan.ignore_id)
        elif task.kind == "packed":
            cols = export_rows.packed_rows(self._source, task.start, task.end)
        else:
            cols = export_rows.samples(self._source, task.start, task.end)
        module = writer(plan.format)
        data = module.encode(cols)
        name = module.name(task.number, plan.parts)
        summed = checksums.write(storage.join(plan.out_path, name), data, plan.out_path)
        self._faults.check(task.number)
        yield Part(task.number, name, cols.rows, summed.size, summed.sha256,
                   module.config(cols) if plan.format == "mds" else None)


def expand_export(p, plan, finalize):
    """Add the export to `p`; `finalize(parts)` runs once every part is written."""
    return (p
            | "Tasks" >> beam.Create(plan.tasks, reshuffle=False)
            | "Spread" >> beam.Reshuffle()
            | "WritePart" >> beam.ParDo(WritePartFn(plan))
            | "Finalize" >> ApplyToAll(lambda parts: finalize(parts, plan)))


def after_finalize_fault() -> None:
    maybe_fail("finalize", "export")
