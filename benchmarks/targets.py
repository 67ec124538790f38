"""The three things the benchmark times, each run in its own process:

  bound      json parse + encoding every template segment, batched, one process
  ours       mintdim-beam's default local build, `mintdim-beam build CONFIG` (or the
             Beam flags given); ours_api: the same through the Python API
  reference  mintdim 0.2.1's sequential build (run with a Python that has it)

usage: python targets.py {bound|ours|ours_api|reference} CORPUS KIND TOKENIZER [OUT] [flags...]
"""
import json
import sys
import time

TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n{output}"
FIELDS = ["instruction", "input", "output"]
SIZES = [64, 128, 256, 512, 1024]
BATCH = 4096


def bound(corpus, kind, tokenizer):
    literals = ["### Instruction:\n", "\n\n### Input:\n", "\n\n### Response:\n"]
    if kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=tokenizer)
        encode = lambda texts: sp.encode(texts, out_type=int)  # noqa: E731
    else:
        from tokenizers import Tokenizer

        tk = Tokenizer.from_file(tokenizer)
        tk.no_padding()
        tk.no_truncation()
        # The bare floor: `encode_batch_fast` (tokenizers >= 0.21) skips the offsets.
        fast = getattr(tk, "encode_batch_fast", tk.encode_batch)
        encode = lambda texts: [e.ids for e in fast(texts, add_special_tokens=False)]  # noqa: E731
    tokens = 0
    batch = []
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            for literal, field in zip(literals, FIELDS):
                batch.append(literal)
                batch.append(str(row[field]))
            if len(batch) >= BATCH * 6:
                tokens += sum(map(len, encode(batch)))
                batch = []
    if batch:
        tokens += sum(map(len, encode(batch)))
    return {"tokens": tokens}


# Published tokenizers whose tokenizer.json names no pad token: the one the build takes.
PAD_TOKENS = {"deepseek_v3.json": "<｜end▁of▁sentence｜>",
              "llama3.2.json": "<|finetune_right_pad_id|>",
              "llama3.2_legacy.json": "<|finetune_right_pad_id|>"}


def _job(pipeline, corpus, kind, tokenizer, out):
    job = pipeline("unit-build").source.jsonl(files=[corpus], fields=[FIELDS], templates=[TEMPLATE])
    pad = PAD_TOKENS.get(tokenizer.replace("\\", "/").rsplit("/", 1)[-1])
    job = getattr(job.tokenizer, kind)(files=[tokenizer], **({"pad_token": pad} if pad else {}))
    return job.units(sizes=[SIZES], build_batch=[BATCH]).output.dir(out, samples_per_shard=[20000])


def ours(corpus, kind, tokenizer, out, *flags):
    """`mintdim-beam build CONFIG [flags]`, what a user runs: the console script's own
    entry (`console_main`) in this process, with the config of the API job below."""
    from mintdim_beam import pipeline

    config = dict(_job(pipeline, corpus, kind, tokenizer, out).config(),
                  on_template_unk="continue", on_overflow="truncate")
    return build_command(config, flags)


def build_command(config: dict, flags) -> dict:
    """`mintdim-beam build CONFIG` in this process, on `config` written to a temporary
    file; returns the build's first output summary."""
    import contextlib
    import io
    import os
    import tempfile

    from mintdim_beam.cli import console_main

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config, handle)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            code = console_main(["build", handle.name, *flags])
    finally:
        os.unlink(handle.name)
    if code:
        raise SystemExit(code)
    return json.loads(printed.getvalue())["outputs"][0]


def ours_api(corpus, kind, tokenizer, out, *flags):
    """The same build through the Python API (`pipeline(...).run()`)."""
    from mintdim_beam import pipeline

    result = _job(pipeline, corpus, kind, tokenizer, out).run(
        on_template_unk="continue", on_overflow="truncate", pipeline_options=list(flags) or None)
    return result["outputs"][0]


def reference(corpus, kind, tokenizer, out):
    from mintdim import pipeline

    result = _job(pipeline, corpus, kind, tokenizer, out).run(
        on_template_unk="continue", on_overflow="truncate")
    return result["outputs"][0]


if __name__ == "__main__":
    target, *args = sys.argv[1:]
    start = time.perf_counter()
    result = {"bound": bound, "ours": ours, "ours_api": ours_api,
              "reference": reference}[target](*args)
    result["inner_seconds"] = time.perf_counter() - start
    print(json.dumps(result))
