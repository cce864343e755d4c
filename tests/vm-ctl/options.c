// SPDX-License-Identifier: MIT
/*
 * Documented settings shown to take effect, each by a test that fails if it
 * were ignored: max_event_listeners, and moecachectl's pool list --json,
 * events --pool and --json, MOECACHE_DEVICE, and profile save --from-agent
 * with --agent-file and --timeout (against moecached itself).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
	const char *node = ct_file(ctx, "moecache-node");
	char name[MOECACHE_NAME_LEN];
	struct stat st;
	struct ct_out o;

	ct_pool(ctx, "dev", name);
	ct_create(name, &small);
	/* the device it names is the one opened: no node there, no load */
	setenv("MOECACHE_DEVICE", "/nonexistent/moecache", 1);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--quiet", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "/nonexistent/moecache: No such file or directory");
	CT_EQ(ct_pool_flags(name) & MOECACHE_POOL_LOADED, 0);
	/* a node of the driver elsewhere serves as well */
	CT_OK(stat("/dev/moecache", &st) ? -errno : 0);
	CT_OK(mknod(node, S_IFCHR | 0600, st.st_rdev) ? -errno : 0);
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
	const char *agent_file = ct_file(ctx, "agent.profile.json");
	const char *out = ct_file(ctx, "saved.json");
	char name[MOECACHE_NAME_LEN], saved[4096];
	struct moecache *client;
	struct json_object *doc, *ranked;
	struct ct_out o;
	uint32_t expert, slot;
	int status, i;
	pid_t agent;

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
	struct ctl_pool p;
	struct ctl_nl nl;
	struct ct_out o;
	uint64_t until, start, took;
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
	until = ct_now_ms() + 10000;
	ct_nl_open(&nl);
	do {
		if (ct_now_ms() > until)
			CT_FAIL("the agent did not attach");
		ct_sleep_ms(5);
		CT_OK(ctl_nl_pool_info(&nl, name, &p));
	} while (p.agent_pid != (uint32_t)pid);
	ctl_nl_close(&nl);
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
