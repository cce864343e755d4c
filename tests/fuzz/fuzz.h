/* SPDX-License-Identifier: GPL-2.0 */
/*
 * moecache-fuzz: typed random sequences of every /dev/moecache call from
 * several processes ("lanes") in every role, checked against docs/abi.md.
 *
 * Each lane draws its operations from its own generator, seeded from the
 * run's seed and the lane number, so the sequence a lane issues is fixed by
 * the seed (with one lane, the whole run is). An operation is either
 * valid-looking or carries "defects" (a bad pointer, a wrong size, an
 * out-of-range id...); each defect names the errnos that may refuse it. A
 * call with a defect that succeeds, or a call that fails with an errno that
 * none of its defects or the pool's state explains, is reported. After each
 * step the lane checks what it can see of the pool through the map region.
 */
#ifndef MOECACHE_FUZZ_H
#define MOECACHE_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <moecache.h>

#define FZ_MAX_FDS 8
#define FZ_MAX_MAPS 12
#define FZ_MAX_POOLS 4
#define FZ_MAX_LIST 160 /* longest list argument built (> 64: the bitmap path) */
#define FZ_OP_SLOTS 32

/* A set of errnos (all below 128). */
struct fz_errset {
	uint64_t bits[2];
};

/* What the call about to be made may return. */
struct fz_expect {
	struct fz_errset err;
	bool success_ok;
	char defects[160]; /* names of the defects, for the report */
};

/* The geometry of an attached pool, as ATTACH returned it. */
struct fz_geom {
	uint32_t n_layers, n_experts, expert_begin, expert_end;
	uint32_t n_local, n_idx, n_slots;
	uint64_t expert_bytes;
	struct moecache_offsets off;
};

struct fz_fd {
	int fd;	       /* -1: free entry */
	bool rdonly;   /* opened O_RDONLY */
	uint32_t role; /* MOECACHE_ROLE_NONE while unbound */
	bool shared;   /* also open in another process: pins and requests unknown */
	bool foreign;  /* an agent's file inherited by a child: every call is EPERM */
	char pool[MOECACHE_NAME_LEN];
	struct fz_geom g;
	const struct moecache_map_header *map; /* whole map region, read-only */
	uint32_t epoch;			       /* agent: agent_epoch after our attach */
	uint32_t *pins;			       /* client: pins this file holds, per slot */
	uint32_t *pin_idx;		       /* client: the idx each pinned slot held */
	uint8_t *inflight; /* agent: idx read and neither evicted for nor aborted */
	uint32_t *fast;	   /* client with fast pins: its pins region, or NULL */
	size_t fast_len;
	uint32_t *fast_held; /* fast pins the lane took by the protocol, per slot */
	uint32_t *fast_idx;  /* the idx each of those slots held when pinned */
	int bank_fd;	     /* agent: the memfd it handed over, or -1 */
	uint64_t gen;	     /* which open of the lane this is (mappings name it) */
};

/* A mapping made by the fuzzer; it outlives the fd it came from. */
struct fz_mapping {
	void *addr;
	size_t len;
	int prot;
	bool map_region; /* the map region (else the host region) */
	bool may_write;	 /* mprotect may add PROT_WRITE */
	bool from_zero;	 /* starts at the map region's header */
	uint64_t gen;	 /* the file it maps (struct fz_fd.gen) */
};

struct fz_config {
	uint64_t seed;
	uint64_t ops;
	unsigned int lanes;
	unsigned int max_reports;
	bool trace;
	bool strict;	   /* one lane: the pool's whole state is ours */
	bool no_bad_out;   /* no unwritable reply pointers (their calls change state) */
	bool no_netlink;   /* the operations of before the netlink ones, in the same sequence */
	bool no_fast_pins; /* the same for fast pins and REPORT */
	char prefix[24];
	struct moecache_info info;
	long page;
	/*
	 * Shared by the lanes: odd while a netlink FLUSH is in flight, bumped
	 * twice by each. A flush from another lane may unmap resident slots
	 * under an agent's call, so the checks that a call left map[] alone
	 * give way when it moved during the call.
	 */
	uint64_t *flush_gen;
	/* Junk memory for bad pointers: [rw][none][ro view of rw2][rw2]. */
	uint8_t *rw;
	uint8_t *none;
	uint8_t *ro;
	uint8_t *ro_src;
};

struct fz_lane {
	const struct fz_config *cfg;
	unsigned int id;
	uint64_t rng[4];
	bool privileged;
	uid_t uid;
	gid_t gid;
	bool child;	      /* a forked child of the lane */
	uint64_t op_no;	      /* number of the current operation */
	uint64_t flush_start; /* cfg->flush_gen when the operation began */
	uint64_t excused;     /* checks given up because of another lane's FLUSH */
	const char *op_name;
	unsigned int reports;
	struct fz_fd fds[FZ_MAX_FDS];
	struct fz_mapping maps[FZ_MAX_MAPS];
	uint64_t file_gen;
	unsigned int cur_op;
	uint64_t child_ops; /* operations run by forked children */
	int nl_fd;	    /* generic netlink socket, -1 until used */
	pid_t nl_owner;	    /* who opened it: a forked child opens its own */
	uint16_t nl_family;
	uint32_t nl_seq;
	bool nl_subscribed;
	uint64_t counts[FZ_OP_SLOTS];	 /* per operation kind */
	uint64_t ok_counts[FZ_OP_SLOTS]; /* calls that succeeded */
};

/* ---- random ---- */
void fz_rng_seed(struct fz_lane *l, uint64_t seed, uint64_t stream);
uint64_t fz_rand(struct fz_lane *l);
/* Uniform in [0, n); n > 0. */
uint32_t fz_below(struct fz_lane *l, uint32_t n);
/* True with probability num/den. */
bool fz_chance(struct fz_lane *l, uint32_t num, uint32_t den);

/* ---- expectations and reports ---- */
void fz_expect_init(struct fz_expect *e, bool valid_state);
void fz_expect_err(struct fz_expect *e, int err);
/* A defect: the call must fail, with one of the errnos given (0-terminated). */
void fz_defect(struct fz_expect *e, const char *name, ...);
/*
 * Compares a result (ret < 0: -errno) with the expectation; reports and
 * returns false when it does not match.
 */
bool fz_check_result(struct fz_lane *l, const struct fz_expect *e, long ret, const char *what);
__attribute__((format(printf, 2, 3))) void fz_report(struct fz_lane *l, const char *fmt, ...);
__attribute__((format(printf, 2, 3))) void fz_trace(struct fz_lane *l, const char *fmt, ...);
const char *fz_errname(int err);

/* True if another lane's netlink FLUSH may have run during this operation. */
bool fz_flush_overlap(const struct fz_lane *l);

/* ---- invariants ---- */
/* Checks the map region of fd f (if mapped) and what the lane knows of it. */
/* Every slot a lane fast-pinned still holds the expert it was pinned for. */
void fz_fast_verify(struct fz_lane *l);
void fz_check_fd(struct fz_lane *l, struct fz_fd *f);
/*
 * A consistent copy (under seq) of map[] and owner[]; false if seq stayed
 * odd (reported).
 */
bool fz_map_snapshot(struct fz_lane *l, const struct fz_fd *f, uint32_t *map, uint32_t *owner);

/* ---- operations ---- */
void fz_lane_run(struct fz_lane *l, uint64_t ops);
void fz_lane_close_all(struct fz_lane *l);
/* A generic netlink message to the moecache family (netlink.c). */
void fz_op_netlink(struct fz_lane *l);
void fz_netlink_close(struct fz_lane *l);
/* The name of operation kind op, or NULL past the last. */
const char *fz_op_name(unsigned int op);
/* Pool names used by the run: prefix + k. */
void fz_pool_name(const struct fz_config *cfg, unsigned int k, char *out);

#endif /* MOECACHE_FUZZ_H */
