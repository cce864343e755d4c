/* The one translation unit hipcc turns into build/kernels/moe_kernels.hsaco. */
#include "hip/remap.hip"
#include "hip/expert_ffn.hip"
