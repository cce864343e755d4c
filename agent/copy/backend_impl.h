/* SPDX-License-Identifier: MIT */
/* What a copy engine implements; agent/copy/backend.c dispatches to it. */
#ifndef MOECACHE_AGENT_BACKEND_IMPL_H
#define MOECACHE_AGENT_BACKEND_IMPL_H

#include "backend.h"

struct agent_backend_ops {
	uint32_t id; /* enum moecache_backend: its name is moecache_backend_name(id) */
	int (*create)(const struct agent_backend_config *cfg, void **priv);
	void (*destroy)(void *priv);
	int (*bank_create)(void *priv, struct moecache_bank *desc);
	int (*bank_adopt)(void *priv, const struct moecache_bank *desc);
	void *(*slot)(void *priv, uint32_t slot);
	int (*copy)(void *priv, const struct agent_copy *c);
	int (*completion_fd)(const void *priv);
	int (*completions)(void *priv, struct agent_copy *out, uint32_t max);
	uint32_t (*inflight)(const void *priv);
	void (*set_delay)(void *priv, uint32_t copy_delay_us);
	/* optional (NULL: no device-to-device copies); called only when both sides have this ops */
	bool (*can_peer)(const void *dst, const void *src);
	int (*copy_peer)(void *dst, void *src, uint32_t src_slot, const struct agent_copy *c);
	/* optional (NULL: -EOPNOTSUPP): agent_backend_cancel; copy_queue.h's sched does it */
	int (*cancel)(void *priv, uint32_t slot);
};

extern const struct agent_backend_ops agent_cpu_backend;
extern const struct agent_backend_ops agent_cuda_backend;
extern const struct agent_backend_ops agent_rocm_backend;

#endif /* MOECACHE_AGENT_BACKEND_IMPL_H */
