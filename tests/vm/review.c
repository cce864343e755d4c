// SPDX-License-Identifier: GPL-2.0
/*
 * Findings of a hostile-tenant review of the driver (docs/abi.md,
 * "Security model"): what a client with read permission on a pool could
 * corrupt, wedge, exhaust or learn. Each test names the hole it pins.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

/* ---- attach limits: clients cannot lock the agent out ------------------ */

struct flood_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	unsigned int want;     /* client files to attach */
	unsigned int root_fds; /* of them, files opened as root before dropping */
	unsigned int attached;
	int last_ret; /* of the attach that stopped it, 0 if none did */
	struct vm_gate ready;
	struct vm_gate release;
};

/* As NOBODY: attaches up to want client files and holds them. */
static void flood_main(void *arg)
{
	struct flood_job *job = arg;
	struct vm_view v[16];
	int root_fd[4], fd;
	unsigned int i;

	VM_ASSERT(job->root_fds <= ARRAY_SIZE(root_fd));
	for (i = 0; i < job->root_fds; i++)
		root_fd[i] = open(job->node, O_RDWR | O_CLOEXEC);
	fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	job->last_ret = 0;
	for (i = 0; i < job->want && i < ARRAY_SIZE(v); i++) {
		if (i < job->root_fds) {
			if (fd >= 0)
				close(fd);
			fd = root_fd[i];
		} else if (fd < 0) {
			fd = open(job->node, O_RDWR | O_CLOEXEC);
		}
		VM_ASSERT(fd >= 0);
		job->last_ret = vm_try_attach_fd(&v[i], fd, job->pool, MOECACHE_ROLE_CLIENT);
		if (job->last_ret)
			break;
		fd = -1;
		job->attached++;
	}
	if (fd >= 0)
		close(fd);
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->release, 20000, "the test to let go");
	for (i = 0; i < job->attached; i++)
		vm_detach(&v[i]);
}

static struct flood_job *flood_start(struct vm_ctx *ctx, unsigned int want, unsigned int root_fds,
				     pid_t *pid)
{
	struct flood_job *job = vm_shared(sizeof(*job));

	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_get_node(job->node, sizeof(job->node));
	job->want = want;
	job->root_fds = root_fds;
	vm_gate_open(&job->ready);
	vm_gate_open(&job->release);
	*pid = vm_spawn(flood_main, job);
	vm_gate_wait(&job->ready, 10000, "the flood to attach");
	return job;
}

static void flood_end(struct flood_job *job, pid_t pid)
{
	vm_gate_pass(&job->release);
	vm_reap_ok(pid, 10000, "the flooding client");
	vm_put_node(job->node);
}

/*
 * Pins: max_pool_files counted every role, so read-only clients could
 * fill the pool and a restarted agent's ATTACH was EMFILE: the pool
 * wedged.
 */
static void permission_client_file_flood_agent_still_attaches(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	unsigned long long old_pool;
	struct flood_job *job;
	struct vm_view a, l, c;
	int ret_agent, ret_loader, ret_client;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_pool = vm_param_set("max_pool_files", 2);
	job = flood_start(ctx, 2, 0, &pid);
	ret_agent = vm_try_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	ret_loader = vm_try_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	ret_client = vm_try_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_param_set("max_pool_files", old_pool);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	/* The clients' limit is the clients' only. */
	VM_EQ(ret_agent, 0);
	VM_EQ(ret_loader, 0);
	VM_EQ(ret_client, -EMFILE);
	vm_detach(&l);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: one user with read permission could take every client place of a
 * pool (max_pool_files) and lock the other tenants out.
 */
static void permission_client_files_per_user_bound(struct vm_ctx *ctx)
{
	unsigned long long old_user;
	struct vm_geom g = vm_geom_default;
	struct flood_job *job;
	struct vm_view c[3];
	unsigned int i;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_user = vm_param_set("max_user_pool_files", 2);
	job = flood_start(ctx, 3, 0, &pid);
	/* The owner is not bound by it. */
	for (i = 0; i < ARRAY_SIZE(c); i++)
		if (vm_try_attach(&c[i], ctx->pool, MOECACHE_ROLE_CLIENT))
			break;
	vm_param_set("max_user_pool_files", old_user);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	VM_EQ(job->last_ret, -EMFILE);
	VM_EQ(i, ARRAY_SIZE(c));
	for (i = 0; i < ARRAY_SIZE(c); i++)
		vm_detach(&c[i]);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: files root opened and handed over unattached counted as root's, so
 * the user attaching them had max_user_pool_files more places.
 */
static void permission_client_files_per_user_handed_files(struct vm_ctx *ctx)
{
	unsigned long long old_user;
	struct vm_geom g = vm_geom_default;
	struct flood_job *job;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_user = vm_param_set("max_user_pool_files", 2);
	job = flood_start(ctx, 3, 2, &pid);
	vm_param_set("max_user_pool_files", old_user);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	VM_EQ(job->last_ret, -EMFILE);
	vm_pool_destroy(ctx->pool);
}

/* ---- GET_INFO tells only what the caller may see ----------------------- */

struct info_job {
	char node[64];
	struct moecache_info info;
};

static void info_main(void *arg)
{
	struct info_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);

	memset(&job->info, 0, sizeof(job->info));
	VM_OK(ioctl(fd, MOECACHE_IOC_GET_INFO, &job->info));
	close(fd);
}

/* GET_INFO as NOBODY, in a child. */
static void info_as_nobody(struct info_job *job)
{
	vm_reap_ok(vm_spawn(info_main, job), 10000, "GET_INFO as nobody");
}

/*
 * Pins: GET_INFO counted every pool and its host bytes for anyone who
 * may open the device, root's mode 0600 pools included.
 */
static void permission_info_hides_invisible_pools(struct vm_ctx *ctx)
{
	struct info_job *job = vm_shared(sizeof(*job));
	struct vm_geom g = vm_geom_default;
	struct moecache_info before, hidden, shown, root;
	char other[MOECACHE_NAME_LEN];

	vm_get_node(job->node, sizeof(job->node));
	info_as_nobody(job);
	before = job->info;
	vm_pool_create(ctx->pool, &vm_geom_default); /* root's, 0600 */
	info_as_nobody(job);
	hidden = job->info;
	vm_pool_name(ctx, 1, other);
	g.mode = 0644;
	vm_pool_create(other, &g);
	info_as_nobody(job);
	shown = job->info;
	vm_get_info(&root);
	vm_pool_destroy(other);
	vm_pool_destroy(ctx->pool);
	vm_put_node(job->node);
	VM_EQ(hidden.n_pools, before.n_pools);
	VM_EQ(hidden.host_bytes_used, before.host_bytes_used);
	VM_EQ(shown.n_pools, before.n_pools + 1);
	VM_ASSERT(shown.host_bytes_used > before.host_bytes_used);
	/* The limits are no secret, and root still sees every pool. */
	VM_EQ(shown.max_pools, root.max_pools);
	VM_EQ(root.n_pools, shown.n_pools + 1);
}

/* ---- BANK_SET: what a CUDA bank may be --------------------------------- */

static void cuda_bank_desc(const struct vm_view *a, int fd, struct moecache_bank *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	b->backend = MOECACHE_BACKEND_CUDA;
	b->slot_stride = a->att.expert_bytes;
	b->bank_bytes = b->slot_stride * a->att.n_slots;
}

/*
 * Pins: BANK_SET of a CUDA bank took any file, so an AF_UNIX socket
 * carrying a /dev/moecache fd of the same pool made the pool hold a file
 * whose release needed the pool gone: never destroyable, rmmod failed.
 */
static void bad_input_bank_set_cuda_unix_socket(struct vm_ctx *ctx)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg;
	struct cmsghdr *cm;
	struct moecache_bank b;
	struct vm_view a, c;
	int sv[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	memset(&msg, 0, sizeof(msg));
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c.fd, sizeof(int));
	/* c's file is in flight on the socket, never received. */
	VM_EQ(sendmsg(sv[0], &msg, 0), 1);
	cuda_bank_desc(&a, sv[1], &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	close(sv[0]);
	close(sv[1]);
	vm_detach(&c);
	vm_detach(&a);
	/* Nothing of the pool is left in a file: it goes. */
	vm_pool_destroy(ctx->pool);
}

/* The kinds of file no CUDA exporter hands out. */
enum cuda_wrong { CW_PIPE, CW_FIFO_W, CW_DIR, CW_EVENTFD, CW_SOCKET };

static const struct {
	enum cuda_wrong kind;
	const char *what;
} cuda_wrong_files[] = {
    {CW_PIPE, "a pipe"},
    {CW_FIFO_W, "the write end of a pipe"},
    {CW_DIR, "a directory"},
    {CW_EVENTFD, "an eventfd (anon inode)"},
    {CW_SOCKET, "a datagram socket"},
};

static int cuda_wrong_open(enum cuda_wrong kind, int *extra)
{
	int p[2], fd = -1;

	*extra = -1;
	switch (kind) {
	case CW_PIPE:
	case CW_FIFO_W:
		VM_OK(pipe2(p, O_CLOEXEC));
		fd = kind == CW_PIPE ? p[0] : p[1];
		*extra = kind == CW_PIPE ? p[1] : p[0];
		break;
	case CW_DIR:
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		break;
	case CW_EVENTFD:
		fd = eventfd(0, EFD_CLOEXEC);
		break;
	case CW_SOCKET:
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		break;
	}
	VM_ASSERT(fd >= 0);
	return fd;
}

/*
 * Pins: a CUDA bank could be any file. A memfd (the exporter of the test
 * builds' fake CUDA driver) is still taken.
 */
static void bad_input_bank_set_cuda_file_types(struct vm_ctx *ctx)
{
	struct moecache_bank b;
	struct vm_view a;
	unsigned int i;
	int fd, extra, good;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	for (i = 0; i < ARRAY_SIZE(cuda_wrong_files); i++) {
		fd = cuda_wrong_open(cuda_wrong_files[i].kind, &extra);
		cuda_bank_desc(&a, fd, &b);
		errno = 0;
		if (ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b) != -1 || errno != EINVAL)
			VM_FAIL("BANK_SET CUDA of %s: %s, want EINVAL", cuda_wrong_files[i].what,
				errno ? vm_errname(errno) : "taken");
		close(fd);
		if (extra >= 0)
			close(extra);
	}
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	good = memfd_create("moecache-vmtest-cuda", MFD_CLOEXEC);
	VM_ASSERT(good >= 0);
	cuda_bank_desc(&a, good, &b);
	VM_OK(ftruncate(good, (off_t)b.bank_bytes));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	close(good);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- reserved fields must be zero -------------------------------------- */

enum reserved_field { RF_PAD, RF_RESERVED0, RF_RESERVED1, RF_RESERVED2, RF_BANK };

static const struct {
	enum reserved_field field;
	const char *what;
} stats_reserved[] = {
    {RF_PAD, "pad"},
    {RF_RESERVED0, "reserved[0]"},
    {RF_RESERVED1, "reserved[1]"},
    {RF_RESERVED2, "reserved[2]"},
    {RF_BANK, "bank without MOECACHE_STATS_BANK"},
};

/*
 * Pins: STATS took non-zero pad and reserved[] and ignored bank without
 * MOECACHE_STATS_BANK, and BANK_GET ignored flags, so neither could give
 * those bits a meaning later.
 */
static void bad_input_stats_reserved_nonzero(struct vm_ctx *ctx)
{
	struct moecache_stats st;
	struct moecache_bank bank;
	struct vm_view a, c;
	unsigned int i;
	int memfd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	for (i = 0; i < ARRAY_SIZE(stats_reserved); i++) {
		memset(&st, 0, sizeof(st));
		st.layer = MOECACHE_NONE;
		switch (stats_reserved[i].field) {
		case RF_PAD:
			st.pad = 1;
			break;
		case RF_RESERVED0:
		case RF_RESERVED1:
		case RF_RESERVED2:
			st.reserved[stats_reserved[i].field - RF_RESERVED0] = 1;
			break;
		case RF_BANK:
			st.bank = 1;
			break;
		}
		errno = 0;
		if (ioctl(c.fd, MOECACHE_IOC_STATS, &st) != -1 || errno != EINVAL)
			VM_FAIL("STATS with non-zero %s: %s, want EINVAL", stats_reserved[i].what,
				errno ? vm_errname(errno) : "taken");
	}
	/* All zero: taken. */
	vm_stats(&c, MOECACHE_NONE, &st);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	memset(&bank, 0, sizeof(bank));
	bank.flags = 1;
	VM_REFUSED(&c, EINVAL, ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank));
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank));
	close(bank.fd);
	close(memfd);
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

static const struct vm_test review_tests[] = {
    VM_TEST(concurrency_release_during_wait_keeps_other_pins,
	    "a failed WAIT whose pin another thread released leaves another client's pin alone"),
    VM_TEST(bad_input_rel_all_during_wait_no_underflow,
	    "REL_ALL during a WAIT that then times out: no pin count wraps, the file pins again"),
    VM_TEST(permission_client_file_flood_agent_still_attaches,
	    "clients filling max_pool_files do not keep an agent or a loader from attaching"),
    VM_TEST(permission_client_files_per_user_bound,
	    "a user other than the owner attaches at most max_user_pool_files clients (EMFILE)"),
    VM_TEST(permission_client_files_per_user_handed_files,
	    "files root opened count against the user that attaches them, not root"),
    VM_TEST(permission_info_hides_invisible_pools,
	    "GET_INFO counts only the pools and host bytes the caller may see"),
    VM_TEST(bad_input_bank_set_cuda_unix_socket,
	    "BANK_SET CUDA of an AF_UNIX socket carrying a pool's fd is EINVAL; the pool goes"),
    VM_TEST(bad_input_bank_set_cuda_file_types,
	    "a CUDA bank is no pipe, directory, anon inode or socket (EINVAL); a memfd is taken"),
    VM_TEST(bad_input_stats_reserved_nonzero,
	    "STATS with non-zero pad, reserved[] or bank without STATS_BANK, BANK_GET with flags: "
	    "EINVAL"),
    VM_TEST_TIMEOUT(
	perf_commit_asked_idle_files,
	"a COMMIT answering a miss costs under 1.5x with 1000 idle client files attached", 120),
};

const struct vm_suite vm_review_suite = {review_tests, ARRAY_SIZE(review_tests)};
