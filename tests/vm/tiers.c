// SPDX-License-Identifier: GPL-2.0
/*
 * Banks of a pool (docs/abi.md, "Banks"): the layout at creation, the bank
 * table in the map region, BANK_SET and BANK_GET by index, EVICT_MOVE and
 * per-bank statistics. Every test name holds "tiers", so that
 * `moecache-vmtest tiers` runs them all.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "mc_fastpin.h"

#define TIERS_MAX_BANKS 4

/* The three-bank pool of most tests: 2 slots in tier 0, 3 + 3 in tier 1 and 2. */
static const struct moecache_bank_layout tiers_layout3[] = {
    {.n_slots = 2, .tier = 0, .backend = MOECACHE_BACKEND_NONE},
    {.n_slots = 3, .tier = 1, .backend = MOECACHE_BACKEND_CPU, .device = 1},
    {.n_slots = 3, .tier = 2, .backend = MOECACHE_BACKEND_NONE},
};

/* The agent's side of one bank: its memfd, mapped read-write. */
struct tiers_bank {
	int fd;
	unsigned char *mem;
	size_t len;
	struct moecache_bank desc; /* as BANK_SET wrote it back */
};

/* A pool of vm_geom_default with the three banks above. */
static void tiers_create(const char *name, const struct moecache_bank_layout *banks, __u32 n)
{
	struct moecache_pool_create pc;
	int fd = vm_open_dev();
	__u32 i, slots = 0;

	vm_fill_create(&pc, name, &vm_geom_default);
	for (i = 0; i < n; i++)
		slots += banks[i].n_slots;
	pc.n_slots = slots;
	pc.n_banks = n;
	pc.banks = (uintptr_t)banks;
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
	close(fd);
}

static int tiers_memfd(size_t len)
{
	int fd = memfd_create("moecache-vmtest-tier", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	VM_OK(fd);
	VM_OK(ftruncate(fd, (off_t)len));
	VM_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	return fd;
}

/* A CPU bank object for bank index, on CPU device `device`; -errno of BANK_SET. */
static int tiers_try_bank_set(const struct vm_view *agent, struct tiers_bank *tb, __u32 index,
			      __u32 n_slots, __u32 device)
{
	__u64 stride = agent->att.expert_bytes;

	memset(tb, 0, sizeof(*tb));
	tb->len = n_slots * stride;
	tb->fd = tiers_memfd(tb->len);
	tb->desc.fd = tb->fd;
	tb->desc.backend = MOECACHE_BACKEND_CPU;
	tb->desc.device = device;
	tb->desc.slot_stride = stride;
	tb->desc.bank_bytes = tb->len;
	tb->desc.index = index;
	if (ioctl(agent->fd, MOECACHE_IOC_BANK_SET, &tb->desc) < 0) {
		int err = errno;

		close(tb->fd);
		tb->fd = -1;
		return -err;
	}
	tb->mem = mmap(NULL, tb->len, PROT_READ | PROT_WRITE, MAP_SHARED, tb->fd, 0);
	VM_ASSERT(tb->mem != MAP_FAILED);
	return 0;
}

static void tiers_bank_set(const struct vm_view *agent, struct tiers_bank *tb, __u32 index,
			   __u32 n_slots, __u32 device)
{
	int ret = tiers_try_bank_set(agent, tb, index, n_slots, device);

	if (ret)
		VM_FAIL("BANK_SET of bank %u: %s", index, vm_errname(-ret));
}

/* Every bank of tiers_layout3 set, bank i on CPU device i. */
static void tiers_set_all(const struct vm_view *agent, struct tiers_bank tb[3])
{
	__u32 i;

	for (i = 0; i < ARRAY_SIZE(tiers_layout3); i++)
		tiers_bank_set(agent, &tb[i], i, tiers_layout3[i].n_slots, i);
}

static void tiers_bank_put(struct tiers_bank *tb)
{
	if (tb->mem && tb->mem != MAP_FAILED)
		munmap(tb->mem, tb->len);
	if (tb->fd >= 0)
		close(tb->fd);
	tb->mem = NULL;
	tb->fd = -1;
}

static const struct moecache_map_bank *tiers_map_banks(const struct vm_view *v)
{
	VM_ASSERT(v->hdr->bank_off % 8 == 0);
	VM_ASSERT(v->hdr->bank_off + v->hdr->n_banks * sizeof(struct moecache_map_bank) <=
		  v->map_len);
	return (const void *)((const char *)v->map_base + v->hdr->bank_off);
}

/* The bank holding global slot s, by the map region's table. */
static __u32 tiers_bank_of(const struct vm_view *v, __u32 s)
{
	const struct moecache_map_bank *mb = tiers_map_banks(v);
	__u32 i;

	for (i = 0; i < v->hdr->n_banks; i++)
		if (s >= mb[i].slot_begin && s < mb[i].slot_begin + mb[i].n_slots)
			return i;
	VM_FAIL("slot %u is in no bank", s);
}

/* The bytes of global slot s in its bank's object, through the agent's mapping. */
static unsigned char *tiers_slot_mem(const struct vm_view *v, struct tiers_bank *tb, __u32 s)
{
	__u32 b = tiers_bank_of(v, s);

	return tb[b].mem + (size_t)(s - tb[b].desc.slot_begin) * tb[b].desc.slot_stride;
}

/* ---- basic ------------------------------------------------------------- */

static void basic_tiers_info_max_banks(struct vm_ctx *ctx)
{
	struct moecache_info info;
	unsigned long long p;

	vm_get_info(&info);
	VM_ASSERT(info.max_banks >= 1);
	VM_EQ(info.pad, 0);
	if (vm_param_read("max_banks", &p))
		VM_EQ(info.max_banks, p);
}

static void basic_tiers_bank_table(struct vm_ctx *ctx)
{
	const struct moecache_map_bank *mb;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 i, seq, begin = 0;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(c.att.n_slots, 8);
	VM_EQ(c.hdr->n_banks, 3);
	mb = tiers_map_banks(&c);
	for (i = 0; i < 3; i++) {
		VM_EQ(mb[i].slot_begin, begin);
		VM_EQ(mb[i].n_slots, tiers_layout3[i].n_slots);
		VM_EQ(mb[i].tier, tiers_layout3[i].tier);
		VM_EQ(mb[i].backend, tiers_layout3[i].backend);
		VM_EQ(mb[i].device, tiers_layout3[i].device);
		VM_EQ(mb[i].flags, 0);
		begin += mb[i].n_slots;
	}
	for (i = 0; i < 3; i++) {
		seq = vm_load32(&c.hdr->seq);
		VM_EQ(c.hdr->flags & MOECACHE_POOL_BANK, 0);
		tiers_bank_set(&a, &tb[i], i, tiers_layout3[i].n_slots, i);
		/* One change of the map, under its seq. */
		VM_EQ(vm_load32(&c.hdr->seq), seq + 2);
		VM_EQ(mb[i].backend, MOECACHE_BACKEND_CPU);
		VM_EQ(mb[i].device, i);
		VM_EQ(mb[i].flags, MOECACHE_MAP_BANK_SET);
		/* BANK_SET writes the bank's layout back. */
		VM_EQ(tb[i].desc.tier, tiers_layout3[i].tier);
		VM_EQ(tb[i].desc.slot_begin, mb[i].slot_begin);
		VM_EQ(tb[i].desc.n_slots, mb[i].n_slots);
	}
	/* MOECACHE_POOL_BANK once every bank is set. */
	VM_EQ(c.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	for (i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_tiers_bank_get_index(struct vm_ctx *ctx)
{
	struct moecache_bank got;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	unsigned char *view;
	__u32 i;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_bank_set(&a, &tb[1], 1, 3, 1);
	/* Banks not set yet have nothing to hand out. */
	memset(&got, 0, sizeof(got));
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got), ENODATA);
	got.index = 2;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got), ENODATA);
	tiers_bank_set(&a, &tb[0], 0, 2, 0);
	tiers_bank_set(&a, &tb[2], 2, 3, 2);
	for (i = 0; i < 3; i++) {
		memset(tb[i].mem, 0x10 + i, tb[i].len);
		memset(&got, 0, sizeof(got));
		got.index = i;
		VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
		VM_EQ(got.index, i);
		VM_EQ(got.tier, tiers_layout3[i].tier);
		VM_EQ(got.n_slots, tiers_layout3[i].n_slots);
		VM_EQ(got.slot_begin, tb[i].desc.slot_begin);
		VM_EQ(got.backend, MOECACHE_BACKEND_CPU);
		VM_EQ(got.device, i);
		VM_EQ(got.bank_bytes, tb[i].len);
		/* The client's file is this bank's object, read-only. */
		view = mmap(NULL, tb[i].len, PROT_READ, MAP_SHARED, got.fd, 0);
		VM_ASSERT(view != MAP_FAILED);
		VM_EQ(view[0], 0x10 + i);
		VM_EQ(view[tb[i].len - 1], 0x10 + i);
		VM_ASSERT(mmap(NULL, tb[i].len, PROT_READ | PROT_WRITE, MAP_SHARED, got.fd, 0) ==
			  MAP_FAILED);
		munmap(view, tb[i].len);
		close(got.fd);
	}
	for (i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_tiers_acquire_bank_slots(struct vm_ctx *ctx)
{
	/* One expert per bank: layer 1, experts 3, 4, 5 in slots 1, 4, 7. */
	const __u32 experts[] = {3, 4, 5}, where[] = {1, 4, 7};
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 slots[3], i;
	struct moecache_acquire acq;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	for (i = 0; i < 3; i++) {
		vm_evict(&a, where[i], 1, experts[i], NULL);
		memset(tiers_slot_mem(&a, tb, where[i]), 0x40 + experts[i], a.att.expert_bytes);
		vm_commit1(&a, where[i], 1, experts[i], 0);
	}
	vm_acquire(&c, 1, experts, 3, slots, 0, &acq);
	VM_EQ(acq.n_pinned, 3);
	for (i = 0; i < 3; i++) {
		VM_EQ(slots[i], where[i]);
		VM_EQ(tiers_bank_of(&c, slots[i]), i);
		VM_EQ(tiers_slot_mem(&a, tb, slots[i])[0], 0x40 + experts[i]);
	}
	vm_check_map_consistent(&c);
	vm_release(&c, slots, 3);
	for (i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

/* A struct moecache_pool_create of the ABI 2 size, as an old caller passes it. */
#define TIERS_IOC_POOL_CREATE_SIZED(size)                                                          \
	_IOC(_IOC_WRITE, MOECACHE_IOC_MAGIC, _IOC_NR(MOECACHE_IOC_POOL_CREATE), (size))

static void basic_tiers_ver0_one_bank(struct vm_ctx *ctx)
{
	const struct moecache_map_bank *mb;
	struct moecache_pool_create pc;
	struct moecache_bank got;
	struct tiers_bank tb;
	struct vm_view a, c;
	int fd = vm_open_dev();

	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	/* What an ABI 2 caller has past its struct is not read. */
	pc.n_banks = 7;
	pc.banks = 1;
	VM_OK(ioctl(fd, TIERS_IOC_POOL_CREATE_SIZED(MOECACHE_POOL_CREATE_SIZE_VER0), &pc));
	close(fd);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(c.hdr->n_banks, 1);
	mb = tiers_map_banks(&c);
	VM_EQ(mb[0].slot_begin, 0);
	VM_EQ(mb[0].n_slots, vm_geom_default.n_slots);
	VM_EQ(mb[0].tier, 0);
	VM_EQ(mb[0].backend, MOECACHE_BACKEND_NONE);
	tiers_bank_set(&a, &tb, 0, vm_geom_default.n_slots, 5);
	VM_EQ(c.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
	close(got.fd);
	VM_EQ(got.slot_begin, 0);
	VM_EQ(got.n_slots, vm_geom_default.n_slots);
	VM_EQ(got.tier, 0);
	VM_EQ(got.device, 5);
	got.index = 1;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got), EINVAL);
	tiers_bank_put(&tb);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

/* ---- bad input --------------------------------------------------------- */

struct tiers_bad_layout {
	const char *what;
	__u32 n_banks;
	struct moecache_bank_layout banks[TIERS_MAX_BANKS];
	__u32 n_slots;		 /* 0: the sum of the banks' */
	__u32 pad2;
	int banks_ptr;		 /* 0: the array; 1: NULL; 2: unreadable */
	unsigned int size;	 /* 0: sizeof(struct moecache_pool_create) */
	int err;
};

static void bad_input_tiers_layout(struct vm_ctx *ctx)
{
	const struct moecache_bank_layout ok0 = {.n_slots = 4, .tier = 0};
	const struct moecache_bank_layout ok1 = {.n_slots = 4, .tier = 1};
	const struct tiers_bad_layout cases[] = {
	    {"a bank of no slot", 2, {ok0, {.n_slots = 0, .tier = 1}}, 4, .err = EINVAL},
	    {"slots summing short of n_slots", 2, {ok0, ok1}, 9, .err = EINVAL},
	    {"slots summing past n_slots", 2, {ok0, ok1}, 7, .err = EINVAL},
	    {"tiers going down", 2, {ok1, ok0}, .err = EINVAL},
	    {"layout flags", 2, {ok0, {.n_slots = 4, .tier = 1, .flags = 1}}, .err = EINVAL},
	    {"layout pad", 2, {ok0, {.n_slots = 4, .tier = 1, .pad = 1}}, .err = EINVAL},
	    {"an unknown backend", 2, {ok0, {.n_slots = 4, .tier = 1, .backend = 4}}, .err = EINVAL},
	    {"two banks on one device",
	     2,
	     {{.n_slots = 4, .backend = MOECACHE_BACKEND_ROCM, .device = 3},
	      {.n_slots = 4, .tier = 1, .backend = MOECACHE_BACKEND_ROCM, .device = 3}},
	     .err = EINVAL},
	    {"pad2", 2, {ok0, ok1}, .pad2 = 1, .err = EINVAL},
	    {"banks without n_banks", 0, {ok0}, 8, .err = EINVAL},
	    {"n_banks without banks", 2, {ok0, ok1}, .banks_ptr = 1, .err = EINVAL},
	    {"an unreadable layout", 2, {ok0, ok1}, .banks_ptr = 2, .err = EFAULT},
	    {"a size between ABI 2's and ours", 2, {ok0, ok1},
	     .size = MOECACHE_POOL_CREATE_SIZE_VER0 + 8, .err = EINVAL},
	    {"a size short of ABI 2's", 0, {ok0}, 8, .size = MOECACHE_POOL_CREATE_SIZE_VER0 - 8,
	     .err = EINVAL},
	};
	struct moecache_pool_create pc;
	struct moecache_info before, after;
	unsigned int size;
	void *unreadable;
	size_t i;
	__u32 b;
	int fd = vm_open_dev();

	unreadable = mmap(NULL, ctx->page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VM_ASSERT(unreadable != MAP_FAILED);
	vm_get_info(&before);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tiers_bad_layout *t = &cases[i];

		vm_fill_create(&pc, ctx->pool, &vm_geom_default);
		pc.n_banks = t->n_banks;
		pc.n_slots = t->n_slots;
		for (b = 0; !t->n_slots && b < t->n_banks; b++)
			pc.n_slots += t->banks[b].n_slots;
		pc.pad2 = t->pad2;
		pc.banks = t->banks_ptr == 1 ? 0
			   : t->banks_ptr == 2 ? (uintptr_t)unreadable
					       : (uintptr_t)t->banks;
		size = t->size ? t->size : sizeof(pc);
		errno = 0;
		if (ioctl(fd, TIERS_IOC_POOL_CREATE_SIZED(size), &pc) != -1 || errno != t->err)
			VM_FAIL("%s: POOL_CREATE gave %s, want %s", t->what, vm_errname(errno),
				vm_errname(t->err));
		vm_expect_no_pool(ctx->pool);
	}
	vm_get_info(&after);
	VM_EQ(after.n_pools, before.n_pools);
	VM_EQ(after.host_bytes_used, before.host_bytes_used);
	munmap(unreadable, ctx->page_size);
	close(fd);
}

static void bad_input_tiers_too_many_banks(struct vm_ctx *ctx)
{
	struct moecache_bank_layout *banks;
	struct moecache_pool_create pc;
	struct moecache_info info;
	__u32 i, n;
	int fd = vm_open_dev();

	vm_get_info(&info);
	n = info.max_banks + 1;
	banks = calloc(n, sizeof(*banks));
	VM_ASSERT(banks);
	for (i = 0; i < n; i++)
		banks[i].n_slots = 1;
	vm_fill_create(&pc, ctx->pool, &vm_geom_default);
	pc.n_slots = n;
	pc.n_banks = n;
	pc.banks = (uintptr_t)banks;
	VM_ERR(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc), E2BIG);
	vm_expect_no_pool(ctx->pool);
	/* max_banks of them is a pool. */
	pc.n_slots = n - 1;
	pc.n_banks = n - 1;
	VM_OK(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
	free(banks);
	close(fd);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_tiers_bank_set(struct vm_ctx *ctx)
{
	struct moecache_bank b, got;
	struct tiers_bank tb, tb0;
	struct vm_view a, c;
	int memfd;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	memfd = tiers_memfd(8 * a.att.expert_bytes);
	memset(&b, 0, sizeof(b));
	b.fd = memfd;
	b.backend = MOECACHE_BACKEND_CPU;
	b.slot_stride = a.att.expert_bytes;
	b.bank_bytes = 8 * a.att.expert_bytes;
	/* Past the pool's banks. */
	b.index = 3;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	b.index = 0xffffffff;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* Bank 1's layout names CPU device 1: another device, or backend, is refused. */
	b.index = 1;
	b.device = 2;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	b.device = 1;
	b.backend = MOECACHE_BACKEND_ROCM;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	b.backend = MOECACHE_BACKEND_CPU;
	/* An object smaller than this bank's slots. */
	b.bank_bytes = 2 * a.att.expert_bytes;
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	b.bank_bytes = 8 * a.att.expert_bytes;
	/* Bank 2 (agent's choice) may not take the device bank 1's layout names. */
	b.index = 2;
	VM_REFUSED(&a, EEXIST, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* Nor the device, or the object, of bank 0 once set. */
	tiers_bank_set(&a, &tb0, 0, 3, 0); /* an object of 3 slots for bank 0's 2 */
	b.device = 0;
	VM_REFUSED(&a, EEXIST, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	b.device = 7;
	b.fd = tb0.fd;
	b.bank_bytes = tb0.len;
	VM_REFUSED(&a, EEXIST, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	/* The object bank 2 may take, and BANK_GET of an index past the banks. */
	b.fd = memfd;
	b.bank_bytes = 8 * a.att.expert_bytes;
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	memset(&got, 0, sizeof(got));
	got.index = 3;
	VM_REFUSED(&a, EINVAL, ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_GET, &got));
	/* Setting bank 0 again, on its own device, is a replacement. */
	VM_EQ(tiers_try_bank_set(&a, &tb, 0, 2, 0), 0);
	tiers_bank_put(&tb);
	tiers_bank_put(&tb0);
	close(memfd);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_tiers_replace_pinned_bank(struct vm_ctx *ctx)
{
	const __u32 e0 = 2, e2 = 9;
	struct tiers_bank tb[3], again;
	struct vm_view a, c;
	struct moecache_acquire acq;
	__u32 slot;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	vm_fill(&a, 0, 0, e0);
	vm_fill(&a, 6, 0, e2);
	vm_acquire(&c, 0, &e0, 1, &slot, 0, &acq);
	VM_EQ(slot, 0);
	/* Bank 0 holds a pin: it cannot be replaced. */
	{
		struct moecache_bank b = tb[0].desc;

		b.fd = tiers_memfd(tb[0].len);
		VM_REFUSED(&a, EBUSY, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
		close(b.fd);
	}
	/* Bank 2 may: its residency goes, bank 0's stays. */
	tiers_bank_set(&a, &again, 2, 3, 2);
	VM_EQ(vm_load32(&c.map[vm_idx(&c, 0, e2)]), MOECACHE_NONE);
	VM_EQ(vm_load32(&c.owner[6]), MOECACHE_NONE);
	VM_EQ(vm_load32(&c.map[vm_idx(&c, 0, e0)]), 0);
	vm_check_map_consistent(&c);
	vm_release(&c, &slot, 1);
	tiers_bank_put(&again);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}


/* ---- moves ------------------------------------------------------------- */

/* The byte expert (layer, e)'s copy holds in every slot it is in. */
static unsigned char tiers_pattern(__u32 layer, __u32 e)
{
	return (unsigned char)(0x21 + layer * 16 + e);
}

static int tiers_try_evict(const struct vm_view *a, __u32 slot, __u32 layer, __u32 expert,
			   __u32 flags)
{
	struct moecache_evict ev = {.slot = slot, .layer = layer, .expert = expert, .flags = flags};

	return ioctl(a->fd, MOECACHE_IOC_EVICT, &ev) < 0 ? -errno : 0;
}

static int tiers_try_fills(const struct vm_view *a, unsigned long cmd, __u32 slot, __u32 layer,
			   __u32 expert)
{
	struct moecache_fill fill = {.slot = slot, .layer = layer, .expert = expert};
	struct moecache_fill_batch batch = {.count = 1, .fills = (uintptr_t)&fill};

	return ioctl(a->fd, cmd, &batch) < 0 ? -errno : 0;
}

/* EVICT with MOVE, the copy written, COMMIT: (layer, e) now lives in slot. */
static void tiers_move(const struct vm_view *a, struct tiers_bank *tb, __u32 slot, __u32 layer,
		       __u32 e)
{
	int ret = tiers_try_evict(a, slot, layer, e, MOECACHE_EVICT_MOVE);

	if (ret)
		VM_FAIL("EVICT_MOVE of (%u, %u) to slot %u: %s", layer, e, slot, vm_errname(-ret));
	memset(tiers_slot_mem(a, tb, slot), tiers_pattern(layer, e), a->att.expert_bytes);
	vm_commit1(a, slot, layer, e, 0);
}

/* A plain fill with the expert's pattern. */
static void tiers_fill(const struct vm_view *a, struct tiers_bank *tb, __u32 slot, __u32 layer,
		       __u32 e)
{
	vm_evict(a, slot, layer, e, NULL);
	memset(tiers_slot_mem(a, tb, slot), tiers_pattern(layer, e), a->att.expert_bytes);
	vm_commit1(a, slot, layer, e, 0);
}

/* Slots whose owner[] names idx, resident or filling. */
static __u32 tiers_slots_of(const struct vm_view *v, __u32 idx, bool filling)
{
	__u32 s, n = 0, want = filling ? (MOECACHE_OWNER_FILLING | idx) : idx;

	for (s = 0; s < v->att.n_slots; s++)
		n += vm_load32(&v->owner[s]) == want;
	return n;
}

/* The whole slot holds the expert's pattern. */
static void tiers_check_bytes(const unsigned char *mem, size_t len, unsigned char want,
			      const char *what)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (mem[i] != want)
			VM_FAIL("%s: byte %zu is 0x%02x, want 0x%02x", what, i, mem[i], want);
}

static void basic_tiers_move_promote_demote(struct vm_ctx *ctx)
{
	const __u32 layer = 3, e = 7;
	struct moecache_stats before, after;
	struct moecache_acquire acq;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 idx, slot, seq;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	idx = vm_idx(&c, layer, e);
	tiers_fill(&a, tb, 6, layer, e);
	vm_stats(&c, MOECACHE_NONE, &before);
	/* Promotion into tier 0: the expert stays in slot 6 while slot 1 fills. */
	VM_EQ(tiers_try_evict(&a, 1, layer, e, MOECACHE_EVICT_MOVE), 0);
	VM_EQ(vm_load32(&c.map[idx]), 6);
	VM_EQ(vm_load32(&c.owner[6]), idx);
	VM_EQ(vm_load32(&c.owner[1]), MOECACHE_OWNER_FILLING | idx);
	vm_acquire(&c, layer, &e, 1, &slot, 0, &acq);
	VM_EQ(acq.n_hits, 1);
	VM_EQ(slot, 6);
	vm_release(&c, &slot, 1);
	memset(tiers_slot_mem(&a, tb, 1), tiers_pattern(layer, e), a.att.expert_bytes);
	seq = vm_load32(&c.hdr->seq);
	vm_commit1(&a, 1, layer, e, 0);
	/* One change of the map: the new slot published, the old one freed. */
	VM_EQ(vm_load32(&c.hdr->seq), seq + 2);
	VM_EQ(vm_load32(&c.map[idx]), 1);
	VM_EQ(vm_load32(&c.owner[1]), idx);
	VM_EQ(vm_load32(&c.owner[6]), MOECACHE_NONE);
	vm_check_map_consistent(&c);
	vm_stats(&c, MOECACHE_NONE, &after);
	VM_EQ(after.resident, before.resident);
	VM_EQ(after.filling, 0);
	VM_EQ(after.evictions, before.evictions);
	VM_EQ(after.commits, before.commits + 1);
	vm_acquire(&c, layer, &e, 1, &slot, 0, &acq);
	VM_EQ(slot, 1);
	VM_EQ(tiers_bank_of(&c, slot), 0);
	vm_release(&c, &slot, 1);
	/* Demotion to tier 1. */
	tiers_move(&a, tb, 3, layer, e);
	VM_EQ(vm_load32(&c.map[idx]), 3);
	VM_EQ(vm_load32(&c.owner[1]), MOECACHE_NONE);
	VM_EQ(tiers_slots_of(&c, idx, false), 1);
	vm_check_map_consistent(&c);
	/* The freed slots hold no pin: they are taken at once. */
	vm_fill(&a, 6, 0, 0);
	vm_fill(&a, 1, 0, 1);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_tiers_move_of_cold_expert_fills(struct vm_ctx *ctx)
{
	const __u32 e = 4;
	struct moecache_stats st;
	struct tiers_bank tb[3];
	struct vm_view a, c;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	/* MOVE of an expert resident nowhere is an ordinary fill. */
	tiers_move(&a, tb, 2, 0, e);
	VM_EQ(vm_load32(&c.map[vm_idx(&c, 0, e)]), 2);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.resident, 1);
	VM_EQ(st.commits, 1);
	vm_check_map_consistent(&c);
	for (unsigned int i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_tiers_move(struct vm_ctx *ctx)
{
	const __u32 layer = 1, e = 2, other = 3;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 idx;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	idx = vm_idx(&a, layer, e);
	tiers_fill(&a, tb, 5, layer, e);
	/* Without MOVE, a resident target is EEXIST, as it always was. */
	VM_REFUSED(&a, EEXIST, tiers_try_evict(&a, 0, layer, e, 0) ? -1 : 0);
	/* An unknown flag; MOVE of nothing. */
	VM_REFUSED(&a, EINVAL, tiers_try_evict(&a, 0, layer, e, 2) ? -1 : 0);
	VM_REFUSED(&a, EINVAL,
		   tiers_try_evict(&a, 0, MOECACHE_NONE, MOECACHE_NONE, MOECACHE_EVICT_MOVE) ? -1
											    : 0);
	/* MOVE onto the slot it is in. */
	VM_REFUSED(&a, EEXIST, tiers_try_evict(&a, 5, layer, e, MOECACHE_EVICT_MOVE) ? -1 : 0);
	VM_EQ(tiers_try_evict(&a, 0, layer, e, MOECACHE_EVICT_MOVE), 0);
	/* One move at a time; the old slot is not a victim meanwhile. */
	VM_REFUSED(&a, EEXIST, tiers_try_evict(&a, 1, layer, e, MOECACHE_EVICT_MOVE) ? -1 : 0);
	VM_REFUSED(&a, EBUSY, tiers_try_evict(&a, 5, layer, other, 0) ? -1 : 0);
	VM_REFUSED(&a, EBUSY,
		   tiers_try_evict(&a, 5, MOECACHE_NONE, MOECACHE_NONE, 0) ? -1 : 0);
	/* A COMMIT naming the old slot, or another expert, matches nothing. */
	VM_REFUSED(&a, EINVAL, tiers_try_fills(&a, MOECACHE_IOC_COMMIT, 5, layer, e) ? -1 : 0);
	VM_REFUSED(&a, EINVAL, tiers_try_fills(&a, MOECACHE_IOC_COMMIT, 0, layer, other) ? -1 : 0);
	VM_EQ(tiers_slots_of(&a, idx, true), 1);
	VM_EQ(vm_load32(&a.map[idx]), 5);
	for (unsigned int i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_tiers_move_abort(struct vm_ctx *ctx)
{
	const __u32 layer = 2, e = 9;
	struct moecache_stats before, after;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 idx;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	idx = vm_idx(&c, layer, e);
	tiers_fill(&a, tb, 0, layer, e);
	vm_stats(&c, MOECACHE_NONE, &before);
	VM_EQ(tiers_try_evict(&a, 7, layer, e, MOECACHE_EVICT_MOVE), 0);
	VM_EQ(tiers_try_fills(&a, MOECACHE_IOC_ABORT, 7, layer, e), 0);
	/* The expert stays where it was; the new slot is free. */
	VM_EQ(vm_load32(&c.map[idx]), 0);
	VM_EQ(vm_load32(&c.owner[7]), MOECACHE_NONE);
	vm_check_map_consistent(&c);
	vm_stats(&c, MOECACHE_NONE, &after);
	VM_EQ(after.resident, before.resident);
	VM_EQ(after.filling, 0);
	VM_EQ(after.aborts, before.aborts + 1);
	tiers_check_bytes(tiers_slot_mem(&a, tb, 0), a.att.expert_bytes, tiers_pattern(layer, e),
			  "the expert's slot after the ABORT");
	/* And it may move again. */
	tiers_move(&a, tb, 7, layer, e);
	VM_EQ(vm_load32(&c.map[idx]), 7);
	for (unsigned int i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

struct tiers_mover {
	const char *pool;
	__u32 slot, layer, expert;
	struct vm_gate moving;
};

/* A second agent that starts a move and never finishes it. */
static void tiers_mover_run(void *arg)
{
	struct tiers_mover *m = arg;
	struct vm_view a;

	vm_attach(&a, m->pool, MOECACHE_ROLE_AGENT);
	if (tiers_try_evict(&a, m->slot, m->layer, m->expert, MOECACHE_EVICT_MOVE))
		_exit(1);
	vm_gate_pass(&m->moving);
	for (;;)
		pause();
}

static void lifetime_tiers_agent_killed_mid_move(struct vm_ctx *ctx)
{
	struct tiers_mover *m = vm_shared(sizeof(*m));
	const __u32 layer = 0, e = 5;
	struct moecache_stats st;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 idx, slot;
	pid_t pid;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	idx = vm_idx(&c, layer, e);
	/* A demotion out of tier 0 is under way when the agent dies. */
	tiers_fill(&a, tb, 1, layer, e);
	vm_detach(&a);
	m->pool = ctx->pool;
	m->slot = 4;
	m->layer = layer;
	m->expert = e;
	vm_gate_open(&m->moving);
	pid = vm_spawn(tiers_mover_run, m);
	vm_gate_wait(&m->moving, 5000, "the mover's EVICT_MOVE");
	VM_EQ(vm_load32(&c.owner[4]), MOECACHE_OWNER_FILLING | idx);
	vm_kill(pid, "the mover");
	/* In exactly one bank, the one it was in, whole; never half-copied. */
	VM_EQ(vm_load32(&c.map[idx]), 1);
	VM_EQ(tiers_slots_of(&c, idx, false), 1);
	VM_EQ(tiers_slots_of(&c, idx, true), 0);
	VM_EQ(vm_load32(&c.owner[4]), MOECACHE_NONE);
	vm_check_map_consistent(&c);
	vm_stats(&c, MOECACHE_NONE, &st);
	VM_EQ(st.filling, 0);
	VM_EQ(st.resident, 1);
	tiers_check_bytes(tiers_slot_mem(&c, tb, 1), c.att.expert_bytes, tiers_pattern(layer, e),
			  "the expert's slot after the agent died");
	/* A new agent moves it. */
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_move(&a, tb, 4, layer, e);
	vm_acquire(&c, layer, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 4);
	vm_release(&c, &slot, 1);
	vm_gate_close(&m->moving);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_tiers_moved_slot_pinned(struct vm_ctx *ctx)
{
	const __u32 layer = 1, e = 6, next = 7;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 slot, again;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	tiers_fill(&a, tb, 3, layer, e);
	vm_acquire(&c, layer, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 3);
	/* Promoted while a client reads its old slot. */
	tiers_move(&a, tb, 0, layer, e);
	VM_EQ(vm_load32(&c.owner[3]), MOECACHE_NONE);
	VM_EQ(vm_load32(&c.pins[3]), 1);
	/* The old slot is free but pinned: not a copy destination. */
	VM_REFUSED(&a, EBUSY, tiers_try_evict(&a, 3, layer, next, 0) ? -1 : 0);
	VM_REFUSED(&a, EBUSY, tiers_try_evict(&a, 3, layer, next, MOECACHE_EVICT_MOVE) ? -1 : 0);
	tiers_check_bytes(tiers_slot_mem(&a, tb, 3), a.att.expert_bytes, tiers_pattern(layer, e),
			  "the pinned old slot");
	/* A new ACQUIRE gets the new slot. */
	vm_acquire(&c, layer, &e, 1, &again, 0, NULL);
	VM_EQ(again, 0);
	vm_release(&c, &again, 1);
	vm_release(&c, &slot, 1);
	tiers_fill(&a, tb, 3, layer, next);
	vm_check_map_consistent(&c);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

/* A client with fast pins: its pins region, and the protocol of uapi/moecache.h. */
struct tiers_fast {
	struct vm_view v;
	__u32 *pins;
	size_t len;
};

static void tiers_fast_attach(struct tiers_fast *f, const char *pool)
{
	int ret = vm_try_attach_fd_flags(&f->v, vm_open_dev(), pool, MOECACHE_ROLE_CLIENT,
					 MOECACHE_ATTACH_FAST_PINS);

	if (ret)
		VM_FAIL("ATTACH with FAST_PINS: %s", vm_errname(-ret));
	f->len = f->v.att.off.pins_size;
	f->pins = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->v.fd,
		       (off_t)f->v.att.off.pins_offset);
	VM_ASSERT(f->pins != MAP_FAILED);
}

/* libmoecache's fast pin (lib/protocol/mc_fastpin.h): the slot pinned for idx, or NONE. */
static __u32 tiers_fast_pin(struct tiers_fast *f, __u32 idx)
{
	return mc_fast_pin_one(f->pins, f->v.map, f->v.att.n_slots, idx);
}

static void tiers_fast_unpin(struct tiers_fast *f, __u32 s)
{
	mc_fast_pin_put(f->pins, s);
}

static void tiers_fast_detach(struct tiers_fast *f)
{
	munmap(f->pins, f->len);
	vm_detach(&f->v);
}

static void lifetime_tiers_moved_slot_fast_pinned(struct vm_ctx *ctx)
{
	const __u32 layer = 2, e = 1, next = 2;
	struct tiers_bank tb[3], again;
	struct tiers_fast f;
	struct vm_view a;
	__u32 slot;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_fast_attach(&f, ctx->pool);
	tiers_set_all(&a, tb);
	tiers_fill(&a, tb, 1, layer, e);
	slot = tiers_fast_pin(&f, vm_idx(&a, layer, e));
	VM_EQ(slot, 1);
	/* Demoted while fast-pinned: the move itself is not held up. */
	tiers_move(&a, tb, 6, layer, e);
	VM_EQ(vm_load32(&a.owner[1]), MOECACHE_NONE);
	/* The old slot is not reused, nor its bank replaced, until the pin goes. */
	VM_REFUSED(&a, EBUSY, tiers_try_evict(&a, 1, layer, next, 0) ? -1 : 0);
	VM_REFUSED(&a, EBUSY, tiers_try_evict(&a, 1, MOECACHE_NONE, MOECACHE_NONE, 0) ? -1 : 0);
	VM_EQ(tiers_try_bank_set(&a, &again, 0, 2, 0), -EBUSY);
	tiers_check_bytes(tiers_slot_mem(&a, tb, 1), a.att.expert_bytes, tiers_pattern(layer, e),
			  "the fast-pinned old slot");
	/* A fast pin taken now finds the new slot. */
	VM_EQ(tiers_fast_pin(&f, vm_idx(&a, layer, e)), 6);
	tiers_fast_unpin(&f, 6);
	tiers_fast_unpin(&f, 1);
	tiers_fill(&a, tb, 1, layer, next);
	vm_check_map_consistent(&a);
	tiers_fast_detach(&f);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void lifetime_tiers_bank_set_drops_moves(struct vm_ctx *ctx)
{
	const __u32 layer = 0, in = 3, out = 8;
	struct tiers_bank tb[3], again;
	struct vm_view a, c;
	__u32 i;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	/* One move into bank 0, one out of it. */
	tiers_fill(&a, tb, 6, layer, in);
	tiers_fill(&a, tb, 1, layer, out);
	VM_EQ(tiers_try_evict(&a, 0, layer, in, MOECACHE_EVICT_MOVE), 0);
	VM_EQ(tiers_try_evict(&a, 7, layer, out, MOECACHE_EVICT_MOVE), 0);
	tiers_bank_set(&a, &again, 0, 2, 0);
	/* The one moving in stays where it was; the one moving out is gone with the bank. */
	VM_EQ(vm_load32(&c.map[vm_idx(&c, layer, in)]), 6);
	VM_EQ(vm_load32(&c.map[vm_idx(&c, layer, out)]), MOECACHE_NONE);
	VM_EQ(vm_load32(&c.owner[0]), MOECACHE_NONE);
	VM_EQ(vm_load32(&c.owner[7]), MOECACHE_NONE);
	vm_check_map_consistent(&c);
	VM_EQ(tiers_try_fills(&a, MOECACHE_IOC_COMMIT, 0, layer, in), -EINVAL);
	VM_EQ(tiers_try_fills(&a, MOECACHE_IOC_COMMIT, 7, layer, out), -EINVAL);
	/* Both may be moved or filled again. */
	tiers_bank_put(&tb[0]);
	tb[0] = again;
	tiers_move(&a, tb, 7, layer, in);
	tiers_move(&a, tb, 0, layer, out);
	for (i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

/* ---- lifetime ---------------------------------------------------------- */

static void lifetime_tiers_warm_restart(struct vm_ctx *ctx)
{
	const __u32 experts[] = {1, 2, 3}, where[] = {1, 3, 5};
	struct moecache_bank got;
	struct tiers_bank tb[3];
	struct vm_view a, a2;
	unsigned char *view;
	__u32 i;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	for (i = 0; i < 3; i++) {
		vm_evict(&a, where[i], 2, experts[i], NULL);
		memset(tiers_slot_mem(&a, tb, where[i]), 0x70 + i, a.att.expert_bytes);
		vm_commit1(&a, where[i], 2, experts[i], 0);
	}
	for (i = 0; i < 3; i++)
		tiers_bank_put(&tb[i]);
	vm_detach(&a);
	/* The driver kept every bank: a new agent gets each back. */
	vm_attach(&a2, ctx->pool, MOECACHE_ROLE_AGENT);
	VM_EQ(a2.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	for (i = 0; i < 3; i++) {
		memset(&got, 0, sizeof(got));
		got.index = i;
		VM_OK(ioctl(a2.fd, MOECACHE_IOC_BANK_GET, &got));
		VM_EQ(got.device, i);
		VM_EQ(got.n_slots, tiers_layout3[i].n_slots);
		view = mmap(NULL, got.bank_bytes, PROT_READ, MAP_SHARED, got.fd, 0);
		VM_ASSERT(view != MAP_FAILED);
		VM_EQ(view[(size_t)(where[i] - got.slot_begin) * got.slot_stride], 0x70 + i);
		munmap(view, got.bank_bytes);
		close(got.fd);
		VM_EQ(vm_load32(&a2.map[vm_idx(&a2, 2, experts[i])]), where[i]);
	}
	vm_detach(&a2);
	vm_pool_destroy(ctx->pool);
}

/* ---- statistics -------------------------------------------------------- */

static void tiers_bank_stats(const struct vm_view *v, __u32 bank, struct moecache_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->layer = MOECACHE_NONE;
	st->flags = MOECACHE_STATS_BANK;
	st->bank = bank;
	VM_OK(ioctl(v->fd, MOECACHE_IOC_STATS, st));
	VM_EQ(st->flags, MOECACHE_STATS_BANK);
	VM_EQ(st->bank, bank);
}

static void basic_tiers_stats_per_bank(struct vm_ctx *ctx)
{
	const __u32 e = 2, f = 3;
	struct moecache_stats pool, b0, b1, b2;
	struct tiers_bank tb[3];
	struct vm_view a, c;
	__u32 slot, slots[2];
	const __u32 both[2] = {e, f};

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	/* e filled in bank 1, hit twice, promoted to bank 0; f filled in bank 2, pinned. */
	tiers_fill(&a, tb, 2, 0, e);
	tiers_fill(&a, tb, 5, 0, f);
	vm_acquire(&c, 0, &e, 1, &slot, 0, NULL);
	vm_release(&c, &slot, 1);
	vm_acquire(&c, 0, both, 2, slots, 0, NULL);
	vm_release(&c, &slots[0], 1);
	tiers_move(&a, tb, 0, 0, e);
	vm_acquire(&c, 0, &e, 1, &slot, 0, NULL);
	VM_EQ(slot, 0);
	vm_stats(&c, MOECACHE_NONE, &pool);
	tiers_bank_stats(&c, 0, &b0);
	tiers_bank_stats(&c, 1, &b1);
	tiers_bank_stats(&c, 2, &b2);
	/* The counters of each bank's slots. */
	VM_EQ(b0.hits, 1);
	VM_EQ(b1.hits, 2);
	VM_EQ(b2.hits, 1);
	VM_EQ(b0.hits + b1.hits + b2.hits, pool.hits);
	VM_EQ(b0.commits, 1);
	VM_EQ(b1.commits, 1);
	VM_EQ(b2.commits, 1);
	VM_EQ(pool.commits, 3);
	/* The move is an eviction of the bank it left only. */
	VM_EQ(b1.evictions, 1);
	VM_EQ(b0.evictions + b2.evictions + pool.evictions, 0);
	/* Slot state, per bank. */
	VM_EQ(b0.resident, 1);
	VM_EQ(b1.resident, 0);
	VM_EQ(b2.resident, 1);
	VM_EQ(b0.pinned_slots, 1);
	VM_EQ(b0.pins, 1);
	VM_EQ(b2.pinned_slots, 1);
	VM_EQ(b1.pinned_slots, 0);
	VM_EQ(b0.pinned_slots + b1.pinned_slots + b2.pinned_slots, pool.pinned_slots);
	VM_EQ(tiers_try_evict(&a, 7, 1, 1, 0), 0);
	tiers_bank_stats(&c, 2, &b2);
	VM_EQ(b2.filling, 1);
	/* The other counters stay the pool's. */
	VM_EQ(b2.misses, pool.misses);
	VM_EQ(b2.n_clients, pool.n_clients);
	vm_release(&c, &slot, 1);
	vm_release(&c, &slots[1], 1);
	for (slot = 0; slot < 3; slot++)
		tiers_bank_put(&tb[slot]);
	vm_detach(&a);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void bad_input_tiers_stats(struct vm_ctx *ctx)
{
	struct moecache_stats st;
	struct vm_view c;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	memset(&st, 0, sizeof(st));
	st.layer = MOECACHE_NONE;
	st.flags = MOECACHE_STATS_BANK;
	st.bank = 3;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_STATS, &st), EINVAL);
	/* Bank counters are not kept per layer. */
	st.bank = 0;
	st.layer = 0;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_STATS, &st), EINVAL);
	st.layer = MOECACHE_NONE;
	st.flags = 2;
	VM_ERR(ioctl(c.fd, MOECACHE_IOC_STATS, &st), EINVAL);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

/* ---- concurrency ------------------------------------------------------- */

#define TIERS_RACE_MS 1500
#define TIERS_RACE_EXPERTS 4
#define TIERS_RACE_CLIENTS 3 /* the last one with fast pins */

struct tiers_race {
	char pool[MOECACHE_NAME_LEN];
	volatile int stop;
	unsigned long checks[TIERS_RACE_CLIENTS];
	struct vm_gate ready;
	int client;
};

/* The client's read-only views of every bank, by BANK_GET. */
static void tiers_views(const struct vm_view *v, unsigned char *views[3], size_t lens[3],
			__u64 *stride)
{
	struct moecache_bank got;
	__u32 i;

	for (i = 0; i < 3; i++) {
		memset(&got, 0, sizeof(got));
		got.index = i;
		VM_OK(ioctl(v->fd, MOECACHE_IOC_BANK_GET, &got));
		lens[i] = got.bank_bytes;
		views[i] = mmap(NULL, lens[i], PROT_READ, MAP_SHARED, got.fd, 0);
		VM_ASSERT(views[i] != MAP_FAILED);
		close(got.fd);
		*stride = got.slot_stride;
	}
}

/* Under a stable seq, no expert is resident in two slots. */
static void tiers_check_once_each(const struct vm_view *v)
{
	__u32 seq, s, o, seen[TIERS_RACE_EXPERTS];

	do {
		memset(seen, 0, sizeof(seen));
		seq = vm_load32(&v->hdr->seq);
		if (seq & 1)
			continue;
		for (s = 0; s < v->att.n_slots; s++) {
			o = vm_load32(&v->owner[s]);
			if (o < TIERS_RACE_EXPERTS)
				seen[o]++;
		}
	} while ((seq & 1) || vm_load32(&v->hdr->seq) != seq);
	for (o = 0; o < TIERS_RACE_EXPERTS; o++)
		VM_ASSERT_MSG(seen[o] <= 1, "expert %u is resident in %u slots at seq %u", o,
			      seen[o], seq);
}

static void tiers_race_client(void *arg)
{
	struct tiers_race *r = arg;
	const int me = r->client;
	const bool fast = me == TIERS_RACE_CLIENTS - 1;
	const __u32 experts[TIERS_RACE_EXPERTS] = {0, 1, 2, 3};
	__u32 slots[TIERS_RACE_EXPERTS], i, b;
	unsigned char *views[3];
	struct tiers_fast f;
	struct vm_view c;
	const struct vm_view *v;
	size_t lens[3];
	__u64 stride;
	char what[64];

	if (fast) {
		tiers_fast_attach(&f, r->pool);
		v = &f.v;
	} else {
		vm_attach(&c, r->pool, MOECACHE_ROLE_CLIENT);
		v = &c;
	}
	tiers_views(v, views, lens, &stride);
	vm_gate_pass(&r->ready);
	while (!r->stop) {
		if (fast) {
			for (i = 0; i < TIERS_RACE_EXPERTS; i++)
				slots[i] = tiers_fast_pin(&f, vm_idx(v, 0, experts[i]));
		} else {
			vm_acquire(v, 0, experts, TIERS_RACE_EXPERTS, slots, MOECACHE_ACQ_NO_QUEUE,
				   NULL);
		}
		for (i = 0; i < TIERS_RACE_EXPERTS; i++) {
			if (slots[i] == MOECACHE_NONE)
				continue;
			b = tiers_bank_of(v, slots[i]);
			snprintf(what, sizeof(what), "client %d: expert %u in slot %u", me,
				 experts[i], slots[i]);
			tiers_check_bytes(views[b] + (slots[i] - tiers_map_banks(v)[b].slot_begin) *
							 stride,
					  v->att.expert_bytes, tiers_pattern(0, experts[i]), what);
			r->checks[me]++;
			if (fast)
				tiers_fast_unpin(&f, slots[i]);
			else
				vm_release(v, &slots[i], 1);
		}
		tiers_check_once_each(v);
	}
}

static void concurrency_tiers_moves_under_readers(struct vm_ctx *ctx)
{
	struct tiers_race *r = vm_shared(sizeof(*r));
	const __u32 start[TIERS_RACE_EXPERTS] = {0, 2, 5, 6};
	pid_t pids[TIERS_RACE_CLIENTS];
	unsigned long moves = 0, busy = 0;
	struct tiers_bank tb[3];
	struct vm_view a;
	__u32 e, cur, s, k, from;
	uint64_t until;
	int i, ret;

	tiers_create(ctx->pool, tiers_layout3, 3);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	tiers_set_all(&a, tb);
	for (e = 0; e < TIERS_RACE_EXPERTS; e++)
		tiers_fill(&a, tb, start[e], 0, e);
	snprintf(r->pool, sizeof(r->pool), "%s", ctx->pool);
	vm_gate_open(&r->ready);
	for (i = 0; i < TIERS_RACE_CLIENTS; i++) {
		r->client = i;
		pids[i] = vm_spawn(tiers_race_client, r);
		vm_gate_wait(&r->ready, 10000, "a reading client");
	}
	/* Each expert in turn to a free slot of another bank. */
	until = vm_now_ms() + TIERS_RACE_MS;
	for (k = 0; vm_now_ms() < until; k++) {
		e = k % TIERS_RACE_EXPERTS;
		cur = vm_load32(&a.map[vm_idx(&a, 0, e)]);
		from = tiers_bank_of(&a, cur);
		for (s = 0; s < a.att.n_slots; s++) {
			__u32 to = (s + k) % a.att.n_slots;

			if (tiers_bank_of(&a, to) == from ||
			    vm_load32(&a.owner[to]) != MOECACHE_NONE)
				continue;
			ret = tiers_try_evict(&a, to, 0, e, MOECACHE_EVICT_MOVE);
			if (ret == -EBUSY) {
				busy++;
				continue;
			}
			VM_EQ(ret, 0);
			memset(tiers_slot_mem(&a, tb, to), tiers_pattern(0, e), a.att.expert_bytes);
			vm_commit1(&a, to, 0, e, 0);
			moves++;
			break;
		}
	}
	r->stop = 1;
	for (i = 0; i < TIERS_RACE_CLIENTS; i++)
		vm_reap_ok(pids[i], 10000, "a reading client");
	fprintf(stderr, "# %lu moves, %lu EBUSY on pinned old slots, checks %lu %lu %lu\n", moves,
		busy, r->checks[0], r->checks[1], r->checks[2]);
	VM_ASSERT(moves >= 20);
	for (i = 0; i < TIERS_RACE_CLIENTS; i++)
		VM_ASSERT_MSG(r->checks[i] >= 10, "client %d made %lu checks", i, r->checks[i]);
	vm_check_map_consistent(&a);
	vm_gate_close(&r->ready);
	for (e = 0; e < 3; e++)
		tiers_bank_put(&tb[e]);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test tiers_tests[] = {
    VM_TEST(basic_tiers_info_max_banks, "GET_INFO reports max_banks, the module parameter"),
    VM_TEST(basic_tiers_bank_table,
	    "the map region's bank table gives each bank's layout; BANK_SET updates it in one seq "
	    "write and POOL_BANK is set once every bank is"),
    VM_TEST(basic_tiers_bank_get_index,
	    "BANK_GET of each index returns that bank's object and layout; an unset bank is "
	    "ENODATA"),
    VM_TEST(basic_tiers_acquire_bank_slots,
	    "ACQUIRE returns global slots, each in the bank the map's table says, its bytes in "
	    "that bank's object"),
    VM_TEST(basic_tiers_ver0_one_bank,
	    "a POOL_CREATE struct of the ABI 2 size makes a one-bank pool of n_slots, tier 0"),
    VM_TEST(bad_input_tiers_layout,
	    "POOL_CREATE refuses bad layouts (empty bank, slot sum, tier order, flags, pad, "
	    "backend, two banks on one device, pointers, sizes) and creates nothing"),
    VM_TEST(bad_input_tiers_too_many_banks, "POOL_CREATE of max_banks + 1 banks is E2BIG"),
    VM_TEST(bad_input_tiers_bank_set,
	    "BANK_SET/BANK_GET refuse an index past the banks, a device or object another bank "
	    "has (EEXIST), and one the layout does not name"),
    VM_TEST(bad_input_tiers_replace_pinned_bank,
	    "a bank with a pinned slot cannot be replaced (EBUSY); replacing another clears "
	    "that bank's residency only"),
    VM_TEST(basic_tiers_move_promote_demote,
	    "EVICT_MOVE keeps the expert readable in its old slot while the new one fills; COMMIT "
	    "moves it in one seq write and frees the old slot"),
    VM_TEST(basic_tiers_move_of_cold_expert_fills,
	    "EVICT_MOVE of an expert resident nowhere is an ordinary fill"),
    VM_TEST(bad_input_tiers_move,
	    "EVICT refuses a resident target without MOVE, a second move, a move onto its own "
	    "slot (EEXIST), the old slot as a victim (EBUSY) and unknown flags (EINVAL)"),
    VM_TEST(lifetime_tiers_move_abort, "ABORT of a move leaves the expert where it was"),
    VM_TEST(lifetime_tiers_agent_killed_mid_move,
	    "an agent killed during a demotion leaves the expert in exactly its old bank, whole"),
    VM_TEST(lifetime_tiers_moved_slot_pinned,
	    "a slot freed by a move while pinned keeps its bytes and is no copy destination until "
	    "released"),
    VM_TEST(lifetime_tiers_moved_slot_fast_pinned,
	    "a slot freed by a move while fast-pinned is not reused, nor its bank replaced, until "
	    "the fast pin goes"),
    VM_TEST(lifetime_tiers_bank_set_drops_moves,
	    "replacing a bank drops the moves into and out of it: experts stay where they were or "
	    "go with the bank"),
    VM_TEST(basic_tiers_stats_per_bank,
	    "STATS with MOECACHE_STATS_BANK counts hits, commits, evictions and slot state of that "
	    "bank's slots; a move is an eviction of the bank it leaves only"),
    VM_TEST(bad_input_tiers_stats,
	    "STATS_BANK past the banks, with a layer, or an unknown flag is EINVAL"),
    VM_TEST_TIMEOUT(concurrency_tiers_moves_under_readers,
		    "clients acquiring or fast-pinning experts read whole, right bytes while the "
		    "agent moves them between banks, and never see one in two slots",
		    60),
    VM_TEST(lifetime_tiers_warm_restart,
	    "a new agent gets every bank back with BANK_GET, with the residency intact"),
};

const struct vm_suite vm_tiers_suite = {
    .tests = tiers_tests,
    .count = ARRAY_SIZE(tiers_tests),
};
