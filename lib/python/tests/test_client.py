# SPDX-License-Identifier: MIT
"""moecache.Client's checks that need no driver: the arguments, and the
errors of a missing or wrong device."""
import errno
import os
import tempfile
import unittest

import moecache


class ClientTests(unittest.TestCase):
    def test_bad_input_missing_device(self):
        """no device node: FileNotFoundError (ENOENT) that says the module may not be loaded"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "moecache")
            with self.assertRaises(FileNotFoundError) as cm:
                moecache.Client("pool", device=path)
            self.assertEqual(cm.exception.errno, errno.ENOENT)
            self.assertIn(path, str(cm.exception))
            self.assertIn("module loaded", str(cm.exception))

    def test_bad_input_not_the_device(self):
        """a device that is not /dev/moecache fails with the ioctl's ENOTTY"""
        with self.assertRaises(OSError) as cm:
            moecache.Client("pool", device="/dev/null")
        self.assertEqual(cm.exception.errno, errno.ENOTTY)
        with self.assertRaises(OSError) as cm:
            moecache.driver_info(device="/dev/null")
        self.assertEqual(cm.exception.errno, errno.ENOTTY)

    def test_bad_input_pool_name_length(self):
        """an empty or over-long pool name is EINVAL before any system call"""
        for name in ("", "p" * 64):
            with self.subTest(length=len(name)):
                with self.assertRaises(OSError) as cm:
                    moecache.Client(name, device="/nonexistent/moecache")
                self.assertEqual(cm.exception.errno, errno.EINVAL)
                self.assertIn("1 to 63 characters", str(cm.exception))

    def test_bad_input_argument_types(self):
        """a pool name that is not a string is a TypeError"""
        for bad in (None, 3, b"pool"):
            with self.subTest(bad=bad):
                with self.assertRaises(TypeError):
                    moecache.Client(bad)
        with self.assertRaises(TypeError):
            moecache.Client("pool", device=5)

    def test_basic_module_surface(self):
        """the package exports the documented names, with docstrings"""
        for name in ("Client", "Region", "PoolInfo", "TensorTable", "driver_info", "NONE"):
            self.assertTrue(hasattr(moecache, name), name)
        self.assertEqual(moecache.NONE, -1)
        self.assertEqual(moecache.DEFAULT_DEVICE, "/dev/moecache")
        for method in ("lookup", "acquire", "acquire_release", "release", "prefetch", "stats",
                       "close"):
            self.assertTrue(getattr(moecache.Client, method).__doc__, method)
        for field in ("name", "n_layers", "n_experts", "expert_begin", "expert_end", "n_local",
                      "n_slots", "expert_bytes", "flags", "max_batch"):
            self.assertTrue(hasattr(moecache.PoolInfo, field), field)

    def test_basic_stubs_installed(self):
        """the type stubs and py.typed sit beside the package"""
        pkg = os.path.dirname(moecache.__file__)
        for f in ("_moecache.pyi", "torch.pyi", "py.typed"):
            self.assertTrue(os.path.exists(os.path.join(pkg, f)), f)


if __name__ == "__main__":
    unittest.main()
