/*
 * dirty.h - dirty accounting (dirty.c): a file's, its domain's and the
 * cache's dirty and drop-behind (PC_DONTCACHE) byte counts, the cache's
 * peak, and each domain's list of files with dirty data, which is what
 * the flusher looks at.  Writers and writeback both count here; neither
 * calls the other for it.
 */
#ifndef PC_DIRTY_H
#define PC_DIRTY_H

#include "lib/util.h"

struct pc_cache;
struct pc_domain;
struct pc_folio;
struct pc_mapping;

/* Account `bytes` newly dirty (negative: cleaned) in folio f. */
HIDDEN void account_dirty(struct pc_mapping *m, struct pc_folio *f, int64_t bytes);
/* A folio's uncached (drop-behind) dirty share changed by `bytes`. */
HIDDEN void account_uncached(struct pc_mapping *m, int64_t bytes);
/* Take a gone file (unlinked) off its domain's dirty list now, so that
 * its last reference, and descriptor, can go at once. */
HIDDEN void dirty_forget_file(struct pc_mapping *m);
/* Called after a folio went clean->dirty: tag it, queue the mapping. */
HIDDEN void dirty_file_dirtied(struct pc_mapping *m, struct pc_folio *f);
/* m has work for the flusher (dirty data, or a request such as a
 * reservation ahead, wb/backing.c): it goes on its domain's list if off. */
HIDDEN void dirty_file_wants_flusher(struct pc_mapping *m);
/* Whether m has anything for the flusher (dirty or uncached data, edges,
 * a reservation ahead asked for). */
HIDDEN bool dirty_has_work(struct pc_mapping *m);
/* Take m off domain d's dirty list (d->lock held). */
HIDDEN void dirty_list_unlink(struct pc_domain *d, struct pc_mapping *m);
/* Raise the cache's peak_dirty (pc_stats) to its dirty count now. */
HIDDEN void dirty_update_peak(struct pc_cache *c);

/* Dirty bytes of files whose writeback keeps failing (0 when none). */
HIDDEN int64_t dirty_failing_bytes(struct pc_cache *c);

#endif
