/* SPDX-License-Identifier: MIT */
/*
 * moecache-rocm-check (tools/device-check, run by tools/amd-check): what
 * its checks (rocm_checks.c, pass or fail) and benchmarks (rocm_bench.c,
 * figures) share.
 */
#ifndef MOECACHE_TOOLS_ROCM_CHECK_H
#define MOECACHE_TOOLS_ROCM_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <limits.h>

#include "agent/copy/gpu.h"
#include "devcheck.h"
#include "lib/gpu/bank.h"
#include "lib/gpu/rocm_api.h"

struct check {
	int device;
	int peer_device; /* peer: the second device (-1: the next one) */
	const char *json;
	uint32_t expert_mib, copies;
	char err[320];
	struct dc_report rep;
};

#define be dc_bank
#define be_copy(b, slot, src) dc_bank_copy(b, slot, src, 0)
#define be_wait dc_bank_wait

/* A bank of the ROCm backend on device (be_open: on --device). */
int be_open_on(struct check *c, struct be *b, int device, uint32_t n_slots, uint64_t expert_bytes,
	       const void *host, uint64_t host_bytes, uint32_t queues);
int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
	    const void *host, uint64_t host_bytes, uint32_t queues);
/* Reads a slot back with the SDMA engine and compares it with expect. */
bool slot_equals(struct be *b, uint32_t slot, const void *expect, uint64_t bytes,
		 unsigned char *readback);

int cmd_info(struct check *c);
int cmd_copy(struct check *c);
int cmd_export_child(struct check *c, int sock);
int cmd_import(struct check *c);
int cmd_peer(struct check *c);
int cmd_bench_copy(struct check *c);

#endif /* MOECACHE_TOOLS_ROCM_CHECK_H */
