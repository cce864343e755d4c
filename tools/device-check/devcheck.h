/* SPDX-License-Identifier: MIT */
/*
 * What the device checks (moecache-cuda-check, moecache-rocm-check) share:
 * their report (each check PASS or FAIL, each benchmark a figure, all
 * written as JSON for tools/gpu-check and tools/amd-check), the host pages
 * standing in for the driver's, a backend's bank driven directly, and
 * handing a bank's fd to another process.
 */
#ifndef MOECACHE_TOOLS_DEVICE_CHECK_H
#define MOECACHE_TOOLS_DEVICE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include <moecache.h>

#include "agent/copy/gpu.h"

#define EXIT_FAILED 1
#define EXIT_SETUP 2
#define EXIT_SKIP 77

struct dc_report {
	json_object *results; /* array of {name, ok, detail, ...} */
	json_object *figures; /* name -> number */
	int failed;
};

void dc_report_init(struct dc_report *r);
/* Prints "PASS name: detail" or "FAIL ..." and adds it; returns the result to add to. */
json_object *dc_record(struct dc_report *r, const char *name, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void dc_figure(struct dc_report *r, const char *name, double value);
/* Writes {command, results, figures} to path (NULL: nowhere) and frees the report. */
void dc_report_finish(struct dc_report *r, const char *prog, const char *cmd, const char *path);

double dc_now_s(void);
/* Shared anonymous memory, populated: what the driver's host region would be. */
void *dc_host_region(uint64_t bytes);
/* Expert i's bytes: a pattern any process can recompute. */
void dc_fill_pattern(unsigned char *p, uint64_t bytes, uint32_t i);
/* This program's path, to run it again as the exporting process. */
const char *dc_self_path(char *buf, size_t len);

/* What the exporting process sends beside the bank's fd. */
struct dc_export_msg {
	struct moecache_bank desc;
	int32_t status;
	char err[320];
};

int dc_send_fd(int sock, const struct dc_export_msg *msg, int fd);
int dc_recv_fd(int sock, struct dc_export_msg *msg, int *fd);
/*
 * Runs this program again as "--device N export-child SOCK" (self: its
 * path), receives what it sends and waits for it to exit: 0 with msg, the
 * bank's fd (-1 if none came), its pid and its wait status, or -errno.
 */
int dc_run_exporter(const char *self, int device, struct dc_export_msg *msg, int *fd, pid_t *pid,
		    int *status);

/* A GPU backend's bank on one device, driven as the agent drives it. */
struct dc_bank {
	const struct agent_backend_ops *ops;
	void *priv;
	struct moecache_bank desc;
};

/* agent_cuda_backend_create or agent_rocm_backend_create. */
typedef int (*dc_create_fn)(const struct agent_backend_config *cfg,
			    const struct mc_gpu_params *params, void **priv, char *err,
			    size_t errlen);

/*
 * A backend of ops (made by create) with a bank of n_slots on device, the
 * host pages [host, + host_bytes) registered: 0, or -errno with err saying why.
 */
int dc_bank_open(struct dc_bank *b, const struct agent_backend_ops *ops, dc_create_fn create,
		 int device, uint32_t n_slots, uint64_t expert_bytes, const void *host,
		 uint64_t host_bytes, uint32_t queues, char *err, size_t errlen);
void dc_bank_close(struct dc_bank *b);
/*
 * A new backend of ops (made by create, default parameters) adopting the
 * bank desc, as a restarted agent does; desc->fd is taken either way. 0, or
 * -errno with err saying why (b is then closed).
 */
int dc_bank_adopt(struct dc_bank *b, const struct agent_backend_ops *ops, dc_create_fn create,
		  const struct moecache_bank *desc, uint32_t n_slots, uint64_t expert_bytes,
		  char *err, size_t errlen);

/* Slot s of the exporting process's bank holds dc_fill_pattern(..., DC_EXPORT_PATTERN + s). */
#define DC_EXPORT_PATTERN 100u

/*
 * The exporting process (the subcommand export-child that dc_run_exporter
 * runs), one for every vendor: a bank of ops (made by create) of n_slots
 * experts of expert_bytes on device, slot s filled from host pages with
 * pattern DC_EXPORT_PATTERN + s, then sent with its fd on sock; then the
 * process's backend goes, so that only the fd keeps the bank. Returns the
 * exit status: 0, EXIT_FAILED or EXIT_SETUP.
 */
int dc_export_child(const struct agent_backend_ops *ops, dc_create_fn create, int device,
		    uint32_t n_slots, uint64_t expert_bytes, int sock);
int dc_bank_copy(struct dc_bank *b, uint32_t slot, const void *src, uint32_t flags);
/* Collects n completions within timeout_s; returns failed copies, or -ETIMEDOUT. */
int dc_bank_wait(struct dc_bank *b, uint32_t n, double timeout_s);
/*
 * Fills dst's slot from src's slot src_slot device to device where peer
 * says the backends can, else checks copy_peer refuses (-EOPNOTSUPP) and
 * fills it from host. 0 or -errno (-EPROTO: a peer copy the probe said
 * cannot be was accepted).
 */
int dc_bank_fill_from(struct dc_bank *dst, struct dc_bank *src, bool peer, uint32_t slot,
		      uint32_t src_slot, const void *host);

#endif /* MOECACHE_TOOLS_DEVICE_CHECK_H */
