/* SPDX-License-Identifier: MIT */
/*
 * Deferred release of pins: a client pins slots, queues GPU work that
 * reads them, and must not drop the pins before that work has run. It
 * records a marker on its stream (a CUDA event, a fence) and hands
 * (marker, slots) to this queue; each later call polls the markers and
 * drops the pins of those that passed, in one release per marker. The
 * queue knows nothing of CUDA or ROCm: the marker is an opaque pointer
 * and the three operations below are the backend's.
 */
#ifndef MOECACHE_GPU_RELEASE_QUEUE_H
#define MOECACHE_GPU_RELEASE_QUEUE_H

#include <stdint.h>

struct mc_release_ops {
	/* 1 if the marker has passed, 0 if not yet, -errno if its work failed. */
	int (*query)(void *ctx, void *marker);
	/* Blocks until the marker passes: 0, or -errno. May be NULL (then query is polled). */
	int (*wait)(void *ctx, void *marker);
	/* Drops one pin per slot: 0 or -errno. */
	int (*release)(void *ctx, const uint32_t *slots, uint32_t count);
	/* The marker is no longer needed (recycle or destroy it). May be NULL. */
	void (*put_marker)(void *ctx, void *marker);
};

struct mc_release_entry {
	void *marker;
	uint32_t count;
	uint32_t *slots;
};

struct mc_release_queue {
	const struct mc_release_ops *ops;
	void *ctx;
	struct mc_release_entry *items;
	uint32_t len, cap;
	uint64_t pending_slots; /* pins held by queued entries */
};

void mc_release_queue_init(struct mc_release_queue *q, const struct mc_release_ops *ops, void *ctx);
/*
 * Queues (marker, slots); the slots are copied and the marker belongs to
 * the queue from now on (put_marker is called on it once released).
 * -ENOMEM leaves the marker with the caller.
 */
int mc_release_queue_push(struct mc_release_queue *q, void *marker, const uint32_t *slots,
			  uint32_t count);
/*
 * Releases the entries whose marker has passed, in any order (markers of
 * several streams pass out of order). A marker whose work failed still
 * has its pins dropped: the failure is returned after the rest is done.
 * Returns how many entries were released, or the first -errno seen.
 */
int mc_release_queue_poll(struct mc_release_queue *q);
/* Waits for every marker and releases everything: 0 or the first -errno. */
int mc_release_queue_flush(struct mc_release_queue *q);
/* Entries still queued. */
uint32_t mc_release_queue_len(const struct mc_release_queue *q);
/* Frees the queue without releasing anything (the pins go with the file). */
void mc_release_queue_destroy(struct mc_release_queue *q);

#endif /* MOECACHE_GPU_RELEASE_QUEUE_H */
