"""What the chat benchmark times (issue 16), each run in its own process:

  bound    json parse of every line + one render of each dialogue with the ChatML
           template (`ChatTemplate.render`) + `Tokenizer.encode_batch` of the rendered
           texts (byte-level BPE, add_special_tokens=False), batched, in one process
  ours     mintdim-beam's default local build of the same dialogues,
           `mintdim-beam build CONFIG` (or the Beam flags given)
  datasets the peer (issue 28): Hugging Face `datasets` loads the JSONL
           (`load_dataset("json")`) and `Dataset.map(batched=True, num_proc=NUM_PROC)`
           calls transformers' `PreTrainedTokenizerFast.apply_chat_template(messages,
           tokenize=True)` on each batch of dialogues, with the same tokenizer.json and
           the ChatML template as Jinja (CHATML_JINJA, the same text as ours renders); a
           fresh datasets cache under OUT (no cached result reused), the ids written by
           `map` to its Arrow cache files as datasets does; run with a Python that has
           datasets and transformers (benchmarks/.work/venvs/datasets, peers.sh)
  parts    not timed by run_chat.py's table: the bound's steps and the product's chat
           steps timed one by one in one process, to see where the time goes

usage: python chat_targets.py {bound|ours|parts} CORPUS TOKENIZER CONFIG [OUT] [flags...]
       python chat_targets.py datasets CORPUS TOKENIZER OUT [NUM_PROC]
"""
import json
import sys
import time

TEMPLATE = "chatml"
MAX_TURNS = 2  # dialogues with 3 exchanges are split into two records
ON_EXTRA_TURNS = "split"
SIZES = [128, 256, 512, 1024, 2048]
BATCH = 4096


# The ChatML template as Jinja for transformers: what `ChatTemplate.builtin("chatml")`
# renders, `<|im_start|>{role}\n{content}<|im_end|>\n` per message, no generation prompt.
CHATML_JINJA = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}")


def datasets_peer(corpus, tokenizer, out, num_proc="2"):
    """`datasets.map` + `apply_chat_template(tokenize=True)`: the JSONL loaded by
    datasets (Arrow), mapped in batches of 1,000 dialogues over NUM_PROC processes;
    returns the versions and the Arrow cache files that hold the ids (in row order)."""
    import os

    os.environ["HF_DATASETS_CACHE"] = os.path.join(out, "hf_cache")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import datasets
    import transformers
    from transformers import PreTrainedTokenizerFast

    datasets.disable_progress_bars()
    tk = PreTrainedTokenizerFast(tokenizer_file=tokenizer, eos_token="<|im_end|>",
                                 pad_token="<|endoftext|>")
    tk.chat_template = CHATML_JINJA
    ds = datasets.load_dataset("json", data_files=corpus, split="train",
                               cache_dir=os.path.join(out, "hf_cache"))

    def encode(batch):
        return {"input_ids": tk.apply_chat_template(batch["messages"], tokenize=True,
                                                    return_dict=False)}

    num_proc = int(num_proc)
    mapped = ds.map(encode, batched=True, batch_size=1000, num_proc=num_proc if num_proc > 1 else None,
                    remove_columns=ds.column_names, load_from_cache_file=False)
    return {"datasets_version": datasets.__version__, "transformers_version": transformers.__version__,
            "tokenizers_version": __import__("tokenizers").__version__, "rows": len(mapped),
            "num_proc": num_proc, "cache_files": [f["filename"] for f in mapped.cache_files]}


def _tokenizer(path):
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(path)
    tk.no_padding()
    tk.no_truncation()
    return tk


def bound(corpus, tokenizer, config):
    from measure import encode_jsonl  # this script's directory

    from mintdim_beam.core.chat import ChatTemplate, normalize_row

    template = ChatTemplate.builtin(TEMPLATE)
    tk = _tokenizer(tokenizer)

    # The bare floor: `encode_batch_fast` (tokenizers >= 0.21) skips the offsets.
    dialogues, tokens = encode_jsonl(corpus, lambda row: template.render(normalize_row(row)),
                                     getattr(tk, "encode_batch_fast", tk.encode_batch), BATCH)
    return {"tokens": tokens, "dialogues": dialogues}


def _job(corpus, tokenizer, config, out):
    from mintdim_beam import pipeline

    job = pipeline("unit-build").source.chat(files=[corpus], format="messages",
                                             chat_template=TEMPLATE, max_turns=MAX_TURNS,
                                             on_extra_turns=ON_EXTRA_TURNS)
    job = job.tokenizer.hf_json(files=[tokenizer], config=config)
    return job.units(sizes=[SIZES], build_batch=[BATCH]).output.dir(out, samples_per_shard=[20000])


def ours(corpus, tokenizer, config, out, *flags):
    """`mintdim-beam build CONFIG [flags]`, what a user runs (as in targets.py)."""
    from targets import build_command

    config = dict(_job(corpus, tokenizer, config, out).config(),
                  on_template_unk="abort", on_overflow="truncate")
    return build_command(config, flags)


def ours_api(corpus, tokenizer, config, out, *flags):
    """The same build through the Python API (`pipeline(...).run()`)."""
    result = _job(corpus, tokenizer, config, out).run(
        on_template_unk="abort", on_overflow="truncate", pipeline_options=list(flags) or None)
    return result["outputs"][0]


def _count_renders(template, fn) -> int:
    """Renders `template` does while `fn` runs."""
    real, count = template.render_dicts, [0]

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    template.render_dicts = counting
    try:
        fn()
    finally:
        del template.render_dicts
    return count[0]


def parts(corpus, tokenizer, config, limit=None):
    """Each step alone over the same dialogues, one process, one core for the Python
    steps (HF's encode_batch uses its own threads on both): json parse, normalize_row,
    one render per dialogue, `chat_records` (the product's segmentation: one render per dialogue once its
    structure's turn boundaries are cached, 2T+1 prefix renders otherwise), the encoding of the rendered texts (the bound's) and of
    the product's segments (each segment encoded alone, as the build does; with `split`
    a later record's context_0 repeats the earlier turns), and of the unsplit segments."""
    from mintdim_beam.core.chat import ChatTemplate, chat_records, normalize_row

    template = ChatTemplate.builtin(TEMPLATE)
    tk = _tokenizer(tokenizer)
    with open(corpus, encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    if limit:
        lines = lines[:int(limit)]
    times, cpu = {}, {}

    def timed(name, fn):
        start, start_cpu = time.perf_counter(), time.process_time()
        value = fn()
        times[name] = round(time.perf_counter() - start, 3)
        cpu[name] = round(time.process_time() - start_cpu, 3)  # all threads of this process
        return value

    rows = timed("json_parse", lambda: [json.loads(line) for line in lines])
    dialogues = timed("normalize_row", lambda: [normalize_row(row) for row in rows])
    texts = timed("render_once", lambda: [template.render(d) for d in dialogues])
    layouts = timed("chat_records", lambda: [
        chat_records(template, d, max_turns=MAX_TURNS, on_extra_turns=ON_EXTRA_TURNS)
        for d in dialogues])
    # How many renders chat_records does (counted, on a second pass: its structure cache
    # is warm then, as it is in a long build).
    renders = _count_renders(template, lambda: [
        chat_records(template, d, max_turns=MAX_TURNS, on_extra_turns=ON_EXTRA_TURNS)
        for d in dialogues])
    segments = [s for layout in layouts for r in layout.records for s in r.segments]
    nonempty = [s for s in segments if s]
    # The same segments without `split` (max_turns=3 holds every dialogue in one record):
    # the rendered text cut at turn boundaries, no context repeated.
    unsplit = [s for d in dialogues for r in chat_records(template, d, max_turns=3).records
               for s in r.segments if s]

    def encode(texts):
        tokens = 0
        for i in range(0, len(texts), BATCH * 5):
            tokens += sum(len(e.ids) for e in tk.encode_batch(texts[i:i + BATCH * 5],
                                                              add_special_tokens=False))
        return tokens

    def encode_texts():
        tokens = 0
        for i in range(0, len(texts), BATCH):
            tokens += sum(len(e.ids) for e in tk.encode_batch(texts[i:i + BATCH],
                                                              add_special_tokens=False))
        return tokens

    text_tokens = timed("encode_rendered", encode_texts)
    segment_tokens = timed("encode_segments", lambda: encode(nonempty))
    unsplit_tokens = timed("encode_segments_unsplit", lambda: encode(unsplit))
    fast = _fast_engine_parts(tokenizer, nonempty, timed)
    return {**fast,"dialogues": len(lines), "times": times, "cpu": cpu, "renders": renders,
            "records": sum(len(layout.records) for layout in layouts),
            "segments_nonempty": len(nonempty),
            "rendered_chars": sum(map(len, texts)), "segment_chars": sum(map(len, nonempty)),
            "tokens_rendered": text_tokens, "tokens_segments": segment_tokens,
            "tokens_segments_unsplit": unsplit_tokens}


def _fast_engine_parts(tokenizer, segments, timed) -> dict:
    """The fast engine (issue 28) on the build's segments: `FastBPE.encode_many` as the
    build calls it (added-token text recognized: a segment holding any is left to
    `tokenizers`), and, as a what-if, the segments cut at the added tokens' text with the
    pieces between encoded by `FastBPE` and each added token as its id (checked equal to
    `tokenizers`' ids of the whole segments)."""
    import re

    from mintdim_beam.core.tokenizer.fast_bpe import fast_engine

    with open(tokenizer, encoding="utf-8") as handle:
        spec = json.load(handle)
    engine, why = fast_engine(spec)
    if engine is None:
        return {"fast_engine": None, "fast_engine_why": why}
    _, left = timed("fast_encode_many", lambda: engine.encode_many(segments, False))
    added = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    cut = re.compile("(" + "|".join(map(re.escape, sorted(added, key=len, reverse=True))) + ")")

    def split_encode():
        pieces = [piece for segment in segments for piece in cut.split(segment)]
        plain = [piece for piece in pieces if piece and piece not in added]
        encoded = iter(engine.encode_many(plain, True)[0])
        out, ids = [], []
        for piece in pieces:
            if piece in added:
                ids.append(added[piece])
            elif piece:
                ids.extend(next(encoded))
        return ids

    def reference():
        tk = _tokenizer(tokenizer)
        return [i for e in tk.encode_batch(segments, add_special_tokens=False) for i in e.ids]

    fast_ids = timed("fast_encode_split_at_added", split_encode)
    return {"fast_engine": "tiktoken", "segments_left_to_tokenizers": len(left),
            "fast_split_tokens": len(fast_ids), "fast_split_equal_to_tokenizers": fast_ids == reference()}


if __name__ == "__main__":
    target, *args = sys.argv[1:]
    start = time.perf_counter()
    result = {"bound": bound, "ours": ours, "ours_api": ours_api, "parts": parts,
              "datasets": datasets_peer}[target](*args)
    result["inner_seconds"] = time.perf_counter() - start
    print(json.dumps(result))
