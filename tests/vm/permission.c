// SPDX-License-Identifier: GPL-2.0
/*
 * permission_: roles limit what a file may do, the map region is never
 * writable, and a pool's uid/gid/mode decide who may create, attach and
 * destroy (docs/abi.md, "Objects and roles").
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

/* A pool with (0,1) resident in slot 0, slot 2 FILLING for (2,3), one queued request. */
struct perm_env {
	struct vm_view a;
	struct vm_view c;
	struct vm_view l;
};

static void perm_setup(struct vm_ctx *ctx, struct perm_env *env)
{
	__u32 e = 4, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&env->a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&env->c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&env->l, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_fill(&env->a, 0, 0, 1);
	vm_evict(&env->a, 2, 2, 3, NULL);
	vm_acquire(&env->c, 3, &e, 1, &slot, 0, NULL);
}

static void perm_teardown(struct vm_ctx *ctx, struct perm_env *env)
{
	vm_detach(&env->l);
	vm_detach(&env->c);
	vm_detach(&env->a);
	vm_pool_destroy(ctx->pool);
}

/* BANK_SET of a good memfd bank by a file that may not set one. */
static void bank_set_refused(struct perm_env *env, int fd)
{
	struct moecache_bank bank;
	int memfd = memfd_create("moecache-vmtest-bank", MFD_CLOEXEC);

	VM_ASSERT(memfd >= 0);
	memset(&bank, 0, sizeof(bank));
	bank.fd = memfd;
	bank.backend = MOECACHE_BACKEND_CPU;
	bank.slot_stride = env->a.att.expert_bytes;
	bank.bank_bytes = bank.slot_stride * env->a.att.n_slots;
	VM_OK(ftruncate(memfd, (off_t)bank.bank_bytes));
	VM_REFUSED(&env->a, EPERM, ioctl(fd, MOECACHE_IOC_BANK_SET, &bank));
	VM_EQ(env->a.hdr->flags & MOECACHE_POOL_BANK, 0);
	close(memfd);
}

static void permission_client_cannot_evict(struct vm_ctx *ctx)
{
	struct perm_env env;
	struct moecache_evict ev = {.slot = 3, .layer = 0, .expert = 9};

	perm_setup(ctx, &env);
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_EVICT, &ev));
	ev.slot = 0;
	ev.layer = MOECACHE_NONE;
	ev.expert = MOECACHE_NONE;
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_EVICT, &ev));
	perm_teardown(ctx, &env);
}

static void permission_client_cannot_commit_or_abort(struct vm_ctx *ctx)
{
	struct perm_env env;
	struct moecache_fill fill = {.slot = 2, .layer = 2, .expert = 3};
	struct moecache_fill_batch batch = {.count = 1, .fills = (uintptr_t)&fill};

	perm_setup(ctx, &env);
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_COMMIT, &batch));
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_ABORT, &batch));
	perm_teardown(ctx, &env);
}

static void permission_client_cannot_bank_set_or_load(struct vm_ctx *ctx)
{
	struct perm_env env;
	struct moecache_load load = {.op = MOECACHE_LOAD_DONE};

	perm_setup(ctx, &env);
	bank_set_refused(&env, env.c.fd);
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_LOAD, &load));
	load.op = MOECACHE_LOAD_BEGIN;
	VM_REFUSED(&env.a, EPERM, ioctl(env.c.fd, MOECACHE_IOC_LOAD, &load));
	perm_teardown(ctx, &env);
}

static void permission_client_cannot_read_requests(struct vm_ctx *ctx)
{
	struct perm_env env;
	struct moecache_request reqs[4];

	perm_setup(ctx, &env);
	VM_REFUSED(&env.a, EPERM, read(env.c.fd, reqs, sizeof(reqs)));
	VM_REFUSED(&env.a, EPERM, read(env.l.fd, reqs, sizeof(reqs)));
	VM_EQ(vm_poll(&env.c, 0) & (POLLERR | POLLIN), POLLERR);
	VM_EQ(vm_poll(&env.l, 0) & (POLLERR | POLLIN), POLLERR);
	perm_teardown(ctx, &env);
}

static void permission_loader_limited(struct vm_ctx *ctx)
{
	struct perm_env env;
	__u32 e = 1, slot = 0;
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};
	struct moecache_release rel = {.count = 1, .slots = (uintptr_t)&slot};
	struct moecache_prefetch pf = {.layer = 1, .count = 1, .experts = (uintptr_t)&e};
	struct moecache_acquire_release ar = {.acquire = acq};
	struct moecache_evict ev = {.slot = 3, .layer = 0, .expert = 9};
	struct moecache_fill fill = {.slot = 2, .layer = 2, .expert = 3};
	struct moecache_fill_batch batch = {.count = 1, .fills = (uintptr_t)&fill};

	perm_setup(ctx, &env);
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_ACQUIRE, &acq));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_RELEASE, &rel));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_EVICT, &ev));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_COMMIT, &batch));
	VM_REFUSED(&env.a, EPERM, ioctl(env.l.fd, MOECACHE_IOC_ABORT, &batch));
	bank_set_refused(&env, env.l.fd);
	perm_teardown(ctx, &env);
}

static void permission_agent_cannot_acquire(struct vm_ctx *ctx)
{
	struct perm_env env;
	__u32 e = 1, slot = 0;
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};
	struct moecache_release rel = {.flags = MOECACHE_REL_ALL};
	struct moecache_prefetch pf = {.layer = 1, .count = 1, .experts = (uintptr_t)&e};
	struct moecache_acquire_release ar = {.acquire = acq};

	perm_setup(ctx, &env);
	VM_REFUSED(&env.a, EPERM, ioctl(env.a.fd, MOECACHE_IOC_ACQUIRE, &acq));
	VM_REFUSED(&env.a, EPERM, ioctl(env.a.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	VM_REFUSED(&env.a, EPERM, ioctl(env.a.fd, MOECACHE_IOC_RELEASE, &rel));
	VM_REFUSED(&env.a, EPERM, ioctl(env.a.fd, MOECACHE_IOC_PREFETCH, &pf));
	perm_teardown(ctx, &env);
}

/* mmap with PROT_WRITE is EPERM; a read-only mapping cannot be made writable. */
static void region_read_only(struct vm_view *observer, struct vm_view *v, __u64 offset, size_t len,
			     const char *what)
{
	struct vm_snap snap;
	void *p;

	vm_snap_take(observer, &snap);
	errno = 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, (off_t)offset);
	if (p != MAP_FAILED || errno != EPERM)
		VM_FAIL("writable mmap of the %s (role %u): expected EPERM, got %s", what, v->role,
			p == MAP_FAILED ? vm_errname(errno) : "success");
	p = mmap(NULL, len, PROT_WRITE, MAP_SHARED, v->fd, (off_t)offset);
	if (p != MAP_FAILED || errno != EPERM)
		VM_FAIL("write-only mmap of the %s (role %u): expected EPERM, got %s", what,
			v->role, p == MAP_FAILED ? vm_errname(errno) : "success");
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, v->fd, (off_t)offset);
	VM_ASSERT_MSG(p != MAP_FAILED, "read-only mmap of the %s: %s", what, vm_errname(errno));
	errno = 0;
	if (mprotect(p, len, PROT_READ | PROT_WRITE) == 0 || errno != EACCES)
		VM_FAIL("mprotect of the %s to PROT_WRITE (role %u): expected EACCES, got %s", what,
			v->role, errno ? vm_errname(errno) : "success");
	munmap(p, len);
	VM_SNAP_SAME(observer, &snap, what);
}

static void permission_client_map_region_read_only(struct vm_ctx *ctx)
{
	struct perm_env env;

	perm_setup(ctx, &env);
	region_read_only(&env.a, &env.c, env.c.att.off.map_offset, env.c.map_len, "map region");
	perm_teardown(ctx, &env);
}

static void permission_client_host_region_read_only(struct vm_ctx *ctx)
{
	struct perm_env env;

	perm_setup(ctx, &env);
	region_read_only(&env.a, &env.c, env.c.att.off.host_offset, env.c.att.off.host_size,
			 "host region");
	perm_teardown(ctx, &env);
}

static void permission_agent_map_region_read_only(struct vm_ctx *ctx)
{
	struct perm_env env;

	perm_setup(ctx, &env);
	region_read_only(&env.a, &env.a, env.a.att.off.map_offset, env.a.map_len, "map region");
	region_read_only(&env.a, &env.l, env.l.att.off.map_offset, env.l.map_len, "map region");
	perm_teardown(ctx, &env);
}

static void permission_agent_may_write_host(struct vm_ctx *ctx)
{
	struct perm_env env;
	unsigned char *p;
	size_t len;

	perm_setup(ctx, &env);
	len = env.a.att.off.host_size;
	/* Mapped read-only, the agent may still upgrade: VM_MAYWRITE is kept for it. */
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, env.a.fd, (off_t)env.a.att.off.host_offset);
	VM_ASSERT(p != MAP_FAILED);
	VM_OK(mprotect(p, len, PROT_READ | PROT_WRITE));
	p[len - 1] = 0x5a;
	vm_view_map_host(&env.c, PROT_READ);
	VM_EQ(env.c.host[len - 1], 0x5a);
	munmap(p, len);
	perm_teardown(ctx, &env);
}

static void permission_second_agent_ebusy(struct vm_ctx *ctx)
{
	struct perm_env env;
	struct vm_view second;
	struct moecache_attach at;
	struct moecache_stats st;
	int fd = vm_open_dev();

	perm_setup(ctx, &env);
	memset(&at, 0, sizeof(at));
	snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
	at.role = MOECACHE_ROLE_AGENT;
	VM_REFUSED(&env.a, EBUSY, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	vm_detach(&env.a);
	/* Once the first agent is gone, the same file may attach. */
	VM_EQ(vm_try_attach_fd(&second, fd, ctx->pool, MOECACHE_ROLE_AGENT), 0);
	vm_stats(&second, MOECACHE_NONE, &st);
	VM_EQ(st.agent_pid, getpid());
	vm_detach(&second);
	vm_detach(&env.l);
	vm_detach(&env.c);
	vm_pool_destroy(ctx->pool);
}

/* ---- other users ------------------------------------------------------ */

struct unpriv_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	gid_t gid;
	int create_ret;
	int attach_ret[4]; /* by role */
	int destroy_ret;
	int acquire_ret;
	__u32 slot;
};

static struct unpriv_job *unpriv_job_new(const char *pool, gid_t gid)
{
	struct unpriv_job *job = vm_shared(sizeof(*job));

	snprintf(job->pool, sizeof(job->pool), "%s", pool);
	vm_get_node(job->node, sizeof(job->node));
	job->gid = gid;
	return job;
}

static int attach_as(int fd, const char *pool, __u32 role)
{
	struct moecache_attach at;

	memset(&at, 0, sizeof(at));
	snprintf(at.name, sizeof(at.name), "%s", pool);
	at.role = role;
	return ioctl(fd, MOECACHE_IOC_ATTACH, &at) < 0 ? -errno : 0;
}

/* Tries the agent and loader roles first, then the client role. */
static void unpriv_attach_main(void *arg)
{
	struct unpriv_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, job->gid, job->node);

	job->attach_ret[MOECACHE_ROLE_AGENT] = attach_as(fd, job->pool, MOECACHE_ROLE_AGENT);
	job->attach_ret[MOECACHE_ROLE_LOADER] = attach_as(fd, job->pool, MOECACHE_ROLE_LOADER);
	job->attach_ret[MOECACHE_ROLE_CLIENT] = attach_as(fd, job->pool, MOECACHE_ROLE_CLIENT);
	close(fd);
}

static void expect_ret(int got, int want, const char *what)
{
	if (got != -want)
		VM_FAIL("%s: expected %s, got %s", what, want ? vm_errname(want) : "success",
			got ? vm_errname(-got) : "success");
}

static void unpriv_create_main(void *arg)
{
	struct unpriv_job *job = arg;
	struct moecache_pool_create pc;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	struct vm_geom g = vm_geom_default;

	g.uid = NOBODY;
	g.gid = NOBODY;
	vm_fill_create(&pc, job->pool, &g);
	job->create_ret = ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc) < 0 ? -errno : 0;
	close(fd);
}

static void permission_unpriv_create_eperm(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct moecache_info before, after;

	vm_get_info(&before);
	vm_reap_ok(vm_spawn(unpriv_create_main, job), 10000, "the unprivileged process");
	vm_put_node(job->node);
	expect_ret(job->create_ret, EPERM, "POOL_CREATE by uid 65534");
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	vm_expect_no_pool(ctx->pool);
}

static void permission_unpriv_private_pool_enoent(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_view a;
	struct vm_snap snap;

	vm_pool_create(ctx->pool, &vm_geom_default); /* root's, 0600 */
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_detach(&a);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_snap_take(&a, &snap);
	vm_reap_ok(vm_spawn(unpriv_attach_main, job), 10000, "the unprivileged process");
	vm_put_node(job->node);
	/* No right at all: as if there were no such pool (tests/vm/probing.c). */
	expect_ret(job->attach_ret[MOECACHE_ROLE_CLIENT], ENOENT, "client ATTACH to a 0600 pool");
	expect_ret(job->attach_ret[MOECACHE_ROLE_AGENT], ENOENT, "agent ATTACH to a 0600 pool");
	expect_ret(job->attach_ret[MOECACHE_ROLE_LOADER], ENOENT, "loader ATTACH to a 0600 pool");
	VM_SNAP_SAME(&a, &snap, "refused ATTACHes");
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void unpriv_client_main(void *arg)
{
	struct unpriv_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, job->gid, job->node);
	struct vm_view c;
	__u32 e = 1;

	job->attach_ret[MOECACHE_ROLE_AGENT] = attach_as(fd, job->pool, MOECACHE_ROLE_AGENT);
	job->attach_ret[MOECACHE_ROLE_LOADER] = attach_as(fd, job->pool, MOECACHE_ROLE_LOADER);
	job->attach_ret[MOECACHE_ROLE_CLIENT] =
	    vm_try_attach_fd(&c, fd, job->pool, MOECACHE_ROLE_CLIENT);
	if (job->attach_ret[MOECACHE_ROLE_CLIENT]) {
		close(fd);
		return;
	}
	/* A reader is a full client: it pins and maps the host pages read-only. */
	job->slot = MOECACHE_NONE;
	job->acquire_ret = vm_try_acquire(&c, 0, &e, 1, &job->slot, 0, 0, NULL);
	vm_view_map_host(&c, PROT_READ);
	VM_EQ(vm_host_record(&c, 1)[0], 0xab);
	if (!job->acquire_ret && job->slot != MOECACHE_NONE)
		vm_release(&c, &job->slot, 1);
	vm_detach(&c);
}

static void readable_pool_test(struct vm_ctx *ctx, __u32 gid, __u32 mode, gid_t child_gid)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, child_gid);
	struct vm_geom g = vm_geom_default;
	struct vm_view a;

	g.gid = gid;
	g.mode = mode;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_host_record(&a, 1)[0] = 0xab;
	vm_fill(&a, 4, 0, 1);
	vm_reap_ok(vm_spawn(unpriv_client_main, job), 10000, "the unprivileged client");
	vm_put_node(job->node);
	expect_ret(job->attach_ret[MOECACHE_ROLE_AGENT], EACCES,
		   "agent ATTACH to a read-only pool");
	expect_ret(job->attach_ret[MOECACHE_ROLE_LOADER], EACCES,
		   "loader ATTACH to a read-only pool");
	expect_ret(job->attach_ret[MOECACHE_ROLE_CLIENT], 0, "client ATTACH to a readable pool");
	expect_ret(job->acquire_ret, 0, "ACQUIRE by the unprivileged client");
	VM_EQ(job->slot, 4);
	VM_EQ(vm_load32(&a.pins[4]), 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void permission_unpriv_client_of_0644_pool(struct vm_ctx *ctx)
{
	readable_pool_test(ctx, 0, 0644, NOBODY);
}

static void permission_unpriv_group_reader(struct vm_ctx *ctx)
{
	readable_pool_test(ctx, NOBODY, 0640, NOBODY);
}

static void permission_unpriv_other_group_enoent(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_geom g = vm_geom_default;

	/* Group 1 may read, others may not: uid 65534 in group 65534 is other. */
	g.gid = 1;
	g.mode = 0640;
	vm_pool_create(ctx->pool, &g);
	vm_reap_ok(vm_spawn(unpriv_attach_main, job), 10000, "the unprivileged process");
	vm_put_node(job->node);
	expect_ret(job->attach_ret[MOECACHE_ROLE_CLIENT], ENOENT,
		   "client ATTACH to a pool of another group");
	vm_pool_destroy(ctx->pool);
}

static void permission_unpriv_agent_of_writable_pool(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_geom g = vm_geom_default;

	g.mode = 0666;
	vm_pool_create(ctx->pool, &g);
	vm_reap_ok(vm_spawn(unpriv_attach_main, job), 10000, "the unprivileged process");
	vm_put_node(job->node);
	expect_ret(job->attach_ret[MOECACHE_ROLE_AGENT], 0, "agent ATTACH to a 0666 pool");
	/* The file was bound once: later ATTACHes on it are EALREADY. */
	expect_ret(job->attach_ret[MOECACHE_ROLE_LOADER], EALREADY, "second ATTACH of one file");
	vm_pool_destroy(ctx->pool);
}

static void unpriv_destroy_main(void *arg)
{
	struct unpriv_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	struct moecache_pool_name pn;

	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", job->pool);
	job->destroy_ret = ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0 ? -errno : 0;
	close(fd);
}

static void permission_unpriv_destroy_eperm(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_geom g = vm_geom_default;
	struct vm_view v;
	struct vm_snap snap;

	/* Writable by everybody, yet only its owner or an admin may destroy it. */
	g.mode = 0666;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&v, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_snap_take(&v, &snap);
	vm_detach(&v);
	vm_reap_ok(vm_spawn(unpriv_destroy_main, job), 10000, "the unprivileged process");
	vm_put_node(job->node);
	expect_ret(job->destroy_ret, EPERM, "POOL_DESTROY of root's pool by uid 65534");
	vm_attach(&v, ctx->pool, MOECACHE_ROLE_LOADER);
	VM_SNAP_SAME(&v, &snap, "the refused POOL_DESTROY");
	vm_detach(&v);
	vm_pool_destroy(ctx->pool);
}

static void permission_owner_may_destroy(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_geom g = vm_geom_default;

	g.uid = NOBODY;
	g.gid = NOBODY;
	g.mode = 0600;
	vm_pool_create(ctx->pool, &g);
	vm_reap_ok(vm_spawn(unpriv_destroy_main, job), 10000, "the pool's owner");
	vm_put_node(job->node);
	expect_ret(job->destroy_ret, 0, "POOL_DESTROY by the pool's owner uid");
	vm_expect_no_pool(ctx->pool);
}

static void permission_owner_may_attach_agent(struct vm_ctx *ctx)
{
	struct unpriv_job *job = unpriv_job_new(ctx->pool, NOBODY);
	struct vm_geom g = vm_geom_default;

	/* Owner bits only: the owner uid gets them, through no group. */
	g.uid = NOBODY;
	g.gid = 0;
	g.mode = 0600;
	vm_pool_create(ctx->pool, &g);
	vm_reap_ok(vm_spawn(unpriv_attach_main, job), 10000, "the pool's owner");
	vm_put_node(job->node);
	expect_ret(job->attach_ret[MOECACHE_ROLE_AGENT], 0,
		   "agent ATTACH by the owner of a 0600 pool");
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test permission_tests[] = {
    VM_TEST(permission_client_cannot_evict, "a client's EVICT is EPERM"),
    VM_TEST(permission_client_cannot_commit_or_abort, "a client's COMMIT and ABORT are EPERM"),
    VM_TEST(permission_client_cannot_bank_set_or_load, "a client's BANK_SET and LOAD are EPERM"),
    VM_TEST(permission_client_cannot_read_requests,
	    "read() by a client or loader is EPERM and poll() reports POLLERR"),
    VM_TEST(permission_loader_limited, "a loader's ACQUIRE(_RELEASE), RELEASE, PREFETCH, EVICT, "
				       "COMMIT, ABORT, BANK_SET are EPERM"),
    VM_TEST(permission_agent_cannot_acquire,
	    "the agent's ACQUIRE, ACQUIRE_RELEASE, RELEASE and PREFETCH are EPERM"),
    VM_TEST(permission_client_map_region_read_only,
	    "a client cannot map the map region writable (EPERM) nor mprotect it so (EACCES)"),
    VM_TEST(permission_client_host_region_read_only,
	    "a client cannot map the host region writable (EPERM) nor mprotect it so (EACCES)"),
    VM_TEST(permission_agent_map_region_read_only,
	    "neither the agent nor a loader can map the map region writable"),
    VM_TEST(permission_agent_may_write_host,
	    "the agent may mprotect its host mapping writable and a client sees the write"),
    VM_TEST(permission_second_agent_ebusy, "a second agent is EBUSY until the first one detaches"),
    VM_TEST(permission_unpriv_create_eperm, "POOL_CREATE without CAP_SYS_ADMIN is EPERM"),
    VM_TEST(permission_unpriv_private_pool_enoent,
	    "another uid cannot attach to a 0600 root pool in any role, nor tell it exists "
	    "(ENOENT)"),
    VM_TEST(permission_unpriv_client_of_0644_pool,
	    "another uid may attach to a 0644 pool as a client only, and acquire"),
    VM_TEST(permission_unpriv_group_reader,
	    "a member of the pool's group may attach to a 0640 pool as a client only"),
    VM_TEST(permission_unpriv_other_group_enoent,
	    "a uid outside the pool's group cannot attach to a 0640 pool (ENOENT)"),
    VM_TEST(permission_unpriv_agent_of_writable_pool,
	    "another uid may be the agent of a 0666 pool"),
    VM_TEST(permission_unpriv_destroy_eperm,
	    "another uid cannot destroy root's pool, even a 0666 one (EPERM)"),
    VM_TEST(permission_owner_may_destroy, "the pool's owner uid may destroy it without privileges"),
    VM_TEST(permission_owner_may_attach_agent, "the owner bits give the owner uid the agent role"),
};

const struct vm_suite vm_permission_suite = {permission_tests, ARRAY_SIZE(permission_tests)};
