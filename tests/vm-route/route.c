// SPDX-License-Identifier: MIT
/*
 * moecache-route-vmtest: a client's view of a pool of three CPU banks
 * against the real driver (in the test VM, or as root on a host with the
 * module loaded). Each test creates a pool of three banks (tiers 0, 1, 2),
 * fills its host pages with moecache-decode --fill, and forks a small
 * agent of its own that places every requested expert round-robin over
 * the banks (free slots first), each bank its own memfd: the route, the
 * per-bank imports and moecache-decode are checked against what the map
 * and the host pages say. Output: "ok N - name # description" or "not ok ..." per test, then
 * "route: P passed, F failed, S skipped"; exit 0 only if all pass.
 *
 * Usage: moecache-route-vmtest [--traces DIR] [--only NAME]
 * (moecache-decode is taken from PATH; the Python test needs the VM booted
 * with MOECACHE_VM_HOST_USR=1: MOECACHE_VM_HOST_USR=1 tools/vm/run
 * moecache-route-vmtest).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libmoecache.h"

#define RT_SHAPE "--d-model", "32", "--d-ff", "32", "--dtype", "f32"
#define RT_LAYERS 16
#define RT_EXPERTS 64
#define RT_BANKS 3
#define RT_DECODE_STEPS "6"

/* The banks of every test's pool: slots and tier of each. */
/* 160 slots: one step of the trace (16 layers x 8 experts) fits without an eviction. */
static const uint32_t rt_bank_slots[RT_BANKS] = {32, 64, 64};
static const uint32_t rt_bank_tiers[RT_BANKS] = {0, 1, 2};

struct rt {
	const char *traces;
	const char *only;
	char trace[512];
	char pool[MOECACHE_NAME_LEN];
	uint64_t expert_bytes;
	pid_t agent;
	char why[512];
	const char *skip; /* set by a test that cannot run here: reported as SKIP */
	int passed, failed, skipped, n;
};

static int rt_fail(struct rt *t, const char *fmt, ...)
{
	va_list ap;

	if (t->why[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
	return -1;
}

#define RT_CHECK(t, cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond))                                                                       \
			return rt_fail((t), __VA_ARGS__);                                          \
	} while (0)

/* Starts argv with stdout to out (NULL: inherited); its pid, or -1. */
static pid_t rt_spawn(const char *out, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		if (out && !freopen(out, "w", stdout))
			_exit(127);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* The exit status of pid, or -1. */
static int rt_wait(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int rt_run(const char *out, char *const argv[])
{
	return rt_wait(rt_spawn(out, argv));
}

/* ---- the test's own agent -------------------------------------------------------------- */

struct rt_agent {
	struct moecache *mc;
	struct moecache_map_bank bank[RT_BANKS];
	int fd[RT_BANKS];
	uint32_t cursor[RT_BANKS];
	uint32_t placed[RT_BANKS]; /* experts placed, up to the bank's slots */
	uint32_t next_bank;
	uint64_t stride;
};

/*
 * A slot of the next bank in turn with a free slot (once all are full, of
 * the next bank in turn), evicted for (layer, expert): the bank's slots in
 * order, a pinned one skipped. Returns 0 or -errno.
 */
static int rt_agent_place(struct rt_agent *a, uint32_t layer, uint32_t expert, uint32_t *slot)
{
	for (uint32_t i = 0; i < RT_BANKS; i++) {
		uint32_t b = (a->next_bank + i) % RT_BANKS;

		if (a->placed[b] < a->bank[b].n_slots) {
			a->next_bank = b;
			break;
		}
	}
	for (uint32_t tries = 0; tries < RT_BANKS; tries++) {
		uint32_t b = a->next_bank;

		a->next_bank = (a->next_bank + 1) % RT_BANKS;
		for (uint32_t i = 0; i < a->bank[b].n_slots; i++) {
			uint32_t s = a->bank[b].slot_begin + a->cursor[b];
			int ret;

			a->cursor[b] = (a->cursor[b] + 1) % a->bank[b].n_slots;
			ret = moecache_evict(a->mc, s, layer, expert, NULL, NULL);
			if (ret == -EBUSY)
				continue;
			if (ret)
				return ret;
			if (a->placed[b] < a->bank[b].n_slots)
				a->placed[b]++;
			*slot = s;
			return 0;
		}
	}
	return -EBUSY;
}

/* Copies the host record of (layer, expert) into slot of its bank's memfd and commits it. */
static int rt_agent_fill(struct rt_agent *a, uint32_t slot, uint32_t layer, uint32_t expert)
{
	uint32_t b = moecache_map_slot_bank(moecache_map(a->mc), slot);
	const void *rec = moecache_host_expert(a->mc, layer, expert);
	struct moecache_fill f = {.slot = slot, .layer = layer, .expert = expert};
	uint64_t bytes = moecache_pool(a->mc)->expert_bytes;

	if (b >= RT_BANKS || !rec)
		return -EPROTO;
	if (pwrite(a->fd[b], rec, bytes, (off_t)((slot - a->bank[b].slot_begin) * a->stride)) !=
	    (ssize_t)bytes) {
		moecache_abort(a->mc, &f, 1);
		return -EIO;
	}
	return moecache_commit(a->mc, &f, 1);
}

static int rt_agent_setup(struct rt_agent *a, const char *pool, uint64_t expert_bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	int ret;

	memset(a, 0, sizeof(*a));
	ret = moecache_open_attach(pool, MOECACHE_ROLE_AGENT, &a->mc);
	if (!ret)
		ret = moecache_host_map(a->mc, false, NULL, NULL);
	if (ret)
		return ret;
	a->stride = (expert_bytes + page - 1) / page * page;
	for (uint32_t b = 0; b < RT_BANKS; b++) {
		struct moecache_bank desc = {0};

		ret = moecache_map_bank(moecache_map(a->mc), b, &a->bank[b]);
		if (ret)
			return ret;
		a->fd[b] = memfd_create("route-bank", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (a->fd[b] < 0 || ftruncate(a->fd[b], (off_t)(a->stride * a->bank[b].n_slots)))
			return -errno;
		desc.fd = a->fd[b];
		desc.backend = MOECACHE_BACKEND_CPU;
		desc.device = b;
		desc.bank_bytes = a->stride * a->bank[b].n_slots;
		desc.slot_stride = a->stride;
		desc.index = b;
		ret = moecache_bank_set(a->mc, &desc);
		if (ret)
			return ret;
	}
	return 0;
}

/* The agent process: serves requests until killed. */
static void rt_agent_main(const char *pool, uint64_t expert_bytes, int ready)
{
	struct moecache_request reqs[64];
	struct rt_agent a;
	char ok = 1;

	if (rt_agent_setup(&a, pool, expert_bytes)) {
		ok = 0;
		(void)!write(ready, &ok, 1);
		_exit(1);
	}
	(void)!write(ready, &ok, 1);
	close(ready);
	for (;;) {
		struct pollfd p = {.fd = moecache_fd(a.mc), .events = POLLIN};
		int n;

		poll(&p, 1, 100);
		n = moecache_read_requests(a.mc, reqs, 64);
		for (int i = 0; i < n; i++) {
			uint32_t slot;
			int ret = rt_agent_place(&a, reqs[i].layer, reqs[i].expert, &slot);

			if (ret == -EEXIST)
				continue; /* asked twice: already resident or filling */
			if (ret || rt_agent_fill(&a, slot, reqs[i].layer, reqs[i].expert))
				_exit(2);
		}
	}
}

/* ---- a pool per test ------------------------------------------------------------------- */

static int rt_pool_up(struct rt *t, const char *name)
{
	struct moecache_bank_layout layout[RT_BANKS];
	struct moecache_pool_create req;
	char *fill[] = {"moecache-decode", "--pool", t->pool, "--fill", RT_SHAPE, NULL};
	struct moecache *mc;
	int pipefd[2], ret;
	uint32_t slots = 0;
	char ok = 0;

	snprintf(t->pool, sizeof(t->pool), "route-%s", name);
	memset(&req, 0, sizeof(req));
	memset(layout, 0, sizeof(layout));
	for (uint32_t b = 0; b < RT_BANKS; b++) {
		layout[b].n_slots = rt_bank_slots[b];
		layout[b].tier = rt_bank_tiers[b];
		layout[b].backend = MOECACHE_BACKEND_CPU;
		layout[b].device = b;
		slots += rt_bank_slots[b];
	}
	snprintf(req.name, sizeof(req.name), "%s", t->pool);
	req.n_layers = RT_LAYERS;
	req.n_experts = RT_EXPERTS;
	req.expert_begin = 0;
	req.expert_end = RT_EXPERTS;
	req.n_slots = slots;
	req.expert_bytes = t->expert_bytes;
	req.mode = 0600;
	req.n_banks = RT_BANKS;
	req.banks = (uintptr_t)layout;
	ret = moecache_open(NULL, &mc);
	if (ret)
		return rt_fail(t, "open: %s", strerror(-ret));
	moecache_pool_destroy(mc, t->pool);
	ret = moecache_pool_create(mc, &req);
	moecache_close(mc);
	RT_CHECK(t, !ret, "pool create with 3 banks: %s", strerror(-ret));
	RT_CHECK(t, rt_run("/dev/null", fill) == 0, "moecache-decode --fill failed");
	if (pipe(pipefd))
		return rt_fail(t, "pipe: %s", strerror(errno));
	t->agent = fork();
	if (t->agent == 0) {
		close(pipefd[0]);
		rt_agent_main(t->pool, t->expert_bytes, pipefd[1]);
	}
	close(pipefd[1]);
	if (t->agent < 0 || read(pipefd[0], &ok, 1) != 1)
		ok = 0;
	close(pipefd[0]);
	RT_CHECK(t, ok, "the test's agent could not set its three banks");
	return 0;
}

static void rt_pool_down(struct rt *t)
{
	struct moecache *mc;

	if (t->agent > 0) {
		kill(t->agent, SIGKILL);
		waitpid(t->agent, NULL, 0);
		t->agent = 0;
	}
	if (!moecache_open(NULL, &mc)) {
		moecache_pool_destroy(mc, t->pool);
		moecache_close(mc);
	}
}

/* ---- tests ----------------------------------------------------------------------------- */

static int test_basic_route_matches_map(struct rt *t)
{
	uint32_t experts[12], slots[12], cold[2] = {40, 41}, cold_slots[2];
	struct moecache_bank_map banks[RT_BANKS];
	const struct moecache_map *map;
	struct moecache_route *r;
	struct moecache *mc;
	int ret;

	for (uint32_t i = 0; i < 12; i++)
		experts[i] = i * 3;
	RT_CHECK(t, !moecache_open_attach(t->pool, MOECACHE_ROLE_CLIENT, &mc), "attach");
	map = moecache_map(mc);
	RT_CHECK(t, moecache_map_n_banks(map) == RT_BANKS, "the map has %u banks",
		 moecache_map_n_banks(map));
	RT_CHECK(t, moecache_host_map(mc, false, NULL, NULL) == 0, "host map");
	RT_CHECK(t, moecache_route_new(map, 12, &r) == 0, "route_new");
	ret = moecache_acquire_route(mc, NULL, 0, 1, experts, 12, slots, MOECACHE_ACQ_WAIT, 20000,
				     NULL, r);
	RT_CHECK(t, ret == 0, "acquire_route: %s", strerror(-ret));
	ret = moecache_bank_import_all(mc, banks, RT_BANKS);
	RT_CHECK(t, ret == RT_BANKS, "import_all: %d", ret);
	for (uint32_t b = 0; b <= RT_BANKS; b++) {
		uint32_t n;
		const struct moecache_route_entry *e = moecache_route_group(r, b, &n);
		struct moecache_map_bank mb = {0};

		if (b < RT_BANKS) {
			moecache_map_bank(map, b, &mb);
			RT_CHECK(t, n == 4,
				 "bank %u runs %u of the 12 experts, the agent put 4 there", b, n);
		} else {
			RT_CHECK(t, n == 0, "%u cold experts after a waiting acquire", n);
		}
		for (uint32_t i = 0; i < n; i++) {
			RT_CHECK(t, e[i].slot - mb.slot_begin < mb.n_slots && e[i].bank == b,
				 "slot %u is not in bank %u's range", e[i].slot, b);
			RT_CHECK(t, e[i].local == e[i].slot - mb.slot_begin, "local slot");
			RT_CHECK(t,
				 slots[e[i].pos] == e[i].slot && experts[e[i].pos] == e[i].expert,
				 "entry and acquire disagree");
			RT_CHECK(t, moecache_map_slot(map, 1, e[i].expert) == e[i].slot,
				 "the map has expert %u elsewhere", e[i].expert);
			RT_CHECK(t,
				 !memcmp(moecache_bank_slot(&banks[b], e[i].slot),
					 moecache_host_expert(mc, 1, e[i].expert), t->expert_bytes),
				 "bank %u's slot %u does not hold expert %u", b, e[i].slot,
				 e[i].expert);
			RT_CHECK(t, !moecache_bank_slot(&banks[(b + 1) % RT_BANKS], e[i].slot),
				 "another bank answers for slot %u", e[i].slot);
		}
	}
	/* Not resident, not queued: both cold. */
	RT_CHECK(t, moecache_release(mc, slots, 12) == 0, "release");
	ret = moecache_acquire_route(mc, NULL, 0, 2, cold, 2, cold_slots, MOECACHE_ACQ_NO_QUEUE, 0,
				     NULL, r);
	RT_CHECK(t, ret == 0, "acquire_route NO_QUEUE: %s", strerror(-ret));
	for (uint32_t b = 0; b < RT_BANKS; b++) {
		uint32_t n;

		moecache_route_group(r, b, &n);
		RT_CHECK(t, n == 0, "bank %u runs a cold expert", b);
	}
	{
		uint32_t n;
		const struct moecache_route_entry *e = moecache_route_group(r, RT_BANKS, &n);

		RT_CHECK(t,
			 n == 2 && e[0].expert == 40 && e[1].expert == 41 &&
			     e[0].slot == MOECACHE_NONE,
			 "the cold group has %u entries", n);
	}
	for (uint32_t b = 0; b < RT_BANKS; b++)
		moecache_bank_unimport(&banks[b]);
	moecache_route_free(r);
	moecache_close(mc);
	return 0;
}

/* The permissions /proc/self/maps gives the mapping at addr, "" if none. */
static void rt_mapping_perms(const void *addr, char perms[5])
{
	char line[512], start[32];
	FILE *f = fopen("/proc/self/maps", "r");

	perms[0] = '\0';
	if (!f)
		return;
	snprintf(start, sizeof(start), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, start, strlen(start)))
			sscanf(line, "%*s %4s", perms);
	fclose(f);
}

static int test_basic_banks_own_memfds(struct rt *t)
{
	struct moecache_bank_map banks[RT_BANKS];
	struct moecache *mc;
	uint32_t begin = 0;
	int ret;

	RT_CHECK(t, !moecache_open_attach(t->pool, MOECACHE_ROLE_CLIENT, &mc), "attach");
	RT_CHECK(t, moecache_bank_import_all(mc, banks, RT_BANKS - 1) == -ENOSPC,
		 "import_all into too little room");
	ret = moecache_bank_import_all(mc, banks, RT_BANKS);
	RT_CHECK(t, ret == RT_BANKS, "import_all: %d", ret);
	for (uint32_t b = 0; b < RT_BANKS; b++) {
		char perms[5];

		RT_CHECK(t,
			 banks[b].index == b && banks[b].tier == rt_bank_tiers[b] &&
			     banks[b].slot_begin == begin && banks[b].n_slots == rt_bank_slots[b],
			 "bank %u: index %u tier %u slots [%u, +%u)", b, banks[b].index,
			 banks[b].tier, banks[b].slot_begin, banks[b].n_slots);
		RT_CHECK(t, banks[b].backend == MOECACHE_BACKEND_CPU && banks[b].desc.device == b,
			 "bank %u: backend %u device %u", b, banks[b].backend,
			 banks[b].desc.device);
		RT_CHECK(t, banks[b].bytes == banks[b].slot_stride * rt_bank_slots[b],
			 "bank %u is %llu bytes", b, (unsigned long long)banks[b].bytes);
		for (uint32_t o = 0; o < b; o++)
			RT_CHECK(t, banks[o].base != banks[b].base && banks[o].fd != banks[b].fd,
				 "banks %u and %u share a mapping", o, b);
		rt_mapping_perms(banks[b].base, perms);
		RT_CHECK(t, !strcmp(perms, "r--s"), "bank %u is mapped %s", b, perms);
		begin += rt_bank_slots[b];
	}
	for (uint32_t b = 0; b < RT_BANKS; b++)
		moecache_bank_unimport(&banks[b]);
	moecache_close(mc);
	return 0;
}

static int test_bad_input_bank_index_past_last(struct rt *t)
{
	struct moecache_bank_map bm;
	struct moecache_map_bank mb;
	struct moecache_bank desc;
	struct moecache *mc;

	RT_CHECK(t, !moecache_open_attach(t->pool, MOECACHE_ROLE_CLIENT, &mc), "attach");
	RT_CHECK(t, moecache_bank_import_index(mc, RT_BANKS, &bm) == -EINVAL && bm.fd == -1,
		 "import of bank %u", RT_BANKS);
	RT_CHECK(t, moecache_bank_get_index(mc, RT_BANKS, &desc) == -EINVAL, "BANK_GET of bank %u",
		 RT_BANKS);
	RT_CHECK(t, moecache_map_bank(moecache_map(mc), RT_BANKS, &mb) == -EINVAL,
		 "the map's bank %u", RT_BANKS);
	RT_CHECK(t, moecache_bank_import_index_rw(mc, 0, &bm) == -EPERM,
		 "a client's writable import");
	moecache_close(mc);
	return 0;
}

/* moecache-decode over the trace with extra arguments; its JSON report in out. */
/* Starts moecache-decode over the trace (from step start, with or without fast pins). */
static pid_t rt_decode_start(struct rt *t, const char *cold, const char *start, const char *steps,
			     bool fast, const char *out)
{
	/* clang-format off */
	char *argv[] = {"moecache-decode", "--pool", t->pool, "--trace", t->trace,
			"--steps", (char *)steps, RT_SHAPE, "--cold", (char *)cold,
			"--start-token", (char *)start, "--timeout-ms", "60000", "--json",
			fast ? "--fast-pins" : NULL, NULL};
	/* clang-format on */

	return rt_spawn(out, argv);
}

static int rt_decode(struct rt *t, const char *cold, const char *out)
{
	return rt_wait(rt_decode_start(t, cold, "0", RT_DECODE_STEPS, false, out));
}

/* The number after "key": in the report, or -1. */
static long rt_json_long(const char *buf, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(buf, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* The decode report: verified, its counts and "experts" of every bank of its "banks". */
struct rt_report {
	bool verified;
	long hits, misses, cpu_experts, n_banks, bank_experts[RT_BANKS];
};

static int rt_report_read(const char *path, struct rt_report *r)
{
	char buf[8192], *p;
	FILE *f = fopen(path, "r");
	size_t n;

	memset(r, 0, sizeof(*r));
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	r->verified = strstr(buf, "\"verified\":\"ok\"") != NULL;
	r->hits = rt_json_long(buf, "hits");
	r->misses = rt_json_long(buf, "misses");
	r->cpu_experts = rt_json_long(buf, "cpu_experts");
	p = strstr(buf, "\"banks\":[");
	while (p && (p = strstr(p, "\"experts\":")) && r->n_banks < RT_BANKS) {
		r->bank_experts[r->n_banks++] = strtol(p + strlen("\"experts\":"), NULL, 10);
		p++;
	}
	return 0;
}

static int rt_decode_test(struct rt *t, const char *cold, struct rt_report *r)
{
	char out[128];
	long run = 0;
	int rc;

	snprintf(out, sizeof(out), "/tmp/%s.decode.json", t->pool);
	rc = rt_decode(t, cold, out);
	RT_CHECK(t, rc == 0, "moecache-decode --cold %s exited %d", cold, rc);
	RT_CHECK(t, rt_report_read(out, r) == 0 && r->verified, "the report does not say verified");
	RT_CHECK(t, r->n_banks == RT_BANKS, "the report lists %ld banks", r->n_banks);
	for (int b = 0; b < RT_BANKS; b++)
		run += r->bank_experts[b];
	RT_CHECK(t, run + r->cpu_experts == r->hits + r->misses,
		 "banks ran %ld and the host %ld of %ld experts", run, r->cpu_experts,
		 r->hits + r->misses);
	return 0;
}

static int test_basic_decode_verifies_on_three_banks(struct rt *t)
{
	struct rt_report r;

	if (rt_decode_test(t, "wait", &r))
		return -1;
	/* The agent places round-robin: every bank holds some of each step's experts. */
	for (int b = 0; b < RT_BANKS; b++)
		RT_CHECK(t, r.bank_experts[b] > 0, "bank %d ran no expert", b);
	RT_CHECK(t, r.cpu_experts == 0, "%ld experts ran on the host with --cold wait",
		 r.cpu_experts);
	return 0;
}

static int test_basic_decode_cold_cpu_on_three_banks(struct rt *t)
{
	char out[128];
	struct rt_report r;
	long run = 0;
	int rc;

	/* Step 0 loaded (it fits the banks), then steps 0 and 1 with --cold cpu. */
	snprintf(out, sizeof(out), "/tmp/%s.warm.json", t->pool);
	rc = rt_wait(rt_decode_start(t, "wait", "0", "1", false, out));
	RT_CHECK(t, rc == 0, "the warming decode exited %d", rc);
	snprintf(out, sizeof(out), "/tmp/%s.decode.json", t->pool);
	rc = rt_wait(rt_decode_start(t, "cpu", "0", "2", false, out));
	RT_CHECK(t, rc == 0, "moecache-decode --cold cpu exited %d", rc);
	RT_CHECK(t, rt_report_read(out, &r) == 0 && r.verified && r.n_banks == RT_BANKS,
		 "the report does not say verified with three banks");
	for (int b = 0; b < RT_BANKS; b++) {
		RT_CHECK(t, r.bank_experts[b] > 0, "bank %d ran no expert of the warm step", b);
		run += r.bank_experts[b];
	}
	RT_CHECK(t, run == r.hits && r.cpu_experts == r.misses && r.misses > 0,
		 "banks ran %ld for %ld hits, the host %ld for %ld misses", run, r.hits,
		 r.cpu_experts, r.misses);
	return 0;
}

static int test_concurrency_two_decoders_three_banks(struct rt *t)
{
	char out[2][128];
	struct rt_report r;
	pid_t pid[2];

	for (int i = 0; i < 2; i++) {
		snprintf(out[i], sizeof(out[i]), "/tmp/%s.decode%d.json", t->pool, i);
		pid[i] =
		    rt_decode_start(t, "wait", i ? "70" : "0", RT_DECODE_STEPS, i == 1, out[i]);
	}
	for (int i = 0; i < 2; i++) {
		int rc = rt_wait(pid[i]);

		RT_CHECK(t, rc == 0, "decoder %d%s exited %d", i, i ? " (fast pins)" : "", rc);
		RT_CHECK(t, rt_report_read(out[i], &r) == 0 && r.verified && r.n_banks == RT_BANKS,
			 "decoder %d did not verify on three banks", i);
	}
	return 0;
}

/*
 * lib/python/tests/route_vm.py in the host's userland (the VM booted with
 * MOECACHE_VM_HOST_USR=1, as make check boots it): moecache.Client's banks
 * and route on this pool.
 */
static int test_basic_python_route_matches_map(struct rt *t)
{
	char *argv[] = {
	    "host-run", "/usr/bin/python3", "-B", "/opt/moecache/tests/route_vm.py", t->pool, NULL};
	char out[128], line[512] = "";
	FILE *f;
	int rc;

	/* Said by tools/debug-kernel/check, whose kernels cannot share /usr. */
	if (getenv("MOECACHE_VM_NO_HOST_USR")) {
		t->skip = "no host userland on this kernel (MOECACHE_VM_NO_HOST_USR)";
		return 0;
	}
	RT_CHECK(t, access("/host/usr/bin/python3", X_OK) == 0,
		 "no host userland at /host: boot the VM with MOECACHE_VM_HOST_USR=1");
	snprintf(out, sizeof(out), "/tmp/%s.python.out", t->pool);
	rc = rt_run(out, argv);
	f = fopen(out, "r");
	while (f && fgets(line, sizeof(line), f))
		;
	if (f)
		fclose(f);
	RT_CHECK(t, rc == 0, "route_vm.py exited %d: %s", rc, line);
	return 0;
}

struct rt_test {
	const char *name;
	const char *description;
	int (*run)(struct rt *t);
};

static const struct rt_test rt_tests[] = {
    {"basic_route_matches_map",
     "a client's route puts each pinned expert in the bank whose slots hold it, as the map says",
     test_basic_route_matches_map},
    {"basic_banks_own_memfds",
     "each CPU bank is imported from its own memfd, read-only, with its layout",
     test_basic_banks_own_memfds},
    {"bad_input_bank_index_past_last",
     "a bank index past the last is EINVAL for import, BANK_GET and the map",
     test_bad_input_bank_index_past_last},
    {"basic_decode_verifies_on_three_banks",
     "moecache-decode runs experts on all three banks and verifies bit for bit",
     test_basic_decode_verifies_on_three_banks},
    {"basic_decode_cold_cpu_on_three_banks",
     "moecache-decode --cold cpu splits between three banks and the host and verifies",
     test_basic_decode_cold_cpu_on_three_banks},
    {"concurrency_two_decoders_three_banks",
     "two decoders at once, one with fast pins, share the three banks and both verify",
     test_concurrency_two_decoders_three_banks},
    {"basic_python_route_matches_map",
     "moecache.Client's banks and route on three banks agree with the map and the host pages",
     test_basic_python_route_matches_map},
};

static int rt_expert_bytes(struct rt *t)
{
	char *argv[] = {"moecache-decode", "--print-expert-bytes", RT_SHAPE, NULL};
	char path[] = "/tmp/route-bytes.XXXXXX", buf[64] = "";
	int fd = mkstemp(path), rc;
	FILE *f;

	if (fd < 0)
		return -1;
	close(fd);
	rc = rt_run(path, argv);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	unlink(path);
	t->expert_bytes = strtoull(buf, NULL, 10);
	return rc == 0 && t->expert_bytes ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"traces", required_argument, NULL, 't'},
	    {"only", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	struct rt t = {.traces = "/traces"};
	int opt;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 't')
			t.traces = optarg;
		else if (opt == 'o')
			t.only = optarg;
		else
			return 2;
	}
	snprintf(t.trace, sizeof(t.trace), "%s/olmoe-1b-7b.decode.jsonl", t.traces);
	if (rt_expert_bytes(&t)) {
		fprintf(stderr, "route: moecache-decode --print-expert-bytes failed\n");
		return 1;
	}
	/* A driver before banks reports max_banks 0: nothing here can run on it. */
	{
		struct moecache_info info;
		struct moecache *mc;

		if (moecache_open(NULL, &mc) || moecache_get_info(mc, &info)) {
			fprintf(stderr, "route: cannot open the device\n");
			return 1;
		}
		moecache_close(mc);
		if (info.max_banks == 0) {
			for (size_t i = 0; i < sizeof(rt_tests) / sizeof(rt_tests[0]); i++)
				printf("ok %zu - %s # SKIP the driver has no banks (max_banks 0)\n",
				       i + 1, rt_tests[i].name);
			printf("route: 0 passed, 0 failed, %zu skipped\n",
			       sizeof(rt_tests) / sizeof(rt_tests[0]));
			return 0;
		}
		if (info.max_banks < RT_BANKS) {
			printf("route: 0 passed, 1 failed, 0 skipped\n# max_banks %u: the tests need %d\n",
			       info.max_banks, RT_BANKS);
			return 1;
		}
	}
	for (size_t i = 0; i < sizeof(rt_tests) / sizeof(rt_tests[0]); i++) {
		const struct rt_test *rt = &rt_tests[i];
		int ret;

		if (t.only && strcmp(t.only, rt->name))
			continue;
		t.why[0] = '\0';
		t.n++;
		ret = rt_pool_up(&t, rt->name);
		if (!ret)
			ret = rt->run(&t);
		rt_pool_down(&t);
		if (!ret && !t.why[0] && t.skip) {
			t.skipped++;
			printf("ok %d - %s # SKIP %s\n", t.n, rt->name, t.skip);
			t.skip = NULL;
		} else if (ret || t.why[0]) {
			t.failed++;
			printf("not ok %d - %s # %s\n    %s\n", t.n, rt->name, rt->description,
			       t.why);
		} else {
			t.passed++;
			printf("ok %d - %s # %s\n", t.n, rt->name, rt->description);
		}
		fflush(stdout);
	}
	printf("route: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
	return t.failed || !t.n ? 1 : 0;
}
