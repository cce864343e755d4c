// SPDX-License-Identifier: MIT
/*
 * moecache-cuda-check's checks, each PASS or FAIL: info, copy, import,
 * kernels, and peer (banks on two devices, the peer probe and copies).
 */
#include "cuda_check.h"
/* ---- info ---- */

int cmd_info(struct check *c)
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
	r = dc_record(
	    &c->rep, "info", vmm && posix,
	    "%s, sm_%d%d, %zu MiB, %d SMs, %d copy engines, driver %d.%d, VMM %s, POSIX fd "
	    "%s, granularity %zu KiB",
	    name, major, minor, total >> 20, sms, engines, version / 1000, (version % 1000) / 10,
	    vmm ? "yes" : "no", posix ? "yes" : "no", gran >> 10);
	json_object_object_add(r, "gpu", json_object_new_string(name));
	json_object_object_add(r, "compute_capability", json_object_new_int(major * 10 + minor));
	json_object_object_add(r, "memory_mib", json_object_new_int64((int64_t)(total >> 20)));
	json_object_object_add(r, "driver_version", json_object_new_int(version));
	json_object_object_add(r, "copy_engines", json_object_new_int(engines));
	return 0;
}

/* ---- copy ---- */

int cmd_copy(struct check *c)
{
	const uint32_t n_slots = 32, n_experts = 64;
	const uint64_t e_bytes = (3u << 20) + 4096; /* not a granule: the stride rounds up */
	unsigned char *host, *scratch;
	struct moecache_bank_map m;
	struct be b;
	bool ok = true;
	int ret;

	host = dc_host_region(n_experts * e_bytes);
	scratch = malloc(e_bytes);
	if (!host || !scratch)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_experts; i++)
		dc_fill_pattern(host + i * e_bytes, e_bytes, i);
	ret = be_open(c, &b, n_slots, e_bytes, host, n_experts * e_bytes, c->o.queues);
	if (ret) {
		dc_record(&c->rep, "copy.bank", false, "%s", c->err);
		goto out;
	}
	dc_record(&c->rep, "copy.bank", b.desc.slot_stride % (2u << 20) == 0 && b.desc.fd >= 0,
		  "bank of %" PRIu64 " MiB, stride %" PRIu64 " KiB for %" PRIu64 " KiB experts",
		  (uint64_t)b.desc.bank_bytes >> 20, (uint64_t)b.desc.slot_stride >> 10,
		  e_bytes >> 10);
	bank_map_from(&m, &b.desc, n_slots, e_bytes);
	ret = mc_cuda_bank_import(&m);
	own_ctx(c);
	if (ret) {
		dc_record(&c->rep, "copy.import", false, "%s", moecache_bank_import_error());
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
		dc_record(&c->rep, round ? "copy.overwrite" : "copy.fill", ok,
			  "%u slots, %u bad, completions %d (client import reads them back)",
			  n_slots, bad, ret);
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
		dc_record(
		    &c->rep, "copy.not_done_before_bytes",
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

#define IMPORT_SLOTS 16u
#define IMPORT_EXPERT (5u << 20)

/* The exporting "agent" (devcheck.h): makes a bank, fills it, hands the fd over, exits. */
int cmd_export_child(struct check *c, int sock)
{
	return dc_export_child(&agent_cuda_backend, agent_cuda_backend_create, c->o.device,
			       IMPORT_SLOTS, IMPORT_EXPERT, sock);
}

int cmd_import(struct check *c, const char *self)
{
	unsigned char *expect = malloc(IMPORT_EXPERT), *scratch = malloc(IMPORT_EXPERT);
	struct moecache_bank_map m;
	struct dc_export_msg msg;
	int fd = -1, status = 0, ret, bad = 0;
	pid_t pid;

	if (!expect || !scratch)
		return -ENOMEM;
	ret = dc_run_exporter(self, c->o.device, &msg, &fd, &pid, &status);
	if (ret || msg.status || fd < 0) {
		dc_record(&c->rep, "import.export", false,
			  "the exporting process failed: %s (status %d)",
			  ret ? "no message" : msg.err, status);
		goto out;
	}
	dc_record(&c->rep, "import.export", WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "process %d made and filled a bank of %u slots, sent its fd, exited", (int)pid,
		  IMPORT_SLOTS);
	msg.desc.fd = fd;
	/* The client's import, after the exporter is gone. */
	bank_map_from(&m, &msg.desc, IMPORT_SLOTS, IMPORT_EXPERT);
	ret = mc_cuda_bank_import(&m);
	own_ctx(c);
	if (ret) {
		dc_record(&c->rep, "import.client", false, "%s", moecache_bank_import_error());
		goto out_fd;
	}
	for (uint32_t s = 0; s < IMPORT_SLOTS; s++) {
		dc_fill_pattern(expect, IMPORT_EXPERT, DC_EXPORT_PATTERN + s);
		bad += !device_equals(c, moecache_bank_slot_addr(&m, s), expect, IMPORT_EXPERT,
				      scratch);
	}
	dc_record(&c->rep, "import.client", bad == 0,
		  "another process's bank imported read-only: %d of %u slots differ", bad,
		  IMPORT_SLOTS);
	/* A new agent adopts the same fd (warm restart) and copies: the client sees it. */
	{
		unsigned char *host = dc_host_region(IMPORT_EXPERT);
		struct moecache_bank desc = msg.desc;
		struct be b = {0};

		desc.fd = dup(fd);
		ret = dc_bank_adopt(&b, &agent_cuda_backend, agent_cuda_backend_create, &desc,
				    IMPORT_SLOTS, IMPORT_EXPERT, c->err, sizeof(c->err));
		if (!ret && !host)
			ret = -ENOMEM;
		if (!ret) {
			dc_fill_pattern(host, IMPORT_EXPERT, 999);
			ret = be_copy(&b, 3, host, 0);
			if (!ret)
				ret = be_wait(&b, 1, 10);
			own_ctx(c);
			dc_record(
			    &c->rep, "import.adopt",
			    ret == 0 && device_equals(c, moecache_bank_slot_addr(&m, 3), host,
						      IMPORT_EXPERT, scratch),
			    "a new backend adopted the bank, its copy is seen by the client (%d)",
			    ret);
		} else {
			dc_record(&c->rep, "import.adopt", false, "%s",
				  host ? c->err : strerror(ENOMEM));
		}
		be_close(c, &b);
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
	host = dc_host_region(n_idx * rec_bytes);
	y_ref = calloc(n_out, sizeof(float));
	y_gpu = calloc(n_out, sizeof(float));
	h_ref = calloc((size_t)n_tokens * top_k * shape.d_ff, sizeof(float));
	if (!host || !y_ref || !y_gpu || !h_ref) {
		dc_record(&c->rep, name, false, "out of memory");
		return;
	}
	for (uint32_t li = 0; li < n_layers; li++)
		for (uint32_t e = 0; e < n_experts; e++)
			moe_gen_expert(host + (li * n_experts + e) * rec_bytes, rec_bytes, &shape,
				       GEN_SEED, li, e);
	ret = be_open(c, &b, n_slots, rec_bytes, host, n_idx * rec_bytes, 2);
	if (ret) {
		dc_record(&c->rep, name, false, "bank: %s", c->err);
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
		dc_record(&c->rep, name, false, "filling or importing the bank failed (%d): %s",
			  ret, moecache_bank_import_error());
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
	dc_record(
	    &c->rep, dtype == MOE_DTYPE_BF16 ? "kernels.remap.bf16_run" : "kernels.remap.f32_run",
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
	dc_record(&c->rep, name, ret == 0 && bit_same == n_out,
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

int cmd_kernels(struct check *c)
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

/* ---- peer: banks on two devices ---- */

/*
 * Banks on --device and --peer-device: the backend's peer probe against
 * cuDeviceCanAccessPeer, then a slot filled device to device where the
 * driver reports peer access (with the host's copy of the expert wiped
 * first, so the bytes can only come from the other bank), or from the
 * host pages where it does not.
 */
int cmd_peer(struct check *c)
{
	const uint32_t n_slots = 4;
	const uint64_t e_bytes = 4u << 20;
	int count = 0, other = c->o.peer_device >= 0 ? c->o.peer_device : c->o.device + 1;
	unsigned char *host, *scratch;
	bool driver_peer, peer;
	struct be dst, src;
	int can = 0, ret;

	c->cu.cuDeviceGetCount(&count);
	if (count < 2 || other >= count || other == c->o.device) {
		printf("SKIP peer: needs two devices (%d visible, --device %d, --peer-device %d)\n",
		       count, c->o.device, other);
		return EXIT_SKIP;
	}
	host = dc_host_region(2 * e_bytes);
	scratch = malloc(e_bytes);
	if (!host || !scratch)
		return -ENOMEM;
	dc_fill_pattern(host, e_bytes, 3);
	dc_fill_pattern(host + e_bytes, e_bytes, 3);
	ret = be_open_on(c, &src, other, n_slots, e_bytes, host, 2 * e_bytes, c->o.queues);
	if (ret) {
		dc_record(&c->rep, "peer.bank", false, "device %d: %s", other, c->err);
		goto out;
	}
	ret = be_open_on(c, &dst, c->o.device, n_slots, e_bytes, host, 2 * e_bytes, c->o.queues);
	if (ret) {
		dc_record(&c->rep, "peer.bank", false, "device %d: %s", c->o.device, c->err);
		goto out_src;
	}
	if (!CU(cuDeviceCanAccessPeer(&can, (cu_device)c->o.device, (cu_device)other)))
		goto out_dst;
	driver_peer = can != 0;
	peer = agent_cuda_backend.can_peer(dst.priv, src.priv);
	own_ctx(c);
	dc_record(&c->rep, "peer.probe", peer == driver_peer,
		  "device %d <- %d: the backend says %s, cuDeviceCanAccessPeer says %s",
		  c->o.device, other, peer ? "peer" : "no peer", driver_peer ? "peer" : "no peer");
	ret = be_copy(&src, 1, host, 0);
	if (!ret)
		ret = be_wait(&src, 1, 30);
	own_ctx(c);
	if (ret) {
		dc_record(&c->rep, "peer.fill", false, "filling device %d's slot 1: %d", other,
			  ret);
		goto out_dst;
	}
	if (peer)
		memset(host, 0, e_bytes); /* only the other bank holds the expert now */
	ret = dc_bank_fill_from(&dst, &src, peer, 2, 1, host + e_bytes);
	own_ctx(c);
	dc_record(&c->rep, peer ? "peer.copy" : "peer.host_path",
		  !ret && device_equals(c, agent_gpu_backend_slot_addr(dst.priv, 2), host + e_bytes,
					e_bytes, scratch),
		  "%s into device %d's slot 2: %s",
		  peer ? "device to device" : "from the host pages", c->o.device,
		  ret ? strerror(-ret) : "bytes as expected");
out_dst:
	be_close(c, &dst);
out_src:
	be_close(c, &src);
out:
	munmap(host, 2 * e_bytes);
	free(scratch);
	return 0;
}
