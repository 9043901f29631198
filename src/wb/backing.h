/*
 * backing.h - the backing file's size and allocation (backing.c): space
 * reserved for writes that extend the file (so that a full file system
 * fails the write, not a later writeback), allocation ahead of writeback,
 * the exact size at fsync and close, a closed file's end written
 * through the kernel's page cache.
 */
#ifndef PC_BACKING_H
#define PC_BACKING_H

#include "lib/util.h"

struct pc_mapping;

/* Reserve space for a write of [off, end) that extends the file (fallocate
 * KEEP_SIZE): -ENOSPC / -EDQUOT when the file system has none. */
HIDDEN int backing_reserve(struct pc_mapping *m, uint64_t off, uint64_t end);
/* After a write that ended at `end`: whether the reserved end is within
 * the next reservation's reach of it and the flusher should reserve ahead
 * (backing_reserve_background), so that the writer does not have to. */
HIDDEN bool backing_reserve_soon(struct pc_mapping *m, uint64_t end);
/* The flusher, or a write-back walk: the reservation backing_reserve_soon
 * asked for, if any (never waits for size_lock: skipped when it is busy). */
HIDDEN void backing_reserve_background(struct pc_mapping *m);
/* Give back what was reserved past the file's end (last close). */
HIDDEN void backing_release_reserve(struct pc_mapping *m);
/* Write bytes [off, off+len) of a closed file, its end among them,
 * through the kernel's page cache, so that the backing file ends at i_size
 * with no truncate (backing.c says when that is safe); 0 or a negative
 * errno. */
HIDDEN int backing_write_tail(struct pc_mapping *m, const void *buf, uint64_t off, size_t len);
/* Allocate the backing file ahead of writeback, up to i_size. */
HIDDEN void backing_extend(struct pc_mapping *m);
/* ftruncate the backing file to size, safely against our own direct
 * writes of the block the file system zeroes; caller holds inval_lock
 * exclusively. */
HIDDEN int backing_set_size(struct pc_mapping *m, uint64_t size);
/* Make the backing file's size equal i_size (ftruncate) if it differs. */
HIDDEN int backing_sync_size(struct pc_mapping *m);

#endif
