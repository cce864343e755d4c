// SPDX-License-Identifier: GPL-2.0
/*
 * lifetime_: what survives whom (docs/abi.md, "Lifetime rules"): a dead
 * client leaves no pin and no request of its own, a dead agent leaves no
 * FILLING slot and a resumable residency, mappings keep the pool alive, and
 * the module stays while a file is open.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

static void expect_no_requests(const struct vm_view *agent)
{
	struct moecache_request req;
	int flags = fcntl(agent->fd, F_GETFL);

	VM_EQ(vm_poll(agent, 0) & POLLIN, 0);
	VM_OK(fcntl(agent->fd, F_SETFL, flags | O_NONBLOCK));
	VM_ERR(read(agent->fd, &req, sizeof(req)), EAGAIN);
	VM_OK(fcntl(agent->fd, F_SETFL, flags));
}

static void lifetime_client_kill_drops_pins(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_stats st;
	__u32 experts[4] = {1, 2, 3, 4};
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 0, 0, 1);
	vm_fill(&a, 1, 0, 2);
	w = vm_waiter_new(ctx->pool, 0, experts, 4, 0, 0);
	w->hold = true;
	pid = vm_waiter_start(w);
	vm_gate_wait(&w->done, 10000, "the client's ACQUIRE");
	VM_EQ(w->ret, 0);
	VM_EQ(w->acq.n_pinned, 2);
	VM_EQ(vm_load32(&a.pins[0]), 1);
	VM_EQ(vm_load32(&a.pins[1]), 1);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 2);
	VM_EQ(st.n_clients, 1);
	vm_kill(pid, "the client");
	VM_EQ(vm_load32(&a.pins[0]), 0);
	VM_EQ(vm_load32(&a.pins[1]), 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.pinned_slots, 0);
	VM_EQ(st.queued, 0);
	VM_EQ(st.n_clients, 0);
	expect_no_requests(&a);
	/* The residency itself stays. */
	VM_EQ(vm_load32(&a.map[vm_idx(&a, 0, 1)]), 0);
	VM_EQ(vm_load32(&a.map[vm_idx(&a, 0, 2)]), 1);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_client_kill_while_waiting(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_stats st;
	__u32 experts[2] = {1, 9};
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 0, 0, 1);
	w = vm_waiter_new(ctx->pool, 0, experts, 2, MOECACHE_ACQ_WAIT, 60000);
	pid = vm_waiter_start(w);
	vm_wait_sleeping(pid, 5000, "the waiting client");
	VM_WAIT_FOR(vm_load32(&a.pins[0]) == 1, 5000);
	vm_kill(pid, "the waiting client");
	VM_EQ(vm_load32(&a.pins[0]), 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.queued, 0);
	expect_no_requests(&a);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* A client that makes three ACQUIREs on command, then waits to be killed. */
struct multi_client {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate go;
	struct vm_gate done;
	struct vm_gate never;
};

static void multi_client_main(void *arg)
{
	struct multi_client *mc = arg;
	struct vm_view c;
	__u32 e5 = 5, e34[2] = {3, 4}, slots[2];

	vm_attach(&c, mc->pool, MOECACHE_ROLE_CLIENT);
	vm_gate_wait(&mc->go, 10000, "go");
	vm_acquire(&c, 1, &e5, 1, slots, 0, NULL);
	vm_gate_pass(&mc->done);
	vm_gate_wait(&mc->go, 10000, "go");
	vm_acquire(&c, 1, e34, 2, slots, 0, NULL);
	vm_gate_pass(&mc->done);
	vm_gate_wait(&mc->never, 120000, "the end");
}

static void lifetime_client_kill_keeps_others_requests(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	struct multi_client *mc = vm_shared(sizeof(*mc));
	struct moecache_request reqs[4];
	struct moecache_stats st;
	__u32 e4 = 4, slot;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	snprintf(mc->pool, sizeof(mc->pool), "%s", ctx->pool);
	vm_gate_open(&mc->go);
	vm_gate_open(&mc->done);
	vm_gate_open(&mc->never);
	pid = vm_spawn(multi_client_main, mc);
	/* (1,5): asked by the doomed client only, but already read by the agent. */
	vm_gate_pass(&mc->go);
	vm_gate_wait(&mc->done, 10000, "the first ACQUIRE");
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 1);
	VM_EQ(reqs[0].expert, 5);
	/* (1,3): its own and unread; (1,4): asked by another client too. */
	vm_gate_pass(&mc->go);
	vm_gate_wait(&mc->done, 10000, "the second ACQUIRE");
	vm_acquire(&c, 1, &e4, 1, &slot, 0, NULL);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 2);
	VM_EQ(st.inflight, 1);
	vm_kill(pid, "the client");
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 1);
	VM_EQ(st.inflight, 1);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 1);
	VM_EQ(reqs[0].layer, 1);
	VM_EQ(reqs[0].expert, 4);
	expect_no_requests(&a);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_pins_held_until_last_close(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	__u32 e = 1, slot;
	int dup_fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 3, 0, 1);
	vm_acquire(&c, 0, &e, 1, &slot, 0, NULL);
	VM_EQ(vm_load32(&a.pins[3]), 1);
	dup_fd = dup(c.fd);
	VM_ASSERT(dup_fd >= 0);
	munmap(c.map_base, c.map_len);
	c.map_base = NULL;
	vm_detach(&c); /* closes the first descriptor only */
	VM_EQ(vm_load32(&a.pins[3]), 1);
	close(dup_fd);
	VM_EQ(vm_load32(&a.pins[3]), 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * An agent process caught in the middle of a fill: it made (0,1) resident
 * in slot 0, then read every queued request and took slot 2 to fill it for
 * the first one, and was never heard of again.
 */
struct midfill_agent {
	char pool[MOECACHE_NAME_LEN];
	__u32 n_requests;
	struct moecache_request reqs[4];
	struct vm_gate ready;
	struct vm_gate go;
	struct vm_gate filling;
	struct vm_gate never;
};

static void midfill_agent_main(void *arg)
{
	struct midfill_agent *m = arg;
	struct vm_view a;
	size_t n;

	vm_attach(&a, m->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 0, 0, 1);
	vm_gate_pass(&m->ready);
	vm_gate_wait(&m->go, 10000, "go");
	n = vm_read_requests(&a, m->reqs, ARRAY_SIZE(m->reqs), 5000);
	VM_EQ(n, m->n_requests);
	vm_evict(&a, 2, m->reqs[0].layer, m->reqs[0].expert, NULL);
	vm_gate_pass(&m->filling);
	vm_gate_wait(&m->never, 120000, "the end");
}

struct midfill {
	struct vm_view c;
	struct midfill_agent *agent;
	pid_t pid;
	__u32 target_idx;
	__u32 epoch;
};

/* The agent is filling slot 2 for (1,3); with `also`, it also read (1,6). */
static void midfill_start(struct vm_ctx *ctx, struct midfill *m, bool also)
{
	struct midfill_agent *ag = vm_shared(sizeof(*ag));
	__u32 e3 = 3, e6 = 6, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&m->c, ctx->pool, MOECACHE_ROLE_CLIENT);
	snprintf(ag->pool, sizeof(ag->pool), "%s", ctx->pool);
	ag->n_requests = also ? 2 : 1;
	vm_gate_open(&ag->ready);
	vm_gate_open(&ag->go);
	vm_gate_open(&ag->filling);
	vm_gate_open(&ag->never);
	m->agent = ag;
	m->pid = vm_spawn(midfill_agent_main, ag);
	vm_gate_wait(&ag->ready, 10000, "the agent to attach");
	m->epoch = vm_load32(&m->c.hdr->agent_epoch);
	vm_acquire(&m->c, 1, &e3, 1, &slot, 0, NULL);
	if (also)
		vm_acquire(&m->c, 1, &e6, 1, &slot, 0, NULL);
	vm_gate_pass(&ag->go);
	vm_gate_wait(&ag->filling, 10000, "the agent to start filling");
	m->target_idx = vm_idx(&m->c, 1, 3);
	VM_EQ(vm_load32(&m->c.owner[2]), MOECACHE_OWNER_FILLING | m->target_idx);
}

static void midfill_finish(struct vm_ctx *ctx, struct midfill *m)
{
	vm_detach(&m->c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_agent_kill_reverts_filling(struct vm_ctx *ctx)
{
	struct midfill m;
	struct moecache_stats st;
	__u32 s;

	midfill_start(ctx, &m, false);
	vm_kill(m.pid, "the agent");
	for (s = 0; s < m.c.att.n_slots; s++)
		VM_ASSERT_MSG(!(vm_load32(&m.c.owner[s]) & MOECACHE_OWNER_FILLING) ||
				  vm_load32(&m.c.owner[s]) == MOECACHE_NONE,
			      "owner[%u] = 0x%x is FILLING after the agent died", s,
			      vm_load32(&m.c.owner[s]));
	VM_EQ(vm_load32(&m.c.owner[2]), MOECACHE_NONE);
	VM_EQ(vm_load32(&m.c.map[m.target_idx]), MOECACHE_NONE);
	/* What was resident stays resident. */
	VM_EQ(vm_load32(&m.c.map[vm_idx(&m.c, 0, 1)]), 0);
	VM_EQ(vm_load32(&m.c.owner[0]), vm_idx(&m.c, 0, 1));
	VM_EQ(vm_load32(&m.c.hdr->seq) % 2, 0);
	VM_EQ(m.c.hdr->flags & MOECACHE_POOL_AGENT, 0);
	vm_stats(&m.c, MOECACHE_NONE, &st);
	VM_EQ(st.filling, 0);
	VM_EQ(st.resident, 1);
	VM_EQ(st.agent_pid, 0);
	vm_check_map_consistent(&m.c);
	midfill_finish(ctx, &m);
}

static void lifetime_agent_kill_requeues_read_requests(struct vm_ctx *ctx)
{
	struct midfill m;
	struct moecache_stats st;
	struct vm_view a;
	struct moecache_request reqs[4];
	midfill_start(ctx, &m, true);
	vm_stats(&m.c, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 0);
	vm_kill(m.pid, "the agent");
	vm_stats(&m.c, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 2);
	VM_EQ(st.inflight, 0);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 2);
	VM_ASSERT((reqs[0].expert == 3 && reqs[1].expert == 6) ||
		  (reqs[0].expert == 6 && reqs[1].expert == 3));
	VM_EQ(reqs[0].layer, 1);
	VM_EQ(reqs[1].layer, 1);
	VM_EQ(reqs[0].flags, MOECACHE_REQ_DEMAND);
	vm_detach(&a);
	midfill_finish(ctx, &m);
}

static void lifetime_agent_kill_fails_waiter_epipe(struct vm_ctx *ctx)
{
	struct midfill m;
	struct vm_waiter *w;
	__u32 e3 = 3;
	pid_t pid;

	midfill_start(ctx, &m, false);
	w = vm_waiter_new(ctx->pool, 1, &e3, 1, MOECACHE_ACQ_WAIT, 60000);
	pid = vm_waiter_start(w);
	vm_wait_sleeping(pid, 5000, "the waiter");
	vm_kill(m.pid, "the agent");
	vm_reap_ok(pid, 10000, "the waiter");
	VM_ASSERT_MSG(w->ret == -EPIPE, "WAIT when the agent died: expected EPIPE, got %s",
		      vm_errname(-w->ret));
	midfill_finish(ctx, &m);
}

static void lifetime_agent_kill_keep_waiting_served(struct vm_ctx *ctx)
{
	struct midfill m;
	struct vm_waiter *w;
	struct vm_view a;
	struct moecache_request req;
	__u32 e3 = 3;
	pid_t pid;

	midfill_start(ctx, &m, false);
	w = vm_waiter_new(ctx->pool, 1, &e3, 1, MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING,
			  60000);
	pid = vm_waiter_start(w);
	vm_wait_sleeping(pid, 5000, "the waiter");
	vm_kill(m.pid, "the agent");
	vm_sleep_ms(200);
	VM_ASSERT_MSG(vm_running(pid), "KEEP_WAITING returned when the agent died (%s)",
		      vm_errname(-w->ret));
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(vm_load32(&a.hdr->agent_epoch), m.epoch + 1);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	VM_EQ(req.layer, 1);
	VM_EQ(req.expert, 3);
	vm_fill(&a, 5, 1, 3);
	vm_reap_ok(pid, 10000, "the waiter");
	VM_EQ(w->ret, 0);
	VM_EQ(w->slots[0], 5);
	vm_detach(&a);
	midfill_finish(ctx, &m);
}

/* An agent that sets up a warm pool and then dies. */
struct warm_agent {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	struct vm_gate never;
};

static void warm_agent_main(void *arg)
{
	struct warm_agent *w = arg;
	struct moecache_load load = {.op = MOECACHE_LOAD_BEGIN};
	struct moecache_bank bank;
	struct vm_view a;
	unsigned char *bytes;
	__u32 idx, s;
	int memfd;

	vm_attach(&a, w->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	VM_OK(ioctl(a.fd, MOECACHE_IOC_LOAD, &load));
	for (idx = 0; idx < a.n_idx; idx++)
		memset(vm_host_record(&a, idx), (int)(idx + 1), a.att.expert_bytes);
	load.op = MOECACHE_LOAD_DONE;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_LOAD, &load));
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	for (s = 0; s < 3; s++) {
		__u32 layer = s, expert = 2 * s + 1;

		vm_evict(&a, s + 4, layer, expert, NULL);
		memcpy(bytes + (size_t)(s + 4) * bank.slot_stride,
		       vm_host_record(&a, vm_idx(&a, layer, expert)), a.att.expert_bytes);
		vm_commit1(&a, s + 4, layer, expert, 0);
	}
	vm_gate_pass(&w->ready);
	vm_gate_wait(&w->never, 120000, "the end");
}

static void lifetime_agent_restart_keeps_residency(struct vm_ctx *ctx)
{
	struct warm_agent *w = vm_shared(sizeof(*w));
	struct vm_view c, a;
	struct moecache_bank bank;
	__u32 map_before[64], owner_before[8], s, idx, e = 3, slot;
	__u64 last_before[8], epoch;
	unsigned char *bytes;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_ASSERT(c.n_idx <= ARRAY_SIZE(map_before) && c.att.n_slots <= ARRAY_SIZE(owner_before));
	snprintf(w->pool, sizeof(w->pool), "%s", ctx->pool);
	vm_gate_open(&w->ready);
	vm_gate_open(&w->never);
	pid = vm_spawn(warm_agent_main, w);
	vm_gate_wait(&w->ready, 20000, "the agent to warm the pool");
	memcpy(map_before, c.map, c.n_idx * sizeof(__u32));
	memcpy(owner_before, c.owner, c.att.n_slots * sizeof(__u32));
	memcpy(last_before, c.last_use, c.att.n_slots * sizeof(__u64));
	epoch = vm_load32(&c.hdr->agent_epoch);
	vm_kill(pid, "the agent");

	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(vm_load32(&a.hdr->agent_epoch), epoch + 1);
	for (idx = 0; idx < c.n_idx; idx++)
		VM_EQ(vm_load32(&a.map[idx]), map_before[idx]);
	for (s = 0; s < c.att.n_slots; s++) {
		VM_EQ(vm_load32(&a.owner[s]), owner_before[s]);
		VM_EQ(vm_load64(&a.last_use[s]), last_before[s]);
	}
	VM_EQ(a.hdr->flags & (MOECACHE_POOL_LOADED | MOECACHE_POOL_BANK),
	      MOECACHE_POOL_LOADED | MOECACHE_POOL_BANK);
	vm_view_map_host(&a, PROT_READ);
	for (idx = 0; idx < a.n_idx; idx++)
		VM_EQ(vm_host_record(&a, idx)[a.att.expert_bytes - 1], (idx + 1) & 0xff);
	/* The bank file stays, with what the dead agent copied into it. */
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_GET, &bank));
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ, MAP_SHARED, bank.fd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	idx = vm_idx(&a, 1, 3);
	VM_EQ(bytes[5 * bank.slot_stride], (idx + 1) & 0xff);
	/* Clients hit on what the old agent committed. */
	vm_acquire(&c, 1, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 5);
	vm_release(&c, &slot, 1);
	munmap(bytes, bank.bank_bytes);
	close(bank.fd);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_pool_outlives_files(struct vm_ctx *ctx)
{
	struct vm_view a, c;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	memset(vm_host_record(&a, 9), 0x77, a.att.expert_bytes);
	vm_fill(&a, 6, 0, 9);
	vm_detach(&a);
	/* Nobody is attached now; the pool keeps everything. */
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(vm_load32(&c.map[9]), 6);
	vm_view_map_host(&c, PROT_READ);
	VM_EQ(vm_host_record(&c, 9)[0], 0x77);
	VM_EQ(vm_host_record(&c, 9)[c.att.expert_bytes - 1], 0x77);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_close_before_munmap(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	struct moecache_pool_name pn;
	const struct moecache_map_header *hdr;
	unsigned char *host;
	size_t map_len, host_len;
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	memset(vm_host_record(&a, 2), 0x42, a.att.expert_bytes);
	vm_fill(&a, 1, 0, 2);
	vm_detach(&a);

	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	hdr = c.hdr;
	host = c.host;
	map_len = c.map_len;
	host_len = c.host_len;
	close(c.fd);
	/* The mappings outlive the descriptor and still show the pool. */
	VM_EQ(hdr->magic, MOECACHE_MAP_MAGIC);
	VM_EQ(vm_load32(&c.map[2]), 1);
	VM_EQ(host[2 * c.att.expert_bytes], 0x42);
	/* They keep the file, so the pool is still in use. */
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", ctx->pool);
	fd = vm_open_dev();
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn), EBUSY);
	VM_OK(munmap(c.host, host_len));
	VM_EQ(hdr->n_slots, vm_geom_default.n_slots);
	VM_OK(munmap(c.map_base, map_len));
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
	close(fd);
}

static void lifetime_munmap_before_close(struct vm_ctx *ctx)
{
	struct vm_view c;
	struct moecache_stats st;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	VM_OK(munmap(c.host, c.host_len));
	VM_OK(munmap(c.map_base, c.map_len));
	c.host = NULL;
	c.map_base = NULL;
	/* The file works without its mappings. */
	memset(&st, 0, sizeof(st));
	st.layer = MOECACHE_NONE;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_STATS, &st));
	VM_EQ(st.n_clients, 1);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_destroy_busy_while_attached(struct vm_ctx *ctx)
{
	const __u32 roles[] = {MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_LOADER};
	struct moecache_pool_name pn;
	struct vm_view v;
	int fd = vm_open_dev();
	size_t i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", ctx->pool);
	for (i = 0; i < ARRAY_SIZE(roles); i++) {
		vm_attach(&v, ctx->pool, roles[i]);
		VM_REFUSED(&v, EBUSY, ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
		vm_detach(&v);
	}
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
	vm_expect_no_pool(ctx->pool);
	close(fd);
}

static bool read_refcnt(long *refcnt)
{
	FILE *f = fopen("/sys/module/moecache/refcnt", "re");
	int n;

	if (!f)
		return false;
	n = fscanf(f, "%ld", refcnt);
	fclose(f);
	return n == 1;
}

static void lifetime_rmmod_refused_while_open(struct vm_ctx *ctx)
{
	struct vm_view c;
	long before, during;
	int fd, err;

	if (!read_refcnt(&before))
		vm_skip("/sys/module/moecache/refcnt is missing: not a loadable module");
	fd = vm_open_dev();
	VM_ASSERT(read_refcnt(&during));
	VM_ASSERT_MSG(during == before + 1,
		      "an open file holds no module reference (refcnt %ld -> %ld)", before, during);
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	/* As rmmod does: O_NONBLOCK refuses rather than waits. */
	errno = 0;
	if (syscall(SYS_delete_module, "moecache", O_NONBLOCK) == 0)
		VM_FAIL("the module was unloaded with files open");
	err = errno;
	VM_ASSERT_MSG(err == EWOULDBLOCK || err == EBUSY,
		      "delete_module with files open: expected EWOULDBLOCK, got %s",
		      vm_errname(err));
	VM_ASSERT(access("/sys/module/moecache", F_OK) == 0);
	VM_OK(ioctl(fd, MOECACHE_IOC_NOP));
	vm_detach(&c);
	close(fd);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test lifetime_tests[] = {
    VM_TEST(lifetime_client_kill_drops_pins,
	    "kill -9 of a client drops its pins and withdraws its unread requests"),
    VM_TEST(lifetime_client_kill_while_waiting,
	    "kill -9 of a WAITing client drops the pins it took and its request"),
    VM_TEST(lifetime_client_kill_keeps_others_requests,
	    "a dead client's requests stay if another client asked too or the agent read them"),
    VM_TEST(lifetime_pins_held_until_last_close,
	    "pins stay while a dup of the file is open and go with the last close"),
    VM_TEST(lifetime_agent_kill_reverts_filling,
	    "kill -9 of the agent mid-fill leaves no FILLING slot and no map entry for it"),
    VM_TEST(lifetime_agent_kill_requeues_read_requests,
	    "requests the dead agent had read are queued again for the next agent"),
    VM_TEST(lifetime_agent_kill_fails_waiter_epipe,
	    "a WAITing client gets EPIPE when the agent dies"),
    VM_TEST(lifetime_agent_kill_keep_waiting_served,
	    "a KEEP_WAITING client outlives the agent and is served by the next one"),
    VM_TEST(lifetime_agent_restart_keeps_residency,
	    "a new agent finds map, owners, last_use, host pages and bank as the dead one left"),
    VM_TEST(lifetime_pool_outlives_files,
	    "a pool keeps its residency and host pages with no file attached"),
    VM_TEST(lifetime_close_before_munmap,
	    "mappings stay readable after close and keep the pool busy until munmap"),
    VM_TEST(lifetime_munmap_before_close, "a file works after its mappings are unmapped"),
    VM_TEST(lifetime_destroy_busy_while_attached,
	    "POOL_DESTROY is EBUSY while a client, agent or loader is attached"),
    /* Last: if the module does go away, nothing after it can run. */
    VM_TEST(lifetime_rmmod_refused_while_open,
	    "an open file holds a module reference: unloading is refused"),
};

const struct vm_suite vm_lifetime_suite = {lifetime_tests, ARRAY_SIZE(lifetime_tests)};
