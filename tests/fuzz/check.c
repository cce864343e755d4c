// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-fuzz: the generator, expectations, reports and the checks of the
 * map region made after each step.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "mc_atomic.h"

/* ---- random: xoshiro256** seeded with splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void fz_rng_seed(struct fz_lane *l, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
	int i;

	for (i = 0; i < 4; i++)
		l->rng[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t fz_rand(struct fz_lane *l)
{
	uint64_t *s = l->rng;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint32_t fz_below(struct fz_lane *l, uint32_t n)
{
	return (uint32_t)((fz_rand(l) >> 32) * n >> 32);
}

bool fz_chance(struct fz_lane *l, uint32_t num, uint32_t den)
{
	return fz_below(l, den) < num;
}

/* ---- expectations ---- */

static void errset_add(struct fz_errset *s, int err)
{
	if (err > 0 && err < 128)
		s->bits[err / 64] |= 1ull << (err % 64);
}

static bool errset_has(const struct fz_errset *s, int err)
{
	return err > 0 && err < 128 && (s->bits[err / 64] >> (err % 64) & 1);
}

void fz_expect_init(struct fz_expect *e, bool valid_state)
{
	memset(e, 0, sizeof(*e));
	e->success_ok = valid_state;
}

void fz_expect_err(struct fz_expect *e, int err)
{
	errset_add(&e->err, err);
}

void fz_defect(struct fz_expect *e, const char *name, ...)
{
	size_t len = strlen(e->defects);
	va_list ap;
	int err;

	e->success_ok = false;
	snprintf(e->defects + len, sizeof(e->defects) - len, "%s%s", len ? "," : "", name);
	va_start(ap, name);
	while ((err = va_arg(ap, int)) != 0)
		errset_add(&e->err, err);
	va_end(ap);
}

const char *fz_errname(int err)
{
	static const struct {
		int err;
		const char *name;
	} names[] = {
	    {EPERM, "EPERM"},		{ENOENT, "ENOENT"},
	    {EINTR, "EINTR"},		{EIO, "EIO"},
	    {E2BIG, "E2BIG"},		{EBADF, "EBADF"},
	    {EAGAIN, "EAGAIN"},		{ENOMEM, "ENOMEM"},
	    {EACCES, "EACCES"},		{EFAULT, "EFAULT"},
	    {EBUSY, "EBUSY"},		{EEXIST, "EEXIST"},
	    {EINVAL, "EINVAL"},		{ENOTTY, "ENOTTY"},
	    {ENOSPC, "ENOSPC"},		{EPIPE, "EPIPE"},
	    {ENODATA, "ENODATA"},	{EOVERFLOW, "EOVERFLOW"},
	    {ENOTCONN, "ENOTCONN"},	{ETIMEDOUT, "ETIMEDOUT"},
	    {EALREADY, "EALREADY"},	{ENODEV, "ENODEV"},
	    {EMFILE, "EMFILE"},		{ENXIO, "ENXIO"},
	    {EOPNOTSUPP, "EOPNOTSUPP"}, {ERANGE, "ERANGE"},
	    {EMSGSIZE, "EMSGSIZE"},	{ENOBUFS, "ENOBUFS"},
	    {EDQUOT, "EDQUOT"},
	};
	static char buf[16];
	size_t i;

	if (err == 0)
		return "success";
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].err == err)
			return names[i].name;
	snprintf(buf, sizeof(buf), "errno %d", err);
	return buf;
}

static void errset_format(const struct fz_expect *e, char *buf, size_t len)
{
	size_t off = 0;
	int err;

	buf[0] = 0;
	if (e->success_ok)
		off += snprintf(buf + off, len - off, "success");
	for (err = 1; err < 128 && off < len; err++)
		if (errset_has(&e->err, err))
			off +=
			    snprintf(buf + off, len - off, "%s%s", off ? "|" : "", fz_errname(err));
	if (!buf[0])
		snprintf(buf, len, "nothing");
}

void fz_report(struct fz_lane *l, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "moecache-fuzz: REPORT seed %llu lane %u%s op %llu (%s): %s\n",
		(unsigned long long)l->cfg->seed, l->id, l->child ? " child" : "",
		(unsigned long long)l->op_no, l->op_name ? l->op_name : "-", msg);
	fflush(stderr);
	l->reports++;
	if (l->reports >= l->cfg->max_reports) {
		fprintf(stderr, "moecache-fuzz: lane %u: %u reports, stopping\n", l->id,
			l->reports);
		_exit(1);
	}
}

void fz_trace(struct fz_lane *l, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!l->cfg->trace)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%u%s %llu] %s\n", l->id, l->child ? "c" : "",
		(unsigned long long)l->op_no, msg);
}

bool fz_flush_overlap(const struct fz_lane *l)
{
	uint64_t g = __atomic_load_n(l->cfg->flush_gen, __ATOMIC_ACQUIRE);

	return g != l->flush_start || (g & 1);
}

bool fz_check_result(struct fz_lane *l, const struct fz_expect *e, long ret, const char *what)
{
	char want[256];
	int err = ret < 0 ? (int)-ret : 0;

	if (ret >= 0 && e->success_ok && l->cur_op < FZ_OP_SLOTS)
		l->ok_counts[l->cur_op]++;
	if (ret >= 0 ? e->success_ok : errset_has(&e->err, err))
		return true;
	errset_format(e, want, sizeof(want));
	/* The pool's residency changed under the call: the expectation may not hold. */
	if (fz_flush_overlap(l)) {
		l->excused++;
		fz_trace(l, "%s returned %s during a FLUSH from another lane: not checked", what,
			 fz_errname(err));
		return false;
	}
	fz_report(l, "%s returned %s, expected %s (defects: %s)", what, fz_errname(err), want,
		  e->defects[0] ? e->defects : "none");
	return false;
}

/* ---- the map region ---- */

static const uint32_t *hdr_u32(const struct moecache_map_header *h, uint64_t off)
{
	return (const uint32_t *)((const char *)h + off);
}

bool fz_map_snapshot(struct fz_lane *l, const struct fz_fd *f, uint32_t *map, uint32_t *owner)
{
	const struct moecache_map_header *h = f->map;
	const uint32_t *m = hdr_u32(h, h->map_off), *o = hdr_u32(h, h->owner_off);
	unsigned int spins;
	uint32_t s1, i;

	/* libmoecache's reader, with a bound: a seq that never settles is a report. */
	for (spins = 0; spins < 200000;) {
		if (!mc_seq_read_try_begin(&h->seq, &s1)) {
			mc_cpu_relax(&spins);
			continue;
		}
		spins++;
		for (i = 0; i < f->g.n_idx; i++)
			map[i] = mc_load_acquire_u32(&m[i]);
		for (i = 0; i < f->g.n_slots; i++)
			owner[i] = mc_load_relaxed_u32(&o[i]);
		if (!mc_seq_read_retry(&h->seq, s1))
			return true;
	}
	fz_report(l, "map seq of pool %s stayed odd or changing for %u reads", f->pool, spins);
	return false;
}

void fz_check_fd(struct fz_lane *l, struct fz_fd *f)
{
	const struct moecache_map_header *h = f->map;
	uint32_t map[FZ_MAX_LIST * 8], owner[256], owner_of[FZ_MAX_LIST * 8];
	const uint32_t *pins;
	const uint64_t *last_use;
	uint32_t i, s, idx, flags;
	uint64_t clock;

	if (f->fd < 0 || !h || f->g.n_idx > sizeof(map) / sizeof(map[0]) ||
	    f->g.n_slots > sizeof(owner) / sizeof(owner[0]))
		return;
	if (h->magic != MOECACHE_MAP_MAGIC || h->version != MOECACHE_ABI_VERSION ||
	    h->n_layers != f->g.n_layers || h->n_experts != f->g.n_experts ||
	    h->expert_begin != f->g.expert_begin || h->expert_end != f->g.expert_end ||
	    h->n_slots != f->g.n_slots || h->expert_bytes != f->g.expert_bytes) {
		fz_report(l, "map header of pool %s does not match its attach reply", f->pool);
		return;
	}
	flags = __atomic_load_n(&h->flags, __ATOMIC_ACQUIRE);
	if (flags & ~(MOECACHE_POOL_LOADED | MOECACHE_POOL_AGENT | MOECACHE_POOL_BANK))
		fz_report(l, "map flags 0x%x of pool %s has unknown bits", flags, f->pool);
	if (f->role == MOECACHE_ROLE_AGENT && !f->shared) {
		if (!(flags & MOECACHE_POOL_AGENT))
			fz_report(l, "pool %s: agent attached but MOECACHE_POOL_AGENT clear",
				  f->pool);
		if (__atomic_load_n(&h->agent_epoch, __ATOMIC_RELAXED) != f->epoch)
			fz_report(l, "pool %s: agent_epoch changed while our agent is attached",
				  f->pool);
	}
	if (!fz_map_snapshot(l, f, map, owner))
		return;

	for (i = 0; i < f->g.n_idx; i++)
		owner_of[i] = MOECACHE_NONE;
	for (s = 0; s < f->g.n_slots; s++) {
		if (owner[s] == MOECACHE_NONE)
			continue;
		idx = owner[s] & MOECACHE_OWNER_IDX_MASK;
		if (idx >= f->g.n_idx) {
			fz_report(l, "pool %s: owner[%u] = 0x%x names no expert", f->pool, s,
				  owner[s]);
			return;
		}
		if (owner_of[idx] != MOECACHE_NONE) {
			fz_report(l, "pool %s: idx %u held by slots %u and %u", f->pool, idx,
				  owner_of[idx], s);
			return;
		}
		owner_of[idx] = s;
		if (owner[s] & MOECACHE_OWNER_FILLING) {
			if (map[idx] != MOECACHE_NONE)
				fz_report(l,
					  "pool %s: idx %u mapped to slot %u while filling slot %u",
					  f->pool, idx, map[idx], s);
		} else if (map[idx] != s) {
			fz_report(l, "pool %s: owner[%u] = %u but map[%u] = 0x%x", f->pool, s, idx,
				  idx, map[idx]);
		}
	}
	for (i = 0; i < f->g.n_idx; i++) {
		if (map[i] == MOECACHE_NONE)
			continue;
		if (map[i] >= f->g.n_slots || owner[map[i]] != i)
			fz_report(l, "pool %s: map[%u] = 0x%x but that slot's owner is 0x%x",
				  f->pool, i, map[i], map[i] < f->g.n_slots ? owner[map[i]] : 0);
	}

	pins = hdr_u32(h, h->pins_off);
	last_use = (const uint64_t *)((const char *)h + h->last_use_off);
	clock = __atomic_load_n(&h->clock, __ATOMIC_ACQUIRE);
	for (s = 0; s < f->g.n_slots; s++) {
		uint32_t p = __atomic_load_n(&pins[s], __ATOMIC_RELAXED);
		uint64_t lu = __atomic_load_n(&last_use[s], __ATOMIC_RELAXED);

		if (p >= 0x80000000u)
			fz_report(l, "pool %s: pins[%u] = %u (negative)", f->pool, s, p);
		if (lu > clock + 1000000)
			fz_report(l, "pool %s: last_use[%u] = %llu beyond the clock %llu", f->pool,
				  s, (unsigned long long)lu, (unsigned long long)clock);
		if (f->role != MOECACHE_ROLE_CLIENT || f->shared || !f->pins || !f->pins[s])
			continue;
		/* Invariant 1: a slot we pin keeps its expert. */
		if (p < f->pins[s])
			fz_report(l, "pool %s: pins[%u] = %u below the %u this file holds", f->pool,
				  s, p, f->pins[s]);
		idx = f->pin_idx[s];
		if (owner[s] != idx || map[idx] != s)
			fz_report(l,
				  "pool %s: pinned slot %u (idx %u) now owner 0x%x, map[%u] 0x%x",
				  f->pool, s, idx, owner[s], idx, map[idx]);
	}
}
