/*
 * writeback.h - the writeback engine (writeback.c): device writes of a
 * file's dirty blocks, clustered across folios into writes of up to
 * max_io_bytes, their completions, drop-behind at completion, and waiters
 * for them.  Who writes back when is the flusher's (flusher.h) or the
 * caller's (fsync, DSYNC, close).  A completion counts (dirty.h),
 * records errors (errseq.h), drops drop-behind folios (reclaim.h), kicks
 * the flusher when a closed file's last write ended, and signals progress
 * (progress.h) instead of calling the throttle or the allocator that wait
 * for it.
 */
#ifndef PC_WRITEBACK_H
#define PC_WRITEBACK_H

#include "lib/util.h"

struct pc_folio;
struct pc_mapping;

/* Collects completions of writes one caller waits for (fsync, DSYNC).
 * No mutex or condition variable: `pending` is a shared futex word
 * (docs/shared.md, section 3), which the completion that takes it to 0
 * wakes; `error` is set before that decrement. */
struct pc_wb_waiter {
	_Atomic uint32_t pending;
	_Atomic int error; /* first negative errno */
};

enum {
	WB_ALL = 0,
	WB_UNCACHED = 1 << 0,    /* only drop-behind data (and complete edges) */
	WB_SYNC = 1 << 1,        /* lock and wait; count others' writeback */
	WB_DSYNC = 1 << 2,       /* RWF_DSYNC device writes */
	WB_NOWAIT_LOCK = 1 << 3, /* skip locked folios (the flusher) */
	WB_LET_PARTIAL_WAIT = 1 << 4, /* skip young deferred partial blocks */
	WB_HOLD_SHORT_RUNS = 1 << 5,  /* skip short runs of young dirty data */
};
/* Start writeback of dirty data in [start, end) of m (WB_UNCACHED: only
 * drop-behind folios).  With a waiter, every write started is counted in it;
 * WB_SYNC locks and waits for folios already under writeback, and counts
 * them too.  Returns the bytes submitted, or a negative errno. */
HIDDEN int64_t writeback_range(struct pc_mapping *m, uint64_t start, uint64_t end, int mode,
			       struct pc_wb_waiter *w);
/* writeback_range, stopping once `budget` bytes are submitted (0: all). */
HIDDEN int64_t writeback_some(struct pc_mapping *m, uint64_t start, uint64_t end, int mode, struct pc_wb_waiter *w,
			      int64_t budget);
/* Write back [start, end), wait for it, and return the first error. */
HIDDEN int writeback_and_wait(struct pc_mapping *m, uint64_t start, uint64_t end, int mode);
/* Wait until no folio of [start, end) is under writeback, and until the
 * completions that ended it returned (their drop-behind done). */
HIDDEN void writeback_wait_range(struct pc_mapping *m, uint64_t start, uint64_t end);
/* A waiter for writeback_range's writes (w->pending counts them). */
HIDDEN void waiter_init(struct pc_wb_waiter *w);
/* Sleep until every write counted in w ended; their first error, or 0. */
HIDDEN int waiter_wait(struct pc_wb_waiter *w);
HIDDEN void waiter_destroy(struct pc_wb_waiter *w);
/* A file this small, closed, goes to the backing file in one write through
 * the kernel (closed_kernel_run), and pc_flush without wait (api.c) leaves
 * it to the flusher rather than writing its blocks directly. */
#define PC_SMALL_FILE_BYTES (64u << 10)
/* How long a short run of young dirty data waits for its neighbours
 * (WB_HOLD_SHORT_RUNS); the flusher looks again after it (flusher.c). */
#define SHORT_RUN_PATIENCE_MS 200u

/* Write back all dirty data of a writable file, wait, and set the backing
 * file's exact size (fsync, close, cache destroy); the first error. */
HIDDEN int writeback_file(struct pc_mapping *m);

/* Tests only (test_mt_release.c): called by a completion right after it
 * cleared a folio's PF_WRITEBACK and woke its waiters, before it drops a
 * drop-behind folio. */
HIDDEN extern void (*writeback_test_after_clear)(struct pc_folio *f);

#endif
