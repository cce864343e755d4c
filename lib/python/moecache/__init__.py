# SPDX-License-Identifier: MIT
"""moecache: attach Python processes to a machine-wide MoE expert cache.

``Client`` attaches to a pool served by ``/dev/moecache`` and its agent
(moecached): look experts up without a system call, pin them, read the bank
and the host pages zero-copy. ``moecache.table`` reads the tensor table that
``moecachectl load`` writes; ``moecache.torch`` (imported on its own, it
needs PyTorch) turns the bank into per-expert tensors and offers
``ExpertProvider``, the surface of vLLM's expert-cache providers.
"""
from ._moecache import (
    ABI_VERSION,
    DEFAULT_DEVICE,
    NONE,
    Client,
    PoolInfo,
    Region,
    driver_info,
)
from .table import TableError, TensorEntry, TensorTable, table_path

__all__ = [
    "ABI_VERSION",
    "DEFAULT_DEVICE",
    "NONE",
    "Client",
    "PoolInfo",
    "Region",
    "TableError",
    "TensorEntry",
    "TensorTable",
    "driver_info",
    "table_path",
]
