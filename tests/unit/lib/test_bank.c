// SPDX-License-Identifier: MIT
/* Bank import per backend, without the module: the CPU import of a memfd. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/mc_internal.h"
#include "libmoecache.h"

/* A memfd of n_slots pages, slot s filled with byte s + 1. */
static int make_bank(uint32_t n_slots, struct moecache_bank_map *b)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("test-bank", MFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, n_slots * page), 0);
	for (uint32_t s = 0; s < n_slots; s++) {
		char buf[64];

		memset(buf, (int)s + 1, sizeof(buf));
		cr_assert_eq(pwrite(fd, buf, sizeof(buf), (off_t)s * page), (ssize_t)sizeof(buf));
	}
	memset(b, 0, sizeof(*b));
	b->backend = MOECACHE_BACKEND_CPU;
	b->n_slots = n_slots;
	b->fd = fd;
	b->bytes = (uint64_t)n_slots * page;
	b->slot_stride = page;
	b->expert_bytes = page;
	return fd;
}

Test(bank, basic_cpu_import_maps_slots,
     .description = "the CPU import maps each slot at its stride")
{
	const struct mc_bank_backend *be = mc_bank_backend_find(MOECACHE_BACKEND_CPU);
	struct moecache_bank_map b;
	const unsigned char *p;

	cr_assert_not_null(be);
	make_bank(3, &b);
	cr_assert_eq(be->import(&b), 0);
	p = moecache_bank_slot(&b, 2);
	cr_assert_not_null(p);
	cr_assert_eq(p[0], 3);
	cr_assert_eq(((const unsigned char *)moecache_bank_slot(&b, 0))[63], 1);
	cr_assert_null(moecache_bank_slot(&b, 3));
	moecache_bank_unimport(&b);
	cr_assert_eq(b.fd, -1);
}

/* The permissions /proc/self/maps shows for the mapping starting at addr. */
static void mapping_perms(const void *addr, char perms[5])
{
	char line[512], start[32];
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert_not_null(f);
	snprintf(start, sizeof(start), "%lx-", (unsigned long)addr);
	perms[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, start, strlen(start)))
			sscanf(line, "%*s %4s", perms);
	fclose(f);
}

Test(bank, basic_cpu_import_read_only, .description = "a client's import maps the bank read-only")
{
	const struct mc_bank_backend *be = mc_bank_backend_find(MOECACHE_BACKEND_CPU);
	struct moecache_bank_map b;
	char perms[5];

	make_bank(1, &b);
	cr_assert_eq(be->import(&b), 0);
	mapping_perms(b.base, perms);
	cr_assert_str_eq(perms, "r--s");
	moecache_bank_unimport(&b);
	make_bank(1, &b);
	b.writable = true;
	cr_assert_eq(be->import(&b), 0);
	mapping_perms(b.base, perms);
	cr_assert_str_eq(perms, "rw-s");
	moecache_bank_unimport(&b);
}

Test(bank, bad_input_device_backends_without_driver,
     .description = "CUDA and ROCm imports fail cleanly when their driver library is absent")
{
	struct moecache_bank_map b = {.fd = -1};

	setenv("MOECACHE_LIBCUDA", "libmoecache-test-no-such-libcuda.so", 1);
	setenv("MOECACHE_LIBHSAKMT", "libmoecache-test-no-such-libhsakmt.so", 1);
	cr_assert_lt(mc_bank_backend_find(MOECACHE_BACKEND_CUDA)->import(&b), 0);
	cr_assert_lt(mc_bank_backend_find(MOECACHE_BACKEND_ROCM)->import(&b), 0);
	cr_assert_neq(moecache_bank_import_error()[0], '\0', "the failure is explained");
	cr_assert_null(mc_bank_backend_find(MOECACHE_BACKEND_NONE));
	cr_assert_null(mc_bank_backend_find(99));
}

Test(bank, bad_input_import_unattached,
     .description = "importing on an unattached handle is ENOTCONN")
{
	struct moecache mc = {.fd = -1};
	struct moecache_bank_map b;

	cr_assert_eq(moecache_bank_import(&mc, &b), -ENOTCONN);
	cr_assert_eq(b.fd, -1);
}
