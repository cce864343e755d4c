# SPDX-License-Identifier: MIT
"""The tensor-table parser (moecache.table) on good and bad tables."""
import copy
import json
import os
import tempfile
import unittest

from moecache.table import TableError, TensorTable, table_path

# The example of docs/moecachectl.md.
GOOD = {
    "pool": "qwen3", "format": "safetensors", "expert_bytes": 16384, "record_bytes": 12288,
    "alignment": 256, "n_layers": 2, "n_experts": 4, "expert_begin": 0, "expert_end": 4,
    "model_layers": [0, 1],
    "tensors": [
        {"name": "gate_proj.weight", "dtype": "F16", "shape": [32, 64], "offset": 0, "size": 4096},
        {"name": "up_proj.weight", "dtype": "F16", "shape": [32, 64], "offset": 4096, "size": 4096},
        {"name": "down_proj.weight", "dtype": "F16", "shape": [64, 32], "offset": 8192,
         "size": 4096},
    ],
}


def changed(**kw):
    d = copy.deepcopy(GOOD)
    for k, v in kw.items():
        if v is None:
            del d[k]
        else:
            d[k] = v
    return d


def with_tensor(i, **kw):
    d = copy.deepcopy(GOOD)
    d["tensors"][i].update(kw)
    return d


class Info:
    name, n_layers, n_experts, expert_begin, expert_end, expert_bytes = "qwen3", 2, 4, 0, 4, 16384


class TableTests(unittest.TestCase):
    def test_basic_parse(self):
        """the documented example parses into entries with their offsets and shapes"""
        t = TensorTable.from_dict(GOOD)
        self.assertEqual(len(t), 3)
        self.assertEqual(t["up_proj.weight"].offset, 4096)
        self.assertEqual(t["down_proj.weight"].shape, (64, 32))
        self.assertEqual(t.n_local, 4)
        self.assertEqual(t.projection("gate").name, "gate_proj.weight")

    def test_basic_w13_adjacent(self):
        """gate and up stored back to back are one [2 * d_ff, d_model] w13"""
        self.assertEqual(TensorTable.from_dict(GOOD).w13(), (0, "F16", (64, 64)))

    def test_basic_w13_not_adjacent(self):
        """gate and up with a gap between them give no fused w13"""
        d = copy.deepcopy(GOOD)
        d["tensors"][1]["offset"] = 4352
        d["tensors"][2]["offset"] = 8704
        d["record_bytes"] = 12800
        self.assertIsNone(TensorTable.from_dict(d).w13())

    def test_basic_load_file_and_default_path(self):
        """load() reads a file; table_path() follows MOECACHE_RUNDIR"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "qwen3.tensors.json")
            with open(path, "w") as f:
                json.dump(GOOD, f)
            old = os.environ.get("MOECACHE_RUNDIR")
            os.environ["MOECACHE_RUNDIR"] = d
            try:
                self.assertEqual(table_path("qwen3"), path)
                self.assertEqual(len(TensorTable.for_pool("qwen3")), 3)
            finally:
                if old is None:
                    del os.environ["MOECACHE_RUNDIR"]
                else:
                    os.environ["MOECACHE_RUNDIR"] = old

    def test_basic_check_pool(self):
        """check_pool accepts the pool the table was written for"""
        TensorTable.from_dict(GOOD).check_pool(Info)

    def test_bad_input_check_pool_mismatch(self):
        """a table of another geometry is refused, naming the field"""
        class Other(Info):
            expert_bytes = 8192
        with self.assertRaisesRegex(TableError, "expert_bytes"):
            TensorTable.from_dict(GOOD).check_pool(Other)

    def test_bad_input_tables(self):
        """every malformed table is a TableError whose message names the fault"""
        cases = [
            (changed(pool=None), "'pool'"),
            (changed(expert_bytes="16384"), "'expert_bytes' must be an integer"),
            (changed(expert_bytes=True), "'expert_bytes' must be an integer"),
            (changed(n_layers=0), "'n_layers' = 0"),
            (changed(expert_begin=4), "local range"),
            (changed(expert_end=5), "local range"),
            (changed(record_bytes=20000), "exceeds expert_bytes"),
            (changed(model_layers=[0]), "model_layers"),
            (changed(tensors=[]), "'tensors'"),
            (changed(tensors="x"), "'tensors'"),
            (with_tensor(1, offset=4000), "not a multiple of 256"),
            (with_tensor(1, size=4000), "the table says 4000"),
            (with_tensor(2, offset=8192 + 256), "past the record"),
            (with_tensor(1, name="gate_proj.weight"), "listed twice"),
            (with_tensor(0, shape=[32, -64]), "non-negative"),
            (with_tensor(0, shape=[1] * 9), "at most 8"),
            (with_tensor(0, name=""), "'name'"),
            (with_tensor(0, dtype=7), "'dtype'"),
        ]
        for d, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(TableError, pattern):
                    TensorTable.from_dict(d)

    def test_bad_input_overlap(self):
        """two tensors sharing bytes are refused"""
        d = with_tensor(1, offset=3840)
        with self.assertRaisesRegex(TableError, "overlaps"):
            TensorTable.from_dict(d)

    def test_bad_input_not_json(self):
        """text that is not JSON, or not an object, is a TableError"""
        with self.assertRaisesRegex(TableError, "not JSON"):
            TensorTable.from_json("{", "t.json")
        with self.assertRaisesRegex(TableError, "JSON object"):
            TensorTable.from_json("[1]", "t.json")

    def test_bad_input_unknown_tensor(self):
        """asking for a tensor the table lacks lists the ones it has"""
        with self.assertRaisesRegex(KeyError, "gate_proj.weight"):
            TensorTable.from_dict(GOOD)["scales"]

    def test_basic_opaque_dtype(self):
        """a GGML block type is kept with its size unchecked"""
        d = with_tensor(0, dtype="Q4_K", size=1152, shape=[32, 64])
        self.assertIsNone(TensorTable.from_dict(d)["gate_proj.weight"].itemsize)


if __name__ == "__main__":
    unittest.main()
