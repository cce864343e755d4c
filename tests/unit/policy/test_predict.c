// SPDX-License-Identifier: MIT
#include <errno.h>

#include <criterion/criterion.h>

#include "agent/policy/policy.h"

Test(predict, basic_learns_transition,
     .description = "after seeing 1 -> 2 between layers 0 and 1, the predictor names 2 first")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {1}, b[] = {2, 3}, c[] = {2};
	uint32_t out[4];

	cr_assert_eq(moe_predictor_create(3, 4, &pr), 0);
	for (int i = 0; i < 3; i++) {
		moe_predictor_observe(pr, 0, a, 1);
		moe_predictor_observe(pr, 1, i ? c : b, i ? 1 : 2);
	}
	cr_assert_eq(moe_predictor_predict(pr, 0, a, 1, out, 4), 2);
	cr_assert_eq(out[0], 2);
	cr_assert_eq(out[1], 3);
	moe_predictor_destroy(pr);
}

Test(predict, basic_nothing_learned_predicts_nothing,
     .description = "an untrained predictor returns no guesses")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {1};
	uint32_t out[4];

	cr_assert_eq(moe_predictor_create(3, 4, &pr), 0);
	cr_assert_eq(moe_predictor_predict(pr, 0, a, 1, out, 4), 0);
	moe_predictor_destroy(pr);
}

Test(predict, basic_last_layer_predicts_nothing,
     .description = "there is no layer after the last one to predict")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {1};
	uint32_t out[4];

	cr_assert_eq(moe_predictor_create(2, 4, &pr), 0);
	moe_predictor_observe(pr, 0, a, 1);
	moe_predictor_observe(pr, 1, a, 1);
	cr_assert_eq(moe_predictor_predict(pr, 1, a, 1, out, 4), 0);
	moe_predictor_destroy(pr);
}

Test(predict, basic_chain_breaks_on_skipped_layer,
     .description = "layers observed out of order teach no transition")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {1};
	uint32_t out[4];

	cr_assert_eq(moe_predictor_create(3, 4, &pr), 0);
	moe_predictor_observe(pr, 0, a, 1);
	moe_predictor_observe(pr, 2, a, 1);
	cr_assert_eq(moe_predictor_predict(pr, 0, a, 1, out, 4), 0);
	cr_assert_eq(moe_predictor_predict(pr, 1, a, 1, out, 4), 0);
	moe_predictor_destroy(pr);
}

Test(predict, basic_respects_max, .description = "no more guesses than asked for")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {0}, b[] = {0, 1, 2, 3};
	uint32_t out[4] = {9, 9, 9, 9};

	cr_assert_eq(moe_predictor_create(2, 4, &pr), 0);
	moe_predictor_observe(pr, 0, a, 1);
	moe_predictor_observe(pr, 1, b, 4);
	cr_assert_eq(moe_predictor_predict(pr, 0, a, 1, out, 2), 2);
	cr_assert_eq(out[2], 9);
	moe_predictor_destroy(pr);
}

Test(predict, bad_input_sizes, .description = "zero layers or experts is -EINVAL")
{
	struct moe_predictor *pr = (struct moe_predictor *)1;

	cr_assert_eq(moe_predictor_create(0, 4, &pr), -EINVAL);
	cr_assert_null(pr);
	cr_assert_eq(moe_predictor_create(4, 0, &pr), -EINVAL);
}

Test(predict, bad_input_layer_out_of_range,
     .description = "predicting from a layer the pool does not have is -EINVAL")
{
	struct moe_predictor *pr;
	const uint32_t a[] = {0};
	uint32_t out[2];

	cr_assert_eq(moe_predictor_create(2, 4, &pr), 0);
	cr_assert_eq(moe_predictor_predict(pr, 2, a, 1, out, 2), -EINVAL);
	moe_predictor_destroy(pr);
}

Test(predict, bad_input_ids_out_of_range_ignored,
     .description = "ids beyond n_experts teach and count nothing")
{
	struct moe_predictor *pr;
	const uint32_t bad[] = {7}, a[] = {0};
	uint32_t out[2];

	cr_assert_eq(moe_predictor_create(2, 4, &pr), 0);
	moe_predictor_observe(pr, 0, a, 1);
	moe_predictor_observe(pr, 1, bad, 1);
	cr_assert_eq(moe_predictor_predict(pr, 0, a, 1, out, 2), 0);
	cr_assert_eq(moe_predictor_predict(pr, 0, bad, 1, out, 2), 0);
	moe_predictor_destroy(pr);
}
