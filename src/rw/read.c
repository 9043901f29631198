/*
 * read.c - the read path: the reads that read_hit.h declines (misses,
 * read-ahead marks, uncached reads, partly valid folios).  What a miss
 * reads, and when read-ahead starts, is readahead.c's; bringing a range
 * into the cache is read_io.c's; filling blocks of a folio synchronously
 * (which writeback needs too) is fill.c's.
 */
#include "rw/read.h"

#include "mem/arena.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "wb/dirty.h"
#include "mem/fill.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "rw/read_hit.h"
#include "rw/read_io.h"
#include "rw/readahead.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void (*read_test_before_miss)(struct pc_file *h); /* read.h */

/* ---------------------------------------------------------- read path */

/* A cached access of a folio an uncached call created: keep it cached.
 * Under writeback (or if busy) the access mark (PF_USED, set by the
 * caller) keeps it: the drop at write completion sees it. */
static void clear_dropbehind(struct pc_mapping *m, struct pc_folio *f)
{
	if (!folio_test(f, PF_DROPBEHIND) || folio_test(f, PF_WRITEBACK) || !folio_trylock(f))
		return;
	if (folio_test(f, PF_DROPBEHIND) && !folio_test(f, PF_WRITEBACK)) {
		folio_clear(f, PF_DROPBEHIND | PF_DROP_PENDING);
		account_uncached(m, -(int64_t)bs_dirty_bytes(m, f));
	}
	folio_unlock(f);
}

/* Make [foff, foff+n) of f readable; *waited tells if I/O was needed. */
int read_fill_folio(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n, bool nowait,
		    bool *waited)
{
	if (bs_range_uptodate(m, f, foff, n))
		return 0;
	*waited = true;
	if (nowait) {
		if (!folio_trylock(f))
			return -EAGAIN;
		bool ok = bs_range_uptodate(m, f, foff, n);
		folio_unlock(f);
		return ok ? 0 : -EAGAIN;
	}
	folio_lock(f); /* waits for a read in flight */
	int err = bs_range_uptodate(m, f, foff, n) ? 0 : fill_range(m, f, foff, n);
	folio_unlock(f);
	return err;
}

/* Copy what the caller asked of f, and count it. */
static void read_from_folio(struct pc_mapping *m, struct pc_folio *f, const struct iovec *iov, int iovcnt,
			    uint64_t at, size_t foff, size_t n, bool waited)
{
	iov_copy_to(iov, iovcnt, at, arena_data(m->c, f) + foff, n);
	if (waited) {
		atomic_fetch_add_explicit(&m->st_miss, n, memory_order_relaxed);
		atomic_fetch_add_explicit(&m->c->st_miss, n, memory_order_relaxed);
	} else {
		count_hit_bytes(m, n);
	}
}

/* After reading [foff, foff+n) of f: an uncached read drops a folio it is
 * done with (read to its end, or the call stops in it, read it from the
 * device, and no next read of a stream, nor the file, needs it; a folio it
 * found read ahead is a stream's, for that stream's reader to drop); a
 * cached one marks it accessed (as a reader's next read of it if
 * `continues`, see lru_mark_accessed). */
static void read_done_with(struct pc_mapping *m, struct pc_folio *f, size_t foff, size_t n, bool dontcache,
			   bool last, bool stream, bool waited, uint64_t size, bool continues)
{
	if (dontcache) {
		bool done_with = foff + n == folio_size(f) || folio_pos(f) + foff + n >= size ||
				 (last && !stream && waited);
		if (done_with)
			reclaim_drop_behind(m->c, f);
	} else {
		/* A drop-behind folio read cached is kept: always a use. */
		lru_mark_accessed(f, foff, n, continues && !folio_test(f, PF_DROPBEHIND));
		clear_dropbehind(m, f);
	}
}

ssize_t read_iter(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len, int flags)
{
	struct pc_mapping *m = h->m;
	struct pc_cache *c = m->c;
	bool nowait = flags & PC_NOWAIT, dontcache = flags & PC_DONTCACHE;
	unsigned rf = (dontcache ? RF_DONTCACHE : 0) | (nowait ? RF_NOWAIT : 0);
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	/* Whether this read belongs to a stream (a miss then reads ahead).
	 * An uncached read keeps the folio it stops in for a stream's next
	 * read, also when it is too early in the stream for a window
	 * (`follows`: its second read, or its first from the start). */
	bool continues;
	bool stream = readahead_hinted(h, off, len, dontcache, &continues);
	bool follows = continues || off == 0;
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
			if (__builtin_expect(read_test_before_miss != NULL, 0))
				read_test_before_miss(h);
			err = readahead_miss(h, pos, end, rf, &stream, &f, &missed_until);
			if (err)
				break;
			waited = true;
			/* Nothing brought in for pos: taken again at once, unless
			 * a truncate meanwhile put the end at or before pos; the
			 * read ends there, as the kernel's does when it finds the
			 * size changed under it (looking again would never end). */
			if (!f && pos >= (uint64_t)atomic_load(&m->i_size))
				break;
			if (!f)
				continue;
		} else if (folio_test(f, PF_READAHEAD) && !nowait && readahead_reached(h, f, rf)) {
			/* (A PC_NOWAIT read leaves the mark: issuing the window
			 * may wait, for a queue slot or a synchronous device.
			 * The stream's next blocking read takes it.) */
			stream = true;
		}
		/* The size again, as the kernel's read looks at it once it has
		 * its folios: a truncate meanwhile ends the read at the new
		 * end (bytes past it, read in or zeroed since, would be
		 * neither the data before the truncate nor its end). */
		uint64_t now = (uint64_t)atomic_load(&m->i_size);
		if (pos >= now) {
			reclaim_release_folio(c, f);
			break;
		}
		end = u64_min(end, now);
		size_t foff = pos - folio_pos(f);
		size_t n = u64_min(folio_size(f) - foff, end - pos);
		err = read_fill_folio(m, f, foff, n, nowait, &waited);
		if (err) {
			reclaim_release_folio(c, f);
			break;
		}
		read_from_folio(m, f, iov, iovcnt, pos - off, foff, n, waited);
		read_done_with(m, f, foff, n, dontcache, pos + n == end, stream || follows, waited, size,
			       pos == off && continues);
		reclaim_release_folio(c, f);
		pos += n;
	}
	if (pos > off)
		return (ssize_t)(pos - off);
	return err;
}
