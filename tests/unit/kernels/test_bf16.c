#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ref/moe_ref.h"

static uint32_t bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* The nearest bf16 by exact distance, ties to the even one: an independent oracle. */
static uint16_t nearest_even(float f)
{
	const uint16_t lo = (uint16_t)(bits_of(f) >> 16);
	const uint16_t hi = (uint16_t)(lo + 1);
	const double dlo = fabs((double)f - (double)moe_bf16_to_f32(lo));
	const double dhi = fabs((double)moe_bf16_to_f32(hi) - (double)f);

	if (dlo < dhi)
		return lo;
	if (dhi < dlo)
		return hi;
	return (lo & 1) ? hi : lo;
}

Test(bf16, basic_widening_is_exact,
     .description =
	 "every bf16 pattern widens to the fp32 with the same high half and a zero low half")
{
	for (uint32_t b = 0; b <= 0xffff; b++)
		cr_assert_eq(bits_of(moe_bf16_to_f32((uint16_t)b)), b << 16, "bf16 0x%04x", b);
}

Test(bf16, basic_round_trip_keeps_every_pattern,
     .description =
	 "narrowing a widened bf16 gives back its bits; a NaN comes back a NaN of the same sign")
{
	for (uint32_t b = 0; b <= 0xffff; b++) {
		const uint16_t back = moe_f32_to_bf16(moe_bf16_to_f32((uint16_t)b));
		const int nan = (b & 0x7fff) > 0x7f80;

		if (nan) {
			cr_assert((back & 0x7fff) > 0x7f80, "NaN 0x%04x became 0x%04x", b, back);
			cr_assert_eq(back & 0x8000, b & 0x8000);
		} else {
			cr_assert_eq(back, b, "bf16 0x%04x became 0x%04x", b, back);
		}
	}
}

Test(bf16, basic_matches_nearest_even_oracle,
     .description = "finite fp32 values round to the nearest bf16, ties to even, as an "
		    "exact-distance oracle says")
{
	uint64_t z = 0x243f6a8885a308d3ull;

	for (int i = 0; i < 1 << 20; i++) {
		uint32_t u;
		float f;

		z = z * 6364136223846793005ull + 1442695040888963407ull;
		u = (uint32_t)(z >> 32);
		/* half the draws land near a tie: low half 0x8000 +- 1 */
		if (i & 1)
			u = (u & 0xffff0000u) | (0x7fffu + (u & 3u) % 3u);
		f = float_of(u);
		if (!isfinite(f) || fabsf(f) >= float_of(0x7f7f8000u))
			continue;
		cr_assert_eq(moe_f32_to_bf16(f), nearest_even(f), "fp32 0x%08x", u);
	}
}

Test(bf16, basic_ties_go_to_even,
     .description =
	 "a value half-way between two bf16 goes to the one with an even last bit, either sign")
{
	cr_assert_eq(moe_f32_to_bf16(float_of(0x3f808000u)), 0x3f80);
	cr_assert_eq(moe_f32_to_bf16(float_of(0x3f818000u)), 0x3f82);
	cr_assert_eq(moe_f32_to_bf16(float_of(0xbf808000u)), 0xbf80);
	cr_assert_eq(moe_f32_to_bf16(float_of(0xbf818000u)), 0xbf82);
	cr_assert_eq(moe_f32_to_bf16(float_of(0x00008000u)), 0x0000);
	cr_assert_eq(moe_f32_to_bf16(float_of(0x00018000u)), 0x0002);
}

Test(bf16, basic_overflow_gives_infinity,
     .description =
	 "fp32 values past the largest bf16 half-way point round to infinity of their sign")
{
	cr_assert_eq(moe_f32_to_bf16(float_of(0x7f7fffffu)), 0x7f80);
	cr_assert_eq(moe_f32_to_bf16(float_of(0xff7fffffu)), 0xff80);
	cr_assert_eq(moe_f32_to_bf16(float_of(0x7f7f7fffu)), 0x7f7f);
	cr_assert_eq(moe_f32_to_bf16(INFINITY), 0x7f80);
	cr_assert_eq(moe_f32_to_bf16(-INFINITY), 0xff80);
}

Test(bf16, basic_nan_payload_below_the_cut_stays_nan,
     .description =
	 "a NaN whose payload is only in the dropped half stays a NaN instead of becoming infinity")
{
	const uint16_t b = moe_f32_to_bf16(float_of(0x7f800001u));
	const uint16_t nb = moe_f32_to_bf16(float_of(0xff800001u));

	cr_assert((b & 0x7fff) > 0x7f80 && !(b & 0x8000), "got 0x%04x", b);
	cr_assert((nb & 0x7fff) > 0x7f80 && (nb & 0x8000), "got 0x%04x", nb);
	cr_assert_eq(moe_f32_to_bf16(float_of(0x7fc00000u)), 0x7fc0);
}

Test(bf16, basic_signed_zero_kept, .description = "+0 and -0 keep their sign")
{
	cr_assert_eq(moe_f32_to_bf16(0.0f), 0x0000);
	cr_assert_eq(moe_f32_to_bf16(-0.0f), 0x8000);
}
