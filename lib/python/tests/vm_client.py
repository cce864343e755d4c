# SPDX-License-Identifier: MIT
"""moecache.Client against the driver (run in the VM by
moecache-python-vmtest, through run.py vm_client.py). Pools, made by the
caller: $PYTEST_POOL (2 layers x 8 experts of 4096 bytes, 4 slots, loaded
with moecachectl load --synthetic, served by moecached), $PYTEST_PRIV
(mode 0600, owned by root) and $PYTEST_RANGE (as $PYTEST_POOL with
--range 4:8, loaded, no agent)."""
import errno
import os
import stat
import struct
import threading
import time
import unittest

import numpy as np

import moecache

POOL = os.environ.get("PYTEST_POOL", "py-api")
PRIV = os.environ.get("PYTEST_PRIV", "py-priv")
RANGE = os.environ.get("PYTEST_RANGE", "py-range")
LAYERS, EXPERTS, SLOTS, EXPERT_BYTES = 2, 8, 4, 4096


def synthetic_word(layer, expert, i):
    return (layer & 0xffff) << 48 | (expert & 0xffff) << 32 | (i & 0xffffffff)


def in_child(body) -> int:
    """Runs body() in a forked child; its exit code (0 when body returns
    True, 1 when False, 2 on an exception)."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if body() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def record_words(buf, index, stride, n=4):
    return struct.unpack_from(f"<{n}Q", buf, index * stride)


class RangePoolTests(unittest.TestCase):
    def test_basic_range_pool(self):
        """a --range 4:8 pool reports its local range, refuses other ids and indexes host records locally"""
        with moecache.Client(RANGE) as c:
            i = c.info
            self.assertEqual((i.n_experts, i.expert_begin, i.expert_end, i.n_local), (8, 4, 8, 4))
            with self.assertRaises(OSError) as cm:
                c.lookup(0, [2])
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            self.assertIn("outside the pool's experts [4, 8)", str(cm.exception))
            self.assertEqual(c.lookup(1, [5]), [-1])
            host = c.host
            self.assertEqual(host.n_slots, 2 * 4)
            rec = 1 * 4 + (6 - 4)
            self.assertEqual(record_words(memoryview(host), rec, host.stride),
                             tuple(synthetic_word(1, 6, k) for k in range(4)))


class DriverTests(unittest.TestCase):
    def setUp(self):
        self.c = moecache.Client(POOL)

    def tearDown(self):
        self.c.close()

    def test_basic_info(self):
        """info reports the pool's geometry as created"""
        i = self.c.info
        self.assertEqual((i.name, i.n_layers, i.n_experts, i.n_slots, i.expert_bytes),
                         (POOL, LAYERS, EXPERTS, SLOTS, EXPERT_BYTES))
        self.assertEqual((i.expert_begin, i.expert_end, i.n_local), (0, EXPERTS, EXPERTS))
        self.assertEqual(moecache.driver_info()["max_batch"], i.max_batch)
        self.assertTrue(self.c.fast_pins)

    def test_basic_acquire_lookup_bank(self):
        """a waiting acquire pins slots that lookup agrees with and that hold the experts"""
        slots = self.c.acquire(1, [2, 5])
        self.assertTrue(all(0 <= s < SLOTS for s in slots))
        self.assertEqual(self.c.lookup(1, [2, 5]), slots)
        bank = memoryview(self.c.bank)
        for e, s in zip((2, 5), slots):
            self.assertEqual(record_words(bank, s, self.c.bank.stride),
                             tuple(synthetic_word(1, e, i) for i in range(4)))
        self.c.release(slots)

    def test_basic_acquire_release_one_call(self):
        """acquire_release drops the previous pins and pins the next layer"""
        other = moecache.Client(POOL, fast_pins=False)
        try:
            prev = other.acquire(0, [1])
            self.assertEqual(other.stats()["pins"], 1)
            now = other.acquire_release(prev, 1, [3])
            self.assertEqual(other.stats()["pins"], 1)
            self.assertEqual(other.lookup(1, [3]), now)
            other.release(now + [-1])
            self.assertEqual(other.stats()["pins"], 0)
        finally:
            other.close()

    def test_basic_release_all(self):
        """release_all drops every pin the client holds"""
        other = moecache.Client(POOL, fast_pins=False)
        try:
            other.acquire(0, [1, 2])
            other.acquire(1, [3])
            self.assertEqual(other.stats()["pins"], 3)
            other.release_all()
            self.assertEqual(other.stats()["pins"], 0)
        finally:
            other.close()

    def test_basic_report_flush(self):
        """report_flush hands the driver the fast-pin hits it had not been told of"""
        c = self.c
        self.assertTrue(c.fast_pins)
        # resident first (the misses go through the driver), then a clean report
        c.release(c.acquire(0, [1]))
        c.release(c.acquire(1, [2]))
        c.report_flush()
        other = moecache.Client(POOL, fast_pins=False)
        try:
            before = other.stats()["hits"]
            # two hits of two layers: pinned in the mapped region, no system call
            c.release(c.acquire(0, [1]))
            c.release(c.acquire(1, [2]))
            self.assertEqual(other.stats()["hits"], before, "reported before report_flush")
            c.report_flush()
            self.assertEqual(other.stats()["hits"], before + 2)
        finally:
            other.close()

    def test_basic_fileno(self):
        """fileno is the client's open /dev/moecache file"""
        st = os.fstat(self.c.fileno())
        dev = os.stat("/dev/moecache")
        self.assertTrue(stat.S_ISCHR(st.st_mode))
        self.assertEqual(st.st_rdev, dev.st_rdev)

    def test_basic_no_wait_cold_from_host(self):
        """without wait a cold expert is -1, queued, and readable in the host pages"""
        cold = None
        for layer in range(LAYERS):
            for e in range(EXPERTS):
                if self.c.lookup(layer, [e]) == [-1]:
                    cold = (layer, e)
                    break
            if cold:
                break
        self.assertIsNotNone(cold, "every expert is resident in a bank of 4 slots")
        layer, e = cold
        got = self.c.acquire(layer, [e], wait=False)
        self.assertIn(got, ([-1], self.c.lookup(layer, [e])))
        self.c.release(got)
        host = self.c.host
        self.assertEqual(host.n_slots, LAYERS * EXPERTS)
        self.assertEqual(record_words(memoryview(host), layer * EXPERTS + e, host.stride),
                         tuple(synthetic_word(layer, e, i) for i in range(4)))
        words = np.frombuffer(host, dtype=np.uint64).reshape(LAYERS, EXPERTS, -1)
        self.assertEqual(int(words[layer, e, 7]), synthetic_word(layer, e, 7))

    def test_basic_prefetch_and_stats(self):
        """prefetch queues a hint and stats counts hits, misses and prefetches"""
        before = self.c.stats()
        self.c.prefetch(0, [0, 1, 2, 3])
        time.sleep(0.2)
        after = self.c.stats()
        self.assertGreaterEqual(after["prefetches"] + after["resident"], before["prefetches"])
        self.assertEqual(len(after["wait_hist"]), 16)
        self.assertIn("layer", self.c.stats(layer=1))
        self.assertGreater(after["agent_pid"], 0)

    def test_bad_input_driver_errnos(self):
        """wrong layers, experts, repeats, sizes and slots fail with the driver's errno and say why"""
        cases = [
            (lambda: self.c.acquire(LAYERS, [0]), errno.EINVAL, "layer 2 is out of range"),
            (lambda: self.c.lookup(0, [EXPERTS]), errno.EINVAL, "expert 8 is outside"),
            (lambda: self.c.acquire(0, [1, 1], wait=False), errno.EINVAL, "listed twice"),
            (lambda: self.c.prefetch(0, list(range(EXPERTS)) * (self.c.info.max_batch // EXPERTS + 1)),
             errno.E2BIG, "at most"),
            (lambda: self.c.release([SLOTS]), errno.EINVAL, "slot 4 is out of range"),
            (lambda: self.c.acquire_release([99], 0, [1]), errno.EINVAL, "slot 99"),
            (lambda: self.c.stats(layer=5), errno.EINVAL, "layer 5"),
        ]
        for call, err, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(OSError) as cm:
                    call()
                self.assertEqual(cm.exception.errno, err)
                self.assertIn(text, str(cm.exception))
                self.assertIn(POOL, str(cm.exception))
        self.assertEqual(self.c.stats()["pins"], 0)

    def test_bad_input_python_types(self):
        """ids that are not non-negative ints, and contradictory flags, are refused before any call"""
        with self.assertRaises(ValueError):
            self.c.acquire(0, [-2])
        with self.assertRaises(TypeError):
            self.c.acquire(0, ["1"])
        with self.assertRaises(TypeError):
            self.c.acquire(0, 3)
        with self.assertRaises(TypeError):
            self.c.lookup(0, np.zeros((2, 2), np.int32))
        with self.assertRaises(ValueError):
            self.c.acquire(0, [1], wait=False, keep_waiting=True)
        with self.assertRaises(ValueError):
            self.c.acquire(0, [1], wait=True, queue=False)
        self.assertEqual(self.c.lookup(0, np.array([1, 2], np.int64)), self.c.lookup(0, [1, 2]))
        self.assertEqual(self.c.acquire(0, []), [])

    def test_bad_input_buffers_read_only(self):
        """the bank and host buffers are read-only for numpy and memoryview"""
        for region in (self.c.bank, self.c.host):
            m = memoryview(region)
            self.assertTrue(m.readonly)
            with self.assertRaises(TypeError):
                m[0] = 1
            a = np.frombuffer(region, np.uint8)
            self.assertFalse(a.flags.writeable)
            with self.assertRaises(ValueError):
                a[0] = 1
            m.release()

    def test_basic_dlpack_cpu(self):
        """the CPU bank exports DLPack on the CPU device, the same bytes as the buffer"""
        bank = self.c.bank
        self.assertEqual(bank.__dlpack_device__(), (1, 0))
        self.assertEqual(bank.backend, "cpu")
        a = np.from_dlpack(bank)
        self.assertEqual(a.dtype, np.uint8)
        self.assertEqual(a.size, bank.nbytes)
        self.assertEqual(a.ctypes.data, bank.slot_address(0))
        self.assertTrue(np.array_equal(a, np.frombuffer(bank, np.uint8)))

    def test_lifetime_close_keeps_views(self):
        """close drops the pins at once; live views stay readable; calls then raise ValueError"""
        c = moecache.Client(POOL, fast_pins=False)
        slots = c.acquire(0, [4])
        view = memoryview(c.bank)
        stride = c.bank.stride
        c.close()
        self.assertTrue(c.closed)
        self.assertEqual(self.c.stats()["pins"], 0)
        self.assertEqual(record_words(view, slots[0], stride)[0] >> 32, (0 << 16) | 4)
        with self.assertRaises(ValueError):
            c.lookup(0, [1])
        c.close()
        view.release()

    def test_lifetime_context_manager(self):
        """a with block closes the client and drops its pins"""
        with moecache.Client(POOL, fast_pins=False) as c:
            c.acquire(1, [0, 7])
            self.assertGreaterEqual(self.c.stats()["pins"], 2)
        self.assertTrue(c.closed)
        self.assertEqual(self.c.stats()["pins"], 0)

    def test_lifetime_no_use_after_fork(self):
        """a client used in a forked child raises, and closing it there leaves the parent's pins"""
        c = moecache.Client(POOL, fast_pins=False)
        slots = c.acquire(0, [2])
        view = memoryview(c.bank)

        def child():
            try:
                c.lookup(0, [1])
            except RuntimeError:
                pass
            else:
                return False
            # Closing the child's copy must not act on the parent's file.
            c.close()
            return True

        try:
            self.assertEqual(in_child(child), 0)
            self.assertEqual(self.c.stats()["pins"], 1)
            self.assertEqual(c.lookup(0, [2]), slots)
        finally:
            view.release()
            c.close()

    def test_concurrency_wait_releases_gil(self):
        """a waiting acquire lets other threads run, and close is refused (EBUSY) meanwhile"""
        c = moecache.Client(POOL, fast_pins=False)
        other = moecache.Client(POOL, fast_pins=False)
        held = [other.acquire(0, list(range(4)))]  # four pins: the bank is full
        done = []

        def waiter():
            done.append(c.acquire(1, [6], wait=True, timeout_ms=3000))

        try:
            t = threading.Thread(target=waiter)
            t.start()
            time.sleep(0.3)
            self.assertTrue(t.is_alive())
            with self.assertRaises(OSError) as cm:
                c.close()
            self.assertEqual(cm.exception.errno, errno.EBUSY)
            other.release(held.pop())
            t.join(10)
            self.assertFalse(t.is_alive())
            self.assertEqual(len(done), 1)
        finally:
            for s in held:
                other.release(s)
            other.close()
            c.close()

    def test_permission_no_read(self):
        """a user with no right on a pool gets FileNotFoundError (ENOENT), as for no pool"""
        def child():
            os.setgid(65534)
            os.setuid(65534)
            try:
                moecache.Client(PRIV)
            except FileNotFoundError as e:
                return e.errno == errno.ENOENT and PRIV in str(e)
            return False

        self.assertEqual(in_child(child), 0)

    def test_bad_input_no_such_pool(self):
        """attaching to a pool that does not exist is FileNotFoundError naming it"""
        with self.assertRaises(FileNotFoundError) as cm:
            moecache.Client("no-such-pool")
        self.assertIn("no-such-pool", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
