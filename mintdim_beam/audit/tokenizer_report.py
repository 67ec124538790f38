"""`mintdim-beam report OUT` for a trained tokenizer: how well it compresses text it
was not trained on, and how its vocabulary is used.

Writes into DIR (default `OUT/report/`):

- `report.md`: the manifest's facts (trainer, rows, words, engine), the tokenizer card
  (reserved ids, what it cannot represent), characters and UTF-8 bytes per token on the
  report rows (held out from training when the run had `holdout`; else a sample of the
  training rows, said so), the share of the vocabulary those rows use;
- `frequency_rank.png` + `.csv` (rank,id,token,count): every token's count over the
  report rows, most frequent first, on log-log axes (a Zipf plot): a long flat tail of
  tokens never used is vocabulary spent on nothing;
- `chars_per_token.csv` (row,characters,bytes,tokens): the per-row figures behind the
  averages.

The rows are encoded with the tokenizer's own library (`tokenizers`, `sentencepiece`),
without added special tokens."""
from __future__ import annotations

from collections import Counter

from mintdim_beam.audit.plain_files import csv_bytes, jsonl_rows
from mintdim_beam.audit.report_common import (REPORT_DIR, REPORT_MD, md_cell, new_figure,
                                              no_data, png, write_report_files)
from mintdim_beam.audit.report_round_trip import card_lines
from mintdim_beam.audit.tokenizer_check import manifest_of
from mintdim_beam.core.files import storage

FREQUENCY_RANK = "frequency_rank"
CHARS_PER_TOKEN = "chars_per_token"


def is_trained_tokenizer(out: str) -> bool:
    return manifest_of(out) is not None


def _encoder(kind: str, data: bytes):
    """(texts -> id lists, id -> token text, vocabulary size)."""
    if kind == "hf_json":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        return (lambda texts: [e.ids for e in tokenizer.encode_batch(
                    texts, add_special_tokens=False)],
                tokenizer.id_to_token, tokenizer.get_vocab_size())
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=data)
    return processor.encode, processor.id_to_piece, processor.get_piece_size()


def compute_tokenizer_figures(out: str) -> dict:
    out = storage.resolve(out)
    manifest = manifest_of(out)
    tokenizer = manifest["tokenizer"]
    encode, token_text, vocab = _encoder(tokenizer["type"], storage.read_bytes(
        storage.join(out, tokenizer["file"])))
    report = manifest.get("report_text") or {}
    texts = [row["text"] for row in jsonl_rows(out, report.get("file") or "report_text.jsonl")]
    ids = encode(texts) if texts else []
    per_row = [(i + 1, len(t), len(t.encode("utf-8")), len(row))
               for i, (t, row) in enumerate(zip(texts, ids))]
    counts = Counter(token for row in ids for token in row)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    tokens = sum(r[3] for r in per_row)
    chars = sum(r[1] for r in per_row)
    utf8 = sum(r[2] for r in per_row)
    return {"manifest": manifest, "vocab_size": vocab, "rows": len(texts),
            "held_out": bool(report.get("held_out")), "tokens": tokens, "characters": chars,
            "bytes": utf8, "chars_per_token": chars / tokens if tokens else None,
            "bytes_per_token": utf8 / tokens if tokens else None,
            "used_tokens": len(counts), "ranked": [(r + 1, i, token_text(i), n)
                                                   for r, (i, n) in enumerate(ranked)],
            "per_row": per_row}


def _frequency_png(fig: dict) -> bytes:
    figure, ax = new_figure("Token frequency by rank (report rows)")
    ranked = fig["ranked"]
    if ranked:
        ax.loglog([r[0] for r in ranked], [r[3] for r in ranked], color="#4c72b0")
        ax.axvline(fig["vocab_size"], color="gray", linestyle="--", linewidth=1)
    else:
        no_data(ax, "no report rows")
    ax.set_xlabel("rank (log)")
    ax.set_ylabel("count (log)")
    return png(figure)


def _markdown(fig: dict) -> str:
    manifest = fig["manifest"]
    trainer, rows, words = manifest["trainer"], manifest["rows"], manifest["words"]
    what = ("held-out rows (never trained on)" if fig["held_out"]
            else "a sample of the training rows (the run held none out: holdout 0)")
    cpt = fig["chars_per_token"]
    lines = [f"# Trained tokenizer: {md_cell(manifest['tokenizer']['file'])}", "",
             "| fact | value |", "|---|---|",
             f"| trainer | {trainer['type']}, vocab_size {trainer['vocab_size']} |",
             f"| engine | {md_cell(manifest['engine']['why'])} |",
             f"| rows | {rows['trained']:,} trained, {rows['held_out']:,} held out, "
             f"{rows['left_out']:,} left out of the sample, {rows['empty']:,} empty |",
             f"| words | {words['distinct']:,} distinct, {words['occurrences']:,} counted |",
             "", f"## Compression on {what}", "",
             f"{fig['rows']:,} rows, {fig['characters']:,} characters, {fig['bytes']:,} UTF-8 "
             f"bytes, {fig['tokens']:,} tokens: "
             + (f"**{cpt:.3f} characters per token**, {fig['bytes_per_token']:.3f} bytes per "
                f"token." if cpt else "no tokens."),
             "", f"{fig['used_tokens']:,} of the {fig['vocab_size']:,} tokens appear in these "
             f"rows (`{FREQUENCY_RANK}.png`, `{FREQUENCY_RANK}.csv`).", ""]
    lines += card_lines(manifest.get("tokenizer_card") or {})
    reserved = (manifest.get("tokenizer_card") or {}).get("reserved_ids") or []
    if reserved:
        lines += ["", "## Reserved ids", "", "| id | token |", "|---|---|"]
        lines += [f"| {r['id']} | `{md_cell(r['token'])}` |" for r in reserved]
    return "\n".join(lines) + "\n"


def write_tokenizer_report(out: str, dest: str | None = None) -> dict:
    out = storage.resolve(out)
    dest = storage.resolve(dest) if dest else storage.join(out, REPORT_DIR)
    fig = compute_tokenizer_figures(out)
    files = {
        f"{FREQUENCY_RANK}.csv": csv_bytes(("rank", "id", "token", "count"), fig["ranked"]),
        f"{CHARS_PER_TOKEN}.csv": csv_bytes(("row", "characters", "bytes", "tokens"),
                                            fig["per_row"]),
        f"{FREQUENCY_RANK}.png": _frequency_png(fig),
        REPORT_MD: _markdown(fig).encode("utf-8"),
    }
    result = write_report_files(dest, files, fig)
    result.pop("per_row", None)
    result.pop("ranked", None)
    return result

