// SPDX-License-Identifier: MIT
/* libmoecache's one table of bank backends' names, both ways. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#include "libmoecache.h"

static const struct {
	uint32_t id;
	const char *name;
} backend_names[] = {
    {MOECACHE_BACKEND_NONE, "auto"},
    {MOECACHE_BACKEND_CPU, "cpu"},
    {MOECACHE_BACKEND_CUDA, "cuda"},
    {MOECACHE_BACKEND_ROCM, "rocm"},
};

Test(backend_name, basic_every_id_named,
     .description = "each backend of the uapi has its name, and parsing it gives the id back")
{
	for (size_t i = 0; i < sizeof(backend_names) / sizeof(backend_names[0]); i++) {
		uint32_t id = ~0u;

		cr_expect_str_eq(moecache_backend_name(backend_names[i].id), backend_names[i].name);
		cr_expect_eq(moecache_backend_parse(backend_names[i].name, &id), 0);
		cr_expect_eq(id, backend_names[i].id, "%s: %u", backend_names[i].name, id);
	}
}

Test(backend_name, bad_input_unknown_id,
     .description = "an id past the table, or far past it, has no name (NULL)")
{
	cr_expect_null(moecache_backend_name(MOECACHE_BACKEND_ROCM + 1));
	cr_expect_null(moecache_backend_name(UINT32_MAX));
}

Test(backend_name, bad_input_unknown_name,
     .description = "a name not in the table is EINVAL and leaves the output alone")
{
	static const char *const bad[] = {"", "CPU", "cpu ", "none", "cud", "rocm0", "backend-1"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t id = 77;

		cr_expect_eq(moecache_backend_parse(bad[i], &id), -EINVAL, "'%s'", bad[i]);
		cr_expect_eq(id, 77, "'%s'", bad[i]);
	}
}

Test(backend_name, bad_input_null_arguments, .description = "NULL name or output is EINVAL")
{
	uint32_t id = 77;

	cr_expect_eq(moecache_backend_parse(NULL, &id), -EINVAL);
	cr_expect_eq(id, 77);
	cr_expect_eq(moecache_backend_parse("cpu", NULL), -EINVAL);
}
