/*
 * test_block_state_dirty.c - the per-block dirty rules of
 * ../shared/seeds/iomap-subfolio-block-state.txt, each case written so that
 * it fails on the bug the rule guards against.
 *
 * On real folios of every shape (block_state_util.h), through the
 * block-state calls of src/mem/block_state.c:
 *   - a partial dirty clear rounds inward: a block only partly cleared
 *     keeps its dirty bit;
 *   - invalidating part of a folio (truncate, punch) clears exactly the
 *     dirty bits of the blocks wholly inside, and their deferred partial
 *     ranges;
 *   - the dirty blocks are found as maximal runs, in order, across bitmap
 *     word boundaries.
 * Then through the public API:
 *   - only dirty blocks are written back, in contiguous runs (device write
 *     counters after fsync);
 *   - truncate and punch clear the dirty bits of the removed blocks
 *     (dirty bytes and device write counters).
 */
#define _GNU_SOURCE
#include "block_state_util.h"

#include <linux/falloc.h>

static void open_shapes(void)
{
	block_state_open_shapes("block_state_dirty");
}

TEST_FIXTURE(open_shapes, block_state_close_shapes)

/* ------------------------------------------------ a partial dirty clear */

/*
 * bs_clear_range_dirty on a partial range rounds the first block UP and
 * the last block DOWN: a block only partly cleared keeps its dirty bit.
 * Bug guarded against (the rule: a partial clear rounds inward, never
 * outward): first = off >> bits, last = (off + len - 1) >> bits clears the
 * partly covered first and last blocks too, and their other bytes are then
 * never written back (silent data loss).
 */
static void clear_range_dirty_on(const struct shape *s)
{
	struct env *e = s->e;
	struct pc_folio *f = new_folio(e, s->order);
	size_t bs = e->bs, fsz = folio_size(f);
	unsigned n = bs_nblocks(e->m, f), k = pivot(n);
	REQUIRE(n >= 8);
	bool want[512];

	CHECK(bs_write_end(e->m, f, 0, fsz, true, true) == fsz);
	set_all(want, n, true);
	CHECK_DIRTY(e, f, want, "all written");

	/* [k*bs + 1, (k+3)*bs - 1): blocks k and k+2 partly, k+1 wholly. */
	size_t cleared = bs_clear_range_dirty(e->m, f, k * bs + 1, 3 * bs - 2);
	CHECK(cleared == bs);
	want[k + 1] = false;
	CHECK_DIRTY(e, f, want, "partial clear across three blocks");
	CHECK(folio_test(f, PF_DIRTY));

	/* Inside one block: nothing is cleared. */
	CHECK(bs_clear_range_dirty(e->m, f, (k + 3) * bs + 1, bs - 2) == 0);
	CHECK(bs_clear_range_dirty(e->m, f, (k + 3) * bs, bs - 1) == 0);
	CHECK(bs_clear_range_dirty(e->m, f, (k + 3) * bs + 1, bs - 1) == 0);
	CHECK_DIRTY(e, f, want, "partial clear inside one block");

	/* Aligned: exactly the blocks covered, not the next one. */
	CHECK(bs_clear_range_dirty(e->m, f, (k + 3) * bs, 2 * bs) == 2 * bs);
	want[k + 3] = want[k + 4] = false;
	CHECK_DIRTY(e, f, want, "aligned clear");

	/* Ending at the folio's end with an unaligned start: the last block
	 * is wholly covered and cleared, the first kept. */
	CHECK(bs_clear_range_dirty(e->m, f, fsz - bs - 1, bs + 1) == bs);
	want[n - 1] = false;
	CHECK_DIRTY(e, f, want, "unaligned start to folio end");

	/* Starting at 0 with an unaligned end: block 0 cleared, block 1 kept
	 * (k >= 1, so block 1 is still dirty unless k + 1 == 1). */
	CHECK(bs_clear_range_dirty(e->m, f, 0, bs + bs / 2) == bs);
	want[0] = false;
	CHECK_DIRTY(e, f, want, "folio start to unaligned end");

	/* Everything: the rest goes, and the folio is clean. */
	size_t left = 0;
	for (unsigned b = 0; b < n; b++)
		left += want[b] ? bs : 0;
	CHECK(bs_clear_range_dirty(e->m, f, 0, fsz) == left);
	CHECK(bs_dirty_bytes(e->m, f) == 0);
	CHECK(!folio_test(f, PF_DIRTY));
	/* Uptodate state is not touched by a dirty clear. */
	set_all(want, n, true);
	CHECK_UPTODATE(e, f, want, "uptodate after dirty clears");
	CHECK(folio_test(f, PF_UPTODATE));
	put_folio(e, f);
}

TEST_CASE(partial_dirty_clear_rounds_inward)
{
	for_each_shape(clear_range_dirty_on);
}

/* ----------------------------------------- invalidating part of a folio */

/*
 * bs_invalidate_blocks (a truncate or punch that covers part of a folio)
 * clears exactly the dirty bits of the blocks wholly inside the range, and
 * drops their deferred partial ranges.  Bug guarded against (the rule:
 * invalidating part of a folio clears the state of the blocks it removes,
 * as a whole folio's does): only whole-folio invalidation cleared the
 * block state, so blocks truncated or punched away stayed dirty and
 * writeback wrote them again (reviving data past EOF or inside the hole).
 * Partly covered blocks must keep their dirty bits: their remaining bytes
 * are still part of the file.
 */
static void invalidate_blocks_on(const struct shape *s)
{
	struct env *e = s->e;
	size_t bs = e->bs;
	bool want[512];

	/* Zeroed (truncate/punch): removed blocks are clean and uptodate. */
	struct pc_folio *f = new_folio(e, s->order);
	size_t fsz = folio_size(f);
	unsigned n = bs_nblocks(e->m, f), k = pivot(n);
	CHECK(bs_write_end(e->m, f, 0, fsz, true, true) == fsz);
	size_t d = bs_invalidate_blocks(e->m, f, k * bs + 7, 4 * bs + 2, true);
	CHECK(d == 3 * bs);
	set_all(want, n, true);
	want[k + 1] = want[k + 2] = want[k + 3] = false;
	CHECK_DIRTY(e, f, want, "invalidate (zeroed)");
	set_all(want, n, true);
	CHECK_UPTODATE(e, f, want, "invalidate (zeroed) keeps uptodate");
	CHECK(folio_test(f, PF_UPTODATE));
	CHECK(folio_test(f, PF_DIRTY));
	CHECK(bs_dirty_bytes(e->m, f) == fsz - 3 * bs);
	/* A range inside one block removes nothing. */
	CHECK(bs_invalidate_blocks(e->m, f, (k + 4) * bs + 1, bs - 2, true) == 0);
	CHECK(bs_block_dirty(e->m, f, k + 4));
	/* Already clean blocks: nothing more to clear. */
	CHECK(bs_invalidate_blocks(e->m, f, (k + 1) * bs, 3 * bs, true) == 0);
	/* The tail from an unaligned offset (a truncate to mid-block): the
	 * block holding the new end stays dirty. */
	size_t tail = (size_t)(k + 5) * bs + 100;
	d = bs_invalidate_blocks(e->m, f, tail, fsz - tail, true);
	CHECK(d == (size_t)(n - (k + 6)) * bs);
	set_all(want, n, false);
	for (unsigned b = 0; b <= k + 5; b++)
		want[b] = b < k + 1 || b > k + 3;
	CHECK_DIRTY(e, f, want, "truncate to mid-block");
	put_folio(e, f);

	/* Stale (not zeroed): removed blocks are neither dirty nor uptodate. */
	f = new_folio(e, s->order);
	CHECK(bs_write_end(e->m, f, 0, fsz, true, true) == fsz);
	CHECK(folio_test(f, PF_UPTODATE));
	d = bs_invalidate_blocks(e->m, f, k * bs, 2 * bs, false);
	CHECK(d == 2 * bs);
	set_all(want, n, true);
	want[k] = want[k + 1] = false;
	CHECK_DIRTY(e, f, want, "invalidate (stale)");
	CHECK_UPTODATE(e, f, want, "invalidate (stale) uptodate");
	CHECK(!folio_test(f, PF_UPTODATE));
	CHECK(!bs_range_uptodate(e->m, f, k * bs, 1));
	CHECK(bs_range_uptodate(e->m, f, 0, k * bs));
	put_folio(e, f);

	/* Deferred partial ranges: dropped for blocks inside, kept for the
	 * partly covered edge blocks. */
	f = new_folio(e, s->order);
	REQUIRE(bs_prepare_partial(e->m, f) == 0);
	bs_write_end(e->m, f, k * bs + 10, 20, false, false);       /* edge block k */
	bs_write_end(e->m, f, (k + 1) * bs + 10, 20, false, false); /* inside */
	bs_write_end(e->m, f, (k + 2) * bs + 30, 40, false, false); /* edge block k+2 */
	CHECK(bs_has_partial(f));
	CHECK(bs_dirty_bytes(e->m, f) == 3 * bs);
	d = bs_invalidate_blocks(e->m, f, k * bs + 5, 2 * bs, false);
	CHECK(d == bs);
	uint32_t vs = 0, ve = 0;
	CHECK(!bs_block_valid(e->m, f, k + 1, &vs, &ve));
	CHECK(!bs_block_dirty(e->m, f, k + 1));
	CHECK(bs_block_valid(e->m, f, k, &vs, &ve) && vs == 10 && ve == 30);
	CHECK(bs_block_dirty(e->m, f, k));
	CHECK(bs_block_valid(e->m, f, k + 2, &vs, &ve) && vs == 30 && ve == 70);
	CHECK(bs_block_dirty(e->m, f, k + 2));
	/* Whole folio: everything goes, no partial range left. */
	CHECK(bs_invalidate_blocks(e->m, f, 0, fsz, false) == 2 * bs);
	CHECK(!bs_has_partial(f));
	CHECK(!folio_test(f, PF_DIRTY));
	put_folio(e, f);
}

TEST_CASE(invalidate_clears_dirty_of_blocks_inside)
{
	for_each_shape(invalidate_blocks_on);
}

/* ----------------------------------------------------------- dirty runs */

/*
 * Only dirty blocks are written back, in contiguous runs:
 * bs_next_dirty_run returns each maximal run of dirty blocks in order.
 * Bug guarded against: writing back the whole folio (or whole uptodate
 * ranges) for one dirty block, which writes blocks that hold nothing new,
 * or blocks that are not uptodate (garbage) over good data on the device;
 * and runs that stop or merge at a bitmap word boundary.
 */
static void dirty_runs_on(const struct shape *s)
{
	struct env *e = s->e;
	size_t bs = e->bs;
	struct pc_folio *f = new_folio(e, s->order);
	unsigned n = bs_nblocks(e->m, f);
	unsigned first, count;

	CHECK(!bs_next_dirty_run(e->m, f, 0, &first, &count));

	/* Dirty runs: {1,2}, {5}, {7} for 8 blocks; for larger folios also
	 * runs across word boundaries and the last block. */
	unsigned runs[8][2];
	unsigned nr = 0;
	runs[nr][0] = 1, runs[nr++][1] = 2;
	runs[nr][0] = 5, runs[nr++][1] = 1;
	runs[nr][0] = 7, runs[nr++][1] = 1;
	if (n > 64) {
		runs[nr][0] = 62, runs[nr++][1] = 4; /* 62..65 */
		if (n > 128) {
			runs[nr][0] = 127, runs[nr++][1] = 1;  /* last of a word */
			runs[nr][0] = 191, runs[nr++][1] = 66; /* 191..256 */
		}
		runs[nr][0] = n - 1, runs[nr++][1] = 1;
	} else if (n == 64) {
		runs[nr][0] = 60, runs[nr++][1] = 4; /* to the end of the word */
	}
	for (unsigned i = 0; i < nr; i++)
		bs_write_end(e->m, f, runs[i][0] * bs, runs[i][1] * bs, true, true);
	unsigned from = 0;
	for (unsigned i = 0; i < nr; i++) {
		bool ok = bs_next_dirty_run(e->m, f, from, &first, &count);
		CHECK(ok && first == runs[i][0] && count == runs[i][1]);
		if (!ok || first != runs[i][0] || count != runs[i][1])
			fprintf(stderr, "%s: run %u: got %u+%u, expected %u+%u\n", s->name, i, first, count,
				runs[i][0], runs[i][1]);
		from = first + count;
	}
	CHECK(!bs_next_dirty_run(e->m, f, from, &first, &count));
	CHECK(!bs_next_dirty_run(e->m, f, n, &first, &count));
	/* Starting inside a run gives the rest of it. */
	CHECK(bs_next_dirty_run(e->m, f, 2, &first, &count) && first == 2 && count == 1);
	if (n > 64)
		CHECK(bs_next_dirty_run(e->m, f, 64, &first, &count) && first == 64 && count == 2);

	/* The flusher's loop: clear each run as it goes under writeback; a
	 * failed write sets the run dirty again. */
	size_t total = bs_dirty_bytes(e->m, f), seen = 0;
	from = 0;
	while (bs_next_dirty_run(e->m, f, from, &first, &count)) {
		size_t c = bs_clear_range_dirty(e->m, f, (size_t)first * bs, (size_t)count * bs);
		CHECK(c == (size_t)count * bs);
		seen += c;
		from = first + count;
	}
	CHECK(seen == total);
	CHECK(!folio_test(f, PF_DIRTY));
	bs_redirty_blocks(e->m, f, 5, 1);
	CHECK(folio_test(f, PF_DIRTY));
	CHECK(bs_next_dirty_run(e->m, f, 0, &first, &count) && first == 5 && count == 1);
	CHECK(bs_dirty_bytes(e->m, f) == bs);
	put_folio(e, f);
}

TEST_CASE(dirty_runs_found_whole_and_in_order)
{
	for_each_shape(dirty_runs_on);
}

/* ---------------------------------------- public API: writeback of runs */

/*
 * Dirty runs end to end, 512-byte blocks: writes into blocks 1 and 5 of a
 * 4 KiB region are written back as exactly those two blocks, two device
 * writes of 512 bytes, whether the region was on the device already (the
 * folio is uptodate: only its dirty blocks go) or new (blocks 0, 2-4 were
 * never written; partial writes are zero-filled to whole blocks).
 */
TEST_CASE(writeback_writes_only_dirty_blocks)
{
	struct env e;
	env_open(&e, 512, "runs");
	struct pc_stats a, b;
	uint8_t buf[8192];

	/* An existing 8 KiB: written back once. */
	tu_fill_pattern(buf, sizeof(buf), 1, 0);
	CHECK(pc_pwrite(e.h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	CHECK(pc_fsync(e.h) == 0);
	pc_file_stats(e.h, &a);
	CHECK(a.dirty_bytes == 0);

	/* Blocks 1 and 5 of [4096, 8192), whole. */
	uint8_t blk[512];
	tu_fill_pattern(blk, 512, 2, 1);
	CHECK(pc_pwrite(e.h, blk, 512, 4096 + 512, 0) == 512);
	CHECK(pc_pwrite(e.h, blk, 512, 4096 + 5 * 512, 0) == 512);
	pc_file_stats(e.h, &b);
	CHECK(b.dirty_bytes == 1024);
	CHECK(pc_fsync(e.h) == 0);
	pc_file_stats(e.h, &b);
	CHECK(b.dev_write_bytes - a.dev_write_bytes == 1024);
	CHECK(b.dev_write_ios - a.dev_write_ios == 2);
	if (b.dev_write_bytes - a.dev_write_bytes != 1024 || b.dev_write_ios - a.dev_write_ios != 2)
		fprintf(stderr, "existing region: wrote %llu bytes in %llu I/Os, expected 1024 in 2\n",
			(unsigned long long)(b.dev_write_bytes - a.dev_write_bytes),
			(unsigned long long)(b.dev_write_ios - a.dev_write_ios));
	memcpy(buf + 4096 + 512, blk, 512);
	memcpy(buf + 4096 + 5 * 512, blk, 512);
	a = b;

	/* A few bytes in blocks 1 and 5 of a new region past EOF. */
	uint64_t r = 64 * KiB;
	CHECK(pc_pwrite(e.h, blk, 10, (off_t)r + 600, 0) == 10);
	CHECK(pc_pwrite(e.h, blk, 10, (off_t)r + 2600, 0) == 10);
	pc_file_stats(e.h, &b);
	CHECK(b.dirty_bytes == 1024);
	CHECK(pc_fsync(e.h) == 0);
	pc_file_stats(e.h, &b);
	CHECK(b.dev_write_bytes - a.dev_write_bytes == 1024);
	CHECK(b.dev_write_ios - a.dev_write_ios == 2);
	if (b.dev_write_bytes - a.dev_write_bytes != 1024 || b.dev_write_ios - a.dev_write_ios != 2)
		fprintf(stderr, "new region: wrote %llu bytes in %llu I/Os, expected 1024 in 2\n",
			(unsigned long long)(b.dev_write_bytes - a.dev_write_bytes),
			(unsigned long long)(b.dev_write_ios - a.dev_write_ios));
	CHECK(pc_size(e.h) == (off_t)(r + 2610));

	/* The device holds it, size included, with zeros around the bytes. */
	CHECK(pc_close(e.h) == 0);
	e.h = NULL;
	size_t size;
	uint8_t *disk = tu_read_backing(e.path, &size);
	CHECK(size == r + 2610);
	CHECK(memcmp(disk, buf, sizeof(buf)) == 0);
	CHECK(all_zero(disk + sizeof(buf), r + 600 - sizeof(buf)));
	CHECK(memcmp(disk + r + 600, blk, 10) == 0);
	CHECK(all_zero(disk + r + 610, 1990));
	CHECK(memcmp(disk + r + 2600, blk, 10) == 0);
	free(disk);
	CHECK(pc_cache_destroy(e.c) == 0);
	unlink(e.path);
}

/* --------------------------------------- public API: truncate and punch */

/*
 * Invalidation end to end: a truncate into a dirty folio and a punch
 * inside one leave dirty exactly the blocks still part of the file, and
 * writeback writes only those.
 */
TEST_CASE(truncate_and_punch_clear_dirty_blocks)
{
	struct env e;
	env_open(&e, 512, "trunc");
	struct pc_stats s0, s;
	uint8_t buf[4096];

	tu_fill_pattern(buf, sizeof(buf), 3, 0);
	CHECK(pc_pwrite(e.h, buf, 4096, 0, 0) == 4096);
	pc_file_stats(e.h, &s0);
	CHECK(s0.dirty_bytes == 4096);
	/* Truncate to 1000: blocks 0 and 1 (holding byte 999) stay dirty. */
	CHECK(pc_ftruncate(e.h, 1000) == 0);
	pc_file_stats(e.h, &s);
	CHECK(s.dirty_bytes == 1024);

	/* [8192, 12288) dirty, punch [8892, 10892): blocks 2-4 of it go,
	 * blocks 1 and 5 are zeroed in part and stay dirty. */
	uint8_t buf2[4096];
	tu_fill_pattern(buf2, sizeof(buf2), 4, 8192);
	CHECK(pc_pwrite(e.h, buf2, 4096, 8192, 0) == 4096);
	pc_file_stats(e.h, &s);
	CHECK(s.dirty_bytes == 1024 + 4096);
	CHECK(pc_fallocate(e.h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8892, 2000) == 0);
	pc_file_stats(e.h, &s);
	CHECK(s.dirty_bytes == 1024 + 4096 - 3 * 512);
	if (s.dirty_bytes != 1024 + 4096 - 3 * 512)
		fprintf(stderr, "after truncate+punch: %llu dirty bytes, expected %u\n",
			(unsigned long long)s.dirty_bytes, 1024 + 4096 - 3 * 512);

	CHECK(pc_fsync(e.h) == 0);
	pc_file_stats(e.h, &s);
	/* [0, 1024), [8192, 9216), [10752, 12288). */
	CHECK(s.dev_write_bytes - s0.dev_write_bytes == 1024 + 1024 + 1536);
	CHECK(s.dev_write_ios - s0.dev_write_ios == 3);
	CHECK(s.dirty_bytes == 0);

	CHECK(pc_close(e.h) == 0);
	e.h = NULL;
	size_t size;
	uint8_t *disk = tu_read_backing(e.path, &size);
	CHECK(size == 12288);
	CHECK(memcmp(disk, buf, 1000) == 0);
	CHECK(all_zero(disk + 1000, 8192 - 1000));
	CHECK(memcmp(disk + 8192, buf2, 700) == 0);
	CHECK(all_zero(disk + 8892, 2000));
	CHECK(memcmp(disk + 10892, buf2 + 2700, 4096 - 2700) == 0);
	free(disk);
	CHECK(pc_cache_destroy(e.c) == 0);
	unlink(e.path);
}
