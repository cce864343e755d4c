// SPDX-License-Identifier: MIT
/* moecachectl stats and top: the driver's counters, over generic netlink. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ctl.h"

static const char stats_usage[] =
    "usage: moecachectl stats NAME [--layer L] [--json]\n"
    "\n"
    "The pool's counters since it was created: hits, misses, prefetch hits,\n"
    "prefetches, evictions, commits, aborts, bytes copied, waits and their\n"
    "time (with a histogram), for the whole pool and for every layer, or only\n"
    "layer L; then the pool's current state. A pool of several banks adds one\n"
    "row per bank: its tier, backend and device, its slots, and the hits served\n"
    "from it (hit% of all the pool's accesses). Needs read permission on the pool.\n";

static const char top_usage[] =
    "usage: moecachectl top NAME [--interval SECONDS] [--iterations N]\n"
    "\n"
    "A per-layer view of the pool's activity, refreshed every SECONDS (1 by\n"
    "default): rates over the last interval. On a terminal the view is redrawn\n"
    "in place; otherwise the views are printed one after the other. It runs\n"
    "until interrupted, or for N views with --iterations. A pool of several banks\n"
    "adds one row per bank (tier): its hits/s, hit% of the pool's accesses,\n"
    "commits/s and resident experts.\n";

enum { OPT_LAYER = 256, OPT_JSON, OPT_INTERVAL, OPT_ITERATIONS, OPT_HELP };

/* ---- JSON ---- */

static void add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_int64((int64_t)v));
}

static struct json_object *stats_json(const struct moecache_stats *st, bool with_state)
{
	struct json_object *o = json_object_new_object(), *hist = json_object_new_array();
	int i;

	if (st->layer != MOECACHE_NONE)
		add_u64(o, "layer", st->layer);
	add_u64(o, "hits", st->hits);
	add_u64(o, "misses", st->misses);
	add_u64(o, "prefetch_hits", st->prefetch_hits);
	add_u64(o, "prefetches", st->prefetches);
	add_u64(o, "evictions", st->evictions);
	add_u64(o, "commits", st->commits);
	add_u64(o, "aborts", st->aborts);
	add_u64(o, "bytes_copied", st->bytes_copied);
	add_u64(o, "waits", st->waits);
	add_u64(o, "wait_ns", st->wait_ns);
	for (i = 0; i < MOECACHE_WAIT_BUCKETS; i++)
		json_object_array_add(hist, json_object_new_int64((int64_t)st->wait_hist[i]));
	json_object_object_add(o, "wait_hist_log2_us", hist);
	if (with_state) {
		struct json_object *s = json_object_new_object();

		add_u64(s, "resident", st->resident);
		add_u64(s, "filling", st->filling);
		add_u64(s, "pinned_slots", st->pinned_slots);
		add_u64(s, "pins", st->pins);
		add_u64(s, "queued", st->queued);
		add_u64(s, "inflight", st->inflight);
		add_u64(s, "clients", st->n_clients);
		add_u64(s, "agent_pid", st->agent_pid);
		json_object_object_add(o, "state", s);
	}
	return o;
}

/* ---- text ---- */

static void stats_header(void)
{
	printf("%-9s %12s %12s %6s %10s %10s %10s %10s %7s %10s %9s %9s\n", "", "hits", "misses",
	       "hit%", "pf-hits", "prefetch", "evictions", "commits", "aborts", "copied", "waits",
	       "avg-wait");
}

static void format_ns(char *buf, size_t len, double ns)
{
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.1f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
}

static void stats_row(const struct moecache_stats *st)
{
	uint64_t acc = st->hits + st->misses;
	char label[24], copied[32], wait[32], ratio[16];

	if (st->layer == MOECACHE_NONE)
		snprintf(label, sizeof(label), "total");
	else
		snprintf(label, sizeof(label), "layer %u", st->layer);
	ctl_format_bytes(copied, sizeof(copied), st->bytes_copied);
	if (st->waits)
		format_ns(wait, sizeof(wait), (double)st->wait_ns / (double)st->waits);
	else
		snprintf(wait, sizeof(wait), "-");
	if (acc)
		snprintf(ratio, sizeof(ratio), "%.1f", 100.0 * (double)st->hits / (double)acc);
	else
		snprintf(ratio, sizeof(ratio), "-");
	printf("%-9s %12llu %12llu %6s %10llu %10llu %10llu %10llu %7llu %10s %9llu %9s\n", label,
	       st->hits, st->misses, ratio, st->prefetch_hits, st->prefetches, st->evictions,
	       st->commits, st->aborts, copied, st->waits, wait);
}

static void stats_hist(const struct moecache_stats *st)
{
	int i;

	if (!st->waits)
		return;
	printf("\nwait time%s:\n", st->layer == MOECACHE_NONE ? "" : " of the layer");
	for (i = 0; i < MOECACHE_WAIT_BUCKETS; i++) {
		if (!st->wait_hist[i])
			continue;
		if (i == MOECACHE_WAIT_BUCKETS - 1)
			printf("  >= %6llu us %12llu\n", 1ull << (i - 1), st->wait_hist[i]);
		else
			printf("  <  %6llu us %12llu\n", 1ull << i, st->wait_hist[i]);
	}
}

static void stats_state(const struct moecache_stats *st)
{
	printf("\nstate: %u resident, %u filling, %u pinned slots (%u pins), %u queued, "
	       "%u in flight, %u clients, ",
	       st->resident, st->filling, st->pinned_slots, st->pins, st->queued, st->inflight,
	       st->n_clients);
	if (st->agent_pid)
		printf("agent pid %u\n", st->agent_pid);
	else
		printf("no agent\n");
}

/* ---- banks ---- */

/* A pool's banks, from its STATS reply; n 0 for a pool of one bank. */
struct bank_stats {
	struct ctl_bank bank[CTL_MAX_BANKS];
	uint32_t n;
};

static double bank_hit_rate(const struct moecache_stats *bank, const struct moecache_stats *pool)
{
	uint64_t acc = pool->hits + pool->misses;

	return acc ? (double)bank->hits / (double)acc : 0.0;
}

static struct json_object *banks_json(const struct bank_stats *b, const struct moecache_stats *pool)
{
	struct json_object *a = json_object_new_array();

	for (uint32_t i = 0; i < b->n; i++) {
		const struct moecache_map_bank *l = &b->bank[i].layout;
		const struct moecache_stats *st = &b->bank[i].st;
		struct json_object *o = json_object_new_object();

		add_u64(o, "bank", i);
		add_u64(o, "tier", l->tier);
		json_object_object_add(o, "backend",
				       json_object_new_string(ctl_backend_name(l->backend)));
		add_u64(o, "device", l->device);
		add_u64(o, "slot_begin", l->slot_begin);
		add_u64(o, "n_slots", l->n_slots);
		add_u64(o, "hits", st->hits);
		json_object_object_add(o, "hit_rate",
				       json_object_new_double(bank_hit_rate(st, pool)));
		add_u64(o, "prefetch_hits", st->prefetch_hits);
		add_u64(o, "evictions", st->evictions);
		add_u64(o, "commits", st->commits);
		add_u64(o, "resident", st->resident);
		add_u64(o, "filling", st->filling);
		add_u64(o, "pinned_slots", st->pinned_slots);
		add_u64(o, "pins", st->pins);
		json_object_array_add(a, o);
	}
	return a;
}

static void banks_text(const struct bank_stats *b, const struct moecache_stats *pool)
{
	if (!b->n)
		return;
	printf("\n%-5s %4s %-7s %6s %7s %9s %12s %6s %10s %10s\n", "bank", "tier", "backend",
	       "device", "slots", "resident", "hits", "hit%", "evictions", "commits");
	for (uint32_t i = 0; i < b->n; i++) {
		const struct moecache_map_bank *l = &b->bank[i].layout;
		const struct moecache_stats *st = &b->bank[i].st;

		printf("%-5u %4u %-7s %6u %7u %9u %12llu %6.1f %10llu %10llu\n", i, l->tier,
		       ctl_backend_name(l->backend), l->device, l->n_slots, st->resident,
		       (unsigned long long)st->hits, 100.0 * bank_hit_rate(st, pool),
		       (unsigned long long)st->evictions, (unsigned long long)st->commits);
	}
}

/* ---- stats ---- */

struct stats_all {
	struct moecache_stats *v; /* [0]: the pool, then each layer */
	uint32_t n;
	uint32_t cap;
};

static int collect(uint32_t layer, const struct moecache_stats *st, void *arg)
{
	struct stats_all *all = arg;

	if (all->n == all->cap) {
		uint32_t cap = all->cap ? all->cap * 2 : 64;
		struct moecache_stats *v = realloc(all->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		all->v = v;
		all->cap = cap;
	}
	all->v[all->n++] = *st;
	return 0;
}

/*
 * The pool's stats then its layers'; the pool's must come first. banks
 * (may be NULL) receives the pool's banks when it has several.
 */
static int fetch_all(struct ctl_nl *nl, const char *pool, struct stats_all *all,
		     struct bank_stats *banks)
{
	int ret;

	all->n = 0;
	if (!banks)
		ret = ctl_nl_stats_dump(nl, pool, collect, all);
	else
		ret = ctl_nl_stats_dump_banks(nl, pool, collect, all, banks->bank, CTL_MAX_BANKS,
					      &banks->n);
	if (!ret && banks && banks->n == 1)
		banks->n = 0; /* one bank: the pool's rows say it all */
	if (!ret && (!all->n || all->v[0].layer != MOECACHE_NONE))
		ret = -EPROTO;
	return ret;
}

int ctl_cmd_stats(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"layer", required_argument, NULL, OPT_LAYER},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	struct stats_all all = {0};
	struct bank_stats banks = {0};
	uint32_t layer = MOECACHE_NONE, i;
	struct moecache_stats st;
	bool json = false;
	struct ctl_nl nl;
	const char *pool;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_LAYER:
			if (ctl_parse_u32(optarg, &layer) || layer == MOECACHE_NONE)
				return ctl_usage_fail("stats", "bad --layer '%s'", optarg);
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_HELP:
			fputs(stats_usage, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_bad_option("stats", argv);
		}
	}
	if (argc - optind != 1)
		return ctl_usage_fail("stats", "takes one pool name");
	pool = argv[optind];
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;

	if (layer != MOECACHE_NONE) {
		ret = ctl_nl_stats(&nl, pool, layer, &st);
		if (ret) {
			ret = ctl_pool_fail(&nl, pool, ret);
		} else if (json) {
			struct json_object *o = stats_json(&st, true);

			json_object_object_add(o, "pool", json_object_new_string(pool));
			puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
			json_object_put(o);
		} else {
			printf("pool '%s'\n", pool);
			stats_header();
			stats_row(&st);
			stats_hist(&st);
			stats_state(&st);
		}
		ctl_nl_close(&nl);
		return ret;
	}

	ret = fetch_all(&nl, pool, &all, &banks);
	if (ret) {
		ret = ctl_pool_fail(&nl, pool, ret);
	} else if (json) {
		struct json_object *o = json_object_new_object(), *layers = json_object_new_array();

		json_object_object_add(o, "pool", json_object_new_string(pool));
		json_object_object_add(o, "total", stats_json(&all.v[0], true));
		if (banks.n)
			json_object_object_add(o, "banks", banks_json(&banks, &all.v[0]));
		for (i = 1; i < all.n; i++)
			json_object_array_add(layers, stats_json(&all.v[i], false));
		json_object_object_add(o, "layers", layers);
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
		json_object_put(o);
	} else {
		printf("pool '%s'\n", pool);
		stats_header();
		for (i = 0; i < all.n; i++)
			stats_row(&all.v[i]);
		stats_hist(&all.v[0]);
		stats_state(&all.v[0]);
		banks_text(&banks, &all.v[0]);
	}
	free(all.v);
	ctl_nl_close(&nl);
	return ret;
}

/* ---- top ---- */

static double rate(uint64_t now, uint64_t before, double seconds)
{
	return now >= before ? (double)(now - before) / seconds : 0;
}

static void top_row(const struct moecache_stats *now, const struct moecache_stats *before,
		    double seconds)
{
	uint64_t hits = now->hits - before->hits, misses = now->misses - before->misses;
	uint64_t waits = now->waits - before->waits;
	char label[24], copied[32], wait[32], ratio[16];

	if (now->layer == MOECACHE_NONE)
		snprintf(label, sizeof(label), "total");
	else
		snprintf(label, sizeof(label), "%u", now->layer);
	ctl_format_bytes(copied, sizeof(copied),
			 (uint64_t)rate(now->bytes_copied, before->bytes_copied, seconds));
	if (hits + misses)
		snprintf(ratio, sizeof(ratio), "%.1f",
			 100.0 * (double)hits / (double)(hits + misses));
	else
		snprintf(ratio, sizeof(ratio), "-");
	if (waits)
		format_ns(wait, sizeof(wait),
			  (double)(now->wait_ns - before->wait_ns) / (double)waits);
	else
		snprintf(wait, sizeof(wait), "-");
	printf("%-7s %10.0f %10.0f %6s %10.0f %10.0f %10.0f %10s/s %9s\n", label,
	       rate(now->hits, before->hits, seconds), rate(now->misses, before->misses, seconds),
	       ratio, rate(now->prefetch_hits, before->prefetch_hits, seconds),
	       rate(now->prefetches, before->prefetches, seconds),
	       rate(now->evictions, before->evictions, seconds), copied, wait);
}

static void top_banks(const struct bank_stats *now, const struct bank_stats *before,
		      const struct stats_all *pool_now, const struct stats_all *pool_before,
		      double seconds)
{
	uint64_t acc = (pool_now->v[0].hits - pool_before->v[0].hits) +
		       (pool_now->v[0].misses - pool_before->v[0].misses);

	if (!now->n || now->n != before->n)
		return;
	printf("\n%-5s %4s %-7s %6s %10s %6s %10s %9s\n", "bank", "tier", "backend", "device",
	       "hits/s", "hit%", "commit/s", "resident");
	for (uint32_t i = 0; i < now->n; i++) {
		const struct moecache_stats *a = &now->bank[i].st, *b = &before->bank[i].st;
		char ratio[16];

		if (acc)
			snprintf(ratio, sizeof(ratio), "%.1f",
				 100.0 * (double)(a->hits - b->hits) / (double)acc);
		else
			snprintf(ratio, sizeof(ratio), "-");
		printf("%-5u %4u %-7s %6u %10.0f %6s %10.0f %9u\n", i, now->bank[i].layout.tier,
		       ctl_backend_name(now->bank[i].layout.backend), now->bank[i].layout.device,
		       rate(a->hits, b->hits, seconds), ratio,
		       rate(a->commits, b->commits, seconds), a->resident);
	}
}

static void top_screen(const char *pool, const struct stats_all *now,
		       const struct stats_all *before, double seconds, bool tty)
{
	const struct moecache_stats *t = &now->v[0];
	char stamp[32];
	time_t clock = time(NULL);
	uint32_t i;

	strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&clock));
	if (tty)
		fputs("\033[H\033[2J", stdout); /* home, clear: redraw in place */
	printf("pool '%s'  %s  every %.1f s\n", pool, stamp, seconds);
	printf("resident %u  filling %u  pinned %u (%u pins)  queued %u  in flight %u  clients %u"
	       "  agent %s%u\n\n",
	       t->resident, t->filling, t->pinned_slots, t->pins, t->queued, t->inflight,
	       t->n_clients, t->agent_pid ? "pid " : "", t->agent_pid);
	printf("%-7s %10s %10s %6s %10s %10s %10s %12s %9s\n", "layer", "hits/s", "misses/s",
	       "hit%", "pf-hits/s", "prefetch/s", "evict/s", "copied", "avg-wait");
	for (i = 0; i < now->n && i < before->n; i++)
		top_row(&now->v[i], &before->v[i], seconds);
}

int ctl_cmd_top(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"interval", required_argument, NULL, OPT_INTERVAL},
	    {"iterations", required_argument, NULL, OPT_ITERATIONS},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	struct stats_all a = {0}, b = {0}, tmp;
	struct bank_stats *ba, *bb, *btmp;
	uint32_t iterations = 0, i;
	double interval = 1.0;
	struct timespec ts;
	struct ctl_nl nl;
	const char *pool;
	char *end;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_INTERVAL:
			interval = strtod(optarg, &end);
			if (*end || !isfinite(interval) || interval < 0.01 || interval > 86400)
				return ctl_usage_fail("top", "bad --interval '%s' (seconds)",
						      optarg);
			break;
		case OPT_ITERATIONS:
			if (ctl_parse_u32(optarg, &iterations) || !iterations)
				return ctl_usage_fail("top", "bad --iterations '%s'", optarg);
			break;
		case OPT_HELP:
			fputs(top_usage, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_bad_option("top", argv);
		}
	}
	if (argc - optind != 1)
		return ctl_usage_fail("top", "takes one pool name");
	pool = argv[optind];
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ba = calloc(1, sizeof(*ba));
	bb = calloc(1, sizeof(*bb));
	ret = ba && bb ? fetch_all(&nl, pool, &a, ba) : -ENOMEM;
	for (i = 0; !ret && (!iterations || i < iterations); i++) {
		ts.tv_sec = (time_t)interval;
		ts.tv_nsec = (long)((interval - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		ret = fetch_all(&nl, pool, &b, bb);
		if (ret)
			break;
		top_screen(pool, &b, &a, interval, ctl->stdout_tty);
		top_banks(bb, ba, &b, &a, interval);
		if (!ctl->stdout_tty)
			putchar('\n');
		fflush(stdout);
		tmp = a;
		a = b;
		b = tmp;
		btmp = ba;
		ba = bb;
		bb = btmp;
	}
	free(ba);
	free(bb);
	if (ret)
		ret = ctl_pool_fail(&nl, pool, ret);
	free(a.v);
	free(b.v);
	ctl_nl_close(&nl);
	return ret;
}
