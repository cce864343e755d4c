// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-stress: map readers against an agent that keeps evicting and
 * filling, to check the ordering the map region promises (docs/abi.md):
 *
 *  - the agent writes every fill's bytes into the bank slot (a memfd) as one
 *    tag repeated, (generation << 32 | idx), then COMMITs; it evicts slots
 *    at random, aborts some fills, and is killed and restarted now and then
 *    (in the middle of a copy, too);
 *  - readers look experts up without a system call: seq (acquire), map[idx]
 *    (acquire), the slot's bytes, seq again. When seq did not move, the slot
 *    must hold idx's tag, whole (not torn) and owner[slot] must be idx;
 *  - readers also pin: a slot ACQUIRE returns must hold the expert's tag and
 *    keep it, unchanged, for as long as the pin is held (invariant 1), and
 *    map/owner must keep naming it.
 *
 * Usage: moecache-stress [--seconds T] [--readers R] [--agent-restarts K]
 *                        [--seed S] [--broken-agent]
 * --broken-agent commits before it copies: a control run, which must fail.
 * Needs root (it creates its pool). Exit status 0: no report; 1: reports.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <moecache.h>

#include "mc_atomic.h"

#define ST_LAYERS 4
#define ST_EXPERTS 16
#define ST_SLOTS 8
#define ST_MAX_READERS 16

struct st_counters {
	uint64_t lockfree_ok;	 /* consistent lock-free reads of a resident expert */
	uint64_t lockfree_retry; /* seq moved: read again */
	uint64_t pinned;	 /* pinned slots checked */
	uint64_t pin_checks;	 /* re-reads of pinned slots */
	uint64_t misses;
	uint64_t wait_errors; /* WAIT ended with EIO/ETIMEDOUT/EPIPE */
	uint64_t fills;
	uint64_t aborts;
	uint64_t evict_busy;
	uint64_t reports;
};

struct st_shared {
	struct st_counters agent;
	struct st_counters reader[ST_MAX_READERS];
	uint32_t agent_generation;
};

struct st_config {
	char pool[MOECACHE_NAME_LEN];
	unsigned int readers;
	unsigned int seconds;
	unsigned int restarts;
	uint64_t seed;
	bool broken_agent; /* commits before copying: the checks must fire */
	long page;
	struct st_shared *shared;
};

/* One attached view: the map region, the bank and the geometry. */
struct st_view {
	int fd;
	const struct moecache_map_header *hdr;
	const uint32_t *map, *owner, *pins;
	size_t map_size;
	uint64_t *bank; /* n_slots * stride bytes */
	size_t bank_size;
	uint64_t stride;
	uint32_t n_idx, n_local, n_slots;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)((rng_next(s) >> 32) * n >> 32);
}

__attribute__((format(printf, 3, 4))) static void st_report(struct st_counters *c, const char *who,
							    const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "moecache-stress: REPORT %s: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	c->reports++;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t tag_of(uint32_t gen, uint32_t idx)
{
	return (uint64_t)gen << 32 | idx;
}

/* Attaches fd in role and maps the map region and the bank. */
static int view_open(const struct st_config *cfg, uint32_t role, struct st_view *v)
{
	struct moecache_attach a;
	struct moecache_bank bank;
	int prot;

	memset(v, 0, sizeof(*v));
	v->fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	if (v->fd < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	snprintf(a.name, sizeof(a.name), "%s", cfg->pool);
	a.role = role;
	if (ioctl(v->fd, MOECACHE_IOC_ATTACH, &a) < 0)
		return -errno;
	v->map_size = a.off.map_size;
	v->hdr = mmap(NULL, a.off.map_size, PROT_READ, MAP_SHARED, v->fd, (off_t)a.off.map_offset);
	if (v->hdr == MAP_FAILED)
		return -errno;
	v->map = (const uint32_t *)((const char *)v->hdr + v->hdr->map_off);
	v->owner = (const uint32_t *)((const char *)v->hdr + v->hdr->owner_off);
	v->pins = (const uint32_t *)((const char *)v->hdr + v->hdr->pins_off);
	v->n_local = a.expert_end - a.expert_begin;
	v->n_idx = a.n_layers * v->n_local;
	v->n_slots = a.n_slots;
	memset(&bank, 0, sizeof(bank));
	if (ioctl(v->fd, MOECACHE_IOC_BANK_GET, &bank) < 0)
		return -errno;
	v->stride = bank.slot_stride;
	v->bank_size = bank.slot_stride * a.n_slots;
	prot = role == MOECACHE_ROLE_AGENT ? PROT_READ | PROT_WRITE : PROT_READ;
	v->bank = mmap(NULL, v->bank_size, prot, MAP_SHARED, bank.fd, 0);
	close(bank.fd);
	if (v->bank == MAP_FAILED)
		return -errno;
	return 0;
}

static const volatile uint64_t *slot_words(const struct st_view *v, uint32_t slot)
{
	return (const volatile uint64_t *)((const char *)v->bank + (size_t)slot * v->stride);
}

/* ---- the agent ---- */

/* Writes idx's tag over the slot, word by word, yielding half-way at times. */
static void agent_copy(const struct st_view *v, uint32_t slot, uint64_t tag, uint64_t *rng,
		       bool die_midway)
{
	volatile uint64_t *w = (volatile uint64_t *)((char *)v->bank + (size_t)slot * v->stride);
	size_t n = v->stride / sizeof(uint64_t), i;

	for (i = 0; i < n; i++) {
		w[i] = tag;
		if (i == n / 2) {
			if (die_midway)
				raise(SIGKILL);
			if (rng_below(rng, 8) == 0)
				sched_yield();
		}
	}
}

/* Fills idx into some unpinned slot; 0, or -errno of the last refusal. */
static int agent_fill(struct st_view *v, uint32_t idx, bool from_request, uint32_t *gen,
		      uint64_t *rng, struct st_counters *c, bool die_midway, bool broken)
{
	struct moecache_evict ev;
	struct moecache_fill fill;
	struct moecache_fill_batch b = {.count = 1, .fills = (uintptr_t)&fill};
	uint32_t tries, slot = 0;
	int ret = -EBUSY;

	for (tries = 0; tries < 2 * v->n_slots; tries++) {
		slot = rng_below(rng, v->n_slots);
		/* pins[] is a hint; now and then try anyway, to be refused. */
		if (__atomic_load_n(&v->pins[slot], __ATOMIC_RELAXED) && rng_below(rng, 4))
			continue;
		memset(&ev, 0, sizeof(ev));
		ev.slot = slot;
		ev.layer = idx / v->n_local;
		ev.expert = idx % v->n_local;
		ret = ioctl(v->fd, MOECACHE_IOC_EVICT, &ev) < 0 ? -errno : 0;
		if (ret == -EBUSY) {
			c->evict_busy++;
			continue;
		}
		break;
	}
	memset(&fill, 0, sizeof(fill));
	fill.layer = idx / v->n_local;
	fill.expert = idx % v->n_local;
	if (ret) {
		/* Resident or filling already (EEXIST), or every slot pinned. */
		if (from_request && ret != -EEXIST) {
			fill.slot = MOECACHE_NONE;
			if (ioctl(v->fd, MOECACHE_IOC_ABORT, &b) < 0)
				st_report(c, "agent", "declining idx %u: %s", idx, strerror(errno));
		}
		return ret;
	}
	fill.slot = slot;
	if (broken) {
		/* The bug the readers must catch: published before the copy. */
		if (ioctl(v->fd, MOECACHE_IOC_COMMIT, &b) == 0)
			c->fills++;
		agent_copy(v, slot, tag_of(++*gen, idx), rng, false);
		return 0;
	}
	agent_copy(v, slot, tag_of(++*gen, idx), rng, die_midway);
	if (rng_below(rng, 20) == 0) {
		if (ioctl(v->fd, MOECACHE_IOC_ABORT, &b) < 0)
			st_report(c, "agent", "ABORT of slot %u: %s", slot, strerror(errno));
		c->aborts++;
		return 0;
	}
	if (ioctl(v->fd, MOECACHE_IOC_COMMIT, &b) < 0) {
		st_report(c, "agent", "COMMIT of idx %u into slot %u: %s", idx, slot,
			  strerror(errno));
		return -errno;
	}
	c->fills++;
	return 0;
}

static void agent_main(const struct st_config *cfg, double deadline, double die_at, uint64_t seed)
{
	struct st_counters *c = &cfg->shared->agent;
	struct moecache_request reqs[32];
	struct st_view v;
	uint64_t rng = seed;
	/* Tags of this agent's fills carry its generation in the high bits. */
	uint32_t gen = __atomic_add_fetch(&cfg->shared->agent_generation, 1, __ATOMIC_RELAXED)
		       << 20;
	struct pollfd pfd;
	ssize_t n;
	int ret, i;

	ret = view_open(cfg, MOECACHE_ROLE_AGENT, &v);
	if (ret) {
		st_report(c, "agent", "attaching: %s", strerror(-ret));
		_exit(1);
	}
	fcntl(v.fd, F_SETFL, O_NONBLOCK);
	while (now_s() < deadline) {
		bool die = die_at > 0 && now_s() >= die_at;

		n = read(v.fd, reqs, sizeof(reqs));
		if (n < 0 && errno != EAGAIN) {
			st_report(c, "agent", "read: %s", strerror(errno));
			break;
		}
		for (i = 0; n > 0 && i < n / (ssize_t)sizeof(reqs[0]); i++)
			agent_fill(&v, reqs[i].layer * v.n_local + reqs[i].expert, true, &gen, &rng,
				   c, die && i == 0, cfg->broken_agent);
		/* Churn: evictions and fills nobody asked for. */
		if (rng_below(&rng, 2) == 0)
			agent_fill(&v, rng_below(&rng, v.n_idx), false, &gen, &rng, c, die,
				   cfg->broken_agent);
		if (n <= 0) {
			pfd.fd = v.fd;
			pfd.events = POLLIN;
			poll(&pfd, 1, 1);
		}
	}
	_exit(c->reports ? 1 : 0);
}

/* ---- readers ---- */

static void check_slot(const struct st_view *v, uint32_t slot, uint32_t idx, uint64_t *tag_out,
		       struct st_counters *c, const char *who, const char *how)
{
	const volatile uint64_t *w = slot_words(v, slot);
	size_t n = v->stride / sizeof(uint64_t);
	uint64_t first = w[0], mid = w[n / 2], last = w[n - 1];

	if ((uint32_t)first != idx || mid != first || last != first)
		st_report(
		    c, who,
		    "%s slot %u for idx %u holds %llx / %llx / %llx (first, middle, last word)",
		    how, slot, idx, (unsigned long long)first, (unsigned long long)mid,
		    (unsigned long long)last);
	if (tag_out)
		*tag_out = first;
}

static void reader_lockfree(const struct st_view *v, uint32_t idx, uint64_t *rng,
			    struct st_counters *c, const char *who)
{
	const volatile uint64_t *w;
	uint32_t s1, slot, own;
	uint64_t first, mid, last;
	size_t n = v->stride / sizeof(uint64_t);

	s1 = mc_seq_read_begin(&v->hdr->seq);
	slot = mc_load_acquire_u32(&v->map[idx]);
	if (slot == MOECACHE_NONE)
		return;
	if (slot >= v->n_slots) {
		st_report(c, who, "map[%u] = %u, past %u slots", idx, slot, v->n_slots);
		return;
	}
	/* Give the agent a chance to evict and refill in the middle. */
	if (rng_below(rng, 16) == 0)
		sched_yield();
	own = __atomic_load_n(&v->owner[slot], __ATOMIC_RELAXED);
	w = slot_words(v, slot);
	first = w[0];
	mid = w[n / 2];
	last = w[n - 1];
	if (mc_seq_read_retry(&v->hdr->seq, s1)) {
		c->lockfree_retry++;
		return;
	}
	if (own != idx)
		st_report(c, who, "seq %u: map[%u] = slot %u but owner[%u] = 0x%x", s1, idx, slot,
			  slot, own);
	if ((uint32_t)first != idx || mid != first || last != first)
		st_report(c, who,
			  "seq %u unchanged, map[%u] = slot %u, but the slot holds %llx / %llx / "
			  "%llx",
			  s1, idx, slot, (unsigned long long)first, (unsigned long long)mid,
			  (unsigned long long)last);
	c->lockfree_ok++;
}

static void reader_pinned(const struct st_view *v, uint32_t idx, uint64_t *rng,
			  struct st_counters *c, const char *who)
{
	uint32_t layer = idx / v->n_local, expert = idx % v->n_local, slot = MOECACHE_NONE, k;
	struct moecache_acquire a = {
	    .layer = layer, .count = 1, .experts = (uintptr_t)&expert, .slots = (uintptr_t)&slot};
	struct moecache_release r = {.count = 1, .slots = (uintptr_t)&slot};
	uint64_t tag, again;

	if (rng_below(rng, 2)) {
		a.flags = MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING;
		a.timeout_ms = 200;
	}
	if (ioctl(v->fd, MOECACHE_IOC_ACQUIRE, &a) < 0) {
		if (errno == EIO || errno == ETIMEDOUT || errno == EPIPE)
			c->wait_errors++;
		else
			st_report(c, who, "ACQUIRE of idx %u: %s", idx, strerror(errno));
		return;
	}
	if (slot == MOECACHE_NONE) {
		c->misses++;
		return;
	}
	c->pinned++;
	check_slot(v, slot, idx, &tag, c, who, "pinned");
	/* Pinned: nothing may copy into the slot or remap it. */
	for (k = 0; k < 1 + rng_below(rng, 4); k++) {
		sched_yield();
		check_slot(v, slot, idx, &again, c, who, "still pinned");
		if (again != tag)
			st_report(c, who, "pinned slot %u changed from %llx to %llx", slot,
				  (unsigned long long)tag, (unsigned long long)again);
		if (mc_load_acquire_u32(&v->map[idx]) != slot ||
		    __atomic_load_n(&v->owner[slot], __ATOMIC_RELAXED) != idx)
			st_report(c, who, "pinned slot %u for idx %u: map 0x%x owner 0x%x", slot,
				  idx, mc_load_acquire_u32(&v->map[idx]), v->owner[slot]);
		c->pin_checks++;
	}
	if (ioctl(v->fd, MOECACHE_IOC_RELEASE, &r) < 0)
		st_report(c, who, "RELEASE of slot %u: %s", slot, strerror(errno));
}

static void reader_main(const struct st_config *cfg, unsigned int id, double deadline)
{
	struct st_counters *c = &cfg->shared->reader[id];
	uint64_t rng = cfg->seed ^ (0x1000 + id);
	char who[32];
	struct st_view v;
	uint32_t idx;
	int ret;

	snprintf(who, sizeof(who), "reader %u", id);
	ret = view_open(cfg, MOECACHE_ROLE_CLIENT, &v);
	if (ret) {
		st_report(c, who, "attaching: %s", strerror(-ret));
		_exit(1);
	}
	while (now_s() < deadline) {
		/* Hot experts: half the lookups go to an eighth of them. */
		idx = rng_below(&rng, 2) ? rng_below(&rng, v.n_idx / 8 + 1)
					 : rng_below(&rng, v.n_idx);
		if (rng_below(&rng, 4))
			reader_lockfree(&v, idx, &rng, c, who);
		else
			reader_pinned(&v, idx, &rng, c, who);
	}
	_exit(c->reports ? 1 : 0);
}

/* ---- setup ---- */

static int pool_setup(const struct st_config *cfg, int *bank_fd)
{
	struct moecache_pool_create pc;
	struct moecache_pool_name pn;
	struct moecache_attach a;
	struct moecache_bank bank;
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", cfg->pool);
	ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn);
	memset(&pc, 0, sizeof(pc));
	snprintf(pc.name, sizeof(pc.name), "%s", cfg->pool);
	pc.n_layers = ST_LAYERS;
	pc.n_experts = ST_EXPERTS;
	pc.expert_end = ST_EXPERTS;
	pc.n_slots = ST_SLOTS;
	pc.expert_bytes = (uint64_t)cfg->page;
	pc.mode = 0600;
	if (ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc) < 0) {
		ret = -errno;
		goto out;
	}
	/* A first agent hands over the bank; the pool keeps it for the next ones. */
	memset(&a, 0, sizeof(a));
	snprintf(a.name, sizeof(a.name), "%s", cfg->pool);
	a.role = MOECACHE_ROLE_AGENT;
	*bank_fd = memfd_create("moecache-stress-bank", MFD_CLOEXEC);
	if (*bank_fd < 0 || ftruncate(*bank_fd, cfg->page * ST_SLOTS) < 0 ||
	    ioctl(fd, MOECACHE_IOC_ATTACH, &a) < 0) {
		ret = -errno;
		goto out;
	}
	memset(&bank, 0, sizeof(bank));
	bank.fd = *bank_fd;
	bank.backend = MOECACHE_BACKEND_CPU;
	bank.bank_bytes = (uint64_t)cfg->page * ST_SLOTS;
	bank.slot_stride = (uint64_t)cfg->page;
	if (ioctl(fd, MOECACHE_IOC_BANK_SET, &bank) < 0)
		ret = -errno;
out:
	close(fd);
	return ret;
}

static void add(struct st_counters *sum, const struct st_counters *c)
{
	sum->lockfree_ok += c->lockfree_ok;
	sum->lockfree_retry += c->lockfree_retry;
	sum->pinned += c->pinned;
	sum->pin_checks += c->pin_checks;
	sum->misses += c->misses;
	sum->wait_errors += c->wait_errors;
	sum->reports += c->reports;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"seconds", required_argument, NULL, 't'},
	    {"readers", required_argument, NULL, 'r'},
	    {"agent-restarts", required_argument, NULL, 'k'},
	    {"seed", required_argument, NULL, 's'},
	    {"broken-agent", no_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct st_config cfg = {.readers = 3, .seconds = 20, .restarts = 4, .seed = 1};
	pid_t readers[ST_MAX_READERS], agent;
	struct st_counters sum = {0};
	struct moecache_pool_name pn;
	double start, deadline, slice;
	unsigned int i, k, reports = 0;
	int c, status, bank_fd = -1, fd, ret;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			cfg.seconds = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			cfg.readers = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			cfg.restarts = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 's':
			cfg.seed = strtoull(optarg, NULL, 0);
			break;
		case 'b':
			cfg.broken_agent = true;
			break;
		case 'h':
			printf("usage: moecache-stress [--seconds T] [--readers R] "
			       "[--agent-restarts K] [--seed S] [--broken-agent]\n"
			       "  --broken-agent  commit before copying, to see the checks fail\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!cfg.readers || cfg.readers > ST_MAX_READERS || !cfg.seconds)
		return 2;
	cfg.page = sysconf(_SC_PAGESIZE);
	snprintf(cfg.pool, sizeof(cfg.pool), "stress-%d", (int)getpid());
	cfg.shared = mmap(NULL, sizeof(*cfg.shared), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cfg.shared == MAP_FAILED)
		return 2;
	ret = pool_setup(&cfg, &bank_fd);
	if (ret) {
		fprintf(stderr, "moecache-stress: creating pool %s: %s\n", cfg.pool,
			strerror(-ret));
		return 2;
	}

	start = now_s();
	deadline = start + cfg.seconds;
	for (i = 0; i < cfg.readers; i++) {
		readers[i] = fork();
		if (readers[i] == 0)
			reader_main(&cfg, i, deadline);
	}
	/* Agents one after another; each but the last dies, mid-copy, at a time of its own. */
	slice = (double)cfg.seconds / (cfg.restarts + 1);
	for (k = 0; k <= cfg.restarts; k++) {
		double end = k == cfg.restarts ? deadline : start + slice * (k + 1);

		agent = fork();
		if (agent == 0)
			agent_main(&cfg, deadline, k == cfg.restarts ? 0 : end, cfg.seed + k);
		if (waitpid(agent, &status, 0) < 0)
			return 2;
		if (WIFEXITED(status) && WEXITSTATUS(status))
			reports++;
		else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
			reports++;
	}
	for (i = 0; i < cfg.readers; i++) {
		if (waitpid(readers[i], &status, 0) < 0)
			return 2;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			reports++;
		add(&sum, &cfg.shared->reader[i]);
	}
	fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", cfg.pool);
	if (fd < 0 || ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0) {
		fprintf(stderr, "moecache-stress: REPORT destroying %s at the end: %s\n", cfg.pool,
			strerror(errno));
		reports++;
	}
	if (fd >= 0)
		close(fd);
	close(bank_fd);
	printf("moecache-stress: %.1f s, %u readers, %u agents: %llu lock-free reads checked "
	       "(%llu retried), %llu pinned slots checked %llu times, %llu misses, %llu waits "
	       "failed; agent: %llu fills, %llu aborts, %llu evictions refused; %llu reports\n",
	       now_s() - start, cfg.readers, cfg.restarts + 1, (unsigned long long)sum.lockfree_ok,
	       (unsigned long long)sum.lockfree_retry, (unsigned long long)sum.pinned,
	       (unsigned long long)sum.pin_checks, (unsigned long long)sum.misses,
	       (unsigned long long)sum.wait_errors, (unsigned long long)cfg.shared->agent.fills,
	       (unsigned long long)cfg.shared->agent.aborts,
	       (unsigned long long)cfg.shared->agent.evict_busy,
	       (unsigned long long)(sum.reports + cfg.shared->agent.reports));
	reports += sum.reports || cfg.shared->agent.reports;
	/* The line tests/run-check reads from a VM suite. */
	printf("moecache-stress: %u passed, %u failed, 0 skipped\n", reports ? 0 : 1,
	       reports ? 1 : 0);
	return reports ? 1 : 0;
}
