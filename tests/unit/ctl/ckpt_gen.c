// SPDX-License-Identifier: MIT
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ckpt_gen.h"

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void buf_put(struct gen_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->len + n)
			cap *= 2;
		b->data = realloc(b->data, cap);
		if (!b->data)
			die("realloc");
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void buf_zeros(struct gen_buf *b, size_t n)
{
	static const uint8_t zeros[64];

	while (n) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		buf_put(b, zeros, k);
		n -= k;
	}
}

static void buf_u32(struct gen_buf *b, uint32_t v)
{
	v = htole32(v);
	buf_put(b, &v, 4);
}

static void buf_u64(struct gen_buf *b, uint64_t v)
{
	v = htole64(v);
	buf_put(b, &v, 8);
}

static void buf_string(struct gen_buf *b, const char *s)
{
	buf_u64(b, strlen(s));
	buf_put(b, s, strlen(s));
}

static void buf_pattern(struct gen_buf *b, const char *name, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		uint8_t v = ckpt_gen_byte(name, i);

		buf_put(b, &v, 1);
	}
}

uint8_t ckpt_gen_byte(const char *name, uint64_t i)
{
	uint32_t h = 2166136261u; /* FNV-1a of the name, then mixed with i */
	const char *p;

	for (p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h ^= (uint32_t)i * 2654435761u;
	h ^= (uint32_t)(i >> 32) * 40503u;
	return (uint8_t)(h ^ (h >> 11) ^ (h >> 23));
}

static int write_all(const char *path, const struct gen_buf *parts, size_t n)
{
	size_t i;
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	for (i = 0; i < n; i++)
		if (parts[i].len && fwrite(parts[i].data, parts[i].len, 1, f) != 1) {
			fclose(f);
			return -EIO;
		}
	return fclose(f) ? -errno : 0;
}

/* ---- safetensors ---- */

static unsigned int st_bits(const char *dtype)
{
	if (!strcmp(dtype, "F32") || !strcmp(dtype, "I32") || !strcmp(dtype, "U32"))
		return 32;
	if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "I16"))
		return 16;
	if (!strcmp(dtype, "F64") || !strcmp(dtype, "I64") || !strcmp(dtype, "U64"))
		return 64;
	if (!strcmp(dtype, "F4"))
		return 4;
	return 8;
}

void gen_st_init(struct gen_st *st)
{
	memset(st, 0, sizeof(*st));
	st->header = json_object_new_object();
	if (!st->header)
		die("json");
}

void gen_st_add(struct gen_st *st, const char *name, const char *dtype, unsigned int n_dims,
		const uint64_t *shape)
{
	struct json_object *t = json_object_new_object(), *sh = json_object_new_array(),
			   *off = json_object_new_array();
	uint64_t elems = 1, bytes;
	unsigned int i;

	for (i = 0; i < n_dims; i++) {
		elems *= shape[i];
		json_object_array_add(sh, json_object_new_int64((int64_t)shape[i]));
	}
	bytes = elems * st_bits(dtype) / 8;
	json_object_array_add(off, json_object_new_int64((int64_t)st->data.len));
	json_object_array_add(off, json_object_new_int64((int64_t)(st->data.len + bytes)));
	json_object_object_add(t, "dtype", json_object_new_string(dtype));
	json_object_object_add(t, "shape", sh);
	json_object_object_add(t, "data_offsets", off);
	json_object_object_add(st->header, name, t);
	buf_pattern(&st->data, name, bytes);
}

int gen_st_write(const struct gen_st *st, const char *path, size_t data_align)
{
	const char *text = json_object_to_json_string_ext(st->header, JSON_C_TO_STRING_PLAIN);
	struct gen_buf parts[2] = {{0}, st->data};
	uint64_t n = strlen(text);
	int ret;

	if (data_align > 1)
		n = (8 + n + data_align - 1) / data_align * data_align - 8;
	buf_u64(&parts[0], n);
	buf_put(&parts[0], text, strlen(text));
	while (parts[0].len < 8 + n)
		buf_put(&parts[0], " ", 1);
	ret = write_all(path, parts, 2);
	free(parts[0].data);
	return ret;
}

void gen_st_free(struct gen_st *st)
{
	json_object_put(st->header);
	free(st->data.data);
	memset(st, 0, sizeof(*st));
}

void gen_st_moe(struct gen_st *st, unsigned int first_layer, unsigned int n_layers,
		unsigned int n_experts, uint64_t hidden, uint64_t ffn)
{
	static const char *const proj[] = {"down_proj", "gate_proj", "up_proj"};
	char name[160];
	unsigned int l, e, p;

	for (l = first_layer; l < first_layer + n_layers; l++) {
		uint64_t norm[1] = {hidden};

		snprintf(name, sizeof(name), "model.layers.%u.post_attention_layernorm.weight", l);
		gen_st_add(st, name, "F16", 1, norm);
		for (e = 0; e < n_experts; e++)
			for (p = 0; p < 3; p++) {
				uint64_t shape[2] = {ffn, hidden};

				if (p == 0) {
					shape[0] = hidden;
					shape[1] = ffn;
				}
				snprintf(name, sizeof(name),
					 "model.layers.%u.mlp.experts.%u.%s.weight", l, e, proj[p]);
				gen_st_add(st, name, "F16", 2, shape);
			}
	}
}

/* ---- GGUF ---- */

void gen_gguf_init(struct gen_gguf *g)
{
	memset(g, 0, sizeof(*g));
	g->version = 3;
	g->alignment = 32;
}

void gen_gguf_kv_u32(struct gen_gguf *g, const char *key, uint32_t v)
{
	buf_string(&g->kv, key);
	buf_u32(&g->kv, 4);
	buf_u32(&g->kv, v);
	g->n_kv++;
}

void gen_gguf_kv_string(struct gen_gguf *g, const char *key, const char *v)
{
	buf_string(&g->kv, key);
	buf_u32(&g->kv, 8);
	buf_string(&g->kv, v);
	g->n_kv++;
}

void gen_gguf_kv_string_array(struct gen_gguf *g, const char *key, unsigned int n)
{
	char tok[32];
	unsigned int i;

	buf_string(&g->kv, key);
	buf_u32(&g->kv, 9);
	buf_u32(&g->kv, 8);
	buf_u64(&g->kv, n);
	for (i = 0; i < n; i++) {
		snprintf(tok, sizeof(tok), "tok%u", i);
		buf_string(&g->kv, tok);
	}
	g->n_kv++;
}

uint64_t gen_ggml_size(uint32_t type, unsigned int n_dims, const uint64_t *ne)
{
	uint64_t block, bytes, size;
	unsigned int i;

	switch (type) {
	case GEN_GGML_F32:
		block = 1, bytes = 4;
		break;
	case GEN_GGML_F16:
		block = 1, bytes = 2;
		break;
	case GEN_GGML_Q8_0:
		block = 32, bytes = 34;
		break;
	case GEN_GGML_Q4_K:
		block = 256, bytes = 144;
		break;
	default:
		return 0;
	}
	size = ne[0] / block * bytes;
	for (i = 1; i < n_dims; i++)
		size *= ne[i];
	return size;
}

void gen_gguf_add_info(struct gen_gguf *g, const char *name, uint32_t type, unsigned int n_dims,
		       const uint64_t *ne, uint64_t offset)
{
	unsigned int i;

	buf_string(&g->info, name);
	buf_u32(&g->info, n_dims);
	for (i = 0; i < n_dims; i++)
		buf_u64(&g->info, ne[i]);
	buf_u32(&g->info, type);
	buf_u64(&g->info, offset);
	g->n_tensors++;
}

uint64_t gen_gguf_add(struct gen_gguf *g, const char *name, uint32_t type, unsigned int n_dims,
		      const uint64_t *ne)
{
	uint64_t off = (g->data.len + g->alignment - 1) / g->alignment * g->alignment;

	buf_zeros(&g->data, off - g->data.len);
	gen_gguf_add_info(g, name, type, n_dims, ne, off);
	buf_pattern(&g->data, name, gen_ggml_size(type, n_dims, ne));
	return off;
}

int gen_gguf_write(const struct gen_gguf *g, const char *path)
{
	struct gen_buf parts[3] = {{0}, {0}, g->data};
	int ret;

	buf_put(&parts[0], "GGUF", 4);
	buf_u32(&parts[0], g->version);
	buf_u64(&parts[0], g->n_tensors);
	buf_u64(&parts[0], g->n_kv);
	buf_put(&parts[0], g->kv.data, g->kv.len);
	buf_put(&parts[0], g->info.data, g->info.len);
	buf_zeros(&parts[1], (g->alignment - parts[0].len % g->alignment) % g->alignment);
	ret = write_all(path, parts, 3);
	free(parts[0].data);
	free(parts[1].data);
	return ret;
}

void gen_gguf_free(struct gen_gguf *g)
{
	free(g->kv.data);
	free(g->info.data);
	free(g->data.data);
	memset(g, 0, sizeof(*g));
}

void gen_gguf_moe(struct gen_gguf *g, unsigned int n_layers, unsigned int n_experts, uint32_t type,
		  uint64_t hidden, uint64_t ffn)
{
	static const char *const proj[] = {"gate", "up", "down"};
	char name[96];
	unsigned int l, p;

	gen_gguf_kv_string(g, "general.architecture", "qwen3moe");
	gen_gguf_kv_string_array(g, "tokenizer.ggml.tokens", 50);
	gen_gguf_kv_u32(g, "qwen3moe.expert_count", n_experts);
	for (l = 0; l < n_layers; l++) {
		uint64_t norm[1] = {hidden};

		snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", l);
		gen_gguf_add(g, name, GEN_GGML_F32, 1, norm);
		for (p = 0; p < 3; p++) {
			uint64_t ne[3] = {hidden, ffn, n_experts};

			if (p == 2) {
				ne[0] = ffn;
				ne[1] = hidden;
			}
			snprintf(name, sizeof(name), "blk.%u.ffn_%s_exps.weight", l, proj[p]);
			gen_gguf_add(g, name, type, 3, ne);
		}
	}
}

/* ---- files ---- */

char *gen_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *dir;

	if (asprintf(&dir, "%s/ctltest.XXXXXX", base && *base ? base : "/tmp") < 0)
		die("asprintf");
	if (!mkdtemp(dir))
		die("mkdtemp");
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void gen_rmdir(char *dir)
{
	if (dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

char *gen_path(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		die("asprintf");
	return p;
}
