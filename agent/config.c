// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config.h"
#include "lib/gpu/common.h"
#include "libmoecache.h"

static const char agent_usage[] =
    "usage: moecached [options]\n"
    "  --pool NAME          serve the pool NAME (repeatable)\n"
    "  --config FILE        read key=value settings from FILE first\n"
    "  --backend NAME       copy engine and bank kind: cpu, cuda, rocm\n"
    "  --policy NAME        replacement policy (default: \"default\")\n"
    "  --profile FILE       popularity profile: loaded at start, saved on SIGUSR1 and exit\n"
    "  --run-dir DIR        where moecachectl installs POOL.policy and POOL.profile.json\n"
    "                       (default $MOECACHE_RUNDIR, else " AGENT_RUN_DIR_DEFAULT ")\n"
    "  --copy-threads N     memcpy threads per pool\n"
    "  --copy-delay-us N    pause in the middle of every copy (testing)\n"
    "  --retry-ms N         retry period while every slot is pinned\n"
    "  --tick-ms N          period of the access scan\n"
    "  --tier-placement P   pools with several banks: dynamic (victims move down a\n"
    "                       tier) or static (each lower bank owns a slice of experts)\n"
    "  --log-level N        3 (errors) .. 7 (debug)\n"
    "  --device PATH        the device node\n"
    "  --gpu-devices SPEC   cuda, rocm: auto, N[,M...], POOL:N (which GPU holds a bank)\n"
    "  --gpu-budget-mb N    cuda, rocm: bank MiB per GPU, shared by the pools (0: none)\n"
    "  --gpu-queues N       cuda, rocm: copy streams or SDMA queues per bank (0: from\n"
    "                       --copy-threads)\n"
    "  --gpu-library PATH   cuda, rocm: the driver library to load instead of the default\n"
    "  --foreground         do not detach\n";

void agent_config_defaults(struct agent_config *c)
{
	const char *run_dir = getenv("MOECACHE_RUNDIR");

	memset(c, 0, sizeof(*c));
	snprintf(c->run_dir, sizeof(c->run_dir), "%s",
		 run_dir && *run_dir ? run_dir : AGENT_RUN_DIR_DEFAULT);
	strcpy(c->device, MOECACHE_DEVICE);
	strcpy(c->backend, "cpu");
	strcpy(c->policy, "default");
	c->copy_threads = 2;
	c->retry_ms = 2;
	c->tick_ms = 20;
	c->log_level = LOG_INFO;
}

static int agent_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int agent_copy_str(char *dst, size_t size, const char *src)
{
	if (strlen(src) >= size)
		return -E2BIG;
	strcpy(dst, src);
	return 0;
}

static int agent_add_pool(struct agent_config *c, const char *name, size_t len)
{
	if (len == 0 || len >= MOECACHE_NAME_LEN)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return -EINVAL;
	for (uint32_t i = 0; i < c->n_pools; i++)
		if (strlen(c->pools[i]) == len && !memcmp(c->pools[i], name, len))
			return 0;
	if (c->n_pools == AGENT_MAX_POOLS)
		return -E2BIG;
	memcpy(c->pools[c->n_pools], name, len);
	c->pools[c->n_pools][len] = '\0';
	c->n_pools++;
	return 0;
}

static int agent_add_pools(struct agent_config *c, const char *list)
{
	const char *p = list;

	for (;;) {
		size_t len = strcspn(p, ",");
		const char *end = p + len;
		int ret;

		while (len && isspace((unsigned char)*p))
			p++, len--;
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		ret = agent_add_pool(c, p, len);
		if (ret)
			return ret;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

static int agent_parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on"))
		*out = true;
	else if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* Keys compare with '-' and '_' as the same character. */
static bool agent_key_is(const char *key, const char *name)
{
	for (; *key && *name; key++, name++) {
		char a = *key == '-' ? '_' : *key;

		if (a != *name)
			return false;
	}
	return !*key && !*name;
}

int agent_config_set(struct agent_config *c, const char *key, const char *value)
{
	uint32_t v;
	int ret;

	if (!c || !key || !value)
		return -EINVAL;
	if (agent_key_is(key, "pool"))
		return agent_add_pools(c, value);
	if (agent_key_is(key, "device"))
		return *value ? agent_copy_str(c->device, sizeof(c->device), value) : -EINVAL;
	if (agent_key_is(key, "backend")) {
		uint32_t id;

		/* A name of libmoecache's table, but "auto": the agent is what chooses. */
		if (moecache_backend_parse(value, &id) || id == MOECACHE_BACKEND_NONE)
			return -EINVAL;
		return agent_copy_str(c->backend, sizeof(c->backend), value);
	}
	if (agent_key_is(key, "policy"))
		return *value ? agent_copy_str(c->policy, sizeof(c->policy), value) : -EINVAL;
	if (agent_key_is(key, "profile"))
		return agent_copy_str(c->profile, sizeof(c->profile), value);
	if (agent_key_is(key, "run_dir"))
		return *value ? agent_copy_str(c->run_dir, sizeof(c->run_dir), value) : -EINVAL;
	if (agent_key_is(key, "foreground"))
		return agent_parse_bool(value, &c->foreground);
	if (agent_key_is(key, "copy_threads"))
		return agent_parse_u32(value, 1, 256, &c->copy_threads);
	if (agent_key_is(key, "copy_delay_us"))
		return agent_parse_u32(value, 0, 10000000, &c->copy_delay_us);
	if (agent_key_is(key, "retry_ms"))
		return agent_parse_u32(value, 1, 60000, &c->retry_ms);
	if (agent_key_is(key, "tick_ms"))
		return agent_parse_u32(value, 1, 60000, &c->tick_ms);
	if (agent_key_is(key, "tier_placement")) {
		if (strcmp(value, "dynamic") && strcmp(value, "static"))
			return -EINVAL;
		c->tier_static = !strcmp(value, "static");
		return 0;
	}
	if (agent_key_is(key, "gpu_devices"))
		return agent_copy_str(c->gpu_devices, sizeof(c->gpu_devices), value);
	if (agent_key_is(key, "gpu_budget_mb"))
		return agent_parse_u32(value, 0, UINT32_MAX, &c->gpu_budget_mb);
	if (agent_key_is(key, "gpu_queues")) {
		/* 0 (from copy_threads) or a count a bank can use. */
		ret = agent_parse_u32(value, 0, MC_GPU_MAX_QUEUES, &v);
		if (!ret && v && v < MC_GPU_MIN_QUEUES)
			ret = -EINVAL;
		if (!ret)
			c->gpu_queues = v;
		return ret;
	}
	if (agent_key_is(key, "gpu_library"))
		return agent_copy_str(c->gpu_library, sizeof(c->gpu_library), value);
	if (agent_key_is(key, "log_level")) {
		ret = agent_parse_u32(value, LOG_EMERG, LOG_DEBUG, &v);
		if (!ret)
			c->log_level = (int)v;
		return ret;
	}
	return -ENOENT;
}

static char *agent_trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

int agent_config_parse(struct agent_config *c, const char *name, const char *text, char *err,
		       size_t errlen)
{
	char *copy, *line, *save = NULL;
	unsigned int lineno = 0;
	int ret = 0;

	if (!c || !text)
		return -EINVAL;
	copy = strdup(text);
	if (!copy)
		return -ENOMEM;
	/* strtok_r would merge blank lines and miscount them. */
	for (line = copy; line; line = save) {
		char *eq, *key, *value;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		*(line + strcspn(line, "#")) = '\0';
		line = agent_trim(line);
		if (!*line)
			continue;
		eq = strchr(line, '=');
		if (!eq) {
			ret = -EINVAL;
			snprintf(err, errlen, "%s:%u: expected key = value", name, lineno);
			break;
		}
		*eq = '\0';
		key = agent_trim(line);
		value = agent_trim(eq + 1);
		ret = agent_config_set(c, key, value);
		if (ret) {
			snprintf(err, errlen, "%s:%u: %s '%s'", name, lineno,
				 ret == -ENOENT ? "unknown key" : "bad value for", key);
			break;
		}
	}
	free(copy);
	return ret;
}

int agent_config_load(struct agent_config *c, const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f, *mem;
	char buf[4096];
	size_t n;
	int ret;

	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	mem = open_memstream(&text, &len);
	if (!mem) {
		fclose(f);
		return -ENOMEM;
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, mem);
	ret = ferror(f) ? -EIO : 0;
	fclose(f);
	if (fclose(mem) && !ret)
		ret = -ENOMEM;
	if (!ret)
		ret = agent_config_parse(c, path, text, err, errlen);
	else
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
	free(text);
	return ret;
}

/*
 * The flags: --KEY VALUE sets the configuration key KEY, as the file does
 * ('-' is '_'); --config, --foreground and --help are handled here. The
 * first five have a short form, the first letter.
 */
static const char *const agent_flags[] = {
    "pool",	     "config",	   "backend",	  "foreground",	    "help",
    "policy",	     "profile",	   "run-dir",	  "copy-threads",   "copy-delay-us",
    "retry-ms",	     "tick-ms",	   "log-level",	  "device",	    "gpu-devices",
    "gpu-budget-mb", "gpu-queues", "gpu-library", "tier-placement",
};
#define AGENT_N_FLAGS (sizeof(agent_flags) / sizeof(agent_flags[0]))
#define AGENT_FLAG_BASE 256
#define AGENT_SHORT_FLAGS "p:c:b:fh"

static void agent_options_fill(struct option *o)
{
	for (size_t i = 0; i < AGENT_N_FLAGS; i++) {
		bool bare =
		    !strcmp(agent_flags[i], "foreground") || !strcmp(agent_flags[i], "help");

		o[i] = (struct option){agent_flags[i], bare ? no_argument : required_argument, NULL,
				       (int)(AGENT_FLAG_BASE + i)};
	}
	o[AGENT_N_FLAGS] = (struct option){NULL, 0, NULL, 0};
}

/* The long name of what getopt_long returned, or NULL for an unknown option. */
static const char *agent_flag_name(int opt)
{
	if (opt >= AGENT_FLAG_BASE && (size_t)(opt - AGENT_FLAG_BASE) < AGENT_N_FLAGS)
		return agent_flags[opt - AGENT_FLAG_BASE];
	for (size_t i = 0; i < 5; i++)
		if (opt == agent_flags[i][0])
			return agent_flags[i];
	return NULL;
}

int agent_config_from_args(struct agent_config *c, int argc, char **argv, char *err, size_t errlen)
{
	struct option options[AGENT_N_FLAGS + 1];
	bool pools_from_flags = false;
	const char *flag;
	int opt, ret;

	agent_options_fill(options);
	agent_config_defaults(c);
	/* Pass 1: the config file, so that flags override it whatever their order. */
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, AGENT_SHORT_FLAGS, options, NULL)) != -1) {
		flag = agent_flag_name(opt);
		if (!flag) {
			snprintf(err, errlen, "bad option '%s'\n%s", argv[optind - 1], agent_usage);
			return -EINVAL;
		}
		if (!strcmp(flag, "help")) {
			snprintf(err, errlen, "%s", agent_usage);
			return 1;
		}
		if (strcmp(flag, "config"))
			continue;
		ret = agent_copy_str(c->config_path, sizeof(c->config_path), optarg);
		if (!ret)
			ret = agent_config_load(c, optarg, err, errlen);
		if (ret)
			return ret;
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'\n%s", argv[optind], agent_usage);
		return -EINVAL;
	}
	/* Pass 2: the flags. */
	optind = 1;
	while ((opt = getopt_long(argc, argv, AGENT_SHORT_FLAGS, options, NULL)) != -1) {
		flag = agent_flag_name(opt);
		if (!strcmp(flag, "config"))
			continue;
		if (!strcmp(flag, "foreground")) {
			c->foreground = true;
			continue;
		}
		if (!strcmp(flag, "pool") && !pools_from_flags) {
			pools_from_flags = true;
			c->n_pools = 0;
		}
		ret = agent_config_set(c, flag, optarg);
		if (ret) {
			snprintf(err, errlen, "bad value '%s' for --%s", optarg, flag);
			return ret;
		}
	}
	if (c->n_pools == 0) {
		snprintf(err, errlen, "no pool to serve: give --pool NAME or pool = NAME\n%s",
			 agent_usage);
		return -EINVAL;
	}
	return 0;
}
int agent_config_profile_path(const struct agent_config *c, const char *pool, char *out,
			      size_t outlen)
{
	const char *mark = strstr(c->profile, "{pool}");
	int n;

	if (!c->profile[0])
		n = snprintf(out, outlen, "%s", "");
	else if (mark)
		n = snprintf(out, outlen, "%.*s%s%s", (int)(mark - c->profile), c->profile, pool,
			     mark + strlen("{pool}"));
	else if (c->n_pools > 1)
		n = snprintf(out, outlen, "%s.%s", c->profile, pool);
	else
		n = snprintf(out, outlen, "%s", c->profile);
	return n < 0 || (size_t)n >= outlen ? -E2BIG : 0;
}

int agent_config_run_path(const struct agent_config *c, const char *pool, const char *suffix,
			  char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%s%s", c->run_dir, pool, suffix);

	return n < 0 || (size_t)n >= outlen ? -E2BIG : 0;
}
