// SPDX-License-Identifier: MIT
/*
 * Several clients on one pool and one link (tools/trace/clients.h): one
 * residency shared, the single-stream figures with one client, the bars of
 * docs/policy.md on the shipped traces, the fair queue against a flooding
 * tenant, and bad configs refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/trace/clients.h"
#include "tools/trace/sim.h"

static const char *const shipped[] = {"olmoe-1b-7b.decode.jsonl",
				      "granite-3.0-1b-a400m.prefill-decode.json"};

static struct moe_trace *load_shipped(const char *name, struct moe_trace_view *v)
{
	char path[PATH_MAX], err[512];
	struct moe_trace *t;
	int n = snprintf(path, sizeof(path), "%s/%s", MOE_TREE_TRACES, name);

	cr_assert(n > 0 && (size_t)n < sizeof(path));
	cr_assert_eq(moe_trace_load(path, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, v), 0);
	return t;
}

static struct moe_sim_clients_config clients_cfg(const struct moe_trace *t, double fraction,
						 uint32_t n, const struct moe_timing_config *tc)
{
	struct moe_sim_clients_config cfg = {
	    .n_clients = n,
	    .timing = tc,
	    .prefill_at = MOE_SIM_NO_PREFILL,
	    .no_cpu_client = MOE_SIM_NO_CLIENT,
	};

	cr_assert_eq(moe_sim_slots_for(t, fraction, &cfg.n_slots), 0);
	return cfg;
}

static struct moe_timing_config h200(const struct moe_trace *t)
{
	struct moe_timing_config tc;

	cr_assert_eq(moe_timing_preset_get("h200", &tc), 0);
	tc.ref_experts = t->top_k;
	return tc;
}

static void run(const struct moe_trace_view *v, const struct moe_sim_clients_config *cfg,
		struct moe_sim_clients_result *r)
{
	int err = moe_sim_run_clients(v, cfg, r);

	cr_assert_eq(err, 0, "moe_sim_run_clients: %d", err);
}

/* One shipped trace opened for a test: its view, the h200 model and room for results. */
struct shipped_run {
	struct moe_trace_view v;
	struct moe_trace *t;
	struct moe_timing_config tc;
	struct moe_sim_clients_result *r;
};

static void shipped_open(struct shipped_run *s, unsigned int n, unsigned int n_results)
{
	s->t = load_shipped(shipped[n], &s->v);
	s->tc = h200(s->t);
	s->r = calloc(n_results, sizeof(*s->r));
	cr_assert(s->r);
}

static void shipped_close(struct shipped_run *s)
{
	free(s->r);
	moe_trace_view_free(&s->v);
	moe_trace_free(s->t);
}

Test(clients, basic_one_client_is_the_single_stream,
     .description = "one client hits and runs as moe_sim_run's timed stream, within 0.005 in "
		    "hit rate and 1% in modeled speed, on the shipped traces at 10/25/50%")
{
	static const double fractions[] = {0.10, 0.25, 0.50};

	for (unsigned int n = 0; n < 2; n++) {
		struct shipped_run sr;

		shipped_open(&sr, n, 1);
		for (unsigned int i = 0; i < 3; i++) {
			struct moe_sim_clients_config cfg =
			    clients_cfg(sr.t, fractions[i], 1, &sr.tc);
			struct moe_sim_config one = {.n_slots = cfg.n_slots, .timing = &sr.tc};
			struct moe_sim_result s;

			cr_assert_eq(moe_sim_run(&sr.v, &one, &s), 0);
			run(&sr.v, &cfg, sr.r);
			cr_expect(fabs(sr.r->c[0].hit_rate - s.hit_rate) <= 0.005,
				  "%s %.0f%%: hit rate %.4f, single stream %.4f", shipped[n],
				  fractions[i] * 100, sr.r->c[0].hit_rate, s.hit_rate);
			cr_expect(
			    fabs(sr.r->c[0].modeled_speed / s.timing.modeled_speed - 1) <= 0.01,
			    "%s %.0f%%: speed %.5f, single stream %.5f", shipped[n],
			    fractions[i] * 100, sr.r->c[0].modeled_speed, s.timing.modeled_speed);
		}
		shipped_close(&sr);
	}
}

Test(clients, basic_one_residency_for_all,
     .description = "four clients decoding the same tokens copy each expert about once, not "
		    "four times: the bank and the copies are shared")
{
	struct moe_trace_view v;
	struct moe_trace *t = load_shipped(shipped[0], &v);
	struct moe_timing_config tc = h200(t);
	struct moe_sim_clients_result *r = calloc(2, sizeof(*r));
	const uint32_t same[4] = {0, 0, 0, 0};
	struct moe_sim_clients_config one = clients_cfg(t, 0.5, 1, &tc);
	struct moe_sim_clients_config four = clients_cfg(t, 0.5, 4, &tc);
	uint64_t copies = 0;

	cr_assert(r);
	one.offsets = same;
	four.offsets = same;
	run(&v, &one, &r[0]);
	run(&v, &four, &r[1]);
	for (uint32_t i = 0; i < 4; i++)
		copies += r[1].c[i].copies;
	cr_expect_leq(copies, r[0].c[0].copies * 11 / 10, "four clients copied %lu, one %lu",
		      (unsigned long)copies, (unsigned long)r[0].c[0].copies);
	cr_expect_geq(copies, r[0].c[0].copies * 9 / 10);
	free(r);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(clients, perf_four_clients_share_fairly,
     .description = "four clients on one pool at 25%: Jain index >= 0.95 over modeled speeds "
		    "and each at least 0.8x its speed alone with a quarter of the bank")
{
	for (unsigned int n = 0; n < 2; n++) {
		struct shipped_run sr;
		struct moe_sim_clients_config cfg;

		shipped_open(&sr, n, 2);
		cfg = clients_cfg(sr.t, 0.25, 4, &sr.tc);
		run(&sr.v, &cfg, &sr.r[0]);
		cr_expect_geq(sr.r[0].jain, 0.95, "%s: Jain %.4f", shipped[n], sr.r[0].jain);
		for (uint32_t i = 0; i < 4; i++) {
			struct moe_sim_clients_config alone = cfg;

			alone.n_clients = 1;
			alone.n_slots = cfg.n_slots / 4;
			alone.offsets = &sr.r[0].c[i].offset;
			run(&sr.v, &alone, &sr.r[1]);
			cr_expect_geq(sr.r[0].c[i].modeled_speed, 0.8 * sr.r[1].c[0].modeled_speed,
				      "%s client %u: %.5f, alone with a quarter %.5f", shipped[n],
				      i, sr.r[0].c[i].modeled_speed, sr.r[1].c[0].modeled_speed);
		}
		shipped_close(&sr);
	}
}

Test(clients, perf_prefill_costs_others_little,
     .description = "a 128-token prefill by one of four clients costs each other client at "
		    "most 10% of its modeled speed, on the shipped traces at 25%")
{
	for (unsigned int n = 0; n < 2; n++) {
		struct shipped_run sr;
		struct moe_sim_clients_config cfg;

		shipped_open(&sr, n, 2);
		cfg = clients_cfg(sr.t, 0.25, 4, &sr.tc);
		run(&sr.v, &cfg, &sr.r[0]);
		cfg.prefill_client = 0;
		cfg.prefill_at = 20;
		cfg.prefill_tokens = 128;
		run(&sr.v, &cfg, &sr.r[1]);
		cr_expect_gt(sr.r[1].c[0].steps, sr.r[0].c[0].steps, "the burst ran");
		for (uint32_t i = 1; i < 4; i++)
			cr_expect_geq(sr.r[1].c[i].modeled_speed, 0.9 * sr.r[0].c[i].modeled_speed,
				      "%s client %u: %.5f with the prefill, %.5f without",
				      shipped[n], i, sr.r[1].c[i].modeled_speed,
				      sr.r[0].c[i].modeled_speed);
		shipped_close(&sr);
	}
}

Test(clients, basic_fair_queue_holds_back_a_flooding_tenant,
     .description = "a client that waits for every miss gets less of the link under the fair "
		    "queue than first come, first served")
{
	for (unsigned int n = 0; n < 2; n++) {
		struct shipped_run sr;
		struct moe_sim_clients_config cfg;
		double share[2];

		shipped_open(&sr, n, 2);
		cfg = clients_cfg(sr.t, 0.25, 4, &sr.tc);
		cfg.no_cpu_client = 0;
		cfg.scheduler = AGENT_FAIRQ_FIFO;
		run(&sr.v, &cfg, &sr.r[0]);
		cfg.scheduler = AGENT_FAIRQ_FAIR;
		run(&sr.v, &cfg, &sr.r[1]);
		for (int k = 0; k < 2; k++)
			share[k] = sr.r[k].c[0].link_us / sr.r[k].c[0].total_us;
		cr_expect_lt(share[1], share[0],
			     "%s: the flooding client's link share %.3f fair, "
			     "%.3f fifo",
			     shipped[n], share[1], share[0]);
		shipped_close(&sr);
	}
}

struct bad_clients_case {
	const char *what;
	int expect;
	void (*spoil)(struct moe_sim_clients_config *cfg, struct moe_timing_config *tc,
		      uint32_t *offsets, uint32_t n_tokens);
};

static void no_clients(struct moe_sim_clients_config *c, struct moe_timing_config *tc, uint32_t *o,
		       uint32_t n)
{
	c->n_clients = 0;
}

static void too_many_clients(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			     uint32_t *o, uint32_t n)
{
	c->n_clients = MOE_SIM_MAX_CLIENTS + 1;
}

static void no_slots(struct moe_sim_clients_config *c, struct moe_timing_config *tc, uint32_t *o,
		     uint32_t n)
{
	c->n_slots = 0;
}

static void too_many_slots(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			   uint32_t *o, uint32_t n)
{
	c->n_slots = UINT32_MAX - 1;
}

static void no_timing(struct moe_sim_clients_config *c, struct moe_timing_config *tc, uint32_t *o,
		      uint32_t n)
{
	c->timing = NULL;
}

static void two_engines(struct moe_sim_clients_config *c, struct moe_timing_config *tc, uint32_t *o,
			uint32_t n)
{
	tc->copy_engines = 2;
}

static void nan_link(struct moe_sim_clients_config *c, struct moe_timing_config *tc, uint32_t *o,
		     uint32_t n)
{
	tc->link_gbps = NAN;
}

static void offset_past_end(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			    uint32_t *o, uint32_t n)
{
	o[1] = n;
	c->offsets = o;
}

static void prefill_client_absent(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
				  uint32_t *o, uint32_t n)
{
	c->prefill_at = 0;
	c->prefill_tokens = 4;
	c->prefill_client = c->n_clients;
}

static void prefill_no_tokens(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			      uint32_t *o, uint32_t n)
{
	c->prefill_at = 0;
	c->prefill_tokens = 0;
}

static void prefill_longer_than_trace(struct moe_sim_clients_config *c,
				      struct moe_timing_config *tc, uint32_t *o, uint32_t n)
{
	c->prefill_at = 0;
	c->prefill_tokens = n + 1;
}

static void prefill_past_end(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			     uint32_t *o, uint32_t n)
{
	c->prefill_at = n;
	c->prefill_tokens = 1;
}

static void no_cpu_client_absent(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
				 uint32_t *o, uint32_t n)
{
	c->no_cpu_client = c->n_clients;
}

static void oracle_policy(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			  uint32_t *o, uint32_t n)
{
	c->policy = "belady";
}

static void unknown_policy(struct moe_sim_clients_config *c, struct moe_timing_config *tc,
			   uint32_t *o, uint32_t n)
{
	c->policy = "no-such-policy";
}

static const struct bad_clients_case bad_cases[] = {
    {"no clients", -EINVAL, no_clients},
    {"more clients than MOE_SIM_MAX_CLIENTS", -EINVAL, too_many_clients},
    {"no slots", -EINVAL, no_slots},
    {"more slots than experts", -EINVAL, too_many_slots},
    {"no time model", -EINVAL, no_timing},
    {"two copy engines", -EINVAL, two_engines},
    {"a link of NaN GB/s", -EINVAL, nan_link},
    {"an offset past the trace", -EINVAL, offset_past_end},
    {"a prefill by a client that does not exist", -EINVAL, prefill_client_absent},
    {"a prefill of no tokens", -EINVAL, prefill_no_tokens},
    {"a prefill longer than the trace", -EINVAL, prefill_longer_than_trace},
    {"a prefill past the end", -EINVAL, prefill_past_end},
    {"a no-CPU client that does not exist", -EINVAL, no_cpu_client_absent},
    {"an oracle policy", -EOPNOTSUPP, oracle_policy},
    {"an unknown policy", -ENOENT, unknown_policy},
};

Test(clients, bad_input_configs_refused,
     .description = "each bad config of the table is refused with its errno and leaves the "
		    "result as it was")
{
	struct moe_trace_view v;
	struct moe_trace *t = load_shipped(shipped[0], &v);
	struct moe_sim_clients_result *r = calloc(1, sizeof(*r));

	cr_assert(r);
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct moe_timing_config tc = h200(t);
		struct moe_sim_clients_config cfg = clients_cfg(t, 0.25, 4, &tc);
		uint32_t offsets[4] = {0, 1, 2, 3};
		int err;

		bad_cases[i].spoil(&cfg, &tc, offsets, v.n);
		r->n_clients = 77;
		err = moe_sim_run_clients(&v, &cfg, r);
		cr_expect_eq(err, bad_cases[i].expect, "%s: %d, expected %d", bad_cases[i].what,
			     err, bad_cases[i].expect);
		cr_expect_eq(r->n_clients, 77, "%s: the result was written", bad_cases[i].what);
	}
	free(r);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}
