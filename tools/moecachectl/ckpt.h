/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint readers for `moecachectl load`: safetensors (one file, or the
 * shards listed by model.safetensors.index.json) and GGUF.
 *
 * Opening a checkpoint parses and checks its headers (nothing past them is
 * read); planning picks the routed experts' tensors out of it and lays one
 * expert's tensors out as a record (the tensor table); loading reads every
 * expert of a local range into records. docs/moecachectl.md describes the
 * record layout and the table.
 *
 * Errors return -errno and leave a message in struct ckpt_error naming the
 * file and, where there is one, the tensor: -EINVAL for content that is
 * wrong (a header that lies, a missing tensor, a wrong shape), -EIO for a
 * file that ends early while it is read, other -errno from the system.
 */
#ifndef MOECACHE_CTL_CKPT_H
#define MOECACHE_CTL_CKPT_H

#include <stdbool.h>
#include <stdint.h>

struct json_object;

#define CKPT_MAX_DIMS 8
#define CKPT_DTYPE_LEN 16
/* Each tensor in a record starts at a multiple of this. */
#define CKPT_RECORD_ALIGN 256
/* A safetensors header larger than this is refused (as the reference reader does). */
#define CKPT_ST_MAX_HEADER (100u << 20)

struct ckpt_error {
	char msg[512];
};

enum ckpt_format {
	CKPT_SAFETENSORS = 1,
	CKPT_GGUF = 2,
};

struct ckpt_file {
	char *path;
	int fd;
	int direct_fd; /* O_DIRECT, opened on first use; -1 when refused */
	bool direct_tried;
	uint64_t size;
	uint32_t dio_mem_align; /* O_DIRECT alignments (statx, else the page size) */
	uint32_t dio_offset_align;
};

/* A tensor as a file's header describes it. */
struct ckpt_tensor {
	char *name;
	char dtype[CKPT_DTYPE_LEN]; /* safetensors dtype, or the GGML type name */
	uint32_t n_dims;
	uint64_t shape[CKPT_MAX_DIMS]; /* in elements, outermost first */
	uint32_t file;
	uint64_t offset; /* absolute, in the file */
	uint64_t size;	 /* bytes */
};

struct ckpt {
	enum ckpt_format format;
	uint32_t n_files;
	struct ckpt_file *files;
	uint32_t n_tensors;
	uint32_t cap_tensors;
	struct ckpt_tensor *tensors;
	uint32_t expert_count; /* GGUF: <arch>.expert_count, 0 if absent */
};

/* One tensor of the record layout: the same for every expert. */
struct ckpt_entry {
	char *name; /* per-expert name: "gate_proj.weight", "ffn_gate_exps.weight" */
	char dtype[CKPT_DTYPE_LEN];
	uint32_t n_dims;
	uint64_t shape[CKPT_MAX_DIMS]; /* one expert's part */
	uint64_t offset;	       /* in the record */
	uint64_t size;
};

/* Where one expert's tensor lies. */
struct ckpt_part {
	uint32_t tensor; /* index in struct ckpt (for its file and name) */
	uint64_t offset; /* absolute, in the file */
};

/* What to plan for: the pool's geometry. Zeros mean "whatever it holds". */
struct ckpt_select {
	uint32_t n_layers;     /* layers with experts the pool expects */
	uint32_t n_experts;    /* experts per layer in the model */
	uint32_t expert_begin; /* local range [begin, end) of global ids */
	uint32_t expert_end;
	uint32_t layer_first; /* model layers considered: [first, end) */
	uint32_t layer_end;   /* 0: no limit */
};

struct ckpt_plan {
	uint32_t n_layers; /* model layers with experts, in the range asked */
	uint32_t *layers;  /* their numbers in the model, ascending */
	uint32_t n_experts;
	uint32_t expert_begin;
	uint32_t expert_end;
	uint32_t n_entries;
	struct ckpt_entry *entries;
	uint64_t record_bytes; /* end of the last tensor of a record */
	/* [layer][expert - expert_begin][entry] */
	struct ckpt_part *parts;
};

/*
 * path: a .safetensors file, a model.safetensors.index.json, or a folder
 * holding either.
 */
int ckpt_open_safetensors(const char *path, struct ckpt *c, struct ckpt_error *err);
int ckpt_open_gguf(const char *path, struct ckpt *c, struct ckpt_error *err);
void ckpt_close(struct ckpt *c);

int ckpt_plan(const struct ckpt *c, const struct ckpt_select *sel, struct ckpt_plan *plan,
	      struct ckpt_error *err);
/* A plan of one tensor "synthetic" (U64) filling the record: see ckpt_fill_synthetic. */
int ckpt_plan_synthetic(const struct ckpt_select *sel, uint64_t expert_bytes,
			struct ckpt_plan *plan);
void ckpt_plan_free(struct ckpt_plan *plan);
const struct ckpt_part *ckpt_plan_part(const struct ckpt_plan *plan, uint32_t layer,
				       uint32_t expert, uint32_t entry);

/* Called after each tensor read; done and total in bytes. */
struct ckpt_progress {
	void (*update)(void *arg, uint64_t done, uint64_t total);
	void *arg;
};

struct ckpt_load_stats {
	uint64_t bytes;
	uint64_t bytes_direct; /* of which read with O_DIRECT */
};

/*
 * Reads every expert of the plan into records of record_size bytes at
 * host (record idx = layer * n_local + expert - expert_begin), zeroing the
 * bytes of each record that no tensor covers. no_direct: buffered reads only.
 */
int ckpt_load(struct ckpt *c, const struct ckpt_plan *plan, void *host, uint64_t record_size,
	      bool no_direct, const struct ckpt_progress *progress, struct ckpt_load_stats *stats,
	      struct ckpt_error *err);

/* Word i of the synthetic record of (layer, global expert). */
static inline uint64_t ckpt_synthetic_word(uint32_t layer, uint32_t expert, uint64_t i)
{
	return (uint64_t)(layer & 0xffff) << 48 | (uint64_t)(expert & 0xffff) << 32 |
	       (i & 0xffffffffu);
}
void ckpt_fill_synthetic(const struct ckpt_plan *plan, void *host, uint64_t record_size);

/*
 * The tensor table: {"pool", "format", "expert_bytes", "record_bytes",
 * "alignment", "n_layers", "model_layers", "n_experts", "expert_begin",
 * "expert_end", "tensors": [{"name", "dtype", "shape", "offset", "size"}]}.
 */
int ckpt_table_json(const struct ckpt_plan *plan, const char *pool, const char *format,
		    uint64_t expert_bytes, struct json_object **out);
/* Writes the table to path atomically (a temporary file renamed over it). */
int ckpt_table_write(const char *path, struct json_object *table);
/* Writes text to path atomically (a temporary file, fsync, rename); 0 or -errno. */
int ckpt_write_atomic(const char *path, const char *text, unsigned int mode);

/* Bytes per element times 8 of a safetensors dtype (F4: 4), 0 if unknown. */
unsigned int ckpt_st_dtype_bits(const char *dtype);

#endif /* MOECACHE_CTL_CKPT_H */
