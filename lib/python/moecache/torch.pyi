# SPDX-License-Identifier: MIT
from typing import Dict, List, Optional, Sequence, Union

import torch as _torch

from ._moecache import Client, Region
from .table import TensorTable

def torch_dtype(dtype: str) -> Optional[_torch.dtype]: ...
def region_tensor(region: Region) -> _torch.Tensor: ...
def record_views(flat: _torch.Tensor, n_records: int, stride: int, table: TensorTable,
                 lead: Sequence[int] = ...) -> Dict[str, _torch.Tensor]: ...

class ExpertProvider:
    client: Client
    table: TensorTable
    num_experts: int
    expert_begin: int
    expert_end: int
    n_layers: int
    n_slots: int
    bank: _torch.Tensor
    tensors: Dict[str, _torch.Tensor]
    w13: Optional[_torch.Tensor]
    w2: Optional[_torch.Tensor]
    cold: List[int]
    layer: Optional[int]
    n_banks: int
    bank_regions: List[Region]
    bank_flat: List[_torch.Tensor]
    bank_tensors: List[Dict[str, _torch.Tensor]]
    bank_w13: List[Optional[_torch.Tensor]]
    bank_w2: List[Optional[_torch.Tensor]]
    bank_maps: List[_torch.Tensor]
    expert_bank: Optional[_torch.Tensor]
    def __init__(self, pool: Optional[str] = ..., *, client: Optional[Client] = ...,
                 table: Union[TensorTable, str, None] = ..., fast_pins: bool = ...,
                 wait: bool = ..., timeout_ms: int = ..., keep_waiting: bool = ...,
                 device: Optional[str] = ...) -> None: ...
    def prepare(self, layer: int, topk_ids: object, *, wait: Optional[bool] = ...,
                timeout_ms: Optional[int] = ...) -> _torch.Tensor: ...
    def prepare_banks(self, layer: int, topk_ids: object, *, wait: Optional[bool] = ...,
                      timeout_ms: Optional[int] = ...) -> List[_torch.Tensor]: ...
    def hint_next(self, layer: int, experts: object) -> int: ...
    def release(self) -> None: ...
    def slot_tensors(self, slot: int) -> Dict[str, _torch.Tensor]: ...
    def expert_tensors(self, expert: int) -> Optional[Dict[str, _torch.Tensor]]: ...
    @property
    def host_tensors(self) -> Dict[str, _torch.Tensor]: ...
    def host_expert(self, layer: int, expert: int) -> Dict[str, _torch.Tensor]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "ExpertProvider": ...
    def __exit__(self, *exc: object) -> None: ...
