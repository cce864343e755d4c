/* SPDX-License-Identifier: MIT */
/*
 * SDMA packets for the system DMA engines of AMD GPUs of the SOC15
 * generations and later (GFX9 "Vega" with SDMA 4.x, GFX10 with SDMA 5.0
 * and 5.2, GFX11 with SDMA 6.0): the field positions are those of the
 * packet headers in the Linux kernel, drivers/gpu/drm/amd/amdgpu/
 * vega10_sdma_pkt_open.h, navi10_sdma_pkt_open.h and
 * sdma_v6_0_0_pkt_open.h, which agree on every field used here.
 *
 * Each encoder writes whole dwords at dw[0..] and returns how many.
 */
#ifndef MOECACHE_GPU_SDMA_H
#define MOECACHE_GPU_SDMA_H

#include <stdint.h>

/* Header dword 0: op in bits 7:0, sub_op in bits 15:8 (SDMA_PKT_HEADER_OP/SUB_OP). */
#define MC_SDMA_OP_NOP 0u
#define MC_SDMA_OP_COPY 1u
#define MC_SDMA_OP_FENCE 5u
#define MC_SDMA_OP_TRAP 6u
#define MC_SDMA_OP_POLL_REGMEM 8u
#define MC_SDMA_SUBOP_COPY_LINEAR 0u

/* Dwords of each packet. */
#define MC_SDMA_COPY_LINEAR_DW 7u
#define MC_SDMA_FENCE_DW 4u
#define MC_SDMA_TRAP_DW 2u
#define MC_SDMA_POLL_REGMEM_DW 6u

/*
 * Largest COPY_LINEAR: the count field holds bytes - 1 in 22 bits on
 * SDMA 4.x and 5.x (30 on 6.0); the kernel's copy_max_bytes is the same.
 */
#define MC_SDMA_COPY_MAX_BYTES 0x400000u

/* FENCE header mtype (bits 18:16, SDMA 5.0 and later): 3 = uncached, as the kernel uses. */
#define MC_SDMA_MTYPE_UC 3u

/* POLL_REGMEM compare functions (header bits 30:28). */
#define MC_SDMA_POLL_FUNC_ALWAYS 0u
#define MC_SDMA_POLL_FUNC_LESS 1u
#define MC_SDMA_POLL_FUNC_LESS_EQUAL 2u
#define MC_SDMA_POLL_FUNC_EQUAL 3u
#define MC_SDMA_POLL_FUNC_NOT_EQUAL 4u
#define MC_SDMA_POLL_FUNC_GREATER_EQUAL 5u
#define MC_SDMA_POLL_FUNC_GREATER 6u

/*
 * COPY_LINEAR: copy bytes (1 .. MC_SDMA_COPY_MAX_BYTES) from src to dst,
 * GPU virtual addresses. 0 for a size out of range.
 */
uint32_t mc_sdma_copy_linear(uint32_t *dw, uint64_t dst, uint64_t src, uint32_t bytes);
/*
 * Packets copying bytes of any size: one COPY_LINEAR per
 * MC_SDMA_COPY_MAX_BYTES. Returns the dwords written (max_dw at most), or
 * 0 if they do not fit or bytes is 0.
 */
uint32_t mc_sdma_copy(uint32_t *dw, uint32_t max_dw, uint64_t dst, uint64_t src, uint64_t bytes);
/* Dwords mc_sdma_copy() needs for bytes. */
uint32_t mc_sdma_copy_dwords(uint64_t bytes);
/*
 * FENCE: write the 32-bit value to addr (4-byte aligned, else 0 is
 * returned) once every packet before it has completed. mtype 0 on SDMA
 * 4.x (the field is reserved there), MC_SDMA_MTYPE_UC on 5.0 and later.
 */
uint32_t mc_sdma_fence(uint32_t *dw, uint64_t addr, uint32_t value, uint32_t mtype);
/* TRAP: raise an interrupt with a 28-bit context (KFD signals the event of that id). */
uint32_t mc_sdma_trap(uint32_t *dw, uint32_t int_context);
/*
 * POLL_REGMEM on memory: wait until (*addr & mask) func value, checking
 * every interval (16 bits) up to retry_count times (12 bits; 0xfff: for
 * ever). addr must be 4-byte aligned, else 0 is returned.
 */
uint32_t mc_sdma_poll_mem(uint32_t *dw, uint64_t addr, uint32_t value, uint32_t mask, uint32_t func,
			  uint32_t interval, uint32_t retry_count);
/*
 * NOP padding of n dwords: n one-dword NOPs (a zero header each), which
 * every engine accepts (a burst NOP with a count needs firmware support).
 */
uint32_t mc_sdma_nop(uint32_t *dw, uint32_t n);

#endif /* MOECACHE_GPU_SDMA_H */
