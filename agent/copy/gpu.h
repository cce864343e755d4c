/* SPDX-License-Identifier: MIT */
/*
 * The CUDA and ROCm copy engines of moecached (agent/copy/cuda.c,
 * agent/copy/rocm.c), with the calls that tests and tools/gpu-check
 * use beside the ops table.
 */
#ifndef MOECACHE_GPU_BACKEND_H
#define MOECACHE_GPU_BACKEND_H

#include <stdint.h>

#include "backend_impl.h"
#include "lib/gpu/common.h"

extern const struct agent_backend_ops agent_cuda_backend;
extern const struct agent_backend_ops agent_rocm_backend;

/*
 * The ops' create with explicit GPU parameters (params NULL: defaults and
 * the environment, as the ops' create does without them). On failure err
 * (may be NULL) says why, as the log does.
 */
int agent_cuda_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen);
int agent_rocm_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen);

/* The device address of a slot in this process, or 0 before a bank exists. */
uint64_t agent_cuda_backend_slot_addr(void *priv, uint32_t slot);
uint64_t agent_rocm_backend_slot_addr(void *priv, uint32_t slot);
/* The device the bank lives on (CUDA ordinal, KFD GPU index), or -1 before a bank exists. */
int agent_cuda_backend_device(const void *priv);
int agent_rocm_backend_device(const void *priv);
/*
 * For checks: copies bytes of a slot back into host memory dst with the
 * SDMA engine and waits (VRAM is not CPU-visible). 0 or -errno.
 */
int agent_rocm_backend_read_slot(void *priv, uint32_t slot, void *dst, uint64_t bytes);
/* The last error in words ("" if none). */
const char *agent_cuda_backend_error(const void *priv);
const char *agent_rocm_backend_error(const void *priv);

#endif /* MOECACHE_GPU_BACKEND_H */
