/* SPDX-License-Identifier: GPL-2.0 */
/*
 * moecache: machine-wide residency of Mixture-of-Experts experts. The
 * internals shared by the parts of the driver:
 *
 *   pool.c    pool lifetime, limits, region layout, host pages
 *   map.c     unpublishing, unmapping and flushing resident slots
 *   client.c  pins, requests, ACQUIRE, RELEASE, REPORT, PREFETCH
 *   agent.c   the request queue (read, poll), EVICT, COMMIT, ABORT, bank, LOAD
 *   file.c    open, attach, release, ioctl dispatch, mmap, the module
 *   netlink.c the generic netlink family, through moecache.h
 *
 * /dev/moecache owns each pool's pinned host copy of its experts and the
 * residency map of its slot bank. Clients pin resident slots and queue
 * misses; one agent per pool reads the misses, evicts, copies and commits.
 * The ABI is uapi/moecache.h, described in docs/abi.md.
 *
 * Lock order, outer to inner:
 *
 *   moecache_pools_lock (mutex)
 *	the pool list, host_bytes_used, attaching a file (mf->pool, mf->role),
 *	creating and destroying pools.
 *     pool->lock (spinlock)
 *	everything in a pool that changes after creation: the map region
 *	(map, owner, last_use, pins, access, seq, flags, clock), expert and
 *	slot states, the request queue, per-file pins and request bits, the
 *	file list, the tenants and their pinned-slot counts, the agent
 *	pointer, the banks' objects, the counters.
 *
 * A client's fast-pins region (mf->fast_pins) is written by that client
 * alone, with no lock. The driver reads it under pool->lock, after
 * unpublishing the slot it is about to take and a full barrier; the client
 * writes its pin, a full barrier, and reads the map again (see
 * slot_unpublish()). The driver reads only the regions of the files that
 * may hold a pin on the slot: pool->fast_pinners[page] lists the files
 * whose region's page of that slot has been mapped into a process, and
 * the fault handler that maps it adds the file under pool->lock
 * (pins_region_fault(); the ordering argument is at slot_fast_pinned()).
 *
 * pool->lock is never held across copy_{to,from}_user, allocation or
 * sleeping. Nor is moecache_pools_lock held across what a caller's memory
 * cgroup pays for: a pool's host pages and an attaching file's arrays are
 * allocated before it is taken (attach_bufs_prepare()), so a caller whose
 * cgroup must reclaim stalls only itself. mf->pool is published with release order once the file is
 * fully attached and never changes afterwards, so ioctls read it with an
 * acquire load and no lock.
 */
#ifndef _MOECACHE_CORE_H
#define _MOECACHE_CORE_H

#include <linux/bitops.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/math64.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>

#include "compat.h"
#include "moecache.h"

/* Limits, module parameters of pool.c. */
extern unsigned int max_pools;
extern unsigned int max_host_mb;
extern unsigned int max_layers;
extern unsigned int max_experts;
extern unsigned int max_slots;
extern unsigned int max_expert_mb;
extern unsigned int max_batch;
extern unsigned int evict_event_sample;
extern unsigned int miss_storm_per_sec;
extern unsigned int max_file_pins;
extern unsigned int max_pool_files;
extern unsigned int max_banks;
extern unsigned int max_pin_share;
extern unsigned int max_user_waits;

/* Host pages are taken in blocks of up to 2^HIGH_ORDER pages. */
#define MOECACHE_HIGH_ORDER	9

/*
 * Memory whose size a caller picks (a pool's host pages, region and arrays;
 * an attach's pins) is charged to the caller's memory cgroup and, at the
 * cgroup's memory.max, fails with ENOMEM: __GFP_RETRY_MAYFAIL makes the
 * charge give up after reclaim where it would otherwise call the cgroup's
 * OOM killer, which would kill the caller, or a neighbour, for asking;
 * and quietly: the caller's errno says it, a warn_alloc() splat would not.
 */
#define MOECACHE_GFP_SIZED \
	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

/*
 * Caps on max_file_pins and max_pool_files: their product stays below
 * 2^32, so a slot's pin count (the sum over the files) cannot wrap.
 */
#define MOECACHE_FILE_PINS_CAP	BIT(20)
#define MOECACHE_POOL_FILES_CAP	4095U
/* The regions' places in the mmap offset space: map at 0, then these. */
#define MOECACHE_PINS_OFFSET	BIT_ULL(31)
#define MOECACHE_HOST_OFFSET	BIT_ULL(32)
/* Slots whose fast pins share one page of a pins region. */
#define MOECACHE_FAST_PINS_PER_PAGE	(PAGE_SIZE / sizeof(u32))
/* ACQUIRE and RELEASE lists up to this long stay on the stack. */
#define MOECACHE_STACK_BATCH	16
/* REPORT lists up to this long stay on the stack. */
#define MOECACHE_STACK_REPORT	16

/* What an expert is doing; the map and owner arrays say where it is. */
enum moecache_estate {
	ES_IDLE = 0,	/* not resident, nobody asked */
	ES_QUEUED,	/* on the request queue */
	ES_INFLIGHT,	/* read by the agent */
	ES_FILLING,	/* a slot is being filled with it */
	ES_RESIDENT,	/* published in map[] */
};

/* slot_flags */
#define SF_PREFETCHED	BIT(0)	/* filled by a prefetch, not acquired since */
#define SF_MOVED	BIT(1)	/* freed by a move: fast pins may remain */

enum moecache_counter {
	C_HITS,
	C_MISSES,
	C_PREFETCH_HITS,
	C_PREFETCHES,
	C_EVICTIONS,
	C_COMMITS,
	C_ABORTS,
	C_BYTES_COPIED,
	C_WAITS,
	C_WAIT_NS,
	C_NR
};

struct moecache_counters {
	u64 c[C_NR];
	u64 wait_hist[MOECACHE_WAIT_BUCKETS];
};

struct moecache_file;
struct moecache_fast_ref;

/*
 * The client files of one effective uid (their opener's, f_cred) attached
 * to a pool, but for the pool's owner and CAP_SYS_ADMIN: together they
 * may hold pins on at most pool_pin_share() slots (max_pin_share) and
 * have at most max_user_waits ACQUIRE|WAITs in progress. On
 * pool->tenants while a file refers to it; under pool->lock.
 */
struct moecache_tenant {
	struct list_head node;
	kuid_t uid;
	u32 n_files;
	u32 pinned_slots;	/* the sum of its files' n_pinned_slots */
	u32 n_waits;		/* its ACQUIRE|WAITs in progress, max_user_waits */
};

/*
 * One bank of a pool: the global slots [slot_begin, slot_begin + n_slots)
 * of layout, and the object BANK_SET gave for them. The layout is fixed
 * at creation; file and desc change under pool->lock.
 */
struct moecache_pool_bank {
	struct moecache_bank_layout layout;
	u32 slot_begin;
	struct file *file;		/* the set object, or NULL */
	struct moecache_bank desc;	/* as BANK_GET returns it, fd -1 */
	u64 c[C_NR];			/* counted on this bank's slots */
};

struct moecache_pool {
	struct list_head node;		/* moecache_pools */
	struct kref ref;
	char name[MOECACHE_NAME_LEN];
	u32 n_layers;
	u32 n_experts;
	u32 expert_begin;
	u32 expert_end;
	u32 n_local;
	u32 n_idx;			/* n_layers * n_local */
	u32 n_slots;
	u64 expert_bytes;
	kuid_t uid;
	kgid_t gid;
	umode_t mode;

	struct page **pages;		/* host pages, order-0 after split */
	unsigned long n_pages;
	const struct cred *memlock_cred; /* its user charged n_pages of locked_vm */

	void *region;			/* the map region, vmalloc, charged */
	size_t region_size;
	struct moecache_map_header *hdr;
	u32 *map;
	u32 *owner;
	u64 *last_use;
	u32 *pins;
	u32 *access;

	spinlock_t lock;		/* see the lock order above */
	wait_queue_head_t client_wq;	/* commits, aborts, agent changes */
	wait_queue_head_t agent_wq;	/* queued requests */

	u8 *estate;			/* enum moecache_estate, per idx */
	u8 *req_flags;			/* MOECACHE_REQ_*, per idx */
	u32 *n_askers;			/* client files asking, per idx */
	u32 *fail_gen;			/* fail_counter at its last abort */
	u32 fail_counter;
	struct list_head *qnode;	/* per idx, on queue while ES_QUEUED */
	/*
	 * Per idx: resident and the target of an EVICT_MOVE, whose new slot
	 * is FILLING while map[] still names the old one.
	 */
	unsigned long *moving;
	struct list_head queue;
	struct list_head waiters;	/* ACQUIRE|WAITs asleep, oldest first */
	u8 *slot_flags;

	u32 n_queued;
	u32 n_inflight;
	u32 n_filling;
	u32 n_resident;
	u32 n_pinned_slots;
	u64 n_pins;

	struct list_head files;		/* attached moecache_files */
	struct list_head asking;	/* client files with an ask out */
	u32 n_files;
	u32 n_clients;
	struct list_head tenants;	/* struct moecache_tenant */
	/*
	 * Per page of a pins region (MOECACHE_FAST_PINS_PER_PAGE slots):
	 * the files that have had that page mapped, each by its
	 * fast_refs[page]; a file joins at its first fault on the page and
	 * leaves when it is released.
	 */
	struct list_head *fast_pinners;
	u32 n_fast_pages;
	struct moecache_file *agent;
	struct pid *agent_pid;		/* the agent's process, while attached */

	u32 n_banks;			/* 1 or more */
	u32 n_banks_set;		/* banks with an object */
	struct moecache_pool_bank *banks;
	u8 *slot_bank;			/* per slot: its bank's index */
	struct moecache_map_bank *map_banks;	/* in the map region */

	struct moecache_counters total;
	struct moecache_counters *layer;
	u64 evict_events;
	unsigned long storm_start;	/* jiffies */
	u64 storm_misses;
};

struct moecache_file {
	struct file *file;		/* its opener's credentials: f_cred */
	struct moecache_pool *pool;	/* release/acquire, set once */
	u32 role;
	/*
	 * Clients: whose tenant the file is (attach_tenant_uid(): its
	 * attacher's effective uid, or its opener's where a deputy exempt
	 * from the share attached it). Set under pool->lock before the file
	 * joins pool->files, then fixed.
	 */
	kuid_t tenant_uid;
	struct list_head node;		/* pool->files */
	u32 *pins;			/* clients: pins per slot */
	unsigned long *pinned;		/* clients: the slots with pins[slot] > 0 */
	u32 n_pins;			/* clients: their sum, <= max_file_pins */
	u32 n_pinned_slots;		/* clients: slots with pins[slot] > 0 */
	/* Clients held to the pin share: tenant_uid's; NULL for exempt ones. */
	struct moecache_tenant *tenant;
	unsigned long *asked;		/* clients: idx this file asked for */
	u32 n_asked;			/* clients: bits set in asked */
	struct list_head ask_node;	/* pool->asking, while n_asked */
	u32 *fast_pins;			/* fast clients: their region, vmalloc */
	size_t fast_pins_size;
	struct moecache_fast_ref *fast_refs;	/* per page of fast_pins */
};

/* A fast-pins file on pool->fast_pinners[page]; node empty while it is not. */
struct moecache_fast_ref {
	struct list_head node;
	struct moecache_file *mf;
};

/* The pool list and the totals over it, under moecache_pools_lock. */
extern struct mutex moecache_pools_lock;
extern struct list_head moecache_pools;
extern unsigned int moecache_n_pools;
extern u64 moecache_host_bytes;

static inline u32 pool_idx(const struct moecache_pool *pool, u32 layer,
			   u32 expert)
{
	return layer * pool->n_local + (expert - pool->expert_begin);
}

static inline u32 idx_layer(const struct moecache_pool *pool, u32 idx)
{
	return idx / pool->n_local;
}

static inline u32 idx_expert(const struct moecache_pool *pool, u32 idx)
{
	return idx % pool->n_local + pool->expert_begin;
}

/* ---- the map region: every store a reader may see goes through here ---- */

static inline void map_write_begin(struct moecache_pool *pool)
{
	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(pool->hdr->seq & 1);
	WRITE_ONCE(pool->hdr->seq, pool->hdr->seq + 1);
	/* Readers see seq odd before any entry changes. */
	smp_wmb();
}

/*
 * The queue depth in the map header, for clients deciding whether to wait
 * for a copy: queued, the requests on the queue that the agent has not
 * read; inflight, the experts the agent has taken and not yet committed or
 * given back (read and unanswered, or a slot filling with them). Plain
 * words, stored once a change is complete (inside the seq write side when
 * there is one) and read with relaxed loads: each is exact as of the
 * driver's last change, and the two are not a consistent pair outside seq.
 */
static inline void queue_depth_publish(struct moecache_pool *pool)
{
	lockdep_assert_held(&pool->lock);
	WRITE_ONCE(pool->hdr->queued, pool->n_queued);
	WRITE_ONCE(pool->hdr->inflight, pool->n_inflight + pool->n_filling);
}

static inline void map_write_end(struct moecache_pool *pool)
{
	lockdep_assert_held(&pool->lock);
	queue_depth_publish(pool);
	/* Pairs with the readers' acquire load of seq. */
	smp_store_release(&pool->hdr->seq, pool->hdr->seq + 1);
}

/* Publishes a filled slot: the copy completed before this store. */
static inline void map_publish(struct moecache_pool *pool, u32 idx, u32 slot)
{
	/* Pairs with the readers' acquire load of map[idx]. */
	smp_store_release(&pool->map[idx], slot);
}

static inline void map_set_flags(struct moecache_pool *pool, u32 set, u32 clear)
{
	lockdep_assert_held(&pool->lock);
	WRITE_ONCE(pool->hdr->flags, (pool->hdr->flags & ~clear) | set);
}

/* ---- counters ---- */

static inline struct moecache_counters *layer_ctr(struct moecache_pool *pool,
						  u32 idx)
{
	return &pool->layer[idx_layer(pool, idx)];
}

static inline void layer_count(struct moecache_pool *pool, u32 layer,
			       enum moecache_counter c, u64 n)
{
	lockdep_assert_held(&pool->lock);
	pool->total.c[c] += n;
	pool->layer[layer].c[c] += n;
}

static inline void pool_count(struct moecache_pool *pool, u32 idx,
			      enum moecache_counter c, u64 n)
{
	layer_count(pool, idx_layer(pool, idx), c, n);
}

static inline struct moecache_pool_bank *slot_bank(struct moecache_pool *pool,
						   u32 slot)
{
	return &pool->banks[pool->slot_bank[slot]];
}

/* A counter of the bank that slot belongs to (the pool's are apart). */
static inline void bank_count(struct moecache_pool *pool, u32 slot,
			      enum moecache_counter c, u64 n)
{
	lockdep_assert_held(&pool->lock);
	slot_bank(pool, slot)->c[c] += n;
}

static inline void count_wait(struct moecache_counters *c, u64 ns)
{
	u64 us = div_u64(ns, NSEC_PER_USEC);
	unsigned int b = us ? fls64(us) : 0;

	c->c[C_WAITS]++;
	c->c[C_WAIT_NS] += ns;
	c->wait_hist[min_t(unsigned int, b, MOECACHE_WAIT_BUCKETS - 1)]++;
}

/*
 * Is mf the pool's agent, and the caller its process? The agent role
 * belongs to the process that attached: a child that inherited the file
 * may not use it. Reads without the lock: an agent is only replaced once
 * its process is gone (see ioc_attach()).
 */
static inline bool agent_is_current(struct moecache_pool *pool,
				    struct moecache_file *mf)
{
	return READ_ONCE(pool->agent) == mf &&
	       READ_ONCE(pool->agent_pid) == task_tgid(current);
}

/*
 * The slots one tenant may hold pinned: max_pin_share percent of the
 * pool's, at least one.
 */
static inline u32 pool_pin_share(const struct moecache_pool *pool)
{
	u32 pct = clamp(READ_ONCE(max_pin_share), 1U, 100U);

	return max_t(u32, 1, div_u64((u64)pool->n_slots * pct, 100));
}

/* pool.c */
void pool_release(struct kref *ref);
bool name_valid(const char *name);
struct moecache_pool *pool_find(const char *name);
void pool_unlink(struct moecache_pool *pool);
/*
 * Rights are checked on both parties, the task that calls and the one that
 * opened the file (f_cred), so that a file handed to a privileged process
 * carries no more than its opener had (docs/abi.md, "Security model").
 */
bool pool_permits(struct moecache_pool *pool, int want,
		  const struct moecache_file *mf);
bool pool_visible(struct moecache_pool *pool, const struct moecache_file *mf);
bool pool_may_admin(struct moecache_pool *pool,
		    const struct moecache_file *mf);
bool file_may_create(const struct moecache_file *mf);
/* May the file's two parties pin beyond the pin share (and fast-pin)? */
bool pool_pin_exempt(struct moecache_pool *pool,
		     const struct moecache_file *mf);
/* An event of a pool the caller holds a reference to (no pool lock held). */
void pool_event(struct moecache_pool *pool, enum moecache_event ev, u32 arg0,
		u32 arg1);

/* map.c */
bool slot_unpublish(struct moecache_pool *pool, u32 slot);
void slot_unmap(struct moecache_pool *pool, u32 slot);
bool slot_reusable(struct moecache_pool *pool, u32 slot);
void move_cancel(struct moecache_pool *pool, u32 slot);
int bank_clear_residency(struct moecache_pool *pool, u32 bank);

/* client.c */
void request_dequeue(struct moecache_pool *pool, u32 idx);
void request_done(struct moecache_pool *pool, u32 idx);
void request_requeue(struct moecache_pool *pool, u32 idx);
void client_detach(struct moecache_pool *pool, struct moecache_file *mf);
int check_target(struct moecache_pool *pool, u32 layer, u32 expert, u32 *idx);
/* A COMMIT wakes only the WAITs it may let progress: mark, then wake. */
bool client_wake_mark(struct moecache_pool *pool);
void client_wake_marked(struct moecache_pool *pool);

/* file.c */
bool moecache_file_is_ours(struct file *file);

/* agent.c */
void agent_detach(struct moecache_pool *pool);
ssize_t moecache_read(struct file *file, char __user *buf, size_t len,
		      loff_t *ppos);
__poll_t moecache_poll(struct file *file, poll_table *wait);

/*
 * The ioctl handlers, dispatched by file.c from one table that says which
 * roles may call each. pool is NULL for those an unattached fd may call.
 */
typedef long (*moecache_ioctl_fn)(struct moecache_pool *pool,
	      struct moecache_file *mf,
	      void __user *argp);

long ioc_get_info(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp);
long ioc_pool_create(struct moecache_pool *pool, struct moecache_file *mf,
		     void __user *argp, unsigned int usize);
long ioc_pool_destroy(struct moecache_pool *pool, struct moecache_file *mf,
		      void __user *argp);
long ioc_acquire(struct moecache_pool *pool, struct moecache_file *mf,
		 void __user *argp);
long ioc_acquire_release(struct moecache_pool *pool, struct moecache_file *mf,
			 void __user *argp);
long ioc_report(struct moecache_pool *pool, struct moecache_file *mf,
		void __user *argp);
long ioc_release(struct moecache_pool *pool, struct moecache_file *mf,
		 void __user *argp);
long ioc_prefetch(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp);
long ioc_evict(struct moecache_pool *pool, struct moecache_file *mf,
	       void __user *argp);
long ioc_commit(struct moecache_pool *pool, struct moecache_file *mf,
		void __user *argp);
long ioc_abort(struct moecache_pool *pool, struct moecache_file *mf,
	       void __user *argp);
long ioc_bank_set(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp);
long ioc_bank_get(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp);
long ioc_load(struct moecache_pool *pool, struct moecache_file *mf,
	      void __user *argp);

#endif /* _MOECACHE_CORE_H */
