// SPDX-License-Identifier: GPL-2.0
/*
 * Fast pins and REPORT (uapi/moecache.h): a client attached with
 * MOECACHE_ATTACH_FAST_PINS pins resident slots by writing its own pins
 * region, and tells the driver about the hits so taken with REPORT. A fast
 * pin must hold a slot as an ACQUIRE pin does (EVICT, BANK_SET), go with
 * its file, and garbage in a region must hurt nothing but that slot's
 * eviction. The tests are named by category like those of the other files.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "mc_fastpin.h"

/* Two experts the tests make resident, and where; N is resident nowhere. */
#define A_LAYER 1
#define A_EXPERT 3
#define A_SLOT 2
#define B_LAYER 2
#define B_EXPERT 6
#define B_SLOT 5
#define N_LAYER 0
#define N_EXPERT 9

/* How long the concurrency test's client keeps pinning. */
#define RACE_MS 2000

static size_t round_up(size_t n, size_t unit)
{
	return (n + unit - 1) / unit * unit;
}

/* ---- fast-pin clients ------------------------------------------------- */

/* A client attached with FAST_PINS, its pins region mapped read-write. */
struct fp_client {
	struct vm_view v;
	__u32 *pins;
	size_t pins_len;
};

static void fp_attach(struct fp_client *fc, const char *pool)
{
	int fd = vm_open_dev();
	int ret = vm_try_attach_fd_flags(&fc->v, fd, pool, MOECACHE_ROLE_CLIENT,
					 MOECACHE_ATTACH_FAST_PINS);
	void *p;

	if (ret)
		VM_FAIL("ATTACH %s as a client with FAST_PINS: %s", pool, vm_errname(-ret));
	fc->pins_len = fc->v.att.off.pins_size;
	VM_ASSERT_MSG(fc->pins_len >= (size_t)fc->v.att.n_slots * sizeof(__u32),
		      "pins_size %zu is too small for %u slots", fc->pins_len, fc->v.att.n_slots);
	p = mmap(NULL, fc->pins_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)fc->v.att.off.pins_offset);
	if (p == MAP_FAILED)
		VM_FAIL("mmap of the pins region: %s", vm_errname(errno));
	fc->pins = p;
}

static void fp_detach(struct fp_client *fc)
{
	if (fc->pins)
		munmap(fc->pins, fc->pins_len);
	fc->pins = NULL;
	vm_detach(&fc->v);
}

static void fp_unpin(struct fp_client *fc, __u32 slot)
{
	mc_fast_pin_put(fc->pins, slot);
}

/* libmoecache's fast pin (lib/protocol/mc_fastpin.h): the slot now pinned for idx, or NONE. */
static __u32 fp_pin(struct fp_client *fc, __u32 idx)
{
	__u32 s = vm_load32(&fc->v.map[idx]);

	/* The library takes an entry past n_slots for a miss; the driver must never publish one. */
	VM_ASSERT_MSG(s == MOECACHE_NONE || s < fc->v.att.n_slots, "map[%u] = %u is out of range",
		      idx, s);
	return mc_fast_pin_one(fc->pins, fc->v.map, fc->v.att.n_slots, idx);
}

/* ---- the agent's side ------------------------------------------------- */

static int fp_try_evict(const struct vm_view *a, __u32 slot, __u32 layer, __u32 expert,
			struct moecache_evict *out)
{
	struct moecache_evict ev = {.slot = slot, .layer = layer, .expert = expert};
	int ret = ioctl(a->fd, MOECACHE_IOC_EVICT, &ev) < 0 ? -errno : 0;

	if (out)
		*out = ev;
	return ret;
}

/*
 * Who holds what. A refused EVICT or BANK_SET may unpublish and publish a
 * slot again (seq moves), so "unchanged" is the residency, not the region.
 */
struct fp_resid {
	__u32 *map;
	__u32 *owner;
	struct moecache_stats st;
};

static void fp_resid_take(const struct vm_view *v, struct fp_resid *r)
{
	__u32 i;

	r->map = calloc(v->n_idx, sizeof(*r->map));
	r->owner = calloc(v->att.n_slots, sizeof(*r->owner));
	VM_ASSERT(r->map && r->owner);
	for (i = 0; i < v->n_idx; i++)
		r->map[i] = vm_load32(&v->map[i]);
	for (i = 0; i < v->att.n_slots; i++)
		r->owner[i] = vm_load32(&v->owner[i]);
	vm_stats(v, MOECACHE_NONE, &r->st);
}

static void fp_resid_same_at(const char *file, int line, const struct vm_view *v,
			     struct fp_resid *r, const char *after)
{
	struct moecache_stats st;
	__u32 i, seq;

	for (i = 0; i < v->n_idx; i++)
		if (vm_load32(&v->map[i]) != r->map[i])
			vm_fail_at(file, line, "%s changed map[%u]: 0x%x -> 0x%x", after, i,
				   r->map[i], vm_load32(&v->map[i]));
	for (i = 0; i < v->att.n_slots; i++)
		if (vm_load32(&v->owner[i]) != r->owner[i])
			vm_fail_at(file, line, "%s changed owner[%u]: 0x%x -> 0x%x", after, i,
				   r->owner[i], vm_load32(&v->owner[i]));
	seq = vm_load32(&v->hdr->seq);
	if (seq % 2)
		vm_fail_at(file, line, "seq is odd (%u) after %s", seq, after);
	vm_stats(v, MOECACHE_NONE, &st);
	if (st.resident != r->st.resident || st.filling != r->st.filling ||
	    st.evictions != r->st.evictions || st.commits != r->st.commits)
		vm_fail_at(file, line,
			   "%s changed the counters: resident %u -> %u, filling %u -> %u, "
			   "evictions %llu -> %llu, commits %llu -> %llu",
			   after, r->st.resident, st.resident, r->st.filling, st.filling,
			   (unsigned long long)r->st.evictions, (unsigned long long)st.evictions,
			   (unsigned long long)r->st.commits, (unsigned long long)st.commits);
	free(r->map);
	free(r->owner);
	r->map = r->owner = NULL;
}

#define FP_RESID_SAME(v, r, after) fp_resid_same_at(__FILE__, __LINE__, (v), (r), (after))

/* EVICT of a fast-pinned slot, to refill it or only to free it, is EBUSY and changes nothing. */
static void fp_evict_busy_at(const char *file, int line, const struct vm_view *a, __u32 slot)
{
	const __u32 targets[2][2] = {{N_LAYER, N_EXPERT}, {MOECACHE_NONE, MOECACHE_NONE}};
	struct fp_resid r;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(targets); i++) {
		int ret;

		fp_resid_take(a, &r);
		ret = fp_try_evict(a, slot, targets[i][0], targets[i][1], NULL);
		if (ret != -EBUSY)
			vm_fail_at(file, line,
				   "EVICT of fast-pinned slot %u for (0x%x, 0x%x): expected EBUSY, "
				   "got %s",
				   slot, targets[i][0], targets[i][1],
				   ret ? vm_errname(-ret) : "success");
		fp_resid_same_at(file, line, a, &r, "a refused EVICT");
	}
}

#define FP_EVICT_BUSY(a, slot) fp_evict_busy_at(__FILE__, __LINE__, (a), (slot))

/* EVICT of slot for N succeeds, reports the victim, and N is committed there. */
static void fp_evict_ok(const struct vm_view *a, __u32 slot, __u32 old_layer, __u32 old_expert)
{
	struct moecache_evict ev;
	int ret = fp_try_evict(a, slot, N_LAYER, N_EXPERT, &ev);

	if (ret)
		VM_FAIL("EVICT of slot %u once unpinned: %s", slot, vm_errname(-ret));
	VM_EQ(ev.old_layer, old_layer);
	VM_EQ(ev.old_expert, old_expert);
	VM_EQ(vm_load32(&a->map[vm_idx(a, old_layer, old_expert)]), MOECACHE_NONE);
	VM_EQ(vm_load32(&a->owner[slot]), MOECACHE_OWNER_FILLING | vm_idx(a, N_LAYER, N_EXPERT));
	vm_commit1(a, slot, N_LAYER, N_EXPERT, 0);
	VM_EQ(vm_load32(&a->map[vm_idx(a, N_LAYER, N_EXPERT)]), slot);
}

/* A pool with A and B resident, its agent and one fast-pins client. */
struct fp_env {
	struct vm_view a;
	struct fp_client fc;
};

static void fp_setup(struct vm_ctx *ctx, struct fp_env *env)
{
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&env->a, ctx->pool, MOECACHE_ROLE_AGENT);
	fp_attach(&env->fc, ctx->pool);
	vm_fill(&env->a, A_SLOT, A_LAYER, A_EXPERT);
	vm_fill(&env->a, B_SLOT, B_LAYER, B_EXPERT);
}

static void fp_teardown(struct vm_ctx *ctx, struct fp_env *env)
{
	fp_detach(&env->fc);
	vm_detach(&env->a);
	vm_pool_destroy(ctx->pool);
}

/* ---- REPORT ----------------------------------------------------------- */

static int fp_report(int fd, const struct moecache_access *acc, __u32 count, __u32 flags)
{
	struct moecache_report rep = {.count = count, .flags = flags, .accesses = (uintptr_t)acc};

	return ioctl(fd, MOECACHE_IOC_REPORT, &rep) < 0 ? -errno : 0;
}

/* REPORT through fd fails with err and the pool seen through obs is unchanged. */
static void rp_refused_at(const char *file, int line, const struct vm_view *obs, int fd, int err,
			  const struct moecache_access *acc, __u32 count, __u32 flags)
{
	struct vm_snap snap;
	char what[96];
	int ret;

	snprintf(what, sizeof(what), "REPORT of %u entries, flags 0x%x", count, flags);
	vm_snap_take(obs, &snap);
	ret = fp_report(fd, acc, count, flags);
	if (ret != -err)
		vm_fail_errno_at(file, line, what, err, ret ? -1 : 0, -ret);
	vm_snap_same_at(file, line, obs, &snap, what);
}

#define RP_REFUSED(obs, fd, err, acc, count, flags)                                                \
	rp_refused_at(__FILE__, __LINE__, (obs), (fd), (err), (acc), (count), (flags))

/*
 * A pool for REPORT's refusals: A resident, B not, and one REPORT already
 * counted so that the counters a refusal must not move are not all zero.
 */
struct rp_env {
	struct vm_view a;
	struct vm_view c;
	struct moecache_access good[2];
};

static void rp_setup_geom(struct vm_ctx *ctx, struct rp_env *env, const struct vm_geom *g)
{
	__u32 b = g->expert_begin;

	vm_pool_create(ctx->pool, g);
	vm_attach(&env->a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&env->c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&env->a, A_SLOT, A_LAYER, b + A_EXPERT);
	env->good[0] = (struct moecache_access){.layer = A_LAYER, .expert = b + A_EXPERT};
	env->good[1] = (struct moecache_access){.layer = B_LAYER, .expert = b + B_EXPERT};
	VM_OK(fp_report(env->c.fd, env->good, 2, 0));
}

static void rp_setup(struct vm_ctx *ctx, struct rp_env *env)
{
	rp_setup_geom(ctx, env, &vm_geom_default);
}

static void rp_teardown(struct vm_ctx *ctx, struct rp_env *env)
{
	vm_detach(&env->c);
	vm_detach(&env->a);
	vm_pool_destroy(ctx->pool);
}

/* An address that faults on every access (kept mapped, so nothing reuses it). */
static void *noaccess_page(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	VM_ASSERT(p != MAP_FAILED);
	return p;
}

/* ---- basic_ ----------------------------------------------------------- */

static bool disjoint(__u64 a, __u64 alen, __u64 b, __u64 blen)
{
	return a + alen <= b || b + blen <= a;
}

static void basic_fast_pins_region_mapped(struct vm_ctx *ctx)
{
	const struct moecache_offsets *off;
	size_t page = (size_t)ctx->page_size, i;
	struct fp_client fc;
	__u32 *again;

	vm_pool_create(ctx->pool, &vm_geom_default);
	fp_attach(&fc, ctx->pool);
	off = &fc.v.att.off;
	VM_ASSERT(off->pins_size > 0);
	VM_EQ(off->pins_size, round_up((size_t)fc.v.att.n_slots * sizeof(__u32), page));
	VM_EQ(off->pins_offset % page, 0);
	VM_ASSERT_MSG(
	    disjoint(off->pins_offset, off->pins_size, off->map_offset,
		     round_up(off->map_size, page)) &&
		disjoint(off->pins_offset, off->pins_size, off->host_offset, off->host_size),
	    "pins region [0x%llx, +0x%llx) overlaps the map or the host region",
	    (unsigned long long)off->pins_offset, (unsigned long long)off->pins_size);
	/* Zeroed, page tail included. */
	for (i = 0; i < fc.pins_len / sizeof(__u32); i++)
		VM_ASSERT_MSG(fc.pins[i] == 0, "pins[%zu] = 0x%x in a new region", i, fc.pins[i]);
	/* Writable, and the fd's: a second mapping shows what the first wrote. */
	again = mmap(NULL, fc.pins_len, PROT_READ, MAP_SHARED, fc.v.fd, (off_t)off->pins_offset);
	VM_ASSERT_MSG(again != MAP_FAILED, "second mmap of the pins region: %s", vm_errname(errno));
	fc.pins[3] = 0x12345678;
	VM_EQ(again[3], 0x12345678);
	fc.pins[3] = 0;
	munmap(again, fc.pins_len);
	fp_detach(&fc);
	vm_pool_destroy(ctx->pool);
}

static void basic_fast_pin_blocks_evict(struct vm_ctx *ctx)
{
	struct fp_env env;
	__u32 idx;

	fp_setup(ctx, &env);
	idx = vm_idx(&env.a, A_LAYER, A_EXPERT);
	VM_EQ(fp_pin(&env.fc, idx), A_SLOT);
	VM_EQ(env.fc.pins[A_SLOT], 1);
	FP_EVICT_BUSY(&env.a, A_SLOT);
	VM_EQ(vm_load32(&env.a.map[idx]), A_SLOT);
	VM_EQ(vm_load32(&env.a.owner[A_SLOT]), idx);
	/* An unpinned slot next to it is taken as usual. */
	fp_evict_ok(&env.a, B_SLOT, B_LAYER, B_EXPERT);
	vm_evict(&env.a, B_SLOT, MOECACHE_NONE, MOECACHE_NONE, NULL);
	fp_unpin(&env.fc, A_SLOT);
	VM_EQ(env.fc.pins[A_SLOT], 0);
	fp_evict_ok(&env.a, A_SLOT, A_LAYER, A_EXPERT);
	vm_check_map_consistent(&env.a);
	fp_teardown(ctx, &env);
}

static void basic_fast_pin_blocks_bank_set(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct fp_client fc;
	struct moecache_bank first, second, got;
	struct moecache_stats st;
	struct fp_resid r;
	__u32 i;
	int fd1, fd2;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	fp_attach(&fc, ctx->pool);
	fd1 = vm_bank_set_memfd(&a, a.att.expert_bytes, &first);
	vm_fill(&a, A_SLOT, A_LAYER, A_EXPERT);
	vm_fill(&a, B_SLOT, B_LAYER, B_EXPERT);
	VM_EQ(fp_pin(&fc, vm_idx(&a, B_LAYER, B_EXPERT)), B_SLOT);

	/* Another stride, so that BANK_GET tells which bank the pool has. */
	fd2 = memfd_create("moecache-vmtest-bank2", MFD_CLOEXEC);
	VM_ASSERT(fd2 >= 0);
	second = first;
	second.fd = fd2;
	second.slot_stride = 2 * a.att.expert_bytes;
	second.bank_bytes = second.slot_stride * a.att.n_slots;
	VM_OK(ftruncate(fd2, (off_t)second.bank_bytes));
	fp_resid_take(&a, &r);
	VM_ERR(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &second), EBUSY);
	FP_RESID_SAME(&a, &r, "a refused BANK_SET");
	VM_EQ(vm_load32(&a.map[vm_idx(&a, A_LAYER, A_EXPERT)]), A_SLOT);
	VM_EQ(vm_load32(&a.map[vm_idx(&a, B_LAYER, B_EXPERT)]), B_SLOT);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_EQ(got.slot_stride, first.slot_stride);
	VM_EQ(got.bank_bytes, first.bank_bytes);
	close(got.fd);

	fp_unpin(&fc, B_SLOT);
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &second));
	for (i = 0; i < a.att.n_slots; i++)
		VM_EQ(vm_load32(&a.owner[i]), MOECACHE_NONE);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.resident, 0);
	close(fd2);
	close(fd1);
	fp_detach(&fc);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_fast_pins_own_region(struct vm_ctx *ctx)
{
	struct fp_env env;
	struct fp_client c2;

	fp_setup(ctx, &env);
	fp_attach(&c2, ctx->pool);
	/* What one client writes does not show in the other's region. */
	env.fc.pins[7] = 7;
	VM_EQ(c2.pins[7], 0);
	c2.pins[6] = 9;
	VM_EQ(env.fc.pins[6], 0);
	VM_EQ(env.fc.pins[7], 7);
	env.fc.pins[7] = 0;
	c2.pins[6] = 0;
	/* The driver reads each: a pin in either region holds its slot. */
	VM_EQ(fp_pin(&env.fc, vm_idx(&env.a, A_LAYER, A_EXPERT)), A_SLOT);
	VM_EQ(fp_pin(&c2, vm_idx(&env.a, B_LAYER, B_EXPERT)), B_SLOT);
	VM_EQ(c2.pins[A_SLOT], 0);
	VM_EQ(env.fc.pins[B_SLOT], 0);
	FP_EVICT_BUSY(&env.a, A_SLOT);
	FP_EVICT_BUSY(&env.a, B_SLOT);
	fp_unpin(&c2, B_SLOT);
	FP_EVICT_BUSY(&env.a, A_SLOT);
	fp_evict_ok(&env.a, B_SLOT, B_LAYER, B_EXPERT);
	fp_unpin(&env.fc, A_SLOT);
	vm_evict(&env.a, A_SLOT, MOECACHE_NONE, MOECACHE_NONE, NULL);
	fp_detach(&c2);
	fp_teardown(ctx, &env);
}

static void basic_report_counts_hits(struct vm_ctx *ctx)
{
	struct fp_env env;
	struct moecache_stats pool0, l0[4], st;
	struct moecache_access acc[3] = {
	    {A_LAYER, A_EXPERT}, {A_LAYER, A_EXPERT}, {B_LAYER, B_EXPERT}};
	const __u32 c_slot = 0;
	__u32 *access0, idx_a, idx_b, i;
	__u64 clock0, last0[8], clock1;
	const struct vm_view *v;

	fp_setup(ctx, &env);
	v = &env.fc.v;
	VM_ASSERT(v->att.n_layers <= ARRAY_SIZE(l0) && v->att.n_slots <= ARRAY_SIZE(last0));
	/* Resident but not reported: its stamp stays. */
	vm_fill(&env.a, c_slot, 0, 7);
	idx_a = vm_idx(v, A_LAYER, A_EXPERT);
	idx_b = vm_idx(v, B_LAYER, B_EXPERT);
	VM_EQ(fp_pin(&env.fc, idx_a), A_SLOT);
	VM_EQ(fp_pin(&env.fc, idx_b), B_SLOT);

	access0 = calloc(v->n_idx, sizeof(*access0));
	VM_ASSERT(access0);
	for (i = 0; i < v->n_idx; i++)
		access0[i] = vm_load32(&v->access[i]);
	for (i = 0; i < v->att.n_slots; i++)
		last0[i] = vm_load64(&v->last_use[i]);
	clock0 = vm_load64(&v->hdr->clock);
	vm_stats(v, MOECACHE_NONE, &pool0);
	for (i = 0; i < v->att.n_layers; i++)
		vm_stats(v, i, &l0[i]);

	VM_OK(fp_report(v->fd, acc, 3, 0));

	for (i = 0; i < v->n_idx; i++) {
		__u32 want = access0[i] + (i == idx_a ? 2 : i == idx_b ? 1 : 0);

		VM_ASSERT_MSG(vm_load32(&v->access[i]) == want, "access[%u] = %u, expected %u", i,
			      vm_load32(&v->access[i]), want);
	}
	vm_stats(v, MOECACHE_NONE, &st);
	VM_EQ(st.hits, pool0.hits + 3);
	VM_EQ(st.misses, pool0.misses);
	VM_EQ(st.pins, pool0.pins);
	VM_EQ(st.queued, 0);
	for (i = 0; i < v->att.n_layers; i++) {
		__u64 add = i == A_LAYER ? 2 : i == B_LAYER ? 1 : 0;

		vm_stats(v, i, &st);
		VM_ASSERT_MSG(st.hits == l0[i].hits + add, "layer %u: hits %llu, expected %llu", i,
			      (unsigned long long)st.hits, (unsigned long long)(l0[i].hits + add));
		VM_EQ(st.misses, l0[i].misses);
	}
	clock1 = vm_load64(&v->hdr->clock);
	VM_ASSERT_MSG(clock1 > clock0, "clock %llu did not advance", (unsigned long long)clock0);
	for (i = 0; i < v->att.n_slots; i++) {
		__u64 lu = vm_load64(&v->last_use[i]);

		if (i == A_SLOT || i == B_SLOT)
			VM_ASSERT_MSG(lu > clock0 && lu <= clock1,
				      "last_use[%u] = %llu, expected in (%llu, %llu]", i,
				      (unsigned long long)lu, (unsigned long long)clock0,
				      (unsigned long long)clock1);
		else
			VM_ASSERT_MSG(lu == last0[i], "last_use[%u] %llu -> %llu, not reported", i,
				      (unsigned long long)last0[i], (unsigned long long)lu);
	}
	/* A hit asks the agent for nothing. */
	VM_EQ(vm_poll(&env.a, 0) & POLLIN, 0);
	fp_unpin(&env.fc, A_SLOT);
	fp_unpin(&env.fc, B_SLOT);
	free(access0);
	fp_teardown(ctx, &env);
}

static void basic_report_not_resident_counts_access(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	struct moecache_stats pool0, layer0, st;
	struct moecache_access acc = {A_LAYER, A_EXPERT};
	__u64 last0[8];
	__u32 idx, access0, i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	/* Without FAST_PINS: REPORT is for every client. */
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_ASSERT(c.att.n_slots <= ARRAY_SIZE(last0));
	vm_fill(&a, 0, 0, 7);
	/* A was resident when the client took its hit, and is gone now. */
	vm_fill(&a, A_SLOT, A_LAYER, A_EXPERT);
	vm_evict(&a, A_SLOT, MOECACHE_NONE, MOECACHE_NONE, NULL);
	idx = vm_idx(&c, A_LAYER, A_EXPERT);
	access0 = vm_load32(&c.access[idx]);
	for (i = 0; i < c.att.n_slots; i++)
		last0[i] = vm_load64(&c.last_use[i]);
	vm_stats(&c, MOECACHE_NONE, &pool0);
	vm_stats(&c, A_LAYER, &layer0);

	VM_OK(fp_report(c.fd, &acc, 1, 0));

	VM_EQ(vm_load32(&c.access[idx]), access0 + 1);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.hits, pool0.hits + 1);
	VM_EQ(st.misses, pool0.misses);
	VM_EQ(st.resident, pool0.resident);
	VM_EQ(st.pins, pool0.pins);
	VM_EQ(st.queued, 0);
	VM_EQ(st.inflight, 0);
	vm_stats(&c, A_LAYER, &st);
	VM_EQ(st.hits, layer0.hits + 1);
	/* Nothing is stamped, mapped or asked for. */
	for (i = 0; i < c.att.n_slots; i++)
		VM_ASSERT_MSG(vm_load64(&c.last_use[i]) == last0[i], "last_use[%u] %llu -> %llu", i,
			      (unsigned long long)last0[i],
			      (unsigned long long)vm_load64(&c.last_use[i]));
	VM_EQ(vm_load32(&c.map[idx]), MOECACHE_NONE);
	VM_EQ(vm_poll(&a, 0) & POLLIN, 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- lifetime_ -------------------------------------------------------- */

/* A client process that fast-pins A, says so, and waits to be killed. */
struct pin_child {
	char pool[MOECACHE_NAME_LEN];
	__u32 slot;
	struct vm_gate pinned;
	struct vm_gate never;
};

static void pin_child_main(void *arg)
{
	struct pin_child *pc = arg;
	struct fp_client fc;

	/* The pins region is not inherited across fork: attach here. */
	fp_attach(&fc, pc->pool);
	pc->slot = fp_pin(&fc, vm_idx(&fc.v, A_LAYER, A_EXPERT));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vm_gate_pass(&pc->pinned);
	vm_gate_wait(&pc->never, 120000, "the end");
}

static void lifetime_fast_pins_go_with_fd(struct vm_ctx *ctx)
{
	struct pin_child *pc = vm_shared(sizeof(*pc));
	struct vm_view a;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, A_SLOT, A_LAYER, A_EXPERT);
	snprintf(pc->pool, sizeof(pc->pool), "%s", ctx->pool);
	vm_gate_open(&pc->pinned);
	vm_gate_open(&pc->never);
	pid = vm_spawn(pin_child_main, pc);
	vm_gate_wait(&pc->pinned, 10000, "the client to fast-pin");
	VM_EQ(pc->slot, A_SLOT);
	FP_EVICT_BUSY(&a, A_SLOT);
	vm_kill(pid, "the fast-pinning client");
	fp_evict_ok(&a, A_SLOT, A_LAYER, A_EXPERT);
	vm_check_map_consistent(&a);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_fast_pins_close_fd(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct fp_client fc;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, A_SLOT, A_LAYER, A_EXPERT);

	/* Unmapped, then closed. */
	fp_attach(&fc, ctx->pool);
	VM_EQ(fp_pin(&fc, vm_idx(&a, A_LAYER, A_EXPERT)), A_SLOT);
	FP_EVICT_BUSY(&a, A_SLOT);
	fp_detach(&fc);
	fp_evict_ok(&a, A_SLOT, A_LAYER, A_EXPERT);

	/*
	 * Closed while still mapped. The mappings hold the file until they go,
	 * so this only asks that the pins go with the file's last reference.
	 */
	vm_evict(&a, A_SLOT, A_LAYER, A_EXPERT, NULL);
	vm_commit1(&a, A_SLOT, A_LAYER, A_EXPERT, 0);
	fp_attach(&fc, ctx->pool);
	VM_EQ(fp_pin(&fc, vm_idx(&a, A_LAYER, A_EXPERT)), A_SLOT);
	FP_EVICT_BUSY(&a, A_SLOT);
	VM_OK(close(fc.v.fd));
	fc.v.fd = -1;
	fp_detach(&fc);
	fp_evict_ok(&a, A_SLOT, A_LAYER, A_EXPERT);
	vm_check_map_consistent(&a);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- bad_input_ ------------------------------------------------------- */

/*
 * ATTACH with these flags in this role is EINVAL, changes nothing and
 * leaves the file unbound: a plain ATTACH in the same role then works.
 */
static void attach_flags_refused(struct vm_ctx *ctx, __u32 role, const __u32 *flags, size_t n)
{
	struct vm_view obs, v;
	struct moecache_attach at;
	struct moecache_stats st = {.layer = MOECACHE_NONE};
	int fd, ret;
	size_t i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	/* A loader watches, so that the agent role stays free. */
	vm_attach(&obs, ctx->pool, MOECACHE_ROLE_LOADER);
	fd = vm_open_dev();
	for (i = 0; i < n; i++) {
		memset(&at, 0, sizeof(at));
		snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
		at.role = role;
		at.flags = flags[i];
		VM_REFUSED(&obs, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
		VM_ERR(ioctl(fd, MOECACHE_IOC_STATS, &st), ENOTCONN);
	}
	ret = vm_try_attach_fd(&v, fd, ctx->pool, role);
	if (ret)
		VM_FAIL("plain ATTACH as role %u after the refused ones: %s", role,
			vm_errname(-ret));
	VM_EQ(v.att.off.pins_size, 0);
	vm_stats(&obs, MOECACHE_NONE, &st);
	VM_EQ(st.n_clients, role == MOECACHE_ROLE_CLIENT ? 1 : 0);
	VM_EQ(st.agent_pid, role == MOECACHE_ROLE_AGENT ? getpid() : 0);
	vm_detach(&v);
	vm_detach(&obs);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_attach_fast_pins_agent(struct vm_ctx *ctx)
{
	const __u32 flags[] = {MOECACHE_ATTACH_FAST_PINS};

	attach_flags_refused(ctx, MOECACHE_ROLE_AGENT, flags, ARRAY_SIZE(flags));
}

static void bad_input_attach_fast_pins_loader(struct vm_ctx *ctx)
{
	const __u32 flags[] = {MOECACHE_ATTACH_FAST_PINS};

	attach_flags_refused(ctx, MOECACHE_ROLE_LOADER, flags, ARRAY_SIZE(flags));
}

static void bad_input_attach_unknown_flag(struct vm_ctx *ctx)
{
	const __u32 flags[] = {
	    MOECACHE_ATTACH_FLAGS_ALL + 1,
	    MOECACHE_ATTACH_FAST_PINS | (MOECACHE_ATTACH_FLAGS_ALL + 1),
	    1u << 31,
	    ~0u,
	};

	attach_flags_refused(ctx, MOECACHE_ROLE_CLIENT, flags, ARRAY_SIZE(flags));
}

/* mmap(len, prot, flags, fd, offset) is EINVAL and changes nothing seen through obs. */
static void mmap_refused_at(const char *file, int line, const struct vm_view *obs, int fd,
			    size_t len, int prot, int flags, __u64 offset, const char *what)
{
	struct vm_snap snap;
	void *p;

	vm_snap_take(obs, &snap);
	errno = 0;
	p = mmap(NULL, len, prot, flags, fd, (off_t)offset);
	if (p != MAP_FAILED || errno != EINVAL)
		vm_fail_at(file, line, "mmap %s: expected EINVAL, got %s", what,
			   p == MAP_FAILED ? vm_errname(errno) : "success");
	vm_snap_same_at(file, line, obs, &snap, what);
}

#define MMAP_REFUSED(obs, fd, len, prot, flags, offset, what)                                      \
	mmap_refused_at(__FILE__, __LINE__, (obs), (fd), (len), (prot), (flags), (offset), (what))

static void bad_input_mmap_pins_private(struct vm_ctx *ctx)
{
	struct fp_env env;
	__u64 off;

	fp_setup(ctx, &env);
	off = env.fc.v.att.off.pins_offset;
	MMAP_REFUSED(&env.fc.v, env.fc.v.fd, env.fc.pins_len, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		     off, "MAP_PRIVATE read-write of the pins region");
	MMAP_REFUSED(&env.fc.v, env.fc.v.fd, env.fc.pins_len, PROT_READ, MAP_PRIVATE, off,
		     "MAP_PRIVATE read-only of the pins region");
	/* The shared mapping still works. */
	VM_EQ(fp_pin(&env.fc, vm_idx(&env.a, A_LAYER, A_EXPERT)), A_SLOT);
	FP_EVICT_BUSY(&env.a, A_SLOT);
	fp_unpin(&env.fc, A_SLOT);
	fp_teardown(ctx, &env);
}

/* A shared writable mapping needs a file open for writing, the pins region's too. */
static void bad_input_mmap_pins_rdonly_file(struct vm_ctx *ctx)
{
	struct fp_env env;
	struct vm_view c;
	int fd;
	void *p;

	fp_setup(ctx, &env);
	fd = open(MOECACHE_DEVICE, O_RDONLY | O_CLOEXEC);
	VM_ASSERT(fd >= 0);
	VM_EQ(vm_try_attach_fd_flags(&c, fd, ctx->pool, MOECACHE_ROLE_CLIENT,
				     MOECACHE_ATTACH_FAST_PINS),
	      0);
	errno = 0;
	p = mmap(NULL, c.att.off.pins_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)c.att.off.pins_offset);
	if (p != MAP_FAILED || errno != EACCES)
		VM_FAIL("read-write mmap of the pins region of an O_RDONLY file: expected EACCES, "
			"got %s",
			p == MAP_FAILED ? vm_errname(errno) : "success");
	vm_detach(&c);
	fp_teardown(ctx, &env);
}

static void bad_input_mmap_pins_too_big(struct vm_ctx *ctx)
{
	struct fp_env env;
	size_t page = (size_t)ctx->page_size;
	__u64 off;

	fp_setup(ctx, &env);
	off = env.fc.v.att.off.pins_offset;
	MMAP_REFUSED(&env.fc.v, env.fc.v.fd, env.fc.pins_len + page, PROT_READ | PROT_WRITE,
		     MAP_SHARED, off, "of pins_size + a page");
	MMAP_REFUSED(&env.fc.v, env.fc.v.fd, env.fc.pins_len + page, PROT_READ, MAP_SHARED, off,
		     "read-only of pins_size + a page");
	MMAP_REFUSED(&env.fc.v, env.fc.v.fd, env.fc.pins_len + (64u << 20), PROT_READ, MAP_SHARED,
		     off, "of pins_size + 64 MiB");
	fp_teardown(ctx, &env);
}

static void bad_input_mmap_pins_without_flag(struct vm_ctx *ctx)
{
	struct fp_env env;
	struct vm_view c;
	size_t page = (size_t)ctx->page_size;
	__u64 off;

	fp_setup(ctx, &env);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.att.off.pins_size, 0);
	/* The offset where a fast-pins file finds its region. */
	off = env.fc.v.att.off.pins_offset;
	MMAP_REFUSED(&c, c.fd, page, PROT_READ | PROT_WRITE, MAP_SHARED, off,
		     "read-write at pins_offset by a client without FAST_PINS");
	MMAP_REFUSED(&c, c.fd, page, PROT_READ, MAP_SHARED, off,
		     "read-only at pins_offset by a client without FAST_PINS");
	MMAP_REFUSED(&env.a, env.a.fd, page, PROT_READ | PROT_WRITE, MAP_SHARED, off,
		     "at pins_offset by the agent");
	vm_detach(&c);
	fp_teardown(ctx, &env);
}

static void bad_input_mmap_pins_inside(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	struct moecache_info info;
	struct fp_client fc;
	size_t page = (size_t)ctx->page_size;
	__u64 off;

	/* Enough slots for a pins region of two pages, so there is an inside. */
	g.n_slots = (__u32)(2 * page / sizeof(__u32));
	vm_get_info(&info);
	if (info.max_slots < g.n_slots)
		vm_skip("max_slots %u < %u: no two-page pins region", info.max_slots, g.n_slots);
	vm_pool_create(ctx->pool, &g);
	fp_attach(&fc, ctx->pool);
	VM_EQ(fc.pins_len, 2 * page);
	off = fc.v.att.off.pins_offset;
	MMAP_REFUSED(&fc.v, fc.v.fd, page, PROT_READ | PROT_WRITE, MAP_SHARED, off + page,
		     "of the pins region's second page");
	MMAP_REFUSED(&fc.v, fc.v.fd, page, PROT_READ, MAP_SHARED, off + page,
		     "read-only of the pins region's second page");
	MMAP_REFUSED(&fc.v, fc.v.fd, page, PROT_READ, MAP_SHARED, off + 2 * page,
		     "just past the pins region");
	fp_detach(&fc);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_fast_pins_garbage(struct vm_ctx *ctx)
{
	struct fp_env env;
	struct vm_view c;
	struct moecache_access acc = {A_LAYER, A_EXPERT};
	struct moecache_acquire acq;
	__u32 e = A_EXPERT, slot;
	const __u32 free_slot = 7;

	fp_setup(ctx, &env);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(vm_load32(&env.a.owner[free_slot]), MOECACHE_NONE);
	/* Not the protocol: a client scribbling on its own region. */
	__atomic_store_n(&env.fc.pins[A_SLOT], 0xffffffffu, __ATOMIC_SEQ_CST);
	__atomic_store_n(&env.fc.pins[free_slot], 0xffffffffu, __ATOMIC_SEQ_CST);
	FP_EVICT_BUSY(&env.a, A_SLOT);
	/* Every other slot and call works as before. */
	fp_evict_ok(&env.a, B_SLOT, B_LAYER, B_EXPERT);
	vm_fill(&env.a, free_slot, 3, 1);
	vm_acquire(&c, A_LAYER, &e, 1, &slot, 0, &acq);
	VM_EQ(slot, A_SLOT);
	VM_EQ(acq.n_hits, 1);
	vm_release(&c, &slot, 1);
	VM_OK(fp_report(env.fc.v.fd, &acc, 1, 0));
	VM_OK(fp_report(c.fd, &acc, 1, 0));
	vm_check_map_consistent(&env.a);
	/* The garbage goes with its file. */
	fp_detach(&env.fc);
	vm_evict(&env.a, A_SLOT, MOECACHE_NONE, MOECACHE_NONE, NULL);
	vm_evict(&env.a, free_slot, MOECACHE_NONE, MOECACHE_NONE, NULL);
	vm_detach(&c);
	vm_detach(&env.a);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_report_count_zero(struct vm_ctx *ctx)
{
	struct rp_env env;

	rp_setup(ctx, &env);
	RP_REFUSED(&env.c, env.c.fd, EINVAL, env.good, 0, 0);
	RP_REFUSED(&env.c, env.c.fd, EINVAL, NULL, 0, 0);
	rp_teardown(ctx, &env);
}

static void bad_input_report_too_many(struct vm_ctx *ctx)
{
	struct rp_env env;
	struct moecache_info info;
	struct moecache_stats before, after;
	struct moecache_access *acc;
	__u32 i;

	rp_setup(ctx, &env);
	vm_get_info(&info);
	/* Readable all along, so that only the count is wrong. */
	acc = calloc((size_t)info.max_batch + 1, sizeof(*acc));
	VM_ASSERT(acc);
	for (i = 0; i <= info.max_batch; i++)
		acc[i] = env.good[i % 2];
	RP_REFUSED(&env.c, env.c.fd, E2BIG, acc, info.max_batch + 1, 0);
	RP_REFUSED(&env.c, env.c.fd, E2BIG, acc, 0xffffffffu, 0);
	/* The limit itself is allowed. */
	vm_stats(&env.c, MOECACHE_NONE, &before);
	VM_OK(fp_report(env.c.fd, acc, info.max_batch, 0));
	vm_stats(&env.c, MOECACHE_NONE, &after);
	VM_EQ(after.hits, before.hits + info.max_batch);
	free(acc);
	rp_teardown(ctx, &env);
}

static void bad_input_report_flags(struct vm_ctx *ctx)
{
	struct rp_env env;
	const __u32 flags[] = {1, 2, 1u << 31, ~0u};
	size_t i;

	rp_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(flags); i++)
		RP_REFUSED(&env.c, env.c.fd, EINVAL, env.good, 2, flags[i]);
	rp_teardown(ctx, &env);
}

static void bad_input_report_bad_layer(struct vm_ctx *ctx)
{
	struct rp_env env;
	const __u32 layers[] = {vm_geom_default.n_layers, MOECACHE_NONE};
	struct moecache_access acc[3];
	size_t i, at;

	rp_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(layers); i++) {
		/* First, in the middle and last: all or nothing. */
		for (at = 0; at < 3; at++) {
			acc[0] = env.good[0];
			acc[1] = env.good[1];
			acc[2] = env.good[0];
			acc[at] = (struct moecache_access){.layer = layers[i], .expert = A_EXPERT};
			RP_REFUSED(&env.c, env.c.fd, EINVAL, acc, 3, 0);
		}
	}
	VM_OK(fp_report(env.c.fd, env.good, 2, 0));
	rp_teardown(ctx, &env);
}

static void bad_input_report_bad_expert(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	struct rp_env env;
	struct moecache_access acc[3];
	__u32 experts[4];
	size_t i;

	/* A local range with room below and above it. */
	g.expert_begin = 4;
	g.expert_end = 12;
	experts[0] = g.expert_begin - 1;
	experts[1] = g.expert_end;
	experts[2] = g.n_experts;
	experts[3] = MOECACHE_NONE;
	rp_setup_geom(ctx, &env, &g);
	for (i = 0; i < ARRAY_SIZE(experts); i++) {
		acc[0] = env.good[0];
		acc[1] = (struct moecache_access){.layer = A_LAYER, .expert = experts[i]};
		acc[2] = env.good[1];
		RP_REFUSED(&env.c, env.c.fd, EINVAL, acc, 3, 0);
	}
	/* The range's own ends are good. */
	acc[0] = (struct moecache_access){.layer = 0, .expert = g.expert_begin};
	acc[1] = (struct moecache_access){.layer = 0, .expert = g.expert_end - 1};
	VM_OK(fp_report(env.c.fd, acc, 2, 0));
	rp_teardown(ctx, &env);
}

static void bad_input_report_efault(struct vm_ctx *ctx)
{
	struct rp_env env;
	struct moecache_access *edge;
	size_t page = (size_t)ctx->page_size;
	void *gone = noaccess_page();
	unsigned char *two;

	rp_setup(ctx, &env);
	RP_REFUSED(&env.c, env.c.fd, EFAULT, NULL, 1, 0);
	RP_REFUSED(&env.c, env.c.fd, EFAULT, gone, 1, 0);
	/* The struct itself. */
	VM_REFUSED(&env.c, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_REPORT, NULL));
	VM_REFUSED(&env.c, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_REPORT, gone));
	/* A list whose first entry reads and whose second faults: all or nothing. */
	two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VM_ASSERT(two != MAP_FAILED);
	VM_OK(mprotect(two + page, page, PROT_NONE));
	edge = (struct moecache_access *)(two + page - sizeof(*edge));
	*edge = env.good[0];
	RP_REFUSED(&env.c, env.c.fd, EFAULT, edge, 2, 0);
	/* The readable entry alone is accepted. */
	VM_OK(fp_report(env.c.fd, edge, 1, 0));
	munmap(two, 2 * page);
	rp_teardown(ctx, &env);
}

static void bad_input_report_unattached(struct vm_ctx *ctx)
{
	struct rp_env env;
	int fd = vm_open_dev();

	rp_setup(ctx, &env);
	RP_REFUSED(&env.c, fd, ENOTCONN, env.good, 2, 0);
	close(fd);
	rp_teardown(ctx, &env);
}

/* ---- permission_ ------------------------------------------------------ */

static void permission_report_agent(struct vm_ctx *ctx)
{
	struct rp_env env;
	struct vm_view l;

	rp_setup(ctx, &env);
	vm_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	RP_REFUSED(&env.c, env.a.fd, EPERM, env.good, 2, 0);
	RP_REFUSED(&env.c, l.fd, EPERM, env.good, 2, 0);
	vm_detach(&l);
	rp_teardown(ctx, &env);
}

/* ---- concurrency_ ----------------------------------------------------- */

/* Each 8-byte word of a host record names its expert and its place. */
static void tag_record(unsigned char *rec, size_t len, __u32 idx)
{
	size_t w;

	for (w = 0; w < len / sizeof(__u64); w++) {
		__u64 tag = 0x6d6f656300000000ull | ((__u64)idx << 20) | w;

		memcpy(rec + w * sizeof(tag), &tag, sizeof(tag));
	}
}

struct race {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	__u32 done;
	__u64 pinned;
	__u64 missed;
};

/* While its pin holds, the bank slot has A's bytes: checked when pinned and again later. */
static void race_check(const struct fp_client *fc, const unsigned char *slot_bytes,
		       const unsigned char *want, __u32 slot, __u32 idx, int round)
{
	size_t len = fc->v.att.expert_bytes, i;

	VM_ASSERT_MSG(vm_load32(&fc->v.owner[slot]) == idx,
		      "fast-pinned slot %u: owner 0x%x, expected %u (check %d)", slot,
		      vm_load32(&fc->v.owner[slot]), idx, round);
	if (memcmp(slot_bytes, want, len) == 0)
		return;
	for (i = 0; i < len && slot_bytes[i] == want[i]; i++)
		;
	VM_FAIL("fast-pinned slot %u changed under the pin: byte %zu is 0x%02x, expected 0x%02x "
		"(check %d)",
		slot, i, slot_bytes[i], want[i], round);
}

static void race_client_main(void *arg)
{
	struct race *r = arg;
	struct moecache_bank bank;
	struct fp_client fc;
	const unsigned char *bytes, *want;
	__u32 idx;
	uint64_t end;

	fp_attach(&fc, r->pool);
	vm_view_map_host(&fc.v, PROT_READ);
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(fc.v.fd, MOECACHE_IOC_BANK_GET, &bank));
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ, MAP_SHARED, bank.fd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	idx = vm_idx(&fc.v, A_LAYER, A_EXPERT);
	want = vm_host_record(&fc.v, idx);
	vm_gate_pass(&r->ready);
	end = vm_now_ms() + RACE_MS;
	while (vm_now_ms() < end) {
		__u32 s = fp_pin(&fc, idx);
		int k;

		if (s == MOECACHE_NONE) {
			r->missed++;
			sched_yield();
			continue;
		}
		/* Hold it a while: an EVICT that ignored it would have time to refill. */
		for (k = 0; k < 3; k++) {
			race_check(&fc, bytes + (size_t)s * bank.slot_stride, want, s, idx, k);
			sched_yield();
		}
		race_check(&fc, bytes + (size_t)s * bank.slot_stride, want, s, idx, k);
		fp_unpin(&fc, s);
		r->pinned++;
		/*
		 * On one CPU each side runs only when the other yields or is
		 * preempted, and where a tick preempts depends on the
		 * scheduler: from 6.6 on (EEVDF) it rarely fell between unpin
		 * and pin, and the agent never evicted; the agent, likewise,
		 * yields once A is back. Both make progress on any kernel, and
		 * the ticks still interleave them anywhere.
		 */
		sched_yield();
	}
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	munmap((void *)bytes, bank.bank_bytes);
	close(bank.fd);
	fp_detach(&fc);
}

/* The agent's refill: poison first, so that a pin it wrongly ignored sees a change. */
static void race_refill(const struct vm_view *a, unsigned char *bank, __u64 stride, __u32 layer,
			__u32 expert)
{
	unsigned char *slot = bank + (size_t)A_SLOT * stride;

	memset(slot, 0xee, a->att.expert_bytes);
	memcpy(slot, vm_host_record(a, vm_idx(a, layer, expert)), a->att.expert_bytes);
	vm_commit1(a, A_SLOT, layer, expert, 0);
}

static void concurrency_fast_pin_vs_evict(struct vm_ctx *ctx)
{
	struct race *r = vm_shared(sizeof(*r));
	struct moecache_bank bank;
	struct moecache_evict ev;
	struct vm_view a;
	unsigned char *bytes;
	__u64 evictions = 0, busy = 0, transient = 0, spins = 0;
	uint64_t deadline;
	__u32 idx;
	int memfd, ret;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	for (idx = 0; idx < a.n_idx; idx++)
		tag_record(vm_host_record(&a, idx), a.att.expert_bytes, idx);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	vm_evict(&a, A_SLOT, A_LAYER, A_EXPERT, NULL);
	race_refill(&a, bytes, bank.slot_stride, A_LAYER, A_EXPERT);

	snprintf(r->pool, sizeof(r->pool), "%s", ctx->pool);
	vm_gate_open(&r->ready);
	pid = vm_spawn(race_client_main, r);
	vm_gate_wait(&r->ready, 10000, "the client to attach");
	deadline = vm_now_ms() + RACE_MS + 10000;
	while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
		if (++spins % 64 == 0 && !vm_running(pid))
			break;
		if (vm_now_ms() > deadline)
			VM_FAIL("the client did not finish its %d ms of pinning", RACE_MS);
		ret = fp_try_evict(&a, A_SLOT, B_LAYER, B_EXPERT, &ev);
		if (ret == -EBUSY) {
			busy++;
			sched_yield();
			continue;
		}
		if (ret)
			VM_FAIL("EVICT of slot %u from A: %s", A_SLOT, vm_errname(-ret));
		VM_EQ(ev.old_layer, A_LAYER);
		VM_EQ(ev.old_expert, A_EXPERT);
		race_refill(&a, bytes, bank.slot_stride, B_LAYER, B_EXPERT);
		evictions++;
		/*
		 * The client never keeps a pin on B, but one that read A's slot
		 * before the eviction stores its pin, sees B and takes it back:
		 * for that moment the slot is refused. It must not last.
		 */
		while ((ret = fp_try_evict(&a, A_SLOT, A_LAYER, A_EXPERT, &ev)) == -EBUSY) {
			if (vm_now_ms() > deadline)
				VM_FAIL("slot %u stayed busy while it held B, which nobody pins",
					A_SLOT);
			transient++;
			sched_yield();
		}
		if (ret)
			VM_FAIL("EVICT of slot %u from B: %s", A_SLOT, vm_errname(-ret));
		VM_EQ(ev.old_layer, B_LAYER);
		VM_EQ(ev.old_expert, B_EXPERT);
		race_refill(&a, bytes, bank.slot_stride, A_LAYER, A_EXPERT);
		/* With A back, let the client pin it (see race_client_main). */
		sched_yield();
	}
	vm_reap_ok(pid, 10000, "the fast-pinning client");
	fprintf(stderr, "pinned %llu, missed %llu, evictions %llu, busy %llu, transient %llu\n",
		(unsigned long long)r->pinned, (unsigned long long)r->missed,
		(unsigned long long)evictions, (unsigned long long)busy,
		(unsigned long long)transient);
	/* Both sides made progress, or the race was not run. */
	VM_ASSERT_MSG(r->pinned > 0, "the client never held a fast pin");
	VM_ASSERT_MSG(evictions > 0, "the agent never evicted A");
	vm_check_map_consistent(&a);
	VM_EQ(vm_load32(&a.hdr->seq) % 2, 0);
	munmap(bytes, bank.bank_bytes);
	close(memfd);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test fastpins_tests[] = {
    VM_TEST(basic_fast_pins_region_mapped,
	    "ATTACH with FAST_PINS gives a zeroed read-write pins region of n_slots words"),
    VM_TEST(basic_fast_pin_blocks_evict,
	    "EVICT of a fast-pinned slot is EBUSY and keeps the mapping; once unpinned it works"),
    VM_TEST(basic_fast_pin_blocks_bank_set,
	    "BANK_SET while a slot is fast-pinned is EBUSY and keeps the bank and the residency"),
    VM_TEST(basic_fast_pins_own_region,
	    "each fast-pins file has its own region, and a pin in any of them holds the slot"),
    VM_TEST(basic_report_counts_hits,
	    "REPORT counts accesses and hits (pool and layer), advances the clock, stamps slots"),
    VM_TEST(basic_report_not_resident_counts_access,
	    "REPORT of an expert no longer resident counts the access and the hit, stamps nothing"),
    VM_TEST(lifetime_fast_pins_go_with_fd,
	    "a fast-pinning client killed with SIGKILL leaves no pin: EVICT then works"),
    VM_TEST(lifetime_fast_pins_close_fd,
	    "fast pins go when the file goes, whether it is unmapped before or after close"),
    VM_TEST(bad_input_attach_fast_pins_agent,
	    "ATTACH as the agent with FAST_PINS is EINVAL and leaves the file unbound"),
    VM_TEST(bad_input_attach_fast_pins_loader,
	    "ATTACH as a loader with FAST_PINS is EINVAL and leaves the file unbound"),
    VM_TEST(bad_input_attach_unknown_flag,
	    "ATTACH with an unknown flag bit is EINVAL and leaves the file unbound"),
    VM_TEST(bad_input_mmap_pins_private, "MAP_PRIVATE of the pins region is EINVAL"),
    VM_TEST(bad_input_mmap_pins_rdonly_file,
	    "a read-write mapping of the pins region of an O_RDONLY file is EACCES"),
    VM_TEST(bad_input_mmap_pins_too_big, "mmap of more than pins_size is EINVAL"),
    VM_TEST(bad_input_mmap_pins_without_flag,
	    "mmap at pins_offset by a file attached without FAST_PINS is EINVAL"),
    VM_TEST(bad_input_mmap_pins_inside,
	    "mmap at an offset inside the pins region other than its start is EINVAL"),
    VM_TEST(bad_input_fast_pins_garbage,
	    "0xffffffff in a pins region blocks only that slot's eviction, nothing else"),
    VM_TEST(bad_input_report_count_zero, "REPORT of count 0 is EINVAL and counts nothing"),
    VM_TEST(bad_input_report_too_many, "REPORT of more than max_batch entries is E2BIG"),
    VM_TEST(bad_input_report_flags, "REPORT with flags set is EINVAL and counts nothing"),
    VM_TEST(bad_input_report_bad_layer,
	    "REPORT with one entry's layer out of range is EINVAL and counts none of them"),
    VM_TEST(bad_input_report_bad_expert,
	    "REPORT with one expert outside the local range is EINVAL and counts none of them"),
    VM_TEST(bad_input_report_efault,
	    "REPORT from an unreadable struct or list, even partly, is EFAULT and counts nothing"),
    VM_TEST(bad_input_report_unattached, "REPORT on an unattached file is ENOTCONN"),
    VM_TEST(permission_report_agent, "REPORT by the agent or a loader is EPERM"),
    VM_TEST_TIMEOUT(concurrency_fast_pin_vs_evict,
		    "a fast-pinning client never sees its slot's bytes change while an agent "
		    "evicts and refills it",
		    20),
};

const struct vm_suite vm_fastpins_suite = {fastpins_tests, ARRAY_SIZE(fastpins_tests)};
