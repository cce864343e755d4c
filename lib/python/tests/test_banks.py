# SPDX-License-Identifier: MIT
"""moecache.torch.ExpertProvider over a pool of several banks (fake_pool
with banks=): per-bank views, the per-bank maps prepare sets from the
client's route, and the torch MoE model decoding through them bit for bit."""
import os
import sys
import unittest

import torch

from fake_pool import FakeClient
from moecache.torch import ExpertProvider
from test_provider import decode_bit_exact, model_pool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tools", "python"))
import moe_model as mm  # noqa: E402

CFG = mm.Config(n_layers=2, n_experts=8, d_model=32, d_ff=48, top_k=2)
BANKS = [2, 3, 3]  # slots of banks 0, 1, 2
BEGIN = [0, 2, 5]


class BankProviderTests(unittest.TestCase):
    def setUp(self):
        self.pool, self.table, self.weights = model_pool(CFG, n_slots=8, banks=BANKS)
        self.client = FakeClient(self.pool)
        self.p = ExpertProvider(client=self.client, table=self.table)

    def test_basic_views_per_bank(self):
        """each bank's tensors are [its n_slots, *shape] views of its own slots, zero-copy"""
        self.assertEqual(self.p.n_banks, 3)
        base = self.pool.bank.ctypes.data
        stride = self.pool.info.expert_bytes
        for b, n in enumerate(BANKS):
            self.assertEqual(self.p.bank_flat[b].data_ptr(), base + BEGIN[b] * stride)
            for t in self.table:
                v = self.p.bank_tensors[b][t.name]
                self.assertEqual(tuple(v.shape), (n,) + t.shape)
                self.assertEqual(v[n - 1].data_ptr(),
                                 base + (BEGIN[b] + n - 1) * stride + t.offset)
            self.assertEqual(tuple(self.p.bank_w2[b].shape), (n, CFG.d_model, CFG.d_ff))
            self.assertEqual(tuple(self.p.bank_w13[b].shape), (n, 2 * CFG.d_ff, CFG.d_model))
        self.assertIs(self.p.tensors, self.p.bank_tensors[0])

    def test_basic_prepare_bank_maps(self):
        """prepare maps each expert to its bank and bank-local slot, whose views hold it"""
        named = [0, 1, 2, 3, 4, 5, 6, 7]
        m = self.p.prepare(1, named)
        used = set()
        for e in named:
            s = int(m[e])
            b = int(self.p.expert_bank[e])
            self.assertGreaterEqual(b, 0)
            self.assertTrue(BEGIN[b] <= s < BEGIN[b] + BANKS[b], f"slot {s} not in bank {b}")
            for o in range(3):
                want = s - BEGIN[b] if o == b else -1
                self.assertEqual(int(self.p.bank_maps[o][e]), want)
            local = int(self.p.bank_maps[b][e])
            self.assertTrue(torch.equal(self.p.bank_tensors[b]["w2.weight"][local],
                                        self.weights[mm.expert_name(1, e, "w2")]))
            self.assertTrue(torch.equal(self.p.expert_tensors(e)["w1.weight"],
                                        self.weights[mm.expert_name(1, e, "w1")]))
            used.add(b)
        self.assertEqual(used, {0, 1, 2})
        self.assertEqual(self.client.calls[-1][0], "route")

    def test_basic_cold_in_no_bank(self):
        """with wait=False a cold expert is in no bank's map and has no bank"""
        self.p.prepare(0, [1])
        maps = self.p.prepare_banks(0, [1, 6], wait=False)
        self.assertEqual(self.p.cold, [6])
        self.assertEqual(int(self.p.expert_bank[6]), -1)
        self.assertTrue(all(int(bm[6]) == -1 for bm in maps))
        self.assertIsNone(self.p.expert_tensors(6))
        b = int(self.p.expert_bank[1])
        self.assertGreaterEqual(int(maps[b][1]), 0)

    def test_basic_unnamed_expert_has_no_bank(self):
        """experts the call did not name are -1 everywhere, even if resident"""
        self.p.prepare(0, [1, 2])
        self.p.prepare(0, [3])
        for e in (1, 2):
            self.assertEqual(int(self.p.expert_bank[e]), -1)
            self.assertTrue(all(int(bm[e]) == -1 for bm in self.p.bank_maps))


class OneBankTests(unittest.TestCase):
    def test_basic_one_bank_map_is_expert_map(self):
        """with one bank, bank_maps[0] is expert_map and no route is asked for"""
        pool, table, _ = model_pool(CFG, n_slots=4)
        client = FakeClient(pool)
        p = ExpertProvider(client=client, table=table)
        m = p.prepare(0, [2, 5])
        self.assertEqual(p.n_banks, 1)
        self.assertIs(p.bank_maps[0], m)
        self.assertEqual(int(p.expert_bank[2]), 0)
        self.assertEqual(int(p.expert_bank[3]), -1)
        self.assertNotIn("route", [c[0] for c in client.calls])


class BankModelTests(unittest.TestCase):
    """The decoder through three banks equals the in-memory model bit for bit."""

    def test_basic_decode_three_banks_wait(self):
        """waiting: 20 steps over three banks, logits equal bit for bit"""
        src = decode_bit_exact(self, True, banks=[2, 3, 3])
        self.assertEqual(src.from_host, 0)
        self.assertGreater(src.from_bank, 0)

    def test_basic_decode_three_banks_cold_from_host(self):
        """wait=False over three banks: cold experts from the host, logits equal bit for bit"""
        src = decode_bit_exact(self, False, banks=[2, 3, 3])
        self.assertGreater(src.from_host, 0)
        self.assertGreater(src.from_bank, 0)


if __name__ == "__main__":
    unittest.main()
