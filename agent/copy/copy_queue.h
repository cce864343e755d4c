/* SPDX-License-Identifier: MIT */
/*
 * What every copy engine (cpu, cuda, rocm) keeps the same way: FIFOs of
 * copies that grow on demand, and the finished side, an eventfd that is
 * readable while finished copies wait to be collected (published ones, in
 * batches: agent_copy_engine_done).
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

/*
 * The order in which an engine's workers take copies, shared by the
 * engines: demand copies (a client waits) first, each whole; then
 * prefetches (hints, warm-up), in pieces of chunk_bytes, so that a demand
 * copy queued while a prefetch is under way starts at the prefetch's next
 * chunk boundary instead of after the whole expert; and a prefetch that
 * turned wrong can be cancelled while it is queued or between two of its
 * chunks. A prefetch set aside for a demand copy is resumed before any new
 * one starts, so at most n_workers prefetches are ever started and not
 * finished: their room is allocated at init, and nothing on a worker's
 * path allocates.
 *
 * An engine pushes copies, and each worker loops: agent_copy_sched_next
 * (a piece to do, or nothing), the bytes [offset, offset + len) of the
 * expert copied with the lock dropped, then agent_copy_sched_piece_done,
 * which says when the whole copy is over (done, failed or cancelled) and
 * goes to the finished side. Under the engine's lock, as the rest of this
 * file.
 */
#define AGENT_COPY_CHUNK_BYTES (1ull << 20)

struct agent_copy_piece {
	struct agent_copy copy;
	uint64_t offset, len; /* bytes of the expert this piece copies */
	uint32_t worker;      /* the started prefetch it belongs to, or UINT32_MAX */
};

struct agent_copy_started {
	struct agent_copy copy;
	uint64_t done;	/* bytes copied */
	bool used;	/* started, not finished */
	bool running;	/* a piece of it is being copied now */
	bool cancelled; /* finish it as -ECANCELED after the running piece */
	int status;	/* the first failed piece's, or 0 */
};

struct agent_copy_sched {
	struct agent_copy_queue demand;	  /* whole copies, first */
	struct agent_copy_queue prefetch; /* not started */
	struct agent_copy_started *started;
	uint32_t n_started;
	uint64_t expert_bytes;
	uint64_t chunk_bytes; /* >= expert_bytes: whole prefetches */
	uint64_t n_cancelled, n_overtaken;
};

/* chunk_bytes 0: AGENT_COPY_CHUNK_BYTES. 0, -EINVAL (no workers or bytes) or -ENOMEM. */
int agent_copy_sched_init(struct agent_copy_sched *s, uint32_t n_workers, uint64_t expert_bytes,
			  uint64_t chunk_bytes);
void agent_copy_sched_fini(struct agent_copy_sched *s);
/* Queues c: a prefetch if c->flags has MOECACHE_FILL_PREFETCH, else a demand copy. */
int agent_copy_sched_push(struct agent_copy_sched *s, const struct agent_copy *c);
/*
 * The next piece to copy: the oldest demand copy whole; else a started
 * prefetch not running (set aside, or between chunks), its next chunk;
 * else the oldest queued prefetch's first chunk. False: nothing to do.
 */
bool agent_copy_sched_next(struct agent_copy_sched *s, struct agent_copy_piece *p);
/*
 * The piece p was copied with status (0 or -errno). True when its copy is
 * over: then *done is the copy with its status (-ECANCELED for a prefetch
 * cancelled meanwhile), for the finished side. False: a prefetch has
 * chunks left; it is set aside (a demand copy waits) or continues.
 */
bool agent_copy_sched_piece_done(struct agent_copy_sched *s, const struct agent_copy_piece *p,
				 int status, struct agent_copy *done);
/*
 * Cancels the prefetch into slot. 0: it was queued or set aside between
 * chunks; *out is the copy with status -ECANCELED, which the caller
 * finishes like any copy (the slot's bytes are not the expert's). A
 * running one is -EINPROGRESS: it finishes as -ECANCELED after its
 * current chunk. -ENOENT: no prefetch into slot (a demand copy is never
 * cancelled).
 */
int agent_copy_sched_cancel(struct agent_copy_sched *s, uint32_t slot, struct agent_copy *out);
/* Nothing queued and no prefetch started. */
bool agent_copy_sched_idle(const struct agent_copy_sched *s);

/* Makes done_fd readable: a copy finished. */
void agent_done_signal(int done_fd);

/*
 * The state every engine keeps the same way, first in its private struct
 * so that the shared ops below take the engine's priv as it is.
 */
struct agent_copy_engine {
	pthread_mutex_t lock;	      /* the engine's threads against the pool's calls */
	pthread_cond_t work;	      /* copies queued, or stopping */
	struct agent_copy_queue done; /* finished, not collected */
	uint32_t inflight;	      /* accepted and not collected */
	uint32_t copy_delay_us;	      /* tests: a pause in the middle of each copy */
	bool stopping;
	bool signalled; /* done_fd made readable for what done holds: no second signal */
	int done_fd;	/* eventfd: readable once done is signalled */
};

/*
 * Published copies (struct agent_backend_config's publish) that may wait
 * in done unsignalled: at this many the collector is woken even while the
 * copy threads have work, so the pool's own records of them (the slots it
 * may evict again) lag by a bounded amount.
 */
#define AGENT_COPY_PUBLISHED_BATCH 16

/*
 * A copy finished (under e->lock, room reserved): onto done. True when the
 * caller must make done_fd readable with agent_copy_engine_signal, after it
 * dropped the lock (the woken collector would otherwise wake only to wait
 * for the lock). A collector takes everything (or re-arms done_fd itself),
 * so one signal per batch is enough: copies that finish while others wait
 * to be collected cost no system call and no wake-up of the pool's thread.
 *
 * A copy that is not published (c->published false: a client may wait for
 * its completion) is signalled at once. A published one is not: nobody
 * waits for it, and on a busy CPU waking the collector after every copy
 * preempts the copy thread each time. It waits until
 * AGENT_COPY_PUBLISHED_BATCH have gathered, or a copy thread runs out of
 * work (agent_copy_engine_flush), or another copy is signalled.
 */
bool agent_copy_engine_done(struct agent_copy_engine *e, const struct agent_copy *c);
/*
 * Under e->lock, a copy thread with nothing to do: true when finished
 * copies wait unsignalled; the caller signals after dropping the lock.
 */
bool agent_copy_engine_flush(struct agent_copy_engine *e);
void agent_copy_engine_signal(struct agent_copy_engine *e);

/* The lock, the condition and the eventfd: 0 or -errno; fini is safe after either. */
int agent_copy_engine_init(struct agent_copy_engine *e, uint32_t copy_delay_us);
void agent_copy_engine_fini(struct agent_copy_engine *e);

/* The ops every engine shares (struct agent_backend_ops): priv starts with the engine. */
int agent_copy_engine_completion_fd(const void *priv);
/* Collects up to max finished copies; done_fd stays readable while more wait. */
int agent_copy_engine_completions(void *priv, struct agent_copy *out, uint32_t max);
uint32_t agent_copy_engine_inflight(const void *priv);
void agent_copy_engine_set_delay(void *priv, uint32_t copy_delay_us);

#endif /* MOECACHE_AGENT_COPY_QUEUE_H */
