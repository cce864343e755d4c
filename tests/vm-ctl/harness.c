// SPDX-License-Identifier: MIT
/*
 * moecache-ctltest's helpers and main: the harness (tests/harness/tap.h)
 * runs ct_tests[], each with its own pool prefix and folder, and destroys
 * the pools a test left.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <moecache_netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "harness.h"

void ct_pool(const struct ct_ctx *ctx, const char *suffix, char name[MOECACHE_NAME_LEN])
{
	snprintf(name, MOECACHE_NAME_LEN, "%s-%s", ctx->prefix, suffix);
}

const char *ct_file(const struct ct_ctx *ctx, const char *name)
{
	static char bufs[4][256];
	static unsigned int next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", ctx->dir, name);
	return b;
}

void ct_nl_open(struct ctl_nl *nl)
{
	int ret = ctl_nl_open(nl);

	if (ret)
		CT_FAIL("netlink: %s (%s)", strerror(-ret),
			ctl_nl_message(nl) ? ctl_nl_message(nl) : "");
}

void ct_nl_adopt(struct ctl_nl *nl, int fd)
{
	memset(nl, 0, sizeof(*nl));
	nl->sk = nl_socket_alloc();
	if (!nl->sk || nl_socket_set_fd(nl->sk, NETLINK_GENERIC, fd) < 0)
		CT_FAIL("cannot adopt netlink socket %d", fd);
	nl->family = genl_ctrl_resolve(nl->sk, MOECACHE_GENL_NAME);
	if (nl->family < 0)
		CT_FAIL("no family %s on the adopted socket", MOECACHE_GENL_NAME);
}

static int send_nobody_socket(void *arg)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	struct ctl_nl nl;
	int fd;

	if (ctl_nl_open(&nl))
		return 100;
	fd = nl_socket_get_fd(nl.sk);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(*(int *)arg, &mh, 0) == 1 ? 0 : 101;
}

int ct_nobody_socket(void)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	int sv[2], fd, ret;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
		CT_FAIL("socketpair: %s", strerror(errno));
	ret = ct_as_nobody(send_nobody_socket, &sv[1]);
	if (ret)
		CT_FAIL("uid %d could not open and send a netlink socket (%d)", CT_NOBODY, ret);
	if (recvmsg(sv[0], &mh, 0) != 1 || !(cm = CMSG_FIRSTHDR(&mh)) ||
	    cm->cmsg_type != SCM_RIGHTS)
		CT_FAIL("no socket received from uid %d", CT_NOBODY);
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	close(sv[0]);
	close(sv[1]);
	return fd;
}

static int log_event(const struct ctl_event *ev, void *arg)
{
	struct ct_event_log *log = arg;

	if (!strncmp(ev->pool, log->prefix, strlen(log->prefix)) && log->n < 16)
		log->ev[log->n++] = *ev;
	return 0;
}

void ct_wait_events(struct ctl_nl *nl, struct ct_event_log *log, unsigned int n)
{
	uint64_t until = ct_now_ms() + 10000;

	while (log->n < n) {
		int left = (int)(until - ct_now_ms());
		int ret;

		if (left <= 0)
			CT_FAIL("%u of %u events within 10 s", log->n, n);
		ret = ctl_nl_event_wait(nl, left, log_event, log);
		if (ret && ret != -ETIMEDOUT)
			CT_FAIL("event wait: %s", strerror(-ret));
	}
}

void ct_drain_events(struct ctl_nl *nl, struct ct_event_log *log)
{
	int ret;

	while (!(ret = ctl_nl_event_wait(nl, 0, log_event, log)))
		;
	if (ret != -ETIMEDOUT)
		CT_FAIL("event wait: %s", strerror(-ret));
}

void ct_create(const char *name, const struct ct_geom *g)
{
	struct ctl_create c;
	struct ctl_nl nl;
	int ret;

	memset(&c, 0, sizeof(c));
	snprintf(c.req.name, sizeof(c.req.name), "%s", name);
	c.req.n_layers = g->n_layers;
	c.req.n_experts = g->n_experts;
	c.req.expert_begin = g->expert_begin;
	c.req.expert_end = g->expert_end ? g->expert_end : g->n_experts;
	c.req.n_slots = g->n_slots;
	c.req.expert_bytes = g->expert_bytes;
	c.req.uid = g->uid;
	c.req.gid = g->gid;
	c.req.mode = g->mode ? g->mode : 0600;
	c.has_range = c.has_uid = c.has_gid = c.has_mode = true;
	ct_nl_open(&nl);
	ret = ctl_nl_pool_create(&nl, &c);
	if (ret)
		CT_FAIL("creating pool %s: %s (%s)", name, strerror(-ret),
			ctl_nl_message(&nl) ? ctl_nl_message(&nl) : "");
	ctl_nl_close(&nl);
}

uint32_t ct_pool_flags(const char *name)
{
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_nl_open(&nl);
	CT_OK(ctl_nl_pool_info(&nl, name, &p));
	ctl_nl_close(&nl);
	return p.flags;
}

static void drop_privileges(void)
{
	if (setgroups(0, NULL) || setresgid(CT_NOBODY, CT_NOBODY, CT_NOBODY) ||
	    setresuid(CT_NOBODY, CT_NOBODY, CT_NOBODY))
		CT_FAIL("cannot become nobody: %s", strerror(errno));
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

pid_t ct_spawn_nobody(int (*fn)(void *arg), void *arg)
{
	pid_t pid = fork();

	if (pid < 0)
		CT_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		drop_privileges();
		_exit(fn(arg) & 0xff);
	}
	return pid;
}

int ct_wait_child(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) < 0)
		CT_FAIL("waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ct_as_nobody(int (*fn)(void *arg), void *arg)
{
	return ct_wait_child(ct_spawn_nobody(fn, arg));
}

static void read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
}

/* Runs prog with argv (prog's name first), its output in o. */
static void run_tool(const struct ct_ctx *ctx, struct ct_out *o, bool unprivileged,
		     const char *prog, const char **argv)
{
	char out_path[96], err_path[96], rundir[96];
	int status, fd_out, fd_err;
	pid_t pid;

	snprintf(out_path, sizeof(out_path), "%s/.stdout", ctx->dir);
	snprintf(err_path, sizeof(err_path), "%s/.stderr", ctx->dir);
	snprintf(rundir, sizeof(rundir), "%s/run", ctx->dir);
	fd_out = open(out_path, O_RDWR | O_CREAT | O_TRUNC, 0666);
	fd_err = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0666);
	if (fd_out < 0 || fd_err < 0)
		CT_FAIL("output files: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		CT_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(fd_out, STDOUT_FILENO);
		dup2(fd_err, STDERR_FILENO);
		setenv("MOECACHE_RUNDIR", rundir, 1);
		if (unprivileged)
			drop_privileges();
		execvp(prog, (char **)argv);
		fprintf(stderr, "exec %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		CT_FAIL("waitpid: %s", strerror(errno));
	o->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	lseek(fd_out, 0, SEEK_SET);
	lseek(fd_err, 0, SEEK_SET);
	read_all(fd_out, o->out, sizeof(o->out));
	read_all(fd_err, o->err, sizeof(o->err));
	close(fd_out);
	close(fd_err);
}

/* argv[0] = prog, then arg0 and the rest of ap up to NULL. */
static void collect_args(const char *argv[32], const char *prog, const char *arg0, va_list ap)
{
	int n = 2;

	argv[0] = prog;
	argv[1] = arg0;
	while (arg0 && n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	argv[n] = NULL;
}

void ct_ctl(const struct ct_ctx *ctx, struct ct_out *o, bool unprivileged, const char *arg0, ...)
{
	const char *argv[32];
	va_list ap;

	va_start(ap, arg0);
	collect_args(argv, "moecachectl", arg0, ap);
	va_end(ap);
	run_tool(ctx, o, unprivileged, "moecachectl", argv);
}

void ct_exec(const struct ct_ctx *ctx, struct ct_out *o, const char *prog, const char *arg0, ...)
{
	const char *argv[32];
	va_list ap;

	va_start(ap, arg0);
	collect_args(argv, prog, arg0, ap);
	va_end(ap);
	run_tool(ctx, o, false, prog, argv);
}

void ct_wait_agent(const char *name, pid_t pid)
{
	uint64_t until = ct_now_ms() + 10000;
	struct ctl_pool p;
	struct ctl_nl nl;

	ct_nl_open(&nl);
	do {
		if (ct_now_ms() > until)
			CT_FAIL("the agent did not attach");
		ct_sleep_ms(5);
		CT_OK(ctl_nl_pool_info(&nl, name, &p));
	} while (p.agent_pid != (uint32_t)pid);
	ctl_nl_close(&nl);
}

unsigned int ct_set_param(const char *name, unsigned int value)
{
	char path[128], buf[32];
	unsigned int old;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/moecache/parameters/%s", name);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f))
		CT_FAIL("%s: %s", path, strerror(errno));
	fclose(f);
	old = (unsigned int)strtoul(buf, NULL, 10);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%u\n", value) < 0 || fclose(f))
		CT_FAIL("writing %s: %s", path, strerror(errno));
	return old;
}

/* ---- the runner ---- */

struct cleanup_ctx {
	const char *prefix;
	char names[64][MOECACHE_NAME_LEN];
	unsigned int n;
};

static int collect_prefixed(const struct ctl_pool *p, void *arg)
{
	struct cleanup_ctx *c = arg;
	size_t len = strlen(c->prefix);

	if (!strncmp(p->name, c->prefix, len) && p->name[len] == '-' && c->n < 64)
		snprintf(c->names[c->n++], MOECACHE_NAME_LEN, "%s", p->name);
	return 0;
}

/* Destroys the pools a test left behind; returns how many it could not. */
static int cleanup_pools(const char *prefix)
{
	struct cleanup_ctx c = {.prefix = prefix};
	struct ctl_nl nl;
	unsigned int i;
	int left = 0;

	if (ctl_nl_open(&nl))
		return 0;
	ctl_nl_pool_list(&nl, collect_prefixed, &c);
	for (i = 0; i < c.n; i++)
		if (ctl_nl_pool_destroy(&nl, c.names[i])) {
			fprintf(stderr, "# cannot destroy leftover pool %s\n", c.names[i]);
			left++;
		}
	ctl_nl_close(&nl);
	return left;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* The runner's state of the test in flight. */
struct ct_runner {
	struct ct_ctx ctx;
};

static int ct_before(void *arg, const struct tap_test *t, unsigned int number, char *why,
		     size_t len)
{
	const struct ct_test *ct = t->data;
	struct ct_runner *r = arg;

	memset(&r->ctx, 0, sizeof(r->ctx));
	r->ctx.index = (unsigned int)(ct - ct_tests);
	snprintf(r->ctx.prefix, sizeof(r->ctx.prefix), "t%02u", r->ctx.index);
	snprintf(r->ctx.dir, sizeof(r->ctx.dir), "/tmp/ctltest.%s", r->ctx.prefix);
	nftw(r->ctx.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	/* readable and writable by nobody too: unprivileged runs write here */
	if (mkdir(r->ctx.dir, 0777) || chmod(r->ctx.dir, 0777)) {
		snprintf(why, len, "%s: %s", r->ctx.dir, strerror(errno));
		return -1;
	}
	return 0;
}

static void ct_run(void *arg, const struct tap_test *t, unsigned int number)
{
	const struct ct_test *ct = t->data;
	struct ct_runner *r = arg;

	ct->run(&r->ctx);
}

static void ct_after(void *arg, const struct tap_test *t, unsigned int number,
		     struct tap_outcome *o)
{
	struct ct_runner *r = arg;
	int left = cleanup_pools(r->ctx.prefix);

	if (left)
		tap_outcome_fail(o, "%d pools the test left cannot be destroyed", left);
	nftw(r->ctx.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv)
{
	static struct ct_runner runner;
	const struct tap_suite suite = {
	    .word = "ctl",
	    .about = "moecachectl and the generic netlink family against the loaded module, as "
		     "root.",
	    .default_timeout_s = CT_DEFAULT_TIMEOUT_S,
	    .arg = &runner,
	    .before = ct_before,
	    .run = ct_run,
	    .after = ct_after,
	};
	struct tap_test *tests = calloc(ct_n_tests, sizeof(*tests));
	size_t i;
	int ret;

	if (!tests)
		return 2;
	for (i = 0; i < ct_n_tests; i++)
		tests[i] = (struct tap_test){.name = ct_tests[i].name,
					     .description = ct_tests[i].description,
					     .timeout_s = ct_tests[i].timeout_s,
					     .data = &ct_tests[i]};
	ret = tap_main(&suite, tests, ct_n_tests, argc, argv);
	free(tests);
	return ret;
}
