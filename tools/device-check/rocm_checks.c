// SPDX-License-Identifier: MIT
/*
 * moecache-rocm-check's checks, each PASS or FAIL: info, copy, import, and
 * peer (banks on two GPUs, the peer probe and copies).
 */
#include "rocm_check.h"

int cmd_info(struct check *c)
{
	struct mc_hsakmt_api kmt;
	HsaSystemProperties sys;
	int gpus = 0;

	if (mc_hsakmt_api_load(&kmt, NULL, c->err, sizeof(c->err)) ||
	    kmt.hsaKmtOpenKFD() != HSAKMT_STATUS_SUCCESS) {
		dc_record(&c->rep, "info", false, "%s",
			  c->err[0] ? c->err : "hsaKmtOpenKFD failed");
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
			dc_record(&c->rep, "info", true,
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
		dc_record(&c->rep, "info", false, "the KFD lists no GPU");
	return 0;
}

int cmd_copy(struct check *c)
{
	const uint32_t n_slots = 32, n_experts = 64;
	const uint64_t e_bytes = (3u << 20) + 4096;
	unsigned char *host = dc_host_region(n_experts * e_bytes), *rb = dc_host_region(e_bytes);
	struct be b;
	bool ok = true;
	int ret;

	if (!host || !rb)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_experts; i++)
		dc_fill_pattern(host + i * e_bytes, e_bytes, i);
	ret = be_open(c, &b, n_slots, e_bytes, host, n_experts * e_bytes, 2);
	if (ret) {
		dc_record(&c->rep, "copy.bank", false, "%s", c->err);
		goto out;
	}
	dc_record(&c->rep, "copy.bank", b.desc.fd >= 0 && b.desc.backend == MOECACHE_BACKEND_ROCM,
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
		dc_record(&c->rep, round ? "copy.overwrite" : "copy.fill", ok,
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
		dc_record(&c->rep, "copy.not_done_before_bytes",
			  not_done && !ret && slot_equals(&b, 0, host + 5 * e_bytes, e_bytes, rb),
			  "a copy held half way (fence, then a POLL_REGMEM gate) is not reported "
			  "(%s), then completes (%d)",
			  not_done ? "yes" : "no", ret);
		agent_rocm_backend.set_delay(b.priv, 0);
	}
	dc_bank_close(&b);
out:
	munmap(host, n_experts * e_bytes);
	munmap(rb, e_bytes);
	return 0;
}

#define IMPORT_SLOTS 8u
#define IMPORT_EXPERT (5u << 20)

/* The exporting "agent" (devcheck.h): makes a bank, fills it, hands the fd over, exits. */
int cmd_export_child(struct check *c, int sock)
{
	return dc_export_child(&agent_rocm_backend, agent_rocm_backend_create, c->device,
			       IMPORT_SLOTS, IMPORT_EXPERT, sock);
}

int cmd_import(struct check *c)
{
	unsigned char *expect = malloc(IMPORT_EXPERT), *rb = dc_host_region(IMPORT_EXPERT);
	struct moecache_bank_map m = {.fd = -1};
	struct dc_export_msg msg;
	struct moecache_bank desc;
	struct be b = {0};
	int fd = -1, status = 0, ret, bad = 0;
	char self[PATH_MAX];
	pid_t pid;

	if (!expect || !rb)
		return -ENOMEM;
	ret =
	    dc_run_exporter(dc_self_path(self, sizeof(self)), c->device, &msg, &fd, &pid, &status);
	if (ret || msg.status || fd < 0) {
		dc_record(&c->rep, "import.export", false, "the exporting process failed: %s",
			  ret ? "no message" : msg.err);
		goto out;
	}
	dc_record(&c->rep, "import.export", true,
		  "process %d made, filled and exported a bank, exited", (int)pid);
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
	dc_record(&c->rep, "import.client", ret == 0 && moecache_bank_slot_addr(&m, 1) != 0,
		  "dma-buf imported and mapped at GPU VA %#" PRIx64 ": %s",
		  moecache_bank_slot_addr(&m, 0), ret ? moecache_bank_import_error() : "ok");
	/* A new agent adopts it and reads every slot back. */
	desc = msg.desc;
	desc.fd = dup(fd);
	ret = dc_bank_adopt(&b, &agent_rocm_backend, agent_rocm_backend_create, &desc, IMPORT_SLOTS,
			    IMPORT_EXPERT, c->err, sizeof(c->err));
	if (!ret) {
		for (uint32_t s = 0; s < IMPORT_SLOTS; s++) {
			dc_fill_pattern(expect, IMPORT_EXPERT, DC_EXPORT_PATTERN + s);
			bad += !slot_equals(&b, s, expect, IMPORT_EXPERT, rb);
		}
		dc_record(
		    &c->rep, "import.adopt", bad == 0,
		    "a new backend adopted the bank after the exporter exited: %d of %u slots "
		    "differ",
		    bad, IMPORT_SLOTS);
	} else {
		dc_record(&c->rep, "import.adopt", false, "%s", c->err);
	}
	dc_bank_close(&b);
	mc_rocm_bank_unimport(&m);
	close(m.fd);
	close(fd);
out:
	free(expect);
	munmap(rb, IMPORT_EXPERT);
	return 0;
}

/* ---- peer: banks on two GPUs ---- */

/* Does the KFD list a link from GPU from to GPU to that allows peer DMA (what the backend asks)? */
static int kfd_peer(int from, int to, bool *peer)
{
	struct mc_hsakmt_api kmt;
	HsaSystemProperties sys;
	uint32_t nodes[MC_GPU_MAX_DEVICES], n = 0;
	char err[256];
	int ret = mc_hsakmt_api_load(&kmt, NULL, err, sizeof(err));

	if (ret)
		return ret;
	*peer = false;
	if (kmt.hsaKmtOpenKFD() != HSAKMT_STATUS_SUCCESS) {
		mc_hsakmt_api_unload(&kmt);
		return -ENODEV;
	}
	if (kmt.hsaKmtAcquireSystemProperties(&sys) == HSAKMT_STATUS_SUCCESS) {
		for (uint32_t i = 0; i < sys.NumNodes && n < MC_GPU_MAX_DEVICES; i++) {
			HsaNodeProperties p;

			if (kmt.hsaKmtGetNodeProperties(i, &p) == HSAKMT_STATUS_SUCCESS &&
			    p.NumFComputeCores)
				nodes[n++] = i;
		}
		if (from < (int)n && to < (int)n) {
			HsaIoLinkProperties links[64];
			HsaNodeProperties p;
			uint32_t k = 0;

			if (kmt.hsaKmtGetNodeProperties(nodes[from], &p) == HSAKMT_STATUS_SUCCESS)
				k = p.NumIOLinks < 64 ? p.NumIOLinks : 64;
			if (k && kmt.hsaKmtGetNodeIoLinkProperties(nodes[from], k, links) ==
				     HSAKMT_STATUS_SUCCESS)
				for (uint32_t i = 0; i < k; i++)
					*peer |= links[i].NodeTo == nodes[to] &&
						 !links[i].Flags.ui32.NoPeerToPeerDMA;
		}
		kmt.hsaKmtReleaseSystemProperties();
	}
	kmt.hsaKmtCloseKFD();
	mc_hsakmt_api_unload(&kmt);
	return 0;
}

/*
 * Banks on --device and --peer-device: the backend's peer probe against
 * the KFD's IO links, then a slot filled by SDMA from the other GPU's VRAM
 * where the links allow peer DMA (with the host's copy wiped first, so the
 * bytes can only come from the other bank), or from the host pages where
 * they do not.
 */
int cmd_peer(struct check *c)
{
	const uint32_t n_slots = 4;
	const uint64_t e_bytes = 4u << 20;
	int other = c->peer_device >= 0 ? c->peer_device : c->device + 1;
	unsigned char *host, *readback;
	bool kfd_says, peer;
	struct be dst, src;
	int ret;

	if (other == c->device || kfd_peer(c->device, other, &kfd_says)) {
		printf("SKIP peer: needs two GPUs (--device %d, --peer-device %d)\n", c->device,
		       other);
		return EXIT_SKIP;
	}
	host = dc_host_region(2 * e_bytes);
	readback = malloc(e_bytes);
	if (!host || !readback)
		return -ENOMEM;
	dc_fill_pattern(host, e_bytes, 3);
	dc_fill_pattern(host + e_bytes, e_bytes, 3);
	ret = be_open_on(c, &src, other, n_slots, e_bytes, host, 2 * e_bytes, 2);
	if (ret) {
		dc_record(&c->rep, "peer.bank", false, "GPU %d: %s", other, c->err);
		goto out;
	}
	ret = be_open_on(c, &dst, c->device, n_slots, e_bytes, host, 2 * e_bytes, 2);
	if (ret) {
		dc_record(&c->rep, "peer.bank", false, "GPU %d: %s", c->device, c->err);
		goto out_src;
	}
	peer = agent_rocm_backend.can_peer(dst.priv, src.priv);
	dc_record(&c->rep, "peer.probe", peer == kfd_says,
		  "GPU %d <- %d: the backend says %s, the KFD's links say %s", c->device, other,
		  peer ? "peer" : "no peer", kfd_says ? "peer" : "no peer");
	ret = be_copy(&src, 1, host);
	if (!ret)
		ret = be_wait(&src, 1, 30);
	if (ret) {
		dc_record(&c->rep, "peer.fill", false, "filling GPU %d's slot 1: %d", other, ret);
		goto out_dst;
	}
	if (peer)
		memset(host, 0, e_bytes); /* only the other bank holds the expert now */
	ret = dc_bank_fill_from(&dst, &src, peer, 2, 1, host + e_bytes);
	dc_record(&c->rep, peer ? "peer.copy" : "peer.host_path",
		  !ret && slot_equals(&dst, 2, host + e_bytes, e_bytes, readback),
		  "%s into GPU %d's slot 2: %s",
		  peer ? "SDMA from the other GPU" : "from the host pages", c->device,
		  ret ? strerror(-ret) : "bytes as expected");
out_dst:
	dc_bank_close(&dst);
out_src:
	dc_bank_close(&src);
out:
	munmap(host, 2 * e_bytes);
	free(readback);
	return 0;
}
