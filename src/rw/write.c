/*
 * write.c - the buffered write path: for each folio, begin (get it locked
 * and stable, prepare partly covered blocks), copy, end (uptodate and dirty
 * in one state-lock round), then the dirty throttle.  Uncached writes
 * (PC_DONTCACHE) mark the folios they create drop-behind, except edge
 * folios, which are kept until the neighbouring write completes them.
 *
 * Partly covered blocks:
 *   - in a hole or past the end of the backing file: the uncovered part is
 *     zeroed (nothing to read); the block becomes uptodate at write end;
 *   - holding data on the device: not read now.  The written bytes become
 *     the block's valid range; if neighbouring writes fill the rest before
 *     writeback, nothing is ever read; otherwise the flusher, or a reader,
 *     reads and merges.  (The kernel reads such a block at write begin.)
 *     PC_DSYNC writes and PC_CFG_NO_DEFERRED_RMW read it now, as does a
 *     write whose range would be disjoint from the block's valid range.
 */
#include "rw/write.h"

#include "mem/arena.h"
#include "io/backend.h"
#include "wb/backing.h"
#include "mem/block_state.h"
#include "wb/dirty.h"
#include "wb/edges.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "mem/fill.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "mem/reclaim.h"
#include "wb/throttle.h"
#include "lib/util.h"
#include "wb/writeback.h"
#include "lib/written.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Folio order for the write at pos: uncached writes get their partly
 * covered ends as smallest folios (edges) and large folios only where they
 * cover them whole. */
static unsigned write_order(const struct write_ctx *w, uint64_t pos)
{
	struct pc_mapping *m = w->m;
	if (!(w->flags & PC_DONTCACHE))
		return mapping_order_for(m, pos, w->end - pos);
	uint64_t min_fs = (uint64_t)PC_PAGE_SIZE << m->min_order;
	uint64_t whole_end = round_down(w->end, min_fs);
	if (pos % min_fs || whole_end <= pos)
		return m->min_order;
	return mapping_order_for(m, pos, whole_end - pos);
}

/* Does the block at bpos of the backing file hold no data?  Ask the file
 * system only when our own records do not know. */
static bool block_has_no_data(struct pc_mapping *m, uint64_t bpos)
{
	if (bpos >= (uint64_t)atomic_load(&m->data_end))
		return true;
	if (written_known_hole(&m->written, bpos, bpos + m->block_size))
		return true;
	return probe_is_hole(mproc(m)->fd, (off_t)bpos, m->block_size);
}

/*
 * Is block blk valid around a partial write of [s, e) with nothing read?
 * It is when it is uptodate, or when it holds no data on the device, or
 * all of it the write leaves lies past the end of the backing file: then
 * that part is zeroed (and the block becomes uptodate at write end).
 * Otherwise *has_valid tells whether it holds a deferred partial write
 * already, [*vs, *ve).
 */
static bool partial_block_complete(struct pc_mapping *m, struct pc_folio *f, unsigned blk, uint32_t s, uint32_t e,
				   bool *has_valid, uint32_t *vs, uint32_t *ve)
{
	*has_valid = false;
	if (bs_block_uptodate(m, f, blk))
		return true;
	*has_valid = bs_block_valid(m, f, blk, vs, ve);
	uint64_t bpos = folio_pos(f) + ((uint64_t)blk << m->block_shift);
	bool rest_is_zero = s == 0 && bpos + e >= (uint64_t)atomic_load(&m->data_end);
	if (*has_valid || !(rest_is_zero || block_has_no_data(m, bpos)))
		return false;
	uint8_t *p = arena_data(m->c, f) + ((size_t)blk << m->block_shift);
	memset(p, 0, s);
	memset(p + e, 0, m->block_size - e);
	return true;
}

/* One valid range per block: a write disjoint from the block's range must
 * read the rest first. */
static bool disjoint_from_valid(bool has_valid, uint32_t vs, uint32_t ve, uint32_t s, uint32_t e)
{
	return has_valid && (e < vs || s > ve);
}

/* Leave a partial write of a block to be merged later (deferred
 * read-modify-write): room for its valid range, counted once per block. */
static int defer_partial_block(struct pc_mapping *m, struct pc_folio *f, bool has_valid)
{
	int err = bs_prepare_partial(m, f);
	if (err)
		return err;
	if (!has_valid) {
		atomic_fetch_add_explicit(&m->st_deferred, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->c->st_deferred, 1, memory_order_relaxed);
		if (!f->stamp) /* when it started waiting for a neighbour */
			f->stamp = folio_clock_ms(m->c);
	}
	return 0;
}

/*
 * Prepare a partly written block blk of the locked folio for a write of
 * [s, e) (block offsets).  Returns 1 when the rest of the block is valid
 * without a read (uptodate, or zeroed: nothing written there yet, or read
 * where the file had data at open), PARTIAL_READ when it was read from
 * where only this cache's writes put data (a neighbour wrote the rest
 * already), 0 when the write is deferred, or a negative errno.
 */
enum { PARTIAL_READ = 2 };
static int prepare_partial_block(const struct write_ctx *w, struct pc_folio *f, unsigned blk, uint32_t s,
				 uint32_t e)
{
	struct pc_mapping *m = w->m;
	uint32_t vs = 0, ve = 0;
	bool has_valid;

	assert_folio_locked(f);
	if (partial_block_complete(m, f, blk, s, e, &has_valid, &vs, &ve))
		return 1;
	bool can_defer = !(w->flags & PC_DSYNC) && !(m->c->cfg.flags & PC_CFG_NO_DEFERRED_RMW) &&
			 !disjoint_from_valid(has_valid, vs, ve, s, e);
	if (can_defer) {
		int err = defer_partial_block(m, f, has_valid);
		return err ? err : 0;
	}
	if (w->flags & PC_NOWAIT)
		return -EAGAIN;
	int err = fill_range(m, f, (size_t)blk << m->block_shift, m->block_size);
	if (err)
		return err;
	/* Past the size at open only our own writes put data: the rest of
	 * this block is a neighbour's, written already. */
	uint64_t bpos = folio_pos(f) + ((uint64_t)blk << m->block_shift);
	return bpos >= m->written.base_end ? PARTIAL_READ : 1;
}

/*
 * Prepare the first and last blocks of [foff, foff+n) in the folio.
 * *awaits gets whether a partly covered block's rest is still to come (a
 * neighbour that has not written it yet, or a deferred partial write): not
 * when each was read from the device, where the neighbour wrote already.
 */
static int prepare_edges(const struct write_ctx *w, struct pc_folio *f, size_t foff, size_t n, bool *head_full,
			 bool *tail_full, bool *awaits)
{
	struct pc_mapping *m = w->m;
	size_t bs = m->block_size, end = foff + n;
	unsigned first = (unsigned)(foff >> m->block_shift), last = (unsigned)((end - 1) >> m->block_shift);
	*head_full = *tail_full = true;
	*awaits = false;
	if (foff % bs) {
		uint32_t e = first == last ? (uint32_t)(end - (size_t)first * bs) : (uint32_t)bs;
		int r = prepare_partial_block(w, f, first, (uint32_t)(foff % bs), e);
		if (r < 0)
			return r;
		*head_full = r;
		if (first == last)
			*tail_full = r;
		*awaits |= r != PARTIAL_READ;
	}
	if (end % bs && !(first == last && foff % bs)) {
		int r = prepare_partial_block(w, f, last, 0, (uint32_t)(end % bs));
		if (r < 0)
			return r;
		*tail_full = r;
		*awaits |= r != PARTIAL_READ;
	}
	return 0;
}

/*
 * Does this uncached write complete an edge folio?  It does when a block
 * it covers only partly was already written by the neighbour that left
 * the folio (uptodate, or holding a deferred partial range): together the
 * two writes cover it.  Checked before our own preparation of the block.
 */
static bool completes_edge(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n)
{
	size_t bs = m->block_size, end = foff + n;
	uint32_t vs, ve;
	if (foff % bs) {
		unsigned b = (unsigned)(foff >> m->block_shift);
		if (bs_block_uptodate(m, f, b) || bs_block_valid(m, f, b, &vs, &ve))
			return true;
	}
	if (end % bs) {
		unsigned b = (unsigned)((end - 1) >> m->block_shift);
		if (bs_block_uptodate(m, f, b) || bs_block_valid(m, f, b, &vs, &ve))
			return true;
	}
	return false;
}

/* Edges this thread's current write kept, less those it completed (see
 * write_trim_edges). */
static _Thread_local int64_t thread_edges_made;
/* Inside write_edges_batch_begin/end: the pieces of one write. */
static _Thread_local bool thread_edges_batched;

/* Drop-behind marking of a folio this write found or created.  `awaits`:
 * a partly covered block of it waits for the rest (prepare_edges). */
static void mark_for_write(const struct write_ctx *w, struct pc_folio *f, bool created, size_t foff, size_t n,
			   bool completes, bool awaits)
{
	struct pc_mapping *m = w->m;
	/* Shared with a neighbour only if a *block* is partly ours. */
	bool whole = foff % m->block_size == 0 && (foff + n) % m->block_size == 0;
	if (!(w->flags & PC_DONTCACHE)) {
		/* A cached write: whatever an uncached call left stays cached. */
		if (folio_test(f, PF_DROPBEHIND)) {
			folio_clear(f, PF_DROPBEHIND | PF_DROP_PENDING);
			account_uncached(m, -(int64_t)bs_dirty_bytes(m, f));
		}
		mapping_clear_edge(m, f);
		lru_mark_accessed(f, foff, n, false);
		return;
	}
	if (created) {
		/* A block whose rest was read is complete: the neighbour came
		 * first (its edge went before it could be completed), and
		 * keeping this one would wait for nobody. */
		if (whole || !awaits || (m->c->cfg.flags & PC_CFG_NO_EDGE_KEEP))
			folio_set(f, PF_DROPBEHIND);
		else {
			edge_keep(m, f); /* kept for the neighbour */
			thread_edges_made++;
		}
		return;
	}
	/* An edge this write completes: drop it once both writes are clean.
	 * Marked under the folio lock, before our data goes in, with the dirty
	 * bytes already there moved to the uncached count. */
	if (completes && folio_test(f, PF_EDGE)) {
		mapping_clear_edge(m, f);
		folio_set(f, PF_DROPBEHIND);
		account_uncached(m, (int64_t)bs_dirty_bytes(m, f));
		edge_completed(m);
		thread_edges_made--;
	}
}

int write_folio_begin(const struct write_ctx *w, uint64_t pos, struct write_folio *wf)
{
	struct pc_mapping *m = w->m;
	unsigned gf = GF_CREATE | GF_LOCK | GF_STABLE | ((w->flags & PC_NOWAIT) ? GF_NOWAIT : 0);
	bool created;

	assert_inval_locked(m);
	struct pc_folio *f = mapping_get_folio(m, pos, write_order(w, pos), gf, &created);
	if (IS_ERR_FOLIO(f))
		return FOLIO_ERR(f);
	size_t foff = pos - folio_pos(f);
	size_t n = u64_min(folio_size(f) - foff, w->end - pos);
	bool completes = (w->flags & PC_DONTCACHE) && !created && folio_test(f, PF_EDGE) &&
			 completes_edge(m, f, foff, n);
	bool head_full, tail_full, awaits;
	int err = prepare_edges(w, f, foff, n, &head_full, &tail_full, &awaits);
	if (err) {
		folio_unlock(f);
		reclaim_release_folio(m->c, f);
		return err;
	}
	mark_for_write(w, f, created, foff, n, completes, awaits);
	*wf = (struct write_folio){ f, foff, n, created, head_full, tail_full };
	return 0;
}

void write_folio_commit(const struct write_ctx *w, const struct write_folio *wf)
{
	struct pc_mapping *m = w->m;
	struct pc_folio *f = wf->f;
	bool was_dirty = folio_test(f, PF_DIRTY);
	size_t newly = bs_write_end(m, f, wf->foff, wf->n, wf->head_full, wf->tail_full);
	account_dirty(m, f, (int64_t)newly);
	if (!was_dirty)
		dirty_file_dirtied(m, f);
	atomic_raise_i64(&m->i_size, (int64_t)(folio_pos(f) + wf->foff + wf->n));
	folio_unlock(f);
	reclaim_release_folio(m->c, f);
}

void write_folio_abandon(const struct write_ctx *w, const struct write_folio *wf)
{
	struct pc_mapping *m = w->m;
	/* A folio made for this write alone holds nothing now: it goes
	 * (unless a reader came meanwhile), as if the write had not been. */
	if (wf->created)
		mapping_remove_if_unused(m, wf->f, 2);
	folio_unlock(wf->f);
	reclaim_release_folio(m->c, wf->f);
}

/* Write the part of the request that falls in one folio; returns bytes. */
static ssize_t write_one_folio(const struct write_ctx *w, uint64_t pos)
{
	struct write_folio wf;
	int err = write_folio_begin(w, pos, &wf);
	if (err)
		return err;
	iov_copy_from(w->iov, w->iovcnt, pos - w->off, arena_data(w->m->c, wf.f) + wf.foff, wf.n);
	write_folio_commit(w, &wf);
	return (ssize_t)wf.n;
}

/* ------------------------------------------------ a write that ends short */

/*
 * Clean uptodate blocks of [start, end) (block aligned, folio offsets)
 * become not uptodate: the caller may have stored into them without
 * writing them, and the device holds their data, so they are read again
 * when needed.  Dirty and not-uptodate blocks are left as they are.
 */
static void forget_clean_blocks(struct pc_mapping *m, struct pc_folio *f, size_t start, size_t end)
{
	size_t bs = m->block_size;
	for (size_t b = start; b < end; b += bs) {
		unsigned blk = (unsigned)(b >> m->block_shift);
		if (bs_block_uptodate(m, f, blk) && !bs_block_dirty(m, f, blk))
			bs_invalidate_blocks(m, f, b, bs, false);
	}
}

/*
 * Read the rest of block blk now, around the bytes [s, e) already written
 * into it (which the read would overwrite: they are kept aside).  Returns
 * 1 (the block is uptodate) or a negative errno.
 */
static int fill_around_written(struct pc_mapping *m, struct pc_folio *f, unsigned blk, uint32_t s, uint32_t e)
{
	uint8_t *p = arena_data(m->c, f) + ((size_t)blk << m->block_shift);
	uint8_t *keep = malloc(e - s);
	if (!keep)
		return -ENOMEM;
	memcpy(keep, p + s, e - s);
	int err = fill_range(m, f, (size_t)blk << m->block_shift, m->block_size);
	memcpy(p + s, keep, e - s);
	free(keep);
	return err ? err : 1;
}

/*
 * prepare_partial_block for the block holding the end of a write that
 * ended short, after the copy: [s, e) of block blk holds the write's data,
 * the rest whatever the caller left there.  Returns 1 when the rest of the
 * block is valid, 0 when the write is deferred, or a negative errno.  The
 * data is in already, so nothing is refused: a deferred partial block is
 * fine for PC_DSYNC too (its write-back merges it first), and PC_NOWAIT
 * defers even with PC_CFG_NO_DEFERRED_RMW rather than wait for a read.
 */
static int prepare_cut_block(const struct write_ctx *w, struct pc_folio *f, unsigned blk, uint32_t s, uint32_t e)
{
	struct pc_mapping *m = w->m;
	uint32_t vs = 0, ve = 0;
	bool has_valid;
	if (partial_block_complete(m, f, blk, s, e, &has_valid, &vs, &ve))
		return 1;
	bool may_defer = !(m->c->cfg.flags & PC_CFG_NO_DEFERRED_RMW) || (w->flags & PC_NOWAIT);
	if (may_defer && !disjoint_from_valid(has_valid, vs, ve, s, e) && defer_partial_block(m, f, has_valid) == 0)
		return 0;
	return fill_around_written(m, f, blk, s, e);
}

int write_folio_shorten(const struct write_ctx *w, struct write_folio *wf, size_t copied)
{
	struct pc_mapping *m = w->m;
	size_t bs = m->block_size;
	size_t cut = wf->foff + copied, end = wf->foff + wf->n;
	forget_clean_blocks(m, wf->f, round_down(cut, bs), round_up(end, bs));
	wf->n = copied;
	if (!copied || cut % bs == 0)
		return 0;
	unsigned blk = (unsigned)(cut >> m->block_shift);
	bool in_head = blk == (unsigned)(wf->foff >> m->block_shift);
	uint32_t s = in_head ? (uint32_t)(wf->foff % bs) : 0;
	int r = prepare_cut_block(w, wf->f, blk, s, (uint32_t)(cut % bs));
	if (r < 0)
		return r;
	wf->tail_full = r;
	if (in_head)
		wf->head_full = r;
	return 0;
}

/*
 * Make a PC_DSYNC write durable: its own range only, written with
 * RWF_DSYNC (the file system makes the size that covers it durable too).
 * The exact byte size is left to fsync/close: see backing_sync_size().
 */
static int write_sync(struct pc_mapping *m, uint64_t off, uint64_t end)
{
	int err = writeback_and_wait(m, off, end, WB_DSYNC);
	if (!err && !mproc(m)->direct)
		err = sync_io_fsync(m->c, mproc(m)->fd, true);
	return err;
}

/*
 * After an uncached write: the edges it kept may take the cache's clean
 * edges past their budget (the oldest then go).  A write that left more
 * edges than it completed is ahead of the writers that will complete them:
 * it first waits a little for them (edges_wait_for_neighbours) rather than
 * push out edges they are about to complete.  A write that completed as
 * many as it left (its writer is between a faster and a slower one) or
 * more (the slowest) never waits: those are the writers that bring the
 * edges back under the budget.
 */
static void write_trim_edges(struct pc_mapping *m, int flags)
{
	if (thread_edges_batched)
		return; /* write_edges_batch_end counts the pieces as one */
	int64_t made = thread_edges_made;
	thread_edges_made = 0;
	/* Only a write that added edges trims: one that added none took the
	 * edges no further past the budget, and trimming there would drop
	 * what the writers that wait are waiting to see completed. */
	if (!(flags & PC_DONTCACHE) || made <= 0 || !edges_over_budget(m->c))
		return;
	if (!(flags & PC_NOWAIT))
		edges_wait_for_neighbours(m);
	edges_trim(m->c);
}

void write_edges_batch_begin(void)
{
	thread_edges_made = 0;
	thread_edges_batched = true;
}

void write_edges_batch_end(struct pc_mapping *m, int flags)
{
	thread_edges_batched = false;
	write_trim_edges(m, flags);
}

int write_finish(struct pc_mapping *m, uint64_t pos, uint64_t n, int flags)
{
	int err;
	if (flags & PC_DSYNC) {
		err = write_sync(m, pos, pos + n);
	} else {
		throttle_account(n);
		err = balance_dirty(m, n, flags & PC_DONTCACHE, flags & PC_NOWAIT);
	}
	write_trim_edges(m, flags); /* after DSYNC: the oldest are clean, they go at once */
	/* The flusher sees only files on its list: a DSYNC write's file may
	 * be off it already. */
	if (backing_reserve_soon(m, pos + n)) {
		dirty_file_wants_flusher(m);
		flusher_kick(m->dom);
	}
	return err;
}

int write_admit(struct pc_mapping *m, uint64_t off, uint64_t end, int flags)
{
	int err = failing_write_error(m);
	if (err)
		return err;
	if (end > (uint64_t)atomic_load_explicit(&m->reserve_end, memory_order_relaxed)) {
		err = backing_reserve(m, off, end);
		if (err)
			return err;
	}
	/* PC_NOWAIT: refused now rather than after copying, past the limit. */
	return (flags & PC_NOWAIT) ? balance_dirty(m, 0, flags & PC_DONTCACHE, true) : 0;
}

/* Copy [pos, end) of the write into the cache, folio by folio (the
 * caller holds inval_lock); returns the bytes copied, and sets *err when
 * it stopped short. */
static uint64_t write_folios(const struct write_ctx *w, uint64_t pos, uint64_t end, int *err)
{
	uint64_t start = pos;

	assert_inval_locked(w->m);
	*err = 0;
	while (pos < end) {
		ssize_t n = write_one_folio(w, pos);
		if (n < 0) {
			*err = (int)n;
			break;
		}
		pos += (uint64_t)n;
	}
	return pos - start;
}

/*
 * A write larger than this is made durable (PC_DSYNC) or throttled piece
 * by piece, so one huge write never holds more than the dirty limit, and
 * an error stops it with what it wrote so far.
 */
static uint64_t write_piece(const struct pc_mapping *m)
{
	return u64_max(m->c->cfg.max_io_bytes, m->c->cfg.dirty_limit_bytes / 8);
}

ssize_t write_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len, int flags)
{
	struct pc_mapping *m = h->m;
	struct write_ctx w = { m, iov, iovcnt, off, off + len, flags };
	int err = write_admit(m, off, w.end, flags);
	if (err)
		return err;
	uint64_t pos = off;
	while (pos < w.end && !err) {
		uint64_t piece_end = u64_min(w.end, pos + write_piece(m));
		inval_lock_shared(m);
		uint64_t n = write_folios(&w, pos, piece_end, &err);
		inval_unlock(m);
		if (!n)
			break;
		int e = write_finish(m, pos, n, flags);
		if (e && (flags & PC_DSYNC)) {
			err = e;
			break; /* not durable: not reported as written */
		}
		pos += n;
		if (!err)
			err = e;
	}
	/* As write(2): what was written counts, an error only if nothing was. */
	return pos > off ? (ssize_t)(pos - off) : err;
}

int write_zeroes(struct pc_mapping *m, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[4096];
	struct iovec v[16];
	uint64_t pos = off, end = off + len;

	assert_inval_locked(m);
	while (pos < end) {
		size_t chunk = u64_min(end - pos, sizeof(v) / sizeof(v[0]) * sizeof(zeros));
		int cnt = 0;
		for (size_t d = 0; d < chunk; d += sizeof(zeros))
			v[cnt++] = (struct iovec){ (void *)zeros, u64_min(sizeof(zeros), chunk - d) };
		struct write_ctx w = { m, v, cnt, pos, pos + chunk, 0 };
		int err;
		pos += write_folios(&w, pos, w.end, &err);
		if (err)
			return err;
	}
	return 0;
}
