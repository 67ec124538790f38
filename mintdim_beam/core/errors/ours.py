"""Errors of ours, beyond the seed's, in the same two languages: inputs that changed or
cannot be read, helper processes that died, writes that failed, interrupted builds, a
refused `clean`, and the reader's corrupt records and foreign resume states."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError


class SourceChangedError(MintDimError):
    """Raised when an input file is not the one the build planned: replaced, grown,
    truncated or rewritten after planning (size, modification time, generation or ETag
    differ), or it ended before a planned byte range did."""

    def __init__(self, *, file: str, planned: str, found: str):
        kw = {"file": str(file), "planned": str(planned), "found": str(found)}
        self._set(
            kw,
            ["Input file changed while the build was running.", f"File: {kw['file']}",
             f"Planned: {kw['planned']}", f"Found: {kw['found']}",
             "Fix: do not modify inputs during a build; rerun it on the final files."],
            ["File đầu vào đã thay đổi trong khi build đang chạy.", f"File: {kw['file']}",
             f"Dự kiến: {kw['planned']}", f"Thực tế: {kw['found']}",
             "Cách sửa: không sửa file đầu vào trong khi build; chạy lại trên file cuối cùng."],
        )


class SourceFormatError(MintDimError):
    """Raised before any output when an input file is not JSONL, a JSON array or
    Parquet, plain, gzip or zstd (another compression, an archive, Arrow IPC, UTF-16,
    an unreadable Parquet footer, or zstd without the `zstandard` package)."""

    def __init__(self, *, file: str, found: str, expected: str):
        kw = {"file": str(file), "found": str(found), "expected": str(expected)}
        self._set(
            kw,
            ["Input file is not in a format MintDim can read.", f"File: {kw['file']}",
             f"Found: {kw['found']}", f"Expected: {kw['expected']}"],
            ["File đầu vào không ở định dạng MintDim đọc được.", f"File: {kw['file']}",
             f"Tìm thấy: {kw['found']}", f"Cần: {kw['expected']}"],
        )


class EncoderCrashError(MintDimError):
    """Raised when a helper encoder process dies (killed for memory, crashed) while it
    encodes a batch; names the batch's file and lines."""

    def __init__(self, *, file: str, lines: str, reason: str):
        kw = {"file": str(file), "lines": str(lines), "reason": str(reason)}
        self._set(
            kw,
            ["A helper encoder process died while encoding a batch.", f"File: {kw['file']}",
             f"Lines: {kw['lines']}", f"Reason: {kw['reason']}",
             "Fix: look for very long lines there (see --max_line_bytes), or give the build "
             "more memory."],
            ["Một tiến trình encoder phụ đã dừng đột ngột khi encode một batch.",
             f"File: {kw['file']}", f"Dòng: {kw['lines']}", f"Lý do: {kw['reason']}",
             "Cách sửa: kiểm tra các dòng rất dài ở đó (xem --max_line_bytes), hoặc cấp thêm "
             "bộ nhớ cho build."],
        )


class OutputWriteError(MintDimError):
    """Raised when writing the output fails mid-build (disk full, permissions, quota);
    the scratch files are removed first, then the failure notices written."""

    def __init__(self, *, directory: str, reason: str):
        kw = {"directory": str(directory), "reason": str(reason)}
        self._set(
            kw,
            ["Writing the output failed.", f"Directory: {kw['directory']}",
             f"Reason: {kw['reason']}",
             "Fix: free space or fix permissions, run `mintdim-beam clean` on the directory, "
             "then build again."],
            ["Ghi output thất bại.", f"Thư mục: {kw['directory']}", f"Lý do: {kw['reason']}",
             "Cách sửa: giải phóng dung lượng hoặc sửa quyền, chạy `mintdim-beam clean` trên "
             "thư mục, rồi build lại."],
        )


class BuildInterruptedError(MintDimError):
    """Raised when a build is stopped by SIGINT (Ctrl-C) or SIGTERM (timeout, Docker,
    Kubernetes, Slurm); the command exits 130 or 143."""

    def __init__(self, *, signal: str):
        kw = {"signal": str(signal)}
        self._set(
            kw,
            [f"Build interrupted by {kw['signal']}.",
             "Scratch files were removed and each output holds UNIT_BUILD_FAILED.md; "
             "run `mintdim-beam clean` on it before building again."],
            [f"Build bị ngắt bởi {kw['signal']}.",
             "File tạm đã được xoá và mỗi output có UNIT_BUILD_FAILED.md; chạy "
             "`mintdim-beam clean` trên thư mục đó trước khi build lại."],
        )


class OutputCleanError(MintDimError):
    """Raised by `mintdim-beam clean` when the directory is not an incomplete build of
    ours (a complete build, a build that still runs, or files we did not write); nothing
    is removed then."""

    def __init__(self, *, directory: str, reason: str):
        kw = {"directory": str(directory), "reason": str(reason)}
        self._set(
            kw,
            ["Output directory was not cleaned.", f"Directory: {kw['directory']}",
             f"Reason: {kw['reason']}",
             "Rule: clean removes only an incomplete mintdim-beam build."],
            ["Thư mục output không được dọn.", f"Thư mục: {kw['directory']}",
             f"Lý do: {kw['reason']}",
             "Quy tắc: clean chỉ xoá một lần build mintdim-beam chưa hoàn tất."],
        )


class ShardRecordError(MintDimError):
    """Raised by the reader when a shard does not hold the records its build's files
    describe: a record whose magic is wrong, whose segment lengths add up past the unit
    size, or a shard whose byte size is not a whole number of the expected records.
    `row` is the record's row inside the shard (None when the whole shard is wrong)."""

    def __init__(self, *, shard: str, row: int | None, problem: str):
        kw = {"shard": str(shard), "row": None if row is None else int(row),
              "problem": str(problem)}
        where = "whole shard" if kw["row"] is None else f"row {kw['row']}"
        where_vi = "toàn bộ shard" if kw["row"] is None else f"dòng {kw['row']}"
        self._set(
            kw,
            ["A shard record is corrupt.", f"Shard: {kw['shard']}", f"Record: {where}",
             f"Problem: {kw['problem']}",
             "Fix: rebuild the output, or copy the shard again from a good copy; nothing "
             "is skipped silently."],
            ["Một record trong shard bị hỏng.", f"Shard: {kw['shard']}",
             f"Record: {where_vi}", f"Vấn đề: {kw['problem']}",
             "Cách sửa: build lại output, hoặc chép lại shard từ một bản tốt; không có "
             "record nào bị bỏ qua âm thầm."],
        )


class ReaderStateError(MintDimError):
    """Raised by `UnitReader.load_state_dict` when the state was saved by a reader of
    another build (its manifest.json fingerprint differs) or with settings that give
    another order (seed, tokens_per_step, last-batch rule, packing): `expected` is this
    reader's value. With `allowed` instead of `expected`: the state holds a value no
    reader could have saved (a negative or past-the-end step, a step that is not an
    int, a missing key), and `allowed` says the range (`allowed_vi` in Vietnamese)."""

    def __init__(self, *, key: str, found: str, expected: str | None = None,
                 allowed: str | None = None, allowed_vi: str | None = None):
        if (expected is None) == (allowed is None):
            raise TypeError("ReaderStateError takes expected= or allowed=, one of them")
        kw = {"key": str(key), "found": str(found)}
        if expected is not None:
            kw["expected"] = str(expected)
            self._set(
                kw,
                ["The reader state does not belong to this reader.", f"Key: {kw['key']}",
                 f"This reader: {kw['expected']}", f"State: {kw['found']}",
                 "Fix: resume with the same build (manifest.json), seed and tokens_per_step "
                 "the state was saved with."],
                ["Trạng thái reader không thuộc về reader này.", f"Khoá: {kw['key']}",
                 f"Reader này: {kw['expected']}", f"Trạng thái: {kw['found']}",
                 "Cách sửa: tiếp tục với đúng build (manifest.json), seed và tokens_per_step "
                 "đã dùng khi lưu trạng thái."],
            )
            return
        kw["allowed"] = str(allowed)
        kw["allowed_vi"] = str(allowed if allowed_vi is None else allowed_vi)
        self._set(
            kw,
            ["The reader state holds a value no reader saves.", f"Key: {kw['key']}",
             f"Allowed: {kw['allowed']}", f"State: {kw['found']}",
             "Fix: resume from a state this reader's state_dict() made (or the torch "
             "adapter's state_dict(after=batch)), unchanged."],
            ["Trạng thái reader chứa một giá trị mà không reader nào lưu.",
             f"Khoá: {kw['key']}", f"Cho phép: {kw['allowed_vi']}", f"Trạng thái: {kw['found']}",
             "Cách sửa: tiếp tục từ một trạng thái do state_dict() của reader này tạo ra "
             "(hoặc state_dict(after=batch) của adapter torch), giữ nguyên không sửa."],
        )


class ReaderArgumentError(MintDimError, ValueError):
    """Raised by `UnitReader` (and its torch adapter) before anything is read when an
    argument is outside what the reader can honour: a wrong type, a value out of range
    (`tokens_per_step` past its bound, a step past the epoch), a `pack_length` shorter
    than a record. `allowed` says what would be accepted (`allowed_vi` in Vietnamese).
    A ValueError too, so code that caught the reader's ValueErrors still does."""

    def __init__(self, *, argument: str, value: str, allowed: str,
                 allowed_vi: str | None = None):
        kw = {"argument": str(argument), "value": str(value), "allowed": str(allowed),
              "allowed_vi": str(allowed if allowed_vi is None else allowed_vi)}
        self._set(
            kw,
            ["A reader argument is not accepted.", f"Argument: {kw['argument']}",
             f"Value: {kw['value']}", f"Allowed: {kw['allowed']}"],
            ["Một đối số của reader không được chấp nhận.", f"Đối số: {kw['argument']}",
             f"Giá trị: {kw['value']}", f"Cho phép: {kw['allowed_vi']}"],
        )


class ScratchSpaceError(MintDimError):
    """Raised before any output when the disk of a local output directory has less free
    space than the build will need for its scratch files and its output."""

    def __init__(self, *, directory: str, needed: str, free: str):
        kw = {"directory": str(directory), "needed": str(needed), "free": str(free)}
        self._set(
            kw,
            ["Not enough disk space for the build.", f"Directory: {kw['directory']}",
             f"Needed: about {kw['needed']} (scratch files and output)",
             f"Free: {kw['free']}",
             "Fix: free space there, or choose an output directory on a larger disk."],
            ["Không đủ dung lượng đĩa cho build.", f"Thư mục: {kw['directory']}",
             f"Cần: khoảng {kw['needed']} (file tạm và output)", f"Còn trống: {kw['free']}",
             "Cách sửa: giải phóng dung lượng ở đó, hoặc chọn thư mục output trên đĩa lớn hơn."],
        )
