// SPDX-License-Identifier: GPL-2.0
/*
 * moecache clients: pins, requests, ACQUIRE, RELEASE, REPORT and PREFETCH.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/ktime.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "core.h"

/* ---- pins ---- */

/*
 * A file's pins count against its tenant's share by slot, not by pin:
 * n_pinned_slots counts the slots on which the file holds one or more.
 */
static void file_slot_pinned(struct moecache_file *mf, u32 slot)
{
	__set_bit(slot, mf->pinned);
	mf->n_pinned_slots++;
	if (mf->tenant)
		mf->tenant->pinned_slots++;
}

static void file_slots_unpinned(struct moecache_file *mf, u32 n)
{
	mf->n_pinned_slots -= n;
	if (mf->tenant)
		mf->tenant->pinned_slots -= n;
}

/*
 * May mf's tenant hold pins on add more slots once drop of them are let
 * go? Files exempt from the share (no tenant) always may.
 */
static bool share_permits(struct moecache_pool *pool, struct moecache_file *mf,
			  u32 add, u32 drop)
{
	lockdep_assert_held(&pool->lock);
	if (!mf->tenant)
		return true;
	return (u64)mf->tenant->pinned_slots - drop + add <=
	       pool_pin_share(pool);
}

static void pin_slot(struct moecache_pool *pool, struct moecache_file *mf,
		     u32 slot, u64 clock)
{
	lockdep_assert_held(&pool->lock);
	if (!mf->pins[slot]++)
		file_slot_pinned(mf, slot);
	mf->n_pins++;
	if (pool->pins[slot] == 0)
		pool->n_pinned_slots++;
	WRITE_ONCE(pool->pins[slot], pool->pins[slot] + 1);
	WRITE_ONCE(pool->last_use[slot], clock);
	pool->n_pins++;
}

/*
 * Drops n pins on slot, which the caller has taken off its file's count.
 * The pool's count is the sum of the files' (each bounded by
 * max_file_pins, the files by max_pool_files), so it cannot be short.
 */
static void unpin_slot(struct moecache_pool *pool, u32 slot, u32 n)
{
	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(pool->pins[slot] < n))
		return;
	WRITE_ONCE(pool->pins[slot], pool->pins[slot] - n);
	if (pool->pins[slot] == 0)
		pool->n_pinned_slots--;
	pool->n_pins -= n;
}

/* ---- requests ---- */

/* Queues a request for idx on behalf of mf; true if it was newly queued. */
static bool request_add(struct moecache_pool *pool, struct moecache_file *mf,
			u32 idx, u8 flag)
{
	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(pool->estate[idx] == ES_RESIDENT))
		return false;
	if (mf && !__test_and_set_bit(idx, mf->asked)) {
		pool->n_askers[idx]++;
		if (!mf->n_asked++)
			list_add_tail(&mf->ask_node, &pool->asking);
	}
	/* The flags of every ask, DEMAND winning over CPU (uapi). */
	pool->req_flags[idx] |= flag;
	if (pool->req_flags[idx] & MOECACHE_REQ_DEMAND)
		pool->req_flags[idx] &= ~MOECACHE_REQ_CPU;
	if (pool->estate[idx] != ES_IDLE)
		return false;
	pool->estate[idx] = ES_QUEUED;
	list_add_tail(&pool->qnode[idx], &pool->queue);
	/* Read without the lock by poll() and the agent's read(). */
	WRITE_ONCE(pool->n_queued, pool->n_queued + 1);
	queue_depth_publish(pool);
	return true;
}

void request_dequeue(struct moecache_pool *pool, u32 idx)
{
	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(pool->estate[idx] != ES_QUEUED);
	list_del_init(&pool->qnode[idx]);
	WRITE_ONCE(pool->n_queued, pool->n_queued - 1);
	queue_depth_publish(pool);
}

/*
 * The request for idx is answered: nobody is asking any more. Only the
 * files with an ask out are looked at, and only until every asker of idx
 * is found: the cost does not grow with the idle files of the pool.
 */
void request_done(struct moecache_pool *pool, u32 idx)
{
	struct moecache_file *f, *next;
	u32 left = pool->n_askers[idx];

	lockdep_assert_held(&pool->lock);
	list_for_each_entry_safe(f, next, &pool->asking, ask_node) {
		if (!left)
			break;
		if (!__test_and_clear_bit(idx, f->asked))
			continue;
		left--;
		if (!--f->n_asked)
			list_del_init(&f->ask_node);
	}
	WARN_ON_ONCE(left);
	pool->n_askers[idx] = 0;
	pool->req_flags[idx] = 0;
}

/* An expert the agent lost: queue it again if a client still asks. */
void request_requeue(struct moecache_pool *pool, u32 idx)
{
	lockdep_assert_held(&pool->lock);
	pool->estate[idx] = ES_IDLE;
	if (pool->n_askers[idx]) {
		pool->estate[idx] = ES_QUEUED;
		list_add_tail(&pool->qnode[idx], &pool->queue);
		WRITE_ONCE(pool->n_queued, pool->n_queued + 1);
		queue_depth_publish(pool);
	} else {
		pool->req_flags[idx] = 0;
	}
}

/*
 * All of a slot's pins at once (a file may hold max_file_pins), and only
 * the slots the file pins: a walk over every slot of the pool, under its
 * lock, was one a client could make at will with a single pin on the last
 * slot (REL_ALL in a loop).
 */
static void drop_all_pins(struct moecache_pool *pool, struct moecache_file *mf)
{
	u32 slot;

	lockdep_assert_held(&pool->lock);
	for_each_set_bit(slot, mf->pinned, pool->n_slots) {
		__clear_bit(slot, mf->pinned);
		if (WARN_ON_ONCE(!mf->pins[slot]))
			continue;
		unpin_slot(pool, slot, mf->pins[slot]);
		mf->n_pins -= mf->pins[slot];
		mf->pins[slot] = 0;
	}
	WARN_ON_ONCE(mf->n_pins);
	file_slots_unpinned(mf, mf->n_pinned_slots);
}

void client_detach(struct moecache_pool *pool, struct moecache_file *mf)
{
	u32 idx;

	lockdep_assert_held(&pool->lock);
	drop_all_pins(pool, mf);
	for_each_set_bit(idx, mf->asked, pool->n_idx) {
		if (WARN_ON_ONCE(!pool->n_askers[idx]))
			continue;
		if (--pool->n_askers[idx] || pool->estate[idx] != ES_QUEUED)
			continue;
		request_dequeue(pool, idx);
		pool->estate[idx] = ES_IDLE;
		pool->req_flags[idx] = 0;
	}
	list_del_init(&mf->ask_node);
	mf->n_asked = 0;
	pool->n_clients--;
}

/* A list argument: small ones live on the caller's stack. */
struct id_list {
	u32 *ids;
	u32 stack[MOECACHE_STACK_BATCH];
};

static void id_list_free(struct id_list *l)
{
	if (l->ids != l->stack)
		kvfree(l->ids);
	l->ids = l->stack;
}

static int id_list_copy(struct id_list *l, u64 uptr, u32 count)
{
	l->ids = l->stack;
	if (!count)
		return -EINVAL;
	if (count > max_batch)
		return -E2BIG;
	/*
	 * Charged to the caller: an ACQUIRE's lists live as long as its
	 * WAIT, which may have no time limit.
	 */
	if (count > MOECACHE_STACK_BATCH) {
		l->ids = kvmalloc_array(count, sizeof(u32), GFP_KERNEL_ACCOUNT);
		if (!l->ids) {
			l->ids = l->stack;
			return -ENOMEM;
		}
	}
	if (copy_from_user(l->ids, u64_to_user_ptr(uptr),
			   (size_t)count * sizeof(u32))) {
		id_list_free(l);
		return -EFAULT;
	}
	return 0;
}

/* Turns global expert ids of one layer into idx, refusing repeats. */
static int experts_to_idx(struct moecache_pool *pool, u32 layer, u32 *ids,
			  u32 count)
{
	u32 i, j;

	if (layer >= pool->n_layers)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		if (ids[i] < pool->expert_begin || ids[i] >= pool->expert_end)
			return -EINVAL;
		ids[i] = pool_idx(pool, layer, ids[i]);
	}
	/* Long lists are checked by experts_unique() instead. */
	for (i = 1; i < count && count <= 64; i++)
		for (j = 0; j < i; j++)
			if (ids[i] == ids[j])
				return -EINVAL;
	return 0;
}

/* Refuses repeats in long lists with a bitmap over the pool's idx space. */
static int experts_unique(struct moecache_pool *pool, const u32 *idx,
			  u32 count)
{
	unsigned long *seen;
	u32 i;
	int ret = 0;

	if (count <= 64)
		return 0;
	seen = bitmap_zalloc(pool->n_idx, GFP_KERNEL);
	if (!seen)
		return -ENOMEM;
	for (i = 0; i < count && !ret; i++)
		if (__test_and_set_bit(idx[i], seen))
			ret = -EINVAL;
	bitmap_free(seen);
	return ret;
}

struct acquire_ctx {
	struct moecache_acquire req;
	struct id_list idx;
	struct id_list slots;
	u32 n_pinned;
	u32 fail_snap;
	struct list_head wait_node;	/* pool->waiters, while it waits */
	struct wait_queue_entry wq_entry;	/* on pool->client_wq */
	bool wake;		/* marked by client_wake_mark() */
	u32 hint;		/* where client_wake_mark() last found a miss */
};

static void acquire_pin(struct moecache_pool *pool, struct moecache_file *mf,
			struct acquire_ctx *ac, u32 i)
{
	ac->slots.ids[i] = pool->map[ac->idx.ids[i]];
	pin_slot(pool, mf, ac->slots.ids[i], pool->hdr->clock);
	ac->n_pinned++;
}

/*
 * Gives back the pins this call took. Pins belong to the file, not to the
 * call: while a WAIT sleeps, another thread of the same file may RELEASE
 * (or REL_ALL) the pins it holds. Only what the file still holds is
 * dropped, so the pool's count stays the sum of the files' and another
 * file's pin on the slot is never taken.
 */
static void acquire_unpin(struct moecache_pool *pool, struct moecache_file *mf,
			  struct acquire_ctx *ac)
{
	u32 i, slot;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < ac->req.count; i++) {
		slot = ac->slots.ids[i];
		if (slot == MOECACHE_NONE)
			continue;
		ac->slots.ids[i] = MOECACHE_NONE;
		if (!mf->pins[slot])
			continue;
		if (!--mf->pins[slot]) {
			__clear_bit(slot, mf->pinned);
			file_slots_unpinned(mf, 1);
		}
		mf->n_pins--;
		unpin_slot(pool, slot, 1);
	}
	ac->n_pinned = 0;
}

static bool acquire_is_head(struct moecache_pool *pool, struct acquire_ctx *ac)
{
	lockdep_assert_held(&pool->lock);
	return list_first_entry(&pool->waiters, struct acquire_ctx,
				wait_node) == ac;
}

/*
 * The slots an ACQUIRE would add to its file's pinned ones: those of the
 * resident experts it holds no pin on, and with WAIT one per other expert.
 */
static u32 acquire_adds(struct moecache_pool *pool, struct moecache_file *mf,
			const struct acquire_ctx *ac)
{
	u32 i, idx, n = 0;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < ac->req.count; i++) {
		idx = ac->idx.ids[i];
		if (pool->estate[idx] == ES_RESIDENT)
			n += !mf->pins[pool->map[idx]];
		else
			n += !!(ac->req.flags & MOECACHE_ACQ_WAIT);
	}
	return n;
}

/*
 * Pins what became resident; > 0 when all are pinned, < 0 to give up.
 * Only the oldest waiter of the pool pins experts one by one as they come;
 * the others pin all of theirs at once, when all are resident. A pin that
 * would take the tenant past its share gives up (-EDQUOT): its other
 * files took the room meanwhile.
 */
static int acquire_progress(struct moecache_pool *pool,
			    struct moecache_file *mf, struct acquire_ctx *ac)
{
	bool head, wake_agent = false;
	u32 i, idx, missing = 0;
	int ret = 0;

	spin_lock(&pool->lock);
	head = acquire_is_head(pool, ac);
	for (i = 0; i < ac->req.count; i++) {
		if (ac->slots.ids[i] != MOECACHE_NONE)
			continue;
		idx = ac->idx.ids[i];
		if (pool->estate[idx] == ES_RESIDENT) {
			/* Given up: pins nothing more, undone by the caller. */
			if (!head || ret)
				continue;
			if (!mf->pins[pool->map[idx]] &&
			    !share_permits(pool, mf, 1, 0))
				ret = -EDQUOT;
			else
				acquire_pin(pool, mf, ac, i);
			continue;
		}
		missing++;
		if ((s32)(pool->fail_gen[idx] - ac->fail_snap) > 0) {
			ret = -EIO;
		} else if (pool->estate[idx] == ES_IDLE) {
			/* Committed and evicted again before we woke. */
			wake_agent |= request_add(pool, mf, idx,
						  MOECACHE_REQ_DEMAND);
		}
	}
	if (!ret && !missing && !head) {
		/* It holds no pin yet: only the head pins as it goes. */
		if (!share_permits(pool, mf, acquire_adds(pool, mf, ac), 0))
			ret = -EDQUOT;
		for (i = 0; i < ac->req.count && !ret; i++)
			if (ac->slots.ids[i] == MOECACHE_NONE)
				acquire_pin(pool, mf, ac, i);
	}
	if (!ret && missing && !pool->agent &&
	    !(ac->req.flags & MOECACHE_ACQ_KEEP_WAITING))
		ret = -EPIPE;
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (ret)
		return ret;
	return ac->n_pinned == ac->req.count;
}

/*
 * A COMMIT looks at every WAIT asleep on the pool under its lock, and an
 * ABORT or an agent change wakes them all, in the agent's context: a
 * tenant held to the pin share has at most max_user_waits WAITs in
 * progress, or one client could put any number of threads to sleep on
 * one file and slow every answered miss of every tenant. False if the
 * tenant has them all already.
 */
static bool tenant_wait_begin(struct moecache_file *mf)
{
	if (!mf->tenant)
		return true;
	if (mf->tenant->n_waits >= READ_ONCE(max_user_waits))
		return false;
	mf->tenant->n_waits++;
	return true;
}

static void tenant_wait_end(struct moecache_file *mf)
{
	if (mf->tenant)
		mf->tenant->n_waits--;
}

static void acquire_undo(struct moecache_pool *pool, struct moecache_file *mf,
			 struct acquire_ctx *ac)
{
	spin_lock(&pool->lock);
	acquire_unpin(pool, mf, ac);
	spin_unlock(&pool->lock);
}

/*
 * May a WAIT that is not the oldest progress: are all of its experts
 * resident, or has one gone idle (committed and evicted since it asked:
 * it must ask again)? The scan starts where the last one stopped, at an
 * expert still missing then, so that a WAIT for an expert nobody fills
 * costs a COMMIT one look.
 */
static bool acquire_may_progress(struct moecache_pool *pool,
				 struct acquire_ctx *ac)
{
	u32 k, i = ac->hint, n = ac->req.count;
	u8 st;

	lockdep_assert_held(&pool->lock);
	for (k = 0; k < n; k++, i = i + 1 == n ? 0 : i + 1) {
		st = pool->estate[ac->idx.ids[i]];
		if (st == ES_IDLE)
			return true;
		if (st != ES_RESIDENT) {
			ac->hint = i;
			return false;
		}
	}
	return true;
}

/*
 * May the oldest WAIT progress: is one of the experts it has not pinned
 * resident (it pins them as they come), or idle (to ask for again)?
 */
static bool acquire_head_may_progress(struct moecache_pool *pool,
				      struct acquire_ctx *ac)
{
	u32 i;
	u8 st;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < ac->req.count; i++) {
		if (ac->slots.ids[i] != MOECACHE_NONE)
			continue;
		st = pool->estate[ac->idx.ids[i]];
		if (st == ES_IDLE || st == ES_RESIDENT)
			return true;
	}
	return false;
}

/*
 * After a COMMIT, under pool->lock: marks the WAITs that its wake-up,
 * client_wake_marked(), wakes; the others sleep on. The oldest is marked
 * if it may pin one more expert, every other one if it may progress.
 * Waking them all made every answered miss pay for each WAIT asleep on
 * the pool, whoever it waited for. Returns whether any is marked.
 *
 * No wake-up is lost: a WAIT is on client_wq before it looks at the pool
 * under pool->lock, and each wake-up is followed by another look; a
 * COMMIT after its last look marks it here, under that lock, if that
 * COMMIT lets it progress.
 */
bool client_wake_mark(struct moecache_pool *pool)
{
	struct acquire_ctx *ac;
	bool any = false, head = true;

	lockdep_assert_held(&pool->lock);
	list_for_each_entry(ac, &pool->waiters, wait_node) {
		if (head ? acquire_head_may_progress(pool, ac) :
			   acquire_may_progress(pool, ac)) {
			WRITE_ONCE(ac->wake, true);
			any = true;
		}
		head = false;
	}
	return any;
}

void client_wake_marked(struct moecache_pool *pool)
{
	/* Any key: acquire_wake() then wakes the marked WAITs only. */
	__wake_up(&pool->client_wq, TASK_NORMAL, 0, pool);
}

/*
 * The wake function of a sleeping WAIT: every wake-up but a COMMIT's
 * (an abort, an agent change, an older WAIT leaving) wakes it; a COMMIT's
 * only if client_wake_mark() marked it.
 */
static int acquire_wake(struct wait_queue_entry *wq_entry, unsigned int mode,
			int sync, void *key)
{
	struct acquire_ctx *ac = container_of(wq_entry, struct acquire_ctx,
					      wq_entry);

	if (key) {
		if (!READ_ONCE(ac->wake))
			return 0;
		WRITE_ONCE(ac->wake, false);
	}
	return autoremove_wake_function(wq_entry, mode, sync, key);
}

/*
 * Sleeps until every expert is pinned. Waiters queue in pool->waiters;
 * the oldest keeps the pins of what is resident while it sleeps, so the
 * agent cannot take those slots back and it completes (it asks for no
 * more than n_slots). The others hold no pin while they sleep: two WAITs
 * that together need more than the bank never hold each other's slots.
 */
static int acquire_wait(struct moecache_pool *pool, struct moecache_file *mf,
			struct acquire_ctx *ac)
{
	long left = ac->req.timeout_ms ? msecs_to_jiffies(ac->req.timeout_ms) :
					 MAX_SCHEDULE_TIMEOUT;
	ktime_t start = ktime_get();
	bool wake_next;
	long intr;
	int done;

	init_wait(&ac->wq_entry);
	ac->wq_entry.func = acquire_wake;
	spin_lock(&pool->lock);
	ac->wake = false;
	ac->hint = 0;
	list_add_tail(&ac->wait_node, &pool->waiters);
	if (!acquire_is_head(pool, ac))
		acquire_unpin(pool, mf, ac);
	spin_unlock(&pool->lock);

	/* As wait_event_interruptible_timeout(), with acquire_wake(). */
	for (;;) {
		intr = prepare_to_wait_event(&pool->client_wq, &ac->wq_entry,
					     TASK_INTERRUPTIBLE);
		done = acquire_progress(pool, mf, ac);
		if (done)
			break;
		if (intr) {
			done = -EINTR;
			break;
		}
		if (!left) {
			done = -ETIMEDOUT;
			break;
		}
		left = schedule_timeout(left);
	}
	finish_wait(&pool->client_wq, &ac->wq_entry);

	spin_lock(&pool->lock);
	tenant_wait_end(mf);
	wake_next = acquire_is_head(pool, ac);
	list_del(&ac->wait_node);
	wake_next &= !list_empty(&pool->waiters);
	if (done > 0) {
		u64 ns = ktime_to_ns(ktime_sub(ktime_get(), start));

		count_wait(&pool->total, ns);
		count_wait(layer_ctr(pool, ac->idx.ids[0]), ns);
	}
	spin_unlock(&pool->lock);
	/* The next oldest waiter may pin as it goes now. */
	if (wake_next)
		wake_up_all(&pool->client_wq);
	return done > 0 ? 0 : done;
}

/*
 * Counts misses per second; returns the misses counted so far in this
 * second when they just crossed miss_storm_per_sec, else 0.
 */
static u64 storm_check(struct moecache_pool *pool, u32 misses)
{
	unsigned int limit = READ_ONCE(miss_storm_per_sec);

	lockdep_assert_held(&pool->lock);
	if (time_after(jiffies, pool->storm_start + HZ)) {
		pool->storm_start = jiffies;
		pool->storm_misses = 0;
	}
	if (!limit || !misses)
		return 0;
	pool->storm_misses += misses;
	if (pool->storm_misses >= limit && pool->storm_misses - misses < limit)
		return pool->storm_misses;
	return 0;
}

/*
 * Takes one pin of mf per listed slot off the file's per-slot counts: all
 * of them, or none (-EINVAL). *freed gets the slots left with none.
 * release_commit() finishes the release, release_untake() undoes it.
 */
static int release_take(struct moecache_pool *pool, struct moecache_file *mf,
			const u32 *slots, u32 count, u32 *freed)
{
	u32 i, j;

	lockdep_assert_held(&pool->lock);
	*freed = 0;
	for (i = 0; i < count; i++) {
		if (slots[i] >= pool->n_slots || !mf->pins[slots[i]]) {
			/* Listed more often than pinned: put back, refuse. */
			for (j = 0; j < i; j++)
				mf->pins[slots[j]]++;
			return -EINVAL;
		}
		if (!--mf->pins[slots[i]])
			(*freed)++;
	}
	return 0;
}

static void release_untake(struct moecache_file *mf, const u32 *slots,
			   u32 count)
{
	u32 i;

	for (i = 0; i < count; i++)
		mf->pins[slots[i]]++;
}

static void release_commit(struct moecache_pool *pool,
			   struct moecache_file *mf, const u32 *slots,
			   u32 count, u32 freed)
{
	u32 i;

	lockdep_assert_held(&pool->lock);
	mf->n_pins -= count;
	file_slots_unpinned(mf, freed);
	for (i = 0; i < count; i++) {
		if (!mf->pins[slots[i]])
			__clear_bit(slots[i], mf->pinned);
		unpin_slot(pool, slots[i], 1);
	}
}

/* Drops one pin of mf per listed slot: all of them, or none (-EINVAL). */
static int release_locked(struct moecache_pool *pool, struct moecache_file *mf,
			  const u32 *slots, u32 count)
{
	u32 freed;
	int ret;

	ret = release_take(pool, mf, slots, count, &freed);
	if (!ret)
		release_commit(pool, mf, slots, count, freed);
	return ret;
}

static int release_list(struct moecache_pool *pool, struct moecache_file *mf,
			const u32 *slots, u32 count)
{
	int ret;

	spin_lock(&pool->lock);
	ret = release_locked(pool, mf, slots, count);
	spin_unlock(&pool->lock);
	return ret;
}

/*
 * ACQUIRE, after dropping the pins listed in rel (ACQUIRE_RELEASE): the
 * release is checked with everything else and done before any pin is
 * taken, and stays done if a WAIT then fails.
 */
static long do_acquire(struct moecache_pool *pool, struct moecache_file *mf,
		       void __user *argp, const struct moecache_acquire *req,
		       const u32 *rel, u32 rel_count)
{
	struct acquire_ctx ac;
	bool wake_agent = false;
	u32 i, idx, slot, misses = 0, prefetch_hits = 0, freed = 0;
	u64 storm;
	u64 clock;
	int ret;

	ac.req = *req;
	if ((ac.req.flags & ~MOECACHE_ACQ_FLAGS_ALL) || ac.req.reserved ||
	    ((ac.req.flags & MOECACHE_ACQ_KEEP_WAITING) &&
	     !(ac.req.flags & MOECACHE_ACQ_WAIT)) ||
	    ((ac.req.flags & MOECACHE_ACQ_NO_QUEUE) &&
	     (ac.req.flags & MOECACHE_ACQ_WAIT)) ||
	    ((ac.req.flags & MOECACHE_ACQ_CPU) &&
	     (ac.req.flags & MOECACHE_ACQ_WAIT)))
		return -EINVAL;
	/* A WAIT that the bank cannot hold at once would never end. */
	if ((ac.req.flags & MOECACHE_ACQ_WAIT) && ac.req.count > pool->n_slots)
		return -EINVAL;
	ret = id_list_copy(&ac.idx, ac.req.experts, ac.req.count);
	if (ret)
		return ret;
	ret = experts_to_idx(pool, ac.req.layer, ac.idx.ids, ac.req.count);
	if (!ret)
		ret = experts_unique(pool, ac.idx.ids, ac.req.count);
	if (ret)
		goto out_free_idx;
	ac.slots.ids = ac.slots.stack;
	if (ac.req.count > MOECACHE_STACK_BATCH) {
		ac.slots.ids = kvmalloc_array(ac.req.count, sizeof(u32),
					      GFP_KERNEL_ACCOUNT);
		if (!ac.slots.ids) {
			ret = -ENOMEM;
			goto out_free_idx;
		}
	}
	ac.n_pinned = 0;
	/* An unwritable result fails here, before anything changes. */
	if (copy_to_user(argp, &ac.req, sizeof(ac.req)) ||
	    clear_user(u64_to_user_ptr(ac.req.slots),
		       (size_t)ac.req.count * sizeof(u32))) {
		ret = -EFAULT;
		goto out_free_slots;
	}

	spin_lock(&pool->lock);
	/* Every expert may end pinned, each once: bounded up front. */
	if ((u64)mf->n_pins + ac.req.count >
	    (u64)min_t(u32, READ_ONCE(max_file_pins), MOECACHE_FILE_PINS_CAP) +
	    rel_count) {
		spin_unlock(&pool->lock);
		ret = -EOVERFLOW;
		goto out_free_slots;
	}
	if (rel_count) {
		ret = release_take(pool, mf, rel, rel_count, &freed);
		if (ret) {
			spin_unlock(&pool->lock);
			goto out_free_slots;
		}
	}
	/* The tenant's share, net of the release: refused whole. */
	if (!share_permits(pool, mf, acquire_adds(pool, mf, &ac), freed)) {
		release_untake(mf, rel, rel_count);
		spin_unlock(&pool->lock);
		ret = -EDQUOT;
		goto out_free_slots;
	}
	if ((ac.req.flags & MOECACHE_ACQ_WAIT) && !tenant_wait_begin(mf)) {
		release_untake(mf, rel, rel_count);
		spin_unlock(&pool->lock);
		ret = -EAGAIN;
		goto out_free_slots;
	}
	if (rel_count)
		release_commit(pool, mf, rel, rel_count, freed);
	ac.fail_snap = pool->fail_counter;
	clock = pool->hdr->clock + 1;
	WRITE_ONCE(pool->hdr->clock, clock);
	for (i = 0; i < ac.req.count; i++) {
		idx = ac.idx.ids[i];
		WRITE_ONCE(pool->access[idx], pool->access[idx] + 1);
		if (pool->estate[idx] == ES_RESIDENT) {
			slot = pool->map[idx];
			pin_slot(pool, mf, slot, clock);
			bank_count(pool, slot, C_HITS, 1);
			if (pool->slot_flags[slot] & SF_PREFETCHED) {
				pool->slot_flags[slot] &= ~SF_PREFETCHED;
				bank_count(pool, slot, C_PREFETCH_HITS, 1);
				prefetch_hits++;
			}
			ac.slots.ids[i] = slot;
			ac.n_pinned++;
			continue;
		}
		ac.slots.ids[i] = MOECACHE_NONE;
		misses++;
		if (!(ac.req.flags & MOECACHE_ACQ_NO_QUEUE))
			wake_agent |= request_add(pool, mf, idx,
						  (ac.req.flags & MOECACHE_ACQ_CPU) ?
						  MOECACHE_REQ_CPU :
						  MOECACHE_REQ_DEMAND);
	}
	/* One layer per call: count once for the pool and the layer. */
	layer_count(pool, ac.req.layer, C_HITS, ac.n_pinned);
	layer_count(pool, ac.req.layer, C_MISSES, misses);
	layer_count(pool, ac.req.layer, C_PREFETCH_HITS, prefetch_hits);
	storm = storm_check(pool, misses);
	/* Nothing to wait for: acquire_wait() is not called to end it. */
	if ((ac.req.flags & MOECACHE_ACQ_WAIT) && !misses)
		tenant_wait_end(mf);
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (storm)
		pool_event(pool, MOECACHE_EV_MISS_STORM,
			   min_t(u64, storm, U32_MAX), 0);

	ac.req.n_hits = ac.n_pinned;
	if (misses && (ac.req.flags & MOECACHE_ACQ_WAIT)) {
		ret = acquire_wait(pool, mf, &ac);
		if (ret) {
			acquire_undo(pool, mf, &ac);
			goto out_free_slots;
		}
	}
	ac.req.n_pinned = ac.n_pinned;
	if (copy_to_user(u64_to_user_ptr(ac.req.slots), ac.slots.ids,
			 (size_t)ac.req.count * sizeof(u32)) ||
	    copy_to_user(argp, &ac.req, sizeof(ac.req))) {
		acquire_undo(pool, mf, &ac);
		ret = -EFAULT;
	}
out_free_slots:
	id_list_free(&ac.slots);
out_free_idx:
	id_list_free(&ac.idx);
	return ret;
}

long ioc_acquire(struct moecache_pool *pool, struct moecache_file *mf,
		 void __user *argp)
{
	struct moecache_acquire req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	return do_acquire(pool, mf, argp, &req, NULL, 0);
}

long ioc_acquire_release(struct moecache_pool *pool,
			 struct moecache_file *mf, void __user *argp)
{
	struct moecache_acquire_release req;
	struct id_list rel = { .ids = rel.stack };
	long ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags)
		return -EINVAL;
	if (req.release_count) {
		ret = id_list_copy(&rel, req.release_slots, req.release_count);
		if (ret)
			return ret;
	} else if (req.release_slots) {
		return -EINVAL;
	}
	/* The acquire half is the struct's first member. */
	ret = do_acquire(pool, mf, argp, &req.acquire, rel.ids,
			 req.release_count);
	id_list_free(&rel);
	return ret;
}

int check_target(struct moecache_pool *pool, u32 layer, u32 expert,
		 u32 *idx)
{
	if (layer >= pool->n_layers || expert < pool->expert_begin ||
	    expert >= pool->expert_end)
		return -EINVAL;
	*idx = pool_idx(pool, layer, expert);
	return 0;
}

/*
 * Hits a fast-pinning client served itself, counted as ACQUIRE would have:
 * a run of entries of one layer is one acquire (one clock tick).
 */
long ioc_report(struct moecache_pool *pool, struct moecache_file *mf,
		void __user *argp)
{
	struct moecache_access stack[MOECACHE_STACK_REPORT], *acc = stack;
	struct moecache_report req;
	u32 i, idx, slot;
	u64 clock;
	long ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags || !req.count)
		return -EINVAL;
	if (req.count > max_batch)
		return -E2BIG;
	if (req.count > MOECACHE_STACK_REPORT) {
		acc = memdup_user(u64_to_user_ptr(req.accesses),
				  (size_t)req.count * sizeof(*acc));
		if (IS_ERR(acc))
			return PTR_ERR(acc);
	} else if (copy_from_user(stack, u64_to_user_ptr(req.accesses),
				  (size_t)req.count * sizeof(*acc))) {
		return -EFAULT;
	}
	for (i = 0; i < req.count; i++) {
		ret = check_target(pool, acc[i].layer, acc[i].expert, &idx);
		if (ret)
			goto out_free;
	}

	spin_lock(&pool->lock);
	clock = pool->hdr->clock;
	for (i = 0; i < req.count; i++) {
		if (!i || acc[i].layer != acc[i - 1].layer)
			WRITE_ONCE(pool->hdr->clock, ++clock);
		idx = pool_idx(pool, acc[i].layer, acc[i].expert);
		WRITE_ONCE(pool->access[idx], pool->access[idx] + 1);
		layer_count(pool, acc[i].layer, C_HITS, 1);
		/* Evicted since it was taken: a hit all the same, no stamp. */
		if (pool->estate[idx] != ES_RESIDENT)
			continue;
		slot = pool->map[idx];
		WRITE_ONCE(pool->last_use[slot], clock);
		bank_count(pool, slot, C_HITS, 1);
		if (pool->slot_flags[slot] & SF_PREFETCHED) {
			pool->slot_flags[slot] &= ~SF_PREFETCHED;
			layer_count(pool, acc[i].layer, C_PREFETCH_HITS, 1);
			bank_count(pool, slot, C_PREFETCH_HITS, 1);
		}
	}
	spin_unlock(&pool->lock);
out_free:
	if (acc != stack)
		kfree(acc);
	return ret;
}

long ioc_release(struct moecache_pool *pool, struct moecache_file *mf,
		 void __user *argp)
{
	struct moecache_release req;
	struct id_list slots;
	int ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags & ~MOECACHE_REL_ALL)
		return -EINVAL;
	if (req.flags & MOECACHE_REL_ALL) {
		if (req.count || req.slots)
			return -EINVAL;
		spin_lock(&pool->lock);
		drop_all_pins(pool, mf);
		spin_unlock(&pool->lock);
		return 0;
	}
	ret = id_list_copy(&slots, req.slots, req.count);
	if (ret)
		return ret;
	ret = release_list(pool, mf, slots.ids, req.count);
	id_list_free(&slots);
	return ret;
}

long ioc_prefetch(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp)
{
	struct moecache_prefetch req;
	struct id_list idx;
	bool wake_agent = false;
	u32 i;
	int ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags)
		return -EINVAL;
	req.n_queued = 0;
	ret = id_list_copy(&idx, req.experts, req.count);
	if (ret)
		return ret;
	ret = experts_to_idx(pool, req.layer, idx.ids, req.count);
	if (!ret)
		ret = experts_unique(pool, idx.ids, req.count);
	if (!ret && copy_to_user(argp, &req, sizeof(req)))
		ret = -EFAULT;
	if (ret)
		goto out_free;

	spin_lock(&pool->lock);
	for (i = 0; i < req.count; i++) {
		if (pool->estate[idx.ids[i]] != ES_IDLE)
			continue;
		request_add(pool, mf, idx.ids[i], MOECACHE_REQ_PREFETCH);
		pool_count(pool, idx.ids[i], C_PREFETCHES, 1);
		req.n_queued++;
		wake_agent = true;
	}
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (copy_to_user(argp, &req, sizeof(req)))
		ret = -EFAULT;
out_free:
	id_list_free(&idx);
	return ret;
}
