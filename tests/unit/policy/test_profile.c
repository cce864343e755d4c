// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "agent/policy/profile.h"

static char dir[64];

static void make_dir(void)
{
	strcpy(dir, "/tmp/moe-profile-test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[512];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static unsigned int count_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

TestSuite(profile, .init = make_dir, .fini = remove_dir);

static int parse(const char *text, struct moe_profile *p)
{
	return moe_profile_parse("test", text, p);
}

/* Bad input must leave no partial result. */
static void expect_invalid(const char *text)
{
	struct moe_profile p = {.n = 99, .ranked = (struct moe_expert_id *)1};

	cr_assert_eq(parse(text, &p), -EINVAL, "accepted: %s", text);
	cr_assert_eq(p.n, 0);
	cr_assert_null(p.ranked);
}

Test(profile, basic_json, .description = "the JSON form gives the pairs in order")
{
	struct moe_profile p;

	cr_assert_eq(parse("{\"ranked\": [[1, 2], [0, 7]], \"note\": \"x\"}", &p), 0);
	cr_assert_eq(p.n, 2);
	cr_assert_eq(p.ranked[0].layer, 1);
	cr_assert_eq(p.ranked[0].expert, 2);
	cr_assert_eq(p.ranked[1].layer, 0);
	cr_assert_eq(p.ranked[1].expert, 7);
	moe_profile_free(&p);
}

Test(profile, basic_text, .description = "the text form skips comments and blank lines")
{
	struct moe_profile p;

	cr_assert_eq(parse("# hottest first\n3 4\n\n  5 6  # trailing comment\n", &p), 0);
	cr_assert_eq(p.n, 2);
	cr_assert_eq(p.ranked[0].layer, 3);
	cr_assert_eq(p.ranked[0].expert, 4);
	cr_assert_eq(p.ranked[1].layer, 5);
	cr_assert_eq(p.ranked[1].expert, 6);
	moe_profile_free(&p);
}

Test(profile, basic_empty_ranking, .description = "an empty ranking is valid and empty")
{
	struct moe_profile p;

	cr_assert_eq(parse("{\"ranked\": []}", &p), 0);
	cr_assert_eq(p.n, 0);
	moe_profile_free(&p);
}

Test(profile, basic_save_load_roundtrip, .description = "a saved profile loads back equal")
{
	struct moe_expert_id ids[] = {{2, 9}, {0, 0}, {4294967295u, 1}};
	struct moe_profile in = {.n = 3, .ranked = ids}, out;
	char path[128];

	snprintf(path, sizeof(path), "%s/p.json", dir);
	cr_assert_eq(moe_profile_save(path, &in), 0);
	cr_assert_eq(moe_profile_load(path, &out), 0);
	cr_assert_eq(out.n, in.n);
	for (uint32_t i = 0; i < in.n; i++) {
		cr_assert_eq(out.ranked[i].layer, ids[i].layer);
		cr_assert_eq(out.ranked[i].expert, ids[i].expert);
	}
	moe_profile_free(&out);
}

Test(profile, basic_save_replaces_atomically,
     .description = "saving over a profile replaces it and leaves no temporary file")
{
	struct moe_expert_id a[] = {{1, 1}}, b[] = {{2, 2}, {3, 3}};
	struct moe_profile pa = {.n = 1, .ranked = a}, pb = {.n = 2, .ranked = b}, out;
	char path[128];

	snprintf(path, sizeof(path), "%s/p.json", dir);
	cr_assert_eq(moe_profile_save(path, &pa), 0);
	cr_assert_eq(moe_profile_save(path, &pb), 0);
	cr_assert_eq(count_files(), 1);
	cr_assert_eq(moe_profile_load(path, &out), 0);
	cr_assert_eq(out.n, 2);
	cr_assert_eq(out.ranked[1].expert, 3);
	moe_profile_free(&out);
}

Test(profile, bad_input_save_to_missing_folder,
     .description = "saving into a folder that does not exist fails with -ENOENT")
{
	struct moe_expert_id a[] = {{1, 1}};
	struct moe_profile pa = {.n = 1, .ranked = a};
	char path[160];

	snprintf(path, sizeof(path), "%s/none/p.json", dir);
	cr_assert_eq(moe_profile_save(path, &pa), -ENOENT);
}

Test(profile, bad_input_missing_file, .description = "loading a missing file is -ENOENT")
{
	struct moe_profile p;
	char path[128];

	snprintf(path, sizeof(path), "%s/absent.json", dir);
	cr_assert_eq(moe_profile_load(path, &p), -ENOENT);
	cr_assert_eq(p.n, 0);
	cr_assert_null(p.ranked);
}

Test(profile, bad_input_json_no_ranked,
     .description = "JSON without a \"ranked\" array is rejected")
{
	expect_invalid("{\"rank\": [[0, 1]]}");
	expect_invalid("{\"ranked\": {}}");
}

Test(profile, bad_input_json_bad_pair,
     .description = "a ranked entry that is not two unsigned integers is rejected")
{
	expect_invalid("{\"ranked\": [[0, 1], [2]]}");
	expect_invalid("{\"ranked\": [[0, 1, 2]]}");
	expect_invalid("{\"ranked\": [[0, -1]]}");
	expect_invalid("{\"ranked\": [[0, 1.5]]}");
	expect_invalid("{\"ranked\": [[0, \"1\"]]}");
	expect_invalid("{\"ranked\": [[0, 4294967296]]}");
}

Test(profile, bad_input_json_truncated,
     .description = "truncated or trailing-garbage JSON is rejected")
{
	expect_invalid("{\"ranked\": [[0, 1]");
	expect_invalid("{\"ranked\": [[0, 1]]} x");
}

Test(profile, bad_input_duplicate, .description = "an expert ranked twice is rejected")
{
	expect_invalid("{\"ranked\": [[0, 1], [2, 3], [0, 1]]}");
	expect_invalid("0 1\n0 1\n");
}

Test(profile, bad_input_text_garbage,
     .description = "text lines that are not two unsigned integers are rejected")
{
	expect_invalid("0 1\nfoo\n");
	expect_invalid("0\n");
	expect_invalid("0 1 2\n");
	expect_invalid("-1 2\n");
	expect_invalid("0 99999999999\n");
}

Test(profile, bad_input_binary, .description = "a file with a NUL byte is rejected")
{
	struct moe_profile p;
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/bin", dir);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite("0 1\n\0\n", 1, 6, f);
	fclose(f);
	cr_assert_eq(moe_profile_load(path, &p), -EINVAL);
	cr_assert_null(p.ranked);
}
