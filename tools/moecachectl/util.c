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
