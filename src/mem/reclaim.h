/*
 * reclaim.h - keeping folio memory under memory_limit (reclaim.c): the
 * S3-FIFO-like queues, eviction of clean folios, the allocation of folios
 * (which evicts, and waits on the cache's mem_progress when nothing can be
 * evicted yet), and drop-behind of uncached I/O's folios.
 */
#ifndef PC_RECLAIM_H
#define PC_RECLAIM_H

#include "lib/util.h"

struct pc_cache;
struct pc_folio;

/* An access of [foff, foff+n) of f, for reclaim: the first use since f
 * entered the cache is no reuse (a scan's), a later one marks it
 * PF_REFERENCED, with no write when it is marked already (reclaim.c says
 * why); continues: it starts where an earlier access of the same reader
 * ended. */
HIDDEN void lru_mark_accessed(struct pc_folio *f, size_t foff, size_t n, bool continues);
/* Put a new folio on the small queue / take it off its queue. */
HIDDEN void lru_add(struct pc_cache *c, struct pc_folio *f);
HIDDEN void lru_del(struct pc_cache *c, struct pc_folio *f);
/* Free at least `pages` pages by evicting clean folios; returns pages freed. */
HIDDEN uint64_t reclaim_pages(struct pc_cache *c, uint64_t pages);
/* Allocate a folio of `order` pages (falling back to lower orders down to
 * `min_order`), evicting and waiting for writeback as needed.  Returns the
 * folio (refcount 1, no mapping) or NULL with -EAGAIN (nowait) / -ENOMEM. */
HIDDEN struct pc_folio *reclaim_alloc_folio(struct pc_cache *c, unsigned order, unsigned min_order,
					    bool nowait, int *err);
/* Drop a clean, unused drop-behind folio now if possible (trylock unless
 * `locked`: the caller holds the folio lock);
 * returns true if it was removed.  Never sleeps. */
HIDDEN bool reclaim_try_drop(struct pc_cache *c, struct pc_folio *f, bool locked);
/* A reader is done with drop-behind folio f: drop it now, or (busy) mark
 * it so that its last user drops it. */
HIDDEN void reclaim_drop_behind(struct pc_cache *c, struct pc_folio *f);
/* Let go of a folio one used (not the index's reference): the last user of
 * a drop-behind folio whose write-back ended while others used it
 * (PF_DROP_PENDING) drops it from the cache first; then folio_put.  Every
 * path above this layer lets go with it, so folio_put, below, only counts
 * and frees. */
HIDDEN void reclaim_release_folio(struct pc_cache *c, struct pc_folio *f);
/* Tests only (test_mt_release.c): called by reclaim_release_folio when it is about
 * to step a folio down to the index's reference alone, no drop pending. */
HIDDEN extern void (*reclaim_test_before_last_step)(struct pc_folio *f);

#endif
