// SPDX-License-Identifier: MIT
/*
 * libmoecache's fast pins without the module: a handle whose pins region is
 * ordinary memory and whose fd is -1, so hits are served from the fake map
 * and anything that needs the driver (a miss, a report) gets -EBADF.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/memmap.h"
#include "lib/mc_internal.h"
#include "libmoecache.h"

#define N_SLOTS 6

static struct agent_memmap fm;
static struct moecache mc;
static uint32_t region[N_SLOTS];

/* Pool: 4 layers, experts [8, 24) of 32, 6 slots; layer 1's 8 in slot 2, 9 in slot 5, layer 2's 8
 * in slot 3. */
static void fast_setup(void)
{
	cr_assert_eq(agent_memmap_init(&fm, 4, 32, 8, 24, N_SLOTS), 0);
	memset(&mc, 0, sizeof(mc));
	memset(region, 0, sizeof(region));
	mc.fd = -1;
	mc.max_batch = 16;
	mc.attached = true;
	mc.pool.role = MOECACHE_ROLE_CLIENT;
	mc.pool.n_layers = 4;
	mc.pool.n_experts = 32;
	mc.pool.expert_begin = 8;
	mc.pool.expert_end = 24;
	mc.pool.n_local = 16;
	mc.pool.n_slots = N_SLOTS;
	mc.pool.expert_bytes = 4096;
	mc.map = fm.view;
	mc.fast_pins = region;
	mc.report = calloc(MC_REPORT_BATCH, sizeof(*mc.report));
	cr_assert_not_null(mc.report);
	pthread_mutex_init(&mc.fast_lock, NULL);
	agent_memmap_publish(&fm, 1 * 16 + 0, 2);
	agent_memmap_publish(&fm, 1 * 16 + 1, 5);
	agent_memmap_publish(&fm, 2 * 16 + 0, 3);
}

static void fast_teardown(void)
{
	pthread_mutex_destroy(&mc.fast_lock);
	free(mc.report);
	agent_memmap_free(&fm);
}

TestSuite(fastpin, .init = fast_setup, .fini = fast_teardown);

Test(fastpin, basic_hits_pin_without_driver,
     .description = "resident experts are pinned in the region, with no system call")
{
	uint32_t experts[2] = {8, 9}, slots[2];
	struct moecache_acquire_result res;

	cr_assert_eq(moecache_acquire(&mc, 1, experts, 2, slots, MOECACHE_ACQ_WAIT, 0, &res), 0);
	cr_expect_eq(slots[0], 2);
	cr_expect_eq(slots[1], 5);
	cr_expect_eq(region[2], 1);
	cr_expect_eq(region[5], 1);
	cr_expect_eq(res.n_hits, 2);
	cr_expect_eq(res.n_pinned, 2);
}

Test(fastpin, basic_hits_queued_for_report,
     .description = "each fast hit leaves one report entry naming its layer and expert")
{
	uint32_t experts[2] = {9, 8}, slots[2];

	cr_assert_eq(moecache_acquire(&mc, 1, experts, 2, slots, 0, 0, NULL), 0);
	cr_assert_eq(mc.report_len, 2);
	cr_expect_eq(mc.report[0].layer, 1);
	cr_expect_eq(mc.report[0].expert, 9);
	cr_expect_eq(mc.report[1].expert, 8);
}

Test(fastpin, basic_acquire_release_moves_pins,
     .description = "acquire_release drops the listed fast pins and takes the new ones")
{
	uint32_t a[1] = {8}, b[1] = {9}, sa[1], sb[1];

	cr_assert_eq(moecache_acquire(&mc, 1, a, 1, sa, 0, 0, NULL), 0);
	cr_assert_eq(moecache_acquire_release(&mc, sa, 1, 1, b, 1, sb, 0, 0, NULL), 0);
	cr_expect_eq(region[2], 0);
	cr_expect_eq(region[5], 1);
}

Test(fastpin, bad_input_release_not_held,
     .description = "releasing a slot the handle does not hold is -EINVAL and drops nothing")
{
	uint32_t a[1] = {8}, sa[1], rel[2];

	cr_assert_eq(moecache_acquire(&mc, 1, a, 1, sa, 0, 0, NULL), 0);
	rel[0] = 2;
	rel[1] = 5;
	cr_expect_eq(moecache_release(&mc, rel, 2), -EINVAL);
	cr_expect_eq(region[2], 1);
	cr_expect_eq(region[5], 0);
}

Test(fastpin, bad_input_release_listed_twice,
     .description = "a slot listed more often than it is pinned is -EINVAL, nothing dropped")
{
	uint32_t a[1] = {8}, sa[1], rel[2] = {2, 2};

	cr_assert_eq(moecache_acquire(&mc, 1, a, 1, sa, 0, 0, NULL), 0);
	cr_expect_eq(moecache_release(&mc, rel, 2), -EINVAL);
	cr_expect_eq(region[2], 1);
}

Test(fastpin, bad_input_acquire_release_bad_release_pins_nothing,
     .description = "acquire_release with a release not held fails before pinning")
{
	uint32_t b[1] = {9}, sb[1], rel[1] = {2};

	cr_expect_eq(moecache_acquire_release(&mc, rel, 1, 1, b, 1, sb, 0, 0, NULL), -EINVAL);
	cr_expect_eq(region[5], 0);
}

Test(fastpin, basic_miss_failure_pins_nothing,
     .description = "when the miss's ioctl fails, the hits taken with it are put back")
{
	/* 10 is not resident: its acquire reaches the driver, here -EBADF. */
	uint32_t experts[2] = {8, 10}, slots[2];

	cr_expect_eq(moecache_acquire(&mc, 1, experts, 2, slots, MOECACHE_ACQ_WAIT, 0, NULL),
		     -EBADF);
	cr_expect_eq(region[2], 0);
	cr_expect_eq(slots[0], MOECACHE_NONE);
	cr_expect_eq(slots[1], MOECACHE_NONE);
	cr_expect_eq(mc.report_len, 0);
}

Test(fastpin, basic_filling_slot_is_a_miss,
     .description = "a slot being filled is not resident: no fast pin is taken on it")
{
	uint32_t experts[1] = {12}, slots[1];

	agent_memmap_filling(&fm, 1 * 16 + 4, 3);
	cr_expect_eq(moecache_acquire(&mc, 1, experts, 1, slots, 0, 0, NULL), -EBADF);
	cr_expect_eq(region[3], 0);
}

Test(fastpin, basic_release_all_clears_region,
     .description = "release_all drops every fast pin (then asks the driver, here -EBADF)")
{
	uint32_t experts[2] = {8, 9}, slots[2];

	cr_assert_eq(moecache_acquire(&mc, 1, experts, 2, slots, 0, 0, NULL), 0);
	cr_expect_eq(moecache_release_all(&mc), -EBADF);
	cr_expect_eq(region[2], 0);
	cr_expect_eq(region[5], 0);
}

Test(fastpin, basic_full_report_is_sent,
     .description = "the report buffer is sent when full: the entries go whatever the driver "
		    "says")
{
	uint32_t experts[1] = {8}, slots[1];

	/* Layers 1 and 2 in turn, as tokens run through a model. */
	for (unsigned int i = 0; i < MC_REPORT_BATCH; i++) {
		cr_assert_eq(moecache_acquire(&mc, 1 + i % 2, experts, 1, slots, 0, 0, NULL), 0);
		cr_assert_eq(moecache_release(&mc, slots, 1), 0);
	}
	cr_expect_eq(mc.report_len, MC_REPORT_BATCH);
	cr_assert_eq(moecache_acquire(&mc, 1, experts, 1, slots, 0, 0, NULL), 0);
	cr_expect_eq(mc.report_len, 1);
	cr_expect_eq(moecache_report_flush(&mc), -EBADF);
	cr_expect_eq(mc.report_len, 0);
	cr_expect_eq(moecache_report_flush(&mc), 0, "an empty buffer sends nothing");
}

Test(fastpin, basic_same_layer_again_starts_new_report,
     .description = "a call of the layer the last report entry names sends the batch first, so "
		    "the driver counts two visits")
{
	uint32_t experts[1] = {8}, slots[1];

	cr_assert_eq(moecache_acquire(&mc, 1, experts, 1, slots, 0, 0, NULL), 0);
	cr_assert_eq(moecache_acquire(&mc, 2, experts, 1, slots, 0, 0, NULL), 0);
	cr_expect_eq(mc.report_len, 2);
	cr_assert_eq(moecache_acquire(&mc, 2, experts, 1, slots, 0, 0, NULL), 0);
	cr_expect_eq(mc.report_len, 1);
	cr_expect_eq(mc.report[0].layer, 2);
}

Test(fastpin, basic_miss_takes_whole_layer_to_driver,
     .description = "a layer with a miss pins nothing itself: its hits go to ACQUIRE with the "
		    "miss, counted in one step")
{
	uint32_t experts[2] = {8, 10}, slots[2];

	cr_expect_eq(moecache_acquire(&mc, 1, experts, 2, slots, 0, 0, NULL), -EBADF);
	cr_expect_eq(region[2], 0);
	cr_expect_eq(mc.report_len, 0, "the hit is not queued for a report");
}
