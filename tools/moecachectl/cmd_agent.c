// SPDX-License-Identifier: MIT
/*
 * moecachectl bank, profile and policy: what concerns a pool's agent.
 *
 * Profiles and policies reach the agent through files in the run folder
 * ($MOECACHE_RUNDIR, /run/moecache): NAME.profile.json and NAME.policy,
 * written atomically, then SIGHUP to the agent attached to the pool (its pid
 * comes from the driver). A profile can be asked of the agent with SIGUSR1
 * (it saves its own ranking), or computed from the driver's access counters.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libmoecache.h>

#include "agent/policy/policy.h"
#include "agent/policy/profile.h"
#include "ckpt.h"
#include "ctl.h"

static const char bank_usage[] =
    "usage: moecachectl bank NAME [--json]\n"
    "\n"
    "The descriptor of the bank the pool's agent set: backend, device, size and\n"
    "slot stride. Needs read permission on the pool.\n";

static const char profile_usage[] =
    "usage: moecachectl profile save NAME FILE [--from-agent [--agent-file PATH]]\n"
    "                                          [--timeout SECONDS]\n"
    "       moecachectl profile load NAME FILE\n"
    "\n"
    "A profile ranks the pool's experts, hottest first: {\"ranked\": [[layer,\n"
    "expert], ...]}, expert being the index in the pool's local range.\n"
    "save: from the driver's access counters (read permission on the pool), or\n"
    "  with --from-agent, the agent's own ranking: the agent is sent SIGUSR1 and\n"
    "  its profile file (default $MOECACHE_RUNDIR/NAME.profile.json) is copied\n"
    "  once it has been rewritten.\n"
    "load: checks FILE against the pool, installs it as\n"
    "  $MOECACHE_RUNDIR/NAME.profile.json and sends SIGHUP to the pool's agent.\n";

static const char policy_usage[] =
    "usage: moecachectl policy set NAME POLICY\n"
    "\n"
    "Chooses the replacement policy of the pool's agent: lru, lfu, ema, arc,\n"
    "reuse, revisit, duel, static (needs a profile) or default (duel). Written to\n"
    "$MOECACHE_RUNDIR/NAME.policy;\n"
    "the pool's agent, if one is attached, is sent SIGHUP.\n";

enum { OPT_JSON = 256, OPT_FROM_AGENT, OPT_AGENT_FILE, OPT_TIMEOUT, OPT_HELP };

/* ---- bank ---- */

static void format_uuid(char *buf, size_t len, const uint8_t *u)
{
	snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

/* Opens the device and attaches to pool; prints why not. */
static int attach(const struct ctl *ctl, const char *pool, enum moecache_role role,
		  struct moecache **out)
{
	int ret = moecache_open(ctl->device, out);

	if (ret)
		return ctl_fail("%s: %s%s", ctl->device, strerror(-ret),
				ret == -ENOENT ? " (is the moecache module loaded?)" : "");
	ret = moecache_attach(*out, pool, role);
	if (ret) {
		moecache_close(*out);
		return ctl_pool_fail(NULL, pool, ret);
	}
	return 0;
}

int ctl_cmd_bank(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	const struct moecache_pool_info *info;
	struct moecache_bank bank = {0};
	char uuid[40], bytes[32], stride[32];
	struct moecache *mc;
	const char *pool;
	bool json = false;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == OPT_JSON) {
			json = true;
		} else if (opt == OPT_HELP) {
			fputs(bank_usage, stdout);
			return CTL_EXIT_OK;
		} else {
			return ctl_bad_option("bank", argv);
		}
	}
	if (argc - optind != 1)
		return ctl_usage_fail("bank", "takes one pool name");
	pool = argv[optind];
	if (attach(ctl, pool, MOECACHE_ROLE_CLIENT, &mc))
		return CTL_EXIT_FAIL;
	info = moecache_pool(mc);
	ret = moecache_bank_get(mc, &bank);
	if (ret == -ENODATA) {
		moecache_close(mc);
		return ctl_fail("pool '%s': No bank set (an agent sets it)", pool);
	}
	if (ret) {
		moecache_close(mc);
		return ctl_pool_fail(NULL, pool, ret);
	}
	/* only the descriptor is shown: the file itself is not ours to keep */
	close(bank.fd);
	format_uuid(uuid, sizeof(uuid), bank.device_uuid);
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "pool", json_object_new_string(pool));
		json_object_object_add(o, "backend",
				       json_object_new_string(ctl_backend_name(bank.backend)));
		json_object_object_add(o, "device", json_object_new_int64(bank.device));
		json_object_object_add(o, "device_uuid", json_object_new_string(uuid));
		json_object_object_add(o, "bank_bytes",
				       json_object_new_int64((int64_t)bank.bank_bytes));
		json_object_object_add(o, "slot_stride",
				       json_object_new_int64((int64_t)bank.slot_stride));
		json_object_object_add(o, "n_slots", json_object_new_int64(info->n_slots));
		json_object_object_add(o, "expert_bytes",
				       json_object_new_int64((int64_t)info->expert_bytes));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
		json_object_put(o);
	} else {
		ctl_format_bytes(bytes, sizeof(bytes), bank.bank_bytes);
		ctl_format_bytes(stride, sizeof(stride), bank.slot_stride);
		printf("pool:         %s\n", pool);
		printf("backend:      %s (device %u)\n", ctl_backend_name(bank.backend),
		       bank.device);
		printf("device uuid:  %s\n", uuid);
		printf("bank bytes:   %llu (%s)\n", bank.bank_bytes, bytes);
		printf("slot stride:  %llu (%s)\n", bank.slot_stride, stride);
		printf("slots:        %u of %" PRIu64 " bytes\n", info->n_slots,
		       info->expert_bytes);
	}
	moecache_close(mc);
	return CTL_EXIT_OK;
}

/* ---- profiles ---- */

/* {"ranked": [[layer, expert], ...]} of the experts ever acquired, most first. */
static int profile_from_counters(struct moecache *mc, struct json_object **out)
{
	const struct moecache_pool_info *info = moecache_pool(mc);
	const struct moecache_map *map = moecache_map(mc);
	uint32_t n_idx = info->n_layers * info->n_local;
	struct moe_profile ranking;
	struct json_object *o, *arr;
	double *count;
	int ret;

	count = calloc(n_idx ? n_idx : 1, sizeof(*count));
	if (!count)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_idx; i++)
		count[i] = moecache_map_access(map, i);
	ret = moe_profile_rank(count, info->n_layers, info->n_local, &ranking);
	free(count);
	if (ret)
		return ret;
	o = json_object_new_object();
	arr = json_object_new_array();
	for (uint32_t i = 0; i < ranking.n; i++) {
		struct json_object *pair = json_object_new_array();

		json_object_array_add(pair, json_object_new_int64(ranking.ranked[i].layer));
		json_object_array_add(pair, json_object_new_int64(ranking.ranked[i].expert));
		json_object_array_add(arr, pair);
	}
	json_object_object_add(o, "ranked", arr);
	moe_profile_free(&ranking);
	*out = o;
	return 0;
}

/*
 * Reads a profile and checks it against the pool: pairs of integers inside
 * the pool, no expert twice. *out gets the parsed document.
 */
static int profile_check(const char *path, uint32_t n_layers, uint32_t n_local,
			 struct json_object **out)
{
	size_t n_idx = (size_t)n_layers * n_local, i, n;
	struct json_object *root, *ranked;
	uint8_t *seen;

	root = json_object_from_file(path);
	if (!root)
		return ctl_fail("profile: %s: %s", path,
				json_util_get_last_err() ? json_util_get_last_err() : "not JSON");
	if (!json_object_object_get_ex(root, "ranked", &ranked) ||
	    !json_object_is_type(ranked, json_type_array)) {
		json_object_put(root);
		return ctl_fail("profile: %s: no \"ranked\" array", path);
	}
	seen = calloc(n_idx ? n_idx : 1, 1);
	if (!seen) {
		json_object_put(root);
		return ctl_fail("profile: out of memory");
	}
	n = json_object_array_length(ranked);
	for (i = 0; i < n; i++) {
		struct json_object *pair = json_object_array_get_idx(ranked, i), *l, *e;
		int64_t layer, expert;

		if (!json_object_is_type(pair, json_type_array) ||
		    json_object_array_length(pair) != 2 ||
		    !json_object_is_type(l = json_object_array_get_idx(pair, 0), json_type_int) ||
		    !json_object_is_type(e = json_object_array_get_idx(pair, 1), json_type_int))
			break;
		layer = json_object_get_int64(l);
		expert = json_object_get_int64(e);
		if (layer < 0 || expert < 0 || layer >= n_layers || expert >= n_local ||
		    seen[layer * n_local + expert]++)
			break;
	}
	free(seen);
	if (i < n) {
		json_object_put(root);
		return ctl_fail("profile: %s: entry %zu is not a new [layer, expert] of the pool "
				"(%u layers, %u local experts)",
				path, i, n_layers, n_local);
	}
	*out = root;
	return 0;
}

static int write_json(const char *path, struct json_object *o)
{
	char *text;
	int ret;

	if (asprintf(&text, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) < 0)
		return -ENOMEM;
	ret = ckpt_write_atomic(path, text, 0644);
	free(text);
	return ret;
}

/* The pool's geometry and agent, by netlink (needs read permission). */
static int pool_lookup(const char *pool, struct ctl_pool *p)
{
	struct ctl_nl nl;
	int ret;

	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_pool_info(&nl, pool, p);
	if (ret)
		ret = ctl_pool_fail(&nl, pool, ret);
	ctl_nl_close(&nl);
	return ret;
}

static int signal_agent(const struct ctl_pool *p, int sig, const char *what)
{
	if (!p->agent_pid) {
		printf("pool '%s': no agent attached; it will read the %s when it starts\n",
		       p->name, what);
		return 0;
	}
	if (kill((pid_t)p->agent_pid, sig) < 0)
		return ctl_fail("pool '%s': cannot signal agent pid %u: %s", p->name, p->agent_pid,
				strerror(errno));
	printf("pool '%s': agent pid %u told to read the %s\n", p->name, p->agent_pid, what);
	return 0;
}

static int mtime_of(const char *path, struct timespec *t)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		t->tv_sec = 0;
		t->tv_nsec = 0;
		return -errno;
	}
	*t = st.st_mtim;
	return 0;
}

/* Asks the agent to save its ranking, waits for its file to change, copies it. */
static int profile_from_agent(const struct ctl *ctl, const char *pool, const char *agent_file,
			      double timeout, const char *file)
{
	struct json_object *doc;
	struct timespec before, now, wait = {0, 50 * 1000 * 1000};
	char *path = agent_file ? strdup(agent_file) : ctl_run_path(ctl, pool, ".profile.json");
	struct ctl_pool p;
	double waited = 0;
	int ret;

	if (!path)
		return ctl_fail("profile: out of memory");
	ret = pool_lookup(pool, &p);
	if (ret)
		goto out;
	if (!p.agent_pid) {
		ret = ctl_fail("pool '%s': no agent attached", pool);
		goto out;
	}
	mtime_of(path, &before);
	if (kill((pid_t)p.agent_pid, SIGUSR1) < 0) {
		ret = ctl_fail("pool '%s': cannot signal agent pid %u: %s", pool, p.agent_pid,
			       strerror(errno));
		goto out;
	}
	for (;;) {
		if (!mtime_of(path, &now) &&
		    (now.tv_sec != before.tv_sec || now.tv_nsec != before.tv_nsec))
			break;
		if (waited >= timeout) {
			ret = ctl_fail("pool '%s': the agent did not rewrite %s within %.0f s",
				       pool, path, timeout);
			goto out;
		}
		nanosleep(&wait, NULL);
		waited += 0.05;
	}
	ret = profile_check(path, p.n_layers, p.expert_end - p.expert_begin, &doc);
	if (ret)
		goto out;
	ret = write_json(file, doc);
	json_object_put(doc);
	if (ret)
		ret = ctl_fail("profile: %s: %s", file, strerror(-ret));
out:
	free(path);
	return ret;
}

static int profile_save(const struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"from-agent", no_argument, NULL, OPT_FROM_AGENT},
	    {"agent-file", required_argument, NULL, OPT_AGENT_FILE},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	const char *agent_file = NULL, *pool, *file;
	bool from_agent = false;
	struct json_object *doc;
	double timeout = 10;
	struct moecache *mc;
	char *end;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_FROM_AGENT:
			from_agent = true;
			break;
		case OPT_AGENT_FILE:
			agent_file = optarg;
			break;
		case OPT_TIMEOUT:
			timeout = strtod(optarg, &end);
			if (*end || !isfinite(timeout) || timeout <= 0)
				return ctl_usage_fail("profile", "bad --timeout '%s'", optarg);
			break;
		case OPT_HELP:
			fputs(profile_usage, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_bad_option("profile", argv);
		}
	}
	if (argc - optind != 2)
		return ctl_usage_fail("profile", "save takes a pool name and a file");
	pool = argv[optind];
	file = argv[optind + 1];
	if (from_agent)
		return profile_from_agent(ctl, pool, agent_file, timeout, file);
	if (attach(ctl, pool, MOECACHE_ROLE_CLIENT, &mc))
		return CTL_EXIT_FAIL;
	ret = profile_from_counters(mc, &doc);
	moecache_close(mc);
	if (ret)
		return ctl_fail("profile: %s", strerror(-ret));
	ret = write_json(file, doc);
	if (!ret)
		printf("pool '%s': %zu experts ranked into %s\n", pool,
		       json_object_array_length(json_object_object_get(doc, "ranked")), file);
	json_object_put(doc);
	return ret ? ctl_fail("profile: %s: %s", file, strerror(-ret)) : CTL_EXIT_OK;
}

static int install(const struct ctl *ctl, const char *pool, const char *suffix, const char *text,
		   char **path_out)
{
	char *path = ctl_run_path(ctl, pool, suffix);
	int ret;

	if (!path)
		return ctl_fail("out of memory");
	ret = ctl_make_rundir(ctl);
	if (!ret)
		ret = ckpt_write_atomic(path, text, 0644);
	if (ret) {
		ctl_fail("%s: %s", path, strerror(-ret));
		free(path);
		return CTL_EXIT_FAIL;
	}
	*path_out = path;
	return 0;
}

static int profile_load(const struct ctl *ctl, int argc, char **argv)
{
	struct json_object *doc;
	struct ctl_pool p;
	char *text, *path;
	int ret;

	if (argc != 3)
		return ctl_usage_fail("profile", "load takes a pool name and a file");
	ret = pool_lookup(argv[1], &p);
	if (ret)
		return ret;
	ret = profile_check(argv[2], p.n_layers, p.expert_end - p.expert_begin, &doc);
	if (ret)
		return ret;
	ret = asprintf(&text, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
	json_object_put(doc);
	if (ret < 0)
		return ctl_fail("out of memory");
	ret = install(ctl, p.name, ".profile.json", text, &path);
	free(text);
	if (ret)
		return ret;
	printf("pool '%s': profile installed as %s\n", p.name, path);
	free(path);
	return signal_agent(&p, SIGHUP, "profile") ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}

int ctl_cmd_profile(struct ctl *ctl, int argc, char **argv)
{
	if (argc < 2)
		return ctl_usage_fail("profile", "needs save or load");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(profile_usage, stdout);
		return CTL_EXIT_OK;
	}
	if (!strcmp(argv[1], "save"))
		return profile_save(ctl, argc - 1, argv + 1);
	if (!strcmp(argv[1], "load")) {
		if (argc == 3 && !strcmp(argv[2], "--help")) {
			fputs(profile_usage, stdout);
			return CTL_EXIT_OK;
		}
		return profile_load(ctl, argc - 1, argv + 1);
	}
	return ctl_usage_fail("profile", "unknown subcommand '%s'", argv[1]);
}

/* ---- policy ---- */

int ctl_cmd_policy(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_pool p;
	char *text, *path;
	int ret;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
			  (argc == 3 && !strcmp(argv[2], "--help")))) {
		fputs(policy_usage, stdout);
		return CTL_EXIT_OK;
	}
	if (argc != 4 || strcmp(argv[1], "set"))
		return ctl_usage_fail("policy", "usage: policy set NAME POLICY");
	/* What moecached can run: libmoepolicy's names but the simulator's oracles. */
	if (!moe_policy_exists(argv[3]) || moe_policy_reads_future(argv[3]))
		return ctl_usage_fail("policy", "unknown policy '%s'", argv[3]);
	ret = pool_lookup(argv[2], &p);
	if (ret)
		return ret;
	if (asprintf(&text, "%s\n", argv[3]) < 0)
		return ctl_fail("out of memory");
	ret = install(ctl, p.name, ".policy", text, &path);
	free(text);
	if (ret)
		return ret;
	printf("pool '%s': policy %s written to %s\n", p.name, argv[3], path);
	free(path);
	return signal_agent(&p, SIGHUP, "policy") ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}
