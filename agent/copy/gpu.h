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
#include "copy_queue.h"
#include "lib/gpu/common.h"

/*
 * What the CUDA and ROCm engines keep the same way, first in each: the
 * engine core, the configuration, the GPU parameters (with their own copy
 * of the device list), the pool's name and the last error in words.
 */
struct agent_gpu_engine {
	struct agent_copy_engine eng; /* first: the shared ops take priv as it */
	struct agent_backend_config cfg;
	struct mc_gpu_params params;
	char pool[MOECACHE_NAME_LEN];
	char devices[256]; /* params.devices points here */
	char err[320];
};

/*
 * Fills g from cfg and params (NULL: defaults; unset fields from the
 * environment) and starts its engine core. 0, or -errno with g->err
 * saying why; agent_copy_engine_fini(&g->eng) is safe either way.
 */
int agent_gpu_engine_init(struct agent_gpu_engine *g, const struct agent_backend_config *cfg,
			  const struct mc_gpu_params *params);
/* The pool's name for the log, or NULL. */
const char *agent_gpu_engine_pool(const struct agent_gpu_engine *g);

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
