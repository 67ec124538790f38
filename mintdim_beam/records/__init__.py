"""Records of a user's own Beam pipeline into our builds (`mintdim_beam.transforms`):
the settings the transforms validate (`settings`), sort keys and sources (`keys`),
rows to tokenized records (`tokenize`), keyed records to the ordered batches the
writing half of a unit-build takes (`order`), and the sink (`write_units`).

Imports `core`, `runtime` and `unit_build`'s graph; nothing imports it but
`transforms`."""
