/* SPDX-License-Identifier: MIT */
/*
 * Expert popularity profiles: a ranking of experts, hottest first.
 *
 * A profile is saved by the agent (from moe_policy_ranking) and loaded at
 * start so a restarted agent, or the static policy, knows what is hot before
 * it has seen any traffic.
 *
 * File formats accepted by moe_profile_load:
 *   JSON:  {"ranked": [[layer, expert], ...]}   (other keys are ignored)
 *   text:  one "layer expert" pair per line; '#' starts a comment; blank
 *          lines are skipped.
 * moe_profile_save always writes JSON.
 */
#ifndef MOECACHE_AGENT_POLICY_PROFILE_H
#define MOECACHE_AGENT_POLICY_PROFILE_H

#include <stdint.h>

struct moe_expert_id {
	uint32_t layer;
	uint32_t expert;
};

struct moe_profile {
	uint32_t n;		      /* entries in ranked */
	struct moe_expert_id *ranked; /* hottest first; malloc'd, owned by the profile */
};

/*
 * Reads a profile from path into *out (which is overwritten; free it with
 * moe_profile_free). Returns 0, -EINVAL for malformed content (a message
 * naming the file and line goes to stderr; *out is left empty), -ENOMEM, or
 * the -errno of opening/reading the file. Duplicate entries are -EINVAL.
 */
int moe_profile_load(const char *path, struct moe_profile *out);

/* Same as moe_profile_load, from a NUL-terminated buffer; name is for messages. */
int moe_profile_parse(const char *name, const char *text, struct moe_profile *out);

/*
 * Writes p to path as JSON, atomically: a temporary file in the same folder
 * is written, flushed and renamed over path. Returns 0 or -errno.
 */
int moe_profile_save(const char *path, const struct moe_profile *p);

/*
 * The one ranking order (moecached's saved profiles, the simulator's,
 * moecachectl's from the access counters): ids (an array of n) hottest
 * first by key[id], ties by the smaller id.
 */
void moe_rank_ids(uint32_t *ids, uint32_t n, const double *key);

/*
 * A profile of the experts whose count (n_layers * n_local entries, id =
 * layer * n_local + expert) is above zero, ranked by moe_rank_ids.
 * Returns 0 or -ENOMEM (out empty).
 */
int moe_profile_rank(const double *count, uint32_t n_layers, uint32_t n_local,
		     struct moe_profile *out);

/* Frees the ranking and empties the profile; safe on an empty profile. */
void moe_profile_free(struct moe_profile *p);

#endif /* MOECACHE_AGENT_POLICY_PROFILE_H */
