/* SPDX-License-Identifier: MIT */
/*
 * MoE routing traces: one reader for the two formats of the traces in
 * tests/traces (see its README.md).
 *
 *   JSON lines: one token per line, {"tok": n, "layers": [[e0, e1, ...], ...]},
 *     one list of expert ids per layer. Optional "prompt" (a string) and
 *     "phase" ("prefill" or "decode", default decode) keys group the lines;
 *     lines of one prompt need not be adjacent. n_experts is the largest id
 *     plus one.
 *   One JSON object: {"num_layers", "num_experts", "top_k"?, "model"?,
 *     "prompts": {name: {"prefill": [token][layer][k], "decode": [step][layer][k]}}}.
 *
 * In memory a trace is a list of tokens in execution order (prompt by prompt,
 * each prompt's prefill then its decode), each token holding n_layers lists
 * of expert ids.
 */
#ifndef MOECACHE_TOOLS_TRACE_TRACE_H
#define MOECACHE_TOOLS_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum moe_trace_phase {
	MOE_TRACE_ALL = 0, /* as a selection: both phases */
	MOE_TRACE_PREFILL = 1,
	MOE_TRACE_DECODE = 2,
};

struct moe_trace_token {
	uint32_t prompt; /* index into moe_trace.prompts */
	uint32_t phase;	 /* MOE_TRACE_PREFILL or MOE_TRACE_DECODE */
	uint32_t pos;	 /* position inside its prompt's phase ("tok" for JSON lines) */
	/* Layer l selected ids[start[l]] .. ids[start[l + 1] - 1]. */
	const uint32_t *ids;
	const uint32_t *start; /* n_layers + 1 offsets into ids */
};

struct moe_trace {
	char *path;
	char *model; /* "" when the file does not say */
	uint32_t n_layers;
	uint32_t n_experts;
	uint32_t top_k; /* the most experts any layer of any token selected */
	uint32_t n_prompts;
	char **prompts; /* names; a JSON lines file without "prompt" has one: "" */
	uint32_t n_tokens;
	struct moe_trace_token *tokens;
	uint32_t *id_store; /* backing storage of every token's ids and starts */
	uint32_t *start_store;
};

/* A subset of a trace's tokens, in trace order. */
struct moe_trace_view {
	const struct moe_trace *trace;
	uint32_t n;
	const struct moe_trace_token **tokens;
};

/*
 * The traces the tree ships: tests/traces in the source tree, staged by the
 * build at build/share/moecache/traces and installed at
 * DATAROOTDIR/moecache/traces, always MOE_TRACE_SHARE_DIR beside the folder
 * of the program that reads them (bin/, sbin/).
 */
#define MOE_TRACE_SHARE_DIR "share/moecache/traces"
/* The trace a program replays when it is given none. */
#define MOE_TRACE_DEFAULT "olmoe-1b-7b.decode.jsonl"

/*
 * The file a trace name stands for, in path (len bytes): name itself when it
 * has a '/' or is a readable file; else name in the folder $MOECACHE_TRACES,
 * then in the shipped traces beside this program (MOE_TRACE_SHARE_DIR).
 * Returns 0, -ENOENT (found nowhere), -ENAMETOOLONG or -EINVAL.
 */
int moe_trace_find(const char *name, char *path, size_t len);

/*
 * Reads and checks the trace name stands for (moe_trace_find). Returns 0, -EINVAL for malformed content (err,
 * if not NULL, gets a message naming the file and the line or field), -ENOMEM,
 * or the -errno of opening/reading the file. On error *out is NULL.
 */
int moe_trace_load(const char *name, struct moe_trace **out, char *err, size_t err_len);
/* Same, from a buffer of len bytes; name stands for the file in messages. */
int moe_trace_parse(const char *name, const char *text, size_t len, struct moe_trace **out,
		    char *err, size_t err_len);
void moe_trace_free(struct moe_trace *t);

/* Layer layer's selection in tok: *n ids at the returned pointer. */
static inline const uint32_t *moe_trace_layer(const struct moe_trace_token *tok, uint32_t layer,
					      uint32_t *n)
{
	*n = tok->start[layer + 1] - tok->start[layer];
	return tok->ids + tok->start[layer];
}

/* "prefill", "decode", "all" <-> enum; parse returns 0 or -EINVAL. */
int moe_trace_phase_parse(const char *s, enum moe_trace_phase *out);
const char *moe_trace_phase_name(enum moe_trace_phase phase);

/* The index of the prompt called name, or -ENOENT. */
int moe_trace_prompt_index(const struct moe_trace *t, const char *name);

/*
 * The tokens of prompt (NULL: every prompt) in phase (MOE_TRACE_ALL: both),
 * in trace order. Returns 0, -ENOENT for an unknown prompt, -EINVAL, -ENOMEM.
 * An empty selection is not an error (out->n is 0).
 */
int moe_trace_select(const struct moe_trace *t, const char *prompt, enum moe_trace_phase phase,
		     struct moe_trace_view *out);
void moe_trace_view_free(struct moe_trace_view *v);

/*
 * How soon experts come back, over the view's tokens in order: rate[g - 1]
 * for g = 1 .. n_gaps is the share of uses (token t, layer, expert), among
 * those whose expert that layer does not use again in tokens t+1 .. t+g-1,
 * that it uses at token t+g. Gap g counts only uses at least g tokens
 * before the end. A gap with no such use gets 0. Returns 0, -EINVAL (no gaps), -ENOMEM.
 */
int moe_trace_return_rates(const struct moe_trace_view *v, uint32_t n_gaps, double *rate);

#endif /* MOECACHE_TOOLS_TRACE_TRACE_H */
