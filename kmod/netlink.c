// SPDX-License-Identifier: GPL-2.0
/*
 * moecache generic netlink family "moecache".
 *
 * Rights are those of two parties, and both must have them: the process
 * that opened the socket (its file's credentials) and the process sending
 * the request (current), as netlink_capable() checks. A socket opened by an
 * unprivileged user and handed to root lends root's rights to nobody, and a
 * socket root opened lends none to whoever is handed it.
 *
 * Reading a pool (POOL_LIST, POOL_INFO, STATS, events) needs read permission
 * on it, as ATTACH as a client does: statistics and events carry routing,
 * and routing leaks prompts. Creating a pool needs CAP_SYS_ADMIN (as the
 * ioctl); destroying and flushing one needs CAP_SYS_ADMIN or the pool's
 * owner. Pids are reported in the pid namespace of the task reading them.
 *
 * Events are unicast to subscribed sockets, one message per listener that
 * may read the pool, rather than multicast: a genetlink multicast group
 * delivers every message to every member, with no per-listener filter (on
 * the kernels we support) and no record of a member's credentials or pid
 * namespace. A subscription records the socket, its opener's and its
 * subscriber's credentials and the subscriber's pid namespace; it ends
 * when the socket is released (NETLINK_URELEASE) or unsubscribes.
 *
 * Lock order: moecache_nl_subs_lock (spinlock) is a leaf; no message is
 * built or sent under it.
 *
 * Each command has its own policy and is validated strictly: an attribute
 * the command does not take is rejected, so a reply-only attribute sent in
 * a request is an error rather than silently ignored.
 *
 * No pool lock is held while a message is allocated: pool data is copied
 * out under the core's pool-list mutex, and messages are built afterwards,
 * except in dumps, which fill the skb the netlink core handed them, and
 * for the banks of a pool, which a reply takes one by one from the core
 * under that mutex into a message allocated before (room for
 * MOECACHE_BANKS_CAP banks).
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/moduleparam.h>
#include <linux/netlink.h>
#include <linux/notifier.h>
#include <linux/pid_namespace.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uidgid.h>
#include <net/genetlink.h>
#include <net/sock.h>
#include <moecache_netlink.h>

#include "compat.h"
#include "moecache.h"

static unsigned int max_event_listeners = 256;
module_param(max_event_listeners, uint, 0644);
MODULE_PARM_DESC(max_event_listeners, "Most sockets subscribed to events at once (default 256)");

static unsigned int max_user_event_listeners = 16;
module_param(max_user_event_listeners, uint, 0644);
MODULE_PARM_DESC(max_user_event_listeners, "Most sockets one user without CAP_SYS_ADMIN may subscribe to events (default 16)");

/*
 * One of the two parties to a request: the socket's opener (file set), the
 * sender (current), or a subscription's recorded party (admin recorded when
 * it subscribed, as SO_PEERCRED records its peer).
 */
struct moecache_nl_party {
	const struct cred *cred;
	const struct file *file;	/* the opener of a request's socket */
	bool is_current;
	bool admin;			/* recorded: CAP_SYS_ADMIN */
};

struct moecache_nl_caller {
	struct moecache_nl_party opener;
	struct moecache_nl_party sender;
};

/* An events subscription; the list holds one reference, a sender another. */
struct moecache_nl_sub {
	struct list_head node;		/* moecache_nl_subs */
	refcount_t ref;
	u32 portid;
	struct sock *sk;		/* the subscribed socket, held */
	struct moecache_nl_caller who;	/* recorded credentials */
	struct pid_namespace *pid_ns;	/* the subscriber's */
};

static DEFINE_SPINLOCK(moecache_nl_subs_lock);
static LIST_HEAD(moecache_nl_subs);
static unsigned int moecache_nl_n_subs;

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

/* One bank of POOL_CREATE: its layout; the reply-only attributes are refused. */
static const struct nla_policy moecache_nl_bank_policy[MOECACHE_BANK_A_MAX + 1] = {
	[MOECACHE_BANK_A_TIER]		= { .type = NLA_U32 },
	[MOECACHE_BANK_A_N_SLOTS]	= NLA_POLICY_MIN(NLA_U32, 1),
	[MOECACHE_BANK_A_BACKEND]	= NLA_POLICY_MAX(NLA_U32, MOECACHE_BACKEND_ROCM),
	[MOECACHE_BANK_A_DEVICE]	= { .type = NLA_U32 },
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
	[MOECACHE_A_BANKS]		=
		NLA_POLICY_NESTED_ARRAY(moecache_nl_bank_policy),
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

/* The parties of the request in skb (a doit's, or a dump's cb->skb). */
static void moecache_nl_caller_of(const struct sk_buff *skb,
				  struct moecache_nl_caller *c)
{
	const struct file *file = NETLINK_CB(skb).sk->sk_socket->file;

	memset(c, 0, sizeof(*c));
	c->opener.cred = file->f_cred;
	c->opener.file = file;
	c->sender.cred = current_cred();
	c->sender.is_current = true;
}

/* Asked only once the owner and mode have said no: no audit noise. */
static bool moecache_nl_party_admin(const struct moecache_nl_party *p)
{
	if (p->file)
		return file_ns_capable(p->file, &init_user_ns, CAP_SYS_ADMIN);
	if (p->is_current)
		return capable(CAP_SYS_ADMIN);
	return p->admin;
}

/* The pool's mode for MAY_READ, as ATTACH checks it for a client. */
static bool moecache_nl_party_may_read(const struct moecache_nl_party *p,
				       const struct moecache_pool_owner *o)
{
	return (moecache_owner_granted(o, p->cred) & MAY_READ) ||
	       moecache_nl_party_admin(p);
}

static bool moecache_nl_may_read(const struct moecache_nl_caller *c,
				 const struct moecache_pool_owner *o)
{
	return moecache_nl_party_may_read(&c->opener, o) &&
	       moecache_nl_party_may_read(&c->sender, o);
}

static bool moecache_nl_party_may_admin(const struct moecache_nl_party *p,
					const struct moecache_pool_owner *o)
{
	return uid_eq(p->cred->euid, o->uid) || moecache_nl_party_admin(p);
}

/*
 * May the caller learn that the pool exists: may both parties attach to
 * it in some role (read or write)? A refusal to anyone else is -ENOENT.
 */
static bool moecache_nl_may_see(const struct moecache_nl_caller *c,
				const struct moecache_pool_owner *o)
{
	const struct moecache_nl_party *p[] = { &c->opener, &c->sender };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(p); i++)
		if (!(moecache_owner_granted(o, p[i]->cred) &
		      (MAY_READ | MAY_WRITE)) &&
		    !moecache_nl_party_admin(p[i]))
			return false;
	return true;
}

/*
 * moecache_pool_fn: 0 if the caller (arg) may read the pool, -EACCES if it
 * may only write it, else -ENOENT.
 */
static int moecache_nl_check_read(struct moecache_pool *pool, void *arg)
{
	struct moecache_pool_owner owner;

	moecache_pool_owner(pool, &owner);
	if (moecache_nl_may_read(arg, &owner))
		return 0;
	return moecache_nl_may_see(arg, &owner) ? -EACCES : -ENOENT;
}

/* moecache_pool_fn: 0 if the caller (arg) may administer the pool. */
static int moecache_nl_check_admin(struct moecache_pool *pool, void *arg)
{
	const struct moecache_nl_caller *c = arg;
	struct moecache_pool_owner owner;

	moecache_pool_owner(pool, &owner);
	if (moecache_nl_party_may_admin(&c->opener, &owner) &&
	    moecache_nl_party_may_admin(&c->sender, &owner))
		return 0;
	return moecache_nl_may_see(c, &owner) ? -EPERM : -ENOENT;
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

/* Room in a message for the banks of any pool, with their stats. */
static size_t moecache_nl_banks_size(void)
{
	size_t bank = 2 * nla_total_size(0) + 11 * nla_total_size(sizeof(u32)) +
		      4 * nla_total_size_64bit(sizeof(u64));

	return nla_total_size(0) + MOECACHE_BANKS_CAP * bank;
}

static int moecache_nl_put_bank_stats(struct sk_buff *skb,
				      const struct moecache_bank_desc *d)
{
	struct nlattr *nest = nla_nest_start(skb, MOECACHE_BANK_A_STATS);

	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u64_64bit(skb, MOECACHE_STATS_A_HITS, d->hits,
			      MOECACHE_STATS_A_PAD) ||
	    nla_put_u64_64bit(skb, MOECACHE_STATS_A_PREFETCH_HITS,
			      d->prefetch_hits, MOECACHE_STATS_A_PAD) ||
	    nla_put_u64_64bit(skb, MOECACHE_STATS_A_EVICTIONS, d->evictions,
			      MOECACHE_STATS_A_PAD) ||
	    nla_put_u64_64bit(skb, MOECACHE_STATS_A_COMMITS, d->commits,
			      MOECACHE_STATS_A_PAD) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_RESIDENT, d->resident) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_FILLING, d->filling) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_PINNED_SLOTS, d->pinned_slots) ||
	    nla_put_u32(skb, MOECACHE_STATS_A_PINS, d->pins)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

/*
 * MOECACHE_A_BANKS: each bank's layout, and its stats if asked. Called
 * under the pool-list mutex (the pool cannot go).
 */
static int moecache_nl_put_banks(struct sk_buff *skb,
				 struct moecache_pool *pool, bool stats)
{
	struct moecache_bank_desc d;
	struct nlattr *banks, *bank;
	u32 i;

	banks = nla_nest_start(skb, MOECACHE_A_BANKS);
	if (!banks)
		return -EMSGSIZE;
	for (i = 0; !moecache_pool_bank(pool, i, &d); i++) {
		bank = nla_nest_start(skb, MOECACHE_BANKS_A_BANK);
		if (!bank ||
		    nla_put_u32(skb, MOECACHE_BANK_A_INDEX, d.index) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_TIER, d.tier) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_N_SLOTS, d.n_slots) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_BACKEND, d.backend) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_DEVICE, d.device) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_SLOT_BEGIN, d.slot_begin) ||
		    nla_put_u32(skb, MOECACHE_BANK_A_FLAGS, d.flags) ||
		    (stats && moecache_nl_put_bank_stats(skb, &d))) {
			nla_nest_cancel(skb, banks);
			return -EMSGSIZE;
		}
		nla_nest_end(skb, bank);
	}
	nla_nest_end(skb, banks);
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

/*
 * One STATS message: the pool name, the layer (absent for the pool),
 * stats, and for the pool its banks with theirs (under the pool-list mutex).
 */
static int moecache_nl_fill_stats(struct sk_buff *skb, u32 portid, u32 seq,
				  int flags, struct moecache_pool *pool,
				  const char *name, u32 layer,
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
	    moecache_nl_put_stats(skb, st) ||
	    (layer == MOECACHE_NONE && moecache_nl_put_banks(skb, pool, true))) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

struct moecache_nl_info_req {
	struct moecache_nl_caller caller;
	struct moecache_pool_desc desc;
	struct sk_buff *msg;
};

/* Fills the reply, allocated beforehand, with the pool and its banks. */
static int moecache_nl_describe(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_info_req *req = arg;
	int err;

	err = moecache_nl_check_read(pool, &req->caller);
	if (err)
		return err;
	moecache_pool_describe(pool, &req->desc);
	if (moecache_nl_put_pool(req->msg, &req->desc) ||
	    moecache_nl_put_banks(req->msg, pool, false))
		return -EMSGSIZE;
	return 0;
}

static int moecache_nl_pool_info(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_info_req req = {};
	char name[MOECACHE_NAME_LEN];
	void *hdr;
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	moecache_nl_caller_of(skb, &req.caller);
	req.msg = genlmsg_new(NLMSG_DEFAULT_SIZE + moecache_nl_banks_size(),
			      GFP_KERNEL);
	if (!req.msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(req.msg, info, &moecache_nl_family, 0,
				MOECACHE_CMD_POOL_INFO);
	err = hdr ? moecache_with_pool(name, moecache_nl_describe, &req) :
		    -EMSGSIZE;
	if (err == -EACCES)
		GENL_SET_ERR_MSG(info, "no read permission on the pool");
	if (err) {
		nlmsg_free(req.msg);
		return err;
	}
	genlmsg_end(req.msg, hdr);
	return genlmsg_reply(req.msg, info);
}

struct moecache_nl_dump {
	struct sk_buff *skb;
	struct netlink_callback *cb;
	struct moecache_nl_caller caller;
	unsigned long emitted;
};

static int moecache_nl_list_one(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_dump *dump = arg;
	struct netlink_callback *cb = dump->cb;
	struct moecache_pool_desc desc = {};
	void *hdr;

	/* A pool the caller may not read is not listed. */
	if (moecache_nl_check_read(pool, &dump->caller))
		return 0;
	moecache_pool_describe(pool, &desc);
	hdr = genlmsg_put(dump->skb, NETLINK_CB(cb->skb).portid,
			  cb->nlh->nlmsg_seq, &moecache_nl_family, NLM_F_MULTI,
			  MOECACHE_CMD_POOL_LIST);
	if (!hdr)
		return -EMSGSIZE;
	if (moecache_nl_put_pool(dump->skb, &desc) ||
	    moecache_nl_put_banks(dump->skb, pool, false)) {
		genlmsg_cancel(dump->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(dump->skb, hdr);
	dump->emitted++;
	return 0;
}

/* cb->args[0]: pools already visited (sent, or not the caller's to read). */
static int moecache_nl_pool_list(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	struct moecache_nl_dump dump = { .skb = skb, .cb = cb };
	unsigned long pos = cb->args[0];
	int err;

	moecache_nl_caller_of(cb->skb, &dump.caller);
	/* pos moves past each pool visited, not past the one that did not fit. */
	err = moecache_visit_pools(moecache_nl_list_one, &dump, &pos);
	cb->args[0] = pos;
	if (err && (err != -EMSGSIZE || !dump.emitted))
		return err;
	return skb->len;
}

struct moecache_nl_stats_req {
	struct moecache_nl_caller caller;
	u32 layer;
	struct moecache_stats st;
	struct sk_buff *msg;
	const char *name;
	u32 portid;
	u32 seq;
};

/* Fills the reply, allocated beforehand. */
static int moecache_nl_read_stats(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_stats_req *req = arg;
	int err;

	err = moecache_nl_check_read(pool, &req->caller);
	if (!err)
		err = moecache_pool_stats(pool, req->layer, &req->st);
	if (!err)
		err = moecache_nl_fill_stats(req->msg, req->portid, req->seq, 0,
					     pool, req->name, req->layer,
					     &req->st);
	return err;
}

static int moecache_nl_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_stats_req *req;
	char name[MOECACHE_NAME_LEN];
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	req = kzalloc_obj(*req, GFP_KERNEL);
	if (!req)
		return -ENOMEM;
	moecache_nl_caller_of(skb, &req->caller);
	req->layer = MOECACHE_NONE;
	if (info->attrs[MOECACHE_A_LAYER])
		req->layer = nla_get_u32(info->attrs[MOECACHE_A_LAYER]);
	req->name = name;
	req->portid = info->snd_portid;
	req->seq = info->snd_seq;
	req->msg = genlmsg_new(NLMSG_DEFAULT_SIZE + moecache_nl_banks_size(),
			       GFP_KERNEL);
	if (!req->msg) {
		err = -ENOMEM;
		goto out;
	}
	err = moecache_with_pool(name, moecache_nl_read_stats, req);
	if (err) {
		if (err == -EINVAL)
			GENL_SET_ERR_MSG(info, "layer out of range");
		else if (err == -EACCES)
			GENL_SET_ERR_MSG(info, "no read permission on the pool");
		nlmsg_free(req->msg);
		goto out;
	}
	err = genlmsg_reply(req->msg, info);
out:
	kfree(req);
	return err;
}

/*
 * Checked once, so that a dump of a pool that does not exist or may not be
 * read is an error; each part of the dump checks again.
 */
static int moecache_nl_stats_start(struct netlink_callback *cb)
{
	struct nlattr **attrs = moecache_genl_dump_attrs(cb);
	struct moecache_nl_caller caller;
	char name[MOECACHE_NAME_LEN];
	int err;

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
	moecache_nl_caller_of(cb->skb, &caller);
	err = moecache_with_pool(name, moecache_nl_check_read, &caller);
	if (err == -EACCES)
		NL_SET_ERR_MSG(cb->extack, "no read permission on the pool");
	return err;
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

	/* The pool may have been destroyed and created again since. */
	err = moecache_nl_check_read(pool, &dump->caller);
	if (err)
		return err;
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
					     pool, desc.name, layer, &st);
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
	moecache_nl_caller_of(cb->skb, &dump.caller);
	err = moecache_with_pool(name, moecache_nl_stats_dump_pool, &dump);
	if (err && (err != -EMSGSIZE || !dump.emitted))
		return err;
	return skb->len;
}

/*
 * MOECACHE_A_BANKS of POOL_CREATE into layouts (each entry checked by
 * moecache_nl_bank_policy); *banks is NULL when there is none, and
 * req->n_slots their sum if the request left it out.
 */
static int moecache_nl_get_banks(struct genl_info *info,
				 struct moecache_pool_create *req,
				 struct moecache_bank_layout **banks)
{
	struct nlattr *tb[MOECACHE_BANK_A_MAX + 1];
	struct nlattr *list = info->attrs[MOECACHE_A_BANKS], *entry;
	struct moecache_bank_layout *b;
	u32 n = 0, sum = 0;
	int rem, err;

	*banks = NULL;
	if (!list)
		return 0;
	nla_for_each_nested(entry, list, rem) {
		if (nla_type(entry) != MOECACHE_BANKS_A_BANK) {
			NL_SET_ERR_MSG_ATTR(info->extack, entry,
					    "BANKS holds BANK entries only");
			return -EINVAL;
		}
		n++;
	}
	if (!n) {
		NL_SET_ERR_MSG_ATTR(info->extack, list, "no bank");
		return -EINVAL;
	}
	if (n > MOECACHE_BANKS_CAP) {
		NL_SET_ERR_MSG_ATTR(info->extack, list, "more banks than max_banks");
		return -E2BIG;
	}
	b = kcalloc(n, sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	n = 0;
	nla_for_each_nested(entry, list, rem) {
		err = nla_parse_nested(tb, MOECACHE_BANK_A_MAX, entry,
				       moecache_nl_bank_policy, info->extack);
		if (!err && (!tb[MOECACHE_BANK_A_TIER] ||
			     !tb[MOECACHE_BANK_A_N_SLOTS])) {
			NL_SET_ERR_MSG_ATTR(info->extack, entry,
					    "a bank needs TIER and N_SLOTS");
			err = -EINVAL;
		}
		if (err) {
			kfree(b);
			return err;
		}
		b[n].tier = nla_get_u32(tb[MOECACHE_BANK_A_TIER]);
		b[n].n_slots = nla_get_u32(tb[MOECACHE_BANK_A_N_SLOTS]);
		if (tb[MOECACHE_BANK_A_BACKEND])
			b[n].backend = nla_get_u32(tb[MOECACHE_BANK_A_BACKEND]);
		if (tb[MOECACHE_BANK_A_DEVICE])
			b[n].device = nla_get_u32(tb[MOECACHE_BANK_A_DEVICE]);
		/* Saturated: the core refuses a sum past max_slots. */
		sum = min_t(u64, (u64)sum + b[n].n_slots, U32_MAX);
		n++;
	}
	req->n_banks = n;
	if (!info->attrs[MOECACHE_A_N_SLOTS])
		req->n_slots = sum;
	*banks = b;
	return 0;
}

static int moecache_nl_pool_create(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **attrs = info->attrs;
	struct moecache_pool_create req = {};
	struct moecache_bank_layout *banks;
	int err;

	/* The ioctl's rule, checked on the socket's opener too. */
	if (!netlink_capable(skb, CAP_SYS_ADMIN))
		return -EPERM;
	if (GENL_REQ_ATTR_CHECK(info, MOECACHE_A_POOL_NAME) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_LAYERS) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_EXPERTS) ||
	    (!attrs[MOECACHE_A_BANKS] &&
	     GENL_REQ_ATTR_CHECK(info, MOECACHE_A_N_SLOTS)) ||
	    GENL_REQ_ATTR_CHECK(info, MOECACHE_A_EXPERT_BYTES))
		return -EINVAL;

	nla_strscpy(req.name, attrs[MOECACHE_A_POOL_NAME], sizeof(req.name));
	req.n_layers = nla_get_u32(attrs[MOECACHE_A_N_LAYERS]);
	req.n_experts = nla_get_u32(attrs[MOECACHE_A_N_EXPERTS]);
	if (attrs[MOECACHE_A_N_SLOTS])
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
	err = moecache_nl_get_banks(info, &req, &banks);
	if (err)
		return err;
	err = moecache_pool_create(&req, banks);
	kfree(banks);
	return err;
}

static int moecache_nl_pool_destroy(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_caller caller;
	char name[MOECACHE_NAME_LEN];
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	moecache_nl_caller_of(skb, &caller);
	/* Checked on the pool found, under the lock that destroys it. */
	return moecache_pool_destroy(name, moecache_nl_check_admin, &caller);
}

struct moecache_nl_flush_req {
	struct moecache_nl_caller caller;
	u32 flushed;
};

static int moecache_nl_flush_pool(struct moecache_pool *pool, void *arg)
{
	struct moecache_nl_flush_req *req = arg;
	int ret;

	ret = moecache_nl_check_admin(pool, &req->caller);
	if (ret)
		return ret;
	ret = moecache_pool_flush(pool);
	if (ret < 0)
		return ret;
	req->flushed = ret;
	return 0;
}

static int moecache_nl_flush(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_flush_req req = {};
	char name[MOECACHE_NAME_LEN];
	struct sk_buff *msg;
	void *hdr;
	int err;

	err = moecache_nl_get_name(info, name);
	if (err)
		return err;
	moecache_nl_caller_of(skb, &req.caller);
	/* Allocated first: a flush that happened is always reported. */
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	err = moecache_with_pool(name, moecache_nl_flush_pool, &req);
	if (err) {
		nlmsg_free(msg);
		return err;
	}
	hdr = genlmsg_put_reply(msg, info, &moecache_nl_family, 0,
				MOECACHE_CMD_FLUSH);
	if (!hdr || nla_put_string(msg, MOECACHE_A_POOL_NAME, name) ||
	    nla_put_u32(msg, MOECACHE_A_FLUSHED, req.flushed)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/* ---- events: subscriptions ---- */

static void moecache_nl_sub_put(struct moecache_nl_sub *sub)
{
	if (!refcount_dec_and_test(&sub->ref))
		return;
	put_cred(sub->who.opener.cred);
	put_cred(sub->who.sender.cred);
	put_pid_ns(sub->pid_ns);
	sock_put(sub->sk);
	kfree(sub);
}

/* The subscription of portid, or NULL. */
static struct moecache_nl_sub *moecache_nl_sub_find(u32 portid)
{
	struct moecache_nl_sub *sub;

	lockdep_assert_held(&moecache_nl_subs_lock);
	list_for_each_entry(sub, &moecache_nl_subs, node)
		if (sub->portid == portid)
			return sub;
	return NULL;
}

static void moecache_nl_sub_unlink(struct moecache_nl_sub *sub)
{
	lockdep_assert_held(&moecache_nl_subs_lock);
	list_del(&sub->node);
	/* Read without the lock by moecache_nl_event(). */
	WRITE_ONCE(moecache_nl_n_subs, moecache_nl_n_subs - 1);
}

/* Room for one more subscription of this caller? */
static int moecache_nl_sub_room(const struct moecache_nl_sub *new)
{
	const struct moecache_nl_sub *sub;
	unsigned int mine = 0;

	lockdep_assert_held(&moecache_nl_subs_lock);
	if (moecache_nl_n_subs >= READ_ONCE(max_event_listeners))
		return -ENOSPC;
	if (new->who.opener.admin && new->who.sender.admin)
		return 0;
	list_for_each_entry(sub, &moecache_nl_subs, node)
		if (uid_eq(sub->who.sender.cred->euid,
			   new->who.sender.cred->euid))
			mine++;
	return mine >= READ_ONCE(max_user_event_listeners) ? -ENOSPC : 0;
}

static int moecache_nl_subscribe(struct sk_buff *skb, struct genl_info *info)
{
	const struct file *file = NETLINK_CB(skb).sk->sk_socket->file;
	struct moecache_nl_sub *sub, *old, *stale = NULL;
	int err;

	sub = kzalloc_obj(*sub, GFP_KERNEL_ACCOUNT);
	if (!sub)
		return -ENOMEM;
	refcount_set(&sub->ref, 1);
	sub->portid = info->snd_portid;
	sub->sk = NETLINK_CB(skb).sk;
	sock_hold(sub->sk);
	sub->who.opener.cred = get_cred(file->f_cred);
	sub->who.opener.admin = file_ns_capable(file, &init_user_ns,
						CAP_SYS_ADMIN);
	sub->who.sender.cred = get_current_cred();
	sub->who.sender.admin = capable(CAP_SYS_ADMIN);
	sub->pid_ns = get_pid_ns(task_active_pid_ns(current));

	spin_lock(&moecache_nl_subs_lock);
	old = moecache_nl_sub_find(sub->portid);
	if (old && old->sk == sub->sk) {
		err = -EALREADY;
		goto out_unlock;
	}
	/* A closed socket's port id, taken before its release was seen. */
	if (old) {
		moecache_nl_sub_unlink(old);
		stale = old;
	}
	err = moecache_nl_sub_room(sub);
	if (err) {
		GENL_SET_ERR_MSG(info, "too many event listeners");
		goto out_unlock;
	}
	list_add_tail(&sub->node, &moecache_nl_subs);
	WRITE_ONCE(moecache_nl_n_subs, moecache_nl_n_subs + 1);
	sub = NULL;
out_unlock:
	spin_unlock(&moecache_nl_subs_lock);
	if (stale)
		moecache_nl_sub_put(stale);
	if (sub)
		moecache_nl_sub_put(sub);
	return err;
}

static int moecache_nl_unsubscribe(struct sk_buff *skb, struct genl_info *info)
{
	struct moecache_nl_sub *sub;

	spin_lock(&moecache_nl_subs_lock);
	sub = moecache_nl_sub_find(info->snd_portid);
	if (sub && sub->sk == NETLINK_CB(skb).sk)
		moecache_nl_sub_unlink(sub);
	else
		sub = NULL;
	spin_unlock(&moecache_nl_subs_lock);
	if (!sub)
		return -ENOENT;
	moecache_nl_sub_put(sub);
	return 0;
}

/*
 * A socket is released: its subscription ends. Its port id is free from
 * here on, so only the subscription of the dead socket goes (another
 * socket may hold that port id already).
 */
static int moecache_nl_release(struct notifier_block *nb, unsigned long state,
			       void *ptr)
{
	struct netlink_notify *n = ptr;
	struct moecache_nl_sub *sub;

	if (state != NETLINK_URELEASE || n->protocol != NETLINK_GENERIC ||
	    !net_eq(n->net, &init_net))
		return NOTIFY_DONE;
	spin_lock(&moecache_nl_subs_lock);
	sub = moecache_nl_sub_find(n->portid);
	if (sub && sock_flag(sub->sk, SOCK_DEAD))
		moecache_nl_sub_unlink(sub);
	else
		sub = NULL;
	spin_unlock(&moecache_nl_subs_lock);
	if (sub)
		moecache_nl_sub_put(sub);
	return NOTIFY_DONE;
}

static struct notifier_block moecache_nl_notifier = {
	.notifier_call = moecache_nl_release,
};

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
	{
		/* takes no attribute */
		.cmd		= MOECACHE_CMD_EVENTS_SUBSCRIBE,
		.doit		= moecache_nl_subscribe,
	},
	{
		.cmd		= MOECACHE_CMD_EVENTS_UNSUBSCRIBE,
		.doit		= moecache_nl_unsubscribe,
	},
};

/*
 * No family-wide .maxattr: each operation with attributes names its own
 * policy and maxattr. An operation without a policy gets genetlink's
 * reject-all policy; 6.1 and 6.12 bound it, but 7.2 keeps the family's
 * maxattr with it, and any attribute then indexes past that one-entry
 * policy (7.2.13: kernel BUG at lib/nlattr.c:411 on a POOL_LIST carrying
 * an attribute).
 */
static struct genl_family moecache_nl_family __ro_after_init = {
	.name		= MOECACHE_GENL_NAME,
	.version	= MOECACHE_GENL_VERSION,
	.netnsok	= false,
	/* the core locks pools itself; genl_mutex would serialise for nothing */
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.ops		= moecache_nl_ops,
	.n_ops		= ARRAY_SIZE(moecache_nl_ops),
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
				      enum moecache_event ev, u32 pid,
				      u32 arg0, u32 arg1)
{
	switch (ev) {
	case MOECACHE_EV_AGENT_ATTACHED:
	case MOECACHE_EV_AGENT_LOST:
		/* 0: unknown, or not in the listener's pid namespace */
		return pid ? nla_put_u32(msg, MOECACHE_A_AGENT_PID, pid) : 0;
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

/* Takes a reference to each subscription; returns how many, up to max. */
static unsigned int moecache_nl_subs_get(struct moecache_nl_sub **subs,
					 unsigned int max)
{
	struct moecache_nl_sub *sub;
	unsigned int n = 0;

	spin_lock(&moecache_nl_subs_lock);
	list_for_each_entry(sub, &moecache_nl_subs, node) {
		if (n == max)
			break;
		refcount_inc(&sub->ref);
		subs[n++] = sub;
	}
	spin_unlock(&moecache_nl_subs_lock);
	return n;
}

/*
 * Queues an event on the subscribed socket itself, never on whatever
 * socket holds its port id: netlink_release() frees the port id before it
 * marks the socket dead, so between a check of SOCK_DEAD and the port id
 * lookup genlmsg_unicast() makes, another socket could bind that port id
 * and receive an event of a pool it may not read. netlink exports no call
 * that sends to a given sock (netlink_attachskb() and netlink_sendskb()
 * serve the built-in mqueue), so the event takes the socket core's receive
 * path, which netlink's recvmsg() reads: the socket filter, the receive
 * buffer limit, the receive queue. A full buffer drops the event and
 * reports ENOBUFS on the socket, as netlink_overrun() does; the socket's
 * NETLINK_NO_ENOBUFS, netlink's private flag, is not seen here, and nlmon
 * taps do not see events. The caller holds a reference to sk, so a socket
 * released meanwhile only has the event purged with its queue.
 */
static void moecache_nl_deliver(struct sock *sk, struct sk_buff *msg)
{
	int err;

	if (sock_flag(sk, SOCK_DEAD)) {
		nlmsg_free(msg);
		return;
	}
	err = sock_queue_rcv_skb(sk, msg);
	if (!err)
		return;
	kfree_skb(msg);
	if (err == -ENOMEM || err == -ENOBUFS) {
		WRITE_ONCE(sk->sk_err, ENOBUFS);
		sk_error_report(sk);
	}
}

static void moecache_nl_send_event(struct moecache_nl_sub *sub, u32 type,
				   enum moecache_event ev,
				   const char *pool_name, struct pid *agent,
				   u32 arg0, u32 arg1)
{
	u32 pid = agent ? pid_nr_ns(agent, sub->pid_ns) : 0;
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &moecache_nl_family, 0,
			  MOECACHE_CMD_EVENT);
	if (!hdr || nla_put_u32(msg, MOECACHE_A_EVENT, type) ||
	    nla_put_string(msg, MOECACHE_A_POOL_NAME, pool_name) ||
	    moecache_nl_put_event_args(msg, ev, pid, arg0, arg1)) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	moecache_nl_deliver(sub->sk, msg);
}

void moecache_nl_event(enum moecache_event ev, const char *pool_name,
		       const struct moecache_pool_owner *owner,
		       struct pid *agent, u32 arg0, u32 arg1)
{
	u32 type = moecache_nl_event_type(ev);
	struct moecache_nl_sub **subs;
	unsigned int i, n;

	if (!READ_ONCE(moecache_nl_registered) || type == MOECACHE_EVENT_UNSPEC)
		return;
	/* Nothing is built while nobody listens. */
	n = READ_ONCE(moecache_nl_n_subs);
	if (!n)
		return;
	/* One that subscribes meanwhile misses this event, as it would. */
	subs = kmalloc_array(n, sizeof(*subs), GFP_KERNEL);
	if (!subs)
		return;
	n = moecache_nl_subs_get(subs, n);
	for (i = 0; i < n; i++) {
		if (moecache_nl_may_read(&subs[i]->who, owner))
			moecache_nl_send_event(subs[i], type, ev, pool_name,
					       agent, arg0, arg1);
		moecache_nl_sub_put(subs[i]);
	}
	kfree(subs);
}

int moecache_nl_init(void)
{
	int err;

	err = netlink_register_notifier(&moecache_nl_notifier);
	if (err)
		return err;
	err = genl_register_family(&moecache_nl_family);
	if (err) {
		netlink_unregister_notifier(&moecache_nl_notifier);
		return err;
	}
	WRITE_ONCE(moecache_nl_registered, true);
	return 0;
}

void moecache_nl_exit(void)
{
	struct moecache_nl_sub *sub, *next;
	LIST_HEAD(subs);

	WRITE_ONCE(moecache_nl_registered, false);
	genl_unregister_family(&moecache_nl_family);
	netlink_unregister_notifier(&moecache_nl_notifier);
	spin_lock(&moecache_nl_subs_lock);
	list_splice_init(&moecache_nl_subs, &subs);
	WRITE_ONCE(moecache_nl_n_subs, 0);
	spin_unlock(&moecache_nl_subs_lock);
	list_for_each_entry_safe(sub, next, &subs, node)
		moecache_nl_sub_put(sub);
}
