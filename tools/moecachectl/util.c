// SPDX-License-Identifier: MIT
/* moecachectl: messages, parsers and files shared by the commands. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <moecache.h>

#include "ctl.h"
#include "libmoecache.h"

int ctl_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", CTL_PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_FAIL;
}

const char *ctl_pool_strerror(int err)
{
	switch (-err) {
	case ENOENT:
		return "No such pool";
	case EEXIST:
		return "Pool already exists";
	case EBUSY:
		return "Pool is in use";
	case ENOSPC:
		return "No room for the pool (max_pools or max_host_mb reached)";
	default:
		return strerror(-err);
	}
}

int ctl_pool_fail(const struct ctl_nl *nl, const char *pool, int err)
{
	const char *why = nl ? ctl_nl_message(nl) : NULL;

	if (why)
		return ctl_fail("pool '%s': %s (%s)", pool, ctl_pool_strerror(err), why);
	return ctl_fail("pool '%s': %s", pool, ctl_pool_strerror(err));
}

int ctl_usage_fail(const char *command, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s: ", CTL_PROG, command);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s %s --help'.\n", CTL_PROG, command);
	return CTL_EXIT_USAGE;
}

int ctl_bad_option(const char *command, char **argv)
{
	return ctl_usage_fail(command, "bad option or missing value '%s'", argv[optind - 1]);
}

int ctl_nl_connect(struct ctl_nl *nl)
{
	int ret = ctl_nl_open(nl);

	if (!ret)
		return 0;
	if (ctl_nl_message(nl))
		return ctl_fail("%s", ctl_nl_message(nl));
	return ctl_fail("generic netlink: %s", strerror(-ret));
}

int ctl_parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	if (v > UINT32_MAX)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

int ctl_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	unsigned long long v;
	const char *u;
	char *end;
	int shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end) {
		u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -EINVAL;
		shift = 10 * (int)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int ctl_parse_range(const char *s, uint32_t *begin, uint32_t *end)
{
	const char *colon = strchr(s, ':');
	char first[24];

	if (!colon || (size_t)(colon - s) >= sizeof(first))
		return -EINVAL;
	memcpy(first, s, (size_t)(colon - s));
	first[colon - s] = '\0';
	if (ctl_parse_u32(first, begin) || ctl_parse_u32(colon + 1, end))
		return -EINVAL;
	return 0;
}

int ctl_parse_uid(const char *s, uint32_t *out)
{
	struct passwd *pw;

	if (!ctl_parse_u32(s, out))
		return 0;
	pw = getpwnam(s);
	if (!pw)
		return -ENOENT;
	*out = pw->pw_uid;
	return 0;
}

int ctl_parse_gid(const char *s, uint32_t *out)
{
	struct group *gr;

	if (!ctl_parse_u32(s, out))
		return 0;
	gr = getgrnam(s);
	if (!gr)
		return -ENOENT;
	*out = gr->gr_gid;
	return 0;
}

bool ctl_pool_name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len >= MOECACHE_NAME_LEN)
		return false;
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       len;
}

void ctl_format_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

void ctl_format_pool_flags(char *buf, size_t len, uint32_t flags)
{
	snprintf(buf, len, "%s%s%s%s", flags & MOECACHE_POOL_LOADED ? "loaded," : "",
		 flags & MOECACHE_POOL_AGENT ? "agent," : "",
		 flags & MOECACHE_POOL_BANK ? "bank," : "", flags ? "" : "-");
	len = strlen(buf);
	if (len > 1 && buf[len - 1] == ',')
		buf[len - 1] = '\0';
}

char *ctl_run_path(const struct ctl *ctl, const char *pool, const char *suffix)
{
	char *path;

	if (asprintf(&path, "%s/%s%s", ctl->rundir, pool, suffix) < 0)
		return NULL;
	return path;
}

int ctl_make_rundir(const struct ctl *ctl)
{
	if (mkdir(ctl->rundir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

const char *ctl_backend_name(uint32_t backend)
{
	const char *name = moecache_backend_name(backend);

	return name ? name : "?";
}

int ctl_parse_bank(const char *s, struct ctl_bank_spec *out, char *err, size_t errlen)
{
	char copy[128], *field[4], *save = NULL, *tok;
	uint32_t n = 0, backend;
	uint64_t size;

	memset(out, 0, sizeof(*out));
	if (!s || strlen(s) >= sizeof(copy)) {
		snprintf(err, errlen, "expected TIER:BACKEND:DEVICE:SLOTS");
		return -EINVAL;
	}
	strcpy(copy, s);
	/* strtok_r would merge empty fields: count the colons first. */
	for (const char *c = s; *c; c++)
		n += *c == ':';
	if (n != 3) {
		snprintf(err, errlen, "'%s': expected TIER:BACKEND:DEVICE:SLOTS", s);
		return -EINVAL;
	}
	n = 0;
	for (tok = strtok_r(copy, ":", &save); tok && n < 4; tok = strtok_r(NULL, ":", &save))
		field[n++] = tok;
	if (n != 4) {
		snprintf(err, errlen, "'%s': an empty field", s);
		return -EINVAL;
	}
	if (ctl_parse_u32(field[0], &out->layout.tier)) {
		snprintf(err, errlen, "'%s': bad tier '%s'", s, field[0]);
		return -EINVAL;
	}
	if (moecache_backend_parse(field[1], &backend)) {
		snprintf(err, errlen, "'%s': backend '%s' is not cpu, cuda, rocm or auto", s,
			 field[1]);
		return -EINVAL;
	}
	out->layout.backend = backend;
	if (ctl_parse_u32(field[2], &out->layout.device)) {
		snprintf(err, errlen, "'%s': bad device '%s'", s, field[2]);
		return -EINVAL;
	}
	/* A plain number counts slots; one with a unit is the bank's bytes. */
	if (strspn(field[3], "0123456789") == strlen(field[3])) {
		if (ctl_parse_u32(field[3], &out->layout.n_slots) || !out->layout.n_slots) {
			snprintf(err, errlen, "'%s': bad slot count '%s'", s, field[3]);
			return -EINVAL;
		}
		return 0;
	}
	if (ctl_parse_size(field[3], &size) || !size) {
		snprintf(err, errlen, "'%s': bad slots '%s' (a count, or bytes as 64M)", s,
			 field[3]);
		return -EINVAL;
	}
	out->bytes = size;
	return 0;
}

int ctl_banks_resolve(struct ctl_bank_spec *banks, uint32_t n, uint64_t expert_bytes,
		      uint32_t *n_slots, char *err, size_t errlen)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct moecache_bank_layout *l = &banks[i].layout;

		if (banks[i].bytes) {
			uint64_t slots = expert_bytes ? banks[i].bytes / expert_bytes : 0;

			if (!slots || slots > UINT32_MAX) {
				snprintf(err, errlen, "bank %u: %llu bytes %s", i,
					 (unsigned long long)banks[i].bytes,
					 slots ? "are too many slots" : "hold no expert");
				return slots ? -ERANGE : -EINVAL;
			}
			l->n_slots = (uint32_t)slots;
		}
		if (i && l->tier < banks[i - 1].layout.tier) {
			snprintf(err, errlen, "bank %u: tier %u after tier %u (fastest first)", i,
				 l->tier, banks[i - 1].layout.tier);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i && l->backend != MOECACHE_BACKEND_NONE; j++)
			if (banks[j].layout.backend == l->backend &&
			    banks[j].layout.device == l->device) {
				snprintf(err, errlen, "banks %u and %u: both on %s device %u", j, i,
					 ctl_backend_name(l->backend), l->device);
				return -EINVAL;
			}
		total += l->n_slots;
	}
	if (total > UINT32_MAX) {
		snprintf(err, errlen, "the banks' slots add up to more than %u", UINT32_MAX);
		return -ERANGE;
	}
	*n_slots = (uint32_t)total;
	return 0;
}
