// SPDX-License-Identifier: GPL-2.0
/*
 * moecache: machine-wide residency of Mixture-of-Experts experts.
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
 *	file list, the agent pointer, the bank, the counters.
 *
 * A client's fast-pins region (mf->fast_pins) is written by that client
 * alone, with no lock. The driver reads it under pool->lock, after
 * unpublishing the slot it is about to take and a full barrier; the client
 * writes its pin, a full barrier, and reads the map again (see
 * slot_unpublish()).
 *
 * pool->lock is never held across copy_{to,from}_user, allocation or
 * sleeping. mf->pool is published with release order once the file is
 * fully attached and never changes afterwards, so ioctls read it with an
 * acquire load and no lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/ctype.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>

#include "compat.h"
#include "moecache.h"

static unsigned int max_pools = 16;
module_param(max_pools, uint, 0444);
MODULE_PARM_DESC(max_pools, "Most pools at once (default 16)");

static unsigned int max_host_mb = 1024;
module_param(max_host_mb, uint, 0444);
MODULE_PARM_DESC(max_host_mb, "Limit on all pools' pinned host pages, MiB (default 1024)");

static unsigned int max_layers = 1024;
module_param(max_layers, uint, 0444);
MODULE_PARM_DESC(max_layers, "Most layers per pool (default 1024)");

static unsigned int max_experts = 4096;
module_param(max_experts, uint, 0444);
MODULE_PARM_DESC(max_experts, "Most experts per layer (default 4096)");

static unsigned int max_slots = 65536;
module_param(max_slots, uint, 0444);
MODULE_PARM_DESC(max_slots, "Most bank slots per pool (default 65536)");

static unsigned int max_expert_mb = 1024;
module_param(max_expert_mb, uint, 0444);
MODULE_PARM_DESC(max_expert_mb, "Largest expert record, MiB (default 1024)");

static unsigned int max_batch = 1024;
module_param(max_batch, uint, 0444);
MODULE_PARM_DESC(max_batch, "Most entries in one list argument (default 1024)");

static unsigned int evict_event_sample = 64;
module_param(evict_event_sample, uint, 0644);
MODULE_PARM_DESC(evict_event_sample, "Send one eviction event per this many evictions, 0 for none (default 64)");

static unsigned int miss_storm_per_sec = 10000;
module_param(miss_storm_per_sec, uint, 0644);
MODULE_PARM_DESC(miss_storm_per_sec, "Misses in one second of a pool that raise a miss-storm event, 0 for none (default 10000)");

/* Host pages are taken in blocks of up to 2^HIGH_ORDER pages. */
#define MOECACHE_HIGH_ORDER	9
/* The regions' places in the mmap offset space: map at 0, then these. */
#define MOECACHE_PINS_OFFSET	BIT_ULL(31)
#define MOECACHE_HOST_OFFSET	BIT_ULL(32)
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

	void *region;			/* the map region, vmalloc_user */
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
	struct list_head queue;
	u8 *slot_flags;

	u32 n_queued;
	u32 n_inflight;
	u32 n_filling;
	u32 n_resident;
	u32 n_pinned_slots;
	u64 n_pins;

	struct list_head files;		/* attached moecache_files */
	u32 n_files;
	u32 n_clients;
	u32 n_fast_files;		/* clients with a fast-pins region */
	struct moecache_file *agent;
	pid_t agent_pid;

	struct file *bank;
	struct moecache_bank bank_desc;

	struct moecache_counters total;
	struct moecache_counters *layer;
	u64 evict_events;
	unsigned long storm_start;	/* jiffies */
	u64 storm_misses;
};

struct moecache_file {
	struct moecache_pool *pool;	/* release/acquire, set once */
	u32 role;
	struct list_head node;		/* pool->files */
	u32 *pins;			/* clients: pins per slot */
	unsigned long *asked;		/* clients: idx this file asked for */
	u32 *fast_pins;			/* fast clients: their region, vmalloc_user */
	size_t fast_pins_size;
};

static DEFINE_MUTEX(moecache_pools_lock);
static LIST_HEAD(moecache_pools);
static unsigned int moecache_n_pools;
static u64 moecache_host_bytes;

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

static void map_write_begin(struct moecache_pool *pool)
{
	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(pool->hdr->seq & 1);
	WRITE_ONCE(pool->hdr->seq, pool->hdr->seq + 1);
	/* Readers see seq odd before any entry changes. */
	smp_wmb();
}

static void map_write_end(struct moecache_pool *pool)
{
	lockdep_assert_held(&pool->lock);
	/* Pairs with the readers' acquire load of seq. */
	smp_store_release(&pool->hdr->seq, pool->hdr->seq + 1);
}

/* Publishes a filled slot: the copy completed before this store. */
static void map_publish(struct moecache_pool *pool, u32 idx, u32 slot)
{
	/* Pairs with the readers' acquire load of map[idx]. */
	smp_store_release(&pool->map[idx], slot);
}

static void map_set_flags(struct moecache_pool *pool, u32 set, u32 clear)
{
	lockdep_assert_held(&pool->lock);
	WRITE_ONCE(pool->hdr->flags, (pool->hdr->flags & ~clear) | set);
}

/* ---- counters ---- */

static struct moecache_counters *layer_ctr(struct moecache_pool *pool,
					   u32 idx)
{
	return &pool->layer[idx_layer(pool, idx)];
}

static void layer_count(struct moecache_pool *pool, u32 layer,
			enum moecache_counter c, u64 n)
{
	lockdep_assert_held(&pool->lock);
	pool->total.c[c] += n;
	pool->layer[layer].c[c] += n;
}

static void pool_count(struct moecache_pool *pool, u32 idx,
		       enum moecache_counter c, u64 n)
{
	layer_count(pool, idx_layer(pool, idx), c, n);
}

static void count_wait(struct moecache_counters *c, u64 ns)
{
	u64 us = div_u64(ns, NSEC_PER_USEC);
	unsigned int b = us ? fls64(us) : 0;

	c->c[C_WAITS]++;
	c->c[C_WAIT_NS] += ns;
	c->wait_hist[min_t(unsigned int, b, MOECACHE_WAIT_BUCKETS - 1)]++;
}

/* ---- pins ---- */

static void pin_slot(struct moecache_pool *pool, struct moecache_file *mf,
		     u32 slot, u64 clock)
{
	lockdep_assert_held(&pool->lock);
	mf->pins[slot]++;
	if (pool->pins[slot] == 0)
		pool->n_pinned_slots++;
	WRITE_ONCE(pool->pins[slot], pool->pins[slot] + 1);
	WRITE_ONCE(pool->last_use[slot], clock);
	pool->n_pins++;
}

static void unpin_slot(struct moecache_pool *pool, u32 slot)
{
	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(pool->pins[slot] == 0))
		return;
	WRITE_ONCE(pool->pins[slot], pool->pins[slot] - 1);
	if (pool->pins[slot] == 0)
		pool->n_pinned_slots--;
	pool->n_pins--;
}

/* ---- requests ---- */

/* Queues a request for idx on behalf of mf; true if it was newly queued. */
static bool request_add(struct moecache_pool *pool, struct moecache_file *mf,
			u32 idx, u8 flag)
{
	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(pool->estate[idx] == ES_RESIDENT))
		return false;
	if (mf && !__test_and_set_bit(idx, mf->asked))
		pool->n_askers[idx]++;
	pool->req_flags[idx] |= flag;
	if (pool->estate[idx] != ES_IDLE)
		return false;
	pool->estate[idx] = ES_QUEUED;
	list_add_tail(&pool->qnode[idx], &pool->queue);
	pool->n_queued++;
	return true;
}

static void request_dequeue(struct moecache_pool *pool, u32 idx)
{
	lockdep_assert_held(&pool->lock);
	WARN_ON_ONCE(pool->estate[idx] != ES_QUEUED);
	list_del_init(&pool->qnode[idx]);
	pool->n_queued--;
}

/* The request for idx is answered: nobody is asking any more. */
static void request_done(struct moecache_pool *pool, u32 idx)
{
	struct moecache_file *f;

	lockdep_assert_held(&pool->lock);
	if (pool->n_askers[idx]) {
		list_for_each_entry(f, &pool->files, node)
			if (f->asked)
				__clear_bit(idx, f->asked);
		pool->n_askers[idx] = 0;
	}
	pool->req_flags[idx] = 0;
}

/* An expert the agent lost: queue it again if a client still asks. */
static void request_requeue(struct moecache_pool *pool, u32 idx)
{
	lockdep_assert_held(&pool->lock);
	pool->estate[idx] = ES_IDLE;
	if (pool->n_askers[idx]) {
		pool->estate[idx] = ES_QUEUED;
		list_add_tail(&pool->qnode[idx], &pool->queue);
		pool->n_queued++;
	} else {
		pool->req_flags[idx] = 0;
	}
}

/* ---- pools ---- */

static void pool_free_pages(struct moecache_pool *pool)
{
	unsigned long i;

	if (!pool->pages)
		return;
	for (i = 0; i < pool->n_pages; i++)
		if (pool->pages[i])
			__free_page(pool->pages[i]);
	kvfree(pool->pages);
	pool->pages = NULL;
}

/* High-order blocks where the allocator has them, split so that each
 * page is mapped and refcounted on its own.
 */
static int pool_alloc_pages(struct moecache_pool *pool)
{
	unsigned int order = MOECACHE_HIGH_ORDER;
	unsigned long i = 0, j;
	struct page *page;
	gfp_t gfp;

	BUILD_BUG_ON(MOECACHE_HIGH_ORDER > MOECACHE_MAX_PAGE_ORDER);
	pool->pages = kvcalloc(pool->n_pages, sizeof(*pool->pages),
			       GFP_KERNEL);
	if (!pool->pages)
		return -ENOMEM;
	while (i < pool->n_pages) {
		while (order && (1UL << order) > pool->n_pages - i)
			order--;
		gfp = GFP_HIGHUSER | __GFP_ZERO | __GFP_NOWARN;
		if (order)
			gfp |= __GFP_NORETRY;
		page = alloc_pages(gfp, order);
		if (!page) {
			if (!order)
				return -ENOMEM;
			order--;
			continue;
		}
		if (order)
			split_page(page, order);
		for (j = 0; j < (1UL << order); j++)
			pool->pages[i + j] = page + j;
		i += 1UL << order;
		cond_resched();
	}
	return 0;
}

static void pool_free(struct moecache_pool *pool)
{
	if (pool->bank)
		fput(pool->bank);
	pool_free_pages(pool);
	vfree(pool->region);
	kvfree(pool->estate);
	kvfree(pool->req_flags);
	kvfree(pool->n_askers);
	kvfree(pool->fail_gen);
	kvfree(pool->qnode);
	kvfree(pool->slot_flags);
	kvfree(pool->layer);
	kfree(pool);
}

static void pool_release(struct kref *ref)
{
	pool_free(container_of(ref, struct moecache_pool, ref));
}

static int pool_alloc_region(struct moecache_pool *pool)
{
	struct moecache_map_header *hdr;
	size_t off = ALIGN(sizeof(*hdr), 64);
	size_t map_off, owner_off, last_use_off, pins_off, access_off;
	u32 i;

	map_off = off;
	off = ALIGN(off + (size_t)pool->n_idx * sizeof(u32), 64);
	owner_off = off;
	off = ALIGN(off + (size_t)pool->n_slots * sizeof(u32), 64);
	last_use_off = off;
	off = ALIGN(off + (size_t)pool->n_slots * sizeof(u64), 64);
	pins_off = off;
	off = ALIGN(off + (size_t)pool->n_slots * sizeof(u32), 64);
	access_off = off;
	off += (size_t)pool->n_idx * sizeof(u32);
	pool->region_size = PAGE_ALIGN(off);
	/* The pins region's offset comes next. */
	if (pool->region_size > MOECACHE_PINS_OFFSET)
		return -E2BIG;

	pool->region = vmalloc_user(pool->region_size);
	if (!pool->region)
		return -ENOMEM;
	hdr = pool->region;
	pool->hdr = hdr;
	pool->map = pool->region + map_off;
	pool->owner = pool->region + owner_off;
	pool->last_use = pool->region + last_use_off;
	pool->pins = pool->region + pins_off;
	pool->access = pool->region + access_off;
	for (i = 0; i < pool->n_idx; i++)
		pool->map[i] = MOECACHE_NONE;
	for (i = 0; i < pool->n_slots; i++)
		pool->owner[i] = MOECACHE_NONE;

	hdr->magic = MOECACHE_MAP_MAGIC;
	hdr->version = MOECACHE_ABI_VERSION;
	hdr->n_layers = pool->n_layers;
	hdr->n_experts = pool->n_experts;
	hdr->expert_begin = pool->expert_begin;
	hdr->expert_end = pool->expert_end;
	hdr->n_slots = pool->n_slots;
	hdr->expert_bytes = pool->expert_bytes;
	hdr->map_off = map_off;
	hdr->owner_off = owner_off;
	hdr->last_use_off = last_use_off;
	hdr->pins_off = pins_off;
	hdr->access_off = access_off;
	return 0;
}

static int pool_alloc_state(struct moecache_pool *pool)
{
	u32 i;

	pool->estate = kvcalloc(pool->n_idx, sizeof(u8), GFP_KERNEL);
	pool->req_flags = kvcalloc(pool->n_idx, sizeof(u8), GFP_KERNEL);
	pool->n_askers = kvcalloc(pool->n_idx, sizeof(u32), GFP_KERNEL);
	pool->fail_gen = kvcalloc(pool->n_idx, sizeof(u32), GFP_KERNEL);
	pool->qnode = kvcalloc(pool->n_idx, sizeof(*pool->qnode), GFP_KERNEL);
	pool->slot_flags = kvcalloc(pool->n_slots, sizeof(u8), GFP_KERNEL);
	pool->layer = kvcalloc(pool->n_layers, sizeof(*pool->layer),
			       GFP_KERNEL);
	if (!pool->estate || !pool->req_flags || !pool->n_askers ||
	    !pool->fail_gen || !pool->qnode || !pool->slot_flags ||
	    !pool->layer)
		return -ENOMEM;
	for (i = 0; i < pool->n_idx; i++)
		INIT_LIST_HEAD(&pool->qnode[i]);
	return 0;
}

static bool name_valid(const char *name)
{
	size_t len = strnlen(name, MOECACHE_NAME_LEN);
	size_t i;

	if (len == 0 || len == MOECACHE_NAME_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum(name[i]) && name[i] != '.' && name[i] != '_' &&
		    name[i] != '-')
			return false;
	return true;
}

static struct moecache_pool *pool_find(const char *name)
{
	struct moecache_pool *pool;

	lockdep_assert_held(&moecache_pools_lock);
	list_for_each_entry(pool, &moecache_pools, node)
		if (!strcmp(pool->name, name))
			return pool;
	return NULL;
}

/* Checks a creation request; *host_bytes gets the pool's host size. */
static int pool_create_check(const struct moecache_pool_create *req,
			     u64 *host_bytes)
{
	u64 n_idx, bytes;

	if (!name_valid(req->name) || req->flags || req->pad ||
	    (req->mode & ~0777))
		return -EINVAL;
	if (!req->n_layers || req->n_layers > max_layers ||
	    !req->n_experts || req->n_experts > max_experts ||
	    req->expert_begin >= req->expert_end ||
	    req->expert_end > req->n_experts ||
	    !req->n_slots || req->n_slots > max_slots ||
	    !req->expert_bytes || !PAGE_ALIGNED(req->expert_bytes))
		return -EINVAL;
	if (req->expert_bytes > (u64)max_expert_mb << 20)
		return -EINVAL;
	n_idx = (u64)req->n_layers * (req->expert_end - req->expert_begin);
	if (check_mul_overflow(n_idx, req->expert_bytes, &bytes))
		return -EOVERFLOW;
	*host_bytes = bytes;
	return 0;
}

int moecache_pool_create(const struct moecache_pool_create *req)
{
	struct moecache_pool *pool = NULL;
	u64 host_bytes;
	kuid_t uid = make_kuid(current_user_ns(), req->uid);
	kgid_t gid = make_kgid(current_user_ns(), req->gid);
	int ret;

	ret = pool_create_check(req, &host_bytes);
	if (ret)
		return ret;
	if (!uid_valid(uid) || !gid_valid(gid))
		return -EINVAL;

	mutex_lock(&moecache_pools_lock);
	if (pool_find(req->name)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (moecache_n_pools >= max_pools ||
	    host_bytes > ((u64)max_host_mb << 20) - moecache_host_bytes) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	kref_init(&pool->ref);
	strscpy(pool->name, req->name, sizeof(pool->name));
	pool->n_layers = req->n_layers;
	pool->n_experts = req->n_experts;
	pool->expert_begin = req->expert_begin;
	pool->expert_end = req->expert_end;
	pool->n_local = req->expert_end - req->expert_begin;
	pool->n_idx = pool->n_layers * pool->n_local;
	pool->n_slots = req->n_slots;
	pool->expert_bytes = req->expert_bytes;
	pool->n_pages = host_bytes >> PAGE_SHIFT;
	pool->uid = uid;
	pool->gid = gid;
	pool->mode = req->mode;
	spin_lock_init(&pool->lock);
	init_waitqueue_head(&pool->client_wq);
	init_waitqueue_head(&pool->agent_wq);
	INIT_LIST_HEAD(&pool->queue);
	INIT_LIST_HEAD(&pool->files);
	pool->storm_start = jiffies;

	ret = pool_alloc_state(pool);
	if (ret)
		goto out_free;
	ret = pool_alloc_region(pool);
	if (ret)
		goto out_free;
	ret = pool_alloc_pages(pool);
	if (ret)
		goto out_free;

	list_add_tail(&pool->node, &moecache_pools);
	moecache_n_pools++;
	moecache_host_bytes += host_bytes;
	mutex_unlock(&moecache_pools_lock);
	moecache_nl_event(MOECACHE_EV_POOL_CREATED, req->name, 0, 0);
	return 0;

out_free:
	pool_free(pool);
out_unlock:
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

bool moecache_pool_may_admin(struct moecache_pool *pool)
{
	return uid_eq(current_euid(), pool->uid) || capable(CAP_SYS_ADMIN);
}

static void pool_unlink(struct moecache_pool *pool)
{
	lockdep_assert_held(&moecache_pools_lock);
	list_del_init(&pool->node);
	moecache_n_pools--;
	moecache_host_bytes -= (u64)pool->n_pages << PAGE_SHIFT;
}

int moecache_pool_destroy(const char *name)
{
	char ev_name[MOECACHE_NAME_LEN];
	struct moecache_pool *pool;
	int ret = 0;

	mutex_lock(&moecache_pools_lock);
	pool = pool_find(name);
	if (!pool) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (!moecache_pool_may_admin(pool)) {
		ret = -EPERM;
		goto out_unlock;
	}
	spin_lock(&pool->lock);
	if (pool->n_files)
		ret = -EBUSY;
	spin_unlock(&pool->lock);
	if (ret)
		goto out_unlock;
	pool_unlink(pool);
	strscpy(ev_name, pool->name, sizeof(ev_name));
	kref_put(&pool->ref, pool_release);
	mutex_unlock(&moecache_pools_lock);
	moecache_nl_event(MOECACHE_EV_POOL_DESTROYED, ev_name, 0, 0);
	return 0;

out_unlock:
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

/* IPC-style check of the pool's mode for MAY_READ or MAY_WRITE. */
static bool pool_permits(struct moecache_pool *pool, int want)
{
	unsigned int granted;

	if (uid_eq(current_euid(), pool->uid))
		granted = pool->mode >> 6;
	else if (in_egroup_p(pool->gid))
		granted = pool->mode >> 3;
	else
		granted = pool->mode;
	if ((want & granted & 7) == want)
		return true;
	return capable(CAP_SYS_ADMIN);
}

int moecache_visit_pools(moecache_pool_fn fn, void *arg, unsigned long *pos)
{
	struct moecache_pool *pool;
	unsigned long i = 0;
	int ret = 0;

	mutex_lock(&moecache_pools_lock);
	list_for_each_entry(pool, &moecache_pools, node) {
		if (i++ < *pos)
			continue;
		ret = fn(pool, arg);
		if (ret)
			break;
		*pos = i;
	}
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

int moecache_with_pool(const char *name, moecache_pool_fn fn, void *arg)
{
	struct moecache_pool *pool;
	int ret;

	mutex_lock(&moecache_pools_lock);
	pool = pool_find(name);
	ret = pool ? fn(pool, arg) : -ENOENT;
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

void moecache_pool_describe(struct moecache_pool *pool,
			    struct moecache_pool_desc *desc)
{
	memset(desc, 0, sizeof(*desc));
	strscpy(desc->name, pool->name, sizeof(desc->name));
	desc->n_layers = pool->n_layers;
	desc->n_experts = pool->n_experts;
	desc->expert_begin = pool->expert_begin;
	desc->expert_end = pool->expert_end;
	desc->n_slots = pool->n_slots;
	desc->expert_bytes = pool->expert_bytes;
	desc->host_bytes = (u64)pool->n_pages << PAGE_SHIFT;
	desc->uid = from_kuid_munged(current_user_ns(), pool->uid);
	desc->gid = from_kgid_munged(current_user_ns(), pool->gid);
	desc->mode = pool->mode;
	spin_lock(&pool->lock);
	desc->flags = pool->hdr->flags;
	desc->n_files = pool->n_files;
	desc->agent_pid = pool->agent_pid;
	desc->agent_epoch = pool->hdr->agent_epoch;
	spin_unlock(&pool->lock);
}

int moecache_pool_stats(struct moecache_pool *pool, u32 layer,
			struct moecache_stats *st)
{
	const struct moecache_counters *c;

	if (layer != MOECACHE_NONE && layer >= pool->n_layers)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->layer = layer;
	spin_lock(&pool->lock);
	c = layer == MOECACHE_NONE ? &pool->total : &pool->layer[layer];
	st->hits = c->c[C_HITS];
	st->misses = c->c[C_MISSES];
	st->prefetch_hits = c->c[C_PREFETCH_HITS];
	st->prefetches = c->c[C_PREFETCHES];
	st->evictions = c->c[C_EVICTIONS];
	st->commits = c->c[C_COMMITS];
	st->aborts = c->c[C_ABORTS];
	st->bytes_copied = c->c[C_BYTES_COPIED];
	st->waits = c->c[C_WAITS];
	st->wait_ns = c->c[C_WAIT_NS];
	memcpy(st->wait_hist, c->wait_hist, sizeof(st->wait_hist));
	st->resident = pool->n_resident;
	st->filling = pool->n_filling;
	st->pinned_slots = pool->n_pinned_slots;
	st->pins = min_t(u64, pool->n_pins, U32_MAX);
	st->queued = pool->n_queued;
	st->inflight = pool->n_inflight;
	st->n_clients = pool->n_clients;
	st->agent_pid = pool->agent_pid;
	spin_unlock(&pool->lock);
	return 0;
}

static bool slot_fast_pinned(struct moecache_pool *pool, u32 slot)
{
	struct moecache_file *f;

	lockdep_assert_held(&pool->lock);
	list_for_each_entry(f, &pool->files, node)
		if (f->fast_pins && READ_ONCE(f->fast_pins[slot]))
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
 * gone and backs off, or the pin is seen here.
 */
static bool slot_unpublish(struct moecache_pool *pool, u32 slot)
{
	u32 idx = pool->owner[slot];

	lockdep_assert_held(&pool->lock);
	if (WARN_ON_ONCE(idx & MOECACHE_OWNER_FILLING) || !pool->n_fast_files)
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
static void slot_unmap(struct moecache_pool *pool, u32 slot)
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
		    pool->pins[slot] || !slot_unpublish(pool, slot))
			continue;
		slot_unmap(pool, slot);
		freed++;
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);
	return freed;
}

/* ---- files ---- */

static int moecache_open(struct inode *inode, struct file *file)
{
	struct moecache_file *mf;

	mf = kzalloc(sizeof(*mf), GFP_KERNEL);
	if (!mf)
		return -ENOMEM;
	INIT_LIST_HEAD(&mf->node);
	file->private_data = mf;
	return 0;
}

/* The agent is gone: nothing half-filled stays, its requests go back. */
static void agent_detach(struct moecache_pool *pool)
{
	u32 slot, own, idx;

	lockdep_assert_held(&pool->lock);
	map_write_begin(pool);
	for (slot = 0; slot < pool->n_slots; slot++) {
		own = pool->owner[slot];
		if (own == MOECACHE_NONE || !(own & MOECACHE_OWNER_FILLING))
			continue;
		WRITE_ONCE(pool->owner[slot], MOECACHE_NONE);
		pool->n_filling--;
		request_requeue(pool, own & MOECACHE_OWNER_IDX_MASK);
	}
	for (idx = 0; idx < pool->n_idx; idx++) {
		if (pool->estate[idx] != ES_INFLIGHT)
			continue;
		pool->n_inflight--;
		request_requeue(pool, idx);
	}
	WARN_ON_ONCE(pool->n_filling || pool->n_inflight);
	pool->agent = NULL;
	pool->agent_pid = 0;
	map_set_flags(pool, 0, MOECACHE_POOL_AGENT);
	map_write_end(pool);
}

static void drop_all_pins(struct moecache_pool *pool, struct moecache_file *mf)
{
	u32 slot;

	lockdep_assert_held(&pool->lock);
	for (slot = 0; slot < pool->n_slots; slot++)
		while (mf->pins[slot]) {
			mf->pins[slot]--;
			unpin_slot(pool, slot);
		}
}

static void client_detach(struct moecache_pool *pool, struct moecache_file *mf)
{
	u32 idx;

	lockdep_assert_held(&pool->lock);
	drop_all_pins(pool, mf);
	for_each_set_bit(idx, mf->asked, pool->n_idx) {
		if (WARN_ON_ONCE(!pool->n_askers[idx]))
			continue;
		if (--pool->n_askers[idx] || pool->estate[idx] != ES_QUEUED)
			continue;
		request_dequeue(pool, idx);
		pool->estate[idx] = ES_IDLE;
		pool->req_flags[idx] = 0;
	}
	pool->n_clients--;
}

static int moecache_release(struct inode *inode, struct file *file)
{
	struct moecache_file *mf = file->private_data;
	struct moecache_pool *pool = mf->pool;
	char ev_name[MOECACHE_NAME_LEN];
	pid_t lost_pid = 0;
	bool agent_lost = false;

	if (pool) {
		spin_lock(&pool->lock);
		if (mf->role == MOECACHE_ROLE_AGENT) {
			lost_pid = pool->agent_pid;
			agent_detach(pool);
			agent_lost = true;
		} else if (mf->role == MOECACHE_ROLE_CLIENT) {
			client_detach(pool, mf);
		}
		list_del(&mf->node);
		pool->n_files--;
		if (mf->fast_pins)
			pool->n_fast_files--;
		spin_unlock(&pool->lock);
		wake_up_all(&pool->client_wq);
		if (agent_lost) {
			strscpy(ev_name, pool->name, sizeof(ev_name));
			moecache_nl_event(MOECACHE_EV_AGENT_LOST, ev_name,
					  lost_pid, 0);
		}
		kref_put(&pool->ref, pool_release);
	}
	kvfree(mf->pins);
	bitmap_free(mf->asked);
	/* Off the file list: no evictor reads it any more. */
	vfree(mf->fast_pins);
	kfree(mf);
	return 0;
}

/* ---- ioctls ---- */

static long ioc_get_info(void __user *argp)
{
	struct moecache_info info = {
		.abi_version = MOECACHE_ABI_VERSION,
		.max_pools = max_pools,
		.max_layers = max_layers,
		.max_experts = max_experts,
		.max_slots = max_slots,
		.max_batch = max_batch,
		.max_host_bytes = (u64)max_host_mb << 20,
		.max_expert_bytes = (u64)max_expert_mb << 20,
	};

	mutex_lock(&moecache_pools_lock);
	info.n_pools = moecache_n_pools;
	info.host_bytes_used = moecache_host_bytes;
	mutex_unlock(&moecache_pools_lock);
	return copy_to_user(argp, &info, sizeof(info)) ? -EFAULT : 0;
}

static long ioc_pool_create(void __user *argp)
{
	struct moecache_pool_create req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	return moecache_pool_create(&req);
}

static long ioc_pool_destroy(void __user *argp)
{
	struct moecache_pool_name req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (!name_valid(req.name) || req.flags || req.pad)
		return -EINVAL;
	return moecache_pool_destroy(req.name);
}

static void offsets_fill(struct moecache_pool *pool, struct moecache_file *mf,
			 struct moecache_offsets *o)
{
	memset(o, 0, sizeof(*o));
	o->map_offset = 0;
	o->map_size = pool->region_size;
	o->host_offset = MOECACHE_HOST_OFFSET;
	o->host_size = (u64)pool->n_pages << PAGE_SHIFT;
	if (mf->fast_pins) {
		o->pins_offset = MOECACHE_PINS_OFFSET;
		o->pins_size = mf->fast_pins_size;
	}
}

static long ioc_attach(struct moecache_file *mf, void __user *argp)
{
	struct moecache_attach req;
	struct moecache_pool *pool;
	u32 *pins = NULL, *fast_pins = NULL;
	size_t fast_pins_size = 0;
	unsigned long *asked = NULL;
	int want, ret = 0;
	pid_t pid = task_tgid_vnr(current);

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (!name_valid(req.name) || (req.flags & ~MOECACHE_ATTACH_FLAGS_ALL) ||
	    ((req.flags & MOECACHE_ATTACH_FAST_PINS) &&
	     req.role != MOECACHE_ROLE_CLIENT))
		return -EINVAL;
	switch (req.role) {
	case MOECACHE_ROLE_CLIENT:
		want = MAY_READ;
		break;
	case MOECACHE_ROLE_AGENT:
	case MOECACHE_ROLE_LOADER:
		want = MAY_WRITE;
		break;
	default:
		return -EINVAL;
	}

	/* An unwritable reply fails before the file is attached. */
	if (copy_to_user(argp, &req, sizeof(req)))
		return -EFAULT;

	mutex_lock(&moecache_pools_lock);
	if (mf->pool) {
		ret = -EALREADY;
		goto out_unlock;
	}
	pool = pool_find(req.name);
	if (!pool) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (!pool_permits(pool, want)) {
		ret = -EACCES;
		goto out_unlock;
	}
	if (req.role == MOECACHE_ROLE_CLIENT) {
		pins = kvcalloc(pool->n_slots, sizeof(*pins), GFP_KERNEL);
		asked = bitmap_zalloc(pool->n_idx, GFP_KERNEL);
		if (!pins || !asked) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	if (req.flags & MOECACHE_ATTACH_FAST_PINS) {
		fast_pins_size = PAGE_ALIGN((size_t)pool->n_slots * sizeof(u32));
		/* Zeroed, and mappable by remap_vmalloc_range(). */
		fast_pins = vmalloc_user(fast_pins_size);
		if (!fast_pins) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}

	spin_lock(&pool->lock);
	if (req.role == MOECACHE_ROLE_AGENT && pool->agent) {
		spin_unlock(&pool->lock);
		ret = -EBUSY;
		goto out_unlock;
	}
	mf->role = req.role;
	mf->pins = pins;
	mf->asked = asked;
	mf->fast_pins = fast_pins;
	mf->fast_pins_size = fast_pins_size;
	pins = NULL;
	asked = NULL;
	fast_pins = NULL;
	list_add_tail(&mf->node, &pool->files);
	pool->n_files++;
	if (mf->fast_pins)
		pool->n_fast_files++;
	if (req.role == MOECACHE_ROLE_CLIENT)
		pool->n_clients++;
	if (req.role == MOECACHE_ROLE_AGENT) {
		pool->agent = mf;
		pool->agent_pid = pid;
		map_write_begin(pool);
		pool->hdr->agent_epoch++;
		map_set_flags(pool, MOECACHE_POOL_AGENT, 0);
		map_write_end(pool);
	}
	req.n_layers = pool->n_layers;
	req.n_experts = pool->n_experts;
	req.expert_begin = pool->expert_begin;
	req.expert_end = pool->expert_end;
	req.n_slots = pool->n_slots;
	req.pool_flags = pool->hdr->flags;
	req.expert_bytes = pool->expert_bytes;
	spin_unlock(&pool->lock);
	offsets_fill(pool, mf, &req.off);
	kref_get(&pool->ref);
	/* Fully attached: pairs with the acquire loads of mf->pool. */
	smp_store_release(&mf->pool, pool);
	mutex_unlock(&moecache_pools_lock);

	if (req.role == MOECACHE_ROLE_AGENT) {
		wake_up_all(&pool->client_wq);
		moecache_nl_event(MOECACHE_EV_AGENT_ATTACHED, req.name, pid, 0);
	}
	/* Checked writable above; only a racing munmap fails here. */
	return copy_to_user(argp, &req, sizeof(req)) ? -EFAULT : 0;

out_unlock:
	mutex_unlock(&moecache_pools_lock);
	kvfree(pins);
	bitmap_free(asked);
	vfree(fast_pins);
	return ret;
}

/* A list argument: small ones live on the caller's stack. */
struct id_list {
	u32 *ids;
	u32 stack[MOECACHE_STACK_BATCH];
};

static int id_list_copy(struct id_list *l, u64 uptr, u32 count)
{
	l->ids = l->stack;
	if (!count)
		return -EINVAL;
	if (count > max_batch)
		return -E2BIG;
	if (count > MOECACHE_STACK_BATCH) {
		l->ids = memdup_user(u64_to_user_ptr(uptr),
				     (size_t)count * sizeof(u32));
		if (IS_ERR(l->ids)) {
			int ret = PTR_ERR(l->ids);

			l->ids = l->stack;
			return ret;
		}
		return 0;
	}
	if (copy_from_user(l->stack, u64_to_user_ptr(uptr),
			   (size_t)count * sizeof(u32)))
		return -EFAULT;
	return 0;
}

static void id_list_free(struct id_list *l)
{
	if (l->ids != l->stack)
		kfree(l->ids);
}

/* Turns global expert ids of one layer into idx, refusing repeats. */
static int experts_to_idx(struct moecache_pool *pool, u32 layer, u32 *ids,
			  u32 count)
{
	u32 i, j;

	if (layer >= pool->n_layers)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		if (ids[i] < pool->expert_begin || ids[i] >= pool->expert_end)
			return -EINVAL;
		ids[i] = pool_idx(pool, layer, ids[i]);
	}
	/* Long lists are checked by experts_unique() instead. */
	for (i = 1; i < count && count <= 64; i++)
		for (j = 0; j < i; j++)
			if (ids[i] == ids[j])
				return -EINVAL;
	return 0;
}

/* Refuses repeats in long lists with a bitmap over the pool's idx space. */
static int experts_unique(struct moecache_pool *pool, const u32 *idx,
			  u32 count)
{
	unsigned long *seen;
	u32 i;
	int ret = 0;

	if (count <= 64)
		return 0;
	seen = bitmap_zalloc(pool->n_idx, GFP_KERNEL);
	if (!seen)
		return -ENOMEM;
	for (i = 0; i < count && !ret; i++)
		if (__test_and_set_bit(idx[i], seen))
			ret = -EINVAL;
	bitmap_free(seen);
	return ret;
}

struct acquire_ctx {
	struct moecache_acquire req;
	struct id_list idx;
	struct id_list slots;
	u32 n_pinned;
	u32 fail_snap;
};

/* Pins what became resident; > 0 when all are pinned, < 0 to give up. */
static int acquire_progress(struct moecache_pool *pool,
			    struct moecache_file *mf, struct acquire_ctx *ac)
{
	bool wake_agent = false;
	int ret = 0;
	u32 i, idx;

	spin_lock(&pool->lock);
	for (i = 0; i < ac->req.count; i++) {
		if (ac->slots.ids[i] != MOECACHE_NONE)
			continue;
		idx = ac->idx.ids[i];
		if (pool->estate[idx] == ES_RESIDENT) {
			ac->slots.ids[i] = pool->map[idx];
			pin_slot(pool, mf, ac->slots.ids[i], pool->hdr->clock);
			ac->n_pinned++;
		} else if ((s32)(pool->fail_gen[idx] - ac->fail_snap) > 0) {
			ret = -EIO;
		} else if (pool->estate[idx] == ES_IDLE) {
			/* Committed and evicted again before we woke. */
			wake_agent |= request_add(pool, mf, idx,
						  MOECACHE_REQ_DEMAND);
		}
	}
	if (!ret && ac->n_pinned < ac->req.count && !pool->agent &&
	    !(ac->req.flags & MOECACHE_ACQ_KEEP_WAITING))
		ret = -EPIPE;
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (ret)
		return ret;
	return ac->n_pinned == ac->req.count;
}

static void acquire_undo(struct moecache_pool *pool, struct moecache_file *mf,
			 struct acquire_ctx *ac)
{
	u32 i, slot;

	spin_lock(&pool->lock);
	for (i = 0; i < ac->req.count; i++) {
		slot = ac->slots.ids[i];
		if (slot == MOECACHE_NONE)
			continue;
		mf->pins[slot]--;
		unpin_slot(pool, slot);
		ac->slots.ids[i] = MOECACHE_NONE;
	}
	ac->n_pinned = 0;
	spin_unlock(&pool->lock);
}

static int acquire_wait(struct moecache_pool *pool, struct moecache_file *mf,
			struct acquire_ctx *ac)
{
	long left = ac->req.timeout_ms ? msecs_to_jiffies(ac->req.timeout_ms) :
					 MAX_SCHEDULE_TIMEOUT;
	ktime_t start = ktime_get();
	int done = 0;
	long ret;

	ret = wait_event_interruptible_timeout(pool->client_wq,
					       (done = acquire_progress(pool, mf, ac)),
					       left);
	if (ret < 0)
		done = -EINTR;
	else if (ret == 0 && done <= 0)
		done = -ETIMEDOUT;
	if (done > 0) {
		u64 ns = ktime_to_ns(ktime_sub(ktime_get(), start));

		spin_lock(&pool->lock);
		count_wait(&pool->total, ns);
		count_wait(layer_ctr(pool, ac->idx.ids[0]), ns);
		spin_unlock(&pool->lock);
		return 0;
	}
	return done;
}

/*
 * Counts misses per second; returns the misses counted so far in this
 * second when they just crossed miss_storm_per_sec, else 0.
 */
static u64 storm_check(struct moecache_pool *pool, u32 misses)
{
	unsigned int limit = READ_ONCE(miss_storm_per_sec);

	lockdep_assert_held(&pool->lock);
	if (time_after(jiffies, pool->storm_start + HZ)) {
		pool->storm_start = jiffies;
		pool->storm_misses = 0;
	}
	if (!limit || !misses)
		return 0;
	pool->storm_misses += misses;
	if (pool->storm_misses >= limit && pool->storm_misses - misses < limit)
		return pool->storm_misses;
	return 0;
}

/* Drops one pin of mf per listed slot: all of them, or none (-EINVAL). */
static int release_locked(struct moecache_pool *pool, struct moecache_file *mf,
			  const u32 *slots, u32 count)
{
	u32 i, j;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < count; i++) {
		if (slots[i] >= pool->n_slots || !mf->pins[slots[i]]) {
			/* Listed more often than pinned: put back, refuse. */
			for (j = 0; j < i; j++)
				mf->pins[slots[j]]++;
			return -EINVAL;
		}
		mf->pins[slots[i]]--;
	}
	for (i = 0; i < count; i++)
		unpin_slot(pool, slots[i]);
	return 0;
}

static int release_list(struct moecache_pool *pool, struct moecache_file *mf,
			const u32 *slots, u32 count)
{
	int ret;

	spin_lock(&pool->lock);
	ret = release_locked(pool, mf, slots, count);
	spin_unlock(&pool->lock);
	return ret;
}

/*
 * ACQUIRE, after dropping the pins listed in rel (ACQUIRE_RELEASE): the
 * release is checked with everything else and done before any pin is
 * taken, and stays done if a WAIT then fails.
 */
static long do_acquire(struct moecache_pool *pool, struct moecache_file *mf,
		       void __user *argp, const struct moecache_acquire *req,
		       const u32 *rel, u32 rel_count)
{
	struct acquire_ctx ac;
	bool wake_agent = false;
	u32 i, idx, slot, misses = 0, prefetch_hits = 0;
	u64 storm;
	u64 clock;
	int ret;

	ac.req = *req;
	if ((ac.req.flags & ~MOECACHE_ACQ_FLAGS_ALL) || ac.req.reserved ||
	    ((ac.req.flags & MOECACHE_ACQ_KEEP_WAITING) &&
	     !(ac.req.flags & MOECACHE_ACQ_WAIT)) ||
	    ((ac.req.flags & MOECACHE_ACQ_NO_QUEUE) &&
	     (ac.req.flags & MOECACHE_ACQ_WAIT)))
		return -EINVAL;
	ret = id_list_copy(&ac.idx, ac.req.experts, ac.req.count);
	if (ret)
		return ret;
	ret = experts_to_idx(pool, ac.req.layer, ac.idx.ids, ac.req.count);
	if (!ret)
		ret = experts_unique(pool, ac.idx.ids, ac.req.count);
	if (ret)
		goto out_free_idx;
	ac.slots.ids = ac.slots.stack;
	if (ac.req.count > MOECACHE_STACK_BATCH) {
		ac.slots.ids = kmalloc_array(ac.req.count, sizeof(u32),
					     GFP_KERNEL);
		if (!ac.slots.ids) {
			ret = -ENOMEM;
			goto out_free_idx;
		}
	}
	ac.n_pinned = 0;
	/* An unwritable result fails here, before anything changes. */
	if (copy_to_user(argp, &ac.req, sizeof(ac.req)) ||
	    clear_user(u64_to_user_ptr(ac.req.slots),
		       (size_t)ac.req.count * sizeof(u32))) {
		ret = -EFAULT;
		goto out_free_slots;
	}

	spin_lock(&pool->lock);
	if (rel_count) {
		ret = release_locked(pool, mf, rel, rel_count);
		if (ret) {
			spin_unlock(&pool->lock);
			goto out_free_slots;
		}
	}
	ac.fail_snap = pool->fail_counter;
	clock = pool->hdr->clock + 1;
	WRITE_ONCE(pool->hdr->clock, clock);
	for (i = 0; i < ac.req.count; i++) {
		idx = ac.idx.ids[i];
		WRITE_ONCE(pool->access[idx], pool->access[idx] + 1);
		if (pool->estate[idx] == ES_RESIDENT) {
			slot = pool->map[idx];
			pin_slot(pool, mf, slot, clock);
			if (pool->slot_flags[slot] & SF_PREFETCHED) {
				pool->slot_flags[slot] &= ~SF_PREFETCHED;
				prefetch_hits++;
			}
			ac.slots.ids[i] = slot;
			ac.n_pinned++;
			continue;
		}
		ac.slots.ids[i] = MOECACHE_NONE;
		misses++;
		if (!(ac.req.flags & MOECACHE_ACQ_NO_QUEUE))
			wake_agent |= request_add(pool, mf, idx,
						  MOECACHE_REQ_DEMAND);
	}
	/* One layer per call: count once for the pool and the layer. */
	layer_count(pool, ac.req.layer, C_HITS, ac.n_pinned);
	layer_count(pool, ac.req.layer, C_MISSES, misses);
	layer_count(pool, ac.req.layer, C_PREFETCH_HITS, prefetch_hits);
	storm = storm_check(pool, misses);
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (storm)
		moecache_nl_event(MOECACHE_EV_MISS_STORM, pool->name,
				  min_t(u64, storm, U32_MAX), 0);

	ac.req.n_hits = ac.n_pinned;
	if (misses && (ac.req.flags & MOECACHE_ACQ_WAIT)) {
		ret = acquire_wait(pool, mf, &ac);
		if (ret) {
			acquire_undo(pool, mf, &ac);
			goto out_free_slots;
		}
	}
	ac.req.n_pinned = ac.n_pinned;
	if (copy_to_user(u64_to_user_ptr(ac.req.slots), ac.slots.ids,
			 (size_t)ac.req.count * sizeof(u32)) ||
	    copy_to_user(argp, &ac.req, sizeof(ac.req))) {
		acquire_undo(pool, mf, &ac);
		ret = -EFAULT;
	}
out_free_slots:
	id_list_free(&ac.slots);
out_free_idx:
	id_list_free(&ac.idx);
	return ret;
}

static long ioc_acquire(struct moecache_pool *pool, struct moecache_file *mf,
			void __user *argp)
{
	struct moecache_acquire req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_CLIENT)
		return -EPERM;
	return do_acquire(pool, mf, argp, &req, NULL, 0);
}

static long ioc_acquire_release(struct moecache_pool *pool,
				struct moecache_file *mf, void __user *argp)
{
	struct moecache_acquire_release req;
	struct id_list rel = { .ids = rel.stack };
	long ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_CLIENT)
		return -EPERM;
	if (req.flags)
		return -EINVAL;
	if (req.release_count) {
		ret = id_list_copy(&rel, req.release_slots, req.release_count);
		if (ret)
			return ret;
	} else if (req.release_slots) {
		return -EINVAL;
	}
	/* The acquire half is the struct's first member. */
	ret = do_acquire(pool, mf, argp, &req.acquire, rel.ids,
			 req.release_count);
	id_list_free(&rel);
	return ret;
}

static int check_target(struct moecache_pool *pool, u32 layer, u32 expert,
			u32 *idx)
{
	if (layer >= pool->n_layers || expert < pool->expert_begin ||
	    expert >= pool->expert_end)
		return -EINVAL;
	*idx = pool_idx(pool, layer, expert);
	return 0;
}

/*
 * Hits a fast-pinning client served itself, counted as ACQUIRE would have:
 * a run of entries of one layer is one acquire (one clock tick).
 */
static long ioc_report(struct moecache_pool *pool, struct moecache_file *mf,
		       void __user *argp)
{
	struct moecache_access stack[MOECACHE_STACK_REPORT], *acc = stack;
	struct moecache_report req;
	u32 i, idx, slot;
	u64 clock;
	long ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_CLIENT)
		return -EPERM;
	if (req.flags || !req.count)
		return -EINVAL;
	if (req.count > max_batch)
		return -E2BIG;
	if (req.count > MOECACHE_STACK_REPORT) {
		acc = memdup_user(u64_to_user_ptr(req.accesses),
				  (size_t)req.count * sizeof(*acc));
		if (IS_ERR(acc))
			return PTR_ERR(acc);
	} else if (copy_from_user(stack, u64_to_user_ptr(req.accesses),
				  (size_t)req.count * sizeof(*acc))) {
		return -EFAULT;
	}
	for (i = 0; i < req.count; i++) {
		ret = check_target(pool, acc[i].layer, acc[i].expert, &idx);
		if (ret)
			goto out_free;
	}

	spin_lock(&pool->lock);
	clock = pool->hdr->clock;
	for (i = 0; i < req.count; i++) {
		if (!i || acc[i].layer != acc[i - 1].layer)
			WRITE_ONCE(pool->hdr->clock, ++clock);
		idx = pool_idx(pool, acc[i].layer, acc[i].expert);
		WRITE_ONCE(pool->access[idx], pool->access[idx] + 1);
		layer_count(pool, acc[i].layer, C_HITS, 1);
		/* Evicted since it was taken: a hit all the same, no stamp. */
		if (pool->estate[idx] != ES_RESIDENT)
			continue;
		slot = pool->map[idx];
		WRITE_ONCE(pool->last_use[slot], clock);
		if (pool->slot_flags[slot] & SF_PREFETCHED) {
			pool->slot_flags[slot] &= ~SF_PREFETCHED;
			layer_count(pool, acc[i].layer, C_PREFETCH_HITS, 1);
		}
	}
	spin_unlock(&pool->lock);
out_free:
	if (acc != stack)
		kfree(acc);
	return ret;
}

static long ioc_release(struct moecache_pool *pool, struct moecache_file *mf,
			void __user *argp)
{
	struct moecache_release req;
	struct id_list slots;
	int ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_CLIENT)
		return -EPERM;
	if (req.flags & ~MOECACHE_REL_ALL)
		return -EINVAL;
	if (req.flags & MOECACHE_REL_ALL) {
		if (req.count || req.slots)
			return -EINVAL;
		spin_lock(&pool->lock);
		drop_all_pins(pool, mf);
		spin_unlock(&pool->lock);
		return 0;
	}
	ret = id_list_copy(&slots, req.slots, req.count);
	if (ret)
		return ret;
	ret = release_list(pool, mf, slots.ids, req.count);
	id_list_free(&slots);
	return ret;
}

static long ioc_prefetch(struct moecache_pool *pool, struct moecache_file *mf,
			 void __user *argp)
{
	struct moecache_prefetch req;
	struct id_list idx;
	bool wake_agent = false;
	u32 i;
	int ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_CLIENT)
		return -EPERM;
	if (req.flags)
		return -EINVAL;
	req.n_queued = 0;
	ret = id_list_copy(&idx, req.experts, req.count);
	if (ret)
		return ret;
	ret = experts_to_idx(pool, req.layer, idx.ids, req.count);
	if (!ret)
		ret = experts_unique(pool, idx.ids, req.count);
	if (!ret && copy_to_user(argp, &req, sizeof(req)))
		ret = -EFAULT;
	if (ret)
		goto out_free;

	spin_lock(&pool->lock);
	for (i = 0; i < req.count; i++) {
		if (pool->estate[idx.ids[i]] != ES_IDLE)
			continue;
		request_add(pool, mf, idx.ids[i], MOECACHE_REQ_PREFETCH);
		pool_count(pool, idx.ids[i], C_PREFETCHES, 1);
		req.n_queued++;
		wake_agent = true;
	}
	spin_unlock(&pool->lock);
	if (wake_agent)
		wake_up_interruptible(&pool->agent_wq);
	if (copy_to_user(argp, &req, sizeof(req)))
		ret = -EFAULT;
out_free:
	id_list_free(&idx);
	return ret;
}

static long ioc_evict(struct moecache_pool *pool, struct moecache_file *mf,
		      void __user *argp)
{
	struct moecache_evict req;
	bool only_free, sample = false;
	u32 idx = MOECACHE_NONE, own;
	int ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	only_free = req.layer == MOECACHE_NONE;
	if (req.flags || req.slot >= pool->n_slots ||
	    (only_free && req.expert != MOECACHE_NONE))
		return -EINVAL;
	if (!only_free) {
		ret = check_target(pool, req.layer, req.expert, &idx);
		if (ret)
			return ret;
	}
	/* The victim must not be lost with an unwritable reply. */
	if (copy_to_user(argp, &req, sizeof(req)))
		return -EFAULT;

	spin_lock(&pool->lock);
	own = pool->owner[req.slot];
	if (pool->pins[req.slot] ||
	    (own != MOECACHE_NONE && (own & MOECACHE_OWNER_FILLING))) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (!only_free && (pool->estate[idx] == ES_RESIDENT ||
			   pool->estate[idx] == ES_FILLING)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	req.old_layer = MOECACHE_NONE;
	req.old_expert = MOECACHE_NONE;
	map_write_begin(pool);
	if (own != MOECACHE_NONE && !slot_unpublish(pool, req.slot)) {
		map_write_end(pool);
		ret = -EBUSY;
		goto out_unlock;
	}
	if (own != MOECACHE_NONE) {
		req.old_layer = idx_layer(pool, own);
		req.old_expert = idx_expert(pool, own);
		slot_unmap(pool, req.slot);
		pool->evict_events++;
		sample = evict_event_sample &&
			 !(pool->evict_events % evict_event_sample);
	}
	if (!only_free) {
		if (pool->estate[idx] == ES_QUEUED)
			request_dequeue(pool, idx);
		else if (pool->estate[idx] == ES_INFLIGHT)
			pool->n_inflight--;
		pool->estate[idx] = ES_FILLING;
		WRITE_ONCE(pool->owner[req.slot], MOECACHE_OWNER_FILLING | idx);
		pool->n_filling++;
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);

	if (sample)
		moecache_nl_event(MOECACHE_EV_EVICTION, pool->name,
				  req.old_layer, req.old_expert);
	return copy_to_user(argp, &req, sizeof(req)) ? -EFAULT : 0;

out_unlock:
	spin_unlock(&pool->lock);
	return ret;
}

/* Copies and checks a COMMIT/ABORT batch: each slot filling, once. */
static struct moecache_fill *fills_copy(struct moecache_pool *pool,
					const struct moecache_fill_batch *b)
{
	struct moecache_fill *f;
	u32 i, idx;

	if (b->flags)
		return ERR_PTR(-EINVAL);
	if (!b->count)
		return ERR_PTR(-EINVAL);
	if (b->count > max_batch)
		return ERR_PTR(-E2BIG);
	f = memdup_user(u64_to_user_ptr(b->fills),
			(size_t)b->count * sizeof(*f));
	if (IS_ERR(f))
		return f;
	for (i = 0; i < b->count; i++) {
		if (f[i].flags & ~MOECACHE_FILL_PREFETCH ||
		    check_target(pool, f[i].layer, f[i].expert, &idx) ||
		    (f[i].slot >= pool->n_slots && f[i].slot != MOECACHE_NONE)) {
			kfree(f);
			return ERR_PTR(-EINVAL);
		}
	}
	return f;
}

/* Under the lock: is every fill in the batch what the pool expects? */
static bool fills_match(struct moecache_pool *pool,
			const struct moecache_fill *f, u32 count,
			bool allow_inflight)
{
	u32 i, j, idx;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < count; i++) {
		idx = pool_idx(pool, f[i].layer, f[i].expert);
		if (f[i].slot == MOECACHE_NONE) {
			if (!allow_inflight ||
			    pool->estate[idx] != ES_INFLIGHT)
				return false;
		} else if (pool->owner[f[i].slot] !=
			   (MOECACHE_OWNER_FILLING | idx)) {
			return false;
		}
		for (j = 0; j < i; j++)
			if (pool_idx(pool, f[j].layer, f[j].expert) == idx)
				return false;
	}
	return true;
}

static long ioc_commit(struct moecache_pool *pool, struct moecache_file *mf,
		       void __user *argp)
{
	struct moecache_fill_batch b;
	struct moecache_fill *f;
	u32 i, idx, slot;
	u64 clock;
	int ret = 0;

	if (copy_from_user(&b, argp, sizeof(b)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	f = fills_copy(pool, &b);
	if (IS_ERR(f))
		return PTR_ERR(f);

	spin_lock(&pool->lock);
	if (!fills_match(pool, f, b.count, false)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	clock = pool->hdr->clock;
	map_write_begin(pool);
	for (i = 0; i < b.count; i++) {
		idx = pool_idx(pool, f[i].layer, f[i].expert);
		slot = f[i].slot;
		WRITE_ONCE(pool->owner[slot], idx);
		WRITE_ONCE(pool->last_use[slot], clock);
		pool->slot_flags[slot] = (f[i].flags & MOECACHE_FILL_PREFETCH) ?
					 SF_PREFETCHED : 0;
		pool->estate[idx] = ES_RESIDENT;
		map_publish(pool, idx, slot);
		pool->n_filling--;
		pool->n_resident++;
		request_done(pool, idx);
		pool_count(pool, idx, C_COMMITS, 1);
		pool_count(pool, idx, C_BYTES_COPIED, pool->expert_bytes);
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);
	wake_up_all(&pool->client_wq);
	kfree(f);
	return 0;

out_unlock:
	spin_unlock(&pool->lock);
	kfree(f);
	return ret;
}

static long ioc_abort(struct moecache_pool *pool, struct moecache_file *mf,
		      void __user *argp)
{
	struct moecache_fill_batch b;
	struct moecache_fill *f;
	bool requeued = false;
	u32 i, idx;
	int ret = 0;

	if (copy_from_user(&b, argp, sizeof(b)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	f = fills_copy(pool, &b);
	if (IS_ERR(f))
		return PTR_ERR(f);

	spin_lock(&pool->lock);
	if (!fills_match(pool, f, b.count, true)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	map_write_begin(pool);
	for (i = 0; i < b.count; i++) {
		idx = pool_idx(pool, f[i].layer, f[i].expert);
		if (f[i].slot == MOECACHE_NONE) {
			pool->n_inflight--;
			/*
			 * A declined hint that a client has missed on since
			 * the agent read it: queue it again as a demand.
			 */
			if (pool->req_flags[idx] & MOECACHE_REQ_DEMAND) {
				request_requeue(pool, idx);
				requeued = true;
				continue;
			}
		} else {
			WRITE_ONCE(pool->owner[f[i].slot], MOECACHE_NONE);
			pool->n_filling--;
		}
		/* Waiters fail only if a client really missed it. */
		if (pool->req_flags[idx] & MOECACHE_REQ_DEMAND)
			pool->fail_gen[idx] = ++pool->fail_counter;
		pool->estate[idx] = ES_IDLE;
		request_done(pool, idx);
		pool_count(pool, idx, C_ABORTS, 1);
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);
	wake_up_all(&pool->client_wq);
	if (requeued)
		wake_up_interruptible(&pool->agent_wq);
	kfree(f);
	return 0;

out_unlock:
	spin_unlock(&pool->lock);
	kfree(f);
	return ret;
}

static bool slot_resident(struct moecache_pool *pool, u32 slot)
{
	return pool->owner[slot] != MOECACHE_NONE &&
	       !(pool->owner[slot] & MOECACHE_OWNER_FILLING);
}

/* slot_unpublish() for every resident slot at once: all of them, or none. */
static bool pool_unpublish_all(struct moecache_pool *pool)
{
	bool pinned = false;
	u32 slot;

	lockdep_assert_held(&pool->lock);
	if (!pool->n_fast_files)
		return true;
	for (slot = 0; slot < pool->n_slots; slot++)
		if (slot_resident(pool, slot))
			WRITE_ONCE(pool->map[pool->owner[slot]], MOECACHE_NONE);
	/* As in slot_unpublish(). */
	smp_mb();
	for (slot = 0; slot < pool->n_slots && !pinned; slot++)
		pinned = slot_resident(pool, slot) &&
			 slot_fast_pinned(pool, slot);
	if (!pinned)
		return true;
	for (slot = 0; slot < pool->n_slots; slot++)
		if (slot_resident(pool, slot))
			map_publish(pool, pool->owner[slot], slot);
	return false;
}

/*
 * Frees every slot; the caller checked that none is pinned by ACQUIRE.
 * -EBUSY, with nothing changed, if one is fast-pinned.
 */
static int pool_clear_residency(struct moecache_pool *pool)
{
	u32 slot, own;

	lockdep_assert_held(&pool->lock);
	map_write_begin(pool);
	if (!pool_unpublish_all(pool)) {
		map_write_end(pool);
		return -EBUSY;
	}
	for (slot = 0; slot < pool->n_slots; slot++) {
		own = pool->owner[slot];
		if (own == MOECACHE_NONE)
			continue;
		if (own & MOECACHE_OWNER_FILLING) {
			WRITE_ONCE(pool->owner[slot], MOECACHE_NONE);
			pool->n_filling--;
			request_requeue(pool, own & MOECACHE_OWNER_IDX_MASK);
		} else {
			slot_unmap(pool, slot);
		}
	}
	map_write_end(pool);
	return 0;
}

static long ioc_bank_set(struct moecache_pool *pool, struct moecache_file *mf,
			 void __user *argp)
{
	struct moecache_bank req;
	struct file *bank, *old = NULL;
	u64 need;
	int ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	if (req.flags || req.reserved[0] || req.reserved[1] ||
	    req.backend < MOECACHE_BACKEND_CPU ||
	    req.backend > MOECACHE_BACKEND_ROCM ||
	    req.slot_stride < pool->expert_bytes)
		return -EINVAL;
	if (check_mul_overflow((u64)pool->n_slots, req.slot_stride, &need) ||
	    need > req.bank_bytes)
		return -EINVAL;
	bank = fget(req.fd);
	if (!bank)
		return -EBADF;

	spin_lock(&pool->lock);
	if (pool->n_pinned_slots) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (pool->bank) {
		ret = pool_clear_residency(pool);
		if (ret)
			goto out_unlock;
	}
	old = pool->bank;
	pool->bank = bank;
	bank = NULL;
	req.fd = -1;
	pool->bank_desc = req;
	map_write_begin(pool);
	map_set_flags(pool, MOECACHE_POOL_BANK, 0);
	map_write_end(pool);
out_unlock:
	spin_unlock(&pool->lock);
	if (bank)
		fput(bank);
	if (old)
		fput(old);
	return ret;
}

/*
 * A client may only read the bank. A memfd can be opened again read-only;
 * device banks (CUDA, ROCm) are shared as they are and protected by the
 * importing driver's access flags.
 */
static struct file *bank_reopen_ro(struct file *bank)
{
	struct file *ro = dentry_open(&bank->f_path, O_RDONLY | O_LARGEFILE,
				      current_cred());

	fput(bank);
	return ro;
}

static long ioc_bank_get(struct moecache_pool *pool, struct moecache_file *mf,
			 void __user *argp)
{
	struct moecache_bank req;
	struct file *bank;
	int fd;

	spin_lock(&pool->lock);
	bank = pool->bank;
	if (bank) {
		get_file(bank);
		req = pool->bank_desc;
	}
	spin_unlock(&pool->lock);
	if (!bank)
		return -ENODATA;
	if (mf->role == MOECACHE_ROLE_CLIENT &&
	    req.backend == MOECACHE_BACKEND_CPU) {
		bank = bank_reopen_ro(bank);
		if (IS_ERR(bank))
			return PTR_ERR(bank);
	}

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		fput(bank);
		return fd;
	}
	req.fd = fd;
	if (copy_to_user(argp, &req, sizeof(req))) {
		put_unused_fd(fd);
		fput(bank);
		return -EFAULT;
	}
	fd_install(fd, bank);
	return 0;
}

static long ioc_load(struct moecache_pool *pool, struct moecache_file *mf,
		     void __user *argp)
{
	struct moecache_load req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (mf->role != MOECACHE_ROLE_AGENT && mf->role != MOECACHE_ROLE_LOADER)
		return -EPERM;
	if (req.flags || (req.op != MOECACHE_LOAD_BEGIN &&
			  req.op != MOECACHE_LOAD_DONE))
		return -EINVAL;
	spin_lock(&pool->lock);
	map_write_begin(pool);
	if (req.op == MOECACHE_LOAD_BEGIN)
		map_set_flags(pool, 0, MOECACHE_POOL_LOADED);
	else
		map_set_flags(pool, MOECACHE_POOL_LOADED, 0);
	map_write_end(pool);
	spin_unlock(&pool->lock);
	return 0;
}

static long ioc_stats(struct moecache_pool *pool, void __user *argp)
{
	struct moecache_stats st;
	int ret;

	if (copy_from_user(&st, argp, sizeof(st)))
		return -EFAULT;
	if (st.flags)
		return -EINVAL;
	ret = moecache_pool_stats(pool, st.layer, &st);
	if (ret)
		return ret;
	return copy_to_user(argp, &st, sizeof(st)) ? -EFAULT : 0;
}

static long moecache_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case MOECACHE_IOC_NOP:
		return 0;
	case MOECACHE_IOC_GET_INFO:
		return ioc_get_info(argp);
	case MOECACHE_IOC_POOL_CREATE:
		return ioc_pool_create(argp);
	case MOECACHE_IOC_POOL_DESTROY:
		return ioc_pool_destroy(argp);
	case MOECACHE_IOC_ATTACH:
		return ioc_attach(mf, argp);
	case MOECACHE_IOC_ACQUIRE:
	case MOECACHE_IOC_ACQUIRE_RELEASE:
	case MOECACHE_IOC_REPORT:
	case MOECACHE_IOC_RELEASE:
	case MOECACHE_IOC_PREFETCH:
	case MOECACHE_IOC_EVICT:
	case MOECACHE_IOC_COMMIT:
	case MOECACHE_IOC_ABORT:
	case MOECACHE_IOC_BANK_SET:
	case MOECACHE_IOC_BANK_GET:
	case MOECACHE_IOC_LOAD:
	case MOECACHE_IOC_STATS:
		if (!pool)
			return -ENOTCONN;
		break;
	default:
		return -ENOTTY;
	}

	switch (cmd) {
	case MOECACHE_IOC_ACQUIRE:
		return ioc_acquire(pool, mf, argp);
	case MOECACHE_IOC_ACQUIRE_RELEASE:
		return ioc_acquire_release(pool, mf, argp);
	case MOECACHE_IOC_REPORT:
		return ioc_report(pool, mf, argp);
	case MOECACHE_IOC_RELEASE:
		return ioc_release(pool, mf, argp);
	case MOECACHE_IOC_PREFETCH:
		return ioc_prefetch(pool, mf, argp);
	case MOECACHE_IOC_EVICT:
		return ioc_evict(pool, mf, argp);
	case MOECACHE_IOC_COMMIT:
		return ioc_commit(pool, mf, argp);
	case MOECACHE_IOC_ABORT:
		return ioc_abort(pool, mf, argp);
	case MOECACHE_IOC_BANK_SET:
		return ioc_bank_set(pool, mf, argp);
	case MOECACHE_IOC_BANK_GET:
		return ioc_bank_get(pool, mf, argp);
	case MOECACHE_IOC_LOAD:
		return ioc_load(pool, mf, argp);
	default:
		return ioc_stats(pool, argp);
	}
}

/* ---- read and poll: the agent's request queue ---- */

static ssize_t moecache_read(struct file *file, char __user *buf, size_t len,
			     loff_t *ppos)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);
	struct moecache_request *reqs;
	size_t max = len / sizeof(*reqs), n = 0, i;
	u32 idx;
	int ret;

	if (!pool)
		return -ENOTCONN;
	if (mf->role != MOECACHE_ROLE_AGENT)
		return -EPERM;
	if (!max)
		return -EINVAL;
	max = min_t(size_t, max, max_batch);
	reqs = kmalloc_array(max, sizeof(*reqs), GFP_KERNEL);
	if (!reqs)
		return -ENOMEM;

	for (;;) {
		spin_lock(&pool->lock);
		while (n < max && !list_empty(&pool->queue)) {
			idx = pool->queue.next - pool->qnode;
			request_dequeue(pool, idx);
			pool->estate[idx] = ES_INFLIGHT;
			pool->n_inflight++;
			reqs[n].layer = idx_layer(pool, idx);
			reqs[n].expert = idx_expert(pool, idx);
			reqs[n].flags = pool->req_flags[idx];
			reqs[n].pad = 0;
			n++;
		}
		spin_unlock(&pool->lock);
		if (n || (file->f_flags & O_NONBLOCK))
			break;
		ret = wait_event_interruptible(pool->agent_wq,
					       READ_ONCE(pool->n_queued));
		if (ret)
			goto out_free;
	}
	if (!n) {
		ret = -EAGAIN;
		goto out_free;
	}
	if (copy_to_user(buf, reqs, n * sizeof(*reqs))) {
		/* Nobody got them: back to the head of the queue. */
		spin_lock(&pool->lock);
		for (i = n; i-- > 0;) {
			idx = pool_idx(pool, reqs[i].layer, reqs[i].expert);
			if (pool->estate[idx] != ES_INFLIGHT)
				continue;
			pool->n_inflight--;
			pool->estate[idx] = ES_QUEUED;
			list_add(&pool->qnode[idx], &pool->queue);
			pool->n_queued++;
		}
		spin_unlock(&pool->lock);
		ret = -EFAULT;
		goto out_free;
	}
	ret = n * sizeof(*reqs);
out_free:
	kfree(reqs);
	return ret;
}

static __poll_t moecache_poll(struct file *file, poll_table *wait)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);

	if (!pool || mf->role != MOECACHE_ROLE_AGENT)
		return EPOLLERR;
	poll_wait(file, &pool->agent_wq, wait);
	if (READ_ONCE(pool->n_queued))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

/* ---- mmap ---- */

static int mmap_map_region(struct moecache_pool *pool,
			   struct vm_area_struct *vma, unsigned long pgoff)
{
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	moecache_vm_flags_clear(vma, VM_MAYWRITE);
	moecache_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	return remap_vmalloc_range(vma, pool->region, pgoff);
}

static int mmap_host_region(struct moecache_pool *pool,
			    struct moecache_file *mf,
			    struct vm_area_struct *vma, unsigned long pgoff)
{
	unsigned long n = vma_pages(vma);

	if (mf->role == MOECACHE_ROLE_CLIENT) {
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		moecache_vm_flags_clear(vma, VM_MAYWRITE);
	}
	moecache_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	/* Real pages, not PFNMAP: get_user_pages must work on them. */
	return vm_insert_pages(vma, vma->vm_start, pool->pages + pgoff, &n);
}

static int moecache_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);
	unsigned long pages = vma_pages(vma);
	unsigned long host_pgoff = MOECACHE_HOST_OFFSET >> PAGE_SHIFT;
	unsigned long pins_pgoff = MOECACHE_PINS_OFFSET >> PAGE_SHIFT;
	unsigned long pgoff = vma->vm_pgoff;

	if (!pool)
		return -ENOTCONN;
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (pgoff >= pins_pgoff && pgoff < host_pgoff) {
		/* This fd's own region, whole or nothing. */
		if (!mf->fast_pins || pgoff != pins_pgoff ||
		    pages > mf->fast_pins_size >> PAGE_SHIFT)
			return -EINVAL;
		moecache_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
		return remap_vmalloc_range(vma, mf->fast_pins, 0);
	}
	if (pgoff < host_pgoff) {
		if (pgoff >= pool->region_size >> PAGE_SHIFT ||
		    pages > (pool->region_size >> PAGE_SHIFT) - pgoff)
			return -EINVAL;
		return mmap_map_region(pool, vma, pgoff);
	}
	pgoff -= host_pgoff;
	if (pgoff >= pool->n_pages || pages > pool->n_pages - pgoff)
		return -EINVAL;
	return mmap_host_region(pool, mf, vma, pgoff);
}

static const struct file_operations moecache_fops = {
	.owner = THIS_MODULE,
	.open = moecache_open,
	.release = moecache_release,
	.unlocked_ioctl = moecache_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.read = moecache_read,
	.poll = moecache_poll,
	.mmap = moecache_mmap,
	.llseek = noop_llseek,
};

static struct miscdevice moecache_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "moecache",
	.fops = &moecache_fops,
	.mode = 0666,
};

static int __init moecache_init(void)
{
	int ret;

	ret = moecache_nl_init();
	if (ret)
		goto out;
	ret = misc_register(&moecache_dev);
	if (ret)
		goto out_nl;
	pr_info("ABI %u, host limit %u MiB\n", MOECACHE_ABI_VERSION,
		max_host_mb);
	return 0;

out_nl:
	moecache_nl_exit();
out:
	return ret;
}

static void __exit moecache_exit(void)
{
	struct moecache_pool *pool, *tmp;

	misc_deregister(&moecache_dev);
	moecache_nl_exit();
	/* No file is open (the module is referenced by each): free all. */
	mutex_lock(&moecache_pools_lock);
	list_for_each_entry_safe(pool, tmp, &moecache_pools, node) {
		pool_unlink(pool);
		WARN_ON(kref_read(&pool->ref) != 1);
		kref_put(&pool->ref, pool_release);
	}
	mutex_unlock(&moecache_pools_lock);
}

module_init(moecache_init);
module_exit(moecache_exit);

MODULE_DESCRIPTION("moecache: machine-wide residency of Mixture-of-Experts experts");
MODULE_LICENSE("GPL");
