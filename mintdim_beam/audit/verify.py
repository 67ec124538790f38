"""`mintdim-beam verify OUT`: a finished build checked from its own files. One place
decides which checker reads OUT: a trained tokenizer's or a pack-build's (its
manifest.json says so: `tokenizer_check`, `pack_check`) or a unit-build's
(`unit_verify`)."""
from __future__ import annotations

from mintdim_beam.audit.deep_check import DEFAULT_SAMPLES
from mintdim_beam.audit.not_a_build import NotABuildError, check_is_build
from mintdim_beam.audit.pack_check import is_pack_output, verify_pack
from mintdim_beam.audit.tokenizer_check import manifest_of, verify_tokenizer
from mintdim_beam.audit.unit_verify import Verifier
from mintdim_beam.audit.verify_result import VerifyResult


def verify_output(out: str, max_problems: int = 50, deep: int = 0,
                  runner_options=None) -> VerifyResult:
    """Check a finished build in `out` (local path or fsspec URL) from its own files; a
    pack-build (its manifest.json says so) is checked by `mintdim_beam.audit.pack_check`.
    `deep`: also re-tokenize that many sampled records' source lines (`deep_check`).
    `runner_options` (Beam's): prove the content on that runner's workers, in parallel
    (`cluster_verify`); the records' structure is then left to the local verify.
    Raises `NotABuildError` for a directory that no build wrote, before reading it."""
    check_is_build(out)
    if manifest_of(out) is not None:
        return verify_tokenizer(out, max_problems)
    if is_pack_output(out):
        return verify_pack(out, max_problems, deep, runner_options)
    verifier = Verifier(out, max_problems, deep)
    verifier.runner_options = runner_options
    return verifier.run()


def verify_command(args, beam_flags=()) -> int:
    """`mintdim-beam verify OUT [--max-problems N] [--deep [--deep-samples N]] [Beam
    flags, --runner=...]`: 0 when clean, 1 otherwise, 2 when OUT is not a build or a
    flag is wrong."""
    limit = getattr(args, "max_problems", None)
    deep = getattr(args, "deep_samples", DEFAULT_SAMPLES) if getattr(args, "deep", False) else 0
    options = None
    if beam_flags:
        from mintdim_beam.core.errors import PipelineValidationError
        from mintdim_beam.runtime.options import make_options

        if deep:
            print("verify: --deep re-tokenizes on this machine; give it without Beam flags")
            return 2
        try:
            options = make_options(list(beam_flags))
        except PipelineValidationError as exc:
            print(f"verify: {exc}")
            return 2
    try:
        result = verify_output(args.out, 50 if limit is None else limit, deep, options)
    except NotABuildError as exc:
        print(f"verify: {exc}")
        return 2
    except OSError as exc:
        print(f"verify {args.out}: cannot read the output: {exc}")
        return 1
    print(result.summary())
    for name, status in result.inputs:
        print(f"  input {name}: {status}")
    if result.ok:
        return 0
    for problem in result.problems:
        print(f"  {problem}")
    if result.problem_count > len(result.problems):
        print(f"  ... and {result.problem_count - len(result.problems)} more (--max-problems)")
    return 1
