/*
 * test_readahead.c - read-ahead follows streams through the cache, not
 * through handles (src/rw/readahead.c).  The read-ahead counters of
 * pc_file_stats show the mechanism; every read's bytes are checked too.
 *
 *   - a stream's first read issues a window and marks it; a read that
 *     reaches the mark issues the next window (async), a read of an
 *     unmarked cached folio issues nothing, and the windows grow;
 *   - a scan through one handle with a random miss elsewhere in the file
 *     after every scan read keeps one stream (one window started by a
 *     miss, then marks only), each random read is one random read of its
 *     own;
 *   - two scans interleaved on one handle both keep windows;
 *   - a random miss is read in the caller's thread, one I/O of what was
 *     asked;
 *   - a read whose range a truncate ends under it returns what is left,
 *     and counts no window for it;
 *   - POSIX_FADV_RANDOM: no read-ahead, another handle's mark is left to
 *     it; POSIX_FADV_SEQUENTIAL: the first window is twice
 *     readahead_max_bytes; NORMAL restores the ramp;
 *   - a PC_NOWAIT read that reaches a mark issues nothing and leaves the
 *     mark to the next blocking read;
 *   - a PC_DONTCACHE scan of 4x memory_limit keeps read-ahead (marks),
 *     reads right, and leaves nothing cached;
 *   - scattered PC_DONTCACHE 4 KiB reads, in pairs of neighbours too, read
 *     what they ask and leave nothing cached: no window;
 *   - a miss right after uncached read-ahead that nobody read is a random
 *     read, not a stream's (the context rule counts no drop-behind folio);
 *   - PC_DONTCACHE 4 KiB reads mid-file get a window at their third read
 *     in a row, then marks: windows, not pages, from the device;
 *   - a cached scan of 4x memory_limit, each folio read once (several
 *     reads of one large folio count once), does not evict a set of blocks
 *     read twice before it, nor a window before its reader comes: on its
 *     own handle, on one handle with hot reads in between, and by 4 threads
 *     on one handle (reclaim counts a folio's first use as none:
 *     lru_mark_accessed); and an uncached scan with cached or uncached hot
 *     reads on its handle leaves nothing of its own cached and reads its
 *     windows once.
 *
 * The cases read one 48 MiB file of a known pattern, which the fixture
 * writes with plain I/O.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <pthread.h>
#include <sys/syscall.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define FILE_SIZE (48 * MiB)
#define RA_MAX (2 * MiB)
#define SEED 0x7261ull

static const char *dir;
static char path[4300];

/* The scratch directory and the file every case reads: FILE_SIZE bytes of
 * pattern SEED. */
static void write_file(void)
{
	dir = test_dir("readahead");
	test_path(path, sizeof(path), dir, "file");
	uint8_t *data = malloc(FILE_SIZE);
	REQUIRE(data);
	tu_fill_pattern(data, FILE_SIZE, SEED, 0);
	tu_write_file(path, data, FILE_SIZE);
	free(data);
}

static void remove_file(void)
{
	unlink(path);
	test_rmdir(dir);
}

TEST_FIXTURE(write_file, remove_file)

/* A cache of `memory` whose read-ahead windows grow to ra_max at most. */
static struct pc_cache *cache_with_ra_max(size_t memory, size_t ra_max)
{
	struct pc_config cfg = tu_config(memory);
	cfg.readahead_max_bytes = ra_max;
	return tu_cache_new(&cfg);
}

/* A cache of `memory` with RA_MAX windows, which the counts below assume
 * (not the default). */
static struct pc_cache *cache_with_ra_2m(size_t memory)
{
	return cache_with_ra_max(memory, RA_MAX);
}

static struct pc_file *open_ro(struct pc_cache *c)
{
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	return h;
}

static struct pc_stats fstats(struct pc_file *h)
{
	struct pc_stats s;
	pc_file_stats(h, &s);
	return s;
}

/* Read len bytes at off and check them against the file's pattern. */
static void read_check(struct pc_file *h, uint64_t off, size_t len, int flags)
{
	static uint8_t buf[1 * MiB], want[1 * MiB];
	REQUIRE(len <= sizeof(buf));
	ssize_t r;
	do
		r = pc_pread(h, buf, len, (off_t)off, flags);
	while (r < 0 && errno == EAGAIN && (flags & PC_NOWAIT));
	CHECK(r == (ssize_t)len);
	tu_fill_pattern(want, len, SEED, off);
	CHECK(r == (ssize_t)len && memcmp(buf, want, len) == 0);
}

TEST_CASE(stream_mark_issues_next_window)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	read_check(h, 0, 4 * KiB, 0);
	struct pc_stats s = fstats(h);
	CHECK(s.ra_sync_windows == 1);
	CHECK(s.ra_async_windows == 0);
	CHECK(s.ra_window_bytes > 4 * KiB); /* a window, not just the read */
	uint64_t first = s.ra_window_bytes;

	/* The next read of the stream is the mark: the next window. */
	read_check(h, 4 * KiB, 4 * KiB, 0);
	s = fstats(h);
	CHECK(s.ra_async_windows == 1);
	uint64_t second = s.ra_window_bytes - first;
	CHECK(second > 0);
	uint64_t win2_start = first; /* the second window starts where the first ended */

	/* A cached folio with no mark issues nothing. */
	read_check(h, 8 * KiB, 4 * KiB, 0);
	CHECK(fstats(h).ra_async_windows == 1);
	CHECK(fstats(h).ra_sync_windows == 1);

	/* The second window's first folio is marked: the third window,
	 * larger than the second. */
	read_check(h, win2_start, 4 * KiB, 0);
	s = fstats(h);
	CHECK(s.ra_async_windows == 2);
	CHECK(s.ra_window_bytes - first - second > second);
	CHECK(s.ra_random_reads == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Scan [16M, 48M) in 128 KiB reads; after each, one random 4 KiB miss in
 * [0, 16M), 32 KiB into a 64 KiB slot not read before (so no random read has cached
 * data right before it).  A handle-based detector sees every scan read as
 * random. */
TEST_CASE(random_misses_do_not_break_stream)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	enum { SLOTS = 16 * MiB / (64 * KiB) };
	unsigned slot[SLOTS];
	for (unsigned i = 0; i < SLOTS; i++)
		slot[i] = i;
	uint64_t rs = SEED;
	for (unsigned i = SLOTS - 1; i > 0; i--) {
		unsigned j = (unsigned)(tu_rand(&rs) % (i + 1));
		unsigned t = slot[i];
		slot[i] = slot[j];
		slot[j] = t;
	}
	unsigned n = 0;
	for (uint64_t off = 16 * MiB; off < FILE_SIZE; off += 128 * KiB, n++) {
		read_check(h, off, 128 * KiB, 0);
		read_check(h, (uint64_t)slot[n % SLOTS] * 64 * KiB + 32 * KiB, 4 * KiB, 0);
	}
	struct pc_stats s = fstats(h);
	printf("  random: %u scan reads, sync windows %llu, async %llu, random reads %llu\n", n,
	       (unsigned long long)s.ra_sync_windows, (unsigned long long)s.ra_async_windows,
	       (unsigned long long)s.ra_random_reads);
	CHECK(n == SLOTS);
	/* The scan's first reads look random until the cache shows a run
	 * longer than a read before the scan (context); then one window by a
	 * miss, and marks from there on. */
	CHECK(s.ra_sync_windows == 1);
	CHECK(s.ra_async_windows >= 10);
	CHECK(s.ra_random_reads >= SLOTS && s.ra_random_reads <= SLOTS + 2);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Two scans interleaved on one handle: both keep their windows. */
TEST_CASE(two_interleaved_streams_keep_windows)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	for (uint64_t off = 0; off < 16 * MiB; off += 128 * KiB) {
		read_check(h, off, 128 * KiB, 0);
		read_check(h, 24 * MiB + off, 128 * KiB, 0);
	}
	struct pc_stats s = fstats(h);
	printf("  two: sync windows %llu, async %llu, random reads %llu\n", (unsigned long long)s.ra_sync_windows,
	       (unsigned long long)s.ra_async_windows, (unsigned long long)s.ra_random_reads);
	/* Each stream ramps 128K..2M and then goes on in 2 MiB windows:
	 * more than 8 marked windows each over 16 MiB. */
	CHECK(s.ra_sync_windows <= 2);
	CHECK(s.ra_random_reads <= 2);
	CHECK(s.ra_async_windows >= 16);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

extern void (*read_io_test_sync_done)(void);
static pid_t hook_tid;
static unsigned sync_reads_here;

/* Called where an RF_SYNC read completed: it must be the reader's thread. */
static void record_sync_read(void)
{
	if ((pid_t)syscall(SYS_gettid) == hook_tid)
		sync_reads_here++;
}

/* A random miss is read in the caller's thread: one I/O of what was asked. */
TEST_CASE(random_miss_read_in_callers_thread)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	hook_tid = (pid_t)syscall(SYS_gettid);
	read_io_test_sync_done = record_sync_read;
	read_check(h, 5 * MiB, 4 * KiB, 0);
	read_io_test_sync_done = NULL;
	struct pc_stats s = fstats(h);
	CHECK(s.ra_random_reads == 1);
	CHECK(s.ra_sync_windows == 0 && s.ra_async_windows == 0);
	CHECK(s.dev_read_ios == 1);
	CHECK(s.dev_read_bytes == 4 * KiB);
	CHECK(sync_reads_here == 1); /* done in this thread: no handoff */
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

static off_t shrink_to;
static unsigned shrinks;

/* Truncates the file under the read, once. */
static void shrink_once(struct pc_file *h)
{
	if (shrinks++ == 0)
		CHECK(pc_ftruncate(h, shrink_to) == 0);
}

/*
 * A read that found its range not cached, whose file a truncate then
 * ends before the range: it returns what is left (nothing), never looks
 * for the folios again and again (test_mt_stress found a reader spinning
 * so), and counts no window for it.
 */
TEST_CASE(miss_truncated_under_read_returns_what_is_left)
{
	struct pc_cache *c = cache_with_ra_2m(64 * MiB);
	char p[4200];
	test_path(p, sizeof(p), dir, "shrinks");
	static uint8_t buf[256 * KiB];
	tu_fill_pattern(buf, sizeof(buf), 7, 0);
	const off_t sizes[] = { 0, 64 * KiB };
	for (int i = 0; i < 2; i++) {
		tu_write_file(p, buf, sizeof(buf));
		struct pc_file *h = pc_open(c, p, O_RDWR, 0);
		REQUIRE(h);
		uint64_t windows = fstats(h).ra_window_bytes;
		shrink_to = sizes[i];
		shrinks = 0;
		read_test_before_miss = shrink_once;
		/* At the new end: a stream's first read (offset 0), or one
		 * past the end the truncate leaves. */
		off_t at = sizes[i];
		ssize_t got = pc_pread(h, buf, 4 * KiB, at, 0);
		read_test_before_miss = NULL;
		CHECK(got == 0);
		CHECK(shrinks >= 1);
		CHECK(fstats(h).ra_window_bytes - windows <= sizeof(buf));
		CHECK(pc_pread(h, buf, 4 * KiB, 0, 0) == (ssize_t)(sizes[i] ? 4 * KiB : 0));
		CHECK(pc_close(h) == 0);

		/* A read span the same way: empty, nothing pinned. */
		tu_write_file(p, buf, sizeof(buf));
		h = pc_open(c, p, O_RDWR, 0);
		REQUIRE(h);
		shrinks = 0;
		read_test_before_miss = shrink_once;
		struct pc_span sp;
		got = pc_read_begin(h, at, 4 * KiB, 0, &sp);
		read_test_before_miss = NULL;
		CHECK(got == 0 && sp.len == 0);
		CHECK(shrinks == 1);
		if (got > 0)
			pc_read_end(&sp);
		CHECK(pc_close(h) == 0);
	}
	unlink(p);
	CHECK(pc_cache_destroy(c) == 0);
}

/* POSIX_FADV_RANDOM: no read-ahead, another handle's mark is left to it;
 * SEQUENTIAL: the first window is twice readahead_max_bytes; NORMAL: the
 * ramp again. */
TEST_CASE(fadvise_sets_readahead_policy)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *r = open_ro(c), *n = open_ro(c);
	CHECK(pc_fadvise(r, 0, 0, POSIX_FADV_RANDOM) == 0);
	for (uint64_t off = 8 * MiB; off < 9 * MiB; off += 128 * KiB)
		read_check(r, off, 128 * KiB, 0);
	struct pc_stats s = fstats(r);
	CHECK(s.ra_sync_windows == 0 && s.ra_async_windows == 0);
	CHECK(s.ra_random_reads == 8);
	CHECK(s.dev_read_bytes == 1 * MiB);

	/* A normal handle's stream, then the RANDOM handle reads its mark:
	 * the mark stays for the stream. */
	read_check(n, 0, 4 * KiB, 0);
	uint64_t before = fstats(n).ra_async_windows;
	read_check(r, 4 * KiB, 4 * KiB, 0);
	CHECK(fstats(r).ra_async_windows == before);
	read_check(n, 4 * KiB, 4 * KiB, 0);
	CHECK(fstats(n).ra_async_windows == before + 1);

	/* SEQUENTIAL: a stream starts at twice the largest window. */
	CHECK(pc_fadvise(r, 0, 0, POSIX_FADV_SEQUENTIAL) == 0);
	uint64_t wb = fstats(r).ra_window_bytes;
	read_check(r, 32 * MiB, 4 * KiB, 0); /* not a stream: random */
	read_check(r, 32 * MiB + 4 * KiB, 4 * KiB, 0); /* follows it: a stream */
	CHECK(fstats(r).ra_window_bytes - wb == 2 * RA_MAX);

	/* NORMAL: the ramp again (a small first window). */
	CHECK(pc_fadvise(r, 0, 0, POSIX_FADV_NORMAL) == 0);
	wb = fstats(r).ra_window_bytes;
	read_check(r, 40 * MiB, 4 * KiB, 0);
	read_check(r, 40 * MiB + 4 * KiB, 4 * KiB, 0);
	uint64_t w = fstats(r).ra_window_bytes - wb;
	CHECK(w > 0 && w < RA_MAX);
	CHECK(pc_close(r) == 0);
	CHECK(pc_close(n) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A PC_NOWAIT read that reaches a mark issues nothing and leaves the mark
 * to the stream's next blocking read. */
TEST_CASE(nowait_read_leaves_mark)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	read_check(h, 0, 4 * KiB, 0);
	CHECK(fstats(h).ra_async_windows == 0);
	uint64_t ios = fstats(h).dev_read_ios;
	read_check(h, 4 * KiB, 4 * KiB, PC_NOWAIT);
	/* It may not wait, so it issues nothing and leaves the mark... */
	CHECK(fstats(h).ra_async_windows == 0);
	CHECK(fstats(h).dev_read_ios == ios);
	/* ... for the stream's next blocking read. */
	read_check(h, 4 * KiB, 4 * KiB, 0);
	CHECK(fstats(h).ra_async_windows == 1);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A PC_DONTCACHE scan of 4x memory_limit keeps read-ahead (marks), reads
 * each byte once, and leaves nothing cached. */
TEST_CASE(uncached_scan_keeps_readahead_caches_nothing)
{
	struct pc_cache *c = cache_with_ra_2m(FILE_SIZE / 4);
	struct pc_file *h = open_ro(c);
	for (uint64_t off = 0; off < FILE_SIZE; off += 128 * KiB)
		read_check(h, off, 128 * KiB, PC_DONTCACHE);
	struct pc_stats s = fstats(h), cs = tu_stats(c);
	printf("  uncached: sync windows %llu, async %llu, cached after %llu\n",
	       (unsigned long long)s.ra_sync_windows, (unsigned long long)s.ra_async_windows,
	       (unsigned long long)cs.cached_bytes);
	CHECK(s.ra_sync_windows == 1);
	CHECK(s.ra_async_windows >= FILE_SIZE / RA_MAX - 4);
	CHECK(s.dev_read_bytes == FILE_SIZE); /* read once: nothing twice */
	CHECK(cs.cached_bytes == 0);
	CHECK(cs.evictions == 0); /* dropped behind, not evicted */
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * Scattered PC_DONTCACHE 4 KiB reads, as a database's b-tree lookups make
 * them uncached: page-aligned reads at random places over the whole file,
 * and after every 8th the page after it too (a sibling page), in a cache
 * that could hold the whole file.  They read from the device what they
 * asked for and nothing more, and leave nothing cached: no read-ahead
 * window is opened for them.  (Before, a sibling pair opened a window
 * that nobody read and that stayed cached, and every later miss right
 * after such leftovers was taken for a stream by the context rule and
 * opened another: the SQLite VFS's uncached bulk insert with an index read
 * 15.9 GB of windows for a 125 MiB database and left 88 % of it cached.)
 */
TEST_CASE(uncached_scattered_reads_read_no_window)
{
	struct pc_cache *c = cache_with_ra_2m(2 * FILE_SIZE);
	struct pc_file *h = open_ro(c);
	/* Pages 4k of the file in random order, each read once (a third read
	 * that happened to follow a pair would be a stream). */
	enum { SLOTS = FILE_SIZE / (16 * KiB), READS = SLOTS };
	static uint32_t slot[SLOTS];
	for (uint32_t i = 0; i < SLOTS; i++)
		slot[i] = i;
	uint64_t rs = SEED, asked = 0;
	for (uint32_t i = SLOTS - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(tu_rand(&rs) % (i + 1)), t = slot[i];
		slot[i] = slot[j];
		slot[j] = t;
	}
	for (int i = 0; i < READS; i++) {
		uint64_t page = 4 * (uint64_t)slot[i];
		read_check(h, page * 4 * KiB, 4 * KiB, PC_DONTCACHE);
		asked += 4 * KiB;
		if (i % 8 == 0) {
			read_check(h, (page + 1) * 4 * KiB, 4 * KiB, PC_DONTCACHE);
			asked += 4 * KiB;
		}
	}
	struct pc_stats s = fstats(h), cs = tu_stats(c);
	printf("  scattered uncached: %llu bytes asked, %llu read from the device in %llu I/Os, windows %llu + "
	       "%llu (%llu bytes), %llu cached after\n",
	       (unsigned long long)asked, (unsigned long long)s.dev_read_bytes, (unsigned long long)s.dev_read_ios,
	       (unsigned long long)s.ra_sync_windows, (unsigned long long)s.ra_async_windows,
	       (unsigned long long)s.ra_window_bytes, (unsigned long long)cs.cached_bytes);
	CHECK(s.ra_sync_windows == 0 && s.ra_async_windows == 0);
	CHECK(s.dev_read_bytes <= asked);
	CHECK(cs.cached_bytes == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Whether a folio holds byte off of h's file. */
static bool cached_at(struct pc_file *h, uint64_t off)
{
	struct pc_folio *f = mapping_lookup(h->m, off);
	if (f)
		reclaim_release_folio(h->m->c, f);
	return f != NULL;
}

/*
 * What an uncached stream read ahead and never read is no trace of a
 * stream: a miss right after it, cached or uncached, is a random read
 * (one I/O of what it asked, no window), not a stream whose window was
 * lost (the context rule).  Before, each such miss opened a window past
 * the leftovers, which left more of them for the next miss.
 */
TEST_CASE(unread_uncached_readahead_is_no_stream_history)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	const int flags[] = { PC_DONTCACHE, 0 };
	for (int i = 0; i < 2; i++) {
		/* An uncached stream of 4 KiB reads mid-file that stops once it
		 * has its first window. */
		uint64_t at = (uint64_t)(8 + 16 * i) * MiB;
		struct pc_stats s0 = fstats(h);
		uint64_t off = at;
		for (; fstats(h).ra_sync_windows == s0.ra_sync_windows; off += 4 * KiB) {
			REQUIRE(off < at + 64 * KiB);
			read_check(h, off, 4 * KiB, PC_DONTCACHE);
		}
		/* Where its unread window ends, a miss. */
		uint64_t end = off;
		while (cached_at(h, end))
			end += 4 * KiB;
		CHECK(end - off > 16 * KiB); /* read ahead, not read */
		struct pc_stats s1 = fstats(h);
		read_check(h, end, 4 * KiB, flags[i]);
		struct pc_stats s2 = fstats(h);
		printf("  miss (%s) after %llu bytes of unread uncached read-ahead: %llu windows, %llu random "
		       "reads, %llu bytes read\n",
		       flags[i] ? "uncached" : "cached", (unsigned long long)(end - off),
		       (unsigned long long)(s2.ra_sync_windows - s1.ra_sync_windows),
		       (unsigned long long)(s2.ra_random_reads - s1.ra_random_reads),
		       (unsigned long long)(s2.dev_read_bytes - s1.dev_read_bytes));
		CHECK(s2.ra_sync_windows == s1.ra_sync_windows);
		CHECK(s2.ra_random_reads == s1.ra_random_reads + 1);
		CHECK(s2.dev_read_bytes - s1.dev_read_bytes == 4 * KiB);
	}
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * Sequential PC_DONTCACHE 4 KiB reads from the middle of a file still
 * read ahead: a window at the stream's third read (two reads next to each
 * other are common in random access: a cached stream gets its window at
 * its second read, an uncached one, whose unread windows nobody reuses,
 * at its third), then marks, windows growing to the largest; each byte is
 * read from the device once, in few I/Os, and nothing but the last window
 * is left cached.
 */
TEST_CASE(uncached_small_reads_mid_file_read_ahead)
{
	struct pc_cache *c = cache_with_ra_2m(256 * MiB);
	struct pc_file *h = open_ro(c);
	const uint64_t at = 20 * MiB, len = 16 * MiB;
	read_check(h, at, 4 * KiB, PC_DONTCACHE);
	read_check(h, at + 4 * KiB, 4 * KiB, PC_DONTCACHE);
	CHECK(fstats(h).ra_sync_windows == 0);
	read_check(h, at + 8 * KiB, 4 * KiB, PC_DONTCACHE);
	CHECK(fstats(h).ra_sync_windows == 1);
	for (uint64_t off = at + 12 * KiB; off < at + len; off += 4 * KiB)
		read_check(h, off, 4 * KiB, PC_DONTCACHE);
	struct pc_stats s = fstats(h), cs = tu_stats(c);
	printf("  uncached 4 KiB stream: %llu reads, %llu device reads (%llu bytes), windows %llu + %llu, %llu "
	       "cached after\n",
	       (unsigned long long)(len / (4 * KiB)), (unsigned long long)s.dev_read_ios,
	       (unsigned long long)s.dev_read_bytes, (unsigned long long)s.ra_sync_windows,
	       (unsigned long long)s.ra_async_windows, (unsigned long long)cs.cached_bytes);
	CHECK(s.ra_sync_windows == 1);
	CHECK(s.ra_async_windows >= len / RA_MAX);
	CHECK(s.dev_read_ios <= len / (4 * KiB) / 64); /* windows, not pages */
	CHECK(s.dev_read_bytes >= len && s.dev_read_bytes <= len + 2 * RA_MAX);
	CHECK(cs.cached_bytes <= 2 * RA_MAX);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

static void read_hot_set(struct pc_file *h, uint64_t bytes)
{
	for (uint64_t off = 0; off < bytes; off += 4 * KiB)
		read_check(h, off, 4 * KiB, 0);
}

#define HOT_BYTES (2 * MiB)
#define HOT_PER_SCAN_READ 8

/* Scan [lo, hi) in 128 KiB reads; after each, HOT_PER_SCAN_READ random
 * 4 KiB reads of the hot set through the same handle (hot == true).  Own
 * buffers: several threads run it at once. */
struct scan_arg {
	struct pc_file *h;
	uint64_t lo, hi, seed;
	bool hot;
	long bad;
	int scan_flags, hot_flags; /* pc_pread flags of each kind of read */
};

static void *scan_part(void *p)
{
	struct scan_arg *a = p;
	uint8_t *buf = malloc(128 * KiB), *want = malloc(128 * KiB);
	REQUIRE(buf && want);
	uint64_t rng = a->seed;
	for (uint64_t off = a->lo; off < a->hi; off += 128 * KiB) {
		ssize_t r = pc_pread(a->h, buf, 128 * KiB, (off_t)off, a->scan_flags);
		tu_fill_pattern(want, 128 * KiB, SEED, off);
		a->bad += r != (ssize_t)(128 * KiB) || memcmp(buf, want, 128 * KiB) != 0;
		for (int i = 0; a->hot && i < HOT_PER_SCAN_READ; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t hoff = (rng >> 33) % (HOT_BYTES / (4 * KiB)) * 4 * KiB;
			r = pc_pread(a->h, buf, 4 * KiB, (off_t)hoff, a->hot_flags);
			tu_fill_pattern(want, 4 * KiB, SEED, hoff);
			a->bad += r != (ssize_t)(4 * KiB) || memcmp(buf, want, 4 * KiB) != 0;
		}
	}
	free(buf);
	free(want);
	return NULL;
}

enum { SCAN_OWN_HANDLE, SCAN_WITH_HOT_READS, SCAN_FOUR_THREADS };

/*
 * A working set read twice, then a cached scan of the rest of the file
 * (4x memory_limit): on its own handle; on one handle with hot reads after
 * every scan read (the handle's last position is then a hot read's); or
 * by 4 threads, a quarter each, on one shared handle, with hot reads.  The
 * working set stays cached, and the scan reads each byte from the device
 * once (no window evicted before it was read).
 */
static void scan_keeps_working_set(int mode)
{
	static const char *const names[] = { "own handle", "one handle with hot reads", "4 threads, one handle" };
	/* Windows of at most 512 KiB: 4 streams' windows and the next ones
	 * (up to 3x the largest, each) fit in the cache with the hot set, so
	 * what the scan reads twice is reclaim's doing, not read-ahead's. */
	struct pc_cache *c = cache_with_ra_max(FILE_SIZE / 4, 512 * KiB);
	struct pc_file *hh = open_ro(c), *scan = open_ro(c);
	/* 4 KiB folios for the hot set: no read-ahead on its handle. */
	CHECK(pc_fadvise(hh, 0, 0, POSIX_FADV_RANDOM) == 0);
	read_hot_set(hh, HOT_BYTES);
	read_hot_set(hh, HOT_BYTES); /* used twice: a working set */
	/* (pc_file_stats counts the file's device reads, all handles.) */
	uint64_t hot_reads = fstats(hh).dev_read_bytes;
	int nthreads = mode == SCAN_FOUR_THREADS ? 4 : 1;
	struct scan_arg a[4];
	pthread_t t[4];
	uint64_t part = (FILE_SIZE - HOT_BYTES) / (uint64_t)nthreads;
	for (int i = 0; i < nthreads; i++) {
		a[i] = (struct scan_arg){ scan, HOT_BYTES + (uint64_t)i * part, HOT_BYTES + (uint64_t)(i + 1) * part,
					  SEED + (uint64_t)i, mode != SCAN_OWN_HANDLE, 0, 0, 0 };
		REQUIRE(pthread_create(&t[i], NULL, scan_part, &a[i]) == 0);
	}
	long bad = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		bad += a[i].bad;
	}
	CHECK(bad == 0);
	uint64_t scan_reads = fstats(scan).dev_read_bytes - hot_reads;
	uint64_t before = fstats(hh).dev_read_bytes;
	read_hot_set(hh, HOT_BYTES);
	uint64_t reread = fstats(hh).dev_read_bytes - before;
	struct pc_stats cs = tu_stats(c);
	printf("  working set, %s: %llu of %llu hot bytes read again after the scan; scan read %llu of "
	       "%llu bytes from the device; %llu evictions\n",
	       names[mode], (unsigned long long)reread, (unsigned long long)HOT_BYTES,
	       (unsigned long long)scan_reads, (unsigned long long)(FILE_SIZE - HOT_BYTES),
	       (unsigned long long)cs.evictions);
	CHECK(hot_reads == HOT_BYTES); /* the second pass hit */
	CHECK(cs.evictions > 0);      /* the scan did fill the cache */
	CHECK(reread == 0);
	/* Each thread's last windows run into the next quarter, which that
	 * quarter's reader may have read and left already: a few of the
	 * largest windows at each of the 3 boundaries (without the first-use
	 * rule the scan reads 80 MiB or more here). */
	uint64_t slack = mode == SCAN_FOUR_THREADS ? 3 * 3 * 512 * KiB : 0;
	CHECK(scan_reads >= FILE_SIZE - HOT_BYTES && scan_reads <= FILE_SIZE - HOT_BYTES + slack);
	CHECK(pc_close(hh) == 0);
	CHECK(pc_close(scan) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * An uncached scan of 4x memory_limit with random 4 KiB reads of the
 * first HOT_BYTES after every scan read, all through one handle (the scan
 * from the start of the file, through the hot region): cached
 * hot reads leave only hot data cached (a cached read that reaches the
 * scan's mark issues the scan's next window uncached, as the stream is),
 * and uncached ones leave nothing; either way the scan's windows are read
 * from the device once (an uncached random read does not drop a folio it
 * found read ahead for the scan).
 */
static void uncached_scan_with_hot_reads(int hot_flags)
{
	struct pc_cache *c = cache_with_ra_2m(FILE_SIZE / 4);
	struct pc_file *h = open_ro(c);
	/* The scan goes through the hot region too: hot reads reach its
	 * marks there. */
	struct scan_arg a = { h, 0, FILE_SIZE, SEED, true, 0, PC_DONTCACHE, hot_flags };
	scan_part(&a);
	CHECK(a.bad == 0);
	struct pc_stats s = fstats(h), cs = tu_stats(c);
	printf("  uncached scan, %s hot reads: %llu bytes read from the device for a %llu byte file, %llu cached "
	       "after\n", hot_flags ? "uncached" : "cached", (unsigned long long)s.dev_read_bytes,
	       (unsigned long long)FILE_SIZE, (unsigned long long)cs.cached_bytes);
	/* Random reads dense in a small region look like a stream to the
	 * context rule (as to the kernel's): their own windows, a few of the
	 * largest, may run past the region and stay (cached, or unread
	 * uncached ones).  Nothing more: with cached hot reads, a scan window
	 * issued cached by a hot read that reached its mark would stay too
	 * (the scan's windows are uncached, as the scan is). */
	CHECK(cs.cached_bytes <= HOT_BYTES + (hot_flags ? 2 : 1) * RA_MAX);
	/* The hot region is read again once dropped (uncached hot reads):
	 * one 4 KiB read per hot read at most, besides the scan's once (and
	 * those windows).  When uncached hot reads dropped the scan's
	 * read-ahead they stopped in, it was 2.3x the file. */
	uint64_t hot_reads = FILE_SIZE / (128 * KiB) * HOT_PER_SCAN_READ * 4 * KiB;
	CHECK(s.dev_read_bytes <= FILE_SIZE + 4 * RA_MAX + (hot_flags ? hot_reads : 0));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(scan_keeps_working_set_own_handle)
{
	scan_keeps_working_set(SCAN_OWN_HANDLE);
}

TEST_CASE(scan_keeps_working_set_with_hot_reads)
{
	scan_keeps_working_set(SCAN_WITH_HOT_READS);
}

TEST_CASE(scan_keeps_working_set_four_threads)
{
	scan_keeps_working_set(SCAN_FOUR_THREADS);
}

TEST_CASE(uncached_scan_with_cached_hot_reads)
{
	uncached_scan_with_hot_reads(0);
}

TEST_CASE(uncached_scan_with_uncached_hot_reads)
{
	uncached_scan_with_hot_reads(PC_DONTCACHE);
}
