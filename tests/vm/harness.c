// SPDX-License-Identifier: GPL-2.0
/*
 * The helpers shared by the moecache-vmtest files (tests/vm/main.c runs them).
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "harness.h"
#include "mc_atomic.h"

const struct vm_geom vm_geom_default = {
    .n_layers = 4,
    .n_experts = 16,
    .expert_begin = 0,
    .expert_end = 16,
    .n_slots = 8,
    .expert_bytes = 64 * 1024,
    .uid = 0,
    .gid = 0,
    .mode = 0600,
};

/* ---- failing ---------------------------------------------------------- */

const char *vm_errname(int err)
{
	const char *name = err ? strerrorname_np(err) : "0";

	return name ? name : "E?";
}

void vm_fail_errno_at(const char *file, int line, const char *expr, int want, long ret, int err)
{
	if (!want)
		vm_fail_at(file, line, "%s: %s (%s)", expr, vm_errname(err), strerror(err));
	if (ret != -1)
		vm_fail_at(file, line, "%s: expected %s, got success (%ld)", expr, vm_errname(want),
			   ret);
	vm_fail_at(file, line, "%s: expected %s, got %s", expr, vm_errname(want), vm_errname(err));
}

void vm_fail_eq_at(const char *file, int line, const char *got_text, const char *want_text,
		   long long got, long long want, int err)
{
	if (got == -1 && err)
		vm_fail_at(file, line, "%s: got -1 (%s), expected %s = %lld", got_text,
			   vm_errname(err), want_text, want);
	vm_fail_at(file, line, "%s: got %lld (0x%llx), expected %s = %lld (0x%llx)", got_text, got,
		   (unsigned long long)got, want_text, want, (unsigned long long)want);
}

/* ---- device, pools and views ------------------------------------------ */

int vm_open_dev(void)
{
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		VM_FAIL("open %s: %s", MOECACHE_DEVICE, vm_errname(errno));
	return fd;
}

void vm_get_info(struct moecache_info *info)
{
	int fd = vm_open_dev();

	memset(info, 0, sizeof(*info));
	VM_OK(ioctl(fd, MOECACHE_IOC_GET_INFO, info));
	close(fd);
}

void vm_pool_name(const struct vm_ctx *ctx, unsigned int n, char name[MOECACHE_NAME_LEN])
{
	VM_ASSERT(n >= 1 && n <= VM_MAX_EXTRA_POOLS);
	if (snprintf(name, MOECACHE_NAME_LEN, "%s-%u", ctx->pool, n) >= MOECACHE_NAME_LEN)
		VM_FAIL("pool name %s-%u is too long", ctx->pool, n);
}

void vm_fill_create(struct moecache_pool_create *pc, const char *name, const struct vm_geom *g)
{
	memset(pc, 0, sizeof(*pc));
	snprintf(pc->name, sizeof(pc->name), "%s", name);
	pc->n_layers = g->n_layers;
	pc->n_experts = g->n_experts;
	pc->expert_begin = g->expert_begin;
	pc->expert_end = g->expert_end;
	pc->expert_bytes = g->expert_bytes;
	pc->n_slots = g->n_slots;
	pc->uid = g->uid;
	pc->gid = g->gid;
	pc->mode = g->mode;
}

void vm_pool_create(const char *name, const struct vm_geom *g)
{
	struct moecache_pool_create pc;
	int fd = vm_open_dev();

	vm_fill_create(&pc, name, g);
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
	close(fd);
}

void vm_pool_destroy(const char *name)
{
	struct moecache_pool_name pn;
	int fd = vm_open_dev();

	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", name);
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
	close(fd);
}

void vm_expect_no_pool(const char *name)
{
	struct moecache_attach at;
	int fd = vm_open_dev();

	memset(&at, 0, sizeof(at));
	snprintf(at.name, sizeof(at.name), "%s", name);
	at.role = MOECACHE_ROLE_CLIENT;
	VM_ERR(ioctl(fd, MOECACHE_IOC_ATTACH, &at), ENOENT);
	close(fd);
}

int vm_try_attach(struct vm_view *v, const char *pool, __u32 role)
{
	int fd = vm_open_dev();
	int ret = vm_try_attach_fd(v, fd, pool, role);

	if (ret)
		close(fd);
	return ret;
}

int vm_try_attach_fd(struct vm_view *v, int fd, const char *pool, __u32 role)
{
	return vm_try_attach_fd_flags(v, fd, pool, role, 0);
}

int vm_try_attach_fd_flags(struct vm_view *v, int fd, const char *pool, __u32 role, __u32 flags)
{
	const struct moecache_map_header *h;
	long page = sysconf(_SC_PAGESIZE);
	void *base;

	memset(v, 0, sizeof(*v));
	v->fd = -1;
	v->role = role;
	snprintf(v->att.name, sizeof(v->att.name), "%s", pool);
	v->att.role = role;
	v->att.flags = flags;
	if (ioctl(fd, MOECACHE_IOC_ATTACH, &v->att) < 0)
		return -errno;
	v->fd = fd;
	VM_ASSERT_MSG(v->att.off.map_size >= sizeof(struct moecache_map_header),
		      "ATTACH: map_size %llu is smaller than the map header",
		      (unsigned long long)v->att.off.map_size);
	VM_ASSERT_MSG(v->att.off.map_offset % page == 0 && v->att.off.host_offset % page == 0,
		      "ATTACH: region offsets 0x%llx/0x%llx are not page-aligned",
		      (unsigned long long)v->att.off.map_offset,
		      (unsigned long long)v->att.off.host_offset);
	v->map_len = v->att.off.map_size;
	base = mmap(NULL, v->map_len, PROT_READ, MAP_SHARED, v->fd, (off_t)v->att.off.map_offset);
	if (base == MAP_FAILED)
		VM_FAIL("mmap of the map region (role %u): %s", role, vm_errname(errno));
	v->map_base = base;
	h = base;
	v->hdr = h;
	v->n_local = v->att.expert_end - v->att.expert_begin;
	v->n_idx = v->att.n_layers * v->n_local;
	VM_EQ(h->magic, MOECACHE_MAP_MAGIC);
	/* The arrays the header points at must lie inside the mapped region. */
	VM_ASSERT(h->map_off + (__u64)v->n_idx * 4 <= v->map_len);
	VM_ASSERT(h->owner_off + (__u64)v->att.n_slots * 4 <= v->map_len);
	VM_ASSERT(h->last_use_off + (__u64)v->att.n_slots * 8 <= v->map_len);
	VM_ASSERT(h->pins_off + (__u64)v->att.n_slots * 4 <= v->map_len);
	VM_ASSERT(h->access_off + (__u64)v->n_idx * 4 <= v->map_len);
	VM_ASSERT(h->last_use_off % 8 == 0);
	v->map = (const __u32 *)((const char *)base + h->map_off);
	v->owner = (const __u32 *)((const char *)base + h->owner_off);
	v->last_use = (const __u64 *)((const char *)base + h->last_use_off);
	v->pins = (const __u32 *)((const char *)base + h->pins_off);
	v->access = (const __u32 *)((const char *)base + h->access_off);
	return 0;
}

void vm_attach(struct vm_view *v, const char *pool, __u32 role)
{
	int ret = vm_try_attach(v, pool, role);

	if (ret)
		VM_FAIL("ATTACH %s as role %u: %s", pool, role, vm_errname(-ret));
}

void vm_view_map_host(struct vm_view *v, int prot)
{
	void *p;

	v->host_len = v->att.off.host_size;
	p = mmap(NULL, v->host_len, prot, MAP_SHARED, v->fd, (off_t)v->att.off.host_offset);
	if (p == MAP_FAILED)
		VM_FAIL("mmap of the host region (role %u, prot %d): %s", v->role, prot,
			vm_errname(errno));
	v->host = p;
}

void vm_detach(struct vm_view *v)
{
	if (v->host)
		munmap(v->host, v->host_len);
	if (v->map_base)
		munmap(v->map_base, v->map_len);
	if (v->fd >= 0)
		close(v->fd);
	memset(v, 0, sizeof(*v));
	v->fd = -1;
}

__u32 vm_idx(const struct vm_view *v, __u32 layer, __u32 expert)
{
	return layer * v->n_local + (expert - v->att.expert_begin);
}

__u32 vm_load32(const __u32 *p)
{
	return mc_load_acquire_u32(p);
}

__u64 vm_load64(const __u64 *p)
{
	return mc_load_acquire_u64((const uint64_t *)p);
}

unsigned char *vm_host_record(const struct vm_view *v, __u32 idx)
{
	VM_ASSERT(v->host);
	return v->host + (size_t)idx * v->att.expert_bytes;
}

/* ---- ioctl helpers ---------------------------------------------------- */

int vm_try_acquire(const struct vm_view *v, __u32 layer, const __u32 *experts, __u32 count,
		   __u32 *slots, __u32 flags, __u32 timeout_ms, struct moecache_acquire *out)
{
	struct moecache_acquire acq = {
	    .layer = layer,
	    .count = count,
	    .experts = (uintptr_t)experts,
	    .slots = (uintptr_t)slots,
	    .flags = flags,
	    .timeout_ms = timeout_ms,
	};
	int ret = ioctl(v->fd, MOECACHE_IOC_ACQUIRE, &acq) < 0 ? -errno : 0;

	if (out)
		*out = acq;
	return ret;
}

void vm_acquire(const struct vm_view *v, __u32 layer, const __u32 *experts, __u32 count,
		__u32 *slots, __u32 flags, struct moecache_acquire *out)
{
	int ret = vm_try_acquire(v, layer, experts, count, slots, flags, 0, out);

	if (ret)
		VM_FAIL("ACQUIRE layer %u, %u experts, flags 0x%x: %s", layer, count, flags,
			vm_errname(-ret));
}

void vm_release(const struct vm_view *v, const __u32 *slots, __u32 count)
{
	struct moecache_release rel = {
	    .count = count,
	    .slots = (uintptr_t)slots,
	};

	if (ioctl(v->fd, MOECACHE_IOC_RELEASE, &rel) < 0)
		VM_FAIL("RELEASE of %u slots: %s", count, vm_errname(errno));
}

void vm_evict(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert,
	      struct moecache_evict *out)
{
	struct moecache_evict ev = {
	    .slot = slot,
	    .layer = layer,
	    .expert = expert,
	};

	if (ioctl(v->fd, MOECACHE_IOC_EVICT, &ev) < 0)
		VM_FAIL("EVICT slot %u for (%u, %u): %s", slot, layer, expert, vm_errname(errno));
	if (out)
		*out = ev;
}

void vm_commit1(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert, __u32 flags)
{
	struct moecache_fill fill = {
	    .slot = slot,
	    .layer = layer,
	    .expert = expert,
	    .flags = flags,
	};
	struct moecache_fill_batch batch = {
	    .count = 1,
	    .fills = (uintptr_t)&fill,
	};

	if (ioctl(v->fd, MOECACHE_IOC_COMMIT, &batch) < 0)
		VM_FAIL("COMMIT slot %u for (%u, %u): %s", slot, layer, expert, vm_errname(errno));
}

void vm_fill(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert)
{
	vm_evict(v, slot, layer, expert, NULL);
	vm_commit1(v, slot, layer, expert, 0);
}

void vm_stats(const struct vm_view *v, __u32 layer, struct moecache_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->layer = layer;
	if (ioctl(v->fd, MOECACHE_IOC_STATS, st) < 0)
		VM_FAIL("STATS layer 0x%x: %s", layer, vm_errname(errno));
}

short vm_poll(const struct vm_view *v, int timeout_ms)
{
	struct pollfd pfd = {.fd = v->fd, .events = POLLIN};
	int n = poll(&pfd, 1, timeout_ms);

	if (n < 0)
		VM_FAIL("poll: %s", vm_errname(errno));
	return n ? pfd.revents : 0;
}

size_t vm_read_requests(const struct vm_view *v, struct moecache_request *reqs, size_t max,
			int timeout_ms)
{
	ssize_t n;

	if (!(vm_poll(v, timeout_ms) & POLLIN))
		return 0;
	n = read(v->fd, reqs, max * sizeof(*reqs));
	if (n < 0)
		VM_FAIL("read of requests: %s", vm_errname(errno));
	VM_ASSERT_MSG(n % sizeof(*reqs) == 0, "read returned %zd bytes, not whole requests", n);
	return (size_t)n / sizeof(*reqs);
}

int vm_bank_set_memfd(const struct vm_view *agent, __u64 stride, struct moecache_bank *bank)
{
	int fd = memfd_create("moecache-vmtest-bank", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		VM_FAIL("memfd_create: %s", vm_errname(errno));
	memset(bank, 0, sizeof(*bank));
	bank->fd = fd;
	bank->backend = MOECACHE_BACKEND_CPU;
	bank->slot_stride = stride;
	bank->bank_bytes = stride * agent->att.n_slots;
	VM_OK(ftruncate(fd, (off_t)bank->bank_bytes));
	/* As the agent does: nobody may resize the bank under the clients. */
	VM_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	VM_OK(ioctl(agent->fd, MOECACHE_IOC_BANK_SET, bank));
	return fd;
}

/* ---- module parameters ------------------------------------------------ */

bool vm_param_read(const char *name, unsigned long long *value)
{
	char path[128];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/sys/module/moecache/parameters/%s", name);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fscanf(f, "%llu", value);
	fclose(f);
	return n == 1;
}

bool vm_param_write(const char *name, unsigned long long value)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/sys/module/moecache/parameters/%s", name);
	f = fopen(path, "we");
	if (!f)
		return false;
	ok = fprintf(f, "%llu\n", value) > 0;
	ok = (fclose(f) == 0) && ok;
	return ok;
}

unsigned long long vm_param_set(const char *name, unsigned long long value)
{
	unsigned long long old;

	if (!vm_param_read(name, &old))
		VM_FAIL("no module parameter %s", name);
	if (!vm_param_write(name, value))
		VM_FAIL("cannot write %llu to module parameter %s: %s", value, name,
			vm_errname(errno));
	return old;
}

/* ---- snapshots -------------------------------------------------------- */

struct vm_field {
	const char *name;
	size_t off;
	size_t size;
};

#define VM_FIELD(type, f)                                                                          \
	{                                                                                          \
#f, offsetof(type, f), sizeof(((type *)0)->f)                                      \
	}

static const struct vm_field vm_stats_fields[] = {
    VM_FIELD(struct moecache_stats, hits),	    VM_FIELD(struct moecache_stats, misses),
    VM_FIELD(struct moecache_stats, prefetch_hits), VM_FIELD(struct moecache_stats, prefetches),
    VM_FIELD(struct moecache_stats, evictions),	    VM_FIELD(struct moecache_stats, commits),
    VM_FIELD(struct moecache_stats, aborts),	    VM_FIELD(struct moecache_stats, bytes_copied),
    VM_FIELD(struct moecache_stats, waits),	    VM_FIELD(struct moecache_stats, wait_ns),
    VM_FIELD(struct moecache_stats, wait_hist),	    VM_FIELD(struct moecache_stats, resident),
    VM_FIELD(struct moecache_stats, filling),	    VM_FIELD(struct moecache_stats, pinned_slots),
    VM_FIELD(struct moecache_stats, pins),	    VM_FIELD(struct moecache_stats, queued),
    VM_FIELD(struct moecache_stats, inflight),	    VM_FIELD(struct moecache_stats, n_clients),
    VM_FIELD(struct moecache_stats, agent_pid),
};

static const struct vm_field vm_header_fields[] = {
    VM_FIELD(struct moecache_map_header, magic),
    VM_FIELD(struct moecache_map_header, version),
    VM_FIELD(struct moecache_map_header, seq),
    VM_FIELD(struct moecache_map_header, flags),
    VM_FIELD(struct moecache_map_header, n_layers),
    VM_FIELD(struct moecache_map_header, n_experts),
    VM_FIELD(struct moecache_map_header, expert_begin),
    VM_FIELD(struct moecache_map_header, expert_end),
    VM_FIELD(struct moecache_map_header, n_slots),
    VM_FIELD(struct moecache_map_header, agent_epoch),
    VM_FIELD(struct moecache_map_header, expert_bytes),
    VM_FIELD(struct moecache_map_header, clock),
    VM_FIELD(struct moecache_map_header, map_off),
    VM_FIELD(struct moecache_map_header, owner_off),
    VM_FIELD(struct moecache_map_header, last_use_off),
    VM_FIELD(struct moecache_map_header, pins_off),
    VM_FIELD(struct moecache_map_header, access_off),
    VM_FIELD(struct moecache_map_header, reserved),
};

static unsigned long long vm_field_value(const void *base, size_t off, size_t size)
{
	const unsigned char *p = (const unsigned char *)base + off;
	__u64 v64;
	__u32 v32;

	if (size == 4) {
		memcpy(&v32, p, 4);
		return v32;
	}
	memcpy(&v64, p, 8);
	return v64;
}

void vm_snap_take(const struct vm_view *v, struct vm_snap *s)
{
	vm_stats(v, MOECACHE_NONE, &s->st);
	s->len = v->map_len;
	s->map = malloc(s->len);
	VM_ASSERT(s->map);
	memcpy(s->map, v->map_base, s->len);
}

/* Names the element of the map region at byte off, e.g. "owner[3]". */
static void vm_map_field_name(const struct vm_view *v, size_t off, char *buf, size_t len,
			      size_t *elem_off, size_t *elem_size)
{
	const struct moecache_map_header *h = v->hdr;
	const struct {
		const char *name;
		__u64 start;
		__u32 n;
		size_t size;
	} arrays[] = {
	    {"map", h->map_off, v->n_idx, 4},
	    {"owner", h->owner_off, v->att.n_slots, 4},
	    {"last_use", h->last_use_off, v->att.n_slots, 8},
	    {"pins", h->pins_off, v->att.n_slots, 4},
	    {"access", h->access_off, v->n_idx, 4},
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(vm_header_fields); i++) {
		const struct vm_field *f = &vm_header_fields[i];

		if (off >= f->off && off < f->off + f->size) {
			size_t unit = f->size > 8 ? 8 : f->size;

			snprintf(buf, len, "header.%s", f->name);
			*elem_off = f->off + (off - f->off) / unit * unit;
			*elem_size = unit;
			return;
		}
	}
	for (i = 0; i < ARRAY_SIZE(arrays); i++) {
		__u64 end = arrays[i].start + (__u64)arrays[i].n * arrays[i].size;

		if (off >= arrays[i].start && off < end) {
			size_t k = (off - arrays[i].start) / arrays[i].size;

			snprintf(buf, len, "%s[%zu]", arrays[i].name, k);
			*elem_off = arrays[i].start + k * arrays[i].size;
			*elem_size = arrays[i].size;
			return;
		}
	}
	snprintf(buf, len, "byte %zu", off);
	*elem_off = off;
	*elem_size = 0;
}

void vm_snap_same_at(const char *file, int line, const struct vm_view *v, struct vm_snap *s,
		     const char *after)
{
	struct moecache_stats now;
	size_t i;

	vm_stats(v, MOECACHE_NONE, &now);
	for (i = 0; i < ARRAY_SIZE(vm_stats_fields); i++) {
		const struct vm_field *f = &vm_stats_fields[i];
		size_t unit = f->size > 8 ? 8 : f->size;
		size_t k;

		for (k = 0; k < f->size; k += unit) {
			unsigned long long a = vm_field_value(&s->st, f->off + k, unit);
			unsigned long long b = vm_field_value(&now, f->off + k, unit);

			if (a != b)
				vm_fail_at(file, line,
					   "%s changed the pool: stats.%s%s %llu -> %llu", after,
					   f->name, f->size > unit ? "[]" : "", a, b);
		}
	}
	for (i = 0; i < s->len; i++) {
		const unsigned char *cur = v->map_base;

		if (s->map[i] != cur[i]) {
			char name[64];
			size_t eoff, esize;

			vm_map_field_name(v, i, name, sizeof(name), &eoff, &esize);
			if (esize)
				vm_fail_at(file, line,
					   "%s changed the pool: map region %s 0x%llx -> 0x%llx",
					   after, name, vm_field_value(s->map, eoff, esize),
					   vm_field_value(cur, eoff, esize));
			vm_fail_at(file, line, "%s changed the pool: map region %s", after, name);
		}
	}
	free(s->map);
	s->map = NULL;
}

void vm_check_map_consistent(const struct vm_view *v)
{
	__u32 s, idx;

	for (s = 0; s < v->att.n_slots; s++) {
		__u32 o = vm_load32(&v->owner[s]);

		if (o == MOECACHE_NONE)
			continue;
		VM_ASSERT_MSG(!(o & MOECACHE_OWNER_FILLING), "owner[%u] = 0x%x is still FILLING", s,
			      o);
		VM_ASSERT_MSG(o < v->n_idx, "owner[%u] = %u is out of range", s, o);
		VM_ASSERT_MSG(vm_load32(&v->map[o]) == s, "owner[%u] = %u but map[%u] = 0x%x", s, o,
			      o, vm_load32(&v->map[o]));
	}
	for (idx = 0; idx < v->n_idx; idx++) {
		__u32 m = vm_load32(&v->map[idx]);

		if (m == MOECACHE_NONE)
			continue;
		VM_ASSERT_MSG(m < v->att.n_slots, "map[%u] = %u is out of range", idx, m);
		VM_ASSERT_MSG(vm_load32(&v->owner[m]) == idx, "map[%u] = %u but owner[%u] = 0x%x",
			      idx, m, m, vm_load32(&v->owner[m]));
	}
}

/* ---- processes -------------------------------------------------------- */

pid_t vm_spawn(void (*fn)(void *arg), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		VM_FAIL("fork: %s", vm_errname(errno));
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	return pid;
}

static bool vm_try_reap(pid_t pid, int *status)
{
	pid_t r = waitpid(pid, status, WNOHANG);

	if (r < 0)
		VM_FAIL("waitpid %d: %s", (int)pid, vm_errname(errno));
	return r == pid;
}

int vm_reap(pid_t pid, int timeout_ms, const char *what)
{
	uint64_t until = vm_now_ms() + (uint64_t)timeout_ms;
	int status;

	while (!vm_try_reap(pid, &status)) {
		if (vm_now_ms() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			VM_FAIL("%s did not finish within %d ms", what, timeout_ms);
		}
		vm_sleep_ms(2);
	}
	return status;
}

void vm_reap_ok(pid_t pid, int timeout_ms, const char *what)
{
	int status = vm_reap(pid, timeout_ms, what);

	if (WIFSIGNALED(status))
		VM_FAIL("%s was killed by signal %s", what, sigabbrev_np(WTERMSIG(status)));
	if (WEXITSTATUS(status))
		VM_FAIL("%s failed (exit status %d)", what, WEXITSTATUS(status));
}

void vm_kill(pid_t pid, const char *what)
{
	int status;

	if (kill(pid, SIGKILL) < 0)
		VM_FAIL("kill -9 %s: %s", what, vm_errname(errno));
	if (waitpid(pid, &status, 0) != pid)
		VM_FAIL("waitpid %s: %s", what, vm_errname(errno));
}

bool vm_running(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		VM_FAIL("waitid %d: %s", (int)pid, vm_errname(errno));
	return si.si_pid == 0;
}

char vm_proc_state(pid_t pid)
{
	char path[64], buf[512], *close_paren;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	close_paren = strrchr(buf, ')');
	return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

void vm_wait_sleeping(pid_t pid, int timeout_ms, const char *what)
{
	uint64_t until = vm_now_ms() + (uint64_t)timeout_ms;

	while (vm_proc_state(pid) != 'S') {
		if (!vm_running(pid))
			VM_FAIL("%s exited while it was expected to sleep", what);
		if (vm_now_ms() > until)
			VM_FAIL("%s did not go to sleep within %d ms (state %c)", what, timeout_ms,
				vm_proc_state(pid));
		vm_sleep_ms(1);
	}
}

void *vm_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		VM_FAIL("mmap shared %zu: %s", len, vm_errname(errno));
	return p;
}

void vm_gate_open(struct vm_gate *g)
{
	int fds[2];

	VM_OK(pipe2(fds, O_CLOEXEC));
	g->rd = fds[0];
	g->wr = fds[1];
}

void vm_gate_pass(struct vm_gate *g)
{
	char c = 1;

	if (write(g->wr, &c, 1) != 1)
		VM_FAIL("gate write: %s", vm_errname(errno));
}

void vm_gate_wait(struct vm_gate *g, int timeout_ms, const char *what)
{
	struct pollfd pfd = {.fd = g->rd, .events = POLLIN};
	char c;
	int n;

	do {
		n = poll(&pfd, 1, timeout_ms);
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		VM_FAIL("timed out after %d ms waiting for %s", timeout_ms, what);
	if (read(g->rd, &c, 1) != 1)
		VM_FAIL("%s: the other side went away", what);
}

void vm_gate_close(struct vm_gate *g)
{
	close(g->rd);
	close(g->wr);
}

struct vm_waiter *vm_waiter_new(const char *pool, __u32 layer, const __u32 *experts, __u32 count,
				__u32 flags, __u32 timeout_ms)
{
	struct vm_waiter *w = vm_shared(sizeof(*w));
	__u32 i;

	VM_ASSERT(count <= VM_WAITER_MAX);
	snprintf(w->pool, sizeof(w->pool), "%s", pool);
	w->layer = layer;
	w->count = count;
	for (i = 0; i < count; i++) {
		w->experts[i] = experts[i];
		w->slots[i] = MOECACHE_NONE;
	}
	w->flags = flags;
	w->timeout_ms = timeout_ms;
	w->ret = 1; /* not returned yet */
	vm_gate_open(&w->ready);
	vm_gate_open(&w->done);
	vm_gate_open(&w->release);
	return w;
}

static void vm_waiter_main(void *arg)
{
	struct vm_waiter *w = arg;
	struct vm_view v;
	__u32 i;

	vm_attach(&v, w->pool, MOECACHE_ROLE_CLIENT);
	vm_gate_pass(&w->ready);
	w->ret = vm_try_acquire(&v, w->layer, w->experts, w->count, w->slots, w->flags,
				w->timeout_ms, &w->acq);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vm_gate_pass(&w->done);
	if (w->hold)
		vm_gate_wait(&w->release, 120000, "the release gate");
	if (w->ret == 0 && w->acq.n_pinned) {
		__u32 pinned[VM_WAITER_MAX], n = 0;

		for (i = 0; i < w->count; i++)
			if (w->slots[i] != MOECACHE_NONE)
				pinned[n++] = w->slots[i];
		vm_release(&v, pinned, n);
	}
	vm_detach(&v);
}

pid_t vm_waiter_start(struct vm_waiter *w)
{
	pid_t pid = vm_spawn(vm_waiter_main, w);

	vm_gate_wait(&w->ready, 10000, "the waiter to attach");
	return pid;
}

/* ---- credentials ------------------------------------------------------ */

void vm_get_node(char *path, size_t len)
{
	struct stat st;

	if (stat(MOECACHE_DEVICE, &st) < 0)
		VM_FAIL("stat %s: %s", MOECACHE_DEVICE, vm_errname(errno));
	if ((st.st_mode & 0006) == 0006) {
		snprintf(path, len, "%s", MOECACHE_DEVICE);
		return;
	}
	snprintf(path, len, "/dev/moecache-vmtest-%d", (int)getpid());
	unlink(path);
	if (mknod(path, S_IFCHR | 0600, st.st_rdev) < 0)
		VM_FAIL("mknod %s: %s", path, vm_errname(errno));
	VM_OK(chmod(path, 0666));
}

void vm_put_node(const char *path)
{
	if (strcmp(path, MOECACHE_DEVICE) != 0)
		unlink(path);
}

int vm_become_unprivileged(uid_t uid, gid_t gid, const char *node)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	unsigned int i;
	int cap, fd;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		VM_OK(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0));
	VM_OK(setgroups(0, NULL));
	VM_OK(setresgid(gid, gid, gid));
	VM_OK(setresuid(uid, uid, uid));
	VM_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	memset(data, 0, sizeof(data));
	VM_OK(syscall(SYS_capget, &hdr, data));
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		VM_ASSERT_MSG(!data[i].effective && !data[i].permitted && !data[i].inheritable,
			      "capabilities left after dropping privileges");
	VM_EQ(geteuid(), uid);
	VM_EQ(getegid(), gid);
	fd = open(node, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		VM_FAIL("open %s as uid %u: %s", node, (unsigned int)uid, vm_errname(errno));
	return fd;
}

/* ---- perf --------------------------------------------------------------- */

uint64_t vm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

unsigned int vm_idle_files(unsigned int want)
{
	unsigned long long max_files;
	struct rlimit rl;

	VM_ASSERT(vm_param_read("max_pool_files", &max_files));
	if (max_files < want + 8)
		want = (unsigned int)max_files - 8;
	rl.rlim_cur = rl.rlim_max = want + 256;
	VM_OK(setrlimit(RLIMIT_NOFILE, &rl));
	return want;
}

void vm_best_side_by_side(unsigned int rounds, uint64_t (*time)(void *pool), void *a, void *b,
			  uint64_t *best_a, uint64_t *best_b)
{
	unsigned int r;
	uint64_t t;

	*best_a = UINT64_MAX;
	*best_b = UINT64_MAX;
	for (r = 0; r < rounds; r++) {
		t = time(a);
		*best_a = t < *best_a ? t : *best_a;
		t = time(b);
		*best_b = t < *best_b ? t : *best_b;
	}
}

void vm_commit_pool_setup(struct vm_commit_pool *p, __u32 mode, unsigned int cycles)
{
	struct vm_geom g = vm_geom_default;

	g.mode = mode;
	p->cycles = cycles;
	vm_pool_create(p->name, &g);
	vm_attach(&p->a, p->name, MOECACHE_ROLE_AGENT);
	vm_attach(&p->asker, p->name, MOECACHE_ROLE_CLIENT);
	vm_fill(&p->a, 0, 0, 0);
	p->expert = 0;
}

uint64_t vm_commit_pool_time(void *pool)
{
	struct vm_commit_pool *p = pool;
	struct moecache_acquire acq;
	uint64_t spent = 0, t0;
	__u32 next, slot;
	unsigned int k;

	for (k = 0; k < p->cycles; k++) {
		next = p->expert == 0 ? 1 : 0;
		VM_EQ(vm_try_acquire(&p->asker, 0, &next, 1, &slot, 0, 0, &acq), 0);
		VM_EQ(acq.n_pinned, 0);
		vm_evict(&p->a, 0, 0, next, NULL);
		t0 = vm_now_ns();
		vm_commit1(&p->a, 0, 0, next, 0);
		spent += vm_now_ns() - t0;
		p->expert = next;
	}
	return spent;
}

void vm_commit_pool_teardown(struct vm_commit_pool *p)
{
	vm_detach(&p->asker);
	vm_detach(&p->a);
	vm_pool_destroy(p->name);
}
