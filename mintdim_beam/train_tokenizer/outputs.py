"""What a trained tokenizer's directory holds beside the tokenizer file itself:
`tokenizer_config.json` (what transformers and our builds read: the special tokens'
texts, the chat template), the tokenizer card (reserved ids and what the tokenizer
cannot represent, as `report` shows it for builds) and the manifest, written last."""
from __future__ import annotations

from mintdim_beam.core.files.ownership import TRAIN_FAILED
from mintdim_beam.core.inputs import file_list
from mintdim_beam.core.tokenizer.tokenizer_card import build_card
from mintdim_beam.core.tokenizer.tokenizers import tokenizer_from_bytes
from mintdim_beam.core.version import __version__
from mintdim_beam.train_tokenizer.config import train_raw

MANIFEST = "manifest.json"
HF_FILE = "tokenizer.json"
SP_FILE = "tokenizer.model"
CONFIG_FILE = "tokenizer_config.json"
FAILED = TRAIN_FAILED  # the failure notice `clean` knows as ours
PIPELINE = "train-tokenizer"
TABLE_RULE = ("each word's part is crc32(UTF-8 word) mod 64; a part lists its words in "
              "bytewise order as (u32 LE length, UTF-8 word, u64 LE count) records")


def tokenizer_file(config) -> str:
    return HF_FILE if config.trainer.type == "bpe" else SP_FILE


def kind_of(config) -> str:
    """The `tokenizer.type` a build config names the trained file with."""
    return "hf_json" if config.trainer.type == "bpe" else "sentencepiece"


def tokenizer_config_doc(config) -> dict:
    """tokenizer_config.json: transformers' keys (`PreTrainedTokenizerFast` for a
    `tokenizer.json`), the tokens as configured, the chat template's text."""
    tc = config.tokenizer_config
    doc: dict = {}
    if config.trainer.type == "bpe":
        doc["tokenizer_class"] = "PreTrainedTokenizerFast"
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = getattr(tc, key)
        if value is not None:
            doc[key] = value
    if tc.chat_template_text is not None:
        doc["chat_template"] = tc.chat_template_text
    if tc.model_max_length is not None:
        doc["model_max_length"] = tc.model_max_length
    doc["clean_up_tokenization_spaces"] = False
    return doc


def reserved_ids(kind: str, data: bytes) -> list[dict]:
    """The ids that are not learned pieces: added (special) tokens of a tokenizer.json;
    unk/control/user-defined pieces of a SentencePiece model (its 256 byte pieces under
    byte fallback are the card's `byte_fallback`)."""
    if kind == "hf_json":
        import json

        return [{"id": t["id"], "token": t["content"], "special": bool(t.get("special"))}
                for t in json.loads(data).get("added_tokens") or []]
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto()
    model.ParseFromString(data)
    kinds = {pb.ModelProto.SentencePiece.UNKNOWN: "unknown",
             pb.ModelProto.SentencePiece.CONTROL: "control",
             pb.ModelProto.SentencePiece.USER_DEFINED: "user_defined"}
    return [{"id": i, "token": p.piece, "type": kinds[p.type]}
            for i, p in enumerate(model.pieces) if p.type in kinds]


def card(config, data: bytes) -> dict:
    kind = kind_of(config)
    tokenizer = tokenizer_from_bytes(kind, data, tokenizer_file(config))
    doc = build_card(tokenizer, None)
    doc["reserved_ids"] = reserved_ids(kind, data)
    return doc


def versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("tokenizers", "sentencepiece", "apache-beam")}


def manifest_doc(config, counted: dict, engine: dict, tokenizer_card: dict, sums: dict) -> dict:
    from mintdim_beam.core.files import checksums

    tallies = counted["tallies"]
    parts = counted["parts"]
    doc = {
        "pipeline": PIPELINE,
        "mintdim_beam_version": __version__,
        "tokenizer": {"file": tokenizer_file(config), "type": kind_of(config),
                      "config": CONFIG_FILE},
        "trainer": config.trainer.manifest_block(),
        "engine": engine,
        "rows": tallies,
        "words": {"distinct": sum(p["words"] for p in parts),
                  "occurrences": sum(p["occurrences"] for p in parts)},
        "word_table": {"rule": TABLE_RULE,
                       "parts": [{k: p[k] for k in ("part", "words", "occurrences", "size",
                                                     "sha256")} for p in parts]},
        "report_text": {"file": counted.get("report_file"), "rows": counted["report_rows"],
                        "held_out": counted["held_out"]},
        "inputs": counted["inputs"],
        "versions": versions(),
        "tokenizer_card": tokenizer_card,
        "build_config": train_raw(config),
        **({"source_entries": entries} if (entries := file_list.entries_block(config.files))
           else {}),
    }
    if "sample_sentences" in counted:
        doc["sample_sentences"] = counted["sample_sentences"]
    for key in ("rejected", "bad_rows"):
        if key in counted:
            doc[key] = counted[key]
    doc["checksums"] = checksums.manifest_block(sums)
    return doc


def failed_notice(reason: str) -> str:
    return ("# train-tokenizer failed\n\n"
            f"{reason}\n\n"
            "This directory holds no manifest.json: it is not a trained tokenizer.\n"
            "Run `mintdim-beam clean` on it, fix the cause, and train again.\n")

