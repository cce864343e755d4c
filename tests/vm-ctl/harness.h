/* SPDX-License-Identifier: MIT */
/*
 * moecache-ctltest's helpers. The runner is the suites' harness
 * (tests/harness/tap.h): each test runs in its own forked process with an
 * alarm; a failed check prints where and why on stderr and ends that
 * process. Every pool a test makes is named with its prefix (ct_pool) and
 * destroyed after it, whatever happened.
 *
 * A test is a function in tests.h and an entry of ct_tests[] (tests.c),
 * named category_what (basic_, bad_input_, permission_, lifetime_, leak_,
 * concurrency_, perf_) with a one-line description.
 */
#ifndef MOECACHE_CTLTEST_HARNESS_H
#define MOECACHE_CTLTEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <moecache.h>

#include "nl.h"
#include "tap.h"

struct ct_ctx {
	unsigned int index;
	char prefix[16]; /* "t07" */
	char dir[64];	 /* a fresh folder in /tmp for the test's files */
};

struct ct_test {
	const char *name;
	const char *description;
	void (*run)(struct ct_ctx *ctx);
	unsigned int timeout_s; /* 0: CT_DEFAULT_TIMEOUT_S */
};

#define CT_DEFAULT_TIMEOUT_S 60
#define CT_NOBODY 65534

extern const struct ct_test ct_tests[];
extern const size_t ct_n_tests;

/* The harness's: print where and why, and end the test's process. */
#define ct_fail_at tap_fail_at

#define CT_FAIL(...) ct_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define CT_ASSERT(cond)                                                                            \
	do {                                                                                       \
		if (!(cond))                                                                       \
			CT_FAIL("assertion failed: %s", #cond);                                    \
	} while (0)
#define CT_EQ(got, want)                                                                           \
	do {                                                                                       \
		unsigned long long g_ = (unsigned long long)(got),                                 \
				   w_ = (unsigned long long)(want);                                \
		if (g_ != w_)                                                                      \
			CT_FAIL("%s is %llu, expected %s = %llu", #got, g_, #want, w_);            \
	} while (0)
/* A call returning 0 or -errno must give want (0 or -errno). */
#define CT_RET(call, want)                                                                         \
	do {                                                                                       \
		int r_ = (call), w_ = (want);                                                      \
		if (r_ != w_)                                                                      \
			CT_FAIL("%s returned %d (%s), expected %d (%s)", #call, r_,                \
				r_ < 0 ? strerror(-r_) : "ok", w_, w_ < 0 ? strerror(-w_) : "ok"); \
	} while (0)
#define CT_OK(call) CT_RET(call, 0)
#define CT_CONTAINS(text, part)                                                                    \
	do {                                                                                       \
		if (!strstr((text), (part)))                                                       \
			CT_FAIL("'%s' not found in: %s", (part), (text));                          \
	} while (0)

/* "<prefix>-<suffix>" */
void ct_pool(const struct ct_ctx *ctx, const char *suffix, char name[MOECACHE_NAME_LEN]);
/* ctx->dir + "/" + name, in a static rotating buffer of 4. */
const char *ct_file(const struct ct_ctx *ctx, const char *name);

struct ct_geom {
	uint32_t n_layers;
	uint32_t n_experts;
	uint32_t expert_begin;
	uint32_t expert_end; /* 0: n_experts */
	uint32_t n_slots;
	uint64_t expert_bytes;
	uint32_t uid;
	uint32_t gid;
	uint32_t mode; /* 0: 0600 */
};

void ct_nl_open(struct ctl_nl *nl);
/* A ctl_nl on fd, a generic netlink socket another process opened. */
void ct_nl_adopt(struct ctl_nl *nl, int fd);
/* A generic netlink socket opened by uid CT_NOBODY, handed to the caller. */
int ct_nobody_socket(void);

/* The events of the test's pools (names starting with prefix), in order. */
struct ct_event_log {
	const char *prefix;
	struct ctl_event ev[16];
	unsigned int n;
};

/* Waits until log holds n events of the test's pools (10 s at most). */
void ct_wait_events(struct ctl_nl *nl, struct ct_event_log *log, unsigned int n);
/* Adds the events already queued on nl to log, without waiting. */
void ct_drain_events(struct ctl_nl *nl, struct ct_event_log *log);
/* Creates a pool over netlink (root); the test fails if it cannot. */
void ct_create(const char *name, const struct ct_geom *g);
/* Flags of the pool, by netlink. */
uint32_t ct_pool_flags(const char *name);

/* Output of a moecachectl run. */
struct ct_out {
	int status; /* exit status, or 128 + signal */
	char out[65536];
	char err[16384];
};

/*
 * Runs moecachectl with args (NULL-terminated), MOECACHE_RUNDIR set to
 * ctx->dir/run; as uid CT_NOBODY if unprivileged.
 */
void ct_ctl(const struct ct_ctx *ctx, struct ct_out *o, bool unprivileged, const char *arg0, ...)
    __attribute__((sentinel));

/* Runs prog (from PATH) with args as root, as ct_ctl runs moecachectl. */
void ct_exec(const struct ct_ctx *ctx, struct ct_out *o, const char *prog, const char *arg0, ...)
    __attribute__((sentinel));
/* Waits until process pid is the agent of pool name (10 s at most). */
void ct_wait_agent(const char *name, pid_t pid);

/*
 * Runs fn(arg) in a child that became uid/gid CT_NOBODY with no
 * capabilities; returns what fn returned (0..255), or -1 if it crashed.
 */
int ct_as_nobody(int (*fn)(void *arg), void *arg);
/* The same, without waiting: ct_wait_child gives what fn returned. */
pid_t ct_spawn_nobody(int (*fn)(void *arg), void *arg);
int ct_wait_child(pid_t pid);

#define ct_sleep_ms tap_sleep_ms
#define ct_now_ms tap_now_ms
/* Writes a module parameter; returns its previous value. */
unsigned int ct_set_param(const char *name, unsigned int value);

#endif /* MOECACHE_CTLTEST_HARNESS_H */
