"""One PTransform per pipeline stage; `build.py` wires them together."""
