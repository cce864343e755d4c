// SPDX-License-Identifier: MIT
/*
 * The order of copies every engine shares (agent/copy/copy_queue.h):
 * demand copies first, prefetches in chunks that a demand copy overtakes,
 * and cancel for a prefetch that turned wrong; then the CPU engine's use
 * of it through agent_backend_cancel.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "agent/copy/backend.h"
#include "agent/copy/copy_queue.h"

#define MIB (1ull << 20)

static struct agent_copy copy_of(uint32_t slot, bool prefetch)
{
	return (struct agent_copy){
	    .slot = slot, .expert = slot, .flags = prefetch ? MOECACHE_FILL_PREFETCH : 0};
}

/* 4 MiB experts in 1 MiB chunks, workers as given. */
static void sched_make(struct agent_copy_sched *s, uint32_t workers)
{
	cr_assert_eq(agent_copy_sched_init(s, workers, 4 * MIB, MIB), 0);
}

static void push(struct agent_copy_sched *s, uint32_t slot, bool prefetch)
{
	struct agent_copy c = copy_of(slot, prefetch);

	cr_assert_eq(agent_copy_sched_push(s, &c), 0);
}

Test(copy_sched, basic_demand_first_and_whole,
     .description = "a demand copy queued after a prefetch is taken first, as one piece")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;

	sched_make(&s, 1);
	push(&s, 1, true);
	push(&s, 2, false);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 2);
	cr_expect_eq(p.offset, 0);
	cr_expect_eq(p.len, 4 * MIB);
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_demand_overtakes_prefetch_between_chunks,
     .description = "a demand copy queued while a prefetch runs starts at the prefetch's next "
		    "chunk boundary; the prefetch then resumes where it stopped")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy done;

	sched_make(&s, 1);
	push(&s, 1, true);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 1);
	cr_expect_eq(p.len, MIB);
	push(&s, 2, false);
	cr_expect_not(agent_copy_sched_piece_done(&s, &p, 0, &done));
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 2, "the demand copy overtakes after one chunk");
	cr_assert(agent_copy_sched_piece_done(&s, &p, 0, &done));
	cr_expect_eq(done.slot, 2);
	cr_expect_eq(s.n_overtaken, 1);
	for (uint64_t off = MIB; off < 4 * MIB; off += MIB) {
		cr_assert(agent_copy_sched_next(&s, &p));
		cr_expect_eq(p.copy.slot, 1);
		cr_expect_eq(p.offset, off);
		cr_expect_eq(agent_copy_sched_piece_done(&s, &p, 0, &done), off + MIB == 4 * MIB);
	}
	cr_expect_eq(done.slot, 1);
	cr_expect_eq(done.status, 0);
	cr_expect(agent_copy_sched_idle(&s));
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_started_prefetch_resumes_before_a_new_one,
     .description = "a prefetch set aside between chunks is resumed before a queued one starts")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy done;

	sched_make(&s, 1);
	push(&s, 1, true);
	push(&s, 2, true);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_not(agent_copy_sched_piece_done(&s, &p, 0, &done));
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 1);
	cr_expect_eq(p.offset, MIB);
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_cancel_queued_prefetch,
     .description = "a queued prefetch is removed and handed back as -ECANCELED; the others "
		    "keep their order")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy out;

	sched_make(&s, 1);
	push(&s, 1, true);
	push(&s, 2, true);
	push(&s, 3, true);
	cr_assert_eq(agent_copy_sched_cancel(&s, 2, &out), 0);
	cr_expect_eq(out.slot, 2);
	cr_expect_eq(out.status, -ECANCELED);
	cr_expect_eq(s.prefetch.len, 2);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 1);
	cr_expect_eq(agent_copy_sched_cancel(&s, 2, &out), -ENOENT);
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_cancel_between_chunks,
     .description = "a started prefetch set aside between chunks is cancelled at once")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy out;

	sched_make(&s, 1);
	push(&s, 1, true);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_not(agent_copy_sched_piece_done(&s, &p, 0, &out));
	cr_assert_eq(agent_copy_sched_cancel(&s, 1, &out), 0);
	cr_expect_eq(out.status, -ECANCELED);
	cr_expect(agent_copy_sched_idle(&s));
	cr_expect_not(agent_copy_sched_next(&s, &p));
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_cancel_running_finishes_after_its_chunk,
     .description = "a prefetch whose chunk is being copied is -EINPROGRESS and finishes as "
		    "-ECANCELED when that chunk is done")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy out;

	sched_make(&s, 1);
	push(&s, 1, true);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(agent_copy_sched_cancel(&s, 1, &out), -EINPROGRESS);
	cr_assert(agent_copy_sched_piece_done(&s, &p, 0, &out));
	cr_expect_eq(out.slot, 1);
	cr_expect_eq(out.status, -ECANCELED);
	cr_expect(agent_copy_sched_idle(&s));
	agent_copy_sched_fini(&s);
}

Test(copy_sched, bad_input_demand_copy_is_never_cancelled,
     .description = "cancel finds no prefetch into a slot a demand copy fills: -ENOENT, and "
		    "the demand copy stays queued")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy out;

	sched_make(&s, 1);
	push(&s, 5, false);
	cr_expect_eq(agent_copy_sched_cancel(&s, 5, &out), -ENOENT);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_expect_eq(p.copy.slot, 5);
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_failed_chunk_ends_the_copy,
     .description = "a chunk that fails ends its prefetch with that status, chunks left unread")
{
	struct agent_copy_sched s;
	struct agent_copy_piece p;
	struct agent_copy out;

	sched_make(&s, 1);
	push(&s, 1, true);
	cr_assert(agent_copy_sched_next(&s, &p));
	cr_assert(agent_copy_sched_piece_done(&s, &p, -EIO, &out));
	cr_expect_eq(out.status, -EIO);
	cr_expect(agent_copy_sched_idle(&s));
	agent_copy_sched_fini(&s);
}

Test(copy_sched, basic_started_prefetches_bounded_by_workers,
     .description = "with two workers at most two prefetches are started at once; a third "
		    "waits in the queue")
{
	struct agent_copy_sched s;
	struct agent_copy_piece a, b, c;

	sched_make(&s, 2);
	push(&s, 1, true);
	push(&s, 2, true);
	push(&s, 3, true);
	cr_assert(agent_copy_sched_next(&s, &a));
	cr_assert(agent_copy_sched_next(&s, &b));
	cr_expect_not(agent_copy_sched_next(&s, &c));
	cr_expect_eq(s.prefetch.len, 1);
	agent_copy_sched_fini(&s);
}

Test(copy_sched, bad_input_init, .description = "no worker or no expert bytes is -EINVAL")
{
	struct agent_copy_sched s;

	cr_expect_eq(agent_copy_sched_init(&s, 0, MIB, 0), -EINVAL);
	cr_expect_eq(agent_copy_sched_init(&s, 1, 0, 0), -EINVAL);
}

/* ---- the CPU engine ---- */

#define CPU_EXPERT_BYTES 8192u

static void collect(struct agent_backend *be, struct agent_copy *out, uint32_t n)
{
	uint32_t got = 0;

	while (got < n) {
		struct pollfd pf = {.fd = agent_backend_completion_fd(be), .events = POLLIN};
		int r;

		cr_assert_eq(poll(&pf, 1, 10000), 1, "no completion within 10 s");
		r = agent_backend_completions(be, out + got, n - got);
		cr_assert_geq(r, 0);
		got += (uint32_t)r;
	}
}

Test(copy_sched, basic_cpu_engine_cancels_a_queued_prefetch,
     .description = "behind a slow demand copy, a queued prefetch cancelled through "
		    "agent_backend_cancel completes as -ECANCELED and leaves its slot unwritten")
{
	struct agent_backend_config cfg = {.pool = "test",
					   .n_slots = 2,
					   .expert_bytes = CPU_EXPERT_BYTES,
					   .copy_threads = 1,
					   .copy_delay_us = 500000};
	static unsigned char src[2][CPU_EXPERT_BYTES], zero[CPU_EXPERT_BYTES];
	struct agent_copy d = copy_of(0, false), pf = copy_of(1, true), done[2];
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
	cr_expect_eq(memcmp(agent_backend_slot(be, 1), zero, CPU_EXPERT_BYTES), 0);
	cr_expect_eq(memcmp(agent_backend_slot(be, 0), src[0], CPU_EXPERT_BYTES), 0);
	agent_backend_destroy(be);
}

Test(copy_sched, basic_cpu_engine_chunked_prefetch_lands_whole,
     .description = "a prefetch larger than a chunk, copied in pieces by the CPU engine, "
		    "lands byte for byte")
{
	struct agent_backend_config cfg = {.pool = "test",
					   .n_slots = 1,
					   .expert_bytes = 3 * AGENT_COPY_CHUNK_BYTES + 4096,
					   .copy_threads = 2};
	struct agent_copy pf = copy_of(0, true), done;
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
