"""The errors of `pipeline("unit-read")`, mintdim 0.2.1's reader: the same seven classes
with the same attributes (`component` or `path`, `problem`, and `rules` for validation),
their text in both languages. Each problem is given in both (`problem`, `problem_vi`);
values inside it (paths, numbers, names) are the same in both."""
from __future__ import annotations

from mintdim_beam.core.errors.base import MintDimError, bullets

# The rules each validation error lists, per block (English, Vietnamese).
RULES = {
    "queue": (
        ["queue.entries must be a non-empty list",
         "each queue entry must contain path, unit, batch, and accum",
         "path must be an existing .bin file path or a directory containing direct .bin "
         "shard files",
         "when path is a directory, only its direct child *.bin files are read; other files "
         "and subdirectories are ignored",
         "unit, batch, and accum must be positive integers"],
        ["queue.entries phải là một list không rỗng",
         "mỗi entry của queue phải có path, unit, batch và accum",
         "path phải là một file shard .bin có thật hoặc một thư mục chứa trực tiếp các file "
         "shard .bin",
         "khi path là thư mục, chỉ đọc các file *.bin nằm trực tiếp trong đó; file khác và "
         "thư mục con bị bỏ qua",
         "unit, batch và accum phải là số nguyên dương"],
    ),
    "layout": (
        ["layout.sequence_template must be a non-empty sequence of segment names",
         "each segment name must be a non-empty string",
         "duplicate segment names are allowed because segment lengths are positional"],
        ["layout.sequence_template phải là một dãy tên segment không rỗng",
         "mỗi tên segment phải là chuỗi không rỗng",
         "tên segment được phép trùng vì độ dài segment theo vị trí"],
    ),
    "target": (
        ["target.fields must be a sequence of segment names",
         "target.index must be a sequence of 0-base segment indices",
         "target.fields and target.index must both be present and non-empty",
         "target.fields and target.index must have the same length",
         "each target field must match layout.sequence_template at its paired target index",
         "each target field must exist in layout.sequence_template",
         "each target index must satisfy 0 <= index < len(layout.sequence_template)",
         "ignore_id must be an integer"],
        ["target.fields phải là một dãy tên segment",
         "target.index phải là một dãy chỉ số segment (đếm từ 0)",
         "target.fields và target.index phải cùng có mặt và không rỗng",
         "target.fields và target.index phải dài bằng nhau",
         "mỗi field của target phải trùng với layout.sequence_template tại chỉ số đi cặp "
         "với nó",
         "mỗi field của target phải có trong layout.sequence_template",
         "mỗi chỉ số target phải thoả 0 <= index < len(layout.sequence_template)",
         "ignore_id phải là số nguyên"],
    ),
}


class _UnitReadError(MintDimError):
    """`component` (or `path`) and a problem in both languages, under a headline."""

    EN = VI = ""
    WHERE = "component"
    WHERE_LABELS = ("Component", "Thành phần")

    def __init__(self, *, problem: str, problem_vi: str | None = None, **where):
        (key, value), = where.items()
        if key != self.WHERE:
            raise TypeError(f"{type(self).__name__} takes {self.WHERE}=, not {key}=")
        kw = {key: str(value), "problem": str(problem),
              "problem_vi": str(problem if problem_vi is None else problem_vi)}
        setattr(self, key, kw[key])
        self.problem = kw["problem"]
        en_label, vi_label = self.WHERE_LABELS
        self._set(kw, [self.EN, f"{en_label}: {kw[key]}", f"Problem: {kw['problem']}"],
                  [self.VI, f"{vi_label}: {kw[key]}", f"Vấn đề: {kw['problem_vi']}"])


class _PathError(_UnitReadError):
    WHERE = "path"
    WHERE_LABELS = ("Path", "Đường dẫn")


class UnitReadValidationError(MintDimError):
    """Raised by `read()` before anything is read when the queue, layout or target
    configuration breaks a rule; lists the rules of that block."""

    def __init__(self, *, component: str, problem: str, problem_vi: str | None = None,
                 rules: str):
        if rules not in RULES:
            raise TypeError(f"rules must be one of {sorted(RULES)}, got {rules!r}")
        kw = {"component": str(component), "problem": str(problem),
              "problem_vi": str(problem if problem_vi is None else problem_vi),
              "rules": rules}
        self.component, self.problem = kw["component"], kw["problem"]
        self.rules = list(RULES[rules][0])
        en, vi = RULES[rules]
        self._set(kw, ["Invalid unit-read configuration.", f"Component: {kw['component']}",
                       f"Problem: {kw['problem']}", "Rules:", bullets(en)],
                  ["Cấu hình unit-read không hợp lệ.", f"Thành phần: {kw['component']}",
                   f"Vấn đề: {kw['problem_vi']}", "Quy tắc:", bullets(vi)])


class UnitReadMetadataError(_PathError):
    """Raised when a shard's `length_field.json` is missing or does not describe a build."""

    EN = "Could not read unit-build metadata for unit-read."
    VI = "Không đọc được metadata của unit-build cho unit-read."


class UnitReadShardError(_PathError):
    """Raised when a shard file is missing, is not a whole number of records of the
    queue entry's unit, or holds a record with a wrong magic or segment lengths."""

    EN = "Could not read fixed-width .bin shard."
    VI = "Không đọc được shard .bin độ rộng cố định."


class UnitReadMaskingError(_UnitReadError):
    """Raised when segment lengths cannot give a teacher-forcing mask (a payload of width
    0, segment lengths past the payload)."""

    EN = "Could not build teacher-forcing masks."
    VI = "Không tạo được mask teacher-forcing."


class UnitReadQueueError(_UnitReadError):
    """Raised when the queue cannot plan a batch (no entries, an empty shard)."""

    EN = "Could not plan a unit-read queue batch."
    VI = "Không lập được batch từ queue của unit-read."


class UnitReadBatchError(_UnitReadError):
    """Raised when a batch's arrays, spans or step flags do not agree."""

    EN = "Could not construct a unit-read batch."
    VI = "Không dựng được batch unit-read."


class UnitReadRuntimeError(_UnitReadError):
    """Raised at `read()` when the configured layout is not the shard's
    `length_field.json` sequence_template."""

    EN = "Could not execute unit-read runtime."
    VI = "Không chạy được unit-read."
