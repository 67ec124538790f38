"""Finalizing moves metadata, not data: an index file is joined where its parts lie
(GCS compose, S3 UploadPartCopy, the kernel's copy locally) and summed from the sums
its writers took, so the bytes the finalizing step sends and receives do not grow with
the corpus. Counted through the storage layer: a counting proxy between the clients and
the GCS and S3 emulators, and locally every read through `core.files.storage` and every
byte the kernel copies."""
from __future__ import annotations

import hashlib
import os

import pytest

from conftest import counted_store
from mintdim_beam.core.files import checksums, compose, storage
from mintdim_beam.unit_build.transforms.join_parts import join_run

ROW, BATCH = 64, 4096  # index rows of a build in batches of 4096 (build_batch): what
# matters is the part count, which grows with the corpus as a build's does
METADATA = 64 << 10  # what finalizing may move for one file: names, sums, its table


def _part_sizes(samples: int) -> list[int]:
    full, rest = divmod(samples, BATCH)
    return [BATCH * ROW] * full + ([rest * ROW] if rest else [])


def _write_parts(out: str, sizes: list[int]) -> list:
    """The parts as the index writers leave them: (path, FileSum), each distinct. On a
    bucket each is one upload (the writers' rename into place is not what is measured,
    and costs the emulators seconds per hundred parts)."""
    parts = []
    for i, size in enumerate(sizes):
        data = (f"{i:07d}\n".encode() * (size // 8 + 1))[:size]
        path = storage.join(storage.tmp_dir(out), "run", "parts", "sample", f"{i:06d}.jsonl")
        if storage.is_url(path):
            storage.filesystem(path).pipe(path, data)
            parts.append((path, checksums.of_bytes(data)))
        else:
            parts.append((path, checksums.write(path, data, out)))
    return parts


def _joined_first_on_s3(out: str, parts: list) -> list:
    """What the build's parallel step hands Finalize on S3: runs under 5 MiB joined."""
    runs = compose.s3_runs([summed.size for _, summed in parts])
    joined = []
    for number, run in enumerate(runs):
        if len(run) == 1:
            joined.append(parts[run[0]])
            continue
        path = storage.join(storage.tmp_dir(out), "run", "joined", f"{number:06d}")
        joined.append((path, join_run([parts[i][0] for i in run], path, out)))
    return joined


def _check(out: str, parts: list, sums: dict, data_bytes: int) -> None:
    """The joined file is the parts in order; verify proves it from the part table."""
    block = checksums.manifest_block(sums)
    problems = checksums.changed(block, lambda n: storage.exists(storage.join(out, n)),
                                 lambda n: storage.open_read(storage.join(out, n)))
    assert problems == []
    assert block["files"]["sample_index.jsonl"]["bytes"] == data_bytes
    if len(parts) > 1:
        table = storage.read_bytes(storage.join(out, "checksums/sample_index.parts.jsonl"))
        assert table.decode() == checksums.part_table([summed for _, summed in parts])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gcs", "s3"])
def test_finalizing_on_a_bucket_moves_metadata_whatever_the_corpus_size(kind):
    moved, exchanges = {}, {}
    with counted_store(kind) as (root, _, proxy):
        for samples in (10_000, 1_000_000):
            out = f"{root}/out-{samples}"
            sizes = _part_sizes(samples)
            parts = _write_parts(out, sizes)
            if kind == "s3":
                parts = _joined_first_on_s3(out, parts)
            mark = proxy.mark()
            sums = checksums.join_parts(out, "sample_index.jsonl", parts)
            exchanges[samples] = proxy.since(mark)  # each request, said if over budget
            sent, received = (sum(getattr(e, side) for e in exchanges[samples])
                              for side in ("sent", "received"))
            moved[samples] = sent + received
            print(f"{kind} {samples:>9,} samples: index {sum(sizes):>11,} B in {len(parts)} "
                  f"parts; finalizing sent {sent:,} B, received {received:,} B")
            _check(out, parts, sums, sum(sizes))
            if samples == 10_000:  # a retried finalize converges on the same bytes
                again = checksums.join_parts(out, "sample_index.jsonl", parts)
                assert again == sums
                _check(out, parts, again, sum(sizes))
    assert all(count < METADATA for count in moved.values()), (moved, exchanges)
    assert moved[1_000_000] < sum(_part_sizes(1_000_000)) / 1000


@pytest.mark.slow
def test_finalizing_locally_reads_nothing_and_lets_the_kernel_copy(tmp_path, monkeypatch):
    read, copied = [], []
    real_copy, real_open = os.copy_file_range, storage.open_read

    def copy(src, dst, count, offset_src=None, *args):
        done = real_copy(src, dst, count, offset_src, *args)
        copied.append(done)
        return done

    def open_read(path):
        read.append(path)
        return real_open(path)

    for samples in (10_000, 1_000_000):
        out = str(tmp_path / f"out-{samples}")
        sizes = _part_sizes(samples)
        parts = _write_parts(out, sizes)
        read.clear(), copied.clear()
        with monkeypatch.context() as patch:
            patch.setattr(os, "copy_file_range", copy)
            for name in ("open_read", "read_range", "read_bytes"):
                patch.setattr(storage, name, open_read if name == "open_read" else
                              lambda *a, _n=name: read.append(a) or getattr(storage, _n)(*a))
            sums = checksums.join_parts(out, "sample_index.jsonl", parts)
        print(f"local {samples:>9,} samples: {len(parts)} parts, {sum(copied):,} B copied by "
              f"the kernel, {len(read)} reads through the storage layer")
        assert read == [] and sum(copied) == sum(sizes)
        _check(out, parts, sums, sum(sizes))
        with open(os.path.join(out, "sample_index.jsonl"), "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == hashlib.sha256(b"".join(
                open(p, "rb").read() for p, _ in parts)).hexdigest()


def test_s3_runs_keep_every_part_but_the_last_over_the_floor():
    floor = compose.S3_MIN_PART
    sizes = [floor, 10, floor - 5, 3, 7, floor * 2, 1, 2]
    runs = compose.s3_runs(sizes)
    assert runs == [[0], [1, 2], [3, 4, 5], [6, 7]]
    assert [i for run in runs for i in run] == list(range(len(sizes)))
    assert all(sum(sizes[i] for i in run) >= floor for run in runs[:-1])


def test_a_compose_tree_of_any_width_gives_the_parts_in_order():
    """70 parts: two levels of 32 on GCS; none or one: no table."""
    with counted_store("gcs") as (root, _, _):
        for count in (0, 1, 33, 70):
            _compose_tree(f"{root}/out-{count}", count)


def _compose_tree(out: str, count: int) -> None:
    parts = _write_parts(out, [100 + i for i in range(count)])
    sums = checksums.join_parts(out, "sample_index.jsonl", parts)
    want = b"".join(storage.read_bytes(p) for p, _ in parts)
    assert storage.read_bytes(f"{out}/sample_index.jsonl") == want
    assert ("checksums/sample_index.parts.jsonl" in sums) == (count > 1)
    _check(out, parts, sums, len(want))
    left = [p for p in storage.filesystem(out).find(storage.tmp_dir(out)) if "compose-" in p]
    assert left == []  # the tree's inner objects are gone
