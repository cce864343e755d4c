// SPDX-License-Identifier: MIT
/* Emulated engine hints of the next layer (see hint.h). */
#include <stdbool.h>

#include "hint.h"

/* xorshift64*: a uniform double in [0, 1). */
static double hint_uniform(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static bool hint_has(const uint32_t *ids, uint32_t n, uint32_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

uint32_t moe_hint_next_layer(const struct moe_trace_token *tok, uint32_t n_layers,
			     uint32_t n_experts, uint32_t layer, double accuracy, uint64_t *rng,
			     uint32_t *out, uint32_t max)
{
	const uint32_t *next;
	uint32_t k, n = 0;

	if (layer + 1 >= n_layers)
		return 0;
	if (!*rng)
		*rng = 1;
	next = moe_trace_layer(tok, layer + 1, &k);
	for (uint32_t i = 0; i < k && n < max; i++) {
		uint32_t wrong;

		if (hint_uniform(rng) < accuracy) {
			out[n++] = next[i];
			continue;
		}
		if (k + n >= n_experts)
			continue; /* no wrong expert left to name */
		/* A uniform expert among those the next layer does not use and not named yet. */
		do {
			wrong = (uint32_t)(hint_uniform(rng) * n_experts);
		} while (hint_has(next, k, wrong) || hint_has(out, n, wrong));
		out[n++] = wrong;
	}
	return n;
}
