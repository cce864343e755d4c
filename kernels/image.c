#include <errno.h>

#include "moe_kernels_image.h"

/*
 * The images are pulled in by the assembler (.incbin), the paths coming
 * from kernels/build.mk; 64-byte alignment suits both loaders.
 */
#define MOE_EMBED(sym, path)                                                                       \
	__asm__(".pushsection .rodata." #sym ",\"a\",@progbits\n"                                  \
		".balign 64\n"                                                                     \
		".globl " #sym "_begin\n"                                                          \
		".hidden " #sym "_begin\n" #sym "_begin:\n"                                        \
		".incbin \"" path "\"\n"                                                           \
		".globl " #sym "_end\n"                                                            \
		".hidden " #sym "_end\n" #sym "_end:\n"                                            \
		".popsection\n")

#ifdef MOE_CUDA_FATBIN
MOE_EMBED(moe_kernels_cuda, MOE_CUDA_FATBIN);
extern const unsigned char moe_kernels_cuda_begin[], moe_kernels_cuda_end[];
#endif

#ifdef MOE_HIP_HSACO
MOE_EMBED(moe_kernels_hip, MOE_HIP_HSACO);
extern const unsigned char moe_kernels_hip_begin[], moe_kernels_hip_end[];
#endif

int moe_kernels_cuda_image(const void **image, size_t *size)
{
#ifdef MOE_CUDA_FATBIN
	*image = moe_kernels_cuda_begin;
	*size = (size_t)(moe_kernels_cuda_end - moe_kernels_cuda_begin);
	return 0;
#else
	return -ENOENT;
#endif
}

int moe_kernels_hip_image(const void **image, size_t *size)
{
#ifdef MOE_HIP_HSACO
	*image = moe_kernels_hip_begin;
	*size = (size_t)(moe_kernels_hip_end - moe_kernels_hip_begin);
	return 0;
#else
	return -ENOENT;
#endif
}
