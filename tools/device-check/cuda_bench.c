// SPDX-License-Identifier: MIT
/*
 * moecache-cuda-check's benchmarks, each a figure: bench-copy, bench-decode
 * (and pool-setup, which prepares the driver path of bench-decode).
 */
#include "cuda_check.h"
#include "decode_slots.h"

/*
 * The policy of bench-decode's bank: LRU, the baseline every hit rate of
 * moecache-trace sim is quoted against, so the two can be compared.
 */
#define DECODE_POLICY "lru"

/* ---- bench-copy ---- */

static double median3(double a, double b, double d)
{
	return a > b ? (b > d ? b : (a > d ? d : a)) : (a > d ? a : (b > d ? d : b));
}

int cmd_bench_copy(struct check *c)
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
		double t0 = dc_now_s(), gbs;

		c->cu.cuMemcpyHtoD(dev, pinned, peak_bytes);
		gbs = peak_bytes / (dc_now_s() - t0) / 1e9;
		best_sync = gbs > best_sync ? gbs : best_sync;
		t0 = dc_now_s();
		c->cu.cuMemcpyHtoDAsync(dev, pinned, peak_bytes / 2, s[0]);
		c->cu.cuMemcpyHtoDAsync(dev + peak_bytes / 2, (char *)pinned + peak_bytes / 2,
					peak_bytes / 2, s[1]);
		c->cu.cuStreamSynchronize(s[0]);
		c->cu.cuStreamSynchronize(s[1]);
		gbs = peak_bytes / (dc_now_s() - t0) / 1e9;
		best_async = gbs > best_async ? gbs : best_async;
	}
	c->cu.cuStreamDestroy(s[0]);
	c->cu.cuStreamDestroy(s[1]);
	c->cu.cuMemFree(dev);
	c->cu.cuMemFreeHost(pinned);
	dc_figure(&c->rep, "h2d_peak_sync_gbs", best_sync);
	dc_figure(&c->rep, "h2d_peak_two_streams_gbs", best_async);
	dc_record(&c->rep, "bench.h2d_peak", best_sync > 0,
		  "cuMemcpyHtoD from pinned memory: %.1f GB/s, two streams %.1f GB/s", best_sync,
		  best_async);

	/* The agent: n experts through the backend, registered host pages, 2 and 4 streams. */
	host = dc_host_region(n * e_bytes);
	if (!host)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		memset(host + i * e_bytes, (int)i, e_bytes);
	for (int q = 0; q < 2; q++) {
		struct be b;
		char fig[64];
		int bad = 0;

		if (be_open(c, &b, n, e_bytes, host, n * e_bytes, queue_counts[q])) {
			dc_record(&c->rep, "bench.agent_h2d", false, "%s", c->err);
			break;
		}
		/* A warm-up round (registration, first touch), then three measured ones. */
		for (int rep = -1; rep < 3; rep++) {
			double t0 = dc_now_s();

			for (uint32_t i = 0; i < n; i++)
				bad += be_copy(&b, i, host + i * e_bytes, 0) != 0;
			bad += be_wait(&b, n, 60) != 0;
			if (rep >= 0)
				agent[rep] = n * e_bytes / (dc_now_s() - t0) / 1e9;
		}
		be_close(c, &b);
		snprintf(fig, sizeof(fig), "agent_h2d_%ustreams_gbs", queue_counts[q]);
		dc_figure(&c->rep, fig, median3(agent[0], agent[1], agent[2]));
		dc_record(&c->rep, fig, bad == 0,
			  "%u copies of %u MiB on %u streams: %.1f GB/s median, %.0f%% of the "
			  "cuMemcpyHtoD peak",
			  n, c->o.expert_mib, queue_counts[q],
			  median3(agent[0], agent[1], agent[2]),
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

static double run_decode(struct check *c, const struct kmod *k, struct model *m, const char *mode,
			 uint32_t percent, json_object *res)
{
	struct step_bufs s = {0};
	uint32_t slots[64];
	double t0, secs = -1;
	bool uva = !strcmp(mode, "uva"), resident = !strcmp(mode, "resident");
	cu_deviceptr bank = 0;
	uint64_t stride = m->rec_bytes, bytes_copied = 0;
	uint32_t n_slots = (uint32_t)m->n_idx, missed[64];
	struct decode_slots r = {0};
	int err;
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
			dc_record(&c->rep, "decode.bank", false, "%s", c->err);
			goto out;
		}
		bank_map_from(&bm, &b.desc, n_slots, m->rec_bytes);
		if (mc_cuda_bank_import(&bm)) {
			dc_record(&c->rep, "decode.import", false, "%s",
				  moecache_bank_import_error());
			goto out;
		}
		own_ctx(c);
		bank = moecache_bank_slot_addr(&bm, 0);
		stride = bm.slot_stride;
		err = decode_slots_init(&r, DECODE_POLICY, m->n_layers, m->n_experts, n_slots,
					m->top_k);
		if (err) {
			dc_record(&c->rep, "decode.slots", false, "slot choice (%s): %s",
				  DECODE_POLICY, strerror(-err));
			goto out;
		}
	}
	t0 = dc_now_s();
	for (uint32_t step = 0; step < m->t.n_steps; step++) {
		for (uint32_t l = 0; l < m->n_layers; l++) {
			const uint32_t *ids = trace_at(&m->t, step, l);

			if (resident || uva) {
				for (uint32_t kk = 0; kk < m->top_k; kk++)
					slots[kk] = ids[kk] == MOECACHE_NONE
							? MOECACHE_NONE
							: l * m->n_experts + ids[kk];
			} else {
				int misses =
				    decode_slots_layer(&r, l, ids, m->top_k, slots, missed);

				if (misses < 0) {
					dc_record(&c->rep, "decode.slots", false,
						  "the slot choice broke a rule");
					goto out;
				}
				/* A victim may still be read by an earlier layer. */
				if (misses)
					c->cu.cuStreamSynchronize(s.stream);
				for (int i = 0; i < misses; i++) {
					uint32_t idx = l * m->n_experts + ids[missed[i]];

					be_copy(&b, slots[missed[i]], m->host + idx * m->rec_bytes,
						0);
					bytes_copied += m->rec_bytes;
				}
				/* A demand miss: the layer waits for its copies (as ACQUIRE with
				 * WAIT). */
				if (misses && be_wait(&b, (uint32_t)misses, 30)) {
					dc_record(&c->rep, "decode.copies", false,
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
	secs = dc_now_s() - t0;
	json_object_object_add(res, "steps", json_object_new_int((int)m->t.n_steps));
	json_object_object_add(res, "seconds", json_object_new_double(secs));
	json_object_object_add(res, "slots", json_object_new_int((int)n_slots));
	if (r.policy) {
		json_object_object_add(res, "policy", json_object_new_string(DECODE_POLICY));
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
	decode_slots_free(&r);
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
		dc_record(&c->rep, "decode.driver", false, "attach to pool %s: %s", c->o.pool,
			  strerror(-ret));
		return -1;
	}
	/* The agent may still be making the bank. */
	deadline = dc_now_s() + 30;
	while ((ret = moecache_bank_import(mc, &bm)) == -ENODATA && dc_now_s() < deadline)
		usleep(100000);
	own_ctx(c);
	if (ret) {
		dc_record(&c->rep, "decode.driver", false, "bank import: %s%s%s", strerror(-ret),
			  ret == -EOPNOTSUPP
			      ? ": this libmoecache has no CUDA import hook (lib/bank.c)"
			  : *moecache_bank_import_error() ? ": "
							  : "",
			  ret == -EOPNOTSUPP ? "" : moecache_bank_import_error());
		goto out;
	}
	if (bm.backend != MOECACHE_BACKEND_CUDA || step_bufs_init(c, m, &s)) {
		dc_record(&c->rep, "decode.driver", false,
			  "the pool's bank is not a CUDA bank (backend %u)", bm.backend);
		goto out;
	}
	t0 = dc_now_s();
	for (uint32_t step = 0; step < m->t.n_steps; step++) {
		for (uint32_t l = 0; l < m->n_layers; l++) {
			const uint32_t *ids = trace_at(&m->t, step, l);
			uint32_t n = trace_count(&m->t, step, l);

			for (uint32_t kk = n; kk < m->top_k; kk++)
				slots[kk] = MOECACHE_NONE;
			ret = moecache_bank_acquire(mc, &bm, s.stream, l, ids, n, slots,
						    MOECACHE_ACQ_WAIT, 10000, NULL);
			if (ret) {
				dc_record(&c->rep, "decode.driver", false, "acquire: %s (%s)",
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
				dc_record(&c->rep, "decode.driver", false, "release: %s (%s)",
					  strerror(-ret), moecache_bank_error(&bm));
				goto out;
			}
		}
		if (!CU(cuStreamSynchronize(s.stream)))
			goto out;
	}
	moecache_bank_release_flush(&bm);
	secs = dc_now_s() - t0;
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

int cmd_bench_decode(struct check *c)
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
	host = dc_host_region(m.n_idx * m.rec_bytes);
	if (!host)
		return -ENOMEM;
	model_generate(&m, host);
	if (!strcmp(c->o.mode, "driver")) {
		json_object *r = json_object_new_object();
		double sps = run_decode_driver(c, &k, &m, r);

		if (sps > 0) {
			dc_figure(&c->rep, "decode_driver_steps_per_s", sps);
			json_object_object_add(
			    dc_record(&c->rep, "decode_driver_steps_per_s", true,
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
				dc_figure(&c->rep, fig, sps);
			json_object_object_add(
			    dc_record(&c->rep, fig, sps > 0, "%.1f steps/s (%s)", sps,
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
			dc_figure(&c->rep, fig, sps);
		json_object_object_get_ex(r, "hit_rate", &hit);
		if (hit)
			dc_figure(&c->rep, hit_fig, json_object_get_double(hit));
		json_object_object_add(
		    dc_record(&c->rep, fig, sps > 0,
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

int cmd_pool_setup(struct check *c, uint32_t percent)
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
	dc_record(&c->rep, "pool_setup", ret == 0,
		  "pool %s: %u layers x %u experts of %" PRIu64 " KiB, %u slots: %s", c->o.pool,
		  m.n_layers, m.n_experts, m.rec_bytes >> 10, req.n_slots,
		  ret ? strerror(-ret) : "loaded");
	dense_trace_free(&m.t);
	return 0;
}

/* ---- main ---- */
