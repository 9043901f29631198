/*
 * throttle.h - the dirty throttle (throttle.c): past the dirty limit,
 * writers sleep until writeback makes room (they wait on the cache's
 * wb_progress, which completions signal: writeback never calls up here),
 * and are let through in order of the bytes their thread dirtied, so
 * that many writers of one file stay in step.  Below the limit they are
 * paced (pace.h).
 */
#ifndef PC_THROTTLE_H
#define PC_THROTTLE_H

#include "lib/util.h"

struct pc_cache;
struct pc_mapping;

/* Writers call this after dirtying `room` bytes: kicks the flusher past
 * the background or uncached thresholds; sleeps while dirty+writeback
 * would leave no room for another write as large (at most dirty_limit /
 * 8: so that the next does not take them past dirty_limit), let through
 * in order of bytes their thread dirtied.  nowait: -EAGAIN past the limit
 * itself, no sleep. */
HIDDEN int balance_dirty(struct pc_mapping *m, uint64_t room, bool uncached, bool nowait);
/* The calling thread dirtied `bytes` (its place in the throttle queue,
 * and the bytes its next pacing owes for). */
HIDDEN void throttle_account(size_t bytes);
/* Are dirty + writeback bytes past the dirty limit?  Dirty data of files
 * whose writeback keeps failing does not count: it cannot be cleaned
 * until the fault clears. */
HIDDEN bool throttle_over_limit(struct pc_cache *c);
/* Is a writer waiting in the throttle for room? */
HIDDEN bool throttle_has_waiters(struct pc_cache *c);
/* Writers waiting in the queue now (takes throttle_lock; for checks and
 * tests). */
HIDDEN unsigned throttle_queue_length(struct pc_cache *c);

#endif
