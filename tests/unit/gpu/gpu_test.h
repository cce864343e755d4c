/* SPDX-License-Identifier: MIT */
/* Helpers of the GPU unit tests: the fake CUDA driver beside the test binary, waiting on
 * completions. */
#ifndef MOECACHE_TESTS_GPU_TEST_H
#define MOECACHE_TESTS_GPU_TEST_H

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/gpu/cuda_api.h"

#define FAKE_CUDA_NAME "libmoecache-fakecuda.so"

struct fake_cuda_counts {
	int allocations, mappings, reservations, registrations, streams, events, contexts;
};

/* The path of a file built beside the test binary (out has PATH_MAX bytes). */
static inline const char *beside_exe(const char *name, char *out)
{
	ssize_t n = readlink("/proc/self/exe", out, PATH_MAX - strlen(name) - 1);
	char *slash;

	if (n <= 0)
		return name;
	out[n] = '\0';
	slash = strrchr(out, '/');
	strcpy(slash ? slash + 1 : out, name);
	return out;
}

/* The fake driver's path: it is built beside the test binaries. */
static inline const char *fake_cuda_path(void)
{
	static char path[PATH_MAX];

	return path[0] ? path : beside_exe(FAKE_CUDA_NAME, path);
}

/* Makes the code under test load the fake driver. */
static inline void use_fake_cuda(void)
{
	setenv(MC_CUDA_LIBRARY_ENV, fake_cuda_path(), 1);
}

/* What the fake driver holds alive now. */
static inline struct fake_cuda_counts fake_cuda_live(void)
{
	struct fake_cuda_counts c = {-1, -1, -1, -1, -1, -1, -1};
	void *lib = dlopen(fake_cuda_path(), RTLD_NOW | RTLD_NOLOAD);
	void (*live)(struct fake_cuda_counts *);
	void *sym;

	if (!lib)
		return (struct fake_cuda_counts){0};
	sym = dlsym(lib, "fake_cuda_live");
	memcpy(&live, &sym, sizeof(sym));
	if (live)
		live(&c);
	dlclose(lib);
	return c;
}

static inline void sleep_ms(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Waits up to timeout_ms for fd to become readable: 1 readable, 0 not. */
static inline int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

/* A buffer of n experts of bytes each, expert i filled with a pattern of i. */
static inline unsigned char *make_experts(uint32_t n, uint64_t bytes)
{
	unsigned char *p = malloc(n * bytes);

	for (uint64_t i = 0; p && i < n * bytes; i++)
		p[i] = (unsigned char)(1 + (i / bytes) * 7 + (i % 251));
	return p;
}

/* For the ROCm tests, which include lib/gpu/rocm_api.h first. */
#ifdef MOECACHE_GPU_ROCM_API_H
#define FAKE_ROCM_NAME "libmoecache-fakerocm.so"
/* Render minors of the fake KFD's GPUs (tests/unit/gpu/fake_rocm.c): 128 + GPU index. */
#define FAKE_ROCM_RENDER_FIRST 128
#define FAKE_ROCM_N_GPUS 9

static inline int touch_file(const char *dir, const char *name)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_CREAT | O_RDWR, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/*
 * Makes the code under test load the fake libhsakmt and libdrm_amdgpu and
 * see, under a new temp dir (its name into tree, 64 bytes), a KFD device,
 * a render node per fake GPU and a sysfs tree placing GPU 0 at
 * 0000:03:00.0. 0, or -1 if a file could not be made.
 */
static inline int use_fake_rocm(char tree[64])
{
	char lib[PATH_MAX], dir[256], name[32];

	beside_exe(FAKE_ROCM_NAME, lib);
	setenv(MC_HSAKMT_LIBRARY_ENV, lib, 1);
	setenv(MC_DRM_AMDGPU_LIBRARY_ENV, lib, 1);
	snprintf(tree, 64, "/tmp/moecache-gpu-rocm-XXXXXX");
	if (!mkdtemp(tree) || touch_file(tree, "kfd"))
		return -1;
	snprintf(dir, sizeof(dir), "%s/kfd", tree);
	setenv(MC_KFD_DEVICE_ENV, dir, 1);
	snprintf(dir, sizeof(dir), "%s/dri", tree);
	if (mkdir(dir, 0755))
		return -1;
	setenv(MC_DRI_DIR_ENV, dir, 1);
	for (int i = 0; i < FAKE_ROCM_N_GPUS; i++) {
		snprintf(name, sizeof(name), "renderD%d", FAKE_ROCM_RENDER_FIRST + i);
		if (touch_file(dir, name))
			return -1;
	}
	snprintf(dir, sizeof(dir), "%s/class/drm/renderD128", tree);
	snprintf(lib, sizeof(lib), "mkdir -p '%s'", dir);
	if (system(lib))
		return -1;
	snprintf(dir, sizeof(dir), "%s/class/drm/renderD128/device", tree);
	if (symlink("../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0", dir))
		return -1;
	setenv(MC_SYSFS_ROOT_ENV, tree, 1);
	return 0;
}

struct fake_rocm_counts {
	int queues, events, allocations, registrations, mappings, bos, va_ranges, devices;
	int bad_packets;
	uint64_t copies;
};

/* What the fake ROCm libraries hold alive now (all zero if they are not loaded). */
static inline struct fake_rocm_counts fake_rocm_live(void)
{
	char lib[PATH_MAX];
	struct fake_rocm_counts c = {0};
	void *h = dlopen(beside_exe(FAKE_ROCM_NAME, lib), RTLD_NOW | RTLD_NOLOAD);
	void (*live)(struct fake_rocm_counts *);
	void *sym;

	if (!h)
		return c;
	sym = dlsym(h, "fake_rocm_live");
	memcpy(&live, &sym, sizeof(sym));
	if (live)
		live(&c);
	dlclose(h);
	return c;
}

/* Removes what use_fake_rocm made. */
static inline void fake_rocm_tree_remove(const char *tree)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tree);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", tree);
}
#endif /* MOECACHE_GPU_ROCM_API_H */

#endif /* MOECACHE_TESTS_GPU_TEST_H */
