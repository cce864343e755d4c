// SPDX-License-Identifier: MIT
/*
 * Banks of a pool and routes, over map regions in ordinary memory with a
 * bank table after the driver's arrays (as the driver lays it out).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/memmap.h"
#include "lib/mc_internal.h"
#include "libmoecache.h"

/* A map region with a bank table of n_banks entries (n_slots[i], tier[i]). */
struct banked_map {
	struct agent_memmap f; /* the arrays; its region is copied into region */
	void *region;
	size_t size;
	struct moecache_map_header *hdr;
	struct moecache_map_bank *banks;
	struct moecache_map view;
};

static void banked_map_init(struct banked_map *bm, uint32_t n_layers, uint32_t n_local,
			    uint32_t n_banks, const uint32_t *n_slots, const uint32_t *tier)
{
	uint32_t total = 0;
	size_t off;

	for (uint32_t i = 0; i < n_banks; i++)
		total += n_slots[i];
	cr_assert_eq(agent_memmap_init(&bm->f, n_layers, n_local, 0, n_local, total), 0);
	off = (bm->f.size + 7) / 8 * 8;
	bm->size = off + n_banks * sizeof(struct moecache_map_bank);
	bm->region = aligned_alloc(64, (bm->size + 63) / 64 * 64);
	cr_assert_not_null(bm->region);
	memset(bm->region, 0, bm->size);
	memcpy(bm->region, bm->f.region, bm->f.size);
	bm->hdr = bm->region;
	bm->hdr->bank_off = off;
	bm->hdr->n_banks = n_banks;
	bm->banks = (struct moecache_map_bank *)((char *)bm->region + off);
	for (uint32_t i = 0, begin = 0; i < n_banks; i++) {
		bm->banks[i] = (struct moecache_map_bank){.slot_begin = begin,
							  .n_slots = n_slots[i],
							  .tier = tier[i],
							  .backend = MOECACHE_BACKEND_CPU,
							  .device = i};
		begin += n_slots[i];
	}
}

static int banked_map_bind(struct banked_map *bm)
{
	return moecache_map_bind(&bm->view, bm->region, bm->size);
}

static void banked_map_free(struct banked_map *bm)
{
	free(bm->region);
	agent_memmap_free(&bm->f);
}

/* Three banks: slots 0-1 tier 0, 2-4 tier 1, 5-9 tier 1. */
static const uint32_t three_slots[3] = {2, 3, 5}, three_tiers[3] = {0, 1, 1};

Test(route, basic_map_without_bank_table_is_one_bank,
     .description = "a map without a bank table reads as one tier-0 bank of every slot")
{
	struct moecache_map_bank b;
	struct agent_memmap f;

	cr_assert_eq(agent_memmap_init(&f, 2, 8, 0, 8, 6), 0);
	cr_assert_eq(moecache_map_n_banks(&f.view), 1);
	cr_assert_eq(moecache_map_bank(&f.view, 0, &b), 0);
	cr_assert_eq(b.slot_begin, 0);
	cr_assert_eq(b.n_slots, 6);
	cr_assert_eq(b.tier, 0);
	for (uint32_t s = 0; s < 6; s++)
		cr_assert_eq(moecache_map_slot_bank(&f.view, s), 0);
	cr_assert_eq(moecache_map_slot_bank(&f.view, 6), MOECACHE_NONE);
	agent_memmap_free(&f);
}

Test(route, basic_bank_table_read, .description = "the bank table's layout reads back per bank")
{
	struct moecache_map_bank b;
	struct banked_map bm;

	banked_map_init(&bm, 2, 8, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	cr_assert_eq(moecache_map_n_banks(&bm.view), 3);
	cr_assert_eq(moecache_map_bank(&bm.view, 2, &b), 0);
	cr_assert_eq(b.slot_begin, 5);
	cr_assert_eq(b.n_slots, 5);
	cr_assert_eq(b.tier, 1);
	cr_assert_eq(b.backend, MOECACHE_BACKEND_CPU);
	cr_assert_eq(b.device, 2);
	bm.banks[1].flags = MOECACHE_MAP_BANK_SET;
	cr_assert_eq(moecache_map_bank(&bm.view, 1, &b), 0);
	cr_assert_eq(b.flags, MOECACHE_MAP_BANK_SET, "the agent's part is read live");
	banked_map_free(&bm);
}

Test(route, basic_slot_bank_per_range,
     .description = "every slot belongs to the bank whose range holds it")
{
	static const uint32_t want[10] = {0, 0, 1, 1, 1, 2, 2, 2, 2, 2};
	struct banked_map bm;

	banked_map_init(&bm, 1, 4, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	for (uint32_t s = 0; s < 10; s++)
		cr_assert_eq(moecache_map_slot_bank(&bm.view, s), want[s], "slot %u", s);
	cr_assert_eq(moecache_map_slot_bank(&bm.view, 10), MOECACHE_NONE);
	cr_assert_eq(moecache_map_slot_bank(&bm.view, MOECACHE_NONE), MOECACHE_NONE);
	banked_map_free(&bm);
}

Test(route, basic_route_groups_by_bank,
     .description = "a route groups experts by bank in acquire order, with local slots, cold last")
{
	/* experts 10..15 at slots: bank 2, cold, bank 0, bank 2, bank 1, cold */
	static const uint32_t experts[6] = {10, 11, 12, 13, 14, 15};
	static const uint32_t slots[6] = {7, MOECACHE_NONE, 1, 5, 3, MOECACHE_NONE};
	const struct moecache_route_entry *e;
	struct moecache_route *r;
	struct banked_map bm;
	uint32_t n;

	banked_map_init(&bm, 1, 16, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	cr_assert_eq(moecache_route_new(&bm.view, 8, &r), 0);
	cr_assert_eq(moecache_route_build(&bm.view, experts, slots, 6, r), 0);
	cr_assert_eq(r->count, 6);
	e = moecache_route_group(r, 0, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(e[0].expert, 12);
	cr_assert_eq(e[0].pos, 2);
	cr_assert_eq(e[0].local, 1);
	cr_assert_eq(e[0].bank, 0);
	e = moecache_route_group(r, 1, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(e[0].expert, 14);
	cr_assert_eq(e[0].slot, 3);
	cr_assert_eq(e[0].local, 1);
	e = moecache_route_group(r, 2, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(e[0].expert, 10, "acquire order kept");
	cr_assert_eq(e[0].local, 2);
	cr_assert_eq(e[1].expert, 13);
	cr_assert_eq(e[1].local, 0);
	cr_assert_eq(e[1].bank, 2);
	e = moecache_route_group(r, 3, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(e[0].expert, 11);
	cr_assert_eq(e[0].bank, MOECACHE_NONE);
	cr_assert_eq(e[0].local, MOECACHE_NONE);
	cr_assert_eq(e[1].expert, 15);
	cr_assert_eq(e[1].pos, 5);
	cr_assert_null(moecache_route_group(r, 4, &n));
	cr_assert_eq(n, 0);
	moecache_route_free(r);
	banked_map_free(&bm);
}

Test(route, basic_route_one_bank_is_identity,
     .description = "on a map without a bank table every resident expert routes to bank 0 as is")
{
	static const uint32_t experts[3] = {1, 2, 3}, slots[3] = {4, MOECACHE_NONE, 0};
	const struct moecache_route_entry *e;
	struct moecache_route *r;
	struct agent_memmap f;
	uint32_t n;

	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 6), 0);
	cr_assert_eq(moecache_route_new(&f.view, 3, &r), 0);
	cr_assert_eq(moecache_route_build(&f.view, experts, slots, 3, r), 0);
	e = moecache_route_group(r, 0, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(e[0].slot, 4);
	cr_assert_eq(e[0].local, 4);
	cr_assert_eq(e[1].slot, 0);
	moecache_route_group(r, 1, &n);
	cr_assert_eq(n, 1);
	moecache_route_free(r);
	agent_memmap_free(&f);
}

Test(route, basic_route_rebuild_forgets_last, .description = "building again replaces the route")
{
	static const uint32_t experts[2] = {1, 2}, a[2] = {0, 9}, b[1] = {MOECACHE_NONE};
	struct moecache_route *r;
	struct banked_map bm;
	uint32_t n;

	banked_map_init(&bm, 1, 8, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	cr_assert_eq(moecache_route_new(&bm.view, 2, &r), 0);
	cr_assert_eq(moecache_route_build(&bm.view, experts, a, 2, r), 0);
	cr_assert_eq(moecache_route_build(&bm.view, experts, b, 1, r), 0);
	for (uint32_t g = 0; g < 3; g++) {
		moecache_route_group(r, g, &n);
		cr_assert_eq(n, 0, "bank %u", g);
	}
	moecache_route_group(r, 3, &n);
	cr_assert_eq(n, 1);
	moecache_route_free(r);
	banked_map_free(&bm);
}

/* A bank table made inconsistent one way. */
struct bad_table {
	const char *what;
	void (*spoil)(struct banked_map *bm);
};

static void spoil_gap(struct banked_map *bm)
{
	bm->banks[1].slot_begin = 3;
	bm->banks[1].n_slots = 2;
}
static void spoil_overlap(struct banked_map *bm)
{
	bm->banks[2].slot_begin = 4;
	bm->banks[2].n_slots = 6;
}
static void spoil_empty_bank(struct banked_map *bm)
{
	bm->banks[0].n_slots = 0;
	bm->banks[1].slot_begin = 0;
	bm->banks[1].n_slots = 5;
}
static void spoil_short(struct banked_map *bm)
{
	bm->banks[2].n_slots = 4;
}
static void spoil_long(struct banked_map *bm)
{
	bm->banks[2].n_slots = 6;
}
static void spoil_wrapping(struct banked_map *bm)
{
	bm->banks[2].n_slots = UINT32_MAX - 4;
}
static void spoil_tier_order(struct banked_map *bm)
{
	bm->banks[0].tier = 2;
}
static void spoil_misaligned(struct banked_map *bm)
{
	bm->hdr->bank_off += 4;
}
static void spoil_outside(struct banked_map *bm)
{
	bm->hdr->bank_off = bm->size;
}
static void spoil_count(struct banked_map *bm)
{
	bm->hdr->n_banks = 4;
}
static void spoil_more_banks_than_slots(struct banked_map *bm)
{
	bm->hdr->n_banks = 11;
}
static void spoil_off_without_banks(struct banked_map *bm)
{
	bm->hdr->n_banks = 0;
}

static const struct bad_table bad_tables[] = {
    {"a gap between banks", spoil_gap},
    {"overlapping banks", spoil_overlap},
    {"a bank of no slots", spoil_empty_bank},
    {"banks short of n_slots", spoil_short},
    {"banks past n_slots", spoil_long},
    {"a slot count that wraps", spoil_wrapping},
    {"a faster tier after a slower one", spoil_tier_order},
    {"a misaligned table", spoil_misaligned},
    {"a table outside the region", spoil_outside},
    {"more banks than the table holds", spoil_count},
    {"more banks than slots", spoil_more_banks_than_slots},
    {"a table offset with no banks", spoil_off_without_banks},
};

#define N_BAD_TABLES (sizeof(bad_tables) / sizeof(bad_tables[0]))

/* The rows by index: the parameters are copied into each test's process. */
ParameterizedTestParameters(route, bad_input_inconsistent_bank_table)
{
	static size_t rows[N_BAD_TABLES];

	for (size_t i = 0; i < N_BAD_TABLES; i++)
		rows[i] = i;
	return cr_make_param_array(size_t, rows, N_BAD_TABLES);
}

ParameterizedTest(size_t *row, route, bad_input_inconsistent_bank_table,
		  .description = "each inconsistent bank table in bad_tables makes the map EPROTO")
{
	const struct bad_table *t = &bad_tables[*row];
	struct banked_map bm;

	banked_map_init(&bm, 2, 8, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0, "the table is good before: %s", t->what);
	t->spoil(&bm);
	cr_assert_eq(banked_map_bind(&bm), -EPROTO, "%s", t->what);
	banked_map_free(&bm);
}

Test(route, bad_input_bank_index_out_of_range,
     .description = "asking for a bank past the last is EINVAL")
{
	struct moecache_map_bank b;
	struct banked_map bm;

	banked_map_init(&bm, 1, 8, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	cr_assert_eq(moecache_map_bank(&bm.view, 3, &b), -EINVAL);
	cr_assert_eq(moecache_map_bank(&bm.view, MOECACHE_NONE, &b), -EINVAL);
	banked_map_free(&bm);
}

Test(route, bad_input_route_arguments,
     .description = "a slot out of range, too many experts or another map's route are refused")
{
	static const uint32_t experts[3] = {1, 2, 3};
	uint32_t slots[3] = {0, 10, MOECACHE_NONE};
	struct moecache_route *r, *r1;
	struct agent_memmap f;
	struct banked_map bm;

	banked_map_init(&bm, 1, 8, 3, three_slots, three_tiers);
	cr_assert_eq(banked_map_bind(&bm), 0);
	cr_assert_eq(moecache_route_new(&bm.view, 2, &r), 0);
	cr_assert_eq(moecache_route_build(&bm.view, experts, slots, 2, r), -EINVAL);
	slots[1] = 9;
	cr_assert_eq(moecache_route_build(&bm.view, experts, slots, 3, r), -E2BIG);
	cr_assert_eq(moecache_route_build(&bm.view, experts, slots, 2, r), 0);
	cr_assert_eq(agent_memmap_init(&f, 1, 8, 0, 8, 10), 0);
	cr_assert_eq(moecache_route_new(&f.view, 2, &r1), 0);
	cr_assert_eq(moecache_route_build(&bm.view, experts, slots, 2, r1), -EINVAL);
	moecache_route_free(r1);
	cr_assert_eq(moecache_route_new(&bm.view, 0, &r1), -EINVAL);
	cr_assert_null(r1, "a failed route_new leaves no route");
	moecache_route_free(r);
	agent_memmap_free(&f);
	banked_map_free(&bm);
}

Test(route, bad_input_acquire_route_unattached,
     .description = "acquire_route on an unattached handle is ENOTCONN")
{
	struct moecache mc = {.fd = -1};
	struct moecache_route r = {0};
	uint32_t e = 0, s;

	cr_assert_eq(moecache_acquire_route(&mc, NULL, 0, 0, &e, 1, &s, 0, 0, NULL, &r), -ENOTCONN);
}

Test(route, basic_bank_slot_takes_global_slots,
     .description = "a bank's slot address is found from the global slot, other banks' are NULL")
{
	const struct mc_bank_backend *be = mc_bank_backend_find(MOECACHE_BACKEND_CPU);
	long page = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("test-bank", MFD_CLOEXEC);
	struct moecache_bank_map b;
	unsigned char c = 7;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 3 * page), 0);
	cr_assert_eq(pwrite(fd, &c, 1, page), 1);
	b = (struct moecache_bank_map){.backend = MOECACHE_BACKEND_CPU,
				       .n_slots = 3,
				       .fd = fd,
				       .bytes = 3 * page,
				       .slot_stride = page,
				       .expert_bytes = page,
				       .slot_begin = 4};
	cr_assert_eq(be->import(&b), 0);
	cr_assert_eq(*(const unsigned char *)moecache_bank_slot(&b, 5), 7);
	cr_assert_eq(moecache_bank_slot(&b, 4), b.base);
	cr_assert_null(moecache_bank_slot(&b, 3));
	cr_assert_null(moecache_bank_slot(&b, 7));
	moecache_bank_unimport(&b);
}

Test(route, bad_input_bank_imports_unattached,
     .description = "importing a bank by index, or all, on an unattached handle is ENOTCONN")
{
	struct moecache mc = {.fd = -1};
	struct moecache_bank_map b[2];

	cr_assert_eq(moecache_bank_import_index(&mc, 1, &b[0]), -ENOTCONN);
	cr_assert_eq(b[0].fd, -1);
	cr_assert_eq(moecache_bank_import_all(&mc, b, 2), -ENOTCONN);
	cr_assert_eq(moecache_map_n_banks(NULL), 0);
	cr_assert_eq(moecache_map_slot_bank(NULL, 0), MOECACHE_NONE);
}
