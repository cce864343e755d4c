// SPDX-License-Identifier: MIT
/*
 * moecache-rocm-check: the ROCm pieces on a real AMD GPU, driven by
 * tools/amd-check. The agent's backend is driven directly, with mmap'd
 * memory standing in for the driver's host pages; slots are read back with
 * the SDMA engine (the bank is VRAM the CPU does not map).
 *
 *   info        the KFD's view of the GPUs
 *   copy        SDMA copies land, overwrite, and complete only when done
 *   import      a bank exported by another process: client import (libdrm)
 *               and adoption by a new backend after the exporter exited
 *   bench-copy  agent H2D throughput over SDMA with 2 and 4 queues
 *
 * Prints "PASS name ..." / "FAIL name ..."; --json FILE writes the results.
 * Exit: 0 all passed, 1 a check failed, 2 no usable GPU or bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>
#include <limits.h>

#include "agent/copy/gpu.h"
#include "lib/gpu/bank.h"
#include "lib/gpu/rocm_api.h"

#define EXIT_FAILED 1
#define EXIT_SETUP 2

struct check {
	int device;
	const char *json;
	uint32_t expert_mib, copies;
	char err[320];
	json_object *results, *figures;
	int failed;
};

static double now_s(void)
{
	return (double)mc_gpu_now_ns() * 1e-9;
}

static void record(struct check *c, const char *name, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void record(struct check *c, const char *name, bool ok, const char *fmt, ...)
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
	json_object_array_add(c->results, r);
	c->failed += !ok;
}

static void *host_region(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void fill_pattern(unsigned char *p, uint64_t bytes, uint32_t i)
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

struct be {
	void *priv;
	struct moecache_bank desc;
};

static int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
		   const void *host, uint64_t host_bytes, uint32_t queues)
{
	struct agent_backend_config cfg = {.pool = "amd-check",
					   .n_slots = n_slots,
					   .expert_bytes = expert_bytes,
					   .copy_threads = queues};
	struct mc_gpu_params p = {.host_base = host, .host_size = host_bytes, .queues = queues};
	char devs[16];
	int ret;

	snprintf(devs, sizeof(devs), "%d", c->device);
	p.devices = devs;
	memset(b, 0, sizeof(*b));
	ret = agent_rocm_backend_create(&cfg, &p, &b->priv, c->err, sizeof(c->err));
	if (!ret) {
		ret = agent_rocm_backend.bank_create(b->priv, &b->desc);
		if (ret) {
			snprintf(c->err, sizeof(c->err), "%s", agent_gpu_backend_error(b->priv));
			agent_rocm_backend.destroy(b->priv);
			b->priv = NULL;
		}
	}
	return ret;
}

static int be_copy(struct be *b, uint32_t slot, const void *src)
{
	struct agent_copy cp = {.slot = slot, .src = src};

	return agent_rocm_backend.copy(b->priv, &cp);
}

static int be_wait(struct be *b, uint32_t n, double timeout_s)
{
	struct agent_copy done[64];
	double end = now_s() + timeout_s;
	int failed = 0;

	while (n) {
		int got = agent_rocm_backend.completions(b->priv, done, n < 64 ? n : 64);

		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			failed += done[i].status != 0;
		n -= (uint32_t)got;
		if (!got) {
			if (now_s() > end)
				return -ETIMEDOUT;
			usleep(20);
		}
	}
	return failed;
}

static bool slot_equals(struct be *b, uint32_t slot, const void *expect, uint64_t bytes,
			unsigned char *readback)
{
	memset(readback, 0, bytes);
	return agent_rocm_backend_read_slot(b->priv, slot, readback, bytes) == 0 &&
	       !memcmp(readback, expect, bytes);
}

static int cmd_info(struct check *c)
{
	struct mc_hsakmt_api kmt;
	HsaSystemProperties sys;
	int gpus = 0;

	if (mc_hsakmt_api_load(&kmt, NULL, c->err, sizeof(c->err)) ||
	    kmt.hsaKmtOpenKFD() != HSAKMT_STATUS_SUCCESS) {
		record(c, "info", false, "%s", c->err[0] ? c->err : "hsaKmtOpenKFD failed");
		return 0;
	}
	if (kmt.hsaKmtAcquireSystemProperties(&sys) == HSAKMT_STATUS_SUCCESS) {
		for (uint32_t n = 0; n < sys.NumNodes; n++) {
			HsaNodeProperties p;
			char name[64] = "";

			if (kmt.hsaKmtGetNodeProperties(n, &p) != HSAKMT_STATUS_SUCCESS ||
			    !p.NumFComputeCores)
				continue;
			for (int i = 0; i < 63 && p.MarketingName[i]; i++)
				name[i] = (char)p.MarketingName[i];
			record(c, "info", true,
			       "GPU %d: node %u, %s, gfx%u%u%u, %" PRIu64
			       " MiB VRAM, %u SDMA engines, PCI %04x:%02x:%02x.%x, renderD%d",
			       gpus++, n, name, p.EngineId.ui32.Major, p.EngineId.ui32.Minor,
			       p.EngineId.ui32.Stepping, (uint64_t)p.LocalMemSize >> 20,
			       p.NumSdmaEngines, p.Domain, p.LocationId >> 8,
			       (p.LocationId >> 3) & 0x1f, p.LocationId & 7, p.DrmRenderMinor);
		}
		kmt.hsaKmtReleaseSystemProperties();
	}
	kmt.hsaKmtCloseKFD();
	mc_hsakmt_api_unload(&kmt);
	if (!gpus)
		record(c, "info", false, "the KFD lists no GPU");
	return 0;
}

static int cmd_copy(struct check *c)
{
	const uint32_t n_slots = 32, n_experts = 64;
	const uint64_t e_bytes = (3u << 20) + 4096;
	unsigned char *host = host_region(n_experts * e_bytes), *rb = host_region(e_bytes);
	struct be b;
	bool ok = true;
	int ret;

	if (!host || !rb)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_experts; i++)
		fill_pattern(host + i * e_bytes, e_bytes, i);
	ret = be_open(c, &b, n_slots, e_bytes, host, n_experts * e_bytes, 2);
	if (ret) {
		record(c, "copy.bank", false, "%s", c->err);
		goto out;
	}
	record(c, "copy.bank", b.desc.fd >= 0 && b.desc.backend == MOECACHE_BACKEND_ROCM,
	       "VRAM bank of %" PRIu64 " MiB exported as a dma-buf, stride %" PRIu64 " KiB",
	       (uint64_t)b.desc.bank_bytes >> 20, (uint64_t)b.desc.slot_stride >> 10);
	for (uint32_t round = 0; round < 2 && ok; round++) {
		uint32_t bad = 0;

		for (uint32_t s = 0; s < n_slots; s++)
			bad +=
			    be_copy(&b, s, host + (uint64_t)(s + round * n_slots) * e_bytes) != 0;
		ret = be_wait(&b, n_slots - bad, 30);
		for (uint32_t s = 0; s < n_slots; s++)
			bad += !slot_equals(&b, s, host + (uint64_t)(s + round * n_slots) * e_bytes,
					    e_bytes, rb);
		ok = !bad && !ret;
		record(c, round ? "copy.overwrite" : "copy.fill", ok,
		       "%u slots over SDMA, %u bad, completions %d", n_slots, bad, ret);
	}
	if (ok) {
		struct agent_copy done;
		bool not_done;

		agent_rocm_backend.set_delay(b.priv, 300000);
		be_copy(&b, 0, host + 5 * e_bytes);
		usleep(100000);
		not_done = agent_rocm_backend.completions(b.priv, &done, 1) == 0 &&
			   agent_rocm_backend.inflight(b.priv) == 1;
		ret = be_wait(&b, 1, 10);
		record(c, "copy.not_done_before_bytes",
		       not_done && !ret && slot_equals(&b, 0, host + 5 * e_bytes, e_bytes, rb),
		       "a copy held half way (fence, then a POLL_REGMEM gate) is not reported "
		       "(%s), then completes (%d)",
		       not_done ? "yes" : "no", ret);
		agent_rocm_backend.set_delay(b.priv, 0);
	}
	agent_rocm_backend.destroy(b.priv);
out:
	munmap(host, n_experts * e_bytes);
	munmap(rb, e_bytes);
	return 0;
}

/* This program's path, to run it again as the exporting process. */
static const char *self_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0)
		return "/proc/self/exe";
	buf[n] = '\0';
	return buf;
}

struct export_msg {
	struct moecache_bank desc;
	int32_t status;
	char err[320];
};

static int send_fd(int sock, const struct export_msg *msg, int fd)
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

static int recv_fd(int sock, struct export_msg *msg, int *fd)
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

#define IMPORT_SLOTS 8u
#define IMPORT_EXPERT (5u << 20)

static int cmd_export_child(struct check *c, int sock)
{
	unsigned char *host = host_region((uint64_t)IMPORT_SLOTS * IMPORT_EXPERT);
	struct export_msg msg = {0};
	struct be b = {0};
	int ret;

	if (!host)
		return EXIT_SETUP;
	for (uint32_t s = 0; s < IMPORT_SLOTS; s++)
		fill_pattern(host + (uint64_t)s * IMPORT_EXPERT, IMPORT_EXPERT, 100 + s);
	ret = be_open(c, &b, IMPORT_SLOTS, IMPORT_EXPERT, host,
		      (uint64_t)IMPORT_SLOTS * IMPORT_EXPERT, 2);
	for (uint32_t s = 0; !ret && s < IMPORT_SLOTS; s++)
		ret = be_copy(&b, s, host + (uint64_t)s * IMPORT_EXPERT);
	if (!ret)
		ret = be_wait(&b, IMPORT_SLOTS, 30) ? -EIO : 0;
	msg.status = ret;
	snprintf(msg.err, sizeof(msg.err), "%s", ret ? c->err : "");
	msg.desc = b.desc;
	send_fd(sock, &msg, ret ? -1 : b.desc.fd);
	if (b.priv)
		agent_rocm_backend.destroy(b.priv);
	return ret ? EXIT_FAILED : 0;
}

static int cmd_import(struct check *c)
{
	unsigned char *expect = malloc(IMPORT_EXPERT), *rb = host_region(IMPORT_EXPERT);
	struct moecache_bank_map m = {.fd = -1};
	struct agent_backend_config cfg = {.pool = "amd-check",
					   .n_slots = IMPORT_SLOTS,
					   .expert_bytes = IMPORT_EXPERT,
					   .copy_threads = 2};
	struct export_msg msg;
	struct moecache_bank desc;
	int sv[2], fd = -1, status = 0, ret, bad = 0;
	char devarg[16], fdarg[16], self[PATH_MAX];
	void *priv = NULL;
	pid_t pid;

	if (!expect || !rb || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		return -ENOMEM;
	self_path(self, sizeof(self));
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		snprintf(devarg, sizeof(devarg), "%d", c->device);
		snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
		execl(self, self, "--device", devarg, "export-child", fdarg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	ret = recv_fd(sv[0], &msg, &fd);
	close(sv[0]);
	waitpid(pid, &status, 0);
	if (ret || msg.status || fd < 0) {
		record(c, "import.export", false, "the exporting process failed: %s",
		       ret ? "no message" : msg.err);
		goto out;
	}
	record(c, "import.export", true, "process %d made, filled and exported a bank, exited",
	       (int)pid);
	/* The client import through libdrm. */
	m.backend = MOECACHE_BACKEND_ROCM;
	m.n_slots = IMPORT_SLOTS;
	m.fd = dup(fd);
	m.bytes = msg.desc.bank_bytes;
	m.slot_stride = msg.desc.slot_stride;
	m.expert_bytes = IMPORT_EXPERT;
	m.desc = msg.desc;
	m.desc.fd = m.fd;
	ret = mc_rocm_bank_import(&m);
	record(c, "import.client", ret == 0 && moecache_bank_slot_addr(&m, 1) != 0,
	       "dma-buf imported and mapped at GPU VA %#" PRIx64 ": %s",
	       moecache_bank_slot_addr(&m, 0), ret ? moecache_bank_import_error() : "ok");
	/* A new agent adopts it and reads every slot back. */
	desc = msg.desc;
	desc.fd = dup(fd);
	ret = agent_rocm_backend_create(&cfg, NULL, &priv, c->err, sizeof(c->err));
	if (!ret)
		ret = agent_rocm_backend.bank_adopt(priv, &desc);
	if (!ret) {
		struct be b = {.priv = priv, .desc = desc};

		for (uint32_t s = 0; s < IMPORT_SLOTS; s++) {
			fill_pattern(expect, IMPORT_EXPERT, 100 + s);
			bad += !slot_equals(&b, s, expect, IMPORT_EXPERT, rb);
		}
		record(c, "import.adopt", bad == 0,
		       "a new backend adopted the bank after the exporter exited: %d of %u slots "
		       "differ",
		       bad, IMPORT_SLOTS);
	} else {
		record(c, "import.adopt", false, "%s",
		       priv ? agent_gpu_backend_error(priv) : c->err);
		if (!priv)
			close(desc.fd);
	}
	if (priv)
		agent_rocm_backend.destroy(priv);
	mc_rocm_bank_unimport(&m);
	close(m.fd);
	close(fd);
out:
	free(expect);
	munmap(rb, IMPORT_EXPERT);
	return 0;
}

static int cmd_bench_copy(struct check *c)
{
	const uint64_t e_bytes = (uint64_t)c->expert_mib << 20;
	const uint32_t n = c->copies;
	const uint32_t queues[2] = {2, 4};
	unsigned char *host = host_region(n * e_bytes);

	if (!host)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		memset(host + i * e_bytes, (int)i, e_bytes);
	for (int q = 0; q < 2; q++) {
		double best = 0;
		struct be b;
		char fig[64];
		int bad = 0;

		if (be_open(c, &b, n, e_bytes, host, n * e_bytes, queues[q])) {
			record(c, "bench.agent_h2d", false, "%s", c->err);
			break;
		}
		for (int rep = -1; rep < 3; rep++) {
			double t0 = now_s(), gbs;

			for (uint32_t i = 0; i < n; i++)
				bad += be_copy(&b, i, host + i * e_bytes) != 0;
			bad += be_wait(&b, n, 60) != 0;
			gbs = n * e_bytes / (now_s() - t0) / 1e9;
			if (rep >= 0 && gbs > best)
				best = gbs;
		}
		agent_rocm_backend.destroy(b.priv);
		snprintf(fig, sizeof(fig), "agent_sdma_%uqueues_gbs", queues[q]);
		json_object_object_add(c->figures, fig, json_object_new_double(best));
		record(c, fig, bad == 0, "%u copies of %u MiB over %u SDMA queues: %.1f GB/s best",
		       n, c->expert_mib, queues[q], best);
	}
	munmap(host, n * e_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"device", required_argument, NULL, 'd'},
	    {"json", required_argument, NULL, 'j'},
	    {"expert-mib", required_argument, NULL, 'e'},
	    {"copies", required_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0},
	};
	struct check c = {.expert_mib = 16, .copies = 64};
	const char *cmd;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			c.device = atoi(optarg);
			break;
		case 'j':
			c.json = optarg;
			break;
		case 'e':
			c.expert_mib = (uint32_t)atoi(optarg);
			break;
		case 'c':
			c.copies = (uint32_t)atoi(optarg);
			break;
		default:
			goto bad;
		}
	}
	if (optind >= argc || c.device < 0 || !c.expert_mib || !c.copies)
		goto bad;
	cmd = argv[optind];
	c.results = json_object_new_array();
	c.figures = json_object_new_object();
	if (access(mc_rocm_kfd_path(), R_OK | W_OK)) {
		fprintf(
		    stderr,
		    "moecache-rocm-check: %s: %s: no AMD GPU with the amdgpu driver's KFD, or no "
		    "permission (the render and video groups)\n",
		    mc_rocm_kfd_path(), strerror(errno));
		return EXIT_SETUP;
	}
	if (!strcmp(cmd, "export-child") && optind + 1 < argc) {
		ret = cmd_export_child(&c, atoi(argv[optind + 1]));
		json_object_put(c.results);
		json_object_put(c.figures);
		return ret;
	}
	if (!strcmp(cmd, "info"))
		ret = cmd_info(&c);
	else if (!strcmp(cmd, "copy"))
		ret = cmd_copy(&c);
	else if (!strcmp(cmd, "import"))
		ret = cmd_import(&c);
	else if (!strcmp(cmd, "bench-copy"))
		ret = cmd_bench_copy(&c);
	else
		goto bad;
	if (ret < 0) {
		fprintf(stderr, "moecache-rocm-check: %s: %s\n", cmd, strerror(-ret));
		c.failed++;
	}
	if (c.json) {
		json_object *root = json_object_new_object();

		json_object_object_add(root, "command", json_object_new_string(cmd));
		json_object_object_add(root, "results", c.results);
		json_object_object_add(root, "figures", c.figures);
		json_object_to_file_ext(c.json, root, JSON_C_TO_STRING_PRETTY);
		json_object_put(root);
	} else {
		json_object_put(c.results);
		json_object_put(c.figures);
	}
	return c.failed ? EXIT_FAILED : 0;
bad:
	fprintf(stderr, "usage: moecache-rocm-check [--device N] [--json FILE] [--expert-mib N] "
			"[--copies N] info|copy|import|bench-copy\n");
	return EXIT_SETUP;
}
