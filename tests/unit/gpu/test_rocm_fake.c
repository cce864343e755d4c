// SPDX-License-Identifier: MIT
/*
 * The ROCm backend and client import on fake libhsakmt and libdrm_amdgpu
 * (tests/unit/gpu/fake_rocm.c), which execute the SDMA packets on the
 * host: the ring, fences, the delay gate, registration and adoption run
 * for real; only the hardware is imagined.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "agent/copy/gpu.h"
#include "lib/gpu/bank.h"
#include "lib/gpu/rocm_api.h"
#include "gpu_test.h"

#define EXPERT_BYTES 8192u
#define N_SLOTS 4u

static char tree[64];

/* The fake KFD, its render nodes and a sysfs tree, in a temp dir. */
static void fake_rocm_setup(void)
{
	cr_assert_eq(use_fake_rocm(tree), 0, "the fake ROCm tree under %s", tree);
}

static void fake_rocm_teardown(void)
{
	fake_rocm_tree_remove(tree);
}

static struct agent_backend_config test_cfg(void)
{
	return (struct agent_backend_config){
	    .pool = "p", .n_slots = N_SLOTS, .expert_bytes = EXPERT_BYTES, .copy_threads = 2};
}

struct rbe {
	void *priv;
	struct moecache_bank desc;
	unsigned char *src;
	unsigned char *readback;
};

static void rbe_open(struct rbe *b, const struct mc_gpu_params *params)
{
	struct agent_backend_config cfg = test_cfg();
	char err[320] = "";
	int ret;

	memset(b, 0, sizeof(*b));
	ret = agent_rocm_backend_create(&cfg, params, &b->priv, err, sizeof(err));
	cr_assert_eq(ret, 0, "create: %d %s", ret, err);
	ret = agent_rocm_backend.bank_create(b->priv, &b->desc);
	cr_assert_eq(ret, 0, "bank_create: %d %s", ret, agent_gpu_backend_error(b->priv));
	b->src = make_experts(16, EXPERT_BYTES);
	b->readback = malloc(EXPERT_BYTES);
	cr_assert(b->src && b->readback);
}

static void rbe_close(struct rbe *b)
{
	if (b->priv)
		agent_rocm_backend.destroy(b->priv);
	free(b->src);
	free(b->readback);
}

static int rbe_copy(struct rbe *b, uint32_t slot, uint32_t expert)
{
	struct agent_copy c = {
	    .slot = slot, .expert = expert, .src = b->src + (uint64_t)expert * EXPERT_BYTES};

	return agent_rocm_backend.copy(b->priv, &c);
}

static int rbe_collect(struct rbe *b, uint32_t want)
{
	struct agent_copy done[64];
	int failed = 0;

	while (want) {
		int n;

		cr_assert(wait_readable(agent_rocm_backend.completion_fd(b->priv), 5000),
			  "completions missing (%u)", want);
		n = agent_rocm_backend.completions(b->priv, done, want < 64 ? want : 64);
		cr_assert_geq(n, 0);
		for (int i = 0; i < n; i++)
			failed += done[i].status != 0;
		want -= (uint32_t)n;
	}
	return failed;
}

static bool rbe_slot_is(struct rbe *b, uint32_t slot, uint32_t expert)
{
	return agent_rocm_backend_read_slot(b->priv, slot, b->readback, EXPERT_BYTES) == 0 &&
	       !memcmp(b->readback, b->src + (uint64_t)expert * EXPERT_BYTES, EXPERT_BYTES);
}

TestSuite(rocm_fake, .init = fake_rocm_setup, .fini = fake_rocm_teardown);

Test(rocm_fake, basic_bank_descriptor,
     .description = "a VRAM bank as a dma-buf: ROCm, page stride, 2 MiB bank, PCI identity")
{
	uint32_t domain, location;
	uint16_t device_id;
	struct rbe b;

	rbe_open(&b, NULL);
	cr_expect_eq(b.desc.backend, MOECACHE_BACKEND_ROCM);
	cr_expect_eq(b.desc.slot_stride, EXPERT_BYTES);
	cr_expect_eq(b.desc.bank_bytes, 2u << 20);
	cr_expect_geq(b.desc.fd, 0);
	cr_assert_eq(mc_rocm_uuid_parse(b.desc.device_uuid, &domain, &location, &device_id), 0);
	cr_expect_eq(location, 0x0300);
	cr_expect_eq(device_id, 0x744c);
	rbe_close(&b);
}

Test(rocm_fake, basic_copies_land,
     .description = "SDMA copies complete with the expert's bytes in each slot")
{
	struct rbe b;

	rbe_open(&b, NULL);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_assert_eq(rbe_copy(&b, s, 10 + s), 0);
	cr_expect_eq(rbe_collect(&b, N_SLOTS), 0);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_expect(rbe_slot_is(&b, s, 10 + s), "slot %u", s);
	cr_expect_eq(agent_rocm_backend.inflight(b.priv), 0);
	cr_expect_eq(fake_rocm_live().bad_packets, 0);
	rbe_close(&b);
}

Test(rocm_fake, basic_ring_wraps,
     .description =
	 "thousands of copies wrap the ring with NOP padding and no packet across its end")
{
	struct rbe b;

	rbe_open(&b, NULL);
	/* 13 dwords a copy: a 64 KiB ring wraps every ~1260 copies. */
	for (uint32_t round = 0; round < 100; round++) {
		for (uint32_t i = 0; i < 40; i++)
			cr_assert_eq(rbe_copy(&b, i % N_SLOTS, (round + i) % 16), 0,
				     "round %u copy %u", round, i);
		cr_assert_eq(rbe_collect(&b, 40), 0);
	}
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_expect(rbe_slot_is(&b, s, (99 + 36 + s) % 16), "slot %u", s);
	cr_expect_eq(fake_rocm_live().bad_packets, 0);
	cr_expect_geq(fake_rocm_live().copies, 4000);
	rbe_close(&b);
}

Test(rocm_fake, basic_not_done_before_bytes,
     .description = "a delayed copy stops at its gate half-written and is not reported until done")
{
	struct agent_copy done;
	struct rbe b;

	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 1, 3), 0);
	cr_assert_eq(rbe_collect(&b, 1), 0);
	agent_rocm_backend.set_delay(b.priv, 300000);
	cr_assert_eq(rbe_copy(&b, 1, 7), 0);
	sleep_ms(100);
	cr_expect_eq(agent_rocm_backend.completions(b.priv, &done, 1), 0);
	cr_expect_eq(agent_rocm_backend.inflight(b.priv), 1);
	cr_expect_eq(rbe_collect(&b, 1), 0);
	cr_expect(rbe_slot_is(&b, 1, 7));
	cr_expect_eq(fake_rocm_live().bad_packets, 0);
	rbe_close(&b);
}

Test(rocm_fake, basic_polled_without_event,
     .description = "without a KFD event the completion thread polls the fences")
{
	struct rbe b;

	setenv("FAKE_ROCM_NO_EVENTS", "1", 1);
	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 2, 5), 0);
	cr_expect_eq(rbe_collect(&b, 1), 0);
	cr_expect(rbe_slot_is(&b, 2, 5));
	rbe_close(&b);
}

Test(rocm_fake, basic_gfx8_refused,
     .description = "a GPU older than GFX9 is refused with -EOPNOTSUPP")
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	void *priv;

	setenv("FAKE_ROCM_GFX", "8", 1);
	cr_assert_eq(agent_rocm_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_expect_eq(agent_rocm_backend.bank_create(priv, &desc), -EOPNOTSUPP);
	cr_expect(strstr(agent_gpu_backend_error(priv), "GFX9"), "%s",
		  agent_gpu_backend_error(priv));
	agent_rocm_backend.destroy(priv);
}

Test(rocm_fake, basic_budget_too_small,
     .description = "a bank over the per-device budget is -ENOSPC")
{
	struct agent_backend_config cfg = test_cfg();
	struct mc_gpu_params p = {.device_budget = 1u << 20};
	struct moecache_bank desc;
	void *priv;

	cr_assert_eq(agent_rocm_backend_create(&cfg, &p, &priv, NULL, 0), 0);
	cr_expect_eq(agent_rocm_backend.bank_create(priv, &desc), -ENOSPC);
	agent_rocm_backend.destroy(priv);
}

Test(rocm_fake, lifetime_adopt_keeps_bytes,
     .description = "a new backend adopting the dma-buf reads what the old one copied")
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	unsigned char *src;
	void *priv;
	struct rbe b;

	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 3, 9), 0);
	cr_assert_eq(rbe_collect(&b, 1), 0);
	desc = b.desc;
	desc.fd = dup(b.desc.fd);
	src = b.src;
	b.src = NULL;
	rbe_close(&b);

	cr_assert_eq(agent_rocm_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_assert_eq(agent_rocm_backend.bank_adopt(priv, &desc), 0, "%s",
		     agent_gpu_backend_error(priv));
	b = (struct rbe){.priv = priv, .desc = desc, .src = src, .readback = malloc(EXPERT_BYTES)};
	cr_expect(rbe_slot_is(&b, 3, 9));
	rbe_close(&b);
}

Test(rocm_fake, bad_input_adopt_other_gpu,
     .description = "a bank from a GPU at another PCI location is -EPROTO")
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	void *priv;
	struct rbe b;

	rbe_open(&b, NULL);
	desc = b.desc;
	mc_rocm_uuid_make(0, 0x0400, 0x744c, desc.device_uuid);
	cr_assert_eq(agent_rocm_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_expect_eq(agent_rocm_backend.bank_adopt(priv, &desc), -EPROTO);
	cr_expect(strstr(agent_gpu_backend_error(priv), "not visible"), "%s",
		  agent_gpu_backend_error(priv));
	agent_rocm_backend.destroy(priv);
	rbe_close(&b);
}

Test(rocm_fake, leak_destroy_frees_everything,
     .description = "destroy returns queues, events, memory, mappings, BOs and the device")
{
	struct fake_rocm_counts live;
	char lib[PATH_MAX];
	void *h;
	struct rbe b;

	h = dlopen(beside_exe("libmoecache-fakerocm.so", lib), RTLD_NOW);
	cr_assert_not_null(h);
	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 0, 1), 0);
	cr_assert_eq(rbe_collect(&b, 1), 0);
	rbe_close(&b);
	live = fake_rocm_live();
	cr_expect_eq(live.queues, 0);
	cr_expect_eq(live.events, 0);
	cr_expect_eq(live.allocations, 0);
	cr_expect_eq(live.registrations, 0);
	cr_expect_eq(live.mappings, 0);
	cr_expect_eq(live.bos, 0);
	cr_expect_eq(live.devices, 0);
	dlclose(h);
}

/* A client's import of the backend's bank, as BANK_GET hands it over. */
static void client_import(const struct rbe *b, struct moecache_bank_map *m)
{
	memset(m, 0, sizeof(*m));
	m->backend = MOECACHE_BACKEND_ROCM;
	m->n_slots = N_SLOTS;
	m->fd = dup(b->desc.fd);
	m->bytes = b->desc.bank_bytes;
	m->slot_stride = b->desc.slot_stride;
	m->expert_bytes = EXPERT_BYTES;
	m->desc = b->desc;
	m->desc.fd = m->fd;
	cr_assert_eq(mc_rocm_bank_import(m), 0, "%s", moecache_bank_import_error());
}

Test(rocm_fake, basic_client_import,
     .description = "a client imports the dma-buf through libdrm and sees the slots at its VA")
{
	struct moecache_bank_map m;
	struct rbe b;
	uint64_t addr;

	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 2, 4), 0);
	cr_assert_eq(rbe_collect(&b, 1), 0);
	client_import(&b, &m);
	addr = moecache_bank_slot_addr(&m, 2);
	cr_assert_neq(addr, 0);
	/* The fake's GPU VA is a host address: the bytes can be compared. */
	cr_expect_eq(memcmp((void *)(uintptr_t)addr, b.src + 4 * EXPERT_BYTES, EXPERT_BYTES), 0);
	cr_expect_eq(moecache_bank_release_after(NULL, &m, NULL, NULL, 0), -EOPNOTSUPP,
		     "no stream marker without a HIP runtime");
	mc_rocm_bank_unimport(&m);
	close(m.fd);
	cr_expect_eq(fake_rocm_live().va_ranges, 0);
	rbe_close(&b);
}

Test(rocm_fake, basic_device_check_runs,
     .description =
	 "moecache-rocm-check copy and import pass on the fake libraries (the amd-check plumbing)",
     .timeout = 120)
{
	char prog[PATH_MAX], cmd[PATH_MAX + 64];

	beside_exe("../gpu/moecache-rocm-check", prog);
	snprintf(cmd, sizeof(cmd), "'%s' copy >/dev/null 2>&1", prog);
	cr_expect_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "'%s' import >/dev/null 2>&1", prog);
	cr_expect_eq(system(cmd), 0, "%s", cmd);
}

/* The page flags of the fake's last GPU VA mapping (fake_rocm_va_flags()). */
static uint64_t fake_va_flags(void)
{
	char lib[PATH_MAX];
	void *h = dlopen(beside_exe(FAKE_ROCM_NAME, lib), RTLD_NOW | RTLD_NOLOAD);
	uint64_t (*flags)(void);
	uint64_t ret = 0;
	void *sym;

	cr_assert_not_null(h, "the fake libdrm_amdgpu is not loaded");
	sym = dlsym(h, "fake_rocm_va_flags");
	cr_assert_not_null(sym);
	memcpy(&flags, &sym, sizeof(sym));
	ret = flags();
	dlclose(h);
	return ret;
}

/*
 * Pins: the client import mapped the bank with amdgpu_bo_va_op, whose page
 * flags are readable, writeable and executable: a client's GPU work could
 * write the slots every other tenant computes with.
 */
Test(rocm_fake, permission_client_import_read_only,
     .description = "a client's import maps the bank readable only: a store to a slot faults")
{
	struct moecache_bank_map m;
	volatile uint8_t *slot;
	struct rbe b;
	int status;
	pid_t pid;

	rbe_open(&b, NULL);
	cr_assert_eq(rbe_copy(&b, 1, 3), 0);
	cr_assert_eq(rbe_collect(&b, 1), 0);
	client_import(&b, &m);
	cr_expect_eq(fake_va_flags(), (uint64_t)AMDGPU_VM_PAGE_READABLE,
		     "the bank is mapped with page flags 0x%llx",
		     (unsigned long long)fake_va_flags());
	slot = (volatile uint8_t *)(uintptr_t)moecache_bank_slot_addr(&m, 1);
	cr_assert_not_null((void *)slot);
	/* Readable (the fake's GPU VA is a host address)... */
	cr_expect_eq(slot[0], b.src[3 * EXPERT_BYTES]);
	/* ...and a store faults. */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		slot[0] = (uint8_t)~slot[0];
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
		  "a store to the client's mapping of the bank did not fault (status 0x%x)",
		  status);
	mc_rocm_bank_unimport(&m);
	close(m.fd);
	rbe_close(&b);
}
