// SPDX-License-Identifier: MIT
/*
 * The CPU backend: the bank is a memfd in host memory, copies are done by
 * a pool of memcpy threads so that several are in flight at once, in the
 * order of copy_queue.h's scheduler (demand copies first, prefetches in
 * chunks a demand copy overtakes, cancellable). Finished copies are queued
 * and signalled on an eventfd; a demand copy is published first by the
 * thread that copied it when the config has a publish hook.
 *
 * Every bank of a pool is its own instance and its own sealed memfd (its
 * device ordinal only names it). Any two CPU banks can copy between each
 * other: a peer copy is a memcpy from the source bank's mapping, queued on
 * the destination's threads like a copy from the host pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "agent/log.h"
#include "backend_impl.h"
#include "copy_queue.h"

/* A growable FIFO of copies. */
struct cpu_backend {
	struct agent_copy_engine eng; /* first: the shared ops take priv as it */
	struct agent_backend_config cfg;
	char name[MOECACHE_NAME_LEN + 16];
	int memfd;
	void *bank;
	uint64_t bank_bytes;
	uint64_t slot_stride;

	/* Under eng.lock. */
	struct agent_copy_sched sched; /* demand first; prefetches in chunks */
	pthread_t *threads;
	uint32_t n_threads;
};

static void cpu_sleep_us(uint32_t us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void cpu_do_piece(struct cpu_backend *cb, const struct agent_copy_piece *p,
			 uint32_t delay_us)
{
	char *dst = (char *)cb->bank + (uint64_t)p->copy.slot * cb->slot_stride + p->offset;
	const char *src = (const char *)p->copy.src + p->offset;
	uint64_t half = cb->cfg.expert_bytes / 2;

	/* With a delay, the slot stays half-written for a while (in the piece
	 * that holds the expert's middle): tests use it to check that nobody can
	 * see a slot before its commit. Without one, a piece is one memcpy. */
	if (!delay_us || half < p->offset || half >= p->offset + p->len) {
		memcpy(dst, src, p->len);
		return;
	}
	memcpy(dst, src, half - p->offset);
	cpu_sleep_us(delay_us);
	memcpy(dst + (half - p->offset), src + (half - p->offset), p->offset + p->len - half);
}

/* A copy is over (under eng.lock; room was reserved): onto done, the collector woken if due. */
static void cpu_finish(struct cpu_backend *cb, const struct agent_copy *c)
{
	if (agent_copy_engine_done(&cb->eng, c)) {
		/* Woken without the lock held, the collector does not wait for it. */
		pthread_mutex_unlock(&cb->eng.lock);
		agent_copy_engine_signal(&cb->eng);
		pthread_mutex_lock(&cb->eng.lock);
	}
}

/*
 * A demand copy this thread finished (under eng.lock): published by the
 * config's hook from here, with the lock dropped, when there is one, so
 * the waiting client is woken by this thread and not after a hand-off to
 * the collector; then finished as any copy (agent_copy_engine_done batches
 * the wake-ups of published ones).
 */
static void cpu_publish(struct cpu_backend *cb, struct agent_copy *c)
{
	int ret;

	if (!cb->cfg.publish || c->status || (c->flags & MOECACHE_FILL_PREFETCH))
		return;
	pthread_mutex_unlock(&cb->eng.lock);
	ret = cb->cfg.publish(cb->cfg.publish_ctx, c);
	pthread_mutex_lock(&cb->eng.lock);
	c->status = ret;
	c->published = !ret;
}

static void *cpu_worker(void *arg)
{
	struct cpu_backend *cb = arg;
	struct agent_copy_piece piece;
	struct agent_copy c;

	pthread_mutex_lock(&cb->eng.lock);
	for (;;) {
		uint32_t delay;

		while (!agent_copy_sched_next(&cb->sched, &piece)) {
			if (agent_copy_engine_flush(&cb->eng)) {
				/* Out of work: the published copies go to the collector now. */
				pthread_mutex_unlock(&cb->eng.lock);
				agent_copy_engine_signal(&cb->eng);
				pthread_mutex_lock(&cb->eng.lock);
				continue;
			}
			if (cb->eng.stopping) {
				pthread_mutex_unlock(&cb->eng.lock);
				return NULL;
			}
			pthread_cond_wait(&cb->eng.work, &cb->eng.lock);
		}
		delay = cb->eng.copy_delay_us;
		pthread_mutex_unlock(&cb->eng.lock);

		cpu_do_piece(cb, &piece, delay);

		pthread_mutex_lock(&cb->eng.lock);
		/* Cannot fail: cpu_copy reserved room for every copy in flight. */
		if (agent_copy_sched_piece_done(&cb->sched, &piece, 0, &c)) {
			cpu_publish(cb, &c);
			cpu_finish(cb, &c);
		}
	}
}

static void cpu_destroy(void *priv)
{
	struct cpu_backend *cb = priv;

	if (!cb)
		return;
	pthread_mutex_lock(&cb->eng.lock);
	cb->eng.stopping = true;
	pthread_cond_broadcast(&cb->eng.work);
	pthread_mutex_unlock(&cb->eng.lock);
	for (uint32_t i = 0; i < cb->n_threads; i++)
		pthread_join(cb->threads[i], NULL);
	free(cb->threads);
	agent_copy_sched_fini(&cb->sched);
	if (cb->bank)
		munmap(cb->bank, cb->bank_bytes);
	if (cb->memfd >= 0)
		close(cb->memfd);
	agent_copy_engine_fini(&cb->eng);
	free(cb);
}

static int cpu_create(const struct agent_backend_config *cfg, void **priv)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cpu_backend *cb;
	int ret;

	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	cb->cfg = *cfg;
	cb->memfd = -1;
	cb->slot_stride = (cfg->expert_bytes + page - 1) / page * page;
	snprintf(cb->name, sizeof(cb->name), "moecache-bank:%s:%u", cfg->pool ? cfg->pool : "",
		 cfg->bank);
	cb->bank_bytes = cb->slot_stride * cfg->n_slots;
	ret = agent_copy_engine_init(&cb->eng, cfg->copy_delay_us);
	if (ret)
		goto err;
	ret = agent_copy_sched_init(&cb->sched, cfg->copy_threads, cfg->expert_bytes,
				    cfg->chunk_bytes);
	if (ret)
		goto err;
	cb->threads = calloc(cfg->copy_threads, sizeof(*cb->threads));
	if (!cb->threads) {
		ret = -ENOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < cfg->copy_threads; i++) {
		ret = -pthread_create(&cb->threads[i], NULL, cpu_worker, cb);
		if (ret)
			goto err;
		cb->n_threads++;
	}
	*priv = cb;
	return 0;
err:
	cpu_destroy(cb);
	return ret;
}

/*
 * What a client holding the driver's read-only view of the bank could do
 * to its pages with madvise() and mincore(), which the view cannot refuse
 * (the mapping is the memfd's). A memfd inode is 0777, and the kernel lets
 * whoever may write a file's inode page its pages out (MADV_PAGEOUT) and
 * read their residency (mincore): owner-only, a client's PAGEOUT skips
 * them and its mincore reports every page resident. MADV_COLD has no such
 * check; locked, the pages are unevictable and COLD and PAGEOUT are no-ops
 * whoever asks (MLOCK_ONFAULT: locked as the copies first touch them).
 * Neither changes what a client reads. A failure is not fatal (the bank
 * works, only evictable): it is said once, with the reason, where
 * RLIMIT_MEMLOCK is too low (LimitMEMLOCK= of moecached@.service).
 */
static void cpu_guard_bank(struct cpu_backend *cb)
{
	if (fchmod(cb->memfd, S_IRUSR | S_IWUSR) < 0)
		agent_warn(NULL, cb->cfg.pool, "cpu bank: fchmod 0600: %s", strerror(errno));
	if (mlock2(cb->bank, cb->bank_bytes, MLOCK_ONFAULT) < 0)
		agent_warn(NULL, cb->cfg.pool,
			   "cpu bank: mlock of %llu bytes: %s; its pages stay evictable "
			   "(raise RLIMIT_MEMLOCK)",
			   (unsigned long long)cb->bank_bytes, strerror(errno));
}

static int cpu_map_bank(struct cpu_backend *cb)
{
	void *p = mmap(NULL, cb->bank_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, cb->memfd, 0);

	if (p == MAP_FAILED)
		return -errno;
	cb->bank = p;
	cpu_guard_bank(cb);
	return 0;
}

static int cpu_bank_create(void *priv, struct moecache_bank *desc)
{
	struct cpu_backend *cb = priv;
	int ret;

	if (cb->memfd >= 0)
		return -EALREADY;
	cb->memfd = memfd_create(cb->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (cb->memfd < 0)
		return -errno;
	if (ftruncate(cb->memfd, (off_t)cb->bank_bytes) < 0) {
		ret = -errno;
		goto err;
	}
	/* Clients get this file too: none of them may resize it under the others. */
	if (fcntl(cb->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		goto err;
	}
	ret = cpu_map_bank(cb);
	if (ret)
		goto err;
	memset(desc, 0, sizeof(*desc));
	desc->fd = cb->memfd;
	desc->backend = MOECACHE_BACKEND_CPU;
	desc->device = cb->cfg.device; /* one bank per device: banks differ by it */
	desc->bank_bytes = cb->bank_bytes;
	desc->slot_stride = cb->slot_stride;
	return 0;
err:
	close(cb->memfd);
	cb->memfd = -1;
	return ret;
}

static int cpu_bank_adopt(void *priv, const struct moecache_bank *desc)
{
	struct cpu_backend *cb = priv;
	int ret;

	if (cb->memfd >= 0)
		return -EALREADY;
	if (desc->backend != MOECACHE_BACKEND_CPU || desc->slot_stride < cb->cfg.expert_bytes ||
	    cb->cfg.n_slots > desc->bank_bytes / desc->slot_stride)
		return -EPROTO;
	cb->memfd = desc->fd;
	cb->slot_stride = desc->slot_stride;
	cb->bank_bytes = desc->bank_bytes;
	ret = cpu_map_bank(cb);
	if (ret) {
		close(cb->memfd);
		cb->memfd = -1;
	}
	return ret;
}

static void *cpu_slot(void *priv, uint32_t slot)
{
	struct cpu_backend *cb = priv;

	if (!cb->bank || slot >= cb->cfg.n_slots)
		return NULL;
	return (char *)cb->bank + (uint64_t)slot * cb->slot_stride;
}

static int cpu_copy(void *priv, const struct agent_copy *c)
{
	struct cpu_backend *cb = priv;
	struct agent_copy q = *c;
	int ret;

	if (!cb->bank || c->slot >= cb->cfg.n_slots || !c->src)
		return -EINVAL;
	q.published = false; /* until cpu_publish says otherwise */
	pthread_mutex_lock(&cb->eng.lock);
	ret = agent_copy_queue_reserve(&cb->eng.done, cb->eng.inflight + 1);
	if (!ret)
		ret = agent_copy_sched_push(&cb->sched, &q);
	if (!ret)
		cb->eng.inflight++;
	pthread_mutex_unlock(&cb->eng.lock);
	/* After the unlock: a worker woken under it would only wait for the lock. */
	if (!ret)
		pthread_cond_signal(&cb->eng.work);
	return ret;
}

/* A prefetch not finished: cancelled now (finished as -ECANCELED) or after its running chunk. */
static int cpu_cancel(void *priv, uint32_t slot)
{
	struct cpu_backend *cb = priv;
	struct agent_copy c;
	int ret;

	pthread_mutex_lock(&cb->eng.lock);
	ret = agent_copy_sched_cancel(&cb->sched, slot, &c);
	if (!ret)
		cpu_finish(cb, &c);
	pthread_mutex_unlock(&cb->eng.lock);
	return ret == -EINPROGRESS ? 0 : ret;
}

static bool cpu_can_peer(const void *dst, const void *src)
{
	const struct cpu_backend *d = dst, *s = src;

	/* Both banks are mapped in this process: a memcpy reaches either. */
	return d != s && d->bank && s->bank && d->cfg.expert_bytes == s->cfg.expert_bytes;
}

static int cpu_copy_peer(void *dst, void *src, uint32_t src_slot, const struct agent_copy *c)
{
	struct agent_copy from_peer = *c;

	if (!cpu_can_peer(dst, src))
		return -EOPNOTSUPP;
	/* The source slot stays published (EVICT_MOVE) until this copy's commit. */
	from_peer.src = cpu_slot(src, src_slot);
	if (!from_peer.src)
		return -EINVAL;
	return cpu_copy(dst, &from_peer);
}

const struct agent_backend_ops agent_cpu_backend = {
    .id = MOECACHE_BACKEND_CPU,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .bank_create = cpu_bank_create,
    .bank_adopt = cpu_bank_adopt,
    .slot = cpu_slot,
    .copy = cpu_copy,
    .cancel = cpu_cancel,
    .completion_fd = agent_copy_engine_completion_fd,
    .completions = agent_copy_engine_completions,
    .inflight = agent_copy_engine_inflight,
    .set_delay = agent_copy_engine_set_delay,
    .can_peer = cpu_can_peer,
    .copy_peer = cpu_copy_peer,
};
