// SPDX-License-Identifier: GPL-2.0
/*
 * basic_: each ioctl, read(), poll() and mmap region doing what docs/abi.md
 * says on good input.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static __u64 geom_host_bytes(const struct vm_geom *g)
{
	return (__u64)g->n_layers * (g->expert_end - g->expert_begin) * g->expert_bytes;
}

static void basic_get_info_limits(struct vm_ctx *ctx)
{
	struct moecache_info info;
	unsigned long long p;
	int fd = vm_open_dev();

	memset(&info, 0xa5, sizeof(info));
	VM_OK(ioctl(fd, MOECACHE_IOC_GET_INFO, &info));
	close(fd);
	VM_EQ(info.abi_version, MOECACHE_ABI_VERSION);
	VM_ASSERT(info.max_pools >= 1 && info.max_layers >= 1 && info.max_experts >= 1);
	VM_ASSERT(info.max_slots >= 1 && info.max_batch >= 1);
	VM_ASSERT(info.max_expert_bytes >= (__u64)ctx->page_size);
	VM_ASSERT(info.host_bytes_used <= info.max_host_bytes);
	VM_ASSERT(info.n_pools <= info.max_pools);
	/* The limits are the module parameters, where sysfs shows them. */
	if (vm_param_read("max_pools", &p))
		VM_EQ(info.max_pools, p);
	if (vm_param_read("max_layers", &p))
		VM_EQ(info.max_layers, p);
	if (vm_param_read("max_experts", &p))
		VM_EQ(info.max_experts, p);
	if (vm_param_read("max_slots", &p))
		VM_EQ(info.max_slots, p);
	if (vm_param_read("max_batch", &p))
		VM_EQ(info.max_batch, p);
	if (vm_param_read("max_host_mb", &p))
		VM_EQ(info.max_host_bytes, p << 20);
	if (vm_param_read("max_expert_mb", &p))
		VM_EQ(info.max_expert_bytes, p << 20);
}

static void basic_get_info_counts_pools(struct vm_ctx *ctx)
{
	struct moecache_info before, during, after;

	vm_get_info(&before);
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_get_info(&during);
	VM_EQ(during.n_pools, before.n_pools + 1);
	VM_EQ(during.host_bytes_used, before.host_bytes_used + geom_host_bytes(&vm_geom_default));
	vm_pool_destroy(ctx->pool);
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	VM_EQ(after.host_bytes_used, before.host_bytes_used);
}

static void basic_nop(struct vm_ctx *ctx)
{
	struct vm_view c;
	int fd = vm_open_dev();

	VM_OK(ioctl(fd, MOECACHE_IOC_NOP));
	close(fd);
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_OK(ioctl(c.fd, MOECACHE_IOC_NOP));
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_attach_geometry(struct vm_ctx *ctx)
{
	const struct vm_geom *g = &vm_geom_default;
	const struct moecache_offsets *off;
	struct vm_view c;

	vm_pool_create(ctx->pool, g);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.att.n_layers, g->n_layers);
	VM_EQ(c.att.n_experts, g->n_experts);
	VM_EQ(c.att.expert_begin, g->expert_begin);
	VM_EQ(c.att.expert_end, g->expert_end);
	VM_EQ(c.att.n_slots, g->n_slots);
	VM_EQ(c.att.expert_bytes, g->expert_bytes);
	VM_EQ(c.att.pool_flags, 0);
	off = &c.att.off;
	VM_EQ(off->host_size, geom_host_bytes(g));
	VM_ASSERT_MSG(off->map_offset + off->map_size <= off->host_offset ||
			  off->host_offset + off->host_size <= off->map_offset,
		      "map region [0x%llx, +0x%llx) overlaps host region [0x%llx, +0x%llx)",
		      (unsigned long long)off->map_offset, (unsigned long long)off->map_size,
		      (unsigned long long)off->host_offset, (unsigned long long)off->host_size);
	VM_EQ(c.hdr->n_layers, g->n_layers);
	VM_EQ(c.hdr->n_experts, g->n_experts);
	VM_EQ(c.hdr->expert_begin, g->expert_begin);
	VM_EQ(c.hdr->expert_end, g->expert_end);
	VM_EQ(c.hdr->n_slots, g->n_slots);
	VM_EQ(c.hdr->expert_bytes, g->expert_bytes);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_map_initial_state(struct vm_ctx *ctx)
{
	struct vm_view c;
	__u32 i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.hdr->seq % 2, 0);
	VM_EQ(c.hdr->flags, 0);
	for (i = 0; i < c.n_idx; i++) {
		VM_EQ(c.map[i], MOECACHE_NONE);
		VM_EQ(c.access[i], 0);
	}
	for (i = 0; i < c.att.n_slots; i++) {
		VM_EQ(c.owner[i], MOECACHE_NONE);
		VM_EQ(c.pins[i], 0);
	}
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_host_zeroed(struct vm_ctx *ctx)
{
	struct vm_view a;
	size_t i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ);
	for (i = 0; i < a.host_len; i++)
		VM_ASSERT_MSG(a.host[i] == 0, "host byte %zu is 0x%02x", i, a.host[i]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_attach_roles(struct vm_ctx *ctx)
{
	struct vm_view c, a, l;
	struct moecache_stats st;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_stats(&l, MOECACHE_NONE, &st);
	VM_EQ(st.n_clients, 1);
	VM_EQ(st.agent_pid, getpid());
	vm_detach(&c);
	vm_stats(&l, MOECACHE_NONE, &st);
	VM_EQ(st.n_clients, 0);
	vm_detach(&a);
	vm_detach(&l);
	vm_pool_destroy(ctx->pool);
}

static void basic_agent_attach_flags(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_stats st;
	__u32 epoch0;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	epoch0 = c.hdr->agent_epoch;
	VM_EQ(c.hdr->flags & MOECACHE_POOL_AGENT, 0);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(a.att.pool_flags & MOECACHE_POOL_AGENT, MOECACHE_POOL_AGENT);
	VM_EQ(c.hdr->flags & MOECACHE_POOL_AGENT, MOECACHE_POOL_AGENT);
	VM_EQ(c.hdr->agent_epoch, epoch0 + 1);
	vm_detach(&a);
	VM_EQ(c.hdr->flags & MOECACHE_POOL_AGENT, 0);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.agent_pid, 0);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(c.hdr->agent_epoch, epoch0 + 2);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static bool has_request(const struct moecache_request *reqs, size_t n, __u32 layer, __u32 expert,
			__u32 flags)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (reqs[i].layer == layer && reqs[i].expert == expert && reqs[i].flags == flags)
			return true;
	return false;
}

static void basic_acquire_miss_queues_request(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire acq;
	struct moecache_request reqs[8];
	struct moecache_stats st;
	__u32 experts[2] = {3, 5}, slots[2] = {0, 0};

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_acquire(&c, 1, experts, 2, slots, 0, &acq);
	VM_EQ(slots[0], MOECACHE_NONE);
	VM_EQ(slots[1], MOECACHE_NONE);
	VM_EQ(acq.n_hits, 0);
	VM_EQ(acq.n_pinned, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.misses, 2);
	VM_EQ(st.queued, 2);
	VM_EQ(st.inflight, 0);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 2);
	VM_ASSERT(has_request(reqs, 2, 1, 3, MOECACHE_REQ_DEMAND));
	VM_ASSERT(has_request(reqs, 2, 1, 5, MOECACHE_REQ_DEMAND));
	VM_EQ(reqs[0].pad, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 0);
	VM_EQ(st.inflight, 2);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_poll_reports_pollin(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_request reqs[4];
	__u32 expert = 2, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_acquire(&c, 0, &expert, 1, &slot, 0, NULL);
	VM_EQ(vm_poll(&a, 1000) & POLLIN, POLLIN);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 0), 1);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_read_fifo_order(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_request reqs[4];
	struct moecache_prefetch pf;
	__u32 e3 = 3, e5 = 5, e1 = 1, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_acquire(&c, 1, &e3, 1, &slot, 0, NULL);
	vm_acquire(&c, 2, &e5, 1, &slot, 0, NULL);
	memset(&pf, 0, sizeof(pf));
	pf.layer = 0;
	pf.count = 1;
	pf.experts = (uintptr_t)&e1;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 3);
	VM_EQ(reqs[0].layer, 1);
	VM_EQ(reqs[0].expert, 3);
	VM_EQ(reqs[0].flags, MOECACHE_REQ_DEMAND);
	VM_EQ(reqs[1].layer, 2);
	VM_EQ(reqs[1].expert, 5);
	VM_EQ(reqs[1].flags, MOECACHE_REQ_DEMAND);
	VM_EQ(reqs[2].layer, 0);
	VM_EQ(reqs[2].expert, 1);
	VM_EQ(reqs[2].flags, MOECACHE_REQ_PREFETCH);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_read_whole_requests(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_request reqs[3];
	__u32 experts[3] = {7, 8, 9}, slots[3];
	ssize_t n;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_OK(fcntl(a.fd, F_SETFL, O_NONBLOCK));
	VM_ERR(read(a.fd, reqs, sizeof(reqs)), EAGAIN);
	vm_acquire(&c, 0, experts, 3, slots, 0, NULL);
	/* Two and a half requests of room: two whole ones come back. */
	n = read(a.fd, reqs, sizeof(reqs[0]) * 2 + sizeof(reqs[0]) / 2);
	VM_EQ(n, sizeof(reqs[0]) * 2);
	n = read(a.fd, reqs, sizeof(reqs));
	VM_EQ(n, sizeof(reqs[0]));
	VM_ERR(read(a.fd, reqs, sizeof(reqs)), EAGAIN);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_evict_commit_publishes(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_evict ev;
	struct moecache_stats st;
	struct moecache_request req;
	__u32 expert = 3, slot, idx, seq0;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_acquire(&c, 1, &expert, 1, &slot, 0, NULL);
	VM_EQ(vm_read_requests(&a, &req, 1, 1000), 1);
	idx = vm_idx(&a, 1, 3);
	seq0 = vm_load32(&a.hdr->seq);
	vm_evict(&a, 2, 1, 3, &ev);
	VM_EQ(ev.old_layer, MOECACHE_NONE);
	VM_EQ(ev.old_expert, MOECACHE_NONE);
	VM_EQ(vm_load32(&a.owner[2]), MOECACHE_OWNER_FILLING | idx);
	/* Not visible before the copy is committed. */
	VM_EQ(vm_load32(&a.map[idx]), MOECACHE_NONE);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.filling, 1);
	VM_EQ(st.resident, 0);
	vm_commit1(&a, 2, 1, 3, 0);
	VM_EQ(vm_load32(&a.map[idx]), 2);
	VM_EQ(vm_load32(&a.owner[2]), idx);
	VM_EQ(vm_load32(&a.hdr->seq) % 2, 0);
	VM_ASSERT_MSG(vm_load32(&a.hdr->seq) != seq0, "seq stayed %u across EVICT and COMMIT",
		      seq0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.filling, 0);
	VM_EQ(st.resident, 1);
	VM_EQ(st.queued, 0);
	VM_EQ(st.inflight, 0);
	vm_check_map_consistent(&a);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_hit_pins_slot(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire acq;
	struct moecache_stats st;
	__u32 expert = 3, slot = 0, idx, access0;
	__u64 last0, clock0;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 2, 1, 3);
	idx = vm_idx(&c, 1, 3);
	last0 = vm_load64(&c.last_use[2]);
	clock0 = vm_load64(&c.hdr->clock);
	access0 = vm_load32(&c.access[idx]);
	vm_acquire(&c, 1, &expert, 1, &slot, 0, &acq);
	VM_EQ(slot, 2);
	VM_EQ(acq.n_hits, 1);
	VM_EQ(acq.n_pinned, 1);
	VM_EQ(vm_load32(&c.pins[2]), 1);
	VM_EQ(vm_load32(&c.access[idx]), access0 + 1);
	VM_ASSERT_MSG(vm_load64(&c.hdr->clock) > clock0, "clock %llu did not advance",
		      (unsigned long long)clock0);
	VM_ASSERT_MSG(vm_load64(&c.last_use[2]) > last0, "last_use[2] %llu did not advance",
		      (unsigned long long)last0);
	VM_ASSERT(vm_load64(&c.last_use[2]) <= vm_load64(&c.hdr->clock));
	VM_EQ(vm_load32(&c.hdr->seq) % 2, 0);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.hits, 1);
	VM_EQ(st.misses, 0);
	VM_EQ(st.pins, 1);
	VM_EQ(st.pinned_slots, 1);
	VM_EQ(st.queued, 0);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_release(&c, &slot, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_release_drops_pin(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_stats st;
	__u32 expert = 6, slot, slot2;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 4, 0, 6);
	vm_acquire(&c, 0, &expert, 1, &slot, 0, NULL);
	vm_acquire(&c, 0, &expert, 1, &slot2, 0, NULL);
	VM_EQ(slot, 4);
	VM_EQ(slot2, 4);
	VM_EQ(vm_load32(&c.pins[4]), 2);
	vm_release(&c, &slot, 1);
	VM_EQ(vm_load32(&c.pins[4]), 1);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 1);
	VM_EQ(st.pinned_slots, 1);
	vm_release(&c, &slot, 1);
	VM_EQ(vm_load32(&c.pins[4]), 0);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.pinned_slots, 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_release_all(struct vm_ctx *ctx)
{
	struct vm_view c, c2, a;
	struct moecache_release rel;
	__u32 experts[3] = {1, 2, 3}, slots[3], other;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&c2, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 2, 1);
	vm_fill(&a, 1, 2, 2);
	vm_fill(&a, 2, 2, 3);
	vm_acquire(&c, 2, experts, 3, slots, 0, NULL);
	vm_acquire(&c, 2, experts, 3, slots, 0, NULL);
	vm_acquire(&c2, 2, &experts[0], 1, &other, 0, NULL);
	VM_EQ(vm_load32(&c.pins[0]), 3);
	memset(&rel, 0, sizeof(rel));
	rel.flags = MOECACHE_REL_ALL;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_RELEASE, &rel));
	/* Only this file's pins go: the other client keeps its own. */
	VM_EQ(vm_load32(&c.pins[0]), 1);
	VM_EQ(vm_load32(&c.pins[1]), 0);
	VM_EQ(vm_load32(&c.pins[2]), 0);
	vm_release(&c2, &other, 1);
	VM_EQ(vm_load32(&c.pins[0]), 0);
	vm_detach(&c2);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_release_one_call(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire_release ar;
	struct moecache_request req;
	__u32 first[2] = {1, 2}, next[2] = {5, 6}, held[2], slots[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 0, 1);
	vm_fill(&a, 1, 0, 2);
	vm_fill(&a, 3, 1, 5);
	vm_acquire(&c, 0, first, 2, held, 0, NULL);
	memset(&ar, 0, sizeof(ar));
	ar.release_count = 2;
	ar.release_slots = (uintptr_t)held;
	ar.acquire.layer = 1;
	ar.acquire.count = 2;
	ar.acquire.experts = (uintptr_t)next;
	ar.acquire.slots = (uintptr_t)slots;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	VM_EQ(vm_load32(&c.pins[0]), 0);
	VM_EQ(vm_load32(&c.pins[1]), 0);
	VM_EQ(slots[0], 3);
	VM_EQ(slots[1], MOECACHE_NONE);
	VM_EQ(ar.acquire.n_hits, 1);
	VM_EQ(ar.acquire.n_pinned, 1);
	VM_EQ(vm_load32(&c.pins[3]), 1);
	VM_EQ(vm_read_requests(&a, &req, 1, 1000), 1);
	VM_EQ(req.layer, 1);
	VM_EQ(req.expert, 6);
	/* With nothing to release it is a plain ACQUIRE. */
	memset(&ar.release_slots, 0,
	       sizeof(ar) - offsetof(struct moecache_acquire_release, release_slots));
	ar.acquire.count = 1;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	VM_EQ(vm_load32(&c.pins[3]), 2);
	vm_release(&c, slots, 1);
	vm_release(&c, slots, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_release_keeps_release_on_wait_failure(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire_release ar;
	__u32 e1 = 1, e9 = 9, held, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 0, 1);
	vm_acquire(&c, 0, &e1, 1, &held, 0, NULL);
	memset(&ar, 0, sizeof(ar));
	ar.release_count = 1;
	ar.release_slots = (uintptr_t)&held;
	ar.acquire.layer = 2;
	ar.acquire.count = 1;
	ar.acquire.experts = (uintptr_t)&e9;
	ar.acquire.slots = (uintptr_t)&slot;
	ar.acquire.flags = MOECACHE_ACQ_WAIT;
	ar.acquire.timeout_ms = 200;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar), ETIMEDOUT);
	VM_EQ(vm_load32(&c.pins[0]), 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_mixed_hit_miss(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire acq;
	struct moecache_request reqs[4];
	__u32 experts[2] = {9, 10}, slots[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 5, 3, 9);
	vm_acquire(&c, 3, experts, 2, slots, 0, &acq);
	VM_EQ(slots[0], 5);
	VM_EQ(slots[1], MOECACHE_NONE);
	VM_EQ(acq.n_hits, 1);
	VM_EQ(acq.n_pinned, 1);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 1);
	VM_EQ(reqs[0].layer, 3);
	VM_EQ(reqs[0].expert, 10);
	vm_release(&c, slots, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_no_queue(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_acquire acq;
	struct moecache_stats st;
	__u32 experts[2] = {9, 10}, slots[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 5, 3, 9);
	vm_acquire(&c, 3, experts, 2, slots, MOECACHE_ACQ_NO_QUEUE, &acq);
	VM_EQ(slots[0], 5);
	VM_EQ(slots[1], MOECACHE_NONE);
	VM_EQ(acq.n_pinned, 1);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 0);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_release(&c, slots, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_acquire_wait_served(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_request req;
	__u32 expert = 11;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	w = vm_waiter_new(ctx->pool, 2, &expert, 1, MOECACHE_ACQ_WAIT, 20000);
	w->hold = true;
	pid = vm_waiter_start(w);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	VM_EQ(req.layer, 2);
	VM_EQ(req.expert, 11);
	VM_EQ(req.flags, MOECACHE_REQ_DEMAND);
	VM_ASSERT_MSG(vm_running(pid), "the waiter returned before its expert was committed");
	vm_fill(&a, 6, 2, 11);
	vm_gate_wait(&w->done, 10000, "the waiter's ACQUIRE to return");
	VM_EQ(w->ret, 0);
	VM_EQ(w->slots[0], 6);
	VM_EQ(w->acq.n_pinned, 1);
	VM_EQ(w->acq.n_hits, 0);
	VM_EQ(vm_load32(&a.pins[6]), 1);
	vm_gate_pass(&w->release);
	vm_reap_ok(pid, 10000, "the waiter");
	VM_EQ(vm_load32(&a.pins[6]), 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_wait_pins_as_experts_arrive(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_request reqs[4];
	__u32 experts[2] = {4, 12};
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	w = vm_waiter_new(ctx->pool, 0, experts, 2, MOECACHE_ACQ_WAIT, 20000);
	w->hold = true;
	pid = vm_waiter_start(w);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 5000), 2);
	vm_fill(&a, 1, 0, 4);
	/* The first expert is pinned while the waiter still waits for the second. */
	VM_WAIT_FOR(vm_load32(&a.pins[1]) == 1, 5000);
	VM_ASSERT_MSG(vm_running(pid), "the waiter returned with one expert missing");
	VM_EQ(w->ret, 1);
	vm_fill(&a, 3, 0, 12);
	vm_gate_wait(&w->done, 10000, "the waiter's ACQUIRE to return");
	VM_EQ(w->ret, 0);
	VM_EQ(w->slots[0], 1);
	VM_EQ(w->slots[1], 3);
	VM_EQ(w->acq.n_pinned, 2);
	VM_EQ(vm_load32(&a.pins[1]), 1);
	VM_EQ(vm_load32(&a.pins[3]), 1);
	vm_gate_pass(&w->release);
	vm_reap_ok(pid, 10000, "the waiter");
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_wait_timeout(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_stats st;
	__u32 experts[2] = {1, 2}, slots[2];
	uint64_t t0, elapsed;
	int ret;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 1, 1);
	t0 = vm_now_ms();
	ret = vm_try_acquire(&c, 1, experts, 2, slots, MOECACHE_ACQ_WAIT, 300, NULL);
	elapsed = vm_now_ms() - t0;
	VM_ASSERT_MSG(ret == -ETIMEDOUT, "WAIT with nobody filling: expected ETIMEDOUT, got %s",
		      vm_errname(-ret));
	VM_ASSERT_MSG(elapsed >= 290, "ETIMEDOUT after %llu ms of a 300 ms timeout",
		      (unsigned long long)elapsed);
	/* The hit's pin is dropped; the miss stays queued for the agent. */
	VM_EQ(vm_load32(&c.pins[0]), 0);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.queued, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_wait_without_agent_epipe(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_request req;
	struct moecache_stats st;
	__u32 expert = 13, slot;
	int ret;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	ret = vm_try_acquire(&c, 0, &expert, 1, &slot, MOECACHE_ACQ_WAIT, 5000, NULL);
	VM_ASSERT_MSG(ret == -EPIPE, "WAIT without an agent: expected EPIPE, got %s",
		      vm_errname(-ret));
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 1);
	/* The request waits for the next agent. */
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(vm_read_requests(&a, &req, 1, 1000), 1);
	VM_EQ(req.layer, 0);
	VM_EQ(req.expert, 13);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_keep_waiting_without_agent(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_request req;
	__u32 expert = 14;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	w = vm_waiter_new(ctx->pool, 3, &expert, 1, MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING,
			  20000);
	pid = vm_waiter_start(w);
	vm_wait_sleeping(pid, 5000, "the waiter");
	vm_sleep_ms(100);
	VM_ASSERT_MSG(vm_running(pid), "KEEP_WAITING without an agent returned (%s)",
		      vm_errname(-w->ret));
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	vm_fill(&a, 7, 3, 14);
	vm_reap_ok(pid, 10000, "the waiter");
	VM_EQ(w->ret, 0);
	VM_EQ(w->slots[0], 7);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void on_sigusr1(int sig)
{
}

struct eintr_job {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	int ret;
	__u32 pins_of_hit;
};

static void eintr_client(void *arg)
{
	struct eintr_job *job = arg;
	struct sigaction sa;
	struct vm_view c;
	__u32 experts[2] = {1, 2}, slots[2];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1; /* no SA_RESTART: the ioctl must return */
	sigaction(SIGUSR1, &sa, NULL);
	vm_attach(&c, job->pool, MOECACHE_ROLE_CLIENT);
	vm_gate_pass(&job->ready);
	job->ret = vm_try_acquire(&c, 1, experts, 2, slots, MOECACHE_ACQ_WAIT, 20000, NULL);
	job->pins_of_hit = vm_load32(&c.pins[0]);
	vm_detach(&c);
}

static void basic_wait_interrupted_eintr(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct eintr_job *job = vm_shared(sizeof(*job));
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 0, 1, 1);
	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_gate_open(&job->ready);
	job->ret = 1;
	pid = vm_spawn(eintr_client, job);
	vm_gate_wait(&job->ready, 10000, "the client to attach");
	vm_wait_sleeping(pid, 5000, "the waiting client");
	VM_WAIT_FOR(vm_load32(&a.pins[0]) == 1, 5000);
	VM_OK(kill(pid, SIGUSR1));
	vm_reap_ok(pid, 10000, "the interrupted client");
	VM_ASSERT_MSG(job->ret == -EINTR, "WAIT hit by a signal: expected EINTR, got %s",
		      vm_errname(-job->ret));
	VM_EQ(job->pins_of_hit, 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_abort_fails_waiter_eio(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_request req;
	struct moecache_fill fill = {.slot = 2, .layer = 1, .expert = 8};
	struct moecache_fill_batch batch = {.count = 1, .fills = (uintptr_t)&fill};
	struct moecache_stats st;
	__u32 expert = 8;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	w = vm_waiter_new(ctx->pool, 1, &expert, 1, MOECACHE_ACQ_WAIT, 20000);
	pid = vm_waiter_start(w);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	vm_evict(&a, 2, 1, 8, NULL);
	VM_OK(ioctl(a.fd, MOECACHE_IOC_ABORT, &batch));
	vm_reap_ok(pid, 10000, "the waiter");
	VM_ASSERT_MSG(w->ret == -EIO, "WAIT on an aborted fill: expected EIO, got %s",
		      vm_errname(-w->ret));
	VM_EQ(vm_load32(&a.owner[2]), MOECACHE_NONE);
	VM_EQ(vm_load32(&a.map[vm_idx(&a, 1, 8)]), MOECACHE_NONE);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.aborts, 1);
	VM_EQ(st.filling, 0);
	VM_EQ(st.queued, 0);
	VM_EQ(st.inflight, 0);
	VM_EQ(st.pins, 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_prefetch_queues_request(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_prefetch pf;
	struct moecache_request reqs[4];
	struct moecache_stats st;
	__u32 experts[2] = {7, 8}, resident = 1;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 2, 1);
	memset(&pf, 0, sizeof(pf));
	pf.layer = 2;
	pf.count = 2;
	pf.experts = (uintptr_t)experts;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_EQ(pf.n_queued, 2);
	/* Already requested, or resident: nothing more is queued. */
	pf.n_queued = 99;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_EQ(pf.n_queued, 0);
	pf.count = 1;
	pf.experts = (uintptr_t)&resident;
	pf.n_queued = 99;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_EQ(pf.n_queued, 0);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 2);
	VM_ASSERT(has_request(reqs, 2, 2, 7, MOECACHE_REQ_PREFETCH));
	VM_ASSERT(has_request(reqs, 2, 2, 8, MOECACHE_REQ_PREFETCH));
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.prefetches, 2);
	VM_EQ(st.misses, 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_requests_deduplicated(struct vm_ctx *ctx)
{
	struct vm_view c1, c2, a;
	struct moecache_request reqs[8];
	struct moecache_stats st;
	__u32 e4 = 4, both[2] = {4, 6}, slots[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c1, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&c2, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_acquire(&c1, 1, &e4, 1, slots, 0, NULL);
	vm_acquire(&c2, 1, both, 2, slots, 0, NULL);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 2);
	VM_EQ(st.misses, 3);
	VM_EQ(vm_read_requests(&a, reqs, ARRAY_SIZE(reqs), 1000), 2);
	VM_ASSERT(has_request(reqs, 2, 1, 4, MOECACHE_REQ_DEMAND));
	VM_ASSERT(has_request(reqs, 2, 1, 6, MOECACHE_REQ_DEMAND));
	/* Read by the agent: not queued again. */
	vm_acquire(&c1, 1, &e4, 1, slots, 0, NULL);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	/* Being filled: not queued again. */
	vm_evict(&a, 3, 1, 4, NULL);
	vm_acquire(&c2, 1, &e4, 1, slots, 0, NULL);
	VM_EQ(slots[0], MOECACHE_NONE);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.queued, 0);
	vm_commit1(&a, 3, 1, 4, 0);
	vm_detach(&c2);
	vm_detach(&c1);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_evict_returns_victim(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct moecache_evict ev;
	struct moecache_stats st0, st;
	__u32 old_idx, new_idx;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 2, 1, 3);
	old_idx = vm_idx(&a, 1, 3);
	new_idx = vm_idx(&a, 2, 5);
	vm_stats(&a, MOECACHE_NONE, &st0);
	vm_evict(&a, 2, 2, 5, &ev);
	VM_EQ(ev.old_layer, 1);
	VM_EQ(ev.old_expert, 3);
	VM_EQ(vm_load32(&a.map[old_idx]), MOECACHE_NONE);
	VM_EQ(vm_load32(&a.owner[2]), MOECACHE_OWNER_FILLING | new_idx);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.evictions, st0.evictions + 1);
	VM_EQ(st.resident, 0);
	vm_commit1(&a, 2, 2, 5, 0);
	VM_EQ(vm_load32(&a.map[new_idx]), 2);
	vm_check_map_consistent(&a);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_evict_only_frees(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct moecache_evict ev;
	struct moecache_stats st;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 5, 0, 15);
	vm_evict(&a, 5, MOECACHE_NONE, MOECACHE_NONE, &ev);
	VM_EQ(ev.old_layer, 0);
	VM_EQ(ev.old_expert, 15);
	VM_EQ(vm_load32(&a.owner[5]), MOECACHE_NONE);
	VM_EQ(vm_load32(&a.map[vm_idx(&a, 0, 15)]), MOECACHE_NONE);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.resident, 0);
	VM_EQ(st.filling, 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_commit_batch(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct moecache_fill fills[3] = {
	    {.slot = 0, .layer = 0, .expert = 0},
	    {.slot = 4, .layer = 1, .expert = 7},
	    {.slot = 7, .layer = 3, .expert = 15},
	};
	struct moecache_fill_batch batch = {.count = 3, .fills = (uintptr_t)fills};
	struct moecache_stats st;
	size_t i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	for (i = 0; i < ARRAY_SIZE(fills); i++)
		vm_evict(&a, fills[i].slot, fills[i].layer, fills[i].expert, NULL);
	VM_OK(ioctl(a.fd, MOECACHE_IOC_COMMIT, &batch));
	for (i = 0; i < ARRAY_SIZE(fills); i++)
		VM_EQ(vm_load32(&a.map[vm_idx(&a, fills[i].layer, fills[i].expert)]),
		      fills[i].slot);
	vm_check_map_consistent(&a);
	VM_EQ(vm_load32(&a.hdr->seq) % 2, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.resident, 3);
	VM_EQ(st.bytes_copied, 3 * a.att.expert_bytes);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_stats_counters(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_stats all, l0, l1, l2;
	__u32 l0_experts[3] = {0, 1, 2}, e0 = 0, e5 = 5, slots[3], s1;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 0, 0);
	vm_fill(&a, 1, 0, 1);
	vm_fill(&a, 2, 1, 0);
	vm_acquire(&c, 0, l0_experts, 3, slots, 0, NULL); /* 2 hits, 1 miss */
	vm_acquire(&c, 1, &e0, 1, &s1, 0, NULL);	  /* 1 hit */
	vm_acquire(&c, 1, &e5, 1, &s1, 0, NULL);	  /* 1 miss */
	vm_stats(&c, MOECACHE_NONE, &all);
	vm_stats(&c, 0, &l0);
	vm_stats(&c, 1, &l1);
	vm_stats(&c, 2, &l2);
	VM_EQ(all.hits, 3);
	VM_EQ(all.misses, 2);
	VM_EQ(l0.hits, 2);
	VM_EQ(l0.misses, 1);
	VM_EQ(l1.hits, 1);
	VM_EQ(l1.misses, 1);
	VM_EQ(l2.hits, 0);
	VM_EQ(l2.misses, 0);
	VM_EQ(all.commits, 3);
	VM_EQ(all.bytes_copied, 3 * c.att.expert_bytes);
	VM_EQ(all.resident, 3);
	VM_EQ(all.pins, 3);
	VM_EQ(all.pinned_slots, 3);
	VM_EQ(all.queued, 2);
	VM_EQ(all.n_clients, 1);
	VM_EQ(all.agent_pid, getpid());
	/* Pool-wide state is reported whatever layer is asked for. */
	VM_EQ(l2.resident, 3);
	VM_EQ(l2.pins, 3);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_stats_wait_histogram(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct vm_waiter *w;
	struct moecache_request req;
	struct moecache_stats st;
	__u64 sum = 0;
	__u32 expert = 3;
	pid_t pid;
	int i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	w = vm_waiter_new(ctx->pool, 0, &expert, 1, MOECACHE_ACQ_WAIT, 20000);
	pid = vm_waiter_start(w);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	vm_wait_sleeping(pid, 5000, "the waiter");
	vm_fill(&a, 0, 0, 3);
	vm_reap_ok(pid, 10000, "the waiter");
	VM_EQ(w->ret, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.waits, 1);
	VM_ASSERT(st.wait_ns > 0);
	for (i = 0; i < MOECACHE_WAIT_BUCKETS; i++)
		sum += st.wait_hist[i];
	VM_EQ(sum, st.waits);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_prefetch_hit_counted(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	struct moecache_stats st;
	__u32 pre = 2, demand = 3, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_evict(&a, 1, 0, 2, NULL);
	vm_commit1(&a, 1, 0, 2, MOECACHE_FILL_PREFETCH);
	vm_fill(&a, 2, 0, 3);
	vm_acquire(&c, 0, &demand, 1, &slot, 0, NULL);
	vm_release(&c, &slot, 1);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.prefetch_hits, 0);
	vm_acquire(&c, 0, &pre, 1, &slot, 0, NULL);
	vm_release(&c, &slot, 1);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.prefetch_hits, 1);
	/* Only the first acquire after the prefetch counts. */
	vm_acquire(&c, 0, &pre, 1, &slot, 0, NULL);
	vm_release(&c, &slot, 1);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.prefetch_hits, 1);
	VM_EQ(st.hits, 3);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_bank_set_get(struct vm_ctx *ctx)
{
	static const char msg1[] = "written through the agent's memfd";
	static const char msg2[] = "refused through the client's fd";
	struct vm_view c, a;
	void *wr;
	struct moecache_bank set, got;
	struct stat st_set, st_got;
	char buf[64];
	unsigned char *bank, *view;
	int memfd, flags;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &set);
	VM_EQ(c.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	memset(&got, 0, sizeof(got));
	got.fd = -1;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_ASSERT(got.fd >= 0 && got.fd != memfd);
	flags = fcntl(got.fd, F_GETFD);
	VM_ASSERT_MSG(flags >= 0 && (flags & FD_CLOEXEC), "BANK_GET fd is not O_CLOEXEC");
	VM_EQ(got.backend, MOECACHE_BACKEND_CPU);
	VM_EQ(got.bank_bytes, set.bank_bytes);
	VM_EQ(got.slot_stride, set.slot_stride);
	VM_EQ(got.device, set.device);
	/* Not the memfd itself: a read-only view of it (docs/abi.md, BANK_GET). */
	VM_OK(fstat(memfd, &st_set));
	VM_OK(fstat(got.fd, &st_got));
	VM_ASSERT(st_got.st_ino != st_set.st_ino || st_got.st_dev != st_set.st_dev);
	VM_EQ(fcntl(got.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	bank = mmap(NULL, set.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(bank != MAP_FAILED);
	memcpy(bank + set.slot_stride * 3, msg1, sizeof(msg1));
	view = mmap(NULL, set.bank_bytes, PROT_READ, MAP_SHARED, got.fd, 0);
	VM_ASSERT(view != MAP_FAILED);
	memcpy(buf, view + set.slot_stride * 3, sizeof(msg1));
	VM_ASSERT(memcmp(buf, msg1, sizeof(msg1)) == 0);
	munmap(view, set.bank_bytes);
	/* A client's bank fd is read-only: it can neither write nor map writable. */
	/* Not open for writing (EBADF), nor a file with a position to write at. */
	VM_ASSERT_MSG(pwrite(got.fd, msg2, sizeof(msg2), (off_t)set.slot_stride * 5) < 0 &&
			  (errno == EBADF || errno == ESPIPE),
		      "pwrite() on the client's bank fd: %s", vm_errname(errno));
	wr = mmap(NULL, set.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, got.fd, 0);
	VM_ASSERT_MSG(wr == MAP_FAILED && errno == EACCES, "client mapped the bank writable");
	VM_ASSERT(memcmp(bank + set.slot_stride * 5, msg2, sizeof(msg2)) != 0);
	munmap(bank, set.bank_bytes);
	close(got.fd);
	close(memfd);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_bank_get_agent_and_loader(struct vm_ctx *ctx)
{
	struct vm_view a, l;
	struct moecache_bank set, got;
	int memfd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	memfd = vm_bank_set_memfd(&a, 2 * a.att.expert_bytes, &set);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_EQ(got.slot_stride, set.slot_stride);
	close(got.fd);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(l.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_EQ(got.slot_stride, set.slot_stride);
	VM_EQ(got.bank_bytes, set.bank_bytes);
	close(got.fd);
	close(memfd);
	vm_detach(&l);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_bank_replace_clears_residency(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct moecache_bank first, second, got;
	struct moecache_stats st;
	__u32 i;
	int fd1, fd2;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	fd1 = vm_bank_set_memfd(&a, a.att.expert_bytes, &first);
	vm_fill(&a, 0, 0, 1);
	vm_fill(&a, 3, 2, 9);
	fd2 = vm_bank_set_memfd(&a, 2 * a.att.expert_bytes, &second);
	for (i = 0; i < a.att.n_slots; i++)
		VM_EQ(vm_load32(&a.owner[i]), MOECACHE_NONE);
	for (i = 0; i < a.n_idx; i++)
		VM_EQ(vm_load32(&a.map[i]), MOECACHE_NONE);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.resident, 0);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_EQ(got.slot_stride, second.slot_stride);
	close(got.fd);
	close(fd1);
	close(fd2);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_load_flips_loaded(struct vm_ctx *ctx)
{
	struct vm_view c, l, a;
	struct moecache_load load;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	VM_EQ(l.hdr->flags & MOECACHE_POOL_LOADED, 0);
	memset(&load, 0, sizeof(load));
	load.op = MOECACHE_LOAD_BEGIN;
	VM_OK(ioctl(l.fd, MOECACHE_IOC_LOAD, &load));
	VM_EQ(l.hdr->flags & MOECACHE_POOL_LOADED, 0);
	load.op = MOECACHE_LOAD_DONE;
	VM_OK(ioctl(l.fd, MOECACHE_IOC_LOAD, &load));
	VM_EQ(l.hdr->flags & MOECACHE_POOL_LOADED, MOECACHE_POOL_LOADED);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.att.pool_flags & MOECACHE_POOL_LOADED, MOECACHE_POOL_LOADED);
	/* The agent may bracket loads too. */
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	load.op = MOECACHE_LOAD_BEGIN;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_LOAD, &load));
	VM_EQ(c.hdr->flags & MOECACHE_POOL_LOADED, 0);
	load.op = MOECACHE_LOAD_DONE;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_LOAD, &load));
	VM_EQ(c.hdr->flags & MOECACHE_POOL_LOADED, MOECACHE_POOL_LOADED);
	vm_detach(&a);
	vm_detach(&c);
	vm_detach(&l);
	vm_pool_destroy(ctx->pool);
}

static void fill_pattern(unsigned char *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

static void basic_host_region_shared(struct vm_ctx *ctx)
{
	struct vm_view c, a, l;
	unsigned char *want;
	size_t len = vm_geom_default.expert_bytes;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_view_map_host(&l, PROT_READ | PROT_WRITE);
	vm_view_map_host(&c, PROT_READ);
	want = malloc(len);
	VM_ASSERT(want);
	fill_pattern(want, len, 5);
	memcpy(vm_host_record(&a, 5), want, len);
	VM_ASSERT_MSG(memcmp(vm_host_record(&c, 5), want, len) == 0,
		      "the client does not read what the agent wrote to record 5");
	fill_pattern(want, len, 37);
	memcpy(vm_host_record(&l, 37), want, len);
	VM_ASSERT_MSG(memcmp(vm_host_record(&c, 37), want, len) == 0,
		      "the client does not read what the loader wrote to record 37");
	VM_ASSERT_MSG(memcmp(vm_host_record(&a, 37), want, len) == 0,
		      "the agent does not read what the loader wrote to record 37");
	free(want);
	vm_detach(&c);
	vm_detach(&l);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_mmap_inside_region(struct vm_ctx *ctx)
{
	struct vm_view a;
	size_t page = (size_t)ctx->page_size;
	unsigned char *part;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	fill_pattern(a.host, a.host_len, 3);
	/* A page-aligned offset inside the region maps that part of it. */
	part = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, a.fd,
		    (off_t)(a.att.off.host_offset + 17 * page));
	VM_ASSERT_MSG(part != MAP_FAILED, "mmap at host_offset + 17 pages: %s", vm_errname(errno));
	VM_ASSERT(memcmp(part, a.host + 17 * page, 2 * page) == 0);
	munmap(part, 2 * page);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_access_counts(struct vm_ctx *ctx)
{
	struct vm_view c, a;
	__u32 e = 6, slot, idx;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	idx = vm_idx(&c, 2, 6);
	vm_acquire(&c, 2, &e, 1, &slot, 0, NULL); /* a miss counts */
	VM_EQ(vm_load32(&c.access[idx]), 1);
	vm_fill(&a, 0, 2, 6);
	vm_acquire(&c, 2, &e, 1, &slot, 0, NULL); /* and a hit */
	VM_EQ(vm_load32(&c.access[idx]), 2);
	VM_EQ(vm_load32(&c.access[vm_idx(&c, 2, 7)]), 0);
	vm_release(&c, &slot, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_local_range(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	struct vm_view c, a;
	struct moecache_request req;
	__u32 e = 4, slot;

	g.expert_begin = 4;
	g.expert_end = 12;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.att.expert_begin, 4);
	VM_EQ(c.att.expert_end, 12);
	VM_EQ(c.att.off.host_size, geom_host_bytes(&g));
	vm_acquire(&c, 1, &e, 1, &slot, 0, NULL);
	VM_EQ(vm_read_requests(&a, &req, 1, 1000), 1);
	VM_EQ(req.layer, 1);
	VM_EQ(req.expert, 4); /* global id */
	vm_fill(&a, 2, 1, 4);
	VM_EQ(vm_load32(&c.map[1 * 8 + 0]), 2);
	VM_EQ(vm_load32(&c.owner[2]), 8);
	e = 11;
	vm_fill(&a, 3, 3, 11);
	VM_EQ(vm_load32(&c.map[3 * 8 + 7]), 3);
	vm_acquire(&c, 3, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 3);
	vm_release(&c, &slot, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_destroy_frees_name(struct vm_ctx *ctx)
{
	struct moecache_info before, after;

	vm_get_info(&before);
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_pool_destroy(ctx->pool);
	vm_expect_no_pool(ctx->pool);
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	VM_EQ(after.host_bytes_used, before.host_bytes_used);
	/* The name can be used again, with another geometry. */
	vm_pool_create(ctx->pool, &(struct vm_geom){.n_layers = 1,
						    .n_experts = 2,
						    .expert_end = 2,
						    .n_slots = 1,
						    .expert_bytes = (__u64)ctx->page_size,
						    .mode = 0600});
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test basic_tests[] = {
    VM_TEST(basic_get_info_limits, "GET_INFO reports the ABI version and the module's limits"),
    VM_TEST(basic_get_info_counts_pools,
	    "GET_INFO counts a created pool and its host bytes, and forgets them on destroy"),
    VM_TEST(basic_nop, "NOP returns 0 on an unbound and on an attached file"),
    VM_TEST(basic_attach_geometry,
	    "ATTACH returns the pool's geometry and non-overlapping regions"),
    VM_TEST(basic_map_initial_state, "a new pool's map has no entries, owners, pins or accesses"),
    VM_TEST(basic_host_zeroed, "a new pool's host pages are zeroed"),
    VM_TEST(basic_attach_roles, "a client, an agent and a loader attach to one pool together"),
    VM_TEST(basic_agent_attach_flags,
	    "an agent attach sets POOL_AGENT and bumps agent_epoch; its close clears the flag"),
    VM_TEST(basic_acquire_miss_queues_request,
	    "ACQUIRE of absent experts returns NONE and queues DEMAND requests read() returns"),
    VM_TEST(basic_poll_reports_pollin, "poll() reports POLLIN exactly while a request is queued"),
    VM_TEST(basic_read_fifo_order, "read() returns requests in the order they were queued"),
    VM_TEST(basic_read_whole_requests,
	    "read() returns only whole requests and EAGAIN when none is queued (O_NONBLOCK)"),
    VM_TEST(basic_evict_commit_publishes,
	    "EVICT makes the slot FILLING, unmapped; COMMIT publishes map and owner under seq"),
    VM_TEST(basic_acquire_hit_pins_slot,
	    "ACQUIRE of a resident expert pins its slot, stamps last_use and advances the clock"),
    VM_TEST(basic_release_drops_pin, "RELEASE drops one pin per listed slot"),
    VM_TEST(basic_release_all, "RELEASE with REL_ALL drops every pin of the file, no other file's"),
    VM_TEST(basic_acquire_release_one_call,
	    "ACQUIRE_RELEASE drops the listed pins and acquires the next experts in one call"),
    VM_TEST(basic_acquire_release_keeps_release_on_wait_failure,
	    "the release of an ACQUIRE_RELEASE stays done when its WAIT times out"),
    VM_TEST(basic_acquire_mixed_hit_miss,
	    "ACQUIRE pins the hits and queues only the misses of one list"),
    VM_TEST(basic_acquire_no_queue, "ACQUIRE with NO_QUEUE pins hits and queues nothing"),
    VM_TEST(basic_acquire_wait_served,
	    "a WAITing ACQUIRE returns the committed slot, pinned, once the agent fills it"),
    VM_TEST(basic_wait_pins_as_experts_arrive,
	    "a WAITing ACQUIRE pins each expert as it is committed and returns when all are"),
    VM_TEST(basic_wait_timeout,
	    "a WAIT nobody serves fails with ETIMEDOUT, drops its pins, leaves its request queued"),
    VM_TEST(basic_wait_without_agent_epipe,
	    "a WAIT without an agent fails with EPIPE and its request waits for the next agent"),
    VM_TEST(basic_keep_waiting_without_agent,
	    "a WAIT with KEEP_WAITING and no agent sleeps until an agent serves it"),
    VM_TEST(basic_wait_interrupted_eintr, "a signal ends a WAIT with EINTR and drops its pins"),
    VM_TEST(basic_abort_fails_waiter_eio,
	    "ABORT frees the slot, drops the request and fails the waiter with EIO"),
    VM_TEST(basic_prefetch_queues_request,
	    "PREFETCH queues PREFETCH requests only for experts neither resident nor requested"),
    VM_TEST(basic_requests_deduplicated,
	    "misses of one expert by two clients, in flight or filling, make one request"),
    VM_TEST(basic_evict_returns_victim,
	    "EVICT of a resident slot unmaps the victim, returns it and counts an eviction"),
    VM_TEST(basic_evict_only_frees, "EVICT with layer NONE only frees the slot"),
    VM_TEST(basic_commit_batch, "one COMMIT publishes several fills and counts their bytes"),
    VM_TEST(basic_stats_counters,
	    "STATS counts hits and misses per layer and for the pool, with the pool's state"),
    VM_TEST(basic_stats_wait_histogram,
	    "a served WAIT is counted in waits, wait_ns and one histogram bucket"),
    VM_TEST(basic_prefetch_hit_counted,
	    "the first acquire of a prefetch-committed slot counts one prefetch hit"),
    VM_TEST(basic_bank_set_get,
	    "BANK_SET takes a memfd; a client's BANK_GET fd is a read-only view of it (O_CLOEXEC)"),
    VM_TEST(basic_bank_get_agent_and_loader, "the agent and a loader may BANK_GET too"),
    VM_TEST(basic_bank_replace_clears_residency,
	    "replacing the bank frees every slot and BANK_GET returns the new one"),
    VM_TEST(basic_load_flips_loaded, "LOAD BEGIN clears and LOAD DONE sets POOL_LOADED"),
    VM_TEST(basic_host_region_shared,
	    "host records written by the agent or a loader are read by a client"),
    VM_TEST(basic_mmap_inside_region, "an mmap at a page offset inside a region maps that part"),
    VM_TEST(basic_access_counts, "access[] counts every acquire that asks for an expert"),
    VM_TEST(basic_local_range,
	    "a pool of a local expert range uses global ids outside and local indexes inside"),
    VM_TEST(basic_destroy_frees_name, "DESTROY frees the pool's bytes and its name"),
};

const struct vm_suite vm_basic_suite = {basic_tests, ARRAY_SIZE(basic_tests)};
