"""Join part files into one file where they lie, so finalizing a build moves metadata,
not data: GCS composes objects on the server (32 sources a call, composed in a tree),
S3 copies them into a multipart upload (UploadPartCopy), local disk lets the kernel copy
(`copy_file_range`, which shares extents where the filesystem can). Only S3's floor of
5 MiB for a part of a multipart upload forces a read: `s3_runs` says which consecutive
parts must be joined first, and the build joins them on its workers
(`unit_build.transforms.join_parts`), in parallel, before the finalizing step.
"""
from __future__ import annotations

import asyncio
import uuid

from mintdim_beam.core.files import storage

GCS_SOURCES = 32  # the most sources one compose call takes
S3_MIN_PART = 5 << 20  # every part of a multipart upload but the last is at least this
S3_MAX_PARTS = 10_000  # the most parts one multipart upload takes
CONCURRENT = 32  # server-side calls in flight at a time


def protocol(path: str) -> str:
    """"gcs", "s3", "file" or another fsspec protocol name."""
    if not storage.is_url(path):
        return "file"
    name = path.split("://", 1)[0]
    return {"gs": "gcs", "s3a": "s3"}.get(name, name)


def s3_runs(sizes: list[int]) -> list[list[int]]:
    """Consecutive part positions grouped so that each group but the last holds at
    least `S3_MIN_PART` bytes; a group of one part is copied on the server, a longer
    one must be read and joined. A part as large as the floor stands alone."""
    runs, run, held = [], [], 0
    for i, size in enumerate(sizes):
        if not run and size >= S3_MIN_PART:
            runs.append([i])
            continue
        run.append(i)
        held += size
        if held >= S3_MIN_PART:
            runs.append(run)
            run, held = [], 0
    if run:
        runs.append(run)
    return runs


def join(target: str, parts: list[str], sizes: list[int], output_dir: str) -> None:
    """`target` holds the parts' bytes in order, appearing whole or not at all; on S3
    every part but the last must hold `S3_MIN_PART` bytes or more (see `s3_runs`)."""
    with storage.writing(output_dir):
        kind = protocol(target)
        if not parts:
            storage.write_atomic(target, b"", output_dir)
        elif kind == "gcs":
            _compose_gcs(storage.filesystem(target), target, parts, storage.tmp_dir(output_dir))
        elif kind == "s3":
            _copy_s3(storage.filesystem(target), target, parts, sizes,
                     storage.tmp_dir(output_dir))
        elif kind == "file":  # ranges copied by the kernel (storage.write_pieces_atomic)
            storage.write_pieces_atomic(target, [(p, 0, n) for p, n in zip(parts, sizes)],
                                        output_dir)
        else:
            storage.concat_atomic(target, parts, output_dir)
        storage.filesystem(target).invalidate_cache(target)


def _run(fs, calls: list) -> None:
    """The coroutines run on the filesystem's loop, `CONCURRENT` at a time."""
    from fsspec.asyn import sync

    async def run_all():
        for i in range(0, len(calls), CONCURRENT):
            await asyncio.gather(*calls[i:i + CONCURRENT])

    sync(fs.loop, run_all)


def _temp_names(scratch: str, count: int) -> list[str]:
    run = uuid.uuid4().hex  # a retried join never meets an earlier attempt's objects
    return [storage.join(scratch, f"compose-{run}-{i:06d}.tmp") for i in range(count)]


def _compose_gcs(fs, target: str, parts: list[str], scratch: str) -> None:
    level, made = list(parts), []
    while len(level) > GCS_SOURCES:
        groups = [level[i:i + GCS_SOURCES] for i in range(0, len(level), GCS_SOURCES)]
        names = _temp_names(scratch, len(groups))
        _run(fs, [fs._merge(name, group) for name, group in zip(names, groups)])
        if made:
            fs.rm(made)  # the level below is inside the new one now
        level = made = names
    fs.merge(target, level)  # one object appears whole: no temporary name needed
    if made:
        fs.rm(made)


def _copy_s3(fs, target: str, parts: list[str], sizes: list[int], scratch: str) -> None:
    # A run of small parts goes up as bytes read here: the build joins them on its
    # workers first, so what reaches this is the last run at most (under 5 MiB).
    sources = [parts[run[0]] if len(run) == 1 else
               b"".join(storage.read_bytes(parts[i]) for i in run) for run in s3_runs(sizes)]
    made = []
    while len(sources) > S3_MAX_PARTS:  # each group is over the floor, so each is too
        groups = [sources[i:i + S3_MAX_PARTS] for i in range(0, len(sources), S3_MAX_PARTS)]
        names = _temp_names(scratch, len(groups))
        _run(fs, [_upload(fs, name, group) for name, group in zip(names, groups)])
        if made:
            fs.rm(made)
        sources = made = names
    _run(fs, [_upload(fs, target, sources)])  # complete_multipart_upload: whole or nothing
    if made:
        fs.rm(made)


async def _upload(fs, target: str, sources: list) -> None:
    """One multipart upload of `sources`: objects copied on the server, bytes sent."""
    bucket, key, _ = fs.split_path(target)
    upload = await fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key)
    ident = upload["UploadId"]

    async def part(number: int, source):
        if isinstance(source, bytes):
            done = await fs._call_s3("upload_part", Bucket=bucket, Key=key, UploadId=ident,
                                     PartNumber=number, Body=source)
            return {"PartNumber": number, "ETag": done["ETag"]}
        from_bucket, from_key, _ = fs.split_path(source)
        done = await fs._call_s3("upload_part_copy", Bucket=bucket, Key=key, UploadId=ident,
                                 PartNumber=number,
                                 CopySource={"Bucket": from_bucket, "Key": from_key})
        return {"PartNumber": number, "ETag": done["CopyPartResult"]["ETag"]}

    done = []
    for i in range(0, len(sources), CONCURRENT):
        done += await asyncio.gather(*[part(i + k + 1, s)
                                       for k, s in enumerate(sources[i:i + CONCURRENT])])
    await fs._call_s3("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=ident,
                      MultipartUpload={"Parts": done})
