"""pack-build: JSONL documents into one globally shuffled token stream in Megatron's
indexed-dataset layout (`.bin` + `.idx` per shard, a gzip provenance CSV beside each),
as a Beam pipeline.

The stages (`graph`): `tokenize` reads byte ranges, renders each line's template and
tokenizes the text, writing each range's tokens to scratch; `order` gives every
document its seeded hash once line numbers are known (`core.formats.doc_order`), rewrites each
range's tokens in hash order and counts tokens per hash bucket; the bucket counts cut
the hash space into shards of about `shard_tokens`; `slices` tells each shard which
rows of each range it holds; `write` merges a shard's slices by hash and writes its
three files; `finalize` writes the sequence counts and `manifest.json` last. Only
handles and counts cross the global steps, never tokens. `launch` validates, claims
the output and runs it.

Imports `core` and `runtime` (options, signals, progress, shared transforms), never
`unit_build` or `audit`."""
