/*
 * read.c - the read path: misses filled with one device I/O per contiguous
 * run, read-ahead with a growing window, uncached reads, and the hits that
 * read_hit.c declines.  (Bringing blocks of a folio uptodate synchronously,
 * which writeback needs too, is fill.c's.)
 *
 * A miss creates the missing folios locked and not uptodate, inserts them
 * and submits one read for each contiguous run; the completion marks them
 * uptodate and unlocks them.  Readers that need one of them wait on its
 * lock, as in the kernel.  Blocks past the end of the backing file are
 * zeroed instead of read.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RA_MAX_FOLIOS 256
#define RA_MIN_WINDOW (128u * 1024u)

/* ------------------------------------------------------- async reads */

struct rd_req {
	struct pc_ioreq io;
	struct pc_mapping *m;
	int n;
	struct pc_folio *f[RA_MAX_FOLIOS];
	struct iovec iov[RA_MAX_FOLIOS];
};

static void rd_done(struct pc_ioreq *io, ssize_t res)
{
	struct rd_req *r = (struct rd_req *)io;
	struct pc_mapping *m = r->m;
	size_t got = res > 0 ? (size_t)res : 0;
	for (int i = 0; i < r->n; i++) {
		struct pc_folio *f = r->f[i];
		size_t sz = folio_size(f);
		if (res < 0) {
			folio_set(f, PF_READ_ERROR);
		} else {
			/* Past the end of the backing file: zeros. */
			if (got < sz)
				memset(folio_data(m->c, f) + got, 0, sz - got);
			got = got > sz ? got - sz : 0;
			folio_mark_all_uptodate(m, f);
		}
		/* Our reference goes before the lock: a reader waiting on the
		 * lock may drop an uncached folio as soon as it has copied it.
		 * (The index still holds one, and nobody removes a locked folio.) */
		folio_put(m->c, f);
		folio_unlock(f);
	}
	mapping_put(m);
	free(r);
}

static void rd_submit(struct pc_mapping *m, struct rd_req *r)
{
	if (!r)
		return;
	if (!r->n) {
		free(r);
		return;
	}
	/* Only the part below the end of written data is read. */
	uint64_t disk_end = pc_round_up((uint64_t)atomic_load(&m->data_end), m->block_size);
	uint64_t start = (uint64_t)r->io.off;
	size_t total = 0;
	for (int i = 0; i < r->n; i++)
		total += folio_size(r->f[i]);
	size_t want = start >= disk_end ? 0 : (size_t)pc_min_u64(total, disk_end - start);
	atomic_fetch_add(&m->refs, 1); /* dropped by rd_done */
	if (!want) {
		rd_done(&r->io, 0);
		return;
	}
	int k = 0;
	size_t acc = 0;
	while (acc < want) {
		size_t l = pc_min_u64(folio_size(r->f[k]), want - acc);
		r->iov[k] = (struct iovec){ folio_data(m->c, r->f[k]), l };
		acc += l;
		k++;
	}
	r->io.op = IO_READ;
	r->io.fd = m->fd;
	r->io.iov = r->iov;
	r->io.iovcnt = k;
	r->io.len = want;
	r->io.done = rd_done;
	atomic_fetch_add_explicit(&m->st_read_ios, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->st_read_bytes, want, memory_order_relaxed);
	ioq_submit(m->dom->ioq, &r->io);
}

int readahead_range(struct pc_mapping *m, uint64_t start, uint64_t end, bool dontcache, struct pc_folio **first)
{
	struct rd_req *r = NULL;
	int err = 0;
	if (first)
		*first = NULL;
	uint64_t pos = pc_round_down(start, (uint64_t)PC_PAGE_SIZE << m->min_order);
	size_t max_io = m->c->cfg.max_io_bytes;
	pthread_rwlock_rdlock(&m->inval_lock);
	while (pos < end) {
		bool created;
		unsigned order = mapping_order_for(m, pos, end - pos);
		/* Block for memory only for the first folio: the rest is
		 * speculative and must not wait behind our own locked folios. */
		unsigned gf = GF_CREATE | GF_NEW_LOCKED | (r && r->n ? GF_NOWAIT : 0);
		struct pc_folio *f = mapping_get_folio(m, pos, order, gf, &created);
		if (IS_ERR_FOLIO(f)) {
			if (!(gf & GF_NOWAIT))
				err = FOLIO_ERR(f);
			break;
		}
		pos = folio_pos(f) + folio_size(f);
		if (first && !*first) {
			/* The caller's folio: held, so that making room for the
			 * rest of the window cannot evict it before it is read. */
			folio_get(f);
			*first = f;
		}
		if (!created) {
			folio_put(m->c, f);
			rd_submit(m, r);
			r = NULL;
			continue;
		}
		if (dontcache)
			folio_set(f, PF_DROPBEHIND);
		if (r && (r->n == RA_MAX_FOLIOS || (uint64_t)r->io.off + r->io.len != folio_pos(f) ||
			  r->io.len + folio_size(f) > max_io)) {
			rd_submit(m, r);
			r = NULL;
		}
		if (!r) {
			r = calloc(1, sizeof(*r));
			if (!r) {
				/* No memory for the request: leave it not uptodate;
				 * a reader will fill it synchronously. */
				folio_unlock(f);
				folio_put(m->c, f);
				break;
			}
			r->m = m;
			r->io.off = (off_t)folio_pos(f);
		}
		r->f[r->n++] = f;
		r->io.len += folio_size(f);
	}
	rd_submit(m, r);
	pthread_rwlock_unlock(&m->inval_lock);
	return err;
}

/* ---------------------------------------------------------- read path */

/*
 * Read-ahead marks.  Cache hits are served without looking at the handle
 * (read_hit.c), so a stream reading through its read-ahead window leaves no
 * trace there.  Instead the folio where the next window should start being
 * read carries PF_READAHEAD; a hit on it goes the full way (read_hit.c
 * declines it), and reaching it counts as continuing the stream.
 */
static void readahead_set_mark(struct pc_mapping *m, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(m, pos);
	if (f) {
		folio_set(f, PF_READAHEAD);
		folio_put(m->c, f);
	}
}

/* Whether a read at off reaches a mark (which it then clears). */
static bool readahead_take_mark(struct pc_mapping *m, uint64_t off)
{
	struct pc_folio *f = mapping_lookup(m, off);
	if (!f)
		return false;
	bool marked = folio_test(f, PF_READAHEAD) &&
		      (atomic_fetch_and_explicit(&f->flags, ~(uint32_t)PF_READAHEAD, memory_order_acq_rel) &
		       PF_READAHEAD);
	folio_put(m->c, f);
	return marked;
}

/* Sequential readers get read-ahead of a window that doubles each time.
 * Returns whether this read continues a sequential stream. */
static bool readahead_on_read(struct pc_file *h, uint64_t off, size_t len, bool dontcache)
{
	struct pc_mapping *m = h->m;
	size_t max = m->c->cfg.readahead_max_bytes;
	uint64_t from = 0, to = 0;
	bool marked = readahead_take_mark(m, off);
	/* Random reads take no lock. */
	int64_t prev = atomic_load_explicit(&h->ra_prev_end, memory_order_relaxed);
	if (!marked && prev != (int64_t)off && !(off == 0 && prev < 0) &&
	    !atomic_load_explicit(&h->ra_window, memory_order_relaxed)) {
		atomic_store_explicit(&h->ra_prev_end, (int64_t)(off + len), memory_order_relaxed);
		return false;
	}
	pthread_mutex_lock(&h->ra_lock);
	bool seq = marked || h->ra_prev_end == (int64_t)off || (off == 0 && h->ra_prev_end < 0);
	h->ra_prev_end = (int64_t)(off + len);
	if (!seq || !max) {
		h->ra_window = 0;
		h->ra_issued_end = 0;
	} else {
		size_t w = h->ra_window ? h->ra_window * 2 : RA_MIN_WINDOW;
		h->ra_window = w > max ? max : w;
		uint64_t want = off + len + h->ra_window;
		uint64_t issued = (uint64_t)h->ra_issued_end > off ? (uint64_t)h->ra_issued_end : off;
		/* Issue when less than half a window is left ahead. */
		if (issued < off + len + h->ra_window / 2) {
			from = issued;
			to = want;
			h->ra_issued_end = (int64_t)want;
		}
	}
	size_t window = h->ra_window;
	pthread_mutex_unlock(&h->ra_lock);
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	if (to > size)
		to = size;
	if (from < to) {
		readahead_range(m, from, to, dontcache, NULL);
		/* The next window is due when half of this one is left. */
		uint64_t mark = to > window / 2 ? to - window / 2 : 0;
		readahead_set_mark(m, mark > from ? mark : from);
	}
	return seq && max;
}

/* A cached access of a folio an uncached call created: keep it cached.
 * Under writeback (or if busy) the access mark (PF_REFERENCED, set by the
 * caller) keeps it: the drop at write completion sees it. */
static void clear_dropbehind(struct pc_mapping *m, struct pc_folio *f)
{
	if (!folio_test(f, PF_DROPBEHIND) || folio_test(f, PF_WRITEBACK) || !folio_trylock(f))
		return;
	if (folio_test(f, PF_DROPBEHIND) && !folio_test(f, PF_WRITEBACK)) {
		folio_clear(f, PF_DROPBEHIND | PF_DROP_PENDING);
		account_uncached(m, -(int64_t)folio_dirty_bytes(m, f));
	}
	folio_unlock(f);
}

/* Make [foff, foff+n) of f readable; *waited tells if I/O was needed. */
int folio_make_readable(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n, bool nowait,
			bool *waited)
{
	if (folio_range_uptodate(m, f, foff, n))
		return 0;
	*waited = true;
	if (nowait) {
		if (!folio_trylock(f))
			return -EAGAIN;
		bool ok = folio_range_uptodate(m, f, foff, n);
		folio_unlock(f);
		return ok ? 0 : -EAGAIN;
	}
	folio_lock(f); /* waits for a read in flight */
	int err = folio_range_uptodate(m, f, foff, n) ? 0 : folio_fill_range(m, f, foff, n);
	folio_unlock(f);
	return err;
}

ssize_t pc_read_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len, int flags)
{
	struct pc_mapping *m = h->m;
	struct pc_cache *c = m->c;
	bool nowait = flags & PC_NOWAIT, dontcache = flags & PC_DONTCACHE;
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	/* An uncached stream keeps the folio it stops in for its next read. */
	bool keep_last = !nowait && readahead_on_read(h, off, len, dontcache);
	/* A read that may not wait starts no read-ahead, but takes the mark,
	 * or cache hits on it would go the full way for ever. */
	if (nowait)
		readahead_take_mark(m, off);
	uint64_t pos = off, end = off + len, missed_until = 0;
	int err = 0;
	while (pos < end) {
		struct pc_folio *f = mapping_lookup(m, pos);
		bool waited = pos < missed_until;
		if (!f) {
			if (nowait) {
				err = -EAGAIN;
				break;
			}
			uint64_t to = pc_min_u64(end, pos + c->cfg.max_io_bytes);
			err = readahead_range(m, pos, to, dontcache, &f);
			if (err)
				break;
			missed_until = to;
			waited = true;
			if (!f)
				continue;
		}
		size_t foff = pos - folio_pos(f);
		size_t n = pc_min_u64(folio_size(f) - foff, end - pos);
		err = folio_make_readable(m, f, foff, n, nowait, &waited);
		if (err) {
			folio_put(c, f);
			break;
		}
		iov_copy_to(iov, iovcnt, pos - off, folio_data(c, f) + foff, n);
		if (waited) {
			atomic_fetch_add_explicit(&m->st_miss, n, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->st_miss, n, memory_order_relaxed);
		} else {
			count_hit_bytes(m, n);
		}
		if (dontcache) {
			/* Done with it: read to its end, or this call stops in it
			 * and no next read of a stream (or the file ends) needs it. */
			bool done_with = foff + n == folio_size(f) || pos + n >= size ||
					 (pos + n == end && !keep_last);
			if (folio_test(f, PF_DROPBEHIND) && done_with)
				folio_try_drop(c, f, false);
		} else {
			folio_mark_accessed(f);
			clear_dropbehind(m, f);
		}
		folio_put(c, f);
		pos += n;
	}
	if (pos > off)
		return (ssize_t)(pos - off);
	return err;
}
