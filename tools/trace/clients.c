// SPDX-License-Identifier: MIT
/*
 * Several clients on one pool and one link (see clients.h): an event loop
 * over the clients' step ends and the link's copy completions, in time
 * order (a completion first on a tie).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/memmap.h"
#include "agent/slots.h"
#include "clients.h"

#define MC_NONE UINT32_MAX

enum mc_state {
	MC_ABSENT = 0,
	MC_READY,
	MC_DEMAND,     /* a demand copy queued or on the link */
	MC_BACKGROUND, /* a background copy under way */
};

struct mc_client {
	const struct moe_trace_token **tok; /* the view from the client's offset */
	uint32_t pos, layer;		    /* the next step */
	bool in_step, done;
	bool in_burst, burst_done;
	double event; /* its step's end (or the next start); INFINITY while it waits */
	double min_end;
	uint32_t outstanding; /* demand copies its step waits for */
	uint32_t *pins, n_pins;
	struct moe_sim_client *r;
};

struct mc {
	const struct moe_trace *t;
	const struct moe_sim_clients_config *cfg;
	uint32_t n_ids, n_clients, n_tokens;
	struct moe_policy *policy;
	struct agent_memmap map;
	struct agent_slots slots;
	bool ready;
	uint8_t *state;
	uint32_t *id_slot;
	uint64_t *waiters; /* id -> clients waiting for its demand copy (bit i) */
	double *left;	   /* id -> background copy time left */
	uint32_t *bg_owner;
	uint32_t *bg_next, *bg_prev, bg_head, bg_tail; /* background copies, oldest first */
	double bg_left_us;
	struct agent_fairq fq;
	bool link_busy;
	double busy_end, now;
	uint32_t busy_id, busy_tenant;
	uint64_t stamp;
	struct moecache_plan_cost cost;
	double base_layer_us, link_bytes_per_us;
	struct mc_client *clients;
	/* one step's scratch */
	uint32_t *ids, *counts, *mark;
	double *copy_left;
	enum moecache_plan_action *action;
	struct moe_sim_clients_result *res;
};

static void mc_bg_push(struct mc *m, uint32_t id)
{
	m->bg_next[id] = MC_NONE;
	m->bg_prev[id] = m->bg_tail;
	if (m->bg_tail != MC_NONE)
		m->bg_next[m->bg_tail] = id;
	else
		m->bg_head = id;
	m->bg_tail = id;
	m->bg_left_us += m->left[id];
}

static void mc_bg_remove(struct mc *m, uint32_t id)
{
	if (m->bg_prev[id] != MC_NONE)
		m->bg_next[m->bg_prev[id]] = m->bg_next[id];
	else
		m->bg_head = m->bg_next[id];
	if (m->bg_next[id] != MC_NONE)
		m->bg_prev[m->bg_next[id]] = m->bg_prev[id];
	else
		m->bg_tail = m->bg_prev[id];
	m->bg_left_us -= m->left[id];
	if (m->bg_head == MC_NONE)
		m->bg_left_us = 0; /* no drift from repeated sums */
}

static void mc_link_time(struct mc *m, uint32_t client, double us)
{
	m->res->link_busy_us += us;
	m->res->c[client].link_us += us;
}

/* Time moves to t: link time no demand copy used goes to background copies. */
static void mc_advance(struct mc *m, double t)
{
	double idle = m->link_busy ? 0 : t - m->now;

	while (idle > 0 && m->bg_head != MC_NONE) {
		uint32_t id = m->bg_head;
		double take = m->left[id] < idle ? m->left[id] : idle;

		m->left[id] -= take;
		m->bg_left_us -= take;
		idle -= take;
		mc_link_time(m, m->bg_owner[id], take);
		if (m->left[id] > 1e-9)
			break;
		m->left[id] = 0;
		mc_bg_remove(m, id);
		m->state[id] = MC_READY;
	}
	m->now = t;
}

/* An idle link starts the demand copy the fair queue names. */
static void mc_link_kick(struct mc *m)
{
	uint32_t tenant, id;
	double cost;

	if (m->link_busy || !agent_fairq_pop(&m->fq, &tenant, &id, &cost))
		return;
	m->link_busy = true;
	m->busy_end = m->now + cost;
	m->busy_id = id;
	m->busy_tenant = tenant;
	mc_link_time(m, tenant, cost);
}

static void mc_link_done(struct mc *m)
{
	uint32_t id = m->busy_id;

	m->link_busy = false;
	m->state[id] = MC_READY;
	for (uint32_t i = 0; i < m->n_clients; i++) {
		struct mc_client *c = &m->clients[i];

		if (!(m->waiters[id] >> i & 1))
			continue;
		if (!--c->outstanding)
			c->event = c->min_end > m->now ? c->min_end : m->now;
	}
	m->waiters[id] = 0;
	mc_link_kick(m);
}

/* Brings id into the bank through the agent's slot choice: the slot, or -ENOSPC / -EPROTO. */
static int mc_fill(struct mc *m, uint32_t id)
{
	uint32_t old;
	int slot;

	agent_slots_new_round(&m->slots, m->stamp - 1);
	slot = agent_slots_choose(&m->slots, id, false);
	if (slot < 0)
		return slot == -ENOSPC ? -ENOSPC : -EPROTO;
	old = m->map.owner[slot];
	if (old != MOECACHE_NONE) {
		/* A demand copy's slot is pinned by the steps that wait for it. */
		if (m->state[old] == MC_DEMAND)
			return -EPROTO;
		if (m->state[old] == MC_BACKGROUND) {
			mc_bg_remove(m, old);
			m->left[old] = 0;
		}
		m->state[old] = MC_ABSENT;
		m->id_slot[old] = MC_NONE;
		m->res->evictions++;
	}
	agent_memmap_filling(&m->map, id, (uint32_t)slot);
	agent_slots_taken(&m->slots, (uint32_t)slot, id, false);
	agent_memmap_publish(&m->map, id, (uint32_t)slot);
	agent_slots_committed(&m->slots, (uint32_t)slot);
	m->id_slot[id] = (uint32_t)slot;
	return slot;
}

static void mc_pin(struct mc *m, struct mc_client *c, uint32_t id)
{
	agent_memmap_pin(&m->map, m->id_slot[id], m->stamp);
	c->pins[c->n_pins++] = m->id_slot[id];
}

/*
 * The step's experts and how many tokens route to each: n distinct ids. A
 * burst's tokens are the client's sequence from half the trace on (a
 * prompt unlike the decode that follows), in addition to its decode tokens.
 */
static uint32_t mc_gather(struct mc *m, struct mc_client *c)
{
	uint32_t n_tok = c->in_burst ? m->cfg->prefill_tokens : 1, n = 0;

	for (uint32_t i = 0; i < n_tok; i++) {
		uint32_t at = c->in_burst ? (c->pos + m->n_tokens / 2 + i) % m->n_tokens : c->pos;
		uint32_t k;
		const uint32_t *sel = moe_trace_layer(c->tok[at], c->layer, &k);

		for (uint32_t j = 0; j < k; j++) {
			uint32_t id = c->layer * m->t->n_experts + sel[j];

			if (m->mark[id] != MC_NONE) {
				m->counts[m->mark[id]]++;
				continue;
			}
			m->mark[id] = n;
			m->ids[n] = id;
			m->counts[n++] = 1;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		m->mark[m->ids[i]] = MC_NONE;
	return n;
}

static int mc_step_begin(struct mc *m, uint32_t ci)
{
	struct mc_client *c = &m->clients[ci];
	struct moe_sim_client *r = c->r;
	struct moecache_plan_queue q = {0};
	uint32_t n, n_plan = 0, n_cpu = 0, top_k = m->t->top_k ? m->t->top_k : 1;
	double cpu_end, cpu_us;
	int err;

	m->stamp++;
	if (ci == m->cfg->prefill_client && c->layer == 0 && c->pos == m->cfg->prefill_at &&
	    !c->burst_done)
		c->in_burst = true;
	n = mc_gather(m, c);
	agent_fairq_begin_batch(&m->fq, ci);
	m->cost.layer_us = m->base_layer_us;
	if (n > top_k)
		m->cost.layer_us = m->base_layer_us * n / top_k;
	r->resident_us += m->cost.layer_us;
	r->steps++;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = m->ids[i];

		r->accesses += m->counts[i];
		moe_policy_access(m->policy, id / m->t->n_experts, id % m->t->n_experts,
				  m->counts[i], m->stamp);
		/* In the bank is a hit, its copy done or not (as moe_sim_run counts). */
		if (m->state[id] != MC_ABSENT) {
			mc_pin(m, c, id);
			r->hits += m->counts[i];
		}
		if (m->state[id] == MC_READY)
			continue;
		m->ids[n_plan] = id; /* compacted in place: n_plan <= i */
		/* On the link for another client: priced whole, an upper bound. */
		m->copy_left[n_plan++] =
		    m->state[id] == MC_BACKGROUND ? m->left[id] : m->cost.copy_us;
	}
	q.engine_busy_us[0] =
	    (m->link_busy ? m->busy_end - m->now : 0) + agent_fairq_ahead(&m->fq, ci);
	q.background_us = m->bg_left_us;
	cpu_us = m->cost.cpu_us;
	if (ci == m->cfg->no_cpu_client)
		m->cost.cpu_us = 0; /* no host compute: the plan waits for every miss */
	err = moecache_plan_layer(&m->cost, &q, m->copy_left, n_plan, m->action, NULL);
	m->cost.cpu_us = cpu_us;
	if (err)
		return err;
	for (uint32_t i = 0; i < n_plan; i++) {
		uint32_t id = m->ids[i];
		int slot;

		if (m->action[i] == MOECACHE_PLAN_WAIT) {
			if (m->state[id] == MC_ABSENT) {
				slot = mc_fill(m, id);
				if (slot == -EPROTO)
					return slot;
				if (slot < 0) {
					r->bypassed++;
					n_cpu++;
					r->cpu_experts++;
					continue;
				}
				mc_pin(m, c, id);
				r->copies++;
			}
			if (m->state[id] != MC_DEMAND) {
				double cost =
				    m->state[id] == MC_BACKGROUND ? m->left[id] : m->cost.copy_us;

				if (m->state[id] == MC_BACKGROUND)
					mc_bg_remove(m, id);
				m->state[id] = MC_DEMAND;
				err = agent_fairq_push(&m->fq, ci, id, cost);
				if (err)
					return -EPROTO; /* room is one per id */
			}
			if (!(m->waiters[id] >> ci & 1)) {
				m->waiters[id] |= 1ULL << ci;
				c->outstanding++;
			}
			continue;
		}
		n_cpu++;
		r->cpu_experts++;
		if (m->action[i] != MOECACHE_PLAN_CPU_ADMIT || m->state[id] != MC_ABSENT)
			continue;
		slot = mc_fill(m, id);
		if (slot == -EPROTO)
			return slot;
		if (slot < 0)
			continue;
		m->state[id] = MC_BACKGROUND;
		m->left[id] = m->cost.copy_us;
		m->bg_owner[id] = ci;
		mc_bg_push(m, id);
		r->copies++;
	}
	cpu_end = m->now + n_cpu * m->cost.cpu_us;
	c->min_end = m->now + m->cost.layer_us;
	if (cpu_end > c->min_end)
		c->min_end = cpu_end;
	c->in_step = true;
	c->event = c->outstanding ? INFINITY : c->min_end;
	mc_link_kick(m);
	if (++c->layer < m->t->n_layers)
		return 0;
	c->layer = 0;
	if (c->in_burst) {
		c->in_burst = false;
		c->burst_done = true; /* the decode goes on from where it was */
	} else {
		c->pos++;
		r->tokens++;
	}
	return 0;
}

static void mc_step_end(struct mc *m, uint32_t ci, uint32_t n_tokens)
{
	struct mc_client *c = &m->clients[ci];

	for (uint32_t i = 0; i < c->n_pins; i++)
		agent_memmap_unpin(&m->map, c->pins[i]);
	c->n_pins = 0;
	c->in_step = false;
	c->r->total_us = m->now;
	if (c->layer == 0 && c->pos >= n_tokens) {
		c->done = true;
		c->event = INFINITY;
	}
}

static void mc_free(struct mc *m)
{
	for (uint32_t i = 0; m->clients && i < m->n_clients; i++) {
		free(m->clients[i].tok);
		free(m->clients[i].pins);
	}
	free(m->clients);
	if (m->ready) {
		agent_slots_destroy(&m->slots);
		agent_memmap_free(&m->map);
	}
	moe_policy_destroy(m->policy);
	agent_fairq_destroy(&m->fq);
	free(m->state);
	free(m->id_slot);
	free(m->waiters);
	free(m->left);
	free(m->bg_owner);
	free(m->bg_next);
	free(m->bg_prev);
	free(m->ids);
	free(m->counts);
	free(m->mark);
	free(m->copy_left);
	free(m->action);
}

static int mc_check(const struct moe_trace_view *v, const struct moe_sim_clients_config *cfg)
{
	const struct moe_timing_config *tc = cfg->timing;

	if (!v->trace || !v->n || !cfg->n_slots || !cfg->n_clients ||
	    cfg->n_clients > MOE_SIM_MAX_CLIENTS || !tc || tc->copy_engines != 1 ||
	    !isfinite(tc->link_gbps) || !(tc->link_gbps > 0) || !isfinite(tc->cpu_gbps) ||
	    tc->cpu_gbps < 0 || !isfinite(tc->layer_us) || tc->layer_us < 0)
		return -EINVAL;
	if (v->trace->n_experts > MOECACHE_PLAN_MAX_ITEMS)
		return -EINVAL;
	for (uint32_t i = 0; cfg->offsets && i < cfg->n_clients; i++)
		if (cfg->offsets[i] >= v->n)
			return -EINVAL;
	if (cfg->prefill_at != MOE_SIM_NO_PREFILL &&
	    (cfg->prefill_client >= cfg->n_clients || !cfg->prefill_tokens ||
	     cfg->prefill_at >= v->n || cfg->prefill_tokens > v->n))
		return -EINVAL;
	if (cfg->no_cpu_client != MOE_SIM_NO_CLIENT && cfg->no_cpu_client >= cfg->n_clients)
		return -EINVAL;
	if (moe_policy_reads_future(cfg->policy))
		return -EOPNOTSUPP;
	return 0;
}

static int mc_setup(struct mc *m, const struct moe_trace_view *v)
{
	const struct moe_sim_clients_config *cfg = m->cfg;
	const struct moe_trace *t = v->trace;
	double bytes = (double)(cfg->timing->expert_bytes ? cfg->timing->expert_bytes
							  : MOE_TIMING_DEFAULT_EXPERT_BYTES);
	struct moe_policy_config pc = {
	    .n_layers = t->n_layers, .n_local = t->n_experts, .n_slots = cfg->n_slots};
	int err;

	m->n_ids = t->n_layers * t->n_experts;
	m->n_clients = cfg->n_clients;
	m->n_tokens = v->n;
	if (cfg->n_slots > m->n_ids)
		return -EINVAL;
	m->link_bytes_per_us = cfg->timing->link_gbps * 1e3;
	m->cost.copy_us = bytes / m->link_bytes_per_us;
	m->cost.cpu_us = cfg->timing->cpu_gbps > 0 ? bytes / (cfg->timing->cpu_gbps * 1e3) : 0;
	m->cost.layer_us = m->base_layer_us = cfg->timing->layer_us;
	m->cost.n_engines = 1;
	m->cost.n_layers = t->n_layers;
	if (moecache_plan_cost_check(&m->cost))
		return -EINVAL;
	m->state = calloc(m->n_ids, sizeof(*m->state));
	m->id_slot = malloc(sizeof(*m->id_slot) * m->n_ids);
	m->waiters = calloc(m->n_ids, sizeof(*m->waiters));
	m->left = calloc(m->n_ids, sizeof(*m->left));
	m->bg_owner = calloc(m->n_ids, sizeof(*m->bg_owner));
	m->bg_next = malloc(sizeof(*m->bg_next) * m->n_ids);
	m->bg_prev = malloc(sizeof(*m->bg_prev) * m->n_ids);
	m->ids = malloc(sizeof(*m->ids) * t->n_experts);
	m->counts = malloc(sizeof(*m->counts) * t->n_experts);
	m->mark = malloc(sizeof(*m->mark) * m->n_ids);
	m->copy_left = malloc(sizeof(*m->copy_left) * t->n_experts);
	m->action = malloc(sizeof(*m->action) * t->n_experts);
	m->clients = calloc(m->n_clients, sizeof(*m->clients));
	if (!m->state || !m->id_slot || !m->waiters || !m->left || !m->bg_owner || !m->bg_next ||
	    !m->bg_prev || !m->ids || !m->counts || !m->mark || !m->copy_left || !m->action ||
	    !m->clients)
		return -ENOMEM;
	for (uint32_t id = 0; id < m->n_ids; id++)
		m->id_slot[id] = m->mark[id] = MC_NONE;
	m->bg_head = m->bg_tail = MC_NONE;
	/* One demand copy per id at most is ever queued: room for all of them per tenant. */
	err = agent_fairq_init(&m->fq, cfg->scheduler, m->n_clients, m->n_ids);
	/* A decode step's copies (one token's experts) go back to back. */
	if (!err)
		err = agent_fairq_set_quantum(&m->fq, (t->top_k ? t->top_k : 1) * m->cost.copy_us);
	if (!err)
		err = moe_policy_create(cfg->policy, &pc, &m->policy);
	if (!err)
		err = agent_memmap_init(&m->map, t->n_layers, t->n_experts, 0, t->n_experts,
					cfg->n_slots);
	if (err)
		return err;
	err = agent_slots_init(&m->slots, &m->map.view, m->policy);
	if (err) {
		agent_memmap_free(&m->map);
		return err;
	}
	m->ready = true;
	for (uint32_t i = 0; i < m->n_clients; i++) {
		struct mc_client *c = &m->clients[i];
		uint32_t off =
		    cfg->offsets ? cfg->offsets[i] : (uint32_t)((uint64_t)i * v->n / m->n_clients);

		c->tok = malloc(sizeof(*c->tok) * v->n);
		c->pins = malloc(sizeof(*c->pins) * t->n_experts);
		if (!c->tok || !c->pins)
			return -ENOMEM;
		for (uint32_t j = 0; j < v->n; j++)
			c->tok[j] = v->tokens[(off + j) % v->n];
		c->r = &m->res->c[i];
		c->r->offset = off;
	}
	return 0;
}

static double mc_jain(const struct moe_sim_clients_result *r)
{
	double sum = 0, sq = 0;

	for (uint32_t i = 0; i < r->n_clients; i++) {
		sum += r->c[i].modeled_speed;
		sq += r->c[i].modeled_speed * r->c[i].modeled_speed;
	}
	return sq > 0 ? sum * sum / (r->n_clients * sq) : 1.0;
}

int moe_sim_run_clients(const struct moe_trace_view *v, const struct moe_sim_clients_config *cfg,
			struct moe_sim_clients_result *dst)
{
	struct moe_sim_clients_result *out;
	struct mc m = {.cfg = cfg};
	double longest = 0;
	int err;

	if (!v || !cfg || !dst)
		return -EINVAL;
	err = mc_check(v, cfg);
	if (err)
		return err;
	/* Written to dst only when the run succeeds. */
	m.res = calloc(1, sizeof(*m.res));
	if (!m.res)
		return -ENOMEM;
	out = m.res;
	m.t = v->trace;
	err = mc_setup(&m, v);
	if (err)
		goto out;
	out->policy = moe_policy_name(m.policy);
	out->n_clients = cfg->n_clients;
	out->slots = cfg->n_slots;
	for (;;) {
		uint32_t next = MC_NONE;
		double tc = INFINITY, tl = m.link_busy ? m.busy_end : INFINITY;

		for (uint32_t i = 0; i < m.n_clients; i++) {
			if (!m.clients[i].done && m.clients[i].event < tc) {
				tc = m.clients[i].event;
				next = i;
			}
		}
		if (tl == INFINITY && next == MC_NONE) {
			for (uint32_t i = 0; i < m.n_clients; i++)
				if (!m.clients[i].done)
					err = -EPROTO; /* waiting with nothing on the link */
			break;
		}
		if (tl <= tc) {
			mc_advance(&m, tl);
			mc_link_done(&m);
			continue;
		}
		mc_advance(&m, tc);
		if (m.clients[next].in_step)
			mc_step_end(&m, next, v->n);
		if (!m.clients[next].done) {
			err = mc_step_begin(&m, next);
			if (err)
				goto out;
		}
	}
	if (err)
		goto out;
	for (uint32_t i = 0; i < out->n_clients; i++) {
		struct moe_sim_client *r = &out->c[i];

		r->hit_rate = r->accesses ? (double)r->hits / (double)r->accesses : 0;
		r->bytes_copied = r->link_us * m.link_bytes_per_us;
		r->modeled_speed = r->total_us > 0 ? r->resident_us / r->total_us : 1.0;
		if (r->total_us > longest)
			longest = r->total_us;
	}
	out->link_utilisation = longest > 0 ? out->link_busy_us / longest : 0;
	out->jain = mc_jain(out);
	*dst = *out;
out:
	mc_free(&m);
	free(m.res);
	return err;
}
