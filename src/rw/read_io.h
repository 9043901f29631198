/*
 * read_io.h - bringing a range of a file into the cache (read_io.c): the
 * missing folios created locked, one device read per contiguous run, the
 * completion marking them uptodate and unlocking them.  The mechanism
 * under both misses and read-ahead; what to read is the caller's.
 */
#ifndef PC_READ_IO_H
#define PC_READ_IO_H

#include "lib/util.h"

struct pc_folio;
struct pc_mapping;

enum {
	RF_DONTCACHE = 1 << 0, /* created folios are dropped behind their reader */
	RF_SYNC = 1 << 1,      /* the first run read in the caller's thread */
	RF_NOWAIT = 1 << 2,    /* never sleep for memory (the range may stay short) */
};
/* Create the missing folios of [start, end) and read them (they stay
 * locked until read; asynchronously, except the first run with RF_SYNC).
 * Error only if not even the first could be created.  With `first`, the
 * folio holding `start` (created or found) is returned with a reference. */
HIDDEN int read_io_range(struct pc_mapping *m, uint64_t start, uint64_t end, unsigned rf,
			 struct pc_folio **first);

#endif
