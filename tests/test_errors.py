"""Tests for mintdim_beam.core.errors: exact seed README texts, payload and pickle round trips."""

import json
import pickle

import pytest

from mintdim_beam.core import errors as E
from mintdim_beam.core.errors import (ERROR_CLASSES, FieldMappingError, MintDimError,
                                      MintDimFileNotFoundError, OutputMappingError,
                                      OutputValidationError, PipelineValidationError,
                                      SampleSchemaError, SamplesPerShardError,
                                      SourceParseError, TemplateFieldMismatchError,
                                      TemplateMappingError, TemplateTokenizerError,
                                      TokenDTypeCapacityError, TokenizerMappingError,
                                      TokenizerSpecialTokenError, TokenizerValidationError,
                                      UnitMappingError, UnitOverflowError, UnitValidationError,
                                      error_from_payload)

# Expected blocks copied verbatim from the seed README, section "message errors".
# Raw strings: the template examples contain a literal backslash-n (Python repr).
SEED = {
    "pipeline": (
r"""[english] PipelineValidationError: Pipeline configuration is incomplete.

Missing:

• source.files
• source.fields
• source.templates
• tokenizer
• units.sizes
• units.build_batch
• output.dir
• output.samples_per_shard""",
r"""[vietnam] PipelineValidationError: Pipeline chưa được cấu hình đầy đủ.

Thiếu:

• source.files
• source.fields
• source.templates
• tokenizer
• units.sizes
• units.build_batch
• output.dir
• output.samples_per_shard

Thiếu cấu hình nào thì báo thiếu cấu hình đó.""",
    ),
    "file_not_found": (
r"""[english] MintDimFileNotFoundError: Required file was not found.

Context: source

Missing file: ./data/train.jsonl""",
r"""[vietnam] MintDimFileNotFoundError: Không tìm thấy file cần dùng.

Ngữ cảnh: source

File thiếu: ./data/train.jsonl""",
    ),
    "source_parse": (
r"""[english] SourceParseError: JSONL line could not be parsed.

File: ./data/alpaca.jsonl

Line: 18291

Reason: invalid JSON syntax""",
r"""[vietnam] SourceParseError: Không parse được dòng JSONL.

File: ./data/alpaca.jsonl

Dòng: 18291

Lý do: invalid JSON syntax""",
    ),
    "sample_schema": (
r"""[english] SampleSchemaError: JSONL sample is missing declared fields.

File: ./data/alpaca.jsonl

Line: 18291

Declared fields: instruction input output

Missing fields: input

Available keys: instruction output metadata""",
r"""[vietnam] SampleSchemaError: Sample JSONL thiếu field đã khai báo.

File: ./data/alpaca.jsonl

Dòng: 18291

Field đã khai báo: instruction input output

Field bị thiếu: input

Key hiện có: instruction output metadata""",
    ),
    "tokenizer_validation": (
r"""[english] TokenizerValidationError: Invalid tokenizer configuration.

Component: files

Problem: tokenizer file path must be str, got int

Rules:

• tokenizer.files must be a list of tokenizer file paths
• each tokenizer file path must be a string
• unk_id and pad_id are loaded from the tokenizer library""",
r"""[vietnam] TokenizerValidationError: Cấu hình tokenizer không hợp lệ.

Thành phần: files

Vấn đề: tokenizer file path must be str, got int

Quy tắc:

• tokenizer.files phải là list các đường dẫn file tokenizer
• mỗi đường dẫn file tokenizer phải là string
• unk_id và pad_id được lấy từ thư viện tokenizer""",
    ),
    "special_token": (
r"""[english] TokenizerSpecialTokenError: Tokenizer library did not expose a required special token.

Tokenizer: ./tokenizer/tokenizer.model

Special token: pad_id

Problem: missing pad_id

Rule: MintDim uses tokenizer-provided special token ids only; do not declare unk_id/pad_id manually.""",
r"""[vietnam] TokenizerSpecialTokenError: Thư viện tokenizer không cung cấp special token bắt buộc.

Tokenizer: ./tokenizer/tokenizer.model

Special token: pad_id

Vấn đề: missing pad_id

Quy tắc: MintDim chỉ dùng special token id do tokenizer cung cấp; không khai báo unk_id/pad_id thủ công.""",
    ),
    "unsupported_format": (
r"""[english] TokenizerValidationError: Unsupported tokenizer format.

Supported formats:

• sentencepiece (.model)
• huggingface tokenizer (.json)""",
r"""[vietnam] TokenizerValidationError: Định dạng tokenizer chưa được hỗ trợ.

Các định dạng hiện hỗ trợ:

• sentencepiece (.model)
• huggingface tokenizer (.json)""",
    ),
    "tokenizer_mapping": (
r"""[english] TokenizerMappingError: Received 3 input files but 2 tokenizers.

MintDim supports:

• 1 tokenizer shared across all files
• N tokenizers for N files""",
r"""[vietnam] TokenizerMappingError: Nhận 3 file đầu vào nhưng có 2 tokenizer.

MintDim hỗ trợ:

• 1 tokenizer dùng chung cho tất cả file
• N tokenizer cho N file""",
    ),
    "field_mapping": (
r"""[english] FieldMappingError: Received 3 input files but 2 field configs.

MintDim supports:

• 1 field config shared across all files
• N field configs for N files""",
r"""[vietnam] FieldMappingError: Nhận 3 file đầu vào nhưng có 2 cấu hình fields.

MintDim hỗ trợ:

• 1 cấu hình fields dùng chung cho tất cả file
• N cấu hình fields cho N file""",
    ),
    "template_mapping": (
r"""[english] TemplateMappingError: Received 3 input files but 2 templates.

MintDim supports:

• 1 template shared across all files
• N templates for N files""",
r"""[vietnam] TemplateMappingError: Nhận 3 file đầu vào nhưng có 2 template.

MintDim hỗ trợ:

• 1 template dùng chung cho tất cả file
• N template cho N file""",
    ),
    "mismatch_undeclared": (
r"""[english] TemplateFieldMismatchError: Source file: ./data/train.jsonl

API declaration for this file: fields = ['instruction', 'input', 'output'] template = '{instruction}\n\n{prompt}\n\n{output}'

Field causing template mismatch: prompt Reason: template uses {prompt}, but fields does not declare it""",
r"""[vietnam] TemplateFieldMismatchError: File nguồn: ./data/train.jsonl

Khai báo API cho file này: fields = ['instruction', 'input', 'output'] template = '{instruction}\n\n{prompt}\n\n{output}'

Field gây lệch template: prompt Lý do: template dùng {prompt}, nhưng fields không khai báo field này""",
    ),
    "mismatch_unused": (
r"""[english] TemplateFieldMismatchError: Source file: ./data/train.jsonl

API declaration for this file: fields = ['instruction', 'input', 'output'] template = '{instruction}\n\n{output}'

Field causing template mismatch: input Reason: fields declares this field, but template does not use {input}""",
r"""[vietnam] TemplateFieldMismatchError: File nguồn: ./data/train.jsonl

Khai báo API cho file này: fields = ['instruction', 'input', 'output'] template = '{instruction}\n\n{output}'

Field gây lệch template: input Lý do: fields khai báo field này, nhưng template không dùng {input}""",
    ),
    "template_tokenizer": (
r"""[english] TemplateTokenizerError: Template literal segments produce UNK when encoded by the tokenizer.

File index: 0

Template: '{a}\n\n{b}'

Problem: template literal characters are not fully covered by tokenizer vocabulary

Fix: adjust template literal characters, use a tokenizer that covers them, or run with an explicit template-UNK policy.""",
r"""[vietnam] TemplateTokenizerError: Các đoạn literal của template tạo UNK khi được tokenizer encode.

Vị trí file: 0

Template: '{a}\n\n{b}'

Vấn đề: ký tự literal trong template không được tokenizer vocabulary bao phủ đầy đủ

Cách sửa: chỉnh ký tự literal trong template, dùng tokenizer bao phủ các ký tự đó, hoặc chạy với template-UNK policy rõ ràng.""",
    ),
    "unit_mapping": (
r"""[english] UnitMappingError: Received 3 input files but 2 unit configs.

MintDim supports:

• 1 unit config shared across all files
• N unit configs for N input files""",
r"""[vietnam] UnitMappingError: Nhận 3 file đầu vào nhưng có 2 cấu hình unit.

MintDim hỗ trợ:

• 1 cấu hình unit dùng chung cho tất cả file
• N cấu hình unit cho N file đầu vào""",
    ),
    "output_mapping": (
r"""[english] OutputMappingError: Received 3 input files but 2 output directories.

MintDim supports:

• 1 shared output directory
• N output directories for N input files""",
r"""[vietnam] OutputMappingError: Nhận 3 file đầu vào nhưng có 2 thư mục output.

MintDim hỗ trợ:

• 1 thư mục output dùng chung
• N thư mục output cho N file đầu vào""",
    ),
    "unit_validation": (
r"""[english] UnitValidationError: Invalid unit config.

Rules:

• sizes must be positive integers
• sizes must be sorted ascending
• build_batch must be a positive integer""",
r"""[vietnam] UnitValidationError: Cấu hình unit không hợp lệ.

Quy tắc:

• sizes phải là các số nguyên dương
• sizes phải được sắp xếp tăng dần
• build_batch phải là số nguyên dương""",
    ),
    "unit_overflow": (
r"""[english] UnitOverflowError: Sample token length exceeds max unit size.

Sample: ./data/alpaca.jsonl:18291

token_count: 417

max_unit_size: 320

Fix:

• increase unit sizes
• or run with an overflow policy that truncates, skips, or prompts""",
r"""[vietnam] UnitOverflowError: Độ dài token của sample vượt quá unit size lớn nhất.

Sample: ./data/alpaca.jsonl:18291

token_count: 417

max_unit_size: 320

Cách sửa:

• tăng unit sizes
• hoặc chạy với overflow policy để truncate, skip, hoặc prompt""",
    ),
    "output_validation": (
r"""[english] OutputValidationError: Output directory already exists and is not empty.

Directory: ./artifacts/token_shards

Use a new output directory.""",
r"""[vietnam] OutputValidationError: Thư mục output đã tồn tại và không rỗng.

Thư mục: ./artifacts/token_shards

Hãy dùng thư mục output mới.""",
    ),
    "dtype_capacity": (
r"""[english] TokenDTypeCapacityError: Tokenizer vocabulary size is too large for the token dtypes supported by MintDim.

Tokenizer vocab_size: 5,000,000,000

Supported token dtypes:

• uint16: max vocab_size 65,535
• uint32: max vocab_size 4,294,967,295

Fix:

• use a tokenizer with a smaller vocabulary
• or use a MintDim version that supports a wider token dtype""",
r"""[vietnam] TokenDTypeCapacityError: Kích thước vocabulary của tokenizer quá lớn so với token dtype MintDim hỗ trợ.

Tokenizer vocab_size: 5.000.000.000

Token dtype được hỗ trợ:

• uint16: vocab_size tối đa 65.535
• uint32: vocab_size tối đa 4.294.967.295

Cách sửa:

• dùng tokenizer có vocabulary nhỏ hơn
• hoặc dùng phiên bản MintDim hỗ trợ token dtype rộng hơn""",
    ),
    "sps_value": (
r"""[english] SamplesPerShardError: Invalid samples_per_shard.

Problem: samples_per_shard[0] must be a positive int, got 0

Rules:

• each samples_per_shard[i] is a positive int
• len(samples_per_shard) == 1 or len(samples_per_shard) == file_count""",
r"""[vietnam] SamplesPerShardError: samples_per_shard không hợp lệ.

Vấn đề: samples_per_shard[0] phải là số nguyên dương, hiện tại là 0

Quy tắc:

• mỗi samples_per_shard[i] phải là số nguyên dương
• len(samples_per_shard) == 1 hoặc len(samples_per_shard) == số lượng file""",
    ),
    "sps_arity": (
r"""[english] SamplesPerShardError: Invalid samples_per_shard.

Problem: Received 3 input files but 2 samples_per_shard entries

Rules:

• each samples_per_shard[i] is a positive int
• len(samples_per_shard) == 1 or len(samples_per_shard) == file_count""",
r"""[vietnam] SamplesPerShardError: samples_per_shard không hợp lệ.

Vấn đề: Nhận 3 file đầu vào nhưng có 2 entries samples_per_shard

Quy tắc:

• mỗi samples_per_shard[i] phải là số nguyên dương
• len(samples_per_shard) == 1 hoặc len(samples_per_shard) == số lượng file""",
    ),
}

MISSING_ALL = [
    "source.files", "source.fields", "source.templates", "tokenizer",
    "units.sizes", "units.build_batch", "output.dir", "output.samples_per_shard",
]

# Seed example name -> the error built from the example's values.
CASES = {
    "pipeline": lambda: PipelineValidationError(missing=MISSING_ALL),
    "file_not_found": lambda: MintDimFileNotFoundError(context="source", missing_file="./data/train.jsonl"),
    "source_parse": lambda: SourceParseError(file="./data/alpaca.jsonl", line=18291, reason="invalid JSON syntax"),
    "sample_schema": lambda: SampleSchemaError(
        file="./data/alpaca.jsonl", line=18291, declared_fields=["instruction", "input", "output"],
        missing_fields=["input"], available_keys=["instruction", "output", "metadata"]),
    "tokenizer_validation": lambda: TokenizerValidationError(
        component="files", problem="tokenizer file path must be str, got int"),
    "special_token": lambda: TokenizerSpecialTokenError(
        tokenizer="./tokenizer/tokenizer.model", special_token="pad_id", problem="missing pad_id"),
    "unsupported_format": lambda: TokenizerValidationError(unsupported_format=True),
    "tokenizer_mapping": lambda: TokenizerMappingError(input_files=3, tokenizers=2),
    "field_mapping": lambda: FieldMappingError(input_files=3, field_configs=2),
    "template_mapping": lambda: TemplateMappingError(input_files=3, templates=2),
    "mismatch_undeclared": lambda: TemplateFieldMismatchError(
        source_file="./data/train.jsonl", fields=["instruction", "input", "output"],
        template="{instruction}\n\n{prompt}\n\n{output}", field="prompt", unused=False),
    "mismatch_unused": lambda: TemplateFieldMismatchError(
        source_file="./data/train.jsonl", fields=["instruction", "input", "output"],
        template="{instruction}\n\n{output}", field="input", unused=True),
    "template_tokenizer": lambda: TemplateTokenizerError(file_index=0, template="{a}\n\n{b}"),
    "unit_mapping": lambda: UnitMappingError(input_files=3, unit_configs=2),
    "output_mapping": lambda: OutputMappingError(input_files=3, output_dirs=2),
    "unit_validation": lambda: UnitValidationError(),
    "unit_overflow": lambda: UnitOverflowError(sample="./data/alpaca.jsonl:18291", token_count=417, max_unit_size=320),
    "output_validation": lambda: OutputValidationError(directory="./artifacts/token_shards"),
    "dtype_capacity": lambda: TokenDTypeCapacityError(vocab_size=5_000_000_000),
    "sps_value": lambda: SamplesPerShardError(index=0, value=0),
    "sps_arity": lambda: SamplesPerShardError(input_files=3, entries=2),
}

# Deliberate extension over the seed: UnitValidationError always lists a 4th rule.
SEED_EXTRA = {
    "unit_validation": ("\n• sizes must not contain duplicates", "\n• sizes không được trùng lặp"),
}


def test_every_seed_example_has_a_case():
    assert set(CASES) == set(SEED)


@pytest.mark.parametrize("name", sorted(SEED))
def test_seed_text_exact(name):
    exc = CASES[name]()
    en, vi = SEED[name]
    extra_en, extra_vi = SEED_EXTRA.get(name, ("", ""))
    assert exc.english == en + extra_en
    assert exc.vietnamese == vi + extra_vi
    assert str(exc) == exc.english + "\n\n" + exc.vietnamese
    assert isinstance(exc, MintDimError)


@pytest.mark.parametrize("name", sorted(CASES))
def test_payload_round_trip(name):
    exc = CASES[name]()
    payload = exc.to_payload()
    assert payload == {"class": type(exc).__name__, "kwargs": exc.kwargs}
    wire = json.loads(json.dumps(payload))  # payload must survive JSON
    back = error_from_payload(wire)
    assert type(back) is type(exc)
    assert back.kwargs == exc.kwargs
    assert str(back) == str(exc)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pickle_round_trip(name):
    exc = CASES[name]()
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert back.kwargs == exc.kwargs
    assert back.english == exc.english and back.vietnamese == exc.vietnamese
    assert str(back) == str(exc)


def test_raised_and_caught_as_own_class():
    with pytest.raises(UnitOverflowError) as info:
        raise pickle.loads(pickle.dumps(UnitOverflowError(sample="f:1", token_count=9, max_unit_size=8)))
    assert info.value.kwargs == {"sample": "f:1", "token_count": 9, "max_unit_size": 8}


def test_registry_and_unknown_payload():
    assert ERROR_CLASSES["SampleSchemaError"] is SampleSchemaError
    assert len(ERROR_CLASSES) == len(E.__all__) - 3  # minus ERROR_CLASSES, MintDimError, error_from_payload
    assert all(issubclass(c, MintDimError) for c in ERROR_CLASSES.values())
    assert not issubclass(MintDimFileNotFoundError, FileNotFoundError)
    with pytest.raises(ValueError):
        error_from_payload({"class": "NoSuchError", "kwargs": {}})


def test_kwargs_are_keyword_only():
    with pytest.raises(TypeError):
        OutputValidationError("./out")  # type: ignore[misc]


def test_sample_schema_invalid_field():
    exc = SampleSchemaError(file="./d.jsonl", line=7, declared_fields=["q", "a"],
                            invalid_field="a", invalid_type="null")
    assert exc.english == (
        "[english] SampleSchemaError: JSONL sample has a declared field with an unsupported value.\n\n"
        "File: ./d.jsonl\n\nLine: 7\n\nDeclared fields: q a\n\nField: a\n\nJSON type: null\n\n"
        "Rule: field values must be a string, number or boolean"
    )
    assert exc.vietnamese == (
        "[vietnam] SampleSchemaError: Sample JSONL có field đã khai báo mang giá trị không hỗ trợ.\n\n"
        "File: ./d.jsonl\n\nDòng: 7\n\nField đã khai báo: q a\n\nField: a\n\nKiểu JSON: null\n\n"
        "Quy tắc: giá trị field phải là string, số hoặc boolean"
    )
    assert str(error_from_payload(exc.to_payload())) == str(exc)


def test_source_parse_reason_same_in_both_languages():
    exc = SourceParseError(file="x.jsonl", line=2, reason="JSONL row is not a JSON object")
    assert exc.english.endswith("\n\nReason: JSONL row is not a JSON object")
    assert exc.vietnamese.endswith("\n\nLý do: JSONL row is not a JSON object")


def test_output_mapping_conflict_form():
    exc = OutputMappingError(conflict_dir="./out", files=["./a.jsonl", "./b.jsonl"],
                             differing=["fields", "tokenizer"])
    assert exc.english == (
        "[english] OutputMappingError: Files ./a.jsonl, ./b.jsonl resolve to the same output directory ./out "
        "but differ in: fields, tokenizer.\n\n"
        "Rule: files sharing an output directory must share every setting."
    )
    assert exc.vietnamese == (
        "[vietnam] OutputMappingError: Các file ./a.jsonl, ./b.jsonl cùng trỏ tới thư mục output ./out "
        "nhưng khác nhau ở: fields, tokenizer.\n\n"
        "Quy tắc: các file dùng chung thư mục output phải dùng chung mọi cấu hình."
    )
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is OutputMappingError and str(back) == str(exc)


def test_unit_validation_with_problem():
    exc = UnitValidationError(problem="sizes[0] must be strictly ascending, got [128, 64]")
    assert exc.english == (
        "[english] UnitValidationError: Invalid unit config.\n\n"
        "Problem: sizes[0] must be strictly ascending, got [128, 64]\n\n"
        "Rules:\n\n"
        "• sizes must be positive integers\n"
        "• sizes must be sorted ascending\n"
        "• build_batch must be a positive integer\n"
        "• sizes must not contain duplicates"
    )
    assert exc.vietnamese == (
        "[vietnam] UnitValidationError: Cấu hình unit không hợp lệ.\n\n"
        "Vấn đề: sizes[0] must be strictly ascending, got [128, 64]\n\n"
        "Quy tắc:\n\n"
        "• sizes phải là các số nguyên dương\n"
        "• sizes phải được sắp xếp tăng dần\n"
        "• build_batch phải là số nguyên dương\n"
        "• sizes không được trùng lặp"
    )


def test_template_tokenizer_literals_line():
    exc = TemplateTokenizerError(file_index=1, template="«{a}»", literals=["«", "»"])
    assert "\n\nTemplate: '«{a}»'\n\nLiteral segments with UNK: '«', '»'\n\nProblem: " in exc.english
    assert "\n\nTemplate: '«{a}»'\n\nCác đoạn literal tạo UNK: '«', '»'\n\nVấn đề: " in exc.vietnamese


def test_samples_per_shard_string_value_uses_repr():
    exc = SamplesPerShardError(index=1, value="10")
    assert "Problem: samples_per_shard[1] must be a positive int, got '10'" in exc.english
    assert "Vấn đề: samples_per_shard[1] phải là số nguyên dương, hiện tại là '10'" in exc.vietnamese
    with pytest.raises(TypeError):
        SamplesPerShardError()


def test_dtype_capacity_number_formatting():
    exc = TokenDTypeCapacityError(vocab_size=70000)
    assert "Tokenizer vocab_size: 70,000\n" in exc.english
    assert "Tokenizer vocab_size: 70.000\n" in exc.vietnamese


OURS = {
    "held": lambda: OutputValidationError(directory="out", problem="held", detail="run r, pid 1"),
    "incomplete": lambda: OutputValidationError(directory="out", problem="incomplete", detail="x"),
    "unwritable": lambda: OutputValidationError(directory="out", problem="unwritable",
                                                detail="Read-only file system"),
    "unit_size": lambda: TokenDTypeCapacityError(dtype="uint16", max_value=65535,
                                                 unit_size=400000, vocab_size=8000),
    "extend": lambda: TokenDTypeCapacityError(dtype="uint16", max_value=65535, sample="a:3",
                                              token_count=70000, vocab_size=8000),
    "changed": lambda: E.SourceChangedError(file="a.jsonl", planned="size 1", found="size 2"),
    "format": lambda: E.SourceFormatError(file="a.bz2", found="bzip2", expected="JSONL"),
    "crash": lambda: E.EncoderCrashError(file="a.jsonl", lines="lines 1-4", reason="SIGKILL"),
    "write": lambda: E.OutputWriteError(directory="out", reason="No space left on device"),
    "interrupt": lambda: E.BuildInterruptedError(signal="SIGTERM"),
    "clean": lambda: E.OutputCleanError(directory="out", reason="complete build"),
    # train-tokenizer (`core/errors/train.py`)
    "trainer": lambda: E.TrainerValidationError(component="trainer.type", rule="trainer_type",
                                                value="'wordpiece'"),
    "repeated": lambda: E.SpecialTokenRepeatedError(component="trainer.special_tokens",
                                                    token="<s>", positions=[0, 3]),
    "split": lambda: E.SpecialTokenSplitError(component="trainer.user_defined_symbols",
                                              token="<a b>", pieces=["<a", "b>"]),
    "vocab": lambda: E.TrainerVocabSizeError(vocab_size=200, special=3, alphabet=256,
                                             where="initial_alphabet"),
    "empty": lambda: E.TrainEmptyCorpusError(files=["a.jsonl"], rows=2, held_out=0),
    "min_frequency": lambda: E.TrainerMinFrequencyError(min_frequency=9, largest=4, pair="ab"),
    "tie": lambda: E.TrainerAlphabetTieError(limit_alphabet=2, count=5, tied="abc",
                                             limits=[1, 4]),
    "overflow": lambda: E.TrainerCountOverflowError(pair="th", count=2_200_000_000),
}


@pytest.mark.parametrize("name", sorted(OURS))
def test_our_errors_are_bilingual_and_survive_payloads_and_pickles(name):
    error = OURS[name]()
    name_of = type(error).__name__
    assert error.english.startswith(f"[english] {name_of}: ")
    assert error.vietnamese.startswith(f"[vietnam] {name_of}: ")
    assert error.english.split(": ", 1)[1] != error.vietnamese.split(": ", 1)[1]
    for copy in (error_from_payload(json.loads(json.dumps(error.to_payload()))),
                 pickle.loads(pickle.dumps(error))):
        assert type(copy) is type(error) and str(copy) == str(error)


def test_the_seed_form_of_output_validation_is_unchanged_by_the_new_forms():
    assert OutputValidationError(directory="d").kwargs == {"directory": "d"}
    with pytest.raises(TypeError):
        OutputValidationError(directory="d", problem="nope")


def test_the_errors_have_a_stable_public_path():
    """`mintdim_beam.errors` and `from mintdim_beam import MintDimError` are the paths
    users catch errors by; they hold the very classes the code raises."""
    import mintdim_beam
    import mintdim_beam.core.errors as defined
    import mintdim_beam.errors as public

    assert mintdim_beam.MintDimError is defined.MintDimError
    assert public.__all__ == defined.__all__ and len(public.__all__) > 30
    for name in public.__all__:
        assert getattr(public, name) is getattr(defined, name)
    with pytest.raises(mintdim_beam.MintDimError):
        mintdim_beam.pipeline("unit-build").run()
