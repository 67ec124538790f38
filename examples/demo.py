"""`make demo`: build the bundled example data with the bundled tokenizer and print a summary.

Usage: python examples/demo.py OUTPUT_ROOT [beam flags...]
"""
import json
import sys
from pathlib import Path

from mintdim_beam import pipeline


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "demo_out"
    flags = sys.argv[2:] or None
    result = (
        pipeline("unit-build")
        .source.jsonl(
            files=["examples/data/instructions.jsonl", "examples/data/chat.jsonl"],
            fields=[["instruction", "input", "output"], ["prompt", "response"]],
            templates=["### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}",
                       "<|user|>\n{prompt}\n<|assistant|>\n{response}"])
        .tokenizer.sentencepiece(files=["examples/tokenizer/demo.model"])
        .units(sizes=[[128, 256, 512, 1024], [64, 128, 256, 512]], build_batch=[512])
        .output.dir([f"{root}/instruction_units", f"{root}/chat_units"], samples_per_shard=[500])
        .run(on_overflow="truncate", on_template_unk="continue", pipeline_options=flags)
    )
    print("\nmintdim-beam demo: done")
    for out in result["outputs"]:
        stats = json.loads((Path(out["output_dir"]) / "stats.json").read_text())
        shards = sorted(p for p in Path(out["output_dir"]).rglob("shard_*.bin"))
        overflow = (Path(out["output_dir"]) / "overflow_index.jsonl").read_text().count("\n")
        print(f"  {out['output_dir']}: {out['total_samples']} samples, {out['total_tokens']} tokens, "
              f"{len(shards)} shards, units {out['sizes']}")
        print(f"    per unit {stats['unit_distribution']}, duplicate groups {out['duplicate_groups']}, "
              f"samples with UNK {out['samples_with_unk']}, truncated {overflow}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
