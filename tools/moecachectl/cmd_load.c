// SPDX-License-Identifier: MIT
/*
 * moecachectl load: fills a pool's host pages from a checkpoint, as its
 * loader. The pool is marked loaded (LOAD DONE) only after every expert was
 * read and the tensor table written; anything else, an interruption
 * included, leaves it not loaded (LOAD BEGIN cleared the flag).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "ckpt.h"
#include "ctl.h"

static const char load_usage[] =
    "usage: moecachectl load NAME (--safetensors PATH | --gguf FILE | --synthetic)\n"
    "                        [--model-layers FIRST:END] [--table FILE] [--no-direct]\n"
    "                        [--quiet]\n"
    "\n"
    "Reads every expert of the pool's local range from a checkpoint into the\n"
    "pool's host pages, one record of expert_bytes per expert, and marks the\n"
    "pool loaded. Needs write permission on the pool.\n"
    "\n"
    "  --safetensors PATH  a .safetensors file, a model.safetensors.index.json\n"
    "                      (shards), or a folder holding either; experts are the\n"
    "                      tensors named ...layers.L...experts.E.<name>\n"
    "  --gguf FILE         llama.cpp stacked experts blk.L.ffn_*_exps.*, sliced\n"
    "  --synthetic         a pattern naming each record's layer and expert\n"
    "  --model-layers F:E  only the model's layers [F, E) (e.g. without an MTP layer)\n"
    "  --table FILE        where the tensor table goes (default\n"
    "                      $MOECACHE_RUNDIR/NAME.tensors.json, /run/moecache)\n"
    "  --no-direct         no O_DIRECT reads\n"
    "  --quiet             no progress bar, no summary\n";

enum {
	OPT_ST = 256,
	OPT_GGUF,
	OPT_SYNTH,
	OPT_LAYERS,
	OPT_TABLE,
	OPT_NO_DIRECT,
	OPT_QUIET,
	OPT_HELP
};

struct load_args {
	const char *pool;
	const char *path;
	const char *format; /* "safetensors", "gguf", "synthetic" */
	const char *table;
	uint32_t layer_first, layer_end;
	bool no_direct;
	bool quiet;
};

struct progress_bar {
	const char *pool;
	struct timespec start;
	double last;
	bool shown;
};

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void progress_update(void *arg, uint64_t done, uint64_t total)
{
	struct progress_bar *bar = arg;
	double t = since(&bar->start), frac = total ? (double)done / (double)total : 1;
	char d[32], tot[32], speed[32], hashes[31];
	int width = (int)(frac * 30), i;

	if (done != total && t - bar->last < 0.1)
		return;
	bar->last = t;
	bar->shown = true;
	for (i = 0; i < 30; i++)
		hashes[i] = i < width ? '#' : '.';
	hashes[30] = '\0';
	ctl_format_bytes(d, sizeof(d), done);
	ctl_format_bytes(tot, sizeof(tot), total);
	ctl_format_bytes(speed, sizeof(speed), t > 0 ? (uint64_t)((double)done / t) : 0);
	fprintf(stderr, "\rloading '%s' %3.0f%% [%s] %s / %s  %s/s ", bar->pool, frac * 100, hashes,
		d, tot, speed);
	fflush(stderr);
}

static void print_table(const struct ckpt_plan *plan, const char *table_path, uint64_t expert_bytes)
{
	char used[32], rec[32], shape[96];
	uint32_t i, d;

	ctl_format_bytes(used, sizeof(used), plan->record_bytes);
	ctl_format_bytes(rec, sizeof(rec), expert_bytes);
	printf("tensor table: %u tensors, %s of each %s record (%s)\n", plan->n_entries, used, rec,
	       table_path);
	printf("  %-12s %-12s %-8s %-20s %s\n", "OFFSET", "SIZE", "DTYPE", "SHAPE", "NAME");
	for (i = 0; i < plan->n_entries; i++) {
		const struct ckpt_entry *e = &plan->entries[i];
		size_t n = 0;

		n += (size_t)snprintf(shape, sizeof(shape), "[");
		for (d = 0; d < e->n_dims && n < sizeof(shape); d++)
			n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%s%" PRIu64,
					      d ? ", " : "", e->shape[d]);
		if (n < sizeof(shape))
			snprintf(shape + n, sizeof(shape) - n, "]");
		printf("  %-12" PRIu64 " %-12" PRIu64 " %-8s %-20s %s\n", e->offset, e->size,
		       e->dtype, shape, e->name);
	}
}

static int parse_load_args(int argc, char **argv, struct load_args *a)
{
	static const struct option opts[] = {
	    {"safetensors", required_argument, NULL, OPT_ST},
	    {"gguf", required_argument, NULL, OPT_GGUF},
	    {"synthetic", no_argument, NULL, OPT_SYNTH},
	    {"model-layers", required_argument, NULL, OPT_LAYERS},
	    {"table", required_argument, NULL, OPT_TABLE},
	    {"no-direct", no_argument, NULL, OPT_NO_DIRECT},
	    {"quiet", no_argument, NULL, OPT_QUIET},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	int opt, sources = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_ST:
		case OPT_GGUF:
		case OPT_SYNTH:
			sources++;
			a->path = optarg;
			a->format = opt == OPT_ST     ? "safetensors"
				    : opt == OPT_GGUF ? "gguf"
						      : "synthetic";
			break;
		case OPT_LAYERS:
			if (ctl_parse_range(optarg, &a->layer_first, &a->layer_end) ||
			    a->layer_first >= a->layer_end)
				return ctl_usage_fail("load", "bad --model-layers '%s' (FIRST:END)",
						      optarg);
			break;
		case OPT_TABLE:
			a->table = optarg;
			break;
		case OPT_NO_DIRECT:
			a->no_direct = true;
			break;
		case OPT_QUIET:
			a->quiet = true;
			break;
		case OPT_HELP:
			fputs(load_usage, stdout);
			return -1;
		default:
			return ctl_bad_option("load", argv);
		}
	}
	if (argc - optind != 1)
		return ctl_usage_fail("load", "takes one pool name");
	if (sources != 1)
		return ctl_usage_fail("load", "needs one of --safetensors, --gguf, --synthetic");
	a->pool = argv[optind];
	return 0;
}

/* Opens and plans the checkpoint for the pool's geometry. */
static int plan_checkpoint(const struct load_args *a, const struct moecache_pool_info *info,
			   struct ckpt *c, struct ckpt_plan *plan)
{
	struct ckpt_select sel = {
	    .n_layers = info->n_layers,
	    .n_experts = info->n_experts,
	    .expert_begin = info->expert_begin,
	    .expert_end = info->expert_end,
	    .layer_first = a->layer_first,
	    .layer_end = a->layer_end,
	};
	struct ckpt_error err = {{0}};
	int ret;

	memset(c, 0, sizeof(*c));
	if (!strcmp(a->format, "synthetic")) {
		ret = ckpt_plan_synthetic(&sel, info->expert_bytes, plan);
		return ret ? ctl_fail("load: %s", strerror(-ret)) : 0;
	}
	if (!strcmp(a->format, "gguf"))
		ret = ckpt_open_gguf(a->path, c, &err);
	else
		ret = ckpt_open_safetensors(a->path, c, &err);
	if (!ret)
		ret = ckpt_plan(c, &sel, plan, &err);
	if (!ret && plan->record_bytes > info->expert_bytes) {
		snprintf(err.msg, sizeof(err.msg),
			 "an expert needs %" PRIu64 " bytes, the pool's records have %" PRIu64,
			 plan->record_bytes, info->expert_bytes);
		ckpt_plan_free(plan);
		ret = -ENOSPC;
	}
	if (ret) {
		ckpt_close(c);
		return ctl_fail("load: pool '%s': %s", a->pool, err.msg);
	}
	return 0;
}

static int write_table(const struct ctl *ctl, const struct load_args *a,
		       const struct ckpt_plan *plan, uint64_t expert_bytes, char **path_out)
{
	struct json_object *table;
	char *path;
	int ret;

	path = a->table ? strdup(a->table) : ctl_run_path(ctl, a->pool, ".tensors.json");
	if (!path)
		return ctl_fail("load: out of memory");
	if (!a->table) {
		ret = ctl_make_rundir(ctl);
		if (ret) {
			ctl_fail("load: %s: %s", ctl->rundir, strerror(-ret));
			free(path);
			return CTL_EXIT_FAIL;
		}
	}
	ret = ckpt_table_json(plan, a->pool, a->format, expert_bytes, &table);
	if (!ret) {
		ret = ckpt_table_write(path, table);
		json_object_put(table);
	}
	if (ret) {
		ctl_fail("load: tensor table %s: %s", path, strerror(-ret));
		free(path);
		return CTL_EXIT_FAIL;
	}
	*path_out = path;
	return 0;
}

int ctl_cmd_load(struct ctl *ctl, int argc, char **argv)
{
	struct load_args a = {0};
	struct progress_bar bar = {0};
	struct ckpt_progress progress = {progress_update, &bar};
	struct ckpt_load_stats stats = {0};
	struct ckpt_error err = {{0}};
	const struct moecache_pool_info *info;
	struct ckpt_plan plan = {0};
	struct ckpt c = {0};
	struct moecache *mc;
	char *table_path = NULL;
	double elapsed = 0;
	size_t host_size;
	void *host;
	int ret;

	ret = parse_load_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? CTL_EXIT_OK : ret;
	ret = moecache_open(ctl->device, &mc);
	if (ret)
		return ctl_fail("%s: %s%s", ctl->device, strerror(-ret),
				ret == -ENOENT ? " (is the moecache module loaded?)" : "");
	ret = moecache_attach(mc, a.pool, MOECACHE_ROLE_LOADER);
	if (ret) {
		moecache_close(mc);
		return ctl_pool_fail(NULL, a.pool, ret);
	}
	info = moecache_pool(mc);
	ret = plan_checkpoint(&a, info, &c, &plan);
	if (ret)
		goto out;
	ret = moecache_host_map(mc, true, &host, &host_size);
	if (ret) {
		ret =
		    ctl_fail("load: pool '%s': mapping the host pages: %s", a.pool, strerror(-ret));
		goto out;
	}
	ret = moecache_load(mc, MOECACHE_LOAD_BEGIN);
	if (ret) {
		ret = ctl_fail("load: pool '%s': LOAD BEGIN: %s", a.pool, strerror(-ret));
		goto out;
	}

	bar.pool = a.pool;
	clock_gettime(CLOCK_MONOTONIC, &bar.start);
	if (!strcmp(a.format, "synthetic")) {
		ckpt_fill_synthetic(&plan, host, info->expert_bytes);
		stats.bytes = (uint64_t)info->n_layers * info->n_local * info->expert_bytes;
	} else {
		ret = ckpt_load(&c, &plan, host, info->expert_bytes, a.no_direct,
				ctl->stderr_tty && !a.quiet ? &progress : NULL, &stats, &err);
		if (bar.shown)
			fputc('\n', stderr);
		if (ret) {
			ret = ctl_fail("load: pool '%s' left not loaded: %s", a.pool, err.msg);
			goto out;
		}
	}
	elapsed = since(&bar.start);
	ret = write_table(ctl, &a, &plan, info->expert_bytes, &table_path);
	if (ret) {
		ctl_fail("load: pool '%s' left not loaded", a.pool);
		goto out;
	}
	ret = moecache_load(mc, MOECACHE_LOAD_DONE);
	if (ret) {
		ret = ctl_fail("load: pool '%s': LOAD DONE: %s", a.pool, strerror(-ret));
		goto out;
	}
	if (!a.quiet) {
		double t = since(&bar.start);
		char bytes[32], speed[32];

		ctl_format_bytes(bytes, sizeof(bytes), stats.bytes);
		ctl_format_bytes(speed, sizeof(speed),
				 t > 0 ? (uint64_t)((double)stats.bytes / t) : 0);
		printf("pool '%s': loaded %u layers x %u experts, %s in %.2f s (%s/s, %.0f%% "
		       "O_DIRECT)\n",
		       a.pool, info->n_layers, info->n_local, bytes, elapsed, speed,
		       stats.bytes ? 100.0 * (double)stats.bytes_direct / (double)stats.bytes : 0);
		print_table(&plan, table_path, info->expert_bytes);
	}
out:
	free(table_path);
	ckpt_plan_free(&plan);
	ckpt_close(&c);
	moecache_close(mc);
	return ret ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}
