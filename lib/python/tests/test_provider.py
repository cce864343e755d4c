# SPDX-License-Identifier: MIT
"""moecache.torch.ExpertProvider over an in-process pool (fake_pool), and
the torch MoE model of tools/python decoding through it: the logic that
needs no driver. The same code runs against the driver in the VM
(tools/python/vm-test)."""
import os
import sys
import unittest

import numpy as np
import torch

from fake_pool import FakeClient, FakePool, layout
from moecache.table import TensorTable
from moecache.torch import ExpertProvider

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools", "python"))
import moe_model as mm  # noqa: E402

PAGE = 4096


def model_pool(cfg, n_slots, expert_begin=0, expert_end=None, weights=None, banks=None):
    """A fake pool holding the model's experts as moecachectl load lays
    them out (its slots split into banks of the given slot counts), and its
    tensor table."""
    weights = weights or mm.generate(cfg)

    def tensors(layer, e):
        return [(f"{w}.weight", weights[mm.expert_name(layer, e, w)].numpy())
                for w in mm.EXPERT_TENSORS]

    entries, rec = layout(tensors(0, 0))
    expert_bytes = -(-rec // PAGE) * PAGE

    def record(layer, e):
        buf = np.zeros(rec, np.uint8)
        for (_, off, _), (_, arr) in zip(entries, tensors(layer, e)):
            buf[off: off + arr.nbytes] = np.frombuffer(arr.tobytes(), np.uint8)
        return buf.tobytes()

    end = cfg.n_experts if expert_end is None else expert_end
    pool = FakePool("torch", cfg.n_layers, cfg.n_experts, expert_bytes, n_slots, record,
                    expert_begin, end, banks)
    table = TensorTable.from_dict({
        "pool": "torch", "format": "safetensors", "expert_bytes": expert_bytes,
        "record_bytes": rec, "alignment": 256, "n_layers": cfg.n_layers,
        "n_experts": cfg.n_experts, "expert_begin": expert_begin, "expert_end": end,
        "model_layers": list(range(cfg.n_layers)),
        "tensors": [{"name": n, "dtype": "F32", "shape": list(a.shape), "offset": off,
                     "size": a.nbytes} for n, off, a in entries]})
    return pool, table, weights


CFG = mm.Config(n_layers=2, n_experts=8, d_model=32, d_ff=48, top_k=2)


class ProviderTests(unittest.TestCase):
    def setUp(self):
        self.pool, self.table, self.weights = model_pool(CFG, n_slots=4)
        self.client = FakeClient(self.pool)
        self.p = ExpertProvider(client=self.client, table=self.table)

    def test_basic_views_zero_copy(self):
        """every table tensor is an [n_slots, *shape] view into the bank at slot * stride + offset"""
        base = self.p.bank.data_ptr()
        stride = self.pool.info.expert_bytes
        for t in self.table:
            v = self.p.tensors[t.name]
            self.assertEqual(tuple(v.shape), (4,) + t.shape)
            for slot in range(4):
                self.assertEqual(v[slot].data_ptr(), base + slot * stride + t.offset)
        self.assertEqual(self.p.bank.data_ptr(), self.pool.bank.ctypes.data)
        self.assertEqual(tuple(self.p.w2.shape), (4, CFG.d_model, CFG.d_ff))

    def test_basic_w13_fused(self):
        """w13 is gate and up as one [n_slots, 2 * d_ff, d_model] view (gate first)"""
        self.assertEqual(tuple(self.p.w13.shape), (4, 2 * CFG.d_ff, CFG.d_model))
        e = self.p.prepare(0, [3])[3].item()
        w = self.weights
        self.assertTrue(torch.equal(self.p.w13[e][: CFG.d_ff], w[mm.expert_name(0, 3, "w1")]))
        self.assertTrue(torch.equal(self.p.w13[e][CFG.d_ff:], w[mm.expert_name(0, 3, "w3")]))

    def test_basic_prepare_expert_map(self):
        """prepare returns int32 [num_experts]: the slot of each named expert, -1 elsewhere"""
        m = self.p.prepare(1, torch.tensor([[5, 2], [2, 7]]))
        self.assertEqual(m.dtype, torch.int32)
        self.assertEqual(tuple(m.shape), (CFG.n_experts,))
        for e in range(CFG.n_experts):
            if e in (2, 5, 7):
                s = int(m[e])
                self.assertGreaterEqual(s, 0)
                self.assertEqual(self.pool.owner[s], (1, e))
                self.assertTrue(torch.equal(self.p.tensors["w2.weight"][s],
                                            self.weights[mm.expert_name(1, e, "w2")]))
            else:
                self.assertEqual(int(m[e]), -1)
        self.assertEqual(self.p.cold, [])

    def test_lifetime_prepare_releases_previous(self):
        """each prepare releases the previous call's pins in the same call"""
        m0 = self.p.prepare(0, [1, 2])
        slots0 = sorted(int(m0[e]) for e in (1, 2))
        self.p.prepare(1, [3])
        last = self.client.calls[-1]
        self.assertEqual(sorted(last[1]), slots0)
        self.assertEqual(sum(self.pool.pins), 1)
        self.p.release()
        self.assertEqual(sum(self.pool.pins), 0)

    def test_basic_wait_false_reports_cold(self):
        """wait=False maps resident experts, lists cold ones, and the host views hold them"""
        self.p.prepare(0, [1])
        m = self.p.prepare(0, [1, 6], wait=False)
        self.assertGreaterEqual(int(m[1]), 0)
        self.assertEqual(int(m[6]), -1)
        self.assertEqual(self.p.cold, [6])
        h = self.p.host_expert(0, 6)
        self.assertTrue(torch.equal(h["w1.weight"], self.weights[mm.expert_name(0, 6, "w1")]))

    def test_basic_hint_next(self):
        """hint_next queues a prefetch of the local experts named"""
        self.assertEqual(self.p.hint_next(1, torch.tensor([4, 4, 0])), 2)
        self.assertEqual(self.client.calls[-1], ("prefetch", 1, [0, 4]))

    def test_bad_input_prepare(self):
        """a layer or expert id out of range is refused before any pin changes hands"""
        self.p.prepare(0, [1])
        with self.assertRaises(ValueError):
            self.p.prepare(2, [1])
        with self.assertRaises(ValueError):
            self.p.prepare(0, [CFG.n_experts])
        with self.assertRaises(ValueError):
            self.p.prepare(0, [-1])
        self.assertEqual(sum(self.pool.pins), 1)

    def test_bad_input_table_of_another_pool(self):
        """a table that does not describe the client's pool is refused"""
        from moecache.table import TableError
        other, table, _ = model_pool(mm.Config(n_layers=3, n_experts=8, d_model=32, d_ff=48,
                                               top_k=2), n_slots=4)
        with self.assertRaises(TableError):
            ExpertProvider(client=self.client, table=table)

    def test_basic_range_pool_maps_local_only(self):
        """a --range pool maps only its local experts and never asks for the others"""
        pool, table, _ = model_pool(CFG, n_slots=4, expert_begin=4, expert_end=8)
        client = FakeClient(pool)
        p = ExpertProvider(client=client, table=table)
        m = p.prepare(0, [1, 5, 6])
        self.assertEqual(int(m[1]), -1)
        self.assertGreaterEqual(int(m[5]), 0)
        self.assertGreaterEqual(int(m[6]), 0)
        self.assertEqual(client.calls[-1][3], [5, 6])
        self.assertEqual(tuple(p.host_tensors["w1.weight"].shape)[:2], (CFG.n_layers, 4))


def decode_bit_exact(test, wait, banks=None):
    """20 decode steps of the model through a pool of 25% of the experts
    (split into banks of the given slot counts) against the in-memory
    model: the logits must be equal bit for bit. Returns the expert
    source (its from_bank and from_host counts)."""
    cfg = mm.Config(n_layers=2, n_experts=16, d_model=32, d_ff=48, top_k=2, max_seq=32)
    pool, table, weights = model_pool(cfg, n_slots=cfg.n_layers * cfg.n_experts // 4,
                                      banks=banks)
    p = ExpertProvider(client=FakeClient(pool), table=table)
    source = mm.ProviderExperts(p, wait=wait)
    ref = mm.Model(cfg, mm.dense_weights(weights), mm.MemoryExperts(weights))
    model = mm.Model(cfg, mm.dense_weights(weights), source)
    tok = 7
    for _ in range(20):
        a, b = ref.step(tok), model.step(tok)
        test.assertTrue(torch.equal(a, b))
        tok = int(torch.argmax(a))
    test.assertGreater(pool.misses, 0)
    return source


class ModelTests(unittest.TestCase):
    """The decoder through a bank of 25% of the experts equals the in-memory
    model bit for bit."""

    def decode(self, wait):
        return decode_bit_exact(self, wait)

    def test_basic_decode_bit_exact_wait(self):
        """waiting for misses: 20 steps, logits equal bit for bit, evictions included"""
        src = self.decode(wait=True)
        self.assertEqual(src.from_host, 0)

    def test_basic_decode_bit_exact_cold_from_host(self):
        """wait=False: cold experts from the host pages, logits still equal bit for bit"""
        src = self.decode(wait=False)
        self.assertGreater(src.from_host, 0)
        self.assertGreater(src.from_bank, 0)

    def test_basic_safetensors_round_trip(self):
        """the checkpoint writer and reader keep every dense tensor and the config"""
        import tempfile
        cfg = mm.Config(n_layers=1, n_experts=4, d_model=16, d_ff=16, top_k=2)
        w = mm.generate(cfg)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            mm.write_safetensors(path, w, {"moecache_test_config": cfg.to_json()})
            dense, meta = mm.read_safetensors(path)
        self.assertEqual(mm.Config.from_json(meta["moecache_test_config"]), cfg)
        self.assertEqual(set(dense), set(mm.dense_weights(w)))
        for k, v in dense.items():
            self.assertTrue(torch.equal(v, w[k]), k)

    def test_basic_generator_is_seeded(self):
        """the same seed gives the same weights; another seed others"""
        a = mm.generate(mm.Config(n_layers=1, n_experts=2, d_model=8, d_ff=8, top_k=1))
        b = mm.generate(mm.Config(n_layers=1, n_experts=2, d_model=8, d_ff=8, top_k=1))
        c = mm.generate(mm.Config(n_layers=1, n_experts=2, d_model=8, d_ff=8, top_k=1, seed=5))
        name = mm.expert_name(0, 1, "w2")
        self.assertTrue(torch.equal(a[name], b[name]))
        self.assertFalse(torch.equal(a[name], c[name]))


if __name__ == "__main__":
    unittest.main()
