"""Trained-turn boundaries from a cached *skeleton* render: one render per dialogue in
the common case, instead of the 2T+1 prefix renders of `segments.render_dialogue`.

A dialogue's *structure* is, per message: its role, whether it is trained, its
content's outer whitespace (or the whole content when it is empty or whitespace), and
its other template keys by value (`tool_calls`, `name`, ... as `repr`, only when they
are plain JSON-like data). For a structure seen twice, the skeleton dialogue (every
non-blank content replaced by `lead + sentinel_i + trail`, where the sentinel is two
private-use marker characters around the message index, chosen absent from the
template's source, BOS/EOS and variables) goes once through the exact prefix-render
procedure; its render, cut at the sentinels, and its turn boundaries are cached (an LRU
of `MAX_STRUCTURES` per template object).

For a real dialogue of a cached structure, the caller has rendered it once (`text`);
the expected text is the skeleton render with each sentinel replaced by the message's
content without outer whitespace. Only when that equals `text` exactly are the turn
boundaries taken from the skeleton's, shifted by the content length differences;
otherwise (the template transforms or tests the content in a way the skeleton does
not show: a `trim` of new whitespace, escaping, a branch on the text, ...) the caller
falls back to the prefix renders. Whatever goes wrong in the skeleton (a template
error, a turn that is not a prefix, a stray marker, a boundary inside a sentinel) marks
the structure as slow-path only, and the real dialogue gets the exact procedure and its
exact problem.

The check covers the full render; the prefix renders are inferred. A template whose
output depends on the content's text (not on its emptiness or outer whitespace, which
the structure holds) only in a prefix render and not in the full one would escape it;
`render_dialogue(..., fast=False)` is the exact procedure for such templates.
"""
from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from typing import Callable, Sequence

MAX_STRUCTURES = 4096
_SEEN = object()      # structure seen once: no skeleton yet
_SLOW = object()      # structure whose skeleton failed: always the exact procedure
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def _plain(value) -> bool:
    kind = type(value)  # exact types: a str subclass (e.g. Markup) renders differently
    if kind in _PLAIN_SCALARS:
        return True
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def _choose_markers(template) -> tuple[str, str]:
    seen = "".join(str(getattr(template, name, "") or "") for name in
                   ("source", "bos_token", "eos_token"))
    seen += repr(getattr(template, "template_vars", ""))
    for code in range(0xE000, 0xF8FE, 2):
        m0, m1 = chr(code), chr(code + 1)
        if m0 not in seen and m1 not in seen:
            return m0, m1
    return "", ""


class _Cache:
    def __init__(self, template):
        self.markers = _choose_markers(template)
        self.entries: OrderedDict = OrderedDict()
        self.lock = threading.Lock()


_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(template) -> _Cache | None:
    try:
        cache = _CACHES.get(template)
        if cache is None:
            with _CACHES_LOCK:
                cache = _CACHES.get(template)
                if cache is None:
                    cache = _CACHES[template] = _Cache(template)
        return cache
    except TypeError:  # not hashable or not weak-referenceable: no cache
        return None


def clear_caches() -> None:
    """Forget every cached skeleton (tests)."""
    with _CACHES_LOCK:
        _CACHES.clear()


class _Skeleton:
    """The skeleton render cut at its sentinels: `pieces[0] slot0 pieces[1] ... slotN
    pieces[N+1]`, `slots` the message index of each sentinel, and per turn the literal
    length before its start/end and how many sentinels precede each."""

    __slots__ = ("pieces", "slots", "bounds")

    def __init__(self, pieces, slots, bounds):
        self.pieces, self.slots, self.bounds = pieces, slots, bounds


def _structure(dicts: Sequence[dict], trained: Sequence[int]):
    """(key, cores): the dialogue's structure key and each message's content without
    outer whitespace ("" for blank content); None when a message is not plain data."""
    key, cores = [], []
    for k, d in enumerate(dicts):
        content = d["content"]
        if type(content) is not str:
            return None
        if content and not content[0].isspace() and not content[-1].isspace():
            core, part = content, (k in trained, "", "")  # the common case: no outer blank
        else:
            core = content.strip()
            if core:
                part = (k in trained, content[:len(content) - len(content.lstrip())],
                        content[len(content.rstrip()):])
            else:
                part = (k in trained, content, None)
        if len(d) == 2:
            part += (d["role"],)
        else:
            rest = [(name, value) for name, value in d.items() if name != "content"]
            if not _plain(rest):
                return None
            part += (repr(rest),)
        key.append(part)
        cores.append(core)
    return tuple(key), cores


def _build(template, dicts, trained, cores, markers, find_turns) -> _Skeleton | None:
    m0, m1 = markers
    sentinels = {}
    sdicts = []
    for k, (d, core) in enumerate(zip(dicts, cores)):
        if core:
            content = d["content"]
            lead = content[:len(content) - len(content.lstrip())]
            trail = content[len(content.rstrip()):]
            sentinels[k] = f"{m0}{k}{m1}"
            d = {**d, "content": lead + sentinels[k] + trail}
        sdicts.append(d)
    try:
        text = template.render_dicts(sdicts)
        turns, _ = find_turns(template, sdicts, trained, text)
    except Exception:  # noqa: BLE001 - any failure: the real dialogue takes the exact path
        return None
    found = list(re.finditer(f"{re.escape(m0)}([0-9]+){re.escape(m1)}", text))
    if text.count(m0) != len(found) or text.count(m1) != len(found):
        return None  # a marker the sentinels do not explain
    pieces, slots, spans, cursor = [], [], [], 0
    for match in found:
        k = int(match.group(1))
        if sentinels.get(k) != match.group():
            return None
        pieces.append(text[cursor:match.start()])
        slots.append(k)
        spans.append((match.start(), match.end()))
        cursor = match.end()
    pieces.append(text[cursor:])

    def where(p):  # (literal length before p, sentinels before p), None inside one
        before, skipped = 0, 0
        for s, e in spans:
            if e <= p:
                before += 1
                skipped += e - s
            elif s < p:
                return None
            else:
                break
        return p - skipped, before

    bounds = []
    for start, end in turns:
        a, b = where(start), where(end)
        if a is None or b is None:
            return None
        bounds.append(a + b)
    return _Skeleton(tuple(pieces), tuple(slots), tuple(bounds))


def _cached(template, dicts: Sequence[dict], trained: Sequence[int], find_turns: Callable,
            at_once: bool = False):
    """(skeleton, cores) of the dialogue's structure, or None: not plain data, seen for
    the first time (remembered), or its skeleton failed. A structure seen before (with
    `at_once`, also one seen now) gets its skeleton built here."""
    cache = cache_for(template)
    if cache is None or not cache.markers[0]:
        return None
    found = _structure(dicts, trained)
    if found is None:
        return None
    key, cores = found
    entries = cache.entries
    with cache.lock:
        entry = entries.get(key)
        if entry is not None:
            entries.move_to_end(key)
        elif at_once:
            entry = _SEEN
        else:
            entries[key] = _SEEN
            if len(entries) > MAX_STRUCTURES:
                entries.popitem(last=False)
    if entry is None or entry is _SLOW:
        return None
    if entry is _SEEN:
        entry = _build(template, dicts, trained, cores, cache.markers, find_turns)
        with cache.lock:
            entries[key] = _SLOW if entry is None else entry
            if len(entries) > MAX_STRUCTURES:
                entries.popitem(last=False)
        if entry is None:
            return None
    return entry, cores


def _filled(entry: _Skeleton, cores) -> tuple[str, list[int]]:
    """The skeleton render with each sentinel replaced by its content's core, and the
    core characters before each sentinel (for shifting the turn boundaries)."""
    pieces = entry.pieces
    parts = [pieces[0]]
    cum = [0]
    total = 0
    for i, k in enumerate(entry.slots):
        core = cores[k]
        parts += (core, pieces[i + 1])
        total += len(core)
        cum.append(total)
    return "".join(parts), cum


def _shifted(entry: _Skeleton, cum) -> tuple[tuple[int, int], ...] | None:
    turns, last_end = [], 0
    for lit_s, n_s, lit_e, n_e in entry.bounds:
        start, end = lit_s + cum[n_s], lit_e + cum[n_e]
        if start < last_end or end <= start:
            return None
        turns.append((start, end))
        last_end = end
    return tuple(turns)


def fast_turns(template, dicts: Sequence[dict], trained: Sequence[int], text: str,
               find_turns: Callable) -> tuple[tuple[int, int], ...] | None:
    """The trained turns' (start, end) in `text` (= `template.render_dicts(dicts)`) from
    the structure's cached skeleton, or None: use the exact procedure `find_turns`
    (`(template, dicts, trained, text) -> (turns, turn_messages)`)."""
    found = _cached(template, dicts, trained, find_turns)
    if found is None:
        return None
    entry, cores = found
    built, cum = _filled(entry, cores)
    if built != text:
        return None
    return _shifted(entry, cum)


def skeleton_render(template, dicts: Sequence[dict], trained: Sequence[int],
                    find_turns: Callable) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """(render, trained turns) of a dialogue of a cached structure without rendering it,
    or None (render it, then `fast_turns`). Only for a template whose render is, by
    construction, its skeleton's with each core substituted (`ChatTemplate
    .skeleton_exact`: the built-ins print each content as given or trimmed, and branch
    on nothing but what the structure holds), so the check `fast_turns` makes would
    always pass: it and the render it needs are what this saves. A structure's skeleton
    is built when first seen: its renders replace the exact procedure's."""
    found = _cached(template, dicts, trained, find_turns, at_once=True)
    if found is None:
        return None
    entry, cores = found
    text, cum = _filled(entry, cores)
    turns = _shifted(entry, cum)
    return None if turns is None else (text, turns)
