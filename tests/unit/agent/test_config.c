// SPDX-License-Identifier: MIT
/* moecached's configuration: defaults, the key=value file, flags. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/config.h"

static int from_args(struct agent_config *c, char *err, size_t errlen, int argc, ...)
{
	char *argv[32];
	va_list ap;

	va_start(ap, argc);
	for (int i = 0; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[argc] = NULL;
	return agent_config_from_args(c, argc, argv, err, errlen);
}

/* Writes text to a new temporary file; returns its path (static buffer per call site). */
static void write_temp(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/moecached-config.XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(config, basic_defaults, .description = "defaults: cpu backend, default policy, no profile")
{
	struct agent_config c;

	agent_config_defaults(&c);
	cr_assert_str_eq(c.backend, "cpu");
	cr_assert_str_eq(c.policy, "default");
	cr_assert_str_eq(c.device, MOECACHE_DEVICE);
	cr_assert_str_eq(c.profile, "");
	cr_assert_eq(c.n_pools, 0);
	cr_assert_gt(c.copy_threads, 0);
}

Test(config, basic_parse_file,
     .description = "a file sets keys, with comments, blanks and either key spelling")
{
	const char *text = "# moecached\n"
			   "pool = a, b\n"
			   "\n"
			   "pool=c   # one more\n"
			   "copy-threads = 5\n"
			   "copy_delay_us=7\n"
			   "policy = lru\n"
			   "profile = /var/lib/moecache/{pool}.json\n"
			   "foreground = yes\n"
			   "log_level = 7\n";
	struct agent_config c;
	char err[256] = "";

	agent_config_defaults(&c);
	cr_assert_eq(agent_config_parse(&c, "test", text, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.n_pools, 3);
	cr_assert_str_eq(c.pools[0], "a");
	cr_assert_str_eq(c.pools[1], "b");
	cr_assert_str_eq(c.pools[2], "c");
	cr_assert_eq(c.copy_threads, 5);
	cr_assert_eq(c.copy_delay_us, 7);
	cr_assert_str_eq(c.policy, "lru");
	cr_assert(c.foreground);
	cr_assert_eq(c.log_level, 7);
}

Test(config, bad_input_unknown_key, .description = "an unknown key fails and names the line")
{
	struct agent_config c;
	char err[256] = "";

	agent_config_defaults(&c);
	cr_assert_eq(
	    agent_config_parse(&c, "f.conf", "pool = a\n\ncolor = blue\n", err, sizeof(err)),
	    -ENOENT);
	cr_assert(strstr(err, "f.conf:3"), "%s", err);
	cr_assert(strstr(err, "color"), "%s", err);
}

Test(config, bad_input_bad_values,
     .description = "out-of-range numbers, bad booleans and names fail")
{
	struct agent_config c;

	agent_config_defaults(&c);
	cr_assert_eq(agent_config_set(&c, "copy_threads", "0"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "copy_threads", "-1"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "copy_threads", "3x"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "foreground", "maybe"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "backend", "fpga"), -EINVAL);
	/* "auto" is a bank layout's word for "the agent chooses": not a choice. */
	cr_assert_eq(agent_config_set(&c, "backend", "auto"), -EINVAL);
	cr_assert_str_eq(c.backend, "cpu", "a refused backend must not change the value");
	cr_assert_eq(agent_config_set(&c, "pool", "a/b"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "pool", "a,,b"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "log_level", "8"), -EINVAL);
	cr_assert_eq(c.copy_threads, 2, "a failed set must not change the value");
}

Test(config, bad_input_line_without_equals, .description = "a line without '=' fails")
{
	struct agent_config c;
	char err[256] = "";

	agent_config_defaults(&c);
	cr_assert_eq(agent_config_parse(&c, "f", "pool a\n", err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "f:1"), "%s", err);
}

Test(config, bad_input_too_many_pools, .description = "more than AGENT_MAX_POOLS pools fail")
{
	struct agent_config c;
	char name[16];

	agent_config_defaults(&c);
	for (int i = 0; i < AGENT_MAX_POOLS; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		cr_assert_eq(agent_config_set(&c, "pool", name), 0);
	}
	cr_assert_eq(agent_config_set(&c, "pool", "one-more"), -E2BIG);
	cr_assert_eq(agent_config_set(&c, "pool", "p3"), 0, "a repeated pool is not added twice");
	cr_assert_eq(c.n_pools, AGENT_MAX_POOLS);
}

Test(
    config, basic_flags_override_file,
    .description = "flags win over the file whatever their order; --pool replaces the file's pools")
{
	struct agent_config c;
	char path[64], err[512] = "";

	write_temp(path, sizeof(path), "pool = filepool\ncopy_threads = 3\npolicy = lfu\n");
	cr_assert_eq(from_args(&c, err, sizeof(err), 7, "moecached", "--copy-threads", "9",
			       "--config", path, "--pool", "flagpool"),
		     0, "%s", err);
	unlink(path);
	cr_assert_eq(c.copy_threads, 9);
	cr_assert_str_eq(c.policy, "lfu");
	cr_assert_eq(c.n_pools, 1);
	cr_assert_str_eq(c.pools[0], "flagpool");
	cr_assert_str_eq(c.config_path, path);
}

Test(config, basic_repeated_pool_flags, .description = "--pool may be given several times")
{
	struct agent_config c;
	char err[512] = "";

	cr_assert_eq(from_args(&c, err, sizeof(err), 6, "moecached", "--pool", "a", "--pool", "b",
			       "--foreground"),
		     0, "%s", err);
	cr_assert_eq(c.n_pools, 2);
	cr_assert_str_eq(c.pools[1], "b");
	cr_assert(c.foreground);
}

Test(config, bad_input_no_pool, .description = "a configuration without a pool fails")
{
	struct agent_config c;
	char err[512] = "";

	cr_assert_eq(from_args(&c, err, sizeof(err), 2, "moecached", "--foreground"), -EINVAL);
	cr_assert(strstr(err, "no pool"), "%s", err);
}

Test(config, bad_input_bad_flag, .description = "an unknown flag or a bad flag value fails")
{
	struct agent_config c;
	char err[512] = "";

	cr_assert_eq(from_args(&c, err, sizeof(err), 4, "moecached", "--pool", "a", "--frobnicate"),
		     -EINVAL);
	cr_assert_eq(
	    from_args(&c, err, sizeof(err), 5, "moecached", "--pool", "a", "--tick-ms", "0"),
	    -EINVAL);
	cr_assert(strstr(err, "tick-ms"), "%s", err);
}

Test(config, bad_input_missing_config_file,
     .description = "a missing --config file fails with its errno")
{
	struct agent_config c;
	char err[512] = "";

	cr_assert_eq(from_args(&c, err, sizeof(err), 5, "moecached", "--config",
			       "/nonexistent/moecached.conf", "--pool", "a"),
		     -ENOENT);
}

Test(config, basic_profile_path_per_pool,
     .description = "{pool} is replaced; several pools without it get a suffix each")
{
	struct agent_config c;
	char out[256];

	agent_config_defaults(&c);
	cr_assert_eq(agent_config_profile_path(&c, "a", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "");
	agent_config_set(&c, "pool", "a,b");
	agent_config_set(&c, "profile", "/p/{pool}.json");
	cr_assert_eq(agent_config_profile_path(&c, "b", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/p/b.json");
	agent_config_set(&c, "profile", "/p/prof");
	cr_assert_eq(agent_config_profile_path(&c, "b", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/p/prof.b");
	c.n_pools = 1;
	cr_assert_eq(agent_config_profile_path(&c, "a", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/p/prof");
	cr_assert_eq(agent_config_profile_path(&c, "a", out, 4), -E2BIG);
}

Test(config, basic_run_dir,
     .description = "the run folder: $MOECACHE_RUNDIR, else the default; the key wins")
{
	struct agent_config c;
	char out[256];

	unsetenv("MOECACHE_RUNDIR");
	agent_config_defaults(&c);
	cr_assert_str_eq(c.run_dir, AGENT_RUN_DIR_DEFAULT);
	setenv("MOECACHE_RUNDIR", "/r", 1);
	agent_config_defaults(&c);
	cr_assert_eq(agent_config_run_path(&c, "a", ".policy", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/r/a.policy");
	cr_assert_eq(agent_config_set(&c, "run-dir", "/s"), 0);
	cr_assert_eq(agent_config_run_path(&c, "a", ".profile.json", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/s/a.profile.json");
	cr_assert_eq(agent_config_set(&c, "run-dir", ""), -EINVAL);
	cr_assert_eq(agent_config_run_path(&c, "a", ".policy", out, 4), -E2BIG);
	unsetenv("MOECACHE_RUNDIR");
}

Test(config, basic_gpu_settings, .description = "the GPU settings from the file and the flags")
{
	struct agent_config c;
	char err[512];
	char *argv[] = {
	    "moecached", "--pool",	 "a", "--gpu-devices", "a:1,0",		  "--gpu-budget-mb",
	    "512",	 "--gpu-queues", "4", "--gpu-library", "/x/libcuda.so.1", NULL};

	cr_assert_eq(agent_config_from_args(&c, 11, argv, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.gpu_devices, "a:1,0");
	cr_assert_eq(c.gpu_budget_mb, 512);
	cr_assert_eq(c.gpu_queues, 4);
	cr_assert_str_eq(c.gpu_library, "/x/libcuda.so.1");
	cr_assert_eq(
	    agent_config_parse(&c, "f", "gpu_queues = 0\ngpu-budget-mb = 0\n", err, sizeof(err)),
	    0);
	cr_assert_eq(c.gpu_queues, 0);
	cr_assert_eq(c.gpu_budget_mb, 0);
}

Test(config, bad_input_gpu_settings, .description = "GPU queue counts outside [2, 8] but 0 fail")
{
	struct agent_config c;

	agent_config_defaults(&c);
	cr_assert_eq(agent_config_set(&c, "gpu_queues", "1"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "gpu_queues", "9"), -EINVAL);
	cr_assert_eq(agent_config_set(&c, "gpu_budget_mb", "-1"), -EINVAL);
	cr_assert_eq(c.gpu_queues, 0);
}

Test(config, basic_tier_placement, .description = "tier_placement from the file and the flag")
{
	struct agent_config c;
	char err[256];

	agent_config_defaults(&c);
	cr_expect_not(c.tier_static, "dynamic is the default");
	cr_assert_eq(agent_config_parse(&c, "f", "tier-placement = static\n", err, sizeof(err)), 0,
		     "%s", err);
	cr_expect(c.tier_static);
	cr_assert_eq(from_args(&c, err, sizeof(err), 5, "moecached", "--pool", "p",
			       "--tier-placement", "dynamic"),
		     0, "%s", err);
	cr_expect_not(c.tier_static);
}

Test(config, bad_input_tier_placement,
     .description = "a placement other than dynamic or static fails")
{
	struct agent_config c;

	agent_config_defaults(&c);
	cr_expect_eq(agent_config_set(&c, "tier_placement", "Static"), -EINVAL);
	cr_expect_eq(agent_config_set(&c, "tier_placement", ""), -EINVAL);
	cr_expect_not(c.tier_static, "a refused value changed the placement");
}
