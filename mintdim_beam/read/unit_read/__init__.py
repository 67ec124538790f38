"""`pipeline("unit-read")`, mintdim 0.2.1's reader of unit shards, compatible call for
call: `config` validates (same rules, order and error classes, text in both languages),
`files` and `metadata` find shards and their `length_field.json` (local or fsspec URLs),
`shards` maps and checks records, `queue` plans rows per read (wrap-around included),
`pipeline` builds the batch. The mask is the one deliberate difference (see
`pipeline`). For training runs use `UnitReader` instead: it shuffles, shards over ranks
and resumes.

Imports `core` and `read.masks` only."""
from mintdim_beam.read.unit_read.pipeline import UnitBatch, UnitReadPipeline
from mintdim_beam.read.unit_read.queue import SourceSpan

__all__ = ["SourceSpan", "UnitBatch", "UnitReadPipeline"]
