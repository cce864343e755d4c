// SPDX-License-Identifier: MIT
/* moecachectl pool create|destroy|list|info, and flush: over generic netlink. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "ctl.h"

static const char pool_usage[] =
    "usage: moecachectl pool create NAME --layers L --experts E --expert-bytes N --slots S\n"
    "                              [--range BEGIN:END] [--uid USER] [--gid GROUP] [--mode MODE]\n"
    "       moecachectl pool create NAME --layers L --experts E --expert-bytes N\n"
    "                              --bank TIER:BACKEND:DEVICE:SLOTS [--bank ...] [...]\n"
    "       moecachectl pool destroy NAME\n"
    "       moecachectl pool list [--json]\n"
    "       moecachectl pool info NAME [--json]\n"
    "\n"
    "create (needs CAP_SYS_ADMIN): a pool of L layers of E experts (the model's\n"
    "  count), covering the local range [BEGIN, END) (default: all), each expert a\n"
    "  record of N bytes (a multiple of the page size; K, M, G suffixes), sharing S\n"
    "  bank slots. The owner (default: you) and MODE (octal, default 0600) decide\n"
    "  who may attach, as for IPC objects.\n"
    "  --bank (repeatable, fastest first) splits the slots into banks: TIER (0 is\n"
    "  the fastest; never decreasing), BACKEND (cpu, cuda, rocm, or auto: the\n"
    "  agent's), the backend's DEVICE ordinal (one bank per device), and SLOTS: a\n"
    "  count, or a capacity in bytes with a unit (64M). --slots, if given, must be\n"
    "  their sum.\n"
    "destroy (CAP_SYS_ADMIN or the owner): fails while any process is attached.\n"
    "list, info: the pools you may read (read permission, as a client attach).\n";

static const char flush_usage[] =
    "usage: moecachectl flush NAME\n"
    "\n"
    "Unmaps every resident expert of the pool that no client has pinned (the\n"
    "pinned ones stay). Needs CAP_SYS_ADMIN or the pool's ownership.\n";

static int pool_help(FILE *out, int status)
{
	fputs(pool_usage, out);
	return status;
}

static json_object *pool_json(const struct ctl_pool *p)
{
	struct json_object *o = json_object_new_object(), *flags = json_object_new_array();
	char mode[8];

	snprintf(mode, sizeof(mode), "%04o", p->mode);
	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "n_layers", json_object_new_int64(p->n_layers));
	json_object_object_add(o, "n_experts", json_object_new_int64(p->n_experts));
	json_object_object_add(o, "expert_begin", json_object_new_int64(p->expert_begin));
	json_object_object_add(o, "expert_end", json_object_new_int64(p->expert_end));
	json_object_object_add(o, "n_slots", json_object_new_int64(p->n_slots));
	json_object_object_add(o, "expert_bytes", json_object_new_int64((int64_t)p->expert_bytes));
	json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)p->host_bytes));
	json_object_object_add(o, "uid", json_object_new_int64(p->uid));
	json_object_object_add(o, "gid", json_object_new_int64(p->gid));
	json_object_object_add(o, "mode", json_object_new_string(mode));
	if (p->flags & MOECACHE_POOL_LOADED)
		json_object_array_add(flags, json_object_new_string("loaded"));
	if (p->flags & MOECACHE_POOL_AGENT)
		json_object_array_add(flags, json_object_new_string("agent"));
	if (p->flags & MOECACHE_POOL_BANK)
		json_object_array_add(flags, json_object_new_string("bank"));
	json_object_object_add(o, "flags", flags);
	json_object_object_add(o, "n_files", json_object_new_int64(p->n_files));
	json_object_object_add(o, "agent_pid", json_object_new_int64(p->agent_pid));
	json_object_object_add(o, "agent_epoch", json_object_new_int64(p->agent_epoch));
	return o;
}

static void print_json(struct json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
}

/* ---- create ---- */

enum {
	OPT_LAYERS = 256,
	OPT_EXPERTS,
	OPT_RANGE,
	OPT_EXPERT_BYTES,
	OPT_SLOTS,
	OPT_UID,
	OPT_GID,
	OPT_MODE,
	OPT_BANK,
	OPT_JSON,
	OPT_HELP
};

static int pool_create(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"layers", required_argument, NULL, OPT_LAYERS},
	    {"experts", required_argument, NULL, OPT_EXPERTS},
	    {"range", required_argument, NULL, OPT_RANGE},
	    {"expert-bytes", required_argument, NULL, OPT_EXPERT_BYTES},
	    {"slots", required_argument, NULL, OPT_SLOTS},
	    {"uid", required_argument, NULL, OPT_UID},
	    {"gid", required_argument, NULL, OPT_GID},
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"bank", required_argument, NULL, OPT_BANK},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	struct ctl_bank_spec banks[CTL_MAX_BANKS];
	struct moecache_bank_layout layout[CTL_MAX_BANKS];
	uint32_t n_banks = 0, bank_slots;
	char why[160];
	struct moecache_pool_create *r;
	struct ctl_create c;
	uint64_t bytes;
	bool have_layers = false, have_experts = false, have_bytes = false, have_slots = false;
	struct ctl_nl nl;
	char *end;
	int opt, ret;

	memset(&c, 0, sizeof(c));
	r = &c.req;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_LAYERS:
			if (ctl_parse_u32(optarg, &r->n_layers))
				return ctl_usage_fail("pool", "bad --layers '%s'", optarg);
			have_layers = true;
			break;
		case OPT_EXPERTS:
			if (ctl_parse_u32(optarg, &r->n_experts))
				return ctl_usage_fail("pool", "bad --experts '%s'", optarg);
			have_experts = true;
			break;
		case OPT_RANGE:
			if (ctl_parse_range(optarg, &r->expert_begin, &r->expert_end))
				return ctl_usage_fail("pool", "bad --range '%s' (BEGIN:END)",
						      optarg);
			c.has_range = true;
			break;
		case OPT_EXPERT_BYTES:
			if (ctl_parse_size(optarg, &bytes))
				return ctl_usage_fail("pool", "bad --expert-bytes '%s'", optarg);
			r->expert_bytes = bytes;
			have_bytes = true;
			break;
		case OPT_SLOTS:
			if (ctl_parse_u32(optarg, &r->n_slots))
				return ctl_usage_fail("pool", "bad --slots '%s'", optarg);
			have_slots = true;
			break;
		case OPT_UID:
			if (ctl_parse_uid(optarg, &r->uid))
				return ctl_usage_fail("pool", "no user '%s'", optarg);
			c.has_uid = true;
			break;
		case OPT_GID:
			if (ctl_parse_gid(optarg, &r->gid))
				return ctl_usage_fail("pool", "no group '%s'", optarg);
			c.has_gid = true;
			break;
		case OPT_MODE:
			errno = 0;
			r->mode = (uint32_t)strtoul(optarg, &end, 8);
			if (errno || !*optarg || *end || r->mode > 0777)
				return ctl_usage_fail(
				    "pool", "bad --mode '%s' (octal, at most 0777)", optarg);
			c.has_mode = true;
			break;
		case OPT_BANK:
			if (n_banks == CTL_MAX_BANKS)
				return ctl_usage_fail("pool", "at most %d --bank", CTL_MAX_BANKS);
			if (ctl_parse_bank(optarg, &banks[n_banks], why, sizeof(why)))
				return ctl_usage_fail("pool", "bad --bank %s", why);
			n_banks++;
			break;
		case OPT_HELP:
			return pool_help(stdout, CTL_EXIT_OK);
		default:
			return ctl_bad_option("pool", argv);
		}
	}
	if (optind != argc - 1)
		return ctl_usage_fail("pool", "create takes one pool name");
	if (!have_layers || !have_experts || !have_bytes || (!have_slots && !n_banks))
		return ctl_usage_fail(
		    "pool", "create needs --layers, --experts, --expert-bytes and --slots");
	if (n_banks) {
		if (ctl_banks_resolve(banks, n_banks, r->expert_bytes, &bank_slots, why,
				      sizeof(why)))
			return ctl_usage_fail("pool", "bad --bank: %s", why);
		if (have_slots && r->n_slots != bank_slots)
			return ctl_usage_fail("pool", "--slots %u, but the banks hold %u",
					      r->n_slots, bank_slots);
		r->n_slots = bank_slots;
	}
	if (!ctl_pool_name_ok(argv[optind]))
		return ctl_usage_fail("pool", "bad pool name '%s' (1 to %d of A-Z a-z 0-9 . _ -)",
				      argv[optind], MOECACHE_NAME_LEN - 1);
	snprintf(r->name, sizeof(r->name), "%s", argv[optind]);
	for (uint32_t i = 0; i < n_banks; i++)
		layout[i] = banks[i].layout;
	c.banks = layout;
	c.n_banks = n_banks;

	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_pool_create(&nl, &c);
	if (ret)
		ret = ctl_pool_fail(&nl, r->name, ret);
	ctl_nl_close(&nl);
	return ret;
}

/* ---- destroy, info, list ---- */

static int pool_destroy(int argc, char **argv)
{
	struct ctl_nl nl;
	int ret;

	if (argc != 2)
		return ctl_usage_fail("pool", "destroy takes one pool name");
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_pool_destroy(&nl, argv[1]);
	if (ret)
		ret = ctl_pool_fail(&nl, argv[1], ret);
	ctl_nl_close(&nl);
	return ret;
}

/* Parses [--json] and one name (want_name) or none. */
static int parse_json_args(int argc, char **argv, bool want_name, bool *json, const char **name)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == OPT_JSON)
			*json = true;
		else if (opt == OPT_HELP)
			return pool_help(stdout, -1);
		else
			return ctl_bad_option("pool", argv);
	}
	if (argc - optind != (want_name ? 1 : 0))
		return ctl_usage_fail("pool", "%s",
				      want_name ? "info takes one pool name"
						: "list takes no argument");
	if (want_name)
		*name = argv[optind];
	return 0;
}

static void print_pool_text(const struct ctl_pool *p)
{
	char expert[32], host[32], flags[32];

	ctl_format_bytes(expert, sizeof(expert), p->expert_bytes);
	ctl_format_bytes(host, sizeof(host), p->host_bytes);
	ctl_format_pool_flags(flags, sizeof(flags), p->flags);
	printf("pool:          %s\n", p->name);
	printf("layers:        %u\n", p->n_layers);
	printf("experts:       %u..%u of %u per layer\n", p->expert_begin, p->expert_end,
	       p->n_experts);
	printf("slots:         %u\n", p->n_slots);
	printf("expert bytes:  %" PRIu64 " (%s)\n", p->expert_bytes, expert);
	printf("host bytes:    %" PRIu64 " (%s)\n", p->host_bytes, host);
	printf("owner:         %u:%u mode %04o\n", p->uid, p->gid, p->mode);
	printf("flags:         %s\n", flags);
	printf("attached:      %u files\n", p->n_files);
	if (p->agent_pid)
		printf("agent:         pid %u (epoch %u)\n", p->agent_pid, p->agent_epoch);
	else
		printf("agent:         none (epoch %u)\n", p->agent_epoch);
}

static int pool_info(int argc, char **argv)
{
	const char *name = NULL;
	struct ctl_pool p;
	struct ctl_nl nl;
	bool json = false;
	int ret;

	ret = parse_json_args(argc, argv, true, &json, &name);
	if (ret)
		return ret < 0 ? CTL_EXIT_OK : ret;
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_pool_info(&nl, name, &p);
	if (ret) {
		ret = ctl_pool_fail(&nl, name, ret);
	} else if (json) {
		struct json_object *o = pool_json(&p);

		print_json(o);
		json_object_put(o);
	} else {
		print_pool_text(&p);
	}
	ctl_nl_close(&nl);
	return ret;
}

static int list_text(const struct ctl_pool *p, void *arg)
{
	char expert[32], host[32], flags[32], range[32];

	ctl_format_bytes(expert, sizeof(expert), p->expert_bytes);
	ctl_format_bytes(host, sizeof(host), p->host_bytes);
	ctl_format_pool_flags(flags, sizeof(flags), p->flags);
	snprintf(range, sizeof(range), "%u..%u/%u", p->expert_begin, p->expert_end, p->n_experts);
	printf("%-20s %6u %-14s %6u %10s %10s %5u:%-5u %04o %-17s %5u %7u\n", p->name, p->n_layers,
	       range, p->n_slots, expert, host, p->uid, p->gid, p->mode, flags, p->n_files,
	       p->agent_pid);
	return 0;
}

static int list_json(const struct ctl_pool *p, void *arg)
{
	return json_object_array_add(arg, pool_json(p)) ? -ENOMEM : 0;
}

static int pool_list(int argc, char **argv)
{
	struct json_object *arr = NULL;
	struct ctl_nl nl;
	bool json = false;
	int ret;

	ret = parse_json_args(argc, argv, false, &json, NULL);
	if (ret)
		return ret < 0 ? CTL_EXIT_OK : ret;
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	if (json) {
		arr = json_object_new_array();
		ret = ctl_nl_pool_list(&nl, list_json, arr);
		if (!ret)
			print_json(arr);
		json_object_put(arr);
	} else {
		printf("%-20s %6s %-14s %6s %10s %10s %11s %4s %-17s %5s %7s\n", "NAME", "LAYERS",
		       "EXPERTS", "SLOTS", "EXPERT", "HOST", "OWNER", "MODE", "FLAGS", "FILES",
		       "AGENT");
		ret = ctl_nl_pool_list(&nl, list_text, NULL);
	}
	if (ret)
		ret = ctl_fail("pool list: %s", strerror(-ret));
	ctl_nl_close(&nl);
	return ret;
}

int ctl_cmd_pool(struct ctl *ctl, int argc, char **argv)
{
	if (argc < 2)
		return pool_help(stderr, CTL_EXIT_USAGE);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return pool_help(stdout, CTL_EXIT_OK);
	if (!strcmp(argv[1], "create"))
		return pool_create(argc - 1, argv + 1);
	if (!strcmp(argv[1], "destroy"))
		return pool_destroy(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return pool_list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "info"))
		return pool_info(argc - 1, argv + 1);
	return ctl_usage_fail("pool", "unknown subcommand '%s'", argv[1]);
}

int ctl_cmd_flush(struct ctl *ctl, int argc, char **argv)
{
	uint32_t flushed;
	struct ctl_nl nl;
	int ret;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(flush_usage, stdout);
		return CTL_EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '-')
		return ctl_usage_fail("flush", "takes one pool name");
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_flush(&nl, argv[1], &flushed);
	if (ret)
		ret = ctl_pool_fail(&nl, argv[1], ret);
	else
		printf("pool '%s': %u slots flushed\n", argv[1], flushed);
	ctl_nl_close(&nl);
	return ret;
}
