// SPDX-License-Identifier: MIT
/* moecache-rocm-check's benchmarks, each a figure: bench-copy. */
#include "rocm_check.h"

int cmd_bench_copy(struct check *c)
{
	const uint64_t e_bytes = (uint64_t)c->expert_mib << 20;
	const uint32_t n = c->copies;
	const uint32_t queues[2] = {2, 4};
	unsigned char *host = dc_host_region(n * e_bytes);

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
			dc_record(&c->rep, "bench.agent_h2d", false, "%s", c->err);
			break;
		}
		for (int rep = -1; rep < 3; rep++) {
			double t0 = dc_now_s(), gbs;

			for (uint32_t i = 0; i < n; i++)
				bad += be_copy(&b, i, host + i * e_bytes) != 0;
			bad += be_wait(&b, n, 60) != 0;
			gbs = n * e_bytes / (dc_now_s() - t0) / 1e9;
			if (rep >= 0 && gbs > best)
				best = gbs;
		}
		dc_bank_close(&b);
		snprintf(fig, sizeof(fig), "agent_sdma_%uqueues_gbs", queues[q]);
		json_object_object_add(c->rep.figures, fig, json_object_new_double(best));
		dc_record(&c->rep, fig, bad == 0,
			  "%u copies of %u MiB over %u SDMA queues: %.1f GB/s best", n,
			  c->expert_mib, queues[q], best);
	}
	munmap(host, n * e_bytes);
	return 0;
}
