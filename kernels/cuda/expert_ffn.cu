/* The expert FFN kernels for CUDA: see kernels/moe_kernels.h for their launch. */
#include "cuda/moe_cuda.cuh"
#include "device/ffn_body.h"

MOE_KERNEL(moe_ffn_up_bf16, MOE_FFN_THREADS)(struct moe_ffn_args args)
{
	moe_dev_ffn_up<MOE_DTYPE_BF16>(args);
}

MOE_KERNEL(moe_ffn_up_f32, MOE_FFN_THREADS)(struct moe_ffn_args args)
{
	moe_dev_ffn_up<MOE_DTYPE_F32>(args);
}

MOE_KERNEL(moe_ffn_down_bf16, MOE_FFN_THREADS)(struct moe_ffn_args args)
{
	moe_dev_ffn_down<MOE_DTYPE_BF16>(args);
}

MOE_KERNEL(moe_ffn_down_f32, MOE_FFN_THREADS)(struct moe_ffn_args args)
{
	moe_dev_ffn_down<MOE_DTYPE_F32>(args);
}
