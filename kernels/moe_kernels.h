/*
 * moecache device kernels: the layouts and argument blocks shared by the
 * C references (kernels/ref), the CUDA kernels (kernels/cuda) and the HIP
 * kernels (kernels/hip). Plain C types only, so that C, CUDA and HIP code
 * see the same bytes. kernels/README.md describes the numerics.
 *
 * Kernels (extern "C", stable names; each takes its argument block by
 * value, so a launcher passes { &args } as the parameter array):
 *
 *   moe_remap(struct moe_remap_args)
 *	grid (1, 1, 1), block (MOE_REMAP_THREADS, 1, 1), no dynamic shared
 *	memory. slots[i] = map[layer][experts[i] - expert_begin], or
 *	MOECACHE_NONE for ids outside [expert_begin, expert_end); each
 *	missing expert is appended once per call to the miss ring.
 *
 *   moe_ffn_up_bf16(struct moe_ffn_args), moe_ffn_up_f32(struct moe_ffn_args)
 *	grid from moe_ffn_up_grid(), block (MOE_FFN_THREADS, 1, 1).
 *	h[t][k][:] = silu(gate x_t) * (up x_t) for every (token, k) whose
 *	slot is valid.
 *
 *   moe_ffn_down_bf16(struct moe_ffn_args), moe_ffn_down_f32(struct moe_ffn_args)
 *	grid from moe_ffn_down_grid(), block (MOE_FFN_THREADS, 1, 1), on
 *	the same stream after moe_ffn_up_*. y[t] += sum over k in order of
 *	w[t][k] * (down h[t][k]).
 *
 * Launchers check an argument block with moe_remap_args_check() or
 * moe_ffn_args_check() first: the kernels cannot report errors, they only
 * stay inside the memory the arguments describe.
 */
#ifndef MOE_KERNELS_H
#define MOE_KERNELS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "moecache.h"

#if defined(__CUDACC__) || defined(__HIP__)
#define MOE_HD __host__ __device__
#else
#define MOE_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Every tensor of an expert record starts at a multiple of this. */
#define MOE_TENSOR_ALIGN 256u
/* d_model and d_ff are multiples of this: one 16-byte bf16 load. */
#define MOE_DIM_MULTIPLE 8u
/* Dot products: lanes of partial sums, and consecutive elements per step. */
#define MOE_DOT_LANES 32u
#define MOE_DOT_CHUNK 8u

#define MOE_REMAP_THREADS 256u
/* Local experts below this are deduplicated within one remap call. */
#define MOE_REMAP_DEDUP_MAX 4096u
/* Distinct misses one remap call can report; more are counted as overflow. */
#define MOE_REMAP_LIST_MAX 4096u

#define MOE_FFN_THREADS 256u
/* One warp (32 lanes) computes one output row. */
#define MOE_FFN_ROWS_PER_BLOCK (MOE_FFN_THREADS / MOE_DOT_LANES)
/* Grid y limit of both CUDA and HIP. */
#define MOE_GRID_Y_MAX 65535u

enum moe_dtype {
	MOE_DTYPE_BF16 = 1,
	MOE_DTYPE_F32 = 2,
};

enum moe_tensor {
	MOE_TENSOR_GATE = 0, /* d_ff x d_model */
	MOE_TENSOR_UP = 1,   /* d_ff x d_model */
	MOE_TENSOR_DOWN = 2, /* d_model x d_ff */
	MOE_TENSOR_COUNT = 3,
};

MOE_HD static inline uint32_t moe_dtype_bytes(uint32_t dtype)
{
	return dtype == MOE_DTYPE_BF16 ? 2u : dtype == MOE_DTYPE_F32 ? 4u : 0u;
}

/*
 * One expert record: gate, then up, then down, each row-major, each at a
 * multiple of MOE_TENSOR_ALIGN bytes from the start of the record; the gaps
 * are zero. bytes is the packed size (a pool rounds it up to a page).
 */
struct moe_expert_layout {
	uint64_t off[MOE_TENSOR_COUNT];
	uint64_t bytes;
};

MOE_HD static inline uint64_t moe_align_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align;
}

MOE_HD static inline void moe_expert_layout_get(uint32_t dtype, uint32_t d_model, uint32_t d_ff,
						struct moe_expert_layout *l)
{
	const uint64_t tensor = (uint64_t)d_model * d_ff * moe_dtype_bytes(dtype);
	const uint64_t step = moe_align_up(tensor, MOE_TENSOR_ALIGN);

	l->off[MOE_TENSOR_GATE] = 0;
	l->off[MOE_TENSOR_UP] = step;
	l->off[MOE_TENSOR_DOWN] = 2 * step;
	l->bytes = 2 * step + tensor;
}

/*
 * Miss ring: a header followed by capacity entries, in host memory mapped
 * into the device. Producers (kernels, or the reference) reserve a range
 * [head, head + n) with one compare-and-swap on head, never past
 * tail + capacity, write each entry, then store its seq = index + 1 with
 * release order. The one consumer reads entry tail once its seq equals
 * tail + 1, then advances tail. Counters wrap modulo 2^32; capacity is a
 * power of two. Misses that do not fit are counted in overflow, never
 * written. Ids outside the local expert range are counted in out_of_range.
 */
struct moe_miss_entry {
	uint32_t seq; /* index + 1 once layer and expert are valid */
	uint32_t layer;
	uint32_t expert; /* global id */
	uint32_t pad;
};

struct moe_miss_ring {
	uint32_t head; /* next index to reserve: producers */
	uint32_t tail; /* next index to read: the consumer */
	uint32_t capacity;
	uint32_t overflow;
	uint32_t out_of_range;
	uint32_t pad[3];
	/* struct moe_miss_entry entries[capacity] */
};

MOE_HD static inline struct moe_miss_entry *moe_miss_ring_entries(struct moe_miss_ring *r)
{
	return (struct moe_miss_entry *)(r + 1);
}

static inline size_t moe_miss_ring_bytes(uint32_t capacity)
{
	return sizeof(struct moe_miss_ring) + (size_t)capacity * sizeof(struct moe_miss_entry);
}

/*
 * moe_remap arguments. Device addresses are carried as uint64_t so that
 * the block has one layout everywhere; the reference takes host addresses.
 */
struct moe_remap_args {
	uint64_t map;	  /* const uint32_t[n_layers][expert_end - expert_begin] */
	uint64_t experts; /* const uint32_t[n_tokens][top_k]: global ids */
	uint64_t slots;	  /* uint32_t[n_tokens][top_k]: out, slot or MOECACHE_NONE */
	uint64_t ring;	  /* struct moe_miss_ring *, host-mapped; 0: misses not reported */
	uint32_t n_layers;
	uint32_t expert_begin;
	uint32_t expert_end;
	uint32_t layer;
	uint32_t n_tokens;
	uint32_t top_k;
};

/*
 * moe_ffn_* arguments. Slot s of the bank starts at bank + s * slot_stride
 * and holds one expert record (struct moe_expert_layout) of dtype. A slot
 * id of MOECACHE_NONE, or >= n_slots, contributes nothing (another rank's
 * expert, or one the caller computes elsewhere). x, h and y are fp32 and
 * 16-byte aligned.
 */
struct moe_ffn_args {
	uint64_t bank;
	uint64_t slot_stride; /* a multiple of MOE_TENSOR_ALIGN */
	uint64_t x;	      /* const float[n_tokens][d_model] */
	uint64_t slots;	      /* const uint32_t[n_tokens][top_k] */
	uint64_t weights;     /* const float[n_tokens][top_k]: router gate weights */
	uint64_t h;	      /* float[n_tokens][top_k][d_ff]: scratch, up -> down */
	uint64_t y;	      /* float[n_tokens][d_model]: accumulated into */
	uint32_t n_slots;
	uint32_t dtype; /* enum moe_dtype; each kernel acts only on its own */
	uint32_t d_model;
	uint32_t d_ff;
	uint32_t n_tokens;
	uint32_t top_k;
};

/* 0, or -EINVAL when the block would make moe_remap read or write out of bounds. */
static inline int moe_remap_args_check(const struct moe_remap_args *a)
{
	const uint64_t n = (uint64_t)a->n_tokens * a->top_k;

	if (a->expert_begin > a->expert_end || a->layer >= a->n_layers || a->top_k == 0)
		return -EINVAL;
	if (n > UINT32_MAX)
		return -EINVAL;
	if (n && (!a->map || !a->experts || !a->slots))
		return -EINVAL;
	return 0;
}

/* 0, or -EINVAL when the block does not describe a valid FFN launch. */
static inline int moe_ffn_args_check(const struct moe_ffn_args *a)
{
	struct moe_expert_layout l;
	const uint64_t n = (uint64_t)a->n_tokens * a->top_k;

	if (!moe_dtype_bytes(a->dtype) || a->top_k == 0 || a->n_slots == 0)
		return -EINVAL;
	if (!a->d_model || !a->d_ff || a->d_model % MOE_DIM_MULTIPLE || a->d_ff % MOE_DIM_MULTIPLE)
		return -EINVAL;
	if ((a->d_model + MOE_FFN_ROWS_PER_BLOCK - 1) / MOE_FFN_ROWS_PER_BLOCK > MOE_GRID_Y_MAX ||
	    (a->d_ff + MOE_FFN_ROWS_PER_BLOCK - 1) / MOE_FFN_ROWS_PER_BLOCK > MOE_GRID_Y_MAX)
		return -EINVAL;
	moe_expert_layout_get(a->dtype, a->d_model, a->d_ff, &l);
	if (a->slot_stride < l.bytes || a->slot_stride % MOE_TENSOR_ALIGN)
		return -EINVAL;
	if (n > INT32_MAX)
		return -EINVAL;
	if (!a->bank || !a->x || !a->slots || !a->weights || !a->h || !a->y)
		return -EINVAL;
	if (a->bank % 16 || a->x % 16 || a->h % 16 || a->y % 16)
		return -EINVAL;
	return 0;
}

/* Bytes of the h scratch buffer of one FFN launch. */
static inline uint64_t moe_ffn_scratch_bytes(const struct moe_ffn_args *a)
{
	return (uint64_t)a->n_tokens * a->top_k * a->d_ff * sizeof(float);
}

/* Grid of moe_ffn_up_*: x = (token, k) pairs, y = tiles of d_ff rows. Launch nothing if x is 0. */
static inline void moe_ffn_up_grid(const struct moe_ffn_args *a, uint32_t grid[3])
{
	grid[0] = a->n_tokens * a->top_k;
	grid[1] = (a->d_ff + MOE_FFN_ROWS_PER_BLOCK - 1) / MOE_FFN_ROWS_PER_BLOCK;
	grid[2] = 1;
}

/* Grid of moe_ffn_down_*: x = tokens, y = tiles of d_model rows. Launch nothing if x is 0. */
static inline void moe_ffn_down_grid(const struct moe_ffn_args *a, uint32_t grid[3])
{
	grid[0] = a->n_tokens;
	grid[1] = (a->d_model + MOE_FFN_ROWS_PER_BLOCK - 1) / MOE_FFN_ROWS_PER_BLOCK;
	grid[2] = 1;
}

#ifdef __cplusplus
}
#endif

#endif /* MOE_KERNELS_H */
