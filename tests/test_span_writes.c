/*
 * test_span_writes.c - zero-copy write spans: pc_write_begin /
 * pc_write_end (include/pagecache.h, "Zero-copy access").
 *
 * The exact dirty (and uptodate) blocks after a partial pc_write_end at a
 * folio's start, middle and end and across the end of the file, on
 * 512-byte and 4 KiB blocks (the seed's mkwrite rule: never the whole
 * folio, never past EOF); what
 * a caller stores past `copied` never becomes file data (new blocks, clean
 * cached, dirty cached, uncached on the device, deferred partial blocks,
 * disjoint ones, copied 0), from the cache and from the device; PC_DSYNC
 * durable at return; PC_DONTCACHE dropped after write-back;
 * PC_CFG_NO_DEFERRED_RMW; the folio lock against other writers and
 * truncate, PC_NOWAIT; the dirty throttle; a write span committed after
 * another thread closed its handle.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

TEST_SCRATCH_DIR("span_writes")

#include "span_util.h"

/* Bit b set: block b of the folio holding pos is dirty (or uptodate);
 * ~0: no folio there. */
static uint64_t block_mask(struct env *e, uint64_t pos, bool dirty)
{
	struct pc_folio *f = mapping_lookup(e->m, pos);
	if (!f)
		return ~0ull;
	uint64_t mask = 0;
	unsigned n = bs_nblocks(e->m, f);
	for (unsigned b = 0; b < n && b < 64; b++)
		if (dirty ? bs_block_dirty(e->m, f, b) : bs_block_uptodate(e->m, f, b))
			mask |= 1ull << b;
	folio_put(e->c, f);
	return mask;
}

#define CHECK_MASK(got, want)                                                                       \
	do {                                                                                        \
		uint64_t g_ = (got), w_ = (want);                                                   \
		if (g_ != w_)                                                                       \
			fprintf(stderr, "   %s: 0x%llx, expected 0x%llx\n", #got, (unsigned long long)g_, \
				(unsigned long long)w_);                                            \
		CHECK(g_ == w_);                                                                    \
	} while (0)

/*
 * A write span of [off, off + len), REQUIREd to be `want` bytes long (0:
 * any length): the caller stores pattern `seed` into all of it, then
 * garbage (0xA5) into what follows `copied` (cut to the span's length),
 * and commits `copied`.  PC_NOWAIT that would block is retried without.
 * Returns pc_write_end's result; *committed (if given) gets the count.
 */
static int span_write_n(struct env *e, uint64_t off, size_t len, int flags, size_t want, uint64_t seed,
			size_t copied, size_t *committed)
{
	struct pc_span s;
	ssize_t n = pc_write_begin(e->h, (off_t)off, len, flags, &s);
	if (n < 0 && errno == EAGAIN && (flags & PC_NOWAIT))
		n = pc_write_begin(e->h, (off_t)off, len, flags & ~PC_NOWAIT, &s);
	if (n < 0 || (want && n != (ssize_t)want))
		fprintf(stderr, "   pc_write_begin(%llu, %zu) = %zd, expected %zu\n", (unsigned long long)off, len, n,
			want);
	REQUIRE(n > 0 && (!want || n == (ssize_t)want));
	REQUIRE(s.len == (size_t)n && s.data);
	if (copied > (size_t)n)
		copied = (size_t)n;
	tu_fill_pattern(s.data, (size_t)n, seed, off);
	memset((uint8_t *)s.data + copied, 0xA5, (size_t)n - copied);
	if (committed)
		*committed = copied;
	return pc_write_end(&s, copied);
}

static int span_write(struct env *e, uint64_t off, size_t len, int flags, size_t want, uint64_t seed, size_t copied)
{
	return span_write_n(e, off, len, flags, want, seed, copied, NULL);
}

/* ----------------------------------------------------------------- write */

/* Committed bytes read back; a span stays in its folio; one outlives its
 * handle's pc_close. */
TEST_CASE(commit_reads_back_span_within_one_folio)
{
	struct env e;
	env_open(&e, "wbasic", 4096, 64 * KiB, 8 * MiB, 0);
	/* Into an empty file, then read back, from the cache and the device. */
	CHECK(span_write(&e, 1000, 5000, 0, 5000, 11, 5000) == 0);
	CHECK(pc_size(e.h) == 6000);
	uint8_t *expect = calloc(1, 256 * KiB);
	REQUIRE(expect);
	tu_fill_pattern(expect + 1000, 5000, 11, 1000);
	CHECK(reads_as(&e, 0, 6000, expect));
	CHECK(fstats(&e).dirty_bytes == 8192);
	drop(&e);
	CHECK(reads_as(&e, 0, 6000, expect));
	CHECK(tu_verify_disk_rounded(e.path, expect, 6000, 4096));
	/* Cut at the folio's end: a span never leaves its folio. */
	struct pc_span s;
	ssize_t n = pc_write_begin(e.h, 64 * KiB - 100, 1000, 0, &s);
	CHECK(n == 100); /* a multiple of the largest folio size: a folio ends there */
	memset(s.data, 'q', (size_t)n);
	CHECK(pc_write_end(&s, (size_t)n) == 0);
	memset(expect + 64 * KiB - 100, 'q', 100);
	CHECK(reads_as(&e, 0, 64 * KiB, expect));
	/* A large span is at most one folio of the largest size. */
	n = pc_write_begin(e.h, 128 * KiB + 10, 1 * MiB, 0, &s);
	CHECK(n > 0 && n <= (ssize_t)(64 * KiB - 10));
	CHECK(pc_write_end(&s, 0) == 0);
	CHECK(pc_size(e.h) == 64 * KiB);
	/* A span survives pc_close of its handle by another thread's call
	 * (here the same thread: no lock of the span is waited for). */
	struct pc_file *h2 = pc_open(e.c, e.path, O_RDWR, 0);
	REQUIRE(h2);
	n = pc_write_begin(h2, 70000, 10, 0, &s);
	CHECK(n == 10);
	CHECK(pc_close(h2) == 0);
	memset(s.data, 'z', 10);
	CHECK(pc_write_end(&s, 10) == 0);
	CHECK(pc_size(e.h) == 70010);
	memset(expect + 70000, 'z', 10);
	CHECK(reads_as(&e, 0, 70010, expect));
	free(expect);
	env_close(&e);
}

/* Exact dirty blocks after partial pc_write_end: at a folio's start, its
 * middle and its end, and across the end of the file.  Folios of 8 blocks. */
static void dirty_blocks_exact(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "dirty%zu", bs);
	env_open(&e, name, bs, 8 * bs < 4096 ? 4096 : 8 * bs, 8 * MiB, 0);
	const size_t fsz = 8 * bs;
	REQUIRE(fsz >= 4096);
	uint8_t *expect = calloc(1, 8 * fsz);
	REQUIRE(expect);
	uint64_t base = 0;

	/* Start: a new folio past the end of the file, bs + bs/3 committed. */
	uint64_t P = base;
	size_t c = bs + bs / 3;
	CHECK(span_write(&e, P, fsz, 0, fsz, 12, c) == 0);
	REQUIRE(folio_size_at(&e, P) == fsz);
	CHECK_MASK(block_mask(&e, P, true), 0x3);
	CHECK_MASK(block_mask(&e, P, false), 0x3); /* the cut block zero-filled: past EOF */
	CHECK(pc_size(e.h) == (off_t)(P + c));
	CHECK(fstats(&e).dirty_bytes == 2 * bs);
	tu_fill_pattern(expect + P, c, 12, P);
	CHECK(reads_as(&e, 0, P + c, expect));

	/* Middle: a clean cached folio of pattern 13; blocks 2 and 3 only. */
	P = base + fsz;
	put(&e, P, fsz, 13);
	CHECK(pc_fsync(e.h) == 0);
	REQUIRE(folio_size_at(&e, P) == fsz);
	tu_fill_pattern(expect + P, fsz, 13, P);
	uint64_t off = P + 2 * bs + 10;
	c = bs + 20;
	CHECK(span_write(&e, off, 3 * bs, 0, 3 * bs, 14, c) == 0);
	CHECK_MASK(block_mask(&e, P, true), 0xc);
	/* The blocks the span covered past [off, off + c), which the caller
	 * may have stored into, are forgotten (read again from the device),
	 * the block of the cut too: it waits for a merge around the write. */
	CHECK_MASK(block_mask(&e, P, false), 0xff & ~0x38ull);
	CHECK(fstats(&e).dirty_bytes == 2 * bs);
	tu_fill_pattern(expect + off, c, 14, off);
	CHECK(reads_as(&e, 0, P + fsz, expect));

	/* End: up to the folio's end, 2 blocks + 7 bytes of it committed. */
	P = base + 2 * fsz;
	put(&e, P, fsz, 15);
	drop(&e);
	read_through(&e, P, P + fsz); /* cached clean, one folio */
	REQUIRE(folio_size_at(&e, P) == fsz);
	tu_fill_pattern(expect + P, fsz, 15, P);
	off = P + 5 * bs + 7;
	c = 2 * bs;
	CHECK(span_write(&e, off, fsz, 0, 3 * bs - 7, 16, c) == 0);
	CHECK_MASK(block_mask(&e, P, true), 0xe0);
	tu_fill_pattern(expect + off, c, 16, off);
	CHECK(reads_as(&e, 0, P + fsz, expect));
	/* and the whole of it */
	CHECK(span_write(&e, off, fsz, 0, 3 * bs - 7, 17, 3 * bs - 7) == 0);
	CHECK_MASK(block_mask(&e, P, true), 0xe0);
	tu_fill_pattern(expect + off, 3 * bs - 7, 17, off);
	CHECK(reads_as(&e, 0, P + fsz, expect));

	/* Across EOF: the file ends 2.5 blocks into the folio (written with a
	 * span at the folio's start, then written back); a span from 2 blocks
	 * + 100 to well past EOF, one block committed: blocks 2 and 3 dirty,
	 * nothing past the new end. */
	P = base + 3 * fsz;
	CHECK(span_write(&e, P, fsz, 0, fsz, 18, 2 * bs + bs / 2) == 0);
	CHECK(pc_fsync(e.h) == 0);
	CHECK_MASK(block_mask(&e, P, true), 0);
	CHECK_MASK(block_mask(&e, P, false), 0x7);
	tu_fill_pattern(expect + P, 2 * bs + bs / 2, 18, P);
	off = P + 2 * bs + 100;
	c = bs;
	CHECK(span_write(&e, off, 4 * bs, 0, 4 * bs, 19, c) == 0);
	CHECK(pc_size(e.h) == (off_t)(off + c));
	CHECK_MASK(block_mask(&e, P, true), 0xc);
	/* Block 3 is past the end of the data: zero-filled around the write. */
	CHECK_MASK(block_mask(&e, P, false), 0xf);
	tu_fill_pattern(expect + off, c, 19, off);
	CHECK(reads_as(&e, 0, off + c, expect));
	CHECK(pc_fsync(e.h) == 0);
	CHECK(tu_verify_disk(e.path, expect, off + c));
	/* copied 0 past EOF: nothing dirty, no size change, no folio left. */
	P = base + 5 * fsz;
	CHECK(span_write(&e, P + 10, fsz, 0, fsz - 10, 20, 0) == 0);
	CHECK(pc_size(e.h) == (off_t)(off + c));
	CHECK(folio_size_at(&e, P) == 0);
	CHECK(fstats(&e).dirty_bytes == 0);
	free(expect);
	env_close(&e);
}

TEST_CASE(dirty_blocks_exact_512)
{
	dirty_blocks_exact(512);
}

TEST_CASE(dirty_blocks_exact_4096)
{
	dirty_blocks_exact(4096);
}

/*
 * What a caller stores past `copied` never becomes file data, whatever the
 * span covered: new blocks, clean cached data, dirty cached data, data on
 * the device only, a deferred partial block, one that cannot join it.
 * Each shape is checked from the cache, then from the device.
 */
static void short_commit_no_garbage(size_t bs, unsigned cfg_flags, int span_flags)
{
	struct env e;
	char name[48];
	snprintf(name, sizeof(name), "short%zu-%x-%x", bs, cfg_flags, (unsigned)span_flags);
	env_open(&e, name, bs, 8 * bs < 4096 ? 4096 : 8 * bs, 8 * MiB, cfg_flags);
	const size_t fsz = 8 * bs;
	const uint64_t total = 8 * fsz;
	uint8_t *expect = calloc(1, total);
	REQUIRE(expect);
	struct pc_stats s0 = fstats(&e);
	/* The device holds pattern 30 everywhere but the last folio. */
	put(&e, 0, 7 * fsz, 30);
	drop(&e);
	tu_fill_pattern(expect, 7 * fsz, 30, 0);

	/* New blocks past EOF; then the file is extended: zeros after the cut. */
	uint64_t P = 7 * fsz;
	size_t c;
	CHECK(span_write_n(&e, P, fsz, span_flags, 0, 31, bs + 13, &c) == 0);
	tu_fill_pattern(expect + P, c, 31, P);
	CHECK(pc_ftruncate(e.h, (off_t)total) == 0);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* Clean cached data. */
	P = 0;
	read_through(&e, P, P + fsz);
	CHECK(span_write_n(&e, P, fsz, span_flags, 0, 32, 2 * bs + 5, &c) == 0);
	tu_fill_pattern(expect + P, c, 32, P);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* Dirty cached data. */
	P = fsz;
	put(&e, P, fsz, 33);
	tu_fill_pattern(expect + P, fsz, 33, P);
	CHECK(span_write_n(&e, P + 1, fsz - 1, span_flags, 0, 34, 3 * bs + 7, &c) == 0);
	tu_fill_pattern(expect + P + 1, c, 34, P + 1);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* Data only on the device (the folio is new, nothing read). */
	P = 2 * fsz;
	CHECK(span_write_n(&e, P + 7, fsz - 7, span_flags, 0, 35, bs / 2 + 3 * bs, &c) == 0);
	tu_fill_pattern(expect + P + 7, c, 35, P + 7);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* A deferred partial write in block 1, wholly past the cut.  The
	 * folio is made whole first (block 0 written with the data it has),
	 * so that the 10-byte write lands in it. */
	P = 3 * fsz;
	CHECK(span_write(&e, P, fsz, 0, fsz, 30, bs) == 0);
	uint8_t ten[10];
	tu_fill_pattern(ten, 10, 36, P + bs + 40);
	CHECK(pc_pwrite(e.h, ten, 10, (off_t)(P + bs + 40), span_flags & ~PC_NOWAIT) == 10);
	memcpy(expect + P + bs + 40, ten, 10);
	CHECK(span_write_n(&e, P, fsz, span_flags, 0, 37, 100, &c) == 0);
	tu_fill_pattern(expect + P, c, 37, P);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* The cut lands in a block holding a deferred partial write that
	 * the written bytes do not touch (two ranges: read to join them). */
	P = 4 * fsz;
	CHECK(span_write(&e, P, fsz, 0, fsz, 30, bs) == 0);
	tu_fill_pattern(ten, 10, 38, P + bs + 40);
	CHECK(pc_pwrite(e.h, ten, 10, (off_t)(P + bs + 40), span_flags & ~PC_NOWAIT) == 10);
	memcpy(expect + P + bs + 40, ten, 10);
	CHECK(span_write_n(&e, P + bs, 2 * bs, span_flags, 0, 39, 20, &c) == 0);
	tu_fill_pattern(expect + P + bs, c, 39, P + bs);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* Copied 0 over dirty data: nothing changes. */
	P = 5 * fsz;
	put(&e, P, fsz, 40);
	tu_fill_pattern(expect + P, fsz, 40, P);
	uint64_t dirty = fstats(&e).dirty_bytes;
	CHECK(span_write(&e, P + 3, fsz - 3, span_flags, 0, 41, 0) == 0);
	CHECK(fstats(&e).dirty_bytes == dirty);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* The cut on a block boundary. */
	P = 6 * fsz;
	CHECK(span_write_n(&e, P + bs / 2, fsz - bs / 2, span_flags, 0, 42, 2 * bs + bs / 2, &c) == 0);
	tu_fill_pattern(expect + P + bs / 2, c, 42, P + bs / 2);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* All of it again from the device. */
	CHECK(reads_as(&e, 0, total, expect));
	drop(&e);
	CHECK(reads_as(&e, 0, total, expect));
	CHECK(tu_verify_disk(e.path, expect, total));
	struct pc_stats s1 = fstats(&e);
	if (cfg_flags & PC_CFG_NO_DEFERRED_RMW) {
		/* Cut blocks holding device data are read at pc_write_end,
		 * unless PC_NOWAIT defers them. */
		if (span_flags & PC_NOWAIT)
			CHECK(s1.deferred_rmw > s0.deferred_rmw);
		else
			CHECK(s1.deferred_rmw == s0.deferred_rmw);
	}
	free(expect);
	env_close(&e);
}

TEST_CASE(short_commit_no_garbage_512)
{
	short_commit_no_garbage(512, 0, 0);
}

TEST_CASE(short_commit_no_garbage_4096)
{
	short_commit_no_garbage(4096, 0, 0);
}

TEST_CASE(short_commit_no_garbage_4096_dontcache)
{
	short_commit_no_garbage(4096, 0, PC_DONTCACHE);
}

TEST_CASE(short_commit_no_garbage_512_dsync)
{
	short_commit_no_garbage(512, 0, PC_DSYNC);
}

TEST_CASE(short_commit_no_garbage_512_no_deferred_rmw)
{
	short_commit_no_garbage(512, PC_CFG_NO_DEFERRED_RMW, 0);
}

TEST_CASE(short_commit_no_garbage_512_no_deferred_rmw_nowait)
{
	short_commit_no_garbage(512, PC_CFG_NO_DEFERRED_RMW, PC_NOWAIT);
}

/* PC_DSYNC: durable at return (the backing file has it, read directly). */
TEST_CASE(dsync_durable_at_return)
{
	struct env e;
	env_open(&e, "dsync", 4096, 64 * KiB, 8 * MiB, 0);
	uint8_t *expect = calloc(1, 64 * KiB);
	REQUIRE(expect);
	put(&e, 0, 64 * KiB, 50);
	drop(&e);
	tu_fill_pattern(expect, 64 * KiB, 50, 0);
	size_t c;
	CHECK(span_write_n(&e, 5000, 10000, PC_DSYNC, 0, 51, 10000, &c) == 0);
	tu_fill_pattern(expect + 5000, c, 51, 5000);
	CHECK(span_write_n(&e, 20000, 10000, PC_DSYNC, 0, 52, 1000, &c) == 0 && c == 1000);
	tu_fill_pattern(expect + 20000, c, 52, 20000);
	CHECK(fstats(&e).dirty_bytes == 0);
	CHECK(tu_verify_disk(e.path, expect, 64 * KiB));
	/* An O_DSYNC handle: the same. */
	struct pc_file *h = pc_open(e.c, e.path, O_RDWR | O_DSYNC, 0);
	REQUIRE(h);
	struct pc_span s;
	CHECK(pc_write_begin(h, 40000, 100, 0, &s) == 100);
	memset(s.data, 'd', 100);
	CHECK(pc_write_end(&s, 100) == 0);
	memset(expect + 40000, 'd', 100);
	CHECK(fstats(&e).dirty_bytes == 0);
	CHECK(tu_verify_disk(e.path, expect, 64 * KiB));
	CHECK(pc_close(h) == 0);
	free(expect);
	env_close(&e);
}

/* PC_DONTCACHE: the folios it made are gone once written back. */
TEST_CASE(dontcache_dropped_after_writeback)
{
	struct env e;
	env_open(&e, "wdontcache", 4096, 64 * KiB, 8 * MiB, 0);
	uint64_t drops0 = tu_stats(e.c).dropbehind_drops;
	for (uint64_t off = 0; off < 256 * KiB;) {
		struct pc_span s;
		ssize_t n = pc_write_begin(e.h, (off_t)off, 256 * KiB - off, PC_DONTCACHE, &s);
		REQUIRE(n > 0);
		tu_fill_pattern(s.data, (size_t)n, 53, off);
		CHECK(pc_write_end(&s, (size_t)n) == 0);
		off += (uint64_t)n;
	}
	CHECK(pc_fsync(e.h) == 0);
	CHECK(TU_POLL(fstats(&e).cached_bytes == 0, 5000));
	CHECK(tu_stats(e.c).dropbehind_drops > drops0);
	uint8_t *expect = malloc(256 * KiB);
	REQUIRE(expect);
	tu_fill_pattern(expect, 256 * KiB, 53, 0);
	CHECK(tu_verify_disk(e.path, expect, 256 * KiB));
	free(expect);
	env_close(&e);
}

/* The dirty throttle applies at pc_write_end. */
TEST_CASE(dirty_throttle_applies_at_end)
{
	struct env e;
	struct pc_config cfg = span_config(4096, 64 * KiB, 4 * MiB, 0);
	cfg.dirty_limit_bytes = 512 * KiB;
	cfg.dirty_expire_ms = 0;
	env_open_cfg(&e, "throttle", &cfg);
	uint64_t waits0 = tu_stats(e.c).throttle_waits;
	for (uint64_t off = 0; off < 16 * MiB;) {
		struct pc_span s;
		ssize_t n = pc_write_begin(e.h, (off_t)off, 64 * KiB, 0, &s);
		REQUIRE(n > 0);
		memset(s.data, (int)(off >> 16), (size_t)n);
		CHECK(pc_write_end(&s, (size_t)n) == 0);
		off += (uint64_t)n;
	}
	struct pc_stats st = tu_stats(e.c);
	CHECK(st.throttle_waits > waits0);
	CHECK(st.peak_dirty_bytes <= 512 * KiB + 2 * 64 * KiB);
	CHECK(pc_fsync(e.h) == 0);
	env_close(&e);
}

/* --------------------------------------------------- the write span's lock */

struct waiter {
	struct env *e;
	int what; /* Pc_pwrite into the folio, 1: pc_ftruncate, 2: NOWAIT calls */
	_Atomic bool done;
	ssize_t ret;
	int err[3];
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	uint8_t b[100];
	memset(b, 'w', sizeof(b));
	if (w->what == 0) {
		w->ret = pc_pwrite(w->e->h, b, 100, 1000, 0);
	} else if (w->what == 1) {
		w->ret = pc_ftruncate(w->e->h, 500);
	} else {
		struct pc_span s;
		errno = 0;
		w->ret = pc_write_begin(w->e->h, 1000, 100, PC_NOWAIT, &s);
		w->err[0] = errno;
		errno = 0;
		/* Block 3 of the folio is not uptodate (a deferred write). */
		ssize_t r = pc_read_begin(w->e->h, 3 * 512, 10, PC_NOWAIT, &s);
		w->err[1] = r < 0 ? errno : 0;
		if (r >= 0)
			pc_read_end(&s);
		errno = 0;
		r = pc_pwrite(w->e->h, b, 100, 1000, PC_NOWAIT);
		w->err[2] = r < 0 ? errno : 0;
	}
	atomic_store(&w->done, true);
	return NULL;
}

TEST_CASE(held_span_blocks_writer_truncate_and_nowait)
{
	struct env e;
	env_open(&e, "wlock", 512, 4096, 8 * MiB, 0);
	for (int what = 0; what < 3; what++) {
		/* Data on the device; block 3 gets a deferred partial write:
		 * not uptodate. */
		put(&e, 0, 4096, 60);
		drop(&e);
		uint8_t ten[10];
		memset(ten, 'p', 10);
		CHECK(pc_pwrite(e.h, ten, 10, 3 * 512 + 5, 0) == 10);
		struct pc_span s;
		REQUIRE(pc_write_begin(e.h, 1000, 100, 0, &s) == 100);
		memset(s.data, 's', 100);
		struct waiter w = { .e = &e, .what = what };
		pthread_t t;
		REQUIRE(pthread_create(&t, NULL, waiter_main, &w) == 0);
		if (what < 2) {
			usleep(200 * 1000);
			CHECK(!atomic_load(&w.done)); /* waits for the span */
		} else {
			pthread_join(t, NULL);
		}
		CHECK(pc_write_end(&s, 100) == 0);
		if (what < 2)
			pthread_join(t, NULL);
		CHECK(atomic_load(&w.done));
		uint8_t b[100];
		if (what == 0) {
			/* The other write came after the span's. */
			CHECK(w.ret == 100);
			memset(b, 'w', 100);
			CHECK(reads_as(&e, 1000, 100, b));
		} else if (what == 1) {
			CHECK(w.ret == 0);
			CHECK(pc_size(e.h) == 500);
		} else {
			CHECK(w.ret == -1 && w.err[0] == EAGAIN);
			CHECK(w.err[1] == EAGAIN);
			CHECK(w.err[2] == EAGAIN);
			memset(b, 's', 100);
			CHECK(reads_as(&e, 1000, 100, b));
		}
	}
	env_close(&e);
}

/* A write span held by one thread while another closes the handle: the
 * commit still goes in. */
struct closer {
	struct pc_file *h;
	int ret;
};

static void *closer_main(void *arg)
{
	struct closer *c = arg;
	c->ret = pc_close(c->h);
	return NULL;
}

TEST_CASE(commit_after_other_thread_closed_handle)
{
	struct env e;
	env_open(&e, "wclose", 4096, 64 * KiB, 8 * MiB, 0);
	CHECK(pc_close(e.h) == 0);
	struct pc_file *h = pc_open(e.c, e.path, O_RDWR, 0);
	REQUIRE(h);
	struct pc_span s;
	REQUIRE(pc_write_begin(h, 0, 8192, 0, &s) == 8192);
	struct closer cl = { h, -1 };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, closer_main, &cl) == 0);
	pthread_join(t, NULL);
	CHECK(cl.ret == 0);
	tu_fill_pattern(s.data, 8192, 61, 0);
	CHECK(pc_write_end(&s, 8192) == 0);
	e.h = pc_open(e.c, e.path, O_RDWR, 0);
	REQUIRE(e.h);
	uint8_t expect[8192];
	tu_fill_pattern(expect, 8192, 61, 0);
	CHECK(pc_size(e.h) == 8192);
	CHECK(reads_as(&e, 0, 8192, expect));
	env_close(&e);
}
