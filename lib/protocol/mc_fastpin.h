/* SPDX-License-Identifier: MIT */
/*
 * The client's side of the fast-pin protocol (uapi/moecache.h), on a pins
 * region and the pool's map[] array: what libmoecache runs for a handle
 * attached with MOECACHE_ATTACH_FAST_PINS (lib/fastpin.c), and what the
 * tests that speak the protocol without a handle include, so that there is
 * one implementation of it.
 *
 * The region is the client's own: one writer, so a pin is a plain
 * increment; ordering comes from the fence between the pins' stores and the
 * map's second read, which pairs with the driver's fence between
 * unpublishing a slot and reading every region.
 */
#ifndef MOECACHE_LIB_MC_FASTPIN_H
#define MOECACHE_LIB_MC_FASTPIN_H

#include <stdint.h>

#include <moecache.h>

#include "mc_atomic.h"

/* A pin's store; a fence must follow before the map is read again. */
static inline void mc_fast_pin_get(uint32_t *pins, uint32_t slot)
{
	__atomic_fetch_add(&pins[slot], 1, __ATOMIC_RELAXED);
}

/* Drops one pin; the slot's reads before it stay before it. */
static inline void mc_fast_pin_put(uint32_t *pins, uint32_t slot)
{
	__atomic_fetch_sub(&pins[slot], 1, __ATOMIC_RELEASE);
}

/*
 * Pins the resident ones among the entries map[base + experts[i]]: every
 * pin stored, one fence, every entry read again; an entry that changed
 * meanwhile gives its pin back (the driver saw none, so kept nothing for
 * us). Writes slots[i], MOECACHE_NONE for a miss; returns how many it pinned.
 */
static inline uint32_t mc_fast_pin_map(uint32_t *pins, const uint32_t *map, uint32_t n_slots,
				       uint32_t base, const uint32_t *experts, uint32_t count,
				       uint32_t *slots)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < count; i++) {
		slots[i] = mc_load_acquire_u32(&map[base + experts[i]]);
		if (slots[i] < n_slots)
			mc_fast_pin_get(pins, slots[i]);
		else
			slots[i] = MOECACHE_NONE;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < count; i++) {
		if (slots[i] == MOECACHE_NONE)
			continue;
		if (mc_load_acquire_u32(&map[base + experts[i]]) != slots[i]) {
			mc_fast_pin_put(pins, slots[i]);
			slots[i] = MOECACHE_NONE;
			continue;
		}
		n++;
	}
	return n;
}

/* The same for the one entry map[idx]: the slot now pinned for it, or MOECACHE_NONE. */
static inline uint32_t mc_fast_pin_one(uint32_t *pins, const uint32_t *map, uint32_t n_slots,
				       uint32_t idx)
{
	const uint32_t first = 0;
	uint32_t slot;

	mc_fast_pin_map(pins, map, n_slots, idx, &first, 1, &slot);
	return slot;
}

#endif /* MOECACHE_LIB_MC_FASTPIN_H */
