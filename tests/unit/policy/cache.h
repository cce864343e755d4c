/* SPDX-License-Identifier: MIT */
/* A minimal cache driver for policy tests: the caller's side of policy.h. */
#ifndef MOECACHE_TESTS_UNIT_POLICY_CACHE_H
#define MOECACHE_TESTS_UNIT_POLICY_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/policy/policy.h"

#define TEST_MAX_SLOTS 64
#define TEST_MAX_IDS 256
#define TEST_NONE UINT32_MAX

struct test_cache {
	struct moe_policy *policy;
	uint32_t n_layers, n_local, n_slots;
	uint32_t owner[TEST_MAX_SLOTS]; /* slot -> layer * n_local + expert, or TEST_NONE */
	uint32_t n_used;
	bool need[TEST_MAX_IDS];      /* the current step's experts */
	bool blocked[TEST_MAX_SLOTS]; /* pinned by the test */
	uint64_t hits, misses;
	int last_victim; /* the latest victim answer */
};

/* Creates policy name over an empty cache; returns moe_policy_create's result. */
int test_cache_init(struct test_cache *c, const char *name, uint32_t n_layers, uint32_t n_local,
		    uint32_t n_slots, const struct moe_profile *profile,
		    const struct moe_future *future);
/* The same with a whole config (for the settings test_cache_init leaves at zero). */
int test_cache_init_cfg(struct test_cache *c, const char *name,
			const struct moe_policy_config *cfg);
void test_cache_fini(struct test_cache *c);
bool test_cache_evictable(void *ctx, uint32_t slot);
/*
 * One step: layer selects experts[0..n). Accesses them (hits counted), then
 * fills each miss into a free slot or over the policy's victim. Returns 0 or
 * the failing victim answer.
 */
int test_cache_step(struct test_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n,
		    uint64_t step);
/* The slot holding (layer, expert), or -1. */
int test_cache_slot_of(const struct test_cache *c, uint32_t layer, uint32_t expert);

#endif /* MOECACHE_TESTS_UNIT_POLICY_CACHE_H */
