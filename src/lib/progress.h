/*
 * progress.h - a count of events (writeback completed, memory freed) that
 * threads wait for without the code that signals knowing them
 * (progress.c): so completions, low in the layering, never call up into
 * the throttle or the allocator that wait for them.
 */
#ifndef PC_PROGRESS_H
#define PC_PROGRESS_H

#include "lib/util.h"

struct pc_progress {
	_Atomic uint32_t count; /* a futex word; wraps, compared for equality only */
	_Atomic int waiters;
	int futex_private;      /* FUTEX_PRIVATE_FLAG unless processes share it */
};
HIDDEN void progress_init(struct pc_progress *p);
/* Before it is used: processes share it (a shared cache's). */
HIDDEN void progress_share(struct pc_progress *p);
HIDDEN void progress_destroy(struct pc_progress *p);
/* After the state changed: wake whoever waits for a change. */
HIDDEN void progress_signal(struct pc_progress *p);
/* Register as a waiter; returns the count to give progress_wait.  Check
 * the state after this, then wait if it is not what is wanted. */
HIDDEN uint32_t progress_begin(struct pc_progress *p);
/* Sleep until the count is no longer `seen`, or timeout_ms pass. */
HIDDEN void progress_wait(struct pc_progress *p, uint32_t seen, unsigned timeout_ms);
HIDDEN void progress_end(struct pc_progress *p);

#endif
