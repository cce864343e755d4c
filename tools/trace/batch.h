/* SPDX-License-Identifier: MIT */
/*
 * Batched replay: B sequences decoded together. The view's tokens are cut
 * into B consecutive stretches of n / B tokens (the rest is dropped); step
 * i of layer l is the union of the experts that token i of every stretch
 * selects at l, each expert once, listed by id. The result is a trace of
 * n / B tokens that the simulator replays as it does any other, and that
 * moecache-decode --batch acquires layer by layer.
 *
 * A union is a set: one acquire of it is counted by the driver, not
 * ordered, and the agent hears of a layer's experts by id
 * (docs/live-vs-sim.md), so the simulator lists them by id too.
 */
#ifndef MOECACHE_TOOLS_TRACE_BATCH_H
#define MOECACHE_TOOLS_TRACE_BATCH_H

#include "trace.h"

/*
 * Builds the batched trace of v with batch sequences (>= 1). Returns 0,
 * -EINVAL (no view, batch 0, or fewer tokens than batch), -ENOMEM. Free the
 * result with moe_trace_free.
 */
int moe_trace_batch(const struct moe_trace_view *v, uint32_t batch, struct moe_trace **out);

/*
 * Which of the view's n tokens is sequence seq's token at step of a batch
 * of batch sequences (seq < batch, step < n / batch): the stretches are
 * consecutive, so it is seq * (n / batch) + step.
 */
static inline uint32_t moe_trace_batch_member(uint32_t n, uint32_t batch, uint32_t step,
					      uint32_t seq)
{
	return seq * (n / batch) + step;
}

/*
 * The view with each prompt's prefill as one step: the union of its prefill
 * tokens' experts per layer, as one batched forward pass computes them;
 * listed by id; decode tokens are kept as they are. Returns 0, -EINVAL, -ENOMEM.
 */
int moe_trace_prefill_batched(const struct moe_trace_view *v, struct moe_trace **out);

#endif /* MOECACHE_TOOLS_TRACE_BATCH_H */
