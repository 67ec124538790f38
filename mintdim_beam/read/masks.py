"""Labels, attention masks and preference pairs from segment lengths alone (never from `token == pad_id`:
a pad id may also be a real token inside a segment).

Target segments: `target` lists segment names, fnmatch patterns (`"assistant_*"`) or
segment indices. By default:
- a build with `trained` segments (chat): the trained segments (`assistant_<i>`);
- a templated build (`literal` / `field` segments): the last field segment, e.g.
  `answer` of `"Q: {question}\\nA: {answer}"` (with a one-field template like `{text}`:
  the whole text). When that field's name also appears earlier in the template the
  choice is unclear and an explicit `target` is required;
- a preference build (`prompt`, `chosen`, `rejected`) is read with `pairs=True`.
"""
from __future__ import annotations

import fnmatch

import numpy as np

PAIR_SEGMENTS = ("prompt", "chosen", "rejected")


def is_preference(segments) -> bool:
    names = [s.name for s in segments]
    return all(name in names for name in PAIR_SEGMENTS)


def target_segments(segments, target) -> np.ndarray:
    """A bool per segment: does it carry labels."""
    names = [s.name for s in segments]
    if target is None:
        return _default_target(segments)
    if isinstance(target, (str, int)):
        target = [target]
    chosen = np.zeros(len(segments), dtype=bool)
    for entry in target:
        if isinstance(entry, (int, np.integer)) and not isinstance(entry, bool):
            if not 0 <= entry < len(segments):
                raise ValueError(f"target index {entry} is not a segment index (0..{len(segments) - 1})")
            chosen[entry] = True
            continue
        hits = [i for i, name in enumerate(names) if fnmatch.fnmatchcase(name, entry)]
        if not hits:
            raise ValueError(f"target {entry!r} matches no segment; the segments are {names}")
        chosen[hits] = True
    return chosen


def _default_target(segments) -> np.ndarray:
    kinds = [s.kind for s in segments]
    names = [s.name for s in segments]
    if is_preference(segments):
        raise ValueError("a preference build (prompt, chosen, rejected) is read with pairs=True, "
                         "or give target= explicitly")
    if "trained" in kinds:
        return np.array([k == "trained" for k in kinds], dtype=bool)
    fields = [i for i, k in enumerate(kinds) if k == "field"]
    if not fields:
        raise ValueError(f"no field or trained segment to train on; give target= (segments: {names})")
    last = fields[-1]
    if names.count(names[last]) > 1:
        raise ValueError(f"the last field {names[last]!r} appears more than once in the template "
                         f"{names}: give target= (names, fnmatch patterns or segment indices)")
    return np.array([i == last for i in range(len(segments))], dtype=bool)


def starts(lengths: np.ndarray) -> np.ndarray:
    """Each segment's first payload position (exclusive prefix sums), (rows, n)."""
    out = np.zeros_like(lengths)
    np.cumsum(lengths[:, :-1], axis=1, out=out[:, 1:])
    return out


def label_mask(lengths: np.ndarray, targets: np.ndarray, unit: int) -> np.ndarray:
    """(rows, unit) bool: position p lies inside a target segment (one comparison of
    the positions with each target segment's start and end)."""
    begin = starts(lengths)[:, targets]
    end = begin + lengths[:, targets]
    pos = np.arange(unit)[None, :]
    mask = np.zeros((lengths.shape[0], unit), dtype=bool)
    for j in range(begin.shape[1]):
        mask |= (pos >= begin[:, j:j + 1]) & (pos < end[:, j:j + 1])
    return mask


def labels_for(ids: np.ndarray, mask: np.ndarray, ignore_id: int) -> np.ndarray:
    return np.where(mask, ids, np.int64(ignore_id))


def attention_mask(tokens: np.ndarray, width: int) -> np.ndarray:
    """(rows, width) int64, 1 on a row's first `tokens[row]` positions (its record) and 0
    on the padding after it: from the segment lengths, so a pad id that is also a real
    token (pad = EOS) is still attended. int64 as Hugging Face models take it."""
    return (np.arange(width)[None, :] < tokens[:, None]).astype(np.int64)


def block_causal_mask(document_ids: np.ndarray) -> np.ndarray:
    """bool [rows, 1, L, L] of a packed batch: query i may attend key j when j <= i and
    both hold the same record (`document_ids` equal), the 4-D boolean mask of PyTorch's
    `scaled_dot_product_attention` (True = attend) and of JAX/flax attention alike.
    A row's padding (-1) attends to its own padding, so no query is left with nothing to
    attend (SDPA gives NaN there, and NaN would reach the gradients)."""
    doc = np.asarray(document_ids)
    width = doc.shape[-1]
    causal = np.tri(width, dtype=bool)
    return (doc[:, None, :, None] == doc[:, None, None, :]) & causal


def pair_indices(segments) -> tuple[int, int]:
    names = [s.name for s in segments]
    if not is_preference(segments):
        raise ValueError(f"pairs=True needs a preference build (segments prompt, chosen, "
                         f"rejected); this one has {names}")
    chosen, rejected = names.index("chosen"), names.index("rejected")
    if rejected != chosen + 1 or rejected != len(names) - 1 or names.index("prompt") > chosen:
        raise ValueError(f"pairs=True expects ... prompt, chosen, rejected as the last segments; "
                         f"this build has {names}")
    return chosen, rejected


def pairs(payload: np.ndarray, lengths: np.ndarray, chosen: int, pad_id: int,
          ignore_id: int) -> dict[str, np.ndarray]:
    """Everything before `chosen` (the prompt, and any context before it) is shared:
    chosen = prefix + chosen, rejected = prefix + rejected, each left-aligned and padded
    with `pad_id` to the unit size; labels only on the completion; each side's length
    (prefix + completion) from the segment lengths."""
    rows, unit = payload.shape
    prefix = lengths[:, :chosen].sum(axis=1)[:, None]
    c = lengths[:, chosen][:, None]
    r = lengths[:, chosen + 1][:, None]
    pos = np.arange(unit)[None, :]
    pad = np.int64(pad_id)
    chosen_ids = np.where(pos < prefix + c, payload, pad)
    take = np.where(pos < prefix, pos, pos + c)
    np.minimum(take, unit - 1, out=take)
    rejected_ids = np.where(pos < prefix + r, np.take_along_axis(payload, take, axis=1), pad)
    ignore = np.int64(ignore_id)
    chosen_lengths, rejected_lengths = (prefix + c)[:, 0], (prefix + r)[:, 0]
    return {
        "chosen_input_ids": chosen_ids,
        "chosen_labels": np.where((pos >= prefix) & (pos < prefix + c), chosen_ids, ignore),
        "chosen_lengths": chosen_lengths,
        "rejected_input_ids": rejected_ids,
        "rejected_labels": np.where((pos >= prefix) & (pos < prefix + r), rejected_ids, ignore),
        "rejected_lengths": rejected_lengths,
    }


LABELS = ("aligned", "shifted")
LABELS_WHY = ("'aligned' (labels[t] is the target at token t: Hugging Face models shift "
              "inside) or 'shifted' (labels[t] is the target of position t, the next "
              "token: Megatron, torchtitan, a plain cross-entropy)",
              "'aligned' (labels[t] là nhãn tại token t: mô hình Hugging Face tự dịch bên "
              "trong) hoặc 'shifted' (labels[t] là nhãn của vị trí t, token kế tiếp: "
              "Megatron, torchtitan, cross-entropy thông thường)")


def shift_left(labels, ignore_id: int):
    """Aligned labels made shifted: position t gets the label of token t + 1, the last
    position `ignore_id` (a row's, or a record's: a packed record's first token is
    already `ignore_id`, so no loss crosses records either way)."""
    import numpy as np

    out = np.full_like(labels, ignore_id)
    out[..., :-1] = labels[..., 1:]
    return out
