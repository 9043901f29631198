/*
 * cache_mem.c - memory for a cache's own structures (cache_mem.h).
 */
#include "mem/cache_mem.h"

#include <stdlib.h>

void *cache_zalloc(struct pc_cache *c, size_t bytes)
{
	(void)c;
	return calloc(1, bytes);
}

void cache_free(struct pc_cache *c, void *p)
{
	(void)c;
	free(p);
}
