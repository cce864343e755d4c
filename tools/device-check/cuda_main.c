// SPDX-License-Identifier: MIT
/*
 * moecache-cuda-check: the CUDA pieces on a real NVIDIA GPU, driven by
 * tools/gpu-check; its checks (checks.c) pass or fail, its benchmarks
 * (bench.c) give figures. Without the module the agent's backend is driven
 * directly, with mmap'd memory standing in for the driver's host pages;
 * with the module (pool-setup, then bench-decode --mode driver) the whole
 * path runs: moecached copies, this process is a client.
 *
 *   info            the device, as the backend sees it
 *   copy            backend copies land, overwrite, and complete only when done
 *   import          a bank exported by another process: client import, then
 *                   adoption by a new "agent" after the exporter exited
 *   kernels         remap and FFN kernels reading the imported bank vs the C references
 *   peer            banks on two devices: the peer probe against the driver, a
 *                   peer copy's bytes, and the host path where there is no peer
 *   bench-copy      agent H2D throughput against cuMemcpyHtoD from pinned memory
 *   bench-decode    decode steps/s over a trace: bank at some % of the experts,
 *                   all resident, zero-copy from host memory (UVA); or the driver path
 *   pool-setup      create and load a pool for the driver path (root)
 *
 * Each check prints "PASS name ..." or "FAIL name ..."; --json FILE writes
 * every result and figure. Exit: 0 all passed, 1 a check failed, 2 no usable
 * GPU or bad usage, 77 nothing to run (no kernel image).
 */
#include "cuda_check.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: moecache-cuda-check [--device N] [--json FILE] [--queues N] [--peer-device N]\n"
	    "         [--trace FILE] [--steps N] [--d-model N] [--d-ff N] [--percent P]...\n"
	    "         [--expert-mib N] [--copies N] [--mode direct|driver] [--pool NAME]\n"
	    "         info|copy|import|kernels|peer|bench-copy|bench-decode|pool-setup\n");
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
	    {"device", required_argument, NULL, 'd'},
	    {"json", required_argument, NULL, 'j'},
	    {"trace", required_argument, NULL, 't'},
	    {"steps", required_argument, NULL, 's'},
	    {"d-model", required_argument, NULL, 'm'},
	    {"d-ff", required_argument, NULL, 'f'},
	    {"percent", required_argument, NULL, 'p'},
	    {"pool", required_argument, NULL, 'P'},
	    {"mode", required_argument, NULL, 'M'},
	    {"expert-mib", required_argument, NULL, 'e'},
	    {"copies", required_argument, NULL, 'c'},
	    {"queues", required_argument, NULL, 'q'},
	    {"peer-device", required_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct check c = {.o = {.device = 0,
				.mode = "direct",
				.d_model = 1024,
				.d_ff = 512,
				.expert_mib = 16,
				.copies = 64,
				.queues = 2,
				.peer_device = -1}};
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
		case 'D':
			if (parse_u32(optarg, &v))
				goto bad;
			c.o.peer_device = (int)v;
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
	dc_report_init(&c.rep);
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
		dc_report_finish(&c.rep, "moecache-cuda-check", cmd, NULL);
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

		ret = cmd_import(&c, dc_self_path(self, sizeof(self)));
	} else if (!strcmp(cmd, "kernels"))
		ret = cmd_kernels(&c);
	else if (!strcmp(cmd, "peer"))
		ret = cmd_peer(&c);
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
		c.rep.failed++;
	}
	dc_report_finish(&c.rep, "moecache-cuda-check", cmd, c.o.json);
	if (ret == EXIT_SKIP || ret == EXIT_SETUP)
		return ret;
	return c.rep.failed ? EXIT_FAILED : 0;
bad:
	usage(stderr);
	return EXIT_SETUP;
}
