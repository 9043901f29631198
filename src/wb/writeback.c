/*
 * writeback.c - the writeback engine: device writes of a file's dirty
 * blocks, waiters for them, and drop-behind at write completion.
 *
 * Writeback clusters contiguous dirty blocks, across folios, into device
 * writes of up to max_io_bytes, many in flight through the domain's I/O
 * queue (io_uring).  Only dirty blocks are written.  The folio lock is held
 * while its dirty bits are moved to "under writeback", not during the I/O;
 * writers wait for writeback to end before changing a folio (stable pages),
 * so a failed write can simply set the same dirty bits again: the data is
 * never lost, and the error is recorded for fsync/close to report.
 *
 * About 640 lines, one file on purpose: building a request, its completion
 * and the redirtying after a failure share the request's state and its
 * invariants (which blocks are under write-back, who drops the folio), and
 * split apart each half would read as if the other could change alone.
 */
#include "wb/writeback.h"

#include "mem/arena.h"
#include "io/backend.h"
#include "wb/backing.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "wb/dirty.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "io/fault.h"
#include "mem/fill.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "io/io_fd.h"
#include "mem/mapping.h"
#include "wb/pace.h"
#include "pagecache.h"
#include "lib/progress.h"
#include "lib/radix.h"
#include "mem/reclaim.h"
#include "lib/util.h"
#include "lib/shlock.h"
#include "lib/written.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WB_MAX_SEGS 256

/* ------------------------------------------------------------ waiters */

void waiter_init(struct pc_wb_waiter *w)
{
	atomic_init(&w->pending, 0);
	atomic_init(&w->error, 0);
}

static void waiter_add(struct pc_wb_waiter *w)
{
	atomic_fetch_add_explicit(&w->pending, 1, memory_order_relaxed);
}

/* The error first, then the count (release): a waiter that sees the count
 * reach 0 (acquire) sees every error.  The waiter may return, and its
 * record go, as soon as the count is 0: the wake that follows may find
 * the word gone or reused, which costs at most a spurious wake-up, as
 * every futex user expects. */
static void waiter_done(struct pc_wb_waiter *w, int err)
{
	int none = 0;
	if (err)
		atomic_compare_exchange_strong_explicit(&w->error, &none, err, memory_order_relaxed,
							memory_order_relaxed);
	if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_release) == 1)
		shfutex_wake(&w->pending, INT_MAX);
}

int waiter_wait(struct pc_wb_waiter *w)
{
	uint32_t n;
	lock_check_may_wait(LOCK_TREE);
	while ((n = atomic_load_explicit(&w->pending, memory_order_acquire)) != 0)
		shfutex_wait_ms(&w->pending, n, 1000);
	return atomic_load_explicit(&w->error, memory_order_relaxed);
}

void waiter_destroy(struct pc_wb_waiter *w)
{
	PC_ASSERT(atomic_load_explicit(&w->pending, memory_order_relaxed) == 0);
}

/* ----------------------------------------------------- write requests */

struct wb_seg {
	struct pc_folio *f;
	uint32_t first, count; /* blocks */
};

struct wb_req {
	struct pc_ioreq io;
	struct pc_mapping *m;
	struct pc_wb_waiter *w;
	int nseg;
	struct wb_seg seg[WB_MAX_SEGS];
	struct iovec iov[WB_MAX_SEGS];
};

/* One segment's write ended: on error its blocks are dirty again. */
static void segment_redirty_on_error(struct pc_mapping *m, struct wb_seg *s, int err)
{
	struct pc_folio *f = s->f;
	int64_t bytes = (int64_t)s->count << m->block_shift;
	if (err) {
		bool was_dirty = folio_test(f, PF_DIRTY);
		bs_redirty_blocks(m, f, s->first, s->count);
		account_dirty(m, f, bytes);
		if (!was_dirty)
			dirty_file_dirtied(m, f);
	}
	atomic_fetch_sub_explicit(&m->dom->writeback, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&m->c->writeback, bytes, memory_order_relaxed);
}

HIDDEN void (*writeback_test_after_clear)(struct pc_folio *f);

/*
 * The segment's folio is no longer under write-back for this request.  Only
 * after the error is recorded: fsync waits for PF_WRITEBACK and then reads
 * the errseq, so a flag cleared before the error is set would let it report
 * success for data that is dirty again and not on the device.
 */
static void segment_release(struct pc_mapping *m, struct wb_seg *s, int err)
{
	struct pc_folio *f = s->f;
	if (atomic_fetch_sub(&f->wb_pending, 1) == 1) {
		folio_clear_and_wake(f, PF_WRITEBACK);
		if (__builtin_expect(writeback_test_after_clear != NULL, 0))
			writeback_test_after_clear(f);
		if (!err && folio_test(f, PF_DROPBEHIND) && !reclaim_try_drop(m->c, f, false))
			folio_set(f, PF_DROP_PENDING);
	}
	reclaim_release_folio(m->c, f);
}

/*
 * A file's requests count in wb_inflight from the moment one is created,
 * before the first run moves its blocks from dirty to write-back: a closed
 * file whose nr_dirty fell to 0 is clean only once nothing it cleared is
 * still on its way to the device (waiting for room, or in flight).  Else
 * the closer could settle it, drop its lock and give up the descriptor
 * the request is about to write through.
 */
static void req_inflight_begin(struct pc_mapping *m)
{
	atomic_fetch_add(&m->wb_inflight, 1);
}

/* The last request of a closed file ended: the flusher settles it. */
static void req_inflight_end(struct pc_mapping *m, int err)
{
	if (atomic_fetch_sub(&m->wb_inflight, 1) == 1 && atomic_load(&m->closed_dirty) && !err)
		flusher_kick(m->dom);
}

/*
 * A completion is not done with a folio when it clears PF_WRITEBACK: a
 * drop-behind folio is dropped after that (it cannot leave the index under
 * write-back), and the completion's reference goes last.  A syncer woken
 * by the clear, or finding the flag clear, must not return before that:
 * the folio would still be cached behind its back, dropped a moment later
 * by the completion (on a loaded machine the woken syncer preempts the
 * completion right after the wake-up, and fsync returned with an uncached
 * folio still cached: mt_interleaved).  Either the syncer's reference, let
 * go after the completion's, drops the folio, or the completion drops it
 * before it returns.  So a file's completions count themselves while they
 * touch its folios (low half of wb_completing) and the times the count
 * fell to 0 (high half), in one word, and a syncer, once the write-back
 * it waited for ended and it let go of the folios, waits for every
 * completion running then to return (wait_completions_running).
 */
#define COMPLETING_ONE 1ull
#define COMPLETING_IDLE (1ull << 32)

static void completion_begin(struct pc_mapping *m)
{
	atomic_fetch_add(&m->wb_completing, COMPLETING_ONE);
}

static void completion_end(struct pc_mapping *m)
{
	uint64_t v = atomic_load(&m->wb_completing), nv;
	do
		nv = (uint32_t)v == 1 ? v - COMPLETING_ONE + COMPLETING_IDLE : v - COMPLETING_ONE;
	while (!atomic_compare_exchange_weak(&m->wb_completing, &v, nv));
}

/* Wait until the completions of m running now have returned: until their
 * count fell to 0 (wb_done signals wb_progress after that). */
static void wait_completions_running(struct pc_mapping *m)
{
	uint64_t v = atomic_load(&m->wb_completing);
	if (!(uint32_t)v)
		return;
	struct pc_cache *c = m->c;
	for (;;) {
		uint32_t seen = progress_begin(&c->wb_progress);
		bool done = (atomic_load(&m->wb_completing) >> 32) != (v >> 32);
		if (!done)
			progress_wait(&c->wb_progress, seen, 100);
		progress_end(&c->wb_progress);
		if (done)
			return;
	}
}

static void wb_done(struct pc_ioreq *io, ssize_t res)
{
	struct wb_req *r = (struct wb_req *)io;
	struct pc_mapping *m = r->m;
	struct pc_domain *d = m->dom;
	completion_begin(m); /* before any PF_WRITEBACK is cleared */
	atomic_fetch_sub(&d->inflight, (int64_t)io->len);
	pace_io_end(m->c, io->len); /* pace.c's bandwidth */
	if (atomic_load(&d->io_waiters)) {
		atomic_fetch_add(&d->io_seq, 1);
		shfutex_wake(&d->io_seq, INT_MAX);
	}
	int err = res < 0 ? (int)res : ((size_t)res < io->len ? -EIO : 0);
	if (!err) {
		atomic_raise_i64(&m->disk_size, (int64_t)(io->off + io->len));
		atomic_raise_i64(&m->data_end, (int64_t)(io->off + io->len));
		atomic_fetch_add_explicit(&m->st_write_ios, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->st_write_bytes, io->len, memory_order_relaxed);
	}
	for (int i = 0; i < r->nseg; i++)
		segment_redirty_on_error(m, &r->seg[i], err);
	/* After the redirty: a failed block is dirty again before writers
	 * waiting in the throttle see the error.  Before the release: a
	 * syncer waiting for the folios finds the error recorded. */
	if (err)
		failing_wb_failed(m, err);
	else if (failing_error(m))
		failing_wb_recovered(m);
	for (int i = 0; i < r->nseg; i++)
		segment_release(m, &r->seg[i], err);
	/* Done with the folios; before waiter_done, so that the caller
	 * waiting for this request does not wait for it again. */
	completion_end(m);
	req_inflight_end(m, err);
	if (r->w)
		waiter_done(r->w, err);
	/* Dirty room for throttled writers, and folios that may be evicted
	 * now for allocations waiting for memory. */
	struct pc_cache *c = m->c;
	progress_signal(&c->wb_progress);
	progress_signal(&c->mem_progress);
	mapping_put(m);
	free(r);
}

static struct wb_req *req_new(struct pc_mapping *m, struct pc_wb_waiter *w, int mode, uint64_t off)
{
	if (fault_check(m->c, PC_FAULT_ALLOC, mproc(m)->fd, (off_t)off, 0))
		return NULL;
	struct wb_req *r = malloc(sizeof(*r));
	if (!r)
		return NULL;
	memset(&r->io, 0, sizeof(r->io));
	r->m = m;
	r->w = w;
	r->nseg = 0;
	r->io.op = IO_WRITE;
	r->io.fd = io_fd(m);
	r->io.rw_flags = (mode & WB_DSYNC) && mproc(m)->direct ? RWF_DSYNC : 0;
	r->io.iov = r->iov;
	r->io.done = wb_done;
	atomic_fetch_add(&m->refs, 1);
	req_inflight_begin(m);
	return r;
}

/*
 * Little's law: a write waits behind every byte in flight before it, so a
 * deep queue of large writes makes each take tens of milliseconds, and a
 * throttled writer waits that long for the first to end.  Keeping a few
 * large writes in flight keeps the device busy with short completions.
 */
static void wait_for_room(struct pc_domain *d)
{
	lock_check_may_wait(LOCK_TREE);
	if (atomic_load(&d->inflight) < d->inflight_cap)
		return;
	ioq_flush(dproc(d)->ioq); /* the writes it waits for may be ours, deferred */
	/* Registered, then the count read, then the room checked, all
	 * sequentially consistent: a completion either finds the waiter and
	 * bumps the count (and the wait returns at once), or ended before
	 * the check saw the room.  The timeout is a backstop only. */
	atomic_fetch_add(&d->io_waiters, 1);
	for (;;) {
		uint32_t seen = atomic_load(&d->io_seq);
		if (atomic_load(&d->inflight) < d->inflight_cap)
			break;
		shfutex_wait_ms(&d->io_seq, seen, 100);
	}
	atomic_fetch_sub(&d->io_waiters, 1);
}

static void req_submit(struct wb_req *r)
{
	if (!r || !r->nseg) {
		if (r) {
			req_inflight_end(r->m, 0);
			mapping_put(r->m);
			free(r);
		}
		return;
	}
	r->io.iovcnt = r->nseg;
	if (r->w)
		waiter_add(r->w);
	wait_for_room(r->m->dom);
	mapping_written_add(r->m, (uint64_t)r->io.off, (uint64_t)r->io.off + r->io.len);
	atomic_fetch_add(&r->m->dom->inflight, (int64_t)r->io.len);
	pace_io_begin(r->m->c);
	/* Sent with the walk's next requests, in one system call: one batch
	 * of device requests (one doorbell of a virtual disk) instead of one
	 * each.  The walk flushes before it waits and when it ends. */
	ioq_submit_defer(dproc(r->m->dom)->ioq, &r->io);
}

/*
 * Append a run to the request *rp if it continues it; else submit that one
 * and start a new one.  -ENOMEM when no request can be had: *rp is then
 * NULL (the one it held, if any, was submitted: it must not be touched).
 */
static int req_add_run(struct wb_req **rp, struct pc_mapping *m, struct pc_folio *f, unsigned first,
		       unsigned count, struct pc_wb_waiter *w, int mode)
{
	struct wb_req *r = *rp;
	uint64_t off = folio_pos(f) + ((uint64_t)first << m->block_shift);
	size_t len = (size_t)count << m->block_shift;
	if (r && (r->nseg == WB_MAX_SEGS || (uint64_t)r->io.off + r->io.len != off ||
		  r->io.len + len > m->c->cfg.max_io_bytes)) {
		req_submit(r);
		r = *rp = NULL;
	}
	if (!r) {
		r = req_new(m, w, mode, off);
		if (!r)
			return -ENOMEM;
		r->io.off = (off_t)off;
		r->io.len = 0;
		*rp = r;
	}
	folio_get(f);
	r->seg[r->nseg] = (struct wb_seg){ f, first, count };
	r->iov[r->nseg] = (struct iovec){ arena_data(m->c, f) + ((size_t)first << m->block_shift), len };
	r->nseg++;
	r->io.len += len;
	return 0;
}

/*
 * What of a closed file goes through the kernel's page cache
 * (backing_write_tail) instead of a direct write, when nothing of the
 * backing file reaches it, so the kernel reads nothing:
 *  - the block that holds its end, when the end is inside it: the backing
 *    file then ends exactly at i_size, with no truncate later;
 *  - for a small file (at most PC_SMALL_FILE_BYTES), the whole run of dirty
 *    blocks that ends at its end.  A direct write of a file's first
 *    blocks allocates them, so the file system cannot do it without
 *    blocking and io_uring hands it to a worker thread: for a program that
 *    creates thousands of small files and closes them (tar x, cp -a, a
 *    compiler), those hand-offs, thread wake-ups and device round trips
 *    cost more CPU than the copy into the kernel's cache does, and the
 *    kernel writes its pages back in large batches.  The kernel then
 *    caches those few blocks too; they are clean once it wrote them.
 * Returns the run [*first, *first + *count) (blocks of f), or false.
 */
static bool closed_kernel_run(struct pc_mapping *m, struct pc_folio *f, uint64_t size, unsigned *first,
			      unsigned *count)
{
	if (!mproc(m)->direct || !m->tail_via_kernel || !atomic_load(&m->closed_dirty) || size == 0)
		return false;
	uint64_t fpos = folio_pos(f), bs = m->block_size;
	uint64_t last = round_down(size - 1, bs); /* the block holding the end */
	bool small = size <= PC_SMALL_FILE_BYTES;
	if ((!small && size % bs == 0) || last < fpos || last >= fpos + folio_size(f))
		return false;
	uint64_t disk = round_up((uint64_t)atomic_load(&m->disk_size), bs);
	unsigned blk = (unsigned)((last - fpos) >> m->block_shift);
	if (last < disk || !bs_block_dirty(m, f, blk))
		return false;
	unsigned lo = blk;
	while (small && lo > 0 && fpos + ((uint64_t)(lo - 1) << m->block_shift) >= disk &&
	       bs_block_dirty(m, f, lo - 1))
		lo--;
	*first = lo;
	*count = blk - lo + 1;
	return true;
}

/* Write a closed file's run that goes through the kernel (see above),
 * bytes [run start, size); on success it is clean here.  A failure
 * leaves it to the direct write.  `size` is one reading of i_size: a
 * reopened writer may move it meanwhile, and the bytes must stay inside
 * the run. */
static void write_closed_run(struct pc_mapping *m, struct pc_folio *f, unsigned first, unsigned count, uint64_t size)
{
	size_t boff = (size_t)first << m->block_shift;
	size_t run = (size_t)count << m->block_shift;
	uint64_t pos = folio_pos(f) + boff;
	size_t len = (size_t)(size - pos);
	if (len == 0 || len > run)
		return;
	/* An earlier direct write of these blocks may still be in flight: the
	 * buffered write must not race it for the same pages. */
	ioq_flush(dproc(m->dom)->ioq);
	folio_wait_clear(f, PF_WRITEBACK);
	if (backing_write_tail(m, arena_data(m->c, f) + boff, pos, len) != 0)
		return;
	size_t cleared = bs_clear_range_dirty(m, f, boff, run);
	account_dirty(m, f, -(int64_t)cleared);
}

/*
 * Move a locked dirty folio's dirty blocks under writeback, adding them to
 * the request being built.  Partial blocks are merged with device data
 * first (deferred read-modify-write done by the flusher, not the writer).
 */
static int wb_start_folio(struct wb_req **rp, struct pc_mapping *m, struct pc_folio *f,
			  struct pc_wb_waiter *w, int mode, int64_t *submitted)
{
	if (bs_has_partial(f)) {
		int err = fill_merge_partials(m, f);
		if (err) {
			/* Its data cannot go: as a failed write (the throttle
			 * must not wait for it, and fsync reports it). */
			failing_wb_failed(m, err);
			return 0;
		}
	}
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	unsigned first, count, from = 0;
	if (closed_kernel_run(m, f, size, &first, &count))
		write_closed_run(m, f, first, count, size);
	int err = 0;
	while (bs_next_dirty_run(m, f, from, &first, &count)) {
		err = req_add_run(rp, m, f, first, count, w, mode);
		if (err)
			break; /* no memory: the rest stays dirty, the caller hears it */
		size_t bytes = (size_t)count << m->block_shift;
		/* An earlier request of this folio may have completed already
		 * (synchronous I/O): set the flag on every 0 -> 1. */
		if (atomic_fetch_add(&f->wb_pending, 1) == 0)
			folio_set(f, PF_WRITEBACK);
		/* Account before clearing so counters never go negative. */
		atomic_fetch_add_explicit(&m->dom->writeback, (int64_t)bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->c->writeback, (int64_t)bytes, memory_order_relaxed);
		size_t cleared = bs_clear_range_dirty(m, f, (size_t)first << m->block_shift, bytes);
		account_dirty(m, f, -(int64_t)cleared);
		*submitted += (int64_t)bytes;
		from = first + count;
	}
	if (!folio_test(f, PF_DIRTY)) {
		mapping_untag_dirty(m, f);
		/* Clean with nothing in flight (its tail went through the
		 * kernel): an uncached folio goes now, not at a completion. */
		if (!folio_test(f, PF_WRITEBACK))
			reclaim_try_drop(m->c, f, true);
	}
	return err;
}

/*
 * What the uncached kick writes: drop-behind folios only.  Edge folios wait
 * for the neighbour that completes them (then they are drop-behind too):
 * writing them earlier would write their block twice, and the newest
 * uncached data, where edges still wait, is left for the next round anyway
 * (see flush_round), so runs are long without them.
 */
static bool uncached_candidate(struct pc_folio *f)
{
	return folio_test(f, PF_DROPBEHIND);
}

/*
 * A folio holding a deferred partial block, or an edge kept for a
 * neighbouring uncached write, waits a while for that neighbour: writing it
 * now would cost a read, or write the block twice.  Only the flusher's
 * background work waits; fsync, DSYNC and memory pressure do not.
 */
static bool partial_is_young(struct pc_mapping *m, struct pc_folio *f)
{
	if (!folio_test(f, PF_EDGE) && !bs_has_partial(f))
		return false;
	return folio_age_ms(m->c, f) < m->c->cfg.edge_expire_ms;
}

/* Does this writeback mode leave the folio for later (checked again under
 * the folio lock; without it, only as a hint)? */
static bool mode_skips(struct pc_mapping *m, int mode, struct pc_folio *f)
{
	if ((mode & WB_UNCACHED) && !uncached_candidate(f))
		return true;
	return (mode & WB_LET_PARTIAL_WAIT) && partial_is_young(m, f);
}

/* The walk of writeback_some over a range, one folio at a time. */
struct wb_walk {
	struct pc_mapping *m;
	int mode;
	struct pc_wb_waiter *w;
	int64_t budget, submitted;
	struct wb_req *r;
	int err; /* a request could not be had: data was left dirty */
};

/* Start writeback of one gathered folio (its reference is consumed). */
static void walk_folio(struct wb_walk *k, struct pc_folio *f)
{
	struct pc_mapping *m = k->m;
	int mode = k->mode;
	if (k->budget && k->submitted >= k->budget) {
		reclaim_release_folio(m->c, f);
		return;
	}
	/* A walk behind a sequential writer can last as long as the writer
	 * goes on, and one batch of folios takes milliseconds to submit: the
	 * space the writer asked to be reserved ahead of it is reserved here,
	 * folio by folio, not after the walk or the batch
	 * (backing_reserve_soon; an atomic load when none is asked). */
	backing_reserve_background(m);
	bool locked = folio_trylock(f);
	if (!locked && !(mode & WB_NOWAIT_LOCK)) {
		/* Submit what we built before sleeping on a lock. */
		req_submit(k->r);
		k->r = NULL;
		ioq_flush(dproc(m->dom)->ioq);
		folio_lock(f);
		locked = true;
	}
	if (!locked) {
		reclaim_release_folio(m->c, f);
		return;
	}
	bool ok = folio_test(f, PF_INDEXED) && f->mapping == m;
	if (ok && folio_test(f, PF_WRITEBACK)) {
		if (mode & WB_SYNC) {
			req_submit(k->r);
			k->r = NULL;
			ioq_flush(dproc(m->dom)->ioq);
			folio_wait_clear(f, PF_WRITEBACK);
		} else {
			ok = false;
		}
	}
	if (ok && mode_skips(m, mode, f))
		ok = false;
	if (ok && folio_test(f, PF_DIRTY)) {
		int err = wb_start_folio(&k->r, m, f, k->w, mode, &k->submitted);
		if (err && !k->err)
			k->err = err;
	}
	folio_unlock(f);
	reclaim_release_folio(m->c, f);
}

/*
 * Background writeback holds back a short run of young dirty folios for a
 * moment.  Writers that fill one file together out of order (interleaved
 * records from many threads) leave holes between their data that the
 * laggards fill shortly after; writing the pieces now costs one small
 * device write each, waiting a little makes them one large write.  A run
 * is long enough at a quarter of the largest write; data is old enough at
 * SHORT_RUN_PATIENCE_MS.  Only background work waits: over the dirty limit
 * with nothing else to write, the flusher writes short runs too (see
 * flush_round), and fsync, DSYNC and memory pressure never wait.
 */
#define SHORT_RUN_MAX_FOLIOS 64u

struct short_run {
	struct pc_folio *f[SHORT_RUN_MAX_FOLIOS];
	unsigned n;
	uint64_t end;    /* file offset where the run ends */
	uint64_t bytes;
	bool long_run;   /* long or old enough: the rest of it goes as it comes */
};

static void run_flush(struct wb_walk *k, struct short_run *s)
{
	for (unsigned i = 0; i < s->n; i++)
		walk_folio(k, s->f[i]);
	s->n = 0;
}

/* The run ended.  A long or old one was written as it came (nothing is
 * pending then); what is still pending is short and young: it waits for a
 * later round. */
static void run_close(struct wb_walk *k, struct short_run *s)
{
	for (unsigned i = 0; i < s->n; i++)
		reclaim_release_folio(k->m->c, s->f[i]);
	*s = (struct short_run){ .n = 0 };
}

static void run_add(struct wb_walk *k, struct short_run *s, struct pc_folio *f)
{
	uint64_t pos = folio_pos(f);
	if (mode_skips(k->m, k->mode, f)) {
		run_close(k, s);
		walk_folio(k, f); /* skipped there, or written on its own terms */
		return;
	}
	if ((s->n || s->long_run) && pos != s->end)
		run_close(k, s);
	s->end = pos + folio_size(f);
	s->bytes += folio_size(f);
	if (s->long_run) {
		walk_folio(k, f);
		return;
	}
	bool old = folio_age_ms(k->m->c, f) >= SHORT_RUN_PATIENCE_MS;
	s->f[s->n++] = f;
	if (s->bytes >= k->m->c->cfg.max_io_bytes / 4 || old || s->n == SHORT_RUN_MAX_FOLIOS) {
		s->long_run = true;
		run_flush(k, s);
	}
}

/* writeback_range, stopping once `budget` bytes are submitted (0: all).
 * A request that cannot be allocated makes it -ENOMEM (what was submitted
 * before is in flight, the rest stays dirty). */
int64_t writeback_some(struct pc_mapping *m, uint64_t start, uint64_t end, int mode, struct pc_wb_waiter *w,
		       int64_t budget)
{
	uint64_t idx = start >> PC_PAGE_SHIFT;
	uint64_t end_idx = end >= (UINT64_MAX - PC_PAGE_SIZE) ? UINT64_MAX : (end + PC_PAGE_SIZE - 1) >> PC_PAGE_SHIFT;
	struct pc_folio *batch[32];
	struct wb_walk k = { m, mode, w, budget, 0, NULL, 0 };
	struct short_run run = { .n = 0 };
	bool hold_short = mode & WB_HOLD_SHORT_RUNS;
	backing_extend(m);
	while (idx < end_idx && !(budget && k.submitted >= budget)) {
		unsigned n = mapping_gather(m, &idx, end_idx, RT_TAG_DIRTY, batch, 32);
		if (!n)
			break;
		for (unsigned i = 0; i < n; i++) {
			if (hold_short)
				run_add(&k, &run, batch[i]);
			else
				walk_folio(&k, batch[i]);
		}
	}
	if (hold_short)
		run_close(&k, &run);
	req_submit(k.r);
	ioq_flush(dproc(m->dom)->ioq);
	return k.err ? k.err : k.submitted;
}

int64_t writeback_range(struct pc_mapping *m, uint64_t start, uint64_t end, int mode, struct pc_wb_waiter *w)
{
	return writeback_some(m, start, end, mode, w, 0);
}

void writeback_wait_range(struct pc_mapping *m, uint64_t start, uint64_t end)
{
	uint64_t idx = start >> PC_PAGE_SHIFT;
	uint64_t end_idx = end >= (UINT64_MAX - PC_PAGE_SIZE) ? UINT64_MAX : (end + PC_PAGE_SIZE - 1) >> PC_PAGE_SHIFT;
	struct pc_folio *batch[32];
	while (idx < end_idx) {
		unsigned n = mapping_gather(m, &idx, end_idx, -1, batch, 32);
		if (!n)
			break;
		for (unsigned i = 0; i < n; i++) {
			folio_wait_clear(batch[i], PF_WRITEBACK);
			reclaim_release_folio(m->c, batch[i]);
		}
	}
	/* After letting go: the completions that ended the write-back waited
	 * for here (or in writeback_range) have dropped what they drop. */
	wait_completions_running(m);
}

/*
 * Write back what is dirty in [start, end) now and wait for it, and for
 * writeback others started there.  Data dirtied meanwhile by other writers
 * is theirs to sync.  An error of a write this call waited for but did not
 * start (say, the flusher's write of our data) is seen through the errseq.
 */
int writeback_and_wait(struct pc_mapping *m, uint64_t start, uint64_t end, int mode)
{
	uint64_t since = errseq_sample(&m->wb_err);
	struct pc_wb_waiter w;
	waiter_init(&w);
	int64_t r = writeback_range(m, start, end, mode | WB_SYNC, &w);
	int err = waiter_wait(&w);
	waiter_destroy(&w);
	writeback_wait_range(m, start, end);
	if (r < 0)
		return (int)r;
	if (!err)
		err = errseq_check_and_advance(&m->wb_err, &since);
	return err;
}

int writeback_file(struct pc_mapping *m)
{
	if (!mproc(m)->writable)
		return 0;
	int err = writeback_and_wait(m, 0, UINT64_MAX, WB_ALL);
	int e2 = backing_sync_size(m);
	return err ? err : e2;
}
