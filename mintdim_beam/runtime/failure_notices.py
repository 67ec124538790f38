"""What a failed run of a one-directory pipeline (pack-build, train-tokenizer) leaves:
its scratch removed, no manifest, its failure notice (our prose, which `clean` trusts)
and its ownership marker marked failed. Each step is tried whatever the others did: a
notice that cannot be written must never hide the run's own error."""
from __future__ import annotations

from mintdim_beam.core.files import storage


def leave_failure_notices(out: str, given: str, reason: str, notice: str, text: str,
                          manifest: str, claim, log) -> None:
    """`out` (resolved, `given` as written) of a run that failed for `reason`: write
    `notice` holding `text`; `manifest`: the name the run's manifest would have;
    `claim`: the run's `ownership.Claim`; `log(line)` says what could not be done."""
    def remove_manifest():
        path = storage.join(out, manifest)
        if storage.exists(path):
            storage.filesystem(path).rm(path)

    steps = (("remove scratch files", lambda: storage.remove_tree(storage.tmp_dir(out))),
             (f"remove {manifest}", remove_manifest),
             (f"write {notice}", lambda: storage.write_text_atomic(
                 storage.join(out, notice), text, out, scratch=out)),
             ("mark the run failed", lambda: claim.fail(out, reason)))
    for what, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - never hide the run's own error
            log(f"warning: could not {what} in {given}: {exc}")
