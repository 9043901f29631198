/*
 * dirty.c - dirty accounting: a file's and its domain's dirty and
 * drop-behind (PC_DONTCACHE) byte counts, the cache's peak, and the list of
 * a domain's files that have dirty data (what the flusher looks at).
 *
 * A writeback domain is one backing device.  It counts dirty bytes, and
 * among them the bytes of drop-behind folios, so that uncached writers kick
 * its flusher as soon as a little uncached data is dirty and the flusher
 * cleans exactly that data first (flusher.c).
 */
#include "wb/dirty.h"

#include "api/cache.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --------------------------------------------------------- accounting */

void dirty_update_peak(struct pc_cache *c)
{
	int64_t d = atomic_load_explicit(&c->dirty, memory_order_relaxed);
	int64_t p = atomic_load_explicit(&c->peak_dirty, memory_order_relaxed);
	while (d > p && !atomic_compare_exchange_weak(&c->peak_dirty, &p, d))
		;
}

void account_uncached(struct pc_mapping *m, int64_t bytes)
{
	if (!bytes)
		return;
	atomic_fetch_add_explicit(&m->dom->uncached, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->c->uncached, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->nr_uncached, bytes, memory_order_relaxed);
}

void account_dirty(struct pc_mapping *m, struct pc_folio *f, int64_t bytes)
{
	if (!bytes)
		return;
	atomic_fetch_add_explicit(&m->dom->dirty, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->c->dirty, bytes, memory_order_relaxed);
	int64_t file_dirty = atomic_fetch_add_explicit(&m->nr_dirty, bytes, memory_order_relaxed) + bytes;
	/* Blocks are counted when they get dirty and when they get clean, in
	 * that order under the folio lock: below zero is a lost count. */
	PC_WARN_ONCE(file_dirty < 0, "a file's dirty bytes went below zero (%lld)", (long long)file_dirty);
	if (folio_test(f, PF_DROPBEHIND))
		account_uncached(m, bytes);
	if (bytes > 0) {
		atomic_fetch_add_explicit(&m->dirtied_total, (uint64_t)bytes, memory_order_relaxed);
		dirty_update_peak(m->c);
	}
}

/* ------------------------------------------------- the domain's files */

/*
 * The flusher looks only at files on its domain's dirty list, not at every
 * file of the cache (a hundred thousand closed, clean ones cost nothing).
 * A file goes on it when it gets dirty data (dirty_file_dirtied) and off it
 * when a flusher round finds nothing left to do for it.  Taking it off
 * races with a writer dirtying it again: the flusher clears the flag first
 * and looks again, the writer counts its data first and looks at the flag
 * after, so one of them puts it back.
 */
static void dirty_list_add(struct pc_mapping *m)
{
	struct pc_domain *d = m->dom;
	cache_lock(d->c, &d->lock, LOCK_LEAF);
	if (!atomic_load(&m->on_dirty_list)) {
		atomic_fetch_add(&m->refs, 1);
		m->dirty_next = NULL;
		m->dirty_prev = d->dirty_tail;
		if (d->dirty_tail)
			d->dirty_tail->dirty_next = m;
		else
			d->dirty_head = m;
		d->dirty_tail = m;
		atomic_store(&m->on_dirty_list, true);
	}
	cache_unlock(d->c, &d->lock);
}

void dirty_list_unlink(struct pc_domain *d, struct pc_mapping *m)
{
	assert_held(&d->lock);
	if (m->dirty_prev)
		m->dirty_prev->dirty_next = m->dirty_next;
	else
		d->dirty_head = m->dirty_next;
	if (m->dirty_next)
		m->dirty_next->dirty_prev = m->dirty_prev;
	else
		d->dirty_tail = m->dirty_prev;
	m->dirty_prev = m->dirty_next = NULL;
}

void dirty_forget_file(struct pc_mapping *m)
{
	struct pc_domain *d = m->dom;
	bool was = false;
	cache_lock(d->c, &d->lock, LOCK_LEAF);
	if (atomic_load(&m->on_dirty_list)) {
		dirty_list_unlink(d, m);
		atomic_store(&m->on_dirty_list, false);
		was = true;
	}
	cache_unlock(d->c, &d->lock);
	if (was)
		mapping_put(m); /* the list's reference */
}

/* A reservation ahead that the flusher has not made yet is work too: a
 * file whose data was all written meanwhile stays on the list until the
 * flusher made it (backing_reserve_background may find size_lock busy
 * and leave it for the next round). */
bool dirty_has_work(struct pc_mapping *m)
{
	return atomic_load(&m->nr_dirty) > 0 || atomic_load(&m->nr_uncached) > 0 || atomic_load(&m->nr_edges) > 0 ||
	       atomic_load(&m->closed_dirty) || atomic_load(&m->reserve_want) != 0;
}

/*
 * What makes m work for the flusher (its dirty bytes, counted relaxed, or
 * a reservation request) was stored before: order that before looking at
 * the flag, which the flusher clears before it looks at the work (the
 * race that dirty_list_add's comment describes).
 */
void dirty_file_wants_flusher(struct pc_mapping *m)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load(&m->on_dirty_list))
		dirty_list_add(m);
}

void dirty_file_dirtied(struct pc_mapping *m, struct pc_folio *f)
{
	dirty_file_wants_flusher(m);
	if (!atomic_load_explicit(&m->changed, memory_order_relaxed))
		atomic_store_explicit(&m->changed, true, memory_order_relaxed);
	f->stamp = folio_clock_ms(m->c); /* how long its data waited: see short_run */
	mapping_tag_dirty(m, f);
	uint64_t zero = 0;
	if (!atomic_load_explicit(&m->dirtied_when_ms, memory_order_relaxed))
		atomic_compare_exchange_strong(&m->dirtied_when_ms, &zero, now_ms());
}

/* The dirty bytes of files whose write-back keeps failing, which the
 * throttle leaves out of the limit (throttle.c says why).  Walks the
 * cache's file table under files_lock: failing files are rare, and this
 * runs only while some are (c->nr_failing). */
int64_t dirty_failing_bytes(struct pc_cache *c)
{
	int64_t sum = 0;
	files_lock(c);
	for (unsigned i = 0; i < c->file_hash_size; i++)
		for (struct pc_mapping *m = c->file_hash[i]; m; m = m->hash_next)
			if (failing_error(m))
				sum += i64_max(0, atomic_load(&m->nr_dirty));
	files_unlock(c);
	return sum;
}
