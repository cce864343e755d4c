// SPDX-License-Identifier: MIT
/* The runner of tap.h: fork per test, alarm, capture, skip by exit 77. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

/* How long past its alarm a test may take (stuck in the kernel) before SIGKILL. */
#define TAP_HANG_GRACE_S 10

static const char *const tap_categories[] = {
    "basic_", "bad_input_", "permission_", "lifetime_", "leak_", "concurrency_", "perf_",
};

bool tap_name_has_category(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(tap_categories) / sizeof(tap_categories[0]); i++) {
		size_t len = strlen(tap_categories[i]);

		if (!strncmp(name, tap_categories[i], len) && name[len])
			return true;
	}
	return false;
}

/* ---- in a test's process ---------------------------------------------- */

static const char *tap_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

void tap_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s:%d: ", tap_basename(file), line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

void tap_skip(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(TAP_EXIT_SKIP);
}

/* ---- outcomes ---------------------------------------------------------- */

static void tap_append(struct tap_outcome *o, const char *text, size_t len)
{
	size_t room = sizeof(o->output) - 1 - o->output_len;

	if (len > room)
		len = room;
	memcpy(o->output + o->output_len, text, len);
	o->output_len += len;
	o->output[o->output_len] = 0;
}

void tap_outcome_fail(struct tap_outcome *o, const char *fmt, ...)
{
	va_list ap;

	if (o->kind == TAP_FAIL)
		return;
	o->kind = TAP_FAIL;
	va_start(ap, fmt);
	vsnprintf(o->reason, sizeof(o->reason), fmt, ap);
	va_end(ap);
}

void tap_outcome_note(struct tap_outcome *o, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (o->output_len && o->output[o->output_len - 1] != '\n')
		tap_append(o, "\n", 1);
	tap_append(o, line, (size_t)n);
}

/* ---- time -------------------------------------------------------------- */

uint64_t tap_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void tap_sleep_ms(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- the runner -------------------------------------------------------- */

static void tap_drain(int fd, struct tap_outcome *o)
{
	char buf[1024];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		tap_append(o, buf, (size_t)n);
}

/* Kills what the test left in its process group and reaps every orphan. */
static void tap_reap_leftovers(pid_t pgid)
{
	uint64_t until = tap_now_ms() + 5000;

	kill(-pgid, SIGKILL);
	while (tap_now_ms() < until) {
		pid_t r = waitpid(-1, NULL, WNOHANG);

		if (r < 0 && errno == ECHILD)
			return;
		if (r <= 0)
			tap_sleep_ms(5);
	}
}

/*
 * The last non-empty line of text (where tap_fail_at and tap_skip leave
 * their reason, just before the process ends): its offset and length.
 */
static size_t tap_last_line(const char *text, size_t *len)
{
	size_t end = strlen(text), start;

	while (end && text[end - 1] == '\n')
		end--;
	start = end;
	while (start && text[start - 1] != '\n')
		start--;
	*len = end - start;
	return start;
}

static void tap_copy_line(const char *text, size_t len, char *out, size_t size)
{
	if (len >= size)
		len = size - 1;
	memcpy(out, text, len);
	out[len] = 0;
}

static void tap_classify(int status, bool hung, unsigned int timeout_s, struct tap_outcome *o)
{
	char first[sizeof(o->reason) - 64];
	size_t len, at = tap_last_line(o->output, &len);

	/* The test's last words: its failed check, or what it did before it hung or died. */
	tap_copy_line(o->output + at, len, first, sizeof(first));
	if (hung) {
		tap_outcome_fail(
		    o, "hung: still running %u s after its %u s timeout (uninterruptible?)",
		    TAP_HANG_GRACE_S, timeout_s);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		o->kind = TAP_PASS;
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == TAP_EXIT_SKIP) {
		o->kind = TAP_SKIP;
		snprintf(o->reason, sizeof(o->reason), "%s", first);
	} else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
		tap_outcome_fail(o, "timed out after %u s%s%s", timeout_s, first[0] ? "; " : "",
				 first);
	} else if (WIFSIGNALED(status)) {
		tap_outcome_fail(o, "killed by signal SIG%s%s%s", sigabbrev_np(WTERMSIG(status)),
				 first[0] ? "; " : "", first);
	} else if (first[0]) {
		tap_outcome_fail(o, "%s", first);
	} else {
		tap_outcome_fail(o, "exit status %d", WEXITSTATUS(status));
	}
}

static void tap_child(const struct tap_suite *s, const struct tap_test *t, unsigned int number,
		      int report_fd, unsigned int timeout_s)
{
	setpgid(0, 0);
	dup2(report_fd, STDOUT_FILENO);
	dup2(report_fd, STDERR_FILENO);
	close(report_fd);
	signal(SIGPIPE, SIG_DFL);
	alarm(timeout_s);
	s->run(s->arg, t, number);
	fflush(NULL);
	_exit(0);
}

static void tap_run_one(const struct tap_suite *s, const struct tap_test *t, unsigned int number,
			struct tap_outcome *o)
{
	unsigned int timeout_s = t->timeout_s ? t->timeout_s : s->default_timeout_s;
	uint64_t deadline;
	bool hung = false;
	int report[2], status = 0;
	pid_t pid;

	memset(o, 0, sizeof(*o));
	if (s->before && s->before(s->arg, t, number, o->reason, sizeof(o->reason))) {
		o->kind = TAP_FAIL;
		return;
	}
	if (pipe2(report, O_CLOEXEC) < 0) {
		tap_outcome_fail(o, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		tap_outcome_fail(o, "fork: %s", strerror(errno));
		close(report[0]);
		close(report[1]);
		goto out;
	}
	if (pid == 0) {
		close(report[0]);
		tap_child(s, t, number, report[1], timeout_s);
	}
	setpgid(pid, pid);
	close(report[1]);
	fcntl(report[0], F_SETFL, O_NONBLOCK);

	/* The alarm ends a hung test; past it, a test stuck in the kernel is killed. */
	deadline = tap_now_ms() + (uint64_t)(timeout_s + TAP_HANG_GRACE_S) * 1000;
	for (;;) {
		struct pollfd pfd = {.fd = report[0], .events = POLLIN};

		poll(&pfd, 1, 20);
		tap_drain(report[0], o);
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (tap_now_ms() > deadline) {
			hung = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			if (waitpid(pid, &status, 0) != pid)
				status = 0;
			break;
		}
	}
	tap_reap_leftovers(pid);
	tap_drain(report[0], o);
	close(report[0]);
	tap_classify(status, hung, timeout_s, o);
out:
	if (s->after)
		s->after(s->arg, t, number, o);
}

static void tap_print_diagnostics(const struct tap_outcome *o)
{
	size_t len, last = tap_last_line(o->output, &len);
	char line[sizeof(o->reason)];
	const char *p = o->output;

	/* Every line but a last one the reason quotes goes out as a comment. */
	tap_copy_line(o->output + last, len, line, sizeof(line));
	while (*p) {
		size_t n;

		if (*p == '\n') {
			p++;
			continue;
		}
		n = strcspn(p, "\n");
		if (p != o->output + last || !line[0] || !strstr(o->reason, line))
			printf("# %.*s\n", (int)n, p);
		p += n;
	}
}

/* Every line of a test's output, as TAP comments. */
static void tap_print_output(const struct tap_outcome *o)
{
	const char *p = o->output;
	size_t n;

	for (; *p; p += n + (p[n] == '\n')) {
		n = strcspn(p, "\n");
		if (n)
			printf("# %.*s\n", (int)n, p);
	}
}

static bool tap_selected(const struct tap_test *t, int nfilters, char **filters)
{
	int i;

	if (!nfilters)
		return true;
	for (i = 0; i < nfilters; i++)
		if (strstr(t->name, filters[i]))
			return true;
	return false;
}

/* Every name has a category and a description, and no name repeats. */
static bool tap_check_table(const struct tap_test *tests, size_t n)
{
	bool ok = true;
	size_t i, j;

	for (i = 0; i < n; i++) {
		if (!tap_name_has_category(tests[i].name)) {
			printf("# %s: the name has no category prefix\n", tests[i].name);
			ok = false;
		}
		if (!tests[i].description || !tests[i].description[0] ||
		    strchr(tests[i].description, '\n')) {
			printf("# %s: no one-line description\n", tests[i].name);
			ok = false;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(tests[i].name, tests[j].name)) {
				printf("# %s: registered twice\n", tests[i].name);
				ok = false;
			}
	}
	return ok;
}

static void tap_usage(const struct tap_suite *s, FILE *out, const char *argv0)
{
	fprintf(out,
		"usage: %s [--list] [SUBSTRING...]\n"
		"%s\n"
		"Runs the tests whose names contain any SUBSTRING (all by default) and\n"
		"prints TAP; --list prints the tests instead.\n",
		argv0, s->about);
	if (s->options)
		fputs(s->options, out);
}

int tap_main(const struct tap_suite *s, const struct tap_test *tests, size_t n_tests, int argc,
	     char **argv)
{
	static struct tap_outcome outcome;
	unsigned int number = 0, passed = 0, failed = 0, skipped = 0, selected = 0;
	bool list = false;
	char **filters;
	int nfilters = 0, i;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	filters = calloc((size_t)argc + 1, sizeof(*filters));
	if (!filters)
		return 2;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--list")) {
			list = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			tap_usage(s, stdout, argv[0]);
			free(filters);
			return 0;
		} else if (argv[i][0] == '-') {
			tap_usage(s, stderr, argv[0]);
			free(filters);
			return 2;
		} else {
			filters[nfilters++] = argv[i];
		}
	}
	if (!tap_check_table(tests, n_tests)) {
		printf("Bail out! the test table breaks the naming rules\n");
		printf("%s: 0 passed, 1 failed, 0 skipped\n", s->word);
		free(filters);
		return 1;
	}
	for (k = 0; k < n_tests; k++)
		if (tap_selected(&tests[k], nfilters, filters))
			selected++;
	if (list) {
		for (k = 0; k < n_tests; k++)
			if (tap_selected(&tests[k], nfilters, filters))
				printf("%s - %s\n", tests[k].name, tests[k].description);
		free(filters);
		return 0;
	}
	if (s->setup && s->setup(s->arg, outcome.reason, sizeof(outcome.reason))) {
		printf("Bail out! setup: %s\n", outcome.reason);
		printf("%s: 0 passed, 1 failed, 0 skipped\n", s->word);
		free(filters);
		return 1;
	}

	signal(SIGPIPE, SIG_IGN);
	/* Orphans of a test (its own children) come back here to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	printf("1..%u\n", selected);
	for (k = 0; k < n_tests; k++) {
		const struct tap_test *t = &tests[k];

		if (!tap_selected(t, nfilters, filters))
			continue;
		number++;
		tap_run_one(s, t, number, &outcome);
		switch (outcome.kind) {
		case TAP_PASS:
			passed++;
			printf("ok %u - %s # %s\n", number, t->name, t->description);
			/* A measurement's figures go out with its pass. */
			if (!strncmp(t->name, "perf_", 5))
				tap_print_output(&outcome);
			break;
		case TAP_SKIP:
			skipped++;
			printf("ok %u - %s # SKIP %s\n", number, t->name, outcome.reason);
			break;
		default:
			failed++;
			printf("not ok %u - %s: %s\n", number, t->name, outcome.reason);
			tap_print_diagnostics(&outcome);
			break;
		}
	}
	if (s->finish)
		s->finish(s->arg, passed, failed);
	printf("%s: %u passed, %u failed, %u skipped\n", s->word, passed, failed, skipped);
	free(filters);
	return failed ? 1 : 0;
}
