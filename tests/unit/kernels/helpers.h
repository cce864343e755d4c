/*
 * Test helpers: a naive double-precision expert FFN with the error bound
 * that the fp32 results are held to, a bank of generated experts, and a
 * whole FFN launch's inputs.
 */
#ifndef TESTS_UNIT_KERNELS_HELPERS_H
#define TESTS_UNIT_KERNELS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "ref/moe_ref.h"

/*
 * y[t][r] = y0[t][r] + sum_k w * down(silu(gate x) * (up x)) in double,
 * from the args' inputs (y0 is what args->y holds), and s[t][r] the
 * magnitude that bounds the fp32 error: |y0| + sum_k |w_k| sum_j |D_rj|
 * (|h_j| + E_j), E_j being the first-order change of h_j when the gate and
 * up dot products move by their absolute sums |G_j||x| and |U_j||x|.
 * y and s hold n_tokens * d_model doubles. 0 or -errno.
 */
int naive_ffn(const struct moe_ffn_args *args, double *y, double *s);

/*
 * The stated tolerance of an fp32 FFN result: |y - y_exact| <= factor * s
 * with factor = (2 L + 16) 2^-24, L = max(d_model, d_ff) / 32 + 6 the
 * longest chain of roundings one term goes through (lane sum, lane tree,
 * product), doubled, plus 16 ulp for exp, the division and the products
 * around silu.
 */
double ffn_tolerance_factor(uint32_t d_model, uint32_t d_ff);

/*
 * n_slots generated records (slot s holds layer 0, expert s + 100, seed)
 * at a page-multiple stride, in one page-aligned allocation for free().
 */
void *test_bank_new(const struct moe_ffn_shape *shape, uint32_t n_slots, uint64_t seed,
		    uint64_t *stride);

/* Zeroed, 64-byte aligned; fails the test when out of memory. */
void *test_zalloc(size_t bytes);

/* One FFN launch's inputs and outputs in host memory; a.* holds their addresses. */
struct ffn_case {
	struct moe_ffn_args a;
	unsigned char *bank;
	uint32_t *slots;
	float *weights, *x, *h, *y;
};

/*
 * n_slots generated experts (test_bank_new, seed FFN_CASE_SEED); slot ids
 * cycle through every slot, then MOECACHE_NONE and n_slots + 1 (outside
 * the bank), so that both get skipped; y starts at 0.
 */
void ffn_case_init(struct ffn_case *c, uint32_t dtype, uint32_t d_model, uint32_t d_ff,
		   uint32_t n_tokens, uint32_t top_k, uint32_t n_slots);
void ffn_case_fini(struct ffn_case *c);

#define FFN_CASE_SEED 0x66666e2d72656621ull

#endif /* TESTS_UNIT_KERNELS_HELPERS_H */
