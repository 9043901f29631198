/*
 * radix_pool_util.h - spare index nodes from malloc, for the tests of the
 * radix tree alone (test_radix.c, test_mt_hits.c).  radix.c allocates no
 * node itself (its "Nodes"): the cache gives its pool nodes from the
 * segment's heap (mem/cache_mem.c); these tests give theirs from malloc,
 * one node at a time, and free them one by one at the pool's end.
 */
#ifndef PC_RADIX_POOL_UTIL_H
#define PC_RADIX_POOL_UTIL_H

#include "lockcx_util.h"
#include "testutil.h"

#include "api/internal.h"

#include <stdlib.h>

/* At least `want` spares in p (nodes from calloc). */
static inline void tp_fill(struct rt_pool *p, size_t want)
{
	while (rt_pool_spares(p) < want) {
		struct rt_node *n = calloc(1, sizeof(*n));
		REQUIRE(n);
		rt_pool_give(p, n, 1);
	}
}

/* Every tree of p is destroyed: free its spares (all its nodes), then p.
 * Returns how many there were. */
static inline size_t tp_destroy(struct rt_pool *p)
{
	size_t n = 0;
	struct rt_node *node;
	while ((node = rt_pool_take(p))) {
		free(node);
		n++;
	}
	rt_pool_destroy(p);
	return n;
}

#endif
