/*
 * span.c - zero-copy access: pc_read_begin / pc_read_end and
 * pc_write_begin / pc_write_end (the mmap and page_mkwrite analog), after
 * api.c has checked the arguments.
 *
 * A read span is a reference to one folio (a pin): the folio may leave the
 * file (truncate, punch, invalidation), but its memory is not freed, so
 * not reused, until pc_read_end drops the reference; eviction passes
 * referenced folios over.  It is found, read and counted as pc_pread finds,
 * reads and counts it (mapping_lookup, read_io_range,
 * read_fill_folio), and holds no lock.
 *
 * A write span is one folio of a buffered write, stopped between its steps
 * (write.c): pc_write_begin is write_folio_begin (the folio locked and
 * stable, its partly covered blocks zeroed, read or deferred, marked for
 * PC_DONTCACHE), the caller's stores are the copy, and pc_write_end is
 * write_folio_commit (uptodate and dirty exactly [off, off + copied), the
 * size raised) followed by write_finish (PC_DSYNC or the dirty throttle),
 * so a span is prepared and marked exactly as a pc_pwrite of its range.
 * Like pc_pwrite's copy it holds the file's inval_lock shared from begin to
 * end, so that truncate, punch and direct I/O, which take it exclusively,
 * come before or after the span, never in the middle.  (A counted shared
 * lock that lets readers pass a waiting writer, mapping.h: the span's
 * thread may read and write elsewhere in the file meanwhile.)  It also
 * holds a reference to
 * the mapping, so the commit is safe after the handle is closed.
 *
 * A write span may end short (copied < len).  What the caller stored past
 * `copied` must not become file data; write_folio_shorten takes care of
 * blocks that are clean or not uptodate, and the dirty bytes of the span,
 * which exist nowhere else, are saved at begin and put back here.
 */
#include "rw/span.h"

#include "mem/arena.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "lib/forkgen.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "rw/read.h"
#include "rw/read_hit.h"
#include "rw/read_io.h"
#include "mem/reclaim.h"
#include "lib/util.h"
#include "rw/write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Size of the largest folio: no span is longer, and none crosses a
 * multiple of it (folios are naturally aligned). */
static uint64_t max_folio_bytes(const struct pc_cache *c)
{
	return (uint64_t)PC_PAGE_SIZE << c->max_order;
}

/* A span of no bytes: it holds nothing, and ending it does nothing. */
static void span_set_empty(struct pc_span *s)
{
	s->data = NULL;
	s->len = 0;
	s->priv.state = SPAN_EMPTY;
}

/* ------------------------------------------------------------ read spans */

/* The folio holding off, referenced: found, or created and read (one
 * device read for [off, to), as a pc_pread miss).  *missed: it was not
 * cached. */
static int span_find_folio(struct pc_file *h, uint64_t off, uint64_t to, bool nowait, bool dontcache,
			   struct pc_folio **out, bool *missed)
{
	struct pc_mapping *m = h->m;
	*missed = false;
	for (;;) {
		struct pc_folio *f = mapping_lookup(m, off);
		if (f) {
			*out = f;
			return 0;
		}
		if (nowait)
			return -EAGAIN;
		if (__builtin_expect(read_test_before_miss != NULL, 0))
			read_test_before_miss(h);
		int err = read_io_range(m, off, to, RF_SYNC | (dontcache ? RF_DONTCACHE : 0), &f);
		if (err)
			return err;
		*missed = true;
		if (f) {
			*out = f;
			return 0;
		}
	}
}

ssize_t span_read_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s)
{
	struct pc_mapping *m = h->m;
	struct pc_cache *c = m->c;
	bool nowait = flags & PC_NOWAIT, dontcache = flags & PC_DONTCACHE;
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	span_set_empty(s);
	if (off >= size || !len)
		return 0;
	len = (size_t)u64_min(len, size - off);
	struct pc_folio *f;
	bool waited;
	int err = span_find_folio(h, off, u64_min(off + len, off + c->cfg.max_io_bytes), nowait, dontcache, &f,
				  &waited);
	if (err)
		return err;
	/* The size again, as pc_pread looks at it once it has the folio
	 * (read.c): a truncate meanwhile ends the span at the new end. */
	size = (uint64_t)atomic_load(&m->i_size);
	if (off >= size) {
		reclaim_release_folio(c, f);
		return 0;
	}
	len = (size_t)u64_min(len, size - off);
	size_t foff = off - folio_pos(f);
	size_t n = u64_min(folio_size(f) - foff, len);
	err = read_fill_folio(m, f, foff, n, nowait, &waited);
	if (err) {
		reclaim_release_folio(c, f);
		return err;
	}
	if (waited) {
		atomic_fetch_add_explicit(&m->st_miss, n, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->st_miss, n, memory_order_relaxed);
	} else {
		count_hit_bytes(m, n);
	}
	/* A cached read keeps the folio cached, as pc_pread does: a drop-behind
	 * folio seen referenced is kept when its drop comes (reclaim_try_drop). */
	if (!dontcache)
		lru_mark_accessed(f, foff, n, false);
	s->data = arena_data(c, f) + foff;
	s->len = n;
	s->priv = (struct pc_span_private){ .cache = c, .owner_generation = forkgen_now(), .folio = f, .off = off,
					    .len = n, .flags = flags, .state = SPAN_READ };
	return (ssize_t)n;
}

void span_read_end(struct pc_span *s)
{
	struct pc_cache *c = s->priv.cache;
	struct pc_folio *f = s->priv.folio;
	/* As pc_pread with PC_DONTCACHE once it is done with a folio: one that
	 * an uncached call created (this one, or read-ahead of an earlier one)
	 * goes, unless somebody else uses it.  Out of the index already (a
	 * truncate), it is only ours: dropping it then does nothing. */
	if (s->priv.flags & PC_DONTCACHE)
		reclaim_drop_behind(c, f);
	reclaim_release_folio(c, f); /* may free it: never touched after this */
	s->priv.folio = NULL;
}

/* ----------------------------------------------------------- write spans */

/* The write a span is part of, and its folio step, from the span. */
static struct write_ctx span_write_ctx(const struct pc_span *s)
{
	return (struct write_ctx){ s->priv.mapping, NULL, 0, s->priv.off, s->priv.off + s->priv.len, s->priv.flags };
}

static struct write_folio span_write_folio(const struct pc_span *s)
{
	struct pc_folio *f = s->priv.folio;
	return (struct write_folio){ f,
				     (size_t)(s->priv.off - folio_pos(f)),
				     s->priv.len,
				     s->priv.created,
				     s->priv.head_full,
				     s->priv.tail_full };
}

/*
 * Save the span's bytes that lie in dirty blocks (uptodate, or holding a
 * deferred partial write): one range from the first such block to the
 * last.  Nothing else of the span needs saving: clean blocks are on the
 * device, blocks not uptodate hold no file data yet.  The folio is locked
 * and not under writeback, so its dirty blocks stay what they are until
 * pc_write_end.
 */
static int save_dirty_bytes(struct pc_mapping *m, const struct write_folio *wf, struct pc_span_private *p)
{
	unsigned from = (unsigned)(wf->foff >> m->block_shift);
	unsigned end_blk = (unsigned)((wf->foff + wf->n - 1) >> m->block_shift) + 1;
	unsigned first, count, lo_blk = UINT32_MAX, hi_blk = 0;
	while (from < end_blk && bs_next_dirty_run(m, wf->f, from, &first, &count) && first < end_blk) {
		if (lo_blk == UINT32_MAX)
			lo_blk = first;
		hi_blk = (unsigned)u64_min(first + count, end_blk);
		from = first + count;
	}
	if (lo_blk == UINT32_MAX)
		return 0;
	size_t lo = u64_max(wf->foff, (size_t)lo_blk << m->block_shift);
	size_t hi = u64_min(wf->foff + wf->n, (size_t)hi_blk << m->block_shift);
	void *save = malloc(hi - lo);
	if (!save)
		return -ENOMEM;
	memcpy(save, arena_data(m->c, wf->f) + lo, hi - lo);
	p->save = save;
	p->save_off = lo;
	p->save_len = hi - lo;
	return 0;
}

/* Put the saved bytes at and after folio offset `from` back. */
static void restore_dirty_bytes(struct pc_mapping *m, const struct write_folio *wf, const struct pc_span *s,
				size_t from)
{
	size_t lo = u64_max(from, s->priv.save_off), hi = s->priv.save_off + s->priv.save_len;
	if (lo < hi)
		memcpy(arena_data(m->c, wf->f) + lo, (uint8_t *)s->priv.save + (lo - s->priv.save_off), hi - lo);
}

ssize_t span_write_begin(struct pc_file *h, uint64_t off, size_t len, int flags, struct pc_span *s)
{
	struct pc_mapping *m = h->m;
	uint64_t mf = max_folio_bytes(m->c);
	span_set_empty(s);
	/* No longer than one folio can be (nothing is reserved for more), nor
	 * past the largest file size. */
	len = (size_t)u64_min(u64_min(len, mf - off % mf), (uint64_t)m->max_bytes - off);
	if (!len)
		return 0;
	struct write_ctx w = { m, NULL, 0, off, off + len, flags };
	int err = write_admit(m, off, off + len, flags);
	if (err)
		return err;
	struct write_folio wf;
	inval_lock_shared(m);
	err = write_folio_begin(&w, off, &wf);
	if (!err) {
		s->priv = (struct pc_span_private){ .cache = m->c, .owner_generation = forkgen_now(), .mapping = m,
						    .folio = wf.f, .off = off,
						    .len = wf.n, .flags = flags, .state = SPAN_WRITE,
						    .created = wf.created, .head_full = wf.head_full,
						    .tail_full = wf.tail_full };
		err = save_dirty_bytes(m, &wf, &s->priv);
		if (err)
			write_folio_abandon(&w, &wf);
	}
	if (err) {
		inval_unlock(m);
		return err; /* api.c marks the span ended */
	}
	/* The span holds inval_lock and the folio lock from here to its end,
	 * across the caller's other calls, which may take another file's
	 * inval_lock (the header allows a write to another file): the lock is
	 * the span's, not one the thread's later calls nest in, so the
	 * per-thread record lets go of it (lib/check.h); span_write_end takes
	 * the record back. */
	lock_note_give(&m->inval_lock);
	atomic_fetch_add(&m->refs, 1); /* dropped by span_write_end */
	s->data = arena_data(m->c, wf.f) + wf.foff;
	s->len = wf.n;
	return (ssize_t)wf.n;
}

/*
 * Only `copied` bytes of the span count: put back what the caller may have
 * changed past them and prepare the folio for the shorter write.  When the
 * block holding the new end cannot be read (it must be with
 * PC_CFG_NO_DEFERRED_RMW, or to join an older partial write of that
 * block), nothing of the span is written.  Returns the bytes to commit,
 * or a negative errno (then none).
 */
static ssize_t span_shorten(const struct write_ctx *w, struct write_folio *wf, const struct pc_span *s,
			    size_t copied)
{
	size_t full = wf->n;
	restore_dirty_bytes(w->m, wf, s, wf->foff + copied);
	int err = write_folio_shorten(w, wf, copied);
	if (err && copied) {
		wf->n = full;
		restore_dirty_bytes(w->m, wf, s, wf->foff);
		write_folio_shorten(w, wf, 0);
	}
	return err ? err : (ssize_t)copied;
}

int span_write_end(struct pc_span *s, size_t copied)
{
	struct pc_mapping *m = s->priv.mapping;
	struct write_ctx w = span_write_ctx(s);
	struct write_folio wf = span_write_folio(s);
	int err = 0;

	lock_note_take(&m->inval_lock, LOCK_INVAL, TAKE_TRY); /* from the span */
	assert_folio_locked(wf.f);
	if (copied < wf.n) {
		ssize_t r = span_shorten(&w, &wf, s, copied);
		if (r < 0)
			err = (int)r;
		copied = r < 0 ? 0 : (size_t)r;
	}
	if (copied)
		write_folio_commit(&w, &wf);
	else
		write_folio_abandon(&w, &wf);
	inval_unlock(m);
	free(s->priv.save);
	s->priv.save = NULL;
	s->priv.folio = NULL;
	if (copied) {
		int e = write_finish(m, s->priv.off, copied, s->priv.flags);
		/* As pc_pwrite: a PC_DSYNC write not durable is an error; the
		 * throttle's error is the next call's to report. */
		if (e && (s->priv.flags & PC_DSYNC))
			err = e;
	}
	mapping_put(m);
	return err;
}
