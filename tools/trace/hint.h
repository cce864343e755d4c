/* SPDX-License-Identifier: MIT */
/*
 * An engine's hint of the next layer's experts, emulated from the trace: a
 * pre-gating router that names each of the next layer's true experts with
 * probability accuracy, and otherwise an expert the next layer does not
 * use. Deterministic: the same seed gives the same hints.
 */
#ifndef MOECACHE_TOOLS_TRACE_HINT_H
#define MOECACHE_TOOLS_TRACE_HINT_H

#include <stdint.h>

#include "trace.h"

/*
 * The hint for layer + 1 of token tok (none for the last layer: the next
 * token's routing depends on the token not yet sampled). Writes at most max
 * ids into out and returns how many. *rng is the generator's state (any
 * non-zero start).
 */
uint32_t moe_hint_next_layer(const struct moe_trace_token *tok, uint32_t n_layers,
			     uint32_t n_experts, uint32_t layer, double accuracy, uint64_t *rng,
			     uint32_t *out, uint32_t max);

#endif /* MOECACHE_TOOLS_TRACE_HINT_H */
