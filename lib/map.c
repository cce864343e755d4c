// SPDX-License-Identifier: MIT
/* Lock-free reads of the map region. */
#include <errno.h>
#include <string.h>

#include "mc_atomic.h"
#include "mc_internal.h"

/* An array of count entries of size bytes at off lies inside the region and is aligned. */
static bool mc_array_fits(uint64_t off, uint64_t count, uint64_t size, size_t region)
{
	if (off % size || count > (region / size))
		return false;
	return off <= region && count * size <= region - off;
}

/*
 * The bank table of h, if any, must partition the n_slots slots in bank
 * order, each bank one slot or more, tiers non-decreasing: a route built
 * on anything else would send an expert to the wrong device.
 */
static int mc_check_bank_table(const struct moecache_map_header *h, size_t size)
{
	const struct moecache_map_bank *b;
	uint64_t next = 0;

	if (h->n_banks == 0)
		return h->bank_off ? -EPROTO : 0;
	/* Entries hold a __u64: 8-byte aligned, as the other arrays are to their type. */
	if (h->n_banks > h->n_slots || h->bank_off % sizeof(uint64_t) ||
	    !mc_array_fits(h->bank_off, (uint64_t)h->n_banks * sizeof(*b), 1, size))
		return -EPROTO;
	b = (const struct moecache_map_bank *)((const char *)h + h->bank_off);
	for (uint32_t i = 0; i < h->n_banks; i++) {
		if (b[i].slot_begin != next || b[i].n_slots == 0 ||
		    (i && b[i].tier < b[i - 1].tier))
			return -EPROTO;
		next += b[i].n_slots;
	}
	return next == h->n_slots ? 0 : -EPROTO;
}

int moecache_map_bind(struct moecache_map *m, const void *region, size_t size)
{
	const struct moecache_map_header *h = region;
	uint64_t n_idx;
	uint32_t n_local;

	if (!m || !region || size < sizeof(*h))
		return -EINVAL;
	if (h->magic != MOECACHE_MAP_MAGIC || h->expert_begin >= h->expert_end ||
	    h->expert_end > h->n_experts || h->n_layers == 0 || h->n_slots == 0)
		return -EINVAL;
	n_local = h->expert_end - h->expert_begin;
	n_idx = (uint64_t)h->n_layers * n_local;
	if (!mc_array_fits(h->map_off, n_idx, sizeof(uint32_t), size) ||
	    !mc_array_fits(h->owner_off, h->n_slots, sizeof(uint32_t), size) ||
	    !mc_array_fits(h->last_use_off, h->n_slots, sizeof(uint64_t), size) ||
	    !mc_array_fits(h->pins_off, h->n_slots, sizeof(uint32_t), size) ||
	    !mc_array_fits(h->access_off, n_idx, sizeof(uint32_t), size))
		return -EINVAL;
	if (mc_check_bank_table(h, size))
		return -EPROTO;

	m->hdr = h;
	m->map = (const uint32_t *)((const char *)region + h->map_off);
	m->owner = (const uint32_t *)((const char *)region + h->owner_off);
	m->last_use = (const uint64_t *)((const char *)region + h->last_use_off);
	m->pins = (const uint32_t *)((const char *)region + h->pins_off);
	m->access = (const uint32_t *)((const char *)region + h->access_off);
	m->n_layers = h->n_layers;
	m->n_local = n_local;
	m->expert_begin = h->expert_begin;
	m->n_slots = h->n_slots;
	m->banks = h->n_banks
		       ? (const struct moecache_map_bank *)((const char *)region + h->bank_off)
		       : NULL;
	m->n_banks = h->n_banks ? h->n_banks : 1;
	return 0;
}

uint32_t moecache_map_idx(const struct moecache_map *m, uint32_t layer, uint32_t expert)
{
	uint32_t local = expert - m->expert_begin; /* wraps below begin: out of range */

	if (layer >= m->n_layers || local >= m->n_local)
		return MOECACHE_NONE;
	return layer * m->n_local + local;
}

uint32_t moecache_map_slot(const struct moecache_map *m, uint32_t layer, uint32_t expert)
{
	uint32_t idx = moecache_map_idx(m, layer, expert);

	if (idx == MOECACHE_NONE)
		return MOECACHE_NONE;
	return mc_load_acquire_u32(&m->map[idx]);
}

int moecache_map_lookup(const struct moecache_map *m, uint32_t layer, const uint32_t *experts,
			uint32_t count, uint32_t *slots)
{
	const uint32_t *row;
	uint32_t start;
	int resident;

	if (!m || !m->hdr || !experts || !slots || layer >= m->n_layers)
		return -EINVAL;
	/* The hit path: one row of the map, ids checked once, no calls in the loop. */
	row = m->map + (size_t)layer * m->n_local;
	for (uint32_t i = 0; i < count; i++)
		if (experts[i] - m->expert_begin >= m->n_local)
			return -EINVAL;
	do {
		start = mc_seq_read_begin(&m->hdr->seq);
		resident = 0;
		for (uint32_t i = 0; i < count; i++) {
			slots[i] = mc_load_acquire_u32(&row[experts[i] - m->expert_begin]);
			resident += slots[i] != MOECACHE_NONE;
		}
	} while (mc_seq_read_retry(&m->hdr->seq, start));
	return resident;
}

int moecache_map_snapshot(const struct moecache_map *m, uint32_t *owner, uint32_t *map)
{
	uint32_t start, n_idx;

	if (!m || !m->hdr || !owner)
		return -EINVAL;
	n_idx = m->n_layers * m->n_local;
	do {
		start = mc_seq_read_begin(&m->hdr->seq);
		for (uint32_t s = 0; s < m->n_slots; s++)
			owner[s] = mc_load_acquire_u32(&m->owner[s]);
		for (uint32_t i = 0; map && i < n_idx; i++)
			map[i] = mc_load_acquire_u32(&m->map[i]);
	} while (mc_seq_read_retry(&m->hdr->seq, start));
	return 0;
}

uint32_t moecache_map_owner(const struct moecache_map *m, uint32_t slot)
{
	return slot < m->n_slots ? mc_load_acquire_u32(&m->owner[slot]) : MOECACHE_NONE;
}

uint64_t moecache_map_last_use(const struct moecache_map *m, uint32_t slot)
{
	return slot < m->n_slots ? mc_load_acquire_u64(&m->last_use[slot]) : 0;
}

uint32_t moecache_map_pins(const struct moecache_map *m, uint32_t slot)
{
	return slot < m->n_slots ? mc_load_acquire_u32(&m->pins[slot]) : 0;
}

uint32_t moecache_map_access(const struct moecache_map *m, uint32_t idx)
{
	return idx < m->n_layers * m->n_local ? mc_load_acquire_u32(&m->access[idx]) : 0;
}

uint32_t moecache_map_flags(const struct moecache_map *m)
{
	return mc_load_acquire_u32(&m->hdr->flags);
}

uint64_t moecache_map_clock(const struct moecache_map *m)
{
	return mc_load_acquire_u64((const uint64_t *)&m->hdr->clock);
}

uint32_t moecache_map_agent_epoch(const struct moecache_map *m)
{
	return mc_load_acquire_u32(&m->hdr->agent_epoch);
}
