/* SPDX-License-Identifier: MIT */
/*
 * Client side of a GPU bank, part of libmoecache: importing the bank that
 * BANK_GET hands out into the caller's GPU address space (lib/gpu/bank_cuda.c,
 * lib/gpu/bank_rocm.c), the device address of each slot, and pins that are
 * dropped only once the GPU work reading them has run.
 *
 * The moecache_bank_* calls for GPU clients are declared in
 * lib/include/libmoecache.h.
 */
#ifndef MOECACHE_GPU_BANK_H
#define MOECACHE_GPU_BANK_H

#include <pthread.h>
#include <stdint.h>

#include <libmoecache.h>

#include "release_queue.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- inside libmoecache ---- */

/* Import hooks for lib/bank.c's backend table (struct mc_bank_backend). */
int mc_cuda_bank_import(struct moecache_bank_map *b);
void mc_cuda_bank_unimport(struct moecache_bank_map *b);
int mc_rocm_bank_import(struct moecache_bank_map *b);
void mc_rocm_bank_unimport(struct moecache_bank_map *b);

struct mc_gpu_bank;

/* What a backend adds to the common GPU bank. */
struct mc_gpu_bank_ops {
	/* 0, or -EBUSY (with g->err set) while stream is capturing. NULL: never. */
	int (*check_stream)(struct mc_gpu_bank *g, void *stream);
	/* A marker that passes when the work queued on stream so far has run. NULL: none. */
	int (*marker)(struct mc_gpu_bank *g, void *stream, void **event);
	/* 1 passed, 0 not yet, -errno failed. */
	int (*query)(struct mc_gpu_bank *g, void *event);
	/* Blocks until it passes: 0 or -errno. */
	int (*wait)(struct mc_gpu_bank *g, void *event);
	void (*put)(struct mc_gpu_bank *g, void *event);
};

/*
 * The state every imported GPU bank has; a backend's own state embeds it
 * first, and moecache_bank_map.base points to it.
 */
struct mc_gpu_bank {
	uint32_t backend;
	uint32_t n_slots;
	uint64_t dev_base; /* device address of slot 0 */
	uint64_t slot_stride;
	const struct mc_gpu_bank_ops *ops;
	char err[256];
	pthread_mutex_t lock; /* the release queue and err */
	struct mc_release_queue rq;
	struct moecache *mc; /* whose pins the queue holds */
};

/* Records (or, with NULL, clears) this thread's import error. */
void mc_gpu_set_import_error(const char *msg);

/* Sets up g for a bank of b's geometry. */
int mc_gpu_bank_init(struct mc_gpu_bank *g, const struct moecache_bank_map *b,
		     const struct mc_gpu_bank_ops *ops);
/* Frees the queue: pins still queued are left to the file (dropped at close). */
void mc_gpu_bank_fini(struct mc_gpu_bank *g);

#ifdef __cplusplus
}
#endif

#endif /* MOECACHE_GPU_BANK_H */
