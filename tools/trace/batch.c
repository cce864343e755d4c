// SPDX-License-Identifier: MIT
/* Batched replay: the union of B stretches of a view, step by step (see batch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"

static struct moe_trace *batch_alloc(const struct moe_trace *src, uint32_t steps, size_t n_ids)
{
	struct moe_trace *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->path = strdup(src->path ? src->path : "");
	t->model = strdup(src->model ? src->model : "");
	t->prompts = calloc(1, sizeof(*t->prompts));
	if (t->prompts)
		t->prompts[0] = strdup("");
	t->n_prompts = t->prompts && t->prompts[0] ? 1 : 0;
	t->tokens = calloc(steps, sizeof(*t->tokens));
	t->id_store = malloc(sizeof(*t->id_store) * (n_ids ? n_ids : 1));
	t->start_store = malloc(sizeof(*t->start_store) * (size_t)steps * (src->n_layers + 1));
	if (!t->path || !t->model || !t->n_prompts || !t->tokens || !t->id_store ||
	    !t->start_store) {
		moe_trace_free(t);
		return NULL;
	}
	t->n_layers = src->n_layers;
	t->n_experts = src->n_experts;
	return t;
}

int moe_trace_batch(const struct moe_trace_view *v, uint32_t batch, struct moe_trace **out)
{
	const struct moe_trace *src;
	struct moe_trace *t;
	uint32_t steps, *seen;
	size_t n_ids = 0, at = 0;

	if (!v || !v->trace || !out || !batch || v->n < batch)
		return -EINVAL;
	src = v->trace;
	steps = v->n / batch;
	/* At most the sum of the stretches' selections. */
	for (uint32_t i = 0; i < steps * batch; i++)
		n_ids += v->tokens[i]->start[src->n_layers] - v->tokens[i]->start[0];
	t = batch_alloc(src, steps, n_ids);
	seen = calloc(src->n_experts, sizeof(*seen));
	if (!t || !seen) {
		moe_trace_free(t);
		free(seen);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < steps; i++) {
		struct moe_trace_token *tok = &t->tokens[i];
		uint32_t *start = t->start_store + (size_t)i * (src->n_layers + 1);

		tok->pos = i;
		tok->phase = v->tokens[i]->phase;
		tok->ids = t->id_store;
		tok->start = start;
		for (uint32_t l = 0; l < src->n_layers; l++) {
			/* seen[e] == stamp: e is in this step's union already. */
			uint32_t stamp = i * src->n_layers + l + 1, n = 0;

			start[l] = (uint32_t)at;
			for (uint32_t b = 0; b < batch; b++) {
				uint32_t k;
				const uint32_t *sel =
				    moe_trace_layer(v->tokens[b * steps + i], l, &k);

				for (uint32_t j = 0; j < k; j++) {
					if (seen[sel[j]] == stamp)
						continue;
					seen[sel[j]] = stamp;
					t->id_store[at++] = sel[j];
					n++;
				}
			}
			if (n > t->top_k)
				t->top_k = n;
		}
		start[src->n_layers] = (uint32_t)at;
	}
	t->n_tokens = steps;
	free(seen);
	*out = t;
	return 0;
}
