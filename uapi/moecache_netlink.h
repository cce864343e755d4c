/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * moecache generic netlink family: pools, statistics and events.
 *
 * Family MOECACHE_GENL_NAME, version MOECACHE_GENL_VERSION. Every command has
 * its own attribute policy and is validated strictly: an attribute the
 * command does not take, a wrong length or an out-of-range value is an
 * error. docs/moecachectl.md describes each command, who may send it and its
 * replies.
 *
 * Rights are checked on both the process that opened the socket and the one
 * sending the request: each must have them. A pool is visible (POOL_LIST,
 * POOL_INFO, STATS, events) only to who may read it, as ATTACH as a client
 * would allow. Pids are in the pid namespace of the task reading them.
 *
 * Events are not multicast: a socket sends EVENTS_SUBSCRIBE and then
 * receives, unicast, MOECACHE_CMD_EVENT messages of the pools its opener
 * and its subscriber may both read, until it is closed or unsubscribes.
 * Version 1 had a multicast group "events" open to anyone; it is gone.
 */
#ifndef _UAPI_LINUX_MOECACHE_NETLINK_H
#define _UAPI_LINUX_MOECACHE_NETLINK_H

#include <linux/types.h>

#define MOECACHE_GENL_NAME		"moecache"
#define MOECACHE_GENL_VERSION		2

enum moecache_nl_cmd {
	MOECACHE_CMD_UNSPEC,
	/* dump: one reply per pool the caller may read: the pool attributes */
	MOECACHE_CMD_POOL_LIST,
	/* read permission: POOL_NAME -> the pool attributes */
	MOECACHE_CMD_POOL_INFO,
	/*
	 * read permission: POOL_NAME [LAYER] -> STATS of the pool or of one
	 * layer; the pool's (no LAYER) also carries BANKS, each bank with its
	 * BANK_A_STATS.
	 * As a dump: POOL_NAME -> the pool's STATS and BANKS, then one reply
	 * per layer (each with LAYER).
	 */
	MOECACHE_CMD_STATS,
	/* CAP_SYS_ADMIN: creates a pool, as MOECACHE_IOC_POOL_CREATE */
	MOECACHE_CMD_POOL_CREATE,
	/* CAP_SYS_ADMIN or the pool's owner: POOL_NAME */
	MOECACHE_CMD_POOL_DESTROY,
	/* CAP_SYS_ADMIN or the pool's owner: POOL_NAME -> FLUSHED */
	MOECACHE_CMD_FLUSH,
	/* sent to subscribed sockets only: EVENT, POOL_NAME, ... */
	MOECACHE_CMD_EVENT,
	/* anyone: this socket receives the events of the pools it may read */
	MOECACHE_CMD_EVENTS_SUBSCRIBE,
	/* a subscribed socket: it receives no more events */
	MOECACHE_CMD_EVENTS_UNSUBSCRIBE,

	__MOECACHE_CMD_MAX,
};

#define MOECACHE_CMD_MAX (__MOECACHE_CMD_MAX - 1)

enum moecache_nl_attr {
	MOECACHE_A_UNSPEC,
	MOECACHE_A_PAD,
	MOECACHE_A_POOL_NAME,		/* string, 1..63 characters */
	MOECACHE_A_N_LAYERS,		/* u32 */
	MOECACHE_A_N_EXPERTS,		/* u32, experts per layer in the model */
	MOECACHE_A_EXPERT_BEGIN,	/* u32, local range; create: default 0 */
	MOECACHE_A_EXPERT_END,		/* u32; create: default N_EXPERTS */
	MOECACHE_A_N_SLOTS,		/* u32 */
	MOECACHE_A_EXPERT_BYTES,	/* u64 */
	MOECACHE_A_UID,			/* u32; create: default the caller's */
	MOECACHE_A_GID,			/* u32; create: default the caller's */
	MOECACHE_A_MODE,		/* u32 permission bits; create: default 0600 */
	MOECACHE_A_POOL_FLAGS,		/* u32 MOECACHE_POOL_* (reply) */
	MOECACHE_A_HOST_BYTES,		/* u64 host pages of the pool (reply) */
	MOECACHE_A_N_FILES,		/* u32 attached files (reply) */
	MOECACHE_A_AGENT_PID,		/* u32, 0 without an agent (reply, event) */
	MOECACHE_A_AGENT_EPOCH,		/* u32 (reply) */
	MOECACHE_A_LAYER,		/* u32 */
	MOECACHE_A_STATS,		/* nest of MOECACHE_STATS_A_* (reply) */
	MOECACHE_A_FLUSHED,		/* u32 slots freed by FLUSH (reply) */
	MOECACHE_A_EVENT,		/* u32 enum moecache_nl_event (event) */
	MOECACHE_A_EXPERT,		/* u32 global expert id (event) */
	MOECACHE_A_MISSES,		/* u32 misses in the last interval (event) */
	/*
	 * Nest of MOECACHE_BANKS_A_BANK, one per bank in index order. In
	 * POOL_CREATE (optional; absent: one bank of N_SLOTS, tier 0): each
	 * bank's TIER, N_SLOTS, and optionally BACKEND and DEVICE, as struct
	 * moecache_bank_layout; N_SLOTS may then be left out (the sum). In the
	 * pool attributes (POOL_LIST, POOL_INFO): every bank's layout. In the
	 * pool's STATS reply: the layout and BANK_A_STATS.
	 */
	MOECACHE_A_BANKS,

	__MOECACHE_A_MAX,
};

#define MOECACHE_A_MAX (__MOECACHE_A_MAX - 1)

/* Inside MOECACHE_A_STATS; the fields of struct moecache_stats. */
enum moecache_nl_stats_attr {
	MOECACHE_STATS_A_UNSPEC,
	MOECACHE_STATS_A_PAD,
	MOECACHE_STATS_A_HITS,		/* u64 */
	MOECACHE_STATS_A_MISSES,	/* u64 */
	MOECACHE_STATS_A_PREFETCH_HITS,	/* u64 */
	MOECACHE_STATS_A_PREFETCHES,	/* u64 */
	MOECACHE_STATS_A_EVICTIONS,	/* u64 */
	MOECACHE_STATS_A_COMMITS,	/* u64 */
	MOECACHE_STATS_A_ABORTS,	/* u64 */
	MOECACHE_STATS_A_BYTES_COPIED,	/* u64 */
	MOECACHE_STATS_A_WAITS,		/* u64 */
	MOECACHE_STATS_A_WAIT_NS,	/* u64 */
	MOECACHE_STATS_A_WAIT_HIST,	/* nest of MOECACHE_HIST_A_* */
	MOECACHE_STATS_A_RESIDENT,	/* u32, pool-wide from here on */
	MOECACHE_STATS_A_FILLING,	/* u32 */
	MOECACHE_STATS_A_PINNED_SLOTS,	/* u32 */
	MOECACHE_STATS_A_PINS,		/* u32 */
	MOECACHE_STATS_A_QUEUED,	/* u32 */
	MOECACHE_STATS_A_INFLIGHT,	/* u32 */
	MOECACHE_STATS_A_N_CLIENTS,	/* u32 */
	MOECACHE_STATS_A_AGENT_PID,	/* u32 */

	__MOECACHE_STATS_A_MAX,
};

#define MOECACHE_STATS_A_MAX (__MOECACHE_STATS_A_MAX - 1)

/* Inside MOECACHE_A_BANKS: each entry is a nest of MOECACHE_BANK_A_*. */
enum moecache_nl_banks_attr {
	MOECACHE_BANKS_A_UNSPEC,
	MOECACHE_BANKS_A_BANK,

	__MOECACHE_BANKS_A_MAX,
};

#define MOECACHE_BANKS_A_MAX (__MOECACHE_BANKS_A_MAX - 1)

/* One bank of a pool; "reply" attributes are refused in POOL_CREATE. */
enum moecache_nl_bank_attr {
	MOECACHE_BANK_A_UNSPEC,
	MOECACHE_BANK_A_PAD,
	MOECACHE_BANK_A_INDEX,		/* u32 (reply) */
	MOECACHE_BANK_A_TIER,		/* u32, 0 the fastest */
	MOECACHE_BANK_A_N_SLOTS,	/* u32 */
	MOECACHE_BANK_A_BACKEND,	/* u32 enum moecache_backend; create: default NONE */
	MOECACHE_BANK_A_DEVICE,		/* u32 the backend's ordinal; create: default 0 */
	MOECACHE_BANK_A_SLOT_BEGIN,	/* u32 its first global slot (reply) */
	MOECACHE_BANK_A_FLAGS,		/* u32 MOECACHE_MAP_BANK_* (reply) */
	/*
	 * Nest of MOECACHE_STATS_A_* (pool STATS reply): the bank's HITS,
	 * PREFETCH_HITS, EVICTIONS, COMMITS, RESIDENT, FILLING, PINNED_SLOTS
	 * and PINS, as MOECACHE_IOC_STATS with MOECACHE_STATS_BANK.
	 */
	MOECACHE_BANK_A_STATS,

	__MOECACHE_BANK_A_MAX,
};

#define MOECACHE_BANK_A_MAX (__MOECACHE_BANK_A_MAX - 1)

/*
 * Inside MOECACHE_STATS_A_WAIT_HIST: attribute MOECACHE_HIST_A_BUCKET + i
 * is a u64, bucket i of the wait-time histogram (waits shorter than 2^i
 * microseconds; the last bucket counts everything longer), for i below
 * MOECACHE_WAIT_BUCKETS.
 */
enum moecache_nl_hist_attr {
	MOECACHE_HIST_A_UNSPEC,
	MOECACHE_HIST_A_PAD,
	MOECACHE_HIST_A_BUCKET,
};

/* MOECACHE_A_EVENT values, and the attributes each event carries. */
enum moecache_nl_event {
	MOECACHE_EVENT_UNSPEC,
	MOECACHE_EVENT_POOL_CREATED,	/* POOL_NAME */
	MOECACHE_EVENT_POOL_DESTROYED,	/* POOL_NAME */
	MOECACHE_EVENT_AGENT_ATTACHED,	/* POOL_NAME, AGENT_PID */
	MOECACHE_EVENT_AGENT_LOST,	/* POOL_NAME, AGENT_PID */
	MOECACHE_EVENT_EVICTION,	/* POOL_NAME, LAYER, EXPERT (sampled) */
	MOECACHE_EVENT_MISS_STORM,	/* POOL_NAME, MISSES */

	__MOECACHE_EVENT_MAX,
};

#define MOECACHE_EVENT_MAX (__MOECACHE_EVENT_MAX - 1)

#endif /* _UAPI_LINUX_MOECACHE_NETLINK_H */
