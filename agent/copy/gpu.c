// SPDX-License-Identifier: MIT
/* The part of the CUDA and ROCm copy engines that is the same (see gpu.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

int agent_gpu_engine_init(struct agent_gpu_engine *g, const struct agent_backend_config *cfg,
			  const struct mc_gpu_params *params)
{
	int ret;

	g->cfg = *cfg;
	ret = agent_copy_engine_init(&g->eng, cfg->copy_delay_us);
	if (ret) {
		snprintf(g->err, sizeof(g->err), "eventfd: %s", strerror(-ret));
		return ret;
	}
	if (params)
		g->params = *params;
	mc_gpu_params_from_env(&g->params);
	snprintf(g->pool, sizeof(g->pool), "%s", cfg->pool ? cfg->pool : "");
	g->cfg.pool = g->pool;
	if (g->params.devices) {
		if (strlen(g->params.devices) >= sizeof(g->devices)) {
			snprintf(g->err, sizeof(g->err), "the GPU device list is too long");
			return -E2BIG;
		}
		snprintf(g->devices, sizeof(g->devices), "%s", g->params.devices);
		g->params.devices = g->devices;
	}
	return 0;
}

const char *agent_gpu_engine_pool(const struct agent_gpu_engine *g)
{
	return g->pool[0] ? g->pool : NULL;
}
