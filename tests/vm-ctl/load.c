// SPDX-License-Identifier: MIT
/* moecachectl load in the VM: checkpoints written here, compared byte for byte with the host
 * region. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "ckpt.h"
#include "ckpt_gen.h"
#include "harness.h"
#include "tests.h"

#define HIDDEN 64
#define FFN 32
#define PROJ_BYTES (HIDDEN * FFN * 2) /* one F16 projection: 4096 */

/* 2 layers x 4 experts, records of 16 KiB: room for 3 projections and padding. */
static const struct ct_geom moe_geom = {
    .n_layers = 2,
    .n_experts = 4,
    .n_slots = 2,
    .expert_bytes = 16384,
};

/* The pool's host region, mapped read-only by a client. */
struct host_view {
	struct moecache *mc;
	const uint8_t *base;
	size_t size;
	uint32_t n_local;
	uint64_t expert_bytes;
};

static void host_open(const char *pool, struct host_view *v)
{
	const struct moecache_pool_info *info;
	void *base;

	CT_OK(moecache_open_attach(pool, MOECACHE_ROLE_CLIENT, &v->mc));
	CT_OK(moecache_host_map(v->mc, false, &base, &v->size));
	info = moecache_pool(v->mc);
	v->base = base;
	v->n_local = info->n_local;
	v->expert_bytes = info->expert_bytes;
}

static const uint8_t *host_record(const struct host_view *v, uint32_t layer, uint32_t local)
{
	return v->base + ((uint64_t)layer * v->n_local + local) * v->expert_bytes;
}

/* Record of expert e of model layer l: gate, up, down, then zeros. */
static void check_st_record(const uint8_t *rec, uint64_t expert_bytes, unsigned int l,
			    unsigned int e)
{
	static const char *const order[] = {"gate_proj", "up_proj", "down_proj"};
	char name[128];
	uint64_t i;
	int p;

	for (p = 0; p < 3; p++) {
		snprintf(name, sizeof(name), "model.layers.%u.mlp.experts.%u.%s.weight", l, e,
			 order[p]);
		for (i = 0; i < PROJ_BYTES; i++)
			if (rec[p * PROJ_BYTES + i] != ckpt_gen_byte(name, i))
				CT_FAIL("%s: byte %llu of the record differs", name,
					(unsigned long long)i);
	}
	for (i = 3 * PROJ_BYTES; i < expert_bytes; i++)
		if (rec[i])
			CT_FAIL("layer %u expert %u: padding byte %llu is %u", l, e,
				(unsigned long long)i, rec[i]);
}

static const char *write_moe(const struct ct_ctx *ctx, unsigned int n_experts)
{
	const char *path = ct_file(ctx, "model.safetensors");
	struct gen_st st;

	gen_st_init(&st);
	gen_st_moe(&st, 0, 2, n_experts, HIDDEN, FFN);
	CT_OK(gen_st_write(&st, path, 0));
	gen_st_free(&st);
	return path;
}

static void check_loaded(const char *pool, bool loaded)
{
	uint32_t flags = ct_pool_flags(pool);

	if (!!(flags & MOECACHE_POOL_LOADED) != loaded)
		CT_FAIL("pool %s is %sloaded", pool, loaded ? "not " : "");
}

void load_synthetic(struct ct_ctx *ctx)
{
	struct ct_geom g = {.n_layers = 2,
			    .n_experts = 8,
			    .expert_begin = 2,
			    .expert_end = 5,
			    .n_slots = 2,
			    .expert_bytes = 8192};
	char name[MOECACHE_NAME_LEN], table[256];
	struct host_view v;
	struct ct_out o;
	uint32_t l, e;
	uint64_t i;

	ct_pool(ctx, "syn", name);
	ct_create(name, &g);
	check_loaded(name, false);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", NULL);
	CT_EQ(o.status, 0);
	check_loaded(name, true);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 2; e < 5; e++) {
			const uint64_t *w = (const uint64_t *)host_record(&v, l, e - 2);

			for (i = 0; i < 8192 / 8; i++)
				if (w[i] != ckpt_synthetic_word(l, e, i))
					CT_FAIL("layer %u expert %u word %llu", l, e,
						(unsigned long long)i);
		}
	moecache_close(v.mc);
	snprintf(table, sizeof(table), "%s/run/%s.tensors.json", ctx->dir, name);
	CT_ASSERT(access(table, R_OK) == 0);
}

void load_safetensors(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], table[256];
	struct json_object *t, *tensors, *v2;
	const char *path = write_moe(ctx, 4);
	struct host_view v;
	struct ct_out o;
	uint32_t l, e;

	ct_pool(ctx, "st", name);
	ct_create(name, &moe_geom);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	check_loaded(name, true);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			check_st_record(host_record(&v, l, e), v.expert_bytes, l, e);
	moecache_close(v.mc);

	snprintf(table, sizeof(table), "%s/run/%s.tensors.json", ctx->dir, name);
	t = json_object_from_file(table);
	CT_ASSERT(t);
	CT_ASSERT(json_object_object_get_ex(t, "tensors", &tensors));
	CT_EQ(json_object_array_length(tensors), 3);
	v2 = json_object_object_get(json_object_array_get_idx(tensors, 2), "offset");
	CT_EQ(json_object_get_int64(v2), 2 * PROJ_BYTES);
	v2 = json_object_object_get(json_object_array_get_idx(tensors, 2), "name");
	CT_ASSERT(!strcmp(json_object_get_string(v2), "down_proj.weight"));
	json_object_put(t);
	/* the table is printed too */
	CT_CONTAINS(o.out, "down_proj.weight");
	/* no progress bar when stderr is not a terminal */
	CT_ASSERT(!strchr(o.err, '\r'));
}

void load_safetensors_index(struct ct_ctx *ctx)
{
	struct json_object *index = json_object_new_object(), *map = json_object_new_object();
	char name[MOECACHE_NAME_LEN], shard[64];
	struct host_view v;
	struct gen_st st;
	struct ct_out o;
	uint32_t l, e;

	for (l = 0; l < 2; l++) {
		snprintf(shard, sizeof(shard), "model-0000%u-of-00002.safetensors", l + 1);
		gen_st_init(&st);
		gen_st_moe(&st, l, 1, 4, HIDDEN, FFN);
		CT_OK(gen_st_write(&st, ct_file(ctx, shard), 0));
		json_object_object_foreach(st.header, tensor, desc)
		{
			(void)desc;
			json_object_object_add(map, tensor, json_object_new_string(shard));
		}
		gen_st_free(&st);
	}
	json_object_object_add(index, "weight_map", map);
	CT_OK(json_object_to_file(ct_file(ctx, "model.safetensors.index.json"), index));
	json_object_put(index);

	ct_pool(ctx, "idx", name);
	ct_create(name, &moe_geom);
	/* the folder: the index is found in it */
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", ctx->dir, NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	check_loaded(name, true);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			check_st_record(host_record(&v, l, e), v.expert_bytes, l, e);
	moecache_close(v.mc);
}

void load_gguf(struct ct_ctx *ctx)
{
	static const char *const order[] = {"gate", "up", "down"};
	struct ct_geom g = {.n_layers = 2, .n_experts = 4, .n_slots = 2, .expert_bytes = 8192};
	uint64_t ne[3] = {HIDDEN, FFN, 4};
	uint64_t slice = gen_ggml_size(GEN_GGML_Q8_0, 3, ne) / 4,
		 stride = (slice + 255) / 256 * 256;
	const char *path = ct_file(ctx, "model.gguf");
	char name[MOECACHE_NAME_LEN], tensor[64];
	struct host_view v;
	struct gen_gguf gg;
	struct ct_out o;
	uint32_t l, e, p;
	uint64_t i;

	gen_gguf_init(&gg);
	gen_gguf_moe(&gg, 2, 4, GEN_GGML_Q8_0, HIDDEN, FFN);
	CT_OK(gen_gguf_write(&gg, path));
	gen_gguf_free(&gg);
	ct_pool(ctx, "gguf", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, false, "load", name, "--gguf", path, NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	check_loaded(name, true);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++) {
			const uint8_t *rec = host_record(&v, l, e);

			for (p = 0; p < 3; p++) {
				snprintf(tensor, sizeof(tensor), "blk.%u.ffn_%s_exps.weight", l,
					 order[p]);
				for (i = 0; i < slice; i++)
					if (rec[p * stride + i] !=
					    ckpt_gen_byte(tensor, e * slice + i))
						CT_FAIL("%s expert %u byte %llu", tensor, e,
							(unsigned long long)i);
			}
		}
	moecache_close(v.mc);
}

void load_local_range(struct ct_ctx *ctx)
{
	struct ct_geom g = moe_geom;
	const char *path = write_moe(ctx, 6);
	char name[MOECACHE_NAME_LEN];
	struct host_view v;
	struct ct_out o;
	uint32_t l, e;

	g.n_experts = 6;
	g.expert_begin = 2;
	g.expert_end = 4;
	ct_pool(ctx, "range", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 2; e < 4; e++)
			check_st_record(host_record(&v, l, e - 2), v.expert_bytes, l, e);
	moecache_close(v.mc);
}

void load_replaces_previous(struct ct_ctx *ctx)
{
	const char *path = write_moe(ctx, 4);
	char name[MOECACHE_NAME_LEN];
	struct host_view v;
	struct ct_out o;

	ct_pool(ctx, "re", name);
	ct_create(name, &moe_geom);
	/* the synthetic pattern leaves no zero byte for the padding to hide in */
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", NULL);
	CT_EQ(o.status, 0);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, "--quiet", NULL);
	CT_EQ(o.status, 0);
	CT_ASSERT(!o.out[0]);
	host_open(name, &v);
	check_st_record(host_record(&v, 1, 3), v.expert_bytes, 1, 3);
	moecache_close(v.mc);
}

void load_owner_unprivileged(struct ct_ctx *ctx)
{
	struct ct_geom g = moe_geom;
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	g.uid = CT_NOBODY;
	ct_pool(ctx, "own", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, true, "load", name, "--synthetic", NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	check_loaded(name, true);
}

void load_unprivileged(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], want[160];
	struct ct_geom g = moe_geom;
	struct ct_out o;

	/* Others may read it, so they learn it exists, but not write it. */
	g.mode = 0604;
	ct_pool(ctx, "priv", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, true, "load", name, "--synthetic", NULL);
	CT_EQ(o.status, 1);
	snprintf(want, sizeof(want), "moecachectl: pool '%s': Permission denied\n", name);
	CT_ASSERT(!strcmp(o.err, want));
	check_loaded(name, false);
}

void load_truncated(struct ct_ctx *ctx)
{
	const char *path = write_moe(ctx, 4);
	char name[MOECACHE_NAME_LEN];
	struct stat sb;
	struct ct_out o;

	CT_OK(stat(path, &sb) ? -errno : 0);
	CT_OK(truncate(path, sb.st_size - 100) ? -errno : 0);
	ct_pool(ctx, "cut", name);
	ct_create(name, &moe_geom);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, path);
	CT_CONTAINS(o.err, "model.layers.1.mlp.experts.3.up_proj.weight");
	check_loaded(name, false);
}

void load_wrong_geometry(struct ct_ctx *ctx)
{
	struct ct_geom g = moe_geom;
	const char *path = write_moe(ctx, 4);
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	g.n_layers = 3;
	ct_pool(ctx, "geo", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "2 layers");
	check_loaded(name, false);
}

void load_record_too_small(struct ct_ctx *ctx)
{
	struct ct_geom g = moe_geom;
	const char *path = write_moe(ctx, 4);
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	g.expert_bytes = 8192;
	ct_pool(ctx, "small", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "needs 12288 bytes");
	check_loaded(name, false);
}

void load_failure_after_begin(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	ct_pool(ctx, "late", name);
	ct_create(name, &moe_geom);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", NULL);
	CT_EQ(o.status, 0);
	check_loaded(name, true);
	/* the table cannot be written: every record was, but the load did not finish */
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--table", "/nonexistent/t.json", NULL);
	CT_EQ(o.status, 1);
	CT_CONTAINS(o.err, "left not loaded");
	check_loaded(name, false);
}

void load_killed(struct ct_ctx *ctx)
{
	/* 256 MiB: filling it takes long enough to be caught in the middle */
	struct ct_geom g = {.n_layers = 2, .n_experts = 64, .n_slots = 2, .expert_bytes = 2u << 20};
	char name[MOECACHE_NAME_LEN];
	uint64_t until;
	struct ct_out o;
	int status;
	pid_t pid;

	ct_pool(ctx, "kill", name);
	ct_create(name, &g);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--quiet", NULL);
	CT_EQ(o.status, 0);
	check_loaded(name, true);

	pid = fork();
	if (pid == 0) {
		char rundir[96];

		snprintf(rundir, sizeof(rundir), "%s/run", ctx->dir);
		setenv("MOECACHE_RUNDIR", rundir, 1);
		execlp("moecachectl", "moecachectl", "load", name, "--synthetic", "--quiet", NULL);
		_exit(127);
	}
	CT_ASSERT(pid > 0);
	until = ct_now_ms() + 20000;
	while (ct_pool_flags(name) & MOECACHE_POOL_LOADED) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			CT_FAIL("the load ended before it was seen running");
		if (ct_now_ms() > until)
			CT_FAIL("the second load never began");
	}
	CT_OK(kill(pid, SIGKILL) ? -errno : 0);
	CT_EQ(waitpid(pid, &status, 0), pid);
	CT_ASSERT(WIFSIGNALED(status));
	check_loaded(name, false);
}

/* Attaches path to a free loop device; returns its fd, the device's name in dev. */
static int loop_attach(const char *path, char *dev, size_t len)
{
	int ctl, n, fd, file;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		CT_FAIL("/dev/loop-control: %s (the VM needs loop.ko)", strerror(errno));
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	CT_ASSERT(n >= 0);
	snprintf(dev, len, "/dev/loop%d", n);
	fd = open(dev, O_RDWR | O_CLOEXEC);
	file = open(path, O_RDONLY | O_CLOEXEC);
	CT_ASSERT(fd >= 0 && file >= 0);
	CT_OK(ioctl(fd, LOOP_SET_FD, file) ? -errno : 0);
	close(file);
	return fd;
}

/*
 * A checkpoint of moe_geom's 2 x 4 experts on a loop device, every tensor
 * 4096 bytes at a multiple of 4096 (O_DIRECT can read it): its fd, the
 * device's name in dev.
 */
static int aligned_device(const struct ct_ctx *ctx, char *dev, size_t len)
{
	static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
	const char *path = ct_file(ctx, "aligned.safetensors");
	uint64_t gate[2] = {FFN, HIDDEN}, down[2] = {HIDDEN, FFN};
	struct gen_st st;
	char tensor[96];
	uint32_t l, e, p;

	gen_st_init(&st);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			for (p = 0; p < 3; p++) {
				snprintf(tensor, sizeof(tensor),
					 "model.layers.%u.mlp.experts.%u.%s.weight", l, e, proj[p]);
				gen_st_add(&st, tensor, "F16", 2, p == 2 ? down : gate);
			}
	CT_OK(gen_st_write(&st, path, 4096));
	gen_st_free(&st);
	return loop_attach(path, dev, len);
}

/* Loads the aligned checkpoint from a loop device with extra (NULL-ended) arguments. */
static void load_device(struct ct_ctx *ctx, const char *name, struct ct_out *o, const char *extra)
{
	char dev[32];
	int loop = aligned_device(ctx, dev, sizeof(dev));

	ct_create(name, &moe_geom);
	ct_ctl(ctx, o, false, "load", name, "--safetensors", dev, extra, NULL);
	ioctl(loop, LOOP_CLR_FD, 0);
	close(loop);
	if (o->status)
		CT_FAIL("load failed (%d): %s", o->status, o->err);
}

static void check_all_records(const char *name)
{
	struct host_view v;
	uint32_t l, e;

	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			check_st_record(host_record(&v, l, e), v.expert_bytes, l, e);
	moecache_close(v.mc);
}

void load_direct_block_device(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	ct_pool(ctx, "dio", name);
	load_device(ctx, name, &o, NULL);
	/* straight into the pinned host pages */
	CT_CONTAINS(o.out, "100% O_DIRECT");
	check_all_records(name);
}

void load_no_direct(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct ct_out o;

	/* the device that is read with O_DIRECT without the option */
	ct_pool(ctx, "nodio", name);
	load_device(ctx, name, &o, "--no-direct");
	CT_CONTAINS(o.out, " 0% O_DIRECT");
	check_all_records(name);
}

void load_model_layers(struct ct_ctx *ctx)
{
	const char *path = ct_file(ctx, "model.safetensors");
	char name[MOECACHE_NAME_LEN];
	struct host_view v;
	struct gen_st st;
	struct ct_out o;
	uint32_t l, e;

	/* model layers 0, 1 and 2 have experts; the pool has 2 layers: 1 and 2 */
	gen_st_init(&st);
	gen_st_moe(&st, 0, 3, 4, HIDDEN, FFN);
	CT_OK(gen_st_write(&st, path, 0));
	gen_st_free(&st);
	ct_pool(ctx, "ml", name);
	ct_create(name, &moe_geom);
	ct_ctl(ctx, &o, false, "load", name, "--safetensors", path, "--model-layers", "1:3", NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	check_loaded(name, true);
	host_open(name, &v);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			check_st_record(host_record(&v, l, e), v.expert_bytes, l + 1, e);
	moecache_close(v.mc);
}

void load_table_file(struct ct_ctx *ctx)
{
	const char *table = ct_file(ctx, "elsewhere.tensors.json");
	char name[MOECACHE_NAME_LEN], fallback[256];
	struct json_object *t;
	struct ct_out o;

	ct_pool(ctx, "tab", name);
	ct_create(name, &moe_geom);
	ct_ctl(ctx, &o, false, "load", name, "--synthetic", "--table", table, NULL);
	if (o.status)
		CT_FAIL("load failed (%d): %s", o.status, o.err);
	t = json_object_from_file(table);
	CT_ASSERT(t);
	CT_ASSERT(!strcmp(json_object_get_string(json_object_object_get(t, "pool")), name));
	CT_EQ(json_object_get_int64(json_object_object_get(t, "expert_bytes")), 16384);
	json_object_put(t);
	/* the table goes there instead of $MOECACHE_RUNDIR, and the output says where */
	snprintf(fallback, sizeof(fallback), "%s/run/%s.tensors.json", ctx->dir, name);
	CT_ASSERT(access(fallback, F_OK) != 0);
	CT_CONTAINS(o.out, table);
}
