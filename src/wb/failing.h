/*
 * failing.h - "failing" files (failing.c): whose new writes are refused
 * while their write-back keeps failing, so that a program writing to a full
 * or broken device hears of it at the next write, not only at fsync.
 */
#ifndef PC_FAILING_H
#define PC_FAILING_H

#include "mem/mapping.h"
#include "wb/flusher.h"
#include "lib/util.h"

/* Writeback of m failed with err: new writes fail up front (ENOSPC and
 * EDQUOT: those to every file of its device). */
HIDDEN void failing_set(struct pc_mapping *m, int err);
/* The caller retries (fsync), truncates or punches: writes may go again. */
HIDDEN void failing_clear(struct pc_mapping *m);
/* Write-back of m failed with err (a write, or the read merging a partial
 * block before it): recorded for fsync, counted, the file failing. */
HIDDEN void failing_wb_failed(struct pc_mapping *m, int err);
/* A write of a failing file went through: it may be well again. */
HIDDEN void failing_wb_recovered(struct pc_mapping *m);
/* Is m's write-back failing (its negative errno, or 0)? */
static inline int failing_error(struct pc_mapping *m)
{
	return atomic_load_explicit(&m->wb_failing, memory_order_relaxed);
}
/* The error new writes to m get now (its own, or its device's), or 0. */
static inline int failing_write_error(struct pc_mapping *m)
{
	int err = failing_error(m);
	return err ? err : atomic_load_explicit(&m->dom->nospace, memory_order_relaxed);
}

#endif
