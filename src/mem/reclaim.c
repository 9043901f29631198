/*
 * reclaim.c - keeping folio memory under memory_limit.
 *
 * Policy: S3-FIFO without the ghost queue, i.e. a small probationary FIFO
 * (10 % of cached pages) in front of a main FIFO run as a CLOCK.  New folios
 * enter the small queue.  A folio reaching the head of the small queue that
 * was accessed again since it entered moves to the main queue; one that was
 * not is evicted at once.  "Again": the use that brought it in (the read
 * that missed, a read-ahead folio's first reader going through it) is no
 * reuse (lru_mark_accessed), else a scan would be promoted as a whole.
 * At the head of the main queue an accessed folio gets a second chance
 * (moved to the tail, its bit cleared).  Why: a scan
 * (a large sequential read or write touched once) passes through the small
 * queue and leaves without displacing the working set in the main queue,
 * which LRU cannot do; and a hit costs one flag test (no list move, no
 * lock), so cached reads never contend on the queue lock.
 *
 * Only clean, unlocked, unreferenced folios are evicted.  Dirty ones are
 * passed over and the flusher is asked to write back; an allocation that
 * finds nothing to evict waits for writeback to clean something.
 */
#include "mem/reclaim.h"

#include "mem/arena.h"
#include "api/cache.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "lib/progress.h"
#include "lib/util.h"

#include <errno.h>
#include <time.h>

static uint32_t *queue_head(struct pc_cache *c, bool main) { return main ? &c->main_head : &c->small_head; }
static uint32_t *queue_tail(struct pc_cache *c, bool main) { return main ? &c->main_tail : &c->small_tail; }

static void queue_push_tail(struct pc_cache *c, struct pc_folio *f, bool main)
{
	uint32_t pfn = arena_pfn(c, f);
	uint32_t *tail = queue_tail(c, main);
	f->lru_next = PC_NONE;
	f->lru_prev = *tail;
	if (*tail != PC_NONE)
		c->folios[*tail].lru_next = pfn;
	else
		*queue_head(c, main) = pfn;
	*tail = pfn;
	if (main) {
		folio_set(f, PF_LRU | PF_MAINQ);
		c->main_pages += 1u << f->order;
	} else {
		folio_set(f, PF_LRU);
		folio_clear(f, PF_MAINQ);
		c->small_pages += 1u << f->order;
	}
}

static void queue_unlink(struct pc_cache *c, struct pc_folio *f)
{
	bool main = folio_test(f, PF_MAINQ);
	if (f->lru_prev != PC_NONE)
		c->folios[f->lru_prev].lru_next = f->lru_next;
	else
		*queue_head(c, main) = f->lru_next;
	if (f->lru_next != PC_NONE)
		c->folios[f->lru_next].lru_prev = f->lru_prev;
	else
		*queue_tail(c, main) = f->lru_prev;
	f->lru_prev = f->lru_next = PC_NONE;
	if (main)
		c->main_pages -= 1u << f->order;
	else
		c->small_pages -= 1u << f->order;
	folio_clear(f, PF_LRU | PF_MAINQ);
}

void lru_add(struct pc_cache *c, struct pc_folio *f)
{
	cache_lock(c, &c->lru_lock, LOCK_LEAF);
	queue_push_tail(c, f, false);
	cache_unlock(c, &c->lru_lock);
}

void lru_del(struct pc_cache *c, struct pc_folio *f)
{
	cache_lock(c, &c->lru_lock, LOCK_LEAF);
	if (folio_test(f, PF_LRU))
		queue_unlink(c, f);
	cache_unlock(c, &c->lru_lock);
}

/*
 * Record an access of [foff, foff+n) of f.  The first use since f entered
 * the cache is no reuse: the read that missed, or a reader going through
 * a folio read ahead for it, uses it once, as a scan does with everything.
 * Counting it would promote every scanned folio past the small queue and
 * let a scan push the working set out (the kernel's mark_page_accessed
 * likewise activates a page only on its second use).  A large folio is
 * read in several calls, in order, by a scan: those go on from where the
 * furthest access so far ended (the cursor, in eighths of the folio, kept
 * in the folio so that any handle or thread continues it), and are the
 * same first use.  An access that starts before the cursor comes back to
 * what was used: a reuse, PF_REFERENCED; so does one that starts in the
 * cursor's eighth unless its reader's previous read ended where it starts
 * (`continues`, the handle's hint: a hot block read again and again inside
 * one eighth is a reuse, a scan's next read is not).  (An access starting
 * past the cursor while a scan is inside the folio is taken as the scan's:
 * rare, and it only delays a reference.)
 */
static unsigned eighth_of(const struct pc_folio *f, size_t foff)
{
	return (unsigned)((foff << 3) >> (PC_PAGE_SHIFT + f->order));
}

void lru_mark_accessed(struct pc_folio *f, size_t foff, size_t n, bool continues)
{
	uint32_t fl = atomic_load_explicit(&f->flags, memory_order_acquire);
	if (fl & PF_REFERENCED)
		return;
	unsigned first = eighth_of(f, foff), last = eighth_of(f, foff + (n ? n - 1 : 0));
	if (!(fl & PF_TOUCHED)) {
		/* The cursor before the flag: whoever sees the flag sees it. */
		folio_ra_byte_set(f, ~RA_ORDER_MASK, last << RA_CURSOR_SHIFT);
		if (!(atomic_fetch_or(&f->flags, PF_TOUCHED) & PF_TOUCHED))
			return;
		/* Another access came first meanwhile: judged after it. */
	}
	unsigned cursor = atomic_load_explicit(&f->ra_order, memory_order_relaxed) >> RA_CURSOR_SHIFT;
	if (first < cursor || (first == cursor && !continues)) {
		atomic_fetch_or(&f->flags, PF_REFERENCED);
		return;
	}
	if (last > cursor)
		folio_ra_byte_set(f, ~RA_ORDER_MASK, last << RA_CURSOR_SHIFT);
}

/* Ask write-back to clean memory (the process's want_free, flusher.c's: memory
 * cannot name the layer above it). */
static void kick_all_flushers(struct pc_cache *c)
{
	cache_proc(c)->want_free(c);
}

/*
 * Take the next eviction candidate off its queue with a reference, or
 * NULL.  Accessed folios are rotated here, under the queue lock.
 */
static struct pc_folio *isolate_next(struct pc_cache *c, bool *saw_dirty)
{
	struct pc_folio *f = NULL;
	cache_lock(c, &c->lru_lock, LOCK_LEAF);
	uint64_t total = c->small_pages + c->main_pages;
	bool from_main = c->small_head == PC_NONE || (c->small_pages * 10 < total && c->main_head != PC_NONE);
	uint32_t pfn = *queue_head(c, from_main);
	if (pfn != PC_NONE) {
		f = &c->folios[pfn];
		queue_unlink(c, f);
		uint32_t fl = atomic_load(&f->flags);
		if (fl & PF_REFERENCED) {
			folio_clear(f, PF_REFERENCED);
			queue_push_tail(c, f, true);
			f = NULL; /* second chance: caller scans on */
		} else if (fl & (PF_DIRTY | PF_WRITEBACK | PF_LOCKED) ||
			   atomic_load(&f->refcount) > 1) {
			if (fl & PF_DIRTY)
				*saw_dirty = true;
			queue_push_tail(c, f, true);
			f = NULL;
		} else {
			folio_get(f);
		}
	}
	cache_unlock(c, &c->lru_lock);
	return f;
}

static bool lru_empty(struct pc_cache *c)
{
	cache_lock(c, &c->lru_lock, LOCK_LEAF);
	bool e = c->small_head == PC_NONE && c->main_head == PC_NONE;
	cache_unlock(c, &c->lru_lock);
	return e;
}

/* Evict an isolated folio; puts it back on the main queue if it got busy. */
static uint64_t evict_isolated(struct pc_cache *c, struct pc_folio *f)
{
	uint64_t pages = 1u << f->order;
	bool ok = false;
	if (folio_trylock(f)) {
		/* Indexed and locked by us: its mapping cannot be freed under
		 * us (freeing it takes every indexed folio's lock first). */
		struct pc_mapping *m = f->mapping;
		ok = m && folio_test(f, PF_INDEXED) && mapping_remove_if_unused(m, f, 2);
		folio_unlock(f);
	}
	if (ok) {
		atomic_fetch_add_explicit(&c->st_evictions, 1, memory_order_relaxed);
	} else if (folio_test(f, PF_INDEXED)) {
		cache_lock(c, &c->lru_lock, LOCK_LEAF);
		if (!folio_test(f, PF_LRU) && folio_test(f, PF_INDEXED))
			queue_push_tail(c, f, true);
		cache_unlock(c, &c->lru_lock);
	}
	reclaim_release_folio(c, f);
	return ok ? pages : 0;
}

uint64_t reclaim_pages(struct pc_cache *c, uint64_t pages)
{
	uint64_t freed = 0;
	bool saw_dirty = false;
	/* Scan at most twice the cache: every folio gets its second chance. */
	uint64_t budget = 2 * (uint64_t)c->npages + 16;
	while (freed < pages && budget-- && !lru_empty(c)) {
		struct pc_folio *f = isolate_next(c, &saw_dirty);
		if (f)
			freed += evict_isolated(c, f);
	}
	if (saw_dirty && freed < pages)
		kick_all_flushers(c);
	return freed;
}

static struct pc_folio *alloc_any_order(struct pc_cache *c, unsigned order, unsigned min_order)
{
	for (int o = (int)order; o >= (int)min_order; o--) {
		uint32_t pfn = arena_alloc(c, (unsigned)o);
		if (pfn != PC_NONE) {
			struct pc_folio *f = &c->folios[pfn];
			f->order = (uint8_t)o;
			f->mapping = NULL;
			f->bx = NULL;
			folio_reset_flags(f, 0);
			atomic_store_explicit(&f->refcount, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->st_folios, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->st_cached, folio_size(f), memory_order_relaxed);
			return f;
		}
	}
	return NULL;
}

/*
 * Nothing can free memory: no writeback is in flight, nothing could be
 * evicted, and files whose writeback keeps failing hold dirty data.  Only
 * the fault clearing would help, and waiting for that would be for ever:
 * the allocation fails with the write error instead.
 */
#define ALLOC_STUCK_ROUNDS 3
static int alloc_stuck_error(struct pc_cache *c)
{
	if (!atomic_load(&c->nr_failing) || atomic_load(&c->writeback) > 0)
		return 0;
	return atomic_load(&c->last_wb_error);
}

struct pc_folio *reclaim_alloc_folio(struct pc_cache *c, unsigned order, unsigned min_order, bool nowait, int *err)
{
	unsigned stuck = 0;

	if (!nowait)
		lock_check_may_wait(LOCK_TREE);
	for (;;) {
		struct pc_folio *f = alloc_any_order(c, order, min_order);
		if (f)
			return f;
		if (reclaim_pages(c, 1ull << order))
			continue;
		if (nowait) {
			*err = -EAGAIN;
			return NULL;
		}
		int e = alloc_stuck_error(c);
		stuck = e ? stuck + 1 : 0;
		if (stuck > ALLOC_STUCK_ROUNDS) {
			*err = e;
			return NULL;
		}
		kick_all_flushers(c);
		/* Registered, look once more, then sleep until memory is freed or
		 * made freeable (or 50 ms pass: writeback may be slow). */
		uint32_t seen = progress_begin(&c->mem_progress);
		f = alloc_any_order(c, order, min_order);
		if (!f)
			progress_wait(&c->mem_progress, seen, 50);
		progress_end(&c->mem_progress);
		if (f)
			return f;
	}
}

bool reclaim_try_drop(struct pc_cache *c, struct pc_folio *f, bool locked)
{
	if (!folio_test(f, PF_DROPBEHIND) || folio_test(f, PF_DIRTY | PF_WRITEBACK))
		return false;
	if (locked)
		assert_folio_locked(f);
	else if (!folio_trylock(f))
		return false;
	struct pc_mapping *m = f->mapping;
	bool ok = false;
	if (folio_test(f, PF_USED)) {
		/* A cached access came while it was under writeback (when
		 * the mark cannot change): it stays cached.  It is clean, so no
		 * uncached bytes are counted for it. */
		if (!folio_test(f, PF_DIRTY))
			folio_clear(f, PF_DROPBEHIND | PF_DROP_PENDING);
	} else {
		ok = m && folio_test(f, PF_INDEXED) && mapping_remove_if_unused(m, f, 2);
	}
	if (!locked)
		folio_unlock(f);
	if (ok)
		atomic_fetch_add_explicit(&c->st_drops, 1, memory_order_relaxed);
	return ok;
}

void reclaim_drop_behind(struct pc_cache *c, struct pc_folio *f)
{
	if (!folio_test(f, PF_DROPBEHIND) || reclaim_try_drop(c, f, false))
		return;
	/* Busy: the read that brought it in is still letting go of it (the
	 * folio lock, its reference), or someone else holds it.  Whoever lets
	 * go last drops it (reclaim_release_folio); a cached use meanwhile keeps it. */
	if (!folio_test(f, PF_USED))
		folio_set(f, PF_DROP_PENDING);
}

/* A clean drop-behind folio that its write-back left to its last user
 * (PF_DROP_PENDING), still indexed, not locked by anyone. */
static bool drop_pending(const struct pc_folio *f)
{
	uint32_t fl = atomic_load_explicit(&((struct pc_folio *)f)->flags, memory_order_seq_cst);
	const uint32_t want = PF_DROPBEHIND | PF_DROP_PENDING | PF_INDEXED;
	return (fl & want) == want && !(fl & (PF_DIRTY | PF_WRITEBACK | PF_LOCKED));
}

HIDDEN void (*reclaim_test_before_last_step)(struct pc_folio *f);

/*
 * The last user of a clean drop-behind folio (besides the index) drops it.
 * Writeback completion tries first, but a reader or a batch walk may hold a
 * reference at that moment; then it sets PF_DROP_PENDING and whoever lets
 * go last does it.  (For folios of uncached reads only once their reader
 * is done with them, reclaim_drop_behind: read-ahead must not lose them
 * before the reader copies them.)  Only with the folio lock (trylock),
 * which keeps its mapping alive.
 *
 * Who is the last user is decided by the compare-and-swap that takes the
 * count down: each step is one atomic step, so of two users letting go at
 * once exactly one finds the count at 2 (the index's and its own).  A load
 * of the count followed by a separate decrement let each see the other's
 * reference, and neither dropped the folio (a drop-behind block stayed
 * cached after fsync: pcfs_interleaved).  The user that finds 2 with no
 * drop pending steps down to 1 and then reads the flags again: another
 * user may have come and gone between its look and its step (a write-back
 * gathered the folio, wrote it, marked it pending and let go, seeing this
 * user's reference), and its step down to 2 is what this user's
 * compare-and-swap read, so the mark is seen.  It then takes a reference
 * again, if the folio still has one (its memory is never unmapped), and
 * lets go as a user once more: the folio may even have been reused by
 * then, and a user of it may drop it as well as any other.
 */
void reclaim_release_folio(struct pc_cache *c, struct pc_folio *f)
{
	int32_t r = atomic_load_explicit(&f->refcount, memory_order_seq_cst);
	for (;;) {
		if (r > 2) {
			if (atomic_compare_exchange_weak_explicit(&f->refcount, &r, r - 1, memory_order_seq_cst,
								  memory_order_seq_cst))
				return;
			continue;
		}
		if (r < 2) { /* out of the index: the last reference frees it */
			folio_put(c, f);
			return;
		}
		if (drop_pending(f)) {
			/* A reference taken meanwhile makes reclaim_try_drop
			 * decline: look again, its holder may be the last user
			 * now (drop_pending fails for good on every other reason
			 * reclaim_try_drop has to decline). */
			if (reclaim_try_drop(c, f, false)) {
				folio_put(c, f);
				return;
			}
			r = atomic_load_explicit(&f->refcount, memory_order_seq_cst);
			continue;
		}
		if (__builtin_expect(reclaim_test_before_last_step != NULL, 0))
			reclaim_test_before_last_step(f);
		if (!atomic_compare_exchange_strong_explicit(&f->refcount, &r, 1, memory_order_seq_cst,
							     memory_order_seq_cst))
			continue;
		if (!drop_pending(f) || !folio_try_get(f))
			return;
		r = atomic_load_explicit(&f->refcount, memory_order_seq_cst);
	}
}
