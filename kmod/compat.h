/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels moecache builds on, from Debian 12's 6.1
 * to the newest Debian kernel (docs/kernels.md). Every version test of the
 * driver lives here; the rest of kmod/ calls the moecache_ names below, or
 * the newest kernel's own name where this file defines it for the older.
 * Where a stable backport makes LINUX_VERSION_CODE lie, the test is on the
 * feature itself (a macro it defines).
 */
#ifndef _MOECACHE_COMPAT_H
#define _MOECACHE_COMPAT_H

#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mmzone.h>
#include <linux/slab.h>
#include <linux/version.h>
#include <net/genetlink.h>

/*
 * The largest order alloc_pages() accepts, inclusive.
 * 6.4: MAX_ORDER made inclusive ("mm, treewide: redefine MAX_ORDER
 * sanely"); 6.8: renamed MAX_PAGE_ORDER ("mm, treewide: rename MAX_ORDER
 * to MAX_PAGE_ORDER").
 */
#if defined(MAX_PAGE_ORDER)
#define MOECACHE_MAX_PAGE_ORDER	MAX_PAGE_ORDER
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define MOECACHE_MAX_PAGE_ORDER	MAX_ORDER
#else
#define MOECACHE_MAX_PAGE_ORDER	(MAX_ORDER - 1)
#endif

/*
 * vma->vm_flags is read-only from 6.3 on and changed through wrappers
 * ("mm: introduce vma->vm_flags wrapper functions").
 * 6.1.y has no backport of them.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
static inline void moecache_vm_flags_set(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
	vm_flags_set(vma, flags);
}

static inline void moecache_vm_flags_clear(struct vm_area_struct *vma,
					   vm_flags_t flags)
{
	vm_flags_clear(vma, flags);
}
#else
static inline void moecache_vm_flags_set(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void moecache_vm_flags_clear(struct vm_area_struct *vma,
					   vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

/*
 * A dump's parsed attributes.
 * 6.6: struct genl_dumpit_info holds a struct genl_info and loses its
 * own attrs; genl_info_dump() returns that genl_info.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
static inline struct nlattr **moecache_genl_dump_attrs(struct netlink_callback *cb)
{
	return genl_info_dump(cb)->attrs;
}
#else
static inline struct nlattr **moecache_genl_dump_attrs(struct netlink_callback *cb)
{
	return genl_dumpit_info(cb)->attrs;
}
#endif

/*
 * Maps a file the driver hands on (a client's view of a CPU bank maps the
 * bank's memfd).
 * 6.17: call_mmap() renamed vfs_mmap(), which also serves a file whose
 * shmem has .mmap_prepare rather than .mmap ("mm: rename
 * call_mmap/mmap_prepare to vfs_mmap/mmap_prepare").
 */
static inline int moecache_call_mmap(struct file *file,
				     struct vm_area_struct *vma)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0)
	return vfs_mmap(file, vma);
#else
	return call_mmap(file, vma);
#endif
}

/*
 * Importing the DMA_BUF symbol namespace (dma_buf_get()).
 * 6.13: the namespace is a string literal ("module: Convert symbol
 * namespace to string literal").
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define MOECACHE_IMPORT_NS_DMA_BUF()	MODULE_IMPORT_NS("DMA_BUF")
#else
#define MOECACHE_IMPORT_NS_DMA_BUF()	MODULE_IMPORT_NS(DMA_BUF)
#endif

/*
 * One zeroed object of P's type (type-checked from 7.0 on).
 * 7.0: kmalloc_obj() and family ("slab: Introduce kmalloc_obj() and
 * family"), which checkpatch asks for; defined here for the older kernels.
 */
#ifndef kzalloc_obj
#define kzalloc_obj(P, GFP)	kzalloc(sizeof(P), GFP)
#endif

#endif /* _MOECACHE_COMPAT_H */
