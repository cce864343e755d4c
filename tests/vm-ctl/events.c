// SPDX-License-Identifier: MIT
/*
 * Event delivery as docs/moecachectl.md ("Events") states it: each event
 * is queued on the subscribed socket itself, and a full receive buffer
 * drops events and says so with ENOBUFS, after which delivery goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <moecache_netlink.h>
#include <netlink/socket.h>

#include "tests.h"

#define OVERRUN_POOLS 24

static const struct ct_geom tiny = {
    .n_layers = 1,
    .n_experts = 2,
    .n_slots = 1,
    .expert_bytes = 4096,
};

struct overrun_count {
	const char *prefix;
	unsigned int n;
};

static int count_event(const struct ctl_event *ev, void *arg)
{
	struct overrun_count *c = arg;

	if (!strncmp(ev->pool, c->prefix, strlen(c->prefix)))
		c->n++;
	return 0;
}

/*
 * A listener that does not read loses events, learns it from ENOBUFS,
 * and receives the next ones: pins the delivery path that queues events
 * on the subscribed socket itself rather than on its port id's holder.
 */
void nl_events_overrun_enobufs(struct ct_ctx *ctx)
{
	struct overrun_count got = {.prefix = ctx->prefix, .n = 0};
	struct ct_event_log log = {.prefix = ctx->prefix};
	char name[MOECACHE_NAME_LEN], suffix[16];
	int small = 1, ret, overrun = 0;
	struct ctl_nl ev, nl;
	unsigned int i;

	ct_nl_open(&ev);
	/* The kernel rounds it up to its minimum: a few events fill it. */
	CT_ASSERT(setsockopt(nl_socket_get_fd(ev.sk), SOL_SOCKET, SO_RCVBUF, &small,
			     sizeof(small)) == 0);
	CT_OK(ctl_nl_events_join(&ev));
	ct_nl_open(&nl);
	for (i = 0; i < OVERRUN_POOLS; i++) {
		snprintf(suffix, sizeof(suffix), "o%u", i);
		ct_pool(ctx, suffix, name);
		ct_create(name, &tiny);
		CT_OK(ctl_nl_pool_destroy(&nl, name));
	}
	while ((ret = ctl_nl_event_wait(&ev, 0, count_event, &got)) != -ETIMEDOUT) {
		if (ret == -ENOBUFS || ret == -ENOMEM)
			overrun++;
		else if (ret)
			CT_FAIL("event wait: %s", strerror(-ret));
	}
	CT_ASSERT(overrun > 0);
	CT_ASSERT(got.n < 2 * OVERRUN_POOLS);
	/* Read up: the next event arrives. */
	ct_pool(ctx, "after", name);
	ct_create(name, &tiny);
	ct_wait_events(&ev, &log, 1);
	CT_EQ(log.ev[0].type, MOECACHE_EVENT_POOL_CREATED);
	CT_ASSERT(!strcmp(log.ev[0].pool, name));
	CT_OK(ctl_nl_pool_destroy(&nl, name));
	ctl_nl_close(&nl);
	ctl_nl_close(&ev);
}
