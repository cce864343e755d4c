// SPDX-License-Identifier: MIT
/* `pool create --bank TIER:BACKEND:DEVICE:SLOTS`: the parser and the checks of a set of banks. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "ctl.h"

Test(banks, basic_parse_count, .description = "TIER:BACKEND:DEVICE:SLOTS with a slot count")
{
	struct ctl_bank_spec b;
	char err[160];

	cr_assert_eq(ctl_parse_bank("1:rocm:3:96", &b, err, sizeof(err)), 0);
	cr_assert_eq(b.layout.tier, 1);
	cr_assert_eq(b.layout.backend, MOECACHE_BACKEND_ROCM);
	cr_assert_eq(b.layout.device, 3);
	cr_assert_eq(b.layout.n_slots, 96);
	cr_assert_eq(b.bytes, 0);
	cr_assert_eq(ctl_parse_bank("0:auto:0:1", &b, err, sizeof(err)), 0);
	cr_assert_eq(b.layout.backend, MOECACHE_BACKEND_NONE);
}

Test(banks, basic_parse_bytes, .description = "SLOTS with a unit is the bank's capacity in bytes")
{
	struct ctl_bank_spec b[2];
	uint32_t slots;
	char err[160];

	cr_assert_eq(ctl_parse_bank("0:cuda:0:1M", &b[0], err, sizeof(err)), 0);
	cr_assert_eq(b[0].bytes, 1u << 20);
	cr_assert_eq(ctl_parse_bank("1:cpu:0:10", &b[1], err, sizeof(err)), 0);
	/* 1 MiB of 96 KiB experts: 10 whole ones. */
	cr_assert_eq(ctl_banks_resolve(b, 2, 96 * 1024, &slots, err, sizeof(err)), 0);
	cr_assert_eq(b[0].layout.n_slots, 10);
	cr_assert_eq(slots, 20);
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* Rows are indices into a table: the parameters cross into the test's process by value. */
#define TABLE_ROWS(table)                                                                          \
	static size_t rows[ARRAY_SIZE(table)];                                                     \
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)                                             \
		rows[i] = i;                                                                       \
	return cr_make_param_array(size_t, rows, ARRAY_SIZE(table))

struct bad_bank {
	const char *spec;
	const char *why; /* a word the reason must contain */
};

static const struct bad_bank bad_banks[] = {
    {"", "TIER:BACKEND"},
    {"0:cpu:0", "TIER:BACKEND"},
    {"0:cpu:0:4:5", "TIER:BACKEND"},
    {"0::0:4", "empty"},
    {":cpu:0:4", "empty"},
    {"0:cpu:0:", "empty"},
    {"x:cpu:0:4", "tier"},
    {"-1:cpu:0:4", "tier"},
    {"0:gpu:0:4", "backend"},
    {"0:CPU:0:4", "backend"},
    {"0:cpu:a:4", "device"},
    {"0:cpu:4294967296:4", "device"},
    {"0:cpu:0:0", "slot count"},
    {"0:cpu:0:4294967296", "slot count"},
    {"0:cpu:0:4X", "slots"},
    {"0:cpu:0:0M", "slots"},
    {"0:cpu:0:-4", "slots"},
};

ParameterizedTestParameters(banks, bad_input_parse)
{
	TABLE_ROWS(bad_banks);
}

ParameterizedTest(size_t *i, banks, bad_input_parse,
		  .description = "malformed --bank values are refused with the field named")
{
	const struct bad_bank *row = &bad_banks[*i];
	struct ctl_bank_spec b;
	char err[160] = "";

	cr_assert_eq(ctl_parse_bank(row->spec, &b, err, sizeof(err)), -EINVAL, "'%s'", row->spec);
	cr_assert(strstr(err, row->why), "'%s': '%s' does not say '%s'", row->spec, err, row->why);
}

struct bad_set {
	const char *spec[3];
	uint64_t expert_bytes;
	int err;
	const char *why;
};

static const struct bad_set bad_sets[] = {
    /* A tier order that is not monotonic. */
    {{"1:cpu:0:4", "0:cpu:1:4", NULL}, 4096, -EINVAL, "fastest first"},
    {{"0:cpu:0:4", "2:cpu:1:4", "1:cpu:2:4"}, 4096, -EINVAL, "fastest first"},
    /* A second bank on a device already used. */
    {{"0:cpu:0:4", "1:cpu:0:4", NULL}, 4096, -EINVAL, "both on cpu device 0"},
    {{"0:rocm:2:4", "1:cpu:0:4", "1:rocm:2:4"}, 4096, -EINVAL, "both on rocm device 2"},
    /* A capacity that holds no expert, or too many slots. */
    {{"0:cpu:0:4K", NULL, NULL}, 8192, -EINVAL, "hold no expert"},
    {{"0:cpu:0:4294967295", "1:cpu:1:2", NULL}, 4096, -ERANGE, "add up"},
};

ParameterizedTestParameters(banks, bad_input_resolve)
{
	TABLE_ROWS(bad_sets);
}

ParameterizedTest(
    size_t *i, banks, bad_input_resolve,
    .description = "sets of banks out of order, sharing a device or too big are refused")
{
	const struct bad_set *row = &bad_sets[*i];
	struct ctl_bank_spec b[3];
	uint32_t n = 0, slots = 7;
	char err[160] = "";

	for (; n < 3 && row->spec[n]; n++)
		cr_assert_eq(ctl_parse_bank(row->spec[n], &b[n], err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(ctl_banks_resolve(b, n, row->expert_bytes, &slots, err, sizeof(err)),
		     row->err);
	cr_assert(strstr(err, row->why), "'%s' does not say '%s'", err, row->why);
	cr_assert_eq(slots, 7, "the slot count changed on a refusal");
}

Test(banks, basic_auto_banks_may_share_device,
     .description = "banks left to the agent (auto) are not refused for a shared device")
{
	struct ctl_bank_spec b[2];
	uint32_t slots;
	char err[160];

	cr_assert_eq(ctl_parse_bank("0:auto:0:2", &b[0], err, sizeof(err)), 0);
	cr_assert_eq(ctl_parse_bank("1:auto:0:6", &b[1], err, sizeof(err)), 0);
	cr_assert_eq(ctl_banks_resolve(b, 2, 4096, &slots, err, sizeof(err)), 0);
	cr_assert_eq(slots, 8);
}
