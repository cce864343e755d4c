// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

void agent_log_set_level(struct agent_log *log, int level)
{
	__atomic_store_n(&log->level, level, __ATOMIC_RELAXED);
}

void agent_logf(const struct agent_log *log, int prio, const char *pool, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (log && prio > __atomic_load_n(&log->level, __ATOMIC_RELAXED))
		return;
	if (pool)
		n = snprintf(line, sizeof(line), "<%d>moecached[%s]: ", prio, pool);
	else
		n = snprintf(line, sizeof(line), "<%d>moecached: ", prio);
	va_start(ap, fmt);
	if (n > 0 && n < (int)sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line: threads of different pools do not interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
