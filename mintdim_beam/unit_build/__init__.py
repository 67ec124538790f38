"""unit-build on Apache Beam: each sample in the smallest fixed-width unit that holds it.
The graph (`graph`), the launcher (`launch`: validate, claim the outputs, resolve
prompts, run, turn failures into notices), unit assignment and overflow policies
(`units`, `prompts`, `packed`), and one PTransform per stage (`transforms/`).

Imports `core` and `runtime`, never `pack_build` or `audit`."""
