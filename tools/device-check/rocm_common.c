// SPDX-License-Identifier: MIT
/* moecache-rocm-check: the backend driven directly. */
#include "rocm_check.h"

int be_open_on(struct check *c, struct be *b, int device, uint32_t n_slots, uint64_t expert_bytes,
	       const void *host, uint64_t host_bytes, uint32_t queues)
{
	return dc_bank_open(b, &agent_rocm_backend, agent_rocm_backend_create, device, n_slots,
			    expert_bytes, host, host_bytes, queues, c->err, sizeof(c->err));
}

int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
	    const void *host, uint64_t host_bytes, uint32_t queues)
{
	return be_open_on(c, b, c->device, n_slots, expert_bytes, host, host_bytes, queues);
}

bool slot_equals(struct be *b, uint32_t slot, const void *expect, uint64_t bytes,
		 unsigned char *readback)
{
	memset(readback, 0, bytes);
	return agent_rocm_backend_read_slot(b->priv, slot, readback, bytes) == 0 &&
	       !memcmp(readback, expect, bytes);
}
