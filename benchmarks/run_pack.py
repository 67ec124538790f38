"""Pack throughput benchmark (issue 18):
`python benchmarks/run_pack.py [--scale 100000[,1000000]] [--repeat R] [--json PATH]`.

For each tokenizer (--tokenizers: `bpe8k`, a byte-level BPE of 8k, `<|endoftext|>` as
id 0, trained on the rendered texts of the first 30k documents and cached under
benchmarks/.work as pack_bpe8k.json; and the published `llama3.2`, `llama3.2_legacy`
and `deepseek_v3` that `make test` puts under .tools/published, --published) and each
scale N: the first N documents of the benchmark corpus (`corpus.py`), the template
"{instruction}\\n\\n{input}\\n\\n{output}", one EOD after each document (the
tokenizer's: `<|endoftext|>`, `<|end_of_text|>`, `<｜end▁of▁sentence｜>`). Measures, in
interleaved rounds (the fastest run of each counts):
  (a) the bound (the bare `tokenizers` floor): json parse + one render +
      `encode_batch_fast` of the texts (`encode_batch` before tokenizers 0.21), one
      process;
  (b) ours: `mintdim-beam pack CONFIG` (the default local run, or the Beam flags given);
  (b:E) with --engines E,...: ours with `tokenizer.engine: E` (native, tiktoken,
      tokenizers), beside (b);
  (c) datatrove 0.10.1: LocalPipelineExecutor, JsonlReader -> DocumentTokenizer
      (2 tasks, 2 workers), then DocumentTokenizerMerger (both stages timed), on the
      same texts pre-rendered to JSONL (`{"text": ...}`, 2 files) before any timing,
      with a Python that has datatrove (--datatrove-python; default
      benchmarks/.work/dt_venv, see the README; skipped with a notice when none).
  (d) dolma 1.2.1: `dolma tokens` (its CLI) over the same pre-rendered files, EOS = the
      EOD id, 2 processes (--dolma, default benchmarks/.work/venvs/dolma/bin/dolma, env
      MINTDIM_DOLMA; skipped with a notice when none; `bash benchmarks/peers.sh` makes
      the peers' venvs);
  (e) Megatron-LM's tools/preprocess_data.py, unmodified, from a checkout the user made
      at MEGATRON_TAG (--megatron-lm PATH, env MINTDIM_MEGATRON_LM; skipped with a
      notice when none), run by the Python of its venv (--megatron-python, default
      benchmarks/.work/venvs/megatron, `bash benchmarks/peers.sh megatron`): the same
      texts pre-rendered as one JSONL file, HuggingFaceTokenizer on the same
      tokenizer.json, --append-eod, 2 workers;
  (b0) with --baseline-python PY: (b) by the mintdim-beam PY imports (e.g. the commit
      before a change), b/b0 printed and its shards compared with ours;
Prints seconds, documents/s, tokens/s, peak RSS of the process tree, the min and median
over the rounds of wall and CPU time (CPU of the whole process tree, see measure.py),
b/a (goal <= 1.5), c/b (goal >= 3), each peer's CPU over ours (goal >= 2.5, issue 28),
our CPU over the bound's (goal <= 0.5 on the published tokenizers, issue 43),
the engine our build encoded with (its manifest's tokenizer.engine) and, given two scales or more, our peak RSS at the largest over the
smallest (goal <= 1.5); checks that (b) and each peer hold the same documents and tokens
(as multisets of token sequences: ours and datatrove shuffle). Writes JSON (default
benchmarks/.work/results_pack.json; `--json benchmarks/results_pack.json` records a run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pack_targets  # noqa: E402
from corpus import write_corpus  # noqa: E402
from measure import harness_arguments, run_measured, write_results  # noqa: E402

GOALS = {"ours_over_bound": 1.5, "datatrove_over_ours": 3.0, "peak_rss_large_over_small": 1.5,
         "peer_cpu_over_ours": 2.5, "ours_cpu_over_bound": 0.5}
# name: (file under the published folder, None for the trained one; the EOD written
# after each document)
TOKENIZERS = {"bpe8k": (None, pack_targets.EOD),
              "llama3.2": ("llama3.2.json", "<|end_of_text|>"),
              "llama3.2_legacy": ("llama3.2_legacy.json", "<|end_of_text|>"),
              "deepseek_v3": ("deepseek_v3.json", "<｜end▁of▁sentence｜>")}
PUBLISHED_GOAL = {"llama3.2", "llama3.2_legacy", "deepseek_v3"}  # CPU <= 0.5x the bound
NAMES = {"bound": "bound (a)", "ours": "mintdim-beam (b)", "baseline": "baseline (b0)",
         "datatrove": "datatrove (c)", "dolma": "dolma tokens (d)",
         "megatron": "Megatron-LM preprocess_data.py (e)"}
PEERS = ("datatrove", "dolma", "megatron")
MAKE_OUT = {"megatron"}  # targets that write into an existing output folder


def _dolma(given: str | None, work: Path) -> tuple[str | None, str]:
    """The `dolma` command to run, and why (or why none)."""
    if given is not None:
        return (given or None), ("given" if given else "disabled (--dolma '')")
    for venv in (work / "venvs" / "dolma", HERE / ".work" / "venvs" / "dolma"):
        if (venv / "bin" / "dolma").exists():
            return str(venv / "bin" / "dolma"), f"found {venv}"
    return None, "no dolma 1.2.1 (bash benchmarks/peers.sh dolma)"


def _megatron(checkout: str | None, python: str | None, work: Path) -> tuple[dict | None, str]:
    """The Megatron-LM checkout and the Python to run its preprocess_data.py with (and
    their versions), or None and why. ValueError for a checkout or Python given that
    cannot run it."""
    if checkout is None:
        return None, ("no Megatron-LM checkout (--megatron-lm PATH or MINTDIM_MEGATRON_LM; "
                      f"clone Megatron-LM at {pack_targets.MEGATRON_TAG}, see the README)")
    if not checkout:
        return None, "disabled (--megatron-lm '')"
    info = pack_targets.megatron_checkout(checkout)
    if python is None:
        for venv in (work / "venvs" / "megatron", HERE / ".work" / "venvs" / "megatron"):
            if (venv / "bin" / "python").exists():
                python = str(venv / "bin" / "python")
                break
        else:
            return None, "no Python for Megatron-LM (bash benchmarks/peers.sh megatron)"
    if not python:
        return None, "disabled (--megatron-python '')"
    probe = subprocess.run(
        [python, "-c", "import json, torch, transformers, tokenizers, numpy; print(json.dumps("
         "{m.__name__ + '_version': m.__version__ for m in (torch, transformers, tokenizers, numpy)}))"],
        capture_output=True, text=True)
    if probe.returncode:
        raise ValueError(f"{python} cannot run Megatron-LM's preprocess_data.py (it needs torch, "
                         f"transformers, tokenizers and numpy; bash benchmarks/peers.sh megatron):\n"
                         + probe.stderr.strip()[-1500:])
    info.update(_last_json(probe.stdout), python=python)
    why = f"{checkout} (megatron-core {info['version']})"
    if info["version"] != pack_targets.MEGATRON_TAG.removeprefix("core_v"):
        why += f"; NOT the pinned {pack_targets.MEGATRON_TAG}"
    return info, why


def _datatrove_python(given: str | None, work: Path) -> tuple[str | None, str]:
    """The Python to run datatrove with, and why (or why none)."""
    if given is not None:
        return (given or None), ("given" if given else "disabled (--datatrove-python '')")
    for venv in (work / "venvs" / "datatrove", HERE / ".work" / "venvs" / "datatrove",
                 work / "dt_venv", HERE / ".work" / "dt_venv"):
        python = venv / "bin" / "python"
        if python.exists():
            return str(python), f"found {venv}"
    probe = subprocess.run([sys.executable, "-c", "import datatrove, orjson"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable, "this Python has datatrove and orjson"
    return None, "no Python with datatrove 0.10.1 and orjson (see README: dt_venv)"


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _config(path: Path, corpus: Path, tokenizer: Path, out: Path, eod: str = pack_targets.EOD,
            engine: str | None = None) -> Path:
    """The pack CONFIG (JSON is YAML too) for `mintdim-beam pack`."""
    block = {"type": "hf_json", "files": [str(tokenizer)], **({"engine": engine} if engine else {})}
    path.write_text(json.dumps({
        "source": {"files": [str(corpus)], "fields": [pack_targets.FIELDS],
                   "templates": [pack_targets.TEMPLATE]},
        "tokenizer": block,
        "pack": {"eod": eod, "seed": 0},
        "output": {"dir": str(out)}}, indent=2, ensure_ascii=False) + "\n")
    return path


def _token_id(tokenizer: Path, text: str) -> int:
    from tokenizers import Tokenizer

    found = Tokenizer.from_file(str(tokenizer)).token_to_id(text)
    if found is None:
        raise ValueError(f"{tokenizer} has no token {text!r}")
    return int(found)


def _dtype(tokenizer: Path) -> str:
    """The token type every output uses for this vocabulary (ours: uint16 below 65,500
    ids, else uint32)."""
    from tokenizers import Tokenizer

    return "uint16" if Tokenizer.from_file(str(tokenizer)).get_vocab_size() < 65500 else "uint32"


def _engine_refused(tokenizer: Path, engine: str, corpus: Path) -> str | None:
    """Why a build of `corpus` with `tokenizer.engine: ENGINE` is refused (the build's
    own choice, `choose_engine`: e.g. tiktoken for Llama 3.2's `ignore_merges: false`
    form), or None."""
    from mintdim_beam.core.errors import TokenizerValidationError
    from mintdim_beam.core.tokenizer.engine_choice import choose_engine
    from mintdim_beam.core.tokenizer.tokenizers import tokenizer_from_bytes

    loaded = tokenizer_from_bytes("hf_json", tokenizer.read_bytes(), tokenizer.name)
    try:
        choose_engine(loaded, engine, [str(corpus)], tokenizer.name)
    except TokenizerValidationError as exc:
        return exc.kwargs["problem"]
    return None


def _run(cmd, env, out_dir, make_out=False):
    if out_dir is not None:
        shutil.rmtree(out_dir, ignore_errors=True)
        if make_out:
            out_dir.mkdir(parents=True)
    try:
        return run_measured(cmd, env=env)
    except RuntimeError as exc:
        log = out_dir / "datatrove.log" if out_dir is not None else None
        if log is not None and log.exists():  # datatrove's own output goes there
            raise RuntimeError(f"{exc}\n--- {log} (tail) ---\n{log.read_text()[-3000:]}") from None
        raise


def _scale(n: int, args, work: Path, tokenizer: Path, dt_python: str | None, env: dict,
           dolma: str | None = None, megatron: dict | None = None, label: str = "bpe8k",
           eod: str = pack_targets.EOD) -> dict:
    corpus = write_corpus(work / f"corpus_{n}.jsonl", n)
    targets = str(HERE / "pack_targets.py")
    tag = f"{n}" if label == "bpe8k" else f"{label}_{n}"
    out, dt_out, dolma_out = work / f"out_pack_{tag}", work / f"dt_pack_{tag}", work / f"dolma_pack_{tag}"
    megatron_out = work / f"megatron_pack_{tag}"
    config = _config(work / f"pack_{tag}.json", corpus, tokenizer, out, eod)
    commands = {
        "bound": ([sys.executable, targets, "bound", str(corpus), str(tokenizer)], None),
        "ours": ([sys.executable, targets, "ours", str(config)] + args.beam_flag, out),
    }
    engines, refused = [], {}
    for engine in args.engines:
        why = _engine_refused(tokenizer, engine, corpus)
        if why:
            print(f"notice: tokenizer.engine {engine} is refused for {label} ({why}): "
                  f"skipping (b:{engine}) for it", file=sys.stderr)
            refused[engine] = why
            continue
        engines.append(engine)
        engine_out = work / f"out_pack_{tag}_{engine}"
        engine_config = _config(work / f"pack_{tag}_{engine}.json", corpus, tokenizer,
                                engine_out, eod, engine)
        commands[f"ours:{engine}"] = ([sys.executable, targets, "ours", str(engine_config)]
                                      + args.beam_flag, engine_out)
    base_out = work / f"base_pack_{tag}"
    if args.baseline_python:
        base_config = _config(work / f"base_pack_{tag}.json", corpus, tokenizer, base_out, eod)
        commands["baseline"] = ([args.baseline_python, targets, "ours", str(base_config)]
                                + args.beam_flag, base_out)
    eod_id = _token_id(tokenizer, eod)
    if dt_python:
        tasks = args.datatrove_tasks
        text = pack_targets.write_rendered(corpus, work / f"pack_text_{n}_{tasks}", tasks)
        commands["datatrove"] = ([dt_python, targets, "datatrove", str(text), str(tokenizer),
                                  str(dt_out), str(tasks), args.datatrove_shuffle_documents, eod],
                                 dt_out)
    if dolma:
        tasks = args.datatrove_tasks
        text = pack_targets.write_rendered(corpus, work / f"pack_text_{n}_{tasks}", tasks)
        legacy = pack_targets.legacy_tokenizer(tokenizer, tokenizer.with_suffix(".tokenizers019.json"))
        commands["dolma"] = (pack_targets.dolma_command(dolma, text, legacy, dolma_out, tasks,
                                                        eod_id, _dtype(tokenizer)), dolma_out)
    if megatron:
        # One input file (its guide's way; --partitions > 1 writes split copies beside
        # the input), the same texts as the other peers' files.
        text = pack_targets.write_rendered(corpus, work / f"pack_text_{n}_1", 1) / "part_000.jsonl"
        folder = pack_targets.megatron_tokenizer_dir(tokenizer, work / f"megatron_{tokenizer.stem}",
                                                     eod)
        commands["megatron"] = (pack_targets.megatron_command(
            megatron["python"], megatron["script"], text, folder, megatron_out,
            args.datatrove_tasks), megatron_out)
    # Rounds interleave the targets, so a slow spell on this shared machine hits them
    # alike; the fastest run of each counts.
    runs: dict = {}
    every: dict = {name: [] for name in commands}
    cpu: dict = {name: [] for name in commands}
    for _ in range(max(1, args.repeat)):
        for name, (cmd, out_dir) in commands.items():
            result = _run(cmd, env, out_dir, name in MAKE_OUT)
            every[name].append(round(result["seconds"], 2))
            cpu[name].append(round(result["cpu_seconds"], 2))
            if name not in runs or result["seconds"] < runs[name]["seconds"]:
                runs[name] = result
    bound = _last_json(runs["bound"]["stdout"])
    documents, tokens = bound["documents"], bound["tokens"]
    row = {"documents": documents, "corpus_bytes": corpus.stat().st_size, "tokens": tokens,
           "text_tokens": bound["text_tokens"]}
    for name, r in runs.items():
        row[name] = {"seconds": round(r["seconds"], 2),
                     "seconds_median": round(_median(every[name]), 2),
                     "documents_per_s": round(documents / r["seconds"]),
                     "tokens_per_s": round(tokens / r["seconds"]),
                     "peak_rss_mb": round(r["peak_rss_mb"], 1),
                     "cpu_seconds": round(min(cpu[name]), 2),
                     "cpu_seconds_median": round(_median(cpu[name]), 2),
                     "every_run_seconds": every[name], "every_run_cpu_seconds": cpu[name],
                     "orphans_reaped": r.get("orphans_reaped", 0)}
        if not r.get("cpu_complete", True):  # no subreaper: orphans' CPU is lost
            row[name]["cpu_seconds"] = row[name]["cpu_seconds_median"] = None
    # Each peer's CPU and wall over ours, min over min and median over median (issue 28:
    # CPU >= 2.5).
    row["peer_over_ours"] = {}
    for peer in PEERS:
        if peer in row and row["ours"]["cpu_seconds"] and row[peer]["cpu_seconds"] is not None:
            p, o = row[peer], row["ours"]
            row["peer_over_ours"][peer] = {
                "cpu_min": round(p["cpu_seconds"] / o["cpu_seconds"], 2),
                "cpu_median": round(p["cpu_seconds_median"] / o["cpu_seconds_median"], 2),
                "wall_min": round(p["seconds"] / o["seconds"], 2),
                "wall_median": round(p["seconds_median"] / o["seconds_median"], 2)}
            row["peer_over_ours"][peer]["within_goal"] = (
                row["peer_over_ours"][peer]["cpu_min"] >= GOALS["peer_cpu_over_ours"])
    row["ours_over_bound"] = round(row["ours"]["seconds"] / row["bound"]["seconds"], 2)
    row["tokenizer"] = label
    # CPU over the bare `tokenizers` floor (issue 43: <= 0.5 on the published tokenizers),
    # min over min and median over median, for ours and each engine asked for.
    row["cpu_over_bound"] = {}
    for name in ["ours"] + [f"ours:{e}" for e in engines]:
        if row[name]["cpu_seconds"] and row["bound"]["cpu_seconds"]:
            row["cpu_over_bound"][name] = {
                "min": round(row[name]["cpu_seconds"] / row["bound"]["cpu_seconds"], 3),
                "median": round(row[name]["cpu_seconds_median"]
                                / row["bound"]["cpu_seconds_median"], 3)}
    if label in PUBLISHED_GOAL and "ours" in row["cpu_over_bound"]:
        row["ours_cpu_within_goal"] = (row["cpu_over_bound"]["ours"]["min"]
                                       <= GOALS["ours_cpu_over_bound"])
    if "baseline" in row:
        row["b_over_b0"] = round(row["ours"]["seconds"] / row["baseline"]["seconds"], 3)
        row["b_over_b0_median"] = round(_median(every["ours"]) / _median(every["baseline"]), 3)
        row["b_over_b0_cpu"] = round(row["ours"]["cpu_seconds"] / row["baseline"]["cpu_seconds"], 3)
        row["same_shards_as_baseline"] = all(
            a.read_bytes() == (base_out / a.name).read_bytes()
            for a in sorted(out.glob("shard_*")))
    row["ours_within_goal"] = row["ours_over_bound"] <= GOALS["ours_over_bound"]
    # The outputs, read after the timing (the last run's; every run writes the same).
    ours = pack_targets.read_ours(out)
    row["same_shards_per_engine"] = {
        engine: all(a.read_bytes() == (work / f"out_pack_{tag}_{engine}" / a.name).read_bytes()
                    for a in sorted(out.glob("shard_*")))
        for engine in engines}
    row["engines"] = {engine: pack_targets.read_ours(work / f"out_pack_{tag}_{engine}")["engine"]
                      for engine in engines}
    row["engines_refused"] = refused
    outputs = {"bound": {"documents": documents, "tokens": tokens},
               "ours": {k: ours[k] for k in ("documents", "tokens", "manifest_documents",
                                             "manifest_tokens")}}
    row["ours_engine"] = ours["engine"]
    if "datatrove" in runs:
        row["datatrove_over_ours"] = round(row["datatrove"]["seconds"] / row["ours"]["seconds"], 2)
        row["datatrove_within_goal"] = row["datatrove_over_ours"] >= GOALS["datatrove_over_ours"]
        info = _last_json(runs["datatrove"]["stdout"])
        row["datatrove_versions"] = {k: info[k] for k in ("datatrove_version", "tokenizers_version")}
        _compare_documents(row, outputs, "datatrove", ours, pack_targets.read_datatrove(dt_out, _dtype(tokenizer)))
    if "dolma" in runs:
        _compare_documents(row, outputs, "dolma", ours,
                           pack_targets.read_dolma(dolma_out, _dtype(tokenizer)))
        row["texts_dolma_would_strip"] = _count_texts(corpus, lambda text: text != text.strip())
    if "megatron" in runs:
        _compare_documents(row, outputs, "megatron", ours, pack_targets.read_megatron(megatron_out))
        # Megatron's HuggingFaceTokenizer reads the EOD's text in a document as the EOD
        # (ours encodes it as plain text): texts that hold it would differ.
        row["texts_holding_eod_text"] = _count_texts(corpus, lambda text: pack_targets.EOD in text)
    row["outputs"] = outputs
    row["same_counts"] = len({(o["documents"], o["tokens"]) for o in outputs.values()}) == 1
    return row


def _count_texts(corpus: Path, test) -> int:
    """Rendered texts for which `test` holds (e.g. that `str.strip` changes: dolma
    tokenizes the stripped text)."""
    count = 0
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                count += bool(test(pack_targets.render(json.loads(line))))
    return count


def _training_corpus(work: Path, lines: int) -> Path:
    """A corpus of at least `lines` documents: an existing one (the generator is
    prefix-stable, so its first `lines` are the same), else corpus_{lines}.jsonl."""
    have = sorted((int(p.stem.split("_")[1]), p) for p in work.glob("corpus_*.jsonl")
                  if p.stem.split("_")[1].isdigit() and int(p.stem.split("_")[1]) >= lines)
    return have[0][1] if have else write_corpus(work / f"corpus_{lines}.jsonl", lines)


def _median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _compare_documents(row: dict, outputs: dict, peer: str, ours: dict, theirs: dict) -> None:
    """A peer's counts into `outputs`, and into `row` whether its documents are ours (as
    multisets of token sequences) and, if not, how many are only in each."""
    outputs[peer] = {k: theirs[k] for k in ("documents", "tokens")}
    row[f"same_documents_as_{peer}"] = ours["digests"] == theirs["digests"]
    if not row[f"same_documents_as_{peer}"]:
        row[f"documents_only_in_ours_not_{peer}"] = _only_in(ours["digests"], theirs["digests"])
        row[f"documents_only_in_{peer}"] = _only_in(theirs["digests"], ours["digests"])


def _same_documents_shown(row: dict, peer: str, shown: str) -> str:
    if row[f"same_documents_as_{peer}"]:
        return "yes"
    return (f"NO ({row[f'documents_only_in_ours_not_{peer}']} only in ours, "
            f"{row[f'documents_only_in_{peer}']} only in {shown})")


def _only_in(mine: list, other: list) -> int:
    from collections import Counter

    return sum((Counter(mine) - Counter(other)).values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", "--samples", dest="scale", default="100000",
                        help="documents, or several comma-separated (e.g. 100000,1000000: "
                             "then also our peak RSS at the largest over the smallest)")
    harness_arguments(parser, "results_pack.json", "(a), (b), (c)")
    parser.add_argument("--tokenizers", default="bpe8k",
                        help="comma-separated: " + ", ".join(TOKENIZERS) + " (the published ones "
                             "from --published)")
    parser.add_argument("--published", default=os.environ.get(
        "MINTDIM_PUBLISHED", str(HERE.parent / ".tools" / "published")),
        help="where `make test` put the published tokenizers (tools/published_tokenizers.py)")
    parser.add_argument("--engines", default="",
                        help="comma-separated engines to time beside ours as (b:E), each with "
                             "tokenizer.engine set: native, tiktoken, tokenizers")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--train-lines", type=int, default=30_000,
                        help="the tokenizer is trained on the first N documents (the same "
                             "for every scale of at least N)")
    parser.add_argument("--datatrove-python", default=os.environ.get("MINTDIM_DATATROVE_PYTHON"),
                        help="a Python with datatrove 0.10.1 and orjson ('' skips (c)); "
                             "default: WORKDIR/dt_venv or benchmarks/.work/dt_venv")
    parser.add_argument("--dolma", default=os.environ.get("MINTDIM_DOLMA"),
                        help="the `dolma` command of dolma 1.2.1 ('' skips (d)); default: "
                             "WORKDIR/venvs/dolma/bin/dolma or benchmarks/.work/venvs/dolma")
    parser.add_argument("--megatron-lm", default=os.environ.get("MINTDIM_MEGATRON_LM"),
                        help="a Megatron-LM checkout at " + pack_targets.MEGATRON_TAG + " (its "
                             "tools/preprocess_data.py runs as (e); '' skips it; env "
                             "MINTDIM_MEGATRON_LM; none: skipped with a notice)")
    parser.add_argument("--megatron-python", default=os.environ.get("MINTDIM_MEGATRON_PYTHON"),
                        help="the Python to run it with ('' skips (e)); default: "
                             "WORKDIR/venvs/megatron or benchmarks/.work/venvs/megatron "
                             "(bash benchmarks/peers.sh megatron)")
    parser.add_argument("--datatrove-tasks", type=int, default=2,
                        help="DocumentTokenizer tasks (= workers and input files; also "
                             "dolma's processes and Megatron's workers)")
    parser.add_argument("--datatrove-shuffle-documents", choices=("true", "false"), default="true",
                        help="DocumentTokenizer's shuffle_documents (its default: true)")
    parser.add_argument("--baseline-python", default=None,
                        help="adds (b0): the same build by the mintdim-beam this Python imports")
    parser.add_argument("--beam-flag", action="append", default=[],
                        help="Beam flag for (b), repeatable; default: the local default run")
    args = parser.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    labels = [t for t in args.tokenizers.split(",") if t]
    unknown = [t for t in labels if t not in TOKENIZERS]
    if unknown:
        parser.error(f"unknown tokenizer {unknown[0]!r}: one of {', '.join(TOKENIZERS)}")
    if args.datatrove_tasks < 1:
        parser.error(f"--datatrove-tasks must be at least 1, not {args.datatrove_tasks}")

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    scales = [int(s) for s in args.scale.split(",")]
    name = "pack_bpe8k.json" if args.vocab == 8000 else f"pack_bpe{args.vocab}.json"
    tokenizer = work / name
    if "bpe8k" in labels and not tokenizer.exists():
        pack_targets.train_pack_tokenizer(_training_corpus(work, args.train_lines), tokenizer,
                                          args.vocab, args.train_lines)
    files = {label: (tokenizer if file is None else Path(args.published) / file, eod)
             for label, (file, eod) in TOKENIZERS.items() if label in labels}
    for label, (path, _) in files.items():
        if not path.exists():
            parser.error(f"{path} is missing: `make test` makes it (tools/published_tokenizers.py)")
    dt_python, why = _datatrove_python(args.datatrove_python, work)
    if not dt_python:
        print(f"notice: {why}: skipping (c) datatrove", file=sys.stderr)
    dolma, dolma_why = _dolma(args.dolma, work)
    if not dolma:
        print(f"notice: {dolma_why}: skipping (d) dolma", file=sys.stderr)
    try:
        megatron, megatron_why = _megatron(args.megatron_lm, args.megatron_python, work)
    except ValueError as exc:
        parser.error(str(exc))
    if not megatron:
        print(f"notice: {megatron_why}: skipping (e) Megatron-LM", file=sys.stderr)
    elif "NOT the pinned" in megatron_why:
        print(f"notice: Megatron-LM: {megatron_why}", file=sys.stderr)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    report = {"scales": scales, "cores": os.cpu_count(), "repeat": args.repeat,
              "beam_flags": args.beam_flag,
              "tokenizer": f"byte-level BPE {args.vocab} (hf_json, {tokenizer.name})",
              "tokenizers": {label: str(path) for label, (path, _) in files.items()},
              "engines": args.engines,
              "template": pack_targets.TEMPLATE, "eod": pack_targets.EOD,
              "datatrove": {"python": dt_python, "why": why, "tasks": args.datatrove_tasks,
                            "workers": args.datatrove_tasks,
                            "shuffle_documents": args.datatrove_shuffle_documents == "true",
                            "merger_shuffle": True, "input": "pre-rendered {\"text\"} JSONL, "
                            f"{args.datatrove_tasks} files, written before the timing"},
              "dolma": {"command": dolma, "why": dolma_why, "processes": args.datatrove_tasks,
                        "eos_token_id": 0, "bos_token_id": None, "encode_special_tokens": True,
                        "input": "the same pre-rendered files as datatrove's"},
              "megatron": {**(megatron or {}), "why": megatron_why,
                           "pinned_tag": pack_targets.MEGATRON_TAG,
                           "workers": args.datatrove_tasks,
                           "input": "the same pre-rendered texts as one JSONL file"},
              "goals": GOALS, "results": {}}
    # Results keyed by scale for the trained tokenizer alone (as before), else
    # "TOKENIZER:SCALE".
    for label, (path, eod) in files.items():
        for n in scales:
            key = str(n) if labels == ["bpe8k"] else f"{label}:{n}"
            report["results"][key] = _scale(n, args, work, path, dt_python, env, dolma,
                                            megatron, label, eod)
    if len(scales) > 1 and labels == ["bpe8k"]:
        small, large = str(min(scales)), str(max(scales))
        ratio = round(report["results"][large]["ours"]["peak_rss_mb"]
                      / report["results"][small]["ours"]["peak_rss_mb"], 2)
        report["peak_rss"] = {"large": int(large), "small": int(small), "ratio": ratio,
                              "within_goal": ratio <= GOALS["peak_rss_large_over_small"]}
    _print(report)
    write_results(args.json, report)
    return 0


def _goal(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def _cpu(value) -> str:
    return f"{value:7.2f}" if value is not None else f"{'n/a':>7}"


def _print(report: dict) -> None:
    dt = report["datatrove"]
    for n, row in report["results"].items():
        print(f"\n{n} documents, {row['corpus_bytes'] / 1e6:.1f} MB, {row['tokens'] / 1e6:.2f}M tokens "
              f"(EOD included), {report['cores']} cores, repeat {report['repeat']} (interleaved)")
        engine = row.get("ours_engine") or {}
        print(f"  ours encoded with engine: {engine.get('name')} ({engine.get('why')})")
        shown = (report["tokenizer"] if row.get("tokenizer", "bpe8k") == "bpe8k"
                 else f"{row['tokenizer']} ({Path(report['tokenizers'][row['tokenizer']]).name})")
        print(f"[pack: {shown}]{'':4} {'wall min':>8} {'median':>7} {'CPU min':>7} "
              f"{'median':>7} {'docs/s':>7} {'tokens/s':>9} {'peak MB':>8}")
        for name in ("bound", "ours", *[f"ours:{e}" for e in report["engines"]], "baseline",
                     "datatrove", "dolma", "megatron"):
            if name not in row:
                continue
            r = row[name]
            label = NAMES.get(name) or f"mintdim-beam, engine {name.split(':')[1]} (b:{name.split(':')[1]})"
            if name == "datatrove":
                label = f"datatrove {row['datatrove_versions']['datatrove_version']} (c)"
            if name == "dolma":
                label = "dolma 1.2.1 tokens (d)"
            if name == "megatron":
                label = f"Megatron-LM {report['megatron']['version']} preprocess_data (e)"
            print(f"  {label:42} {r['seconds']:8.2f} {r['seconds_median']:7.2f} {_cpu(r['cpu_seconds'])} "
                  f"{_cpu(r['cpu_seconds_median'])} {r['documents_per_s']:7} {r['tokens_per_s']:9} "
                  f"{r['peak_rss_mb']:8.1f}"
                  + (f"   wall: {r['every_run_seconds']} CPU: {r['every_run_cpu_seconds']}"
                     if len(r["every_run_seconds"]) > 1 else ""))
        line = (f"  b/a = {row['ours_over_bound']}  ({_goal(row['ours_within_goal'])} the "
                f"<= {report['goals']['ours_over_bound']}x goal)")
        for name, ratio in row.get("cpu_over_bound", {}).items():
            goal = ""
            if name == "ours" and "ours_cpu_within_goal" in row:
                goal = (f"  ({_goal(row['ours_cpu_within_goal'])} the <= "
                        f"{report['goals']['ours_cpu_over_bound']}x goal)")
            print(f"  CPU {name} / bound: {ratio['min']} (min) {ratio['median']} (median){goal}")
        for engine, same in row.get("same_shards_per_engine", {}).items():
            print(f"  engine {engine}: manifest says {(row['engines'][engine] or {}).get('name')}; "
                  f"same shards as ours: {same}")
        for engine, why in row.get("engines_refused", {}).items():
            print(f"  engine {engine}: refused for this tokenizer ({why})")
        if "b_over_b0" in row:
            line += (f"   b/b0 = {row['b_over_b0']} (median {row['b_over_b0_median']}, CPU "
                     f"{row['b_over_b0_cpu']}; same shards: {row['same_shards_as_baseline']})")
        if "datatrove_over_ours" in row:
            line += (f"   c/b = {row['datatrove_over_ours']}  ({_goal(row['datatrove_within_goal'])} "
                     f"the >= {report['goals']['datatrove_over_ours']}x goal)")
        print(line)
        for peer, ratio in row.get("peer_over_ours", {}).items():
            print(f"  {peer}/ours: CPU {ratio['cpu_min']} (min) {ratio['cpu_median']} (median), "
                  f"wall {ratio['wall_min']} / {ratio['wall_median']}  "
                  f"({_goal(ratio['within_goal'])} the CPU >= {report['goals']['peer_cpu_over_ours']}x goal)")
        counts = "; ".join(f"{name} {o['documents']} documents, {o['tokens']} tokens"
                           for name, o in row["outputs"].items())
        print(f"  outputs: {counts}" + ("" if row["same_counts"] else "   COUNTS DIFFER"))
        for peer, shown, extra in (
                ("datatrove", "datatrove's", ""),
                ("dolma", "dolma's", f"; texts dolma would strip: {row.get('texts_dolma_would_strip')}"),
                ("megatron", "Megatron-LM's",
                 f"; texts holding {pack_targets.EOD}: {row.get('texts_holding_eod_text')}")):
            if f"same_documents_as_{peer}" in row:
                print(f"  ours and {shown} hold the same documents (token sequences, as multisets): "
                      + _same_documents_shown(row, peer, shown) + extra)
    if not dt["python"]:
        print(f"\n(c) datatrove skipped: {dt['why']}")
    else:
        print(f"\n(c) datatrove: {dt['tasks']} tasks / {dt['workers']} workers, DocumentTokenizer "
              f"shuffle_documents={dt['shuffle_documents']}, merger shuffle={dt['merger_shuffle']}, "
              f"input: {dt['input']}; python {dt['python']}.")
    dm = report.get("dolma") or {}
    if not dm.get("command"):
        print(f"(d) dolma skipped: {dm.get('why')}")
    else:
        print(f"(d) dolma: {dm['processes']} processes, eos_token_id={dm['eos_token_id']}, no BOS, "
              f"encode_special_tokens=true, input: {dm['input']}; {dm['command']}.")
    mg = report.get("megatron") or {}
    if not mg.get("python"):
        print(f"(e) Megatron-LM skipped: {mg.get('why')}")
    else:
        print(f"(e) Megatron-LM: {mg['script']} (megatron-core {mg['version']}, pinned "
              f"{mg['pinned_tag']}), HuggingFaceTokenizer, --append-eod, {mg['workers']} workers, "
              f"input: {mg['input']}; torch {mg['torch_version']}, transformers "
              f"{mg['transformers_version']}, tokenizers {mg['tokenizers_version']}; {mg['python']}.")
    print("CPU: user + system of the whole process tree (orphans reparented to the harness and "
          "waited for).")
    if "peak_rss" in report:
        p = report["peak_rss"]
        print(f"peak RSS of (b), {p['large']} / {p['small']} documents = {p['ratio']}  "
              f"({_goal(p['within_goal'])} the <= {report['goals']['peak_rss_large_over_small']}x goal)")


if __name__ == "__main__":
    sys.exit(main())
