// SPDX-License-Identifier: GPL-2.0
/*
 * moecache pools: lifetime, limits, the region layout and the host pages.
 * The lock order is in core.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/ctype.h>
#include <linux/kref.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "core.h"

unsigned int max_pools = 16;
module_param(max_pools, uint, 0444);
MODULE_PARM_DESC(max_pools, "Most pools at once (default 16)");

unsigned int max_host_mb = 1024;
module_param(max_host_mb, uint, 0444);
MODULE_PARM_DESC(max_host_mb, "Limit on all pools' pinned host pages, MiB (default 1024)");

unsigned int max_layers = 1024;
module_param(max_layers, uint, 0444);
MODULE_PARM_DESC(max_layers, "Most layers per pool (default 1024)");

unsigned int max_experts = 4096;
module_param(max_experts, uint, 0444);
MODULE_PARM_DESC(max_experts, "Most experts per layer (default 4096)");

unsigned int max_slots = 65536;
module_param(max_slots, uint, 0444);
MODULE_PARM_DESC(max_slots, "Most bank slots per pool (default 65536)");

unsigned int max_expert_mb = 1024;
module_param(max_expert_mb, uint, 0444);
MODULE_PARM_DESC(max_expert_mb, "Largest expert record, MiB (default 1024)");

unsigned int max_batch = 1024;
module_param(max_batch, uint, 0444);
MODULE_PARM_DESC(max_batch, "Most entries in one list argument (default 1024)");

unsigned int evict_event_sample = 64;
module_param(evict_event_sample, uint, 0644);
MODULE_PARM_DESC(evict_event_sample, "Send one eviction event per this many evictions, 0 for none (default 64)");

unsigned int miss_storm_per_sec = 10000;
module_param(miss_storm_per_sec, uint, 0644);
MODULE_PARM_DESC(miss_storm_per_sec, "Misses in one second of a pool that raise a miss-storm event, 0 for none (default 10000)");

unsigned int max_file_pins = 65536;
module_param(max_file_pins, uint, 0644);
MODULE_PARM_DESC(max_file_pins, "Most pins one file may hold, 2^20 at most; ACQUIRE beyond it is EOVERFLOW (default 65536)");

unsigned int max_pool_files = 1024;
module_param(max_pool_files, uint, 0644);
MODULE_PARM_DESC(max_pool_files, "Most client files attached to one pool, 4095 at most; a client ATTACH beyond it is EMFILE, the agent and loaders are not counted (default 1024)");

unsigned int max_banks = 16;
module_param(max_banks, uint, 0444);
MODULE_PARM_DESC(max_banks, "Most banks (devices or tiers) in one pool, 64 at most (default 16)");

/* 1 to 100: a tenant's pins may cover at most this share of the slots. */
static int pin_share_set(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, 100);
}

static const struct kernel_param_ops pin_share_ops = {
	.set = pin_share_set,
	.get = param_get_uint,
};

unsigned int max_pin_share = 50;
module_param_cb(max_pin_share, &pin_share_ops, &max_pin_share, 0644);
MODULE_PARM_DESC(max_pin_share, "Percent of a pool's slots (1 to 100) that the clients of one uid, other than the pool's owner and CAP_SYS_ADMIN, may hold pinned; ACQUIRE beyond it is EDQUOT (default 50)");

unsigned int max_user_waits = 16;
module_param(max_user_waits, uint, 0644);
MODULE_PARM_DESC(max_user_waits, "Most ACQUIRE|WAITs in progress on one pool for the clients of one uid, other than the pool's owner and CAP_SYS_ADMIN; a WAIT beyond it is EAGAIN (default 16)");

/* The outer lock: see the lock order in core.h. */
DEFINE_MUTEX(moecache_pools_lock);
LIST_HEAD(moecache_pools);
unsigned int moecache_n_pools;
u64 moecache_host_bytes;

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
			       MOECACHE_GFP_SIZED);
	if (!pool->pages)
		return -ENOMEM;
	while (i < pool->n_pages) {
		while (order && (1UL << order) > pool->n_pages - i)
			order--;
		/*
		 * Charged to the creator's memory cgroup; ENOMEM, not the
		 * OOM killer, at its limit (MOECACHE_GFP_SIZED).
		 */
		gfp = GFP_HIGHUSER | __GFP_ZERO | __GFP_NOWARN | __GFP_ACCOUNT;
		gfp |= order ? __GFP_NORETRY : __GFP_RETRY_MAYFAIL;
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

/*
 * The host pages stay pinned for the pool's life, so, as io_uring's
 * registered buffers, they count against the creator's RLIMIT_MEMLOCK in
 * its user's locked_vm, unless it has CAP_IPC_LOCK; the pool keeps the user
 * and gives the pages back to it when it is freed. The user, not the mm: a
 * pool outlives the process that created it. The user is held through the
 * creator's credentials, whose reference pins it: free_uid() is not
 * exported by every 6.1 kernel (Debian's 6.1.0-50 lacks it), put_cred() is.
 */
static int pool_charge_memlock(struct moecache_pool *pool)
{
	unsigned long limit, cur, new;
	struct user_struct *user;

	if (capable(CAP_IPC_LOCK))
		return 0;
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	user = current_user();
	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, pool->n_pages, &new) ||
		    new > limit)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	pool->memlock_cred = get_current_cred();
	return 0;
}

static void pool_uncharge_memlock(struct moecache_pool *pool)
{
	if (!pool->memlock_cred)
		return;
	atomic_long_sub(pool->n_pages, &pool->memlock_cred->user->locked_vm);
	put_cred(pool->memlock_cred);
	pool->memlock_cred = NULL;
}

static void pool_free(struct moecache_pool *pool)
{
	u32 i;

	/* Each attached file holds a reference, and its tenant's. */
	WARN_ON_ONCE(!list_empty(&pool->tenants));
	for (i = 0; pool->banks && i < pool->n_banks; i++)
		if (pool->banks[i].file)
			fput(pool->banks[i].file);
	kfree(pool->banks);
	kvfree(pool->slot_bank);
	pool_free_pages(pool);
	vfree(pool->region);
	kvfree(pool->estate);
	kvfree(pool->req_flags);
	kvfree(pool->n_askers);
	kvfree(pool->fail_gen);
	kvfree(pool->qnode);
	bitmap_free(pool->moving);
	kvfree(pool->slot_flags);
	kvfree(pool->layer);
	kvfree(pool->fast_pinners);
	pool_uncharge_memlock(pool);
	kfree(pool);
}

void pool_release(struct kref *ref)
{
	pool_free(container_of(ref, struct moecache_pool, ref));
}

static int pool_alloc_region(struct moecache_pool *pool)
{
	struct moecache_map_header *hdr;
	size_t off = ALIGN(sizeof(*hdr), 64);
	size_t map_off, owner_off, last_use_off, pins_off, access_off, bank_off;
	struct moecache_pool_bank *b;
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
	off = ALIGN(off + (size_t)pool->n_idx * sizeof(u32), 64);
	bank_off = off;
	off += (size_t)pool->n_banks * sizeof(struct moecache_map_bank);
	pool->region_size = PAGE_ALIGN(off);
	/* The pins region's offset comes next. */
	if (pool->region_size > MOECACHE_PINS_OFFSET)
		return -E2BIG;

	/*
	 * Charged to the creator's memory cgroup, as the rest of the pool;
	 * mapped page by page, by map_region_fault(), so it needs no
	 * VM_USERMAP (vmalloc_user() takes no GFP flags).
	 */
	pool->region = __vmalloc(pool->region_size,
				 MOECACHE_GFP_SIZED | __GFP_ZERO);
	if (!pool->region)
		return -ENOMEM;
	hdr = pool->region;
	pool->hdr = hdr;
	pool->map = pool->region + map_off;
	pool->owner = pool->region + owner_off;
	pool->last_use = pool->region + last_use_off;
	pool->pins = pool->region + pins_off;
	pool->access = pool->region + access_off;
	pool->map_banks = pool->region + bank_off;
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
	hdr->bank_off = bank_off;
	hdr->n_banks = pool->n_banks;
	for (i = 0; i < pool->n_banks; i++) {
		b = &pool->banks[i];
		pool->map_banks[i].slot_begin = b->slot_begin;
		pool->map_banks[i].n_slots = b->layout.n_slots;
		pool->map_banks[i].tier = b->layout.tier;
		pool->map_banks[i].backend = b->layout.backend;
		pool->map_banks[i].device = b->layout.device;
	}
	return 0;
}

/* The banks of a checked layout (n_banks 0: one bank of n_slots). */
static int pool_alloc_banks(struct moecache_pool *pool,
			    const struct moecache_pool_create *req,
			    const struct moecache_bank_layout *layout)
{
	struct moecache_bank_layout one = { .n_slots = req->n_slots };
	struct moecache_pool_bank *b;
	u32 i, begin = 0;

	pool->n_banks = req->n_banks ?: 1;
	if (!req->n_banks)
		layout = &one;
	pool->banks = kcalloc(pool->n_banks, sizeof(*pool->banks),
			      MOECACHE_GFP_SIZED);
	pool->slot_bank = kvmalloc(pool->n_slots, MOECACHE_GFP_SIZED);
	if (!pool->banks || !pool->slot_bank)
		return -ENOMEM;
	for (i = 0; i < pool->n_banks; i++) {
		b = &pool->banks[i];
		b->layout = layout[i];
		b->slot_begin = begin;
		memset(pool->slot_bank + begin, i, layout[i].n_slots);
		begin += layout[i].n_slots;
	}
	return 0;
}

static int pool_alloc_state(struct moecache_pool *pool)
{
	u32 i;

	pool->estate = kvcalloc(pool->n_idx, sizeof(u8), MOECACHE_GFP_SIZED);
	pool->req_flags = kvcalloc(pool->n_idx, sizeof(u8), MOECACHE_GFP_SIZED);
	pool->n_askers = kvcalloc(pool->n_idx, sizeof(u32), MOECACHE_GFP_SIZED);
	pool->fail_gen = kvcalloc(pool->n_idx, sizeof(u32), MOECACHE_GFP_SIZED);
	pool->qnode = kvcalloc(pool->n_idx, sizeof(*pool->qnode), MOECACHE_GFP_SIZED);
	pool->moving = bitmap_zalloc(pool->n_idx, MOECACHE_GFP_SIZED);
	pool->slot_flags = kvcalloc(pool->n_slots, sizeof(u8), MOECACHE_GFP_SIZED);
	pool->layer = kvcalloc(pool->n_layers, sizeof(*pool->layer),
			       MOECACHE_GFP_SIZED);
	pool->n_fast_pages = DIV_ROUND_UP(pool->n_slots,
					  MOECACHE_FAST_PINS_PER_PAGE);
	pool->fast_pinners = kvcalloc(pool->n_fast_pages,
				      sizeof(*pool->fast_pinners),
				      MOECACHE_GFP_SIZED);
	if (!pool->estate || !pool->req_flags || !pool->n_askers ||
	    !pool->fail_gen || !pool->qnode || !pool->moving ||
	    !pool->slot_flags || !pool->layer || !pool->fast_pinners)
		return -ENOMEM;
	for (i = 0; i < pool->n_idx; i++)
		INIT_LIST_HEAD(&pool->qnode[i]);
	for (i = 0; i < pool->n_fast_pages; i++)
		INIT_LIST_HEAD(&pool->fast_pinners[i]);
	return 0;
}

bool name_valid(const char *name)
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

struct moecache_pool *pool_find(const char *name)
{
	struct moecache_pool *pool;

	lockdep_assert_held(&moecache_pools_lock);
	list_for_each_entry(pool, &moecache_pools, node)
		if (!strcmp(pool->name, name))
			return pool;
	return NULL;
}

/* max_banks within its cap; a layout of one bank is always allowed. */
static u32 pool_max_banks(void)
{
	return clamp(READ_ONCE(max_banks), 1U, MOECACHE_BANKS_CAP);
}

/*
 * Checks the banks of a creation request (docs/abi.md, "Banks"): each of
 * at least one slot, their sum the pool's, tiers non-decreasing, no two on
 * one named (backend, device).
 */
static int pool_layout_check(const struct moecache_pool_create *req,
			     const struct moecache_bank_layout *b)
{
	u64 sum = 0;
	u32 i, j;

	if (!req->n_banks)
		return 0;
	if (req->n_banks > pool_max_banks())
		return -E2BIG;
	for (i = 0; i < req->n_banks; i++) {
		if (!b[i].n_slots || b[i].flags || b[i].pad ||
		    b[i].backend > MOECACHE_BACKEND_ROCM ||
		    (i && b[i].tier < b[i - 1].tier))
			return -EINVAL;
		for (j = 0; j < i && b[i].backend != MOECACHE_BACKEND_NONE; j++)
			if (b[j].backend == b[i].backend &&
			    b[j].device == b[i].device)
				return -EINVAL;
		sum += b[i].n_slots;
	}
	return sum == req->n_slots ? 0 : -EINVAL;
}

/* Checks a creation request; *host_bytes gets the pool's host size. */
static int pool_create_check(const struct moecache_pool_create *req,
			     const struct moecache_bank_layout *banks,
			     u64 *host_bytes)
{
	u64 n_idx, bytes;
	int ret;

	if (!name_valid(req->name) || req->flags || req->pad || req->pad2 ||
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
	/* An idx is stored in 31 bits of owner[] (MOECACHE_OWNER_IDX_MASK). */
	if (n_idx > MOECACHE_OWNER_IDX_MASK)
		return -EINVAL;
	if (check_mul_overflow(n_idx, req->expert_bytes, &bytes))
		return -EOVERFLOW;
	ret = pool_layout_check(req, banks);
	if (ret)
		return ret;
	*host_bytes = bytes;
	return 0;
}

int moecache_pool_create(const struct moecache_pool_create *req,
			 const struct moecache_bank_layout *banks)
{
	struct moecache_pool_owner owner;
	struct moecache_pool *pool = NULL;
	u64 host_bytes;
	kuid_t uid = make_kuid(current_user_ns(), req->uid);
	kgid_t gid = make_kgid(current_user_ns(), req->gid);
	int ret;

	ret = pool_create_check(req, banks, &host_bytes);
	if (ret)
		return ret;
	if (!uid_valid(uid) || !gid_valid(gid))
		return -EINVAL;

	/*
	 * The pool's share of the limits is taken under the lock, its memory
	 * outside it: a large pool does not hold up every attach meanwhile.
	 */
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
	moecache_n_pools++;
	moecache_host_bytes += host_bytes;
	mutex_unlock(&moecache_pools_lock);

	pool = kzalloc_obj(*pool, GFP_KERNEL_ACCOUNT);
	if (!pool) {
		ret = -ENOMEM;
		goto out_unreserve;
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
	INIT_LIST_HEAD(&pool->waiters);
	INIT_LIST_HEAD(&pool->files);
	INIT_LIST_HEAD(&pool->asking);
	INIT_LIST_HEAD(&pool->tenants);
	pool->storm_start = jiffies;

	ret = pool_charge_memlock(pool);
	if (!ret)
		ret = pool_alloc_banks(pool, req, banks);
	if (!ret)
		ret = pool_alloc_state(pool);
	if (!ret)
		ret = pool_alloc_region(pool);
	if (!ret)
		ret = pool_alloc_pages(pool);

	mutex_lock(&moecache_pools_lock);
	/* Another creation of the name may have won meanwhile. */
	if (!ret && pool_find(req->name))
		ret = -EEXIST;
	if (ret)
		goto out_free;
	list_add_tail(&pool->node, &moecache_pools);
	moecache_pool_owner(pool, &owner);
	mutex_unlock(&moecache_pools_lock);
	moecache_nl_event(MOECACHE_EV_POOL_CREATED, req->name, &owner, NULL,
			  0, 0);
	return 0;

out_free:
	mutex_unlock(&moecache_pools_lock);
	pool_free(pool);
out_unreserve:
	mutex_lock(&moecache_pools_lock);
	moecache_n_pools--;
	moecache_host_bytes -= host_bytes;
out_unlock:
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

bool moecache_pool_may_admin(struct moecache_pool *pool)
{
	return uid_eq(current_euid(), pool->uid) || capable(CAP_SYS_ADMIN);
}

void moecache_pool_owner(struct moecache_pool *pool,
			 struct moecache_pool_owner *owner)
{
	owner->uid = pool->uid;
	owner->gid = pool->gid;
	owner->mode = pool->mode;
}

void pool_event(struct moecache_pool *pool, enum moecache_event ev, u32 arg0,
		u32 arg1)
{
	struct moecache_pool_owner owner;

	moecache_pool_owner(pool, &owner);
	moecache_nl_event(ev, pool->name, &owner, NULL, arg0, arg1);
}

void pool_unlink(struct moecache_pool *pool)
{
	lockdep_assert_held(&moecache_pools_lock);
	list_del_init(&pool->node);
	moecache_n_pools--;
	moecache_host_bytes -= (u64)pool->n_pages << PAGE_SHIFT;
}

int moecache_pool_destroy(const char *name, moecache_pool_fn may, void *arg)
{
	char ev_name[MOECACHE_NAME_LEN];
	struct moecache_pool_owner owner;
	struct moecache_pool *pool;
	int ret = 0;

	mutex_lock(&moecache_pools_lock);
	pool = pool_find(name);
	if (!pool) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (may)
		ret = may(pool, arg);
	else if (!moecache_pool_may_admin(pool))
		ret = -EPERM;
	if (ret)
		goto out_unlock;
	spin_lock(&pool->lock);
	if (pool->n_files)
		ret = -EBUSY;
	spin_unlock(&pool->lock);
	if (ret)
		goto out_unlock;
	pool_unlink(pool);
	strscpy(ev_name, pool->name, sizeof(ev_name));
	moecache_pool_owner(pool, &owner);
	kref_put(&pool->ref, pool_release);
	mutex_unlock(&moecache_pools_lock);
	moecache_nl_event(MOECACHE_EV_POOL_DESTROYED, ev_name, &owner, NULL,
			  0, 0);
	return 0;

out_unlock:
	mutex_unlock(&moecache_pools_lock);
	return ret;
}

static bool cred_in_group(const struct cred *cred, kgid_t gid)
{
	const struct group_info *groups = cred->group_info;
	int i;

	if (gid_eq(cred->egid, gid))
		return true;
	for (i = 0; i < groups->ngroups; i++)
		if (gid_eq(groups->gid[i], gid))
			return true;
	return false;
}

unsigned int moecache_owner_granted(const struct moecache_pool_owner *owner,
				    const struct cred *cred)
{
	if (uid_eq(cred->euid, owner->uid))
		return (owner->mode >> 6) & 7;
	if (cred_in_group(cred, owner->gid))
		return (owner->mode >> 3) & 7;
	return owner->mode & 7;
}

/* CAP_SYS_ADMIN is asked only once the mode said no: no audit noise. */
static bool opener_permits(const struct moecache_pool_owner *owner, int want,
			   const struct file *file)
{
	if ((moecache_owner_granted(owner, file->f_cred) & want) == want)
		return true;
	return file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN);
}

/* IPC-style check of the pool's mode for MAY_READ or MAY_WRITE. */
bool pool_permits(struct moecache_pool *pool, int want,
		  const struct moecache_file *mf)
{
	struct moecache_pool_owner owner;

	moecache_pool_owner(pool, &owner);
	if (!opener_permits(&owner, want, mf->file))
		return false;
	if ((moecache_owner_granted(&owner, current_cred()) & want) == want)
		return true;
	return capable(CAP_SYS_ADMIN);
}

/*
 * May the file's two parties learn that the pool exists? Only if they may
 * attach to it in some role (docs/abi.md, "Security model"): for anyone
 * else a refusal reads as ENOENT, as for a name nobody took.
 */
bool pool_visible(struct moecache_pool *pool, const struct moecache_file *mf)
{
	return pool_permits(pool, MAY_READ, mf) ||
	       pool_permits(pool, MAY_WRITE, mf);
}

bool pool_may_admin(struct moecache_pool *pool,
		    const struct moecache_file *mf)
{
	const struct file *file = mf->file;

	if (!uid_eq(file->f_cred->euid, pool->uid) &&
	    !file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN))
		return false;
	return moecache_pool_may_admin(pool);
}

/*
 * The pool's owner and CAP_SYS_ADMIN, on both parties, as for destroying
 * it: whoever may destroy the pool may hold all of its slots.
 */
bool pool_pin_exempt(struct moecache_pool *pool,
		     const struct moecache_file *mf)
{
	return pool_may_admin(pool, mf);
}

bool file_may_create(const struct moecache_file *mf)
{
	return file_ns_capable(mf->file, &init_user_ns, CAP_SYS_ADMIN) &&
	       capable(CAP_SYS_ADMIN);
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
	/* In the pid namespace of the task asking. */
	desc->agent_pid = pid_vnr(pool->agent_pid);
	desc->agent_epoch = pool->hdr->agent_epoch;
	spin_unlock(&pool->lock);
}

/* Under the lock: bank i's layout, its slots' state and its counters. */
static void bank_describe(struct moecache_pool *pool, u32 i,
			  struct moecache_bank_desc *d)
{
	const struct moecache_pool_bank *b = &pool->banks[i];
	const struct moecache_map_bank *mb = &pool->map_banks[i];
	u32 slot, own;
	u64 pins = 0;

	lockdep_assert_held(&pool->lock);
	memset(d, 0, sizeof(*d));
	d->index = i;
	d->tier = mb->tier;
	d->slot_begin = mb->slot_begin;
	d->n_slots = mb->n_slots;
	d->backend = mb->backend;
	d->device = mb->device;
	d->flags = mb->flags;
	for (slot = b->slot_begin; slot < b->slot_begin + b->layout.n_slots;
	     slot++) {
		own = pool->owner[slot];
		if (own & MOECACHE_OWNER_FILLING && own != MOECACHE_NONE)
			d->filling++;
		else if (own != MOECACHE_NONE)
			d->resident++;
		if (pool->pins[slot])
			d->pinned_slots++;
		pins += pool->pins[slot];
	}
	d->pins = min_t(u64, pins, U32_MAX);
	d->hits = b->c[C_HITS];
	d->prefetch_hits = b->c[C_PREFETCH_HITS];
	d->evictions = b->c[C_EVICTIONS];
	d->commits = b->c[C_COMMITS];
}

int moecache_pool_bank(struct moecache_pool *pool, u32 bank,
		       struct moecache_bank_desc *desc)
{
	if (bank >= pool->n_banks)
		return -EINVAL;
	spin_lock(&pool->lock);
	bank_describe(pool, bank, desc);
	spin_unlock(&pool->lock);
	return 0;
}

/* Under the lock: the counters of the pool or a layer, the pool's state. */
static void pool_stats_locked(struct moecache_pool *pool, u32 layer,
			      struct moecache_stats *st)
{
	const struct moecache_counters *c;

	lockdep_assert_held(&pool->lock);
	memset(st, 0, sizeof(*st));
	st->layer = layer;
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
	st->agent_pid = pid_vnr(pool->agent_pid);
}

int moecache_pool_stats(struct moecache_pool *pool, u32 layer,
			struct moecache_stats *st)
{
	if (layer != MOECACHE_NONE && layer >= pool->n_layers)
		return -EINVAL;
	spin_lock(&pool->lock);
	pool_stats_locked(pool, layer, st);
	spin_unlock(&pool->lock);
	return 0;
}

/* Bank counters are not kept per layer: layer must be MOECACHE_NONE. */
int moecache_pool_bank_stats(struct moecache_pool *pool, u32 layer, u32 bank,
			     struct moecache_stats *st)
{
	struct moecache_bank_desc d;

	if (layer != MOECACHE_NONE || bank >= pool->n_banks)
		return -EINVAL;
	spin_lock(&pool->lock);
	pool_stats_locked(pool, layer, st);
	bank_describe(pool, bank, &d);
	spin_unlock(&pool->lock);
	st->flags = MOECACHE_STATS_BANK;
	st->bank = bank;
	st->hits = d.hits;
	st->prefetch_hits = d.prefetch_hits;
	st->evictions = d.evictions;
	st->commits = d.commits;
	st->resident = d.resident;
	st->filling = d.filling;
	st->pinned_slots = d.pinned_slots;
	st->pins = d.pins;
	return 0;
}

long ioc_get_info(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp)
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
		.max_banks = pool_max_banks(),
	};
	struct moecache_pool *p;

	mutex_lock(&moecache_pools_lock);
	if (file_may_create(mf)) {
		/* CAP_SYS_ADMIN of both parties: every pool, being made too. */
		info.n_pools = moecache_n_pools;
		info.host_bytes_used = moecache_host_bytes;
	} else {
		/* Only the pools the caller may learn exist (max_pools). */
		list_for_each_entry(p, &moecache_pools, node) {
			if (!pool_visible(p, mf))
				continue;
			info.n_pools++;
			info.host_bytes_used += (u64)p->n_pages << PAGE_SHIFT;
		}
	}
	mutex_unlock(&moecache_pools_lock);
	return copy_to_user(argp, &info, sizeof(info)) ? -EFAULT : 0;
}

/*
 * usize is the caller's struct size: MOECACHE_POOL_CREATE_SIZE_VER0 (ABI 2
 * before banks: the fields past it read as zero, one bank) or at least
 * ours (the dispatch checked the rest is zero).
 */
long ioc_pool_create(struct moecache_pool *pool, struct moecache_file *mf,
		     void __user *argp, unsigned int usize)
{
	struct moecache_pool_create req = {};
	struct moecache_bank_layout *banks = NULL;
	long ret;

	if (copy_from_user(&req, argp, min_t(size_t, usize, sizeof(req))))
		return -EFAULT;
	if (!file_may_create(mf))
		return -EPERM;
	if (req.n_banks > pool_max_banks())
		return -E2BIG;
	if (!req.n_banks != !req.banks)
		return -EINVAL;
	if (req.n_banks) {
		banks = memdup_user(u64_to_user_ptr(req.banks),
				    (size_t)req.n_banks * sizeof(*banks));
		if (IS_ERR(banks))
			return PTR_ERR(banks);
	}
	ret = moecache_pool_create(&req, banks);
	kfree(banks);
	return ret;
}

/* moecache_pool_fn: may the file's two parties (arg) destroy the pool? */
static int file_may_destroy(struct moecache_pool *pool, void *arg)
{
	if (pool_may_admin(pool, arg))
		return 0;
	return pool_visible(pool, arg) ? -EPERM : -ENOENT;
}

long ioc_pool_destroy(struct moecache_pool *pool, struct moecache_file *mf,
		      void __user *argp)
{
	struct moecache_pool_name req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (!name_valid(req.name) || req.flags || req.pad)
		return -EINVAL;
	return moecache_pool_destroy(req.name, file_may_destroy, mf);
}
