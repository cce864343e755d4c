// SPDX-License-Identifier: MIT
/* The lock-free map readers, against a map region in ordinary memory. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/memmap.h"
#include "mc_atomic.h"
#include "libmoecache.h"

Test(map, basic_bind_reads_geometry, .description = "binding a map region exposes its geometry")
{
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 3, 64, 16, 48, 10), 0);
	cr_assert_eq(f.view.n_layers, 3);
	cr_assert_eq(f.view.n_local, 32);
	cr_assert_eq(f.view.expert_begin, 16);
	cr_assert_eq(f.view.n_slots, 10);
	cr_assert_eq((const void *)f.view.owner, (const void *)f.owner);
	agent_memmap_free(&f);
}

Test(map, bad_input_bind_bad_magic, .description = "a region without the magic is refused")
{
	struct moecache_map m;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 8, 0, 8, 4), 0);
	f.hdr->magic = 0;
	cr_assert_eq(moecache_map_bind(&m, f.region, f.size), -EINVAL);
	agent_memmap_free(&f);
}

Test(map, bad_input_bind_array_outside_region,
     .description = "an array that ends past the region is refused")
{
	struct moecache_map m;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 8, 0, 8, 4), 0);
	cr_assert_eq(moecache_map_bind(&m, f.region, f.size - 4), -EINVAL);
	f.hdr->owner_off = f.size;
	cr_assert_eq(moecache_map_bind(&m, f.region, f.size), -EINVAL);
	agent_memmap_free(&f);
}

Test(map, bad_input_bind_bad_range, .description = "an empty or oversized expert range is refused")
{
	struct moecache_map m;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 8, 0, 8, 4), 0);
	f.hdr->expert_begin = 8;
	cr_assert_eq(moecache_map_bind(&m, f.region, f.size), -EINVAL);
	f.hdr->expert_begin = 0;
	f.hdr->expert_end = 9;
	cr_assert_eq(moecache_map_bind(&m, f.region, f.size), -EINVAL);
	agent_memmap_free(&f);
}

Test(map, basic_idx_uses_local_range,
     .description = "global ids map to local indices, others to NONE")
{
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 64, 16, 32, 4), 0);
	cr_assert_eq(moecache_map_idx(&f.view, 0, 16), 0);
	cr_assert_eq(moecache_map_idx(&f.view, 1, 17), 17);
	cr_assert_eq(moecache_map_idx(&f.view, 0, 15), MOECACHE_NONE);
	cr_assert_eq(moecache_map_idx(&f.view, 0, 32), MOECACHE_NONE);
	cr_assert_eq(moecache_map_idx(&f.view, 2, 16), MOECACHE_NONE);
	agent_memmap_free(&f);
}

Test(map, basic_lookup_returns_published_slots,
     .description = "a batch lookup returns the published slots and counts them")
{
	uint32_t experts[3] = {4, 5, 6}, slots[3];
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 8, 0, 8, 4), 0);
	agent_memmap_publish(&f, 8 + 4, 2);
	agent_memmap_publish(&f, 8 + 6, 0);
	cr_assert_eq(moecache_map_lookup(&f.view, 1, experts, 3, slots), 2);
	cr_assert_eq(slots[0], 2);
	cr_assert_eq(slots[1], MOECACHE_NONE);
	cr_assert_eq(slots[2], 0);
	cr_assert_eq(moecache_map_slot(&f.view, 1, 6), 0);
	cr_assert_eq(moecache_map_slot(&f.view, 0, 6), MOECACHE_NONE);
	agent_memmap_free(&f);
}

Test(map, bad_input_lookup_out_of_range,
     .description = "a lookup of an expert outside the range fails")
{
	uint32_t experts[2] = {1, 9}, slots[2];
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 16, 0, 8, 4), 0);
	cr_assert_eq(moecache_map_lookup(&f.view, 0, experts, 2, slots), -EINVAL);
	cr_assert_eq(moecache_map_lookup(&f.view, 2, experts, 1, slots), -EINVAL);
	agent_memmap_free(&f);
}

Test(map, basic_filling_slot_not_in_map,
     .description = "a slot being filled is in owner[] but not published in map[]")
{
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 4), 0);
	agent_memmap_filling(&f, 3, 1);
	cr_assert_eq(moecache_map_slot(&f.view, 0, 3), MOECACHE_NONE);
	cr_assert_eq(moecache_map_owner(&f.view, 1), MOECACHE_OWNER_FILLING | 3);
	agent_memmap_free(&f);
}

Test(map, basic_snapshot_copies_owner_and_map,
     .description = "a snapshot copies owner[] and map[] as published")
{
	uint32_t owner[4], map[8];
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 4), 0);
	agent_memmap_publish(&f, 7, 3);
	cr_assert_eq(moecache_map_snapshot(&f.view, owner, map), 0);
	cr_assert_eq(owner[3], 7);
	cr_assert_eq(owner[0], MOECACHE_NONE);
	cr_assert_eq(map[7], 3);
	cr_assert_eq(map[0], MOECACHE_NONE);
	agent_memmap_free(&f);
}

/* A writer that keeps map[0] and map[1] equal between seq changes. */
struct pair_writer {
	struct agent_memmap *f;
	int stop;
};

static void *pair_writer_run(void *arg)
{
	struct pair_writer *w = arg;
	uint32_t v = 0;

	while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
		v = (v + 1) % 1000;
		mc_seq_write_begin(&w->f->hdr->seq);
		mc_store_release_u32(&w->f->map[0], v);
		mc_store_release_u32(&w->f->map[1], v);
		mc_seq_write_end(&w->f->hdr->seq);
	}
	return NULL;
}

Test(map, concurrency_lookup_is_consistent_under_writer,
     .description = "batch lookups never see a half-made change of two entries")
{
	uint32_t experts[2] = {0, 1}, slots[2];
	struct pair_writer w = {0};
	struct agent_memmap f;
	pthread_t t;
	int torn = 0;

	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 1000), 0);
	w.f = &f;
	cr_assert_eq(pthread_create(&t, NULL, pair_writer_run, &w), 0);
	for (int i = 0; i < 200000; i++) {
		cr_assert_geq(moecache_map_lookup(&f.view, 0, experts, 2, slots), 0);
		torn += slots[0] != slots[1];
	}
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	cr_assert_eq(torn, 0, "%d lookups saw a torn pair", torn);
	agent_memmap_free(&f);
}

Test(map, basic_counters_read_through_accessors,
     .description = "pins, last_use and access are read from the region")
{
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 4), 0);
	f.pins[2] = 3;
	f.last_use[2] = 77;
	f.access[5] = 9;
	f.hdr->clock = 78;
	cr_assert_eq(moecache_map_pins(&f.view, 2), 3);
	cr_assert_eq(moecache_map_last_use(&f.view, 2), 77);
	cr_assert_eq(moecache_map_access(&f.view, 5), 9);
	cr_assert_eq(moecache_map_clock(&f.view), 78);
	cr_assert_eq(moecache_map_pins(&f.view, 4), 0);
	agent_memmap_free(&f);
}
