/* SPDX-License-Identifier: MIT */
/*
 * Writers of small safetensors and GGUF checkpoints for the tests, with
 * deterministic tensor bytes (ckpt_gen_byte) so that a test can say what
 * any byte of a loaded record must be. They write whatever they are told,
 * lies included: the tests edit the header before writing it.
 */
#ifndef MOECACHE_TEST_CKPT_GEN_H
#define MOECACHE_TEST_CKPT_GEN_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

struct gen_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* Byte i of the tensor called name. */
uint8_t ckpt_gen_byte(const char *name, uint64_t i);

/* ---- safetensors ---- */

struct gen_st {
	struct json_object *header; /* edit it to make the header lie */
	struct gen_buf data;
};

void gen_st_init(struct gen_st *st);
/* Appends a tensor (bytes from ckpt_gen_byte) and its header entry. */
void gen_st_add(struct gen_st *st, const char *name, const char *dtype, unsigned int n_dims,
		const uint64_t *shape);
/*
 * Writes the file. data_align: the header is padded with spaces so that
 * the data starts at a multiple of it (0 or 1: no padding).
 */
int gen_st_write(const struct gen_st *st, const char *path, size_t data_align);
void gen_st_free(struct gen_st *st);

/*
 * A Hugging Face style MoE checkpoint in one file: layers [first_layer,
 * first_layer + n_layers), n_experts experts each with gate/up/down
 * projections (F16, [ffn, hidden], [ffn, hidden], [hidden, ffn]), and a
 * dense (non-expert) tensor per layer that must be ignored.
 */
void gen_st_moe(struct gen_st *st, unsigned int first_layer, unsigned int n_layers,
		unsigned int n_experts, uint64_t hidden, uint64_t ffn);

/* ---- GGUF ---- */

enum gen_ggml_type {
	GEN_GGML_F32 = 0,
	GEN_GGML_F16 = 1,
	GEN_GGML_Q8_0 = 8,
	GEN_GGML_Q4_K = 12,
};

struct gen_gguf {
	uint32_t version;
	uint32_t alignment;
	uint64_t n_kv;
	uint64_t n_tensors;
	struct gen_buf kv;
	struct gen_buf info;
	struct gen_buf data;
};

void gen_gguf_init(struct gen_gguf *g);
void gen_gguf_kv_u32(struct gen_gguf *g, const char *key, uint32_t v);
void gen_gguf_kv_string(struct gen_gguf *g, const char *key, const char *v);
/* An array of n strings, like a tokenizer's vocabulary. */
void gen_gguf_kv_string_array(struct gen_gguf *g, const char *key, unsigned int n);
/* Bytes of a tensor of type with ne (innermost first); 0 if the type is unknown here. */
uint64_t gen_ggml_size(uint32_t type, unsigned int n_dims, const uint64_t *ne);
/* Appends a tensor with data (at the next aligned offset); returns that offset. */
uint64_t gen_gguf_add(struct gen_gguf *g, const char *name, uint32_t type, unsigned int n_dims,
		      const uint64_t *ne);
/* Appends only a tensor info, with the given offset and no data. */
void gen_gguf_add_info(struct gen_gguf *g, const char *name, uint32_t type, unsigned int n_dims,
		       const uint64_t *ne, uint64_t offset);
int gen_gguf_write(const struct gen_gguf *g, const char *path);
void gen_gguf_free(struct gen_gguf *g);

/*
 * A llama.cpp style MoE: "general.architecture" = "qwen3moe",
 * qwen3moe.expert_count, a tokenizer array, and per layer
 * blk.L.ffn_{gate,up,down}_exps.weight stacked over n_experts, of type
 * (ne: gate/up [hidden, ffn, n_experts], down [ffn, hidden, n_experts]),
 * plus blk.L.attn_norm.weight (ignored).
 */
void gen_gguf_moe(struct gen_gguf *g, unsigned int n_layers, unsigned int n_experts, uint32_t type,
		  uint64_t hidden, uint64_t ffn);

/* A fresh folder for a test's files (removed by gen_rmdir); exits on failure. */
char *gen_tmpdir(void);
void gen_rmdir(char *dir);
/* dir + "/" + name, malloc'd. */
char *gen_path(const char *dir, const char *name);

#endif /* MOECACHE_TEST_CKPT_GEN_H */
