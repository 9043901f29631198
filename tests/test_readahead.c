/*
 * test_readahead.c - read-ahead follows streams through the cache, not
 * through handles (src/readahead.c).  The read-ahead counters of
 * pc_file_stats show the mechanism; every read's bytes are checked too.
 *
 *   mark        a stream's first read issues a window and marks it; a read
 *               that reaches the mark issues the next window (async), a
 *               read of an unmarked cached folio issues nothing, and the
 *               windows grow
 *   random      a scan through one handle with a random miss elsewhere in
 *               the file after every scan read: the scan keeps one stream
 *               (one window started by a miss, then marks only), each
 *               random read is one random read of its own
 *   two         two scans interleaved on one handle both keep windows
 *   sync_miss   a random miss is read in the caller's thread, one I/O of
 *               what was asked
 *   advice      POSIX_FADV_RANDOM: no read-ahead, another handle's mark is
 *               left to it; POSIX_FADV_SEQUENTIAL: the first window is
 *               twice readahead_max_bytes; NORMAL restores the ramp
 *   nowait      a PC_NOWAIT read that reaches a mark issues nothing and
 *               leaves the mark to the next blocking read
 *   uncached    a PC_DONTCACHE scan of 4x memory_limit keeps read-ahead
 *               (marks), reads right, and leaves nothing cached
 *   working_set a cached scan of 4x memory_limit, each folio read once
 *               (several reads of one large folio count once), does not
 *               evict a set of blocks read twice before it: reclaim counts
 *               a folio's first use as none (folio_mark_accessed)
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "internal.h"

#include <pthread.h>
#include <sys/syscall.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define FILE_SIZE (48 * MiB)
#define RA_MAX (2 * MiB)
#define SEED 0x7261ull

static const char *dir;
static char path[4300];

static struct pc_cache *cache_new(size_t memory)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = memory;
	cfg.readahead_max_bytes = RA_MAX;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	return c;
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

static void test_mark(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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
static void test_random_does_not_break_stream(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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

static void test_two_streams(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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

static void test_sync_miss(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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

static void test_advice(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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

static void test_nowait(void)
{
	struct pc_cache *c = cache_new(256 * MiB);
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

static void test_uncached_scan(void)
{
	struct pc_cache *c = cache_new(FILE_SIZE / 4);
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

static void read_hot_set(struct pc_file *h, uint64_t bytes)
{
	for (uint64_t off = 0; off < bytes; off += 4 * KiB)
		read_check(h, off, 4 * KiB, 0);
}

static void test_scan_keeps_working_set(void)
{
	const uint64_t hot = 2 * MiB;
	struct pc_cache *c = cache_new(FILE_SIZE / 4);
	struct pc_file *hh = open_ro(c), *scan = open_ro(c);
	/* 4 KiB folios for the hot set: no read-ahead on its handle. */
	CHECK(pc_fadvise(hh, 0, 0, POSIX_FADV_RANDOM) == 0);
	read_hot_set(hh, hot);
	read_hot_set(hh, hot); /* used twice: a working set */
	for (uint64_t off = hot; off < FILE_SIZE; off += 128 * KiB)
		read_check(scan, off, 128 * KiB, 0);
	uint64_t before = fstats(hh).dev_read_bytes;
	read_hot_set(hh, hot);
	uint64_t reread = fstats(hh).dev_read_bytes - before;
	struct pc_stats cs = tu_stats(c);
	printf("  working set: %llu of %llu hot bytes read again after the scan, %llu evictions\n",
	       (unsigned long long)reread, (unsigned long long)hot, (unsigned long long)cs.evictions);
	CHECK(cs.evictions > 0); /* the scan did fill the cache */
	CHECK(reread == 0);
	CHECK(pc_close(hh) == 0);
	CHECK(pc_close(scan) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

int main(void)
{
	tu_watchdog("test_readahead", 300);
	dir = test_dir("readahead");
	test_path(path, sizeof(path), dir, "file");
	uint8_t *data = malloc(FILE_SIZE);
	REQUIRE(data);
	tu_fill_pattern(data, FILE_SIZE, SEED, 0);
	tu_write_file(path, data, FILE_SIZE);
	free(data);

	test_mark();
	test_random_does_not_break_stream();
	test_two_streams();
	test_sync_miss();
	test_advice();
	test_nowait();
	test_uncached_scan();
	test_scan_keeps_working_set();

	unlink(path);
	test_rmdir(dir);
	return test_done();
}
