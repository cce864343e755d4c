#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ref/moe_ref.h"

#define SEED 0x6d6f656361636865ull

static const struct moe_ffn_shape shape_bf16 = {MOE_DTYPE_BF16, 64, 40};
static const struct moe_ffn_shape shape_f32 = {MOE_DTYPE_F32, 64, 40};

static size_t record_bytes(const struct moe_ffn_shape *shape)
{
	struct moe_expert_layout l;

	moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
	return moe_align_up(l.bytes, 4096);
}

static unsigned char *new_record(const struct moe_ffn_shape *shape, uint32_t layer, uint32_t expert)
{
	const size_t bytes = record_bytes(shape);
	unsigned char *rec = malloc(bytes);

	cr_assert_not_null(rec);
	cr_assert_eq(moe_gen_expert(rec, bytes, shape, SEED, layer, expert), 0);
	return rec;
}

Test(gen, basic_weight_is_order_independent,
     .description = "a weight depends only on its key: the same values come back in any call order")
{
	float fwd[512];

	for (int i = 0; i < 512; i++)
		fwd[i] = moe_gen_weight(SEED, 3, 7, MOE_TENSOR_UP, (uint64_t)i);
	for (int i = 511; i >= 0; i--) {
		(void)moe_gen_weight(SEED, (uint32_t)i, 1, MOE_TENSOR_GATE, 99);
		cr_assert_eq(moe_gen_weight(SEED, 3, 7, MOE_TENSOR_UP, (uint64_t)i), fwd[i]);
	}
}

Test(gen, basic_values_exact_in_bf16_and_bounded,
     .description = "every generated value is an odd multiple of 2^-13 in (-1/32, 1/32) and "
		    "survives bf16 unchanged")
{
	const uint64_t stream = moe_gen_stream(SEED, 0, 0, 0);

	for (uint64_t i = 0; i < 100000; i++) {
		const float v = moe_gen_value(stream, i);
		const float m = v * 8192.0f;

		cr_assert(v > -1.0f / 32 && v < 1.0f / 32, "value %g", v);
		cr_assert_eq(m, nearbyintf(m));
		cr_assert_eq(fabsf(fmodf(m, 2.0f)), 1.0f, "value %g", v);
		cr_assert_eq(moe_bf16_to_f32(moe_f32_to_bf16(v)), v);
	}
}

Test(gen, basic_values_cover_every_level,
     .description = "all 256 levels appear and the mean is near 0 over 2^16 values")
{
	const uint64_t stream = moe_gen_stream(SEED, 1, 2, MOE_TENSOR_DOWN);
	int seen[256] = {0};
	double sum = 0;

	for (uint64_t i = 0; i < 1 << 16; i++) {
		const float v = moe_gen_value(stream, i);

		seen[((int)(v * 8192.0f) + 255) / 2]++;
		sum += v;
	}
	for (int m = 0; m < 256; m++)
		cr_assert_gt(seen[m], 0, "level %d never drawn", 2 * m - 255);
	/* the standard deviation of the mean is about 0.018 / 256 */
	cr_assert_lt(fabs(sum / (1 << 16)), 4 * 0.018 / 256);
}

Test(gen, basic_each_key_part_selects_a_stream,
     .description = "changing the seed, layer, expert or tensor changes the values")
{
	const uint64_t base = moe_gen_stream(SEED, 4, 5, MOE_TENSOR_GATE);
	const uint64_t other[] = {
	    moe_gen_stream(SEED + 1, 4, 5, MOE_TENSOR_GATE),
	    moe_gen_stream(SEED, 5, 5, MOE_TENSOR_GATE),
	    moe_gen_stream(SEED, 4, 6, MOE_TENSOR_GATE),
	    moe_gen_stream(SEED, 4, 5, MOE_TENSOR_UP),
	    moe_gen_stream(SEED, 5, 4, MOE_TENSOR_GATE),
	};

	for (size_t o = 0; o < sizeof(other) / sizeof(other[0]); o++) {
		int same = 0;

		for (uint64_t i = 0; i < 64; i++)
			same += moe_gen_value(base, i) == moe_gen_value(other[o], i);
		/* 256 levels: about 64/256 equal by chance */
		cr_assert_lt(same, 8, "stream %zu: %d of 64 equal", o, same);
	}
}

Test(gen, basic_record_holds_weights_at_layout,
     .description = "element i of each tensor of a generated record is moe_gen_weight(..., tensor, "
		    "i), bf16 and fp32")
{
	const struct moe_ffn_shape *shapes[] = {&shape_bf16, &shape_f32};

	for (int s = 0; s < 2; s++) {
		const struct moe_ffn_shape *shape = shapes[s];
		unsigned char *rec = new_record(shape, 2, 9);
		struct moe_expert_layout l;

		moe_expert_layout_get(shape->dtype, shape->d_model, shape->d_ff, &l);
		for (uint32_t t = 0; t < MOE_TENSOR_COUNT; t++) {
			for (uint64_t i = 0; i < (uint64_t)shape->d_model * shape->d_ff; i++) {
				const float want = moe_gen_weight(SEED, 2, 9, t, i);
				const float got =
				    shape->dtype == MOE_DTYPE_BF16
					? moe_bf16_to_f32(((uint16_t *)(rec + l.off[t]))[i])
					: ((float *)(rec + l.off[t]))[i];

				cr_assert_eq(got, want, "dtype %u tensor %u index %llu",
					     shape->dtype, t, (unsigned long long)i);
			}
		}
		free(rec);
	}
}

Test(gen, basic_check_accepts_generated_record,
     .description = "moe_gen_expert_check accepts what moe_gen_expert wrote")
{
	unsigned char *rec = new_record(&shape_bf16, 1, 3);

	cr_assert_eq(moe_gen_expert_check(rec, record_bytes(&shape_bf16), &shape_bf16, SEED, 1, 3),
		     0);
	free(rec);
}

Test(gen, basic_check_detects_any_flipped_bit,
     .description =
	 "one flipped bit in a tensor, a gap between tensors or the tail makes the check fail")
{
	const size_t bytes = record_bytes(&shape_bf16);
	struct moe_expert_layout l;
	unsigned char *rec = new_record(&shape_bf16, 1, 3);
	size_t where[5];

	moe_expert_layout_get(MOE_DTYPE_BF16, shape_bf16.d_model, shape_bf16.d_ff, &l);
	where[0] = 0;				/* gate */
	where[1] = l.off[MOE_TENSOR_UP] - 1;	/* gap after gate */
	where[2] = l.off[MOE_TENSOR_DOWN] + 17; /* down */
	where[3] = l.bytes;			/* tail padding */
	where[4] = bytes - 1;			/* last byte */
	for (int w = 0; w < 5; w++) {
		rec[where[w]] ^= 0x10;
		cr_assert_eq(moe_gen_expert_check(rec, bytes, &shape_bf16, SEED, 1, 3), -EBADMSG,
			     "flip at %zu", where[w]);
		rec[where[w]] ^= 0x10;
	}
	free(rec);
}

Test(gen, basic_check_detects_wrong_identity,
     .description = "a record is rejected as another expert, layer or seed")
{
	const size_t bytes = record_bytes(&shape_f32);
	unsigned char *rec = new_record(&shape_f32, 1, 3);

	cr_assert_eq(moe_gen_expert_check(rec, bytes, &shape_f32, SEED, 1, 4), -EBADMSG);
	cr_assert_eq(moe_gen_expert_check(rec, bytes, &shape_f32, SEED, 2, 3), -EBADMSG);
	cr_assert_eq(moe_gen_expert_check(rec, bytes, &shape_f32, SEED + 1, 1, 3), -EBADMSG);
	free(rec);
}

Test(gen, basic_layout_aligned_and_disjoint,
     .description =
	 "tensors start at multiples of 256 bytes, in gate, up, down order, without overlap")
{
	const uint32_t dims[][2] = {{8, 8}, {64, 40}, {2048, 1024}, {4096, 14336}, {1024, 1400}};

	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
		for (uint32_t dtype = MOE_DTYPE_BF16; dtype <= MOE_DTYPE_F32; dtype++) {
			const uint64_t tensor =
			    (uint64_t)dims[d][0] * dims[d][1] * moe_dtype_bytes(dtype);
			struct moe_expert_layout l;

			moe_expert_layout_get(dtype, dims[d][0], dims[d][1], &l);
			cr_assert_eq(l.off[MOE_TENSOR_GATE], 0);
			for (int t = 0; t < MOE_TENSOR_COUNT; t++)
				cr_assert_eq(l.off[t] % MOE_TENSOR_ALIGN, 0);
			cr_assert_geq(l.off[MOE_TENSOR_UP], tensor);
			cr_assert_geq(l.off[MOE_TENSOR_DOWN], l.off[MOE_TENSOR_UP] + tensor);
			cr_assert_lt(l.off[MOE_TENSOR_UP], tensor + MOE_TENSOR_ALIGN);
			cr_assert_eq(l.bytes, l.off[MOE_TENSOR_DOWN] + tensor);
		}
	}
}

Test(
    gen, bad_input_bad_shape_rejected,
    .description =
	"unknown dtype, zero dimension or one not a multiple of 8 gives -EINVAL and writes nothing")
{
	const struct moe_ffn_shape bad[] = {
	    {0, 64, 40},
	    {7, 64, 40},
	    {MOE_DTYPE_BF16, 0, 40},
	    {MOE_DTYPE_BF16, 64, 0},
	    {MOE_DTYPE_F32, 60, 40},
	    {MOE_DTYPE_F32, 64, 44},
	};
	unsigned char buf[64];

	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
		memset(buf, 0xa5, sizeof(buf));
		cr_assert_eq(moe_gen_expert(buf, sizeof(buf), &bad[b], SEED, 0, 0), -EINVAL,
			     "shape %zu", b);
		cr_assert_eq(moe_gen_expert_check(buf, sizeof(buf), &bad[b], SEED, 0, 0), -EINVAL);
		cr_assert_eq(buf[0], 0xa5);
	}
}

Test(gen, bad_input_short_buffer_rejected,
     .description = "a buffer smaller than the layout gives -ENOSPC and is left alone")
{
	struct moe_expert_layout l;
	unsigned char *buf;

	moe_expert_layout_get(MOE_DTYPE_BF16, shape_bf16.d_model, shape_bf16.d_ff, &l);
	buf = malloc(l.bytes);
	cr_assert_not_null(buf);
	memset(buf, 0xa5, l.bytes);
	cr_assert_eq(moe_gen_expert(buf, l.bytes - 1, &shape_bf16, SEED, 0, 0), -ENOSPC);
	cr_assert_eq(buf[0], 0xa5);
	cr_assert_eq(moe_gen_expert_check(buf, l.bytes - 1, &shape_bf16, SEED, 0, 0), -ENOSPC);
	cr_assert_eq(moe_gen_expert(buf, l.bytes, &shape_bf16, SEED, 0, 0), 0);
	free(buf);
}
