# SPDX-License-Identifier: MIT
"""The tensor table: where each of an expert's tensors lies in its record.

``moecachectl load`` writes it beside the pool, to
``$MOECACHE_RUNDIR/<pool>.tensors.json`` (``/run/moecache`` by default), or
where ``--table`` says (docs/moecachectl.md, "The record layout and the
tensor table"). Every record of the pool (a host record or a bank slot) has
the same layout, so one table serves both.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

DEFAULT_RUNDIR = "/run/moecache"

# Bytes per element of the safetensors dtypes; GGML block types are opaque.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8,
}

# The projections of a SwiGLU expert, by the names checkpoints use for them.
PROJECTIONS = {
    "gate": ("gate_proj.weight", "w1.weight", "ffn_gate_exps.weight"),
    "up": ("up_proj.weight", "w3.weight", "ffn_up_exps.weight"),
    "down": ("down_proj.weight", "w2.weight", "ffn_down_exps.weight"),
    "gate_up": ("gate_up_proj.weight", "gate_up_proj"),
}

MAX_DIMS = 8


class TableError(ValueError):
    """A tensor table that is malformed or does not match its pool."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of an expert record: bytes [offset, offset + size)."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    offset: int
    size: int

    @property
    def itemsize(self) -> Optional[int]:
        """Bytes per element, or None for a block-quantized GGML type."""
        return DTYPE_BYTES.get(self.dtype)


def table_path(pool: str, rundir: Optional[str] = None) -> str:
    """Where ``moecachectl load`` writes the table of pool by default."""
    rundir = rundir or os.environ.get("MOECACHE_RUNDIR") or DEFAULT_RUNDIR
    return os.path.join(rundir, pool + ".tensors.json")


def _int(d: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int:
    if key not in d:
        raise TableError(f"{where}: no '{key}'")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise TableError(f"{where}: '{key}' must be an integer, not {type(v).__name__}")
    if v < minimum:
        raise TableError(f"{where}: '{key}' = {v} is below {minimum}")
    return v


def _entry(d: Any, i: int, alignment: int, source: str) -> TensorEntry:
    where = f"{source}: tensors[{i}]"
    if not isinstance(d, dict):
        raise TableError(f"{where} must be an object")
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise TableError(f"{where}: 'name' must be a non-empty string")
    where = f"{source}: tensor '{name}'"
    dtype = d.get("dtype")
    if not isinstance(dtype, str) or not dtype:
        raise TableError(f"{where}: 'dtype' must be a non-empty string")
    shape = d.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or any(
            isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in shape):
        raise TableError(f"{where}: 'shape' must be a list of at most {MAX_DIMS} "
                         "non-negative integers")
    offset = _int(d, "offset", where)
    size = _int(d, "size", where)
    if alignment and offset % alignment:
        raise TableError(f"{where}: offset {offset} is not a multiple of {alignment}")
    itemsize = DTYPE_BYTES.get(dtype)
    if itemsize is not None and math.prod(shape) * itemsize != size:
        raise TableError(f"{where}: {dtype} {shape} is {math.prod(shape) * itemsize} bytes, "
                         f"the table says {size}")
    return TensorEntry(name, dtype, tuple(shape), offset, size)


class TensorTable:
    """A pool's tensor table, checked: build it with load(), for_pool(),
    from_json() or from_dict()."""

    def __init__(self, d: Mapping[str, Any], source: str = "<table>"):
        if not isinstance(d, Mapping):
            raise TableError(f"{source}: the table must be a JSON object")
        self.source = source
        pool = d.get("pool")
        if not isinstance(pool, str) or not pool:
            raise TableError(f"{source}: 'pool' must be a non-empty string")
        self.pool: str = pool
        fmt = d.get("format", "")
        self.format: str = fmt if isinstance(fmt, str) else ""
        self.expert_bytes = _int(d, "expert_bytes", source, 1)
        self.record_bytes = _int(d, "record_bytes", source)
        self.alignment = _int(d, "alignment", source)
        self.n_layers = _int(d, "n_layers", source, 1)
        self.n_experts = _int(d, "n_experts", source, 1)
        self.expert_begin = _int(d, "expert_begin", source)
        self.expert_end = _int(d, "expert_end", source, 1)
        if not self.expert_begin < self.expert_end <= self.n_experts:
            raise TableError(f"{source}: local range [{self.expert_begin}, {self.expert_end}) "
                             f"does not fit {self.n_experts} experts")
        if self.record_bytes > self.expert_bytes:
            raise TableError(f"{source}: record_bytes {self.record_bytes} exceeds "
                             f"expert_bytes {self.expert_bytes}")
        layers = d.get("model_layers", list(range(self.n_layers)))
        if not isinstance(layers, list) or len(layers) != self.n_layers or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in layers):
            raise TableError(f"{source}: 'model_layers' must list {self.n_layers} layer numbers")
        self.model_layers: List[int] = list(layers)
        tensors = d.get("tensors")
        if not isinstance(tensors, list) or not tensors:
            raise TableError(f"{source}: 'tensors' must be a non-empty list")
        self.tensors: List[TensorEntry] = [
            _entry(t, i, self.alignment, source) for i, t in enumerate(tensors)]
        self._by_name: Dict[str, TensorEntry] = {}
        for t in self.tensors:
            if t.name in self._by_name:
                raise TableError(f"{source}: tensor '{t.name}' is listed twice")
            if t.offset + t.size > self.record_bytes:
                raise TableError(f"{source}: tensor '{t.name}' ends at byte "
                                 f"{t.offset + t.size}, past the record ({self.record_bytes})")
            self._by_name[t.name] = t
        spans = sorted(self.tensors, key=lambda t: t.offset)
        for a, b in zip(spans, spans[1:]):
            if a.offset + a.size > b.offset:
                raise TableError(f"{source}: tensor '{b.name}' overlaps tensor '{a.name}'")

    # -- construction --

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<dict>") -> "TensorTable":
        return cls(d, source)

    @classmethod
    def from_json(cls, text: str, source: str = "<json>") -> "TensorTable":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise TableError(f"{source}: not JSON: {e}") from None
        return cls(d, source)

    @classmethod
    def load(cls, path: str) -> "TensorTable":
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read(), path)

    @classmethod
    def for_pool(cls, pool: str, rundir: Optional[str] = None) -> "TensorTable":
        """The table moecachectl load wrote for pool (table_path)."""
        return cls.load(table_path(pool, rundir))

    # -- queries --

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self) -> Iterator[TensorEntry]:
        return iter(self.tensors)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> TensorEntry:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.source}: no tensor '{name}' (the table has "
                           f"{', '.join(self._by_name)})") from None

    @property
    def n_local(self) -> int:
        return self.expert_end - self.expert_begin

    def projection(self, role: str) -> Optional[TensorEntry]:
        """The weight of a SwiGLU projection ('gate', 'up', 'down' or
        'gate_up'), by the names checkpoints give it, or None."""
        for name in PROJECTIONS[role]:
            if name in self._by_name:
                return self._by_name[name]
        return None

    def w13(self) -> Optional[Tuple[int, str, Tuple[int, ...]]]:
        """(offset, dtype, shape) of the gate and up projections as one
        [2 * d_ff, ...] tensor, as fused-MoE kernels take it: a fused
        gate_up tensor, or gate and up stored back to back with one dtype
        and shape. None otherwise."""
        fused = self.projection("gate_up")
        if fused is not None:
            return fused.offset, fused.dtype, fused.shape
        gate, up = self.projection("gate"), self.projection("up")
        if gate is None or up is None or gate.dtype != up.dtype or gate.shape != up.shape:
            return None
        if not gate.shape or up.offset != gate.offset + gate.size or gate.itemsize is None:
            return None
        return gate.offset, gate.dtype, (2 * gate.shape[0],) + gate.shape[1:]

    def check_pool(self, info: Any) -> None:
        """Raises TableError unless the table describes the pool info
        (a Client's PoolInfo) describes."""
        want = {
            "pool": info.name, "n_layers": info.n_layers, "n_experts": info.n_experts,
            "expert_begin": info.expert_begin, "expert_end": info.expert_end,
            "expert_bytes": info.expert_bytes,
        }
        for key, value in want.items():
            if getattr(self, key) != value:
                raise TableError(f"{self.source}: {key} is {getattr(self, key)!r}, the pool "
                                 f"'{info.name}' has {value!r} (a table of another load?)")
