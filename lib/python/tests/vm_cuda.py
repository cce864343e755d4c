# SPDX-License-Identifier: MIT
"""Client.bank of a CUDA bank, against the fake CUDA driver of the unit
tests (tests/unit/gpu/fake_cuda.c, named by MOECACHE_LIBCUDA): its device
memory is host memory mapped at the device address, so the bytes behind
the DLPack capsule can be read back here. Run in the VM by
moecache-python-vmtest: pool $PYTEST_CUDA_POOL (2 layers x 8 experts of
4096 bytes, 4 slots, moecachectl load --synthetic) served by
moecached --backend cuda."""
import ctypes
import os
import struct
import unittest

import moecache

POOL = os.environ.get("PYTEST_CUDA_POOL", "py-cuda")
KDLCUDA = 2


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


class CudaBankTests(unittest.TestCase):
    def setUp(self):
        self.c = moecache.Client(POOL)

    def tearDown(self):
        self.c.close()

    def test_basic_cuda_device(self):
        """a CUDA bank is a kDLCUDA region on the agent's device, with a device address per slot"""
        bank = self.c.bank
        self.assertEqual(bank.backend, "cuda")
        self.assertEqual(bank.__dlpack_device__(), (KDLCUDA, bank.device))
        self.assertEqual(bank.n_slots, self.c.info.n_slots)
        self.assertGreaterEqual(bank.stride, self.c.info.expert_bytes)
        self.assertNotEqual(bank.slot_address(0), 0)
        self.assertEqual(bank.slot_address(1) - bank.slot_address(0), bank.stride)

    def test_bad_input_no_host_buffer(self):
        """device memory is not a host buffer: memoryview is refused and points at DLPack"""
        with self.assertRaisesRegex(BufferError, "dlpack"):
            memoryview(self.c.bank)

    def test_basic_dlpack_capsule(self):
        """the capsule is uint8 [nbytes] at slot 0's device address, and holds the experts"""
        bank = self.c.bank
        capsule = bank.__dlpack__()
        t = dl_tensor(capsule)
        self.assertEqual(t.data, bank.slot_address(0))
        self.assertEqual((t.device.device_type, t.device.device_id), (KDLCUDA, bank.device))
        self.assertEqual(t.ndim, 1)
        self.assertEqual((t.dtype.code, t.dtype.bits, t.dtype.lanes), (1, 8, 1))
        self.assertEqual(t.shape[0], bank.nbytes)
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
        c = moecache.Client(POOL, fast_pins=False)
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


if __name__ == "__main__":
    unittest.main()
