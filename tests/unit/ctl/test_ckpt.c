// SPDX-License-Identifier: MIT
/*
 * Checkpoint readers of moecachectl: safetensors and GGUF files written by
 * the tests, parsed, planned into records and loaded into memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <json-c/json.h>

#include "ckpt.h"
#include "ckpt_gen.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define HIDDEN 64
#define FFN 32
#define REC_SIZE 16384

static char *dir;

static void setup(void)
{
	dir = gen_tmpdir();
}

static void teardown(void)
{
	gen_rmdir(dir);
	dir = NULL;
}

TestSuite(ckpt, .init = setup, .fini = teardown);

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static char *write_st(struct gen_st *st, const char *name, size_t data_align)
{
	char *path = gen_path(dir, name);

	cr_assert_eq(gen_st_write(st, path, data_align), 0);
	return path;
}

static char *write_gguf(struct gen_gguf *g, const char *name)
{
	char *path = gen_path(dir, name);

	cr_assert_eq(gen_gguf_write(g, path), 0);
	return path;
}

/* The message names the file and, if given, the tensor. */
static void assert_names(const struct ckpt_error *err, const char *path, const char *tensor)
{
	cr_assert(strstr(err->msg, path), "message '%s' does not name %s", err->msg, path);
	if (tensor)
		cr_assert(strstr(err->msg, tensor), "message '%s' does not name '%s'", err->msg,
			  tensor);
}

/* A whole HF-style checkpoint is opened, planned and loaded; returns the records. */
static uint8_t *load_st(const char *path, const struct ckpt_select *sel, struct ckpt_plan *plan)
{
	struct ckpt_error err = {{0}};
	struct ckpt c;
	uint8_t *host;
	size_t n;

	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, sel, plan, &err), 0, "%s", err.msg);
	n = (size_t)plan->n_layers * (plan->expert_end - plan->expert_begin) * REC_SIZE;
	host = malloc(n);
	cr_assert(host);
	memset(host, 0xa5, n);
	cr_assert_eq(ckpt_load(&c, plan, host, REC_SIZE, false, NULL, NULL, &err), 0, "%s",
		     err.msg);
	ckpt_close(&c);
	return host;
}

/* A record holds gate, up, down of expert e of model layer model_layer; the rest is zero. */
static void assert_st_record(const uint8_t *rec, unsigned int model_layer, unsigned int e)
{
	static const char *const order[] = {"gate_proj", "up_proj", "down_proj"};
	uint64_t size = (uint64_t)HIDDEN * FFN * 2, off = 0, i;
	char name[128];
	int p;

	for (p = 0; p < 3; p++) {
		snprintf(name, sizeof(name), "model.layers.%u.mlp.experts.%u.%s.weight",
			 model_layer, e, order[p]);
		for (i = 0; i < size; i++)
			cr_assert_eq(rec[off + i], ckpt_gen_byte(name, i), "%s byte %lu", name,
				     (unsigned long)i);
		for (i = off + size;
		     i < (p < 2 ? align_up(off + size, CKPT_RECORD_ALIGN) : REC_SIZE); i++)
			cr_assert_eq(rec[i], 0, "padding byte %lu is not zero", (unsigned long)i);
		off = align_up(off + size, CKPT_RECORD_ALIGN);
	}
}

Test(ckpt, basic_st_single_file, .description = "a one-file checkpoint loads every expert")
{
	struct ckpt_select sel = {.n_layers = 2, .n_experts = 4, .expert_end = 4};
	struct ckpt_plan plan;
	struct gen_st st;
	uint8_t *host;
	char *path;
	unsigned int l, e;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, 4, HIDDEN, FFN);
	path = write_st(&st, "model.safetensors", 0);
	host = load_st(path, &sel, &plan);
	cr_assert_eq(plan.n_layers, 2);
	cr_assert_eq(plan.n_entries, 3);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			assert_st_record(host + (l * 4 + e) * REC_SIZE, l, e);
	free(host);
	ckpt_plan_free(&plan);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_layout_order, .description = "records hold gate, up, down, each aligned")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	uint64_t size = (uint64_t)HIDDEN * FFN * 2;
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 2, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_str_eq(plan.entries[0].name, "gate_proj.weight");
	cr_assert_str_eq(plan.entries[1].name, "up_proj.weight");
	cr_assert_str_eq(plan.entries[2].name, "down_proj.weight");
	cr_assert_eq(plan.entries[0].offset, 0);
	cr_assert_eq(plan.entries[1].offset, align_up(size, CKPT_RECORD_ALIGN));
	cr_assert_eq(plan.entries[2].offset, 2 * align_up(size, CKPT_RECORD_ALIGN));
	cr_assert_eq(plan.entries[2].shape[0], HIDDEN);
	cr_assert_eq(plan.entries[2].shape[1], FFN);
	cr_assert_str_eq(plan.entries[2].dtype, "F16");
	cr_assert_eq(plan.record_bytes, 2 * align_up(size, CKPT_RECORD_ALIGN) + size);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_scales_follow_weights,
     .description = "scale tensors are packed right after their projection's weight")
{
	static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	uint64_t w[2] = {FFN, HIDDEN}, s[2] = {1, 1};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	char name[128], *path;
	int e, p;

	gen_st_init(&st);
	for (e = 0; e < 2; e++)
		for (p = 2; p >= 0; p--) {
			snprintf(name, sizeof(name), "model.layers.0.mlp.experts.%d.%s.weight", e,
				 proj[p]);
			gen_st_add(&st, name, "F8_E4M3", 2, w);
			snprintf(name, sizeof(name),
				 "model.layers.0.mlp.experts.%d.%s.weight_scale_inv", e, proj[p]);
			gen_st_add(&st, name, "F32", 2, s);
		}
	path = write_st(&st, "fp8.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(plan.n_entries, 6);
	cr_assert_str_eq(plan.entries[0].name, "gate_proj.weight");
	cr_assert_str_eq(plan.entries[1].name, "gate_proj.weight_scale_inv");
	cr_assert_str_eq(plan.entries[2].name, "up_proj.weight");
	cr_assert_str_eq(plan.entries[3].name, "up_proj.weight_scale_inv");
	cr_assert_str_eq(plan.entries[4].name, "down_proj.weight");
	cr_assert_str_eq(plan.entries[5].name, "down_proj.weight_scale_inv");
	cr_assert_eq(plan.entries[1].size, 4);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_sharded_index,
     .description = "shards listed by an index load as one checkpoint")
{
	struct ckpt_select sel = {.n_layers = 2, .n_experts = 4, .expert_end = 4};
	struct json_object *index = json_object_new_object(), *map = json_object_new_object();
	struct gen_st shard[2];
	struct ckpt_plan plan;
	char *path, *p0, *p1;
	uint8_t *host;
	unsigned int l, e;

	for (l = 0; l < 2; l++) {
		gen_st_init(&shard[l]);
		gen_st_moe(&shard[l], l, 1, 4, HIDDEN, FFN);
		json_object_object_foreach(shard[l].header, name, val)
		{
			(void)val;
			json_object_object_add(
			    map, name,
			    json_object_new_string(l ? "model-00002-of-00002.safetensors"
						     : "model-00001-of-00002.safetensors"));
		}
	}
	p0 = write_st(&shard[0], "model-00001-of-00002.safetensors", 0);
	p1 = write_st(&shard[1], "model-00002-of-00002.safetensors", 0);
	json_object_object_add(index, "metadata", json_object_new_object());
	json_object_object_add(index, "weight_map", map);
	path = gen_path(dir, "model.safetensors.index.json");
	cr_assert_eq(json_object_to_file(path, index), 0);
	host = load_st(path, &sel, &plan);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			assert_st_record(host + (l * 4 + e) * REC_SIZE, l, e);
	free(host);
	ckpt_plan_free(&plan);
	json_object_put(index);
	gen_st_free(&shard[0]);
	gen_st_free(&shard[1]);
	free(path);
	free(p0);
	free(p1);
}

Test(ckpt, basic_st_folder, .description = "a folder holding model.safetensors is accepted")
{
	struct ckpt_select sel = {.n_layers = 1};
	struct ckpt_plan plan;
	struct gen_st st;
	uint8_t *host;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 2, HIDDEN, FFN);
	path = write_st(&st, "model.safetensors", 0);
	host = load_st(dir, &sel, &plan);
	assert_st_record(host + REC_SIZE, 0, 1);
	free(host);
	ckpt_plan_free(&plan);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_local_range, .description = "a local expert range loads only its experts")
{
	struct ckpt_select sel = {
	    .n_layers = 2, .n_experts = 8, .expert_begin = 4, .expert_end = 6};
	struct ckpt_plan plan;
	struct gen_st st;
	uint8_t *host;
	char *path;
	unsigned int l, e;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, 8, HIDDEN, FFN);
	path = write_st(&st, "model.safetensors", 0);
	host = load_st(path, &sel, &plan);
	cr_assert_eq(plan.expert_begin, 4);
	cr_assert_eq(plan.expert_end, 6);
	for (l = 0; l < 2; l++)
		for (e = 4; e < 6; e++)
			assert_st_record(host + (l * 2 + (e - 4)) * REC_SIZE, l, e);
	free(host);
	ckpt_plan_free(&plan);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_dense_layers_skipped,
     .description = "layers without experts are not pool layers; the table maps them")
{
	struct ckpt_select sel = {.n_layers = 2};
	uint64_t dense[2] = {FFN, HIDDEN};
	struct ckpt_plan plan;
	struct gen_st st;
	uint8_t *host;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "model.layers.0.mlp.gate_proj.weight", "F16", 2, dense);
	gen_st_add(&st, "model.layers.0.mlp.shared_experts.gate_proj.weight", "F16", 2, dense);
	gen_st_moe(&st, 3, 2, 2, HIDDEN, FFN);
	path = write_st(&st, "model.safetensors", 0);
	host = load_st(path, &sel, &plan);
	cr_assert_eq(plan.n_layers, 2);
	cr_assert_eq(plan.layers[0], 3);
	cr_assert_eq(plan.layers[1], 4);
	assert_st_record(host + (1 * 2 + 1) * REC_SIZE, 4, 1);
	free(host);
	ckpt_plan_free(&plan);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_st_layer_window, .description = "a model-layer window excludes other layers")
{
	struct ckpt_select sel = {.n_layers = 1, .layer_first = 1, .layer_end = 2};
	struct ckpt_plan plan;
	struct gen_st st;
	uint8_t *host;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 3, 2, HIDDEN, FFN);
	path = write_st(&st, "model.safetensors", 0);
	host = load_st(path, &sel, &plan);
	cr_assert_eq(plan.layers[0], 1);
	assert_st_record(host, 1, 0);
	free(host);
	ckpt_plan_free(&plan);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_load_zeroes_padding, .description = "bytes no tensor covers are zeroed")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	uint64_t shape[1] = {100};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t *host;
	char *path;
	size_t i;

	gen_st_init(&st);
	gen_st_add(&st, "layers.0.experts.0.w1.weight", "U8", 1, shape);
	gen_st_add(&st, "layers.0.experts.0.w2.weight", "U8", 1, shape);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	host = malloc(4096);
	memset(host, 0xff, 4096);
	cr_assert_eq(ckpt_load(&c, &plan, host, 4096, true, NULL, NULL, &err), 0, "%s", err.msg);
	for (i = 100; i < 256; i++)
		cr_assert_eq(host[i], 0, "gap byte %zu", i);
	for (i = 356; i < 4096; i++)
		cr_assert_eq(host[i], 0, "tail byte %zu", i);
	cr_assert_eq(host[256], ckpt_gen_byte("layers.0.experts.0.w2.weight", 0));
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

static void progress_count(void *arg, uint64_t done, uint64_t total)
{
	uint64_t *last = arg;

	cr_assert_geq(done, last[0]);
	last[0] = done;
	last[1] = total;
}

Test(ckpt, basic_load_progress, .description = "progress reaches the total it announced")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	uint64_t seen[2] = {0, 0};
	struct ckpt_progress pr = {progress_count, seen};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t *host;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, 2, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	host = malloc(4 * REC_SIZE);
	cr_assert_eq(ckpt_load(&c, &plan, host, REC_SIZE, false, &pr, NULL, &err), 0);
	cr_assert_eq(seen[0], seen[1]);
	cr_assert_eq(seen[1], 4 * plan.record_bytes);
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

/* Can this folder's file system do O_DIRECT at all? */
static bool direct_io_works(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

Test(ckpt, basic_load_direct, .description = "aligned tensors are read with O_DIRECT")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	struct ckpt_load_stats stats;
	uint64_t shape[2] = {4096, 4};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t *host;
	char *path;
	size_t i;

	gen_st_init(&st);
	gen_st_add(&st, "layers.0.experts.0.w1.weight", "U8", 2, shape);
	gen_st_add(&st, "layers.0.experts.1.w1.weight", "U8", 2, shape);
	path = write_st(&st, "aligned.safetensors", 4096);
	if (!direct_io_works(path))
		cr_skip_test("no O_DIRECT on this file system");
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(posix_memalign((void **)&host, 4096, 2 * 16384), 0);
	cr_assert_eq(ckpt_load(&c, &plan, host, 16384, false, NULL, &stats, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(stats.bytes, 2 * 16384);
	cr_assert_eq(stats.bytes_direct, 2 * 16384);
	for (i = 0; i < 16384; i++)
		cr_assert_eq(host[16384 + i], ckpt_gen_byte("layers.0.experts.1.w1.weight", i));
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, basic_load_unaligned_falls_back,
     .description = "unaligned tensors and no_direct give the same bytes, buffered")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	struct ckpt_load_stats stats;
	uint64_t shape[1] = {10000};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t *host;
	char *path;
	size_t i;

	gen_st_init(&st);
	gen_st_add(&st, "layers.0.experts.0.w1.weight", "U8", 1, shape);
	path = write_st(&st, "odd.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(posix_memalign((void **)&host, 4096, 16384), 0);
	cr_assert_eq(ckpt_load(&c, &plan, host, 16384, true, NULL, &stats, &err), 0, "%s", err.msg);
	cr_assert_eq(stats.bytes_direct, 0);
	for (i = 0; i < 10000; i++)
		cr_assert_eq(host[i], ckpt_gen_byte("layers.0.experts.0.w1.weight", i));
	memset(host, 0, 16384);
	cr_assert_eq(ckpt_load(&c, &plan, host, 16384, false, NULL, &stats, &err), 0, "%s",
		     err.msg);
	for (i = 0; i < 10000; i++)
		cr_assert_eq(host[i], ckpt_gen_byte("layers.0.experts.0.w1.weight", i));
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

/* ---- safetensors: bad input ---- */

/*
 * A malformed checkpoint: make writes it and returns its path; opening it
 * fails with want, the message naming the file and, if given, the tensor.
 */
struct bad_file {
	const char *name;
	const char *description;
	char *(*make)(void);
	int want;
	const char *tensor;
};

typedef int (*ckpt_open_fn)(const char *path, struct ckpt *c, struct ckpt_error *err);

/* As assert_names, for a table's row called row. */
static void assert_row_names(const char *row, const struct ckpt_error *err, const char *path,
			     const char *tensor)
{
	cr_assert(strstr(err->msg, path), "%s: message '%s' does not name %s", row, err->msg, path);
	if (tensor)
		cr_assert(strstr(err->msg, tensor), "%s: message '%s' does not name '%s'", row,
			  err->msg, tensor);
}

static void assert_refused(const struct bad_file *b, ckpt_open_fn open_ckpt)
{
	struct ckpt_error err = {{0}};
	char *path = b->make();
	struct ckpt c;

	cr_assert_eq(open_ckpt(path, &c, &err), b->want, "%s (%s): %s", b->name, b->description,
		     err.msg);
	assert_row_names(b->name, &err, path, b->tensor);
	free(path);
}

/* The row numbers of a table, as Criterion's parameters: one test case per row. */
#define BAD_FILE_ROWS(table)                                                                       \
	static size_t rows[ARRAY_SIZE(table)];                                                     \
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)                                             \
		rows[i] = i;                                                                       \
	return cr_make_param_array(size_t, rows, ARRAY_SIZE(table))

static void set_offsets(struct gen_st *st, const char *name, int64_t begin, int64_t end)
{
	struct json_object *t, *off = json_object_new_array();

	cr_assert(json_object_object_get_ex(st->header, name, &t));
	json_object_array_add(off, json_object_new_int64(begin));
	json_object_array_add(off, json_object_new_int64(end));
	json_object_object_add(t, "data_offsets", off);
}

static char *make_st_truncated(void)
{
	struct gen_st st;
	char *path;
	struct stat sb;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 2, HIDDEN, FFN);
	path = write_st(&st, "cut.safetensors", 0);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(truncate(path, sb.st_size - 100), 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_header_past_end(void)
{
	uint64_t len = 1000;
	char *path = gen_path(dir, "short.safetensors");
	FILE *f = fopen(path, "w");

	fwrite(&len, 8, 1, f);
	fputs("{}", f);
	fclose(f);
	return path;
}

static char *make_st_too_short(void)
{
	char *path = gen_path(dir, "tiny.safetensors");
	FILE *f = fopen(path, "w");

	fputs("abc", f);
	fclose(f);
	return path;
}

static char *make_st_offsets_past_end(void)
{
	uint64_t shape[1] = {16};
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "a", "U8", 1, shape);
	gen_st_add(&st, "layers.0.experts.0.w1.weight", "U8", 1, shape);
	set_offsets(&st, "layers.0.experts.0.w1.weight", 1000, 1016);
	path = write_st(&st, "past.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_overlap(void)
{
	uint64_t shape[1] = {16};
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "first", "U8", 1, shape);
	gen_st_add(&st, "second", "U8", 1, shape);
	set_offsets(&st, "second", 8, 24);
	path = write_st(&st, "overlap.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_dtype_size_mismatch(void)
{
	uint64_t shape[2] = {4, 4};
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "w", "F32", 2, shape);
	set_offsets(&st, "w", 0, 32);
	path = write_st(&st, "mismatch.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_unknown_dtype(void)
{
	uint64_t shape[1] = {4};
	struct json_object *t;
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "w", "U8", 1, shape);
	json_object_object_get_ex(st.header, "w", &t);
	json_object_object_add(t, "dtype", json_object_new_string("Q4"));
	path = write_st(&st, "dtype.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_negative_shape(void)
{
	uint64_t shape[1] = {4};
	struct json_object *t, *sh = json_object_new_array();
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "w", "U8", 1, shape);
	json_object_object_get_ex(st.header, "w", &t);
	json_object_array_add(sh, json_object_new_int64(-4));
	json_object_object_add(t, "shape", sh);
	path = write_st(&st, "neg.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_not_json(void)
{
	const char text[] = "{\"w\": {\"dtype\": ";
	uint64_t len = sizeof(text) - 1;
	char *path = gen_path(dir, "bad.safetensors");
	FILE *f = fopen(path, "w");

	fwrite(&len, 8, 1, f);
	fwrite(text, len, 1, f);
	fclose(f);
	return path;
}

static char *make_st_trailing_bytes(void)
{
	const char text[] = "{} x";
	uint64_t len = sizeof(text) - 1;
	char *path = gen_path(dir, "trail.safetensors");
	FILE *f = fopen(path, "w");

	fwrite(&len, 8, 1, f);
	fwrite(text, len, 1, f);
	fclose(f);
	return path;
}

static char *make_st_missing_tensor(void)
{
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, 4, HIDDEN, FFN);
	json_object_object_del(st.header, "model.layers.1.mlp.experts.3.up_proj.weight");
	path = write_st(&st, "missing.safetensors", 0);
	gen_st_free(&st);
	return path;
}

static char *make_st_wrong_shape(void)
{
	uint64_t odd[2] = {FFN, HIDDEN / 2};
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 2, HIDDEN, FFN);
	gen_st_add(&st, "model.layers.0.mlp.experts.2.gate_proj.weight", "F16", 2, odd);
	path = write_st(&st, "shape.safetensors", 0);
	gen_st_free(&st);
	return path;
}

Test(ckpt, bad_input_st_pool_layers, .description = "a pool with other layer counts is refused")
{
	struct ckpt_select sel = {.n_layers = 3};
	struct ckpt_error err = {{0}};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, 2, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), -EINVAL);
	cr_assert(strstr(err.msg, "2 layers"), "%s", err.msg);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, bad_input_st_pool_experts, .description = "more experts than the pool has is refused")
{
	struct ckpt_select sel = {.n_experts = 2, .expert_end = 2};
	struct ckpt_error err = {{0}};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 4, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), -EINVAL);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

static char *make_st_no_experts(void)
{
	uint64_t shape[1] = {4};
	struct gen_st st;
	char *path;

	gen_st_init(&st);
	gen_st_add(&st, "model.layers.0.mlp.gate_proj.weight", "U8", 1, shape);
	path = write_st(&st, "dense.safetensors", 0);
	gen_st_free(&st);
	return path;
}

Test(ckpt, bad_input_st_record_too_small,
     .description = "records smaller than an expert are refused")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t host[4096];
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 1, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_load(&c, &plan, host, sizeof(host), false, NULL, NULL, &err), -ENOSPC);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

Test(ckpt, bad_input_st_shrinks_while_loading,
     .description = "a file cut after its header was read fails the load with EIO")
{
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	uint8_t *host;
	char *path;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 1, 2, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(truncate(path, 64), 0);
	host = malloc(2 * REC_SIZE);
	cr_assert_eq(ckpt_load(&c, &plan, host, REC_SIZE, true, NULL, NULL, &err), -EIO);
	assert_names(&err, path, "model.layers.0.mlp.experts.0.gate_proj.weight");
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
}

static char *write_index(const char *shard_name, const char *tensor)
{
	struct json_object *index = json_object_new_object(), *map = json_object_new_object();
	char *path = gen_path(dir, "model.safetensors.index.json");

	json_object_object_add(map, tensor, json_object_new_string(shard_name));
	json_object_object_add(index, "weight_map", map);
	cr_assert_eq(json_object_to_file(path, index), 0);
	json_object_put(index);
	return path;
}

static char *make_st_index_tensor_absent(void)
{
	uint64_t shape[1] = {4};
	struct gen_st st;
	char *shard, *path;

	gen_st_init(&st);
	gen_st_add(&st, "present", "U8", 1, shape);
	shard = write_st(&st, "s.safetensors", 0);
	path = write_index("s.safetensors", "absent");
	gen_st_free(&st);
	free(shard);
	return path;
}

static char *make_st_index_escapes(void)
{
	char *path = write_index("../../etc/passwd", "w");

	return path;
}

static const struct bad_file bad_st[] = {
    {"bad_input_st_truncated", "a truncated file names its last tensor", make_st_truncated, -EINVAL,
     "model.layers.0.mlp.experts.1.up_proj.weight"},
    {"bad_input_st_header_past_end", "a header length past the end is refused",
     make_st_header_past_end, -EINVAL, NULL},
    {"bad_input_st_too_short", "a file shorter than the length field is refused", make_st_too_short,
     -EINVAL, NULL},
    {"bad_input_st_offsets_past_end", "data_offsets past the end of the file are refused",
     make_st_offsets_past_end, -EINVAL, "layers.0.experts.0.w1.weight"},
    {"bad_input_st_overlap", "overlapping tensors are refused", make_st_overlap, -EINVAL, "second"},
    {"bad_input_st_dtype_size_mismatch", "offsets that disagree with dtype and shape are refused",
     make_st_dtype_size_mismatch, -EINVAL, "w"},
    {"bad_input_st_unknown_dtype", "an unknown dtype is refused", make_st_unknown_dtype, -EINVAL,
     "w"},
    {"bad_input_st_negative_shape", "a negative dimension is refused", make_st_negative_shape,
     -EINVAL, "w"},
    {"bad_input_st_not_json", "a header that is not JSON is refused", make_st_not_json, -EINVAL,
     NULL},
    {"bad_input_st_trailing_bytes", "bytes after the header's JSON are refused",
     make_st_trailing_bytes, -EINVAL, NULL},
    {"bad_input_st_index_tensor_absent", "an index naming a tensor its shard lacks is refused",
     make_st_index_tensor_absent, -EINVAL, "absent"},
    {"bad_input_st_index_escapes", "an index naming a shard outside its folder is refused",
     make_st_index_escapes, -EINVAL, "w"},
};

ParameterizedTestParameters(ckpt, bad_input_st_open)
{
	BAD_FILE_ROWS(bad_st);
}

ParameterizedTest(size_t *row, ckpt, bad_input_st_open,
		  .description = "each malformed safetensors file in bad_st is refused by name")
{
	assert_refused(&bad_st[*row], ckpt_open_safetensors);
}

Test(ckpt, bad_input_st_index_missing_shard,
     .description = "an index naming an absent shard is refused")
{
	char *path = write_index("nowhere.safetensors", "w");
	struct ckpt_error err = {{0}};
	struct ckpt c;

	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), -ENOENT, "%s", err.msg);
	cr_assert(strstr(err.msg, "nowhere.safetensors"), "%s", err.msg);
	free(path);
}

/* ---- GGUF ---- */

static uint8_t *load_gguf(const char *path, const struct ckpt_select *sel, struct ckpt_plan *plan,
			  struct ckpt *c)
{
	struct ckpt_error err = {{0}};
	uint8_t *host;
	size_t n;

	cr_assert_eq(ckpt_open_gguf(path, c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(c, sel, plan, &err), 0, "%s", err.msg);
	n = (size_t)plan->n_layers * (plan->expert_end - plan->expert_begin) * REC_SIZE;
	host = malloc(n);
	cr_assert(host);
	cr_assert_eq(ckpt_load(c, plan, host, REC_SIZE, false, NULL, NULL, &err), 0, "%s", err.msg);
	return host;
}

/* Expert e of layer l sliced out of the stacked tensors, in gate, up, down order. */
static void assert_gguf_record(const uint8_t *rec, unsigned int l, unsigned int e,
			       unsigned int n_experts, uint32_t type)
{
	static const char *const order[] = {"gate", "up", "down"};
	uint64_t ne[3] = {HIDDEN, FFN, n_experts};
	uint64_t slice = gen_ggml_size(type, 3, ne) / n_experts, off = 0, i;
	char name[96];
	int p;

	for (p = 0; p < 3; p++) {
		snprintf(name, sizeof(name), "blk.%u.ffn_%s_exps.weight", l, order[p]);
		for (i = 0; i < slice; i++)
			cr_assert_eq(rec[off + i], ckpt_gen_byte(name, e * slice + i),
				     "%s expert %u byte %lu", name, e, (unsigned long)i);
		off = align_up(off + slice, CKPT_RECORD_ALIGN);
	}
}

Test(ckpt, basic_gguf_stacked, .description = "experts are sliced out of stacked GGUF tensors")
{
	struct ckpt_select sel = {.n_layers = 2, .n_experts = 4, .expert_end = 4};
	struct ckpt_plan plan;
	struct gen_gguf g;
	struct ckpt c;
	uint8_t *host;
	char *path;
	unsigned int l, e;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 2, 4, GEN_GGML_F16, HIDDEN, FFN);
	path = write_gguf(&g, "m.gguf");
	host = load_gguf(path, &sel, &plan, &c);
	cr_assert_eq(c.expert_count, 4);
	cr_assert_str_eq(plan.entries[0].name, "ffn_gate_exps.weight");
	cr_assert_str_eq(plan.entries[1].name, "ffn_up_exps.weight");
	cr_assert_str_eq(plan.entries[2].name, "ffn_down_exps.weight");
	/* one expert's shape, outermost first */
	cr_assert_eq(plan.entries[0].n_dims, 2);
	cr_assert_eq(plan.entries[0].shape[0], FFN);
	cr_assert_eq(plan.entries[0].shape[1], HIDDEN);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			assert_gguf_record(host + (l * 4 + e) * REC_SIZE, l, e, 4, GEN_GGML_F16);
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_gguf_free(&g);
	free(path);
}

Test(ckpt, basic_gguf_quantized, .description = "quantized (Q8_0) experts are sliced by whole rows")
{
	struct ckpt_select sel = {.n_experts = 2, .expert_begin = 1, .expert_end = 2};
	uint64_t ne[3] = {HIDDEN, FFN, 2};
	uint64_t slice = gen_ggml_size(GEN_GGML_Q8_0, 3, ne) / 2, i;
	struct ckpt_plan plan;
	struct gen_gguf g;
	struct ckpt c;
	uint8_t *host;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_Q8_0, HIDDEN, FFN);
	path = write_gguf(&g, "q.gguf");
	host = load_gguf(path, &sel, &plan, &c);
	cr_assert_str_eq(plan.entries[0].dtype, "Q8_0");
	cr_assert_eq(plan.entries[0].size, HIDDEN / 32 * 34 * FFN);
	for (i = 0; i < slice; i++)
		cr_assert_eq(host[i], ckpt_gen_byte("blk.0.ffn_gate_exps.weight", slice + i));
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_gguf_free(&g);
	free(path);
}

Test(ckpt, basic_gguf_alignment, .description = "general.alignment moves where the data starts")
{
	struct ckpt_select sel = {0};
	struct ckpt_plan plan;
	struct gen_gguf g;
	struct ckpt c;
	uint8_t *host;
	char *path;

	gen_gguf_init(&g);
	g.alignment = 4096;
	gen_gguf_kv_u32(&g, "general.alignment", 4096);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F16, HIDDEN, FFN);
	path = write_gguf(&g, "a.gguf");
	host = load_gguf(path, &sel, &plan, &c);
	cr_assert_eq(c.tensors[0].offset % 4096, 0);
	assert_gguf_record(host + REC_SIZE, 0, 1, 2, GEN_GGML_F16);
	free(host);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_gguf_free(&g);
	free(path);
}

Test(ckpt, basic_gguf_version2, .description = "GGUF version 2 files are read")
{
	struct ckpt_error err = {{0}};
	struct gen_gguf g;
	struct ckpt c;
	char *path;

	gen_gguf_init(&g);
	g.version = 2;
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "v2.gguf");
	cr_assert_eq(ckpt_open_gguf(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(c.n_tensors, 4);
	ckpt_close(&c);
	gen_gguf_free(&g);
	free(path);
}

static void patch(const char *path, long off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static char *make_gguf_magic(void)
{
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "m.gguf");
	patch(path, 0, "GGML", 4);
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_version1(void)
{
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	g.version = 1;
	path = write_gguf(&g, "v1.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_big_endian(void)
{
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	g.version = 0x03000000;
	path = write_gguf(&g, "be.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_truncated_header(void)
{
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "cut.gguf");
	cr_assert_eq(truncate(path, 24 + 100), 0);
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_truncated_data(void)
{
	struct gen_gguf g;
	struct stat sb;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "cut.gguf");
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(truncate(path, sb.st_size - 1), 0);
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_misaligned(void)
{
	uint64_t ne[1] = {8};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_add_info(&g, "blk.0.ffn_up_exps.weight", GEN_GGML_F32, 1, ne, 4);
	path = write_gguf(&g, "mis.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_overlap(void)
{
	uint64_t ne[1] = {64};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_add(&g, "one", GEN_GGML_F32, 1, ne);
	gen_gguf_add(&g, "two", GEN_GGML_F32, 1, ne);
	gen_gguf_add_info(&g, "three", GEN_GGML_F32, 1, ne, 32);
	path = write_gguf(&g, "ov.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_unknown_type(void)
{
	uint64_t ne[1] = {8};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_add_info(&g, "odd", 4, 1, ne, 0);
	path = write_gguf(&g, "type.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_too_many_dims(void)
{
	uint64_t ne[5] = {1, 1, 1, 1, 1};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_add_info(&g, "deep", GEN_GGML_F32, 5, ne, 0);
	path = write_gguf(&g, "dims.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_partial_block(void)
{
	uint64_t ne[2] = {100, 2};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_add_info(&g, "q", GEN_GGML_Q8_0, 2, ne, 0);
	path = write_gguf(&g, "blk.gguf");
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_counts_lie(void)
{
	uint64_t huge = UINT64_MAX / 2;
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "count.gguf");
	patch(path, 8, &huge, 8);
	gen_gguf_free(&g);
	return path;
}

static char *make_gguf_string_lies(void)
{
	uint64_t huge = 1ull << 40;
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	path = write_gguf(&g, "str.gguf");
	patch(path, 24, &huge, 8); /* the first key's length */
	gen_gguf_free(&g);
	return path;
}

static const struct bad_file bad_gguf[] = {
    {"bad_input_gguf_magic", "a file without the GGUF magic is refused", make_gguf_magic, -EINVAL,
     NULL},
    {"bad_input_gguf_version1", "GGUF version 1 is refused", make_gguf_version1, -EINVAL, NULL},
    {"bad_input_gguf_big_endian", "a big-endian GGUF is refused", make_gguf_big_endian, -EINVAL,
     NULL},
    {"bad_input_gguf_truncated_header", "a header cut in its key/values is refused",
     make_gguf_truncated_header, -EINVAL, NULL},
    {"bad_input_gguf_truncated_data", "a file cut in its data names the tensor",
     make_gguf_truncated_data, -EINVAL, "blk.0.ffn_down_exps.weight"},
    {"bad_input_gguf_misaligned", "a tensor offset off the alignment is refused",
     make_gguf_misaligned, -EINVAL, "blk.0.ffn_up_exps.weight"},
    {"bad_input_gguf_overlap", "overlapping tensors are refused", make_gguf_overlap, -EINVAL,
     "three"},
    {"bad_input_gguf_unknown_type", "an unknown GGML type is refused", make_gguf_unknown_type,
     -EINVAL, "odd"},
    {"bad_input_gguf_too_many_dims", "more than four dimensions are refused",
     make_gguf_too_many_dims, -EINVAL, "deep"},
    {"bad_input_gguf_partial_block", "rows that are not whole blocks are refused",
     make_gguf_partial_block, -EINVAL, "q"},
    {"bad_input_gguf_counts_lie", "a tensor count the file cannot hold is refused",
     make_gguf_counts_lie, -EINVAL, NULL},
    {"bad_input_gguf_string_lies", "a string longer than the file is refused",
     make_gguf_string_lies, -EINVAL, NULL},
};

ParameterizedTestParameters(ckpt, bad_input_gguf_open)
{
	BAD_FILE_ROWS(bad_gguf);
}

ParameterizedTest(size_t *row, ckpt, bad_input_gguf_open,
		  .description = "each malformed GGUF file in bad_gguf is refused by name")
{
	assert_refused(&bad_gguf[*row], ckpt_open_gguf);
}

Test(ckpt, bad_input_gguf_expert_count,
     .description = "stacks disagreeing with expert_count are refused")
{
	static const char *const proj[] = {"gate", "up", "down"};
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	uint64_t ne[3] = {HIDDEN, FFN, 4};
	struct ckpt_plan plan;
	struct gen_gguf g;
	struct ckpt c;
	char *path, name[64];
	int p;

	gen_gguf_init(&g);
	gen_gguf_kv_string(&g, "general.architecture", "qwen3moe");
	gen_gguf_kv_u32(&g, "qwen3moe.expert_count", 8);
	for (p = 0; p < 3; p++) {
		snprintf(name, sizeof(name), "blk.0.ffn_%s_exps.weight", proj[p]);
		gen_gguf_add(&g, name, GEN_GGML_F32, 3, ne);
	}
	path = write_gguf(&g, "n.gguf");
	cr_assert_eq(ckpt_open_gguf(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(c.expert_count, 8);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), -EINVAL);
	assert_names(&err, path, NULL);
	ckpt_close(&c);
	gen_gguf_free(&g);
	free(path);
}

static char *make_gguf_missing_layer_tensor(void)
{
	uint64_t ne[3] = {HIDDEN, FFN, 2};
	struct gen_gguf g;
	char *path;

	gen_gguf_init(&g);
	gen_gguf_moe(&g, 1, 2, GEN_GGML_F32, HIDDEN, FFN);
	gen_gguf_add(&g, "blk.1.ffn_gate_exps.weight", GEN_GGML_F32, 3, ne);
	path = write_gguf(&g, "miss.gguf");
	gen_gguf_free(&g);
	return path;
}

/*
 * A checkpoint that opens but cannot be planned: make writes it and returns
 * its path; planning it whole fails with want, the message naming the file
 * and, if given, the tensor.
 */
struct bad_plan {
	const char *name;
	const char *description;
	char *(*make)(void);
	ckpt_open_fn open_ckpt;
	int want;
	const char *tensor;
};

static const struct bad_plan bad_plans[] = {
    {"bad_input_st_missing_tensor", "an expert lacking a projection is named",
     make_st_missing_tensor, ckpt_open_safetensors, -EINVAL,
     "model.layers.1.mlp.experts.3.up_proj.weight"},
    {"bad_input_st_wrong_shape", "an expert with another shape is named", make_st_wrong_shape,
     ckpt_open_safetensors, -EINVAL, "model.layers.0.mlp.experts.2.gate_proj.weight"},
    {"bad_input_st_no_experts", "a checkpoint without expert tensors is refused",
     make_st_no_experts, ckpt_open_safetensors, -EINVAL, NULL},
    {"bad_input_gguf_missing_layer_tensor", "a layer lacking a stacked tensor is named",
     make_gguf_missing_layer_tensor, ckpt_open_gguf, -EINVAL, "blk.1.ffn_up_exps.weight"},
};

ParameterizedTestParameters(ckpt, bad_input_plan)
{
	BAD_FILE_ROWS(bad_plans);
}

ParameterizedTest(
    size_t *row, ckpt, bad_input_plan,
    .description = "each checkpoint in bad_plans opens but is refused by the plan by name")
{
	const struct bad_plan *b = &bad_plans[*row];
	struct ckpt_select sel = {0};
	struct ckpt_error err = {{0}};
	char *path = b->make();
	struct ckpt_plan plan;
	struct ckpt c;

	cr_assert_eq(b->open_ckpt(path, &c, &err), 0, "%s: %s", b->name, err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), b->want, "%s (%s): %s", b->name,
		     b->description, err.msg);
	assert_row_names(b->name, &err, path, b->tensor);
	ckpt_close(&c);
	free(path);
}

/* ---- table and synthetic records ---- */

Test(ckpt, basic_table_json, .description = "the tensor table lists every tensor of a record")
{
	struct ckpt_select sel = {.n_layers = 1};
	struct ckpt_error err = {{0}};
	struct json_object *table, *tensors, *t, *v, *back;
	struct ckpt_plan plan;
	struct gen_st st;
	struct ckpt c;
	char *path, *out;

	gen_st_init(&st);
	gen_st_moe(&st, 5, 1, 2, HIDDEN, FFN);
	path = write_st(&st, "m.safetensors", 0);
	cr_assert_eq(ckpt_open_safetensors(path, &c, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_plan(&c, &sel, &plan, &err), 0, "%s", err.msg);
	cr_assert_eq(ckpt_table_json(&plan, "mixtral", "safetensors", REC_SIZE, &table), 0);
	out = gen_path(dir, "mixtral.tensors.json");
	cr_assert_eq(ckpt_table_write(out, table), 0);
	back = json_object_from_file(out);
	cr_assert(back, "the written table is not JSON");
	cr_assert(json_object_object_get_ex(back, "tensors", &tensors));
	cr_assert_eq(json_object_array_length(tensors), 3);
	t = json_object_array_get_idx(tensors, 1);
	cr_assert(json_object_object_get_ex(t, "name", &v));
	cr_assert_str_eq(json_object_get_string(v), "up_proj.weight");
	cr_assert(json_object_object_get_ex(t, "offset", &v));
	cr_assert_eq((uint64_t)json_object_get_int64(v), plan.entries[1].offset);
	cr_assert(json_object_object_get_ex(t, "size", &v));
	cr_assert_eq((uint64_t)json_object_get_int64(v), (uint64_t)HIDDEN * FFN * 2);
	cr_assert(json_object_object_get_ex(t, "shape", &v));
	cr_assert_eq(json_object_get_int64(json_object_array_get_idx(v, 0)), FFN);
	cr_assert(json_object_object_get_ex(back, "model_layers", &v));
	cr_assert_eq(json_object_get_int64(json_object_array_get_idx(v, 0)), 5);
	cr_assert(json_object_object_get_ex(back, "expert_bytes", &v));
	cr_assert_eq(json_object_get_int64(v), REC_SIZE);
	json_object_put(back);
	json_object_put(table);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	gen_st_free(&st);
	free(path);
	free(out);
}

Test(ckpt, bad_input_table_write_no_folder,
     .description = "writing a table into a missing folder fails")
{
	struct json_object *t = json_object_new_object();
	char *out = gen_path(dir, "nowhere/x.json");

	cr_assert_eq(ckpt_table_write(out, t), -ENOENT);
	json_object_put(t);
	free(out);
}

Test(ckpt, basic_synthetic_pattern, .description = "synthetic records carry their layer and expert")
{
	struct ckpt_select sel = {
	    .n_layers = 2, .n_experts = 8, .expert_begin = 2, .expert_end = 4};
	struct ckpt_plan plan;
	uint64_t *host;

	cr_assert_eq(ckpt_plan_synthetic(&sel, 4096, &plan), 0);
	host = calloc(4, 4096);
	ckpt_fill_synthetic(&plan, host, 4096);
	/* layer 1, expert 3: record 1 * 2 + (3 - 2) = 3, word 5 */
	cr_assert_eq(host[3 * 512 + 5], (1ull << 48) | (3ull << 32) | 5);
	cr_assert_eq(host[0], 2ull << 32);
	free(host);
	ckpt_plan_free(&plan);
}
