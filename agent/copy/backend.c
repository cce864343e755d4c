// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "libmoecache.h"

struct agent_backend {
	const struct agent_backend_ops *ops;
	void *priv;
};

static const struct agent_backend_ops *const agent_backends[] = {
    &agent_cpu_backend,
    &agent_cuda_backend,
    &agent_rocm_backend,
};

int agent_backend_create(const char *name, const struct agent_backend_config *cfg,
			 struct agent_backend **out)
{
	const struct agent_backend_ops *ops = NULL;
	struct agent_backend *be;
	uint32_t id;
	int ret;

	if (!name || !cfg || !out || !cfg->n_slots || !cfg->expert_bytes || !cfg->copy_threads)
		return -EINVAL;
	if (moecache_backend_parse(name, &id))
		return -EOPNOTSUPP;
	for (size_t i = 0; i < sizeof(agent_backends) / sizeof(agent_backends[0]); i++)
		if (agent_backends[i]->id == id)
			ops = agent_backends[i];
	if (!ops)
		return -EOPNOTSUPP;
	be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	be->ops = ops;
	ret = ops->create(cfg, &be->priv);
	if (ret) {
		free(be);
		return ret;
	}
	*out = be;
	return 0;
}

void agent_backend_destroy(struct agent_backend *be)
{
	if (!be)
		return;
	be->ops->destroy(be->priv);
	free(be);
}

int agent_backend_bank_create(struct agent_backend *be, struct moecache_bank *desc)
{
	return be->ops->bank_create(be->priv, desc);
}

int agent_backend_bank_adopt(struct agent_backend *be, const struct moecache_bank *desc)
{
	return be->ops->bank_adopt(be->priv, desc);
}

void *agent_backend_slot(struct agent_backend *be, uint32_t slot)
{
	return be->ops->slot(be->priv, slot);
}

int agent_backend_copy(struct agent_backend *be, const struct agent_copy *c)
{
	return be->ops->copy(be->priv, c);
}

int agent_backend_cancel(struct agent_backend *be, uint32_t slot)
{
	return be->ops->cancel ? be->ops->cancel(be->priv, slot) : -EOPNOTSUPP;
}

int agent_backend_completion_fd(const struct agent_backend *be)
{
	return be->ops->completion_fd(be->priv);
}

int agent_backend_completions(struct agent_backend *be, struct agent_copy *out, uint32_t max)
{
	return be->ops->completions(be->priv, out, max);
}

uint32_t agent_backend_inflight(const struct agent_backend *be)
{
	return be->ops->inflight(be->priv);
}

void agent_backend_set_delay(struct agent_backend *be, uint32_t copy_delay_us)
{
	be->ops->set_delay(be->priv, copy_delay_us);
}

bool agent_backend_can_peer(const struct agent_backend *dst, const struct agent_backend *src)
{
	return dst->ops == src->ops && dst->ops->can_peer && dst->ops->copy_peer &&
	       dst->ops->can_peer(dst->priv, src->priv);
}

int agent_backend_copy_peer(struct agent_backend *dst, struct agent_backend *src,
			    uint32_t src_slot, const struct agent_copy *c)
{
	if (!agent_backend_can_peer(dst, src))
		return -EOPNOTSUPP;
	return dst->ops->copy_peer(dst->priv, src->priv, src_slot, c);
}
