// SPDX-License-Identifier: MIT
/* moecachectl events: the "events" multicast group, one line per event. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ctl.h"

static const char events_usage[] =
    "usage: moecachectl events [--pool NAME] [--count N] [--timeout SECONDS] [--json]\n"
    "\n"
    "Prints the driver's events as they happen, one per line: pools created and\n"
    "destroyed, agents attached and lost, sampled evictions and miss storms.\n"
    "--pool keeps one pool's events; --count stops after N events; --timeout\n"
    "fails (exit 1) when N events (or, without --count, any) do not come in\n"
    "time. --json prints one JSON object per line. Only the events of the pools\n"
    "you may read arrive; pids are in your pid namespace.\n";

enum { OPT_POOL = 256, OPT_COUNT, OPT_TIMEOUT, OPT_JSON, OPT_HELP };

struct events_ctx {
	const char *pool;
	bool json;
	uint32_t count; /* 0: no limit */
	uint32_t seen;
};

static void print_event(const struct ctl_event *ev, bool json)
{
	struct timespec now;
	struct tm tm;
	char stamp[64];

	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(
		    o, "time", json_object_new_double((double)now.tv_sec + now.tv_nsec / 1e9));
		json_object_object_add(o, "event",
				       json_object_new_string(ctl_nl_event_name(ev->type)));
		json_object_object_add(o, "pool", json_object_new_string(ev->pool));
		if (ev->has_pid)
			json_object_object_add(o, "agent_pid", json_object_new_int64(ev->pid));
		if (ev->has_layer)
			json_object_object_add(o, "layer", json_object_new_int64(ev->layer));
		if (ev->has_expert)
			json_object_object_add(o, "expert", json_object_new_int64(ev->expert));
		if (ev->has_misses)
			json_object_object_add(o, "misses", json_object_new_int64(ev->misses));
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
	} else {
		printf("%s.%03ld %s pool=%s", stamp, now.tv_nsec / 1000000,
		       ctl_nl_event_name(ev->type), ev->pool);
		if (ev->has_pid)
			printf(" agent_pid=%u", ev->pid);
		if (ev->has_layer)
			printf(" layer=%u", ev->layer);
		if (ev->has_expert)
			printf(" expert=%u", ev->expert);
		if (ev->has_misses)
			printf(" misses=%u", ev->misses);
		putchar('\n');
	}
	/* a reader at the other end of a pipe wants each event as it comes */
	fflush(stdout);
}

static int on_event(const struct ctl_event *ev, void *arg)
{
	struct events_ctx *ctx = arg;

	if (ctx->pool && strcmp(ctx->pool, ev->pool))
		return 0;
	if (ctx->count && ctx->seen >= ctx->count)
		return 0;
	print_event(ev, ctx->json);
	ctx->seen++;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ctl_cmd_events(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pool", required_argument, NULL, OPT_POOL},
	    {"count", required_argument, NULL, OPT_COUNT},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, OPT_HELP},
	    {0},
	};
	struct events_ctx ctx = {0};
	int64_t deadline = -1;
	double timeout;
	struct ctl_nl nl;
	char *end;
	int opt, ret;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_POOL:
			ctx.pool = optarg;
			break;
		case OPT_COUNT:
			if (ctl_parse_u32(optarg, &ctx.count) || !ctx.count)
				return ctl_usage_fail("events", "bad --count '%s'", optarg);
			break;
		case OPT_TIMEOUT:
			timeout = strtod(optarg, &end);
			if (*end || !isfinite(timeout) || timeout <= 0 || timeout > 1e6)
				return ctl_usage_fail("events", "bad --timeout '%s' (seconds)",
						      optarg);
			deadline = now_ms() + (int64_t)(timeout * 1000);
			break;
		case OPT_JSON:
			ctx.json = true;
			break;
		case OPT_HELP:
			fputs(events_usage, stdout);
			return CTL_EXIT_OK;
		default:
			return ctl_bad_option("events", argv);
		}
	}
	if (optind != argc)
		return ctl_usage_fail("events", "takes no argument");
	if (ctl_nl_connect(&nl))
		return CTL_EXIT_FAIL;
	ret = ctl_nl_events_join(&nl);
	if (ret) {
		ctl_nl_close(&nl);
		return ctl_fail("events: cannot join the '%s' group: %s", "events", strerror(-ret));
	}
	/* A line on stderr says when events can no longer be missed (for scripts). */
	if (!ctl->stdout_tty)
		fprintf(stderr, "%s: listening\n", CTL_PROG);

	while (!ctx.count || ctx.seen < ctx.count) {
		int wait = -1;

		if (deadline >= 0) {
			int64_t left = deadline - now_ms();

			if (left <= 0) {
				ret = -ETIMEDOUT;
				break;
			}
			wait = (int)left;
		}
		ret = ctl_nl_event_wait(&nl, wait, on_event, &ctx);
		if (ret == -ENOMEM || ret == -ENOBUFS) {
			/* the socket overflowed: some events are gone, later ones come */
			fprintf(stderr, "%s: events: some events were lost\n", CTL_PROG);
			ret = 0;
		} else if (ret == -EINTR || ret == -EAGAIN) {
			ret = 0;
		} else if (ret) {
			break;
		}
	}
	ctl_nl_close(&nl);
	if (ret == -ETIMEDOUT && !ctx.count && ctx.seen)
		return CTL_EXIT_OK;
	if (ret == -ETIMEDOUT && ctx.count)
		return ctl_fail("events: %u of %u events before the timeout", ctx.seen, ctx.count);
	if (ret == -ETIMEDOUT)
		return ctl_fail("events: no event before the timeout");
	if (ret)
		return ctl_fail("events: %s", strerror(-ret));
	return CTL_EXIT_OK;
}
