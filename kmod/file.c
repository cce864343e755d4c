// SPDX-License-Identifier: GPL-2.0
/*
 * moecache files: open, attach, release, ioctl dispatch and mmap, and the
 * module itself.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "core.h"

/* ---- files ---- */

/* Takes a fast-pins file off every fast_pinners list it joined. */
static void fast_refs_del(struct moecache_pool *pool, struct moecache_file *mf)
{
	u32 page;

	lockdep_assert_held(&pool->lock);
	if (!mf->fast_refs)
		return;
	for (page = 0; page < pool->n_fast_pages; page++)
		list_del_init(&mf->fast_refs[page].node);
}

/*
 * Counts mf among its tenant's files, taking the tenant of mf->tenant_uid
 * from the pool or, for the first file of a uid, *spare (which is then
 * used).
 */
static void tenant_join(struct moecache_pool *pool, struct moecache_file *mf,
			struct moecache_tenant **spare)
{
	kuid_t uid = mf->tenant_uid;
	struct moecache_tenant *t;

	lockdep_assert_held(&pool->lock);
	list_for_each_entry(t, &pool->tenants, node) {
		if (uid_eq(t->uid, uid)) {
			t->n_files++;
			mf->tenant = t;
			return;
		}
	}
	t = *spare;
	*spare = NULL;
	t->uid = uid;
	t->n_files = 1;
	list_add_tail(&t->node, &pool->tenants);
	mf->tenant = t;
}

/* Its pins are gone; returns the tenant to free if mf was its last file. */
static struct moecache_tenant *tenant_leave(struct moecache_pool *pool,
					    struct moecache_file *mf)
{
	struct moecache_tenant *t = mf->tenant;

	lockdep_assert_held(&pool->lock);
	mf->tenant = NULL;
	if (!t || --t->n_files)
		return NULL;
	WARN_ON_ONCE(t->pinned_slots || t->n_waits);
	list_del(&t->node);
	return t;
}

/*
 * The device node's rights where no udev rule sets them (a container, an
 * initramfs, a minimal system): root only by default, for udev's rule to
 * widen to group moecache; or, with dev_gid, a node every user reaches and
 * an open that lets in only the members of that group.
 */
static int dev_gid = -1;
module_param(dev_gid, int, 0444);
MODULE_PARM_DESC(dev_gid, "Group (a gid of the initial user namespace) whose members may open /dev/moecache without a udev rule: the node is made 0666 and open() refuses everybody else but CAP_DAC_OVERRIDE with EACCES; -1 (the default) makes the node 0600, root only, for udev to widen");

/* The group of dev_gid, invalid when the node's mode alone decides. */
static kgid_t moecache_dev_group = INVALID_GID;

static int moecache_open(struct inode *inode, struct file *file)
{
	struct moecache_file *mf;

	if (gid_valid(moecache_dev_group) && !in_group_p(moecache_dev_group) &&
	    !capable(CAP_DAC_OVERRIDE))
		return -EACCES;
	mf = kzalloc_obj(*mf, GFP_KERNEL_ACCOUNT);
	if (!mf)
		return -ENOMEM;
	INIT_LIST_HEAD(&mf->node);
	INIT_LIST_HEAD(&mf->ask_node);
	mf->file = file;
	file->private_data = mf;
	return 0;
}

static int moecache_release(struct inode *inode, struct file *file)
{
	struct moecache_file *mf = file->private_data;
	struct moecache_pool *pool = mf->pool;
	char ev_name[MOECACHE_NAME_LEN];
	struct moecache_pool_owner owner;
	struct moecache_tenant *gone = NULL;
	struct pid *lost_pid = NULL;
	bool agent_lost = false;

	if (pool) {
		spin_lock(&pool->lock);
		/* An agent replaced after its process died is no more. */
		if (mf->role == MOECACHE_ROLE_AGENT && pool->agent == mf) {
			lost_pid = get_pid(pool->agent_pid);
			agent_detach(pool);
			agent_lost = true;
		} else if (mf->role == MOECACHE_ROLE_CLIENT) {
			client_detach(pool, mf);
			gone = tenant_leave(pool, mf);
		}
		list_del(&mf->node);
		pool->n_files--;
		fast_refs_del(pool, mf);
		spin_unlock(&pool->lock);
		kfree(gone);
		wake_up_all(&pool->client_wq);
		if (agent_lost) {
			strscpy(ev_name, pool->name, sizeof(ev_name));
			moecache_pool_owner(pool, &owner);
			moecache_nl_event(MOECACHE_EV_AGENT_LOST, ev_name,
					  &owner, lost_pid, 0, 0);
			put_pid(lost_pid);
		}
		kref_put(&pool->ref, pool_release);
	}
	kvfree(mf->pins);
	bitmap_free(mf->pinned);
	bitmap_free(mf->asked);
	/* Off the fast_pinners lists: no evictor reads it any more. */
	vfree(mf->fast_pins);
	kvfree(mf->fast_refs);
	kfree(mf);
	return 0;
}

/* Is the process that attached the pool's agent still there? */
static bool agent_process_alive(struct moecache_pool *pool)
{
	struct task_struct *task;
	bool alive;

	lockdep_assert_held(&pool->lock);
	rcu_read_lock();
	task = pid_task(pool->agent_pid, PIDTYPE_TGID);
	/* A zombie leader with no thread left is gone. */
	alive = task && !(task->exit_state && thread_group_empty(task));
	rcu_read_unlock();
	return alive;
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

static unsigned int max_user_pool_files = 64;
module_param(max_user_pool_files, uint, 0644);
MODULE_PARM_DESC(max_user_pool_files, "Most client files one user other than the pool's owner (or CAP_SYS_ADMIN) may attach to one pool; ATTACH beyond it is EMFILE (default 64)");

/*
 * Is a client attach bound by max_user_pool_files? Only the pool's owner
 * and CAP_SYS_ADMIN are not, both parties (the caller and the file's
 * opener) checked as for the pool's rights.
 */
static bool attach_user_bounded(struct moecache_pool *pool,
				struct moecache_file *mf)
{
	const struct file *file = mf->file;

	if (!uid_eq(file->f_cred->euid, pool->uid) &&
	    !file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN))
		return true;
	return !uid_eq(current_euid(), pool->uid) && !capable(CAP_SYS_ADMIN);
}

/*
 * Whose tenant a client file attached now is (docs/abi.md, "Whose tenant
 * a file is"): the attacher's, whose call takes the place in the pool, so
 * that a file opened by another uid and handed over unattached brings no
 * second share with it. Where the attacher is exempt from the share (the owner, or
 * CAP_SYS_ADMIN) the file is held to it only for its opener's sake (a
 * deputy's inherited descriptor): it is the opener's, so that a deputy
 * attaching files for several users does not pool them into one tenant.
 */
static kuid_t attach_tenant_uid(struct moecache_pool *pool,
				const struct moecache_file *mf)
{
	if (moecache_pool_may_admin(pool))
		return mf->file->f_cred->euid;
	return current_euid();
}

/*
 * May one more client file of tenant uid attach? Clients alone are
 * limited: the agent and loaders (write permission, trusted) must attach
 * whatever the readers hold, or a restarted agent would be locked out.
 */
static bool attach_client_room(struct moecache_pool *pool, kuid_t uid,
			       bool user_bounded)
{
	unsigned int user_max = READ_ONCE(max_user_pool_files), mine = 0;
	struct moecache_file *f;

	lockdep_assert_held(&pool->lock);
	if (pool->n_clients >= min_t(u32, READ_ONCE(max_pool_files),
				     MOECACHE_POOL_FILES_CAP))
		return false;
	if (!user_bounded)
		return true;
	/* Bounded by max_pool_files: a short walk, on attach only. */
	list_for_each_entry(f, &pool->files, node)
		if (f->role == MOECACHE_ROLE_CLIENT &&
		    uid_eq(f->tenant_uid, uid) && ++mine >= user_max)
			return false;
	return mine < user_max;
}

/*
 * What a file's ATTACH allocates: its pins and request bookkeeping (a
 * client) and its fast-pins region. Sized by the pool's geometry, and
 * allocated before moecache_pools_lock is taken for the attach itself, so
 * that an attacher whose memory cgroup must reclaim stalls only itself,
 * not every pool's ATTACH, CREATE and DESTROY.
 */
struct attach_bufs {
	u32 n_slots, n_idx, n_fast_pages;
	u32 *pins;
	unsigned long *pinned;
	unsigned long *asked;
	struct moecache_tenant *tenant;
	u32 *fast_pins;
	size_t fast_pins_size;
	struct moecache_fast_ref *fast_refs;
};

static void attach_bufs_free(struct attach_bufs *b)
{
	kvfree(b->pins);
	bitmap_free(b->pinned);
	bitmap_free(b->asked);
	kfree(b->tenant);
	vfree(b->fast_pins);
	kvfree(b->fast_refs);
	memset(b, 0, sizeof(*b));
}

static int attach_bufs_alloc(struct attach_bufs *b, u32 role, u32 flags)
{
	u32 page;

	if (role == MOECACHE_ROLE_CLIENT) {
		b->pins = kvcalloc(b->n_slots, sizeof(*b->pins),
				   MOECACHE_GFP_SIZED);
		b->pinned = bitmap_zalloc(b->n_slots, MOECACHE_GFP_SIZED);
		b->asked = bitmap_zalloc(b->n_idx, MOECACHE_GFP_SIZED);
		/* Used if this is the first file of its uid in the pool. */
		b->tenant = kzalloc_obj(*b->tenant, MOECACHE_GFP_SIZED);
		if (!b->pins || !b->pinned || !b->asked || !b->tenant)
			return -ENOMEM;
	}
	if (flags & MOECACHE_ATTACH_FAST_PINS) {
		b->fast_pins_size = PAGE_ALIGN((size_t)b->n_slots * sizeof(u32));
		/* Whole pages, zeroed, charged to the attacher; see pins_region_fault(). */
		b->fast_pins = __vmalloc(b->fast_pins_size,
					 MOECACHE_GFP_SIZED | __GFP_ZERO);
		b->fast_refs = kvcalloc(b->n_fast_pages, sizeof(*b->fast_refs),
					MOECACHE_GFP_SIZED);
		if (!b->fast_pins || !b->fast_refs)
			return -ENOMEM;
		for (page = 0; page < b->n_fast_pages; page++)
			INIT_LIST_HEAD(&b->fast_refs[page].node);
	}
	return 0;
}

/*
 * Were b's buffers made for pool? The pool of that name may have been
 * made, or destroyed and made again, since the first look.
 */
static bool attach_bufs_fit(const struct attach_bufs *b,
			    const struct moecache_pool *pool, u32 role)
{
	return b->n_slots == pool->n_slots && b->n_idx == pool->n_idx &&
	       b->n_fast_pages == pool->n_fast_pages &&
	       (role != MOECACHE_ROLE_CLIENT || b->pins);
}

/*
 * The first look, under moecache_pools_lock: the sizes of what the attach
 * of a pool of that name needs, if it may attach at all (else nothing is
 * allocated; the checks are made again, and answered, under the lock).
 */
static int attach_bufs_prepare(struct attach_bufs *b, const char *name,
			       struct moecache_file *mf, u32 role, u32 flags,
			       int want)
{
	struct moecache_pool *pool;
	bool sized = false;

	mutex_lock(&moecache_pools_lock);
	pool = pool_find(name);
	if (pool && pool_permits(pool, want, mf)) {
		b->n_slots = pool->n_slots;
		b->n_idx = pool->n_idx;
		b->n_fast_pages = pool->n_fast_pages;
		sized = true;
	}
	mutex_unlock(&moecache_pools_lock);
	return sized ? attach_bufs_alloc(b, role, flags) : 0;
}

static long ioc_attach(struct moecache_pool *unattached,
		       struct moecache_file *mf, void __user *argp)
{
	struct moecache_attach req;
	struct moecache_pool *pool;
	struct attach_bufs bufs = {};
	u32 page;
	struct moecache_pool_owner owner;
	int want, ret = 0;
	struct pid *lost_pid = NULL;
	bool user_bounded = false;
	kuid_t tenant_uid;
	bool exempt;

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

	for (;;) {
		ret = attach_bufs_prepare(&bufs, req.name, mf, req.role,
					  req.flags, want);
		if (ret)
			goto out_free;
		mutex_lock(&moecache_pools_lock);
		pool = pool_find(req.name);
		/* Answered below, or sized for: no second look. */
		if (!pool || !pool_permits(pool, want, mf) ||
		    attach_bufs_fit(&bufs, pool, req.role))
			break;
		mutex_unlock(&moecache_pools_lock);
		attach_bufs_free(&bufs);
	}
	if (mf->pool) {
		ret = -EALREADY;
		goto out_unlock;
	}
	if (!pool) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (!pool_permits(pool, want, mf)) {
		/* Whoever may not attach at all cannot tell it from no pool. */
		ret = pool_visible(pool, mf) ? -EACCES : -ENOENT;
		goto out_unlock;
	}
	/*
	 * Fast pins are stores the driver only reads: it cannot hold them to
	 * the pin share, so only who is exempt from it may take them.
	 */
	exempt = req.role != MOECACHE_ROLE_CLIENT || pool_pin_exempt(pool, mf);
	if ((req.flags & MOECACHE_ATTACH_FAST_PINS) && !exempt) {
		ret = -EPERM;
		goto out_unlock;
	}
	if (req.role == MOECACHE_ROLE_CLIENT)
		user_bounded = attach_user_bounded(pool, mf);
	tenant_uid = attach_tenant_uid(pool, mf);

	spin_lock(&pool->lock);
	if (req.role == MOECACHE_ROLE_CLIENT &&
	    !attach_client_room(pool, tenant_uid, user_bounded)) {
		spin_unlock(&pool->lock);
		ret = -EMFILE;
		goto out_unlock;
	}
	if (req.role == MOECACHE_ROLE_AGENT && pool->agent) {
		if (agent_process_alive(pool)) {
			spin_unlock(&pool->lock);
			ret = -EBUSY;
			goto out_unlock;
		}
		/* Its file lives on in another process: it keeps no role. */
		lost_pid = get_pid(pool->agent_pid);
		agent_detach(pool);
	}
	mf->role = req.role;
	mf->tenant_uid = tenant_uid;
	mf->pins = bufs.pins;
	mf->pinned = bufs.pinned;
	mf->asked = bufs.asked;
	mf->fast_pins = bufs.fast_pins;
	mf->fast_pins_size = bufs.fast_pins_size;
	mf->fast_refs = bufs.fast_refs;
	for (page = 0; bufs.fast_refs && page < pool->n_fast_pages; page++)
		bufs.fast_refs[page].mf = mf;
	bufs.pins = NULL;
	bufs.pinned = NULL;
	bufs.asked = NULL;
	bufs.fast_pins = NULL;
	bufs.fast_refs = NULL;
	list_add_tail(&mf->node, &pool->files);
	pool->n_files++;
	if (req.role == MOECACHE_ROLE_CLIENT) {
		pool->n_clients++;
		if (!exempt)
			tenant_join(pool, mf, &bufs.tenant);
	}
	if (req.role == MOECACHE_ROLE_AGENT) {
		WRITE_ONCE(pool->agent_pid, get_pid(task_tgid(current)));
		WRITE_ONCE(pool->agent, mf);
		map_write_begin(pool);
		/* Read by every client from the map region, without a lock. */
		WRITE_ONCE(pool->hdr->agent_epoch, pool->hdr->agent_epoch + 1);
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
	moecache_pool_owner(pool, &owner);
	kref_get(&pool->ref);
	/* Fully attached: pairs with the acquire loads of mf->pool. */
	smp_store_release(&mf->pool, pool);
	mutex_unlock(&moecache_pools_lock);
	/* Not needed: the uid had a tenant already, or none is held to a share. */
	attach_bufs_free(&bufs);

	if (lost_pid) {
		moecache_nl_event(MOECACHE_EV_AGENT_LOST, req.name, &owner,
				  lost_pid, 0, 0);
		put_pid(lost_pid);
	}
	if (req.role == MOECACHE_ROLE_AGENT) {
		wake_up_all(&pool->client_wq);
		moecache_nl_event(MOECACHE_EV_AGENT_ATTACHED, req.name, &owner,
				  task_tgid(current), 0, 0);
	}
	/* Checked writable above; only a racing munmap fails here. */
	return copy_to_user(argp, &req, sizeof(req)) ? -EFAULT : 0;

out_unlock:
	mutex_unlock(&moecache_pools_lock);
out_free:
	attach_bufs_free(&bufs);
	return ret;
}

static long ioc_stats(struct moecache_pool *pool, struct moecache_file *mf,
		      void __user *argp)
{
	struct moecache_stats st;
	int ret;

	if (copy_from_user(&st, argp, sizeof(st)))
		return -EFAULT;
	/* Room to grow: what is not in use must be zero (uapi). */
	if ((st.flags & ~MOECACHE_STATS_FLAGS_ALL) || st.pad ||
	    memchr_inv(st.reserved, 0, sizeof(st.reserved)) ||
	    (!(st.flags & MOECACHE_STATS_BANK) && st.bank))
		return -EINVAL;
	if (st.flags & MOECACHE_STATS_BANK)
		ret = moecache_pool_bank_stats(pool, st.layer, st.bank, &st);
	else
		ret = moecache_pool_stats(pool, st.layer, &st);
	if (ret)
		return ret;
	return copy_to_user(argp, &st, sizeof(st)) ? -EFAULT : 0;
}

static long ioc_nop(struct moecache_pool *pool, struct moecache_file *mf,
		    void __user *argp)
{
	return 0;
}

/* Who may call an ioctl: a set of BIT(enum moecache_role). */
#define ROLES_UNATTACHED	BIT(MOECACHE_ROLE_NONE)
#define ROLES_ATTACHED		(BIT(MOECACHE_ROLE_CLIENT) | \
				 BIT(MOECACHE_ROLE_AGENT) | \
				 BIT(MOECACHE_ROLE_LOADER))
#define ROLES_ANY		(ROLES_UNATTACHED | ROLES_ATTACHED)

struct moecache_ioctl_desc {
	unsigned int cmd;
	moecache_ioctl_fn fn;
	u32 roles;
	/*
	 * A struct that grew after ABI 2: its ABI 2 size, also accepted,
	 * and the handler that is told the caller's size instead of fn.
	 */
	unsigned int size_ver0;
	long (*sized_fn)(struct moecache_pool *pool, struct moecache_file *mf,
			 void __user *argp, unsigned int usize);
};

/*
 * Every ioctl, by number. A role outside roles is refused before the
 * handler runs: -ENOTCONN on an unattached fd, else -EPERM. cmd's size
 * bits are the size of the struct this driver knows.
 */
static const struct moecache_ioctl_desc moecache_ioctls[] = {
	[_IOC_NR(MOECACHE_IOC_GET_INFO)] = {
		MOECACHE_IOC_GET_INFO, ioc_get_info,
		ROLES_ANY },
	[_IOC_NR(MOECACHE_IOC_NOP)] = {
		MOECACHE_IOC_NOP, ioc_nop,
		ROLES_ANY },
	[_IOC_NR(MOECACHE_IOC_POOL_CREATE)] = {
		MOECACHE_IOC_POOL_CREATE, NULL, ROLES_ANY,
		.size_ver0 = MOECACHE_POOL_CREATE_SIZE_VER0,
		.sized_fn = ioc_pool_create },
	[_IOC_NR(MOECACHE_IOC_POOL_DESTROY)] = {
		MOECACHE_IOC_POOL_DESTROY, ioc_pool_destroy,
		ROLES_ANY },
	[_IOC_NR(MOECACHE_IOC_ATTACH)] = {
		MOECACHE_IOC_ATTACH, ioc_attach,
		ROLES_ANY },
	[_IOC_NR(MOECACHE_IOC_ACQUIRE)] = {
		MOECACHE_IOC_ACQUIRE, ioc_acquire,
		BIT(MOECACHE_ROLE_CLIENT) },
	[_IOC_NR(MOECACHE_IOC_RELEASE)] = {
		MOECACHE_IOC_RELEASE, ioc_release,
		BIT(MOECACHE_ROLE_CLIENT) },
	[_IOC_NR(MOECACHE_IOC_PREFETCH)] = {
		MOECACHE_IOC_PREFETCH, ioc_prefetch,
		BIT(MOECACHE_ROLE_CLIENT) },
	[_IOC_NR(MOECACHE_IOC_EVICT)] = {
		MOECACHE_IOC_EVICT, ioc_evict,
		BIT(MOECACHE_ROLE_AGENT) },
	[_IOC_NR(MOECACHE_IOC_COMMIT)] = {
		MOECACHE_IOC_COMMIT, ioc_commit,
		BIT(MOECACHE_ROLE_AGENT) },
	[_IOC_NR(MOECACHE_IOC_ABORT)] = {
		MOECACHE_IOC_ABORT, ioc_abort,
		BIT(MOECACHE_ROLE_AGENT) },
	[_IOC_NR(MOECACHE_IOC_BANK_SET)] = {
		MOECACHE_IOC_BANK_SET, ioc_bank_set,
		BIT(MOECACHE_ROLE_AGENT) },
	[_IOC_NR(MOECACHE_IOC_BANK_GET)] = {
		MOECACHE_IOC_BANK_GET, ioc_bank_get,
		ROLES_ATTACHED },
	[_IOC_NR(MOECACHE_IOC_LOAD)] = {
		MOECACHE_IOC_LOAD, ioc_load,
		BIT(MOECACHE_ROLE_AGENT) | BIT(MOECACHE_ROLE_LOADER) },
	[_IOC_NR(MOECACHE_IOC_STATS)] = {
		MOECACHE_IOC_STATS, ioc_stats,
		ROLES_ATTACHED },
	[_IOC_NR(MOECACHE_IOC_ACQUIRE_RELEASE)] = {
		MOECACHE_IOC_ACQUIRE_RELEASE, ioc_acquire_release,
		BIT(MOECACHE_ROLE_CLIENT) },
	[_IOC_NR(MOECACHE_IOC_REPORT)] = {
		MOECACHE_IOC_REPORT, ioc_report,
		BIT(MOECACHE_ROLE_CLIENT) },
};

static long moecache_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);
	const struct moecache_ioctl_desc *d;
	unsigned int nr = _IOC_NR(cmd), ksize, usize;
	void __user *argp = (void __user *)arg;
	/* mf->role is set before mf->pool is published, never after. */
	u32 role = pool ? mf->role : MOECACHE_ROLE_NONE;
	int ret;

	if (_IOC_TYPE(cmd) != MOECACHE_IOC_MAGIC ||
	    nr >= ARRAY_SIZE(moecache_ioctls))
		return -ENOTTY;
	d = &moecache_ioctls[array_index_nospec(nr, ARRAY_SIZE(moecache_ioctls))];
	ksize = _IOC_SIZE(d->cmd);
	usize = _IOC_SIZE(cmd);
	if ((!d->fn && !d->sized_fn) || _IOC_DIR(d->cmd) != _IOC_DIR(cmd) ||
	    (!ksize && usize))
		return -ENOTTY;
	/*
	 * The size bits are the caller's struct size, as openat2()'s size
	 * argument: a struct of a later ABI may be longer, and is taken when
	 * what this driver does not know of it is zero. None is shorter than
	 * the driver's, but for the ABI 2 size of a struct that grew since
	 * (as openat2()'s OPEN_HOW_SIZE_VER0), read as zero-extended.
	 */
	if (usize < ksize && (!d->size_ver0 || usize != d->size_ver0))
		return -EINVAL;
	if (usize > ksize) {
		ret = check_zeroed_user(argp + ksize, usize - ksize);
		if (ret <= 0)
			return ret ?: -E2BIG;
	}
	if (!(d->roles & BIT(role)))
		return pool ? -EPERM : -ENOTCONN;
	/* What an unattached file may do, any file may do. */
	if (role == MOECACHE_ROLE_AGENT && !(d->roles & ROLES_UNATTACHED) &&
	    !agent_is_current(pool, mf))
		return -EPERM;
	if (d->sized_fn)
		return d->sized_fn(pool, mf, argp, usize);
	return d->fn(pool, mf, argp);
}

/* ---- mmap ---- */

/*
 * The host region is mapped in full at mmap time; its fault handler maps a
 * page again after MADV_DONTNEED (or anything else that zapped it), so
 * that the region, and get_user_pages() on it, keep working. The map
 * region (vmalloc'ed, charged to the pool's creator) and a pins region are
 * mapped only by faults, page by page; for a pins region that is how the
 * driver learns which files may hold a pin on which slots.
 */
static vm_fault_t fault_page(struct vm_fault *vmf, struct page *page)
{
	get_page(page);
	vmf->page = page;
	return 0;
}

static vm_fault_t map_region_fault(struct vm_fault *vmf)
{
	struct moecache_pool *pool = vmf->vma->vm_private_data;

	if (vmf->pgoff >= pool->region_size >> PAGE_SHIFT)
		return VM_FAULT_SIGBUS;
	return fault_page(vmf, vmalloc_to_page(pool->region +
					       (vmf->pgoff << PAGE_SHIFT)));
}

/*
 * Before any process can store to a page of its pins region, the file
 * joins that page's fast_pinners list, under pool->lock: from then on an
 * evictor reads the file's pins of those slots (see slot_fast_pinned()).
 * A file stays on the list until it is released, however often the page
 * is zapped and faulted again.
 */
static vm_fault_t pins_region_fault(struct vm_fault *vmf)
{
	struct moecache_file *mf = vmf->vma->vm_private_data;
	/* Set before mmap could succeed; pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);
	unsigned long pgoff = vmf->pgoff - (MOECACHE_PINS_OFFSET >> PAGE_SHIFT);
	struct moecache_fast_ref *ref;

	if (pgoff >= mf->fast_pins_size >> PAGE_SHIFT ||
	    pgoff >= pool->n_fast_pages)
		return VM_FAULT_SIGBUS;
	ref = &mf->fast_refs[pgoff];
	spin_lock(&pool->lock);
	if (list_empty(&ref->node))
		list_add_tail(&ref->node, &pool->fast_pinners[pgoff]);
	spin_unlock(&pool->lock);
	return fault_page(vmf, vmalloc_to_page((void *)mf->fast_pins +
					       (pgoff << PAGE_SHIFT)));
}

static vm_fault_t host_region_fault(struct vm_fault *vmf)
{
	struct moecache_pool *pool = vmf->vma->vm_private_data;
	unsigned long pgoff = vmf->pgoff - (MOECACHE_HOST_OFFSET >> PAGE_SHIFT);

	if (pgoff >= pool->n_pages)
		return VM_FAULT_SIGBUS;
	return fault_page(vmf, pool->pages[pgoff]);
}

static const struct vm_operations_struct map_region_ops = {
	.fault = map_region_fault,
};

static const struct vm_operations_struct pins_region_ops = {
	.fault = pins_region_fault,
};

static const struct vm_operations_struct host_region_ops = {
	.fault = host_region_fault,
};

static int mmap_map_region(struct moecache_pool *pool,
			   struct vm_area_struct *vma)
{
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	moecache_vm_flags_clear(vma, VM_MAYWRITE);
	moecache_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &map_region_ops;
	vma->vm_private_data = pool;
	/* Nothing mapped yet: each page comes by map_region_fault(). */
	return 0;
}

static int mmap_pins_region(struct moecache_file *mf,
			    struct vm_area_struct *vma)
{
	moecache_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_ops = &pins_region_ops;
	vma->vm_private_data = mf;
	/* Nothing mapped yet: each page comes by pins_region_fault(). */
	return 0;
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
	vma->vm_ops = &host_region_ops;
	vma->vm_private_data = pool;
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
	/* Data only: no region may ever be executable. */
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	moecache_vm_flags_clear(vma, VM_MAYEXEC);
	if (pgoff >= pins_pgoff && pgoff < host_pgoff) {
		/* This fd's own region, whole or nothing. */
		if (!mf->fast_pins || pgoff != pins_pgoff ||
		    pages > mf->fast_pins_size >> PAGE_SHIFT)
			return -EINVAL;
		return mmap_pins_region(mf, vma);
	}
	if (pgoff < host_pgoff) {
		if (pgoff >= pool->region_size >> PAGE_SHIFT ||
		    pages > (pool->region_size >> PAGE_SHIFT) - pgoff)
			return -EINVAL;
		return mmap_map_region(pool, vma);
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

bool moecache_file_is_ours(struct file *file)
{
	return file->f_op == &moecache_fops;
}

static struct miscdevice moecache_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "moecache",
	.fops = &moecache_fops,
	.mode = 0600,
};

static int __init moecache_init(void)
{
	int ret = -EINVAL;

	if (dev_gid != -1) {
		if (dev_gid < 0)
			goto out;
		moecache_dev_group = make_kgid(&init_user_ns, dev_gid);
		if (!gid_valid(moecache_dev_group))
			goto out;
		moecache_dev.mode = 0666;
	}
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
/* dma_buf_get(), to check a ROCm bank. */
MOECACHE_IMPORT_NS_DMA_BUF();
