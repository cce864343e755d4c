/* SPDX-License-Identifier: MIT */
/*
 * moecached's log: one line per message on stderr, prefixed with the
 * syslog priority as "<N>" so that a service manager (systemd, s6) files
 * each line at its level.
 */
#ifndef MOECACHE_AGENT_LOG_H
#define MOECACHE_AGENT_LOG_H

#include <syslog.h>

struct agent_log {
	int level; /* messages above this priority are dropped; read atomically */
};

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void agent_logf(const struct agent_log *log, int prio, const char *pool, const char *fmt, ...);

void agent_log_set_level(struct agent_log *log, int level);

#define agent_err(log, pool, ...) agent_logf(log, LOG_ERR, pool, __VA_ARGS__)
#define agent_warn(log, pool, ...) agent_logf(log, LOG_WARNING, pool, __VA_ARGS__)
#define agent_notice(log, pool, ...) agent_logf(log, LOG_NOTICE, pool, __VA_ARGS__)
#define agent_info(log, pool, ...) agent_logf(log, LOG_INFO, pool, __VA_ARGS__)
#define agent_debug(log, pool, ...) agent_logf(log, LOG_DEBUG, pool, __VA_ARGS__)

#endif /* MOECACHE_AGENT_LOG_H */
