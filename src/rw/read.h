/*
 * read.h - the read path (read.c): the reads that the cache hit
 * (read_hit.h) declines: misses, read-ahead marks, uncached reads, partly
 * valid folios.  What a miss reads is readahead.h's, bringing a range in
 * read_io.h's, filling a folio's blocks fill.h's.
 */
#ifndef PC_READ_H
#define PC_READ_H

#include "lib/util.h"

struct pc_file;
struct pc_folio;
struct pc_mapping;

/* A buffered read of [off, off+len) of h into iov, with PC_* flags as
 * api.c made them (PC_DIRECT goes to direct_read instead). */
/* Tests only: called before a read miss (pc_pread, a read span) is read
 * in, with no lock held, e.g. to truncate the file under the read. */
HIDDEN extern void (*read_test_before_miss)(struct pc_file *h);
HIDDEN ssize_t read_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			 int flags);

/* Make [foff, foff+n) of f readable (nowait: -EAGAIN rather than wait
 * for its lock or a read); *waited is set when I/O or a wait was needed. */
HIDDEN int read_fill_folio(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n, bool nowait,
			   bool *waited);

#endif
