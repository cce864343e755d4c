/* SPDX-License-Identifier: MIT */
/*
 * Client of the moecache generic netlink family (uapi/moecache_netlink.h)
 * on libnl-genl-3. Functions return 0 or the kernel's -errno; after an
 * error, ctl_nl_message() gives the kernel's extended ack text, if any.
 */
#ifndef MOECACHE_CTL_NL_H
#define MOECACHE_CTL_NL_H

#include <stdbool.h>
#include <stdint.h>

#include <moecache.h>

struct nl_sock;
struct nl_msg;

struct ctl_nl {
	struct nl_sock *sk;
	int family;
	char message[256]; /* extack text of the last error */
};

/* What POOL_INFO and POOL_LIST report of a pool. */
struct ctl_pool {
	char name[MOECACHE_NAME_LEN];
	uint32_t n_layers;
	uint32_t n_experts;
	uint32_t expert_begin;
	uint32_t expert_end;
	uint32_t n_slots;
	uint64_t expert_bytes;
	uint64_t host_bytes;
	uint32_t uid;
	uint32_t gid;
	uint32_t mode;
	uint32_t flags;
	uint32_t n_files;
	uint32_t agent_pid;
	uint32_t agent_epoch;
};

/* POOL_CREATE: the ioctl's fields; the has_* ones are sent only if set. */
struct ctl_create {
	struct moecache_pool_create req;
	bool has_range;
	bool has_uid;
	bool has_gid;
	bool has_mode;
	/* the banks (MOECACHE_A_BANKS), fastest first; none: one bank of req.n_slots */
	const struct moecache_bank_layout *banks;
	uint32_t n_banks;
};

/* One bank of a pool as a STATS reply gives it: its layout and its counters. */
struct ctl_bank {
	struct moecache_map_bank layout;
	struct moecache_stats st;
};

struct ctl_event {
	uint32_t type; /* enum moecache_nl_event */
	char pool[MOECACHE_NAME_LEN];
	bool has_layer, has_expert, has_pid, has_misses;
	uint32_t layer;
	uint32_t expert;
	uint32_t pid;
	uint32_t misses;
};

/* -ENOENT with a message when the module (and so the family) is absent. */
int ctl_nl_open(struct ctl_nl *nl);
void ctl_nl_close(struct ctl_nl *nl);
const char *ctl_nl_message(const struct ctl_nl *nl);

int ctl_nl_pool_list(struct ctl_nl *nl, int (*fn)(const struct ctl_pool *pool, void *arg),
		     void *arg);
int ctl_nl_pool_info(struct ctl_nl *nl, const char *name, struct ctl_pool *out);
/* layer MOECACHE_NONE: the whole pool. */
int ctl_nl_stats(struct ctl_nl *nl, const char *name, uint32_t layer, struct moecache_stats *out);
/* The pool (layer MOECACHE_NONE), then every layer. */
int ctl_nl_stats_dump(struct ctl_nl *nl, const char *name,
		      int (*fn)(uint32_t layer, const struct moecache_stats *st, void *arg),
		      void *arg);
/*
 * As ctl_nl_stats_dump, and *n_banks of banks[max_banks] receive the
 * pool's banks (0 for a pool of one bank or a driver without them).
 */
int ctl_nl_stats_dump_banks(struct ctl_nl *nl, const char *name,
			    int (*fn)(uint32_t layer, const struct moecache_stats *st, void *arg),
			    void *arg, struct ctl_bank *banks, uint32_t max_banks,
			    uint32_t *n_banks);
int ctl_nl_pool_create(struct ctl_nl *nl, const struct ctl_create *c);
int ctl_nl_pool_destroy(struct ctl_nl *nl, const char *name);
int ctl_nl_flush(struct ctl_nl *nl, const char *name, uint32_t *flushed);

/*
 * Subscribes the socket to the events of the pools it may read (EALREADY
 * if it is); then ctl_nl_event_wait delivers them. The subscription ends
 * with ctl_nl_events_leave or when the socket is closed.
 */
int ctl_nl_events_join(struct ctl_nl *nl);
int ctl_nl_events_leave(struct ctl_nl *nl);
/*
 * Waits up to timeout_ms (-1: forever) for events and calls fn for each;
 * returns 0 after a batch, -ETIMEDOUT, -EINTR, or fn's negative return.
 */
int ctl_nl_event_wait(struct ctl_nl *nl, int timeout_ms,
		      int (*fn)(const struct ctl_event *ev, void *arg), void *arg);
const char *ctl_nl_event_name(uint32_t type);

/*
 * Sends msg (a request built with ctl_nl_msg_new) and waits for the
 * answer: 0, or the -errno the kernel acked. Replies go to parse. For tests
 * of malformed requests too.
 */
struct nl_msg *ctl_nl_msg_new(struct ctl_nl *nl, uint8_t cmd, int flags);
int ctl_nl_transact(struct ctl_nl *nl, struct nl_msg *msg,
		    int (*parse)(struct nl_msg *reply, void *arg), void *arg);

#endif /* MOECACHE_CTL_NL_H */
