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
    VM_TEST(lifetime_tiers_warm_restart,
	    "a new agent gets every bank back with BANK_GET, with the residency intact"),
};

const struct vm_suite vm_tiers_suite = {
    .tests = tiers_tests,
    .count = ARRAY_SIZE(tiers_tests),
};
