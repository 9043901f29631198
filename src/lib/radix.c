/*
 * radix.c - a 64-way radix tree mapping a page index to an item pointer.
 *
 * About 670 lines, one data structure: insertion, removal, tags and the
 * lockless lookup depend on one another's rules about nodes (below), so
 * they stay in one file that states those rules once.
 *
 * Shape
 *   Every node has 64 slots.  A node's `shift` is the number of index bits
 *   below its slots: leaves have shift 0 and hold items, an interior node of
 *   shift s holds children of shift s - 6 and items that fill whole slots
 *   ("Large folios" below).  The root's shift sets the height
 *   and therefore the largest index the tree can hold,
 *   2^(root->shift + 6) - 1; the tree grows a level on top when a larger
 *   index is inserted and shrinks again when the root is left with only its
 *   first slot in use.  An empty tree has no node at all.  Nodes that
 *   become empty leave the tree at once, so a tree of N items spread over K
 *   leaves costs about K * (sizeof(struct rt_node) = 544 bytes) plus the
 *   few interior nodes above them.
 *
 * Large folios
 *   An item may cover several consecutive indices (a folio of 2^order
 *   pages).  Where it covers all 2^s indices under a slot of an interior
 *   node of shift s, it is held in that slot, marked (RT_ITEM_MARK, bit 0:
 *   items are at least 2-byte aligned), as the kernel's XArray holds a
 *   multi-index entry; the rest of it (an unaligned item's ends, or a
 *   folio smaller than 64 pages) fills one leaf slot per index.  Every slot
 *   holds the same pointer, so a lookup of any index of the folio is one
 *   walk from the root, and a walk to a folio of 64 pages or more ends a
 *   level above the leaves: a cache hit on a file of 256 KiB folios reads
 *   the slot of a node of 64 folios (4 KiB of slots for a 128 MiB file,
 *   which stay in the CPU's cache) instead of a leaf slot per page (256
 *   KiB, which the hits' own copies keep evicting), one dependent load from
 *   memory less per hit.  The tree does not know which slot is the folio's
 *   head; callers compare the item's own index.  rt_root.nr_heads counts
 *   items inserted: +1 per successful rt_insert, and rt_remove subtracts
 *   one per run of consecutive slots holding the same item (so removing a
 *   range of whole folios keeps it exact).
 *
 * Tags
 *   Two tags per slot (RT_TAG_DIRTY, RT_TAG_EDGE).  In a leaf, tag bit i is
 *   set iff slot i carries the tag; in an interior node, bit i is set iff
 *   some slot below child i carries it, or, for an item held in slot i,
 *   iff that slot carries it (at the slot's first index: no other index of
 *   the slot has a tag).  Tags belong to an item's first index.
 *   rt_find_next() uses the interior bits to skip untagged subtrees, so
 *   walking the dirty folios of a mostly clean file touches only the nodes
 *   on the way to dirty ones.
 *
 * Locking: none here.  The caller holds mapping->tree_lock (shared for
 * rt_lookup, rt_find_next, rt_tag_get and rt_range_empty; exclusive for
 * everything else), except for rt_lookup_lockless.
 *
 * Lockless lookups
 *   Cache hits walk the tree without the lock, so that readers write no
 *   shared cache line (mapping.c, read.c).  Three rules make that safe:
 *   - Type-stable nodes.  A tree never frees a node: nodes it no longer
 *     needs go to the pool's spare list, which every tree of the cache
 *     takes its nodes from, and their memory is freed only when the cache
 *     is destroyed.  A reader that follows a stale pointer reads a node
 *     (perhaps now in another tree, perhaps spare), never freed memory.
 *     The spares are bounded by the most nodes the cache's trees ever had
 *     at once, and what the caller gives beyond that (see "Nodes").
 *   - A change count.  Every change of the tree's shape (a slot filled or
 *     emptied, a node added or removed, the height changed) happens between
 *     two increments of r->seq, so it is odd meanwhile.  The reader reads
 *     the count first and checks it again before it follows any pointer it
 *     loaded: a pointer loaded while the count stayed even was in the tree,
 *     so it points at a live node (or an item the tree held).  Tag changes
 *     do not move the count: lockless readers do not look at tags.
 *   - Atomic words.  Everything a lockless reader loads (the root and its
 *     shift, kept in the rt_root beside it, and the slots) is stored
 *     with relaxed atomic stores, so a reader racing with a writer reads
 *     an old or a new value, never a torn one.
 *   The walk itself, rt_lookup_lockless, is inline in radix.h (a cache
 *   hit inlines it into pc_pread, see read_hit.h).
 *
 * Nodes
 *   This file allocates no memory.  A shared cache's trees live in a
 *   segment that several processes map at one address (docs/shared.md),
 *   so their nodes must too, and the segment's heap is the memory layer's
 *   (mem/segment.h), which lib may not call; nor may a pool hold a
 *   function to call (the library's code is at another address in each
 *   process).  So the caller gives the pool its nodes (rt_pool_give), and
 *   rt_insert fails with -ENOMEM, the tree unchanged, when the spares run
 *   out: the caller gives more and tries again (mem/mapping.c makes sure
 *   of RT_INSERT_MAX_NODES spares before an insert, from the cache's heap,
 *   cache_mem.c).  A removal that must split an item's slot takes a spare
 *   too, and with none empties the whole slot (radix.h, rt_remove).
 */
#include "lib/radix.h"

#include "lib/check.h"
#include "lib/util.h"

#include <errno.h>

/*
 * Test hooks (tests/test_radix.c declares them extern): the number of nodes
 * in trees now, and an allocation budget (< 0: unlimited; 0: every
 * allocation fails; n > 0: n more succeed) to exercise -ENOMEM with spares
 * in the pool.
 */
HIDDEN _Atomic long rt_test_nodes;
HIDDEN _Atomic long rt_test_alloc_budget = -1;

#define RT_MAX_SHIFT 60 /* 11 levels: 2^66 > 2^64 indices */

/* Stores of what lockless readers load (see "Lockless lookups"); the root
 * and its shift change together, while the count is odd. */
#define SET_SLOT(n, i, v) __atomic_store_n(&(n)->slots[i], (v), __ATOMIC_RELAXED)
static void set_root(struct rt_root *r, struct rt_node *n)
{
	__atomic_store_n(&r->node, n, __ATOMIC_RELAXED);
	__atomic_store_n(&r->shift, n ? n->shift : 0, __ATOMIC_RELAXED);
}

struct rt_node *rt_pool_take(struct rt_pool *p)
{
	shmutex_lock_live(&p->lock, p->cx);
	struct rt_node *n = p->spare;
	if (n) {
		p->spare = n->parent;
		atomic_store_explicit(&p->nr_spare, atomic_load_explicit(&p->nr_spare, memory_order_relaxed) - 1,
				      memory_order_relaxed);
	}
	shmutex_unlock(&p->lock, p->cx);
	return n;
}

static struct rt_node *node_alloc(struct rt_root *r, unsigned shift, struct rt_node *parent, unsigned offset)
{
	long budget = atomic_load_explicit(&rt_test_alloc_budget, memory_order_relaxed);
	if (__builtin_expect(budget >= 0, 0)) {
		if (budget == 0)
			return NULL;
		atomic_fetch_sub_explicit(&rt_test_alloc_budget, 1, memory_order_relaxed);
	}
	/* A spare's slots are all empty (node_free, or zeroed when given),
	 * and a lockless reader may still be looking at it: only the fields
	 * it does not read are reset with plain stores. */
	struct rt_node *n = rt_pool_take(r->pool);
	if (!n)
		return NULL;
	n->count = 0;
	for (int t = 0; t < RT_NTAGS; t++)
		n->tags[t] = 0;
	__atomic_store_n(&n->shift, (uint8_t)shift, __ATOMIC_RELAXED);
	n->offset = (uint8_t)offset;
	n->parent = parent;
	atomic_fetch_add_explicit(&rt_test_nodes, 1, memory_order_relaxed);
	return n;
}

/* n has left the tree: to the pool's spares, its slots emptied. */
static void node_free(struct rt_root *r, struct rt_node *n)
{
	atomic_fetch_sub_explicit(&rt_test_nodes, 1, memory_order_relaxed);
	for (unsigned i = 0; i < RT_SLOTS; i++)
		if (n->slots[i])
			SET_SLOT(n, i, NULL);
	rt_pool_give(r->pool, n, 1); /* its slots empty: a spare */
}

void rt_pool_init(struct rt_pool *p, const struct pc_shlock_ctx *cx)
{
	shmutex_init(&p->lock);
	p->cx = cx;
	p->spare = NULL;
	atomic_init(&p->nr_spare, 0);
}

void rt_pool_destroy(struct rt_pool *p)
{
	p->spare = NULL;
	atomic_store_explicit(&p->nr_spare, 0, memory_order_relaxed);
}

void rt_pool_give(struct rt_pool *p, struct rt_node *nodes, size_t n)
{
	if (n == 0)
		return;
	for (size_t i = 0; i + 1 < n; i++)
		nodes[i].parent = &nodes[i + 1];
	shmutex_lock_live(&p->lock, p->cx);
	nodes[n - 1].parent = p->spare;
	p->spare = nodes;
	atomic_store_explicit(&p->nr_spare, atomic_load_explicit(&p->nr_spare, memory_order_relaxed) + n,
			      memory_order_relaxed);
	shmutex_unlock(&p->lock, p->cx);
}

/* A change of the tree's shape is bracketed by these (count odd between). */
static void shape_change_begin(struct rt_root *r)
{
	/* write_seqcount_begin: the odd count, then smp_wmb().  An acquire
	 * RMW does not order later stores after its own store (arm64
	 * ldaxr/stlxr lets them pass; C11 gives no fence-fence pairing). */
#if PC_TSAN
	atomic_fetch_add_explicit(&r->seq, 1, memory_order_acq_rel); /* TSan has no fences */
#else
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
#endif
}

static void shape_change_end(struct rt_root *r)
{
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

void rt_init(struct rt_root *r, struct rt_pool *pool)
{
	PC_ASSERT(pool);
	r->node = NULL;
	r->shift = 0;
	r->nr_heads = 0;
	atomic_init(&r->seq, 0);
	r->pool = pool;
}

/* Slot p of a node of `shift` is a child node (not empty, not an item). */
static bool is_child(const void *p, unsigned shift)
{
	return shift && p && !rt_slot_is_item(p);
}

/* What a node of `shift` holds in a slot for `item`. */
static void *slot_value(void *item, unsigned shift)
{
	return shift ? (void *)((uintptr_t)item | RT_ITEM_MARK) : item;
}

/* [cur, cur + left) covers the whole slot of a node of `shift` that holds
 * cur, and is aligned to it. */
static bool covers_slot(uint64_t cur, uint64_t left, unsigned shift)
{
	uint64_t span = (uint64_t)1 << shift;
	return !(cur & (span - 1)) && left >= span;
}

/* [index, index + nr) holds RT_SLOTS indices aligned to RT_SLOTS. */
static bool holds_aligned_leaf(uint64_t index, uint64_t nr)
{
	uint64_t first = round_up(index, RT_SLOTS);
	return first >= index && first - index < nr && nr - (first - index) >= RT_SLOTS;
}

static void free_subtree(struct rt_root *r, struct rt_node *n)
{
	for (unsigned i = 0; i < RT_SLOTS && n->shift; i++)
		if (is_child(n->slots[i], n->shift))
			free_subtree(r, n->slots[i]);
	node_free(r, n);
}

void rt_destroy(struct rt_root *r)
{
	shape_change_begin(r);
	if (r->node)
		free_subtree(r, r->node);
	set_root(r, NULL);
	r->nr_heads = 0;
	shape_change_end(r);
}

void *rt_lookup(struct rt_root *r, uint64_t index)
{
	struct rt_node *n = r->node;
	if (!n || index > rt_maxindex(n->shift))
		return NULL;
	for (;;) {
		void *p = n->slots[rt_offset(index, n->shift)];
		if (!is_child(p, n->shift))
			return p ? rt_slot_item(p) : NULL;
		n = p;
	}
}

/* The node whose slot `index` resolves to (a leaf, or an interior node
 * holding an item there), or NULL where a child is missing.  For tags:
 * an item held in an interior slot carries the slot's tags at the slot's
 * first index only (where a leaf would hold its tags for it), so another
 * index inside that slot finds no slot to tag (NULL). */
static struct rt_node *find_tag_node(struct rt_root *r, uint64_t index)
{
	struct rt_node *n = r->node;
	if (!n || index > rt_maxindex(n->shift))
		return NULL;
	for (;;) {
		void *p = n->slots[rt_offset(index, n->shift)];
		if (!n->shift)
			return n;
		if (p && rt_slot_is_item(p))
			return index & (((uint64_t)1 << n->shift) - 1) ? NULL : n;
		if (!p)
			return NULL;
		n = p;
	}
}

/* Set tag bit `off` in n and the summary bits above it. */
static void tag_set_up(struct rt_node *n, unsigned off, int tag)
{
	for (;;) {
		uint64_t bit = (uint64_t)1 << off;
		if (n->tags[tag] & bit)
			return; /* ancestors already summarise it */
		n->tags[tag] |= bit;
		if (!n->parent)
			return;
		off = n->offset;
		n = n->parent;
	}
}

/* Clear tag bits `mask` in n; clear summary bits above while words empty. */
static void tag_clear_up(struct rt_node *n, uint64_t mask, int tag)
{
	for (;;) {
		if (!(n->tags[tag] & mask))
			return;
		n->tags[tag] &= ~mask;
		if (n->tags[tag] || !n->parent)
			return;
		mask = (uint64_t)1 << n->offset;
		n = n->parent;
	}
}

/* Free n and its ancestors while they are empty. */
static void delete_empty(struct rt_root *r, struct rt_node *n)
{
	while (n && n->count == 0) {
		struct rt_node *p = n->parent;
		if (p) {
			uint64_t bit = (uint64_t)1 << n->offset;
			SET_SLOT(p, n->offset, NULL);
			p->count--;
			for (int t = 0; t < RT_NTAGS; t++)
				tag_clear_up(p, bit, t); /* no-op: an empty child has no tags */
		} else {
			set_root(r, NULL);
		}
		node_free(r, n);
		n = p;
	}
}

/* Drop root levels whose only child is slot 0 (not an item held there:
 * a lower root could not hold it in one slot). */
static void shrink(struct rt_root *r)
{
	struct rt_node *n = r->node;
	while (n && n->count == 1 && is_child(n->slots[0], n->shift)) {
		struct rt_node *child = n->slots[0];
		child->parent = NULL;
		child->offset = 0;
		set_root(r, child);
		node_free(r, n);
		n = child;
	}
}

/* Add levels on top until the root covers `last`.  The tree must be non-empty. */
static int grow(struct rt_root *r, uint64_t last)
{
	while (last > rt_maxindex(r->node->shift)) {
		struct rt_node *old = r->node;
		struct rt_node *n = node_alloc(r, old->shift + RT_SHIFT, NULL, 0);
		if (!n)
			return -ENOMEM;
		SET_SLOT(n, 0, old);
		n->count = 1;
		for (int t = 0; t < RT_NTAGS; t++)
			n->tags[t] = old->tags[t] ? 1 : 0;
		old->parent = n;
		old->offset = 0;
		set_root(r, n);
	}
	return 0;
}

/* Empty slot `off` of interior node n, an item's, and its tags. */
static void clear_slot(struct rt_node *n, unsigned off)
{
	SET_SLOT(n, off, NULL);
	n->count--;
	for (int t = 0; t < RT_NTAGS; t++)
		tag_clear_up(n, (uint64_t)1 << off, t);
}

/*
 * An item held in slot `off` of interior node n moves down into a new
 * child that holds it in all its slots, so that part of it can be removed.
 * Its tag bits go with its first index (the child's slot 0; a slot that is
 * not the item's first carries none).  -ENOMEM leaves n as it was.
 */
static int split_slot(struct rt_root *r, struct rt_node *n, unsigned off)
{
	void *item = rt_slot_item(n->slots[off]);
	struct rt_node *c = node_alloc(r, n->shift - RT_SHIFT, n, off);
	if (!c)
		return -ENOMEM;
	void *v = slot_value(item, c->shift);
	for (unsigned i = 0; i < RT_SLOTS; i++)
		SET_SLOT(c, i, v);
	c->count = RT_SLOTS;
	for (int t = 0; t < RT_NTAGS; t++)
		c->tags[t] = (n->tags[t] >> off) & 1;
	SET_SLOT(n, off, c);
	return 0;
}

/* Clear slots [index, index+nr) and their tags; returns the runs of equal
 * items removed (the number of items, when whole items are removed). */
static uint64_t remove_range(struct rt_root *r, uint64_t index, uint64_t nr)
{
	uint64_t cur = index, left = nr, runs = 0;
	void *prev = NULL;

	while (left) {
		struct rt_node *n = r->node;
		if (!n || cur > rt_maxindex(n->shift))
			break;
		while (is_child(n->slots[rt_offset(cur, n->shift)], n->shift))
			n = n->slots[rt_offset(cur, n->shift)];
		unsigned off = rt_offset(cur, n->shift);
		void *p = n->slots[off];
		if (n->shift) {
			uint64_t span = (uint64_t)1 << n->shift;
			uint64_t step = u64_min(span - (cur & (span - 1)), left);
			if (p && !covers_slot(cur, left, n->shift) && split_slot(r, n, off) == 0)
				continue; /* walk down into the part to remove */
			if (!p) {
				prev = NULL; /* no subtree here: skip to the next slot */
			} else {
				if (rt_slot_item(p) != prev)
					runs++;
				prev = rt_slot_item(p);
				clear_slot(n, off);
				if (n->count == 0)
					delete_empty(r, n);
			}
			if (step >= left)
				break;
			cur += step;
			left -= step;
			continue;
		}
		unsigned cnt = (unsigned)u64_min(RT_SLOTS - off, left);
		uint64_t mask = (cnt == 64 ? ~(uint64_t)0 : (((uint64_t)1 << cnt) - 1)) << off;
		for (unsigned i = off; i < off + cnt; i++) {
			p = n->slots[i];
			if (!p) {
				prev = NULL;
				continue;
			}
			if (p != prev)
				runs++;
			prev = p;
			SET_SLOT(n, i, NULL);
			n->count--;
		}
		/* The leaf's tags in one step per tag, not one per slot. */
		for (int t = 0; t < RT_NTAGS; t++)
			tag_clear_up(n, mask, t);
		if (n->count == 0)
			delete_empty(r, n);
		cur += cnt;
		left -= cnt;
	}
	shrink(r);
	return runs;
}

bool rt_range_empty(struct rt_root *r, uint64_t index, uint64_t nr)
{
	if (nr == 0)
		return true;
	uint64_t i = index;
	if (!rt_find_next(r, &i, -1))
		return true;
	return i - index >= nr;
}

static int insert_range(struct rt_root *r, uint64_t index, uint64_t nr, void *item)
{
	uint64_t last = index + (nr - 1);

	if (!r->node) {
		unsigned shift = 0;
		while (last > rt_maxindex(shift))
			shift += RT_SHIFT;
		/* A root that can hold a whole leaf's worth of the item in a
		 * slot of its own, not a leaf (which stays one when the tree
		 * grows over it): a file's first folio of 64 pages or more. */
		if (!shift && holds_aligned_leaf(index, nr))
			shift = RT_SHIFT;
		struct rt_node *root = node_alloc(r, shift, NULL, 0);
		if (!root)
			return -ENOMEM;
		set_root(r, root);
	} else {
		if (!rt_range_empty(r, index, nr))
			return -EEXIST;
		if (grow(r, last) < 0) {
			shrink(r);
			return -ENOMEM;
		}
	}

	uint64_t cur = index, left = nr;
	while (left) {
		struct rt_node *n = r->node;
		while (n->shift && !covers_slot(cur, left, n->shift)) {
			unsigned off = rt_offset(cur, n->shift);
			struct rt_node *child = n->slots[off];
			if (!child) {
				child = node_alloc(r, n->shift - RT_SHIFT, n, off);
				if (!child) {
					/* Undo: free the empty path, then the slots filled. */
					delete_empty(r, n);
					remove_range(r, index, nr - left);
					shrink(r);
					return -ENOMEM;
				}
				SET_SLOT(n, off, child);
				n->count++;
			}
			n = child;
		}
		/* Whole slots of n, as many as the range fills (a leaf's slot
		 * is one index). */
		unsigned off = rt_offset(cur, n->shift);
		unsigned cnt = (unsigned)u64_min(RT_SLOTS - off, left >> n->shift);
		void *v = slot_value(item, n->shift);
		for (unsigned i = off; i < off + cnt; i++)
			SET_SLOT(n, i, v);
		n->count += cnt;
		cur += (uint64_t)cnt << n->shift;
		left -= (uint64_t)cnt << n->shift;
	}
	r->nr_heads++;
	return 0;
}

int rt_insert(struct rt_root *r, uint64_t index, uint64_t nr, void *item)
{
	if (!item || rt_slot_is_item(item) || nr == 0 || index + (nr - 1) < index)
		return -EINVAL;
	shape_change_begin(r);
	int err = insert_range(r, index, nr, item);
	shape_change_end(r);
	return err;
}

void rt_remove(struct rt_root *r, uint64_t index, uint64_t nr)
{
	if (nr == 0)
		return;
	if (index + (nr - 1) < index)
		nr = UINT64_MAX - index + 1; /* clamp at the top of the index space */
	if (nr == 0) /* index 0, nr 2^64: cannot be represented; remove all */
		nr = UINT64_MAX;
	shape_change_begin(r);
	uint64_t runs = remove_range(r, index, nr);
	shape_change_end(r);
	r->nr_heads = r->nr_heads >= runs ? r->nr_heads - runs : 0;
}

void rt_tag_set(struct rt_root *r, uint64_t index, int tag)
{
	if ((unsigned)tag >= RT_NTAGS)
		return;
	struct rt_node *n = find_tag_node(r, index);
	if (n) {
		unsigned off = rt_offset(index, n->shift);
		if (n->slots[off])
			tag_set_up(n, off, tag);
	}
}

void rt_tag_clear(struct rt_root *r, uint64_t index, int tag)
{
	if ((unsigned)tag >= RT_NTAGS)
		return;
	struct rt_node *n = find_tag_node(r, index);
	if (n)
		tag_clear_up(n, (uint64_t)1 << rt_offset(index, n->shift), tag);
}

bool rt_tag_get(struct rt_root *r, uint64_t index, int tag)
{
	if ((unsigned)tag >= RT_NTAGS)
		return false;
	struct rt_node *n = find_tag_node(r, index);
	return n && (n->tags[tag] & ((uint64_t)1 << rt_offset(index, n->shift)));
}

/* First slot >= off of n that is in use (tag < 0) or tagged; 64 if none. */
static inline unsigned next_slot(const struct rt_node *n, unsigned off, int tag)
{
	if (tag >= 0) {
		uint64_t m = off < 64 ? n->tags[tag] & (~(uint64_t)0 << off) : 0;
		return m ? (unsigned)__builtin_ctzll(m) : RT_SLOTS;
	}
	if (n->count == 0)
		return RT_SLOTS;
	for (; off < RT_SLOTS; off++)
		if (n->slots[off])
			return off;
	return RT_SLOTS;
}

void *rt_find_next(struct rt_root *r, uint64_t *index, int tag)
{
	if (tag >= RT_NTAGS)
		return NULL;
	struct rt_node *n = r->node;
	uint64_t idx = *index;
	if (!n || idx > rt_maxindex(n->shift))
		return NULL;
	unsigned off = rt_offset(idx, n->shift);

	for (;;) {
		unsigned found = next_slot(n, off, tag);
		if (found < RT_SLOTS) {
			if (found != off) /* start of slot `found`, lower bits zero */
				idx = (((idx >> n->shift) & ~RT_MASK) | found) << n->shift;
			void *p = n->slots[found];
			if (!is_child(p, n->shift)) {
				/* An item held in an interior slot carries its
				 * tags for its first index, the slot's start: from
				 * inside the slot, look on from the next one. */
				uint64_t inside = idx & (((uint64_t)1 << n->shift) - 1);
				if (tag >= 0 && inside) {
					off = found + 1;
					if (off < RT_SLOTS)
						idx = (((idx >> n->shift) & ~RT_MASK) | off) << n->shift;
					continue;
				}
				*index = idx;
				return rt_slot_item(p);
			}
			n = p;
			off = rt_offset(idx, n->shift);
			continue;
		}
		/* Nothing left in n: continue in the parent's next slot. */
		struct rt_node *p = n->parent;
		if (!p)
			return NULL;
		off = n->offset + 1u;
		if (off < RT_SLOTS)
			idx = (((idx >> p->shift) & ~RT_MASK) | off) << p->shift;
		n = p;
	}
}
