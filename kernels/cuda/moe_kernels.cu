/* The one translation unit nvcc turns into build/kernels/moe_kernels.fatbin. */
#include "cuda/remap.cu"
#include "cuda/expert_ffn.cu"
