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
	memset(c, 0, sizeof(*c));
	if (cfg->n_slots > TEST_MAX_SLOTS || (uint64_t)cfg->n_layers * cfg->n_local > TEST_MAX_IDS)
		return -EINVAL;
	c->n_layers = cfg->n_layers;
	c->n_local = cfg->n_local;
	c->n_slots = cfg->n_slots;
	for (uint32_t i = 0; i < TEST_MAX_SLOTS; i++)
		c->owner[i] = TEST_NONE;
	return moe_policy_create(name, cfg, &c->policy);
}

void test_cache_fini(struct test_cache *c)
{
	moe_policy_destroy(c->policy);
	c->policy = NULL;
}

bool test_cache_evictable(void *ctx, uint32_t slot)
{
	struct test_cache *c = ctx;

	return slot < c->n_slots && c->owner[slot] != TEST_NONE && !c->need[c->owner[slot]] &&
	       !c->blocked[slot];
}

int test_cache_slot_of(const struct test_cache *c, uint32_t layer, uint32_t expert)
{
	uint32_t id = layer * c->n_local + expert;

	for (uint32_t s = 0; s < c->n_slots; s++)
		if (c->owner[s] == id)
			return (int)s;
	return -1;
}

int test_cache_step(struct test_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n,
		    uint64_t step)
{
	memset(c->need, 0, sizeof(c->need));
	for (uint32_t i = 0; i < n; i++)
		c->need[layer * c->n_local + experts[i]] = true;
	for (uint32_t i = 0; i < n; i++) {
		if (test_cache_slot_of(c, layer, experts[i]) >= 0)
			c->hits++;
		moe_policy_access(c->policy, layer, experts[i], 1, step);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot;

		if (test_cache_slot_of(c, layer, experts[i]) >= 0)
			continue;
		c->misses++;
		if (c->n_used < c->n_slots) {
			slot = c->n_used++;
		} else {
			int v = moe_policy_victim(c->policy, layer, experts[i], false,
						  test_cache_evictable, c);

			c->last_victim = v;
			if (v < 0 || !test_cache_evictable(c, (uint32_t)v))
				return v < 0 ? v : -EPROTO;
			slot = (uint32_t)v;
			moe_policy_removed(c->policy, slot);
		}
		c->owner[slot] = layer * c->n_local + experts[i];
		moe_policy_inserted(c->policy, slot, layer, experts[i], false);
	}
	return 0;
}
