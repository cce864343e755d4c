// SPDX-License-Identifier: MIT
/*
 * moecached: the agent of /dev/moecache pools.
 *
 * The main thread owns the signals (a signalfd) and forwards them as
 * commands to one thread per pool; it exits when every pool's thread has
 * ended. SIGTERM/SIGINT: finish the copies in flight, commit, save the
 * profile, exit 0. SIGUSR1: save the profile. SIGHUP: re-read the config
 * file's log level and copy delay, apply the policy and profile that
 * moecachectl installed in the run folder, log stats.
 *
 * Under systemd (Type=notify) it reports READY=1 once every pool that
 * started is served, and a STATUS= line naming them; elsewhere sd_notify
 * does nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "config.h"
#include "lib/gpu/common.h"
#include "log.h"
#include "pool.h"

struct agent {
	struct agent_config cfg;
	int argc; /* the command line, applied again over the file at SIGHUP */
	char **argv;
	struct agent_log log;
	struct agent_pool *pools[AGENT_MAX_POOLS];
	struct mc_gpu_budget gpu_budget; /* gpu_budget_mb, shared by the pools' banks */
	uint32_t n_running;
	int exit_fd;
	int signal_fd;
	int epfd;
	int status;
	bool ready; /* READY=1 sent */
};

static void agent_broadcast(struct agent *a, uint32_t cmd)
{
	for (uint32_t i = 0; i < a->cfg.n_pools; i++)
		if (a->pools[i])
			agent_pool_command(a->pools[i], cmd);
}

static void agent_reload(struct agent *a)
{
	struct agent_config fresh;
	char err[512];

	/*
	 * The settings as at start: the defaults, the file as it is now, then
	 * the command line, which wins over the file (moecached(8)).
	 */
	if (a->cfg.config_path[0]) {
		if (agent_config_from_args(&fresh, a->argc, a->argv, err, sizeof(err))) {
			agent_err(&a->log, NULL, "reload: %s", err);
		} else {
			agent_log_set_level(&a->log, fresh.log_level);
			for (uint32_t i = 0; i < a->cfg.n_pools; i++)
				if (a->pools[i])
					agent_pool_set_copy_delay(a->pools[i], fresh.copy_delay_us);
		}
	}
	agent_broadcast(a, AGENT_CMD_RELOAD);
}

static int agent_handle_signal(struct agent *a)
{
	struct signalfd_siginfo si;
	ssize_t n = read(a->signal_fd, &si, sizeof(si));

	if (n != sizeof(si))
		return n < 0 && errno != EAGAIN ? -errno : 0;
	switch (si.ssi_signo) {
	case SIGTERM:
	case SIGINT:
		agent_notice(&a->log, NULL, "signal %u: stopping", si.ssi_signo);
		sd_notify(0, "STOPPING=1");
		agent_broadcast(a, AGENT_CMD_STOP);
		break;
	case SIGUSR1:
		agent_broadcast(a, AGENT_CMD_SAVE);
		break;
	case SIGHUP:
		agent_reload(a);
		break;
	}
	return 0;
}

/* READY=1 once every running pool is served; STATUS= whenever that changes. */
static void agent_notify(struct agent *a)
{
	char status[64 + AGENT_MAX_POOLS * (MOECACHE_NAME_LEN + 1)];
	uint32_t serving = 0;
	size_t n;

	n = (size_t)snprintf(status, sizeof(status), "STATUS=serving");
	for (uint32_t i = 0; i < a->cfg.n_pools; i++) {
		if (!a->pools[i] || !agent_pool_serving(a->pools[i]))
			continue;
		serving++;
		if (n < sizeof(status))
			n += (size_t)snprintf(status + n, sizeof(status) - n, " %s",
					      a->cfg.pools[i]);
	}
	if (!serving)
		snprintf(status, sizeof(status), "STATUS=no pool served");
	if (!a->ready && serving && serving == a->n_running) {
		a->ready = true;
		sd_notifyf(0, "READY=1\n%s", status);
	} else {
		sd_notify(0, status);
	}
}

static void agent_reap(struct agent *a)
{
	uint64_t v;

	if (read(a->exit_fd, &v, sizeof(v)) < 0)
		return;
	for (uint32_t i = 0; i < a->cfg.n_pools; i++) {
		if (!a->pools[i] || !agent_pool_done(a->pools[i]))
			continue;
		if (agent_pool_join(a->pools[i]))
			a->status = 1;
		a->pools[i] = NULL;
		a->n_running--;
	}
	agent_notify(a);
}

static int agent_setup(struct agent *a)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	/* Blocked before any thread starts, so that every thread inherits the mask. */
	if (pthread_sigmask(SIG_BLOCK, &mask, NULL))
		return -EINVAL;
	signal(SIGPIPE, SIG_IGN);
	a->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	a->exit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (a->signal_fd < 0 || a->exit_fd < 0 || a->epfd < 0)
		return -errno;
	ev.data.fd = a->signal_fd;
	if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->signal_fd, &ev) < 0)
		return -errno;
	ev.data.fd = a->exit_fd;
	if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->exit_fd, &ev) < 0)
		return -errno;
	return 0;
}

static int agent_run(struct agent *a)
{
	int ret;

	ret = mc_gpu_budget_init(&a->gpu_budget, (uint64_t)a->cfg.gpu_budget_mb << 20);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < a->cfg.n_pools; i++) {
		ret = agent_pool_start(&a->cfg, &a->log, a->cfg.pools[i],
				       a->cfg.gpu_budget_mb ? &a->gpu_budget : NULL, a->exit_fd,
				       &a->pools[i]);
		if (ret) {
			agent_err(&a->log, a->cfg.pools[i], "cannot start: %s", strerror(-ret));
			a->status = 1;
			continue;
		}
		a->n_running++;
	}
	while (a->n_running) {
		struct epoll_event evs[2];
		int n = epoll_wait(a->epfd, evs, 2, -1);

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == a->signal_fd)
				agent_handle_signal(a);
			else
				agent_reap(a);
		}
	}
	mc_gpu_budget_destroy(&a->gpu_budget);
	return 0;
}

int main(int argc, char **argv)
{
	struct agent *a;
	char err[2048];
	int ret, status;

	a = calloc(1, sizeof(*a)); /* large (paths): not on the stack */
	if (!a)
		return 1;
	a->signal_fd = a->exit_fd = a->epfd = -1;
	a->argc = argc;
	a->argv = argv;
	ret = agent_config_from_args(&a->cfg, argc, argv, err, sizeof(err));
	if (ret == 1) {
		fputs(err, stdout);
		return 0;
	}
	if (ret) {
		fprintf(stderr, "<3>moecached: %s\n", err);
		return 2;
	}
	a->log.level = a->cfg.log_level;
	if (!a->cfg.foreground && daemon(1, 1) < 0) {
		agent_err(&a->log, NULL, "daemon: %s", strerror(errno));
		return 1;
	}
	ret = agent_setup(a);
	if (!ret)
		ret = agent_run(a);
	if (ret) {
		agent_err(&a->log, NULL, "%s", strerror(-ret));
		a->status = 1;
	}
	agent_info(&a->log, NULL, "exiting with status %d", a->status);
	status = a->status;
	free(a);
	return status;
}
