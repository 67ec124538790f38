"""Whether a directory is a build at all, decided from its top level before `verify` or
`report` reads anything in it.

Why: both walk every file of a build. Pointed at something else (`verify /tmp`) that
walk took 21 s and ended in one line naming 200 unrelated folders. A folder holding
none of what a build writes is refused at once instead (exit 2)."""
from __future__ import annotations

from mintdim_beam.core.files import ownership, storage
from mintdim_beam.core.formats import mintdim as fmt

SHOWN = 5  # foreign names a refusal lists


class NotABuildError(ValueError):
    """OUT is not the output of a mintdim-beam build (nor an interrupted or failed one)."""


def check_is_build(out: str) -> None:
    """Raise `NotABuildError` unless `out` holds a manifest, an ownership marker, a
    failure notice of ours, or only files our builds write."""
    if not storage.is_dir(out):
        raise NotABuildError(f"{out} is not a mintdim-beam output: "
                             f"{'it is a file' if storage.is_file(out) else 'it does not exist'}")
    contents = ownership.inspect(out)
    if contents.empty:
        raise NotABuildError(f"{out} is not a mintdim-beam output: it is empty")
    if fmt.MANIFEST in contents.names or contents.marker is not None or contents.notices \
            or contents.ours:
        return
    top = storage.join(out, "")
    shown = [p[len(top):] if p.startswith(top) else p for p in contents.foreign[:SHOWN]]
    more = len(contents.foreign) - len(shown)
    raise NotABuildError(
        f"{out} is not a mintdim-beam output: it holds no {fmt.MANIFEST}, no "
        f"{ownership.MARKER} and no failure notice, and "
        f"{len(contents.foreign):,} entr{'y' if len(contents.foreign) == 1 else 'ies'} no build "
        f"writes ({', '.join(shown)}{f', and {more:,} more' if more > 0 else ''})")
