// SPDX-License-Identifier: MIT
/* Bank geometry, device selection, budgets and host ranges of the GPU backends. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "lib/gpu/common.h"

#define MIB (1ull << 20)

Test(geometry, basic_stride_rounds_to_granularity,
     .description = "a 3 MiB + 1 expert gets a 4 MiB stride with 2 MiB granularity")
{
	uint64_t stride, bytes;

	cr_assert_eq(mc_gpu_bank_geometry(3 * MIB + 1, 10, 2 * MIB, &stride, &bytes), 0);
	cr_expect_eq(stride, 4 * MIB);
	cr_expect_eq(bytes, 40 * MIB);
}

Test(geometry, basic_exact_multiple_unchanged,
     .description = "an expert already a multiple of the granularity keeps its size")
{
	uint64_t stride, bytes;

	cr_assert_eq(mc_gpu_bank_geometry(6 * MIB, 3, 2 * MIB, &stride, &bytes), 0);
	cr_expect_eq(stride, 6 * MIB);
	cr_expect_eq(bytes, 18 * MIB);
}

Test(geometry, basic_small_expert_whole_granule,
     .description = "a 4 KiB expert still takes one whole granule per slot")
{
	uint64_t stride, bytes;

	cr_assert_eq(mc_gpu_bank_geometry(4096, 64, 2 * MIB, &stride, &bytes), 0);
	cr_expect_eq(stride, 2 * MIB);
	cr_expect_eq(bytes % (2 * MIB), 0);
}

Test(geometry, bad_input_zero_or_odd_align,
     .description = "zero sizes and non-power-of-two granularities are refused")
{
	uint64_t stride, bytes;

	cr_expect_eq(mc_gpu_bank_geometry(0, 1, 4096, &stride, &bytes), -EINVAL);
	cr_expect_eq(mc_gpu_bank_geometry(4096, 0, 4096, &stride, &bytes), -EINVAL);
	cr_expect_eq(mc_gpu_bank_geometry(4096, 1, 0, &stride, &bytes), -EINVAL);
	cr_expect_eq(mc_gpu_bank_geometry(4096, 1, 3 * MIB, &stride, &bytes), -EINVAL);
}

Test(geometry, bad_input_overflow,
     .description = "a bank larger than 64 bits is refused, not wrapped")
{
	uint64_t stride, bytes;

	cr_expect_eq(mc_gpu_bank_geometry(UINT64_MAX - 10, 1, 2 * MIB, &stride, &bytes),
		     -EOVERFLOW);
	cr_expect_eq(mc_gpu_bank_geometry(1ull << 40, UINT32_MAX, 2 * MIB, &stride, &bytes),
		     -EOVERFLOW);
}

static int parse(const char *spec, const char *pool, uint32_t visible, uint32_t *devs, uint32_t *n)
{
	char err[256];

	return mc_gpu_devices_parse(spec, pool, visible, devs, n, err, sizeof(err));
}

Test(devices, basic_auto_is_every_device,
     .description = "NULL, empty and auto list every visible device")
{
	uint32_t devs[8], n;
	const char *specs[] = {NULL, "", "auto", " all "};

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		cr_assert_eq(parse(specs[i], "p", 3, devs, &n), 0, "spec %zu", i);
		cr_expect_eq(n, 3);
		cr_expect_eq(devs[2], 2);
	}
}

Test(devices, basic_list, .description = "a list of ordinals is the candidates, duplicates once")
{
	uint32_t devs[8], n;

	cr_assert_eq(parse("2, 0,2", "p", 4, devs, &n), 0);
	cr_expect_eq(n, 2);
	cr_expect_eq(devs[0], 2);
	cr_expect_eq(devs[1], 0);
}

Test(devices, basic_pool_pin_wins,
     .description = "POOL:N for this pool picks N alone; other pools' pins are ignored")
{
	uint32_t devs[8], n;

	cr_assert_eq(parse("0,1,rank1:3,rank0:2", "rank1", 4, devs, &n), 0);
	cr_expect_eq(n, 1);
	cr_expect_eq(devs[0], 3);
	cr_assert_eq(parse("0,1,rank1:3", "other", 4, devs, &n), 0);
	cr_expect_eq(n, 2);
}

Test(devices, bad_input_syntax, .description = "malformed lists are -EINVAL with a message")
{
	const char *bad[] = {"x", "0,,1", "1,", ":1", "p:", "p:x", "-1", "1234567890"};
	uint32_t devs[8], n;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_expect_eq(mc_gpu_devices_parse(bad[i], "p", 4, devs, &n, err, sizeof(err)),
			     -EINVAL, "spec '%s'", bad[i]);
		cr_expect(strstr(err, "bad GPU device list"), "spec '%s': '%s'", bad[i], err);
	}
}

Test(devices, bad_input_invisible, .description = "an ordinal past the visible devices is -ENODEV")
{
	uint32_t devs[8], n;

	cr_expect_eq(parse("4", "p", 4, devs, &n), -ENODEV);
	cr_expect_eq(parse("p:9", "q", 4, devs, &n), -ENODEV);
	cr_expect_eq(parse(NULL, "p", 0, devs, &n), -ENODEV);
}

Test(pick, basic_most_room_then_memory,
     .description = "the device with the most budget room wins, then the most memory")
{
	struct mc_gpu_candidate c[3] = {
	    {.device = 0, .room = 10 * MIB, .free_bytes = 100 * MIB},
	    {.device = 1, .room = 20 * MIB, .free_bytes = 50 * MIB},
	    {.device = 2, .room = 20 * MIB, .free_bytes = 80 * MIB},
	};

	cr_expect_eq(mc_gpu_pick(c, 3, 5 * MIB), 2);
}

Test(pick, basic_skips_too_small,
     .description = "devices without room or memory for the bank are skipped")
{
	struct mc_gpu_candidate c[2] = {
	    {.device = 0, .room = UINT64_MAX, .free_bytes = 4 * MIB},
	    {.device = 1, .room = 8 * MIB, .free_bytes = 100 * MIB},
	};

	cr_expect_eq(mc_gpu_pick(c, 2, 8 * MIB), 1);
	cr_expect_eq(mc_gpu_pick(c, 2, 9 * MIB), -ENOSPC);
}

Test(budget, basic_reserve_release,
     .description = "reservations add up per device and come back on release")
{
	struct mc_gpu_budget b;

	cr_assert_eq(mc_gpu_budget_init(&b, 100 * MIB), 0);
	cr_expect_eq(mc_gpu_budget_reserve(&b, 0, 60 * MIB), 0);
	cr_expect_eq(mc_gpu_budget_reserve(&b, 0, 50 * MIB), -ENOSPC);
	cr_expect_eq(mc_gpu_budget_reserve(&b, 1, 50 * MIB), 0);
	cr_expect_eq(mc_gpu_budget_room(&b, 0), 40 * MIB);
	mc_gpu_budget_release(&b, 0, 60 * MIB);
	cr_expect_eq(mc_gpu_budget_reserve(&b, 0, 100 * MIB), 0);
	mc_gpu_budget_destroy(&b);
}

Test(budget, basic_no_limit, .description = "a zero limit means no limit")
{
	struct mc_gpu_budget b;

	cr_assert_eq(mc_gpu_budget_init(&b, 0), 0);
	cr_expect_eq(mc_gpu_budget_reserve(&b, 3, UINT64_MAX / 2), 0);
	cr_expect_eq(mc_gpu_budget_room(&b, 3), UINT64_MAX);
	mc_gpu_budget_destroy(&b);
}

Test(budget, bad_input_device, .description = "a device past the table is -EINVAL")
{
	struct mc_gpu_budget b;

	cr_assert_eq(mc_gpu_budget_init(&b, 10), 0);
	cr_expect_eq(mc_gpu_budget_reserve(&b, MC_GPU_MAX_DEVICES, 1), -EINVAL);
	mc_gpu_budget_destroy(&b);
}

Test(params, basic_env_budget_and_devices,
     .description = "the environment fills unset parameters only")
{
	struct mc_gpu_params p = {0}, q = {.devices = "1", .device_budget = 5};

	setenv(MC_GPU_DEVICES_ENV, "0,2", 1);
	setenv(MC_GPU_BUDGET_ENV, "512", 1);
	mc_gpu_params_from_env(&p);
	mc_gpu_params_from_env(&q);
	cr_expect_str_eq(p.devices, "0,2");
	cr_expect_eq(p.device_budget, 512 * MIB);
	cr_expect_str_eq(q.devices, "1");
	cr_expect_eq(q.device_budget, 5);
}

Test(params, basic_queue_count_clamped, .description = "at least two copy queues, at most eight")
{
	cr_expect_eq(mc_gpu_queue_count(NULL, 1), MC_GPU_MIN_QUEUES);
	cr_expect_eq(mc_gpu_queue_count(NULL, 4), 4);
	cr_expect_eq(mc_gpu_queue_count(NULL, 100), MC_GPU_MAX_QUEUES);
	cr_expect_eq(mc_gpu_queue_count(&(struct mc_gpu_params){.queues = 3}, 8), 3);
}

Test(mapping, basic_finds_whole_mapping,
     .description = "an address inside an mmap finds the whole mapping")
{
	size_t len = 16 * 4096, size;
	uintptr_t start;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert(p != MAP_FAILED);
	/* A guard below and above: the mapping cannot merge with a neighbour. */
	cr_assert_eq(mprotect(p, 4096, PROT_NONE), 0);
	cr_assert_eq(mprotect(p + len - 4096, 4096, PROT_NONE), 0);
	cr_assert_eq(mc_gpu_find_mapping(p + 5 * 4096 + 3, 4096, &start, &size), 0);
	cr_expect_eq(start, (uintptr_t)p + 4096);
	cr_expect_eq(size, len - 2 * 4096);
	cr_expect_eq(mc_gpu_find_mapping(p + len - 2 * 4096, 2 * 4096, &start, &size), -ENOENT,
		     "a range running into the next mapping");
	munmap(p, len);
}

Test(ranges, basic_find_inside_only,
     .description = "a range is found only when it holds the whole span")
{
	struct mc_gpu_ranges r = {0};

	cr_assert_eq(mc_gpu_ranges_add(&r, 0x10000, 0x1000, 0, true), 0);
	cr_assert_eq(mc_gpu_ranges_add(&r, 0x40000, 0x2000, 0x900000, true), 0);
	cr_expect_not_null(mc_gpu_ranges_find(&r, (void *)0x10800, 0x800));
	cr_expect_null(mc_gpu_ranges_find(&r, (void *)0x10800, 0x801));
	cr_expect_null(mc_gpu_ranges_find(&r, (void *)0x20000, 1));
	cr_expect_eq(mc_gpu_ranges_find(&r, (void *)0x41000, 0x1000)->device_addr, 0x900000);
	mc_gpu_ranges_free(&r);
}
