/*
 * mapping.c - a file's folios: find, create and remove them in the index.
 *
 * The index (radix.c) points every 4 KiB page at the folio that holds it (a
 * leaf slot per page, or for a folio of 64 pages or more a slot per 64 of
 * them one level up), so a lookup is one tree walk whatever the folio
 * size.  The tree
 * is guarded by a per-file rwlock held only for the walk or the update,
 * never across I/O or a copy, so writers to different ranges of one file do
 * not serialise on it: they serialise only on the folios they share.
 * Lookups do not take it in the common case: they walk the tree without a
 * lock (radix.c, "Lockless lookups") and take the folio's reference only if
 * it is not being freed, then check that the tree did not change meanwhile;
 * eviction removes a folio only under the write lock and only when the
 * index's reference is the only other one.  When a writer raced, the lookup
 * takes the read lock.
 */
#include "mem/mapping.h"
#include "mem/file_slots.h"
#include "mem/cache_mem.h"

#include "mem/arena.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "mem/folio.h"
#include "lib/radix.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* The lockless way (radix.c, "Lockless lookups"): the reference is taken
 * on what the walk found, and kept only if the tree did not change since
 * the walk began (so the folio was still in it when the reference was
 * taken).  false: not decided, take the lock. */
static bool lookup_lockless(struct pc_mapping *m, uint64_t pos, struct pc_folio **out)
{
	uint32_t seq = rt_read_begin(&m->tree);
	struct pc_folio *f = rt_lookup_lockless(&m->tree, pos >> PC_PAGE_SHIFT, seq);
	if (f == RT_RETRY)
		return false;
	if (f && !folio_try_get(f))
		return false;
	if (!rt_unchanged_since(&m->tree, seq)) {
		/* Let go as a user (reclaim_release_folio): a user of a drop-behind
		 * folio that let go while this reference was held left the
		 * drop to whoever lets go last. */
		if (f)
			reclaim_release_folio(m->c, f);
		return false;
	}
	*out = f;
	return true;
}

struct pc_folio *mapping_lookup(struct pc_mapping *m, uint64_t pos)
{
	struct pc_folio *found;
	if (lookup_lockless(m, pos, &found))
		return found;
	tree_lock_shared(m);
	struct pc_folio *f = rt_lookup(&m->tree, pos >> PC_PAGE_SHIFT);
	if (f)
		folio_get(f);
	tree_unlock(m);
	return f;
}

unsigned mapping_gather(struct pc_mapping *m, uint64_t *index, uint64_t end_index, int tag,
			struct pc_folio **out, unsigned max)
{
	unsigned n = 0;
	uint64_t idx = *index;
	tree_lock_shared(m);
	/* Tags sit on a folio's first slot: start from the head of a folio
	 * that begins before idx. */
	struct pc_folio *first = rt_lookup(&m->tree, idx);
	if (first && first->index < idx)
		idx = first->index;
	while (n < max && idx < end_index) {
		uint64_t found = idx;
		struct pc_folio *f = rt_find_next(&m->tree, &found, tag);
		if (!f || found >= end_index) {
			idx = end_index;
			break;
		}
		/* A large folio fills several slots: report it once. */
		if (!n || out[n - 1] != f) {
			folio_get(f);
			out[n++] = f;
		}
		idx = f->index + (1ull << f->order);
	}
	tree_unlock(m);
	*index = idx;
	return n;
}

unsigned mapping_order_for(struct pc_mapping *m, uint64_t pos, uint64_t len)
{
	uint64_t first = pos >> PC_PAGE_SHIFT;
	uint64_t pages = ((pos + len + PC_PAGE_SIZE - 1) >> PC_PAGE_SHIFT) - first;
	unsigned order = pages > 1 ? 63u - (unsigned)__builtin_clzll(pages) : 0;
	if (order > m->c->max_order)
		order = m->c->max_order;
	/* The folio starts at pos's page: only as large as that page's alignment. */
	while (order > m->min_order && (first & ((1ull << order) - 1)))
		order--;
	if (order < m->min_order)
		order = m->min_order;
	return order;
}

/* Lock a found folio as asked; false if it left the index meanwhile. */
static int lock_found(struct pc_folio *f, struct pc_mapping *m, unsigned gf)
{
	if (gf & GF_LOCK) {
		if (gf & GF_NOWAIT) {
			if (!folio_trylock(f))
				return -EAGAIN;
		} else {
			folio_lock(f);
		}
		if (!folio_test(f, PF_INDEXED) || f->mapping != m) {
			folio_unlock(f);
			return 1;
		}
		if (gf & GF_STABLE) {
			if ((gf & GF_NOWAIT) && folio_test(f, PF_WRITEBACK)) {
				folio_unlock(f);
				return -EAGAIN;
			}
			folio_wait_clear(f, PF_WRITEBACK);
		}
	}
	return 0;
}

/* The largest order <= order whose aligned range at pos is not cached. */
static unsigned free_order_at(struct pc_mapping *m, uint64_t idx, unsigned order)
{
	tree_lock_shared(m);
	while (order > m->min_order &&
	       !rt_range_empty(&m->tree, idx & ~((1ull << order) - 1), 1ull << order))
		order--;
	tree_unlock(m);
	return order;
}

HIDDEN void (*mapping_test_after_alloc)(struct pc_folio *f);

/* rt_insert, whose pool takes no memory of its own (radix.c, "Nodes"):
 * given a chunk from the cache's heap first when it may run short, and
 * tried again when other inserts took the spares meanwhile. */
static int index_insert(struct pc_mapping *m, uint64_t start, uint64_t nr, struct pc_folio *f)
{
	struct pc_cache *c = m->c;
	for (;;) {
		bool refilled = rt_pool_spares(&c->node_pool) >= RT_INSERT_MAX_NODES || cache_nodes_refill(c) == 0;
		tree_lock_excl(m);
		int err = rt_insert(&m->tree, start, nr, f);
		tree_unlock(m);
		if (err != -ENOMEM || !refilled)
			return err;
	}
}

/* Insert a new folio for page idx; -EEXIST if the range got used. */
static int insert_new(struct pc_mapping *m, struct pc_folio *f, uint64_t idx, unsigned gf)
{
	uint64_t start = idx & ~((1ull << f->order) - 1);
	f->mapping = m;
	f->index = start;
	f->stamp = 0;
	atomic_store_explicit(&f->wb_pending, 0, memory_order_relaxed);
	int err = bs_init(m, f);
	if (err)
		return err;
	/* The index's reference, added to the caller's: a lookup that walked
	 * a stale tree may hold one on this descriptor now (it lets go of it
	 * once it sees the tree changed), which a store would erase. */
	atomic_fetch_add_explicit(&f->refcount, 1, memory_order_relaxed);
	folio_reset_flags(f, PF_INDEXED | ((gf & (GF_LOCK | GF_NEW_LOCKED)) ? PF_LOCKED : 0));
	err = index_insert(m, start, 1ull << f->order, f);
	if (err) {
		/* Not indexed after all: the caller lets go of its reference,
		 * and whoever lets go last frees it (folio_put). */
		folio_reset_flags(f, 0);
		atomic_fetch_sub_explicit(&f->refcount, 1, memory_order_relaxed);
		return err;
	}
	atomic_fetch_add_explicit(&m->st_cached, (int64_t)folio_size(f), memory_order_relaxed);
	lru_add(m->c, f);
	return 0;
}

struct pc_folio *mapping_get_folio(struct pc_mapping *m, uint64_t pos, unsigned order, unsigned gf,
				   bool *created)
{
	uint64_t idx = pos >> PC_PAGE_SHIFT;
	if (created)
		*created = false;
	for (;;) {
		struct pc_folio *f = mapping_lookup(m, pos);
		if (f) {
			int r = lock_found(f, m, gf);
			if (r == 0)
				return f;
			reclaim_release_folio(m->c, f); /* looked up again, or gone: as above */
			if (r < 0)
				return ERR_FOLIO(r);
			continue;
		}
		if (!(gf & GF_CREATE))
			return NULL;
		order = free_order_at(m, idx, order < m->min_order ? m->min_order : order);
		int err = 0;
		f = reclaim_alloc_folio(m->c, order, m->min_order, gf & GF_NOWAIT, &err);
		if (!f)
			return ERR_FOLIO(err);
		if (__builtin_expect(mapping_test_after_alloc != NULL, 0))
			mapping_test_after_alloc(f);
		err = insert_new(m, f, idx, gf);
		if (err == 0) {
			if (created)
				*created = true;
			return f;
		}
		/* Lost a race for the range, or no memory for block state:
		 * freed with the last reference (a stale lookup's may still be
		 * held), never under it. */
		folio_put(m->c, f);
		if (err != -EEXIST)
			return ERR_FOLIO(err);
	}
}

/* Clear PF_EDGE and uncount the edge, once however many clear it at once
 * (removal and a neighbour's write may race); true if this call did. */
static bool edge_flag_clear(struct pc_mapping *m, struct pc_folio *f)
{
	if (!(atomic_fetch_and_explicit(&f->flags, ~PF_EDGE, memory_order_acq_rel) & PF_EDGE))
		return false;
	atomic_fetch_sub_explicit(&m->nr_edges, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&m->c->edge_bytes, (int64_t)folio_size(f), memory_order_relaxed);
	return true;
}

/*
 * Take f out of the index, with everything else that names the mapping
 * (tree lock held for writing).  Once the lock is released, m may be gone:
 * a mapping being freed (mapping_put -> file_discard_all) only waits
 * for the folios it still finds in the index, so a remover that does not
 * hold a reference to m (reclaim) must not touch m after that.
 */
static void remove_locked_tree(struct pc_mapping *m, struct pc_folio *f)
{
	assert_tree_locked_excl(m);
	rt_remove(&m->tree, f->index, 1ull << f->order);
	folio_clear(f, PF_INDEXED);
	edge_flag_clear(m, f);
	lru_del(m->c, f);
	atomic_fetch_sub_explicit(&m->st_cached, (int64_t)folio_size(f), memory_order_relaxed);
}

void mapping_remove_folio(struct pc_mapping *m, struct pc_folio *f)
{
	struct pc_cache *c = m->c;

	assert_folio_locked(f);
	tree_lock_excl(m);
	bool indexed = folio_test(f, PF_INDEXED);
	if (indexed)
		remove_locked_tree(m, f);
	tree_unlock(m);
	if (indexed)
		folio_put(c, f); /* the index's reference */
}

bool mapping_remove_if_unused(struct pc_mapping *m, struct pc_folio *f, int refs)
{
	struct pc_cache *c = m->c;
	bool ok = false;
	tree_lock_excl(m);
	if (folio_test(f, PF_INDEXED) && atomic_load(&f->refcount) == refs &&
	    !folio_test(f, PF_DIRTY | PF_WRITEBACK)) {
		remove_locked_tree(m, f);
		ok = true;
	}
	tree_unlock(m);
	if (ok)
		folio_put(c, f); /* the index's reference */
	return ok;
}

void mapping_tag_dirty(struct pc_mapping *m, struct pc_folio *f)
{
	tree_lock_excl(m);
	if (folio_test(f, PF_INDEXED))
		rt_tag_set(&m->tree, f->index, RT_TAG_DIRTY);
	tree_unlock(m);
}

void mapping_untag_dirty(struct pc_mapping *m, struct pc_folio *f)
{
	tree_lock_excl(m);
	if (folio_test(f, PF_INDEXED) && !folio_test(f, PF_DIRTY))
		rt_tag_clear(&m->tree, f->index, RT_TAG_DIRTY);
	tree_unlock(m);
}

void mapping_set_edge(struct pc_mapping *m, struct pc_folio *f)
{
	if (atomic_fetch_or_explicit(&f->flags, PF_EDGE, memory_order_acq_rel) & PF_EDGE)
		return;
	f->stamp = folio_clock_ms(m->c);
	atomic_fetch_add_explicit(&m->nr_edges, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->c->edge_bytes, (int64_t)folio_size(f), memory_order_relaxed);
	atomic_fetch_add_explicit(&m->c->st_edge_kept, 1, memory_order_relaxed);
	tree_lock_excl(m);
	rt_tag_set(&m->tree, f->index, RT_TAG_EDGE);
	tree_unlock(m);
}

void mapping_clear_edge(struct pc_mapping *m, struct pc_folio *f)
{
	if (!edge_flag_clear(m, f))
		return;
	tree_lock_excl(m);
	if (folio_test(f, PF_INDEXED))
		rt_tag_clear(&m->tree, f->index, RT_TAG_EDGE);
	tree_unlock(m);
}

/*
 * The last reference frees the mapping: first what the layers above hold
 * of it (the cache's mapping_teardown hook, file.c: its folios and its
 * unseen write error), then what this layer made (the index, the
 * descriptors, the locks).  The hook keeps the calls going down the
 * layers: the memory layer never names the file layer.
 */
void mapping_put(struct pc_mapping *m)
{
	int old = atomic_fetch_sub(&m->refs, 1);

	PC_ASSERT(old > 0);
	if (old != 1)
		return;
	cache_proc(m->c)->mapping_teardown(m);
	rt_destroy(&m->tree);
	file_descriptors_close(m);
	cache_free(m->c, written_destroy(&m->written));
	file_slot_put(m);
	cache_free(m->c, m);
}

/* written_add, with the ranges' array grown from the cache's heap
 * (written.c allocates none): when that fails, what lies below `end` is
 * the file system's to tell, as past WRITTEN_MAX_RANGES. */
void mapping_written_add(struct pc_mapping *m, uint64_t start, uint64_t end)
{
	size_t cap;
	while ((cap = written_add(&m->written, start, end)) != 0) {
		struct pc_range *r = cache_zalloc(m->c, cap * sizeof(*r));
		if (!r) {
			written_give_up(&m->written, end);
			return;
		}
		cache_free(m->c, written_grow(&m->written, r, cap));
	}
}
