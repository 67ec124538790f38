"""The pack-build pipeline graph:

Ranges -> Tokenize -> (line counts -> numbering) -> Order -> (bucket tokens -> shard
cuts) -> Slices -> GroupByShard -> WriteShard; errors and every shard into Finalize."""
from __future__ import annotations

import apache_beam as beam

from mintdim_beam.core.config.bad_rows import BadRows
from mintdim_beam.core.formats import doc_order
from mintdim_beam.core.inputs.input_files import entries_by_dataset
from mintdim_beam.core.inputs.source import number_ranges
from mintdim_beam.pack_build.finalize import finalize
from mintdim_beam.pack_build.order import BucketTokens, OrderRangeFn, SliceRangeFn
from mintdim_beam.pack_build.tokenize import COUNTS, ERRORS, TokenizeRangeFn
from mintdim_beam.pack_build.write import WriteShardFn
from mintdim_beam.runtime.apply_to_all import ApplyToAll
from mintdim_beam.runtime.first_error import FirstError
from mintdim_beam.runtime.rejected_rows import split_rejected
from mintdim_beam.runtime.options import is_single_process, max_line_bytes
from mintdim_beam.runtime.planned_ranges import INPUTS, Ranges


def expand_pack_build(p, plan, ranges, rows: BadRows = BadRows()):
    """Add the whole pack-build to pipeline `p`; returns the finalized output dir: our
    reader and tokenizer, then `write_pack`, the writing half that
    `transforms.WritePackBuild` applies to a user's keyed records.
    `rows`: the bad-row policy (under `skip` bad rows leave the errors for
    `rejected_index.jsonl`)."""
    config = plan.config
    planned = p | "Ranges" >> Ranges(ranges, spread=not is_single_process(p.options))
    tokenized = planned["ranges"] | "Tokenize" >> beam.ParDo(
        TokenizeRangeFn(plan, max_line_bytes(p.options))).with_outputs(COUNTS, ERRORS,
                                                                       main="parts")
    errors, rejected = split_rejected(p, tokenized[ERRORS], {0} if rows.skip else set())
    numbering = tokenized[COUNTS] | "NumberLines" >> ApplyToAll(
        lambda counts, gone: number_ranges([config], dict(counts), gone),
        beam.pvalue.AsList(rejected))
    return write_pack(p, plan, rows, {"parts": tokenized.parts, "numbering": numbering,
                                      "errors": errors, "rejected": rejected,
                                      "inputs": planned[INPUTS]})


def write_pack(p, plan, rows: BadRows, found: dict, claim=None):
    """Order -> (bucket tokens -> shard cuts) -> Slices -> GroupByShard -> WriteShard ->
    Finalize, from what the reading half `found`: each range's `RangePart`, the
    numbering, pending errors, rejected rows and the inputs' manifest entries. `claim`:
    the `Claim` Finalize marks failed when the build stops (a user's pipeline has no
    launcher to do it)."""
    config, numbering = plan.config, found["numbering"]
    parts = found["parts"] | "Parts" >> beam.Map(lambda part: part)
    ordered = parts | "Order" >> beam.ParDo(OrderRangeFn(plan),
                                            beam.pvalue.AsSingleton(numbering))
    shard_tokens = config.shard_tokens
    cuts = (ordered
            | "BucketTokens" >> beam.CombineGlobally(BucketTokens())
            | "CutShards" >> beam.Map(doc_order.shard_of_bucket, shard_tokens))
    shards = (ordered
              | "Slices" >> beam.ParDo(SliceRangeFn(), beam.pvalue.AsSingleton(cuts))
              | "GroupByShard" >> beam.GroupByKey()
              | "WriteShard" >> beam.ParDo(WriteShardFn(plan)))
    error = found["errors"] | "FirstError" >> FirstError({0: config}, numbering)
    return shards | "Finalize" >> ApplyToAll(
        lambda written, err, all_parts, gone, num, inputs: finalize(
            written, err, all_parts, plan, entries_by_dataset(inputs).get(0, []), rows,
            gone, num, claim),
        beam.pvalue.AsSingleton(error), beam.pvalue.AsList(parts),
        beam.pvalue.AsList(found["rejected"]), beam.pvalue.AsSingleton(numbering),
        beam.pvalue.AsList(found["inputs"]))
