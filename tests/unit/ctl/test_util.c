// SPDX-License-Identifier: MIT
/* moecachectl's parsers of command-line values and its formatting. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ctl.h"

Test(util, basic_parse_size_suffixes, .description = "sizes take K, M, G, T (and KiB, KB) suffixes")
{
	uint64_t v;

	cr_assert_eq(ctl_parse_size("4096", &v), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(ctl_parse_size("8K", &v), 0);
	cr_assert_eq(v, 8192);
	cr_assert_eq(ctl_parse_size("2MiB", &v), 0);
	cr_assert_eq(v, 2u << 20);
	cr_assert_eq(ctl_parse_size("1g", &v), 0);
	cr_assert_eq(v, 1ull << 30);
	cr_assert_eq(ctl_parse_size("3TB", &v), 0);
	cr_assert_eq(v, 3ull << 40);
}

Test(util, bad_input_parse_size,
     .description = "sizes with junk, a sign or an overflow are refused")
{
	uint64_t v;

	cr_assert_eq(ctl_parse_size("", &v), -EINVAL);
	cr_assert_eq(ctl_parse_size("-4", &v), -EINVAL);
	cr_assert_eq(ctl_parse_size("4X", &v), -EINVAL);
	cr_assert_eq(ctl_parse_size("4KX", &v), -EINVAL);
	cr_assert_eq(ctl_parse_size("K", &v), -EINVAL);
	cr_assert_eq(ctl_parse_size("99999999999999999999", &v), -ERANGE);
	cr_assert_eq(ctl_parse_size("16777216T", &v), -ERANGE);
}

Test(util, basic_parse_u32, .description = "u32 values in decimal and hex")
{
	uint32_t v;

	cr_assert_eq(ctl_parse_u32("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(ctl_parse_u32("4294967295", &v), 0);
	cr_assert_eq(v, UINT32_MAX);
	cr_assert_eq(ctl_parse_u32("0x10", &v), 0);
	cr_assert_eq(v, 16);
}

Test(util, bad_input_parse_u32, .description = "u32 values out of range or with junk are refused")
{
	uint32_t v;

	cr_assert_eq(ctl_parse_u32("4294967296", &v), -ERANGE);
	cr_assert_eq(ctl_parse_u32("12a", &v), -EINVAL);
	cr_assert_eq(ctl_parse_u32(" 1", &v), -EINVAL);
	cr_assert_eq(ctl_parse_u32("-1", &v), -EINVAL);
	cr_assert_eq(ctl_parse_u32(NULL, &v), -EINVAL);
}

Test(util, basic_parse_range, .description = "BEGIN:END ranges")
{
	uint32_t b, e;

	cr_assert_eq(ctl_parse_range("4:12", &b, &e), 0);
	cr_assert_eq(b, 4);
	cr_assert_eq(e, 12);
}

Test(util, bad_input_parse_range, .description = "ranges without both ends are refused")
{
	uint32_t b, e;

	cr_assert_eq(ctl_parse_range("4", &b, &e), -EINVAL);
	cr_assert_eq(ctl_parse_range(":4", &b, &e), -EINVAL);
	cr_assert_eq(ctl_parse_range("4:", &b, &e), -EINVAL);
	cr_assert_eq(ctl_parse_range("4:5:6", &b, &e), -EINVAL);
}

Test(util, basic_pool_names, .description = "pool names follow the driver's rule")
{
	char longest[64];

	memset(longest, 'a', 63);
	longest[63] = '\0';
	cr_assert(ctl_pool_name_ok("qwen3-30b.A3B_v2"));
	cr_assert(ctl_pool_name_ok(longest));
	cr_assert_not(ctl_pool_name_ok(""));
	cr_assert_not(ctl_pool_name_ok("a/b"));
	cr_assert_not(ctl_pool_name_ok("a b"));
	longest[62] = 'a';
	cr_assert_not(ctl_pool_name_ok(strcat(longest, "a")));
}

Test(util, basic_parse_ids, .description = "users and groups by number or name")
{
	uint32_t id;

	cr_assert_eq(ctl_parse_uid("1234", &id), 0);
	cr_assert_eq(id, 1234);
	cr_assert_eq(ctl_parse_uid("root", &id), 0);
	cr_assert_eq(id, 0);
	cr_assert_eq(ctl_parse_gid("root", &id), 0);
	cr_assert_eq(id, 0);
	cr_assert_eq(ctl_parse_uid("no-such-user-here", &id), -ENOENT);
}

Test(util, basic_format_bytes, .description = "byte counts in binary units")
{
	char buf[32];

	ctl_format_bytes(buf, sizeof(buf), 12);
	cr_assert_str_eq(buf, "12 B");
	ctl_format_bytes(buf, sizeof(buf), 1536);
	cr_assert_str_eq(buf, "1.5 KiB");
	ctl_format_bytes(buf, sizeof(buf), 3ull << 30);
	cr_assert_str_eq(buf, "3.0 GiB");
}

Test(util, basic_format_flags, .description = "pool flags as words")
{
	char buf[32];

	ctl_format_pool_flags(buf, sizeof(buf), 0);
	cr_assert_str_eq(buf, "-");
	ctl_format_pool_flags(buf, sizeof(buf), MOECACHE_POOL_LOADED | MOECACHE_POOL_BANK);
	cr_assert_str_eq(buf, "loaded,bank");
}
