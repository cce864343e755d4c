// SPDX-License-Identifier: MIT
/* moecache-trace as a user runs it: exit status, output and messages. */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* Two layers, four experts, top-1: enough for every command. */
static const char small_trace[] = "{\"tok\": 0, \"layers\": [[0], [1]]}\n"
				  "{\"tok\": 1, \"layers\": [[1], [2]]}\n"
				  "{\"tok\": 2, \"layers\": [[0], [3]]}\n"
				  "{\"tok\": 3, \"layers\": [[1], [2]]}\n";

struct run {
	int status; /* exit status, or -1 if it did not exit */
	char out[16384];
	char err[4096];
};

static char trace_path[64];

/* Writes text to a new temporary file; its name in path (at least 40 bytes). */
static void write_temp(char *path, const char *text)
{
	int fd;

	strcpy(path, "/tmp/moecache-trace-cli-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void write_trace(void)
{
	write_temp(trace_path, small_trace);
}

static void remove_trace(void)
{
	unlink(trace_path);
}

/* build/test/unit/trace -> build/bin/moecache-trace */
static void tool_path(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	snprintf(out, len, "%s/../../bin/moecache-trace", dirname(exe));
	cr_assert_eq(access(out, X_OK), 0, "no %s", out);
}

static void read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
}

/* Runs moecache-trace with args (NULL-terminated); "TRACE" stands for the trace file. */
static void run_tool(struct run *r, const char *const *args)
{
	char tool[PATH_MAX + 32];
	const char *argv[32];
	int out[2], err[2], st;
	unsigned int n = 0;
	pid_t pid;

	tool_path(tool, sizeof(tool));
	argv[n++] = tool;
	for (; *args && n < 31; args++)
		argv[n++] = strcmp(*args, "TRACE") ? *args : trace_path;
	argv[n] = NULL;
	cr_assert_eq(pipe(out), 0);
	cr_assert_eq(pipe(err), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		execv(tool, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	/* The outputs here are small: the pipes hold them until the child exits. */
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	read_all(out[0], r->out, sizeof(r->out));
	read_all(err[0], r->err, sizeof(r->err));
	close(out[0]);
	close(err[0]);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TestSuite(cli, .init = write_trace, .fini = remove_trace);

Test(cli, basic_sim_prints_hit_rate, .description = "sim prints one JSON object with hit_rate")
{
	const char *const args[] = {"sim", "--trace", "TRACE", "--slots", "2", NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"hit_rate\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"misses\""), "%s", r.out);
}

Test(cli, basic_sim_lookahead_says_its_horizon,
     .description = "sim --policy lookahead --lookahead 2 runs and reports the horizon")
{
	const char *const args[] = {"sim",	"--trace",   "TRACE",	    "--slots", "2",
				    "--policy", "lookahead", "--lookahead", "2",       NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"lookahead\":2"), "%s", r.out);
}

Test(cli, bad_input_lookahead_zero, .description = "--lookahead 0 is a usage error (exit 2)")
{
	const char *const args[] = {"sim",	"--trace",   "TRACE",	    "--slots", "2",
				    "--policy", "lookahead", "--lookahead", "0",       NULL};
	struct run r;

	run_tool(&r, args);
	cr_expect_eq(r.status, 2);
	cr_expect_not_null(strstr(r.err, "--lookahead"), "%s", r.err);
	cr_expect_eq(r.out[0], '\0', "printed: %s", r.out);
}

Test(cli, bad_input_lookahead_without_its_policy,
     .description = "--lookahead with another policy is refused, with nothing printed")
{
	const char *const args[] = {"sim", "--trace",	  "TRACE", "--slots",
				    "2",   "--lookahead", "1",	   NULL};
	struct run r;

	run_tool(&r, args);
	cr_expect_eq(r.status, 1);
	cr_expect_not_null(strstr(r.err, "--lookahead goes with --policy lookahead"), "%s", r.err);
	cr_expect_eq(r.out[0], '\0', "printed: %s", r.out);
}

Test(cli, bad_input_oracles_with_sim, .description = "--oracles belongs to table, not sim")
{
	const char *const args[] = {"sim", "--trace", "TRACE", "--slots", "2", "--oracles", NULL};
	struct run r;

	run_tool(&r, args);
	cr_expect_eq(r.status, 1);
	cr_expect_not_null(strstr(r.err, "--oracles"), "%s", r.err);
}

Test(cli, basic_table_oracles_columns,
     .description = "table --oracles prints the oracle columns and the bar")
{
	const char *const args[] = {"table",	  "--trace", "TRACE", "--oracles",
				    "--capacity", "0.5",     NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "| lookahead 1 | lookahead 2 | belady | half the gap |"),
			   "%s", r.out);
	cr_expect_not_null(strstr(r.out, "| 50% | 4 |"), "%s", r.out);
}

Test(cli, basic_info_return_rates, .description = "info prints the return rates and base rate")
{
	const char *const args[] = {"info", "--trace", "TRACE", NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"return_rate_by_gap\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"base_rate\":0.25"), "%s", r.out);
}

Test(cli, basic_default_trace_is_the_shipped_one,
     .description = "with no --trace, info reads the shipped OLMoE trace staged beside build/bin")
{
	const char *const args[] = {"info", NULL};
	struct run r;

	unsetenv("MOECACHE_TRACES");
	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "share/moecache/traces/olmoe-1b-7b.decode.jsonl"), "%s",
			   r.out);
	cr_expect_not_null(strstr(r.out, "\"tokens\":299"), "%s", r.out);
}

Test(cli, bad_input_unknown_trace_name,
     .description = "a trace name found nowhere fails (exit 1) and the message names it")
{
	const char *const args[] = {"info", "--trace", "no-such-trace.jsonl", NULL};
	struct run r;

	unsetenv("MOECACHE_TRACES");
	run_tool(&r, args);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect_not_null(strstr(r.err, "no-such-trace.jsonl"), "%s", r.err);
}

Test(cli, basic_sim_timing_prints_the_model,
     .description = "sim --timing adds modeled_speed, stall_us_per_token, copies_per_token, "
		    "cpu_experts_per_token, wasted_prefetch_bytes and link_utilisation")
{
	static const char *const keys[] = {"\"modeled_speed\"",		"\"stall_us_per_token\"",
					   "\"copies_per_token\"",	"\"cpu_experts_per_token\"",
					   "\"wasted_prefetch_bytes\"", "\"link_utilisation\""};
	const char *const args[] = {"sim", "--trace", "TRACE", "--slots", "2", "--timing", NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (unsigned int i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_expect_not_null(strstr(r.out, keys[i]), "%s: %s", keys[i], r.out);
	cr_expect_not_null(strstr(r.out, "\"preset\":\"h200\""), "%s", r.out);
}

Test(cli, basic_timing_flags_override_the_preset_in_any_order,
     .description = "regression (--preset after a flag reset it): a flag wins over --preset "
		    "wherever it stands")
{
	const char *const before[] = {"sim",	  "--trace",   "TRACE",	     "--slots",
				      "2",	  "--timing",  "--cpu-gbps", "0",
				      "--preset", "slow-link", NULL};
	const char *const after[] = {"sim",	   "--trace",  "TRACE",	   "--slots",
				     "2",	   "--timing", "--preset", "slow-link",
				     "--cpu-gbps", "0",	       NULL};
	struct run a, b;

	run_tool(&a, before);
	run_tool(&b, after);
	cr_assert_eq(a.status, 0, "%s", a.err);
	cr_assert_eq(b.status, 0, "%s", b.err);
	cr_expect_not_null(strstr(a.out, "\"cpu_gbps\":0.0"), "%s", a.out);
	cr_expect_not_null(strstr(a.out, "\"link_gbps\":12.5"), "%s", a.out);
	cr_expect_str_eq(a.out, b.out);
}

Test(cli, basic_expert_bytes_and_link_set_the_copy_time,
     .description = "--expert-bytes 1000000 over --link-gbps 1 is a 1000 us copy")
{
	const char *const args[] = {"sim",	"--trace",	  "TRACE",   "--slots",	    "2",
				    "--timing", "--expert-bytes", "1000000", "--link-gbps", "1",
				    NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"copy_us\":1000.0"), "%s", r.out);
}

Test(cli, bad_input_timing_flags_without_timing,
     .description = "a timing flag without --timing is refused, not ignored")
{
	const char *const args[] = {"sim", "--trace",	 "TRACE", "--slots",
				    "2",   "--layer-us", "10",	  NULL};
	struct run r;

	run_tool(&r, args);
	cr_expect_neq(r.status, 0);
	cr_expect_not_null(strstr(r.err, "--timing"), "%s", r.err);
}

Test(cli, bad_input_timing_values,
     .description = "an unknown preset, a zero link or an "
		    "accuracy above 1 is a usage error (exit 2)")
{
	static const char *const bad[][2] = {{"--preset", "h100"},    {"--link-gbps", "0"},
					     {"--cpu-gbps", "-1"},    {"--copy-engines", "0"},
					     {"--expert-bytes", "0"}, {"--hint-accuracy", "1.5"},
					     {"--layer-us", "nan"}};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *const args[] = {"sim",	"--trace", "TRACE",   "--slots", "2",
					    "--timing", bad[i][0], bad[i][1], NULL};
		struct run r;

		run_tool(&r, args);
		cr_expect_eq(r.status, 2, "%s %s: %d", bad[i][0], bad[i][1], r.status);
		cr_expect_not_null(strstr(r.err, bad[i][0]), "%s", r.err);
	}
}

Test(cli, basic_table_time_columns,
     .description = "table prints the time columns with the preset it is given")
{
	const char *const args[] = {"table", "--trace",	 "TRACE",     "--capacity",
				    "0.5",   "--preset", "slow-link", NULL};
	const char *const bad[] = {"table",    "--trace", "TRACE", "--oracles",
				   "--preset", "h200",	  NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "| speed: lru | speed: default | speed: belady bound |"),
			   "%s", r.out);
	cr_expect_not_null(strstr(r.out, "cpu experts/token: default"), "%s", r.out);
	run_tool(&r, bad);
	cr_expect_neq(r.status, 0);
}

Test(cli, basic_sim_batch,
     .description = "sim --batch 2 replays two stretches together and "
		    "counts every sequence's tokens")
{
	const char *const args[] = {"sim",     "--trace", "TRACE",    "--slots", "2",
				    "--batch", "2",	  "--timing", NULL};
	const char *const bad[] = {"sim", "--trace", "TRACE", "--slots", "2", "--batch", "5", NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"batch\":2"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"tokens\":4"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"steps\":4"), "2 steps of 2 layers: %s", r.out);
	run_tool(&r, bad);
	cr_expect_neq(r.status, 0, "5 sequences of a 4-token trace");
	cr_expect_not_null(strstr(r.err, "--batch"), "%s", r.err);
}

Test(cli, basic_sim_tiers_prints_tiers,
     .description = "sim --tiers prints a tiers array, one object per tier with its hit rate")
{
	const char *const args[] = {"sim",	   "--trace",  "TRACE", "--tiers",
				    "0.1,0.2,0.2", "--timing", NULL};
	struct run r;
	const char *p;
	unsigned int n = 0;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_not_null(strstr(r.out, "\"tiers\":["), "%s", r.out);
	for (p = r.out; (p = strstr(p, "\"tier\":")); p++)
		n++;
	cr_expect_eq(n, 3, "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"promotions\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"demotions\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"us_per_token\""), "%s", r.out);
}

Test(cli, basic_sim_tier_us_takes_effect,
     .description = "--tier-us is the lower tiers' time per expert in the JSON")
{
	const char *const args[] = {"sim",	"--trace",   "TRACE", "--tiers", "0.1,0.2",
				    "--timing", "--tier-us", "7.5",   NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"tier_us\":7.5"), "%s", r.out);
}

Test(cli, bad_input_tiers,
     .description = "bad --tiers, --placement or misplaced tier flags "
		    "are usage errors with a reason")
{
	static const char *const bad[][4] = {
	    {"--tiers", "0.6,0.6", NULL, NULL},	   {"--tiers", "", NULL, NULL},
	    {"--tiers", "-0.1", NULL, NULL},	   {"--tiers", "0.1,x", NULL, NULL},
	    {"--placement", "static", NULL, NULL}, {"--tiers", "0.1", "--placement", "ring"},
	    {"--tiers", "0.1", "--tier-us", "1"},  {"--tiers", "0.1", "--slots", "2"},
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *const args[] = {"sim",     "--trace", "TRACE",   bad[i][0],
					    bad[i][1], bad[i][2], bad[i][3], NULL};
		struct run r;

		run_tool(&r, args);
		cr_expect_neq(r.status, 0, "%s %s: %d", bad[i][0], bad[i][1], r.status);
		cr_expect_neq(r.err[0], '\0', "no reason for %s %s", bad[i][0], bad[i][1]);
	}
}

/* Tier i's "drops" in a sim --tiers JSON output, or -1. */
static long tier_drops(const char *out, int tier)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "\"tier\":%d", tier);
	p = strstr(out, key);
	p = p ? strstr(p, "\"drops\":") : NULL;
	return p ? strtol(p + strlen("\"drops\":"), NULL, 10) : -1;
}

Test(cli, basic_sim_placement_static_takes_effect,
     .description = "--placement static is run, not only reported: tier 1 drops its victims "
		    "instead of cascading them")
{
	const char *const args[] = {
	    "sim",	   "--trace", "TRACE", "--tiers", "0.125,0.125,0.125",
	    "--placement", "static",  NULL};
	const char *const dyn[] = {"sim", "--trace", "TRACE", "--tiers", "0.125,0.125,0.125", NULL};
	struct run r, d;

	run_tool(&r, args);
	run_tool(&d, dyn);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(d.status, 0, "%s", d.err);
	cr_expect_not_null(strstr(r.out, "\"placement\":\"static\""), "%s", r.out);
	cr_expect_eq(tier_drops(d.out, 1), 0, "%s", d.out);
	cr_expect_gt(tier_drops(r.out, 1), 0, "%s", r.out);
}

Test(cli, basic_profile_writes_out,
     .description = "profile --out FILE writes the trace's experts ranked by use into FILE")
{
	char out[64], text[256] = "";
	const char *args[] = {"profile", "--trace", "TRACE", "--out", out, NULL};
	struct run r;
	int fd;

	write_temp(out, "");
	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	fd = open(out, O_RDONLY);
	cr_assert_geq(fd, 0);
	read_all(fd, text, sizeof(text));
	close(fd);
	unlink(out);
	/* layer 0 uses 0 and 1 twice each; layer 1 uses 2 twice, 1 and 3 once */
	cr_expect_str_eq(text, "{\"ranked\":[[0,0],[0,1],[1,2],[1,1],[1,3]]}\n");
}

Test(cli, bad_input_profile_without_out,
     .description = "profile without --out fails, naming it, and prints nothing")
{
	const char *const args[] = {"profile", "--trace", "TRACE", NULL};
	struct run r;

	run_tool(&r, args);
	cr_expect_neq(r.status, 0);
	cr_expect_not_null(strstr(r.err, "--out"), "%s", r.err);
	cr_expect_eq(r.out[0], '\0', "printed: %s", r.out);
}

/* Two layers, each token the same expert in both, cycling 0..3 then 0 again. */
static const char cycle_trace[] = "{\"tok\": 0, \"layers\": [[0], [0]]}\n"
				  "{\"tok\": 1, \"layers\": [[1], [1]]}\n"
				  "{\"tok\": 2, \"layers\": [[2], [2]]}\n"
				  "{\"tok\": 3, \"layers\": [[3], [3]]}\n"
				  "{\"tok\": 4, \"layers\": [[0], [0]]}\n"
				  "{\"tok\": 5, \"layers\": [[1], [1]]}\n"
				  "{\"tok\": 6, \"layers\": [[2], [2]]}\n"
				  "{\"tok\": 7, \"layers\": [[3], [3]]}\n"
				  "{\"tok\": 8, \"layers\": [[0], [0]]}\n";

Test(cli, basic_sim_profile_takes_effect,
     .description = "sim --policy static --profile FILE keeps the expert FILE ranks first")
{
	/* 2 slots: the pinned expert hits on each return, the others never do */
	static const struct {
		const char *profile;
		const char *hits;
	} rows[] = {
	    {"{\"ranked\": [[0, 0]]}", "\"hits\":2,"}, /* layer 0 expert 0: tokens 4 and 8 */
	    {"{\"ranked\": [[0, 3]]}", "\"hits\":1,"}, /* layer 0 expert 3: token 7 */
	};
	char trace[64], profile[64];

	write_temp(trace, cycle_trace);
	for (unsigned int i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *const args[] = {"sim",	"--trace", trace,	"--slots", "2",
					    "--policy", "static",  "--profile", profile,   NULL};
		struct run r;

		write_temp(profile, rows[i].profile);
		run_tool(&r, args);
		unlink(profile);
		cr_assert_eq(r.status, 0, "%s", r.err);
		cr_expect_not_null(strstr(r.out, rows[i].hits), "%s: %s", rows[i].profile, r.out);
	}
	unlink(trace);
}

Test(cli, basic_sim_prefetch_adds_its_object,
     .description = "sim --prefetch runs the next-layer prefetch and reports it; without, none")
{
	const char *const with[] = {"sim", "--trace", "TRACE", "--slots", "2", "--prefetch", NULL};
	const char *const without[] = {"sim", "--trace", "TRACE", "--slots", "2", NULL};
	struct run r;

	run_tool(&r, with);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"prefetch\":{"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"issued\":2,"), "%s", r.out);
	run_tool(&r, without);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_null(strstr(r.out, "\"prefetch\""), "%s", r.out);
}

Test(cli, basic_sim_per_layer_splits_the_slots,
     .description = "sim --per-layer gives each layer its share of the slots, not one cache")
{
	/* layer 0 cycles 3 experts, layer 1 always uses expert 0; 4 slots */
	static const char text[] = "{\"tok\": 0, \"layers\": [[0], [0]]}\n"
				   "{\"tok\": 1, \"layers\": [[1], [0]]}\n"
				   "{\"tok\": 2, \"layers\": [[2], [0]]}\n"
				   "{\"tok\": 3, \"layers\": [[0], [0]]}\n"
				   "{\"tok\": 4, \"layers\": [[1], [0]]}\n"
				   "{\"tok\": 5, \"layers\": [[2], [0]]}\n";
	char trace[64];
	const char *const split[] = {"sim",	 "--trace", trace,	   "--slots", "4",
				     "--policy", "lru",	    "--per-layer", NULL};
	const char *const shared[] = {"sim", "--trace",	 trace, "--slots",
				      "4",   "--policy", "lru", NULL};
	struct run r;

	write_temp(trace, text);
	/* 2 slots each: layer 0's cycle of 3 never hits, layer 1 hits 5 times */
	run_tool(&r, split);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"per_layer\":true"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"hits\":5,"), "%s", r.out);
	/* one cache of 4 holds all four experts: 12 accesses, 4 first misses */
	run_tool(&r, shared);
	unlink(trace);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"hits\":8,"), "%s", r.out);
}

Test(cli, basic_sim_clients_prints_each_client,
     .description = "sim --clients prints one entry per client, the Jain index and the "
		    "comparison with each client alone")
{
	const char *const args[] = {"sim",	 "--trace", "TRACE",	"--slots", "2",
				    "--clients", "2",	    "--timing", NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"per_client\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"offset\":2"), "client 1 starts half way: %s", r.out);
	cr_expect_not_null(strstr(r.out, "\"jain\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"worst_speed_vs_alone_share\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"scheduler\":\"fair\""), "%s", r.out);
}

Test(cli, basic_sim_clients_flags_take_effect,
     .description = "--scheduler, --prefill-at/--prefill-tokens and --no-cpu-client reach the "
		    "run and its output")
{
	const char *const args[] = {"sim",
				    "--trace",
				    "TRACE",
				    "--slots",
				    "2",
				    "--clients",
				    "2",
				    "--timing",
				    "--scheduler",
				    "fifo",
				    "--prefill-at",
				    "1",
				    "--prefill-tokens",
				    "2",
				    "--no-cpu-client",
				    "1",
				    NULL};
	struct run r;

	run_tool(&r, args);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "\"scheduler\":\"fifo\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"speed_without_prefill\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"prefill_cost_to_others_max\""), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "\"no_cpu_client\":1"), "%s", r.out);
}

Test(cli, bad_input_clients,
     .description = "bad --clients values and the multi-client flags without --clients are "
		    "errors with a reason")
{
	static const char *const bad[][6] = {
	    {"--clients", "0", "--timing", NULL},
	    {"--clients", "65", "--timing", NULL},
	    {"--clients", "2", NULL},
	    {"--scheduler", "fair", NULL},
	    {"--clients", "2", "--timing", "--scheduler", "round-robin", NULL},
	    {"--prefill-at", "0", NULL},
	    {"--clients", "2", "--timing", "--prefill-tokens", "3", NULL},
	    {"--clients", "2", "--timing", "--prefill-at", "99", NULL},
	    {"--clients", "2", "--timing", "--no-cpu-client", "2", NULL},
	    {"--clients", "2", "--timing", "--tiers", "0.1", NULL},
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[12] = {"sim", "--trace", "TRACE", "--slots", "2"};
		unsigned int n = 5;
		struct run r;

		for (unsigned int j = 0; j < 6 && bad[i][j]; j++)
			args[n++] = bad[i][j];
		args[n] = NULL;
		run_tool(&r, args);
		cr_expect_neq(r.status, 0, "case %u (%s %s): %d", i, bad[i][0], bad[i][1],
			      r.status);
		cr_expect_neq(r.err[0], '\0', "no reason for case %u", i);
	}
}
