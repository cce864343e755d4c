/* SPDX-License-Identifier: MIT */
/*
 * A cache for policy tests, driven as moecached drives a pool: the agent's
 * own slot choice (agent/slots.h: a free slot, else the policy's victim) over
 * a map region in memory (agent/memmap.h), so that a policy is tested through
 * the code that runs it in the agent and in the simulator.
 */
#ifndef MOECACHE_TESTS_UNIT_POLICY_CACHE_H
#define MOECACHE_TESTS_UNIT_POLICY_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/memmap.h"
#include "agent/policy/policy.h"
#include "agent/slots.h"

#define TEST_MAX_SLOTS 64
#define TEST_MAX_IDS 256
#define TEST_NONE UINT32_MAX

struct test_cache {
	struct moe_policy *policy;
	uint32_t n_layers, n_local, n_slots;
	struct agent_memmap map;       /* what the driver would hold */
	struct agent_slots slots;      /* the agent's view and slot choice */
	uint32_t pinned[TEST_MAX_IDS]; /* the current step's pins */
	uint32_t n_pinned;
	/* For direct moe_policy_victim calls through test_cache_evictable: */
	bool need[TEST_MAX_IDS];      /* the current step's experts */
	bool blocked[TEST_MAX_SLOTS]; /* pinned by the test */
	uint64_t hits, misses;
	int last_victim; /* the latest victim: an evicted slot, or the failing answer */
};

/* Creates policy name over an empty cache; returns moe_policy_create's result. */
int test_cache_init(struct test_cache *c, const char *name, uint32_t n_layers, uint32_t n_local,
		    uint32_t n_slots, const struct moe_profile *profile,
		    const struct moe_future *future);
/* The same with a whole config (for the settings test_cache_init leaves at zero). */
int test_cache_init_cfg(struct test_cache *c, const char *name,
			const struct moe_policy_config *cfg);
void test_cache_fini(struct test_cache *c);
/* Resident, not needed by the step (need[]) and not blocked[]: for direct victim calls. */
bool test_cache_evictable(void *ctx, uint32_t slot);
/*
 * One step (steps increase from 0): layer selects experts[0..n). Drops the
 * last step's pins, accesses the experts (hits counted and pinned), then
 * fills each miss where agent_slots_choose says and pins it. Returns 0 or
 * the failing choice (-ENOSPC, -EPROTO).
 */
int test_cache_step(struct test_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n,
		    uint64_t step);
/* The slot holding (layer, expert), or -1. */
int test_cache_slot_of(const struct test_cache *c, uint32_t layer, uint32_t expert);

#endif /* MOECACHE_TESTS_UNIT_POLICY_CACHE_H */
