/*
 * read_io.c - bringing a range of a file into the cache: the missing folios
 * are created locked and not uptodate, inserted, and read with one device
 * I/O per contiguous run; the completion marks them uptodate and unlocks
 * them.  Readers that need one of them wait on its lock, as in the kernel.
 * Blocks past the end of written data are zeroed instead of read.
 *
 * This is the mechanism under both the read path's misses and read-ahead
 * (readahead.c decides what to read; this file only reads it).
 */
#include "rw/read_io.h"

#include "mem/arena.h"
#include "io/backend.h"
#include "mem/block_state.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "io/io_fd.h"
#include "mem/mapping.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RD_MAX_FOLIOS 256

/* Tests only (test_readahead.c): called in the thread that did a read
 * with RF_SYNC, right after it completed. */
HIDDEN void (*read_io_test_sync_done)(void);

struct rd_req {
	struct pc_ioreq io;
	struct pc_mapping *m;
	int n;
	struct pc_folio *f[RD_MAX_FOLIOS];
	struct iovec iov[RD_MAX_FOLIOS];
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
				memset(arena_data(m->c, f) + got, 0, sz - got);
			got = got > sz ? got - sz : 0;
			bs_mark_all_uptodate(m, f);
		}
		/* The lock goes first, then our reference.  A reader of an
		 * uncached folio may be done with it before we let go (it saw
		 * it uptodate, or woke on the lock): its drop then finds the
		 * folio busy and leaves it to the last user, which is us, in
		 * reclaim_release_folio, once nothing holds the lock. */
		folio_unlock(f);
		reclaim_release_folio(m->c, f);
	}
	mapping_put(m);
	free(r);
}

/* The device read of r's folios.  RF_SYNC: in this thread, so a reader
 * waiting for this read does not pay a handoff to the completion thread
 * and back (the kernel's synchronous read does not either). */
static void rd_submit(struct pc_mapping *m, struct rd_req *r, unsigned rf)
{
	if (!r)
		return;
	if (!r->n) {
		free(r);
		return;
	}
	/* Only the part below the end of written data is read. */
	uint64_t disk_end = round_up((uint64_t)atomic_load(&m->data_end), m->block_size);
	uint64_t start = (uint64_t)r->io.off;
	size_t total = 0;
	for (int i = 0; i < r->n; i++)
		total += folio_size(r->f[i]);
	size_t want = start >= disk_end ? 0 : (size_t)u64_min(total, disk_end - start);
	atomic_fetch_add(&m->refs, 1); /* dropped by rd_done */
	if (!want) {
		rd_done(&r->io, 0);
		return;
	}
	int k = 0;
	size_t acc = 0;
	while (acc < want) {
		size_t l = u64_min(folio_size(r->f[k]), want - acc);
		r->iov[k] = (struct iovec){ arena_data(m->c, r->f[k]), l };
		acc += l;
		k++;
	}
	r->io.op = IO_READ;
	r->io.fd = io_fd(m);
	r->io.iov = r->iov;
	r->io.iovcnt = k;
	r->io.len = want;
	r->io.done = rd_done;
	atomic_fetch_add_explicit(&m->st_read_ios, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->st_read_bytes, want, memory_order_relaxed);
	if (rf & RF_SYNC) {
		rd_done(&r->io, sync_io_preadv(m->c, r->io.fd, r->iov, k, r->io.off));
		if (read_io_test_sync_done)
			read_io_test_sync_done();
	} else {
		ioq_submit(dproc(m->dom)->ioq, &r->io);
	}
}

/* Whether folio f cannot join request r (which then goes to the device). */
static bool rd_full(const struct rd_req *r, const struct pc_folio *f, size_t max_io)
{
	return r->n == RD_MAX_FOLIOS || (uint64_t)r->io.off + r->io.len != folio_pos(f) ||
	       r->io.len + folio_size(f) > max_io;
}

int read_io_range(struct pc_mapping *m, uint64_t start, uint64_t end, unsigned rf, struct pc_folio **first)
{
	struct rd_req *r = NULL;
	int err = 0;
	if (first)
		*first = NULL;
	uint64_t pos = round_down(start, (uint64_t)PC_PAGE_SIZE << m->min_order);
	size_t max_io = m->c->cfg.max_io_bytes;
	bool created_any = false;
	if (!(rf & RF_NOWAIT))
		inval_lock_shared(m);
	else if (!inval_trylock_shared(m))
		return -EAGAIN; /* a truncate or hole punch is under way */
	while (pos < end) {
		bool created;
		unsigned order = mapping_order_for(m, pos, end - pos);
		/* Block for memory only for the first folio (and never with
		 * RF_NOWAIT): the rest is speculative and must not wait behind
		 * our own locked folios. */
		bool may_wait = !(rf & RF_NOWAIT) && !created_any;
		unsigned gf = GF_CREATE | GF_NEW_LOCKED | (may_wait ? 0 : GF_NOWAIT);
		struct pc_folio *f = mapping_get_folio(m, pos, order, gf, &created);
		if (IS_ERR_FOLIO(f)) {
			if (may_wait)
				err = FOLIO_ERR(f);
			break;
		}
		pos = folio_pos(f) + folio_size(f);
		if (first && !*first) {
			/* The caller's folio: held, so that making room for the
			 * rest of the range cannot evict it before it is read. */
			folio_get(f);
			*first = f;
		}
		if (!created) {
			reclaim_release_folio(m->c, f);
			rd_submit(m, r, rf);
			rf = r ? rf & ~RF_SYNC : rf;
			r = NULL;
			continue;
		}
		created_any = true;
		if (rf & RF_DONTCACHE)
			folio_set(f, PF_DROPBEHIND);
		if (r && rd_full(r, f, max_io)) {
			rd_submit(m, r, rf);
			rf &= ~RF_SYNC; /* only the first run: the caller waits for it */
			r = NULL;
		}
		if (!r) {
			r = calloc(1, sizeof(*r));
			if (!r) {
				/* No memory for the request: leave it not uptodate;
				 * a reader will fill it synchronously. */
				folio_unlock(f);
				reclaim_release_folio(m->c, f);
				break;
			}
			r->m = m;
			r->io.off = (off_t)folio_pos(f);
		}
		r->f[r->n++] = f;
		r->io.len += folio_size(f);
	}
	rd_submit(m, r, rf);
	inval_unlock(m);
	return err;
}
