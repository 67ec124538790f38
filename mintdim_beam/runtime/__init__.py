"""The runtime under both pipelines (unit-build and pack-build): pipeline options and
the default local run (`options`, `local_default`), signals and failure notices
(`signals`), what a launch knows before Beam loads (`run_shape`), live progress and
Beam counters (`progress`), helper encoder processes (`encoder_process`), the transforms
both graphs use (`first_error`, `apply_to_all`), the heap and sampler tuning
(`frozen_heap`, `sampler_period`) and test-only fault injection (`faults`).

Imports `core` only; neither pipeline is imported here. This file imports nothing: a
helper encoder process (`python -m mintdim_beam.runtime.encoder_process`) must start
without Beam."""
