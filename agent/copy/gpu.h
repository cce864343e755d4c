/* SPDX-License-Identifier: MIT */
/*
 * The GPU copy engine (agent/copy/gpu_engine.c) and the device-ops table
 * that the CUDA and ROCm engines (agent/copy/cuda.c, agent/copy/rocm.c)
 * fill, with the calls that tests and the device checks use beside the
 * backend ops.
 *
 * The engine is the same for every vendor: it chooses a device for the
 * bank (the spec's candidates, by budget room, then memory), keeps the
 * byte budget, registers the host mappings a copy reads from once, keeps
 * one FIFO of copies per device queue (a CUDA stream, an SDMA queue), and
 * runs the completion thread that retires the oldest copy of each queue
 * once the device says it is done and hands it to the collector
 * (copy_queue.h). Prefetches go in pieces (AGENT_GPU_CHUNK_BYTES), one on
 * the device at a time, so that a demand copy queued behind one waits for
 * one piece at most and a prefetch that turned wrong can be cancelled
 * between two of its pieces. With a copy delay (tests), a copy is queued in two
 * halves with a gate between them that the completion thread opens after
 * the delay, so that a slot stays half-written for a while.
 *
 * A vendor says how to do each of these on its driver: open it and count
 * devices, bind to one (context, queues, completion primitive), allocate
 * and export a bank or import one, register host pages, queue a copy and
 * ask whether it finished, and whether two devices can copy peer to peer
 * (what the driver reports, never an assumption).
 */
#ifndef MOECACHE_GPU_BACKEND_H
#define MOECACHE_GPU_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "backend_impl.h"
#include "copy_queue.h"
#include "lib/gpu/common.h"

/*
 * One copy on a device queue, oldest first. A prefetch larger than the
 * engine's chunk goes to the device one piece at a time: an entry is then
 * its running piece (dst, src and bytes that piece's, off where it starts
 * in the expert), and the completion thread queues the next piece behind
 * whatever was queued meanwhile, unless the prefetch was cancelled.
 */
struct agent_gpu_copy {
	struct agent_copy c;
	uint64_t dst, src;   /* device addresses: the slot, the source (this piece's) */
	uint64_t bytes;	     /* all of the copy (of this piece) */
	uint64_t off;	     /* where this piece starts in the expert: 0 for a whole copy */
	bool cancelled;	     /* a prefetch: finish as -ECANCELED after this piece */
	uint64_t first;	     /* bytes queued before the gate: all of them without a delay */
	uint64_t gate_at_ns; /* with a delay: when the rest may go; 0 once it went */
	bool peer;	     /* src is another device's bank, not host pages */
	uint64_t fence;	     /* the vendor's end marker: a CUDA event, a fence value */
	uint64_t gate_fence; /* the vendor's marker of the first half (ROCm) */
	uint64_t end;	     /* the vendor's: ROCm's ring position after the packets */
};

struct agent_gpu_queue {
	struct agent_gpu_copy *items;
	uint32_t head, len, cap;
};

struct agent_gpu_engine;

/*
 * What a vendor implements. Every call that takes the engine runs either
 * before the completion thread starts or under g->eng.lock, except open,
 * close, device_info, device_of, bind (before), and drain, unbind and
 * close in destroy (drain while the thread still runs, without the lock).
 */
struct agent_gpu_ops {
	uint32_t backend; /* enum moecache_backend (its name: moecache_backend_name) */
	size_t size;	  /* of the vendor's struct, which starts with struct agent_gpu_engine */

	/* Loads and opens the driver, counts its devices. */
	int (*open)(struct agent_gpu_engine *g, uint32_t *n_devices);
	/* Undoes open (and whatever bind left): called once, last. */
	void (*close)(struct agent_gpu_engine *g);
	/* For choosing: the device's memory, and the alignment of slots and of the bank on it. */
	int (*device_info)(struct agent_gpu_engine *g, uint32_t device, uint64_t *mem_bytes,
			   uint64_t *slot_align, uint64_t *bank_align);
	/* The device a bank BANK_GET returned lives on (its uuid): -EPROTO if not visible. */
	int (*device_of)(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			 uint32_t *device);
	/* Context, g->n_queues queues and the completion primitive on device. */
	int (*bind)(struct agent_gpu_engine *g, uint32_t device);
	/* Queues and primitives go (after drain; the completion thread has ended). */
	void (*unbind)(struct agent_gpu_engine *g);

	/* A bank of bytes: allocated, mapped where the device's copies see it, exported. */
	int (*bank_create)(struct agent_gpu_engine *g, uint64_t bytes, int *fd, uint64_t *va);
	/* An exported bank imported and mapped (fd stays the caller's). */
	int (*bank_import)(struct agent_gpu_engine *g, const struct moecache_bank *desc,
			   uint64_t *va);
	void (*bank_release)(struct agent_gpu_engine *g);
	void (*bank_uuid)(const struct agent_gpu_engine *g, uint8_t uuid[16]);

	/*
	 * Registers host pages with the device: 0 and where the device sees
	 * start; 1 when not registered but copies from it still work (staged);
	 * -errno when copies from it cannot work.
	 */
	int (*host_register)(struct agent_gpu_engine *g, uintptr_t start, size_t size,
			     bool writable, uint64_t *device_addr);
	void (*host_unregister)(struct agent_gpu_engine *g, uintptr_t start);

	/* Queues gc's first part (gc->first bytes) on queue q and sets its markers. */
	int (*enqueue)(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc);
	/* Whether what was queued of gc so far finished: 0, -EINPROGRESS, or -errno. */
	int (*query)(struct agent_gpu_engine *g, uint32_t q, const struct agent_gpu_copy *gc);
	/* Lets the rest of a gated copy go. */
	int (*open_gate)(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc);
	/* gc left its FIFO (done, or dropped in destroy): its markers may be reused. */
	void (*retire)(struct agent_gpu_engine *g, uint32_t q, const struct agent_gpu_copy *gc);
	/*
	 * The completion thread has nothing to retire: wait in the driver
	 * (without the lock) until something may have finished. head: the
	 * oldest copy when exactly one queue is busy, else NULL. Returns false
	 * if it did not wait (the thread then sleeps a short while).
	 */
	bool (*wait)(struct agent_gpu_engine *g, const struct agent_gpu_copy *head);
	/* Waits (bounded) until what was queued on every queue finished. */
	void (*drain)(struct agent_gpu_engine *g);
	/* Waits until gc (queued, not tracked) finished, its gate opened. */
	void (*sync)(struct agent_gpu_engine *g, uint32_t q, struct agent_gpu_copy *gc);

	/* optional: what the driver reports, both bound to different devices */
	bool (*can_peer)(const struct agent_gpu_engine *dst, const struct agent_gpu_engine *src);
	/*
	 * Imports src's exported bank (src->bank_fd) into dst so that dst's
	 * queues can read it, as dst's peer number index (dst keeps the import
	 * until unbind, so src may go first): where dst sees src's slot 0.
	 */
	int (*peer_map)(struct agent_gpu_engine *dst, struct agent_gpu_engine *src, uint32_t index,
			uint64_t *va);
};

/* A vendor's device ops table from its functions, named VENDOR_open, VENDOR_close... */
#define AGENT_GPU_OPS(vendor, vendor_id, vendor_struct)                                            \
	{                                                                                          \
		.backend = (vendor_id), .size = sizeof(vendor_struct),                             \
		.open = vendor##_open, .close = vendor##_close,                                    \
		.device_info = vendor##_device_info, .device_of = vendor##_device_of,              \
		.bind = vendor##_bind, .unbind = vendor##_unbind,                                  \
		.bank_create = vendor##_bank_create, .bank_import = vendor##_bank_import,          \
		.bank_release = vendor##_bank_release, .bank_uuid = vendor##_bank_uuid,            \
		.host_register = vendor##_host_register,                                           \
		.host_unregister = vendor##_host_unregister, .enqueue = vendor##_enqueue,          \
		.query = vendor##_query, .open_gate = vendor##_open_gate,                          \
		.retire = vendor##_retire, .wait = vendor##_wait, .drain = vendor##_drain,         \
		.sync = vendor##_sync, .can_peer = vendor##_can_peer,                              \
		.peer_map = vendor##_peer_map,                                                     \
	}

/*
 * The pieces of a prefetch (agent_backend_config.chunk_bytes 0): large
 * enough that a device's per-copy cost stays small beside a piece, small
 * enough that a demand copy is not held long behind one.
 */
#define AGENT_GPU_CHUNK_BYTES (4ull << 20)

/*
 * The engine, first in each vendor's struct (and so first in priv: the
 * shared ops of copy_queue.h take priv as its eng).
 */
struct agent_gpu_engine {
	struct agent_copy_engine eng; /* first */
	const struct agent_gpu_ops *ops;
	struct agent_backend_config cfg;
	struct mc_gpu_params params;
	char pool[MOECACHE_NAME_LEN];
	char devices[256]; /* params.devices points here */
	char err[320];
	uint32_t n_devices;

	/* The device, once a bank is made or adopted. */
	bool bound;
	int device;

	/* The bank. */
	bool have_bank;
	int bank_fd;
	uint64_t bank_va, bank_bytes, slot_stride;
	uint64_t budget_bytes; /* reserved in params.budget */

	uint64_t id; /* unique in the process: peers know each other by it */
	/* Banks of other engines this one's queues can read (peer_map done): id, address. */
	struct {
		uint64_t src_id;
		uint64_t va;
	} peers[MC_GPU_MAX_DEVICES];
	uint32_t n_peers;

	struct mc_gpu_ranges host; /* host ranges registered (or tried) */

	uint64_t chunk_bytes; /* a prefetch's pieces */

	/* Under eng.lock. */
	struct agent_gpu_queue *queues;
	uint32_t n_queues;
	pthread_t thread;
	bool thread_started;
};

/* Records a message in g->err and logs it. */
void agent_gpu_errf(struct agent_gpu_engine *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Logs g->err as it stands. */
void agent_gpu_log_err(struct agent_gpu_engine *g);
/* The pool's name for the log, or NULL. */
const char *agent_gpu_engine_pool(const struct agent_gpu_engine *g);

/*
 * Creates an engine of ops with explicit GPU parameters (params NULL:
 * defaults and the environment). On failure err (may be NULL) says why,
 * as the log does.
 */
int agent_gpu_backend_create(const struct agent_gpu_ops *ops,
			     const struct agent_backend_config *cfg,
			     const struct mc_gpu_params *params, void **priv, char *err,
			     size_t errlen);

/*
 * Where the device sees host bytes [p, p + len), their mapping registered
 * with it once (under g->eng.lock). -errno where copies from it cannot work.
 */
int agent_gpu_host_addr(struct agent_gpu_engine *g, const void *p, size_t len, bool writable,
			uint64_t *addr);

/* The backend ops both vendors' tables use (agent_backend_ops). */
void agent_gpu_backend_destroy(void *priv);
int agent_gpu_backend_bank_create(void *priv, struct moecache_bank *desc);
int agent_gpu_backend_bank_adopt(void *priv, const struct moecache_bank *desc);
void *agent_gpu_backend_slot(void *priv, uint32_t slot);
int agent_gpu_backend_copy(void *priv, const struct agent_copy *c);
bool agent_gpu_backend_can_peer(const void *dst, const void *src);
int agent_gpu_backend_copy_peer(void *dst, void *src, uint32_t src_slot,
				const struct agent_copy *c);
/*
 * Cancels the prefetch into slot: it finishes as -ECANCELED once its piece
 * on the device is done (a piece queued there cannot be taken back), and
 * no further piece goes. 0 or -ENOENT (no prefetch into slot in flight).
 */
int agent_gpu_backend_cancel(void *priv, uint32_t slot);

/* The device address of a slot in this process, or 0 before a bank exists. */
uint64_t agent_gpu_backend_slot_addr(void *priv, uint32_t slot);
/* The device the bank lives on (CUDA ordinal, KFD GPU index), or -1 before a bank exists. */
int agent_gpu_backend_device(const void *priv);
/* The last error in words ("" if none). */
const char *agent_gpu_backend_error(const void *priv);

/* A vendor's backend ops table: create is its own, the rest the engine's. */
#define AGENT_GPU_BACKEND_OPS(vendor_id, vendor_create)                                            \
	{                                                                                          \
		.id = (vendor_id), .create = (vendor_create),                                      \
		.destroy = agent_gpu_backend_destroy,                                              \
		.bank_create = agent_gpu_backend_bank_create,                                      \
		.bank_adopt = agent_gpu_backend_bank_adopt, .slot = agent_gpu_backend_slot,        \
		.copy = agent_gpu_backend_copy, .completion_fd = agent_copy_engine_completion_fd,  \
		.completions = agent_copy_engine_completions,                                      \
		.inflight = agent_copy_engine_inflight, .set_delay = agent_copy_engine_set_delay,  \
		.can_peer = agent_gpu_backend_can_peer, .copy_peer = agent_gpu_backend_copy_peer,  \
		.cancel = agent_gpu_backend_cancel,                                                \
	}

/*
 * What a vendor file ends with: its device ops table (AGENT_GPU_OPS), its
 * agent_VENDOR_backend_create and its backend ops table agent_VENDOR_backend.
 */
#define AGENT_GPU_BACKEND(vendor, vendor_id, vendor_struct)                                        \
	static const struct agent_gpu_ops vendor##_gpu_ops =                                       \
	    AGENT_GPU_OPS(vendor, vendor_id, vendor_struct);                                       \
	int agent_##vendor##_backend_create(const struct agent_backend_config *cfg,                \
					    const struct mc_gpu_params *params, void **priv,       \
					    char *err, size_t errlen)                              \
	{                                                                                          \
		return agent_gpu_backend_create(&vendor##_gpu_ops, cfg, params, priv, err,         \
						errlen);                                           \
	}                                                                                          \
	static int vendor##_create(const struct agent_backend_config *cfg, void **priv)            \
	{                                                                                          \
		return agent_##vendor##_backend_create(cfg, cfg->gpu, priv, NULL, 0);              \
	}                                                                                          \
	const struct agent_backend_ops agent_##vendor##_backend =                                  \
	    AGENT_GPU_BACKEND_OPS(vendor_id, vendor##_create)

extern const struct agent_backend_ops agent_cuda_backend;
extern const struct agent_backend_ops agent_rocm_backend;

/* The vendors' create with explicit GPU parameters (agent_gpu_backend_create). */
int agent_cuda_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen);
int agent_rocm_backend_create(const struct agent_backend_config *cfg,
			      const struct mc_gpu_params *params, void **priv, char *err,
			      size_t errlen);
/*
 * For checks: copies bytes of a slot back into host memory dst with the
 * SDMA engine and waits (VRAM is not CPU-visible). 0 or -errno.
 */
int agent_rocm_backend_read_slot(void *priv, uint32_t slot, void *dst, uint64_t bytes);

#endif /* MOECACHE_GPU_BACKEND_H */
