"""`python -m pipelines.unit_build [--config] CONFIG [beam flags]`: the same entry as
`mintdim-beam build`."""
import sys

from mintdim_beam.cli import main


def run(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--config"]:
        args = args[1:]
    elif args and args[0].startswith("--config="):
        args = [args[0].split("=", 1)[1]] + args[1:]
    return main(["build"] + args)


if __name__ == "__main__":
    sys.exit(run())
