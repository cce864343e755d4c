/* SPDX-License-Identifier: MIT */
/*
 * moecached's configuration: defaults, a key=value file and command-line
 * flags, applied in that order (flags win; --pool flags replace the
 * file's pools).
 *
 * The run folder (run_dir: $MOECACHE_RUNDIR, else /run/moecache) is where
 * moecachectl installs a pool's policy and profile; SIGHUP applies them.
 *
 * File syntax: one "key = value" per line, '#' starts a comment, blank
 * lines are skipped, '-' and '_' are the same in keys. "pool" may be given
 * several times or as a comma-separated list.
 */
#ifndef MOECACHE_AGENT_CONFIG_H
#define MOECACHE_AGENT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <moecache.h>

#define AGENT_MAX_POOLS 16
#define AGENT_RUN_DIR_DEFAULT "/run/moecache"

struct agent_config {
	char pools[AGENT_MAX_POOLS][MOECACHE_NAME_LEN];
	uint32_t n_pools;
	char device[PATH_MAX];	/* the device node */
	char backend[16];	/* cpu, cuda or rocm */
	char policy[32];	/* a name agent/policy knows, "default" */
	char profile[PATH_MAX]; /* "" for none; "{pool}" is replaced by the pool's name */
	char run_dir[PATH_MAX]; /* NAME.policy, NAME.profile.json from moecachectl */
	uint32_t copy_threads;	/* memcpy threads per pool (CPU backend) */
	uint32_t copy_delay_us; /* a pause in the middle of each copy, for tests */
	uint32_t retry_ms;	/* retry period while every slot is pinned */
	uint32_t tick_ms;	/* period of the access scan */
	bool tier_static;	/* banks: static placement (slices), else dynamic (agent/tiers.h) */
	/* GPU backends (lib/gpu/common.h, struct mc_gpu_params) */
	char gpu_devices[256];	    /* "" (auto), "auto", "N,M", "POOL:N": which GPU holds a bank */
	uint32_t gpu_budget_mb;	    /* bank MiB per GPU, shared by the pools; 0: no limit */
	uint32_t gpu_queues;	    /* copy streams or SDMA queues per bank; 0: from copy_threads */
	char gpu_library[PATH_MAX]; /* the driver library to load; "": the default */
	bool foreground;
	int log_level; /* syslog priority: 3 err ... 7 debug */
	char config_path[PATH_MAX];
};

void agent_config_defaults(struct agent_config *c);
/*
 * Sets one key. Returns 0, -ENOENT for an unknown key, -EINVAL for a bad
 * value, -E2BIG for too many pools or a value too long.
 */
int agent_config_set(struct agent_config *c, const char *key, const char *value);
/* Applies a file's text; on error err names the line. */
int agent_config_parse(struct agent_config *c, const char *name, const char *text, char *err,
		       size_t errlen);
int agent_config_load(struct agent_config *c, const char *path, char *err, size_t errlen);
/*
 * Defaults, then --config FILE, then the other flags. Returns 0, 1 when
 * --help was asked for (usage is in err), or -errno with err saying why.
 */
int agent_config_from_args(struct agent_config *c, int argc, char **argv, char *err, size_t errlen);
/* The profile path of one pool ("" if none), with "{pool}" replaced. */
int agent_config_profile_path(const struct agent_config *c, const char *pool, char *out,
			      size_t outlen);

/* RUN_DIR/POOL.SUFFIX: what moecachectl installs for the pool's agent. */
int agent_config_run_path(const struct agent_config *c, const char *pool, const char *suffix,
			  char *out, size_t outlen);

#endif /* MOECACHE_AGENT_CONFIG_H */
