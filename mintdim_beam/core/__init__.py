"""The shared core every capability builds on, with no Beam in it, one room per concern:
`config/` (configs validated, datasets prepared), `inputs/` (byte ranges, lines,
identities, compression), `render/` (field templates, batches rendered), `chat/`
(dialogues and preference pairs, pure), `tokenizer/` (adapters, special tokens, batch
encoding, the round trip, the tokenizer card), `formats/` (mintdim's shards and indices,
Megatron's indexed dataset, the pack order), `files/` (storage through fsspec,
ownership, checksums, disk space), `errors/` (bilingual errors, and failures carried
back from workers); `version` and `quiet_imports` beside them.

Core imports nothing from the floors above it."""
