/*
 * shared.h - a cache shared by the processes of one user (shared.c):
 * the attacher's configuration check, each process's server of its file
 * descriptors, and leaving.  docs/shared.md is the design (sections 17
 * and 19); cache.c makes and attaches the cache, file.c opens files.
 */
#ifndef PC_SHARED_H
#define PC_SHARED_H

#include "api/cache.h"
#include "lib/util.h"

#include <errno.h>

/* segment_open's config_check for an attacher: -EINVAL when a setting
 * the attacher's caller chose (user: what it passed; mine: that,
 * validated) differs from the creator's (theirs, len bytes). */
struct shared_config_ask {
	const struct pc_config *user, *mine;
};
HIDDEN int shared_config_check(const void *theirs, size_t len, void *arg);

/* This process's part of a shared cache starts (its bit in holders, its
 * descriptor server) or stops.  0 or a negative errno. */
HIDDEN int shared_proc_start(struct pc_cache *c);
HIDDEN void shared_proc_stop(struct pc_cache *c);

/* A descriptor of m's description from a process that holds one (m
 * held by others, files_lock held): the descriptor, or -EBUSY when no
 * holder answers (a holder that died: docs/shared.md, section 5), or
 * another negative errno. */
HIDDEN int shared_fd_from_holders(struct pc_mapping *m);

/*
 * pc_cache_destroy of a shared cache, this process's handles closed:
 * under members_lock, either this process is the last member (1: it
 * marks the cache closing, so that an attacher that comes now goes away
 * and starts anew, and the caller tears the cache down as a private
 * one), or it leaves (0): the files it alone holds are written back and
 * settled, it lets go of every file, and its flushers and I/O queues end.
 * *err: the first write-back error met.
 */
HIDDEN int shared_leave(struct pc_cache *c, int *err);

/* shared_join's "the last member is tearing the cache down": start
 * again (a code no call it makes returns). */
#define SHARED_CLOSING (-ESTALE)

/* An attacher's cache is ready: wait for the creator (-ETIMEDOUT), and
 * join unless the last member is leaving (SHARED_CLOSING).  members_lock
 * is held on 0, for the caller to release once its process part is set
 * up and it is a member (shared_member_add). */
HIDDEN int shared_join(struct pc_cache *c, unsigned wait_ms);
/* This process is a member now (members_lock held, or the creator before
 * the cache is ready): the last one out is whoever leaves with no other
 * member alive. */
HIDDEN void shared_member_add(struct pc_cache *c);

#endif
