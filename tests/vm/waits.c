// SPDX-License-Identifier: GPL-2.0
/*
 * What one tenant's waits, releases and idle files may cost the others
 * (docs/abi.md, "Security model"): a client with read permission on a pool
 * has a bounded number of sleeping WAITs, cannot make a pin count wrap by
 * releasing under a WAIT, and neither a herd of its WAITs, its idle files
 * nor a far pin makes COMMIT or REL_ALL cost more than a bound. Each test
 * names the hole it pins.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

/* ---- a WAIT's pins and another thread's RELEASE ------------------------ */

static int try_release(const struct vm_view *v, const __u32 *slots, __u32 count)
{
	struct moecache_release rel = {.count = count, .slots = (uintptr_t)slots};

	return ioctl(v->fd, MOECACHE_IOC_RELEASE, &rel);
}

/*
 * A WAIT on a client's file made by a child sharing that file (the same
 * open file description, as a second thread of the process would).
 */
struct wait_job {
	const struct vm_view *view;
	__u32 experts[2];
	__u32 timeout_ms;
	int ret;
	__u32 slots[2];
};

static void wait_job_signal(int sig)
{
	(void)sig;
}

static void wait_job_main(void *arg)
{
	struct wait_job *j = arg;
	struct sigaction sa;

	/* No SA_RESTART: the signal ends the WAIT with EINTR. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wait_job_signal;
	VM_OK(sigaction(SIGUSR1, &sa, NULL));
	j->ret = vm_try_acquire(j->view, 0, j->experts, 2, j->slots,
				MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING, j->timeout_ms, NULL);
}

/*
 * A pool whose agent made expert 1 of layer 0 resident in slot 0, and a
 * WAIT of c's file for experts 1 (resident) and 2 (missing) asleep: the
 * oldest waiter, so it keeps its pin on slot 0 while it sleeps.
 */
static pid_t wait_holding_slot0(struct vm_ctx *ctx, struct vm_view *a, struct vm_view *c,
				struct wait_job *j, __u32 timeout_ms)
{
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_fill(a, 0, 0, 1);
	vm_attach(c, ctx->pool, MOECACHE_ROLE_CLIENT);
	j->view = c;
	j->experts[0] = 1;
	j->experts[1] = 2;
	j->timeout_ms = timeout_ms;
	j->ret = 1;
	pid = vm_spawn(wait_job_main, j);
	vm_wait_sleeping(pid, 10000, "the WAIT to sleep");
	VM_WAIT_FOR(vm_load32(&c->pins[0]) == 1, 5000);
	return pid;
}

/*
 * Pins: a WAIT that failed undid the pins it took even after another
 * thread of the same file had RELEASEd them, so its undo took another
 * client's pin away and the agent could evict a slot that client read.
 */
static void concurrency_release_during_wait_keeps_other_pins(struct vm_ctx *ctx)
{
	struct wait_job *j = vm_shared(sizeof(*j));
	__u32 one = 1, slot0 = 0, got;
	struct moecache_evict ev;
	struct vm_view a, c, d;
	pid_t pid;

	pid = wait_holding_slot0(ctx, &a, &c, j, 0);
	/* Another thread of c's file drops the pin the WAIT holds. */
	vm_release(&c, &slot0, 1);
	VM_EQ(vm_load32(&c.pins[0]), 0);
	/* Another client pins the same slot. */
	vm_attach(&d, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_acquire(&d, 0, &one, 1, &got, 0, NULL);
	VM_EQ(got, 0);
	VM_EQ(vm_load32(&d.pins[0]), 1);
	/* The WAIT is interrupted and undoes what it still holds. */
	VM_OK(kill(pid, SIGUSR1));
	vm_reap_ok(pid, 10000, "the interrupted WAIT");
	VM_EQ(j->ret, -EINTR);
	/* d's pin stays: the slot cannot be taken from under it. */
	VM_EQ(vm_load32(&d.pins[0]), 1);
	memset(&ev, 0, sizeof(ev));
	ev.slot = 0;
	ev.layer = 0;
	ev.expert = 3;
	VM_ERR(ioctl(a.fd, MOECACHE_IOC_EVICT, &ev), EBUSY);
	/* c holds nothing on slot 0 any more. */
	VM_REFUSED(&c, EINVAL, try_release(&c, &slot0, 1));
	vm_release(&d, &slot0, 1);
	VM_EQ(vm_load32(&d.pins[0]), 0);
	vm_detach(&d);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: REL_ALL while a WAIT held a pin, then the WAIT timed out: its undo
 * wrapped the file's pin count (every later ACQUIRE was EOVERFLOW) and
 * the pool's count underflowed (a WARN any client could trigger).
 */
static void bad_input_rel_all_during_wait_no_underflow(struct vm_ctx *ctx)
{
	struct wait_job *j = vm_shared(sizeof(*j));
	struct moecache_release rel;
	struct moecache_stats st;
	__u32 one = 1, got;
	struct vm_view a, c;
	pid_t pid;

	pid = wait_holding_slot0(ctx, &a, &c, j, 1000);
	memset(&rel, 0, sizeof(rel));
	rel.flags = MOECACHE_REL_ALL;
	VM_OK(ioctl(c.fd, MOECACHE_IOC_RELEASE, &rel));
	VM_EQ(vm_load32(&c.pins[0]), 0);
	vm_reap_ok(pid, 10000, "the WAIT that times out");
	VM_EQ(j->ret, -ETIMEDOUT);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 0);
	VM_EQ(st.pinned_slots, 0);
	/* The file's count is whole: it pins and releases as before. */
	vm_acquire(&c, 0, &one, 1, &got, 0, NULL);
	VM_EQ(got, 0);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.pins, 1);
	vm_release(&c, &got, 1);
	VM_EQ(vm_load32(&c.pins[0]), 0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- perf: answering a request costs the same beside idle files ------- */

/* Idle client files beside the busy pool's agent and asker. */
#define RV_IDLE_FILES 1000
/* Miss + EVICT + COMMIT cycles per measurement, and measurements per pool. */
#define RV_CYCLES 200
#define RV_ROUNDS 15
/* The bound on the busy pool's COMMIT time over the quiet one's. */
#define RV_RATIO_MAX 1.5

/*
 * Pins: a COMMIT of an expert someone asked for walked every attached
 * file under the pool's spinlock, so idle clients slowed every answered
 * miss of the pool.
 */
static void perf_commit_asked_idle_files(struct vm_ctx *ctx)
{
	unsigned int i, n_idle = vm_idle_files(RV_IDLE_FILES);
	struct vm_commit_pool busy, quiet;
	struct vm_view *idle;
	double ratio;

	snprintf(busy.name, sizeof(busy.name), "%s", ctx->pool);
	vm_pool_name(ctx, 1, quiet.name);
	vm_commit_pool_setup(&busy, vm_geom_default.mode, RV_CYCLES);
	vm_commit_pool_setup(&quiet, vm_geom_default.mode, RV_CYCLES);
	idle = calloc(n_idle, sizeof(*idle));
	VM_ASSERT(idle);
	/* Attached before the asker's misses, and never asking anything. */
	for (i = 0; i < n_idle; i++)
		vm_attach(&idle[i], busy.name, MOECACHE_ROLE_CLIENT);
	vm_best_side_by_side(RV_ROUNDS, vm_commit_pool_time, &busy, &quiet, &busy.best,
			     &quiet.best);
	ratio = (double)busy.best / (double)quiet.best;
	fprintf(stderr,
		"COMMIT of an asked expert with %u idle client files attached / with none: %.2f "
		"(%.1f us / %.1f us per COMMIT, best of %d x %d)\n",
		n_idle, ratio, busy.best / 1e3 / RV_CYCLES, quiet.best / 1e3 / RV_CYCLES, RV_ROUNDS,
		RV_CYCLES);
	VM_ASSERT_MSG(ratio < RV_RATIO_MAX,
		      "COMMIT costs %.2f times as much with %u idle client files attached", ratio,
		      n_idle);
	for (i = 0; i < n_idle; i++)
		vm_detach(&idle[i]);
	free(idle);
	vm_commit_pool_teardown(&busy);
	vm_commit_pool_teardown(&quiet);
}

/* ---- a herd of sleeping WAITs ------------------------------------------ */

#define HERD_MAX 256
/* The expert every WAIT of the herd asks for: never filled. */
#define HERD_LAYER 1
#define HERD_EXPERT 0

/*
 * One tenant (uid NOBODY, one client file) and up to HERD_MAX processes
 * sharing that file, each asleep in an ACQUIRE|WAIT with no time limit,
 * as threads of one process would be.
 */
struct herd_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	unsigned int want;
	unsigned int index; /* of the waiter being forked */
	int ret[HERD_MAX];  /* 1 while its WAIT has not returned */
	int started[HERD_MAX];
	unsigned int asleep; /* WAITs asleep once ready was passed */
	unsigned int again;  /* WAITs refused with EAGAIN */
	bool acq_rel;	     /* then an ACQUIRE_RELEASE|WAIT of slot 0's pin */
	int acq_rel_ret;
	__u32 acq_rel_pins; /* the file's pins on slot 0 after it */
	struct vm_view view;
	struct vm_gate ready;
	struct vm_gate release;
};

static void herd_wait_main(void *arg)
{
	struct herd_job *job = arg;
	unsigned int i = job->index;
	__u32 expert = HERD_EXPERT, slot;

	job->started[i] = 1;
	job->ret[i] = vm_try_acquire(&job->view, HERD_LAYER, &expert, 1, &slot,
				     MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING, 0, NULL);
}

/*
 * With every WAIT place taken: pins expert 1 of layer 0 (resident in slot
 * 0), then an ACQUIRE_RELEASE|WAIT that would drop that pin.
 */
static void herd_acquire_release(struct herd_job *job)
{
	struct moecache_acquire_release ar;
	__u32 one = 1, expert = HERD_EXPERT, slot, rel = 0;

	vm_acquire(&job->view, 0, &one, 1, &slot, 0, NULL);
	VM_EQ(slot, 0);
	memset(&ar, 0, sizeof(ar));
	ar.acquire.layer = HERD_LAYER;
	ar.acquire.count = 1;
	ar.acquire.experts = (uintptr_t)&expert;
	ar.acquire.slots = (uintptr_t)&slot;
	ar.acquire.flags = MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING;
	ar.release_slots = (uintptr_t)&rel;
	ar.release_count = 1;
	job->acq_rel_ret = ioctl(job->view.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar) < 0 ? -errno : 0;
	job->acq_rel_pins = vm_load32(&job->view.pins[0]);
}

/* As NOBODY: attaches one client file and forks want WAITs on it. */
static void herd_main(void *arg)
{
	struct herd_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	pid_t pid[HERD_MAX];
	unsigned int i;

	VM_EQ(vm_try_attach_fd(&job->view, fd, job->pool, MOECACHE_ROLE_CLIENT), 0);
	for (i = 0; i < job->want; i++) {
		job->ret[i] = 1;
		job->started[i] = 0;
		job->index = i;
		pid[i] = vm_spawn(herd_wait_main, job);
		/* Asleep in the WAIT, or refused. */
		VM_WAIT_FOR(job->ret[i] != 1 || (job->started[i] && vm_proc_state(pid[i]) == 'S'),
			    20000);
	}
	for (i = 0; i < job->want; i++) {
		job->asleep += job->ret[i] == 1;
		job->again += job->ret[i] == -EAGAIN;
	}
	if (job->acq_rel)
		herd_acquire_release(job);
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->release, 120000, "the test to let go");
	for (i = 0; i < job->want; i++) {
		if (job->ret[i] == 1)
			vm_kill(pid[i], "a sleeping WAIT");
		else
			vm_reap_ok(pid[i], 10000, "a refused WAIT");
	}
	vm_detach(&job->view);
}

static struct herd_job *herd_start_with(const char *pool, unsigned int want, bool acq_rel,
					pid_t *pid)
{
	struct herd_job *job = vm_shared(sizeof(*job));

	VM_ASSERT(want <= HERD_MAX);
	snprintf(job->pool, sizeof(job->pool), "%s", pool);
	vm_get_node(job->node, sizeof(job->node));
	job->want = want;
	job->acq_rel = acq_rel;
	vm_gate_open(&job->ready);
	vm_gate_open(&job->release);
	*pid = vm_spawn(herd_main, job);
	vm_gate_wait(&job->ready, 60000, "the herd to fall asleep");
	return job;
}

static struct herd_job *herd_start(const char *pool, unsigned int want, pid_t *pid)
{
	return herd_start_with(pool, want, false, pid);
}

static void herd_end(struct herd_job *job, pid_t pid)
{
	vm_gate_pass(&job->release);
	vm_reap_ok(pid, 60000, "the herd");
	vm_put_node(job->node);
}

/*
 * Pins: a tenant could put any number of ACQUIRE|WAITs to sleep on a pool
 * (threads sharing one file), and every COMMIT, ABORT and agent change
 * woke them all, in the agent's context and each under the pool's lock:
 * one client slowed every answered miss of every tenant.
 */
static void permission_user_waits_bound(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	unsigned long long old;
	struct moecache_stats st;
	struct herd_job *job;
	struct vm_view a, o;
	__u32 expert = HERD_EXPERT, slot;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&o, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 0, 1);
	old = vm_param_set("max_user_waits", 2);
	job = herd_start_with(ctx->pool, 4, true, &pid);
	VM_EQ(job->asleep, 2);
	VM_EQ(job->again, 2);
	/* ACQUIRE_RELEASE refused so leaves its release undone. */
	VM_EQ(job->acq_rel_ret, -EAGAIN);
	VM_EQ(job->acq_rel_pins, 1);
	/* A refused WAIT changed nothing: no miss, no access, no request. */
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.misses, 2);
	VM_EQ(st.queued, 1);
	VM_EQ(vm_load32(&a.access[vm_idx(&a, HERD_LAYER, HERD_EXPERT)]), 2);
	/* The pool's owner is not bound by it. */
	VM_EQ(vm_try_acquire(&o, HERD_LAYER, &expert, 1, &slot,
			     MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING, 50, NULL),
	      -ETIMEDOUT);
	herd_end(job, pid);
	/* The killed WAITs gave their places back. */
	job = herd_start(ctx->pool, 2, &pid);
	VM_EQ(job->asleep, 2);
	VM_EQ(job->again, 0);
	herd_end(job, pid);
	vm_param_set("max_user_waits", old);
	vm_detach(&o);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

#define HP_CYCLES 100
#define HP_ROUNDS 7
#define HP_WAITS 256
/* A COMMIT wakes none of them: it only looks at each under the lock. */
#define HP_RATIO_MAX 4.0

/*
 * Pins: the same herd, measured: a COMMIT on a pool where one tenant tried
 * to put HP_WAITS WAITs to sleep, against one on a pool without them.
 */
static void perf_commit_tenant_wait_herd(struct vm_ctx *ctx)
{
	struct vm_commit_pool busy, quiet;
	unsigned long long bound = 0;
	struct herd_job *job;
	double ratio;
	pid_t pid;

	snprintf(busy.name, sizeof(busy.name), "%s", ctx->pool);
	vm_pool_name(ctx, 1, quiet.name);
	vm_commit_pool_setup(&busy, 0644, HP_CYCLES);
	vm_commit_pool_setup(&quiet, 0644, HP_CYCLES);
	job = herd_start(busy.name, HP_WAITS, &pid);
	vm_best_side_by_side(HP_ROUNDS, vm_commit_pool_time, &busy, &quiet, &busy.best,
			     &quiet.best);
	ratio = (double)busy.best / (double)quiet.best;
	vm_param_read("max_user_waits", &bound);
	fprintf(stderr,
		"COMMIT with one tenant's WAITs asleep (%u of %u tried; max_user_waits %llu) / "
		"with none: %.2f (%.1f us / %.1f us per COMMIT, best of %d x %d)\n",
		job->asleep, HP_WAITS, bound, ratio, busy.best / 1e3 / HP_CYCLES,
		quiet.best / 1e3 / HP_CYCLES, HP_ROUNDS, HP_CYCLES);
	herd_end(job, pid);
	VM_ASSERT_MSG(vm_param_read("max_user_waits", &bound),
		      "no module parameter max_user_waits");
	/* The rest were refused at once. */
	VM_EQ(job->asleep, bound);
	VM_EQ(job->again, HP_WAITS - bound);
	/* 3090 with all 256 asleep and woken by each COMMIT; 87 with 16 woken. */
	VM_ASSERT_MSG(ratio < HP_RATIO_MAX, "COMMIT costs %.2f times as much with the herd", ratio);
	vm_commit_pool_teardown(&busy);
	vm_commit_pool_teardown(&quiet);
}

/* ---- dropping all of a file's pins ------------------------------------- */

#define RA_CYCLES 100
#define RA_ROUNDS 7
#define RA_BIG_SLOTS 65536
#define RA_SMALL_SLOTS 16
/* Left: a scan of the file's bitmap of pinned slots, 1/64 of the walk (266). */
#define RA_RATIO_MAX 10.0

/* A pool of n_slots whose last slot holds expert 0, and a client. */
struct rel_all_pool {
	char name[MOECACHE_NAME_LEN];
	__u32 n_slots;
	struct vm_view a;
	struct vm_view c;
	uint64_t best;
};

static void rel_all_setup(struct rel_all_pool *p)
{
	struct vm_geom g = vm_geom_default;

	g.n_layers = 1;
	g.n_slots = p->n_slots;
	vm_pool_create(p->name, &g);
	vm_attach(&p->a, p->name, MOECACHE_ROLE_AGENT);
	vm_attach(&p->c, p->name, MOECACHE_ROLE_CLIENT);
	vm_fill(&p->a, p->n_slots - 1, 0, 0);
}

/* Nanoseconds spent in RA_CYCLES REL_ALLs, each dropping one pin. */
static uint64_t rel_all_time(void *pool)
{
	struct rel_all_pool *p = pool;
	struct moecache_release rel = {.flags = MOECACHE_REL_ALL};
	uint64_t spent = 0, t0;
	__u32 k, expert = 0, slot;

	for (k = 0; k < RA_CYCLES; k++) {
		vm_acquire(&p->c, 0, &expert, 1, &slot, 0, NULL);
		VM_EQ(slot, p->n_slots - 1);
		t0 = vm_now_ns();
		VM_OK(ioctl(p->c.fd, MOECACHE_IOC_RELEASE, &rel));
		spent += vm_now_ns() - t0;
	}
	return spent;
}

/*
 * Pins: REL_ALL (and closing a client file) walked every slot of the pool
 * under its spinlock until the file's pins were found: a client holding
 * one pin on the last slot made each REL_ALL scan all of them, at will.
 */
static void perf_rel_all_far_pin(struct vm_ctx *ctx)
{
	struct rel_all_pool big = {.n_slots = RA_BIG_SLOTS}, small = {.n_slots = RA_SMALL_SLOTS};
	double ratio;

	snprintf(big.name, sizeof(big.name), "%s", ctx->pool);
	vm_pool_name(ctx, 1, small.name);
	rel_all_setup(&big);
	rel_all_setup(&small);
	vm_best_side_by_side(RA_ROUNDS, rel_all_time, &big, &small, &big.best, &small.best);
	ratio = (double)big.best / (double)small.best;
	fprintf(
	    stderr,
	    "REL_ALL of one pin on the last slot, %u slots / %u slots: %.2f (%.1f us / %.1f us, "
	    "best of %d x %d)\n",
	    RA_BIG_SLOTS, RA_SMALL_SLOTS, ratio, big.best / 1e3 / RA_CYCLES,
	    small.best / 1e3 / RA_CYCLES, RA_ROUNDS, RA_CYCLES);
	VM_ASSERT_MSG(ratio < RA_RATIO_MAX, "REL_ALL costs %.2f times as much on the big pool",
		      ratio);
	vm_detach(&big.c);
	vm_detach(&small.c);
	vm_detach(&big.a);
	vm_detach(&small.a);
	vm_pool_destroy(big.name);
	vm_pool_destroy(small.name);
}

static const struct vm_test waits_tests[] = {
    VM_TEST(concurrency_release_during_wait_keeps_other_pins,
	    "a failed WAIT whose pin another thread released leaves another client's pin alone"),
    VM_TEST(bad_input_rel_all_during_wait_no_underflow,
	    "REL_ALL during a WAIT that then times out: no pin count wraps, the file pins again"),
    VM_TEST(permission_user_waits_bound,
	    "a user other than the owner has at most max_user_waits WAITs at once (EAGAIN)"),
    VM_TEST_TIMEOUT(perf_commit_tenant_wait_herd,
		    "one tenant trying 256 WAITs gets max_user_waits asleep; the COMMIT cost shown",
		    240),
    VM_TEST_TIMEOUT(
	perf_commit_asked_idle_files,
	"a COMMIT answering a miss costs under 1.5x with 1000 idle client files attached", 120),
    VM_TEST_TIMEOUT(
	perf_rel_all_far_pin,
	"REL_ALL of one pin costs under 10x on a 65536-slot pool what it does on 16 slots", 120),
};

const struct vm_suite vm_waits_suite = {waits_tests, ARRAY_SIZE(waits_tests)};
