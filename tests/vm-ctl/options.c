// SPDX-License-Identifier: MIT
/*
 * Documented settings shown to take effect, each by a test that fails if it
 * were ignored: max_event_listeners; moecachectl's pool list --json,
 * events --pool and --json, MOECACHE_DEVICE, and profile save --from-agent
 * with --agent-file and --timeout (against moecached itself); and
 * moecache-decode's --seed, --device and --no-keep-waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "harness.h"
#include "tests.h"

static const struct ct_geom small = {
    .n_layers = 3,
    .n_experts = 8,
    .n_slots = 4,
    .expert_bytes = 4096,
};

static char *slurp(const char *path)
{
	static char buf[16384];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		CT_FAIL("%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* The string member key of o, "" when there is none. */
static const char *str_of(struct json_object *o, const char *key)
{
	const char *s = json_object_get_string(json_object_object_get(o, key));

	return s ? s : "";
}

/* A device node at path for the driver /dev/moecache is. */
static void node_copy(const char *path)
{
	struct stat st;

	CT_OK(stat("/dev/moecache", &st) ? -errno : 0);
	CT_OK(mknod(path, S_IFCHR | 0600, st.st_rdev) ? -errno : 0);
}

/* ---- module parameters ---- */

void nl_events_global_listener_limit(struct ct_ctx *ctx)
{
	unsigned int old = ct_set_param("max_event_listeners", 2);
	struct ctl_nl nl[3];
	int ret[3], i;

	/* root is held to it too: it bounds the driver's memory, not a user's share */
	for (i = 0; i < 3; i++) {
		ct_nl_open(&nl[i]);
		ret[i] = ctl_nl_events_join(&nl[i]);
	}
	for (i = 0; i < 3; i++)
		ctl_nl_close(&nl[i]);
	ct_set_param("max_event_listeners", old);
	CT_RET(ret[0], 0);
	CT_RET(ret[1], 0);
	CT_RET(ret[2], -ENOSPC);
}

/* ---- pool list --json ---- */

static struct json_object *find_pool(struct json_object *arr, const char *name)
{
	size_t i;

	for (i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *p = json_object_array_get_idx(arr, i);

		if (!strcmp(str_of(p, "name"), name))
			return p;
	}
	CT_FAIL("pool %s not in %s", name, json_object_to_json_string(arr));
}

void cli_pool_list_json(struct ct_ctx *ctx)
{
	char a[MOECACHE_NAME_LEN], b[MOECACHE_NAME_LEN];
	struct ct_geom gb = small;
	struct json_object *arr, *p;
	struct ct_out o;

	ct_pool(ctx, "a", a);
	ct_pool(ctx, "b", b);
	ct_create(a, &small);
	gb.n_layers = 5;
	gb.mode = 0640;
	ct_create(b, &gb);
	ct_ctl(ctx, &o, false, "pool", "list", "--json", NULL);
	CT_EQ(o.status, 0);
	arr = json_tokener_parse(o.out);
	if (!arr || !json_object_is_type(arr, json_type_array))
		CT_FAIL("not a JSON array: %s", o.out);
	p = find_pool(arr, a);
	CT_EQ(json_object_get_int64(json_object_object_get(p, "n_layers")), 3);
	CT_EQ(json_object_get_int64(json_object_object_get(p, "host_bytes")), 3 * 8 * 4096);
	p = find_pool(arr, b);
	CT_EQ(json_object_get_int64(json_object_object_get(p, "n_layers")), 5);
	CT_ASSERT(!strcmp(str_of(p, "mode"), "0640"));
	json_object_put(arr);
}

/* ---- events ---- */

/* Starts `moecachectl events --pool POOL --count 2 [--json]`; returns once it listens. */
static pid_t events_start(const struct ct_ctx *ctx, const char *pool, bool json)
{
	uint64_t until = ct_now_ms() + 10000;
	struct ct_out o;
	pid_t pid = fork();

	if (pid == 0) {
		ct_ctl(ctx, &o, false, "events", "--pool", pool, "--count", "2", "--timeout", "30",
		       json ? "--json" : NULL, NULL);
		_exit(o.status);
	}
	CT_ASSERT(pid > 0);
	while (access(ct_file(ctx, ".stderr"), F_OK) ||
	       !strstr(slurp(ct_file(ctx, ".stderr")), "listening")) {
		if (ct_now_ms() > until)
			CT_FAIL("moecachectl events did not start listening");
		ct_sleep_ms(10);
	}
	return pid;
}

static void events_end(pid_t pid)
{
	int status;

	CT_EQ(waitpid(pid, &status, 0), pid);
	CT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void destroy(const char *name)
{
	struct ctl_nl nl;

	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	ctl_nl_close(&nl);
}

void cli_events_pool_filter(struct ct_ctx *ctx)
{
	char a[MOECACHE_NAME_LEN], b[MOECACHE_NAME_LEN], want[160];
	const char *out;
	pid_t pid;

	ct_pool(ctx, "a", a);
	ct_pool(ctx, "b", b);
	pid = events_start(ctx, a, false);
	/* b's events come first: without the filter they would be the two printed */
	ct_create(b, &small);
	ct_create(a, &small);
	destroy(b);
	destroy(a);
	events_end(pid);
	out = slurp(ct_file(ctx, ".stdout"));
	snprintf(want, sizeof(want), "pool-created pool=%s\n", a);
	CT_CONTAINS(out, want);
	snprintf(want, sizeof(want), "pool-destroyed pool=%s\n", a);
	CT_CONTAINS(out, want);
	snprintf(want, sizeof(want), "pool=%s\n", b);
	if (strstr(out, want))
		CT_FAIL("an event of %s printed for --pool %s: %s", b, a, out);
}

void cli_events_json(struct ct_ctx *ctx)
{
	static const char *const kinds[] = {"pool-created", "pool-destroyed"};
	char name[MOECACHE_NAME_LEN], *line, *save = NULL;
	unsigned int n = 0;
	pid_t pid;

	ct_pool(ctx, "js", name);
	pid = events_start(ctx, name, true);
	ct_create(name, &small);
	destroy(name);
	events_end(pid);
	for (line = strtok_r(slurp(ct_file(ctx, ".stdout")), "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct json_object *ev = json_tokener_parse(line), *t;

		if (!ev || !json_object_is_type(ev, json_type_object) || n >= 2)
			CT_FAIL("line %u is not one of two JSON objects: %s", n + 1, line);
		CT_ASSERT(!strcmp(str_of(ev, "event"), kinds[n]));
		CT_ASSERT(!strcmp(str_of(ev, "pool"), name));
		CT_ASSERT(json_object_object_get_ex(ev, "time", &t) &&
			  json_object_get_double(t) > 0);
		json_object_put(ev);
		n++;
	}
	CT_EQ(n, 2);
}

/* ---- MOECACHE_DEVICE ---- */

void cli_device_env(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], node[256];
	struct ct_out o;

	snprintf(node, sizeof(node), "%s", ct_file(ctx, "moecache-node"));
	ct_pool(ctx, "dev", name);
	ct_create(name, &small);
	/* the device it names is the one opened: no node there, no load */
	setenv("MOECACHE_DEVICE", "/nonexistent/moecache", 1);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--quiet", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "/nonexistent/moecache: No such file or directory");
	CT_EQ(ct_pool_flags(name) & MOECACHE_POOL_LOADED, 0);
	/* a node of the driver elsewhere serves as well */
	node_copy(node);
	setenv("MOECACHE_DEVICE", node, 1);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--quiet", NULL);
	if (o.status)
		CT_FAIL("load through %s: %s", node, o.err);
	CT_ASSERT(ct_pool_flags(name) & MOECACHE_POOL_LOADED);
	unsetenv("MOECACHE_DEVICE");
}

/* ---- profile save --from-agent ---- */

/* moecached serving pool with --profile file; returns its pid once the bank is set. */
static pid_t agent_start(const struct ct_ctx *ctx, const char *pool, const char *file)
{
	uint64_t until = ct_now_ms() + 30000;
	struct ctl_pool p;
	struct ctl_nl nl;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(ct_file(ctx, "agent.log"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, STDERR_FILENO);
		execlp("moecached", "moecached", "--pool", pool, "--foreground", "--profile", file,
		       NULL);
		_exit(127);
	}
	CT_ASSERT(pid > 0);
	ct_nl_open(&nl);
	for (;;) {
		CT_OK(ctl_nl_pool_info(&nl, pool, &p));
		if (p.agent_pid == (uint32_t)pid && (p.flags & MOECACHE_POOL_BANK))
			break;
		if (ct_now_ms() > until || waitpid(pid, NULL, WNOHANG) == pid)
			CT_FAIL("moecached did not serve %s: %s", pool,
				slurp(ct_file(ctx, "agent.log")));
		ct_sleep_ms(20);
	}
	ctl_nl_close(&nl);
	return pid;
}

void cli_profile_save_from_agent(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], saved[4096], agent_file[256], out[256];
	struct moecache *client;
	struct json_object *doc, *ranked;
	struct ct_out o;
	uint32_t expert, slot;
	int status, i;
	pid_t agent;

	/* copies: ct_file's buffers are reused */
	snprintf(agent_file, sizeof(agent_file), "%s", ct_file(ctx, "agent.profile.json"));
	snprintf(out, sizeof(out), "%s", ct_file(ctx, "saved.json"));
	ct_pool(ctx, "fa", name);
	ct_create(name, &small);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--quiet", NULL);
	CT_EQ(o.status, 0);
	agent = agent_start(ctx, name, agent_file);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_CLIENT, &client));
	for (i = 0; i < 6; i++) {
		expert = (uint32_t)(i % 3);
		CT_OK(
		    moecache_acquire(client, 1, &expert, 1, &slot, MOECACHE_ACQ_WAIT, 5000, NULL));
	}
	moecache_close(client);
	/* --agent-file: the agent writes there, not to $MOECACHE_RUNDIR/NAME.profile.json */
	ct_ctl(ctx, &o, false, "profile", "save", name, out, "--from-agent", "--agent-file",
	       agent_file, NULL);
	kill(agent, SIGTERM);
	CT_EQ(waitpid(agent, &status, 0), agent);
	if (o.status)
		CT_FAIL("profile save --from-agent: %s", o.err);
	snprintf(saved, sizeof(saved), "%s", slurp(out));
	doc = json_tokener_parse(saved);
	CT_ASSERT(doc && json_object_object_get_ex(doc, "ranked", &ranked));
	/* the agent's ranking of the three experts of layer 1 it served */
	CT_EQ(json_object_array_length(ranked), 3);
	for (i = 0; i < 3; i++)
		CT_EQ(json_object_get_int64(
			  json_object_array_get_idx(json_object_array_get_idx(ranked, i), 0)),
		      1);
	json_object_put(doc);
	CT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* An agent that never answers SIGUSR1 (it blocks it) until its pipe closes. */
static void mute_agent(const char *pool, int done)
{
	struct moecache *agent;
	sigset_t set;
	char byte;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (moecache_open_attach(pool, MOECACHE_ROLE_AGENT, &agent))
		_exit(2);
	if (read(done, &byte, 1) < 0)
		_exit(3);
	_exit(0);
}

void cli_profile_save_timeout(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;
	uint64_t start, took;
	int pipefd[2];
	pid_t pid;

	ct_pool(ctx, "to", name);
	ct_create(name, &small);
	CT_OK(pipe(pipefd) ? -errno : 0);
	pid = fork();
	if (pid == 0) {
		close(pipefd[1]);
		mute_agent(name, pipefd[0]);
	}
	CT_ASSERT(pid > 0);
	close(pipefd[0]);
	ct_wait_agent(name, pid);
	start = ct_now_ms();
	ct_ctl(ctx, &o, false, "profile", "save", name, ct_file(ctx, "never.json"), "--from-agent",
	       "--timeout", "0.5", NULL);
	took = ct_now_ms() - start;
	close(pipefd[1]);
	waitpid(pid, NULL, 0);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "did not rewrite");
	/* half a second, not the default 10 */
	if (took > 5000)
		CT_FAIL("--timeout 0.5 gave up after %llu ms", (unsigned long long)took);
}

/* ---- moecache-decode ---- */

/* The decode tests' expert shape. */
#define DECODE_SHAPE "--d-model", "32", "--d-ff", "32", "--dtype", "f32"

/* Three layers of top-2 routing over 8 experts, 4 tokens. */
static const char decode_trace[] = "{\"tok\": 0, \"layers\": [[0, 1], [2, 3], [4, 5]]}\n"
				   "{\"tok\": 1, \"layers\": [[1, 6], [3, 7], [5, 0]]}\n"
				   "{\"tok\": 2, \"layers\": [[2, 0], [4, 1], [6, 2]]}\n"
				   "{\"tok\": 3, \"layers\": [[3, 1], [5, 3], [7, 4]]}\n";

/* A pool of the decode trace's geometry with experts of DECODE_SHAPE's size. */
static void decode_pool(const struct ct_ctx *ctx, const char *name)
{
	struct ct_geom g = {.n_layers = 3, .n_experts = 8, .n_slots = 4};
	struct ct_out o;

	ct_exec(ctx, &o, "moecache-decode", "--print-expert-bytes", DECODE_SHAPE, NULL);
	CT_EQ(o.status, 0);
	g.expert_bytes = strtoull(o.out, NULL, 10);
	CT_ASSERT(g.expert_bytes > 0);
	ct_create(name, &g);
}

/* Writes the decode trace into the test's folder; its path in path. */
static void decode_trace_file(const struct ct_ctx *ctx, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s", ct_file(ctx, "trace.jsonl"));
	f = fopen(path, "w");
	CT_ASSERT(f && fputs(decode_trace, f) >= 0 && fclose(f) == 0);
}

void decode_seed(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], trace[256], profile[256];
	struct ct_out o;
	int status;
	pid_t agent;

	ct_pool(ctx, "seed", name);
	decode_pool(ctx, name);
	decode_trace_file(ctx, trace, sizeof(trace));
	snprintf(profile, sizeof(profile), "%s", ct_file(ctx, "profile.json"));
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--fill", DECODE_SHAPE, "--seed", "7",
		NULL);
	if (o.status)
		CT_FAIL("--fill --seed 7: %s", o.err);
	agent = agent_start(ctx, name, profile);
	/* the weights of seed 7, checked against seed 7's generator */
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--trace", trace, DECODE_SHAPE,
		"--seed", "7", "--timeout-ms", "20000", NULL);
	if (o.status || !strstr(o.out, "verified=ok"))
		CT_FAIL("--seed 7 over seed 7's weights (%d): %s%s", o.status, o.out, o.err);
	/* the default seed's generator does not give them */
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--trace", trace, DECODE_SHAPE,
		"--timeout-ms", "20000", NULL);
	kill(agent, SIGTERM);
	CT_EQ(waitpid(agent, &status, 0), agent);
	CT_ASSERT(o.status != 0);
	CT_CONTAINS(o.out, "verified=FAILED");
	CT_CONTAINS(o.err, "do not hold the generated weights");
}

void decode_device(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], node[256];
	struct ct_out o;

	snprintf(node, sizeof(node), "%s", ct_file(ctx, "moecache-node"));
	ct_pool(ctx, "dev", name);
	decode_pool(ctx, name);
	/* the node it names is the one opened: no node there, no fill */
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--fill", DECODE_SHAPE, "--device",
		"/nonexistent/moecache", NULL);
	CT_ASSERT(o.status != 0);
	CT_CONTAINS(o.err, "No such file or directory");
	CT_EQ(ct_pool_flags(name) & MOECACHE_POOL_LOADED, 0);
	/* a node of the driver elsewhere serves as well */
	node_copy(node);
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--fill", DECODE_SHAPE, "--device",
		node, NULL);
	if (o.status)
		CT_FAIL("--fill --device %s: %s", node, o.err);
	CT_ASSERT(ct_pool_flags(name) & MOECACHE_POOL_LOADED);
}

void decode_no_keep_waiting(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], trace[256], profile[256];
	int status;
	pid_t agent;
	uint64_t start, took;
	struct ct_out o;

	ct_pool(ctx, "nk", name);
	decode_pool(ctx, name);
	decode_trace_file(ctx, trace, sizeof(trace));
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--fill", DECODE_SHAPE, NULL);
	CT_EQ(o.status, 0);
	/* an agent sets the bank and stops: the driver keeps the bank, empty */
	snprintf(profile, sizeof(profile), "%s", ct_file(ctx, "profile.json"));
	agent = agent_start(ctx, name, profile);
	kill(agent, SIGTERM);
	CT_EQ(waitpid(agent, &status, 0), agent);
	CT_EQ(ct_pool_flags(name) & (MOECACHE_POOL_AGENT | MOECACHE_POOL_BANK), MOECACHE_POOL_BANK);
	/* no agent: the first miss fails at once instead of waiting 20 s for one */
	start = ct_now_ms();
	ct_exec(ctx, &o, "moecache-decode", "--pool", name, "--trace", trace, DECODE_SHAPE,
		"--no-keep-waiting", "--timeout-ms", "20000", NULL);
	took = ct_now_ms() - start;
	CT_ASSERT(o.status != 0);
	/* the driver's EPIPE for a miss no agent will serve */
	CT_CONTAINS(o.err, "Broken pipe");
	if (took > 10000)
		CT_FAIL("--no-keep-waiting without an agent took %llu ms: %s",
			(unsigned long long)took, o.err);
}
