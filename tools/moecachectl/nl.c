// SPDX-License-Identifier: MIT
/* The moecache generic netlink family, seen from userspace (libnl-genl-3). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include <moecache_netlink.h>

#include "nl.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif

static const struct nla_policy ctl_pool_policy[MOECACHE_A_MAX + 1] = {
    [MOECACHE_A_POOL_NAME] = {.type = NLA_STRING, .maxlen = MOECACHE_NAME_LEN},
    [MOECACHE_A_N_LAYERS] = {.type = NLA_U32},
    [MOECACHE_A_N_EXPERTS] = {.type = NLA_U32},
    [MOECACHE_A_EXPERT_BEGIN] = {.type = NLA_U32},
    [MOECACHE_A_EXPERT_END] = {.type = NLA_U32},
    [MOECACHE_A_N_SLOTS] = {.type = NLA_U32},
    [MOECACHE_A_EXPERT_BYTES] = {.type = NLA_U64},
    [MOECACHE_A_UID] = {.type = NLA_U32},
    [MOECACHE_A_GID] = {.type = NLA_U32},
    [MOECACHE_A_MODE] = {.type = NLA_U32},
    [MOECACHE_A_POOL_FLAGS] = {.type = NLA_U32},
    [MOECACHE_A_HOST_BYTES] = {.type = NLA_U64},
    [MOECACHE_A_N_FILES] = {.type = NLA_U32},
    [MOECACHE_A_AGENT_PID] = {.type = NLA_U32},
    [MOECACHE_A_AGENT_EPOCH] = {.type = NLA_U32},
    [MOECACHE_A_LAYER] = {.type = NLA_U32},
    [MOECACHE_A_STATS] = {.type = NLA_NESTED},
    [MOECACHE_A_BANKS] = {.type = NLA_NESTED},
    [MOECACHE_A_FLUSHED] = {.type = NLA_U32},
    [MOECACHE_A_EVENT] = {.type = NLA_U32},
    [MOECACHE_A_EXPERT] = {.type = NLA_U32},
    [MOECACHE_A_MISSES] = {.type = NLA_U32},
};

static const struct nla_policy ctl_stats_policy[MOECACHE_STATS_A_MAX + 1] = {
    [MOECACHE_STATS_A_HITS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_MISSES] = {.type = NLA_U64},
    [MOECACHE_STATS_A_PREFETCH_HITS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_PREFETCHES] = {.type = NLA_U64},
    [MOECACHE_STATS_A_EVICTIONS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_COMMITS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_ABORTS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_BYTES_COPIED] = {.type = NLA_U64},
    [MOECACHE_STATS_A_WAITS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_WAIT_NS] = {.type = NLA_U64},
    [MOECACHE_STATS_A_WAIT_HIST] = {.type = NLA_NESTED},
    [MOECACHE_STATS_A_RESIDENT] = {.type = NLA_U32},
    [MOECACHE_STATS_A_FILLING] = {.type = NLA_U32},
    [MOECACHE_STATS_A_PINNED_SLOTS] = {.type = NLA_U32},
    [MOECACHE_STATS_A_PINS] = {.type = NLA_U32},
    [MOECACHE_STATS_A_QUEUED] = {.type = NLA_U32},
    [MOECACHE_STATS_A_INFLIGHT] = {.type = NLA_U32},
    [MOECACHE_STATS_A_N_CLIENTS] = {.type = NLA_U32},
    [MOECACHE_STATS_A_AGENT_PID] = {.type = NLA_U32},
};

/* libnl's own failures (not the kernel's errno, which the callbacks keep). */
static int nlerr_to_errno(int nlerr)
{
	switch (-nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_INTR:
		return -EINTR;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_BAD_SOCK:
		return -EBADF;
	case NLE_MSG_OVERFLOW:
		return -ENOBUFS;
	default:
		return -EIO;
	}
}

int ctl_nl_open(struct ctl_nl *nl)
{
	int one = 1, ret;

	memset(nl, 0, sizeof(*nl));
	nl->sk = nl_socket_alloc();
	if (!nl->sk)
		return -ENOMEM;
	ret = genl_connect(nl->sk);
	if (ret < 0) {
		ret = nlerr_to_errno(ret);
		goto fail;
	}
	nl_socket_enable_msg_peek(nl->sk);
	/* The kernel's reasons come back with the errors; nice to have only. */
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	nl->family = genl_ctrl_resolve(nl->sk, MOECACHE_GENL_NAME);
	if (nl->family < 0) {
		ret = -ENOENT;
		snprintf(nl->message, sizeof(nl->message),
			 "no generic netlink family '%s': is the moecache module loaded?",
			 MOECACHE_GENL_NAME);
		goto fail;
	}
	return 0;
fail:
	nl_socket_free(nl->sk);
	nl->sk = NULL;
	return ret;
}

void ctl_nl_close(struct ctl_nl *nl)
{
	if (nl->sk)
		nl_socket_free(nl->sk);
	nl->sk = NULL;
}

const char *ctl_nl_message(const struct ctl_nl *nl)
{
	return nl->message[0] ? nl->message : NULL;
}

struct ctl_nl_txn {
	struct ctl_nl *nl;
	int (*parse)(struct nl_msg *reply, void *arg);
	void *arg;
	int err;       /* 1 while waiting, then 0 or -errno */
	int parse_err; /* the first parse failure */
	uint32_t seq;  /* the request's */
};

/*
 * Only the answers to the request: a subscribed socket also receives
 * events (sequence number 0), which a transaction leaves aside.
 */
static int txn_seq_check(struct nl_msg *msg, void *arg)
{
	struct ctl_nl_txn *t = arg;

	return nlmsg_hdr(msg)->nlmsg_seq == t->seq ? NL_OK : NL_SKIP;
}

static int txn_valid(struct nl_msg *msg, void *arg)
{
	struct ctl_nl_txn *t = arg;
	int ret;

	if (t->parse && !t->parse_err) {
		ret = t->parse(msg, t->arg);
		if (ret < 0)
			t->parse_err = ret;
	}
	return NL_OK;
}

/* NLMSG_DONE of a dump: its payload is the dump's final status. */
static int txn_finish(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct ctl_nl_txn *t = arg;
	int status = 0;

	if (nlmsg_datalen(nlh) >= (int)sizeof(int))
		memcpy(&status, nlmsg_data(nlh), sizeof(int));
	t->err = status < 0 ? status : 0;
	return NL_STOP;
}

static int txn_ack(struct nl_msg *msg, void *arg)
{
	struct ctl_nl_txn *t = arg;

	t->err = 0;
	return NL_STOP;
}

static void txn_extack(struct ctl_nl *nl, struct nlmsgerr *e)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)((char *)e - NLMSG_HDRLEN);
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];
	size_t off = sizeof(*e);
	int len;

	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	len = (int)(nlh->nlmsg_len - NLMSG_HDRLEN) - (int)off;
	if (len <= 0 ||
	    nla_parse(tb, NLMSGERR_ATTR_MAX, (struct nlattr *)((char *)e + off), len, NULL))
		return;
	if (tb[NLMSGERR_ATTR_MSG])
		snprintf(nl->message, sizeof(nl->message), "%.*s", nla_len(tb[NLMSGERR_ATTR_MSG]),
			 (char *)nla_data(tb[NLMSGERR_ATTR_MSG]));
	else if (tb[NLMSGERR_ATTR_MISS_TYPE] && nla_len(tb[NLMSGERR_ATTR_MISS_TYPE]) == 4)
		snprintf(nl->message, sizeof(nl->message), "missing attribute %u",
			 nla_get_u32(tb[NLMSGERR_ATTR_MISS_TYPE]));
}

static int txn_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct ctl_nl_txn *t = arg;

	t->err = e->error < 0 ? e->error : -EPROTO;
	txn_extack(t->nl, e);
	return NL_STOP;
}

struct nl_msg *ctl_nl_msg_new(struct ctl_nl *nl, uint8_t cmd, int flags)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0, flags, cmd,
			 MOECACHE_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

int ctl_nl_transact(struct ctl_nl *nl, struct nl_msg *msg,
		    int (*parse)(struct nl_msg *reply, void *arg), void *arg)
{
	struct ctl_nl_txn t = {.nl = nl, .parse = parse, .arg = arg, .err = 1};
	struct nl_cb *cb;
	int ret;

	nl->message[0] = '\0';
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, txn_valid, &t);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, txn_finish, &t);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, txn_ack, &t);
	nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, txn_seq_check, &t);
	nl_cb_err(cb, NL_CB_CUSTOM, txn_error, &t);
	ret = nl_send_auto(nl->sk, msg);
	t.seq = nlmsg_hdr(msg)->nlmsg_seq;
	nlmsg_free(msg);
	if (ret < 0) {
		nl_cb_put(cb);
		return nlerr_to_errno(ret);
	}
	while (t.err > 0) {
		ret = nl_recvmsgs(nl->sk, cb);
		/* a handler's NL_STOP after an error also returns < 0: keep its errno */
		if (ret < 0 && t.err > 0)
			t.err = nlerr_to_errno(ret);
	}
	nl_cb_put(cb);
	return t.err ? t.err : t.parse_err;
}

static int name_msg(struct ctl_nl *nl, uint8_t cmd, int flags, const char *name,
		    struct nl_msg **out)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, cmd, flags);

	if (!msg)
		return -ENOMEM;
	if (nla_put_string(msg, MOECACHE_A_POOL_NAME, name) < 0) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	*out = msg;
	return 0;
}

static int parse_attrs(struct nl_msg *msg, struct nlattr **tb)
{
	return genlmsg_parse(nlmsg_hdr(msg), 0, tb, MOECACHE_A_MAX, ctl_pool_policy) < 0 ? -EPROTO
											 : 0;
}

static uint32_t get_u32(struct nlattr **tb, int type)
{
	return tb[type] ? nla_get_u32(tb[type]) : 0;
}

static uint64_t get_u64(struct nlattr **tb, int type)
{
	return tb[type] ? nla_get_u64(tb[type]) : 0;
}

static int parse_pool(struct nl_msg *msg, struct ctl_pool *p)
{
	struct nlattr *tb[MOECACHE_A_MAX + 1];

	if (parse_attrs(msg, tb) || !tb[MOECACHE_A_POOL_NAME])
		return -EPROTO;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", nla_get_string(tb[MOECACHE_A_POOL_NAME]));
	p->n_layers = get_u32(tb, MOECACHE_A_N_LAYERS);
	p->n_experts = get_u32(tb, MOECACHE_A_N_EXPERTS);
	p->expert_begin = get_u32(tb, MOECACHE_A_EXPERT_BEGIN);
	p->expert_end = get_u32(tb, MOECACHE_A_EXPERT_END);
	p->n_slots = get_u32(tb, MOECACHE_A_N_SLOTS);
	p->expert_bytes = get_u64(tb, MOECACHE_A_EXPERT_BYTES);
	p->host_bytes = get_u64(tb, MOECACHE_A_HOST_BYTES);
	p->uid = get_u32(tb, MOECACHE_A_UID);
	p->gid = get_u32(tb, MOECACHE_A_GID);
	p->mode = get_u32(tb, MOECACHE_A_MODE);
	p->flags = get_u32(tb, MOECACHE_A_POOL_FLAGS);
	p->n_files = get_u32(tb, MOECACHE_A_N_FILES);
	p->agent_pid = get_u32(tb, MOECACHE_A_AGENT_PID);
	p->agent_epoch = get_u32(tb, MOECACHE_A_AGENT_EPOCH);
	return 0;
}

struct pool_list_ctx {
	int (*fn)(const struct ctl_pool *pool, void *arg);
	void *arg;
};

static int pool_list_one(struct nl_msg *msg, void *arg)
{
	struct pool_list_ctx *ctx = arg;
	struct ctl_pool p;
	int ret;

	ret = parse_pool(msg, &p);
	return ret ? ret : ctx->fn(&p, ctx->arg);
}

int ctl_nl_pool_list(struct ctl_nl *nl, int (*fn)(const struct ctl_pool *pool, void *arg),
		     void *arg)
{
	struct pool_list_ctx ctx = {fn, arg};
	struct nl_msg *msg = ctl_nl_msg_new(nl, MOECACHE_CMD_POOL_LIST, NLM_F_DUMP);

	if (!msg)
		return -ENOMEM;
	return ctl_nl_transact(nl, msg, pool_list_one, &ctx);
}

static int pool_info_one(struct nl_msg *msg, void *arg)
{
	return parse_pool(msg, arg);
}

int ctl_nl_pool_info(struct ctl_nl *nl, const char *name, struct ctl_pool *out)
{
	struct nl_msg *msg;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = name_msg(nl, MOECACHE_CMD_POOL_INFO, 0, name, &msg);
	if (ret)
		return ret;
	ret = ctl_nl_transact(nl, msg, pool_info_one, out);
	if (!ret && !out->name[0])
		ret = -EPROTO;
	return ret;
}

static int parse_stats(struct nlattr *nest, struct moecache_stats *st)
{
	struct nlattr *tb[MOECACHE_STATS_A_MAX + 1], *b;
	int rem;

	if (!nest || nla_parse_nested(tb, MOECACHE_STATS_A_MAX, nest, ctl_stats_policy) < 0)
		return -EPROTO;
	st->hits = get_u64(tb, MOECACHE_STATS_A_HITS);
	st->misses = get_u64(tb, MOECACHE_STATS_A_MISSES);
	st->prefetch_hits = get_u64(tb, MOECACHE_STATS_A_PREFETCH_HITS);
	st->prefetches = get_u64(tb, MOECACHE_STATS_A_PREFETCHES);
	st->evictions = get_u64(tb, MOECACHE_STATS_A_EVICTIONS);
	st->commits = get_u64(tb, MOECACHE_STATS_A_COMMITS);
	st->aborts = get_u64(tb, MOECACHE_STATS_A_ABORTS);
	st->bytes_copied = get_u64(tb, MOECACHE_STATS_A_BYTES_COPIED);
	st->waits = get_u64(tb, MOECACHE_STATS_A_WAITS);
	st->wait_ns = get_u64(tb, MOECACHE_STATS_A_WAIT_NS);
	st->resident = get_u32(tb, MOECACHE_STATS_A_RESIDENT);
	st->filling = get_u32(tb, MOECACHE_STATS_A_FILLING);
	st->pinned_slots = get_u32(tb, MOECACHE_STATS_A_PINNED_SLOTS);
	st->pins = get_u32(tb, MOECACHE_STATS_A_PINS);
	st->queued = get_u32(tb, MOECACHE_STATS_A_QUEUED);
	st->inflight = get_u32(tb, MOECACHE_STATS_A_INFLIGHT);
	st->n_clients = get_u32(tb, MOECACHE_STATS_A_N_CLIENTS);
	st->agent_pid = get_u32(tb, MOECACHE_STATS_A_AGENT_PID);
	if (tb[MOECACHE_STATS_A_WAIT_HIST])
		nla_for_each_nested(b, tb[MOECACHE_STATS_A_WAIT_HIST], rem)
		{
			int i = nla_type(b) - MOECACHE_HIST_A_BUCKET;

			/* buckets a newer kernel may add are not ours to show */
			if (i >= 0 && i < MOECACHE_WAIT_BUCKETS && nla_len(b) == 8)
				st->wait_hist[i] = nla_get_u64(b);
		}
	return 0;
}

static const struct nla_policy ctl_bank_policy[MOECACHE_BANK_A_MAX + 1] = {
    [MOECACHE_BANK_A_INDEX] = {.type = NLA_U32},   [MOECACHE_BANK_A_TIER] = {.type = NLA_U32},
    [MOECACHE_BANK_A_N_SLOTS] = {.type = NLA_U32}, [MOECACHE_BANK_A_BACKEND] = {.type = NLA_U32},
    [MOECACHE_BANK_A_DEVICE] = {.type = NLA_U32},  [MOECACHE_BANK_A_SLOT_BEGIN] = {.type = NLA_U32},
    [MOECACHE_BANK_A_FLAGS] = {.type = NLA_U32},   [MOECACHE_BANK_A_STATS] = {.type = NLA_NESTED},
};

/* The pool's MOECACHE_A_BANKS: each bank's layout and, in a STATS reply, its counters. */
static int parse_banks(struct nlattr *nest, struct ctl_bank *banks, uint32_t max, uint32_t *n)
{
	struct nlattr *entry;
	int rem;

	*n = 0;
	nla_for_each_nested(entry, nest, rem)
	{
		struct nlattr *tb[MOECACHE_BANK_A_MAX + 1];
		struct ctl_bank *b;

		if (nla_type(entry) != MOECACHE_BANKS_A_BANK)
			continue;
		if (*n == max ||
		    nla_parse_nested(tb, MOECACHE_BANK_A_MAX, entry, ctl_bank_policy) < 0)
			return -EPROTO;
		b = &banks[(*n)++];
		memset(b, 0, sizeof(*b));
		b->layout.tier = get_u32(tb, MOECACHE_BANK_A_TIER);
		b->layout.n_slots = get_u32(tb, MOECACHE_BANK_A_N_SLOTS);
		b->layout.backend = get_u32(tb, MOECACHE_BANK_A_BACKEND);
		b->layout.device = get_u32(tb, MOECACHE_BANK_A_DEVICE);
		b->layout.slot_begin = get_u32(tb, MOECACHE_BANK_A_SLOT_BEGIN);
		b->layout.flags = get_u32(tb, MOECACHE_BANK_A_FLAGS);
		b->st.layer = MOECACHE_NONE;
		if (tb[MOECACHE_BANK_A_STATS] && parse_stats(tb[MOECACHE_BANK_A_STATS], &b->st))
			return -EPROTO;
	}
	return 0;
}

struct stats_ctx {
	int (*fn)(uint32_t layer, const struct moecache_stats *st, void *arg);
	void *arg;
	struct moecache_stats *out;
	struct ctl_bank *banks; /* the pool's reply's banks, or NULL */
	uint32_t max_banks, *n_banks;
};

static int stats_one(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[MOECACHE_A_MAX + 1];
	struct stats_ctx *ctx = arg;
	struct moecache_stats st = {0};
	int ret;

	if (parse_attrs(msg, tb))
		return -EPROTO;
	st.layer = tb[MOECACHE_A_LAYER] ? nla_get_u32(tb[MOECACHE_A_LAYER]) : MOECACHE_NONE;
	ret = parse_stats(tb[MOECACHE_A_STATS], &st);
	if (ret)
		return ret;
	if (ctx->banks && st.layer == MOECACHE_NONE && tb[MOECACHE_A_BANKS]) {
		ret = parse_banks(tb[MOECACHE_A_BANKS], ctx->banks, ctx->max_banks, ctx->n_banks);
		if (ret)
			return ret;
	}
	if (ctx->out)
		*ctx->out = st;
	return ctx->fn ? ctx->fn(st.layer, &st, ctx->arg) : 0;
}

int ctl_nl_stats(struct ctl_nl *nl, const char *name, uint32_t layer, struct moecache_stats *out)
{
	struct stats_ctx ctx = {.out = out};
	struct nl_msg *msg;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = name_msg(nl, MOECACHE_CMD_STATS, 0, name, &msg);
	if (ret)
		return ret;
	if (layer != MOECACHE_NONE && nla_put_u32(msg, MOECACHE_A_LAYER, layer) < 0) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return ctl_nl_transact(nl, msg, stats_one, &ctx);
}

int ctl_nl_stats_dump(struct ctl_nl *nl, const char *name,
		      int (*fn)(uint32_t layer, const struct moecache_stats *st, void *arg),
		      void *arg)
{
	return ctl_nl_stats_dump_banks(nl, name, fn, arg, NULL, 0, NULL);
}

int ctl_nl_stats_dump_banks(struct ctl_nl *nl, const char *name,
			    int (*fn)(uint32_t layer, const struct moecache_stats *st, void *arg),
			    void *arg, struct ctl_bank *banks, uint32_t max_banks,
			    uint32_t *n_banks)
{
	struct stats_ctx ctx = {
	    .fn = fn, .arg = arg, .banks = banks, .max_banks = max_banks, .n_banks = n_banks};
	struct nl_msg *msg;
	int ret;

	if (n_banks)
		*n_banks = 0;
	ret = name_msg(nl, MOECACHE_CMD_STATS, NLM_F_DUMP, name, &msg);
	if (ret)
		return ret;
	return ctl_nl_transact(nl, msg, stats_one, &ctx);
}

/* POOL_CREATE's MOECACHE_A_BANKS, when the pool has banks; -EMSGSIZE if it does not fit. */
static int put_banks(struct nl_msg *msg, const struct ctl_create *c)
{
	struct nlattr *banks, *bank;

	if (!c->n_banks)
		return 0;
	banks = nla_nest_start(msg, MOECACHE_A_BANKS);
	if (!banks)
		return -EMSGSIZE;
	for (uint32_t i = 0; i < c->n_banks; i++) {
		const struct moecache_bank_layout *l = &c->banks[i];

		bank = nla_nest_start(msg, MOECACHE_BANKS_A_BANK);
		if (!bank || nla_put_u32(msg, MOECACHE_BANK_A_TIER, l->tier) < 0 ||
		    nla_put_u32(msg, MOECACHE_BANK_A_N_SLOTS, l->n_slots) < 0 ||
		    nla_put_u32(msg, MOECACHE_BANK_A_BACKEND, l->backend) < 0 ||
		    nla_put_u32(msg, MOECACHE_BANK_A_DEVICE, l->device) < 0)
			return -EMSGSIZE;
		nla_nest_end(msg, bank);
	}
	nla_nest_end(msg, banks);
	return 0;
}

int ctl_nl_pool_create(struct ctl_nl *nl, const struct ctl_create *c)
{
	const struct moecache_pool_create *r = &c->req;
	struct nl_msg *msg;
	int ret;

	ret = name_msg(nl, MOECACHE_CMD_POOL_CREATE, 0, r->name, &msg);
	if (ret)
		return ret;
	if (nla_put_u32(msg, MOECACHE_A_N_LAYERS, r->n_layers) < 0 ||
	    nla_put_u32(msg, MOECACHE_A_N_EXPERTS, r->n_experts) < 0 ||
	    nla_put_u32(msg, MOECACHE_A_N_SLOTS, r->n_slots) < 0 ||
	    nla_put_u64(msg, MOECACHE_A_EXPERT_BYTES, r->expert_bytes) < 0 ||
	    (c->has_range && (nla_put_u32(msg, MOECACHE_A_EXPERT_BEGIN, r->expert_begin) < 0 ||
			      nla_put_u32(msg, MOECACHE_A_EXPERT_END, r->expert_end) < 0)) ||
	    (c->has_uid && nla_put_u32(msg, MOECACHE_A_UID, r->uid) < 0) ||
	    (c->has_gid && nla_put_u32(msg, MOECACHE_A_GID, r->gid) < 0) ||
	    (c->has_mode && nla_put_u32(msg, MOECACHE_A_MODE, r->mode) < 0) || put_banks(msg, c)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return ctl_nl_transact(nl, msg, NULL, NULL);
}

int ctl_nl_pool_destroy(struct ctl_nl *nl, const char *name)
{
	struct nl_msg *msg;
	int ret;

	ret = name_msg(nl, MOECACHE_CMD_POOL_DESTROY, 0, name, &msg);
	return ret ? ret : ctl_nl_transact(nl, msg, NULL, NULL);
}

static int flush_one(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[MOECACHE_A_MAX + 1];

	if (parse_attrs(msg, tb) || !tb[MOECACHE_A_FLUSHED])
		return -EPROTO;
	*(uint32_t *)arg = nla_get_u32(tb[MOECACHE_A_FLUSHED]);
	return 0;
}

int ctl_nl_flush(struct ctl_nl *nl, const char *name, uint32_t *flushed)
{
	struct nl_msg *msg;
	int ret;

	*flushed = 0;
	ret = name_msg(nl, MOECACHE_CMD_FLUSH, 0, name, &msg);
	return ret ? ret : ctl_nl_transact(nl, msg, flush_one, flushed);
}

int ctl_nl_events_join(struct ctl_nl *nl)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, MOECACHE_CMD_EVENTS_SUBSCRIBE, 0);

	if (!msg)
		return -ENOMEM;
	return ctl_nl_transact(nl, msg, NULL, NULL);
}

int ctl_nl_events_leave(struct ctl_nl *nl)
{
	struct nl_msg *msg = ctl_nl_msg_new(nl, MOECACHE_CMD_EVENTS_UNSUBSCRIBE, 0);

	if (!msg)
		return -ENOMEM;
	return ctl_nl_transact(nl, msg, NULL, NULL);
}

const char *ctl_nl_event_name(uint32_t type)
{
	static const char *const names[] = {
	    [MOECACHE_EVENT_POOL_CREATED] = "pool-created",
	    [MOECACHE_EVENT_POOL_DESTROYED] = "pool-destroyed",
	    [MOECACHE_EVENT_AGENT_ATTACHED] = "agent-attached",
	    [MOECACHE_EVENT_AGENT_LOST] = "agent-lost",
	    [MOECACHE_EVENT_EVICTION] = "eviction",
	    [MOECACHE_EVENT_MISS_STORM] = "miss-storm",
	};

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}

struct event_ctx {
	int (*fn)(const struct ctl_event *ev, void *arg);
	void *arg;
	int ret;
};

/* Events are not answers to a request of ours: no sequence number to check. */
static int event_seq_ok(struct nl_msg *msg, void *arg)
{
	return NL_OK;
}

static int event_one(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[MOECACHE_A_MAX + 1];
	struct event_ctx *ctx = arg;
	struct ctl_event ev = {0};

	if (genlmsg_hdr(nlmsg_hdr(msg))->cmd != MOECACHE_CMD_EVENT || parse_attrs(msg, tb) ||
	    !tb[MOECACHE_A_EVENT])
		return NL_SKIP;
	ev.type = nla_get_u32(tb[MOECACHE_A_EVENT]);
	if (tb[MOECACHE_A_POOL_NAME])
		snprintf(ev.pool, sizeof(ev.pool), "%s", nla_get_string(tb[MOECACHE_A_POOL_NAME]));
	ev.has_layer = tb[MOECACHE_A_LAYER];
	ev.layer = get_u32(tb, MOECACHE_A_LAYER);
	ev.has_expert = tb[MOECACHE_A_EXPERT];
	ev.expert = get_u32(tb, MOECACHE_A_EXPERT);
	ev.has_pid = tb[MOECACHE_A_AGENT_PID];
	ev.pid = get_u32(tb, MOECACHE_A_AGENT_PID);
	ev.has_misses = tb[MOECACHE_A_MISSES];
	ev.misses = get_u32(tb, MOECACHE_A_MISSES);
	if (!ctx->ret)
		ctx->ret = ctx->fn(&ev, ctx->arg);
	return ctx->ret < 0 ? NL_STOP : NL_OK;
}

int ctl_nl_event_wait(struct ctl_nl *nl, int timeout_ms,
		      int (*fn)(const struct ctl_event *ev, void *arg), void *arg)
{
	struct event_ctx ctx = {fn, arg, 0};
	struct pollfd pfd = {.fd = nl_socket_get_fd(nl->sk), .events = POLLIN};
	struct nl_cb *cb;
	int ret;

	ret = poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, event_seq_ok, NULL);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, event_one, &ctx);
	ret = nl_recvmsgs(nl->sk, cb);
	nl_cb_put(cb);
	if (ctx.ret < 0)
		return ctx.ret;
	return ret < 0 ? nlerr_to_errno(ret) : 0;
}
