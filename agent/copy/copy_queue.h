/* SPDX-License-Identifier: MIT */
/*
 * What every copy engine (cpu, cuda, rocm) keeps the same way: FIFOs of
 * copies that grow on demand, and the finished side, an eventfd that is
 * readable while finished copies wait to be collected.
 *
 * An engine reserves room in its finished FIFO for every copy it accepts,
 * so that the thread completing a copy never has to allocate or fail.
 * Nothing here locks: the callers hold their engine's lock, which
 * agent_done_collect takes itself.
 */
#ifndef MOECACHE_AGENT_COPY_QUEUE_H
#define MOECACHE_AGENT_COPY_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/*
 * The growth step of the FIFOs here and in the engines: a ring of *cap
 * entries of size bytes, len of them in use from *head, gets room for at
 * least want entries (first_cap when empty, doubling), laid out again from
 * index 0. Returns the entries to use from now on (items itself when there
 * was room), or NULL without memory, the ring unchanged.
 */
void *agent_ring_grow(void *items, size_t size, uint32_t *head, uint32_t len, uint32_t *cap,
		      uint32_t want, uint32_t first_cap);

struct agent_copy_queue {
	struct agent_copy *items;
	uint32_t head, len, cap;
};

/* Makes room for want entries in all: 0 or -ENOMEM. */
int agent_copy_queue_reserve(struct agent_copy_queue *q, uint32_t want);
/* Appends c, growing the queue if needed: 0 or -ENOMEM (never within reserved room). */
int agent_copy_queue_push(struct agent_copy_queue *q, const struct agent_copy *c);
bool agent_copy_queue_pop(struct agent_copy_queue *q, struct agent_copy *out);
void agent_copy_queue_free(struct agent_copy_queue *q);

/* Makes done_fd readable: a copy finished. */
void agent_done_signal(int done_fd);
/*
 * Collects up to max finished copies from done under lock and takes them
 * off *inflight; returns how many, or -errno. done_fd stays readable while
 * more are waiting.
 */
int agent_done_collect(int done_fd, pthread_mutex_t *lock, struct agent_copy_queue *done,
		       uint32_t *inflight, struct agent_copy *out, uint32_t max);

#endif /* MOECACHE_AGENT_COPY_QUEUE_H */
