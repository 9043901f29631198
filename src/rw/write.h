/*
 * write.h - the buffered write path (write.c): admission (failing files,
 * space reservation, PC_NOWAIT), each folio prepared, copied into and
 * marked dirty, edges of uncached writes, PC_DSYNC, the throttle after.
 */
#ifndef PC_WRITE_H
#define PC_WRITE_H

#include "lib/util.h"

struct pc_file;
struct pc_folio;
struct pc_mapping;

/* A buffered write of [off, off+len) of h from iov, with PC_* flags as
 * api.c made them (PC_DIRECT goes to direct_write, whose unaligned ends
 * come back here). */
HIDDEN ssize_t write_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			  int flags);

/* The steps of a buffered write, shared with the write spans (span.c).
 * A buffered write of [off, end) of m with PC_* flags, its data in iov
 * (NULL for a write span, whose caller copies the data itself). */
struct write_ctx {
	struct pc_mapping *m;
	const struct iovec *iov;
	int iovcnt;
	uint64_t off, end;
	int flags;
};
/* The part of a write that falls in one folio, between its steps. */
struct write_folio {
	struct pc_folio *f;  /* locked, stable, referenced */
	size_t foff, n;      /* the part: [foff, foff + n) of f */
	bool created;        /* this write created f */
	bool head_full, tail_full; /* its partly covered first / last block is
				    * valid around it (zeroed or read), else
				    * deferred: see bs_write_end */
};
/* Before a write dirties anything: a file whose writeback keeps failing
 * takes no new data (failing_set), space for a write that extends
 * the file is reserved (a full file system fails the write here, as the
 * kernel's buffered write does, not at fsync), and PC_NOWAIT meets the
 * dirty throttle (-EAGAIN past the limit). */
HIDDEN int write_admit(struct pc_mapping *m, uint64_t off, uint64_t end, int flags);
/* Step 1, caller holding inval_lock shared: the folio holding pos, locked
 * and stable, its partly covered blocks prepared (zeroed, read or
 * deferred) and marked for the write's mode, as much of [pos, w->end) as
 * it holds in *wf.  0 or a negative errno (nothing held then). */
HIDDEN int write_folio_begin(const struct write_ctx *w, uint64_t pos, struct write_folio *wf);
/* Step 2, after the data is in [foff, foff + n): uptodate and dirty, the
 * size raised, the folio unlocked and released. */
HIDDEN void write_folio_commit(const struct write_ctx *w, const struct write_folio *wf);
/* Instead of step 2 when nothing was written: unlocked and released, and
 * removed when this write created it (it holds nothing). */
HIDDEN void write_folio_abandon(const struct write_ctx *w, const struct write_folio *wf);
/*
 * Between the steps, when only `copied` < wf->n bytes came: what the
 * write had prepared past them must not become file data.  Dirty bytes
 * there are the caller's to put back first (they exist nowhere else);
 * clean uptodate blocks there are forgotten (read again when needed);
 * blocks not uptodate stay so; the block holding the new end is prepared
 * again for it, keeping the bytes written before it.  Sets wf->n to
 * copied.  A negative errno when that block had to be read and could not
 * be: then end the write with copied 0 (write_folio_shorten(.., 0) cannot
 * fail) and write_folio_abandon.
 */
HIDDEN int write_folio_shorten(const struct write_ctx *w, struct write_folio *wf, size_t copied);
/* After n bytes at pos went in (inval_lock released): PC_DSYNC makes them
 * durable (an error: they are not), other writes meet the dirty throttle
 * (an error: the file's write error, the bytes are written). */
HIDDEN int write_finish(struct pc_mapping *m, uint64_t pos, uint64_t n, int flags);
/* A write made of several calls (direct_write's misaligned head and tail):
 * the edges its pieces leave and complete are counted as one write's, so
 * a writer whose head completes an edge and whose tail leaves one is not
 * taken for one that runs ahead (write_finish's edge budget wait).  Same
 * thread, no nesting; end with the flags of the pieces. */
HIDDEN void write_edges_batch_begin(void);
HIDDEN void write_edges_batch_end(struct pc_mapping *m, int flags);
/* Write zeros through the cache (partial blocks of punch/zero range); the
 * caller holds inval_lock (either way). */
HIDDEN int write_zeroes(struct pc_mapping *m, uint64_t off, uint64_t len);

#endif
