// SPDX-License-Identifier: GPL-2.0
/*
 * What a pool allocates is charged to the memory cgroup of the process that
 * created it (docs/abi.md, "Security model"). The map region is the one
 * part that vmalloc()s; memory.stat's "vmalloc" counts exactly that, so a
 * pool whose map region is a few hundred KiB shows in it, and leaves it
 * when destroyed. The creator runs in a memory cgroup of its own, on a
 * cgroup2 hierarchy the test mounts if the VM has none.
 */
#include <errno.h>
#include <fcntl.h>
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

/* The cgroup2 root: the VM's, or one mounted at mount_dir (then *mounted). */
static const char *mc_root(char *mount_dir, bool *mounted)
{
	*mounted = false;
	if (!access("/sys/fs/cgroup/cgroup.controllers", R_OK))
		return "/sys/fs/cgroup";
	if (!mkdtemp(mount_dir))
		VM_FAIL("mkdtemp: %s", vm_errname(errno));
	if (mount("cgroup2", mount_dir, "cgroup2", 0, NULL)) {
		rmdir(mount_dir);
		vm_skip("no cgroup2 here (%s)", vm_errname(errno));
	}
	*mounted = true;
	return mount_dir;
}

static void basic_memcg_map_region_charged_to_creator(struct vm_ctx *ctx)
{
	struct mc_job *job = vm_shared(sizeof(*job));
	/* map and access (4 bytes an expert), owner, pins (4) and last_use (8) a slot */
	long long region_min = 64LL * 64 * 8 + 4096LL * 16;
	char mount_dir[] = "/tmp/moecache-cgroup.XXXXXX";
	const char *root;
	bool mounted;
	int status;

	root = mc_root(mount_dir, &mounted);
	snprintf(job->cgroup, sizeof(job->cgroup), "%s/moecache-vmtest-%d", root, (int)getpid());
	vm_pool_name(ctx, 1, job->name);
	if (!mc_write(root, "cgroup.subtree_control", "+memory") || mkdir(job->cgroup, 0755) ||
	    mc_stat_vmalloc(job->cgroup) < 0) {
		rmdir(job->cgroup);
		if (mounted) {
			umount(mount_dir);
			rmdir(mount_dir);
		}
		vm_skip("no memory controller with a vmalloc count here");
	}
	status = vm_reap(vm_spawn(mc_creator_main, job), 10000, "the creator");
	rmdir(job->cgroup);
	if (mounted) {
		umount(mount_dir);
		rmdir(mount_dir);
	}
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

static const struct vm_test memcg_tests[] = {
    VM_TEST(basic_memcg_map_region_charged_to_creator,
	    "a pool's map region is charged to its creator's memory cgroup (memory.stat vmalloc) "
	    "and given back when the pool is destroyed"),
};

const struct vm_suite vm_memcg_suite = {memcg_tests, ARRAY_SIZE(memcg_tests)};
