// SPDX-License-Identifier: MIT
/*
 * The CUDA driver table, the agent's CUDA backend and the client import,
 * on the fake driver (tests/unit/gpu/fake_cuda.c): device memory is host
 * memory there, so the bytes each copy lands can be checked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "lib/gpu/bank.h"
#include "agent/copy/gpu.h"
#include "gpu_test.h"
#include "lib/mc_internal.h"

#define EXPERT_BYTES 8192u
#define N_SLOTS 8u
#define GRANULE (2u << 20)

static struct agent_backend_config test_cfg(void)
{
	return (struct agent_backend_config){
	    .pool = "p",
	    .n_slots = N_SLOTS,
	    .expert_bytes = EXPERT_BYTES,
	    .copy_threads = 2,
	};
}

static void fake_setup(void)
{
	use_fake_cuda();
}

/* ---- the driver table ---- */

Test(cuda_api, bad_input_missing_library,
     .description = "no libcuda: -ENOENT naming the library and the driver")
{
	struct mc_cuda_api api;
	char err[256] = "";

	cr_expect_eq(mc_cuda_api_load(&api, "/nonexistent/libcuda.so.1", err, sizeof(err)),
		     -ENOENT);
	cr_expect(strstr(err, "/nonexistent/libcuda.so.1"), "%s", err);
	cr_expect(strstr(err, "NVIDIA driver"), "%s", err);
	cr_expect_null(api.lib);
}

Test(cuda_api, bad_input_library_without_entry_points,
     .description = "a library that is not the driver: -ENOSYS naming the first missing symbol")
{
	struct mc_cuda_api api;
	char err[256] = "";

	cr_expect_eq(mc_cuda_api_load(&api, "libm.so.6", err, sizeof(err)), -ENOSYS);
	cr_expect(strstr(err, "cuInit"), "%s", err);
	cr_expect_null(api.lib);
}

Test(cuda_api, basic_versioned_symbols,
     .description = "the fake driver resolves, _v2 names included", .init = fake_setup)
{
	struct mc_cuda_api api;
	char err[256] = "";

	cr_assert_eq(mc_cuda_api_load(&api, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_not_null(api.cuMemHostRegister);
	cr_expect_not_null(api.cuMemcpyHtoDAsync);
	cr_expect_not_null(api.cuDeviceGetUuid);
	cr_expect_not_null(api.cuLaunchKernel);
	cr_expect_eq(api.cuMemHostRegister, dlsym(api.lib, "cuMemHostRegister_v2"));
	mc_cuda_api_unload(&api);
}

Test(cuda_api, basic_no_device, .description = "a driver without a GPU: -ENODEV, 'no CUDA device'",
     .init = fake_setup)
{
	struct mc_cuda_api api;
	char err[256] = "";

	setenv("FAKE_CUDA_DEVICES", "0", 1);
	cr_assert_eq(mc_cuda_api_load(&api, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(mc_cuda_init(&api, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, "no CUDA device"), "%s", err);
	mc_cuda_api_unload(&api);
}

Test(cuda_api, basic_stub_library,
     .description = "the toolkit's stub instead of a driver: -ENODEV that says so",
     .init = fake_setup)
{
	struct mc_cuda_api api;
	char err[256] = "";

	setenv("FAKE_CUDA_STUB", "1", 1);
	cr_assert_eq(mc_cuda_api_load(&api, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(mc_cuda_init(&api, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, "stub"), "%s", err);
	mc_cuda_api_unload(&api);
}

Test(cuda_api, basic_errno_of_results,
     .description = "CUDA results map to the errnos the agent acts on")
{
	cr_expect_eq(mc_cuda_errno(MC_CU_SUCCESS), 0);
	cr_expect_eq(mc_cuda_errno(MC_CU_ERROR_OUT_OF_MEMORY), -ENOMEM);
	cr_expect_eq(mc_cuda_errno(MC_CU_ERROR_NO_DEVICE), -ENODEV);
	cr_expect_eq(mc_cuda_errno(MC_CU_ERROR_NOT_READY), -EAGAIN);
	cr_expect_eq(mc_cuda_errno(MC_CU_ERROR_ILLEGAL_ADDRESS), -EIO);
	cr_expect_eq(mc_cuda_errno(MC_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED), -EBUSY);
}

Test(cuda_api, basic_uuid_text, .description = "uuids print as nvidia-smi prints them")
{
	const uint8_t u[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
			       0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
	char text[41];

	mc_cuda_uuid_format(u, text);
	cr_expect_str_eq(text, "GPU-12345678-9abc-def0-0123-456789abcdef");
}

/* ---- the backend ---- */

struct be {
	void *priv;
	struct moecache_bank desc;
	unsigned char *src;
};

static void be_open(struct be *b, const struct mc_gpu_params *params)
{
	struct agent_backend_config cfg = test_cfg();
	int ret;

	memset(b, 0, sizeof(*b));
	ret = agent_cuda_backend_create(&cfg, params, &b->priv, NULL, 0);
	cr_assert_eq(ret, 0, "create: %d", ret);
	ret = agent_cuda_backend.bank_create(b->priv, &b->desc);
	cr_assert_eq(ret, 0, "bank_create: %d (%s)", ret, agent_gpu_backend_error(b->priv));
	b->src = make_experts(N_SLOTS, EXPERT_BYTES);
	cr_assert_not_null(b->src);
}

static void be_close(struct be *b)
{
	agent_cuda_backend.destroy(b->priv);
	free(b->src);
}

/* Collects want completions (or fails after 5 s); returns how many failed. */
static int be_collect(struct be *b, uint32_t want, struct agent_copy *out)
{
	uint32_t got = 0;
	int failed = 0;

	while (got < want) {
		int n;

		cr_assert(wait_readable(agent_cuda_backend.completion_fd(b->priv), 5000),
			  "%u of %u completions", got, want);
		n = agent_cuda_backend.completions(b->priv, out + got, want - got);
		cr_assert_geq(n, 0);
		got += (uint32_t)n;
	}
	for (uint32_t i = 0; i < want; i++)
		failed += out[i].status != 0;
	return failed;
}

static int be_copy(struct be *b, uint32_t slot, uint32_t expert, uint32_t flags)
{
	struct agent_copy c = {
	    .slot = slot,
	    .layer = 0,
	    .expert = expert,
	    .flags = flags,
	    .src = b->src + (uint64_t)expert * EXPERT_BYTES,
	};

	return agent_cuda_backend.copy(b->priv, &c);
}

static const void *slot_bytes(struct be *b, uint32_t slot)
{
	return (const void *)(uintptr_t)agent_gpu_backend_slot_addr(b->priv, slot);
}

Test(cuda_backend, bad_input_no_driver, .description = "create without a driver library: -ENOENT")
{
	struct agent_backend_config cfg = test_cfg();
	void *priv = NULL;

	setenv(MC_CUDA_LIBRARY_ENV, "/nonexistent/libcuda.so.1", 1);
	cr_expect_eq(agent_cuda_backend.create(&cfg, &priv), -ENOENT);
	cr_expect_null(priv);
}

Test(cuda_backend, basic_no_device, .description = "create with a driver but no GPU: -ENODEV",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	void *priv = NULL;

	setenv("FAKE_CUDA_DEVICES", "0", 1);
	cr_expect_eq(agent_cuda_backend.create(&cfg, &priv), -ENODEV);
	cr_expect_null(priv);
}

Test(cuda_backend, bad_input_device_list,
     .description = "a bad device list fails at create, not at the first bank", .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct mc_gpu_params p = {.devices = "0,x"};
	void *priv = NULL;

	cr_expect_eq(agent_cuda_backend_create(&cfg, &p, &priv, NULL, 0), -EINVAL);
}

Test(cuda_backend, bad_input_device_list_too_long,
     .description = "a device list longer than the backend keeps is -E2BIG, not truncated",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	char spec[400], err[320] = "";
	struct mc_gpu_params p = {.devices = spec};
	void *priv = NULL;

	memset(spec, '0', sizeof(spec) - 1);
	spec[sizeof(spec) - 1] = '\0';
	cr_expect_eq(agent_cuda_backend_create(&cfg, &p, &priv, err, sizeof(err)), -E2BIG);
	cr_expect(strstr(err, "too long"), "%s", err);
	cr_expect_null(priv);
}

Test(cuda_backend, basic_no_vmm,
     .description = "a GPU without fd-exportable memory: -EOPNOTSUPP at bank creation",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	void *priv = NULL;

	setenv("FAKE_CUDA_NO_VMM", "1", 1);
	cr_assert_eq(agent_cuda_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_expect_eq(agent_cuda_backend.bank_create(priv, &desc), -EOPNOTSUPP);
	cr_expect(strstr(agent_gpu_backend_error(priv), "file descriptor"), "%s",
		  agent_gpu_backend_error(priv));
	agent_cuda_backend.destroy(priv);
}

Test(cuda_backend, basic_bank_descriptor,
     .description = "the bank descriptor: CUDA, stride rounded to the granularity, device uuid",
     .init = fake_setup)
{
	struct be b;

	be_open(&b, NULL);
	cr_expect_eq(b.desc.backend, MOECACHE_BACKEND_CUDA);
	cr_expect_eq(b.desc.slot_stride, GRANULE);
	cr_expect_eq(b.desc.bank_bytes, (uint64_t)GRANULE * N_SLOTS);
	cr_expect_eq(b.desc.device, 0);
	cr_expect_eq(b.desc.device_uuid[0], 0xd0);
	cr_expect_geq(b.desc.fd, 0);
	cr_expect_eq(b.desc.flags, 0);
	cr_expect_eq(agent_cuda_backend.id, MOECACHE_BACKEND_CUDA);
	cr_expect_null(agent_cuda_backend.slot(b.priv, 0));
	be_close(&b);
}

Test(cuda_backend, basic_copies_land,
     .description = "every copy completes once, with the expert's bytes in its slot",
     .init = fake_setup)
{
	struct agent_copy done[N_SLOTS];
	struct be b;

	be_open(&b, NULL);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_assert_eq(be_copy(&b, s, N_SLOTS - 1 - s, s % 2 ? MOECACHE_FILL_PREFETCH : 0),
			     0);
	cr_expect_eq(be_collect(&b, N_SLOTS, done), 0);
	for (uint32_t i = 0; i < N_SLOTS; i++) {
		uint32_t s = done[i].slot;

		cr_expect_eq(done[i].expert, N_SLOTS - 1 - s);
		cr_expect_eq(memcmp(slot_bytes(&b, s),
				    b.src + (uint64_t)done[i].expert * EXPERT_BYTES, EXPERT_BYTES),
			     0, "slot %u", s);
	}
	cr_expect_eq(agent_cuda_backend.inflight(b.priv), 0);
	be_close(&b);
}

Test(cuda_backend, basic_not_done_before_bytes,
     .description = "with a copy delay the slot is half-written and not yet complete",
     .init = fake_setup)
{
	const unsigned char *slot;
	struct agent_copy done;
	struct be b;

	be_open(&b, NULL);
	agent_cuda_backend.set_delay(b.priv, 300000);
	cr_assert_eq(be_copy(&b, 3, 5, 0), 0);
	sleep_ms(100);
	slot = slot_bytes(&b, 3);
	cr_expect_eq(agent_cuda_backend.completions(b.priv, &done, 1), 0);
	cr_expect_eq(agent_cuda_backend.inflight(b.priv), 1);
	cr_expect_eq(memcmp(slot, b.src + 5 * EXPERT_BYTES, EXPERT_BYTES / 2), 0);
	cr_expect_neq(memcmp(slot + EXPERT_BYTES / 2, b.src + 5 * EXPERT_BYTES + EXPERT_BYTES / 2,
			     EXPERT_BYTES / 2),
		      0, "the second half is not there yet");
	cr_expect_eq(be_collect(&b, 1, &done), 0);
	cr_expect_eq(memcmp(slot, b.src + 5 * EXPERT_BYTES, EXPERT_BYTES), 0);
	be_close(&b);
}

Test(cuda_backend, basic_async_failure,
     .description = "a copy that fails on the GPU completes with -EIO", .init = fake_setup)
{
	struct agent_copy done;
	struct be b;

	be_open(&b, NULL);
	setenv("FAKE_CUDA_ASYNC_FAIL", "1", 1);
	cr_assert_eq(be_copy(&b, 0, 0, 0), 0);
	cr_expect_eq(be_collect(&b, 1, &done), 1);
	cr_expect_eq(done.status, -EIO);
	be_close(&b);
}

Test(cuda_backend, bad_input_copy,
     .description = "copies before a bank, past the slots or without a source are -EINVAL",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct agent_copy c = {.slot = 0, .src = "x"};
	void *priv;
	struct be b;

	cr_assert_eq(agent_cuda_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_expect_eq(agent_cuda_backend.copy(priv, &c), -EINVAL);
	agent_cuda_backend.destroy(priv);
	be_open(&b, NULL);
	c.slot = N_SLOTS;
	cr_expect_eq(agent_cuda_backend.copy(b.priv, &c), -EINVAL);
	c.slot = 0;
	c.src = NULL;
	cr_expect_eq(agent_cuda_backend.copy(b.priv, &c), -EINVAL);
	be_close(&b);
}

Test(cuda_backend, basic_second_bank_refused,
     .description = "a second bank_create or adopt on one backend is -EALREADY", .init = fake_setup)
{
	struct moecache_bank desc;
	struct be b;

	be_open(&b, NULL);
	cr_expect_eq(agent_cuda_backend.bank_create(b.priv, &desc), -EALREADY);
	cr_expect_eq(agent_cuda_backend.bank_adopt(b.priv, &b.desc), -EALREADY);
	be_close(&b);
}

Test(cuda_backend, lifetime_adopt_keeps_residency,
     .description = "a new agent adopting the exported fd sees the bytes the old one copied",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct agent_copy done[2];
	struct moecache_bank desc;
	unsigned char *src;
	void *priv;
	struct be b;

	be_open(&b, NULL);
	cr_assert_eq(be_copy(&b, 1, 6, 0), 0);
	cr_assert_eq(be_copy(&b, 7, 2, 0), 0);
	cr_assert_eq(be_collect(&b, 2, done), 0);
	desc = b.desc;
	desc.fd = dup(b.desc.fd); /* what the driver keeps and BANK_GET hands back */
	src = b.src;
	b.src = NULL;
	be_close(&b);

	cr_assert_eq(agent_cuda_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_assert_eq(agent_cuda_backend.bank_adopt(priv, &desc), 0, "%s",
		     agent_gpu_backend_error(priv));
	cr_expect_eq(memcmp((void *)(uintptr_t)agent_gpu_backend_slot_addr(priv, 1),
			    src + 6 * EXPERT_BYTES, EXPERT_BYTES),
		     0);
	cr_expect_eq(memcmp((void *)(uintptr_t)agent_gpu_backend_slot_addr(priv, 7),
			    src + 2 * EXPERT_BYTES, EXPERT_BYTES),
		     0);
	agent_cuda_backend.destroy(priv);
	free(src);
}

Test(cuda_backend, bad_input_adopt_mismatch,
     .description = "adopting a bank of another kind, geometry or GPU is -EPROTO",
     .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	void *priv;
	struct be b;

	be_open(&b, NULL);
	cr_assert_eq(agent_cuda_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	desc = b.desc;
	desc.backend = MOECACHE_BACKEND_ROCM;
	cr_expect_eq(agent_cuda_backend.bank_adopt(priv, &desc), -EPROTO);
	desc = b.desc;
	desc.slot_stride = EXPERT_BYTES / 2;
	cr_expect_eq(agent_cuda_backend.bank_adopt(priv, &desc), -EPROTO);
	desc = b.desc;
	desc.bank_bytes = GRANULE; /* fewer slots than the pool */
	cr_expect_eq(agent_cuda_backend.bank_adopt(priv, &desc), -EPROTO);
	desc = b.desc;
	memset(desc.device_uuid, 0x77, sizeof(desc.device_uuid));
	cr_expect_eq(agent_cuda_backend.bank_adopt(priv, &desc), -EPROTO);
	cr_expect(strstr(agent_gpu_backend_error(priv), "not visible"), "%s",
		  agent_gpu_backend_error(priv));
	agent_cuda_backend.destroy(priv);
	be_close(&b);
}

Test(cuda_backend, basic_device_pinned_by_pool,
     .description = "POOL:N puts the pool's bank on GPU N", .init = fake_setup)
{
	struct mc_gpu_params p = {.devices = "q:0,p:2"};
	struct be b;

	setenv("FAKE_CUDA_DEVICES", "3", 1);
	be_open(&b, &p);
	cr_expect_eq(b.desc.device, 2);
	cr_expect_eq(b.desc.device_uuid[0], 0xd2);
	cr_expect_eq(agent_gpu_backend_device(b.priv), 2);
	be_close(&b);
}

Test(cuda_backend, basic_budget_too_small,
     .description = "a bank over the per-device budget is -ENOSPC", .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct mc_gpu_params p = {.device_budget = 4u << 20};
	struct moecache_bank desc;
	void *priv;

	cr_assert_eq(agent_cuda_backend_create(&cfg, &p, &priv, NULL, 0), 0);
	cr_expect_eq(agent_cuda_backend.bank_create(priv, &desc), -ENOSPC);
	cr_expect(strstr(agent_gpu_backend_error(priv), "budget"), "%s",
		  agent_gpu_backend_error(priv));
	agent_cuda_backend.destroy(priv);
}

Test(cuda_backend, basic_shared_budget_spreads_banks,
     .description = "pools sharing a budget go to the GPU with room, and give it back",
     .init = fake_setup)
{
	struct mc_gpu_budget budget;
	struct mc_gpu_params p = {.budget = &budget};
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	void *a, *b, *c;

	setenv("FAKE_CUDA_DEVICES", "2", 1);
	cr_assert_eq(mc_gpu_budget_init(&budget, 20u << 20), 0); /* a bank is 16 MiB */
	cr_assert_eq(agent_cuda_backend_create(&cfg, &p, &a, NULL, 0), 0);
	cr_assert_eq(agent_cuda_backend_create(&cfg, &p, &b, NULL, 0), 0);
	cr_assert_eq(agent_cuda_backend_create(&cfg, &p, &c, NULL, 0), 0);
	cr_assert_eq(agent_cuda_backend.bank_create(a, &desc), 0);
	cr_assert_eq(agent_cuda_backend.bank_create(b, &desc), 0);
	cr_expect_neq(agent_gpu_backend_device(a), agent_gpu_backend_device(b));
	cr_expect_eq(agent_cuda_backend.bank_create(c, &desc), -ENOSPC);
	agent_cuda_backend.destroy(a);
	cr_expect_eq(agent_cuda_backend.bank_create(c, &desc), 0);
	agent_cuda_backend.destroy(b);
	agent_cuda_backend.destroy(c);
	cr_expect_eq(mc_gpu_budget_room(&budget, 0), 20u << 20);
	cr_expect_eq(mc_gpu_budget_room(&budget, 1), 20u << 20);
	mc_gpu_budget_destroy(&budget);
}

Test(cuda_backend, leak_failed_bank_leaves_nothing,
     .description = "a bank creation that fails half way frees what it made", .init = fake_setup)
{
	struct agent_backend_config cfg = test_cfg();
	struct moecache_bank desc;
	struct fake_cuda_counts live;
	void *priv;

	setenv("FAKE_CUDA_FAIL", "cuMemExportToShareableHandle", 1);
	cr_assert_eq(agent_cuda_backend_create(&cfg, NULL, &priv, NULL, 0), 0);
	cr_expect_eq(agent_cuda_backend.bank_create(priv, &desc), -ENOMEM);
	live = fake_cuda_live();
	cr_expect_eq(live.allocations, 0);
	cr_expect_eq(live.mappings, 0);
	cr_expect_eq(live.reservations, 0);
	agent_cuda_backend.destroy(priv);
}

Test(cuda_backend, leak_destroy_frees_everything,
     .description = "destroy releases bank, mapping, registration, streams, events and context",
     .init = fake_setup)
{
	struct agent_copy done[4];
	struct fake_cuda_counts live;
	void *lib;
	struct be b;

	/* Keep the fake loaded after the backend unloads it, to read its counters. */
	lib = dlopen(fake_cuda_path(), RTLD_NOW);
	cr_assert_not_null(lib);
	be_open(&b, NULL);
	for (uint32_t s = 0; s < 4; s++)
		cr_assert_eq(be_copy(&b, s, s, 0), 0);
	cr_assert_eq(be_collect(&b, 4, done), 0);
	live = fake_cuda_live();
	cr_expect_eq(live.registrations, 1, "the host mapping is registered once");
	be_close(&b);
	live = fake_cuda_live();
	cr_expect_eq(live.allocations, 0);
	cr_expect_eq(live.mappings, 0);
	cr_expect_eq(live.reservations, 0);
	cr_expect_eq(live.registrations, 0);
	cr_expect_eq(live.streams, 0);
	cr_expect_eq(live.events, 0);
	cr_expect_eq(live.contexts, 0);
	dlclose(lib);
}

Test(cuda_backend, lifetime_destroy_with_copies_in_flight,
     .description = "destroy while copies are in flight waits for them and frees everything",
     .init = fake_setup)
{
	struct fake_cuda_counts live;
	void *lib;
	struct be b;

	lib = dlopen(fake_cuda_path(), RTLD_NOW);
	cr_assert_not_null(lib);
	setenv("FAKE_CUDA_COPY_US", "20000", 1);
	be_open(&b, NULL);
	for (uint32_t s = 0; s < N_SLOTS; s++)
		cr_assert_eq(be_copy(&b, s, s, 0), 0);
	cr_expect_gt(agent_cuda_backend.inflight(b.priv), 0);
	be_close(&b);
	live = fake_cuda_live();
	cr_expect_eq(live.streams, 0);
	cr_expect_eq(live.events, 0);
	cr_expect_eq(live.allocations, 0);
	dlclose(lib);
}

/* ---- the client import ---- */

/* What mc_bank_import sets up before calling the backend's import. */
static void client_map(struct moecache_bank_map *m, const struct moecache_bank *desc)
{
	memset(m, 0, sizeof(*m));
	m->backend = desc->backend;
	m->n_slots = N_SLOTS;
	m->fd = dup(desc->fd);
	m->bytes = desc->bank_bytes;
	m->slot_stride = desc->slot_stride;
	m->expert_bytes = EXPERT_BYTES;
	m->desc = *desc;
	m->desc.fd = m->fd;
}

static void client_unmap(struct moecache_bank_map *m)
{
	mc_cuda_bank_unimport(m);
	close(m->fd);
}

Test(cuda_import, basic_client_sees_agent_bytes,
     .description = "a client import maps the same bytes at its own address", .init = fake_setup)
{
	struct moecache_bank_map m;
	struct agent_copy done;
	struct be b;
	uint64_t addr;

	be_open(&b, NULL);
	cr_assert_eq(be_copy(&b, 4, 3, 0), 0);
	cr_assert_eq(be_collect(&b, 1, &done), 0);
	client_map(&m, &b.desc);
	cr_assert_eq(mc_cuda_bank_import(&m), 0, "%s", moecache_bank_import_error());
	addr = moecache_bank_slot_addr(&m, 4);
	cr_assert_neq(addr, 0);
	cr_expect_neq(addr, agent_gpu_backend_slot_addr(b.priv, 4));
	cr_expect_eq(memcmp((void *)(uintptr_t)addr, b.src + 3 * EXPERT_BYTES, EXPERT_BYTES), 0);
	cr_expect_eq(moecache_bank_slot_addr(&m, N_SLOTS), 0);
	client_unmap(&m);
	be_close(&b);
}

Test(cuda_import, bad_input_unknown_gpu,
     .description = "a bank on a GPU this process cannot see: -ENODEV and a message",
     .init = fake_setup)
{
	struct moecache_bank_map m;
	struct be b;

	be_open(&b, NULL);
	client_map(&m, &b.desc);
	memset(m.desc.device_uuid, 0x55, sizeof(m.desc.device_uuid));
	cr_expect_eq(mc_cuda_bank_import(&m), -ENODEV);
	cr_expect(strstr(moecache_bank_import_error(), "cannot see"), "%s",
		  moecache_bank_import_error());
	cr_expect_null(m.base);
	close(m.fd);
	be_close(&b);
}

Test(cuda_import, bad_input_no_driver,
     .description = "a client without the driver library: -ENOENT and why")
{
	struct moecache_bank_map m = {.backend = MOECACHE_BACKEND_CUDA,
				      .fd = -1,
				      .n_slots = 1,
				      .bytes = GRANULE,
				      .slot_stride = GRANULE};

	setenv(MC_CUDA_LIBRARY_ENV, "/nonexistent/libcuda.so.1", 1);
	cr_expect_eq(mc_cuda_bank_import(&m), -ENOENT);
	cr_expect(strstr(moecache_bank_import_error(), "NVIDIA driver"), "%s",
		  moecache_bank_import_error());
}

Test(cuda_import, basic_acquire_refused_while_capturing,
     .description = "an acquire on a capturing stream is -EBUSY with a message", .init = fake_setup)
{
	struct moecache_bank_map m;
	uint32_t experts[1] = {0}, slots[1];
	struct be b;

	be_open(&b, NULL);
	client_map(&m, &b.desc);
	cr_assert_eq(mc_cuda_bank_import(&m), 0, "%s", moecache_bank_import_error());
	setenv("FAKE_CUDA_CAPTURING", "1", 1);
	cr_expect_eq(moecache_bank_acquire(NULL, &m, NULL, 0, experts, 1, slots, 0, 0, NULL),
		     -EBUSY);
	cr_expect(strstr(moecache_bank_error(&m), "capturing a CUDA graph"), "%s",
		  moecache_bank_error(&m));
	cr_expect_eq(moecache_bank_release_after(NULL, &m, NULL, slots, 1), -EINVAL,
		     "no handle: refused before anything is queued");
	client_unmap(&m);
	be_close(&b);
}

Test(cuda_import, basic_release_waits_for_stream,
     .description = "pins are released only once the client's stream passes the marker",
     .init = fake_setup)
{
	struct moecache *mc = calloc(1, sizeof(*mc)); /* not attached: release says -ENOTCONN */
	struct moecache_bank_map m;
	struct mc_cuda_api cu;
	uint32_t slots[2] = {1, 2};
	char err[256];
	void *scratch = calloc(1, 4096);
	cu_stream stream;
	struct be b;

	be_open(&b, NULL);
	client_map(&m, &b.desc);
	cr_assert_eq(mc_cuda_bank_import(&m), 0, "%s", moecache_bank_import_error());
	cr_assert_eq(mc_cuda_api_load(&cu, NULL, err, sizeof(err)), 0);
	cr_assert_eq(cu.cuStreamCreate(&stream, 0), MC_CU_SUCCESS);
	/* The client's "kernel": slow work on its stream. */
	setenv("FAKE_CUDA_COPY_US", "300000", 1);
	cr_assert_eq(cu.cuMemcpyHtoDAsync((cu_deviceptr)(uintptr_t)scratch, b.src, 4096, stream),
		     MC_CU_SUCCESS);
	cr_assert_eq(moecache_bank_release_after(mc, &m, stream, slots, 2), 0, "%s",
		     moecache_bank_error(&m));
	cr_expect_eq(moecache_bank_release_pending(&m), 1);
	cr_expect_eq(moecache_bank_release_poll(&m), 0, "nothing released while the work runs");
	cr_expect_eq(moecache_bank_release_pending(&m), 1);
	cu.cuStreamSynchronize(stream);
	cr_expect_eq(moecache_bank_release_poll(&m), -ENOTCONN,
		     "the release reached the handle once the stream passed");
	cr_expect_eq(moecache_bank_release_pending(&m), 0);
	cu.cuStreamDestroy(stream);
	mc_cuda_api_unload(&cu);
	client_unmap(&m);
	be_close(&b);
	free(scratch);
	free(mc);
}

static int flag_done(void *arg)
{
	return *(int *)arg;
}

Test(cuda_import, basic_release_when_callback,
     .description = "release_when drops the pins once the caller's callback says done",
     .init = fake_setup)
{
	struct moecache *mc = calloc(1, sizeof(*mc));
	struct moecache_bank_map m;
	uint32_t slots[1] = {0};
	int done = 0;
	struct be b;

	be_open(&b, NULL);
	client_map(&m, &b.desc);
	cr_assert_eq(mc_cuda_bank_import(&m), 0, "%s", moecache_bank_import_error());
	cr_assert_eq(moecache_bank_release_when(mc, &m, flag_done, &done, slots, 1), 0);
	cr_expect_eq(moecache_bank_release_poll(&m), 0);
	done = 1;
	cr_expect_eq(moecache_bank_release_poll(&m), -ENOTCONN);
	cr_expect_eq(moecache_bank_release_pending(&m), 0);
	client_unmap(&m);
	be_close(&b);
	free(mc);
}

/* ---- the device check of tools/gpu-check, on the fake driver ---- */

Test(cuda_check, basic_device_check_runs,
     .description =
	 "moecache-cuda-check copy and import pass on the fake driver (the gpu-check plumbing)",
     .init = fake_setup, .timeout = 120)
{
	char prog[PATH_MAX], cmd[PATH_MAX + 64];

	beside_exe("../gpu/moecache-cuda-check", prog);
	snprintf(cmd, sizeof(cmd), "'%s' copy >/dev/null 2>&1", prog);
	cr_expect_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "'%s' import >/dev/null 2>&1", prog);
	cr_expect_eq(system(cmd), 0, "%s", cmd);
}
