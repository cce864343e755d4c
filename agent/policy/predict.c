// SPDX-License-Identifier: MIT
/*
 * Next-layer prediction from transition counts: for each layer l < last,
 * count[l][a][b] says how often expert a at layer l was followed by expert b
 * at layer l + 1 in the same token. The prediction for layer l + 1 sums the
 * rows of the experts selected at l. Counts are 16-bit; a row that would
 * overflow is halved, which also ages old behaviour out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

struct moe_predictor {
	uint32_t n_layers, n_local;
	uint16_t *count; /* [n_layers - 1][n_local][n_local] */
	uint32_t *prev;	 /* the latest observed selection */
	uint32_t *cur;	 /* scratch: the selection being observed */
	uint32_t n_prev;
	uint32_t prev_layer;
	bool have_prev;
	bool *seen; /* scratch: dedupes a selection */
};

int moe_predictor_create(uint32_t n_layers, uint32_t n_local, struct moe_predictor **out)
{
	struct moe_predictor *pr;
	size_t cells;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!n_layers || !n_local || n_local > UINT32_MAX / n_local)
		return -EINVAL;
	cells = (size_t)(n_layers - 1) * n_local * n_local;
	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return -ENOMEM;
	pr->n_layers = n_layers;
	pr->n_local = n_local;
	pr->count = cells ? calloc(cells, sizeof(*pr->count)) : NULL;
	pr->prev = malloc(sizeof(*pr->prev) * n_local);
	pr->cur = malloc(sizeof(*pr->cur) * n_local);
	pr->seen = calloc(n_local, sizeof(*pr->seen));
	if ((cells && !pr->count) || !pr->prev || !pr->cur || !pr->seen) {
		moe_predictor_destroy(pr);
		return -ENOMEM;
	}
	*out = pr;
	return 0;
}

void moe_predictor_destroy(struct moe_predictor *pr)
{
	if (!pr)
		return;
	free(pr->count);
	free(pr->prev);
	free(pr->cur);
	free(pr->seen);
	free(pr);
}

static uint16_t *moe_predictor_row(const struct moe_predictor *pr, uint32_t layer, uint32_t a)
{
	return pr->count + ((size_t)layer * pr->n_local + a) * pr->n_local;
}

void moe_predictor_observe(struct moe_predictor *pr, uint32_t layer, const uint32_t *experts,
			   uint32_t n)
{
	uint32_t n_cur = 0;

	if (!pr || layer >= pr->n_layers || (n && !experts))
		return;
	/* The distinct, in-range ids of this selection. */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t e = experts[i];

		if (e < pr->n_local && !pr->seen[e]) {
			pr->seen[e] = true;
			pr->cur[n_cur++] = e;
		}
	}
	for (uint32_t i = 0; i < n_cur; i++)
		pr->seen[pr->cur[i]] = false;

	if (pr->have_prev && layer == pr->prev_layer + 1) {
		for (uint32_t i = 0; i < pr->n_prev; i++) {
			uint16_t *row = moe_predictor_row(pr, pr->prev_layer, pr->prev[i]);

			for (uint32_t j = 0; j < n_cur; j++) {
				if (row[pr->cur[j]] == UINT16_MAX)
					for (uint32_t b = 0; b < pr->n_local; b++)
						row[b] /= 2;
				row[pr->cur[j]]++;
			}
		}
	}
	memcpy(pr->prev, pr->cur, sizeof(*pr->prev) * n_cur);
	pr->n_prev = n_cur;
	pr->prev_layer = layer;
	pr->have_prev = true;
}

int moe_predictor_predict(const struct moe_predictor *pr, uint32_t layer, const uint32_t *experts,
			  uint32_t n, uint32_t *out, uint32_t max)
{
	uint64_t *score;
	uint32_t written = 0;

	if (!pr || layer >= pr->n_layers || (n && !experts) || (max && !out))
		return -EINVAL;
	if (layer + 1 == pr->n_layers || !max)
		return 0;
	score = calloc(pr->n_local, sizeof(*score));
	if (!score)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const uint16_t *row;
		bool repeated = false;

		/* A repeated id would count its row twice; the selection is a set. */
		for (uint32_t j = 0; j < i; j++)
			repeated |= experts[j] == experts[i];
		if (experts[i] >= pr->n_local || repeated)
			continue;
		row = moe_predictor_row(pr, layer, experts[i]);
		for (uint32_t b = 0; b < pr->n_local; b++)
			score[b] += row[b];
	}
	/* Partial selection sort: max is a handful (top-k). */
	while (written < max) {
		uint32_t best = UINT32_MAX;

		for (uint32_t b = 0; b < pr->n_local; b++)
			if (score[b] && (best == UINT32_MAX || score[b] > score[best]))
				best = b;
		if (best == UINT32_MAX)
			break;
		out[written++] = best;
		score[best] = 0;
	}
	free(score);
	return (int)written;
}
