/* SPDX-License-Identifier: MIT */
/*
 * The test harness of the VM suites (moecache-vmtest, moecache-ctltest,
 * moecache-agent-e2e): one runner, one naming, filter and output convention.
 *
 * Each test runs in its own forked process and process group, with stdout
 * and stderr captured and an alarm: a crash, a hang or a failed check fails
 * that test only. A test passes by returning, fails by calling tap_fail_at()
 * (or exiting non-zero) and is skipped by tap_skip() (exit status 77). What
 * it printed becomes the reason (its last line, where those two leave
 * theirs) and "# " diagnostics (the rest).
 *
 * Names: category_what, the category one of basic_, bad_input_, permission_,
 * lifetime_, leak_, concurrency_, perf_; a suite whose table breaks that (or
 * repeats a name, or lacks a description) fails before running anything.
 *
 * Command line of every suite: [--list] [SUBSTRING...]: the tests whose names
 * contain any SUBSTRING (all without one); --list prints "name - description"
 * lines instead of running them.
 *
 * Output (TAP): "1..N", then per test "ok N - name # description",
 * "ok N - name # SKIP reason" or "not ok N - name: reason" followed by "# "
 * lines, and last "WORD: P passed, F failed, S skipped" (tools/vm/lib.sh
 * parses it).
 * A passed perf_ test's output goes out too, as "# " lines: its figures.
 * The exit status is 0 only if nothing failed.
 */
#ifndef MOECACHE_TAP_H
#define MOECACHE_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of a test that cannot run here (TAP "# SKIP"). */
#define TAP_EXIT_SKIP 77

/* One test as the runner sees it; a suite keeps its own entry in data. */
struct tap_test {
	const char *name;
	const char *description;
	unsigned int timeout_s; /* 0: the suite's default */
	const void *data;
};

enum tap_kind { TAP_PASS, TAP_FAIL, TAP_SKIP };

#define TAP_OUTPUT_MAX 8192

/* What became of one test; a suite's after() hook may turn a pass into a failure. */
struct tap_outcome {
	enum tap_kind kind;
	char reason[512];
	char output[TAP_OUTPUT_MAX]; /* the test's stdout and stderr */
	size_t output_len;
};

struct tap_suite {
	/* The summary line's first word: "WORD: P passed, F failed, S skipped". */
	const char *word;
	/* One line for --help: what the suite tests. */
	const char *about;
	/* Extra usage lines for the suite's own options, or NULL. */
	const char *options;
	unsigned int default_timeout_s;
	void *arg;
	/* In the runner, once, before any test: 0, or -1 with why (nothing runs). */
	int (*setup)(void *arg, char *why, size_t len);
	/* In the runner before each test's fork: 0, or -1 with why (the test fails). */
	int (*before)(void *arg, const struct tap_test *t, unsigned int number, char *why,
		      size_t len);
	/* In the test's process: returning means passed. */
	void (*run)(void *arg, const struct tap_test *t, unsigned int number);
	/* In the runner once the test's processes are gone: cleanup and leak checks. */
	void (*after)(void *arg, const struct tap_test *t, unsigned int number,
		      struct tap_outcome *o);
	/* In the runner after the last test. */
	void (*finish)(void *arg, unsigned int passed, unsigned int failed);
};

/*
 * Runs the selected tests of the table and prints TAP; returns the exit
 * status for main(). argv[0] is the program name, the rest as above.
 */
int tap_main(const struct tap_suite *suite, const struct tap_test *tests, size_t n_tests, int argc,
	     char **argv);

/* Whether name starts with one of the categories. */
bool tap_name_has_category(const char *name);

/* ---- in a test's process ---------------------------------------------- */

/* Prints "file:line: message" and fails the test. */
__attribute__((noreturn, format(printf, 3, 4))) void tap_fail_at(const char *file, int line,
								 const char *fmt, ...);
/* Prints the reason and skips the test. */
__attribute__((noreturn, format(printf, 1, 2))) void tap_skip(const char *fmt, ...);

#define TAP_FAIL(...) tap_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* ---- in the runner's hooks -------------------------------------------- */

/* Fails o with the reason, unless it failed already (the first reason stays). */
__attribute__((format(printf, 2, 3))) void tap_outcome_fail(struct tap_outcome *o, const char *fmt,
							    ...);
/* Adds a line to o's diagnostics. */
__attribute__((format(printf, 2, 3))) void tap_outcome_note(struct tap_outcome *o, const char *fmt,
							    ...);

/* ---- time -------------------------------------------------------------- */

uint64_t tap_now_ms(void);
void tap_sleep_ms(unsigned int ms);

#endif /* MOECACHE_TAP_H */
