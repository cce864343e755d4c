// SPDX-License-Identifier: MIT
/*
 * moecache-devnode-open UID GID[,GID...] NODE: opens NODE read-write as UID
 * with GID as the real, effective and saved group and the rest as the
 * supplementary groups, every capability dropped. Prints "ok" or the errno's
 * name; exits 0 when the open succeeded, 1 when it failed, 2 on a usage
 * error or when the credentials could not be taken.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_GROUPS 8

static int parse_id(const char *s, unsigned int *id)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > 0xfffffffeUL)
		return -EINVAL;
	*id = (unsigned int)v;
	return 0;
}

/* Every capability goes, uid 0's too (a change of uid clears them only
 * for a uid other than 0). */
static int drop_privileges(uid_t uid, const gid_t *gids, size_t n_gids)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {0};
	int cap;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -errno;
	if (setgroups(n_gids - 1, gids + 1) < 0 || setresgid(gids[0], gids[0], gids[0]) < 0 ||
	    setresuid(uid, uid, uid) < 0 || syscall(SYS_capset, &hdr, none) < 0)
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	gid_t gids[MAX_GROUPS];
	size_t n_gids = 0;
	unsigned int id;
	char *list, *tok, *save;
	int fd, ret;

	if (argc != 4 || parse_id(argv[1], &id) < 0) {
		fprintf(stderr, "usage: moecache-devnode-open UID GID[,GID...] NODE\n");
		return 2;
	}
	list = argv[2];
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned int gid;

		if (n_gids == MAX_GROUPS || parse_id(tok, &gid) < 0) {
			fprintf(stderr, "moecache-devnode-open: bad group list\n");
			return 2;
		}
		gids[n_gids++] = gid;
	}
	if (!n_gids) {
		fprintf(stderr, "moecache-devnode-open: no group\n");
		return 2;
	}
	ret = drop_privileges(id, gids, n_gids);
	if (ret < 0) {
		fprintf(stderr, "moecache-devnode-open: %s\n", strerror(-ret));
		return 2;
	}
	fd = open(argv[3], O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("%s\n", strerrorname_np(errno));
		return 1;
	}
	close(fd);
	printf("ok\n");
	return 0;
}
