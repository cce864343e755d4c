// SPDX-License-Identifier: MIT
/* The trace reader (see trace.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include <json-c/json.h>

#include "trace.h"

/* Bounds that no real model reaches; they keep sizes well inside uint32. */
#define MOE_TRACE_MAX_LAYERS 4096
#define MOE_TRACE_MAX_EXPERTS (1u << 20)

struct trace_token_rec {
	uint32_t prompt, phase, pos;
	size_t ids_base, start_base;
};

struct trace_builder {
	const char *name;
	char *err;
	size_t err_len;
	struct moe_trace *t;
	uint32_t *ids;
	size_t n_ids, cap_ids;
	uint32_t *starts;
	size_t n_starts, cap_starts;
	struct trace_token_rec *toks;
	size_t n_toks, cap_toks;
	uint32_t max_id_plus_one;
};

static int trace_fail(struct trace_builder *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!b->err || !b->err_len)
		return -EINVAL;
	n = snprintf(b->err, b->err_len, "%s: ", b->name);
	if (n >= 0 && (size_t)n < b->err_len) {
		va_start(ap, fmt);
		vsnprintf(b->err + n, b->err_len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int trace_grow(void **buf, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *nbuf;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 64;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		ncap *= 2;
	}
	nbuf = realloc(*buf, ncap * elem);
	if (!nbuf)
		return -ENOMEM;
	*buf = nbuf;
	*cap = ncap;
	return 0;
}

static int trace_prompt_add(struct trace_builder *b, const char *name, uint32_t *idx)
{
	struct moe_trace *t = b->t;
	char **np;

	for (uint32_t i = 0; i < t->n_prompts; i++) {
		if (!strcmp(t->prompts[i], name)) {
			*idx = i;
			return 0;
		}
	}
	np = realloc(t->prompts, sizeof(*np) * (t->n_prompts + 1));
	if (!np)
		return -ENOMEM;
	t->prompts = np;
	np[t->n_prompts] = strdup(name);
	if (!np[t->n_prompts])
		return -ENOMEM;
	*idx = t->n_prompts++;
	return 0;
}

static int trace_json_u32(struct json_object *o, uint32_t max, uint32_t *out)
{
	int64_t v;

	if (!json_object_is_type(o, json_type_int))
		return -EINVAL;
	errno = 0;
	v = json_object_get_int64(o);
	if (errno || v < 0 || (uint64_t)v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/*
 * Appends one token from its per-layer lists. where names the token in
 * messages ("line 12" or "prompts.code.decode[3]"). expert_limit is 0 when
 * the format does not say how many experts there are.
 */
static int trace_add_token(struct trace_builder *b, struct json_object *layers, const char *where,
			   uint32_t prompt, uint32_t phase, uint32_t pos, uint32_t expert_limit,
			   uint32_t top_k_limit)
{
	struct moe_trace *t = b->t;
	struct trace_token_rec *rec;
	size_t n_layers;
	int err;

	if (!json_object_is_type(layers, json_type_array))
		return trace_fail(b, "%s: \"layers\" is not an array of per-layer lists", where);
	n_layers = json_object_array_length(layers);
	if (!n_layers || n_layers > MOE_TRACE_MAX_LAYERS)
		return trace_fail(b, "%s: %zu layers (want 1 to %u)", where, n_layers,
				  MOE_TRACE_MAX_LAYERS);
	if (!t->n_layers)
		t->n_layers = (uint32_t)n_layers;
	if (n_layers != t->n_layers)
		return trace_fail(b, "%s: %zu layers where the trace has %u", where, n_layers,
				  t->n_layers);
	err = trace_grow((void **)&b->toks, &b->cap_toks, b->n_toks + 1, sizeof(*b->toks));
	if (!err)
		err = trace_grow((void **)&b->starts, &b->cap_starts, b->n_starts + n_layers + 1,
				 sizeof(*b->starts));
	if (err)
		return err;
	rec = &b->toks[b->n_toks];
	rec->prompt = prompt;
	rec->phase = phase;
	rec->pos = pos;
	rec->ids_base = b->n_ids;
	rec->start_base = b->n_starts;
	for (size_t l = 0; l < n_layers; l++) {
		struct json_object *sel = json_object_array_get_idx(layers, l);
		size_t k;

		if (!json_object_is_type(sel, json_type_array))
			return trace_fail(b, "%s: layer %zu: not a list of expert ids", where, l);
		k = json_object_array_length(sel);
		if (top_k_limit && k > top_k_limit)
			return trace_fail(b, "%s: layer %zu: %zu experts, more than top_k %u",
					  where, l, k, top_k_limit);
		if (k > MOE_TRACE_MAX_EXPERTS)
			return trace_fail(b, "%s: layer %zu: %zu experts", where, l, k);
		b->starts[b->n_starts++] = (uint32_t)(b->n_ids - rec->ids_base);
		err = trace_grow((void **)&b->ids, &b->cap_ids, b->n_ids + k, sizeof(*b->ids));
		if (err)
			return err;
		for (size_t i = 0; i < k; i++) {
			uint32_t id;

			if (trace_json_u32(
				json_object_array_get_idx(sel, i),
				expert_limit ? expert_limit - 1 : MOE_TRACE_MAX_EXPERTS - 1, &id)) {
				if (expert_limit)
					return trace_fail(
					    b,
					    "%s: layer %zu, entry %zu: not an expert id in [0, %u)",
					    where, l, i, expert_limit);
				return trace_fail(b, "%s: layer %zu, entry %zu: not an expert id",
						  where, l, i);
			}
			for (size_t j = rec->ids_base + b->starts[b->n_starts - 1]; j < b->n_ids;
			     j++)
				if (b->ids[j] == id)
					return trace_fail(b,
							  "%s: layer %zu: expert %u selected twice",
							  where, l, id);
			b->ids[b->n_ids++] = id;
			if (id + 1 > b->max_id_plus_one)
				b->max_id_plus_one = id + 1;
		}
		if (k > t->top_k)
			t->top_k = (uint32_t)k;
	}
	b->starts[b->n_starts++] = (uint32_t)(b->n_ids - rec->ids_base);
	b->n_toks++;
	return 0;
}

static unsigned int trace_line_of(const char *text, size_t offset)
{
	unsigned int line = 1;

	for (size_t i = 0; i < offset; i++)
		line += text[i] == '\n';
	return line;
}

static const char *trace_tokener_error(struct json_tokener *tok)
{
	enum json_tokener_error e = json_tokener_get_error(tok);

	return e == json_tokener_continue ? "unexpected end of input" : json_tokener_error_desc(e);
}

static int trace_parse_lines(struct trace_builder *b, const char *text, size_t len)
{
	struct json_tokener *tok = json_tokener_new();
	unsigned int line = 0;
	size_t at = 0;
	int err = 0;

	if (!tok)
		return -ENOMEM;
	while (at < len && !err) {
		const char *s = text + at;
		const char *eol = memchr(s, '\n', len - at);
		size_t n = eol ? (size_t)(eol - s) : len - at;
		struct json_object *o = NULL, *v;
		uint32_t prompt, phase = MOE_TRACE_DECODE, pos;
		char where[32];
		size_t end, i;

		line++;
		at += n + (eol ? 1 : 0);
		for (i = 0; i < n && isspace((unsigned char)s[i]); i++)
			;
		if (i == n)
			continue;
		snprintf(where, sizeof(where), "line %u", line);
		json_tokener_reset(tok);
		o = json_tokener_parse_ex(tok, s, (int)n);
		if (!o) {
			err =
			    trace_fail(b, "%s: invalid JSON: %s", where, trace_tokener_error(tok));
			break;
		}
		end = json_tokener_get_parse_end(tok);
		for (i = end; i < n && isspace((unsigned char)s[i]); i++)
			;
		if (i != n) {
			err = trace_fail(b, "%s: text after the JSON object", where);
		} else if (!json_object_is_type(o, json_type_object)) {
			err = trace_fail(b, "%s: not a JSON object", where);
		} else if (!json_object_object_get_ex(o, "layers", &v)) {
			err = trace_fail(b, "%s: no \"layers\"", where);
		} else {
			struct json_object *tv, *pv, *hv;
			const char *pname = "";

			pos = (uint32_t)b->n_toks;
			if (json_object_object_get_ex(o, "tok", &tv) &&
			    trace_json_u32(tv, UINT32_MAX, &pos))
				err =
				    trace_fail(b, "%s: \"tok\" is not an unsigned integer", where);
			if (!err && json_object_object_get_ex(o, "prompt", &pv)) {
				if (!json_object_is_type(pv, json_type_string))
					err =
					    trace_fail(b, "%s: \"prompt\" is not a string", where);
				else
					pname = json_object_get_string(pv);
			}
			if (!err && json_object_object_get_ex(o, "phase", &hv)) {
				enum moe_trace_phase ph;

				if (!json_object_is_type(hv, json_type_string) ||
				    moe_trace_phase_parse(json_object_get_string(hv), &ph) ||
				    ph == MOE_TRACE_ALL)
					err = trace_fail(
					    b, "%s: \"phase\" is not \"prefill\" or \"decode\"",
					    where);
				else
					phase = ph;
			}
			if (!err)
				err = trace_prompt_add(b, pname, &prompt);
			if (!err)
				err = trace_add_token(b, v, where, prompt, phase, pos, 0, 0);
		}
		json_object_put(o);
	}
	json_tokener_free(tok);
	if (!err)
		b->t->n_experts = b->max_id_plus_one;
	return err;
}

static int trace_parse_phase(struct trace_builder *b, struct json_object *list, const char *pname,
			     const char *phase_name, uint32_t prompt, uint32_t phase,
			     uint32_t top_k)
{
	size_t n;

	if (!json_object_is_type(list, json_type_array))
		return trace_fail(b, "prompts.%s.%s: not a list of tokens", pname, phase_name);
	n = json_object_array_length(list);
	for (size_t i = 0; i < n; i++) {
		char where[256];
		int err;

		snprintf(where, sizeof(where), "prompts.%s.%s[%zu]", pname, phase_name, i);
		err = trace_add_token(b, json_object_array_get_idx(list, i), where, prompt, phase,
				      (uint32_t)i, b->t->n_experts, top_k);
		if (err)
			return err;
	}
	return 0;
}

static int trace_parse_object(struct trace_builder *b, struct json_object *root)
{
	struct moe_trace *t = b->t;
	struct json_object *v, *prompts;
	uint32_t top_k = 0, n_layers;

	if (!json_object_object_get_ex(root, "num_layers", &v) ||
	    trace_json_u32(v, MOE_TRACE_MAX_LAYERS, &n_layers) || !n_layers)
		return trace_fail(b, "\"num_layers\": missing or not in [1, %u]",
				  MOE_TRACE_MAX_LAYERS);
	t->n_layers = n_layers;
	if (!json_object_object_get_ex(root, "num_experts", &v) ||
	    trace_json_u32(v, MOE_TRACE_MAX_EXPERTS, &t->n_experts) || !t->n_experts)
		return trace_fail(b, "\"num_experts\": missing or not in [1, %u]",
				  MOE_TRACE_MAX_EXPERTS);
	if (json_object_object_get_ex(root, "top_k", &v) &&
	    (trace_json_u32(v, t->n_experts, &top_k) || !top_k))
		return trace_fail(b, "\"top_k\": not in [1, num_experts]");
	if (json_object_object_get_ex(root, "model", &v)) {
		if (!json_object_is_type(v, json_type_string))
			return trace_fail(b, "\"model\": not a string");
		free(t->model);
		t->model = strdup(json_object_get_string(v));
		if (!t->model)
			return -ENOMEM;
	}
	if (!json_object_object_get_ex(root, "prompts", &prompts) ||
	    !json_object_is_type(prompts, json_type_object))
		return trace_fail(b, "\"prompts\": missing or not an object");

	json_object_object_foreach(prompts, pname, pval)
	{
		struct json_object *list;
		uint32_t prompt;
		int err;

		if (!json_object_is_type(pval, json_type_object))
			return trace_fail(b, "prompts.%s: not an object", pname);
		err = trace_prompt_add(b, pname, &prompt);
		if (err)
			return err;
		if (json_object_object_get_ex(pval, "prefill", &list)) {
			err = trace_parse_phase(b, list, pname, "prefill", prompt,
						MOE_TRACE_PREFILL, top_k);
			if (err)
				return err;
		}
		if (json_object_object_get_ex(pval, "decode", &list)) {
			err = trace_parse_phase(b, list, pname, "decode", prompt, MOE_TRACE_DECODE,
						top_k);
			if (err)
				return err;
		}
	}
	return 0;
}

void moe_trace_free(struct moe_trace *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->n_prompts; i++)
		free(t->prompts[i]);
	free(t->prompts);
	free(t->path);
	free(t->model);
	free(t->tokens);
	free(t->id_store);
	free(t->start_store);
	free(t);
}

/* Moves the builder's arrays into the trace and points the tokens at them. */
static int trace_finish(struct trace_builder *b)
{
	struct moe_trace *t = b->t;

	if (!b->n_toks)
		return trace_fail(b, "no tokens");
	if (b->max_id_plus_one > t->n_experts)
		return trace_fail(b, "expert id %u out of range", b->max_id_plus_one - 1);
	t->tokens = calloc(b->n_toks, sizeof(*t->tokens));
	if (!t->tokens)
		return -ENOMEM;
	t->id_store = b->ids;
	t->start_store = b->starts;
	b->ids = NULL;
	b->starts = NULL;
	/* An all-empty trace still needs a valid ids pointer. */
	if (!t->id_store) {
		t->id_store = calloc(1, sizeof(*t->id_store));
		if (!t->id_store)
			return -ENOMEM;
	}
	for (size_t i = 0; i < b->n_toks; i++) {
		t->tokens[i].prompt = b->toks[i].prompt;
		t->tokens[i].phase = b->toks[i].phase;
		t->tokens[i].pos = b->toks[i].pos;
		t->tokens[i].ids = t->id_store + b->toks[i].ids_base;
		t->tokens[i].start = t->start_store + b->toks[i].start_base;
	}
	t->n_tokens = (uint32_t)b->n_toks;
	return 0;
}

int moe_trace_parse(const char *name, const char *text, size_t len, struct moe_trace **out,
		    char *err, size_t err_len)
{
	struct trace_builder b = {
	    .name = name ? name : "trace",
	    .err = err,
	    .err_len = err_len,
	};
	struct json_tokener *tok;
	struct json_object *first;
	size_t end;
	int ret;

	if (err && err_len)
		err[0] = '\0';
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!text && len)
		return -EINVAL;
	if (len > INT32_MAX)
		return trace_fail(&b, "too large");
	if (len && memchr(text, '\0', len))
		return trace_fail(
		    &b, "line %u: a NUL byte in a text file",
		    trace_line_of(text, (size_t)((const char *)memchr(text, '\0', len) - text)));
	b.t = calloc(1, sizeof(*b.t));
	if (!b.t)
		return -ENOMEM;
	b.t->path = strdup(b.name);
	b.t->model = strdup("");
	tok = json_tokener_new();
	if (!b.t->path || !b.t->model || !tok) {
		ret = -ENOMEM;
		goto out;
	}
	/* The first JSON value tells the format: the object form has "prompts". */
	first = json_tokener_parse_ex(tok, text ? text : "", (int)len);
	end = json_tokener_get_parse_end(tok);
	if (first && json_object_is_type(first, json_type_object) &&
	    json_object_object_get_ex(first, "prompts", NULL)) {
		size_t i;

		for (i = end; i < len && isspace((unsigned char)text[i]); i++)
			;
		if (i != len)
			ret = trace_fail(&b, "line %u: text after the JSON object",
					 trace_line_of(text, i));
		else
			ret = trace_parse_object(&b, first);
	} else {
		ret = trace_parse_lines(&b, text ? text : "", len);
	}
	json_object_put(first);
	if (!ret)
		ret = trace_finish(&b);
out:
	json_tokener_free(tok);
	free(b.ids);
	free(b.starts);
	free(b.toks);
	if (ret) {
		moe_trace_free(b.t);
		return ret;
	}
	*out = b.t;
	return 0;
}

/* dir/name in path if that is a readable file: 0, -ENOENT or -ENAMETOOLONG. */
static int trace_try(const char *dir, const char *name, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return access(path, R_OK) ? -ENOENT : 0;
}

int moe_trace_find(const char *name, char *path, size_t len)
{
	char exe[PATH_MAX], dir[PATH_MAX + 32], shipped[PATH_MAX];
	const char *env = getenv("MOECACHE_TRACES");
	ssize_t n;
	int ret;

	if (!name || !*name || !path || !len)
		return -EINVAL;
	if (strchr(name, '/') || !access(name, R_OK)) {
		if ((size_t)snprintf(path, len, "%s", name) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	if (env && *env) {
		ret = trace_try(env, name, path, len);
		if (ret != -ENOENT)
			return ret;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s/../%s", dirname(exe), MOE_TRACE_SHARE_DIR);
	if (!realpath(dir, shipped))
		return -ENOENT;
	return trace_try(shipped, name, path, len);
}

int moe_trace_load(const char *name, struct moe_trace **out, char *err, size_t err_len)
{
	char path[PATH_MAX];
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int ret = 0;

	if (err && err_len)
		err[0] = '\0';
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!name)
		return -EINVAL;
	ret = moe_trace_find(name, path, sizeof(path));
	if (ret == -ENOENT) {
		if (err && err_len)
			snprintf(err, err_len,
				 "%s: no such file, nor a trace of that name in $MOECACHE_TRACES "
				 "or the installed traces",
				 name);
		return ret;
	}
	if (ret) {
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", name, strerror(-ret));
		return ret;
	}
	f = fopen(path, "rb");
	if (!f) {
		ret = -errno;
		if (err && err_len)
			snprintf(err, err_len, "%s: %s", path, strerror(-ret));
		return ret;
	}
	for (;;) {
		size_t got;

		if (trace_grow((void **)&buf, &cap, len + 65536, 1)) {
			ret = -ENOMEM;
			break;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (!got) {
			if (ferror(f)) {
				ret = -EIO;
				if (err && err_len)
					snprintf(err, err_len, "%s: read error", path);
			}
			break;
		}
	}
	fclose(f);
	if (!ret)
		ret = moe_trace_parse(path, buf, len, out, err, err_len);
	free(buf);
	return ret;
}

int moe_trace_phase_parse(const char *s, enum moe_trace_phase *out)
{
	if (!s || !out)
		return -EINVAL;
	if (!strcmp(s, "all"))
		*out = MOE_TRACE_ALL;
	else if (!strcmp(s, "prefill"))
		*out = MOE_TRACE_PREFILL;
	else if (!strcmp(s, "decode"))
		*out = MOE_TRACE_DECODE;
	else
		return -EINVAL;
	return 0;
}

const char *moe_trace_phase_name(enum moe_trace_phase phase)
{
	switch (phase) {
	case MOE_TRACE_PREFILL:
		return "prefill";
	case MOE_TRACE_DECODE:
		return "decode";
	default:
		return "all";
	}
}

int moe_trace_prompt_index(const struct moe_trace *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	for (uint32_t i = 0; i < t->n_prompts; i++)
		if (!strcmp(t->prompts[i], name))
			return (int)i;
	return -ENOENT;
}

int moe_trace_select(const struct moe_trace *t, const char *prompt, enum moe_trace_phase phase,
		     struct moe_trace_view *out)
{
	int want = -1;

	if (!t || !out || phase > MOE_TRACE_DECODE)
		return -EINVAL;
	out->trace = t;
	out->n = 0;
	out->tokens = NULL;
	if (prompt) {
		want = moe_trace_prompt_index(t, prompt);
		if (want < 0)
			return want;
	}
	out->tokens = calloc(t->n_tokens ? t->n_tokens : 1, sizeof(*out->tokens));
	if (!out->tokens)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_tokens; i++) {
		const struct moe_trace_token *tok = &t->tokens[i];

		if (want >= 0 && tok->prompt != (uint32_t)want)
			continue;
		if (phase != MOE_TRACE_ALL && tok->phase != (uint32_t)phase)
			continue;
		out->tokens[out->n++] = tok;
	}
	return 0;
}

void moe_trace_view_free(struct moe_trace_view *v)
{
	if (!v)
		return;
	free(v->tokens);
	v->tokens = NULL;
	v->n = 0;
}

int moe_trace_return_rates(const struct moe_trace_view *v, uint32_t n_gaps, double *rate)
{
	const struct moe_trace *t = v->trace;
	size_t per_token = (size_t)t->n_layers * t->n_experts;
	uint64_t *uses, *back;
	bool *used;

	if (!n_gaps)
		return -EINVAL;
	used = calloc((size_t)v->n * per_token + 1, sizeof(*used));
	uses = calloc(n_gaps, sizeof(*uses));
	back = calloc(n_gaps, sizeof(*back));
	if (!used || !uses || !back) {
		free(used);
		free(uses);
		free(back);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < v->n; i++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint32_t k;
			const uint32_t *sel = moe_trace_layer(v->tokens[i], l, &k);

			for (uint32_t j = 0; j < k; j++)
				used[i * per_token + (size_t)l * t->n_experts + sel[j]] = true;
		}
	}
	for (uint32_t i = 0; i < v->n; i++) {
		for (size_t x = 0; x < per_token; x++) {
			if (!used[i * per_token + x])
				continue;
			/* The first later token that uses it again, within n_gaps. */
			for (uint32_t g = 1; g <= n_gaps && i + g < v->n; g++) {
				uses[g - 1]++;
				if (used[(i + g) * per_token + x]) {
					back[g - 1]++;
					break;
				}
			}
		}
	}
	for (uint32_t g = 0; g < n_gaps; g++)
		rate[g] = uses[g] ? (double)back[g] / (double)uses[g] : 0.0;
	free(used);
	free(uses);
	free(back);
	return 0;
}
