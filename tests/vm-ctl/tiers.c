// SPDX-License-Identifier: MIT
/*
 * The banks of a pool over the generic netlink family: POOL_CREATE with
 * MOECACHE_A_BANKS, and the banks POOL_INFO, POOL_LIST and STATS report
 * (uapi/moecache_netlink.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <moecache.h>
#include <moecache_netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "harness.h"
#include "tests.h"

#define NT_MAX_BANKS 8

struct nt_bank {
	uint32_t at[MOECACHE_BANK_A_MAX + 1];	  /* the u32 attributes, by type */
	bool has[MOECACHE_BANK_A_MAX + 1];
	uint64_t st[MOECACHE_STATS_A_MAX + 1]; /* BANK_A_STATS, by type */
	bool has_stats;
};

/* What one reply said of the pool `name`; layer replies of a dump are skipped. */
struct nt_reply {
	const char *name;
	bool seen;
	bool has_banks;
	unsigned int n;
	struct nt_bank banks[NT_MAX_BANKS];
};

static void nt_parse_bank(struct nlattr *entry, struct nt_bank *b)
{
	struct nlattr *tb[MOECACHE_BANK_A_MAX + 1], *st[MOECACHE_STATS_A_MAX + 1];
	int t;

	CT_EQ(nla_type(entry), MOECACHE_BANKS_A_BANK);
	CT_ASSERT(nla_parse_nested(tb, MOECACHE_BANK_A_MAX, entry, NULL) == 0);
	for (t = MOECACHE_BANK_A_INDEX; t <= MOECACHE_BANK_A_FLAGS; t++) {
		if (!tb[t])
			continue;
		CT_EQ(nla_len(tb[t]), 4);
		b->at[t] = nla_get_u32(tb[t]);
		b->has[t] = true;
	}
	if (!tb[MOECACHE_BANK_A_STATS])
		return;
	b->has_stats = true;
	CT_ASSERT(nla_parse_nested(st, MOECACHE_STATS_A_MAX, tb[MOECACHE_BANK_A_STATS], NULL) == 0);
	for (t = MOECACHE_STATS_A_HITS; t <= MOECACHE_STATS_A_MAX; t++) {
		if (!st[t])
			continue;
		b->st[t] = nla_len(st[t]) == 8 ? nla_get_u64(st[t]) : nla_get_u32(st[t]);
	}
}

static int nt_parse(struct nl_msg *reply, void *arg)
{
	struct nlattr *tb[MOECACHE_A_MAX + 1], *entry;
	struct nt_reply *r = arg;
	int rem;

	if (genlmsg_parse(nlmsg_hdr(reply), 0, tb, MOECACHE_A_MAX, NULL) < 0)
		return -EPROTO;
	if (!tb[MOECACHE_A_POOL_NAME] || strcmp(nla_get_string(tb[MOECACHE_A_POOL_NAME]), r->name))
		return 0;
	if (tb[MOECACHE_A_LAYER]) {
		/* A layer's stats carry no banks. */
		CT_ASSERT(!tb[MOECACHE_A_BANKS]);
		return 0;
	}
	r->seen = true;
	if (!tb[MOECACHE_A_BANKS])
		return 0;
	r->has_banks = true;
	r->n = 0;
	nla_for_each_nested(entry, tb[MOECACHE_A_BANKS], rem) {
		CT_ASSERT(r->n < NT_MAX_BANKS);
		memset(&r->banks[r->n], 0, sizeof(r->banks[r->n]));
		nt_parse_bank(entry, &r->banks[r->n++]);
	}
	return 0;
}

/* A request about one pool, with its reply parsed into r. */
static int nt_ask(struct ctl_nl *nl, uint8_t cmd, int flags, const char *name, struct nt_reply *r)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, cmd, flags);

	CT_ASSERT(msg);
	if (cmd != MOECACHE_CMD_POOL_LIST)
		nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	memset(r, 0, sizeof(*r));
	r->name = name;
	return ctl_nl_transact(nl, msg, nt_parse, r);
}

struct nt_layout {
	uint32_t tier, n_slots, backend, device;
};

/* 2 slots in tier 0, 3 + 3 in tier 1 and 2; bank 1 names CPU device 1. */
static const struct nt_layout nt_three[] = {
    {0, 2, MOECACHE_BACKEND_NONE, 0},
    {1, 3, MOECACHE_BACKEND_CPU, 1},
    {2, 3, MOECACHE_BACKEND_NONE, 0},
};

static struct nl_msg *nt_create_msg(struct ctl_nl *nl, const char *name)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, MOECACHE_CMD_POOL_CREATE, 0);

	CT_ASSERT(msg);
	nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
	nla_put_u32(msg, MOECACHE_A_N_LAYERS, 2);
	nla_put_u32(msg, MOECACHE_A_N_EXPERTS, 8);
	nla_put_u64(msg, MOECACHE_A_EXPERT_BYTES, 4096);
	return msg;
}

/* Appends MOECACHE_A_BANKS of n layouts. */
static void nt_put_banks(struct nl_msg *msg, const struct nt_layout *b, unsigned int n)
{
	struct nlattr *banks = nla_nest_start(msg, MOECACHE_A_BANKS), *bank;
	unsigned int i;

	for (i = 0; i < n; i++) {
		bank = nla_nest_start(msg, MOECACHE_BANKS_A_BANK);
		nla_put_u32(msg, MOECACHE_BANK_A_TIER, b[i].tier);
		nla_put_u32(msg, MOECACHE_BANK_A_N_SLOTS, b[i].n_slots);
		if (b[i].backend != MOECACHE_BACKEND_NONE) {
			nla_put_u32(msg, MOECACHE_BANK_A_BACKEND, b[i].backend);
			nla_put_u32(msg, MOECACHE_BANK_A_DEVICE, b[i].device);
		}
		nla_nest_end(msg, bank);
	}
	/* An empty one is sent too (a request without a bank). */
	nla_nest_end_keep_empty(msg, banks);
}

static void nt_create_three(struct ctl_nl *nl, const char *name)
{
	struct nl_msg *msg = nt_create_msg(nl, name);

	/* No N_SLOTS: the banks' sum. */
	nt_put_banks(msg, nt_three, 3);
	CT_OK(ctl_nl_transact(nl, msg, NULL, NULL));
}

static void nt_check_layout(const struct nt_reply *r)
{
	uint32_t begin = 0;
	unsigned int i;

	CT_ASSERT(r->seen && r->has_banks);
	CT_EQ(r->n, 3);
	for (i = 0; i < 3; i++) {
		const struct nt_bank *b = &r->banks[i];

		CT_EQ(b->at[MOECACHE_BANK_A_INDEX], i);
		CT_EQ(b->at[MOECACHE_BANK_A_TIER], nt_three[i].tier);
		CT_EQ(b->at[MOECACHE_BANK_A_N_SLOTS], nt_three[i].n_slots);
		CT_EQ(b->at[MOECACHE_BANK_A_SLOT_BEGIN], begin);
		CT_EQ(b->at[MOECACHE_BANK_A_BACKEND], nt_three[i].backend);
		CT_EQ(b->at[MOECACHE_BANK_A_DEVICE], nt_three[i].device);
		CT_ASSERT(b->has[MOECACHE_BANK_A_FLAGS]);
		begin += nt_three[i].n_slots;
	}
}

void nl_tiers_create_info(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN], plain[MOECACHE_NAME_LEN];
	struct ct_geom g = {.n_layers = 2, .n_experts = 8, .n_slots = 4, .expert_bytes = 4096};
	struct nt_reply r;
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_pool(ctx, "t", name);
	ct_pool(ctx, "p", plain);
	ct_nl_open(&nl);
	nt_create_three(&nl, name);
	CT_OK(ctl_nl_pool_info(&nl, name, &p));
	CT_EQ(p.n_slots, 8);
	CT_OK(nt_ask(&nl, MOECACHE_CMD_POOL_INFO, 0, name, &r));
	nt_check_layout(&r);
	CT_ASSERT(!r.banks[0].has_stats);
	CT_OK(nt_ask(&nl, MOECACHE_CMD_POOL_LIST, NLM_F_DUMP, name, &r));
	nt_check_layout(&r);
	/* A pool created without banks has one, of every slot, tier 0. */
	ct_create(plain, &g);
	CT_OK(nt_ask(&nl, MOECACHE_CMD_POOL_INFO, 0, plain, &r));
	CT_EQ(r.n, 1);
	CT_EQ(r.banks[0].at[MOECACHE_BANK_A_N_SLOTS], 4);
	CT_EQ(r.banks[0].at[MOECACHE_BANK_A_TIER], 0);
	CT_EQ(r.banks[0].at[MOECACHE_BANK_A_BACKEND], MOECACHE_BACKEND_NONE);
	ctl_nl_close(&nl);
}

/* The ioctl side: an attached fd of the pool. */
static int nt_attach(const char *name, uint32_t role, struct moecache_attach *at)
{
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);

	CT_ASSERT(fd >= 0);
	memset(at, 0, sizeof(*at));
	snprintf(at->name, sizeof(at->name), "%s", name);
	at->role = role;
	CT_ASSERT(ioctl(fd, MOECACHE_IOC_ATTACH, at) == 0);
	return fd;
}

static void nt_ioctl(int fd, unsigned long cmd, void *arg)
{
	if (ioctl(fd, cmd, arg) < 0)
		CT_FAIL("ioctl 0x%lx: %s", cmd, strerror(errno));
}

static void nt_fill(int agent, uint32_t slot, uint32_t layer, uint32_t expert, uint32_t flags)
{
	struct moecache_evict ev = {.slot = slot, .layer = layer, .expert = expert, .flags = flags};
	struct moecache_fill f = {.slot = slot, .layer = layer, .expert = expert};
	struct moecache_fill_batch b = {.count = 1, .fills = (uintptr_t)&f};

	nt_ioctl(agent, MOECACHE_IOC_EVICT, &ev);
	nt_ioctl(agent, MOECACHE_IOC_COMMIT, &b);
}

void nl_tiers_stats_banks(struct ct_ctx *ctx)
{
	char name[MOECACHE_NAME_LEN];
	struct moecache_attach at;
	struct moecache_bank bank;
	struct moecache_acquire acq;
	struct nt_reply r;
	struct ctl_nl nl;
	uint32_t e = 3, slot, i;
	int agent, client, memfd[3];

	ct_pool(ctx, "s", name);
	ct_nl_open(&nl);
	nt_create_three(&nl, name);
	agent = nt_attach(name, MOECACHE_ROLE_AGENT, &at);
	client = nt_attach(name, MOECACHE_ROLE_CLIENT, &at);
	for (i = 0; i < 3; i++) {
		memfd[i] = memfd_create("moecache-ctltest-tier", MFD_CLOEXEC);
		CT_ASSERT(memfd[i] >= 0);
		CT_ASSERT(ftruncate(memfd[i], (off_t)nt_three[i].n_slots * 4096) == 0);
		memset(&bank, 0, sizeof(bank));
		bank.fd = memfd[i];
		bank.backend = MOECACHE_BACKEND_CPU;
		bank.device = i;
		bank.bank_bytes = (uint64_t)nt_three[i].n_slots * 4096;
		bank.slot_stride = 4096;
		bank.index = i;
		nt_ioctl(agent, MOECACHE_IOC_BANK_SET, &bank);
	}
	/* Expert 3 of layer 1: filled in bank 2, hit, promoted to bank 0. */
	nt_fill(agent, 5, 1, e, 0);
	memset(&acq, 0, sizeof(acq));
	acq.layer = 1;
	acq.count = 1;
	acq.experts = (uintptr_t)&e;
	acq.slots = (uintptr_t)&slot;
	nt_ioctl(client, MOECACHE_IOC_ACQUIRE, &acq);
	CT_EQ(slot, 5);
	nt_fill(agent, 0, 1, e, MOECACHE_EVICT_MOVE);
	CT_OK(nt_ask(&nl, MOECACHE_CMD_STATS, 0, name, &r));
	CT_ASSERT(r.has_banks);
	CT_EQ(r.n, 3);
	for (i = 0; i < 3; i++) {
		CT_ASSERT(r.banks[i].has_stats);
		CT_EQ(r.banks[i].at[MOECACHE_BANK_A_BACKEND], MOECACHE_BACKEND_CPU);
		CT_EQ(r.banks[i].at[MOECACHE_BANK_A_DEVICE], i);
		CT_EQ(r.banks[i].at[MOECACHE_BANK_A_FLAGS], MOECACHE_MAP_BANK_SET);
	}
	CT_EQ(r.banks[0].st[MOECACHE_STATS_A_COMMITS], 1);
	CT_EQ(r.banks[0].st[MOECACHE_STATS_A_RESIDENT], 1);
	CT_EQ(r.banks[0].st[MOECACHE_STATS_A_HITS], 0);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_HITS], 1);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_COMMITS], 1);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_EVICTIONS], 1);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_RESIDENT], 0);
	/* The client still holds its pin on the slot the move freed. */
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_PINNED_SLOTS], 1);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_PINS], 1);
	CT_EQ(r.banks[1].st[MOECACHE_STATS_A_RESIDENT], 0);
	/* A dump's pool message carries them too; STATS of a layer does not. */
	CT_OK(nt_ask(&nl, MOECACHE_CMD_STATS, NLM_F_DUMP, name, &r));
	CT_ASSERT(r.has_banks);
	CT_EQ(r.banks[2].st[MOECACHE_STATS_A_EVICTIONS], 1);
	{
		struct nl_msg *msg = ctl_nl_msg_new(&nl, MOECACHE_CMD_STATS, 0);

		nla_put_string(msg, MOECACHE_A_POOL_NAME, name);
		nla_put_u32(msg, MOECACHE_A_LAYER, 1);
		memset(&r, 0, sizeof(r));
		r.name = name;
		CT_OK(ctl_nl_transact(&nl, msg, nt_parse, &r));
		CT_ASSERT(!r.has_banks);
	}
	close(client);
	close(agent);
	for (i = 0; i < 3; i++)
		close(memfd[i]);
	ctl_nl_close(&nl);
}

enum nt_bad_kind {
	NT_NO_TIER,
	NT_REPLY_ATTR,
	NT_OTHER_ENTRY,
	NT_EMPTY,
	NT_TIERS_DOWN,
	NT_SLOTS_NOT_SUM,
	NT_BAD_BACKEND,
	NT_SAME_DEVICE,
	NT_TOO_MANY,
};

void nl_tiers_create_bad_banks(struct ct_ctx *ctx)
{
	static const struct {
		enum nt_bad_kind kind;
		const char *what;
		int err;
	} cases[] = {
	    {NT_NO_TIER, "a bank without TIER", -EINVAL},
	    {NT_REPLY_ATTR, "a bank with the reply-only INDEX", -EINVAL},
	    {NT_OTHER_ENTRY, "BANKS holding another entry than BANK", -EINVAL},
	    {NT_EMPTY, "BANKS without a bank", -EINVAL},
	    {NT_TIERS_DOWN, "tiers going down", -EINVAL},
	    {NT_SLOTS_NOT_SUM, "N_SLOTS other than the banks' sum", -EINVAL},
	    {NT_BAD_BACKEND, "an unknown backend (the policy's range)", -ERANGE},
	    {NT_SAME_DEVICE, "two banks on one device", -EINVAL},
	    {NT_TOO_MANY, "more banks than max_banks", -E2BIG},
	};
	const struct nt_layout down[] = {{1, 2, 0, 0}, {0, 2, 0, 0}};
	const struct nt_layout same[] = {{0, 2, MOECACHE_BACKEND_ROCM, 4},
					 {1, 2, MOECACHE_BACKEND_ROCM, 4}};
	const struct nt_layout bad_backend[] = {{0, 2, 4, 0}};
	struct nt_layout many[65];
	char name[MOECACHE_NAME_LEN];
	struct nlattr *banks, *bank;
	struct ctl_pool p;
	struct ctl_nl nl;
	struct nl_msg *msg;
	unsigned int i;

	for (i = 0; i < 65; i++)
		many[i] = (struct nt_layout){0, 1, 0, 0};
	ct_pool(ctx, "b", name);
	ct_nl_open(&nl);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msg = nt_create_msg(&nl, name);
		switch (cases[i].kind) {
		case NT_NO_TIER:
		case NT_REPLY_ATTR:
		case NT_OTHER_ENTRY:
			banks = nla_nest_start(msg, MOECACHE_A_BANKS);
			bank = nla_nest_start(msg, cases[i].kind == NT_OTHER_ENTRY
							? MOECACHE_BANKS_A_BANK + 1
							: MOECACHE_BANKS_A_BANK);
			if (cases[i].kind != NT_NO_TIER)
				nla_put_u32(msg, MOECACHE_BANK_A_TIER, 0);
			nla_put_u32(msg, MOECACHE_BANK_A_N_SLOTS, 2);
			if (cases[i].kind == NT_REPLY_ATTR)
				nla_put_u32(msg, MOECACHE_BANK_A_INDEX, 0);
			nla_nest_end(msg, bank);
			nla_nest_end(msg, banks);
			break;
		case NT_EMPTY:
			nt_put_banks(msg, NULL, 0);
			nla_put_u32(msg, MOECACHE_A_N_SLOTS, 2);
			break;
		case NT_TIERS_DOWN:
			nt_put_banks(msg, down, 2);
			break;
		case NT_SLOTS_NOT_SUM:
			nt_put_banks(msg, down + 1, 1);
			nla_put_u32(msg, MOECACHE_A_N_SLOTS, 3);
			break;
		case NT_BAD_BACKEND:
			nt_put_banks(msg, bad_backend, 1);
			break;
		case NT_SAME_DEVICE:
			nt_put_banks(msg, same, 2);
			break;
		case NT_TOO_MANY:
			nt_put_banks(msg, many, 65);
			break;
		}
		if (ctl_nl_transact(&nl, msg, NULL, NULL) != cases[i].err)
			CT_FAIL("%s: POOL_CREATE did not fail with %s", cases[i].what,
				strerror(-cases[i].err));
		CT_RET(ctl_nl_pool_info(&nl, name, &p), -ENOENT);
	}
	ctl_nl_close(&nl);
}
