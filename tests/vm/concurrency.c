// SPDX-License-Identifier: GPL-2.0
/*
 * concurrency_: client processes and an agent process racing on one pool
 * with fewer slots than experts. Every wait is bounded, so a lost wakeup
 * fails the test instead of hanging it; afterwards map and owner agree, no
 * pin is left and the counters add up.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "mc_atomic.h"

#define HAMMER_CLIENTS 3
#define HAMMER_ITERS 150
#define HAMMER_K 2
/* Long enough for a slow emulated VM, short enough to catch a lost wakeup. */
#define HAMMER_WAIT_MS 20000
#define PENDING_MAX 256

/* The tag an expert's bytes carry in its host record and in a bank slot. */
static __u64 expert_tag(__u32 idx)
{
	return 0x6d6f656300000000ull | idx;
}

static __u32 next_random(__u32 *state)
{
	__u32 x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}

struct hammer {
	char pool[MOECACHE_NAME_LEN];
	__u32 iters; /* per client; 0: until killed */
	struct vm_gate agent_ready;
	struct vm_gate agent_stop;
	/* out */
	__u64 acquires[HAMMER_CLIENTS + 1];
	__u64 hits[HAMMER_CLIENTS + 1];
	__u64 commits;
	__u64 victims;
	__u64 busy;
};

static struct hammer *hammer_new(const char *pool, __u32 iters)
{
	struct hammer *h = vm_shared(sizeof(*h));

	snprintf(h->pool, sizeof(h->pool), "%s", pool);
	h->iters = iters;
	vm_gate_open(&h->agent_ready);
	vm_gate_open(&h->agent_stop);
	return h;
}

struct hammer_agent {
	struct vm_view a;
	unsigned char *bank;
	__u64 stride;
	struct moecache_request pending[PENDING_MAX];
	size_t n_pending;
	__u32 hand;
};

/* Copies the expert into an unpinned slot and commits it; false if all are pinned. */
static bool hammer_serve(struct hammer *h, struct hammer_agent *ag,
			 const struct moecache_request *req)
{
	const struct vm_view *a = &ag->a;
	__u32 idx = vm_idx(a, req->layer, req->expert), k;

	VM_ASSERT_MSG(vm_load32(&a->map[idx]) == MOECACHE_NONE,
		      "request for (%u, %u), which is resident in slot %u", req->layer, req->expert,
		      vm_load32(&a->map[idx]));
	for (k = 0; k < a->att.n_slots; k++) {
		__u32 s = (ag->hand + k) % a->att.n_slots;
		struct moecache_evict ev = {.slot = s, .layer = req->layer, .expert = req->expert};

		if (vm_load32(&a->pins[s]))
			continue;
		if (ioctl(a->fd, MOECACHE_IOC_EVICT, &ev) < 0) {
			/* Pinned since we looked: try the next one. */
			if (errno == EBUSY) {
				h->busy++;
				continue;
			}
			VM_FAIL("EVICT slot %u for (%u, %u): %s", s, req->layer, req->expert,
				vm_errname(errno));
		}
		if (ev.old_layer != MOECACHE_NONE)
			h->victims++;
		memcpy(ag->bank + (size_t)s * ag->stride, vm_host_record(a, idx),
		       a->att.expert_bytes);
		vm_commit1(a, s, req->layer, req->expert, 0);
		h->commits++;
		ag->hand = s + 1;
		return true;
	}
	return false;
}

static void hammer_agent_main(void *arg)
{
	struct hammer *h = arg;
	struct hammer_agent *ag = calloc(1, sizeof(*ag));
	struct moecache_bank bank;
	__u32 idx;
	int memfd;

	VM_ASSERT(ag);
	vm_attach(&ag->a, h->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&ag->a, PROT_READ | PROT_WRITE);
	for (idx = 0; idx < ag->a.n_idx; idx++) {
		__u64 tag = expert_tag(idx);
		unsigned char *rec = vm_host_record(&ag->a, idx);

		memcpy(rec, &tag, sizeof(tag));
		memcpy(rec + ag->a.att.expert_bytes - sizeof(tag), &tag, sizeof(tag));
	}
	ag->stride = ag->a.att.expert_bytes;
	memfd = vm_bank_set_memfd(&ag->a, ag->stride, &bank);
	ag->bank = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(ag->bank != MAP_FAILED);
	VM_OK(fcntl(ag->a.fd, F_SETFL, O_NONBLOCK));
	vm_gate_pass(&h->agent_ready);

	for (;;) {
		struct pollfd pfd[2] = {
		    {.fd = ag->a.fd, .events = POLLIN},
		    {.fd = h->agent_stop.rd, .events = POLLIN},
		};
		size_t i, kept = 0;

		/* With work left over (every slot pinned), look again soon. */
		if (poll(pfd, 2, ag->n_pending ? 1 : 200) < 0)
			VM_FAIL("agent poll: %s", vm_errname(errno));
		if (pfd[1].revents)
			break;
		VM_ASSERT_MSG(!(pfd[0].revents & (POLLERR | POLLNVAL)), "agent poll revents 0x%x",
			      pfd[0].revents);
		if (pfd[0].revents & POLLIN) {
			ssize_t n = read(ag->a.fd, ag->pending + ag->n_pending,
					 (PENDING_MAX - ag->n_pending) * sizeof(ag->pending[0]));

			if (n < 0 && errno != EAGAIN)
				VM_FAIL("agent read: %s", vm_errname(errno));
			if (n > 0)
				ag->n_pending += (size_t)n / sizeof(ag->pending[0]);
		}
		for (i = 0; i < ag->n_pending; i++)
			if (!hammer_serve(h, ag, &ag->pending[i]))
				ag->pending[kept++] = ag->pending[i];
		ag->n_pending = kept;
	}
	munmap(ag->bank, bank.bank_bytes);
	close(memfd);
	vm_detach(&ag->a);
	free(ag);
}

struct hammer_client_arg {
	struct hammer *h;
	unsigned int id;
};

static void hammer_client_main(void *arg)
{
	const struct hammer_client_arg *ca = arg;
	struct hammer *h = ca->h;
	struct moecache_bank bank;
	struct vm_view c;
	const unsigned char *bytes;
	__u32 rnd = 0x9e3779b9u * (ca->id + 1), it;

	vm_attach(&c, h->pool, MOECACHE_ROLE_CLIENT);
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank));
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ, MAP_SHARED, bank.fd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	for (it = 0; !h->iters || it < h->iters; it++) {
		__u32 layer = next_random(&rnd) % c.att.n_layers;
		__u32 e0 = next_random(&rnd) % c.n_local;
		__u32 e1 = (e0 + 1 + next_random(&rnd) % (c.n_local - 1)) % c.n_local;
		__u32 experts[HAMMER_K] = {c.att.expert_begin + e0, c.att.expert_begin + e1};
		__u32 slots[HAMMER_K];
		struct moecache_acquire acq;
		int ret, k;

		ret = vm_try_acquire(&c, layer, experts, HAMMER_K, slots, MOECACHE_ACQ_WAIT,
				     HAMMER_WAIT_MS, &acq);
		if (ret)
			VM_FAIL("client %u, acquire %u of (%u: %u, %u): %s%s", ca->id, it, layer,
				experts[0], experts[1], vm_errname(-ret),
				ret == -ETIMEDOUT ? " (a lost wakeup?)" : "");
		VM_EQ(acq.n_pinned, HAMMER_K);
		for (k = 0; k < HAMMER_K; k++) {
			__u32 idx = vm_idx(&c, layer, experts[k]);
			__u64 head, tail;

			VM_ASSERT_MSG(slots[k] < c.att.n_slots, "slot %u out of range", slots[k]);
			/* Pinned: the slot holds this expert and its bytes, whole. */
			VM_ASSERT_MSG(vm_load32(&c.owner[slots[k]]) == idx,
				      "pinned slot %u: owner 0x%x, expected %u", slots[k],
				      vm_load32(&c.owner[slots[k]]), idx);
			VM_ASSERT(vm_load32(&c.pins[slots[k]]) >= 1);
			memcpy(&head, bytes + (size_t)slots[k] * bank.slot_stride, sizeof(head));
			memcpy(&tail,
			       bytes + (size_t)slots[k] * bank.slot_stride + c.att.expert_bytes -
				   sizeof(tail),
			       sizeof(tail));
			VM_ASSERT_MSG(head == expert_tag(idx) && tail == expert_tag(idx),
				      "slot %u holds 0x%llx/0x%llx, expected expert %u's bytes",
				      slots[k], (unsigned long long)head, (unsigned long long)tail,
				      idx);
		}
		h->hits[ca->id] += acq.n_hits;
		vm_release(&c, slots, HAMMER_K);
		h->acquires[ca->id]++;
	}
	munmap((void *)bytes, bank.bank_bytes);
	close(bank.fd);
	vm_detach(&c);
}

static pid_t hammer_start_client(struct hammer *h, unsigned int id)
{
	struct hammer_client_arg ca = {.h = h, .id = id};

	return vm_spawn(hammer_client_main, &ca);
}

static void expect_quiet_pool(const struct vm_view *v)
{
	struct moecache_stats st;
	__u32 s, resident = 0;

	vm_check_map_consistent(v);
	for (s = 0; s < v->att.n_slots; s++) {
		VM_ASSERT_MSG(vm_load32(&v->pins[s]) == 0, "pins[%u] = %u at the end", s,
			      vm_load32(&v->pins[s]));
		if (vm_load32(&v->owner[s]) != MOECACHE_NONE)
			resident++;
	}
	vm_stats(v, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.pinned_slots, 0);
	VM_EQ(st.filling, 0);
	VM_EQ(st.queued, 0);
	VM_EQ(st.inflight, 0);
	VM_EQ(st.resident, resident);
	VM_EQ(vm_load32(&v->hdr->seq) % 2, 0);
}

static void concurrency_acquire_release_hammer(struct vm_ctx *ctx)
{
	struct hammer *h = hammer_new(ctx->pool, HAMMER_ITERS);
	struct moecache_stats st;
	struct vm_view obs;
	pid_t agent, clients[HAMMER_CLIENTS];
	__u64 acquires = 0, hits = 0;
	unsigned int i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&obs, ctx->pool, MOECACHE_ROLE_LOADER);
	agent = vm_spawn(hammer_agent_main, h);
	vm_gate_wait(&h->agent_ready, 20000, "the agent to set up");
	for (i = 0; i < HAMMER_CLIENTS; i++)
		clients[i] = hammer_start_client(h, i);
	for (i = 0; i < HAMMER_CLIENTS; i++)
		vm_reap_ok(clients[i], 150000, "a client");
	vm_gate_pass(&h->agent_stop);
	vm_reap_ok(agent, 20000, "the agent");

	for (i = 0; i < HAMMER_CLIENTS; i++) {
		VM_EQ(h->acquires[i], HAMMER_ITERS);
		acquires += h->acquires[i];
		hits += h->hits[i];
	}
	expect_quiet_pool(&obs);
	vm_stats(&obs, MOECACHE_NONE, &st);
	VM_EQ(st.hits + st.misses, acquires * HAMMER_K);
	VM_EQ(st.hits, hits);
	VM_EQ(st.commits, h->commits);
	VM_EQ(st.bytes_copied, h->commits * obs.att.expert_bytes);
	VM_EQ(st.evictions, h->victims);
	/* Fewer slots than experts: the run must have evicted. */
	VM_ASSERT(h->victims > 0);
	vm_detach(&obs);
	vm_pool_destroy(ctx->pool);
}

static void concurrency_client_kill_under_load(struct vm_ctx *ctx)
{
	struct hammer *h = hammer_new(ctx->pool, 0);
	struct vm_view obs;
	struct moecache_stats st;
	pid_t agent, clients[HAMMER_CLIENTS];
	__u32 experts[2] = {3, 12}, slots[2];
	unsigned int i, round;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&obs, ctx->pool, MOECACHE_ROLE_CLIENT);
	agent = vm_spawn(hammer_agent_main, h);
	vm_gate_wait(&h->agent_ready, 20000, "the agent to set up");
	for (round = 0; round < 3; round++) {
		for (i = 0; i < HAMMER_CLIENTS; i++)
			clients[i] = hammer_start_client(h, i);
		/* Kill each one mid-stream, after it made some progress. */
		for (i = 0; i < HAMMER_CLIENTS; i++) {
			__u64 start = h->acquires[i];

			VM_WAIT_FOR(h->acquires[i] >= start + 5 + i * 3, 60000);
			vm_kill(clients[i], "a client");
		}
	}
	/* The agent finishes what it read; nothing of the dead stays queued. */
	VM_WAIT_FOR((vm_stats(&obs, MOECACHE_NONE, &st),
		     st.queued == 0 && st.inflight == 0 && st.filling == 0),
		    20000);
	VM_EQ(st.n_clients, 1);
	expect_quiet_pool(&obs);
	/* The pool still serves. */
	VM_EQ(vm_try_acquire(&obs, 2, experts, 2, slots, MOECACHE_ACQ_WAIT, HAMMER_WAIT_MS, NULL),
	      0);
	vm_release(&obs, slots, 2);
	vm_gate_pass(&h->agent_stop);
	vm_reap_ok(agent, 20000, "the agent");
	vm_detach(&obs);
	vm_pool_destroy(ctx->pool);
}

static void concurrency_many_waiters_one_commit(struct vm_ctx *ctx)
{
	enum { WAITERS = 6, ROUNDS = 3 };
	struct vm_view a;
	struct vm_waiter *w[WAITERS];
	struct moecache_request reqs[WAITERS];
	struct moecache_stats st;
	pid_t pids[WAITERS];
	unsigned int r, i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	for (r = 0; r < ROUNDS; r++) {
		__u32 layer = r, expert = 5 + r, slot = 2 + r;

		for (i = 0; i < WAITERS; i++) {
			w[i] = vm_waiter_new(ctx->pool, layer, &expert, 1, MOECACHE_ACQ_WAIT,
					     HAMMER_WAIT_MS);
			w[i]->hold = true;
			pids[i] = vm_waiter_start(w[i]);
		}
		for (i = 0; i < WAITERS; i++)
			vm_wait_sleeping(pids[i], 10000, "a waiter");
		/* One request for all of them. */
		VM_EQ(vm_read_requests(&a, reqs, WAITERS, 5000), 1);
		vm_stats(&a, MOECACHE_NONE, &st);
		VM_EQ(st.queued, 0);
		vm_fill(&a, slot, layer, expert);
		for (i = 0; i < WAITERS; i++) {
			vm_gate_wait(&w[i]->done, 10000, "a waiter to be woken");
			VM_EQ(w[i]->ret, 0);
			VM_EQ(w[i]->slots[0], slot);
		}
		VM_EQ(vm_load32(&a.pins[slot]), WAITERS);
		for (i = 0; i < WAITERS; i++) {
			vm_gate_pass(&w[i]->release);
			vm_reap_ok(pids[i], 10000, "a waiter");
		}
		VM_EQ(vm_load32(&a.pins[slot]), 0);
	}
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

struct seq_reader {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	struct vm_gate stop;
	__u64 consistent;
	__u64 retries;
};

static void seq_reader_main(void *arg)
{
	struct seq_reader *r = arg;
	struct vm_view c;
	__u32 map[64], owner[8], s, idx;
	unsigned int spins = 0;

	vm_attach(&c, r->pool, MOECACHE_ROLE_CLIENT);
	VM_ASSERT(c.n_idx <= ARRAY_SIZE(map) && c.att.n_slots <= ARRAY_SIZE(owner));
	vm_gate_pass(&r->ready);
	for (;;) {
		__u32 s1;

		if (++spins % 64 == 0) {
			struct pollfd pfd = {.fd = r->stop.rd, .events = POLLIN};

			if (poll(&pfd, 1, 0) > 0)
				break;
		}
		/* libmoecache's seqcount reader (lib/protocol/mc_atomic.h). */
		if (!mc_seq_read_try_begin(&c.hdr->seq, &s1)) {
			r->retries++;
			continue;
		}
		for (idx = 0; idx < c.n_idx; idx++)
			map[idx] = mc_load_relaxed_u32(&c.map[idx]);
		for (s = 0; s < c.att.n_slots; s++)
			owner[s] = mc_load_relaxed_u32(&c.owner[s]);
		if (mc_seq_read_retry(&c.hdr->seq, s1)) {
			r->retries++;
			continue;
		}
		for (s = 0; s < c.att.n_slots; s++) {
			__u32 o = owner[s];

			if (o == MOECACHE_NONE || (o & MOECACHE_OWNER_FILLING))
				continue;
			VM_ASSERT_MSG(o < c.n_idx && map[o] == s,
				      "seq %u: owner[%u] = %u but map[%u] = 0x%x", s1, s, o,
				      o < c.n_idx ? o : 0, o < c.n_idx ? map[o] : 0);
		}
		for (idx = 0; idx < c.n_idx; idx++) {
			__u32 m = map[idx];

			if (m == MOECACHE_NONE)
				continue;
			VM_ASSERT_MSG(m < c.att.n_slots && owner[m] == idx,
				      "seq %u: map[%u] = %u but owner[%u] = 0x%x", s1, idx, m,
				      m < c.att.n_slots ? m : 0, m < c.att.n_slots ? owner[m] : 0);
		}
		r->consistent++;
	}
	vm_detach(&c);
}

static void concurrency_seq_consistent_snapshots(struct vm_ctx *ctx)
{
	struct seq_reader *r = vm_shared(sizeof(*r));
	struct vm_view a;
	__u32 i, seq0;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	snprintf(r->pool, sizeof(r->pool), "%s", ctx->pool);
	vm_gate_open(&r->ready);
	vm_gate_open(&r->stop);
	pid = vm_spawn(seq_reader_main, r);
	vm_gate_wait(&r->ready, 10000, "the reader to attach");
	seq0 = vm_load32(&a.hdr->seq);
	/* Experts move from slot to slot; every fourth step only frees a slot. */
	for (i = 0; i < 400; i++) {
		__u32 slot = i % a.att.n_slots;
		__u32 layer = (i / 7) % a.att.n_layers, expert = (i * 5) % a.n_local;
		__u32 idx = vm_idx(&a, layer, expert);
		__u32 cur = vm_load32(&a.map[idx]);

		if (i % 4 == 3) {
			if (vm_load32(&a.owner[slot]) != MOECACHE_NONE)
				vm_evict(&a, slot, MOECACHE_NONE, MOECACHE_NONE, NULL);
			continue;
		}
		if (cur != MOECACHE_NONE)
			vm_evict(&a, cur, MOECACHE_NONE, MOECACHE_NONE, NULL);
		vm_fill(&a, slot, layer, expert);
	}
	vm_gate_pass(&r->stop);
	vm_reap_ok(pid, 20000, "the reader");
	VM_ASSERT_MSG(r->consistent > 0, "the reader never saw a consistent map (%llu retries)",
		      (unsigned long long)r->retries);
	VM_ASSERT(vm_load32(&a.hdr->seq) != seq0);
	vm_check_map_consistent(&a);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* An agent that sleeps in read() or poll() and counts what wakes it. */
struct sleeper {
	char pool[MOECACHE_NAME_LEN];
	bool use_poll;
	unsigned int rounds;
	struct vm_gate ready;
	__u32 woken;
	struct moecache_request last;
};

static void sleeper_main(void *arg)
{
	struct sleeper *sl = arg;
	struct vm_view a;
	unsigned int r;

	vm_attach(&a, sl->pool, MOECACHE_ROLE_AGENT);
	vm_gate_pass(&sl->ready);
	for (r = 0; r < sl->rounds; r++) {
		struct moecache_request req;
		ssize_t n;

		if (sl->use_poll) {
			struct pollfd pfd = {.fd = a.fd, .events = POLLIN};

			VM_EQ(poll(&pfd, 1, -1), 1);
			VM_EQ(pfd.revents & POLLIN, POLLIN);
		}
		n = read(a.fd, &req, sizeof(req));
		VM_EQ(n, sizeof(req));
		sl->last = req;
		__atomic_store_n(&sl->woken, r + 1, __ATOMIC_RELEASE);
	}
	vm_detach(&a);
}

static void sleeper_test(struct vm_ctx *ctx, bool use_poll)
{
	struct sleeper *sl = vm_shared(sizeof(*sl));
	struct vm_view c;
	unsigned int r;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	snprintf(sl->pool, sizeof(sl->pool), "%s", ctx->pool);
	sl->use_poll = use_poll;
	sl->rounds = 24;
	vm_gate_open(&sl->ready);
	pid = vm_spawn(sleeper_main, sl);
	vm_gate_wait(&sl->ready, 10000, "the agent to attach");
	for (r = 0; r < sl->rounds; r++) {
		__u32 layer = r / c.n_local, expert = r % c.n_local, slot;

		vm_wait_sleeping(pid, 10000, "the agent");
		vm_acquire(&c, layer, &expert, 1, &slot, 0, NULL);
		VM_WAIT_FOR(__atomic_load_n(&sl->woken, __ATOMIC_ACQUIRE) == r + 1, 10000);
		VM_EQ(sl->last.layer, layer);
		VM_EQ(sl->last.expert, expert);
	}
	vm_reap_ok(pid, 10000, "the agent");
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void concurrency_blocking_read_wakes(struct vm_ctx *ctx)
{
	sleeper_test(ctx, false);
}

static void concurrency_poll_wakes(struct vm_ctx *ctx)
{
	sleeper_test(ctx, true);
}

static const struct vm_test concurrency_tests[] = {
    VM_TEST_TIMEOUT(concurrency_acquire_release_hammer,
		    "clients WAIT-acquire and release while an agent evicts and commits: all "
		    "served, tables agree, counters add up",
		    180),
    VM_TEST_TIMEOUT(concurrency_client_kill_under_load,
		    "clients killed mid-stream leave no pin and no request behind", 180),
    VM_TEST_TIMEOUT(concurrency_many_waiters_one_commit,
		    "one COMMIT wakes every client waiting on the expert", 90),
    VM_TEST_TIMEOUT(concurrency_seq_consistent_snapshots,
		    "a reader that sees an even, unchanged seq sees map and owner agree", 90),
    VM_TEST_TIMEOUT(concurrency_blocking_read_wakes,
		    "an agent asleep in read() wakes for every new request", 90),
    VM_TEST_TIMEOUT(concurrency_poll_wakes, "an agent asleep in poll() wakes for every new request",
		    90),
};

const struct vm_suite vm_concurrency_suite = {concurrency_tests, ARRAY_SIZE(concurrency_tests)};
