// SPDX-License-Identifier: GPL-2.0
/*
 * Tenant isolation and resource limits (docs/abi.md, "Security model"): a
 * client with read permission on a pool cannot write its bank, wedge it or
 * starve the other clients. Each test names the hole it pins.
 */
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

/* ---- a file carries its opener's rights ------------------------------- */

/*
 * The device opened with effective uid NOBODY and no capability, then root
 * again (the saved uid): the fd a set-uid program inherits from an
 * unprivileged parent. The rights of a call on it are its opener's too.
 */
static int open_as_nobody_then_root(char *node, size_t len)
{
	int fd, err;

	vm_get_node(node, len);
	VM_OK(setresuid(-1, NOBODY, 0));
	fd = open(node, O_RDWR | O_CLOEXEC);
	err = errno;
	VM_OK(setresuid(-1, 0, -1));
	VM_EQ(geteuid(), 0);
	if (fd < 0)
		VM_FAIL("open %s as euid %u: %s", node, NOBODY, vm_errname(err));
	return fd;
}

static void permission_deputy_file_cannot_create(struct vm_ctx *ctx)
{
	struct moecache_pool_create pc;
	char node[64];
	int fd = open_as_nobody_then_root(node, sizeof(node));

	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc), EPERM);
	vm_expect_no_pool(ctx->pool);
	close(fd);
	vm_put_node(node);
}

static void permission_deputy_file_cannot_destroy(struct vm_ctx *ctx)
{
	struct moecache_pool_name pn;
	char node[64];
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	fd = open_as_nobody_then_root(node, sizeof(node));
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", ctx->pool);
	/* Its opener has no right on the pool: not even to know it exists. */
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn), ENOENT);
	close(fd);
	vm_put_node(node);
	/* Still there: root's own file destroys it. */
	vm_pool_destroy(ctx->pool);
}

static void permission_deputy_file_cannot_attach(struct vm_ctx *ctx)
{
	struct vm_view v;
	char node[64];
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	fd = open_as_nobody_then_root(node, sizeof(node));
	VM_EQ(vm_try_attach_fd(&v, fd, ctx->pool, MOECACHE_ROLE_CLIENT), -ENOENT);
	close(fd);
	vm_put_node(node);
	vm_pool_destroy(ctx->pool);
}

/* ---- the bank is read-only for clients -------------------------------- */

struct bank_probe {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	int attach_ret;
	int bank_get_ret;
	unsigned char seen;	/* slot 0's first byte through a read-only mapping */
	int mmap_rw_err;	/* errno of a writable shared mmap, 0 if it worked */
	int mprotect_err;	/* errno of mprotect(PROT_WRITE) on a read mapping */
	int pwrite_err;		/* errno of pwrite() on the fd */
	int reopen_err;		/* errno of open("/proc/self/fd/N", O_RDWR), 0 if it worked */
	int reopen_pwrite_err;
	int reopen_mmap_rw_err;
	int wrote;		/* how many of the ways above wrote a byte */
};

static int try_write_mapping(int fd, size_t len, int *err)
{
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		*err = errno;
		return 0;
	}
	*err = 0;
	p[0] = 0xee;
	munmap(p, len);
	return 1;
}

static int try_pwrite(int fd, int *err)
{
	unsigned char b = 0xee;

	if (pwrite(fd, &b, 1, 0) == 1) {
		*err = 0;
		return 1;
	}
	*err = errno;
	return 0;
}

static void bank_probe_main(void *arg)
{
	struct bank_probe *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	struct moecache_bank bank;
	struct vm_view c;
	unsigned char *ro;
	char path[64];
	int rw;

	job->attach_ret = vm_try_attach_fd(&c, fd, job->pool, MOECACHE_ROLE_CLIENT);
	if (job->attach_ret) {
		close(fd);
		return;
	}
	memset(&bank, 0, sizeof(bank));
	job->bank_get_ret = ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank) < 0 ? -errno : 0;
	if (job->bank_get_ret)
		goto out;
	ro = mmap(NULL, bank.bank_bytes, PROT_READ, MAP_SHARED, bank.fd, 0);
	VM_ASSERT(ro != MAP_FAILED);
	job->seen = ro[0];
	if (mprotect(ro, bank.bank_bytes, PROT_READ | PROT_WRITE) == 0) {
		ro[0] = 0xee;
		job->wrote++;
	} else {
		job->mprotect_err = errno;
	}
	munmap(ro, bank.bank_bytes);
	job->wrote += try_write_mapping(bank.fd, bank.bank_bytes, &job->mmap_rw_err);
	job->wrote += try_pwrite(bank.fd, &job->pwrite_err);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", bank.fd);
	rw = open(path, O_RDWR | O_CLOEXEC);
	job->reopen_err = rw < 0 ? errno : 0;
	if (rw >= 0) {
		job->wrote += try_pwrite(rw, &job->reopen_pwrite_err);
		job->wrote += try_write_mapping(rw, bank.bank_bytes, &job->reopen_mmap_rw_err);
		close(rw);
	}
	close(bank.fd);
out:
	vm_detach(&c);
}

static void expect_refused(int err, const char *what)
{
	if (err == 0)
		VM_FAIL("%s succeeded", what);
}

/*
 * Pins: a client's BANK_GET memfd could be reopened read-write through
 * /proc/self/fd and written with pwrite() or a writable mapping.
 */
static void permission_client_bank_read_only(struct vm_ctx *ctx)
{
	struct bank_probe *job = vm_shared(sizeof(*job));
	struct vm_geom g = vm_geom_default;
	struct moecache_bank bank;
	unsigned char *bytes;
	struct vm_view a;
	int memfd;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	bytes[0] = 0x5a;
	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_get_node(job->node, sizeof(job->node));
	vm_reap_ok(vm_spawn(bank_probe_main, job), 10000, "the unprivileged client");
	vm_put_node(job->node);
	VM_EQ(job->attach_ret, 0);
	VM_EQ(job->bank_get_ret, 0);
	/* It reads what the agent wrote... */
	VM_EQ(job->seen, 0x5a);
	/* ...and no way it has of writing the bank works. */
	expect_refused(job->mprotect_err, "mprotect(PROT_WRITE) of the client's bank mapping");
	expect_refused(job->mmap_rw_err, "a writable shared mmap of the client's bank fd");
	expect_refused(job->pwrite_err, "pwrite() on the client's bank fd");
	if (job->reopen_err == 0) {
		expect_refused(job->reopen_pwrite_err, "pwrite() on the bank reopened O_RDWR");
		expect_refused(job->reopen_mmap_rw_err,
			       "a writable mmap of the bank reopened O_RDWR");
	}
	VM_EQ(job->wrote, 0);
	VM_EQ(bytes[0], 0x5a);
	munmap(bytes, bank.bank_bytes);
	close(memfd);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

struct restart_job {
	char pool[MOECACHE_NAME_LEN];
	struct vm_gate ready;
	struct vm_gate never;
};

static void first_agent_main(void *arg)
{
	struct restart_job *job = arg;
	struct moecache_bank bank;
	struct vm_view a;
	unsigned char *bytes;
	int memfd;

	vm_attach(&a, job->pool, MOECACHE_ROLE_AGENT);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	bytes = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(bytes != MAP_FAILED);
	bytes[0] = 1;
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->never, 120000, "the kill");
}

/* The bank the dead agent set stays writable for the agent after it. */
static void lifetime_agent_restart_writes_bank(struct vm_ctx *ctx)
{
	struct restart_job *job = vm_shared(sizeof(*job));
	struct moecache_bank bank, cbank;
	unsigned char *rw, *ro;
	struct vm_view a, c;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_gate_open(&job->ready);
	vm_gate_open(&job->never);
	pid = vm_spawn(first_agent_main, job);
	vm_gate_wait(&job->ready, 10000, "the first agent's bank");
	vm_kill(pid, "the first agent");

	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_GET, &bank));
	rw = mmap(NULL, bank.bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bank.fd, 0);
	VM_ASSERT_MSG(rw != MAP_FAILED, "the new agent cannot map the bank read-write: %s",
		      vm_errname(errno));
	VM_EQ(rw[0], 1);
	rw[0] = 2;
	memset(&cbank, 0, sizeof(cbank));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &cbank));
	ro = mmap(NULL, cbank.bank_bytes, PROT_READ, MAP_SHARED, cbank.fd, 0);
	VM_ASSERT(ro != MAP_FAILED);
	VM_EQ(ro[0], 2);
	munmap(ro, cbank.bank_bytes);
	munmap(rw, bank.bank_bytes);
	close(cbank.fd);
	close(bank.fd);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- BANK_SET checks what it is given ---------------------------------- */

static void bank_desc(const struct vm_view *a, int fd, __u32 backend, struct moecache_bank *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	b->backend = backend;
	b->slot_stride = a->att.expert_bytes;
	b->bank_bytes = b->slot_stride * a->att.n_slots;
}

/*
 * Pins: BANK_SET took a /dev/moecache fd, whose release needs the pool
 * gone: the pool could never be destroyed and rmmod failed.
 */
static void bad_input_bank_set_device_fd(struct vm_ctx *ctx)
{
	struct moecache_bank b;
	struct vm_view a;
	int dev = vm_open_dev();

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	bank_desc(&a, a.fd, MOECACHE_BACKEND_CPU, &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	bank_desc(&a, dev, MOECACHE_BACKEND_CUDA, &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	close(dev);
	vm_detach(&a);
	/* Nothing of the pool is left in a file: it goes. */
	vm_pool_destroy(ctx->pool);
}

/* A CPU bank must be a shmem file (memfd) at least as large as it says. */
static void bad_input_bank_set_wrong_file(struct vm_ctx *ctx)
{
	struct moecache_bank b;
	struct vm_view a;
	int pipefd[2], small, good;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_OK(pipe(pipefd));
	bank_desc(&a, pipefd[0], MOECACHE_BACKEND_CPU, &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* Smaller than bank_bytes says: a client mapping it all would fault. */
	small = memfd_create("moecache-vmtest-small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	VM_ASSERT(small >= 0);
	VM_OK(ftruncate(small, (off_t)b.bank_bytes / 2));
	VM_OK(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	bank_desc(&a, small, MOECACHE_BACKEND_CPU, &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* A memfd is no dma-buf. */
	good = memfd_create("moecache-vmtest-good", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	VM_ASSERT(good >= 0);
	bank_desc(&a, good, MOECACHE_BACKEND_ROCM, &b);
	VM_OK(ftruncate(good, (off_t)b.bank_bytes));
	VM_OK(fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* The same file as a CPU bank is fine. */
	b.backend = MOECACHE_BACKEND_CPU;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	close(good);
	close(small);
	close(pipefd[0]);
	close(pipefd[1]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * A dma-buf of `bytes` from /dev/udmabuf over a sealed memfd, or -1 with
 * errno set (ENOENT: the kernel has no udmabuf).
 */
static int udmabuf_of(size_t bytes)
{
	struct udmabuf_create c;
	int dev, memfd, buf;

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -1;
	memfd = memfd_create("moecache-vmtest-dmabuf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	VM_ASSERT(memfd >= 0);
	VM_OK(ftruncate(memfd, (off_t)bytes));
	VM_OK(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK));
	memset(&c, 0, sizeof(c));
	c.memfd = (__u32)memfd;
	c.flags = UDMABUF_FLAGS_CLOEXEC;
	c.size = bytes;
	buf = ioctl(dev, UDMABUF_CREATE, &c);
	close(memfd);
	close(dev);
	return buf;
}

/*
 * A ROCm bank is a dma-buf at least bank_bytes long: one from udmabuf of
 * that size is taken, a shorter one is EINVAL.
 */
static void basic_bank_set_rocm_dmabuf(struct vm_ctx *ctx)
{
	struct moecache_bank b;
	struct vm_view a;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes;
	int whole, half;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	bank_desc(&a, -1, MOECACHE_BACKEND_ROCM, &b);
	bytes = ((size_t)b.bank_bytes + page - 1) / page * page;
	whole = udmabuf_of(bytes);
	if (whole < 0 && errno == ENOENT) {
		vm_detach(&a);
		vm_pool_destroy(ctx->pool);
		vm_skip("this kernel has no /dev/udmabuf");
	}
	VM_ASSERT(whole >= 0);
	/* The default geometry's bank is 8 slots of 64 KiB: pages to spare. */
	VM_ASSERT(bytes >= 2 * page);
	half = udmabuf_of(bytes / 2 / page * page);
	VM_ASSERT(half >= 0);
	b.fd = half;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	b.fd = whole;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_ASSERT(a.hdr->flags & MOECACHE_POOL_BANK);
	close(half);
	close(whole);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- WAIT is all or nothing -------------------------------------------- */

/*
 * Pins: ACQUIRE|WAIT for more experts than the bank has slots waited out
 * its timeout holding pins instead of failing at once.
 */
static void bad_input_acquire_wait_more_than_slots(struct vm_ctx *ctx)
{
	__u32 experts[16], slots[16], i;
	struct vm_view a, c;
	struct vm_snap snap;
	uint64_t t0;
	int ret;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_ASSERT(c.att.n_slots < ARRAY_SIZE(experts) && c.n_local > c.att.n_slots);
	vm_fill(&a, 0, 0, 0);
	for (i = 0; i <= c.att.n_slots; i++)
		experts[i] = i;
	vm_snap_take(&a, &snap);
	t0 = vm_now_ms();
	ret = vm_try_acquire(&c, 0, experts, c.att.n_slots + 1, slots, MOECACHE_ACQ_WAIT, 3000,
			     NULL);
	if (ret != -EINVAL)
		VM_FAIL("ACQUIRE|WAIT of n_slots + 1 experts: %s after %llu ms, want EINVAL",
			ret ? vm_errname(-ret) : "success",
			(unsigned long long)(vm_now_ms() - t0));
	VM_SNAP_SAME(&a, &snap, "the refused ACQUIRE|WAIT");
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static int waiter_ret(const struct vm_waiter *w)
{
	return __atomic_load_n(&w->ret, __ATOMIC_ACQUIRE);
}

/* The oldest queued request of the given expert list, removed from reqs. */
static bool take_request(struct moecache_request *reqs, size_t *n, const __u32 *want, __u32 n_want,
			 struct moecache_request *out)
{
	size_t i;
	__u32 k;

	for (i = 0; i < *n; i++)
		for (k = 0; k < n_want; k++)
			if (reqs[i].expert == want[k]) {
				*out = reqs[i];
				memmove(&reqs[i], &reqs[i + 1], (*n - i - 1) * sizeof(*reqs));
				(*n)--;
				return true;
			}
	return false;
}

/* Fills the first slot from *hand on that is not pinned; false if all are. */
static bool fill_next_free(const struct vm_view *a, __u32 *hand, const struct moecache_request *r)
{
	__u32 s;

	for (s = 0; s < a->att.n_slots; s++) {
		struct moecache_evict ev = {
		    .slot = (*hand + s) % a->att.n_slots,
		    .layer = r->layer,
		    .expert = r->expert,
		};

		if (ioctl(a->fd, MOECACHE_IOC_EVICT, &ev) == 0) {
			vm_commit1(a, ev.slot, ev.layer, ev.expert, 0);
			*hand = ev.slot + 1;
			return true;
		}
		/* Asked again while it was being filled: nothing to do. */
		if (errno == EEXIST)
			return true;
		VM_ASSERT_MSG(errno == EBUSY, "EVICT: %s", vm_errname(errno));
	}
	return false;
}

/*
 * Pins: two clients whose WAITs together need more than the bank's slots
 * blocked each other, each holding the pins of what it already had. The
 * test's agent serves the two alternately, one fill at a time.
 */
static void concurrency_wait_demands_exceed_bank(struct vm_ctx *ctx)
{
	__u32 want[2][5] = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}}, hand = 0, turn = 0;
	struct moecache_request reqs[64], r;
	struct vm_waiter *w[2];
	size_t n = 0, got;
	uint64_t until;
	struct vm_view a;
	pid_t pid[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_ASSERT(a.att.n_slots == 8);
	for (turn = 0; turn < 2; turn++) {
		w[turn] = vm_waiter_new(ctx->pool, 0, want[turn], 5, MOECACHE_ACQ_WAIT, 15000);
		pid[turn] = vm_waiter_start(w[turn]);
		vm_wait_sleeping(pid[turn], 5000, "a waiter");
	}
	turn = 0;
	until = vm_now_ms() + 20000;
	while (vm_now_ms() < until && (waiter_ret(w[0]) == 1 || waiter_ret(w[1]) == 1)) {
		got = vm_read_requests(&a, reqs + n, ARRAY_SIZE(reqs) - n, 20);
		n += got;
		if (!take_request(reqs, &n, want[turn], 5, &r) &&
		    !take_request(reqs, &n, want[turn ^= 1], 5, &r))
			continue;
		if (!fill_next_free(&a, &hand, &r))
			reqs[n++] = r;
		turn ^= 1;
		/* Let the waiters run, as a real copy would. */
		vm_sleep_ms(5);
	}
	vm_reap_ok(pid[0], 20000, "waiter a");
	vm_reap_ok(pid[1], 20000, "waiter b");
	if (w[0]->ret || w[1]->ret)
		VM_FAIL("the waiters got %s and %s", w[0]->ret ? vm_errname(-w[0]->ret) : "success",
			w[1]->ret ? vm_errname(-w[1]->ret) : "success");
	VM_EQ(w[0]->acq.n_pinned, 5);
	VM_EQ(w[1]->acq.n_pinned, 5);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- the agent role belongs to a process ------------------------------ */

static int try_destroy(const char *pool)
{
	struct moecache_pool_name pn;
	int fd = vm_open_dev(), ret;

	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", pool);
	ret = ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

struct fork_job {
	char pool[MOECACHE_NAME_LEN];
	pid_t child;
	int child_evict_err;	/* errno of the child's EVICT, 0 if it worked */
	int child_read_err;	/* errno of the child's read() */
	int child_info_err;	/* errno of the child's GET_INFO, which any file may make */
	struct vm_gate ready;
	struct vm_gate never;
};

static void forking_agent_main(void *arg)
{
	struct fork_job *job = arg;
	struct moecache_request req;
	struct moecache_info info;
	struct vm_view a;
	pid_t child;

	vm_attach(&a, job->pool, MOECACHE_ROLE_AGENT);
	child = fork();
	VM_ASSERT(child >= 0);
	if (child == 0) {
		struct moecache_evict ev = {.slot = 0, .layer = 0, .expert = 1};

		job->child_evict_err = ioctl(a.fd, MOECACHE_IOC_EVICT, &ev) < 0 ? errno : 0;
		VM_OK(fcntl(a.fd, F_SETFL, O_NONBLOCK));
		job->child_read_err = read(a.fd, &req, sizeof(req)) < 0 ? errno : 0;
		job->child_info_err = ioctl(a.fd, MOECACHE_IOC_GET_INFO, &info) < 0 ? errno : 0;
		/*
		 * Set here too, before the gate: the parent's store below may
		 * come after the test has read it, and kill(0, ...) would end
		 * the test's own process group.
		 */
		job->child = getpid();
		vm_gate_pass(&job->ready);
		/* Keeps the inherited agent file open until killed. */
		for (;;)
			pause();
	}
	job->child = child;
	vm_gate_wait(&job->never, 120000, "the kill");
}

/*
 * Pins: a child that inherited the fd of a dead agent kept the pool's
 * agent slot: no agent could attach again (EBUSY) while it lived.
 */
static void lifetime_forked_agent_child_no_wedge(struct vm_ctx *ctx)
{
	struct fork_job *job = vm_shared(sizeof(*job));
	struct vm_view a, c;
	struct moecache_stats st;
	__u32 e = 1, slot;
	pid_t pid;
	int ret;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_gate_open(&job->ready);
	vm_gate_open(&job->never);
	pid = vm_spawn(forking_agent_main, job);
	vm_gate_wait(&job->ready, 10000, "the agent's child");
	/* While the agent lives, its child may not act for it... */
	VM_EQ(job->child_evict_err, EPERM);
	VM_EQ(job->child_read_err, EPERM);
	VM_EQ(job->child_info_err, 0);
	VM_EQ(vm_load32(&c.owner[0]), MOECACHE_NONE);
	VM_EQ(vm_try_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT), -EBUSY);
	/* ...and once it is dead, the child does not keep the role. */
	vm_kill(pid, "the agent");
	ret = vm_try_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	kill(job->child, SIGKILL);
	VM_EQ(ret, 0);
	vm_stats(&a, MOECACHE_NONE, &st);
	VM_EQ(st.agent_pid, getpid());
	vm_fill(&a, 0, 0, 1);
	vm_acquire(&c, 0, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 0);
	vm_release(&c, &slot, 1);
	vm_detach(&a);
	vm_detach(&c);
	/* The child's file goes when it exits; then the pool can go. */
	VM_WAIT_FOR(try_destroy(ctx->pool) != -EBUSY, 10000);
	vm_expect_no_pool(ctx->pool);
}

/* ---- limits ------------------------------------------------------------ */

/*
 * Pins: a file's pins had no bound, and its u32 count per slot wrapped
 * after 2^32 ACQUIREs of one expert.
 */
static void bad_input_acquire_pin_limit(struct vm_ctx *ctx)
{
	__u32 e[3] = {0, 1, 2}, slots[3];
	unsigned long long old;
	struct vm_view a, c;
	struct vm_snap snap;
	int ret[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 0, 0, 0);
	vm_fill(&a, 1, 0, 1);
	vm_fill(&a, 2, 0, 2);
	old = vm_param_set("max_file_pins", 4);
	vm_acquire(&c, 0, e, 3, slots, 0, NULL);
	vm_snap_take(&a, &snap);
	/* 3 + 3 > 4: refused whole, with nothing pinned. */
	ret[0] = vm_try_acquire(&c, 0, e, 3, slots, 0, 0, NULL);
	VM_SNAP_SAME(&a, &snap, "the ACQUIRE beyond the pin limit");
	/* 3 + 1 = 4 is fine, once more is not. */
	vm_acquire(&c, 0, e, 1, slots, 0, NULL);
	ret[1] = vm_try_acquire(&c, 0, e, 1, slots, 0, 0, NULL);
	vm_param_set("max_file_pins", old);
	VM_EQ(ret[0], -EOVERFLOW);
	VM_EQ(ret[1], -EOVERFLOW);
	VM_EQ(vm_load32(&c.pins[0]), 2);
	vm_detach(&c);
	/* Closing drops them all. */
	VM_EQ(vm_load32(&a.pins[0]), 0);
	VM_EQ(vm_load32(&a.pins[1]), 0);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: a pool took any number of attached client files, each with its
 * allocations. The agent is not counted (see tests/vm/tenant_rights.c).
 */
static void bad_input_attach_pool_file_limit(struct vm_ctx *ctx)
{
	unsigned long long old;
	struct vm_view v[4];
	int ret_client, ret_agent;

	vm_pool_create(ctx->pool, &vm_geom_default);
	old = vm_param_set("max_pool_files", 2);
	vm_attach(&v[0], ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&v[1], ctx->pool, MOECACHE_ROLE_CLIENT);
	ret_client = vm_try_attach(&v[2], ctx->pool, MOECACHE_ROLE_CLIENT);
	ret_agent = vm_try_attach(&v[3], ctx->pool, MOECACHE_ROLE_AGENT);
	vm_param_set("max_pool_files", old);
	VM_EQ(ret_client, -EMFILE);
	VM_EQ(ret_agent, 0);
	vm_detach(&v[3]);
	vm_detach(&v[1]);
	vm_detach(&v[0]);
	vm_pool_destroy(ctx->pool);
}

/* ---- mm ------------------------------------------------------------------ */

/* Reads len bytes at addr of this process through get_user_pages(). */
static void read_by_gup(void *addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = addr, .iov_len = len};

	VM_EQ(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), (ssize_t)len);
}

/*
 * Pins: the regions had no fault handler, so a page zapped by
 * MADV_DONTNEED came back as SIGBUS, for the process and for GUP.
 */
static void lifetime_regions_survive_madv_dontneed(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	unsigned char got[4];
	__u32 *pins;
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_host_record(&a, 3)[0] = 0x3c;
	VM_OK(madvise(a.host, a.host_len, MADV_DONTNEED));
	VM_EQ(vm_host_record(&a, 3)[0], 0x3c);
	VM_OK(madvise(a.host, a.host_len, MADV_DONTNEED));
	read_by_gup(vm_host_record(&a, 3), got, 1);
	VM_EQ(got[0], 0x3c);
	/* The agent's writes after the zap land in the pool's pages. */
	VM_OK(madvise(a.host, a.host_len, MADV_DONTNEED));
	vm_host_record(&a, 3)[1] = 0x3d;
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	VM_EQ(vm_host_record(&c, 3)[1], 0x3d);
	/* The map region too. */
	VM_OK(madvise(c.map_base, c.map_len, MADV_DONTNEED));
	VM_EQ(c.hdr->magic, MOECACHE_MAP_MAGIC);
	read_by_gup(c.map_base, got, 4);
	VM_EQ(memcmp(got, c.map_base, 4), 0);
	vm_detach(&c);
	/* And a fast client's pins region. */
	fd = vm_open_dev();
	VM_EQ(vm_try_attach_fd_flags(&c, fd, ctx->pool, MOECACHE_ROLE_CLIENT,
				     MOECACHE_ATTACH_FAST_PINS),
	      0);
	pins = mmap(NULL, c.att.off.pins_size, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd,
		    (off_t)c.att.off.pins_offset);
	VM_ASSERT(pins != MAP_FAILED);
	pins[1] = 7;
	VM_OK(madvise(pins, c.att.off.pins_size, MADV_DONTNEED));
	VM_EQ(pins[1], 7);
	pins[1] = 0;
	munmap(pins, c.att.off.pins_size);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* Pins: the data regions could be mapped, or mprotect()ed, executable. */
static void permission_regions_not_executable(struct vm_ctx *ctx)
{
	struct vm_view a;
	void *p;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	p = mmap(NULL, a.map_len, PROT_READ | PROT_EXEC, MAP_SHARED, a.fd,
		 (off_t)a.att.off.map_offset);
	VM_ASSERT_MSG(p == MAP_FAILED && errno == EPERM, "the map region mapped executable");
	p = mmap(NULL, a.att.off.host_size, PROT_READ | PROT_EXEC, MAP_SHARED, a.fd,
		 (off_t)a.att.off.host_offset);
	VM_ASSERT_MSG(p == MAP_FAILED && errno == EPERM, "the host region mapped executable");
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	VM_ERR(mprotect(a.host, a.host_len, PROT_READ | PROT_EXEC), EACCES);
	VM_ERR(mprotect(a.map_base, a.map_len, PROT_READ | PROT_EXEC), EACCES);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- extensible structs ------------------------------------------------ */

/* A struct of a later ABI: this one's, then fields this driver does not know. */
struct longer_acquire {
	struct moecache_acquire acq;
	__u64 later[4];
};

struct longer_info {
	struct moecache_info info;
	__u64 later[8];
};

#define LONGER(cmd, type) _IOC(_IOC_DIR(cmd), _IOC_TYPE(cmd), _IOC_NR(cmd), sizeof(type))

/* A longer struct whose unknown tail is zero works as the driver's own. */
static void basic_longer_struct_zero_tail(struct vm_ctx *ctx)
{
	struct longer_acquire la;
	struct longer_info li;
	struct vm_view a, c;
	__u32 e = 2, slot = MOECACHE_NONE;
	int fd = vm_open_dev();

	memset(&li, 0, sizeof(li));
	VM_OK(ioctl(fd, LONGER(MOECACHE_IOC_GET_INFO, struct longer_info), &li));
	VM_EQ(li.info.abi_version, MOECACHE_ABI_VERSION);
	VM_EQ(li.later[0] | li.later[7], 0);
	close(fd);
	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_fill(&a, 6, 1, 2);
	memset(&la, 0, sizeof(la));
	la.acq.layer = 1;
	la.acq.count = 1;
	la.acq.experts = (uintptr_t)&e;
	la.acq.slots = (uintptr_t)&slot;
	VM_OK(ioctl(c.fd, LONGER(MOECACHE_IOC_ACQUIRE, struct longer_acquire), &la));
	VM_EQ(slot, 6);
	VM_EQ(la.acq.n_pinned, 1);
	VM_EQ(la.later[3], 0);
	vm_release(&c, &slot, 1);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test tenant_tests[] = {
    VM_TEST(permission_deputy_file_cannot_create,
	    "POOL_CREATE by root on a file opened by uid 65534 is EPERM"),
    VM_TEST(permission_deputy_file_cannot_destroy,
	    "POOL_DESTROY by root on a file opened by uid 65534 is ENOENT; the pool stays"),
    VM_TEST(permission_deputy_file_cannot_attach,
	    "ATTACH by root on a file opened by uid 65534 to a 0600 root pool is ENOENT"),
    VM_TEST(permission_client_bank_read_only,
	    "a client of a readable pool cannot write the CPU bank by any way of its fd"),
    VM_TEST(lifetime_agent_restart_writes_bank,
	    "the agent after a dead one maps the same bank read-write; clients see its writes"),
    VM_TEST(lifetime_forked_agent_child_no_wedge,
	    "a child holding a dead agent's fd neither acts for it (EPERM) nor keeps the role"),
    VM_TEST(bad_input_acquire_pin_limit,
	    "an ACQUIRE that would hold more than max_file_pins pins is EOVERFLOW, whole"),
    VM_TEST(bad_input_attach_pool_file_limit,
	    "a client ATTACH beyond max_pool_files client files is EMFILE; the agent's is not"),
    VM_TEST(lifetime_regions_survive_madv_dontneed,
	    "the host, map and pins regions read back, also through GUP, after MADV_DONTNEED"),
    VM_TEST(permission_regions_not_executable,
	    "no region can be mapped (EPERM) or mprotect()ed (EACCES) executable"),
    VM_TEST(basic_longer_struct_zero_tail,
	    "GET_INFO and ACQUIRE take a longer struct whose unknown tail is zero"),
    VM_TEST(bad_input_bank_set_device_fd, "BANK_SET of a /dev/moecache fd is EINVAL"),
    VM_TEST(bad_input_bank_set_wrong_file,
	    "a CPU bank must be a memfd of bank_bytes, a ROCm bank a dma-buf (EINVAL)"),
    VM_TEST(basic_bank_set_rocm_dmabuf,
	    "a ROCm bank is a dma-buf of bank_bytes: a udmabuf of that size is taken, a shorter one EINVAL"),
    VM_TEST(bad_input_acquire_wait_more_than_slots,
	    "ACQUIRE|WAIT for more experts than slots is EINVAL at once"),
    VM_TEST_TIMEOUT(concurrency_wait_demands_exceed_bank,
		    "two WAITs needing more slots together than the bank has both complete", 60),
};

const struct vm_suite vm_tenant_suite = {tenant_tests, ARRAY_SIZE(tenant_tests)};
