/*
 * edges.h - edge folios of uncached writes (edges.c): a folio that an
 * uncached write covers only partly is kept cached (PF_EDGE) for the write
 * sharing its block, so that that write does not read it back from the
 * device; clean edges are kept within edge_budget_bytes, oldest dropped
 * first, and never dropped for their age while the file is open.
 */
#ifndef PC_EDGES_H
#define PC_EDGES_H

#include "lib/util.h"

struct pc_cache;
struct pc_folio;
struct pc_mapping;

/* An edge folio in the cache's FIFO of edges (cache->edge_fifo): its
 * descriptor and the generation it had when it became an edge, which tells
 * an entry whose folio was freed and reused since. */
struct pc_edge_ref {
	uint32_t pfn, gen;
};

HIDDEN void edges_init(struct pc_cache *c);
HIDDEN void edges_destroy(struct pc_cache *c);
/* The bytes of edges the cache keeps before it drops the oldest. */
HIDDEN size_t edge_budget(const struct pc_cache *c);
/* Keep the locked folio f, which an uncached write covers only partly,
 * for the neighbouring write (PF_EDGE), as the newest edge. */
HIDDEN void edge_keep(struct pc_mapping *m, struct pc_folio *f);
/* Do the clean edges hold more than the budget? */
HIDDEN bool edges_over_budget(struct pc_cache *c);
/* While the clean edges hold more than the budget, let the oldest clean
 * ones go (a dirty edge stays: it counts as dirty data).  Takes
 * folio locks by trylock only; call it holding none of the cache's locks
 * but, at most, folio locks and inval_lock. */
HIDDEN void edges_trim(struct pc_cache *c);
/* A write completed an edge of m: counted, with its time, which
 * edges_wait_for_neighbours watches. */
HIDDEN void edge_completed(struct pc_mapping *m);
/* A write of m that left edges, with the clean edges over the budget:
 * wait (bounded, no locks held) while other writers complete m's edges. */
HIDDEN void edges_wait_for_neighbours(struct pc_mapping *m);
/* Let every edge of m go (fsync, close): no neighbour is coming. */
HIDDEN void drop_edges(struct pc_mapping *m);

#endif
