// SPDX-License-Identifier: MIT
/*
 * moecache-decode: a verifying decode client.
 *
 * Replays a routing trace through the pool's MoE layers as an inference
 * process would: per step and layer, one ACQUIRE (releasing the previous
 * layer's pins in the same call) of the trace's top-k experts, the SwiGLU
 * expert FFN over the weights in the bank slots, and the same FFN (same
 * code, same order) over the host pages: the two outputs must be equal bit
 * for bit. Expert weights are a deterministic function of (seed, layer,
 * expert) (kernels/ref), so --fill (as the pool's loader) writes them and
 * every client can check them.
 *
 * With --cold cpu the client does not wait for misses: the acquire pins the
 * hits and queues the misses (the agent copies them in for later steps), and
 * the cold experts are computed on the CPU from the host pages, as an engine
 * that offloads cold experts to the host does (docs/policy.md, the plan of a
 * layer). The layer's output is still checked bit for bit. With --cold plan
 * the plan of a layer decides, through moecache_acquire_plan (libmoecache.h,
 * lib/plan.c: the simulator's code, with the copy queue the driver
 * publishes in the map): the hits and the misses the plan waits for are
 * pinned, the others are computed on the CPU from the host pages, and those
 * the plan admits are queued for the agent as misses behind them.
 *
 * With --batch B the client decodes B sequences at once, as a serving
 * engine batches requests: the selected tokens are cut into B stretches
 * exactly as `moecache-trace sim --batch B` cuts them (tools/trace/batch.h,
 * the same code), and each step acquires, per layer, the union of the
 * experts the B tokens select, once. Each sequence has its own input and
 * residual stream; its layer output (its own experts, from the union's
 * slots) is checked bit for bit against the host pages as at batch 1.
 *
 * A pool of several banks (tiers): the acquire's route (libmoecache)
 * sends each resident expert to the bank it is in. Every bank is imported
 * on its own (for the CPU backend its own memfd) and has its own worker
 * thread, standing for its device, that runs the bank's experts of the
 * layer; cold experts run on the calling thread from the host pages. Each
 * expert's output is computed alone and the outputs are summed in the
 * acquire's order, on both sides of the check, so the split changes no
 * bit. A pool of one bank runs its experts on the calling thread.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "libmoecache.h"
#include "moe_numerics.h"
#include "ref/moe_ref.h"
#include "trace/batch.h"
#include "trace/trace.h"

enum {
	EXIT_MISMATCH = 1,
	EXIT_USAGE = 2,
	EXIT_RUNTIME = 3,
};

struct decode_opts {
	const char *pool;
	const char *device;
	const char *trace;
	const char *prompt;
	const char *phase;
	const char *label;
	uint32_t steps; /* 0: the rest of the trace */
	uint32_t start;
	uint32_t batch; /* --batch: sequences decoded together (1: none) */
	uint32_t timeout_ms;
	uint64_t seed;
	struct moe_ffn_shape shape;
	bool fill;
	bool print_expert_bytes;
	bool prefetch;
	bool fast_pins;
	bool keep_waiting;
	bool check_weights;
	bool json;
	enum decode_cold { COLD_WAIT, COLD_CPU, COLD_PLAN } cold; /* --cold: what a miss does */
	double plan_layer_us; /* --layer-us: device time per layer the plan assumes */
};

struct decode_counts {
	uint64_t steps, acquires, hits, misses, lookup_hits, prefetched, remote;
	uint64_t wait_ns, mismatches, weight_errors;
	uint64_t cpu_experts; /* --cold cpu|plan: misses computed from the host pages */
	uint64_t plan_waited, plan_admitted; /* --cold plan: misses waited for, queued behind */
	uint64_t *bank_experts;		     /* [n_banks]: experts run on each bank */
	double seconds;
};

struct decode_client;

/*
 * A bank's worker: a thread standing for the bank's device. For each
 * layer it runs the bank's group of the route, each expert's output
 * alone into out[pos].
 */
struct decode_worker {
	struct decode_client *dc;
	uint32_t bank;
	pthread_t thread;
	bool started;
	float *h; /* [d_ff] */
	int ret;
};

struct decode_client {
	const struct decode_opts *o;
	struct moecache *mc;
	const struct moecache_pool_info *pi;
	const struct moecache_map *map;
	struct moecache_bank_map *banks; /* [n_banks] */
	uint32_t n_banks;
	struct moecache_route *route;
	struct decode_worker *workers; /* [n_banks] when n_banks > 1 */
	/* The layer's job for the workers: gen counts layers handed out, done counts workers done.
	 */
	pthread_mutex_t job_lock;
	pthread_cond_t job_cv, done_cv;
	uint64_t job_gen;
	uint32_t job_done;
	bool job_quit;
	float *out_bank, *out_host; /* [top_k][d_model]: each expert's output */
	uint32_t agent_epoch;
	struct moe_trace *trace;
	struct moe_trace_view steps; /* what is acquired: the selection, or its batched unions */
	struct moe_trace *batched;   /* --batch: the unions (tools/trace/batch.h) */
	struct moe_trace_view seqs;  /* --batch: the selected tokens the stretches are cut from */
	uint8_t *weights_checked;    /* [n_layers * n_local] */
	float *xs;		     /* [batch][d_model]: each sequence's residual stream */
	float *x;		     /* the sequence being computed: a row of xs */
	float *y_bank, *y_host, *h;
	float *gate; /* [top_k]: 0 for an expert the sequence did not select */
	uint32_t *experts, *slots, *held, n_held, *next;
	uint8_t *action; /* --cold plan: the plan of the layer */
	const void **rec_bank, **rec_host;
	struct decode_counts c;
};

static const char decode_usage[] =
    "usage: moecache-decode --pool NAME [--trace FILE] [options]\n"
    "       moecache-decode --pool NAME --fill [--d-model N --d-ff N --dtype T --seed N]\n"
    "  --trace FILE        routing trace (JSON lines, or a prompts file): a path or a\n"
    "                      shipped trace's name (default " MOE_TRACE_DEFAULT ")\n"
    "  --prompt NAME       prompt of a prompts file (default: the first)\n"
    "  --phase P           decode (default) or prefill\n"
    "  --steps N           steps to run (default: the rest of the trace; wraps around)\n"
    "  --start-token T     first step of the trace\n"
    "  --batch B           decode B stretches of the trace at once, as sim --batch B:\n"
    "                      one acquire per layer of their union (--steps and\n"
    "                      --start-token count batched steps)\n"
    "  --d-model N --d-ff N --dtype f32|bf16 --seed N   expert shape and weights\n"
    "  --prefetch          hint each next layer's experts (from the trace; with\n"
    "                      --cold plan, through the plan's gate)\n"
    "  --cold wait|cpu|plan  misses: wait for their copy (default), compute them on\n"
    "                      the CPU from the host pages while the agent copies them in,\n"
    "                      or as the plan of a layer says (h200 figures)\n"
    "  --layer-us T        with --cold plan: device time per layer (default 45)\n"
    "  --fast-pins         pin hits without a system call (MOECACHE_ATTACH_FAST_PINS)\n"
    "  --timeout-ms N      longest wait for one acquire (default 60000, 0: none)\n"
    "  --no-keep-waiting   fail when no agent is attached instead of waiting\n"
    "  --no-check-weights  skip checking host pages against the generator\n"
    "  --label NAME        name in the report\n"
    "  --json              report as one JSON object\n"
    "  --device PATH       the device node\n"
    "  --fill              write every expert's weights into the host pages (loader)\n"
    "  --print-expert-bytes  print the pool expert_bytes this shape needs, and exit\n";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	int ret = parse_u64(s, UINT32_MAX, &v);

	if (!ret)
		*out = (uint32_t)v;
	return ret;
}

static int decode_parse_args(int argc, char **argv, struct decode_opts *o)
{
	enum {
		O_POOL = 256,
		O_DEVICE,
		O_TRACE,
		O_PROMPT,
		O_PHASE,
		O_STEPS,
		O_START,
		O_BATCH,
		O_DMODEL,
		O_DFF,
		O_DTYPE,
		O_SEED,
		O_FILL,
		O_PREFETCH,
		O_FAST_PINS,
		O_TIMEOUT,
		O_NO_KEEP,
		O_NO_CHECK,
		O_LABEL,
		O_JSON,
		O_PRINT_BYTES,
		O_COLD,
		O_LAYER_US,
		O_HELP,
	};
	static const struct option opts[] = {
	    {"pool", required_argument, NULL, O_POOL},
	    {"device", required_argument, NULL, O_DEVICE},
	    {"trace", required_argument, NULL, O_TRACE},
	    {"prompt", required_argument, NULL, O_PROMPT},
	    {"phase", required_argument, NULL, O_PHASE},
	    {"steps", required_argument, NULL, O_STEPS},
	    {"start-token", required_argument, NULL, O_START},
	    {"batch", required_argument, NULL, O_BATCH},
	    {"d-model", required_argument, NULL, O_DMODEL},
	    {"d-ff", required_argument, NULL, O_DFF},
	    {"dtype", required_argument, NULL, O_DTYPE},
	    {"seed", required_argument, NULL, O_SEED},
	    {"fill", no_argument, NULL, O_FILL},
	    {"prefetch", no_argument, NULL, O_PREFETCH},
	    {"fast-pins", no_argument, NULL, O_FAST_PINS},
	    {"timeout-ms", required_argument, NULL, O_TIMEOUT},
	    {"no-keep-waiting", no_argument, NULL, O_NO_KEEP},
	    {"cold", required_argument, NULL, O_COLD},
	    {"layer-us", required_argument, NULL, O_LAYER_US},
	    {"no-check-weights", no_argument, NULL, O_NO_CHECK},
	    {"label", required_argument, NULL, O_LABEL},
	    {"json", no_argument, NULL, O_JSON},
	    {"print-expert-bytes", no_argument, NULL, O_PRINT_BYTES},
	    {"help", no_argument, NULL, O_HELP},
	    {NULL, 0, NULL, 0},
	};
	int opt, ret = 0;

	*o = (struct decode_opts){
	    .trace = MOE_TRACE_DEFAULT,
	    .timeout_ms = 60000,
	    .seed = 1,
	    .batch = 1,
	    .shape = {.dtype = MOE_DTYPE_F32, .d_model = 128, .d_ff = 256},
	    .keep_waiting = true,
	    .plan_layer_us = 45,
	    .check_weights = true,
	};
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case O_POOL:
			o->pool = optarg;
			break;
		case O_DEVICE:
			o->device = optarg;
			break;
		case O_TRACE:
			o->trace = optarg;
			break;
		case O_PROMPT:
			o->prompt = optarg;
			break;
		case O_PHASE:
			o->phase = optarg;
			break;
		case O_LABEL:
			o->label = optarg;
			break;
		case O_STEPS:
			ret = parse_u32(optarg, &o->steps);
			break;
		case O_START:
			ret = parse_u32(optarg, &o->start);
			break;
		case O_BATCH:
			ret = parse_u32(optarg, &o->batch);
			if (!ret && (o->batch < 1 || o->batch > 4096))
				ret = -EINVAL;
			break;
		case O_DMODEL:
			ret = parse_u32(optarg, &o->shape.d_model);
			break;
		case O_DFF:
			ret = parse_u32(optarg, &o->shape.d_ff);
			break;
		case O_TIMEOUT:
			ret = parse_u32(optarg, &o->timeout_ms);
			break;
		case O_SEED:
			ret = parse_u64(optarg, UINT64_MAX, &o->seed);
			break;
		case O_DTYPE:
			if (!strcmp(optarg, "f32") || !strcmp(optarg, "fp32"))
				o->shape.dtype = MOE_DTYPE_F32;
			else if (!strcmp(optarg, "bf16"))
				o->shape.dtype = MOE_DTYPE_BF16;
			else
				ret = -EINVAL;
			break;
		case O_FILL:
			o->fill = true;
			break;
		case O_PREFETCH:
			o->prefetch = true;
			break;
		case O_FAST_PINS:
			o->fast_pins = true;
			break;
		case O_NO_KEEP:
			o->keep_waiting = false;
			break;
		case O_COLD:
			if (!strcmp(optarg, "wait")) {
				o->cold = COLD_WAIT;
			} else if (!strcmp(optarg, "cpu")) {
				o->cold = COLD_CPU;
			} else if (!strcmp(optarg, "plan")) {
				o->cold = COLD_PLAN;
			} else {
				fprintf(stderr, "moecache-decode: --cold: wait, cpu or plan\n");
				return -EINVAL;
			}
			break;
		case O_LAYER_US: {
			char *end;

			errno = 0;
			o->plan_layer_us = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->plan_layer_us >= 0) ||
			    o->plan_layer_us > 1e9) {
				fprintf(stderr,
					"moecache-decode: --layer-us: a time in [0, 1e9] us\n");
				return -EINVAL;
			}
			break;
		}
		case O_NO_CHECK:
			o->check_weights = false;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_PRINT_BYTES:
			o->print_expert_bytes = true;
			break;
		case O_HELP:
			fputs(decode_usage, stdout);
			exit(0);
		default: /* an unknown option: getopt said which */
			fputs(decode_usage, stderr);
			return -EINVAL;
		}
		if (ret) {
			const struct option *bad = opts;

			while (bad->val != opt)
				bad++;
			fprintf(stderr, "moecache-decode: bad value '%s' for --%s\n%s", optarg,
				bad->name, decode_usage);
			return ret;
		}
	}
	if (optind < argc || (!o->print_expert_bytes && !o->pool)) {
		fputs(decode_usage, stderr);
		return -EINVAL;
	}
	if (moe_ffn_shape_check(&o->shape)) {
		fprintf(stderr, "moecache-decode: d_model and d_ff must be multiples of %u\n",
			MOE_DIM_MULTIPLE);
		return -EINVAL;
	}
	return 0;
}

static int decode_attach(const struct decode_opts *o, enum moecache_role role,
			 struct moecache **out)
{
	struct moe_expert_layout l;
	int ret;

	ret = moecache_open(o->device, out);
	if (!ret)
		ret = moecache_attach_flags(
		    *out, o->pool, role,
		    role == MOECACHE_ROLE_CLIENT && o->fast_pins ? MOECACHE_ATTACH_FAST_PINS : 0);
	if (ret) {
		fprintf(stderr, "moecache-decode: attach to pool %s: %s\n", o->pool,
			strerror(-ret));
		moecache_close(*out);
		*out = NULL;
		return ret;
	}
	moe_expert_layout_get(o->shape.dtype, o->shape.d_model, o->shape.d_ff, &l);
	if (moecache_pool(*out)->expert_bytes < l.bytes) {
		fprintf(stderr,
			"moecache-decode: pool %s has %llu-byte experts; this shape needs "
			"%llu\n",
			o->pool, (unsigned long long)moecache_pool(*out)->expert_bytes,
			(unsigned long long)l.bytes);
		moecache_close(*out);
		*out = NULL;
		return -EINVAL;
	}
	return 0;
}

/* --fill: the loader writes every expert of the pool's range. */
static int decode_fill(const struct decode_opts *o)
{
	const struct moecache_pool_info *pi;
	struct moecache *mc;
	uint64_t t0 = now_ns();
	uint32_t n = 0;
	int ret;

	ret = decode_attach(o, MOECACHE_ROLE_LOADER, &mc);
	if (ret)
		return EXIT_RUNTIME;
	pi = moecache_pool(mc);
	ret = moecache_host_map(mc, true, NULL, NULL);
	if (!ret)
		ret = moecache_load(mc, MOECACHE_LOAD_BEGIN);
	for (uint32_t l = 0; !ret && l < pi->n_layers; l++)
		for (uint32_t e = pi->expert_begin; !ret && e < pi->expert_end; e++, n++)
			ret = moe_gen_expert(moecache_host_expert_rw(mc, l, e), pi->expert_bytes,
					     &o->shape, o->seed, l, e);
	if (!ret)
		ret = moecache_load(mc, MOECACHE_LOAD_DONE);
	if (ret) {
		fprintf(stderr, "moecache-decode: fill pool %s: %s\n", o->pool, strerror(-ret));
		moecache_close(mc);
		return EXIT_RUNTIME;
	}
	printf("fill: pool=%s experts=%u host_bytes=%llu seconds=%.2f\n", o->pool, n,
	       (unsigned long long)n * pi->expert_bytes, (now_ns() - t0) / 1e9);
	moecache_close(mc);
	return 0;
}

/*
 * Every bank, once the agent has set them all, imported afresh: a new
 * agent may have set new objects (a client's file of a CPU bank is a view
 * of it, so which object it shows cannot be told by its inode).
 */
static int decode_bank_refresh(struct decode_client *dc)
{
	struct moecache_bank_map *fresh = calloc(dc->n_banks, sizeof(*fresh));
	uint64_t deadline =
	    now_ns() + (uint64_t)(dc->o->timeout_ms ? dc->o->timeout_ms : 600000) * 1000000u;
	int ret;

	if (!fresh)
		return -ENOMEM;
	for (;;) {
		ret = moecache_bank_import_all(dc->mc, fresh, dc->n_banks);
		if (ret != -ENODATA || now_ns() > deadline)
			break;
		usleep(20000);
	}
	if (ret >= 0 && (uint32_t)ret != dc->n_banks) {
		for (int i = 0; i < ret; i++)
			moecache_bank_unimport(&fresh[i]);
		ret = -EPROTO;
	}
	if (ret < 0) {
		free(fresh);
		return ret;
	}
	for (uint32_t i = 0; i < dc->n_banks; i++) {
		moecache_bank_unimport(&dc->banks[i]);
		dc->banks[i] = fresh[i];
	}
	free(fresh);
	return 0;
}

/*
 * The trace and the steps to replay: one prompt (--prompt, else the first)
 * in one phase (--phase, else decode).
 */
static int decode_load_trace(struct decode_client *dc, char *err, size_t errlen)
{
	const struct decode_opts *o = dc->o;
	enum moe_trace_phase phase = MOE_TRACE_DECODE;
	const char *prompt;
	int ret;

	if (o->phase && moe_trace_phase_parse(o->phase, &phase)) {
		snprintf(err, errlen, "phase '%s': decode, prefill or all", o->phase);
		return -EINVAL;
	}
	ret = moe_trace_load(o->trace, &dc->trace, err, errlen);
	if (ret)
		return ret;
	prompt = o->prompt ? o->prompt : dc->trace->prompts[0];
	ret = moe_trace_select(dc->trace, prompt, phase, &dc->steps);
	if (ret == -ENOENT)
		snprintf(err, errlen, "%s: no prompt '%s'", o->trace, prompt);
	else if (ret)
		snprintf(err, errlen, "%s: %s", o->trace, strerror(-ret));
	else if (dc->steps.n == 0) {
		snprintf(err, errlen, "%s: no %s steps in prompt '%s'", o->trace,
			 moe_trace_phase_name(phase), prompt);
		ret = -EINVAL;
	}
	if (ret || o->batch == 1)
		return ret;
	/* The stretches and their unions: sim --batch's own code. */
	dc->seqs = dc->steps;
	dc->steps = (struct moe_trace_view){0};
	ret = moe_trace_batch(&dc->seqs, o->batch, &dc->batched);
	if (!ret)
		ret = moe_trace_select(dc->batched, NULL, MOE_TRACE_ALL, &dc->steps);
	if (ret == -EINVAL)
		snprintf(err, errlen, "--batch %u: %u tokens selected, fewer than the sequences",
			 o->batch, dc->seqs.n);
	else if (ret)
		snprintf(err, errlen, "--batch %u: %s", o->batch, strerror(-ret));
	return ret;
}

/* The view's token that sequence seq decodes at step (batch 1: the step itself). */
static uint32_t decode_seq_token(const struct decode_client *dc, uint32_t step, uint32_t seq)
{
	return dc->o->batch == 1 ? step
				 : moe_trace_batch_member(dc->seqs.n, dc->o->batch, step, seq);
}

static float *decode_alloc_floats(size_t n)
{
	return aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
}

/* One expert's output alone (gate times its FFN), as a device would write it. */
static void decode_expert_out(const struct decode_client *dc, const void *rec, float gate, float *h,
			      float *out)
{
	memset(out, 0, dc->o->shape.d_model * sizeof(float));
	moe_ref_ffn_token(&dc->o->shape, 1, &rec, &gate, dc->x, h, out);
}

/* y = x + the outputs of the sequence's experts among the n, summed in the acquire's order. */
static void decode_sum(const struct decode_client *dc, uint32_t n, const float *out, float *y)
{
	const uint32_t d = dc->o->shape.d_model;

	for (uint32_t r = 0; r < d; r++) {
		float acc = 0.0f;

		for (uint32_t k = 0; k < n; k++)
			if (dc->gate[k])
				acc = MOE_FADD(acc, out[(size_t)k * d + r]);
		y[r] = MOE_FADD(dc->x[r], acc);
	}
}

/* Runs bank b's experts of the layer's route from the bank's slots. */
static int decode_run_bank(struct decode_client *dc, uint32_t b, float *h)
{
	uint32_t n;
	const struct moecache_route_entry *e = moecache_route_group(dc->route, b, &n);

	for (uint32_t i = 0; i < n; i++) {
		const void *rec = moecache_bank_slot(&dc->banks[b], e[i].slot);

		dc->rec_bank[e[i].pos] = rec;
		if (!rec)
			return -EPROTO;
		if (!dc->gate[e[i].pos])
			continue; /* another sequence's */
		decode_expert_out(dc, rec, dc->gate[e[i].pos], h,
				  dc->out_bank + (size_t)e[i].pos * dc->o->shape.d_model);
		dc->c.bank_experts[b]++;
	}
	return 0;
}

static void *decode_worker_run(void *arg)
{
	struct decode_worker *w = arg;
	struct decode_client *dc = w->dc;
	uint64_t seen = 0;

	pthread_mutex_lock(&dc->job_lock);
	for (;;) {
		while (dc->job_gen == seen && !dc->job_quit)
			pthread_cond_wait(&dc->job_cv, &dc->job_lock);
		if (dc->job_quit)
			break;
		seen = dc->job_gen;
		pthread_mutex_unlock(&dc->job_lock);
		w->ret = decode_run_bank(dc, w->bank, w->h);
		pthread_mutex_lock(&dc->job_lock);
		if (++dc->job_done == dc->n_banks)
			pthread_cond_signal(&dc->done_cv);
	}
	pthread_mutex_unlock(&dc->job_lock);
	return NULL;
}

/* Hands the layer's route to every bank's worker. */
static void decode_banks_start(struct decode_client *dc)
{
	pthread_mutex_lock(&dc->job_lock);
	dc->job_done = 0;
	dc->job_gen++;
	pthread_cond_broadcast(&dc->job_cv);
	pthread_mutex_unlock(&dc->job_lock);
}

/* Waits for every bank's worker: 0, or the first error. */
static int decode_banks_wait(struct decode_client *dc)
{
	int ret = 0;

	pthread_mutex_lock(&dc->job_lock);
	while (dc->job_done < dc->n_banks)
		pthread_cond_wait(&dc->done_cv, &dc->job_lock);
	pthread_mutex_unlock(&dc->job_lock);
	for (uint32_t b = 0; b < dc->n_banks && !ret; b++)
		ret = dc->workers[b].ret;
	return ret;
}

/*
 * The pool's banks (from the map), the route of top_k experts and, for
 * more than one bank, a worker thread per bank.
 */
static int decode_banks_setup(struct decode_client *dc, uint32_t top_k)
{
	int ret;

	dc->n_banks = moecache_map_n_banks(dc->map);
	dc->banks = calloc(dc->n_banks, sizeof(*dc->banks));
	dc->c.bank_experts = calloc(dc->n_banks, sizeof(*dc->c.bank_experts));
	if (!dc->banks || !dc->c.bank_experts)
		return -ENOMEM;
	for (uint32_t b = 0; b < dc->n_banks; b++)
		dc->banks[b].fd = -1;
	ret = moecache_route_new(dc->map, top_k, &dc->route);
	if (ret || dc->n_banks == 1)
		return ret;
	dc->workers = calloc(dc->n_banks, sizeof(*dc->workers));
	if (!dc->workers)
		return -ENOMEM;
	for (uint32_t b = 0; b < dc->n_banks; b++) {
		struct decode_worker *w = &dc->workers[b];

		w->dc = dc;
		w->bank = b;
		w->h = decode_alloc_floats(dc->o->shape.d_ff);
		if (!w->h)
			return -ENOMEM;
		ret = -pthread_create(&w->thread, NULL, decode_worker_run, w);
		if (ret)
			return ret;
		w->started = true;
	}
	return 0;
}

static void decode_banks_teardown(struct decode_client *dc)
{
	if (dc->workers) {
		pthread_mutex_lock(&dc->job_lock);
		dc->job_quit = true;
		pthread_cond_broadcast(&dc->job_cv);
		pthread_mutex_unlock(&dc->job_lock);
		for (uint32_t b = 0; b < dc->n_banks; b++) {
			if (dc->workers[b].started)
				pthread_join(dc->workers[b].thread, NULL);
			free(dc->workers[b].h);
		}
		free(dc->workers);
	}
	for (uint32_t b = 0; dc->banks && b < dc->n_banks; b++)
		moecache_bank_unimport(&dc->banks[b]);
	free(dc->banks);
	free(dc->c.bank_experts);
	moecache_route_free(dc->route);
}

static int decode_setup(struct decode_client *dc, const struct decode_opts *o)
{
	char err[512];
	uint32_t k;
	int ret;

	memset(dc, 0, sizeof(*dc));
	dc->o = o;
	pthread_mutex_init(&dc->job_lock, NULL);
	pthread_cond_init(&dc->job_cv, NULL);
	pthread_cond_init(&dc->done_cv, NULL);
	ret = decode_load_trace(dc, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "moecache-decode: %s\n", err);
		return ret;
	}
	ret = decode_attach(o, MOECACHE_ROLE_CLIENT, &dc->mc);
	if (ret)
		return ret;
	dc->pi = moecache_pool(dc->mc);
	dc->map = moecache_map(dc->mc);
	if (dc->trace->n_layers > dc->pi->n_layers || dc->trace->n_experts > dc->pi->n_experts) {
		fprintf(stderr,
			"moecache-decode: the trace (%u layers x %u experts) does not fit "
			"pool %s "
			"(%u layers x %u experts)\n",
			dc->trace->n_layers, dc->trace->n_experts, o->pool, dc->pi->n_layers,
			dc->pi->n_experts);
		return -EINVAL;
	}
	ret = moecache_host_map(dc->mc, false, NULL, NULL);
	if (ret) {
		fprintf(stderr, "moecache-decode: map host pages: %s\n", strerror(-ret));
		return ret;
	}
	k = dc->steps.trace->top_k; /* batched: the largest union */
	ret = decode_banks_setup(dc, k);
	if (ret) {
		fprintf(stderr, "moecache-decode: banks: %s\n", strerror(-ret));
		return ret;
	}
	dc->agent_epoch = moecache_map_agent_epoch(dc->map);
	ret = decode_bank_refresh(dc);
	if (ret) {
		fprintf(stderr, "moecache-decode: import the banks: %s\n", strerror(-ret));
		return ret;
	}
	dc->weights_checked = calloc((size_t)dc->pi->n_layers * dc->pi->n_local, 1);
	dc->xs = decode_alloc_floats((size_t)o->batch * o->shape.d_model);
	dc->y_bank = decode_alloc_floats(o->shape.d_model);
	dc->y_host = decode_alloc_floats(o->shape.d_model);
	dc->h = decode_alloc_floats((size_t)k * o->shape.d_ff);
	dc->out_bank = decode_alloc_floats((size_t)k * o->shape.d_model);
	dc->out_host = decode_alloc_floats((size_t)k * o->shape.d_model);
	dc->gate = decode_alloc_floats(k);
	dc->experts = calloc(k, sizeof(uint32_t));
	dc->next = calloc(k, sizeof(uint32_t));
	dc->slots = calloc(k, sizeof(uint32_t));
	dc->held = calloc(k, sizeof(uint32_t));
	dc->rec_bank = calloc(k, sizeof(void *));
	dc->rec_host = calloc(k, sizeof(void *));
	dc->action = calloc(k, sizeof(*dc->action));
	if (!dc->weights_checked || !dc->xs || !dc->y_bank || !dc->y_host || !dc->h || !dc->gate ||
	    !dc->out_bank || !dc->out_host || !dc->experts || !dc->next || !dc->slots ||
	    !dc->held || !dc->rec_bank || !dc->rec_host || !dc->action)
		return -ENOMEM;
	if (k > MOECACHE_PLAN_MAX_ITEMS)
		return -E2BIG;
	return 0;
}

static void decode_teardown(struct decode_client *dc)
{
	decode_banks_teardown(dc);
	moecache_close(dc->mc);
	moe_trace_view_free(&dc->steps);
	moe_trace_view_free(&dc->seqs);
	moe_trace_free(dc->batched);
	moe_trace_free(dc->trace);
	free(dc->weights_checked);
	free(dc->xs);
	free(dc->y_bank);
	free(dc->y_host);
	free(dc->h);
	free(dc->out_bank);
	free(dc->out_host);
	free(dc->gate);
	free(dc->experts);
	free(dc->next);
	free(dc->slots);
	free(dc->held);
	free(dc->rec_bank);
	free(dc->rec_host);
	free(dc->action);
	pthread_cond_destroy(&dc->done_cv);
	pthread_cond_destroy(&dc->job_cv);
	pthread_mutex_destroy(&dc->job_lock);
}

/* The trace's experts of (step, layer) that lie in the pool's range. */
static uint32_t decode_local_experts(struct decode_client *dc, uint32_t step, uint32_t layer,
				     uint32_t *out)
{
	uint32_t n_ids, n = 0;
	const uint32_t *ids = moe_trace_layer(dc->steps.tokens[step], layer, &n_ids);

	for (uint32_t k = 0; k < n_ids; k++) {
		bool dup = false;

		if (ids[k] < dc->pi->expert_begin || ids[k] >= dc->pi->expert_end)
			continue; /* another rank's */
		for (uint32_t j = 0; j < n; j++)
			dup |= out[j] == ids[k];
		if (!dup)
			out[n++] = ids[k];
	}
	dc->c.remote += n_ids - n;
	return n;
}

/* The token's input: deterministic, so every client of the same token agrees. */
static void decode_embed(struct decode_client *dc, uint32_t token)
{
	uint64_t stream = moe_gen_stream(dc->o->seed ^ 0x656d626564ull, token, 0, 0);

	for (uint32_t i = 0; i < dc->o->shape.d_model; i++)
		dc->x[i] = moe_gen_value(stream, i) * 32.0f;
}

/* Residual stream normalised to unit RMS, so values stay in range over the layers. */
static void decode_normalize(struct decode_client *dc, const float *y)
{
	double ss = 0;

	for (uint32_t i = 0; i < dc->o->shape.d_model; i++)
		ss += (double)y[i] * y[i];
	ss = sqrt(ss / dc->o->shape.d_model + 1e-6);
	for (uint32_t i = 0; i < dc->o->shape.d_model; i++)
		dc->x[i] = (float)(y[i] / ss);
}

static void decode_report_mismatch(struct decode_client *dc, uint32_t step, uint32_t layer,
				   uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		bool same = !memcmp(dc->rec_bank[k], dc->rec_host[k], dc->pi->expert_bytes);

		fprintf(stderr,
			"moecache-decode: MISMATCH step %u layer %u expert %u slot %u of bank %d "
			"(bank %s host now)\n",
			step, layer, dc->experts[k], dc->slots[k],
			(int)moecache_map_slot_bank(dc->map, dc->slots[k]), same ? "==" : "!=");
	}
}

/*
 * --cold plan: the cost of the plan of a layer, at the h200 link and CPU
 * figures (docs/policy.md), --layer-us and the pool's expert size.
 */
static struct moecache_plan_cost decode_plan_cost(const struct decode_client *dc)
{
	const double bytes = (double)dc->pi->expert_bytes;

	return (struct moecache_plan_cost){.copy_us = bytes / 50e3,
					   .cpu_us = bytes / 100e3,
					   .layer_us = dc->o->plan_layer_us,
					   .n_engines = 1,
					   .n_layers = dc->pi->n_layers};
}

/* --cold plan: the acquire with the plan of the layer. */
static int decode_acquire_plan(struct decode_client *dc, uint32_t layer, uint32_t n, uint32_t flags,
			       struct moecache_acquire_result *res)
{
	const struct moecache_plan_cost cost = decode_plan_cost(dc);
	struct moecache_plan_result r;
	int ret;

	ret = moecache_acquire_plan(dc->mc, &cost, dc->held, dc->n_held, layer, dc->experts, n,
				    dc->slots, dc->action, flags & MOECACHE_ACQ_KEEP_WAITING,
				    dc->o->timeout_ms, &r);
	if (ret)
		return ret;
	res->n_hits = r.n_hits;
	res->n_pinned = n - r.n_cpu;
	dc->c.plan_waited += r.n_waited;
	dc->c.plan_admitted += r.n_admitted;
	return 0;
}

/*
 * The layer's experts as routed: each bank's on its worker (or here, for
 * one bank), the cold ones here from the host pages while they run, and
 * every one again from the host pages for the check.
 */
static int decode_layer_run(struct decode_client *dc, uint32_t n)
{
	const uint32_t d = dc->o->shape.d_model;
	const struct moecache_route_entry *cold;
	uint32_t n_cold;
	int ret = 0, wret = 0;

	cold = moecache_route_group(dc->route, dc->n_banks, &n_cold);
	/* A waiting acquire pins every expert: nothing may be cold. */
	if (n_cold && dc->o->cold == COLD_WAIT)
		return -EPROTO;
	if (dc->workers)
		decode_banks_start(dc);
	else
		ret = decode_run_bank(dc, 0, dc->h);
	for (uint32_t i = 0; i < n_cold; i++) {
		uint32_t k = cold[i].pos;

		/* Cold: computed from the host pages; the agent copies it meanwhile. */
		dc->rec_bank[k] = dc->rec_host[k];
		if (dc->gate[k])
			decode_expert_out(dc, dc->rec_host[k], dc->gate[k], dc->h,
					  dc->out_bank + (size_t)k * d);
	}
	for (uint32_t k = 0; k < n; k++)
		if (dc->gate[k])
			decode_expert_out(dc, dc->rec_host[k], dc->gate[k], dc->h,
					  dc->out_host + (size_t)k * d);
	if (dc->workers)
		wret = decode_banks_wait(dc);
	return ret ? ret : wret;
}

/*
 * Sets gate[] for sequence seq among the layer's n acquired experts: 1/m
 * for each of the m it selects, 0 for the others'. Returns m.
 */
static uint32_t decode_seq_gates(struct decode_client *dc, uint32_t step, uint32_t seq,
				 uint32_t layer, uint32_t n)
{
	const struct moe_trace_token *tok;
	const uint32_t *ids;
	uint32_t n_ids, m = 0;

	if (dc->o->batch == 1) {
		for (uint32_t k = 0; k < n; k++)
			dc->gate[k] = 1.0f / (float)n;
		return n;
	}
	tok = dc->seqs.tokens[decode_seq_token(dc, step, seq)];
	ids = moe_trace_layer(tok, layer, &n_ids);
	for (uint32_t k = 0; k < n; k++) {
		bool selects = false;

		for (uint32_t j = 0; j < n_ids && !selects; j++)
			selects = ids[j] == dc->experts[k];
		dc->gate[k] = selects;
		m += selects;
	}
	for (uint32_t k = 0; k < n; k++)
		if (dc->gate[k])
			dc->gate[k] = 1.0f / (float)m;
	return m;
}

/*
 * Sequence seq's pass through the layer: its experts among the n acquired
 * ones, from the slots (or the host pages where cold) and again from the
 * host pages; the two outputs must be equal bit for bit.
 */
static int decode_sequence(struct decode_client *dc, uint32_t step, uint32_t seq, uint32_t layer,
			   uint32_t n)
{
	const struct decode_opts *o = dc->o;
	int ret;

	dc->x = dc->xs + (size_t)seq * o->shape.d_model;
	if (!decode_seq_gates(dc, step, seq, layer, n))
		return 0; /* all its experts are another rank's */
	ret = decode_layer_run(dc, n);
	if (ret)
		return ret;
	decode_sum(dc, n, dc->out_bank, dc->y_bank);
	decode_sum(dc, n, dc->out_host, dc->y_host);
	if (memcmp(dc->y_bank, dc->y_host, o->shape.d_model * sizeof(float))) {
		dc->c.mismatches++;
		if (dc->c.mismatches <= 5)
			decode_report_mismatch(dc, step, layer, n);
	}
	decode_normalize(dc, dc->y_host);
	return 0;
}

static int decode_layer(struct decode_client *dc, uint32_t step, uint32_t layer)
{
	const struct decode_opts *o = dc->o;
	struct moecache_acquire_result res;
	uint32_t wait = MOECACHE_ACQ_WAIT | (o->keep_waiting ? MOECACHE_ACQ_KEEP_WAITING : 0);
	/* cpu: pin the hits and queue the misses; plan: as the plan says. */
	uint32_t flags = o->cold == COLD_CPU ? 0 : wait;
	uint32_t n = decode_local_experts(dc, step, layer, dc->experts), n_cold;
	uint64_t t0;
	int ret;

	if (n == 0)
		return 0;
	if (o->prefetch && layer + 1 < dc->trace->n_layers) {
		uint32_t nn = decode_local_experts(dc, step, layer + 1, dc->next), queued = 0;
		const struct moecache_plan_cost cost = decode_plan_cost(dc);

		/* With the plan, the hint passes the plan's gate (an engine's router's would). */
		if (nn && o->cold == COLD_PLAN)
			ret =
			    moecache_prefetch_plan(dc->mc, &cost, layer + 1, dc->next, nn, &queued);
		else
			ret = nn ? moecache_prefetch(dc->mc, layer + 1, dc->next, nn, &queued) : -1;
		if (!ret)
			dc->c.prefetched += queued;
	}
	/* The lock-free look-up an engine uses to plan its kernels; acquire pins. */
	ret = moecache_map_lookup(dc->map, layer, dc->experts, n, dc->slots);
	if (ret > 0)
		dc->c.lookup_hits += ret;

	t0 = now_ns();
	if (o->cold == COLD_PLAN)
		ret = decode_acquire_plan(dc, layer, n, wait, &res);
	else
		ret = moecache_acquire_release(dc->mc, dc->held, dc->n_held, layer, dc->experts, n,
					       dc->slots, flags, o->timeout_ms, &res);
	if (ret == -EINTR)
		return ret;
	/* The release is done even when the wait failed. */
	dc->n_held = 0;
	if (ret) {
		fprintf(stderr, "moecache-decode: acquire step %u layer %u: %s\n", step, layer,
			strerror(-ret));
		return ret;
	}
	dc->c.acquires++;
	dc->c.hits += res.n_hits;
	dc->c.misses += n - res.n_hits;
	if (res.n_hits < n && o->cold != COLD_CPU)
		dc->c.wait_ns += now_ns() - t0;

	/* Which bank runs what: the route of what the acquire pinned. */
	ret = moecache_route_build(dc->map, dc->experts, dc->slots, n, dc->route);
	if (ret)
		return ret;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t idx = moecache_map_idx(dc->map, layer, dc->experts[k]);

		dc->rec_host[k] = moecache_host_expert(dc->mc, layer, dc->experts[k]);
		dc->rec_bank[k] = NULL;
		if (!dc->rec_host[k])
			return -EPROTO;
		if (o->check_weights && !dc->weights_checked[idx]) {
			if (moe_gen_expert_check(dc->rec_host[k], dc->pi->expert_bytes, &o->shape,
						 o->seed, layer, dc->experts[k])) {
				fprintf(stderr,
					"moecache-decode: host pages of %u/%u do not hold the "
					"generated weights (pool not filled with this shape "
					"and "
					"seed?)\n",
					layer, dc->experts[k]);
				dc->c.weight_errors++;
			}
			dc->weights_checked[idx] = 1;
		}
	}
	moecache_route_group(dc->route, dc->n_banks, &n_cold);
	dc->c.cpu_experts += n_cold;
	for (uint32_t seq = 0; seq < o->batch; seq++) {
		ret = decode_sequence(dc, step, seq, layer, n);
		if (ret)
			return ret;
	}
	/* Pins are held over the expert work and dropped by the next acquire. */
	memcpy(dc->held, dc->slots, n * sizeof(uint32_t));
	dc->n_held = n;
	return 0;
}

static int decode_run(struct decode_client *dc)
{
	uint32_t n_steps = dc->steps.n;
	uint32_t steps = dc->o->steps ? dc->o->steps : n_steps - dc->o->start % n_steps;
	uint64_t t0 = now_ns();
	int ret = 0;

	for (uint32_t s = 0; s < steps && !ret; s++) {
		uint32_t step = (dc->o->start + s) % n_steps;
		uint32_t epoch = moecache_map_agent_epoch(dc->map);

		if (epoch != dc->agent_epoch) {
			/* A new agent: the banks are imported again (a warm restart keeps their
			 * objects). */
			dc->agent_epoch = epoch;
			ret = decode_bank_refresh(dc);
			if (ret)
				break;
		}
		for (uint32_t seq = 0; seq < dc->o->batch; seq++) {
			dc->x = dc->xs + (size_t)seq * dc->o->shape.d_model;
			decode_embed(dc, decode_seq_token(dc, step, seq));
		}
		for (uint32_t l = 0; l < dc->trace->n_layers && !ret; l++)
			ret = decode_layer(dc, step, l);
		if (!ret)
			dc->c.steps++;
	}
	if (dc->n_held)
		moecache_release(dc->mc, dc->held, dc->n_held);
	dc->n_held = 0;
	dc->c.seconds = (now_ns() - t0) / 1e9;
	return ret;
}

static const char *const cold_names[] = {"wait", "cpu", "plan"};

/* Per bank: its index, tier, first slot, slot count and the experts it ran. */
static json_object *decode_banks_json(const struct decode_client *dc)
{
	json_object *a = json_object_new_array();

	for (uint32_t b = 0; b < dc->n_banks; b++) {
		json_object *o = json_object_new_object();
		struct moecache_map_bank mb;

		moecache_map_bank(dc->map, b, &mb);
		json_object_object_add(o, "bank", json_object_new_int64(b));
		json_object_object_add(o, "tier", json_object_new_int64(mb.tier));
		json_object_object_add(o, "slot_begin", json_object_new_int64(mb.slot_begin));
		json_object_object_add(o, "n_slots", json_object_new_int64(mb.n_slots));
		json_object_object_add(o, "experts", json_object_new_int64(dc->c.bank_experts[b]));
		json_object_array_add(a, o);
	}
	return a;
}

static void decode_report(const struct decode_client *dc, int run_ret)
{
	const struct decode_counts *c = &dc->c;
	const struct decode_opts *o = dc->o;
	uint64_t asked = c->hits + c->misses;
	double hit_rate = asked ? (double)c->hits / asked : 0.0;
	const char *verified = run_ret || c->mismatches || c->weight_errors ? "FAILED" : "ok";

	if (o->json) {
		json_object *j = json_object_new_object();

		json_object_object_add(j, "pool", json_object_new_string(o->pool));
		if (o->label)
			json_object_object_add(j, "label", json_object_new_string(o->label));
		json_object_object_add(j, "start", json_object_new_int64(o->start));
		json_object_object_add(j, "batch", json_object_new_int64(o->batch));
		json_object_object_add(j, "steps", json_object_new_int64(c->steps));
		json_object_object_add(j, "layers", json_object_new_int64(dc->trace->n_layers));
		json_object_object_add(j, "top_k", json_object_new_int64(dc->trace->top_k));
		json_object_object_add(j, "hits", json_object_new_int64(c->hits));
		json_object_object_add(j, "misses", json_object_new_int64(c->misses));
		json_object_object_add(j, "hit_rate", json_object_new_double(hit_rate));
		json_object_object_add(j, "lookup_hits", json_object_new_int64(c->lookup_hits));
		json_object_object_add(j, "prefetched", json_object_new_int64(c->prefetched));
		json_object_object_add(j, "cold", json_object_new_string(cold_names[o->cold]));
		json_object_object_add(j, "cpu_experts", json_object_new_int64(c->cpu_experts));
		json_object_object_add(j, "plan_waited", json_object_new_int64(c->plan_waited));
		json_object_object_add(j, "plan_admitted", json_object_new_int64(c->plan_admitted));
		json_object_object_add(j, "remote", json_object_new_int64(c->remote));
		json_object_object_add(j, "banks", decode_banks_json(dc));
		json_object_object_add(j, "wait_ms", json_object_new_double(c->wait_ns / 1e6));
		json_object_object_add(j, "seconds", json_object_new_double(c->seconds));
		json_object_object_add(
		    j, "steps_per_s",
		    json_object_new_double(c->seconds ? c->steps / c->seconds : 0));
		json_object_object_add(j, "mismatches", json_object_new_int64(c->mismatches));
		json_object_object_add(j, "weight_errors", json_object_new_int64(c->weight_errors));
		json_object_object_add(j, "verified", json_object_new_string(verified));
		puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
		json_object_put(j);
	} else {
		printf("decode:%s%s pool=%s start=%u steps=%llu layers=%u top_k=%u hits=%llu "
		       "misses=%llu hit_rate=%.3f banks=%u cpu_experts=%llu wait_ms=%.1f "
		       "steps_per_s=%.2f "
		       "mismatches=%llu verified=%s\n",
		       o->label ? " " : "", o->label ? o->label : "", o->pool, o->start,
		       (unsigned long long)c->steps, dc->trace->n_layers, dc->trace->top_k,
		       (unsigned long long)c->hits, (unsigned long long)c->misses, hit_rate,
		       dc->n_banks, (unsigned long long)c->cpu_experts, c->wait_ns / 1e6,
		       c->seconds ? c->steps / c->seconds : 0.0, (unsigned long long)c->mismatches,
		       verified);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct decode_client dc;
	struct decode_opts o;
	int ret;

	if (decode_parse_args(argc, argv, &o))
		return EXIT_USAGE;
	if (o.print_expert_bytes) {
		struct moe_expert_layout l;
		long page = sysconf(_SC_PAGESIZE);

		moe_expert_layout_get(o.shape.dtype, o.shape.d_model, o.shape.d_ff, &l);
		printf("%llu\n", (unsigned long long)moe_align_up(l.bytes, (uint64_t)page));
		return 0;
	}
	if (o.fill)
		return decode_fill(&o);
	ret = decode_setup(&dc, &o);
	if (ret) {
		decode_teardown(&dc);
		return EXIT_RUNTIME;
	}
	ret = decode_run(&dc);
	decode_report(&dc, ret);
	decode_teardown(&dc);
	if (ret)
		return EXIT_RUNTIME;
	return dc.c.mismatches || dc.c.weight_errors ? EXIT_MISMATCH : 0;
}
