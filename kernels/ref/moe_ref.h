/*
 * C references of the moecache device kernels (build/lib/libmoeref.a):
 * remap and the miss ring, the SwiGLU expert FFN in the summation order
 * that the CUDA and HIP kernels follow, bf16 conversion, and a generator
 * of expert weights that any process can recompute. kernels/README.md
 * defines the numerics and the tolerances.
 */
#ifndef MOE_REF_H
#define MOE_REF_H

#include <stddef.h>
#include <stdint.h>

#include "moe_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp32 -> bf16 bits, round to nearest even; NaN stays NaN, overflow is inf. */
uint16_t moe_f32_to_bf16(float f);
/* bf16 bits -> fp32, exact. */
float moe_bf16_to_f32(uint16_t b);

/* What an expert record holds: dtype (enum moe_dtype) and dimensions. */
struct moe_ffn_shape {
	uint32_t dtype;
	uint32_t d_model;
	uint32_t d_ff;
};

/* 0, or -EINVAL: unknown dtype, or a dimension 0 or not a multiple of MOE_DIM_MULTIPLE. */
int moe_ffn_shape_check(const struct moe_ffn_shape *shape);

/*
 * Deterministic weights: value i of a stream is splitmix64 output i of the
 * stream key, whose top byte m (signed) gives (2 m + 1) / 8192: one of 256
 * levels, symmetric in (-1/32, 1/32) and exact in bf16, so bf16 and fp32
 * records hold the same numbers.
 * moe_gen_weight(seed, layer, expert, tensor, i) is element i (row-major)
 * of that tensor of that expert.
 */
uint64_t moe_gen_stream(uint64_t seed, uint32_t layer, uint32_t expert, uint32_t tensor);
float moe_gen_value(uint64_t stream, uint64_t index);
float moe_gen_weight(uint64_t seed, uint32_t layer, uint32_t expert, uint32_t tensor,
		     uint64_t index);

/*
 * Write the record of (layer, expert) into record[0, bytes): the tensors
 * at their layout offsets, zero everywhere else. -EINVAL on a bad shape,
 * -ENOSPC if bytes is smaller than the layout.
 */
int moe_gen_expert(void *record, size_t bytes, const struct moe_ffn_shape *shape, uint64_t seed,
		   uint32_t layer, uint32_t expert);
/* 0 if record[0, bytes) is exactly what moe_gen_expert writes, else -EBADMSG. */
int moe_gen_expert_check(const void *record, size_t bytes, const struct moe_ffn_shape *shape,
			 uint64_t seed, uint32_t layer, uint32_t expert);

/*
 * Set up a ring of capacity entries (a power of two) in ring[0, bytes),
 * all counters 0. -EINVAL for a capacity that is 0 or not a power of two,
 * -ENOSPC if bytes < moe_miss_ring_bytes(capacity).
 */
int moe_miss_ring_init(struct moe_miss_ring *ring, size_t bytes, uint32_t capacity);
/*
 * Take the oldest miss (one consumer only). -EAGAIN if the ring is empty,
 * or if its oldest entry is reserved but not yet written: call again.
 */
int moe_miss_ring_pop(struct moe_miss_ring *ring, struct moe_miss_entry *entry);

/*
 * moe_remap on the CPU, with host addresses in the argument block. The
 * map is read with acquire loads, so it may be the driver's shared map.
 * Misses are deduplicated within the call for local ids below
 * MOE_REMAP_DEDUP_MAX and reported in first-seen order (token-major);
 * the kernels report the same set in any order. -EINVAL as
 * moe_remap_args_check(), before anything is written.
 */
int moe_ref_remap(const struct moe_remap_args *args);

/*
 * Dot product in the order every target follows: element j goes to lane
 * (j / MOE_DOT_CHUNK) % MOE_DOT_LANES, each lane sums its elements in
 * increasing j as p = p + w * v (two roundings), and then for off = 16, 8,
 * 4, 2, 1: p[l] = p[l] + p[l + off] for l < off; the result is p[0].
 */
float moe_ref_dot_f32(const float *w, const float *v, uint32_t n);
float moe_ref_dot_bf16(const uint16_t *w, const float *v, uint32_t n);

/*
 * The FFN of one token over top_k expert records (a NULL record is
 * skipped): for each k, h[k][r] = silu(gate_r . x) * (up_r . x); then for
 * each output row r, acc = sum over k in order of weights[k] * (down_r .
 * h[k]), and y[r] = y[r] + acc. h is scratch of top_k * d_ff floats.
 */
int moe_ref_ffn_token(const struct moe_ffn_shape *shape, uint32_t top_k, const void *const *records,
		      const float *weights, const float *x, float *h, float *y);

/*
 * The moe_ffn_up_* and moe_ffn_down_* launch pair on the CPU, with host
 * addresses in the argument block; h is written as the kernels write it.
 * -EINVAL as moe_ffn_args_check(), -ENOMEM.
 */
int moe_ref_ffn(const struct moe_ffn_args *args);

#ifdef __cplusplus
}
#endif

#endif /* MOE_REF_H */
