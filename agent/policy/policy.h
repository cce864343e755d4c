/* SPDX-License-Identifier: MIT */
/*
 * Replacement policies for one pool's bank of slots.
 *
 * The caller (moecached, or moecache-trace's simulator) owns the slot map and
 * tells the policy what happens: every demand access (hit or miss), every
 * insertion and removal. When the bank is full and a slot is needed it asks
 * the policy for a victim. Free slots are the caller's business: victim is
 * called only when no slot is free.
 *
 * Experts are named by (layer, expert) with expert in [0, n_local): the
 * index inside the pool's local range, not the model-wide id.
 *
 * A policy handle is not thread-safe: the caller serialises all calls on one
 * handle. Different handles are independent (no global mutable state).
 *
 * Policies (moe_policy_names()):
 *   lru      least recently used
 *   lfu      least frequently used (counts since insertion, ties by recency)
 *   ema      EMA-decayed frequency with a protected hot set and hysteresis
 *   arc      adaptive replacement cache (recency and frequency lists, ghosts)
 *   static   pins the profile's top n_slots, the rest LRU (needs a profile)
 *   belady   offline optimum: evicts the expert used furthest in the future
 *            (needs a future oracle; for simulation only)
 *   reuse    expected time to next use, from decayed frequency and whether
 *            the previous token used it, aware that layers run in a cycle
 *   revisit  reuse with the chance of return measured for each number of
 *            tokens since the expert's latest use
 *   lookahead  revisit told exactly which experts the next few tokens use
 *            (needs a future oracle; for simulation only: it measures how
 *            much a perfect next-token predictor would be worth)
 *   default  what moecached uses when nobody chooses (now: revisit);
 *            docs/policy.md says why
 */
#ifndef MOECACHE_AGENT_POLICY_POLICY_H
#define MOECACHE_AGENT_POLICY_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "profile.h"

#define MOE_POLICY_DEFAULT "default"
/* moe_future.next_use's answer for an expert never used again. */
#define MOE_FUTURE_NEVER UINT64_MAX

/*
 * An oracle of future accesses, for belady. next_use returns the first step
 * >= from at which (layer, expert) is accessed, or MOE_FUTURE_NEVER. Steps are
 * the ones the caller passes to moe_policy_access.
 */
struct moe_future {
	uint64_t (*next_use)(const struct moe_future *f, uint32_t layer, uint32_t expert,
			     uint64_t from);
	void *ctx;
};

struct moe_policy;

struct moe_policy_config {
	uint32_t n_layers, n_local;	   /* experts per layer in the pool's local range */
	uint32_t n_slots;		   /* cache capacity (global across layers) */
	const struct moe_profile *profile; /* optional ranked popularity, may be NULL */
	const struct moe_future *future;   /* oracle of future accesses (belady, lookahead) */
	uint64_t lookahead_steps;	   /* lookahead: steps it sees ahead (0: n_layers) */
};

/*
 * Creates the policy called name (NULL or "default" gives the default).
 * Returns 0, -ENOENT for an unknown name, -EINVAL for a bad config (zero
 * sizes, static without a profile, belady or lookahead without a future),
 * -ENOMEM.
 * Profile entries outside the pool's range are ignored. The config's
 * profile is copied; the future must outlive the policy.
 */
int moe_policy_create(const char *name, const struct moe_policy_config *cfg,
		      struct moe_policy **out);
void moe_policy_destroy(struct moe_policy *p);
/* The policy's own name: for one created as "default", the policy it stands for. */
const char *moe_policy_name(const struct moe_policy *p);
/* NULL-terminated list of the names moe_policy_create accepts, "default" last. */
const char *const *moe_policy_names(void);
/* Whether name (NULL: the default) is one moe_policy_create accepts. */
bool moe_policy_exists(const char *name);
/*
 * Whether the policy reads the future (a struct moe_future: belady,
 * lookahead): the simulator's oracles, which an agent cannot run.
 */
bool moe_policy_reads_future(const char *name);

/*
 * A demand access to (layer, expert) at logical time step (non-decreasing;
 * the live agent may batch count accesses it learned about at once; count 0
 * is treated as 1). Called for hits and misses, before the miss is inserted.
 * Out-of-range ids are ignored. Policies count a layer's tokens as the
 * distinct steps that access it, so accesses of one forward pass of a layer
 * should share a step.
 */
void moe_policy_access(struct moe_policy *p, uint32_t layer, uint32_t expert, uint32_t count,
		       uint64_t step);
/* (layer, expert) now occupies slot; prefetch says it came in on a prediction. */
void moe_policy_inserted(struct moe_policy *p, uint32_t slot, uint32_t layer, uint32_t expert,
			 bool prefetch);
/* slot is empty again (evicted, or dropped by the caller). */
void moe_policy_removed(struct moe_policy *p, uint32_t slot);

/*
 * Chooses the victim slot to make room for (layer, expert). evictable(ctx,
 * slot) says whether a slot may be taken (false for pinned slots and for
 * experts the current step needs); it is called only for occupied slots.
 * Returns a slot, -ENOSPC if none may be taken, or (for a prefetch that the
 * policy would rather not admit) -ECANCELED. The caller then evicts the slot
 * and reports moe_policy_removed and moe_policy_inserted as it happens; a
 * victim that is not then removed leaves the policy unchanged.
 */
int moe_policy_victim(struct moe_policy *p, uint32_t layer, uint32_t expert, bool prefetch,
		      bool (*evictable)(void *ctx, uint32_t slot), void *ctx);

/*
 * The current popularity ranking, hottest first (for saving a profile):
 * every expert accessed so far, by decayed access frequency. *out is
 * overwritten; free it with moe_profile_free. Returns 0 or -ENOMEM.
 */
int moe_policy_ranking(struct moe_policy *p, struct moe_profile *out);

/* Extensions beyond the core calls. */

/* The name of the policy "default" stands for. */
const char *moe_policy_default_name(void);

/*
 * How many experts the policy would like to keep protected from eviction
 * now (its hot set); 0 for policies without one. For statistics only.
 */
uint32_t moe_policy_hot_count(const struct moe_policy *p);

/*
 * Online next-layer prediction (the prefetch predictor). It learns, per
 * layer L, which experts of layer L+1 follow each expert of layer L, from
 * the accesses it is shown, and predicts layer L+1's experts from layer L's.
 * Independent of the replacement policy; one per pool.
 */
struct moe_predictor;

/* Returns 0, -EINVAL for zero sizes, -ENOMEM. */
int moe_predictor_create(uint32_t n_layers, uint32_t n_local, struct moe_predictor **out);
void moe_predictor_destroy(struct moe_predictor *pr);
/*
 * The experts one token selected at layer (ids sorted or not). Consecutive
 * calls for layer and layer + 1 of the same token teach the transition;
 * a call for layer 0 (or a non-consecutive layer) starts a new chain.
 */
void moe_predictor_observe(struct moe_predictor *pr, uint32_t layer, const uint32_t *experts,
			   uint32_t n);
/*
 * Predicts up to max experts of layer + 1 given the experts selected at
 * layer, most likely first, into out. Returns the number written (0 when
 * layer is the last one or nothing has been learned yet), or -EINVAL.
 */
int moe_predictor_predict(const struct moe_predictor *pr, uint32_t layer, const uint32_t *experts,
			  uint32_t n, uint32_t *out, uint32_t max);

#endif /* MOECACHE_AGENT_POLICY_POLICY_H */
