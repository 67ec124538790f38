"""What `verify` proves about content: every file a build wrote still has the sha256
the manifest recorded when it was written (`core.files.checksums`). A changed token, two
swapped documents or a moved loss-mask boundary each change a byte, so each names its
file; the structural checks elsewhere cannot see them (the bytes still make sense).

A build without `checksums` in its manifest (mintdim 0.2.1's, or ours before 0.2.0)
passes on structure alone, and the summary says its content is not proven."""
from __future__ import annotations

from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt


class ChecksumChecks:
    """Mixin of the verifiers. Reads: p, fs, files, _path, result. Sets
    result.checksummed (files whose sum matched; None without checksums)."""

    runner_options = None  # `verify --runner`: the proof runs there (`cluster_verify`)

    def _checksums(self, manifest: dict, covered: set) -> None:
        """Recompute every recorded sum; `covered`: the files this kind of build writes
        a sum for, as found in OUT (one there without a sum is reported)."""
        block = manifest.get("checksums")
        if block is None:
            self.result.checksummed = None
            return
        exists = lambda name: name in self.files  # noqa: E731
        open_file = lambda name: self.fs.open(self._path(name), "rb")  # noqa: E731
        if self.runner_options is None:
            problems = checksums.changed(block, exists, open_file)
        else:
            from mintdim_beam.audit.cluster_verify import prove_on_runner
            from mintdim_beam.runtime.options import runner_name

            problems, self.result.tasks = prove_on_runner(
                storage.resolve(self.out), block, exists, open_file, self.runner_options)
            self.result.runner = runner_name(self.runner_options)
        for rel, what in problems:
            self.p.add(rel, None, what)
        listed = set(block.get("files") or {}) if isinstance(block, dict) else set()
        for rel in sorted(covered - listed - {fmt.MANIFEST}):
            self.p.add(rel, None, "not in the manifest's checksums: this build did not "
                       "write it")
        bad = {rel for rel, _ in problems}
        self.result.checksummed = len(listed - bad)
