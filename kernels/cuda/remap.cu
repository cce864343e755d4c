/* moe_remap for CUDA: see kernels/moe_kernels.h for its launch. */
#include "cuda/moe_cuda.cuh"
#include "device/remap_body.h"

MOE_KERNEL(moe_remap, MOE_REMAP_THREADS)(struct moe_remap_args args)
{
	__shared__ struct moe_remap_shared sh;

	moe_dev_remap(args, sh);
}
