/*
 * test_block_state.c - the per-block uptodate/dirty rules of
 * ../shared/seeds/iomap-subfolio-block-state.txt, one test per rule, each
 * written so that it fails on the bug the rule guards against.
 *
 * Most tests drive the internal block-state calls of src/mem/block_state.c on
 * a real folio: a small cache (4 MiB), a file opened through pc_open, and
 * folios taken with mapping_get_folio(GF_CREATE | GF_LOCK), so that the
 * folio lock is held as the block-state calls require.  Such folios are
 * never accounted as dirty nor tagged, so each test clears and removes its
 * folio itself (put_folio) before the cache is destroyed.
 *
 * Every rule runs on several folio shapes:
 *   - 512-byte blocks in a 4 KiB folio       (8 blocks, inline bitmaps)
 *   - 4096-byte blocks in a 32 KiB folio     (8 blocks, inline bitmaps)
 *   - 4096-byte blocks in a 256 KiB folio    (64 blocks: inline, full word)
 *   - 512-byte blocks in a 64 KiB folio      (128 blocks: out-of-line)
 *   - 512-byte blocks in a 256 KiB folio     (512 blocks: out-of-line)
 * so that rule (f), "a folio with more than 64 blocks behaves the same",
 * is every rule again on the out-of-line bitmaps, with the block ranges
 * chosen to straddle the 64-bit word boundaries there.
 *
 * Then through the public API:
 *   - only dirty blocks are written back, in contiguous runs (device write
 *     counters after fsync);
 *   - truncate and punch clear the dirty bits of the removed blocks
 *     (dirty bytes and device write counters);
 *   - a reader never sees bytes not yet written: a partial write into a new
 *     block reads back with zeros around it, and, caught in the middle of
 *     the write path (the source buffer faults; the check runs in the
 *     SIGSEGV handler while the writer holds the folio between zeroing and
 *     copying), the block is not uptodate and a PC_NOWAIT reader gets
 *     EAGAIN instead of the block.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

static const char *dir;

struct env {
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m;
	size_t bs;
	char path[4300];
	uint64_t next_pos; /* fresh, 1 MiB-aligned regions for the tests */
};

static void env_open(struct env *e, size_t bs, const char *name)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 4 * MiB;
	cfg.max_folio_size = 256 * KiB;
	cfg.block_size = bs;
	e->c = pc_cache_new(&cfg);
	REQUIRE(e->c);
	test_path(e->path, sizeof(e->path), dir, name);
	e->h = pc_open(e->c, e->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(e->h);
	e->m = e->h->m;
	REQUIRE(e->m->block_size == bs);
	e->bs = bs;
	e->next_pos = 0;
}

static void env_close(struct env *e)
{
	CHECK(pc_close(e->h) == 0);
	CHECK(pc_cache_destroy(e->c) == 0);
	unlink(e->path);
}

/* A new locked folio of exactly `order` in a fresh region of the file. */
static struct pc_folio *new_folio(struct env *e, unsigned order)
{
	uint64_t pos = e->next_pos;
	e->next_pos += MiB;
	bool created = false;
	struct pc_folio *f = mapping_get_folio(e->m, pos, order, GF_CREATE | GF_LOCK, &created);
	REQUIRE(!IS_ERR_FOLIO(f) && f);
	REQUIRE(created);
	REQUIRE(f->order == order);
	REQUIRE(folio_pos(f) == pos);
	REQUIRE(folio_test(f, PF_LOCKED));
	REQUIRE(!folio_test(f, PF_UPTODATE | PF_DIRTY));
	return f;
}

/* Forget the folio: clean (it was never accounted), out of the index, freed. */
static void put_folio(struct env *e, struct pc_folio *f)
{
	bs_invalidate_blocks(e->m, f, 0, folio_size(f), false);
	folio_clear(f, PF_DIRTY);
	mapping_remove_folio(e->m, f);
	folio_unlock(f);
	folio_put(e->c, f);
}

/* A folio shape to run every rule on. */
struct shape {
	struct env *e;
	unsigned order;
	const char *name;
};

/* The block the rules work around: straddling a bitmap word boundary when
 * there is one (blocks 63, 64, 65, ...), else block 1. */
static unsigned pivot(unsigned n)
{
	return n > 64 ? 63 : 1;
}

/* Compare the dirty or uptodate state of every block with want[] (one
 * entry per block); report the first difference, return how many differ. */
enum { ST_DIRTY, ST_UPTODATE };
static unsigned block_mismatches(struct env *e, struct pc_folio *f, int what, const bool *want, const char *label,
				 int line)
{
	unsigned n = bs_nblocks(e->m, f), bad = 0;
	for (unsigned b = 0; b < n; b++) {
		bool got = what == ST_DIRTY ? bs_block_dirty(e->m, f, b) : bs_block_uptodate(e->m, f, b);
		if (got != want[b]) {
			if (!bad)
				fprintf(stderr, "line %d: %s: block %u of %u is %s%s, expected %s\n", line, label, b, n,
					got ? "" : "not ", what == ST_DIRTY ? "dirty" : "uptodate",
					want[b] ? "set" : "clear");
			bad++;
		}
	}
	return bad;
}
#define CHECK_DIRTY(e, f, want, label) CHECK(block_mismatches(e, f, ST_DIRTY, want, label, __LINE__) == 0)
#define CHECK_UPTODATE(e, f, want, label) CHECK(block_mismatches(e, f, ST_UPTODATE, want, label, __LINE__) == 0)

static void set_all(bool *v, unsigned n, bool x)
{
	for (unsigned i = 0; i < n; i++)
		v[i] = x;
}

/* ------------------------------------------------------------ rule (a) */

/*
 * (a) bs_clear_range_dirty on a partial range rounds the first block UP
 * and the last block DOWN: a block only partly cleared keeps its dirty bit.
 * Bug guarded against (seed patch 1/6, "correct the range of a partial
 * dirty clear"): first = off >> bits, last = (off + len - 1) >> bits clears
 * the partly covered first and last blocks too, and their other bytes are
 * then never written back (silent data loss).
 */
static void rule_a_clear_range_dirty(const struct shape *s)
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

/* ------------------------------------------------------------ rule (b) */

/*
 * (b) bs_invalidate_blocks (a truncate or punch that covers part of a
 * folio) clears exactly the dirty bits of the blocks wholly inside the
 * range, and drops their deferred partial ranges.  Bug guarded against
 * (seed patches 2/6 and 3/6, "support invalidating partial folios"): only
 * whole-folio invalidation cleared the block state, so blocks truncated
 * or punched away stayed dirty and writeback wrote them again (reviving
 * data past EOF or inside the hole).  Partly covered blocks must keep their
 * dirty bits: their remaining bytes are still part of the file.
 */
static void rule_b_invalidate_blocks(const struct shape *s)
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

/* ------------------------------------------------------------ rule (c) */

/*
 * (c) A block becomes uptodate only when all its bytes are valid, at write
 * end.  Bug guarded against (seed patch 5/6, "don't mark blocks uptodate
 * after partial zeroing"): write begin zeroed the uncovered part of a new
 * block and marked the whole block uptodate before the data was copied, so
 * a concurrent reader could read the block with the write's bytes not yet
 * there (stale memory).  Here: after the zeroing and before
 * bs_write_end the block is not uptodate; after bs_write_end with
 * head_full/tail_full it is.  A partial write without head_full/tail_full
 * (deferred read-modify-write) leaves the block dirty, not uptodate, with
 * the written bytes as its valid range, and an adjacent write that covers
 * the rest completes it.  (write_path_midcopy below checks the same rule
 * in the real write path.)
 */
static void rule_c_uptodate_at_write_end(const struct shape *s)
{
	struct env *e = s->e;
	size_t bs = e->bs;
	struct pc_folio *f = new_folio(e, s->order);
	size_t fsz = folio_size(f);
	unsigned n = bs_nblocks(e->m, f), k = pivot(n);
	uint8_t *p = arena_data(e->c, f);
	bool want[512];

	/* Write begin of a 100-byte write in the middle of block k: zero the
	 * uncovered parts of the block (as write.c does for a hole). */
	size_t off = k * bs + bs / 4, len = bs / 8 < 100 ? bs / 8 : 100;
	memset(p + k * bs, 0, off - k * bs);
	memset(p + off + len, 0, (k + 1) * bs - off - len);
	CHECK(!bs_range_uptodate(e->m, f, k * bs, bs));
	CHECK(!bs_range_uptodate(e->m, f, off, len));
	CHECK(!bs_block_uptodate(e->m, f, k));
	CHECK(!folio_test(f, PF_UPTODATE));
	/* The copy, then write end: now uptodate (and dirty). */
	memset(p + off, 0xab, len);
	CHECK(bs_write_end(e->m, f, off, len, true, true) == bs);
	CHECK(bs_range_uptodate(e->m, f, k * bs, bs));
	CHECK(bs_block_uptodate(e->m, f, k));
	CHECK(bs_block_dirty(e->m, f, k));
	uint32_t vs, ve;
	CHECK(!bs_block_valid(e->m, f, k, &vs, &ve));
	/* Only that block. */
	set_all(want, n, false);
	want[k] = true;
	CHECK_UPTODATE(e, f, want, "one block written");
	CHECK_DIRTY(e, f, want, "one block written");
	CHECK(!folio_test(f, PF_UPTODATE));
	CHECK(!bs_range_uptodate(e->m, f, (k + 1) * bs, 1));
	CHECK(!bs_range_uptodate(e->m, f, (k - 1) * bs + bs - 1, 2)); /* k-1 and k */

	/* A deferred partial write in block k+2 (merged further down). */
	REQUIRE(bs_prepare_partial(e->m, f) == 0);
	size_t b2 = (k + 2) * bs;
	CHECK(bs_write_end(e->m, f, b2 + 8, 16, false, false) == bs);
	CHECK(!bs_block_uptodate(e->m, f, k + 2));
	CHECK(bs_block_dirty(e->m, f, k + 2));
	CHECK(bs_block_valid(e->m, f, k + 2, &vs, &ve) && vs == 8 && ve == 24);

	/* Partial write without head_full/tail_full: dirty, not uptodate,
	 * valid range = the written bytes; the adjacent write of the rest of
	 * the block completes it (uptodate, range gone, no new dirty bytes). */
	size_t b1 = (k + 1) * bs;
	CHECK(bs_write_end(e->m, f, b1 + bs / 2, bs / 2, false, false) == bs);
	CHECK(!bs_block_uptodate(e->m, f, k + 1));
	CHECK(!bs_range_uptodate(e->m, f, b1 + bs / 2, bs / 2));
	CHECK(bs_block_dirty(e->m, f, k + 1));
	CHECK(bs_block_valid(e->m, f, k + 1, &vs, &ve) && vs == bs / 2 && ve == bs);
	CHECK(bs_has_partial(f));
	/* Adjacent below, still leaving a gap: the range grows. */
	CHECK(bs_write_end(e->m, f, b1 + bs / 4, bs / 4, false, false) == 0);
	CHECK(!bs_block_uptodate(e->m, f, k + 1));
	CHECK(bs_block_valid(e->m, f, k + 1, &vs, &ve) && vs == bs / 4 && ve == bs);
	/* The rest: complete. */
	CHECK(bs_write_end(e->m, f, b1, bs / 4, false, false) == 0);
	CHECK(bs_block_uptodate(e->m, f, k + 1));
	CHECK(bs_range_uptodate(e->m, f, b1, bs));
	CHECK(!bs_block_valid(e->m, f, k + 1, &vs, &ve));
	CHECK(bs_block_dirty(e->m, f, k + 1));

	/* A write across blocks k+3..k+5 partial at both ends, nothing valid
	 * around it: the middle block is uptodate, the ends are deferred. */
	size_t b3 = (k + 3) * bs;
	CHECK(bs_write_end(e->m, f, b3 + 1, 3 * bs - 2, false, false) == 3 * bs);
	CHECK(!bs_block_uptodate(e->m, f, k + 3));
	CHECK(bs_block_uptodate(e->m, f, k + 4));
	CHECK(!bs_block_uptodate(e->m, f, k + 5));
	CHECK(bs_block_valid(e->m, f, k + 3, &vs, &ve) && vs == 1 && ve == bs);
	CHECK(bs_block_valid(e->m, f, k + 5, &vs, &ve) && vs == 0 && ve == bs - 1);
	/* The same write with head_full/tail_full (the ends were zeroed or
	 * read): all three uptodate. */
	CHECK(bs_write_end(e->m, f, b3 + 1, 3 * bs - 2, true, true) == 0);
	CHECK(bs_block_uptodate(e->m, f, k + 3) && bs_block_uptodate(e->m, f, k + 5));
	CHECK(!bs_block_valid(e->m, f, k + 3, &vs, &ve));
	CHECK(!bs_block_valid(e->m, f, k + 5, &vs, &ve));

	/* Merging device data around a range (a reader or the flusher). */
	CHECK(bs_has_partial(f)); /* block k+2 still */
	bs_block_merged(e->m, f, k + 2);
	CHECK(bs_block_uptodate(e->m, f, k + 2));
	CHECK(!bs_block_valid(e->m, f, k + 2, &vs, &ve));
	CHECK(!bs_has_partial(f));

	/* Every block written whole: the folio flag follows. */
	CHECK(!folio_test(f, PF_UPTODATE));
	bs_write_end(e->m, f, 0, fsz, true, true);
	CHECK(folio_test(f, PF_UPTODATE));
	put_folio(e, f);
}

/* ------------------------------------------------------------ rule (d) */

static uint64_t *raw_word(struct pc_folio *f, bool dirty, unsigned blk)
{
	/* Inline when there is no out-of-line bitmap. */
	if (f->bx && f->bx->words)
		return &f->bx->bits[(dirty ? f->bx->words : 0) + blk / 64];
	return dirty ? &f->dbits : &f->ubits;
}

/* The block-state spinlock (PF_STATELOCK in the flags word), taken the way
 * block_state.c takes it, to look at both bitmaps at one instant. */
static void raw_state_lock(struct pc_folio *f)
{
	while (atomic_fetch_or_explicit(&f->flags, PF_STATELOCK, memory_order_acquire) & PF_STATELOCK)
		;
}

static void raw_state_unlock(struct pc_folio *f)
{
	atomic_fetch_and_explicit(&f->flags, ~PF_STATELOCK, memory_order_release);
}

struct observer {
	struct pc_folio *f;
	unsigned blk;
	_Atomic bool stop;
	_Atomic bool started;
	unsigned long samples, torn, both;
};

static void *observe(void *arg)
{
	struct observer *o = arg;
	uint64_t bit = 1ull << (o->blk % 64);
	atomic_store(&o->started, true);
	while (!atomic_load_explicit(&o->stop, memory_order_relaxed)) {
		raw_state_lock(o->f);
		bool u = *raw_word(o->f, false, o->blk) & bit;
		bool d = *raw_word(o->f, true, o->blk) & bit;
		raw_state_unlock(o->f);
		o->samples++;
		if (u != d)
			o->torn++;
		if (u && d)
			o->both++;
	}
	return NULL;
}

/*
 * (d) bs_write_end sets uptodate and dirty together, in one state-lock
 * round, and returns the bytes newly dirtied at block granularity (0 for a
 * rewrite of dirty blocks).  Bugs guarded against (seed patch 6/6, and the
 * dirty-length fix of patch 4/6): uptodate and dirty set in two lock rounds
 * (another thread can see a block uptodate but not yet dirty, and it costs
 * a second lock round per write); a dirty count in bytes written rather
 * than blocks (the dirty accounting drifts from the dirty bitmap); counting
 * blocks already dirty again.
 */
static void rule_d_write_end_together(const struct shape *s)
{
	struct env *e = s->e;
	size_t bs = e->bs;
	struct pc_folio *f = new_folio(e, s->order);
	size_t fsz = folio_size(f);
	unsigned n = bs_nblocks(e->m, f), k = pivot(n);
	bool want[512];

	/* Two whole blocks: both bits of both blocks, PF_DIRTY, and since the
	 * other blocks are not uptodate, no PF_UPTODATE. */
	CHECK(bs_write_end(e->m, f, k * bs, 2 * bs, true, true) == 2 * bs);
	set_all(want, n, false);
	want[k] = want[k + 1] = true;
	CHECK_UPTODATE(e, f, want, "write end");
	CHECK_DIRTY(e, f, want, "write end");
	CHECK(folio_test(f, PF_DIRTY));
	CHECK(!folio_test(f, PF_UPTODATE));
	/* Rewrite: nothing newly dirty. */
	CHECK(bs_write_end(e->m, f, k * bs, 2 * bs, true, true) == 0);
	CHECK(bs_write_end(e->m, f, k * bs + 3, 5, true, true) == 0);
	/* A few bytes into a new block: one whole block newly dirty. */
	CHECK(bs_write_end(e->m, f, (k + 3) * bs + 10, 20, true, true) == bs);
	CHECK(bs_write_end(e->m, f, (k + 3) * bs + 100, 30, true, true) == 0);
	/* Spanning a dirty block and two new ones, partly at both ends. */
	CHECK(bs_write_end(e->m, f, (k + 3) * bs + bs / 2, 2 * bs, true, true) == 2 * bs);
	CHECK(bs_dirty_bytes(e->m, f) == 5 * bs);
	/* The rest of the folio: PF_UPTODATE once every block is. */
	size_t rest = fsz - 5 * bs;
	CHECK(bs_write_end(e->m, f, 0, fsz, true, true) == rest);
	CHECK(folio_test(f, PF_UPTODATE));
	CHECK(folio_test(f, PF_DIRTY));
	CHECK(bs_dirty_bytes(e->m, f) == fsz);
	put_folio(e, f);

	/*
	 * One lock round: another thread looking at both bitmaps under the
	 * state lock never sees the block uptodate without dirty (or the
	 * reverse) while write ends set them.  Between writes the test itself
	 * clears both bits in one critical section (not through the library,
	 * whose invalidation may legitimately take two rounds).
	 */
	f = new_folio(e, s->order);
	struct observer o = { .f = f, .blk = k };
	uint64_t bit = 1ull << (k % 64);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, observe, &o) == 0);
	while (!atomic_load(&o.started))
		;
	for (int i = 0; i < 20000; i++) {
		bs_write_end(e->m, f, k * bs, bs, true, true);
		raw_state_lock(f);
		*raw_word(f, false, k) &= ~bit;
		*raw_word(f, true, k) &= ~bit;
		folio_clear(f, PF_UPTODATE | PF_DIRTY);
		raw_state_unlock(f);
	}
	atomic_store(&o.stop, true);
	pthread_join(t, NULL);
	if (o.torn)
		fprintf(stderr, "%s: uptodate and dirty seen apart %lu times in %lu samples\n", s->name, o.torn,
			o.samples);
	CHECK(o.torn == 0);
	put_folio(e, f);
}

/*
 * (d, second half) When the folio is already uptodate (PF_UPTODATE) the
 * write end does no uptodate bookkeeping, and the folio stays uptodate.
 * Bug guarded against (seed patch 6/6): bookkeeping of partial ranges that
 * cannot exist in an uptodate folio (work under the state lock on every
 * write, and a partly written block of an uptodate folio recorded as "not
 * uptodate, deferred", so that a later reader or the flusher would read
 * the device over data already in memory), or the uptodate state being
 * recomputed, and lost, by a write.
 */
static void rule_d_uptodate_skip(const struct shape *s)
{
	struct env *e = s->e;
	size_t bs = e->bs;
	unsigned k;
	bool want[512];
	uint32_t vs, ve;

	/*
	 * Already uptodate (PF_UPTODATE, set the way the library sets it):
	 * partial writes without head_full/tail_full stay uptodate, keep no
	 * partial range, and dirty their blocks.  No bs_prepare_partial()
	 * here: an uptodate folio must not need one.
	 */
	struct pc_folio *f = new_folio(e, s->order);
	unsigned n = bs_nblocks(e->m, f);
	k = pivot(n);
	bs_mark_all_uptodate(e->m, f);
	CHECK(folio_test(f, PF_UPTODATE));
	CHECK(!folio_test(f, PF_DIRTY));
	CHECK(bs_write_end(e->m, f, k * bs + 5, bs - 10, false, false) == bs);
	CHECK(bs_write_end(e->m, f, (k + 2) * bs + 1, bs, false, false) == 2 * bs);
	CHECK(folio_test(f, PF_UPTODATE));
	CHECK(folio_test(f, PF_DIRTY));
	set_all(want, n, true);
	CHECK_UPTODATE(e, f, want, "uptodate folio, partial writes");
	set_all(want, n, false);
	want[k] = want[k + 2] = want[k + 3] = true;
	CHECK_DIRTY(e, f, want, "uptodate folio, partial writes");
	CHECK(!bs_block_valid(e->m, f, k, &vs, &ve));
	CHECK(!bs_has_partial(f));
	put_folio(e, f);

	/*
	 * PF_UPTODATE set on its own (the flag says every block is uptodate):
	 * the bookkeeping is skipped, so no partial range is recorded (there
	 * is room for one: if it were recorded the skip did not happen), and
	 * the behaviour stays right: the written block is still uptodate and
	 * readable, the folio still PF_UPTODATE, and the block dirty.
	 */
	f = new_folio(e, s->order);
	REQUIRE(bs_prepare_partial(e->m, f) == 0);
	folio_set(f, PF_UPTODATE);
	CHECK(bs_write_end(e->m, f, k * bs + 5, 10, false, false) == bs);
	CHECK(!bs_block_valid(e->m, f, k, &vs, &ve));
	CHECK(!bs_has_partial(f));
	CHECK(bs_block_dirty(e->m, f, k));
	CHECK(folio_test(f, PF_DIRTY));
	bool still = folio_test(f, PF_UPTODATE), readable = bs_range_uptodate(e->m, f, k * bs, bs);
	CHECK(still);
	CHECK(readable);
	if (!still || !readable)
		fprintf(stderr, "%s: a write into a PF_UPTODATE folio left it %s and block %u %s\n", s->name,
			still ? "PF_UPTODATE" : "NOT PF_UPTODATE", k, readable ? "uptodate" : "NOT uptodate");
	put_folio(e, f);
}

/* ------------------------------------------------------------ rule (e) */

/*
 * (e) Only dirty blocks are written back, in contiguous runs:
 * bs_next_dirty_run returns each maximal run of dirty blocks in order.
 * Bug guarded against: writing back the whole folio (or whole uptodate
 * ranges) for one dirty block, which writes blocks that hold nothing new,
 * or blocks that are not uptodate (garbage) over good data on the device;
 * and runs that stop or merge at a bitmap word boundary.
 */
static void rule_e_dirty_runs(const struct shape *s)
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

/* ------------------------------------------ public API: writeback of runs */

static void stats_of(struct pc_file *h, struct pc_stats *s)
{
	pc_file_stats(h, s);
}

static void fill_pattern(uint8_t *p, size_t len, uint64_t off, unsigned salt)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (off + i) * 0x9E3779B97F4A7C15ull + salt;
		p[i] = (uint8_t)(x >> 56) | 1;
	}
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * (e) end to end, 512-byte blocks: writes into blocks 1 and 5 of a 4 KiB
 * region are written back as exactly those two blocks, two device writes of
 * 512 bytes, whether the region was on the device already (the folio is
 * uptodate: only its dirty blocks go) or new (blocks 0, 2-4 were never
 * written; partial writes are zero-filled to whole blocks).
 */
static void api_dirty_runs_only(void)
{
	struct env e;
	env_open(&e, 512, "runs");
	struct pc_stats a, b;
	uint8_t buf[8192];

	/* An existing 8 KiB: written back once. */
	fill_pattern(buf, sizeof(buf), 0, 1);
	CHECK(pc_pwrite(e.h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	CHECK(pc_fsync(e.h) == 0);
	stats_of(e.h, &a);
	CHECK(a.dirty_bytes == 0);

	/* Blocks 1 and 5 of [4096, 8192), whole. */
	uint8_t blk[512];
	fill_pattern(blk, 512, 1, 2);
	CHECK(pc_pwrite(e.h, blk, 512, 4096 + 512, 0) == 512);
	CHECK(pc_pwrite(e.h, blk, 512, 4096 + 5 * 512, 0) == 512);
	stats_of(e.h, &b);
	CHECK(b.dirty_bytes == 1024);
	CHECK(pc_fsync(e.h) == 0);
	stats_of(e.h, &b);
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
	stats_of(e.h, &b);
	CHECK(b.dirty_bytes == 1024);
	CHECK(pc_fsync(e.h) == 0);
	stats_of(e.h, &b);
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

/*
 * (b) end to end: a truncate into a dirty folio and a punch inside one
 * leave dirty exactly the blocks still part of the file, and writeback
 * writes only those.
 */
static void api_truncate_punch_clear_dirty(void)
{
	struct env e;
	env_open(&e, 512, "trunc");
	struct pc_stats s0, s;
	uint8_t buf[4096];

	fill_pattern(buf, sizeof(buf), 0, 3);
	CHECK(pc_pwrite(e.h, buf, 4096, 0, 0) == 4096);
	stats_of(e.h, &s0);
	CHECK(s0.dirty_bytes == 4096);
	/* Truncate to 1000: blocks 0 and 1 (holding byte 999) stay dirty. */
	CHECK(pc_ftruncate(e.h, 1000) == 0);
	stats_of(e.h, &s);
	CHECK(s.dirty_bytes == 1024);

	/* [8192, 12288) dirty, punch [8892, 10892): blocks 2-4 of it go,
	 * blocks 1 and 5 are zeroed in part and stay dirty. */
	uint8_t buf2[4096];
	fill_pattern(buf2, sizeof(buf2), 8192, 4);
	CHECK(pc_pwrite(e.h, buf2, 4096, 8192, 0) == 4096);
	stats_of(e.h, &s);
	CHECK(s.dirty_bytes == 1024 + 4096);
	CHECK(pc_fallocate(e.h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8892, 2000) == 0);
	stats_of(e.h, &s);
	CHECK(s.dirty_bytes == 1024 + 4096 - 3 * 512);
	if (s.dirty_bytes != 1024 + 4096 - 3 * 512)
		fprintf(stderr, "after truncate+punch: %llu dirty bytes, expected %u\n",
			(unsigned long long)s.dirty_bytes, 1024 + 4096 - 3 * 512);

	CHECK(pc_fsync(e.h) == 0);
	stats_of(e.h, &s);
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

/* ------------------------------------- public API: no unwritten bytes read */

/*
 * A reader never sees bytes not yet written: 100 bytes written into the
 * middle of a new block past EOF (and of a block in a hole, and of a block
 * holding data on the device) read back as zeros (or the old data) around
 * the new bytes, from the cache and, after fsync and dropping the cache,
 * from the device.
 */
static void api_partial_block_reads(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "partial%zu", bs);
	env_open(&e, bs, name);
	uint8_t data[100], *rd = malloc(3 * bs), old[4096];
	REQUIRE(rd);
	fill_pattern(data, sizeof(data), 7, 5);

	/* 1000 bytes on the device first. */
	fill_pattern(old, sizeof(old), 0, 6);
	CHECK(pc_pwrite(e.h, old, 1000, 0, 0) == 1000);
	CHECK(pc_fsync(e.h) == 0);

	/* Past EOF: block 4 (of this block size), 100 bytes in its middle. */
	uint64_t b = 4 * bs, off = b + bs / 2 - 50;
	CHECK(pc_pwrite(e.h, data, 100, (off_t)off, 0) == 100);
	for (int pass = 0; pass < 2; pass++) {
		memset(rd, 0xee, bs);
		CHECK(pc_pread(e.h, rd, bs, (off_t)b, 0) == (ssize_t)(off + 100 - b));
		CHECK(all_zero(rd, off - b));
		CHECK(memcmp(rd + (off - b), data, 100) == 0);
		/* The gap between the old end and the block: zeros. */
		memset(rd, 0xee, bs);
		CHECK(pc_pread(e.h, rd, bs - 1000 % bs, 1000, 0) == (ssize_t)(bs - 1000 % bs));
		CHECK(all_zero(rd, bs - 1000 % bs));
		/* Second pass: from the device. */
		CHECK(pc_fsync(e.h) == 0);
		CHECK(pc_fadvise(e.h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	}

	/* A block in a hole inside the file: same. */
	CHECK(pc_ftruncate(e.h, (off_t)(64 * bs)) == 0);
	b = 32 * bs;
	off = b + bs - 150;
	CHECK(pc_pwrite(e.h, data, 100, (off_t)off, 0) == 100);
	memset(rd, 0xee, bs);
	CHECK(pc_pread(e.h, rd, bs, (off_t)b, 0) == (ssize_t)bs);
	CHECK(all_zero(rd, off - b));
	CHECK(memcmp(rd + (off - b), data, 100) == 0);
	CHECK(all_zero(rd + (off - b) + 100, 50));

	/* A block with data on the device, not cached (dropped above): old
	 * bytes around the new ones. */
	CHECK(pc_pwrite(e.h, data, 100, 300, 0) == 100);
	memset(rd, 0xee, bs);
	CHECK(pc_pread(e.h, rd, 1000, 0, 0) == 1000);
	CHECK(memcmp(rd, old, 300) == 0);
	CHECK(memcmp(rd + 300, data, 100) == 0);
	CHECK(memcmp(rd + 400, old + 400, 600) == 0);

	free(rd);
	env_close(&e);
}

/* ---------------------------------------- the write path caught mid-copy */

/*
 * The source buffer of a pc_pwrite is a PROT_NONE page: the copy into the
 * folio faults after write begin has zeroed the uncovered part of the
 * block.  The SIGSEGV handler looks at the block (the writer holds the
 * folio lock, nothing else), tries a PC_NOWAIT read of it, then makes the
 * page readable and returns, and the copy goes on.
 */
static struct {
	struct env *e;
	uint8_t *page;
	size_t pagesz;
	uint64_t blk_pos, off;
	volatile sig_atomic_t armed, hits, no_folio, block_uptodate, range_uptodate, folio_uptodate;
	volatile ssize_t nowait_ret;
	volatile int nowait_errno;
	uint8_t rd[65536];
} mc;

static void midcopy_handler(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	uint8_t *a = si->si_addr;
	if (!mc.armed || a < mc.page || a >= mc.page + mc.pagesz) {
		signal(sig, SIG_DFL); /* not ours: fault again, and die */
		return;
	}
	int saved = errno;
	mc.armed = 0;
	mc.hits++;
	struct pc_mapping *m = mc.e->m;
	struct pc_folio *f = mapping_lookup(m, mc.blk_pos);
	if (f) {
		size_t foff = mc.blk_pos - folio_pos(f);
		mc.block_uptodate = bs_block_uptodate(m, f, (unsigned)(foff >> m->block_shift));
		mc.range_uptodate = bs_range_uptodate(m, f, mc.off - folio_pos(f), 100);
		mc.folio_uptodate = folio_test(f, PF_UPTODATE);
		folio_put(mc.e->c, f);
	} else {
		mc.no_folio = 1;
	}
	errno = 0;
	mc.nowait_ret = pc_pread(mc.e->h, mc.rd, mc.e->bs, (off_t)mc.blk_pos, PC_NOWAIT);
	mc.nowait_errno = errno;
	mprotect(mc.page, mc.pagesz, PROT_READ);
	errno = saved;
}

static void write_path_midcopy(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "midcopy%zu", bs);
	env_open(&e, bs, name);
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *page = mmap(NULL, pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(page != MAP_FAILED);
	fill_pattern(page, 100, 11, 8);
	uint8_t data[100];
	memcpy(data, page, 100);

	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = midcopy_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGSEGV, &sa, &old) == 0);

	/* Two cases: a block in a hole inside the file, a block past EOF. */
	for (int which = 0; which < 2; which++) {
		uint64_t blk_pos;
		if (which == 0) {
			CHECK(pc_ftruncate(e.h, (off_t)(16 * bs)) == 0);
			blk_pos = 8 * bs; /* a hole: zeroed, not read */
		} else {
			blk_pos = 32 * bs; /* past EOF */
		}
		memset(&mc, 0, sizeof(mc));
		mc.e = &e;
		mc.page = page;
		mc.pagesz = pagesz;
		mc.blk_pos = blk_pos;
		mc.off = blk_pos + bs / 2 - 50;
		REQUIRE(mprotect(page, pagesz, PROT_NONE) == 0);
		mc.armed = 1;
		ssize_t w = pc_pwrite(e.h, page, 100, (off_t)mc.off, 0);
		mc.armed = 0;
		CHECK(w == 100);
		CHECK(mc.hits == 1);
		CHECK(!mc.no_folio);
		/* Between zeroing and copying: not uptodate, nothing readable. */
		CHECK(!mc.block_uptodate);
		CHECK(!mc.range_uptodate);
		CHECK(!mc.folio_uptodate);
		if (which == 0)
			CHECK(mc.nowait_ret == -1 && mc.nowait_errno == EAGAIN);
		else /* past EOF: the size grows after the copy */
			CHECK(mc.nowait_ret == 0 || (mc.nowait_ret == -1 && mc.nowait_errno == EAGAIN));
		if (mc.nowait_ret > 0)
			fprintf(stderr, "bs %zu: a reader got the block before the write's data was copied (%s)\n",
				bs, memcmp(mc.rd + (mc.off - blk_pos), data, 100) ? "stale bytes" : "?");
		/* After the write: uptodate, dirty, zeros around the data. */
		struct pc_folio *f = mapping_lookup(e.m, blk_pos);
		CHECK(f != NULL);
		if (f) {
			unsigned blk = (unsigned)((blk_pos - folio_pos(f)) >> e.m->block_shift);
			CHECK(bs_block_uptodate(e.m, f, blk));
			CHECK(bs_block_dirty(e.m, f, blk));
			folio_put(e.c, f);
		}
		uint8_t *rd = malloc(bs);
		REQUIRE(rd);
		CHECK(pc_pread(e.h, rd, bs, (off_t)blk_pos, 0) == (ssize_t)(which == 0 ? bs : bs / 2 + 50));
		CHECK(all_zero(rd, bs / 2 - 50));
		CHECK(memcmp(rd + bs / 2 - 50, data, 100) == 0);
		if (which == 0)
			CHECK(all_zero(rd + bs / 2 + 50, bs / 2 - 50));
		free(rd);
	}
	REQUIRE(sigaction(SIGSEGV, &old, NULL) == 0);
	munmap(page, pagesz);
	env_close(&e);
}

/* ------------------------------------------------------------------ main */

int main(void)
{
	dir = test_dir("block_state");
	struct env e512, e4k;
	env_open(&e512, 512, "bs512");
	env_open(&e4k, 4096, "bs4096");

	const struct shape shapes[] = {
		{ &e512, 0, "512 B blocks, 4 KiB folio (8 blocks)" },
		{ &e4k, 3, "4 KiB blocks, 32 KiB folio (8 blocks)" },
		{ &e4k, 6, "4 KiB blocks, 256 KiB folio (64 blocks)" },
		{ &e512, 4, "512 B blocks, 64 KiB folio (128 blocks, out of line)" },
		{ &e512, 6, "512 B blocks, 256 KiB folio (512 blocks, out of line)" },
	};
	void (*rules[])(const struct shape *) = {
		rule_a_clear_range_dirty, rule_b_invalidate_blocks, rule_c_uptodate_at_write_end,
		rule_d_write_end_together, rule_d_uptodate_skip, rule_e_dirty_runs,
	};
	const char *rule_names[] = { "a: partial dirty clear rounds inward",
				     "b: invalidate clears dirty of blocks inside",
				     "c: uptodate only at write end",
				     "d: write end sets uptodate+dirty together",
				     "d: no uptodate bookkeeping when PF_UPTODATE",
				     "e: dirty runs" };
	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			unsigned before = tu_failed;
			rules[r](&shapes[s]);
			printf("rule %s [%s]: %s\n", rule_names[r], shapes[s].name,
			       tu_failed == before ? "ok" : "FAILED");
		}
	}
	env_close(&e512);
	env_close(&e4k);

	unsigned before = tu_failed;
	api_dirty_runs_only();
	printf("api: only dirty blocks written, in runs: %s\n", tu_failed == before ? "ok" : "FAILED");
	before = tu_failed;
	api_truncate_punch_clear_dirty();
	printf("api: truncate/punch clear dirty blocks: %s\n", tu_failed == before ? "ok" : "FAILED");
	before = tu_failed;
	api_partial_block_reads(512);
	api_partial_block_reads(4096);
	printf("api: partial block reads zero-filled: %s\n", tu_failed == before ? "ok" : "FAILED");
	before = tu_failed;
	write_path_midcopy(512);
	write_path_midcopy(4096);
	printf("write path: not uptodate between zeroing and copy: %s\n", tu_failed == before ? "ok" : "FAILED");

	test_rmdir(dir);
	return test_done();
}
