// SPDX-License-Identifier: MIT
/* moecache-bench --policy as a user runs it: the three bank sizes, LRU beside the policy. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

/* build/test/unit/policy -> build/bin/moecache-bench; the exit status of a run with args. */
static int run_bench(const char *args)
{
	char exe[PATH_MAX], cmd[2 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int st;

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	snprintf(cmd, sizeof(cmd), "%s/../../bin/moecache-bench %s >/dev/null 2>&1", dirname(exe),
		 args);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(bench_policy, basic_rows_for_three_bank_sizes,
     .description = "--policy --out writes ns per access of LRU and the policy at 10^3, 10^4 and "
		    "10^5 slots")
{
	static const int64_t sizes[] = {1000, 10000, 100000};
	char path[] = "/tmp/moecache-bench-policy-XXXXXX", args[128];
	struct json_object *root, *rows, *name;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(args, sizeof(args), "--policy --accesses 300 --out %s", path);
	cr_assert_eq(run_bench(args), 0);
	root = json_object_from_file(path);
	unlink(path);
	cr_assert_not_null(root);
	cr_assert(json_object_object_get_ex(root, "policy", &name));
	cr_expect_str_eq(json_object_get_string(name), "default");
	cr_assert(json_object_object_get_ex(root, "rows", &rows));
	cr_assert_eq(json_object_array_length(rows), 3);
	for (size_t i = 0; i < 3; i++) {
		struct json_object *row = json_object_array_get_idx(rows, i), *v;

		cr_assert(json_object_object_get_ex(row, "slots", &v));
		cr_expect_eq(json_object_get_int64(v), sizes[i]);
		cr_assert(json_object_object_get_ex(row, "lru_ns_per_access", &v));
		cr_expect_gt(json_object_get_double(v), 0);
		cr_assert(json_object_object_get_ex(row, "policy_ns_per_access", &v));
		cr_expect_gt(json_object_get_double(v), 0);
		cr_assert(json_object_object_get_ex(row, "policy_hit_rate", &v));
		cr_expect(json_object_get_double(v) >= 0 && json_object_get_double(v) <= 1);
	}
	json_object_put(root);
}

Test(bench_policy, bad_input_unknown_policy_and_count,
     .description = "an unknown policy or a zero count is a usage error (exit 2)")
{
	cr_expect_eq(run_bench("--policy --policy-name nope --accesses 10"), 2);
	cr_expect_eq(run_bench("--policy --accesses 0"), 2);
}
