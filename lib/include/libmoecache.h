/* SPDX-License-Identifier: MIT */
/*
 * libmoecache: the userspace side of /dev/moecache.
 *
 * One handle (struct moecache) is one open file of the device, attached to
 * one pool in one role:
 *
 *   client  inference processes: look experts up in the shared map without
 *           a system call, pin them (acquire), unpin them (release), hint
 *           prefetches, import the bank and read host pages read-only;
 *   agent   the one process that reads requests, evicts, copies into the
 *           bank and commits (moecached);
 *   loader  writes the experts' bytes into the host pages.
 *
 * Every function returns 0 (or a count) on success and -errno on failure;
 * nothing sets errno for the caller. Expert ids are the model's global ids
 * unless a name says "idx" (the local index layer * n_local + expert -
 * expert_begin that the map region uses). After moecache_attach, a handle
 * may be used from several threads at once; open, attach and close may not
 * race with anything else on the same handle.
 *
 * docs/abi.md describes the driver's side of every call.
 */
#ifndef LIBMOECACHE_H
#define LIBMOECACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moecache.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The library is built with -fvisibility=hidden: what this header declares
 * is its whole exported API (lib/libmoecache.map versions it).
 */
#pragma GCC visibility push(default)

struct moecache;

/*
 * A read-only view of a pool's map region. Bound to the mapped region by
 * moecache_attach (or, for tests and tools, to any memory holding a map
 * region with moecache_map_bind). Every read goes through acquire loads.
 */
struct moecache_map {
	const struct moecache_map_header *hdr;
	const uint32_t *map;	  /* [n_layers * n_local]: slot or MOECACHE_NONE */
	const uint32_t *owner;	  /* [n_slots]: idx, FILLING | idx, or NONE */
	const uint64_t *last_use; /* [n_slots]: pool clock at the last pin */
	const uint32_t *pins;	  /* [n_slots]: pins held by all clients */
	const uint32_t *access;	  /* [n_layers * n_local]: acquires, wrapping */
	uint32_t n_layers;
	uint32_t n_local;
	uint32_t expert_begin;
	uint32_t n_slots;
	/*
	 * The bank table (struct moecache_map_bank[n_banks]), checked by
	 * moecache_map_bind; NULL for a map without one (a driver before
	 * banks), which reads as one bank of all n_slots. Read it through
	 * moecache_map_bank.
	 */
	const struct moecache_map_bank *banks;
	uint32_t n_banks; /* 1 or more once bound */
};

/* The pool a handle is attached to, as ATTACH returned it. */
struct moecache_pool_info {
	char name[MOECACHE_NAME_LEN];
	uint32_t role; /* enum moecache_role */
	uint32_t n_layers;
	uint32_t n_experts;
	uint32_t expert_begin;
	uint32_t expert_end;
	uint32_t n_local; /* expert_end - expert_begin */
	uint32_t n_slots;
	uint32_t pool_flags; /* MOECACHE_POOL_* at attach */
	uint64_t expert_bytes;
	struct moecache_offsets off;
};

/*
 * The one table of bank backends' names (enum moecache_backend): "cpu",
 * "cuda", "rocm", and "auto" for MOECACHE_BACKEND_NONE (a bank layout that
 * leaves the backend to the agent). moecache_backend_name() returns NULL for
 * an id this library does not know; moecache_backend_parse() returns
 * -EINVAL for a name it does not know (or NULL arguments) and leaves *out
 * alone.
 */
const char *moecache_backend_name(uint32_t backend);
int moecache_backend_parse(const char *name, uint32_t *out);

/* An imported bank: what a process needs to read (or write) slots. */
struct moecache_bank_map {
	uint32_t backend; /* enum moecache_backend */
	uint32_t n_slots;
	int fd; /* the bank file, owned by the map */
	bool writable;
	void *base;	/* CPU: the mapping; other backends: their handle */
	uint64_t bytes; /* size of the exported object */
	uint64_t slot_stride;
	uint64_t expert_bytes;
	struct moecache_bank desc; /* as BANK_GET returned it (desc.fd is fd) */
	/* The bank's place in the pool (from the map's bank table). */
	uint32_t index;	     /* the bank's index */
	uint32_t tier;	     /* 0 is the fastest */
	uint32_t slot_begin; /* its first global slot; n_slots above are its own */
};

struct moecache_acquire_result {
	uint32_t n_hits;   /* resident when the call was made */
	uint32_t n_pinned; /* pinned when it returned */
};

/* ---- handle ---- */

/* Opens the device (path NULL: MOECACHE_DEVICE). */
int moecache_open(const char *path, struct moecache **out);
/* Unmaps everything, closes the file (which drops its pins) and frees. */
void moecache_close(struct moecache *mc);
int moecache_fd(const struct moecache *mc);
int moecache_get_info(struct moecache *mc, struct moecache_info *out);

/*
 * Administration (CAP_SYS_ADMIN, or the owner for destroy); no attach needed.
 * req->n_banks and req->banks (a pointer to struct moecache_bank_layout
 * [n_banks]) lay the pool out in banks; n_banks 0 is one bank of n_slots.
 */
int moecache_pool_create(struct moecache *mc, const struct moecache_pool_create *req);
int moecache_pool_destroy(struct moecache *mc, const char *name);

/*
 * Binds the handle to the pool in role and maps its map region. An agent
 * handle is switched to non-blocking reads. -EALREADY if already attached.
 */
int moecache_attach(struct moecache *mc, const char *pool, enum moecache_role role);
/* moecache_open + moecache_attach; on error nothing is left open. */
int moecache_open_attach(const char *pool, enum moecache_role role, struct moecache **out);
/*
 * The same with MOECACHE_ATTACH_* flags. MOECACHE_ATTACH_FAST_PINS (clients
 * only) maps the handle's pins region: from then on moecache_acquire and
 * moecache_acquire_release pin resident experts without a system call; a
 * layer with a miss goes to ACQUIRE whole and costs one call more (its pins
 * become fast ones). The driver grants fast pins to the pool's owner uid
 * and CAP_SYS_ADMIN only; for anybody else the handle is attached without
 * them and pins with ACQUIRE (moecache_pool()->off.pins_size is then 0). The hits are reported to the driver in batches of 256,
 * or by moecache_report_flush. docs/abi.md says what the driver checks.
 * The pins region is not inherited across fork: a child must open its own
 * handle.
 */
int moecache_attach_flags(struct moecache *mc, const char *pool, enum moecache_role role,
			  uint32_t flags);
int moecache_open_attach_flags(const char *pool, enum moecache_role role, uint32_t flags,
			       struct moecache **out);
/*
 * Reports the hits a fast-pinning handle has not reported yet (stats and
 * the agent's policy see them then); 0 at once for other handles.
 */
int moecache_report_flush(struct moecache *mc);
/* NULL until attached. */
const struct moecache_pool_info *moecache_pool(const struct moecache *mc);
const struct moecache_map *moecache_map(const struct moecache *mc);

/* ---- map region (lock-free reads) ---- */

/* Binds m to a map region of size bytes at region; -EINVAL if it is not one. */
int moecache_map_bind(struct moecache_map *m, const void *region, size_t size);
/* The local index of (layer, global expert), or MOECACHE_NONE if out of range. */
uint32_t moecache_map_idx(const struct moecache_map *m, uint32_t layer, uint32_t expert);
/*
 * The slot holding (layer, expert) now, or MOECACHE_NONE: one acquire load,
 * a hint only (acquire pins). Out-of-range ids give MOECACHE_NONE.
 */
uint32_t moecache_map_slot(const struct moecache_map *m, uint32_t layer, uint32_t expert);
/*
 * The slots of count experts of one layer, read consistently under the
 * sequence counter. Returns how many are resident, or -EINVAL.
 */
int moecache_map_lookup(const struct moecache_map *m, uint32_t layer, const uint32_t *experts,
			uint32_t count, uint32_t *slots);
/* A consistent copy of owner[] (n_slots entries) and, if not NULL, map[]. */
int moecache_map_snapshot(const struct moecache_map *m, uint32_t *owner, uint32_t *map);
uint32_t moecache_map_owner(const struct moecache_map *m, uint32_t slot);
uint64_t moecache_map_last_use(const struct moecache_map *m, uint32_t slot);
uint32_t moecache_map_pins(const struct moecache_map *m, uint32_t slot);
uint32_t moecache_map_access(const struct moecache_map *m, uint32_t idx);
uint32_t moecache_map_flags(const struct moecache_map *m);
uint64_t moecache_map_clock(const struct moecache_map *m);
uint32_t moecache_map_agent_epoch(const struct moecache_map *m);

/* ---- client ---- */

/*
 * Pins the resident experts among count ids of one layer and writes their
 * slots (MOECACHE_NONE for the others); flags are MOECACHE_ACQ_*. With
 * MOECACHE_ACQ_WAIT it returns only once all are pinned, or fails having
 * pinned nothing. A WAIT the driver turns away because the caller's uid
 * has max_user_waits WAITs in progress on the pool already (EAGAIN,
 * nothing done) is tried again after a pause, until timeout_ms (0: no
 * limit) has passed: then -ETIMEDOUT; timeout_ms bounds the whole call.
 * res may be NULL.
 */
int moecache_acquire(struct moecache *mc, uint32_t layer, const uint32_t *experts, uint32_t count,
		     uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
		     struct moecache_acquire_result *res);
/*
 * One layer of a decode step in one system call: drops one pin on each of
 * release_slots (MOECACHE_NONE entries skipped; typically the previous
 * layer's slots, once their work completed), then acquires as
 * moecache_acquire. The release stays done if a WAIT then fails.
 */
int moecache_acquire_release(struct moecache *mc, const uint32_t *release_slots,
			     uint32_t release_count, uint32_t layer, const uint32_t *experts,
			     uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
			     struct moecache_acquire_result *res);
/* Drops one pin per listed slot; MOECACHE_NONE entries are skipped. */
int moecache_release(struct moecache *mc, const uint32_t *slots, uint32_t count);
int moecache_release_all(struct moecache *mc);
/* n_queued may be NULL. */
int moecache_prefetch(struct moecache *mc, uint32_t layer, const uint32_t *experts, uint32_t count,
		      uint32_t *n_queued);
/* layer MOECACHE_NONE: the whole pool. */
int moecache_stats(struct moecache *mc, uint32_t layer, struct moecache_stats *out);
/* The counters of one bank (MOECACHE_STATS_BANK); -EINVAL past the pool's banks. */
int moecache_stats_bank(struct moecache *mc, uint32_t bank, struct moecache_stats *out);

/*
 * Imports the pool's bank for reading (BANK_GET, then the backend's import:
 * the CPU backend maps the memfd read-only). -ENODATA while the agent has
 * set none; -EOPNOTSUPP for a backend this build cannot import.
 */
int moecache_bank_import(struct moecache *mc, struct moecache_bank_map *out);
void moecache_bank_unimport(struct moecache_bank_map *b);
/*
 * Host-visible address of a global slot (what acquire returns) in this
 * bank (CPU backend), or NULL (another bank's slot, out of range).
 */
const void *moecache_bank_slot(const struct moecache_bank_map *b, uint32_t slot);

/*
 * Maps the host region (read-only, or read-write for an agent or loader;
 * -EPERM for a writable map by a client). Mapping again returns the same
 * region; base and size may be NULL.
 */
int moecache_host_map(struct moecache *mc, bool writable, void **base, size_t *size);
/* The host record of (layer, global expert), or NULL (not mapped, out of range). */
const void *moecache_host_expert(const struct moecache *mc, uint32_t layer, uint32_t expert);
/* Same, writable; NULL unless the host region was mapped writable. */
void *moecache_host_expert_rw(const struct moecache *mc, uint32_t layer, uint32_t expert);

/* ---- the plan of a layer (lib/plan.c) ---- */

/*
 * For the experts of a layer that are not in the bank: which to wait for
 * (copied into the bank), which to compute on the CPU from the host pages
 * (moecache_host_expert) while the link does other work, and of those,
 * which to copy in behind them (admit). moecache-trace's decode time model
 * runs the same code (docs/policy.md, "The plan of one layer").
 *
 * One cost model, in microseconds:
 *   copy_us   one expert over one copy engine (expert bytes / link bandwidth);
 *   cpu_us    one expert computed by the host (expert bytes / the bytes of
 *             weights the host streams through its cores per second);
 *             0: the host computes nothing;
 *   layer_us  the device's compute for one layer;
 *   n_engines copy engines, each a serial link; a copy goes to the one
 *             free first;
 *   n_layers  the model's layers: an expert used now is used again one
 *             token (n_layers layers) later at the earliest.
 *
 * A layer ends when the device's compute, the copies waited for and the
 * CPU's experts are all done:
 *
 *	end = max(layer_us, last waited copy done, n_cpu * cpu_us)
 *
 * The plan sends to the CPU the experts whose copies would finish last
 * (most copy time left first), as many as make end smallest; on a tie,
 * fewer (a copy waited for is admitted, so it hits next time). A CPU
 * expert is admitted only when its copy, queued behind every copy ahead
 * and the earlier admissions, starts within one token (n_layers x
 * layer_us): on a saturated link the CPU takes the misses and copies do
 * not pile up; on a link with room every miss is admitted, so computing
 * on the CPU costs no future hits.
 */
#define MOECACHE_PLAN_MAX_ENGINES 16
/* The most experts one call plans (top-k of every sequence of a batch). */
#define MOECACHE_PLAN_MAX_ITEMS 1024

struct moecache_plan_cost {
	double copy_us;
	double cpu_us; /* 0: no host compute */
	double layer_us;
	uint32_t n_engines; /* 1 .. MOECACHE_PLAN_MAX_ENGINES */
	uint32_t n_layers;
};

enum moecache_plan_action {
	MOECACHE_PLAN_WAIT = 0,	     /* copy it (or let its copy finish) and wait */
	MOECACHE_PLAN_CPU = 1,	     /* compute on the CPU; not admitted */
	MOECACHE_PLAN_CPU_ADMIT = 2, /* compute on the CPU; copied in behind */
	MOECACHE_PLAN_HIT = 3,	     /* in the bank (moecache_acquire_plan only) */
};

/* What the link already has to do, in microseconds from now. */
struct moecache_plan_queue {
	double engine_busy_us[MOECACHE_PLAN_MAX_ENGINES]; /* copies ahead, per engine */
	double background_us;				  /* admissions queued (all engines) */
};

/* 0 if the cost is usable (finite, copy_us > 0, engines and layers in range), else -EINVAL. */
int moecache_plan_cost_check(const struct moecache_plan_cost *cost);
/*
 * Plans n experts (n <= MOECACHE_PLAN_MAX_ITEMS). copy_left_us[i] is the
 * copy time expert i still needs (copy_us for one not in the bank, less
 * for one whose copy is under way). Writes action[i] (WAIT, CPU or
 * CPU_ADMIT) and, if end_us is not NULL, the layer's expected duration
 * (>= layer_us). Returns 0 or -EINVAL. The queue is not changed.
 */
int moecache_plan_layer(const struct moecache_plan_cost *cost, const struct moecache_plan_queue *q,
			const double *copy_left_us, uint32_t n, enum moecache_plan_action *action,
			double *end_us);
/*
 * The copy queue as the driver publishes it in the map header: queued +
 * inflight requests, each counted as one whole copy ahead of a new miss
 * (the map does not say which are hints nor how far a copy has got),
 * spread evenly over the engines. Writes *q and, if not NULL, *depth
 * (queued + inflight). 0 or -EINVAL.
 */
int moecache_plan_queue_read(const struct moecache_map *m, const struct moecache_plan_cost *cost,
			     struct moecache_plan_queue *q, uint32_t *depth);

struct moecache_plan_result {
	uint32_t n_hits;      /* resident at the look-up: pinned */
	uint32_t n_waited;    /* misses copied and waited for: pinned */
	uint32_t n_cpu;	      /* for the CPU: slots[i] is MOECACHE_NONE */
	uint32_t n_admitted;  /* of n_cpu, queued for a copy behind the layer */
	uint32_t queue_depth; /* queued + inflight, as the plan read them */
	uint32_t pad;
	double end_us; /* the layer's expected duration */
};

/*
 * The plan of count experts of one layer against the map as it is now,
 * without a system call: action[i] is MOECACHE_PLAN_HIT for an expert
 * resident in m, the plan's for the others (the queue from
 * moecache_plan_queue_read). res may be NULL. 0 or -EINVAL.
 */
int moecache_plan_lookup(const struct moecache_map *m, const struct moecache_plan_cost *cost,
			 uint32_t layer, const uint32_t *experts, uint32_t count, uint8_t *action,
			 struct moecache_plan_result *res);
/*
 * moecache_acquire_release with the plan: drops the pins of release_slots,
 * plans the layer (moecache_plan_lookup), then pins the hits and waits for
 * the misses the plan copies (one ACQUIRE with MOECACHE_ACQ_WAIT), queues
 * the admitted CPU experts (ACQUIRE with MOECACHE_ACQ_CPU), and tells the
 * driver of the other CPU experts without queueing them
 * (MOECACHE_ACQ_NO_QUEUE). Every expert is acquired once, so the access
 * and miss counters and the agent's policy see each access once. The agent
 * knows a miss was computed on the CPU and not admitted by never getting
 * a request for it; an admitted one reaches it as a MOECACHE_REQ_CPU
 * request, which it serves after the pending demand ones, such as the
 * layer's waited copies (docs/policy.md).
 *
 * Writes slots[i] (MOECACHE_NONE for an expert to compute on the CPU: read
 * it with moecache_host_expert) and action[i]; an expert the plan gave the
 * CPU that became resident meanwhile is pinned and reported as HIT. flags:
 * 0 or MOECACHE_ACQ_KEEP_WAITING. On an error nothing stays pinned (the
 * release stays done). res may be NULL.
 */
int moecache_acquire_plan(struct moecache *mc, const struct moecache_plan_cost *cost,
			  const uint32_t *release_slots, uint32_t release_count, uint32_t layer,
			  const uint32_t *experts, uint32_t count, uint32_t *slots, uint8_t *action,
			  uint32_t flags, uint32_t timeout_ms, struct moecache_plan_result *res);

/*
 * The gate of a prefetch (the same as the simulator's): how many whole
 * copies the link can do before the next layer starts, after the copies
 * the map says are ahead: floor((n_engines x layer_us - queued copy time)
 * / copy_us), at least 0. A prefetch beyond that would still be copying
 * when the next layer needs the link for its misses. -EINVAL for a bad
 * argument.
 */
int moecache_plan_prefetch_room(const struct moecache_map *m,
				const struct moecache_plan_cost *cost);
/*
 * moecache_prefetch through the gate: hints, in the order given (an
 * engine's router puts its likeliest first), the experts of experts[]
 * that are not resident, as many as moecache_plan_prefetch_room allows;
 * none when it allows none. *n_queued (may be NULL): what the driver
 * queued. 0 or -errno.
 */
int moecache_prefetch_plan(struct moecache *mc, const struct moecache_plan_cost *cost,
			   uint32_t layer, const uint32_t *experts, uint32_t count,
			   uint32_t *n_queued);

/* ---- GPU banks (CUDA, ROCm): lib/gpu/bank_cuda.c, lib/gpu/bank_rocm.c ---- */

/*
 * The device address of a global slot in an imported CUDA or ROCm bank, as the
 * importing process's kernels see it (CUDA: a CUdeviceptr valid on the
 * bank's device; ROCm: a GPU VA in the VM of the render node the import
 * opened). 0 for a CPU bank, a slot out of range or no import.
 */
uint64_t moecache_bank_slot_addr(const struct moecache_bank_map *b, uint32_t slot);
/* The last error of a GPU bank call in words ("" if none, or for a CPU bank). */
const char *moecache_bank_error(const struct moecache_bank_map *b);
/*
 * Why the last GPU bank import of this thread failed ("" if it did not):
 * a failed moecache_bank_import leaves no map to carry a message (as
 * dlerror, the text is per thread).
 */
const char *moecache_bank_import_error(void);

/*
 * moecache_acquire for a GPU client that is about to queue work on
 * stream (CUDA: a CUstream, NULL for the legacy default stream; ROCm:
 * ignored). Refused with -EBUSY while stream is capturing a CUDA graph:
 * pins taken during a capture would be baked into every replay of the
 * graph while the slots move on. Polls the deferred releases first.
 */
int moecache_bank_acquire(struct moecache *mc, struct moecache_bank_map *b, void *stream,
			  uint32_t layer, const uint32_t *experts, uint32_t count, uint32_t *slots,
			  uint32_t flags, uint32_t timeout_ms, struct moecache_acquire_result *res);
/*
 * Drops one pin per slot once the work queued on stream so far has run
 * (CUDA: an event recorded on stream now; -EOPNOTSUPP for ROCm, use
 * moecache_bank_release_when). -EBUSY while stream is capturing. The
 * pins are dropped by a later call on this bank map (any of the
 * moecache_bank_* release or acquire calls); a release that fails on the
 * way is reported by moecache_bank_release_poll/flush, or else only in
 * moecache_bank_error.
 */
int moecache_bank_release_after(struct moecache *mc, struct moecache_bank_map *b, void *stream,
				const uint32_t *slots, uint32_t count);
/*
 * Drops one pin per slot once done(arg) returns > 0 (0: not yet, < 0: the
 * work failed: the pins are dropped all the same). For runtimes the
 * library does not load (hipEventQuery, a fence word). arg must live
 * until then.
 */
int moecache_bank_release_when(struct moecache *mc, struct moecache_bank_map *b,
			       int (*done)(void *arg), void *arg, const uint32_t *slots,
			       uint32_t count);
/* Drops the pins whose work has run; returns how many releases were made, or -errno. */
int moecache_bank_release_poll(struct moecache_bank_map *b);
/* Waits for all deferred work and drops its pins: 0 or -errno. */
int moecache_bank_release_flush(struct moecache_bank_map *b);
/* Deferred releases still waiting. */
uint32_t moecache_bank_release_pending(const struct moecache_bank_map *b);

/*
 * ---- banks and routes: pools of several banks ----
 *
 * A pool's slots are split into banks (uapi/moecache.h: struct
 * moecache_map_bank): bank i owns the global slots [slot_begin,
 * slot_begin + n_slots), on its own backend and device, in its tier. The
 * slots acquire returns are global; a route sorts the experts of one
 * acquire by the bank they are resident in, so that a caller runs each on
 * the device that holds it, and the cold ones (not resident: NONE) from
 * the host pages. A pool of one bank routes everything to bank 0. A pinned
 * slot stays readable in its bank until its pins are dropped, even if the
 * agent moves the expert to another bank meanwhile (MOECACHE_EVICT_MOVE):
 * route what the acquire pinned, not what the map says later.
 */

/*
 * The number of banks (1 or more), the layout of bank index (-EINVAL past
 * the last) and the bank of a global slot (MOECACHE_NONE if out of
 * range). backend, device and flags change when the agent sets the bank;
 * the slot range and tier never do. moecache_map_bind refuses with
 * -EPROTO a bank table that does not partition the slots in order of
 * non-decreasing tier.
 */
uint32_t moecache_map_n_banks(const struct moecache_map *m);
int moecache_map_bank(const struct moecache_map *m, uint32_t index, struct moecache_map_bank *out);
uint32_t moecache_map_slot_bank(const struct moecache_map *m, uint32_t slot);

/* One expert of a route. */
struct moecache_route_entry {
	uint32_t pos;	 /* its index in the acquire's experts[] and slots[] */
	uint32_t expert; /* global expert id */
	uint32_t bank;	 /* the bank it is resident in, or MOECACHE_NONE (cold) */
	uint32_t slot;	 /* global slot (what release takes), or MOECACHE_NONE */
	uint32_t local;	 /* slot - the bank's slot_begin, or MOECACHE_NONE */
};

/*
 * The experts of one acquire, grouped: group b < n_banks holds the ones
 * resident in bank b, group n_banks the cold ones; each group keeps the
 * acquire's order. Group g is entries[first[g] .. first[g + 1]).
 */
struct moecache_route {
	uint32_t n_banks; /* of the map it was made for */
	uint32_t max;	  /* room in entries */
	uint32_t count;	  /* entries routed */
	uint32_t *first;  /* [n_banks + 3]; the entries past n_banks + 1 are scratch */
	struct moecache_route_entry *entries; /* [max] */
};

/* A route for up to max experts per acquire over m's banks; free it with moecache_route_free. */
int moecache_route_new(const struct moecache_map *m, uint32_t max, struct moecache_route **out);
void moecache_route_free(struct moecache_route *r);
/*
 * Routes count experts with their slots (as acquire wrote them; NONE for
 * a cold one). -EINVAL for a slot out of range or a route made for
 * another number of banks; -E2BIG past r->max.
 */
int moecache_route_build(const struct moecache_map *m, const uint32_t *experts,
			 const uint32_t *slots, uint32_t count, struct moecache_route *r);
/* The entries of bank b (b == r->n_banks: the cold ones); *n receives how many. */
const struct moecache_route_entry *moecache_route_group(const struct moecache_route *r, uint32_t b,
							uint32_t *n);
/*
 * moecache_acquire_release (release_count 0: moecache_acquire), then
 * moecache_route_build of what it pinned into route. The pins are as the
 * acquire left them whether or not the route is built.
 */
int moecache_acquire_route(struct moecache *mc, const uint32_t *release_slots,
			   uint32_t release_count, uint32_t layer, const uint32_t *experts,
			   uint32_t count, uint32_t *slots, uint32_t flags, uint32_t timeout_ms,
			   struct moecache_acquire_result *res, struct moecache_route *route);

/*
 * Imports bank index as moecache_bank_import imports bank 0 (which is what
 * that call does): BANK_GET of the index, then the backend's import. The
 * map's slot range of the bank must fit the object (-EPROTO otherwise).
 */
int moecache_bank_import_index(struct moecache *mc, uint32_t index, struct moecache_bank_map *out);
int moecache_bank_import_index_rw(struct moecache *mc, uint32_t index,
				  struct moecache_bank_map *out);
/*
 * Imports every bank of the pool into out[0 .. n_banks) (max entries of
 * room); returns the number of banks, or -errno with none left imported
 * (-ENODATA while the agent has not set one of them; -ENOSPC if max is
 * too small).
 */
int moecache_bank_import_all(struct moecache *mc, struct moecache_bank_map *out, uint32_t max);

/* ---- agent ---- */

/* Reads up to max requests without blocking; returns how many (0: none). */
int moecache_read_requests(struct moecache *mc, struct moecache_request *reqs, uint32_t max);
/*
 * Takes slot for filling with (layer, expert); with layer and expert
 * MOECACHE_NONE only frees it. old_layer/old_expert (may be NULL) receive
 * what the slot held.
 */
int moecache_evict(struct moecache *mc, uint32_t slot, uint32_t layer, uint32_t expert,
		   uint32_t *old_layer, uint32_t *old_expert);
/* moecache_evict with MOECACHE_EVICT_* flags (MOVE: a promotion or a demotion). */
int moecache_evict_flags(struct moecache *mc, uint32_t slot, uint32_t layer, uint32_t expert,
			 uint32_t flags, uint32_t *old_layer, uint32_t *old_expert);
int moecache_commit(struct moecache *mc, const struct moecache_fill *fills, uint32_t count);
int moecache_abort(struct moecache *mc, const struct moecache_fill *fills, uint32_t count);
/* Hands the bank over; the driver keeps its own reference to bank->fd. */
int moecache_bank_set(struct moecache *mc, const struct moecache_bank *bank);
/* The raw BANK_GET: bank->fd is a new file descriptor the caller owns. */
int moecache_bank_get(struct moecache *mc, struct moecache_bank *bank);
/* BANK_GET of bank index (moecache_bank_get is index 0). */
int moecache_bank_get_index(struct moecache *mc, uint32_t index, struct moecache_bank *bank);

/* ---- loader (or agent) ---- */

/* op: MOECACHE_LOAD_BEGIN or MOECACHE_LOAD_DONE. */
int moecache_load(struct moecache *mc, uint32_t op);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* LIBMOECACHE_H */
