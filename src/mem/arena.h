/*
 * arena.h - folio memory (arena.c): one anonymous mapping of memory_limit
 * bytes, carved by a buddy allocator into naturally aligned power-of-two
 * blocks of pages, and faulted in by a background thread.  A folio's
 * descriptor is cache->folios[its first page], so the arena also says
 * where a folio's bytes are (arena_pfn, arena_data).
 *
 * arena_alloc is called by the allocator only (reclaim.h: reclaim_alloc_folio,
 * which evicts when the arena is full); arena_free by the last folio_put,
 * and by mapping_get_folio for a new folio that lost its race into the
 * index.
 */
#ifndef PC_ARENA_H
#define PC_ARENA_H

#include "api/cache.h"
#include "mem/folio.h"
#include "lib/util.h"

/* Map the arena, after the machine-memory check (-ENOMEM). */
HIDDEN int arena_init(struct pc_cache *c);
/* Start the background fault-in (not with PC_CFG_LAZY_MEMORY); stop it
 * and wait for it (at most one step). */
HIDDEN void arena_populate_start(struct pc_cache *c);
/* A process attached to a shared cache: huge pages asked for over its own
 * mapping of the arena and the folio table (the advice is a mapping's, not
 * the memory's), where the machine gives shared memory any
 * (transparent_hugepage/shmem_enabled "advise" or "always"). */
HIDDEN void arena_attach(struct pc_cache *c);
/* A shared cache is made: its arena leaves the count of what this
 * process's caches have yet to take from the machine (pc_cache_new's
 * ENOMEM check), which is one process's and would be changed by every
 * process that hands the arena out.  The check at its creation stands. */
HIDDEN void arena_budget_share(struct pc_cache *c);
HIDDEN void arena_populate_stop(struct pc_cache *c);
/* Bytes from the arena's start faulted in so far by the background thread. */
HIDDEN size_t arena_populated_bytes(struct pc_cache *c);
/* What the background fault-in has yet to do: 0 once it has ended. */
HIDDEN size_t arena_prefault_pending(struct pc_cache *c);
/* Pages below this were handed out at some time; above, never (their
 * descriptors are all zero). */
HIDDEN uint32_t arena_used_pages(struct pc_cache *c);
/* In a child of fork(): the parent's caches are not this process's. */
HIDDEN void arena_forget_parent_caches(void);
/* Bytes of the cache's heap in use for anything but folio memory: the
 * descriptor table, mappings, index nodes, block states (pc_stats'
 * meta_bytes). */
HIDDEN uint64_t arena_meta_bytes(struct pc_cache *c);
HIDDEN void arena_destroy(struct pc_cache *c);
/* Unmap the folio descriptor table (arena_destroy does; also a fork
 * child's copy, process.c). */
HIDDEN void arena_free_table(struct pc_cache *c);
/* A free block of 2^order pages, or PC_NONE. */
HIDDEN uint32_t arena_alloc(struct pc_cache *c, unsigned order);
HIDDEN void arena_free(struct pc_cache *c, uint32_t pfn, unsigned order);
static inline uint32_t arena_pfn(const struct pc_cache *c, const struct pc_folio *f)
{
	return (uint32_t)(f - c->folios);
}
static inline uint8_t *arena_data(const struct pc_cache *c, const struct pc_folio *f)
{
	return c->arena + ((size_t)arena_pfn(c, f) << PC_PAGE_SHIFT);
}

#endif
