/* SPDX-License-Identifier: MIT */
/*
 * A map region in ordinary memory, laid out as the driver lays it out, and
 * the driver's writes to it: for the simulator (tools/trace/sim.c), which
 * runs the agent's slot choice (slots.h) over it, and for the tests of the
 * map readers and of the slot choice. Writers use the seqcount writer side
 * of lib/protocol/mc_atomic.h; readers are libmoecache's (moecache_map_*).
 */
#ifndef MOECACHE_AGENT_MEMMAP_H
#define MOECACHE_AGENT_MEMMAP_H

#include <stddef.h>
#include <stdint.h>

#include "libmoecache.h"

struct agent_memmap {
	void *region;
	size_t size;
	struct moecache_map_header *hdr;
	uint32_t *map, *owner, *pins, *access;
	uint64_t *last_use;
	struct moecache_map view; /* bound to region */
};

/* Every map entry and owner NONE, counters 0. Returns 0 or -ENOMEM. */
int agent_memmap_init(struct agent_memmap *f, uint32_t n_layers, uint32_t n_experts,
		      uint32_t expert_begin, uint32_t expert_end, uint32_t n_slots);
void agent_memmap_free(struct agent_memmap *f);
/* Publishes (layer, local expert) idx in slot, as COMMIT does. */
void agent_memmap_publish(struct agent_memmap *f, uint32_t idx, uint32_t slot);
/* Marks slot as being filled for idx, as EVICT does (the slot's old expert is unmapped). */
void agent_memmap_filling(struct agent_memmap *f, uint32_t idx, uint32_t slot);
/* Empties slot: its expert is unmapped and the owner is NONE (the expert moved to another bank). */
void agent_memmap_clear(struct agent_memmap *f, uint32_t slot);
/* A pin of slot at pool clock, as ACQUIRE takes on a hit; unpin drops one. */
void agent_memmap_pin(struct agent_memmap *f, uint32_t slot, uint64_t clock);
void agent_memmap_unpin(struct agent_memmap *f, uint32_t slot);

#endif /* MOECACHE_AGENT_MEMMAP_H */
