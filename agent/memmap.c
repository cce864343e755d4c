// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memmap.h"
#include "mc_atomic.h"

static size_t memmap_align8(size_t v)
{
	return (v + 7) / 8 * 8;
}

int agent_memmap_init(struct agent_memmap *f, uint32_t n_layers, uint32_t n_experts,
		      uint32_t expert_begin, uint32_t expert_end, uint32_t n_slots)
{
	size_t n_idx = (size_t)n_layers * (expert_end - expert_begin);
	size_t off_map = memmap_align8(sizeof(struct moecache_map_header));
	size_t off_owner = memmap_align8(off_map + n_idx * 4);
	size_t off_last = memmap_align8(off_owner + n_slots * 4);
	size_t off_pins = memmap_align8(off_last + n_slots * 8);
	size_t off_access = memmap_align8(off_pins + n_slots * 4);

	memset(f, 0, sizeof(*f));
	f->size = off_access + n_idx * 4;
	f->region = aligned_alloc(64, memmap_align8(f->size) + 64);
	if (!f->region)
		return -ENOMEM;
	memset(f->region, 0, f->size);
	f->hdr = f->region;
	f->hdr->magic = MOECACHE_MAP_MAGIC;
	f->hdr->version = MOECACHE_ABI_VERSION;
	f->hdr->n_layers = n_layers;
	f->hdr->n_experts = n_experts;
	f->hdr->expert_begin = expert_begin;
	f->hdr->expert_end = expert_end;
	f->hdr->n_slots = n_slots;
	f->hdr->map_off = off_map;
	f->hdr->owner_off = off_owner;
	f->hdr->last_use_off = off_last;
	f->hdr->pins_off = off_pins;
	f->hdr->access_off = off_access;
	f->map = (uint32_t *)((char *)f->region + off_map);
	f->owner = (uint32_t *)((char *)f->region + off_owner);
	f->last_use = (uint64_t *)((char *)f->region + off_last);
	f->pins = (uint32_t *)((char *)f->region + off_pins);
	f->access = (uint32_t *)((char *)f->region + off_access);
	memset(f->map, 0xff, n_idx * 4);
	memset(f->owner, 0xff, n_slots * 4);
	return moecache_map_bind(&f->view, f->region, f->size);
}

void agent_memmap_free(struct agent_memmap *f)
{
	free(f->region);
	memset(f, 0, sizeof(*f));
}

void agent_memmap_publish(struct agent_memmap *f, uint32_t idx, uint32_t slot)
{
	mc_seq_write_begin(&f->hdr->seq);
	mc_store_release_u32(&f->owner[slot], idx);
	mc_store_release_u32(&f->map[idx], slot);
	mc_seq_write_end(&f->hdr->seq);
}

void agent_memmap_filling(struct agent_memmap *f, uint32_t idx, uint32_t slot)
{
	uint32_t old = f->owner[slot];

	mc_seq_write_begin(&f->hdr->seq);
	if (old != MOECACHE_NONE && !(old & MOECACHE_OWNER_FILLING) && f->map[old] == slot)
		mc_store_release_u32(&f->map[old], MOECACHE_NONE);
	mc_store_release_u32(&f->owner[slot], MOECACHE_OWNER_FILLING | idx);
	mc_seq_write_end(&f->hdr->seq);
}

void agent_memmap_clear(struct agent_memmap *f, uint32_t slot)
{
	uint32_t old = f->owner[slot];

	mc_seq_write_begin(&f->hdr->seq);
	if (old != MOECACHE_NONE && !(old & MOECACHE_OWNER_FILLING) && f->map[old] == slot)
		mc_store_release_u32(&f->map[old], MOECACHE_NONE);
	mc_store_release_u32(&f->owner[slot], MOECACHE_NONE);
	mc_seq_write_end(&f->hdr->seq);
}

void agent_memmap_pin(struct agent_memmap *f, uint32_t slot, uint64_t clock)
{
	f->pins[slot]++;
	f->last_use[slot] = clock;
	f->hdr->clock = clock;
}

void agent_memmap_unpin(struct agent_memmap *f, uint32_t slot)
{
	if (f->pins[slot])
		f->pins[slot]--;
}
