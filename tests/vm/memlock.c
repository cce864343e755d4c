// SPDX-License-Identifier: GPL-2.0
/*
 * A pool's host pages count against its creator's RLIMIT_MEMLOCK, in the
 * locked_vm of the creator's user, as io_uring's registered buffers do,
 * unless the creator has CAP_IPC_LOCK; they are given back when the pool is
 * destroyed (docs/abi.md, "Security model"). The creator here is a process
 * of a user of its own (so that nothing else is charged to it) that keeps
 * CAP_SYS_ADMIN, which creating a pool needs.
 */
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

/* A user nothing else in the VM runs as. */
#define ML_UID 4242
/* The creator's RLIMIT_MEMLOCK. */
#define ML_LIMIT (4u << 20)
/* Pools of 1 to 5 layers of 16 experts of 64 KiB: 1 MiB of host pages a layer. */
#define ML_LAYER_BYTES (16u * 65536u)

enum ml_step_kind { ML_CREATE, ML_DESTROY };

struct ml_step {
	enum ml_step_kind kind;
	unsigned int pool;     /* vm_pool_name() suffix */
	unsigned int n_layers; /* ML_CREATE: host bytes = n_layers MiB */
	int want;              /* 0 or an errno */
};

struct ml_job {
	char names[4][MOECACHE_NAME_LEN];
	char node[64];
	bool ipc_lock;
	const struct ml_step *steps;
	size_t n_steps;
	int got[16];
};

/* Becomes ML_UID with CAP_SYS_ADMIN (and CAP_IPC_LOCK if asked) and nothing else. */
static int ml_become_creator(const struct ml_job *job)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	struct rlimit rl = {.rlim_cur = ML_LIMIT, .rlim_max = ML_LIMIT};
	int fd;

	VM_OK(setrlimit(RLIMIT_MEMLOCK, &rl));
	VM_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	VM_OK(setresuid(ML_UID, ML_UID, ML_UID));
	memset(data, 0, sizeof(data));
	data[0].permitted = 1u << CAP_SYS_ADMIN;
	if (job->ipc_lock)
		data[0].permitted |= 1u << CAP_IPC_LOCK;
	data[0].effective = data[0].permitted;
	VM_OK(syscall(SYS_capset, &hdr, data));
	fd = open(job->node, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		VM_FAIL("open %s as uid %u: %s", job->node, ML_UID, vm_errname(errno));
	return fd;
}

static void ml_creator_main(void *arg)
{
	struct ml_job *job = arg;
	int fd = ml_become_creator(job);
	size_t i;

	for (i = 0; i < job->n_steps; i++) {
		const struct ml_step *s = &job->steps[i];
		const char *name = job->names[s->pool];
		int ret;

		if (s->kind == ML_CREATE) {
			struct moecache_pool_create pc;
			struct vm_geom g = vm_geom_default;

			g.n_layers = s->n_layers;
			vm_fill_create(&pc, name, &g);
			ret = ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc);
		} else {
			struct moecache_pool_name pn;

			memset(&pn, 0, sizeof(pn));
			snprintf(pn.name, sizeof(pn.name), "%s", name);
			ret = ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn);
		}
		job->got[i] = ret < 0 ? errno : 0;
	}
	close(fd);
}

static void ml_run(struct vm_ctx *ctx, bool ipc_lock, const struct ml_step *steps, size_t n)
{
	struct ml_job *job = vm_shared(sizeof(*job));
	struct moecache_info info;
	size_t i;

	VM_ASSERT(n <= ARRAY_SIZE(job->got));
	vm_get_info(&info);
	if (info.max_host_bytes - info.host_bytes_used < 8 * ML_LAYER_BYTES)
		vm_skip("max_host_mb leaves less than 8 MiB for these pools");
	for (i = 0; i < ARRAY_SIZE(job->names); i++)
		vm_pool_name(ctx, (unsigned int)i + 1, job->names[i]);
	vm_get_node(job->node, sizeof(job->node));
	job->ipc_lock = ipc_lock;
	job->steps = steps;
	job->n_steps = n;
	vm_reap_ok(vm_spawn(ml_creator_main, job), 10000, "the creator");
	vm_put_node(job->node);
	for (i = 0; i < n; i++) {
		const struct ml_step *s = &steps[i];

		if (job->got[i] != s->want)
			VM_FAIL("step %zu, %s of pool %u (%u MiB): expected %s, got %s", i,
				s->kind == ML_CREATE ? "POOL_CREATE" : "POOL_DESTROY", s->pool,
				s->n_layers, s->want ? vm_errname(s->want) : "success",
				job->got[i] ? vm_errname(job->got[i]) : "success");
	}
	/* Whatever a step left behind, the next test starts clean. */
	for (i = 0; i < ARRAY_SIZE(job->names); i++) {
		struct moecache_pool_name pn;
		int fd = vm_open_dev();

		memset(&pn, 0, sizeof(pn));
		snprintf(pn.name, sizeof(pn.name), "%s", job->names[i]);
		ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn);
		close(fd);
	}
}

static void permission_memlock_pool_over_limit(struct vm_ctx *ctx)
{
	static const struct ml_step steps[] = {
	    {ML_CREATE, 0, 5, ENOMEM}, /* 5 MiB against 4 */
	    {ML_CREATE, 0, 4, 0},      /* exactly the limit */
	    {ML_DESTROY, 0, 0, 0},
	};

	ml_run(ctx, false, steps, ARRAY_SIZE(steps));
}

static void permission_memlock_pools_add_up(struct vm_ctx *ctx)
{
	static const struct ml_step steps[] = {
	    {ML_CREATE, 0, 3, 0},
	    {ML_CREATE, 1, 2, ENOMEM}, /* 3 + 2 MiB against 4 */
	    {ML_CREATE, 1, 1, 0},      /* 3 + 1 */
	    {ML_CREATE, 2, 1, ENOMEM}, /* 3 + 1 + 1 */
	    {ML_DESTROY, 0, 0, 0},     /* gives 3 back */
	    {ML_CREATE, 2, 3, 0},      /* 1 + 3 */
	    {ML_DESTROY, 1, 0, 0},
	    {ML_DESTROY, 2, 0, 0},
	};

	ml_run(ctx, false, steps, ARRAY_SIZE(steps));
}

static void leak_memlock_given_back_at_destroy(struct vm_ctx *ctx)
{
	static const struct ml_step steps[] = {
	    {ML_CREATE, 0, 4, 0}, {ML_DESTROY, 0, 0, 0}, {ML_CREATE, 1, 4, 0},
	    {ML_DESTROY, 1, 0, 0}, {ML_CREATE, 2, 4, 0}, {ML_DESTROY, 2, 0, 0},
	    {ML_CREATE, 3, 4, 0}, {ML_DESTROY, 3, 0, 0},
	};

	ml_run(ctx, false, steps, ARRAY_SIZE(steps));
}

static void leak_memlock_refusal_charges_nothing(struct vm_ctx *ctx)
{
	static const struct ml_step steps[] = {
	    {ML_CREATE, 0, 2, 0},
	    {ML_CREATE, 1, 3, ENOMEM}, /* 2 + 3 MiB against 4 */
	    {ML_CREATE, 1, 3, ENOMEM},
	    {ML_CREATE, 1, 3, ENOMEM},
	    {ML_CREATE, 1, 2, 0}, /* 2 + 2: the refusals left nothing charged */
	    {ML_DESTROY, 0, 0, 0},
	    {ML_DESTROY, 1, 0, 0},
	};

	ml_run(ctx, false, steps, ARRAY_SIZE(steps));
}

static void permission_memlock_ipc_lock_bypass(struct vm_ctx *ctx)
{
	static const struct ml_step steps[] = {
	    {ML_CREATE, 0, 5, 0}, /* over the limit, with CAP_IPC_LOCK */
	    {ML_CREATE, 1, 3, 0},
	    {ML_DESTROY, 0, 0, 0},
	    {ML_DESTROY, 1, 0, 0},
	};

	ml_run(ctx, true, steps, ARRAY_SIZE(steps));
}

static const struct vm_test memlock_tests[] = {
    VM_TEST(permission_memlock_pool_over_limit,
	    "POOL_CREATE of more host pages than the creator's RLIMIT_MEMLOCK is ENOMEM; "
	    "exactly the limit is allowed"),
    VM_TEST(permission_memlock_pools_add_up,
	    "one user's pools add up against its RLIMIT_MEMLOCK; a destroyed one gives its "
	    "pages back"),
    VM_TEST(leak_memlock_given_back_at_destroy,
	    "creating and destroying a pool of the whole limit four times in a row works"),
    VM_TEST(leak_memlock_refusal_charges_nothing,
	    "POOL_CREATEs refused with ENOMEM leave nothing charged to the creator"),
    VM_TEST(permission_memlock_ipc_lock_bypass,
	    "a creator with CAP_IPC_LOCK is not held to RLIMIT_MEMLOCK"),
};

const struct vm_suite vm_memlock_suite = {memlock_tests, ARRAY_SIZE(memlock_tests)};
