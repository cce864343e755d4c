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
 *   peer        banks on two GPUs: the peer probe against the KFD's IO links,
 *               an SDMA copy between VRAMs, or the host path without peer DMA
 *   bench-copy  agent H2D throughput over SDMA with 2 and 4 queues
 *
 * The checks (rocm_checks.c) print "PASS name ..." / "FAIL name ...", the
 * benchmarks (rocm_bench.c) give figures; --json FILE writes them all.
 * Exit: 0 all passed, 1 a check failed, 2 no usable GPU or bad usage, 77
 * nothing to run (peer with one GPU).
 */
#include <getopt.h>

#include "rocm_check.h"

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"device", required_argument, NULL, 'd'},	   {"json", required_argument, NULL, 'j'},
	    {"expert-mib", required_argument, NULL, 'e'},  {"copies", required_argument, NULL, 'c'},
	    {"peer-device", required_argument, NULL, 'D'}, {NULL, 0, NULL, 0},
	};
	struct check c = {.expert_mib = 16, .copies = 64, .peer_device = -1};
	const char *cmd;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			c.device = atoi(optarg);
			break;
		case 'D':
			c.peer_device = atoi(optarg);
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
	dc_report_init(&c.rep);
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
		dc_report_finish(&c.rep, "moecache-rocm-check", cmd, NULL);
		return ret;
	}
	if (!strcmp(cmd, "info"))
		ret = cmd_info(&c);
	else if (!strcmp(cmd, "copy"))
		ret = cmd_copy(&c);
	else if (!strcmp(cmd, "import"))
		ret = cmd_import(&c);
	else if (!strcmp(cmd, "peer"))
		ret = cmd_peer(&c);
	else if (!strcmp(cmd, "bench-copy"))
		ret = cmd_bench_copy(&c);
	else
		goto bad;
	if (ret < 0) {
		fprintf(stderr, "moecache-rocm-check: %s: %s\n", cmd, strerror(-ret));
		c.rep.failed++;
	}
	dc_report_finish(&c.rep, "moecache-rocm-check", cmd, c.json);
	if (ret == EXIT_SKIP)
		return ret;
	return c.rep.failed ? EXIT_FAILED : 0;
bad:
	fprintf(stderr, "usage: moecache-rocm-check [--device N] [--json FILE] [--expert-mib N] "
			"[--copies N] [--peer-device N] info|copy|import|peer|bench-copy\n");
	return EXIT_SETUP;
}
