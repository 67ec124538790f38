"""`make demo`: build the bundled example data with the bundled tokenizers and print a summary.

Three builds: the templated instruction and chat samples of examples/data (SentencePiece),
then the chat dialogues and the preference pairs of examples/chat (byte-level BPE, the
chat template of its tokenizer_config.json). Then a tokenizer trained on examples/data
(examples/train_tokenizer.yaml: MiniMind's byte-level BPE layout, ChatML) and the
dialogues built again with it; then the two templated builds read as one blend, and the
instruction build exported to Parquet for Hugging Face datasets and TRL.

Usage: python examples/demo.py OUTPUT_ROOT [beam flags...]
"""
import json
import sys
from pathlib import Path

import numpy as np

from mintdim_beam import pipeline

CHAT = "examples/chat"
CHAT_TOKENIZER = dict(files=[f"{CHAT}/tokenizer.json"], config=f"{CHAT}/tokenizer_config.json")


def build_units(root: str, flags) -> dict:
    return (
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


def build_dialogues(root: str, flags) -> dict:
    """At most two trained replies per record: longer dialogues become several records."""
    return (
        pipeline("unit-build")
        .source.chat(files=[f"{CHAT}/dialogues.jsonl"], format="messages",
                     chat_template="tokenizer", max_turns=2, on_extra_turns="split")
        .tokenizer.hf_json(**CHAT_TOKENIZER)
        .units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
        .output.dir(f"{root}/chat_dialogues", samples_per_shard=[500])
        .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=flags)
    )


def build_preference(root: str, flags) -> dict:
    return (
        pipeline("unit-build")
        .source.preference(files=[f"{CHAT}/preference.jsonl"], chat_template="tokenizer")
        .tokenizer.hf_json(**CHAT_TOKENIZER)
        .units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
        .output.dir(f"{root}/chat_preference", samples_per_shard=[500])
        .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=flags)
    )


def train_tokenizer(root: str, flags) -> dict:
    """examples/train_tokenizer.yaml, into ROOT/tokenizer."""
    import yaml

    from mintdim_beam.train_tokenizer.launch import run_train

    config = yaml.safe_load(Path("examples/train_tokenizer.yaml").read_text())
    config["output"]["dir"] = f"{root}/tokenizer"
    return run_train(config, pipeline_options=flags)


def build_dialogues_with_trained(root: str, flags) -> dict:
    """The dialogues again, with the trained tokenizer and its ChatML template."""
    return (
        pipeline("unit-build")
        .source.chat(files=[f"{CHAT}/dialogues.jsonl"], format="messages",
                     chat_template="tokenizer", max_turns=2, on_extra_turns="split")
        .tokenizer.hf_json(files=[f"{root}/tokenizer/tokenizer.json"],
                           config=f"{root}/tokenizer/tokenizer_config.json")
        .units(sizes=[[128, 256, 512, 1024]], build_batch=[256])
        .output.dir(f"{root}/chat_dialogues_trained", samples_per_shard=[500])
        .run(on_overflow="truncate", on_template_unk="abort", pipeline_options=flags)
    )


def print_trained(trained: dict, rebuilt: dict, before: dict) -> None:
    from mintdim_beam.audit.report import write_report

    figures = write_report(trained["output_dir"])
    print(f"  {trained['output_dir']}: {trained['tokenizer']}, vocabulary "
          f"{trained['vocab_size']} ({trained['reserved_ids']} reserved ids first), "
          f"{trained['distinct_words']} distinct words from {trained['rows_trained']} rows "
          f"({trained['engine']} trainer)")
    print(f"    held-out rows ({trained['rows_held_out']}): "
          f"{figures['chars_per_token']:.2f} characters per token; report: {figures['report']}")
    new, old = rebuilt["outputs"][0], before["outputs"][0]
    print(f"    dialogues built with it: {new['total_samples']} records, {new['total_tokens']} "
          f"tokens (with the bundled tokenizer: {old['total_tokens']}), units {new['sizes']}")


def blend_and_export(root: str, flags) -> None:
    """The instruction and chat builds as one packed blend (30% / 70% of the rows), and
    the instruction build as Parquet (`mintdim-beam export`)."""
    from mintdim_beam import BlendedUnitReader
    from mintdim_beam.export.launch import run_export

    blend = BlendedUnitReader([f"{root}/instruction_units", f"{root}/chat_units"], [0.3, 0.7],
                              tokens_per_step=8192, pack_length=1024, seed=0,
                              targets=[["output"], ["response"]])
    rows = [0, 0]
    for batch in blend:
        for d in batch.dataset_ids.tolist():
            rows[d] += 1
    print(f"  a blend of instruction_units and chat_units, 30/70, packed rows of 1024: "
          f"{len(blend)} steps, {rows[0]} + {rows[1]} rows "
          f"({rows[0] / sum(rows):.3f} / {rows[1] / sum(rows):.3f})")
    done = run_export(f"{root}/instruction_units", "parquet", f"{root}/instructions_parquet",
                      pipeline_options=flags)
    print(f"  exported {done['rows']} records of instruction_units to Parquet in "
          f"{done['files']} file(s): {root}/instructions_parquet (datasets, TRL)")


def tokens_by_kind(out: Path) -> dict:
    """Tokens per segment kind ("trained" / "context"), read from the shards' record
    headers with the layout of length_field.json, as a trainer's loss mask would."""
    layout = json.loads((out / "length_field.json").read_text())
    kinds = [field["kind"] for field in layout["length_fields"]]
    n = len(kinds)
    totals = dict.fromkeys(kinds, 0)
    for shard in sorted(out.glob("unit_*/shard_*.bin")):
        unit = int(shard.parent.name.split("_")[1])
        records = np.fromfile(shard, dtype=layout["token_dtype"]).reshape(-1, 1 + n + unit)
        lengths = records[:, 1:1 + n].astype(np.int64).sum(axis=0)
        for kind, count in zip(kinds, lengths.tolist()):
            totals[kind] += count
    return totals


def print_round_trip(out_dir: str, card: bool = False) -> None:
    """The manifest's round trip (what the tokenizer lost) and, with `card`, its card."""
    manifest = json.loads((Path(out_dir) / "manifest.json").read_text())
    trip, tok = manifest["round_trip"], manifest["tokenizer_card"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in trip["kinds"].items() if n) or "none"
    print(f"    round trip: {trip['segments_checked']} segments checked, "
          f"{trip['lossy_segments']} lossy ({kinds}) in {trip['lossy_samples']} samples; "
          f"{len(trip['template'])} template findings (lossy_index.jsonl)")
    if card:
        model = tok.get("model")
        print(f"    tokenizer card: {tok['kind']} {model}, vocab {tok['vocab_size']}, "
              f"normalizer {tok.get('normalizer')}, byte fallback {tok['byte_fallback']}, "
              f"byte level {tok['byte_level']}")
        for loss in tok["cannot_represent"] or ["nothing: every text round-trips"]:
            print(f"      cannot represent: {loss}")


def print_units(result: dict) -> None:
    for out in result["outputs"]:
        stats = json.loads((Path(out["output_dir"]) / "stats.json").read_text())
        shards = sorted(p for p in Path(out["output_dir"]).rglob("shard_*.bin"))
        overflow = (Path(out["output_dir"]) / "overflow_index.jsonl").read_text().count("\n")
        print(f"  {out['output_dir']}: {out['total_samples']} samples, {out['total_tokens']} tokens, "
              f"{len(shards)} shards, units {out['sizes']}")
        print(f"    per unit {stats['unit_distribution']}, duplicate groups {out['duplicate_groups']}, "
              f"samples with UNK {out['samples_with_unk']}, truncated {overflow}")
        print_round_trip(out["output_dir"], card=out is result["outputs"][0])


def print_dialogues(result: dict, what: str) -> None:
    for out in result["outputs"]:
        path = Path(out["output_dir"])
        stats = json.loads((path / "stats.json").read_text())
        rows = [json.loads(line) for line in (path / "sample_index.jsonl").read_text().splitlines()]
        inputs = len({row["sample_id"] for row in rows})
        split = sum(1 for row in rows if row.get("part", 0) == 1)
        kinds = tokens_by_kind(path)
        trained, context = kinds.get("trained", 0), kinds.get("context", 0)
        share = 100 * trained / max(1, trained + context)
        print(f"  {path}: {out['total_samples']} records from {inputs} {what}"
              f"{f' ({split} of them split)' if split else ''}, {out['total_tokens']} tokens, "
              f"units {out['sizes']}")
        print(f"    trained tokens {trained} ({share:.0f}%), context tokens {context}, "
              f"per unit {stats['unit_distribution']}, duplicate groups {out['duplicate_groups']}")
        print_round_trip(out["output_dir"], card=what == "dialogues")


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "demo_out"
    flags = sys.argv[2:] or None
    units = build_units(root, flags)
    dialogues = build_dialogues(root, flags)
    preference = build_preference(root, flags)
    trained = train_tokenizer(root, flags)
    rebuilt = build_dialogues_with_trained(root, flags)
    print("\nmintdim-beam demo: done")
    print_units(units)
    print_dialogues(dialogues, "dialogues")
    print_dialogues(preference, "preference pairs")
    print("  a tokenizer trained on examples/data (examples/train_tokenizer.yaml):")
    print_trained(trained, rebuilt, dialogues)
    blend_and_export(root, flags)
    return 0


if __name__ == "__main__":
    sys.exit(main())
