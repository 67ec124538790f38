"""What `verify` proves about content: every file a build wrote still has the sha256
the manifest recorded when it was written (`core.files.checksums`). A changed token, two
swapped documents or a moved loss-mask boundary each change a byte, so each names its
file; the structural checks elsewhere cannot see them (the bytes still make sense).

A build without `checksums` in its manifest (mintdim 0.2.1's, or ours before 0.2.0)
passes on structure alone, and the summary says its content is not proven."""
from __future__ import annotations

from mintdim_beam.core.files import checksums
from mintdim_beam.core.formats import mintdim as fmt


class ChecksumChecks:
    """Mixin of the verifiers. Reads: p, fs, files, _path, result. Sets
    result.checksummed (files whose sum matched; None without checksums)."""

    def _checksums(self, manifest: dict, covered: set) -> None:
        """Recompute every recorded sum; `covered`: the files this kind of build writes
        a sum for, as found in OUT (one there without a sum is reported)."""
        block = manifest.get("checksums")
        if block is None:
            self.result.checksummed = None
            return
        problems = checksums.changed(block, lambda name: name in self.files,
                                     lambda name: self.fs.open(self._path(name), "rb"))
        for rel, what in problems:
            self.p.add(rel, None, what)
        listed = set(block.get("files") or {}) if isinstance(block, dict) else set()
        for rel in sorted(covered - listed - {fmt.MANIFEST}):
            self.p.add(rel, None, "not in the manifest's checksums: this build did not "
                       "write it")
        bad = {rel for rel, _ in problems}
        self.result.checksummed = len(listed - bad)
