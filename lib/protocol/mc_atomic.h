/* SPDX-License-Identifier: MIT */
/*
 * Named accessors for memory shared with the driver (the map region).
 * libmoecache's own readers; tests and tools that read a map region without
 * a handle include this header (LIBMOECACHE_PROTOCOL_CFLAGS in lib/build.mk).
 *
 * The driver changes map entries under a sequence counter (odd while a
 * change is in progress) and stores a map[] entry with release order only
 * after the slot's copy completed. Readers pair that with acquire loads:
 * whatever a reader finds in map[] points at a fully copied slot.
 */
#ifndef MOECACHE_LIB_MC_ATOMIC_H
#define MOECACHE_LIB_MC_ATOMIC_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

static inline uint32_t mc_load_acquire_u32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint64_t mc_load_acquire_u64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint32_t mc_load_relaxed_u32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* For writers of a map region in memory (tests, simulators); the driver has its own. */
static inline void mc_store_release_u32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline void mc_cpu_relax(unsigned int *spins)
{
	/* The writer is the kernel holding a spinlock for a few stores; yield
	 * only if it was preempted (or is a test thread). */
	if (++*spins % 64 == 0)
		sched_yield();
#if defined(__x86_64__) || defined(__i386__)
	else
		__builtin_ia32_pause();
#endif
}

/*
 * One try of mc_seq_read_begin, for a reader that bounds its wait: false
 * while a change is in progress (odd); else *start is the sequence and the
 * reads that follow are ordered after it.
 */
static inline bool mc_seq_read_try_begin(const uint32_t *seq, uint32_t *start)
{
	*start = mc_load_acquire_u32(seq);
	return !(*start & 1);
}

/* Waits for an even sequence and returns it; reads that follow are ordered after it. */
static inline uint32_t mc_seq_read_begin(const uint32_t *seq)
{
	unsigned int spins = 0;
	uint32_t s;

	while (!mc_seq_read_try_begin(seq, &s))
		mc_cpu_relax(&spins);
	return s;
}

/* True if a change happened since mc_seq_read_begin returned start: read again. */
static inline bool mc_seq_read_retry(const uint32_t *seq, uint32_t start)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return mc_load_relaxed_u32(seq) != start;
}

/* Writer side, for in-memory map regions: odd while entries change. */
static inline void mc_seq_write_begin(uint32_t *seq)
{
	__atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void mc_seq_write_end(uint32_t *seq)
{
	__atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

#endif /* MOECACHE_LIB_MC_ATOMIC_H */
