// SPDX-License-Identifier: GPL-2.0
/*
 * ATTACH allocates a file's arrays before it takes the lock every pool
 * operation takes, sized by a first look at the pool; it then checks, under
 * that lock, that the pool it attaches to is the one it sized them for
 * (kmod/file.c, attach_bufs_prepare()). Here the pool is destroyed and made
 * again, with another geometry, as fast as it goes, while a client attaches
 * with fast pins: every ATTACH that succeeds must get arrays and regions of
 * the pool it joined (on a KASAN kernel an undersized array is a report).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define AT_RUN_MS 1500

struct at_job {
	char name[MOECACHE_NAME_LEN];
	int stop;
	unsigned int remade;
};

/* Two geometries of one name: 8 slots, and 1024 over four times the experts. */
static void at_geom(struct vm_geom *g, bool big)
{
	*g = vm_geom_default;
	g->expert_bytes = 4096;
	if (big) {
		g->n_layers = 16;
		g->n_experts = 64;
		g->expert_end = 64;
		g->n_slots = 1024;
	}
}

static void at_remake_main(void *arg)
{
	struct at_job *job = arg;
	int fd = vm_open_dev();
	bool big = false;

	while (!__atomic_load_n(&job->stop, __ATOMIC_ACQUIRE)) {
		struct moecache_pool_create pc;
		struct moecache_pool_name pn;
		struct vm_geom g;

		memset(&pn, 0, sizeof(pn));
		snprintf(pn.name, sizeof(pn.name), "%s", job->name);
		/* EBUSY while the client is attached: then try again. */
		if (ioctl(fd, MOECACHE_IOC_POOL_DESTROY, &pn) < 0)
			continue;
		big = !big;
		at_geom(&g, big);
		vm_fill_create(&pc, job->name, &g);
		VM_OK(ioctl(fd, MOECACHE_IOC_POOL_CREATE, &pc));
		job->remade++;
	}
	close(fd);
}

static void concurrency_attach_vs_pool_made_again(struct vm_ctx *ctx)
{
	struct at_job *job = vm_shared(sizeof(*job));
	unsigned int attached[2] = {0, 0};
	uint64_t until;
	struct vm_geom g;
	pid_t remaker;

	vm_pool_name(ctx, 1, job->name);
	at_geom(&g, false);
	vm_pool_create(job->name, &g);
	remaker = vm_spawn(at_remake_main, job);
	until = vm_now_ms() + AT_RUN_MS;
	while (vm_now_ms() < until) {
		struct vm_view v;
		int fd = vm_open_dev();
		int ret = vm_try_attach_fd_flags(&v, fd, job->name, MOECACHE_ROLE_CLIENT,
						 MOECACHE_ATTACH_FAST_PINS);
		__u32 *pins;

		if (ret) {
			/* Between its DESTROY and its CREATE the pool is not there. */
			VM_ASSERT_MSG(ret == -ENOENT, "ATTACH while the pool is made again: %s",
				      vm_errname(-ret));
			close(fd);
			continue;
		}
		VM_ASSERT_MSG(v.att.n_slots == 8 || v.att.n_slots == 1024, "ATTACH gave %u slots",
			      v.att.n_slots);
		VM_EQ(v.hdr->n_slots, v.att.n_slots);
		VM_ASSERT(v.att.off.pins_size >= (size_t)v.att.n_slots * sizeof(__u32));
		pins = mmap(NULL, v.att.off.pins_size, PROT_READ | PROT_WRITE, MAP_SHARED, v.fd,
			    (off_t)v.att.off.pins_offset);
		VM_ASSERT_MSG(pins != MAP_FAILED, "mmap of the pins region: %s", vm_errname(errno));
		/* The last slot's word: a store that faults the region's last page in. */
		__atomic_store_n(&pins[v.att.n_slots - 1], 0, __ATOMIC_RELEASE);
		munmap(pins, v.att.off.pins_size);
		attached[v.att.n_slots == 1024]++;
		vm_detach(&v);
	}
	__atomic_store_n(&job->stop, 1, __ATOMIC_RELEASE);
	vm_reap_ok(remaker, 10000, "the pool's remaker");
	vm_pool_destroy(job->name);
	VM_ASSERT_MSG(attached[0] + attached[1] > 0 && job->remade > 0,
		      "%u attaches to the small pool, %u to the big one, %u pools made again",
		      attached[0], attached[1], job->remade);
}

static const struct vm_test attach_tests[] = {
    VM_TEST(concurrency_attach_vs_pool_made_again,
	    "ATTACH with fast pins while the pool is destroyed and made again with another "
	    "geometry: every attach gets the regions of the pool it joined"),
};

const struct vm_suite vm_attach_suite = {attach_tests, ARRAY_SIZE(attach_tests)};
