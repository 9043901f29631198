/*
 * fs_sync.h - the file system of a writeback domain (fs_sync.c): data that
 * went through the kernel's page cache (a closed file's end) is synced at
 * pc_cache_destroy, so that it reaches the device and its write errors
 * are heard.
 */
#ifndef PC_FS_SYNC_H
#define PC_FS_SYNC_H

#include "lib/util.h"

struct pc_cache;
struct pc_mapping;

/* The mount point of dev's file system, opened (a descriptor for syncfs
 * that sees every error met after now), or -1. */
HIDDEN int fs_sync_open(dev_t dev);
/* m's data went through the kernel's page cache. */
HIDDEN void fs_sync_note_kernel_write(struct pc_mapping *m);
/* fdatasync of m when its domain has no file system descriptor and data
 * of m went through the kernel; 0 or a negative errno. */
HIDDEN int fs_sync_mapping(struct pc_mapping *m);
/* m's descriptor is about to be closed: what fs_sync_mapping would sync
 * at destroy is synced now, while a descriptor can still hear the
 * kernel's error; a failure becomes m's unseen write error. */
HIDDEN void fs_sync_before_close(struct pc_mapping *m);
/* syncfs of every domain data went to through the kernel; the first
 * error (negative errno) or 0. */
HIDDEN int fs_sync_domains(struct pc_cache *c);

#endif
