// SPDX-License-Identifier: MIT
/*
 * Kernel pins: the driver pins by ACQUIRE (or ACQUIRE_RELEASE, which drops
 * the caller's previous pins in the same call) and unpins by RELEASE. One
 * of the two pin mechanisms behind client.c's acquire path; fast pins
 * (fastpin.c) use it for a layer with a miss.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "mc_internal.h"

static void mc_fill_acquire(struct moecache_acquire *arg, uint32_t layer, const uint32_t *experts,
			    uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms)
{
	memset(arg, 0, sizeof(*arg));
	arg->layer = layer;
	arg->count = count;
	arg->experts = (uintptr_t)experts;
	arg->slots = (uintptr_t)slots;
	arg->flags = flags;
	arg->timeout_ms = timeout_ms;
}

static uint64_t mc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * EAGAIN to a WAIT: the caller's uid has max_user_waits WAITs in progress
 * on the pool already (a tenant of many threads or processes), and the
 * driver did nothing. Tried again after a pause, longer each time up to
 * MC_WAIT_BUSY_MAX_US, until timeout_ms (0: no limit) has passed since
 * the first try: then -ETIMEDOUT, as a WAIT that timed out; the WAIT that
 * gets in waits for what is left of it (*left_ms). A signal during the
 * pause is -EINTR, as during the WAIT.
 */
#define MC_WAIT_BUSY_FIRST_US 100
#define MC_WAIT_BUSY_MAX_US 10000

static int mc_wait_busy_pause(uint32_t *pause_us, uint64_t start_ms, uint32_t timeout_ms,
			      uint32_t *left_ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)*pause_us * 1000};
	uint64_t spent;

	if (*pause_us < MC_WAIT_BUSY_MAX_US)
		*pause_us =
		    *pause_us * 2 > MC_WAIT_BUSY_MAX_US ? MC_WAIT_BUSY_MAX_US : *pause_us * 2;
	if (nanosleep(&ts, NULL))
		return -errno;
	if (!timeout_ms)
		return 0;
	spent = mc_now_ms() - start_ms;
	if (spent >= timeout_ms)
		return -ETIMEDOUT;
	*left_ms = timeout_ms - (uint32_t)spent;
	return 0;
}

int mc_kernel_acquire(struct moecache *mc, const uint32_t *release_slots, uint32_t release_count,
		      uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
		      uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res)
{
	struct moecache_acquire_release arg;
	uint32_t pause_us = MC_WAIT_BUSY_FIRST_US, left_ms = timeout_ms;
	uint64_t start_ms = 0;
	int ret;

	for (;;) {
		memset(&arg, 0, sizeof(arg));
		mc_fill_acquire(&arg.acquire, layer, experts, count, slots, flags, left_ms);
		if (release_slots) {
			arg.release_count = release_count;
			arg.release_slots = release_count ? (uintptr_t)release_slots : 0;
			ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE_RELEASE, &arg);
		} else {
			ret = mc_ioctl(mc, MOECACHE_IOC_ACQUIRE, &arg.acquire);
		}
		if (ret != -EAGAIN || !(flags & MOECACHE_ACQ_WAIT))
			break;
		if (!start_ms)
			start_ms = mc_now_ms();
		ret = mc_wait_busy_pause(&pause_us, start_ms, timeout_ms, &left_ms);
		if (ret)
			break;
	}
	if (!ret && res) {
		res->n_hits = arg.acquire.n_hits;
		res->n_pinned = arg.acquire.n_pinned;
	}
	return ret;
}

int mc_kernel_release(struct moecache *mc, const uint32_t *slots, uint32_t count)
{
	struct moecache_release arg;

	memset(&arg, 0, sizeof(arg));
	arg.count = count;
	arg.slots = (uintptr_t)slots;
	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
}

int mc_kernel_release_all(struct moecache *mc)
{
	struct moecache_release arg = {.flags = MOECACHE_REL_ALL};

	return mc_ioctl(mc, MOECACHE_IOC_RELEASE, &arg);
}
