#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

static double weight_at(const struct moe_ffn_shape *shape, const unsigned char *rec, uint64_t off,
			uint64_t i)
{
	if (shape->dtype == MOE_DTYPE_BF16)
		return moe_bf16_to_f32(((const uint16_t *)(rec + off))[i]);
	return ((const float *)(rec + off))[i];
}

int naive_ffn(const struct moe_ffn_args *a, double *y, double *s)
{
	const struct moe_ffn_shape shape = {a->dtype, a->d_model, a->d_ff};
	const unsigned char *bank = (const unsigned char *)(uintptr_t)a->bank;
	const uint32_t *slots = (const uint32_t *)(uintptr_t)a->slots;
	const float *w = (const float *)(uintptr_t)a->weights;
	const float *x = (const float *)(uintptr_t)a->x;
	const float *y0 = (const float *)(uintptr_t)a->y;
	struct moe_expert_layout l;
	double *h = calloc(a->d_ff, sizeof(*h));
	double *e = calloc(a->d_ff, sizeof(*e));

	if (!h || !e) {
		free(h);
		free(e);
		return -ENOMEM;
	}
	moe_expert_layout_get(a->dtype, a->d_model, a->d_ff, &l);
	for (uint32_t t = 0; t < a->n_tokens; t++) {
		const float *xt = x + (uint64_t)t * a->d_model;
		double *yt = y + (uint64_t)t * a->d_model;
		double *st = s + (uint64_t)t * a->d_model;

		for (uint32_t r = 0; r < a->d_model; r++) {
			yt[r] = y0[(uint64_t)t * a->d_model + r];
			st[r] = fabs(yt[r]);
		}
		for (uint32_t k = 0; k < a->top_k; k++) {
			const uint32_t slot = slots[(uint64_t)t * a->top_k + k];
			const double wk = w[(uint64_t)t * a->top_k + k];
			const unsigned char *rec;

			if (slot >= a->n_slots)
				continue;
			rec = bank + slot * a->slot_stride;
			for (uint32_t j = 0; j < a->d_ff; j++) {
				double g = 0, u = 0, g1 = 0, u1 = 0, sig, silu, dsilu;

				for (uint32_t i = 0; i < a->d_model; i++) {
					const uint64_t at = (uint64_t)j * a->d_model + i;
					const double gx =
					    weight_at(&shape, rec, l.off[MOE_TENSOR_GATE], at) *
					    xt[i];
					const double ux =
					    weight_at(&shape, rec, l.off[MOE_TENSOR_UP], at) *
					    xt[i];

					g += gx;
					u += ux;
					g1 += fabs(gx);
					u1 += fabs(ux);
				}
				sig = 1.0 / (1.0 + exp(-g));
				silu = g * sig;
				dsilu = sig * (1.0 + g * (1.0 - sig));
				h[j] = silu * u;
				e[j] = fabs(dsilu * u) * g1 + fabs(silu) * u1;
			}
			for (uint32_t r = 0; r < a->d_model; r++) {
				double d = 0, d1 = 0;

				for (uint32_t j = 0; j < a->d_ff; j++) {
					const double dw =
					    weight_at(&shape, rec, l.off[MOE_TENSOR_DOWN],
						      (uint64_t)r * a->d_ff + j);

					d += dw * h[j];
					d1 += fabs(dw) * (fabs(h[j]) + e[j]);
				}
				yt[r] += wk * d;
				st[r] += fabs(wk) * d1;
			}
		}
	}
	free(h);
	free(e);
	return 0;
}

double ffn_tolerance_factor(uint32_t d_model, uint32_t d_ff)
{
	const uint32_t d = d_model > d_ff ? d_model : d_ff;
	const double chain = d / 32.0 + 6.0;

	return (2.0 * chain + 16.0) * ldexp(1.0, -24);
}

void *test_bank_new(const struct moe_ffn_shape *shape, uint32_t n_slots, uint64_t seed,
		    uint64_t *stride)
{
	struct moe_expert_layout l;
	unsigned char *bank;

	moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
	*stride = moe_align_up(l.bytes, 4096);
	bank = aligned_alloc(4096, *stride * n_slots);
	if (!bank)
		return NULL;
	for (uint32_t s = 0; s < n_slots; s++) {
		if (moe_gen_expert(bank + s * *stride, *stride, shape, seed, 0, s + 100)) {
			free(bank);
			return NULL;
		}
	}
	return bank;
}

void *test_zalloc(size_t bytes)
{
	void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);

	cr_assert_not_null(p);
	memset(p, 0, bytes);
	return p;
}

void ffn_case_init(struct ffn_case *c, uint32_t dtype, uint32_t d_model, uint32_t d_ff,
		   uint32_t n_tokens, uint32_t top_k, uint32_t n_slots)
{
	const struct moe_ffn_shape shape = {dtype, d_model, d_ff};
	const uint64_t xs = moe_gen_stream(FFN_CASE_SEED, 1000, 0, 0);
	const uint64_t ws = moe_gen_stream(FFN_CASE_SEED, 1000, 1, 0);
	const uint32_t n = n_tokens * top_k;
	uint64_t stride;

	c->bank = test_bank_new(&shape, n_slots, FFN_CASE_SEED, &stride);
	cr_assert_not_null(c->bank);
	c->slots = test_zalloc(n * sizeof(uint32_t));
	c->weights = test_zalloc(n * sizeof(float));
	c->x = test_zalloc((size_t)n_tokens * d_model * sizeof(float));
	c->h = test_zalloc((size_t)n * d_ff * sizeof(float));
	c->y = test_zalloc((size_t)n_tokens * d_model * sizeof(float));
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t s = (i * 3 + i / top_k) % (n_slots + 2);

		c->slots[i] = s == n_slots ? MOECACHE_NONE : s;
		c->weights[i] = 0.05f + fabsf(moe_gen_value(ws, i)) * 16.0f;
	}
	for (uint64_t i = 0; i < (uint64_t)n_tokens * d_model; i++)
		c->x[i] = moe_gen_value(xs, i) * 32.0f;
	c->a = (struct moe_ffn_args){
	    .bank = (uintptr_t)c->bank,
	    .slot_stride = stride,
	    .x = (uintptr_t)c->x,
	    .slots = (uintptr_t)c->slots,
	    .weights = (uintptr_t)c->weights,
	    .h = (uintptr_t)c->h,
	    .y = (uintptr_t)c->y,
	    .n_slots = n_slots,
	    .dtype = dtype,
	    .d_model = d_model,
	    .d_ff = d_ff,
	    .n_tokens = n_tokens,
	    .top_k = top_k,
	};
}

void ffn_case_fini(struct ffn_case *c)
{
	free(c->bank);
	free(c->slots);
	free(c->weights);
	free(c->x);
	free(c->h);
	free(c->y);
}
