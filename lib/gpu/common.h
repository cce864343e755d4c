/* SPDX-License-Identifier: MIT */
/*
 * What the CUDA and ROCm backends share: bank geometry, device selection,
 * the per-device byte budget, and finding the host mapping a copy reads
 * from (it is registered with the GPU driver once, as a whole).
 */
#ifndef MOECACHE_GPU_COMMON_H
#define MOECACHE_GPU_COMMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_GPU_MAX_DEVICES 64
/* Copy streams (CUDA) or SDMA queues (ROCm) per bank: at least two, so copies overlap. */
#define MC_GPU_MIN_QUEUES 2
#define MC_GPU_MAX_QUEUES 8

/*
 * Slot stride and bank size: each slot starts on a multiple of align (the
 * GPU allocation granularity, a power of two), the bank is a whole number
 * of align. -EINVAL for a zero size or an align that is not a power of
 * two, -EOVERFLOW if the bank would not fit in 64 bits.
 */
int mc_gpu_bank_geometry(uint64_t expert_bytes, uint32_t n_slots, uint64_t align,
			 uint64_t *slot_stride, uint64_t *bank_bytes);

/*
 * Candidate devices for a pool's bank from a spec (config "gpu_devices"):
 * a comma-separated list of "auto" or "all" (every visible device), an
 * ordinal "N", or "POOL:N" (that pool's bank goes on N). A POOL:N entry
 * naming this pool wins; else the plain ordinals; else every device.
 * NULL or "" is "auto". -EINVAL on bad syntax, -ENODEV for an ordinal
 * >= n_visible or no device at all; err says which.
 */
int mc_gpu_devices_parse(const char *spec, const char *pool, uint32_t n_visible, uint32_t *devs,
			 uint32_t *n_devs, char *err, size_t errlen);

struct mc_gpu_candidate {
	uint32_t device;
	uint64_t room;	     /* budget left on it (UINT64_MAX: no budget) */
	uint64_t free_bytes; /* free device memory now */
};

/*
 * The candidate for a bank of need bytes: one with room and free memory
 * for it, the most room first, then the most free memory, then the first
 * listed. Returns its index, or -ENOSPC if none fits.
 */
int mc_gpu_pick(const struct mc_gpu_candidate *c, uint32_t n, uint64_t need);

/*
 * A per-device byte budget shared by the pools of one agent: banks reserve
 * their bytes on their device when created and give them back when
 * destroyed. Thread-safe.
 */
struct mc_gpu_budget {
	pthread_mutex_t lock;
	uint64_t limit; /* per device; 0: no limit */
	uint64_t used[MC_GPU_MAX_DEVICES];
};

int mc_gpu_budget_init(struct mc_gpu_budget *b, uint64_t limit_per_device);
void mc_gpu_budget_destroy(struct mc_gpu_budget *b);
/* -ENOSPC if bytes do not fit in what is left on device, -EINVAL for a bad device. */
int mc_gpu_budget_reserve(struct mc_gpu_budget *b, uint32_t device, uint64_t bytes);
void mc_gpu_budget_release(struct mc_gpu_budget *b, uint32_t device, uint64_t bytes);
/* Bytes left on device; UINT64_MAX without a limit. */
uint64_t mc_gpu_budget_room(struct mc_gpu_budget *b, uint32_t device);

/*
 * What a GPU backend needs beyond struct agent_backend_config. Every
 * field may be left zero: defaults are "auto", no budget, the host
 * mapping found from the first copy's source, the default library.
 */
struct mc_gpu_params {
	const char *devices;	      /* spec for mc_gpu_devices_parse() */
	uint64_t device_budget;	      /* bytes a bank may take per device; 0: no limit */
	struct mc_gpu_budget *budget; /* shared accounting; NULL: device_budget per bank */
	const void *host_base;	      /* the pool's host region in this process */
	uint64_t host_size;
	const char *library; /* a driver library to dlopen instead of the default */
	uint32_t queues;     /* copy streams or SDMA queues; 0: from copy_threads */
};

/* Environment names the GPU backends read when the agent passes no parameters. */
#define MC_GPU_DEVICES_ENV "MOECACHE_GPU_DEVICES"
#define MC_GPU_BUDGET_ENV "MOECACHE_GPU_BUDGET_MB"

/* Fills unset fields of p from the environment (devices, per-bank budget). */
void mc_gpu_params_from_env(struct mc_gpu_params *p);

/* The number of queues for copy_threads (clamped to [MIN, MAX]). */
uint32_t mc_gpu_queue_count(const struct mc_gpu_params *p, uint32_t copy_threads);

/*
 * The mapping of this process that holds [p, p + len), from
 * /proc/self/maps: -ENOENT if there is none (or it spans two mappings).
 */
int mc_gpu_find_mapping(const void *p, size_t len, uintptr_t *start, size_t *size);

/* A set of host ranges already registered with the GPU driver. */
struct mc_gpu_range {
	uintptr_t start;
	size_t size;
	uint64_t device_addr; /* where the GPU sees start (ROCm); 0 if the same as start */
	bool registered;      /* false: registration failed, copies go unpinned (slower) */
};

struct mc_gpu_ranges {
	struct mc_gpu_range *items;
	uint32_t n, cap;
};

/* The range holding [p, p + len), or NULL. */
const struct mc_gpu_range *mc_gpu_ranges_find(const struct mc_gpu_ranges *r, const void *p,
					      size_t len);
int mc_gpu_ranges_add(struct mc_gpu_ranges *r, uintptr_t start, size_t size, uint64_t device_addr,
		      bool registered);
void mc_gpu_ranges_free(struct mc_gpu_ranges *r);

/* Monotonic time in nanoseconds. */
uint64_t mc_gpu_now_ns(void);

#endif /* MOECACHE_GPU_COMMON_H */
