#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "moe_numerics.h"
#include "helpers.h"
#include "ref/moe_ref.h"

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Ulps between two finite floats of the same sign. */
static uint32_t ulps(float a, float b)
{
	const uint32_t ua = bits_of(a), ub = bits_of(b);

	return ua > ub ? ua - ub : ub - ua;
}

/*
 * Chunk 0 is 2^24 then seven 1s, chunks 1..31 start with a 1, chunk 32
 * (back to lane 0) starts with a 1. In the defined order lane 0 stays
 * 2^24 (each +1 ties to even), lanes 1..31 hold 1, and the xor tree adds
 * 1 (lost), 2, 4, 8, 16: 2^24 + 30. In-order summation gives 2^24, the
 * exact sum 2^24 + 39, lanes of strided elements 2^24 + 7.
 */
static void lane_order_input(float *w, float *v, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++) {
		w[j] = 0.0f;
		v[j] = 1.0f;
	}
	w[0] = 16777216.0f;
	for (uint32_t j = 1; j < 8; j++)
		w[j] = 1.0f;
	for (uint32_t l = 1; l < 32; l++)
		w[8 * l] = 1.0f;
	w[256] = 1.0f;
}

Test(
    dot, basic_follows_lane_order_f32,
    .description = "the fp32 dot product sums in 8-element chunks per lane, then the xor lane tree")
{
	float w[512], v[512];

	lane_order_input(w, v, 512);
	cr_assert_eq(moe_ref_dot_f32(w, v, 512), 16777216.0f + 30.0f);
}

Test(dot, basic_follows_lane_order_bf16,
     .description = "the bf16 dot product sums in the same order as the fp32 one")
{
	float w[512], v[512];
	uint16_t wb[512];

	lane_order_input(w, v, 512);
	for (int j = 0; j < 512; j++)
		wb[j] = moe_f32_to_bf16(w[j]);
	cr_assert_eq(moe_ref_dot_bf16(wb, v, 512), 16777216.0f + 30.0f);
}

Test(numerics, basic_expf_close_to_libm,
     .description = "moe_expf is within 2 ulp of the correctly rounded exp over [-87, 88]")
{
	uint32_t worst = 0;

	for (float x = -87.0f; x <= 88.0f; x += 0.00123f) {
		const float want = (float)exp((double)x);
		const uint32_t d = ulps(moe_expf(x), want);

		if (d > worst)
			worst = d;
	}
	cr_log_info("moe_expf: worst %u ulp", worst);
	cr_assert_leq(worst, 2);
}

Test(numerics, basic_expf_special_values,
     .description = "exp(0) is 1, NaN stays NaN, above 88 is +inf, below -87 is 0")
{
	cr_assert_eq(moe_expf(0.0f), 1.0f);
	cr_assert_eq(moe_expf(-0.0f), 1.0f);
	cr_assert(isnan(moe_expf(NAN)));
	cr_assert(isinf(moe_expf(88.5f)) && moe_expf(88.5f) > 0);
	cr_assert(isinf(moe_expf(INFINITY)));
	cr_assert_eq(moe_expf(-87.5f), 0.0f);
	cr_assert_eq(moe_expf(-INFINITY), 0.0f);
}

Test(numerics, basic_silu_close_to_exact,
     .description = "moe_silu is within 4 ulp of g / (1 + e^-g) over [-80, 80]")
{
	uint32_t worst = 0;

	for (float g = -80.0f; g <= 80.0f; g += 0.00071f) {
		const double exact = (double)g / (1.0 + exp(-(double)g));
		const uint32_t d = ulps(moe_silu(g), (float)exact);

		if (d > worst)
			worst = d;
	}
	cr_log_info("moe_silu: worst %u ulp", worst);
	cr_assert_leq(worst, 4);
}

static void assert_within_tolerance(struct ffn_case *c)
{
	const uint64_t n = (uint64_t)c->a.n_tokens * c->a.d_model;
	const double factor = ffn_tolerance_factor(c->a.d_model, c->a.d_ff);
	double *want = calloc(n, sizeof(double)), *mag = calloc(n, sizeof(double));
	double worst = 0;

	cr_assert(want && mag);
	cr_assert_eq(naive_ffn(&c->a, want, mag), 0);
	cr_assert_eq(moe_ref_ffn(&c->a), 0);
	for (uint64_t i = 0; i < n; i++) {
		const double err = fabs(c->y[i] - want[i]);

		cr_assert_leq(err, factor * mag[i], "y[%llu] = %.9g, exact %.9g, bound %.3g",
			      (unsigned long long)i, c->y[i], want[i], factor * mag[i]);
		if (err / (factor * mag[i]) > worst)
			worst = err / (factor * mag[i]);
	}
	cr_log_info("dtype %u: worst error %.3g of the bound", c->a.dtype, worst);
	free(want);
	free(mag);
}

Test(ffn, basic_bf16_within_tolerance_of_double,
     .description = "the bf16 FFN reference is within the stated bound of a double computation")
{
	struct ffn_case c;

	ffn_case_init(&c, MOE_DTYPE_BF16, 512, 256, 3, 4, 5);
	assert_within_tolerance(&c);
	ffn_case_fini(&c);
}

Test(ffn, basic_f32_within_tolerance_of_double,
     .description = "the fp32 FFN reference is within the stated bound of a double computation")
{
	struct ffn_case c;

	ffn_case_init(&c, MOE_DTYPE_F32, 256, 512, 2, 3, 4);
	assert_within_tolerance(&c);
	ffn_case_fini(&c);
}

Test(ffn, basic_f32_and_bf16_records_same_bits,
     .description = "fp32 and bf16 records of the same generated expert give the same bits")
{
	struct ffn_case b, f;

	ffn_case_init(&b, MOE_DTYPE_BF16, 256, 128, 3, 4, 5);
	ffn_case_init(&f, MOE_DTYPE_F32, 256, 128, 3, 4, 5);
	cr_assert_eq(moe_ref_ffn(&b.a), 0);
	cr_assert_eq(moe_ref_ffn(&f.a), 0);
	cr_assert_eq(memcmp(b.y, f.y, 3 * 256 * sizeof(float)), 0);
	ffn_case_fini(&b);
	ffn_case_fini(&f);
}

Test(ffn, basic_accumulates_into_y,
     .description = "y keeps what it held: the result is y0 + the FFN sum, rounded once")
{
	struct ffn_case c;
	float *from_zero = test_zalloc(2 * 128 * sizeof(float));

	ffn_case_init(&c, MOE_DTYPE_BF16, 128, 64, 2, 2, 3);
	cr_assert_eq(moe_ref_ffn(&c.a), 0);
	memcpy(from_zero, c.y, 2 * 128 * sizeof(float));
	for (int i = 0; i < 2 * 128; i++)
		c.y[i] = (float)(i % 7) - 3.0f;
	cr_assert_eq(moe_ref_ffn(&c.a), 0);
	for (int i = 0; i < 2 * 128; i++)
		cr_assert_eq(bits_of(c.y[i]), bits_of(((float)(i % 7) - 3.0f) + from_zero[i]),
			     "y[%d]", i);
	free(from_zero);
	ffn_case_fini(&c);
}

Test(ffn, basic_slots_match_records,
     .description = "the slot entry point equals the per-token record entry point bit for bit, h "
		    "included, skipping NONE and out-of-bank slots")
{
	struct ffn_case c;
	const uint32_t d_model = 256, d_ff = 128, top_k = 4, n_tokens = 3;
	float *y = test_zalloc(d_model * sizeof(float)),
	      *h = test_zalloc(top_k * d_ff * sizeof(float));
	int skipped = 0;

	ffn_case_init(&c, MOE_DTYPE_BF16, d_model, d_ff, n_tokens, top_k, 5);
	cr_assert_eq(moe_ref_ffn(&c.a), 0);
	for (uint32_t t = 0; t < n_tokens; t++) {
		const struct moe_ffn_shape shape = {MOE_DTYPE_BF16, d_model, d_ff};
		const void *records[4];

		for (uint32_t k = 0; k < top_k; k++) {
			const uint32_t s = c.slots[t * top_k + k];

			records[k] = s < 5 ? c.bank + s * c.a.slot_stride : NULL;
			skipped += !records[k];
		}
		memset(y, 0, d_model * sizeof(float));
		cr_assert_eq(moe_ref_ffn_token(&shape, top_k, records, c.weights + t * top_k,
					       c.x + t * d_model, h, y),
			     0);
		cr_assert_eq(memcmp(y, c.y + t * d_model, d_model * sizeof(float)), 0, "token %u",
			     t);
		for (uint32_t k = 0; k < top_k; k++)
			if (records[k])
				cr_assert_eq(memcmp(h + k * d_ff, c.h + (t * top_k + k) * d_ff,
						    d_ff * sizeof(float)),
					     0);
	}
	cr_assert_gt(skipped, 0, "the case must hold skipped slots");
	free(y);
	free(h);
	ffn_case_fini(&c);
}

Test(ffn, basic_skipped_slot_contributes_nothing,
     .description = "an expert whose slot is NONE or outside the bank adds exactly nothing to y")
{
	struct ffn_case c, only;

	ffn_case_init(&c, MOE_DTYPE_F32, 128, 64, 1, 3, 2);
	ffn_case_init(&only, MOE_DTYPE_F32, 128, 64, 1, 1, 2);
	c.slots[0] = MOECACHE_NONE;
	c.slots[1] = 1;
	c.slots[2] = 2; /* n_slots is 2 */
	only.slots[0] = 1;
	only.weights[0] = c.weights[1];
	cr_assert_eq(moe_ref_ffn(&c.a), 0);
	cr_assert_eq(moe_ref_ffn(&only.a), 0);
	cr_assert_eq(memcmp(c.y, only.y, 128 * sizeof(float)), 0);
	ffn_case_fini(&c);
	ffn_case_fini(&only);
}

Test(ffn, bad_input_args_rejected,
     .description = "a bad dtype, dimension, stride, slot count, alignment or NULL array gives "
		    "-EINVAL and y is untouched")
{
	struct ffn_case c;
	struct moe_ffn_args bad[11];

	ffn_case_init(&c, MOE_DTYPE_BF16, 64, 32, 1, 2, 2);
	for (int b = 0; b < 11; b++)
		bad[b] = c.a;
	bad[0].dtype = 0;
	bad[1].d_model = 60;
	bad[2].d_ff = 0;
	bad[3].slot_stride = 256;
	bad[4].slot_stride = c.a.slot_stride + 8;
	bad[5].n_slots = 0;
	bad[6].top_k = 0;
	bad[7].x += 4;
	bad[8].h = 0;
	bad[9].weights = 0;
	bad[10].d_ff = MOE_GRID_Y_MAX * MOE_FFN_ROWS_PER_BLOCK + MOE_DIM_MULTIPLE;
	for (int b = 0; b < 11; b++) {
		c.y[0] = 42.0f;
		cr_assert_eq(moe_ffn_args_check(&bad[b]), -EINVAL, "case %d", b);
		cr_assert_eq(moe_ref_ffn(&bad[b]), -EINVAL, "case %d", b);
		cr_assert_eq(c.y[0], 42.0f);
	}
	ffn_case_fini(&c);
}

Test(ffn, bad_input_token_rejects_bad_shape,
     .description = "the per-token entry point rejects a bad shape or top_k 0 with -EINVAL")
{
	const struct moe_ffn_shape ok = {MOE_DTYPE_F32, 8, 8}, bad = {MOE_DTYPE_F32, 12, 8};
	const void *records[1] = {NULL};
	float w[1] = {1}, x[8] = {0}, h[8], y[8] = {0};

	cr_assert_eq(moe_ref_ffn_token(&bad, 1, records, w, x, h, y), -EINVAL);
	cr_assert_eq(moe_ref_ffn_token(&ok, 0, records, w, x, h, y), -EINVAL);
	cr_assert_eq(moe_ref_ffn_token(&ok, 1, records, w, x, h, y), 0);
}
