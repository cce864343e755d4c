/* SPDX-License-Identifier: GPL-2.0 */
/*
 * moecache-vmtest: tests of the /dev/moecache driver against docs/abi.md,
 * run inside the test VM (tools/vm/run) with the module loaded.
 *
 * The runner is the suites' harness (tests/harness/tap.h): each test runs
 * in its own forked process (and process group) with an alarm, so that a
 * crash or a hang fails that test only. A test fails by calling one of the
 * VM_* checks below: they print the reason on stderr, which the runner
 * collects, and end the process.
 *
 * A file of tests registers them as a table of VM_TEST() entries named
 * category_what (basic_, bad_input_, permission_, lifetime_, leak_,
 * concurrency_, perf_) and exports it as a struct vm_suite declared below;
 * tests/vm/main.c lists the suites in the order they run.
 */
#ifndef MOECACHE_VMTEST_HARNESS_H
#define MOECACHE_VMTEST_HARNESS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <moecache.h>

#include "tap.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Exit status of a test that cannot run here (TAP "# SKIP"). */
#define VM_EXIT_SKIP TAP_EXIT_SKIP

struct vm_ctx {
	const char *test;
	/* The pool this test owns; extra pools are named by vm_pool_name(). */
	char pool[MOECACHE_NAME_LEN];
	long page_size;
};

struct vm_test {
	const char *name;
	const char *description;
	void (*run)(struct vm_ctx *ctx);
	unsigned int timeout_s; /* 0: VM_DEFAULT_TIMEOUT_S */
};

#define VM_DEFAULT_TIMEOUT_S 30

/* A registry entry named after its function. */
#define VM_TEST(fn, desc)                                                                          \
	{                                                                                          \
		.name = #fn, .description = (desc), .run = (fn), .timeout_s = 0                    \
	}
#define VM_TEST_TIMEOUT(fn, desc, secs)                                                            \
	{                                                                                          \
		.name = #fn, .description = (desc), .run = (fn), .timeout_s = (secs)               \
	}

struct vm_suite {
	const struct vm_test *tests;
	size_t count;
};

extern const struct vm_suite vm_basic_suite;
extern const struct vm_suite vm_bad_input_suite;
extern const struct vm_suite vm_permission_suite;
extern const struct vm_suite vm_gup_suite;
extern const struct vm_suite vm_concurrency_suite;
extern const struct vm_suite vm_lifetime_suite;
extern const struct vm_suite vm_fastpins_suite;
extern const struct vm_suite vm_tenant_suite;
extern const struct vm_suite vm_fastpin_count_suite;
extern const struct vm_suite vm_queue_depth_suite;
extern const struct vm_suite vm_acq_cpu_suite;
extern const struct vm_suite vm_memlock_suite;
extern const struct vm_suite vm_memcg_suite;
extern const struct vm_suite vm_attach_suite;
extern const struct vm_suite vm_lib_wait_suite;
extern const struct vm_suite vm_probing_suite;
extern const struct vm_suite vm_tiers_suite;
extern const struct vm_suite vm_waits_suite;
extern const struct vm_suite vm_tenant_rights_suite;
extern const struct vm_suite vm_wrong_arguments_suite;
extern const struct vm_suite vm_pin_share_suite;

/* Highest suffix vm_pool_name() may be given; the runner cleans these up. */
#define VM_MAX_EXTRA_POOLS 64

/* ---- failing ---------------------------------------------------------- */

/* The harness's: print where and why, and end the test's process. */
#define vm_fail_at tap_fail_at
#define vm_skip tap_skip
void vm_fail_errno_at(const char *file, int line, const char *expr, int want, long ret, int err)
    __attribute__((noreturn));
void vm_fail_eq_at(const char *file, int line, const char *got_text, const char *want_text,
		   long long got, long long want, int err) __attribute__((noreturn));
const char *vm_errname(int err);

#define VM_FAIL(...) vm_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define VM_ASSERT(cond)                                                                            \
	do {                                                                                       \
		if (!(cond))                                                                       \
			VM_FAIL("assertion failed: %s", #cond);                                    \
	} while (0)

#define VM_ASSERT_MSG(cond, ...)                                                                   \
	do {                                                                                       \
		if (!(cond))                                                                       \
			VM_FAIL(__VA_ARGS__);                                                      \
	} while (0)

/* Integer equality, printing both values (and errno for a -1 result). */
#define VM_EQ(got, want)                                                                           \
	do {                                                                                       \
		errno = 0;                                                                         \
		long long got_ = (long long)(got);                                                 \
		long long want_ = (long long)(want);                                               \
		if (got_ != want_)                                                                 \
			vm_fail_eq_at(__FILE__, __LINE__, #got, #want, got_, want_, errno);        \
	} while (0)

/* A system call (or ioctl) that must succeed: a result >= 0. */
#define VM_OK(call)                                                                                \
	do {                                                                                       \
		errno = 0;                                                                         \
		long ret_ = (long)(call);                                                          \
		if (ret_ < 0)                                                                      \
			vm_fail_errno_at(__FILE__, __LINE__, #call, 0, ret_, errno);               \
	} while (0)

/* A system call that must fail (-1) with errno err. */
#define VM_ERR(call, err) VM_ERR_AS(call, #call, err)
#define VM_ERR_AS(call, text, err)                                                                 \
	do {                                                                                       \
		errno = 0;                                                                         \
		long ret_ = (long)(call);                                                          \
		if (ret_ != -1 || errno != (err))                                                  \
			vm_fail_errno_at(__FILE__, __LINE__, (text), (err), ret_, errno);          \
	} while (0)

/* ---- device, pools and views ------------------------------------------ */

struct vm_geom {
	__u32 n_layers;
	__u32 n_experts;
	__u32 expert_begin;
	__u32 expert_end;
	__u32 n_slots;
	__u64 expert_bytes;
	__u32 uid;
	__u32 gid;
	__u32 mode;
};

/* 4 layers x 16 experts x 64 KiB, 8 slots, root's, 0600. */
extern const struct vm_geom vm_geom_default;

int vm_open_dev(void);
void vm_get_info(struct moecache_info *info);
void vm_pool_name(const struct vm_ctx *ctx, unsigned int n, char name[MOECACHE_NAME_LEN]);
void vm_fill_create(struct moecache_pool_create *pc, const char *name, const struct vm_geom *g);
void vm_pool_create(const char *name, const struct vm_geom *g);
void vm_pool_destroy(const char *name);
/* The pool must not exist: ATTACH by name answers ENOENT. */
void vm_expect_no_pool(const char *name);

/*
 * An attached file of the pool with its map region mapped read-only, and the
 * host region once vm_view_map_host() was called.
 */
struct vm_view {
	int fd;
	__u32 role;
	struct moecache_attach att;
	__u32 n_local;
	__u32 n_idx; /* n_layers * n_local */
	void *map_base;
	size_t map_len;
	const struct moecache_map_header *hdr;
	const __u32 *map;
	const __u32 *owner;
	const __u64 *last_use;
	const __u32 *pins;
	const __u32 *access;
	unsigned char *host;
	size_t host_len;
};

/* Returns 0 or -errno of ATTACH; on success the view is ready. */
int vm_try_attach(struct vm_view *v, const char *pool, __u32 role);
/* The same on an open fd, which the view owns on success only. */
int vm_try_attach_fd(struct vm_view *v, int fd, const char *pool, __u32 role);
/* The same with ATTACH flags (MOECACHE_ATTACH_*). */
int vm_try_attach_fd_flags(struct vm_view *v, int fd, const char *pool, __u32 role, __u32 flags);
void vm_attach(struct vm_view *v, const char *pool, __u32 role);
void vm_view_map_host(struct vm_view *v, int prot);
void vm_detach(struct vm_view *v);

__u32 vm_idx(const struct vm_view *v, __u32 layer, __u32 expert);
__u32 vm_load32(const __u32 *p);
__u64 vm_load64(const __u64 *p);
/* Host record of a local index in the view's host mapping. */
unsigned char *vm_host_record(const struct vm_view *v, __u32 idx);

/* ---- ioctl helpers: each fails the test on an unexpected error -------- */

/* Returns 0 or -errno. */
int vm_try_acquire(const struct vm_view *v, __u32 layer, const __u32 *experts, __u32 count,
		   __u32 *slots, __u32 flags, __u32 timeout_ms, struct moecache_acquire *out);
void vm_acquire(const struct vm_view *v, __u32 layer, const __u32 *experts, __u32 count,
		__u32 *slots, __u32 flags, struct moecache_acquire *out);
void vm_release(const struct vm_view *v, const __u32 *slots, __u32 count);
void vm_evict(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert,
	      struct moecache_evict *out);
void vm_commit1(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert, __u32 flags);
/* EVICT then COMMIT: (layer, expert) becomes resident in slot. */
void vm_fill(const struct vm_view *v, __u32 slot, __u32 layer, __u32 expert);
void vm_stats(const struct vm_view *v, __u32 layer, struct moecache_stats *st);
/* Waits up to timeout_ms for POLLIN, then reads up to max requests. */
size_t vm_read_requests(const struct vm_view *v, struct moecache_request *reqs, size_t max,
			int timeout_ms);
/* poll() revents of the view's file after up to timeout_ms. */
short vm_poll(const struct vm_view *v, int timeout_ms);
/* A memfd of n_slots * stride bytes handed to the pool with BANK_SET. */
int vm_bank_set_memfd(const struct vm_view *agent, __u64 stride, struct moecache_bank *bank);

/* ---- state snapshots: a refused call must change nothing -------------- */

struct vm_snap {
	struct moecache_stats st;
	unsigned char *map;
	size_t len;
};

void vm_snap_take(const struct vm_view *v, struct vm_snap *s);
/* Fails, naming the first field that differs, unless the pool is as in s. */
void vm_snap_same_at(const char *file, int line, const struct vm_view *v, struct vm_snap *s,
		     const char *after);

#define VM_SNAP_SAME(view, snap, after) vm_snap_same_at(__FILE__, __LINE__, (view), (snap), (after))

/* The call fails with err and the pool seen through view is unchanged. */
#define VM_REFUSED(view, err, call)                                                                \
	do {                                                                                       \
		struct vm_snap snap_;                                                              \
		vm_snap_take((view), &snap_);                                                      \
		VM_ERR_AS(call, #call, err);                                                       \
		vm_snap_same_at(__FILE__, __LINE__, (view), &snap_, #call);                        \
	} while (0)

/* Every slot/expert pair agrees between map[] and owner[] (no FILLING). */
void vm_check_map_consistent(const struct vm_view *v);

/* ---- module parameters ------------------------------------------------ */

/* /sys/module/moecache/parameters/NAME; false if it cannot be read. */
bool vm_param_read(const char *name, unsigned long long *value);
/* Writes it; false if it cannot be written (a read-only parameter). */
bool vm_param_write(const char *name, unsigned long long value);
/* Sets it, failing the test if it cannot; returns the old value. */
unsigned long long vm_param_set(const char *name, unsigned long long value);

/* ---- processes -------------------------------------------------------- */

/* Runs fn(arg) in a child of the same process group; it exits 0 on return. */
pid_t vm_spawn(void (*fn)(void *arg), void *arg);
/* Waits for pid; fails the test (after killing it) if it outlives timeout_ms. */
int vm_reap(pid_t pid, int timeout_ms, const char *what);
/* The child must exit with status 0. */
void vm_reap_ok(pid_t pid, int timeout_ms, const char *what);
/* kill -9 and reap. */
void vm_kill(pid_t pid, const char *what);
/* True while pid has not exited (it is not reaped). */
bool vm_running(pid_t pid);
/* pid's state letter in /proc/PID/stat ('S', 'R', 'Z', ...), '?' if unread. */
char vm_proc_state(pid_t pid);
/* Waits until pid sleeps (state S in /proc) or fails after timeout_ms. */
void vm_wait_sleeping(pid_t pid, int timeout_ms, const char *what);
/* Anonymous memory shared with children forked later. */
void *vm_shared(size_t len);
#define vm_sleep_ms tap_sleep_ms
#define vm_now_ms tap_now_ms
/* CLOCK_MONOTONIC in nanoseconds, for perf_ tests. */
uint64_t vm_now_ns(void);

/* ---- perf: two pools side by side ------------------------------------- */

/*
 * How many idle files a perf test may attach to one pool beside a few of
 * its own: want, or fewer under max_pool_files; RLIMIT_NOFILE is raised
 * to hold them.
 */
unsigned int vm_idle_files(unsigned int want);
/*
 * Runs time(a) and time(b) in turn, rounds times, and keeps the smallest
 * result of each in *best_a and *best_b: side by side, so that the noise
 * of a shared machine falls on both.
 */
void vm_best_side_by_side(unsigned int rounds, uint64_t (*time)(void *pool), void *a, void *b,
			  uint64_t *best_a, uint64_t *best_b);

/*
 * A pool (vm_geom_default, of the given mode) with an agent and a client,
 * the asker, for timing the COMMIT of an expert someone asked for: in each
 * of cycles turns the asker misses on the expert of layer 0 not in slot 0,
 * the agent EVICTs slot 0 for it and COMMITs; only the COMMIT is timed.
 */
struct vm_commit_pool {
	char name[MOECACHE_NAME_LEN];
	unsigned int cycles;
	struct vm_view a;
	struct vm_view asker;
	__u32 expert; /* in slot 0 */
	uint64_t best;
};

void vm_commit_pool_setup(struct vm_commit_pool *p, __u32 mode, unsigned int cycles);
/* Nanoseconds spent in p's cycles COMMITs; a time function of vm_best_side_by_side(). */
uint64_t vm_commit_pool_time(void *p);
void vm_commit_pool_teardown(struct vm_commit_pool *p);

/* A one-way pipe used to say "I got here" between processes. */
struct vm_gate {
	int rd;
	int wr;
};

void vm_gate_open(struct vm_gate *g);
void vm_gate_pass(struct vm_gate *g);
void vm_gate_wait(struct vm_gate *g, int timeout_ms, const char *what);
void vm_gate_close(struct vm_gate *g);

/*
 * Condition polled every millisecond until it holds; fails after timeout_ms.
 * Used where another process is expected to change the pool.
 */
#define VM_WAIT_FOR(cond, timeout_ms)                                                              \
	do {                                                                                       \
		uint64_t until_ = vm_now_ms() + (timeout_ms);                                      \
		while (!(cond)) {                                                                  \
			if (vm_now_ms() > until_)                                                  \
				VM_FAIL("timed out after %d ms waiting for %s", (int)(timeout_ms), \
					#cond);                                                    \
			vm_sleep_ms(1);                                                            \
		}                                                                                  \
	} while (0)

/*
 * A client process that attaches to a pool and makes one ACQUIRE; its
 * results come back through shared memory (vm_waiter_new).
 */
#define VM_WAITER_MAX 8

struct vm_waiter {
	char pool[MOECACHE_NAME_LEN];
	__u32 layer;
	__u32 count;
	__u32 experts[VM_WAITER_MAX];
	__u32 flags;
	__u32 timeout_ms;
	/* Keep the pins until `release` is passed (or forever: to be killed). */
	bool hold;
	/* out */
	int ret; /* 0 or -errno of the ACQUIRE */
	__u32 slots[VM_WAITER_MAX];
	struct moecache_acquire acq;
	struct vm_gate ready; /* attached, about to call ACQUIRE */
	struct vm_gate done;  /* ACQUIRE returned */
	struct vm_gate release;
};

struct vm_waiter *vm_waiter_new(const char *pool, __u32 layer, const __u32 *experts, __u32 count,
				__u32 flags, __u32 timeout_ms);
/* Forks the waiter and returns once it is attached and about to ACQUIRE. */
pid_t vm_waiter_start(struct vm_waiter *w);

/*
 * Becomes uid/gid with no supplementary groups and no capabilities (bounding
 * set dropped, no_new_privs), and returns an fd of the moecache device
 * opened with those credentials through node.
 */
int vm_become_unprivileged(uid_t uid, gid_t gid, const char *node);
/*
 * A device node that an unprivileged process may open: /dev/moecache if its
 * mode lets everybody read and write, else a private 0666 node of the same
 * device (the node's mode is system policy; the pool's mode is under test).
 * vm_put_node() removes a private node.
 */
void vm_get_node(char *path, size_t len);
void vm_put_node(const char *path);

#endif /* MOECACHE_VMTEST_HARNESS_H */
