// SPDX-License-Identifier: GPL-2.0
/*
 * What a client with read permission on a pool cannot take, write or learn
 * (docs/abi.md, "Security model"): the client places of a pool (the agent
 * still attaches, one user has max_user_pool_files of them, counted by who
 * attaches), the pools GET_INFO shows, writes that bypass a mapping's
 * protection, and what root of an unprivileged user namespace may do. Each
 * test names the hole it pins.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

/* ---- attach limits: clients cannot lock the agent out ------------------ */

struct flood_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	unsigned int want;     /* client files to attach */
	unsigned int root_fds; /* of them, files opened as root before dropping */
	unsigned int attached;
	int last_ret; /* of the attach that stopped it, 0 if none did */
	struct vm_gate ready;
	struct vm_gate release;
};

/* As NOBODY: attaches up to want client files and holds them. */
static void flood_main(void *arg)
{
	struct flood_job *job = arg;
	struct vm_view v[16];
	int root_fd[4], fd;
	unsigned int i;

	VM_ASSERT(job->root_fds <= ARRAY_SIZE(root_fd));
	for (i = 0; i < job->root_fds; i++)
		root_fd[i] = open(job->node, O_RDWR | O_CLOEXEC);
	fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	job->last_ret = 0;
	for (i = 0; i < job->want && i < ARRAY_SIZE(v); i++) {
		if (i < job->root_fds) {
			if (fd >= 0)
				close(fd);
			fd = root_fd[i];
		} else if (fd < 0) {
			fd = open(job->node, O_RDWR | O_CLOEXEC);
		}
		VM_ASSERT(fd >= 0);
		job->last_ret = vm_try_attach_fd(&v[i], fd, job->pool, MOECACHE_ROLE_CLIENT);
		if (job->last_ret)
			break;
		fd = -1;
		job->attached++;
	}
	if (fd >= 0)
		close(fd);
	vm_gate_pass(&job->ready);
	vm_gate_wait(&job->release, 20000, "the test to let go");
	for (i = 0; i < job->attached; i++)
		vm_detach(&v[i]);
}

static struct flood_job *flood_start(struct vm_ctx *ctx, unsigned int want, unsigned int root_fds,
				     pid_t *pid)
{
	struct flood_job *job = vm_shared(sizeof(*job));

	snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
	vm_get_node(job->node, sizeof(job->node));
	job->want = want;
	job->root_fds = root_fds;
	vm_gate_open(&job->ready);
	vm_gate_open(&job->release);
	*pid = vm_spawn(flood_main, job);
	vm_gate_wait(&job->ready, 10000, "the flood to attach");
	return job;
}

static void flood_end(struct flood_job *job, pid_t pid)
{
	vm_gate_pass(&job->release);
	vm_reap_ok(pid, 10000, "the flooding client");
	vm_put_node(job->node);
}

/*
 * Pins: max_pool_files counted every role, so read-only clients could
 * fill the pool and a restarted agent's ATTACH was EMFILE: the pool
 * wedged.
 */
static void permission_client_file_flood_agent_still_attaches(struct vm_ctx *ctx)
{
	struct vm_geom g = vm_geom_default;
	unsigned long long old_pool;
	struct flood_job *job;
	struct vm_view a, l, c;
	int ret_agent, ret_loader, ret_client;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_pool = vm_param_set("max_pool_files", 2);
	job = flood_start(ctx, 2, 0, &pid);
	ret_agent = vm_try_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	ret_loader = vm_try_attach(&l, ctx->pool, MOECACHE_ROLE_LOADER);
	ret_client = vm_try_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_param_set("max_pool_files", old_pool);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	/* The clients' limit is the clients' only. */
	VM_EQ(ret_agent, 0);
	VM_EQ(ret_loader, 0);
	VM_EQ(ret_client, -EMFILE);
	vm_detach(&l);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: one user with read permission could take every client place of a
 * pool (max_pool_files) and lock the other tenants out.
 */
static void permission_client_files_per_user_bound(struct vm_ctx *ctx)
{
	unsigned long long old_user;
	struct vm_geom g = vm_geom_default;
	struct flood_job *job;
	struct vm_view c[3];
	unsigned int i;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_user = vm_param_set("max_user_pool_files", 2);
	job = flood_start(ctx, 3, 0, &pid);
	/* The owner is not bound by it. */
	for (i = 0; i < ARRAY_SIZE(c); i++)
		if (vm_try_attach(&c[i], ctx->pool, MOECACHE_ROLE_CLIENT))
			break;
	vm_param_set("max_user_pool_files", old_user);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	VM_EQ(job->last_ret, -EMFILE);
	VM_EQ(i, ARRAY_SIZE(c));
	for (i = 0; i < ARRAY_SIZE(c); i++)
		vm_detach(&c[i]);
	vm_pool_destroy(ctx->pool);
}

/*
 * Pins: files root opened and handed over unattached counted as root's, so
 * the user attaching them had max_user_pool_files more places.
 */
static void permission_client_files_per_user_handed_files(struct vm_ctx *ctx)
{
	unsigned long long old_user;
	struct vm_geom g = vm_geom_default;
	struct flood_job *job;
	pid_t pid;

	g.mode = 0644;
	vm_pool_create(ctx->pool, &g);
	old_user = vm_param_set("max_user_pool_files", 2);
	job = flood_start(ctx, 3, 2, &pid);
	vm_param_set("max_user_pool_files", old_user);
	flood_end(job, pid);
	VM_EQ(job->attached, 2);
	VM_EQ(job->last_ret, -EMFILE);
	vm_pool_destroy(ctx->pool);
}

/* ---- GET_INFO tells only what the caller may see ----------------------- */

struct info_job {
	char node[64];
	struct moecache_info info;
};

static void info_main(void *arg)
{
	struct info_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);

	memset(&job->info, 0, sizeof(job->info));
	VM_OK(ioctl(fd, MOECACHE_IOC_GET_INFO, &job->info));
	close(fd);
}

/* GET_INFO as NOBODY, in a child. */
static void info_as_nobody(struct info_job *job)
{
	vm_reap_ok(vm_spawn(info_main, job), 10000, "GET_INFO as nobody");
}

/*
 * Pins: GET_INFO counted every pool and its host bytes for anyone who
 * may open the device, root's mode 0600 pools included.
 */
static void permission_info_hides_invisible_pools(struct vm_ctx *ctx)
{
	struct info_job *job = vm_shared(sizeof(*job));
	struct vm_geom g = vm_geom_default;
	struct moecache_info before, hidden, shown, root;
	char other[MOECACHE_NAME_LEN];

	vm_get_node(job->node, sizeof(job->node));
	info_as_nobody(job);
	before = job->info;
	vm_pool_create(ctx->pool, &vm_geom_default); /* root's, 0600 */
	info_as_nobody(job);
	hidden = job->info;
	vm_pool_name(ctx, 1, other);
	g.mode = 0644;
	vm_pool_create(other, &g);
	info_as_nobody(job);
	shown = job->info;
	vm_get_info(&root);
	vm_pool_destroy(other);
	vm_pool_destroy(ctx->pool);
	vm_put_node(job->node);
	VM_EQ(hidden.n_pools, before.n_pools);
	VM_EQ(hidden.host_bytes_used, before.host_bytes_used);
	VM_EQ(shown.n_pools, before.n_pools + 1);
	VM_ASSERT(shown.host_bytes_used > before.host_bytes_used);
	/* The limits are no secret, and root still sees every pool. */
	VM_EQ(shown.max_pools, root.max_pools);
	VM_EQ(root.n_pools, shown.n_pools + 1);
}

/* ---- writes that bypass a mapping's protection ------------------------- */

/*
 * A read-only shared mapping of real pages: the kernel's forced writes
 * (/proc/self/mem, ptrace's FOLL_FORCE) and process_vm_writev() must not
 * reach the pages, nor may mprotect() make it writable, while reads work.
 */
static void forced_writes_refused(const char *what, unsigned char *addr, size_t len)
{
	unsigned char before, got, poke;
	struct iovec local, remote;
	int mem;

	before = addr[len - 1];
	poke = (unsigned char)(before ^ 0x5a);
	mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	VM_ASSERT(mem >= 0);
	VM_EQ(pread(mem, &got, 1, (off_t)(uintptr_t)(addr + len - 1)), 1);
	VM_EQ(got, before);
	errno = 0;
	if (pwrite(mem, &poke, 1, (off_t)(uintptr_t)(addr + len - 1)) != -1 || errno != EIO)
		VM_FAIL("%s: a forced write through /proc/self/mem was not refused (errno %s)",
			what, vm_errname(errno));
	close(mem);
	local.iov_base = &poke;
	local.iov_len = 1;
	remote.iov_base = addr;
	remote.iov_len = 1;
	VM_ERR(process_vm_writev(getpid(), &local, 1, &remote, 1, 0), EFAULT);
	VM_ERR(mprotect(addr, len, PROT_READ | PROT_WRITE), EACCES);
	VM_ASSERT_MSG(addr[len - 1] == before, "%s: a byte changed", what);
}

/*
 * Checked: a client's map region, host region and CPU bank view are
 * shared mappings without VM_MAYWRITE, so no forced write (FOLL_FORCE on
 * a read-only shared mapping of real pages) and no process_vm_writev()
 * can write the pages every tenant reads.
 */
static void permission_client_forced_writes_refused(struct vm_ctx *ctx)
{
	struct moecache_bank bank, got;
	struct vm_view a, c;
	unsigned char *agent_bank, *view;
	size_t len;
	int memfd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	memfd = vm_bank_set_memfd(&a, vm_geom_default.expert_bytes, &bank);
	len = (size_t)bank.bank_bytes;
	agent_bank = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	VM_ASSERT(agent_bank != MAP_FAILED);
	memset(agent_bank, 0xa5, len);
	memset(&got, 0, sizeof(got));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &got));
	view = mmap(NULL, len, PROT_READ, MAP_SHARED, got.fd, 0);
	VM_ASSERT(view != MAP_FAILED);

	forced_writes_refused("map region", c.map_base, c.map_len);
	forced_writes_refused("host region", c.host, c.host_len);
	forced_writes_refused("bank view", view, len);
	VM_EQ(agent_bank[len - 1], 0xa5);

	munmap(view, len);
	close(got.fd);
	munmap(agent_bank, len);
	close(memfd);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- root of an unprivileged user namespace ---------------------------- */

struct userns_job {
	char node[64];
	char closed[MOECACHE_NAME_LEN]; /* root's, 0600 */
	char open[MOECACHE_NAME_LEN];	/* root's, 0644 */
	int skip;			/* no user namespace for NOBODY here */
	uid_t euid;			/* inside */
	int create, attach_closed, attach_fast, destroy_open, attach_client;
};

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	VM_ASSERT_MSG(fd >= 0, "open %s: %s", path, vm_errname(errno));
	VM_EQ(write(fd, text, strlen(text)), (long)strlen(text));
	close(fd);
}

static int userns_ret(int ret)
{
	return ret < 0 ? -errno : ret;
}

/* As NOBODY, then root (and CAP_SYS_ADMIN) of a user namespace of its own. */
static void userns_main(void *arg)
{
	struct userns_job *job = arg;
	struct moecache_pool_create pc;
	struct moecache_pool_name pn;
	struct vm_view v;
	char map[64];
	int fd;

	close(vm_become_unprivileged(NOBODY, NOBODY, job->node));
	/* setresuid() left /proc/self root's: the maps are written there. */
	VM_OK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
	if (unshare(CLONE_NEWUSER) < 0) {
		job->skip = errno;
		return;
	}
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %d 1", NOBODY);
	write_file("/proc/self/uid_map", map);
	write_file("/proc/self/gid_map", map);
	job->euid = geteuid();
	fd = open(job->node, O_RDWR | O_CLOEXEC);
	VM_ASSERT(fd >= 0);
	vm_fill_create(&pc, "vmt-userns-new", &vm_geom_default);
	job->create = userns_ret(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", job->open);
	job->destroy_open = userns_ret(ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn));
	job->attach_closed = vm_try_attach_fd(&v, fd, job->closed, MOECACHE_ROLE_CLIENT);
	if (!job->attach_closed)
		vm_detach(&v);
	job->attach_fast = vm_try_attach_fd_flags(&v, fd, job->open, MOECACHE_ROLE_CLIENT,
						  MOECACHE_ATTACH_FAST_PINS);
	if (!job->attach_fast)
		vm_detach(&v);
	job->attach_client = vm_try_attach_fd(&v, fd, job->open, MOECACHE_ROLE_CLIENT);
	if (!job->attach_client)
		vm_detach(&v);
	else
		close(fd);
}

/*
 * Checked: root of a user namespace an unprivileged user made (with
 * CAP_SYS_ADMIN there) is that user to the driver: no pool creation, no
 * destroy of root's pool, no sight of a 0600 pool, no fast pins; it
 * attaches where the user may read.
 */
static void permission_userns_root_is_its_creator(struct vm_ctx *ctx)
{
	struct userns_job *job = vm_shared(sizeof(*job));
	struct vm_geom g = vm_geom_default;
	pid_t pid;

	snprintf(job->closed, sizeof(job->closed), "%s", ctx->pool);
	vm_pool_name(ctx, 1, job->open);
	vm_pool_create(job->closed, &g);
	g.mode = 0644;
	vm_pool_create(job->open, &g);
	vm_get_node(job->node, sizeof(job->node));
	pid = vm_spawn(userns_main, job);
	vm_reap_ok(pid, 10000, "the user namespace's root");
	vm_put_node(job->node);
	vm_pool_destroy(job->open);
	vm_pool_destroy(job->closed);
	if (job->skip)
		vm_skip("no user namespace for an unprivileged user here: %s",
			vm_errname(job->skip));
	VM_EQ(job->euid, 0);
	VM_EQ(job->create, -EPERM);
	VM_EQ(job->destroy_open, -EPERM);
	VM_EQ(job->attach_closed, -ENOENT);
	VM_EQ(job->attach_fast, -EPERM);
	VM_EQ(job->attach_client, 0);
}

static const struct vm_test tenant_rights_tests[] = {
    VM_TEST(permission_client_file_flood_agent_still_attaches,
	    "clients filling max_pool_files do not keep an agent or a loader from attaching"),
    VM_TEST(permission_client_files_per_user_bound,
	    "a user other than the owner attaches at most max_user_pool_files clients (EMFILE)"),
    VM_TEST(permission_client_files_per_user_handed_files,
	    "files root opened count against the user that attaches them, not root"),
    VM_TEST(permission_info_hides_invisible_pools,
	    "GET_INFO counts only the pools and host bytes the caller may see"),
    VM_TEST(
	permission_client_forced_writes_refused,
	"/proc/self/mem, process_vm_writev and mprotect cannot write a client's regions or bank"),
    VM_TEST(permission_userns_root_is_its_creator,
	    "root of an unprivileged user namespace creates, destroys, sees and fast-pins nothing"),
};

const struct vm_suite vm_tenant_rights_suite = {tenant_rights_tests,
						ARRAY_SIZE(tenant_rights_tests)};
