// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-fuzz: generic netlink. Messages to the moecache family are built
 * by hand, since a library would refuse to build most of them: every command
 * (and unknown ones), as a request or a dump, with valid attributes or with
 * defects (unknown or rejected types, wrong lengths, values out of range, a
 * name without its NUL, a missing name, a bad nla_len, bytes left over, a
 * truncated header, a non-zero reserved byte, flags genetlink refuses). Some
 * lanes subscribe to events and read them only by the way, so events also
 * meet a full socket. Every reply must parse and match the request; a
 * refusal must carry an errno that its defects or the pools' state explain.
 *
 * The errnos come from the kernel's own rules (net/netlink/genetlink.c,
 * lib/nlattr.c): strict validation gives EINVAL, a policy range ERANGE, an
 * unknown command or a missing handler EOPNOTSUPP.
 */
#include <errno.h>
#include <limits.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <moecache_netlink.h>

#include "fuzz.h"

#define NL_REQ_MAX 1024
#define NL_RECV_MAX 65536
/* A reply slower than this is reported (KASAN under TCG is slow). */
#define NL_TIMEOUT_MS 30000

struct nl_req {
	uint8_t buf[NL_REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t len;
};

static struct nlmsghdr *req_hdr(struct nl_req *r)
{
	return (struct nlmsghdr *)r->buf;
}

static void req_init(struct nl_req *r, uint16_t type, uint16_t flags, uint8_t cmd)
{
	struct genlmsghdr *g;

	memset(r->buf, 0, sizeof(r->buf));
	req_hdr(r)->nlmsg_type = type;
	req_hdr(r)->nlmsg_flags = flags;
	g = (struct genlmsghdr *)(r->buf + NLMSG_HDRLEN);
	g->cmd = cmd;
	g->version = MOECACHE_GENL_VERSION;
	r->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

/* An attribute whose header says nla_len; len bytes of data follow. */
static void req_put_raw(struct nl_req *r, uint16_t type, uint16_t nla_len, const void *data,
			size_t len)
{
	struct nlattr *a;

	if (r->len + NLA_HDRLEN + NLA_ALIGN(len) > sizeof(r->buf))
		return;
	a = (struct nlattr *)(r->buf + r->len);
	a->nla_type = type;
	a->nla_len = nla_len;
	if (len)
		memcpy(r->buf + r->len + NLA_HDRLEN, data, len);
	r->len += NLA_HDRLEN + NLA_ALIGN(len);
}

static void req_put(struct nl_req *r, uint16_t type, const void *data, size_t len)
{
	req_put_raw(r, type, (uint16_t)(NLA_HDRLEN + len), data, len);
}

static void req_put_u32(struct nl_req *r, uint16_t type, uint32_t v)
{
	req_put(r, type, &v, sizeof(v));
}

static void req_put_u64(struct nl_req *r, uint16_t type, uint64_t v)
{
	req_put(r, type, &v, sizeof(v));
}

static void req_put_str(struct nl_req *r, uint16_t type, const char *s)
{
	req_put(r, type, s, strlen(s) + 1);
}

/* ---- the socket ---- */

static int nl_send(int fd, const void *buf, size_t len)
{
	struct sockaddr_nl to = {.nl_family = AF_NETLINK};

	return sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0 ? -errno : 0;
}

/* One datagram, waiting up to timeout_ms; 0 on timeout. */
static ssize_t nl_recv(int fd, uint8_t *buf, size_t size, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	for (;;) {
		if (poll(&p, 1, timeout_ms) <= 0)
			return 0;
		n = recv(fd, buf, size, MSG_DONTWAIT | MSG_TRUNC);
		if (n >= 0)
			return n;
		/* Events overran the socket: nothing of ours is lost by that alone. */
		if (errno == ENOBUFS || errno == EINTR || errno == EAGAIN)
			continue;
		return -errno;
	}
}

/* Finds the family through the controller. */
static int nl_resolve(struct fz_lane *l)
{
	uint8_t *buf = malloc(NL_RECV_MAX);
	struct nl_req r;
	struct nlmsghdr *h;
	struct nlattr *a;
	ssize_t n;
	int rem, ret = -ENOENT;

	if (!buf)
		return -ENOMEM;
	req_init(&r, GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, CTRL_CMD_GETFAMILY);
	req_put_str(&r, CTRL_ATTR_FAMILY_NAME, MOECACHE_GENL_NAME);
	req_hdr(&r)->nlmsg_len = (uint32_t)r.len;
	req_hdr(&r)->nlmsg_seq = ++l->nl_seq;
	ret = nl_send(l->nl_fd, r.buf, r.len);
	if (ret)
		goto out;
	ret = -ENOENT;
	n = nl_recv(l->nl_fd, buf, NL_RECV_MAX, NL_TIMEOUT_MS);
	h = (struct nlmsghdr *)buf;
	if (n <= 0 || !NLMSG_OK(h, n) || h->nlmsg_type != GENL_ID_CTRL)
		goto out;
	a = (struct nlattr *)((uint8_t *)NLMSG_DATA(h) + GENL_HDRLEN);
	rem = (int)h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	for (; rem >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= rem;
	     rem -= NLA_ALIGN(a->nla_len),
	     a = (struct nlattr *)((uint8_t *)a + NLA_ALIGN(a->nla_len))) {
		if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID &&
		    a->nla_len == NLA_HDRLEN + 2) {
			memcpy(&l->nl_family, (uint8_t *)a + NLA_HDRLEN, 2);
			ret = 0;
		}
	}
	/* The ACK that follows. */
	nl_recv(l->nl_fd, buf, NL_RECV_MAX, NL_TIMEOUT_MS);
out:
	free(buf);
	return ret;
}

/* The lane's socket; a forked child opens its own (replies go by socket). */
static bool nl_ready(struct fz_lane *l)
{
	struct sockaddr_nl addr = {.nl_family = AF_NETLINK};
	int one = 1, ret;

	if (l->nl_fd >= 0 && l->nl_owner == getpid())
		return true;
	if (l->nl_fd >= 0)
		close(l->nl_fd);
	l->nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	l->nl_owner = getpid();
	l->nl_subscribed = false;
	if (l->nl_fd < 0) {
		fz_report(l, "netlink socket: %s", fz_errname(errno));
		return false;
	}
	if (bind(l->nl_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    setsockopt(l->nl_fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) < 0) {
		fz_report(l, "netlink bind: %s", fz_errname(errno));
		goto fail;
	}
	ret = nl_resolve(l);
	if (ret) {
		fz_report(l, "family %s not found: %s", MOECACHE_GENL_NAME, fz_errname(-ret));
		goto fail;
	}
	return true;
fail:
	close(l->nl_fd);
	l->nl_fd = -1;
	return false;
}

void fz_netlink_close(struct fz_lane *l)
{
	if (l->nl_fd >= 0)
		close(l->nl_fd);
	l->nl_fd = -1;
}

/* ---- checking what comes back ---- */

static bool u64_attr(uint16_t type)
{
	return type == MOECACHE_A_EXPERT_BYTES || type == MOECACHE_A_HOST_BYTES;
}

/* Walks attributes: every length in bounds, each type's size right. */
static bool check_stats_nest(struct fz_lane *l, const uint8_t *p, int len, bool hist)
{
	const struct nlattr *a = (const void *)p;
	uint16_t type;

	for (; len >= NLA_HDRLEN; len -= NLA_ALIGN(a->nla_len),
				  a = (const void *)((const uint8_t *)a + NLA_ALIGN(a->nla_len))) {
		if (a->nla_len < NLA_HDRLEN || a->nla_len > len) {
			fz_report(l, "reply: stats attribute length %u with %d left", a->nla_len,
				  len);
			return false;
		}
		type = a->nla_type & NLA_TYPE_MASK;
		if (hist) {
			if (type < MOECACHE_HIST_A_BUCKET ||
			    type >= MOECACHE_HIST_A_BUCKET + MOECACHE_WAIT_BUCKETS ||
			    a->nla_len != NLA_HDRLEN + 8) {
				fz_report(l, "reply: histogram attribute %u of %u bytes", type,
					  a->nla_len);
				return false;
			}
			continue;
		}
		if (type == MOECACHE_STATS_A_WAIT_HIST) {
			if (!check_stats_nest(l, (const uint8_t *)a + NLA_HDRLEN,
					      a->nla_len - NLA_HDRLEN, true))
				return false;
			continue;
		}
		if (type == MOECACHE_STATS_A_PAD)
			continue;
		if (type < MOECACHE_STATS_A_HITS || type > MOECACHE_STATS_A_MAX ||
		    a->nla_len != NLA_HDRLEN + (type < MOECACHE_STATS_A_RESIDENT ? 8 : 4)) {
			fz_report(l, "reply: stats attribute %u of %u bytes", type, a->nla_len);
			return false;
		}
	}
	if (len) {
		fz_report(l, "reply: %d bytes after the stats attributes", len);
		return false;
	}
	return true;
}

/* MOECACHE_A_BANKS: BANK entries of u32 layout attributes and a stats nest. */
static bool check_banks_nest(struct fz_lane *l, const uint8_t *p, int len, bool entry)
{
	const struct nlattr *a = (const void *)p;
	uint16_t type;

	for (; len >= NLA_HDRLEN; len -= NLA_ALIGN(a->nla_len),
				  a = (const void *)((const uint8_t *)a + NLA_ALIGN(a->nla_len))) {
		const uint8_t *data = (const uint8_t *)a + NLA_HDRLEN;
		int dlen = a->nla_len - NLA_HDRLEN;

		if (a->nla_len < NLA_HDRLEN || a->nla_len > len) {
			fz_report(l, "reply: bank attribute length %u with %d left", a->nla_len, len);
			return false;
		}
		type = a->nla_type & NLA_TYPE_MASK;
		if (!entry && type != MOECACHE_BANKS_A_BANK) {
			fz_report(l, "reply: BANKS entry of type %u", type);
			return false;
		}
		if (!entry) {
			if (!check_banks_nest(l, data, dlen, true))
				return false;
			continue;
		}
		if (type == MOECACHE_BANK_A_STATS) {
			if (!check_stats_nest(l, data, dlen, false))
				return false;
			continue;
		}
		if (type < MOECACHE_BANK_A_INDEX || type > MOECACHE_BANK_A_FLAGS || dlen != 4) {
			fz_report(l, "reply: bank attribute %u of %d bytes", type, dlen);
			return false;
		}
	}
	if (len) {
		fz_report(l, "reply: %d bytes after the bank attributes", len);
		return false;
	}
	return true;
}

/*
 * A message of the family: its command, and attributes that parse and have
 * their documented sizes. name, if not NULL, is the pool it must be about.
 */
static bool check_family_msg(struct fz_lane *l, const struct nlmsghdr *h, uint8_t want_cmd,
			     const char *name)
{
	const struct genlmsghdr *g = NLMSG_DATA(h);
	const struct nlattr *a;
	uint32_t n_layers = 0, n_experts = 0, begin = 0, end = 0, v;
	bool have_name = false;
	int len;
	uint16_t type;

	if (h->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) {
		fz_report(l, "reply: %u bytes, shorter than the genetlink header", h->nlmsg_len);
		return false;
	}
	if (g->cmd != want_cmd) {
		fz_report(l, "reply: command %u to a request for %u", g->cmd, want_cmd);
		return false;
	}
	a = (const void *)((const uint8_t *)g + GENL_HDRLEN);
	len = (int)h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	for (; len >= NLA_HDRLEN; len -= NLA_ALIGN(a->nla_len),
				  a = (const void *)((const uint8_t *)a + NLA_ALIGN(a->nla_len))) {
		const uint8_t *data = (const uint8_t *)a + NLA_HDRLEN;
		int dlen = a->nla_len - NLA_HDRLEN;

		if (a->nla_len < NLA_HDRLEN || a->nla_len > len) {
			fz_report(l, "reply: attribute length %u with %d left", a->nla_len, len);
			return false;
		}
		type = a->nla_type & NLA_TYPE_MASK;
		if (type == MOECACHE_A_PAD)
			continue;
		if (type == MOECACHE_A_POOL_NAME) {
			if (dlen < 2 || dlen > MOECACHE_NAME_LEN || data[dlen - 1] ||
			    strlen((const char *)data) != (size_t)dlen - 1) {
				fz_report(l, "reply: pool name of %d bytes", dlen);
				return false;
			}
			if (name && strcmp((const char *)data, name)) {
				fz_report(l, "reply: about pool '%s', asked for '%s'",
					  (const char *)data, name);
				return false;
			}
			have_name = true;
			continue;
		}
		if (type == MOECACHE_A_STATS) {
			if (!check_stats_nest(l, data, dlen, false))
				return false;
			continue;
		}
		if (type == MOECACHE_A_BANKS) {
			if (!check_banks_nest(l, data, dlen, false))
				return false;
			continue;
		}
		if (type == 0 || type > MOECACHE_A_MAX || dlen != (u64_attr(type) ? 8 : 4)) {
			fz_report(l, "reply: attribute %u of %d bytes", type, dlen);
			return false;
		}
		if (dlen != 4)
			continue;
		memcpy(&v, data, 4);
		if (type == MOECACHE_A_N_LAYERS)
			n_layers = v;
		else if (type == MOECACHE_A_N_EXPERTS)
			n_experts = v;
		else if (type == MOECACHE_A_EXPERT_BEGIN)
			begin = v;
		else if (type == MOECACHE_A_EXPERT_END)
			end = v;
	}
	if (len) {
		fz_report(l, "reply: %d bytes after the attributes", len);
		return false;
	}
	if (want_cmd != MOECACHE_CMD_EVENT && !have_name) {
		fz_report(l, "reply to command %u names no pool", want_cmd);
		return false;
	}
	if (n_layers && (!n_experts || begin >= end || end > n_experts)) {
		fz_report(l, "reply: %u layers of %u experts, local range [%u, %u)", n_layers,
			  n_experts, begin, end);
		return false;
	}
	return true;
}

/*
 * Reads until the request's ACK (or a dump's DONE), checking every message
 * on the way; events are checked as events. Returns the request's result
 * (0 or -errno) and counts its replies, or 1 when it went wrong (reported).
 */
static int nl_collect(struct fz_lane *l, uint32_t seq, bool dump, uint8_t cmd, const char *name,
		      unsigned int *replies)
{
	uint8_t *buf = malloc(NL_RECV_MAX);
	const struct nlmsghdr *h;
	int result = 1, rem;
	bool finished = false;
	ssize_t n;

	*replies = 0;
	if (!buf)
		return 1;
	while (!finished) {
		n = nl_recv(l->nl_fd, buf, NL_RECV_MAX, NL_TIMEOUT_MS);
		if (n == 0) {
			fz_report(l, "netlink: no answer to request %u in %d ms", seq,
				  NL_TIMEOUT_MS);
			goto out;
		}
		if (n < 0) {
			fz_report(l, "netlink recv: %s", fz_errname((int)-n));
			goto out;
		}
		if (n > NL_RECV_MAX) {
			fz_report(l, "netlink: a datagram of %zd bytes", n);
			goto out;
		}
		rem = (int)n;
		for (h = (const void *)buf; NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem)) {
			if (h->nlmsg_seq == 0 && h->nlmsg_type == l->nl_family) {
				if (!check_family_msg(l, h, MOECACHE_CMD_EVENT, NULL))
					goto out;
				continue;
			}
			if (h->nlmsg_seq != seq)
				continue; /* left over from a request already reported */
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) || e->error > 0) {
					fz_report(l, "netlink: malformed error message");
					goto out;
				}
				result = e->error;
				finished = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_DONE) {
				int err = 0;

				if (!dump) {
					fz_report(l,
						  "netlink: DONE to a request that is not a dump");
					goto out;
				}
				if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(err)))
					memcpy(&err, NLMSG_DATA(h), sizeof(err));
				result = err > 0 ? 1 : err;
				finished = true;
				break;
			}
			if (h->nlmsg_type != l->nl_family) {
				fz_report(l, "netlink: message type %u in a reply", h->nlmsg_type);
				goto out;
			}
			if (!check_family_msg(l, h, cmd, name))
				goto out;
			(*replies)++;
		}
		if (!finished && rem) {
			fz_report(l, "netlink: %d bytes of a datagram do not parse", rem);
			goto out;
		}
	}
	/* After a dump's DONE, the ACK some kernels add. */
	if (dump && result == 0) {
		n = nl_recv(l->nl_fd, buf, NL_RECV_MAX, 0);
		(void)n;
	}
out:
	free(buf);
	return result;
}

/* ---- the operation ---- */

static const uint8_t fz_cmds[] = {
    MOECACHE_CMD_POOL_LIST,   MOECACHE_CMD_POOL_INFO,	 MOECACHE_CMD_STATS,
    MOECACHE_CMD_POOL_CREATE, MOECACHE_CMD_POOL_DESTROY, MOECACHE_CMD_FLUSH,
};

/* Valid-looking attributes for cmd (a pool of the run, or one that is not). */
static void put_valid_attrs(struct fz_lane *l, struct nl_req *r, uint8_t cmd, char *name)
{
	const struct fz_config *c = l->cfg;
	uint32_t n_experts;

	/* A pool the run created under another name would outlive it. */
	if (cmd != MOECACHE_CMD_POOL_CREATE && fz_chance(l, 1, 10))
		snprintf(name, MOECACHE_NAME_LEN, "%s-none", c->prefix);
	else
		fz_pool_name(c, fz_below(l, FZ_MAX_POOLS), name);
	if (cmd == MOECACHE_CMD_POOL_LIST)
		return;
	req_put_str(r, MOECACHE_A_POOL_NAME, name);
	if (cmd == MOECACHE_CMD_STATS && fz_chance(l, 1, 3))
		req_put_u32(r, MOECACHE_A_LAYER, fz_below(l, 4));
	if (cmd != MOECACHE_CMD_POOL_CREATE)
		return;
	n_experts = 1 + fz_below(l, 16);
	req_put_u32(r, MOECACHE_A_N_LAYERS, 1 + fz_below(l, 4));
	req_put_u32(r, MOECACHE_A_N_EXPERTS, n_experts);
	req_put_u32(r, MOECACHE_A_N_SLOTS, 1 + fz_below(l, 12));
	req_put_u64(r, MOECACHE_A_EXPERT_BYTES, (uint64_t)c->page * (1 + fz_below(l, 3)));
	if (fz_chance(l, 1, 2)) {
		uint32_t begin = fz_below(l, n_experts);

		req_put_u32(r, MOECACHE_A_EXPERT_BEGIN, begin);
		req_put_u32(r, MOECACHE_A_EXPERT_END, begin + 1 + fz_below(l, n_experts - begin));
	}
	if (fz_chance(l, 1, 2))
		req_put_u32(r, MOECACHE_A_UID, fz_chance(l, 1, 2) ? 0 : 1000 + fz_below(l, 2));
	if (fz_chance(l, 1, 2))
		req_put_u32(r, MOECACHE_A_GID, fz_chance(l, 1, 2) ? 0 : 1000 + fz_below(l, 2));
	if (fz_chance(l, 1, 2))
		req_put_u32(r, MOECACHE_A_MODE, fz_chance(l, 1, 2) ? 0600 : 0666);
}

/* Defects applied once the attributes are in. */
enum { TAIL_NONE, TAIL_LEFTOVER, TAIL_TRUNCATE };

/* One defect in the attributes or the headers; the errnos that may refuse it. */
static void add_defect(struct fz_lane *l, struct fz_expect *e, struct nl_req *r, uint8_t cmd,
		       bool *dump, unsigned int *tail)
{
	uint8_t junk[80];
	uint32_t u;
	unsigned int i;

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)fz_rand(l);
	switch (fz_below(l, 13)) {
	case 0:
		req_put(r, (uint16_t)(MOECACHE_A_MAX + 1 + fz_below(l, 200)), junk,
			fz_below(l, 12));
		fz_defect(e, "unknown-attribute", EINVAL, 0);
		break;
	case 1:
		req_put(r, 0, junk, fz_below(l, 12));
		fz_defect(e, "attribute-type-0", EINVAL, 0);
		break;
	case 2:
		/* A u32 of the wrong size: on LIST any attribute is refused. */
		req_put(r, cmd == MOECACHE_CMD_STATS ? MOECACHE_A_LAYER : MOECACHE_A_N_LAYERS, junk,
			fz_chance(l, 1, 2) ? 2 : 8);
		if (cmd == MOECACHE_CMD_STATS || cmd == MOECACHE_CMD_POOL_CREATE ||
		    cmd == MOECACHE_CMD_POOL_LIST)
			fz_defect(e, "u32-of-wrong-size", EINVAL, ERANGE, 0);
		else
			fz_defect(e, "attribute-not-in-policy", EINVAL, 0);
		break;
	case 3:
		/* 64 bytes and no NUL: longer than a name may be. */
		memset(junk, 'n', MOECACHE_NAME_LEN);
		req_put(r, MOECACHE_A_POOL_NAME, junk, MOECACHE_NAME_LEN);
		fz_defect(e, "name-without-nul", EINVAL, ERANGE, 0);
		break;
	case 4:
		u = 0600;
		req_put_raw(r, MOECACHE_A_MODE, (uint16_t)fz_below(l, NLA_HDRLEN), &u, 4);
		fz_defect(e, "nla_len-below-header", EINVAL, 0);
		break;
	case 5:
		u = 0600;
		req_put_raw(r, MOECACHE_A_MODE, (uint16_t)(NLA_HDRLEN + 4 + 4 + fz_below(l, 4000)),
			    &u, 4);
		fz_defect(e, "nla_len-past-message", EINVAL, 0);
		break;
	case 6:
		*tail = TAIL_LEFTOVER;
		fz_defect(e, "leftover-bytes", EINVAL, 0);
		break;
	case 7:
		/* The NESTED flag on an attribute that does not nest. */
		req_put(r, (uint16_t)(NLA_F_NESTED | MOECACHE_A_POOL_NAME), "x", 2);
		fz_defect(e, "nested-flag", EINVAL, 0);
		break;
	case 8:
		if (cmd == MOECACHE_CMD_POOL_CREATE) {
			req_put_u32(r, MOECACHE_A_N_SLOTS, 0);
			fz_defect(e, "n_slots-0", ERANGE, EINVAL, 0);
		} else if (cmd == MOECACHE_CMD_STATS) {
			req_put_u32(r, MOECACHE_A_LAYER, 1000 + fz_below(l, 100000));
			fz_defect(e, "layer-out-of-range", EINVAL, ERANGE, ENOENT, 0);
		}
		break;
	case 9:
		if (cmd == MOECACHE_CMD_POOL_CREATE) {
			req_put_u32(r, MOECACHE_A_MODE, 01000 + fz_below(l, 100000));
			fz_defect(e, "mode-out-of-range", ERANGE, EINVAL, 0);
		}
		break;
	case 10:
		/* The genetlink header's reserved field. */
		((struct genlmsghdr *)(r->buf + NLMSG_HDRLEN))->reserved =
		    (uint16_t)(1 + fz_below(l, 0xfffe));
		fz_defect(e, "genl-reserved", EINVAL, 0);
		break;
	case 11: {
		/* Flags genetlink does not let through. */
		static const uint16_t bad[] = {NLM_F_ROOT, NLM_F_MATCH, NLM_F_ATOMIC, NLM_F_MULTI,
					       0x800};
		uint16_t f = bad[fz_below(l, sizeof(bad) / sizeof(bad[0]))];

		/* Both halves of DUMP would make a dump, not a defect. */
		if ((f == NLM_F_ROOT || f == NLM_F_MATCH) &&
		    (*dump || (req_hdr(r)->nlmsg_flags & (NLM_F_ROOT | NLM_F_MATCH))))
			f = NLM_F_ATOMIC;
		req_hdr(r)->nlmsg_flags |= f;
		if (f == NLM_F_ROOT || f == NLM_F_MATCH)
			*dump = false; /* half a DUMP: refused before it starts */
		fz_defect(e, "nlmsg-flags", EINVAL, 0);
		break;
	}
	default:
		*tail = TAIL_TRUNCATE;
		fz_defect(e, "truncated-genl-header", EINVAL, 0);
		break;
	}
}

void fz_op_netlink(struct fz_lane *l)
{
	struct fz_expect e;
	struct nl_req r;
	char name[MOECACHE_NAME_LEN] = "";
	unsigned int replies = UINT_MAX, i;
	uint32_t seq;
	uint8_t cmd;
	unsigned int tail = TAIL_NONE;
	bool dump, flush, unknown = false;
	int ret;

	if (!nl_ready(l))
		return;
	/* Subscribe to events now and then, and unsubscribe. */
	if (fz_chance(l, 1, 40)) {
		uint8_t sub = l->nl_subscribed ? MOECACHE_CMD_EVENTS_UNSUBSCRIBE
					       : MOECACHE_CMD_EVENTS_SUBSCRIBE;

		req_init(&r, l->nl_family, NLM_F_REQUEST | NLM_F_ACK, sub);
		req_hdr(&r)->nlmsg_len = (uint32_t)r.len;
		seq = ++l->nl_seq;
		req_hdr(&r)->nlmsg_seq = seq;
		ret = nl_send(l->nl_fd, r.buf, r.len);
		if (!ret)
			ret = nl_collect(l, seq, false, sub, NULL, &replies);
		if (ret > 0)
			return;
		/* ENOSPC: the listener limits, which other lanes may fill. */
		if (!ret)
			l->nl_subscribed = !l->nl_subscribed;
		else if (ret != -ENOSPC)
			fz_report(l, "netlink: %s: %s",
				  l->nl_subscribed ? "unsubscribe" : "subscribe", fz_errname(-ret));
	}

	cmd = fz_cmds[fz_below(l, sizeof(fz_cmds))];
	if (fz_chance(l, 1, 25)) {
		static const uint8_t odd[] = {MOECACHE_CMD_UNSPEC, MOECACHE_CMD_EVENT,
					      MOECACHE_CMD_MAX + 1, 0xff};

		cmd = odd[fz_below(l, sizeof(odd))];
		unknown = true;
	}
	dump = cmd == MOECACHE_CMD_POOL_LIST || (cmd == MOECACHE_CMD_STATS && fz_chance(l, 1, 2));
	if (fz_chance(l, 1, 20))
		dump = !dump;

	fz_expect_init(&e, true);
	req_init(&r, l->nl_family, NLM_F_REQUEST | NLM_F_ACK | (dump ? NLM_F_DUMP : 0), cmd);
	put_valid_attrs(l, &r, unknown ? MOECACHE_CMD_POOL_INFO : cmd, name);

	/* What the pools' state may answer. */
	if (cmd != MOECACHE_CMD_POOL_LIST)
		fz_expect_err(&e, ENOENT);
	if (cmd == MOECACHE_CMD_POOL_CREATE) {
		fz_expect_err(&e, EEXIST);
		fz_expect_err(&e, ENOSPC);
	}
	if (cmd == MOECACHE_CMD_POOL_DESTROY)
		fz_expect_err(&e, EBUSY);
	if (cmd == MOECACHE_CMD_POOL_DESTROY || cmd == MOECACHE_CMD_FLUSH)
		fz_expect_err(&e, EPERM);
	if (cmd == MOECACHE_CMD_STATS && !dump)
		fz_expect_err(&e, EINVAL); /* a layer past the pool's */
	/* Reading a pool needs read permission, as a client attach. */
	if ((cmd == MOECACHE_CMD_POOL_INFO || cmd == MOECACHE_CMD_STATS) && !l->privileged)
		fz_expect_err(&e, EACCES);

	if (cmd == MOECACHE_CMD_POOL_LIST && r.len > NLMSG_HDRLEN + GENL_HDRLEN)
		fz_defect(&e, "attribute-on-list", EINVAL, 0);
	if (cmd == MOECACHE_CMD_STATS && dump &&
	    r.len > NLMSG_HDRLEN + GENL_HDRLEN + NLA_HDRLEN + NLA_ALIGN(strlen(name) + 1))
		fz_defect(&e, "layer-on-a-stats-dump", EINVAL, 0);
	for (i = fz_chance(l, 1, 3) ? 1 + fz_below(l, 2) : 0; i; i--)
		add_defect(l, &e, &r, cmd, &dump, &tail);
	if (tail == TAIL_LEFTOVER && r.len + 4 <= sizeof(r.buf))
		r.len += 1 + fz_below(l, 3); /* the buffer is zeroed: no attribute fits there */
	else if (tail == TAIL_TRUNCATE)
		r.len = NLMSG_HDRLEN + fz_below(l, GENL_HDRLEN);
	if (unknown)
		fz_defect(&e, "unknown-command", EOPNOTSUPP, 0);
	else if (dump && cmd != MOECACHE_CMD_POOL_LIST && cmd != MOECACHE_CMD_STATS)
		fz_defect(&e, "dump-of-a-request", EOPNOTSUPP, 0);
	else if (!dump && cmd == MOECACHE_CMD_POOL_LIST)
		fz_defect(&e, "request-of-a-dump", EOPNOTSUPP, 0);
	if (cmd == MOECACHE_CMD_POOL_CREATE && !l->privileged)
		fz_defect(&e, "unprivileged", EPERM, 0);

	req_hdr(&r)->nlmsg_len = (uint32_t)r.len;
	seq = ++l->nl_seq;
	req_hdr(&r)->nlmsg_seq = seq;
	flush = cmd == MOECACHE_CMD_FLUSH;
	if (flush)
		__atomic_add_fetch(l->cfg->flush_gen, 1, __ATOMIC_ACQ_REL);
	ret = nl_send(l->nl_fd, r.buf, r.len);
	if (!ret)
		ret = nl_collect(l, seq, dump, cmd,
				 name[0] && cmd != MOECACHE_CMD_POOL_LIST ? name : NULL, &replies);
	if (flush) {
		__atomic_add_fetch(l->cfg->flush_gen, 1, __ATOMIC_ACQ_REL);
		/* Our own flush is not another lane's. */
		l->flush_start = __atomic_load_n(l->cfg->flush_gen, __ATOMIC_ACQUIRE);
		/* A flush skips fast-pinned slots. */
		fz_fast_verify(l);
	}
	if (ret < 0 && replies == UINT_MAX) {
		/* The message reached genetlink or not: either way no errno of ours. */
		fz_report(l, "netlink send of %zu bytes: %s", r.len, fz_errname(-ret));
		return;
	}
	fz_trace(l, "NETLINK cmd %u%s %s len %zu -> %d (%u replies) [%s]", cmd, dump ? " dump" : "",
		 name, r.len, ret, replies, e.defects);
	if (ret > 0)
		return;
	if (!fz_check_result(l, &e, ret, "NETLINK"))
		return;
	/* A request that succeeded replied as documented. */
	if (!ret && !dump &&
	    (cmd == MOECACHE_CMD_POOL_INFO || cmd == MOECACHE_CMD_STATS ||
	     cmd == MOECACHE_CMD_FLUSH) &&
	    replies != 1)
		fz_report(l, "netlink command %u succeeded with %u replies", cmd, replies);
	if (!ret && !dump &&
	    (cmd == MOECACHE_CMD_POOL_CREATE || cmd == MOECACHE_CMD_POOL_DESTROY) && replies)
		fz_report(l, "netlink command %u succeeded with %u replies", cmd, replies);
	if (!ret && dump && cmd == MOECACHE_CMD_STATS && replies < 1)
		fz_report(l, "netlink STATS dump of '%s' succeeded with no reply", name);
}
