/*
 * test_uncached.c - the rules of uncached (PC_DONTCACHE) I/O, one test each
 * (issue 3, "Behaviour that must hold"):
 *
 *   a  edge kept: the folio of a block a write covers only partly survives
 *      the write's writeback (done by the flusher on its own: fsync would
 *      drop a lone edge), the wholly covered part is dropped
 *   b  edge completed and dropped: the neighbouring write marks it, its
 *      writeback drops it; nothing is ever read from the device
 *   c  a lone edge is dropped at close and at fsync/fdatasync (dirty or
 *      clean), and those leave the backing size exact
 *   d  no edge is dropped by age while its file is open for writing: a
 *      dirty one is written after edge_expire_ms and kept, clean
 *   e  a block covered whole in two pieces is not kept: a pwritev whose
 *      iovec boundary falls inside a block, block granularity with blocks
 *      smaller than a page, unaligned PC_DIRECT writes (middle direct, ends
 *      uncached) and neighbouring direct writes completing each other
 *   f  a folio that was cached before an uncached write is not marked
 *   g  a cached access clears the drop-behind mark; one while the folio is
 *      under writeback keeps it: not dropped when the writeback completes,
 *      and no longer drop-behind then
 *   h  a drop-behind folio dirtied again is not dropped before its data is
 *      written; a folio held by a reader is not freed
 *   i  the uncached dirty counter never goes negative nor above the dirty
 *      counter, over a random mix of every kind of operation (printed seed)
 *   j  PC_DONTCACHE|PC_DSYNC: durable on return (backing size at most
 *      rounded up to a block until fsync, zeros past the end), whole blocks
 *      already gone
 *   k  uncached reads: nothing left cached (a lone read drops the folio it
 *      stops in; a sequential stream keeps it for its next read, and a read
 *      ending at end of file drops it); cached data stays cached
 *   l  POSIX_FADV_NOREUSE makes plain I/O of the range uncached
 *   m  an uncached writer past uncached_kick_bytes kicks the flusher, which
 *      writes its data back without fsync
 *   o  clean edges past edge_budget_bytes go, oldest first, and only then
 *      (dirty edges count as dirty data, not against the budget)
 *   p  a writer past the budget waits while other writers of its file keep
 *      completing edges (at most 2 s), and stops about 100 ms after they stop
 *      (at once if none ever did)
 *
 * State is checked through pc_cache_stats and, for single folios, through
 * mapping_lookup() and the folio flags.  The flusher runs asynchronously:
 * waits are polls with a bounded timeout, never bare sleeps.
 *
 * Environment: PC_SEED (test i), PC_OPS (test i operations, default 3000).
 */
#include "testutil.h"

#include "api/internal.h"

#include <linux/falloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define NOT_CACHED 0xffffffffu

static const char *dir;

/* ------------------------------------------------------------ helpers */

static void base_cfg(struct pc_config *cfg, size_t bs)
{
	pc_config_init(cfg);
	cfg->memory_limit = 64 * MiB;
	cfg->block_size = bs;
	cfg->dirty_expire_ms = 60000;  /* only what a test asks for writes back */
	cfg->edge_expire_ms = 60000;   /* edges age only where a test wants it */
	/* Tests here check what close leaves cached and on the device at
	 * once; the default close leaves write-back to the flusher. */
	cfg->flags |= PC_CFG_CLOSE_TO_OPEN;
}

/* A new cache with base_cfg(bs) unchanged. */
static struct pc_cache *base_cache(size_t bs)
{
	struct pc_config cfg;
	base_cfg(&cfg, bs);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	return c;
}

/* Flags of the folio holding byte pos, or NOT_CACHED. */
static uint32_t fstate(struct pc_file *h, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(h->m, pos);
	if (!f)
		return NOT_CACHED;
	uint32_t fl = atomic_load(&f->flags);
	reclaim_release_folio(h->m->c, f); /* a user's: may be the last of a drop-behind folio */
	return fl;
}

static bool is_cached(struct pc_file *h, uint64_t pos)
{
	return fstate(h, pos) != NOT_CACHED;
}

/* A kept edge: cached, PF_EDGE, not drop-behind. */
static bool is_edge(struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	return fl != NOT_CACHED && (fl & PF_EDGE) && !(fl & PF_DROPBEHIND);
}

static void print_flags(const char *what, struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	if (fl == NOT_CACHED)
		printf("   %s: folio at %llu not cached\n", what, (unsigned long long)pos);
	else
		printf("   %s: folio at %llu flags 0x%x%s%s%s%s%s\n", what, (unsigned long long)pos, fl,
		       fl & PF_EDGE ? " EDGE" : "", fl & PF_DROPBEHIND ? " DROPBEHIND" : "",
		       fl & PF_DIRTY ? " DIRTY" : "", fl & PF_WRITEBACK ? " WRITEBACK" : "",
		       fl & PF_UPTODATE ? " UPTODATE" : "");
}

/* The backing file's first n bytes (a multiple of 4096) are expect[0, n). */
static bool disk_prefix_is(const char *path, const uint8_t *expect, size_t n)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return false;
	}
	uint8_t *buf = aligned_alloc(4096, n);
	REQUIRE(buf);
	ssize_t r = pread(fd, buf, n, 0);
	bool ok = r == (ssize_t)n && memcmp(buf, expect, n) == 0;
	if (!ok)
		fprintf(stderr, "   %s: first %zu bytes: read %zd, or wrong bytes\n", path, n, r);
	free(buf);
	close(fd);
	return ok;
}

/*
 * Wait, without fsync, until no drop-behind data is dirty and nothing is
 * under writeback.  The configs here set dirty_expire_ms (and
 * edge_expire_ms) to 60 s, so only the flusher's uncached writeback (a
 * kick, or its round every 100 ms) can get there.  Kept edges are not
 * drop-behind: they may still be dirty (the flusher leaves them for the
 * neighbour that completes them).  5 s should do (TU_POLL).
 */
static bool wait_uncached_written(struct pc_cache *c)
{
	struct pc_stats s;
	if (TU_POLL((s = tu_stats(c), s.dirty_uncached_bytes == 0 && s.writeback_bytes == 0), 5000))
		return true;
	fprintf(stderr, "   uncached data not written without fsync: uncached dirty %llu, writeback %llu\n",
		(unsigned long long)s.dirty_uncached_bytes, (unsigned long long)s.writeback_bytes);
	return false;
}

/* A kept edge after its neighbours' writeback: cached, PF_EDGE, neither
 * drop-behind nor under writeback (dirty, or clean if it was written). */
static bool is_kept_edge(struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	bool ok = fl != NOT_CACHED && (fl & PF_EDGE) && (fl & PF_UPTODATE) && !(fl & (PF_DROPBEHIND | PF_WRITEBACK));
	if (!ok)
		print_flags("expected a kept edge", h, pos);
	return ok;
}

/* After fsync/fdatasync of a file whose one lone edge (the folio at 4096)
 * was dirty: that edge counted as dropped once, gone, nothing dirty or
 * under writeback and nothing of the file cached.  The stats after. */
static struct pc_stats check_edge_synced_away(struct pc_cache *c, struct pc_file *h, uint64_t expired0)
{
	struct pc_stats s = tu_stats(c), fs;
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(!is_cached(h, 4096));
	CHECK(s.dirty_bytes == 0 && s.writeback_bytes == 0);
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	return s;
}

/* Uncached reads of [0, n) left nothing cached (within 2 s); a failure
 * names the folios left. */
static void expect_nothing_cached(struct pc_cache *c, struct pc_file *h, uint64_t n, const char *what)
{
	if (!TU_POLL(tu_stats(c).cached_bytes == 0, 2000)) {
		CHECK(0);
		for (uint64_t p = 0; p < n; p += 4096)
			if (is_cached(h, p))
				print_flags(what, h, p);
	}
}

static struct pc_file *open_new(struct pc_cache *c, const char *name, char *path, size_t pathlen)
{
	test_path(path, pathlen, dir, name);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	return h;
}

/* Fault hook that holds the first device write armed for it (the folios
 * stay under writeback) until released. */
static pthread_mutex_t hk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hk_cv = PTHREAD_COND_INITIALIZER;
static int hk_armed, hk_blocked, hk_release;

static int hold_write_hook(void *arg, int op, int fd, off_t off, size_t len)
{
	(void)arg, (void)fd, (void)off, (void)len;
	if (op != IO_WRITE)
		return 0;
	pthread_mutex_lock(&hk_lock);
	if (hk_armed) {
		hk_armed = 0;
		hk_blocked = 1;
		pthread_cond_broadcast(&hk_cv);
		while (!hk_release)
			pthread_cond_wait(&hk_cv, &hk_lock);
	}
	pthread_mutex_unlock(&hk_lock);
	return 0;
}

static void hook_arm(void)
{
	pthread_mutex_lock(&hk_lock);
	hk_armed = 1;
	hk_blocked = 0;
	hk_release = 0;
	pthread_mutex_unlock(&hk_lock);
}

static bool hook_blocked(void)
{
	pthread_mutex_lock(&hk_lock);
	bool b = hk_blocked;
	pthread_mutex_unlock(&hk_lock);
	return b;
}

static void hook_release(void)
{
	pthread_mutex_lock(&hk_lock);
	hk_armed = 0;
	hk_release = 1;
	pthread_cond_broadcast(&hk_cv);
	pthread_mutex_unlock(&hk_lock);
}

static void *fsync_thread(void *arg)
{
	intptr_t r = pc_fsync(arg);
	return (void *)r;
}

/* ------------------------------------------------------------ (a)(b)(c) */

static void test_edge_kept_completed(void)
{
	printf("-- (a) edge kept, (b) edge completed and dropped, (c) lone edge dropped at fsync and close\n");
	struct pc_cache *c = base_cache(4096);
	char path[4200];
	struct pc_file *h = open_new(c, "edge_ab", path, sizeof(path));
	uint8_t buf[12000];
	tu_fill_pattern(buf, sizeof(buf), 1, 0);

	/* (a) [0, 6000): block [0,4096) whole, [4096,8192) partly covered.
	 * No fsync (it drops lone edges): the flusher writes the uncached
	 * data on its own, and that writeback must not drop the edge. */
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE) == 6000);
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_kept == 1);
	CHECK(is_edge(h, 4096));
	uint32_t fl = fstate(h, 0);
	/* The flusher may have cleaned and dropped it already. */
	CHECK(fl == NOT_CACHED || ((fl & PF_DROPBEHIND) && !(fl & PF_EDGE)));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 0), 2000));
	CHECK(is_kept_edge(h, 4096));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.dropbehind_drops >= 1);
	CHECK(s.edge_expired == 0);
	CHECK(disk_prefix_is(path, buf, 4096)); /* the dropped block was written */

	/* (b) [6000, 12000) completes [4096,8192) and leaves [8192,12288). */
	CHECK(pc_pwrite(h, buf + 6000, 6000, 6000, PC_DONTCACHE) == 6000);
	s = tu_stats(c);
	CHECK(s.edge_completed == 1);
	CHECK(s.edge_kept == 2);
	fl = fstate(h, 4096);
	CHECK(fl == NOT_CACHED || ((fl & PF_DROPBEHIND) && !(fl & PF_EDGE)));
	CHECK(is_edge(h, 8192));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 4096), 2000));
	CHECK(is_kept_edge(h, 8192));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(s.edge_expired == 0);
	CHECK(s.dirty_bytes <= 4096 && s.dirty_uncached_bytes == 0); /* at most the kept edge */
	CHECK(disk_prefix_is(path, buf, 8192));
	if (s.cached_bytes != 4096) {
		print_flags("after (b)", h, 0);
		print_flags("after (b)", h, 4096);
		print_flags("after (b)", h, 8192);
	}

	/* (c) the lone tail edge goes at close. */
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_close(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == 0);
	CHECK(s.folios == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(tu_verify_disk(path, buf, 12000));
	h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	struct pc_stats fs;
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	uint8_t back[12000];
	CHECK(pc_pread(h, back, sizeof(back), 0, PC_DONTCACHE) == 12000);
	CHECK(memcmp(back, buf, sizeof(back)) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 12000));

	/* (c) a lone edge still dirty at close: written, then dropped. */
	h = open_new(c, "edge_c", path, sizeof(path));
	s = tu_stats(c);
	expired0 = s.edge_expired;
	uint64_t cached0 = s.cached_bytes, reads0 = s.dev_read_ios;
	CHECK(pc_pwrite(h, buf, 100, 0, PC_DONTCACHE) == 100);
	CHECK(is_edge(h, 0));
	CHECK(pc_close(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == cached0);
	CHECK(s.dev_read_ios == reads0);
	CHECK(tu_verify_disk(path, buf, 100));

	/* (c) pc_fsync drops a lone edge too (issue 3 (a): "at fsync/close of
	 * its file"), clean or dirty, and makes the size exact.  A clean one:
	 * PC_DSYNC writes its whole range, edge included, and keeps the edge. */
	struct pc_stats fs0;
	h = open_new(c, "edge_fsync", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE | PC_DSYNC) == 6000);
	fl = fstate(h, 4096);
	CHECK(fl != NOT_CACHED && (fl & PF_EDGE) && !(fl & (PF_DIRTY | PF_WRITEBACK | PF_DROPBEHIND)));
	pc_file_stats(h, &fs0);
	CHECK(fs0.cached_bytes == 4096);
	s = tu_stats(c);
	expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(!is_cached(h, 4096));
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 6000));
	CHECK(pc_close(h) == 0);
	/* A dirty one, left by the flusher's uncached writeback. */
	h = open_new(c, "edge_fsync2", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE) == 6000);
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 0), 2000));
	CHECK(is_kept_edge(h, 4096));
	s = tu_stats(c);
	expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	s = check_edge_synced_away(c, h, expired0);
	CHECK(tu_verify_disk(path, buf, 6000));
	/* A dirty lone edge (nothing else dirty, so the flusher leaves it):
	 * pc_fdatasync writes it and drops it. */
	reads0 = tu_stats(c).dev_read_ios;
	CHECK(pc_pwrite(h, buf + 6000, 100, 6000, PC_DONTCACHE) == 100);
	CHECK(is_edge(h, 4096));
	fl = fstate(h, 4096);
	CHECK(fl != NOT_CACHED && (fl & PF_DIRTY));
	s = tu_stats(c);
	expired0 = s.edge_expired;
	CHECK(s.dev_read_ios == reads0); /* deferred: not read at write time */
	CHECK(pc_fdatasync(h) == 0);
	s = check_edge_synced_away(c, h, expired0);
	CHECK(tu_verify_disk(path, buf, 6100));
	/* The block held data on the device and was not cached: writeback
	 * merged it with one read. */
	CHECK(s.dev_read_ios == reads0 + 1);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (d) */

/*
 * Age drops nothing while the file is open for writing: an edge waits for
 * its neighbour however late it comes (issue 11).  edge_expire_ms is 1 ms
 * here and the test waits many flusher rounds (every 100 ms), so a rule
 * that dropped edges by age would have dropped both.  A clean edge (made
 * durable by PC_DSYNC, which keeps it) stays as it is; a dirty one is
 * written by background writeback once older than edge_expire_ms and
 * stays cached, clean, still an edge.  The late neighbours then complete
 * them without a device read.
 */
static void test_edge_age(void)
{
	printf("-- (d) no edge dropped by age while the file is open for writing\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.edge_expire_ms = 1;
	cfg.dirty_expire_ms = 50; /* the dirty edge is written, not dropped */
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200], path2[4200];
	uint8_t buf[8192];
	tu_fill_pattern(buf, sizeof(buf), 2, 0);

	struct pc_file *h = open_new(c, "edge_d1", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE | PC_DSYNC) == 6000); /* clean edge at 4096 */
	struct pc_file *h2 = open_new(c, "edge_d2", path2, sizeof(path2));
	CHECK(pc_pwrite(h2, buf, 100, 0, PC_DONTCACHE) == 100);            /* dirty edge at 0 */
	/* The dirty edge is written by the flusher on its own (edge_expire_ms
	 * past), and kept. */
	CHECK(TU_POLL(tu_stats(c).dirty_bytes == 0 && tu_stats(c).writeback_bytes == 0, 5000));
	usleep(600 * 1000); /* six flusher rounds, 600 edge_expire_ms */
	CHECK(is_kept_edge(h, 4096));
	CHECK(is_kept_edge(h2, 0));
	uint32_t fl = fstate(h2, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DIRTY));
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_expired == 0 && s.edge_evicted_budget == 0);
	CHECK(s.edge_kept == 2);
	CHECK(s.dev_read_ios == 0);

	/* The late neighbours complete them: nothing read, nothing left. */
	CHECK(pc_pwrite(h, buf + 6000, 2000, 6000, PC_DONTCACHE | PC_DSYNC) == 2000);
	CHECK(pc_pwrite(h2, buf + 100, 8092, 100, PC_DONTCACHE) == 8092);
	CHECK(wait_uncached_written(c));
	s = tu_stats(c);
	CHECK(s.edge_completed == 2);
	CHECK(s.dev_read_ios == 0);
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 0, 2000));
	CHECK(pc_close(h) == 0);
	CHECK(pc_close(h2) == 0);
	CHECK(tu_verify_disk(path, buf, 8000));
	CHECK(tu_verify_disk(path2, buf, 8192));
	CHECK(tu_stats(c).dev_read_ios == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (o) */

/*
 * The edge budget: clean edges past edge_budget_bytes go oldest first, and
 * only then.  Six lone edges (a 100-byte uncached write at the start of
 * blocks 64 KiB apart, each its own 4 KiB edge folio) under a budget of
 * four: the first and second go, the four newest stay.  Made in order over
 * two files, so the order is the cache's, not a file's.  With PC_DSYNC
 * each edge is clean on return and the fifth and sixth writes evict at
 * once.  Without, the edges are dirty, which the budget does not count
 * (they are dirty data, under the dirty limit): none goes until they are
 * written; then the trim drops the two oldest.  A neighbour of an evicted
 * edge must read the block back (the price the budget pays for memory);
 * one of a kept edge reads nothing.  Every edge's data is on the device.
 */
static void budget_order_run(int flags)
{
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.edge_budget_bytes = 4 * 4096;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[2][4200];
	struct pc_file *h[2] = { open_new(c, "edge_n0", path[0], sizeof(path[0])),
				 open_new(c, "edge_n1", path[1], sizeof(path[1])) };
	uint8_t buf[4096];
	tu_fill_pattern(buf, sizeof(buf), 5, 0);
	/* Edge k: file k % 2, block 16 * k. */
	for (int k = 0; k < 6; k++) {
		CHECK(pc_pwrite(h[k % 2], buf, 100, (off_t)k * 65536, PC_DONTCACHE | flags) == 100);
		uint64_t evicted = tu_stats(c).edge_evicted_budget;
		CHECK(evicted == (flags & PC_DSYNC ? (uint64_t)(k < 4 ? 0 : k - 3) : 0));
	}
	if (!(flags & PC_DSYNC)) {
		for (int k = 0; k < 6; k++)
			CHECK(is_edge(h[k % 2], (uint64_t)k * 65536));
		for (int i = 0; i < 2; i++)
			CHECK(writeback_and_wait(h[i]->m, 0, UINT64_MAX, WB_ALL) == 0);
		edges_trim(c); /* what the next uncached write leaving an edge does */
	}
	CHECK(!is_cached(h[0], 0) && !is_cached(h[1], 65536));
	for (int k = 2; k < 6; k++)
		CHECK(is_kept_edge(h[k % 2], (uint64_t)k * 65536));
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_kept == 6 && s.edge_evicted_budget == 2 && s.edge_expired == 0);
	CHECK(c->edge_bytes == 4 * 4096);
	CHECK(s.dirty_bytes == 0 && s.writeback_bytes == 0);
	CHECK(s.dev_read_ios == 0);

	/* Neighbours: of a kept edge (k = 5, file 1), nothing read; of an
	 * evicted one (k = 0, file 0), its block is read back. */
	CHECK(pc_pwrite(h[1], buf + 100, 3996, 5 * 65536 + 100, PC_DONTCACHE | PC_DSYNC) == 3996);
	CHECK(tu_stats(c).dev_read_ios == 0);
	CHECK(pc_pwrite(h[0], buf + 100, 3996, 100, PC_DONTCACHE | PC_DSYNC) == 3996);
	CHECK(tu_stats(c).dev_read_ios == 1);
	/* The block read back is complete: not kept as an edge of its own
	 * (it would wait for nobody, and push live edges out). */
	CHECK(tu_stats(c).edge_kept == 6);
	CHECK(!is_cached(h[0], 0));
	for (int i = 0; i < 2; i++)
		CHECK(pc_close(h[i]) == 0);
	uint8_t back[4096];
	for (int k = 0; k < 6; k++) {
		int fd = open(path[k % 2], O_RDONLY);
		REQUIRE(fd >= 0);
		size_t n = k == 0 || k == 5 ? 4096 : 100;
		CHECK(pread(fd, back, n, (off_t)k * 65536) == (ssize_t)n && memcmp(back, buf, n) == 0);
		close(fd);
	}
	CHECK(pc_cache_destroy(c) == 0);
}

static void test_edge_budget(void)
{
	printf("-- (o) clean edges past edge_budget_bytes go oldest first\n");
	budget_order_run(PC_DSYNC);
	budget_order_run(0);
	/* The budget's bounds: the default is memory_limit / 4, half of it is
	 * accepted, more is refused. */
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	CHECK(edge_budget(c) == cfg.memory_limit / 4);
	CHECK(pc_cache_destroy(c) == 0);
	cfg.edge_budget_bytes = cfg.memory_limit / 2;
	c = pc_cache_new(&cfg);
	CHECK(c && edge_budget(c) == cfg.memory_limit / 2);
	if (c)
		CHECK(pc_cache_destroy(c) == 0);
	cfg.edge_budget_bytes = cfg.memory_limit / 2 + 4096;
	errno = 0;
	CHECK(pc_cache_new(&cfg) == NULL && errno == EINVAL);
}

/* ------------------------------------------------------------------ (e) */

static void test_whole_in_pieces(void)
{
	printf("-- (e) a block covered whole in pieces is not kept\n");
	struct pc_cache *c = base_cache(4096);
	char path[4200];
	uint8_t buf[20000];
	tu_fill_pattern(buf, sizeof(buf), 3, 0);

	/* pwritev [0,2000) + [2000,4096) at 0: one whole block. */
	struct pc_file *h = open_new(c, "whole_iov", path, sizeof(path));
	struct iovec v[2] = { { buf, 2000 }, { buf + 2000, 2096 } };
	CHECK(pc_pwritev(h, v, 2, 0, PC_DONTCACHE) == 4096);
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_kept == 0);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 0));
	CHECK(s.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 4096));
	/* Three iovecs, boundaries inside blocks, two whole blocks + an edge.
	 * Written by the flusher (fsync would drop the lone edge). */
	struct iovec v3[3] = { { buf + 4096, 1 }, { buf + 4097, 5000 }, { buf + 9097, 4191 } };
	CHECK(pc_pwritev(h, v3, 3, 4096, PC_DONTCACHE) == 9192);
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 4096) && !is_cached(h, 8192), 2000));
	CHECK(is_kept_edge(h, 12288));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.edge_kept == 1);
	CHECK(s.dev_read_ios == 0);
	CHECK(disk_prefix_is(path, buf, 12288));
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 13288));

	/* Unaligned PC_DIRECT: two iovecs with a boundary inside the aligned
	 * middle [0,8192) (direct, never cached), tail [8192,10000) an edge.
	 * The edge is the only uncached data, still dirty: no fsync here (it
	 * would drop it); the middle is on the device already. */
	h = open_new(c, "whole_direct", path, sizeof(path));
	struct iovec d[2] = { { buf, 2000 }, { buf + 2000, 8000 } };
	CHECK(pc_pwritev(h, d, 2, 0, PC_DIRECT) == 10000);
	CHECK(!is_cached(h, 0) && !is_cached(h, 4096));
	CHECK(is_edge(h, 8192));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(disk_prefix_is(path, buf, 8192));
	uint64_t expired0 = s.edge_expired;
	/* The next unaligned direct write completes that edge with its head
	 * piece: it is dropped, and nothing was ever read. */
	CHECK(pc_pwrite(h, buf + 10000, 6384, 10000, PC_DIRECT) == 6384);
	s = tu_stats(c);
	CHECK(s.edge_completed == 1);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 8192));
	CHECK(s.cached_bytes == 0);
	CHECK(s.edge_expired == expired0); /* completed, not dropped as lone */
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);

	/* Neighbouring unaligned direct writes, all of it through edges. */
	h = open_new(c, "direct_neigh", path, sizeof(path));
	s = tu_stats(c);
	uint64_t reads0 = s.dev_read_ios, completed0 = s.edge_completed;
	expired0 = s.edge_expired;
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DIRECT) == 6000);
	CHECK(pc_pwrite(h, buf + 6000, 6000, 6000, PC_DIRECT) == 6000);
	CHECK(pc_pwrite(h, buf + 12000, 4384, 12000, PC_DIRECT) == 4384);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_completed == completed0 + 2);
	CHECK(s.edge_expired == expired0);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == reads0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);

	/* Blocks smaller than a page: the rule is per block, not per folio. */
	c = base_cache(512);
	test_path(path, sizeof(path), dir, "whole_512");
	h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!h) {
		printf("   block size 512 refused (errno %d): 512-byte cases skipped\n", errno);
		CHECK(pc_cache_destroy(c) == 0);
		return;
	}
	/* Two iovecs inside one 512-byte block and one page. */
	struct iovec v5[2] = { { buf, 300 }, { buf + 300, 3796 } };
	CHECK(pc_pwritev(h, v5, 2, 0, PC_DONTCACHE) == 4096);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 4096));
	/* [4096, 10240): every block it touches is covered whole, though the
	 * page [8192,12288) only partly: nothing is an edge, and the
	 * flusher's writeback drops it all (no fsync, which would drop an
	 * edge too and hide one). */
	uint64_t kept0 = tu_stats(c).edge_kept;
	CHECK(pc_pwrite(h, buf + 4096, 6144, 4096, PC_DONTCACHE) == 6144);
	CHECK(!is_edge(h, 8192));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 0, 2000));
	s = tu_stats(c);
	CHECK(s.dirty_bytes == 0);
	printf("   bs 512, block-aligned write ending mid-page: edge_kept +%llu, cached %llu after writeback\n",
	       (unsigned long long)(s.edge_kept - kept0), (unsigned long long)s.cached_bytes);
	CHECK(s.edge_kept == kept0);
	CHECK(s.cached_bytes == 0);
	CHECK(!is_cached(h, 8192));
	/* Its block-aligned neighbour [10240, 12288) then completes the page. */
	CHECK(pc_pwrite(h, buf + 10240, 2048, 10240, PC_DONTCACHE) == 2048);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(tu_verify_disk(path, buf, 12288));
	/* Unaligned direct with 512-byte blocks: middle direct, ends edges;
	 * the neighbours complete them. */
	uint64_t cached_before = tu_stats(c).cached_bytes, reads_before = tu_stats(c).dev_read_ios;
	completed0 = tu_stats(c).edge_completed;
	expired0 = tu_stats(c).edge_expired;
	CHECK(pc_pwrite(h, buf + 12288, 1000, 12288, PC_DIRECT) == 1000);  /* [12288,13288) */
	CHECK(pc_pwrite(h, buf + 13288, 3000, 13288, PC_DIRECT) == 3000);  /* [13288,16288) */
	CHECK(pc_pwrite(h, buf + 16288, 96, 16288, PC_DIRECT) == 96);      /* to 16384 */
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 12288));
	CHECK(s.edge_completed == completed0 + 2);
	CHECK(s.edge_expired == expired0);
	CHECK(s.cached_bytes == cached_before);
	CHECK(s.dev_read_ios == reads_before);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (f) */

static void test_cached_not_marked(void)
{
	printf("-- (f) a folio cached before an uncached write is not marked\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.readahead_max_bytes = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	uint8_t buf[16384];
	tu_fill_pattern(buf, sizeof(buf), 4, 0);

	/* Cached by a buffered write (dirty still). */
	struct pc_file *h = open_new(c, "cached_w", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 8192, 0, 0) == 8192);
	tu_fill_pattern(buf + 100, 100, 40, 100);
	CHECK(pc_pwrite(h, buf + 100, 100, 100, PC_DONTCACHE) == 100);
	tu_fill_pattern(buf + 4096, 4096, 41, 4096);
	CHECK(pc_pwrite(h, buf + 4096, 4096, 4096, PC_DONTCACHE) == 4096);
	/* Before fsync too (fsync drops lone edges, which would hide one). */
	uint32_t f0 = fstate(h, 0), f1 = fstate(h, 4096);
	CHECK(f0 != NOT_CACHED && !(f0 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(pc_fsync(h) == 0);
	f0 = fstate(h, 0);
	f1 = fstate(h, 4096);
	CHECK(f0 != NOT_CACHED && !(f0 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 8192);
	CHECK(s.edge_kept == 0);
	CHECK(tu_verify_disk(path, buf, 8192));
	CHECK(pc_close(h) == 0);

	/* Cached by a buffered read of existing data (clean). */
	test_path(path, sizeof(path), dir, "cached_r");
	tu_fill_pattern(buf, sizeof(buf), 5, 0);
	tu_write_file(path, buf, 16384);
	h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	s = tu_stats(c);
	uint64_t reads0 = s.dev_read_ios;
	uint8_t back[4096];
	CHECK(pc_pread(h, back, 4096, 4096, 0) == 4096);
	CHECK(memcmp(back, buf + 4096, 4096) == 0);
	tu_fill_pattern(buf + 5000, 100, 50, 5000);
	CHECK(pc_pwrite(h, buf + 5000, 100, 5000, PC_DONTCACHE) == 100);
	f1 = fstate(h, 4096);
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	CHECK(pc_fsync(h) == 0);
	f1 = fstate(h, 4096);
	CHECK(f1 != NOT_CACHED && !(f1 & (PF_DROPBEHIND | PF_EDGE)));
	s = tu_stats(c);
	CHECK(s.dev_read_ios == reads0 + 1);
	CHECK(s.edge_kept == 0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (g) */

static void test_mark_cleared(void)
{
	printf("-- (g) a cached access clears the drop-behind mark\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.uncached_kick_bytes = 8 * MiB;
	cfg.readahead_max_bytes = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	c->fault_hook = hold_write_hook; /* set before any I/O */
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *buf = malloc(R), *back = malloc(R);
	REQUIRE(buf && back);

	/* Before writeback.  The flusher may clean (and drop) the region
	 * between our two calls; then the read misses and we retry. */
	struct pc_file *h = open_new(c, "mark", path, sizeof(path));
	bool raced = true;
	for (int attempt = 0; attempt < 5 && raced; attempt++) {
		uint64_t off = (uint64_t)attempt * R;
		tu_fill_pattern(buf, R, 60 + (uint64_t)attempt, off);
		struct pc_stats s0 = tu_stats(c);
		CHECK(pc_pwrite(h, buf, R, (off_t)off, PC_DONTCACHE) == (ssize_t)R);
		CHECK(pc_pread(h, back, R, (off_t)off, 0) == (ssize_t)R);
		CHECK(memcmp(back, buf, R) == 0);
		struct pc_stats s1 = tu_stats(c);
		raced = s1.dev_read_ios != s0.dev_read_ios || s1.dropbehind_drops != s0.dropbehind_drops ||
			(fstate(h, off) != NOT_CACHED && (fstate(h, off) & PF_WRITEBACK));
		if (raced) {
			printf("   attempt %d: the flusher dropped it before the read; again\n", attempt);
			continue;
		}
		for (uint64_t p = off; p < off + R; p += 4096) {
			uint32_t fl = fstate(h, p);
			if (fl == NOT_CACHED || (fl & PF_DROPBEHIND)) {
				print_flags("after the cached read", h, p);
				CHECK(0);
				break;
			}
		}
		CHECK(pc_fsync(h) == 0);
		bool all = true;
		for (uint64_t p = off; p < off + R; p += 4096)
			all = all && is_cached(h, p);
		CHECK(all);
	}
	CHECK(!raced);
	CHECK(pc_close(h) == 0);

	/* While the folio is under writeback: the device write is held by the
	 * fault hook, the read is a cache hit.  The mark may stay while the
	 * write is in flight, but the access must keep the folio: when the
	 * writeback completes it is not dropped, and not drop-behind any more.
	 * The control: an uncached folio of the same fsync that nobody read
	 * is dropped when its writeback completes. */
	h = open_new(c, "mark_wb", path, sizeof(path));
	const uint64_t ctl = 4 * R; /* the control folio, far from [0, R) */
	uint8_t *model = calloc(1, ctl + R);
	REQUIRE(model);
	tu_fill_pattern(model, R, 70, 0);
	tu_fill_pattern(model + ctl, R, 71, ctl);
	hook_arm();
	CHECK(pc_pwrite(h, model, R, 0, PC_DONTCACHE) == (ssize_t)R);
	CHECK(pc_pwrite(h, model + ctl, R, (off_t)ctl, PC_DONTCACHE) == (ssize_t)R);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, fsync_thread, h) == 0);
	CHECK(TU_POLL(hook_blocked(), 5000));
	CHECK(TU_POLL(fstate(h, 0) != NOT_CACHED && (fstate(h, 0) & PF_WRITEBACK), 5000));
	struct pc_stats s0 = tu_stats(c);
	CHECK(pc_pread(h, back, R, 0, 0) == (ssize_t)R);
	CHECK(memcmp(back, model, R) == 0);
	struct pc_stats s1 = tu_stats(c);
	CHECK(s1.dev_read_ios == s0.dev_read_ios);
	uint32_t fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && (fl & PF_WRITEBACK));
	hook_release();
	void *ret;
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	/* PF_WRITEBACK is cleared just before the completion's drop attempt:
	 * wait for that attempt to have decided. */
	CHECK(TU_POLL(fstate(h, 0) == NOT_CACHED || !(fstate(h, 0) & (PF_WRITEBACK | PF_DROPBEHIND)), 2000));
	bool kept = true;
	for (uint64_t p = 0; p < R; p += 4096) {
		fl = fstate(h, p);
		if (fl == NOT_CACHED || (fl & (PF_DROPBEHIND | PF_DIRTY | PF_WRITEBACK))) {
			print_flags("read during writeback, after it", h, p);
			kept = false;
			break;
		}
	}
	CHECK(kept);
	bool ctl_dropped = TU_POLL(!is_cached(h, ctl), 2000);
	if (!ctl_dropped)
		print_flags("control (not read) after writeback", h, ctl);
	CHECK(ctl_dropped);
	CHECK(pc_fsync(h) == 0);
	bool all = true;
	for (uint64_t p = 0; p < R; p += 4096)
		all = all && is_cached(h, p);
	if (!all)
		print_flags("after a second fsync", h, 0);
	CHECK(all);
	CHECK(tu_verify_disk(path, model, ctl + R));
	CHECK(pc_close(h) == 0);
	free(model);
	c->fault_hook = NULL;
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
	free(back);
}

/* ------------------------------------------------------------------ (h) */

struct writer_arg {
	struct pc_file *h;
	const uint8_t *buf;
	size_t len;
	off_t off;
	ssize_t ret;
};

static void *writer_thread(void *p)
{
	struct writer_arg *a = p;
	a->ret = pc_pwrite(a->h, a->buf, a->len, a->off, PC_DONTCACHE);
	return NULL;
}

static void test_not_dropped(void)
{
	printf("-- (h) dirty/writeback/held drop-behind folios are not dropped\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.uncached_kick_bytes = 64 * KiB;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	c->fault_hook = hold_write_hook;
	char path[4200];
	const size_t R = 64 * KiB;
	uint8_t *a = malloc(R), *b = malloc(R), *back = malloc(R);
	REQUIRE(a && b && back);

	/* Deterministic: A under writeback (held), B written meanwhile by
	 * another thread (which must wait for the writeback), then released. */
	struct pc_file *h = open_new(c, "redirty", path, sizeof(path));
	tu_fill_pattern(a, R, 80, 0);
	tu_fill_pattern(b, R, 81, 0);
	hook_arm();
	CHECK(pc_pwrite(h, a, R, 0, PC_DONTCACHE) == (ssize_t)R);
	pthread_t ft, wt;
	REQUIRE(pthread_create(&ft, NULL, fsync_thread, h) == 0);
	CHECK(TU_POLL(hook_blocked(), 5000));
	struct writer_arg wa = { h, b, R, 0, 0 };
	REQUIRE(pthread_create(&wt, NULL, writer_thread, &wa) == 0);
	usleep(20000); /* give the writer time to block (not needed for correctness) */
	hook_release();
	void *ret;
	pthread_join(ft, &ret);
	CHECK(ret == NULL);
	pthread_join(wt, NULL);
	CHECK(wa.ret == (ssize_t)R);
	CHECK(pc_pread(h, back, R, 0, PC_DONTCACHE) == (ssize_t)R);
	CHECK(memcmp(back, b, R) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, b, R));
	struct pc_stats s = tu_stats(c);
	CHECK(s.dirty_bytes == 0 && s.dirty_uncached_bytes == 0);
	CHECK(pc_close(h) == 0);
	c->fault_hook = NULL;

	/* Racy: rewrite the same region while the kicked flusher cleans it;
	 * every read sees the latest data, the device the last. */
	h = open_new(c, "redirty_loop", path, sizeof(path));
	for (int i = 0; i < 300; i++) {
		tu_fill_pattern(a, R, 100 + (uint64_t)i, 0);
		size_t off = (size_t)(i % 7) * 512, len = R - off - (size_t)(i % 5) * 1000;
		if (pc_pwrite(h, a + off, len, (off_t)off, PC_DONTCACHE) != (ssize_t)len) {
			CHECK(0);
			break;
		}
		memcpy(b + off, a + off, len);
		if (i == 0)
			memcpy(b, a, R);
		if (pc_pread(h, back, R, 0, PC_DONTCACHE) != (ssize_t)R || memcmp(back, b, R) != 0) {
			fprintf(stderr, "   redirty loop: stale data after write %d\n", i);
			CHECK(0);
			break;
		}
		if (i % 50 == 49)
			CHECK(pc_fsync(h) == 0);
	}
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, b, R));
	s = tu_stats(c);
	CHECK(s.dirty_bytes == 0 && s.dirty_uncached_bytes == 0);
	CHECK(pc_close(h) == 0);

	/* A folio held by a reader across the writeback that would drop it. */
	h = open_new(c, "held", path, sizeof(path));
	tu_fill_pattern(a, 4096, 90, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	struct pc_folio *f = mapping_lookup(h->m, 0);
	CHECK(f != NULL);
	if (f) {
		CHECK(folio_test(f, PF_DROPBEHIND));
		CHECK(pc_fsync(h) == 0);
		CHECK(folio_test(f, PF_INDEXED));
		CHECK(f->mapping == h->m);
		CHECK(folio_test(f, PF_UPTODATE) && !folio_test(f, PF_DIRTY | PF_WRITEBACK));
		CHECK(memcmp(arena_data(c, f), a, 4096) == 0);
		CHECK(atomic_load(&f->refcount) >= 2);
		CHECK(is_cached(h, 0));
		CHECK(pc_pread(h, back, 4096, 0, PC_DONTCACHE) == 4096);
		CHECK(memcmp(back, a, 4096) == 0);
		CHECK(memcmp(arena_data(c, f), a, 4096) == 0);
		/* Its write-back ended while we held it: the last user to let
		 * go drops it (reclaim_release_folio). */
		CHECK(folio_test(f, PF_DROP_PENDING));
		reclaim_release_folio(c, f);
		CHECK(!is_cached(h, 0));
	}
	tu_fill_pattern(a, 4096, 91, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, a, 4096));
	tu_fill_pattern(a, 4096, 92, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, 0) == 4096);
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, a, 4096));

	/* folio_put only counts: a plain put by the last user leaves the
	 * folio cached, drop pending, for the next user's reclaim_release_folio. */
	h = open_new(c, "held_put", path, sizeof(path));
	tu_fill_pattern(a, 4096, 93, 0);
	CHECK(pc_pwrite(h, a, 4096, 0, PC_DONTCACHE) == 4096);
	f = mapping_lookup(h->m, 0);
	CHECK(f != NULL);
	if (f) {
		CHECK(pc_fsync(h) == 0);
		CHECK(folio_test(f, PF_DROP_PENDING));
		folio_put(c, f);
		CHECK(is_cached(h, 0));  /* found it, and as its last user dropped it */
		CHECK(!is_cached(h, 0));
	}
	CHECK(pc_pread(h, back, 4096, 0, 0) == 4096);
	CHECK(memcmp(back, a, 4096) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(a);
	free(b);
	free(back);
}

/* ------------------------------------------------------------------ (i) */

#define I_CAP (2 * MiB)
#define I_MAXLEN (96 * KiB)

/* Counter invariants: never negative; uncached <= dirty.  The two are not
 * read atomically together while the flusher changes them, so a violation
 * of the second must persist (past TU_POLL's bound) to count. */
static bool counters_ok(struct pc_cache *c, struct pc_file *h, const char *when, unsigned op)
{
	struct pc_mapping *m = h->m;
	int64_t cu = atomic_load(&c->uncached), cd = atomic_load(&c->dirty), cw = atomic_load(&c->writeback);
	int64_t mu = atomic_load(&m->nr_uncached), md = atomic_load(&m->nr_dirty);
	int64_t du = atomic_load(&m->dom->uncached), dd = atomic_load(&m->dom->dirty);
	if (cu < 0 || cd < 0 || cw < 0 || mu < 0 || md < 0 || du < 0 || dd < 0) {
		fprintf(stderr,
			"   op %u (%s): negative counter: cache uncached %lld dirty %lld writeback %lld, "
			"mapping uncached %lld dirty %lld, domain uncached %lld dirty %lld\n",
			op, when, (long long)cu, (long long)cd, (long long)cw, (long long)mu, (long long)md,
			(long long)du, (long long)dd);
		return false;
	}
	struct pc_stats s;
	if (TU_POLL((s = tu_stats(c), s.dirty_uncached_bytes <= s.dirty_bytes &&
				      atomic_load(&c->uncached) <= atomic_load(&c->dirty)),
		    50))
		return true;
	fprintf(stderr, "   op %u (%s): dirty_uncached_bytes %llu > dirty_bytes %llu (persisting)\n", op, when,
		(unsigned long long)s.dirty_uncached_bytes, (unsigned long long)s.dirty_bytes);
	return false;
}

static void test_counter_never_negative(void)
{
	uint64_t seed = test_seed("uncached counters", 0x5eed0003);
	unsigned nops = 3000;
	const char *e = getenv("PC_OPS");
	if (e && atoi(e) > 0)
		nops = (unsigned)atoi(e);
	printf("-- (i) uncached dirty counter never negative (%u ops)\n", nops);
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.memory_limit = 4 * MiB;     /* eviction and throttling too */
	cfg.max_folio_size = 64 * KiB;
	cfg.uncached_kick_bytes = 128 * KiB;
	cfg.dirty_expire_ms = 300;
	cfg.edge_expire_ms = 400;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	struct pc_file *h = open_new(c, "counters", path, sizeof(path));
	uint8_t *model = calloc(1, I_CAP + I_MAXLEN), *buf = malloc(I_MAXLEN), *back = malloc(I_MAXLEN);
	REQUIRE(model && buf && back);
	uint64_t size = 0;
	static const int wflags[] = { 0, PC_DONTCACHE, PC_DONTCACHE, PC_DONTCACHE, PC_DSYNC,
				      PC_DONTCACHE | PC_DSYNC, PC_DIRECT, PC_DIRECT | PC_DSYNC };
	static const int rflags[] = { 0, PC_DONTCACHE, PC_DONTCACHE, PC_DIRECT };
	bool ok = true;
	for (unsigned op = 0; op < nops && ok; op++) {
		unsigned kind = (unsigned)(tu_rand(&seed) % 100);
		uint64_t off = tu_rand(&seed) % I_CAP;
		if (tu_rand(&seed) % 3 == 0)
			off &= ~4095ull;
		uint64_t len = 1 + tu_rand(&seed) % (tu_rand(&seed) % 4 == 0 ? I_MAXLEN : 9000);
		if (off + len > I_CAP)
			len = I_CAP - off;
		const char *what;
		if (kind < 45) {
			int fl = wflags[tu_rand(&seed) % 8];
			what = "write";
			for (uint64_t i = 0; i < len; i++)
				buf[i] = (uint8_t)tu_rand(&seed);
			ssize_t r;
			if (tu_rand(&seed) % 4 == 0 && len > 1) {
				size_t cut = 1 + tu_rand(&seed) % (len - 1);
				struct iovec v[2] = { { buf, cut }, { buf + cut, len - cut } };
				r = pc_pwritev(h, v, 2, (off_t)off, fl);
			} else {
				r = pc_pwrite(h, buf, len, (off_t)off, fl);
			}
			if (r != (ssize_t)len) {
				fprintf(stderr, "   op %u: write %llu+%llu flags %d returned %zd\n", op,
					(unsigned long long)off, (unsigned long long)len, fl, r);
				ok = false;
			}
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
		} else if (kind < 80) {
			int fl = rflags[tu_rand(&seed) % 4];
			what = "read";
			ssize_t r = pc_pread(h, back, len, (off_t)off, fl);
			uint64_t want = off >= size ? 0 : (size - off < len ? size - off : len);
			if (r != (ssize_t)want || memcmp(back, model + off, want) != 0) {
				fprintf(stderr, "   op %u: read %llu+%llu flags %d: got %zd (want %llu) or wrong data\n",
					op, (unsigned long long)off, (unsigned long long)len, fl, r,
					(unsigned long long)want);
				ok = false;
			}
		} else if (kind < 86) {
			what = "truncate";
			uint64_t ns = tu_rand(&seed) % I_CAP;
			if (pc_ftruncate(h, (off_t)ns) != 0) {
				ok = false;
			}
			if (ns < size)
				memset(model + ns, 0, size - ns);
			size = ns;
		} else if (kind < 92) {
			what = "punch";
			int r = pc_fallocate(h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
			if (r != 0) {
				fprintf(stderr, "   op %u: punch failed errno %d\n", op, errno);
				ok = false;
			}
			if (off < size)
				memset(model + off, 0, (off + len > size ? size : off + len) - off);
		} else if (kind < 97) {
			what = "fsync";
			if (pc_fsync(h) != 0)
				ok = false;
		} else {
			what = "fadvise";
			int adv = tu_rand(&seed) % 2 ? POSIX_FADV_NOREUSE : POSIX_FADV_NORMAL;
			if (tu_rand(&seed) % 3 == 0)
				adv = POSIX_FADV_DONTNEED;
			if (pc_fadvise(h, (off_t)off, (off_t)len, adv) != 0)
				ok = false;
		}
		if (!counters_ok(c, h, what, op))
			ok = false;
		if (!ok)
			fprintf(stderr, "   stopped at op %u (%s); replay with PC_SEED\n", op, what);
	}
	CHECK(ok);
	CHECK(pc_fsync(h) == 0);
	struct pc_stats s = tu_stats(c);
	CHECK(s.dirty_uncached_bytes == 0);
	CHECK(s.dirty_bytes == 0);
	CHECK(atomic_load(&c->uncached) == 0);
	CHECK(atomic_load(&c->dirty) == 0);
	CHECK(atomic_load(&h->m->nr_uncached) == 0);
	CHECK(atomic_load(&h->m->dom->uncached) == 0);
	if (atomic_load(&c->uncached) != 0 || atomic_load(&c->dirty) != 0)
		fprintf(stderr, "   after the final fsync: uncached %lld dirty %lld\n",
			(long long)atomic_load(&c->uncached), (long long)atomic_load(&c->dirty));
	CHECK(pc_size(h) == (off_t)size);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, model, size));
	CHECK(pc_cache_destroy(c) == 0);
	free(model);
	free(buf);
	free(back);
}

/* ------------------------------------------------------------------ (j) */

static void test_dontcache_dsync(void)
{
	printf("-- (j) PC_DONTCACHE|PC_DSYNC: durable on return, whole blocks gone\n");
	struct pc_cache *c = base_cache(4096);
	char path[4200];
	uint8_t buf[20480];
	tu_fill_pattern(buf, sizeof(buf), 6, 0);
	struct pc_file *h = open_new(c, "dsync", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 13288, 0, PC_DONTCACHE | PC_DSYNC) == 13288);
	/* The data, and a size that covers it, durable on return.  Until the
	 * next fsync/fdatasync/close the backing size may be rounded up to a
	 * block, the extra bytes zeros (pagecache.h, PC_DSYNC); pc_size is
	 * exact all along. */
	CHECK(tu_verify_disk_rounded(path, buf, 13288, 4096));
	CHECK(pc_size(h) == 13288);
	CHECK(!is_cached(h, 0) && !is_cached(h, 4096) && !is_cached(h, 8192));
	CHECK(is_edge(h, 12288));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dirty_bytes == 0);
	/* The neighbour completes the edge: on return it is gone too. */
	CHECK(pc_pwrite(h, buf + 13288, 7000, 13288, PC_DONTCACHE | PC_DSYNC) == 7000);
	CHECK(tu_verify_disk_rounded(path, buf, 20288, 4096));
	CHECK(pc_size(h) == 20288);
	CHECK(!is_cached(h, 12288));
	CHECK(is_edge(h, 16384));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.edge_completed == 1);
	CHECK(s.dev_read_ios == 0);
	/* fsync makes the size exact and drops the lone tail edge. */
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, buf, 20288));
	CHECK(pc_size(h) == 20288);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 20288));
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (k) */

static void test_uncached_read(void)
{
	printf("-- (k) uncached reads\n");
	struct pc_cache *c = base_cache(4096);
	char path[4200];
	const size_t N = 1 * MiB;
	uint8_t *data = malloc(N), *back = malloc(N);
	REQUIRE(data && back);
	tu_fill_pattern(data, N, 7, 0);
	test_path(path, sizeof(path), dir, "uread");
	tu_write_file(path, data, N);

	/* Sequential uncached reads of the whole file (read-ahead on). */
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	for (size_t off = 0; off < N; off += 64 * KiB)
		CHECK(pc_pread(h, back + off, 64 * KiB, (off_t)off, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data, N) == 0);
	struct pc_stats s = tu_stats(c);
	printf("   sequential: %llu read I/Os, %llu drops, %llu bytes left cached\n",
	       (unsigned long long)s.dev_read_ios, (unsigned long long)s.dropbehind_drops,
	       (unsigned long long)s.cached_bytes);
	expect_nothing_cached(c, h, N, "left by sequential uncached reads");
	CHECK(pc_close(h) == 0);

	/* Sequential uncached reads of 5000 bytes: the folio each one stops
	 * in is kept for the next read (so nothing is read from the device
	 * twice) and dropped once a read passes its end; nothing is left. */
	h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	s = tu_stats(c);
	uint64_t rbytes0 = s.dev_read_bytes;
	bool kept_ok = true;
	for (size_t off = 0; off < N; off += 5000) {
		size_t len = N - off < 5000 ? N - off : 5000;
		CHECK(pc_pread(h, back + off, len, (off_t)off, PC_DONTCACHE) == (ssize_t)len);
		uint64_t e = off + len;
		if (e % 4096 && kept_ok && !is_cached(h, e - 1)) {
			printf("   sequential 5000-byte reads: folio of byte %llu not kept for the next read\n",
			       (unsigned long long)(e - 1));
			kept_ok = false;
		}
	}
	CHECK(kept_ok);
	CHECK(memcmp(back, data, N) == 0);
	s = tu_stats(c);
	printf("   sequential 5000-byte reads: %llu bytes read from the device for %zu\n",
	       (unsigned long long)(s.dev_read_bytes - rbytes0), N);
	CHECK(s.dev_read_bytes - rbytes0 == N);
	expect_nothing_cached(c, h, N, "left by sequential 5000-byte uncached reads");
	CHECK(pc_close(h) == 0);

	/* One random uncached read in the middle (no read-ahead): it drops
	 * the folio it stops in too. */
	h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	uint64_t cached0 = tu_stats(c).cached_bytes;
	CHECK(pc_pread(h, back, 5000, 300000, PC_DONTCACHE) == 5000);
	CHECK(memcmp(back, data + 300000, 5000) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == cached0);
	if (s.cached_bytes != cached0) {
		print_flags("uncached read [300000,305000)", h, 300000);
		print_flags("uncached read [300000,305000)", h, 304999);
	}

	/* Cached data stays cached. */
	CHECK(pc_pread(h, back, 64 * KiB, 512 * KiB, 0) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data + 512 * KiB, 64 * KiB) == 0);
	uint64_t cached = tu_stats(c).cached_bytes, reads = tu_stats(c).dev_read_ios;
	CHECK(cached >= 64 * KiB);
	CHECK(pc_pread(h, back, 64 * KiB, 512 * KiB, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data + 512 * KiB, 64 * KiB) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == cached);
	CHECK(s.dev_read_ios == reads);
	for (uint64_t p = 512 * KiB; p < 576 * KiB; p += 4096) {
		uint32_t fl = fstate(h, p);
		if (fl == NOT_CACHED || (fl & PF_DROPBEHIND)) {
			print_flags("cached, then read uncached", h, p);
			CHECK(0);
			break;
		}
	}
	CHECK(pc_close(h) == 0);

	/* A sequential uncached read that ends at end of file, inside a
	 * folio: no later read can pass that folio's end, so it is dropped
	 * now (pagecache.h, PC_DONTCACHE: "folios this call creates are
	 * dropped once the call is done with them (reads: after copying
	 * out)"). */
	test_path(path, sizeof(path), dir, "uread_eof");
	tu_write_file(path, data, 12000);
	h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	CHECK(pc_pread(h, back, 12000, 0, PC_DONTCACHE) == 12000); /* at 0: a stream starts */
	CHECK(memcmp(back, data, 12000) == 0);
	CHECK(pc_pread(h, back, 4096, 12000, PC_DONTCACHE) == 0);
	struct pc_stats fs;
	bool eof_dropped = TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 1000);
	if (!eof_dropped)
		print_flags("sequential uncached read to EOF 12000", h, 8192);
	CHECK(eof_dropped);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(back);
}

/* ------------------------------------------------------------------ (l) */

static void test_noreuse(void)
{
	printf("-- (l) POSIX_FADV_NOREUSE\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.readahead_max_bytes = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	const size_t N = 64 * KiB + 6000;
	uint8_t *buf = malloc(N), *back = malloc(N);
	REQUIRE(buf && back);
	tu_fill_pattern(buf, N, 8, 0);
	struct pc_file *h = open_new(c, "noreuse", path, sizeof(path));
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_NOREUSE) == 0);
	CHECK(pc_pwrite(h, buf, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	uint32_t fl = fstate(h, 0);
	CHECK(fl == NOT_CACHED || (fl & PF_DROPBEHIND));
	CHECK(pc_pwrite(h, buf + 64 * KiB, 6000, 64 * KiB, 0) == 6000);
	CHECK(is_edge(h, 64 * KiB + 4096));
	/* Written by the flusher, not fsync (which would drop the edge). */
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 4096, 2000));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(is_kept_edge(h, 64 * KiB + 4096));
	CHECK(disk_prefix_is(path, buf, 64 * KiB + 4096));
	/* Plain reads of the range are uncached too. */
	CHECK(pc_pread(h, back, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, buf, 64 * KiB) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	/* NORMAL ends it. */
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_NORMAL) == 0);
	CHECK(pc_pread(h, back, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096 + 64 * KiB);
	fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DROPBEHIND));
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, N));

	/* A NOREUSE range elsewhere leaves this I/O cached. */
	h = open_new(c, "noreuse2", path, sizeof(path));
	CHECK(pc_fadvise(h, 1 * MiB, 64 * KiB, POSIX_FADV_NOREUSE) == 0);
	CHECK(pc_pwrite(h, buf, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	CHECK(pc_pwrite(h, buf, 64 * KiB, 1 * MiB, 0) == (ssize_t)(64 * KiB));
	fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DROPBEHIND));
	fl = fstate(h, 1 * MiB);
	CHECK(fl == NOT_CACHED || (fl & PF_DROPBEHIND));
	CHECK(pc_fsync(h) == 0);
	CHECK(is_cached(h, 0));
	CHECK(!is_cached(h, 1 * MiB));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
	free(back);
}

/* ------------------------------------------------------------------ (m) */

static void test_kick(void)
{
	printf("-- (m) an uncached writer past uncached_kick_bytes kicks the flusher\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.uncached_kick_bytes = 256 * KiB;
	cfg.dirty_expire_ms = 600000; /* age never explains writeback here */
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	const size_t N = 1 * MiB;
	uint8_t *buf = malloc(N);
	REQUIRE(buf);
	tu_fill_pattern(buf, N, 9, 0);

	/* A buffered writer below the background threshold does not kick. */
	struct pc_file *hb = open_new(c, "kick_buffered", path, sizeof(path));
	CHECK(pc_pwrite(hb, buf, N, 0, 0) == (ssize_t)N);
	struct pc_stats s = tu_stats(c);
	CHECK(s.flusher_kicks == 0);
	CHECK(pc_close(hb) == 0);

	struct pc_file *h = open_new(c, "kick", path, sizeof(path));
	for (size_t off = 0; off < N; off += 64 * KiB)
		CHECK(pc_pwrite(h, buf + off, 64 * KiB, (off_t)off, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	s = tu_stats(c);
	printf("   flusher_kicks %llu, dirty now %llu\n", (unsigned long long)s.flusher_kicks,
	       (unsigned long long)s.dirty_bytes);
	CHECK(s.flusher_kicks > 0);
	CHECK(TU_POLL(tu_stats(c).dirty_bytes == 0 && tu_stats(c).writeback_bytes == 0, 5000));
	struct pc_stats fs;
	CHECK(TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 5000));
	s = tu_stats(c);
	CHECK(s.dev_write_bytes >= 2 * N); /* both files' data */
	CHECK(s.dev_read_ios == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, N));
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
}

/*
 * Background writeback holds short runs of young data back a moment (so
 * neighbouring writes can join them into one device write), but never for
 * good: a lone small uncached write below the kick threshold is written
 * and dropped by the flusher's tick, and a lone small buffered write once
 * dirty_expire_ms has passed, both without fsync.
 */
static void test_short_run_written(void)
{
	printf("-- (n) short runs wait for neighbours, but are written without fsync\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.uncached_kick_bytes = 8 * MiB;
	cfg.dirty_expire_ms = 300;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200], path2[4200];
	uint8_t buf[16 * KiB];
	tu_fill_pattern(buf, sizeof(buf), 10, 0);
	struct pc_file *h = open_new(c, "short_uncached", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, sizeof(buf), 64 * KiB, PC_DONTCACHE) == (ssize_t)sizeof(buf));
	struct pc_file *b = open_new(c, "short_buffered", path2, sizeof(path2));
	CHECK(pc_pwrite(b, buf, 8 * KiB, 0, 0) == 8 * (ssize_t)KiB);
	struct pc_stats fs;
	CHECK(TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 10000));
	CHECK(TU_POLL((pc_file_stats(b, &fs), fs.dirty_bytes == 0 && fs.writeback_bytes == 0), 10000));
	struct pc_stats s = tu_stats(c);
	CHECK(s.flusher_kicks == 0);
	CHECK(s.dev_write_bytes == sizeof(buf) + 8 * KiB);
	CHECK(pc_close(h) == 0);
	CHECK(pc_close(b) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (p) */

/* Count a block more than the budget as edges, as if writers had left
 * them (tests (p) and (q)); returns what to subtract again. */
static int64_t push_edges_past_budget(struct pc_cache *c)
{
	int64_t extra = (int64_t)edge_budget(c) + 4096;
	atomic_fetch_add(&c->edge_bytes, extra);
	REQUIRE(edges_over_budget(c));
	return extra;
}

/*
 * A writer that left an edge past the budget waits for its neighbours
 * (edges_wait_for_neighbours) while they keep completing edges of its file,
 * at most 2 s (EDGE_WAIT_MAX_MS), and stops waiting about 100 ms after
 * they stop (EDGE_WAIT_IDLE_MS), at once if none ever did.  The cache is put past its budget by hand,
 * and a "neighbour" thread counts an edge completed (edge_completed, what a
 * completing write calls) every 5 ms for a while: for 1 s the waiter must
 * still be waiting when the neighbour stops and be back soon after; for
 * 3 s it must be back at the cap, before the neighbour stops.  If the
 * neighbour itself was kept off the CPU for 90 ms or more (a loaded
 * machine), the waiter may rightly have stopped early: the lower bounds
 * are then not checked, and the test says so.
 */
struct neighbour_arg {
	struct pc_mapping *m;
	uint64_t run_ms, stop_ms, max_gap_ms;
};

static void *neighbour_completing(void *p)
{
	struct neighbour_arg *a = p;
	uint64_t start = now_ms(), last = start;
	for (;;) {
		uint64_t now = now_ms();
		if (now - last > a->max_gap_ms)
			a->max_gap_ms = now - last;
		last = now;
		if (now - start >= a->run_ms) {
			/* Stopped now: a clock read after this could come
			 * late, after the thread was kept off the CPU. */
			a->stop_ms = now;
			break;
		}
		edge_completed(a->m);
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* How long edges_wait_for_neighbours waited while a neighbour completed
 * edges for run_ms; *stop: when the neighbour stopped, relative to the
 * wait's start; returns UINT64_MAX if the neighbour had a gap of 90 ms. */
static uint64_t wait_beside_neighbour(struct pc_mapping *m, uint64_t run_ms, uint64_t *stop)
{
	struct neighbour_arg a = { .m = m, .run_ms = run_ms };
	uint64_t done0 = atomic_load(&m->edges_completed);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, neighbour_completing, &a) == 0);
	/* The neighbour's first completion (a fixed 20 ms sleep was not
	 * always enough on a loaded machine: the waiter then found none and
	 * was back at once). */
	CHECK(TU_POLL(atomic_load(&m->edges_completed) != done0, 20));
	uint64_t t0 = now_ms();
	edges_wait_for_neighbours(m);
	uint64_t waited = now_ms() - t0;
	REQUIRE(pthread_join(t, NULL) == 0);
	*stop = a.stop_ms - t0;
	if (a.max_gap_ms >= 90) {
		printf("   (neighbour off the CPU for %llu ms: lower bounds not checked)\n",
		       (unsigned long long)a.max_gap_ms);
		return UINT64_MAX;
	}
	return waited;
}

static void test_edge_wait(void)
{
	printf("-- (p) a writer past the edge budget waits while its neighbours complete edges\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.edge_budget_bytes = 4 * 4096;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	struct pc_file *h = open_new(c, "edge_wait", path, sizeof(path));
	int64_t extra = push_edges_past_budget(c);

	/* No edge of the file ever completed: back at once (the idle window
	 * counts from the last completion), not after it.  The quickest of
	 * five tries: a loaded machine may hold one back, a wait of the
	 * 100 ms idle window would be in every one. */
	uint64_t quickest = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = now_ms();
		edges_wait_for_neighbours(h->m);
		quickest = tu_min_u64(quickest, now_ms() - t0);
	}
	CHECK(quickest < 90);

	/* A neighbour completing for 1 s: waited to its end, then ~100 ms. */
	uint64_t stop, waited = wait_beside_neighbour(h->m, 1000, &stop);
	if (waited != UINT64_MAX) {
		printf("   1 s neighbour: waited %llu ms, the neighbour stopped at %llu ms\n",
		       (unsigned long long)waited, (unsigned long long)stop);
		CHECK(waited + 5 >= stop && waited < stop + 1500);
	}
	/* For 3 s: back at the 2 s cap, before the neighbour stopped. */
	waited = wait_beside_neighbour(h->m, 3000, &stop);
	if (waited != UINT64_MAX) {
		printf("   3 s neighbour: waited %llu ms, the neighbour stopped at %llu ms\n",
		       (unsigned long long)waited, (unsigned long long)stop);
		CHECK(waited >= 1990 && waited < stop);
	}

	atomic_fetch_sub(&c->edge_bytes, extra);
	CHECK(!edges_over_budget(c));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------------------ (q) */

/*
 * Which writes wait for their neighbours past the edge budget: only those
 * that leave more edges than they complete.  A write completing one edge
 * and leaving one (its writer between a slower and a faster one) or
 * completing more than it leaves (the slowest) must not wait: it is what
 * brings the edges back under the budget.  The misaligned head and tail of
 * a PC_DIRECT write count as one write.  6000-byte records in 4 KiB
 * blocks, the cache put past its budget by hand after the first record.
 */
static void test_edge_wait_who(void)
{
	printf("-- (q) past the edge budget only writes that add edges wait\n");
	struct pc_config cfg;
	base_cfg(&cfg, 4096);
	cfg.edge_budget_bytes = 2 * 4096;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char path[4200];
	struct pc_file *h = open_new(c, "edge_who", path, sizeof(path));
	static uint8_t buf[42000];
	tu_fill_pattern(buf, sizeof(buf), 9, 0);
	const int sync = PC_DONTCACHE | PC_DSYNC; /* clean edges: the budget's */
#define WRITE_AT(a, b, fl) CHECK(pc_pwrite(h, buf + (a), (b) - (a), (a), (fl)) == (b) - (a))
	/* [6000, 12000): edges in blocks 1 and 2, within the budget. */
	WRITE_AT(6000, 12000, sync);
	CHECK(is_kept_edge(h, 4096) && is_kept_edge(h, 8192));
	CHECK(tu_stats(c).edge_waits == 0 && !edges_over_budget(c));
	int64_t extra = push_edges_past_budget(c);
	/* Completes block 2, leaves block 4: no wait, nothing dropped. */
	WRITE_AT(12000, 18000, sync);
	CHECK(tu_stats(c).edge_waits == 0 && tu_stats(c).edge_evicted_budget == 0);
	CHECK(is_kept_edge(h, 16384));
	/* Completes block 1 and leaves none: no wait. */
	WRITE_AT(0, 6000, sync);
	CHECK(tu_stats(c).edge_waits == 0 && tu_stats(c).edge_evicted_budget == 0);
	/* PC_DIRECT: the head completes block 4, blocks 5 and 6 go direct,
	 * the tail leaves block 7; as one write, no wait. */
	WRITE_AT(18000, 30000, sync | PC_DIRECT);
	CHECK(tu_stats(c).edge_waits == 0 && tu_stats(c).edge_evicted_budget == 0);
	CHECK(is_kept_edge(h, 28672));
	/* Leaves blocks 8 and 10, completes nothing: it waits (about 100 ms,
	 * since no edge of the file is completed meanwhile), and then the
	 * oldest edges go for the budget. */
	WRITE_AT(36000, 42000, sync);
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_waits == 1 && s.edge_evicted_budget >= 1);
	CHECK(s.dev_read_ios == 0);
#undef WRITE_AT
	atomic_fetch_sub(&c->edge_bytes, extra);
	/* The gap [30000, 36000) and the rest, then the file checked. */
	CHECK(pc_pwrite(h, buf + 30000, 6000, 30000, 0) == 6000);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, sizeof(buf)));
	CHECK(pc_cache_destroy(c) == 0);
}

int main(void)
{
	dir = test_dir("uncached");
	test_edge_kept_completed();
	test_edge_age();
	test_whole_in_pieces();
	test_cached_not_marked();
	test_mark_cleared();
	test_not_dropped();
	test_counter_never_negative();
	test_dontcache_dsync();
	test_uncached_read();
	test_noreuse();
	test_kick();
	test_short_run_written();
	test_edge_budget();
	test_edge_wait();
	test_edge_wait_who();
	test_rmdir(dir);
	return test_done();
}
