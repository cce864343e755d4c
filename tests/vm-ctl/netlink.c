// SPDX-License-Identifier: MIT
/* The generic netlink family: each command with and without its rights, and malformed requests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmoecache.h>
#include <moecache_netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "harness.h"
#include "tests.h"

static const struct ct_geom small = {
    .n_layers = 3,
    .n_experts = 8,
    .n_slots = 4,
    .expert_bytes = 4096,
};

/* The same, readable by others. */
static const struct ct_geom small_readable = {
    .n_layers = 3,
    .n_experts = 8,
    .n_slots = 4,
    .expert_bytes = 4096,
    .mode = 0604,
};

/* ---- well-formed requests ---- */

void nl_create_info(struct ct_ctx *ctx)
{
	struct ct_geom g = {.n_layers = 4,
			    .n_experts = 16,
			    .expert_begin = 4,
			    .expert_end = 12,
			    .n_slots = 6,
			    .expert_bytes = 8192,
			    .uid = 1000,
			    .mode = 0640};
	char name[MOECACHE_NAME_LEN];
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "a", name);
	ct_create(name, &g);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_info(&nl, name, &p));
	CT_ASSERT(!strcmp(p.name, name));
	CT_EQ(p.n_layers, 4);
	CT_EQ(p.n_experts, 16);
	CT_EQ(p.expert_begin, 4);
	CT_EQ(p.expert_end, 12);
	CT_EQ(p.n_slots, 6);
	CT_EQ(p.expert_bytes, 8192);
	CT_EQ(p.host_bytes, 4ull * 8 * 8192);
	CT_EQ(p.uid, 1000);
	CT_EQ(p.mode, 0640);
	CT_EQ(p.flags, 0);
	CT_EQ(p.n_files, 0);
	CT_EQ(p.agent_pid, 0);
	ctl_nl_close(&nl);
}

void nl_create_defaults(struct ct_ctx *ctx)
{
	struct ctl_create c;
	struct ctl_pool p;
	struct ctl_nl nl;

	memset(&c, 0, sizeof(c));
	ct_pool(ctx, "d", c.req.name);
	c.req.n_layers = 2;
	c.req.n_experts = 5;
	c.req.n_slots = 2;
	c.req.expert_bytes = 4096;
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_create(&nl, &c));
	CT_OK(ctl_nl_pool_info(&nl, c.req.name, &p));
	CT_EQ(p.expert_begin, 0);
	CT_EQ(p.expert_end, 5);
	CT_EQ(p.uid, 0);
	CT_EQ(p.gid, 0);
	CT_EQ(p.mode, 0600);
	ctl_nl_close(&nl);
}

struct seen_pools {
	const char *prefix;
	char names[8][MOECACHE_NAME_LEN];
	unsigned int n;
};

static int note_pool(const struct ctl_pool *p, void *arg)
{
	struct seen_pools *s = arg;

	if (!strncmp(p->name, s->prefix, strlen(s->prefix)) && s->n < 8)
		snprintf(s->names[s->n++], MOECACHE_NAME_LEN, "%s", p->name);
	return 0;
}

void nl_list(struct ct_ctx *ctx)
{
	struct seen_pools s = {.prefix = ctx->prefix};
	char name[3][MOECACHE_NAME_LEN];
	struct ctl_nl nl;
	int i;

	for (i = 0; i < 3; i++) {
		char suffix[8];

		snprintf(suffix, sizeof(suffix), "p%d", i);
		ct_pool(ctx, suffix, name[i]);
		ct_create(name[i], &small);
	}
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_list(&nl, note_pool, &s));
	CT_EQ(s.n, 3);
	for (i = 0; i < 3; i++) /* in creation order */
		CT_ASSERT(!strcmp(s.names[i], name[i]));
	ctl_nl_close(&nl);
}

struct layer_seen {
	uint32_t layers[16];
	uint64_t misses[16];
	unsigned int n;
};

static int note_layer(uint32_t layer, const struct moecache_stats *st, void *arg)
{
	struct layer_seen *s = arg;

	if (s->n < 16) {
		s->layers[s->n] = layer;
		s->misses[s->n] = st->misses;
		s->n++;
	}
	return 0;
}

/* A client of pool misses the experts listed in layer (no agent: all miss). */
static void client_misses(const char *pool, uint32_t layer, const uint32_t *experts, uint32_t count,
			  struct moecache **keep)
{
	uint32_t slots[16];
	struct moecache *mc;

	CT_OK(moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, &mc));
	CT_OK(moecache_acquire(mc, layer, experts, count, slots, 0, 0, NULL));
	if (keep)
		*keep = mc;
	else
		moecache_close(mc);
}

void nl_stats_dump(struct ct_ctx *ctx)
{
	static const uint32_t experts[] = {0, 1, 2};
	char name[MOECACHE_NAME_LEN];
	struct layer_seen s = {0};
	struct ctl_nl nl;
	unsigned int i;

	ct_pool(ctx, "s", name);
	ct_create(name, &small);
	client_misses(name, 1, experts, 3, NULL);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_stats_dump(&nl, name, note_layer, &s));
	CT_EQ(s.n, 1 + small.n_layers);
	CT_EQ(s.layers[0], MOECACHE_NONE);
	CT_EQ(s.misses[0], 3);
	for (i = 0; i < small.n_layers; i++) {
		CT_EQ(s.layers[1 + i], i);
		CT_EQ(s.misses[1 + i], i == 1 ? 3 : 0);
	}
	ctl_nl_close(&nl);
}

static int count_layers(uint32_t layer, const struct moecache_stats *st, void *arg)
{
	uint32_t *n = arg;

	/* the pool first, then layers 0, 1, ... without a gap or a repeat */
	if (*n == 0 ? layer != MOECACHE_NONE : layer != *n - 1)
		return -EPROTO;
	(*n)++;
	return 0;
}

void nl_stats_dump_all_layers(struct ct_ctx *ctx)
{
	struct ct_geom g = small;
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl nl;
	uint32_t n = 0;

	g.n_layers = 300; /* more than one dump skb holds */
	ct_pool(ctx, "m", name);
	ct_create(name, &g);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_stats_dump(&nl, name, count_layers, &n));
	CT_EQ(n, 301);
	ctl_nl_close(&nl);
}

void nl_stats_one_layer(struct ct_ctx *ctx)
{
	static const uint32_t experts[] = {5, 6};
	char name[MOECACHE_NAME_LEN];
	struct moecache_stats st;
	struct ctl_nl nl;

	ct_pool(ctx, "s", name);
	ct_create(name, &small);
	client_misses(name, 2, experts, 2, NULL);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_stats(&nl, name, 2, &st));
	CT_EQ(st.layer, 2);
	CT_EQ(st.misses, 2);
	CT_OK(ctl_nl_stats(&nl, name, 0, &st));
	CT_EQ(st.misses, 0);
	CT_OK(ctl_nl_stats(&nl, name, MOECACHE_NONE, &st));
	CT_EQ(st.layer, MOECACHE_NONE);
	CT_EQ(st.misses, 2);
	CT_EQ(st.n_clients, 0);
	ctl_nl_close(&nl);
}

/* The agent makes (layer, expert) resident in slot. */
static void agent_fill(struct moecache *agent, uint32_t slot, uint32_t layer, uint32_t expert)
{
	struct moecache_fill f = {.slot = slot, .layer = layer, .expert = expert};

	CT_OK(moecache_evict(agent, slot, layer, expert, NULL, NULL));
	CT_OK(moecache_commit(agent, &f, 1));
}

/* FLUSH leaves the slot a client pinned (by ACQUIRE, or with fast pins), then frees it. */
static void flush_keeps_pinned(struct ct_ctx *ctx, const char *tag, uint32_t attach_flags)
{
	static const uint32_t one[] = {1};
	char name[MOECACHE_NAME_LEN];
	struct moecache *agent, *client;
	struct moecache_stats st;
	uint32_t slot, flushed;
	struct ctl_nl nl;

	ct_pool(ctx, tag, name);
	ct_create(name, &small);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	agent_fill(agent, 0, 0, 0);
	agent_fill(agent, 1, 0, 1);
	CT_OK(moecache_open_attach_flags(name, MOECACHE_ROLE_CLIENT, attach_flags, &client));
	CT_OK(moecache_acquire(client, 0, one, 1, &slot, 0, 0, NULL));
	CT_EQ(slot, 1);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_stats(&nl, name, MOECACHE_NONE, &st));
	/* A fast pin is the client's own: the driver's pin count does not show it. */
	CT_EQ(st.pins, attach_flags & MOECACHE_ATTACH_FAST_PINS ? 0 : 1);
	/* the pinned expert stays */
	CT_OK(ctl_nl_flush(&nl, name, &flushed));
	CT_EQ(flushed, 1);
	CT_OK(ctl_nl_stats(&nl, name, MOECACHE_NONE, &st));
	CT_EQ(st.resident, 1);
	CT_EQ(moecache_map_slot(moecache_map(client), 0, 1), 1);
	CT_OK(moecache_release(client, &slot, 1));
	CT_OK(ctl_nl_flush(&nl, name, &flushed));
	CT_EQ(flushed, 1);
	CT_OK(ctl_nl_stats(&nl, name, MOECACHE_NONE, &st));
	CT_EQ(st.resident, 0);
	ctl_nl_close(&nl);
	moecache_close(client);
	moecache_close(agent);
}

void nl_flush(struct ct_ctx *ctx)
{
	flush_keeps_pinned(ctx, "f", 0);
}

void nl_flush_fast_pins(struct ct_ctx *ctx)
{
	flush_keeps_pinned(ctx, "ff", MOECACHE_ATTACH_FAST_PINS);
}

void nl_destroy(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "x", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	CT_RET(ctl_nl_pool_destroy(&nl, name), -ENOENT);
	ctl_nl_close(&nl);
}

/* ---- events ---- */

void nl_events_pools(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl ev, nl;

	ct_nl_open(&ev);
	CT_OK(ctl_nl_events_join(&ev));
	ct_pool(ctx, "e", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	ct_wait_events(&ev, &log, 2);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_POOL_CREATED);
	CT_ASSERT(!strcmp(log.ev[0].pool, name));
	CT_EQ(log.ev[1].type, MOECACHE_EVENT_POOL_DESTROYED);
	CT_ASSERT(!strcmp(log.ev[1].pool, name));
	ctl_nl_close(&nl);
	ctl_nl_close(&ev);
}

void nl_events_agent(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	struct moecache *agent;
	struct ctl_nl ev;

	ct_pool(ctx, "e", name);
	ct_create(name, &small);
	ct_nl_open(&ev);
	CT_OK(ctl_nl_events_join(&ev));
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	moecache_close(agent);
	ct_wait_events(&ev, &log, 2);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_AGENT_ATTACHED);
	CT_ASSERT(log.ev[0].has_pid);
	CT_EQ(log.ev[0].pid, getpid());
	CT_EQ(log.ev[1].type, MOECACHE_EVENT_AGENT_LOST);
	ctl_nl_close(&ev);
}

void nl_events_eviction(struct ct_ctx *ctx)
{
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	struct moecache *agent;
	unsigned int old;
	struct ctl_nl ev;

	ct_pool(ctx, "e", name);
	ct_create(name, &small);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent));
	agent_fill(agent, 0, 2, 7);
	ct_nl_open(&ev);
	CT_OK(ctl_nl_events_join(&ev));
	old = ct_set_param("evict_event_sample", 1);
	agent_fill(agent, 0, 1, 3); /* evicts (2, 7) */
	ct_set_param("evict_event_sample", old);
	ct_wait_events(&ev, &log, 1);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_EVICTION);
	CT_ASSERT(log.ev[0].has_layer && log.ev[0].has_expert);
	CT_EQ(log.ev[0].layer, 2);
	CT_EQ(log.ev[0].expert, 7);
	moecache_close(agent);
	ctl_nl_close(&ev);
}

void nl_events_miss_storm(struct ct_ctx *ctx)
{
	static const uint32_t experts[] = {0, 1, 2, 3, 4, 5};
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN];
	unsigned int old;
	struct ctl_nl ev;

	ct_pool(ctx, "e", name);
	ct_create(name, &small);
	ct_nl_open(&ev);
	CT_OK(ctl_nl_events_join(&ev));
	old = ct_set_param("miss_storm_per_sec", 4);
	client_misses(name, 0, experts, 6, NULL);
	ct_set_param("miss_storm_per_sec", old);
	ct_wait_events(&ev, &log, 1);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_MISS_STORM);
	CT_ASSERT(!strcmp(log.ev[0].pool, name));
	CT_ASSERT(log.ev[0].has_misses);
	ctl_nl_close(&ev);
}

/* ---- rights ---- */

struct as_nobody_arg {
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl *nl; /* a socket opened before the privileges went, or NULL */
};

static int errno_of(int ret)
{
	return ret < 0 ? -ret : 0;
}

static int nobody_reads(void *p)
{
	struct as_nobody_arg *a = p;
	struct moecache_stats st;
	struct seen_pools s = {.prefix = a->name};
	struct ctl_pool pool;
	struct ctl_nl nl;
	int ret;

	if (ctl_nl_open(&nl))
		return 100;
	ret = ctl_nl_pool_list(&nl, note_pool, &s);
	if (!ret)
		ret = s.n == 1 ? 0 : -ENOENT;
	if (!ret)
		ret = ctl_nl_pool_info(&nl, a->name, &pool);
	if (!ret)
		ret = ctl_nl_stats(&nl, a->name, 0, &st);
	ctl_nl_close(&nl);
	return errno_of(ret);
}

void nl_unprivileged_reads(struct ct_ctx *ctx)
{
	struct ct_geom g = small;
	struct as_nobody_arg a;

	g.mode = 0604;
	ct_pool(ctx, "r", a.name);
	ct_create(a.name, &g);
	CT_EQ(ct_as_nobody(nobody_reads, &a), 0);
}

static int nobody_creates(void *p)
{
	struct as_nobody_arg *a = p;
	struct ctl_create c;
	struct ctl_nl own, *nl = a->nl;
	int ret;

	if (!nl) {
		if (ctl_nl_open(&own))
			return 100;
		nl = &own;
	}
	memset(&c, 0, sizeof(c));
	snprintf(c.req.name, sizeof(c.req.name), "%s", a->name);
	c.req.n_layers = 1;
	c.req.n_experts = 2;
	c.req.n_slots = 1;
	c.req.expert_bytes = 4096;
	c.req.uid = CT_NOBODY;
	c.has_uid = true;
	ret = ctl_nl_pool_create(nl, &c);
	ctl_nl_close(nl);
	return errno_of(ret);
}

void nl_create_unprivileged(struct ct_ctx *ctx)
{
	struct as_nobody_arg a = {.nl = NULL};
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "u", a.name);
	CT_EQ(ct_as_nobody(nobody_creates, &a), EPERM);
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_info(&nl, a.name, &p), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_create_root_socket_unprivileged(struct ct_ctx *ctx)
{
	struct ctl_nl root;
	struct as_nobody_arg a = {.nl = &root};
	struct ctl_pool p;

	/* a socket root opened does not lend its rights to the process using it */
	ct_pool(ctx, "u", a.name);
	ct_nl_open(&root);
	CT_EQ(ct_as_nobody(nobody_creates, &a), EPERM);
	CT_RET(ctl_nl_pool_info(&root, a.name, &p), -ENOENT);
	ctl_nl_close(&root);
}

static int nobody_destroys(void *p)
{
	struct as_nobody_arg *a = p;
	struct ctl_nl nl;
	int ret;

	if (ctl_nl_open(&nl))
		return 100;
	ret = ctl_nl_pool_destroy(&nl, a->name);
	ctl_nl_close(&nl);
	return errno_of(ret);
}

static int nobody_flushes(void *p)
{
	struct as_nobody_arg *a = p;
	struct ctl_nl nl;
	uint32_t flushed;
	int ret;

	if (ctl_nl_open(&nl))
		return 100;
	ret = ctl_nl_flush(&nl, a->name, &flushed);
	ctl_nl_close(&nl);
	return errno_of(ret);
}

void nl_destroy_not_owner(struct ct_ctx *ctx)
{
	struct as_nobody_arg a;
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "o", a.name);
	/* One nobody may read: of another pool it would not learn even that. */
	ct_create(a.name, &small_readable);
	CT_EQ(ct_as_nobody(nobody_destroys, &a), EPERM);
	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_info(&nl, a.name, &p));
	ctl_nl_close(&nl);
}

void nl_destroy_owner(struct ct_ctx *ctx)
{
	struct ct_geom g = small;
	struct as_nobody_arg a;
	struct ctl_pool p;
	struct ctl_nl nl;

	g.uid = CT_NOBODY;
	ct_pool(ctx, "o", a.name);
	ct_create(a.name, &g);
	CT_EQ(ct_as_nobody(nobody_destroys, &a), 0);
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_info(&nl, a.name, &p), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_flush_not_owner(struct ct_ctx *ctx)
{
	struct as_nobody_arg a;

	ct_pool(ctx, "o", a.name);
	ct_create(a.name, &small_readable);
	CT_EQ(ct_as_nobody(nobody_flushes, &a), EPERM);
}

void nl_flush_owner(struct ct_ctx *ctx)
{
	struct ct_geom g = small;
	struct as_nobody_arg a;

	g.uid = CT_NOBODY;
	ct_pool(ctx, "o", a.name);
	ct_create(a.name, &g);
	CT_EQ(ct_as_nobody(nobody_flushes, &a), 0);
}

void nl_destroy_attached(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache *client;
	struct ctl_nl nl;

	ct_pool(ctx, "b", name);
	ct_create(name, &small);
	CT_OK(moecache_open_attach(name, MOECACHE_ROLE_CLIENT, &client));
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_destroy(&nl, name), -EBUSY);
	moecache_close(client);
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	ctl_nl_close(&nl);
}

void nl_create_exists(struct ct_ctx *ctx)
{
	struct ctl_create c;
	struct ctl_nl nl;

	memset(&c, 0, sizeof(c));
	ct_pool(ctx, "dup", c.req.name);
	ct_create(c.req.name, &small);
	c.req.n_layers = 1;
	c.req.n_experts = 1;
	c.req.n_slots = 1;
	c.req.expert_bytes = 4096;
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_create(&nl, &c), -EEXIST);
	ctl_nl_close(&nl);
}

void nl_create_bad_geometry(struct ct_ctx *ctx)
{
	struct ctl_create c;
	struct ctl_pool p;
	struct ctl_nl nl;

	memset(&c, 0, sizeof(c));
	ct_pool(ctx, "g", c.req.name);
	c.req.n_layers = 2;
	c.req.n_experts = 8;
	c.req.n_slots = 2;
	c.req.expert_bytes = 4096;
	c.has_range = true;
	c.req.expert_begin = 5;
	c.req.expert_end = 5;
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_create(&nl, &c), -EINVAL);
	c.req.expert_end = 9;
	CT_RET(ctl_nl_pool_create(&nl, &c), -EINVAL);
	c.req.expert_end = 8;
	c.req.expert_bytes = 4097;
	CT_RET(ctl_nl_pool_create(&nl, &c), -EINVAL);
	c.req.expert_bytes = 4096;
	snprintf(c.req.name, sizeof(c.req.name), "%s/slash", ctx->prefix);
	CT_RET(ctl_nl_pool_create(&nl, &c), -EINVAL);
	ct_pool(ctx, "g", c.req.name);
	CT_RET(ctl_nl_pool_info(&nl, c.req.name, &p), -ENOENT);
	ctl_nl_close(&nl);
}

/* ---- malformed requests, built by hand ---- */

static struct nl_msg *msg_new(struct ctl_nl *nl, uint8_t cmd, int flags)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, cmd, flags);

	CT_ASSERT(msg);
	return msg;
}

static int send_msg(struct ctl_nl *nl, struct nl_msg *msg)
{
	return ctl_nl_transact(nl, msg, NULL, NULL);
}

/* A creation request of a valid pool, but for the attribute left out. */
static struct nl_msg *create_msg(struct ctl_nl *nl, const char *name, int skip)
{
	struct nl_msg *msg = msg_new(nl, MOECACHE_CMD_POOL_CREATE, 0);

	if (skip != MOECACHE_A_POOL_NAME)
		nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	if (skip != MOECACHE_A_N_LAYERS)
		nla_put_u32(msg, MOECACHE_A_N_LAYERS, 2);
	if (skip != MOECACHE_A_N_EXPERTS)
		nla_put_u32(msg, MOECACHE_A_N_EXPERTS, 4);
	if (skip != MOECACHE_A_N_SLOTS)
		nla_put_u32(msg, MOECACHE_A_N_SLOTS, 2);
	if (skip != MOECACHE_A_EXPERT_BYTES)
		nla_put_u64(msg, MOECACHE_A_EXPERT_BYTES, 4096);
	return msg;
}

void nl_create_missing_attr(struct ct_ctx *ctx)
{
	static const int required[] = {MOECACHE_A_POOL_NAME, MOECACHE_A_N_LAYERS,
				       MOECACHE_A_N_EXPERTS, MOECACHE_A_N_SLOTS,
				       MOECACHE_A_EXPERT_BYTES};
	char name[MOECACHE_NAME_LEN];
	struct ctl_pool p;
	struct ctl_nl nl;
	size_t i;

	ct_pool(ctx, "m", name);
	ct_nl_open(&nl);
	for (i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		CT_RET(send_msg(&nl, create_msg(&nl, name, required[i])), -EINVAL);
		/* the kernel says which one */
		CT_ASSERT(ctl_nl_message(&nl));
	}
	CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	CT_OK(send_msg(&nl, create_msg(&nl, name, -1)));
	ctl_nl_close(&nl);
}

void nl_name_missing(struct ct_ctx *ctx)
{
	struct ctl_nl nl;

	ct_nl_open(&nl);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0)), -EINVAL);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_POOL_DESTROY, 0)), -EINVAL);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_FLUSH, 0)), -EINVAL);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_STATS, 0)), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_name_oversized(struct ct_ctx *ctx)
{
	char long_name[200];
	struct nl_msg *msg;
	struct ctl_nl nl;

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, long_name);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	msg = create_msg(&nl, long_name, -1);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_name_unterminated(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_pool(ctx, "n", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0);
	nla_put(msg, MOECACHE_A_POOL_NAME, (int)strlen(name), name);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_wrong_width(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	uint16_t two = 2;
	uint32_t four = 4096;
	struct nl_msg *msg;
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "w", name);
	ct_nl_open(&nl);
	/* a u32 sent as 16 bits */
	msg = create_msg(&nl, name, MOECACHE_A_N_LAYERS);
	nla_put(msg, MOECACHE_A_N_LAYERS, sizeof(two), &two);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	/* a u64 sent as 32 bits */
	msg = create_msg(&nl, name, MOECACHE_A_EXPERT_BYTES);
	nla_put(msg, MOECACHE_A_EXPERT_BYTES, sizeof(four), &four);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	/* a u32 sent as a string */
	msg = create_msg(&nl, name, MOECACHE_A_N_SLOTS);
	nla_put_string(msg, MOECACHE_A_N_SLOTS, "2");
	CT_RET(send_msg(&nl, msg), -EINVAL);
	CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_reply_attr_in_request(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_pool(ctx, "r", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	nla_put_u64(msg, MOECACHE_A_HOST_BYTES, 1);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	/* an attribute of another command */
	msg = msg_new(&nl, MOECACHE_CMD_FLUSH, 0);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	nla_put_u32(msg, MOECACHE_A_LAYER, 0);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_unknown_attr(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_pool(ctx, "k", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	nla_put_u32(msg, MOECACHE_A_MAX + 1, 0);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_out_of_range(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct nl_msg *msg;
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "o", name);
	ct_nl_open(&nl);
	msg = create_msg(&nl, name, -1);
	nla_put_u32(msg, MOECACHE_A_MODE, 01000);
	CT_RET(send_msg(&nl, msg), -ERANGE);
	msg = create_msg(&nl, name, MOECACHE_A_N_LAYERS);
	nla_put_u32(msg, MOECACHE_A_N_LAYERS, 0);
	CT_RET(send_msg(&nl, msg), -ERANGE);
	msg = create_msg(&nl, name, MOECACHE_A_N_LAYERS);
	nla_put_u32(msg, MOECACHE_A_N_LAYERS, 1u << 30);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_stats_bad_layer(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache_stats st;
	struct ctl_nl nl;

	ct_pool(ctx, "l", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	CT_RET(ctl_nl_stats(&nl, name, small.n_layers, &st), -EINVAL);
	CT_RET(ctl_nl_stats(&nl, "no-such-pool", 0, &st), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_stats_dump_args(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_pool(ctx, "l", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_STATS, NLM_F_DUMP)), -EINVAL);
	msg = msg_new(&nl, MOECACHE_CMD_STATS, NLM_F_DUMP);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	nla_put_u32(msg, MOECACHE_A_LAYER, 0);
	CT_RET(send_msg(&nl, msg), -EINVAL);
	msg = msg_new(&nl, MOECACHE_CMD_STATS, NLM_F_DUMP);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, "no-such-pool");
	CT_RET(send_msg(&nl, msg), -ENOENT);
	ctl_nl_close(&nl);
}

void nl_list_takes_nothing(struct ct_ctx *ctx)
{
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_LIST, NLM_F_DUMP);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, "x");
	CT_RET(send_msg(&nl, msg), -EINVAL);
	/* only a dump */
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_POOL_LIST, 0)), -EOPNOTSUPP);
	ctl_nl_close(&nl);
}

void nl_unknown_command(struct ct_ctx *ctx)
{
	struct ctl_nl nl;

	ct_nl_open(&nl);
	CT_RET(send_msg(&nl, msg_new(&nl, 200, 0)), -EOPNOTSUPP);
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_UNSPEC, 0)), -EOPNOTSUPP);
	/* events are sent by the kernel only */
	CT_RET(send_msg(&nl, msg_new(&nl, MOECACHE_CMD_EVENT, 0)), -EOPNOTSUPP);
	ctl_nl_close(&nl);
}

void nl_header_reserved(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct genlmsghdr *hdr;
	struct nl_msg *msg;
	struct ctl_nl nl;

	ct_pool(ctx, "h", name);
	ct_create(name, &small);
	ct_nl_open(&nl);
	msg = msg_new(&nl, MOECACHE_CMD_POOL_INFO, 0);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	hdr = genlmsg_hdr(nlmsg_hdr(msg));
	hdr->reserved = 1;
	CT_RET(send_msg(&nl, msg), -EINVAL);
	ctl_nl_close(&nl);
}

void nl_info_unknown_pool(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ctl_pool p;
	uint32_t flushed;
	struct ctl_nl nl;

	ct_pool(ctx, "none", name);
	ct_nl_open(&nl);
	CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	CT_RET(ctl_nl_flush(&nl, name, &flushed), -ENOENT);
	CT_RET(ctl_nl_pool_destroy(&nl, name), -ENOENT);
	ctl_nl_close(&nl);
}

/* ---- concurrency ---- */

static int ignore_pool(const struct ctl_pool *p, void *arg)
{
	return 0;
}

static int ignore_layer(uint32_t layer, const struct moecache_stats *st, void *arg)
{
	return 0;
}

void nl_dumps_while_pools_change(struct ct_ctx *ctx)
{
	struct ct_geom g = small;
	char name[MOECACHE_NAME_LEN];
	struct ctl_nl nl;
	int i, ret, status;
	pid_t pid;

	g.n_layers = 300; /* a stats dump takes several rounds: the pool may go in between */
	g.n_experts = 1;
	ct_pool(ctx, "churn", name);
	pid = fork();
	if (pid == 0) {
		for (i = 0; i < 300; i++) {
			struct ctl_nl own;

			ct_create(name, &g);
			if (ctl_nl_open(&own) || ctl_nl_pool_destroy(&own, name))
				_exit(1);
			ctl_nl_close(&own);
		}
		_exit(0);
	}
	CT_ASSERT(pid > 0);
	ct_nl_open(&nl);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		CT_OK(ctl_nl_pool_list(&nl, ignore_pool, NULL));
		ret = ctl_nl_stats_dump(&nl, name, ignore_layer, NULL);
		if (ret && ret != -ENOENT)
			CT_FAIL("stats dump: %s", strerror(-ret));
	}
	CT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ctl_nl_close(&nl);
}
