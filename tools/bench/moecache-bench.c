// SPDX-License-Identifier: MIT
/*
 * moecache-bench: every figure a ratio of two things measured side by side
 * in one run on one machine, so that a slow or shared machine (qemu without
 * KVM) still gives comparable numbers. Needs the module loaded and root
 * (it creates its own pools). Writes one JSON object (--out FILE) and
 * prints a table.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "agent/copy/backend.h"
#include "tools/bench/policy.h"

#define BENCH_LAYERS 4
#define BENCH_EXPERTS 64
#define BENCH_K 8
#define BENCH_ROUNDS 7
/* Engine and memcpy rounds, in pairs (bench_copy). */
#define BENCH_COPY_PAIRS 15

struct bench_opts {
	unsigned int iters;	  /* ioctl loops per round */
	unsigned int miss_iters;  /* miss round trips per round */
	unsigned int copy_mib;	  /* bytes per copy round */
	unsigned int copy_threads;
	double client_secs;	  /* per client-count point */
	const char *out;
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* A pool of its own, with every expert of layer 0's first K resident. */
struct bench_pool {
	char name[MOECACHE_NAME_LEN];
	struct moecache *admin;
	struct moecache *agent;
	struct moecache *client;
};

static int pool_setup(struct bench_pool *bp, const char *tag, uint32_t n_slots, uint64_t bytes)
{
	struct moecache_pool_create req = {
		.n_layers = BENCH_LAYERS,
		.n_experts = BENCH_EXPERTS,
		.expert_begin = 0,
		.expert_end = BENCH_EXPERTS,
		.expert_bytes = bytes,
		.n_slots = n_slots,
		.mode = 0600,
	};
	int ret;

	memset(bp, 0, sizeof(*bp));
	snprintf(bp->name, sizeof(bp->name), "bench-%s-%d", tag, (int)getpid());
	memcpy(req.name, bp->name, sizeof(req.name));
	ret = moecache_open(NULL, &bp->admin);
	if (!ret)
		ret = moecache_pool_create(bp->admin, &req);
	if (!ret)
		ret = moecache_open_attach(bp->name, MOECACHE_ROLE_AGENT, &bp->agent);
	if (!ret)
		ret = moecache_open_attach(bp->name, MOECACHE_ROLE_CLIENT, &bp->client);
	return ret;
}

static void pool_teardown(struct bench_pool *bp)
{
	if (bp->client)
		moecache_close(bp->client);
	if (bp->agent)
		moecache_close(bp->agent);
	if (bp->admin) {
		moecache_pool_destroy(bp->admin, bp->name);
		moecache_close(bp->admin);
	}
}

/* Fills slots first.. with experts 0..n-1 of layer, without a copy: only the map matters here. */
static int make_resident_layer(struct moecache *agent, uint32_t layer, uint32_t first, uint32_t n)
{
	struct moecache_fill fill;
	uint32_t i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = moecache_evict(agent, first + i, layer, i, NULL, NULL);
		if (ret)
			return ret;
		fill = (struct moecache_fill){ .slot = first + i, .layer = layer, .expert = i };
		ret = moecache_commit(agent, &fill, 1);
		if (ret)
			return ret;
	}
	return 0;
}

static int make_resident(struct moecache *agent, uint32_t n)
{
	return make_resident_layer(agent, 0, 0, n);
}

static int acquire_release_k(int fd, const uint32_t *experts, uint32_t *prev, uint32_t *slots,
			     uint32_t k)
{
	struct moecache_acquire_release ar = {
		.acquire = {
			.layer = 0,
			.count = k,
			.experts = (uintptr_t)experts,
			.slots = (uintptr_t)slots,
		},
		.release_slots = (uintptr_t)prev,
		.release_count = k,
	};

	if (ioctl(fd, MOECACHE_IOC_ACQUIRE_RELEASE, &ar))
		return -errno;
	return ar.acquire.n_pinned == k ? 0 : -EAGAIN;
}

static int acquire_release(int fd, const uint32_t *experts, uint32_t *prev, uint32_t *slots)
{
	return acquire_release_k(fd, experts, prev, slots, BENCH_K);
}

struct ioctl_figures {
	double nop_ns;
	double acq_rel_ns;	/* one ACQUIRE_RELEASE call */
	double acq_then_rel_ns; /* ACQUIRE, then RELEASE: two calls */
	double acq_rel_1_ns;	/* ACQUIRE_RELEASE of one expert: the fixed part */
	double get_info_ns;	/* GET_INFO: one small copy out */
	double fast_ns;		/* moecache_acquire_release with fast pins */
};

/*
 * libmoecache with fast pins: hits pinned in the client's region, reported in
 * batches. The layers go round as in a decode step: a batch takes one call
 * of a layer at a time, so that each stays a visit of its own.
 */
static int fast_acquire_release(struct moecache *mc, uint32_t layer, const uint32_t *experts,
				uint32_t *prev, uint32_t *slots)
{
	struct moecache_acquire_result res;
	int ret = moecache_acquire_release(mc, prev, BENCH_K, layer, experts, BENCH_K, slots, 0, 0,
					   &res);

	if (ret)
		return ret;
	return res.n_pinned == BENCH_K ? 0 : -EAGAIN;
}

/* Null ioctl, ACQUIRE_RELEASE and ACQUIRE+RELEASE, interleaved by round. */
static int bench_ioctls(const struct bench_opts *o, struct ioctl_figures *f)
{
	double nop[BENCH_ROUNDS], ar[BENCH_ROUNDS], two[BENCH_ROUNDS], one[BENCH_ROUNDS];
	double info[BENCH_ROUNDS], fast[BENCH_ROUNDS], t;
	struct moecache_info mi;
	uint32_t experts[BENCH_K], slots[BENCH_K], prev[BENCH_K], fprev[BENCH_K];
	struct moecache *fast_mc = NULL;
	struct bench_pool bp;
	unsigned int r, i;
	int fd, ret;

	ret = pool_setup(&bp, "ioctl", 64, 4096);
	if (!ret)
		ret = make_resident(bp.agent, BENCH_K);
	/* The other layers' first K too, for the fast-pin row. */
	for (r = 1; r < BENCH_LAYERS && !ret; r++)
		ret = make_resident_layer(bp.agent, r, r * BENCH_K, BENCH_K);
	for (i = 0; i < BENCH_K; i++)
		experts[i] = i;
	if (!ret)
		ret = moecache_acquire(bp.client, 0, experts, BENCH_K, prev, 0, 0, NULL);
	if (!ret)
		ret = moecache_open_attach_flags(bp.name, MOECACHE_ROLE_CLIENT,
						 MOECACHE_ATTACH_FAST_PINS, &fast_mc);
	if (!ret)
		ret = moecache_acquire(fast_mc, 0, experts, BENCH_K, fprev, 0, 0, NULL);
	fd = ret ? -1 : moecache_fd(bp.client);
	for (r = 0; r < BENCH_ROUNDS && !ret; r++) {
		t = now_ns();
		for (i = 0; i < o->iters; i++)
			ioctl(fd, MOECACHE_IOC_NOP);
		nop[r] = (now_ns() - t) / o->iters;

		t = now_ns();
		for (i = 0; i < o->iters && !ret; i++) {
			ret = acquire_release(fd, experts, prev, slots);
			memcpy(prev, slots, sizeof(prev));
		}
		ar[r] = (now_ns() - t) / o->iters;

		t = now_ns();
		for (i = 0; i < o->iters && !ret; i++) {
			ret = moecache_release(bp.client, prev, BENCH_K);
			if (!ret)
				ret = moecache_acquire(bp.client, 0, experts, BENCH_K, prev, 0, 0,
						       NULL);
		}
		two[r] = (now_ns() - t) / o->iters;

		/* The first expert alone: prev[0] is its slot after the loop above. */
		t = now_ns();
		for (i = 0; i < o->iters && !ret; i++)
			ret = acquire_release_k(fd, experts, prev, slots, 1);
		one[r] = (now_ns() - t) / o->iters;

		t = now_ns();
		for (i = 0; i < o->iters; i++)
			ioctl(fd, MOECACHE_IOC_GET_INFO, &mi);
		info[r] = (now_ns() - t) / o->iters;

		t = now_ns();
		for (i = 0; i < o->iters && !ret; i++) {
			ret = fast_acquire_release(fast_mc, (i + 1) % BENCH_LAYERS, experts, fprev,
						   slots);
			memcpy(fprev, slots, sizeof(fprev));
		}
		fast[r] = (now_ns() - t) / o->iters;
	}
	moecache_close(fast_mc);
	pool_teardown(&bp);
	if (ret)
		return ret;
	f->nop_ns = median(nop, BENCH_ROUNDS);
	f->acq_rel_ns = median(ar, BENCH_ROUNDS);
	f->acq_then_rel_ns = median(two, BENCH_ROUNDS);
	f->acq_rel_1_ns = median(one, BENCH_ROUNDS);
	f->get_info_ns = median(info, BENCH_ROUNDS);
	f->fast_ns = median(fast, BENCH_ROUNDS);
	return 0;
}

/* Lookup of K experts through the mmap'd map against K plain array reads. */
static int bench_map_lookup(const struct bench_opts *o, double *lookup_ns, double *array_ns)
{
	double look[BENCH_ROUNDS], arr[BENCH_ROUNDS], t;
	uint32_t experts[BENCH_K], slots[BENCH_K], plain[BENCH_EXPERTS];
	const struct moecache_map *m;
	volatile uint32_t sink = 0;
	unsigned int r, i, k, n = o->iters * 20;
	struct bench_pool bp;
	int ret;

	ret = pool_setup(&bp, "map", 64, 4096);
	if (!ret)
		ret = make_resident(bp.agent, BENCH_K);
	if (ret) {
		pool_teardown(&bp);
		return ret;
	}
	m = moecache_map(bp.client);
	for (i = 0; i < BENCH_EXPERTS; i++)
		plain[i] = i < BENCH_K ? i : MOECACHE_NONE;
	for (i = 0; i < BENCH_K; i++)
		experts[i] = (i * 5) % BENCH_K;
	for (r = 0; r < BENCH_ROUNDS; r++) {
		t = now_ns();
		for (i = 0; i < n; i++) {
			if (moecache_map_lookup(m, 0, experts, BENCH_K, slots) != BENCH_K)
				ret = -EIO;
			sink += slots[i % BENCH_K];
		}
		look[r] = (now_ns() - t) / n;

		t = now_ns();
		for (i = 0; i < n; i++) {
			for (k = 0; k < BENCH_K; k++)
				slots[k] = ((volatile uint32_t *)plain)[experts[k]];
			sink += slots[i % BENCH_K];
		}
		arr[r] = (now_ns() - t) / n;
	}
	(void)sink;
	pool_teardown(&bp);
	*lookup_ns = median(look, BENCH_ROUNDS);
	*array_ns = median(arr, BENCH_ROUNDS);
	return ret;
}

/*
 * The agent side of a miss round trip, with no copy: every request gets
 * slot 0 at once. It attaches in the forked child itself: the agent role
 * belongs to the process that attached (docs/abi.md), and a child's use of
 * an agent file it inherited is refused (EPERM, POLLERR). Writes one byte
 * to ready once attached; runs until the parent's kill.
 */
static void zero_copy_agent(const char *name, int ready)
{
	struct moecache_request reqs[16];
	struct moecache_fill fill;
	struct moecache *agent;
	struct pollfd pfd;
	int n, i;
	char c = 0;

	if (moecache_open_attach(name, MOECACHE_ROLE_AGENT, &agent) || write(ready, &c, 1) != 1)
		_exit(4);
	pfd = (struct pollfd){.fd = moecache_fd(agent), .events = POLLIN};
	for (;;) {
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			_exit(1);
		n = moecache_read_requests(agent, reqs, 16);
		if (n < 0)
			_exit(5);
		for (i = 0; i < n; i++) {
			if (moecache_evict(agent, 0, reqs[i].layer, reqs[i].expert, NULL, NULL))
				_exit(2);
			fill = (struct moecache_fill){ .slot = 0,
						       .layer = reqs[i].layer,
						       .expert = reqs[i].expert };
			if (moecache_commit(agent, &fill, 1))
				_exit(3);
		}
	}
}

static double pipe_pingpong_ns(unsigned int iters)
{
	int ab[2], ba[2];
	unsigned int i;
	double t;
	pid_t pid;
	char c = 0;

	if (pipe(ab) || pipe(ba))
		return -1;
	pid = fork();
	if (pid == 0) {
		/* Only the parent may hold the write end, or read never sees EOF. */
		close(ab[1]);
		close(ba[0]);
		while (read(ab[0], &c, 1) == 1)
			if (write(ba[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(ab[0]);
	close(ba[1]);
	t = now_ns();
	for (i = 0; i < iters; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			break;
	t = (now_ns() - t) / iters;
	close(ab[1]);
	waitpid(pid, NULL, 0);
	close(ba[0]);
	return t;
}

/* Client miss -> agent -> zero-byte fill -> commit -> wake, against a pipe round trip. */
static int bench_miss_rtt(const struct bench_opts *o, double *miss_ns, double *pipe_ns)
{
	double miss[BENCH_ROUNDS], pp[BENCH_ROUNDS], t;
	uint32_t expert, slot;
	struct bench_pool bp;
	unsigned int r, i = 0;
	int ret, status, ready[2];
	pid_t agent_pid;
	char c;

	ret = pool_setup(&bp, "miss", 1, 4096);
	if (ret) {
		pool_teardown(&bp);
		return ret;
	}
	/* The child attaches as the agent: the parent lets the role go first. */
	moecache_close(bp.agent);
	bp.agent = NULL;
	if (pipe(ready)) {
		ret = -errno;
		pool_teardown(&bp);
		return ret;
	}
	agent_pid = fork();
	if (agent_pid == 0) {
		close(ready[0]);
		zero_copy_agent(bp.name, ready[1]);
	}
	close(ready[1]);
	if (agent_pid < 0 || read(ready[0], &c, 1) != 1)
		ret = -ENOTCONN;
	close(ready[0]);
	for (r = 0; r < BENCH_ROUNDS && !ret; r++) {
		t = now_ns();
		for (i = 0; i < o->miss_iters && !ret; i++) {
			/* Two experts share the one slot: every acquire misses. */
			expert = i & 1;
			ret = moecache_acquire(bp.client, 0, &expert, 1, &slot, MOECACHE_ACQ_WAIT,
					       5000, NULL);
			if (!ret)
				ret = moecache_release(bp.client, &slot, 1);
		}
		miss[r] = (now_ns() - t) / o->miss_iters;
		pp[r] = pipe_pingpong_ns(o->miss_iters);
	}
	if (agent_pid > 0 && ret && waitpid(agent_pid, &status, WNOHANG) == agent_pid)
		fprintf(stderr, "moecache-bench: the miss agent exited (status %d) after %u misses\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), i);
	else if (agent_pid > 0)
		kill(agent_pid, SIGKILL);
	if (agent_pid > 0)
		waitpid(agent_pid, NULL, 0);
	pool_teardown(&bp);
	*miss_ns = median(miss, BENCH_ROUNDS);
	*pipe_ns = median(pp, BENCH_ROUNDS);
	return ret;
}

struct memcpy_job {
	void *dst;
	const void *src;
	size_t bytes, stride; /* stride: the destination's, a slot's */
	unsigned int n;
};

static void *memcpy_worker(void *arg)
{
	struct memcpy_job *j = arg;
	unsigned int i;

	for (i = 0; i < j->n; i++)
		memcpy((char *)j->dst + (size_t)i * j->stride,
		       (const char *)j->src + (size_t)i * j->bytes, j->bytes);
	return NULL;
}

/* n copies of bytes from src into the slots at dst (stride apart), by threads. */
static double memcpy_gbps(void *dst, size_t stride, const void *src, size_t bytes, unsigned int n,
			  unsigned int threads)
{
	pthread_t tid[64];
	struct memcpy_job jobs[64];
	unsigned int t, per = n / threads;
	double start = now_ns();

	for (t = 0; t < threads; t++) {
		jobs[t] = (struct memcpy_job){ .dst = (char *)dst + (size_t)t * per * stride,
					       .src = (const char *)src + (size_t)t * per * bytes,
					       .bytes = bytes,
					       .stride = stride,
					       .n = per };
		pthread_create(&tid[t], NULL, memcpy_worker, &jobs[t]);
	}
	for (t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	return (double)bytes * per * threads / (now_ns() - start);
}

/*
 * moecached's publish hook (agent/pool.c, pool_publish) makes one system
 * call per demand copy on the copy thread, its COMMIT; here a NOP ioctl
 * stands in for it (a COMMIT needs a fill the driver started).
 */
static int bench_publish(void *ctx, const struct agent_copy *c)
{
	(void)c;
	return ioctl(*(const int *)ctx, MOECACHE_IOC_NOP) < 0 ? -errno : 0;
}

/*
 * One round of the engine: n copies of bytes queued, all collected, each
 * published by its copy thread when published (the engine has the hook).
 * GB/s, or 0 on error.
 */
static double engine_gbps(struct agent_backend *be, bool published, const char *src, size_t bytes,
			  unsigned int n, int *ret)
{
	struct pollfd pfd = {.fd = agent_backend_completion_fd(be), .events = POLLIN};
	struct agent_copy comp[64], c;
	unsigned int i, done;
	double t = now_ns();
	int got;

	for (i = 0; i < n && !*ret; i++) {
		c = (struct agent_copy){.slot = i, .layer = 0, .expert = i, .src = src + (size_t)i * bytes};
		*ret = agent_backend_copy(be, &c);
	}
	for (done = 0; done < n && !*ret;) {
		if (poll(&pfd, 1, 10000) <= 0) {
			*ret = -ETIMEDOUT;
			break;
		}
		got = agent_backend_completions(be, comp, 64);
		if (got < 0)
			*ret = got;
		for (int k = 0; k < got && !*ret; k++)
			if (comp[k].status || comp[k].published != published)
				*ret = comp[k].status ? comp[k].status : -EPROTO;
		done += got > 0 ? got : 0;
	}
	return *ret ? 0 : (double)bytes * n / (now_ns() - t);
}

/*
 * The agent's CPU copy engine against memcpy by as many threads, of the
 * same bytes into the same destination: the engine's bank (a memfd, which
 * is what a CPU bank is; memcpy into private anonymous memory would be
 * measuring another kind of page). The host's load drifts within a run
 * (other VMs, other work on a shared machine), so the two are measured in
 * pairs, back to back, the one that goes first alternating, and the figure
 * is the median of the pairs' ratios: a pair sees one load, where a ratio
 * of two medians mixes the loads of different moments. After the pairs,
 * one more engine round into a cleared bank is checked byte for byte.
 * The engine publishes each copy from its copy thread (a NOP ioctl in
 * place of moecached's COMMIT); beside each pair, the same engine without
 * the hook (every completion signalled at once, as before it had one)
 * runs a round into its own bank, for the figure copy_unpublished_vs_memcpy.
 */
static int bench_copy(const struct bench_opts *o, double *ratio, double *engine_gbps_out,
		      double *memcpy_gbps_out, double *unpublished_ratio, double *unpublished_gbps)
{
	const size_t bytes = 1 << 20;
	unsigned int n = o->copy_mib, r, i;
	double eng[BENCH_COPY_PAIRS], mc[BENCH_COPY_PAIRS], rat[BENCH_COPY_PAIRS];
	double plain_rat[BENCH_COPY_PAIRS], plain_eng[BENCH_COPY_PAIRS];
	struct agent_backend_config cfg = {
		.pool = "bench",
		.n_slots = n,
		.expert_bytes = bytes,
		.copy_threads = o->copy_threads,
	};
	struct moecache_bank desc, plain_desc;
	struct agent_backend *be, *plain = NULL;
	struct moecache *dev;
	char *src, *bank;
	size_t stride;
	int ret, dev_fd;

	ret = moecache_open(NULL, &dev);
	if (ret)
		return ret;
	dev_fd = moecache_fd(dev);
	cfg.publish = bench_publish;
	cfg.publish_ctx = &dev_fd;
	ret = agent_backend_create("cpu", &cfg, &be);
	if (ret) {
		moecache_close(dev);
		return ret;
	}
	/* The same engine without the hook: every completion wakes the collector. */
	cfg.publish = NULL;
	ret = agent_backend_create("cpu", &cfg, &plain);
	if (!ret)
		ret = agent_backend_bank_create(plain, &plain_desc);
	if (!ret)
		memset(agent_backend_slot(plain, 0), 0, (size_t)n * plain_desc.slot_stride);
	if (!ret)
		ret = agent_backend_bank_create(be, &desc);
	src = malloc((size_t)n * bytes);
	if (ret || !src) {
		ret = ret ? ret : -ENOMEM;
		goto out;
	}
	bank = agent_backend_slot(be, 0);
	stride = desc.slot_stride;
	memset(src, 0xa5, (size_t)n * bytes);
	/* Every page of the bank faulted in before the first round, for both. */
	memset(bank, 0, (size_t)n * stride);
	for (r = 0; r < BENCH_COPY_PAIRS && !ret; r++) {
		if (r % 2) {
			mc[r] = memcpy_gbps(bank, stride, src, bytes, n, o->copy_threads);
			eng[r] = engine_gbps(be, true, src, bytes, n, &ret);
			plain_eng[r] = engine_gbps(plain, false, src, bytes, n, &ret);
		} else {
			plain_eng[r] = engine_gbps(plain, false, src, bytes, n, &ret);
			eng[r] = engine_gbps(be, true, src, bytes, n, &ret);
			mc[r] = memcpy_gbps(bank, stride, src, bytes, n, o->copy_threads);
		}
		rat[r] = eng[r] / mc[r];
		plain_rat[r] = plain_eng[r] / mc[r];
	}
	if (!ret) {
		memset(bank, 0, (size_t)n * stride);
		engine_gbps(be, true, src, bytes, n, &ret);
	}
	for (i = 0; i < n && !ret; i++)
		if (memcmp(agent_backend_slot(be, i), src + (size_t)i * bytes, bytes))
			ret = -EIO;
	*ratio = median(rat, BENCH_COPY_PAIRS);
	*engine_gbps_out = median(eng, BENCH_COPY_PAIRS);
	*memcpy_gbps_out = median(mc, BENCH_COPY_PAIRS);
	*unpublished_ratio = median(plain_rat, BENCH_COPY_PAIRS);
	*unpublished_gbps = median(plain_eng, BENCH_COPY_PAIRS);
out:
	free(src);
	agent_backend_destroy(plain);
	agent_backend_destroy(be);
	moecache_close(dev);
	return ret;
}

/* n client processes doing ACQUIRE_RELEASE of K resident experts for a while. */
static int bench_clients(const struct bench_opts *o, unsigned int n, double *per_s)
{
	uint32_t experts[BENCH_K], slots[BENCH_K], prev[BENCH_K];
	struct bench_pool bp;
	unsigned int c, i;
	int fds[2], ret, status;
	pid_t pids[64];
	uint64_t total = 0, count;
	double t;

	ret = pool_setup(&bp, "clients", 64, 4096);
	if (!ret)
		ret = make_resident(bp.agent, BENCH_K);
	if (ret || pipe(fds)) {
		pool_teardown(&bp);
		return ret ? ret : -errno;
	}
	for (i = 0; i < BENCH_K; i++)
		experts[i] = i;
	t = now_ns();
	for (c = 0; c < n; c++) {
		pids[c] = fork();
		if (pids[c] == 0) {
			struct moecache *cl;
			double end = now_ns() + o->client_secs * 1e9;

			count = 0;
			if (moecache_open_attach(bp.name, MOECACHE_ROLE_CLIENT, &cl) ||
			    moecache_acquire(cl, 0, experts, BENCH_K, prev, 0, 0, NULL))
				_exit(1);
			while (now_ns() < end) {
				for (i = 0; i < 64; i++) {
					if (acquire_release(moecache_fd(cl), experts, prev, slots))
						_exit(2);
					memcpy(prev, slots, sizeof(prev));
				}
				count += 64;
			}
			if (write(fds[1], &count, sizeof(count)) != sizeof(count))
				_exit(3);
			_exit(0);
		}
	}
	for (c = 0; c < n; c++) {
		waitpid(pids[c], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			ret = -EIO;
		else if (read(fds[0], &count, sizeof(count)) == sizeof(count))
			total += count;
	}
	t = (now_ns() - t) / 1e9;
	close(fds[0]);
	close(fds[1]);
	pool_teardown(&bp);
	*per_s = total / t;
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: moecache-bench [--out FILE] [--iters N] [--miss-iters N]\n"
		   "                      [--copy-mib N] [--copy-threads N] [--client-secs S]\n"
		   "       moecache-bench --policy [--policy-name NAME] [--accesses N] [--out FILE]\n"
		   "Measures the moecache paths as ratios against baselines run beside them;\n"
		   "--policy: a replacement policy's ns per access beside LRU's (no device).\n");
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "iters", required_argument, NULL, 'i' },
		{ "miss-iters", required_argument, NULL, 'm' },
		{ "copy-mib", required_argument, NULL, 'c' },
		{ "copy-threads", required_argument, NULL, 't' },
		{ "client-secs", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt;

	*o = (struct bench_opts){ .iters = 20000, .miss_iters = 2000, .copy_mib = 64,
				  .copy_threads = 2, .client_secs = 1.0 };
	while ((opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': o->out = optarg; break;
		case 'i': o->iters = strtoul(optarg, NULL, 0); break;
		case 'm': o->miss_iters = strtoul(optarg, NULL, 0); break;
		case 'c': o->copy_mib = strtoul(optarg, NULL, 0); break;
		case 't': o->copy_threads = strtoul(optarg, NULL, 0); break;
		case 's': o->client_secs = strtod(optarg, NULL); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (!o->iters || !o->miss_iters || !o->copy_mib || !o->copy_threads ||
	    o->copy_threads > 64 || o->copy_mib % o->copy_threads || o->client_secs <= 0) {
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static json_object *ratio_obj(double value, double target, bool lower_is_better, const char *what,
			      const char *num_name, double num, const char *den_name, double den)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "ratio", json_object_new_double(value));
	/* NAN: a figure reported without a target. */
	json_object_object_add(o, "target", isnan(target) ? NULL : json_object_new_double(target));
	json_object_object_add(o, "met", isnan(target) ? NULL
			       : json_object_new_boolean(lower_is_better ? value <= target
									 : value >= target));
	json_object_object_add(o, "what", json_object_new_string(what));
	json_object_object_add(o, num_name, json_object_new_double(num));
	json_object_object_add(o, den_name, json_object_new_double(den));
	return o;
}

static void print_row(json_object *root, const char *key, const char *target)
{
	json_object *o, *ratio, *met = NULL;

	if (!json_object_object_get_ex(root, key, &o) ||
	    !json_object_object_get_ex(o, "ratio", &ratio))
		return;
	json_object_object_get_ex(o, "met", &met);
	printf("%-34s %10.3f   %-10s %s\n", key, json_object_get_double(ratio), target,
	       !met ? "" : json_object_get_boolean(met) ? "met" : "NOT met");
}

int main(int argc, char **argv)
{
	static const unsigned int client_counts[] = { 1, 2, 4, 8 };
	struct ioctl_figures fig;
	struct bench_opts o;
	double a, b, c = 0, copy_ratio = 0, unpublished = 0, per_s[4];
	int failed = 0;
	json_object *root, *clients;
	unsigned int i;
	int ret;

	/* The policy's cost needs no device: its own mode. */
	if (argc > 1 && !strcmp(argv[1], "--policy"))
		return bench_policy_main(argc - 1, argv + 1);
	ret = parse_opts(argc, argv, &o);
	if (ret)
		return 2;
	root = json_object_new_object();
	json_object_object_add(root, "cpus", json_object_new_int(sysconf(_SC_NPROCESSORS_ONLN)));

	ret = bench_ioctls(&o, &fig);
	if (ret) {
		fprintf(stderr, "moecache-bench: ioctls: %s\n", strerror(-ret));
		return 1;
	}
	json_object_object_add(root, "acquire_release_vs_null_ioctl",
			       ratio_obj(fig.acq_rel_ns / fig.nop_ns, 2.0, true,
					 "ACQUIRE_RELEASE of 8 resident experts (one call) / NOP",
					 "acquire_release_ns", fig.acq_rel_ns, "null_ioctl_ns", fig.nop_ns));
	json_object_object_add(root, "acquire_then_release_vs_null_ioctl",
			       ratio_obj(fig.acq_then_rel_ns / fig.nop_ns, NAN, true,
					 "ACQUIRE then RELEASE of 8 (two calls) / NOP",
					 "acquire_then_release_ns", fig.acq_then_rel_ns, "null_ioctl_ns",
					 fig.nop_ns));
	json_object_object_add(root, "acquire_release_1_vs_null_ioctl",
			       ratio_obj(fig.acq_rel_1_ns / fig.nop_ns, NAN, true,
					 "ACQUIRE_RELEASE of 1 resident expert / NOP: the per-call part",
					 "acquire_release_1_ns", fig.acq_rel_1_ns, "null_ioctl_ns",
					 fig.nop_ns));
	json_object_object_add(
	    root, "acquire_release_fast_vs_null_ioctl",
	    ratio_obj(fig.fast_ns / fig.nop_ns, 2.0, true,
		      "moecache_acquire_release of 8 resident experts with fast pins, the 4 layers in "
		      "turn (no system call; hits reported in batches of 256) / NOP",
		      "acquire_release_fast_ns", fig.fast_ns, "null_ioctl_ns", fig.nop_ns));
	json_object_object_add(root, "get_info_vs_null_ioctl",
			       ratio_obj(fig.get_info_ns / fig.nop_ns, NAN, true,
					 "GET_INFO (one small copy out) / NOP", "get_info_ns",
					 fig.get_info_ns, "null_ioctl_ns", fig.nop_ns));

	ret = bench_map_lookup(&o, &a, &b);
	if (ret) {
		fprintf(stderr, "moecache-bench: map lookup: %s\n", strerror(-ret));
		return 1;
	}
	json_object_object_add(root, "map_lookup_vs_array_read",
			       ratio_obj(a / b, NAN, true,
					 "seqcount lookup of 8 experts in the mmap'd map / 8 array reads",
					 "lookup_ns", a, "array_ns", b));

	/* A failed round trip does not hide the figures after it; the exit status says it failed. */
	ret = bench_miss_rtt(&o, &a, &b);
	if (ret) {
		fprintf(stderr, "moecache-bench: miss round trip: %s\n", strerror(-ret));
		json_object_object_add(root, "miss_rtt_vs_pipe_pingpong",
				       json_object_new_string(strerror(-ret)));
		failed = 1;
	} else {
		json_object_object_add(root, "miss_rtt_vs_pipe_pingpong",
				       ratio_obj(a / b, 3.0, true,
						 "miss -> agent -> zero-byte fill -> commit -> wake (+release) / pipe round trip",
						 "miss_rtt_ns", a, "pipe_rtt_ns", b));
	}

	ret = bench_copy(&o, &copy_ratio, &a, &b, &unpublished, &c);
	if (ret) {
		fprintf(stderr, "moecache-bench: copy: %s\n", strerror(-ret));
		return 1;
	}
	json_object_object_add(
	    root, "copy_vs_memcpy",
	    ratio_obj(copy_ratio, 0.9, false,
		      "CPU backend copy throughput (each copy published by its copy "
		      "thread, as moecached's COMMIT) / memcpy, same threads, bytes and "
		      "destination (the bank) (median of 15 back-to-back pairs)",
		      "engine_gb_s", a, "memcpy_gb_s", b));
	json_object_object_add(
	    root, "copy_unpublished_vs_memcpy",
	    ratio_obj(unpublished, NAN, false,
		      "the same engine without the publish hook, every completion signalled at "
		      "once (before 2026-12-02) / the same rounds' memcpy, in the same run",
		      "engine_gb_s", c, "memcpy_gb_s", b));

	clients = json_object_new_object();
	for (i = 0; i < 4; i++) {
		char key[8];

		ret = bench_clients(&o, client_counts[i], &per_s[i]);
		if (ret) {
			fprintf(stderr, "moecache-bench: %u clients: %s\n", client_counts[i],
				strerror(-ret));
			return 1;
		}
		snprintf(key, sizeof(key), "%u", client_counts[i]);
		json_object_object_add(clients, key, json_object_new_double(per_s[i]));
	}
	json_object_object_add(root, "acquires_per_s", clients);

	printf("%-34s %10s   %-10s %s\n", "figure", "ratio", "target", "");
	print_row(root, "acquire_release_vs_null_ioctl", "<= 2");
	print_row(root, "acquire_then_release_vs_null_ioctl", "(2 calls)");
	print_row(root, "acquire_release_1_vs_null_ioctl", "(1 expert)");
	print_row(root, "acquire_release_fast_vs_null_ioctl", "<= 2");
	print_row(root, "get_info_vs_null_ioctl", "(copy out)");
	print_row(root, "map_lookup_vs_array_read", "(none)");
	print_row(root, "miss_rtt_vs_pipe_pingpong", "<= 3");
	print_row(root, "copy_vs_memcpy", ">= 0.9");
	print_row(root, "copy_unpublished_vs_memcpy", "(no hook)");
	for (i = 0; i < 4; i++)
		printf("acquires_per_s, %u client%-19s %10.0f\n", client_counts[i],
		       client_counts[i] > 1 ? "s" : "", per_s[i]);
	printf("cpus %ld\n", sysconf(_SC_NPROCESSORS_ONLN));

	if (o.out) {
		if (json_object_to_file_ext(o.out, root, JSON_C_TO_STRING_PRETTY)) {
			fprintf(stderr, "moecache-bench: %s: %s\n", o.out, json_util_get_last_err());
			return 1;
		}
	}
	json_object_put(root);
	return failed;
}
