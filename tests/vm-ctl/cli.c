// SPDX-License-Identifier: MIT
/* moecachectl's commands as an administrator runs them: output, messages and exit status. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "harness.h"
#include "tests.h"

static const struct ct_geom geom = {
    .n_layers = 3,
    .n_experts = 8,
    .n_slots = 4,
    .expert_bytes = 4096,
};

static struct json_object *parse_json(const char *text)
{
	struct json_object *o = json_tokener_parse(text);

	if (!o)
		CT_FAIL("not JSON: %s", text);
	return o;
}

static int64_t json_int(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		CT_FAIL("no \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_int64(v);
}

static const char *json_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		CT_FAIL("no \"%s\" in %s", key, json_object_to_json_string(o));
	return json_object_get_string(v);
}

static void acquire(struct moecache *mc, uint32_t layer, uint32_t expert, unsigned int times)
{
	uint32_t slot;

	while (times--)
		CT_OK(moecache_acquire(mc, layer, &expert, 1, &slot, 0, 0, NULL));
}

void cli_exit_codes(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], want[128];
	struct ct_out o;

	ct_pool(ctx, "none", name);
	ct_ctl(ctx, &o, false, "pool", "info", name, NULL);
	CT_EQ(o.status, 1);
	snprintf(want, sizeof(want), "moecachectl: pool '%s': No such pool\n", name);
	CT_ASSERT(!strcmp(o.err, want));
	ct_ctl(ctx, &o, false, "pool", "create", name, "--layers", "2", NULL);
	CT_EQ(o.status, 2);
	ct_ctl(ctx, &o, false, "frobnicate", NULL);
	CT_EQ(o.status, 2);
	ct_ctl(ctx, &o, false, "stats", NULL);
	CT_EQ(o.status, 2);
	ct_ctl(ctx, &o, false, "stats", name, "--layer", "x", NULL);
	CT_EQ(o.status, 2);
	ct_ctl(ctx, &o, false, "stats", name, NULL);
	CT_EQ(o.status, 1);
}

void cli_help(struct ct_ctx *ctx)
{
	static const char *const commands[] = {"pool",	"load", "stats",   "top",   "events",
					       "flush", "bank", "profile", "policy"};
	struct ct_out o;
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		ct_ctl(ctx, &o, false, commands[i], "--help", NULL);
		if (o.status || strncmp(o.out, "usage: moecachectl ", 19))
			CT_FAIL("%s --help: exit %d, %s", commands[i], o.status, o.out);
	}
	ct_ctl(ctx, &o, false, "--help", NULL);
	CT_EQ(o.status, 0);
}

void cli_pool_lifecycle(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct json_object *p;
	struct ct_out o;

	ct_pool(ctx, "life", name);
	ct_ctl(ctx, &o, false, "pool", "create", name, "--layers", "2", "--experts", "8", "--range",
	       "0:4", "--expert-bytes", "8K", "--slots", "2", "--uid", "nobody", "--mode", "0640",
	       NULL);
	if (o.status)
		CT_FAIL("create: %s", o.err);
	ct_ctl(ctx, &o, false, "pool", "info", name, "--json", NULL);
	CT_EQ(o.status, 0);
	p = parse_json(o.out);
	CT_EQ(json_int(p, "uid"), CT_NOBODY);
	CT_ASSERT(!strcmp(json_str(p, "mode"), "0640"));
	CT_EQ(json_int(p, "expert_end"), 4);
	CT_EQ(json_int(p, "expert_bytes"), 8192);
	CT_EQ(json_int(p, "host_bytes"), 2 * 4 * 8192);
	json_object_put(p);
	ct_ctl(ctx, &o, false, "pool", "list", NULL);
	CT_EQ(o.status, 0);
	CT_CONTAINS(o.out, name);
	ct_ctl(ctx, &o, false, "pool", "destroy", name, NULL);
	CT_EQ(o.status, 0);
	ct_ctl(ctx, &o, false, "pool", "destroy", name, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "No such pool");
}

void cli_create_unprivileged(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], want[128];
	struct ct_out o;

	ct_pool(ctx, "np", name);
	ct_ctl(ctx, &o, true, "pool", "create", name, "--layers", "1", "--experts", "2",
	       "--expert-bytes", "4096", "--slots", "1", NULL);
	CT_EQ(o.status, 1);
	snprintf(want, sizeof(want), "moecachectl: pool '%s': Operation not permitted\n", name);
	CT_ASSERT(!strcmp(o.err, want));
}

void cli_stats(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct json_object *s, *layers, *total;
	struct moecache *client;
	struct ct_out o;

	ct_pool(ctx, "st", name);
	ct_create(name, &geom);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_CLIENT, &client));
	acquire(client, 1, 3, 3);
	ct_ctl(ctx, &o, false, "stats", name, "--json", NULL);
	CT_EQ(o.status, 0);
	s = parse_json(o.out);
	CT_ASSERT(json_object_object_get_ex(s, "total", &total));
	CT_EQ(json_int(total, "misses"), 3);
	CT_EQ(json_int(json_object_object_get(total, "state"), "clients"), 1);
	CT_ASSERT(json_object_object_get_ex(s, "layers", &layers));
	CT_EQ(json_object_array_length(layers), 3);
	CT_EQ(json_int(json_object_array_get_idx(layers, 1), "misses"), 3);
	CT_EQ(json_int(json_object_array_get_idx(layers, 0), "misses"), 0);
	json_object_put(s);

	ct_ctl(ctx, &o, false, "stats", name, "--layer", "1", "--json", NULL);
	CT_EQ(o.status, 0);
	s = parse_json(o.out);
	CT_EQ(json_int(s, "layer"), 1);
	CT_EQ(json_int(s, "misses"), 3);
	json_object_put(s);

	ct_ctl(ctx, &o, false, "stats", name, NULL);
	CT_EQ(o.status, 0);
	CT_CONTAINS(o.out, "total");
	CT_CONTAINS(o.out, "layer 2");
	CT_CONTAINS(o.out, "1 clients");

	ct_ctl(ctx, &o, false, "stats", name, "--layer", "3", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "Invalid argument");
	moecache_close(client);
}

void cli_top(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;
	const char *p;
	int views = 0;

	ct_pool(ctx, "top", name);
	ct_create(name, &geom);
	ct_ctl(ctx, &o, false, "top", name, "--iterations", "2", "--interval", "0.2", NULL);
	CT_EQ(o.status, 0);
	for (p = o.out; (p = strstr(p, " every ")); p++)
		views++;
	CT_EQ(views, 2);
	/* not a terminal: no escape sequences */
	CT_ASSERT(!strchr(o.out, '\033'));
}

static bool file_has(const char *path, const char *text)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return strstr(buf, text);
}

void cli_events(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], line[128];
	struct ctl_nl nl;
	struct ct_out o;
	uint64_t until;
	int status;
	pid_t pid;

	ct_pool(ctx, "ev", name);
	pid = fork();
	if (pid == 0) {
		ct_ctl(ctx, &o, false, "events", "--pool", name, "--count", "2", "--timeout", "30",
		       NULL);
		_exit(o.status);
	}
	CT_ASSERT(pid > 0);
	until = ct_now_ms() + 10000;
	while (!file_has(ct_file(ctx, ".stderr"), "listening")) {
		if (ct_now_ms() > until)
			CT_FAIL("moecachectl events did not start listening");
		ct_sleep_ms(10);
	}
	ct_create(name, &geom);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	ctl_nl_close(&nl);
	CT_EQ(waitpid(pid, &status, 0), pid);
	CT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(line, sizeof(line), "pool-created pool=%s\n", name);
	CT_ASSERT(file_has(ct_file(ctx, ".stdout"), line));
	snprintf(line, sizeof(line), "pool-destroyed pool=%s\n", name);
	CT_ASSERT(file_has(ct_file(ctx, ".stdout"), line));
}

void cli_events_timeout(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	ct_pool(ctx, "quiet", name);
	ct_ctl(ctx, &o, false, "events", "--pool", name, "--count", "1", "--timeout", "0.5", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "0 of 1 events");
}

static void agent_fill(struct moecache *agent, uint32_t slot, uint32_t layer, uint32_t expert)
{
	struct moecache_fill f = {.slot = slot, .layer = layer, .expert = expert};

	CT_OK(moecache_evict(agent, slot, layer, expert, NULL, NULL));
	CT_OK(moecache_commit(agent, &f, 1));
}

void cli_flush(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], want[128];
	struct ct_geom g = geom;
	struct moecache *agent;
	struct ct_out o;

	/* Readable by others: a user learns it exists, and may not flush it. */
	g.mode = 0604;
	ct_pool(ctx, "fl", name);
	ct_create(name, &g);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	agent_fill(agent, 0, 0, 1);
	agent_fill(agent, 2, 2, 7);
	ct_ctl(ctx, &o, true, "flush", name, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "Operation not permitted");
	ct_ctl(ctx, &o, false, "flush", name, NULL);
	CT_EQ(o.status, 0);
	snprintf(want, sizeof(want), "pool '%s': 2 slots flushed\n", name);
	CT_ASSERT(!strcmp(o.out, want));
	moecache_close(agent);
}

void cli_reads_private(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], want[160];
	struct ct_out o;

	/* geom is root's with mode 0600: a user cannot tell it from no pool */
	ct_pool(ctx, "pr", name);
	ct_create(name, &geom);
	snprintf(want, sizeof(want), "pool '%s': No such pool\n", name);
	ct_ctl(ctx, &o, true, "stats", name, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, want);
	ct_ctl(ctx, &o, true, "pool", "info", name, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, want);
	ct_ctl(ctx, &o, true, "pool", "list", NULL);
	CT_EQ(o.status, 0);
	CT_ASSERT(!strstr(o.out, name));
	/* root reads it */
	ct_ctl(ctx, &o, false, "stats", name, NULL);
	CT_EQ(o.status, 0);
	ct_ctl(ctx, &o, false, "pool", "list", NULL);
	CT_CONTAINS(o.out, name);
}

void cli_bank(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache_bank bank = {0};
	struct moecache *agent;
	struct json_object *b;
	struct ct_out o;
	int fd;

	ct_pool(ctx, "bank", name);
	ct_create(name, &geom);
	ct_ctl(ctx, &o, false, "bank", name, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "No bank set");

	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	fd = memfd_create("bank", MFD_CLOEXEC);
	CT_ASSERT(fd >= 0);
	CT_OK(ftruncate(fd, 4 * 8192) ? -errno : 0);
	bank.fd = fd;
	bank.backend = MOECACHE_BACKEND_CPU;
	bank.bank_bytes = 4 * 8192;
	bank.slot_stride = 8192;
	CT_OK(moecache_bank_set(agent, &bank));
	ct_ctl(ctx, &o, false, "bank", name, "--json", NULL);
	CT_EQ(o.status, 0);
	b = parse_json(o.out);
	CT_ASSERT(!strcmp(json_str(b, "backend"), "cpu"));
	CT_EQ(json_int(b, "bank_bytes"), 4 * 8192);
	CT_EQ(json_int(b, "slot_stride"), 8192);
	CT_EQ(json_int(b, "n_slots"), 4);
	json_object_put(b);
	close(fd);
	moecache_close(agent);
}

void cli_profile_save(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache *client;
	struct json_object *p, *r;
	const char *file = ct_file(ctx, "profile.json");
	struct ct_out o;

	ct_pool(ctx, "prof", name);
	ct_create(name, &geom);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_CLIENT, &client));
	acquire(client, 0, 1, 3);
	acquire(client, 1, 0, 2);
	acquire(client, 0, 2, 1);
	moecache_close(client);
	ct_ctl(ctx, &o, false, "profile", "save", name, file, NULL);
	if (o.status)
		CT_FAIL("profile save: %s", o.err);
	p = json_object_from_file(file);
	CT_ASSERT(p);
	CT_ASSERT(json_object_object_get_ex(p, "ranked", &r));
	CT_EQ(json_object_array_length(r), 3);
	CT_ASSERT(!strcmp(json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN),
			  "[[0,1],[1,0],[0,2]]"));
	json_object_put(p);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CT_ASSERT(f);
	fputs(text, f);
	fclose(f);
}

void cli_profile_load(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], installed[256];
	const char *good = ct_file(ctx, "good.json"), *bad = ct_file(ctx, "bad.json");
	struct json_object *p;
	struct ct_out o;

	ct_pool(ctx, "pl", name);
	ct_create(name, &geom);
	snprintf(installed, sizeof(installed), "%s/run/%s.profile.json", ctx->dir, name);
	write_text(bad, "{\"ranked\": [[0, 1], [3, 0]]}\n");
	ct_ctl(ctx, &o, false, "profile", "load", name, bad, NULL);
	CT_EQ(o.status, 1);
	CT_ASSERT(access(installed, F_OK) != 0);
	write_text(bad, "{\"ranked\": [[0, 1], [0, 1]]}\n");
	ct_ctl(ctx, &o, false, "profile", "load", name, bad, NULL);
	CT_EQ(o.status, 1);

	write_text(good, "{\"ranked\": [[2, 7], [0, 0]]}\n");
	ct_ctl(ctx, &o, false, "profile", "load", name, good, NULL);
	if (o.status)
		CT_FAIL("profile load: %s", o.err);
	CT_CONTAINS(o.out, "no agent attached");
	p = json_object_from_file(installed);
	CT_ASSERT(p);
	CT_ASSERT(!strcmp(json_object_to_json_string_ext(json_object_object_get(p, "ranked"),
							 JSON_C_TO_STRING_PLAIN),
			  "[[2,7],[0,0]]"));
	json_object_put(p);
}

/* An agent that exits 0 when it gets SIGHUP, 1 if none comes in 20 s. */
static void hup_agent(const char *pool)
{
	struct timespec wait = {20, 0};
	struct moecache *agent;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (moecache_open_attach(pool, MOECACHE_ROLE_AGENT, &agent))
		_exit(2);
	_exit(sigtimedwait(&set, NULL, &wait) == SIGHUP ? 0 : 1);
}

void cli_policy_set_signals_agent(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], path[256];
	struct ct_out o;
	int status;
	pid_t pid;

	ct_pool(ctx, "pol", name);
	ct_create(name, &geom);
	ct_ctl(ctx, &o, false, "policy", "set", name, "belady", NULL);
	CT_EQ(o.status, 2);
	pid = fork();
	if (pid == 0)
		hup_agent(name);
	CT_ASSERT(pid > 0);
	ct_wait_agent(name, pid);
	ct_ctl(ctx, &o, false, "policy", "set", name, "lru", NULL);
	if (o.status)
		CT_FAIL("policy set: %s", o.err);
	CT_EQ(waitpid(pid, &status, 0), pid);
	CT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "%s/run/%s.policy", ctx->dir, name);
	CT_ASSERT(file_has(path, "lru\n"));
}

void cli_policy_unknown_pool(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	ct_pool(ctx, "none", name);
	ct_ctl(ctx, &o, false, "policy", "set", name, "lfu", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "No such pool");
}

/* Names the agent runs reach the pool lookup; the simulator's oracles are usage errors. */
void cli_policy_names(struct ct_ctx *ctx)
{
	static const char *const live[] = {"reuse", "revisit", "duel", "lrfu", "default"};
	static const char *const offline[] = {"belady", "lookahead"};
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;
	size_t i;

	ct_pool(ctx, "names", name);
	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		ct_ctl(ctx, &o, false, "policy", "set", name, live[i], NULL);
		CT_EQ(o.status, 1);
		CT_CONTAINS(o.err, "No such pool");
	}
	for (i = 0; i < sizeof(offline) / sizeof(offline[0]); i++) {
		ct_ctl(ctx, &o, false, "policy", "set", name, offline[i], NULL);
		CT_EQ(o.status, 2);
		CT_CONTAINS(o.err, "unknown policy");
	}
}
