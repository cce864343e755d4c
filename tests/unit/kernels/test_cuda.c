/*
 * The CUDA kernels of the embedded fatbin against the C references. The
 * driver is loaded with dlopen: without nvcc at build time, without
 * libcuda or without a GPU every test here is skipped.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "helpers.h"
#include "moe_kernels_image.h"
#include "ref/moe_ref.h"

/* The few driver API types used here (cuda.h is not needed to build). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

struct cuda {
	void *dl;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUresult (*Init)(unsigned int flags);
	CUresult (*DeviceGetCount)(int *count);
	CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice dev);
	CUresult (*CtxSetCurrent)(CUcontext ctx);
	CUresult (*CtxSynchronize)(void);
	CUresult (*ModuleLoadData)(CUmodule *mod, const void *image);
	CUresult (*ModuleUnload)(CUmodule mod);
	CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
	CUresult (*MemAlloc)(CUdeviceptr *p, size_t bytes);
	CUresult (*MemFree)(CUdeviceptr p);
	CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
	CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
	CUresult (*MemHostAlloc)(void **p, size_t bytes, unsigned int flags);
	CUresult (*MemFreeHost)(void *p);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *dp, void *p, unsigned int flags);
	CUresult (*LaunchKernel)(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
				 unsigned int bx, unsigned int by, unsigned int bz,
				 unsigned int shared_bytes, CUstream stream, void **params,
				 void **extra);
};

#define CU_OK(call) cr_assert_eq((call), 0, "%s failed", #call)

static bool cuda_sym(struct cuda *cu, void *fn_ptr, const char *name)
{
	void *sym = dlsym(cu->dl, name);

	memcpy(fn_ptr, &sym, sizeof(sym));
	return sym != NULL;
}

/* false: nothing to test on (no image, no driver or no device). */
static bool cuda_open(struct cuda *cu)
{
	const void *image;
	size_t size;
	int count = 0;
	bool ok = true;

	memset(cu, 0, sizeof(*cu));
	if (moe_kernels_cuda_image(&image, &size))
		return false;
	cu->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->dl)
		return false;
	ok &= cuda_sym(cu, &cu->Init, "cuInit");
	ok &= cuda_sym(cu, &cu->DeviceGetCount, "cuDeviceGetCount");
	ok &= cuda_sym(cu, &cu->DeviceGet, "cuDeviceGet");
	ok &= cuda_sym(cu, &cu->DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	ok &= cuda_sym(cu, &cu->DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	ok &= cuda_sym(cu, &cu->CtxSetCurrent, "cuCtxSetCurrent");
	ok &= cuda_sym(cu, &cu->CtxSynchronize, "cuCtxSynchronize");
	ok &= cuda_sym(cu, &cu->ModuleLoadData, "cuModuleLoadData");
	ok &= cuda_sym(cu, &cu->ModuleUnload, "cuModuleUnload");
	ok &= cuda_sym(cu, &cu->ModuleGetFunction, "cuModuleGetFunction");
	ok &= cuda_sym(cu, &cu->MemAlloc, "cuMemAlloc_v2");
	ok &= cuda_sym(cu, &cu->MemFree, "cuMemFree_v2");
	ok &= cuda_sym(cu, &cu->MemcpyHtoD, "cuMemcpyHtoD_v2");
	ok &= cuda_sym(cu, &cu->MemcpyDtoH, "cuMemcpyDtoH_v2");
	ok &= cuda_sym(cu, &cu->MemHostAlloc, "cuMemHostAlloc");
	ok &= cuda_sym(cu, &cu->MemFreeHost, "cuMemFreeHost");
	ok &= cuda_sym(cu, &cu->MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
	ok &= cuda_sym(cu, &cu->LaunchKernel, "cuLaunchKernel");
	cr_assert(ok, "libcuda.so.1 lacks a driver API entry point");
	if (cu->Init(0) || cu->DeviceGetCount(&count) || count < 1) {
		dlclose(cu->dl);
		return false;
	}
	CU_OK(cu->DeviceGet(&cu->dev, 0));
	CU_OK(cu->DevicePrimaryCtxRetain(&cu->ctx, cu->dev));
	CU_OK(cu->CtxSetCurrent(cu->ctx));
	CU_OK(cu->ModuleLoadData(&cu->mod, image));
	return true;
}

static void cuda_close(struct cuda *cu)
{
	CU_OK(cu->ModuleUnload(cu->mod));
	CU_OK(cu->DevicePrimaryCtxRelease(cu->dev));
	dlclose(cu->dl);
}

static CUfunction cuda_fn(struct cuda *cu, const char *name)
{
	CUfunction fn;

	CU_OK(cu->ModuleGetFunction(&fn, cu->mod, name));
	return fn;
}

static CUdeviceptr cuda_upload(struct cuda *cu, const void *src, size_t bytes)
{
	CUdeviceptr p;

	CU_OK(cu->MemAlloc(&p, bytes));
	if (src)
		CU_OK(cu->MemcpyHtoD(p, src, bytes));
	return p;
}

static void cuda_launch(struct cuda *cu, CUfunction fn, const uint32_t grid[3], uint32_t threads,
			void *args)
{
	void *params[] = {args};

	CU_OK(
	    cu->LaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, 0, NULL, params, NULL));
}

/* A ring in pinned host memory that the device writes through its mapping. */
static struct moe_miss_ring *cuda_ring(struct cuda *cu, uint32_t capacity, CUdeviceptr *dev)
{
	void *p;

	CU_OK(cu->MemHostAlloc(&p, moe_miss_ring_bytes(capacity),
			       CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
	cr_assert_eq(moe_miss_ring_init(p, moe_miss_ring_bytes(capacity), capacity), 0);
	CU_OK(cu->MemHostGetDevicePointer(dev, p, 0));
	return p;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct moe_miss_entry *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return x->expert < y->expert ? -1 : x->expert > y->expert;
}

/* Pop everything, sorted by (layer, expert); returns the count. */
static size_t drain(struct moe_miss_ring *ring, struct moe_miss_entry *out, size_t max)
{
	size_t n = 0;

	while (n < max && moe_miss_ring_pop(ring, &out[n]) == 0)
		n++;
	qsort(out, n, sizeof(*out), entry_cmp);
	return n;
}

enum { R_LAYERS = 3, R_BEGIN = 8, R_END = 72, R_LOCAL = R_END - R_BEGIN, R_TOKENS = 40, R_K = 6 };

/* About half the experts resident; ids drawn from 4 below to 4 above the local range. */
static void remap_inputs(uint32_t *map, uint32_t *experts)
{
	const uint64_t s = moe_gen_stream(7, 0, 0, 0);

	for (uint32_t i = 0; i < R_LAYERS * R_LOCAL; i++)
		map[i] = moe_gen_value(s, i) > 0 ? (i * 7) % 97 : MOECACHE_NONE;
	for (uint32_t i = 0; i < R_TOKENS * R_K; i++) {
		const float v = moe_gen_value(s, 10000 + i) * 32.0f; /* (-1, 1) */

		experts[i] = (uint32_t)(R_BEGIN - 4 + (v + 1.0f) / 2.0f * (R_LOCAL + 8));
	}
}

/* The device ring and the reference ring after one remap call of each. */
static void remap_both(struct cuda *cu, uint32_t capacity, uint32_t *slots_gpu, uint32_t *slots_ref,
		       struct moe_miss_ring **gpu_ring, struct moe_miss_ring **ref_ring)
{
	uint32_t map[R_LAYERS * R_LOCAL], experts[R_TOKENS * R_K];
	CUdeviceptr ring_dev, map_dev, experts_dev, slots_dev;
	struct moe_remap_args a = {
	    .n_layers = R_LAYERS,
	    .expert_begin = R_BEGIN,
	    .expert_end = R_END,
	    .layer = 1,
	    .n_tokens = R_TOKENS,
	    .top_k = R_K,
	};
	const uint32_t grid[3] = {1, 1, 1};

	remap_inputs(map, experts);
	*gpu_ring = cuda_ring(cu, capacity, &ring_dev);
	map_dev = cuda_upload(cu, map, sizeof(map));
	experts_dev = cuda_upload(cu, experts, sizeof(experts));
	slots_dev = cuda_upload(cu, NULL, sizeof(experts));
	a.map = map_dev;
	a.experts = experts_dev;
	a.slots = slots_dev;
	a.ring = ring_dev;
	cr_assert_eq(moe_remap_args_check(&a), 0);
	cuda_launch(cu, cuda_fn(cu, "moe_remap"), grid, MOE_REMAP_THREADS, &a);
	CU_OK(cu->CtxSynchronize());
	CU_OK(cu->MemcpyDtoH(slots_gpu, slots_dev, sizeof(experts)));
	CU_OK(cu->MemFree(map_dev));
	CU_OK(cu->MemFree(experts_dev));
	CU_OK(cu->MemFree(slots_dev));

	*ref_ring = malloc(moe_miss_ring_bytes(capacity));
	cr_assert_not_null(*ref_ring);
	cr_assert_eq(moe_miss_ring_init(*ref_ring, moe_miss_ring_bytes(capacity), capacity), 0);
	a.map = (uintptr_t)map;
	a.experts = (uintptr_t)experts;
	a.slots = (uintptr_t)slots_ref;
	a.ring = (uintptr_t)*ref_ring;
	cr_assert_eq(moe_ref_remap(&a), 0);
}

Test(cuda, basic_remap_matches_reference,
     .description = "the remap kernel writes the reference's slots and reports the same misses and "
		    "counters through a host-mapped ring")
{
	struct moe_miss_entry got[256], want[256];
	uint32_t slots_gpu[R_TOKENS * R_K], slots_ref[R_TOKENS * R_K];
	struct moe_miss_ring *gpu_ring, *ref_ring;
	struct cuda cu;
	size_t n_got, n_want;

	if (!cuda_open(&cu))
		cr_skip_test("no CUDA image, driver or device");
	remap_both(&cu, 256, slots_gpu, slots_ref, &gpu_ring, &ref_ring);
	cr_assert_eq(memcmp(slots_gpu, slots_ref, sizeof(slots_gpu)), 0);
	cr_assert_gt(ref_ring->head, 0, "the inputs must miss");
	cr_assert_gt(ref_ring->out_of_range, 0, "the inputs must hold foreign ids");
	cr_assert_eq(gpu_ring->head, ref_ring->head);
	cr_assert_eq(gpu_ring->overflow, ref_ring->overflow);
	cr_assert_eq(gpu_ring->out_of_range, ref_ring->out_of_range);
	n_got = drain(gpu_ring, got, 256);
	n_want = drain(ref_ring, want, 256);
	cr_assert_eq(n_got, n_want);
	for (size_t i = 0; i < n_got; i++) {
		cr_assert_eq(got[i].layer, want[i].layer);
		cr_assert_eq(got[i].expert, want[i].expert);
	}
	CU_OK(cu.MemFreeHost(gpu_ring));
	free(ref_ring);
	cuda_close(&cu);
}

Test(cuda, basic_remap_ring_overflow_counted,
     .description = "with a small ring the kernel fills it with distinct real misses and counts "
		    "the rest as overflow")
{
	struct moe_miss_entry got[8], all[256];
	uint32_t slots_gpu[R_TOKENS * R_K], slots_ref[R_TOKENS * R_K];
	struct moe_miss_ring *gpu_ring, *ref_ring, *big_ring, *unused;
	struct cuda cu;
	size_t n_got, n_all;

	if (!cuda_open(&cu))
		cr_skip_test("no CUDA image, driver or device");
	remap_both(&cu, 8, slots_gpu, slots_ref, &gpu_ring, &ref_ring);
	cr_assert_gt(ref_ring->overflow, 0, "the inputs must overflow 8 entries");
	cr_assert_eq(gpu_ring->head, 8);
	cr_assert_eq(gpu_ring->overflow, ref_ring->overflow);
	n_got = drain(gpu_ring, got, 8);
	cr_assert_eq(n_got, 8);
	CU_OK(cu.MemFreeHost(gpu_ring));
	/* every miss, from a run with room for all of them */
	remap_both(&cu, 256, slots_gpu, slots_ref, &unused, &big_ring);
	n_all = drain(big_ring, all, 256);
	for (size_t i = 0; i < n_got; i++) {
		cr_assert_not_null(bsearch(&got[i], all, n_all, sizeof(all[0]), entry_cmp));
		if (i)
			cr_assert_neq(entry_cmp(&got[i - 1], &got[i]), 0, "duplicate entry");
	}
	CU_OK(cu.MemFreeHost(unused));
	free(ref_ring);
	free(big_ring);
	cuda_close(&cu);
}

/* Device copies of a case's arrays, with an argument block that names them. */
struct ffn_dev {
	struct moe_ffn_args a;
	CUdeviceptr bank, x, slots, weights, h, y;
};

static void ffn_dev_upload(struct cuda *cu, const struct ffn_case *c, struct ffn_dev *d)
{
	const uint64_t n = (uint64_t)c->a.n_tokens * c->a.top_k;

	d->bank = cuda_upload(cu, c->bank, c->a.slot_stride * c->a.n_slots);
	d->x = cuda_upload(cu, c->x, (uint64_t)c->a.n_tokens * c->a.d_model * sizeof(float));
	d->slots = cuda_upload(cu, c->slots, n * sizeof(uint32_t));
	d->weights = cuda_upload(cu, c->weights, n * sizeof(float));
	d->h = cuda_upload(cu, NULL, moe_ffn_scratch_bytes(&c->a));
	d->y = cuda_upload(cu, c->y, (uint64_t)c->a.n_tokens * c->a.d_model * sizeof(float));
	d->a = c->a;
	d->a.bank = d->bank;
	d->a.x = d->x;
	d->a.slots = d->slots;
	d->a.weights = d->weights;
	d->a.h = d->h;
	d->a.y = d->y;
	cr_assert_eq(moe_ffn_args_check(&d->a), 0);
}

static void ffn_dev_free(struct cuda *cu, struct ffn_dev *d)
{
	const CUdeviceptr all[] = {d->bank, d->x, d->slots, d->weights, d->h, d->y};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		CU_OK(cu->MemFree(all[i]));
}

static void ffn_dev_launch(struct cuda *cu, struct ffn_dev *d, CUfunction up, CUfunction down)
{
	uint32_t grid[3];

	moe_ffn_up_grid(&d->a, grid);
	cuda_launch(cu, up, grid, MOE_FFN_THREADS, &d->a);
	moe_ffn_down_grid(&d->a, grid);
	cuda_launch(cu, down, grid, MOE_FFN_THREADS, &d->a);
}

/*
 * GPU against reference: the same order and the same IEEE operations, so
 * the bits should match; the stated tolerance is 2^-22 (4 ulp) of the
 * magnitude that bounds the rounding error (helpers.h).
 */
static void ffn_matches_reference(uint32_t dtype)
{
	const bool bf16 = dtype == MOE_DTYPE_BF16;
	struct ffn_case c;
	struct ffn_dev d;
	struct cuda cu;
	uint64_t n, same = 0;
	float *y_gpu;
	double *exact, *mag;

	if (!cuda_open(&cu))
		cr_skip_test("no CUDA image, driver or device");
	ffn_case_init(&c, dtype, 1024, 512, 4, 8, 12);
	n = (uint64_t)c.a.n_tokens * c.a.d_model;
	for (uint64_t i = 0; i < n; i++)
		c.y[i] = (float)(i % 5) * 0.25f - 0.5f;
	ffn_dev_upload(&cu, &c, &d);
	ffn_dev_launch(&cu, &d, cuda_fn(&cu, bf16 ? "moe_ffn_up_bf16" : "moe_ffn_up_f32"),
		       cuda_fn(&cu, bf16 ? "moe_ffn_down_bf16" : "moe_ffn_down_f32"));
	CU_OK(cu.CtxSynchronize());
	y_gpu = test_zalloc(n * sizeof(float));
	CU_OK(cu.MemcpyDtoH(y_gpu, d.y, n * sizeof(float)));
	exact = calloc(n, sizeof(double));
	mag = calloc(n, sizeof(double));
	cr_assert(exact && mag);
	cr_assert_eq(naive_ffn(&c.a, exact, mag), 0);
	cr_assert_eq(moe_ref_ffn(&c.a), 0);
	for (uint64_t i = 0; i < n; i++) {
		cr_assert_leq(fabs((double)y_gpu[i] - c.y[i]), ldexp(mag[i], -22),
			      "y[%llu]: gpu %.9g, reference %.9g", (unsigned long long)i, y_gpu[i],
			      c.y[i]);
		same += memcmp(&y_gpu[i], &c.y[i], sizeof(float)) == 0;
	}
	cr_log_info("dtype %u: %llu of %llu outputs bit-identical to the reference", dtype,
		    (unsigned long long)same, (unsigned long long)n);
	free(exact);
	free(mag);
	free(y_gpu);
	ffn_dev_free(&cu, &d);
	ffn_case_fini(&c);
	cuda_close(&cu);
}

Test(cuda, basic_ffn_bf16_matches_reference,
     .description =
	 "the bf16 FFN kernels give the reference's result within 2^-22 of its error magnitude")
{
	ffn_matches_reference(MOE_DTYPE_BF16);
}

Test(cuda, basic_ffn_f32_matches_reference,
     .description =
	 "the fp32 FFN kernels give the reference's result within 2^-22 of its error magnitude")
{
	ffn_matches_reference(MOE_DTYPE_F32);
}

Test(cuda, perf_ffn_bf16_streams_weights,
     .description =
	 "one decode token over 8 OLMoE-sized bf16 experts reads weights at 100 GB/s or more")
{
	enum { SLOTS = 64, K = 8, ITERS = 64 };
	struct ffn_case c;
	struct ffn_dev d;
	struct cuda cu;
	struct timespec t0, t1;
	CUfunction up, down;
	CUdeviceptr all_slots;
	uint32_t slots[ITERS * K];
	struct moe_expert_layout l;
	double seconds, bytes;

	if (!cuda_open(&cu))
		cr_skip_test("no CUDA image, driver or device");
	up = cuda_fn(&cu, "moe_ffn_up_bf16");
	down = cuda_fn(&cu, "moe_ffn_down_bf16");
	ffn_case_init(&c, MOE_DTYPE_BF16, 2048, 1024, 1, K, SLOTS);
	ffn_dev_upload(&cu, &c, &d);
	moe_expert_layout_get(MOE_DTYPE_BF16, 2048, 1024, &l);
	/* each call reads 8 slots that the calls just before did not: no cache reuse */
	for (uint32_t i = 0; i < ITERS * K; i++)
		slots[i] = i % SLOTS;
	all_slots = cuda_upload(&cu, slots, sizeof(slots));
	for (int warm = 0; warm < 2; warm++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (uint32_t it = 0; it < ITERS; it++) {
			d.a.slots = all_slots + (uint64_t)it * K * sizeof(uint32_t);
			ffn_dev_launch(&cu, &d, up, down);
		}
		CU_OK(cu.CtxSynchronize());
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	CU_OK(cu.MemFree(all_slots));
	seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	bytes = (double)ITERS * K * (double)(l.bytes);
	cr_log_info("bf16 FFN, 1 token x %d experts of 2048x1024: %.1f us a call, %.0f GB/s", K,
		    seconds / ITERS * 1e6, bytes / seconds * 1e-9);
	cr_assert_geq(bytes / seconds, 100e9);
	ffn_dev_free(&cu, &d);
	ffn_case_fini(&c);
	cuda_close(&cu);
}
