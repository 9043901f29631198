/*
 * test_block_state_uptodate.c - the per-block uptodate rules of
 * ../shared/seeds/iomap-subfolio-block-state.txt, each case written so that
 * it fails on the bug the rule guards against.
 *
 * On real folios of every shape (block_state_util.h), through the
 * block-state calls of src/mem/block_state.c:
 *   - a block becomes uptodate only at write end, once all its bytes are
 *     valid; partial writes keep their valid range until it covers the
 *     block or the device data is merged around it;
 *   - write end sets uptodate and dirty together, in one state-lock round,
 *     and counts the bytes newly dirtied in whole blocks;
 *   - a write into a folio already uptodate does no uptodate bookkeeping.
 * Then through the public API, a reader never sees bytes not yet written:
 *   - a partial write into a new block reads back with zeros (or the old
 *     data) around it;
 *   - caught in the middle of the write path (the source buffer faults;
 *     the check runs in the SIGSEGV handler while the writer holds the
 *     folio between zeroing and copying), the block is not uptodate and a
 *     PC_NOWAIT reader gets EAGAIN instead of the block.
 */
#define _GNU_SOURCE
#include "block_state_util.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

static void open_shapes(void)
{
	block_state_open_shapes("block_state_uptodate");
}

TEST_FIXTURE(open_shapes, block_state_close_shapes)

/* ------------------------------------------------ uptodate at write end */

/*
 * A block becomes uptodate only when all its bytes are valid, at write
 * end.  Bug guarded against (the rule: zeroing part of a block never makes
 * it uptodate, only its data copied in does): write begin zeroed the
 * uncovered part of a new block and marked the whole block uptodate before
 * the data was copied, so a concurrent reader could read the block with
 * the write's bytes not yet there (stale memory).  Here: after the zeroing
 * and before bs_write_end the block is not uptodate; after bs_write_end
 * with head_full/tail_full it is.  A partial write without
 * head_full/tail_full (deferred read-modify-write) leaves the block dirty,
 * not uptodate, with the written bytes as its valid range, and an adjacent
 * write that covers the rest completes it.  (The write_midcopy cases check
 * the same rule in the real write path.)
 */
static void uptodate_at_write_end_on(const struct shape *s)
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

TEST_CASE(block_uptodate_only_at_write_end)
{
	for_each_shape(uptodate_at_write_end_on);
}

/* -------------------------------------- uptodate and dirty set together */

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
 * bs_write_end sets uptodate and dirty together, in one state-lock round,
 * and returns the bytes newly dirtied at block granularity (0 for a
 * rewrite of dirty blocks).  Bugs guarded against (the rules: both bits in
 * one lock round, the dirty count in whole blocks newly dirtied): uptodate
 * and dirty set in two lock rounds (another thread can see a block
 * uptodate but not yet dirty, and it costs a second lock round per write);
 * a dirty count in bytes written rather than blocks (the dirty accounting
 * drifts from the dirty bitmap); counting blocks already dirty again.
 */
static void write_end_together_on(const struct shape *s)
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

TEST_CASE(write_end_sets_uptodate_and_dirty_together)
{
	for_each_shape(write_end_together_on);
}

/* ---------------------------------------- writes into an uptodate folio */

/*
 * When the folio is already uptodate (PF_UPTODATE) the write end does no
 * uptodate bookkeeping, and the folio stays uptodate.  Bug guarded
 * against (the rule: a write into an uptodate folio keeps no per-block
 * uptodate bookkeeping): bookkeeping of partial ranges that cannot exist in an
 * uptodate folio (work under the state lock on every write, and a partly
 * written block of an uptodate folio recorded as "not uptodate, deferred",
 * so that a later reader or the flusher would read the device over data
 * already in memory), or the uptodate state being recomputed, and lost, by
 * a write.
 */
static void uptodate_skip_on(const struct shape *s)
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

TEST_CASE(write_into_uptodate_folio_skips_bookkeeping)
{
	for_each_shape(uptodate_skip_on);
}

/* ---------------------------------- public API: no unwritten bytes read */

/*
 * A reader never sees bytes not yet written: 100 bytes written into the
 * middle of a new block past EOF (and of a block in a hole, and of a block
 * holding data on the device) read back as zeros (or the old data) around
 * the new bytes, from the cache and, after fsync and dropping the cache,
 * from the device.
 */
static void partial_block_reads(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "partial%zu", bs);
	env_open(&e, bs, name);
	uint8_t data[100], *rd = malloc(3 * bs), old[4096];
	REQUIRE(rd);
	tu_fill_pattern(data, sizeof(data), 5, 7);

	/* 1000 bytes on the device first. */
	tu_fill_pattern(old, sizeof(old), 6, 0);
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

TEST_CASE(partial_block_reads_zero_filled_512)
{
	partial_block_reads(512);
}

TEST_CASE(partial_block_reads_zero_filled_4096)
{
	partial_block_reads(4096);
}

/* --------------------------------------- the write path caught mid-copy */

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

static void write_midcopy(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "midcopy%zu", bs);
	env_open(&e, bs, name);
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *page = mmap(NULL, pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(page != MAP_FAILED);
	tu_fill_pattern(page, 100, 8, 11);
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

TEST_CASE(write_midcopy_block_not_readable_512)
{
	write_midcopy(512);
}

TEST_CASE(write_midcopy_block_not_readable_4096)
{
	write_midcopy(4096);
}
