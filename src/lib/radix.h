/*
 * radix.h - the index's data structure: a 64-way radix tree of page index
 * -> item (a folio), with two tags per slot (radix.c explains its shape,
 * tags and lockless lookups).  It knows nothing of folios or files, so
 * that mapping.c can build the per-file index on it.
 *
 * Not locked: callers hold mapping->tree_lock (read for lookups, write for
 * changes, tags included), except rt_lookup_lockless.
 */
#ifndef PC_RADIX_H
#define PC_RADIX_H

#include "lib/shlock.h"
#include "lib/util.h"

#define RT_SHIFT 6
#define RT_SLOTS (1u << RT_SHIFT)
#define RT_MASK ((uint64_t)RT_SLOTS - 1)
enum { RT_TAG_DIRTY, RT_TAG_EDGE, RT_NTAGS };

struct rt_node {
	uint8_t shift;   /* index bits below this node's slots */
	uint8_t offset;  /* slot in parent */
	uint16_t count;  /* slots in use */
	struct rt_node *parent;
	uint64_t tags[RT_NTAGS];
	void *slots[RT_SLOTS];
};

/* Spare nodes shared by the trees of one cache (see radix.c, "Lockless
 * lookups" and "Nodes"): every node a tree uses comes from its pool, and
 * goes back there when the tree is done with it.  radix.c allocates and
 * frees no memory: the caller gives the pool its nodes (rt_pool_give; the
 * cache's come from its segment's heap, mem/cache_mem.c), and takes them
 * back only when no tree of the pool may be walked any more. */
struct rt_pool {
	struct pc_shmutex lock;
	/* The locker (shlock.h): a cache's points into the process's part,
	 * at one address in every process (api/cache.h, struct pc_proc). */
	const struct pc_shlock_ctx *cx;
	struct rt_node *spare;    /* linked through ->parent */
	_Atomic size_t nr_spare;  /* changed under lock */
};

/* The most nodes one rt_insert takes from the pool: 10 to grow a tree
 * whose root is a leaf to the 11 levels of 64-bit indices, and a new path
 * of 10 nodes below the root at each end of the range.  With fewer spares
 * it may fail (-ENOMEM, the tree unchanged): the caller gives the pool
 * more and tries again. */
#define RT_INSERT_MAX_NODES 30

/* What a lockless walk reads first (node, seq, shift) is in the first 16
 * bytes, which one cache line always holds. */
struct rt_root {
	_Alignas(16) struct rt_node *node;
	_Atomic uint32_t seq; /* odd while the tree's shape changes */
	/* node->shift, kept beside the pointer (set with it, radix.c's
	 * set_root): a lockless walk reads both at once instead of the
	 * pointer and then the node's first line for the shift, one
	 * dependent load less on the way to the folio's bytes (read_hit.h). */
	uint8_t shift;
	uint64_t nr_heads;    /* folios in the tree */
	struct rt_pool *pool; /* where its nodes come from and go back to */
};

/* A tree whose nodes come from `pool` (not NULL), empty. */
HIDDEN void rt_init(struct rt_root *r, struct rt_pool *pool);
/* Empty the tree: its nodes go back to the pool. */
HIDDEN void rt_destroy(struct rt_root *r);
HIDDEN void rt_pool_init(struct rt_pool *p, const struct pc_shlock_ctx *cx);
/* Forget the spares: their memory is the caller's, taken back with
 * rt_pool_take or freed whole as it was given.  After every tree of the
 * pool is destroyed. */
HIDDEN void rt_pool_destroy(struct rt_pool *p);
/* Give the pool `n` spare nodes: the array `nodes`, zeroed.  The memory
 * stays the caller's: the pool hands it out and takes it back, and never
 * frees it. */
HIDDEN void rt_pool_give(struct rt_pool *p, struct rt_node *nodes, size_t n);
/* A spare node taken out of the pool, for the caller to free (NULL: none
 * left).  Only once no tree of the pool may be walked (a lockless walk
 * may read a node that left its tree a moment ago): at the pool's end. */
HIDDEN struct rt_node *rt_pool_take(struct rt_pool *p);
/* Spares now (racy without the pool's lock: a hint for whether to give
 * more before an insert). */
static inline size_t rt_pool_spares(struct rt_pool *p)
{
	return atomic_load_explicit(&p->nr_spare, memory_order_relaxed);
}
HIDDEN void *rt_lookup(struct rt_root *r, uint64_t index);
/* The tree's change count to pass to rt_lookup_lockless and
 * rt_unchanged_since; odd while a change is in progress. */
static inline uint32_t rt_read_begin(struct rt_root *r)
{
	return atomic_load_explicit(&r->seq, memory_order_acquire);
}
/* Whether the tree's shape is what it was at rt_read_begin's `seq`: the
 * loads made since then (of the tree and of what it points at) saw a tree
 * no writer had begun to change. */
static inline bool rt_unchanged_since(struct rt_root *r, uint32_t seq)
{
#if PC_TSAN
	/* ThreadSanitizer does not model fences; an RMW orders the same. */
	return atomic_fetch_add_explicit(&r->seq, 0, memory_order_acq_rel) == seq;
#else
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&r->seq, memory_order_relaxed) == seq;
#endif
}
static inline unsigned rt_offset(uint64_t index, unsigned shift)
{
	return (unsigned)(index >> shift) & RT_MASK;
}
/* Largest index below a node of `shift`. */
static inline uint64_t rt_maxindex(unsigned shift)
{
	return shift + RT_SHIFT >= 64 ? UINT64_MAX : (((uint64_t)1 << (shift + RT_SHIFT)) - 1);
}
/* An item that fills a whole slot of an interior node (all 2^shift indices
 * under it) is held there, marked with bit 0 so it is told from a child
 * node (radix.c, "Large folios"); leaves hold items unmarked. */
#define RT_ITEM_MARK ((uintptr_t)1)
static inline bool rt_slot_is_item(const void *p)
{
	return (uintptr_t)p & RT_ITEM_MARK;
}
static inline void *rt_slot_item(const void *p)
{
	return (void *)((uintptr_t)p & ~RT_ITEM_MARK);
}
/* Lookup without the lock (r->pool must be set): the item at `index`, NULL,
 * or RT_RETRY when a writer changed the tree meanwhile.  `seq` comes from
 * rt_read_begin.  The item may be removed (and, unless the caller pins it
 * in its own way, reused) at any time after; see radix.c, "Lockless
 * lookups" (inline for the cache hit, read_hit.h). */
#define RT_RETRY ((void *)1)
static inline void *rt_lookup_lockless(struct rt_root *r, uint64_t index, uint32_t seq)
{
	if (seq & 1)
		return RT_RETRY;
	struct rt_node *n = __atomic_load_n(&r->node, __ATOMIC_RELAXED);
	unsigned shift = __atomic_load_n(&r->shift, __ATOMIC_RELAXED);
	/* Whatever was loaded since the last check (the root and its shift
	 * too) may be stale: check before it is followed (or returned). */
	if (!rt_unchanged_since(r, seq))
		return RT_RETRY;
	if (!n)
		return NULL;
	if (index > rt_maxindex(shift))
		return rt_unchanged_since(r, seq) ? NULL : RT_RETRY;
	/* No node's shift is read: a node followed while the count stayed
	 * unchanged is the child it was in the tree then, whose shift is its
	 * parent's less RT_SHIFT, and the root's is in r.  So each level
	 * costs one load (the slot) where it cost two dependent ones (the
	 * node's first line for the shift, then the slot's line), which a hit
	 * on a cold leaf paid in cache misses. */
	for (;;) {
		void *p = __atomic_load_n(&n->slots[rt_offset(index, shift)], __ATOMIC_RELAXED);
		if (!rt_unchanged_since(r, seq))
			return RT_RETRY;
		if (shift == 0 || !p)
			return p;
		if (rt_slot_is_item(p))
			return rt_slot_item(p);
		n = p;
		shift -= RT_SHIFT;
	}
}
/* Put `item` in slots [index, index+nr); -EEXIST if any is used, -EINVAL
 * for an item with bit 0 set (the tree's mark, RT_ITEM_MARK), -ENOMEM the
 * pool ran out of spare nodes (at most RT_INSERT_MAX_NODES are needed):
 * the tree is as it was. */
HIDDEN int rt_insert(struct rt_root *r, uint64_t index, uint64_t nr, void *item);
/* Empty slots [index, index+nr).  An item the range covers only in part
 * keeps its other slots (a slot it fills in an interior node is split into
 * a child node first; should the pool have no spare for it, the whole of
 * that slot is emptied: the range is for whole items, as the cache's are,
 * which never split). */
HIDDEN void rt_remove(struct rt_root *r, uint64_t index, uint64_t nr);
HIDDEN bool rt_range_empty(struct rt_root *r, uint64_t index, uint64_t nr);
/* Tags belong to an item's first index: set, clear and test them there
 * (rt_find_next with a tag finds an item by its first index only). */
HIDDEN void rt_tag_set(struct rt_root *r, uint64_t index, int tag);
HIDDEN void rt_tag_clear(struct rt_root *r, uint64_t index, int tag);
HIDDEN bool rt_tag_get(struct rt_root *r, uint64_t index, int tag);
/* First used slot >= *index whose tag is set (tag < 0: any used slot);
 * returns the item and sets *index, or NULL. */
HIDDEN void *rt_find_next(struct rt_root *r, uint64_t *index, int tag);

#endif
