// SPDX-License-Identifier: MIT
/*
 * moecachectl: administration of /dev/moecache pools. Exit status 0 on
 * success, 1 on failure, 2 on a usage error. tools/moecachectl/moecachectl.8
 * is the manual.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <moecache.h>

#include "ctl.h"

static const struct ctl_command ctl_commands[] = {
    {"pool", ctl_cmd_pool, "create, destroy, list or describe pools"},
    {"load", ctl_cmd_load, "load a pool's experts from a checkpoint"},
    {"stats", ctl_cmd_stats, "show a pool's counters, whole and per layer"},
    {"top", ctl_cmd_top, "a live per-layer view of a pool"},
    {"events", ctl_cmd_events, "print the driver's events as they happen"},
    {"flush", ctl_cmd_flush, "unmap every unpinned resident expert of a pool"},
    {"bank", ctl_cmd_bank, "show a pool's bank descriptor"},
    {"profile", ctl_cmd_profile, "save or install a pool's popularity profile"},
    {"policy", ctl_cmd_policy, "choose a pool's replacement policy"},
};

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s COMMAND [ARGS...]\n\ncommands:\n", CTL_PROG);
	for (i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
		fprintf(out, "  %-9s %s\n", ctl_commands[i].name, ctl_commands[i].summary);
	fprintf(out,
		"\n'%s COMMAND --help' describes a command. Exit status: 0 success,\n"
		"1 failure, 2 usage error.\n",
		CTL_PROG);
}

int main(int argc, char **argv)
{
	struct ctl ctl = {
	    .rundir = getenv("MOECACHE_RUNDIR"),
	    .device = getenv("MOECACHE_DEVICE"),
	    .stdout_tty = isatty(STDOUT_FILENO),
	    .stderr_tty = isatty(STDERR_FILENO),
	};
	size_t i;

	opterr = 0; /* the commands name a bad option themselves */
	if (!ctl.rundir || !*ctl.rundir)
		ctl.rundir = CTL_RUNDIR_DEFAULT;
	if (!ctl.device || !*ctl.device)
		ctl.device = MOECACHE_DEVICE;
	if (argc < 2) {
		usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return CTL_EXIT_OK;
	}
	for (i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
		if (!strcmp(argv[1], ctl_commands[i].name))
			return ctl_commands[i].run(&ctl, argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n", CTL_PROG, argv[1]);
	usage(stderr);
	return CTL_EXIT_USAGE;
}
