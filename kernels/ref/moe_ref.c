#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "moe_numerics.h"
#include "ref/moe_ref.h"

/* The argument blocks are read by device code: their layout must not drift. */
_Static_assert(sizeof(struct moe_remap_args) == 56, "moe_remap_args layout");
_Static_assert(sizeof(struct moe_ffn_args) == 80, "moe_ffn_args layout");
_Static_assert(sizeof(struct moe_miss_ring) == 32, "moe_miss_ring layout");
_Static_assert(sizeof(struct moe_miss_entry) == 16, "moe_miss_entry layout");
_Static_assert(MOE_DOT_LANES == 32, "the lane reduction is written for 32 lanes");

#define MOE_GEN_GAMMA 0x9e3779b97f4a7c15ull

uint16_t moe_f32_to_bf16(float f)
{
	return moe_f32_to_bf16_bits(f);
}

float moe_bf16_to_f32(uint16_t b)
{
	return moe_bf16_bits_to_f32(b);
}

int moe_ffn_shape_check(const struct moe_ffn_shape *shape)
{
	if (!moe_dtype_bytes(shape->dtype))
		return -EINVAL;
	if (!shape->d_model || !shape->d_ff || shape->d_model % MOE_DIM_MULTIPLE ||
	    shape->d_ff % MOE_DIM_MULTIPLE)
		return -EINVAL;
	return 0;
}

/* The splitmix64 finalizer: a bijection that mixes every input bit. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t moe_gen_stream(uint64_t seed, uint32_t layer, uint32_t expert, uint32_t tensor)
{
	uint64_t s = mix64(seed + MOE_GEN_GAMMA);

	s = mix64(s ^ ((uint64_t)layer << 32 | expert));
	return mix64(s + ((uint64_t)tensor + 1) * MOE_GEN_GAMMA);
}

float moe_gen_value(uint64_t stream, uint64_t index)
{
	const int8_t m = (int8_t)(mix64(stream + (index + 1) * MOE_GEN_GAMMA) >> 56);

	/* odd multiples of 2^-13: symmetric about 0, 8 significant bits */
	return (float)(2 * m + 1) * (1.0f / 8192.0f);
}

float moe_gen_weight(uint64_t seed, uint32_t layer, uint32_t expert, uint32_t tensor,
		     uint64_t index)
{
	return moe_gen_value(moe_gen_stream(seed, layer, expert, tensor), index);
}

static uint64_t tensor_elems(const struct moe_ffn_shape *shape)
{
	return (uint64_t)shape->d_model * shape->d_ff;
}

int moe_gen_expert(void *record, size_t bytes, const struct moe_ffn_shape *shape, uint64_t seed,
		   uint32_t layer, uint32_t expert)
{
	struct moe_expert_layout l;
	const uint64_t n = tensor_elems(shape);
	int err = moe_ffn_shape_check(shape);

	if (err)
		return err;
	moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
	if (bytes < l.bytes)
		return -ENOSPC;
	memset(record, 0, bytes);
	for (uint32_t t = 0; t < MOE_TENSOR_COUNT; t++) {
		const uint64_t stream = moe_gen_stream(seed, layer, expert, t);
		unsigned char *base = (unsigned char *)record + l.off[t];

		if (shape->dtype == MOE_DTYPE_BF16) {
			uint16_t *w = (uint16_t *)base;

			for (uint64_t i = 0; i < n; i++)
				w[i] = moe_f32_to_bf16_bits(moe_gen_value(stream, i));
		} else {
			float *w = (float *)base;

			for (uint64_t i = 0; i < n; i++)
				w[i] = moe_gen_value(stream, i);
		}
	}
	return 0;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int moe_gen_expert_check(const void *record, size_t bytes, const struct moe_ffn_shape *shape,
			 uint64_t seed, uint32_t layer, uint32_t expert)
{
	const unsigned char *rec = record;
	const uint64_t n = tensor_elems(shape);
	const uint64_t tensor_bytes = n * moe_dtype_bytes(shape->dtype);
	struct moe_expert_layout l;
	uint64_t at = 0;
	int err = moe_ffn_shape_check(shape);

	if (err)
		return err;
	moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
	if (bytes < l.bytes)
		return -ENOSPC;
	for (uint32_t t = 0; t < MOE_TENSOR_COUNT; t++) {
		const uint64_t stream = moe_gen_stream(seed, layer, expert, t);

		if (!all_zero(rec + at, l.off[t] - at))
			return -EBADMSG;
		if (shape->dtype == MOE_DTYPE_BF16) {
			const uint16_t *w = (const uint16_t *)(rec + l.off[t]);

			for (uint64_t i = 0; i < n; i++)
				if (w[i] != moe_f32_to_bf16_bits(moe_gen_value(stream, i)))
					return -EBADMSG;
		} else {
			const float *w = (const float *)(rec + l.off[t]);

			for (uint64_t i = 0; i < n; i++)
				if (moe_f32_bits(w[i]) != moe_f32_bits(moe_gen_value(stream, i)))
					return -EBADMSG;
		}
		at = l.off[t] + tensor_bytes;
	}
	return all_zero(rec + at, bytes - at) ? 0 : -EBADMSG;
}

static bool ring_capacity_valid(uint32_t capacity)
{
	return capacity && !(capacity & (capacity - 1));
}

int moe_miss_ring_init(struct moe_miss_ring *ring, size_t bytes, uint32_t capacity)
{
	if (!ring_capacity_valid(capacity))
		return -EINVAL;
	if (bytes < moe_miss_ring_bytes(capacity))
		return -ENOSPC;
	memset(ring, 0, moe_miss_ring_bytes(capacity));
	ring->capacity = capacity;
	return 0;
}

int moe_miss_ring_pop(struct moe_miss_ring *ring, struct moe_miss_entry *entry)
{
	const uint32_t capacity = ring->capacity;
	const uint32_t tail = __atomic_load_n(&ring->tail, __ATOMIC_RELAXED);
	const struct moe_miss_entry *e;

	if (!ring_capacity_valid(capacity))
		return -EINVAL;
	if (__atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) == tail)
		return -EAGAIN;
	e = &moe_miss_ring_entries(ring)[tail & (capacity - 1)];
	/* head moves before the entry is written: its seq says when it is. */
	if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != tail + 1)
		return -EAGAIN;
	entry->seq = tail + 1;
	entry->layer = e->layer;
	entry->expert = e->expert;
	entry->pad = 0;
	/* release: the entry is read before a producer may reuse it */
	__atomic_store_n(&ring->tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Reserve up to want entries from *base on; returns how many. The same
 * protocol as the kernels: never past tail + capacity.
 */
static uint32_t ring_reserve(struct moe_miss_ring *ring, uint32_t want, uint32_t *base)
{
	const uint32_t capacity = ring->capacity;
	uint32_t head = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);

	if (!ring_capacity_valid(capacity))
		return 0;
	for (;;) {
		const uint32_t used = head - __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
		const uint32_t room = used >= capacity ? 0 : capacity - used;
		const uint32_t take = want < room ? want : room;

		if (!take)
			return 0;
		if (__atomic_compare_exchange_n(&ring->head, &head, head + take, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			*base = head;
			return take;
		}
	}
}

int moe_ref_remap(const struct moe_remap_args *args)
{
	const uint32_t *map = (const uint32_t *)(uintptr_t)args->map;
	const uint32_t *experts = (const uint32_t *)(uintptr_t)args->experts;
	uint32_t *slots = (uint32_t *)(uintptr_t)args->slots;
	struct moe_miss_ring *ring = (struct moe_miss_ring *)(uintptr_t)args->ring;
	const uint32_t n_local = args->expert_end - args->expert_begin;
	uint32_t seen[MOE_REMAP_DEDUP_MAX / 32] = {0};
	uint32_t list[MOE_REMAP_LIST_MAX];
	uint32_t n_list = 0, n_out = 0, take = 0, base = 0, n;
	int err = moe_remap_args_check(args);

	if (err)
		return err;
	n = args->n_tokens * args->top_k;
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t e = experts[i];
		uint32_t local, slot;

		if (e < args->expert_begin || e >= args->expert_end) {
			slots[i] = MOECACHE_NONE;
			n_out++;
			continue;
		}
		local = e - args->expert_begin;
		slot = __atomic_load_n(&map[(uint64_t)args->layer * n_local + local],
				       __ATOMIC_ACQUIRE);
		slots[i] = slot;
		if (slot != MOECACHE_NONE || !ring)
			continue;
		if (local < MOE_REMAP_DEDUP_MAX) {
			const uint32_t bit = 1u << (local % 32);

			if (seen[local / 32] & bit)
				continue;
			seen[local / 32] |= bit;
		}
		if (n_list < MOE_REMAP_LIST_MAX)
			list[n_list] = e;
		n_list++;
	}
	if (!ring)
		return 0;
	if (n_list)
		take = ring_reserve(ring, n_list < MOE_REMAP_LIST_MAX ? n_list : MOE_REMAP_LIST_MAX,
				    &base);
	for (uint32_t i = 0; i < take; i++) {
		struct moe_miss_entry *e =
		    &moe_miss_ring_entries(ring)[(base + i) & (ring->capacity - 1)];

		e->layer = args->layer;
		e->expert = list[i];
		e->pad = 0;
		__atomic_store_n(&e->seq, base + i + 1, __ATOMIC_RELEASE);
	}
	if (n_list > take)
		__atomic_fetch_add(&ring->overflow, n_list - take, __ATOMIC_RELAXED);
	if (n_out)
		__atomic_fetch_add(&ring->out_of_range, n_out, __ATOMIC_RELAXED);
	return 0;
}

/* The lane tree of every dot product: p[l] += p[l + off], off = 16 .. 1. */
static float lanes_reduce(float *p)
{
	for (uint32_t off = MOE_DOT_LANES / 2; off; off /= 2)
		for (uint32_t l = 0; l < off; l++)
			p[l] = MOE_FADD(p[l], p[l + off]);
	return p[0];
}

float moe_ref_dot_f32(const float *w, const float *v, uint32_t n)
{
	float p[MOE_DOT_LANES] = {0};

	for (uint32_t j = 0; j < n; j++) {
		float *lane = &p[(j / MOE_DOT_CHUNK) % MOE_DOT_LANES];

		*lane = moe_dot_step(*lane, w[j], v[j]);
	}
	return lanes_reduce(p);
}

float moe_ref_dot_bf16(const uint16_t *w, const float *v, uint32_t n)
{
	float p[MOE_DOT_LANES] = {0};

	for (uint32_t j = 0; j < n; j++) {
		float *lane = &p[(j / MOE_DOT_CHUNK) % MOE_DOT_LANES];

		*lane = moe_dot_step(*lane, moe_bf16_bits_to_f32(w[j]), v[j]);
	}
	return lanes_reduce(p);
}

/* Row r of tensor t of a record, dotted with v. */
static float row_dot(const struct moe_ffn_shape *shape, const struct moe_expert_layout *l,
		     const void *record, uint32_t t, uint32_t r, const float *v)
{
	const uint32_t cols = t == MOE_TENSOR_DOWN ? shape->d_ff : shape->d_model;
	const uint64_t at = l->off[t] + (uint64_t)r * cols * moe_dtype_bytes(shape->dtype);
	const unsigned char *row = (const unsigned char *)record + at;

	if (shape->dtype == MOE_DTYPE_BF16)
		return moe_ref_dot_bf16((const uint16_t *)row, v, cols);
	return moe_ref_dot_f32((const float *)row, v, cols);
}

int moe_ref_ffn_token(const struct moe_ffn_shape *shape, uint32_t top_k, const void *const *records,
		      const float *weights, const float *x, float *h, float *y)
{
	struct moe_expert_layout l;
	int err = moe_ffn_shape_check(shape);

	if (err)
		return err;
	if (!top_k)
		return -EINVAL;
	moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
	for (uint32_t k = 0; k < top_k; k++) {
		float *hk = h + (uint64_t)k * shape->d_ff;

		if (!records[k])
			continue;
		for (uint32_t r = 0; r < shape->d_ff; r++) {
			const float g = row_dot(shape, &l, records[k], MOE_TENSOR_GATE, r, x);
			const float u = row_dot(shape, &l, records[k], MOE_TENSOR_UP, r, x);

			hk[r] = MOE_FMUL(moe_silu(g), u);
		}
	}
	for (uint32_t r = 0; r < shape->d_model; r++) {
		float acc = 0.0f;

		for (uint32_t k = 0; k < top_k; k++) {
			const float *hk = h + (uint64_t)k * shape->d_ff;

			if (!records[k])
				continue;
			acc = MOE_FADD(acc, MOE_FMUL(weights[k], row_dot(shape, &l, records[k],
									 MOE_TENSOR_DOWN, r, hk)));
		}
		y[r] = MOE_FADD(y[r], acc);
	}
	return 0;
}

int moe_ref_ffn(const struct moe_ffn_args *args)
{
	const struct moe_ffn_shape shape = {
	    .dtype = args->dtype,
	    .d_model = args->d_model,
	    .d_ff = args->d_ff,
	};
	const unsigned char *bank = (const unsigned char *)(uintptr_t)args->bank;
	const uint32_t *slots = (const uint32_t *)(uintptr_t)args->slots;
	const float *weights = (const float *)(uintptr_t)args->weights;
	const float *x = (const float *)(uintptr_t)args->x;
	float *h = (float *)(uintptr_t)args->h;
	float *y = (float *)(uintptr_t)args->y;
	const void **records;
	int err = moe_ffn_args_check(args);

	if (err)
		return err;
	records = calloc(args->top_k, sizeof(*records));
	if (!records)
		return -ENOMEM;
	for (uint32_t t = 0; t < args->n_tokens; t++) {
		const uint64_t te = (uint64_t)t * args->top_k;

		for (uint32_t k = 0; k < args->top_k; k++) {
			const uint32_t slot = slots[te + k];

			/* MOECACHE_NONE is also >= n_slots */
			records[k] = slot < args->n_slots ? bank + slot * args->slot_stride : NULL;
		}
		err = moe_ref_ffn_token(&shape, args->top_k, records, weights + te,
					x + (uint64_t)t * args->d_model, h + te * args->d_ff,
					y + (uint64_t)t * args->d_model);
		if (err)
			break;
	}
	free(records);
	return err;
}
