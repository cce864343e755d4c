// SPDX-License-Identifier: GPL-2.0
/*
 * moecache map: unpublishing, unmapping and flushing resident slots. Every
 * store a reader of the map region may see goes through here or through
 * the map_* helpers of core.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>

#include "core.h"

static bool slot_fast_pinned(struct moecache_pool *pool, u32 slot)
{
	struct moecache_file *f;

	lockdep_assert_held(&pool->lock);
	list_for_each_entry(f, &pool->files, node)
		if (f->fast_pins && READ_ONCE(f->fast_pins[slot]))
			return true;
	return false;
}

/*
 * Takes a resident slot's mapping away from fast pinners: returns false,
 * with the mapping back in place, if a client holds a fast pin on it. The
 * caller holds the seq write side and has checked pool->pins[slot].
 *
 * A client stores its pin, then a full barrier, then reads map[] again;
 * here map[] is stored, then a full barrier, then the pins are read. One
 * of the two sees the other's store: either the client sees the slot
 * gone and backs off, or the pin is seen here.
 */
bool slot_unpublish(struct moecache_pool *pool, u32 slot)
{
	u32 idx = pool->owner[slot];

	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(idx & MOECACHE_OWNER_FILLING) || !pool->n_fast_files)
		return true;
	WRITE_ONCE(pool->map[idx], MOECACHE_NONE);
	/* Pairs with the fast pinner's fence between its pin and its re-read. */
	smp_mb();
	if (!slot_fast_pinned(pool, slot))
		return true;
	/* The slot was never written: publish it again as it was. */
	map_publish(pool, idx, slot);
	return false;
}

/* Unmaps a resident slot; the caller holds the seq write side. */
void slot_unmap(struct moecache_pool *pool, u32 slot)
{
	u32 idx = pool->owner[slot];

	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(pool->pins[slot]);
	WRITE_ONCE(pool->map[idx], MOECACHE_NONE);
	WRITE_ONCE(pool->owner[slot], MOECACHE_NONE);
	pool->estate[idx] = ES_IDLE;
	pool->slot_flags[slot] = 0;
	pool->n_resident--;
	pool_count(pool, idx, C_EVICTIONS, 1);
	bank_count(pool, slot, C_EVICTIONS, 1);
}

/*
 * May a free slot be taken? Not while a fast pin taken before the COMMIT
 * of a move that freed it is held (SF_MOVED): the pinner read map[] when
 * it still named the slot, and reads the slot until it lets go. Pins
 * taken later fail their re-read of map[] and are put back.
 */
bool slot_reusable(struct moecache_pool *pool, u32 slot)
{
	lockdep_assert_held(&pool->lock);
	if (!(pool->slot_flags[slot] & SF_MOVED))
		return true;
	/*
	 * The COMMIT stored map[] and a full barrier before it let the lock
	 * go; with this one, a pin whose re-read missed that store is seen.
	 */
	smp_mb();
	if (pool->n_fast_files && slot_fast_pinned(pool, slot))
		return false;
	pool->slot_flags[slot] &= ~SF_MOVED;
	return true;
}

/*
 * Drops the new slot of a move (FILLING, its expert resident elsewhere):
 * the expert stays where it is. The caller holds the seq write side.
 */
void move_cancel(struct moecache_pool *pool, u32 slot)
{
	u32 idx = pool->owner[slot] & MOECACHE_OWNER_IDX_MASK;

	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(!test_bit(idx, pool->moving));
	WRITE_ONCE(pool->owner[slot], MOECACHE_NONE);
	pool->n_filling--;
	__clear_bit(idx, pool->moving);
}

int moecache_pool_flush(struct moecache_pool *pool)
{
	int freed = 0;
	u32 slot, own;

	spin_lock(&pool->lock);
	map_write_begin(pool);
	for (slot = 0; slot < pool->n_slots; slot++) {
		own = pool->owner[slot];
		if (own == MOECACHE_NONE || (own & MOECACHE_OWNER_FILLING) ||
		    pool->pins[slot] || test_bit(own, pool->moving) ||
		    !slot_unpublish(pool, slot))
			continue;
		slot_unmap(pool, slot);
		freed++;
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);
	return freed;
}

static bool slot_resident(struct moecache_pool *pool, u32 slot)
{
	return pool->owner[slot] != MOECACHE_NONE &&
	       !(pool->owner[slot] & MOECACHE_OWNER_FILLING);
}

/*
 * slot_unpublish() for every resident slot of [begin, end) at once: all
 * of them, or none.
 */
static bool range_unpublish(struct moecache_pool *pool, u32 begin, u32 end)
{
	bool pinned = false;
	u32 slot;

	lockdep_assert_held(&pool->lock);
	if (!pool->n_fast_files)
		return true;
	for (slot = begin; slot < end; slot++)
		if (slot_resident(pool, slot))
			WRITE_ONCE(pool->map[pool->owner[slot]], MOECACHE_NONE);
	/* As in slot_unpublish(). */
	smp_mb();
	for (slot = begin; slot < end && !pinned; slot++)
		pinned = (slot_resident(pool, slot) ||
			  (pool->slot_flags[slot] & SF_MOVED)) &&
			 slot_fast_pinned(pool, slot);
	if (!pinned)
		return true;
	for (slot = begin; slot < end; slot++)
		if (slot_resident(pool, slot))
			map_publish(pool, pool->owner[slot], slot);
	return false;
}

/* A resident expert leaves: its move to another slot, if any, is off. */
static void move_cancel_of(struct moecache_pool *pool, u32 idx)
{
	u32 slot;

	lockdep_assert_held(&pool->lock);
	if (!test_bit(idx, pool->moving))
		return;
	for (slot = 0; slot < pool->n_slots; slot++)
		if (pool->owner[slot] == (MOECACHE_OWNER_FILLING | idx)) {
			move_cancel(pool, slot);
			return;
		}
}

/*
 * Frees every slot of a bank; the caller checked that none is pinned by
 * ACQUIRE. -EBUSY, with nothing changed, if one is fast-pinned. Moves
 * into or out of the bank are dropped: their experts stay where they
 * were, or go if that was this bank.
 */
int bank_clear_residency(struct moecache_pool *pool, u32 bank)
{
	u32 begin = pool->banks[bank].slot_begin;
	u32 end = begin + pool->banks[bank].layout.n_slots;
	u32 slot, own, idx;

	lockdep_assert_held(&pool->lock);
	map_write_begin(pool);
	if (!range_unpublish(pool, begin, end)) {
		map_write_end(pool);
		return -EBUSY;
	}
	for (slot = begin; slot < end; slot++) {
		own = pool->owner[slot];
		idx = own & MOECACHE_OWNER_IDX_MASK;
		if (own == MOECACHE_NONE) {
			pool->slot_flags[slot] = 0;
		} else if (!(own & MOECACHE_OWNER_FILLING)) {
			move_cancel_of(pool, idx);
			slot_unmap(pool, slot);
		} else if (test_bit(idx, pool->moving)) {
			move_cancel(pool, slot);
		} else {
			WRITE_ONCE(pool->owner[slot], MOECACHE_NONE);
			pool->n_filling--;
			request_requeue(pool, idx);
		}
	}
	map_write_end(pool);
	return 0;
}
