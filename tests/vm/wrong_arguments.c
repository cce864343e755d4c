// SPDX-License-Identifier: GPL-2.0
/*
 * Arguments of the right size and the wrong kind: a CUDA bank that is not
 * the file a CUDA bank can be (a socket carrying a pool's fd, a pipe, a
 * directory, an anon inode), and non-zero reserved fields of STATS and
 * BANK_GET. Each must be EINVAL and change nothing.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"

#define NOBODY 65534

/* ---- BANK_SET: what a CUDA bank may be --------------------------------- */

static void cuda_bank_desc(const struct vm_view *a, int fd, struct moecache_bank *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	b->backend = MOECACHE_BACKEND_CUDA;
	b->slot_stride = a->att.expert_bytes;
	b->bank_bytes = b->slot_stride * a->att.n_slots;
}

/*
 * Pins: BANK_SET of a CUDA bank took any file, so an AF_UNIX socket
 * carrying a /dev/moecache fd of the same pool made the pool hold a file
 * whose release needed the pool gone: never destroyable, rmmod failed.
 */
static void bad_input_bank_set_cuda_unix_socket(struct vm_ctx *ctx)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg;
	struct cmsghdr *cm;
	struct moecache_bank b;
	struct vm_view a, c;
	int sv[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	VM_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	memset(&msg, 0, sizeof(msg));
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &c.fd, sizeof(int));
	/* c's file is in flight on the socket, never received. */
	VM_EQ(sendmsg(sv[0], &msg, 0), 1);
	cuda_bank_desc(&a, sv[1], &b);
	VM_REFUSED(&a, EINVAL, ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	close(sv[0]);
	close(sv[1]);
	vm_detach(&c);
	vm_detach(&a);
	/* Nothing of the pool is left in a file: it goes. */
	vm_pool_destroy(ctx->pool);
}

/* The kinds of file no CUDA exporter hands out. */
enum cuda_wrong { CW_PIPE, CW_FIFO_W, CW_DIR, CW_EVENTFD, CW_SOCKET };

static const struct {
	enum cuda_wrong kind;
	const char *what;
} cuda_wrong_files[] = {
    {CW_PIPE, "a pipe"},
    {CW_FIFO_W, "the write end of a pipe"},
    {CW_DIR, "a directory"},
    {CW_EVENTFD, "an eventfd (anon inode)"},
    {CW_SOCKET, "a datagram socket"},
};

static int cuda_wrong_open(enum cuda_wrong kind, int *extra)
{
	int p[2], fd = -1;

	*extra = -1;
	switch (kind) {
	case CW_PIPE:
	case CW_FIFO_W:
		VM_OK(pipe2(p, O_CLOEXEC));
		fd = kind == CW_PIPE ? p[0] : p[1];
		*extra = kind == CW_PIPE ? p[1] : p[0];
		break;
	case CW_DIR:
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		break;
	case CW_EVENTFD:
		fd = eventfd(0, EFD_CLOEXEC);
		break;
	case CW_SOCKET:
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		break;
	}
	VM_ASSERT(fd >= 0);
	return fd;
}

/*
 * Pins: a CUDA bank could be any file. A memfd (the exporter of the test
 * builds' fake CUDA driver) is still taken.
 */
static void bad_input_bank_set_cuda_file_types(struct vm_ctx *ctx)
{
	struct moecache_bank b;
	struct vm_view a;
	unsigned int i;
	int fd, extra, good;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	for (i = 0; i < ARRAY_SIZE(cuda_wrong_files); i++) {
		fd = cuda_wrong_open(cuda_wrong_files[i].kind, &extra);
		cuda_bank_desc(&a, fd, &b);
		errno = 0;
		if (ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b) != -1 || errno != EINVAL)
			VM_FAIL("BANK_SET CUDA of %s: %s, want EINVAL", cuda_wrong_files[i].what,
				errno ? vm_errname(errno) : "taken");
		close(fd);
		if (extra >= 0)
			close(extra);
	}
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, 0);
	good = memfd_create("moecache-vmtest-cuda", MFD_CLOEXEC);
	VM_ASSERT(good >= 0);
	cuda_bank_desc(&a, good, &b);
	VM_OK(ftruncate(good, (off_t)b.bank_bytes));
	VM_OK(ioctl(a.fd, MOECACHE_IOC_BANK_SET, &b));
	VM_EQ(a.hdr->flags & MOECACHE_POOL_BANK, MOECACHE_POOL_BANK);
	close(good);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* ---- reserved fields must be zero -------------------------------------- */

enum reserved_field { RF_PAD, RF_RESERVED0, RF_RESERVED1, RF_RESERVED2, RF_BANK };

static const struct {
	enum reserved_field field;
	const char *what;
} stats_reserved[] = {
    {RF_PAD, "pad"},
    {RF_RESERVED0, "reserved[0]"},
    {RF_RESERVED1, "reserved[1]"},
    {RF_RESERVED2, "reserved[2]"},
    {RF_BANK, "bank without MOECACHE_STATS_BANK"},
};

/*
 * Pins: STATS took non-zero pad and reserved[] and ignored bank without
 * MOECACHE_STATS_BANK, and BANK_GET ignored flags, so neither could give
 * those bits a meaning later.
 */
static void bad_input_stats_reserved_nonzero(struct vm_ctx *ctx)
{
	struct moecache_stats st;
	struct moecache_bank bank;
	struct vm_view a, c;
	unsigned int i;
	int memfd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	for (i = 0; i < ARRAY_SIZE(stats_reserved); i++) {
		memset(&st, 0, sizeof(st));
		st.layer = MOECACHE_NONE;
		switch (stats_reserved[i].field) {
		case RF_PAD:
			st.pad = 1;
			break;
		case RF_RESERVED0:
		case RF_RESERVED1:
		case RF_RESERVED2:
			st.reserved[stats_reserved[i].field - RF_RESERVED0] = 1;
			break;
		case RF_BANK:
			st.bank = 1;
			break;
		}
		errno = 0;
		if (ioctl(c.fd, MOECACHE_IOC_STATS, &st) != -1 || errno != EINVAL)
			VM_FAIL("STATS with non-zero %s: %s, want EINVAL", stats_reserved[i].what,
				errno ? vm_errname(errno) : "taken");
	}
	/* All zero: taken. */
	vm_stats(&c, MOECACHE_NONE, &st);
	memfd = vm_bank_set_memfd(&a, a.att.expert_bytes, &bank);
	memset(&bank, 0, sizeof(bank));
	bank.flags = 1;
	VM_REFUSED(&c, EINVAL, ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank));
	memset(&bank, 0, sizeof(bank));
	VM_OK(ioctl(c.fd, MOECACHE_IOC_BANK_GET, &bank));
	close(bank.fd);
	close(memfd);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test wrong_arguments_tests[] = {
    VM_TEST(bad_input_bank_set_cuda_unix_socket,
	    "BANK_SET CUDA of an AF_UNIX socket carrying a pool's fd is EINVAL; the pool goes"),
    VM_TEST(bad_input_bank_set_cuda_file_types,
	    "a CUDA bank is no pipe, directory, anon inode or socket (EINVAL); a memfd is taken"),
    VM_TEST(bad_input_stats_reserved_nonzero,
	    "STATS with non-zero pad, reserved[] or bank without STATS_BANK, BANK_GET with flags: "
	    "EINVAL"),
};

const struct vm_suite vm_wrong_arguments_suite = {wrong_arguments_tests,
						  ARRAY_SIZE(wrong_arguments_tests)};
