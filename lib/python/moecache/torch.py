# SPDX-License-Identifier: MIT
"""PyTorch views of a moecache pool, and ExpertProvider: the surface of
vLLM's expert-cache providers (``prepare(topk_ids)`` -> ``expert_map``).

The bank becomes one tensor per expert tensor of the pool's tensor table,
``[n_slots, *shape]``, viewing the bank in place (zero-copy, at addresses
that never change: what CUDA graphs need). A fused-MoE kernel that takes
``w13``/``w2`` and an ``expert_map`` runs over them unchanged, with slots
where it had local expert indices.

A pool of several banks (tiers: a fast device for the hot experts, slower
ones for the warm) is viewed bank by bank: ``bank_tensors[b]`` over bank
b's own slots, and after ``prepare`` the per-bank maps ``bank_maps[b]``
(bank-local slots) and ``expert_bank`` (the bank of each expert), so that
an engine runs each expert on the device it sits on.

Only routed experts live in a pool: shared experts, attention and the
router stay the engine's own weights.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Union

import torch

from ._moecache import Client
from .table import TensorTable

_TORCH_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}


def torch_dtype(dtype: str) -> Optional[torch.dtype]:
    """The torch dtype of a table dtype, or None (kept as raw uint8 bytes:
    FP8 on torch 1.13, GGML blocks)."""
    return _TORCH_DTYPES.get(dtype)


def region_tensor(region) -> torch.Tensor:
    """A 1-D uint8 tensor over a Region (or any DLPack producer), zero-copy.
    The memory is read-only: do not write to it."""
    return torch.from_dlpack(region)


def record_views(flat: torch.Tensor, n_records: int, stride: int, table: TensorTable,
                 lead: Sequence[int] = ()) -> Dict[str, torch.Tensor]:
    """Views of every tensor of the table over n_records records of stride
    bytes in the uint8 tensor flat: name -> [*lead, *shape] where lead
    multiplies out to n_records (raw bytes [*lead, size] for dtypes torch
    lacks)."""
    lead = tuple(lead) or (n_records,)
    records = flat[: n_records * stride].view(n_records, stride)
    views = {}
    for t in table:
        raw = records[:, t.offset: t.offset + t.size]
        dt = torch_dtype(t.dtype)
        if dt is None or not t.shape:
            views[t.name] = raw.view(*lead, t.size)
        else:
            views[t.name] = raw.view(dt).view(*lead, *t.shape)
    return views


def _fused_w13(flat: torch.Tensor, n_records: int, stride: int, table: TensorTable,
               lead: Sequence[int] = ()) -> Optional[torch.Tensor]:
    w13 = table.w13()
    if w13 is None:
        return None
    offset, dtype, shape = w13
    dt = torch_dtype(dtype)
    if dt is None:
        return None
    size = torch.empty((), dtype=dt).element_size()
    for s in shape:
        size *= s
    lead = tuple(lead) or (n_records,)
    records = flat[: n_records * stride].view(n_records, stride)
    return records[:, offset: offset + size].view(dt).view(*lead, *shape)


def _unique_ids(ids) -> List[int]:
    if isinstance(ids, torch.Tensor):
        return torch.unique(ids.detach().flatten().to("cpu", torch.int64)).tolist()
    return sorted(set(int(e) for e in ids))


class ExpertProvider:
    """The routed experts of one pool as tensors over its bank.

    ExpertProvider(pool) attaches a Client (or takes client=), reads the
    pool's tensor table (table= a TensorTable or a path; by default the
    one moecachectl load wrote) and maps the bank:

    - ``tensors``: name -> ``[n_slots, *shape]`` view for every tensor of
      an expert (``gate_proj.weight``, scales, ...); ``w13`` (gate and up
      as one ``[n_slots, 2 * d_ff, d_model]``, when they lie back to back)
      and ``w2`` (down, ``[n_slots, d_model, d_ff]``);
    - ``prepare(layer, topk_ids)``: pins the layer's experts, releasing the
      previous call's pins in the same system call, and returns
      ``expert_map`` (int32 ``[num_experts]``: slot, or -1);
    - ``hint_next(layer, experts)``: a prefetch hint for a coming layer;
    - ``host_tensors``: the same views over the host pages,
      ``[n_layers, n_local, *shape]``, for computing cold experts on the
      CPU (prepare(..., wait=False) lists them in ``cold``).

    Several banks: ``n_banks`` of them, ``bank_tensors[b]`` (name ->
    ``[bank b's n_slots, *shape]``), ``bank_w13[b]`` and ``bank_w2[b]``
    view each bank on its own device; ``tensors``, ``w13`` and ``w2`` are
    bank 0's. ``prepare`` also sets ``bank_maps`` (per bank, int32
    ``[num_experts]``: the expert's slot in that bank, -1 elsewhere) and
    ``expert_bank`` (int32 ``[num_experts]``: the bank of each expert, -1
    for cold and unnamed ones); ``prepare_banks`` returns ``bank_maps``.
    The route comes from the library (Client.route). With one bank,
    ``bank_maps[0]`` is ``expert_map``.

    keep_waiting (default True): a waiting prepare outlives an agent restart
    instead of failing with EPIPE.
    """

    def __init__(self, pool: Optional[str] = None, *, client=None,
                 table: Union[TensorTable, str, None] = None, fast_pins: bool = True,
                 wait: bool = True, timeout_ms: int = 0, keep_waiting: bool = True,
                 device: Optional[str] = None):
        if client is None:
            if pool is None:
                raise TypeError("ExpertProvider needs a pool name or a client")
            client = Client(pool, fast_pins=fast_pins, device=device)
        self.client = client
        info = client.info
        self.info = info
        if table is None:
            table = TensorTable.for_pool(info.name)
        elif isinstance(table, str):
            table = TensorTable.load(table)
        table.check_pool(info)
        self.table: TensorTable = table
        self.num_experts: int = info.n_experts
        self.expert_begin: int = info.expert_begin
        self.expert_end: int = info.expert_end
        self.n_layers: int = info.n_layers
        self.wait = wait
        self.timeout_ms = timeout_ms
        self.keep_waiting = keep_waiting

        self.n_banks: int = getattr(client, "n_banks", 1)
        regions = [client.bank] if self.n_banks == 1 else list(client.banks)
        down = table.projection("down")
        self.bank_regions = regions
        self.bank_tensors: List[Dict[str, torch.Tensor]] = []
        self.bank_w13: List[Optional[torch.Tensor]] = []
        self.bank_w2: List[Optional[torch.Tensor]] = []
        self.bank_flat: List[torch.Tensor] = []
        for region in regions:
            flat = region_tensor(region)
            views = record_views(flat, region.n_slots, region.stride, table)
            self.bank_flat.append(flat)
            self.bank_tensors.append(views)
            self.bank_w13.append(_fused_w13(flat, region.n_slots, region.stride, table))
            self.bank_w2.append(views[down.name] if down else None)
        self.n_slots: int = regions[0].n_slots if self.n_banks == 1 else info.n_slots
        self.bank: torch.Tensor = self.bank_flat[0]
        self.tensors: Dict[str, torch.Tensor] = self.bank_tensors[0]
        self.w13: Optional[torch.Tensor] = self.bank_w13[0]
        self.w2: Optional[torch.Tensor] = self.bank_w2[0]
        self.bank_maps: List[torch.Tensor] = []
        self.expert_bank: Optional[torch.Tensor] = None

        self._host_tensors: Optional[Dict[str, torch.Tensor]] = None
        self._pinned: List[int] = []
        self.cold: List[int] = []
        self.layer: Optional[int] = None

    # -- the hot path --

    def _local(self, ids) -> List[int]:
        experts = _unique_ids(ids)
        for e in experts:
            if not 0 <= e < self.num_experts:
                raise ValueError(f"expert id {e} is out of range: the model has "
                                 f"{self.num_experts} experts")
        return [e for e in experts if self.expert_begin <= e < self.expert_end]

    def prepare(self, layer: int, topk_ids, *, wait: Optional[bool] = None,
                timeout_ms: Optional[int] = None) -> torch.Tensor:
        """Pins the experts topk_ids names for layer (any shape, e.g. the
        router's [tokens, k]) and returns expert_map: int32 [num_experts],
        the slot of each of them, -1 for every other expert.

        The previous call's pins are dropped in the same system call, so a
        decode step holds one layer's pins at a time; experts named in this
        call are never evicted while pinned. wait=True (the default given
        at construction) returns once every local expert is in the bank;
        wait=False returns at once: the cold experts (not resident; queued
        for the agent) are -1 in expert_map and listed in self.cold, to be
        computed from host_tensors. Experts outside a --range pool's local
        range are -1 and never asked for."""
        wait = self.wait if wait is None else wait
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer {layer} is out of range: the pool has {self.n_layers} layers")
        local = self._local(topk_ids)
        release, self._pinned = self._pinned, []
        self.cold = []
        slots = self.client.acquire_release(release, layer, local, wait=wait,
                                            timeout_ms=timeout_ms,
                                            keep_waiting=self.keep_waiting and wait)
        self._pinned = [s for s in slots if s >= 0]
        self.layer = layer
        expert_map = torch.full((self.num_experts,), -1, dtype=torch.int32)
        if local:
            expert_map[torch.tensor(local, dtype=torch.int64)] = torch.tensor(
                slots, dtype=torch.int32)
        self.cold = [e for e, s in zip(local, slots) if s < 0]
        self._route(local, slots, expert_map)
        return expert_map

    def _route(self, local: List[int], slots: List[int], expert_map: torch.Tensor) -> None:
        """bank_maps and expert_bank of the experts just pinned."""
        self.expert_bank = torch.full((self.num_experts,), -1, dtype=torch.int32)
        if self.n_banks == 1:
            self.bank_maps = [expert_map]
            resident = [e for e, s in zip(local, slots) if s >= 0]
            if resident:
                self.expert_bank[torch.tensor(resident, dtype=torch.int64)] = 0
            return
        self.bank_maps = [torch.full((self.num_experts,), -1, dtype=torch.int32)
                          for _ in range(self.n_banks)]
        banks, _ = self.client.route(local, slots)
        for b, entries in enumerate(banks):
            if not entries:
                continue
            ids = torch.tensor([e[1] for e in entries], dtype=torch.int64)
            self.bank_maps[b][ids] = torch.tensor([e[3] for e in entries], dtype=torch.int32)
            self.expert_bank[ids] = b

    def prepare_banks(self, layer: int, topk_ids, *, wait: Optional[bool] = None,
                      timeout_ms: Optional[int] = None) -> List[torch.Tensor]:
        """prepare(), returning the per-bank maps: for each bank b an int32
        [num_experts] of the experts' slots in bank b (indices into
        bank_tensors[b]), -1 for the experts elsewhere. Cold ones are in
        self.cold, as with prepare."""
        self.prepare(layer, topk_ids, wait=wait, timeout_ms=timeout_ms)
        return self.bank_maps

    def hint_next(self, layer: int, experts) -> int:
        """Asks the agent to load experts of a coming layer (the engine's own
        guess, e.g. a pre-gating router on the current hidden state).
        Returns how many requests were queued."""
        local = self._local(experts)
        return self.client.prefetch(layer, local) if local else 0

    def release(self) -> None:
        """Drops the pins of the last prepare (the end of a step)."""
        release, self._pinned = self._pinned, []
        if release:
            self.client.release(release)

    # -- weights --

    def slot_tensors(self, slot: int) -> Dict[str, torch.Tensor]:
        """Every tensor of the expert in slot (of bank 0, or of a one-bank
        pool): name -> view of its shape."""
        return {name: t[slot] for name, t in self.tensors.items()}

    def expert_tensors(self, expert: int) -> Optional[Dict[str, torch.Tensor]]:
        """Every tensor of an expert pinned by the last prepare, on the bank
        it sits in (name -> view), or None if it is cold or was not named."""
        if self.expert_bank is None:
            return None
        b = int(self.expert_bank[expert])
        if b < 0:
            return None
        local = int(self.bank_maps[b][expert])
        return {name: t[local] for name, t in self.bank_tensors[b].items()}

    @property
    def host_tensors(self) -> Dict[str, torch.Tensor]:
        """name -> [n_layers, n_local, *shape] views of the host pages."""
        if self._host_tensors is None:
            host = self.client.host
            info = self.info
            n = info.n_layers * info.n_local
            self._host_tensors = record_views(region_tensor(host), n, host.stride, self.table,
                                              (info.n_layers, info.n_local))
        return self._host_tensors

    def host_expert(self, layer: int, expert: int) -> Dict[str, torch.Tensor]:
        """Every tensor of (layer, global expert) in the host pages."""
        if not self.expert_begin <= expert < self.expert_end:
            raise ValueError(f"expert {expert} is outside the pool's range "
                             f"[{self.expert_begin}, {self.expert_end})")
        i = expert - self.expert_begin
        return {name: t[layer, i] for name, t in self.host_tensors.items()}

    # -- lifetime --

    def close(self) -> None:
        """Drops the pins and closes the client (the views stay readable
        until they are gone)."""
        self._pinned = []
        self.client.close()

    def __enter__(self) -> "ExpertProvider":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
