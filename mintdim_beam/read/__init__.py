"""Reading a finished unit-build back for training, numpy only (no Beam, no framework).

`UnitReader` (`reader`) yields one unit per step, this rank's contiguous slice of the
global batch, in an order that is a pure function of (seed, epoch, step), so
`state_dict()` is a few numbers and resuming (also with another world size) is
arithmetic. The pieces: `build` finds a build's units, shards and sample ids from its
own files and reads records (local shards memory-mapped, any fsspec URL by byte ranges
through `core.files.storage`), checking each record's magic and segment lengths; `order`
holds the pure shuffle and step arithmetic; `masks` turns segment lengths into labels,
attention masks and preference pairs (never looking at `pad_id`); `packing` plans
packed steps (`pack_length`: whole records of any units in rows of one length) as pure
functions of (seed, epoch) and the records' lengths, and `packed` fills a step's rows;
`checks` validates arguments and states; `pack_reader` reads pack-build output
(`PackReader`: Megatron GPTDataset samples, seeded, ranked, resumable); `blend` and
`blended` read several builds as one by weight (megatron-core's rule). `cache` keeps
what the readers need of every record (`facts`: token counts, sample ids) and each
epoch's orders and plans as `.npy` files written once and memory-mapped, as
megatron-core's index cache does, so a rank's memory does not grow with the build;
`batch` is a step's arrays.

Imports only `core`."""
from mintdim_beam.read.blended import BlendedPackReader, BlendedUnitReader
from mintdim_beam.read.pack_reader import PackBatch, PackReader
from mintdim_beam.read.reader import Batch, UnitReader

__all__ = ["Batch", "PackBatch", "PackReader", "UnitReader", "BlendedPackReader",
           "BlendedUnitReader"]
