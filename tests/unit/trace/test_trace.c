// SPDX-License-Identifier: MIT
/* The trace reader on small generated traces, good and bad. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tools/trace/trace.h"

static struct moe_trace *parse_ok(const char *text)
{
	struct moe_trace *t = NULL;
	char err[256];
	int ret = moe_trace_parse("gen.json", text, strlen(text), &t, err, sizeof(err));

	cr_assert_eq(ret, 0, "rejected (%d): %s", ret, err);
	cr_assert_not_null(t);
	return t;
}

/* Malformed input: -EINVAL, no trace, and a message that names the file and where. */
static void expect_bad(const char *text, const char *where)
{
	struct moe_trace *t = (struct moe_trace *)1;
	char err[256];

	cr_assert_eq(moe_trace_parse("gen.json", text, strlen(text), &t, err, sizeof(err)), -EINVAL,
		     "accepted: %s", text);
	cr_assert_null(t);
	cr_assert_not_null(strstr(err, "gen.json"), "message without the file: %s", err);
	cr_assert_not_null(strstr(err, where), "message \"%s\" does not say \"%s\"", err, where);
}

static const char jsonl[] = "{\"tok\": 5, \"layers\": [[1, 2], [0, 3], [4, 2]]}\n"
			    "\n"
			    "{\"tok\": 6, \"layers\": [[2, 1], [3], [0, 6]]}\n";

static const char object[] =
    "{\"model\": \"m\", \"num_layers\": 2, \"num_experts\": 8, \"top_k\": 2,\n"
    " \"prompts\": {\n"
    "  \"a\": {\"prompt_len\": 1, \"prefill\": [[[0, 1], [2, 3]]],\n"
    "         \"decode\": [[[4, 5], [6, 7]], [[0, 7], [1, 6]]]},\n"
    "  \"b\": {\"prefill\": [[[3], [4]]], \"decode\": [[[5], [5]]]}}}\n";

Test(trace, basic_json_lines,
     .description = "JSON lines: one token per line, layers as given, blank lines skipped")
{
	struct moe_trace *t = parse_ok(jsonl);
	const uint32_t *ids;
	uint32_t n;

	cr_assert_eq(t->n_tokens, 2);
	cr_assert_eq(t->n_layers, 3);
	cr_assert_eq(t->n_experts, 7); /* largest id 6, plus one */
	cr_assert_eq(t->top_k, 2);
	cr_assert_eq(t->tokens[0].pos, 5);
	cr_assert_eq(t->tokens[1].phase, MOE_TRACE_DECODE);
	ids = moe_trace_layer(&t->tokens[1], 1, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(ids[0], 3);
	ids = moe_trace_layer(&t->tokens[1], 2, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(ids[1], 6);
	moe_trace_free(t);
}

Test(trace, basic_json_lines_prompts_and_phases,
     .description = "JSON lines may name a prompt and a phase per token")
{
	struct moe_trace *t =
	    parse_ok("{\"prompt\": \"x\", \"phase\": \"prefill\", \"layers\": [[0]]}\n"
		     "{\"prompt\": \"y\", \"layers\": [[1]]}\n"
		     "{\"prompt\": \"x\", \"phase\": \"decode\", \"layers\": [[2]]}\n");

	cr_assert_eq(t->n_prompts, 2);
	cr_assert_eq(t->tokens[0].phase, MOE_TRACE_PREFILL);
	cr_assert_eq(t->tokens[2].prompt, t->tokens[0].prompt);
	cr_assert_neq(t->tokens[1].prompt, t->tokens[0].prompt);
	moe_trace_free(t);
}

Test(trace, basic_object_form,
     .description = "the object form: prompts in file order, each prefill then decode")
{
	struct moe_trace *t = parse_ok(object);
	const uint32_t *ids;
	uint32_t n;

	cr_assert_eq(t->n_layers, 2);
	cr_assert_eq(t->n_experts, 8);
	cr_assert_eq(t->n_prompts, 2);
	cr_assert_str_eq(t->prompts[0], "a");
	cr_assert_str_eq(t->model, "m");
	cr_assert_eq(t->n_tokens, 5);
	cr_assert_eq(t->tokens[0].phase, MOE_TRACE_PREFILL);
	cr_assert_eq(t->tokens[1].phase, MOE_TRACE_DECODE);
	cr_assert_eq(t->tokens[2].pos, 1);
	ids = moe_trace_layer(&t->tokens[2], 1, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(ids[0], 1);
	cr_assert_eq(ids[1], 6);
	cr_assert_eq(t->tokens[3].prompt, 1);
	moe_trace_free(t);
}

Test(trace, basic_select_prompt_and_phase,
     .description = "selection by prompt and phase keeps trace order")
{
	struct moe_trace *t = parse_ok(object);
	struct moe_trace_view v;

	cr_assert_eq(moe_trace_select(t, "a", MOE_TRACE_DECODE, &v), 0);
	cr_assert_eq(v.n, 2);
	cr_assert_eq(v.tokens[0], &t->tokens[1]);
	cr_assert_eq(v.tokens[1], &t->tokens[2]);
	moe_trace_view_free(&v);
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_PREFILL, &v), 0);
	cr_assert_eq(v.n, 2);
	cr_assert_eq(v.tokens[1], &t->tokens[3]);
	moe_trace_view_free(&v);
	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(v.n, t->n_tokens);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(trace, bad_input_unknown_prompt,
     .description = "selecting a prompt the trace lacks is -ENOENT")
{
	struct moe_trace *t = parse_ok(object);
	struct moe_trace_view v;

	cr_assert_eq(moe_trace_select(t, "zzz", MOE_TRACE_ALL, &v), -ENOENT);
	moe_trace_free(t);
}

Test(trace, basic_phase_names, .description = "phase names parse and print both ways")
{
	enum moe_trace_phase ph;

	cr_assert_eq(moe_trace_phase_parse("prefill", &ph), 0);
	cr_assert_eq(ph, MOE_TRACE_PREFILL);
	cr_assert_str_eq(moe_trace_phase_name(ph), "prefill");
	cr_assert_eq(moe_trace_phase_parse("decode", &ph), 0);
	cr_assert_str_eq(moe_trace_phase_name(ph), "decode");
	cr_assert_eq(moe_trace_phase_parse("all", &ph), 0);
	cr_assert_str_eq(moe_trace_phase_name(ph), "all");
	cr_assert_eq(moe_trace_phase_parse("both", &ph), -EINVAL);
}

Test(trace, basic_load_file, .description = "moe_trace_load reads a file and records its path")
{
	char path[] = "/tmp/moe-trace-test.XXXXXX";
	int fd = mkstemp(path);
	struct moe_trace *t;
	char err[256];

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, jsonl, strlen(jsonl)), (ssize_t)strlen(jsonl));
	close(fd);
	cr_assert_eq(moe_trace_load(path, &t, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(t->path, path);
	cr_assert_eq(t->n_tokens, 2);
	moe_trace_free(t);
	unlink(path);
}

Test(trace, bad_input_missing_file,
     .description = "a missing file is -ENOENT with a message naming it")
{
	struct moe_trace *t;
	char err[256];

	cr_assert_eq(moe_trace_load("/nonexistent/trace.jsonl", &t, err, sizeof(err)), -ENOENT);
	cr_assert_null(t);
	cr_assert_not_null(strstr(err, "/nonexistent/trace.jsonl"));
}

Test(trace, bad_input_empty, .description = "a file without tokens is rejected")
{
	expect_bad("", "no tokens");
	expect_bad("\n\n", "no tokens");
}

Test(trace, bad_input_json_lines_syntax,
     .description = "a line that is not JSON is named by its number")
{
	expect_bad("{\"layers\": [[0]]}\n{\"layers\": [[0]\n", "line 2");
	expect_bad("{\"layers\": [[0]]}\n{\"layers\": [[0]]} junk\n", "line 2");
}

Test(trace, bad_input_json_lines_fields,
     .description = "wrong fields on a line are named with the line")
{
	expect_bad("{\"layers\": [[0]]}\n{\"tok\": 2}\n", "line 2");
	expect_bad("{\"layers\": [[0], [1]]}\n{\"layers\": [[0]]}\n", "line 2");
	expect_bad("{\"layers\": [[0, -1]]}\n", "line 1");
	expect_bad("{\"layers\": [[0, 1.5]]}\n", "line 1");
	expect_bad("{\"layers\": [[2, 2]]}\n", "selected twice");
	expect_bad("{\"layers\": [0]}\n", "line 1");
	expect_bad("{\"tok\": -1, \"layers\": [[0]]}\n", "\"tok\"");
	expect_bad("{\"phase\": \"warmup\", \"layers\": [[0]]}\n", "\"phase\"");
	expect_bad("[1, 2]\n", "line 1");
}

Test(trace, bad_input_object_header,
     .description = "missing or bad sizes in the object form are named")
{
	expect_bad("{\"num_experts\": 4, \"prompts\": {}}", "num_layers");
	expect_bad("{\"num_layers\": 1, \"num_experts\": 0, \"prompts\": {}}", "num_experts");
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"prompts\": []}", "prompts");
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"top_k\": 9, \"prompts\": {}}",
		   "top_k");
}

Test(trace, bad_input_object_tokens,
     .description = "a bad token in the object form is named by its field path")
{
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"prompts\": {\"p\": "
		   "{\"decode\": [[[0]], [[4]]]}}}",
		   "prompts.p.decode[1]");
	expect_bad("{\"num_layers\": 2, \"num_experts\": 4, \"prompts\": {\"p\": "
		   "{\"prefill\": [[[0], [1]], [[0]]]}}}",
		   "prompts.p.prefill[1]");
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"top_k\": 1, \"prompts\": {\"p\": "
		   "{\"decode\": [[[0, 1]]]}}}",
		   "top_k");
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"prompts\": {\"p\": {\"decode\": 3}}}",
		   "prompts.p.decode");
}

Test(trace, bad_input_object_trailing,
     .description = "text after the object is rejected with its line")
{
	expect_bad("{\"num_layers\": 1, \"num_experts\": 4, \"prompts\": {\"p\": "
		   "{\"decode\": [[[0]]]}}}\n\nx",
		   "line 3");
}

Test(trace, bad_input_nul_byte, .description = "a NUL byte is rejected")
{
	static const char text[] = "{\"layers\": [[0]]}\n\0{}";
	struct moe_trace *t;
	char err[256];

	cr_assert_eq(moe_trace_parse("gen.json", text, sizeof(text) - 1, &t, err, sizeof(err)),
		     -EINVAL);
	cr_assert_null(t);
}

Test(trace, basic_return_rates_alternating,
     .description = "routing that alternates between two experts returns after two tokens, never "
		    "after one")
{
	struct moe_trace *t = parse_ok("{\"tok\": 0, \"layers\": [[0]]}\n"
				       "{\"tok\": 1, \"layers\": [[1]]}\n"
				       "{\"tok\": 2, \"layers\": [[0]]}\n"
				       "{\"tok\": 3, \"layers\": [[1]]}\n");
	struct moe_trace_view v;
	double rate[3];

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_trace_return_rates(&v, 3, rate), 0);
	cr_expect_float_eq(rate[0], 0.0, 1e-12); /* 3 uses can tell, none back */
	cr_expect_float_eq(rate[1], 1.0, 1e-12); /* 2 uses can tell, both back */
	cr_expect_float_eq(rate[2], 0.0, 1e-12); /* none left to tell */
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

Test(trace, bad_input_return_rates_no_gaps, .description = "asking for no gaps is -EINVAL")
{
	struct moe_trace *t = parse_ok(jsonl);
	struct moe_trace_view v;
	double rate[1];

	cr_assert_eq(moe_trace_select(t, NULL, MOE_TRACE_ALL, &v), 0);
	cr_assert_eq(moe_trace_return_rates(&v, 0, rate), -EINVAL);
	moe_trace_view_free(&v);
	moe_trace_free(t);
}

/* Finding a trace by name: a temporary folder standing for $MOECACHE_TRACES. */
static char find_dir[64];

static void find_setup(void)
{
	char file[128];
	FILE *f;

	strcpy(find_dir, "/tmp/moecache-trace-find-XXXXXX");
	cr_assert_not_null(mkdtemp(find_dir));
	snprintf(file, sizeof(file), "%s/gen.jsonl", find_dir);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs(jsonl, f);
	fclose(f);
}

static void find_teardown(void)
{
	char file[128];

	snprintf(file, sizeof(file), "%s/gen.jsonl", find_dir);
	unlink(file);
	rmdir(find_dir);
}

Test(trace, basic_find_name_in_moecache_traces, .init = find_setup, .fini = find_teardown,
     .description = "a bare name is found in the folder $MOECACHE_TRACES names, and loads")
{
	char path[256], want[128];
	struct moe_trace *t = NULL;

	setenv("MOECACHE_TRACES", find_dir, 1);
	snprintf(want, sizeof(want), "%s/gen.jsonl", find_dir);
	cr_assert_eq(moe_trace_find("gen.jsonl", path, sizeof(path)), 0);
	cr_expect_str_eq(path, want);
	cr_assert_eq(moe_trace_load("gen.jsonl", &t, NULL, 0), 0);
	cr_expect_eq(t->n_tokens, 2);
	moe_trace_free(t);
}

Test(trace, basic_find_path_is_itself, .init = find_setup, .fini = find_teardown,
     .description = "a name with a '/' is a path, taken as it is, never looked up elsewhere")
{
	char path[256];

	setenv("MOECACHE_TRACES", find_dir, 1);
	cr_assert_eq(moe_trace_find("./gen.jsonl", path, sizeof(path)), 0);
	cr_expect_str_eq(path, "./gen.jsonl");
	cr_expect_eq(moe_trace_load("./gen.jsonl", &(struct moe_trace *){NULL}, NULL, 0), -ENOENT);
}

Test(trace, bad_input_find_unknown_name, .init = find_setup, .fini = find_teardown,
     .description = "a name found nowhere is -ENOENT, and the load's message names it")
{
	struct moe_trace *t = (struct moe_trace *)1;
	char path[256], err[256];

	setenv("MOECACHE_TRACES", find_dir, 1);
	cr_expect_eq(moe_trace_find("no-such-trace.jsonl", path, sizeof(path)), -ENOENT);
	cr_assert_eq(moe_trace_load("no-such-trace.jsonl", &t, err, sizeof(err)), -ENOENT);
	cr_expect_null(t);
	cr_expect_not_null(strstr(err, "no-such-trace.jsonl"), "%s", err);
}

Test(trace, bad_input_find_arguments, .init = find_setup, .fini = find_teardown,
     .description = "NULL or empty names and no room are -EINVAL, a path too long -ENAMETOOLONG")
{
	char path[256];

	setenv("MOECACHE_TRACES", find_dir, 1);
	cr_expect_eq(moe_trace_find(NULL, path, sizeof(path)), -EINVAL);
	cr_expect_eq(moe_trace_find("", path, sizeof(path)), -EINVAL);
	cr_expect_eq(moe_trace_find("gen.jsonl", NULL, sizeof(path)), -EINVAL);
	cr_expect_eq(moe_trace_find("gen.jsonl", path, 0), -EINVAL);
	cr_expect_eq(moe_trace_find("gen.jsonl", path, 8), -ENAMETOOLONG);
}
