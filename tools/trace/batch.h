/* SPDX-License-Identifier: MIT */
/*
 * Batched replay: B sequences decoded together. The view's tokens are cut
 * into B consecutive stretches of n / B tokens (the rest is dropped); step
 * i of layer l is the union of the experts that token i of every stretch
 * selects at l, each expert once, in stretch order. The result is a trace
 * of n / B tokens that the simulator replays as it does any other.
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
 * The view with each prompt's prefill as one step: the union of its prefill
 * tokens' experts per layer, as one batched forward pass computes them;
 * decode tokens are kept as they are. Returns 0, -EINVAL, -ENOMEM.
 */
int moe_trace_prefill_batched(const struct moe_trace_view *v, struct moe_trace **out);

#endif /* MOECACHE_TOOLS_TRACE_BATCH_H */
