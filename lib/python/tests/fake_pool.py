# SPDX-License-Identifier: MIT
"""A pool in process memory with moecache.Client's surface, for testing
moecache.torch and the model on a host without the driver: host records
laid out as moecachectl load lays them out, a bank of n_slots, LRU
eviction among unpinned slots, misses loaded at once (wait) or queued and
loaded at the next call (no wait). banks= splits the slots into banks
(slot counts, in slot order) as a pool of several banks does; the client's
route groups an acquire's experts by bank as libmoecache's does."""
import errno
from collections import OrderedDict, namedtuple

import numpy as np

PoolInfo = namedtuple("PoolInfo", "name n_layers n_experts expert_begin expert_end n_local "
                      "n_slots expert_bytes flags max_batch")


class FakeRegion:
    def __init__(self, array, n_slots, stride, index=0, tier=0, slot_begin=0):
        self.array = array
        self.n_slots = n_slots
        self.stride = stride
        self.nbytes = array.nbytes
        self.index = index
        self.tier = tier
        self.slot_begin = slot_begin

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def layout(tensors, align=256):
    """[(name, offset, array)] and the record's bytes, in load's order."""
    out, off = [], 0
    for name, arr in tensors:
        off = -(-off // align) * align
        out.append((name, off, arr))
        off += arr.nbytes
    return out, off


class FakePool:
    def __init__(self, name, n_layers, n_experts, expert_bytes, n_slots, records,
                 expert_begin=0, expert_end=None, banks=None):
        """records(layer, expert) -> bytes of the record; banks: the slot
        count of each bank (default: one bank of n_slots)."""
        self.bank_slots = list(banks) if banks else [n_slots]
        if sum(self.bank_slots) != n_slots:
            raise ValueError("the banks must split n_slots")
        self.expert_end = n_experts if expert_end is None else expert_end
        n_local = self.expert_end - expert_begin
        self.info = PoolInfo(name, n_layers, n_experts, expert_begin, self.expert_end, n_local,
                             n_slots, expert_bytes, 7, 1024)
        self.host = np.zeros(n_layers * n_local * expert_bytes, np.uint8)
        for layer in range(n_layers):
            for e in range(expert_begin, self.expert_end):
                rec = np.frombuffer(records(layer, e), np.uint8)
                i = (layer * n_local + e - expert_begin) * expert_bytes
                self.host[i: i + rec.size] = rec
        self.bank = np.zeros(n_slots * expert_bytes, np.uint8)
        self.owner = [None] * n_slots
        self.where = {}
        self.pins = [0] * n_slots
        self.lru = OrderedDict((s, None) for s in range(n_slots))
        self.queued = []
        self.hits = self.misses = self.prefetches = 0

    def load(self, layer, e):
        """Copies (layer, e) into the least recently used unpinned slot."""
        for s in self.lru:
            if not self.pins[s]:
                break
        else:
            raise OSError(errno.EAGAIN, "every slot is pinned")
        if self.owner[s] is not None:
            del self.where[self.owner[s]]
        info = self.info
        eb = info.expert_bytes
        i = (layer * info.n_local + e - info.expert_begin) * eb
        self.bank[s * eb: (s + 1) * eb] = self.host[i: i + eb]
        self.owner[s] = (layer, e)
        self.where[(layer, e)] = s
        self.lru.move_to_end(s)
        return s


class FakeClient:
    def __init__(self, pool: FakePool):
        self.pool = pool
        self.info = pool.info
        eb = pool.info.expert_bytes
        self.n_banks = len(pool.bank_slots)
        self.begins = [sum(pool.bank_slots[:b]) for b in range(self.n_banks)]
        self.banks = tuple(
            FakeRegion(pool.bank[begin * eb: (begin + n) * eb], n, eb, b, b, begin)
            for b, (begin, n) in enumerate(zip(self.begins, pool.bank_slots)))
        self.bank = self.banks[0] if self.n_banks > 1 else FakeRegion(
            pool.bank, pool.info.n_slots, eb)
        self.host = FakeRegion(pool.host, pool.info.n_layers * pool.info.n_local,
                               pool.info.expert_bytes)
        self.held = []
        self.closed = False
        self.calls = []

    def _check(self, layer, experts):
        info = self.info
        if not 0 <= layer < info.n_layers:
            raise OSError(errno.EINVAL, f"layer {layer} is out of range")
        if len(set(experts)) != len(experts):
            raise OSError(errno.EINVAL, "repeated expert")
        for e in experts:
            if not info.expert_begin <= e < info.expert_end:
                raise OSError(errno.EINVAL, f"expert {e} is outside the pool")

    def lookup(self, layer, experts):
        return [self.pool.where.get((layer, e), -1) for e in experts]

    def release(self, slots):
        for s in slots:
            if s >= 0:
                self.held.remove(s)
                self.pool.pins[s] -= 1

    def acquire_release(self, release_slots, layer, experts, wait=True, timeout_ms=0,
                        keep_waiting=False, queue=True):
        experts = list(experts)
        self._check(layer, experts)
        self.calls.append(("acquire_release", list(release_slots), layer, experts, wait))
        self.release(release_slots)
        p = self.pool
        # Queued misses of an earlier call are loaded now (the agent's work).
        for key in p.queued:
            if key not in p.where:
                p.load(*key)
        p.queued = []
        slots = []
        # Hits are pinned first, so that loading a miss never evicts them.
        for e in experts:
            s = p.where.get((layer, e), -1)
            if s >= 0:
                p.hits += 1
                p.pins[s] += 1
                p.lru.move_to_end(s)
            slots.append(s)
        for i, e in enumerate(experts):
            if slots[i] >= 0:
                continue
            p.misses += 1
            if wait:
                s = p.load(layer, e)
                p.pins[s] += 1
                slots[i] = s
            elif queue:
                p.queued.append((layer, e))
        self.held += [s for s in slots if s >= 0]
        return slots

    def acquire(self, layer, experts, **kw):
        return self.acquire_release([], layer, experts, **kw)

    def prefetch(self, layer, experts):
        self._check(layer, list(experts))
        self.calls.append(("prefetch", layer, list(experts)))
        n = 0
        for e in experts:
            if (layer, e) not in self.pool.where and (layer, e) not in self.pool.queued:
                self.pool.queued.append((layer, e))
                n += 1
        self.pool.prefetches += n
        return n

    def slot_bank(self, slot):
        for b in reversed(range(self.n_banks)):
            if 0 <= slot and self.begins[b] <= slot < self.begins[b] + self.pool.bank_slots[b]:
                return b
        return -1

    def route(self, experts, slots):
        """(banks, cold) as Client.route: per bank (pos, expert, slot, local)
        in acquire order, the cold ones (pos, expert, -1, -1)."""
        self.calls.append(("route", list(experts), list(slots)))
        banks = [[] for _ in range(self.n_banks)]
        cold = []
        for pos, (e, s) in enumerate(zip(experts, slots)):
            if s < 0:
                cold.append((pos, e, -1, -1))
            else:
                b = self.slot_bank(s)
                banks[b].append((pos, e, s, s - self.begins[b]))
        return banks, cold

    def stats(self, layer=None):
        return {"hits": self.pool.hits, "misses": self.pool.misses}

    def close(self):
        self.release(list(self.held))
        self.closed = True
