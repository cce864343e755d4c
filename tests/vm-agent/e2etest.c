// SPDX-License-Identifier: MIT
/*
 * moecache-agent-e2e: end-to-end tests of moecached, libmoecache and the
 * decode client against the real driver (in the test VM, or on a host
 * with the module loaded, as root). Every test makes its own pool and
 * destroys it. The runner is the suites' harness (tests/harness/tap.h):
 * each test in its own process with an alarm, TAP output, then
 * "e2e: P passed, F failed, S skipped"; exit 0 only if all pass. A test is a function
 * returning 0 (or failing through E2E_CHECK) and an entry of e2e_tests[].
 *
 * Usage: moecache-agent-e2e [--traces DIR] [--keep-logs] [--list] [SUBSTRING...]
 * (the programs moecached, moecache-decode and moecachectl are taken
 * from PATH).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libmoecache.h"
#include "tap.h"

/* The expert shape every test uses: small, so that copies are cheap under TCG. */
#define E2E_SHAPE "--d-model", "32", "--d-ff", "32", "--dtype", "f32"
#define E2E_LAYERS 16
#define E2E_EXPERTS 64
/* Each test's alarm: the slowest take a few minutes under TCG. */
#define E2E_TIMEOUT_S 600

struct e2e {
	const char *traces;
	bool keep_logs;
	char trace[512];
	char workdir[256];
	uint64_t expert_bytes;
	char why[512]; /* the failing check of the current test */
};

struct e2e_test {
	const char *name;
	const char *description;
	int (*run)(struct e2e *e);
};

/* Records why the current test failed; returns -1 so that checks can `return`. */
static int e2e_fail(struct e2e *e, const char *fmt, ...)
{
	va_list ap;

	if (e->why[0])
		return -1; /* keep the first reason */
	va_start(ap, fmt);
	vsnprintf(e->why, sizeof(e->why), fmt, ap);
	va_end(ap);
	return -1;
}

#define E2E_CHECK(e, cond, ...)                                                                    \
	do {                                                                                       \
		if (!(cond))                                                                       \
			return e2e_fail(e, __VA_ARGS__);                                           \
	} while (0)

#define e2e_now_ms tap_now_ms
#define e2e_sleep_ms tap_sleep_ms

/* ---- processes ---- */

/* Starts argv with stdout and stderr into out (a file path); returns the pid or -errno. */
static pid_t e2e_spawn(const char *out, char *const argv[])
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Waits for pid up to timeout_ms; returns its exit status, 128+signal, or -ETIMEDOUT. */
static int e2e_wait(pid_t pid, unsigned int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0)
			return -errno;
		if (e2e_now_ms() > deadline)
			return -ETIMEDOUT;
		e2e_sleep_ms(20);
	}
}

static void e2e_kill(pid_t pid, int sig)
{
	if (pid > 0 && kill(pid, sig) == 0 && sig == SIGKILL)
		e2e_wait(pid, 5000);
}

/* Runs argv to completion (output to out); returns its status. */
static int e2e_run(const char *out, char *const argv[], unsigned int timeout_ms)
{
	pid_t pid = e2e_spawn(out, argv);
	int ret;

	if (pid < 0)
		return pid;
	ret = e2e_wait(pid, timeout_ms);
	if (ret == -ETIMEDOUT)
		e2e_kill(pid, SIGKILL);
	return ret;
}

/* How many times needle stands in the file at path (its first 64 KiB). */
static unsigned int e2e_file_count(const char *path, const char *needle)
{
	char buf[65536];
	unsigned int n = 0;
	ssize_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return 0;
	buf[len] = '\0';
	for (const char *at = buf; (at = strstr(at, needle)); at += strlen(needle))
		n++;
	return n;
}

static bool e2e_file_has(const char *path, const char *needle)
{
	return e2e_file_count(path, needle) > 0;
}

static void e2e_path(const struct e2e *e, char *out, size_t len, const char *pool, const char *what)
{
	snprintf(out, len, "%s/%s.%s", e->workdir, pool, what);
}

/* ---- pools, agents, clients ---- */

/* A pool of slots, filled; mode (NULL: moecachectl's default) its --mode. */
static int e2e_pool_create_mode(struct e2e *e, const char *pool, uint32_t slots, const char *mode)
{
	char layers[16], experts[16], nslots[16], bytes[32], out[512];
	char *argv[] = {"moecachectl",	  "pool",      "create", (char *)pool, "--layers",
			layers,		  "--experts", experts,	 "--slots",    nslots,
			"--expert-bytes", bytes,       "--mode", (char *)mode, NULL};
	char *fill[] = {"moecache-decode", "--pool", (char *)pool, "--fill", E2E_SHAPE, NULL};

	snprintf(layers, sizeof(layers), "%u", E2E_LAYERS);
	snprintf(experts, sizeof(experts), "%u", E2E_EXPERTS);
	snprintf(nslots, sizeof(nslots), "%u", slots);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)e->expert_bytes);
	if (!mode)
		argv[12] = NULL;
	e2e_path(e, out, sizeof(out), pool, "create");
	E2E_CHECK(e, e2e_run(out, argv, 30000) == 0, "cannot create pool %s", pool);
	e2e_path(e, out, sizeof(out), pool, "fill");
	E2E_CHECK(e, e2e_run(out, fill, 120000) == 0, "cannot fill pool %s", pool);
	return 0;
}

static int e2e_pool_create(struct e2e *e, const char *pool, uint32_t slots)
{
	return e2e_pool_create_mode(e, pool, slots, NULL);
}

static void e2e_pool_destroy(struct e2e *e, const char *pool)
{
	char out[512];
	char *argv[] = {"moecachectl", "pool", "destroy", (char *)pool, NULL};

	e2e_path(e, out, sizeof(out), pool, "destroy");
	e2e_run(out, argv, 30000);
}

/* Starts moecached on pool (extra: more flags, NULL-terminated); log receives its stderr. */
static pid_t e2e_agent_start(struct e2e *e, const char *pool, const char *log,
			     const char *const *extra)
{
	char *argv[24] = {"moecached", "--pool", (char *)pool, "--foreground", "--log-level", "7"};
	int n = 6;

	for (; extra && *extra && n < 23; extra++)
		argv[n++] = (char *)*extra;
	argv[n] = NULL;
	return e2e_spawn(log, argv);
}

/* Waits until the agent's log says it serves the pool. */
static int e2e_agent_ready(struct e2e *e, const char *log, unsigned int timeout_ms)
{
	uint64_t deadline = e2e_now_ms() + timeout_ms;

	while (!e2e_file_has(log, "serving:")) {
		E2E_CHECK(e, e2e_now_ms() < deadline, "the agent did not start (see %s)", log);
		e2e_sleep_ms(20);
	}
	return 0;
}

/* SIGTERM, and the agent must exit 0. */
static int e2e_agent_stop(struct e2e *e, pid_t pid)
{
	int ret;

	kill(pid, SIGTERM);
	ret = e2e_wait(pid, 30000);
	if (ret == -ETIMEDOUT)
		e2e_kill(pid, SIGKILL);
	E2E_CHECK(e, ret == 0, "the agent exited with %d on SIGTERM", ret);
	return 0;
}

/* A decode client on the OLMoE trace; extra (may be NULL) is one more flag. */
static pid_t e2e_decode_run(struct e2e *e, const char *pool, const char *out, uint32_t start,
			    uint32_t steps, const char *extra)
{
	char s_start[16], s_steps[16];
	char *argv[] = {"moecache-decode", "--pool", (char *)pool,  "--trace", e->trace,
			"--start-token",   s_start,  "--steps",	    s_steps,   E2E_SHAPE,
			"--timeout-ms",	   "120000", (char *)extra, NULL};

	snprintf(s_start, sizeof(s_start), "%u", start);
	snprintf(s_steps, sizeof(s_steps), "%u", steps);
	return e2e_spawn(out, argv);
}

static pid_t e2e_decode_start(struct e2e *e, const char *pool, const char *out, uint32_t start,
			      uint32_t steps)
{
	return e2e_decode_run(e, pool, out, start, steps, NULL);
}

/* A decode client's exit status must be 0 and its report say verified=ok. */
static int e2e_decode_verdict(struct e2e *e, int status, const char *out)
{
	E2E_CHECK(e, status == 0, "a decode client exited with %d (see %s)", status, out);
	E2E_CHECK(e, e2e_file_has(out, "verified=ok"), "a decode client did not verify (%s)", out);
	return 0;
}

static int e2e_decode_check(struct e2e *e, pid_t pid, const char *out, unsigned int timeout_ms)
{
	int ret = e2e_wait(pid, timeout_ms);

	if (ret == -ETIMEDOUT)
		e2e_kill(pid, SIGKILL);
	return e2e_decode_verdict(e, ret, out);
}

static int e2e_client(struct e2e *e, const char *pool, struct moecache **out)
{
	int ret = moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, out);

	E2E_CHECK(e, ret == 0, "attach to %s as client: %s", pool, strerror(-ret));
	return 0;
}

static int e2e_stats(struct e2e *e, const char *pool, struct moecache_stats *st)
{
	struct moecache *mc;
	int ret;

	if (e2e_client(e, pool, &mc))
		return -1;
	ret = moecache_stats(mc, MOECACHE_NONE, st);
	moecache_close(mc);
	E2E_CHECK(e, ret == 0, "stats of %s: %s", pool, strerror(-ret));
	return 0;
}

/* ---- the tests ---- */

static int test_miss_becomes_hit(struct e2e *e)
{
	const char *pool = "e2e-miss-hit";
	struct moecache_acquire_result ra, rb;
	struct moecache *a = NULL, *b = NULL;
	uint32_t expert = 5, slot_a, slot_b;
	char log[512];
	pid_t agent;
	int ret = -1;

	if (e2e_pool_create(e, pool, 64))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &a) || e2e_client(e, pool, &b))
		goto out;
	ret = moecache_acquire(a, 3, &expert, 1, &slot_a, MOECACHE_ACQ_WAIT, 30000, &ra);
	if (ret || ra.n_hits != 0 || ra.n_pinned != 1) {
		ret = e2e_fail(e, "client A: acquire %d, hits %u (want a miss that gets pinned)",
			       ret, ra.n_hits);
		goto out;
	}
	moecache_release(a, &slot_a, 1);
	ret = moecache_acquire(b, 3, &expert, 1, &slot_b, MOECACHE_ACQ_NO_QUEUE, 0, &rb);
	if (ret || rb.n_hits != 1 || slot_b != slot_a)
		ret = e2e_fail(e, "client B: acquire %d, hits %u, slot %u vs %u (want A's slot)",
			       ret, rb.n_hits, slot_b, slot_a);
	else
		ret = moecache_release(b, &slot_b, 1);
out:
	moecache_close(a);
	moecache_close(b);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

/* A miss acquired with MOECACHE_ACQ_CPU (a MOECACHE_REQ_CPU request) is filled all the same. */
static int test_cpu_miss_admitted(struct e2e *e)
{
	const char *pool = "e2e-cpu-miss";
	struct moecache_acquire_result ra, rb;
	struct moecache *a = NULL, *b = NULL;
	uint32_t expert = 6, slot_a, slot_b = MOECACHE_NONE;
	uint64_t deadline;
	char log[512];
	pid_t agent;
	int ret = -1;

	if (e2e_pool_create(e, pool, 64))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &a) || e2e_client(e, pool, &b))
		goto out;
	ret = moecache_acquire(a, 2, &expert, 1, &slot_a, MOECACHE_ACQ_CPU, 0, &ra);
	if (ret || ra.n_hits != 0 || slot_a != MOECACHE_NONE) {
		ret =
		    e2e_fail(e, "client A: CPU acquire %d, hits %u (want a miss)", ret, ra.n_hits);
		goto out;
	}
	/* B only looks (NO_QUEUE): the expert can arrive only by A's request. */
	deadline = e2e_now_ms() + 30000;
	do {
		ret = moecache_acquire(b, 2, &expert, 1, &slot_b, MOECACHE_ACQ_NO_QUEUE, 0, &rb);
		if (ret || slot_b != MOECACHE_NONE)
			break;
		e2e_sleep_ms(5);
	} while (e2e_now_ms() < deadline);
	if (ret || slot_b == MOECACHE_NONE)
		ret = e2e_fail(e, "client B: acquire %d, the CPU miss never became resident", ret);
	else
		ret = moecache_release(b, &slot_b, 1);
out:
	moecache_close(a);
	moecache_close(b);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_kill9_clients_finish(struct e2e *e)
{
	const char *pool = "e2e-kill9";
	char log[512], log2[512], out[4][512];
	pid_t agent, clients[4];
	struct moecache_stats st;
	int ret = 0;

	if (e2e_pool_create(e, pool, 256))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, log2, sizeof(log2), pool, "agent2");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	for (int i = 0; i < 4; i++) {
		char name[32];

		snprintf(name, sizeof(name), "client%d", i);
		e2e_path(e, out[i], sizeof(out[i]), pool, name);
		clients[i] = e2e_decode_start(e, pool, out[i], (uint32_t)i * 60, 40);
	}
	/* Kill the agent while the clients are busy, and leave them without one a while. */
	while (!e2e_stats(e, pool, &st) && st.resident < 128 &&
	       e2e_wait(clients[0], 0) == -ETIMEDOUT)
		e2e_sleep_ms(50);
	e2e_kill(agent, SIGKILL);
	e2e_sleep_ms(1000);
	if (e2e_stats(e, pool, &st))
		ret = -1;
	else if (st.agent_pid != 0 || st.filling != 0 || st.resident < 128)
		ret = e2e_fail(e,
			       "after kill -9: agent_pid %u, filling %u, resident %u (want 0, 0, "
			       ">= 128)",
			       st.agent_pid, st.filling, st.resident);
	for (int i = 0; i < 4 && !ret; i++)
		if (e2e_wait(clients[i], 0) != -ETIMEDOUT)
			ret = e2e_fail(e, "client %d ended while no agent was attached", i);
	agent = e2e_agent_start(e, pool, log2, NULL);
	if (e2e_agent_ready(e, log2, 30000))
		ret = -1;
	if (!ret && !e2e_file_has(log2, "warm restart"))
		ret = e2e_fail(e, "the new agent did not adopt the bank (see %s)", log2);
	for (int i = 0; i < 4; i++)
		if (e2e_decode_check(e, clients[i], out[i], 300000))
			ret = -1;
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_warm_restart_keeps_residency(struct e2e *e)
{
	const char *pool = "e2e-warm";
	uint32_t before[256], after[256];
	struct moecache *mc = NULL;
	char log[512], log2[512], out[512];
	pid_t agent, client;
	int ret = -1;

	if (e2e_pool_create(e, pool, 256))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, log2, sizeof(log2), pool, "agent2");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		goto out;
	client = e2e_decode_start(e, pool, out, 0, 10);
	if (e2e_decode_check(e, client, out, 120000) || e2e_client(e, pool, &mc))
		goto out;
	moecache_map_snapshot(moecache_map(mc), before, NULL);
	e2e_kill(agent, SIGKILL);
	agent = e2e_agent_start(e, pool, log2, NULL);
	if (e2e_agent_ready(e, log2, 30000))
		goto out;
	moecache_map_snapshot(moecache_map(mc), after, NULL);
	ret = 0;
	for (uint32_t s = 0; s < 256 && !ret; s++)
		if (before[s] != after[s] || before[s] == MOECACHE_NONE)
			ret = e2e_fail(e, "slot %u held %#x before the restart, %#x after", s,
				       before[s], after[s]);
out:
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

/* Two clients, each with extra (may be NULL) as one more flag, under slowed copies. */
static int no_half_copied_slot(struct e2e *e, const char *pool, const char *extra)
{
	static const char *const slow[] = {"--copy-delay-us", "3000", "--copy-threads", "3", NULL};
	char log[512], out[2][512];
	struct moecache_stats st;
	pid_t agent, clients[2];
	uint32_t saw_filling = 0;
	int ret = 0, status0;

	if (e2e_pool_create(e, pool, 128))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, slow);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	for (int i = 0; i < 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "client%d", i);
		e2e_path(e, out[i], sizeof(out[i]), pool, name);
		clients[i] = e2e_decode_run(e, pool, out[i], (uint32_t)i * 100, 12, extra);
	}
	/* Sample while they run: the slow copies must really leave slots half-written. */
	while ((status0 = e2e_wait(clients[0], 0)) == -ETIMEDOUT && !e2e_stats(e, pool, &st)) {
		if (st.filling > saw_filling)
			saw_filling = st.filling;
		e2e_sleep_ms(50);
	}
	if (status0 == -ETIMEDOUT) {
		status0 = e2e_wait(clients[0], 300000);
		if (status0 == -ETIMEDOUT)
			e2e_kill(clients[0], SIGKILL);
	}
	if (e2e_decode_verdict(e, status0, out[0]))
		ret = -1;
	if (e2e_decode_check(e, clients[1], out[1], 300000))
		ret = -1;
	if (!ret && saw_filling == 0)
		ret = e2e_fail(e, "no slot was ever seen filling: the test did not race copies");
	/* The clients' hits reached the driver, whoever took them. */
	if (!ret && !e2e_stats(e, pool, &st) && st.hits == 0)
		ret = e2e_fail(e, "no hit was counted");
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_no_half_copied_slot(struct e2e *e)
{
	return no_half_copied_slot(e, "e2e-half", NULL);
}

static int test_fast_pins_no_half_copied_slot(struct e2e *e)
{
	return no_half_copied_slot(e, "e2e-fast", "--fast-pins");
}

static int test_no_eviction_bank_holds_all(struct e2e *e)
{
	const char *pool = "e2e-all";
	const uint32_t all = E2E_LAYERS * E2E_EXPERTS;
	struct moecache_stats st = {0};
	char log[512], out[2][512];
	pid_t agent, clients[2];
	uint64_t deadline;
	int ret = 0;

	if (e2e_pool_create(e, pool, all))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	/* The agent fills the whole bank by itself. */
	deadline = e2e_now_ms() + 120000;
	while (!e2e_stats(e, pool, &st) && st.resident < all && e2e_now_ms() < deadline)
		e2e_sleep_ms(100);
	if (st.resident != all)
		ret = e2e_fail(e, "the agent warmed %u of %u experts", st.resident, all);
	for (int i = 0; i < 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "client%d", i);
		e2e_path(e, out[i], sizeof(out[i]), pool, name);
		clients[i] = e2e_decode_start(e, pool, out[i], (uint32_t)i * 100, 20);
	}
	for (int i = 0; i < 2; i++)
		if (e2e_decode_check(e, clients[i], out[i], 300000))
			ret = -1;
	if (!ret && !e2e_stats(e, pool, &st) && (st.evictions != 0 || st.misses != 0))
		ret = e2e_fail(e, "evictions %llu, misses %llu (want 0, 0)",
			       (unsigned long long)st.evictions, (unsigned long long)st.misses);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_mid_run_attach_sees_residency(struct e2e *e)
{
	const char *pool = "e2e-midrun";
	struct moecache_acquire_result res;
	uint32_t owner[256], map[E2E_LAYERS * E2E_EXPERTS], experts[E2E_EXPERTS],
	    slots[E2E_EXPERTS];
	const struct moecache_map *m;
	struct moecache_stats st;
	struct moecache *late = NULL;
	char log[512], out[512];
	uint32_t n = 0, resident = 0;
	pid_t agent, client;
	int ret = -1;

	if (e2e_pool_create(e, pool, 256))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		goto out;
	client = e2e_decode_start(e, pool, out, 0, 60);
	/* Attach while the first client is mid-run, once something is resident. */
	do {
		e2e_sleep_ms(100);
	} while (!e2e_stats(e, pool, &st) && st.resident < 64 && e2e_wait(client, 0) == -ETIMEDOUT);
	if (e2e_wait(client, 0) != -ETIMEDOUT) {
		e2e_fail(e, "the first client ended before the late one attached");
		goto out;
	}
	if (e2e_client(e, pool, &late))
		goto out;
	m = moecache_map(late);
	moecache_map_snapshot(m, owner, map);
	/* The late client's lock-free view, and pins on what it shows as resident. */
	for (uint32_t x = 0; x < E2E_EXPERTS; x++)
		if (map[x] != MOECACHE_NONE)
			experts[n++] = x;
	for (uint32_t i = 0; i < E2E_LAYERS * E2E_EXPERTS; i++)
		resident += map[i] != MOECACHE_NONE;
	if (resident == 0) {
		e2e_fail(e, "the late client sees nothing resident");
		goto out;
	}
	ret = n ? moecache_acquire(late, 0, experts, n, slots, MOECACHE_ACQ_NO_QUEUE, 0, &res) : 0;
	if (ret || (n && res.n_hits == 0)) {
		ret = e2e_fail(e, "acquire of %u experts the map shows resident: %d, %u hits", n,
			       ret, n ? res.n_hits : 0);
		goto out;
	}
	moecache_release(late, slots, n);
	ret = e2e_decode_check(e, client, out, 300000);
out:
	moecache_close(late);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_sigterm_finishes_copies(struct e2e *e)
{
	static const char *const slow[] = {"--copy-delay-us", "20000", NULL};
	const char *pool = "e2e-term";
	struct moecache_stats st;
	char log[512], out[512];
	pid_t agent, client;
	uint64_t deadline;
	int ret = 0;

	if (e2e_pool_create(e, pool, 64))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, slow);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	client = e2e_decode_start(e, pool, out, 0, 100);
	/* Stop the agent while copies are in flight. */
	deadline = e2e_now_ms() + 60000;
	while (!e2e_stats(e, pool, &st) && st.filling == 0 && e2e_now_ms() < deadline)
		e2e_sleep_ms(5);
	if (st.filling == 0)
		ret = e2e_fail(e, "no copy was ever in flight");
	if (e2e_agent_stop(e, agent))
		ret = -1;
	if (!ret && !e2e_stats(e, pool, &st) && (st.filling != 0 || st.aborts != 0))
		ret = e2e_fail(e, "after SIGTERM: filling %u, aborts %llu (want 0, 0)", st.filling,
			       (unsigned long long)st.aborts);
	if (!ret && !e2e_file_has(log, "stopped cleanly"))
		ret = e2e_fail(e, "the agent did not report a clean stop (see %s)", log);
	e2e_kill(client, SIGKILL);
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_prefetch_hints_served(struct e2e *e)
{
	const char *pool = "e2e-prefetch";
	struct moecache_stats st;
	char log[512], out[512];
	pid_t agent, client;
	int ret = 0;

	if (e2e_pool_create(e, pool, 256))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	client = e2e_decode_run(e, pool, out, 0, 20, "--prefetch");
	if (e2e_decode_check(e, client, out, 300000))
		ret = -1;
	if (!ret && !e2e_stats(e, pool, &st) && (st.prefetches == 0 || st.prefetch_hits == 0))
		ret = e2e_fail(e, "prefetches %llu, prefetch hits %llu (want both > 0)",
			       (unsigned long long)st.prefetches,
			       (unsigned long long)st.prefetch_hits);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

/* The number after key= in a file (the last occurrence), or -1. */
static long long e2e_file_number(const char *path, const char *key)
{
	char buf[65536], *p, *last = NULL;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (p = buf; (p = strstr(p, key)); p++)
		last = p;
	return last ? strtoll(last + strlen(key), NULL, 10) : -1;
}

static int test_parked_prefetch_promoted(struct e2e *e)
{
	const char *pool = "e2e-parked";
	char log[512], out[512];
	long long parked, promoted;
	pid_t agent, client;
	int ret = 0;

	/* 64 slots, fewer than one step's 128 experts: every slot belongs to the
	 * current step, so the agent declines the hints and parks them. */
	if (e2e_pool_create(e, pool, 64))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	client = e2e_decode_run(e, pool, out, 0, 6, "--prefetch");
	if (e2e_decode_check(e, client, out, 300000))
		ret = -1;
	if (e2e_agent_stop(e, agent))
		ret = -1;
	parked = e2e_file_number(log, "parked=");
	promoted = e2e_file_number(log, "promoted=");
	if (!ret && (parked <= 0 || promoted <= 0))
		ret = e2e_fail(e, "parked %lld, promoted %lld (want both > 0)", parked, promoted);
	e2e_pool_destroy(e, pool);
	return ret;
}

/* One access of (layer 0, expert) by mc: a miss waits for the agent's copy. */
static int e2e_touch(struct e2e *e, struct moecache *mc, uint32_t expert)
{
	struct moecache_acquire_result r;
	uint32_t slot;
	int ret = moecache_acquire(mc, 0, &expert, 1, &slot, MOECACHE_ACQ_WAIT, 30000, &r);

	E2E_CHECK(e, ret == 0 && r.n_pinned == 1, "acquire of expert %u: %d, %u pinned", expert,
		  ret, r.n_pinned);
	moecache_release(mc, &slot, 1);
	return 0;
}

static bool e2e_resident(struct moecache *mc, uint32_t expert)
{
	return moecache_map_slot(moecache_map(mc), 0, expert) != MOECACHE_NONE;
}

/*
 * With 4 slots: hot is accessed 4 times, then three others once each, then
 * a miss. LRU evicts hot (the least recent); LFU keeps it (the most used).
 * Returns 0 with *hot_kept set.
 */
static int e2e_hot_then_miss(struct e2e *e, struct moecache *mc, const uint32_t order[5],
			     bool *hot_kept)
{
	for (int i = 0; i < 4; i++)
		if (e2e_touch(e, mc, order[0]))
			return -1;
	for (int i = 1; i < 4; i++)
		if (e2e_touch(e, mc, order[i]))
			return -1;
	/*
	 * The victim comes from the agent's books, and a demand fill its copy
	 * thread committed (pool_publish in agent/pool.c) stays "filling" there,
	 * not evictable, until that thread runs again and hands the copy to the
	 * pool's thread. On one CPU the client and the pool's thread, woken in
	 * turn, can keep it off the CPU for all of the touches above: the hot
	 * expert's slot was then no candidate and lru took the next one (the
	 * test failed when run alone). Give the copy threads time to catch up.
	 */
	e2e_sleep_ms(200);
	if (e2e_touch(e, mc, order[4]))
		return -1;
	E2E_CHECK(e, e2e_resident(mc, order[4]), "expert %u is not resident after its miss",
		  order[4]);
	*hot_kept = e2e_resident(mc, order[0]);
	return 0;
}

static int test_policy_set_switches_victims(struct e2e *e)
{
	static const char *const lru[] = {"--policy", "lru", NULL};
	static const uint32_t first[5] = {0, 1, 2, 3, 4}, second[5] = {1, 2, 3, 4, 5};
	const char *pool = "e2e-policy-set";
	char *set[] = {"moecachectl", "policy", "set", (char *)pool, "lfu", NULL};
	struct moecache *mc = NULL;
	char log[512], out[512];
	bool kept = true;
	uint64_t deadline;
	pid_t agent;
	int ret = -1;

	/* moecachectl installs NAME.policy there, and the agent reads it there. */
	setenv("MOECACHE_RUNDIR", e->workdir, 1);
	if (e2e_pool_create(e, pool, 4))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "ctl");
	agent = e2e_agent_start(e, pool, log, lru);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &mc))
		goto out;
	/* Under lru the hot expert is the victim. */
	if (e2e_hot_then_miss(e, mc, first, &kept))
		goto out;
	if (kept) {
		ret = e2e_fail(
		    e, "under lru, expert 0 was kept (want it evicted as the least recent)");
		goto out;
	}
	if (e2e_run(out, set, 30000)) {
		ret = e2e_fail(e, "moecachectl policy set failed (see %s)", out);
		goto out;
	}
	deadline = e2e_now_ms() + 30000;
	while (!e2e_file_has(log, "policy now lfu")) {
		if (e2e_now_ms() > deadline) {
			ret = e2e_fail(e, "the agent did not switch to lfu (see %s)", log);
			goto out;
		}
		e2e_sleep_ms(20);
	}
	/* The same pattern now keeps the hot expert. */
	if (e2e_hot_then_miss(e, mc, second, &kept))
		goto out;
	ret = kept ? 0
		   : e2e_fail(e, "after policy set lfu, expert 1 was evicted (want the "
				 "least used evicted)");
out:
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	unsetenv("MOECACHE_RUNDIR");
	return ret;
}

/*
 * SIGHUP, then waits for the statistics line each pool logs once it has
 * reloaded (at info level: the agent must log at 6 or more).
 */
static int e2e_agent_reload(struct e2e *e, pid_t agent, const char *log)
{
	unsigned int before = e2e_file_count(log, "resident=");
	uint64_t deadline = e2e_now_ms() + 30000;

	kill(agent, SIGHUP);
	while (e2e_file_count(log, "resident=") <= before) {
		E2E_CHECK(e, e2e_now_ms() < deadline,
			  "no statistics line after SIGHUP: not reloaded, or not at info level "
			  "(see %s)",
			  log);
		e2e_sleep_ms(20);
	}
	return 0;
}

/*
 * Pins: agent_reload rebuilt the settings from the defaults and the file,
 * so an agent started with --config F --log-level 7 fell to F's level
 * (notice) at the first SIGHUP, and its info lines stopped.
 */
static int test_sighup_keeps_command_line(struct e2e *e)
{
	const char *pool = "e2e-sighup-flags";
	char log[512], conf[512], line[128];
	const char *extra[] = {"--config", conf, NULL};
	pid_t agent;
	int fd, ret = -1;

	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, conf, sizeof(conf), pool, "conf");
	/* The file says notice (5); the command line (e2e_agent_start) says 7. */
	fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	E2E_CHECK(e, fd >= 0, "create %s: %s", conf, strerror(errno));
	snprintf(line, sizeof(line), "pool = %s\nlog_level = 5\n", pool);
	E2E_CHECK(e, write(fd, line, strlen(line)) == (ssize_t)strlen(line), "write %s", conf);
	close(fd);
	if (e2e_pool_create(e, pool, 4))
		return -1;
	agent = e2e_agent_start(e, pool, log, extra);
	if (e2e_agent_ready(e, log, 30000))
		goto out;
	if (e2e_agent_reload(e, agent, log))
		goto out;
	/* The level after the first reload decides whether the second is seen. */
	ret = e2e_agent_reload(e, agent, log);
out:
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

/*
 * Pins: where the agent's --profile file is also the file `profile load`
 * installs (RUN_DIR/POOL.profile.json, as under systemd), the agent's own
 * save (SIGUSR1) was taken at the next SIGHUP for an installed profile and
 * the policy was rebuilt over it.
 */
static int test_own_profile_not_reinstalled(struct e2e *e)
{
	const char *pool = "e2e-own-profile";
	char log[512], profile[512];
	const char *extra[] = {"--profile", profile, NULL};
	struct moecache *mc = NULL;
	uint64_t deadline;
	pid_t agent;
	int ret = -1;

	setenv("MOECACHE_RUNDIR", e->workdir, 1);
	e2e_path(e, log, sizeof(log), pool, "agent");
	snprintf(profile, sizeof(profile), "%s/%s.profile.json", e->workdir, pool);
	unlink(profile);
	if (e2e_pool_create(e, pool, 4))
		goto out_env;
	agent = e2e_agent_start(e, pool, log, extra);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &mc))
		goto out;
	for (uint32_t x = 0; x < 3; x++)
		if (e2e_touch(e, mc, x))
			goto out;
	kill(agent, SIGUSR1);
	deadline = e2e_now_ms() + 30000;
	while (!e2e_file_has(log, "profile saved to")) {
		if (e2e_now_ms() > deadline) {
			ret = e2e_fail(e, "the agent did not save its profile (see %s)", log);
			goto out;
		}
		e2e_sleep_ms(20);
	}
	if (e2e_agent_reload(e, agent, log))
		goto out;
	ret = e2e_file_has(log, "over the installed profile")
		  ? e2e_fail(e,
			     "SIGHUP took the agent's own save for an installed profile "
			     "(see %s)",
			     log)
		  : 0;
out:
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
out_env:
	unsetenv("MOECACHE_RUNDIR");
	return ret;
}

/*
 * Pins: with nothing accessed the agent left its profile file untouched at
 * SIGUSR1, so `moecachectl profile save --from-agent`, which waits for the
 * file to be rewritten, timed out.
 */
static int test_profile_from_agent_idle(struct e2e *e)
{
	const char *pool = "e2e-profile-idle";
	char log[512], profile[512], out[512], copy[512], timeout[] = "10";
	const char *extra[] = {"--profile", profile, NULL};
	char *save[] = {"moecachectl",	"profile",   "save",  (char *)pool, copy,
			"--from-agent", "--timeout", timeout, NULL};
	pid_t agent;
	int ret = -1;

	setenv("MOECACHE_RUNDIR", e->workdir, 1);
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "ctl");
	e2e_path(e, copy, sizeof(copy), pool, "copy.json");
	snprintf(profile, sizeof(profile), "%s/%s.profile.json", e->workdir, pool);
	unlink(profile);
	unlink(copy);
	if (e2e_pool_create(e, pool, 4))
		goto out_env;
	agent = e2e_agent_start(e, pool, log, extra);
	if (e2e_agent_ready(e, log, 30000))
		goto out;
	if (e2e_run(out, save, 30000)) {
		ret =
		    e2e_fail(e, "profile save --from-agent of an idle agent failed (see %s)", out);
		goto out;
	}
	ret = access(copy, R_OK) ? e2e_fail(e, "no profile copied to %s", copy) : 0;
out:
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
out_env:
	unsetenv("MOECACHE_RUNDIR");
	return ret;
}

/* The GPU settings reach the copy engine: the library named on the command line is the one loaded.
 */
static int test_gpu_library_from_flags(struct e2e *e)
{
	static const char *const cuda[] = {"--backend", "cuda", "--gpu-library",
					   "/nonexistent/libcuda-e2e.so.1", NULL};
	const char *pool = "e2e-gpu-flags";
	char log[512];
	pid_t agent;
	int ret;

	if (e2e_pool_create(e, pool, 4))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, cuda);
	ret = e2e_wait(agent, 30000);
	if (ret == -ETIMEDOUT)
		e2e_kill(agent, SIGKILL);
	e2e_pool_destroy(e, pool);
	E2E_CHECK(e, ret == 1, "moecached exited with %d (want 1: no such driver library)", ret);
	E2E_CHECK(e, e2e_file_has(log, "/nonexistent/libcuda-e2e.so.1"),
		  "the agent's log does not name the --gpu-library it was given (see %s)", log);
	return 0;
}

/* ---- tiers: pools of several banks ---- */

/* 10% of the 16 x 64 experts in tier 0, 20% in each of two lower tiers. */
#define E2E_TIER0_SLOTS 102
#define E2E_TIER1_SLOTS 204
#define E2E_TIERS 3
#define E2E_MAX_BANKS 8
#define E2E_STR_(x) #x
#define E2E_STR(x) E2E_STR_(x)
_Static_assert(E2E_TIER0_SLOTS == E2E_LAYERS * E2E_EXPERTS / 10 &&
		   E2E_TIER1_SLOTS == E2E_LAYERS * E2E_EXPERTS / 5,
	       "the tiers are 10% and 20% of the experts");

/* A pool whose banks are the --bank values in banks (NULL-terminated), filled. */
static int e2e_pool_create_banks(struct e2e *e, const char *pool, const char *const *banks)
{
	char layers[16], experts[16], bytes[32], out[512];
	char *argv[32] = {"moecachectl", "pool",      "create", (char *)pool,	  "--layers",
			  layers,	 "--experts", experts,	"--expert-bytes", bytes};
	char *fill[] = {"moecache-decode", "--pool", (char *)pool, "--fill", E2E_SHAPE, NULL};
	int n = 10;

	for (; *banks && n < 30; banks++) {
		argv[n++] = "--bank";
		argv[n++] = (char *)*banks;
	}
	argv[n] = NULL;
	snprintf(layers, sizeof(layers), "%u", E2E_LAYERS);
	snprintf(experts, sizeof(experts), "%u", E2E_EXPERTS);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)e->expert_bytes);
	e2e_path(e, out, sizeof(out), pool, "create");
	E2E_CHECK(e, e2e_run(out, argv, 30000) == 0, "cannot create pool %s (see %s)", pool, out);
	e2e_path(e, out, sizeof(out), pool, "fill");
	E2E_CHECK(e, e2e_run(out, fill, 120000) == 0, "cannot fill pool %s", pool);
	return 0;
}

static const char *const e2e_three_tiers[] = {
    "0:cpu:0:" E2E_STR(E2E_TIER0_SLOTS),
    "1:cpu:1:" E2E_STR(E2E_TIER1_SLOTS),
    "2:cpu:2:" E2E_STR(E2E_TIER1_SLOTS),
    NULL,
};

/* The banks of an attached pool, as the map's bank table gives them. */
static const struct moecache_map_bank *e2e_banks(struct moecache *mc, uint32_t *n)
{
	const struct moecache_map_header *hdr = moecache_map(mc)->hdr;

	*n = hdr->n_banks;
	return (const struct moecache_map_bank *)((const char *)hdr + hdr->bank_off);
}

static uint32_t e2e_bank_of(const struct moecache_map_bank *b, uint32_t n, uint32_t slot)
{
	for (uint32_t i = 0; i < n; i++)
		if (slot >= b[i].slot_begin && slot - b[i].slot_begin < b[i].n_slots)
			return i;
	return MOECACHE_NONE;
}

/* A small xorshift: each client's experts are its own, and repeatable. */
static uint32_t e2e_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

/* Waits across an agent's death, for the next one (as the decode client does). */
#define E2E_WAIT (MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING)

static int e2e_client_error(const char *what, int err)
{
	printf("%s: %s\n", what, strerror(-err));
	return 3;
}

/*
 * A verifying client of a pool of several banks (run in a child): each
 * step acquires 8 experts per layer, skewed towards low ids so that some
 * are hot, and compares every pinned slot, in the bank it belongs to,
 * with the expert's host pages. Prints its hits per bank and its misses.
 * Exit status: 0 verified, 2 a slot differed, 3 an error.
 */
static int e2e_tier_client(const char *pool, uint64_t seed, uint32_t steps)
{
	const struct moecache_pool_info *info;
	const struct moecache_map_bank *banks;
	uint64_t hits[E2E_MAX_BANKS] = {0}, misses = 0, total_hits = 0;
	const char *bank_base[E2E_MAX_BANKS] = {0};
	uint64_t stride[E2E_MAX_BANKS];
	struct moecache *mc;
	uint32_t n_banks;
	size_t host_len;
	void *host;

	int ret;

	ret = moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, &mc);
	if (!ret)
		ret = moecache_host_map(mc, false, &host, &host_len);
	if (ret)
		return e2e_client_error("attach", ret);
	info = moecache_pool(mc);
	banks = e2e_banks(mc, &n_banks);
	if (n_banks < 2 || n_banks > E2E_MAX_BANKS)
		return e2e_client_error("the bank table", -EPROTO);
	for (uint32_t step = 0; step < steps; step++) {
		for (uint32_t layer = 0; layer < info->n_layers; layer++) {
			uint32_t experts[8], slots[8], before[8], n = 0;
			struct moecache_acquire_result res;

			while (n < 8) {
				/* The square of a uniform draw: low ids come far more often. */
				uint32_t r = e2e_rand(&seed) % 1024;
				uint32_t x = r * r / (1024 * 1024 / info->n_experts), k;

				for (k = 0; k < n && experts[k] != x; k++)
					;
				if (k == n)
					experts[n++] = x;
			}
			/* Where each is just before: the split of the hits by bank. */
			for (uint32_t k = 0; k < 8; k++)
				before[k] = moecache_map_slot(moecache_map(mc), layer, experts[k]);
			ret =
			    moecache_acquire(mc, layer, experts, 8, slots, E2E_WAIT, 120000, &res);
			if (ret)
				return e2e_client_error("acquire", ret);
			misses += 8 - res.n_hits;
			total_hits += res.n_hits;
			for (uint32_t k = 0; k < 8; k++)
				if (before[k] != MOECACHE_NONE &&
				    e2e_bank_of(banks, n_banks, before[k]) != MOECACHE_NONE)
					hits[e2e_bank_of(banks, n_banks, before[k])]++;
			for (uint32_t k = 0; k < 8; k++) {
				uint32_t b = e2e_bank_of(banks, n_banks, slots[k]);
				uint32_t idx =
				    moecache_map_idx(moecache_map(mc), layer, experts[k]);

				if (b == MOECACHE_NONE)
					return e2e_client_error("a slot in no bank", -EPROTO);
				/* Each bank is imported once it is first used (the agent sets
				 * them). */
				if (!bank_base[b]) {
					struct moecache_bank desc;
					void *p;

					ret = moecache_bank_get_index(mc, b, &desc);
					if (ret)
						return e2e_client_error("BANK_GET", ret);
					p = mmap(NULL, desc.bank_bytes, PROT_READ, MAP_SHARED,
						 desc.fd, 0);
					close(desc.fd);
					if (p == MAP_FAILED)
						return e2e_client_error("mmap of a bank", -errno);
					bank_base[b] = p;
					stride[b] = desc.slot_stride;
				}
				if (memcmp(bank_base[b] +
					       (slots[k] - banks[b].slot_begin) * stride[b],
					   (const char *)host + (uint64_t)idx * info->expert_bytes,
					   info->expert_bytes)) {
					printf("layer %u expert %u: slot %u of bank %u differs\n",
					       layer, experts[k], slots[k], b);
					return 2;
				}
			}
			ret = moecache_release(mc, slots, 8);
			if (ret)
				return e2e_client_error("release", ret);
		}
	}
	for (uint32_t b = 0; b < n_banks; b++)
		printf("bank %u hits %llu\n", b, (unsigned long long)hits[b]);
	printf("hits %llu\nmisses %llu\nverified=ok\n", (unsigned long long)total_hits,
	       (unsigned long long)misses);
	return 0;
}

static pid_t e2e_tier_client_start(const char *pool, const char *out, uint64_t seed, uint32_t steps)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(126);
		int status = e2e_tier_client(pool, seed, steps);

		fflush(stdout);
		_exit(status);
	}
	return pid;
}

/*
 * Every expert is resident in at most one bank: owner[] names it in one
 * slot at most, and map[] points there. per_bank (may be NULL) receives
 * the resident experts of each bank.
 */
static int e2e_check_one_bank(struct e2e *e, struct moecache *mc, uint32_t *per_bank)
{
	const struct moecache_pool_info *info = moecache_pool(mc);
	uint32_t n_idx = info->n_layers * info->n_local, n_banks;
	const struct moecache_map_bank *banks = e2e_banks(mc, &n_banks);
	uint32_t *owner = malloc(info->n_slots * sizeof(*owner));
	uint32_t *map = malloc(n_idx * sizeof(*map)), *seen = malloc(n_idx * sizeof(*seen));
	int ret = 0;

	if (!owner || !map || !seen || moecache_map_snapshot(moecache_map(mc), owner, map)) {
		ret = e2e_fail(e, "no snapshot of the map");
		goto out;
	}
	memset(seen, 0xff, n_idx * sizeof(*seen));
	for (uint32_t b = 0; per_bank && b < n_banks; b++)
		per_bank[b] = 0;
	for (uint32_t s = 0; s < info->n_slots && !ret; s++) {
		uint32_t o = owner[s];

		if (o == MOECACHE_NONE || (o & MOECACHE_OWNER_FILLING))
			continue;
		if (o >= n_idx)
			ret = e2e_fail(e, "slot %u: owner %#x out of range", s, o);
		else if (seen[o] != MOECACHE_NONE)
			ret =
			    e2e_fail(e, "expert idx %u resident in slots %u and %u", o, seen[o], s);
		else
			seen[o] = s;
		if (!ret && per_bank)
			per_bank[e2e_bank_of(banks, n_banks, s)]++;
	}
	for (uint32_t idx = 0; idx < n_idx && !ret; idx++)
		if (map[idx] != seen[idx])
			ret = e2e_fail(e, "expert idx %u: map says slot %#x, owners say %#x", idx,
				       map[idx], seen[idx]);
out:
	free(owner);
	free(map);
	free(seen);
	return ret;
}

/*
 * The agent's last per-bank lines and its count of moves, as TAP comments;
 * between CPU banks every move of a resident expert is device to device.
 */
static int e2e_tier_log(struct e2e *e, const char *log)
{
	char buf[65536], *line, *save = NULL;
	unsigned long long peer = 0;
	ssize_t n;
	int fd = open(log, O_RDONLY | O_CLOEXEC);

	E2E_CHECK(e, fd >= 0, "no agent log %s", log);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	E2E_CHECK(e, n > 0, "empty agent log %s", log);
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *moves = strstr(line, "moves: ");

		if (strstr(line, "(tier ") || moves)
			printf("# %s\n", line);
		if (moves)
			peer = strtoull(moves + strlen("moves: "), NULL, 10);
	}
	E2E_CHECK(e, peer > 0, "no move between banks was device to device (see %s)", log);
	return 0;
}

/* moecachectl stats and top show a row per bank of pool. */
static int e2e_ctl_bank_rows(struct e2e *e, const char *pool)
{
	char *stats[] = {"moecachectl", "stats", (char *)pool, "--json", NULL};
	char *top[] = {"moecachectl", "top",	    (char *)pool, "--iterations",
		       "1",	      "--interval", "0.2",	  NULL};
	char out[512];

	e2e_path(e, out, sizeof(out), pool, "stats");
	E2E_CHECK(e, e2e_run(out, stats, 30000) == 0, "moecachectl stats failed (see %s)", out);
	E2E_CHECK(e, e2e_file_has(out, "\"banks\"") && e2e_file_has(out, "\"hit_rate\""),
		  "moecachectl stats --json has no per-bank rows (see %s)", out);
	e2e_path(e, out, sizeof(out), pool, "top");
	E2E_CHECK(e, e2e_run(out, top, 30000) == 0, "moecachectl top failed (see %s)", out);
	E2E_CHECK(e, e2e_file_has(out, "commit/s") && e2e_file_has(out, " cpu "),
		  "moecachectl top has no per-bank rows (see %s)", out);
	return 0;
}

static int test_tiers_three_banks_four_clients(struct e2e *e)
{
	const char *pool = "e2e-tiers";
	uint32_t per_bank[E2E_TIERS] = {0};
	struct moecache_stats bank[E2E_TIERS], st;
	char log[512], log2[512], out[4][512];
	struct moecache *mc = NULL;
	pid_t agent, clients[4];
	uint64_t accesses;
	int ret = 0;

	if (e2e_pool_create_banks(e, pool, e2e_three_tiers))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, log2, sizeof(log2), pool, "agent2");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	/* moecache-decode runs each expert in the bank it is in and checks every output. */
	for (int i = 0; i < 4; i++) {
		char name[32];

		snprintf(name, sizeof(name), "client%d", i);
		e2e_path(e, out[i], sizeof(out[i]), pool, name);
		clients[i] = e2e_decode_start(e, pool, out[i], (uint32_t)i * 60, 40);
	}
	/* kill -9 once the tiers are busy: tier 0 turned over, demotions under way. */
	while (!e2e_stats(e, pool, &st) && st.commits < E2E_TIER0_SLOTS * 2 &&
	       e2e_wait(clients[0], 0) == -ETIMEDOUT)
		e2e_sleep_ms(50);
	e2e_kill(agent, SIGKILL);
	e2e_sleep_ms(500);
	if (e2e_stats(e, pool, &st))
		ret = -1;
	else if (st.agent_pid != 0 || st.filling != 0)
		ret = e2e_fail(e, "after kill -9: agent_pid %u, filling %u (want 0, 0)",
			       st.agent_pid, st.filling);
	if (!ret && !e2e_client(e, pool, &mc))
		ret = e2e_check_one_bank(e, mc, NULL);
	agent = e2e_agent_start(e, pool, log2, NULL);
	if (e2e_agent_ready(e, log2, 30000))
		ret = -1;
	if (!ret && !e2e_file_has(log2, "warm restart: 3 banks adopted"))
		ret = e2e_fail(e, "the new agent did not adopt the three banks (see %s)", log2);
	for (int i = 0; i < 4; i++)
		if (e2e_decode_check(e, clients[i], out[i], 600000))
			ret = -1;
	if (!ret && mc)
		ret = e2e_check_one_bank(e, mc, per_bank);
	/* Only demotions put experts into the lower banks. */
	if (!ret && (per_bank[1] == 0 || per_bank[2] == 0))
		ret = e2e_fail(e, "resident per bank %u, %u, %u: a lower bank stayed empty",
			       per_bank[0], per_bank[1], per_bank[2]);
	for (uint32_t b = 0; !ret && b < E2E_TIERS; b++)
		if (moecache_stats_bank(mc, b, &bank[b]))
			ret = e2e_fail(e, "no stats of bank %u", b);
	if (!ret && !e2e_stats(e, pool, &st)) {
		accesses = st.hits + st.misses;
		printf("# tiers: hit rate tier 0 %.3f, tier 1 %.3f, tier 2 %.3f, miss %.3f "
		       "(%llu accesses; resident %u/%u/%u)\n",
		       (double)bank[0].hits / (double)accesses,
		       (double)bank[1].hits / (double)accesses,
		       (double)bank[2].hits / (double)accesses,
		       (double)st.misses / (double)accesses, (unsigned long long)accesses,
		       per_bank[0], per_bank[1], per_bank[2]);
		if (bank[1].hits + bank[2].hits == 0)
			ret = e2e_fail(e, "no hit was served from a lower bank");
	}
	if (!ret)
		ret = e2e_ctl_bank_rows(e, pool);
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	if (!ret)
		ret = e2e_tier_log(e, log2);
	e2e_pool_destroy(e, pool);
	return ret;
}

static int test_tiers_static_placement_slices(struct e2e *e)
{
	static const char *const banks[] = {"0:cpu:0:32", "1:cpu:1:64", "2:cpu:2:64", NULL};
	static const char *const placement[] = {"--tier-placement", "static", NULL};
	const char *pool = "e2e-tiers-static";
	uint32_t owner[160], in_bank[E2E_TIERS] = {0}, n_banks;
	const struct moecache_map_bank *layout;
	struct moecache *mc = NULL;
	char log[512], out[512];
	pid_t agent, client;
	int ret = 0;

	if (e2e_pool_create_banks(e, pool, banks))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, placement);
	if (e2e_agent_ready(e, log, 30000))
		return -1;
	client = e2e_tier_client_start(pool, out, 11, 12);
	ret = e2e_wait(client, 300000);
	if (ret == -ETIMEDOUT)
		e2e_kill(client, SIGKILL);
	ret = e2e_decode_verdict(e, ret, out);
	if (!ret && !e2e_file_has(log, "(static placement)"))
		ret = e2e_fail(e, "the agent does not say it places statically (see %s)", log);
	if (!ret && !e2e_client(e, pool, &mc)) {
		layout = e2e_banks(mc, &n_banks);
		moecache_map_snapshot(moecache_map(mc), owner, NULL);
		/* Two equal lower banks: experts 0..31 of each layer in bank 1, 32..63 in 2. */
		for (uint32_t s = layout[1].slot_begin; s < 160 && !ret; s++) {
			uint32_t b = e2e_bank_of(layout, n_banks, s), o = owner[s];

			if (o == MOECACHE_NONE || (o & MOECACHE_OWNER_FILLING))
				continue;
			in_bank[b]++;
			if ((b == 1) != (o % E2E_EXPERTS < E2E_EXPERTS / 2))
				ret = e2e_fail(e,
					       "bank %u holds expert %u of layer %u, not its slice",
					       b, o % E2E_EXPERTS, o / E2E_EXPERTS);
		}
		if (!ret && (!in_bank[1] || !in_bank[2]))
			ret = e2e_fail(e, "lower banks hold %u and %u experts: no demotion",
				       in_bank[1], in_bank[2]);
	}
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

/* A demotion in flight: a lower bank's slot filling with an expert resident in another. */
static bool e2e_demotion_in_flight(struct moecache *mc)
{
	const struct moecache_pool_info *info = moecache_pool(mc);
	uint32_t owner[64], n_banks;
	const struct moecache_map_bank *banks = e2e_banks(mc, &n_banks);

	if (info->n_slots > 64 || moecache_map_snapshot(moecache_map(mc), owner, NULL))
		return false;
	for (uint32_t s = banks[1].slot_begin; s < info->n_slots; s++) {
		uint32_t o = owner[s];

		if (o != MOECACHE_NONE && (o & MOECACHE_OWNER_FILLING))
			for (uint32_t t = 0; t < info->n_slots; t++)
				if (owner[t] == (o & MOECACHE_OWNER_IDX_MASK))
					return true;
	}
	return false;
}

/* Every resident slot equals its expert's host pages, in the bank it belongs to. */
static int e2e_check_resident_bytes(struct e2e *e, struct moecache *mc)
{
	const struct moecache_pool_info *info = moecache_pool(mc);
	uint32_t n_banks, owner[64];
	const struct moecache_map_bank *banks = e2e_banks(mc, &n_banks);
	size_t host_len;
	void *host;
	int ret = 0;

	E2E_CHECK(e, info->n_slots <= 64 && n_banks <= E2E_MAX_BANKS, "pool too big for the check");
	E2E_CHECK(e, !moecache_host_map(mc, false, &host, &host_len), "no host pages");
	E2E_CHECK(e, !moecache_map_snapshot(moecache_map(mc), owner, NULL), "no snapshot");
	for (uint32_t b = 0; b < n_banks && !ret; b++) {
		struct moecache_bank desc;
		const char *base;

		E2E_CHECK(e, !moecache_bank_get_index(mc, b, &desc), "no object for bank %u", b);
		base = mmap(NULL, desc.bank_bytes, PROT_READ, MAP_SHARED, desc.fd, 0);
		close(desc.fd);
		E2E_CHECK(e, base != MAP_FAILED, "cannot map bank %u", b);
		for (uint32_t s = banks[b].slot_begin; s < banks[b].slot_begin + banks[b].n_slots;
		     s++) {
			uint32_t o = owner[s];

			if (o == MOECACHE_NONE || (o & MOECACHE_OWNER_FILLING))
				continue;
			if (memcmp(base + (uint64_t)(s - banks[b].slot_begin) * desc.slot_stride,
				   (const char *)host + (uint64_t)o * info->expert_bytes,
				   info->expert_bytes)) {
				ret = e2e_fail(e, "slot %u of bank %u: not expert idx %u's bytes",
					       s, b, o);
				break;
			}
		}
		munmap((void *)base, desc.bank_bytes);
	}
	return ret;
}

static int test_tiers_kill_during_demotion(struct e2e *e)
{
	static const char *const banks[] = {"0:cpu:0:8", "1:cpu:1:12", "2:cpu:2:12", NULL};
	static const char *const slow[] = {"--copy-delay-us", "200000", NULL};
	const char *pool = "e2e-tiers-kill";
	struct moecache *mc = NULL;
	struct moecache_stats st;
	char log[512], out[512];
	uint64_t deadline;
	pid_t agent, client;
	bool seen = false;
	int ret = 0;

	if (e2e_pool_create_banks(e, pool, banks))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	e2e_path(e, out, sizeof(out), pool, "client");
	agent = e2e_agent_start(e, pool, log, slow);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &mc))
		return -1;
	client = e2e_tier_client_start(pool, out, 7, 50);
	deadline = e2e_now_ms() + 240000;
	while (!(seen = e2e_demotion_in_flight(mc)) && e2e_now_ms() < deadline &&
	       e2e_wait(client, 0) == -ETIMEDOUT)
		e2e_sleep_ms(5);
	e2e_kill(agent, SIGKILL);
	e2e_kill(client, SIGKILL);
	if (!seen)
		ret = e2e_fail(e, "no demotion was seen in flight: the test did not race one");
	/* The agent's death aborts its fills: each expert stays where it was. */
	if (!ret && !e2e_stats(e, pool, &st) && (st.agent_pid || st.filling))
		ret = e2e_fail(e, "after kill -9: agent_pid %u, filling %u (want 0, 0)",
			       st.agent_pid, st.filling);
	if (!ret)
		ret = e2e_check_one_bank(e, mc, NULL);
	if (!ret)
		ret = e2e_check_resident_bytes(e, mc);
	moecache_close(mc);
	e2e_pool_destroy(e, pool);
	return ret;
}

/*
 * CUDA banks on the fake driver's four GPUs (peers 0-1 and 2-3): each bank
 * is on the GPU its layout names, clients' slots hold the right bytes, and
 * moves between banks on peer GPUs 2 and 3 are device to device.
 */
static int test_tiers_cuda_banks_on_named_devices(struct e2e *e)
{
	static const char *const banks[] = {"0:cuda:2:8", "1:cuda:3:12", "2:cuda:0:12", NULL};
	static const uint32_t device[] = {2, 3, 0};
	static const char *const cuda[] = {"--gpu-library", "/usr/bin/libmoecache-fakecuda.so",
					   NULL};
	const char *pool = "e2e-tiers-cuda";
	char log[512], out[3][512];
	struct moecache *mc = NULL;
	pid_t agent, clients[3];
	int ret = 0;

	if (e2e_pool_create_banks(e, pool, banks))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	/* The fake driver reads these in the agent (inherited through fork). */
	setenv("FAKE_CUDA_DEVICES", "4", 1);
	setenv("FAKE_CUDA_PEER_GROUP", "2", 1);
	agent = e2e_agent_start(e, pool, log, cuda);
	unsetenv("FAKE_CUDA_DEVICES");
	unsetenv("FAKE_CUDA_PEER_GROUP");
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &mc)) {
		e2e_kill(agent, SIGKILL);
		e2e_pool_destroy(e, pool);
		return -1;
	}
	for (uint32_t b = 0; b < 3 && !ret; b++) {
		struct moecache_bank desc;
		int err = moecache_bank_get_index(mc, b, &desc);

		if (err) {
			ret = e2e_fail(e, "BANK_GET of bank %u: %s", b, strerror(-err));
			break;
		}
		close(desc.fd);
		if (desc.backend != MOECACHE_BACKEND_CUDA || desc.device != device[b])
			ret = e2e_fail(e, "bank %u: backend %u device %u (want cuda on GPU %u)", b,
				       desc.backend, desc.device, device[b]);
	}
	/* The fake's exported handle is a memfd: the clients map and compare it. */
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "client%d", i);
		e2e_path(e, out[i], sizeof(out[i]), pool, name);
		clients[i] = ret ? -1 : e2e_tier_client_start(pool, out[i], 11 + (uint64_t)i, 20);
	}
	for (int i = 0; i < 3; i++) {
		int status = clients[i] > 0 ? e2e_wait(clients[i], 300000) : 0;

		if (status == -ETIMEDOUT)
			e2e_kill(clients[i], SIGKILL);
		if (!ret && clients[i] > 0)
			ret = e2e_decode_verdict(e, status, out[i]);
	}
	if (!ret)
		ret = e2e_check_one_bank(e, mc, NULL);
	if (!ret)
		ret = e2e_check_resident_bytes(e, mc);
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	/* Moves between GPUs 2 and 3 (peers) are device to device. */
	if (!ret)
		ret = e2e_tier_log(e, log);
	e2e_pool_destroy(e, pool);
	return ret;
}

/* ---- CPU admissions (MOECACHE_REQ_CPU) against demands ---- */

/*
 * A pool of experts three copy chunks long (the CPU engine copies a
 * yielding copy in 1 MiB pieces, copy_queue.h), not loaded: these tests
 * watch the order of copies, not their bytes. With --copy-delay-us, each
 * copy pauses in its middle chunk, so a demand that arrives during the
 * pause of a CPU admission's copy can go before that copy's last chunk.
 */
#define E2E_ORDER_LAYERS 2
#define E2E_ORDER_EXPERTS 8
#define E2E_ORDER_BYTES (3ull << 20)
#define E2E_ORDER_POLL_MS 1

static const char *const e2e_order_agent[] = {"--copy-delay-us", "400000", "--copy-threads", "1",
					      NULL};

static int e2e_order_pool_create(struct e2e *e, const char *pool, uint32_t slots)
{
	char layers[16], experts[16], nslots[16], bytes[32], out[512];
	char *argv[] = {"moecachectl",	  "pool",      "create", (char *)pool, "--layers",
			layers,		  "--experts", experts,	 "--slots",    nslots,
			"--expert-bytes", bytes,       NULL};

	snprintf(layers, sizeof(layers), "%u", E2E_ORDER_LAYERS);
	snprintf(experts, sizeof(experts), "%u", E2E_ORDER_EXPERTS);
	snprintf(nslots, sizeof(nslots), "%u", slots);
	snprintf(bytes, sizeof(bytes), "%llu", E2E_ORDER_BYTES);
	e2e_path(e, out, sizeof(out), pool, "create");
	E2E_CHECK(e, e2e_run(out, argv, 30000) == 0, "cannot create pool %s", pool);
	return 0;
}

struct e2e_watched {
	uint32_t layer, expert;
	long seen; /* the poll round it was first seen resident, or -1 */
};

/* Whether (layer, expert) is being filled: a slot's owner is FILLING|idx. */
static bool e2e_filling(struct moecache *mc, uint32_t slots, uint32_t layer, uint32_t expert)
{
	const struct moecache_map *m = moecache_map(mc);
	uint32_t idx = moecache_map_idx(m, layer, expert);

	for (uint32_t s = 0; s < slots; s++)
		if (moecache_map_owner(m, s) == (MOECACHE_OWNER_FILLING | idx))
			return true;
	return false;
}

/* Waits until every one of w[0..n) is being filled (its copy queued in the agent). */
static int e2e_wait_filling(struct e2e *e, struct moecache *mc, uint32_t slots,
			    const struct e2e_watched *w, uint32_t n)
{
	uint64_t deadline = e2e_now_ms() + 30000;

	for (uint32_t i = 0; i < n; i++)
		while (!e2e_filling(mc, slots, w[i].layer, w[i].expert)) {
			E2E_CHECK(e, e2e_now_ms() < deadline, "expert %u/%u never started filling",
				  w[i].layer, w[i].expert);
			e2e_sleep_ms(E2E_ORDER_POLL_MS);
		}
	return 0;
}

/* Polls the map until every one of w[0..n) has been resident, noting the round of each. */
static int e2e_watch_order(struct e2e *e, struct moecache *mc, struct e2e_watched *w, uint32_t n)
{
	uint64_t deadline = e2e_now_ms() + 60000;
	uint32_t left = n;

	for (uint32_t i = 0; i < n; i++)
		w[i].seen = -1;
	for (long round = 0; left; round++) {
		for (uint32_t i = 0; i < n; i++)
			if (w[i].seen < 0 && moecache_map_slot(moecache_map(mc), w[i].layer,
							       w[i].expert) != MOECACHE_NONE) {
				w[i].seen = round;
				left--;
			}
		E2E_CHECK(e, !left || e2e_now_ms() < deadline,
			  "%u of the watched experts never became resident", left);
		e2e_sleep_ms(E2E_ORDER_POLL_MS);
	}
	return 0;
}

/* Queues experts of layer as CPU admissions (MOECACHE_ACQ_CPU): all must miss. */
static int e2e_admit_cpu(struct e2e *e, struct moecache *mc, uint32_t layer,
			 const uint32_t *experts, uint32_t n)
{
	struct moecache_acquire_result r;
	uint32_t slots[E2E_ORDER_EXPERTS];
	int ret = moecache_acquire(mc, layer, experts, n, slots, MOECACHE_ACQ_CPU, 0, &r);

	E2E_CHECK(e, ret == 0 && r.n_hits == 0, "CPU acquire of %u experts: %d, %u hits", n, ret,
		  r.n_hits);
	return 0;
}

/* The driver's state after the agent settled: nothing filling, queued or in flight. */
static int e2e_settled(struct e2e *e, const char *pool, struct moecache_stats *st)
{
	uint64_t deadline = e2e_now_ms() + 30000;

	do {
		if (e2e_stats(e, pool, st))
			return -1;
		if (!st->filling && !st->queued && !st->inflight)
			return 0;
		e2e_sleep_ms(10);
	} while (e2e_now_ms() < deadline);
	return e2e_fail(e, "the pool did not settle: filling %u, queued %u, in flight %u",
			st->filling, st->queued, st->inflight);
}

/* A pool of order tests, its slowed agent and two clients. */
struct e2e_order {
	const char *pool;
	char log[512];
	pid_t agent;
	struct moecache *a, *b;
};

/* Creates pool with slots, starts its agent, attaches a and b; -1: call e2e_order_end all the same.
 */
static int e2e_order_begin(struct e2e *e, struct e2e_order *o, const char *pool, uint32_t slots)
{
	*o = (struct e2e_order){.pool = pool, .agent = -1};
	if (e2e_order_pool_create(e, pool, slots))
		return -1;
	e2e_path(e, o->log, sizeof(o->log), pool, "agent");
	o->agent = e2e_agent_start(e, pool, o->log, e2e_order_agent);
	if (e2e_agent_ready(e, o->log, 30000) || e2e_client(e, pool, &o->a) ||
	    e2e_client(e, pool, &o->b))
		return -1;
	return 0;
}

/*
 * Closes the clients, stops the agent (which must exit 0), checks that its
 * last stats line says key=want (key NULL: nothing), destroys the pool;
 * returns ret, or -1 on a failure here.
 */
static int e2e_order_end(struct e2e *e, struct e2e_order *o, int ret, const char *key,
			 long long want)
{
	long long got;

	moecache_close(o->a);
	moecache_close(o->b);
	if (o->agent > 0 && e2e_agent_stop(e, o->agent))
		ret = -1;
	got = key ? e2e_file_number(o->log, key) : want;
	if (!ret && got != want)
		ret = e2e_fail(e, "the agent says %s%lld (want %lld)", key, got, want);
	e2e_pool_destroy(e, o->pool);
	return ret ? -1 : 0;
}

/*
 * Four CPU admissions queued and copying one after the other, then a
 * demand for another expert: the demand is resident before any of them
 * (with them copied as demands, it came after all four).
 */
static int test_cpu_admission_after_demand(struct e2e *e)
{
	static const uint32_t cpu[] = {0, 1, 2, 3};
	struct e2e_watched w[] = {{1, 5, -1}, {0, 0, -1}, {0, 1, -1}, {0, 2, -1}, {0, 3, -1}};
	struct moecache_acquire_result r;
	struct moecache_stats st;
	uint32_t slot = MOECACHE_NONE;
	struct e2e_order o;
	int ret = -1;

	if (e2e_order_begin(e, &o, "e2e-cpu-order", 8) || e2e_admit_cpu(e, o.a, 0, cpu, 4) ||
	    e2e_wait_filling(e, o.a, 8, &w[1], 4))
		return e2e_order_end(e, &o, -1, NULL, 0);
	/* A plain acquire: a demand request, and the call returns at once. */
	ret = moecache_acquire(o.b, w[0].layer, &w[0].expert, 1, &slot, 0, 0, &r);
	if (ret || slot != MOECACHE_NONE)
		ret = e2e_fail(e, "demand acquire: %d, slot %u (want a miss)", ret, slot);
	if (!ret)
		ret = e2e_watch_order(e, o.b, w, 5);
	for (uint32_t i = 1; !ret && i < 5; i++)
		if (w[i].seen < w[0].seen)
			ret = e2e_fail(e,
				       "CPU admission %u resident at poll %ld, the demand after "
				       "it only at %ld",
				       w[i].expert, w[i].seen, w[0].seen);
	if (!ret && !e2e_settled(e, o.pool, &st) && (st.commits != 5 || st.aborts != 0))
		ret = e2e_fail(e, "%llu commits, %llu aborts (want 5 and 0)",
			       (unsigned long long)st.commits, (unsigned long long)st.aborts);
	return e2e_order_end(e, &o, ret, NULL, 0);
}

/*
 * Every slot but one pinned, a CPU admission copying into that one, then a
 * client waits on another expert: the admission's copy is cancelled and
 * dropped, and the waited expert fills the slot (when the wait returns, 4
 * commits: the admission's copy never completed). The driver's state
 * stays whole, and the expert's next CPU miss admits it.
 */
static int test_cpu_admission_cancelled_for_demand(struct e2e *e)
{
	static const uint32_t pinned[] = {4, 5, 6};
	const uint32_t layer = 1, cpu = 7, demand = 0;
	struct moecache_acquire_result r;
	struct moecache *holder = NULL;
	struct moecache_stats st;
	uint32_t slots[3], slot = MOECACHE_NONE;
	struct e2e_watched w = {layer, cpu, -1};
	struct e2e_order o;
	int ret = -1;

	if (e2e_order_begin(e, &o, "e2e-cpu-cancel", 4) || e2e_client(e, o.pool, &holder))
		return e2e_order_end(e, &o, -1, NULL, 0);
	ret = moecache_acquire(holder, 0, pinned, 3, slots, MOECACHE_ACQ_WAIT, 60000, &r);
	if (ret || r.n_pinned != 3) {
		ret = e2e_fail(e, "pinning 3 slots: %d, %u pinned", ret, r.n_pinned);
		goto out;
	}
	ret = -1;
	if (e2e_admit_cpu(e, o.a, layer, &cpu, 1) || e2e_wait_filling(e, o.a, 4, &w, 1))
		goto out;
	e2e_sleep_ms(100); /* into the copy's slow middle chunk */
	ret = moecache_acquire(o.b, layer, &demand, 1, &slot, MOECACHE_ACQ_WAIT, 60000, &r);
	if (ret || r.n_pinned != 1) {
		ret = e2e_fail(e, "the waiting acquire: %d, %u pinned", ret, r.n_pinned);
		goto out;
	}
	ret = -1;
	if (e2e_stats(e, o.pool, &st))
		goto out;
	if (st.commits != 4 || moecache_map_slot(moecache_map(o.b), layer, cpu) != MOECACHE_NONE) {
		ret = e2e_fail(e,
			       "%llu commits when the wait returned (want 4: the CPU admission "
			       "copied first, not cancelled)",
			       (unsigned long long)st.commits);
		goto out;
	}
	moecache_release(o.b, &slot, 1);
	if (e2e_settled(e, o.pool, &st) || e2e_admit_cpu(e, o.a, layer, &cpu, 1))
		goto out;
	ret = e2e_watch_order(e, o.b, &w, 1);
	if (!ret && !e2e_settled(e, o.pool, &st) &&
	    (st.aborts != 1 || st.commits != 5 || st.pinned_slots != 3))
		ret = e2e_fail(e, "%llu aborts, %llu commits, %u pinned slots (want 1, 5, 3)",
			       (unsigned long long)st.aborts, (unsigned long long)st.commits,
			       st.pinned_slots);
	if (!ret && moecache_release(holder, slots, 3))
		ret = e2e_fail(e, "release of the pinned slots failed");
out:
	moecache_close(holder);
	return e2e_order_end(e, &o, ret, "cpu_drops=", 1);
}

/* In a child: a client waits for (layer, expert); exits 0 once it is pinned. */
static void e2e_wait_child(const char *pool, uint32_t layer, uint32_t expert)
{
	struct moecache_acquire_result r;
	struct moecache *c;
	uint32_t slot;

	if (moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, &c))
		_exit(2);
	if (moecache_acquire(c, layer, &expert, 1, &slot, MOECACHE_ACQ_WAIT, 60000, &r))
		_exit(1);
	_exit(r.n_pinned == 1 ? 0 : 1);
}

/*
 * Four CPU admissions queued, then a client waits on the third: it is
 * resident before the second (which was ahead of it), the waiting client
 * gets it pinned, and it is copied into one slot with nothing aborted.
 */
static int test_cpu_admission_promoted_by_waiter(struct e2e *e)
{
	static const uint32_t cpu[] = {0, 1, 2, 3};
	struct e2e_watched w[] = {{0, 2, -1}, {0, 1, -1}, {0, 3, -1}, {0, 0, -1}};
	struct moecache_stats st;
	struct e2e_order o;
	pid_t waiter;
	int ret, status;

	if (e2e_order_begin(e, &o, "e2e-cpu-promote", 8) || e2e_admit_cpu(e, o.a, 0, cpu, 4) ||
	    e2e_wait_filling(e, o.a, 8, w, 4))
		return e2e_order_end(e, &o, -1, NULL, 0);
	waiter = fork();
	if (waiter == 0)
		e2e_wait_child(o.pool, w[0].layer, w[0].expert);
	if (waiter < 0)
		return e2e_order_end(e, &o, e2e_fail(e, "fork: %s", strerror(errno)), NULL, 0);
	ret = e2e_watch_order(e, o.b, w, 4);
	if (!ret && w[0].seen > w[1].seen)
		ret = e2e_fail(e,
			       "the waited-for expert was resident at poll %ld, the CPU "
			       "admission queued before it at %ld: not promoted",
			       w[0].seen, w[1].seen);
	status = e2e_wait(waiter, 60000);
	if (status == -ETIMEDOUT) {
		e2e_kill(waiter, SIGKILL);
		e2e_wait(waiter, 10000);
	}
	if (!ret && status != 0)
		ret = e2e_fail(e, "the waiting client exited with %d", status);
	if (!ret && !e2e_settled(e, o.pool, &st) && (st.commits != 4 || st.aborts != 0))
		ret = e2e_fail(e, "%llu commits, %llu aborts (want 4 and 0: one copy each)",
			       (unsigned long long)st.commits, (unsigned long long)st.aborts);
	return e2e_order_end(e, &o, ret, "cpu_promotions=", 1);
}

/* ---- what a client can do to a CPU bank's pages ---- */

#define E2E_NOBODY 65534

/*
 * As uid 65534, a client of pool: mincore() of the first page of a slot
 * that holds no expert (never written: not resident), then MADV_COLD and
 * MADV_PAGEOUT of the whole bank. Exits 0 if mincore said resident (it
 * tells nothing), 1 if it said not resident (it told), 2 if an madvise
 * failed, 3 if the slot reads other than before, 10+ if it could not get
 * that far.
 */
static void e2e_nobody_bank_probe(const char *pool)
{
	long page = sysconf(_SC_PAGESIZE);
	struct moecache_bank_map b;
	const struct moecache_map *m;
	const unsigned char *slot;
	unsigned char vec = 0, before;
	struct moecache *mc;
	uint32_t s, n;

	if (setgroups(0, NULL) || setresgid(E2E_NOBODY, E2E_NOBODY, E2E_NOBODY) ||
	    setresuid(E2E_NOBODY, E2E_NOBODY, E2E_NOBODY))
		_exit(10);
	if (moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, &mc))
		_exit(11);
	if (moecache_bank_import(mc, &b) || b.backend != MOECACHE_BACKEND_CPU)
		_exit(12);
	m = moecache_map(mc);
	n = moecache_pool(mc)->n_slots;
	for (s = 0; s < n && moecache_map_owner(m, s) != MOECACHE_NONE; s++)
		;
	if (s == n)
		_exit(13);
	slot = moecache_bank_slot(&b, s);
	if (!slot || ((uintptr_t)slot & (uintptr_t)(page - 1)))
		_exit(14);
	if (mincore((void *)slot, (size_t)page, &vec))
		_exit(15);
	before = slot[0];
	if (madvise(b.base, b.bytes, MADV_COLD) || madvise(b.base, b.bytes, MADV_PAGEOUT))
		_exit(2);
	if (slot[0] != before)
		_exit(3);
	_exit(vec & 1 ? 0 : 1);
}

/* The memfd among pid's files: its mode bits, or -1. */
static int e2e_memfd_mode(pid_t pid)
{
	char path[128], target[256];
	int mode = -1;
	struct stat st;
	ssize_t n;

	for (int fd = 0; fd < 1024 && mode < 0; fd++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strstr(target, "/memfd:") == target && stat(path, &st) == 0)
			mode = (int)(st.st_mode & 07777);
	}
	return mode;
}

/*
 * Pins: a client could read the CPU bank's residency with mincore() and
 * page its pages out with MADV_PAGEOUT (memfd inodes are 0777, and the
 * kernel allows both to whoever may write the inode), and MADV_COLD them.
 * The agent makes the memfd 0600 and locks the bank.
 */
static int test_cpu_bank_pages_guarded(struct e2e *e)
{
	const char *pool = "e2e-bank-guard";
	struct moecache_bank_map b = {.fd = -1};
	struct moecache *mc = NULL;
	char log[512], status[64];
	long long locked_kb;
	int ret = -1, mode, st;
	pid_t agent, probe;

	if (e2e_pool_create_mode(e, pool, 64, "0644"))
		return -1;
	e2e_path(e, log, sizeof(log), pool, "agent");
	agent = e2e_agent_start(e, pool, log, NULL);
	if (e2e_agent_ready(e, log, 30000) || e2e_client(e, pool, &mc))
		goto out;
	if (moecache_bank_import(mc, &b)) {
		ret = e2e_fail(e, "root cannot import the bank");
		goto out;
	}
	mode = e2e_memfd_mode(agent);
	snprintf(status, sizeof(status), "/proc/%d/status", (int)agent);
	locked_kb = e2e_file_number(status, "VmLck:");
	probe = fork();
	if (probe == 0)
		e2e_nobody_bank_probe(pool);
	st = probe < 0 ? -1 : e2e_wait(probe, 30000);
	if (mode != 0600)
		ret = e2e_fail(e, "the agent's bank memfd has mode %o, not 600", mode);
	else if (locked_kb < (long long)(b.bytes / 1024))
		ret = e2e_fail(e, "the agent locks %lld kB, less than the bank's %llu", locked_kb,
			       (unsigned long long)(b.bytes / 1024));
	else if (st != 0)
		ret = e2e_fail(e,
			       "uid 65534's probe of the bank: %d (1: mincore told an unwritten "
			       "slot apart, 2: madvise refused, 3: the slot changed)",
			       st);
	else
		ret = 0;
out:
	if (b.fd >= 0)
		moecache_bank_unimport(&b);
	moecache_close(mc);
	if (e2e_agent_stop(e, agent))
		ret = -1;
	e2e_pool_destroy(e, pool);
	return ret;
}

static const struct e2e_test e2e_tests[] = {
    {"basic_miss_becomes_hit", "one client's miss is another client's hit on the same slot",
     test_miss_becomes_hit},
    {"permission_cpu_bank_pages_guarded",
     "a CPU bank's memfd is 0600 and locked: uid 65534's mincore tells nothing, its "
     "MADV_COLD/PAGEOUT change nothing",
     test_cpu_bank_pages_guarded},
    {"basic_cpu_miss_admitted",
     "a miss acquired with MOECACHE_ACQ_CPU reaches the agent and becomes resident",
     test_cpu_miss_admitted},
    {"basic_cpu_admission_after_demand",
     "with slowed copies, a demand issued after four MOECACHE_REQ_CPU admissions are queued and "
     "copying is resident before all of them",
     test_cpu_admission_after_demand},
    {"basic_cpu_admission_cancelled_for_demand",
     "a waiting demand that finds every slot pinned or filling cancels a CPU admission's copy in "
     "flight, dropped with one abort; the expert's next CPU miss fills it; nothing left filling",
     test_cpu_admission_cancelled_for_demand},
    {"basic_cpu_admission_promoted_by_waiter",
     "a client waiting on an expert queued as a CPU admission makes it a demand: resident before "
     "the admission ahead of it, one copy, no abort",
     test_cpu_admission_promoted_by_waiter},
    {"lifetime_agent_kill9_clients_finish",
     "kill -9 of the agent under 4 decoding clients: they wait, then finish verified after a "
     "restart",
     test_kill9_clients_finish},
    {"lifetime_warm_restart_keeps_residency",
     "a restarted agent adopts the bank and keeps every resident slot",
     test_warm_restart_keeps_residency},
    {"concurrency_no_half_copied_slot",
     "with slowed copies, every pinned slot a client reads equals the host pages",
     test_no_half_copied_slot},
    {"concurrency_fast_pins_no_half_copied_slot",
     "the same with clients pinning hits without a system call (--fast-pins)",
     test_fast_pins_no_half_copied_slot},
    {"basic_no_eviction_bank_holds_all",
     "a bank that holds every expert is warmed and never evicts or misses",
     test_no_eviction_bank_holds_all},
    {"basic_mid_run_attach_sees_residency",
     "a client attaching mid-run sees and pins the residency the first one built",
     test_mid_run_attach_sees_residency},
    {"basic_prefetch_hints_served",
     "next-layer hints are filled and later hit, and the hinting client verifies",
     test_prefetch_hints_served},
    {"basic_policy_set_switches_victims",
     "moecachectl policy set changes the running agent's victims from lru to lfu",
     test_policy_set_switches_victims},
    {"basic_sighup_keeps_command_line",
     "SIGHUP rereads --config but keeps the command line's --log-level over the file's",
     test_sighup_keeps_command_line},
    {"lifetime_own_profile_not_reinstalled",
     "the agent's own profile save is not taken for an installed profile at SIGHUP",
     test_own_profile_not_reinstalled},
    {"basic_profile_from_agent_idle",
     "profile save --from-agent completes when the agent has accessed nothing",
     test_profile_from_agent_idle},
    {"bad_input_gpu_library_from_flags",
     "--gpu-library reaches the CUDA copy engine: a missing library stops the pool, named",
     test_gpu_library_from_flags},
    {"concurrency_parked_prefetch_promoted",
     "hints declined while every slot is in use are served once a client asks for them",
     test_parked_prefetch_promoted},
    {"lifetime_sigterm_finishes_copies",
     "SIGTERM with copies in flight commits them and exits 0, aborting nothing",
     test_sigterm_finishes_copies},
    {"basic_tiers_three_banks_four_clients",
     "a pool of three CPU banks (10%, 20%, 20% of the experts) under 4 verifying decode "
     "clients, kill -9 and restart of the agent: lower banks serve hits, each expert in one bank",
     test_tiers_three_banks_four_clients},
    {"basic_tiers_static_placement_slices",
     "--tier-placement static: each lower bank holds only its slice of every layer's experts",
     test_tiers_static_placement_slices},
    {"basic_tiers_cuda_banks_on_named_devices",
     "three CUDA banks on the fake driver's GPUs 2, 3 and 0: each bank is on the GPU its "
     "layout names, 3 verifying clients, moves between peer GPUs are device to device",
     test_tiers_cuda_banks_on_named_devices},
    {"lifetime_tiers_kill_during_demotion",
     "the agent killed while it demotes: every expert in one bank or none, no slot half-copied",
     test_tiers_kill_during_demotion},
};

/* The last lines of every log so far, to stderr: in the VM nothing else survives. */
static void e2e_dump_logs(const struct e2e *e)
{
	char cmd[800];

	snprintf(cmd, sizeof(cmd),
		 "for f in '%s'/*; do echo \"== $f\"; tail -n 12 \"$f\"; done >&2", e->workdir);
	if (system(cmd))
		fprintf(stderr, "e2e: cannot show the logs in %s\n", e->workdir);
}

static int e2e_setup(struct e2e *e)
{
	char *argv[] = {"moecache-decode", "--print-expert-bytes", E2E_SHAPE, NULL};
	char out[512], buf[64] = {0};
	int fd;

	snprintf(e->trace, sizeof(e->trace), "%s/olmoe-1b-7b.decode.jsonl", e->traces);
	if (access(e->trace, R_OK))
		return e2e_fail(e, "no trace at %s (--traces DIR)", e->trace);
	snprintf(e->workdir, sizeof(e->workdir), "%s/moecache-e2e.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(e->workdir))
		return e2e_fail(e, "mkdtemp: %s", strerror(errno));
	snprintf(out, sizeof(out), "%s/expert-bytes", e->workdir);
	if (e2e_run(out, argv, 10000))
		return e2e_fail(e, "moecache-decode not on PATH");
	fd = open(out, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return e2e_fail(e, "cannot read %s", out);
	close(fd);
	e->expert_bytes = strtoull(buf, NULL, 10);
	return e->expert_bytes ? 0 : e2e_fail(e, "bad expert size '%s'", buf);
}

static int e2e_setup_hook(void *arg, char *why, size_t len)
{
	struct e2e *e = arg;
	int ret = e2e_setup(e);

	if (ret)
		snprintf(why, len, "%s", e->why);
	return ret;
}

/* In the test's process: the first failed check is the reason. */
static void e2e_run_test(void *arg, const struct tap_test *t, unsigned int number)
{
	const struct e2e_test *et = t->data;
	struct e2e *e = arg;
	int ret;

	signal(SIGPIPE, SIG_IGN); /* a program a test reads from may die first */
	e->why[0] = '\0';
	ret = et->run(e);
	if (ret || e->why[0])
		TAP_FAIL("%s", e->why[0] ? e->why : "failed");
}

static void e2e_after(void *arg, const struct tap_test *t, unsigned int number,
		      struct tap_outcome *o)
{
	if (o->kind == TAP_FAIL) {
		fflush(stdout);
		e2e_dump_logs(arg);
	}
}

static void e2e_finish(void *arg, unsigned int passed, unsigned int failed)
{
	struct e2e *e = arg;

	if (!e->keep_logs && failed == 0) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->workdir);
		if (system(cmd))
			fprintf(stderr, "e2e: could not remove %s\n", e->workdir);
	} else {
		fprintf(stderr, "e2e: logs in %s\n", e->workdir);
	}
}

int main(int argc, char **argv)
{
	static struct e2e e = {.traces = "/traces"};
	const struct tap_suite suite = {
	    .word = "e2e",
	    .about = "End-to-end tests of moecached, libmoecache and moecache-decode on the "
		     "loaded module, as root.",
	    .options = "  --traces DIR   the routing traces (default /traces)\n"
		       "  --keep-logs    keep the programs' logs even when every test passes\n",
	    .default_timeout_s = E2E_TIMEOUT_S,
	    .arg = &e,
	    .setup = e2e_setup_hook,
	    .run = e2e_run_test,
	    .after = e2e_after,
	    .finish = e2e_finish,
	};
	size_t n = sizeof(e2e_tests) / sizeof(e2e_tests[0]);
	struct tap_test tests[sizeof(e2e_tests) / sizeof(e2e_tests[0])];
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	int nargs = 0, i;

	if (!args)
		return 2;
	/* The suite's own options; the rest is the harness's. */
	args[nargs++] = argv[0];
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--traces") && i + 1 < argc)
			e.traces = argv[++i];
		else if (!strncmp(argv[i], "--traces=", 9))
			e.traces = argv[i] + 9;
		else if (!strcmp(argv[i], "--keep-logs"))
			e.keep_logs = true;
		else
			args[nargs++] = argv[i];
	}
	for (size_t k = 0; k < n; k++)
		tests[k] = (struct tap_test){.name = e2e_tests[k].name,
					     .description = e2e_tests[k].description,
					     .data = &e2e_tests[k]};
	i = tap_main(&suite, tests, n, nargs, args);
	free(args);
	return i;
}
