"""`python -m pipelines.unit_build [--config] CONFIG [beam flags]`: the same entry as
`mintdim-beam build`, and what the Dataflow Flex Template runs. In the template launcher
(FLEX_TEMPLATE_PYTHON_PY_FILE is set there) it submits the job without waiting."""
import os
import sys

from mintdim_beam.cli import before_exit, main


def run(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("FLEX_TEMPLATE_PYTHON_PY_FILE") and "--no_wait" not in args:
        args.append("--no_wait")
    return main(["build"] + args)


if __name__ == "__main__":
    code = run()
    before_exit()
    sys.exit(code)
