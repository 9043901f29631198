/*
 * span.h - zero-copy spans (span.c): pc_read_begin/_end and
 * pc_write_begin/_end over the read path and the steps of a buffered
 * write (write.h).
 */
#ifndef PC_SPAN_H
#define PC_SPAN_H

#include "lib/util.h"

#include "pagecache.h"

struct pc_file;

/* Called by api.c once the arguments passed its checks (off below the
 * size limit for writes, flags without PC_DIRECT).  struct pc_span's
 * priv.state is one of these: a magic number per kind, so that a span
 * ended twice, or one whose begin failed, is told from an open one (a
 * copy of an open span is not). */
enum { SPAN_ENDED = 0, SPAN_EMPTY = 0x70637330, SPAN_READ = 0x70637372, SPAN_WRITE = 0x70637377 };
HIDDEN ssize_t span_read_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s);
HIDDEN void span_read_end(struct pc_span *s);
HIDDEN ssize_t span_write_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s);
HIDDEN int span_write_end(struct pc_span *s, size_t copied);

#endif
