/* SPDX-License-Identifier: MIT */
/*
 * The kinds of fill a pool starts, and what becomes of a finished copy:
 * pure decisions, kept apart from agent/pool.c so that they are tested
 * alone (tests/unit/agent).
 *
 * A copy engine knows two classes (agent/copy/copy_queue.h): copies a
 * client waits for, whole and first, and the rest, named by
 * MOECACHE_FILL_PREFETCH, which yield to them at every chunk boundary and
 * can be cancelled. A CPU admission (a MOECACHE_REQ_CPU request: its
 * client computed the expert on the CPU and nobody waits) is copied in the
 * second class, so a demand arriving while it is queued or copying goes
 * first, and is committed as the demand fill it is (the driver counts it
 * as such, as the simulator does).
 */
#ifndef MOECACHE_AGENT_FILL_H
#define MOECACHE_AGENT_FILL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <moecache.h>

enum agent_fill_kind {
	AGENT_FILL_NONE = 0, /* no fill of this agent in the slot */
	AGENT_FILL_DEMAND,   /* a client waits or missed */
	AGENT_FILL_CPU,	     /* a CPU admission */
	AGENT_FILL_PREFETCH, /* a hint, or warm-up */
};

/* The flags a copy of kind goes to its engine with: the yielding class but for demand. */
static inline uint32_t agent_fill_copy_flags(enum agent_fill_kind kind)
{
	return kind == AGENT_FILL_DEMAND ? 0 : MOECACHE_FILL_PREFETCH;
}

/* The flags its COMMIT carries: only a prefetch is committed as one. */
static inline uint32_t agent_fill_commit_flags(enum agent_fill_kind kind)
{
	return kind == AGENT_FILL_PREFETCH ? MOECACHE_FILL_PREFETCH : 0;
}

/*
 * Whether a client asked for an expert since mark, its access[] counter
 * when the agent took the request (a client asking for an expert whose
 * request the agent holds queues nothing, but counts an access). Counters
 * wrap.
 */
static inline bool agent_fill_asked_since(uint32_t mark, uint32_t access_now)
{
	return access_now != mark;
}

enum agent_fill_next {
	AGENT_FILL_COMMIT,    /* the copy is whole: COMMIT */
	AGENT_FILL_ABORT,     /* it failed: ABORT, an error */
	AGENT_FILL_CANCELLED, /* a prefetch cancelled for a demand: ABORT, no error */
	AGENT_FILL_DROPPED,   /* a CPU admission cancelled: ABORT, no error */
	AGENT_FILL_RECOPY,    /* cancelled, and a client asks now: copy again as a demand */
};

/*
 * What becomes of a copy of kind that finished with status (0 or -errno);
 * asked: a client asked for the expert since the agent took it. A cancelled
 * copy that a client asks for is never aborted (the driver would fail the
 * waiting client): the slot stays the agent's and is copied again, whole,
 * as a demand. A CPU admission cancelled for a starved demand is dropped,
 * not queued again: its client has its output already, and an admission
 * retried at once would evict the expert the demand has just been given,
 * before its waiting client pins it; the expert's next CPU miss admits it
 * again. A demand copy is never cancelled: -ECANCELED on one is a failure.
 */
static inline enum agent_fill_next agent_fill_finished(enum agent_fill_kind kind, int status,
						       bool asked)
{
	if (!status)
		return AGENT_FILL_COMMIT;
	if (status != -ECANCELED || kind == AGENT_FILL_DEMAND || kind == AGENT_FILL_NONE)
		return AGENT_FILL_ABORT;
	if (asked)
		return AGENT_FILL_RECOPY;
	return kind == AGENT_FILL_CPU ? AGENT_FILL_DROPPED : AGENT_FILL_CANCELLED;
}

#endif /* MOECACHE_AGENT_FILL_H */
