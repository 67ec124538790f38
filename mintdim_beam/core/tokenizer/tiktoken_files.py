"""tiktoken BPE files (Meta's Llama 3 `tokenizer.model`, OpenAI's `.tiktoken`): a line
per token, its bytes in base64 and its rank. Such a file holds no split regex and no
special tokens; they are given in the tokenizer block or taken from a known family.

The file becomes the equivalent `tokenizer.json` (`tokenizer_json`): the same vocabulary
written in byte-level characters, every pair of tokens that makes a token as a merge in
the order of the token it makes (tiktoken's rule: the lowest-ranked pair merges first),
the family's regex as a `Split` before byte-level mapping. `tokenizers` then encodes it
as tiktoken does, and the fast engine (`fast_bpe`) takes it like any byte-level BPE.
"""
from __future__ import annotations

import base64
import binascii

from mintdim_beam.core.tokenizer.fast_bpe import TO_BYTE_LEVEL

_GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_CL100K = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
_QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

_LLAMA3_NAMED = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                 "<|python_tag|>"]


def _llama3_specials(base: int) -> dict[str, int]:
    names = _LLAMA3_NAMED + [f"<|reserved_special_token_{i}|>" for i in range(2, 256 - 9)]
    return {name: base + i for i, name in enumerate(names)}


def _qwen_specials(base: int) -> dict[str, int]:
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    return {name: base + i for i, name in enumerate(names)}


# name: (split regex, special tokens given the number of ranks)
FAMILIES = {
    "llama3": (_LLAMA3, _llama3_specials),
    "gpt2": (_GPT2, lambda base: {"<|endoftext|>": base}),
    "cl100k": (_CL100K, lambda base: {"<|endoftext|>": base}),
    "qwen": (_QWEN, _qwen_specials),
}


class TiktokenFileError(ValueError):
    """The bytes are not a tiktoken BPE file; the message says at which line."""


def read_ranks(data: bytes) -> dict[bytes, int]:
    """{token bytes: rank} from the file's lines (`base64 rank`)."""
    ranks = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise TiktokenFileError(f"line {number} is not 'base64-token rank'")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            raise TiktokenFileError(f"line {number}: the token is not base64") from None
        ranks[token] = int(parts[1])
    if not ranks:
        raise TiktokenFileError("the file holds no token lines")
    return ranks


def looks_like_tiktoken(data: bytes) -> bool:
    head = data[:4096].splitlines()[:20]
    if not head:
        return False
    try:
        read_ranks(b"\n".join(head[:-1] if len(head) > 1 else head))
    except TiktokenFileError:
        return False
    return True


def tokenizer_json(ranks: dict[bytes, int], pattern: str, specials: dict[str, int]) -> dict:
    """The `tokenizer.json` document that encodes as tiktoken does with these ranks."""
    # One byte-level character per byte: a token's halves are its text's halves.
    table = TO_BYTE_LEVEL
    vocab, merges = {}, []
    get = ranks.get
    for data, rank in ranks.items():
        text = data.decode("latin-1").translate(table)
        vocab[text] = rank
        for cut in range(1, len(data)):
            left = get(data[:cut])
            if left is not None:
                right = get(data[cut:])
                if right is not None:
                    merges.append((rank, left, right, text, cut))
    merges.sort()
    added = [{"id": token_id, "content": content, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for content, token_id in sorted(specials.items(), key=lambda item: item[1])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab,
                  "merges": [[m[3][:m[4]], m[3][m[4]:]] for m in merges]},
    }
