/*
 * readahead.c - read-ahead that follows streams through the cache, not
 * through handles.
 *
 * One handle carries many access patterns at once: a database scans a
 * table and looks up rows through one descriptor, threads share handles,
 * and every request of a file on a FUSE mount arrives on one handle.  So
 * the handle's last position says little about whether a read is part of
 * a stream.  As in the kernel, a stream's state lives in the cache itself:
 *
 *  - Marks.  The first folio of the newest window carries PF_READAHEAD and
 *    the window's size.  A read that reaches it issues the next window at
 *    once and without waiting for it, twice that size (up to the largest),
 *    from the first folio not cached.
 *    So a steady scan keeps one window in flight ahead of it and finds
 *    its data cached.  Cache hits on unmarked folios do nothing here (and
 *    read_hit.h serves them without a lock); a marked folio is declined by
 *    read_hit.h so that its reader comes here.
 *  - Context.  A miss looks at the folios right before it.  If the cache
 *    holds more just before the miss than this read asks for, the miss
 *    continues a stream whose window was lost (evicted, or never started
 *    because the stream began mid-file): it gets a window of twice the
 *    read, and the marks grow it from there.  Drop-behind folios do not
 *    count (cached_before): they are what uncached I/O has not finished
 *    with, above all read-ahead nobody read, not what a stream read.
 *  - A hint.  The handle remembers where its last few reads that came
 *    here ended (readahead_hinted), without a lock.  It only ever adds a
 *    stream: it lets a scan that starts mid-file ramp up at its second
 *    read (an uncached one at its third), and it carries an uncached
 *    stream (which leaves nothing cached behind it, so context cannot see
 *    it) past a lost mark.
 *
 * A read that is none of these is random: it reads what it asked for, in
 * the caller's thread (one device I/O, no handoff; a window's first run is
 * read in the caller's thread too), and leaves no state
 * that could end another stream.  Several streams on one handle therefore
 * each keep their own growing window.
 *
 * pc_fadvise(POSIX_FADV_RANDOM) turns read-ahead off for the handle (its
 * reads leave marks for other handles); POSIX_FADV_SEQUENTIAL doubles the
 * largest window and starts streams at it instead of ramping up (the
 * kernel doubles its largest window too, but still ramps up to it: a
 * caller that says it will read sequentially gains nothing from the ramp).
 */
#include "rw/readahead.h"

#include "api/cache.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "rw/read_io.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#define RA_MIN_WINDOW (128u * 1024u)

/* The largest window for reads through h; 0: no read-ahead. */
static size_t ra_max_window(const struct pc_file *h)
{
	const struct pc_config *cfg = &h->m->c->cfg;
	size_t max = cfg->readahead_max_bytes;
	switch (atomic_load_explicit(&h->ra_advice, memory_order_relaxed)) {
	case PC_RA_RANDOM:
		return 0;
	case PC_RA_SEQUENTIAL:
		/* The same cap as readahead_max_bytes itself (cache.c). */
		return max ? u64_min(2 * (uint64_t)max, u64_max(max, cfg->memory_limit / 4)) : 0;
	default:
		return max;
	}
}

static uint64_t clamp_window(uint64_t w, size_t max)
{
	if (w < RA_MIN_WINDOW)
		w = RA_MIN_WINDOW;
	return w > max ? max : w;
}

/* The window of a stream's first read of `want` bytes: a few times the
 * read for small reads (the kernel's ramp), all of it for large ones. */
static uint64_t initial_window(const struct pc_file *h, uint64_t want, size_t max)
{
	if (atomic_load_explicit(&h->ra_advice, memory_order_relaxed) == PC_RA_SEQUENTIAL)
		return max;
	uint64_t n = roundup_pow2(want);
	if (n <= max / 32)
		n *= 4;
	else if (n <= max / 4)
		n *= 2;
	else
		n = max;
	return clamp_window(n, max);
}

/* Bytes cached contiguously right before off, looking back at most limit,
 * as the trace a stream leaves: a drop-behind folio ends it.  Such a folio
 * is one that uncached I/O is not done with: read-ahead of an uncached
 * stream that nobody read (yet), the folio an uncached read stopped in, an
 * uncached write's data before its write-back; not data a stream read up
 * to here (an uncached stream drops what it read, so its own past is never
 * seen here; the hint carries it).  Counted, the windows that scattered
 * uncached reads leave unread made every later miss right after them look
 * like a stream, whose window left more of them: read-ahead fed on itself
 * until most of the file was cached, unread, by "uncached" reads.
 * Lookups only: nothing is written. */
static uint64_t cached_before(struct pc_mapping *m, uint64_t off, uint64_t limit)
{
	uint64_t pos = off;
	while (pos > 0 && off - pos < limit) {
		struct pc_folio *f = mapping_lookup(m, pos - 1);
		if (!f)
			break;
		bool trace = !folio_test(f, PF_DROPBEHIND);
		if (trace)
			pos = folio_pos(f);
		reclaim_release_folio(m->c, f);
		if (!trace)
			break;
	}
	return u64_min(off - pos, limit);
}

/* The first byte at or after off that no folio holds (a folio being read
 * counts as cached); off + limit when all of that is cached. */
static uint64_t next_uncached(struct pc_mapping *m, uint64_t off, uint64_t limit)
{
	uint64_t pos = off;
	while (pos - off < limit) {
		struct pc_folio *f = mapping_lookup(m, pos);
		if (!f)
			return pos;
		pos = folio_pos(f) + folio_size(f);
		reclaim_release_folio(m->c, f);
	}
	return off + limit;
}

/* Mark the folio at pos as the place where the next window of a stream is
 * due, recording the size of the current one (the next is twice that: the
 * window's history travels with the stream, not with a handle). */
static void set_mark(struct pc_mapping *m, uint64_t pos, uint64_t window)
{
	struct pc_folio *f = mapping_lookup(m, pos);
	if (f) {
		unsigned order = (unsigned)__builtin_ctzll(roundup_pow2(u64_max(window / PC_PAGE_SIZE, 1)));
		folio_ra_byte_set(f, RA_ORDER_MASK, order < RA_ORDER_MASK ? order : RA_ORDER_MASK);
		folio_set(f, PF_READAHEAD); /* a release: the order is seen with it */
		reclaim_release_folio(m->c, f);
	}
}

/* Clear f's mark; whether it had one (one reader wins a race for it). */
static bool take_mark(struct pc_folio *f)
{
	return atomic_fetch_and_explicit(&f->flags, ~(uint32_t)PF_READAHEAD, memory_order_acq_rel) & PF_READAHEAD;
}

static void count_window(struct pc_mapping *m, bool async, uint64_t bytes)
{
	struct pc_cache *c = m->c;
	if (async) {
		atomic_fetch_add_explicit(&m->st_ra_async, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->st_ra_async, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&m->st_ra_sync, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->st_ra_sync, 1, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&m->st_ra_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->st_ra_bytes, bytes, memory_order_relaxed);
}

/*
 * The handle remembers where its last few reads ended, one slot each, so
 * that a sequential reader is recognised whatever other reads of the
 * handle come in between (random reads, other threads' streams): a read
 * starting at a slot's end takes that slot over; any other read replaces
 * the slot used longest ago.  So random reads between a scan's reads cycle
 * through the other slots and leave the scan's alone.  A slot also counts
 * the reads in a row that ended there (up to 3; a read at 0 counts 2).
 */
bool readahead_hinted(struct pc_file *h, uint64_t off, size_t len, bool dontcache, bool *continues)
{
	uint32_t now = atomic_fetch_add_explicit(&h->ra_clock, 1, memory_order_relaxed) + 1;
	int slot = 0;
	uint32_t oldest = UINT32_MAX;
	unsigned run = off == 0 ? 2 : 1; /* the start of the file counts as a stream's second read */
	*continues = false;
	for (int i = 0; i < PC_RA_HINTS; i++) {
		if (atomic_load_explicit(&h->ra_ends[i], memory_order_relaxed) == (int64_t)off) {
			slot = i;
			*continues = true;
			run = atomic_load_explicit(&h->ra_runs[i], memory_order_relaxed) + 1u;
			break;
		}
		uint32_t age = now - atomic_load_explicit(&h->ra_used[i], memory_order_relaxed);
		if (oldest == UINT32_MAX || age > oldest) {
			oldest = age;
			slot = i;
		}
	}
	atomic_store_explicit(&h->ra_ends[slot], (int64_t)(off + len), memory_order_relaxed);
	atomic_store_explicit(&h->ra_used[slot], now, memory_order_relaxed);
	atomic_store_explicit(&h->ra_runs[slot], (uint8_t)(run < 3 ? run : 3), memory_order_relaxed);
	/* A cached stream starts at its second read in a row (or its first
	 * at 0), as the kernel's does.  An uncached one needs one more:
	 * random access often reads two neighbours (a b-tree's sibling
	 * pages), and a window opened for them is unread data that stays
	 * cached until evicted, which an uncached reader asked not to have
	 * (a cached reader's wrong window may at least be hit later).  The
	 * cost is one read of what was asked, synchronous, per stream. */
	return run >= (dontcache ? 3u : 2u);
}

bool readahead_reached(struct pc_file *h, struct pc_folio *f, unsigned rf)
{
	struct pc_mapping *m = h->m;
	size_t max = ra_max_window(h);
	if (!max || !take_mark(f))
		return false; /* RANDOM leaves the mark to the stream's readers */
	/* The window is the stream's, whoever reaches the mark: uncached if
	 * the stream's folios are (a cached read in between must not leave
	 * an uncached scan's next window cached), cached if not. */
	rf = (rf & ~RF_DONTCACHE) | (folio_test(f, PF_DROPBEHIND) ? RF_DONTCACHE : 0);
	uint64_t window = (uint64_t)PC_PAGE_SIZE << folio_ra_order(f);
	uint64_t mark = folio_pos(f);
	uint64_t from = next_uncached(m, mark, 2 * (uint64_t)max);
	if (from - mark > max) {
		/* More than the largest window is cached ahead (a re-read, or
		 * another reader went first): nothing to read yet, but the
		 * stream goes on: mark where a window's worth is left. */
		set_mark(m, from - max, window);
		return true;
	}
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	uint64_t next = u64_min(2 * window, max);
	uint64_t to = u64_min(from + next, size);
	if (from >= to)
		return true;
	count_window(m, true, to - from);
	/* Speculative: a reader that reaches the mark must not sleep for
	 * memory (or behind a truncate) for data it has not asked for; a
	 * window cut short only means the next miss starts a new one. */
	if (read_io_range(m, from, to, rf | RF_NOWAIT, NULL) == 0)
		set_mark(m, from, next);
	return true;
}

int readahead_miss(struct pc_file *h, uint64_t pos, uint64_t end, unsigned rf, bool *stream,
		   struct pc_folio **f, uint64_t *read_to)
{
	struct pc_mapping *m = h->m;
	size_t max = ra_max_window(h);
	uint64_t want = u64_min(end - pos, m->c->cfg.max_io_bytes);
	*read_to = pos + want;
	uint64_t window = 0;
	if (max && *stream) {
		window = initial_window(h, want, max);
	} else if (max) {
		/* More cached right before the miss than this read asks for
		 * (as the kernel's context read-ahead: not just as much, or
		 * random reads next to each other would pass for a stream):
		 * a stream that lost its window, or one that starts mid-file
		 * with its hint lost to other readers of the handle. */
		uint64_t before = cached_before(m, pos, want + 1);
		if (before > want) {
			/* Twice the read: a small start, as random reads in a
			 * partly cached region pass this test too; a real
			 * stream doubles from here at each mark. */
			window = u64_min(2 * want, max);
			*stream = true;
		}
	}
	if (window <= want) {
		/* Random, or the read covers the window: no I/O to wait for but
		 * the caller's own, so do it in this thread. */
		if (window) {
			count_window(m, false, want);
		} else {
			atomic_fetch_add_explicit(&m->st_ra_random, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&m->c->st_ra_random, 1, memory_order_relaxed);
		}
		return read_io_range(m, pos, *read_to, rf | RF_SYNC, f);
	}
	uint64_t size = (uint64_t)atomic_load(&m->i_size);
	uint64_t to = u64_min(pos + window, size);
	if (to <= pos) {
		/* A truncate since the caller read the size ended the file
		 * before pos: nothing to read (the caller looks at the size
		 * again and stops there). */
		*f = NULL;
		return 0;
	}
	count_window(m, false, to - pos);
	int err = read_io_range(m, pos, to, rf | RF_SYNC, f);
	if (!err && *read_to < to)
		set_mark(m, *read_to, to - pos);
	return err;
}
