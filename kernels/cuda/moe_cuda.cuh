/*
 * The CUDA side of the device primitives that the kernel bodies in kernels/device/ are
 * written against (kernels/hip/moe_hip.h is the HIP side).
 */
#ifndef MOE_CUDA_CUH
#define MOE_CUDA_CUH

#include <stdint.h>

#include "moe_kernels.h"

#define MOE_DEV static __device__ __forceinline__
#define MOE_KERNEL(name, threads) extern "C" __global__ void __launch_bounds__(threads) name

struct moe_u32x4 {
	uint32_t x, y, z, w;
};

MOE_DEV uint32_t moe_dev_thread(void)
{
	return threadIdx.x;
}

MOE_DEV uint32_t moe_dev_block_threads(void)
{
	return blockDim.x * blockDim.y * blockDim.z;
}

MOE_DEV uint32_t moe_dev_block_x(void)
{
	return blockIdx.x;
}

MOE_DEV uint32_t moe_dev_block_y(void)
{
	return blockIdx.y;
}

MOE_DEV void moe_dev_sync(void)
{
	__syncthreads();
}

/* Every lane of the warp takes part; the kernels keep warps converged. */
MOE_DEV float moe_dev_shfl_xor(float v, uint32_t off)
{
	return __shfl_xor_sync(0xffffffffu, v, off);
}

MOE_DEV uint32_t moe_dev_shared_or(uint32_t *p, uint32_t v)
{
	return atomicOr(p, v);
}

MOE_DEV uint32_t moe_dev_shared_add(uint32_t *p, uint32_t v)
{
	return atomicAdd(p, v);
}

/* The ring lives in host memory that the host reads: system scope. */
MOE_DEV uint32_t moe_dev_system_cas(uint32_t *p, uint32_t expected, uint32_t v)
{
	return atomicCAS_system(p, expected, v);
}

MOE_DEV void moe_dev_system_add(uint32_t *p, uint32_t v)
{
	atomicAdd_system(p, v);
}

MOE_DEV uint32_t moe_dev_load_volatile(const uint32_t *p)
{
	return *(const volatile uint32_t *)p;
}

MOE_DEV void moe_dev_store_volatile(uint32_t *p, uint32_t v)
{
	*(volatile uint32_t *)p = v;
}

MOE_DEV void moe_dev_fence_system(void)
{
	__threadfence_system();
}

/* 16 bytes that stay constant for the whole kernel: the read-only path. */
MOE_DEV struct moe_u32x4 moe_dev_load16(const void *p)
{
	const uint4 v = __ldg((const uint4 *)p);
	struct moe_u32x4 r = {v.x, v.y, v.z, v.w};

	return r;
}

#endif /* MOE_CUDA_CUH */
