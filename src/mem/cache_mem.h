/*
 * cache_mem.h - memory for the structures a cache is made of, apart from
 * folio memory (cache_mem.c): mappings, the file table, block states
 * beyond one word, the edge FIFO, the index's nodes, a mapping's written
 * ranges.  They come from the heap of the
 * segment the cache lives in (mem/segment.h), so that when several
 * processes map it (docs/shared.md) every one finds them at the same
 * address.  Scratch memory a call uses and frees itself (vectors of
 * mappings, bounce buffers) is the process's own and stays with malloc.
 */
#ifndef PC_CACHE_MEM_H
#define PC_CACHE_MEM_H

#include "lib/util.h"

struct pc_cache;

/* `bytes` zeroed bytes for a structure of c, or NULL. */
HIDDEN void *cache_zalloc(struct pc_cache *c, size_t bytes);
/* Give back what cache_zalloc gave (NULL: nothing). */
HIDDEN void cache_free(struct pc_cache *c, void *p);

/* The index's nodes (lib/radix.h: its pool, c->node_pool, allocates
 * none).  Give the pool a chunk of at least RT_INSERT_MAX_NODES spare
 * nodes from the heap: 0, or -ENOMEM. */
HIDDEN int cache_nodes_refill(struct pc_cache *c);
/* Free every chunk, at the cache's end: no tree of the pool is left (the
 * nodes, spare or in a tree, are freed with their chunk). */
HIDDEN void cache_nodes_free(struct pc_cache *c);

#endif
