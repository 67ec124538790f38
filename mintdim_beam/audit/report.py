"""`mintdim-beam report OUT [--dest DIR]`: a finished build described from its own files.
One place decides which report describes OUT: a trained tokenizer's or a pack-build's
(its manifest.json says so: `tokenizer_report`, `pack_report`) or a unit-build's
(`unit_report`)."""
from __future__ import annotations

import sys

from mintdim_beam.audit.not_a_build import NotABuildError, check_is_build
from mintdim_beam.audit.pack_report import is_pack_build, write_pack_report
from mintdim_beam.audit.report_common import REPORT_MD, ReportInputError
from mintdim_beam.audit.tokenizer_report import is_trained_tokenizer, write_tokenizer_report
from mintdim_beam.audit.unit_report import write_unit_report
from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.files import storage


def write_report(out: str, dest: str | None = None) -> dict:
    """Write the report of the build in `out` into `dest` (default OUT/report) and
    return its figures, `dest` and `files` (`unit_report.write_unit_report`,
    `pack_report.write_pack_report`); `NotABuildError` for a directory no build wrote."""
    check_is_build(out)
    if is_trained_tokenizer(out):
        return write_tokenizer_report(out, dest)
    if is_pack_build(storage.resolve(out)):
        return write_pack_report(out, dest)
    return write_unit_report(out, dest)


def report_command(args) -> int:
    try:
        result = write_report(args.out, getattr(args, "dest", None))
    except NotABuildError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    except MintDimError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except (ReportInputError, ValueError, KeyError) as exc:
        print(f"report: cannot read the build at {args.out}: {exc!r}", file=sys.stderr)
        return 1
    print(f"report: {result['report']}")
    print(f"figures and plot data: {result['dest']} "
          f"({', '.join(n for n in result['files'] if n != REPORT_MD)})")
    return 0
