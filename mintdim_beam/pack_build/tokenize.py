"""Stage 1: one byte range -> its documents' tokens in scratch.

Each non-blank line is parsed, its file's template rendered to one text (fields joined
by the template's literals), and the texts tokenized a batch at a time as plain text:
an EOD or other special-token string typed inside a document stays text, never an id.
A document whose text gives no tokens is skipped and counted. Bad lines become pending
errors located by (range, local line), raised with their real line number at the end,
the first in file and line order, as in unit-build."""
from __future__ import annotations

from dataclasses import dataclass
import apache_beam as beam
import numpy as np

from mintdim_beam.core.errors import MintDimError
from mintdim_beam.core.errors.failures import WorkerFailure
from mintdim_beam.core.formats.megatron import check_ids
from mintdim_beam.core.inputs.input_files import open_range
from mintdim_beam.core.inputs.source import DEFAULT_MAX_LINE_BYTES, RangeBatches, long_line_reason
from mintdim_beam.core.render.document_text import Renderer, pending as _pending
from mintdim_beam.core.render.render_batch import numbered, parse_row
from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer
from mintdim_beam.pack_build import scratch
from mintdim_beam.runtime.progress import range_size, tally

BATCH = 1024  # lines per encode call
COUNTS, ERRORS = "counts", "errors"


@dataclass(frozen=True)
class RangePart:
    """A range's documents in scratch: `docs` rows of (local line, tokens) in `table`,
    their tokens back to back in `tokens`; `empty` documents skipped; `engine` what
    encoded them (`engine_used`)."""

    key: tuple
    file_pos: int
    docs: int
    tokens: int
    empty: int
    table: str
    token_file: str
    engine: str = ""
    # keyed records (`records.pack`): each document's source name (`scratch.write_sources`),
    # its source line in the table's first column; "" for a byte range of a file
    sources: str = ""


def document_tokenizer(config, engine: str):
    """The pack's tokenizer, encoding with the engine the launcher chose (`engine_choice`)."""
    tokenizer = cached_tokenizer(config.tokenizer_kind, config.tokenizer_path,
                                 config.tokenizer_options)
    return tokenizer.with_engine(engine) if hasattr(tokenizer, "with_engine") else tokenizer


def document_ids(plan, tokenizer, texts) -> list:
    """Each rendered text's document as the pack writes it (its EOD aside): the BOS id if
    the plan has one, then the text's ids encoded as plain text. [] for a text with no
    tokens (skipped); a str (the problem) for one whose text encodes to the EOD id."""
    bos, eod = plan.bos_id, plan.eod_id
    out = []
    for doc in tokenizer.encode_plain_many(texts):
        if doc and eod in doc:
            out.append(f"the document's text encodes to the EOD id {eod} (at token "
                       f"{doc.index(eod)}): written, the EOD would end it there")
        else:
            out.append([bos] + doc if doc and bos is not None else doc)
    return out


def document_arrays(plan, tokenizer, texts) -> tuple[np.ndarray, np.ndarray, dict]:
    """`document_ids` as arrays, never a Python int per token: (the documents' tokens back
    to back, BOS first where the plan has one; each text's count in them, 0 for a text
    with no tokens; {text index: problem} for the texts whose ids hold the EOD id, which
    count 0 too)."""
    ids, counts = tokenizer.encode_plain_flat(texts)
    ids, counts = np.asarray(ids, dtype=np.int64), np.asarray(counts, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    problems = {}
    at_eod = np.flatnonzero(ids == plan.eod_id)
    if at_eod.size:
        owners = np.searchsorted(starts, at_eod, side="right") - 1
        for owner, first in zip(*np.unique(owners, return_index=True)):
            problems[int(owner)] = (f"the document's text encodes to the EOD id {plan.eod_id} (at "
                                    f"token {int(at_eod[first] - starts[owner])}): written, the "
                                    "EOD would end it there")
        keep = np.ones(len(texts), dtype=bool)
        keep[list(problems)] = False
        ids = ids[np.repeat(keep, counts)]
        counts = np.where(keep, counts, 0)
    if plan.bos_id is not None and ids.size:
        kept = np.flatnonzero(counts)
        ids = np.insert(ids, (np.cumsum(counts) - counts)[kept], plan.bos_id)
        counts = counts + (counts > 0)
    return ids, counts, problems


def document_text(renderer, key, local_line, text, problem):
    """(a line's rendered document text, None) or (None, its pending error)."""
    return TokenizeRangeFn._document(key, local_line, text, problem, renderer)


class TokenizeRangeFn(beam.DoFn):
    def __init__(self, plan, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._plan = plan
        self._max_line_bytes = max_line_bytes

    def setup(self):
        config = self._plan.config
        self._tokenizer = document_tokenizer(config, self._plan.engine)
        self._renderers = [Renderer(f, t) for f, t in zip(config.fields, config.templates)]

    def process(self, byte_range):
        config, key = self._plan.config, byte_range.key
        renderer = self._renderers[byte_range.file_pos]
        lines, lengths, chunks, errors, empty = [], [], [], [], 0
        size, counted = range_size(byte_range), 0
        try:
            with open_range(byte_range) as handle:
                batches = RangeBatches(handle, byte_range, BATCH, self._max_line_bytes)
                for _, entries in batches:
                    texts, at, found = [], [], len(errors)
                    for _, local_line, text, problem in entries:
                        doc, error = self._document(key, local_line, text, problem, renderer)
                        if error is not None:
                            errors.append(error)
                        else:
                            texts.append(doc)
                            at.append(local_line)
                    skipped, tokens = self._encode(texts, at, lines, lengths, chunks,
                                                   errors, key)
                    empty += skipped
                    errors[found:] = numbered(errors[found:], entries)  # their sample numbers
                    done = counted
                    if byte_range.tells_progress:
                        done = min(max(handle.tell() - byte_range.start, counted), size)
                    tally(samples=len(entries), bytes=done - counted, tokenized=len(entries),
                          tokens=tokens)
                    counted = done
        except MintDimError as exc:
            raise WorkerFailure(exc.to_payload()) from None
        tally(bytes=size - counted)
        dtype = self._plan.dtype
        tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)
        table = np.stack([np.asarray(lines, dtype=np.int64),
                          np.asarray(lengths, dtype=np.int64)], axis=1).reshape(-1, 2)
        out = config.output_path
        table_path = scratch.name(config, key, "docs.npy")
        token_path = scratch.name(config, key, "tok")
        scratch.write_array(table_path, table, out)
        scratch.write_tokens(token_path, tokens, out)
        for error in errors:
            yield beam.pvalue.TaggedOutput(ERRORS, error)
        yield beam.pvalue.TaggedOutput(COUNTS, (key, (batches.lines, batches.samples)))
        yield RangePart(key, byte_range.file_pos, len(lines), int(tokens.size), empty,
                        table_path, token_path,
                        getattr(self._tokenizer, "engine_used", self._tokenizer.kind))

    @staticmethod
    def _document(key, local_line, text, problem, renderer):
        if problem is not None:
            reason = problem if type(problem) is str else long_line_reason(problem.nbytes,
                                                                           problem.limit)
            return None, _pending(key, local_line, "SourceParseError", {"reason": reason})
        row, error = parse_row(key + (0,), local_line, text)
        if error is not None:
            return None, error
        return renderer.text(key, local_line, row)

    def _encode(self, texts, at, lines, lengths, chunks, errors, key) -> tuple[int, int]:
        """Tokenize a batch; keep the documents with tokens. Returns how many had none
        and how many tokens the others have. A document whose plain text encodes to the
        EOD id (a vocabulary that has the EOD's text as an ordinary word) is an error at
        its line: written, the EOD would end it there."""
        if not texts:
            return 0, 0
        ids, counts, problems = document_arrays(self._plan, self._tokenizer, texts)
        for k, problem in problems.items():
            errors.append(_pending(key, at[k], "SampleSchemaError", {"problem": problem}))
        kept = np.flatnonzero(counts)
        lines.extend(np.asarray(at)[kept].tolist())
        lengths.extend(counts[kept].tolist())
        empty = len(texts) - kept.size - len(problems)
        if ids.size:
            check_ids(ids, self._plan.dtype)
            chunks.append(ids.astype(self._plan.dtype))
        return empty, int(ids.size)
