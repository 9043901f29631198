/*
 * truncate.h - truncate, hole punching and zeroing, invalidation of cached
 * ranges, and POSIX_FADV_DONTNEED (truncate.c).
 */
#ifndef PC_TRUNCATE_H
#define PC_TRUNCATE_H

#include "lib/util.h"

struct pc_mapping;

/* pc_ftruncate (and O_TRUNC): i_size set; when it shrinks, the cached
 * data past it goes, dirty or not, and the backing file is cut too. */
HIDDEN int truncate_mapping(struct pc_mapping *m, uint64_t size);
/* pc_fallocate (mode: its FALLOC_FL_* flags): plain allocation is the
 * device's; PUNCH_HOLE and ZERO_RANGE remove or zero the cached data of
 * the range, whole blocks on the device, partial ones through the cache. */
HIDDEN int punch_range(struct pc_mapping *m, uint64_t off, uint64_t len, int mode);
/* Remove cached data of [start, end) (block aligned), waiting for
 * writeback.  Folios wholly inside are removed; blocks of folios partly
 * inside are zeroed and kept uptodate (INVAL_ZERO: truncate, punch) or
 * marked not uptodate (INVAL_STALE: the device changed under them).
 * Dirty data is discarded with INVAL_ZERO; with INVAL_STALE a folio still
 * dirty is left alone (the caller wrote it back first). */
enum { INVAL_ZERO, INVAL_STALE };
HIDDEN void invalidate_range(struct pc_mapping *m, uint64_t start, uint64_t end, int how);
/* Drop clean folios of the range, start writeback of dirty ones (DONTNEED). */
HIDDEN void fadvise_dontneed(struct pc_mapping *m, uint64_t start, uint64_t end);

#endif
