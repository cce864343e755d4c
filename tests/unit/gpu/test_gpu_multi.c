// SPDX-License-Identifier: MIT
/*
 * Several devices, one bank each, through agent/copy/backend.h as the
 * agent drives them: the CUDA backend on the fake libcuda with four
 * devices (peer access within pairs 0-1 and 2-3), the ROCm backend on the
 * fake KFD's gfx1100 and eight gfx1030s (peer links within GPUs 0-4 and
 * within 5-8; the link 0-5 forbids peer DMA). Every test runs on both
 * (a table of the two). The fake banks are memfds: the tests read the
 * bytes back through the exported fd.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "agent/copy/backend.h"
#include "lib/gpu/rocm_api.h"
#include "gpu_test.h"

#define EXPERT_BYTES 8192u
#define N_SLOTS 4u
#define N_EXPERTS 16u
#define MAX_BANKS 9

struct pair {
	uint32_t dst, src;
	bool peer;
};

struct vendor {
	const char *backend;
	const char *check; /* the device check program, beside the unit tests */
	uint32_t n_devices;
	struct pair peer, no_peer; /* a pair with peer access, one without */
	struct pair probes[6];	   /* what the probe must answer, from the fake's topology */
	const char *slow_env;	   /* makes each device copy take 20 ms */
	bool (*leaked)(void);	   /* does the fake hold anything alive? */
};

static bool cuda_leaked(void)
{
	struct fake_cuda_counts c = fake_cuda_live();

	return c.allocations || c.mappings || c.reservations || c.streams || c.events || c.contexts;
}

static bool rocm_leaked(void)
{
	struct fake_rocm_counts c = fake_rocm_live();

	return c.queues || c.events || c.allocations || c.registrations || c.mappings || c.bos ||
	       c.devices;
}

static const struct vendor cuda_vendor = {
    .backend = "cuda",
    .check = "../gpu/moecache-cuda-check",
    .n_devices = 4,
    .peer = {1, 0, true},
    .no_peer = {2, 1, false},
    .probes =
	{{0, 1, true}, {1, 0, true}, {3, 2, true}, {1, 2, false}, {0, 3, false}, {3, 0, false}},
    .slow_env = "FAKE_CUDA_COPY_US",
    .leaked = cuda_leaked,
};

static const struct vendor rocm_vendor = {
    .backend = "rocm",
    .check = "../gpu/moecache-rocm-check",
    .n_devices = FAKE_ROCM_N_GPUS,
    .peer = {0, 3, true},
    .no_peer = {0, 5, false},
    /* 0-5: a link, but NoPeerToPeerDMA; 2-7 and 8-4: no link at all */
    .probes =
	{{0, 3, true}, {3, 0, true}, {8, 5, true}, {0, 5, false}, {2, 7, false}, {8, 4, false}},
    .slow_env = "FAKE_ROCM_SDMA_US",
    .leaked = rocm_leaked,
};

static char tree[64];
static unsigned char *experts;

/* Keeps the fake loaded after the last backend unloads it, for the leak counts. */
static void hold(const char *path)
{
	cr_assert_not_null(dlopen(path, RTLD_NOW), "%s", dlerror());
}

static void cuda_init(void)
{
	use_fake_cuda();
	hold(fake_cuda_path());
	setenv("FAKE_CUDA_DEVICES", "4", 1);
	setenv("FAKE_CUDA_PEER_GROUP", "2", 1);
	experts = make_experts(N_EXPERTS, EXPERT_BYTES);
	cr_assert_not_null(experts);
}

static void rocm_init(void)
{
	char lib[PATH_MAX];

	cr_assert_eq(use_fake_rocm(tree), 0, "the fake ROCm tree under %s", tree);
	hold(beside_exe(FAKE_ROCM_NAME, lib));
	experts = make_experts(N_EXPERTS, EXPERT_BYTES);
	cr_assert_not_null(experts);
}

static void rocm_fini(void)
{
	fake_rocm_tree_remove(tree);
}

/* One bank on a device, its bytes mapped here through the exported fd. */
struct bank {
	struct agent_backend *be;
	struct moecache_bank desc;
	const unsigned char *bytes;
};

/* A bank on device whose prefetches go in pieces of chunk bytes (0: the engine's). */
static int bank_open_chunked(const struct vendor *v, uint32_t device, uint64_t chunk,
			     struct bank *b)
{
	struct agent_backend_config cfg = {
	    .pool = "multi",
	    .n_slots = N_SLOTS,
	    .bank = device,
	    .device = device,
	    .fixed_device = true,
	    .expert_bytes = EXPERT_BYTES,
	    .copy_threads = 2,
	    .chunk_bytes = chunk,
	};
	void *p;
	int ret;

	memset(b, 0, sizeof(*b));
	ret = agent_backend_create(v->backend, &cfg, &b->be);
	if (ret)
		return ret;
	ret = agent_backend_bank_create(b->be, &b->desc);
	if (ret)
		return ret;
	p = mmap(NULL, b->desc.bank_bytes, PROT_READ, MAP_SHARED, b->desc.fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	b->bytes = p;
	return 0;
}

static int bank_open(const struct vendor *v, uint32_t device, struct bank *b)
{
	return bank_open_chunked(v, device, 0, b);
}

static void bank_close(struct bank *b)
{
	if (b->bytes)
		munmap((void *)b->bytes, b->desc.bank_bytes);
	agent_backend_destroy(b->be);
	memset(b, 0, sizeof(*b));
}

static void open_ok(const struct vendor *v, uint32_t device, struct bank *b)
{
	int ret = bank_open(v, device, b);

	cr_assert_eq(ret, 0, "%s bank on device %u: %d", v->backend, device, ret);
}

/* Banks on the pair's two devices. */
static void open_pair(const struct vendor *v, const struct pair *p, struct bank *dst,
		      struct bank *src)
{
	open_ok(v, p->dst, dst);
	open_ok(v, p->src, src);
}

/* Collects want completions of b; returns how many failed. */
static int collect(struct bank *b, uint32_t want)
{
	struct agent_copy done[16];
	int failed = 0;

	while (want) {
		int n;

		cr_assert(wait_readable(agent_backend_completion_fd(b->be), 10000),
			  "%u completions missing", want);
		n = agent_backend_completions(b->be, done, want < 16 ? want : 16);
		cr_assert_geq(n, 0);
		for (int i = 0; i < n; i++)
			failed += done[i].status != 0;
		want -= (uint32_t)n;
	}
	return failed;
}

static const unsigned char *expert(uint32_t e)
{
	return experts + (uint64_t)e * EXPERT_BYTES;
}

static struct agent_copy host_copy(uint32_t slot, uint32_t e)
{
	return (struct agent_copy){.slot = slot, .expert = e, .src = expert(e)};
}

static bool slot_holds(const struct bank *b, uint32_t slot, uint32_t e)
{
	return !memcmp(b->bytes + (uint64_t)slot * b->desc.slot_stride, expert(e), EXPERT_BYTES);
}

/* Fills slot of b with expert e from the host pages. */
static void fill(struct bank *b, uint32_t slot, uint32_t e)
{
	struct agent_copy c = host_copy(slot, e);

	cr_assert_eq(agent_backend_copy(b->be, &c), 0);
	cr_assert_eq(collect(b, 1), 0);
}

/* A test body run once per vendor: NAME_cuda and NAME_rocm in the suites cuda_multi and rocm_multi.
 */
#define BOTH(name, desc)                                                                           \
	static void name##_body(const struct vendor *v);                                           \
	Test(cuda_multi, name, .description = desc, .init = cuda_init, .timeout = 60)              \
	{                                                                                          \
		name##_body(&cuda_vendor);                                                         \
	}                                                                                          \
	Test(rocm_multi, name, .description = desc, .init = rocm_init, .fini = rocm_fini,          \
	     .timeout = 60)                                                                        \
	{                                                                                          \
		name##_body(&rocm_vendor);                                                         \
	}                                                                                          \
	static void name##_body(const struct vendor *v)

BOTH(basic_bank_per_device, "one bank on each device: each on its own, each copy lands in it")
{
	struct bank b[MAX_BANKS];

	for (uint32_t d = 0; d < v->n_devices; d++) {
		open_ok(v, d, &b[d]);
		cr_expect_eq(b[d].desc.device, d);
		for (uint32_t e = 0; e < d; e++)
			cr_expect_neq(memcmp(b[d].desc.device_uuid, b[e].desc.device_uuid, 16), 0,
				      "devices %u and %u have one uuid", d, e);
	}
	for (uint32_t d = 0; d < v->n_devices; d++)
		fill(&b[d], 1, d);
	for (uint32_t d = 0; d < v->n_devices; d++) {
		cr_expect(slot_holds(&b[d], 1, d), "bank on device %u", d);
		bank_close(&b[d]);
	}
	cr_expect_not(v->leaked());
}

BOTH(bad_input_device_out_of_range, "a bank on a device ordinal that does not exist: -ENODEV")
{
	struct bank b;

	cr_expect_eq(bank_open(v, v->n_devices, &b), -ENODEV);
	cr_expect_eq(bank_open(v, UINT32_MAX, &b), -ENODEV);
	cr_expect_not(v->leaked());
}

BOTH(basic_peer_probe_follows_driver, "can_peer answers what the driver reports for each pair")
{
	for (size_t i = 0; i < sizeof(v->probes) / sizeof(v->probes[0]); i++) {
		const struct pair *p = &v->probes[i];
		struct bank dst, src;

		open_pair(v, p, &dst, &src);
		cr_expect_eq(agent_backend_can_peer(dst.be, src.be), p->peer, "%u <- %u: %d",
			     p->dst, p->src, p->peer);
		bank_close(&src);
		bank_close(&dst);
	}
}

BOTH(basic_peer_copy_bytes,
     "a peer pair copies device to device: the bytes come from the other bank")
{
	struct agent_copy c = host_copy(3, 5);
	struct bank dst, src;

	open_pair(v, &v->peer, &dst, &src);
	fill(&src, 2, 5);
	cr_assert(agent_backend_can_peer(dst.be, src.be));
	/* Nothing else holds expert 5 now: only src's slot 2 can give its bytes. */
	memset((void *)expert(5), 0, EXPERT_BYTES);
	c.src = NULL;
	cr_assert_eq(agent_backend_copy_peer(dst.be, src.be, 2, &c), 0);
	cr_assert_eq(collect(&dst, 1), 0);
	cr_expect_eq(memcmp(dst.bytes + 3 * dst.desc.slot_stride,
			    src.bytes + 2 * src.desc.slot_stride, EXPERT_BYTES),
		     0);
	cr_expect_eq(agent_backend_inflight(src.be), 0, "the source bank queued nothing");
	bank_close(&src);
	bank_close(&dst);
	cr_expect_not(v->leaked());
}

BOTH(basic_no_peer_copies_through_host,
     "a pair without peer access refuses copy_peer (-EOPNOTSUPP); the host pages fill it")
{
	struct agent_copy c = host_copy(1, 9);
	struct bank dst, src;

	open_pair(v, &v->no_peer, &dst, &src);
	fill(&src, 0, 9);
	cr_expect_not(agent_backend_can_peer(dst.be, src.be));
	cr_expect_eq(agent_backend_copy_peer(dst.be, src.be, 0, &c), -EOPNOTSUPP);
	cr_expect_eq(agent_backend_inflight(dst.be), 0);
	cr_assert_eq(agent_backend_copy(dst.be, &c), 0);
	cr_assert_eq(collect(&dst, 1), 0);
	cr_expect(slot_holds(&dst, 1, 9));
	bank_close(&src);
	bank_close(&dst);
}

BOTH(bad_input_peer_same_device, "two banks on one device are not peers of each other")
{
	struct agent_copy c = host_copy(1, 2);
	struct bank a, b;

	open_ok(v, 0, &a);
	open_ok(v, 0, &b);
	cr_expect_not(agent_backend_can_peer(a.be, b.be));
	cr_expect_not(agent_backend_can_peer(a.be, a.be));
	cr_expect_eq(agent_backend_copy_peer(a.be, b.be, 0, &c), -EOPNOTSUPP);
	cr_expect_eq(agent_backend_copy_peer(a.be, a.be, 0, &c), -EOPNOTSUPP);
	bank_close(&b);
	bank_close(&a);
}

BOTH(bad_input_peer_slot_out_of_range, "a peer copy from or into a slot past the bank: -EINVAL")
{
	struct agent_copy c = host_copy(N_SLOTS, 2);
	struct bank dst, src;

	open_pair(v, &v->peer, &dst, &src);
	cr_expect_eq(agent_backend_copy_peer(dst.be, src.be, 0, &c), -EINVAL);
	c.slot = 0;
	cr_expect_eq(agent_backend_copy_peer(dst.be, src.be, N_SLOTS, &c), -EINVAL);
	cr_expect_eq(agent_backend_inflight(dst.be), 0);
	bank_close(&src);
	bank_close(&dst);
}

BOTH(lifetime_destroy_dst_with_peer_copies_in_flight,
     "destroying a bank while peer copies into it run waits for them and frees everything")
{
	struct bank dst, src;

	open_pair(v, &v->peer, &dst, &src);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		fill(&src, s, s);
	setenv(v->slow_env, "20000", 1);
	for (uint32_t s = 0; s < N_SLOTS; s++) {
		struct agent_copy c = {.slot = s, .expert = s};

		cr_assert_eq(agent_backend_copy_peer(dst.be, src.be, s, &c), 0);
	}
	cr_expect_gt(agent_backend_inflight(dst.be), 0);
	bank_close(&dst);
	bank_close(&src);
	cr_expect_not(v->leaked());
}

BOTH(lifetime_destroy_src_with_peer_copies_in_flight,
     "the source bank may go while peer copies from it run: they finish with its bytes")
{
	struct bank dst, src;

	open_pair(v, &v->peer, &dst, &src);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		fill(&src, s, 4 + s);
	setenv(v->slow_env, "20000", 1);
	for (uint32_t s = 0; s < N_SLOTS; s++) {
		struct agent_copy c = {.slot = s, .expert = 4 + s};

		cr_assert_eq(agent_backend_copy_peer(dst.be, src.be, s, &c), 0);
	}
	bank_close(&src);
	cr_expect_eq(collect(&dst, N_SLOTS), 0);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_expect(slot_holds(&dst, s, 4 + s), "slot %u", s);
	bank_close(&dst);
	cr_expect_not(v->leaked());
}

/* ---- prefetches in pieces, cancelled between two (the engine's cancel op) ---- */

/* Collects one completion of b. */
static struct agent_copy collect_one(struct bank *b)
{
	struct agent_copy done;

	cr_assert(wait_readable(agent_backend_completion_fd(b->be), 10000), "no completion");
	cr_assert_eq(agent_backend_completions(b->be, &done, 1), 1);
	return done;
}

/* Bytes [from, EXPERT_BYTES) of slot are all zero: no piece wrote them. */
static bool slot_zero_from(const struct bank *b, uint32_t slot, uint64_t from)
{
	const unsigned char *p = b->bytes + (uint64_t)slot * b->desc.slot_stride;

	for (uint64_t i = from; i < EXPERT_BYTES; i++)
		if (p[i])
			return false;
	return true;
}

BOTH(basic_chunked_prefetch_lands_whole,
     "a prefetch copied in pieces (a chunk that does not divide the expert) lands byte for byte "
     "and completes once")
{
	struct agent_copy c = host_copy(2, 9), done;
	struct bank b;

	c.flags = MOECACHE_FILL_PREFETCH;
	cr_assert_eq(bank_open_chunked(v, 0, EXPERT_BYTES / 3, &b), 0);
	cr_assert_eq(agent_backend_copy(b.be, &c), 0);
	done = collect_one(&b);
	cr_expect_eq(done.status, 0);
	cr_expect_eq(done.slot, 2);
	cr_expect(slot_holds(&b, 2, 9));
	cr_expect_eq(agent_backend_inflight(b.be), 0);
	bank_close(&b);
	cr_expect_not(v->leaked());
}

BOTH(basic_cancel_prefetch_between_pieces,
     "a prefetch cancelled while its first piece runs finishes as -ECANCELED after that piece; "
     "the pieces after it are never copied")
{
	struct agent_copy c = host_copy(1, 5), done;
	struct bank b;

	c.flags = MOECACHE_FILL_PREFETCH;
	setenv(v->slow_env, "20000", 1);
	cr_assert_eq(bank_open_chunked(v, 0, EXPERT_BYTES / 4, &b), 0);
	cr_assert_eq(agent_backend_copy(b.be, &c), 0);
	cr_expect_eq(agent_backend_cancel(b.be, 1), 0);
	done = collect_one(&b);
	cr_expect_eq(done.status, -ECANCELED);
	cr_expect_eq(done.slot, 1);
	/* The first piece may have landed, a second one at most if the cancel came late. */
	cr_expect(slot_zero_from(&b, 1, EXPERT_BYTES / 2), "pieces copied after the cancel");
	cr_expect_eq(agent_backend_inflight(b.be), 0);
	cr_expect_eq(agent_backend_cancel(b.be, 1), -ENOENT, "cancelled and collected");
	unsetenv(v->slow_env);
	bank_close(&b);
	cr_expect_not(v->leaked());
}

BOTH(bad_input_cancel_demand_copy,
     "cancel finds no prefetch into a slot a demand copy fills, or into an idle slot: -ENOENT, "
     "and the demand copy lands")
{
	struct agent_copy c = host_copy(3, 7), done;
	struct bank b;

	setenv(v->slow_env, "20000", 1);
	cr_assert_eq(bank_open_chunked(v, 0, EXPERT_BYTES / 4, &b), 0);
	cr_assert_eq(agent_backend_copy(b.be, &c), 0);
	cr_expect_eq(agent_backend_cancel(b.be, 3), -ENOENT);
	cr_expect_eq(agent_backend_cancel(b.be, 0), -ENOENT);
	done = collect_one(&b);
	cr_expect_eq(done.status, 0);
	cr_expect(slot_holds(&b, 3, 7));
	unsetenv(v->slow_env);
	bank_close(&b);
	cr_expect_not(v->leaked());
}

/* Runs the device check's peer subcommand on pair p; its exit status, its output in out. */
static int run_peer_check(const struct vendor *v, const struct pair *p, char *out, size_t len)
{
	char prog[PATH_MAX], cmd[PATH_MAX + 128];
	size_t n = 0;
	FILE *f;

	beside_exe(v->check, prog);
	snprintf(cmd, sizeof(cmd), "'%s' --device %u --peer-device %u peer 2>&1", prog, p->dst,
		 p->src);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (n + 1 < len && fgets(out + n, (int)(len - n), f))
		n += strlen(out + n);
	out[n] = '\0';
	return pclose(f);
}

BOTH(basic_device_check_peer,
     "the device check's peer subcommand passes on a peer pair (device to device) and on a pair "
     "without peer access (host pages)")
{
	char out[4096];

	cr_expect_eq(run_peer_check(v, &v->peer, out, sizeof(out)), 0, "%s", out);
	cr_expect(strstr(out, "PASS peer.probe") && strstr(out, "PASS peer.copy"), "%s", out);
	cr_expect_eq(run_peer_check(v, &v->no_peer, out, sizeof(out)), 0, "%s", out);
	cr_expect(strstr(out, "PASS peer.probe") && strstr(out, "PASS peer.host_path"), "%s", out);
}
