#!/usr/bin/env python3
"""Re-derive every golden case from FORMAT.md rules and compare byte for byte.

Independent of mintdim: this is a small, slow, single-process model of the
unit-build contract (docs: /work/shared/spec/FORMAT.md) written only to check
the golden data. It serves two purposes:

* the expected outputs in ``tests/golden/*/expected`` were made with
  sentencepiece 0.2.1 (what mintdim 0.2.1 needs); running this script in the
  product's environment (e.g. sentencepiece 0.2.3) proves the same token ids,
  UNK surfaces and bytes are reachable there;
* it pins down that every golden file follows the written contract.

Usage (any Python >= 3.10 with sentencepiece, tokenizers, numpy):

    python tools/crosscheck_golden.py               # all cases
    python tools/crosscheck_golden.py CASE [CASE..]

Error cases are checked for the error class only (mapped to the condition
that raises it). Exit status 1 on any mismatch.
"""

from __future__ import annotations

import hashlib
import json
import sys
from bisect import bisect_left, insort
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------
# tokenizers
# ---------------------------------------------------------------------------

class SP:
    def __init__(self, path: Path):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(path))
        self.vocab_size = self.sp.get_piece_size()
        self.unk_id = self.sp.unk_id()
        self.pad_id = self.sp.pad_id()

    def encode(self, texts):
        return [list(x) for x in self.sp.encode(list(texts), out_type=int)]

    def surfaces(self, text):
        res = self.sp.encode(text, out_type="proto")
        if not hasattr(res, "pieces"):          # sentencepiece <= 0.2.1
            res = self.sp.encode(text, out_type="immutable_proto")
        return [p.surface for p in res.pieces]


class HF:
    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self.tk = Tokenizer.from_file(str(path))
        self.vocab_size = self.tk.get_vocab_size()
        self.unk_id = self.tk.token_to_id(self.tk.model.unk_token)
        pad = self.tk.padding
        self.pad_id = pad["pad_id"] if pad.get("pad_id") is not None else \
            self.tk.token_to_id(pad["pad_token"])
        self.tk.no_padding()
        self.tk.no_truncation()

    def encode(self, texts):
        return [list(e.ids) for e in self.tk.encode_batch(list(texts), add_special_tokens=False)]

    def surfaces(self, text):
        e = self.tk.encode(text, add_special_tokens=False)
        return [text[a:b] for a, b in e.offsets]


# ---------------------------------------------------------------------------
# template
# ---------------------------------------------------------------------------

def compile_template(template: str):
    import re

    segs = []
    pos = 0
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template):
        if m.start() > pos:
            segs.append(("literal", "token_template", template[pos:m.start()]))
        segs.append(("field", m.group(1), None))
        pos = m.end()
    if pos < len(template):
        segs.append(("literal", "token_template", template[pos:]))
    return segs


def render(segs, sample):
    out = []
    for kind, name, content in segs:
        if kind == "literal":
            out.append(content)
        else:
            v = sample[name]
            if isinstance(v, (bool, int, float, str)):
                out.append(str(v))
            else:
                raise Fail(f"non-scalar field {name}")
    return out


# ---------------------------------------------------------------------------
# one dataset
# ---------------------------------------------------------------------------

def dump_json(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8")


def dump_jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def build_dataset(case_dir: Path, files, fields, template, tok_type, tok_path, sizes,
                  build_batch, spp, policy, template_unk) -> dict[str, bytes]:
    tok = SP(case_dir / tok_path) if tok_type == "sentencepiece" else HF(case_dir / tok_path)
    dtype = "uint16" if tok.vocab_size <= 0xFFFF else "uint32"
    magic = 0xFFFF if dtype == "uint16" else 0xFFFFFFFF
    bpt = 2 if dtype == "uint16" else 4
    np_dtype = np.uint16 if dtype == "uint16" else np.uint32
    segs = compile_template(template)
    names = {n for k, n, _ in segs if k == "field"}
    if names != set(fields):
        raise Fail("TemplateFieldMismatchError")
    for kind, _, content in segs:
        if kind == "literal" and tok.unk_id in tok.encode([content])[0]:
            if template_unk != "continue":
                raise Fail("TemplateTokenizerError")
    n = len(segs)
    sizes = list(sizes)
    units: dict[int, list[np.ndarray]] = {s: [] for s in sizes}
    sample_rows, unk_rows, over_rows = [], [], []
    groups: dict[str, list[dict]] = {}
    hist: dict[int, int] = {}
    total_tokens = unk_tokens = samples_with_unk = 0
    sid = 0
    for f in files:
        with open(case_dir / f, encoding="utf-8") as fh:   # universal newlines
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line.strip())
                except json.JSONDecodeError:
                    raise Fail("SourceParseError")
                if not isinstance(obj, dict):
                    raise Fail("SourceParseError")
                if any(k not in obj for k in fields):
                    raise Fail("SampleSchemaError")
                texts = render(segs, obj)
                toks = tok.encode(texts)
                count = sum(map(len, toks))
                h = hashlib.sha256("".join(texts).encode("utf-8")).hexdigest()
                empty = [nm for (k, nm, _), t in zip(segs, texts) if k == "field" and t == ""]
                idx = bisect_left(sizes, count)
                unit = sizes[idx] if idx < len(sizes) else None
                if unit is None:
                    base = {"sample_id": sid, "source_file": f, "source_line": lineno,
                            "token_count": count, "max_unit_size": sizes[-1]}
                    if policy == "abort":
                        raise Fail("UnitOverflowError")
                    if policy == "skip":
                        over_rows.append({**base, "action": "skip"})
                        sid += 1
                        continue
                    if policy == "truncate":
                        over_rows.append({**base, "action": "truncate"})
                        budget = sizes[-1]
                        cut = []
                        for t in toks:
                            cut.append(t[:max(budget, 0)])
                            budget -= len(cut[-1])
                        toks = cut
                        count = sizes[-1]
                        unit = sizes[-1]
                    elif policy == "extend":
                        over_rows.append({**base, "action": "extend", "new_unit_size": count})
                        insort(sizes, count)
                        units[count] = []
                        unit = count
                    else:
                        raise Fail(f"policy {policy}")
                pos, fidx, chars = [], [], []
                cursor = 0
                for si, t in enumerate(toks):
                    local = [i for i, x in enumerate(t) if x == tok.unk_id]
                    if local:
                        surf = tok.surfaces(texts[si])
                        for i in local:
                            pos.append(cursor + i)
                            fidx.append(si)
                            chars.append(surf[i] if i < len(surf) else "")
                    cursor += len(t)
                rec = np.full(1 + n + unit, tok.pad_id, dtype=np_dtype)
                rec[0] = magic
                rec[1:1 + n] = [len(t) for t in toks]
                payload = [x for t in toks for x in t]
                rec[1 + n:1 + n + len(payload)] = payload
                k = len(units[unit])
                units[unit].append(rec)
                sample_rows.append({
                    "sample_id": sid, "hash": h, "token_count": count, "unit_size": unit,
                    "source_file": f, "source_line": lineno,
                    "shard_path": f"unit_{unit}/shard_{k // spp:06d}.bin",
                    "empty_fields": empty})
                if pos:
                    unk_rows.append({"sample_id": sid, "hash": h, "source_file": f,
                                     "source_line": lineno, "unk_count": len(pos),
                                     "unk_positions": pos, "unk_field_indices": fidx,
                                     "unk_chars": chars})
                    samples_with_unk += 1
                    unk_tokens += len(pos)
                groups.setdefault(h, []).append(
                    {"sample_id": sid, "source_file": f, "source_line": lineno})
                hist[unit] = hist.get(unit, 0) + 1
                total_tokens += count
                sid += 1
    out: dict[str, bytes] = {}
    for u, recs in units.items():
        if not recs:
            out[f"unit_{u}/EMPTY_UNIT.md"] = None  # content not modelled here
        for s in range(0, len(recs), spp):
            out[f"unit_{u}/shard_{s // spp:06d}.bin"] = np.stack(recs[s:s + spp]).astype(
                np.dtype(np_dtype).newbyteorder("<")).tobytes()
    dups = [{"hash": h, "count": len(v), "samples": v} for h, v in groups.items() if len(v) > 1]
    hist_s = {str(k): hist[k] for k in sorted(hist)}
    out["sample_index.jsonl"] = dump_jsonl(sample_rows)
    out["unk_index.jsonl"] = dump_jsonl(unk_rows)
    out["overflow_index.jsonl"] = dump_jsonl(over_rows)
    out["duplicate_index.jsonl"] = dump_jsonl(dups)
    out["histogram.json"] = dump_json(hist_s)
    out["stats.json"] = dump_json({
        "total_samples": len(sample_rows), "total_tokens": total_tokens, "token_dtype": dtype,
        "bytes_per_token": bpt, "duplicate_groups": len(dups),
        "duplicate_samples": sum(d["count"] for d in dups),
        "samples_with_unk": samples_with_unk, "unk_tokens": unk_tokens,
        "unit_distribution": hist_s})
    lfs = []
    for i, (k, nm, c) in enumerate(segs):
        row = {"index": i, "name": nm, "kind": k, "content": c}
        if k == "field":
            row["field"] = nm
        lfs.append(row)
    seq = [nm for _, nm, _ in segs]
    out["length_field.json"] = dump_json({"magic": magic, "sequence_template": seq,
                                          "length_fields": lfs, "token_dtype": dtype,
                                          "pad_token_id": tok.pad_id})
    out["manifest.json"] = dump_json({
        "pipeline": "unit-build", "mintdim_version": "0.2.1",
        "tokenizer": {"type": tok_type, "path": tok_path, "vocab_size": tok.vocab_size,
                      "unk_id": tok.unk_id, "pad_id": tok.pad_id},
        "token_storage": {"dtype": dtype, "bytes_per_token": bpt, "magic": magic},
        "sequence_template": seq, "length_field_metadata": "length_field.json",
        "units": {"sizes": sizes, "build_batch": build_batch},
        "source": {"files": list(files), "fields": [list(fields)], "templates": [template]},
        "output": {"samples_per_shard": spp}})
    return out


def pick(lst, i):
    return lst[0] if len(lst) == 1 else lst[i]


def check_case(case_dir: Path) -> list[str]:
    c = json.loads((case_dir / "case.json").read_text("utf-8"))
    files = c["files"]
    outs = [c["output"]] if isinstance(c["output"], str) else c["output"]
    lists = [c["fields"], c["templates"], c["tokenizer"]["files"], c["sizes"], c["build_batch"],
             outs, c["samples_per_shard"]]
    shared = len(files) == 1 or all(len(x) == 1 for x in lists)
    plans = ([(files, 0, outs[0])] if shared else
             [([f], i, pick(outs, i)) for i, f in enumerate(files)])
    problems = []
    try:
        for fs, i, od in plans:
            got = build_dataset(case_dir, fs, pick(c["fields"], i), pick(c["templates"], i),
                                c["tokenizer"]["type"], pick(c["tokenizer"]["files"], i),
                                pick(c["sizes"], i), pick(c["build_batch"], i),
                                pick(c["samples_per_shard"], i), c["on_overflow"],
                                c["on_template_unk"])
            if c["expect_error"]:
                continue
            exp_dir = case_dir / "expected" / od
            exp = {str(p.relative_to(exp_dir)): p.read_bytes()
                   for p in exp_dir.rglob("*") if p.is_file()}
            for k in sorted(set(exp) | set(got)):
                if k not in exp:
                    problems.append(f"{od}/{k}: missing in expected")
                elif k not in got:
                    problems.append(f"{od}/{k}: not produced by crosscheck")
                elif got[k] is not None and got[k] != exp[k]:
                    problems.append(f"{od}/{k}: differs")
        if c["expect_error"]:
            problems.append(f"expected {c['expect_error']} but the build succeeded")
    except Fail as e:
        if str(e) != c["expect_error"]:
            problems.append(f"raised {e}, expected {c['expect_error']}")
    return problems


def main() -> int:
    names = sys.argv[1:] or sorted(p.name for p in GOLDEN.iterdir()
                                   if p.is_dir() and (p / "case.json").exists())
    bad = 0
    for nm in names:
        probs = check_case(GOLDEN / nm)
        print(f"{nm}: {'OK' if not probs else 'MISMATCH'}")
        for p in probs[:20]:
            print("   ", p)
        bad += bool(probs)
    print(f"{len(names) - bad}/{len(names)} cases consistent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
