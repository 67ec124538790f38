"""Your own Beam pipeline, our build at its end: read Parquet, drop the short rows with
beam.Filter, tokenize the rest and write a unit-build.

    python examples/beam/parquet_to_units.py --output artifacts/beam_units
    python examples/beam/parquet_to_units.py --output gs://bucket/units \\
        --runner=DataflowRunner --project=... --region=... --temp_location=gs://bucket/tmp \\
        --setup_file=./setup.py

Each row is keyed by the Parquet file and its row number, so the sample ids follow the
input's order and the indices name the row (`docs/beam.md`)."""
import argparse
from pathlib import Path

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from mintdim_beam.transforms import TokenizeRecords, WriteUnitBuild

HERE = Path(__file__).resolve().parent
TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"


def long_enough(row: dict, words: int) -> bool:
    return len(row["output"].split()) >= words


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=str(HERE / "instructions.parquet"))
    parser.add_argument("--output", required=True)
    parser.add_argument("--tokenizer", default=str(HERE.parent / "tokenizer/demo.model"))
    parser.add_argument("--min_words", type=int, default=20)
    args, beam_args = parser.parse_known_args(argv)

    tokenize = TokenizeRecords({"type": "sentencepiece", "files": [args.tokenizer]},
                               fields=["instruction", "input", "output"], template=TEMPLATE)
    with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
        summary = (
            p
            | "Read" >> beam.io.ReadFromParquet(args.input)
            | "Long" >> beam.Filter(long_enough, args.min_words)
            | "Key" >> beam.Map(lambda row: ((row["file"], row["row"]), row))
            | "Tokenize" >> tokenize
            | "Write" >> WriteUnitBuild(args.output, [128, 256, 512], tokenize=tokenize,
                                        samples_per_shard=500, on_overflow="truncate"))
        summary | "Print" >> beam.Map(print)


if __name__ == "__main__":
    main()
