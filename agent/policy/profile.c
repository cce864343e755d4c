// SPDX-License-Identifier: MIT
/* Reading and writing expert popularity profiles (see profile.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "profile.h"

void moe_profile_free(struct moe_profile *p)
{
	if (!p)
		return;
	free(p->ranked);
	p->ranked = NULL;
	p->n = 0;
}

static int moe_cmp_ids(const void *a, const void *b, void *arg)
{
	const double *key = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (key[x] != key[y])
		return key[x] > key[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

void moe_rank_ids(uint32_t *ids, uint32_t n, const double *key)
{
	qsort_r(ids, n, sizeof(*ids), moe_cmp_ids, (void *)key);
}

int moe_profile_rank(const double *count, uint32_t n_layers, uint32_t n_local,
		     struct moe_profile *out)
{
	uint32_t n_ids = n_layers * n_local, n = 0;
	uint32_t *ids = malloc(sizeof(*ids) * (n_ids ? n_ids : 1));

	out->n = 0;
	out->ranked = malloc(sizeof(*out->ranked) * (n_ids ? n_ids : 1));
	if (!ids || !out->ranked) {
		free(ids);
		moe_profile_free(out);
		return -ENOMEM;
	}
	for (uint32_t id = 0; id < n_ids; id++)
		if (count[id] > 0)
			ids[n++] = id;
	moe_rank_ids(ids, n, count);
	for (uint32_t i = 0; i < n; i++) {
		out->ranked[i].layer = ids[i] / n_local;
		out->ranked[i].expert = ids[i] % n_local;
	}
	out->n = n;
	free(ids);
	return 0;
}

static unsigned int moe_line_of(const char *text, size_t offset)
{
	unsigned int line = 1;

	for (size_t i = 0; i < offset && text[i]; i++)
		line += text[i] == '\n';
	return line;
}

static int moe_cmp_expert_id(const void *a, const void *b)
{
	const struct moe_expert_id *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return x->expert < y->expert ? -1 : x->expert > y->expert;
}

/* -EINVAL if an expert appears twice: a ranking names each expert once. */
static int moe_profile_check_unique(const char *name, const struct moe_profile *p)
{
	struct moe_expert_id *sorted;
	int err = 0;

	if (p->n < 2)
		return 0;
	sorted = malloc(sizeof(*sorted) * p->n);
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, p->ranked, sizeof(*sorted) * p->n);
	qsort(sorted, p->n, sizeof(*sorted), moe_cmp_expert_id);
	for (uint32_t i = 1; i < p->n; i++) {
		if (!moe_cmp_expert_id(&sorted[i - 1], &sorted[i])) {
			fprintf(stderr, "%s: expert (%u, %u) is ranked twice\n", name,
				sorted[i].layer, sorted[i].expert);
			err = -EINVAL;
			break;
		}
	}
	free(sorted);
	return err;
}

static int moe_profile_push(struct moe_profile *p, uint32_t *cap, uint32_t layer, uint32_t expert)
{
	if (p->n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 64;
		struct moe_expert_id *r;

		if (ncap < *cap)
			return -ENOMEM;
		r = realloc(p->ranked, sizeof(*r) * ncap);
		if (!r)
			return -ENOMEM;
		p->ranked = r;
		*cap = ncap;
	}
	p->ranked[p->n].layer = layer;
	p->ranked[p->n].expert = expert;
	p->n++;
	return 0;
}

static int moe_json_u32(struct json_object *o, uint32_t *out)
{
	int64_t v;

	if (!json_object_is_type(o, json_type_int))
		return -EINVAL;
	errno = 0;
	v = json_object_get_int64(o);
	if (errno || v < 0 || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int moe_profile_parse_json(const char *name, const char *text, struct moe_profile *out)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *root = NULL, *ranked;
	uint32_t cap = 0;
	size_t len = strlen(text), end;
	int err = -EINVAL;

	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!root) {
		enum json_tokener_error jerr = json_tokener_get_error(tok);

		fprintf(stderr, "%s: line %u: invalid JSON: %s\n", name, moe_line_of(text, end),
			jerr == json_tokener_continue ? "unexpected end of file"
						      : json_tokener_error_desc(jerr));
		goto out;
	}
	for (size_t i = end; i < len; i++) {
		if (!isspace((unsigned char)text[i])) {
			fprintf(stderr, "%s: line %u: text after the JSON object\n", name,
				moe_line_of(text, i));
			goto out;
		}
	}
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "ranked", &ranked) ||
	    !json_object_is_type(ranked, json_type_array)) {
		fprintf(stderr, "%s: \"ranked\": missing or not an array\n", name);
		goto out;
	}
	for (size_t i = 0; i < json_object_array_length(ranked); i++) {
		struct json_object *pair = json_object_array_get_idx(ranked, i);
		uint32_t layer, expert;

		if (!json_object_is_type(pair, json_type_array) ||
		    json_object_array_length(pair) != 2 ||
		    moe_json_u32(json_object_array_get_idx(pair, 0), &layer) ||
		    moe_json_u32(json_object_array_get_idx(pair, 1), &expert)) {
			fprintf(
			    stderr,
			    "%s: ranked[%zu]: not a [layer, expert] pair of unsigned integers\n",
			    name, i);
			goto out;
		}
		err = moe_profile_push(out, &cap, layer, expert);
		if (err)
			goto out;
		err = -EINVAL;
	}
	err = 0;
out:
	json_object_put(root);
	json_tokener_free(tok);
	return err;
}

/* One unsigned 32-bit decimal number at *s; advances *s past it. */
static int moe_parse_u32(const char **s, uint32_t *out)
{
	const char *p = *s;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
		p++;
	}
	*out = (uint32_t)v;
	*s = p;
	return 0;
}

static int moe_profile_parse_text(const char *name, const char *text, struct moe_profile *out)
{
	uint32_t cap = 0;
	unsigned int line = 0;
	const char *s = text;

	while (*s) {
		const char *eol = strchr(s, '\n');
		const char *end = eol ? eol : s + strlen(s);
		uint32_t layer, expert;
		int err;

		line++;
		while (s < end && isspace((unsigned char)*s))
			s++;
		if (s == end || *s == '#')
			goto next;
		if (moe_parse_u32(&s, &layer) || s == end || !isspace((unsigned char)*s))
			goto bad;
		while (s < end && isspace((unsigned char)*s))
			s++;
		if (moe_parse_u32(&s, &expert))
			goto bad;
		while (s < end && isspace((unsigned char)*s))
			s++;
		if (s != end && *s != '#')
			goto bad;
		err = moe_profile_push(out, &cap, layer, expert);
		if (err)
			return err;
	next:
		s = eol ? eol + 1 : end;
		continue;
	bad:
		fprintf(stderr, "%s: line %u: expected \"layer expert\" (two unsigned integers)\n",
			name, line);
		return -EINVAL;
	}
	return 0;
}

int moe_profile_parse(const char *name, const char *text, struct moe_profile *out)
{
	const char *s = text;
	int err;

	if (!out)
		return -EINVAL;
	out->n = 0;
	out->ranked = NULL;
	if (!text)
		return -EINVAL;
	if (!name)
		name = "profile";
	while (isspace((unsigned char)*s))
		s++;
	err = *s == '{' ? moe_profile_parse_json(name, text, out)
			: moe_profile_parse_text(name, text, out);
	if (!err)
		err = moe_profile_check_unique(name, out);
	if (err)
		moe_profile_free(out);
	return err;
}

/* Reads a whole file into a NUL-terminated buffer; a NUL inside is -EINVAL. */
static int moe_read_text(const char *path, char **out)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int err = 0;

	*out = NULL;
	f = fopen(path, "rb");
	if (!f)
		return -errno;
	for (;;) {
		size_t got;

		if (cap - len < 4096) {
			char *nbuf = realloc(buf, cap ? cap * 2 : 8192);

			if (!nbuf) {
				err = -ENOMEM;
				break;
			}
			buf = nbuf;
			cap = cap ? cap * 2 : 8192;
		}
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0) {
			if (ferror(f))
				err = -EIO;
			break;
		}
	}
	fclose(f);
	if (!err && memchr(buf, '\0', len)) {
		fprintf(stderr, "%s: binary data (a NUL byte) in a text file\n", path);
		err = -EINVAL;
	}
	if (err) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int moe_profile_load(const char *path, struct moe_profile *out)
{
	char *text = NULL;
	int err;

	if (!out)
		return -EINVAL;
	out->n = 0;
	out->ranked = NULL;
	if (!path)
		return -EINVAL;
	err = moe_read_text(path, &text);
	if (err)
		return err;
	err = moe_profile_parse(path, text, out);
	free(text);
	return err;
}

static int moe_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int moe_profile_save(const char *path, const struct moe_profile *p)
{
	struct json_object *root, *ranked;
	const char *json;
	char *tmp = NULL;
	int fd = -1, err;

	if (!path || !p || (p->n && !p->ranked))
		return -EINVAL;
	root = json_object_new_object();
	ranked = json_object_new_array();
	if (!root || !ranked) {
		json_object_put(root);
		json_object_put(ranked);
		return -ENOMEM;
	}
	json_object_object_add(root, "ranked", ranked);
	for (uint32_t i = 0; i < p->n; i++) {
		struct json_object *pair = json_object_new_array();

		if (!pair || json_object_array_add(ranked, pair)) {
			json_object_put(pair);
			err = -ENOMEM;
			goto out;
		}
		if (json_object_array_add(pair, json_object_new_int64(p->ranked[i].layer)) ||
		    json_object_array_add(pair, json_object_new_int64(p->ranked[i].expert))) {
			err = -ENOMEM;
			goto out;
		}
	}
	json = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
	if (!json || asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		err = -ENOMEM;
		goto out;
	}
	/* Same folder as path, so the rename cannot cross file systems. */
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	err = moe_write_all(fd, json, strlen(json));
	if (!err)
		err = moe_write_all(fd, "\n", 1);
	if (!err && fchmod(fd, 0644))
		err = -errno;
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	fd = -1;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
out:
	free(tmp);
	json_object_put(root);
	return err;
}
