#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ref/moe_ref.h"

#define N_LAYERS 4
#define BEGIN 16
#define END 48
#define N_LOCAL (END - BEGIN)
#define CANARY 0xa5a5a5a5u

/* A map in which local expert e of layer l is resident in slot l * 100 + e when e is even. */
static void fill_map(uint32_t *map)
{
	for (uint32_t l = 0; l < N_LAYERS; l++)
		for (uint32_t e = 0; e < N_LOCAL; e++)
			map[l * N_LOCAL + e] = e % 2 ? MOECACHE_NONE : l * 100 + e;
}

static struct moe_miss_ring *new_ring(uint32_t capacity)
{
	/* one spare entry after the ring, filled with a canary */
	const size_t bytes = moe_miss_ring_bytes(capacity) + sizeof(struct moe_miss_entry);
	struct moe_miss_ring *ring = malloc(bytes);

	cr_assert_not_null(ring);
	memset(ring, 0xa5, bytes);
	cr_assert_eq(moe_miss_ring_init(ring, bytes, capacity), 0);
	return ring;
}

static void assert_canary(struct moe_miss_ring *ring)
{
	const struct moe_miss_entry *spare = &moe_miss_ring_entries(ring)[ring->capacity];

	cr_assert_eq(spare->seq, CANARY);
	cr_assert_eq(spare->layer, CANARY);
	cr_assert_eq(spare->expert, CANARY);
}

static struct moe_remap_args args_for(const uint32_t *map, const uint32_t *experts, uint32_t *slots,
				      struct moe_miss_ring *ring, uint32_t layer, uint32_t n_tokens,
				      uint32_t top_k)
{
	struct moe_remap_args a = {
	    .map = (uintptr_t)map,
	    .experts = (uintptr_t)experts,
	    .slots = (uintptr_t)slots,
	    .ring = (uintptr_t)ring,
	    .n_layers = N_LAYERS,
	    .expert_begin = BEGIN,
	    .expert_end = END,
	    .layer = layer,
	    .n_tokens = n_tokens,
	    .top_k = top_k,
	};

	return a;
}

Test(
    remap, basic_hits_get_their_slots,
    .description =
	"resident experts get the slot the map holds for their layer, and nothing goes to the ring")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[6];
	const uint32_t experts[6] = {BEGIN, BEGIN + 2, BEGIN + 30, BEGIN + 4, BEGIN, BEGIN + 8};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 2, 2, 3);

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(slots[i], 2 * 100 + experts[i] - BEGIN, "entry %d", i);
	cr_assert_eq(ring->head, 0);
	cr_assert_eq(ring->overflow, 0);
	cr_assert_eq(ring->out_of_range, 0);
	free(ring);
}

Test(remap, basic_misses_reported_in_order,
     .description = "missing experts get MOECACHE_NONE and are appended to the ring with their "
		    "layer, first seen first")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[4];
	const uint32_t experts[4] = {BEGIN + 3, BEGIN + 2, BEGIN + 7, BEGIN + 1};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 1, 2, 2);
	struct moe_miss_entry e;

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(slots[0], MOECACHE_NONE);
	cr_assert_eq(slots[1], 100 + 2);
	cr_assert_eq(slots[2], MOECACHE_NONE);
	cr_assert_eq(slots[3], MOECACHE_NONE);
	for (int i = 0; i < 4; i++) {
		if (i == 1)
			continue;
		cr_assert_eq(moe_miss_ring_pop(ring, &e), 0);
		cr_assert_eq(e.layer, 1);
		cr_assert_eq(e.expert, experts[i]);
	}
	cr_assert_eq(moe_miss_ring_pop(ring, &e), -EAGAIN);
	free(ring);
}

Test(remap, basic_misses_deduplicated_within_call,
     .description = "an expert missed by several tokens of one call is reported once")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[8];
	const uint32_t experts[8] = {BEGIN + 5, BEGIN + 9, BEGIN + 5, BEGIN + 9,
				     BEGIN + 5, BEGIN + 0, BEGIN + 9, BEGIN + 5};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 0, 4, 2);

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(ring->head, 2);
	cr_assert_eq(ring->overflow, 0);
	free(ring);
}

Test(remap, basic_misses_not_deduplicated_across_calls,
     .description = "a second call reports the same miss again: the agent deduplicates requests")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[1];
	const uint32_t experts[1] = {BEGIN + 5};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 0, 1, 1);

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(ring->head, 2);
	free(ring);
}

Test(remap, basic_overflow_counted_never_written,
     .description = "misses beyond the free entries are counted in overflow and nothing is written "
		    "past the capacity")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[6];
	const uint32_t experts[6] = {BEGIN + 1, BEGIN + 3, BEGIN + 5,
				     BEGIN + 7, BEGIN + 9, BEGIN + 11};
	struct moe_miss_ring *ring = new_ring(4);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 3, 6, 1);
	struct moe_miss_entry e;

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(ring->head, 4);
	cr_assert_eq(ring->overflow, 2);
	assert_canary(ring);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(slots[i], MOECACHE_NONE);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(moe_miss_ring_pop(ring, &e), 0);
		cr_assert_eq(e.expert, experts[i]);
	}
	cr_assert_eq(moe_miss_ring_pop(ring, &e), -EAGAIN);
	free(ring);
}

Test(remap, basic_ring_wraps_around,
     .description =
	 "once entries are consumed the ring takes new ones, its indices wrapping over the entries")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[3];
	struct moe_miss_ring *ring = new_ring(4);
	struct moe_miss_entry e;
	uint32_t next = 0;

	fill_map(map);
	for (uint32_t round = 0; round < 10; round++) {
		const uint32_t experts[3] = {BEGIN + 2 * (round % 16) + 1,
					     BEGIN + 2 * ((round + 5) % 16) + 1,
					     BEGIN + 2 * ((round + 9) % 16) + 1};
		struct moe_remap_args a =
		    args_for(map, experts, slots, ring, round % N_LAYERS, 3, 1);

		cr_assert_eq(moe_ref_remap(&a), 0);
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(moe_miss_ring_pop(ring, &e), 0);
			cr_assert_eq(e.expert, experts[i]);
			cr_assert_eq(e.layer, round % N_LAYERS);
			cr_assert_eq(e.seq, ++next);
		}
	}
	cr_assert_eq(ring->overflow, 0);
	assert_canary(ring);
	free(ring);
}

Test(
    remap, bad_input_out_of_range_ids,
    .description =
	"ids outside [expert_begin, expert_end) get MOECACHE_NONE, are counted, and are not misses")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[5];
	const uint32_t experts[5] = {BEGIN - 1, END, 0, UINT32_MAX, BEGIN + 1};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args a = args_for(map, experts, slots, ring, 0, 5, 1);
	struct moe_miss_entry e;

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(slots[i], MOECACHE_NONE);
	cr_assert_eq(ring->out_of_range, 4);
	cr_assert_eq(moe_miss_ring_pop(ring, &e), 0);
	cr_assert_eq(e.expert, BEGIN + 1);
	cr_assert_eq(moe_miss_ring_pop(ring, &e), -EAGAIN);
	free(ring);
}

Test(remap, bad_input_bad_args_change_nothing,
     .description = "a layer out of range, an inverted expert range, top_k 0 or a NULL array gives "
		    "-EINVAL before any write")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[2] = {CANARY, CANARY};
	const uint32_t experts[2] = {BEGIN + 1, BEGIN + 2};
	struct moe_miss_ring *ring = new_ring(8);
	struct moe_remap_args bad[5];

	fill_map(map);
	for (int b = 0; b < 5; b++)
		bad[b] = args_for(map, experts, slots, ring, 0, 2, 1);
	bad[0].layer = N_LAYERS;
	bad[1].expert_begin = END + 1;
	bad[2].top_k = 0;
	bad[3].map = 0;
	bad[4].slots = 0;
	for (int b = 0; b < 5; b++) {
		cr_assert_eq(moe_ref_remap(&bad[b]), -EINVAL, "case %d", b);
		cr_assert_eq(moe_remap_args_check(&bad[b]), -EINVAL);
		cr_assert_eq(slots[0], CANARY);
		cr_assert_eq(ring->head, 0);
		cr_assert_eq(ring->out_of_range, 0);
	}
	free(ring);
}

Test(remap, basic_no_ring_writes_slots_only,
     .description = "without a ring the slots are still written")
{
	uint32_t map[N_LAYERS * N_LOCAL], slots[2];
	const uint32_t experts[2] = {BEGIN + 1, BEGIN + 2};
	struct moe_remap_args a = args_for(map, experts, slots, NULL, 0, 2, 1);

	fill_map(map);
	cr_assert_eq(moe_ref_remap(&a), 0);
	cr_assert_eq(slots[0], MOECACHE_NONE);
	cr_assert_eq(slots[1], 2);
}

Test(ring, bad_input_init_rejects_bad_capacity,
     .description = "a capacity of 0 or not a power of two is -EINVAL, a short buffer -ENOSPC")
{
	unsigned char buf[1024];
	struct moe_miss_ring *ring = (struct moe_miss_ring *)buf;

	cr_assert_eq(moe_miss_ring_init(ring, sizeof(buf), 0), -EINVAL);
	cr_assert_eq(moe_miss_ring_init(ring, sizeof(buf), 6), -EINVAL);
	cr_assert_eq(moe_miss_ring_init(ring, moe_miss_ring_bytes(8) - 1, 8), -ENOSPC);
	cr_assert_eq(moe_miss_ring_init(ring, moe_miss_ring_bytes(8), 8), 0);
}

Test(ring, basic_pop_waits_for_unwritten_entry,
     .description = "an entry reserved but not yet stamped by its producer is not consumed")
{
	struct moe_miss_ring *ring = new_ring(4);
	struct moe_miss_entry *entries = moe_miss_ring_entries(ring);
	struct moe_miss_entry e;

	/* a producer reserved index 0 (head moved) and is still writing it */
	ring->head = 1;
	entries[0].layer = 2;
	entries[0].expert = 30;
	cr_assert_eq(moe_miss_ring_pop(ring, &e), -EAGAIN);
	cr_assert_eq(ring->tail, 0);
	entries[0].seq = 1;
	cr_assert_eq(moe_miss_ring_pop(ring, &e), 0);
	cr_assert_eq(e.expert, 30);
	cr_assert_eq(ring->tail, 1);
	free(ring);
}

Test(
    ring, basic_stale_entry_from_last_lap_not_consumed,
    .description = "an entry still holding the previous lap's seq is not taken for the current one")
{
	struct moe_miss_ring *ring = new_ring(2);
	struct moe_miss_entry *entries = moe_miss_ring_entries(ring);
	struct moe_miss_entry e;

	/* indices 0 and 1 were consumed; index 2 (entry 0) is reserved but unwritten */
	ring->tail = 2;
	ring->head = 3;
	entries[0].seq = 1;
	cr_assert_eq(moe_miss_ring_pop(ring, &e), -EAGAIN);
	free(ring);
}

struct producer {
	struct moe_miss_ring *ring;
	const uint32_t *map;
	uint32_t layer;
	uint32_t calls;
};

/* Each call misses the 16 odd local experts, in a different order each time. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	uint32_t experts[16], slots[16];

	for (uint32_t c = 0; c < p->calls; c++) {
		struct moe_remap_args a =
		    args_for(p->map, experts, slots, p->ring, p->layer, 16, 1);

		for (uint32_t i = 0; i < 16; i++)
			experts[i] = BEGIN + 2 * ((i + c) % 16) + 1;
		if (moe_ref_remap(&a))
			return (void *)1;
	}
	return NULL;
}

Test(ring, concurrency_producers_and_consumer,
     .description = "misses from concurrent remap calls are each popped once or counted as "
		    "overflow, with nothing written past the capacity")
{
	enum { PRODUCERS = 4, CALLS = 2000 };
	uint32_t map[N_LAYERS * N_LOCAL];
	struct moe_miss_ring *ring = new_ring(64);
	struct producer p[PRODUCERS];
	pthread_t th[PRODUCERS];
	uint64_t popped = 0, per_layer[N_LAYERS] = {0};
	bool joined[PRODUCERS] = {false};
	int running = PRODUCERS;
	struct moe_miss_entry e;

	fill_map(map);
	for (int i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ring, map, (uint32_t)i, CALLS};
		cr_assert_eq(pthread_create(&th[i], NULL, produce, &p[i]), 0);
	}
	while (running) {
		while (moe_miss_ring_pop(ring, &e) == 0) {
			cr_assert_lt(e.layer, N_LAYERS);
			cr_assert(e.expert >= BEGIN && e.expert < END && (e.expert - BEGIN) % 2);
			cr_assert_eq(e.seq, (uint32_t)popped + 1);
			per_layer[e.layer]++;
			popped++;
		}
		running = 0;
		for (int i = 0; i < PRODUCERS; i++) {
			void *ret;

			if (joined[i])
				continue;
			if (pthread_tryjoin_np(th[i], &ret) == 0) {
				joined[i] = true;
				cr_assert_null(ret, "producer %d failed", i);
			} else {
				running++;
			}
		}
	}
	while (moe_miss_ring_pop(ring, &e) == 0)
		popped++;
	cr_assert_eq(popped + ring->overflow, (uint64_t)PRODUCERS * CALLS * 16);
	cr_assert_eq(ring->head, ring->tail);
	for (int i = 0; i < PRODUCERS; i++)
		cr_assert_leq(per_layer[i], (uint64_t)CALLS * 16);
	assert_canary(ring);
	free(ring);
}
