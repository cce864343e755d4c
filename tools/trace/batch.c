// SPDX-License-Identifier: MIT
/* Batched replay: steps that are unions of several tokens (see batch.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"

/* Steps as groups of the view's tokens: step s is tokens member[first[s] .. first[s + 1]). */
struct batch_groups {
	uint32_t n_steps;
	uint32_t *first;  /* n_steps + 1 */
	uint32_t *member; /* indexes into the view */
};

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
	t->tokens = calloc(steps ? steps : 1, sizeof(*t->tokens));
	t->id_store = malloc(sizeof(*t->id_store) * (n_ids ? n_ids : 1));
	t->start_store =
	    malloc(sizeof(*t->start_store) * ((size_t)steps ? steps : 1) * (src->n_layers + 1));
	if (!t->path || !t->model || !t->n_prompts || !t->tokens || !t->id_store ||
	    !t->start_store) {
		moe_trace_free(t);
		return NULL;
	}
	t->n_layers = src->n_layers;
	t->n_experts = src->n_experts;
	return t;
}

/* ids[0, n) in increasing order (n is at most a layer's experts). */
static void batch_sort_ids(uint32_t *ids, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		uint32_t id = ids[i], j = i;

		for (; j > 0 && ids[j - 1] > id; j--)
			ids[j] = ids[j - 1];
		ids[j] = id;
	}
}

/* The trace whose step s, layer l is the union over group s of the tokens' layer l, by id. */
static int batch_build(const struct moe_trace_view *v, const struct batch_groups *g,
		       struct moe_trace **out)
{
	const struct moe_trace *src = v->trace;
	struct moe_trace *t;
	size_t n_ids = 0, at = 0;
	uint32_t *seen;

	for (uint32_t m = 0; m < g->first[g->n_steps]; m++) {
		const struct moe_trace_token *tok = v->tokens[g->member[m]];

		n_ids += tok->start[src->n_layers] - tok->start[0];
	}
	t = batch_alloc(src, g->n_steps, n_ids);
	seen = calloc(src->n_experts, sizeof(*seen));
	if (!t || !seen) {
		moe_trace_free(t);
		free(seen);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < g->n_steps; i++) {
		struct moe_trace_token *tok = &t->tokens[i];
		uint32_t *start = t->start_store + (size_t)i * (src->n_layers + 1);

		tok->pos = i;
		tok->phase = v->tokens[g->member[g->first[i]]]->phase;
		tok->ids = t->id_store;
		tok->start = start;
		for (uint32_t l = 0; l < src->n_layers; l++) {
			/* seen[e] == stamp: e is in this step's union already. */
			uint32_t stamp = i * src->n_layers + l + 1, n = 0;

			start[l] = (uint32_t)at;
			for (uint32_t m = g->first[i]; m < g->first[i + 1]; m++) {
				uint32_t k;
				const uint32_t *sel =
				    moe_trace_layer(v->tokens[g->member[m]], l, &k);

				for (uint32_t j = 0; j < k; j++) {
					if (seen[sel[j]] == stamp)
						continue;
					seen[sel[j]] = stamp;
					t->id_store[at++] = sel[j];
					n++;
				}
			}
			batch_sort_ids(t->id_store + start[l], n);
			if (n > t->top_k)
				t->top_k = n;
		}
		start[src->n_layers] = (uint32_t)at;
	}
	t->n_tokens = g->n_steps;
	free(seen);
	*out = t;
	return 0;
}

static int batch_groups_alloc(struct batch_groups *g, uint32_t n_tokens)
{
	g->first = calloc((size_t)n_tokens + 1, sizeof(*g->first));
	g->member = calloc(n_tokens ? n_tokens : 1, sizeof(*g->member));
	if (!g->first || !g->member) {
		free(g->first);
		free(g->member);
		return -ENOMEM;
	}
	return 0;
}

static int batch_groups_run(const struct moe_trace_view *v, struct batch_groups *g,
			    struct moe_trace **out)
{
	int ret = batch_build(v, g, out);

	free(g->first);
	free(g->member);
	return ret;
}

int moe_trace_batch(const struct moe_trace_view *v, uint32_t batch, struct moe_trace **out)
{
	struct batch_groups g = {0};
	uint32_t steps;

	if (!v || !v->trace || !out || !batch || v->n < batch)
		return -EINVAL;
	steps = v->n / batch;
	if (batch_groups_alloc(&g, steps * batch))
		return -ENOMEM;
	g.n_steps = steps;
	for (uint32_t i = 0; i < steps; i++) {
		g.first[i + 1] = (i + 1) * batch;
		for (uint32_t b = 0; b < batch; b++)
			g.member[i * batch + b] = moe_trace_batch_member(v->n, batch, i, b);
	}
	return batch_groups_run(v, &g, out);
}

int moe_trace_prefill_batched(const struct moe_trace_view *v, struct moe_trace **out)
{
	struct batch_groups g = {0};

	if (!v || !v->trace || !out || !v->n)
		return -EINVAL;
	if (batch_groups_alloc(&g, v->n))
		return -ENOMEM;
	for (uint32_t i = 0; i < v->n; i++) {
		const struct moe_trace_token *tok = v->tokens[i],
					     *prev = i ? v->tokens[i - 1] : NULL;
		bool joins = prev && tok->phase == MOE_TRACE_PREFILL &&
			     prev->phase == MOE_TRACE_PREFILL && prev->prompt == tok->prompt;

		if (!joins)
			g.first[g.n_steps++] = i;
		g.member[i] = i;
	}
	g.first[g.n_steps] = v->n;
	return batch_groups_run(v, &g, out);
}
