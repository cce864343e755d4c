// SPDX-License-Identifier: GPL-2.0
/*
 * moecache agent side: the request queue (read, poll), EVICT, COMMIT,
 * ABORT, the bank and LOAD.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/dma-buf.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/nospec.h>
#include <linux/poll.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "core.h"

/*
 * The agent is gone: nothing half-filled stays, its requests go back, and
 * an expert it was moving stays where it was.
 */
void agent_detach(struct moecache_pool *pool)
{
	u32 slot, own, idx;

	lockdep_assert_held(&pool->lock);
	map_write_begin(pool);
	for (slot = 0; slot < pool->n_slots; slot++) {
		own = pool->owner[slot];
		if (own == MOECACHE_NONE || !(own & MOECACHE_OWNER_FILLING))
			continue;
		if (test_bit(own & MOECACHE_OWNER_IDX_MASK, pool->moving)) {
			move_cancel(pool, slot);
			continue;
		}
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
	WRITE_ONCE(pool->agent, NULL);
	put_pid(pool->agent_pid);
	WRITE_ONCE(pool->agent_pid, NULL);
	map_set_flags(pool, 0, MOECACHE_POOL_AGENT);
	map_write_end(pool);
}

long ioc_evict(struct moecache_pool *pool, struct moecache_file *mf,
	       void __user *argp)
{
	struct moecache_evict req;
	bool only_free, move, sample = false;
	unsigned int every;
	u32 idx = MOECACHE_NONE, own;
	int ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	only_free = req.layer == MOECACHE_NONE;
	move = req.flags & MOECACHE_EVICT_MOVE;
	if ((req.flags & ~MOECACHE_EVICT_FLAGS_ALL) ||
	    req.slot >= pool->n_slots ||
	    (only_free && (req.expert != MOECACHE_NONE || move)))
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
	/* Pinned, filling, the old slot of a move, or freed by one and read. */
	if (pool->pins[req.slot] ||
	    (own != MOECACHE_NONE && (own & MOECACHE_OWNER_FILLING)) ||
	    (own != MOECACHE_NONE && test_bit(own, pool->moving)) ||
	    (own == MOECACHE_NONE && !slot_reusable(pool, req.slot))) {
		ret = -EBUSY;
		goto out_unlock;
	}
	/* Only a MOVE takes a resident expert, once, to another slot. */
	if (!only_free && (pool->estate[idx] == ES_FILLING ||
			   (pool->estate[idx] == ES_RESIDENT &&
			    (!move || test_bit(idx, pool->moving) ||
			     pool->map[idx] == req.slot)))) {
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
		/* Read once: it may be set to 0 between a test and a division. */
		every = READ_ONCE(evict_event_sample);
		sample = every && !(pool->evict_events % every);
	}
	if (!only_free) {
		/* A move: the expert stays resident, and readable, meanwhile. */
		if (pool->estate[idx] == ES_RESIDENT)
			__set_bit(idx, pool->moving);
		else if (pool->estate[idx] == ES_QUEUED)
			request_dequeue(pool, idx);
		else if (pool->estate[idx] == ES_INFLIGHT)
			pool->n_inflight--;
		if (pool->estate[idx] != ES_RESIDENT)
			pool->estate[idx] = ES_FILLING;
		WRITE_ONCE(pool->owner[req.slot], MOECACHE_OWNER_FILLING | idx);
		pool->n_filling++;
	}
	map_write_end(pool);
	spin_unlock(&pool->lock);

	if (sample)
		pool_event(pool, MOECACHE_EV_EVICTION, req.old_layer,
			   req.old_expert);
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

/*
 * Publishes the new slot of a move and frees the old one, in the caller's
 * seq write: a reader sees the expert in one slot or the other, never in
 * both and never in none. The old slot's pins stay with it: EVICT takes
 * it only once they are gone (SF_MOVED for the fast ones).
 */
static void move_commit(struct moecache_pool *pool, u32 idx, u32 slot)
{
	u32 old = pool->map[idx];

	lockdep_assert_held(&pool->lock);
	WRITE_ONCE(pool->owner[slot], idx);
	/* A move is not a use: the expert keeps its stamp and its flags. */
	WRITE_ONCE(pool->last_use[slot], pool->last_use[old]);
	pool->slot_flags[slot] = pool->slot_flags[old];
	map_publish(pool, idx, slot);
	WRITE_ONCE(pool->owner[old], MOECACHE_NONE);
	pool->slot_flags[old] = SF_MOVED;
	__clear_bit(idx, pool->moving);
	pool->n_filling--;
	pool_count(pool, idx, C_COMMITS, 1);
	pool_count(pool, idx, C_BYTES_COPIED, pool->expert_bytes);
	/* The bank it left counts an eviction, the pool none. */
	bank_count(pool, old, C_EVICTIONS, 1);
	bank_count(pool, slot, C_COMMITS, 1);
}

long ioc_commit(struct moecache_pool *pool, struct moecache_file *mf,
		void __user *argp)
{
	struct moecache_fill_batch b;
	struct moecache_fill *f;
	bool moved = false, wake;
	u32 i, idx, slot;
	u64 clock;
	int ret = 0;

	if (copy_from_user(&b, argp, sizeof(b)))
		return -EFAULT;
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
		if (test_bit(idx, pool->moving)) {
			move_commit(pool, idx, slot);
			moved = true;
			continue;
		}
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
		bank_count(pool, slot, C_COMMITS, 1);
		pool_count(pool, idx, C_BYTES_COPIED, pool->expert_bytes);
	}
	if (moved)
		smp_mb(); /* map[] before the next reader of fast pins: slot_reusable() */
	map_write_end(pool);
	wake = client_wake_mark(pool);
	spin_unlock(&pool->lock);
	if (wake)
		client_wake_marked(pool);
	kfree(f);
	return 0;

out_unlock:
	spin_unlock(&pool->lock);
	kfree(f);
	return ret;
}

long ioc_abort(struct moecache_pool *pool, struct moecache_file *mf,
	       void __user *argp)
{
	struct moecache_fill_batch b;
	struct moecache_fill *f;
	bool requeued = false;
	u32 i, idx;
	int ret = 0;

	if (copy_from_user(&b, argp, sizeof(b)))
		return -EFAULT;
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
		} else if (test_bit(idx, pool->moving)) {
			/* The expert stays where it was. */
			move_cancel(pool, f[i].slot);
			pool_count(pool, idx, C_ABORTS, 1);
			continue;
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

/*
 * A client may only read the bank. A CPU bank is a memfd the agent maps
 * read-write; were a client given that file, or a read-only open of it,
 * it could open it again read-write through /proc/self/fd (memfd inodes
 * are 0777). It gets instead a file of its own whose only operation is a
 * mapping of the memfd that can never become writable. Device banks (CUDA,
 * ROCm) are shared as they are: what a client may do with them is up to
 * the importing driver (docs/abi.md, "Security model").
 */
static int bank_view_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct file *bank = file->private_data;

	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EPERM;
	moecache_vm_flags_clear(vma, VM_MAYWRITE | VM_MAYEXEC);
	/* The mapping is the memfd's from here on, as dma_buf_mmap() does. */
	vma_set_file(vma, bank);
	return moecache_call_mmap(bank, vma);
}

static int bank_view_release(struct inode *inode, struct file *file)
{
	fput(file->private_data);
	return 0;
}

static const struct file_operations bank_view_fops = {
	.owner = THIS_MODULE,
	.mmap = bank_view_mmap,
	.release = bank_view_release,
	.llseek = noop_llseek,
};

/* Takes the reference on bank: the view holds it, or it is dropped. */
static struct file *bank_view_open(struct file *bank)
{
	struct file *view;

	view = anon_inode_getfile("[moecache-bank]", &bank_view_fops, bank,
				  O_RDONLY);
	if (IS_ERR(view))
		fput(bank);
	return view;
}

/*
 * What BANK_SET may be given: never a file of this driver (whose release
 * would wait for the pool it is held by), and the file type the backend
 * implies, at least bank_bytes long. A ROCm bank is a dma-buf, so a kernel
 * built without CONFIG_DMA_SHARED_BUFFER refuses every one, and the call to
 * dma_buf_get() is compiled out there.
 */
static bool bank_is_dmabuf(struct file *bank, int fd)
{
	struct dma_buf *dmabuf;
	bool ret;

	if (!IS_ENABLED(CONFIG_DMA_SHARED_BUFFER))
		return false;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return false;
	ret = dmabuf->file == bank;
	dma_buf_put(dmabuf);
	return ret;
}

/*
 * What a CUDA exporter hands out: the NVIDIA driver's POSIX fd handle is
 * a file of its control device (a character device); a dma-buf or a memfd
 * (the fake driver of the test builds) are taken too. Nothing else: a
 * socket may carry a /dev/moecache fd in flight, which the pool would then
 * hold forever, and a FIFO, a directory or another anon-inode file is no
 * device memory.
 */
static bool bank_cuda_plausible(struct file *bank, int fd)
{
	return S_ISCHR(file_inode(bank)->i_mode) || shmem_file(bank) ||
	       bank_is_dmabuf(bank, fd);
}

static int bank_check(struct file *bank, const struct moecache_bank *req)
{
	struct dma_buf *dmabuf;
	int ret = 0;

	if (moecache_file_is_ours(bank) || bank->f_op == &bank_view_fops)
		return -EINVAL;
	switch (req->backend) {
	case MOECACHE_BACKEND_CPU:
		if (!shmem_file(bank) ||
		    i_size_read(file_inode(bank)) < req->bank_bytes)
			ret = -EINVAL;
		break;
	case MOECACHE_BACKEND_ROCM:
		/* A kernel without dma-buf has no ROCm bank to give. */
		if (!IS_ENABLED(CONFIG_DMA_SHARED_BUFFER))
			return -EINVAL;
		dmabuf = dma_buf_get(req->fd);
		if (IS_ERR(dmabuf))
			return -EINVAL;
		if (dmabuf->file != bank || dmabuf->size < req->bank_bytes)
			ret = -EINVAL;
		dma_buf_put(dmabuf);
		break;
	default:
		if (!bank_cuda_plausible(bank, req->fd))
			ret = -EINVAL;
		break;
	}
	return ret;
}

/*
 * Another bank of the pool on the same object, or on the (backend, device)
 * that bank's object or layout names: each device holds one bank.
 */
static bool bank_conflict(struct moecache_pool *pool, u32 index,
			  struct file *bank, const struct moecache_bank *req)
{
	const struct moecache_pool_bank *b;
	u32 i;

	lockdep_assert_held(&pool->lock);
	for (i = 0; i < pool->n_banks; i++) {
		b = &pool->banks[i];
		if (i == index)
			continue;
		if (b->file && (file_inode(b->file) == file_inode(bank) ||
				(b->desc.backend == req->backend &&
				 b->desc.device == req->device)))
			return true;
		if (b->layout.backend == req->backend &&
		    b->layout.device == req->device)
			return true;
	}
	return false;
}

/* Is a slot of the bank pinned by ACQUIRE? */
static bool bank_pinned(struct moecache_pool *pool, u32 index)
{
	const struct moecache_pool_bank *b = &pool->banks[index];
	u32 slot;

	lockdep_assert_held(&pool->lock);
	for (slot = b->slot_begin; slot < b->slot_begin + b->layout.n_slots;
	     slot++)
		if (pool->pins[slot])
			return true;
	return false;
}

/* The out fields of BANK_SET and BANK_GET: the bank's layout. */
static void bank_desc_layout(const struct moecache_pool_bank *b, u32 index,
			     struct moecache_bank *req)
{
	req->index = index;
	req->tier = b->layout.tier;
	req->slot_begin = b->slot_begin;
	req->n_slots = b->layout.n_slots;
}

long ioc_bank_set(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp)
{
	struct moecache_pool_bank *b;
	struct moecache_map_bank *mb;
	struct moecache_bank req;
	struct file *bank, *old = NULL;
	u32 index;
	u64 need;
	int ret = 0;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.index >= pool->n_banks ||
	    req.backend < MOECACHE_BACKEND_CPU ||
	    req.backend > MOECACHE_BACKEND_ROCM ||
	    req.slot_stride < pool->expert_bytes)
		return -EINVAL;
	index = array_index_nospec(req.index, pool->n_banks);
	b = &pool->banks[index];
	/* A layout that names a device binds the bank to it. */
	if (b->layout.backend != MOECACHE_BACKEND_NONE &&
	    (req.backend != b->layout.backend ||
	     req.device != b->layout.device))
		return -EINVAL;
	if (check_mul_overflow((u64)b->layout.n_slots, req.slot_stride,
			       &need) ||
	    need > req.bank_bytes)
		return -EINVAL;
	bank_desc_layout(b, index, &req);
	/* The layout is written back: that must not fail after the change. */
	if (copy_to_user(argp, &req, sizeof(req)))
		return -EFAULT;
	bank = fget(req.fd);
	if (!bank)
		return -EBADF;
	ret = bank_check(bank, &req);
	if (ret)
		goto out_put;

	spin_lock(&pool->lock);
	if (bank_conflict(pool, index, bank, &req)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (bank_pinned(pool, index)) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (b->file) {
		ret = bank_clear_residency(pool, index);
		if (ret)
			goto out_unlock;
	} else {
		pool->n_banks_set++;
	}
	old = b->file;
	b->file = bank;
	bank = NULL;
	req.fd = -1;
	b->desc = req;
	mb = &pool->map_banks[index];
	map_write_begin(pool);
	WRITE_ONCE(mb->backend, req.backend);
	WRITE_ONCE(mb->device, req.device);
	WRITE_ONCE(mb->flags, MOECACHE_MAP_BANK_SET);
	/* MOECACHE_POOL_BANK: every bank has its object. */
	if (pool->n_banks_set == pool->n_banks)
		map_set_flags(pool, MOECACHE_POOL_BANK, 0);
	map_write_end(pool);
out_unlock:
	spin_unlock(&pool->lock);
	if (old)
		fput(old);
out_put:
	if (bank)
		fput(bank);
	return ret;
}

long ioc_bank_get(struct moecache_pool *pool, struct moecache_file *mf,
		  void __user *argp)
{
	struct moecache_bank req;
	struct file *bank;
	u32 index;
	int fd;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.index >= pool->n_banks)
		return -EINVAL;
	index = array_index_nospec(req.index, pool->n_banks);
	spin_lock(&pool->lock);
	bank = pool->banks[index].file;
	if (bank) {
		get_file(bank);
		req = pool->banks[index].desc;
	}
	spin_unlock(&pool->lock);
	if (!bank)
		return -ENODATA;
	if (mf->role == MOECACHE_ROLE_CLIENT &&
	    req.backend == MOECACHE_BACKEND_CPU) {
		bank = bank_view_open(bank);
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

long ioc_load(struct moecache_pool *pool, struct moecache_file *mf,
	      void __user *argp)
{
	struct moecache_load req;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
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

/* ---- read and poll: the agent's request queue ---- */

ssize_t moecache_read(struct file *file, char __user *buf, size_t len,
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
	if (mf->role != MOECACHE_ROLE_AGENT || !agent_is_current(pool, mf))
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
		queue_depth_publish(pool);
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
			WRITE_ONCE(pool->n_queued, pool->n_queued + 1);
		}
		queue_depth_publish(pool);
		spin_unlock(&pool->lock);
		ret = -EFAULT;
		goto out_free;
	}
	ret = n * sizeof(*reqs);
out_free:
	kfree(reqs);
	return ret;
}

__poll_t moecache_poll(struct file *file, poll_table *wait)
{
	struct moecache_file *mf = file->private_data;
	/* Pairs with the release in ioc_attach(). */
	struct moecache_pool *pool = smp_load_acquire(&mf->pool);

	if (!pool || mf->role != MOECACHE_ROLE_AGENT ||
	    !agent_is_current(pool, mf))
		return EPOLLERR;
	poll_wait(file, &pool->agent_wq, wait);
	if (READ_ONCE(pool->n_queued))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}
