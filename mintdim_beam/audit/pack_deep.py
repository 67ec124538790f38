"""`verify --deep` on a pack-build: re-tokenize a sample of the documents' source lines
and compare each with its tokens in the `.bin`, EOD included.

As for unit builds (`deep_check`): the manifest's `build_config` is rebuilt by the
build's own code (`resolve_pack`, `prepare_pack`), lines are read by its line reader,
rendered and encoded by `pack_build.tokenize` (`Renderer`, `document_ids`); each document is
found through its shard's provenance rows (start, end, id, src, loc). The sample is
evenly spaced over the documents in shard order."""
from __future__ import annotations

import csv
import gzip
import io

import numpy as np

from mintdim_beam.audit.deep_check import NO_LIMIT, rebuild_problem
from mintdim_beam.core.files import storage


class PackDeepChecks:
    """Mixin of the pack verifier. Reads: p, out, manifest, shard_entries, dtype, result.
    Sets result.deep (the documents re-tokenized, as "shard:row")."""

    def _pack_deep(self, count: int) -> None:
        self.result.deep = []
        plan = self._pack_plan()
        if plan is None:
            return
        picked = self._picked_documents(count)
        fresh = _retokenize(plan, {(row[3], int(row[4])) for _, _, row in picked}, self.p)
        for shard, number, row in picked:
            start, end, src, loc = int(row[0]), int(row[1]), row[3], int(row[4])
            name = f"{shard}:{number}"
            if (src, loc) not in fresh:
                continue  # the reader said why
            want = fresh[(src, loc)]
            if isinstance(want, str) or not want:
                self.p.add(f"{shard}.csv.gz", number, f"document {row[2]} ({src} line {loc}) "
                           f"gives no document now ({want or 'no tokens'})")
                continue
            size = self.dtype.itemsize
            data = storage.read_range(storage.join(self.out, shard + ".bin"), start * size,
                                      (end - start) * size)
            stored = np.frombuffer(data, dtype=self.dtype).astype(np.int64)
            expected = np.asarray(want + [plan.eod_id], dtype=np.int64)
            if len(stored) != len(expected):
                self.p.add(f"{shard}.bin", None, f"document {row[2]} ({src} line {loc}, "
                           f"tokens {start}-{end}): {len(stored)} tokens, its line "
                           f"re-tokenized gives {len(expected)} with the EOD")
            elif not np.array_equal(stored, expected):
                at = int(np.flatnonzero(stored != expected)[0])
                self.p.add(f"{shard}.bin", None, f"document {row[2]} ({src} line {loc}): "
                           f"token {at} is {int(stored[at])}, its line re-tokenized gives "
                           f"{int(expected[at])}")
            self.result.deep.append(name)

    def _pack_plan(self):
        from mintdim_beam.core.config.pack_config import prepare_pack, resolve_pack

        return rebuild_problem(self.manifest, self.p,
                               lambda config: prepare_pack(resolve_pack(config)))

    def _picked_documents(self, count: int) -> list:
        """[(shard name, provenance row number, row)], evenly spaced over all documents."""
        sizes = [int(entry["documents"]) for entry in self.shard_entries]
        total = sum(sizes)
        if total == 0:
            return []
        wanted = set(np.linspace(0, total - 1, min(count, total)).round().astype(int).tolist())
        picked, first = [], 0
        for entry, size in zip(self.shard_entries, sizes):
            mine = {k - first for k in wanted if first <= k < first + size}
            first += size
            if not mine:
                continue
            path = storage.join(self.out, entry["name"] + ".csv.gz")
            with storage.open_read(path) as raw, gzip.GzipFile(fileobj=raw) as handle:
                reader = csv.reader(io.TextIOWrapper(handle, encoding="utf-8", newline=""))
                for number, row in enumerate(reader):
                    if number in mine:
                        picked.append((entry["name"], number + 1, row))
        return picked


def _retokenize(plan, wanted: set, problems) -> dict:
    """{(file as given, line): the document's ids, [] or the problem} for `wanted`."""
    from mintdim_beam.core.inputs.input_files import open_range
    from mintdim_beam.core.inputs.source import RangeBatches, plan_ranges
    from mintdim_beam.core.tokenizer.tokenizers import cached_tokenizer
    from mintdim_beam.core.render.document_text import Renderer
    from mintdim_beam.pack_build.tokenize import document_ids, document_text

    config = plan.config
    tokenizer = cached_tokenizer(config.tokenizer_kind, config.tokenizer_path,
                                 config.tokenizer_options)
    out = {}
    for byte_range in plan_ranges([config], NO_LIMIT):
        given = config.files[byte_range.file_pos].given
        lines = {line - 1 for f, line in wanted if f == given}
        if not lines:
            continue
        renderer = Renderer(config.fields[byte_range.file_pos],
                            config.templates[byte_range.file_pos])
        texts, at = [], []
        with open_range(byte_range) as handle:
            for _, batch in RangeBatches(handle, byte_range, 4096, NO_LIMIT):
                for _, local_line, text, problem in batch:
                    if local_line not in lines:
                        continue
                    doc, error = document_text(renderer, byte_range.key, local_line, text,
                                               problem)
                    if error is not None:
                        problems.add(given, None, f"--deep: line {local_line + 1} no longer "
                                     f"renders ({error.cls}: {error.kwargs})")
                        continue
                    texts.append(doc)
                    at.append(local_line + 1)
        for line, ids in zip(at, document_ids(plan, tokenizer, texts) if texts else []):
            out[(given, line)] = ids
    return out

