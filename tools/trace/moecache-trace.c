// SPDX-License-Identifier: MIT
/*
 * moecache-trace: replay MoE routing traces through libmoepolicy.
 *
 *   moecache-trace sim --trace FILE (--capacity F | --slots N) [--policy NAME]
 *       [--per-layer] [--prompt NAME] [--phase prefill|decode|all]
 *       [--prefetch] [--profile FILE]
 *   moecache-trace sim --trace FILE (--capacity F | --slots N) --clients N --timing
 *       [--scheduler fair|fifo] [--prefill-at TOKEN [--prefill-tokens P]
 *       [--prefill-client I]] [--policy NAME] [timing flags]
 *   moecache-trace sim --trace FILE --tiers F0,F1,... [--placement dynamic|static]
 *       [--policy NAME] [--timing [--tier-us T] ...]
 *   moecache-trace table --trace FILE [--trace FILE...] [--capacity F,F,...]
 *       [--per-layer]
 *   moecache-trace profile --trace FILE --out FILE [--prompt NAME] [--phase P]
 *   moecache-trace info --trace FILE
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "batch.h"
#include "clients.h"
#include "sim.h"
#include "trace.h"

#define MAX_TRACES 16
#define MAX_CAPACITIES 16

struct cli {
	const char *traces[MAX_TRACES];
	unsigned int n_traces;
	double capacities[MAX_CAPACITIES];
	unsigned int n_capacities;
	uint32_t slots;
	const char *policy;
	const char *prompt;
	enum moe_trace_phase phase;
	const char *profile;
	const char *out;
	uint32_t lookahead; /* tokens the lookahead oracle sees; 0: not given */
	bool per_layer;
	bool prefetch;
	bool oracles;
	/* the time model */
	bool timing;
	const char *preset;	       /* NULL: h200 */
	struct moe_timing_config tcfg; /* fields set by flags override the preset */
	unsigned int tset;	       /* TSET_* bits: which fields the flags set */
	double hint_accuracy;	       /* 0: not given */
	uint32_t batch;		       /* sequences per step; 0: not given (1) */
	bool prefill_batched;	       /* a prompt's prefill as one step */
	/* tiers (sim --tiers) */
	double tier_fractions[AGENT_TIERS_MAX];
	uint32_t n_tiers; /* 0: one bank, as without tiers */
	bool placement_set;
	enum agent_tier_placement placement;
	double tier_us; /* < 0: not given */
	/* several clients (sim --clients) */
	uint32_t n_clients; /* 0: one stream, moe_sim_run */
	bool scheduler_set;
	enum agent_fairq_mode scheduler;
	uint32_t prefill_at; /* MOE_SIM_NO_PREFILL: none */
	uint32_t prefill_tokens, prefill_client;
	bool prefill_tokens_set, prefill_client_set;
	uint32_t no_cpu_client; /* MOE_SIM_NO_CLIENT: none */
};

#define TSET_LINK 1u
#define TSET_ENGINES 2u
#define TSET_CPU 4u
#define TSET_LAYER 8u
#define TSET_BYTES 16u
#define TIMING_DEFAULT_PRESET "h200"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: moecache-trace sim --trace FILE (--capacity FRACTION | --slots N)\n"
	    "                          [--policy NAME] [--per-layer] [--prompt NAME]\n"
	    "                          [--phase prefill|decode|all] [--prefetch] [--profile FILE]\n"
	    "                          [--lookahead TOKENS] (with --policy lookahead)\n"
	    "                          [--hint-accuracy P] (prefetch from an emulated engine "
	    "hint)\n"
	    "                          [--batch B | --prefill-batched]\n"
	    "                          [--timing [--preset h200|slow-link] [--link-gbps G]\n"
	    "                           [--copy-engines N] [--cpu-gbps G] [--layer-us T]\n"
	    "                           [--expert-bytes B]]\n"
	    "       moecache-trace sim --trace FILE (--capacity F | --slots N) --clients N\n"
	    "                          --timing [--scheduler fair|fifo] [--policy NAME]\n"
	    "                          [--prefill-at TOKEN [--prefill-tokens P (128)]\n"
	    "                           [--prefill-client I (0)]] [--no-cpu-client I]\n"
	    "                          [the timing flags above]\n"
	    "       moecache-trace sim --trace FILE --tiers F0,F1,... [--placement "
	    "dynamic|static]\n"
	    "                          [--policy NAME] [--prompt NAME] [--phase P]\n"
	    "                          [--timing [--tier-us T] and the timing flags above]\n"
	    "       moecache-trace table --trace FILE [--trace FILE...] [--capacity F,F,...]\n"
	    "                          [--per-layer] [--oracles] [--preset NAME and the\n"
	    "                          timing flags above, for the time columns]\n"
	    "       moecache-trace profile --trace FILE --out FILE [--prompt NAME] [--phase P]\n"
	    "       moecache-trace info --trace FILE\n"
	    "--trace FILE: a path, or the name of a shipped trace (in $MOECACHE_TRACES,\n"
	    "then the installed traces); default " MOE_TRACE_DEFAULT "\n"
	    "policies:");
	for (const char *const *n = moe_policy_names(); *n; n++)
		fprintf(f, " %s", *n);
	fprintf(f, " (default is %s)\n", moe_policy_default_name());
}

static int parse_capacities(struct cli *c, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double f;

		errno = 0;
		f = strtod(tok, &end);
		if (errno || end == tok || *end || !(f > 0.0 && f <= 1.0) ||
		    c->n_capacities == MAX_CAPACITIES) {
			fprintf(stderr,
				"moecache-trace: --capacity: \"%s\" is not a fraction in (0, 1]\n",
				tok);
			err = -EINVAL;
			break;
		}
		c->capacities[c->n_capacities++] = f;
	}
	free(copy);
	if (!err && !c->n_capacities) {
		fprintf(stderr, "moecache-trace: --capacity: empty\n");
		err = -EINVAL;
	}
	return err;
}

/* A decimal count in [1, max]; -EINVAL otherwise. */
static int parse_count(const char *arg, unsigned long max, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || !v || v > max || arg[0] == '-')
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* --link-gbps, --cpu-gbps, --layer-us, --hint-accuracy: finite numbers in range. */
static int parse_timing_number(struct cli *c, int opt, const char *arg)
{
	static const struct {
		int opt;
		const char *name;
		double lo, hi;
		bool lo_open;
	} spec[] = {
	    {'L', "--link-gbps", 0, 1e6, true},
	    {'C', "--cpu-gbps", 0, 1e6, false},
	    {'Y', "--layer-us", 0, 1e9, false},
	    {'H', "--hint-accuracy", 0, 1, true},
	};
	unsigned int i = 0;
	char *end;
	double v;

	while (spec[i].opt != opt)
		i++;
	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= spec[i].lo && v <= spec[i].hi) ||
	    (spec[i].lo_open && v == spec[i].lo)) {
		fprintf(stderr, "moecache-trace: %s: \"%s\" is not a number in %s%g, %g]\n",
			spec[i].name, arg, spec[i].lo_open ? "(" : "[", spec[i].lo, spec[i].hi);
		return -EINVAL;
	}
	switch (opt) {
	case 'L':
		c->tcfg.link_gbps = v;
		c->tset |= TSET_LINK;
		break;
	case 'C':
		c->tcfg.cpu_gbps = v;
		c->tset |= TSET_CPU;
		break;
	case 'Y':
		c->tcfg.layer_us = v;
		c->tset |= TSET_LAYER;
		break;
	default:
		c->hint_accuracy = v;
		break;
	}
	return 0;
}

/* The preset (h200 unless --preset) with the fields the flags set. */
static struct moe_timing_config cli_timing(const struct cli *c)
{
	struct moe_timing_config t;

	moe_timing_preset_get(c->preset ? c->preset : TIMING_DEFAULT_PRESET, &t);
	if (c->tset & TSET_LINK)
		t.link_gbps = c->tcfg.link_gbps;
	if (c->tset & TSET_ENGINES)
		t.copy_engines = c->tcfg.copy_engines;
	if (c->tset & TSET_CPU)
		t.cpu_gbps = c->tcfg.cpu_gbps;
	if (c->tset & TSET_LAYER)
		t.layer_us = c->tcfg.layer_us;
	if (c->tset & TSET_BYTES)
		t.expert_bytes = c->tcfg.expert_bytes;
	return t;
}

static int parse_args(int argc, char **argv, struct cli *c)
{
	static const struct option opts[] = {
	    {"trace", required_argument, NULL, 't'},
	    {"capacity", required_argument, NULL, 'c'},
	    {"slots", required_argument, NULL, 's'},
	    {"policy", required_argument, NULL, 'p'},
	    {"per-layer", no_argument, NULL, 'l'},
	    {"prompt", required_argument, NULL, 'P'},
	    {"phase", required_argument, NULL, 'h'},
	    {"prefetch", no_argument, NULL, 'f'},
	    {"profile", required_argument, NULL, 'r'},
	    {"out", required_argument, NULL, 'o'},
	    {"lookahead", required_argument, NULL, 'k'},
	    {"oracles", no_argument, NULL, 'O'},
	    {"timing", no_argument, NULL, 'T'},
	    {"preset", required_argument, NULL, 'R'},
	    {"link-gbps", required_argument, NULL, 'L'},
	    {"copy-engines", required_argument, NULL, 'E'},
	    {"cpu-gbps", required_argument, NULL, 'C'},
	    {"layer-us", required_argument, NULL, 'Y'},
	    {"expert-bytes", required_argument, NULL, 'B'},
	    {"hint-accuracy", required_argument, NULL, 'H'},
	    {"batch", required_argument, NULL, 'b'},
	    {"prefill-batched", no_argument, NULL, 'F'},
	    {"tiers", required_argument, NULL, 'N'},
	    {"placement", required_argument, NULL, 'A'},
	    {"tier-us", required_argument, NULL, 'U'},
	    {"clients", required_argument, NULL, 'M'},
	    {"scheduler", required_argument, NULL, 'S'},
	    {"prefill-at", required_argument, NULL, 'I'},
	    {"prefill-tokens", required_argument, NULL, 'J'},
	    {"prefill-client", required_argument, NULL, 'K'},
	    {"no-cpu-client", required_argument, NULL, 'G'},
	    {"help", no_argument, NULL, '?'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	c->tier_us = -1;
	c->prefill_at = MOE_SIM_NO_PREFILL;
	c->no_cpu_client = MOE_SIM_NO_CLIENT;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 't':
			if (c->n_traces == MAX_TRACES) {
				fprintf(stderr, "moecache-trace: at most %d traces\n", MAX_TRACES);
				return -EINVAL;
			}
			c->traces[c->n_traces++] = optarg;
			break;
		case 'c':
			if (parse_capacities(c, optarg))
				return -EINVAL;
			break;
		case 's':
			if (parse_count(optarg, UINT32_MAX - 1, &c->slots)) {
				fprintf(stderr,
					"moecache-trace: --slots: \"%s\" is not a positive count\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'k':
			if (parse_count(optarg, 1000000, &c->lookahead)) {
				fprintf(stderr,
					"moecache-trace: --lookahead: \"%s\" is not a count of "
					"tokens in [1, 1000000]\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'O':
			c->oracles = true;
			break;
		case 'M':
			if (parse_count(optarg, MOE_SIM_MAX_CLIENTS, &c->n_clients)) {
				fprintf(
				    stderr,
				    "moecache-trace: --clients: \"%s\" is not a count in [1, %d]\n",
				    optarg, MOE_SIM_MAX_CLIENTS);
				return -EINVAL;
			}
			break;
		case 'S':
			if (strcmp(optarg, "fair") && strcmp(optarg, "fifo")) {
				fprintf(stderr,
					"moecache-trace: --scheduler: \"%s\" is not fair or fifo\n",
					optarg);
				return -EINVAL;
			}
			c->scheduler_set = true;
			c->scheduler = strcmp(optarg, "fifo") ? AGENT_FAIRQ_FAIR : AGENT_FAIRQ_FIFO;
			break;
		case 'I': {
			uint32_t at;

			/* A position from 0: parse_count takes 1 and up. */
			if (!strcmp(optarg, "0")) {
				c->prefill_at = 0;
				break;
			}
			if (parse_count(optarg, UINT32_MAX - 1, &at)) {
				fprintf(stderr,
					"moecache-trace: --prefill-at: \"%s\" is not a token "
					"position\n",
					optarg);
				return -EINVAL;
			}
			c->prefill_at = at;
			break;
		}
		case 'J':
			if (parse_count(optarg, UINT32_MAX - 1, &c->prefill_tokens)) {
				fprintf(
				    stderr,
				    "moecache-trace: --prefill-tokens: \"%s\" is not a positive "
				    "count\n",
				    optarg);
				return -EINVAL;
			}
			c->prefill_tokens_set = true;
			break;
		case 'K':
			if (!strcmp(optarg, "0")) {
				c->prefill_client = 0;
			} else if (parse_count(optarg, MOE_SIM_MAX_CLIENTS - 1,
					       &c->prefill_client)) {
				fprintf(stderr,
					"moecache-trace: --prefill-client: \"%s\" is not a client "
					"index\n",
					optarg);
				return -EINVAL;
			}
			c->prefill_client_set = true;
			break;
		case 'G':
			if (!strcmp(optarg, "0")) {
				c->no_cpu_client = 0;
			} else if (parse_count(optarg, MOE_SIM_MAX_CLIENTS - 1,
					       &c->no_cpu_client)) {
				fprintf(stderr,
					"moecache-trace: --no-cpu-client: \"%s\" is not a client "
					"index\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'T':
			c->timing = true;
			break;
		case 'R': {
			struct moe_timing_config known;

			/* Only the name: flags given before it keep their values. */
			if (moe_timing_preset_get(optarg, &known)) {
				fprintf(
				    stderr,
				    "moecache-trace: --preset: \"%s\" is not h200 or slow-link\n",
				    optarg);
				return -EINVAL;
			}
			c->preset = optarg;
			break;
		}
		case 'L':
		case 'C':
		case 'Y':
		case 'H':
			if (parse_timing_number(c, opt, optarg))
				return -EINVAL;
			break;
		case 'F':
			c->prefill_batched = true;
			break;
		case 'N': {
			char err[256];

			if (agent_tiers_parse(optarg, c->tier_fractions, &c->n_tiers, err,
					      sizeof(err))) {
				fprintf(stderr, "moecache-trace: --tiers: %s\n", err);
				return -EINVAL;
			}
			break;
		}
		case 'A':
			if (strcmp(optarg, "dynamic") && strcmp(optarg, "static")) {
				fprintf(stderr,
					"moecache-trace: --placement: \"%s\" is not dynamic or "
					"static\n",
					optarg);
				return -EINVAL;
			}
			c->placement_set = true;
			c->placement =
			    strcmp(optarg, "static") ? AGENT_TIERS_DYNAMIC : AGENT_TIERS_STATIC;
			break;
		case 'U': {
			char *end;

			errno = 0;
			c->tier_us = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(c->tier_us >= 0 && c->tier_us <= 1e9)) {
				fprintf(stderr,
					"moecache-trace: --tier-us: \"%s\" is not a number in [0, "
					"1e+09]\n",
					optarg);
				return -EINVAL;
			}
			break;
		}
		case 'b':
			if (parse_count(optarg, 4096, &c->batch)) {
				fprintf(
				    stderr,
				    "moecache-trace: --batch: \"%s\" is not a count of sequences "
				    "in [1, 4096]\n",
				    optarg);
				return -EINVAL;
			}
			break;
		case 'E':
			if (parse_count(optarg, MOECACHE_PLAN_MAX_ENGINES, &c->tcfg.copy_engines)) {
				fprintf(stderr,
					"moecache-trace: --copy-engines: \"%s\" is not a count in "
					"[1, %d]\n",
					optarg, MOECACHE_PLAN_MAX_ENGINES);
				return -EINVAL;
			}
			c->tset |= TSET_ENGINES;
			break;
		case 'B': {
			uint32_t bytes;

			if (parse_count(optarg, UINT32_MAX - 1, &bytes)) {
				fprintf(stderr,
					"moecache-trace: --expert-bytes: \"%s\" is not a positive "
					"count of bytes below 4 GiB\n",
					optarg);
				return -EINVAL;
			}
			c->tcfg.expert_bytes = bytes;
			c->tset |= TSET_BYTES;
			break;
		}
		case 'p':
			c->policy = optarg;
			break;
		case 'l':
			c->per_layer = true;
			break;
		case 'P':
			c->prompt = optarg;
			break;
		case 'h':
			if (moe_trace_phase_parse(optarg, &c->phase)) {
				fprintf(stderr,
					"moecache-trace: --phase: prefill, decode or all\n");
				return -EINVAL;
			}
			break;
		case 'f':
			c->prefetch = true;
			break;
		case 'r':
			c->profile = optarg;
			break;
		case 'o':
			c->out = optarg;
			break;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "moecache-trace: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (!c->n_traces)
		c->traces[c->n_traces++] = MOE_TRACE_DEFAULT;
	return 0;
}

static int load_trace(const char *path, struct moe_trace **t)
{
	char err[512];
	int ret = moe_trace_load(path, t, err, sizeof(err));

	if (ret)
		fprintf(stderr, "moecache-trace: %s\n", err[0] ? err : strerror(-ret));
	return ret;
}

static int select_tokens(const struct cli *c, const struct moe_trace *t, struct moe_trace_view *v)
{
	int ret = moe_trace_select(t, c->prompt, c->phase, v);

	if (ret == -ENOENT) {
		fprintf(stderr, "moecache-trace: %s: no prompt \"%s\" (prompts:", t->path,
			c->prompt);
		for (uint32_t i = 0; i < t->n_prompts; i++)
			fprintf(stderr, " \"%s\"", t->prompts[i]);
		fprintf(stderr, ")\n");
	} else if (ret) {
		fprintf(stderr, "moecache-trace: %s\n", strerror(-ret));
	} else if (!v->n) {
		fprintf(stderr, "moecache-trace: %s: the selection has no tokens\n", t->path);
		moe_trace_view_free(v);
		ret = -EINVAL;
	}
	return ret;
}

static int run_sim(const struct moe_trace_view *v, const struct moe_sim_config *cfg,
		   struct moe_sim_result *r)
{
	int ret = moe_sim_run(v, cfg, r);

	if (ret == -ENOENT)
		fprintf(stderr, "moecache-trace: unknown policy \"%s\"\n", cfg->policy);
	else if (ret == -EINVAL)
		fprintf(stderr,
			"moecache-trace: policy \"%s\" cannot run with these settings "
			"(slots %u%s)\n",
			cfg->policy ? cfg->policy : MOE_POLICY_DEFAULT, cfg->n_slots,
			cfg->per_layer ? ", per layer: at least one slot per layer" : "");
	else if (ret)
		fprintf(stderr, "moecache-trace: simulation failed: %s\n", strerror(-ret));
	return ret;
}

static void json_add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_int64((int64_t)v));
}

static void json_add_double(struct json_object *o, const char *key, double v)
{
	json_object_object_add(o, key, json_object_new_double(v));
}

/* The time model's figures (top level) and its parameters ("timing"). */
static void json_add_timing(struct json_object *o, const struct cli *c,
			    const struct moe_timing_config *t, const struct moe_sim_result *r)
{
	const struct moe_timing_result *m = &r->timing;
	struct json_object *p = json_object_new_object();
	/* Per token of any sequence: a batched step is batch tokens. */
	double tokens = r->tokens ? (double)r->tokens * (c->batch ? c->batch : 1) : 1.0;
	double bytes =
	    (double)(t->expert_bytes ? t->expert_bytes : MOE_TIMING_DEFAULT_EXPERT_BYTES);

	json_add_double(o, "modeled_speed", m->modeled_speed);
	json_add_double(o, "stall_us_per_token", m->stall_us / tokens);
	json_add_double(o, "copies_per_token", (double)m->copies / tokens);
	json_add_double(o, "cpu_experts_per_token", (double)m->cpu_experts / tokens);
	json_add_u64(o, "wasted_prefetch_bytes", m->wasted_prefetch_bytes);
	json_add_double(o, "link_utilisation", m->link_utilisation);
	json_object_object_add(
	    p, "preset", json_object_new_string(c->preset ? c->preset : TIMING_DEFAULT_PRESET));
	json_add_double(p, "link_gbps", t->link_gbps);
	json_add_u64(p, "copy_engines", t->copy_engines);
	json_add_double(p, "cpu_gbps", t->cpu_gbps);
	json_add_double(p, "layer_us", t->layer_us);
	json_add_u64(p, "expert_bytes", (uint64_t)bytes);
	json_add_double(p, "copy_us", bytes / (t->link_gbps * 1e3));
	json_add_double(p, "cpu_us", t->cpu_gbps > 0 ? bytes / (t->cpu_gbps * 1e3) : 0);
	json_add_double(p, "us_per_token", m->total_us / tokens);
	json_add_double(p, "resident_us_per_token", m->resident_us / tokens);
	json_add_u64(p, "waited_copies", m->waited_copies);
	json_add_u64(p, "background_copies", m->background_copies);
	json_add_u64(p, "prefetch_copies", m->prefetch_copies);
	json_add_u64(p, "cpu_experts", m->cpu_experts);
	json_add_u64(p, "cpu_not_admitted", r->not_admitted);
	json_add_u64(p, "late", m->late);
	json_object_object_add(o, "timing", p);
}

/* The trace, its selection and the profile (--profile) of a sim run. */
static int load_sim_inputs(const struct cli *c, struct moe_trace **t, struct moe_profile *profile,
			   struct moe_trace_view *v)
{
	int ret = load_trace(c->traces[0], t);

	if (ret)
		return ret;
	if (c->profile) {
		ret = moe_profile_load(c->profile, profile);
		if (ret) {
			fprintf(stderr, "moecache-trace: --profile %s: %s\n", c->profile,
				strerror(-ret));
			return ret;
		}
	}
	return select_tokens(c, *t, v);
}

/* A sim run's JSON object, opened with what was run on what. */
static struct json_object *json_sim_head(const struct cli *c, const struct moe_trace *t,
					 const char *policy_impl)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "trace", json_object_new_string(t->path));
	json_object_object_add(o, "prompt", c->prompt ? json_object_new_string(c->prompt) : NULL);
	json_object_object_add(o, "phase", json_object_new_string(moe_trace_phase_name(c->phase)));
	json_object_object_add(o, "policy",
			       json_object_new_string(c->policy ? c->policy : MOE_POLICY_DEFAULT));
	json_object_object_add(o, "policy_impl", json_object_new_string(policy_impl));
	return o;
}

/* Runs several clients; says why on stderr when it fails. */
static int run_clients(const struct moe_trace_view *v, const struct moe_sim_clients_config *cfg,
		       struct moe_sim_clients_result *r)
{
	int ret = moe_sim_run_clients(v, cfg, r);

	if (ret == -ENOENT)
		fprintf(stderr, "moecache-trace: unknown policy \"%s\"\n", cfg->policy);
	else if (ret == -EOPNOTSUPP)
		fprintf(stderr,
			"moecache-trace sim: --clients does not run the oracle policy "
			"\"%s\"\n",
			cfg->policy);
	else if (ret == -EINVAL)
		fprintf(stderr,
			"moecache-trace sim: --clients: one copy engine, at most as many slots "
			"as experts, and a prefill burst inside the trace (%u tokens) by a "
			"client that exists\n",
			v->n);
	else if (ret)
		fprintf(stderr, "moecache-trace: simulation failed: %s\n", strerror(-ret));
	return ret;
}

/*
 * sim --clients: several clients on one pool and one link (clients.h), each
 * also run alone with its share of the bank and, with a prefill burst, the
 * same run without it.
 */
static int cmd_sim_clients(const struct cli *c)
{
	struct moe_timing_config tcfg = cli_timing(c);
	struct moe_sim_clients_config cfg = {
	    .policy = c->policy,
	    .n_clients = c->n_clients,
	    .timing = &tcfg,
	    .scheduler = c->scheduler,
	    .prefill_client = c->prefill_client,
	    .prefill_at = c->prefill_at,
	    .prefill_tokens = c->prefill_tokens_set ? c->prefill_tokens : 128,
	    .no_cpu_client = c->no_cpu_client,
	};
	struct moe_sim_clients_result *r = NULL, *alone = NULL, *plain = NULL;
	struct moe_profile profile = {0};
	struct moe_trace_view v = {0};
	struct moe_trace *t = NULL;
	struct json_object *o = NULL, *arr;
	double worst = INFINITY, cost_max = 0;
	int ret;

	if (c->n_traces != 1 || (!c->slots) == (!c->n_capacities) || c->n_capacities > 1 ||
	    !c->timing || c->per_layer || c->prefetch || c->hint_accuracy > 0 || c->batch ||
	    c->prefill_batched || c->lookahead || c->oracles || c->profile) {
		fprintf(stderr,
			"moecache-trace sim: --clients takes one --trace, one of --capacity "
			"or --slots, and --timing; not --per-layer, --prefetch, "
			"--hint-accuracy, --batch, --prefill-batched, --lookahead or "
			"--profile\n");
		return -EINVAL;
	}
	r = calloc(3, sizeof(*r));
	if (!r)
		return -ENOMEM;
	alone = &r[1];
	plain = &r[2];
	ret = load_sim_inputs(c, &t, &profile, &v);
	if (ret)
		goto out;
	cfg.n_slots = c->slots;
	if (!cfg.n_slots)
		moe_sim_slots_for(t, c->capacities[0], &cfg.n_slots);
	ret = run_clients(&v, &cfg, r);
	if (ret)
		goto out;
	if (cfg.prefill_at != MOE_SIM_NO_PREFILL) {
		struct moe_sim_clients_config without = cfg;

		without.prefill_at = MOE_SIM_NO_PREFILL;
		ret = run_clients(&v, &without, plain);
		if (ret)
			goto out;
	}
	o = json_sim_head(c, t, r->policy);
	json_object_object_add(
	    o, "scheduler",
	    json_object_new_string(cfg.scheduler == AGENT_FAIRQ_FIFO ? "fifo" : "fair"));
	json_add_u64(o, "clients", r->n_clients);
	json_add_u64(o, "slots", r->slots);
	json_add_double(o, "capacity", (double)r->slots / ((double)t->n_layers * t->n_experts));
	if (cfg.prefill_at != MOE_SIM_NO_PREFILL) {
		struct json_object *pf = json_object_new_object();

		json_add_u64(pf, "client", cfg.prefill_client);
		json_add_u64(pf, "at", cfg.prefill_at);
		json_add_u64(pf, "tokens", cfg.prefill_tokens);
		json_object_object_add(o, "prefill", pf);
	}
	if (cfg.no_cpu_client != MOE_SIM_NO_CLIENT)
		json_add_u64(o, "no_cpu_client", cfg.no_cpu_client);
	arr = json_object_new_array();
	for (uint32_t i = 0; i < r->n_clients; i++) {
		const struct moe_sim_client *x = &r->c[i];
		struct moe_sim_clients_config one = cfg;
		struct json_object *e = json_object_new_object();
		double vs;

		/* The same client alone with its share of the bank. */
		one.n_clients = 1;
		one.offsets = &x->offset;
		one.n_slots = cfg.n_slots / cfg.n_clients ? cfg.n_slots / cfg.n_clients : 1;
		one.prefill_client = 0;
		if (i != cfg.prefill_client)
			one.prefill_at = MOE_SIM_NO_PREFILL;
		one.no_cpu_client = i == cfg.no_cpu_client ? 0 : MOE_SIM_NO_CLIENT;
		ret = run_clients(&v, &one, alone);
		if (ret) {
			json_object_put(e);
			json_object_put(arr);
			goto out;
		}
		vs = alone->c[0].modeled_speed > 0 ? x->modeled_speed / alone->c[0].modeled_speed
						   : 0;
		if (vs < worst)
			worst = vs;
		json_add_u64(e, "client", i);
		json_add_u64(e, "offset", x->offset);
		json_add_u64(e, "tokens", x->tokens);
		json_add_u64(e, "accesses", x->accesses);
		json_add_u64(e, "hits", x->hits);
		json_add_double(e, "hit_rate", x->hit_rate);
		json_add_double(e, "modeled_speed", x->modeled_speed);
		json_add_u64(e, "copies", x->copies);
		json_add_double(e, "bytes_copied", x->bytes_copied);
		json_add_u64(e, "cpu_experts", x->cpu_experts);
		json_add_u64(e, "bypassed", x->bypassed);
		json_add_double(e, "us_per_token", x->tokens ? x->total_us / x->tokens : 0);
		json_add_double(e, "alone_share_speed", alone->c[0].modeled_speed);
		json_add_double(e, "speed_vs_alone_share", vs);
		if (cfg.prefill_at != MOE_SIM_NO_PREFILL) {
			double base = plain->c[i].modeled_speed;
			double cost = base > 0 ? 1.0 - x->modeled_speed / base : 0;

			json_add_double(e, "speed_without_prefill", base);
			json_add_double(e, "hit_rate_without_prefill", plain->c[i].hit_rate);
			json_add_double(e, "prefill_cost", cost);
			if (i != cfg.prefill_client && cost > cost_max)
				cost_max = cost;
		}
		json_object_array_add(arr, e);
	}
	json_object_object_add(o, "per_client", arr);
	json_add_double(o, "jain", r->jain);
	json_add_double(o, "worst_speed_vs_alone_share", worst);
	if (cfg.prefill_at != MOE_SIM_NO_PREFILL)
		json_add_double(o, "prefill_cost_to_others_max", cost_max);
	json_add_u64(o, "evictions", r->evictions);
	json_add_double(o, "link_utilisation", r->link_utilisation);
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
out:
	json_object_put(o);
	moe_trace_view_free(&v);
	moe_profile_free(&profile);
	moe_trace_free(t);
	free(r);
	return ret;
}

/* A lower tier's default time per expert: its weights read at a gfx1030-class 500 GB/s. */
#define TIER_DEFAULT_GBPS 500.0

/* sim --tiers: the tiered simulation (sim.h, moe_sim_run_tiers). */
static int cmd_sim_tiers(const struct cli *c)
{
	struct moe_timing_config tcfg = cli_timing(c);
	struct moe_sim_tiers_config cfg = {
	    .policy = c->policy,
	    .n_tiers = c->n_tiers,
	    .placement = c->placement,
	    .timing = c->timing ? &tcfg : NULL,
	};
	struct moe_profile profile = {0};
	struct moe_sim_tiers_result r;
	struct moe_trace_view v = {0};
	struct moe_trace *t = NULL;
	struct json_object *o = NULL, *arr;
	double bytes;
	int ret;

	if (c->n_traces != 1 || c->slots || c->n_capacities || c->per_layer || c->prefetch ||
	    c->hint_accuracy > 0 || c->batch || c->prefill_batched || c->lookahead || c->oracles) {
		fprintf(stderr, "moecache-trace sim: --tiers takes one --trace and sizes the tiers "
				"itself; not with --capacity, --slots, --per-layer, --prefetch, "
				"--hint-accuracy, --batch, --prefill-batched or --lookahead\n");
		return -EINVAL;
	}
	if (!c->timing && (c->preset || c->tset || c->tier_us >= 0)) {
		fprintf(stderr, "moecache-trace sim: --preset, --tier-us and the timing flags go "
				"with --timing\n");
		return -EINVAL;
	}
	ret = load_sim_inputs(c, &t, &profile, &v);
	if (ret)
		goto out;
	if (c->profile)
		cfg.profile = &profile;
	for (uint32_t i = 0; i < c->n_tiers; i++)
		moe_sim_slots_for(t, c->tier_fractions[i], &cfg.slots[i]);
	bytes = (double)(tcfg.expert_bytes ? tcfg.expert_bytes : MOE_TIMING_DEFAULT_EXPERT_BYTES);
	cfg.tier_us = c->tier_us >= 0 ? c->tier_us : bytes / (TIER_DEFAULT_GBPS * 1e3);
	ret = moe_sim_run_tiers(&v, &cfg, &r);
	if (ret == -ENOENT)
		fprintf(stderr, "moecache-trace: unknown policy \"%s\"\n", c->policy);
	else if (ret == -EOPNOTSUPP)
		fprintf(stderr,
			"moecache-trace sim: --tiers does not run the oracle policy "
			"\"%s\"\n",
			c->policy);
	else if (ret == -EINVAL)
		fprintf(stderr,
			"moecache-trace sim: --tiers: no slot in a tier, more slots than "
			"experts, or a static slice left empty (%u experts a layer)\n",
			t->n_experts);
	else if (ret)
		fprintf(stderr, "moecache-trace: simulation failed: %s\n", strerror(-ret));
	if (ret)
		goto out;

	o = json_sim_head(c, t, r.policy);
	json_object_object_add(
	    o, "placement",
	    json_object_new_string(c->placement == AGENT_TIERS_STATIC ? "static" : "dynamic"));
	json_add_u64(o, "layers", r.n_layers);
	json_add_u64(o, "experts", r.n_experts);
	json_add_u64(o, "tokens", r.tokens);
	json_add_u64(o, "steps", r.steps);
	json_add_u64(o, "accesses", r.accesses);
	json_add_u64(o, "hits", r.hits);
	json_add_u64(o, "cold", r.cold);
	json_add_u64(o, "bypassed", r.bypassed);
	json_add_double(o, "hit_rate", r.hit_rate);
	json_add_double(o, "cold_rate", r.accesses ? (double)r.cold / (double)r.accesses : 0.0);
	arr = json_object_new_array();
	for (uint32_t i = 0; i < r.n_tiers; i++) {
		const struct moe_sim_tier *ti = &r.tiers[i];
		struct json_object *to = json_object_new_object();

		json_add_u64(to, "tier", i);
		json_add_u64(to, "slots", ti->slots);
		json_add_double(to, "capacity",
				(double)ti->slots / ((double)r.n_layers * r.n_experts));
		json_add_u64(to, "hits", ti->hits);
		json_add_double(to, "hit_rate", ti->hit_rate);
		json_add_u64(to, "fills", ti->fills);
		json_add_u64(to, "promotions", ti->promotions);
		json_add_u64(to, "demotions", ti->demotions);
		json_add_u64(to, "drops", ti->drops);
		if (r.timed) {
			json_add_double(to, "us_per_token", ti->time_us / (double)r.tokens);
			json_add_double(to, "us_per_expert", i ? cfg.tier_us : 0.0);
		}
		json_object_array_add(arr, to);
	}
	json_object_object_add(o, "tiers", arr);
	if (r.timed) {
		struct json_object *p = json_object_new_object();

		json_add_double(o, "modeled_speed", r.modeled_speed);
		json_object_object_add(
		    p, "preset",
		    json_object_new_string(c->preset ? c->preset : TIMING_DEFAULT_PRESET));
		json_add_double(p, "layer_us", tcfg.layer_us);
		json_add_double(p, "tier_us", cfg.tier_us);
		json_add_double(p, "cpu_gbps", tcfg.cpu_gbps);
		json_add_double(p, "link_gbps", tcfg.link_gbps);
		json_add_u64(p, "expert_bytes", (uint64_t)bytes);
		json_add_double(p, "host_us_per_token", r.host_us / (double)r.tokens);
		json_add_double(p, "us_per_token", r.total_us / (double)r.tokens);
		json_add_double(p, "resident_us_per_token", r.resident_us / (double)r.tokens);
		json_object_object_add(o, "timing", p);
	}
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
							     JSON_C_TO_STRING_NOSLASHESCAPE));
out:
	json_object_put(o);
	moe_trace_view_free(&v);
	moe_profile_free(&profile);
	moe_trace_free(t);
	return ret;
}

static int cmd_sim(const struct cli *c)
{
	struct moe_profile profile = {0};
	struct moe_sim_result r, base;
	struct moe_trace_view v = {0}, vb = {0};
	const struct moe_trace_view *run_v = &v;
	struct moe_trace *t = NULL, *bt = NULL;
	struct moe_timing_config tcfg = cli_timing(c);
	uint32_t batch = c->batch ? c->batch : 1;
	struct moe_sim_config cfg = {
	    .policy = c->policy,
	    .per_layer = c->per_layer,
	    .prefetch = c->prefetch || c->hint_accuracy > 0,
	    .lookahead = c->lookahead,
	    .timing = c->timing ? &tcfg : NULL,
	    .hint_accuracy = c->hint_accuracy,
	};
	struct json_object *o = NULL;
	int ret;

	if (!c->timing && (c->preset || c->tset)) {
		fprintf(stderr, "moecache-trace sim: --preset and the timing flags go with "
				"--timing\n");
		return -EINVAL;
	}
	if (c->n_traces != 1 || (!c->slots) == (!c->n_capacities) || c->n_capacities > 1) {
		fprintf(stderr,
			"moecache-trace sim: one --trace and one of --capacity or --slots\n");
		return -EINVAL;
	}
	if (c->oracles || (c->lookahead && (!c->policy || strcmp(c->policy, "lookahead")))) {
		fprintf(stderr, "moecache-trace sim: --lookahead goes with --policy lookahead; "
				"--oracles with table\n");
		return -EINVAL;
	}
	ret = load_sim_inputs(c, &t, &profile, &v);
	if (ret)
		goto out;
	if (c->profile)
		cfg.profile = &profile;
	cfg.n_slots = c->slots;
	if (!cfg.n_slots)
		moe_sim_slots_for(t, c->capacities[0], &cfg.n_slots);
	/* A step of more experts than one token's computes longer (timing.h). */
	tcfg.ref_experts = t->top_k;
	if (batch > 1 && c->prefill_batched) {
		fprintf(stderr, "moecache-trace sim: --batch or --prefill-batched, not both\n");
		ret = -EINVAL;
		goto out;
	}
	if (c->prefill_batched) {
		ret = moe_trace_prefill_batched(&v, &bt);
		if (!ret)
			ret = moe_trace_select(bt, NULL, MOE_TRACE_ALL, &vb);
		if (ret)
			goto out;
		run_v = &vb;
	} else if (batch > 1) {
		ret = moe_trace_batch(&v, batch, &bt);
		if (!ret)
			ret = moe_trace_select(bt, NULL, MOE_TRACE_ALL, &vb);
		if (ret) {
			fprintf(stderr, "moecache-trace: --batch %u: %s\n", batch,
				ret == -EINVAL ? "fewer tokens than sequences" : strerror(-ret));
			goto out;
		}
		run_v = &vb;
	}
	ret = run_sim(run_v, &cfg, &r);
	if (ret)
		goto out;

	o = json_sim_head(c, t, r.policy);
	if (c->policy && !strcmp(c->policy, "lookahead"))
		json_add_u64(o, "lookahead", c->lookahead ? c->lookahead : 1);
	json_object_object_add(o, "profile",
			       json_object_new_string(c->profile ? c->profile : "none"));
	json_object_object_add(o, "per_layer", json_object_new_boolean(c->per_layer));
	json_add_u64(o, "slots", r.slots);
	json_object_object_add(
	    o, "capacity",
	    json_object_new_double((double)r.slots / ((double)r.n_layers * r.n_experts)));
	json_add_u64(o, "layers", r.n_layers);
	json_add_u64(o, "experts", r.n_experts);
	json_add_u64(o, "batch", batch);
	json_object_object_add(o, "prefill_batched", json_object_new_boolean(c->prefill_batched));
	json_add_u64(o, "tokens", c->prefill_batched ? v.n : r.tokens * batch);
	json_add_u64(o, "steps", r.steps);
	json_add_u64(o, "accesses", r.accesses);
	json_add_u64(o, "hits", r.hits);
	json_add_u64(o, "misses", r.misses);
	json_add_u64(o, "evictions", r.evictions);
	json_add_u64(o, "bypassed", r.bypassed);
	json_object_object_add(o, "hit_rate", json_object_new_double(r.hit_rate));
	json_add_u64(o, "decode_accesses", r.decode_accesses);
	json_add_u64(o, "decode_hits", r.decode_hits);
	json_object_object_add(
	    o, "decode_hit_rate",
	    json_object_new_double(
		r.decode_accesses ? (double)r.decode_hits / (double)r.decode_accesses : 0.0));
	if (r.timed)
		json_add_timing(o, c, &tcfg, &r);
	if (cfg.prefetch) {
		struct json_object *pf = json_object_new_object();

		/* The same run without prefetch, for the net effect. */
		cfg.prefetch = false;
		ret = run_sim(run_v, &cfg, &base);
		if (ret) {
			json_object_put(pf);
			goto out;
		}
		json_add_u64(pf, "issued", r.prefetch_issued);
		json_add_u64(pf, "refused", r.prefetch_refused);
		json_add_u64(pf, "used", r.prefetch_saved);
		json_add_u64(pf, "wasted", r.prefetch_wasted);
		json_add_u64(pf, "unused_at_end", r.prefetch_unused);
		json_add_u64(pf, "misses_without_prefetch", base.misses);
		json_object_object_add(pf, "hit_rate_without_prefetch",
				       json_object_new_double(base.hit_rate));
		json_object_object_add(
		    pf, "demand_misses_saved",
		    json_object_new_int64((int64_t)base.misses - (int64_t)r.misses));
		json_add_u64(pf, "copies",
			     r.misses - r.bypassed - r.not_admitted + r.prefetch_issued);
		json_add_u64(pf, "copies_without_prefetch",
			     base.misses - base.bypassed - base.not_admitted);
		if (c->hint_accuracy > 0)
			json_object_object_add(pf, "hint_accuracy",
					       json_object_new_double(c->hint_accuracy));
		if (base.timed) {
			json_object_object_add(pf, "modeled_speed_without_prefetch",
					       json_object_new_double(base.timing.modeled_speed));
			json_object_object_add(pf, "speedup",
					       json_object_new_double(r.timing.modeled_speed /
								      base.timing.modeled_speed));
		}
		json_object_object_add(o, "prefetch", pf);
	}
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
							     JSON_C_TO_STRING_NOSLASHESCAPE));
out:
	json_object_put(o);
	moe_trace_view_free(&vb);
	moe_trace_free(bt);
	moe_trace_view_free(&v);
	moe_profile_free(&profile);
	moe_trace_free(t);
	return ret;
}

/* A column of the table: a policy, maybe with prefetch or an oracle's horizon. */
struct table_col {
	const char *label;
	const char *policy;
	uint32_t lookahead;
	bool prefetch;
	bool gap; /* also print the share of the LRU-to-Belady gap it closes */
};

/* The policies compared, in column order. Each table has "lru" and "belady". */
static const struct table_col table_policies[] = {
    {.label = "lru", .policy = "lru"},
    {.label = "lfu", .policy = "lfu"},
    {.label = "arc", .policy = "arc"},
    {.label = "ema", .policy = "ema"},
    {.label = "static", .policy = "static"},
    {.label = "reuse", .policy = "reuse"},
    {.label = "revisit", .policy = "revisit"},
    {.label = MOE_POLICY_DEFAULT, .policy = MOE_POLICY_DEFAULT, .gap = true},
    {.label = "belady", .policy = "belady"},
    /* Demand hits only are counted. */
    {.label = "default + prefetch", .policy = MOE_POLICY_DEFAULT, .prefetch = true, .gap = true},
};

/* What perfect foresight of the next tokens is worth, against the bar. */
static const struct table_col table_oracles[] = {
    {.label = "lru", .policy = "lru"},
    {.label = MOE_POLICY_DEFAULT, .policy = MOE_POLICY_DEFAULT, .gap = true},
    {.label = "lookahead 1", .policy = "lookahead", .lookahead = 1, .gap = true},
    {.label = "lookahead 2", .policy = "lookahead", .lookahead = 2, .gap = true},
    {.label = "belady", .policy = "belady"},
};

/*
 * The time columns of the main table, with the preset: LRU waiting for
 * every miss, the default with its plan and prefetch, and the bound
 * (Belady's victims, an oracle next-layer prefetch and the plan's
 * copy-or-compute choice).
 */
struct table_timed {
	const char *label;
	const char *policy;
	bool cpu;
	bool prefetch;
	double hint;
};

static const struct table_timed table_timed_cols[] = {
    {.label = "speed: lru", .policy = "lru"},
    {.label = "speed: default", .policy = MOE_POLICY_DEFAULT, .cpu = true, .prefetch = true},
    {.label = "speed: belady bound", .policy = "belady", .cpu = true, .prefetch = true, .hint = 1},
};
#define TABLE_TIMED_COLS (sizeof(table_timed_cols) / sizeof(table_timed_cols[0]))

#define TABLE_MAX_COLS 16
_Static_assert(sizeof(table_policies) / sizeof(table_policies[0]) <= TABLE_MAX_COLS &&
		   sizeof(table_oracles) / sizeof(table_oracles[0]) <= TABLE_MAX_COLS,
	       "a table has at most TABLE_MAX_COLS columns");

struct table {
	const struct table_col *cols;
	unsigned int n_cols;
	bool half;  /* print the hit rate that closes half the gap */
	bool timed; /* the time columns */
	struct moe_timing_config timing;
};

static void table_gap(double hit, double lru, double belady)
{
	if (belady - lru > 1e-9)
		printf(" %.0f%% |", 100.0 * (hit - lru) / (belady - lru));
	else
		printf(" - |");
}

/* The time columns of one row: speeds, default / lru, copies and CPU experts per token. */
static int table_time_cells(const struct cli *c, const struct table *tab,
			    const struct moe_trace_view *v, uint32_t n_slots)
{
	struct moe_sim_result r[TABLE_TIMED_COLS];

	for (unsigned int j = 0; j < TABLE_TIMED_COLS; j++) {
		const struct table_timed *col = &table_timed_cols[j];
		struct moe_timing_config tc = tab->timing;
		struct moe_sim_config cfg = {
		    .policy = col->policy,
		    .n_slots = n_slots,
		    .per_layer = c->per_layer,
		    .prefetch = col->prefetch,
		    .hint_accuracy = col->hint,
		    .timing = &tc,
		};
		int ret;

		if (!col->cpu)
			tc.cpu_gbps = 0;
		ret = run_sim(v, &cfg, &r[j]);
		if (ret)
			return ret;
		printf(" %.4f |", r[j].timing.modeled_speed);
	}
	printf(" %.2fx |", r[1].timing.modeled_speed / r[0].timing.modeled_speed);
	table_gap(r[1].timing.modeled_speed, r[0].timing.modeled_speed, r[2].timing.modeled_speed);
	printf(" %.1f | %.1f |", (double)r[1].timing.copies / (double)r[1].tokens,
	       (double)r[1].timing.cpu_experts / (double)r[1].tokens);
	return 0;
}

static int table_rows(const struct cli *c, const struct table *tab, const struct moe_trace *t,
		      const char *label, const char *prompt)
{
	struct moe_trace_view v;
	int ret = moe_trace_select(t, prompt, MOE_TRACE_ALL, &v);

	if (ret)
		return ret;
	for (unsigned int i = 0; i < c->n_capacities; i++) {
		double hit[TABLE_MAX_COLS], lru = 0, belady = 0;
		struct moe_sim_result r;
		uint32_t n_slots;

		moe_sim_slots_for(t, c->capacities[i], &n_slots);
		printf("| %s | %.0f%% | %u |", label, c->capacities[i] * 100, n_slots);
		for (unsigned int j = 0; j < tab->n_cols; j++) {
			const struct table_col *col = &tab->cols[j];
			struct moe_sim_config cfg = {
			    .policy = col->policy,
			    .n_slots = n_slots,
			    .per_layer = c->per_layer,
			    .prefetch = col->prefetch,
			    .lookahead = col->lookahead,
			};

			ret = run_sim(&v, &cfg, &r);
			if (ret)
				goto out;
			hit[j] = r.hit_rate;
			if (!strcmp(col->policy, "lru"))
				lru = r.hit_rate;
			if (!strcmp(col->policy, "belady"))
				belady = r.hit_rate;
			printf(" %.3f |", r.hit_rate);
		}
		if (tab->half)
			printf(" %.3f |", lru + (belady - lru) / 2);
		for (unsigned int j = 0; j < tab->n_cols; j++)
			if (tab->cols[j].gap)
				table_gap(hit[j], lru, belady);
		if (tab->timed) {
			ret = table_time_cells(c, tab, &v, n_slots);
			if (ret)
				goto out;
		}
		printf("\n");
	}
out:
	moe_trace_view_free(&v);
	return ret;
}

static int cmd_table(struct cli *c)
{
	static const double default_capacities[] = {0.10, 0.25, 0.50};
	struct table tab = {
	    .cols = table_policies,
	    .n_cols = sizeof(table_policies) / sizeof(table_policies[0]),
	};
	unsigned int n_extra = 0;

	if (c->slots || c->policy || c->prompt || c->profile || c->prefetch || c->lookahead ||
	    c->batch || c->hint_accuracy > 0 || c->phase != MOE_TRACE_ALL ||
	    (c->oracles && (c->preset || c->tset))) {
		fprintf(stderr, "moecache-trace table: takes --trace, --capacity, --per-layer, "
				"--oracles, and without --oracles --preset and the timing "
				"flags\n");
		return -EINVAL;
	}
	if (c->oracles) {
		tab.cols = table_oracles;
		tab.n_cols = sizeof(table_oracles) / sizeof(table_oracles[0]);
		tab.half = true;
	} else {
		tab.timed = true;
		tab.timing = cli_timing(c);
	}
	if (!c->n_capacities) {
		memcpy(c->capacities, default_capacities, sizeof(default_capacities));
		c->n_capacities = 3;
	}
	printf("| trace | capacity | slots |");
	for (unsigned int j = 0; j < tab.n_cols; j++)
		printf(" %s |", tab.cols[j].label);
	if (tab.half) {
		printf(" half the gap |");
		n_extra++;
	}
	for (unsigned int j = 0; j < tab.n_cols; j++) {
		if (tab.cols[j].gap) {
			printf(" gap closed: %s |", tab.cols[j].label);
			n_extra++;
		}
	}
	if (tab.timed) {
		for (unsigned int j = 0; j < TABLE_TIMED_COLS; j++)
			printf(" %s |", table_timed_cols[j].label);
		printf(" default / lru | speed gap closed: default | copies/token: default | "
		       "cpu experts/token: default |");
		n_extra += TABLE_TIMED_COLS + 4;
	}
	printf("\n|---|---|---|");
	for (unsigned int j = 0; j < tab.n_cols + n_extra; j++)
		printf("---|");
	printf("\n");
	for (unsigned int i = 0; i < c->n_traces; i++) {
		struct moe_trace *t;
		const char *base = strrchr(c->traces[i], '/');
		int ret;

		base = base ? base + 1 : c->traces[i];
		ret = load_trace(c->traces[i], &t);
		if (ret)
			return ret;
		/* Several prompts: each alone (prefill then decode), then the whole file. */
		for (uint32_t p = 0; t->n_prompts > 1 && p < t->n_prompts && !ret; p++) {
			char label[512];

			snprintf(label, sizeof(label), "%s: %s", base, t->prompts[p]);
			ret = table_rows(c, &tab, t, label, t->prompts[p]);
		}
		if (!ret) {
			char label[512];

			snprintf(label, sizeof(label), "%s%s", base,
				 t->n_prompts > 1 ? ": whole file" : "");
			ret = table_rows(c, &tab, t, label, NULL);
		}
		moe_trace_free(t);
		if (ret)
			return ret;
	}
	return 0;
}

static int cmd_profile(const struct cli *c)
{
	struct moe_trace *t = NULL;
	struct moe_trace_view v = {0};
	struct moe_profile p = {0};
	int ret;

	if (c->n_traces != 1 || !c->out) {
		fprintf(stderr, "moecache-trace profile: one --trace and --out\n");
		return -EINVAL;
	}
	ret = load_trace(c->traces[0], &t);
	if (!ret)
		ret = select_tokens(c, t, &v);
	if (!ret)
		ret = moe_sim_profile_from(&v, &p);
	if (!ret) {
		ret = moe_profile_save(c->out, &p);
		if (ret)
			fprintf(stderr, "moecache-trace: %s: %s\n", c->out, strerror(-ret));
	}
	moe_profile_free(&p);
	moe_trace_view_free(&v);
	moe_trace_free(t);
	return ret;
}

#define INFO_GAPS 8

/* What revisit measures online, over the whole trace: how soon experts come back. */
static int info_return_rates(const struct moe_trace *t, struct json_object *o)
{
	struct moe_trace_view v;
	double rate[INFO_GAPS];
	struct json_object *a;
	int ret = moe_trace_select(t, NULL, MOE_TRACE_ALL, &v);

	if (!ret)
		ret = moe_trace_return_rates(&v, INFO_GAPS, rate);
	moe_trace_view_free(&v);
	if (ret) {
		fprintf(stderr, "moecache-trace: %s\n", strerror(-ret));
		return ret;
	}
	/* The chance of a use if experts were picked uniformly. */
	json_object_object_add(o, "base_rate",
			       json_object_new_double((double)t->top_k / t->n_experts));
	a = json_object_new_array();
	for (unsigned int g = 0; g < INFO_GAPS; g++)
		json_object_array_add(a, json_object_new_double(rate[g]));
	json_object_object_add(o, "return_rate_by_gap", a);
	return 0;
}

static int cmd_info(const struct cli *c)
{
	struct moe_trace *t;
	struct json_object *o, *prompts;
	int ret;

	if (c->n_traces != 1) {
		fprintf(stderr, "moecache-trace info: one --trace\n");
		return -EINVAL;
	}
	ret = load_trace(c->traces[0], &t);
	if (ret)
		return ret;
	o = json_object_new_object();
	prompts = json_object_new_array();
	json_object_object_add(o, "trace", json_object_new_string(t->path));
	json_object_object_add(o, "model", json_object_new_string(t->model));
	json_add_u64(o, "layers", t->n_layers);
	json_add_u64(o, "experts", t->n_experts);
	json_add_u64(o, "top_k", t->top_k);
	json_add_u64(o, "tokens", t->n_tokens);
	for (uint32_t p = 0; p < t->n_prompts; p++) {
		struct json_object *po = json_object_new_object();
		uint64_t n[3] = {0};

		for (uint32_t i = 0; i < t->n_tokens; i++)
			if (t->tokens[i].prompt == p)
				n[t->tokens[i].phase]++;
		json_object_object_add(po, "name", json_object_new_string(t->prompts[p]));
		json_add_u64(po, "prefill", n[MOE_TRACE_PREFILL]);
		json_add_u64(po, "decode", n[MOE_TRACE_DECODE]);
		json_object_array_add(prompts, po);
	}
	json_object_object_add(o, "prompts", prompts);
	ret = info_return_rates(t, o);
	if (ret)
		goto out;
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
							     JSON_C_TO_STRING_NOSLASHESCAPE));
out:
	json_object_put(o);
	moe_trace_free(t);
	return ret;
}

int main(int argc, char **argv)
{
	struct cli c = {.phase = MOE_TRACE_ALL};
	const char *cmd;
	int ret;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	if (parse_args(argc - 1, argv + 1, &c))
		return 2;
	if (strcmp(cmd, "sim") && (c.n_tiers || c.placement_set || c.tier_us >= 0)) {
		fprintf(stderr, "moecache-trace: --tiers, --placement and --tier-us go with sim\n");
		return 2;
	}
	if (!strcmp(cmd, "sim") && !c.n_tiers && (c.placement_set || c.tier_us >= 0)) {
		fprintf(stderr, "moecache-trace sim: --placement and --tier-us go with --tiers\n");
		return 2;
	}
	if (!c.n_clients && (c.scheduler_set || c.prefill_at != MOE_SIM_NO_PREFILL ||
			     c.prefill_tokens_set || c.prefill_client_set)) {
		fprintf(stderr, "moecache-trace: --scheduler and the --prefill-* flags go with "
				"sim --clients\n");
		return 2;
	}
	if (c.n_clients && (strcmp(cmd, "sim") || c.n_tiers)) {
		fprintf(stderr, "moecache-trace: --clients goes with sim, not with --tiers\n");
		return 2;
	}
	if ((c.prefill_tokens_set || c.prefill_client_set) && c.prefill_at == MOE_SIM_NO_PREFILL) {
		fprintf(stderr, "moecache-trace: --prefill-tokens and --prefill-client go with "
				"--prefill-at\n");
		return 2;
	}
	if (!strcmp(cmd, "sim") && c.n_clients)
		ret = cmd_sim_clients(&c);
	else if (!strcmp(cmd, "sim") && c.n_tiers)
		ret = cmd_sim_tiers(&c);
	else if (!strcmp(cmd, "sim"))
		ret = cmd_sim(&c);
	else if (!strcmp(cmd, "table"))
		ret = cmd_table(&c);
	else if (!strcmp(cmd, "profile"))
		ret = cmd_profile(&c);
	else if (!strcmp(cmd, "info"))
		ret = cmd_info(&c);
	else {
		fprintf(stderr, "moecache-trace: unknown command \"%s\"\n", cmd);
		usage(stderr);
		return 2;
	}
	return ret ? 1 : 0;
}
