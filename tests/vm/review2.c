// SPDX-License-Identifier: GPL-2.0
/*
 * Findings of a second hostile-tenant review of the driver (docs/abi.md,
 * "Security model"): what a client with read permission on one pool could
 * still wedge, exhaust or write. Each test names the hole it pins.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

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

/* ---- writes that bypass a mapping's protection ------------------------- */

/*
 * A read-only shared mapping of real pages: the kernel's forced writes
 * (/proc/self/mem, ptrace's FOLL_FORCE) and process_vm_writev() must not
 * reach the pages, nor may mprotect() make it writable, while reads work.
 */
static void forced_writes_refused(const char *what, unsigned char *addr, size_t len)
{
	unsigned char before, got, poke;
	struct iovec local, remote;
	int mem;

	before = addr[len - 1];
	poke = (unsigned char)(before ^ 0x5a);
	mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	VM_ASSERT(mem >= 0);
	VM_EQ(pread(mem, &got, 1, (off_t)(uintptr_t)(addr + len - 1)), 1);
	VM_EQ(got, before);
	errno = 0;
	if (pwrite(mem, &poke, 1, (off_t)(uintptr_t)(addr + len - 1)) != -1 || errno != EIO)
		VM_FAIL("%s: a forced write through /proc/self/mem was not refused (errno %s)",
			what, vm_errname(errno));
	close(mem);
	local.iov_base = &poke;
	local.iov_len = 1;
	remote.iov_base = addr;
	remote.iov_len = 1;
	VM_ERR(process_vm_writev(getpid(), &local, 1, &remote, 1, 0), EFAULT);
	VM_ERR(mprotect(addr, len, PROT_READ | PROT_WRITE), EACCES);
	VM_ASSERT_MSG(addr[len - 1] == before, "%s: a byte changed", what);
}

/*
 * Checked: a client's map region, host region and CPU bank view are
 * shared mappings without VM_MAYWRITE, so no forced write (FOLL_FORCE on
 * a read-only shared mapping of real pages) and no process_vm_writev()
 * can write the pages every tenant reads.
 */
static void permission_client_forced_writes_refused(struct vm_ctx *ctx)
{
	struct moecache_bank bank, got;
	struct vm_view a, c;
	unsigned char *agent_bank, *view;
	size_t len;
	int memfd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	memfd = vm_bank_set_memfd(&a, vm_geom_default.expert_bytes, &bank);
	len = (size_t)bank.bank_bytes;
	agent_bank = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(agent_bank != MAP_FAILED);
	memset(agent_bank, 0xa5, len);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
	view = mmap(NULL, len, PROT_READ, MAP_SHARED, got.fd, 0);
	VM_ASSERT(view != MAP_FAILED);

	forced_writes_refused("map region", c.map_base, c.map_len);
	forced_writes_refused("host region", c.host, c.host_len);
	forced_writes_refused("bank view", view, len);
	VM_EQ(agent_bank[len - 1], 0xa5);

	munmap(view, len);
	close(got.fd);
	munmap(agent_bank, len);
	close(memfd);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
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

/* ---- root of an unprivileged user namespace ---------------------------- */

struct userns_job {
	char node[64];
	char closed[MOECACHE_NAME_LEN]; /* root's, 0600 */
	char open[MOECACHE_NAME_LEN];	/* root's, 0644 */
	int skip;			/* no user namespace for NOBODY here */
	uid_t euid;			/* inside */
	int create, attach_closed, attach_fast, destroy_open, attach_client;
};

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	VM_ASSERT_MSG(fd >= 0, "open %s: %s", path, vm_errname(errno));
	VM_EQ(write(fd, text, strlen(text)), (long)strlen(text));
	close(fd);
}

static int userns_ret(int ret)
{
	return ret < 0 ? -errno : ret;
}

/* As NOBODY, then root (and CAP_SYS_ADMIN) of a user namespace of its own. */
static void userns_main(void *arg)
{
	struct userns_job *job = arg;
	struct moecache_pool_create pc;
	struct moecache_pool_name pn;
	struct vm_view v;
	char map[64];
	int fd;

	close(vm_become_unprivileged(NOBODY, NOBODY, job->node));
	/* setresuid() left /proc/self root's: the maps are written there. */
	VM_OK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
	if (unshare(CLONE_NEWUSER) < 0) {
		job->skip = errno;
		return;
	}
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %d 1", NOBODY);
	write_file("/proc/self/uid_map", map);
	write_file("/proc/self/gid_map", map);
	job->euid = geteuid();
	fd = open(job->node, O_RDWR | O_CLOEXEC);
	VM_ASSERT(fd >= 0);
	vm_fill_create(&pc, "vmt-userns-new", &vm_geom_default);
	job->create = userns_ret(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", job->open);
	job->destroy_open = userns_ret(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
	job->attach_closed = vm_try_attach_fd(&v, fd, job->closed, MOECACHE_ROLE_CLIENT);
	if (!job->attach_closed)
		vm_detach(&v);
	job->attach_fast = vm_try_attach_fd_flags(&v, fd, job->open, MOECACHE_ROLE_CLIENT,
						  MOECACHE_ATTACH_FAST_PINS);
	if (!job->attach_fast)
		vm_detach(&v);
	job->attach_client = vm_try_attach_fd(&v, fd, job->open, MOECACHE_ROLE_CLIENT);
	if (!job->attach_client)
		vm_detach(&v);
	else
		close(fd);
}

/*
 * Checked: root of a user namespace an unprivileged user made (with
 * CAP_SYS_ADMIN there) is that user to the driver: no pool creation, no
 * destroy of root's pool, no sight of a 0600 pool, no fast pins; it
 * attaches where the user may read.
 */
static void permission_userns_root_is_its_creator(struct vm_ctx *ctx)
{
	struct userns_job *job = vm_shared(sizeof(*job));
	struct vm_geom g = vm_geom_default;
	pid_t pid;

	snprintf(job->closed, sizeof(job->closed), "%s", ctx->pool);
	vm_pool_name(ctx, 1, job->open);
	vm_pool_create(job->closed, &g);
	g.mode = 0644;
	vm_pool_create(job->open, &g);
	vm_get_node(job->node, sizeof(job->node));
	pid = vm_spawn(userns_main, job);
	vm_reap_ok(pid, 10000, "the user namespace's root");
	vm_put_node(job->node);
	vm_pool_destroy(job->open);
	vm_pool_destroy(job->closed);
	if (job->skip)
		vm_skip("no user namespace for an unprivileged user here: %s",
			vm_errname(job->skip));
	VM_EQ(job->euid, 0);
	VM_EQ(job->create, -EPERM);
	VM_EQ(job->destroy_open, -EPERM);
	VM_EQ(job->attach_closed, -ENOENT);
	VM_EQ(job->attach_fast, -EPERM);
	VM_EQ(job->attach_client, 0);
}

static const struct vm_test review2_tests[] = {
    VM_TEST(permission_user_waits_bound,
	    "a user other than the owner has at most max_user_waits WAITs at once (EAGAIN)"),
    VM_TEST_TIMEOUT(perf_commit_tenant_wait_herd,
		    "one tenant trying 256 WAITs gets max_user_waits asleep; the COMMIT cost shown",
		    240),
    VM_TEST_TIMEOUT(
	perf_rel_all_far_pin,
	"REL_ALL of one pin costs under 10x on a 65536-slot pool what it does on 16 slots", 120),
    VM_TEST(permission_userns_root_is_its_creator,
	    "root of an unprivileged user namespace creates, destroys, sees and fast-pins nothing"),
    VM_TEST(
	permission_client_forced_writes_refused,
	"/proc/self/mem, process_vm_writev and mprotect cannot write a client's regions or bank"),
};

const struct vm_suite vm_review2_suite = {review2_tests, ARRAY_SIZE(review2_tests)};
