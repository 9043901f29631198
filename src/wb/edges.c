/*
 * edges.c - edge folios of uncached writes: kept for the neighbouring
 * write, within a memory budget, oldest dropped first.
 *
 * An uncached write that covers a block only partly leaves that block's
 * folio cached (PF_EDGE, not drop-behind) so that the write sharing the
 * block does not read it back from the device (seeds/dontcache-edge-pages).
 * How long the neighbour takes depends on how far apart the writers drift,
 * not on a clock: slow writers (PC_DSYNC on a loaded machine) may take
 * minutes.  So an edge is never dropped for its age while its file is open.
 * It goes when
 *   - a neighbour completes it (write.c marks it drop-behind),
 *   - the file is fsynced or closed (drop_edges: nobody is left to
 *     complete it that would not have done so before),
 *   - the clean edges of the cache hold more than edge_budget_bytes: the
 *     oldest clean ones go first (edges_trim; a dirty edge is dirty data,
 *     bounded by the dirty limit, and dropping it would cost a write and
 *     then the neighbour's read), or
 *   - the memory limit is reached: clean edges are evicted like any other
 *     clean folio (reclaim.c's FIFO order, also oldest first).
 * Before the budget drops edges, a writer that only adds edges waits a
 * little for the writers completing them (edges_wait_for_neighbours): it
 * bounds how far writers of one file drift apart.
 *
 * The order is a FIFO of (folio, generation) pairs in creation order.  An
 * edge that stops being one (completed, removed, freed) is not looked for
 * in it: its entry goes stale and is skipped when reached, or squeezed out
 * when the FIFO is full.  Folio descriptors are never freed, so an entry
 * can always be checked; the generation in the flags word tells a folio
 * freed and reused since.
 */
#include "wb/edges.h"
#include "mem/cache_mem.h"

#include "mem/arena.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "wb/dirty.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "lib/radix.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <stdlib.h>
#include <time.h>

#define EDGE_FIFO_MIN 1024
/* How long a writer that ran ahead waits for the edges it left to be
 * completed (edges_wait_for_neighbours), and how long without any edge
 * completed anywhere before it stops waiting. */
#define EDGE_WAIT_MAX_MS 2000
#define EDGE_WAIT_IDLE_MS 100

static uint32_t edge_folio_generation(const struct pc_folio *f)
{
	return atomic_load_explicit(&((struct pc_folio *)f)->flags, memory_order_acquire) >> PF_GEN_SHIFT;
}

static bool entry_live(struct pc_cache *c, const struct pc_edge_ref *e)
{
	const struct pc_folio *f = &c->folios[e->pfn];
	uint32_t fl = atomic_load_explicit(&((struct pc_folio *)f)->flags, memory_order_acquire);
	return (fl >> PF_GEN_SHIFT) == e->gen && (fl & PF_EDGE) && (fl & PF_INDEXED);
}

size_t edge_budget(const struct pc_cache *c)
{
	return c->cfg.edge_budget_bytes;
}

void edges_init(struct pc_cache *c)
{
	shmutex_init(&c->edge_lock);
}

void edges_destroy(struct pc_cache *c)
{
	cache_free(c, c->edge_fifo);
	c->edge_fifo = NULL;
}

static struct pc_edge_ref *fifo_at(struct pc_cache *c, uint32_t i)
{
	return &c->edge_fifo[(c->edge_head + i) % c->edge_cap];
}

/* Squeeze stale entries out, keeping the order (edge_lock held). */
static void fifo_compact(struct pc_cache *c)
{
	assert_held(&c->edge_lock);
	uint32_t kept = 0;
	for (uint32_t i = 0; i < c->edge_count; i++) {
		struct pc_edge_ref e = *fifo_at(c, i);
		if (entry_live(c, &e))
			*fifo_at(c, kept++) = e;
	}
	c->edge_count = kept;
}

/* Twice the room, the entries moved to the front (edge_lock held). */
static bool fifo_grow(struct pc_cache *c)
{
	assert_held(&c->edge_lock);
	uint32_t cap = c->edge_cap ? 2 * c->edge_cap : EDGE_FIFO_MIN;
	struct pc_edge_ref *v = cache_zalloc(c, (size_t)cap * sizeof(*v));
	if (!v)
		return false;
	for (uint32_t i = 0; i < c->edge_count; i++)
		v[i] = *fifo_at(c, i);
	cache_free(c, c->edge_fifo);
	c->edge_fifo = v;
	c->edge_cap = cap;
	c->edge_head = 0;
	return true;
}

/* Room for one more entry: stale ones squeezed out first, and the FIFO
 * grown when most are live (edge_lock held). */
static bool fifo_make_room(struct pc_cache *c)
{
	assert_held(&c->edge_lock);
	if (c->edge_count < c->edge_cap)
		return true;
	fifo_compact(c);
	if (c->edge_count < c->edge_cap - c->edge_cap / 4)
		return true;
	return fifo_grow(c) || c->edge_count < c->edge_cap;
}

void edge_keep(struct pc_mapping *m, struct pc_folio *f)
{
	struct pc_cache *c = m->c;

	assert_folio_locked(f);
	mapping_set_edge(m, f);
	struct pc_edge_ref e = { arena_pfn(c, f), edge_folio_generation(f) };
	cache_lock(c, &c->edge_lock, LOCK_LEAF);
	/* Out of memory for the FIFO: the edge is kept untracked (it still
	 * goes at fsync, close, completion or memory pressure). */
	if (fifo_make_room(c)) {
		*fifo_at(c, c->edge_count) = e;
		c->edge_count++;
	}
	cache_unlock(c, &c->edge_lock);
}

/*
 * An edge no neighbour will complete in time (its folio locked, indexed,
 * PF_EDGE): a clean one leaves the cache now; a dirty one (or one under
 * writeback) becomes an ordinary uncached folio, dropped once written.
 * Returns whether it stopped being an edge.
 */
static bool edge_let_go(struct pc_mapping *m, struct pc_folio *f)
{
	if (folio_test(f, PF_DIRTY | PF_WRITEBACK)) {
		mapping_clear_edge(m, f);
		folio_set(f, PF_DROPBEHIND);
		account_uncached(m, (int64_t)bs_dirty_bytes(m, f));
		flusher_kick(m->dom);
		return true;
	}
	if (mapping_remove_if_unused(m, f, 2))
		return true;
	/* Someone reads it: no longer ours to keep, reclaim's to evict. */
	mapping_clear_edge(m, f);
	return true;
}

/* The oldest entry, popped, if it is still an edge; false when the FIFO
 * is empty.  *f gets the folio with a reference, or NULL (a stale entry). */
static bool pop_oldest(struct pc_cache *c, struct pc_folio **f, struct pc_edge_ref *out)
{
	cache_lock(c, &c->edge_lock, LOCK_LEAF);
	if (!c->edge_count) {
		cache_unlock(c, &c->edge_lock);
		return false;
	}
	*out = *fifo_at(c, 0);
	c->edge_head = (c->edge_head + 1) % c->edge_cap;
	c->edge_count--;
	cache_unlock(c, &c->edge_lock);
	struct pc_folio *g = &c->folios[out->pfn];
	*f = NULL;
	if (entry_live(c, out) && folio_try_get(g)) {
		if (entry_live(c, out))
			*f = g;
		else
			reclaim_release_folio(c, g);
	}
	return true;
}

/* Put an entry back at the head (its folio was busy). */
static void push_oldest_back(struct pc_cache *c, const struct pc_edge_ref *e)
{
	cache_lock(c, &c->edge_lock, LOCK_LEAF);
	if (fifo_make_room(c)) {
		c->edge_head = (c->edge_head + c->edge_cap - 1) % c->edge_cap;
		c->edge_count++;
		*fifo_at(c, 0) = *e;
	}
	cache_unlock(c, &c->edge_lock);
}

/* Put a live entry back at the tail: a dirty edge, which the budget does
 * not count (edge_keep's order is kept for the clean ones). */
static void push_newest(struct pc_cache *c, const struct pc_edge_ref *e)
{
	cache_lock(c, &c->edge_lock, LOCK_LEAF);
	if (fifo_make_room(c)) {
		*fifo_at(c, c->edge_count) = *e;
		c->edge_count++;
	}
	cache_unlock(c, &c->edge_lock);
}

bool edges_over_budget(struct pc_cache *c)
{
	/* Clean edges are what the budget bounds: dirty ones (and those under
	 * writeback) are dirty data, which the dirty limit bounds already.
	 * Every such edge is in c->dirty or c->writeback, so this is at most
	 * the clean edges' bytes: the budget is never exceeded by more than
	 * the dirty data, and no clean edge goes while within it. */
	int64_t dirty = atomic_load_explicit(&c->dirty, memory_order_relaxed) +
			atomic_load_explicit(&c->writeback, memory_order_relaxed);
	int64_t edges = atomic_load_explicit(&c->edge_bytes, memory_order_relaxed);
	return edges - i64_max(dirty, 0) > (int64_t)edge_budget(c);
}

static void trim_to_budget(struct pc_cache *c)
{
	cache_lock(c, &c->edge_lock, LOCK_LEAF);
	uint32_t scan = c->edge_count; /* each entry once: dirty ones go round */
	cache_unlock(c, &c->edge_lock);
	while (scan-- && edges_over_budget(c)) {
		struct pc_folio *f;
		struct pc_edge_ref e;
		if (!pop_oldest(c, &f, &e))
			return;
		if (!f)
			continue;
		if (folio_test(f, PF_DIRTY | PF_WRITEBACK)) {
			push_newest(c, &e);
			reclaim_release_folio(c, f);
			continue;
		}
		if (!folio_trylock(f)) {
			/* Being written or completed right now: try again at
			 * the next trim rather than wait (callers hold locks). */
			push_oldest_back(c, &e);
			reclaim_release_folio(c, f);
			return;
		}
		/* Indexed and locked by us: its mapping cannot go meanwhile. */
		struct pc_mapping *m = f->mapping;
		if (m && folio_test(f, PF_INDEXED) && folio_test(f, PF_EDGE)) {
			if (folio_test(f, PF_DIRTY | PF_WRITEBACK)) {
				push_newest(c, &e);
			} else if (edge_let_go(m, f)) {
				atomic_fetch_add_explicit(&c->st_edge_evicted, 1, memory_order_relaxed);
			}
		}
		folio_unlock(f);
		reclaim_release_folio(c, f);
	}
}

/* Let edges go, oldest first, while they hold more than the budget.  One
 * trimmer at a time: two would each see the edges over the budget before
 * the other's let-go counted, and drop more than the excess. */
void edges_trim(struct pc_cache *c)
{
	if (atomic_exchange_explicit(&c->edge_trimming, true, memory_order_acquire))
		return;
	trim_to_budget(c);
	atomic_store_explicit(&c->edge_trimming, false, memory_order_release);
}

/*
 * Many writers filling one file drift apart (a few get the CPU, or their
 * device writes back first); every record a leader writes ahead of its
 * neighbours is an edge or two until they come.  Past the budget, dropping
 * the oldest costs those neighbours a read each; so a writer that left an
 * edge waits while other writers of the same file are completing edges
 * (they are catching up), at most EDGE_WAIT_MAX_MS.  With nobody
 * completing edges of the file (writers that never meet, lone edges) it
 * does not wait past EDGE_WAIT_IDLE_MS, and the trim drops the oldest.
 */
void edge_completed(struct pc_mapping *m)
{
	atomic_fetch_add_explicit(&m->c->st_edge_completed, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->edges_completed, 1, memory_order_relaxed);
	uint64_t now = now_ms();
	if (atomic_load_explicit(&m->edge_completed_ms, memory_order_relaxed) != now)
		atomic_store_explicit(&m->edge_completed_ms, now, memory_order_relaxed);
}

void edges_wait_for_neighbours(struct pc_mapping *m)
{
	struct pc_cache *c = m->c;
	uint64_t start = now_ms();
	uint64_t last_change = atomic_load_explicit(&m->edge_completed_ms, memory_order_relaxed);
	uint64_t done = atomic_load_explicit(&m->edges_completed, memory_order_relaxed);
	if (edges_over_budget(c))
		atomic_fetch_add_explicit(&c->st_edge_waits, 1, memory_order_relaxed);
	while (edges_over_budget(c)) {
		uint64_t now = now_ms();
		uint64_t d = atomic_load_explicit(&m->edges_completed, memory_order_relaxed);
		if (d != done) {
			done = d;
			last_change = now;
		}
		if (now - start >= EDGE_WAIT_MAX_MS || now - last_change >= EDGE_WAIT_IDLE_MS)
			return;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

void drop_edges(struct pc_mapping *m)
{
	uint64_t idx = 0;
	struct pc_folio *batch[32];
	while (atomic_load(&m->nr_edges) > 0) {
		unsigned n = mapping_gather(m, &idx, UINT64_MAX, RT_TAG_EDGE, batch, 32);
		if (!n)
			break;
		for (unsigned i = 0; i < n; i++) {
			struct pc_folio *f = batch[i];
			if (folio_trylock(f)) {
				if (folio_test(f, PF_EDGE) && folio_test(f, PF_INDEXED) && edge_let_go(m, f))
					atomic_fetch_add(&m->c->st_edge_expired, 1);
				folio_unlock(f);
			}
			reclaim_release_folio(m->c, f);
		}
	}
}
