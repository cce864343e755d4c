// SPDX-License-Identifier: GPL-2.0
/*
 * moecache generic netlink family "moecache".
 *
 * Anyone may list pools and read their description and statistics, as
 * anyone may list IPC objects. Creating a pool needs CAP_SYS_ADMIN (as the
 * ioctl); destroying and flushing one needs CAP_SYS_ADMIN or the pool's
 * owner. Events go to the "events" multicast group.
 *
 * Each command has its own policy and is validated strictly: an attribute
 * the command does not take is rejected, so a reply-only attribute sent in
 * a request is an error rather than silently ignored.
 *
 * No pool lock is held while a message is allocated: pool data is copied
 * out under the core's pool-list mutex, and messages are built afterwards,
 * except in dumps, which fill the skb the netlink core handed them.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/netlink.h>
#include <linux/string.h>
#include <linux/uidgid.h>
#include <net/genetlink.h>
#include <moecache_netlink.h>

#include "compat.h"
#include "moecache.h"

enum moecache_nl_groups {
	MOECACHE_NL_GRP_EVENTS,
};

static const struct genl_multicast_group moecache_nl_mcgrps[] = {
	[MOECACHE_NL_GRP_EVENTS] = { .name = MOECACHE_GENL_MCGRP_EVENTS },
};

#define MOECACHE_NL_NAME_POLICY \
	{ .type = NLA_NUL_STRING, .len = MOECACHE_NAME_LEN - 1 }

/* POOL_INFO, POOL_DESTROY, FLUSH */
static const struct nla_policy moecache_nl_name_policy[MOECACHE_A_MAX + 1] = {
	[MOECACHE_A_POOL_NAME]		= MOECACHE_NL_NAME_POLICY,
};

static const struct nla_policy moecache_nl_stats_policy[MOECACHE_A_MAX + 1] = {
	[MOECACHE_A_POOL_NAME]		= MOECACHE_NL_NAME_POLICY,
	[MOECACHE_A_LAYER]		= { .type = NLA_U32 },
};

/* Ranges beyond these are the core's to check, as for the ioctl. */
static const struct nla_policy moecache_nl_create_policy[MOECACHE_A_MAX + 1] = {
	[MOECACHE_A_POOL_NAME]		= MOECACHE_NL_NAME_POLICY,
	[MOECACHE_A_N_LAYERS]		= NLA_POLICY_MIN(NLA_U32, 1),
	[MOECACHE_A_N_EXPERTS]		= NLA_POLICY_MIN(NLA_U32, 1),
	[MOECACHE_A_EXPERT_BEGIN]	= { .type = NLA_U32 },
	[MOECACHE_A_EXPERT_END]		= NLA_POLICY_MIN(NLA_U32, 1),
	[MOECACHE_A_N_SLOTS]		= NLA_POLICY_MIN(NLA_U32, 1),
	[MOECACHE_A_EXPERT_BYTES]	= NLA_POLICY_MIN(NLA_U64, 1),
	[MOECACHE_A_UID]		= { .type = NLA_U32 },
	[MOECACHE_A_GID]		= { .type = NLA_U32 },
	[MOECACHE_A_MODE]		= NLA_POLICY_MAX(NLA_U32, 0777),
};

static struct genl_family moecache_nl_family;
static bool moecache_nl_registered;

static int moecache_nl_get_name(struct genl_info *info, char *name)
{
	if (GENL_REQ_ATTR_CHECK(info, MOECACHE_A_POOL_NAME))
		return -EINVAL;
	nla_strscpy(name, info->attrs[MOECACHE_A_POOL_NAME], MOECACHE_NAME_LEN);
	return 0;
}

static int moecache_nl_put_pool(struct sk_buff *skb,
				const struct moecache_pool_desc *d)
{
	if (nla_put_string(skb, MOECACHE_A_POOL_NAME, d->name) ||
	    nla_put_u32(skb, MOECACHE_A_N_LAYERS, d->n_layers) ||
	    nla_put_u32(skb, MOECACHE_A_N_EXPERTS, d->n_experts) ||
	    nla_put_u32(skb, MOECACHE_A_EXPERT_BEGIN, d->expert_begin) ||
	    nla_put_u32(skb, MOECACHE_A_EXPERT_END, d->expert_end) ||
	    nla_put_u32(skb, MOECACHE_A_N_SLOTS, d->n_slots) ||
	    nla_put_u64_64bit(skb, MOECACHE_A_EXPERT_BYTES, d->expert_bytes,
			      MOECACHE_A_PAD) ||
	    nla_put_u64_64bit(skb, MOECACHE_A_HOST_BYTES, d->host_bytes,
			      MOECACHE_A_PAD) ||
	    nla_put_u32(skb, MOECACHE_A_UID, d->uid) ||
	    nla_put_u32(skb, MOECACHE_A_GID, d->gid) ||
	    nla_put_u32(skb, MOECACHE_A_MODE, d->mode) ||
	    nla_put_u32(skb, MOECACHE_A_POOL_FLAGS, d->flags) ||
	    nla_put_u32(skb, MOECACHE_A_N_FILES, d->n_files) ||
	    nla_put_u32(skb, MOECACHE_A_AGENT_PID, d->agent_pid) ||
	    nla_put_u32(skb, MOECACHE_A_AGENT_EPOCH, d->agent_epoch))
		return -EMSGSIZE;
	return 0;
}

static int moecache_nl_put_hist(struct sk_buff *skb,
				const struct moecache_stats *st)
{
	struct nlattr *hist;
	int i;

	hist = nla_nest_start(skb, MOECACHE_STATS_A_WAIT_HIST);
	if (!hist)
		return -EMSGSIZE;
	for (i = 0; i < MOECACHE_WAIT_BUCKETS; i++) {
		if (nla_put_u64_64bit(skb, MOECACHE_HIST_A_BUCKET + i,
				      st->wait_hist[i], MOECACHE_HIST_A_PAD)) {
			nla_nest_cancel(skb, hist);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, hist);
	return 0;
}

static int moecache_nl_put_stats(struct sk_buff *skb,
				 const struct moecache_stats *st)
{
	static const struct {
		u16 type;
		u16 offset;
	} counters[] = {
		{ MOECACHE_STATS_A_HITS, offsetof(struct moecache_stats, hits) },
		{ MOECACHE_STATS_A_MISSES, offsetof(struct moecache_stats, misses) },
		{ MOECACHE_STATS_A_PREFETCH_HITS,
		  offsetof(struct moecache_stats, prefetch_hits) },
		{ MOECACHE_STATS_A_PREFETCHES,
		  offsetof(struct moecache_stats, prefetches) },
		{ MOECACHE_STATS_A_EVICTIONS,
		  offsetof(struct moecache_stats, evictions) },
		{ MOECACHE_STATS_A_COMMITS, offsetof(struct moecache_stats, commits) },
		{ MOECACHE_STATS_A_ABORTS, offsetof(struct moecache_stats, aborts) },
		{ MOECACHE_STATS_A_BYTES_COPIED,
		  offsetof(struct moecache_stats, bytes_copied) },
		{ MOECACHE_STATS_A_WAITS, offsetof(struct moecache_stats, waits) },
		{ MOECACHE_STATS_A_WAIT_NS, offsetof(struct moecache_stats, wait_ns) },
	};
	struct nlattr *nest;
	unsigned int i;

	nest = nla_nest_start(skb, MOECACHE_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ARRAY_SIZE(counters); i++) {
		const u64 *val = (const void *)st + counters[i].offset;

		if (nla_put_u64_64bit(skb, counters[i].type, *val,
				      MOECACHE_STATS_A_PAD))
			goto cancel;
	}
	if (moecache_nl_put_hist(skb, st) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_RESIDENT, st->resident) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_FILLING, st->filling) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_PINNED_SLOTS, st->pinned_slots) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_PINS, st->pins) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_QUEUED, st->queued) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_INFLIGHT, st->inflight) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_N_CLIENTS, st->n_clients) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_AGENT_PID, st->agent_pid))
		goto cancel;
	nla_nest_end(skb, nest);
	return 0;

cancel:
	nla_nest_cancel(skb, nest);
	return -EMSGSIZE;
}

/* One STATS message: the pool name, the layer (absent for the pool), stats. */
static int moecache_nl_fill_stats(struct sk_buff *skb, u32 portid, u32 seq,
				  int flags, const char *name, u32 layer,
				  const struct moecache_stats *st)
{
	void *hdr;

	hdr = genlmsg_put(skb, portid, seq, &moecache_nl_family, flags,
			  MOECACHE_CMD_STATS);
	if (!hdr)
		return -EMSGSIZE;
	if (nla_put_string(skb, MOECACHE_A_POOL_NAME, name) ||
	    (layer != MOECACHE_NONE &&
	     nla_put_u32(skb, MOECACHE_A_LAYER, layer)) ||
	    moecache_nl_put_stats(skb, st)) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int moecache_nl_describe(struct moecache_pool *pool, void *arg)
{
	moecache_pool_describe(pool, arg);
	return 0;
}

static int moecache_nl_pool_info(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_pool_desc desc = {};
	char name[MOECACHE_NAME_LEN];
	struct sk_buff *msg;
	void *hdr;
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	err = moecache_with_pool(name, moecache_nl_describe, &desc);
	if (err)
		return err;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &moecache_nl_family, 0,
				MOECACHE_CMD_POOL_INFO);
	if (!hdr || moecache_nl_put_pool(msg, &desc)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

struct moecache_nl_dump {
	struct sk_buff *skb;
	struct netlink_callback *cb;
	unsigned long emitted;
};

static int moecache_nl_list_one(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_dump *dump = arg;
	struct netlink_callback *cb = dump->cb;
	struct moecache_pool_desc desc = {};
	void *hdr;

	moecache_pool_describe(pool, &desc);
	hdr = genlmsg_put(dump->skb, NETLINK_CB(cb->skb).portid,
			  cb->nlh->nlmsg_seq, &moecache_nl_family, NLM_F_MULTI,
			  MOECACHE_CMD_POOL_LIST);
	if (!hdr)
		return -EMSGSIZE;
	if (moecache_nl_put_pool(dump->skb, &desc)) {
		genlmsg_cancel(dump->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(dump->skb, hdr);
	dump->emitted++;
	return 0;
}

/* cb->args[0]: pools already sent. */
static int moecache_nl_pool_list(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	struct moecache_nl_dump dump = { .skb = skb, .cb = cb };
	unsigned long pos = cb->args[0];
	int err;

	/* The pool that did not fit is counted by emitted, not by pos. */
	err = moecache_visit_pools(moecache_nl_list_one, &dump, &pos);
	cb->args[0] += dump.emitted;
	if (err && (err != -EMSGSIZE || !dump.emitted))
		return err;
	return skb->len;
}

struct moecache_nl_stats_req {
	u32 layer;
	struct moecache_stats st;
};

static int moecache_nl_read_stats(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_stats_req *req = arg;

	return moecache_pool_stats(pool, req->layer, &req->st);
}

static int moecache_nl_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_stats_req *req;
	char name[MOECACHE_NAME_LEN];
	struct sk_buff *msg;
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	req = kzalloc(sizeof(*req), GFP_KERNEL);
	if (!req)
		return -ENOMEM;
	req->layer = MOECACHE_NONE;
	if (info->attrs[MOECACHE_A_LAYER])
		req->layer = nla_get_u32(info->attrs[MOECACHE_A_LAYER]);
	err = moecache_with_pool(name, moecache_nl_read_stats, req);
	if (err) {
		if (err == -EINVAL)
			GENL_SET_ERR_MSG(info, "layer out of range");
		goto out;
	}

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg) {
		err = -ENOMEM;
		goto out;
	}
	err = moecache_nl_fill_stats(msg, info->snd_portid, info->snd_seq, 0,
				     name, req->layer, &req->st);
	if (err) {
		nlmsg_free(msg);
		goto out;
	}
	err = genlmsg_reply(msg, info);
out:
	kfree(req);
	return err;
}

static int moecache_nl_exists(struct moecache_pool *pool, void *arg)
{
	return 0;
}

/* Checked once, so that a dump of a pool that does not exist is an error. */
static int moecache_nl_stats_start(struct netlink_callback *cb)
{
	struct nlattr **attrs = moecache_genl_dump_attrs(cb);
	char name[MOECACHE_NAME_LEN];

	if (!attrs[MOECACHE_A_POOL_NAME]) {
		NL_SET_ERR_ATTR_MISS(cb->extack, NULL, MOECACHE_A_POOL_NAME);
		return -EINVAL;
	}
	if (attrs[MOECACHE_A_LAYER]) {
		NL_SET_ERR_MSG_ATTR(cb->extack, attrs[MOECACHE_A_LAYER],
				    "a stats dump covers every layer");
		return -EINVAL;
	}
	nla_strscpy(name, attrs[MOECACHE_A_POOL_NAME], sizeof(name));
	return moecache_with_pool(name, moecache_nl_exists, NULL);
}

/* cb->args[0]: 0 before the pool's message, then 1 + the next layer. */
static int moecache_nl_stats_dump_pool(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_dump *dump = arg;
	struct netlink_callback *cb = dump->cb;
	struct moecache_pool_desc desc = {};
	struct moecache_stats st;
	u32 layer;
	int err;

	moecache_pool_describe(pool, &desc);
	for (; cb->args[0] <= desc.n_layers; cb->args[0]++) {
		layer = cb->args[0] ? cb->args[0] - 1 : MOECACHE_NONE;
		memset(&st, 0, sizeof(st));
		err = moecache_pool_stats(pool, layer, &st);
		if (err)
			return err;
		err = moecache_nl_fill_stats(dump->skb,
					     NETLINK_CB(cb->skb).portid,
					     cb->nlh->nlmsg_seq, NLM_F_MULTI,
					     desc.name, layer, &st);
		if (err)
			return err;
		dump->emitted++;
	}
	return 0;
}

static int moecache_nl_stats_dump(struct sk_buff *skb,
				  struct netlink_callback *cb)
{
	struct nlattr **attrs = moecache_genl_dump_attrs(cb);
	struct moecache_nl_dump dump = { .skb = skb, .cb = cb };
	char name[MOECACHE_NAME_LEN];
	int err;

	nla_strscpy(name, attrs[MOECACHE_A_POOL_NAME], sizeof(name));
	err = moecache_with_pool(name, moecache_nl_stats_dump_pool, &dump);
	if (err && (err != -EMSGSIZE || !dump.emitted))
		return err;
	return skb->len;
}

static int moecache_nl_pool_create(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **attrs = info->attrs;
	struct moecache_pool_create req = {};

	/* The ioctl's rule, checked on the socket's opener too. */
	if (!netlink_capable(skb, CAP_SYS_ADMIN))
		return -EPERM;
	if (GENL_REQ_ATTR_CHECK(info, MOECACHE_A_POOL_NAME) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_LAYERS) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_EXPERTS) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_SLOTS) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_EXPERT_BYTES))
		return -EINVAL;

	nla_strscpy(req.name, attrs[MOECACHE_A_POOL_NAME], sizeof(req.name));
	req.n_layers = nla_get_u32(attrs[MOECACHE_A_N_LAYERS]);
	req.n_experts = nla_get_u32(attrs[MOECACHE_A_N_EXPERTS]);
	req.n_slots = nla_get_u32(attrs[MOECACHE_A_N_SLOTS]);
	req.expert_bytes = nla_get_u64(attrs[MOECACHE_A_EXPERT_BYTES]);
	req.expert_begin = attrs[MOECACHE_A_EXPERT_BEGIN] ?
		nla_get_u32(attrs[MOECACHE_A_EXPERT_BEGIN]) : 0;
	req.expert_end = attrs[MOECACHE_A_EXPERT_END] ?
		nla_get_u32(attrs[MOECACHE_A_EXPERT_END]) : req.n_experts;
	req.uid = attrs[MOECACHE_A_UID] ?
		nla_get_u32(attrs[MOECACHE_A_UID]) :
		from_kuid_munged(current_user_ns(), current_euid());
	req.gid = attrs[MOECACHE_A_GID] ?
		nla_get_u32(attrs[MOECACHE_A_GID]) :
		from_kgid_munged(current_user_ns(), current_egid());
	req.mode = attrs[MOECACHE_A_MODE] ?
		nla_get_u32(attrs[MOECACHE_A_MODE]) : 0600;

	return moecache_pool_create(&req);
}

static int moecache_nl_may_admin(struct moecache_pool *pool, void *arg)
{
	return moecache_pool_may_admin(pool) ? 0 : -EPERM;
}

static int moecache_nl_pool_destroy(struct sk_buff *skb, struct genl_info *info)
{
	char name[MOECACHE_NAME_LEN];
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	/* moecache_pool_destroy checks again, under its own lock. */
	err = moecache_with_pool(name, moecache_nl_may_admin, NULL);
	if (err)
		return err;
	return moecache_pool_destroy(name);
}

static int moecache_nl_flush_pool(struct moecache_pool *pool, void *arg)
{
	u32 *flushed = arg;
	int ret;

	if (!moecache_pool_may_admin(pool))
		return -EPERM;
	ret = moecache_pool_flush(pool);
	if (ret < 0)
		return ret;
	*flushed = ret;
	return 0;
}

static int moecache_nl_flush(struct sk_buff *skb, struct genl_info *info)
{
	char name[MOECACHE_NAME_LEN];
	struct sk_buff *msg;
	u32 flushed = 0;
	void *hdr;
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	/* Allocated first: a flush that happened is always reported. */
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	err = moecache_with_pool(name, moecache_nl_flush_pool, &flushed);
	if (err) {
		nlmsg_free(msg);
		return err;
	}
	hdr = genlmsg_put_reply(msg, info, &moecache_nl_family, 0,
				MOECACHE_CMD_FLUSH);
	if (!hdr || nla_put_string(msg, MOECACHE_A_POOL_NAME, name) ||
	    nla_put_u32(msg, MOECACHE_A_FLUSHED, flushed)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static const struct genl_ops moecache_nl_ops[] = {
	{
		/* takes no attribute: genetlink rejects any */
		.cmd		= MOECACHE_CMD_POOL_LIST,
		.dumpit		= moecache_nl_pool_list,
	},
	{
		.cmd		= MOECACHE_CMD_POOL_INFO,
		.doit		= moecache_nl_pool_info,
		.policy		= moecache_nl_name_policy,
		.maxattr	= MOECACHE_A_MAX,
	},
	{
		.cmd		= MOECACHE_CMD_STATS,
		.doit		= moecache_nl_stats,
		.start		= moecache_nl_stats_start,
		.dumpit		= moecache_nl_stats_dump,
		.policy		= moecache_nl_stats_policy,
		.maxattr	= MOECACHE_A_MAX,
	},
	{
		.cmd		= MOECACHE_CMD_POOL_CREATE,
		.doit		= moecache_nl_pool_create,
		.policy		= moecache_nl_create_policy,
		.maxattr	= MOECACHE_A_MAX,
	},
	{
		.cmd		= MOECACHE_CMD_POOL_DESTROY,
		.doit		= moecache_nl_pool_destroy,
		.policy		= moecache_nl_name_policy,
		.maxattr	= MOECACHE_A_MAX,
	},
	{
		.cmd		= MOECACHE_CMD_FLUSH,
		.doit		= moecache_nl_flush,
		.policy		= moecache_nl_name_policy,
		.maxattr	= MOECACHE_A_MAX,
	},
};

static struct genl_family moecache_nl_family __ro_after_init = {
	.name		= MOECACHE_GENL_NAME,
	.version	= MOECACHE_GENL_VERSION,
	.maxattr	= MOECACHE_A_MAX,
	.netnsok	= false,
	/* the core locks pools itself; genl_mutex would serialise for nothing */
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.ops		= moecache_nl_ops,
	.n_ops		= ARRAY_SIZE(moecache_nl_ops),
	.mcgrps		= moecache_nl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(moecache_nl_mcgrps),
};

static u32 moecache_nl_event_type(enum moecache_event ev)
{
	switch (ev) {
	case MOECACHE_EV_POOL_CREATED:
		return MOECACHE_EVENT_POOL_CREATED;
	case MOECACHE_EV_POOL_DESTROYED:
		return MOECACHE_EVENT_POOL_DESTROYED;
	case MOECACHE_EV_AGENT_ATTACHED:
		return MOECACHE_EVENT_AGENT_ATTACHED;
	case MOECACHE_EV_AGENT_LOST:
		return MOECACHE_EVENT_AGENT_LOST;
	case MOECACHE_EV_EVICTION:
		return MOECACHE_EVENT_EVICTION;
	case MOECACHE_EV_MISS_STORM:
		return MOECACHE_EVENT_MISS_STORM;
	}
	return MOECACHE_EVENT_UNSPEC;
}

static int moecache_nl_put_event_args(struct sk_buff *msg,
				      enum moecache_event ev, u32 arg0,
				      u32 arg1)
{
	switch (ev) {
	case MOECACHE_EV_AGENT_ATTACHED:
	case MOECACHE_EV_AGENT_LOST:
		/* 0: the core did not say which process */
		return arg0 ? nla_put_u32(msg, MOECACHE_A_AGENT_PID, arg0) : 0;
	case MOECACHE_EV_EVICTION:
		if (nla_put_u32(msg, MOECACHE_A_LAYER, arg0))
			return -EMSGSIZE;
		return nla_put_u32(msg, MOECACHE_A_EXPERT, arg1);
	case MOECACHE_EV_MISS_STORM:
		return nla_put_u32(msg, MOECACHE_A_MISSES, arg0);
	default:
		return 0;
	}
}

void moecache_nl_event(enum moecache_event ev, const char *pool_name,
		       u32 arg0, u32 arg1)
{
	u32 type = moecache_nl_event_type(ev);
	struct sk_buff *msg;
	void *hdr;

	if (!READ_ONCE(moecache_nl_registered) || type == MOECACHE_EVENT_UNSPEC)
		return;
	if (!genl_has_listeners(&moecache_nl_family, &init_net,
				MOECACHE_NL_GRP_EVENTS))
		return;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &moecache_nl_family, 0,
			  MOECACHE_CMD_EVENT);
	if (!hdr || nla_put_u32(msg, MOECACHE_A_EVENT, type) ||
	    nla_put_string(msg, MOECACHE_A_POOL_NAME, pool_name) ||
	    moecache_nl_put_event_args(msg, ev, arg0, arg1)) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	/* -ESRCH when the last listener just left: nothing to report. */
	genlmsg_multicast(&moecache_nl_family, msg, 0, MOECACHE_NL_GRP_EVENTS,
			  GFP_KERNEL);
}

int moecache_nl_init(void)
{
	int err;

	err = genl_register_family(&moecache_nl_family);
	if (err)
		return err;
	WRITE_ONCE(moecache_nl_registered, true);
	return 0;
}

void moecache_nl_exit(void)
{
	WRITE_ONCE(moecache_nl_registered, false);
	genl_unregister_family(&moecache_nl_family);
}
