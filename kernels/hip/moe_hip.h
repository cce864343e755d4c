/*
 * The HIP side of the device primitives that the kernel bodies in kernels/device/ are
 * written against (kernels/cuda/moe_cuda.cuh is the CUDA side). Built with
 * -nogpulib: only clang's amdgcn builtins and __atomic builtins, no device
 * library calls, and with or without the HIP headers (-nogpuinc).
 */
#ifndef MOE_HIP_H
#define MOE_HIP_H

/* The FFN order must not change: no multiply-add contraction (moe_numerics.h). */
#pragma clang fp contract(off)

#include <stdint.h>

#ifndef __host__
#define __host__ __attribute__((host))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif

#include "moe_kernels.h"

#if defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != 32
#error "the kernels reduce over 32 lanes: build for wave32 (-mno-wavefrontsize64)"
#endif

#define MOE_DEV static __device__ inline __attribute__((always_inline))
#define MOE_KERNEL(name, threads)                                                                  \
	extern "C" __global__                                                                      \
	    __attribute__((amdgpu_flat_work_group_size(threads, threads))) void name

struct __attribute__((aligned(16))) moe_u32x4 {
	uint32_t x, y, z, w;
};

MOE_DEV uint32_t moe_dev_thread(void)
{
	return __builtin_amdgcn_workitem_id_x();
}

/* From the dispatch packet (hsa_kernel_dispatch_packet_t: workgroup_size_x/y/z at bytes 4..9). */
MOE_DEV uint32_t moe_dev_block_threads(void)
{
	const uint16_t *p = (const uint16_t *)__builtin_amdgcn_dispatch_ptr();

	return (uint32_t)p[2] * p[3] * p[4];
}

MOE_DEV uint32_t moe_dev_block_x(void)
{
	return __builtin_amdgcn_workgroup_id_x();
}

MOE_DEV uint32_t moe_dev_block_y(void)
{
	return __builtin_amdgcn_workgroup_id_y();
}

MOE_DEV void moe_dev_sync(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
	__builtin_amdgcn_s_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

/* Within one wave32: every lane takes part, the kernels keep waves converged. */
MOE_DEV float moe_dev_shfl_xor(float v, uint32_t off)
{
	const uint32_t lane = __builtin_amdgcn_mbcnt_lo(~0u, 0u);
	int bits;

	__builtin_memcpy(&bits, &v, sizeof(bits));
	bits = __builtin_amdgcn_ds_bpermute((int)((lane ^ off) << 2), bits);
	__builtin_memcpy(&v, &bits, sizeof(v));
	return v;
}

MOE_DEV uint32_t moe_dev_shared_or(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
}

MOE_DEV uint32_t moe_dev_shared_add(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

/* The ring lives in host memory that the host reads: system scope (clang's default). */
MOE_DEV uint32_t moe_dev_system_cas(uint32_t *p, uint32_t expected, uint32_t v)
{
	__atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return expected;
}

MOE_DEV void moe_dev_system_add(uint32_t *p, uint32_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

MOE_DEV uint32_t moe_dev_load_volatile(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

MOE_DEV void moe_dev_store_volatile(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

MOE_DEV void moe_dev_fence_system(void)
{
	__builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "");
}

MOE_DEV struct moe_u32x4 moe_dev_load16(const void *p)
{
	return *(const struct moe_u32x4 *)p;
}

#endif /* MOE_HIP_H */
