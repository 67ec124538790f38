"""The shard-file checks of the pack-build verifier (`mintdim_beam.audit.pack_check`),
a mixin of its PackVerifier: the Megatron `.idx` and `.bin` of one shard and datatrove's
`.bin.index`. Kept apart from the provenance checks because these read binary layouts
and scan tokens, and own the per-shard state (`Shard`) the provenance checks consume.

The `.idx` is read whole (20 bytes per document: header, counts, document indices
0..S, consecutive pointers, lengths against the `.bin` size), and the `.bin.index` must
hold the same sequence ends; the `.bin` is scanned in chunks (memory-mapped when local,
read through fsspec otherwise): the EOD id must stand at the last position of every
sequence and nowhere else, the BOS id (when the manifest has one) at the first, and every
token must be an id below vocab_size. Memory: one shard's `.idx` arrays plus one chunk of
tokens.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from mintdim_beam.core.formats import megatron


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class Shard:
    """What one shard's .idx says, as far as it could be read."""
    name: str
    lengths: np.ndarray | None = None   # int64, tokens per sequence (EOD included)
    ends: np.ndarray | None = None      # int64, cumulative lengths (exclusive ends)
    sequences: int | None = None        # S from the .idx header (when the .idx is usable)
    tokens: int | None = None           # sum of lengths
    rows: int | None = None             # provenance rows read (None: unreadable)


class PackShardChecks:
    """The `.idx`, `.bin` and `.bin.index` checks of one shard, a mixin of PackVerifier.
    The attributes below are the state they share with the verifier."""

    # read: set by the verifier (with p, result, fs and _path)
    local: bool
    files: dict[str, int]
    vocab: int
    eod_id: int
    bos_id: int | None
    dtype: np.dtype
    dtype_name: str
    itemsize: int
    measured_complete: bool  # written: False when a shard file cannot be read

    def _idx(self, shard: Shard, entry: dict) -> None:
        rel = shard.name + ".idx"
        if rel not in self.files:
            self.measured_complete = False
            return
        try:
            with self.fs.open(self._path(rel), "rb") as handle:
                data = handle.read()
        except OSError as exc:
            self.p.add(rel, None, f"cannot be read: {exc}")
            self.measured_complete = False
            return
        self.result.bytes += len(data)
        if len(data) >= megatron.HEADER_BYTES:
            _, _, code, _, _ = struct.unpack_from("<9sQBQQ", data)
        try:
            index = megatron.read_idx(data)
        except ValueError as exc:
            self.p.add(rel, None, f"not a Megatron MMIDIDX index: {exc}")
            self.measured_complete = False
            return
        want_code = megatron.DTYPE_CODES[self.dtype_name]
        if code != want_code:
            self.p.add(rel, None, f"dtype code {code} ({index.dtype}) disagrees with "
                       f"manifest.json dtype {self.dtype_name} (code {want_code})")
        S = len(index.lengths)
        if len(index.documents) != S + 1:
            self.p.add(rel, None, f"{len(index.documents)} document indices for {S} "
                       f"sequences: one document per sequence needs {S + 1}")
        elif not np.array_equal(index.documents, np.arange(S + 1, dtype=np.int64)):
            i = int(np.flatnonzero(index.documents != np.arange(S + 1))[0])
            self.p.add(rel, None, f"document index {i} is {int(index.documents[i])}, not {i} "
                       "(the document indices must be 0, 1, ..., S)")
        lengths = index.lengths.astype(np.int64)
        low = 2 + (self.bos_id is not None)  # a token at least, the EOD (and the BOS)
        short = np.flatnonzero(lengths < low)
        if short.size:
            i = int(short[0])
            self.p.add(rel, None, f"sequence {i} has length {int(lengths[i])}, below {low} "
                       f"(at least one token, {'the BOS, ' if low == 3 else ''}the EOD)",
                       key=(rel, "short"), count=int(short.size))
        pointers = index.pointers.astype(np.int64)
        want = np.zeros(S, dtype=np.int64)
        if S:
            np.cumsum(lengths[:-1] * self.itemsize, out=want[1:])
        wrong = np.flatnonzero(pointers != want)
        if wrong.size:
            i = int(wrong[0])
            what = (f"pointer 0 is {int(pointers[0])}, not 0" if i == 0 else
                    f"pointer {i} is {int(pointers[i])}, but pointer {i - 1} "
                    f"({int(pointers[i - 1])}) + length {i - 1} ({int(lengths[i - 1])}) x "
                    f"{self.itemsize} bytes is {int(want[i])}")
            self.p.add(rel, None, f"{what}: pointers are not consecutive",
                       key=(rel, "pointer"), count=int(wrong.size))
        total = int(lengths.sum())
        shard.lengths, shard.ends = lengths, np.cumsum(lengths)
        shard.sequences, shard.tokens = S, total
        self.result.documents += S
        self.result.tokens += total
        if entry.get("documents") != S:
            self.p.add(rel, None, f"holds {plural(S, 'sequence')}, manifest.json shards "
                       f"says {entry.get('documents')!r} documents for {shard.name}")
        if entry.get("tokens") != total:
            self.p.add(rel, None, f"lengths sum to {total} tokens, manifest.json shards says "
                       f"{entry.get('tokens')!r} for {shard.name}")

    def _bin(self, shard: Shard, entry: dict) -> None:
        rel = shard.name + ".bin"
        if rel not in self.files:
            self.measured_complete = False
            return
        size = self.files[rel]
        self.result.bytes += size
        if entry.get("bin_bytes") != size:
            self.p.add(rel, None, f"size {size} bytes, manifest.json shards says bin_bytes "
                       f"{entry.get('bin_bytes')!r} for {shard.name}")
        if size % self.itemsize:
            self.p.add(rel, None, f"size {size} bytes is not a whole number of "
                       f"{self.itemsize}-byte {self.dtype_name} tokens")
        have = size // self.itemsize
        if shard.tokens is None:
            self._scan(rel, have, None)  # no usable .idx: token ids only
            return
        want = shard.tokens
        if have != want:
            complete = int(np.searchsorted(shard.ends, have, side="right"))
            self.p.add(rel, None, f"size {size} bytes, but the .idx lengths sum to {want} "
                       f"tokens = {want * self.itemsize} bytes ("
                       + (f"truncated: {complete} of {shard.sequences} sequences complete"
                          if have < want else f"{(have - want) * self.itemsize} bytes more")
                       + ")")
        self._scan(rel, min(have, want), shard)

    def _ends_index(self, shard: Shard) -> None:
        """datatrove's `<shard>.bin.index`: every sequence's end in tokens, cumulative,
        little-endian uint64, no header and no leading 0: the .idx lengths summed."""
        rel = shard.name + ".bin.index"
        if rel not in self.files:
            return
        size = self.files[rel]
        self.result.bytes += size
        if shard.ends is None:
            return
        if size != 8 * shard.sequences:
            self.p.add(rel, None, f"size {size} bytes, but {shard.sequences} sequences in "
                       f"{shard.name}.idx need {8 * shard.sequences} (one uint64 end each)")
            return
        try:
            with self.fs.open(self._path(rel), "rb") as handle:
                ends = np.frombuffer(handle.read(), dtype="<u8").astype(np.int64)
        except OSError as exc:
            self.p.add(rel, None, f"cannot be read: {exc}")
            return
        wrong = np.flatnonzero(ends != shard.ends)
        if wrong.size:
            i = int(wrong[0])
            self.p.add(rel, None, f"end {i} is {int(ends[i])}, but the .idx lengths of "
                       f"sequences 0..{i} sum to {int(shard.ends[i])}",
                       key=(rel, "end"), count=int(wrong.size))

    def _token_chunks(self, rel: str, count: int):
        """(first token, array) over tokens [0, count) of a .bin: the unit shard
        checker's chunked reader (memory-mapped locally, streamed remotely), one token
        per record."""
        for a, records in self._chunks(rel, count, 1):
            yield a, records.reshape(-1)

    def _scan(self, rel: str, count: int, shard: Shard | None) -> None:
        """Token ids below vocab_size; with the .idx: the EOD exactly at every sequence's
        last position, the BOS (if any) at every first."""
        eod, bos, vocab = self.eod_id, self.bos_id, self.vocab
        if shard is not None:
            last = shard.ends - 1
            first = shard.ends - shard.lengths
        for a, chunk in self._token_chunks(rel, count):
            b = a + len(chunk)
            bad = np.flatnonzero((chunk >= vocab) | (chunk < 0)) if self.dtype_name == "int32" \
                else np.flatnonzero(chunk >= vocab)
            if bad.size:
                j = a + int(bad[0])
                where = (f"sequence {int(np.searchsorted(shard.ends, j, side='right'))}, "
                         if shard is not None else "")
                self.p.add(rel, None, f"token {int(chunk[bad[0]])} at {where}position {j} is "
                           f"not an id in [0, vocab_size {vocab})", key=(rel, "vocab"),
                           count=int(bad.size))
            if shard is None:
                continue
            found = a + np.flatnonzero(chunk == eod)
            lo, hi = np.searchsorted(last, [a, b])
            expected = last[lo:hi]
            missing = np.setdiff1d(expected, found, assume_unique=True)
            if missing.size:
                j = int(missing[0])
                i = int(np.searchsorted(last, j))
                self.p.add(rel, None, f"sequence {i} ends with token {int(chunk[j - a])}, not "
                           f"the EOD id {eod} (its last position {j})", key=(rel, "no_eod"),
                           count=int(missing.size))
            inside = np.setdiff1d(found, expected, assume_unique=True)
            if inside.size:
                j = int(inside[0])
                i = int(np.searchsorted(shard.ends, j, side="right"))
                self.p.add(rel, None, f"EOD id {eod} inside a document: sequence {i} at "
                           f"token {j - int(first[i])} of {int(shard.lengths[i])} (position "
                           f"{j}); documents are tokenized as plain text, so the EOD id ends "
                           "them only", key=(rel, "eod_inside"), count=int(inside.size))
            if bos is not None:
                lo, hi = np.searchsorted(first, [a, b])
                starts = first[lo:hi]
                wrong = np.flatnonzero(chunk[starts - a] != bos)
                if wrong.size:
                    i = lo + int(wrong[0])
                    self.p.add(rel, None, f"sequence {i} starts with token "
                               f"{int(chunk[starts[wrong[0]] - a])}, not bos_id {bos}",
                               key=(rel, "no_bos"), count=int(wrong.size))
