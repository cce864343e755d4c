/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * moecache: machine-wide residency of Mixture-of-Experts experts.
 *
 * The ABI of /dev/moecache. Every struct is fixed-width and explicitly
 * padded; padding and reserved fields must be zero on input. New behaviour
 * gets a new ioctl, a flags bit, or fields appended to a struct (whose
 * size the ioctl number carries; see MOECACHE_IOC_MAGIC). docs/abi.md
 * describes each ioctl: its arguments, its errors and who may call it.
 */
#ifndef _UAPI_LINUX_MOECACHE_H
#define _UAPI_LINUX_MOECACHE_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define MOECACHE_ABI_VERSION	2
#define MOECACHE_DEVICE		"/dev/moecache"
#define MOECACHE_NAME_LEN	64

/* A map entry or owner entry that names nothing. */
#define MOECACHE_NONE		0xffffffffu
/* owner[slot]: the slot is being filled; the low bits name the target expert. */
#define MOECACHE_OWNER_FILLING	0x80000000u
#define MOECACHE_OWNER_IDX_MASK	0x7fffffffu

enum moecache_role {
	MOECACHE_ROLE_NONE	= 0,
	MOECACHE_ROLE_CLIENT	= 1,	/* reads the map, pins, requests */
	MOECACHE_ROLE_AGENT	= 2,	/* the one process that evicts and commits */
	MOECACHE_ROLE_LOADER	= 3,	/* writes host pages, marks the pool loaded */
};

enum moecache_backend {
	MOECACHE_BACKEND_NONE	= 0,
	MOECACHE_BACKEND_CPU	= 1,	/* bank is a memfd in host memory */
	MOECACHE_BACKEND_CUDA	= 2,	/* bank is a cuMemCreate POSIX fd handle */
	MOECACHE_BACKEND_ROCM	= 3,	/* bank is an amdgpu dma-buf */
};

/* MOECACHE_IOC_GET_INFO: limits of the driver; needs no attachment. */
struct moecache_info {
	__u32 abi_version;
	__u32 flags;
	__u32 max_pools;
	__u32 max_layers;
	__u32 max_experts;
	__u32 max_slots;
	__u32 max_batch;		/* most entries in one list argument */
	__u32 n_pools;
	__u64 max_host_bytes;		/* limit on all pools' host pages */
	__u64 host_bytes_used;
	__u64 max_expert_bytes;
	__u32 max_banks;		/* most banks in one pool (module param) */
	__u32 pad;
	__u64 reserved[3];
};

/*
 * One bank of a pool, as its creator lays it out. Bank i owns the global
 * slots [sum of n_slots of banks 0..i-1, + n_slots): every per-slot array
 * (owner, last_use, pins, a client's fast pins) keeps one global slot
 * space, and an ACQUIRE's slots are global. Tiers are non-decreasing with
 * the bank index (0 is the fastest). backend NONE lets the agent choose;
 * otherwise BANK_SET of this bank must name this backend and device, and
 * no two banks of a pool may name the same (backend, device).
 */
struct moecache_bank_layout {
	__u32 n_slots;
	__u32 tier;
	__u32 backend;			/* enum moecache_backend */
	__u32 device;			/* backend's device ordinal */
	__u32 flags;			/* none defined: must be 0 */
	__u32 pad;
};

/*
 * Pool creation. mode is a permission mask as for IPC objects (0640...).
 * A struct of MOECACHE_POOL_CREATE_SIZE_VER0 bytes (ABI 2 before banks)
 * is accepted and reads as n_banks 0: one bank of n_slots, tier 0.
 */
struct moecache_pool_create {
	char name[MOECACHE_NAME_LEN];	/* NUL-terminated, [A-Za-z0-9._-] */
	__u32 n_layers;
	__u32 n_experts;		/* experts per layer in the whole model */
	__u32 expert_begin;		/* this rank's local range [begin, end) */
	__u32 expert_end;
	__u64 expert_bytes;		/* a multiple of the page size */
	__u32 n_slots;			/* bank slots shared by all layers */
	__u32 uid;
	__u32 gid;
	__u32 mode;
	__u32 flags;			/* none defined: must be 0 */
	__u32 pad;
	/* banks; n_banks 0: one bank of n_slots */
	__u32 n_banks;			/* at most moecache_info.max_banks */
	__u32 pad2;
	__u64 banks;			/* user pointer to struct moecache_bank_layout[n_banks] */
};
#define MOECACHE_POOL_CREATE_SIZE_VER0	112

/* Destroy, or ask for a pool by name. */
struct moecache_pool_name {
	char name[MOECACHE_NAME_LEN];
	__u32 flags;			/* none defined: must be 0 */
	__u32 pad;
};

/*
 * Regions of an attached fd, at the mmap offsets given here. The map
 * region is read-only for everybody; the host region is read-write for
 * the agent and the loader, read-only for clients. The pins region
 * (pins_size 0 unless attached with MOECACHE_ATTACH_FAST_PINS) belongs to
 * this fd alone and is read-write.
 */
struct moecache_offsets {
	__u64 map_offset;
	__u64 map_size;
	__u64 host_offset;
	__u64 host_size;
	__u64 pins_offset;
	__u64 pins_size;
	__u64 reserved[2];
};

/*
 * Fast pins: a client attached with MOECACHE_ATTACH_FAST_PINS pins
 * resident slots without a system call. Its pins region is
 * __u32 pins[n_slots], its own count of pins on each slot, written by it
 * alone. To pin expert idx: s = map[idx] with an acquire load; if s is a
 * slot, store pins[s] + 1, then a full barrier (seq_cst fence), then load
 * map[idx] again: still s, the slot is pinned and holds idx; otherwise put
 * pins[s] back and use ACQUIRE. To release, store pins[s] - 1 with release
 * order. The driver unmaps a resident slot only after unpublishing it, a
 * full barrier and finding no fast pin on it in any client's region: EVICT
 * of a fast-pinned slot is -EBUSY, as for one pinned by ACQUIRE. The pins
 * go with the fd. Hits taken this way are reported with REPORT so that the
 * counters and the agent see them. The driver cannot bound fast pins, so
 * only the pool's owner uid and CAP_SYS_ADMIN may take them: ATTACH with
 * FAST_PINS is -EPERM for anybody else (both the caller and the file's
 * opener must qualify).
 */
#define MOECACHE_ATTACH_FAST_PINS	(1u << 0)	/* clients only */
#define MOECACHE_ATTACH_FLAGS_ALL	0x1u

/* MOECACHE_IOC_ATTACH: bind this fd to a pool in one role. */
struct moecache_attach {
	char name[MOECACHE_NAME_LEN];
	__u32 role;			/* enum moecache_role */
	__u32 flags;			/* MOECACHE_ATTACH_* */
	/* out */
	__u32 n_layers;
	__u32 n_experts;
	__u32 expert_begin;
	__u32 expert_end;
	__u32 n_slots;
	__u32 pool_flags;		/* MOECACHE_POOL_* */
	__u64 expert_bytes;
	struct moecache_offsets off;
};

/* pool_flags and moecache_map_header.flags */
#define MOECACHE_POOL_LOADED		(1u << 0)	/* host pages hold every expert */
#define MOECACHE_POOL_AGENT		(1u << 1)	/* an agent is attached */
#define MOECACHE_POOL_BANK		(1u << 2)	/* a bank has been set */

/* acquire flags */
#define MOECACHE_ACQ_WAIT		(1u << 0)	/* sleep until every expert is pinned */
#define MOECACHE_ACQ_KEEP_WAITING	(1u << 1)	/* with WAIT: no agent is no error */
#define MOECACHE_ACQ_NO_QUEUE		(1u << 2)	/* pin hits only, queue nothing */
#define MOECACHE_ACQ_CPU		(1u << 3)	/* misses computed on the CPU */
#define MOECACHE_ACQ_FLAGS_ALL		0xfu

/*
 * MOECACHE_IOC_ACQUIRE: one layer, count expert ids (global ids, inside
 * the pool's local range) -> slots. Resident experts are pinned and get
 * their slot; the others get MOECACHE_NONE and are queued for the agent.
 * With WAIT the call returns only when every expert is pinned (0), or
 * fails having pinned nothing (-ETIMEDOUT, -EPIPE, -EIO, -EINTR, -EDQUOT);
 * a WAIT for more experts than the bank has slots is -EINVAL. Of the WAITs
 * asleep on a pool, only the oldest holds pins while it sleeps.
 * -EDQUOT: the clients of the file opener's uid would hold pins on more
 * than max_pin_share percent of the pool's slots (the pool's owner and
 * CAP_SYS_ADMIN are exempt); the call is refused whole, or a WAIT whose
 * room the uid's other files took meanwhile gives up.
 * -EAGAIN (WAIT only): the clients of that uid have max_user_waits WAITs
 * in progress on the pool already (the same exemptions); nothing changed.
 * With CPU the caller computes this call's misses on the CPU: they are
 * queued as MOECACHE_REQ_CPU (an admission nobody waits on) instead of
 * MOECACHE_REQ_DEMAND; WAIT|CPU is -EINVAL, NO_QUEUE|CPU queues nothing.
 */
struct moecache_acquire {
	__u32 layer;
	__u32 count;
	__u64 experts;			/* user pointer to __u32[count] */
	__u64 slots;			/* user pointer to __u32[count], out */
	__u32 flags;
	__u32 timeout_ms;		/* with WAIT; 0: no limit */
	/* out */
	__u32 n_hits;			/* resident when the call was made */
	__u32 n_pinned;			/* pinned when it returned */
	__u64 reserved;
};

/*
 * MOECACHE_IOC_ACQUIRE_RELEASE: one decode step of one layer in one call.
 * Drops one pin on each of release_count slots (the previous step's),
 * then acquires as MOECACHE_IOC_ACQUIRE.
 */
struct moecache_acquire_release {
	struct moecache_acquire acquire;
	__u64 release_slots;		/* user pointer to __u32[release_count] */
	__u32 release_count;		/* may be 0 */
	__u32 flags;			/* none defined: must be 0 */
};

#define MOECACHE_REL_ALL		(1u << 0)	/* drop every pin of this fd */

/* MOECACHE_IOC_RELEASE: drop one pin on each slot listed. */
struct moecache_release {
	__u32 count;
	__u32 flags;
	__u64 slots;			/* user pointer to __u32[count] */
};

/*
 * MOECACHE_IOC_REPORT (client): accesses the caller served itself, with
 * fast pins: each entry counts as an acquire of one expert that hit. The
 * access counters, the hit counters and, for experts still resident, the
 * last-use stamps are updated as ACQUIRE would have. All or nothing.
 */
struct moecache_access {
	__u32 layer;
	__u32 expert;			/* global id */
};

struct moecache_report {
	__u32 count;
	__u32 flags;			/* none defined: must be 0 */
	__u64 accesses;			/* user pointer to struct moecache_access[count] */
};

/* MOECACHE_IOC_PREFETCH: hint experts of one layer that will be needed. */
struct moecache_prefetch {
	__u32 layer;
	__u32 count;
	__u64 experts;			/* user pointer to __u32[count] */
	__u32 flags;			/* none defined: must be 0 */
	__u32 n_queued;			/* out */
};

/* One request, as read() returns them to the agent. */
#define MOECACHE_REQ_DEMAND		(1u << 0)	/* somebody waits or missed */
#define MOECACHE_REQ_PREFETCH		(1u << 1)	/* a hint */
#define MOECACHE_REQ_CPU		(1u << 2)	/* an ACQ_CPU miss: nobody waits */
/*
 * The flags of one request are those of every ask since it was queued,
 * except that DEMAND wins: a request with DEMAND never carries CPU.
 */
struct moecache_request {
	__u32 layer;
	__u32 expert;			/* global id */
	__u32 flags;
	__u32 pad;
};

/*
 * MOECACHE_IOC_EVICT (agent): take a slot to fill it with (layer,
 * expert). A resident victim is unmapped first; -EBUSY if it is pinned.
 * With layer == MOECACHE_NONE the slot is just made free.
 *
 * With MOECACHE_EVICT_MOVE the target may be resident in another slot
 * (of another bank: a promotion or a demotion); it stays resident and
 * readable there while the new slot fills. COMMIT then publishes the new
 * slot and unpublishes the old one in one change of the map (one seq
 * write), so an expert is resident in at most one bank at any time; the
 * old slot becomes free, and is reused only once its pins are gone. An
 * ABORT, or the agent's death, leaves the expert where it was. Without
 * MOVE, a target already resident or filling is -EEXIST.
 */
#define MOECACHE_EVICT_MOVE		(1u << 0)
#define MOECACHE_EVICT_FLAGS_ALL	0x1u
struct moecache_evict {
	__u32 slot;
	__u32 layer;
	__u32 expert;
	__u32 flags;			/* MOECACHE_EVICT_* */
	/* out: what the slot held, or MOECACHE_NONE */
	__u32 old_layer;
	__u32 old_expert;
};

/* One filled slot, in a COMMIT or ABORT batch. */
struct moecache_fill {
	__u32 slot;
	__u32 layer;
	__u32 expert;
	__u32 flags;			/* MOECACHE_FILL_PREFETCH */
};
#define MOECACHE_FILL_PREFETCH		(1u << 0)

/*
 * MOECACHE_IOC_COMMIT / MOECACHE_IOC_ABORT (agent): publish (or drop)
 * filling slots whose copies completed (or failed). All or nothing.
 */
struct moecache_fill_batch {
	__u32 count;
	__u32 flags;			/* none defined: must be 0 */
	__u64 fills;			/* user pointer to struct moecache_fill[count] */
};

/*
 * MOECACHE_IOC_BANK_SET (agent) / MOECACHE_IOC_BANK_GET (attached), of
 * bank index (-EINVAL past the pool's banks). The object holds the bank's
 * own slots: slot s of the pool is at (s - slot_begin) * slot_stride.
 */
struct moecache_bank {
	__s32 fd;			/* in for SET; out for GET (O_CLOEXEC) */
	__u32 backend;			/* enum moecache_backend */
	__u64 bank_bytes;		/* size of the exported object */
	__u64 slot_stride;		/* bytes from one slot to the next */
	__u32 device;			/* backend's device ordinal */
	__u32 flags;			/* none defined: must be 0 */
	__u8 device_uuid[16];
	__u32 index;			/* in: the bank */
	/* out, for SET and GET: the bank's layout */
	__u32 tier;
	__u32 slot_begin;
	__u32 n_slots;
};

/* MOECACHE_IOC_LOAD (loader or agent): bracket writes of host pages. */
#define MOECACHE_LOAD_BEGIN		1	/* clears LOADED */
#define MOECACHE_LOAD_DONE		2	/* sets LOADED */
struct moecache_load {
	__u32 op;
	__u32 flags;			/* none defined: must be 0 */
};

#define MOECACHE_WAIT_BUCKETS		16	/* log2 buckets of microseconds */

/*
 * MOECACHE_IOC_STATS: counters of the pool, or of one layer. With
 * MOECACHE_STATS_BANK, hits, prefetch_hits, evictions, commits and the
 * pool-wide slot state (resident, filling, pinned_slots, pins) count the
 * slots of bank `bank` only; the other counters stay the pool's.
 */
#define MOECACHE_STATS_BANK		(1u << 0)
#define MOECACHE_STATS_FLAGS_ALL	0x1u
struct moecache_stats {
	__u32 layer;			/* in: a layer, or MOECACHE_NONE for all */
	__u32 flags;			/* MOECACHE_STATS_* */
	__u64 hits;
	__u64 misses;
	__u64 prefetch_hits;		/* hits on slots filled by a prefetch */
	__u64 prefetches;		/* prefetch hints queued */
	__u64 evictions;
	__u64 commits;
	__u64 aborts;
	__u64 bytes_copied;		/* committed fills x expert_bytes */
	__u64 waits;
	__u64 wait_ns;
	__u64 wait_hist[MOECACHE_WAIT_BUCKETS];	/* bucket i: < 2^i us */
	/* pool-wide state, filled for any layer */
	__u32 resident;
	__u32 filling;
	__u32 pinned_slots;
	__u32 pins;
	__u32 queued;
	__u32 inflight;
	__u32 n_clients;
	__u32 agent_pid;		/* 0 when there is none */
	__u32 bank;			/* in, with MOECACHE_STATS_BANK; else 0 */
	__u32 pad;
	__u64 reserved[3];
};

/*
 * The map region, read-only in every attached process. Arrays start at
 * the byte offsets in the header. The driver writes under seq: odd while
 * a change is being made. map[] entries are stored with release order,
 * after the copy into the slot completed; read them with acquire loads.
 */
#define MOECACHE_MAP_MAGIC		0x4d4f4543u	/* "MOEC" */
struct moecache_map_header {
	__u32 magic;
	__u32 version;
	__u32 seq;
	__u32 flags;			/* MOECACHE_POOL_* */
	__u32 n_layers;
	__u32 n_experts;
	__u32 expert_begin;
	__u32 expert_end;
	__u32 n_slots;
	__u32 agent_epoch;		/* bumped on each agent attach */
	__u64 expert_bytes;
	__u64 clock;			/* logical time of the last acquire */
	__u64 map_off;			/* __u32[n_layers][local]: slot or NONE */
	__u64 owner_off;		/* __u32[n_slots]: layer*local+e, FILLING|idx, NONE */
	__u64 last_use_off;		/* __u64[n_slots]: clock at last pin */
	__u64 pins_off;			/* __u32[n_slots]: pins held */
	__u64 access_off;		/* __u32[n_layers][local]: acquires asking for it */
	__u64 bank_off;			/* struct moecache_map_bank[n_banks] */
	__u32 n_banks;			/* 1 or more */
	__u32 queued;			/* requests waiting for the agent */
	__u32 inflight;			/* requests the agent has read, not yet done */
	__u32 pad;
	__u64 reserved[3];
};

/*
 * One bank in the map region. A reader finds the bank of slot s as the
 * one with slot_begin <= s < slot_begin + n_slots. backend and device are
 * the layout's until BANK_SET, then the set object's.
 */
#define MOECACHE_MAP_BANK_SET		(1u << 0)	/* an object is set */
struct moecache_map_bank {
	__u32 slot_begin;
	__u32 n_slots;
	__u32 tier;
	__u32 backend;
	__u32 device;
	__u32 flags;			/* MOECACHE_MAP_BANK_* */
	__u64 reserved;
};

/*
 * 0xBB: free in Documentation/userspace-api/ioctl/ioctl-number.rst (ABI 1
 * used 0xB7, which is nsfs's: its NOP was NS_GET_USERNS).
 *
 * Each command's size bits are the size of its struct, and are its size
 * field: a caller may pass a longer struct (of a later ABI) whose bytes
 * past the struct the driver knows are zero (E2BIG otherwise, as for
 * openat2()); a shorter one is EINVAL; another direction is ENOTTY.
 */
#define MOECACHE_IOC_MAGIC		0xbb

#define MOECACHE_IOC_GET_INFO	_IOR(MOECACHE_IOC_MAGIC, 0x00, struct moecache_info)
#define MOECACHE_IOC_NOP	_IO(MOECACHE_IOC_MAGIC, 0x01)
#define MOECACHE_IOC_POOL_CREATE _IOW(MOECACHE_IOC_MAGIC, 0x02, struct moecache_pool_create)
#define MOECACHE_IOC_POOL_DESTROY _IOW(MOECACHE_IOC_MAGIC, 0x03, struct moecache_pool_name)
#define MOECACHE_IOC_ATTACH	_IOWR(MOECACHE_IOC_MAGIC, 0x04, struct moecache_attach)
#define MOECACHE_IOC_ACQUIRE	_IOWR(MOECACHE_IOC_MAGIC, 0x05, struct moecache_acquire)
#define MOECACHE_IOC_RELEASE	_IOW(MOECACHE_IOC_MAGIC, 0x06, struct moecache_release)
#define MOECACHE_IOC_PREFETCH	_IOWR(MOECACHE_IOC_MAGIC, 0x07, struct moecache_prefetch)
#define MOECACHE_IOC_EVICT	_IOWR(MOECACHE_IOC_MAGIC, 0x08, struct moecache_evict)
#define MOECACHE_IOC_COMMIT	_IOW(MOECACHE_IOC_MAGIC, 0x09, struct moecache_fill_batch)
#define MOECACHE_IOC_ABORT	_IOW(MOECACHE_IOC_MAGIC, 0x0a, struct moecache_fill_batch)
#define MOECACHE_IOC_BANK_SET	_IOW(MOECACHE_IOC_MAGIC, 0x0b, struct moecache_bank)
#define MOECACHE_IOC_BANK_GET	_IOWR(MOECACHE_IOC_MAGIC, 0x0c, struct moecache_bank)
#define MOECACHE_IOC_LOAD	_IOW(MOECACHE_IOC_MAGIC, 0x0d, struct moecache_load)
#define MOECACHE_IOC_STATS	_IOWR(MOECACHE_IOC_MAGIC, 0x0e, struct moecache_stats)
#define MOECACHE_IOC_ACQUIRE_RELEASE \
	_IOWR(MOECACHE_IOC_MAGIC, 0x0f, struct moecache_acquire_release)
#define MOECACHE_IOC_REPORT	_IOW(MOECACHE_IOC_MAGIC, 0x10, struct moecache_report)

#endif /* _UAPI_LINUX_MOECACHE_H */
