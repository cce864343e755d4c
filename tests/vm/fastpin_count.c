// SPDX-License-Identifier: GPL-2.0
/*
 * Who the driver asks before it takes a slot back (kmod/map.c,
 * slot_fast_pinned()): only the files that may hold a fast pin on it, those
 * that have had the page of their pins region that holds the slot's word
 * mapped by a fault. These tests pin through fresh files, on several pages
 * of the region, across zaps and remaps, and time EVICT with many idle
 * fast-pins files attached against a pool with none.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "mc_fastpin.h"

/* Slots of one page of a pins region (4 KiB pages of __u32). */
#define FC_PER_PAGE 1024u

/* A client attached with FAST_PINS; its region mapped, nothing touched. */
struct fc_client {
	struct vm_view v;
	__u32 *pins;
	size_t pins_len;
};

static void fc_attach(struct fc_client *fc, const char *pool)
{
	int fd = vm_open_dev();
	int ret = vm_try_attach_fd_flags(&fc->v, fd, pool, MOECACHE_ROLE_CLIENT,
					 MOECACHE_ATTACH_FAST_PINS);
	void *p;

	if (ret)
		VM_FAIL("ATTACH %s with FAST_PINS: %s", pool, vm_errname(-ret));
	fc->pins_len = fc->v.att.off.pins_size;
	p = mmap(NULL, fc->pins_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)fc->v.att.off.pins_offset);
	if (p == MAP_FAILED)
		VM_FAIL("mmap of the pins region: %s", vm_errname(errno));
	fc->pins = p;
}

static void fc_detach(struct fc_client *fc)
{
	if (fc->pins)
		munmap(fc->pins, fc->pins_len);
	fc->pins = NULL;
	vm_detach(&fc->v);
}

/* libmoecache's fast pin (lib/protocol/mc_fastpin.h): the slot pinned for idx, or NONE. */
static __u32 fc_pin(struct fc_client *fc, __u32 idx)
{
	__u32 s = vm_load32(&fc->v.map[idx]);

	/* The library takes an entry past n_slots for a miss; the driver must never publish one. */
	VM_ASSERT_MSG(s == MOECACHE_NONE || s < fc->v.att.n_slots, "map[%u] = %u is out of range",
		      idx, s);
	return mc_fast_pin_one(fc->pins, fc->v.map, fc->v.att.n_slots, idx);
}

static void fc_unpin(struct fc_client *fc, __u32 slot)
{
	mc_fast_pin_put(fc->pins, slot);
}

/* Pins (layer, expert), which must be resident in slot. */
static void fc_pin_at(struct fc_client *fc, __u32 layer, __u32 expert, __u32 slot)
{
	VM_EQ(fc_pin(fc, vm_idx(&fc->v, layer, expert)), slot);
}

static int fc_try_evict(const struct vm_view *a, __u32 slot, __u32 layer, __u32 expert)
{
	struct moecache_evict ev = {.slot = slot, .layer = layer, .expert = expert};

	return ioctl(a->fd, MOECACHE_IOC_EVICT, &ev) < 0 ? -errno : 0;
}

/* The table row being run, named in failures ("" outside tables). */
static const char *fc_case = "";

/* EVICT of slot only to free it is EBUSY, and the slot keeps its expert. */
static void fc_busy_at(const char *file, int line, const struct vm_view *a, __u32 slot)
{
	__u32 own = vm_load32(&a->owner[slot]);
	int ret = fc_try_evict(a, slot, MOECACHE_NONE, MOECACHE_NONE);

	if (ret != -EBUSY)
		vm_fail_at(file, line, "%sEVICT of fast-pinned slot %u: expected EBUSY, got %s",
			   fc_case, slot, ret ? vm_errname(-ret) : "success");
	if (vm_load32(&a->owner[slot]) != own || vm_load32(&a->map[own]) != slot)
		vm_fail_at(file, line, "%sa refused EVICT changed slot %u", fc_case, slot);
}

#define FC_BUSY(a, slot) fc_busy_at(__FILE__, __LINE__, (a), (slot))

/* EVICT of slot to free it succeeds and unmaps its expert. */
static void fc_evicts_at(const char *file, int line, const struct vm_view *a, __u32 slot)
{
	__u32 own = vm_load32(&a->owner[slot]);
	int ret = fc_try_evict(a, slot, MOECACHE_NONE, MOECACHE_NONE);

	if (ret)
		vm_fail_at(file, line, "%sEVICT of unpinned slot %u: %s", fc_case, slot,
			   vm_errname(-ret));
	if (vm_load32(&a->owner[slot]) != MOECACHE_NONE || vm_load32(&a->map[own]) != MOECACHE_NONE)
		vm_fail_at(file, line, "%sEVICT left slot %u mapped", fc_case, slot);
}

#define FC_EVICTS(a, slot) fc_evicts_at(__FILE__, __LINE__, (a), (slot))

/* A geometry of 3 pages of pins: 4 layers x 16 experts, 2100 slots. */
static const struct vm_geom fc_geom_pages = {
    .n_layers = 4,
    .n_experts = 16,
    .expert_begin = 0,
    .expert_end = 16,
    .n_slots = 2 * FC_PER_PAGE + 52,
    .expert_bytes = 4096,
    .uid = 0,
    .gid = 0,
    .mode = 0600,
};

/* ---- basic ------------------------------------------------------------ */

/* How a pinner lets go of its pin. */
enum fc_let_go { FC_UNPIN, FC_DETACH, FC_CLOSE_THEN_UNMAP };

static const struct {
	enum fc_let_go how;
	const char *what;
} fc_let_go_cases[] = {
    {FC_UNPIN, "pin stored back to 0: "},
    {FC_DETACH, "regions unmapped and file closed: "},
    {FC_CLOSE_THEN_UNMAP, "fd closed (the mappings keep the file), then unmapped: "},
};

static void basic_fast_pin_count_let_go(struct vm_ctx *ctx)
{
	size_t i;

	vm_pool_create(ctx->pool, &vm_geom_default);
	for (i = 0; i < ARRAY_SIZE(fc_let_go_cases); i++) {
		struct fc_client fc;
		struct vm_view a;

		fc_case = fc_let_go_cases[i].what;
		vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
		fc_attach(&fc, ctx->pool);
		vm_fill(&a, 3, 1, 2);
		fc_pin_at(&fc, 1, 2, 3);
		FC_BUSY(&a, 3);
		switch (fc_let_go_cases[i].how) {
		case FC_UNPIN:
			fc_unpin(&fc, 3);
			FC_EVICTS(&a, 3);
			fc_detach(&fc);
			break;
		case FC_DETACH:
			fc_detach(&fc);
			FC_EVICTS(&a, 3);
			break;
		case FC_CLOSE_THEN_UNMAP:
			VM_OK(close(fc.v.fd));
			fc.v.fd = -1;
			/* The file lives on in its mappings, and so does its pin. */
			FC_BUSY(&a, 3);
			fc_detach(&fc);
			FC_EVICTS(&a, 3);
			break;
		}
		vm_detach(&a);
	}
	vm_pool_destroy(ctx->pool);
}

static void basic_fast_pin_count_pages(struct vm_ctx *ctx)
{
	const __u32 slots[3] = {5, FC_PER_PAGE + 7, 2 * FC_PER_PAGE + 51};
	struct fc_client fc[3];
	struct vm_view a;
	size_t i, j;

	vm_pool_create(ctx->pool, &fc_geom_pages);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	/* One file pins on each page; a fourth has a pin in no page. */
	for (i = 0; i < 3; i++) {
		fc_attach(&fc[i], ctx->pool);
		vm_fill(&a, slots[i], (__u32)i, (__u32)i);
		fc_pin_at(&fc[i], (__u32)i, (__u32)i, slots[i]);
	}
	VM_ASSERT(fc[0].pins_len >= 3 * 4096);
	for (i = 0; i < 3; i++)
		FC_BUSY(&a, slots[i]);
	/* Let go one page at a time: only that page's slot becomes free. */
	for (i = 0; i < 3; i++) {
		fc_unpin(&fc[i], slots[i]);
		FC_EVICTS(&a, slots[i]);
		for (j = i + 1; j < 3; j++)
			FC_BUSY(&a, slots[j]);
	}
	for (i = 0; i < 3; i++)
		fc_detach(&fc[i]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_fast_pin_count_zapped(struct vm_ctx *ctx)
{
	struct fc_client fc;
	struct vm_view a;
	__u32 *again;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	fc_attach(&fc, ctx->pool);
	vm_fill(&a, 6, 2, 9);
	fc_pin_at(&fc, 2, 9, 6);
	/* The page leaves the process; the pin stays in the file's region. */
	VM_OK(madvise(fc.pins, fc.pins_len, MADV_DONTNEED));
	FC_BUSY(&a, 6);
	/* And a new mapping of the same file sees it and holds the slot too. */
	VM_OK(munmap(fc.pins, fc.pins_len));
	again = mmap(NULL, fc.pins_len, PROT_READ | PROT_WRITE, MAP_SHARED, fc.v.fd,
		     (off_t)fc.v.att.off.pins_offset);
	VM_ASSERT(again != MAP_FAILED);
	fc.pins = again;
	VM_EQ(__atomic_load_n(&fc.pins[6], __ATOMIC_RELAXED), 1);
	FC_BUSY(&a, 6);
	fc_unpin(&fc, 6);
	FC_EVICTS(&a, 6);
	/* A pin stored through the new mapping holds as well. */
	vm_fill(&a, 6, 2, 9);
	fc_pin_at(&fc, 2, 9, 6);
	FC_BUSY(&a, 6);
	fc_detach(&fc);
	FC_EVICTS(&a, 6);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- perf --------------------------------------------------------------- */

/* Idle fast-pins files beside the busy pool's agent and pinner. */
#define FC_IDLE_FILES 1000
/* EVICT + COMMIT cycles per measurement, and measurements per pool. */
#define FC_CYCLES 200
#define FC_ROUNDS 7
/* The bound on the busy pool's EVICT time over the quiet one's. */
#define FC_RATIO_MAX 1.5

struct fc_perf_pool {
	char name[MOECACHE_NAME_LEN];
	struct vm_view a;
	struct fc_client pinner;
	__u32 expert; /* in slot 0 */
	uint64_t best;
};

/* Nanoseconds spent in FC_CYCLES EVICTs of a resident slot 0 (the COMMITs not counted). */
static uint64_t fc_time_evicts(void *pool)
{
	struct fc_perf_pool *p = pool;
	uint64_t spent = 0, t0;
	__u32 k, next;
	int ret;

	for (k = 0; k < FC_CYCLES; k++) {
		next = p->expert == 0 ? 1 : 0;
		t0 = vm_now_ns();
		ret = fc_try_evict(&p->a, 0, 0, next);
		spent += vm_now_ns() - t0;
		if (ret)
			VM_FAIL("EVICT of slot 0 for (0, %u): %s", next, vm_errname(-ret));
		vm_commit1(&p->a, 0, 0, next, 0);
		p->expert = next;
	}
	return spent;
}

static void fc_perf_pool_setup(struct fc_perf_pool *p)
{
	vm_pool_create(p->name, &vm_geom_default);
	vm_attach(&p->a, p->name, MOECACHE_ROLE_AGENT);
	/* A pinner on another slot of the same page: EVICT must look. */
	fc_attach(&p->pinner, p->name);
	vm_fill(&p->a, 7, 3, 15);
	fc_pin_at(&p->pinner, 3, 15, 7);
	vm_fill(&p->a, 0, 0, 0);
	p->expert = 0;
}

static void perf_fast_pin_count_idle_files(struct vm_ctx *ctx)
{
	unsigned int i, n_idle = vm_idle_files(FC_IDLE_FILES);
	struct fc_perf_pool busy, quiet;
	struct fc_client *idle;
	double ratio;

	snprintf(busy.name, sizeof(busy.name), "%s", ctx->pool);
	vm_pool_name(ctx, 1, quiet.name);
	fc_perf_pool_setup(&busy);
	fc_perf_pool_setup(&quiet);
	idle = calloc(n_idle, sizeof(*idle));
	VM_ASSERT(idle);
	/* Attached with their regions mapped, and never pinning anything. */
	for (i = 0; i < n_idle; i++)
		fc_attach(&idle[i], busy.name);
	vm_best_side_by_side(FC_ROUNDS, fc_time_evicts, &busy, &quiet, &busy.best, &quiet.best);
	ratio = (double)busy.best / (double)quiet.best;
	fprintf(stderr,
		"EVICT with %u idle fast-pins files attached / with none: %.2f "
		"(%.1f us / %.1f us per EVICT, best of %d x %d)\n",
		n_idle, ratio, busy.best / 1e3 / FC_CYCLES, quiet.best / 1e3 / FC_CYCLES,
		FC_ROUNDS, FC_CYCLES);
	VM_ASSERT_MSG(ratio < FC_RATIO_MAX,
		      "EVICT costs %.2f times as much with %u idle fast-pins files attached", ratio,
		      n_idle);
	/* And the pinned slot is still refused in both. */
	FC_BUSY(&busy.a, 7);
	FC_BUSY(&quiet.a, 7);
	for (i = 0; i < n_idle; i++)
		fc_detach(&idle[i]);
	free(idle);
	fc_detach(&busy.pinner);
	fc_detach(&quiet.pinner);
	vm_detach(&busy.a);
	vm_detach(&quiet.a);
	vm_pool_destroy(busy.name);
	vm_pool_destroy(quiet.name);
}

/* ---- concurrency ------------------------------------------------------ */

#define FC_RACE_MS 2000

struct fc_race {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	int done;
	__u64 files;
	__u64 pinned;
	__u64 missed;
};

/*
 * Each try is a new file whose first store to its region faults the page
 * in, racing the agent's EVICT of the slot it read. A pin that held must
 * keep the slot's expert in place while it is held.
 */
static void fc_race_client_main(void *arg)
{
	struct fc_race *r = arg;
	uint64_t until;
	__u32 idx, s, k;
	bool first = true;

	until = vm_now_ms() + FC_RACE_MS;
	while (vm_now_ms() < until) {
		struct fc_client fc;

		fc_attach(&fc, r->pool);
		if (first) {
			vm_gate_pass(&r->ready);
			first = false;
		}
		idx = vm_idx(&fc.v, 1, 3);
		s = fc_pin(&fc, idx);
		if (s == MOECACHE_NONE) {
			r->missed++;
		} else {
			/*
			 * The slot keeps its expert. Its map[] entry may read
			 * NONE for an instant: an EVICT that finds the pin
			 * stores the entry back (docs/abi.md, "Fast pins"),
			 * which a second CPU can see; never another slot.
			 */
			for (k = 0; k < 4; k++) {
				__u32 own = vm_load32(&fc.v.owner[s]);
				__u32 m = vm_load32(&fc.v.map[idx]);

				if (own != idx || (m != s && m != MOECACHE_NONE))
					VM_FAIL("slot %u changed under a fast pin of a new file "
						"(owner 0x%x, map 0x%x)",
						s, own, m);
				sched_yield();
			}
			fc_unpin(&fc, s);
			r->pinned++;
		}
		fc_detach(&fc);
		r->files++;
		sched_yield();
	}
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static void concurrency_fast_pin_first_touch_vs_evict(struct vm_ctx *ctx)
{
	struct fc_race *r = vm_shared(sizeof(*r));
	__u64 evictions = 0, busy = 0;
	struct vm_view a;
	uint64_t deadline;
	__u32 expert = 3, next;
	int ret;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(&a, 2, 1, 3);
	snprintf(r->pool, sizeof(r->pool), "%s", ctx->pool);
	vm_gate_open(&r->ready);
	pid = vm_spawn(fc_race_client_main, r);
	vm_gate_wait(&r->ready, 10000, "the client to attach");
	deadline = vm_now_ms() + FC_RACE_MS + 10000;
	while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) && vm_running(pid)) {
		if (vm_now_ms() > deadline)
			VM_FAIL("the client did not finish its %d ms of pinning", FC_RACE_MS);
		/* (1, 3) and (1, 4) take turns in slot 2. */
		next = expert == 3 ? 4 : 3;
		ret = fc_try_evict(&a, 2, 1, next);
		if (ret == -EBUSY) {
			busy++;
			sched_yield();
			continue;
		}
		if (ret)
			VM_FAIL("EVICT of slot 2: %s", vm_errname(-ret));
		vm_commit1(&a, 2, 1, next, 0);
		expert = next;
		evictions++;
		sched_yield();
	}
	vm_reap_ok(pid, 10000, "the fast-pinning client");
	fprintf(stderr, "files %llu, pinned %llu, missed %llu, evictions %llu, busy %llu\n",
		(unsigned long long)r->files, (unsigned long long)r->pinned,
		(unsigned long long)r->missed, (unsigned long long)evictions,
		(unsigned long long)busy);
	VM_ASSERT_MSG(r->pinned > 0, "no new file ever held a fast pin");
	VM_ASSERT_MSG(evictions > 0, "the agent never evicted");
	vm_check_map_consistent(&a);
	/* Every file is gone: nothing holds the slot. */
	FC_EVICTS(&a, 2);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test fastpin_count_tests[] = {
    VM_TEST(basic_fast_pin_count_let_go,
	    "EVICT of a fast-pinned slot is EBUSY until the pinner unpins or its file goes "
	    "(table)"),
    VM_TEST(basic_fast_pin_count_pages,
	    "fast pins on three pages of the pins region each hold their slot, and only theirs"),
    VM_TEST(basic_fast_pin_count_zapped,
	    "a fast pin still holds after MADV_DONTNEED and a new mapping; one stored through "
	    "the new mapping holds too"),
    VM_TEST_TIMEOUT(perf_fast_pin_count_idle_files,
		    "EVICT with 1000 idle fast-pins files attached costs under 1.5 times EVICT "
		    "with none (side by side)",
		    120),
    VM_TEST_TIMEOUT(concurrency_fast_pin_first_touch_vs_evict,
		    "a new file's first fast pin, faulting its region in, holds against a "
		    "racing EVICT",
		    30),
};

const struct vm_suite vm_fastpin_count_suite = {fastpin_count_tests,
						ARRAY_SIZE(fastpin_count_tests)};
