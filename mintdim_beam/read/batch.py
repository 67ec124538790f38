"""`Batch`: one step of one rank as `UnitReader` gives it, unpacked or packed; the
arrays a loop may never use (masks, positions, document ids, sample ids) made on first
use, so a loop that does not ask pays nothing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mintdim_beam.core.errors import ReaderArgumentError

if TYPE_CHECKING:
    import numpy as np

# numpy and the reader's own modules are imported on first use, not here (see reader).


@dataclass
class Batch:
    """One step of one rank. Plain reads: `input_ids`, `labels`, `attention_mask`,
    `lengths`, `sample_ids`, `unit_size`; with `pairs=True`: `chosen_*` / `rejected_*`
    (`input_ids`, `labels`, `attention_mask`, `lengths` each; then the plain ones are
    None). `step` is the global step index in the epoch.

    `lengths` and `attention_mask` come from the records' segment lengths, never from
    comparing ids with the pad id: with pad = EOS, `input_ids != pad_id` would mask out
    every real EOS a record holds.

    `ordinals` are the rows' record numbers in their unit (-1 for padding rows);
    `sample_ids` are looked up from them on first use: only `sample_index.jsonl` maps
    records to sample ids, and a training loop that never asks does not parse it.

    Packed (`pack_length` set, then `unit_size == pack_length`): `input_ids`, `labels`,
    `position_ids`, `document_ids` [rows, pack_length] (these two made on first use);
    `seq_lens`, `ordinals`, `units`, `sample_ids` [rows, records] (0 / -1 past a row's
    records); `lengths` [rows]; `cu_seqlens`, `max_seqlen` (see `read.packed`); no
    `attention_mask`."""

    unit_size: int
    step: int
    epoch: int
    ordinals: np.ndarray
    input_ids: np.ndarray | None = None
    labels: np.ndarray | None = None
    lengths: np.ndarray | None = None
    chosen_input_ids: np.ndarray | None = None
    chosen_labels: np.ndarray | None = None
    chosen_lengths: np.ndarray | None = None
    rejected_input_ids: np.ndarray | None = None
    rejected_labels: np.ndarray | None = None
    rejected_lengths: np.ndarray | None = None
    pack_length: int | None = None
    units: np.ndarray | None = None
    seq_lens: np.ndarray | None = None
    cu_seqlens: np.ndarray | None = None
    max_seqlen: int | None = None
    # "aligned": labels[t] is token t's target (Hugging Face models shift inside);
    # "shifted": labels[t] is position t's target, the next token (Megatron, torchtitan)
    label_shift: str = "aligned"
    _build: object = field(default=None, repr=False, compare=False)
    _sample_ids: np.ndarray | None = field(default=None, repr=False, compare=False)
    _masks: dict = field(default_factory=dict, repr=False, compare=False)
    # packed: each flattened segment's document id (-1 for padding), for the lazy arrays
    _segment_docs: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def position_ids(self) -> np.ndarray | None:
        """int64 [rows, pack_length], packed only: 0, 1, ... from each record's first
        token (and from each row's padding). Made on first use from `cu_seqlens`, then
        kept: a loop that does not ask (flash-attention takes `cu_seqlens`) pays nothing."""
        return self._packed_array("position_ids")

    @property
    def document_ids(self) -> np.ndarray | None:
        """int64 [rows, pack_length], packed only: the record's index in its row, -1 on
        padding. Made on first use, then kept."""
        return self._packed_array("document_ids")

    def _packed_array(self, name: str) -> np.ndarray | None:
        if self._segment_docs is None:
            return None
        if name not in self._masks:
            from mintdim_beam.read import packed

            make = packed.position_ids if name == "position_ids" else packed.document_ids
            self._masks[name] = make(self.cu_seqlens, self._segment_docs, self.input_ids.shape)
        return self._masks[name]

    @property
    def sample_ids(self) -> np.ndarray:
        """int64 [rows] (packed: [rows, records]): sample ids, -1 for padding."""
        if self._sample_ids is None:
            import numpy as np

            ids = np.full(self.ordinals.shape, -1, dtype=np.int64)
            units = self.units if self.units is not None else np.where(
                self.ordinals >= 0, self.unit_size, -1)
            for unit in np.unique(units[units >= 0]).tolist():
                mine = units == unit
                ids[mine] = self._build.sample_ids(unit)[self.ordinals[mine]]
            self._sample_ids = ids
        return self._sample_ids

    @property
    def attention_mask(self) -> np.ndarray | None:
        """int64 [rows, unit_size]: 1 on each row's first `lengths` positions."""
        return self._mask("")

    @property
    def chosen_attention_mask(self) -> np.ndarray | None:
        return self._mask("chosen_")

    @property
    def rejected_attention_mask(self) -> np.ndarray | None:
        return self._mask("rejected_")

    def _mask(self, side: str) -> np.ndarray | None:
        """Made on first use (a loop that never asks does not pay for it), then kept."""
        lengths = getattr(self, f"{side}lengths")
        if lengths is None or self.pack_length is not None:
            return None
        if side not in self._masks:
            from mintdim_beam.read import masks

            self._masks[side] = masks.attention_mask(lengths, self.unit_size)
        return self._masks[side]

    def block_causal_mask(self) -> np.ndarray:
        """bool [rows, 1, L, L] of a packed batch: each record's tokens attend causally to
        their own record only (`masks.block_causal_mask`), the 4-D form PyTorch's
        `scaled_dot_product_attention` takes (`mintdim_beam.torch.block_causal_mask`
        builds it on the tensors' device). L * L bytes a row, 4 MiB at 2048."""
        from mintdim_beam.read import masks

        if self.document_ids is None:
            raise ReaderArgumentError(
                argument="pack_length", value="None (this batch is not packed)",
                allowed="a batch of UnitReader(..., pack_length=L); an unpacked row holds one "
                        "record, and its attention_mask covers it",
                allowed_vi="một batch của UnitReader(..., pack_length=L); một dòng không đóng "
                           "gói chứa một record, attention_mask của nó đã đủ")
        return masks.block_causal_mask(self.document_ids)

    @property
    def valid(self) -> np.ndarray:
        """bool [rows], False for the padding rows of a last, partial batch."""
        real = self.ordinals >= 0
        return real.any(axis=1) if real.ndim == 2 else real
