// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-fuzz: the operations. Each one builds its arguments from the
 * lane's generator and what the lane knows (its fds, their roles, pins,
 * requests in flight, the map region), adds defects at random, says what the
 * call may return, makes it, checks the result and updates what it knows.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"
#include "mc_fastpin.h"

enum fz_op {
	OP_OPEN,
	OP_CLOSE,
	OP_DUP,
	OP_ATTACH,
	OP_INFO,
	OP_NOP,
	OP_CREATE,
	OP_DESTROY,
	OP_ACQUIRE,
	OP_ACQ_REL,
	OP_RELEASE,
	OP_PREFETCH,
	OP_READ,
	OP_POLL,
	OP_EVICT,
	OP_COMMIT,
	OP_ABORT,
	OP_BANK_SET,
	OP_BANK_GET,
	OP_LOAD,
	OP_STATS,
	OP_MMAP,
	OP_MUNMAP,
	OP_MPROTECT,
	OP_TOUCH,
	OP_BADIOCTL,
	OP_FORK,
	OP_NETLINK,
	OP_FAST,
	OP_REPORT,
	OP_NR
};

_Static_assert(OP_NR <= FZ_OP_SLOTS, "FZ_OP_SLOTS counts every operation");

static const struct {
	const char *name;
	unsigned int weight;
} op_table[OP_NR] = {
    [OP_OPEN] = {"open", 40},
    [OP_CLOSE] = {"close", 25},
    [OP_DUP] = {"dup", 8},
    [OP_ATTACH] = {"attach", 50},
    [OP_INFO] = {"get_info", 8},
    [OP_NOP] = {"nop", 5},
    [OP_CREATE] = {"pool_create", 25},
    [OP_DESTROY] = {"pool_destroy", 15},
    [OP_ACQUIRE] = {"acquire", 90},
    [OP_ACQ_REL] = {"acquire_release", 50},
    [OP_RELEASE] = {"release", 70},
    [OP_PREFETCH] = {"prefetch", 40},
    [OP_READ] = {"read", 60},
    [OP_POLL] = {"poll", 15},
    [OP_EVICT] = {"evict", 90},
    [OP_COMMIT] = {"commit", 70},
    [OP_ABORT] = {"abort", 25},
    [OP_BANK_SET] = {"bank_set", 15},
    [OP_BANK_GET] = {"bank_get", 15},
    [OP_LOAD] = {"load", 15},
    [OP_STATS] = {"stats", 25},
    [OP_MMAP] = {"mmap", 35},
    [OP_MUNMAP] = {"munmap", 15},
    [OP_MPROTECT] = {"mprotect", 15},
    [OP_TOUCH] = {"touch", 20},
    [OP_BADIOCTL] = {"bad_ioctl", 30},
    [OP_FORK] = {"fork", 2},
    [OP_NETLINK] = {"netlink", 40},
    [OP_FAST] = {"fast_pin", 40},
    [OP_REPORT] = {"report", 20},
};

/* ---- small helpers ---- */

static long xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static uint32_t idx_of(const struct fz_geom *g, uint32_t layer, uint32_t expert)
{
	return layer * g->n_local + (expert - g->expert_begin);
}

static const uint32_t *map_arr(const struct fz_fd *f, uint64_t off)
{
	return (const uint32_t *)((const char *)f->map + off);
}

static uint32_t pins_of(const struct fz_fd *f, uint32_t slot)
{
	return __atomic_load_n(&map_arr(f, f->map->pins_off)[slot], __ATOMIC_RELAXED);
}

/*
 * One lane, and not a forked child (whose parent's files, open but idle,
 * count in the pool too): the lane sees the pool's whole state.
 */
static bool exact(const struct fz_lane *l)
{
	return l->cfg->strict && !l->child;
}

void fz_pool_name(const struct fz_config *cfg, unsigned int k, char *out)
{
	snprintf(out, MOECACHE_NAME_LEN, "%s-%u", cfg->prefix, k);
}

static struct fz_fd *pick_fd(struct fz_lane *l, uint32_t role)
{
	struct fz_fd *cand[FZ_MAX_FDS];
	unsigned int n = 0, i;

	if (role != MOECACHE_ROLE_NONE && fz_chance(l, 17, 20)) {
		for (i = 0; i < FZ_MAX_FDS; i++)
			if (l->fds[i].fd >= 0 && l->fds[i].role == role)
				cand[n++] = &l->fds[i];
	}
	if (!n)
		for (i = 0; i < FZ_MAX_FDS; i++)
			if (l->fds[i].fd >= 0)
				cand[n++] = &l->fds[i];
	return n ? cand[fz_below(l, n)] : NULL;
}

/*
 * A pointer the kernel cannot use for size bytes: NULL, a low address, a
 * PROT_NONE page, a kernel address, or one that runs from a readable page
 * into the PROT_NONE page.
 */
static void *bad_ptr_of(struct fz_lane *l, size_t size, const char **what, uint32_t kinds)
{
	const struct fz_config *c = l->cfg;

	switch (fz_below(l, kinds)) {
	case 0:
		*what = "null-ptr";
		return NULL;
	case 1:
		*what = "low-ptr";
		return (void *)(uintptr_t)(16 + fz_below(l, 4096));
	case 2:
		*what = "prot-none-ptr";
		return c->none + fz_below(l, (uint32_t)c->page / 2);
	case 3:
		*what = "kernel-ptr";
		return (void *)(uintptr_t)0xffffffff81000000ull;
	default:
		*what = "straddling-ptr";
		return c->none - (size > 1 ? size / 2 : 1);
	}
}

static void *bad_ptr(struct fz_lane *l, size_t size, const char **what)
{
	return bad_ptr_of(l, size, what, 5);
}

/*
 * Where an in/out argument goes: normally arg itself; with a defect, a bad
 * pointer or a read-only copy (the kernel reads it, its reply fails).
 */
static void *arg_ptr(struct fz_lane *l, struct fz_expect *e, void *arg, size_t size, bool out,
		     unsigned int chance_pct)
{
	const char *what;
	void *p;

	if (!fz_chance(l, chance_pct, 100))
		return arg;
	if (out && fz_chance(l, 1, 3) && !l->cfg->no_bad_out) {
		memcpy(l->cfg->ro_src, arg, size);
		fz_defect(e, "read-only-arg", EFAULT, 0);
		return l->cfg->ro;
	}
	p = bad_ptr(l, size, &what);
	fz_defect(e, what, EFAULT, 0);
	return p;
}

/* A list argument in the lane's junk page, or a bad pointer. */
static uint64_t list_ptr(struct fz_lane *l, struct fz_expect *e, void *list, size_t size,
			 unsigned int chance_pct, bool out)
{
	const char *what;

	if (fz_chance(l, chance_pct, 100)) {
		if (out && l->cfg->no_bad_out)
			return (uintptr_t)list;
		if (out && fz_chance(l, 1, 3)) {
			memcpy(l->cfg->ro_src, list, size);
			fz_defect(e, "read-only-list", EFAULT, 0);
			return (uintptr_t)l->cfg->ro;
		}
		fz_defect(e, "bad-list-ptr", EFAULT, 0);
		return (uintptr_t)bad_ptr(l, size, &what);
	}
	return (uintptr_t)list;
}

static void fd_forget(struct fz_fd *f)
{
	if (f->map)
		munmap((void *)f->map, f->g.off.map_size);
	free(f->pins);
	free(f->pin_idx);
	free(f->inflight);
	if (f->fast)
		munmap(f->fast, f->fast_len);
	free(f->fast_held);
	free(f->fast_idx);
	if (f->bank_fd >= 0)
		close(f->bank_fd);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->bank_fd = -1;
}

/* The lane's fds attached to the same pool as f, including f. */
static bool same_pool(const struct fz_fd *a, const struct fz_fd *b)
{
	return a->fd >= 0 && b->fd >= 0 && a->role != MOECACHE_ROLE_NONE &&
	       b->role != MOECACHE_ROLE_NONE && a->map && b->map && !strcmp(a->pool, b->pool);
}

/* With one lane, pins[] must be exactly what the lane's files hold. */
static void strict_pins_check(struct fz_lane *l, const struct fz_fd *f)
{
	uint32_t s, want;
	unsigned int i;

	if (!exact(l) || !f->map)
		return;
	for (i = 0; i < FZ_MAX_FDS; i++)
		if (same_pool(&l->fds[i], f) && l->fds[i].shared)
			return;
	for (s = 0; s < f->g.n_slots; s++) {
		want = 0;
		for (i = 0; i < FZ_MAX_FDS; i++)
			if (same_pool(&l->fds[i], f) && l->fds[i].role == MOECACHE_ROLE_CLIENT)
				want += l->fds[i].pins[s];
		if (pins_of(f, s) != want)
			fz_report(l, "pool %s: pins[%u] = %u, the lane's files hold %u", f->pool, s,
				  pins_of(f, s), want);
	}
}

/* The agent of the lane attached to f's pool, if any. */
static const struct fz_fd *lane_agent(struct fz_lane *l, const struct fz_fd *f)
{
	unsigned int i;

	for (i = 0; i < FZ_MAX_FDS; i++)
		if (same_pool(&l->fds[i], f) && l->fds[i].role == MOECACHE_ROLE_AGENT)
			return &l->fds[i];
	return NULL;
}

/* Gates every pool ioctl: unbound is ENOTCONN, the wrong role EPERM. */
static void gate(struct fz_expect *e, const struct fz_fd *f, uint32_t role_a, uint32_t role_b)
{
	if (f->role == MOECACHE_ROLE_NONE)
		fz_defect(e, "unbound", ENOTCONN, 0);
	else if (role_a != MOECACHE_ROLE_NONE && f->role != role_a && f->role != role_b)
		fz_defect(e, "wrong-role", EPERM, 0);
	else if (f->foreign)
		fz_defect(e, "another-process-agent", EPERM, 0);
}

static bool attached(const struct fz_fd *f)
{
	return f->role != MOECACHE_ROLE_NONE && f->map;
}

/* Distinct experts of one layer in the local range, in random order. */
static uint32_t pick_experts(struct fz_lane *l, const struct fz_geom *g, uint32_t *ids,
			     uint32_t max)
{
	uint32_t perm[FZ_MAX_LIST * 2], n, i, j, t, local = g->n_local;

	if (local > FZ_MAX_LIST * 2)
		local = FZ_MAX_LIST * 2;
	n = 1 + fz_below(l, max < local ? max : local);
	if (local > 64 && fz_chance(l, 1, 8))
		n = 65 + fz_below(l, (local < FZ_MAX_LIST ? local : FZ_MAX_LIST) - 64);
	for (i = 0; i < local; i++)
		perm[i] = i;
	for (i = 0; i < n; i++) {
		j = i + fz_below(l, local - i);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
		ids[i] = g->expert_begin + perm[i];
	}
	return n;
}

/* Adds list defects to a list of expert ids; returns the count to pass. */
static uint32_t expert_defects(struct fz_lane *l, struct fz_expect *e, const struct fz_geom *g,
			       uint32_t *ids, uint32_t n)
{
	const struct fz_config *c = l->cfg;

	switch (fz_below(l, 14)) {
	case 0:
		ids[fz_below(l, n)] = g->expert_end + fz_below(l, 3) * 1000;
		fz_defect(e, "expert-above-range", EINVAL, 0);
		return n;
	case 1:
		if (g->expert_begin == 0)
			return n;
		ids[fz_below(l, n)] = fz_below(l, g->expert_begin);
		fz_defect(e, "expert-below-range", EINVAL, 0);
		return n;
	case 2:
		if (n < 2)
			return n;
		ids[n - 1] = ids[fz_below(l, n - 1)];
		fz_defect(e, "repeated-expert", EINVAL, 0);
		return n;
	case 3:
		fz_defect(e, "count-0", EINVAL, 0);
		return 0;
	case 4:
		fz_defect(e, "count-over-max-batch", E2BIG, 0);
		return fz_chance(l, 1, 2) ? c->info.max_batch + 1 : 0xffffffffu;
	default:
		return n;
	}
}

/* ---- open, close, dup ---- */

/* The mappings made from one file: they keep it open until unmapped. */
static void unmap_file(struct fz_lane *l, uint64_t gen, bool touch)
{
	unsigned int i;
	struct fz_mapping *m;

	for (i = 0; i < FZ_MAX_MAPS; i++) {
		m = &l->maps[i];
		if (!m->addr || m->gen != gen)
			continue;
		if (touch && (m->prot & PROT_READ))
			(void)*(volatile uint8_t *)m->addr;
		munmap(m->addr, m->len);
		memset(m, 0, sizeof(*m));
	}
}

static void op_open(struct fz_lane *l)
{
	struct fz_fd *f = NULL;
	unsigned int i;
	bool rdonly = fz_chance(l, 1, 10);
	int fd;

	for (i = 0; i < FZ_MAX_FDS; i++)
		if (l->fds[i].fd < 0) {
			f = &l->fds[i];
			break;
		}
	if (!f) {
		f = &l->fds[fz_below(l, FZ_MAX_FDS)];
		unmap_file(l, f->gen, false);
		close(f->fd);
		fd_forget(f);
	}
	fd = open(MOECACHE_DEVICE, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0) {
		fz_report(l, "open %s: %s", MOECACHE_DEVICE, fz_errname(errno));
		return;
	}
	f->fd = fd;
	f->rdonly = rdonly;
	f->bank_fd = -1;
	f->gen = ++l->file_gen;
	fz_trace(l, "open fd %d%s", fd, rdonly ? " O_RDONLY" : "");
}

static void op_close(struct fz_lane *l)
{
	struct fz_fd *f = pick_fd(l, MOECACHE_ROLE_NONE);
	const struct moecache_map_header *map;
	size_t map_size;
	struct fz_fd *other = NULL;
	bool unmap_early;
	unsigned int i;

	if (!f)
		return;
	fz_trace(l, "close fd %d role %u pool %s", f->fd, f->role, f->pool);
	map = f->map;
	map_size = f->g.off.map_size;
	/* munmap before close and close before munmap are both fine. */
	if (fz_chance(l, 1, 2) && map) {
		munmap((void *)map, map_size);
		f->map = NULL;
	}
	unmap_early = fz_chance(l, 1, 2);
	if (unmap_early)
		unmap_file(l, f->gen, false);
	if (close(f->fd) < 0)
		fz_report(l, "close: %s", fz_errname(errno));
	if (!unmap_early)
		unmap_file(l, f->gen, true);
	f->fd = -1;
	if (f->map) {
		f->map = NULL;
		fd_forget(f);
		/* The mapping kept the pool alive; it still reads. */
		if (((const struct moecache_map_header *)map)->magic != MOECACHE_MAP_MAGIC)
			fz_report(l, "map region unreadable after close");
		munmap((void *)map, map_size);
	} else {
		fd_forget(f);
	}
	for (i = 0; i < FZ_MAX_FDS; i++)
		if (l->fds[i].fd >= 0 && l->fds[i].map)
			other = &l->fds[i];
	if (other) {
		fz_check_fd(l, other);
		strict_pins_check(l, other);
	}
}

/* A second reference to a file: closing it releases nothing. */
static void op_dup(struct fz_lane *l)
{
	struct fz_fd *f = pick_fd(l, MOECACHE_ROLE_CLIENT);
	int fd;

	if (!f)
		return;
	fd = dup(f->fd);
	if (fd < 0) {
		fz_report(l, "dup: %s", fz_errname(errno));
		return;
	}
	if (ioctl(fd, MOECACHE_IOC_NOP) < 0)
		fz_report(l, "NOP on a dup: %s", fz_errname(errno));
	close(fd);
	fz_check_fd(l, f);
	strict_pins_check(l, f);
}

/* ---- administration ---- */

static void random_name(struct fz_lane *l, struct fz_expect *e, char *name)
{
	memset(name, 0, MOECACHE_NAME_LEN);
	switch (fz_below(l, 24)) {
	case 0:
		fz_defect(e, "empty-name", EINVAL, 0);
		return;
	case 1:
		memset(name, 'a', MOECACHE_NAME_LEN);
		fz_defect(e, "unterminated-name", EINVAL, 0);
		return;
	case 2:
		snprintf(name, MOECACHE_NAME_LEN, "%s/%u", l->cfg->prefix, fz_below(l, 4));
		fz_defect(e, "bad-char-name", EINVAL, 0);
		return;
	case 3:
		snprintf(name, MOECACHE_NAME_LEN, "%s-none", l->cfg->prefix);
		return;
	default:
		fz_pool_name(l->cfg, fz_below(l, FZ_MAX_POOLS), name);
		/* Bytes after the NUL are not part of the name. */
		if (fz_chance(l, 1, 8))
			name[MOECACHE_NAME_LEN - 1 - fz_below(l, 8)] = 'x';
	}
}

static const uint32_t fz_ids[] = {0, 1000, 1001};

static void op_create(struct fz_lane *l, struct fz_fd *f)
{
	const struct fz_config *c = l->cfg;
	static const uint32_t modes[] = {0600, 0640, 0644, 0660, 0666, 0604, 0606, 0000, 0400};
	struct moecache_bank_layout banks[2];
	struct moecache_pool_create req;
	struct fz_expect e;
	uint32_t local;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	fz_expect_err(&e, EEXIST);
	fz_expect_err(&e, ENOSPC);
	memset(&req, 0, sizeof(req));
	random_name(l, &e, req.name);
	if (!strcmp(req.name + strlen(c->prefix), "-none"))
		fz_pool_name(c, fz_below(l, FZ_MAX_POOLS), req.name);
	req.n_layers = 1 + fz_below(l, 4);
	req.n_experts = 1 + fz_below(l, 16);
	if (fz_chance(l, 1, 6)) {
		req.n_layers = 1 + fz_below(l, 2);
		req.n_experts = 66 + fz_below(l, 100);
	}
	req.expert_begin = fz_below(l, req.n_experts);
	req.expert_end = req.expert_begin + 1 + fz_below(l, req.n_experts - req.expert_begin);
	if (fz_chance(l, 1, 2)) {
		req.expert_begin = 0;
		req.expert_end = req.n_experts;
	}
	local = req.expert_end - req.expert_begin;
	req.n_slots = 1 + fz_below(l, 12);
	if (fz_chance(l, 1, 8))
		req.n_slots = req.n_layers * local + fz_below(l, 3);
	req.expert_bytes = (uint64_t)c->page * (1 + fz_below(l, 3));
	req.uid = fz_ids[fz_below(l, 3)];
	req.gid = fz_ids[fz_below(l, 3)];
	req.mode = modes[fz_below(l, sizeof(modes) / sizeof(modes[0]))];

	if (fz_chance(l, 1, 3)) {
		switch (fz_below(l, 16)) {
		case 0:
			req.n_layers = fz_chance(l, 1, 2) ? 0 : c->info.max_layers + 1;
			fz_defect(&e, "bad-n_layers", EINVAL, 0);
			break;
		case 1:
			req.n_experts = fz_chance(l, 1, 2) ? 0 : c->info.max_experts + 1;
			fz_defect(&e, "bad-n_experts", EINVAL, 0);
			break;
		case 2:
			req.expert_begin = req.expert_end;
			fz_defect(&e, "empty-range", EINVAL, 0);
			break;
		case 3:
			req.expert_end = req.n_experts + 1 + fz_below(l, 5);
			fz_defect(&e, "range-past-n_experts", EINVAL, 0);
			break;
		case 4:
			req.n_slots = fz_chance(l, 1, 2) ? 0 : c->info.max_slots + 1;
			fz_defect(&e, "bad-n_slots", EINVAL, 0);
			break;
		case 5:
			req.expert_bytes = fz_chance(l, 1, 2) ? 0 : c->page + 8;
			fz_defect(&e, "bad-expert_bytes", EINVAL, 0);
			break;
		case 6:
			req.expert_bytes = c->info.max_expert_bytes + c->page;
			fz_defect(&e, "expert_bytes-over-max", EINVAL, 0);
			break;
		case 7:
			req.flags = 1u << fz_below(l, 32);
			fz_defect(&e, "flags", EINVAL, 0);
			break;
		case 8:
			req.pad = 1 + fz_below(l, 1000);
			fz_defect(&e, "pad", EINVAL, 0);
			break;
		case 9:
			req.mode |= 01000 << fz_below(l, 20);
			fz_defect(&e, "mode-high-bits", EINVAL, 0);
			break;
		case 10:
			req.uid = 0xffffffffu;
			fz_defect(&e, "invalid-uid", EINVAL, 0);
			break;
		case 11:
			/* Valid fields, more than max_host_mb. */
			req.n_layers = c->info.max_layers;
			req.n_experts = c->info.max_experts;
			req.expert_begin = 0;
			req.expert_end = req.n_experts;
			req.expert_bytes = c->info.max_expert_bytes;
			fz_defect(&e, "too-big", ENOSPC, EOVERFLOW, 0);
			break;
		case 12:
			/* Banks whose slots do not add up to n_slots (the model has one bank). */
			memset(banks, 0, sizeof(banks));
			banks[0].n_slots = req.n_slots;
			banks[1].n_slots = 1 + fz_below(l, 4);
			banks[1].tier = fz_below(l, 3);
			req.n_banks = 2;
			req.banks = (uintptr_t)banks;
			fz_defect(&e, "bank-slot-sum", EINVAL, 0);
			break;
		case 13:
			req.n_banks = c->info.max_banks + 1 + fz_below(l, 100);
			req.banks = (uintptr_t)banks;
			fz_defect(&e, "too-many-banks", E2BIG, 0);
			break;
		case 14:
			req.pad2 = 1 + fz_below(l, 1000);
			fz_defect(&e, "pad2", EINVAL, 0);
			break;
		default:
			break;
		}
	}
	p = arg_ptr(l, &e, &req, sizeof(req), false, 6);
	if (!l->privileged)
		fz_defect(&e, "unprivileged", EPERM, 0);
	ret = xioctl(f->fd, MOECACHE_IOC_POOL_CREATE, p);
	fz_trace(l, "POOL_CREATE %s %ux%u [%u,%u) slots %u bytes %llu mode %o -> %ld", req.name,
		 req.n_layers, req.n_experts, req.expert_begin, req.expert_end, req.n_slots,
		 (unsigned long long)req.expert_bytes, req.mode, ret);
	fz_check_result(l, &e, ret, "POOL_CREATE");
}

static void op_destroy(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_pool_name req;
	struct fz_expect e;
	unsigned int i;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	fz_expect_err(&e, ENOENT);
	fz_expect_err(&e, EBUSY);
	if (!l->privileged)
		fz_expect_err(&e, EPERM);
	memset(&req, 0, sizeof(req));
	random_name(l, &e, req.name);
	if (fz_chance(l, 1, 12)) {
		req.flags = 1u << fz_below(l, 32);
		fz_defect(&e, "flags", EINVAL, 0);
	} else if (fz_chance(l, 1, 12)) {
		req.pad = 1;
		fz_defect(&e, "pad", EINVAL, 0);
	}
	/* A pool one of our files is attached to cannot go. */
	for (i = 0; i < FZ_MAX_FDS; i++)
		if (l->fds[i].fd >= 0 && l->fds[i].role != MOECACHE_ROLE_NONE &&
		    !strncmp(l->fds[i].pool, req.name, MOECACHE_NAME_LEN))
			fz_defect(&e, "pool-in-use", EBUSY, EPERM, 0);
	p = arg_ptr(l, &e, &req, sizeof(req), false, 6);
	ret = xioctl(f->fd, MOECACHE_IOC_POOL_DESTROY, p);
	fz_trace(l, "POOL_DESTROY %.64s -> %ld", req.name, ret);
	fz_check_result(l, &e, ret, "POOL_DESTROY");
}

static bool geom_from_attach(struct fz_lane *l, const struct moecache_attach *a, struct fz_geom *g)
{
	const struct fz_config *c = l->cfg;

	g->n_layers = a->n_layers;
	g->n_experts = a->n_experts;
	g->expert_begin = a->expert_begin;
	g->expert_end = a->expert_end;
	g->n_slots = a->n_slots;
	g->expert_bytes = a->expert_bytes;
	g->off = a->off;
	if (!g->n_layers || g->n_layers > c->info.max_layers || !g->n_experts ||
	    g->expert_begin >= g->expert_end || g->expert_end > g->n_experts || !g->n_slots ||
	    g->n_slots > c->info.max_slots || !g->expert_bytes || g->expert_bytes % c->page) {
		fz_report(l, "ATTACH replied an impossible geometry");
		return false;
	}
	g->n_local = g->expert_end - g->expert_begin;
	g->n_idx = g->n_layers * g->n_local;
	if (g->off.host_size != (uint64_t)g->n_idx * g->expert_bytes ||
	    g->off.map_size < sizeof(struct moecache_map_header) || g->off.map_size % c->page ||
	    g->off.map_offset % c->page || g->off.host_offset % c->page) {
		fz_report(l, "ATTACH replied impossible offsets");
		return false;
	}
	return true;
}

/* The pins region's place: only with fast pins, page-aligned, clear of the others. */
static bool fast_region_check(struct fz_lane *l, const struct moecache_attach *a)
{
	const struct moecache_offsets *o = &a->off;
	uint64_t pg = (uint64_t)l->cfg->page;

	if (!(a->flags & MOECACHE_ATTACH_FAST_PINS)) {
		if (o->pins_offset || o->pins_size) {
			fz_report(l, "ATTACH without fast pins replied a pins region");
			return false;
		}
		return true;
	}
	if (o->pins_size < (uint64_t)a->n_slots * 4 || o->pins_size % pg || o->pins_offset % pg ||
	    (o->pins_offset < o->map_offset + o->map_size &&
	     o->map_offset < o->pins_offset + o->pins_size) ||
	    (o->pins_offset < o->host_offset + o->host_size &&
	     o->host_offset < o->pins_offset + o->pins_size)) {
		fz_report(l, "ATTACH replied an impossible pins region");
		return false;
	}
	return true;
}

static void fast_region_map(struct fz_lane *l, struct fz_fd *f)
{
	void *p = mmap(NULL, f->g.off.pins_size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
		       (off_t)f->g.off.pins_offset);

	/* A shared writable mapping needs a file open for writing. */
	if (f->rdonly) {
		if (p != MAP_FAILED || errno != EACCES)
			fz_report(l, "read-write mmap of the pins region of an O_RDONLY file: %s",
				  p == MAP_FAILED ? fz_errname(errno) : "mapped");
		if (p != MAP_FAILED)
			munmap(p, f->g.off.pins_size);
		return;
	}
	if (p == MAP_FAILED) {
		fz_report(l, "mmap of the pins region after ATTACH: %s", fz_errname(errno));
		return;
	}
	f->fast = p;
	f->fast_len = f->g.off.pins_size;
	f->fast_held = calloc(f->g.n_slots, sizeof(*f->fast_held));
	f->fast_idx = calloc(f->g.n_slots, sizeof(*f->fast_idx));
	if (!f->fast_held || !f->fast_idx) {
		fz_report(l, "out of memory");
		return;
	}
	for (uint32_t s = 0; s < f->g.n_slots; s++)
		if (p && f->fast[s])
			fz_report(l, "a new pins region holds %u at slot %u", f->fast[s], s);
}

static void op_attach(struct fz_lane *l, struct fz_fd *f)
{
	static const uint32_t roles[] = {MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_CLIENT,
					 MOECACHE_ROLE_AGENT, MOECACHE_ROLE_LOADER};
	struct moecache_attach req, probe;
	struct fz_expect e;
	bool was_attached = f->role != MOECACHE_ROLE_NONE, probe_ok;
	long ret;
	void *p;

	fz_expect_init(&e, !was_attached);
	memset(&req, 0, sizeof(req));
	random_name(l, &e, req.name);
	req.role = roles[fz_below(l, 4)];
	/* Out fields carry garbage in: they must be ignored. */
	req.n_layers = (uint32_t)fz_rand(l);
	req.n_slots = (uint32_t)fz_rand(l);
	req.off.reserved[0] = fz_rand(l);
	if (fz_chance(l, 1, 12)) {
		req.role = fz_chance(l, 1, 2) ? MOECACHE_ROLE_NONE : 4 + fz_below(l, 1000);
		fz_defect(&e, "bad-role", EINVAL, 0);
	} else if (fz_chance(l, 1, 14)) {
		/* Bits the ABI does not define. */
		req.flags = 1u << (1 + fz_below(l, 31));
		fz_defect(&e, "flags", EINVAL, 0);
	}
	if (!l->cfg->no_fast_pins && fz_chance(l, 1, 3)) {
		req.flags |= MOECACHE_ATTACH_FAST_PINS;
		if (req.role != MOECACHE_ROLE_CLIENT)
			fz_defect(&e, "fast-pins-role", EINVAL, 0);
		/* Fast pins are for the pool's owner and CAP_SYS_ADMIN only. */
		else if (!l->privileged)
			fz_expect_err(&e, EPERM);
	}
	if (was_attached)
		fz_defect(&e, "already-attached", EALREADY, 0);
	else {
		fz_expect_err(&e, ENOENT);
		if (req.role == MOECACHE_ROLE_AGENT)
			fz_expect_err(&e, EBUSY);
		if (!l->privileged)
			fz_expect_err(&e, EACCES);
	}
	p = arg_ptr(l, &e, &req, sizeof(req), true, 6);
	ret = xioctl(f->fd, MOECACHE_IOC_ATTACH, p);
	fz_trace(l, "ATTACH fd %d %.64s role %u -> %ld", f->fd, req.name, req.role, ret);
	if (!fz_check_result(l, &e, ret, "ATTACH") || ret < 0) {
		if (ret != -EFAULT || was_attached)
			return;
		/* Did the failed call attach the file anyway? */
		memset(&probe, 0, sizeof(probe));
		fz_pool_name(l->cfg, 0, probe.name);
		probe.role = MOECACHE_ROLE_CLIENT;
		ret = xioctl(f->fd, MOECACHE_IOC_ATTACH, &probe);
		probe_ok = ret == -EALREADY;
		if (probe_ok && p == l->cfg->ro)
			fz_report(l,
				  "ATTACH failed with EFAULT (read-only argument) but attached "
				  "the file (role %u)",
				  req.role);
		if (ret == 0 || probe_ok) {
			/* Attached without our knowing the geometry: start over. */
			unmap_file(l, f->gen, false);
			close(f->fd);
			fd_forget(f);
		}
		return;
	}
	if (!geom_from_attach(l, &req, &f->g) || !fast_region_check(l, &req))
		return;
	f->role = req.role;
	memcpy(f->pool, req.name, MOECACHE_NAME_LEN);
	f->pool[MOECACHE_NAME_LEN - 1] = 0;
	f->map = mmap(NULL, f->g.off.map_size, PROT_READ, MAP_SHARED, f->fd, f->g.off.map_offset);
	if (f->map == MAP_FAILED) {
		fz_report(l, "mmap of the map region after ATTACH: %s", fz_errname(errno));
		f->map = NULL;
		return;
	}
	if (f->role == MOECACHE_ROLE_CLIENT) {
		f->pins = calloc(f->g.n_slots, sizeof(*f->pins));
		f->pin_idx = calloc(f->g.n_slots, sizeof(*f->pin_idx));
	}
	if (req.flags & MOECACHE_ATTACH_FAST_PINS)
		fast_region_map(l, f);
	if (f->role == MOECACHE_ROLE_AGENT) {
		f->inflight = calloc(f->g.n_idx, 1);
		f->epoch = f->map->agent_epoch;
		fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_NONBLOCK);
	}
	fz_check_fd(l, f);
}

static void op_info(struct fz_lane *l, struct fz_fd *f)
{
	const struct fz_config *c = l->cfg;
	struct moecache_info info;
	struct fz_expect e;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	memset(&info, 0xa5, sizeof(info));
	p = arg_ptr(l, &e, &info, sizeof(info), true, 20);
	ret = xioctl(f->fd, MOECACHE_IOC_GET_INFO, p);
	if (!fz_check_result(l, &e, ret, "GET_INFO") || ret < 0)
		return;
	if (info.abi_version != MOECACHE_ABI_VERSION || info.max_batch != c->info.max_batch ||
	    info.max_pools != c->info.max_pools || info.n_pools > info.max_pools ||
	    info.host_bytes_used > info.max_host_bytes || info.reserved[0] || info.reserved[2])
		fz_report(l,
			  "GET_INFO: inconsistent reply (version %u, %u/%u pools, %llu/%llu bytes)",
			  info.abi_version, info.n_pools, info.max_pools,
			  (unsigned long long)info.host_bytes_used,
			  (unsigned long long)info.max_host_bytes);
}

static void op_nop(struct fz_lane *l, struct fz_fd *f)
{
	const char *what;
	long ret = xioctl(f->fd, MOECACHE_IOC_NOP, bad_ptr(l, 8, &what));

	if (ret)
		fz_report(l, "NOP returned %s", fz_errname((int)-ret));
}

/* ---- client ---- */

/* STATS numbers a failed client call must leave as they were (one lane). */
struct queue_state {
	uint64_t hits, misses, prefetches;
	uint32_t queued, inflight, pins;
};

static bool queue_state(struct fz_fd *f, struct queue_state *q)
{
	struct moecache_stats st;

	memset(&st, 0, sizeof(st));
	memset(q, 0, sizeof(*q));
	st.layer = MOECACHE_NONE;
	if (ioctl(f->fd, MOECACHE_IOC_STATS, &st) < 0)
		return false;
	q->hits = st.hits;
	q->misses = st.misses;
	q->prefetches = st.prefetches;
	q->queued = st.queued;
	q->inflight = st.inflight;
	q->pins = st.pins;
	return true;
}

static void queue_state_compare(struct fz_lane *l, const char *what, const struct queue_state *a,
				const struct queue_state *b)
{
	if (memcmp(a, b, sizeof(*a)))
		fz_report(l,
			  "%s failed but changed the pool: queued %u->%u, in flight %u->%u, "
			  "pins %u->%u, hits %llu->%llu, misses %llu->%llu, prefetches "
			  "%llu->%llu",
			  what, a->queued, b->queued, a->inflight, b->inflight, a->pins, b->pins,
			  (unsigned long long)a->hits, (unsigned long long)b->hits,
			  (unsigned long long)a->misses, (unsigned long long)b->misses,
			  (unsigned long long)a->prefetches, (unsigned long long)b->prefetches);
}

/*
 * The release half of ACQUIRE_RELEASE: slots this file holds pins on (or
 * none), with defects. Returns the count passed; *ptr gets the list pointer.
 */
static uint32_t pick_held(struct fz_lane *l, struct fz_expect *e, const struct fz_fd *f,
			  uint32_t *held, uint32_t *slots, uint32_t num, uint32_t den)
{
	uint32_t n = 0, s;

	memcpy(held, f->pins, f->g.n_slots * sizeof(*held));
	for (s = 0; s < f->g.n_slots && n < 16; s++)
		while (held[s] && n < 16 && fz_chance(l, num, den)) {
			slots[n++] = s;
			held[s]--;
		}
	/* Pins taken by another process sharing the file are not ours to count. */
	if (f->shared)
		fz_expect_err(e, EINVAL);
	return n;
}

static uint32_t release_half(struct fz_lane *l, struct fz_expect *e, struct fz_fd *f,
			     uint32_t *slots, uint64_t *ptr)
{
	bool tracked = attached(f) && f->role == MOECACHE_ROLE_CLIENT && f->g.n_slots <= 256;
	uint32_t held[256], n = 0, s;

	*ptr = 0;
	if (tracked)
		n = pick_held(l, e, f, held, slots, 1, 2);
	if (fz_chance(l, 1, 8)) {
		switch (fz_below(l, 4)) {
		case 0:
			slots[n++] = (attached(f) ? f->g.n_slots : 0) + fz_below(l, 100);
			fz_defect(e, "release-slot-out-of-range", EINVAL, 0);
			break;
		case 1:
			s = fz_below(l, 256);
			if (!tracked || s >= f->g.n_slots || held[s] || f->shared)
				break;
			slots[n++] = s;
			fz_defect(e, "release-slot-not-pinned", EINVAL, 0);
			break;
		case 2:
			*ptr = (uintptr_t)slots;
			fz_defect(e, "release-slots-without-count", EINVAL, 0);
			return 0;
		default:
			fz_defect(e, "release-count-over-max-batch", E2BIG, 0);
			*ptr = (uintptr_t)slots;
			return l->cfg->info.max_batch + 1;
		}
	}
	if (n)
		*ptr = list_ptr(l, e, slots, (size_t)n * 4, 4, false);
	return n;
}

/* ACQUIRE, or (with_release) ACQUIRE_RELEASE: one layer's experts pinned. */
static void acquire_common(struct fz_lane *l, struct fz_fd *f, bool with_release)
{
	static const uint32_t flag_sets[] = {
	    0,
	    0,
	    MOECACHE_ACQ_NO_QUEUE,
	    MOECACHE_ACQ_WAIT,
	    MOECACHE_ACQ_WAIT | MOECACHE_ACQ_KEEP_WAITING,
	};
	uint32_t ids[FZ_MAX_LIST], slots[FZ_MAX_LIST], rel[FZ_MAX_LIST], n, count, i, pinned = 0;
	uint32_t idx, rel_count = 0;
	const char *name = with_release ? "ACQUIRE_RELEASE" : "ACQUIRE";
	struct moecache_acquire_release ar;
	struct moecache_acquire *req = &ar.acquire;
	struct queue_state before, after;
	bool check_state, waited;
	struct fz_expect e;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_CLIENT);
	memset(&ar, 0, sizeof(ar));
	if (attached(f)) {
		req->layer = fz_below(l, f->g.n_layers);
		n = pick_experts(l, &f->g, ids, 8);
	} else {
		req->layer = fz_below(l, 4);
		n = 1 + fz_below(l, 4);
		for (i = 0; i < n; i++)
			ids[i] = i;
	}
	count = n;
	if (fz_chance(l, 1, 4))
		count = expert_defects(l, &e, &f->g, ids, n);
	if (attached(f) && fz_chance(l, 1, 20)) {
		req->layer = f->g.n_layers + fz_below(l, 3);
		fz_defect(&e, "layer-out-of-range", EINVAL, 0);
	}
	req->count = count;
	req->flags = flag_sets[fz_below(l, 5)];
	if (fz_chance(l, 1, 16)) {
		switch (fz_below(l, 4)) {
		case 0:
			req->flags = 1u << (4 + fz_below(l, 28));
			fz_defect(&e, "unknown-flags", EINVAL, 0);
			break;
		case 1:
			req->flags = MOECACHE_ACQ_KEEP_WAITING;
			fz_defect(&e, "keep-waiting-without-wait", EINVAL, 0);
			break;
		case 2:
			req->flags = MOECACHE_ACQ_NO_QUEUE | MOECACHE_ACQ_WAIT;
			fz_defect(&e, "no-queue-with-wait", EINVAL, 0);
			break;
		default:
			req->reserved = fz_rand(l) | 1;
			fz_defect(&e, "reserved", EINVAL, 0);
		}
	}
	req->timeout_ms = 1 + fz_below(l, 20);
	/* A WAIT the bank cannot hold at once is refused before anything. */
	if ((req->flags & MOECACHE_ACQ_WAIT) && attached(f) && count > f->g.n_slots)
		fz_defect(&e, "wait-over-slots", EINVAL, 0);
	req->n_hits = (uint32_t)fz_rand(l);
	req->n_pinned = (uint32_t)fz_rand(l);
	/* The pin share binds whoever is not the pool's owner or CAP_SYS_ADMIN. */
	if (!l->privileged)
		fz_expect_err(&e, EDQUOT);
	if (req->flags & MOECACHE_ACQ_WAIT) {
		fz_expect_err(&e, ETIMEDOUT);
		fz_expect_err(&e, EIO);
		if (!(req->flags & MOECACHE_ACQ_KEEP_WAITING) && !(exact(l) && lane_agent(l, f)))
			fz_expect_err(&e, EPIPE);
	}
	req->experts = list_ptr(l, &e, ids, (size_t)n * 4, 4, false);
	for (i = 0; i < FZ_MAX_LIST; i++)
		slots[i] = (uint32_t)fz_rand(l);
	req->slots = list_ptr(l, &e, slots, (size_t)n * 4, 4, true);
	if (with_release) {
		uint64_t rel_ptr;

		rel_count = release_half(l, &e, f, rel, &rel_ptr);
		ar.release_slots = rel_ptr;
		ar.release_count = rel_count;
		if (fz_chance(l, 1, 30)) {
			ar.flags = 1u << fz_below(l, 32);
			fz_defect(&e, "flags", EINVAL, 0);
		}
		p = arg_ptr(l, &e, &ar, sizeof(ar), true, 4);
	} else {
		p = arg_ptr(l, &e, req, sizeof(*req), true, 4);
	}

	check_state = exact(l) && attached(f) && f->role == MOECACHE_ROLE_CLIENT && !f->shared &&
		      !(req->flags & MOECACHE_ACQ_WAIT);
	if (check_state)
		check_state = queue_state(f, &before);
	ret = xioctl(f->fd, with_release ? MOECACHE_IOC_ACQUIRE_RELEASE : MOECACHE_IOC_ACQUIRE, p);
	fz_trace(l, "%s fd %d layer %u count %u flags 0x%x release %u -> %ld (%s)", name, f->fd,
		 req->layer, req->count, req->flags, rel_count, ret, e.defects);
	if (!fz_check_result(l, &e, ret, name))
		return;
	/* A WAIT that failed after validation keeps the release it made. */
	waited = ret == -ETIMEDOUT || ret == -EIO || ret == -EPIPE;
	/*
	 * EDQUOT is refused whole before the release, or a WAIT that gave up
	 * after it: which one, the lane cannot tell. Its pins are unknown
	 * until it drops them all.
	 */
	if (with_release && ret == -EDQUOT && (req->flags & MOECACHE_ACQ_WAIT))
		f->shared = true;
	if (with_release && (ret == 0 || waited) && attached(f) &&
	    f->role == MOECACHE_ROLE_CLIENT && !e.defects[0])
		for (i = 0; i < rel_count; i++)
			if (f->pins[rel[i]])
				f->pins[rel[i]]--;
	if (ret < 0) {
		if (check_state && queue_state(f, &after))
			queue_state_compare(l, name, &before, &after);
		fz_check_fd(l, f);
		strict_pins_check(l, f);
		return;
	}
	for (i = 0; i < count; i++) {
		if (slots[i] == MOECACHE_NONE)
			continue;
		if (slots[i] >= f->g.n_slots) {
			fz_report(l, "%s returned slot %u of %u", name, slots[i], f->g.n_slots);
			return;
		}
		idx = idx_of(&f->g, req->layer, ids[i]);
		if (f->pins[slots[i]] && f->pin_idx[slots[i]] != idx && !f->shared)
			fz_report(l, "%s pinned slot %u for idx %u; it was pinned for idx %u", name,
				  slots[i], idx, f->pin_idx[slots[i]]);
		f->pins[slots[i]]++;
		f->pin_idx[slots[i]] = idx;
		pinned++;
	}
	if (req->n_pinned != pinned || req->n_hits > count ||
	    (!(req->flags & MOECACHE_ACQ_WAIT) && req->n_hits != pinned) ||
	    ((req->flags & MOECACHE_ACQ_WAIT) && pinned != count))
		fz_report(l, "%s: n_hits %u n_pinned %u, but %u of %u slots returned (flags 0x%x)",
			  name, req->n_hits, req->n_pinned, pinned, count, req->flags);
	fz_check_fd(l, f);
	strict_pins_check(l, f);
}

static void op_acquire(struct fz_lane *l, struct fz_fd *f)
{
	acquire_common(l, f, false);
}

static void op_acq_rel(struct fz_lane *l, struct fz_fd *f)
{
	acquire_common(l, f, true);
}

static void op_release(struct fz_lane *l, struct fz_fd *f)
{
	uint32_t slots[FZ_MAX_LIST], held[256], n = 0, s, i;
	bool tracked = attached(f) && f->role == MOECACHE_ROLE_CLIENT && f->g.n_slots <= 256;
	struct moecache_release req;
	struct fz_expect e;
	bool list;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_CLIENT);
	memset(&req, 0, sizeof(req));
	memset(held, 0, sizeof(held));
	if (tracked)
		n = pick_held(l, &e, f, held, slots, 2, 3);
	list = n && !fz_chance(l, 1, 10);
	req.flags = list ? 0 : MOECACHE_REL_ALL;
	req.count = list ? n : 0;
	if (fz_chance(l, 1, 5)) {
		switch (fz_below(l, 7)) {
		case 0:
			list = true;
			req.flags = 0;
			slots[n] = (attached(f) ? f->g.n_slots : 0) + fz_below(l, 100);
			req.count = n + 1;
			fz_defect(&e, "slot-out-of-range", EINVAL, 0);
			break;
		case 1:
			s = fz_below(l, 256);
			if (!tracked || s >= f->g.n_slots || held[s] || f->shared)
				break;
			list = true;
			req.flags = 0;
			slots[n] = s;
			req.count = n + 1;
			fz_defect(&e, "slot-not-pinned", EINVAL, 0);
			break;
		case 2:
			list = true;
			req.flags = 0;
			req.count = 0;
			fz_defect(&e, "count-0", EINVAL, 0);
			break;
		case 3:
			list = true;
			req.flags = 0;
			req.count = l->cfg->info.max_batch + 1;
			fz_defect(&e, "count-over-max-batch", E2BIG, 0);
			break;
		case 4:
			list = false;
			req.flags = MOECACHE_REL_ALL;
			req.count = 1 + fz_below(l, 3);
			fz_defect(&e, "all-with-count", EINVAL, 0);
			break;
		case 5:
			list = false;
			req.flags = MOECACHE_REL_ALL;
			req.count = 0;
			req.slots = (uintptr_t)slots;
			fz_defect(&e, "all-with-slots", EINVAL, 0);
			break;
		default:
			req.flags |= 2u << fz_below(l, 30);
			fz_defect(&e, "unknown-flags", EINVAL, 0);
		}
	}
	if (list)
		req.slots =
		    list_ptr(l, &e, slots, (size_t)(req.count ? req.count : 1) * 4, 4, false);
	p = arg_ptr(l, &e, &req, sizeof(req), false, 4);
	ret = xioctl(f->fd, MOECACHE_IOC_RELEASE, p);
	fz_trace(l, "RELEASE fd %d count %u flags 0x%x -> %ld (%s)", f->fd, req.count, req.flags,
		 ret, e.defects);
	if (!fz_check_result(l, &e, ret, "RELEASE"))
		return;
	if (ret == 0 && tracked) {
		/* Every pin of the file is gone: what the lane knows is exact again. */
		if (req.flags & MOECACHE_REL_ALL) {
			memset(f->pins, 0, f->g.n_slots * sizeof(*f->pins));
			f->shared = false;
		} else {
			for (i = 0; i < req.count; i++)
				if (f->pins[slots[i]])
					f->pins[slots[i]]--;
		}
	}
	if (attached(f)) {
		fz_check_fd(l, f);
		strict_pins_check(l, f);
	}
}

static void op_prefetch(struct fz_lane *l, struct fz_fd *f)
{
	uint32_t ids[FZ_MAX_LIST], n, count;
	struct moecache_prefetch req;
	struct queue_state before, after;
	bool check_state;
	struct fz_expect e;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_CLIENT);
	memset(&req, 0, sizeof(req));
	if (attached(f)) {
		req.layer = fz_below(l, f->g.n_layers);
		n = pick_experts(l, &f->g, ids, 8);
	} else {
		n = 1;
		ids[0] = 0;
	}
	count = n;
	if (fz_chance(l, 1, 4))
		count = expert_defects(l, &e, &f->g, ids, n);
	if (attached(f) && fz_chance(l, 1, 20)) {
		req.layer = f->g.n_layers + fz_below(l, 1000);
		fz_defect(&e, "layer-out-of-range", EINVAL, 0);
	}
	if (fz_chance(l, 1, 20)) {
		req.flags = 1u << fz_below(l, 32);
		fz_defect(&e, "flags", EINVAL, 0);
	}
	req.count = count;
	req.n_queued = (uint32_t)fz_rand(l);
	req.experts = list_ptr(l, &e, ids, (size_t)n * 4, 4, false);
	p = arg_ptr(l, &e, &req, sizeof(req), true, 5);
	check_state = exact(l) && attached(f) && f->role == MOECACHE_ROLE_CLIENT && !f->shared;
	if (check_state)
		check_state = queue_state(f, &before);
	ret = xioctl(f->fd, MOECACHE_IOC_PREFETCH, p);
	fz_trace(l, "PREFETCH fd %d layer %u count %u -> %ld (%s)", f->fd, req.layer, req.count,
		 ret, e.defects);
	if (!fz_check_result(l, &e, ret, "PREFETCH"))
		return;
	if (ret < 0 && check_state && queue_state(f, &after))
		queue_state_compare(l, "PREFETCH", &before, &after);
	if (ret == 0 && req.n_queued > count)
		fz_report(l, "PREFETCH queued %u of %u", req.n_queued, count);
}

/* ---- agent ---- */

static void op_read(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_request reqs[8];
	size_t len, n, i;
	struct fz_expect e;
	const char *what;
	uint32_t idx;
	void *buf = reqs;
	ssize_t ret;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_AGENT);
	len = sizeof(reqs[0]) * (1 + fz_below(l, 7));
	/* A length that is no multiple of a request reads whole ones. */
	if (fz_chance(l, 1, 10))
		len += 1 + fz_below(l, sizeof(reqs[0]) - 1);
	if (fz_chance(l, 1, 15)) {
		len = fz_below(l, sizeof(reqs[0]));
		fz_defect(&e, "short-buffer", EINVAL, 0);
	} else if (fz_chance(l, 1, 15)) {
		/* Wholly bad: read() writes only the requests it has. */
		buf = bad_ptr_of(l, len, &what, 4);
		fz_defect(&e, what, EFAULT, EAGAIN, 0);
	}
	if (f->role == MOECACHE_ROLE_AGENT || f->role == MOECACHE_ROLE_NONE)
		fz_expect_err(&e, EAGAIN);
	/* Only the agent's file is non-blocking; the others refuse before waiting. */
	ret = read(f->fd, buf, len);
	if (ret < 0)
		ret = -errno;
	fz_trace(l, "read fd %d len %zu -> %zd", f->fd, len, ret);
	if (!fz_check_result(l, &e, ret, "read") || ret <= 0)
		return;
	if (ret % sizeof(reqs[0]) || (size_t)ret > len) {
		fz_report(l, "read returned %zd bytes for a buffer of %zu", ret, len);
		return;
	}
	n = ret / sizeof(reqs[0]);
	for (i = 0; i < n; i++) {
		const struct moecache_request *r = &reqs[i];

		if (r->layer >= f->g.n_layers || r->expert < f->g.expert_begin ||
		    r->expert >= f->g.expert_end || r->pad ||
		    !(r->flags & (MOECACHE_REQ_DEMAND | MOECACHE_REQ_PREFETCH)) ||
		    (r->flags & ~(MOECACHE_REQ_DEMAND | MOECACHE_REQ_PREFETCH))) {
			fz_report(l, "read: bad request layer %u expert %u flags 0x%x pad %u",
				  r->layer, r->expert, r->flags, r->pad);
			continue;
		}
		idx = idx_of(&f->g, r->layer, r->expert);
		if (f->inflight[idx] && !f->shared)
			fz_report(l, "read: request for idx %u handed out twice", idx);
		f->inflight[idx] = 1;
	}
}

static void op_poll(struct fz_lane *l, struct fz_fd *f)
{
	struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
	int ret = poll(&pfd, 1, 0);

	if (ret < 0) {
		fz_report(l, "poll: %s", fz_errname(errno));
		return;
	}
	if (f->role == MOECACHE_ROLE_AGENT && !f->foreign) {
		if (pfd.revents & ~(POLLIN | POLLRDNORM))
			fz_report(l, "poll on the agent: revents 0x%x", pfd.revents);
	} else if (!(pfd.revents & POLLERR) || (pfd.revents & POLLIN)) {
		fz_report(l, "poll on a %s file: revents 0x%x, want POLLERR",
			  f->role ? "non-agent" : "unbound", pfd.revents);
	}
}

/* The map snapshot an agent op decides from and compares with. */
struct agent_view {
	uint32_t map[FZ_MAX_LIST * 8];
	uint32_t owner[256];
	bool ok;
};

static bool agent_usable(const struct fz_fd *f)
{
	return attached(f) && f->role == MOECACHE_ROLE_AGENT && !f->shared &&
	       f->g.n_idx <= FZ_MAX_LIST * 8 && f->g.n_slots <= 256;
}

static void agent_view(struct fz_lane *l, struct fz_fd *f, struct agent_view *v)
{
	v->ok = agent_usable(f) && fz_map_snapshot(l, f, v->map, v->owner);
}

/* Only the agent changes owner[] and map[]: a failed call must leave them. */
static void agent_unchanged(struct fz_lane *l, struct fz_fd *f, const struct agent_view *before,
			    const char *what)
{
	struct agent_view after;

	if (!before->ok)
		return;
	agent_view(l, f, &after);
	if (after.ok && (memcmp(before->map, after.map, f->g.n_idx * 4) ||
			 memcmp(before->owner, after.owner, f->g.n_slots * 4))) {
		if (fz_flush_overlap(l))
			l->excused++;
		else
			fz_report(l, "%s failed but changed the map or owner arrays", what);
	}
}

static bool is_filling(uint32_t own)
{
	return own != MOECACHE_NONE && (own & MOECACHE_OWNER_FILLING);
}

static bool is_resident(uint32_t own)
{
	return own != MOECACHE_NONE && !(own & MOECACHE_OWNER_FILLING);
}

/* Whether a fast region of the lane on f's pool holds slot: a pin, or garbage. */
static bool fast_pinned_any(const struct fz_lane *l, const struct fz_fd *f, uint32_t slot)
{
	unsigned int i;

	for (i = 0; i < FZ_MAX_FDS; i++) {
		const struct fz_fd *g = &l->fds[i];

		if (g->fast && same_pool(g, f) && slot < g->g.n_slots &&
		    __atomic_load_n(&g->fast[slot], __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* A file whose pins region the lane has mapped. */
static bool fast_usable(const struct fz_fd *f)
{
	return f->fast && f->fast_held && f->map;
}

/* Invariant 1 for fast pins: a slot the lane fast-pinned keeps its expert. */
void fz_fast_verify(struct fz_lane *l)
{
	unsigned int i;
	uint32_t s, own;

	for (i = 0; i < FZ_MAX_FDS; i++) {
		struct fz_fd *f = &l->fds[i];

		if (!fast_usable(f))
			continue;
		for (s = 0; s < f->g.n_slots; s++) {
			if (!f->fast_held[s])
				continue;
			own = __atomic_load_n(&map_arr(f, f->map->owner_off)[s], __ATOMIC_ACQUIRE);
			if (own != f->fast_idx[s])
				fz_report(l,
					  "pool %s: fast-pinned slot %u holds 0x%x, pinned for %u",
					  f->pool, s, own, f->fast_idx[s]);
		}
	}
}

static void op_evict(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_evict req;
	struct agent_view v;
	struct fz_expect e;
	uint32_t idx = MOECACHE_NONE, own = MOECACHE_NONE, i, s;
	bool only_free;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_AGENT);
	agent_view(l, f, &v);
	memset(&req, 0, sizeof(req));
	only_free = fz_chance(l, 1, 10);
	if (attached(f)) {
		req.slot = fz_below(l, f->g.n_slots);
		/* Prefer a free or resident slot: filling ones only refuse. */
		for (i = 0; v.ok && i < 4 && is_filling(v.owner[req.slot]); i++)
			req.slot = fz_below(l, f->g.n_slots);
		idx = fz_below(l, f->g.n_idx);
		if (f->inflight && fz_chance(l, 3, 4)) {
			s = fz_below(l, f->g.n_idx);
			for (i = 0; i < f->g.n_idx; i++)
				if (f->inflight[(s + i) % f->g.n_idx]) {
					idx = (s + i) % f->g.n_idx;
					break;
				}
		}
		req.layer = idx / f->g.n_local;
		req.expert = idx % f->g.n_local + f->g.expert_begin;
	}
	if (only_free) {
		req.layer = MOECACHE_NONE;
		req.expert = MOECACHE_NONE;
		idx = MOECACHE_NONE;
	}
	req.old_layer = (uint32_t)fz_rand(l);
	req.old_expert = (uint32_t)fz_rand(l);
	if (fz_chance(l, 1, 6)) {
		switch (fz_below(l, 5)) {
		case 0:
			req.slot = (attached(f) ? f->g.n_slots : 0) + fz_below(l, 1000);
			fz_defect(&e, "slot-out-of-range", EINVAL, 0);
			break;
		case 1:
			if (only_free) {
				req.expert = fz_below(l, 8);
				fz_defect(&e, "free-with-expert", EINVAL, 0);
			} else {
				req.layer = (attached(f) ? f->g.n_layers : 0) + fz_below(l, 10);
				fz_defect(&e, "layer-out-of-range", EINVAL, 0);
			}
			break;
		case 2:
			if (only_free)
				break;
			req.expert = attached(f) ? f->g.expert_end + fz_below(l, 10) : 1u << 30;
			fz_defect(&e, "expert-out-of-range", EINVAL, 0);
			break;
		case 3:
			/* Bit 0 is MOVE, which the model does not do. */
			req.flags = 2u << fz_below(l, 31);
			fz_defect(&e, "flags", EINVAL, 0);
			break;
		default:
			break;
		}
	}
	if (v.ok && req.slot < f->g.n_slots) {
		own = v.owner[req.slot];
		if (is_filling(own))
			fz_defect(&e, "slot-filling", EBUSY, 0);
		else if (is_resident(own) &&
			 (!exact(l) || pins_of(f, req.slot) || fast_pinned_any(l, f, req.slot)))
			fz_expect_err(&e, EBUSY);
		if (!only_free && idx < f->g.n_idx && req.layer < f->g.n_layers &&
		    req.expert >= f->g.expert_begin && req.expert < f->g.expert_end) {
			if (v.map[idx] != MOECACHE_NONE)
				fz_defect(&e, "target-resident", EEXIST, EBUSY, 0);
			for (s = 0; s < f->g.n_slots; s++)
				if (v.owner[s] == (MOECACHE_OWNER_FILLING | idx))
					fz_defect(&e, "target-filling", EEXIST, EBUSY, 0);
		}
	} else if (!v.ok && attached(f)) {
		fz_expect_err(&e, EBUSY);
		fz_expect_err(&e, EEXIST);
	}
	p = arg_ptr(l, &e, &req, sizeof(req), true, 5);
	ret = xioctl(f->fd, MOECACHE_IOC_EVICT, p);
	fz_trace(l, "EVICT fd %d slot %u -> (%u,%u) -> %ld (%s)", f->fd, req.slot, req.layer,
		 req.expert, ret, e.defects);
	if (!fz_check_result(l, &e, ret, "EVICT"))
		return;
	if (ret < 0) {
		if (ret == -EFAULT && p == l->cfg->ro)
			agent_unchanged(l, f, &v, "EVICT with a read-only argument (EFAULT)");
		else
			agent_unchanged(l, f, &v, "EVICT");
		/* If it took the slot anyway, the request is no longer in flight. */
		if (v.ok && idx < f->g.n_idx && req.slot < f->g.n_slots &&
		    map_arr(f, f->map->owner_off)[req.slot] == (MOECACHE_OWNER_FILLING | idx))
			f->inflight[idx] = 0;
		return;
	}
	/* Our own regions do not change during our call: exact with any number of lanes. */
	if (v.ok && req.slot < f->g.n_slots && is_resident(own) &&
	    fast_pinned_any(l, f, req.slot) && !fz_flush_overlap(l))
		fz_report(l, "EVICT took slot %u, which a fast pin of ours holds", req.slot);
	if (v.ok) {
		uint32_t ol = MOECACHE_NONE, oe = MOECACHE_NONE;

		if (is_resident(own)) {
			ol = own / f->g.n_local;
			oe = own % f->g.n_local + f->g.expert_begin;
		}
		if ((req.old_layer != ol || req.old_expert != oe) && fz_flush_overlap(l))
			l->excused++;
		else if (req.old_layer != ol || req.old_expert != oe)
			fz_report(l, "EVICT of slot %u returned old (%u,%u), the slot held (%u,%u)",
				  req.slot, req.old_layer, req.old_expert, ol, oe);
	}
	if (idx != MOECACHE_NONE && f->inflight)
		f->inflight[idx] = 0;
	fz_check_fd(l, f);
	if (f->map && req.slot < f->g.n_slots) {
		uint32_t now = map_arr(f, f->map->owner_off)[req.slot];
		uint32_t want = only_free ? MOECACHE_NONE : (MOECACHE_OWNER_FILLING | idx);

		if (now != want)
			fz_report(l, "after EVICT owner[%u] = 0x%x, want 0x%x", req.slot, now,
				  want);
	}
}

/* ---- fast pins ---- */

/* libmoecache's fast pin (lib/protocol/mc_fastpin.h) on one expert; returns whether it pinned. */
static bool fast_pin(struct fz_fd *f, uint32_t idx)
{
	const uint32_t *map = map_arr(f, f->map->map_off);
	uint32_t slot = mc_load_acquire_u32(&map[idx]), got;

	if (slot >= f->g.n_slots)
		return false;
	/*
	 * The lane's own garbage (op_fast) goes first: 0xffffffff + 1 would be
	 * no pin at all. Only where it holds nothing, so its count stays right.
	 */
	if (!f->fast_held[slot])
		__atomic_store_n(&f->fast[slot], 0, __ATOMIC_RELEASE);
	got = mc_fast_pin_one(f->fast, map, f->g.n_slots, idx);
	if (got == MOECACHE_NONE)
		return false;
	if (got != slot && !f->fast_held[got]) {
		/* Moved in between onto a slot that may hold garbage: not a pin to count on. */
		mc_fast_pin_put(f->fast, got);
		return false;
	}
	f->fast_held[got]++;
	f->fast_idx[got] = idx;
	return true;
}

/* A random slot whose held count is (or is not) zero, from a random start; n_slots if none. */
static uint32_t fast_pick_slot(struct fz_lane *l, const struct fz_fd *f, bool held)
{
	uint32_t start = fz_below(l, f->g.n_slots), i, s;

	for (i = 0; i < f->g.n_slots; i++) {
		s = (start + i) % f->g.n_slots;
		if ((f->fast_held[s] != 0) == held)
			return s;
	}
	return f->g.n_slots;
}

/* Pins, unpins, or writes garbage into a fast region; then checks every fast pin held. */
static void op_fast(struct fz_lane *l, struct fz_fd *f)
{
	static const uint32_t junk[] = {0, 0, 1, 2, 0x7fffffffu, 0x80000000u, 0xffffffffu};
	uint32_t idx, s, first;

	/* Any of the lane's files with a region will do: the next one from a random start. */
	first = fz_below(l, FZ_MAX_FDS);
	for (idx = 0; idx < FZ_MAX_FDS && !fast_usable(f); idx++)
		f = &l->fds[(first + idx) % FZ_MAX_FDS];
	if (!fast_usable(f))
		return;
	switch (fz_below(l, 8)) {
	case 0:
	case 1:
	case 2:
	case 3:
		idx = fz_below(l, f->g.n_idx);
		/* Mostly an expert that is resident now, so that pins contend with evictions. */
		if (fz_chance(l, 3, 4)) {
			uint32_t start = fz_below(l, f->g.n_slots), own;

			for (s = 0; s < f->g.n_slots; s++) {
				own = __atomic_load_n(
				    &map_arr(f, f->map->owner_off)[(start + s) % f->g.n_slots],
				    __ATOMIC_RELAXED);
				if (own < f->g.n_idx) {
					idx = own;
					break;
				}
			}
		}
		fz_trace(l, "fast pin fd %d idx %u -> %d", f->fd, idx, fast_pin(f, idx));
		break;
	case 4:
	case 5:
		s = fast_pick_slot(l, f, true);
		if (s == f->g.n_slots)
			break;
		mc_fast_pin_put(f->fast, s);
		f->fast_held[s]--;
		fz_trace(l, "fast unpin fd %d slot %u", f->fd, s);
		break;
	default:
		/*
		 * Hostile client: garbage in its own region, deliberately not the
		 * protocol; only where the lane holds nothing, so that its pins stay
		 * what it counted.
		 */
		s = fast_pick_slot(l, f, false);
		if (s == f->g.n_slots)
			break;
		idx = fz_chance(l, 1, 4) ? (uint32_t)fz_rand(l) : junk[fz_below(l, 7)];
		__atomic_store_n(&f->fast[s], idx, __ATOMIC_RELEASE);
		fz_trace(l, "fast garbage fd %d slot %u = 0x%x", f->fd, s, idx);
		break;
	}
	fz_fast_verify(l);
}

/* REPORT: entries of any layer, checked all or nothing. */
static void op_report(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_access acc[FZ_MAX_LIST];
	uint32_t before[FZ_MAX_LIST], count, n, i, idx;
	const uint32_t *access = NULL;
	struct moecache_report req;
	bool check_state;
	struct fz_expect e;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_CLIENT);
	memset(&req, 0, sizeof(req));
	n = 1 + fz_below(l, attached(f) ? 24 : 1);
	for (i = 0; i < n; i++) {
		acc[i].layer = attached(f) ? fz_below(l, f->g.n_layers) : 0;
		acc[i].expert = attached(f) ? f->g.expert_begin + fz_below(l, f->g.n_local) : 0;
	}
	count = n;
	switch (attached(f) ? fz_below(l, 16) : 15) {
	case 0:
		count = 0;
		fz_defect(&e, "count-zero", EINVAL, 0);
		break;
	case 1:
		count = l->cfg->info.max_batch + 1 + fz_below(l, 1000);
		fz_defect(&e, "count-too-big", E2BIG, 0);
		break;
	case 2:
		acc[fz_below(l, n)].layer = f->g.n_layers + fz_below(l, 1000);
		fz_defect(&e, "layer-out-of-range", EINVAL, 0);
		break;
	case 3:
		acc[fz_below(l, n)].expert = fz_chance(l, 1, 2) && f->g.expert_begin
						 ? f->g.expert_begin - 1
						 : f->g.expert_end + fz_below(l, 1000);
		fz_defect(&e, "expert-out-of-range", EINVAL, 0);
		break;
	case 4:
		req.flags = 1u << fz_below(l, 32);
		fz_defect(&e, "flags", EINVAL, 0);
		break;
	default:
		break;
	}
	req.count = count;
	req.accesses = list_ptr(l, &e, acc, (size_t)n * sizeof(acc[0]), 4, false);
	p = arg_ptr(l, &e, &req, sizeof(req), false, 5);
	check_state = exact(l) && attached(f) && f->role == MOECACHE_ROLE_CLIENT && !f->shared;
	if (check_state) {
		access = map_arr(f, f->map->access_off);
		for (i = 0; i < n; i++)
			before[i] = access[idx_of(&f->g, acc[i].layer, acc[i].expert) % f->g.n_idx];
	}
	ret = xioctl(f->fd, MOECACHE_IOC_REPORT, p);
	fz_trace(l, "REPORT fd %d count %u -> %ld (%s)", f->fd, count, ret, e.defects);
	if (!fz_check_result(l, &e, ret, "REPORT") || !check_state)
		return;
	/* Counted once per entry on success; not at all on failure. */
	for (i = 0; i < n; i++) {
		uint32_t want = before[i], mult = 0;

		idx = idx_of(&f->g, acc[i].layer, acc[i].expert) % f->g.n_idx;
		for (uint32_t j = 0; j < n && ret == 0; j++)
			mult += idx_of(&f->g, acc[j].layer, acc[j].expert) % f->g.n_idx == idx;
		want += mult;
		if (access[idx] != want) {
			fz_report(l, "REPORT %s: access[%u] = %u, want %u", ret ? "failed" : "done",
				  idx, access[idx], want);
			break;
		}
	}
}

/* A COMMIT or ABORT batch from the filling slots (and, for ABORT, requests in flight). */
static void op_fill_batch(struct fz_lane *l, struct fz_fd *f, bool commit)
{
	struct moecache_fill fills[FZ_MAX_LIST];
	struct moecache_fill_batch b;
	struct agent_view v;
	struct fz_expect e;
	uint32_t n = 0, count, s, i, idx, start;
	const char *name = commit ? "COMMIT" : "ABORT";
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_AGENT);
	agent_view(l, f, &v);
	memset(&b, 0, sizeof(b));
	memset(fills, 0, sizeof(fills));
	if (v.ok) {
		start = fz_below(l, f->g.n_slots);
		for (i = 0; i < f->g.n_slots && n < 16; i++) {
			s = (start + i) % f->g.n_slots;
			if (!is_filling(v.owner[s]) || fz_chance(l, 1, 4))
				continue;
			idx = v.owner[s] & MOECACHE_OWNER_IDX_MASK;
			fills[n].slot = s;
			fills[n].layer = idx / f->g.n_local;
			fills[n].expert = idx % f->g.n_local + f->g.expert_begin;
			fills[n].flags = fz_chance(l, 1, 3) ? MOECACHE_FILL_PREFETCH : 0;
			n++;
		}
		if (!commit) {
			start = fz_below(l, f->g.n_idx);
			for (i = 0; i < f->g.n_idx && n < 20; i++) {
				idx = (start + i) % f->g.n_idx;
				if (!f->inflight[idx] || fz_chance(l, 1, 2))
					continue;
				fills[n].slot = MOECACHE_NONE;
				fills[n].layer = idx / f->g.n_local;
				fills[n].expert = idx % f->g.n_local + f->g.expert_begin;
				n++;
			}
		}
	}
	count = n;
	if (!n || fz_chance(l, 1, 5)) {
		switch (fz_below(l, 8)) {
		case 0:
			count = 0;
			fz_defect(&e, "count-0", EINVAL, 0);
			break;
		case 1:
			count = l->cfg->info.max_batch + 1 + fz_below(l, 2) * 0x7fffffff;
			fz_defect(&e, "count-over-max-batch", E2BIG, 0);
			break;
		case 2:
			if (!n)
				goto not_filling;
			fills[count] = fills[fz_below(l, n)];
			count++;
			fz_defect(&e, "repeated-fill", EINVAL, 0);
			break;
		case 3:
			b.flags = 1u << fz_below(l, 32);
			fz_defect(&e, "flags", EINVAL, 0);
			break;
		case 4:
			fills[count].slot = fz_below(l, 1000);
			fills[count].layer = (attached(f) ? f->g.n_layers : 0) + fz_below(l, 5);
			count++;
			fz_defect(&e, "layer-out-of-range", EINVAL, 0);
			break;
		case 5:
			if (!n)
				goto not_filling;
			fills[fz_below(l, n)].flags |= 2u << fz_below(l, 30);
			fz_defect(&e, "fill-flags", EINVAL, 0);
			break;
		case 6:
			if (!n)
				goto not_filling;
			i = fz_below(l, n);
			if (fills[i].slot == MOECACHE_NONE || f->g.n_local < 2)
				goto not_filling;
			fills[i].expert = f->g.expert_begin +
					  (fills[i].expert - f->g.expert_begin + 1) % f->g.n_local;
			fz_defect(&e, "wrong-expert-for-slot", EINVAL, 0);
			break;
		default:
		not_filling:
			if (!attached(f) || (f->role == MOECACHE_ROLE_AGENT && !v.ok))
				break;
			/* A slot (or, for ABORT, an expert) that is not being filled. */
			s = fz_below(l, f->g.n_slots);
			if (v.ok && is_filling(v.owner[s]))
				break;
			idx = fz_below(l, f->g.n_idx);
			fills[count].slot = s;
			if (!commit && fz_chance(l, 1, 2)) {
				if (!f->inflight || f->inflight[idx])
					break;
				fills[count].slot = MOECACHE_NONE;
			} else if (commit && fz_chance(l, 1, 6)) {
				fills[count].slot = MOECACHE_NONE;
			}
			fills[count].layer = idx / f->g.n_local;
			fills[count].expert = idx % f->g.n_local + f->g.expert_begin;
			count++;
			fz_defect(&e, "not-filling", EINVAL, 0);
		}
	}
	if (!count && !e.defects[0])
		fz_defect(&e, "count-0", EINVAL, 0);
	b.count = count;
	b.fills = list_ptr(l, &e, fills,
			   (size_t)(count && count < FZ_MAX_LIST ? count : 1) * sizeof(fills[0]), 4,
			   false);
	p = arg_ptr(l, &e, &b, sizeof(b), false, 4);
	if (f->shared)
		fz_expect_err(&e, EINVAL);
	ret = xioctl(f->fd, commit ? MOECACHE_IOC_COMMIT : MOECACHE_IOC_ABORT, p);
	fz_trace(l, "%s fd %d count %u -> %ld (%s)", name, f->fd, count, ret, e.defects);
	if (!fz_check_result(l, &e, ret, name))
		return;
	if (ret < 0) {
		agent_unchanged(l, f, &v, name);
		return;
	}
	if (!v.ok)
		return;
	for (i = 0; i < count; i++) {
		idx = idx_of(&f->g, fills[i].layer, fills[i].expert);
		if (fills[i].slot == MOECACHE_NONE) {
			f->inflight[idx] = 0;
			continue;
		}
		s = fills[i].slot;
		if (commit &&
		    (map_arr(f, f->map->map_off)[idx] != s ||
		     map_arr(f, f->map->owner_off)[s] != idx) &&
		    fz_flush_overlap(l))
			l->excused++;
		else if (commit && (map_arr(f, f->map->map_off)[idx] != s ||
				    map_arr(f, f->map->owner_off)[s] != idx))
			fz_report(l, "after COMMIT of idx %u into slot %u: map 0x%x owner 0x%x",
				  idx, s, map_arr(f, f->map->map_off)[idx],
				  map_arr(f, f->map->owner_off)[s]);
		if (!commit && map_arr(f, f->map->owner_off)[s] != MOECACHE_NONE)
			fz_report(l, "after ABORT of slot %u: owner 0x%x", s,
				  map_arr(f, f->map->owner_off)[s]);
	}
	fz_check_fd(l, f);
}

static void op_bank_set(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_bank req;
	struct agent_view v;
	struct fz_expect e;
	bool replacing;
	uint64_t need;
	uint32_t s;
	int memfd = -1;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_AGENT);
	agent_view(l, f, &v);
	memset(&req, 0, sizeof(req));
	req.backend = MOECACHE_BACKEND_CPU + (fz_chance(l, 1, 8) ? 1 + fz_below(l, 2) : 0);
	req.slot_stride = attached(f) ? f->g.expert_bytes : (uint64_t)l->cfg->page;
	if (fz_chance(l, 1, 4))
		req.slot_stride += (uint64_t)l->cfg->page * fz_below(l, 3);
	need = req.slot_stride * (attached(f) ? f->g.n_slots : 1);
	req.bank_bytes = need + (fz_chance(l, 1, 4) ? l->cfg->page : 0);
	req.device = fz_below(l, 4);
	memfd = memfd_create("moecache-fuzz-bank", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, (off_t)req.bank_bytes) < 0) {
		fz_report(l, "memfd for a bank: %s", fz_errname(errno));
		if (memfd >= 0)
			close(memfd);
		return;
	}
	req.fd = memfd;
	if (fz_chance(l, 1, 4)) {
		switch (fz_below(l, 8)) {
		case 0:
			req.fd = fz_chance(l, 1, 2) ? -1 : (int)(1000 + fz_below(l, 1000));
			fz_defect(&e, "bad-fd", EBADF, 0);
			break;
		case 1:
			req.backend =
			    fz_chance(l, 1, 2) ? MOECACHE_BACKEND_NONE : 4 + fz_below(l, 100);
			fz_defect(&e, "bad-backend", EINVAL, 0);
			break;
		case 2:
			if (req.slot_stride < (uint64_t)l->cfg->page)
				break;
			req.slot_stride = (attached(f) ? f->g.expert_bytes : 4096) - 1;
			fz_defect(&e, "stride-below-expert-bytes", EINVAL, 0);
			break;
		case 3:
			req.bank_bytes = need - 1;
			fz_defect(&e, "bank-too-small", EINVAL, 0);
			break;
		case 4:
			if (!attached(f) || f->g.n_slots < 2)
				break;
			/* n_slots * slot_stride wraps past 2^64. */
			req.slot_stride = ~0ull / f->g.n_slots + 1 + fz_below(l, 4096);
			req.bank_bytes = ~0ull;
			fz_defect(&e, "stride-overflow", EINVAL, 0);
			break;
		case 5:
			req.flags = 1u << fz_below(l, 32);
			fz_defect(&e, "flags", EINVAL, 0);
			break;
		case 6:
			req.index = fz_rand(l) | 1;
			fz_defect(&e, "bank-index", EINVAL, 0);
			break;
		default:
			break;
		}
	}
	/* A ROCm bank must be a dma-buf: a memfd is not one. */
	if (req.backend == MOECACHE_BACKEND_ROCM && req.fd == memfd)
		fz_defect(&e, "memfd-as-dma-buf", EINVAL, 0);
	/* Only resident slots can be pinned; with one lane, pins[] is exact. */
	if (attached(f) && !v.ok)
		fz_expect_err(&e, EBUSY);
	for (s = 0; v.ok && s < f->g.n_slots; s++)
		if (exact(l) ? pins_of(f, s) != 0 ||
				   (is_resident(v.owner[s]) && fast_pinned_any(l, f, s))
			     : is_resident(v.owner[s]))
			fz_expect_err(&e, EBUSY);
	p = arg_ptr(l, &e, &req, sizeof(req), false, 4);
	replacing = attached(f) && (f->map->flags & MOECACHE_POOL_BANK);
	ret = xioctl(f->fd, MOECACHE_IOC_BANK_SET, p);
	fz_trace(l, "BANK_SET fd %d stride %llu bytes %llu -> %ld (%s)", f->fd,
		 (unsigned long long)req.slot_stride, (unsigned long long)req.bank_bytes, ret,
		 e.defects);
	if (!fz_check_result(l, &e, ret, "BANK_SET") || ret < 0) {
		if (ret < 0)
			agent_unchanged(l, f, &v, "BANK_SET");
		close(memfd);
		return;
	}
	/* The driver holds its own reference: ours may go at once. */
	if (fz_chance(l, 1, 2)) {
		close(memfd);
	} else {
		if (f->bank_fd >= 0)
			close(f->bank_fd);
		f->bank_fd = memfd;
	}
	/* docs/abi.md: replacing a bank clears the residency. */
	if (v.ok && replacing) {
		agent_view(l, f, &v);
		for (s = 0; v.ok && s < f->g.n_slots; s++)
			if (v.owner[s] != MOECACHE_NONE)
				fz_report(l, "after BANK_SET owner[%u] = 0x%x, want free", s,
					  v.owner[s]);
	}
	if (f->map && !(f->map->flags & MOECACHE_POOL_BANK))
		fz_report(l, "after BANK_SET MOECACHE_POOL_BANK is clear");
	fz_check_fd(l, f);
	fz_fast_verify(l);
}

static void op_bank_get(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_bank req;
	struct fz_expect e;
	struct stat st;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_NONE, MOECACHE_ROLE_NONE);
	fz_expect_err(&e, ENODATA);
	memset(&req, 0x5a, sizeof(req));
	req.index = 0; /* the fuzzed pools have one bank */
	req.flags = 0; /* none defined: must be 0 */
	p = arg_ptr(l, &e, &req, sizeof(req), true, 8);
	ret = xioctl(f->fd, MOECACHE_IOC_BANK_GET, p);
	fz_trace(l, "BANK_GET fd %d -> %ld fd %d", f->fd, ret, ret == 0 ? req.fd : -1);
	if (!fz_check_result(l, &e, ret, "BANK_GET") || ret < 0)
		return;
	if (req.fd < 0 || fstat(req.fd, &st) < 0) {
		fz_report(l, "BANK_GET returned fd %d that is not open", req.fd);
		return;
	}
	if (!(fcntl(req.fd, F_GETFD) & FD_CLOEXEC))
		fz_report(l, "BANK_GET returned fd %d without O_CLOEXEC", req.fd);
	if (req.backend < MOECACHE_BACKEND_CPU || req.backend > MOECACHE_BACKEND_ROCM ||
	    req.slot_stride < f->g.expert_bytes ||
	    req.slot_stride * f->g.n_slots > req.bank_bytes || req.flags)
		fz_report(l,
			  "BANK_GET: inconsistent descriptor (backend %u stride %llu bytes %llu)",
			  req.backend, (unsigned long long)req.slot_stride,
			  (unsigned long long)req.bank_bytes);
	close(req.fd);
}

static void op_load(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_load req;
	struct fz_expect e;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_AGENT, MOECACHE_ROLE_LOADER);
	memset(&req, 0, sizeof(req));
	req.op = fz_chance(l, 1, 2) ? MOECACHE_LOAD_BEGIN : MOECACHE_LOAD_DONE;
	if (fz_chance(l, 1, 6)) {
		if (fz_chance(l, 1, 2)) {
			req.op = fz_chance(l, 1, 2) ? 0 : 3 + fz_below(l, 1000);
			fz_defect(&e, "bad-op", EINVAL, 0);
		} else {
			req.flags = 1u << fz_below(l, 32);
			fz_defect(&e, "flags", EINVAL, 0);
		}
	}
	p = arg_ptr(l, &e, &req, sizeof(req), false, 5);
	ret = xioctl(f->fd, MOECACHE_IOC_LOAD, p);
	fz_trace(l, "LOAD fd %d op %u -> %ld (%s)", f->fd, req.op, ret, e.defects);
	if (!fz_check_result(l, &e, ret, "LOAD") || ret < 0 || !exact(l) || !f->map)
		return;
	if (!!(f->map->flags & MOECACHE_POOL_LOADED) != (req.op == MOECACHE_LOAD_DONE))
		fz_report(l, "after LOAD op %u the LOADED flag is %s", req.op,
			  f->map->flags & MOECACHE_POOL_LOADED ? "set" : "clear");
}

static void op_stats(struct fz_lane *l, struct fz_fd *f)
{
	struct moecache_stats st;
	struct fz_expect e;
	uint32_t layer = MOECACHE_NONE, clients = 0, inflight = 0, pins = 0, i, s;
	bool whole = exact(l) && attached(f);
	const struct fz_fd *agent;
	long ret;
	void *p;

	fz_expect_init(&e, true);
	gate(&e, f, MOECACHE_ROLE_NONE, MOECACHE_ROLE_NONE);
	memset(&st, 0x77, sizeof(st));
	st.flags = 0;
	/* pad and reserved must be zero; the rest is out (bank: below). */
	st.pad = 0;
	memset(st.reserved, 0, sizeof(st.reserved));
	if (attached(f) && fz_chance(l, 1, 2))
		layer = fz_below(l, f->g.n_layers);
	if (fz_chance(l, 1, 12)) {
		layer = (attached(f) ? f->g.n_layers : 0) + fz_below(l, 100);
		fz_defect(&e, "layer-out-of-range", EINVAL, 0);
	} else if (fz_chance(l, 1, 12)) {
		/* Bit 0 (STATS_BANK) is a defect too: bank 0x77777777 is past the banks. */
		st.flags = 1u << fz_below(l, 32);
		fz_defect(&e, "flags", EINVAL, 0);
	}
	/* bank is read with STATS_BANK only, and must be 0 without it. */
	if (!(st.flags & MOECACHE_STATS_BANK))
		st.bank = 0;
	st.layer = layer;
	p = arg_ptr(l, &e, &st, sizeof(st), true, 5);
	ret = xioctl(f->fd, MOECACHE_IOC_STATS, p);
	fz_trace(l, "STATS fd %d layer 0x%x -> %ld (%s)", f->fd, layer, ret, e.defects);
	if (!fz_check_result(l, &e, ret, "STATS") || ret < 0)
		return;
	if (st.layer != layer || st.resident + st.filling > f->g.n_slots ||
	    st.pinned_slots > st.resident || st.pins < st.pinned_slots ||
	    st.n_clients == 0xffffffffu || st.waits > st.misses + st.hits)
		fz_report(
		    l,
		    "STATS: inconsistent (layer 0x%x resident %u filling %u pinned %u pins %u "
		    "waits %llu)",
		    st.layer, st.resident, st.filling, st.pinned_slots, st.pins,
		    (unsigned long long)st.waits);
	if (!whole)
		return;
	for (i = 0; i < FZ_MAX_FDS; i++) {
		const struct fz_fd *o = &l->fds[i];

		if (!same_pool(o, f))
			continue;
		if (o->shared)
			return;
		if (o->role == MOECACHE_ROLE_CLIENT) {
			clients++;
			for (s = 0; s < o->g.n_slots; s++)
				pins += o->pins[s];
		}
	}
	agent = lane_agent(l, f);
	if (agent)
		for (i = 0; i < agent->g.n_idx; i++)
			inflight += agent->inflight[i];
	if (st.n_clients != clients || st.pins != pins || (agent && st.inflight != inflight) ||
	    (!agent && st.agent_pid) || (!agent && st.inflight))
		fz_report(l,
			  "STATS: %u clients, %u pins, %u in flight, agent pid %u; the lane has "
			  "%u, %u, %u, %s",
			  st.n_clients, st.pins, st.inflight, st.agent_pid, clients, pins, inflight,
			  agent ? "an agent" : "no agent");
}

/* ---- mmap ---- */

static struct fz_mapping *free_mapping(struct fz_lane *l)
{
	unsigned int i;
	struct fz_mapping *m;

	for (i = 0; i < FZ_MAX_MAPS; i++)
		if (!l->maps[i].addr)
			return &l->maps[i];
	m = &l->maps[fz_below(l, FZ_MAX_MAPS)];
	munmap(m->addr, m->len);
	memset(m, 0, sizeof(*m));
	return m;
}

static void op_mmap(struct fz_lane *l, struct fz_fd *f)
{
	const struct fz_config *c = l->cfg;
	bool map_region = fz_chance(l, 1, 2);
	uint64_t base, size, pages, off_pages, len_pages;
	int prot = PROT_READ, flags = MAP_SHARED;
	struct fz_expect e;
	struct fz_mapping *m;
	void *addr;
	long ret;

	fz_expect_init(&e, true);
	if (f->role == MOECACHE_ROLE_NONE)
		fz_defect(&e, "unbound", ENOTCONN, 0);
	if (attached(f)) {
		base = map_region ? f->g.off.map_offset : f->g.off.host_offset;
		size = map_region ? f->g.off.map_size : f->g.off.host_size;
	} else {
		base = 0;
		size = (uint64_t)c->page;
	}
	pages = size / c->page;
	off_pages = fz_below(l, (uint32_t)pages);
	if (fz_chance(l, 1, 2))
		off_pages = 0;
	len_pages = 1 + fz_below(l, (uint32_t)(pages - off_pages));
	if (fz_chance(l, 1, 2))
		len_pages = pages - off_pages;
	if (!map_region && f->role != MOECACHE_ROLE_CLIENT && f->role != MOECACHE_ROLE_NONE &&
	    !f->rdonly && fz_chance(l, 1, 2))
		prot |= PROT_WRITE;
	if (fz_chance(l, 1, 4)) {
		switch (fz_below(l, 7)) {
		case 0:
			flags = MAP_PRIVATE;
			fz_defect(&e, "map-private", EINVAL, 0);
			break;
		case 1:
			prot |= PROT_WRITE;
			if (f->rdonly)
				fz_defect(&e, "write-on-rdonly-fd", EACCES, 0);
			if (map_region || f->role == MOECACHE_ROLE_CLIENT)
				fz_defect(&e, "write-on-read-only-region", EPERM, 0);
			break;
		case 2:
			off_pages = pages + fz_below(l, 4);
			len_pages = 1;
			fz_defect(&e, "offset-past-region", EINVAL, 0);
			break;
		case 3:
			len_pages = pages - off_pages + 1 + fz_below(l, 4);
			fz_defect(&e, "length-past-region", EINVAL, 0);
			break;
		case 4:
			if (!attached(f) || !map_region)
				break;
			/* Between the map region's end and the host region. */
			off_pages = pages + 1 + fz_below(l, 1000);
			if (base + (off_pages + 1) * c->page > f->g.off.host_offset)
				break;
			len_pages = 1;
			fz_defect(&e, "offset-in-gap", EINVAL, 0);
			break;
		case 5:
			len_pages = 0;
			fz_defect(&e, "zero-length", EINVAL, 0);
			break;
		default:
			break;
		}
	}
	if (prot & PROT_WRITE && f->rdonly && !strstr(e.defects, "rdonly"))
		fz_defect(&e, "write-on-rdonly-fd", EACCES, 0);
	addr = mmap(NULL, len_pages * c->page, prot, flags, f->fd,
		    (off_t)(base + off_pages * c->page));
	ret = addr == MAP_FAILED ? -errno : 0;
	fz_trace(l, "mmap fd %d %s off %llu pages %llu prot %d flags %d -> %ld (%s)", f->fd,
		 map_region ? "map" : "host", (unsigned long long)off_pages,
		 (unsigned long long)len_pages, prot, flags, ret, e.defects);
	if (!fz_check_result(l, &e, ret, "mmap") || ret < 0) {
		if (ret == 0)
			munmap(addr, len_pages * c->page);
		return;
	}
	m = free_mapping(l);
	m->gen = f->gen;
	m->addr = addr;
	m->len = len_pages * c->page;
	m->prot = prot;
	m->map_region = map_region;
	m->may_write = !map_region && f->role != MOECACHE_ROLE_CLIENT && !f->rdonly;
	m->from_zero = map_region && off_pages == 0;
}

static void op_munmap(struct fz_lane *l)
{
	struct fz_mapping *m = &l->maps[fz_below(l, FZ_MAX_MAPS)];
	long page = l->cfg->page;

	if (!m->addr)
		return;
	if (m->len > (size_t)page && fz_chance(l, 1, 3)) {
		/* Trim the first page; what is left stays usable. */
		if (munmap(m->addr, page) < 0)
			fz_report(l, "partial munmap: %s", fz_errname(errno));
		m->addr = (char *)m->addr + page;
		m->len -= page;
		m->from_zero = false;
		return;
	}
	if (munmap(m->addr, m->len) < 0)
		fz_report(l, "munmap: %s", fz_errname(errno));
	memset(m, 0, sizeof(*m));
}

static void op_mprotect(struct fz_lane *l)
{
	struct fz_mapping *m = &l->maps[fz_below(l, FZ_MAX_MAPS)];
	int prot;
	long ret;

	if (!m->addr)
		return;
	switch (fz_below(l, 3)) {
	case 0:
		prot = PROT_READ | PROT_WRITE;
		break;
	case 1:
		prot = PROT_NONE;
		break;
	default:
		prot = PROT_READ;
	}
	ret = mprotect(m->addr, m->len, prot) < 0 ? -errno : 0;
	if (prot & PROT_WRITE) {
		if (m->may_write ? ret != 0 : ret != -EACCES)
			fz_report(l, "mprotect(PROT_WRITE) of a %s %s mapping: %s",
				  m->may_write ? "writable" : "read-only",
				  m->map_region ? "map" : "host", fz_errname((int)-ret));
	} else if (ret) {
		fz_report(l, "mprotect(%d): %s", prot, fz_errname((int)-ret));
	}
	if (ret == 0)
		m->prot = prot;
}

static void op_touch(struct fz_lane *l)
{
	struct fz_mapping *m = &l->maps[fz_below(l, FZ_MAX_MAPS)];
	volatile uint8_t *p;
	size_t off;
	uint8_t sum = 0;

	if (!m->addr || !(m->prot & PROT_READ))
		return;
	p = m->addr;
	for (off = 0; off < m->len; off += l->cfg->page)
		sum += p[off];
	if (m->from_zero &&
	    ((const struct moecache_map_header *)m->addr)->magic != MOECACHE_MAP_MAGIC)
		fz_report(l, "a map-region mapping lost its magic");
	if (m->prot & PROT_WRITE)
		p[fz_below(l, (uint32_t)m->len)] = sum;
}

/* ---- ioctl numbers that are not the ABI's ---- */

static const unsigned long abi_cmds[] = {
    MOECACHE_IOC_GET_INFO,	  MOECACHE_IOC_NOP,	 MOECACHE_IOC_POOL_CREATE,
    MOECACHE_IOC_POOL_DESTROY,	  MOECACHE_IOC_ATTACH,	 MOECACHE_IOC_ACQUIRE,
    MOECACHE_IOC_RELEASE,	  MOECACHE_IOC_PREFETCH, MOECACHE_IOC_EVICT,
    MOECACHE_IOC_COMMIT,	  MOECACHE_IOC_ABORT,	 MOECACHE_IOC_BANK_SET,
    MOECACHE_IOC_BANK_GET,	  MOECACHE_IOC_LOAD,	 MOECACHE_IOC_STATS,
    MOECACHE_IOC_ACQUIRE_RELEASE, MOECACHE_IOC_REPORT,
};

static void op_bad_ioctl(struct fz_lane *l, struct fz_fd *f)
{
	const size_t n_cmds = sizeof(abi_cmds) / sizeof(abi_cmds[0]);
	/* Without fast pins, draw as the fuzzer did before REPORT was last in the list. */
	const size_t n_draw = l->cfg->no_fast_pins ? n_cmds - 1 : n_cmds;
	unsigned long cmd, base;
	unsigned int dir, size, nr, type;
	long ret, want;
	size_t i;

	do {
		base = abi_cmds[fz_below(l, (uint32_t)n_draw)];
		dir = _IOC_DIR(base);
		size = _IOC_SIZE(base);
		nr = _IOC_NR(base);
		type = _IOC_TYPE(base);
		switch (fz_below(l, 5)) {
		case 0: /* the size one struct grew or shrank by */
			size = size + 1 + fz_below(l, 64);
			if (fz_chance(l, 1, 2) && _IOC_SIZE(base) > 8)
				size = _IOC_SIZE(base) - 1 - fz_below(l, 8);
			break;
		case 1:
			dir = fz_below(l, 4);
			break;
		case 2:
			nr = 0x0f + fz_below(l, 0xf1);
			break;
		case 3:
			/* Not the types the VFS answers itself (FIFREEZE, FIOCLEX, FICLONE...). */
			do
				type = 1 + fz_below(l, 255);
			while (type == 'T' || type == 'X' || type == 'f' || type == 0x94);
			break;
		default:
			size = fz_below(l, 1u << 14);
			dir = fz_below(l, 4);
			nr = fz_below(l, 0x20);
		}
		cmd = _IOC(dir, type, nr, size);
		for (i = 0; i < n_cmds && abi_cmds[i] != cmd; i++)
			;
	} while (i < n_cmds);
	memset(l->cfg->rw, 0, (size_t)l->cfg->page);
	/*
	 * A known command with another size (its size field): a shorter
	 * struct is EINVAL; a longer one with a byte set past the known one
	 * E2BIG. Only NOP, which takes nothing, is another command then.
	 */
	want = -ENOTTY;
	for (i = 0; i < n_cmds; i++) {
		base = abi_cmds[i];
		if (type != _IOC_TYPE(base) || nr != _IOC_NR(base) || dir != _IOC_DIR(base) ||
		    !_IOC_SIZE(base))
			continue;
		if (size < _IOC_SIZE(base)) {
			want = -EINVAL;
		} else if (_IOC_SIZE(base) < (size_t)l->cfg->page) {
			((unsigned char *)l->cfg->rw)[_IOC_SIZE(base)] = 1;
			want = -E2BIG;
		}
	}
	ret = xioctl(f->fd, cmd, l->cfg->rw);
	fz_trace(l, "ioctl 0x%lx -> %ld", cmd, ret);
	if (ret != want)
		fz_report(l, "ioctl 0x%lx (dir %u type 0x%x nr 0x%x size %u) returned %s, want %s",
			  cmd, dir, type, nr, size, fz_errname((int)-ret), fz_errname((int)-want));
}

/* ---- fork ---- */

void fz_lane_close_all(struct fz_lane *l)
{
	unsigned int i;

	for (i = 0; i < FZ_MAX_FDS; i++)
		if (l->fds[i].fd >= 0) {
			close(l->fds[i].fd);
			fd_forget(&l->fds[i]);
		}
	for (i = 0; i < FZ_MAX_MAPS; i++)
		if (l->maps[i].addr) {
			munmap(l->maps[i].addr, l->maps[i].len);
			memset(&l->maps[i], 0, sizeof(l->maps[i]));
		}
	fz_netlink_close(l);
}

static void run_one(struct fz_lane *l);

/*
 * A child shares the lane's files (their pins and requests are then known to
 * neither), runs a few operations of its own and exits or is killed.
 */
static void op_fork(struct fz_lane *l, uint64_t *budget)
{
	uint64_t child_ops = 1 + fz_below(l, 40), stream = fz_rand(l), i;
	unsigned int how = fz_below(l, 3);
	int status;
	pid_t pid;

	/* The fork itself is one operation of the budget. */
	if (child_ops + 1 > *budget)
		child_ops = *budget > 1 ? *budget - 1 : 0;
	for (i = 0; i < FZ_MAX_FDS; i++)
		if (l->fds[i].fd >= 0 && l->fds[i].role != MOECACHE_ROLE_NONE)
			l->fds[i].shared = true;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fz_report(l, "fork: %s", fz_errname(errno));
		return;
	}
	if (pid == 0) {
		l->child = true;
		l->reports = 0;
		fz_rng_seed(l, l->cfg->seed, stream);
		/* An unbound file the child attached would be attached in the parent too. */
		for (i = 0; i < FZ_MAX_FDS; i++)
			if (l->fds[i].fd >= 0 && l->fds[i].role == MOECACHE_ROLE_NONE) {
				close(l->fds[i].fd);
				fd_forget(&l->fds[i]);
			}
		/* Pins regions are not inherited (VM_DONTCOPY): the parent's pins stay its own. */
		for (i = 0; i < FZ_MAX_FDS; i++) {
			struct fz_fd *f = &l->fds[i];

			/* The agent role stays with the parent's process. */
			f->foreign = f->role == MOECACHE_ROLE_AGENT;
			f->fast = NULL;
			free(f->fast_held);
			free(f->fast_idx);
			f->fast_held = NULL;
			f->fast_idx = NULL;
		}
		for (i = 0; i < child_ops; i++) {
			l->op_no++;
			run_one(l);
		}
		if (how == 0)
			raise(SIGKILL);
		if (how == 1)
			fz_lane_close_all(l);
		_exit(l->reports ? 1 : 0);
	}
	*budget -= child_ops;
	l->op_no += child_ops;
	l->child_ops += child_ops;
	if (waitpid(pid, &status, 0) < 0) {
		fz_report(l, "waitpid: %s", fz_errname(errno));
		return;
	}
	/* Whatever the child did with the same files, our fast pins held. */
	fz_fast_verify(l);
	if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
		fz_report(l, "child died of signal %d", WTERMSIG(status));
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		l->reports++;
}

/* ---- the loop ---- */

/*
 * Without netlink the draws are those of the fuzzer before it had netlink,
 * so that the regression seeds keep the sequences they had.
 */
static unsigned int op_weight(const struct fz_lane *l, unsigned int op)
{
	if (op == OP_NETLINK && l->cfg->no_netlink)
		return 0;
	if ((op == OP_FAST || op == OP_REPORT) && l->cfg->no_fast_pins)
		return 0;
	return op_table[op].weight;
}

static enum fz_op pick_op(struct fz_lane *l)
{
	unsigned int i, r, total = 0;

	for (i = 0; i < OP_NR; i++)
		total += op_weight(l, i);
	r = fz_below(l, total);
	for (i = 0; i < OP_NR; i++) {
		if (r < op_weight(l, i))
			return (enum fz_op)i;
		r -= op_weight(l, i);
	}
	return OP_NOP;
}

static uint64_t fork_budget;

static void run_one(struct fz_lane *l)
{
	enum fz_op op = pick_op(l);
	struct fz_fd *f;

	if (op == OP_FORK && (l->child || !fork_budget))
		op = OP_NOP;
	l->flush_start = __atomic_load_n(l->cfg->flush_gen, __ATOMIC_ACQUIRE);
	l->op_name = op_table[op].name;
	l->cur_op = op;
	l->counts[op]++;
	switch (op) {
	case OP_OPEN:
		op_open(l);
		return;
	case OP_CLOSE:
		op_close(l);
		return;
	case OP_DUP:
		op_dup(l);
		return;
	case OP_MUNMAP:
		op_munmap(l);
		return;
	case OP_MPROTECT:
		op_mprotect(l);
		return;
	case OP_TOUCH:
		op_touch(l);
		return;
	case OP_FORK:
		op_fork(l, &fork_budget);
		return;
	case OP_NETLINK:
		fz_op_netlink(l);
		return;
	default:
		break;
	}
	switch (op) {
	case OP_ACQUIRE:
	case OP_ACQ_REL:
	case OP_RELEASE:
	case OP_PREFETCH:
	case OP_FAST:
	case OP_REPORT:
		f = pick_fd(l, MOECACHE_ROLE_CLIENT);
		break;
	case OP_READ:
	case OP_POLL:
	case OP_EVICT:
	case OP_COMMIT:
	case OP_ABORT:
	case OP_BANK_SET:
		f = pick_fd(l, MOECACHE_ROLE_AGENT);
		break;
	case OP_LOAD:
		f = pick_fd(l, fz_chance(l, 1, 2) ? MOECACHE_ROLE_LOADER : MOECACHE_ROLE_AGENT);
		break;
	case OP_ATTACH: {
		unsigned int i;

		f = NULL;
		for (i = 0; i < FZ_MAX_FDS && fz_chance(l, 5, 6); i++)
			if (l->fds[i].fd >= 0 && l->fds[i].role == MOECACHE_ROLE_NONE)
				f = &l->fds[i];
		if (!f)
			f = pick_fd(l, MOECACHE_ROLE_NONE);
		break;
	}
	default:
		f = pick_fd(l, MOECACHE_ROLE_NONE);
	}
	if (!f) {
		l->op_name = op_table[OP_OPEN].name;
		l->cur_op = OP_OPEN;
		op_open(l);
		return;
	}
	switch (op) {
	case OP_ATTACH:
		op_attach(l, f);
		break;
	case OP_INFO:
		op_info(l, f);
		break;
	case OP_NOP:
		op_nop(l, f);
		break;
	case OP_CREATE:
		op_create(l, f);
		break;
	case OP_DESTROY:
		op_destroy(l, f);
		break;
	case OP_ACQUIRE:
		op_acquire(l, f);
		break;
	case OP_ACQ_REL:
		op_acq_rel(l, f);
		break;
	case OP_RELEASE:
		op_release(l, f);
		break;
	case OP_PREFETCH:
		op_prefetch(l, f);
		break;
	case OP_READ:
		op_read(l, f);
		break;
	case OP_POLL:
		op_poll(l, f);
		break;
	case OP_EVICT:
		op_evict(l, f);
		break;
	case OP_COMMIT:
		op_fill_batch(l, f, true);
		break;
	case OP_ABORT:
		op_fill_batch(l, f, false);
		break;
	case OP_BANK_SET:
		op_bank_set(l, f);
		break;
	case OP_BANK_GET:
		op_bank_get(l, f);
		break;
	case OP_LOAD:
		op_load(l, f);
		break;
	case OP_STATS:
		op_stats(l, f);
		break;
	case OP_MMAP:
		op_mmap(l, f);
		break;
	case OP_BADIOCTL:
		op_bad_ioctl(l, f);
		break;
	case OP_FAST:
		op_fast(l, f);
		break;
	case OP_REPORT:
		op_report(l, f);
		break;
	default:
		break;
	}
	if (exact(l) && attached(f))
		strict_pins_check(l, f);
}

void fz_lane_run(struct fz_lane *l, uint64_t ops)
{
	uint64_t done = 0, before;

	fork_budget = ops;
	while (done < ops) {
		before = fork_budget;
		l->op_no++;
		run_one(l);
		/* A fork's child spends part of the budget. */
		done += 1 + (before - fork_budget);
		fork_budget = ops > done ? ops - done : 0;
	}
}

const char *fz_op_name(unsigned int op)
{
	return op < OP_NR ? op_table[op].name : NULL;
}
