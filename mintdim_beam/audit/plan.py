"""`mintdim-beam plan CONFIG --units K [--max-size M]`: recommend unit sizes.

Two parts:

1. **The histogram pass** (`token_histograms`): a Beam job over the same sources,
   templates and tokenizer as the build (ReadJSONL -> Render -> Tokenize, shared with
   the build through `unit_build.graph.read_and_tokenize`) that counts, per output
   dataset, how many samples have each exact token count: one `Counter` per tokenized
   batch, combined per dataset with a `CombinePerKey`. The result is written as JSON
   through the storage layer where the driver reads it back once the job is done: a
   local temporary directory when the workers share this machine's disk (every local
   runner, a loopback PortableRunner), else a folder under `--temp_location` (a URL);
   a runner with neither is a config error before the job runs.
   Bad input lines raise the build's own error class (SourceParseError,
   SampleSchemaError, ...) with file and 1-based line, the first in file/line order,
   exactly as the build does. Config errors come from the build's own validation
   (`resolve_datasets`, `prepare`, the run policies); the output directories are not
   touched and need not be empty.

2. **The optimizer** (`optimal_sizes`, `padding_report`): each sample goes to the
   smallest size >= its token count and is padded to it; `optimal_sizes` returns the at
   most K sizes minimizing the total padding, exactly, by dynamic programming.

DP formulation. Let v_1 < ... < v_D be the distinct effective token counts that fit
(count <= max_size; a 0-token sample counts as 1, since sizes are positive: it needs a
size >= 1 and its padding is exactly 1 more than that of a 1-token sample, a constant
that does not change which set is optimal), w_i the number of samples with count v_i.
Some optimal size set uses only observed counts (lowering a size to the largest count
it serves never increases padding), and it must contain v_D (else the longest samples
would not fit). With prefix sums W_p = w_1 + .. + w_p and S_p = w_1 v_1 + .. + w_p v_p,
the padding of the group of counts v_{q+1}..v_p served by size v_p is

    cost(q, p) = v_p * (W_p - W_q) - (S_p - S_q)

and F_k(p), the least padding of counts v_1..v_p using k sizes the largest of which is
v_p, is

    F_1(p) = cost(0, p),    F_k(p) = min_{k-1 <= q < p} F_{k-1}(q) + cost(q, p).

The answer is F_{min(K, D)}(D) (a further size never increases padding), and the sizes
are read back along the argmins. Time O(K * D^2), memory O(K * D) for the argmins plus
a (block x D) work matrix; every F_k is computed with numpy over blocks of p, so D of a
few thousand distinct counts and K up to ~32 take well under a second. Arithmetic is
exact int64 (max count * samples must stay below 2**62).
"""
from __future__ import annotations

import contextlib
import json
import posixpath
import sys
import tempfile
import uuid
from collections import Counter

import apache_beam as beam
import numpy as np

from mintdim_beam.core.errors import MintDimError, PipelineValidationError, error_from_payload
from mintdim_beam.core.files import storage

_BLOCK = 256  # rows (values of p) per numpy block in the DP


# ---------------------------------------------------------------------------- optimizer

def _fitting(histogram: dict, max_size: int | None):
    """Distinct effective counts (ascending) and their sample counts, overflow excluded;
    plus the number of zero-token samples among them (each pads 1 more than counted)."""
    merged: dict[int, int] = {}
    zeros = 0
    for count, samples in histogram.items():
        count, samples = int(count), int(samples)
        if count < 0 or samples < 0:
            raise ValueError(f"histogram entries must be non-negative, got {count}: {samples}")
        if samples == 0 or (max_size is not None and count > max_size):
            continue
        if count == 0:
            zeros += samples
        effective = max(count, 1)
        merged[effective] = merged.get(effective, 0) + samples
    values = np.array(sorted(merged), dtype=np.int64)
    weights = np.array([merged[v] for v in sorted(merged)], dtype=np.int64)
    return values, weights, zeros


def _check_args(k: int, max_size: int | None) -> None:
    if type(k) is not int or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if max_size is not None and (type(max_size) is not int or max_size < 1):
        raise ValueError(f"max_size must be a positive int or None, got {max_size!r}")


def _solve(values: np.ndarray, weights: np.ndarray, k: int) -> tuple[list[int], int]:
    """The DP of the module docstring: (sizes, padding of the effective counts)."""
    d = len(values)
    if d == 0:
        return [], 0
    if int(values[-1]) * int(weights.sum()) >= 2 ** 62:
        raise ValueError("histogram too large for exact int64 padding arithmetic")
    kk = min(k, d)
    W = np.concatenate(([0], np.cumsum(weights)))          # W[p], p = 0..d
    S = np.concatenate(([0], np.cumsum(weights * values)))  # S[p]
    top = np.concatenate(([0], values))                     # top[p] = v_p (size of group ending at p)
    # F_1(p) = cost(0, p)
    prev = top * W - S
    prev[0] = 0
    choices = []  # choices[k-2][p] = argmin q of F_k(p)
    q_all = np.arange(d + 1)
    for level in range(2, kk + 1):
        cur = np.zeros(d + 1, dtype=np.int64)
        arg = np.zeros(d + 1, dtype=np.int64)
        # F_k(p) = min_q [prev[q] + S[q] - v_p W[q]] + v_p W[p] - S[p], valid q in [k-1, p)
        base = prev + S
        for start in range(level, d + 1, _BLOCK):
            p = np.arange(start, min(start + _BLOCK, d + 1))
            matrix = base[None, :] - top[p][:, None] * W[None, :]
            valid = (q_all[None, :] >= level - 1) & (q_all[None, :] < p[:, None])
            matrix = np.where(valid, matrix, np.iinfo(np.int64).max)
            best = matrix.argmin(axis=1)
            arg[p] = best
            cur[p] = matrix[np.arange(len(p)), best] + top[p] * W[p] - S[p]
        choices.append(arg)
        prev = cur
    # read the sizes back along the argmins
    sizes, p = [], d
    for level in range(kk, 0, -1):
        sizes.append(int(values[p - 1]))
        if level > 1:
            p = int(choices[level - 2][p])
    return sorted(sizes), int(prev[d])


def optimal_sizes(histogram: dict[int, int], k: int, max_size: int | None = None) -> list[int]:
    """The at most `k` unit sizes (ascending) minimizing total padding, exactly.

    `histogram` maps token count -> number of samples. Samples longer than `max_size`
    are overflow: they do not count towards padding (see `padding_report`, which
    reports them), and the largest size is the largest count <= max_size. Sizes are
    observed counts (a 0-token sample is served by size >= 1); fewer than `k` sizes come
    back when there are fewer distinct counts. See the module docstring for the DP."""
    _check_args(k, max_size)
    values, weights, _ = _fitting(histogram, max_size)
    return _solve(values, weights, k)[0]


def min_padding(histogram: dict[int, int], k: int, max_size: int | None = None) -> int:
    """The total padding (pad slots) of `optimal_sizes(histogram, k, max_size)`."""
    _check_args(k, max_size)
    values, weights, zeros = _fitting(histogram, max_size)
    return _solve(values, weights, k)[1] + zeros


def padding_report(histogram: dict[int, int], sizes) -> dict:
    """Padding of `histogram` under `sizes` (each sample in the smallest size >= its count).

    samples / tokens: all samples and their tokens (overflow included);
    pad_slots: sum over fitting samples of (size - token_count);
    payload_slots: sum over fitting samples of their size (the payload region of their
    records, tokens plus pad); padding_ratio = pad_slots / payload_slots (0.0 if none);
    overflow_samples / overflow_tokens: samples with count > max(sizes) and their tokens;
    overflow_tokens_beyond: sum of (count - max(sizes)) over them."""
    table = np.array(sorted({int(s) for s in sizes}), dtype=np.int64)
    largest = int(table[-1]) if len(table) else 0
    report = {"sizes": [int(s) for s in table], "samples": 0, "tokens": 0, "pad_slots": 0,
              "payload_slots": 0, "padding_ratio": 0.0, "overflow_samples": 0,
              "overflow_tokens": 0, "overflow_tokens_beyond": 0}
    for count, samples in sorted((int(c), int(n)) for c, n in histogram.items()):
        report["samples"] += samples
        report["tokens"] += count * samples
        if count > largest:
            report["overflow_samples"] += samples
            report["overflow_tokens"] += count * samples
            report["overflow_tokens_beyond"] += (count - largest) * samples
            continue
        size = int(table[np.searchsorted(table, count, side="left")])
        report["pad_slots"] += (size - count) * samples
        report["payload_slots"] += size * samples
    if report["payload_slots"]:
        report["padding_ratio"] = report["pad_slots"] / report["payload_slots"]
    return report


# ------------------------------------------------------------------------ the Beam pass

class _CounterSum(beam.CombineFn):
    """Sum of Counters {token_count: samples}."""

    def create_accumulator(self):
        return Counter()

    def add_input(self, acc, counts):
        acc.update(counts)
        return acc

    def merge_accumulators(self, accs):
        merged = Counter()
        for acc in accs:
            merged.update(acc)
        return merged

    def extract_output(self, acc):
        return dict(acc)


def batch_counts(element):
    """(dataset, Counter of token counts) of one tokenized batch."""
    chunk_key, batch = element
    totals = np.asarray(batch["lengths"]).sum(axis=1)
    counts, samples = np.unique(totals, return_counts=True)
    return chunk_key[0], Counter(dict(zip(counts.tolist(), samples.tolist())))


def expand_histograms(p, plans: dict, ranges, result_path: str):
    """Add the histogram pass to `p`: the per-dataset histograms and the first bad line
    (as an error payload, or None) are written as JSON to the local `result_path`."""
    from mintdim_beam.runtime.apply_to_all import ApplyToAll
    from mintdim_beam.runtime.first_error import FirstError
    from mintdim_beam.unit_build.graph import read_and_tokenize, real_errors

    datasets = {ds: plan.dataset for ds, plan in plans.items()}
    numbering, bad_lines, tokenized, _, _ = read_and_tokenize(p, plans, ranges)
    histograms = (tokenized
                  | "BatchCounts" >> beam.Map(batch_counts)
                  | "HistogramPerDataset" >> beam.CombinePerKey(_CounterSum()))
    error = real_errors(bad_lines) | "FirstError" >> FirstError(datasets, numbering)

    def save(hists, err):
        doc = {"histograms": {str(ds): {str(c): int(n) for c, n in sorted(h.items())}
                              for ds, h in sorted(hists.items())},
               "error": err}
        # Through the storage layer, under a temporary name then renamed: a retried
        # bundle rewrites the same document, on whatever disk the worker has.
        storage.write_atomic(result_path, json.dumps(doc).encode("utf-8"),
                             posixpath.dirname(result_path))

    return histograms | "Save" >> ApplyToAll(lambda hists, err: save(dict(hists), err),
                                             beam.pvalue.AsSingleton(error))


def _prepare(raw: dict, doc_policies: tuple[str, str] = ("prompt", "prompt")):
    """The build's config validation, minus the empty-output check: (plans, datasets)."""
    from mintdim_beam.core.config.prepare import prepare
    from mintdim_beam.core.config.unit_config import resolve_datasets
    from mintdim_beam.unit_build.launch import check_policies

    check_policies(*doc_policies)
    datasets = resolve_datasets(raw)
    return {d.index: prepare(d) for d in datasets}, datasets


@contextlib.contextmanager
def _result_dir(options, shape):
    """Where the histogram pass leaves its result for the driver: a local temporary
    directory when the workers share this disk, else a fresh folder under the run's
    `--temp_location` (a URL every worker and the driver reach), removed afterwards."""
    if shape.shared_disk:
        with tempfile.TemporaryDirectory(prefix="mintdim-plan-") as scratch:
            yield scratch
        return
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    temp = options.view_as(GoogleCloudOptions).temp_location
    if not temp or not storage.is_url(temp):
        raise PipelineValidationError(missing=[
            f"--temp_location=gs://... or s3://... for plan on {shape.runner}: its workers do "
            "not share this machine's disk, and the histograms come back through it"])
    scratch = storage.join(temp, f"mintdim-plan-{uuid.uuid4().hex}")
    try:
        yield scratch
    finally:
        storage.remove_tree(scratch)


def token_histograms(raw: dict, pipeline_options=None, *, policies=("prompt", "prompt")):
    """Run the histogram pass for a raw config (as for `run()`); returns
    (plans, {dataset index: {token_count: samples}}). Raises the build's error classes:
    config errors before any work, bad input lines (phase "build") after the pass."""
    from mintdim_beam.core.errors.failures import recover
    from mintdim_beam.core.inputs.source import plan_ranges
    from mintdim_beam.runtime.frozen_heap import frozen_heap
    from mintdim_beam.runtime.options import make_options, range_bytes
    from mintdim_beam.runtime.run_shape import RunShape
    from mintdim_beam.unit_build.launch import worker_paths
    from mintdim_beam.runtime.sampler_period import short_sampler_period

    plans, datasets = _prepare(raw, policies)
    options = make_options(pipeline_options)
    shape = RunShape(options)
    shape.check_paths(worker_paths(datasets, outputs=False))  # plan writes no output
    ranges = plan_ranges(datasets, range_bytes(options), defer=True)
    with _result_dir(options, shape) as scratch:
        result_path = storage.join(scratch, "histograms.json")
        try:
            with frozen_heap(), short_sampler_period(), beam.Pipeline(options=options) as p:
                expand_histograms(p, plans, ranges, result_path)
        except BaseException as exc:
            error = recover(exc)
            if error is None:
                raise
            error.phase = "build"
            raise error from None
        if not storage.exists(result_path):
            raise RuntimeError(f"the plan job finished but wrote no result to {result_path}")
        doc = json.loads(storage.read_bytes(result_path))
    if doc["error"] is not None:
        error = error_from_payload(doc["error"])
        error.phase = "build"
        raise error
    found = {int(ds): {int(c): n for c, n in h.items()} for ds, h in doc["histograms"].items()}
    return plans, {ds: found.get(ds, {}) for ds in sorted(plans)}


# -------------------------------------------------------------------------------- CLI

def plan_document(plans: dict, histograms: dict, k: int, max_size: int | None) -> list[dict]:
    """Per dataset: current sizes vs the recommendation, and the histogram."""
    from pathlib import Path

    docs = []
    for ds in sorted(plans):
        dataset = plans[ds].dataset
        hist = histograms.get(ds, {})
        recommended = optimal_sizes(hist, k, max_size)
        given = dataset.output_given
        docs.append({
            "dataset": ds,
            "output_dir": given if storage.is_url(given) else str(Path(given)),
            "current": padding_report(hist, dataset.sizes),
            "recommended": dict(padding_report(hist, recommended), k=k, max_size=max_size),
            "histogram": {str(c): int(n) for c, n in sorted(hist.items())},
        })
    return docs


def _table(doc: dict) -> str:
    lines = [f"dataset {doc['dataset']}: {doc['output_dir']}  "
             f"({doc['current']['samples']} samples, {doc['current']['tokens']} tokens, "
             f"{len(doc['histogram'])} distinct token counts)",
             f"  {'':<12} {'sizes':<40} {'pad slots':>12} {'padding':>9} {'overflow':>9}"]
    for name in ("current", "recommended"):
        r = doc[name]
        sizes = ", ".join(map(str, r["sizes"]))
        lines.append(f"  {name:<12} {'[' + sizes + ']':<40} {r['pad_slots']:>12} "
                     f"{r['padding_ratio']:>9.4f} {r['overflow_samples']:>9}")
    return "\n".join(lines)


def plan_command(args, extra: list[str]) -> int:
    """Print a table per dataset, a blank line, then one JSON document (a list with one
    object per dataset: dataset, output_dir, current, recommended, histogram).
    Exit 0; 2 on a config error; 1 when the input itself is bad (as `build`)."""
    from mintdim_beam.core.config.config_file import load_config

    try:
        if type(args.units) is not int or args.units < 1:
            raise PipelineValidationError(missing=[f"--units (a positive int; got {args.units!r})"])
        if args.max_size is not None and args.max_size < 1:
            raise PipelineValidationError(
                missing=[f"--max-size (a positive int; got {args.max_size!r})"])
        doc = load_config(args.config)
        raw = {key: doc.get(key) for key in ("source", "tokenizer", "units", "output")}
        policies = (doc.get("on_template_unk") or "prompt", doc.get("on_overflow") or "prompt")
        plans, histograms = token_histograms(raw, extra or None, policies=policies)
    except MintDimError as exc:
        print(str(exc), file=sys.stderr)
        return 1 if getattr(exc, "phase", None) == "build" else 2
    docs = plan_document(plans, histograms, args.units, args.max_size)
    print("\n\n".join(_table(d) for d in docs))
    print()
    print(json.dumps(docs, ensure_ascii=False, indent=2))
    return 0
