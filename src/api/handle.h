/*
 * handle.h - an open handle (struct pc_file, the public API's opaque
 * type): made, checked and freed by api.c.  A handle is a file's mapping
 * plus what one opener has: its access mode and open flags, the write
 * errors it has seen, and read-ahead hints.
 */
#ifndef PC_HANDLE_H
#define PC_HANDLE_H

#include "lib/forkgen.h"
#include "lib/util.h"

struct pc_cache;
struct pc_mapping;

#define PC_RA_HINTS 4 /* read ends a handle remembers (readahead_hinted) */
struct pc_file {
	uint32_t magic;
	/* The process that opened it (lib/forkgen.h): a child of fork()'s
	 * copy is refused by the handle alone, without reading the cache,
	 * which a child does not have mapped when the cache is shared
	 * (docs/shared.md, 2.7). */
	unsigned owner_generation;
	int accmode;       /* O_RDONLY / O_WRONLY / O_RDWR */
	int oflags;        /* O_DSYNC / O_DIRECT from open */
	struct pc_cache *c;
	struct pc_mapping *m;
	uint64_t wb_err_seen;
	/* Read-ahead (readahead.c): only a hint and the fadvise mode; a
	 * stream's state lives in the cache. */
	/* Where the last reads that the read path saw (not hits) ended, one
	 * slot per recent sequential reader (readahead_hinted), with the
	 * hint clock value of its last use: a hint, read and written without
	 * a lock. */
	_Atomic int64_t ra_ends[PC_RA_HINTS];
	_Atomic uint32_t ra_used[PC_RA_HINTS];
	_Atomic uint8_t ra_runs[PC_RA_HINTS]; /* reads in a row that ended there, up to 3 (0 counts as 2) */
	_Atomic uint32_t ra_clock;
	_Atomic int ra_advice;       /* PC_RA_NORMAL / _SEQUENTIAL / _RANDOM (readahead.h) */
	struct pc_file *next_closed; /* quarantine of closed handles */
	struct pc_file *open_prev, *open_next; /* cache_proc(cache)->open_head, files_lock */
};
/* magic: an open handle; a closed one in the quarantine, so that a call on
 * it fails with EBADF instead of using freed memory. */
#define PC_FILE_MAGIC 0x70636631u  /* "pcf1" */
#define PC_FILE_CLOSED 0x70636630u

/* Is h a copy inherited through fork() (this process did not open it)? */
static inline bool handle_inherited(const struct pc_file *h)
{
	return h->owner_generation != forkgen_now();
}

/* pc_cache_destroy: free every handle, open or in the quarantine
 * (api.c). */
HIDDEN void handles_free_all(struct pc_cache *c);
/* Close every handle this process has open, as pc_close does but without
 * waiting (a shared cache's member leaving: what it wrote stays cached for
 * the others): 0, or the first write error one of them had not seen. */
HIDDEN int handles_close_all(struct pc_cache *c);

#endif
