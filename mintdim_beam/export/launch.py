"""`mintdim-beam export BUILD --format parquet | hdf5 | mds --out DIR`: a finished build
(unit-build records, or packed rows at `--pack-length`; pack-build samples of
`--seq-len`) written for another trainer's reader by a Beam pipeline, one task per range
of the build.

Before any output: every setting is checked (its own error classes) and the build
passes `verify` (its checksums and structure; on the runner's workers with Beam flags,
`verify --runner`). The output directory is claimed as a build's is; the parts are
written under temporary names and renamed, and `manifest.json` (the build's fingerprint
and checksums, the settings, every file's sha256) comes last, so an interrupted export
leaves `EXPORT_FAILED.md` and no manifest, for `mintdim-beam clean`."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from mintdim_beam.core.errors import ExportInputError, ExportValidationError
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.files.ownership import (EXPORT_FAILED, Claim, Heartbeat, check_free,
                                               new_run_id, release)
from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.version import __version__
from mintdim_beam.export.rows import Task
from mintdim_beam.runtime.failure_notices import leave_failure_notices
from mintdim_beam.runtime.progress import say
from mintdim_beam.runtime.run_shape import RunShape
from mintdim_beam.runtime.signals import failed_build, received

FORMATS = ("parquet", "hdf5", "mds")
MANIFEST = "manifest.json"
CARD = "README.md"
DEFAULT_PART_BYTES = 16 << 20  # of sample_index.jsonl a records part covers: ~100k rows
DEFAULT_PART_ROWS = 65_536  # packed rows or samples a part holds


def log(message: str) -> None:
    say(f"[export] {message}")


@dataclass(frozen=True)
class ExportPlan:
    build_given: str
    build_path: str
    kind: str  # unit-build | pack-build
    what: str  # records | pairs | packed | samples
    format: str
    out_given: str
    out_path: str
    tasks: tuple = ()
    parts: int = 0
    pack_length: int | None = None
    seq_len: int | None = None
    seed: int = 0
    ignore_id: int = -100
    targets: object = None  # bool per segment (records)
    chosen: int | None = None  # the chosen segment (pairs)
    target: tuple | None = None
    cache_dir: str | None = None
    rows: int = 0
    build_manifest: dict = field(default_factory=dict, compare=False)

    def open_source(self):
        """What a task reads: the build, a packed UnitReader or a PackReader."""
        if self.what == "samples":
            from mintdim_beam.read.pack_reader import PackReader

            return PackReader(self.build_path, self.seq_len, seed=self.seed,
                              cache_dir=self.cache_dir)
        if self.what == "packed":
            from mintdim_beam.read.reader import UnitReader

            return UnitReader(self.build_path, tokens_per_step=self.pack_length,
                              pack_length=self.pack_length, seed=self.seed,
                              target=list(self.target) if self.target else None,
                              ignore_id=self.ignore_id, cache_dir=self.cache_dir)
        from mintdim_beam.read.build import open_build

        return open_build(self.build_path, self.cache_dir)


def _bad(component: str, rule: str, value) -> ExportValidationError:
    return ExportValidationError(component=component, rule=rule, value=repr(value))


def _positive(name: str, value) -> int:
    if type(value) is not int or value <= 0:
        raise _bad(name, "positive", f"{name} ({value!r})")
    return value


def plan_export(build: str, format: str, out: str, *, pack_length=None, seq_len=None,
                seed: int = 0, target=None, ignore_id: int = -100, part_rows=None,
                part_bytes=None, cache_dir=None) -> ExportPlan:
    """Every setting checked and the tasks planned, nothing written."""
    if format not in FORMATS:
        raise _bad("--format", "format", format)
    if format == "hdf5":
        try:
            import h5py  # noqa: F401
        except ImportError as exc:
            raise _bad("--format", "h5py", str(exc)) from None
    root = storage.resolve(build)
    try:
        manifest = json.loads(storage.read_bytes(storage.join(root, fmt.MANIFEST)))
    except (FileNotFoundError, ValueError):
        raise _bad("BUILD", "not_a_build", build) from None
    kind = manifest.get("pipeline") if isinstance(manifest, dict) else None
    if kind not in ("unit-build", "pack-build"):
        raise _bad("BUILD", "not_a_build", build)
    rows = _positive("--rows-per-part", part_rows or DEFAULT_PART_ROWS)
    common = dict(build_given=build, build_path=root, kind=kind, format=format,
                  out_given=out, out_path=storage.resolve(out), seed=seed,
                  ignore_id=ignore_id, cache_dir=cache_dir, build_manifest=manifest,
                  target=tuple(target) if target else None)
    if kind == "pack-build":
        if pack_length is not None:
            raise _bad("--pack-length", "pack_length", pack_length)
        if type(seq_len) is not int or seq_len <= 0:
            raise _bad("--seq-len", "seq_len", seq_len)
        plan = ExportPlan(what="samples", seq_len=seq_len, **common)
        total = plan.open_source().samples
        return _with_tasks(plan, "samples", total, rows)
    if seq_len is not None:
        raise _bad("--seq-len", "seq_len", seq_len)
    from mintdim_beam.read import masks
    from mintdim_beam.read.build import open_build

    opened = open_build(root, cache_dir)
    pairs = masks.is_preference(opened.segments)
    if pack_length is not None:
        if pairs:
            raise _bad("--pack-length", "pairs_packed", pack_length)
        plan = ExportPlan(what="packed", pack_length=_positive("--pack-length", pack_length),
                          **common)
        return _with_tasks(plan, "packed", plan.open_source().epoch_items(0), rows)
    if pairs:
        chosen, _ = masks.pair_indices(opened.segments)
        plan = ExportPlan(what="pairs", chosen=chosen, **common)
    else:
        plan = ExportPlan(what="records", targets=masks.target_segments(
            opened.segments, list(target) if target else None), **common)
    size = storage.size(storage.join(root, fmt.SAMPLE_INDEX))
    step = _positive("--part-bytes", part_bytes or DEFAULT_PART_BYTES)
    count = max(1, math.ceil(size / step))
    tasks = tuple(Task(i, "records", i * step, min(size, (i + 1) * step)) for i in range(count))
    total = int(json.loads(storage.read_bytes(storage.join(root, fmt.STATS)))["total_samples"])
    return _replace(plan, tasks=tasks, parts=count, rows=total)


def _with_tasks(plan: ExportPlan, kind: str, total: int, per: int) -> ExportPlan:
    count = max(1, math.ceil(total / per))
    tasks = tuple(Task(i, kind, i * per, min(total, (i + 1) * per)) for i in range(count))
    return _replace(plan, tasks=tasks, parts=count, rows=total)


def _replace(plan: ExportPlan, **changes) -> ExportPlan:
    import dataclasses

    return dataclasses.replace(plan, **changes)


def _card(plan: ExportPlan, parts: list) -> str:
    m = plan.build_manifest
    files = {"parquet": "data/*.parquet", "hdf5": "chunk_*.h5", "mds": "shard.*.mds"}[plan.format]
    lines = []
    if plan.format == "parquet":
        lines += ["---", "configs:", "- config_name: default", "  data_files:",
                  "  - split: train", f"    path: {files}", "---", ""]
    lines += [f"# {plan.what} of {plan.build_given}", "",
              f"Exported by mintdim-beam {__version__} (`mintdim-beam export --format "
              f"{plan.format}`) from a {plan.kind}.", "",
              "| fact | value |", "|---|---|",
              f"| rows | {sum(p.rows for p in parts):,} in {len(parts)} files ({files}) |",
              f"| build | {plan.build_given} (manifest sha256 "
              f"`{storage_sha(plan)}`) |"]
    tokenizer = m.get("tokenizer") or {}
    if tokenizer:
        lines.append(f"| tokenizer | {tokenizer.get('type')} `{tokenizer.get('path') or tokenizer.get('file')}`, "
                     f"vocabulary {tokenizer.get('vocab_size')} |")
    if plan.pack_length:
        lines.append(f"| packed | rows of {plan.pack_length} tokens, seed {plan.seed} |")
    if plan.seq_len:
        lines.append(f"| samples | {plan.seq_len} tokens (+1), seed {plan.seed} |")
    lines += ["", "Labels are aligned (labels[t] is token t's own target, -100 where not "
              "trained): the model shifts them, as Hugging Face models do.", ""]
    return "\n".join(lines)


def storage_sha(plan: ExportPlan) -> str:
    import hashlib

    return hashlib.sha256(storage.read_bytes(storage.join(plan.build_path,
                                                          fmt.MANIFEST))).hexdigest()


def finalize(parts, plan: ExportPlan) -> str:
    """After every part: MDS's index.json, the card, the manifest (last)."""
    from mintdim_beam.export.graph import after_finalize_fault

    parts = sorted(parts, key=lambda p: p.number)
    out = plan.out_path
    sums = {p.name: checksums.FileSum(p.size, p.sha256) for p in parts}
    if plan.format == "mds":
        from mintdim_beam.export import mds_out

        text = mds_out.index([(p.name, p.size, p.rows, p.mds_config) for p in parts])
        sums["index.json"] = checksums.write_text(storage.join(out, "index.json"), text, out)
    sums[CARD] = checksums.write_text(storage.join(out, CARD), _card(plan, parts), out)
    doc = {"pipeline": "export", "mintdim_beam_version": __version__,
           "format": plan.format, "what": plan.what,
           "build": {"path": plan.build_given, "pipeline": plan.kind,
                     "manifest_sha256": storage_sha(plan),
                     "checksums": plan.build_manifest.get("checksums")},
           "settings": {"pack_length": plan.pack_length, "seq_len": plan.seq_len,
                        "seed": plan.seed, "ignore_id": plan.ignore_id,
                        "target": list(plan.target) if plan.target else None},
           "rows": sum(p.rows for p in parts),
           "parts": [{"name": p.name, "rows": p.rows} for p in parts],
           "checksums": checksums.manifest_block(sums)}
    storage.write_text_atomic(storage.join(out, MANIFEST), fmt.json_document(doc), out)
    after_finalize_fault()
    storage.remove_tree(storage.tmp_dir(out))
    release(out)
    return out


def failed_notice(reason: str) -> str:
    return ("# export failed\n\n"
            f"{reason}\n\n"
            "This directory holds no manifest.json: its files are not a complete export.\n"
            "Run `mintdim-beam clean` on it, fix the cause, and export again.\n")


def _verify(plan: ExportPlan, run) -> None:
    from mintdim_beam.audit.verify import verify_output

    result = verify_output(plan.build_given, runner_options=None if run.local else run.options)
    if not result.ok:
        raise ExportInputError(build=plan.build_given, problems=[str(p) for p in result.problems])


def run_export(build: str, format: str, out: str, *, pipeline_options=None, **settings) -> dict:
    """Verify the build, export it, wait; returns the summary."""
    received.clear()
    plan = plan_export(build, format, out, **settings)
    check_free(plan.out_path, out)
    run = RunShape(pipeline_options)
    run.check_paths([("input", build, plan.build_path), ("output", out, plan.out_path)])
    _verify(plan, run)
    claim = Claim(new_run_id())
    claim.take([(plan.out_path, out)])
    log(f"start {plan.kind} {plan.build_given}: {plan.rows} {plan.what} in {plan.parts} "
        f"{format} parts -> {out} runner={run.runner}")
    try:
        import apache_beam as beam

        from mintdim_beam.export.graph import expand_export

        options = run.beam_options()
        p = beam.Pipeline(options=options)
        expand_export(p, plan, finalize)
        with Heartbeat([plan.out_path]):
            p.run().wait_until_finish()
        manifest = json.loads(storage.read_bytes(storage.join(plan.out_path, MANIFEST)))
    except BaseException as exc:
        error = failed_build(exc, lambda reason: leave_failure_notices(
            plan.out_path, out, reason, EXPORT_FAILED, failed_notice(reason), MANIFEST,
            claim, log), log)
        if error is not None:
            raise error from None
        raise
    log(f"done {out}: {manifest['rows']} rows in {len(manifest['parts'])} files")
    return {"output_dir": out, "format": format, "what": plan.what, "rows": manifest["rows"],
            "files": len(manifest["parts"])}
