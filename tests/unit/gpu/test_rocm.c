// SPDX-License-Identifier: MIT
/*
 * The ROCm side without an AMD GPU: the libraries are Debian's (or
 * missing), there is no /dev/kfd and no amdgpu render node, and every
 * entry point must fail cleanly and say why.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "agent/copy/gpu.h"
#include "lib/gpu/bank.h"
#include "lib/gpu/rocm_api.h"

static struct agent_backend_config test_cfg(void)
{
	return (struct agent_backend_config){
	    .pool = "p", .n_slots = 4, .expert_bytes = 8192, .copy_threads = 2};
}

Test(rocm, bad_input_missing_hsakmt,
     .description = "no libhsakmt: create fails with -ENOENT naming it")
{
	struct agent_backend_config cfg = test_cfg();
	char err[320] = "";
	void *priv = NULL;

	setenv(MC_HSAKMT_LIBRARY_ENV, "/nonexistent/libhsakmt.so.1", 1);
	cr_expect_eq(agent_rocm_backend_create(&cfg, NULL, &priv, err, sizeof(err)), -ENOENT);
	cr_expect(strstr(err, "/nonexistent/libhsakmt.so.1"), "%s", err);
	cr_expect_null(priv);
}

Test(rocm, bad_input_missing_libdrm_amdgpu, .description = "no libdrm_amdgpu: -ENOENT naming it")
{
	struct mc_drm_amdgpu_api api;
	char err[320] = "";

	cr_expect_eq(
	    mc_drm_amdgpu_api_load(&api, "/nonexistent/libdrm_amdgpu.so.1", err, sizeof(err)),
	    -ENOENT);
	cr_expect(strstr(err, "libdrm_amdgpu"), "%s", err);
}

Test(rocm, bad_input_wrong_library,
     .description = "a library that is not the thunk: -ENOSYS naming the symbol")
{
	struct mc_hsakmt_api api;
	char err[320] = "";

	cr_expect_eq(mc_hsakmt_api_load(&api, "libm.so.6", err, sizeof(err)), -ENOSYS);
	cr_expect(strstr(err, "hsaKmtOpenKFD"), "%s", err);
}

Test(rocm, basic_installed_libraries_resolve,
     .description = "Debian's libhsakmt and libdrm_amdgpu have every entry point used")
{
	struct mc_hsakmt_api kmt;
	struct mc_drm_amdgpu_api drm;
	char err[320] = "";

	cr_assert_eq(mc_hsakmt_api_load(&kmt, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_not_null(kmt.hsaKmtCreateQueue);
	cr_expect_not_null(kmt.hsaKmtRegisterGraphicsHandleToNodes);
	mc_hsakmt_api_unload(&kmt);
	cr_assert_eq(mc_drm_amdgpu_api_load(&drm, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_not_null(drm.amdgpu_bo_va_op);
	mc_drm_amdgpu_api_unload(&drm);
}

Test(rocm, basic_no_kfd, .description = "without /dev/kfd create fails with -ENODEV that names it")
{
	struct agent_backend_config cfg = test_cfg();
	char err[320] = "";
	void *priv = NULL;

	if (access(MC_KFD_DEVICE, F_OK) == 0)
		cr_skip_test("this machine has %s", MC_KFD_DEVICE);
	cr_expect_eq(agent_rocm_backend_create(&cfg, NULL, &priv, err, sizeof(err)), -ENODEV);
	cr_expect(strstr(err, MC_KFD_DEVICE), "%s", err);
	cr_expect_null(priv);
}

Test(rocm, basic_ops_create_no_kfd,
     .description = "the ops' create fails the same way, with no backend left")
{
	struct agent_backend_config cfg = test_cfg();
	void *priv = NULL;

	if (access(MC_KFD_DEVICE, F_OK) == 0)
		cr_skip_test("this machine has %s", MC_KFD_DEVICE);
	cr_expect_eq(agent_rocm_backend.create(&cfg, &priv), -ENODEV);
	cr_expect_null(priv);
	cr_expect_eq(agent_rocm_backend.id, MOECACHE_BACKEND_ROCM);
}

Test(rocm, basic_uuid_round_trip,
     .description = "the device uuid carries the PCI location and device id")
{
	uint8_t uuid[16];
	uint32_t domain, location;
	uint16_t device_id;

	mc_rocm_uuid_make(1, 0x0310, 0x744c, uuid);
	cr_expect_eq(memcmp(uuid, "AMDG", 4), 0);
	cr_assert_eq(mc_rocm_uuid_parse(uuid, &domain, &location, &device_id), 0);
	cr_expect_eq(domain, 1);
	cr_expect_eq(location, 0x0310);
	cr_expect_eq(device_id, 0x744c);
}

Test(rocm, bad_input_foreign_uuid, .description = "a CUDA uuid is not taken for an AMD GPU")
{
	uint8_t uuid[16];
	uint32_t domain, location;
	uint16_t device_id;

	memset(uuid, 0xd0, sizeof(uuid));
	cr_expect_eq(mc_rocm_uuid_parse(uuid, &domain, &location, &device_id), -EINVAL);
}

/* A sysfs tree with one render node whose device is 0000:03:00.0. */
static void fake_sysfs(char *root, size_t len)
{
	char path[PATH_MAX];

	snprintf(root, len, "/tmp/moecache-gpu-sysfs-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/class", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/class/drm", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/class/drm/renderD200", root);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/class/drm/renderD200/device", root);
	cr_assert_eq(symlink("../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0", path), 0);
}

static void fake_sysfs_remove(const char *root)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/class/drm/renderD200/device", root);
	unlink(path);
	snprintf(path, sizeof(path), "%s/class/drm/renderD200", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/class/drm", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/class", root);
	rmdir(path);
	rmdir(root);
}

Test(rocm, basic_render_node_by_pci,
     .description = "the render node is found by PCI location, other locations are -ENODEV")
{
	char root[64];
	int fd;

	fake_sysfs(root, sizeof(root));
	/* Found: opening /dev/dri/renderD200 is what fails here (there is none). */
	fd = mc_rocm_open_render_node(root, 0, 0x03 << 8 | 0 << 3 | 0);
	cr_expect(fd == -ENOENT || fd >= 0, "%d", fd);
	if (fd >= 0)
		close(fd);
	cr_expect_eq(mc_rocm_open_render_node(root, 0, 0x04 << 8), -ENODEV);
	cr_expect_eq(mc_rocm_open_render_node(root, 1, 0x03 << 8), -ENODEV);
	fake_sysfs_remove(root);
}

Test(rocm, bad_input_import_without_gpu,
     .description = "a client import for a GPU that is not there fails and says why")
{
	struct moecache_bank_map m = {.backend = MOECACHE_BACKEND_ROCM,
				      .fd = -1,
				      .n_slots = 1,
				      .bytes = 2u << 20,
				      .slot_stride = 2u << 20};

	mc_rocm_uuid_make(0x7777, 0xfe00, 0x1234, m.desc.device_uuid);
	cr_expect_eq(mc_rocm_bank_import(&m), -ENODEV);
	cr_expect(strstr(moecache_bank_import_error(), "no render node"), "%s",
		  moecache_bank_import_error());
	cr_expect_null(m.base);
}

Test(rocm, bad_input_import_foreign_descriptor,
     .description = "a descriptor without an AMD uuid is -EPROTO")
{
	struct moecache_bank_map m = {.backend = MOECACHE_BACKEND_ROCM,
				      .fd = -1,
				      .n_slots = 1,
				      .bytes = 2u << 20,
				      .slot_stride = 2u << 20};

	cr_expect_eq(mc_rocm_bank_import(&m), -EPROTO);
	cr_expect(strstr(moecache_bank_import_error(), "no AMD GPU"), "%s",
		  moecache_bank_import_error());
}

Test(rocm, bad_input_calls_without_import,
     .description = "GPU bank calls on a map that was never imported refuse instead of touching it")
{
	struct moecache_bank_map m = {.backend = MOECACHE_BACKEND_ROCM};
	uint32_t slot = 0;

	/* Nothing imported: the GPU calls refuse rather than touch a NULL base. */
	cr_expect_eq(moecache_bank_release_after(NULL, &m, NULL, &slot, 1), -EINVAL);
	cr_expect_eq(moecache_bank_slot_addr(&m, 0), 0);
	cr_expect_str_eq(moecache_bank_error(&m), "");
}
