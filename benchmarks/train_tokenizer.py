"""Tokenizer training benchmark (issue 41):
`python benchmarks/train_tokenizer.py [--rows N] [--vocab V] [--repeat R] [--json PATH]`.

Generates a corpus (deterministic; cached under the work dir): rows of 40-120 words, 80%
drawn from 20,000 common words and 20% a long tail of rare ones (syllable names,
identifiers with numbers, hex strings), so the word table grows as a real corpus's does
(about 1.2M distinct words per 100k rows). At the default 400,000 rows (about 230 MB)
`train_from_iterator` needs several GB. Then the same byte-level BPE (vocabulary V, the
256 bytes, one special token) is trained by:

  (a) `tokenizers`' `Tokenizer.train_from_iterator`, one process, the rows streamed
      from the file (its feed and trainer use every core);
  (b) `mintdim-beam train`, the counting in process (FnApiRunner, one worker);
  (c) `mintdim-beam train`, the counting on two worker processes.

Rounds interleave the three (--repeat R). Prints min and median of wall time, CPU time
and peak RSS of each whole process tree, the ratios against (a), and checks in the same
run that (b) and (c) wrote the very `tokenizer.json` (a) did. (c) against (b) is the
counting spread over workers against one process; the word table's size (distinct
words, its bytes) is printed beside, since the trainer's memory is the table's."""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measure import harness_arguments, run_measured, write_results  # noqa: E402

SYLLABLES = ("ka ro mi sen tal vo ri dan el mor qu ash lin pe tor za ne ul gra fen bi "
             "stro hal ju nix cor dra vel ob sta min yu rek ter pha lo wen gis").split()
ORACLE = """\
import json, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
corpus, vocab, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
def rows():
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)["text"]
tokenizer.train_from_iterator(rows(), trainer)
tokenizer.save(out)
"""


def write_corpus(path: Path, rows: int, seed: int = 41) -> Path:
    if path.exists():
        return path
    rng = random.Random(seed)
    common = ["".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(2, 8)))
              for _ in range(20_000)]

    def rare() -> str:
        kind = rng.random()
        if kind < 0.4:
            return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 6)))
        if kind < 0.7:
            return f"{rng.choice(SYLLABLES)}_{rng.randint(0, 10 ** 7)}"
        return f"{rng.getrandbits(40):x}"

    temp = path.with_suffix(".tmp")
    with open(temp, "w", encoding="utf-8") as out:
        for _ in range(rows):
            words = [rng.choice(common) if rng.random() < 0.8 else rare()
                     for _ in range(rng.randint(40, 120))]
            out.write(json.dumps({"text": " ".join(words)}) + "\n")
    temp.rename(path)
    return path


def _config(corpus: Path, vocab: int, out: Path) -> dict:
    return {"source": {"type": "text", "files": [str(corpus)]},
            "trainer": {"type": "bpe", "vocab_size": vocab, "pre_tokenizer": "byte_level",
                        "initial_alphabet": "byte_level", "special_tokens": ["<|endoftext|>"]},
            "output": {"dir": str(out)}}


def _median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--vocab", type=int, default=32_000)
    harness_arguments(parser, "results_train_tokenizer.json", "(a), (b), (c)")
    args = parser.parse_args(argv)
    work = Path(args.workdir) / "train_tokenizer"
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_corpus(work / f"corpus_{args.rows}.jsonl", args.rows)
    (work / "oracle.py").write_text(ORACLE)
    bin_dir = Path(sys.executable).parent
    targets = {
        "a_train_from_iterator": lambda out: [sys.executable, str(work / "oracle.py"),
                                              str(corpus), str(args.vocab),
                                              str(out / "tokenizer.json")],
        "b_ours_in_process": lambda out: [str(bin_dir / "mintdim-beam"), "train",
                                          str(out.parent / "config.json"),
                                          "--runner=FnApiRunner"],
        "c_ours_2_workers": lambda out: [str(bin_dir / "mintdim-beam"), "train",
                                         str(out.parent / "config.json"),
                                         "--runner=FnApiRunner",
                                         "--direct_running_mode=multi_processing",
                                         "--direct_num_workers=2"],
    }
    runs: dict = {name: [] for name in targets}
    same = {}
    for round_no in range(args.repeat):
        for name, command in targets.items():
            folder = work / f"{name}_{round_no}"
            shutil.rmtree(folder, ignore_errors=True)
            out = folder / "out"
            if name.startswith("a_"):
                out.mkdir(parents=True)
            else:
                folder.mkdir(parents=True)
                (folder / "config.json").write_text(json.dumps(_config(corpus, args.vocab, out)))
            measured = run_measured(command(out))
            measured.pop("stdout"), measured.pop("stderr")
            runs[name].append(measured)
            print(f"round {round_no + 1} {name}: {measured['seconds']:.1f} s, "
                  f"{measured['cpu_seconds']:.1f} s CPU, {measured['peak_rss_mb']:.0f} MB",
                  flush=True)
        reference = json.loads((work / f"a_train_from_iterator_{round_no}/out/tokenizer.json")
                               .read_text(encoding="utf-8"))
        for name in ("b_ours_in_process", "c_ours_2_workers"):
            ours = json.loads((work / f"{name}_{round_no}/out/tokenizer.json")
                              .read_text(encoding="utf-8"))
            same.setdefault(name, []).append(ours == reference)
    manifest = json.loads((work / "b_ours_in_process_0/out/manifest.json").read_text())
    table = {"distinct_words": manifest["words"]["distinct"],
             "occurrences": manifest["words"]["occurrences"],
             "bytes": sum(p["size"] for p in manifest["word_table"]["parts"])}
    summary = {}
    for name, measured in runs.items():
        summary[name] = {key: {"min": min(m[key] for m in measured),
                               "median": _median([m[key] for m in measured])}
                         for key in ("seconds", "cpu_seconds", "peak_rss_mb")}
    report = {"rows": args.rows, "corpus_bytes": corpus.stat().st_size, "vocab": args.vocab,
              "repeat": args.repeat, "word_table": table, "summary": summary,
              "identical_to_train_from_iterator": same, "runs": runs}
    write_results(args.json, report)
    _print(report)
    return 0 if all(all(v) for v in same.values()) else 1


def _print(report: dict) -> None:
    s, a = report["summary"], report["summary"]["a_train_from_iterator"]
    table = report["word_table"]
    print(f"\n{report['rows']:,} rows ({report['corpus_bytes'] / 1e6:.0f} MB), vocabulary "
          f"{report['vocab']:,}; word table {table['distinct_words']:,} distinct words, "
          f"{table['occurrences']:,} counted, {table['bytes'] / 1e6:.0f} MB on disk")
    print(f"{'target':24} {'wall min/med s':>16} {'CPU min/med s':>16} {'peak MB min/med':>17}"
          f"  wall/a  CPU/a  peak/a")
    for name, row in s.items():
        print(f"{name:24} {row['seconds']['min']:7.1f}/{row['seconds']['median']:<7.1f} "
              f"{row['cpu_seconds']['min']:8.1f}/{row['cpu_seconds']['median']:<7.1f} "
              f"{row['peak_rss_mb']['min']:8.0f}/{row['peak_rss_mb']['median']:<8.0f} "
              f"{row['seconds']['min'] / a['seconds']['min']:6.2f} "
              f"{row['cpu_seconds']['min'] / a['cpu_seconds']['min']:6.2f} "
              f"{row['peak_rss_mb']['min'] / a['peak_rss_mb']['min']:6.2f}")
    c, b = s["c_ours_2_workers"], s["b_ours_in_process"]
    print(f"counting on 2 worker processes against one: wall "
          f"{c['seconds']['min'] / b['seconds']['min']:.2f}x, CPU "
          f"{c['cpu_seconds']['min'] / b['cpu_seconds']['min']:.2f}x, peak "
          f"{c['peak_rss_mb']['min'] / b['peak_rss_mb']['min']:.2f}x")
    print("the same tokenizer.json as train_from_iterator in every round: "
          + ", ".join(f"{k} {all(v)}" for k, v in report["identical_to_train_from_iterator"].items()))


if __name__ == "__main__":
    sys.exit(main())
