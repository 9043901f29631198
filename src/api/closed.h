/*
 * closed.h - files after their last close (closed.c): dirty ones written
 * by the flusher and then settled (exact size, attributes saved, lock
 * released), settled ones keeping their descriptor for a reopen, a bound
 * on the descriptors held, and a sweep for unlinked files.  All under
 * files_lock, except settling.
 */
#ifndef PC_CLOSED_H
#define PC_CLOSED_H

#include "lib/util.h"

struct pc_cache;
struct pc_mapping;

/* The last handle went (files_lock held); true: the caller settles it now
 * (it is clean already), outside files_lock. */
HIDDEN bool closed_add(struct pc_cache *c, struct pc_mapping *m);
/* A handle opens it again (files_lock held). */
HIDDEN void closed_reopened(struct pc_cache *c, struct pc_mapping *m);
/* Do closed files still to be written hold many descriptors (the flusher
 * then writes them first)? */
HIDDEN bool closed_fd_pressure(const struct pc_cache *c);
/* Must pc_close write back and wait (close-to-open, or too many closed
 * files are still to be written)? */
HIDDEN bool closed_must_wait(struct pc_cache *c);
/* A closed file's data is written: exact size, attributes saved, lock
 * released, descriptor kept for a reopen. */
HIDDEN void closed_settle(struct pc_mapping *m);
/* Out of descriptors: every settled closed file gives its up. */
HIDDEN void closed_release_fds(struct pc_cache *c);
/* Install the flusher's hooks for closed files in c (pc_cache_new):
 * the process's closed_fd_pressure is closed_fd_pressure; its closed_after_round
 * settles the closed files whose write-back ended and, at most once a
 * second, drops those that were unlinked, or gave their descriptor up
 * and lost all their data. */
HIDDEN void closed_layer_init(struct pc_cache *c);

#endif
