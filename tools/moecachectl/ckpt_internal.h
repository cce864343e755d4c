/* SPDX-License-Identifier: MIT */
/* What the checkpoint readers share (not part of the ckpt.h API). */
#ifndef MOECACHE_CTL_CKPT_INTERNAL_H
#define MOECACHE_CTL_CKPT_INTERNAL_H

#include <stdint.h>

#include "ckpt.h"

__attribute__((format(printf, 3, 4))) int ckpt_fail(struct ckpt_error *err, int ret,
						    const char *fmt, ...);
/* Opens path read-only and appends it to c->files; *index gets its index. */
int ckpt_add_file(struct ckpt *c, const char *path, uint32_t *index, struct ckpt_error *err);
/* Appends a zeroed tensor named name (copied) to c; NULL on ENOMEM. */
struct ckpt_tensor *ckpt_add_tensor(struct ckpt *c, const char *name, uint32_t file);
/* Checks that no two tensors of file overlap and that all lie inside it. */
int ckpt_check_extents(const struct ckpt *c, uint32_t file, struct ckpt_error *err);
/* a * b, or -EOVERFLOW */
int ckpt_mul(uint64_t a, uint64_t b, uint64_t *out);

#endif /* MOECACHE_CTL_CKPT_INTERNAL_H */
