// SPDX-License-Identifier: MIT
/*
 * moecache-bench --policy [--policy-name NAME] [--accesses N] [--out FILE]
 *
 * The nanoseconds one demand access costs a policy (moe_policy_access, and
 * on a miss moe_policy_victim, removed and inserted, as moecached calls
 * them), with 10^3, 10^4 and 10^5 slots, beside LRU in the same run. The
 * bank holds half the experts of 32 layers; each step is one layer with 8
 * experts drawn from a skewed distribution (a few hot experts per layer,
 * as routing is), so the misses come at a realistic rate. The bank starts
 * full (every layer's share), so every miss asks for a victim. No device:
 * this is the policy's own code, measured natively.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "agent/policy/policy.h"
#include "policy.h"

#define PB_LAYERS 32
#define PB_TOP_K 8

struct pb_bank {
	uint32_t n_slots, n_experts, n_used;
	uint32_t *owner;  /* slot -> id or UINT32_MAX */
	uint32_t *where;  /* id -> slot or UINT32_MAX */
	uint64_t *needed; /* id -> step + 1 when the current step needs it */
	uint64_t stamp;
};

static bool pb_evictable(void *ctx, uint32_t slot)
{
	const struct pb_bank *b = ctx;

	return slot < b->n_slots && b->owner[slot] != UINT32_MAX &&
	       b->needed[b->owner[slot]] != b->stamp;
}

static double pb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* xorshift64: skewed expert ids, the square of a uniform favours low ids. */
static uint32_t pb_expert(uint64_t *s, uint32_t n)
{
	double u;

	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	u = (double)(*s >> 11) / 9007199254740992.0;
	return (uint32_t)(u * u * n);
}

/* Runs accesses through policy name with n_slots; *ns_per_access and the hit rate. */
static int pb_run(const char *name, uint32_t n_slots, uint64_t accesses, double *ns,
		  double *hit_rate)
{
	struct pb_bank b = {.n_slots = n_slots};
	struct moe_policy_config cfg;
	struct moe_policy *p = NULL;
	uint64_t done = 0, hits = 0, seed = 0x2545f4914f6cdd1dULL;
	uint32_t n_ids;
	double t0;
	int err;

	b.n_experts = (2 * n_slots + PB_LAYERS - 1) / PB_LAYERS;
	if (b.n_experts < 2 * PB_TOP_K)
		b.n_experts = 2 * PB_TOP_K;
	n_ids = PB_LAYERS * b.n_experts;
	cfg = (struct moe_policy_config){
	    .n_layers = PB_LAYERS, .n_local = b.n_experts, .n_slots = n_slots};
	b.owner = malloc(sizeof(*b.owner) * n_slots);
	b.where = malloc(sizeof(*b.where) * n_ids);
	b.needed = calloc(n_ids, sizeof(*b.needed));
	err = (!b.owner || !b.where || !b.needed) ? -ENOMEM : moe_policy_create(name, &cfg, &p);
	if (err)
		goto out;
	memset(b.owner, 0xff, sizeof(*b.owner) * n_slots);
	memset(b.where, 0xff, sizeof(*b.where) * n_ids);
	/* A full bank from the start, every layer's share, so every miss asks for a victim. */
	for (uint32_t slot = 0; slot < n_slots; slot++) {
		uint32_t layer = slot % PB_LAYERS, e = slot / PB_LAYERS;
		uint32_t id = layer * b.n_experts + e;

		b.owner[slot] = id;
		b.where[id] = slot;
		moe_policy_inserted(p, slot, layer, e, false);
	}
	b.n_used = n_slots;
	t0 = pb_now_ns();
	for (uint64_t step = 0; done < accesses; step++) {
		uint32_t layer = step % PB_LAYERS, sel[PB_TOP_K], n = 0;

		b.stamp = step + 1;
		while (n < PB_TOP_K) {
			uint32_t e = pb_expert(&seed, b.n_experts), id = layer * b.n_experts + e;

			if (b.needed[id] == b.stamp)
				continue;
			b.needed[id] = b.stamp;
			sel[n++] = e;
		}
		for (uint32_t j = 0; j < n; j++) {
			uint32_t id = layer * b.n_experts + sel[j];

			hits += b.where[id] != UINT32_MAX;
			moe_policy_access(p, layer, sel[j], 1, step);
		}
		for (uint32_t j = 0; j < n; j++) {
			uint32_t id = layer * b.n_experts + sel[j], slot;

			if (b.where[id] != UINT32_MAX)
				continue;
			if (b.n_used < n_slots) {
				slot = b.n_used++;
			} else {
				int v =
				    moe_policy_victim(p, layer, sel[j], false, pb_evictable, &b);

				if (v < 0) {
					err = v;
					goto out;
				}
				slot = (uint32_t)v;
				moe_policy_removed(p, slot);
				b.where[b.owner[slot]] = UINT32_MAX;
			}
			b.owner[slot] = id;
			b.where[id] = slot;
			moe_policy_inserted(p, slot, layer, sel[j], false);
		}
		done += n;
	}
	*ns = (pb_now_ns() - t0) / (double)done;
	*hit_rate = (double)hits / (double)done;
out:
	moe_policy_destroy(p);
	free(b.owner);
	free(b.where);
	free(b.needed);
	return err;
}

int bench_policy_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"policy-name", required_argument, NULL, 'p'},
	    {"accesses", required_argument, NULL, 'a'},
	    {"out", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	static const uint32_t sizes[] = {1000, 10000, 100000};
	const char *name = MOE_POLICY_DEFAULT, *out = NULL;
	unsigned long accesses = 20000;
	json_object *root, *rows;
	int opt, ret = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			name = optarg;
			break;
		case 'a':
			accesses = strtoul(optarg, NULL, 10);
			break;
		case 'o':
			out = optarg;
			break;
		default:
			fprintf(stderr, "usage: moecache-bench --policy [--policy-name NAME] "
					"[--accesses N] [--out FILE]\n");
			return 2;
		}
	}
	if (!accesses || optind != argc) {
		fprintf(stderr, "moecache-bench --policy: --accesses must be a positive count\n");
		return 2;
	}
	root = json_object_new_object();
	rows = json_object_new_array();
	json_object_object_add(root, "policy", json_object_new_string(name));
	printf("%-8s %10s %12s %12s %8s %10s %10s\n", "slots", "experts", "lru ns", "policy ns",
	       "ratio", "lru hit", "hit");
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double lru_ns, pol_ns, lru_hit, pol_hit;
		json_object *row;

		ret = pb_run("lru", sizes[i], accesses, &lru_ns, &lru_hit);
		if (!ret)
			ret = pb_run(name, sizes[i], accesses, &pol_ns, &pol_hit);
		if (ret) {
			fprintf(stderr, "moecache-bench --policy: %s with %u slots: %s\n", name,
				sizes[i], strerror(-ret));
			break;
		}
		printf("%-8u %10u %12.1f %12.1f %8.2f %10.3f %10.3f\n", sizes[i],
		       PB_LAYERS * ((2 * sizes[i] + PB_LAYERS - 1) / PB_LAYERS), lru_ns, pol_ns,
		       pol_ns / lru_ns, lru_hit, pol_hit);
		row = json_object_new_object();
		json_object_object_add(row, "slots", json_object_new_int64(sizes[i]));
		json_object_object_add(row, "lru_ns_per_access", json_object_new_double(lru_ns));
		json_object_object_add(row, "policy_ns_per_access", json_object_new_double(pol_ns));
		json_object_object_add(row, "ratio", json_object_new_double(pol_ns / lru_ns));
		json_object_object_add(row, "lru_hit_rate", json_object_new_double(lru_hit));
		json_object_object_add(row, "policy_hit_rate", json_object_new_double(pol_hit));
		json_object_array_add(rows, row);
	}
	json_object_object_add(root, "rows", rows);
	if (!ret && out && json_object_to_file_ext(out, root, JSON_C_TO_STRING_PRETTY)) {
		fprintf(stderr, "moecache-bench: %s: %s\n", out, json_util_get_last_err());
		ret = -EIO;
	}
	json_object_put(root);
	return ret == -ENOENT ? 2 : ret ? 1 : 0;
}
