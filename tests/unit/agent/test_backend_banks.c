// SPDX-License-Identifier: MIT
/* The CPU copy engine with several banks: a memfd each, peer copies between them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/copy/backend.h"

#define EXPERT_BYTES 4096u

static struct agent_backend *make_bank(uint32_t bank, uint32_t n_slots, uint64_t expert_bytes)
{
	struct agent_backend_config cfg = {
	    .pool = "banks",
	    .n_slots = n_slots,
	    .bank = bank,
	    .device = bank,
	    .expert_bytes = expert_bytes,
	    .copy_threads = 1,
	};
	struct agent_backend *be = NULL;

	cr_assert_eq(agent_backend_create("cpu", &cfg, &be), 0);
	return be;
}

static void collect_one(struct agent_backend *be, struct agent_copy *out)
{
	struct pollfd p = {.fd = agent_backend_completion_fd(be), .events = POLLIN};

	for (;;) {
		cr_assert_eq(poll(&p, 1, 10000), 1, "no completion within 10 s");
		if (agent_backend_completions(be, out, 1) == 1)
			return;
	}
}

Test(cpu_banks, basic_each_bank_its_own_memfd,
     .description = "three CPU banks of a pool are three distinct files")
{
	struct agent_backend *be[3];
	struct moecache_bank desc[3];
	struct stat st[3];

	for (uint32_t i = 0; i < 3; i++) {
		be[i] = make_bank(i, 2 + i, EXPERT_BYTES);
		cr_assert_eq(agent_backend_bank_create(be[i], &desc[i]), 0);
		cr_assert_eq(fstat(desc[i].fd, &st[i]), 0);
		cr_assert_geq(desc[i].bank_bytes, (2 + i) * desc[i].slot_stride);
	}
	cr_assert_neq(st[0].st_ino, st[1].st_ino);
	cr_assert_neq(st[1].st_ino, st[2].st_ino);
	cr_assert_neq(st[0].st_ino, st[2].st_ino);
	for (uint32_t i = 0; i < 3; i++)
		agent_backend_destroy(be[i]);
}

Test(cpu_banks, basic_peer_copy_moves_bytes,
     .description = "a peer copy puts the source bank's slot into the destination's")
{
	struct agent_backend *a = make_bank(0, 2, EXPERT_BYTES), *b = make_bank(1, 4, EXPERT_BYTES);
	static unsigned char src[EXPERT_BYTES];
	struct agent_copy c = {.slot = 1, .src = src}, done;
	struct moecache_bank da, db;

	for (uint32_t i = 0; i < EXPERT_BYTES; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	cr_assert_eq(agent_backend_bank_create(a, &da), 0);
	cr_assert_eq(agent_backend_bank_create(b, &db), 0);
	cr_assert_eq(agent_backend_copy(a, &c), 0);
	collect_one(a, &done);
	cr_assert(agent_backend_can_peer(b, a));
	c = (struct agent_copy){.slot = 3, .layer = 2, .expert = 5};
	cr_assert_eq(agent_backend_copy_peer(b, a, 1, &c), 0);
	collect_one(b, &done);
	cr_assert_eq(done.status, 0);
	cr_assert_eq(done.slot, 3);
	cr_assert_eq(done.expert, 5);
	cr_assert_eq(memcmp(agent_backend_slot(b, 3), src, EXPERT_BYTES), 0);
	agent_backend_destroy(a);
	agent_backend_destroy(b);
}

Test(cpu_banks, bad_input_peer_without_bank,
     .description = "no peer copy from or to a bank that is not allocated yet")
{
	struct agent_backend *a = make_bank(0, 2, EXPERT_BYTES), *b = make_bank(1, 2, EXPERT_BYTES);
	struct agent_copy c = {.slot = 0};
	struct moecache_bank da;

	cr_assert_eq(agent_backend_bank_create(a, &da), 0);
	cr_assert_not(agent_backend_can_peer(b, a));
	cr_assert_eq(agent_backend_copy_peer(b, a, 0, &c), -EOPNOTSUPP);
	agent_backend_destroy(a);
	agent_backend_destroy(b);
}

Test(cpu_banks, bad_input_peer_slot_out_of_range,
     .description = "a peer copy from a slot past the source bank is -EINVAL")
{
	struct agent_backend *a = make_bank(0, 2, EXPERT_BYTES), *b = make_bank(1, 2, EXPERT_BYTES);
	struct agent_copy c = {.slot = 0};
	struct moecache_bank da, db;

	cr_assert_eq(agent_backend_bank_create(a, &da), 0);
	cr_assert_eq(agent_backend_bank_create(b, &db), 0);
	cr_assert_eq(agent_backend_copy_peer(b, a, 2, &c), -EINVAL);
	c.slot = 2;
	cr_assert_eq(agent_backend_copy_peer(b, a, 0, &c), -EINVAL);
	cr_assert_eq(agent_backend_inflight(b), 0);
	agent_backend_destroy(a);
	agent_backend_destroy(b);
}

Test(cpu_banks, bad_input_peer_itself_or_other_geometry,
     .description = "no peer copy within one bank, nor between banks of different expert sizes")
{
	struct agent_backend *a = make_bank(0, 2, EXPERT_BYTES),
			     *b = make_bank(1, 2, 2 * EXPERT_BYTES);
	struct moecache_bank da, db;

	cr_assert_eq(agent_backend_bank_create(a, &da), 0);
	cr_assert_eq(agent_backend_bank_create(b, &db), 0);
	cr_assert_not(agent_backend_can_peer(a, a));
	cr_assert_not(agent_backend_can_peer(b, a));
	agent_backend_destroy(a);
	agent_backend_destroy(b);
}
