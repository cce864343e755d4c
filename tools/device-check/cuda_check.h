/* SPDX-License-Identifier: MIT */
/*
 * moecache-cuda-check (tools/cuda-check): what its checks (checks.c, pass or
 * fail) and benchmarks (bench.c, figures) share: options, results, the
 * device, the backend driven directly, the kernel image.
 */
#ifndef MOECACHE_TOOLS_CUDA_CHECK_H
#define MOECACHE_TOOLS_CUDA_CHECK_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <limits.h>

#include "lib/gpu/cuda_api.h"
#include "agent/copy/gpu.h"
#include "lib/gpu/bank.h"
#include "kernels/moe_kernels.h"
#include "kernels/moe_kernels_image.h"
#include "kernels/ref/moe_ref.h"
#include "tools/trace/trace.h"
#include "devcheck.h"

#define GEN_SEED 0x6d6f65636163686full

struct opts {
	int device;
	const char *json;
	const char *trace;
	const char *pool;
	const char *mode; /* bench-decode: direct or driver */
	uint32_t d_model, d_ff;
	uint32_t percents[8], n_percents;
	uint32_t steps; /* 0: the whole trace */
	uint32_t expert_mib;
	uint32_t copies;
	uint32_t queues;
	int peer_device; /* peer: the second device (-1: the next one) */
};

struct check {
	struct opts o;
	struct mc_cuda_api cu;
	cu_device dev;
	cu_context ctx;
	char err[320];
	struct dc_report rep;
};

#define be dc_bank
#define be_copy dc_bank_copy
#define be_wait dc_bank_wait

struct kmod {
	cu_module mod;
	cu_function remap, up_bf16, down_bf16, up_f32, down_f32;
};

#define CU(call) cu_ok(c, c->cu.call, #call)

bool cu_ok(struct check *c, cu_result res, const char *what);
int check_open(struct check *c);
void check_close(struct check *c);
void own_ctx(struct check *c);
/* A bank of the CUDA backend on device (be_open: on --device). */
int be_open_on(struct check *c, struct be *b, int device, uint32_t n_slots, uint64_t expert_bytes,
	       const void *host, uint64_t host_bytes, uint32_t queues);
int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
	    const void *host, uint64_t host_bytes, uint32_t queues);
void be_close(struct check *c, struct be *b);
void bank_map_from(struct moecache_bank_map *m, const struct moecache_bank *desc, uint32_t n_slots,
		   uint64_t expert_bytes);
void bank_map_free(struct moecache_bank_map *m);
bool device_equals(struct check *c, cu_deviceptr dev, const void *host, uint64_t bytes,
		   unsigned char *scratch);
int kernels_load(struct check *c, struct kmod *k);
cu_result launch_ffn(struct check *c, const struct kmod *k, struct moe_ffn_args *a,
		     cu_stream stream);
cu_deviceptr dev_upload(struct check *c, const void *src, size_t bytes);
int cmd_info(struct check *c);
int cmd_copy(struct check *c);
int cmd_export_child(struct check *c, int sock);
int cmd_import(struct check *c, const char *self);
int cmd_kernels(struct check *c);
int cmd_peer(struct check *c);
int cmd_bench_copy(struct check *c);
int cmd_bench_decode(struct check *c);
int cmd_pool_setup(struct check *c, uint32_t percent);

#endif /* MOECACHE_TOOLS_CUDA_CHECK_H */
