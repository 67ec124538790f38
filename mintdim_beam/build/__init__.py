"""The unit-build on Apache Beam: the graph (`graph`), the launcher (`launch`: validate,
claim the outputs, run, turn failures into notices), pipeline options (`options`), unit
assignment and overflow policies (`units`, `prompts`), one PTransform per stage
(`transforms/`), and what makes a local run fast: helper encoder processes
(`encoder_process`), the default run known before Beam loads (`local_default`), the
frozen heap and the sampler period.

Build imports from `core`, never from `audit`. This file imports nothing: a helper
encoder process (`python -m mintdim_beam.build.encoder_process`) must start without Beam."""
