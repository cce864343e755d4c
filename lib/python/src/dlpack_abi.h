/* SPDX-License-Identifier: MIT */
/*
 * The DLPack exchange ABI (version 0.x, the one torch.from_dlpack and
 * numpy.from_dlpack consume), written from its specification: a capsule
 * named "dltensor" holds a DLManagedTensor; the consumer renames it
 * "used_dltensor" and calls deleter when it is done with the memory.
 */
#ifndef MOECACHE_PY_DLPACK_ABI_H
#define MOECACHE_PY_DLPACK_ABI_H

#include <stdint.h>

enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLROCM = 10,
};

enum {
	kDLInt = 0,
	kDLUInt = 1,
	kDLFloat = 2,
};

typedef struct {
	int32_t device_type;
	int32_t device_id;
} DLDevice;

typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides; /* NULL: compact, row-major */
	uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif /* MOECACHE_PY_DLPACK_ABI_H */
