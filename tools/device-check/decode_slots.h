/* SPDX-License-Identifier: MIT */
/*
 * The residency of bench-decode's bank (tools/device-check/cuda_bench.c):
 * moecached's own slot choice (agent/slots.h, a policy of agent/policy)
 * over a map region in memory (agent/memmap.h), driven as moecache-trace
 * sim drives it (tools/trace/sim.c): a layer's hits are pinned first, then
 * each miss gets a free slot or the policy's victim, is published and
 * pinned; the layer's pins go when the next layer starts. The benchmark
 * copies what this says is missing; no GPU is needed to run this part.
 */
#ifndef MOECACHE_DEVCHECK_DECODE_SLOTS_H
#define MOECACHE_DEVCHECK_DECODE_SLOTS_H

#include <stdint.h>

#include "agent/memmap.h"
#include "agent/slots.h"

struct decode_slots {
	struct agent_memmap map;
	struct agent_slots slots;
	struct moe_policy *policy;
	uint32_t n_experts;
	uint32_t *pinned; /* [top_k]: the current layer's pins */
	uint32_t n_pinned, top_k;
	uint64_t step; /* one per layer, from 1 */
	uint64_t hits, misses;
};

/* policy: a name moe_policy_create accepts. 0, -ENOENT (no such policy), -EINVAL or -ENOMEM. */
int decode_slots_init(struct decode_slots *d, const char *policy, uint32_t n_layers,
		      uint32_t n_experts, uint32_t n_slots, uint32_t top_k);
void decode_slots_free(struct decode_slots *d);

/*
 * One layer's acquire of ids[0..k) (k <= top_k; MOECACHE_NONE entries are
 * skipped): slots[i] gets each one's slot (MOECACHE_NONE when every slot
 * is pinned by this layer already), missed[] the positions i whose slot was
 * just taken for them and must be filled. Returns how many missed, or
 * -EPROTO if the choice broke a rule.
 */
int decode_slots_layer(struct decode_slots *d, uint32_t layer, const uint32_t *ids, uint32_t k,
		       uint32_t *slots, uint32_t *missed);

#endif /* MOECACHE_DEVCHECK_DECODE_SLOTS_H */
