// SPDX-License-Identifier: GPL-2.0
/*
 * The pin share (docs/abi.md, "Security model"): the clients of one uid may
 * together hold pins on at most max_pin_share percent of a pool's slots,
 * unless that uid owns the pool or has CAP_SYS_ADMIN, so that no tenant with
 * read permission can pin the whole bank and make every other client's miss
 * wait forever. Fast pins, which the driver cannot bound, are for the exempt
 * only. The hostile tenant here is uid 65534 on a root pool of mode 0644.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "harness.h"
#include "libmoecache.h"

#define NOBODY 65534
/* Another unprivileged uid, a tenant of its own. */
#define OTHER_UID 65533

/* vm_geom_default's slots, and max_pin_share's default (50%) of them. */
#define N_SLOTS 8
#define SHARE 4
#define DEFAULT_PIN_SHARE 50

/*
 * Expert ids: layer 0's experts 0..7 are resident in slots 0..7 (expert s
 * in slot s); layer 1 is resident nowhere.
 */
static const __u32 ids[N_SLOTS] = {0, 1, 2, 3, 4, 5, 6, 7};

/* A root pool of mode, its agent, every slot filled with layer 0's expert of its number. */
static void share_pool(const char *name, __u32 uid, __u32 mode, struct vm_view *a)
{
	struct vm_geom g = vm_geom_default;
	__u32 s;

	VM_EQ(g.n_slots, N_SLOTS);
	g.uid = uid;
	g.mode = mode;
	vm_pool_create(name, &g);
	vm_attach(a, name, MOECACHE_ROLE_AGENT);
	for (s = 0; s < N_SLOTS; s++)
		vm_fill(a, s, 0, ids[s]);
}

/* ACQUIRE as the ioctl returns it (-1 and errno on failure), for VM_ERR and VM_REFUSED. */
static int acq(const struct vm_view *c, __u32 layer, const __u32 *experts, __u32 count, __u32 flags,
	       __u32 timeout_ms)
{
	__u32 slots[N_SLOTS];
	int ret;

	VM_ASSERT(count <= N_SLOTS);
	ret = vm_try_acquire(c, layer, experts, count, slots, flags, timeout_ms, NULL);
	errno = -ret;
	return ret ? -1 : 0;
}

/* ACQUIRE_RELEASE: drop one pin on rel_slot, then acquire experts of layer 0. */
static int acq_rel(const struct vm_view *c, __u32 rel_slot, const __u32 *experts, __u32 count)
{
	__u32 slots[N_SLOTS];
	struct moecache_acquire_release req = {
	    .acquire = {.layer = 0,
			.count = count,
			.experts = (uintptr_t)experts,
			.slots = (uintptr_t)slots},
	    .release_slots = (uintptr_t)&rel_slot,
	    .release_count = 1,
	};

	VM_ASSERT(count <= N_SLOTS);
	return ioctl(c->fd, MOECACHE_IOC_ACQUIRE_RELEASE, &req);
}

/* How many of layer 0's experts c can pin, trying each once; EDQUOT is the only refusal. */
static unsigned int pin_what_it_can(const struct vm_view *c)
{
	unsigned int n = 0;
	__u32 s;

	for (s = 0; s < N_SLOTS; s++) {
		errno = 0;
		if (acq(c, 0, &ids[s], 1, 0, 0) == 0)
			n++;
		else
			VM_ASSERT_MSG(errno == EDQUOT, "ACQUIRE of expert %u: %s", s,
				      vm_errname(errno));
	}
	return n;
}

/* ---- a tenant in a child process --------------------------------------- */

struct tenant_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	uid_t uid;
	unsigned int pinned;	/* what the child's pinning came to */
	int err;		/* errno of a call it reports, 0 if it worked */
	struct vm_gate ready;	/* it holds its pins */
	struct vm_gate release; /* it may let them go */
};

static struct tenant_job *tenant_job_new(const char *pool, uid_t uid)
{
	struct tenant_job *job = vm_shared(sizeof(*job));

	snprintf(job->pool, sizeof(job->pool), "%s", pool);
	vm_get_node(job->node, sizeof(job->node));
	job->uid = uid;
	vm_gate_open(&job->ready);
	vm_gate_open(&job->release);
	return job;
}

static void tenant_job_free(struct tenant_job *job)
{
	vm_gate_close(&job->ready);
	vm_gate_close(&job->release);
	vm_put_node(job->node);
}

static void tenant_job_end(struct tenant_job *job, pid_t pid)
{
	vm_gate_pass(&job->release);
	vm_reap_ok(pid, 10000, "the tenant");
	tenant_job_free(job);
}

/* Runs fn as uid 65534 against a fresh share_pool() to its end. */
static void tenant_run(struct vm_ctx *ctx, void (*fn)(void *arg))
{
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	struct vm_view a;

	share_pool(ctx->pool, 0, 0644, &a);
	vm_reap_ok(vm_spawn(fn, job), 20000, "the tenant");
	tenant_job_free(job);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* Drops to job->uid and attaches a client, or another one once dropped (fd -1). */
static void tenant_attach(struct tenant_job *job, struct vm_view *c, int fd)
{
	int ret;

	if (fd < 0)
		fd = open(job->node, O_RDWR | O_CLOEXEC);
	VM_ASSERT(fd >= 0);
	ret = vm_try_attach_fd(c, fd, job->pool, MOECACHE_ROLE_CLIENT);
	if (ret)
		VM_FAIL("client ATTACH as uid %u: %s", (unsigned int)job->uid, vm_errname(-ret));
}

static void tenant_hold(struct tenant_job *job)
{
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->release, 30000, "the test's release");
}

/* ---- kernel pins ---------------------------------------------------------- */

static void kernel_pins_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	/* The whole bank at once: refused whole, nothing pinned. */
	VM_REFUSED(&c, EDQUOT, acq(&c, 0, ids, N_SLOTS, 0, 0));
	/* Its share is fine; one slot more is not. */
	VM_OK(acq(&c, 0, ids, SHARE, 0, 0));
	VM_REFUSED(&c, EDQUOT, acq(&c, 0, &ids[SHARE], 1, 0, 0));
	/* The share counts slots, not pins: a slot it holds is pinned again. */
	VM_OK(acq(&c, 0, ids, 1, 0, 0));
	VM_EQ(vm_load32(&c.pins[0]), 2);
	job->pinned = SHARE;
	tenant_hold(job);
	vm_detach(&c);
}

/* The rest of the bank stays the agent's: each slot past the share can be evicted. */
static void expect_evictable(const struct vm_view *a, __u32 from)
{
	__u32 s;

	for (s = from; s < N_SLOTS; s++)
		vm_evict(a, s, MOECACHE_NONE, MOECACHE_NONE, NULL);
}

/*
 * Pins: a client with read permission could pin every slot (up to
 * max_file_pins pins), and the agent's EVICT was EBUSY everywhere.
 */
static void permission_pin_share_kernel_pins(struct vm_ctx *ctx)
{
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	struct vm_view a;
	pid_t pid;
	__u32 s;

	share_pool(ctx->pool, 0, 0644, &a);
	pid = vm_spawn(kernel_pins_main, job);
	vm_gate_wait(&job->ready, 10000, "the tenant's pins");
	for (s = 0; s < N_SLOTS; s++)
		VM_EQ(vm_load32(&a.pins[s]), s == 0 ? 2 : s < SHARE ? 1 : 0);
	expect_evictable(&a, SHARE);
	tenant_job_end(job, pid);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void several_files_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c1, c2;

	tenant_attach(job, &c1, vm_become_unprivileged(job->uid, job->uid, job->node));
	tenant_attach(job, &c2, -1);
	VM_OK(acq(&c1, 0, &ids[0], 2, 0, 0));
	VM_OK(acq(&c2, 0, &ids[2], 2, 0, 0));
	/* The share is the uid's, whichever of its files asks. */
	VM_REFUSED(&c2, EDQUOT, acq(&c2, 0, &ids[4], 1, 0, 0));
	VM_REFUSED(&c1, EDQUOT, acq(&c1, 0, &ids[4], 1, 0, 0));
	/* A slot let go by one file is room for the other. */
	vm_release(&c1, &ids[0], 1);
	VM_OK(acq(&c2, 0, &ids[4], 1, 0, 0));
	/* And so is every slot of a file that closes. */
	vm_detach(&c1);
	VM_OK(acq(&c2, 0, &ids[5], 1, 0, 0));
	VM_REFUSED(&c2, EDQUOT, acq(&c2, 0, &ids[6], 1, 0, 0));
	job->pinned = SHARE;
	tenant_hold(job);
	vm_detach(&c2);
}

/* Pins: a tenant's files were bounded one by one (max_file_pins), never together. */
static void permission_pin_share_several_files(struct vm_ctx *ctx)
{
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	struct vm_view a;
	pid_t pid;

	share_pool(ctx->pool, 0, 0644, &a);
	pid = vm_spawn(several_files_main, job);
	vm_gate_wait(&job->ready, 10000, "the tenant's pins");
	/* It holds slots 2..5: 0, 1, 6 and 7 stay the agent's. */
	vm_evict(&a, 0, MOECACHE_NONE, MOECACHE_NONE, NULL);
	vm_evict(&a, 1, MOECACHE_NONE, MOECACHE_NONE, NULL);
	expect_evictable(&a, 6);
	tenant_job_end(job, pid);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void two_tenants_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	job->pinned = pin_what_it_can(&c);
	tenant_hold(job);
	vm_detach(&c);
}

/* Each uid has a share of its own: two tenants together may pin the bank. */
static void permission_pin_share_per_uid(struct vm_ctx *ctx)
{
	struct tenant_job *job[2] = {tenant_job_new(ctx->pool, NOBODY),
				     tenant_job_new(ctx->pool, OTHER_UID)};
	struct vm_view a;
	pid_t pid[2];
	int i;

	share_pool(ctx->pool, 0, 0644, &a);
	for (i = 0; i < 2; i++) {
		pid[i] = vm_spawn(two_tenants_main, job[i]);
		vm_gate_wait(&job[i]->ready, 10000, "a tenant's pins");
	}
	VM_EQ(job[0]->pinned, SHARE);
	VM_EQ(job[1]->pinned, N_SLOTS - SHARE);
	for (i = 0; i < 2; i++)
		tenant_job_end(job[i], pid[i]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- who is not limited --------------------------------------------------- */

static void owner_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	VM_OK(acq(&c, 0, ids, N_SLOTS, 0, 0));
	job->pinned = N_SLOTS;
	vm_detach(&c);
}

/* The pool's owner uid, and root (CAP_SYS_ADMIN), may pin every slot. */
static void permission_pin_share_owner_and_root_unlimited(struct vm_ctx *ctx)
{
	char theirs[MOECACHE_NAME_LEN];
	struct tenant_job *job;
	struct vm_view a, c;

	share_pool(ctx->pool, 0, 0644, &a);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_OK(acq(&c, 0, ids, N_SLOTS, 0, 0));
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);

	/* A pool uid 65534 owns, with no other right: its owner may hold it all. */
	vm_pool_name(ctx, 1, theirs);
	share_pool(theirs, NOBODY, 0600, &a);
	job = tenant_job_new(theirs, NOBODY);
	vm_reap_ok(vm_spawn(owner_main, job), 10000, "the owner's client");
	VM_EQ(job->pinned, N_SLOTS);
	tenant_job_free(job);
	vm_detach(&a);
	vm_pool_destroy(theirs);
}

/*
 * The device opened as uid 65534, then used by root (a set-uid program's
 * inherited fd): the file is held to its opener's share.
 */
static void permission_pin_share_deputy_file_limited(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	char node[64];
	int fd;

	share_pool(ctx->pool, 0, 0644, &a);
	vm_get_node(node, sizeof(node));
	VM_OK(setresuid(-1, NOBODY, 0));
	fd = open(node, O_RDWR | O_CLOEXEC);
	VM_OK(setresuid(-1, 0, -1));
	VM_ASSERT(fd >= 0);
	VM_EQ(vm_try_attach_fd(&c, fd, ctx->pool, MOECACHE_ROLE_CLIENT), 0);
	VM_REFUSED(&a, EDQUOT, acq(&c, 0, ids, N_SLOTS, 0, 0));
	VM_OK(acq(&c, 0, ids, SHARE, 0, 0));
	vm_detach(&c);
	vm_put_node(node);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- whose tenant a file is: its attacher's -------------------------------- */

static void handed_file_main(void *arg)
{
	struct tenant_job *job = arg;
	int root_fd = open(job->node, O_RDWR | O_CLOEXEC);
	struct vm_view mine, handed;

	VM_ASSERT(root_fd >= 0);
	tenant_attach(job, &mine, vm_become_unprivileged(job->uid, job->uid, job->node));
	/* Root's file, handed over unattached, attached by this uid. */
	VM_EQ(vm_try_attach_fd(&handed, root_fd, job->pool, MOECACHE_ROLE_CLIENT), 0);
	VM_OK(acq(&mine, 0, ids, SHARE, 0, 0));
	VM_REFUSED(&handed, EDQUOT, acq(&handed, 0, &ids[SHARE], 1, 0, 0));
	/* One share over both: a slot let go by one is room for the other. */
	vm_release(&mine, &ids[0], 1);
	VM_OK(acq(&handed, 0, &ids[SHARE], 1, 0, 0));
	VM_REFUSED(&mine, EDQUOT, acq(&mine, 0, &ids[SHARE + 1], 1, 0, 0));
	vm_detach(&handed);
	vm_detach(&mine);
}

/*
 * Pins: a file root opened and handed, unattached, to uid 65534 counted as
 * root's tenant, so that uid held two shares. The tenant is the attacher.
 */
static void permission_pin_share_handed_file_is_attachers(struct vm_ctx *ctx)
{
	tenant_run(ctx, handed_file_main);
}

/* Opens node with euid uid (root's saved uid kept), as a user's process would. */
static int open_as(const char *node, uid_t uid)
{
	int fd;

	VM_OK(setresuid(-1, uid, 0));
	fd = open(node, O_RDWR | O_CLOEXEC);
	VM_OK(setresuid(-1, 0, -1));
	VM_ASSERT(fd >= 0);
	return fd;
}

/*
 * A deputy exempt from the share (root) attaching files two users opened:
 * each file is its opener's tenant, not one tenant of the deputy's.
 */
static void permission_pin_share_deputy_files_their_openers(struct vm_ctx *ctx)
{
	struct vm_view a, c[2];
	char node[64];
	int i;

	share_pool(ctx->pool, 0, 0644, &a);
	vm_get_node(node, sizeof(node));
	VM_EQ(vm_try_attach_fd(&c[0], open_as(node, NOBODY), ctx->pool, MOECACHE_ROLE_CLIENT), 0);
	VM_EQ(vm_try_attach_fd(&c[1], open_as(node, OTHER_UID), ctx->pool, MOECACHE_ROLE_CLIENT),
	      0);
	VM_OK(acq(&c[0], 0, ids, SHARE, 0, 0));
	VM_OK(acq(&c[1], 0, &ids[SHARE], N_SLOTS - SHARE, 0, 0));
	for (i = 0; i < 2; i++)
		VM_REFUSED(&c[i], EDQUOT, acq(&c[i], 0, &ids[i ? 0 : SHARE], 1, 0, 0));
	for (i = 0; i < 2; i++)
		vm_detach(&c[i]);
	vm_put_node(node);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- fast pins ------------------------------------------------------------ */

struct fast_job {
	char pool[2][MOECACHE_NAME_LEN];
	char node[64];
	int ret[2]; /* ATTACH with FAST_PINS: root's pool, its own */
};

static void fast_main(void *arg)
{
	struct fast_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	struct vm_view c;
	int i;

	for (i = 0; i < 2; i++) {
		if (fd < 0)
			fd = open(job->node, O_RDWR | O_CLOEXEC);
		VM_ASSERT(fd >= 0);
		job->ret[i] = vm_try_attach_fd_flags(&c, fd, job->pool[i], MOECACHE_ROLE_CLIENT,
						     MOECACHE_ATTACH_FAST_PINS);
		if (job->ret[i]) {
			close(fd);
		} else {
			vm_detach(&c);
		}
		fd = -1;
	}
}

/*
 * Pins: fast pins are stores the driver only reads, so a client could hold
 * every slot with them whatever bound ACQUIRE has.
 */
static void permission_pin_share_fast_pins_exempt_only(struct vm_ctx *ctx)
{
	struct fast_job *job = vm_shared(sizeof(*job));
	struct moecache_stats st;
	struct vm_view a, c;
	struct vm_geom g = vm_geom_default;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	vm_pool_name(ctx, 1, job->pool[1]);
	g.uid = NOBODY;
	g.mode = 0600;
	vm_pool_create(job->pool[1], &g);
	snprintf(job->pool[0], sizeof(job->pool[0]), "%s", ctx->pool);
	vm_get_node(job->node, sizeof(job->node));
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_reap_ok(vm_spawn(fast_main, job), 10000, "the fast-pins client");
	vm_put_node(job->node);
	VM_EQ(job->ret[0], -EPERM);
	VM_EQ(job->ret[1], 0);
	/* The refused ATTACH left no file behind; root may fast-pin. */
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.n_clients, 0);
	VM_EQ(vm_try_attach_fd_flags(&c, vm_open_dev(), ctx->pool, MOECACHE_ROLE_CLIENT,
				     MOECACHE_ATTACH_FAST_PINS),
	      0);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(job->pool[1]);
	vm_pool_destroy(ctx->pool);
}

struct lib_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	int attach_ret;
	__u64 pins_size; /* of the handle's pool info */
	int acquire_ret;
	__u32 slot;
	struct vm_gate ready;	/* it holds its pin */
	struct vm_gate release; /* it may let it go */
};

/* libmoecache's client as uid 65534: attach with fast pins, acquire expert 0, hold it. */
static void lib_main(void *arg)
{
	struct lib_job *job = arg;
	struct moecache *mc;

	close(vm_become_unprivileged(NOBODY, NOBODY, job->node));
	VM_OK(moecache_open(job->node, &mc));
	job->slot = MOECACHE_NONE;
	job->attach_ret =
	    moecache_attach_flags(mc, job->pool, MOECACHE_ROLE_CLIENT, MOECACHE_ATTACH_FAST_PINS);
	if (!job->attach_ret) {
		job->pins_size = moecache_pool(mc)->off.pins_size;
		job->acquire_ret = moecache_acquire(mc, 0, ids, 1, &job->slot, 0, 0, NULL);
	}
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->release, 30000, "the test's release");
	moecache_close(mc);
}

/*
 * libmoecache asked for fast pins by a tenant without the right to them
 * (the Python Client's default): attached without, it pins with ACQUIRE,
 * which the driver counts against the share.
 */
static void basic_pin_share_lib_fast_pins_fall_back(struct vm_ctx *ctx)
{
	struct lib_job *job = vm_shared(sizeof(*job));
	struct vm_view a;
	pid_t pid;

	share_pool(ctx->pool, 0, 0644, &a);
	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_get_node(job->node, sizeof(job->node));
	vm_gate_open(&job->ready);
	vm_gate_open(&job->release);
	pid = vm_spawn(lib_main, job);
	vm_gate_wait(&job->ready, 10000, "the library's client");
	VM_EQ(job->attach_ret, 0);
	VM_EQ(job->pins_size, 0);
	VM_EQ(job->acquire_ret, 0);
	VM_EQ(job->slot, 0);
	/* A kernel pin: in the map region, and the agent cannot evict it. */
	VM_EQ(vm_load32(&a.pins[0]), 1);
	VM_ERR(ioctl(a.fd, MOECACHE_IOC_EVICT,
		     &(struct moecache_evict){.slot = 0, .layer = 1, .expert = 0}),
	       EBUSY);
	vm_gate_pass(&job->release);
	vm_reap_ok(pid, 10000, "the library's client");
	vm_gate_close(&job->ready);
	vm_gate_close(&job->release);
	vm_put_node(job->node);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- WAIT ------------------------------------------------------------------ */

static void wait_main(void *arg)
{
	struct tenant_job *job = arg;
	uint64_t t0;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	/* More than its share could never be pinned at once: refused at once, whole. */
	t0 = vm_now_ms();
	VM_REFUSED(&c, EDQUOT, acq(&c, 1, ids, SHARE + 1, MOECACHE_ACQ_WAIT, 3000));
	VM_ASSERT_MSG(vm_now_ms() - t0 < 1500, "the refused WAIT took %llu ms",
		      (unsigned long long)(vm_now_ms() - t0));
	/* Within the share with what it holds counted: the same. */
	VM_OK(acq(&c, 0, ids, 2, 0, 0));
	VM_REFUSED(&c, EDQUOT, acq(&c, 1, ids, SHARE - 1, MOECACHE_ACQ_WAIT, 3000));
	vm_detach(&c);
}

/* Pins: a WAIT beyond the tenant's share slept out its timeout instead of failing. */
static void permission_pin_share_wait_beyond_share(struct vm_ctx *ctx)
{
	tenant_run(ctx, wait_main);
}

static void acq_rel_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	VM_OK(acq(&c, 0, ids, SHARE, 0, 0));
	/* Net one slot more: refused, and the release is not done either. */
	VM_REFUSED(&c, EDQUOT, acq_rel(&c, 0, &ids[SHARE], 2));
	VM_EQ(vm_load32(&c.pins[0]), 1);
	/* Net nothing more: fine. */
	VM_OK(acq_rel(&c, 0, &ids[SHARE], 1));
	VM_EQ(vm_load32(&c.pins[0]), 0);
	VM_EQ(vm_load32(&c.pins[SHARE]), 1);
	vm_detach(&c);
}

/* ACQUIRE_RELEASE is judged net of what it releases, and refused whole. */
static void permission_pin_share_acquire_release_net(struct vm_ctx *ctx)
{
	tenant_run(ctx, acq_rel_main);
}

static void late_waiter_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	errno = 0;
	job->err = acq(&c, 1, ids, 1, MOECACHE_ACQ_WAIT, 10000) == 0 ? 0 : errno;
	vm_detach(&c);
}

/*
 * A WAIT within the share when it starts, whose room the uid's other file
 * takes while it sleeps: when its expert comes it gives up (EDQUOT) and
 * holds nothing, instead of pinning past the share.
 */
static void concurrency_pin_share_wait_room_taken(struct vm_ctx *ctx)
{
	struct tenant_job *waiter = tenant_job_new(ctx->pool, NOBODY);
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	struct moecache_request req;
	struct vm_view a;
	pid_t wpid, pid;
	__u32 s;

	share_pool(ctx->pool, 0, 0644, &a);
	wpid = vm_spawn(late_waiter_main, waiter);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	vm_wait_sleeping(wpid, 5000, "the waiting tenant");
	pid = vm_spawn(two_tenants_main, job);
	vm_gate_wait(&job->ready, 10000, "the tenant's other file");
	VM_EQ(job->pinned, SHARE);
	vm_evict(&a, N_SLOTS - 1, 1, ids[0], NULL);
	vm_commit1(&a, N_SLOTS - 1, 1, ids[0], 0);
	vm_reap_ok(wpid, 10000, "the waiting tenant");
	VM_EQ(waiter->err, EDQUOT);
	for (s = 0; s < N_SLOTS; s++)
		VM_EQ(vm_load32(&a.pins[s]), s < SHARE ? 1 : 0);
	tenant_job_end(job, pid);
	tenant_job_free(waiter);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- the others' misses ------------------------------------------------ */

static void hostile_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c[3];
	unsigned int i;

	tenant_attach(job, &c[0], vm_become_unprivileged(job->uid, job->uid, job->node));
	for (i = 1; i < ARRAY_SIZE(c); i++)
		tenant_attach(job, &c[i], -1);
	/* Every file of it takes every slot it can. */
	for (i = 0; i < ARRAY_SIZE(c); i++)
		job->pinned += pin_what_it_can(&c[i]);
	tenant_hold(job);
	for (i = 0; i < ARRAY_SIZE(c); i++)
		vm_detach(&c[i]);
}

/*
 * Pins: while one tenant pinned every slot, another client's miss was never
 * filled: the agent's EVICT was EBUSY on every slot.
 */
static void concurrency_pin_share_others_miss_filled(struct vm_ctx *ctx)
{
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	const __u32 want = ids[0];
	struct moecache_request req;
	struct vm_waiter *w;
	struct vm_view a;
	pid_t pid, wpid;
	__u32 s;

	share_pool(ctx->pool, 0, 0644, &a);
	pid = vm_spawn(hostile_main, job);
	vm_gate_wait(&job->ready, 10000, "the hostile tenant's pins");

	/* Another client misses on layer 1 and waits; the agent path must fill it. */
	w = vm_waiter_new(ctx->pool, 1, &want, 1, MOECACHE_ACQ_WAIT, 10000);
	wpid = vm_waiter_start(w);
	VM_EQ(vm_read_requests(&a, &req, 1, 5000), 1);
	VM_EQ(req.layer, 1);
	VM_EQ(req.expert, want);
	for (s = 0; s < N_SLOTS; s++) {
		struct moecache_evict ev = {.slot = s, .layer = 1, .expert = want};

		if (ioctl(a.fd, MOECACHE_IOC_EVICT, &ev) == 0)
			break;
		VM_ASSERT_MSG(errno == EBUSY, "EVICT of slot %u: %s", s, vm_errname(errno));
	}
	VM_ASSERT_MSG(s < N_SLOTS, "every slot is pinned: the miss can never be filled");
	vm_commit1(&a, s, 1, want, 0);
	vm_gate_wait(&w->done, 10000, "the waiting client");
	VM_EQ(w->ret, 0);
	VM_EQ(w->slots[0], s);
	vm_reap_ok(wpid, 10000, "the waiting client");
	VM_EQ(job->pinned, SHARE);
	tenant_job_end(job, pid);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- the parameter ------------------------------------------------------ */

static void param_main(void *arg)
{
	struct tenant_job *job = arg;
	struct vm_view c;

	tenant_attach(job, &c, vm_become_unprivileged(job->uid, job->uid, job->node));
	job->pinned = pin_what_it_can(&c);
	vm_detach(&c);
}

static unsigned int pinned_under(struct vm_ctx *ctx, unsigned int pct)
{
	struct tenant_job *job = tenant_job_new(ctx->pool, NOBODY);
	unsigned long long old = vm_param_set("max_pin_share", pct);
	unsigned int pinned;

	vm_reap_ok(vm_spawn(param_main, job), 10000, "the tenant");
	vm_param_set("max_pin_share", old);
	pinned = job->pinned;
	tenant_job_free(job);
	return pinned;
}

/* max_pin_share is read at each ACQUIRE: 25% of 8 slots is 2, 100% the bank, 1% one slot. */
static void basic_pin_share_param_takes_effect(struct vm_ctx *ctx)
{
	unsigned long long pct;
	struct vm_view a;

	VM_ASSERT(vm_param_read("max_pin_share", &pct));
	VM_EQ(pct, DEFAULT_PIN_SHARE);
	share_pool(ctx->pool, 0, 0644, &a);
	VM_EQ(pinned_under(ctx, 25), 2);
	VM_EQ(pinned_under(ctx, 100), N_SLOTS);
	VM_EQ(pinned_under(ctx, 1), 1);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* max_pin_share takes 1 to 100 only; anything else is refused and changes nothing. */
static void bad_input_pin_share_param_bounds(struct vm_ctx *ctx)
{
	static const unsigned long long bad[] = {0, 101, 1000, 4294967296ULL};
	unsigned long long old, now;
	size_t i;

	VM_ASSERT(vm_param_read("max_pin_share", &old));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		VM_ASSERT_MSG(!vm_param_write("max_pin_share", bad[i]), "max_pin_share took %llu",
			      bad[i]);
		VM_ASSERT(vm_param_read("max_pin_share", &now));
		VM_EQ(now, old);
	}
	VM_ASSERT(vm_param_write("max_pin_share", 1));
	VM_ASSERT(vm_param_write("max_pin_share", 100));
	vm_param_set("max_pin_share", old);
}

static const struct vm_test pin_share_tests[] = {
    VM_TEST(permission_pin_share_kernel_pins,
	    "uid 65534 pins at most its share of a 0644 root pool (EDQUOT, whole); the rest "
	    "stays evictable"),
    VM_TEST(permission_pin_share_several_files,
	    "the share is one uid's over all its files; released or closed slots are room again"),
    VM_TEST(permission_pin_share_per_uid, "two uids each have a share of their own"),
    VM_TEST(permission_pin_share_owner_and_root_unlimited,
	    "root and the pool's owner uid may pin every slot"),
    VM_TEST(permission_pin_share_deputy_file_limited,
	    "a file opened by uid 65534 and used by root is held to its opener's share"),
    VM_TEST(permission_pin_share_handed_file_is_attachers,
	    "a file root opened, attached by uid 65534, is that uid's tenant: one share over both"),
    VM_TEST(permission_pin_share_deputy_files_their_openers,
	    "root attaching files two uids opened holds each to its opener's share"),
    VM_TEST(permission_pin_share_fast_pins_exempt_only,
	    "ATTACH with FAST_PINS is EPERM but for the pool's owner and root"),
    VM_TEST(basic_pin_share_lib_fast_pins_fall_back,
	    "libmoecache's fast-pins attach by uid 65534 falls back to ACQUIRE pins"),
    VM_TEST(permission_pin_share_wait_beyond_share,
	    "an ACQUIRE|WAIT beyond the share is EDQUOT at once, with nothing changed"),
    VM_TEST(permission_pin_share_acquire_release_net,
	    "ACQUIRE_RELEASE counts net of its release; refused, it releases nothing"),
    VM_TEST(concurrency_pin_share_wait_room_taken,
	    "a WAIT whose room the uid's other file took while it slept gives up with EDQUOT"),
    VM_TEST(concurrency_pin_share_others_miss_filled,
	    "while a uid holds all it can with three files, another client's miss is filled"),
    VM_TEST(basic_pin_share_param_takes_effect,
	    "max_pin_share defaults to 50 and bounds the next ACQUIREs when written"),
    VM_TEST(bad_input_pin_share_param_bounds, "max_pin_share refuses 0 and values above 100"),
};

const struct vm_suite vm_pin_share_suite = {pin_share_tests, ARRAY_SIZE(pin_share_tests)};
