// SPDX-License-Identifier: MIT
/*
 * The order of copies every engine shares (agent/copy/copy_queue.h):
 * demand copies first, prefetches in chunks that a demand copy overtakes,
 * and cancel for a prefetch that turned wrong (the CPU engine's use of it:
 * test_backend.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

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
