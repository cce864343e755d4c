/* moe_remap for HIP: see kernels/moe_kernels.h for its launch. */
#include "hip/moe_hip.h"
#include "device/remap_body.h"

MOE_KERNEL(moe_remap, MOE_REMAP_THREADS)(struct moe_remap_args args)
{
	__shared__ struct moe_remap_shared sh;

	moe_dev_remap(args, sh);
}
