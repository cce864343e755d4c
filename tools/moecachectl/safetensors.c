// SPDX-License-Identifier: MIT
/*
 * safetensors reader: an 8-byte little-endian header length, a JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__"},
 * then the data, offsets relative to its start. Sharded checkpoints list
 * their tensors in model.safetensors.index.json: {"weight_map": {name: file}}.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ckpt_internal.h"

static const struct {
	const char *name;
	unsigned int bits;
} st_dtypes[] = {
    {"BOOL", 8},    {"U8", 8},	 {"I8", 8},	 {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16},	 {"F16", 16},	 {"BF16", 16},
    {"I32", 32},    {"U32", 32}, {"F32", 32},	 {"I64", 64},	 {"U64", 64},
    {"F64", 64},    {"F4", 4},	 {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

unsigned int ckpt_st_dtype_bits(const char *dtype)
{
	size_t i;

	for (i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (!strcmp(st_dtypes[i].name, dtype))
			return st_dtypes[i].bits;
	return 0;
}

static int get_uint(struct json_object *v, uint64_t *out)
{
	int64_t x;

	if (!json_object_is_type(v, json_type_int))
		return -EINVAL;
	x = json_object_get_int64(v);
	if (x < 0)
		return -EINVAL;
	*out = (uint64_t)x;
	return 0;
}

static int st_parse_tensor(struct ckpt *c, uint32_t file, const char *name,
			   struct json_object *desc, uint64_t data_start, struct ckpt_error *err)
{
	const char *path = c->files[file].path;
	struct json_object *dtype, *shape, *offsets;
	uint64_t begin, end, elems = 1, bits;
	struct ckpt_tensor *t;
	size_t i, n_dims;

	if (!json_object_is_type(desc, json_type_object) ||
	    !json_object_object_get_ex(desc, "dtype", &dtype) ||
	    !json_object_is_type(dtype, json_type_string) ||
	    !json_object_object_get_ex(desc, "shape", &shape) ||
	    !json_object_is_type(shape, json_type_array) ||
	    !json_object_object_get_ex(desc, "data_offsets", &offsets) ||
	    !json_object_is_type(offsets, json_type_array))
		return ckpt_fail(err, -EINVAL,
				 "%s: tensor '%s': needs \"dtype\", \"shape\" and \"data_offsets\"",
				 path, name);
	bits = ckpt_st_dtype_bits(json_object_get_string(dtype));
	if (!bits || json_object_get_string_len(dtype) >= CKPT_DTYPE_LEN)
		return ckpt_fail(err, -EINVAL, "%s: tensor '%s': unknown dtype '%s'", path, name,
				 json_object_get_string(dtype));
	n_dims = json_object_array_length(shape);
	if (n_dims > CKPT_MAX_DIMS)
		return ckpt_fail(err, -EINVAL, "%s: tensor '%s': %zu dimensions (at most %d)", path,
				 name, n_dims, CKPT_MAX_DIMS);
	if (json_object_array_length(offsets) != 2 ||
	    get_uint(json_object_array_get_idx(offsets, 0), &begin) ||
	    get_uint(json_object_array_get_idx(offsets, 1), &end) || end < begin)
		return ckpt_fail(err, -EINVAL, "%s: tensor '%s': bad data_offsets", path, name);

	t = ckpt_add_tensor(c, name, file);
	if (!t)
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
	snprintf(t->dtype, sizeof(t->dtype), "%s", json_object_get_string(dtype));
	t->n_dims = (uint32_t)n_dims;
	for (i = 0; i < n_dims; i++) {
		if (get_uint(json_object_array_get_idx(shape, i), &t->shape[i]))
			return ckpt_fail(err, -EINVAL, "%s: tensor '%s': bad shape", path, name);
		if (ckpt_mul(elems, t->shape[i], &elems))
			return ckpt_fail(err, -EINVAL, "%s: tensor '%s': shape overflows", path,
					 name);
	}
	if (ckpt_mul(elems, bits, &elems) || elems % 8)
		return ckpt_fail(err, -EINVAL,
				 "%s: tensor '%s': size overflows or is not whole bytes", path,
				 name);
	if (end - begin != elems / 8)
		return ckpt_fail(err, -EINVAL,
				 "%s: tensor '%s': dtype size mismatch: %s of %" PRIu64
				 " bytes, but data_offsets span %" PRIu64,
				 path, name, t->dtype, elems / 8, end - begin);
	if (__builtin_add_overflow(data_start, begin, &t->offset))
		return ckpt_fail(err, -EINVAL, "%s: tensor '%s': offset overflows", path, name);
	t->size = end - begin;
	return 0;
}

static int st_read_header(struct ckpt_file *f, char **text, uint64_t *len, struct ckpt_error *err)
{
	uint64_t n;
	char *buf;
	ssize_t got;

	if (f->size < 8)
		return ckpt_fail(err, -EINVAL,
				 "%s: too short for a safetensors header (%" PRIu64 " bytes)",
				 f->path, f->size);
	if (pread(f->fd, &n, sizeof(n), 0) != sizeof(n))
		return ckpt_fail(err, -EIO, "%s: cannot read the header length", f->path);
	n = le64toh(n);
	if (n > CKPT_ST_MAX_HEADER)
		return ckpt_fail(err, -EINVAL, "%s: header of %" PRIu64 " bytes is too large",
				 f->path, n);
	if (n > f->size - 8)
		return ckpt_fail(err, -EINVAL,
				 "%s: header of %" PRIu64 " bytes, but the file has only %" PRIu64
				 ": truncated file",
				 f->path, n, f->size);
	buf = malloc(n + 1);
	if (!buf)
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", f->path);
	got = pread(f->fd, buf, n, 8);
	if (got < 0 || (uint64_t)got != n) {
		free(buf);
		return ckpt_fail(err, -EIO, "%s: cannot read the header", f->path);
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}

static int st_parse_file(struct ckpt *c, const char *path, struct ckpt_error *err)
{
	struct json_tokener *tok = NULL;
	struct json_object *root = NULL;
	uint64_t len = 0;
	char *text = NULL;
	uint32_t fi;
	size_t end;
	int ret;

	ret = ckpt_add_file(c, path, &fi, err);
	if (ret)
		return ret;
	ret = st_read_header(&c->files[fi], &text, &len, err);
	if (ret)
		return ret;
	tok = json_tokener_new();
	if (!tok) {
		ret = ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	root = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!root || json_tokener_get_error(tok) != json_tokener_success) {
		ret = ckpt_fail(err, -EINVAL, "%s: header is not valid JSON: %s", path,
				json_tokener_error_desc(json_tokener_get_error(tok)));
		goto out;
	}
	/* The header may be padded with spaces; nothing else may follow. */
	if (strspn(text + end, " \t\r\n") != len - end) {
		ret = ckpt_fail(err, -EINVAL, "%s: header has bytes after its JSON", path);
		goto out;
	}
	if (!json_object_is_type(root, json_type_object)) {
		ret = ckpt_fail(err, -EINVAL, "%s: header is not a JSON object", path);
		goto out;
	}
	json_object_object_foreach(root, name, desc)
	{
		if (!strcmp(name, "__metadata__")) {
			if (!json_object_is_type(desc, json_type_object)) {
				ret = ckpt_fail(err, -EINVAL, "%s: __metadata__ is not an object",
						path);
				goto out;
			}
			continue;
		}
		ret = st_parse_tensor(c, fi, name, desc, 8 + len, err);
		if (ret)
			goto out;
	}
	ret = ckpt_check_extents(c, fi, err);
out:
	json_object_put(root);
	if (tok)
		json_tokener_free(tok);
	free(text);
	return ret;
}

/* A shard named by the index: a plain relative path inside its folder. */
static bool shard_name_ok(const char *name)
{
	const char *p = name;

	if (!*name || *name == '/')
		return false;
	while (p) {
		if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == '\0'))
			return false;
		p = strchr(p, '/');
		if (p)
			p++;
	}
	return true;
}

static int tensor_name_cmp(const void *a, const void *b)
{
	const struct ckpt_tensor *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Every tensor the index lists is in the shard it names; none is in two shards. */
static int st_check_index(const struct ckpt *c, const char *path, struct json_object *map,
			  const char *dir, struct ckpt_error *err)
{
	const struct ckpt_tensor **sorted;
	uint32_t i;
	int ret = 0;

	sorted = calloc(c->n_tensors ? c->n_tensors : 1, sizeof(*sorted));
	if (!sorted)
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
	for (i = 0; i < c->n_tensors; i++)
		sorted[i] = &c->tensors[i];
	qsort(sorted, c->n_tensors, sizeof(*sorted), tensor_name_cmp);
	for (i = 1; i < c->n_tensors; i++)
		if (!strcmp(sorted[i - 1]->name, sorted[i]->name)) {
			ret = ckpt_fail(err, -EINVAL, "%s: tensor '%s' is in both %s and %s", path,
					sorted[i]->name, c->files[sorted[i - 1]->file].path,
					c->files[sorted[i]->file].path);
			goto out;
		}
	json_object_object_foreach(map, name, file)
	{
		struct ckpt_tensor key = {.name = name};
		const struct ckpt_tensor *kp = &key, **hit;
		char *want;

		hit = bsearch(&kp, sorted, c->n_tensors, sizeof(*sorted), tensor_name_cmp);
		if (asprintf(&want, "%s/%s", dir, json_object_get_string(file)) < 0) {
			ret = ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
			goto out;
		}
		if (!hit || strcmp(c->files[(*hit)->file].path, want)) {
			ret =
			    ckpt_fail(err, -EINVAL, "%s: tensor '%s': listed in %s, which lacks it",
				      path, name, want);
			free(want);
			goto out;
		}
		free(want);
	}
out:
	free(sorted);
	return ret;
}

static int st_open_index(struct ckpt *c, const char *path, struct ckpt_error *err)
{
	struct json_object *root, *map;
	char *copy = strdup(path), *dir;
	int ret = 0;

	if (!copy)
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
	dir = dirname(copy);
	root = json_object_from_file(path);
	if (!root) {
		ret = ckpt_fail(err, errno == ENOENT ? -ENOENT : -EINVAL, "%s: %s", path,
				json_util_get_last_err() ? json_util_get_last_err()
							 : "cannot read JSON");
		goto out;
	}
	if (!json_object_object_get_ex(root, "weight_map", &map) ||
	    !json_object_is_type(map, json_type_object)) {
		ret = ckpt_fail(err, -EINVAL, "%s: no \"weight_map\" object", path);
		goto out;
	}
	json_object_object_foreach(map, name, file)
	{
		const char *shard = json_object_get_string(file);
		char *full;
		uint32_t i;
		bool seen = false;

		if (!json_object_is_type(file, json_type_string) || !shard_name_ok(shard)) {
			ret =
			    ckpt_fail(err, -EINVAL, "%s: tensor '%s': bad shard name", path, name);
			goto out;
		}
		if (asprintf(&full, "%s/%s", dir, shard) < 0) {
			ret = ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
			goto out;
		}
		for (i = 0; i < c->n_files && !seen; i++)
			seen = !strcmp(c->files[i].path, full);
		if (!seen)
			ret = st_parse_file(c, full, err);
		free(full);
		if (ret)
			goto out;
	}
	ret = st_check_index(c, path, map, dir, err);
out:
	json_object_put(root);
	free(copy);
	return ret;
}

static bool looks_like_json(const char *path)
{
	size_t len = strlen(path);
	char first = 0;
	FILE *f;

	if (len >= 5 && !strcmp(path + len - 5, ".json"))
		return true;
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fread(&first, 1, 1, f) == 1 && strchr(" \t\r\n", first))
		;
	fclose(f);
	return first == '{';
}

int ckpt_open_safetensors(const char *path, struct ckpt *c, struct ckpt_error *err)
{
	static const char *const in_dir[] = {"model.safetensors.index.json", "model.safetensors"};
	struct stat st;
	char *chosen = NULL;
	size_t i;
	int ret;

	memset(c, 0, sizeof(*c));
	c->format = CKPT_SAFETENSORS;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		for (i = 0; i < sizeof(in_dir) / sizeof(in_dir[0]) && !chosen; i++) {
			if (asprintf(&chosen, "%s/%s", path, in_dir[i]) < 0)
				return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
			if (access(chosen, F_OK)) {
				free(chosen);
				chosen = NULL;
			}
		}
		if (!chosen)
			return ckpt_fail(err, -ENOENT, "%s: no %s or %s in the folder", path,
					 in_dir[0], in_dir[1]);
		path = chosen;
	}
	if (looks_like_json(path))
		ret = st_open_index(c, path, err);
	else
		ret = st_parse_file(c, path, err);
	free(chosen);
	if (ret)
		ckpt_close(c);
	c->format = CKPT_SAFETENSORS;
	return ret;
}
