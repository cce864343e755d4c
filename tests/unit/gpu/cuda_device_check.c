// SPDX-License-Identifier: MIT
/*
 * moecache-cuda-check: the CUDA pieces on a real NVIDIA GPU, driven by
 * tools/gpu-check. Without the module the agent's backend is driven
 * directly, with mmap'd memory standing in for the driver's host pages;
 * with the module (pool-setup, then bench-decode --mode driver) the whole
 * path runs: moecached copies, this process is a client.
 *
 *   info            the device, as the backend sees it
 *   copy            backend copies land, overwrite, and complete only when done
 *   import          a bank exported by another process: client import, then
 *                   adoption by a new "agent" after the exporter exited
 *   kernels         remap and FFN kernels reading the imported bank vs the C references
 *   bench-copy      agent H2D throughput against cuMemcpyHtoD from pinned memory
 *   bench-decode    decode steps/s over a trace: bank at some % of the experts,
 *                   all resident, zero-copy from host memory (UVA); or the driver path
 *   pool-setup      create and load a pool for the driver path (root)
 *
 * Each check prints "PASS name ..." or "FAIL name ..."; --json FILE writes
 * every result and figure. Exit: 0 all passed, 1 a check failed, 2 no usable
 * GPU or bad usage, 77 nothing to run (no kernel image).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <limits.h>

#include "lib/gpu/cuda_api.h"
#include "agent/copy/gpu.h"
#include "lib/gpu/bank.h"
#include "kernels/moe_kernels.h"
#include "kernels/moe_kernels_image.h"
#include "kernels/ref/moe_ref.h"
#include "tools/trace/trace.h"

#define EXIT_FAILED 1
#define EXIT_SETUP 2
#define EXIT_SKIP 77
#define GEN_SEED 0x6d6f65636163686full

struct opts {
	int device;
	const char *json;
	const char *trace;
	const char *pool;
	const char *mode; /* bench-decode: direct or driver */
	uint32_t d_model, d_ff;
	uint32_t percents[8], n_percents;
	uint32_t steps; /* 0: the whole trace */
	uint32_t expert_mib;
	uint32_t copies;
	uint32_t queues;
};

struct check {
	struct opts o;
	struct mc_cuda_api cu;
	cu_device dev;
	cu_context ctx;
	char err[320];
	json_object *results; /* array of {name, ok, detail, ...} */
	json_object *figures; /* name -> number */
	int failed;
};

static double now_s(void)
{
	return (double)mc_gpu_now_ns() * 1e-9;
}

static json_object *record(struct check *c, const char *name, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static json_object *record(struct check *c, const char *name, bool ok, const char *fmt, ...)
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
	if (!ok)
		c->failed++;
	return r;
}

static void figure(struct check *c, const char *name, double value)
{
	json_object_object_add(c->figures, name, json_object_new_double(value));
}

/* Fails the check with the CUDA error; returns false. */
static bool cu_ok(struct check *c, cu_result res, const char *what)
{
	if (res == MC_CU_SUCCESS)
		return true;
	mc_cuda_fail(&c->cu, res, what, c->err, sizeof(c->err));
	record(c, what, false, "%s", c->err);
	return false;
}

#define CU(call) cu_ok(c, c->cu.call, #call)

static int check_open(struct check *c)
{
	cu_result res;
	int ret;

	ret = mc_cuda_api_load(&c->cu, NULL, c->err, sizeof(c->err));
	if (!ret)
		ret = mc_cuda_init(&c->cu, c->err, sizeof(c->err));
	if (ret) {
		fprintf(stderr, "moecache-cuda-check: %s\n", c->err);
		return ret;
	}
	res = c->cu.cuDeviceGet(&c->dev, c->o.device);
	if (res == MC_CU_SUCCESS)
		res = c->cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev);
	if (res == MC_CU_SUCCESS)
		res = c->cu.cuCtxSetCurrent(c->ctx);
	if (res != MC_CU_SUCCESS) {
		mc_cuda_fail(&c->cu, res, "opening the device", c->err, sizeof(c->err));
		fprintf(stderr, "moecache-cuda-check: %s\n", c->err);
		return -ENODEV;
	}
	return 0;
}

static void check_close(struct check *c)
{
	if (c->ctx)
		c->cu.cuDevicePrimaryCtxRelease(c->dev);
	if (c->cu.lib)
		mc_cuda_api_unload(&c->cu);
}

/* The backend keeps setting its context current: set ours back. */
static void own_ctx(struct check *c)
{
	c->cu.cuCtxSetCurrent(c->ctx);
}

/* ---- host pages: what the driver's host region would be ---- */

static void *host_region(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Expert i's bytes: a pattern any process can recompute. */
static void fill_pattern(unsigned char *p, uint64_t bytes, uint32_t i)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);

	for (uint64_t k = 0; k < bytes; k += 8) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t v = x * 0x2545f4914f6cdd1dull;

		memcpy(p + k, &v, bytes - k < 8 ? bytes - k : 8);
	}
}

/* ---- the backend, driven directly ---- */

struct be {
	void *priv;
	struct moecache_bank desc;
};

static int be_open(struct check *c, struct be *b, uint32_t n_slots, uint64_t expert_bytes,
		   const void *host, uint64_t host_bytes, uint32_t queues)
{
	struct agent_backend_config cfg = {
	    .pool = "gpu-check",
	    .n_slots = n_slots,
	    .expert_bytes = expert_bytes,
	    .copy_threads = queues,
	};
	struct mc_gpu_params p = {.host_base = host, .host_size = host_bytes, .queues = queues};
	char devs[16];
	int ret;

	snprintf(devs, sizeof(devs), "%d", c->o.device);
	p.devices = devs;
	memset(b, 0, sizeof(*b));
	ret = agent_cuda_backend_create(&cfg, &p, &b->priv, c->err, sizeof(c->err));
	if (!ret) {
		ret = agent_cuda_backend.bank_create(b->priv, &b->desc);
		if (ret) {
			snprintf(c->err, sizeof(c->err), "%s", agent_gpu_backend_error(b->priv));
			agent_cuda_backend.destroy(b->priv);
			b->priv = NULL;
		}
	}
	own_ctx(c);
	return ret;
}

static void be_close(struct check *c, struct be *b)
{
	if (b->priv)
		agent_cuda_backend.destroy(b->priv);
	b->priv = NULL;
	own_ctx(c);
}

static int be_copy(struct be *b, uint32_t slot, const void *src, uint32_t flags)
{
	struct agent_copy cp = {.slot = slot, .flags = flags, .src = src};

	return agent_cuda_backend.copy(b->priv, &cp);
}

/* Collects n completions within timeout_s; returns failed copies, or -ETIMEDOUT. */
static int be_wait(struct be *b, uint32_t n, double timeout_s)
{
	struct agent_copy done[64];
	double end = now_s() + timeout_s;
	int failed = 0;

	while (n) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
		int got = agent_cuda_backend.completions(b->priv, done, n < 64 ? n : 64);

		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			failed += done[i].status != 0;
		n -= (uint32_t)got;
		if (!got) {
			if (now_s() > end)
				return -ETIMEDOUT;
			nanosleep(&ts, NULL);
		}
	}
	return failed;
}

/* What lib/bank.c's import sets up, from a descriptor and a file. */
static void bank_map_from(struct moecache_bank_map *m, const struct moecache_bank *desc,
			  uint32_t n_slots, uint64_t expert_bytes)
{
	memset(m, 0, sizeof(*m));
	m->backend = desc->backend;
	m->n_slots = n_slots;
	m->fd = dup(desc->fd);
	m->bytes = desc->bank_bytes;
	m->slot_stride = desc->slot_stride;
	m->expert_bytes = expert_bytes;
	m->desc = *desc;
	m->desc.fd = m->fd;
}

static void bank_map_free(struct moecache_bank_map *m)
{
	mc_cuda_bank_unimport(m);
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

/* Compares a device range with host bytes. */
static bool device_equals(struct check *c, cu_deviceptr dev, const void *host, uint64_t bytes,
			  unsigned char *scratch)
{
	if (c->cu.cuMemcpyDtoH(scratch, dev, bytes) != MC_CU_SUCCESS)
		return false;
	return memcmp(scratch, host, bytes) == 0;
}

/* ---- info ---- */

static int cmd_info(struct check *c)
{
	int major = 0, minor = 0, engines = 0, vmm = 0, posix = 0, version = 0, sms = 0;
	size_t total = 0, gran = 0;
	char name[256] = "";
	struct cu_mem_allocation_prop prop = {
	    .type = MC_CU_MEM_ALLOCATION_TYPE_PINNED,
	    .requested_handle_types = MC_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
	    .location = {.type = MC_CU_MEM_LOCATION_TYPE_DEVICE, .id = c->dev},
	};
	json_object *r;

	c->cu.cuDriverGetVersion(&version);
	c->cu.cuDeviceGetName(name, sizeof(name), c->dev);
	c->cu.cuDeviceTotalMem(&total, c->dev);
	c->cu.cuDeviceGetAttribute(&major, MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev);
	c->cu.cuDeviceGetAttribute(&minor, MC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev);
	c->cu.cuDeviceGetAttribute(&engines, MC_CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, c->dev);
	c->cu.cuDeviceGetAttribute(&sms, MC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev);
	c->cu.cuDeviceGetAttribute(&vmm, MC_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
				   c->dev);
	c->cu.cuDeviceGetAttribute(
	    &posix, MC_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, c->dev);
	c->cu.cuMemGetAllocationGranularity(&gran, &prop, MC_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	r = record(c, "info", vmm && posix,
		   "%s, sm_%d%d, %zu MiB, %d SMs, %d copy engines, driver %d.%d, VMM %s, POSIX fd "
		   "%s, granularity %zu KiB",
		   name, major, minor, total >> 20, sms, engines, version / 1000,
		   (version % 1000) / 10, vmm ? "yes" : "no", posix ? "yes" : "no", gran >> 10);
	json_object_object_add(r, "gpu", json_object_new_string(name));
	json_object_object_add(r, "compute_capability", json_object_new_int(major * 10 + minor));
	json_object_object_add(r, "memory_mib", json_object_new_int64((int64_t)(total >> 20)));
	json_object_object_add(r, "driver_version", json_object_new_int(version));
	json_object_object_add(r, "copy_engines", json_object_new_int(engines));
	return 0;
}

/* ---- copy ---- */

static int cmd_copy(struct check *c)
{
	const uint32_t n_slots = 32, n_experts = 64;
	const uint64_t e_bytes = (3u << 20) + 4096; /* not a granule: the stride rounds up */
	unsigned char *host, *scratch;
	struct moecache_bank_map m;
	struct be b;
	bool ok = true;
	int ret;

	host = host_region(n_experts * e_bytes);
	scratch = malloc(e_bytes);
	if (!host || !scratch)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_experts; i++)
		fill_pattern(host + i * e_bytes, e_bytes, i);
	ret = be_open(c, &b, n_slots, e_bytes, host, n_experts * e_bytes, c->o.queues);
	if (ret) {
		record(c, "copy.bank", false, "%s", c->err);
		goto out;
	}
	record(c, "copy.bank", b.desc.slot_stride % (2u << 20) == 0 && b.desc.fd >= 0,
	       "bank of %" PRIu64 " MiB, stride %" PRIu64 " KiB for %" PRIu64 " KiB experts",
	       (uint64_t)b.desc.bank_bytes >> 20, (uint64_t)b.desc.slot_stride >> 10,
	       e_bytes >> 10);
	bank_map_from(&m, &b.desc, n_slots, e_bytes);
	ret = mc_cuda_bank_import(&m);
	own_ctx(c);
	if (ret) {
		record(c, "copy.import", false, "%s", moecache_bank_import_error());
		goto out_be;
	}
	/* Two rounds: every slot filled, then every slot overwritten with another expert. */
	for (uint32_t round = 0; round < 2 && ok; round++) {
		uint32_t bad = 0;

		for (uint32_t s = 0; s < n_slots; s++)
			if (be_copy(&b, s, host + (uint64_t)(s + round * n_slots) * e_bytes,
				    s % 3 ? MOECACHE_FILL_PREFETCH : 0))
				bad++;
		ret = be_wait(&b, n_slots - bad, 30);
		own_ctx(c);
		for (uint32_t s = 0; s < n_slots; s++)
			if (!device_equals(c, moecache_bank_slot_addr(&m, s),
					   host + (uint64_t)(s + round * n_slots) * e_bytes,
					   e_bytes, scratch))
				bad++;
		ok = !bad && ret == 0;
		record(c, round ? "copy.overwrite" : "copy.fill", ok,
		       "%u slots, %u bad, completions %d (client import reads them back)", n_slots,
		       bad, ret);
	}
	/* A delayed copy: half of it is on the GPU and the copy is still not complete. */
	if (ok) {
		struct agent_copy done;
		bool first_half, second_half_old, not_done;

		agent_cuda_backend.set_delay(b.priv, 300000);
		be_copy(&b, 0, host + 5 * e_bytes, 0);
		usleep(100000);
		own_ctx(c);
		not_done = agent_cuda_backend.completions(b.priv, &done, 1) == 0 &&
			   agent_cuda_backend.inflight(b.priv) == 1;
		c->cu.cuMemcpyDtoH(scratch, moecache_bank_slot_addr(&m, 0), e_bytes);
		first_half = !memcmp(scratch, host + 5 * e_bytes, e_bytes / 2);
		second_half_old =
		    !memcmp(scratch + e_bytes / 2, host + n_slots * e_bytes + e_bytes / 2,
			    e_bytes - e_bytes / 2);
		ret = be_wait(&b, 1, 10);
		own_ctx(c);
		record(c, "copy.not_done_before_bytes",
		       not_done && first_half && second_half_old && ret == 0 &&
			   device_equals(c, moecache_bank_slot_addr(&m, 0), host + 5 * e_bytes,
					 e_bytes, scratch),
		       "half-written slot not reported (%s), first half new (%s), second half old "
		       "(%s), then complete (%d)",
		       not_done ? "yes" : "no", first_half ? "yes" : "no",
		       second_half_old ? "yes" : "no", ret);
		agent_cuda_backend.set_delay(b.priv, 0);
	}
	bank_map_free(&m);
out_be:
	be_close(c, &b);
out:
	munmap(host, n_experts * e_bytes);
	free(scratch);
	return 0;
}

/* ---- import across processes, adoption after the exporter exited ---- */

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

#define IMPORT_SLOTS 16u
#define IMPORT_EXPERT (5u << 20)

/* The exporting "agent": makes a bank, fills it, hands the fd over, exits. */
static int cmd_export_child(struct check *c, int sock)
{
	struct export_msg msg = {0};
	unsigned char *host = host_region((uint64_t)IMPORT_SLOTS * IMPORT_EXPERT);
	struct be b;
	int ret;

	if (!host)
		return EXIT_SETUP;
	for (uint32_t s = 0; s < IMPORT_SLOTS; s++)
		fill_pattern(host + (uint64_t)s * IMPORT_EXPERT, IMPORT_EXPERT, 100 + s);
	ret = be_open(c, &b, IMPORT_SLOTS, IMPORT_EXPERT, host,
		      (uint64_t)IMPORT_SLOTS * IMPORT_EXPERT, 2);
	if (!ret) {
		for (uint32_t s = 0; s < IMPORT_SLOTS && !ret; s++)
			ret = be_copy(&b, s, host + (uint64_t)s * IMPORT_EXPERT, 0);
		if (!ret)
			ret = be_wait(&b, IMPORT_SLOTS, 30);
		if (ret > 0)
			ret = -EIO;
	}
	msg.status = ret;
	snprintf(msg.err, sizeof(msg.err), "%s", ret ? c->err : "");
	msg.desc = b.desc;
	send_fd(sock, &msg, ret ? -1 : b.desc.fd);
	be_close(c, &b); /* the exporter's handle and mapping go: only the fd keeps the bank */
	return ret ? EXIT_FAILED : 0;
}

static int cmd_import(struct check *c, const char *self)
{
	unsigned char *expect = malloc(IMPORT_EXPERT), *scratch = malloc(IMPORT_EXPERT);
	struct moecache_bank_map m;
	struct export_msg msg;
	int sv[2], fd = -1, status = 0, ret, bad = 0;
	pid_t pid;
	char devarg[16], fdarg[16];

	if (!expect || !scratch || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		return -ENOMEM;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		snprintf(devarg, sizeof(devarg), "%d", c->o.device);
		snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
		execl(self, self, "--device", devarg, "export-child", fdarg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	ret = recv_fd(sv[0], &msg, &fd);
	close(sv[0]);
	waitpid(pid, &status, 0);
	if (ret || msg.status || fd < 0) {
		record(c, "import.export", false, "the exporting process failed: %s (status %d)",
		       ret ? "no message" : msg.err, status);
		goto out;
	}
	record(c, "import.export", WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "process %d made and filled a bank of %u slots, sent its fd, exited", (int)pid,
	       IMPORT_SLOTS);
	msg.desc.fd = fd;
	/* The client's import, after the exporter is gone. */
	bank_map_from(&m, &msg.desc, IMPORT_SLOTS, IMPORT_EXPERT);
	ret = mc_cuda_bank_import(&m);
	own_ctx(c);
	if (ret) {
		record(c, "import.client", false, "%s", moecache_bank_import_error());
		goto out_fd;
	}
	for (uint32_t s = 0; s < IMPORT_SLOTS; s++) {
		fill_pattern(expect, IMPORT_EXPERT, 100 + s);
		bad += !device_equals(c, moecache_bank_slot_addr(&m, s), expect, IMPORT_EXPERT,
				      scratch);
	}
	record(c, "import.client", bad == 0,
	       "another process's bank imported read-only: %d of %u slots differ", bad,
	       IMPORT_SLOTS);
	/* A new agent adopts the same fd (warm restart) and copies: the client sees it. */
	{
		struct agent_backend_config cfg = {.pool = "gpu-check",
						   .n_slots = IMPORT_SLOTS,
						   .expert_bytes = IMPORT_EXPERT,
						   .copy_threads = 2};
		unsigned char *host = host_region(IMPORT_EXPERT);
		struct moecache_bank desc = msg.desc;
		void *priv = NULL;

		desc.fd = dup(fd);
		ret = host ? agent_cuda_backend_create(&cfg, NULL, &priv, c->err, sizeof(c->err))
			   : -ENOMEM;
		if (!ret)
			ret = agent_cuda_backend.bank_adopt(priv, &desc);
		if (!ret) {
			struct be b = {.priv = priv, .desc = desc};

			fill_pattern(host, IMPORT_EXPERT, 999);
			ret = be_copy(&b, 3, host, 0);
			if (!ret)
				ret = be_wait(&b, 1, 10);
			own_ctx(c);
			record(
			    c, "import.adopt",
			    ret == 0 && device_equals(c, moecache_bank_slot_addr(&m, 3), host,
						      IMPORT_EXPERT, scratch),
			    "a new backend adopted the bank, its copy is seen by the client (%d)",
			    ret);
		} else {
			record(c, "import.adopt", false, "%s",
			       priv ? agent_gpu_backend_error(priv) : c->err);
			if (!priv)
				close(desc.fd);
		}
		if (priv)
			agent_cuda_backend.destroy(priv);
		own_ctx(c);
		if (host)
			munmap(host, IMPORT_EXPERT);
	}
	bank_map_free(&m);
out_fd:
	close(fd);
out:
	free(expect);
	free(scratch);
	return 0;
}

/* ---- kernels ---- */

struct kmod {
	cu_module mod;
	cu_function remap, up_bf16, down_bf16, up_f32, down_f32;
};

static int kernels_load(struct check *c, struct kmod *k)
{
	const void *image;
	size_t size;

	if (moe_kernels_cuda_image(&image, &size))
		return -ENOENT;
	if (!CU(cuModuleLoadData(&k->mod, image)))
		return -EIO;
	if (!CU(cuModuleGetFunction(&k->remap, k->mod, "moe_remap")) ||
	    !CU(cuModuleGetFunction(&k->up_bf16, k->mod, "moe_ffn_up_bf16")) ||
	    !CU(cuModuleGetFunction(&k->down_bf16, k->mod, "moe_ffn_down_bf16")) ||
	    !CU(cuModuleGetFunction(&k->up_f32, k->mod, "moe_ffn_up_f32")) ||
	    !CU(cuModuleGetFunction(&k->down_f32, k->mod, "moe_ffn_down_f32")))
		return -EIO;
	return 0;
}

static cu_result launch_ffn(struct check *c, const struct kmod *k, struct moe_ffn_args *a,
			    cu_stream stream)
{
	bool bf16 = a->dtype == MOE_DTYPE_BF16;
	void *params[] = {a};
	uint32_t grid[3];
	cu_result res;

	moe_ffn_up_grid(a, grid);
	if (!grid[0])
		return MC_CU_SUCCESS;
	res = c->cu.cuLaunchKernel(bf16 ? k->up_bf16 : k->up_f32, grid[0], grid[1], grid[2],
				   MOE_FFN_THREADS, 1, 1, 0, stream, params, NULL);
	if (res != MC_CU_SUCCESS)
		return res;
	moe_ffn_down_grid(a, grid);
	return c->cu.cuLaunchKernel(bf16 ? k->down_bf16 : k->down_f32, grid[0], grid[1], grid[2],
				    MOE_FFN_THREADS, 1, 1, 0, stream, params, NULL);
}

static cu_deviceptr dev_upload(struct check *c, const void *src, size_t bytes)
{
	cu_deviceptr d = 0;

	if (c->cu.cuMemAlloc(&d, bytes ? bytes : 16) != MC_CU_SUCCESS)
		return 0;
	if (src && bytes)
		c->cu.cuMemcpyHtoD(d, src, bytes);
	return d;
}

/* Remap and FFN on slots of an imported bank that the backend filled, vs the references. */
static void kernels_case(struct check *c, const struct kmod *k, uint32_t dtype)
{
	const uint32_t n_layers = 2, n_experts = 8, top_k = 2, n_tokens = 4, n_slots = 8;
	const struct moe_ffn_shape shape = {dtype, 256, 128};
	struct moe_expert_layout l;
	uint64_t rec_bytes, n_idx = (uint64_t)n_layers * n_experts;
	uint32_t map[2 * 8], experts[4 * 2], slots_ref[4 * 2], slots_gpu[4 * 2];
	float x[4 * 256], w[4 * 2], *y_ref, *y_gpu, *h_ref;
	unsigned char *host, *bank_mirror;
	struct moecache_bank_map m;
	struct moe_remap_args ra;
	struct moe_ffn_args fa;
	cu_deviceptr d_map, d_exp, d_slots, d_x, d_w, d_h, d_y;
	uint32_t bit_same = 0, n_out = n_tokens * shape.d_model;
	double max_diff = 0;
	char name[64];
	struct be b;
	int ret;

	snprintf(name, sizeof(name), "kernels.%s", dtype == MOE_DTYPE_BF16 ? "bf16" : "f32");
	moe_expert_layout_get(dtype, shape.d_model, shape.d_ff, &l);
	rec_bytes = moe_align_up(l.bytes, 4096);
	host = host_region(n_idx * rec_bytes);
	y_ref = calloc(n_out, sizeof(float));
	y_gpu = calloc(n_out, sizeof(float));
	h_ref = calloc((size_t)n_tokens * top_k * shape.d_ff, sizeof(float));
	if (!host || !y_ref || !y_gpu || !h_ref) {
		record(c, name, false, "out of memory");
		return;
	}
	for (uint32_t li = 0; li < n_layers; li++)
		for (uint32_t e = 0; e < n_experts; e++)
			moe_gen_expert(host + (li * n_experts + e) * rec_bytes, rec_bytes, &shape,
				       GEN_SEED, li, e);
	ret = be_open(c, &b, n_slots, rec_bytes, host, n_idx * rec_bytes, 2);
	if (ret) {
		record(c, name, false, "bank: %s", c->err);
		goto out;
	}
	/* Layer 1's experts 0..5 resident in slots 5..0; 6 and 7 are misses. */
	for (uint32_t i = 0; i < n_idx; i++)
		map[i] = MOECACHE_NONE;
	for (uint32_t e = 0; e < 6; e++) {
		map[1 * n_experts + e] = 5 - e;
		be_copy(&b, 5 - e, host + (1 * n_experts + e) * rec_bytes, 0);
	}
	ret = be_wait(&b, 6, 30);
	own_ctx(c);
	bank_map_from(&m, &b.desc, n_slots, rec_bytes);
	if (ret || mc_cuda_bank_import(&m)) {
		record(c, name, false, "filling or importing the bank failed (%d): %s", ret,
		       moecache_bank_import_error());
		goto out_be;
	}
	own_ctx(c);
	for (uint32_t i = 0; i < n_tokens * top_k; i++)
		experts[i] = (i * 3 + 1) % n_experts;
	for (uint32_t i = 0; i < n_tokens * shape.d_model; i++)
		x[i] = moe_gen_value(0x1234, i) * 8.0f;
	for (uint32_t i = 0; i < n_tokens * top_k; i++)
		w[i] = 0.25f + 0.125f * (float)(i % 3);

	/* remap on the GPU and on the CPU */
	d_map = dev_upload(c, map, sizeof(map));
	d_exp = dev_upload(c, experts, sizeof(experts));
	d_slots = dev_upload(c, NULL, sizeof(slots_gpu));
	ra = (struct moe_remap_args){.map = d_map,
				     .experts = d_exp,
				     .slots = d_slots,
				     .n_layers = n_layers,
				     .expert_begin = 0,
				     .expert_end = n_experts,
				     .layer = 1,
				     .n_tokens = n_tokens,
				     .top_k = top_k};
	{
		void *params[] = {&ra};

		if (!CU(cuLaunchKernel(k->remap, 1, 1, 1, MOE_REMAP_THREADS, 1, 1, 0, NULL, params,
				       NULL)) ||
		    !CU(cuCtxSynchronize()))
			goto out_dev;
	}
	c->cu.cuMemcpyDtoH(slots_gpu, d_slots, sizeof(slots_gpu));
	ra.map = (uintptr_t)map;
	ra.experts = (uintptr_t)experts;
	ra.slots = (uintptr_t)slots_ref;
	moe_ref_remap(&ra);
	record(c, dtype == MOE_DTYPE_BF16 ? "kernels.remap.bf16_run" : "kernels.remap.f32_run",
	       !memcmp(slots_gpu, slots_ref, sizeof(slots_ref)),
	       "moe_remap on the GPU gives the reference's slots for %u lookups", n_tokens * top_k);

	/* FFN reading the imported bank vs the reference reading a host mirror of it */
	d_x = dev_upload(c, x, sizeof(x));
	d_w = dev_upload(c, w, sizeof(w));
	d_h = dev_upload(c, NULL, (size_t)n_tokens * top_k * shape.d_ff * sizeof(float));
	d_y = dev_upload(c, y_gpu, n_out * sizeof(float));
	fa = (struct moe_ffn_args){.bank = moecache_bank_slot_addr(&m, 0),
				   .slot_stride = m.slot_stride,
				   .x = d_x,
				   .slots = d_slots,
				   .weights = d_w,
				   .h = d_h,
				   .y = d_y,
				   .n_slots = n_slots,
				   .dtype = dtype,
				   .d_model = shape.d_model,
				   .d_ff = shape.d_ff,
				   .n_tokens = n_tokens,
				   .top_k = top_k};
	if (moe_ffn_args_check(&fa) || !cu_ok(c, launch_ffn(c, k, &fa, NULL), "FFN launch") ||
	    !CU(cuCtxSynchronize()))
		goto out_ffn;
	c->cu.cuMemcpyDtoH(y_gpu, d_y, n_out * sizeof(float));
	bank_mirror = calloc(n_slots, m.slot_stride);
	for (uint32_t e = 0; bank_mirror && e < 6; e++)
		memcpy(bank_mirror + (5 - e) * m.slot_stride,
		       host + (1 * n_experts + e) * rec_bytes, rec_bytes);
	fa.bank = (uintptr_t)bank_mirror;
	fa.x = (uintptr_t)x;
	fa.slots = (uintptr_t)slots_ref;
	fa.weights = (uintptr_t)w;
	fa.h = (uintptr_t)h_ref;
	fa.y = (uintptr_t)y_ref;
	ret = bank_mirror ? moe_ref_ffn(&fa) : -ENOMEM;
	for (uint32_t i = 0; i < n_out; i++) {
		double d = fabs((double)y_gpu[i] - (double)y_ref[i]);

		bit_same += !memcmp(&y_gpu[i], &y_ref[i], sizeof(float));
		if (d > max_diff)
			max_diff = d;
	}
	/* kernels/README.md: same operations in the same order, so the same bits. */
	record(c, name, ret == 0 && bit_same == n_out,
	       "FFN over the imported bank: %u of %u outputs bit-identical to the reference "
	       "(largest difference %.3g)",
	       bit_same, n_out, max_diff);
	free(bank_mirror);
out_ffn:
	c->cu.cuMemFree(d_x);
	c->cu.cuMemFree(d_w);
	c->cu.cuMemFree(d_h);
	c->cu.cuMemFree(d_y);
out_dev:
	c->cu.cuMemFree(d_map);
	c->cu.cuMemFree(d_exp);
	c->cu.cuMemFree(d_slots);
	bank_map_free(&m);
out_be:
	be_close(c, &b);
out:
	munmap(host, n_idx * rec_bytes);
	free(y_ref);
	free(y_gpu);
	free(h_ref);
}

static int cmd_kernels(struct check *c)
{
	struct kmod k = {0};
	int ret = kernels_load(c, &k);

	if (ret == -ENOENT) {
		printf("SKIP kernels: libmoekernels.a was built without nvcc (no CUDA image)\n");
		return EXIT_SKIP;
	}
	if (ret)
		return 0;
	kernels_case(c, &k, MOE_DTYPE_BF16);
	kernels_case(c, &k, MOE_DTYPE_F32);
	c->cu.cuModuleUnload(k.mod);
	return 0;
}

/* ---- bench-copy ---- */

static double median3(double a, double b, double d)
{
	return a > b ? (b > d ? b : (a > d ? d : a)) : (a > d ? a : (b > d ? d : b));
}

static int cmd_bench_copy(struct check *c)
{
	const uint64_t peak_bytes = 512ull << 20;
	const uint64_t e_bytes = (uint64_t)c->o.expert_mib << 20;
	const uint32_t n = c->o.copies;
	double best_sync = 0, best_async = 0, agent[3];
	uint32_t queue_counts[2] = {2, 4};
	cu_deviceptr dev = 0;
	cu_stream s[2] = {0};
	void *pinned = NULL;
	unsigned char *host;

	/* Peak: one pinned buffer to device memory, synchronous and on two streams. */
	if (!CU(cuMemHostAlloc(&pinned, peak_bytes, MC_CU_MEMHOSTALLOC_PORTABLE)) ||
	    !CU(cuMemAlloc(&dev, peak_bytes)) ||
	    !CU(cuStreamCreate(&s[0], MC_CU_STREAM_NON_BLOCKING)) ||
	    !CU(cuStreamCreate(&s[1], MC_CU_STREAM_NON_BLOCKING)))
		return 0;
	memset(pinned, 0x5a, peak_bytes);
	for (int rep = 0; rep < 5; rep++) {
		double t0 = now_s(), gbs;

		c->cu.cuMemcpyHtoD(dev, pinned, peak_bytes);
		gbs = peak_bytes / (now_s() - t0) / 1e9;
		best_sync = gbs > best_sync ? gbs : best_sync;
		t0 = now_s();
		c->cu.cuMemcpyHtoDAsync(dev, pinned, peak_bytes / 2, s[0]);
		c->cu.cuMemcpyHtoDAsync(dev + peak_bytes / 2, (char *)pinned + peak_bytes / 2,
					peak_bytes / 2, s[1]);
		c->cu.cuStreamSynchronize(s[0]);
		c->cu.cuStreamSynchronize(s[1]);
		gbs = peak_bytes / (now_s() - t0) / 1e9;
		best_async = gbs > best_async ? gbs : best_async;
	}
	c->cu.cuStreamDestroy(s[0]);
	c->cu.cuStreamDestroy(s[1]);
	c->cu.cuMemFree(dev);
	c->cu.cuMemFreeHost(pinned);
	figure(c, "h2d_peak_sync_gbs", best_sync);
	figure(c, "h2d_peak_two_streams_gbs", best_async);
	record(c, "bench.h2d_peak", best_sync > 0,
	       "cuMemcpyHtoD from pinned memory: %.1f GB/s, two streams %.1f GB/s", best_sync,
	       best_async);

	/* The agent: n experts through the backend, registered host pages, 2 and 4 streams. */
	host = host_region(n * e_bytes);
	if (!host)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		memset(host + i * e_bytes, (int)i, e_bytes);
	for (int q = 0; q < 2; q++) {
		struct be b;
		char fig[64];
		int bad = 0;

		if (be_open(c, &b, n, e_bytes, host, n * e_bytes, queue_counts[q])) {
			record(c, "bench.agent_h2d", false, "%s", c->err);
			break;
		}
		/* A warm-up round (registration, first touch), then three measured ones. */
		for (int rep = -1; rep < 3; rep++) {
			double t0 = now_s();

			for (uint32_t i = 0; i < n; i++)
				bad += be_copy(&b, i, host + i * e_bytes, 0) != 0;
			bad += be_wait(&b, n, 60) != 0;
			if (rep >= 0)
				agent[rep] = n * e_bytes / (now_s() - t0) / 1e9;
		}
		be_close(c, &b);
		snprintf(fig, sizeof(fig), "agent_h2d_%ustreams_gbs", queue_counts[q]);
		figure(c, fig, median3(agent[0], agent[1], agent[2]));
		record(c, fig, bad == 0,
		       "%u copies of %u MiB on %u streams: %.1f GB/s median, %.0f%% of the "
		       "cuMemcpyHtoD peak",
		       n, c->o.expert_mib, queue_counts[q], median3(agent[0], agent[1], agent[2]),
		       100 * median3(agent[0], agent[1], agent[2]) /
			   (best_async > best_sync ? best_async : best_sync));
	}
	munmap(host, n * e_bytes);
	return 0;
}

/* ---- bench-decode ---- */

/* A trace's decode steps as [step][layer][top_k] ids, short lists padded with NONE. */
struct dense_trace {
	uint32_t n_steps, n_layers, n_experts, top_k;
	uint32_t *ids;
	uint32_t *counts; /* [step][layer]: ids before the padding */
};

static const uint32_t *trace_at(const struct dense_trace *t, uint32_t step, uint32_t layer)
{
	return t->ids + ((uint64_t)step * t->n_layers + layer) * t->top_k;
}

static uint32_t trace_count(const struct dense_trace *t, uint32_t step, uint32_t layer)
{
	return t->counts[(uint64_t)step * t->n_layers + layer];
}

static void dense_trace_free(struct dense_trace *t)
{
	free(t->ids);
	free(t->counts);
	memset(t, 0, sizeof(*t));
}

/* The decode tokens of every prompt (all tokens if there are none), in trace order. */
static int dense_trace_load(const char *path, struct dense_trace *out, char *err, size_t errlen)
{
	struct moe_trace_view v = {0};
	struct moe_trace *t = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = moe_trace_load(path, &t, err, errlen);
	if (ret)
		return ret;
	ret = moe_trace_select(t, NULL, MOE_TRACE_DECODE, &v);
	if (!ret && !v.n) {
		moe_trace_view_free(&v);
		ret = moe_trace_select(t, NULL, MOE_TRACE_ALL, &v);
	}
	if (ret || !v.n || !t->top_k || t->top_k > 64) {
		snprintf(err, errlen, "%s: no usable tokens", path);
		ret = ret ? ret : -EINVAL;
		goto out;
	}
	out->n_steps = v.n;
	out->n_layers = t->n_layers;
	out->n_experts = t->n_experts;
	out->top_k = t->top_k;
	out->ids = malloc((uint64_t)v.n * t->n_layers * t->top_k * sizeof(uint32_t));
	out->counts = malloc((uint64_t)v.n * t->n_layers * sizeof(uint32_t));
	if (!out->ids || !out->counts) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t s = 0; s < v.n; s++) {
		for (uint32_t l = 0; l < t->n_layers; l++) {
			uint32_t n, *dst = out->ids + ((uint64_t)s * t->n_layers + l) * t->top_k;
			const uint32_t *src = moe_trace_layer(v.tokens[s], l, &n);

			for (uint32_t k = 0; k < t->top_k; k++)
				dst[k] = k < n ? src[k] : MOECACHE_NONE;
			out->counts[(uint64_t)s * t->n_layers + l] = n;
		}
	}
out:
	moe_trace_view_free(&v);
	moe_trace_free(t);
	if (ret)
		dense_trace_free(out);
	return ret;
}

struct model {
	struct dense_trace t;
	uint32_t n_layers, n_experts, top_k;
	struct moe_ffn_shape shape;
	uint64_t rec_bytes, n_idx;
	unsigned char *host;
};

struct gen_job {
	struct model *m;
	uint64_t begin, end;
};

static void *gen_thread(void *arg)
{
	struct gen_job *j = arg;

	for (uint64_t i = j->begin; i < j->end; i++)
		moe_gen_expert(j->m->host + i * j->m->rec_bytes, j->m->rec_bytes, &j->m->shape,
			       GEN_SEED, (uint32_t)(i / j->m->n_experts),
			       (uint32_t)(i % j->m->n_experts));
	return NULL;
}

/* Writes every expert record, on a few threads. */
static void model_generate(struct model *m, unsigned char *dst)
{
	enum { N = 8 };
	struct gen_job jobs[N];
	pthread_t th[N];

	m->host = dst;
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct gen_job){m, m->n_idx * i / N, m->n_idx * (i + 1) / N};
		pthread_create(&th[i], NULL, gen_thread, &jobs[i]);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
}

static int model_load(struct check *c, struct model *m)
{
	struct moe_expert_layout l;
	char err[256];
	int ret;

	memset(m, 0, sizeof(*m));
	ret = dense_trace_load(c->o.trace, &m->t, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "moecache-cuda-check: %s\n", err);
		return ret;
	}
	if (c->o.steps && c->o.steps < m->t.n_steps)
		m->t.n_steps = c->o.steps;
	m->n_layers = m->t.n_layers;
	m->n_experts = m->t.n_experts;
	m->top_k = m->t.top_k;
	m->shape = (struct moe_ffn_shape){MOE_DTYPE_BF16, c->o.d_model, c->o.d_ff};
	if (moe_ffn_shape_check(&m->shape)) {
		fprintf(stderr, "moecache-cuda-check: d_model and d_ff must be multiples of %u\n",
			MOE_DIM_MULTIPLE);
		return -EINVAL;
	}
	moe_expert_layout_get(MOE_DTYPE_BF16, c->o.d_model, c->o.d_ff, &l);
	m->rec_bytes = moe_align_up(l.bytes, 4096);
	m->n_idx = (uint64_t)m->n_layers * m->n_experts;
	return 0;
}

/* Per-step device buffers of one decode token. */
struct step_bufs {
	cu_deviceptr x, slots, w, h, y;
	cu_stream stream;
};

static int step_bufs_init(struct check *c, const struct model *m, struct step_bufs *s)
{
	float *x = calloc(m->shape.d_model, sizeof(float));
	float *w = calloc(m->top_k, sizeof(float));

	if (!x || !w)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->shape.d_model; i++)
		x[i] = moe_gen_value(77, i) * 8.0f;
	for (uint32_t k = 0; k < m->top_k; k++)
		w[k] = 1.0f / (float)m->top_k;
	s->x = dev_upload(c, x, m->shape.d_model * sizeof(float));
	s->w = dev_upload(c, w, m->top_k * sizeof(float));
	s->slots = dev_upload(c, NULL, m->top_k * sizeof(uint32_t));
	s->h = dev_upload(c, NULL, (size_t)m->top_k * m->shape.d_ff * sizeof(float));
	s->y = dev_upload(c, NULL, m->shape.d_model * sizeof(float));
	free(x);
	free(w);
	if (!s->x || !s->w || !s->slots || !s->h || !s->y ||
	    c->cu.cuStreamCreate(&s->stream, MC_CU_STREAM_NON_BLOCKING) != MC_CU_SUCCESS)
		return -ENOMEM;
	return 0;
}

static void step_bufs_free(struct check *c, struct step_bufs *s)
{
	c->cu.cuMemFree(s->x);
	c->cu.cuMemFree(s->w);
	c->cu.cuMemFree(s->slots);
	c->cu.cuMemFree(s->h);
	c->cu.cuMemFree(s->y);
	if (s->stream)
		c->cu.cuStreamDestroy(s->stream);
}

/* One layer of one token: slots to the device, then the FFN pair, on the step's stream. */
static cu_result layer_ffn(struct check *c, const struct kmod *k, const struct model *m,
			   struct step_bufs *s, uint64_t bank, uint64_t stride, uint32_t n_slots,
			   const uint32_t *slots)
{
	struct moe_ffn_args a = {.bank = bank,
				 .slot_stride = stride,
				 .x = s->x,
				 .slots = s->slots,
				 .weights = s->w,
				 .h = s->h,
				 .y = s->y,
				 .n_slots = n_slots,
				 .dtype = m->shape.dtype,
				 .d_model = m->shape.d_model,
				 .d_ff = m->shape.d_ff,
				 .n_tokens = 1,
				 .top_k = m->top_k};
	cu_result res;

	res = c->cu.cuMemcpyHtoDAsync(s->slots, slots, m->top_k * sizeof(uint32_t), s->stream);
	if (res == MC_CU_SUCCESS)
		res = launch_ffn(c, k, &a, s->stream);
	return res;
}

/* A bank of n_slots slots with LRU replacement, filled by the agent's backend. */
struct lru {
	uint32_t n_slots;
	uint32_t *slot_of; /* [n_idx] */
	uint32_t *owner;   /* [n_slots] */
	uint64_t *stamp;   /* [n_slots] */
	uint32_t *needed;  /* [n_idx]: tick of the layer that needs it */
	uint64_t clock, hits, misses;
};

static uint32_t lru_victim(struct lru *r, uint32_t tick)
{
	uint32_t best = MOECACHE_NONE;

	for (uint32_t s = 0; s < r->n_slots; s++) {
		if (r->owner[s] == MOECACHE_NONE)
			return s;
		if (r->needed[r->owner[s]] == tick)
			continue;
		if (best == MOECACHE_NONE || r->stamp[s] < r->stamp[best])
			best = s;
	}
	return best;
}

static double run_decode(struct check *c, const struct kmod *k, struct model *m, const char *mode,
			 uint32_t percent, json_object *res)
{
	struct step_bufs s = {0};
	uint32_t slots[64];
	double t0, secs = -1;
	bool uva = !strcmp(mode, "uva"), resident = !strcmp(mode, "resident");
	cu_deviceptr bank = 0;
	uint64_t stride = m->rec_bytes, bytes_copied = 0;
	uint32_t n_slots = (uint32_t)m->n_idx, tick = 0;
	struct lru r = {0};
	struct moecache_bank_map bm = {.fd = -1};
	struct be b = {0};
	bool registered = false;

	if (m->top_k > 64 || step_bufs_init(c, m, &s))
		goto out;
	if (resident) {
		if (!CU(cuMemAlloc(&bank, m->n_idx * m->rec_bytes)) ||
		    !CU(cuMemcpyHtoD(bank, m->host, m->n_idx * m->rec_bytes)))
			goto out;
	} else if (uva) {
		/* The experts stay in host memory; the kernels read them over the bus. */
		if (!CU(cuMemHostRegister(m->host, m->n_idx * m->rec_bytes,
					  MC_CU_MEMHOSTREGISTER_DEVICEMAP |
					      MC_CU_MEMHOSTREGISTER_PORTABLE)))
			goto out;
		registered = true;
		if (!CU(cuMemHostGetDevicePointer(&bank, m->host, 0)))
			goto out;
	} else {
		n_slots = (uint32_t)((m->n_idx * percent + 99) / 100);
		if (be_open(c, &b, n_slots, m->rec_bytes, m->host, m->n_idx * m->rec_bytes, 2)) {
			record(c, "decode.bank", false, "%s", c->err);
			goto out;
		}
		bank_map_from(&bm, &b.desc, n_slots, m->rec_bytes);
		if (mc_cuda_bank_import(&bm)) {
			record(c, "decode.import", false, "%s", moecache_bank_import_error());
			goto out;
		}
		own_ctx(c);
		bank = moecache_bank_slot_addr(&bm, 0);
		stride = bm.slot_stride;
		r.n_slots = n_slots;
		r.slot_of = malloc(m->n_idx * sizeof(uint32_t));
		r.needed = calloc(m->n_idx, sizeof(uint32_t));
		r.owner = malloc(n_slots * sizeof(uint32_t));
		r.stamp = calloc(n_slots, sizeof(uint64_t));
		if (!r.slot_of || !r.needed || !r.owner || !r.stamp)
			goto out;
		memset(r.slot_of, 0xff, m->n_idx * sizeof(uint32_t));
		memset(r.owner, 0xff, n_slots * sizeof(uint32_t));
	}
	t0 = now_s();
	for (uint32_t step = 0; step < m->t.n_steps; step++) {
		for (uint32_t l = 0; l < m->n_layers; l++) {
			const uint32_t *ids = trace_at(&m->t, step, l);
			uint32_t misses = 0;

			if (resident || uva) {
				for (uint32_t kk = 0; kk < m->top_k; kk++)
					slots[kk] = ids[kk] == MOECACHE_NONE
							? MOECACHE_NONE
							: l * m->n_experts + ids[kk];
			} else {
				tick++;
				for (uint32_t kk = 0; kk < m->top_k; kk++)
					if (ids[kk] != MOECACHE_NONE)
						r.needed[l * m->n_experts + ids[kk]] = tick;
				for (uint32_t kk = 0; kk < m->top_k; kk++) {
					uint32_t idx = l * m->n_experts + ids[kk], v;

					if (ids[kk] == MOECACHE_NONE) {
						slots[kk] = MOECACHE_NONE;
						continue;
					}
					if (r.slot_of[idx] != MOECACHE_NONE) {
						r.hits++;
						slots[kk] = r.slot_of[idx];
						r.stamp[slots[kk]] = ++r.clock;
						continue;
					}
					if (!misses) {
						/* A victim may still be read by an earlier layer.
						 */
						c->cu.cuStreamSynchronize(s.stream);
					}
					v = lru_victim(&r, tick);
					if (v == MOECACHE_NONE) {
						slots[kk] = MOECACHE_NONE; /* more distinct experts
									      than slots */
						continue;
					}
					if (r.owner[v] != MOECACHE_NONE)
						r.slot_of[r.owner[v]] = MOECACHE_NONE;
					r.owner[v] = idx;
					r.slot_of[idx] = v;
					r.stamp[v] = ++r.clock;
					r.misses++;
					misses++;
					slots[kk] = v;
					be_copy(&b, v, m->host + idx * m->rec_bytes, 0);
					bytes_copied += m->rec_bytes;
				}
				/* A demand miss: the layer waits for its copies (as ACQUIRE with
				 * WAIT). */
				if (misses && be_wait(&b, misses, 30)) {
					record(c, "decode.copies", false,
					       "copies failed or timed out");
					goto out;
				}
				if (misses)
					own_ctx(c);
			}
			if (!cu_ok(c, layer_ffn(c, k, m, &s, bank, stride, n_slots, slots),
				   "FFN launch"))
				goto out;
		}
		if (!CU(cuStreamSynchronize(s.stream))) /* the token is sampled here */
			goto out;
	}
	secs = now_s() - t0;
	json_object_object_add(res, "steps", json_object_new_int((int)m->t.n_steps));
	json_object_object_add(res, "seconds", json_object_new_double(secs));
	json_object_object_add(res, "slots", json_object_new_int((int)n_slots));
	if (r.n_slots) {
		json_object_object_add(
		    res, "hit_rate", json_object_new_double((double)r.hits / (r.hits + r.misses)));
		json_object_object_add(res, "bytes_copied",
				       json_object_new_int64((int64_t)bytes_copied));
	}
out:
	if (b.priv)
		be_close(c, &b);
	if (bm.fd >= 0)
		bank_map_free(&bm);
	if (resident && bank)
		c->cu.cuMemFree(bank);
	if (registered)
		c->cu.cuMemHostUnregister(m->host);
	step_bufs_free(c, &s);
	free(r.slot_of);
	free(r.needed);
	free(r.owner);
	free(r.stamp);
	return secs < 0 ? -1 : m->t.n_steps / secs;
}

/* The driver path: a client of a pool that moecached serves with the CUDA backend. */
static double run_decode_driver(struct check *c, const struct kmod *k, struct model *m,
				json_object *res)
{
	struct moecache_bank_map bm = {.fd = -1};
	struct moecache *mc = NULL;
	struct step_bufs s = {0};
	uint32_t slots[64];
	double t0, secs = -1, deadline;
	int ret;

	ret = moecache_open_attach(c->o.pool, MOECACHE_ROLE_CLIENT, &mc);
	if (ret) {
		record(c, "decode.driver", false, "attach to pool %s: %s", c->o.pool,
		       strerror(-ret));
		return -1;
	}
	/* The agent may still be making the bank. */
	deadline = now_s() + 30;
	while ((ret = moecache_bank_import(mc, &bm)) == -ENODATA && now_s() < deadline)
		usleep(100000);
	own_ctx(c);
	if (ret) {
		record(c, "decode.driver", false, "bank import: %s%s%s", strerror(-ret),
		       ret == -EOPNOTSUPP
			   ? ": this libmoecache has no CUDA import hook (lib/bank.c)"
		       : *moecache_bank_import_error() ? ": "
						       : "",
		       ret == -EOPNOTSUPP ? "" : moecache_bank_import_error());
		goto out;
	}
	if (bm.backend != MOECACHE_BACKEND_CUDA || step_bufs_init(c, m, &s)) {
		record(c, "decode.driver", false, "the pool's bank is not a CUDA bank (backend %u)",
		       bm.backend);
		goto out;
	}
	t0 = now_s();
	for (uint32_t step = 0; step < m->t.n_steps; step++) {
		for (uint32_t l = 0; l < m->n_layers; l++) {
			const uint32_t *ids = trace_at(&m->t, step, l);
			uint32_t n = trace_count(&m->t, step, l);

			for (uint32_t kk = n; kk < m->top_k; kk++)
				slots[kk] = MOECACHE_NONE;
			ret = moecache_bank_acquire(mc, &bm, s.stream, l, ids, n, slots,
						    MOECACHE_ACQ_WAIT, 10000, NULL);
			if (ret) {
				record(c, "decode.driver", false, "acquire: %s (%s)",
				       strerror(-ret), moecache_bank_error(&bm));
				goto out;
			}
			if (!cu_ok(c,
				   layer_ffn(c, k, m, &s, moecache_bank_slot_addr(&bm, 0),
					     bm.slot_stride, bm.n_slots, slots),
				   "FFN launch"))
				goto out;
			ret = moecache_bank_release_after(mc, &bm, s.stream, slots, n);
			if (ret) {
				record(c, "decode.driver", false, "release: %s (%s)",
				       strerror(-ret), moecache_bank_error(&bm));
				goto out;
			}
		}
		if (!CU(cuStreamSynchronize(s.stream)))
			goto out;
	}
	moecache_bank_release_flush(&bm);
	secs = now_s() - t0;
	json_object_object_add(res, "steps", json_object_new_int((int)m->t.n_steps));
	json_object_object_add(res, "seconds", json_object_new_double(secs));
	json_object_object_add(res, "slots", json_object_new_int((int)bm.n_slots));
out:
	if (bm.fd >= 0) {
		moecache_bank_release_flush(&bm);
		moecache_bank_unimport(&bm);
	}
	step_bufs_free(c, &s);
	moecache_close(mc);
	own_ctx(c);
	return secs < 0 ? -1 : m->t.n_steps / secs;
}

static int cmd_bench_decode(struct check *c)
{
	struct kmod k = {0};
	struct model m;
	unsigned char *host;
	int ret;

	ret = kernels_load(c, &k);
	if (ret == -ENOENT) {
		printf(
		    "SKIP bench-decode: libmoekernels.a was built without nvcc (no CUDA image)\n");
		return EXIT_SKIP;
	}
	if (ret)
		return 0;
	ret = model_load(c, &m);
	if (ret)
		return EXIT_SETUP;
	printf("trace %s: %u steps, %u layers, %u experts, top-%u; experts of %" PRIu64
	       " KiB (bf16, d_model %u, d_ff %u), %" PRIu64 " MiB in all\n",
	       c->o.trace, m.t.n_steps, m.n_layers, m.n_experts, m.top_k, m.rec_bytes >> 10,
	       c->o.d_model, c->o.d_ff, (m.n_idx * m.rec_bytes) >> 20);
	host = host_region(m.n_idx * m.rec_bytes);
	if (!host)
		return -ENOMEM;
	model_generate(&m, host);
	if (!strcmp(c->o.mode, "driver")) {
		json_object *r = json_object_new_object();
		double sps = run_decode_driver(c, &k, &m, r);

		if (sps > 0) {
			figure(c, "decode_driver_steps_per_s", sps);
			json_object_object_add(
			    record(c, "decode_driver_steps_per_s", true,
				   "%.1f steps/s through moecached and the driver", sps),
			    "run", r);
		} else {
			json_object_put(r);
		}
	}
	{
		const char *modes[] = {"resident", "uva"};

		for (int i = 0; i < 2; i++) {
			json_object *r = json_object_new_object();
			double sps = run_decode(c, &k, &m, modes[i], 100, r);
			char fig[64];

			snprintf(fig, sizeof(fig), "decode_%s_steps_per_s", modes[i]);
			if (sps > 0)
				figure(c, fig, sps);
			json_object_object_add(record(c, fig, sps > 0, "%.1f steps/s (%s)", sps,
						      i ? "experts read zero-copy from host memory"
							: "every expert resident on the GPU"),
					       "run", r);
		}
	}
	for (uint32_t i = 0; i < c->o.n_percents; i++) {
		json_object *r = json_object_new_object(), *hit = NULL;
		double sps = run_decode(c, &k, &m, "bank", c->o.percents[i], r);
		char fig[64], hit_fig[64];

		snprintf(fig, sizeof(fig), "decode_bank%u_steps_per_s", c->o.percents[i]);
		snprintf(hit_fig, sizeof(hit_fig), "decode_bank%u_hit_rate", c->o.percents[i]);
		if (sps > 0)
			figure(c, fig, sps);
		json_object_object_get_ex(r, "hit_rate", &hit);
		if (hit)
			figure(c, hit_fig, json_object_get_double(hit));
		json_object_object_add(
		    record(c, fig, sps > 0,
			   "bank at %u%% of the experts: %.1f steps/s, hit rate %.3f",
			   c->o.percents[i], sps, hit ? json_object_get_double(hit) : 0.0),
		    "run", r);
	}
	munmap(host, m.n_idx * m.rec_bytes);
	dense_trace_free(&m.t);
	c->cu.cuModuleUnload(k.mod);
	return 0;
}

/* ---- pool-setup (the driver path; root) ---- */

static int cmd_pool_setup(struct check *c, uint32_t percent)
{
	struct moecache_pool_create req = {0};
	struct moecache *mc = NULL;
	struct model m;
	int ret;

	if (!c->o.pool)
		return EXIT_SETUP;
	ret = model_load(c, &m);
	if (ret)
		return EXIT_SETUP;
	snprintf(req.name, sizeof(req.name), "%s", c->o.pool);
	req.n_layers = m.n_layers;
	req.n_experts = m.n_experts;
	req.expert_begin = 0;
	req.expert_end = m.n_experts;
	req.expert_bytes = m.rec_bytes;
	req.n_slots = (uint32_t)((m.n_idx * percent + 99) / 100);
	req.mode = 0666;
	ret = moecache_open(NULL, &mc);
	if (!ret) {
		moecache_pool_destroy(mc, c->o.pool);
		ret = moecache_pool_create(mc, &req);
	}
	moecache_close(mc);
	mc = NULL;
	if (!ret)
		ret = moecache_open_attach(c->o.pool, MOECACHE_ROLE_LOADER, &mc);
	if (!ret)
		ret = moecache_host_map(mc, true, NULL, NULL);
	if (!ret)
		ret = moecache_load(mc, MOECACHE_LOAD_BEGIN);
	if (!ret) {
		for (uint64_t i = 0; i < m.n_idx && !ret; i++) {
			void *rec = moecache_host_expert_rw(mc, (uint32_t)(i / m.n_experts),
							    (uint32_t)(i % m.n_experts));

			ret = rec ? moe_gen_expert(rec, m.rec_bytes, &m.shape, GEN_SEED,
						   (uint32_t)(i / m.n_experts),
						   (uint32_t)(i % m.n_experts))
				  : -EFAULT;
		}
	}
	if (!ret)
		ret = moecache_load(mc, MOECACHE_LOAD_DONE);
	moecache_close(mc);
	record(c, "pool_setup", ret == 0,
	       "pool %s: %u layers x %u experts of %" PRIu64 " KiB, %u slots: %s", c->o.pool,
	       m.n_layers, m.n_experts, m.rec_bytes >> 10, req.n_slots,
	       ret ? strerror(-ret) : "loaded");
	dense_trace_free(&m.t);
	return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: moecache-cuda-check [--device N] [--json FILE] [--queues N]\n"
		   "         [--trace FILE] [--steps N] [--d-model N] [--d-ff N] [--percent P]...\n"
		   "         [--expert-mib N] [--copies N] [--mode direct|driver] [--pool NAME]\n"
		   "         info|copy|import|kernels|bench-copy|bench-decode|pool-setup\n");
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"device", required_argument, NULL, 'd'},  {"json", required_argument, NULL, 'j'},
	    {"trace", required_argument, NULL, 't'},   {"steps", required_argument, NULL, 's'},
	    {"d-model", required_argument, NULL, 'm'}, {"d-ff", required_argument, NULL, 'f'},
	    {"percent", required_argument, NULL, 'p'}, {"pool", required_argument, NULL, 'P'},
	    {"mode", required_argument, NULL, 'M'},    {"expert-mib", required_argument, NULL, 'e'},
	    {"copies", required_argument, NULL, 'c'},  {"queues", required_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},	       {NULL, 0, NULL, 0},
	};
	struct check c = {.o = {.device = 0,
				.mode = "direct",
				.d_model = 1024,
				.d_ff = 512,
				.expert_mib = 16,
				.copies = 64,
				.queues = 2}};
	json_object *root;
	const char *cmd;
	uint32_t v;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if (parse_u32(optarg, &v))
				goto bad;
			c.o.device = (int)v;
			break;
		case 'j':
			c.o.json = optarg;
			break;
		case 't':
			c.o.trace = optarg;
			break;
		case 'P':
			c.o.pool = optarg;
			break;
		case 'M':
			if (strcmp(optarg, "direct") && strcmp(optarg, "driver"))
				goto bad;
			c.o.mode = optarg;
			break;
		case 's':
			if (parse_u32(optarg, &c.o.steps))
				goto bad;
			break;
		case 'm':
			if (parse_u32(optarg, &c.o.d_model))
				goto bad;
			break;
		case 'f':
			if (parse_u32(optarg, &c.o.d_ff))
				goto bad;
			break;
		case 'e':
			if (parse_u32(optarg, &c.o.expert_mib) || !c.o.expert_mib)
				goto bad;
			break;
		case 'c':
			if (parse_u32(optarg, &c.o.copies) || !c.o.copies)
				goto bad;
			break;
		case 'q':
			if (parse_u32(optarg, &c.o.queues))
				goto bad;
			break;
		case 'p':
			if (parse_u32(optarg, &v) || !v || v > 100 || c.o.n_percents == 8)
				goto bad;
			c.o.percents[c.o.n_percents++] = v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind >= argc)
		goto bad;
	cmd = argv[optind];
	if (!c.o.n_percents) {
		c.o.percents[0] = 25;
		c.o.percents[1] = 50;
		c.o.percents[2] = 100;
		c.o.n_percents = 3;
	}
	if ((!strcmp(cmd, "bench-decode") || !strcmp(cmd, "pool-setup")) && !c.o.trace) {
		fprintf(stderr, "moecache-cuda-check: %s needs --trace\n", cmd);
		return EXIT_SETUP;
	}
	if (!strcmp(cmd, "pool-setup") ||
	    (!strcmp(cmd, "bench-decode") && !strcmp(c.o.mode, "driver"))) {
		if (!c.o.pool) {
			fprintf(stderr, "moecache-cuda-check: %s needs --pool\n", cmd);
			return EXIT_SETUP;
		}
	}
	c.results = json_object_new_array();
	c.figures = json_object_new_object();
	if (!strcmp(cmd, "pool-setup")) {
		ret = cmd_pool_setup(&c, c.o.percents[0]);
		goto done;
	}
	/* The child of "import": no results file, a socket to report on. */
	if (!strcmp(cmd, "export-child")) {
		if (optind + 1 >= argc || parse_u32(argv[optind + 1], &v))
			goto bad;
		if (check_open(&c))
			return EXIT_SETUP;
		ret = cmd_export_child(&c, (int)v);
		check_close(&c);
		json_object_put(c.results);
		json_object_put(c.figures);
		return ret;
	}
	if (check_open(&c))
		return EXIT_SETUP;
	if (!strcmp(cmd, "info"))
		ret = cmd_info(&c);
	else if (!strcmp(cmd, "copy"))
		ret = cmd_copy(&c);
	else if (!strcmp(cmd, "import")) {
		char self[PATH_MAX];

		ret = cmd_import(&c, self_path(self, sizeof(self)));
	} else if (!strcmp(cmd, "kernels"))
		ret = cmd_kernels(&c);
	else if (!strcmp(cmd, "bench-copy"))
		ret = cmd_bench_copy(&c);
	else if (!strcmp(cmd, "bench-decode"))
		ret = cmd_bench_decode(&c);
	else {
		check_close(&c);
		goto bad;
	}
	check_close(&c);
done:
	if (ret < 0) {
		fprintf(stderr, "moecache-cuda-check: %s: %s\n", cmd, strerror(-ret));
		c.failed++;
	}
	if (c.o.json) {
		root = json_object_new_object();
		json_object_object_add(root, "command", json_object_new_string(cmd));
		json_object_object_add(root, "results", c.results);
		json_object_object_add(root, "figures", c.figures);
		if (json_object_to_file_ext(c.o.json, root, JSON_C_TO_STRING_PRETTY))
			fprintf(stderr, "moecache-cuda-check: cannot write %s\n", c.o.json);
		json_object_put(root);
	} else {
		json_object_put(c.results);
		json_object_put(c.figures);
	}
	if (ret == EXIT_SKIP || ret == EXIT_SETUP)
		return ret;
	return c.failed ? EXIT_FAILED : 0;
bad:
	usage(stderr);
	return EXIT_SETUP;
}
