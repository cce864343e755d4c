// SPDX-License-Identifier: MIT
/*
 * The SDMA encoder against dwords written out by hand from the packet
 * layouts of the Linux amdgpu driver (drivers/gpu/drm/amd/amdgpu/
 * navi10_sdma_pkt_open.h, the same in vega10_ and sdma_v6_0_0_):
 *   SDMA_PKT_HEADER_OP            bits 7:0     SDMA_OP_COPY 1, FENCE 5, TRAP 6, POLL_REGMEM 8
 *   SDMA_PKT_HEADER_SUB_OP        bits 15:8    SDMA_SUBOP_COPY_LINEAR 0
 *   COPY_LINEAR_COUNT_count       dw1 21:0     bytes - 1 (sdma_v5_2_emit_copy_buffer)
 *   COPY_LINEAR_PARAMETER         dw2          swap fields, 0
 *   COPY_LINEAR_SRC_ADDR_LO/HI    dw3, dw4
 *   COPY_LINEAR_DST_ADDR_LO/HI    dw5, dw6
 *   FENCE_HEADER_mtype            bits 18:16   3 = UC (sdma_v5_2_ring_emit_fence)
 *   FENCE_ADDR_LO/HI, DATA        dw1, dw2, dw3
 *   TRAP_INT_CONTEXT_int_context  dw1 27:0
 *   POLL_REGMEM_HEADER hdp_flush 26, func 30:28, mem_poll 31
 *   POLL_REGMEM ADDR_LO/HI, VALUE, MASK  dw1..dw4
 *   POLL_REGMEM_DW5 interval 15:0, retry_count 27:16
 * The expected words below are literals, not computed by the code under test.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "agent/copy/sdma.h"

static void expect_dwords(const uint32_t *got, const uint32_t *want, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		cr_expect_eq(got[i], want[i], "dword %u: %#010x, expected %#010x", i, got[i],
			     want[i]);
}

Test(sdma, basic_copy_linear_dwords,
     .description = "COPY_LINEAR: header, count-1, swap 0, src, dst")
{
	static const uint32_t want[7] = {0x00000001, 0x00000fff, 0x00000000, 0xcdef0000,
					 0x000000ab, 0x56789000, 0x00001234};
	uint32_t dw[8] = {0};

	cr_assert_eq(mc_sdma_copy_linear(dw, 0x0000123456789000ull, 0x000000abcdef0000ull, 0x1000),
		     7);
	expect_dwords(dw, want, 7);
}

Test(sdma, basic_copy_linear_largest,
     .description = "the largest linear copy fills the 22-bit count")
{
	uint32_t dw[7];

	cr_assert_eq(mc_sdma_copy_linear(dw, 0, 0, 0x400000), 7);
	cr_expect_eq(dw[1], 0x003fffff);
}

Test(sdma, bad_input_copy_linear_size, .description = "0 bytes or more than 4 MiB is refused")
{
	uint32_t dw[7];

	cr_expect_eq(mc_sdma_copy_linear(dw, 0, 0, 0), 0);
	cr_expect_eq(mc_sdma_copy_linear(dw, 0, 0, 0x400001), 0);
}

Test(sdma, basic_copy_splits_at_4mib,
     .description = "a copy of 4 MiB + 4 KiB is two packets, the second offset by 4 MiB")
{
	static const uint32_t want[14] = {
	    0x00000001, 0x003fffff, 0, 0x20000000, 0x00000001, 0x80000000, 0x00000002,
	    0x00000001, 0x00000fff, 0, 0x20400000, 0x00000001, 0x80400000, 0x00000002,
	};
	uint32_t dw[16] = {0};

	cr_assert_eq(mc_sdma_copy_dwords(0x401000), 14);
	cr_assert_eq(mc_sdma_copy(dw, 16, 0x280000000ull, 0x120000000ull, 0x401000), 14);
	expect_dwords(dw, want, 14);
}

Test(sdma, bad_input_copy_no_room,
     .description = "packets that do not fit in max_dw are not written")
{
	uint32_t dw[16];

	memset(dw, 0xa5, sizeof(dw));
	cr_expect_eq(mc_sdma_copy(dw, 13, 0, 0, 0x401000), 0);
	cr_expect_eq(dw[0], 0xa5a5a5a5);
	cr_expect_eq(mc_sdma_copy(dw, 16, 0, 0, 0), 0);
}

Test(sdma, basic_fence_dwords,
     .description = "FENCE: op 5 with mtype UC in bits 18:16, address, value")
{
	static const uint32_t want[4] = {0x00030005, 0x10000040, 0x00007f00, 0xdeadbeef};
	uint32_t dw[4];

	cr_assert_eq(mc_sdma_fence(dw, 0x00007f0010000040ull, 0xdeadbeef, MC_SDMA_MTYPE_UC), 4);
	expect_dwords(dw, want, 4);
}

Test(sdma, basic_fence_sdma4, .description = "FENCE for SDMA 4.x leaves the mtype bits 0")
{
	uint32_t dw[4];

	cr_assert_eq(mc_sdma_fence(dw, 0x1000, 1, 0), 4);
	cr_expect_eq(dw[0], 0x00000005);
}

Test(sdma, bad_input_fence_unaligned,
     .description = "a fence address not 4-byte aligned is refused")
{
	uint32_t dw[4];

	cr_expect_eq(mc_sdma_fence(dw, 0x1002, 1, MC_SDMA_MTYPE_UC), 0);
}

Test(sdma, basic_trap_dwords, .description = "TRAP: op 6, 28-bit interrupt context")
{
	uint32_t dw[2];

	cr_assert_eq(mc_sdma_trap(dw, 0x12345678), 2);
	cr_expect_eq(dw[0], 0x00000006);
	cr_expect_eq(dw[1], 0x02345678);
}

Test(sdma, basic_poll_mem_dwords,
     .description = "POLL_REGMEM on memory: func, mem_poll, value, mask, interval, retries")
{
	/* As sdma_v5_2_ring_emit_pipeline_sync: func 3 (equal), mem_poll 1, retry 0xfff,
	 * interval 4. */
	static const uint32_t want[6] = {0xb0000008, 0x00001000, 0x00000000,
					 0x00000007, 0xffffffff, 0x0fff0004};
	uint32_t dw[6];

	cr_assert_eq(mc_sdma_poll_mem(dw, 0x1000, 7, 0xffffffff, MC_SDMA_POLL_FUNC_EQUAL, 4, 0xfff),
		     6);
	expect_dwords(dw, want, 6);
}

Test(sdma, bad_input_poll_unaligned, .description = "a poll address not 4-byte aligned is refused")
{
	uint32_t dw[6];

	cr_expect_eq(mc_sdma_poll_mem(dw, 0x1001, 0, 1, MC_SDMA_POLL_FUNC_EQUAL, 4, 1), 0);
}

Test(sdma, basic_nop_padding, .description = "padding is one-dword NOPs: zero words")
{
	uint32_t dw[3];

	memset(dw, 0xff, sizeof(dw));
	cr_assert_eq(mc_sdma_nop(dw, 3), 3);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(dw[i], 0);
}
