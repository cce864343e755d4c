// SPDX-License-Identifier: MIT
/* The device checks' report, host pages and fd passing (devcheck.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/gpu/common.h"
#include "devcheck.h"

void dc_report_init(struct dc_report *r)
{
	r->results = json_object_new_array();
	r->figures = json_object_new_object();
	r->failed = 0;
}

json_object *dc_record(struct dc_report *rep, const char *name, bool ok, const char *fmt, ...)
{
	json_object *r = json_object_new_object();
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name, detail);
	fflush(stdout);
	json_object_object_add(r, "name", json_object_new_string(name));
	json_object_object_add(r, "ok", json_object_new_boolean(ok));
	json_object_object_add(r, "detail", json_object_new_string(detail));
	json_object_array_add(rep->results, r);
	rep->failed += !ok;
	return r;
}

void dc_figure(struct dc_report *r, const char *name, double value)
{
	json_object_object_add(r->figures, name, json_object_new_double(value));
}

void dc_report_finish(struct dc_report *r, const char *prog, const char *cmd, const char *path)
{
	json_object *root;

	if (!path) {
		json_object_put(r->results);
		json_object_put(r->figures);
		return;
	}
	root = json_object_new_object();
	json_object_object_add(root, "command", json_object_new_string(cmd));
	json_object_object_add(root, "results", r->results);
	json_object_object_add(root, "figures", r->figures);
	if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY))
		fprintf(stderr, "%s: cannot write %s\n", prog, path);
	json_object_put(root);
}

double dc_now_s(void)
{
	return (double)mc_gpu_now_ns() * 1e-9;
}

void *dc_host_region(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void dc_fill_pattern(unsigned char *p, uint64_t bytes, uint32_t i)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);

	for (uint64_t k = 0; k < bytes; k += 8) {
		uint64_t v;

		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		v = x * 0x2545f4914f6cdd1dull;
		memcpy(p + k, &v, bytes - k < 8 ? bytes - k : 8);
	}
}

const char *dc_self_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0)
		return "/proc/self/exe";
	buf[n] = '\0';
	return buf;
}

int dc_send_fd(int sock, const struct dc_export_msg *msg, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	if (fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)sizeof(*msg) ? 0 : -EIO;
}

int dc_recv_fd(int sock, struct dc_export_msg *msg, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(*msg)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;

	*fd = -1;
	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*msg))
		return -EIO;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return 0;
}

int dc_bank_open(struct dc_bank *b, const struct agent_backend_ops *ops, dc_create_fn create,
		 int device, uint32_t n_slots, uint64_t expert_bytes, const void *host,
		 uint64_t host_bytes, uint32_t queues, char *err, size_t errlen)
{
	struct agent_backend_config cfg = {
	    .pool = "device-check",
	    .n_slots = n_slots,
	    .device = (uint32_t)device,
	    .fixed_device = true,
	    .expert_bytes = expert_bytes,
	    .copy_threads = queues,
	};
	struct mc_gpu_params p = {.host_base = host, .host_size = host_bytes, .queues = queues};
	int ret;

	memset(b, 0, sizeof(*b));
	b->ops = ops;
	ret = create(&cfg, &p, &b->priv, err, errlen);
	if (ret)
		return ret;
	ret = ops->bank_create(b->priv, &b->desc);
	if (ret) {
		snprintf(err, errlen, "%s", agent_gpu_backend_error(b->priv));
		dc_bank_close(b);
	}
	return ret;
}

int dc_bank_adopt(struct dc_bank *b, const struct agent_backend_ops *ops, dc_create_fn create,
		  const struct moecache_bank *desc, uint32_t n_slots, uint64_t expert_bytes,
		  char *err, size_t errlen)
{
	struct agent_backend_config cfg = {.pool = "device-check",
					   .n_slots = n_slots,
					   .expert_bytes = expert_bytes,
					   .copy_threads = 2};
	int ret;

	memset(b, 0, sizeof(*b));
	b->ops = ops;
	b->desc = *desc;
	ret = create(&cfg, NULL, &b->priv, err, errlen);
	if (ret) {
		close(desc->fd);
		return ret;
	}
	ret = ops->bank_adopt(b->priv, desc);
	if (ret) {
		snprintf(err, errlen, "%s", agent_gpu_backend_error(b->priv));
		dc_bank_close(b);
	}
	return ret;
}

void dc_bank_close(struct dc_bank *b)
{
	if (b->priv)
		b->ops->destroy(b->priv);
	b->priv = NULL;
}

int dc_bank_copy(struct dc_bank *b, uint32_t slot, const void *src, uint32_t flags)
{
	struct agent_copy cp = {.slot = slot, .flags = flags, .src = src};

	return b->ops->copy(b->priv, &cp);
}

int dc_bank_wait(struct dc_bank *b, uint32_t n, double timeout_s)
{
	struct agent_copy done[64];
	double end = dc_now_s() + timeout_s;
	int failed = 0;

	while (n) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
		int got = b->ops->completions(b->priv, done, n < 64 ? n : 64);

		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			failed += done[i].status != 0;
		n -= (uint32_t)got;
		if (!got) {
			if (dc_now_s() > end)
				return -ETIMEDOUT;
			nanosleep(&ts, NULL);
		}
	}
	return failed;
}

int dc_bank_fill_from(struct dc_bank *dst, struct dc_bank *src, bool peer, uint32_t slot,
		      uint32_t src_slot, const void *host)
{
	struct agent_copy cp = {.slot = slot};
	int ret = dst->ops->copy_peer(dst->priv, src->priv, src_slot, &cp);

	if (!peer) {
		if (ret != -EOPNOTSUPP)
			return ret ? ret : -EPROTO;
		cp.src = host;
		ret = dst->ops->copy(dst->priv, &cp);
	}
	if (!ret)
		ret = dc_bank_wait(dst, 1, 30);
	return ret > 0 ? -EIO : ret;
}

int dc_export_child(const struct agent_backend_ops *ops, dc_create_fn create, int device,
		    uint32_t n_slots, uint64_t expert_bytes, int sock)
{
	const uint64_t host_bytes = (uint64_t)n_slots * expert_bytes;
	unsigned char *host = dc_host_region(host_bytes);
	struct dc_export_msg msg = {0};
	struct dc_bank b = {0};
	int ret;

	if (!host)
		return EXIT_SETUP;
	for (uint32_t s = 0; s < n_slots; s++)
		dc_fill_pattern(host + (uint64_t)s * expert_bytes, expert_bytes,
				DC_EXPORT_PATTERN + s);
	ret = dc_bank_open(&b, ops, create, device, n_slots, expert_bytes, host, host_bytes, 2,
			   msg.err, sizeof(msg.err));
	for (uint32_t s = 0; !ret && s < n_slots; s++)
		ret = dc_bank_copy(&b, s, host + (uint64_t)s * expert_bytes, 0);
	if (!ret)
		ret = dc_bank_wait(&b, n_slots, 30);
	if (ret > 0)
		ret = -EIO; /* copies failed */
	if (ret && !msg.err[0])
		snprintf(msg.err, sizeof(msg.err), "filling the bank: %s", strerror(-ret));
	msg.status = ret;
	msg.desc = b.desc;
	dc_send_fd(sock, &msg, ret ? -1 : b.desc.fd);
	dc_bank_close(&b);
	munmap(host, host_bytes);
	return ret ? EXIT_FAILED : 0;
}

int dc_run_exporter(const char *self, int device, struct dc_export_msg *msg, int *fd, pid_t *pid,
		    int *status)
{
	char devarg[16], fdarg[16];
	int sv[2], ret;

	*fd = -1;
	*status = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		return -errno;
	*pid = fork();
	if (*pid == 0) {
		close(sv[0]);
		snprintf(devarg, sizeof(devarg), "%d", device);
		snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
		execl(self, self, "--device", devarg, "export-child", fdarg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	if (*pid < 0) {
		close(sv[0]);
		return -errno;
	}
	ret = dc_recv_fd(sv[0], msg, fd);
	close(sv[0]);
	waitpid(*pid, status, 0);
	return ret;
}
