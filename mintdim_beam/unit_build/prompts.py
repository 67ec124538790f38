"""The seed's interactive prompts (English + Vietnamese), for local runs on a TTY."""
from __future__ import annotations

import sys


def stdin_is_tty() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _ask(prompt: str, valid: set[str], default: str | None = None) -> str:
    while True:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        raw = sys.stdin.readline()
        if not raw:
            if default is not None:
                return default
            raise EOFError("stdin closed during prompt")
        answer = raw.strip().lower()
        if not answer and default is not None:
            return default
        if answer in valid:
            return answer
        sys.stderr.write(f"  invalid choice {answer!r}, expected one of {sorted(valid)}\n")


def ask_template_unk(file_index: int, n_literals: int) -> bool:
    sys.stderr.write(
        "[unit-build] Template UNK detected\n"
        f"  file index {file_index}\n"
        f"  literal segments with UNK {n_literals}\n\n"
        "  EN: Static-text tokens will be UNK in every encoded sample.\n"
        "      Continue building?\n"
        "  VN: Token của static-text sẽ là UNK ở mọi sample.\n"
        "      Tiếp tục build?\n\n")
    return _ask("  [y/N] > ", {"y", "yes", "n", "no"}, default="n") in ("y", "yes")


def ask_overflow(candidate, max_size: int, capacity: int | None = None
                 ) -> tuple[str, int | None, str]:
    """Returns (action, new_unit_size or None, scope "only" | "all"). `capacity`: the
    largest size the token dtype stores; extend is refused past it."""
    sys.stderr.write(
        "[unit-build] Sample exceeds max unit_size\n"
        f"  source       {candidate.source_file}:{candidate.source_line}\n"
        f"  sample_id    {candidate.sample_id}\n"
        f"  token_count  {candidate.token_count}\n"
        f"  max(sizes)   {max_size}\n\n"
        "  EN: How should this sample be handled?\n"
        "      [1] truncate  drop trailing tokens to fit max(sizes)\n"
        "      [2] extend    declare a new unit_size that fits this sample\n"
        "      [3] skip      drop this sample (recorded in overflow_index.jsonl)\n"
        "  VN: Xử lý sample này thế nào?\n"
        "      [1] truncate  cắt token cuối cho vừa max(sizes)\n"
        "      [2] extend    khai báo thêm unit_size đủ chứa sample\n"
        "      [3] skip      bỏ qua sample (ghi vào overflow_index.jsonl)\n\n")
    while True:
        action = {"1": "truncate", "2": "extend", "3": "skip"}[
            _ask("  [1/2/3] > ", {"1", "2", "3"})]
        if action != "extend" or capacity is None or candidate.token_count <= capacity:
            break
        sys.stderr.write(_cannot_extend(candidate.token_count, capacity))
    new_size = None
    if action == "extend":
        top = "" if capacity is None else f" and <= {capacity}"
        sys.stderr.write(f"  new unit_size: an integer >= {candidate.token_count}{top}\n")
        while True:
            sys.stderr.write("  > ")
            sys.stderr.flush()
            raw = sys.stdin.readline()
            if not raw:
                raise EOFError("stdin closed during prompt")
            try:
                new_size = int(raw.strip())
            except ValueError:
                sys.stderr.write("  invalid, expected an integer\n")
                continue
            if new_size >= candidate.token_count and (capacity is None or new_size <= capacity):
                break
            sys.stderr.write(f"  invalid, must be >= {candidate.token_count}{top}\n")
    sys.stderr.write(
        "  EN: Apply this choice to:\n"
        "      [1] only this sample\n"
        "      [2] all subsequent overflow samples in this run\n"
        "  VN: Áp dụng lựa chọn này cho:\n"
        "      [1] chỉ sample này\n"
        "      [2] mọi sample overflow tiếp theo trong lần build này\n\n")
    scope = {"1": "only", "2": "all"}[_ask("  [1/2] > ", {"1", "2"})]
    return action, new_size, scope


def _cannot_extend(token_count: int, capacity: int) -> str:
    return (f"  EN: extend is not possible: {token_count} tokens exceed {capacity}, the "
            "largest length the token dtype stores; choose truncate or skip.\n"
            f"  VN: không thể extend: {token_count} token vượt quá {capacity}, độ dài lớn "
            "nhất token dtype lưu được; hãy chọn truncate hoặc skip.\n")


class InteractiveChooser:
    """Asks per overflow, latching a choice made for "all" (extend/all extends each to fit,
    and asks again for a sample too long for the token dtype: `capacity`)."""

    def __init__(self, ask=ask_overflow, capacity: int | None = None):
        self._ask = ask
        self._capacity = capacity
        self._latched = None
        self.script = {}

    def __call__(self, candidate, max_size):
        storable = self._capacity is None or candidate.token_count <= self._capacity
        if self._latched == "extend" and storable:
            choice = ("extend", candidate.token_count)
        elif self._latched not in (None, "extend"):
            choice = (self._latched, None)
        else:
            action, new_size, scope = self._ask(candidate, max_size, self._capacity)
            if scope == "all":
                self._latched = action
            choice = (action, new_size)
        self.script[candidate.sample_id] = choice
        return choice
