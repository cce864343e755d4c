# SPDX-License-Identifier: MIT
"""moecache.Client on a pool of three CPU banks against the driver, run by
tests/vm-route (moecache-route-vmtest) in the test VM once its own agent
serves the pool: the bank table, every bank's read-only view, and
Client.route of an acquire against the map and the host pages.

Usage: route_vm.py POOL (exit 0 when every check holds; the failed check
on stderr otherwise)."""
import sys

import moecache

LAYER = 3


def check(cond, what):
    if not cond:
        print(f"route_vm: {what}", file=sys.stderr)
        sys.exit(1)


def main() -> int:
    pool = sys.argv[1]
    with moecache.Client(pool, fast_pins=False) as c:
        check(c.n_banks == 3, f"n_banks is {c.n_banks}")
        layout = c.bank_layout
        begin = 0
        for b, d in enumerate(layout):
            check(d["index"] == b and d["tier"] == b and d["slot_begin"] == begin
                  and d["backend"] == "cpu" and d["set"], f"bank_layout[{b}] = {d}")
            begin += d["n_slots"]
        check(begin == c.info.n_slots, "the banks do not cover the slots")
        banks = c.banks
        check(len(banks) == 3, f"{len(banks)} banks imported")
        for b, r in enumerate(banks):
            check(r.index == b and r.slot_begin == layout[b]["slot_begin"]
                  and r.n_slots == layout[b]["n_slots"] and r.tier == b and r.readonly,
                  f"banks[{b}]: index {r.index} begin {r.slot_begin} slots {r.n_slots}")
        host = memoryview(c.host)
        eb = c.info.expert_bytes
        experts = list(range(0, 36, 3))
        slots = c.acquire(LAYER, experts, wait=True, timeout_ms=20000)
        per_bank, cold = c.route(experts, slots)
        check(cold == [], f"cold after a waiting acquire: {cold}")
        check(sorted(e[0] for g in per_bank for e in g) == list(range(len(experts))),
              "the route does not hold every expert once")
        for b, group in enumerate(per_bank):
            check(len(group) > 0, f"bank {b} runs none of {len(experts)} experts")
            view = memoryview(banks[b])
            stride = banks[b].stride
            for pos, expert, slot, local in group:
                check(experts[pos] == expert and slots[pos] == slot, "entry and acquire differ")
                check(c.slot_bank(slot) == b and local == slot - banks[b].slot_begin,
                      f"slot {slot} routed to bank {b} local {local}")
                check(c.lookup(LAYER, [expert]) == [slot], f"the map has {expert} elsewhere")
                rec = (LAYER * c.info.n_local + expert) * eb
                check(view[local * stride: local * stride + eb] == host[rec: rec + eb],
                      f"bank {b} local slot {local} does not hold expert {expert}")
            view.release()
        c.release(slots)
        fresh = [40, 41]
        cold_slots = c.acquire(LAYER + 1, fresh, wait=False, queue=False)
        per_bank, cold = c.route(fresh, cold_slots)
        check(all(not g for g in per_bank) and [e[1] for e in cold] == fresh
              and all(e[2] == -1 and e[3] == -1 for e in cold), f"cold route {cold}")
        check(c.slot_bank(-1) == -1 and c.slot_bank(c.info.n_slots) == -1, "slot_bank of none")
        try:
            c.route([1], [c.info.n_slots])
            check(False, "a slot out of range was routed")
        except OSError as e:
            check(e.errno == 22, f"a slot out of range: {e}")
        try:
            c.route([1, 2], [0])
            check(False, "experts and slots of different lengths were routed")
        except ValueError:
            pass
        host.release()
    print("route_vm: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
