"""A failed unit-build's notices: the scratch files go, no manifest stays, every unit
dir says why in UNIT_BUILD_FAILED.md and the ownership marker says the build failed.
Written by the launcher, or by Finalize itself in a user's pipeline
(`transforms.WriteUnitBuild`), where no launcher waits for the job."""
from __future__ import annotations

from mintdim_beam.core.files import storage
from mintdim_beam.core.formats import mintdim as fmt


def write_failure_notices(plans, reason: str, claim, log) -> None:
    """Scratch first (a full disk needs the room), then no manifest, then a notice in
    every unit dir, then the marker says the build failed."""
    for plan in plans.values():
        out = plan.dataset.output_path
        steps = (("remove scratch files", lambda: storage.remove_tree(storage.tmp_dir(out))),
                 ("remove manifest.json", lambda: remove_manifest(out)),
                 ("write UNIT_BUILD_FAILED.md", lambda: unit_notices(plan, reason)),
                 ("mark the build failed", lambda: claim.fail(out, reason)))
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - never hide the build's own error
                log(f"warning: could not {what} in {plan.dataset.output_given}: "
                    f"{str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}")


def remove_manifest(out: str) -> None:
    manifest = storage.join(out, fmt.MANIFEST)
    if storage.exists(manifest):
        storage.filesystem(manifest).rm(manifest)


def unit_notices(plan, reason: str) -> None:
    out = plan.dataset.output_path
    sizes = set(plan.dataset.sizes)
    for name in storage.list_dir(out):
        base = name.rstrip("/").rsplit("/", 1)[-1]
        if base.startswith("unit_") and base[5:].isdigit():
            sizes.add(int(base[5:]))
    for size in sorted(sizes):
        unit = storage.join(out, fmt.unit_dir(size))
        storage.write_text_atomic(storage.join(unit, fmt.FAILED_UNIT),
                                  fmt.failed_unit_notice(size, reason), out, scratch=unit)
