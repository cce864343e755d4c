/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal interface between the parts of the moecache driver: the core
 * (kmod/core.h and its parts: device, pools, map, pins, requests) and the
 * netlink family (kmod/netlink.c).
 */
#ifndef _MOECACHE_INTERNAL_H
#define _MOECACHE_INTERNAL_H

#include <linux/types.h>
#include <linux/cred.h>
#include <linux/pid.h>
#include <moecache.h>

struct moecache_pool;

/* Cap on the module parameter max_banks (kmod/pool.c). */
#define MOECACHE_BANKS_CAP	64U

/* A visitor of pools; a non-zero return stops the walk. */
typedef int (*moecache_pool_fn)(struct moecache_pool *pool, void *arg);

/* What netlink reports of a pool. */
struct moecache_pool_desc {
	char name[MOECACHE_NAME_LEN];
	u32 n_layers;
	u32 n_experts;
	u32 expert_begin;
	u32 expert_end;
	u32 n_slots;
	u32 flags;		/* MOECACHE_POOL_* */
	u64 expert_bytes;
	u64 host_bytes;
	u32 uid;
	u32 gid;
	u32 mode;
	u32 n_files;		/* attached files */
	u32 agent_pid;		/* in the describing task's pid namespace */
	u32 agent_epoch;
	u32 n_banks;
};

/*
 * One bank of a pool: its layout and the map's entry for it, its slots'
 * state and its counters (as MOECACHE_IOC_STATS with MOECACHE_STATS_BANK).
 */
struct moecache_bank_desc {
	u32 index;
	u32 tier;
	u32 slot_begin;
	u32 n_slots;
	u32 backend;
	u32 device;
	u32 flags;		/* MOECACHE_MAP_BANK_* */
	u32 resident;
	u32 filling;
	u32 pinned_slots;
	u32 pins;
	u64 hits;
	u64 prefetch_hits;
	u64 evictions;
	u64 commits;
};

/*
 * Calls fn for each pool, in creation order, under the pool-list mutex
 * (fn may sleep, must not create or destroy pools). Stops at the first
 * non-zero return and returns it. skip pools before index *pos; *pos is
 * advanced past each pool visited (for netlink dumps).
 */
int moecache_visit_pools(moecache_pool_fn fn, void *arg, unsigned long *pos);

/* Looks a pool up by name and calls fn with it, under the pool-list mutex. */
int moecache_with_pool(const char *name, moecache_pool_fn fn, void *arg);

void moecache_pool_describe(struct moecache_pool *pool,
			    struct moecache_pool_desc *desc);
/* layer MOECACHE_NONE for the whole pool; -EINVAL if out of range */
int moecache_pool_stats(struct moecache_pool *pool, u32 layer,
			struct moecache_stats *st);
/*
 * The pool's stats with bank's counters and slot state in place of the
 * pool's (MOECACHE_STATS_BANK); -EINVAL for a layer or past the banks.
 */
int moecache_pool_bank_stats(struct moecache_pool *pool, u32 layer, u32 bank,
			     struct moecache_stats *st);
/* Bank `bank` of the pool; -EINVAL past its banks. */
int moecache_pool_bank(struct moecache_pool *pool, u32 bank,
		       struct moecache_bank_desc *desc);

/* May the current task administer the pool (CAP_SYS_ADMIN or owner)? */
bool moecache_pool_may_admin(struct moecache_pool *pool);

/* Whose a pool is, fixed at its creation: who may read and administer it. */
struct moecache_pool_owner {
	kuid_t uid;
	kgid_t gid;
	umode_t mode;		/* permission bits, as for IPC objects */
};

void moecache_pool_owner(struct moecache_pool *pool,
			 struct moecache_pool_owner *owner);
/*
 * The permission bits (MAY_READ, MAY_WRITE, ...) the owner's mode grants
 * cred, as for an IPC object: the owner's, the group's, or the others'.
 */
unsigned int moecache_owner_granted(const struct moecache_pool_owner *owner,
				    const struct cred *cred);

/*
 * The same checks and effects as the ioctls. banks: req->n_banks layouts
 * in kernel memory (NULL when n_banks is 0); req->banks is not read.
 */
int moecache_pool_create(const struct moecache_pool_create *req,
			 const struct moecache_bank_layout *banks);
/*
 * may (NULL: moecache_pool_may_admin() of the current task, else -EPERM)
 * decides, under the pool-list mutex, whether the caller may destroy it.
 */
int moecache_pool_destroy(const char *name, moecache_pool_fn may, void *arg);
/* Unmaps every unpinned resident slot; returns how many were freed. */
int moecache_pool_flush(struct moecache_pool *pool);

/* Events, multicast by netlink. */
enum moecache_event {
	MOECACHE_EV_POOL_CREATED = 1,
	MOECACHE_EV_POOL_DESTROYED,
	MOECACHE_EV_AGENT_ATTACHED,
	MOECACHE_EV_AGENT_LOST,
	MOECACHE_EV_EVICTION,		/* sampled */
	MOECACHE_EV_MISS_STORM,
};

/*
 * Called by the core without any pool lock held (may allocate with
 * GFP_KERNEL). owner decides who receives the event: a listener that may
 * read the pool. agent: the agent's process for the agent events (NULL when
 * unknown), reported in each listener's pid namespace. arg0/arg1 depend on
 * the event: layer/expert for an eviction, misses in the last interval for
 * a miss storm.
 */
void moecache_nl_event(enum moecache_event ev, const char *pool_name,
		       const struct moecache_pool_owner *owner,
		       struct pid *agent, u32 arg0, u32 arg1);
int moecache_nl_init(void);
void moecache_nl_exit(void);

#endif /* _MOECACHE_INTERNAL_H */
