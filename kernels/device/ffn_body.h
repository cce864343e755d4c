/*
 * The expert FFN, written once against the device primitives of
 * kernels/cuda/moe_cuda.cuh and kernels/hip/moe_hip.h, in the order that
 * kernels/ref/moe_ref.c defines: a warp computes one output row, lane l
 * taking the 8-element chunks l, l + 32, ... (one 16-byte bf16 load each)
 * and the lanes folding by xor shuffles 16, 8, 4, 2, 1. The kernels are
 * bandwidth-bound GEMVs, so the extra rounding steps cost nothing.
 *
 * up:   block (token, k) x 8 rows of d_ff: h = silu(gate x) * (up x)
 * down: block token x 8 rows of d_model: y += sum_k w_k (down_k h_k),
 *	 k in order, so no atomics and the same bits on every run.
 */
#ifndef MOE_DEVICE_FFN_BODY_H
#define MOE_DEVICE_FFN_BODY_H

#include "moe_numerics.h"

MOE_DEV float moe_dev_lanes_reduce(float p)
{
	for (uint32_t off = MOE_DOT_LANES / 2; off; off /= 2)
		p = MOE_FADD(p, moe_dev_shfl_xor(p, off));
	return p;
}

/* Chunk q (8 elements) of a row of weights, widened to fp32. */
template <uint32_t DTYPE>
MOE_DEV void moe_dev_load_w8(const unsigned char *row, uint32_t q, float *w)
{
	if (DTYPE == MOE_DTYPE_BF16) {
		const struct moe_u32x4 u = moe_dev_load16(row + (uint64_t)q * 16);
		const uint32_t v[4] = {u.x, u.y, u.z, u.w};

		for (int i = 0; i < 4; i++) {
			/* little-endian: the element of lower index is the low half */
			w[2 * i] = moe_f32_from_bits(v[i] << 16);
			w[2 * i + 1] = moe_f32_from_bits(v[i] & 0xffff0000u);
		}
	} else {
		const struct moe_u32x4 lo = moe_dev_load16(row + (uint64_t)q * 32);
		const struct moe_u32x4 hi = moe_dev_load16(row + (uint64_t)q * 32 + 16);

		w[0] = moe_f32_from_bits(lo.x);
		w[1] = moe_f32_from_bits(lo.y);
		w[2] = moe_f32_from_bits(lo.z);
		w[3] = moe_f32_from_bits(lo.w);
		w[4] = moe_f32_from_bits(hi.x);
		w[5] = moe_f32_from_bits(hi.y);
		w[6] = moe_f32_from_bits(hi.z);
		w[7] = moe_f32_from_bits(hi.w);
	}
}

/* Chunk q of an fp32 vector (x or h). */
MOE_DEV void moe_dev_load_v8(const float *v, uint32_t q, float *out)
{
	moe_dev_load_w8<MOE_DTYPE_F32>((const unsigned char *)v, q, out);
}

/* gate_r . x and up_r . x in one pass over x. */
template <uint32_t DTYPE>
MOE_DEV void moe_dev_dot2(const unsigned char *ra, const unsigned char *rb, const float *v,
			  uint32_t n, uint32_t lane, float *da, float *db)
{
	float pa = 0.0f, pb = 0.0f;

	for (uint32_t q = lane; q < n / MOE_DOT_CHUNK; q += MOE_DOT_LANES) {
		float wa[MOE_DOT_CHUNK], wb[MOE_DOT_CHUNK], x[MOE_DOT_CHUNK];

		moe_dev_load_w8<DTYPE>(ra, q, wa);
		moe_dev_load_w8<DTYPE>(rb, q, wb);
		moe_dev_load_v8(v, q, x);
		for (uint32_t c = 0; c < MOE_DOT_CHUNK; c++) {
			pa = moe_dot_step(pa, wa[c], x[c]);
			pb = moe_dot_step(pb, wb[c], x[c]);
		}
	}
	*da = moe_dev_lanes_reduce(pa);
	*db = moe_dev_lanes_reduce(pb);
}

template <uint32_t DTYPE>
MOE_DEV float moe_dev_dot(const unsigned char *row, const float *v, uint32_t n, uint32_t lane)
{
	float p = 0.0f;

	for (uint32_t q = lane; q < n / MOE_DOT_CHUNK; q += MOE_DOT_LANES) {
		float w[MOE_DOT_CHUNK], x[MOE_DOT_CHUNK];

		moe_dev_load_w8<DTYPE>(row, q, w);
		moe_dev_load_v8(v, q, x);
		for (uint32_t c = 0; c < MOE_DOT_CHUNK; c++)
			p = moe_dot_step(p, w[c], x[c]);
	}
	return moe_dev_lanes_reduce(p);
}

template <uint32_t DTYPE> MOE_DEV void moe_dev_ffn_up(const struct moe_ffn_args &a)
{
	const uint32_t tid = moe_dev_thread();
	const uint32_t lane = tid % MOE_DOT_LANES;
	const uint32_t row = moe_dev_block_y() * MOE_FFN_ROWS_PER_BLOCK + tid / MOE_DOT_LANES;
	const uint32_t te = moe_dev_block_x();
	struct moe_expert_layout l;
	const unsigned char *rec;
	uint64_t row_at;
	uint32_t slot;
	float g, u;

	if (moe_dev_block_threads() != MOE_FFN_THREADS || a.dtype != DTYPE)
		return;
	if (row >= a.d_ff || (uint64_t)te >= (uint64_t)a.n_tokens * a.top_k)
		return;
	slot = ((const uint32_t *)(uintptr_t)a.slots)[te];
	if (slot >= a.n_slots)
		return;
	moe_expert_layout_get(DTYPE, a.d_model, a.d_ff, &l);
	rec = (const unsigned char *)(uintptr_t)a.bank + slot * a.slot_stride;
	row_at = (uint64_t)row * a.d_model * moe_dtype_bytes(DTYPE);
	moe_dev_dot2<DTYPE>(rec + l.off[MOE_TENSOR_GATE] + row_at,
			    rec + l.off[MOE_TENSOR_UP] + row_at,
			    (const float *)(uintptr_t)a.x + (uint64_t)(te / a.top_k) * a.d_model,
			    a.d_model, lane, &g, &u);
	if (lane == 0)
		((float *)(uintptr_t)a.h)[(uint64_t)te * a.d_ff + row] = MOE_FMUL(moe_silu(g), u);
}

template <uint32_t DTYPE> MOE_DEV void moe_dev_ffn_down(const struct moe_ffn_args &a)
{
	const uint32_t tid = moe_dev_thread();
	const uint32_t lane = tid % MOE_DOT_LANES;
	const uint32_t row = moe_dev_block_y() * MOE_FFN_ROWS_PER_BLOCK + tid / MOE_DOT_LANES;
	const uint32_t t = moe_dev_block_x();
	const uint32_t *slots = (const uint32_t *)(uintptr_t)a.slots;
	const float *weights = (const float *)(uintptr_t)a.weights;
	const float *h = (const float *)(uintptr_t)a.h;
	float *y = (float *)(uintptr_t)a.y;
	struct moe_expert_layout l;
	float acc = 0.0f;

	if (moe_dev_block_threads() != MOE_FFN_THREADS || a.dtype != DTYPE)
		return;
	if (row >= a.d_model || t >= a.n_tokens)
		return;
	moe_expert_layout_get(DTYPE, a.d_model, a.d_ff, &l);
	for (uint32_t k = 0; k < a.top_k; k++) {
		const uint64_t te = (uint64_t)t * a.top_k + k;
		const uint32_t slot = slots[te];
		const unsigned char *rec;
		float d;

		if (slot >= a.n_slots)
			continue;
		rec = (const unsigned char *)(uintptr_t)a.bank + slot * a.slot_stride;
		d = moe_dev_dot<DTYPE>(rec + l.off[MOE_TENSOR_DOWN] +
					   (uint64_t)row * a.d_ff * moe_dtype_bytes(DTYPE),
				       h + te * a.d_ff, a.d_ff, lane);
		acc = MOE_FADD(acc, MOE_FMUL(weights[te], d));
	}
	if (lane == 0)
		y[(uint64_t)t * a.d_model + row] = MOE_FADD(y[(uint64_t)t * a.d_model + row], acc);
}

#endif /* MOE_DEVICE_FFN_BODY_H */
