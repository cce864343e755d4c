# SPDX-License-Identifier: MIT
"""Client.bank of a device bank exported through DLPack, one table row per
GPU backend, against the fake drivers of the unit tests, whose device
memory is host memory mapped at the device address, so the bytes behind
the capsule can be read back here:

  cuda  tests/unit/gpu/fake_cuda.c (MOECACHE_LIBCUDA): the VMM allocation
        is a memfd, the device a CUDA ordinal;
  rocm  tests/unit/gpu/fake_rocm.c (MOECACHE_LIBHSAKMT and
        MOECACHE_LIBDRM_AMDGPU): the VRAM BO is a vgem dma-buf
        (FAKE_ROCM_VGEM, the agent's side) imported and mapped by
        libmoecache's amdgpu path (a render node and sysfs tree under
        MOECACHE_DRI_DIR and MOECACHE_SYSFS_ROOT).

Run in the VM by moecache-python-vmtest once per row: PYTEST_GPU_BACKEND
names the row, PYTEST_GPU_POOL the pool (2 layers x 8 experts of 4096
bytes, 4 slots, moecachectl load --synthetic) served by
moecached --backend PYTEST_GPU_BACKEND, PYTEST_GPU_DEVICE the device id
the agent reports for the bank (moecachectl pool info)."""
import ctypes
import os
import struct
import unittest

import moecache

KDLCUDA = 2
KDLROCM = 10
# backend: DLPack device type of its banks.
BACKENDS = {"cuda": KDLCUDA, "rocm": KDLROCM}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dl_tensor(capsule) -> DLTensor:
    """The DLTensor at the head of the capsule's DLManagedTensor."""
    return DLTensor.from_address(_get_pointer(capsule, b"dltensor"))


def synthetic_word(layer, expert, i):
    return (layer & 0xffff) << 48 | (expert & 0xffff) << 32 | (i & 0xffffffff)


class GpuBankTests(unittest.TestCase):
    """The row of BACKENDS named by PYTEST_GPU_BACKEND."""

    def setUp(self):
        self.backend = os.environ["PYTEST_GPU_BACKEND"]
        self.kdl = BACKENDS[self.backend]
        self.pool = os.environ["PYTEST_GPU_POOL"]
        self.device = int(os.environ["PYTEST_GPU_DEVICE"])
        self.c = moecache.Client(self.pool)

    def tearDown(self):
        self.c.close()

    def test_basic_device(self):
        """the bank is a region of the backend's DLPack device type on the agent's device, a device address per slot"""
        bank = self.c.bank
        self.assertEqual(bank.backend, self.backend)
        self.assertEqual(bank.device, self.device)
        self.assertEqual(bank.__dlpack_device__(), (self.kdl, self.device))
        self.assertEqual(bank.n_slots, self.c.info.n_slots)
        self.assertGreaterEqual(bank.stride, self.c.info.expert_bytes)
        self.assertNotEqual(bank.slot_address(0), 0)
        self.assertEqual(bank.slot_address(1) - bank.slot_address(0), bank.stride)

    def test_bad_input_no_host_buffer(self):
        """device memory is not a host buffer: memoryview is refused and points at DLPack"""
        with self.assertRaisesRegex(BufferError, "dlpack"):
            memoryview(self.c.bank)

    def test_basic_dlpack_capsule(self):
        """the capsule is uint8 [nbytes], no strides, at slot 0's device address on the device, and holds the experts"""
        bank = self.c.bank
        capsule = bank.__dlpack__()
        t = dl_tensor(capsule)
        self.assertEqual(t.data, bank.slot_address(0))
        self.assertEqual((t.device.device_type, t.device.device_id), (self.kdl, self.device))
        self.assertEqual(t.ndim, 1)
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (1, 8, 1))
        self.assertEqual(t.shape[0], bank.nbytes)
        self.assertGreaterEqual(bank.nbytes, bank.n_slots * bank.stride)
        self.assertFalse(bool(t.strides))
        self.assertEqual(t.byte_offset, 0)
        slots = self.c.acquire(1, [3, 6])
        for e, s in zip((3, 6), slots):
            words = struct.unpack("<4Q", ctypes.string_at(t.data + s * bank.stride, 32))
            self.assertEqual(words, tuple(synthetic_word(1, e, i) for i in range(4)))
        self.c.release(slots)
        del capsule

    def test_lifetime_capsule_outlives_close(self):
        """a capsule keeps the import mapped after close; dropping it releases the client"""
        c = moecache.Client(self.pool, fast_pins=False)
        bank = c.bank
        slot = c.acquire(0, [5])[0]
        capsule = bank.__dlpack__()
        addr = dl_tensor(capsule).data + slot * bank.stride
        c.close()
        self.assertTrue(c.closed)
        self.assertEqual(struct.unpack("<Q", ctypes.string_at(addr, 8))[0],
                         synthetic_word(0, 5, 0))
        del capsule, bank
        with self.assertRaises(ValueError):
            c.bank


# One name per row: "basic_rocm_dlpack_capsule", with the backend in the
# description, so that both rows' lines are told apart in the suite's output.
_backend = os.environ.get("PYTEST_GPU_BACKEND")
if _backend in BACKENDS:
    for _name in [n for n in vars(GpuBankTests) if n.startswith("test_")]:
        _fn = getattr(GpuBankTests, _name)
        _category = next(c for c in ("bad_input", "basic", "lifetime", "leak", "permission",
                                     "concurrency", "perf") if _name.startswith(f"test_{c}_"))
        _rest = _name[len(f"test_{_category}_"):]
        # A function of its own: the docstring is per row.
        _row = (lambda f: lambda self: f(self))(_fn)
        _row.__doc__ = f"{_backend}: {_fn.__doc__}"
        setattr(GpuBankTests, f"test_{_category}_{_backend}_{_rest}", _row)
        delattr(GpuBankTests, _name)


if __name__ == "__main__":
    unittest.main()
