/* SPDX-License-Identifier: MIT */
/*
 * A map region in ordinary memory, laid out as the driver lays it out, for
 * tests that exercise the map readers and the agent's slot logic without
 * the module. Writers use the seqcount writer side of lib/mc_atomic.h.
 */
#ifndef MOECACHE_TESTS_FAKE_MAP_H
#define MOECACHE_TESTS_FAKE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "libmoecache.h"

struct fake_map {
	void *region;
	size_t size;
	struct moecache_map_header *hdr;
	uint32_t *map, *owner, *pins, *access;
	uint64_t *last_use;
	struct moecache_map view; /* bound to region */
};

/* Every map entry and owner NONE, counters 0. Returns 0 or -ENOMEM. */
int fake_map_init(struct fake_map *f, uint32_t n_layers, uint32_t n_experts, uint32_t expert_begin,
		  uint32_t expert_end, uint32_t n_slots);
void fake_map_free(struct fake_map *f);
/* Publishes (layer, local expert) in slot, as COMMIT does. */
void fake_map_publish(struct fake_map *f, uint32_t idx, uint32_t slot);
/* Marks slot as being filled for idx, as EVICT does. */
void fake_map_filling(struct fake_map *f, uint32_t idx, uint32_t slot);

#endif /* MOECACHE_TESTS_FAKE_MAP_H */
