// SPDX-License-Identifier: MIT
/*
 * The VM suites' harness (tests/harness/tap.h) on fake tests: each outcome
 * and its TAP line, the summary line make check parses, the naming rules,
 * the filter and --list, and the hooks.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tap.h"

static void passes(void)
{
	printf("a line on stdout\n");
}

static void fails(void)
{
	fprintf(stderr, "a diagnostic before the failure\n");
	TAP_FAIL("expected %d, got %d", 1, 2);
}

static void skips(void)
{
	tap_skip("no such device here");
}

static void crashes(void)
{
	raise(SIGSEGV);
}

static void hangs(void)
{
	for (;;)
		pause();
}

static void exits_nonzero(void)
{
	exit(3);
}

static void run_entry(void *arg, const struct tap_test *t, unsigned int number)
{
	void (*fn)(void) = (void (*)(void))(uintptr_t)t->data;

	fn();
}

#define T(name, fn, timeout)                                                                       \
	{                                                                                          \
		name, "one line about " name, timeout, (const void *)(uintptr_t)(fn)               \
	}

struct tap_run {
	int status; /* tap_main's return */
	char out[16384];
};

/* tap_main in a child, its stdout collected. */
static void run_tap(const struct tap_suite *s, const struct tap_test *tests, size_t n,
		    const char *const *args, struct tap_run *r)
{
	char *argv[8] = {"tap-test"};
	int argc = 1, fds[2], status;
	size_t len = 0;
	ssize_t got;
	pid_t pid;

	while (args && args[argc - 1])
		argv[argc] = (char *)args[argc - 1], argc++;
	cr_assert_eq(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		_exit(tap_main(s, tests, n, argc, argv));
	}
	close(fds[1]);
	while ((got = read(fds[0], r->out + len, sizeof(r->out) - 1 - len)) > 0)
		len += (size_t)got;
	r->out[len] = 0;
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "tap_main's process died: %s", r->out);
	r->status = WEXITSTATUS(status);
}

#define HAS(r, text) cr_expect(strstr((r)->out, (text)), "no \"%s\" in:\n%s", (text), (r)->out)
#define HAS_NOT(r, text) cr_expect(!strstr((r)->out, (text)), "\"%s\" in:\n%s", (text), (r)->out)

static const struct tap_suite suite = {
    .word = "fake", .about = "Fake tests.", .default_timeout_s = 10, .run = run_entry};

Test(tap, basic_each_outcome_has_its_line,
     .description = "pass, failure with its reason, skip, crash, timeout and exit status each give "
		    "their TAP line, and the summary counts passes and failures",
     .timeout = 60)
{
	static const struct tap_test tests[] = {
	    T("basic_passes", passes, 0),  T("basic_fails", fails, 0),
	    T("basic_skips", skips, 0),	   T("basic_crashes", crashes, 0),
	    T("lifetime_hangs", hangs, 1), T("basic_exits_nonzero", exits_nonzero, 0),
	};
	struct tap_run r;

	run_tap(&suite, tests, 6, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "1..6\n");
	HAS(&r, "ok 1 - basic_passes # one line about basic_passes\n");
	HAS(&r, "not ok 2 - basic_fails: test_tap.c:");
	HAS(&r, ": expected 1, got 2\n");
	HAS(&r, "# a diagnostic before the failure\n");
	HAS(&r, "ok 3 - basic_skips # SKIP no such device here\n");
	HAS(&r, "not ok 4 - basic_crashes: killed by signal SIGSEGV\n");
	HAS(&r, "not ok 5 - lifetime_hangs: timed out after 1 s\n");
	HAS(&r, "not ok 6 - basic_exits_nonzero: exit status 3\n");
	HAS(&r, "\nfake: 1 passed, 4 failed, 1 skipped\n");
	/* What a passing test prints is not TAP output. */
	HAS_NOT(&r, "a line on stdout");
}

Test(tap, basic_filter_and_list,
     .description = "arguments select tests by substring; --list "
		    "prints name and description without running")
{
	static const struct tap_test tests[] = {
	    T("basic_passes", passes, 0),
	    T("basic_fails", fails, 0),
	    T("bad_input_passes", passes, 0),
	};
	static const char *const only_passes[] = {"passes", NULL};
	static const char *const list[] = {"--list", "fails", NULL};
	struct tap_run r;

	run_tap(&suite, tests, 3, only_passes, &r);
	cr_assert_eq(r.status, 0, "%s", r.out);
	HAS(&r, "1..2\n");
	HAS(&r, "ok 1 - basic_passes");
	HAS(&r, "ok 2 - bad_input_passes");
	HAS_NOT(&r, "basic_fails");
	HAS(&r, "fake: 2 passed, 0 failed, 0 skipped\n");

	run_tap(&suite, tests, 3, list, &r);
	cr_assert_eq(r.status, 0, "%s", r.out);
	cr_expect_str_eq(r.out, "basic_fails - one line about basic_fails\n");
}

Test(tap, bad_input_names_break_the_rules,
     .description = "a name without a category, one registered twice or an empty description "
		    "stops the suite before any test runs, counted as a failure")
{
	static const struct tap_test no_category[] = {T("gup_passes", passes, 0)};
	static const struct tap_test twice[] = {T("basic_passes", passes, 0),
						T("basic_passes", passes, 0)};
	static const struct tap_test no_description[] = {
	    {"basic_passes", "", 0, (const void *)(uintptr_t)passes}};
	struct tap_run r;

	run_tap(&suite, no_category, 1, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "# gup_passes: the name has no category prefix\n");
	HAS(&r, "Bail out!");
	HAS(&r, "fake: 0 passed, 1 failed, 0 skipped\n");
	HAS_NOT(&r, "ok 1");

	run_tap(&suite, twice, 2, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "# basic_passes: registered twice\n");

	run_tap(&suite, no_description, 1, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "# basic_passes: no one-line description\n");
}

static void after_leaks(void *arg, const struct tap_test *t, unsigned int number,
			struct tap_outcome *o)
{
	tap_outcome_fail(o, "left pool %u behind", number);
	tap_outcome_fail(o, "a second reason is not kept");
}

static int before_refuses(void *arg, const struct tap_test *t, unsigned int number, char *why,
			  size_t len)
{
	snprintf(why, len, "no folder for %s", t->name);
	return -1;
}

static int setup_fails(void *arg, char *why, size_t len)
{
	snprintf(why, len, "no traces");
	return -1;
}

Test(tap, basic_hooks_fail_a_test,
     .description = "after() turns a pass into a failure with "
		    "the first reason; before() and setup() "
		    "failing are failures")
{
	static const struct tap_test tests[] = {T("basic_passes", passes, 0)};
	struct tap_suite s = suite;
	struct tap_run r;

	s.after = after_leaks;
	run_tap(&s, tests, 1, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "not ok 1 - basic_passes: left pool 1 behind\n");

	s = suite;
	s.before = before_refuses;
	run_tap(&s, tests, 1, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "not ok 1 - basic_passes: no folder for basic_passes\n");

	s = suite;
	s.setup = setup_fails;
	run_tap(&s, tests, 1, NULL, &r);
	cr_assert_eq(r.status, 1, "%s", r.out);
	HAS(&r, "Bail out! setup: no traces\n");
	HAS(&r, "fake: 0 passed, 1 failed, 0 skipped\n");
}
