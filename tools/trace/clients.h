/* SPDX-License-Identifier: MIT */
/*
 * Several clients on one pool: N decode streams sharing one bank (one map
 * region, the agent's slot choice and one policy instance, as one pool of
 * moecached has) and one link, each stream with its own clock.
 *
 * Each client replays the view from its own token offset (client i starts
 * at i x n / N and wraps round), one step per layer of each token. A
 * client's step is planned as a single stream's is (lib/plan.c), with the
 * copies queued ahead of it taken from the link's fair queue
 * (agent/fairq.h: what the link serves before this client's copies): its
 * misses are waited for (demand copies, queued under the client's tenant),
 * or computed on the client's CPU, admitted behind with a background copy
 * or not. The step ends at
 *
 *	max(start + layer_us, its last demand copy done, start + n_cpu x cpu_us).
 *
 * The link serves one demand copy at a time, the next one chosen by the
 * fair queue (or first come, first served with AGENT_FAIRQ_FIFO), and
 * gives the time no demand wants to background copies, oldest first, as a
 * fluid (a demand never waits behind one). Device compute and the CPU are
 * each client's own: what the clients share is the bank and the link. An
 * expert another client is copying is waited for with it, not copied
 * twice. Experts of a client's current step are pinned until the step
 * ends; a miss that finds every slot pinned is computed on the CPU
 * (bypassed).
 *
 * One client may have no host compute (an engine without a CPU path): its
 * plan waits for every miss, which is what a tenant that floods the link
 * looks like.
 *
 * A prefill burst: one client, at one of its token positions, first runs
 * prefill_tokens more tokens (its sequence from half the trace on, a
 * prompt unlike its decode) as one batched step per layer (their union of
 * experts, layer_us x max(1, n / top_k) on the device), then decodes on:
 * the burst adds to the client's work, so the same run without it is the
 * others' baseline.
 *
 * Modeled speed per client is its all-resident time (the sum of its
 * steps' device time) over its modeled time; the Jain index
 * (sum x)^2 / (n sum x^2) is taken over the clients' modeled speeds.
 */
#ifndef MOECACHE_TOOLS_TRACE_CLIENTS_H
#define MOECACHE_TOOLS_TRACE_CLIENTS_H

#include <stdint.h>

#include "agent/fairq.h"
#include "timing.h"
#include "trace.h"

#define MOE_SIM_MAX_CLIENTS 64
#define MOE_SIM_NO_PREFILL UINT32_MAX
#define MOE_SIM_NO_CLIENT UINT32_MAX

struct moe_sim_clients_config {
	const char *policy; /* NULL: default; the simulator's oracles are refused */
	uint32_t n_slots;
	uint32_t n_clients; /* 1 .. MOE_SIM_MAX_CLIENTS */
	/* NULL: client i starts at token i x n / n_clients; else each client's start */
	const uint32_t *offsets;
	const struct moe_timing_config *timing; /* required, one copy engine */
	enum agent_fairq_mode scheduler;
	uint32_t prefill_client;
	uint32_t prefill_at; /* the client's token position; MOE_SIM_NO_PREFILL: none */
	uint32_t prefill_tokens;
	/* A client with no host compute (it waits for every miss); MOE_SIM_NO_CLIENT: none */
	uint32_t no_cpu_client;
};

struct moe_sim_client {
	uint32_t offset;
	uint64_t tokens, steps;
	uint64_t accesses, hits; /* a step's expert counts once per token routed to it */
	uint64_t copies;	 /* copies this client's misses started: demand and background */
	uint64_t cpu_experts, bypassed;
	double hit_rate;
	double link_us;	     /* link time spent on its copies */
	double bytes_copied; /* link_us at the link's rate */
	double total_us, resident_us, modeled_speed;
};

struct moe_sim_clients_result {
	const char *policy;
	uint32_t n_clients, slots;
	uint64_t evictions;
	double link_busy_us, link_utilisation; /* over the longest client's time */
	double jain;			       /* over modeled speeds */
	struct moe_sim_client c[MOE_SIM_MAX_CLIENTS];
};

/*
 * Returns 0, -EINVAL (no slots, no clients or too many, no timing or more
 * than one copy engine, a bad offset, prefill client or token count, a
 * step of more experts than a plan takes), -ENOENT (unknown policy),
 * -EOPNOTSUPP (an oracle policy), -ENOMEM or -EPROTO (a broken rule).
 */
int moe_sim_run_clients(const struct moe_trace_view *v, const struct moe_sim_clients_config *cfg,
			struct moe_sim_clients_result *out);

#endif /* MOECACHE_TOOLS_TRACE_CLIENTS_H */
