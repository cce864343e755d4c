// SPDX-License-Identifier: MIT
/*
 * tools/debug-kernel/kcsan-reports.awk, which decides which KCSAN reports
 * fail `make check-debug`: those with a frame in the module stay in the log
 * the report scan reads, the others are only listed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#define SCRIPT "tools/debug-kernel/kcsan-reports.awk"
#define RULE "[   12.000000] =================================================================="

/* A race between the module and the module. */
static const char module_race[] =
    RULE "\n"
    "[   12.000001] BUG: KCSAN: data-race in ioc_evict [moecache] / ioc_acquire [moecache]\n"
    "[   12.000002] \n"
    "[   12.000003] write to 0xffff888003a1c040 of 4 bytes by task 91 on cpu 1:\n"
    "[   12.000004]  ioc_evict+0x2f1/0x6a0 [moecache]\n"
    "[   12.000005]  moecache_ioctl+0x1c4/0x1e0 [moecache]\n"
    "[   12.000006] \n"
    "[   12.000007] read to 0xffff888003a1c040 of 4 bytes by task 90 on cpu 0:\n"
    "[   12.000008]  ioc_acquire+0x55/0x900 [moecache]\n"
    "[   12.000009] \n"
    "[   12.000010] Reported by Kernel Concurrency Sanitizer on:\n"
    "[   12.000011] CPU: 0 PID: 90 Comm: moecache-stress Not tainted 6.1.0-moecache-kcsan\n" RULE
    "\n";

/* A race of the kernel's own, no module frame. */
static const char kernel_race[] =
    RULE "\n"
    "[   13.000001] BUG: KCSAN: data-race in tick_nohz_next_event / tick_sched_timer\n"
    "[   13.000002] \n"
    "[   13.000003] write to 0xffffffff82a0e6a8 of 8 bytes by interrupt on cpu 1:\n"
    "[   13.000004]  tick_sched_timer+0x3a/0x110\n"
    "[   13.000005] \n"
    "[   13.000006] read to 0xffffffff82a0e6a8 of 8 bytes by task 0 on cpu 0:\n"
    "[   13.000007]  tick_nohz_next_event+0x2c/0x1f0\n"
    "[   13.000008] \n"
    "[   13.000009] Reported by Kernel Concurrency Sanitizer on:\n" RULE "\n";

/* The module on one side, the kernel on the other. */
static const char mixed_race[] =
    RULE "\n"
    "[   14.000001] BUG: KCSAN: data-race in fput / moecache_release [moecache]\n"
    "[   14.000002] \n"
    "[   14.000003] read to 0xffff8880041e7b38 of 8 bytes by task 77 on cpu 0:\n"
    "[   14.000004]  moecache_release+0x44/0x210 [moecache]\n"
    "[   14.000005]  __fput+0x10e/0x3c0\n"
    "[   14.000006] \n"
    "[   14.000007] write to 0xffff8880041e7b38 of 8 bytes by task 78 on cpu 1:\n"
    "[   14.000008]  fput+0x1a/0x90\n" RULE "\n";

static const char warning[] = "[   15.000000] WARNING: CPU: 0 PID: 1 at kmod/map.c:40 map_write_begin\n";

struct sorted {
	char out[8192];
	char foreign[2048];
};

static void read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (!f)
		return;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Runs the script over log; its output and its list of foreign reports. */
static void sort_log(const char *log, struct sorted *s)
{
	char in[] = "/tmp/kcsan-log.XXXXXX", foreign[] = "/tmp/kcsan-foreign.XXXXXX";
	char out[] = "/tmp/kcsan-out.XXXXXX", cmd[512];
	int fd_in = mkstemp(in), fd_foreign = mkstemp(foreign), fd_out = mkstemp(out);

	cr_assert(fd_in >= 0 && fd_foreign >= 0 && fd_out >= 0);
	cr_assert_eq(write(fd_in, log, strlen(log)), (ssize_t)strlen(log));
	close(fd_in);
	close(fd_foreign);
	close(fd_out);
	snprintf(cmd, sizeof(cmd), "awk -v module=moecache -v foreign=%s -f %s %s > %s", foreign,
		 SCRIPT, in, out);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	read_file(out, s->out, sizeof(s->out));
	read_file(foreign, s->foreign, sizeof(s->foreign));
	unlink(in);
	unlink(foreign);
	unlink(out);
}

Test(kcsan_reports, basic_module_race_kept,
     .description = "a race between two module functions stays in the log, whole")
{
	struct sorted s;

	sort_log(module_race, &s);
	cr_assert_str_eq(s.out, module_race);
	cr_assert_str_empty(s.foreign);
}

Test(kcsan_reports, basic_kernel_race_listed,
     .description = "a race without a module frame leaves the log and is listed by its title")
{
	struct sorted s;

	sort_log(kernel_race, &s);
	cr_assert_null(strstr(s.out, "KCSAN"), "left in the log: %s", s.out);
	cr_assert_null(strstr(s.out, "tick_sched_timer"));
	cr_assert_str_eq(s.foreign, "[   13.000001] BUG: KCSAN: data-race in "
				    "tick_nohz_next_event / tick_sched_timer\n");
}

Test(kcsan_reports, basic_mixed_race_kept,
     .description = "a race with the module on one side only is the module's")
{
	struct sorted s;

	sort_log(mixed_race, &s);
	cr_assert_str_eq(s.out, mixed_race);
	cr_assert_str_empty(s.foreign);
}

Test(kcsan_reports, basic_other_reports_untouched,
     .description = "lines outside KCSAN reports pass through, in order, among sorted reports")
{
	char log[8192], want[8192];
	struct sorted s;

	snprintf(log, sizeof(log), "%s%s%s%s", warning, kernel_race, module_race, warning);
	/* the kernel race's opening rule is not part of its report */
	snprintf(want, sizeof(want), "%s%s\n%s%s", warning, RULE, module_race, warning);
	sort_log(log, &s);
	cr_assert_str_eq(s.out, want);
	cr_assert_not_null(strstr(s.foreign, "tick_sched_timer"));
}

Test(kcsan_reports, basic_truncated_report,
     .description = "a report cut off by the end of the log is still sorted")
{
	char log[4096];
	struct sorted s;

	/* everything up to the closing rule of the module race */
	snprintf(log, sizeof(log), "%.*s", (int)(strstr(module_race, "[   12.000010]") - module_race),
		 module_race);
	sort_log(log, &s);
	cr_assert_str_eq(s.out, log);
	cr_assert_str_empty(s.foreign);
}

Test(kcsan_reports, basic_no_report, .description = "a log without a report is unchanged")
{
	struct sorted s;

	sort_log(warning, &s);
	cr_assert_str_eq(s.out, warning);
	cr_assert_str_empty(s.foreign);
}
