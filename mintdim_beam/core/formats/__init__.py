"""The binary formats, each written in one place: mintdim's unit shards, indices and
summaries (`mintdim`), Megatron's indexed dataset (`megatron`) and the pack-build's
document order (`doc_order`)."""
