"""Trust and insight for finished and planned builds, from their own files: `verify`
and `report` decide in one place whether OUT is a unit-build (`unit_verify` with its
shard, index, dialogue, round-trip, checksum and deep checkers; `unit_report`) or a
pack-build (`pack_check`, `pack_report`); `plan` recommends the unit sizes that minimize
padding, from a Beam pass over the inputs.

Audit imports from `core`, `runtime` and both pipelines; nothing below imports audit."""
