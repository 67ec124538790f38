"""The help texts of `mintdim-beam build` and `mintdim-beam pack`: every CONFIG key and
every flag of ours, so `--help` is a complete reference without the docs at hand
(`tests/test_cli.py` checks each key the validators accept appears here)."""

CONFIG_HELP = """CONFIG keys (YAML or JSON; paths relative to the working directory, or fsspec URLs):

  source (templated JSONL fields, mintdim's):
    files: [...]              JSONL, plain / gzip / zstd; a directory or a glob stands
                              for its files (sorted); per-file lists count entries
    fields: [[...]]           fields[i]: the keys read from files[i]
    templates: ["..."]        {name} placeholders, everything else literal
  source (dialogues):
    type: chat
    files: [...]
    format: messages | sharegpt          OpenAI messages or ShareGPT conversations
    chat_template: tokenizer | chatml | llama3 | alpaca | PATH.jinja
    template_vars: {...}                 variables the template reads (date: strftime_now)
    max_turns: 1                         trained assistant turns per record
    on_extra_turns: split | abort | skip
    max_messages: 1024                   a longer dialogue is a bad row
  source (preference pairs {prompt, chosen, rejected}):
    type: preference
    files: [...]
    chat_template: ...                   for message-list rows (as for chat)
    template_vars: {...}

  tokenizer:
    type: sentencepiece | hf_json | tiktoken
    files: [...]                         a .model, a tokenizer.json or a tiktoken file
    config: tokenizer_config.json        pad / BOS / EOS tokens and the chat template
    pad_token: TEXT | pad_id: ID         the pad (else the tokenizer's own)
    bos: true | eos: true                the BOS / EOS id first / last in every record
    literal_specials: ids | text         special-token text in JSONL template literals
    engine: auto | tiktoken | tokenizers  the fast exact engine where shown equal (auto)
    family: llama3 | gpt2 | cl100k | qwen a tiktoken file's split regex and special tokens
    pattern: REGEX                       or the split regex itself (type tiktoken)
    special_tokens: {TEXT: ID, ...}      and its special tokens (type tiktoken)

  units:   {sizes: [[...]], build_batch: [...]}
  output:  {dir: PATH or [PATHS], samples_per_shard: [...]}
  on_overflow: abort | truncate | skip | extend | prompt     (default prompt)
  on_template_unk: abort | continue | prompt                 (default prompt)
  on_lossy: continue | abort   (default continue: text the tokenizer cannot carry is a
                                warning and a lossy_index.jsonl row)
  on_bad_row: abort | skip     (default abort: a row that cannot become a sample is an
                                error; skip: left out, a rejected_index.jsonl row)
  max_rejected: FRACTION       (default 0.01: under skip, more rejected rows is an error)

Each list is shared (length 1) or mapped per input file (length N), as in the Python API.
Unknown top-level, tokenizer, chat and preference keys are refused. Reference:
docs/config.md.
"""

FLAGS_HELP = """Flags of ours (any other argument is a Beam pipeline flag: --runner, --project, ...):
  --input_range_bytes N     byte ranges input files are read in (default 64 MiB)
  --max_line_bytes N        longest line read (default 16 MiB)
  --encoder_processes N     build: helper encoder processes (default: one per core, at
                            most 8, for the local in-process run, else 0)
  --stage_records auto|off  build: records of local outputs to scratch once tokenized (auto)
  --disk_check on|off       free disk checked before any output (on)
  --shared_filesystem       workers elsewhere see this machine's local paths (an NFS):
                            without it, local paths need workers on this machine
  --no_wait                 submit the job and return; it finalizes its outputs itself
Environment: MINTDIM_PROGRESS_INTERVAL (seconds between progress lines, default 10).
Exit codes: 0 done, 2 config error (nothing written), 1 the build failed, 130 Ctrl-C,
143 SIGTERM. Runners and their flags: docs/runners.md.
"""

PACK_HELP = """CONFIG keys for pack (YAML or JSON):
  source:    {files: [...], fields: [[...]], templates: ["..."]}   (one each, or one per file)
  tokenizer: {type: sentencepiece | hf_json | tiktoken, files: [ONE FILE],
              config: tokenizer_config.json, bos: true, engine: auto | tiktoken | tokenizers,
              family / pattern / special_tokens (type tiktoken)}
             (no pad, eos or literal_specials: a stream has no padding,
                            the EOD follows each document, documents have no literals)
  pack:      {eod: null or "<token text>", seed: 0, shard_tokens: 536870912}
             eod: the end-of-document token (null: the tokenizer's EOS); seed: the order
  output:    {dir: PATH}
Reference: docs/pack_build.md.
"""

TRAIN_HELP = """CONFIG keys for train (YAML or JSON):
  source:    {type: jsonl, files: [...], fields: [[...]], templates: ["..."]}
             {type: text, files: [...], field: text}
             {type: chat, files: [...], format: messages | sharegpt, join: "\\n"}
  trainer:   {type: bpe, vocab_size: 6400, min_frequency: 0, special_tokens: [...],
              pre_tokenizer: byte_level | llama3 | whitespace | whitespace_split |
              metaspace | {tokenizers JSON}, normalizer: null | nfc | nfkc | ... | {JSON},
              initial_alphabet: byte_level | [chars], limit_alphabet, max_token_length,
              unk_token, decoder}
             {type: sentencepiece_bpe | sentencepiece_unigram, vocab_size: 8000, and
              SentencePieceTrainer's own keys (character_coverage, byte_fallback,
              user_defined_symbols, normalization_rule_name, ...); unigram:
              input_sentence_size (sentences sampled by a seeded hash), seed}
  tokenizer_config: {bos_token, eos_token, pad_token, unk_token,
                     chat_template: chatml | llama3 | alpaca | FILE.jinja, model_max_length}
  output:    {dir: PATH}   receives tokenizer.json (or tokenizer.model),
                           tokenizer_config.json, report_text.jsonl, manifest.json
  holdout: 0.0   sample: 1.0   seed: 0   (fractions of rows, by a seeded hash of the text)
Reference: docs/train_tokenizer.md.
"""
