"""The dialogue checks of `mintdim-beam verify`: what a chat or preference build writes
beyond mintdim 0.2.1.

A dialogue dataset (manifest `source.type` "chat" or "preference") differs from a
templated one in a few places, each checked here and called from the verifier and the
index checker:

- the manifest's `source` block holds the dialogue settings (validated as the build
  validates them) instead of `fields` / `templates`;
- every segment of length_field.json is `context` or `trained` (content null, no `field`
  key), with optional `bos` / `eos` literal segments first / last, and the layout is the
  one the settings give (`context_0, assistant_0, ..., context_K`; `prompt, chosen,
  rejected`);
- `empty_fields` is always `[]`;
- with `on_extra_turns: "split"` one line may give several records: each row that
  refers to a record (sample, UNK and overflow rows) carries a last key `part`, rows are
  ascending by (sample_id, part), the parts of one sample_id share its source line and
  are numbered 0, 1, ... (a skipped part keeps its number, through its overflow row);
  rows of a whole line skipped (`line_bytes`, `trained_turns`) have no part;
- overflow rows may be whole-line skips (`token_count` null with `line_bytes`, or with
  `trained_turns` for a dialogue skipped for extra turns) or a truncation skipped for
  leaving no trained token (`reason`).
"""
from __future__ import annotations

from mintdim_beam.core.config.sources import dialogue_source, is_trained, segment_names
from mintdim_beam.core.errors import PipelineValidationError
from mintdim_beam.core.formats import mintdim as fmt

DIALOGUE_KINDS = ("chat", "preference")
EDGE_LITERALS = ("bos", "eos")  # literal segments a dialogue layout may start / end with
# What the part key of a row may be: as in mintdim (no rule: a part key is an unknown
# key), forbidden (a dialogue dataset that is not split), required (a record row of a
# split dataset), or required unless the row is a whole-line skip (overflow rows).
PART_FORBIDDEN, PART_REQUIRED, PART_OVERFLOW = "forbidden", "required", "overflow"
WHOLE_LINE_KEYS = ("line_bytes", "trained_turns")


def _whole_line(row: dict) -> bool:
    return any(key in row for key in WHOLE_LINE_KEYS)


class DialogueChecks:
    """The dialogue checks, a mixin of the verifier (`mintdim_beam.audit.verify`). The
    manifest check sets `dialogue` (the source settings, or None for a templated
    dataset) and `split`; the index checks read them and call the row helpers here."""

    # read: set by the verifier (with p, result)
    template: list[str]
    field_segments: list[str]
    # set here
    dialogue = None
    split = False

    # ---------------------------------------------------------------- manifest, layout
    def _dialogue_manifest(self, manifest: dict) -> None:
        """`source` of a chat / preference build: its settings as the build validates
        them (plus `strftime_now`, the fixed date a template may ask for)."""
        source = manifest.get("source")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind is None:
            return
        if kind not in DIALOGUE_KINDS:
            self.p.add(fmt.MANIFEST, None, f"source.type {kind!r} is not one of "
                       f"{list(DIALOGUE_KINDS)}")
            return
        settings = {k: v for k, v in source.items() if k != "strftime_now"}
        try:
            self.dialogue = dialogue_source(settings, kind)
        except PipelineValidationError as exc:
            first = str(exc).strip().splitlines()
            self.p.add(fmt.MANIFEST, None, f"source is not a valid {kind} source: "
                       + (first[0][:300] if first else type(exc).__name__))
            return
        want = self.dialogue.manifest_block(source.get("files") or []) | (
            {"strftime_now": source["strftime_now"]} if "strftime_now" in source else {})
        if list(source) != list(want):
            self.p.add(fmt.MANIFEST, None, f"source keys {list(source)} are not {list(want)}")
        if "strftime_now" in source and not isinstance(source["strftime_now"], str):
            self.p.add(fmt.MANIFEST, None, f"source.strftime_now {source['strftime_now']!r} "
                       "is not a string")
        for key in ("fields", "templates"):
            if key in source:
                self.p.add(fmt.MANIFEST, None, f"source.{key} belongs to templated sources, "
                           f"not to a {kind} source")
        self.split = kind == "chat" and self.dialogue.on_extra_turns == "split"
        self.field_segments = []  # no field segments: empty_fields is always []
        self._dialogue_template()

    def _dialogue_template(self) -> None:
        """sequence_template is the fixed layout of the settings, optionally between a
        `bos` and an `eos` segment."""
        names = list(self.template)
        want = segment_names(self.dialogue)
        core = names[1 if names[:1] == ["bos"] else 0:]
        core = core[:-1] if core[-1:] == ["eos"] else core
        if core != want:
            turns = (f"max_turns {self.dialogue.max_turns}" if self.dialogue.kind == "chat"
                     else "a preference source")
            self.p.add(fmt.MANIFEST, None, f"sequence_template {names} is not the layout of "
                       f"{turns}: {want} (with an optional bos first and eos last)")
        elif self.dialogue.kind == "preference" and names[-1:] == ["eos"]:
            self.p.add(fmt.MANIFEST, None, "sequence_template ends with an eos segment after "
                       "rejected: neither completion ends with EOS and no pairs reader reads "
                       "it (a build of mintdim-beam before 0.2.0; build again: EOS now ends "
                       "each completion)")

    def _dialogue_segment(self, rel: str, i: int, entry: dict) -> None:
        """One length_fields entry of a dialogue dataset."""
        kind, name = entry.get("kind"), entry.get("name")
        if kind in ("context", "trained"):
            if entry.get("content") is not None or "field" in entry:
                self.p.add(rel, None, f"length_fields[{i}] is a {kind} segment: content must "
                           "be null, with no field key")
            if isinstance(name, str) and name not in EDGE_LITERALS and (
                    (kind == "trained") != is_trained(name)):
                want = "trained" if is_trained(name) else "context"
                self.p.add(rel, None, f"length_fields[{i}] {name!r} is {kind}, but a "
                           f"{self.dialogue.kind} layout makes it {want}")
        elif kind == "literal":
            if not isinstance(entry.get("content"), str) or "field" in entry:
                self.p.add(rel, None, f"length_fields[{i}] is a literal segment: content "
                           "must be its text, with no field key")
            if name not in EDGE_LITERALS:
                self.p.add(rel, None, f"length_fields[{i}] {name!r} is a literal segment; in "
                           f"a dialogue dataset only {' and '.join(EDGE_LITERALS)} are")
        else:
            self.p.add(rel, None, f"length_fields[{i}].kind {kind!r} is not context, trained "
                       "or literal (the segment kinds of a dialogue dataset)")

    # ---------------------------------------------------------------- part keys
    def part_rule(self, overflow: bool = False):
        if self.dialogue is None:
            return None
        if not self.split:
            return PART_FORBIDDEN
        return PART_OVERFLOW if overflow else PART_REQUIRED

    def _part_names(self, rel: str, line: int, row: dict, rule) -> list:
        """The row's keys without a valid last `part` key, its presence checked against
        `rule` (what remains is compared with the file's own keys)."""
        names = list(row)
        if rule is None:
            return names
        has = "part" in row
        if has and rule == PART_FORBIDDEN:
            self.p.add(rel, line, "part key in a dataset that is not split (only "
                       "on_extra_turns \"split\" numbers the records of a dialogue)",
                       key=(rel, "part_forbidden"))
        elif has and rule == PART_OVERFLOW and _whole_line(row):
            self.p.add(rel, line, "part key on the row of a whole line skipped (it has no "
                       "record)", key=(rel, "part_whole_line"))
        elif not has and (rule == PART_REQUIRED or (rule == PART_OVERFLOW and not _whole_line(row))):
            self.p.add(rel, line, "no part key: every row that refers to a record of a "
                       "split dataset (on_extra_turns \"split\") carries part last",
                       key=(rel, "part_missing"))
        if has:
            if names[-1] != "part":
                self.p.add(rel, line, f"keys {names}: part must be the last key",
                           key=(rel, "part_last"))
            names.remove("part")
        return names

    def row_key(self, row: dict):
        """The order key of an index row: sample_id, or (sample_id, part) when split (a
        row without part sorts before the parts of its sample_id)."""
        sid = row["sample_id"]
        if not self.split:
            return sid
        part = row.get("part", -1)
        return sid, part if type(part) is int and part >= 0 else -1

    def row_label(self, row: dict) -> str:
        part = row.get("part") if self.split else None
        return f"sample_id {row['sample_id']}" + ("" if part is None else f" part {part}")

    def _part_seen(self, sid: int, part, rel: str, line: int) -> None:
        """Parts of one sample_id, in the merged order of sample and overflow rows, count
        0, 1, ... without gaps (a skipped part has its overflow row)."""
        if sid != self._part_sid:
            self._part_sid, self._part_next = sid, 0
        if part != self._part_next:
            self.p.add(rel, line, f"part {part} of sample_id {sid} where part "
                       f"{self._part_next} is due: the records of a split dialogue are "
                       "numbered 0, 1, ..., each with a sample_index.jsonl row or, when "
                       "skipped, an overflow_index.jsonl row", key=("part", "sequence"))
        self._part_next = part + 1 if type(part) is int else self._part_next + 1

    def _sample_part(self, rel: str, line: int, row: dict, last_key):
        """(sample_id, part) of a sample row in a split dataset; a missing or wrong part
        (already reported) is taken as the next one, so one bad row is one problem."""
        sid, part = row["sample_id"], row.get("part")
        if type(part) is not int or part < 0:
            if "part" in row:
                self.p.add(rel, line, f"part {part!r} is not a non-negative int",
                           key=(rel, "part_type"))
            part = last_key[1] + 1 if last_key[0] == sid else 0
        return sid, part

    # ---------------------------------------------------------------- overflow rows
    def _overflow_extras(self, line: int, row: dict, max_known: int) -> bool:
        """The overflow rows mintdim 0.2.1 does not write. True when the row is a whole
        line skipped (no token count, nothing more to check against a record)."""
        rel = fmt.OVERFLOW_INDEX
        action, count = row.get("action"), row.get("token_count")
        if "reason" in row:
            if row["reason"] not in fmt.CUT_REASONS or action != "skip" or self.dialogue is None:
                self.p.add(rel, line, f"reason {row['reason']!r} belongs to the skip rows of a "
                           f"dialogue dataset, one of {list(fmt.CUT_REASONS)}",
                           key=(rel, "reason"))
        if not _whole_line(row):
            return False
        if "line_bytes" in row and "trained_turns" in row:
            self.p.add(rel, line, "line_bytes and trained_turns exclude each other",
                       key=(rel, "whole_line"))
        if count is not None or action != "skip":
            self.p.add(rel, line, "a whole line skipped has token_count null and action skip",
                       key=(rel, "whole_line"))
        if row.get("max_unit_size") != max_known:
            self.p.add(rel, line, f"max_unit_size {row.get('max_unit_size')!r} is not the "
                       f"largest unit size known at this sample ({max_known})",
                       key=(rel, "max"))
        if "line_bytes" in row and (type(row["line_bytes"]) is not int or row["line_bytes"] < 1):
            self.p.add(rel, line, f"line_bytes {row['line_bytes']!r} is not a positive int",
                       key=(rel, "line_bytes"))
        if "trained_turns" in row:
            turns = row["trained_turns"]
            d = self.dialogue
            if d is None or d.kind != "chat" or d.on_extra_turns != "skip":
                self.p.add(rel, line, "trained_turns belongs to chat datasets with "
                           "on_extra_turns \"skip\"", key=(rel, "trained_turns"))
            elif type(turns) is not int or turns <= d.max_turns:
                self.p.add(rel, line, f"trained_turns {turns!r} is not above max_turns "
                           f"{d.max_turns} (only such dialogues are skipped)",
                           key=(rel, "trained_turns"))
        return True

    # ---------------------------------------------------------------- duplicates
    def _split_member(self, members: dict, sid: int, row: dict) -> None:
        """A split sample_id may be in several groups (one per part): the member whose
        hash is this record's is joined with it."""
        entries = members.get(sid)
        if not entries:
            return
        for i, entry in enumerate(entries):
            if entry[0] == row["hash"]:
                self._member(sid, entries.pop(i), row)
                break
        if not entries:
            del members[sid]
