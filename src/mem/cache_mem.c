/*
 * cache_mem.c - memory for a cache's own structures (cache_mem.h): the
 * heap of the cache's segment (mem/segment.c).
 */
#include "mem/cache_mem.h"

#include "api/cache.h"
#include "mem/segment.h"

#include <string.h>

void *cache_zalloc(struct pc_cache *c, size_t bytes)
{
	void *p;
	if (seg_alloc(cache_proc(c)->seg, bytes, 0, &p) != 0)
		return NULL;
	/* A block freed before holds its old contents. */
	memset(p, 0, bytes);
	return p;
}

void cache_free(struct pc_cache *c, void *p)
{
	if (p)
		seg_free(cache_proc(c)->seg, p);
}
