// SPDX-License-Identifier: MIT
/* The CPU copy engine: its memfd bank and its pool of memcpy threads. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/copy/backend.h"
#include "agent/copy/copy_queue.h"

#define EXPERT_BYTES 8192u

static struct agent_backend *make_backend(uint32_t n_slots, uint32_t threads, uint32_t delay_us)
{
	struct agent_backend_config cfg = {
	    .pool = "test",
	    .n_slots = n_slots,
	    .expert_bytes = EXPERT_BYTES,
	    .copy_threads = threads,
	    .copy_delay_us = delay_us,
	};
	struct agent_backend *be = NULL;

	cr_assert_eq(agent_backend_create("cpu", &cfg, &be), 0);
	return be;
}

/* Collects n completions, waiting on the completion fd. */
static void collect(struct agent_backend *be, struct agent_copy *out, uint32_t n)
{
	uint32_t got = 0;

	while (got < n) {
		struct pollfd p = {.fd = agent_backend_completion_fd(be), .events = POLLIN};
		int r;

		cr_assert_eq(poll(&p, 1, 10000), 1, "no completion within 10 s");
		r = agent_backend_completions(be, out + got, n - got);
		cr_assert_geq(r, 0);
		got += (uint32_t)r;
	}
}

Test(cpu_backend, basic_copies_complete,
     .description = "copies land in their slots and complete with status 0")
{
	struct agent_backend *be = make_backend(4, 2, 0);
	static unsigned char src[4][EXPERT_BYTES];
	struct agent_copy done[4];
	struct moecache_bank desc;

	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	cr_assert_geq(desc.fd, 0);
	cr_assert_eq(desc.backend, MOECACHE_BACKEND_CPU);
	cr_assert_geq(desc.slot_stride, EXPERT_BYTES);
	cr_assert_geq(desc.bank_bytes, 4 * desc.slot_stride);
	for (uint32_t i = 0; i < 4; i++) {
		struct agent_copy c = {.slot = 3 - i, .layer = 0, .expert = i, .src = src[i]};

		memset(src[i], (int)i + 1, EXPERT_BYTES);
		cr_assert_eq(agent_backend_copy(be, &c), 0);
	}
	collect(be, done, 4);
	cr_assert_eq(agent_backend_inflight(be), 0);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(done[i].status, 0);
		cr_assert_eq(
		    memcmp(agent_backend_slot(be, done[i].slot), src[done[i].expert], EXPERT_BYTES),
		    0);
	}
	agent_backend_destroy(be);
}

Test(cpu_backend, basic_inflight_until_collected,
     .description = "a copy counts as in flight until its completion is collected")
{
	struct agent_backend *be = make_backend(1, 1, 20000);
	static unsigned char src[EXPERT_BYTES];
	struct agent_copy c = {.slot = 0, .src = src}, done;
	struct moecache_bank desc;

	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	cr_assert_eq(agent_backend_copy(be, &c), 0);
	cr_assert_eq(agent_backend_inflight(be), 1);
	collect(be, &done, 1);
	cr_assert_eq(agent_backend_inflight(be), 0);
	agent_backend_destroy(be);
}

Test(cpu_backend, basic_bank_sealed_against_resize,
     .description = "the bank memfd cannot be shrunk or grown by anyone holding it")
{
	struct agent_backend *be = make_backend(2, 1, 0);
	struct moecache_bank desc;

	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	cr_assert_eq(ftruncate(desc.fd, 0), -1);
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(ftruncate(desc.fd, (off_t)desc.bank_bytes * 2), -1);
	agent_backend_destroy(be);
}

Test(cpu_backend, basic_adopt_maps_existing_bank,
     .description = "a restarted agent adopts the bank file and sees its slots")
{
	struct agent_backend *a = make_backend(2, 1, 0), *b = make_backend(2, 1, 0);
	static unsigned char src[EXPERT_BYTES];
	struct agent_copy c = {.slot = 1, .src = src}, done;
	struct moecache_bank desc, again;

	cr_assert_eq(agent_backend_bank_create(a, &desc), 0);
	memset(src, 0x5a, sizeof(src));
	cr_assert_eq(agent_backend_copy(a, &c), 0);
	collect(a, &done, 1);
	again = desc;
	again.fd = fcntl(desc.fd, F_DUPFD_CLOEXEC, 0); /* what BANK_GET hands out */
	cr_assert_eq(agent_backend_bank_adopt(b, &again), 0);
	cr_assert_eq(memcmp(agent_backend_slot(b, 1), src, EXPERT_BYTES), 0);
	agent_backend_destroy(a);
	agent_backend_destroy(b);
}

Test(cpu_backend, bad_input_adopt_wrong_bank,
     .description = "a bank of another kind or too small is EPROTO")
{
	struct agent_backend *be = make_backend(4, 1, 0);
	struct moecache_bank desc = {.fd = -1,
				     .backend = MOECACHE_BACKEND_CUDA,
				     .bank_bytes = 4 * EXPERT_BYTES,
				     .slot_stride = EXPERT_BYTES};

	cr_assert_eq(agent_backend_bank_adopt(be, &desc), -EPROTO);
	desc.backend = MOECACHE_BACKEND_CPU;
	desc.bank_bytes = 3 * EXPERT_BYTES;
	cr_assert_eq(agent_backend_bank_adopt(be, &desc), -EPROTO);
	desc.bank_bytes = 4 * EXPERT_BYTES;
	desc.slot_stride = EXPERT_BYTES / 2;
	cr_assert_eq(agent_backend_bank_adopt(be, &desc), -EPROTO);
	agent_backend_destroy(be);
}

Test(cpu_backend, bad_input_gpu_backends_without_driver,
     .description = "cuda and rocm fail cleanly (ENOENT) when their driver library is absent")
{
	struct agent_backend_config cfg = {.n_slots = 1, .expert_bytes = 4096, .copy_threads = 1};
	struct agent_backend *be = NULL;

	setenv("MOECACHE_LIBCUDA", "moecached-test-no-such-libcuda.so", 1);
	setenv("MOECACHE_LIBHSAKMT", "moecached-test-no-such-libhsakmt.so", 1);
	cr_assert_eq(agent_backend_create("cuda", &cfg, &be), -ENOENT);
	cr_assert_eq(agent_backend_create("rocm", &cfg, &be), -ENOENT);
	cr_assert_eq(agent_backend_create("opencl", &cfg, &be), -EOPNOTSUPP);
	cfg.copy_threads = 0;
	cr_assert_eq(agent_backend_create("cpu", &cfg, &be), -EINVAL);
	cr_assert_null(be);
}

Test(cpu_backend, bad_input_copy_out_of_bank,
     .description = "a copy to a slot past the bank is EINVAL")
{
	struct agent_backend *be = make_backend(2, 1, 0);
	static unsigned char src[EXPERT_BYTES];
	struct agent_copy c = {.slot = 2, .src = src};
	struct moecache_bank desc;

	cr_assert_eq(agent_backend_copy(be, &c), -EINVAL, "no bank yet");
	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	cr_assert_eq(agent_backend_copy(be, &c), -EINVAL);
	cr_assert_eq(agent_backend_inflight(be), 0);
	agent_backend_destroy(be);
}

Test(copy_engine, basic_one_signal_per_empty_to_waiting,
     .description = "copies finishing while others wait cost no eventfd write; all are collected")
{
	struct agent_copy_engine e;
	struct agent_copy c = {.slot = 1}, out[4];
	uint64_t count = 0;

	cr_assert_eq(agent_copy_engine_init(&e, 0), 0);
	cr_assert_eq(agent_copy_queue_reserve(&e.done, 3), 0);
	e.inflight = 3;
	for (int i = 0; i < 3; i++)
		if (agent_copy_engine_done(&e, &c))
			agent_copy_engine_signal(&e);
	cr_assert_eq(read(e.done_fd, &count, sizeof(count)), (ssize_t)sizeof(count));
	cr_assert_eq(count, 1, "the eventfd counted %llu signals", (unsigned long long)count);
	/* The collector read the eventfd already: it still takes all three. */
	cr_assert_eq(agent_copy_engine_completions(&e, out, 4), 3);
	cr_assert_eq(agent_copy_engine_inflight(&e), 0);
	agent_copy_engine_fini(&e);
}

/* Prefetches in chunks and cancel (the shared order of copies: test_copy_sched.c). */

Test(cpu_backend, basic_cancel_queued_prefetch,
     .description = "behind a slow demand copy, a queued prefetch cancelled through "
		    "agent_backend_cancel completes as -ECANCELED and leaves its slot unwritten")
{
	struct agent_backend_config cfg = {.pool = "test",
					   .n_slots = 2,
					   .expert_bytes = EXPERT_BYTES,
					   .copy_threads = 1,
					   .copy_delay_us = 500000};
	static unsigned char src[2][EXPERT_BYTES], zero[EXPERT_BYTES];
	struct agent_copy d = {.slot = 0}, pf = {.slot = 1, .flags = MOECACHE_FILL_PREFETCH},
			  done[2];
	struct agent_backend *be = NULL;
	struct moecache_bank desc;

	cr_assert_eq(agent_backend_create("cpu", &cfg, &be), 0);
	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	memset(src[0], 1, sizeof(src[0]));
	memset(src[1], 2, sizeof(src[1]));
	d.src = src[0];
	pf.src = src[1];
	cr_assert_eq(agent_backend_copy(be, &d), 0);
	cr_assert_eq(agent_backend_copy(be, &pf), 0);
	cr_expect_eq(agent_backend_cancel(be, 1), 0);
	cr_expect_eq(agent_backend_cancel(be, 0), -ENOENT, "a demand copy is never cancelled");
	collect(be, done, 2);
	cr_expect_eq(agent_backend_inflight(be), 0);
	for (int i = 0; i < 2; i++)
		cr_expect_eq(done[i].status, done[i].slot == 1 ? -ECANCELED : 0);
	cr_expect_eq(memcmp(agent_backend_slot(be, 1), zero, EXPERT_BYTES), 0);
	cr_expect_eq(memcmp(agent_backend_slot(be, 0), src[0], EXPERT_BYTES), 0);
	agent_backend_destroy(be);
}

Test(cpu_backend, basic_chunked_prefetch_lands_whole,
     .description = "a prefetch larger than a chunk, copied in pieces by the CPU engine, "
		    "lands byte for byte")
{
	struct agent_backend_config cfg = {.pool = "test",
					   .n_slots = 1,
					   .expert_bytes = 3 * AGENT_COPY_CHUNK_BYTES + 4096,
					   .copy_threads = 2};
	struct agent_copy pf = {.slot = 0, .flags = MOECACHE_FILL_PREFETCH}, done;
	struct agent_backend *be = NULL;
	struct moecache_bank desc;
	unsigned char *src = malloc(cfg.expert_bytes);

	cr_assert_not_null(src);
	for (uint64_t i = 0; i < cfg.expert_bytes; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	cr_assert_eq(agent_backend_create("cpu", &cfg, &be), 0);
	cr_assert_eq(agent_backend_bank_create(be, &desc), 0);
	pf.src = src;
	cr_assert_eq(agent_backend_copy(be, &pf), 0);
	collect(be, &done, 1);
	cr_expect_eq(done.status, 0);
	cr_expect_eq(memcmp(agent_backend_slot(be, 0), src, cfg.expert_bytes), 0);
	agent_backend_destroy(be);
	free(src);
}
