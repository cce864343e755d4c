// SPDX-License-Identifier: MIT
/*
 * Serving one pool: read requests, choose slots, evict, copy, commit.
 *
 * A request the driver hands over stays "in flight" (owned by this agent)
 * until it is filled or aborted: the driver will not queue that expert
 * again. So no request is ever dropped here: a demand request waits (and
 * is retried on the timer) while every slot is pinned or filling, and a
 * prefetch the policy declines is parked until a slot frees up, or
 * promoted to a demand when the expert's access[] counter shows that a
 * client asked for it meanwhile. A CPU request (MOECACHE_REQ_CPU: a miss
 * its client computed on the CPU, an admission nobody waits on) is served
 * once no demand request is pending, and its copy yields to every demand
 * copy that comes later (agent/fill.h); a client that asks for its expert
 * meanwhile makes it a demand (promotion), and a demand that finds every
 * slot pinned or filling cancels it (the admission is dropped).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "copy/backend.h"
#include "copy/copy_queue.h"
#include "fill.h"
#include "lib/gpu/common.h"
#include "libmoecache.h"
#include "policy/policy.h"
#include "pool.h"
#include "slots.h"
#include "tiers.h"

#define POOL_READ_BATCH 256
#define POOL_COMPLETION_BATCH 256
#define POOL_EVICT_ATTEMPTS 16
/* Warm-up proceeds while fewer prefetch copies are in flight, so that a
 * client waiting on one of them never queues behind many. */
#define POOL_WARM_INFLIGHT 8
/* Banks: moves decided and not finished, at most (each a chain of copies). */
#define POOL_MAX_PLANS 64
#define POOL_PLAN_STEPS (AGENT_TIERS_MAX + 1)

enum pool_req_state {
	REQ_NONE = 0,
	REQ_DEMAND,
	REQ_PREFETCH,
	REQ_PARKED,
	REQ_CPU,
};

enum pool_serve_result {
	SERVE_DONE,    /* resident or being filled already */
	SERVE_STARTED, /* a copy is under way */
	SERVE_WAIT,    /* no slot may be taken now */
};

/*
 * A pool of several banks (tiers) runs agent/tiers.h's decisions: one
 * fill or promotion is a plan of moves, deepest first (a victim leaves a
 * slot before the slot is named again), done one after the other: EVICT
 * (with MOECACHE_EVICT_MOVE while the expert is resident in another bank,
 * so it stays readable there), the copy (device to device where the
 * backends' peer probe says so, else from the host pages), COMMIT (which,
 * for a move, unpublishes the old slot in the same map change). Plans run
 * side by side: the slots of a plan are taken in the tiers' views until
 * its copies finish, so no other plan names them.
 */
struct pool_step {
	uint32_t bank; /* bank index = the level in agent_tiers */
	uint32_t slot; /* bank-local */
	uint32_t idx;
};

struct pool_plan {
	struct pool_step steps[POOL_PLAN_STEPS];
	uint32_t n, next; /* steps; the one under way or next to start */
	bool started;	  /* steps[next] evicted and copying */
	bool wanted;	  /* the last step fills a request */
	bool prefetch;
	bool in_use;
};

/* The fill a slot of a one-bank pool is copied for (agent/fill.h). */
struct pool_fill {
	uint32_t mark;	 /* access[] of its expert when the agent took it */
	uint8_t kind;	 /* enum agent_fill_kind */
	bool cancelling; /* cancelled (or promoted): not again */
};

struct pool_bank {
	struct moecache_map_bank layout;
	struct agent_backend *be;
	struct moe_policy *policy;
	struct agent_slots slots;
	bool slots_ready;
};

/* A growable FIFO of local expert indices. */
struct idx_fifo {
	uint32_t *items;
	uint32_t head, len, cap;
};

struct agent_pool {
	const struct agent_config *cfg;
	struct agent_log *log;
	char name[MOECACHE_NAME_LEN];
	int exit_fd;
	struct mc_gpu_budget *gpu_budget; /* shared by the agent's pools, or NULL */
	pthread_t thread;
	int done;    /* atomic: the thread has ended */
	int serving; /* atomic: set up, serving requests */
	int status;  /* the thread's exit status */

	uint32_t cmd;		/* atomic AGENT_CMD_* bits */
	uint32_t copy_delay_us; /* atomic: the new delay for AGENT_CMD_RELOAD */
	int ctl_fd;		/* eventfd: cmd changed */

	struct moecache *mc;
	const struct moecache_pool_info *info;
	const struct moecache_map *map;
	const char *host;
	size_t host_len;
	uint32_t max_batch;
	uint32_t n_idx;
	struct agent_backend *be;
	struct moe_policy *policy;
	char policy_choice[32]; /* the name the policy was created from */
	struct moe_profile profile;
	char profile_path[PATH_MAX];
	struct stat installed_profile; /* the RUN_DIR profile last read (st_ino 0: none) */
	struct agent_slots slots;

	uint8_t *req_state;	  /* [n_idx] enum pool_req_state */
	uint32_t *park_access;	  /* [n_idx]: access[] as of before the request was read */
	struct idx_fifo demand;	  /* demand requests, oldest first */
	struct idx_fifo cpu;	  /* CPU requests, oldest first */
	struct idx_fifo prefetch; /* prefetch requests, oldest first */
	struct idx_fifo parked;	  /* declined prefetches */

	struct moecache_fill *fills; /* [max_batch] scratch for commit and abort */
	struct agent_copy *done_copies;

	int epfd;
	int timer_fd;
	uint32_t timer_ms;
	uint64_t last_tick_ns;
	bool stopping;
	bool starved;
	bool warned_starved;
	bool warned_unloaded;
	uint32_t *warm_list; /* local indices to warm, hottest first */
	uint32_t warm_len, warm_next;
	uint32_t prefetch_inflight;  /* prefetch and warm-up copies */
	uint32_t cpu_inflight;	     /* CPU admissions copying */
	struct pool_fill *slot_fill; /* [n_slots], one bank */
	bool warm_ready;
	uint32_t n_clients;

	uint64_t n_requests, n_fills, n_evictions, n_aborts, n_parked, n_promoted;
	uint64_t n_cancelled;	 /* prefetch copies cancelled for a starved demand */
	uint64_t n_cpu_dropped;	 /* CPU admissions cancelled for one */
	uint64_t n_cpu_promoted; /* CPU admissions a client then asked for: made demands */

	/* The request path's view: &slots, or bank 0's with several banks. */
	struct agent_slots *view;
	/* Several banks (n_banks > 1); one bank uses be, policy and slots above. */
	uint32_t n_banks;
	struct pool_bank *banks;
	struct agent_tiers tiers;
	bool tiers_ready;
	struct pool_plan *plans;    /* [POOL_MAX_PLANS] */
	uint32_t n_plans;	    /* in use */
	uint32_t *slot_plan;	    /* [n_slots]: 1 + the plan whose copy fills the slot, or 0 */
	struct pool_plan *building; /* where agent_tiers' moves are recorded */
	uint64_t n_peer_copies, n_host_moves, n_tier_promotions;
};

static int fifo_push(struct idx_fifo *q, uint32_t idx)
{
	uint32_t *items =
	    agent_ring_grow(q->items, sizeof(*q->items), &q->head, q->len, &q->cap, q->len + 1, 64);

	if (!items)
		return -ENOMEM;
	q->items = items;
	q->items[(q->head + q->len) % q->cap] = idx;
	q->len++;
	return 0;
}

static bool fifo_peek(const struct idx_fifo *q, uint32_t *idx)
{
	if (!q->len)
		return false;
	*idx = q->items[q->head];
	return true;
}

static void fifo_pop(struct idx_fifo *q)
{
	if (!q->len)
		return;
	q->head = (q->head + 1) % q->cap;
	q->len--;
}

static void pool_idx_ids(const struct agent_pool *p, uint32_t idx, uint32_t *layer,
			 uint32_t *expert)
{
	*layer = idx / p->info->n_local;
	*expert = p->info->expert_begin + idx % p->info->n_local;
}

/* ---- profile ---- */

static void pool_load_profile(struct agent_pool *p)
{
	int ret;

	ret = agent_config_profile_path(p->cfg, p->name, p->profile_path, sizeof(p->profile_path));
	if (ret || !p->profile_path[0]) {
		p->profile_path[0] = '\0';
		return;
	}
	ret = moe_profile_load(p->profile_path, &p->profile);
	if (ret == -ENOENT)
		agent_info(p->log, p->name, "no profile at %s yet", p->profile_path);
	else if (ret)
		agent_warn(p->log, p->name, "profile %s not used: %s", p->profile_path,
			   strerror(-ret));
	else
		agent_info(p->log, p->name, "profile %s: %u experts ranked", p->profile_path,
			   p->profile.n);
}

/*
 * A profile moecachectl installed (RUN_DIR/POOL.profile.json, `profile
 * load`) that this pool has not read yet: 1 with *out loaded, 0 if there is
 * none or it was read already, -errno if it cannot be used.
 */
static int pool_installed_profile(struct agent_pool *p, struct moe_profile *out)
{
	struct stat *seen = &p->installed_profile;
	char path[PATH_MAX];
	struct stat st;
	int ret;

	if (agent_config_run_path(p->cfg, p->name, ".profile.json", path, sizeof(path)) ||
	    stat(path, &st))
		return 0;
	/* moecachectl writes a new file and renames it: a new inode each time. */
	if (st.st_ino == seen->st_ino && st.st_dev == seen->st_dev &&
	    st.st_mtim.tv_sec == seen->st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == seen->st_mtim.tv_nsec)
		return 0;
	*seen = st;
	ret = moe_profile_load(path, out);
	if (ret) {
		agent_warn(p->log, p->name, "profile %s not used: %s", path, strerror(-ret));
		return ret;
	}
	agent_info(p->log, p->name, "profile %s: %u experts ranked", path, out->n);
	return 1;
}

/*
 * The policy to run: the one moecachectl installed (RUN_DIR/POOL.policy,
 * `policy set`) if there is one, else the configured one.
 */
static void pool_policy_choice(struct agent_pool *p, char *out, size_t len)
{
	char path[PATH_MAX], buf[64];
	ssize_t n;
	int fd;

	snprintf(out, len, "%s", p->cfg->policy);
	if (agent_config_run_path(p->cfg, p->name, ".policy", path, sizeof(path)))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			agent_warn(p->log, p->name, "%s: %s", path, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, " \t\r\n")] = '\0';
	if (!buf[0] || strlen(buf) >= len) {
		agent_warn(p->log, p->name, "%s: no policy name in it", path);
		return;
	}
	snprintf(out, len, "%s", buf);
}

static int pool_policy_create_for(struct agent_pool *p, const char *name,
				  const struct moe_profile *profile, uint32_t n_slots,
				  struct moe_policy **out)
{
	struct moe_policy_config pc = {
	    .n_layers = p->info->n_layers,
	    .n_local = p->info->n_local,
	    .n_slots = n_slots,
	    .profile = profile->n ? profile : NULL,
	};
	int ret = moe_policy_create(name, &pc, out);

	if (ret)
		agent_err(p->log, p->name, "policy '%s': %s", name, strerror(-ret));
	return ret;
}

static int pool_policy_create(struct agent_pool *p, const char *name,
			      const struct moe_profile *profile, struct moe_policy **out)
{
	return pool_policy_create_for(p, name, profile, p->info->n_slots, out);
}

/* Several banks: each bank's view gets a policy of its own slots. */
static int pool_banks_set_policy(struct agent_pool *p, const char *name,
				 const struct moe_profile *profile)
{
	struct moe_policy *fresh[AGENT_TIERS_MAX];
	uint32_t made = 0;
	int ret = 0;

	for (; made < p->n_banks; made++) {
		ret = pool_policy_create_for(p, name, profile, p->banks[made].layout.n_slots,
					     &fresh[made]);
		if (ret)
			break;
	}
	if (ret) {
		while (made)
			moe_policy_destroy(fresh[--made]);
		return ret;
	}
	for (uint32_t i = 0; i < p->n_banks; i++) {
		agent_slots_set_policy(&p->banks[i].slots, fresh[i]);
		moe_policy_destroy(p->banks[i].policy);
		p->banks[i].policy = fresh[i];
	}
	p->policy = p->banks[0].policy;
	return 0;
}

/*
 * SIGHUP: a policy or profile moecachectl installed since takes effect.
 * The new policy starts from the slots as they are, with no history.
 */
static void pool_reload_policy(struct agent_pool *p)
{
	struct moe_profile fresh = {0};
	char name[sizeof(p->policy_choice)];
	struct moe_policy *policy;
	int installed;

	pool_policy_choice(p, name, sizeof(name));
	installed = pool_installed_profile(p, &fresh);
	if (installed <= 0 && !strcmp(name, p->policy_choice))
		return;
	if (p->n_banks > 1) {
		if (pool_banks_set_policy(p, name, installed > 0 ? &fresh : &p->profile)) {
			agent_warn(p->log, p->name, "keeping policy %s",
				   moe_policy_name(p->policy));
			moe_profile_free(&fresh);
			return;
		}
		policy = p->policy;
		goto installed;
	}
	if (pool_policy_create(p, name, installed > 0 ? &fresh : &p->profile, &policy)) {
		agent_warn(p->log, p->name, "keeping policy %s", moe_policy_name(p->policy));
		moe_profile_free(&fresh);
		return;
	}
	agent_slots_set_policy(&p->slots, policy);
	moe_policy_destroy(p->policy);
	p->policy = policy;
installed:
	snprintf(p->policy_choice, sizeof(p->policy_choice), "%s", name);
	if (installed > 0) {
		moe_profile_free(&p->profile);
		p->profile = fresh;
	}
	agent_notice(p->log, p->name, "policy now %s%s", moe_policy_name(policy),
		     installed > 0 ? ", over the installed profile" : "");
}

/*
 * After the agent wrote its own profile: where that file is also the one
 * `moecachectl profile load` installs (RUN_DIR/POOL.profile.json, as under
 * systemd), remember it as read, so that the next SIGHUP does not take the
 * agent's own ranking for an administrator's and rebuild the policy over it.
 */
static void pool_saw_own_profile(struct agent_pool *p)
{
	char run[PATH_MAX];
	struct stat saved, installed;

	if (agent_config_run_path(p->cfg, p->name, ".profile.json", run, sizeof(run)) ||
	    stat(run, &installed) || stat(p->profile_path, &saved))
		return;
	if (saved.st_ino == installed.st_ino && saved.st_dev == installed.st_dev)
		p->installed_profile = installed;
}

/*
 * Saves the policy's ranking to the --profile file (SIGUSR1, stop). With
 * nothing accessed since the start, the profile the agent started with is
 * still its ranking: the file is kept, with a new time, so that whoever
 * waits for the save (`moecachectl profile save --from-agent`) sees it.
 */
static void pool_save_profile(struct agent_pool *p)
{
	struct moe_profile ranking = {0};
	int ret;

	if (!p->profile_path[0] || !p->policy)
		return;
	agent_slots_scan_access(p->view, moecache_map_clock(p->map));
	ret = moe_policy_ranking(p->view->policy, &ranking);
	if (!ret && ranking.n == 0 && utimensat(AT_FDCWD, p->profile_path, NULL, 0) == 0) {
		agent_info(p->log, p->name, "profile %s kept: nothing accessed", p->profile_path);
		goto out;
	}
	if (!ret)
		ret = moe_profile_save(p->profile_path, &ranking);
	if (ret)
		agent_err(p->log, p->name, "saving profile %s: %s", p->profile_path,
			  strerror(-ret));
	else
		agent_info(p->log, p->name, "profile saved to %s (%u experts)", p->profile_path,
			   ranking.n);
out:
	pool_saw_own_profile(p);
	moe_profile_free(&ranking);
}

/* ---- fills ---- */

/*
 * Starts the copy of idx into slot for a fill of kind; mark: idx's access[]
 * when the agent took it (agent_fill_asked_since).
 */
static int pool_start_copy(struct agent_pool *p, uint32_t slot, uint32_t idx,
			   enum agent_fill_kind kind, uint32_t mark)
{
	struct agent_copy c = {.slot = slot, .flags = agent_fill_copy_flags(kind)};
	int ret;

	pool_idx_ids(p, idx, &c.layer, &c.expert);
	c.src = p->host + (uint64_t)idx * p->info->expert_bytes;
	ret = agent_backend_copy(p->be, &c);
	if (ret)
		return ret;
	p->slot_fill[slot] = (struct pool_fill){.mark = mark, .kind = (uint8_t)kind};
	p->prefetch_inflight += kind == AGENT_FILL_PREFETCH;
	p->cpu_inflight += kind == AGENT_FILL_CPU;
	return 0;
}

/* Gives slot back after a fill that could not start or failed. */
static void pool_abort_fill(struct agent_pool *p, uint32_t slot, uint32_t idx)
{
	struct moecache_fill f = {.slot = slot};
	int ret;

	pool_idx_ids(p, idx, &f.layer, &f.expert);
	ret = moecache_abort(p->mc, &f, 1);
	if (ret)
		agent_err(p->log, p->name, "abort of slot %u: %s", slot, strerror(-ret));
	agent_slots_aborted(&p->slots, slot);
	p->n_aborts++;
}

static enum pool_serve_result pool_serve_tiered(struct agent_pool *p, uint32_t idx, bool prefetch);

/*
 * Takes a slot for idx and starts its copy for a fill of kind. Several
 * banks: a CPU admission is copied as a demand (the tier moves have no
 * yielding class).
 */
static enum pool_serve_result pool_serve(struct agent_pool *p, uint32_t idx,
					 enum agent_fill_kind kind)
{
	uint32_t layer, expert, old_layer, old_expert;
	bool prefetch = kind == AGENT_FILL_PREFETCH;
	int slot, ret;

	if (p->n_banks > 1)
		return pool_serve_tiered(p, idx, prefetch);
	pool_idx_ids(p, idx, &layer, &expert);
	if (moecache_map_slot(p->map, layer, expert) != MOECACHE_NONE ||
	    agent_slots_is_filling(&p->slots, idx))
		return SERVE_DONE;
	for (int attempt = 0; attempt < POOL_EVICT_ATTEMPTS; attempt++) {
		slot = agent_slots_choose(&p->slots, idx, prefetch);
		if (slot < 0)
			return SERVE_WAIT;
		ret = moecache_evict(p->mc, slot, layer, expert, &old_layer, &old_expert);
		if (ret == -EEXIST)
			return SERVE_DONE;
		if (ret) {
			/* EBUSY: a client pinned it since we looked. */
			if (ret != -EBUSY)
				agent_warn(p->log, p->name, "evict slot %d for %u/%u: %s", slot,
					   layer, expert, strerror(-ret));
			agent_slots_exclude(&p->slots, slot);
			continue;
		}
		if (old_layer != MOECACHE_NONE)
			p->n_evictions++;
		agent_slots_taken(&p->slots, slot, idx, prefetch);
		ret = pool_start_copy(p, slot, idx, kind, p->park_access[idx]);
		if (ret) {
			agent_err(p->log, p->name, "copy into slot %d: %s", slot, strerror(-ret));
			pool_abort_fill(p, slot, idx);
			return SERVE_WAIT;
		}
		return SERVE_STARTED;
	}
	return SERVE_WAIT;
}

/* ---- several banks: tier moves ---- */

static int pool_enqueue(struct agent_pool *p, uint32_t idx, enum pool_req_state kind);

static uint32_t pool_inflight(const struct agent_pool *p)
{
	uint32_t n = 0;

	if (p->n_banks <= 1)
		return p->be ? agent_backend_inflight(p->be) : 0;
	for (uint32_t i = 0; i < p->n_banks; i++)
		n += p->banks[i].be ? agent_backend_inflight(p->banks[i].be) : 0;
	return n;
}

/* The bank holding global slot, or NULL. */
static struct pool_bank *pool_bank_of(struct agent_pool *p, uint32_t slot)
{
	for (uint32_t i = 0; i < p->n_banks; i++) {
		const struct moecache_map_bank *l = &p->banks[i].layout;

		if (slot >= l->slot_begin && slot - l->slot_begin < l->n_slots)
			return &p->banks[i];
	}
	return NULL;
}

static void pool_tier_move(void *ctx, uint32_t tier, uint32_t slot, uint32_t idx,
			   uint32_t from_tier, uint32_t from_slot)
{
	struct agent_pool *p = ctx;
	struct pool_plan *pl = p->building;

	/* Where it comes from is read from the map when the step starts. */
	(void)from_tier;
	(void)from_slot;
	/* A decision moves each level at most once, and a promotion adds one. */
	if (pl && pl->n < POOL_PLAN_STEPS)
		pl->steps[pl->n++] = (struct pool_step){.bank = tier, .slot = slot, .idx = idx};
}

static void pool_tier_clear(void *ctx, uint32_t tier, uint32_t slot)
{
	/* The COMMIT of the move out of it frees the slot in the driver. */
	(void)ctx;
	(void)tier;
	(void)slot;
}

static const struct agent_tier_ops pool_tier_ops = {
    .move = pool_tier_move,
    .clear = pool_tier_clear,
    .deferred_commit = true,
};

static struct pool_plan *pool_plan_new(struct agent_pool *p)
{
	if (p->n_plans == POOL_MAX_PLANS)
		return NULL;
	for (uint32_t i = 0; i < POOL_MAX_PLANS; i++) {
		struct pool_plan *pl = &p->plans[i];

		if (pl->in_use)
			continue;
		memset(pl, 0, sizeof(*pl));
		pl->in_use = true;
		p->n_plans++;
		return pl;
	}
	return NULL;
}

static void pool_plan_free(struct agent_pool *p, struct pool_plan *pl)
{
	pl->in_use = false;
	p->n_plans--;
}

/*
 * The plan's remaining steps are dropped (the current one's fill was
 * aborted in the driver already): their slots go back to the views, which
 * are rebuilt from the map. A request it was filling is served again.
 */
static int pool_plan_abandon(struct agent_pool *p, struct pool_plan *pl, bool requeue)
{
	/* A decision that failed before its first move has no steps. */
	uint32_t idx = pl->n ? pl->steps[pl->n - 1].idx : MOECACHE_NONE, layer, expert;
	bool wanted = pl->wanted && idx != MOECACHE_NONE;

	for (uint32_t i = pl->next; i < pl->n; i++)
		agent_slots_aborted(&p->banks[pl->steps[i].bank].slots, pl->steps[i].slot);
	pool_plan_free(p, pl);
	agent_tiers_sync(&p->tiers);
	p->n_aborts++;
	if (!requeue || !wanted)
		return 0;
	pool_idx_ids(p, idx, &layer, &expert);
	if (moecache_map_slot(p->map, layer, expert) == MOECACHE_NONE)
		return pool_enqueue(p, idx, REQ_DEMAND);
	return 0;
}

/* Starts steps[next]: EVICT (MOVE while the expert is resident in another bank), then its copy. */
static int pool_plan_step(struct agent_pool *p, struct pool_plan *pl)
{
	const struct pool_step *st = &pl->steps[pl->next];
	struct pool_bank *b = &p->banks[st->bank], *from;
	uint32_t global = b->layout.slot_begin + st->slot, cur, old_layer, old_expert;
	struct agent_copy c = {.slot = st->slot,
			       .flags = pl->prefetch ? MOECACHE_FILL_PREFETCH : 0};
	struct moecache_fill f = {.slot = global};
	int ret;

	if (p->stopping)
		return pool_plan_abandon(p, pl, false);
	pool_idx_ids(p, st->idx, &c.layer, &c.expert);
	cur = moecache_map_slot(p->map, c.layer, c.expert);
	ret = moecache_evict_flags(p->mc, global, c.layer, c.expert,
				   cur != MOECACHE_NONE ? MOECACHE_EVICT_MOVE : 0, &old_layer,
				   &old_expert);
	if (ret == -EBUSY) {
		/*
		 * A client pinned what the slot held after the decision, or still
		 * pins the slot a move of this plan left. That client may be
		 * waiting for this very plan: waiting here could deadlock, so the
		 * request is decided again, without this slot for the round.
		 */
		agent_slots_exclude(&b->slots, st->slot);
		return pool_plan_abandon(p, pl, true);
	}
	if (ret) {
		agent_warn(p->log, p->name, "evict slot %u for %u/%u%s: %s", global, c.layer,
			   c.expert, cur != MOECACHE_NONE ? " (move)" : "", strerror(-ret));
		return pool_plan_abandon(p, pl, true);
	}
	if (old_layer != MOECACHE_NONE)
		p->n_evictions++;
	from = cur != MOECACHE_NONE ? pool_bank_of(p, cur) : NULL;
	if (from && agent_backend_can_peer(b->be, from->be)) {
		ret = agent_backend_copy_peer(b->be, from->be, cur - from->layout.slot_begin, &c);
		p->n_peer_copies += !ret;
	} else {
		c.src = p->host + (uint64_t)st->idx * p->info->expert_bytes;
		ret = agent_backend_copy(b->be, &c);
		p->n_host_moves += !ret && from;
	}
	if (ret) {
		agent_err(p->log, p->name, "copy into slot %u: %s", global, strerror(-ret));
		f.layer = c.layer;
		f.expert = c.expert;
		if (moecache_abort(p->mc, &f, 1))
			agent_err(p->log, p->name, "abort of slot %u failed", global);
		return pool_plan_abandon(p, pl, true);
	}
	pl->started = true;
	p->slot_plan[global] = (uint32_t)(pl - p->plans) + 1;
	return 0;
}

/* A copy of a plan finished: commit it and start the next step. */
static int pool_plan_copied(struct agent_pool *p, struct pool_bank *b, const struct agent_copy *c)
{
	uint32_t global = b->layout.slot_begin + c->slot, id = p->slot_plan[global];
	struct moecache_fill f = {
	    .slot = global, .layer = c->layer, .expert = c->expert, .flags = c->flags};
	struct pool_plan *pl;
	int ret = c->status;

	if (!id)
		return 0; /* not a plan's: nothing is waiting for it */
	p->slot_plan[global] = 0;
	pl = &p->plans[id - 1];
	if (!ret)
		ret = moecache_commit(p->mc, &f, 1);
	if (ret) {
		agent_err(p->log, p->name, "fill of slot %u: %s", global, strerror(-ret));
		if (moecache_abort(p->mc, &f, 1))
			agent_err(p->log, p->name, "abort of slot %u failed", global);
		return pool_plan_abandon(p, pl, true);
	}
	p->n_fills++;
	agent_tiers_committed(&p->tiers, pl->steps[pl->next].bank, c->slot);
	pl->started = false;
	if (++pl->next == pl->n) {
		pool_plan_free(p, pl);
		return 0;
	}
	return pool_plan_step(p, pl);
}

static int pool_collect_bank(struct agent_pool *p, uint32_t bank)
{
	struct pool_bank *b = &p->banks[bank];
	int n;

	do {
		n = agent_backend_completions(b->be, p->done_copies, p->max_batch);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int ret = pool_plan_copied(p, b, &p->done_copies[i]);

			if (ret)
				return ret;
		}
	} while ((uint32_t)n == p->max_batch);
	return 0;
}

/* Records what agent_tiers decides for one expert (fill or promote) and starts it. */
static int pool_plan_run(struct agent_pool *p, uint32_t idx, bool promote, bool prefetch)
{
	struct pool_plan *pl = pool_plan_new(p);
	int ret;

	if (!pl)
		return -EAGAIN;
	pl->wanted = !promote;
	pl->prefetch = prefetch || promote;
	p->building = pl;
	ret = promote ? agent_tiers_promote(&p->tiers, idx)
		      : agent_tiers_fill_as(&p->tiers, idx, prefetch);
	p->building = NULL;
	if (ret < 0 || !pl->n) {
		/* A client pinned the victim between the policy's look and the check. */
		if (ret == -EPROTO)
			agent_info(p->log, p->name, "a victim was pinned meanwhile: retried");
		/* Nothing was started: the views go back to the map. */
		if (pl->n || ret == -EPROTO)
			pool_plan_abandon(p, pl, false);
		else
			pool_plan_free(p, pl);
		return ret < 0 ? ret : -EPROTO;
	}
	if (promote)
		p->n_tier_promotions++;
	return pool_plan_step(p, pl);
}

static enum pool_serve_result pool_serve_tiered(struct agent_pool *p, uint32_t idx, bool prefetch)
{
	uint32_t layer, expert, tier;
	int ret;

	pool_idx_ids(p, idx, &layer, &expert);
	if (moecache_map_slot(p->map, layer, expert) != MOECACHE_NONE)
		return SERVE_DONE;
	tier = agent_tiers_where(&p->tiers, idx, NULL);
	if (tier != AGENT_TIER_NONE) {
		if (agent_slots_is_filling(&p->banks[tier].slots, idx))
			return SERVE_DONE; /* a plan is bringing it */
		/* Left behind this agent's back (a flush): look again. */
		agent_tiers_sync(&p->tiers);
		if (agent_tiers_where(&p->tiers, idx, NULL) != AGENT_TIER_NONE)
			return SERVE_WAIT;
	}
	ret = pool_plan_run(p, idx, false, prefetch);
	if (ret < 0)
		return SERVE_WAIT;
	/* A plan dropped at its first EVICT (a pin won the race): the request stays queued. */
	if (agent_tiers_where(&p->tiers, idx, NULL) == AGENT_TIER_NONE &&
	    moecache_map_slot(p->map, layer, expert) == MOECACHE_NONE)
		return SERVE_WAIT;
	return SERVE_STARTED;
}

/*
 * Every bank's policy hears of the accesses; an expert a client used in a
 * lower bank moves up when tier 0's policy admits it (as a prefetch).
 */
static void pool_tiers_scan(struct agent_pool *p, uint64_t clock)
{
	const struct agent_slots *top = &p->banks[0].slots;

	for (uint32_t i = 0; i < p->n_banks; i++)
		agent_slots_scan_access(&p->banks[i].slots, clock);
	for (uint32_t i = 0; i < top->n_scan && !p->stopping; i++) {
		uint32_t idx = top->scan[i].idx, tier = agent_tiers_where(&p->tiers, idx, NULL);

		if (tier == AGENT_TIER_NONE || tier == 0)
			continue;
		if (pool_plan_run(p, idx, true, true) == -EAGAIN)
			break;
	}
}

/* ---- requests ---- */

/* How urgent a state is: a request only ever moves up (a demand wins). */
static int pool_req_rank(uint8_t st)
{
	switch (st) {
	case REQ_DEMAND:
		return 3;
	case REQ_CPU:
		return 2;
	case REQ_PREFETCH:
	case REQ_PARKED:
		return 1;
	default:
		return 0;
	}
}

/* kind: REQ_DEMAND, REQ_CPU or REQ_PREFETCH. */
static int pool_enqueue(struct agent_pool *p, uint32_t idx, enum pool_req_state kind)
{
	uint8_t *st = &p->req_state[idx];

	if (pool_req_rank(*st) >= pool_req_rank(kind))
		return 0;
	/* An upgraded request leaves a stale entry in its queue: skipped when popped. */
	*st = kind;
	return fifo_push(kind == REQ_DEMAND ? &p->demand
			 : kind == REQ_CPU  ? &p->cpu
					    : &p->prefetch,
			 idx);
}

/* The queue a request read from the driver goes to (the driver never sets CPU with DEMAND). */
static enum pool_req_state pool_req_kind(uint32_t flags)
{
	if (flags & MOECACHE_REQ_DEMAND)
		return REQ_DEMAND;
	if (flags & MOECACHE_REQ_CPU)
		return REQ_CPU;
	if (flags & MOECACHE_REQ_PREFETCH)
		return REQ_PREFETCH;
	return REQ_DEMAND;
}

static int pool_read_requests(struct agent_pool *p)
{
	struct moecache_request reqs[POOL_READ_BATCH];
	int n;

	do {
		n = moecache_read_requests(p->mc, reqs, POOL_READ_BATCH);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			uint32_t idx = moecache_map_idx(p->map, reqs[i].layer, reqs[i].expert);
			int ret;

			if (idx == MOECACHE_NONE) {
				agent_warn(p->log, p->name, "request for %u/%u out of the pool",
					   reqs[i].layer, reqs[i].expert);
				continue;
			}
			p->n_requests++;
			/*
			 * The access count as of the last scan, which came before this
			 * read: a client that asks for the expert from now on (and so
			 * cannot queue a new request) moves it past this mark.
			 */
			p->park_access[idx] = p->view->access_seen[idx];
			/*
			 * A CPU request: its own acquire counted an access before it
			 * was queued, so the mark is the counter now; a client asking
			 * later moves it (agent_fill_asked_since).
			 */
			if (pool_req_kind(reqs[i].flags) == REQ_CPU)
				p->park_access[idx] = moecache_map_access(p->map, idx);
			ret = pool_enqueue(p, idx, pool_req_kind(reqs[i].flags));
			if (ret)
				return ret;
		}
	} while (n == POOL_READ_BATCH);
	return 0;
}

/* Parked prefetches: promoted when a client asked for them, retried when a slot is free. */
static int pool_review_parked(struct agent_pool *p)
{
	uint32_t n = p->parked.len;
	int ret = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = 0, layer, expert;

		fifo_peek(&p->parked, &idx);
		fifo_pop(&p->parked);
		if (p->req_state[idx] != REQ_PARKED)
			continue;
		pool_idx_ids(p, idx, &layer, &expert);
		if (moecache_map_slot(p->map, layer, expert) != MOECACHE_NONE) {
			p->req_state[idx] = REQ_NONE;
			continue;
		}
		if (moecache_map_access(p->map, idx) != p->park_access[idx]) {
			p->req_state[idx] = REQ_NONE;
			p->n_promoted++;
			ret = pool_enqueue(p, idx, REQ_DEMAND);
		} else if (p->view->maybe_free) {
			p->req_state[idx] = REQ_NONE;
			ret = pool_enqueue(p, idx, REQ_PREFETCH);
		} else {
			ret = fifo_push(&p->parked, idx);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* Pool clock ticks that make up one step of every attached client. */
static uint64_t pool_step_window(const struct agent_pool *p)
{
	return (uint64_t)p->info->n_layers * (p->n_clients ? p->n_clients : 1);
}

/*
 * A demand miss finds every slot pinned or filling: the prefetch copies and
 * the CPU admissions not finished are cancelled (a queued one at once, a
 * running one after its chunk; copy_queue.h), so that neither stands in
 * front of a demand miss; their slots come back through pool_collect,
 * which drops the CPU ones (agent_fill_finished). Demand copies are never
 * cancelled, nor anything by an engine without cancel. One bank.
 */
static void pool_cancel_prefetches(struct agent_pool *p)
{
	if (p->n_banks > 1 || (!p->prefetch_inflight && !p->cpu_inflight))
		return;
	for (uint32_t slot = 0; slot < p->info->n_slots; slot++) {
		struct pool_fill *f = &p->slot_fill[slot];

		if (f->cancelling || (f->kind != AGENT_FILL_PREFETCH && f->kind != AGENT_FILL_CPU))
			continue;
		f->cancelling = true;
		agent_backend_cancel(p->be, slot);
	}
}

/*
 * Promotion of the CPU admissions a client asked for since the agent took
 * them (a client that misses on an expert whose request the agent holds
 * queues nothing, but counts an access): one still queued here becomes a
 * demand request; one copying is cancelled, and pool_collect copies it
 * again, whole, as a demand into the same slot (agent_fill_finished). So
 * a waiting client never waits behind the demands that came after it, and
 * no second copy of the expert is started. On the timer, which runs at
 * retry_ms while the agent holds CPU admissions.
 */
static int pool_review_cpu(struct agent_pool *p)
{
	for (uint32_t i = 0; i < p->cpu.len; i++) {
		uint32_t idx = p->cpu.items[(p->cpu.head + i) % p->cpu.cap];
		int ret;

		if (p->req_state[idx] != REQ_CPU ||
		    !agent_fill_asked_since(p->park_access[idx], moecache_map_access(p->map, idx)))
			continue;
		ret = pool_enqueue(p, idx, REQ_DEMAND);
		if (ret)
			return ret;
		p->n_cpu_promoted++;
	}
	for (uint32_t slot = 0; p->cpu_inflight && slot < p->info->n_slots; slot++) {
		struct pool_fill *f = &p->slot_fill[slot];
		uint32_t idx = p->slots.held[slot];

		if (f->kind != AGENT_FILL_CPU || f->cancelling || idx == MOECACHE_NONE ||
		    !agent_fill_asked_since(f->mark, moecache_map_access(p->map, idx)))
			continue;
		f->cancelling = true;
		if (!agent_backend_cancel(p->be, slot))
			p->n_cpu_promoted++;
	}
	return 0;
}

static int pool_schedule(struct agent_pool *p)
{
	uint64_t clock, window;
	uint32_t idx;

	p->starved = false;
	if (!p->demand.len && !p->cpu.len && !p->prefetch.len)
		return 0;
	if (!p->warned_unloaded && !(moecache_map_flags(p->map) & MOECACHE_POOL_LOADED)) {
		agent_warn(p->log, p->name, "copying from host pages not marked loaded");
		p->warned_unloaded = true;
	}
	clock = moecache_map_clock(p->map);
	window = pool_step_window(p);
	if (p->n_banks > 1) {
		agent_tiers_new_round(&p->tiers, clock > window ? clock - window : 0);
		pool_tiers_scan(p, clock);
	} else {
		/* The policy hears of the misses before their experts are inserted. */
		agent_slots_scan_access(&p->slots, clock);
		agent_slots_new_round(&p->slots, clock > window ? clock - window : 0);
	}

	while (fifo_peek(&p->demand, &idx)) {
		if (p->req_state[idx] != REQ_DEMAND) {
			fifo_pop(&p->demand);
			continue;
		}
		if (pool_serve(p, idx, AGENT_FILL_DEMAND) == SERVE_WAIT) {
			p->starved = true;
			pool_cancel_prefetches(p);
			if (!p->warned_starved)
				agent_warn(p->log, p->name,
					   "no slot may be taken (all pinned or filling): %u "
					   "requests wait",
					   p->demand.len);
			p->warned_starved = true;
			return 0;
		}
		fifo_pop(&p->demand);
		p->req_state[idx] = REQ_NONE;
	}
	if (p->warned_starved)
		agent_info(p->log, p->name, "slots available again");
	p->warned_starved = false;

	/*
	 * CPU requests: computed on the CPU already, nobody waits on their
	 * copies, so they come after every pending demand, cancel nothing and
	 * are copied in the class that yields to later demand copies
	 * (agent/fill.h); one that finds no slot waits for the timer as a
	 * demand does.
	 */
	while (fifo_peek(&p->cpu, &idx)) {
		if (p->req_state[idx] != REQ_CPU) {
			fifo_pop(&p->cpu);
			continue;
		}
		if (pool_serve(p, idx, AGENT_FILL_CPU) == SERVE_WAIT) {
			p->starved = true;
			return 0;
		}
		fifo_pop(&p->cpu);
		p->req_state[idx] = REQ_NONE;
	}

	while (fifo_peek(&p->prefetch, &idx)) {
		fifo_pop(&p->prefetch);
		if (p->req_state[idx] != REQ_PREFETCH)
			continue;
		if (pool_serve(p, idx, AGENT_FILL_PREFETCH) != SERVE_WAIT) {
			p->req_state[idx] = REQ_NONE;
			continue;
		}
		p->req_state[idx] = REQ_PARKED;
		p->n_parked++;
		if (fifo_push(&p->parked, idx))
			return -ENOMEM;
	}
	return 0;
}

/* ---- warm-up ---- */

static int pool_warm_prepare(struct agent_pool *p)
{
	uint32_t n = 0;

	/* Several banks: tier 0 fills from the requests and promotions only. */
	if (p->n_banks > 1) {
		p->warm_ready = true;
		return 0;
	}
	if (p->info->n_slots >= p->n_idx) {
		/* The bank holds everything: fill it all, nothing will ever be evicted. */
		p->warm_list = malloc(p->n_idx * sizeof(*p->warm_list));
		if (!p->warm_list)
			return -ENOMEM;
		for (uint32_t idx = 0; idx < p->n_idx; idx++)
			p->warm_list[n++] = idx;
	} else if (p->profile.n) {
		p->warm_list = malloc(p->profile.n * sizeof(*p->warm_list));
		if (!p->warm_list)
			return -ENOMEM;
		for (uint32_t i = 0; i < p->profile.n && n < p->info->n_slots; i++) {
			const struct moe_expert_id *e = &p->profile.ranked[i];

			if (e->layer < p->info->n_layers && e->expert < p->info->n_local)
				p->warm_list[n++] = e->layer * p->info->n_local + e->expert;
		}
	}
	p->warm_len = n;
	p->warm_ready = true;
	return 0;
}

/* Fills free slots with the warm list, a few copies at a time; never evicts. */
static void pool_warm_step(struct agent_pool *p)
{
	if (p->warm_next >= p->warm_len || p->stopping)
		return;
	if (!(moecache_map_flags(p->map) & MOECACHE_POOL_LOADED))
		return; /* until the loader is done */
	if (p->warm_next == 0)
		agent_info(p->log, p->name, "warming the bank with up to %u experts", p->warm_len);
	while (p->warm_next < p->warm_len && p->prefetch_inflight < POOL_WARM_INFLIGHT) {
		uint32_t idx = p->warm_list[p->warm_next], layer, expert;
		int slot, ret;

		pool_idx_ids(p, idx, &layer, &expert);
		if (moecache_map_slot(p->map, layer, expert) != MOECACHE_NONE ||
		    agent_slots_is_filling(&p->slots, idx)) {
			p->warm_next++;
			continue;
		}
		slot = agent_slots_find_free(&p->slots);
		if (slot < 0) {
			p->warm_next = p->warm_len; /* the bank is full: done */
			break;
		}
		ret = moecache_evict(p->mc, slot, layer, expert, NULL, NULL);
		if (ret == -EBUSY) {
			agent_slots_exclude(&p->slots, slot);
			continue;
		}
		p->warm_next++;
		if (ret)
			continue; /* EEXIST: a request got there first */
		agent_slots_taken(&p->slots, slot, idx, true);
		ret = pool_start_copy(p, slot, idx, AGENT_FILL_PREFETCH,
				      moecache_map_access(p->map, idx));
		if (ret) {
			pool_abort_fill(p, slot, idx);
			break;
		}
	}
	if (p->warm_next >= p->warm_len) {
		free(p->warm_list);
		p->warm_list = NULL;
		p->warm_len = p->warm_next = 0;
	}
}

/* ---- completions ---- */

static void pool_commit_batch(struct agent_pool *p, const struct moecache_fill *fills, uint32_t n)
{
	int ret;

	if (!n)
		return;
	ret = moecache_commit(p->mc, fills, n);
	if (!ret) {
		for (uint32_t i = 0; i < n; i++)
			agent_slots_committed(&p->slots, fills[i].slot);
		p->n_fills += n;
		return;
	}
	agent_err(p->log, p->name, "commit of %u fills: %s; committing one by one", n,
		  strerror(-ret));
	for (uint32_t i = 0; i < n; i++) {
		ret = moecache_commit(p->mc, &fills[i], 1);
		if (!ret) {
			agent_slots_committed(&p->slots, fills[i].slot);
			p->n_fills++;
			continue;
		}
		agent_err(p->log, p->name, "commit of slot %u: %s", fills[i].slot, strerror(-ret));
		pool_abort_fill(p, fills[i].slot,
				fills[i].layer * p->info->n_local + fills[i].expert -
				    p->info->expert_begin);
	}
}

/*
 * The backend's publish hook: a demand copy finished, on a copy thread.
 * Its COMMIT goes to the driver from there, so the client waiting for it
 * is woken without a hand-off to this pool's thread; pool_collect keeps
 * the books later (agent_slots_committed), and until then the slot stays
 * "filling" here, which only keeps it from being chosen as a victim. It
 * reads the handle alone, which does not change while copies run (the
 * backend is destroyed before the handle is closed), and the driver
 * serialises the COMMIT against this thread's calls.
 */
static int pool_publish(void *ctx, const struct agent_copy *c)
{
	struct agent_pool *p = ctx;
	struct moecache_fill f = {
	    .slot = c->slot, .layer = c->layer, .expert = c->expert, .flags = c->flags};

	return moecache_commit(p->mc, &f, 1);
}

/*
 * One finished copy of a one-bank pool: a whole one goes into fills for the
 * batch's COMMIT (*n_ok counts them); the rest as agent_fill_finished says.
 */
static void pool_copy_finished(struct agent_pool *p, const struct agent_copy *c, uint32_t *n_ok)
{
	uint32_t idx = moecache_map_idx(p->map, c->layer, c->expert);
	struct pool_fill f = p->slot_fill[c->slot];
	enum agent_fill_kind kind = (enum agent_fill_kind)f.kind;
	bool asked = agent_fill_asked_since(f.mark, moecache_map_access(p->map, idx));

	p->slot_fill[c->slot] = (struct pool_fill){0};
	if (kind == AGENT_FILL_PREFETCH && p->prefetch_inflight)
		p->prefetch_inflight--;
	if (kind == AGENT_FILL_CPU && p->cpu_inflight)
		p->cpu_inflight--;
	switch (agent_fill_finished(kind, c->status, asked)) {
	case AGENT_FILL_COMMIT:
		if (c->published) { /* pool_publish committed it */
			agent_slots_committed(&p->slots, c->slot);
			p->n_fills++;
			return;
		}
		p->fills[(*n_ok)++] = (struct moecache_fill){
		    .slot = c->slot,
		    .layer = c->layer,
		    .expert = c->expert,
		    .flags = agent_fill_commit_flags(kind),
		};
		return;
	case AGENT_FILL_RECOPY:
		/* The slot stays this agent's, filling: no abort, no second slot. */
		if (!pool_start_copy(p, c->slot, idx, AGENT_FILL_DEMAND, f.mark))
			return;
		agent_err(p->log, p->name, "copy into slot %u again failed", c->slot);
		break;
	case AGENT_FILL_DROPPED:
		/* Cancelled for a starved demand: its next CPU miss admits it again. */
		p->n_cancelled++;
		p->n_cpu_dropped++;
		break;
	case AGENT_FILL_CANCELLED:
		/* pool_cancel_prefetches: the slot goes back, no error. */
		p->n_cancelled++;
		break;
	case AGENT_FILL_ABORT:
		agent_err(p->log, p->name, "copy into slot %u failed: %s", c->slot,
			  strerror(-c->status));
		break;
	}
	pool_abort_fill(p, c->slot, idx);
}

static int pool_collect(struct agent_pool *p)
{
	int n;

	do {
		uint32_t n_ok = 0;

		n = agent_backend_completions(p->be, p->done_copies, p->max_batch);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			pool_copy_finished(p, &p->done_copies[i], &n_ok);
		pool_commit_batch(p, p->fills, n_ok);
	} while ((uint32_t)n == p->max_batch);
	return 0;
}

/* ---- the loop ---- */

static int pool_set_timer(struct agent_pool *p, uint32_t ms)
{
	struct itimerspec its = {
	    .it_interval = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000},
	};

	if (ms == p->timer_ms)
		return 0;
	its.it_value = its.it_interval;
	if (timerfd_settime(p->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	p->timer_ms = ms;
	return 0;
}

static void pool_log_stats(struct agent_pool *p)
{
	struct moecache_stats st;
	int ret = moecache_stats(p->mc, MOECACHE_NONE, &st);

	if (ret) {
		agent_warn(p->log, p->name, "stats: %s", strerror(-ret));
		return;
	}
	agent_info(p->log, p->name,
		   "resident=%u filling=%u pinned=%u clients=%u hits=%llu misses=%llu "
		   "requests=%llu fills=%llu evictions=%llu aborts=%llu parked=%llu promoted=%llu "
		   "parked_now=%u cancelled=%llu cpu_promotions=%llu cpu_drops=%llu",
		   st.resident, st.filling, st.pinned_slots, st.n_clients,
		   (unsigned long long)st.hits, (unsigned long long)st.misses,
		   (unsigned long long)p->n_requests, (unsigned long long)p->n_fills,
		   (unsigned long long)p->n_evictions, (unsigned long long)p->n_aborts,
		   (unsigned long long)p->n_parked, (unsigned long long)p->n_promoted,
		   p->parked.len, (unsigned long long)p->n_cancelled,
		   (unsigned long long)p->n_cpu_promoted, (unsigned long long)p->n_cpu_dropped);
	for (uint32_t i = 0; i < p->n_banks && p->tiers_ready; i++) {
		const struct agent_tier_stats *ts = &p->tiers.stats[i];
		struct moecache_stats bs;

		if (moecache_stats_bank(p->mc, i, &bs))
			memset(&bs, 0, sizeof(bs));
		agent_info(p->log, p->name,
			   "bank %u (tier %u): resident=%u hits=%llu fills=%llu promotions=%llu "
			   "demotions=%llu drops=%llu",
			   i, p->banks[i].layout.tier, bs.resident, (unsigned long long)bs.hits,
			   (unsigned long long)ts->fills, (unsigned long long)ts->promotions,
			   (unsigned long long)ts->demotions, (unsigned long long)ts->drops);
	}
	if (p->n_banks > 1)
		agent_info(
		    p->log, p->name, "moves: %llu device to device, %llu from the host pages",
		    (unsigned long long)p->n_peer_copies, (unsigned long long)p->n_host_moves);
}

static uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Periodic work, every tick_ms even when the timer runs faster for retries. */
static void pool_tick(struct agent_pool *p)
{
	struct moecache_stats st;
	uint64_t now = pool_now_ns();

	if (now - p->last_tick_ns < (uint64_t)p->cfg->tick_ms * 1000000u)
		return;
	p->last_tick_ns = now;

	if (!moecache_stats(p->mc, MOECACHE_NONE, &st))
		p->n_clients = st.n_clients;
	if (p->n_banks > 1) {
		uint64_t clock = moecache_map_clock(p->map), window = pool_step_window(p);

		/* Behind this agent's back (a flush); never under a plan's feet. */
		if (!p->n_plans)
			agent_tiers_sync(&p->tiers);
		agent_tiers_new_round(&p->tiers, clock > window ? clock - window : 0);
		pool_tiers_scan(p, clock);
		return;
	}
	/* Catch changes made behind this agent's back (an administrator's flush). */
	agent_slots_sync(&p->slots);
	agent_slots_scan_access(&p->slots, moecache_map_clock(p->map));
}

static int pool_stop_reading(struct agent_pool *p)
{
	p->stopping = true;
	if (epoll_ctl(p->epfd, EPOLL_CTL_DEL, moecache_fd(p->mc), NULL) < 0)
		return -errno;
	agent_info(p->log, p->name, "stopping: %u copies in flight", pool_inflight(p));
	return 0;
}

static int pool_handle_commands(struct agent_pool *p)
{
	uint32_t cmd = __atomic_exchange_n(&p->cmd, 0, __ATOMIC_ACQ_REL);
	uint64_t v;

	if (read(p->ctl_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	if (cmd & AGENT_CMD_SAVE)
		pool_save_profile(p);
	if (cmd & AGENT_CMD_RELOAD) {
		uint32_t delay = __atomic_load_n(&p->copy_delay_us, __ATOMIC_RELAXED);

		if (p->n_banks > 1)
			for (uint32_t i = 0; i < p->n_banks; i++)
				agent_backend_set_delay(p->banks[i].be, delay);
		else
			agent_backend_set_delay(p->be, delay);
		pool_reload_policy(p);
		pool_log_stats(p);
	}
	if ((cmd & AGENT_CMD_STOP) && !p->stopping)
		return pool_stop_reading(p);
	return 0;
}

enum pool_event {
	EV_AGENT = 1,
	EV_COPIES,
	EV_TIMER,
	EV_CONTROL,
	EV_BANK0 = 16, /* + bank index: that bank's copies */
};

static int pool_epoll_add(struct agent_pool *p, int fd, enum pool_event ev)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u32 = ev};

	return epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

static int pool_loop(struct agent_pool *p)
{
	struct epoll_event evs[8];
	int ret;

	for (;;) {
		int n;

		if (p->stopping && pool_inflight(p) == 0)
			return 0;
		n = epoll_wait(p->epfd, evs, 8, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			uint64_t v;

			ret = 0;
			switch (evs[i].data.u32) {
			case EV_CONTROL:
				ret = pool_handle_commands(p);
				break;
			case EV_COPIES:
				ret = pool_collect(p);
				break;
			case EV_AGENT:
				if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
					agent_err(p->log, p->name, "the agent file failed");
					return -EIO;
				}
				ret = pool_read_requests(p);
				break;
			case EV_TIMER:
				if (read(p->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					return -errno;
				pool_tick(p);
				ret = pool_review_parked(p);
				if (!ret && p->n_banks <= 1 && (p->cpu.len || p->cpu_inflight))
					ret = pool_review_cpu(p);
				break;
			default:
				ret = pool_collect_bank(p, evs[i].data.u32 - EV_BANK0);
				break;
			}
			if (ret)
				return ret;
		}
		if (!p->stopping) {
			ret = pool_schedule(p);
			if (ret)
				return ret;
			pool_warm_step(p);
		}
		/* Parked prefetches are watched closely: a client may be waiting on one. */
		/* ... and so are CPU admissions: a client may ask for one (promotion). */
		ret = pool_set_timer(p, p->starved || p->parked.len || p->cpu.len || p->cpu_inflight
					    ? p->cfg->retry_ms
					    : p->cfg->tick_ms);
		if (ret)
			return ret;
	}
}

/* Adopts the bank the driver kept (warm restart) or makes and hands over a new one. */
static int pool_setup_bank(struct agent_pool *p)
{
	struct moecache_bank desc;
	int ret;

	ret = moecache_bank_get(p->mc, &desc);
	if (!ret) {
		ret = agent_backend_bank_adopt(p->be, &desc);
		if (!ret) {
			uint32_t resident = agent_slots_sync(&p->slots);

			agent_notice(p->log, p->name,
				     "warm restart: bank adopted, %u experts resident", resident);
			return 0;
		}
		close(desc.fd);
		agent_warn(p->log, p->name, "the pool's bank cannot be adopted (%s): replacing it",
			   strerror(-ret));
	} else if (ret != -ENODATA) {
		return ret;
	}
	ret = agent_backend_bank_create(p->be, &desc);
	if (ret)
		return ret;
	ret = moecache_bank_set(p->mc, &desc);
	if (ret)
		return ret;
	agent_slots_sync(&p->slots);
	agent_info(p->log, p->name, "new %s bank: %u slots of %llu bytes", p->cfg->backend,
		   p->info->n_slots, (unsigned long long)desc.slot_stride);
	return 0;
}

/*
 * The banks the map's bank table gives. One bank (or a driver without
 * banks) leaves n_banks 1: the one-bank path.
 */
static int pool_read_layout(struct agent_pool *p)
{
	const struct moecache_map_header *hdr = p->map->hdr;
	const struct moecache_map_bank *l;
	uint32_t next = 0;

	p->n_banks = 1;
	if (hdr->n_banks <= 1)
		return 0;
	if (hdr->n_banks > AGENT_TIERS_MAX || !hdr->bank_off) {
		agent_err(p->log, p->name, "%u banks: this agent drives at most %d", hdr->n_banks,
			  AGENT_TIERS_MAX);
		return -EOPNOTSUPP;
	}
	l = (const struct moecache_map_bank *)((const char *)hdr + hdr->bank_off);
	p->banks = calloc(hdr->n_banks, sizeof(*p->banks));
	if (!p->banks)
		return -ENOMEM;
	for (uint32_t i = 0; i < hdr->n_banks; i++) {
		p->banks[i].layout = l[i];
		/* The driver checked all this at create: a mismatch is a bug there. */
		if (l[i].slot_begin != next || !l[i].n_slots || l[i].n_slots > p->info->n_slots ||
		    (i && l[i].tier < l[i - 1].tier)) {
			agent_err(p->log, p->name, "bank %u: a layout the agent cannot use", i);
			return -EPROTO;
		}
		next += l[i].n_slots;
	}
	if (next != p->info->n_slots)
		return -EPROTO;
	p->n_banks = hdr->n_banks;
	return 0;
}

static const char *pool_backend_name(const struct agent_pool *p, uint32_t backend)
{
	/* MOECACHE_BACKEND_NONE: the layout leaves it to the agent. */
	if (backend == MOECACHE_BACKEND_NONE || !moecache_backend_name(backend))
		return p->cfg->backend;
	return moecache_backend_name(backend);
}

/* Adopts bank i as the driver kept it (warm restart), or makes and hands over a new one. */
static int pool_setup_one_bank(struct agent_pool *p, uint32_t i, bool *adopted)
{
	struct pool_bank *b = &p->banks[i];
	struct moecache_bank desc;
	int ret;

	*adopted = false;
	ret = moecache_bank_get_index(p->mc, i, &desc);
	if (!ret) {
		ret = agent_backend_bank_adopt(b->be, &desc);
		if (!ret) {
			*adopted = true;
			return 0;
		}
		close(desc.fd);
		agent_warn(p->log, p->name, "bank %u cannot be adopted (%s): replacing it", i,
			   strerror(-ret));
	} else if (ret != -ENODATA) {
		return ret;
	}
	ret = agent_backend_bank_create(b->be, &desc);
	if (ret)
		return ret;
	desc.index = i;
	return moecache_bank_set(p->mc, &desc);
}

/* Several banks: a policy, a slot view, a backend and a bank each, and the tiers over them. */
static int pool_setup_banks(struct agent_pool *p, const struct mc_gpu_params *gpu)
{
	struct agent_slots *views[AGENT_TIERS_MAX];
	uint32_t adopted = 0, resident;
	int ret;

	for (uint32_t i = 0; i < p->n_banks; i++) {
		struct pool_bank *b = &p->banks[i];
		const char *backend = pool_backend_name(p, b->layout.backend);
		struct agent_backend_config bc = {
		    .pool = p->name,
		    .n_slots = b->layout.n_slots,
		    .bank = i,
		    .device = b->layout.device,
		    /* a layout that names the backend names the device too */
		    .fixed_device = b->layout.backend != MOECACHE_BACKEND_NONE,
		    .expert_bytes = p->info->expert_bytes,
		    .copy_threads = p->cfg->copy_threads,
		    .copy_delay_us = p->cfg->copy_delay_us,
		    .gpu = gpu,
		};
		bool got;

		ret = pool_policy_create_for(p, p->policy_choice, &p->profile, b->layout.n_slots,
					     &b->policy);
		if (ret && strcmp(p->policy_choice, p->cfg->policy)) {
			snprintf(p->policy_choice, sizeof(p->policy_choice), "%s", p->cfg->policy);
			ret = pool_policy_create_for(p, p->policy_choice, &p->profile,
						     b->layout.n_slots, &b->policy);
		}
		if (ret)
			return ret;
		ret = agent_slots_init_bank(&b->slots, p->map, b->policy, b->layout.slot_begin,
					    b->layout.n_slots);
		if (ret)
			return ret;
		b->slots_ready = true;
		b->slots.hold_pending = true;
		views[i] = &b->slots;
		ret = agent_backend_create(backend, &bc, &b->be);
		if (ret) {
			agent_err(p->log, p->name, "bank %u: backend '%s': %s", i, backend,
				  strerror(-ret));
			return ret;
		}
		ret = pool_setup_one_bank(p, i, &got);
		if (ret) {
			agent_err(p->log, p->name, "bank %u: %s", i, strerror(-ret));
			return ret;
		}
		adopted += got;
		agent_info(p->log, p->name, "bank %u: tier %u, %s device %u, slots [%u, %u)%s", i,
			   b->layout.tier, backend, b->layout.device, b->layout.slot_begin,
			   b->layout.slot_begin + b->layout.n_slots, got ? ", adopted" : "");
	}
	ret = agent_tiers_init(&p->tiers, p->n_banks, views,
			       p->cfg->tier_static ? AGENT_TIERS_STATIC : AGENT_TIERS_DYNAMIC,
			       &pool_tier_ops, p);
	if (ret) {
		agent_err(p->log, p->name, "tiers over %u banks: %s", p->n_banks, strerror(-ret));
		return ret;
	}
	p->tiers_ready = true;
	resident = agent_tiers_sync(&p->tiers);
	if (adopted)
		agent_notice(p->log, p->name, "warm restart: %u banks adopted, %u experts resident",
			     adopted, resident);
	p->plans = calloc(POOL_MAX_PLANS, sizeof(*p->plans));
	p->slot_plan = calloc(p->info->n_slots, sizeof(*p->slot_plan));
	if (!p->plans || !p->slot_plan)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n_banks; i++)
		agent_slots_reset_access(&p->banks[i].slots);
	p->view = &p->banks[0].slots;
	p->policy = p->banks[0].policy;
	return 0;
}

static void pool_teardown_banks(struct agent_pool *p)
{
	for (uint32_t i = 0; p->banks && i < p->n_banks; i++) {
		struct pool_bank *b = &p->banks[i];

		agent_backend_destroy(b->be);
		if (b->slots_ready)
			agent_slots_destroy(&b->slots);
		moe_policy_destroy(b->policy);
	}
	if (p->tiers_ready)
		agent_tiers_destroy(&p->tiers);
	free(p->banks);
	free(p->plans);
	free(p->slot_plan);
	p->policy = NULL; /* bank 0's */
}

static int pool_setup(struct agent_pool *p)
{
	struct moe_profile fresh = {0};
	struct agent_backend_config bc;
	struct mc_gpu_params gpu;
	struct moecache_info info;
	void *host;
	int ret;

	ret = moecache_open(p->cfg->device, &p->mc);
	if (ret) {
		agent_err(p->log, p->name, "open %s: %s", p->cfg->device, strerror(-ret));
		return ret;
	}
	ret = moecache_get_info(p->mc, &info);
	if (!ret)
		ret = moecache_attach(p->mc, p->name, MOECACHE_ROLE_AGENT);
	if (ret) {
		agent_err(p->log, p->name, "attach as agent: %s", strerror(-ret));
		return ret;
	}
	p->info = moecache_pool(p->mc);
	p->map = moecache_map(p->mc);
	p->n_idx = p->info->n_layers * p->info->n_local;
	p->max_batch =
	    info.max_batch < POOL_COMPLETION_BATCH ? info.max_batch : POOL_COMPLETION_BATCH;
	ret = moecache_host_map(p->mc, false, &host, &p->host_len);
	if (ret) {
		agent_err(p->log, p->name, "map host pages: %s", strerror(-ret));
		return ret;
	}
	p->host = host;

	pool_load_profile(p);
	if (pool_installed_profile(p, &fresh) > 0) {
		moe_profile_free(&p->profile);
		p->profile = fresh;
	}
	pool_policy_choice(p, p->policy_choice, sizeof(p->policy_choice));
	ret = pool_read_layout(p);
	if (ret)
		return ret;
	gpu = (struct mc_gpu_params){
	    .devices = p->cfg->gpu_devices[0] ? p->cfg->gpu_devices : NULL,
	    .budget = p->gpu_budget,
	    .host_base = p->host,
	    .host_size = p->host_len,
	    .library = p->cfg->gpu_library[0] ? p->cfg->gpu_library : NULL,
	    .queues = p->cfg->gpu_queues,
	};
	if (p->n_banks > 1) {
		ret = pool_setup_banks(p, &gpu);
		if (ret)
			return ret;
		goto banks_ready;
	}
	ret = pool_policy_create(p, p->policy_choice, &p->profile, &p->policy);
	/* A bad installed policy does not keep the pool from being served. */
	if (ret && strcmp(p->policy_choice, p->cfg->policy)) {
		snprintf(p->policy_choice, sizeof(p->policy_choice), "%s", p->cfg->policy);
		ret = pool_policy_create(p, p->policy_choice, &p->profile, &p->policy);
	}
	if (ret)
		return ret;
	ret = agent_slots_init(&p->slots, p->map, p->policy);
	if (ret)
		return ret;
	p->view = &p->slots;
	bc = (struct agent_backend_config){
	    .pool = p->name,
	    .n_slots = p->info->n_slots,
	    .expert_bytes = p->info->expert_bytes,
	    .copy_threads = p->cfg->copy_threads,
	    .copy_delay_us = p->cfg->copy_delay_us,
	    .gpu = &gpu,
	    .publish = pool_publish,
	    .publish_ctx = p,
	};
	ret = agent_backend_create(p->cfg->backend, &bc, &p->be);
	if (ret) {
		agent_err(p->log, p->name, "backend '%s': %s", p->cfg->backend, strerror(-ret));
		return ret;
	}
	ret = pool_setup_bank(p);
	if (ret) {
		agent_err(p->log, p->name, "bank: %s", strerror(-ret));
		return ret;
	}
	/* Counts from before this agent are history, not traffic it has to learn from. */
	agent_slots_reset_access(&p->slots);
banks_ready:

	p->req_state = calloc(p->n_idx, sizeof(*p->req_state));
	p->park_access = calloc(p->n_idx, sizeof(*p->park_access));
	p->fills = calloc(p->max_batch, sizeof(*p->fills));
	p->done_copies = calloc(p->max_batch, sizeof(*p->done_copies));
	p->slot_fill = calloc(p->info->n_slots, sizeof(*p->slot_fill));
	if (!p->req_state || !p->park_access || !p->fills || !p->done_copies || !p->slot_fill)
		return -ENOMEM;
	ret = pool_warm_prepare(p);
	if (ret)
		return ret;

	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->epfd < 0 || p->timer_fd < 0)
		return -errno;
	ret = pool_epoll_add(p, moecache_fd(p->mc), EV_AGENT);
	if (!ret && p->n_banks <= 1)
		ret = pool_epoll_add(p, agent_backend_completion_fd(p->be), EV_COPIES);
	for (uint32_t i = 0; !ret && p->n_banks > 1 && i < p->n_banks; i++)
		ret = pool_epoll_add(p, agent_backend_completion_fd(p->banks[i].be),
				     (enum pool_event)(EV_BANK0 + i));
	if (!ret)
		ret = pool_epoll_add(p, p->timer_fd, EV_TIMER);
	if (!ret)
		ret = pool_epoll_add(p, p->ctl_fd, EV_CONTROL);
	if (!ret)
		ret = pool_set_timer(p, p->cfg->tick_ms);
	if (ret)
		return ret;
	agent_info(p->log, p->name,
		   "serving: %u layers x %u experts [%u, %u), %u slots in %u bank%s%s, policy "
		   "%s, %u copy threads",
		   p->info->n_layers, p->info->n_experts, p->info->expert_begin,
		   p->info->expert_end, p->info->n_slots, p->n_banks, p->n_banks > 1 ? "s" : "",
		   p->n_banks <= 1	 ? ""
		   : p->cfg->tier_static ? " (static placement)"
					 : " (dynamic placement)",
		   moe_policy_name(p->policy), p->cfg->copy_threads);
	return 0;
}

static void pool_teardown(struct agent_pool *p)
{
	/* The backend first: its threads may still be copying out of host pages. */
	if (p->n_banks > 1) {
		pool_teardown_banks(p);
	} else {
		agent_backend_destroy(p->be);
		if (p->policy)
			agent_slots_destroy(&p->slots);
		moe_policy_destroy(p->policy);
		free(p->banks); /* a bank table read and refused */
	}
	moe_profile_free(&p->profile);
	moecache_close(p->mc);
	free(p->req_state);
	free(p->park_access);
	free(p->demand.items);
	free(p->cpu.items);
	free(p->prefetch.items);
	free(p->parked.items);
	free(p->fills);
	free(p->done_copies);
	free(p->slot_fill);
	free(p->warm_list);
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->timer_fd >= 0)
		close(p->timer_fd);
}

static void *pool_thread(void *arg)
{
	struct agent_pool *p = arg;
	uint64_t one = 1;
	int ret;

	ret = pool_setup(p);
	if (!ret) {
		/* Tells the main thread, which reports readiness to the service manager. */
		__atomic_store_n(&p->serving, 1, __ATOMIC_RELEASE);
		if (write(p->exit_fd, &one, sizeof(one)) < 0)
			agent_err(p->log, p->name, "cannot tell the main thread: %s",
				  strerror(errno));
		ret = pool_loop(p);
	}
	if (ret)
		agent_err(p->log, p->name, "stopped: %s", strerror(-ret));
	if (p->policy) {
		pool_save_profile(p);
		pool_log_stats(p);
	}
	pool_teardown(p);
	if (!ret)
		agent_info(p->log, p->name, "stopped cleanly");
	p->status = ret ? 1 : 0;
	__atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
	if (write(p->exit_fd, &one, sizeof(one)) < 0)
		agent_err(p->log, p->name, "cannot tell the main thread: %s", strerror(errno));
	return NULL;
}

int agent_pool_start(const struct agent_config *cfg, struct agent_log *log, const char *name,
		     struct mc_gpu_budget *gpu_budget, int exit_fd, struct agent_pool **out)
{
	struct agent_pool *p;
	int ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cfg = cfg;
	p->log = log;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->exit_fd = exit_fd;
	p->gpu_budget = gpu_budget;
	p->epfd = p->timer_fd = -1;
	p->view = &p->slots;
	p->copy_delay_us = cfg->copy_delay_us;
	p->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->ctl_fd < 0) {
		ret = -errno;
		free(p);
		return ret;
	}
	ret = -pthread_create(&p->thread, NULL, pool_thread, p);
	if (ret) {
		close(p->ctl_fd);
		free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void agent_pool_command(struct agent_pool *p, uint32_t cmd)
{
	uint64_t one = 1;

	__atomic_fetch_or(&p->cmd, cmd, __ATOMIC_ACQ_REL);
	if (write(p->ctl_fd, &one, sizeof(one)) < 0)
		return; /* only on counter overflow: the pool wakes anyway */
}

void agent_pool_set_copy_delay(struct agent_pool *p, uint32_t copy_delay_us)
{
	__atomic_store_n(&p->copy_delay_us, copy_delay_us, __ATOMIC_RELAXED);
}

bool agent_pool_done(const struct agent_pool *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE);
}

bool agent_pool_serving(const struct agent_pool *p)
{
	return __atomic_load_n(&p->serving, __ATOMIC_ACQUIRE);
}

int agent_pool_join(struct agent_pool *p)
{
	int status;

	pthread_join(p->thread, NULL);
	status = p->status;
	close(p->ctl_fd);
	free(p);
	return status;
}
