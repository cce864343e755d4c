# SPDX-License-Identifier: MIT
"""tools/gpu-check's Python step, on a machine with an NVIDIA GPU and a pool
served by moecached --backend cuda: Client.bank is a kDLCUDA DLPack
producer on the bank's device, and with a CUDA build of PyTorch,
torch.from_dlpack(bank) reads every pinned slot's bytes equal to the host
record of the expert in it.

usage: PYTHONPATH=build/python python3 lib/python/tests/gpu_dlpack.py POOL
Exit 0: checked; 77: no CUDA PyTorch here (only the capsule was checked);
1: a mismatch."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import moecache  # noqa: E402
from vm_gpu import KDLCUDA, dl_tensor  # noqa: E402


def main() -> int:
    pool = sys.argv[1]
    with moecache.Client(pool, fast_pins=False) as c:
        info, bank = c.info, c.bank
        if bank.backend != "cuda" or bank.__dlpack_device__() != (KDLCUDA, bank.device):
            print(f"gpu-dlpack: FAILED: bank {bank!r}, device {bank.__dlpack_device__()}")
            return 1
        capsule = bank.__dlpack__()
        t = dl_tensor(capsule)
        if t.data != bank.slot_address(0) or t.shape[0] != bank.nbytes:
            print("gpu-dlpack: FAILED: the capsule does not describe the bank")
            return 1
        del capsule
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available():
            print("gpu-dlpack: capsule checked; no CUDA PyTorch here to read the slots")
            return 77
        dev = torch.from_dlpack(bank)
        print(f"gpu-dlpack: torch.from_dlpack -> {dev.device} {tuple(dev.shape)} {dev.dtype}")
        host = np.frombuffer(c.host, np.uint8)
        experts = list(range(info.expert_begin, min(info.expert_end,
                                                    info.expert_begin + min(8, info.n_slots))))
        slots = c.acquire(0, experts)
        eb = info.expert_bytes
        for e, s in zip(experts, slots):
            got = dev[s * bank.stride: s * bank.stride + eb].cpu().numpy()
            i = (e - info.expert_begin) * eb
            if not np.array_equal(got, host[i: i + eb]):
                print(f"gpu-dlpack: FAILED: slot {s} differs from the host record of expert {e}")
                return 1
        c.release(slots)
        print(f"gpu-dlpack: {len(slots)} slots read through DLPack equal their host records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
