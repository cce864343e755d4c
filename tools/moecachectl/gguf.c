// SPDX-License-Identifier: MIT
/*
 * GGUF reader (versions 2 and 3, little-endian): magic "GGUF", version,
 * tensor count, key/value count, the key/values, the tensor infos (name,
 * dimensions innermost first, GGML type, offset), then the data from the
 * next multiple of general.alignment (32 by default).
 */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_internal.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 4096 /* ggml allows 64; a longer name is taken as a lie */
#define GGUF_MAX_NESTING 4

enum gguf_type {
	GGUF_U8 = 0,
	GGUF_I8 = 1,
	GGUF_U16 = 2,
	GGUF_I16 = 3,
	GGUF_U32 = 4,
	GGUF_I32 = 5,
	GGUF_F32 = 6,
	GGUF_BOOL = 7,
	GGUF_STRING = 8,
	GGUF_ARRAY = 9,
	GGUF_U64 = 10,
	GGUF_I64 = 11,
	GGUF_F64 = 12,
};

/* Block size (elements) and bytes per block of each GGML type. */
static const struct {
	const char *name;
	uint32_t block;
	uint32_t bytes;
} ggml_types[] = {
    [0] = {"F32", 1, 4},	 [1] = {"F16", 1, 2},	      [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},	 [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},	 [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},	 [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},	 [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},	 [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},	 [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},	      [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},	 [27] = {"I64", 1, 8},	      [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},	 [30] = {"BF16", 1, 2},	      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},	 [39] = {"MXFP4", 32, 17},
};

static const uint8_t gguf_scalar_size[] = {
    [GGUF_U8] = 1,  [GGUF_I8] = 1,   [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4, [GGUF_I32] = 4,
    [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

struct gguf_reader {
	FILE *fp;
	const char *path;
	uint64_t pos;
	uint64_t size;
	struct ckpt_error *err;
};

/* <arch>.expert_count values, matched to general.architecture at the end. */
struct gguf_counts {
	char *arch;
	struct {
		char *prefix;
		uint32_t value;
	} * v;
	uint32_t n;
};

static int truncated(struct gguf_reader *r, const char *what)
{
	return ckpt_fail(r->err, -EINVAL,
			 "%s: %s runs past the end of the file (%" PRIu64 " bytes)", r->path, what,
			 r->size);
}

static int rd(struct gguf_reader *r, void *buf, uint64_t n, const char *what)
{
	if (n > r->size - r->pos)
		return truncated(r, what);
	if (n && fread(buf, (size_t)n, 1, r->fp) != 1)
		return ckpt_fail(r->err, -EIO, "%s: cannot read %s", r->path, what);
	r->pos += n;
	return 0;
}

static int skip(struct gguf_reader *r, uint64_t n, const char *what)
{
	if (n > r->size - r->pos)
		return truncated(r, what);
	if (fseeko(r->fp, (off_t)n, SEEK_CUR))
		return ckpt_fail(r->err, -EIO, "%s: cannot seek", r->path);
	r->pos += n;
	return 0;
}

static int rd_u32(struct gguf_reader *r, uint32_t *v, const char *what)
{
	int ret = rd(r, v, 4, what);

	*v = le32toh(*v);
	return ret;
}

static int rd_u64(struct gguf_reader *r, uint64_t *v, const char *what)
{
	int ret = rd(r, v, 8, what);

	*v = le64toh(*v);
	return ret;
}

/* A length-prefixed string; *out is NUL-terminated and malloc'd, or NULL to skip it. */
static int rd_string(struct gguf_reader *r, char **out, uint64_t max, const char *what)
{
	uint64_t len;
	char *s;
	int ret;

	ret = rd_u64(r, &len, what);
	if (ret)
		return ret;
	if (!out)
		return skip(r, len, what);
	if (len > max)
		return ckpt_fail(r->err, -EINVAL, "%s: %s of %" PRIu64 " bytes is too long",
				 r->path, what, len);
	s = malloc(len + 1);
	if (!s)
		return ckpt_fail(r->err, -ENOMEM, "%s: out of memory", r->path);
	ret = rd(r, s, len, what);
	if (ret) {
		free(s);
		return ret;
	}
	s[len] = '\0';
	*out = s;
	return 0;
}

static int skip_value(struct gguf_reader *r, uint32_t type, int depth, const char *key)
{
	uint32_t elem;
	uint64_t count, bytes, i;
	int ret;

	if (type < sizeof(gguf_scalar_size) && gguf_scalar_size[type])
		return skip(r, gguf_scalar_size[type], key);
	if (type == GGUF_STRING)
		return rd_string(r, NULL, 0, key);
	if (type != GGUF_ARRAY)
		return ckpt_fail(r->err, -EINVAL, "%s: key '%s': unknown value type %u", r->path,
				 key, type);
	if (depth >= GGUF_MAX_NESTING)
		return ckpt_fail(r->err, -EINVAL, "%s: key '%s': arrays nested too deep", r->path,
				 key);
	ret = rd_u32(r, &elem, key);
	if (!ret)
		ret = rd_u64(r, &count, key);
	if (ret)
		return ret;
	if (elem < sizeof(gguf_scalar_size) && gguf_scalar_size[elem]) {
		if (ckpt_mul(count, gguf_scalar_size[elem], &bytes))
			return truncated(r, key);
		return skip(r, bytes, key);
	}
	/* every other element takes at least 8 bytes: bound count before looping */
	if (count > (r->size - r->pos) / 8)
		return truncated(r, key);
	for (i = 0; i < count; i++) {
		ret = skip_value(r, elem, depth + 1, key);
		if (ret)
			return ret;
	}
	return 0;
}

static int rd_kv(struct gguf_reader *r, uint32_t *alignment, struct gguf_counts *counts)
{
	static const char suffix[] = ".expert_count";
	size_t klen, slen = sizeof(suffix) - 1;
	char *key = NULL;
	uint32_t type, v32;
	int ret;

	ret = rd_string(r, &key, GGUF_MAX_NAME, "a key");
	if (!ret)
		ret = rd_u32(r, &type, "a value type");
	if (ret)
		goto out;
	klen = strlen(key);
	if (!strcmp(key, "general.alignment")) {
		if (type != GGUF_U32) {
			ret = ckpt_fail(r->err, -EINVAL, "%s: general.alignment is not a uint32",
					r->path);
			goto out;
		}
		ret = rd_u32(r, alignment, key);
		if (!ret && (!*alignment || (*alignment & (*alignment - 1))))
			ret = ckpt_fail(r->err, -EINVAL,
					"%s: general.alignment %u is not a power of two", r->path,
					*alignment);
	} else if (!strcmp(key, "general.architecture") && type == GGUF_STRING) {
		free(counts->arch);
		counts->arch = NULL;
		ret = rd_string(r, &counts->arch, GGUF_MAX_NAME, key);
	} else if (klen > slen && !strcmp(key + klen - slen, suffix) && type == GGUF_U32) {
		void *v = realloc(counts->v, (counts->n + 1) * sizeof(*counts->v));

		if (!v) {
			ret = ckpt_fail(r->err, -ENOMEM, "%s: out of memory", r->path);
			goto out;
		}
		counts->v = v;
		ret = rd_u32(r, &v32, key);
		if (!ret) {
			key[klen - slen] = '\0';
			counts->v[counts->n].prefix = key;
			counts->v[counts->n].value = v32;
			counts->n++;
			key = NULL;
		}
	} else {
		ret = skip_value(r, type, 0, key);
	}
out:
	free(key);
	return ret;
}

static int rd_tensor(struct ckpt *c, struct gguf_reader *r, uint32_t file, uint32_t alignment)
{
	uint64_t ne[GGUF_MAX_DIMS], row, size, off;
	struct ckpt_tensor *t;
	uint32_t n_dims, type, i;
	char *name = NULL;
	int ret;

	ret = rd_string(r, &name, GGUF_MAX_NAME, "a tensor name");
	if (ret)
		return ret;
	ret = rd_u32(r, &n_dims, "a tensor's dimensions");
	if (!ret && (n_dims < 1 || n_dims > GGUF_MAX_DIMS))
		ret = ckpt_fail(r->err, -EINVAL, "%s: tensor '%s': %u dimensions", r->path, name,
				n_dims);
	for (i = 0; i < n_dims && !ret; i++)
		ret = rd_u64(r, &ne[i], "a tensor's dimensions");
	if (!ret)
		ret = rd_u32(r, &type, "a tensor's type");
	if (!ret)
		ret = rd_u64(r, &off, "a tensor's offset");
	if (ret)
		goto out;
	if (type >= sizeof(ggml_types) / sizeof(ggml_types[0]) || !ggml_types[type].name) {
		ret = ckpt_fail(r->err, -EINVAL, "%s: tensor '%s': unknown GGML type %u", r->path,
				name, type);
		goto out;
	}
	if (ne[0] % ggml_types[type].block) {
		ret =
		    ckpt_fail(r->err, -EINVAL,
			      "%s: tensor '%s': %" PRIu64 " elements per row is not a multiple "
			      "of the %s block of %u",
			      r->path, name, ne[0], ggml_types[type].name, ggml_types[type].block);
		goto out;
	}
	row = ne[0] / ggml_types[type].block * ggml_types[type].bytes;
	size = row;
	for (i = 1; i < n_dims && !ret; i++)
		ret = ckpt_mul(size, ne[i], &size);
	if (ret) {
		ret = ckpt_fail(r->err, -EINVAL, "%s: tensor '%s': size overflows", r->path, name);
		goto out;
	}
	if (off % alignment) {
		ret = ckpt_fail(r->err, -EINVAL,
				"%s: tensor '%s': offset %" PRIu64 " is not a multiple of %u",
				r->path, name, off, alignment);
		goto out;
	}
	t = ckpt_add_tensor(c, name, file);
	if (!t) {
		ret = ckpt_fail(r->err, -ENOMEM, "%s: out of memory", r->path);
		goto out;
	}
	snprintf(t->dtype, sizeof(t->dtype), "%s", ggml_types[type].name);
	t->n_dims = n_dims;
	for (i = 0; i < n_dims; i++)
		t->shape[i] = ne[n_dims - 1 - i];
	t->offset = off; /* relative to the data until it is known where that starts */
	t->size = size;
out:
	free(name);
	return ret;
}

static int gguf_check_version(struct gguf_reader *r)
{
	char magic[4];
	uint32_t version;
	int ret;

	ret = rd(r, magic, 4, "the magic");
	if (ret)
		return ret;
	if (memcmp(magic, GGUF_MAGIC, 4))
		return ckpt_fail(r->err, -EINVAL, "%s: not a GGUF file (bad magic)", r->path);
	ret = rd_u32(r, &version, "the version");
	if (ret)
		return ret;
	if (version == 2 || version == 3)
		return 0;
	if (version == 1)
		return ckpt_fail(r->err, -EINVAL, "%s: GGUF version 1 is not supported", r->path);
	if (bswap_32(version) == 2 || bswap_32(version) == 3)
		return ckpt_fail(r->err, -EINVAL, "%s: big-endian GGUF is not supported", r->path);
	return ckpt_fail(r->err, -EINVAL, "%s: unknown GGUF version %u", r->path, version);
}

static void counts_free(struct gguf_counts *counts)
{
	uint32_t i;

	for (i = 0; i < counts->n; i++)
		free(counts->v[i].prefix);
	free(counts->v);
	free(counts->arch);
}

static int gguf_parse(struct ckpt *c, struct gguf_reader *r, uint32_t file)
{
	uint32_t alignment = GGUF_DEFAULT_ALIGNMENT, i;
	struct gguf_counts counts = {0};
	uint64_t n_tensors, n_kv, k, data_start;
	int ret;

	ret = gguf_check_version(r);
	if (!ret)
		ret = rd_u64(r, &n_tensors, "the tensor count");
	if (!ret)
		ret = rd_u64(r, &n_kv, "the key/value count");
	if (ret)
		return ret;
	/* the smallest key/value takes 13 bytes, the smallest tensor info 32 */
	if (n_kv > (r->size - r->pos) / 13 || n_tensors > (r->size - r->pos) / 32 ||
	    n_tensors > UINT32_MAX / 2)
		return ckpt_fail(r->err, -EINVAL,
				 "%s: %" PRIu64 " keys and %" PRIu64
				 " tensors cannot fit in the file",
				 r->path, n_kv, n_tensors);
	for (k = 0; k < n_kv && !ret; k++)
		ret = rd_kv(r, &alignment, &counts);
	for (k = 0; k < n_tensors && !ret; k++)
		ret = rd_tensor(c, r, file, alignment);
	if (ret)
		goto out;
	for (i = 0; i < counts.n; i++)
		if (counts.arch && !strcmp(counts.v[i].prefix, counts.arch))
			c->expert_count = counts.v[i].value;

	data_start = (r->pos + alignment - 1) / alignment * alignment;
	for (i = 0; i < c->n_tensors; i++)
		if (__builtin_add_overflow(c->tensors[i].offset, data_start,
					   &c->tensors[i].offset)) {
			ret = ckpt_fail(r->err, -EINVAL, "%s: tensor '%s': offset overflows",
					r->path, c->tensors[i].name);
			goto out;
		}
	ret = ckpt_check_extents(c, file, r->err);
out:
	counts_free(&counts);
	return ret;
}

int ckpt_open_gguf(const char *path, struct ckpt *c, struct ckpt_error *err)
{
	struct gguf_reader r = {.path = path, .err = err};
	uint32_t file;
	int ret;

	memset(c, 0, sizeof(*c));
	c->format = CKPT_GGUF;
	ret = ckpt_add_file(c, path, &file, err);
	if (ret)
		goto out;
	r.size = c->files[file].size;
	r.fp = fdopen(dup(c->files[file].fd), "r");
	if (!r.fp) {
		ret = ckpt_fail(err, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* the headers are read sequentially; a large buffer saves system calls */
	setvbuf(r.fp, NULL, _IOFBF, 1 << 20);
	ret = gguf_parse(c, &r, file);
	fclose(r.fp);
out:
	if (ret)
		ckpt_close(c);
	c->format = CKPT_GGUF;
	return ret;
}
