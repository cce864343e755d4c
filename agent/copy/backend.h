/* SPDX-License-Identifier: MIT */
/*
 * Copy engines of moecached. A backend owns the bank (allocates and
 * exports it, or adopts the one the driver kept across an agent restart)
 * and copies host pages into slots asynchronously; finished copies are
 * collected from a file descriptor that becomes readable, so the pool's
 * epoll loop waits on it beside the agent fd.
 *
 * "cpu": bank = memfd, copies = memcpy threads (cpu.c); "cuda": a
 * cuMemCreate bank, copies on CUDA streams (cuda.c); "rocm": an amdgpu BO
 * exported as a dma-buf, copies through SDMA queues (rocm.c). The GPU
 * drivers are loaded at run time: -EOPNOTSUPP (with a logged reason) where
 * they are missing.
 */
#ifndef MOECACHE_AGENT_BACKEND_H
#define MOECACHE_AGENT_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include <moecache.h>

struct agent_copy {
	uint32_t slot;
	uint32_t layer;
	uint32_t expert; /* global id */
	uint32_t flags;	 /* MOECACHE_FILL_* */
	const void *src; /* the expert's host record */
	int status;	 /* on completion: 0 or -errno */
	bool published;	 /* on completion: the config's publish hook made it visible */
};

struct mc_gpu_params;

/*
 * One backend instance serves one bank of a pool (a pool with several
 * banks has one instance per bank). Slots given to an instance are the
 * bank's own, 0 .. n_slots - 1; the agent translates the pool's global
 * slot ids (bank slot_begin + local).
 */
struct agent_backend_config {
	const char *pool; /* for names and messages */
	uint32_t n_slots; /* this bank's slots */
	uint32_t bank;	  /* bank index in the pool */
	uint32_t device;  /* the bank's device ordinal (moecache_bank_layout.device) */
	/*
	 * cuda, rocm: the bank goes on device (a layout that names it); false:
	 * the backend chooses among gpu->devices' candidates (backend NONE).
	 */
	bool fixed_device;
	uint64_t expert_bytes;
	uint32_t copy_threads;
	uint32_t copy_delay_us;
	/* A prefetch's pieces, between which it can be cancelled (0: the engine's default). */
	uint64_t chunk_bytes;
	/* cuda, rocm: devices, budget, host region, queues (lib/gpu/common.h); NULL: defaults */
	const struct mc_gpu_params *gpu;
	/*
	 * Optional (NULL: none). Run by the copy thread that finished a demand
	 * copy (not MOECACHE_FILL_PREFETCH) without error, with no engine lock
	 * held, to make the copy visible at once (moecached: its COMMIT), so
	 * that a client waiting for it needs no other thread to run first.
	 * 0: published; the completion still comes to the collector, with
	 * published set, but in batches (see copy_queue.h), since nobody waits
	 * for it any more. -errno: the completion carries it as its status and
	 * is signalled at once. It reads only what stays fixed while copies run
	 * (moecached: the pool's handle). Engines that finish copies on a
	 * thread of their own (cuda, rocm) leave published false and do not
	 * call it.
	 */
	int (*publish)(void *ctx, const struct agent_copy *c);
	void *publish_ctx;
};

struct agent_backend;

/* -EOPNOTSUPP for a backend this build lacks, -EINVAL for a bad config. */
int agent_backend_create(const char *name, const struct agent_backend_config *cfg,
			 struct agent_backend **out);
/* Waits for the copies in flight (their completions are dropped), frees the bank mapping. */
void agent_backend_destroy(struct agent_backend *be);

/* Allocates a new bank; desc (fd still owned by the backend) is ready for BANK_SET. */
int agent_backend_bank_create(struct agent_backend *be, struct moecache_bank *desc);
/*
 * Adopts the bank BANK_GET returned after a restart (takes desc->fd).
 * -EPROTO if its kind or geometry does not fit this backend.
 */
int agent_backend_bank_adopt(struct agent_backend *be, const struct moecache_bank *desc);
/* Where the bank is mapped in this process (CPU), for checks. */
void *agent_backend_slot(struct agent_backend *be, uint32_t slot);

/* Queues a copy of expert_bytes from c->src into c->slot. */
int agent_backend_copy(struct agent_backend *be, const struct agent_copy *c);
/*
 * Cancels the prefetch copy (MOECACHE_FILL_PREFETCH) into slot that has not
 * finished: it completes with status -ECANCELED, at once if it had not
 * started or was between two chunks, else after its running chunk; the
 * caller aborts the fill as for a failed copy. 0, -ENOENT (no prefetch
 * into slot: finished, or a demand copy, which is never cancelled) or
 * -EOPNOTSUPP (an engine without cancel).
 */
int agent_backend_cancel(struct agent_backend *be, uint32_t slot);
/*
 * Readable while completions wait to be collected, but for published ones
 * (agent_backend_config.publish), which may wait for a batch (copy_queue.h).
 */
int agent_backend_completion_fd(const struct agent_backend *be);
/* Collects up to max finished copies; returns how many. */
int agent_backend_completions(struct agent_backend *be, struct agent_copy *out, uint32_t max);
uint32_t agent_backend_inflight(const struct agent_backend *be);

/*
 * Copies between banks (a promotion or a demotion). can_peer says whether
 * dst can copy from src's bank device to device: the answer of the
 * backends' peer probe, never an assumption; false when either lacks the
 * op or they are of different kinds. copy_peer queues a copy of
 * expert_bytes from src's bank-local slot src_slot into dst's c->slot
 * (c->src unused) and completes on dst's completion fd like any copy;
 * -EOPNOTSUPP where can_peer is false (the agent then copies from the
 * host pages, which hold every expert).
 */
bool agent_backend_can_peer(const struct agent_backend *dst, const struct agent_backend *src);
int agent_backend_copy_peer(struct agent_backend *dst, struct agent_backend *src,
			    uint32_t src_slot, const struct agent_copy *c);
void agent_backend_set_delay(struct agent_backend *be, uint32_t copy_delay_us);

#endif /* MOECACHE_AGENT_BACKEND_H */
