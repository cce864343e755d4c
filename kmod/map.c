// SPDX-License-Identifier: GPL-2.0
/*
 * moecache map: unpublishing, unmapping and flushing resident slots. Every
 * store a reader of the map region may see goes through here or through
 * the map_* helpers of core.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>

#include "core.h"

static struct list_head *slot_fast_pinners(struct moecache_pool *pool,
					   u32 slot)
{
	return &pool->fast_pinners[slot / MOECACHE_FAST_PINS_PER_PAGE];
}

/*
 * Does a client hold a fast pin on slot? Only the files on the slot's
 * fast_pinners list are read: a file joins it in pins_region_fault(), under
 * pool->lock, before the page that holds the slot's word is mapped into any
 * process, so a client's store to that word comes after the file joined.
 *
 * Why a file not on the list holds no pin the caller must see: the caller
 * holds pool->lock and has unpublished the slot (map[idx] stored, then a
 * full barrier) or is about to unmap it under the same lock. A client that
 * has yet to fault the page in takes pool->lock in the fault, after this
 * caller releases it, and so (the unlock is a release, the lock an acquire)
 * its re-read of map[idx], after its pin, sees the slot gone and backs off.
 * A client whose fault ran earlier is on the list, and the list is read
 * under the lock that added it. The pin itself is then seen by the
 * pairing in slot_unpublish().
 */
static bool slot_fast_pinned(struct moecache_pool *pool, u32 slot)
{
	struct moecache_fast_ref *ref;

	lockdep_assert_held(&pool->lock);
	list_for_each_entry(ref, slot_fast_pinners(pool, slot), node)
		if (READ_ONCE(ref->mf->fast_pins[slot]))
			return true;
	return false;
}

/* Has any file had a page of its pins region mapped? */
static bool pool_fast_pinners(struct moecache_pool *pool)
{
	u32 page;

	lockdep_assert_held(&pool->lock);
	for (page = 0; page < pool->n_fast_pages; page++)
		if (!list_empty(&pool->fast_pinners[page]))
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
 * gone and backs off, or the pin is seen here. With no file on the slot's
 * fast_pinners list nothing is unpublished here: slot_fast_pinned() says
 * why no client can then hold a pin the caller would miss.
 */
bool slot_unpublish(struct moecache_pool *pool, u32 slot)
{
	u32 idx = pool->owner[slot];

	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(idx & MOECACHE_OWNER_FILLING) ||
	    list_empty(slot_fast_pinners(pool, slot)))
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
	if (slot_fast_pinned(pool, slot))
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
	if (!pool_fast_pinners(pool))
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

/*
 * Drops the moves out of [begin, end), whose experts go with it, after
 * range_unpublish(): their map[] entries are in the range, or NONE (a
 * moving expert is resident, and only range_unpublish() took it off).
 * One pass over the slots, however many moves there are.
 */
static void range_cancel_moves_out(struct moecache_pool *pool, u32 begin,
				   u32 end)
{
	u32 slot, own, idx, from;

	lockdep_assert_held(&pool->lock);
	for (slot = 0; slot < pool->n_slots; slot++) {
		own = pool->owner[slot];
		if (own == MOECACHE_NONE || !(own & MOECACHE_OWNER_FILLING))
			continue;
		idx = own & MOECACHE_OWNER_IDX_MASK;
		from = pool->map[idx];
		if (test_bit(idx, pool->moving) &&
		    (from == MOECACHE_NONE || (from >= begin && from < end)))
			move_cancel(pool, slot);
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
	range_cancel_moves_out(pool, begin, end);
	for (slot = begin; slot < end; slot++) {
		own = pool->owner[slot];
		idx = own & MOECACHE_OWNER_IDX_MASK;
		if (own == MOECACHE_NONE) {
			pool->slot_flags[slot] = 0;
		} else if (!(own & MOECACHE_OWNER_FILLING)) {
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
