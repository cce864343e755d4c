// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

int mc_gpu_bank_geometry(uint64_t expert_bytes, uint32_t n_slots, uint64_t align,
			 uint64_t *slot_stride, uint64_t *bank_bytes)
{
	uint64_t stride, total;

	if (!expert_bytes || !n_slots || !align || (align & (align - 1)))
		return -EINVAL;
	if (expert_bytes > UINT64_MAX - (align - 1))
		return -EOVERFLOW;
	stride = (expert_bytes + align - 1) & ~(align - 1);
	if (stride > UINT64_MAX / n_slots)
		return -EOVERFLOW;
	/* A multiple of align already: stride is. */
	total = stride * n_slots;
	*slot_stride = stride;
	*bank_bytes = total;
	return 0;
}

static int mc_gpu_parse_ordinal(const char *s, size_t len, uint32_t *out)
{
	uint32_t v = 0;

	if (!len || len > 9)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (uint32_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static bool mc_gpu_listed(const uint32_t *devs, uint32_t n, uint32_t d)
{
	for (uint32_t i = 0; i < n; i++)
		if (devs[i] == d)
			return true;
	return false;
}

int mc_gpu_devices_parse(const char *spec, const char *pool, uint32_t n_visible, uint32_t *devs,
			 uint32_t *n_devs, char *err, size_t errlen)
{
	uint32_t plain[MC_GPU_MAX_DEVICES], n_plain = 0, pinned = UINT32_MAX;
	bool all = false;
	const char *p = spec ? spec : "";

	if (n_visible == 0) {
		snprintf(err, errlen, "no GPU is visible");
		return -ENODEV;
	}
	if (n_visible > MC_GPU_MAX_DEVICES)
		n_visible = MC_GPU_MAX_DEVICES;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p)
		all = true;
	while (*p) {
		size_t len = strcspn(p, ",");
		const char *item = p, *colon;
		uint32_t dev;

		while (len && isspace((unsigned char)*item))
			item++, len--;
		while (len && isspace((unsigned char)item[len - 1]))
			len--;
		colon = memchr(item, ':', len);
		if (!len) {
			goto bad;
		} else if ((len == 4 && !strncmp(item, "auto", 4)) ||
			   (len == 3 && !strncmp(item, "all", 3))) {
			all = true;
		} else if (colon) {
			size_t name_len = (size_t)(colon - item);

			if (!name_len || mc_gpu_parse_ordinal(colon + 1, len - name_len - 1, &dev))
				goto bad;
			if (dev >= n_visible)
				goto invisible;
			if (pool && strlen(pool) == name_len && !strncmp(pool, item, name_len))
				pinned = dev;
		} else {
			if (mc_gpu_parse_ordinal(item, len, &dev))
				goto bad;
			if (dev >= n_visible)
				goto invisible;
			if (!mc_gpu_listed(plain, n_plain, dev))
				plain[n_plain++] = dev;
		}
		p += strcspn(p, ",");
		if (*p && !*++p) /* a trailing comma */
			goto bad;
		continue;
	bad:
		snprintf(err, errlen,
			 "bad GPU device list '%s': expected auto, N or POOL:N separated by commas",
			 spec);
		return -EINVAL;
	invisible:
		snprintf(err, errlen, "GPU device %u in '%s' is not visible (%u visible)", dev,
			 spec, n_visible);
		return -ENODEV;
	}
	*n_devs = 0;
	if (pinned != UINT32_MAX) {
		devs[(*n_devs)++] = pinned;
	} else if (n_plain && !all) {
		memcpy(devs, plain, n_plain * sizeof(*devs));
		*n_devs = n_plain;
	} else {
		for (uint32_t d = 0; d < n_visible; d++)
			devs[(*n_devs)++] = d;
	}
	return 0;
}

int mc_gpu_pick(const struct mc_gpu_candidate *c, uint32_t n, uint64_t need)
{
	int best = -ENOSPC;

	for (uint32_t i = 0; i < n; i++) {
		if (c[i].room < need || c[i].free_bytes < need)
			continue;
		if (best < 0 || c[i].room > c[best].room ||
		    (c[i].room == c[best].room && c[i].free_bytes > c[best].free_bytes))
			best = (int)i;
	}
	return best;
}

int mc_gpu_budget_init(struct mc_gpu_budget *b, uint64_t limit_per_device)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit_per_device;
	return -pthread_mutex_init(&b->lock, NULL);
}

void mc_gpu_budget_destroy(struct mc_gpu_budget *b)
{
	pthread_mutex_destroy(&b->lock);
}

int mc_gpu_budget_reserve(struct mc_gpu_budget *b, uint32_t device, uint64_t bytes)
{
	int ret = 0;

	if (device >= MC_GPU_MAX_DEVICES)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if (b->limit && (bytes > b->limit || b->used[device] > b->limit - bytes))
		ret = -ENOSPC;
	else
		b->used[device] += bytes;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

void mc_gpu_budget_release(struct mc_gpu_budget *b, uint32_t device, uint64_t bytes)
{
	if (device >= MC_GPU_MAX_DEVICES)
		return;
	pthread_mutex_lock(&b->lock);
	b->used[device] -= bytes < b->used[device] ? bytes : b->used[device];
	pthread_mutex_unlock(&b->lock);
}

uint64_t mc_gpu_budget_room(struct mc_gpu_budget *b, uint32_t device)
{
	uint64_t room;

	if (device >= MC_GPU_MAX_DEVICES)
		return 0;
	pthread_mutex_lock(&b->lock);
	room = b->limit ? b->limit - b->used[device] : UINT64_MAX;
	pthread_mutex_unlock(&b->lock);
	return room;
}

void mc_gpu_params_from_env(struct mc_gpu_params *p)
{
	const char *s;

	if (!p->devices)
		p->devices = getenv(MC_GPU_DEVICES_ENV);
	s = getenv(MC_GPU_BUDGET_ENV);
	if (!p->device_budget && s && *s) {
		char *end;
		unsigned long long mb;

		errno = 0;
		mb = strtoull(s, &end, 10);
		if (!errno && !*end && mb <= UINT64_MAX >> 20)
			p->device_budget = (uint64_t)mb << 20;
	}
}

uint32_t mc_gpu_queue_count(const struct mc_gpu_params *p, uint32_t copy_threads)
{
	uint32_t n = p && p->queues ? p->queues : copy_threads;

	if (n < MC_GPU_MIN_QUEUES)
		n = MC_GPU_MIN_QUEUES;
	if (n > MC_GPU_MAX_QUEUES)
		n = MC_GPU_MAX_QUEUES;
	return n;
}

int mc_gpu_find_mapping(const void *p, size_t len, uintptr_t *start, size_t *size)
{
	uintptr_t addr = (uintptr_t)p;
	char line[512];
	int ret = -ENOENT;
	FILE *f;

	f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2)
			continue;
		if (addr >= lo && addr < hi) {
			if (len <= hi - addr) {
				*start = lo;
				*size = hi - lo;
				ret = 0;
			}
			break;
		}
	}
	fclose(f);
	return ret;
}

const struct mc_gpu_range *mc_gpu_ranges_find(const struct mc_gpu_ranges *r, const void *p,
					      size_t len)
{
	uintptr_t a = (uintptr_t)p;

	for (uint32_t i = 0; i < r->n; i++) {
		const struct mc_gpu_range *g = &r->items[i];

		if (a >= g->start && a - g->start <= g->size && len <= g->size - (a - g->start))
			return g;
	}
	return NULL;
}

int mc_gpu_ranges_add(struct mc_gpu_ranges *r, uintptr_t start, size_t size, uint64_t device_addr,
		      bool registered)
{
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 4;
		struct mc_gpu_range *items = realloc(r->items, cap * sizeof(*items));

		if (!items)
			return -ENOMEM;
		r->items = items;
		r->cap = cap;
	}
	r->items[r->n++] = (struct mc_gpu_range){start, size, device_addr, registered};
	return 0;
}

void mc_gpu_ranges_free(struct mc_gpu_ranges *r)
{
	free(r->items);
	memset(r, 0, sizeof(*r));
}

uint64_t mc_gpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
