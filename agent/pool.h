/* SPDX-License-Identifier: MIT */
/*
 * One served pool: a thread with its own epoll set over the agent fd, the
 * backend's completion fd, a timerfd and a command eventfd. Pools share
 * nothing but the configuration and the log, so a slow pool never delays
 * another one.
 */
#ifndef MOECACHE_AGENT_POOL_H
#define MOECACHE_AGENT_POOL_H

#include <stdint.h>

#include "config.h"
#include "log.h"

/* Commands from the main thread (signals). */
#define AGENT_CMD_STOP (1u << 0)   /* finish the copies in flight, commit, exit */
#define AGENT_CMD_SAVE (1u << 1)   /* save the popularity profile */
#define AGENT_CMD_RELOAD (1u << 2) /* the new copy delay, installed policy and profile; stats */

struct agent_pool;
struct mc_gpu_budget;

/*
 * exit_fd is written (eventfd) when the pool starts serving and when its
 * thread ends. gpu_budget (may be NULL) is the GPU bank budget the agent's
 * pools share.
 */
int agent_pool_start(const struct agent_config *cfg, struct agent_log *log, const char *name,
		     struct mc_gpu_budget *gpu_budget, int exit_fd, struct agent_pool **out);
void agent_pool_command(struct agent_pool *p, uint32_t cmd);
void agent_pool_set_copy_delay(struct agent_pool *p, uint32_t copy_delay_us);
/* True once the pool is set up and served (it stays true after the thread ends). */
bool agent_pool_serving(const struct agent_pool *p);
/* True once the thread has ended. */
bool agent_pool_done(const struct agent_pool *p);
/* Joins the thread, frees the pool, returns its exit status (0: clean). */
int agent_pool_join(struct agent_pool *p);

#endif /* MOECACHE_AGENT_POOL_H */
