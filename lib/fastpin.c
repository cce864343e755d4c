// SPDX-License-Identifier: MIT
/*
 * Fast pins: a client attached with MOECACHE_ATTACH_FAST_PINS pins resident
 * slots in a region of its own instead of by ioctl, and reports those hits
 * to the driver afterwards, in batches (MOECACHE_IOC_REPORT). The protocol
 * is in uapi/moecache.h; the driver reads the region before it unmaps a
 * slot.
 *
 * Every pin such a handle holds is a fast pin: a layer with a miss is
 * acquired by ioctl, whole, and its kernel pins are turned into fast ones
 * straight away, so a release never has to know which kind it drops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mc_atomic.h"
#include "mc_fastpin.h"
#include "mc_internal.h"

/* Lists up to this long are handled on the stack. */
#define MC_FAST_STACK 64

int mc_fast_setup(struct moecache *mc)
{
	const struct moecache_offsets *off = &mc->pool.off;
	void *region;
	int ret;

	if (off->pins_size < (uint64_t)mc->pool.n_slots * sizeof(uint32_t) || !off->pins_size)
		return -EPROTO;
	mc->report = calloc(MC_REPORT_BATCH, sizeof(*mc->report));
	if (!mc->report)
		return -ENOMEM;
	region = mmap(NULL, off->pins_size, PROT_READ | PROT_WRITE, MAP_SHARED, mc->fd,
		      (off_t)off->pins_offset);
	if (region == MAP_FAILED) {
		ret = -errno;
		free(mc->report);
		mc->report = NULL;
		return ret;
	}
	pthread_mutex_init(&mc->fast_lock, NULL);
	mc->fast_pins = region;
	mc->fast_pins_len = off->pins_size;
	return 0;
}

/* Sends the buffered hits; fast_lock held. */
static int mc_fast_flush_locked(struct moecache *mc)
{
	struct moecache_report arg;
	int ret;

	if (!mc->report_len)
		return 0;
	memset(&arg, 0, sizeof(arg));
	arg.count = mc->report_len;
	arg.accesses = (uintptr_t)mc->report;
	ret = mc_ioctl(mc, MOECACHE_IOC_REPORT, &arg);
	/* Dropped either way: a batch the driver refused would be refused again. */
	mc->report_len = 0;
	return ret;
}

int moecache_report_flush(struct moecache *mc)
{
	int ret;

	ret = mc_check_role(mc, MC_ROLE_BIT(MOECACHE_ROLE_CLIENT));
	if (ret || !mc->fast_pins)
		return ret;
	pthread_mutex_lock(&mc->fast_lock);
	ret = mc_fast_flush_locked(mc);
	pthread_mutex_unlock(&mc->fast_lock);
	return ret;
}

void mc_fast_teardown(struct moecache *mc)
{
	if (!mc->fast_pins)
		return;
	/* Best effort: the counters are statistics, the pins go with the file. */
	moecache_report_flush(mc);
	munmap(mc->fast_pins, mc->fast_pins_len);
	pthread_mutex_destroy(&mc->fast_lock);
	free(mc->report);
	mc->fast_pins = NULL;
	mc->report = NULL;
}

/* How often slot appears in slots[0..n). */
static uint32_t mc_count_of(const uint32_t *slots, uint32_t n, uint32_t slot)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < n; i++)
		c += slots[i] == slot;
	return c;
}

/* All or nothing: every pin listed must be held before any is dropped. fast_lock held. */
static int mc_fast_release_locked(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	uint32_t *held = NULL;
	int ret = 0;

	for (uint32_t i = 0; i < count; i++)
		if (slots[i] >= mc->pool.n_slots)
			return -EINVAL;
	/* Long lists count per slot in a table rather than by rescanning. */
	if (count > MC_FAST_STACK) {
		held = calloc(mc->pool.n_slots, sizeof(*held));
		if (!held)
			return -ENOMEM;
		for (uint32_t i = 0; i < count; i++)
			held[slots[i]]++;
	}
	for (uint32_t i = 0; i < count && !ret; i++) {
		uint32_t want = held ? held[slots[i]] : mc_count_of(slots, count, slots[i]);

		if (mc_load_relaxed_u32(&mc->fast_pins[slots[i]]) < want)
			ret = -EINVAL;
	}
	for (uint32_t i = 0; i < count && !ret; i++)
		mc_fast_pin_put(mc->fast_pins, slots[i]);
	free(held);
	return ret;
}

int mc_fast_release(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	int ret;

	pthread_mutex_lock(&mc->fast_lock);
	ret = mc_fast_release_locked(mc, slots, count);
	pthread_mutex_unlock(&mc->fast_lock);
	return ret;
}

int mc_fast_release_all(struct moecache *mc)
{
	struct moecache_release arg = {.flags = MOECACHE_REL_ALL};

	pthread_mutex_lock(&mc->fast_lock);
	for (uint32_t s = 0; s < mc->pool.n_slots; s++)
		__atomic_store_n(&mc->fast_pins[s], 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mc->fast_lock);
	/* Kernel pins are only ever held for a moment, but none must outlive this. */
	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
}

/*
 * Queues one report entry per expert of a call that hit everywhere;
 * fast_lock held. The driver counts a run of entries of one layer as one
 * visit, so a call of the same layer as the last one queued starts a new
 * batch.
 */
static void mc_fast_note_hits_locked(struct moecache *mc, uint32_t layer, const uint32_t *experts,
				     uint32_t count)
{
	if (mc->report_len && mc->report[mc->report_len - 1].layer == layer)
		mc_fast_flush_locked(mc);
	for (uint32_t i = 0; i < count; i++) {
		/* Counters only: a failed report must not undo pins already taken. */
		if (mc->report_len == MC_REPORT_BATCH)
			mc_fast_flush_locked(mc);
		mc->report[mc->report_len].layer = layer;
		mc->report[mc->report_len].expert = experts[i];
		mc->report_len++;
	}
}

/* Turns the kernel pins ACQUIRE took on slots[0..n) into fast pins. */
static int mc_fast_convert(struct moecache *mc, const uint32_t *slots, uint32_t n)
{
	struct moecache_release arg;
	int ret;

	if (!n)
		return 0;
	/* The kernel pin holds the slot until the fast one is visible. */
	for (uint32_t i = 0; i < n; i++)
		mc_fast_pin_get(mc->fast_pins, slots[i]);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memset(&arg, 0, sizeof(arg));
	arg.count = n;
	arg.slots = (uintptr_t)slots;
	ret = mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
	if (ret)
		for (uint32_t i = 0; i < n; i++)
			mc_fast_pin_put(mc->fast_pins, slots[i]);
	return ret;
}

/*
 * A layer with a miss goes to ACQUIRE whole, as without fast pins: the
 * driver counts its hits and misses in one step, which is what the agent's
 * policy expects of a layer's visit. Its kernel pins then become fast pins.
 */
static int mc_fast_acquire_kernel(struct moecache *mc, uint32_t layer, const uint32_t *experts,
				  uint32_t count, uint32_t *slots, uint32_t flags,
				  uint32_t timeout_ms, struct moecache_acquire_result *res)
{
	uint32_t stack_out[MC_FAST_STACK], *out = stack_out;
	struct moecache_acquire_result kres;
	uint32_t n_pinned = 0;
	int ret;

	if (count > MC_FAST_STACK) {
		out = malloc(count * sizeof(*out));
		if (!out)
			return -ENOMEM;
	}
	ret =
	    mc_kernel_acquire(mc, NULL, 0, layer, experts, count, slots, flags, timeout_ms, &kres);
	if (!ret)
		ret = mc_pinned_slots(mc, slots, count, out, &n_pinned);
	if (ret)
		goto out;
	ret = mc_fast_convert(mc, out, n_pinned);
	if (ret) {
		/* Cannot happen short of a driver bug; the kernel pins stay until close. */
		for (uint32_t i = 0; i < count; i++)
			slots[i] = MOECACHE_NONE;
		goto out;
	}
	if (res)
		*res = kres;
out:
	if (out != stack_out)
		free(out);
	return ret;
}

int mc_fast_acquire(struct moecache *mc, const uint32_t *release_slots, uint32_t release_count,
		    uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
		    uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res)
{
	uint32_t base = layer * mc->pool.n_local - mc->pool.expert_begin;
	uint32_t n_fast = 0;
	int ret;

	pthread_mutex_lock(&mc->fast_lock);
	/* As ACQUIRE_RELEASE: the release first, and it stays done if a WAIT fails. */
	ret = mc_fast_release_locked(mc, release_slots, release_count);
	if (!ret)
		n_fast = mc_fast_pin_map(mc->fast_pins, mc->map.map, mc->pool.n_slots, base,
					 experts, count, slots);
	if (!ret && n_fast == count) {
		/* All hits, the common case: one lock hold for the whole call. */
		mc_fast_note_hits_locked(mc, layer, experts, count);
	} else if (!ret) {
		for (uint32_t i = 0; i < count; i++) {
			if (slots[i] != MOECACHE_NONE)
				mc_fast_pin_put(mc->fast_pins, slots[i]);
			slots[i] = MOECACHE_NONE;
		}
		/* The agent sees the hits before the misses that follow them. */
		mc_fast_flush_locked(mc);
	}
	pthread_mutex_unlock(&mc->fast_lock);
	if (!ret && n_fast < count)
		ret = mc_fast_acquire_kernel(mc, layer, experts, count, slots, flags, timeout_ms,
					     res);
	else if (!ret && res)
		res->n_hits = res->n_pinned = count;
	return ret;
}
