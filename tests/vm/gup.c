// SPDX-License-Identifier: GPL-2.0
/*
 * basic_gup_: the host region maps real struct pages (vm_insert_pages), so
 * get_user_pages users work on it: O_DIRECT reads and writes, vmsplice,
 * process_vm_readv/writev. Each test checks that the bytes arrive.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/loop.h>

#include "harness.h"

static void fill_pattern(unsigned char *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 2654435761u + seed * 97u) >> 13);
}

static void *xmalloc_aligned(size_t len)
{
	void *p = NULL;

	VM_ASSERT(posix_memalign(&p, 4096, len) == 0);
	return p;
}

/* A process that maps the pool's host region and waits, so others can reach it. */
struct host_holder {
	char pool[MOECACHE_NAME_LEN];
	__u32 role;
	int prot;
	unsigned char *host;
	struct vm_gate ready;
	struct vm_gate done;
};

static void host_holder_main(void *arg)
{
	struct host_holder *hh = arg;
	struct vm_view v;

	vm_attach(&v, hh->pool, hh->role);
	vm_view_map_host(&v, hh->prot);
	hh->host = v.host;
	vm_gate_pass(&hh->ready);
	vm_gate_wait(&hh->done, 60000, "the end");
	vm_detach(&v);
}

static struct host_holder *host_holder_start(const char *pool, __u32 role, int prot, pid_t *pid)
{
	struct host_holder *hh = vm_shared(sizeof(*hh));

	snprintf(hh->pool, sizeof(hh->pool), "%s", pool);
	hh->role = role;
	hh->prot = prot;
	vm_gate_open(&hh->ready);
	vm_gate_open(&hh->done);
	*pid = vm_spawn(host_holder_main, hh);
	vm_gate_wait(&hh->ready, 10000, "the other process to map the host region");
	return hh;
}

static void basic_gup_process_vm_readv_client_host(struct vm_ctx *ctx)
{
	struct vm_view a;
	struct host_holder *hh;
	struct iovec local, remote[2];
	size_t rec, len;
	unsigned char *buf;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	rec = a.att.expert_bytes;
	fill_pattern(vm_host_record(&a, 3), 3 * rec, 1);
	hh = host_holder_start(ctx->pool, MOECACHE_ROLE_CLIENT, PROT_READ, &pid);
	/* Three records in two pieces, one of them across a record boundary. */
	len = 3 * rec;
	buf = calloc(1, len);
	VM_ASSERT(buf);
	local.iov_base = buf;
	local.iov_len = len;
	remote[0].iov_base = hh->host + 3 * rec;
	remote[0].iov_len = rec + rec / 2;
	remote[1].iov_base = hh->host + 4 * rec + rec / 2;
	remote[1].iov_len = len - remote[0].iov_len;
	VM_EQ(process_vm_readv(pid, &local, 1, remote, 2, 0), len);
	VM_ASSERT_MSG(memcmp(buf, vm_host_record(&a, 3), len) == 0,
		      "process_vm_readv of the client's host mapping returned other bytes");
	vm_gate_pass(&hh->done);
	vm_reap_ok(pid, 10000, "the client");
	free(buf);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_gup_process_vm_writev_agent_host(struct vm_ctx *ctx)
{
	struct vm_view c;
	struct host_holder *hh;
	struct iovec local, remote;
	size_t rec;
	unsigned char *buf;
	pid_t pid;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&c, PROT_READ);
	rec = c.att.expert_bytes;
	hh = host_holder_start(ctx->pool, MOECACHE_ROLE_AGENT, PROT_READ | PROT_WRITE, &pid);
	buf = malloc(rec);
	VM_ASSERT(buf);
	fill_pattern(buf, rec, 7);
	local.iov_base = buf;
	local.iov_len = rec;
	remote.iov_base = hh->host + 7 * rec;
	remote.iov_len = rec;
	VM_EQ(process_vm_writev(pid, &local, 1, &remote, 1, 0), rec);
	VM_ASSERT_MSG(memcmp(vm_host_record(&c, 7), buf, rec) == 0,
		      "bytes written into the agent's host mapping do not reach the pool");
	vm_gate_pass(&hh->done);
	vm_reap_ok(pid, 10000, "the agent");
	free(buf);
	vm_detach(&c);
	vm_pool_destroy(ctx->pool);
}

static void basic_gup_vmsplice_host(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	size_t rec, done = 0, chunk = 16 * 1024;
	unsigned char *buf;
	int pipefd[2];

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_view_map_host(&c, PROT_READ);
	rec = a.att.expert_bytes;
	fill_pattern(vm_host_record(&a, 9), rec, 9);
	buf = calloc(1, rec);
	VM_ASSERT(buf);
	VM_OK(pipe2(pipefd, O_CLOEXEC));
	/* The pipe takes references to the client's (read-only) host pages. */
	while (done < rec) {
		struct iovec iov = {.iov_base = vm_host_record(&c, 9) + done, .iov_len = chunk};
		ssize_t n = vmsplice(pipefd[1], &iov, 1, 0);
		ssize_t got = 0;

		VM_ASSERT_MSG(n > 0, "vmsplice of the host region: %s",
			      n < 0 ? vm_errname(errno) : "0 bytes");
		while (got < n) {
			ssize_t r = read(pipefd[0], buf + done + got, (size_t)(n - got));

			VM_ASSERT_MSG(r > 0, "read from the pipe: %s",
				      r < 0 ? vm_errname(errno) : "EOF");
			got += r;
		}
		done += (size_t)n;
	}
	VM_ASSERT_MSG(memcmp(buf, vm_host_record(&a, 9), rec) == 0,
		      "bytes spliced from the host region differ");
	close(pipefd[0]);
	close(pipefd[1]);
	free(buf);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

/* A block device for O_DIRECT: a loop device over a tmpfs file, or a brd ramdisk. */
struct blockdev {
	char path[64];
	char backing[96];
	int loop_fd; /* -1 for a ramdisk */
};

static void node_for(const char *path, unsigned int major_nr, unsigned int minor_nr)
{
	if (access(path, F_OK) == 0)
		return;
	if (mknod(path, S_IFBLK | 0600, makedev(major_nr, minor_nr)) < 0)
		VM_FAIL("mknod %s: %s", path, vm_errname(errno));
}

/* The device holds `len` bytes of `content` at offset 0; false if there is no device. */
static bool blockdev_open(struct blockdev *bd, const unsigned char *content, size_t len)
{
	struct stat st;
	int ctl, n, fd;

	memset(bd, 0, sizeof(*bd));
	bd->loop_fd = -1;
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl >= 0) {
		snprintf(bd->backing, sizeof(bd->backing), "/tmp/moecache-vmtest-loop-%d",
			 (int)getpid());
		fd = open(bd->backing, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		VM_ASSERT(fd >= 0);
		VM_EQ(pwrite(fd, content, len, 0), len);
		n = ioctl(ctl, LOOP_CTL_GET_FREE);
		close(ctl);
		VM_ASSERT_MSG(n >= 0, "LOOP_CTL_GET_FREE: %s", vm_errname(errno));
		snprintf(bd->path, sizeof(bd->path), "/dev/loop%d", n);
		node_for(bd->path, 7, (unsigned int)n);
		bd->loop_fd = open(bd->path, O_RDWR | O_CLOEXEC);
		VM_ASSERT_MSG(bd->loop_fd >= 0, "open %s: %s", bd->path, vm_errname(errno));
		VM_OK(ioctl(bd->loop_fd, LOOP_SET_FD, fd));
		close(fd);
		return true;
	}
	if (stat("/dev/ram0", &st) == 0 && S_ISBLK(st.st_mode)) {
		__u64 size = 0;

		snprintf(bd->path, sizeof(bd->path), "/dev/ram0");
		fd = open(bd->path, O_RDWR | O_CLOEXEC);
		VM_ASSERT(fd >= 0);
		VM_OK(ioctl(fd, BLKGETSIZE64, &size));
		VM_ASSERT(size >= len);
		VM_EQ(pwrite(fd, content, len, 0), len);
		VM_OK(fsync(fd));
		close(fd);
		return true;
	}
	return false;
}

static void blockdev_close(struct blockdev *bd)
{
	if (bd->loop_fd >= 0) {
		ioctl(bd->loop_fd, LOOP_CLR_FD, 0);
		close(bd->loop_fd);
		unlink(bd->backing);
	}
}

#define NO_BLOCKDEV "no block device for O_DIRECT: the VM needs loop.ko (or brd.ko) loaded"

static void basic_gup_odirect_read_into_host(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	struct blockdev bd;
	unsigned char *content;
	size_t rec;
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_view_map_host(&c, PROT_READ);
	rec = a.att.expert_bytes;
	content = xmalloc_aligned(4 * rec);
	fill_pattern(content, 4 * rec, 3);
	if (!blockdev_open(&bd, content, 4 * rec)) {
		vm_detach(&c);
		vm_detach(&a);
		vm_pool_destroy(ctx->pool);
		vm_skip(NO_BLOCKDEV);
	}
	fd = open(bd.path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	VM_ASSERT_MSG(fd >= 0, "open %s O_DIRECT: %s", bd.path, vm_errname(errno));
	/* One record, then two records in one read, straight into the host pages. */
	VM_EQ(pread(fd, vm_host_record(&a, 2), rec, 0), rec);
	VM_EQ(pread(fd, vm_host_record(&a, 4), 2 * rec, (off_t)rec), 2 * rec);
	close(fd);
	VM_ASSERT_MSG(memcmp(vm_host_record(&c, 2), content, rec) == 0,
		      "O_DIRECT read into record 2 did not arrive");
	VM_ASSERT_MSG(memcmp(vm_host_record(&c, 4), content + rec, 2 * rec) == 0,
		      "O_DIRECT read into records 4-5 did not arrive");
	blockdev_close(&bd);
	free(content);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static void basic_gup_odirect_write_from_client_host(struct vm_ctx *ctx)
{
	struct vm_view a, c;
	struct blockdev bd;
	unsigned char *zeros, *back;
	size_t rec;
	int fd;

	vm_pool_create(ctx->pool, &vm_geom_default);
	vm_attach(&a, ctx->pool, MOECACHE_ROLE_AGENT);
	vm_attach(&c, ctx->pool, MOECACHE_ROLE_CLIENT);
	vm_view_map_host(&a, PROT_READ | PROT_WRITE);
	vm_view_map_host(&c, PROT_READ);
	rec = a.att.expert_bytes;
	fill_pattern(vm_host_record(&a, 11), rec, 11);
	zeros = xmalloc_aligned(2 * rec);
	back = xmalloc_aligned(rec);
	memset(zeros, 0, 2 * rec);
	if (!blockdev_open(&bd, zeros, 2 * rec)) {
		vm_detach(&c);
		vm_detach(&a);
		vm_pool_destroy(ctx->pool);
		vm_skip(NO_BLOCKDEV);
	}
	fd = open(bd.path, O_RDWR | O_DIRECT | O_CLOEXEC);
	VM_ASSERT_MSG(fd >= 0, "open %s O_DIRECT: %s", bd.path, vm_errname(errno));
	/* The source is the client's read-only mapping of the host pages. */
	VM_EQ(pwrite(fd, vm_host_record(&c, 11), rec, (off_t)rec), rec);
	VM_OK(fsync(fd));
	memset(back, 0, rec);
	VM_EQ(pread(fd, back, rec, (off_t)rec), rec);
	close(fd);
	VM_ASSERT_MSG(memcmp(back, vm_host_record(&a, 11), rec) == 0,
		      "O_DIRECT write from the client's host mapping did not arrive");
	blockdev_close(&bd);
	free(zeros);
	free(back);
	vm_detach(&c);
	vm_detach(&a);
	vm_pool_destroy(ctx->pool);
}

static const struct vm_test gup_tests[] = {
    VM_TEST(basic_gup_process_vm_readv_client_host,
	    "process_vm_readv reads another process's read-only host mapping"),
    VM_TEST(basic_gup_process_vm_writev_agent_host,
	    "process_vm_writev writes into the agent's host mapping and clients see it"),
    VM_TEST(basic_gup_vmsplice_host, "vmsplice of the host region into a pipe carries its bytes"),
    VM_TEST(basic_gup_odirect_read_into_host,
	    "an O_DIRECT read from a block device lands in the host pages"),
    VM_TEST(basic_gup_odirect_write_from_client_host,
	    "an O_DIRECT write takes its bytes from a client's read-only host mapping"),
};

const struct vm_suite vm_gup_suite = {gup_tests, ARRAY_SIZE(gup_tests)};
