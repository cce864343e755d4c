/* SPDX-License-Identifier: MIT */
/* Helpers of the GPU unit tests: the fake CUDA driver beside the test binary, waiting on
 * completions. */
#ifndef MOECACHE_TESTS_GPU_TEST_H
#define MOECACHE_TESTS_GPU_TEST_H

#include <dlfcn.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#endif /* MOECACHE_TESTS_GPU_TEST_H */
