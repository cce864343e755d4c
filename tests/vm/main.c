// SPDX-License-Identifier: GPL-2.0
/*
 * moecache-vmtest's main: the suites in the order they run, and what the
 * harness (tests/harness/tap.h) does around each test here: a pool name of
 * its own, and afterwards the pools it left destroyed and the device's
 * counters compared (a passed test must leave nothing).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "harness.h"

static const struct vm_suite *const vm_suites[] = {
    &vm_basic_suite,
    &vm_bad_input_suite,
    &vm_permission_suite,
    &vm_gup_suite,
    &vm_concurrency_suite,
    &vm_fastpins_suite,
    &vm_tenant_suite,
    &vm_fastpin_count_suite,
    &vm_queue_depth_suite,
    &vm_acq_cpu_suite,
    &vm_memlock_suite,
    &vm_memcg_suite,
    &vm_probing_suite,
    &vm_tiers_suite,
    &vm_waits_suite,
    &vm_tenant_rights_suite,
    &vm_wrong_arguments_suite,
    &vm_pin_share_suite,
    &vm_attach_suite,
    &vm_lib_wait_suite,
    /* Last: it ends with the module-unload check. */
    &vm_lifetime_suite,
};

/* The runner's state of the test in flight. */
struct vm_runner {
	struct vm_ctx ctx;
	struct moecache_info before;
};

static void vm_make_pool_name(const struct tap_test *t, unsigned int number,
			      char name[MOECACHE_NAME_LEN])
{
	/* Room for "-NN" suffixes of extra pools; '_' is not a pool name char. */
	size_t max = MOECACHE_NAME_LEN - 1 - 4;
	size_t i;

	snprintf(name, max + 1, "vmt%u-%s", number, t->name);
	for (i = 0; name[i]; i++)
		if (name[i] == '_')
			name[i] = '-';
}

static int vm_info_raw(struct moecache_info *info)
{
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	int ret = 0;

	memset(info, 0, sizeof(*info));
	if (fd < 0)
		return -errno;
	if (ioctl(fd, MOECACHE_IOC_GET_INFO, info) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int vm_before(void *arg, const struct tap_test *t, unsigned int number, char *why,
		     size_t len)
{
	struct vm_runner *r = arg;
	int ret;

	memset(&r->ctx, 0, sizeof(r->ctx));
	r->ctx.test = t->name;
	r->ctx.page_size = sysconf(_SC_PAGESIZE);
	ret = vm_info_raw(&r->before);
	if (ret) {
		snprintf(why, len, "GET_INFO on %s: %s", MOECACHE_DEVICE, vm_errname(-ret));
		return -1;
	}
	vm_make_pool_name(t, number, r->ctx.pool);
	return 0;
}

static void vm_run(void *arg, const struct tap_test *t, unsigned int number)
{
	struct vm_runner *r = arg;
	const struct vm_test *vt = t->data;

	vt->run(&r->ctx);
}

/* Destroys what the test left behind; a passed test must leave nothing. */
static void vm_cleanup_pools(const char *base, struct tap_outcome *o)
{
	char name[MOECACHE_NAME_LEN];
	int fd = open(MOECACHE_DEVICE, O_RDWR | O_CLOEXEC);
	unsigned int n;

	if (fd < 0)
		return;
	for (n = 0; n <= VM_MAX_EXTRA_POOLS; n++) {
		struct moecache_pool_name pn;
		int len;

		memset(&pn, 0, sizeof(pn));
		if (n == 0)
			len = snprintf(name, sizeof(name), "%s", base);
		else
			len = snprintf(name, sizeof(name), "%s-%u", base, n);
		if (len >= (int)sizeof(name))
			continue;
		memcpy(pn.name, name, (size_t)len + 1);
		if (ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) == 0) {
			if (o->kind == TAP_PASS)
				tap_outcome_fail(o, "left pool %s behind (destroyed by the runner)",
						 name);
		} else if (errno != ENOENT) {
			int err = errno;

			if (o->kind != TAP_FAIL)
				tap_outcome_fail(o, "pool %s left behind cannot be destroyed: %s",
						 name, vm_errname(err));
			else
				tap_outcome_note(o, "runner: destroy of %s left behind: %s", name,
						 vm_errname(err));
		}
	}
	close(fd);
}

static void vm_after(void *arg, const struct tap_test *t, unsigned int number,
		     struct tap_outcome *o)
{
	struct vm_runner *r = arg;
	struct moecache_info after;

	if (!r->ctx.pool[0])
		return; /* before() failed */
	vm_cleanup_pools(r->ctx.pool, o);
	if (vm_info_raw(&after) == 0 && (after.n_pools != r->before.n_pools ||
					 after.host_bytes_used != r->before.host_bytes_used))
		tap_outcome_fail(o, "leak: n_pools %u -> %u, host_bytes_used %llu -> %llu",
				 r->before.n_pools, after.n_pools,
				 (unsigned long long)r->before.host_bytes_used,
				 (unsigned long long)after.host_bytes_used);
}

int main(int argc, char **argv)
{
	static struct vm_runner runner;
	const struct tap_suite suite = {
	    .word = "vm",
	    .about = "The moecache driver's tests against docs/abi.md, run as root with the "
		     "module loaded.",
	    .default_timeout_s = VM_DEFAULT_TIMEOUT_S,
	    .arg = &runner,
	    .before = vm_before,
	    .run = vm_run,
	    .after = vm_after,
	};
	struct tap_test *tests;
	size_t n = 0, s, k;
	int ret;

	for (s = 0; s < ARRAY_SIZE(vm_suites); s++)
		n += vm_suites[s]->count;
	tests = calloc(n, sizeof(*tests));
	if (!tests)
		return 2;
	n = 0;
	for (s = 0; s < ARRAY_SIZE(vm_suites); s++)
		for (k = 0; k < vm_suites[s]->count; k++) {
			const struct vm_test *vt = &vm_suites[s]->tests[k];

			tests[n++] = (struct tap_test){.name = vt->name,
						       .description = vt->description,
						       .timeout_s = vt->timeout_s,
						       .data = vt};
		}
	ret = tap_main(&suite, tests, n, argc, argv);
	free(tests);
	return ret;
}
