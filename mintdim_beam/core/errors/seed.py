"""The seed's errors, each with the English and Vietnamese text the MintDim README
gives (some forms extended; the seed's own form is unchanged)."""
from __future__ import annotations

from typing import Any

from mintdim_beam.core.errors.base import JSON_SCALARS, MintDimError, bullets, num, spaced, strs


class PipelineValidationError(MintDimError):
    """Raised when build() is called before every required config is set."""

    def __init__(self, *, missing: list[str]):
        missing = strs(missing)
        self._set(
            {"missing": missing},
            ["Pipeline configuration is incomplete.", "Missing:", bullets(missing)],
            ["Pipeline chưa được cấu hình đầy đủ.", "Thiếu:", bullets(missing),
             "Thiếu cấu hình nào thì báo thiếu cấu hình đó."],
        )


class MintDimFileNotFoundError(MintDimError):
    """Raised when a required input (source JSONL, tokenizer file, ...) does not exist."""

    def __init__(self, *, context: str, missing_file: str):
        context, missing_file = str(context), str(missing_file)
        self._set(
            {"context": context, "missing_file": missing_file},
            ["Required file was not found.", f"Context: {context}", f"Missing file: {missing_file}"],
            ["Không tìm thấy file cần dùng.", f"Ngữ cảnh: {context}", f"File thiếu: {missing_file}"],
        )


class SourceParseError(MintDimError):
    """Raised when a JSONL line is not valid UTF-8 / JSON or not a JSON object."""

    def __init__(self, *, file: str, line: int, reason: str):
        file, line, reason = str(file), int(line), str(reason)
        self._set(
            {"file": file, "line": line, "reason": reason},
            ["JSONL line could not be parsed.", f"File: {file}", f"Line: {line}", f"Reason: {reason}"],
            ["Không parse được dòng JSONL.", f"File: {file}", f"Dòng: {line}", f"Lý do: {reason}"],
        )


class SampleSchemaError(MintDimError):
    """Raised when a JSONL sample lacks a declared field, or a declared field's
    value is null / an array / an object (``invalid_field`` form); or (``problem`` form)
    when a chat dialogue or preference pair is malformed, naming the message."""

    def __init__(self, *, file: str, line: int, declared_fields: list[str] = (),
                 missing_fields: list[str] = (), available_keys: list[str] = (),
                 invalid_field: str | None = None, invalid_type: str | None = None,
                 problem: str | None = None, message_index: int | None = None):
        if problem is not None:
            self._dialogue(file, line, problem, message_index)
            return
        kw = {
            "file": str(file), "line": int(line), "declared_fields": strs(declared_fields),
            "missing_fields": strs(missing_fields), "available_keys": strs(available_keys),
            "invalid_field": None if invalid_field is None else str(invalid_field),
            "invalid_type": None if invalid_type is None else str(invalid_type),
        }
        en = [f"File: {kw['file']}", f"Line: {kw['line']}", spaced("Declared fields", kw["declared_fields"])]
        vi = [f"File: {kw['file']}", f"Dòng: {kw['line']}", spaced("Field đã khai báo", kw["declared_fields"])]
        if kw["invalid_field"] is not None:
            en = ["JSONL sample has a declared field with an unsupported value.", *en,
                  f"Field: {kw['invalid_field']}", f"JSON type: {kw['invalid_type']}",
                  "Rule: field values must be a string, number or boolean"]
            vi = ["Sample JSONL có field đã khai báo mang giá trị không hỗ trợ.", *vi,
                  f"Field: {kw['invalid_field']}", f"Kiểu JSON: {kw['invalid_type']}",
                  "Quy tắc: giá trị field phải là string, số hoặc boolean"]
        else:
            en = ["JSONL sample is missing declared fields.", *en,
                  spaced("Missing fields", kw["missing_fields"]),
                  spaced("Available keys", kw["available_keys"])]
            vi = ["Sample JSONL thiếu field đã khai báo.", *vi,
                  spaced("Field bị thiếu", kw["missing_fields"]),
                  spaced("Key hiện có", kw["available_keys"])]
        self._set(kw, en, vi)

    def _dialogue(self, file, line, problem, message_index) -> None:
        kw = {"file": str(file), "line": int(line), "problem": str(problem),
              "message_index": None if message_index is None else int(message_index)}
        at = [] if kw["message_index"] is None else [f"Message index: {kw['message_index']}"]
        at_vi = [] if kw["message_index"] is None else [f"Vị trí message: {kw['message_index']}"]
        self._set(
            kw,
            ["JSONL sample is not a valid dialogue or preference pair.", f"File: {kw['file']}",
             f"Line: {kw['line']}", *at, f"Problem: {kw['problem']}"],
            ["Sample JSONL không phải hội thoại hoặc cặp preference hợp lệ.",
             f"File: {kw['file']}", f"Dòng: {kw['line']}", *at_vi, f"Vấn đề: {kw['problem']}"])


class TokenizerValidationError(MintDimError):
    """Raised for a structurally invalid tokenizer.files list, or (with
    ``unsupported_format=True``) a tokenizer file of an unsupported format."""

    def __init__(self, *, component: str = "files", problem: str = "", unsupported_format: bool = False,
                 given_type: str | None = None, known_types: list | None = None,
                 suggestion: str | None = None):
        kw = {"component": str(component), "problem": str(problem), "unsupported_format": bool(unsupported_format)}
        if given_type is not None:  # ours: a config's `type` that is none of the kinds
            kw.update(given_type=str(given_type), known_types=[str(k) for k in known_types or ()],
                      suggestion=None if suggestion is None else str(suggestion))
        if kw["unsupported_format"]:
            formats = bullets(["sentencepiece (.model)", "huggingface tokenizer (.json)"])
            en = ["Unsupported tokenizer format.", "Supported formats:", formats]
            vi = ["Định dạng tokenizer chưa được hỗ trợ.", "Các định dạng hiện hỗ trợ:", formats]
            if given_type is not None:  # the seed's text first, unchanged; then the names
                en += [f"tokenizer.type: {kw['given_type']!r}",
                       f"Known types: {', '.join(kw['known_types'])}"]
                vi += [f"tokenizer.type: {kw['given_type']!r}",
                       f"Các loại hợp lệ: {', '.join(kw['known_types'])}"]
                if kw["suggestion"] is not None:
                    en.append(f"Did you mean: {kw['suggestion']}?")
                    vi.append(f"Có phải ý bạn là: {kw['suggestion']}?")
        else:
            en = ["Invalid tokenizer configuration.", f"Component: {kw['component']}",
                  f"Problem: {kw['problem']}", "Rules:", bullets([
                      "tokenizer.files must be a list of tokenizer file paths",
                      "each tokenizer file path must be a string",
                      "unk_id and pad_id are loaded from the tokenizer library"])]
            vi = ["Cấu hình tokenizer không hợp lệ.", f"Thành phần: {kw['component']}",
                  f"Vấn đề: {kw['problem']}", "Quy tắc:", bullets([
                      "tokenizer.files phải là list các đường dẫn file tokenizer",
                      "mỗi đường dẫn file tokenizer phải là string",
                      "unk_id và pad_id được lấy từ thư viện tokenizer"])]
        self._set(kw, en, vi)


class TokenizerSpecialTokenError(MintDimError):
    """Raised when the tokenizer library does not expose a required special token id.

    Without ``fix`` it is the seed's form. ``fix`` ("pad", "bos_eos" or "unk") replaces
    the seed's rule line with how to give the missing token (beyond mintdim 0.2.1, where
    the tokenizer block may name a pad token and ask for BOS/EOS)."""

    _FIXES = {
        "pad": (
            "How to set one: give the tokenizer block pad_token=\"<token text>\" or "
            "pad_id=<id> (a token of the vocabulary), or config=\"tokenizer_config.json\" "
            "whose pad_token is set, or a padding config in tokenizer.json. An EOS token is "
            "used as pad only when you name it (pad_token=\"<eos text>\"); readers mask by "
            "segment lengths, so any id of the vocabulary works as pad.",
            "Cách đặt: thêm pad_token=\"<token>\" hoặc pad_id=<id> (một token có trong "
            "vocabulary) vào khối tokenizer, hoặc config=\"tokenizer_config.json\" có "
            "pad_token, hoặc cấu hình padding trong tokenizer.json. Token EOS chỉ được dùng "
            "làm pad khi bạn chỉ định nó (pad_token=\"<eos>\"); reader tạo mask theo độ dài "
            "segment, nên id nào trong vocabulary cũng dùng được làm pad."),
        "bos_eos": (
            "How to set one: bos=True / eos=True take the id from the tokenizer: a "
            "SentencePiece model trained with bos_id / eos_id >= 0, or for hf_json a "
            "tokenizer config (config=\"tokenizer_config.json\") whose bos_token / "
            "eos_token is in the vocabulary. Leave bos / eos unset to build without them.",
            "Cách đặt: bos=True / eos=True lấy id từ tokenizer: model SentencePiece được "
            "train với bos_id / eos_id >= 0, hoặc với hf_json một tokenizer config "
            "(config=\"tokenizer_config.json\") có bos_token / eos_token nằm trong "
            "vocabulary. Bỏ bos / eos để build không có chúng."),
        "unk": (
            "How to fix: a tokenizer without an unk token is accepted only when it is "
            "byte-level (a ByteLevel pre-tokenizer, or BPE with byte_fallback), so that no "
            "character can be dropped; otherwise set model.unk_token in tokenizer.json.",
            "Cách sửa: tokenizer không có unk token chỉ được chấp nhận khi nó là byte-level "
            "(pre-tokenizer ByteLevel, hoặc BPE có byte_fallback) để không ký tự nào bị bỏ "
            "mất; nếu không, hãy đặt model.unk_token trong tokenizer.json."),
    }

    def __init__(self, *, tokenizer: str, special_token: str, problem: str,
                 fix: str | None = None):
        kw = {"tokenizer": str(tokenizer), "special_token": str(special_token), "problem": str(problem)}
        if fix is not None:
            if fix not in self._FIXES:
                raise TypeError(f"TokenizerSpecialTokenError fix must be one of {sorted(self._FIXES)}")
            kw["fix"] = fix
        common = [f"Tokenizer: {kw['tokenizer']}", f"Special token: {kw['special_token']}"]
        rule_en, rule_vi = self._FIXES[fix] if fix is not None else (
            "Rule: MintDim uses tokenizer-provided special token ids only; "
            "do not declare unk_id/pad_id manually.",
            "Quy tắc: MintDim chỉ dùng special token id do tokenizer cung cấp; "
            "không khai báo unk_id/pad_id thủ công.")
        self._set(
            kw,
            ["Tokenizer library did not expose a required special token.", *common,
             f"Problem: {kw['problem']}", rule_en],
            ["Thư viện tokenizer không cung cấp special token bắt buộc.", *common,
             f"Vấn đề: {kw['problem']}", rule_vi],
        )


class TokenizerMappingError(MintDimError):
    """Raised when the tokenizer count is neither 1 nor the input file count."""

    def __init__(self, *, input_files: int, tokenizers: int):
        self._arity(
            {"input_files": int(input_files), "tokenizers": int(tokenizers)},
            ("tokenizers", "1 tokenizer shared across all files", "N tokenizers for N files"),
            ("tokenizer", "1 tokenizer dùng chung cho tất cả file", "N tokenizer cho N file"),
        )


class FieldMappingError(MintDimError):
    """Raised when the fields-config count is neither 1 nor the input file count."""

    def __init__(self, *, input_files: int, field_configs: int):
        self._arity(
            {"input_files": int(input_files), "field_configs": int(field_configs)},
            ("field configs", "1 field config shared across all files", "N field configs for N files"),
            ("cấu hình fields", "1 cấu hình fields dùng chung cho tất cả file", "N cấu hình fields cho N file"),
        )


class TemplateMappingError(MintDimError):
    """Raised when the template count is neither 1 nor the input file count."""

    def __init__(self, *, input_files: int, templates: int):
        self._arity(
            {"input_files": int(input_files), "templates": int(templates)},
            ("templates", "1 template shared across all files", "N templates for N files"),
            ("template", "1 template dùng chung cho tất cả file", "N template cho N file"),
        )


class UnitMappingError(MintDimError):
    """Raised when the unit-config (sizes / build_batch) count is neither 1 nor the file count."""

    def __init__(self, *, input_files: int, unit_configs: int):
        self._arity(
            {"input_files": int(input_files), "unit_configs": int(unit_configs)},
            ("unit configs", "1 unit config shared across all files", "N unit configs for N input files"),
            ("cấu hình unit", "1 cấu hình unit dùng chung cho tất cả file", "N cấu hình unit cho N file đầu vào"),
        )


class OutputMappingError(MintDimError):
    """Raised when the output-dir count is neither 1 nor the file count, or (with
    ``conflict_dir``) when files resolving to one output dir differ in settings."""

    def __init__(self, *, input_files: int | None = None, output_dirs: int | None = None,
                 conflict_dir: str | None = None, files: list[str] = (), differing: list[str] = ()):
        kw = {
            "input_files": None if input_files is None else int(input_files),
            "output_dirs": None if output_dirs is None else int(output_dirs),
            "conflict_dir": None if conflict_dir is None else str(conflict_dir),
            "files": strs(files), "differing": strs(differing),
        }
        if kw["conflict_dir"] is None:
            if kw["input_files"] is None or kw["output_dirs"] is None:
                raise TypeError("OutputMappingError needs input_files and output_dirs, or conflict_dir")
            self._arity(
                kw,
                ("output directories", "1 shared output directory", "N output directories for N input files"),
                ("thư mục output", "1 thư mục output dùng chung", "N thư mục output cho N file đầu vào"),
            )
            return
        files_s, diff_s, d = ", ".join(kw["files"]), ", ".join(kw["differing"]), kw["conflict_dir"]
        self._set(
            kw,
            [f"Files {files_s} resolve to the same output directory {d} but differ in: {diff_s}.",
             "Rule: files sharing an output directory must share every setting."],
            [f"Các file {files_s} cùng trỏ tới thư mục output {d} nhưng khác nhau ở: {diff_s}.",
             "Quy tắc: các file dùng chung thư mục output phải dùng chung mọi cấu hình."],
        )


class TemplateFieldMismatchError(MintDimError):
    """Raised when a template placeholder is not declared in fields (``unused=False``)
    or a declared field is not used by the template (``unused=True``)."""

    def __init__(self, *, source_file: str, fields: list[str], template: str, field: str, unused: bool):
        kw = {"source_file": str(source_file), "fields": strs(fields), "template": str(template),
              "field": str(field), "unused": bool(unused)}
        decl = f"fields = {kw['fields']!r} template = {kw['template']!r}"
        f = kw["field"]
        if kw["unused"]:
            en_reason = f"fields declares this field, but template does not use {{{f}}}"
            vi_reason = f"fields khai báo field này, nhưng template không dùng {{{f}}}"
        else:
            en_reason = f"template uses {{{f}}}, but fields does not declare it"
            vi_reason = f"template dùng {{{f}}}, nhưng fields không khai báo field này"
        self._set(
            kw,
            [f"Source file: {kw['source_file']}", f"API declaration for this file: {decl}",
             f"Field causing template mismatch: {f} Reason: {en_reason}"],
            [f"File nguồn: {kw['source_file']}", f"Khai báo API cho file này: {decl}",
             f"Field gây lệch template: {f} Lý do: {vi_reason}"],
        )


class TemplateTokenizerError(MintDimError):
    """Raised when a template's literal segments encode to UNK (strict template-UNK policy)."""

    def __init__(self, *, file_index: int, template: str, literals: list[str] = ()):
        kw = {"file_index": int(file_index), "template": str(template), "literals": strs(literals)}
        en = ["Template literal segments produce UNK when encoded by the tokenizer.",
              f"File index: {kw['file_index']}", f"Template: {kw['template']!r}"]
        vi = ["Các đoạn literal của template tạo UNK khi được tokenizer encode.",
              f"Vị trí file: {kw['file_index']}", f"Template: {kw['template']!r}"]
        if kw["literals"]:
            lits = ", ".join(repr(s) for s in kw["literals"])
            en.append(f"Literal segments with UNK: {lits}")
            vi.append(f"Các đoạn literal tạo UNK: {lits}")
        en += ["Problem: template literal characters are not fully covered by tokenizer vocabulary",
               "Fix: adjust template literal characters, use a tokenizer that covers them, "
               "or run with an explicit template-UNK policy."]
        vi += ["Vấn đề: ký tự literal trong template không được tokenizer vocabulary bao phủ đầy đủ",
               "Cách sửa: chỉnh ký tự literal trong template, dùng tokenizer bao phủ các ký tự đó, "
               "hoặc chạy với template-UNK policy rõ ràng."]
        self._set(kw, en, vi)


class UnitValidationError(MintDimError):
    """Raised for invalid unit sizes / build_batch (non-positive, unsorted, duplicated)."""

    def __init__(self, *, problem: str = ""):
        problem = str(problem)
        en, vi = ["Invalid unit config."], ["Cấu hình unit không hợp lệ."]
        if problem:
            en.append(f"Problem: {problem}")
            vi.append(f"Vấn đề: {problem}")
        en += ["Rules:", bullets(["sizes must be positive integers", "sizes must be sorted ascending",
                                   "build_batch must be a positive integer", "sizes must not contain duplicates"])]
        vi += ["Quy tắc:", bullets(["sizes phải là các số nguyên dương", "sizes phải được sắp xếp tăng dần",
                                     "build_batch phải là số nguyên dương", "sizes không được trùng lặp"])]
        self._set({"problem": problem}, en, vi)


class UnitOverflowError(MintDimError):
    """Raised when a sample is longer than the largest unit size (strict overflow policy)."""

    def __init__(self, *, sample: str, token_count: int, max_unit_size: int):
        kw = {"sample": str(sample), "token_count": int(token_count), "max_unit_size": int(max_unit_size)}
        common = [f"Sample: {kw['sample']}", f"token_count: {kw['token_count']}",
                  f"max_unit_size: {kw['max_unit_size']}"]
        self._set(
            kw,
            ["Sample token length exceeds max unit size.", *common, "Fix:",
             bullets(["increase unit sizes", "or run with an overflow policy that truncates, skips, or prompts"])],
            ["Độ dài token của sample vượt quá unit size lớn nhất.", *common, "Cách sửa:",
             bullets(["tăng unit sizes", "hoặc chạy với overflow policy để truncate, skip, hoặc prompt"])],
        )


class OutputValidationError(MintDimError):
    """Raised when an output directory cannot take a new build: not empty (the seed's
    form), held by another running build, holding an incomplete build of ours, or not
    writable. ``problem`` names the form; ``detail`` says what was found."""

    PROBLEMS = ("not_empty", "held", "incomplete", "unwritable")

    def __init__(self, *, directory: str, problem: str = "not_empty", detail: str = ""):
        directory, problem, detail = str(directory), str(problem), str(detail)
        if problem not in self.PROBLEMS:
            raise TypeError(f"OutputValidationError problem must be one of {self.PROBLEMS}")
        kw = {"directory": directory}
        if problem != "not_empty":
            kw.update(problem=problem, detail=detail)
        if problem == "not_empty":
            en = ["Output directory already exists and is not empty.", f"Directory: {directory}",
                  "Use a new output directory."]
            vi = ["Thư mục output đã tồn tại và không rỗng.", f"Thư mục: {directory}",
                  "Hãy dùng thư mục output mới."]
        elif problem == "held":
            en = ["Another build holds this output directory.", f"Directory: {directory}",
                  f"Held by: {detail}",
                  "Wait for that build to end, or use another output directory."]
            vi = ["Một lần build khác đang giữ thư mục output này.", f"Thư mục: {directory}",
                  f"Đang giữ: {detail}",
                  "Hãy chờ lần build đó kết thúc, hoặc dùng thư mục output khác."]
        elif problem == "incomplete":
            en = ["Output directory holds an incomplete mintdim-beam build "
                  "(failed, interrupted or killed).", f"Directory: {directory}",
                  f"Found: {detail}",
                  f"Remove it with: mintdim-beam clean {directory}"]
            vi = ["Thư mục output chứa một lần build mintdim-beam chưa hoàn tất "
                  "(lỗi, bị ngắt hoặc bị kill).", f"Thư mục: {directory}",
                  f"Tìm thấy: {detail}",
                  f"Xoá nó bằng: mintdim-beam clean {directory}"]
        else:
            en = ["Output directory cannot be written.", f"Directory: {directory}",
                  f"Problem: {detail}", "Use a writable output directory."]
            vi = ["Không ghi được vào thư mục output.", f"Thư mục: {directory}",
                  f"Vấn đề: {detail}", "Hãy dùng thư mục output ghi được."]
        self._set(kw, en, vi)


class TokenDTypeCapacityError(MintDimError):
    """Raised when the tokenizer vocab_size does not fit uint32 token ids (the seed's
    form); with ``dtype``/``max_value``, when a value that must be stored in the record
    header (a declared unit size, or an ``extend``ed sample's token count) is larger
    than the token dtype holds (``unit_size``, or ``sample`` and ``token_count``)."""

    def __init__(self, *, vocab_size: int | None = None, dtype: str | None = None,
                 max_value: int | None = None, unit_size: int | None = None,
                 sample: str | None = None, token_count: int | None = None,
                 token_id: int | None = None):
        if token_id is not None:
            self._token_id(dtype, max_value, token_id)
            return
        if dtype is not None:
            self._stored_value(vocab_size, dtype, max_value, unit_size, sample, token_count)
            return
        v = int(vocab_size)
        u16, u32 = 2**16 - 1, 2**32 - 1
        self._set(
            {"vocab_size": v},
            ["Tokenizer vocabulary size is too large for the token dtypes supported by MintDim.",
             f"Tokenizer vocab_size: {num(v, ',')}", "Supported token dtypes:",
             bullets([f"uint16: max vocab_size {num(u16, ',')}", f"uint32: max vocab_size {num(u32, ',')}"]),
             "Fix:", bullets(["use a tokenizer with a smaller vocabulary",
                               "or use a MintDim version that supports a wider token dtype"])],
            ["Kích thước vocabulary của tokenizer quá lớn so với token dtype MintDim hỗ trợ.",
             f"Tokenizer vocab_size: {num(v, '.')}", "Token dtype được hỗ trợ:",
             bullets([f"uint16: vocab_size tối đa {num(u16, '.')}", f"uint32: vocab_size tối đa {num(u32, '.')}"]),
             "Cách sửa:", bullets(["dùng tokenizer có vocabulary nhỏ hơn",
                                    "hoặc dùng phiên bản MintDim hỗ trợ token dtype rộng hơn"])],
        )

    def _token_id(self, dtype, max_value, token_id):
        """Ours: an id a write found above its dtype (never wrapped; a tokenizer that
        produced an id above the largest it declares)."""
        kw = {"dtype": str(dtype), "max_value": int(max_value), "token_id": int(token_id)}
        self._set(kw, [
            "A token id is larger than the token dtype can store.",
            f"Token id: {num(kw['token_id'], ',')}",
            f"{kw['dtype']} holds ids up to {num(kw['max_value'], ',')}",
            "Fix: the dtype is chosen from the largest id the tokenizer declares; this "
            "tokenizer produced a larger one. Nothing was written with it."], [
            "Một token id lớn hơn giá trị token dtype lưu được.",
            f"Token id: {num(kw['token_id'], '.')}",
            f"{kw['dtype']} chứa id tối đa {num(kw['max_value'], '.')}",
            "Cách sửa: dtype được chọn theo id lớn nhất mà tokenizer khai báo; tokenizer này "
            "đã tạo ra id lớn hơn. Không có gì được ghi với id đó."])

    def _stored_value(self, vocab_size, dtype, max_value, unit_size, sample, token_count):
        kw = {"vocab_size": None if vocab_size is None else int(vocab_size), "dtype": str(dtype),
              "max_value": int(max_value),
              "unit_size": None if unit_size is None else int(unit_size),
              "sample": None if sample is None else str(sample),
              "token_count": None if token_count is None else int(token_count)}
        limit_en = f"{kw['dtype']} holds segment lengths up to {num(kw['max_value'], ',')}"
        limit_vi = f"{kw['dtype']} chứa độ dài segment tối đa {num(kw['max_value'], '.')}"
        if kw["sample"] is not None:
            en = ["Sample is too long to be stored with the token dtype (on_overflow=extend).",
                  f"Sample: {kw['sample']}", f"token_count: {num(kw['token_count'], ',')}", limit_en,
                  "Fix:", bullets(["run with on_overflow truncate or skip",
                                    "or use a tokenizer with a vocabulary over 65,535 (uint32)"])]
            vi = ["Sample quá dài để lưu bằng token dtype (on_overflow=extend).",
                  f"Sample: {kw['sample']}", f"token_count: {num(kw['token_count'], '.')}", limit_vi,
                  "Cách sửa:", bullets(["chạy với on_overflow truncate hoặc skip",
                                         "hoặc dùng tokenizer có vocabulary trên 65.535 (uint32)"])]
        else:
            en = ["Unit size is larger than the token dtype can store in a record header.",
                  f"Unit size: {num(kw['unit_size'], ',')}",
                  f"Tokenizer vocab_size: {num(kw['vocab_size'] or 0, ',')}", limit_en,
                  "Fix:", bullets([f"use unit sizes up to {num(kw['max_value'], ',')}"])]
            vi = ["Unit size lớn hơn giá trị token dtype lưu được trong header của record.",
                  f"Unit size: {num(kw['unit_size'], '.')}",
                  f"Tokenizer vocab_size: {num(kw['vocab_size'] or 0, '.')}", limit_vi,
                  "Cách sửa:", bullets([f"dùng unit size tối đa {num(kw['max_value'], '.')}"])]
        self._set(kw, en, vi)


class SamplesPerShardError(MintDimError):
    """Raised for a non-positive / non-int samples_per_shard entry (``index``, ``value``)
    or an entry count that is neither 1 nor the file count (``input_files``, ``entries``)."""

    def __init__(self, *, index: int | None = None, value: Any = None,
                 input_files: int | None = None, entries: int | None = None,
                 not_list: bool = False):
        if not isinstance(value, JSON_SCALARS):
            value = repr(value) if not isinstance(value, (list, tuple)) else list(value)
        kw = {"index": None if index is None else int(index), "value": value,
              "input_files": None if input_files is None else int(input_files),
              "entries": None if entries is None else int(entries)}
        if not_list:  # ours: the seed's contract is a list (one entry, or one per file)
            kw["not_list"] = True
            en_p = (f"samples_per_shard must be a list of positive ints (one entry, or one "
                    f"per input file), got {value!r}")
            vi_p = (f"samples_per_shard phải là list các số nguyên dương (một phần tử, hoặc "
                    f"mỗi file đầu vào một phần tử), hiện tại là {value!r}")
        elif kw["input_files"] is not None and kw["entries"] is not None:
            en_p = f"Received {kw['input_files']} input files but {kw['entries']} samples_per_shard entries"
            vi_p = f"Nhận {kw['input_files']} file đầu vào nhưng có {kw['entries']} entries samples_per_shard"
        elif kw["index"] is not None:
            en_p = f"samples_per_shard[{kw['index']}] must be a positive int, got {value!r}"
            vi_p = f"samples_per_shard[{kw['index']}] phải là số nguyên dương, hiện tại là {value!r}"
        else:
            raise TypeError("SamplesPerShardError needs index (value form) or input_files and entries (arity form)")
        self._set(
            kw,
            ["Invalid samples_per_shard.", f"Problem: {en_p}", "Rules:",
             bullets(["each samples_per_shard[i] is a positive int",
                       "len(samples_per_shard) == 1 or len(samples_per_shard) == file_count"])],
            ["samples_per_shard không hợp lệ.", f"Vấn đề: {vi_p}", "Quy tắc:",
             bullets(["mỗi samples_per_shard[i] phải là số nguyên dương",
                       "len(samples_per_shard) == 1 hoặc len(samples_per_shard) == số lượng file"])],
        )
