/* SPDX-License-Identifier: MIT */
/* libmoecache internals shared by its source files (and its unit tests). */
#ifndef MOECACHE_LIB_MC_INTERNAL_H
#define MOECACHE_LIB_MC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libmoecache.h"

struct moecache {
	int fd;
	uint32_t max_batch; /* from GET_INFO: longest list argument */
	bool attached;
	struct moecache_pool_info pool;
	void *map_base;
	size_t map_len;
	struct moecache_map map;
	void *host_base;
	size_t host_len;
	bool host_writable;
	/* Fast pins (MOECACHE_ATTACH_FAST_PINS): every pin of the handle is here. */
	uint32_t *fast_pins;
	size_t fast_pins_len;
	pthread_mutex_t fast_lock; /* releases and the report buffer */
	struct moecache_access *report;
	uint32_t report_len;
};

/* Hits taken with fast pins are reported to the driver in batches this long. */
#define MC_REPORT_BATCH 256

/*
 * Who calls whom, without a circle: client.c (the acquire path) and
 * handle.c call the pin mechanisms, fastpin.c and kpin.c; fastpin.c calls
 * kpin.c for a layer with a miss; everything calls check.c, which calls
 * nothing.
 */

/* lib/check.c: the pinned entries of slots (MOECACHE_NONE skipped) into out; -EINVAL for a bad
 * slot. */
int mc_pinned_slots(const struct moecache *mc, const uint32_t *slots, uint32_t count, uint32_t *out,
		    uint32_t *n_out);
/* lib/check.c: ACQUIRE's flags: 0 or -EINVAL. */
int mc_check_acquire_flags(uint32_t flags);

/*
 * lib/kpin.c: kernel pins. release_slots NULL: ACQUIRE; else
 * ACQUIRE_RELEASE dropping release_count real slots first.
 */
int mc_kernel_acquire(struct moecache *mc, const uint32_t *release_slots, uint32_t release_count,
		      uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
		      uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res);
int mc_kernel_release(struct moecache *mc, const uint32_t *slots, uint32_t count);
int mc_kernel_release_all(struct moecache *mc);

/* lib/fastpin.c: fast pins, for a handle attached with them; setup and teardown by handle.c. */
int mc_fast_setup(struct moecache *mc);
void mc_fast_teardown(struct moecache *mc);
int mc_fast_acquire(struct moecache *mc, const uint32_t *release_slots, uint32_t release_count,
		    uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
		    uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res);
int mc_fast_release(struct moecache *mc, const uint32_t *slots, uint32_t count);
int mc_fast_release_all(struct moecache *mc);

/*
 * A bank backend: how a process turns the bank descriptor and file from
 * BANK_GET into something it can read slots from. CUDA and ROCm add their
 * import here (cuMemImportFromShareableHandle, a dma-buf import).
 */
struct mc_bank_backend {
	uint32_t id; /* enum moecache_backend */
	int (*import)(struct moecache_bank_map *b);
	void (*unimport)(struct moecache_bank_map *b);
};

const struct mc_bank_backend *mc_bank_backend_find(uint32_t id);
/* lib/bank.c: the slot range and tier of bank index, from the map's bank table. */
int mc_bank_geometry(const struct moecache *mc, uint32_t index, uint32_t *slot_begin,
		     uint32_t *n_slots, uint32_t *tier);

/* lib/check.c: checks shared by the client, agent and loader calls: 0, -ENOTCONN or -EPERM. */
int mc_check_role(const struct moecache *mc, uint32_t role_mask);
#define MC_ROLE_BIT(r) (1u << (r))

/* Validates a list of count experts of one layer as ACQUIRE and PREFETCH do. */
int mc_check_experts(const struct moecache *mc, uint32_t layer, const uint32_t *experts,
		     uint32_t count);
/* Validates a list length against the driver's max_batch. */
int mc_check_count(const struct moecache *mc, uint32_t count);

/* ioctl returning 0 or -errno. */
int mc_ioctl(const struct moecache *mc, unsigned long req, void *arg);

#endif /* MOECACHE_LIB_MC_INTERNAL_H */
