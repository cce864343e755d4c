// SPDX-License-Identifier: MIT
/*
 * Field positions (Linux, drivers/gpu/drm/amd/amdgpu/navi10_sdma_pkt_open.h;
 * the same in vega10_ and sdma_v6_0_0_pkt_open.h except where noted):
 *   header          op 7:0, sub_op 15:8
 *   COPY_LINEAR     dw1 count 21:0 (bytes - 1), dw2 swap fields (0),
 *                   dw3/4 src lo/hi, dw5/6 dst lo/hi
 *   FENCE           header mtype 18:16 (SDMA 5+), dw1/2 addr lo/hi, dw3 data
 *   TRAP            dw1 int_context 27:0
 *   POLL_REGMEM     header hdp_flush 26, func 30:28, mem_poll 31;
 *                   dw1/2 addr lo/hi, dw3 value, dw4 mask,
 *                   dw5 interval 15:0, retry_count 27:16
 *   NOP             header op 0, count 29:16
 */
#include "sdma.h"

static uint32_t mc_sdma_header(uint32_t op, uint32_t sub_op)
{
	return (op & 0xffu) | (sub_op & 0xffu) << 8;
}

static uint32_t mc_lo(uint64_t v)
{
	return (uint32_t)v;
}

static uint32_t mc_hi(uint64_t v)
{
	return (uint32_t)(v >> 32);
}

uint32_t mc_sdma_copy_linear(uint32_t *dw, uint64_t dst, uint64_t src, uint32_t bytes)
{
	if (bytes == 0 || bytes > MC_SDMA_COPY_MAX_BYTES)
		return 0;
	dw[0] = mc_sdma_header(MC_SDMA_OP_COPY, MC_SDMA_SUBOP_COPY_LINEAR);
	dw[1] = (bytes - 1) & 0x3fffffu;
	dw[2] = 0; /* no endian swap of either side */
	dw[3] = mc_lo(src);
	dw[4] = mc_hi(src);
	dw[5] = mc_lo(dst);
	dw[6] = mc_hi(dst);
	return MC_SDMA_COPY_LINEAR_DW;
}

uint32_t mc_sdma_copy_dwords(uint64_t bytes)
{
	uint64_t packets = (bytes + MC_SDMA_COPY_MAX_BYTES - 1) / MC_SDMA_COPY_MAX_BYTES;

	if (packets > UINT32_MAX / MC_SDMA_COPY_LINEAR_DW)
		return UINT32_MAX;
	return (uint32_t)packets * MC_SDMA_COPY_LINEAR_DW;
}

uint32_t mc_sdma_copy(uint32_t *dw, uint32_t max_dw, uint64_t dst, uint64_t src, uint64_t bytes)
{
	uint32_t n = 0;

	if (bytes == 0 || mc_sdma_copy_dwords(bytes) > max_dw)
		return 0;
	while (bytes) {
		uint32_t chunk =
		    bytes > MC_SDMA_COPY_MAX_BYTES ? MC_SDMA_COPY_MAX_BYTES : (uint32_t)bytes;

		n += mc_sdma_copy_linear(dw + n, dst, src, chunk);
		dst += chunk;
		src += chunk;
		bytes -= chunk;
	}
	return n;
}

uint32_t mc_sdma_fence(uint32_t *dw, uint64_t addr, uint32_t value, uint32_t mtype)
{
	if (addr & 3u)
		return 0;
	dw[0] = mc_sdma_header(MC_SDMA_OP_FENCE, 0) | (mtype & 0x7u) << 16;
	dw[1] = mc_lo(addr);
	dw[2] = mc_hi(addr);
	dw[3] = value;
	return MC_SDMA_FENCE_DW;
}

uint32_t mc_sdma_trap(uint32_t *dw, uint32_t int_context)
{
	dw[0] = mc_sdma_header(MC_SDMA_OP_TRAP, 0);
	dw[1] = int_context & 0x0fffffffu;
	return MC_SDMA_TRAP_DW;
}

uint32_t mc_sdma_poll_mem(uint32_t *dw, uint64_t addr, uint32_t value, uint32_t mask, uint32_t func,
			  uint32_t interval, uint32_t retry_count)
{
	if (addr & 3u)
		return 0;
	dw[0] = mc_sdma_header(MC_SDMA_OP_POLL_REGMEM, 0) | (func & 0x7u) << 28 | 1u << 31;
	dw[1] = mc_lo(addr);
	dw[2] = mc_hi(addr);
	dw[3] = value;
	dw[4] = mask;
	dw[5] = (interval & 0xffffu) | (retry_count & 0xfffu) << 16;
	return MC_SDMA_POLL_REGMEM_DW;
}

uint32_t mc_sdma_nop(uint32_t *dw, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		dw[i] = mc_sdma_header(MC_SDMA_OP_NOP, 0);
	return n;
}
