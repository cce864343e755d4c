/* SPDX-License-Identifier: MIT */
/*
 * The agent's view of one pool's slots, kept beside the driver's map
 * region, and the choice of a destination slot for a fill: a free slot if
 * there is one, else the policy's victim among the slots that may be
 * taken. The driver's owner[] is the truth; agent_slots_sync brings this
 * view (and the policy) back in line with it.
 *
 * Which slots may be taken: never a pinned or filling one; and, in the
 * strict pass, never one pinned within the current step (last_use newer
 * than the step's start). Prefetches only get the strict pass (a prefetch
 * never evicts what the current step still needs); a demand fill falls
 * back to any unpinned slot rather than starve.
 *
 * Experts are local indices idx = layer * n_local + local expert.
 */
#ifndef MOECACHE_AGENT_SLOTS_H
#define MOECACHE_AGENT_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

#include "libmoecache.h"
#include "policy/policy.h"

/* One expert's accesses since the last scan, stamped with the newest's clock. */
struct agent_access {
	uint64_t clock;
	uint32_t idx;
	uint32_t count;
};

struct agent_slots {
	const struct moecache_map *map;
	struct moe_policy *policy;
	uint32_t slot_begin; /* the view's slot 0 in the map (a bank's first slot) */
	uint32_t n_slots;    /* the view's slots: the policy's slot ids are 0 .. n_slots - 1 */
	uint32_t n_layers;
	uint32_t n_local;
	uint32_t n_idx;
	uint32_t *held;		   /* [n_slots]: idx the policy knows in the slot, or NONE */
	uint32_t *filling;	   /* [n_idx]: slot this agent is filling for idx, or NONE */
	uint32_t *access_seen;	   /* [n_idx]: access[] when last scanned */
	struct agent_access *scan; /* [n_idx]: the last scan's accesses in time order */
	uint32_t n_scan;	   /* entries of scan[] the last scan wrote */
	uint64_t last_step;	   /* the newest step the policy was given */
	uint32_t *excluded;	   /* [n_slots]: == round: not a candidate this round */
	uint32_t round;
	uint32_t free_cursor;
	bool maybe_free;     /* false once a full scan found no free slot */
	uint64_t step_start; /* slots used after this clock belong to the current step */
	bool strict;	     /* the evictable() pass in progress */
	/*
	 * Tiers: a slot taken (agent_slots_taken) may still hold its old
	 * expert in the driver's map until its move starts; sync leaves such
	 * slots to their mover.
	 */
	bool hold_pending;
};

int agent_slots_init(struct agent_slots *s, const struct moecache_map *map,
		     struct moe_policy *policy);
/*
 * A view of one bank: the map's slots [slot_begin, slot_begin + n_slots),
 * numbered from 0 in this view and its policy (the caller adds slot_begin
 * for the driver). agent_slots_init is the view of every slot.
 */
int agent_slots_init_bank(struct agent_slots *s, const struct moecache_map *map,
			  struct moe_policy *policy, uint32_t slot_begin, uint32_t n_slots);
void agent_slots_destroy(struct agent_slots *s);

/*
 * Brings the view and the policy in line with owner[] (warm restart, a
 * flush by an administrator). Returns the number of resident slots.
 */
uint32_t agent_slots_sync(struct agent_slots *s);
/*
 * Hands the slots to another policy (a live policy change): it is told of
 * every slot this view holds, filling ones included, with no history. The
 * caller destroys the old policy.
 */
void agent_slots_set_policy(struct agent_slots *s, struct moe_policy *policy);
/* Starts the access baseline at the current counters (no history fed). */
void agent_slots_reset_access(struct agent_slots *s);
/*
 * Feeds the policy the access[] deltas since the last scan, oldest first,
 * each with the pool clock of its acquire as the step; returns their sum.
 */
uint64_t agent_slots_scan_access(struct agent_slots *s, uint64_t step);

/* A new scheduling round: forget the exclusions; step_start bounds the current step. */
void agent_slots_new_round(struct agent_slots *s, uint64_t step_start);
/* Takes slot out of the candidates until the next round (EVICT said EBUSY). */
void agent_slots_exclude(struct agent_slots *s, uint32_t slot);
/* A free slot, or -ENOSPC. */
int agent_slots_find_free(struct agent_slots *s);
/*
 * A destination for idx: a free slot, else a victim. Returns the slot,
 * -ENOSPC when none may be taken, -ECANCELED when the policy declines
 * the prefetch, or -EPROTO when the policy named a slot it may not take.
 */
int agent_slots_choose(struct agent_slots *s, uint32_t idx, bool prefetch);

/* EVICT gave slot to idx. */
void agent_slots_taken(struct agent_slots *s, uint32_t slot, uint32_t idx, bool prefetch);
/* The fill of slot was committed. */
void agent_slots_committed(struct agent_slots *s, uint32_t slot);
/* The fill of slot was aborted: the slot is free again. */
void agent_slots_aborted(struct agent_slots *s, uint32_t slot);
bool agent_slots_is_filling(const struct agent_slots *s, uint32_t idx);

#endif /* MOECACHE_AGENT_SLOTS_H */
