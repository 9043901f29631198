/*
 * cache_mem.c - memory for a cache's own structures (cache_mem.h): the
 * heap of the cache's segment (mem/segment.c).
 *
 * Index nodes come in chunks of NODE_CHUNK_BYTES: a node is 544 bytes,
 * which the heap's buddy blocks would round to 1024, while a chunk of
 * 16 KiB holds 30 of them after its link.  Nodes are never freed one by
 * one (radix.c keeps them type-stable for its lockless walks: they go back
 * to the pool), so their chunks are freed only with the cache.
 */
#include "mem/cache_mem.h"

#include "api/cache.h"
#include "lib/radix.h"
#include "mem/segment.h"

#include <errno.h>
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

#define NODE_CHUNK_BYTES ((size_t)16384)
#define NODE_CHUNK_HEAD ((size_t)64) /* the link, and the nodes' alignment */
#define NODES_PER_CHUNK ((NODE_CHUNK_BYTES - NODE_CHUNK_HEAD) / sizeof(struct rt_node))
_Static_assert(NODES_PER_CHUNK >= RT_INSERT_MAX_NODES, "a chunk is enough for any insert");

/* A chunk's first bytes: the cache's chunks are a list from
 * c->node_chunks, pushed onto without a lock and walked at the end. */
struct node_chunk {
	struct node_chunk *next;
};

int cache_nodes_refill(struct pc_cache *c)
{
	struct node_chunk *ch = cache_zalloc(c, NODE_CHUNK_BYTES);
	if (!ch)
		return -ENOMEM;
	ch->next = atomic_load_explicit(&c->node_chunks, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&c->node_chunks, &ch->next, ch, memory_order_release,
						      memory_order_relaxed))
		;
	rt_pool_give(&c->node_pool, (struct rt_node *)((char *)ch + NODE_CHUNK_HEAD), NODES_PER_CHUNK);
	return 0;
}

void cache_nodes_free(struct pc_cache *c)
{
	struct node_chunk *ch = atomic_exchange_explicit(&c->node_chunks, NULL, memory_order_acquire);
	while (ch) {
		struct node_chunk *next = ch->next;
		cache_free(c, ch);
		ch = next;
	}
}
