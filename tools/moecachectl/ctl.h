/* SPDX-License-Identifier: MIT */
/* moecachectl: what the commands share. */
#ifndef MOECACHE_CTL_H
#define MOECACHE_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moecache.h>

#include "nl.h"

/* Exit statuses, as administrators expect them. */
#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2

#define CTL_PROG "moecachectl"
/* Where the tensor tables, installed profiles and policies go. */
#define CTL_RUNDIR_DEFAULT "/run/moecache"

struct ctl {
	const char *rundir; /* $MOECACHE_RUNDIR, else CTL_RUNDIR_DEFAULT */
	const char *device; /* $MOECACHE_DEVICE, else MOECACHE_DEVICE */
	bool stdout_tty;
	bool stderr_tty;
};

struct ctl_command {
	const char *name;
	int (*run)(struct ctl *ctl, int argc, char **argv);
	const char *summary;
};

/* Prints "moecachectl: MESSAGE" on stderr; returns CTL_EXIT_FAIL. */
__attribute__((format(printf, 1, 2))) int ctl_fail(const char *fmt, ...);
/* "moecachectl: pool 'NAME': REASON[ (kernel's words)]"; returns CTL_EXIT_FAIL. */
int ctl_pool_fail(const struct ctl_nl *nl, const char *pool, int err);
/* A usage error: the message and a pointer to --help; returns CTL_EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int ctl_usage_fail(const char *command, const char *fmt, ...);
/* After getopt_long returned '?': names the option; returns CTL_EXIT_USAGE. */
int ctl_bad_option(const char *command, char **argv);
/* The reason for err when it concerns a pool ("No such pool", ...). */
const char *ctl_pool_strerror(int err);
/* Opens the netlink family, printing why not; returns 0 or CTL_EXIT_FAIL. */
int ctl_nl_connect(struct ctl_nl *nl);

/* Parsers of command-line values: 0 or -EINVAL/-ERANGE. */
int ctl_parse_u32(const char *s, uint32_t *out);
/* A byte count with an optional K, M, G or T suffix (powers of 1024). */
int ctl_parse_size(const char *s, uint64_t *out);
/* "BEGIN:END" */
int ctl_parse_range(const char *s, uint32_t *begin, uint32_t *end);
/* A user or group by name or number. */
int ctl_parse_uid(const char *s, uint32_t *out);
int ctl_parse_gid(const char *s, uint32_t *out);
/*
 * One bank of `pool create --bank TIER:BACKEND:DEVICE:SLOTS`: BACKEND is
 * cpu, cuda, rocm or auto (the agent's); SLOTS a count, or a capacity in
 * bytes when it has a unit (64M: as many experts as fit).
 */
#define CTL_MAX_BANKS 32
struct ctl_bank_spec {
	struct moecache_bank_layout layout;
	uint64_t bytes; /* SLOTS given in bytes; 0: layout.n_slots is the count */
};
/* 0 or -EINVAL with the reason in err. */
int ctl_parse_bank(const char *s, struct ctl_bank_spec *out, char *err, size_t errlen);
/*
 * The banks of one pool, in the order given: capacities in bytes become
 * slots, tiers must not decrease, no two banks name one (backend,
 * device), and *n_slots receives the pool's slots (their sum). 0 or
 * -EINVAL/-ERANGE with the reason in err.
 */
int ctl_banks_resolve(struct ctl_bank_spec *banks, uint32_t n, uint64_t expert_bytes,
		      uint32_t *n_slots, char *err, size_t errlen);
/* "cpu", "cuda", "rocm", or "auto" for MOECACHE_BACKEND_NONE. */
const char *ctl_backend_name(uint32_t backend);

/* A pool name as the driver takes it: 1..63 of [A-Za-z0-9._-]. */
bool ctl_pool_name_ok(const char *name);

/* 1.5 GiB, 512 KiB, 12 B */
void ctl_format_bytes(char *buf, size_t len, uint64_t bytes);
/* "loaded,agent,bank" or "-" */
void ctl_format_pool_flags(char *buf, size_t len, uint32_t flags);
/* "$rundir/$pool$suffix", malloc'd; NULL on ENOMEM. */
char *ctl_run_path(const struct ctl *ctl, const char *pool, const char *suffix);
/* Creates the run folder if needed (0755). */
int ctl_make_rundir(const struct ctl *ctl);

int ctl_cmd_pool(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_flush(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_stats(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_top(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_events(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_load(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_bank(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_profile(struct ctl *ctl, int argc, char **argv);
int ctl_cmd_policy(struct ctl *ctl, int argc, char **argv);

#endif /* MOECACHE_CTL_H */
