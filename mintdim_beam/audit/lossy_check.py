"""The round-trip checker of `mintdim-beam verify`: `lossy_index.jsonl` against the
manifest's `round_trip` block and the sample rows (`round_trip`, `template_checks`).

Each row must be the canonical line of a written record (its sample_index.jsonl row
exists, with the same source), name that record's field segments by index and name
with a known kind; the manifest's totals must be the rows' (lossy samples, lossy
segments, counts per kind) and `segments_checked` every field segment of every record.
A build of mintdim 0.2.1 or of our versions before the check has neither the block nor
the file.
"""
from __future__ import annotations

from collections import Counter

from mintdim_beam.core.formats import mintdim as fmt
from mintdim_beam.core.tokenizer.round_trip import KINDS

LOSSY_KEYS = ["sample_id", "source_file", "source_line", "segments", "segment_names",
              "kinds", "source", "decoded"]
ROUND_TRIP_KEYS = ["segments_checked", "lossy_segments", "lossy_samples", "kinds", "index",
                   "template"]
NOT_CHECKED = ("literal",)  # segment kinds judged once, at config time


class LossyChecks:
    """A mixin of the verifier: `_round_trip_block` with the manifest, then the rows
    joined with the sample rows in `_indices` (`lossy_rows`, `lossy_row`,
    `lossy_orphan`), then `_lossy_totals` with the summaries."""

    # read: set by the verifier
    files: dict[str, int]
    template: list[str]
    segment_kinds: list
    # set here
    round_trip: dict | None

    def _round_trip_block(self, m: dict) -> None:
        block = m.get("round_trip")
        self.round_trip, self._lossy_seen = None, Counter()
        if block is None:
            if fmt.LOSSY_INDEX in self.files:
                self.p.add(fmt.MANIFEST, None, f"round_trip is missing but {fmt.LOSSY_INDEX} "
                           "exists")
            return
        if not isinstance(block, dict) or list(block) != ROUND_TRIP_KEYS:
            self.p.add(fmt.MANIFEST, None, f"round_trip {block!r} is not an object with keys "
                       f"{ROUND_TRIP_KEYS}")
            return
        counts = [block[k] for k in ROUND_TRIP_KEYS[:3]]
        kinds = block["kinds"]
        if (not all(type(c) is int and c >= 0 for c in counts) or not isinstance(kinds, dict)
                or list(kinds) != list(KINDS)
                or not all(type(v) is int and v >= 0 for v in kinds.values())):
            self.p.add(fmt.MANIFEST, None, f"round_trip counts {counts} / kinds {kinds!r} are "
                       f"not non-negative ints (kinds: {list(KINDS)})")
            return
        if block["index"] != fmt.LOSSY_INDEX:
            self.p.add(fmt.MANIFEST, None, f"round_trip.index {block['index']!r} is not "
                       f"{fmt.LOSSY_INDEX!r}")
        if not isinstance(block["template"], list):
            self.p.add(fmt.MANIFEST, None, "round_trip.template is not a list of findings")
        if fmt.LOSSY_INDEX not in self.files:
            self.p.add(fmt.LOSSY_INDEX, None, "missing (manifest.json has a round_trip block)")
        self.round_trip = block

    def lossy_rows(self):
        """(line, row) of lossy_index.jsonl, for the join in `_indices`."""
        if self.round_trip is None:
            return iter(())
        return self._jsonl(fmt.LOSSY_INDEX, LOSSY_KEYS, part=self.part_rule())

    def lossy_orphan(self, line: int, row: dict) -> None:
        self.p.add(fmt.LOSSY_INDEX, line, f"{self.row_label(row)} has no sample_index.jsonl "
                   "row (only written records are checked)", key=("lossy", "orphan"))

    def lossy_row(self, line: int, row: dict, sample: dict) -> None:
        """One row against its sample's row and the layout."""
        rel = fmt.LOSSY_INDEX
        if (row["source_file"], row["source_line"]) != (sample["source_file"],
                                                        sample["source_line"]):
            self.p.add(rel, line, f"source {row['source_file']}:{row['source_line']} is not "
                       f"its sample's {sample['source_file']}:{sample['source_line']}",
                       key=(rel, "source"))
        segments, names, kinds = row["segments"], row["segment_names"], row["kinds"]
        if not (isinstance(segments, list) and isinstance(names, list)
                and isinstance(kinds, list) and segments
                and len(segments) == len(names) == len(kinds)):
            self.p.add(rel, line, "segments, segment_names and kinds are not lists of one "
                       "length (at least one)", key=(rel, "lists"))
            return
        if segments != sorted(set(segments)) or not all(type(s) is int for s in segments):
            self.p.add(rel, line, f"segments {segments} are not ascending segment indices",
                       key=(rel, "segments"))
            return
        for segment, name, kind in zip(segments, names, kinds):
            if not 0 <= segment < self.n or self._segment_kind(segment) in NOT_CHECKED:
                self.p.add(rel, line, f"segment {segment} is not a field segment of "
                           "sequence_template", key=(rel, "segment"))
            elif name != self.template[segment]:
                self.p.add(rel, line, f"segment_names {name!r} is not segment {segment}'s "
                           f"name {self.template[segment]!r}", key=(rel, "name"))
            if kind not in KINDS:
                self.p.add(rel, line, f"kind {kind!r} is not one of {list(KINDS)}",
                           key=(rel, "kind"))
        if not isinstance(row["source"], str) or not isinstance(row["decoded"], str):
            self.p.add(rel, line, "source and decoded are not strings", key=(rel, "text"))
        self._lossy_seen["samples"] += 1
        self._lossy_seen["segments"] += len(segments)
        self._lossy_seen.update(f"kind:{kind}" for kind in kinds)

    def _segment_kind(self, index: int):
        kinds = getattr(self, "segment_kinds", None)
        return kinds[index] if kinds and index < len(kinds) else None

    def _lossy_totals(self, records: int) -> None:
        """The manifest's totals against the rows and the records."""
        block = self.round_trip
        if block is None:
            return
        checked = sum(1 for i in range(self.n) if self._segment_kind(i) not in NOT_CHECKED)
        seen = self._lossy_seen
        want = {"segments_checked": (records * checked, f"{records} records x {checked} field "
                                                        "segments"),
                "lossy_samples": (seen["samples"], f"{fmt.LOSSY_INDEX} rows"),
                "lossy_segments": (seen["segments"], f"the segments of {fmt.LOSSY_INDEX}")}
        for key, (value, source) in want.items():
            if block[key] != value:
                self.p.add(fmt.MANIFEST, None, f"round_trip.{key} is {block[key]} but {source} "
                           f"give {value}")
        for kind in KINDS:
            if block["kinds"][kind] != seen[f"kind:{kind}"]:
                self.p.add(fmt.MANIFEST, None, f"round_trip.kinds.{kind} is "
                           f"{block['kinds'][kind]} but {fmt.LOSSY_INDEX} has "
                           f"{seen[f'kind:{kind}']}")
