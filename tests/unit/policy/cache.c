// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "cache.h"

int test_cache_init(struct test_cache *c, const char *name, uint32_t n_layers, uint32_t n_local,
		    uint32_t n_slots, const struct moe_profile *profile,
		    const struct moe_future *future)
{
	struct moe_policy_config cfg = {
	    .n_layers = n_layers,
	    .n_local = n_local,
	    .n_slots = n_slots,
	    .profile = profile,
	    .future = future,
	};

	return test_cache_init_cfg(c, name, &cfg);
}

int test_cache_init_cfg(struct test_cache *c, const char *name, const struct moe_policy_config *cfg)
{
	int ret;

	memset(c, 0, sizeof(*c));
	if (cfg->n_slots > TEST_MAX_SLOTS || (uint64_t)cfg->n_layers * cfg->n_local > TEST_MAX_IDS)
		return -EINVAL;
	c->n_layers = cfg->n_layers;
	c->n_local = cfg->n_local;
	c->n_slots = cfg->n_slots;
	ret = moe_policy_create(name, cfg, &c->policy);
	if (ret)
		return ret;
	ret = agent_memmap_init(&c->map, c->n_layers, c->n_local, 0, c->n_local, c->n_slots);
	if (!ret) {
		ret = agent_slots_init(&c->slots, &c->map.view, c->policy);
		if (ret)
			agent_memmap_free(&c->map);
	}
	if (ret) {
		moe_policy_destroy(c->policy);
		c->policy = NULL;
	}
	return ret;
}

void test_cache_fini(struct test_cache *c)
{
	if (c->policy) {
		agent_slots_destroy(&c->slots);
		agent_memmap_free(&c->map);
	}
	moe_policy_destroy(c->policy);
	c->policy = NULL;
}

bool test_cache_evictable(void *ctx, uint32_t slot)
{
	struct test_cache *c = ctx;
	uint32_t owner;

	if (slot >= c->n_slots)
		return false;
	owner = c->map.owner[slot];
	return owner != MOECACHE_NONE && !(owner & MOECACHE_OWNER_FILLING) && !c->need[owner] &&
	       !c->blocked[slot];
}

int test_cache_slot_of(const struct test_cache *c, uint32_t layer, uint32_t expert)
{
	uint32_t slot = c->map.map[layer * c->n_local + expert];

	return slot == MOECACHE_NONE ? -1 : (int)slot;
}

static void test_cache_pin(struct test_cache *c, uint32_t slot, uint64_t clock)
{
	agent_memmap_pin(&c->map, slot, clock);
	c->pinned[c->n_pinned++] = slot;
}

int test_cache_step(struct test_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n,
		    uint64_t step)
{
	/* Pool clocks start at 1: a slot never used has last_use 0. */
	uint64_t clock = step + 1;

	for (uint32_t i = 0; i < c->n_pinned; i++)
		agent_memmap_unpin(&c->map, c->pinned[i]);
	c->n_pinned = 0;
	memset(c->need, 0, sizeof(c->need));
	for (uint32_t i = 0; i < n; i++)
		c->need[layer * c->n_local + experts[i]] = true;
	for (uint32_t i = 0; i < n; i++) {
		int slot = test_cache_slot_of(c, layer, experts[i]);

		if (slot >= 0) {
			c->hits++;
			test_cache_pin(c, (uint32_t)slot, clock);
		}
		moe_policy_access(c->policy, layer, experts[i], 1, step);
	}
	/* Slots used after the step's start are this step's. */
	agent_slots_new_round(&c->slots, step);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = layer * c->n_local + experts[i];
		int slot;

		if (test_cache_slot_of(c, layer, experts[i]) >= 0)
			continue;
		c->misses++;
		slot = agent_slots_choose(&c->slots, idx, false);
		if (slot < 0) {
			c->last_victim = slot;
			return slot;
		}
		if (c->map.owner[slot] != MOECACHE_NONE)
			c->last_victim = slot;
		/* EVICT, the copy, COMMIT: as the agent and the driver do them. */
		agent_memmap_filling(&c->map, idx, (uint32_t)slot);
		agent_slots_taken(&c->slots, (uint32_t)slot, idx, false);
		agent_memmap_publish(&c->map, idx, (uint32_t)slot);
		agent_slots_committed(&c->slots, (uint32_t)slot);
		test_cache_pin(c, (uint32_t)slot, clock);
	}
	return 0;
}
