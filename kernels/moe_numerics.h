/*
 * The scalar numerics of the expert FFN, one definition for the C
 * reference, CUDA and HIP. Every operation is a separately rounded IEEE
 * round-to-nearest-even fp32 operation, never contracted into an FMA and
 * never flushing denormals, so that the same inputs give the same bits on
 * every target:
 *   - C: kernels/ is built with -ffp-contract=off;
 *   - CUDA: the _rn intrinsics, which nvcc never contracts;
 *   - HIP: #pragma clang fp contract(off) (kernels/hip/moe_hip.h).
 */
#ifndef MOE_NUMERICS_H
#define MOE_NUMERICS_H

#include "moe_kernels.h"

#if defined(__CUDA_ARCH__)
#define MOE_FADD(a, b) __fadd_rn((a), (b))
#define MOE_FMUL(a, b) __fmul_rn((a), (b))
#define MOE_FDIV(a, b) __fdiv_rn((a), (b))
#else
#define MOE_FADD(a, b) ((a) + (b))
#define MOE_FMUL(a, b) ((a) * (b))
#define MOE_FDIV(a, b) ((a) / (b))
#endif

/* exp: Cody-Waite reduction by ln 2, degree-7 Taylor polynomial, 2^n scale. */
#define MOE_EXP_LOG2E 1.44269504088896341f
#define MOE_EXP_LN2_HI 0.693145751953125f /* few bits: n * hi is exact */
#define MOE_EXP_LN2_LO 1.42860682030941723212e-6f
#define MOE_EXP_ROUND 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */
#define MOE_EXP_MAX 88.0f	  /* above: +inf; keeps 2^n normal */
#define MOE_EXP_MIN -87.0f	  /* below: 0 */
/* 1/k! as literals: no compiler folds a division differently. */
#define MOE_EXP_C3 1.66666666666666666667e-1f
#define MOE_EXP_C4 4.16666666666666666667e-2f
#define MOE_EXP_C5 8.33333333333333333333e-3f
#define MOE_EXP_C6 1.38888888888888888889e-3f
#define MOE_EXP_C7 1.98412698412698412698e-4f

MOE_HD static inline uint32_t moe_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
	return __float_as_uint(f);
#else
	uint32_t u;

	__builtin_memcpy(&u, &f, sizeof(u));
	return u;
#endif
}

MOE_HD static inline float moe_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
	return __uint_as_float(u);
#else
	float f;

	__builtin_memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

/* bf16 is the high half of an fp32: widening is exact. */
MOE_HD static inline float moe_bf16_bits_to_f32(uint16_t b)
{
	return moe_f32_from_bits((uint32_t)b << 16);
}

/* Round to nearest, ties to even; NaN stays NaN (quiet), overflow gives inf. */
MOE_HD static inline uint16_t moe_f32_to_bf16_bits(float f)
{
	uint32_t u = moe_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

MOE_HD static inline float moe_expf(float x)
{
	float t, n, r, p;

	if (x != x)
		return x;
	if (x > MOE_EXP_MAX)
		return moe_f32_from_bits(0x7f800000u);
	if (x < MOE_EXP_MIN)
		return 0.0f;
	t = MOE_FADD(MOE_FMUL(x, MOE_EXP_LOG2E), MOE_EXP_ROUND);
	n = MOE_FADD(t, -MOE_EXP_ROUND);
	r = MOE_FADD(x, -MOE_FMUL(n, MOE_EXP_LN2_HI));
	r = MOE_FADD(r, -MOE_FMUL(n, MOE_EXP_LN2_LO));
	p = MOE_EXP_C7;
	p = MOE_FADD(MOE_FMUL(p, r), MOE_EXP_C6);
	p = MOE_FADD(MOE_FMUL(p, r), MOE_EXP_C5);
	p = MOE_FADD(MOE_FMUL(p, r), MOE_EXP_C4);
	p = MOE_FADD(MOE_FMUL(p, r), MOE_EXP_C3);
	p = MOE_FADD(MOE_FMUL(p, r), 0.5f);
	p = MOE_FADD(MOE_FMUL(p, r), 1.0f);
	p = MOE_FADD(MOE_FMUL(p, r), 1.0f);
	return MOE_FMUL(p, moe_f32_from_bits((uint32_t)((int32_t)n + 127) << 23));
}

/* silu(g) = g / (1 + exp(-g)) */
MOE_HD static inline float moe_silu(float g)
{
	return MOE_FDIV(g, MOE_FADD(1.0f, moe_expf(-g)));
}

/* One step of a dot product's lane partial sum: p + w * v. */
MOE_HD static inline float moe_dot_step(float p, float w, float v)
{
	return MOE_FADD(p, MOE_FMUL(w, v));
}

#endif /* MOE_NUMERICS_H */
