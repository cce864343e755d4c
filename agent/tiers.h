/* SPDX-License-Identifier: MIT */
/*
 * Residency across tiers of banks: which bank an expert sits in, and the
 * moves that keep the hot set in the fastest one. Tier 0 is the fastest;
 * the order of the tiers is their speed, whatever their sizes (a small
 * tier 0 before larger lower tiers is the usual shape, but not a rule).
 *
 * Each tier is one bank with its own slot choice (slots.h) and policy. An
 * expert is resident in at most one tier. The moves:
 *
 *   fill      a miss everywhere goes into tier 0 (a demand fill);
 *   promote   an expert resident in a lower tier goes into tier 0 when
 *             tier 0's policy admits it as it admits a prefetch (the
 *             policy's own test of "hotter than what it would evict"),
 *             and its lower slot is freed;
 *   demote    the expert a move into tier T evicts goes into a lower tier
 *             instead of being dropped: with dynamic placement into tier
 *             T + 1 (so victims cascade down and the last tier's are
 *             dropped to the host pages); with static placement, tier 0's
 *             victim goes into the lower tier that owns its slice and a
 *             lower tier's victim is dropped. The receiving tier picks its
 *             own victim with its own policy; when it can give no slot the
 *             expert is dropped.
 *
 * Static placement is the expert-parallel layout: the lower tiers each own
 * a contiguous slice of every layer's local experts, in tier order, sized
 * in proportion to their slot counts; nothing outside its slice ever
 * enters a lower tier.
 *
 * The caller owns the map regions and performs the copies: agent_tiers
 * calls ops->move to put an expert into a slot (EVICT, the copy from the
 * host pages or from the tier it leaves, COMMIT) and ops->clear to empty a
 * slot whose expert moved away. Accesses go to every tier's policy, so that
 * a lower tier ranks its experts by the same history as tier 0.
 */
#ifndef MOECACHE_AGENT_TIERS_H
#define MOECACHE_AGENT_TIERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slots.h"

#define AGENT_TIERS_MAX 8
#define AGENT_TIER_NONE UINT32_MAX

enum agent_tier_placement {
	AGENT_TIERS_DYNAMIC, /* any expert in any lower tier, victims cascade down */
	AGENT_TIERS_STATIC,  /* each lower tier holds its slice of the experts only */
};

struct agent_tier_ops {
	/*
	 * idx goes into slot of tier (the slot's old expert, if any, is
	 * unmapped), from slot from_slot of tier from_tier, or from the host
	 * pages when from_tier is AGENT_TIER_NONE. One decision calls it
	 * deepest first: a slot's old expert has been given its new place
	 * before the slot is named again.
	 */
	void (*move)(void *ctx, uint32_t tier, uint32_t slot, uint32_t idx, uint32_t from_tier,
		     uint32_t from_slot);
	/* slot of tier is emptied: its expert moved to another tier. */
	void (*clear)(void *ctx, uint32_t tier, uint32_t slot);
	/*
	 * false: a move is done when move() returns (the simulator). true: it
	 * runs on after (the agent's copies); the slot stays taken and out of
	 * every choice until agent_tiers_committed.
	 */
	bool deferred_commit;
};

/* Per tier, since init. */
struct agent_tier_stats {
	uint64_t fills;	     /* misses everywhere brought in (tier 0 only) */
	uint64_t promotions; /* experts moved into this tier from a lower one */
	uint64_t demotions;  /* experts moved into this tier from a higher one */
	uint64_t drops;	     /* experts that left this tier for the host pages only */
};

struct agent_tiers {
	uint32_t n_tiers;
	enum agent_tier_placement placement;
	struct agent_slots *tier[AGENT_TIERS_MAX];
	uint32_t n_local, n_idx;
	uint32_t slice_begin[AGENT_TIERS_MAX], slice_end[AGENT_TIERS_MAX]; /* static */
	uint32_t *where_tier;						   /* [n_idx] */
	uint32_t *where_slot;						   /* [n_idx] */
	struct agent_tier_stats stats[AGENT_TIERS_MAX];
	const struct agent_tier_ops *ops;
	void *ctx;
};

/*
 * Parses "F0,F1,...": each tier's slots as a fraction of all experts, in
 * (0, 1], fastest first, at most AGENT_TIERS_MAX, summing to at most 1 (an
 * expert sits in one tier only, so more would be slots never used).
 * Returns 0 or -EINVAL with the reason in err.
 */
int agent_tiers_parse(const char *spec, double *fractions, uint32_t *n, char *err, size_t err_len);

/*
 * Binds n tiers' slot views (all over the same experts: n_layers x n_local,
 * each with its own map and policy) in speed order. The tiers start empty.
 * Returns 0, -EINVAL (no tier, more than AGENT_TIERS_MAX, mismatched
 * shapes, static placement with a lower tier whose slice would be empty),
 * or -ENOMEM.
 */
int agent_tiers_init(struct agent_tiers *t, uint32_t n, struct agent_slots *const *tiers,
		     enum agent_tier_placement placement, const struct agent_tier_ops *ops,
		     void *ctx);
void agent_tiers_destroy(struct agent_tiers *t);

/* The tier idx is resident in, or AGENT_TIER_NONE; *slot its slot there. */
uint32_t agent_tiers_where(const struct agent_tiers *t, uint32_t idx, uint32_t *slot);
/* The lower tier owning idx under static placement, or AGENT_TIER_NONE. */
uint32_t agent_tiers_owner(const struct agent_tiers *t, uint32_t idx);
/* A demand access of idx at step: every tier's policy sees it. */
void agent_tiers_access(struct agent_tiers *t, uint32_t idx, uint64_t step);
/* A new scheduling round in every tier (agent_slots_new_round). */
void agent_tiers_new_round(struct agent_tiers *t, uint64_t step_start);
/*
 * A miss everywhere: idx into tier 0, its victim demoted. Returns the slot,
 * -EEXIST if idx is resident somewhere, -ENOSPC if tier 0 has no slot to
 * give, -EPROTO if a policy named a slot it may not take.
 */
int agent_tiers_fill(struct agent_tiers *t, uint32_t idx);
/* As agent_tiers_fill; a prefetch takes a tier-0 slot as agent_slots_choose gives prefetches. */
int agent_tiers_fill_as(struct agent_tiers *t, uint32_t idx, bool prefetch);
/*
 * idx, resident in a lower tier, into tier 0 if tier 0's policy admits it.
 * Returns the slot, -ECANCELED (not admitted), -ENOSPC, -EINVAL (not in a
 * lower tier), -EBUSY (a deferred move of idx has not finished), -EPROTO.
 */
int agent_tiers_promote(struct agent_tiers *t, uint32_t idx);

/* A deferred move into slot of tier has finished (committed or aborted alike). */
void agent_tiers_committed(struct agent_tiers *t, uint32_t tier, uint32_t slot);
/*
 * Brings every tier's view, and where each expert is, back in line with
 * the map (warm restart, a move that failed half-way). Returns the
 * resident experts.
 */
uint32_t agent_tiers_sync(struct agent_tiers *t);

#endif /* MOECACHE_AGENT_TIERS_H */
