// SPDX-License-Identifier: GPL-2.0
/*
 * Name probing (docs/abi.md, "Security model"): a caller with no right at
 * all on a pool (it may attach in no role) cannot tell it from a name
 * nobody took: ATTACH in any role and POOL_DESTROY answer ENOENT, as for
 * a pool that does not exist. A caller that may attach in some role learns
 * that the pool exists: EACCES for a role its rights do not cover, EPERM
 * for a destroy it may not do.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

struct pr_job {
	char pool[MOECACHE_NAME_LEN];
	char node[64];
	int attach[4]; /* by role: 0 or errno */
	int destroy;
};

static int pr_attach(int fd, const char *pool, __u32 role)
{
	struct moecache_attach at;

	memset(&at, 0, sizeof(at));
	snprintf(at.name, sizeof(at.name), "%s", pool);
	at.role = role;
	return ioctl(fd, MOECACHE_IOC_ATTACH, &at) < 0 ? errno : 0;
}

/* As uid/gid 65534: each role on a fresh fd, then a destroy. */
static void pr_probe_main(void *arg)
{
	static const __u32 roles[] = {MOECACHE_ROLE_CLIENT, MOECACHE_ROLE_AGENT,
				      MOECACHE_ROLE_LOADER};
	struct pr_job *job = arg;
	int fd = vm_become_unprivileged(NOBODY, NOBODY, job->node);
	struct moecache_pool_name pn;
	size_t i;

	close(fd);
	for (i = 0; i < ARRAY_SIZE(roles); i++) {
		fd = open(job->node, O_RDWR | O_CLOEXEC);
		VM_ASSERT(fd >= 0);
		job->attach[roles[i]] = pr_attach(fd, job->pool, roles[i]);
		close(fd);
	}
	fd = open(job->node, O_RDWR | O_CLOEXEC);
	VM_ASSERT(fd >= 0);
	memset(&pn, 0, sizeof(pn));
	snprintf(pn.name, sizeof(pn.name), "%s", job->pool);
	job->destroy = ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0 ? errno : 0;
	close(fd);
}

/* Row of the table: a pool (or none) and what uid 65534 gets. */
struct pr_case {
	const char *what;
	bool exists;
	__u32 gid;
	__u32 mode;
	int client, agent, loader, destroy;
};

static const struct pr_case pr_cases[] = {
    {"no such pool", false, 0, 0, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0600", true, 0, 0600, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0640 of another group", true, 1, 0640, ENOENT, ENOENT, ENOENT, ENOENT},
    {"root's 0666 with others' bits cleared: 0660", true, 0, 0660, ENOENT, ENOENT, ENOENT,
     ENOENT},
    {"root's 0604: others read", true, 0, 0604, 0, EACCES, EACCES, EPERM},
    {"root's 0640 of nobody's group", true, NOBODY, 0640, 0, EACCES, EACCES, EPERM},
    {"root's 0602: others write", true, 0, 0602, EACCES, 0, 0, EPERM},
};

static void pr_expect(const struct pr_case *c, const char *op, int got, int want)
{
	if (got != want)
		VM_FAIL("%s, %s by uid %u: expected %s, got %s", c->what, op, NOBODY,
			want ? vm_errname(want) : "success", got ? vm_errname(got) : "success");
}

static void permission_probe_table(struct vm_ctx *ctx)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(pr_cases); i++) {
		const struct pr_case *c = &pr_cases[i];
		struct pr_job *job = vm_shared(sizeof(*job));
		struct vm_geom g = vm_geom_default;

		snprintf(job->pool, sizeof(job->pool), "%s", ctx->pool);
		vm_get_node(job->node, sizeof(job->node));
		if (c->exists) {
			g.gid = c->gid;
			g.mode = c->mode;
			vm_pool_create(ctx->pool, &g);
		}
		vm_reap_ok(vm_spawn(pr_probe_main, job), 10000, "the unprivileged prober");
		vm_put_node(job->node);
		pr_expect(c, "client ATTACH", job->attach[MOECACHE_ROLE_CLIENT], c->client);
		pr_expect(c, "agent ATTACH", job->attach[MOECACHE_ROLE_AGENT], c->agent);
		pr_expect(c, "loader ATTACH", job->attach[MOECACHE_ROLE_LOADER], c->loader);
		pr_expect(c, "POOL_DESTROY", job->destroy, c->destroy);
		if (c->exists)
			vm_pool_destroy(ctx->pool);
		else
			vm_expect_no_pool(ctx->pool);
	}
}

static const struct vm_test probing_tests[] = {
    VM_TEST(permission_probe_table,
	    "uid 65534 gets ENOENT from ATTACH and POOL_DESTROY of a pool it has no right on, "
	    "as for none; EACCES/EPERM only on a pool it may attach to (table)"),
};

const struct vm_suite vm_probing_suite = {probing_tests, ARRAY_SIZE(probing_tests)};
