// SPDX-License-Identifier: GPL-2.0
/*
 * bad_input_: every refused argument gets the errno docs/abi.md names, and
 * the pool is left exactly as it was (STATS and the whole map region).
 */
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/*
 * A pool with some of everything, so that "unchanged" means something:
 * (0,1) resident in slot 0; (1,2) resident in slot 1 and pinned once by the
 * client; slot 2 FILLING for (2,3); (3,5) read by the agent (in flight);
 * (3,4) queued.
 */
struct bi_env {
	struct vm_view a;
	struct vm_view c;
	__u32 pinned_slot;
	int bank_fd; /* -1 without a bank */
	struct moecache_bank bank;
};

static void bi_setup_bank(struct vm_ctx *ctx, struct bi_env *env, bool with_bank)
{
	struct moecache_request req;
	__u32 e, slot;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&env->a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&env->c, ctx->pool, MOECACHE_ROLE_CLIENT);
	env->bank_fd = -1;
	if (with_bank)
		env->bank_fd = vm_bank_set_memfd(&env->a, env->a.att.expert_bytes, &env->bank);
	vm_fill(&env->a, 0, 0, 1);
	vm_fill(&env->a, 1, 1, 2);
	e = 2;
	vm_acquire(&env->c, 1, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 1);
	env->pinned_slot = slot;
	vm_evict(&env->a, 2, 2, 3, NULL);
	e = 5;
	vm_acquire(&env->c, 3, &e, 1, &slot, 0, NULL);
	VM_EQ(vm_read_requests(&env->a, &req, 1, 1000), 1);
	e = 4;
	vm_acquire(&env->c, 3, &e, 1, &slot, 0, NULL);
	VM_OK(fcntl(env->a.fd, F_SETFL, O_NONBLOCK));
}

static void bi_setup(struct vm_ctx *ctx, struct bi_env *env)
{
	bi_setup_bank(ctx, env, false);
}

static void bi_teardown(struct vm_ctx *ctx, struct bi_env *env)
{
	if (env->bank_fd >= 0)
		close(env->bank_fd);
	vm_detach(&env->c);
	vm_detach(&env->a);
	vm_pool_destroy(ctx->pool);
}

/* A page that can be read but not written, holding a copy of src. */
static void *readonly_copy(const void *src, size_t len)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	VM_ASSERT(p != MAP_FAILED && len <= 4096);
	memcpy(p, src, len);
	VM_OK(mprotect(p, 4096, PROT_READ));
	return p;
}

/* An address that faults on every access (kept mapped, so nothing reuses it). */
static void *inaccessible_page(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	VM_ASSERT(p != MAP_FAILED);
	return p;
}

static const unsigned long sized_cmds[] = {
    MOECACHE_IOC_GET_INFO, MOECACHE_IOC_POOL_CREATE, MOECACHE_IOC_POOL_DESTROY,
    MOECACHE_IOC_ATTACH,   MOECACHE_IOC_ACQUIRE,     MOECACHE_IOC_RELEASE,
    MOECACHE_IOC_PREFETCH, MOECACHE_IOC_EVICT,	     MOECACHE_IOC_COMMIT,
    MOECACHE_IOC_ABORT,	   MOECACHE_IOC_BANK_SET,    MOECACHE_IOC_BANK_GET,
    MOECACHE_IOC_LOAD,	   MOECACHE_IOC_STATS,	     MOECACHE_IOC_ACQUIRE_RELEASE,
    MOECACHE_IOC_REPORT,
};

/* Runs bad (a sized command with another size) on every kind of file. */
static void refused_everywhere(struct bi_env *env, int unbound, unsigned long bad, void *buf,
			       int err)
{
	VM_REFUSED(&env->a, err, ioctl(env->a.fd, bad, buf));
	VM_REFUSED(&env->a, err, ioctl(env->c.fd, bad, buf));
	VM_REFUSED(&env->a, err, ioctl(unbound, bad, buf));
}

static void bad_input_struct_size(struct vm_ctx *ctx)
{
	static unsigned char buf[8192];
	struct bi_env env;
	int unbound = vm_open_dev();
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(sized_cmds); i++) {
		unsigned long cmd = sized_cmds[i];
		size_t size = _IOC_SIZE(cmd);

		/* Shorter than the struct: EINVAL, whatever the file. */
		memset(buf, 0, sizeof(buf));
		refused_everywhere(&env, unbound,
				   _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), size - 8), buf,
				   EINVAL);
		/* Longer, with a byte the driver does not know set: E2BIG. */
		buf[size + 7] = 1;
		refused_everywhere(&env, unbound,
				   _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), size + 8), buf,
				   E2BIG);
		buf[size + 7] = 0;
		buf[size + 63] = 0x80;
		refused_everywhere(&env, unbound,
				   _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), size + 64), buf,
				   E2BIG);
	}
	/* NOP takes no argument: one with a size is another command. */
	memset(buf, 0, sizeof(buf));
	VM_REFUSED(&env.a, ENOTTY, ioctl(env.c.fd, _IOC(_IOC_NONE, MOECACHE_IOC_MAGIC, 1, 8), buf));
	VM_REFUSED(&env.a, ENOTTY, ioctl(env.c.fd, _IOWR(MOECACHE_IOC_MAGIC, 1, __u64), buf));
	close(unbound);
	bi_teardown(ctx, &env);
}

/*
 * Pins: the magic was nsfs's (0xB7): NS_GET_USERNS on /dev/moecache was
 * our NOP and succeeded.
 */
static void bad_input_nsfs_ioctl_not_ours(struct vm_ctx *ctx)
{
	int fd = vm_open_dev();

	VM_ERR(ioctl(fd, _IO(0xb7, 0x1), NULL), ENOTTY);
	VM_ERR(ioctl(fd, _IO(0xb7, 0x2), NULL), ENOTTY);
	close(fd);
}

static void bad_input_unknown_ioctl_enotty(struct vm_ctx *ctx)
{
	static unsigned char buf[8192];
	const unsigned long cmds[] = {
	    _IO(MOECACHE_IOC_MAGIC, 0x10),
	    _IOWR(MOECACHE_IOC_MAGIC, 0x10, struct moecache_stats),
	    _IOWR(MOECACHE_IOC_MAGIC, 0x40, struct moecache_info),
	    _IOWR(MOECACHE_IOC_MAGIC, 0xff, __u64),
	    /* A known number and size in the wrong direction. */
	    _IOW(MOECACHE_IOC_MAGIC, 0x00, struct moecache_info),
	    _IOR(MOECACHE_IOC_MAGIC, 0x05, struct moecache_acquire),
	    _IOWR(MOECACHE_IOC_MAGIC, 0x02, struct moecache_pool_create),
	    /* Another driver's magic. */
	    _IOR(0xb6, 0x00, struct moecache_info),
	    _IOWR('x', 0x05, struct moecache_acquire),
	};
	struct bi_env env;
	int unbound = vm_open_dev();
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		memset(buf, 0, sizeof(buf));
		VM_REFUSED(&env.a, ENOTTY, ioctl(env.a.fd, cmds[i], buf));
		VM_REFUSED(&env.a, ENOTTY, ioctl(env.c.fd, cmds[i], buf));
		VM_REFUSED(&env.a, ENOTTY, ioctl(unbound, cmds[i], buf));
	}
	close(unbound);
	bi_teardown(ctx, &env);
}

static void bad_input_null_struct_efault(struct vm_ctx *ctx)
{
	struct bi_env env;
	void *gone = inaccessible_page();
	void *ptrs[2] = {NULL, gone};
	int unbound = vm_open_dev();
	size_t i;

	bi_setup_bank(ctx, &env, true);
	for (i = 0; i < ARRAY_SIZE(ptrs); i++) {
		void *p = ptrs[i];

		VM_REFUSED(&env.a, EFAULT, ioctl(unbound, MOECACHE_IOC_GET_INFO, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(unbound, MOECACHE_IOC_POOL_CREATE, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(unbound, MOECACHE_IOC_POOL_DESTROY, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(unbound, MOECACHE_IOC_ATTACH, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_BANK_GET, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_STATS, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_REPORT, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_EVICT, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_COMMIT, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_ABORT, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, p));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_LOAD, p));
	}
	/* The unbound file is still unbound. */
	VM_ERR(ioctl(unbound, MOECACHE_IOC_STATS, &(struct moecache_stats){.layer = MOECACHE_NONE}),
	       ENOTCONN);
	close(unbound);
	bi_teardown(ctx, &env);
}

static void bad_input_bad_list_pointer_efault(struct vm_ctx *ctx)
{
	struct bi_env env;
	void *gone = inaccessible_page();
	__u32 experts[2] = {1, 6}, slots[2];
	const __u32 zero_slots[2] = {0, 0};
	__u32 *ro_slots = readonly_copy(zero_slots, sizeof(zero_slots));
	struct moecache_acquire acq;
	struct moecache_release rel;
	struct moecache_prefetch pf;
	struct moecache_fill_batch batch;
	struct moecache_request reqs[4];
	uintptr_t bad[3] = {0, (uintptr_t)gone, 16};
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&acq, 0, sizeof(acq));
		acq.layer = 0;
		acq.count = 2;
		acq.experts = bad[i];
		acq.slots = (uintptr_t)slots;
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
		acq.experts = (uintptr_t)experts;
		acq.slots = bad[i];
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));

		memset(&rel, 0, sizeof(rel));
		rel.count = 1;
		rel.slots = bad[i];
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));

		memset(&pf, 0, sizeof(pf));
		pf.layer = 0;
		pf.count = 1;
		pf.experts = bad[i];
		VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));

		memset(&batch, 0, sizeof(batch));
		batch.count = 1;
		batch.fills = bad[i];
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_COMMIT, &batch));
		VM_REFUSED(&env.a, EFAULT, ioctl(env.a.fd, MOECACHE_IOC_ABORT, &batch));

		/* read() into nowhere loses no request. */
		VM_REFUSED(&env.a, EFAULT, read(env.a.fd, (void *)bad[i], sizeof(reqs)));
	}
	/* Output slots that cannot be written: (0,1) is resident, nothing may be pinned. */
	memset(&acq, 0, sizeof(acq));
	acq.layer = 0;
	acq.count = 2;
	acq.experts = (uintptr_t)experts;
	acq.slots = (uintptr_t)ro_slots;
	VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	bi_teardown(ctx, &env);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	VM_ASSERT(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void bad_input_unwritable_result_efault(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_info info = {0};
	struct moecache_stats st = {.layer = MOECACHE_NONE};
	struct moecache_bank got = {.fd = -1};
	int unbound = vm_open_dev(), nfds;

	bi_setup_bank(ctx, &env, true);
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(unbound, MOECACHE_IOC_GET_INFO, readonly_copy(&info, sizeof(info))));
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(env.c.fd, MOECACHE_IOC_STATS, readonly_copy(&st, sizeof(st))));
	/* No descriptor is left behind for a reply nobody saw. */
	nfds = count_open_fds();
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(env.c.fd, MOECACHE_IOC_BANK_GET, readonly_copy(&got, sizeof(got))));
	VM_EQ(count_open_fds(), nfds);
	close(unbound);
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_unwritable_result(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 experts[2] = {1, 6}, slots[2];
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 2,
	    .experts = (uintptr_t)experts,
	    .slots = (uintptr_t)slots,
	};

	/* (0,1) is resident, (0,6) is not: nothing may be pinned, counted or queued. */
	bi_setup(ctx, &env);
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, readonly_copy(&acq, sizeof(acq))));
	bi_teardown(ctx, &env);
}

static void bad_input_prefetch_unwritable_result(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 expert = 9;
	struct moecache_prefetch pf = {.layer = 0, .count = 1, .experts = (uintptr_t)&expert};

	bi_setup(ctx, &env);
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, readonly_copy(&pf, sizeof(pf))));
	bi_teardown(ctx, &env);
}

static void bad_input_evict_unwritable_result(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_evict ev = {.slot = 0, .layer = 0, .expert = 9};

	/* Slot 0 holds (0,1): the victim would be lost with the reply. */
	bi_setup(ctx, &env);
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(env.a.fd, MOECACHE_IOC_EVICT, readonly_copy(&ev, sizeof(ev))));
	bi_teardown(ctx, &env);
}

static void bad_input_attach_unwritable_result(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_attach at = {.role = MOECACHE_ROLE_CLIENT};
	struct vm_view later;
	int unbound = vm_open_dev();

	bi_setup(ctx, &env);
	snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
	/* The caller never learns the offsets: the file must stay unbound. */
	VM_REFUSED(&env.a, EFAULT,
		   ioctl(unbound, MOECACHE_IOC_ATTACH, readonly_copy(&at, sizeof(at))));
	VM_EQ(vm_try_attach_fd(&later, unbound, ctx->pool, MOECACHE_ROLE_CLIENT), 0);
	vm_detach(&later);
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_layer_range(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 e = 1, slot;
	struct moecache_acquire acq = {
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};

	bi_setup(ctx, &env);
	acq.layer = env.c.att.n_layers;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.layer = MOECACHE_NONE;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.layer = 0x80000000u;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_expert_range(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	struct vm_view a, c;
	__u32 bad_ids[] = {3, 12, 16, MOECACHE_NONE};
	__u32 pair[2], slots[2];
	struct moecache_acquire acq = {
	    .layer = 1,
	    .count = 1,
	    .slots = (uintptr_t)slots,
	};
	size_t i;

	/* Local range [4, 12) of 16: 3 and 12 belong to other ranks. */
	g.expert_begin = 4;
	g.expert_end = 12;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 1, 5);
	for (i = 0; i < ARRAY_SIZE(bad_ids); i++) {
		acq.count = 1;
		acq.experts = (uintptr_t)&bad_ids[i];
		VM_REFUSED(&a, EINVAL, ioctl(c.fd, MOECACHE_IOC_ACQUIRE, &acq));
		/* A valid resident id before the bad one is not pinned either. */
		pair[0] = 5;
		pair[1] = bad_ids[i];
		acq.count = 2;
		acq.experts = (uintptr_t)pair;
		VM_REFUSED(&a, EINVAL, ioctl(c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	}
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_acquire_count(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_info info;
	__u32 *experts, *slots, n;
	struct moecache_acquire acq = {.layer = 0};

	bi_setup(ctx, &env);
	vm_get_info(&info);
	n = info.max_batch + 1;
	experts = calloc(n, sizeof(*experts));
	slots = calloc(n, sizeof(*slots));
	VM_ASSERT(experts && slots);
	acq.experts = (uintptr_t)experts;
	acq.slots = (uintptr_t)slots;
	acq.count = 0;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.count = 0xffffffffu;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.count = n;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	free(experts);
	free(slots);
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_repeated_expert(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 twice_miss[2] = {7, 7}, twice_hit[3] = {1, 9, 1}, slots[3];
	struct moecache_acquire acq = {.layer = 0, .slots = (uintptr_t)slots};

	bi_setup(ctx, &env);
	acq.count = 2;
	acq.experts = (uintptr_t)twice_miss;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.count = 3;
	acq.experts = (uintptr_t)twice_hit;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.flags = MOECACHE_ACQ_WAIT;
	acq.timeout_ms = 100;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_flags_reserved(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 e = 1, slot;
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};

	bi_setup(ctx, &env);
	acq.flags = MOECACHE_ACQ_FLAGS_ALL + 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.flags = 0x80000000u;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.flags = MOECACHE_ACQ_KEEP_WAITING;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.flags = MOECACHE_ACQ_NO_QUEUE | MOECACHE_ACQ_WAIT;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	acq.flags = 0;
	acq.reserved = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE, &acq));
	bi_teardown(ctx, &env);
}

static void bad_input_acquire_release(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_info info;
	__u32 resident = 1, out_of_range = 16, slots[2], free_slot = 3, twice[2];
	struct moecache_acquire_release ar;

	bi_setup(ctx, &env);
	vm_get_info(&info);
	twice[0] = env.pinned_slot;
	twice[1] = env.pinned_slot;
	memset(&ar, 0, sizeof(ar));
	ar.acquire.layer = 0;
	ar.acquire.count = 1;
	ar.acquire.experts = (uintptr_t)&resident;
	ar.acquire.slots = (uintptr_t)slots;
	/* A bad release: the good acquire is not done either. */
	ar.release_count = 1;
	ar.release_slots = (uintptr_t)&free_slot;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.release_count = 2;
	ar.release_slots = (uintptr_t)twice;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	/* A bad acquire: the good release is not done either. */
	ar.release_count = 1;
	ar.release_slots = (uintptr_t)&env.pinned_slot;
	ar.acquire.experts = (uintptr_t)&out_of_range;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.acquire.experts = (uintptr_t)&resident;
	ar.acquire.count = 0;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.acquire.count = 1;
	ar.acquire.reserved = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.acquire.reserved = 0;
	ar.acquire.experts = 0;
	VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.acquire.experts = (uintptr_t)&resident;
	/* The release list's own arguments. */
	ar.release_slots = 0;
	VM_REFUSED(&env.a, EFAULT, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.release_count = 0;
	ar.release_slots = (uintptr_t)&env.pinned_slot;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.release_count = 0xffffffffu;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.release_count = info.max_batch + 1;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	ar.release_count = 1;
	ar.flags = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	bi_teardown(ctx, &env);
}

static void bad_input_prefetch(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_info info;
	__u32 one = 9, twice[2] = {9, 9}, out_of_range = 16;
	struct moecache_prefetch pf;

	bi_setup(ctx, &env);
	vm_get_info(&info);
	memset(&pf, 0, sizeof(pf));
	pf.count = 1;
	pf.experts = (uintptr_t)&one;
	pf.layer = env.c.att.n_layers;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.layer = 0;
	pf.experts = (uintptr_t)&out_of_range;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.experts = (uintptr_t)twice;
	pf.count = 2;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.experts = (uintptr_t)&one;
	pf.count = 0;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.count = 0xffffffffu;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.count = info.max_batch + 1;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	pf.count = 1;
	pf.flags = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_PREFETCH, &pf));
	bi_teardown(ctx, &env);
}

static void bad_input_release_not_pinned(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct vm_view other;
	__u32 free_slot = 3, resident_unpinned = 0, twice[2];
	struct moecache_release rel = {.count = 1};

	bi_setup(ctx, &env);
	rel.slots = (uintptr_t)&free_slot;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	rel.slots = (uintptr_t)&resident_unpinned;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	/* Pinned once, listed twice: nothing is dropped. */
	twice[0] = env.pinned_slot;
	twice[1] = env.pinned_slot;
	rel.count = 2;
	rel.slots = (uintptr_t)twice;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	/* Another file's pin is not this file's to drop. */
	vm_attach(&other, ctx->pool, MOECACHE_ROLE_CLIENT);
	rel.count = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(other.fd, MOECACHE_IOC_RELEASE, &rel));
	vm_detach(&other);
	bi_teardown(ctx, &env);
}

static void bad_input_release_args(struct vm_ctx *ctx)
{
	struct bi_env env;
	__u32 slots[2];
	struct moecache_release rel;

	bi_setup(ctx, &env);
	slots[0] = env.c.att.n_slots;
	slots[1] = MOECACHE_NONE;
	memset(&rel, 0, sizeof(rel));
	rel.count = 1;
	rel.slots = (uintptr_t)&slots[0];
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	rel.slots = (uintptr_t)&slots[1];
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	slots[0] = env.pinned_slot;
	rel.slots = (uintptr_t)slots;
	rel.count = 0;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	rel.count = 0xffffffffu;
	VM_REFUSED(&env.a, E2BIG, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	rel.count = 1;
	rel.flags = 1u << 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	/* REL_ALL takes no list. */
	rel.flags = MOECACHE_REL_ALL;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	rel.count = 0;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_RELEASE, &rel));
	bi_teardown(ctx, &env);
}

static void bad_input_evict_args(struct vm_ctx *ctx)
{
	struct bi_env env;
	const struct {
		__u32 slot, layer, expert, flags;
	} cases[] = {
	    {8, 0, 9, 0},			  /* slot out of range */
	    {MOECACHE_NONE, 0, 9, 0},		  /* slot NONE */
	    {3, 4, 9, 0},			  /* layer out of range */
	    {3, 0, 16, 0},			  /* expert out of range */
	    {3, 0, MOECACHE_NONE, 0},		  /* expert NONE with a layer */
	    {0, MOECACHE_NONE, 9, 0},		  /* layer NONE with an expert */
	    {3, 0, 9, 2},			  /* unknown flags (1 is MOVE) */
	    {3, 0, 9, 0x80000000u},		  /* unknown flags */
	    {0, MOECACHE_NONE, MOECACHE_NONE, 1}, /* MOVE of nothing */
	};
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct moecache_evict ev = {
		    .slot = cases[i].slot,
		    .layer = cases[i].layer,
		    .expert = cases[i].expert,
		    .flags = cases[i].flags,
		};

		VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	}
	bi_teardown(ctx, &env);
}

static void bad_input_evict_pinned_ebusy(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_evict ev = {.layer = 0, .expert = 9};

	bi_setup(ctx, &env);
	ev.slot = env.pinned_slot;
	VM_REFUSED(&env.a, EBUSY, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	ev.layer = MOECACHE_NONE;
	ev.expert = MOECACHE_NONE;
	VM_REFUSED(&env.a, EBUSY, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	bi_teardown(ctx, &env);
}

static void bad_input_evict_filling_ebusy(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_evict ev = {.slot = 2, .layer = 0, .expert = 9};

	bi_setup(ctx, &env);
	VM_REFUSED(&env.a, EBUSY, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	bi_teardown(ctx, &env);
}

static void bad_input_evict_target_present_eexist(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_evict ev = {.slot = 3};

	bi_setup(ctx, &env);
	ev.layer = 0; /* resident in slot 0 */
	ev.expert = 1;
	VM_REFUSED(&env.a, EEXIST, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	ev.layer = 2; /* filling in slot 2 */
	ev.expert = 3;
	VM_REFUSED(&env.a, EEXIST, ioctl(env.a.fd, MOECACHE_IOC_EVICT, &ev));
	bi_teardown(ctx, &env);
}

static void commit_and_abort_refused(struct bi_env *env, int err, struct moecache_fill *fills,
				     __u32 count, __u32 flags)
{
	struct moecache_fill_batch batch = {
	    .count = count,
	    .flags = flags,
	    .fills = (uintptr_t)fills,
	};

	VM_REFUSED(&env->a, err, ioctl(env->a.fd, MOECACHE_IOC_COMMIT, &batch));
	VM_REFUSED(&env->a, err, ioctl(env->a.fd, MOECACHE_IOC_ABORT, &batch));
}

static void bad_input_commit_abort_not_filling(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_fill f[2];

	bi_setup(ctx, &env);
	memset(f, 0, sizeof(f));
	/* Slot 2 fills (2,3): any other claim is refused. */
	f[0] = (struct moecache_fill){.slot = 2, .layer = 2, .expert = 4};
	commit_and_abort_refused(&env, EINVAL, f, 1, 0);
	f[0] = (struct moecache_fill){.slot = 2, .layer = 1, .expert = 3};
	commit_and_abort_refused(&env, EINVAL, f, 1, 0);
	f[0] = (struct moecache_fill){.slot = 3, .layer = 2, .expert = 3}; /* free slot */
	commit_and_abort_refused(&env, EINVAL, f, 1, 0);
	f[0] = (struct moecache_fill){.slot = 0, .layer = 0, .expert = 1}; /* resident */
	commit_and_abort_refused(&env, EINVAL, f, 1, 0);
	f[0] = (struct moecache_fill){.slot = 8, .layer = 2, .expert = 3}; /* out of range */
	commit_and_abort_refused(&env, EINVAL, f, 1, 0);
	/* All or nothing: a good fill next to a bad one is not published. */
	f[0] = (struct moecache_fill){.slot = 2, .layer = 2, .expert = 3};
	f[1] = (struct moecache_fill){.slot = 3, .layer = 0, .expert = 9};
	commit_and_abort_refused(&env, EINVAL, f, 2, 0);
	/* Listed twice. */
	f[1] = f[0];
	commit_and_abort_refused(&env, EINVAL, f, 2, 0);
	bi_teardown(ctx, &env);
}

static void bad_input_commit_abort_args(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_info info;
	struct moecache_fill good = {.slot = 2, .layer = 2, .expert = 3}, f;

	bi_setup(ctx, &env);
	vm_get_info(&info);
	commit_and_abort_refused(&env, EINVAL, &good, 0, 0);
	commit_and_abort_refused(&env, E2BIG, &good, 0xffffffffu, 0);
	commit_and_abort_refused(&env, E2BIG, &good, info.max_batch + 1, 0);
	commit_and_abort_refused(&env, EINVAL, &good, 1, 1);
	f = good;
	f.flags = MOECACHE_FILL_PREFETCH << 1;
	commit_and_abort_refused(&env, EINVAL, &f, 1, 0);
	bi_teardown(ctx, &env);
}

static void bad_input_bank_set(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_bank good, b;
	int memfd, closed_fd;
	__u64 eb;

	bi_setup(ctx, &env);
	eb = env.a.att.expert_bytes;
	memfd = memfd_create("moecache-vmtest-bank", MFD_CLOEXEC);
	VM_ASSERT(memfd >= 0);
	memset(&good, 0, sizeof(good));
	good.fd = memfd;
	good.backend = MOECACHE_BACKEND_CPU;
	good.slot_stride = eb;
	good.bank_bytes = eb * env.a.att.n_slots;
	VM_OK(ftruncate(memfd, (off_t)good.bank_bytes));

	b = good;
	b.slot_stride = eb - 4096;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	b = good;
	b.bank_bytes = good.bank_bytes - 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* n_slots * stride wraps to a small number. */
	b = good;
	b.slot_stride = 1ull << 61;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	b = good;
	b.backend = 99;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	b = good;
	b.flags = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	b = good;
	b.index = 1; /* a one-bank pool has bank 0 only */
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	b = good;
	b.fd = -1;
	VM_REFUSED(&env.a, EBADF, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	closed_fd = dup(memfd);
	close(closed_fd);
	b.fd = closed_fd;
	VM_REFUSED(&env.a, EBADF, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* None of them set a bank. */
	VM_ERR(ioctl(env.c.fd, MOECACHE_IOC_BANK_GET, &b), ENODATA);
	close(memfd);
	bi_teardown(ctx, &env);
}

static void bad_input_bank_replace_pinned_ebusy(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_bank second;
	int fd2;

	bi_setup_bank(ctx, &env, true);
	VM_EQ(vm_load32(&env.a.pins[env.pinned_slot]), 1);
	fd2 = memfd_create("moecache-vmtest-bank2", MFD_CLOEXEC);
	VM_ASSERT(fd2 >= 0);
	second = env.bank;
	second.fd = fd2;
	VM_OK(ftruncate(fd2, (off_t)second.bank_bytes));
	VM_REFUSED(&env.a, EBUSY, ioctl(env.a.fd, MOECACHE_IOC_BANK_SET, &second));
	close(fd2);
	bi_teardown(ctx, &env);
}

static void bad_input_bank_get_without_bank(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_bank b;
	int nfds;

	bi_setup(ctx, &env);
	nfds = count_open_fds();
	memset(&b, 0, sizeof(b));
	VM_REFUSED(&env.a, ENODATA, ioctl(env.c.fd, MOECACHE_IOC_BANK_GET, &b));
	VM_REFUSED(&env.a, ENODATA, ioctl(env.a.fd, MOECACHE_IOC_BANK_GET, &b));
	VM_EQ(count_open_fds(), nfds);
	bi_teardown(ctx, &env);
}

static void bad_input_load(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_load load;
	const __u32 ops[] = {0, 3, MOECACHE_NONE};
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		memset(&load, 0, sizeof(load));
		load.op = ops[i];
		VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_LOAD, &load));
	}
	load.op = MOECACHE_LOAD_DONE;
	load.flags = 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.a.fd, MOECACHE_IOC_LOAD, &load));
	bi_teardown(ctx, &env);
}

static void bad_input_stats(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_stats st;

	bi_setup(ctx, &env);
	memset(&st, 0, sizeof(st));
	st.layer = env.c.att.n_layers;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_STATS, &st));
	st.layer = 0x7fffffff;
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_STATS, &st));
	st.layer = MOECACHE_NONE;
	st.flags = 2; /* 1 is MOECACHE_STATS_BANK */
	VM_REFUSED(&env.a, EINVAL, ioctl(env.c.fd, MOECACHE_IOC_STATS, &st));
	bi_teardown(ctx, &env);
}

/* CREATE is refused with err and no pool or host byte appears. */
static void create_refused_at(const char *file, int line, struct moecache_pool_create *pc, int err)
{
	struct moecache_info before, after;
	int fd = vm_open_dev();
	long ret;

	vm_get_info(&before);
	errno = 0;
	ret = ioctl(fd, MOECACHE_IOC_POOL_CREATE, pc);
	if (ret != -1 || errno != err) {
		char what[160];

		snprintf(what, sizeof(what), "POOL_CREATE \"%.*s\" %ux%u [%u,%u) %llu B, %u slots",
			 (int)strnlen(pc->name, 24), pc->name, pc->n_layers, pc->n_experts,
			 pc->expert_begin, pc->expert_end, (unsigned long long)pc->expert_bytes,
			 pc->n_slots);
		vm_fail_errno_at(file, line, what, err, ret, errno);
	}
	vm_get_info(&after);
	if (after.n_pools != before.n_pools || after.host_bytes_used != before.host_bytes_used)
		vm_fail_at(
		    file, line, "refused POOL_CREATE changed n_pools %u -> %u, bytes %llu -> %llu",
		    before.n_pools, after.n_pools, (unsigned long long)before.host_bytes_used,
		    (unsigned long long)after.host_bytes_used);
	close(fd);
}

#define CREATE_REFUSED(pc, err) create_refused_at(__FILE__, __LINE__, (pc), (err))

static void bad_input_create_name(struct vm_ctx *ctx)
{
	static const char *const bad_names[] = {
	    "", "a/b", "a b", "tab\there", "new\nline", "star*", "\xc3\xa9t\xc3\xa9", "..\x01"};
	struct moecache_pool_create pc;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_names); i++) {
		vm_fill_create(&pc, bad_names[i], &vm_geom_default);
		CREATE_REFUSED(&pc, EINVAL);
	}
	/* 64 name characters leave no room for the NUL. */
	vm_fill_create(&pc, "", &vm_geom_default);
	memset(pc.name, 'a', sizeof(pc.name));
	CREATE_REFUSED(&pc, EINVAL);
	/* 63 are fine. */
	vm_fill_create(&pc, "", &vm_geom_default);
	memset(pc.name, 'b', sizeof(pc.name) - 1);
	memcpy(pc.name, ctx->pool, strlen(ctx->pool));
	{
		int fd = vm_open_dev();

		VM_OK(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
		close(fd);
	}
	vm_pool_destroy(pc.name);
}

static void bad_input_create_geometry(struct vm_ctx *ctx)
{
	struct moecache_info info;
	struct moecache_pool_create pc, good;

	vm_get_info(&info);
	vm_fill_create(&good, ctx->pool, &vm_geom_default);

	pc = good;
	pc.n_layers = 0;
	CREATE_REFUSED(&pc, EINVAL);
	/* Small otherwise, so that only the range is wrong, not the room. */
	pc.n_layers = info.max_layers + 1;
	pc.n_experts = 1;
	pc.expert_end = 1;
	pc.expert_bytes = (__u64)ctx->page_size;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.n_experts = 0;
	pc.expert_end = 0;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.n_experts = info.max_experts + 1;
	pc.expert_end = 16;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.expert_begin = 5;
	pc.expert_end = 5;
	CREATE_REFUSED(&pc, EINVAL);
	pc.expert_begin = 6;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.expert_end = pc.n_experts + 1;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.n_slots = 0;
	CREATE_REFUSED(&pc, EINVAL);
	pc.n_slots = info.max_slots + 1;
	CREATE_REFUSED(&pc, EINVAL);
	pc = good;
	pc.expert_bytes = 0;
	CREATE_REFUSED(&pc, EINVAL);
	pc.n_layers = 1;
	pc.n_experts = 1;
	pc.expert_end = 1;
	pc.expert_bytes = info.max_expert_bytes + (__u64)ctx->page_size;
	CREATE_REFUSED(&pc, EINVAL);
	vm_expect_no_pool(ctx->pool);
}

static void bad_input_create_unaligned_bytes(struct vm_ctx *ctx)
{
	const __u64 sizes[] = {1, 100, (__u64)ctx->page_size - 1, (__u64)ctx->page_size + 1,
			       64 * 1024 + 512};
	struct moecache_pool_create pc;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		vm_fill_create(&pc, ctx->pool, &vm_geom_default);
		pc.expert_bytes = sizes[i];
		CREATE_REFUSED(&pc, EINVAL);
	}
	vm_expect_no_pool(ctx->pool);
}

/* Geometry inside the limits whose host bytes do not fit in 64 bits, if any. */
static bool overflow_geometry(const struct moecache_info *info, long page,
			      struct moecache_pool_create *pc)
{
	unsigned __int128 total;
	__u64 eb = info->max_expert_bytes / (__u64)page * (__u64)page;

	total = (unsigned __int128)info->max_layers * info->max_experts * eb;
	if (!eb || total <= UINT64_MAX)
		return false;
	pc->n_layers = info->max_layers;
	pc->n_experts = info->max_experts;
	pc->expert_begin = 0;
	pc->expert_end = info->max_experts;
	pc->expert_bytes = eb;
	return true;
}

struct overflow_job {
	struct moecache_pool_create pc;
	long ret;
	int err;
};

static void overflow_create(void *arg)
{
	struct overflow_job *job = arg;
	int fd = vm_open_dev();

	errno = 0;
	job->ret = ioctl(fd, MOECACHE_IOC_POOL_CREATE, &job->pc);
	job->err = errno;
	close(fd);
}

static void bad_input_create_overflow(struct vm_ctx *ctx)
{
	struct overflow_job *job = vm_shared(sizeof(*job));
	struct moecache_info info, before, after;
	unsigned long long old_layers = 0, old_experts = 0;
	bool raised = false;
	pid_t pid;

	vm_get_info(&info);
	vm_fill_create(&job->pc, ctx->pool, &vm_geom_default);
	if (!overflow_geometry(&info, ctx->page_size, &job->pc)) {
		/* The default limits keep the product in 64 bits: raise them if sysfs lets us. */
		if (!vm_param_read("max_layers", &old_layers) ||
		    !vm_param_read("max_experts", &old_experts))
			vm_skip("max_layers x max_experts x max_expert_bytes fits in 64 bits and "
				"the parameters are not in sysfs");
		raised =
		    vm_param_write("max_layers", 1u << 20) && vm_param_write("max_experts", 1u << 20);
		vm_get_info(&info);
		if (!raised || !overflow_geometry(&info, ctx->page_size, &job->pc)) {
			vm_param_write("max_layers", old_layers);
			vm_param_write("max_experts", old_experts);
			vm_skip("max_layers x max_experts x max_expert_bytes fits in 64 bits and "
				"cannot be raised at run time");
		}
	}
	before = info;
	/* In a child, so that the limits are restored whatever it does. */
	pid = vm_spawn(overflow_create, job);
	vm_reap(pid, 20000, "the overflowing POOL_CREATE");
	if (raised) {
		vm_param_write("max_layers", old_layers);
		vm_param_write("max_experts", old_experts);
	}
	if (job->ret != -1 || job->err != EOVERFLOW)
		vm_fail_errno_at(__FILE__, __LINE__, "POOL_CREATE with host bytes over 2^64",
				 EOVERFLOW, job->ret, job->err);
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	VM_EQ(after.host_bytes_used, before.host_bytes_used);
}

static void bad_input_create_too_large_enospc(struct vm_ctx *ctx)
{
	struct moecache_info info;
	struct moecache_pool_create pc;
	__u64 page = (__u64)ctx->page_size, eb, room, units;
	__u32 n_experts, n_layers;

	vm_get_info(&info);
	room = info.max_host_bytes - info.host_bytes_used;
	eb = info.max_expert_bytes / page * page;
	VM_ASSERT(eb > 0);
	/* One record more than the room left. */
	units = room / eb + 1;
	n_experts = units < info.max_experts ? (__u32)units : info.max_experts;
	n_layers = (__u32)((units + n_experts - 1) / n_experts);
	if (n_layers > info.max_layers)
		vm_skip("max_host_mb cannot be exceeded within the other limits");
	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	pc.n_layers = n_layers;
	pc.n_experts = n_experts;
	pc.expert_begin = 0;
	pc.expert_end = n_experts;
	pc.expert_bytes = eb;
	CREATE_REFUSED(&pc, ENOSPC);
	vm_expect_no_pool(ctx->pool);
}

static void bad_input_create_mode_flags(struct vm_ctx *ctx)
{
	const __u32 modes[] = {01000, 02600, 04600, 0170600, 0x80000000u};
	struct moecache_pool_create pc;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(modes); i++) {
		vm_fill_create(&pc, ctx->pool, &vm_geom_default);
		pc.mode = modes[i];
		CREATE_REFUSED(&pc, EINVAL);
	}
	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	pc.flags = 1;
	CREATE_REFUSED(&pc, EINVAL);
	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	pc.pad = 1;
	CREATE_REFUSED(&pc, EINVAL);
	vm_expect_no_pool(ctx->pool);
}

static void bad_input_create_exists(struct vm_ctx *ctx)
{
	struct moecache_pool_create pc;
	struct vm_view c;
	struct vm_geom other = vm_geom_default;

	vm_pool_create(ctx->pool, &vm_geom_default);
	other.n_layers = 2;
	other.n_slots = 3;
	vm_fill_create(&pc, ctx->pool, &other);
	CREATE_REFUSED(&pc, EEXIST);
	/* The first pool is untouched. */
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_EQ(c.att.n_layers, vm_geom_default.n_layers);
	VM_EQ(c.att.n_slots, vm_geom_default.n_slots);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_create_max_pools(struct vm_ctx *ctx)
{
	struct moecache_info info;
	struct moecache_pool_create pc;
	struct vm_geom tiny = {
	    .n_layers = 1,
	    .n_experts = 1,
	    .expert_end = 1,
	    .n_slots = 1,
	    .expert_bytes = (__u64)ctx->page_size,
	    .mode = 0600,
	};
	char name[MOECACHE_NAME_LEN];
	unsigned int n, i;

	vm_get_info(&info);
	VM_ASSERT(info.n_pools <= info.max_pools);
	n = info.max_pools - info.n_pools;
	if (n + 1 > VM_MAX_EXTRA_POOLS)
		vm_skip("max_pools %u is more than this test creates", info.max_pools);
	for (i = 1; i <= n; i++) {
		vm_pool_name(ctx, i, name);
		vm_pool_create(name, &tiny);
	}
	vm_pool_name(ctx, n + 1, name);
	vm_fill_create(&pc, name, &tiny);
	CREATE_REFUSED(&pc, ENOSPC);
	for (i = 1; i <= n; i++) {
		vm_pool_name(ctx, i, name);
		vm_pool_destroy(name);
	}
}

static void bad_input_destroy(struct vm_ctx *ctx)
{
	struct moecache_pool_name pn;
	struct moecache_info before, after;
	struct vm_view v;
	struct vm_snap snap;
	int fd = vm_open_dev();
	char missing[MOECACHE_NAME_LEN];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_get_info(&before);
	/* Snapshot through a loader that is gone again when DESTROY is tried. */
	vm_attach(&v, ctx->pool, MOECACHE_ROLE_LOADER);
	vm_snap_take(&v, &snap);
	vm_detach(&v);
	vm_pool_name(ctx, 1, missing);
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", missing);
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn), ENOENT);
	snprintf(pn.name, sizeof(pn.name), "%s", ctx->pool);
	pn.flags = 1;
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn), EINVAL);
	pn.flags = 0;
	pn.pad = 1;
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn), EINVAL);
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	VM_EQ(after.host_bytes_used, before.host_bytes_used);
	vm_attach(&v, ctx->pool, MOECACHE_ROLE_LOADER);
	VM_SNAP_SAME(&v, &snap, "refused POOL_DESTROYs");
	vm_detach(&v);
	close(fd);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_attach(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_attach at;
	const __u32 roles[] = {MOECACHE_ROLE_NONE, 4, MOECACHE_NONE};
	char missing[MOECACHE_NAME_LEN];
	int fd = vm_open_dev();
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(roles); i++) {
		memset(&at, 0, sizeof(at));
		snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
		at.role = roles[i];
		VM_REFUSED(&env.a, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	}
	memset(&at, 0, sizeof(at));
	snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
	at.role = MOECACHE_ROLE_CLIENT;
	/* Flags the ABI does not define. */
	at.flags = MOECACHE_ATTACH_FLAGS_ALL + 1;
	VM_REFUSED(&env.a, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	at.flags = 1u << 31;
	VM_REFUSED(&env.a, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	at.flags = 0;
	memset(at.name, 'a', sizeof(at.name)); /* no NUL */
	VM_REFUSED(&env.a, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	snprintf(at.name, sizeof(at.name), "bad/name");
	VM_REFUSED(&env.a, EINVAL, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	vm_pool_name(ctx, 1, missing);
	snprintf(at.name, sizeof(at.name), "%s", missing);
	VM_REFUSED(&env.a, ENOENT, ioctl(fd, MOECACHE_IOC_ATTACH, &at));
	/* An attached file stays as it is. */
	snprintf(at.name, sizeof(at.name), "%s", ctx->pool);
	VM_REFUSED(&env.a, EALREADY, ioctl(env.c.fd, MOECACHE_IOC_ATTACH, &at));
	at.role = MOECACHE_ROLE_LOADER;
	VM_REFUSED(&env.a, EALREADY, ioctl(env.c.fd, MOECACHE_IOC_ATTACH, &at));
	at.role = MOECACHE_ROLE_AGENT;
	VM_REFUSED(&env.a, EALREADY, ioctl(env.a.fd, MOECACHE_IOC_ATTACH, &at));
	close(fd);
	bi_teardown(ctx, &env);
}

static void bad_input_unbound_enotconn(struct vm_ctx *ctx)
{
	struct bi_env env;
	int fd = vm_open_dev();
	__u32 e = 1, slot = 0;
	struct moecache_acquire acq = {
	    .layer = 0,
	    .count = 1,
	    .experts = (uintptr_t)&e,
	    .slots = (uintptr_t)&slot,
	};
	struct moecache_release rel = {.count = 1, .slots = (uintptr_t)&slot};
	struct moecache_prefetch pf = {.layer = 0, .count = 1, .experts = (uintptr_t)&e};
	struct moecache_evict ev = {.slot = 3, .layer = 0, .expert = 9};
	struct moecache_fill fill = {.slot = 2, .layer = 2, .expert = 3};
	struct moecache_fill_batch batch = {.count = 1, .fills = (uintptr_t)&fill};
	struct moecache_bank bank = {.fd = -1};
	struct moecache_load load = {.op = MOECACHE_LOAD_DONE};
	struct moecache_stats st = {.layer = MOECACHE_NONE};
	struct moecache_acquire_release ar = {.acquire = acq};

	bi_setup(ctx, &env);
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_ACQUIRE, &acq));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_RELEASE, &rel));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_PREFETCH, &pf));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_EVICT, &ev));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_COMMIT, &batch));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_ABORT, &batch));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_BANK_SET, &bank));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_BANK_GET, &bank));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_LOAD, &load));
	VM_REFUSED(&env.a, ENOTCONN, ioctl(fd, MOECACHE_IOC_STATS, &st));
	close(fd);
	bi_teardown(ctx, &env);
}

static void bad_input_read_small_buffer(struct vm_ctx *ctx)
{
	struct bi_env env;
	struct moecache_request req;
	const size_t sizes[] = {1, sizeof(req) / 2, sizeof(req) - 1};
	size_t i;

	bi_setup(ctx, &env);
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		VM_REFUSED(&env.a, EINVAL, read(env.a.fd, &req, sizes[i]));
	/* The queued request is still there, whole. */
	VM_EQ(read(env.a.fd, &req, sizeof(req)), sizeof(req));
	VM_EQ(req.layer, 3);
	VM_EQ(req.expert, 4);
	bi_teardown(ctx, &env);
}

struct mmap_case {
	const char *what;
	__u64 offset;
	size_t len;
	int flags;
};

static void bad_input_mmap(struct vm_ctx *ctx)
{
	struct bi_env env;
	const struct moecache_offsets *off;
	size_t page = (size_t)ctx->page_size;
	__u64 map_end, host_end, all_end;
	struct mmap_case cases[6];
	size_t i;

	bi_setup(ctx, &env);
	off = &env.a.att.off;
	map_end = off->map_offset + (off->map_size + page - 1) / page * page;
	host_end = off->host_offset + off->host_size;
	all_end = map_end > host_end ? map_end : host_end;
	cases[0] = (struct mmap_case){"past the map region's end", off->map_offset,
				      map_end - off->map_offset + page, MAP_SHARED};
	cases[1] =
	    (struct mmap_case){"past the host region's end", host_end - page, 2 * page, MAP_SHARED};
	cases[2] = (struct mmap_case){"after every region", all_end, page, MAP_SHARED};
	cases[3] =
	    (struct mmap_case){"far past every region", all_end + (1ull << 40), page, MAP_SHARED};
	cases[4] =
	    (struct mmap_case){"MAP_PRIVATE of the map region", off->map_offset, page, MAP_PRIVATE};
	cases[5] = (struct mmap_case){"MAP_PRIVATE of the host region", off->host_offset, page,
				      MAP_PRIVATE};
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct vm_snap snap;
		void *p;

		vm_snap_take(&env.a, &snap);
		errno = 0;
		p = mmap(NULL, cases[i].len, PROT_READ, cases[i].flags, env.a.fd,
			 (off_t)cases[i].offset);
		if (p != MAP_FAILED || errno != EINVAL)
			VM_FAIL("mmap %s: expected EINVAL, got %s", cases[i].what,
				p == MAP_FAILED ? vm_errname(errno) : "success");
		VM_SNAP_SAME(&env.a, &snap, cases[i].what);
	}
	/* An unaligned offset never reaches a mapping. */
	VM_ASSERT(mmap(NULL, page, PROT_READ, MAP_SHARED, env.a.fd,
		       (off_t)(off->host_offset + 512)) == MAP_FAILED &&
		  errno == EINVAL);
	bi_teardown(ctx, &env);
}

static const struct vm_test bad_input_tests[] = {
    VM_TEST(bad_input_struct_size,
	    "a shorter struct is EINVAL and a longer one with a non-zero tail E2BIG, on any file"),
    VM_TEST(bad_input_nsfs_ioctl_not_ours, "nsfs's NS_GET_USERNS and NS_GET_PARENT are ENOTTY"),
    VM_TEST(bad_input_unknown_ioctl_enotty, "unknown numbers, directions and magics are ENOTTY"),
    VM_TEST(bad_input_null_struct_efault,
	    "every ioctl with a NULL or inaccessible argument struct is EFAULT"),
    VM_TEST(bad_input_bad_list_pointer_efault,
	    "unreadable or unwritable list pointers and read() buffers are EFAULT"),
    VM_TEST(bad_input_unwritable_result_efault,
	    "GET_INFO, STATS and BANK_GET into a read-only struct are EFAULT and leave no fd"),
    VM_TEST(bad_input_acquire_unwritable_result,
	    "ACQUIRE whose struct cannot be written back is EFAULT with nothing pinned or counted"),
    VM_TEST(bad_input_prefetch_unwritable_result,
	    "PREFETCH whose struct cannot be written back is EFAULT with nothing queued"),
    VM_TEST(bad_input_evict_unwritable_result,
	    "EVICT whose struct cannot be written back is EFAULT with nothing evicted"),
    VM_TEST(bad_input_attach_unwritable_result,
	    "ATTACH whose struct cannot be written back is EFAULT and leaves the file unbound"),
    VM_TEST(bad_input_acquire_layer_range, "ACQUIRE of a layer out of range is EINVAL"),
    VM_TEST(bad_input_acquire_expert_range,
	    "ACQUIRE of an expert outside the local range is EINVAL and pins nothing"),
    VM_TEST(bad_input_acquire_count, "ACQUIRE count 0 is EINVAL, over max_batch E2BIG"),
    VM_TEST(bad_input_acquire_repeated_expert, "ACQUIRE of a repeated expert id is EINVAL"),
    VM_TEST(bad_input_acquire_flags_reserved, "ACQUIRE with unknown flags, KEEP_WAITING alone, "
					      "NO_QUEUE with WAIT or reserved set is EINVAL"),
    VM_TEST(bad_input_acquire_release,
	    "ACQUIRE_RELEASE validates its release and its acquire before doing either"),
    VM_TEST(bad_input_prefetch, "PREFETCH validates layer, experts, count and flags"),
    VM_TEST(bad_input_release_not_pinned,
	    "RELEASE of a slot this file did not pin (as often as listed) is EINVAL"),
    VM_TEST(bad_input_release_args, "RELEASE validates slots, count and flags"),
    VM_TEST(bad_input_evict_args, "EVICT validates slot, layer, expert and flags"),
    VM_TEST(bad_input_evict_pinned_ebusy, "EVICT of a pinned slot is EBUSY"),
    VM_TEST(bad_input_evict_filling_ebusy, "EVICT of a filling slot is EBUSY"),
    VM_TEST(bad_input_evict_target_present_eexist,
	    "EVICT for an expert resident or filling elsewhere is EEXIST"),
    VM_TEST(bad_input_commit_abort_not_filling,
	    "COMMIT/ABORT of fills that do not match a FILLING slot are EINVAL, all or nothing"),
    VM_TEST(bad_input_commit_abort_args, "COMMIT/ABORT validate count and flags"),
    VM_TEST(bad_input_bank_set, "BANK_SET validates stride, size, backend, flags and fd"),
    VM_TEST(bad_input_bank_replace_pinned_ebusy,
	    "replacing the bank while a slot is pinned is EBUSY"),
    VM_TEST(bad_input_bank_get_without_bank, "BANK_GET before BANK_SET is ENODATA and makes no fd"),
    VM_TEST(bad_input_load, "LOAD with an unknown op or flags is EINVAL"),
    VM_TEST(bad_input_stats, "STATS of a layer out of range or with flags is EINVAL"),
    VM_TEST(bad_input_create_name,
	    "POOL_CREATE with an empty, unterminated or bad-char name is EINVAL"),
    VM_TEST(bad_input_create_geometry, "POOL_CREATE with a field out of its range is EINVAL"),
    VM_TEST(bad_input_create_unaligned_bytes,
	    "POOL_CREATE with expert_bytes not a page multiple is EINVAL"),
    VM_TEST(bad_input_create_overflow,
	    "POOL_CREATE whose host bytes overflow 64 bits is EOVERFLOW"),
    VM_TEST(bad_input_create_too_large_enospc,
	    "POOL_CREATE of more host bytes than max_host_mb leaves is ENOSPC"),
    VM_TEST(bad_input_create_mode_flags,
	    "POOL_CREATE with non-permission mode bits, flags or pad is EINVAL"),
    VM_TEST(bad_input_create_exists, "POOL_CREATE of an existing name is EEXIST"),
    VM_TEST(bad_input_create_max_pools, "POOL_CREATE beyond max_pools is ENOSPC"),
    VM_TEST(bad_input_destroy,
	    "POOL_DESTROY of a missing pool is ENOENT, with flags or pad EINVAL"),
    VM_TEST(
	bad_input_attach,
	"ATTACH with a bad role, flags or name is EINVAL, a missing pool ENOENT, twice EALREADY"),
    VM_TEST(bad_input_unbound_enotconn, "pool ioctls on an unattached file are ENOTCONN"),
    VM_TEST(bad_input_read_small_buffer,
	    "read() with a buffer smaller than a request is EINVAL and loses nothing"),
    VM_TEST(bad_input_mmap,
	    "mmap beyond a region, across regions, MAP_PRIVATE or unaligned is EINVAL"),
};

const struct vm_suite vm_bad_input_suite = {bad_input_tests, ARRAY_SIZE(bad_input_tests)};
