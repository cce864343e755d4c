// SPDX-License-Identifier: MIT
/*
 * Checkpoint planning and loading, common to both formats: which tensors
 * belong to which expert, the record layout, reading into records.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ckpt_internal.h"

/* Layer and expert numbers above these in a name are not taken as such. */
#define CKPT_MAX_NUMBER (1u << 20)

int ckpt_fail(struct ckpt_error *err, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return ret;
}

int ckpt_mul(uint64_t a, uint64_t b, uint64_t *out)
{
	if (__builtin_mul_overflow(a, b, out))
		return -EOVERFLOW;
	return 0;
}

static void ckpt_file_dio_align(struct ckpt_file *f)
{
	long page = sysconf(_SC_PAGESIZE);
	struct statx stx;

	f->dio_mem_align = (uint32_t)page;
	f->dio_offset_align = (uint32_t)page;
	if (statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		/* 0 means the file system does no direct I/O on this file. */
		f->dio_mem_align = stx.stx_dio_mem_align;
		f->dio_offset_align = stx.stx_dio_offset_align;
	}
}

int ckpt_add_file(struct ckpt *c, const char *path, uint32_t *index, struct ckpt_error *err)
{
	struct ckpt_file *files, *f;
	struct stat st;
	uint64_t size;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ckpt_fail(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return ckpt_fail(err, ret, "%s: %s", path, strerror(-ret));
	}
	size = (uint64_t)st.st_size;
	/* a block device holding a checkpoint's bytes is read like a file */
	if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &size) < 0) {
		ret = -errno;
		close(fd);
		return ckpt_fail(err, ret, "%s: %s", path, strerror(-ret));
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		ret = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		close(fd);
		return ckpt_fail(err, ret, "%s: not a regular file or a block device", path);
	}
	files = realloc(c->files, (c->n_files + 1) * sizeof(*files));
	if (!files) {
		close(fd);
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
	}
	c->files = files;
	f = &files[c->n_files];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path) {
		close(fd);
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", path);
	}
	f->fd = fd;
	f->direct_fd = -1;
	f->size = size;
	ckpt_file_dio_align(f);
	*index = c->n_files++;
	return 0;
}

struct ckpt_tensor *ckpt_add_tensor(struct ckpt *c, const char *name, uint32_t file)
{
	struct ckpt_tensor *t;

	if (c->n_tensors == c->cap_tensors) {
		uint32_t cap = c->cap_tensors ? c->cap_tensors * 2 : 64;

		t = realloc(c->tensors, cap * sizeof(*t));
		if (!t)
			return NULL;
		c->tensors = t;
		c->cap_tensors = cap;
	}
	t = &c->tensors[c->n_tensors];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return NULL;
	t->file = file;
	c->n_tensors++;
	return t;
}

static int tensor_cmp_offset(const void *a, const void *b)
{
	const struct ckpt_tensor *const *x = a, *const *y = b;

	if ((*x)->offset != (*y)->offset)
		return (*x)->offset < (*y)->offset ? -1 : 1;
	return (*x)->size < (*y)->size ? -1 : (*x)->size > (*y)->size;
}

int ckpt_check_extents(const struct ckpt *c, uint32_t file, struct ckpt_error *err)
{
	const struct ckpt_file *f = &c->files[file];
	const struct ckpt_tensor **sorted;
	uint32_t i, n = 0;
	int ret = 0;

	sorted = calloc(c->n_tensors ? c->n_tensors : 1, sizeof(*sorted));
	if (!sorted)
		return ckpt_fail(err, -ENOMEM, "%s: out of memory", f->path);
	for (i = 0; i < c->n_tensors; i++)
		if (c->tensors[i].file == file)
			sorted[n++] = &c->tensors[i];
	qsort(sorted, n, sizeof(*sorted), tensor_cmp_offset);
	for (i = 0; i < n; i++) {
		const struct ckpt_tensor *t = sorted[i];

		if (t->offset > f->size || t->size > f->size - t->offset) {
			ret = ckpt_fail(err, -EINVAL,
					"%s: tensor '%s': bytes %" PRIu64 "..%" PRIu64
					" lie past the end of the file (%" PRIu64
					" bytes): truncated file or lying header",
					f->path, t->name, t->offset, t->offset + t->size, f->size);
			break;
		}
		if (i && t->size && sorted[i - 1]->offset + sorted[i - 1]->size > t->offset) {
			ret = ckpt_fail(err, -EINVAL, "%s: tensor '%s' overlaps tensor '%s'",
					f->path, t->name, sorted[i - 1]->name);
			break;
		}
	}
	free(sorted);
	return ret;
}

void ckpt_close(struct ckpt *c)
{
	uint32_t i;

	for (i = 0; i < c->n_files; i++) {
		close(c->files[i].fd);
		if (c->files[i].direct_fd >= 0)
			close(c->files[i].direct_fd);
		free(c->files[i].path);
	}
	for (i = 0; i < c->n_tensors; i++)
		free(c->tensors[i].name);
	free(c->files);
	free(c->tensors);
	memset(c, 0, sizeof(*c));
}

/* ---- planning ---------------------------------------------------------- */

/* An expert tensor found by name: one expert's, or all experts' stacked. */
struct ckpt_piece {
	uint32_t tensor;
	uint32_t layer;	 /* in the model */
	uint32_t expert; /* per-expert tensors only */
	bool stacked;	 /* outermost dimension is the expert */
	char *suffix;	 /* per-expert name */
	/* the name around the numbers, to name a missing tensor */
	char *before_layer, *before_expert;
};

struct ckpt_pieces {
	struct ckpt_piece *v;
	uint32_t n, cap;
};

static void pieces_free(struct ckpt_pieces *p)
{
	uint32_t i;

	for (i = 0; i < p->n; i++) {
		free(p->v[i].suffix);
		free(p->v[i].before_layer);
		free(p->v[i].before_expert);
	}
	free(p->v);
}

static bool parse_number(const char *s, regmatch_t m, uint32_t *out)
{
	unsigned long v = 0;
	regoff_t i;

	if (m.rm_eo - m.rm_so > 7)
		return false;
	for (i = m.rm_so; i < m.rm_eo; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v >= CKPT_MAX_NUMBER)
		return false;
	*out = (uint32_t)v;
	return true;
}

static char *substr(const char *s, regoff_t from, regoff_t to)
{
	return strndup(s + from, (size_t)(to - from));
}

/*
 * Safetensors: "<...>layers.<L>.<...>experts.<E>.<suffix>" (Hugging Face
 * per-expert tensors; shared experts have no number and do not match).
 * GGUF: "blk.<L>.<name>_exps[.<...>]" (llama.cpp stacked experts).
 */
static const char *const st_pattern =
    "^(.*\\.)?layers\\.([0-9]+)\\.(.*\\.)?experts\\.([0-9]+)\\.(.+)$";
static const char *const gguf_pattern = "^blk\\.([0-9]+)\\.([^.]*_exps(\\..+)?)$";

static int collect_pieces(const struct ckpt *c, const struct ckpt_select *sel,
			  struct ckpt_pieces *out, struct ckpt_error *err)
{
	bool gguf = c->format == CKPT_GGUF;
	regmatch_t m[6];
	regex_t re;
	uint32_t i;
	int ret = 0;

	if (regcomp(&re, gguf ? gguf_pattern : st_pattern, REG_EXTENDED))
		return ckpt_fail(err, -ENOMEM, "cannot compile the tensor name pattern");
	for (i = 0; i < c->n_tensors && !ret; i++) {
		const struct ckpt_tensor *t = &c->tensors[i];
		const char *path = c->files[t->file].path;
		struct ckpt_piece p = {.tensor = i, .stacked = gguf};

		if (regexec(&re, t->name, 6, m, 0))
			continue;
		if (!parse_number(t->name, m[gguf ? 1 : 2], &p.layer) ||
		    (!gguf && !parse_number(t->name, m[4], &p.expert))) {
			ret = ckpt_fail(err, -EINVAL,
					"%s: tensor '%s': layer or expert number too large", path,
					t->name);
			break;
		}
		if (p.layer < sel->layer_first || (sel->layer_end && p.layer >= sel->layer_end))
			continue;
		if (gguf && t->n_dims < 1) {
			ret = ckpt_fail(err, -EINVAL,
					"%s: tensor '%s': stacked experts need a dimension", path,
					t->name);
			break;
		}
		if (gguf) {
			p.suffix = substr(t->name, m[2].rm_so, m[2].rm_eo);
			p.before_layer = substr(t->name, 0, m[1].rm_so);
		} else {
			p.suffix = substr(t->name, m[5].rm_so, m[5].rm_eo);
			p.before_layer = substr(t->name, 0, m[2].rm_so);
			p.before_expert = substr(t->name, m[2].rm_eo, m[4].rm_so);
		}
		if (out->n == out->cap) {
			uint32_t cap = out->cap ? out->cap * 2 : 256;
			struct ckpt_piece *v = realloc(out->v, cap * sizeof(*v));

			if (!v) {
				free(p.suffix);
				free(p.before_layer);
				free(p.before_expert);
				ret = ckpt_fail(err, -ENOMEM, "out of memory");
				break;
			}
			out->v = v;
			out->cap = cap;
		}
		out->v[out->n++] = p;
		if (!p.suffix || !p.before_layer || (!gguf && !p.before_expert))
			ret = ckpt_fail(err, -ENOMEM, "out of memory");
	}
	regfree(&re);
	return ret;
}

/* gate (or w1, or fused gate_up), up (w3), down (w2), then the rest. */
static int entry_rank(const char *name)
{
	size_t len = strcspn(name, ".");
	char head[64];

	snprintf(head, sizeof(head), "%.*s", (int)(len < 63 ? len : 63), name);
	if (strstr(head, "gate") || !strcmp(head, "w1"))
		return 0;
	if (strstr(head, "up") || !strcmp(head, "w3"))
		return 1;
	if (strstr(head, "down") || !strcmp(head, "w2"))
		return 2;
	return 3;
}

/* Within one projection the weight comes first, then its scales and the rest. */
static int entry_cmp(const void *a, const void *b)
{
	const struct ckpt_entry *x = a, *y = b;
	int rx = entry_rank(x->name), ry = entry_rank(y->name);
	size_t hx = strcspn(x->name, "."), hy = strcspn(y->name, ".");
	bool wx, wy;
	int c;

	if (rx != ry)
		return rx - ry;
	c = strncmp(x->name, y->name, hx < hy ? hx : hy);
	if (c || hx != hy)
		return c ? c : (hx < hy ? -1 : 1);
	wx = !strcmp(x->name + hx, ".weight") || !strcmp(x->name + hx, ".qweight");
	wy = !strcmp(y->name + hy, ".weight") || !strcmp(y->name + hy, ".qweight");
	if (wx != wy)
		return wx ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void format_shape(char *buf, size_t len, uint32_t n_dims, const uint64_t *shape)
{
	size_t used = 0;
	uint32_t i;

	used += (size_t)snprintf(buf, len, "[");
	for (i = 0; i < n_dims && used < len; i++)
		used +=
		    (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, i ? ", " : "", shape[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

/* The part of one expert a piece describes: dtype, shape and size. */
static void piece_part(const struct ckpt *c, const struct ckpt_piece *p, struct ckpt_entry *e)
{
	const struct ckpt_tensor *t = &c->tensors[p->tensor];
	uint32_t skip = p->stacked ? 1 : 0;

	memcpy(e->dtype, t->dtype, sizeof(e->dtype));
	e->n_dims = t->n_dims - skip;
	memcpy(e->shape, t->shape + skip, e->n_dims * sizeof(e->shape[0]));
	e->size = p->stacked ? (t->shape[0] ? t->size / t->shape[0] : 0) : t->size;
}

static int find_entry(const struct ckpt_plan *plan, const char *suffix)
{
	uint32_t i;

	for (i = 0; i < plan->n_entries; i++)
		if (!strcmp(plan->entries[i].name, suffix))
			return (int)i;
	return -1;
}

static int find_layer(const struct ckpt_plan *plan, uint32_t layer)
{
	uint32_t lo = 0, hi = plan->n_layers;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (plan->layers[mid] == layer)
			return (int)mid;
		if (plan->layers[mid] < layer)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int plan_layers(const struct ckpt_pieces *pieces, const struct ckpt_select *sel,
		       struct ckpt_plan *plan, struct ckpt_error *err)
{
	uint32_t i, n = 0;

	plan->layers = malloc((pieces->n ? pieces->n : 1) * sizeof(*plan->layers));
	if (!plan->layers)
		return ckpt_fail(err, -ENOMEM, "out of memory");
	for (i = 0; i < pieces->n; i++)
		plan->layers[i] = pieces->v[i].layer;
	qsort(plan->layers, pieces->n, sizeof(*plan->layers), u32_cmp);
	for (i = 0; i < pieces->n; i++)
		if (!n || plan->layers[n - 1] != plan->layers[i])
			plan->layers[n++] = plan->layers[i];
	plan->n_layers = n;
	if (sel->n_layers && n != sel->n_layers) {
		if (!n)
			return ckpt_fail(err, -EINVAL, "no layer with experts in the checkpoint");
		return ckpt_fail(err, -EINVAL,
				 "the checkpoint has %u layers with experts (%u..%u), the pool %u",
				 n, plan->layers[0], plan->layers[n - 1], sel->n_layers);
	}
	return 0;
}

static int plan_experts(const struct ckpt *c, const struct ckpt_pieces *pieces,
			const struct ckpt_select *sel, struct ckpt_plan *plan,
			struct ckpt_error *err)
{
	uint32_t i, n = 0;

	for (i = 0; i < pieces->n; i++) {
		const struct ckpt_piece *p = &pieces->v[i];
		const struct ckpt_tensor *t = &c->tensors[p->tensor];
		uint32_t count = p->stacked ? (uint32_t)t->shape[0] : p->expert + 1;

		if (p->stacked && t->shape[0] > CKPT_MAX_NUMBER)
			return ckpt_fail(err, -EINVAL, "%s: tensor '%s': %" PRIu64 " experts",
					 c->files[t->file].path, t->name, t->shape[0]);
		if (p->stacked && n && count != n)
			return ckpt_fail(err, -EINVAL,
					 "%s: tensor '%s': stacks %u experts, other tensors %u",
					 c->files[t->file].path, t->name, count, n);
		if (count > n)
			n = count;
	}
	if (c->format == CKPT_GGUF && c->expert_count && n && n != c->expert_count)
		return ckpt_fail(err, -EINVAL, "%s: tensors stack %u experts, expert_count says %u",
				 c->files[0].path, n, c->expert_count);
	if (sel->n_experts) {
		bool exact = c->format == CKPT_GGUF;

		if (n > sel->n_experts || (exact && n != sel->n_experts))
			return ckpt_fail(err, -EINVAL,
					 "the checkpoint has %u experts per layer, the pool %u", n,
					 sel->n_experts);
		n = sel->n_experts;
	}
	plan->n_experts = n;
	plan->expert_begin = sel->expert_end ? sel->expert_begin : 0;
	plan->expert_end = sel->expert_end ? sel->expert_end : n;
	if (plan->expert_begin >= plan->expert_end || plan->expert_end > n)
		return ckpt_fail(err, -EINVAL, "expert range %u..%u is outside the %u experts",
				 plan->expert_begin, plan->expert_end, n);
	return 0;
}

static int plan_entries(const struct ckpt *c, const struct ckpt_pieces *pieces,
			struct ckpt_plan *plan, struct ckpt_error *err)
{
	uint64_t off = 0;
	uint32_t i;

	plan->entries = calloc(pieces->n ? pieces->n : 1, sizeof(*plan->entries));
	if (!plan->entries)
		return ckpt_fail(err, -ENOMEM, "out of memory");
	for (i = 0; i < pieces->n; i++) {
		const struct ckpt_piece *p = &pieces->v[i];
		struct ckpt_entry *e;

		if (find_entry(plan, p->suffix) >= 0)
			continue;
		e = &plan->entries[plan->n_entries];
		e->name = strdup(p->suffix);
		if (!e->name)
			return ckpt_fail(err, -ENOMEM, "out of memory");
		piece_part(c, p, e);
		plan->n_entries++;
	}
	if (!plan->n_entries)
		return ckpt_fail(err, -EINVAL, "%s: no expert tensors found",
				 c->n_files ? c->files[0].path : "checkpoint");
	qsort(plan->entries, plan->n_entries, sizeof(*plan->entries), entry_cmp);
	for (i = 0; i < plan->n_entries; i++) {
		off = (off + CKPT_RECORD_ALIGN - 1) & ~(uint64_t)(CKPT_RECORD_ALIGN - 1);
		plan->entries[i].offset = off;
		if (__builtin_add_overflow(off, plan->entries[i].size, &off))
			return ckpt_fail(err, -EOVERFLOW, "an expert's record overflows");
	}
	plan->record_bytes = off;
	return 0;
}

static int check_piece(const struct ckpt *c, const struct ckpt_piece *p, const struct ckpt_entry *e,
		       struct ckpt_error *err)
{
	const struct ckpt_tensor *t = &c->tensors[p->tensor];
	char got[160], want[160];
	struct ckpt_entry part;

	piece_part(c, p, &part);
	if (!strcmp(part.dtype, e->dtype) && part.n_dims == e->n_dims &&
	    !memcmp(part.shape, e->shape, e->n_dims * sizeof(e->shape[0])) && part.size == e->size)
		return 0;
	format_shape(got, sizeof(got), part.n_dims, part.shape);
	format_shape(want, sizeof(want), e->n_dims, e->shape);
	return ckpt_fail(err, -EINVAL,
			 "%s: tensor '%s': wrong shape: %s %s per expert, the other experts' '%s' "
			 "are %s %s",
			 c->files[t->file].path, t->name, part.dtype, got, e->name, e->dtype, want);
}

static int plan_parts(const struct ckpt *c, const struct ckpt_pieces *pieces,
		      struct ckpt_plan *plan, struct ckpt_error *err)
{
	uint32_t n_local = plan->expert_end - plan->expert_begin;
	uint64_t n_parts = (uint64_t)plan->n_layers * n_local * plan->n_entries;
	uint32_t i, e;
	uint64_t k;

	plan->parts = malloc((n_parts ? n_parts : 1) * sizeof(*plan->parts));
	if (!plan->parts)
		return ckpt_fail(err, -ENOMEM, "out of memory");
	for (k = 0; k < n_parts; k++)
		plan->parts[k].tensor = UINT32_MAX;

	for (i = 0; i < pieces->n; i++) {
		const struct ckpt_piece *p = &pieces->v[i];
		const struct ckpt_tensor *t = &c->tensors[p->tensor];
		int entry = find_entry(plan, p->suffix);
		int layer = find_layer(plan, p->layer);
		const struct ckpt_entry *en = &plan->entries[entry];
		uint32_t first = p->stacked ? plan->expert_begin : p->expert;
		uint32_t end = p->stacked ? plan->expert_end : p->expert + 1;
		int ret;

		ret = check_piece(c, p, en, err);
		if (ret)
			return ret;
		for (e = first; e < end; e++) {
			struct ckpt_part *part;

			if (e < plan->expert_begin || e >= plan->expert_end)
				continue;
			part = &plan->parts[((uint64_t)layer * n_local + (e - plan->expert_begin)) *
						plan->n_entries +
					    (uint32_t)entry];
			if (part->tensor != UINT32_MAX)
				return ckpt_fail(err, -EINVAL, "%s: tensor '%s': appears twice",
						 c->files[t->file].path, t->name);
			part->tensor = p->tensor;
			part->offset = t->offset + (p->stacked ? (uint64_t)e * en->size : 0);
		}
	}
	return 0;
}

/* Names the first expert tensor the plan lacks, after a template piece. */
static int plan_missing(const struct ckpt *c, const struct ckpt_pieces *pieces,
			const struct ckpt_plan *plan, struct ckpt_error *err)
{
	uint32_t n_local = plan->expert_end - plan->expert_begin;
	uint32_t l, e, en, i;

	for (l = 0; l < plan->n_layers; l++)
		for (e = 0; e < n_local; e++)
			for (en = 0; en < plan->n_entries; en++) {
				const struct ckpt_piece *tp = NULL;
				const char *path = c->n_files ? c->files[0].path : "checkpoint";

				if (plan->parts[((uint64_t)l * n_local + e) * plan->n_entries + en]
					.tensor != UINT32_MAX)
					continue;
				for (i = 0; i < pieces->n && !tp; i++)
					if (!strcmp(pieces->v[i].suffix, plan->entries[en].name))
						tp = &pieces->v[i];
				if (c->format == CKPT_GGUF)
					return ckpt_fail(err, -EINVAL,
							 "%s: missing tensor '%s%u.%s'", path,
							 tp->before_layer, plan->layers[l],
							 plan->entries[en].name);
				return ckpt_fail(err, -EINVAL, "%s: missing tensor '%s%u%s%u.%s'",
						 path, tp->before_layer, plan->layers[l],
						 tp->before_expert, plan->expert_begin + e,
						 plan->entries[en].name);
			}
	return 0;
}

int ckpt_plan(const struct ckpt *c, const struct ckpt_select *sel, struct ckpt_plan *plan,
	      struct ckpt_error *err)
{
	struct ckpt_pieces pieces = {0};
	int ret;

	memset(plan, 0, sizeof(*plan));
	ret = collect_pieces(c, sel, &pieces, err);
	if (!ret && !pieces.n)
		ret = ckpt_fail(err, -EINVAL, "%s: no expert tensors found",
				c->n_files ? c->files[0].path : "checkpoint");
	if (!ret)
		ret = plan_layers(&pieces, sel, plan, err);
	if (!ret)
		ret = plan_experts(c, &pieces, sel, plan, err);
	if (!ret)
		ret = plan_entries(c, &pieces, plan, err);
	if (!ret)
		ret = plan_parts(c, &pieces, plan, err);
	if (!ret)
		ret = plan_missing(c, &pieces, plan, err);
	pieces_free(&pieces);
	if (ret)
		ckpt_plan_free(plan);
	return ret;
}

int ckpt_plan_synthetic(const struct ckpt_select *sel, uint64_t expert_bytes,
			struct ckpt_plan *plan)
{
	uint32_t i;

	memset(plan, 0, sizeof(*plan));
	if (!sel->n_layers || sel->expert_begin >= sel->expert_end || expert_bytes < 8)
		return -EINVAL;
	plan->layers = calloc(sel->n_layers, sizeof(*plan->layers));
	plan->entries = calloc(1, sizeof(*plan->entries));
	if (!plan->layers || !plan->entries)
		goto nomem;
	plan->entries[0].name = strdup("synthetic");
	if (!plan->entries[0].name)
		goto nomem;
	for (i = 0; i < sel->n_layers; i++)
		plan->layers[i] = i;
	plan->n_layers = sel->n_layers;
	plan->n_experts = sel->n_experts;
	plan->expert_begin = sel->expert_begin;
	plan->expert_end = sel->expert_end;
	plan->n_entries = 1;
	snprintf(plan->entries[0].dtype, sizeof(plan->entries[0].dtype), "U64");
	plan->entries[0].n_dims = 1;
	plan->entries[0].shape[0] = expert_bytes / 8;
	plan->entries[0].size = expert_bytes / 8 * 8;
	plan->record_bytes = plan->entries[0].size;
	return 0;
nomem:
	ckpt_plan_free(plan);
	return -ENOMEM;
}

void ckpt_plan_free(struct ckpt_plan *plan)
{
	uint32_t i;

	for (i = 0; i < plan->n_entries; i++)
		free(plan->entries[i].name);
	free(plan->entries);
	free(plan->layers);
	free(plan->parts);
	memset(plan, 0, sizeof(*plan));
}

const struct ckpt_part *ckpt_plan_part(const struct ckpt_plan *plan, uint32_t layer,
				       uint32_t expert, uint32_t entry)
{
	uint32_t n_local = plan->expert_end - plan->expert_begin;

	if (!plan->parts || layer >= plan->n_layers || expert < plan->expert_begin ||
	    expert >= plan->expert_end || entry >= plan->n_entries)
		return NULL;
	return &plan->parts[((uint64_t)layer * n_local + (expert - plan->expert_begin)) *
				plan->n_entries +
			    entry];
}

/* ---- loading ----------------------------------------------------------- */

static int pread_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = pread(fd, p, chunk, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file is shorter than its header said */
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

static bool direct_usable(struct ckpt_file *f)
{
	if (!f->direct_tried) {
		f->direct_tried = true;
		if (f->dio_offset_align && f->dio_mem_align)
			f->direct_fd = open(f->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
	return f->direct_fd >= 0;
}

/*
 * Reads len bytes at off into dst: the block-aligned middle with O_DIRECT
 * when the file system takes it and dst lines up, the edges buffered.
 */
static int read_range(struct ckpt_file *f, char *dst, uint64_t len, uint64_t off, bool no_direct,
		      struct ckpt_load_stats *stats)
{
	uint64_t head = 0, mid = 0;
	int ret;

	if (!no_direct && direct_usable(f)) {
		uint64_t oa = f->dio_offset_align, ma = f->dio_mem_align;

		head = (oa - off % oa) % oa;
		if (head < len && ((uintptr_t)(dst + head)) % ma == 0)
			mid = (len - head) / oa * oa;
	}
	if (mid) {
		ret = pread_full(f->direct_fd, dst + head, mid, off + head);
		if (ret == -EINVAL) {
			/* refused after all (an odd device): buffered from now on */
			close(f->direct_fd);
			f->direct_fd = -1;
			mid = 0;
		} else if (ret) {
			return ret;
		} else {
			stats->bytes_direct += mid;
		}
	}
	if (!mid)
		return pread_full(f->fd, dst, len, off);
	if (head) {
		ret = pread_full(f->fd, dst, head, off);
		if (ret)
			return ret;
	}
	if (len > head + mid)
		return pread_full(f->fd, dst + head + mid, len - head - mid, off + head + mid);
	return 0;
}

static void zero_gaps(const struct ckpt_plan *plan, char *rec, uint64_t record_size)
{
	uint64_t at = 0;
	uint32_t i;

	for (i = 0; i < plan->n_entries; i++) {
		if (plan->entries[i].offset > at)
			memset(rec + at, 0, plan->entries[i].offset - at);
		at = plan->entries[i].offset + plan->entries[i].size;
	}
	if (record_size > at)
		memset(rec + at, 0, record_size - at);
}

int ckpt_load(struct ckpt *c, const struct ckpt_plan *plan, void *host, uint64_t record_size,
	      bool no_direct, const struct ckpt_progress *progress, struct ckpt_load_stats *stats,
	      struct ckpt_error *err)
{
	uint32_t n_local = plan->expert_end - plan->expert_begin;
	struct ckpt_load_stats local = {0};
	uint64_t total, done = 0;
	uint32_t l, e, en;

	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (plan->record_bytes > record_size)
		return ckpt_fail(err, -ENOSPC,
				 "an expert needs %" PRIu64
				 " bytes, the pool's records have %" PRIu64,
				 plan->record_bytes, record_size);
	total = (uint64_t)plan->n_layers * n_local * plan->record_bytes;
	for (l = 0; l < plan->n_layers; l++) {
		for (e = 0; e < n_local; e++) {
			char *rec = (char *)host + ((uint64_t)l * n_local + e) * record_size;

			for (en = 0; en < plan->n_entries; en++) {
				const struct ckpt_entry *entry = &plan->entries[en];
				const struct ckpt_part *part =
				    ckpt_plan_part(plan, l, plan->expert_begin + e, en);
				const struct ckpt_tensor *t = &c->tensors[part->tensor];
				struct ckpt_file *f = &c->files[t->file];
				int ret;

				ret = read_range(f, rec + entry->offset, entry->size, part->offset,
						 no_direct, stats);
				if (ret)
					return ckpt_fail(
					    err, ret, "%s: tensor '%s': %s", f->path, t->name,
					    ret == -EIO ? "the file ends early" : strerror(-ret));
				stats->bytes += entry->size;
				done += entry->size;
				if (progress && progress->update)
					progress->update(progress->arg, done, total);
			}
			zero_gaps(plan, rec, record_size);
		}
	}
	return 0;
}

void ckpt_fill_synthetic(const struct ckpt_plan *plan, void *host, uint64_t record_size)
{
	uint32_t n_local = plan->expert_end - plan->expert_begin;
	uint64_t words = record_size / 8, i;
	uint32_t l, e;

	for (l = 0; l < plan->n_layers; l++)
		for (e = 0; e < n_local; e++) {
			uint64_t *rec =
			    (uint64_t *)((char *)host + ((uint64_t)l * n_local + e) * record_size);

			for (i = 0; i < words; i++)
				rec[i] = ckpt_synthetic_word(l, plan->expert_begin + e, i);
		}
}

/* ---- the tensor table -------------------------------------------------- */

static int json_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!val || json_object_object_add(obj, key, val)) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

static int json_append(struct json_object *arr, struct json_object *val)
{
	if (!val || json_object_array_add(arr, val)) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

static struct json_object *entry_json(const struct ckpt_entry *e)
{
	struct json_object *obj = json_object_new_object(), *shape = json_object_new_array();
	uint32_t i;
	int ret = 0;

	if (!obj || !shape) {
		json_object_put(obj);
		json_object_put(shape);
		return NULL;
	}
	for (i = 0; i < e->n_dims && !ret; i++)
		ret = json_append(shape, json_object_new_int64((int64_t)e->shape[i]));
	if (ret) {
		json_object_put(shape);
		json_object_put(obj);
		return NULL;
	}
	if (json_add(obj, "name", json_object_new_string(e->name)) ||
	    json_add(obj, "dtype", json_object_new_string(e->dtype)) ||
	    json_add(obj, "shape", shape) ||
	    json_add(obj, "offset", json_object_new_int64((int64_t)e->offset)) ||
	    json_add(obj, "size", json_object_new_int64((int64_t)e->size))) {
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

int ckpt_table_json(const struct ckpt_plan *plan, const char *pool, const char *format,
		    uint64_t expert_bytes, struct json_object **out)
{
	struct json_object *t = json_object_new_object();
	struct json_object *layers = json_object_new_array();
	struct json_object *tensors = json_object_new_array();
	uint32_t i;
	int ret = 0;

	*out = NULL;
	if (!t || !layers || !tensors) {
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < plan->n_layers && !ret; i++)
		ret = json_append(layers, json_object_new_int64(plan->layers[i]));
	for (i = 0; i < plan->n_entries && !ret; i++)
		ret = json_append(tensors, entry_json(&plan->entries[i]));
	if (ret)
		goto fail;
	if (json_add(t, "pool", json_object_new_string(pool)) ||
	    json_add(t, "format", json_object_new_string(format)) ||
	    json_add(t, "expert_bytes", json_object_new_int64((int64_t)expert_bytes)) ||
	    json_add(t, "record_bytes", json_object_new_int64((int64_t)plan->record_bytes)) ||
	    json_add(t, "alignment", json_object_new_int64(CKPT_RECORD_ALIGN)) ||
	    json_add(t, "n_layers", json_object_new_int64(plan->n_layers)) ||
	    json_add(t, "n_experts", json_object_new_int64(plan->n_experts)) ||
	    json_add(t, "expert_begin", json_object_new_int64(plan->expert_begin)) ||
	    json_add(t, "expert_end", json_object_new_int64(plan->expert_end))) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = json_add(t, "model_layers", layers);
	layers = NULL;
	if (!ret)
		ret = json_add(t, "tensors", tensors);
	tensors = NULL;
	if (ret)
		goto fail;
	*out = t;
	return 0;
fail:
	json_object_put(layers);
	json_object_put(tensors);
	json_object_put(t);
	return ret;
}

int ckpt_write_atomic(const char *path, const char *text, unsigned int mode)
{
	size_t len = strlen(text), done = 0;
	char *tmp;
	int fd, ret = 0;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		free(tmp);
		return ret;
	}
	if (fchmod(fd, mode) < 0)
		ret = -errno;
	while (!ret && done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno != EINTR)
			ret = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	free(tmp);
	return ret;
}

int ckpt_table_write(const char *path, struct json_object *table)
{
	const char *text = json_object_to_json_string_ext(table, JSON_C_TO_STRING_PRETTY |
								     JSON_C_TO_STRING_SPACED);
	char *line;
	int ret;

	if (asprintf(&line, "%s\n", text) < 0)
		return -ENOMEM;
	ret = ckpt_write_atomic(path, line, 0644);
	free(line);
	return ret;
}
