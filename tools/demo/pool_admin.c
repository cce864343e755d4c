// SPDX-License-Identifier: MIT
/*
 * moecache-demo-pool: the few pool operations the demo and the agent's VM
 * tests use (create, destroy, stats), with key=value output their scripts
 * read. moecachectl pool create, pool destroy and stats cover the same;
 * this tool goes once the demo and the suites use moecachectl.
 *
 *   moecache-demo-pool create NAME --layers L --experts E --slots S
 *                      --expert-bytes B [--begin B --end E] [--mode 0660]
 *   moecache-demo-pool destroy NAME
 *   moecache-demo-pool stats NAME      (key=value on one line)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libmoecache.h"

static const char pool_usage[] =
    "usage: moecache-demo-pool create NAME --layers L --experts E --slots S --expert-bytes B\n"
    "                          [--begin B --end E] [--mode MODE]\n"
    "       moecache-demo-pool destroy NAME\n"
    "       moecache-demo-pool stats NAME\n";

static int pool_parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end || *s == '-' ? -EINVAL : 0;
}

static int pool_create(struct moecache *mc, const char *name, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"layers", required_argument, NULL, 'l'},
	    {"experts", required_argument, NULL, 'e'},
	    {"slots", required_argument, NULL, 's'},
	    {"expert-bytes", required_argument, NULL, 'b'},
	    {"begin", required_argument, NULL, 'B'},
	    {"end", required_argument, NULL, 'E'},
	    {"mode", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t layers = 0, experts = 0, slots = 0, bytes = 0, begin = 0, end = 0, mode = 0660;
	struct moecache_pool_create req;
	bool have_end = false;
	int opt, ret = 0;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1 && !ret) {
		switch (opt) {
		case 'l':
			ret = pool_parse_u64(optarg, &layers);
			break;
		case 'e':
			ret = pool_parse_u64(optarg, &experts);
			break;
		case 's':
			ret = pool_parse_u64(optarg, &slots);
			break;
		case 'b':
			ret = pool_parse_u64(optarg, &bytes);
			break;
		case 'B':
			ret = pool_parse_u64(optarg, &begin);
			break;
		case 'E':
			ret = pool_parse_u64(optarg, &end);
			have_end = true;
			break;
		case 'm':
			ret = pool_parse_u64(optarg, &mode);
			break;
		default:
			ret = -EINVAL;
			break;
		}
	}
	/* The driver checks the values; here they only have to fit the fields. */
	if (ret || layers > UINT32_MAX || experts > UINT32_MAX || slots > UINT32_MAX ||
	    begin > UINT32_MAX || end > UINT32_MAX || mode > UINT32_MAX) {
		fputs(pool_usage, stderr);
		return -EINVAL;
	}
	memset(&req, 0, sizeof(req));
	snprintf(req.name, sizeof(req.name), "%s", name);
	req.n_layers = (uint32_t)layers;
	req.n_experts = (uint32_t)experts;
	req.expert_begin = (uint32_t)begin;
	req.expert_end = (uint32_t)(have_end ? end : experts);
	req.n_slots = (uint32_t)slots;
	req.expert_bytes = bytes;
	req.uid = getuid();
	req.gid = getgid();
	req.mode = (uint32_t)mode;
	return moecache_pool_create(mc, &req);
}

static int pool_stats(const char *name)
{
	const struct moecache_pool_info *pi;
	struct moecache_stats st;
	struct moecache *mc;
	int ret;

	ret = moecache_open_attach(name, MOECACHE_ROLE_CLIENT, &mc);
	if (ret)
		return ret;
	pi = moecache_pool(mc);
	ret = moecache_stats(mc, MOECACHE_NONE, &st);
	if (!ret)
		printf("pool=%s layers=%u experts=%u slots=%u expert_bytes=%llu host_bytes=%llu "
		       "hits=%llu misses=%llu prefetch_hits=%llu prefetches=%llu evictions=%llu "
		       "commits=%llu aborts=%llu bytes_copied=%llu waits=%llu wait_ns=%llu "
		       "resident=%u filling=%u pinned_slots=%u pins=%u queued=%u inflight=%u "
		       "clients=%u agent_pid=%u\n",
		       name, pi->n_layers, pi->n_experts, pi->n_slots,
		       (unsigned long long)pi->expert_bytes, (unsigned long long)pi->off.host_size,
		       (unsigned long long)st.hits, (unsigned long long)st.misses,
		       (unsigned long long)st.prefetch_hits, (unsigned long long)st.prefetches,
		       (unsigned long long)st.evictions, (unsigned long long)st.commits,
		       (unsigned long long)st.aborts, (unsigned long long)st.bytes_copied,
		       (unsigned long long)st.waits, (unsigned long long)st.wait_ns, st.resident,
		       st.filling, st.pinned_slots, st.pins, st.queued, st.inflight,
		       /* this process is one of the clients */
		       st.n_clients ? st.n_clients - 1 : 0, st.agent_pid);
	moecache_close(mc);
	return ret;
}

int main(int argc, char **argv)
{
	struct moecache *mc;
	const char *cmd, *name;
	int ret;

	if (argc < 3) {
		fputs(pool_usage, stderr);
		return 2;
	}
	cmd = argv[1];
	name = argv[2];
	if (!strcmp(cmd, "stats")) {
		ret = pool_stats(name);
	} else {
		ret = moecache_open(NULL, &mc);
		if (!ret) {
			if (!strcmp(cmd, "create"))
				ret = pool_create(mc, name, argc - 2, argv + 2);
			else if (!strcmp(cmd, "destroy"))
				ret = moecache_pool_destroy(mc, name);
			else
				ret = -EINVAL;
			moecache_close(mc);
		}
	}
	if (ret) {
		fprintf(stderr, "moecache-demo-pool %s %s: %s\n", cmd, name, strerror(-ret));
		return 1;
	}
	return 0;
}
