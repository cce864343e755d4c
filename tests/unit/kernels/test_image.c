#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <criterion/criterion.h>

#include "moe_kernels_image.h"

static const char *const kernel_names[] = {
    "moe_remap", "moe_ffn_up_bf16", "moe_ffn_up_f32", "moe_ffn_down_bf16", "moe_ffn_down_f32",
};

Test(image, basic_cuda_image_holds_sm80_sm90_and_ptx,
     .description = "the embedded fatbin holds sm_80 and sm_90 code and compute_90 PTX")
{
	struct moe_fatbin_entry e[16];
	bool elf80 = false, elf90 = false, ptx90 = false;
	const void *img;
	size_t size, n;
	int err = moe_kernels_cuda_image(&img, &size);

	if (err == -ENOENT)
		cr_skip_test("built without nvcc");
	cr_assert_eq(err, 0);
	cr_assert_eq(moe_fatbin_list(img, size, e, 16, &n), 0);
	cr_assert_leq(n, 16);
	for (size_t i = 0; i < n; i++) {
		elf80 |= e[i].kind == MOE_FATBIN_ELF && e[i].arch == 80;
		elf90 |= e[i].kind == MOE_FATBIN_ELF && e[i].arch == 90;
		ptx90 |= e[i].kind == MOE_FATBIN_PTX && e[i].arch == 90;
	}
	cr_assert(elf80, "no sm_80 code");
	cr_assert(elf90, "no sm_90 code");
	cr_assert(ptx90, "no compute_90 PTX");
}

Test(image, basic_cuda_code_names_every_kernel,
     .description =
	 "the sm_80 and sm_90 code of the fatbin each define every kernel by its stable name")
{
	struct moe_fatbin_entry e[16];
	const unsigned char *img;
	size_t size, n, checked = 0;
	int err = moe_kernels_cuda_image((const void **)&img, &size);

	if (err == -ENOENT)
		cr_skip_test("built without nvcc");
	cr_assert_eq(moe_fatbin_list(img, size, e, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++) {
		if (e[i].kind != MOE_FATBIN_ELF)
			continue;
		cr_assert_eq(memcmp(img + e[i].offset, "\177ELF", 4), 0, "sm_%u is not a plain ELF",
			     e[i].arch);
		for (size_t k = 0; k < sizeof(kernel_names) / sizeof(kernel_names[0]); k++)
			cr_assert_not_null(memmem(img + e[i].offset, e[i].size, kernel_names[k],
						  strlen(kernel_names[k]) + 1),
					   "sm_%u lacks %s", e[i].arch, kernel_names[k]);
		checked++;
	}
	cr_assert_geq(checked, 2);
}

Test(
    image, basic_hip_image_is_bundle_for_rdna,
    .description = "the embedded HIP image is a clang offload bundle with gfx1030 and gfx1100 code")
{
	static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
	const void *img;
	size_t size;
	int err = moe_kernels_hip_image(&img, &size);

	if (err == -ENOENT)
		cr_skip_test("built without hipcc");
	cr_assert_eq(err, 0);
	cr_assert_geq(size, sizeof(magic));
	cr_assert_eq(memcmp(img, magic, sizeof(magic) - 1), 0);
	cr_assert_not_null(memmem(img, size, "gfx1030", 7));
	cr_assert_not_null(memmem(img, size, "gfx1100", 7));
}

/* A fatbin container of entries {kind, arch, payload bytes}, payloads filled with 0xee. */
static size_t build_fatbin(unsigned char *buf, const uint32_t (*ents)[3], size_t n)
{
	const uint32_t magic = 0xba55ed50u, eh = 64;
	const uint16_t version = 1, header = 16;
	uint64_t body = 0, at = 16;

	for (size_t i = 0; i < n; i++)
		body += eh + ents[i][2];
	memset(buf, 0, 16 + body);
	memcpy(buf, &magic, 4);
	memcpy(buf + 4, &version, 2);
	memcpy(buf + 6, &header, 2);
	memcpy(buf + 8, &body, 8);
	for (size_t i = 0; i < n; i++) {
		const uint16_t kind = (uint16_t)ents[i][0];
		const uint64_t payload = ents[i][2];

		memcpy(buf + at, &kind, 2);
		memcpy(buf + at + 4, &eh, 4);
		memcpy(buf + at + 8, &payload, 8);
		memcpy(buf + at + 28, &ents[i][1], 4);
		memset(buf + at + eh, 0xee, payload);
		at += eh + payload;
	}
	return at;
}

Test(fatbin, basic_lists_entries,
     .description = "kind, arch, payload offset and size of each entry come back in order")
{
	const uint32_t ents[3][3] = {{2, 80, 128}, {1, 90, 40}, {2, 90, 256}};
	unsigned char buf[1024];
	struct moe_fatbin_entry e[3];
	const size_t size = build_fatbin(buf, ents, 3);
	uint64_t at = 16;
	size_t n;

	cr_assert_eq(moe_fatbin_list(buf, size, e, 3, &n), 0);
	cr_assert_eq(n, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(e[i].kind, ents[i][0]);
		cr_assert_eq(e[i].arch, ents[i][1]);
		cr_assert_eq(e[i].offset, at + 64);
		cr_assert_eq(e[i].size, ents[i][2]);
		at += 64 + ents[i][2];
	}
}

Test(fatbin, basic_counts_entries_beyond_max,
     .description =
	 "with room for one entry, the first is filled and the count says how many there are")
{
	const uint32_t ents[3][3] = {{2, 80, 8}, {1, 90, 8}, {2, 90, 8}};
	unsigned char buf[512];
	struct moe_fatbin_entry e[2];
	const size_t size = build_fatbin(buf, ents, 3);
	size_t n;

	memset(&e[1], 0x5a, sizeof(e[1]));
	cr_assert_eq(moe_fatbin_list(buf, size, e, 1, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(e[0].arch, 80);
	cr_assert_eq(e[1].arch, 0x5a5a5a5au);
}

Test(fatbin, bad_input_not_a_fatbin,
     .description = "a wrong magic or an image shorter than a header is -EINVAL")
{
	const uint32_t ents[1][3] = {{2, 80, 8}};
	unsigned char buf[256];
	struct moe_fatbin_entry e[1];
	const size_t size = build_fatbin(buf, ents, 1);
	size_t n;

	cr_assert_eq(moe_fatbin_list(buf, 8, e, 1, &n), -EINVAL);
	buf[0] ^= 1;
	cr_assert_eq(moe_fatbin_list(buf, size, e, 1, &n), -EINVAL);
}

Test(fatbin, bad_input_sizes_past_the_end,
     .description = "a container, entry header or payload reaching past the image is -EBADMSG")
{
	const uint32_t ents[2][3] = {{2, 80, 32}, {2, 90, 32}};
	unsigned char buf[512];
	struct moe_fatbin_entry e[2];
	const size_t size = build_fatbin(buf, ents, 2);
	const uint64_t big = 1ull << 40;
	const uint32_t tiny = 8;
	size_t n;

	cr_assert_eq(moe_fatbin_list(buf, size - 1, e, 2, &n), -EBADMSG);
	cr_assert_eq(moe_fatbin_list(buf, size + 8, e, 2, &n), -EBADMSG);
	memcpy(buf + 16 + 8, &big, 8);
	cr_assert_eq(moe_fatbin_list(buf, size, e, 2, &n), -EBADMSG);
	build_fatbin(buf, ents, 2);
	memcpy(buf + 16 + 4, &tiny, 4);
	cr_assert_eq(moe_fatbin_list(buf, size, e, 2, &n), -EBADMSG);
}
