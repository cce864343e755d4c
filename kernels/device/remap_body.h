/*
 * moe_remap, written once against the device primitives of
 * kernels/cuda/moe_cuda.cuh and kernels/hip/moe_hip.h. One block of
 * MOE_REMAP_THREADS threads handles the whole call, so the misses of the
 * call are deduplicated in shared memory and reserved in the ring with a
 * single compare-and-swap on its head (the ring is in host memory: every
 * access crosses the bus).
 */
#ifndef MOE_DEVICE_REMAP_BODY_H
#define MOE_DEVICE_REMAP_BODY_H

struct moe_remap_shared {
	uint32_t seen[MOE_REMAP_DEDUP_MAX / 32];
	uint32_t list[MOE_REMAP_LIST_MAX];
	uint32_t n_list; /* distinct misses, may exceed MOE_REMAP_LIST_MAX */
	uint32_t n_out;	 /* ids outside the local range */
	uint32_t base;
	uint32_t take;
};

/* The reservation of the reference (kernels/ref/moe_ref.c), on the device. */
MOE_DEV uint32_t moe_dev_ring_reserve(struct moe_miss_ring *ring, uint32_t want, uint32_t *base)
{
	const uint32_t capacity = moe_dev_load_volatile(&ring->capacity);
	uint32_t head = moe_dev_load_volatile(&ring->head);

	if (!capacity || (capacity & (capacity - 1)))
		return 0;
	for (;;) {
		const uint32_t used = head - moe_dev_load_volatile(&ring->tail);
		const uint32_t room = used >= capacity ? 0 : capacity - used;
		const uint32_t take = want < room ? want : room;
		uint32_t old;

		if (!take)
			return 0;
		old = moe_dev_system_cas(&ring->head, head, head + take);
		if (old == head) {
			*base = head;
			return take;
		}
		head = old;
	}
}

MOE_DEV void moe_dev_remap(const struct moe_remap_args &a, struct moe_remap_shared &sh)
{
	const uint32_t *map = (const uint32_t *)(uintptr_t)a.map;
	const uint32_t *experts = (const uint32_t *)(uintptr_t)a.experts;
	uint32_t *slots = (uint32_t *)(uintptr_t)a.slots;
	struct moe_miss_ring *ring = (struct moe_miss_ring *)(uintptr_t)a.ring;
	const uint32_t tid = moe_dev_thread();
	/* a launcher checks the block; this only keeps a bad one in bounds */
	const bool valid = a.layer < a.n_layers && a.expert_begin <= a.expert_end;
	const uint32_t n_local = valid ? a.expert_end - a.expert_begin : 0;
	const uint64_t n = (uint64_t)a.n_tokens * a.top_k;

	if (moe_dev_block_threads() != MOE_REMAP_THREADS)
		return;
	for (uint32_t i = tid; i < MOE_REMAP_DEDUP_MAX / 32; i += MOE_REMAP_THREADS)
		sh.seen[i] = 0;
	if (tid == 0) {
		sh.n_list = 0;
		sh.n_out = 0;
	}
	moe_dev_sync();

	for (uint64_t i = tid; i < n; i += MOE_REMAP_THREADS) {
		const uint32_t e = experts[i];
		uint32_t local, slot, pos;

		if (!valid || e < a.expert_begin || e >= a.expert_end) {
			slots[i] = MOECACHE_NONE;
			moe_dev_shared_add(&sh.n_out, 1);
			continue;
		}
		local = e - a.expert_begin;
		slot = map[(uint64_t)a.layer * n_local + local];
		slots[i] = slot;
		if (slot != MOECACHE_NONE || !ring)
			continue;
		if (local < MOE_REMAP_DEDUP_MAX) {
			const uint32_t bit = 1u << (local % 32);

			if (moe_dev_shared_or(&sh.seen[local / 32], bit) & bit)
				continue;
		}
		pos = moe_dev_shared_add(&sh.n_list, 1);
		if (pos < MOE_REMAP_LIST_MAX)
			sh.list[pos] = e;
	}
	moe_dev_sync();
	if (!ring)
		return;

	if (tid == 0) {
		const uint32_t want =
		    sh.n_list < MOE_REMAP_LIST_MAX ? sh.n_list : MOE_REMAP_LIST_MAX;
		uint32_t base = 0;
		const uint32_t take = want ? moe_dev_ring_reserve(ring, want, &base) : 0;

		/* the tail was read before any entry below is overwritten */
		moe_dev_fence_system();
		if (sh.n_list > take)
			moe_dev_system_add(&ring->overflow, sh.n_list - take);
		if (sh.n_out)
			moe_dev_system_add(&ring->out_of_range, sh.n_out);
		sh.base = base;
		sh.take = take;
	}
	moe_dev_sync();

	for (uint32_t i = tid; i < sh.take; i += MOE_REMAP_THREADS) {
		const uint32_t idx = sh.base + i;
		struct moe_miss_entry *e = &moe_miss_ring_entries(
		    ring)[idx & (moe_dev_load_volatile(&ring->capacity) - 1)];

		e->layer = a.layer;
		e->expert = sh.list[i];
		e->pad = 0;
		/* the entry is complete in host memory before its seq says so */
		moe_dev_fence_system();
		moe_dev_store_volatile(&e->seq, idx + 1);
	}
}

#endif /* MOE_DEVICE_REMAP_BODY_H */
