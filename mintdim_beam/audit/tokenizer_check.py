"""`verify OUT` for a trained tokenizer (a train-tokenizer output): every file as written
(the manifest's sha256), the tokenizer loads with its own library and has the size its
card says, the tokens `tokenizer_config.json` names are single tokens of it, and the
report rows are the manifest's count."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from mintdim_beam.audit.verify_result import Problems, VerifyResult
from mintdim_beam.core.files import checksums, storage
from mintdim_beam.core.formats import mintdim as fmt

PIPELINE = "train-tokenizer"


def manifest_of(out: str) -> dict | None:
    """OUT's manifest, when it is a train-tokenizer's; else None."""
    path = storage.join(storage.resolve(out), fmt.MANIFEST)
    try:
        doc = json.loads(storage.read_bytes(path))
    except (FileNotFoundError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("pipeline") == PIPELINE else None


@dataclass
class TokenizerVerifyResult(VerifyResult):
    vocab_size: int = 0
    kind: str = ""

    def summary(self) -> str:
        if self.ok:
            return (f"verify {self.out}: OK, trained tokenizer ({self.kind}), vocabulary "
                    f"{self.vocab_size}, {self.content()}, {self.seconds:.2f} s")
        return super().summary()


def _load(kind: str, data: bytes):
    """(vocabulary size, text -> single id or None) of the tokenizer's own library."""
    if kind == "hf_json":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        return tokenizer.get_vocab_size(), tokenizer.token_to_id
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=data)

    def piece_id(text):
        found = processor.piece_to_id(text)
        return None if found == processor.unk_id() and text != processor.id_to_piece(found) \
            else found

    return processor.get_piece_size(), piece_id


def verify_tokenizer(out: str, max_problems: int = 50) -> TokenizerVerifyResult:
    started = time.perf_counter()
    root = storage.resolve(out)
    result = TokenizerVerifyResult(out=out)
    problems = Problems(max_problems)
    manifest = manifest_of(out) or {}
    block = manifest.get("checksums")
    found = checksums.changed(block, lambda n: storage.exists(storage.join(root, n)),
                              lambda n: storage.open_read(storage.join(root, n)))
    for name, what in found:
        problems.add(name, None, what)
    if not found:
        result.checksummed = len(block["files"])
    tokenizer = manifest.get("tokenizer") or {}
    kind, name = tokenizer.get("type"), tokenizer.get("file")
    try:
        size, token_id = _load(kind, storage.read_bytes(storage.join(root, name)))
    except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
        problems.add(str(name), None, f"does not load as a {kind} tokenizer: {exc}")
    else:
        result.vocab_size, result.kind = size, kind
        card = manifest.get("tokenizer_card") or {}
        if card.get("vocab_size") != size:
            problems.add(str(name), None, f"{size} tokens, the manifest's card says "
                                          f"{card.get('vocab_size')}")
        config = json.loads(storage.read_bytes(storage.join(root, tokenizer.get("config"))))
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            if key in config and token_id(config[key]) is None:
                problems.add(tokenizer.get("config"), None,
                             f"{key} {config[key]!r} is not one token of {name}")
    report = manifest.get("report_text") or {}
    if report.get("file"):
        text = storage.read_bytes(storage.join(root, report["file"])).decode("utf-8")
        if len(text.splitlines()) != report.get("rows"):
            problems.add(report["file"], None, f"{len(text.splitlines())} rows, the manifest "
                                               f"says {report.get('rows')}")
    result.problems = problems.finish()
    result.problem_count = problems.total
    result.seconds = time.perf_counter() - started
    return result
