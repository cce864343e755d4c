// SPDX-License-Identifier: MIT
/* The popularity profile the agent saves and loads, through the policy library. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/policy/policy.h"

Test(profile, basic_round_trip_via_policy,
     .description = "a ranking saved by the agent loads back identical, hottest first")
{
	struct moe_policy_config pc = {.n_layers = 4, .n_local = 16, .n_slots = 8};
	struct moe_profile ranking = {0}, loaded = {0};
	struct moe_policy *p;
	char dir[] = "/tmp/moecached-profile.XXXXXX", path[64];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/profile.json", dir);
	cr_assert_eq(moe_policy_create(MOE_POLICY_DEFAULT, &pc, &p), 0);
	/* Three experts with clearly different popularity. */
	for (uint64_t step = 1; step <= 30; step++) {
		moe_policy_access(p, 2, 7, 1, step);
		if (step % 2 == 0)
			moe_policy_access(p, 0, 3, 1, step);
		if (step % 10 == 0)
			moe_policy_access(p, 3, 15, 1, step);
	}
	cr_assert_eq(moe_policy_ranking(p, &ranking), 0);
	cr_assert_eq(ranking.n, 3);
	cr_assert_eq(ranking.ranked[0].layer, 2);
	cr_assert_eq(ranking.ranked[0].expert, 7);
	cr_assert_eq(moe_profile_save(path, &ranking), 0);
	cr_assert_eq(moe_profile_load(path, &loaded), 0);
	cr_assert_eq(loaded.n, ranking.n);
	for (uint32_t i = 0; i < loaded.n; i++) {
		cr_assert_eq(loaded.ranked[i].layer, ranking.ranked[i].layer);
		cr_assert_eq(loaded.ranked[i].expert, ranking.ranked[i].expert);
	}
	moe_profile_free(&ranking);
	moe_profile_free(&loaded);
	moe_policy_destroy(p);
	unlink(path);
	rmdir(dir);
}

Test(profile, basic_profile_given_to_policy,
     .description = "the agent's policy accepts the loaded profile in its config")
{
	struct moe_expert_id ids[2] = {{1, 2}, {0, 0}};
	struct moe_profile prof = {.n = 2, .ranked = ids};
	struct moe_policy_config pc = {.n_layers = 2, .n_local = 4, .n_slots = 2, .profile = &prof};
	struct moe_policy *p;

	cr_assert_eq(moe_policy_create(MOE_POLICY_DEFAULT, &pc, &p), 0);
	moe_policy_destroy(p);
}
