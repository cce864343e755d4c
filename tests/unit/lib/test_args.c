// SPDX-License-Identifier: MIT
/*
 * Argument validation of libmoecache, without the module: a handle that
 * looks attached (geometry and a fake map region) but whose fd is -1, so
 * that a call that passes validation reaches ioctl() and gets -EBADF.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/memmap.h"
#include "lib/mc_internal.h"
#include "libmoecache.h"

static struct agent_memmap fm;
static struct moecache mc;

/* Pool: 4 layers, experts [8, 24) of 32, 6 slots, max_batch 16. */
static void handle_setup(uint32_t role)
{
	cr_assert_eq(agent_memmap_init(&fm, 4, 32, 8, 24, 6), 0);
	memset(&mc, 0, sizeof(mc));
	mc.fd = -1;
	mc.max_batch = 16;
	mc.attached = true;
	mc.pool.role = role;
	mc.pool.n_layers = 4;
	mc.pool.n_experts = 32;
	mc.pool.expert_begin = 8;
	mc.pool.expert_end = 24;
	mc.pool.n_local = 16;
	mc.pool.n_slots = 6;
	mc.pool.expert_bytes = 4096;
	mc.map = fm.view;
}

static void client_setup(void)
{
	handle_setup(MOECACHE_ROLE_CLIENT);
}

static void agent_setup(void)
{
	handle_setup(MOECACHE_ROLE_AGENT);
}

static void handle_teardown(void)
{
	agent_memmap_free(&fm);
}

TestSuite(client, .init = client_setup, .fini = handle_teardown);
TestSuite(agent, .init = agent_setup, .fini = handle_teardown);

Test(client, basic_valid_acquire_reaches_driver,
     .description = "a valid acquire passes validation and reaches ioctl")
{
	uint32_t experts[2] = {8, 23}, slots[2];

	cr_assert_eq(moecache_acquire(&mc, 3, experts, 2, slots, MOECACHE_ACQ_WAIT, 0, NULL),
		     -EBADF);
}

Test(client, bad_input_acquire_unattached, .description = "an unattached handle gets ENOTCONN")
{
	uint32_t e = 8, s;

	mc.attached = false;
	cr_assert_eq(moecache_acquire(&mc, 0, &e, 1, &s, 0, 0, NULL), -ENOTCONN);
}

Test(agent, bad_input_acquire_by_agent, .description = "acquire on an agent handle is EPERM")
{
	uint32_t e = 8, s;

	cr_assert_eq(moecache_acquire(&mc, 0, &e, 1, &s, 0, 0, NULL), -EPERM);
}

Test(client, bad_input_acquire_count_zero, .description = "an empty list is EINVAL")
{
	uint32_t e = 8, s;

	cr_assert_eq(moecache_acquire(&mc, 0, &e, 0, &s, 0, 0, NULL), -EINVAL);
}

Test(client, bad_input_acquire_over_max_batch, .description = "a list over max_batch is E2BIG")
{
	uint32_t e[17], s[17];

	for (uint32_t i = 0; i < 17; i++)
		e[i] = 8 + (i % 16);
	cr_assert_eq(moecache_acquire(&mc, 0, e, 17, s, 0, 0, NULL), -E2BIG);
}

Test(client, bad_input_acquire_layer_out_of_range, .description = "a layer past the pool is EINVAL")
{
	uint32_t e = 8, s;

	cr_assert_eq(moecache_acquire(&mc, 4, &e, 1, &s, 0, 0, NULL), -EINVAL);
}

Test(client, bad_input_acquire_expert_outside_range,
     .description = "an expert outside the local range is EINVAL on both ends")
{
	uint32_t lo = 7, hi = 24, s;

	cr_assert_eq(moecache_acquire(&mc, 0, &lo, 1, &s, 0, 0, NULL), -EINVAL);
	cr_assert_eq(moecache_acquire(&mc, 0, &hi, 1, &s, 0, 0, NULL), -EINVAL);
}

Test(client, bad_input_acquire_repeated_expert, .description = "a repeated expert is EINVAL")
{
	uint32_t e[3] = {9, 12, 9}, s[3];

	cr_assert_eq(moecache_acquire(&mc, 0, e, 3, s, 0, 0, NULL), -EINVAL);
}

Test(client, bad_input_acquire_flag_combinations,
     .description = "unknown flags, KEEP_WAITING without WAIT, NO_QUEUE or CPU with WAIT are EINVAL")
{
	uint32_t e = 8, s;

	cr_assert_eq(moecache_acquire(&mc, 0, &e, 1, &s, 1u << 7, 0, NULL), -EINVAL);
	cr_assert_eq(moecache_acquire(&mc, 0, &e, 1, &s, MOECACHE_ACQ_KEEP_WAITING, 0, NULL),
		     -EINVAL);
	cr_assert_eq(
	    moecache_acquire(&mc, 0, &e, 1, &s, MOECACHE_ACQ_NO_QUEUE | MOECACHE_ACQ_WAIT, 0, NULL),
	    -EINVAL);
	cr_assert_eq(
	    moecache_acquire(&mc, 0, &e, 1, &s, MOECACHE_ACQ_CPU | MOECACHE_ACQ_WAIT, 0, NULL),
	    -EINVAL);
}

Test(client, bad_input_acquire_null_lists, .description = "NULL expert or slot lists are EINVAL")
{
	uint32_t e = 8, s;

	cr_assert_eq(moecache_acquire(&mc, 0, NULL, 1, &s, 0, 0, NULL), -EINVAL);
	cr_assert_eq(moecache_acquire(&mc, 0, &e, 1, NULL, 0, 0, NULL), -EINVAL);
}

Test(client, basic_release_skips_none,
     .description = "releasing only NONE entries is a no-op that needs no system call")
{
	uint32_t s[2] = {MOECACHE_NONE, MOECACHE_NONE};

	cr_assert_eq(moecache_release(&mc, s, 2), 0);
}

Test(client, basic_release_reaches_driver, .description = "a valid release reaches ioctl")
{
	uint32_t s[2] = {MOECACHE_NONE, 5};

	cr_assert_eq(moecache_release(&mc, s, 2), -EBADF);
}

Test(client, bad_input_release_slot_out_of_range, .description = "a slot past the bank is EINVAL")
{
	uint32_t s = 6;

	cr_assert_eq(moecache_release(&mc, &s, 1), -EINVAL);
}

Test(client, bad_input_acquire_release_bad_release_list,
     .description = "acquire_release refuses a bad release list before any system call")
{
	uint32_t e = 8, s, rel = 6;

	cr_assert_eq(moecache_acquire_release(&mc, &rel, 1, 0, &e, 1, &s, 0, 0, NULL), -EINVAL);
	cr_assert_eq(moecache_acquire_release(&mc, NULL, 1, 0, &e, 1, &s, 0, 0, NULL), -EINVAL);
}

Test(client, bad_input_prefetch_repeated_expert, .description = "prefetch validates like acquire")
{
	uint32_t e[2] = {10, 10};

	cr_assert_eq(moecache_prefetch(&mc, 0, e, 2, NULL), -EINVAL);
	cr_assert_eq(moecache_prefetch(&mc, 0, e, 1, NULL), -EBADF);
}

Test(client, bad_input_agent_calls_by_client, .description = "agent calls on a client are EPERM")
{
	struct moecache_fill f = {.slot = 0, .layer = 0, .expert = 8};
	struct moecache_request r;

	cr_assert_eq(moecache_evict(&mc, 0, 0, 8, NULL, NULL), -EPERM);
	cr_assert_eq(moecache_commit(&mc, &f, 1), -EPERM);
	cr_assert_eq(moecache_read_requests(&mc, &r, 1), -EPERM);
	cr_assert_eq(moecache_load(&mc, MOECACHE_LOAD_DONE), -EPERM);
}

Test(client, bad_input_host_map_writable_by_client,
     .description = "a client cannot map the host pages writable")
{
	cr_assert_eq(moecache_host_map(&mc, true, NULL, NULL), -EPERM);
}

Test(agent, bad_input_evict_half_none,
     .description = "evict with only one of layer/expert NONE is EINVAL")
{
	cr_assert_eq(moecache_evict(&mc, 0, MOECACHE_NONE, 8, NULL, NULL), -EINVAL);
	cr_assert_eq(moecache_evict(&mc, 0, 0, MOECACHE_NONE, NULL, NULL), -EINVAL);
	cr_assert_eq(moecache_evict(&mc, 6, 0, 8, NULL, NULL), -EINVAL);
	cr_assert_eq(moecache_evict(&mc, 0, MOECACHE_NONE, MOECACHE_NONE, NULL, NULL), -EBADF);
}

Test(agent, bad_input_commit_bad_fill,
     .description = "a fill with a bad slot, expert or flag is EINVAL")
{
	struct moecache_fill f = {.slot = 6, .layer = 0, .expert = 8};

	cr_assert_eq(moecache_commit(&mc, &f, 1), -EINVAL);
	f.slot = 0;
	f.expert = 24;
	cr_assert_eq(moecache_abort(&mc, &f, 1), -EINVAL);
	f.expert = 8;
	f.flags = 2;
	cr_assert_eq(moecache_commit(&mc, &f, 1), -EINVAL);
	f.flags = MOECACHE_FILL_PREFETCH;
	cr_assert_eq(moecache_commit(&mc, &f, 1), -EBADF);
}

Test(agent, bad_input_load_unknown_op, .description = "LOAD with an unknown op is EINVAL")
{
	cr_assert_eq(moecache_load(&mc, 3), -EINVAL);
	cr_assert_eq(moecache_load(&mc, MOECACHE_LOAD_BEGIN), -EBADF);
}

Test(agent, bad_input_bank_set_too_small,
     .description = "a bank smaller than n_slots strides is EINVAL")
{
	struct moecache_bank b = {
	    .fd = 0, .backend = MOECACHE_BACKEND_CPU, .bank_bytes = 5 * 4096, .slot_stride = 4096};

	cr_assert_eq(moecache_bank_set(&mc, &b), -EINVAL);
	b.bank_bytes = 6 * 4096;
	b.slot_stride = 2048;
	cr_assert_eq(moecache_bank_set(&mc, &b), -EINVAL);
}

Test(agent, bad_input_read_requests_empty_buffer, .description = "reading into no room is EINVAL")
{
	struct moecache_request r;

	cr_assert_eq(moecache_read_requests(&mc, &r, 0), -EINVAL);
	cr_assert_eq(moecache_read_requests(&mc, NULL, 1), -EINVAL);
}

Test(handle, bad_input_open_missing_device, .description = "opening a missing device is ENOENT")
{
	struct moecache *h = (struct moecache *)1;

	cr_assert_eq(moecache_open("/nonexistent/moecache", &h), -ENOENT);
	cr_assert_null(h);
}

Test(handle, bad_input_pool_names,
     .description = "bad pool names are refused before any system call")
{
	struct moecache h = {.fd = -1};
	char long_name[MOECACHE_NAME_LEN + 1];

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	cr_assert_eq(moecache_attach(&h, "", MOECACHE_ROLE_CLIENT), -EINVAL);
	cr_assert_eq(moecache_attach(&h, "a/b", MOECACHE_ROLE_CLIENT), -EINVAL);
	cr_assert_eq(moecache_attach(&h, long_name, MOECACHE_ROLE_CLIENT), -EINVAL);
	cr_assert_eq(moecache_attach(&h, "ok", 9), -EINVAL);
	cr_assert_eq(moecache_pool_destroy(&h, "no space"), -EINVAL);
	cr_assert_eq(moecache_attach(&h, "ok.name-1_x", MOECACHE_ROLE_CLIENT), -EBADF);
}
