"""Bilingual (English / Vietnamese) error types for mintdim_beam.

Every error is built from keyword-only arguments that are kept in
``exc.kwargs`` as JSON-serialisable values.  ``exc.english`` and
``exc.vietnamese`` hold the two message blocks described in the MintDim
README ("message errors"); ``str(exc)`` is both blocks separated by a blank
line.  ``to_payload()`` / ``error_from_payload()`` carry an error across a
process boundary (e.g. from a Beam worker back to the caller) and rebuild it
as the same class; pickling goes through the same path.
"""

from mintdim_beam.core.errors.bad_rows import TooManyRejectedError
from mintdim_beam.core.errors.base import ERROR_CLASSES, MintDimError, error_from_payload
from mintdim_beam.core.errors.config_keys import ConfigUnknownKeyError, ConfigValueError
from mintdim_beam.core.errors.ours import (BuildInterruptedError, EncoderCrashError,
                                           OutputCleanError, OutputWriteError,
                                           ReaderArgumentError, ReaderStateError, ScratchSpaceError,
                                           ShardRecordError,
                                           SourceChangedError, SourceFormatError)
from mintdim_beam.core.errors.export import ExportInputError, ExportValidationError
from mintdim_beam.core.errors.inputs import SourceFilesError
from mintdim_beam.core.errors.pack import PackEmptyError, PackValidationError
from mintdim_beam.core.errors.read import (UnitReadBatchError, UnitReadMaskingError,
                                           UnitReadMetadataError, UnitReadQueueError,
                                           UnitReadRuntimeError, UnitReadShardError,
                                           UnitReadValidationError)
from mintdim_beam.core.errors.train import (SpecialTokenRepeatedError, SpecialTokenSplitError,
                                            TrainEmptyCorpusError, TrainerAlphabetTieError,
                                            TrainerCountOverflowError, TrainerMinFrequencyError,
                                            TrainerValidationError, TrainerVocabSizeError)
from mintdim_beam.core.errors.records import RecordKeyError, TransformArgumentError
from mintdim_beam.core.errors.round_trip import SampleRoundTripError, TemplateRoundTripError
from mintdim_beam.core.errors.seed import (FieldMappingError, MintDimFileNotFoundError,
                                           OutputMappingError, OutputValidationError,
                                           PipelineValidationError, SampleSchemaError,
                                           SamplesPerShardError, SourceParseError,
                                           TemplateFieldMismatchError, TemplateMappingError,
                                           TemplateTokenizerError, TokenDTypeCapacityError,
                                           TokenizerMappingError, TokenizerSpecialTokenError,
                                           TokenizerValidationError, UnitMappingError,
                                           UnitOverflowError, UnitValidationError)

__all__ = [
    "TooManyRejectedError",
    "ERROR_CLASSES",
    "MintDimError",
    "PipelineValidationError",
    "MintDimFileNotFoundError",
    "SourceParseError",
    "SampleSchemaError",
    "TokenizerValidationError",
    "TokenizerSpecialTokenError",
    "TokenizerMappingError",
    "FieldMappingError",
    "TemplateMappingError",
    "UnitMappingError",
    "OutputMappingError",
    "TemplateFieldMismatchError",
    "TemplateTokenizerError",
    "UnitValidationError",
    "UnitOverflowError",
    "OutputValidationError",
    "TokenDTypeCapacityError",
    "SamplesPerShardError",
    "ConfigUnknownKeyError",
    "ConfigValueError",
    "SourceChangedError",
    "SourceFormatError",
    "SourceFilesError",
    "EncoderCrashError",
    "OutputWriteError",
    "BuildInterruptedError",
    "OutputCleanError",
    "ShardRecordError",
    "ReaderStateError",
    "ReaderArgumentError",
    "ScratchSpaceError",
    "RecordKeyError",
    "TransformArgumentError",
    "UnitReadValidationError",
    "UnitReadMetadataError",
    "UnitReadShardError",
    "UnitReadMaskingError",
    "UnitReadQueueError",
    "UnitReadBatchError",
    "UnitReadRuntimeError",
    "PackValidationError",
    "PackEmptyError",
    "TrainerValidationError",
    "SpecialTokenRepeatedError",
    "SpecialTokenSplitError",
    "TrainerVocabSizeError",
    "TrainEmptyCorpusError",
    "TrainerMinFrequencyError",
    "TrainerAlphabetTieError",
    "TrainerCountOverflowError",
    "ExportValidationError",
    "ExportInputError",
    "TemplateRoundTripError",
    "SampleRoundTripError",
    "error_from_payload",
]

#: Registry of concrete error classes by name (filled by ``__init_subclass__``).
