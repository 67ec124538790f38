"""The shard checker of `mintdim-beam verify`: the records in the unit shards.

Shards are read in record-aligned numpy chunks (memory-mapped when local, through
fsspec otherwise) and each chunk is checked vectorized: the magic, the segment lengths,
the padding, the token range, and the UNK positions unk_index.jsonl lists for its
records. Then the rows of sample_index.jsonl are joined with the records (row k of a
unit is record k of that unit) on their token counts.
"""
from __future__ import annotations

import numpy as np

from mintdim_beam.core.formats import mintdim as fmt

CHUNK_SLOTS = 1 << 22  # token slots per numpy chunk (8 MiB of uint16)


class ShardChecks:
    """The shard checks, a mixin of the verifier (`mintdim_beam.audit.verify`).
    `_shards` and `_join_rows_and_records` run after the index checks; the attributes
    below are the state they share with the verifier and with IndexChecks."""

    # read: set by the verifier (with p, result, fs and _path)
    local: bool
    files: dict[str, int]
    vocab: int
    unk_id: int | None
    pad_id: int
    dtype: np.dtype
    bpt: int
    magic: int
    n: int
    sizes: list[int]
    S: int
    shard_files: dict[int, dict[int, str]]
    # read: set by IndexChecks
    row_tokens: dict
    row_lines: dict
    unk_entries: dict
    # set here: records is read by the summaries
    records: dict[int, int]
    record_sums: dict[int, dict[int, np.ndarray]]

    def _chunks(self, rel: str, records: int, width: int):
        """(first record, array of shape (c, width)) over the whole records of a shard."""
        if records <= 0:
            return
        step = max(1, CHUNK_SLOTS // width)
        path = self._path(rel)
        if self.local:
            mm = np.memmap(path, dtype=self.dtype, mode="r", shape=(records, width))
            try:
                for a in range(0, records, step):
                    yield a, np.asarray(mm[a:a + step])
            finally:
                del mm
            return
        with self.fs.open(path, "rb") as handle:
            for a in range(0, records, step):
                c = min(step, records - a)
                want = c * width * self.bpt
                data = handle.read(want)
                while len(data) < want:
                    more = handle.read(want - len(data))
                    if not more:
                        break
                    data += more
                c = len(data) // (width * self.bpt)
                if not c:
                    return
                yield a, np.frombuffer(data[:c * width * self.bpt], dtype=self.dtype).reshape(c, width)

    def _guess_unit(self, rel: str, size: int, own: int) -> str:
        """For a shard whose records do not fit: the unit whose records it looks like."""
        for other in self.sizes:
            width, rec_bytes = 1 + self.n + other, fmt.record_bytes(other, self.n, self.bpt)
            if other == own or size % rec_bytes:
                continue
            records = size // rec_bytes
            if self.local:
                heads = np.memmap(self._path(rel), dtype=self.dtype, mode="r",
                                  shape=(records, width))[:, 0]
            elif size <= 256 << 20:
                heads = np.frombuffer(self.fs.cat_file(self._path(rel)),
                                      dtype=self.dtype).reshape(records, width)[:, 0]
            else:
                return ""
            if bool(np.all(heads == self.magic)):
                return f"; it looks like a shard of unit_{other} ({records} records of {width} slots)"
        return ""

    def _shards(self) -> None:
        """Every shard of every unit, in record-aligned numpy chunks."""
        self.records: dict[int, int] = {}
        self.record_sums: dict[int, dict[int, np.ndarray]] = {}
        for unit in self.sizes:
            shards = self.shard_files[unit]
            unks = tuple(np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)
                         for a in self.unk_entries[unit])  # k, position, field, line
            count = (max(shards) + 1) if shards else 0
            self.records[unit] = 0
            self.record_sums[unit] = {}  # k -> segment-length sums of its first <= S records
            for k in sorted(shards):
                self._scan_shard(unit, k, shards[k], last=k == count - 1, unks=unks)
        self.result.records = sum(self.records.values())
        self.result.units_with_records = sum(1 for v in self.records.values() if v)

    def _scan_shard(self, unit: int, k: int, rel: str, last: bool, unks) -> None:
        n, S = self.n, self.S
        width, rec_bytes = 1 + n + unit, fmt.record_bytes(unit, n, self.bpt)
        size = self.files[rel]
        self.result.bytes += size
        records, extra = divmod(size, rec_bytes)
        self.records[unit] += records
        if size == 0:
            self.p.add(rel, None, "empty shard (no shard file may be empty)")
            return
        if extra:
            self.p.add(rel, None, f"size {size} bytes is not a whole number of records of "
                       f"{width} slots (1 + {n} + unit {unit}, {rec_bytes} bytes): {extra} bytes "
                       f"over {records} records (truncated, or a shard of another unit)"
                       f"{self._guess_unit(rel, size, unit)}")
        elif records > S or (not last and records != S):
            self.p.add(rel, None, f"holds {records} records; every shard but the last holds "
                       f"samples_per_shard = {S} and the last 1..{S}")
        damaged = False  # some record's contents do not fit this unit
        kept = []
        for a, chunk in self._chunks(rel, records, width):
            sums, inside, bad = self._check_records(rel, unit, a, chunk)
            damaged = damaged or bad
            keep = min(chunk.shape[0], max(0, S - a))  # rows that are unit records k*S + i
            if keep:
                kept.append(sums[:keep])
                self._check_unks(rel, k * S + a, a, chunk[:keep], inside[:keep], unks)
        if kept:
            self.record_sums[unit][k] = np.concatenate(kept)
        if damaged and not extra:
            guess = self._guess_unit(rel, size, unit)
            if guess:
                self.p.add(rel, None, f"records do not fit unit_{unit}{guess}")

    def _check_records(self, rel: str, unit: int, a: int, chunk: np.ndarray):
        """Magic, lengths, padding and token range of records a.. of a shard, vectorized.
        Returns the records' segment-length sums, which payload slots hold their tokens,
        and whether any record is damaged."""
        n = self.n
        bad_magic = np.flatnonzero(chunk[:, 0] != self.magic)
        if bad_magic.size:
            r = bad_magic[0]
            self.p.add(rel, a + r, f"slot 0 is {int(chunk[r, 0])}, not the magic {self.magic} "
                       "(record misaligned or corrupt)", key=(rel, "magic"),
                       count=int(bad_magic.size))
        sums = chunk[:, 1:1 + n].astype(np.int64).sum(axis=1)
        bad_len = np.flatnonzero(sums > unit)
        if bad_len.size:
            r = bad_len[0]
            self.p.add(rel, a + r, f"segment lengths {chunk[r, 1:1 + n].tolist()} sum to "
                       f"{int(sums[r])} > unit size {unit}", key=(rel, "lengths"),
                       count=int(bad_len.size))
        payload = chunk[:, 1 + n:]
        inside = np.arange(unit)[None, :] < sums[:, None]
        bad_pad = np.flatnonzero(((payload != self.pad_id) & ~inside).any(axis=1))
        if bad_pad.size:
            r = bad_pad[0]
            j = int(np.flatnonzero((payload[r] != self.pad_id) & ~inside[r])[0])
            self.p.add(rel, a + r, f"payload slot {j} (after the {int(sums[r])}-token payload) "
                       f"is {int(payload[r, j])}, not pad_id {self.pad_id}", key=(rel, "pad"),
                       count=int(bad_pad.size))
        bad_tok = np.flatnonzero(((payload >= self.vocab) & inside).any(axis=1))
        if bad_tok.size:
            r = bad_tok[0]
            j = int(np.flatnonzero((payload[r] >= self.vocab) & inside[r])[0])
            self.p.add(rel, a + r, f"payload token {int(payload[r, j])} at position {j} is not "
                       f"below vocab_size {self.vocab} (the bound of the tokenizer's ids; the "
                       "magic is never a token)",
                       key=(rel, "vocab"), count=int(bad_tok.size))
        return sums, inside, bool(bad_magic.size or bad_len.size or bad_pad.size or bad_tok.size)

    def _check_unks(self, rel, first, a, chunk, inside, unks) -> None:
        """Records first.. of the unit (rows a.. of the shard): each listed UNK position
        holds unk_id inside the segment it names, and no other payload token is unk_id."""
        n = self.n
        unk_k, unk_p, unk_f, unk_l = unks
        c = chunk.shape[0]
        lo, hi = np.searchsorted(unk_k, [first, first + c]) if unk_k.size else (0, 0)
        payload = chunk[:, 1 + n:]
        have = (np.zeros(c, dtype=np.int64) if self.unk_id is None else  # no UNK token
                np.count_nonzero((payload == self.unk_id) & inside, axis=1))
        want = np.bincount(unk_k[lo:hi] - first, minlength=c)
        diff = np.flatnonzero(have != want)
        if diff.size:
            r = diff[0]
            self.p.add(rel, a + r, f"payload holds {int(have[r])} unk_id ({self.unk_id}) tokens, "
                       f"unk_index.jsonl lists {int(want[r])} for this record",
                       key=(rel, "unk_count"), count=int(diff.size))
        if hi <= lo:
            return
        rows, pos = unk_k[lo:hi] - first, unk_p[lo:hi]
        got = payload[rows, pos]
        bad = np.flatnonzero(got != self.unk_id)
        if bad.size:
            b = bad[0]
            self.p.add(fmt.UNK_INDEX, int(unk_l[lo + b]), f"position {int(pos[b])} of record "
                       f"{a + int(rows[b])} in {rel} holds {int(got[b])}, not unk_id "
                       f"{self.unk_id}", key=("unk", "token"), count=int(bad.size))
        ends = np.cumsum(chunk[rows, 1:1 + n].astype(np.int64), axis=1)
        segment = (ends <= pos[:, None]).sum(axis=1)
        bad = np.flatnonzero(segment != unk_f[lo:hi])
        if bad.size:
            b = bad[0]
            where = (f"is in segment {int(segment[b])}" if segment[b] < n else
                     f"is past the record's {int(ends[b, -1])}-token payload")
            self.p.add(fmt.UNK_INDEX, int(unk_l[lo + b]), f"position {int(pos[b])} {where} "
                       f"of record {a + int(rows[b])} in {rel}, unk_field_indices says "
                       f"{int(unk_f[lo + b])}", key=("unk", "field"), count=int(bad.size))

    def _join_rows_and_records(self) -> None:
        """The k-th row of unit U is record k of U (shard k // S, position k % S)."""
        S = self.S
        rel = fmt.SAMPLE_INDEX
        for unit in self.sizes:
            tokens = (np.frombuffer(self.row_tokens[unit], dtype=np.int64)
                      if len(self.row_tokens[unit]) else np.zeros(0, np.int64))
            lines = self.row_lines[unit]
            rows, records = tokens.size, self.records[unit]
            shard_sums = self.record_sums[unit]
            if rows != records:
                self.p.add(rel, None, f"unit_{unit} has {rows} sample_index rows but {records} "
                           "records in its shards")
            for k in range(-(-rows // S)):  # rows whose record does not exist
                start = k * S + len(shard_sums.get(k, ()))
                end = min(k * S + S, rows)
                if start < end:
                    self.p.add(rel, lines[start], f"row {start} of unit_{unit} has no record "
                               f"(record {start % S} of {fmt.shard_name(unit, k)} does not "
                               "exist)", key=(rel, "no_record", unit), count=end - start)
            for k in sorted(shard_sums):
                sums = shard_sums[k]
                lo, hi = k * S, k * S + sums.size
                if hi > rows:  # records without a row
                    start = max(lo, rows)
                    self.p.add(fmt.shard_name(unit, k), start - lo, f"record {start} of "
                               f"unit_{unit} has no sample_index.jsonl row",
                               key=("no_row", unit), count=hi - start)
                common = min(hi, rows) - lo
                if common <= 0:
                    continue
                diff = np.flatnonzero(sums[:common] != tokens[lo:lo + common])
                if diff.size:
                    j = lo + int(diff[0])
                    self.p.add(rel, lines[j], f"token_count {int(tokens[j])} but its record "
                               f"(record {j - lo} of {fmt.shard_name(unit, k)}) has segment "
                               f"lengths summing to {int(sums[j - lo])}",
                               key=(rel, "token_count", unit), count=int(diff.size))
