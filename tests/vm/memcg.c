// SPDX-License-Identifier: GPL-2.0
/*
 * What a pool allocates is charged to the memory cgroup of the process that
 * created it (docs/abi.md, "Security model"). The map region is the one
 * part that vmalloc()s; memory.stat's "vmalloc" counts exactly that, so a
 * pool whose map region is a few hundred KiB shows in it, and leaves it
 * when destroyed. A pool larger than the creator's memory.max is ENOMEM,
 * by ioctl and by netlink, with nobody killed: the driver's user-sized
 * allocations may fail but never call the OOM killer. The creator runs in
 * a memory cgroup of its own, on a cgroup2 hierarchy the test mounts if the
 * VM has none.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* 64 x 64 experts of one page, 4096 slots: a map region of over 96 KiB. */
static const struct vm_geom mc_geom = {
    .n_layers = 64,
    .n_experts = 64,
    .expert_begin = 0,
    .expert_end = 64,
    .n_slots = 4096,
    .expert_bytes = 4096,
    .mode = 0600,
};

struct mc_job {
	char cgroup[128]; /* the creator's cgroup folder */
	char name[MOECACHE_NAME_LEN];
	long long before, created, destroyed; /* memory.stat vmalloc, bytes */
	int create_err, destroy_err;
};

/* memory.stat's "vmalloc" of folder, or -1. */
static long long mc_stat_vmalloc(const char *folder)
{
	char path[192], key[64];
	long long value, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", folder);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &value) == 2)
		if (!strcmp(key, "vmalloc"))
			found = value;
	fclose(f);
	return found;
}

static bool mc_write(const char *folder, const char *file, const char *text)
{
	char path[192];
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", folder, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

static void mc_creator_main(void *arg)
{
	struct mc_job *job = arg;
	struct moecache_pool_create pc;
	struct moecache_pool_name pn;
	int fd;

	VM_ASSERT(mc_write(job->cgroup, "cgroup.procs", "0"));
	fd = vm_open_dev();
	job->before = mc_stat_vmalloc(job->cgroup);
	vm_fill_create(&pc, job->name, &mc_geom);
	job->create_err = ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc) < 0 ? errno : 0;
	job->created = mc_stat_vmalloc(job->cgroup);
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", job->name);
	job->destroy_err = ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0 ? errno : 0;
	job->destroyed = mc_stat_vmalloc(job->cgroup);
	close(fd);
}

/* A memory cgroup of the test's own, on the VM's cgroup2 or one it mounts. */
struct mc_cgroup {
	char mount_dir[sizeof("/tmp/moecache-cgroup.XXXXXX")];
	bool mounted;
	char folder[128];
};

static void mc_cgroup_put(struct mc_cgroup *cg)
{
	rmdir(cg->folder);
	if (cg->mounted) {
		umount(cg->mount_dir);
		rmdir(cg->mount_dir);
	}
}

/* Skips the test where there is no cgroup2 with a memory controller. */
static void mc_cgroup_get(struct mc_cgroup *cg, const char *tag)
{
	const char *root = "/sys/fs/cgroup";

	memset(cg, 0, sizeof(*cg));
	if (access("/sys/fs/cgroup/cgroup.controllers", R_OK)) {
		snprintf(cg->mount_dir, sizeof(cg->mount_dir), "/tmp/moecache-cgroup.XXXXXX");
		if (!mkdtemp(cg->mount_dir))
			VM_FAIL("mkdtemp: %s", vm_errname(errno));
		if (mount("cgroup2", cg->mount_dir, "cgroup2", 0, NULL)) {
			rmdir(cg->mount_dir);
			vm_skip("no cgroup2 here (%s)", vm_errname(errno));
		}
		cg->mounted = true;
		root = cg->mount_dir;
	}
	snprintf(cg->folder, sizeof(cg->folder), "%s/moecache-vmtest-%s-%d", root, tag,
		 (int)getpid());
	if (!mc_write(root, "cgroup.subtree_control", "+memory") || mkdir(cg->folder, 0755) ||
	    mc_stat_vmalloc(cg->folder) < 0) {
		mc_cgroup_put(cg);
		vm_skip("no memory controller with a vmalloc count here");
	}
}

/* A key's count in memory.events of folder, or -1. */
static long long mc_event(const char *folder, const char *event)
{
	char path[192], key[64];
	long long value, found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.events", folder);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &value) == 2)
		if (!strcmp(key, event))
			found = value;
	fclose(f);
	return found;
}

static void basic_memcg_map_region_charged_to_creator(struct vm_ctx *ctx)
{
	struct mc_job *job = vm_shared(sizeof(*job));
	/* map and access (4 bytes an expert), owner, pins (4) and last_use (8) a slot */
	long long region_min = 64LL * 64 * 8 + 4096LL * 16;
	struct mc_cgroup cg;
	int status;

	mc_cgroup_get(&cg, "region");
	snprintf(job->cgroup, sizeof(job->cgroup), "%s", cg.folder);
	vm_pool_name(ctx, 1, job->name);
	status = vm_reap(vm_spawn(mc_creator_main, job), 10000, "the creator");
	mc_cgroup_put(&cg);
	VM_ASSERT_MSG(WIFEXITED(status) && !WEXITSTATUS(status),
		      "the creator failed (status 0x%x): could it join %s?", status, job->cgroup);
	VM_ASSERT_MSG(!job->create_err && !job->destroy_err, "POOL_CREATE %s, POOL_DESTROY %s",
		      job->create_err ? vm_errname(job->create_err) : "ok",
		      job->destroy_err ? vm_errname(job->destroy_err) : "ok");
	VM_ASSERT_MSG(job->created - job->before >= region_min,
		      "the creator's cgroup's vmalloc went from %lld to %lld bytes with the pool: "
		      "want at least the map region's %lld more",
		      job->before, job->created, region_min);
	VM_ASSERT_MSG(job->created - job->destroyed >= region_min,
		      "destroying the pool took the vmalloc count from %lld to %lld bytes: want "
		      "at least %lld given back",
		      job->created, job->destroyed, region_min);
}

/*
 * 64 MiB of host pages (16 x 4 experts of 1 MiB) in a cgroup of 32 MiB:
 * more than the cgroup may hold, far less than the VM has.
 */
#define MC_LIMIT "33554432"
static const struct vm_geom mc_big_geom = {
    .n_layers = 16,
    .n_experts = 4,
    .expert_begin = 0,
    .expert_end = 4,
    .n_slots = 4,
    .expert_bytes = 1 << 20,
    .mode = 0600,
};

/* In the cgroup: POOL_CREATE of mc_big_geom by ioctl; exits with its errno. */
static void mc_big_ioctl_main(void *arg)
{
	struct mc_job *job = arg;
	struct moecache_pool_create pc;
	int fd;

	VM_ASSERT(mc_write(job->cgroup, "cgroup.procs", "0"));
	fd = vm_open_dev();
	vm_fill_create(&pc, job->name, &mc_big_geom);
	job->create_err = ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc) < 0 ? errno : 0;
	close(fd);
}

/* In the cgroup: the same by netlink, as moecachectl pool create. */
static void mc_big_netlink_main(void *arg)
{
	struct mc_job *job = arg;
	char layers[16], experts[16], bytes[16], slots[16];
	int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	VM_ASSERT(mc_write(job->cgroup, "cgroup.procs", "0"));
	snprintf(layers, sizeof(layers), "%u", mc_big_geom.n_layers);
	snprintf(experts, sizeof(experts), "%u", mc_big_geom.n_experts);
	snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)mc_big_geom.expert_bytes);
	snprintf(slots, sizeof(slots), "%u", mc_big_geom.n_slots);
	if (null_fd >= 0)
		dup2(null_fd, STDOUT_FILENO);
	execlp("moecachectl", "moecachectl", "pool", "create", job->name, "--layers", layers,
	       "--experts", experts, "--expert-bytes", bytes, "--slots", slots, (char *)NULL);
	VM_FAIL("exec moecachectl: %s", vm_errname(errno));
}

/*
 * Runs main in a fresh cgroup of MC_LIMIT bytes and checks that it was not
 * killed, that the cgroup saw no OOM kill, that no pool is left and that
 * the cgroup holds no more than before. Returns the child's wait status.
 */
static int mc_over_limit(struct vm_ctx *ctx, void (*main)(void *), struct mc_job *job)
{
	struct mc_cgroup cg;
	long long kills, current;
	int status;

	mc_cgroup_get(&cg, "limit");
	snprintf(job->cgroup, sizeof(job->cgroup), "%s", cg.folder);
	vm_pool_name(ctx, 1, job->name);
	job->create_err = -1;
	if (!mc_write(cg.folder, "memory.max", MC_LIMIT)) {
		mc_cgroup_put(&cg);
		VM_FAIL("cannot set %s/memory.max", cg.folder);
	}
	mc_write(cg.folder, "memory.swap.max", "0");
	status = vm_reap(vm_spawn(main, job), 60000, "the creator");
	kills = mc_event(cg.folder, "oom_kill");
	current = mc_stat_vmalloc(cg.folder);
	mc_cgroup_put(&cg);
	VM_ASSERT_MSG(!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL,
		      "the creator was killed (SIGKILL): the OOM killer ran for a pool over its "
		      "cgroup's memory.max");
	VM_ASSERT_MSG(kills == 0, "the cgroup's memory.events oom_kill is %lld, want 0", kills);
	VM_ASSERT_MSG(current == 0, "the cgroup still holds %lld bytes of vmalloc", current);
	vm_expect_no_pool(job->name);
	return status;
}

static void bad_input_memcg_pool_create_over_limit_ioctl(struct vm_ctx *ctx)
{
	struct mc_job *job = vm_shared(sizeof(*job));
	int status = mc_over_limit(ctx, mc_big_ioctl_main, job);

	VM_ASSERT_MSG(WIFEXITED(status) && !WEXITSTATUS(status), "the creator failed (0x%x)",
		      status);
	VM_ASSERT_MSG(job->create_err == ENOMEM, "POOL_CREATE over memory.max: %s, want ENOMEM",
		      job->create_err ? vm_errname(job->create_err) : "created");
}

static void bad_input_memcg_pool_create_over_limit_netlink(struct vm_ctx *ctx)
{
	struct mc_job *job = vm_shared(sizeof(*job));
	int status = mc_over_limit(ctx, mc_big_netlink_main, job);

	VM_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "moecachectl pool create over memory.max: status 0x%x, want exit 1", status);
}

static const struct vm_test memcg_tests[] = {
    VM_TEST(basic_memcg_map_region_charged_to_creator,
	    "a pool's map region is charged to its creator's memory cgroup (memory.stat vmalloc) "
	    "and given back when the pool is destroyed"),
    VM_TEST(bad_input_memcg_pool_create_over_limit_ioctl,
	    "POOL_CREATE by ioctl of a pool larger than the creator's memory.max is ENOMEM: "
	    "nobody killed, no oom_kill, no pool, nothing left charged"),
    VM_TEST(bad_input_memcg_pool_create_over_limit_netlink,
	    "the same by netlink (moecachectl pool create): it fails, nobody killed, "
	    "no oom_kill, no pool"),
};

const struct vm_suite vm_memcg_suite = {memcg_tests, ARRAY_SIZE(memcg_tests)};
