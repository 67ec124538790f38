"""Trust and insight for finished and planned builds, from their own files: `verify`
(shard and index checks), `report` (report.md, figures, plot data) and `plan` (the unit
sizes that minimize padding, from a Beam pass over the inputs).

Audit imports from `core` and `build`; nothing below imports audit."""
