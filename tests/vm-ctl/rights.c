// SPDX-License-Identifier: MIT
/*
 * Whose rights the family checks: a pool is seen (listed, described, its
 * statistics and events) only by who may read it, rights are those of both
 * the socket's opener and its sender, and pids are in the reader's pid
 * namespace.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmoecache.h>
#include <moecache_netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "harness.h"
#include "tests.h"

/* Root's, mode 0600: nobody else may read it. */
static const struct ct_geom private_pool = {
    .n_layers = 2,
    .n_experts = 4,
    .n_slots = 2,
    .expert_bytes = 4096,
    .mode = 0600,
};

/* Root's, readable by others. */
static const struct ct_geom public_pool = {
    .n_layers = 2,
    .n_experts = 4,
    .n_slots = 2,
    .expert_bytes = 4096,
    .mode = 0604,
};

struct pool_arg {
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl *nl; /* a socket opened by another user, or NULL */
};

static int errno_of(int ret)
{
	return ret < 0 ? -ret : 0;
}

static int no_stats(uint32_t layer, const struct moecache_stats *st, void *arg)
{
	return 0;
}

static int open_or(struct pool_arg *a, struct ctl_nl *own, struct ctl_nl **nl)
{
	*nl = a->nl;
	if (*nl)
		return 0;
	*nl = own;
	return ctl_nl_open(own);
}

static int reads_stats(void *p)
{
	struct pool_arg *a = p;
	struct moecache_stats st;
	struct ctl_nl own, *nl;
	int ret;

	if (open_or(a, &own, &nl))
		return 100;
	ret = ctl_nl_stats(nl, a->name, MOECACHE_NONE, &st);
	ctl_nl_close(nl);
	return errno_of(ret);
}

static int dumps_stats(void *p)
{
	struct pool_arg *a = p;
	struct ctl_nl own, *nl;
	int ret;

	if (open_or(a, &own, &nl))
		return 100;
	ret = ctl_nl_stats_dump(nl, a->name, no_stats, NULL);
	ctl_nl_close(nl);
	return errno_of(ret);
}

static int describes(void *p)
{
	struct pool_arg *a = p;
	struct ctl_nl own, *nl;
	struct ctl_pool pool;
	int ret;

	if (open_or(a, &own, &nl))
		return 100;
	ret = ctl_nl_pool_info(nl, a->name, &pool);
	ctl_nl_close(nl);
	return errno_of(ret);
}

struct listed {
	const char *name;
	bool seen;
};

static int note_listed(const struct ctl_pool *p, void *arg)
{
	struct listed *l = arg;

	l->seen |= !strcmp(p->name, l->name);
	return 0;
}

/* 0 if the pool is not listed, 1 if it is. */
static int lists(void *p)
{
	struct listed l = {.name = ((struct pool_arg *)p)->name};
	struct ctl_nl nl;
	int ret;

	if (ctl_nl_open(&nl))
		return 100;
	ret = ctl_nl_pool_list(&nl, note_listed, &l);
	ctl_nl_close(&nl);
	if (ret)
		return 101;
	return l.seen ? 1 : 0;
}

void nl_stats_private_pool(struct ct_ctx *ctx)
{
	struct pool_arg a = {.nl = NULL};

	/* the routing leak: per-layer hits and misses of a pool nobody may read */
	ct_pool(ctx, "p", a.name);
	ct_create(a.name, &private_pool);
	/* No right at all: as if there were no such pool. */
	CT_EQ(ct_as_nobody(reads_stats, &a), ENOENT);
	CT_EQ(ct_as_nobody(dumps_stats, &a), ENOENT);
}

void nl_info_private_pool(struct ct_ctx *ctx)
{
	struct pool_arg a = {.nl = NULL};

	ct_pool(ctx, "p", a.name);
	ct_create(a.name, &private_pool);
	CT_EQ(ct_as_nobody(describes, &a), ENOENT);
	CT_EQ(ct_as_nobody(lists, &a), 0);
	/* root still sees it: the list is not simply empty */
	CT_EQ(lists(&a), 1);
}

void nl_group_reads(struct ct_ctx *ctx)
{
	struct ct_geom g = private_pool;
	struct pool_arg a = {.nl = NULL};

	g.gid = CT_NOBODY;
	g.mode = 0640;
	ct_pool(ctx, "g", a.name);
	ct_create(a.name, &g);
	CT_EQ(ct_as_nobody(lists, &a), 1);
	CT_EQ(ct_as_nobody(describes, &a), 0);
	CT_EQ(ct_as_nobody(reads_stats, &a), 0);
	CT_EQ(ct_as_nobody(dumps_stats, &a), 0);
}

void nl_stats_deputy(struct ct_ctx *ctx)
{
	struct pool_arg a = {.nl = NULL};
	struct ctl_nl deputy, root;

	ct_pool(ctx, "p", a.name);
	ct_create(a.name, &private_pool);
	/* root asks on a socket nobody opened: nobody would read the answer */
	ct_nl_adopt(&deputy, ct_nobody_socket());
	a.nl = &deputy;
	CT_EQ(reads_stats(&a), ENOENT);
	ct_nl_adopt(&deputy, ct_nobody_socket());
	CT_EQ(dumps_stats(&a), ENOENT);
	ct_nl_adopt(&deputy, ct_nobody_socket());
	CT_EQ(describes(&a), ENOENT);
	/* nobody asks on a socket root opened */
	ct_nl_open(&root);
	a.nl = &root;
	CT_EQ(ct_as_nobody(reads_stats, &a), ENOENT);
	ctl_nl_close(&root);
}

static int destroys(void *p)
{
	struct pool_arg *a = p;
	struct ctl_nl own, *nl;
	int ret;

	if (open_or(a, &own, &nl))
		return 100;
	ret = ctl_nl_pool_destroy(nl, a->name);
	ctl_nl_close(nl);
	return errno_of(ret);
}

static int flushes(void *p)
{
	struct pool_arg *a = p;
	struct ctl_nl own, *nl;
	uint32_t flushed;
	int ret;

	if (open_or(a, &own, &nl))
		return 100;
	ret = ctl_nl_flush(nl, a->name, &flushed);
	ctl_nl_close(nl);
	return errno_of(ret);
}

/* A pool (or none) and what uid 65534 gets for each request. */
static const struct {
	const char *what;
	bool exists;
	uint32_t gid;
	uint32_t mode;
	int info, stats, dump, flush, destroy;
} probe_cases[] = {
    {"no such pool", false, 0, 0, ENOENT, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0600", true, 0, 0600, ENOENT, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0640, another group", true, 1, 0640, ENOENT, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0604", true, 0, 0604, 0, 0, 0, EPERM, EPERM},
    {"root's 0602: others may only write", true, 0, 0602, EACCES, EACCES, EACCES, EPERM,
     EPERM},
};

static void probe_expect(const char *what, const char *op, int got, int want)
{
	if (got != want)
		CT_FAIL("%s, %s by uid 65534: %s, expected %s", what, op,
			got ? strerror(got) : "success", want ? strerror(want) : "success");
}

void nl_probe_table(struct ct_ctx *ctx)
{
	size_t i;

	for (i = 0; i < sizeof(probe_cases) / sizeof(probe_cases[0]); i++) {
		struct ct_geom g = private_pool;
		struct pool_arg a = {.nl = NULL};
		char suffix[8];

		snprintf(suffix, sizeof(suffix), "t%zu", i);
		ct_pool(ctx, suffix, a.name);
		g.gid = probe_cases[i].gid;
		g.mode = probe_cases[i].mode;
		if (probe_cases[i].exists)
			ct_create(a.name, &g);
		probe_expect(probe_cases[i].what, "POOL_INFO", ct_as_nobody(describes, &a),
			     probe_cases[i].info);
		probe_expect(probe_cases[i].what, "STATS", ct_as_nobody(reads_stats, &a),
			     probe_cases[i].stats);
		probe_expect(probe_cases[i].what, "STATS dump", ct_as_nobody(dumps_stats, &a),
			     probe_cases[i].dump);
		probe_expect(probe_cases[i].what, "FLUSH", ct_as_nobody(flushes, &a),
			     probe_cases[i].flush);
		probe_expect(probe_cases[i].what, "POOL_DESTROY", ct_as_nobody(destroys, &a),
			     probe_cases[i].destroy);
	}
}

void nl_destroy_deputy(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl deputy, nl;
	struct ctl_pool p;
	uint32_t flushed;

	/* a socket nobody opened, handed to root (a set-uid program's stdout) */
	ct_pool(ctx, "d", name);
	ct_create(name, &private_pool);
	ct_nl_adopt(&deputy, ct_nobody_socket());
	/* its opener may not even know the pool exists */
	CT_RET(ctl_nl_pool_destroy(&deputy, name), -ENOENT);
	CT_RET(ctl_nl_flush(&deputy, name, &flushed), -ENOENT);
	ctl_nl_close(&deputy);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_info(&nl, name, &p));
	ctl_nl_close(&nl);
}

/* ---- events ---- */

struct listener_arg {
	const char *prefix;
	char private_name[MOECACHE_NAME_LEN];
	char public_name[MOECACHE_NAME_LEN];
	int ready; /* pipe: written once listening */
};

static bool saw(const struct ct_event_log *log, const char *pool, uint32_t type)
{
	unsigned int i;

	for (i = 0; i < log->n; i++)
		if (!strcmp(log->ev[i].pool, pool) && log->ev[i].type == type)
			return true;
	return false;
}

static unsigned int count_of(const struct ct_event_log *log, const char *pool)
{
	unsigned int i, n = 0;

	for (i = 0; i < log->n; i++)
		n += !strcmp(log->ev[i].pool, pool);
	return n;
}

/*
 * Listens by every way the family offers: its subscription and, if the
 * family still advertises one, the "events" multicast group of version 1.
 * Collects until the public pool's destruction (the last event the test
 * makes).
 */
static int listens(void *p)
{
	struct listener_arg *a = p;
	struct ct_event_log log = {.prefix = a->prefix};
	uint64_t until;
	struct ctl_nl nl;
	int grp, sub;

	if (ctl_nl_open(&nl))
		return 100;
	grp = genl_ctrl_resolve_grp(nl.sk, MOECACHE_GENL_NAME, "events");
	if (grp >= 0 && nl_socket_add_membership(nl.sk, grp) < 0)
		return 101;
	sub = ctl_nl_events_join(&nl);
	if (write(a->ready, "r", 1) != 1)
		return 102;
	until = ct_now_ms() + 10000;
	for (;;) {
		ct_drain_events(&nl, &log);
		if (saw(&log, a->public_name, MOECACHE_EVENT_POOL_DESTROYED) ||
		    ct_now_ms() >= until)
			break;
		ct_sleep_ms(20);
	}
	ctl_nl_close(&nl);
	if (count_of(&log, a->private_name)) {
		fprintf(stderr, "# uid %d saw %u events of a root pool with mode 0600 (first: %s)\n",
			CT_NOBODY, count_of(&log, a->private_name),
			ctl_nl_event_name(log.ev[0].type));
		return 10;
	}
	if (sub) {
		fprintf(stderr, "# subscribing: %s\n", strerror(-sub));
		return 11;
	}
	if (!saw(&log, a->public_name, MOECACHE_EVENT_POOL_CREATED) ||
	    !saw(&log, a->public_name, MOECACHE_EVENT_POOL_DESTROYED)) {
		fprintf(stderr, "# the readable pool's events did not arrive\n");
		return 12;
	}
	return 0;
}

/* Events of both pools: the private one's first, the public one's last. */
static void make_events(const struct listener_arg *a)
{
	struct moecache *agent;
	struct ctl_nl nl;

	ct_create(a->private_name, &private_pool);
	CT_OK(moecache_open_attach(a->private_name, MOECACHE_ROLE_AGENT, &agent));
	moecache_close(agent);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_destroy(&nl, a->private_name));
	ct_create(a->public_name, &public_pool);
	CT_OK(ctl_nl_pool_destroy(&nl, a->public_name));
	ctl_nl_close(&nl);
}

void nl_events_private_pool(struct ct_ctx *ctx)
{
	struct listener_arg a = {.prefix = ctx->prefix};
	int ready[2];
	char byte;
	pid_t pid;

	ct_pool(ctx, "priv", a.private_name);
	ct_pool(ctx, "pub", a.public_name);
	if (pipe(ready))
		CT_FAIL("pipe: %s", strerror(errno));
	a.ready = ready[1];
	pid = ct_spawn_nobody(listens, &a);
	close(ready[1]);
	if (read(ready[0], &byte, 1) != 1)
		CT_FAIL("the listener did not start (%d)", ct_wait_child(pid));
	make_events(&a);
	CT_EQ(ct_wait_child(pid), 0);
}

void nl_events_deputy(struct ct_ctx *ctx)
{
	struct listener_arg a = {.prefix = ctx->prefix};
	struct ct_event_log log = {.prefix = ctx->prefix};
	struct ctl_nl deputy;

	/* root subscribes a socket nobody opened: nobody reads what arrives */
	ct_pool(ctx, "priv", a.private_name);
	ct_pool(ctx, "pub", a.public_name);
	ct_nl_adopt(&deputy, ct_nobody_socket());
	CT_OK(ctl_nl_events_join(&deputy));
	make_events(&a);
	/* every event was queued before the requests that made them returned */
	ct_drain_events(&deputy, &log);
	CT_EQ(count_of(&log, a.private_name), 0);
	CT_ASSERT(saw(&log, a.public_name, MOECACHE_EVENT_POOL_DESTROYED));
	ctl_nl_close(&deputy);
}

void nl_events_subscribe_twice(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl ev;

	ct_nl_open(&ev);
	CT_OK(ctl_nl_events_join(&ev));
	CT_RET(ctl_nl_events_join(&ev), -EALREADY);
	CT_OK(ctl_nl_events_leave(&ev));
	CT_RET(ctl_nl_events_leave(&ev), -ENOENT);
	/* unsubscribed: nothing arrives */
	ct_pool(ctx, "e", name);
	ct_create(name, &public_pool);
	ct_drain_events(&ev, &log);
	CT_EQ(log.n, 0);
	ctl_nl_close(&ev);
}

static int subscribes_three(void *p)
{
	struct ctl_nl nl[3];
	int i, ret[3];

	for (i = 0; i < 3; i++) {
		if (ctl_nl_open(&nl[i]))
			return 100;
		ret[i] = ctl_nl_events_join(&nl[i]);
	}
	for (i = 0; i < 3; i++)
		ctl_nl_close(&nl[i]);
	if (ret[0] || ret[1])
		return 101;
	return errno_of(ret[2]);
}

void nl_events_listener_limit(struct ct_ctx *ctx)
{
	unsigned int old = ct_set_param("max_user_event_listeners", 2);
	struct ctl_nl nl[3];
	int code, i;

	code = ct_as_nobody(subscribes_three, NULL);
	/* CAP_SYS_ADMIN is not held to the per-user limit */
	for (i = 0; i < 3; i++) {
		ct_nl_open(&nl[i]);
		CT_OK(ctl_nl_events_join(&nl[i]));
	}
	for (i = 0; i < 3; i++)
		ctl_nl_close(&nl[i]);
	ct_set_param("max_user_event_listeners", old);
	CT_EQ(code, ENOSPC);
}

void nl_events_closed_socket(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix}, seen = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl first, marker, heir;
	uint32_t port;

	ct_nl_open(&first);
	CT_OK(ctl_nl_events_join(&first));
	port = nl_socket_get_local_port(first.sk);
	ctl_nl_close(&first);
	/* a new socket takes the closed one's port id: it inherits nothing */
	memset(&heir, 0, sizeof(heir));
	heir.sk = nl_socket_alloc();
	CT_ASSERT(heir.sk);
	nl_socket_set_local_port(heir.sk, port);
	CT_ASSERT(genl_connect(heir.sk) == 0);
	ct_nl_open(&marker);
	CT_OK(ctl_nl_events_join(&marker));
	ct_pool(ctx, "e", name);
	ct_create(name, &public_pool);
	ct_drain_events(&marker, &seen);
	CT_ASSERT(saw(&seen, name, MOECACHE_EVENT_POOL_CREATED));
	ct_drain_events(&heir, &log);
	CT_EQ(log.n, 0);
	ctl_nl_close(&marker);
	ctl_nl_close(&heir);
}

/* ---- pid namespaces ---- */

/*
 * Runs in a new pid namespace, as its pid 1: attaches to name as the agent,
 * says so on ready, holds the pool until done is closed.
 */
static int agent_in_namespace(const char *name, int ready, int done)
{
	struct moecache *agent;
	char byte;

	if (moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent))
		return 2;
	if (write(ready, "r", 1) != 1)
		return 3;
	if (read(done, &byte, 1) < 0)
		return 4;
	moecache_close(agent);
	return 0;
}

void nl_agent_pid_namespace(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix};
	int ready[2], done[2], pids[2], status, sub;
	char name[MOECACHE_NAME_LEN], byte;
	struct moecache_stats st;
	pid_t outer, inner = 0;
	struct ctl_nl nl, ev;
	struct ctl_pool p;

	ct_pool(ctx, "ns", name);
	ct_create(name, &private_pool);
	ct_nl_open(&ev);
	sub = ctl_nl_events_join(&ev);
	/* the agent says it attached on ready; its parent says its pid on pids */
	if (pipe(ready) || pipe(done) || pipe(pids))
		CT_FAIL("pipe: %s", strerror(errno));
	outer = fork();
	if (outer < 0)
		CT_FAIL("fork: %s", strerror(errno));
	if (outer == 0) {
		close(done[1]);
		if (unshare(CLONE_NEWPID))
			CT_FAIL("unshare(CLONE_NEWPID): %s", strerror(errno));
		inner = fork();
		if (inner == 0)
			_exit(agent_in_namespace(name, ready[1], done[0]));
		/* the agent's end only: its failure reaches the test as EOF */
		close(ready[1]);
		/* the agent's pid here, in the test's namespace */
		if (inner < 0 || write(pids[1], &inner, sizeof(inner)) != sizeof(inner))
			_exit(5);
		if (waitpid(inner, &status, 0) < 0 || !WIFEXITED(status))
			_exit(6);
		_exit(WEXITSTATUS(status));
	}
	close(done[0]);
	close(ready[1]);
	close(pids[1]);
	if (read(pids[0], &inner, sizeof(inner)) != sizeof(inner) ||
	    read(ready[0], &byte, 1) != 1) {
		close(done[1]);
		CT_FAIL("the agent did not start (%d)", ct_wait_child(outer));
	}
	/* it is pid 1 in its own namespace, inner in ours */
	CT_ASSERT(inner > 1);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_info(&nl, name, &p));
	CT_EQ(p.agent_pid, inner);
	CT_OK(ctl_nl_stats(&nl, name, MOECACHE_NONE, &st));
	CT_EQ(st.agent_pid, inner);
	ctl_nl_close(&nl);
	CT_OK(sub);
	ct_wait_events(&ev, &log, 1);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_AGENT_ATTACHED);
	CT_ASSERT(log.ev[0].has_pid);
	CT_EQ(log.ev[0].pid, inner);
	close(done[1]);
	CT_EQ(ct_wait_child(outer), 0);
	ctl_nl_close(&ev);
}

/* In a new pid namespace: what agent pid POOL_INFO and STATS report. */
static int reads_agent_pid(const char *name)
{
	struct moecache_stats st;
	struct ctl_pool p;
	struct ctl_nl nl;

	if (ctl_nl_open(&nl) || ctl_nl_pool_info(&nl, name, &p) ||
	    ctl_nl_stats(&nl, name, MOECACHE_NONE, &st))
		return 100;
	ctl_nl_close(&nl);
	if (p.agent_pid != st.agent_pid)
		return 101;
	return p.agent_pid ? 1 : 0;
}

void nl_agent_pid_invisible(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache *agent;
	pid_t outer, inner;
	int status;

	ct_pool(ctx, "ns", name);
	ct_create(name, &private_pool);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	/* a reader in a child pid namespace cannot name this process */
	outer = fork();
	if (outer < 0)
		CT_FAIL("fork: %s", strerror(errno));
	if (outer == 0) {
		if (unshare(CLONE_NEWPID))
			CT_FAIL("unshare(CLONE_NEWPID): %s", strerror(errno));
		inner = fork();
		if (inner == 0)
			_exit(reads_agent_pid(name));
		if (inner < 0 || waitpid(inner, &status, 0) < 0 || !WIFEXITED(status))
			_exit(102);
		_exit(WEXITSTATUS(status));
	}
	CT_EQ(ct_wait_child(outer), 0);
	moecache_close(agent);
}
