/*
 * test_rmw.c - deferred read-modify-write of partly written blocks that
 * hold data on the device:
 *
 *   - a partial overwrite, then a read of the block: no device read at
 *     write time; the read merges (one read) and returns the right bytes
 *   - a partial overwrite, then writeback: fsync (or the flusher on its
 *     own, or memory pressure) reads and merges once; the device holds the
 *     right bytes
 *   - neighbouring writes that complete the block: nothing is ever read
 *   - a write that would leave two disjoint partial ranges in one block
 *     reads then (once), and the result is right
 *   - PC_DSYNC partial overwrites read at write time and are durable
 *   - PC_CFG_NO_DEFERRED_RMW reads at write time
 *   - nothing is read for the uncovered part of a block in a hole or past
 *     the end of the file
 *
 * Each case runs with 4 KiB blocks and again with 512-byte blocks (the
 * cases _bs512, skipped where the file system refuses 512-byte direct
 * I/O).  Every case starts from a file written with plain pwrite + fsync,
 * opened in a fresh cache (read-ahead off so that device reads are only
 * those the case causes), and checks the backing file with plain O_DIRECT
 * reads.
 */
#include "testutil.h"

#include "api/internal.h"

#include <linux/falloc.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

TEST_SCRATCH_DIR("rmw")

/* ------------------------------------------------------------ fixture */

#define FILE_SIZE (64 * KiB)

struct fx {
	struct pc_cache *c;
	struct pc_file *h;
	char path[4200];
	uint8_t *model; /* what the file must hold */
	size_t size;
	size_t bs;
};

static unsigned fx_seq;
static unsigned fx_expire_ms = 60000; /* dirty_expire_ms of the next fx_open */
static unsigned fx_edge_expire_ms = 60000; /* edge_expire_ms of the next fx_open */

/* A file of `size` bytes of known data, written and synced with plain I/O,
 * then opened in a fresh cache.  False if the block size is refused. */
static bool fx_open(struct fx *x, size_t bs, size_t size, unsigned cfg_flags, size_t memory_limit)
{
	memset(x, 0, sizeof(*x));
	x->bs = bs;
	x->size = size;
	char name[64];
	snprintf(name, sizeof(name), "rmw%u", fx_seq++);
	test_path(x->path, sizeof(x->path), dir, name);
	x->model = malloc(size + 64 * KiB);
	REQUIRE(x->model);
	tu_fill_pattern(x->model, size, 0xD0 + fx_seq, 0);
	tu_write_file(x->path, x->model, size);
	struct pc_config cfg = tu_config(memory_limit ? memory_limit : 64 * MiB);
	if (memory_limit && memory_limit < 4 * MiB)
		cfg.max_folio_size = 64 * KiB;
	cfg.block_size = bs;
	cfg.readahead_max_bytes = 0;
	cfg.dirty_expire_ms = fx_expire_ms;
	cfg.edge_expire_ms = fx_edge_expire_ms;
	cfg.flags = cfg_flags;
	x->c = tu_cache_new(&cfg);
	x->h = pc_open(x->c, x->path, O_RDWR, 0);
	if (!x->h) {
		REQUIRE(errno == EINVAL);
		pc_cache_destroy(x->c);
		free(x->model);
		return false;
	}
	return true;
}

/* fx_open, or the case is skipped: the file system refuses block size bs. */
static void fx_start(struct fx *x, size_t bs, size_t size, unsigned cfg_flags, size_t memory_limit)
{
	if (!fx_open(x, bs, size, cfg_flags, memory_limit))
		TEST_SKIP_UNSUPPORTED("the file system refuses this block size for direct I/O");
}

static void fx_close(struct fx *x)
{
	CHECK(pc_close(x->h) == 0);
	CHECK(pc_cache_destroy(x->c) == 0);
	CHECK(tu_verify_disk(x->path, x->model, x->size));
	unlink(x->path);
	free(x->model);
}

/* pc_pwrite new data at [off, off+len) and mirror it in the model. */
static ssize_t fx_write(struct fx *x, uint64_t off, size_t len, int flags, uint64_t seed)
{
	uint8_t *b = x->model + off;
	tu_fill_pattern(b, len, seed, off);
	if (off + len > x->size)
		x->size = off + len;
	return pc_pwrite(x->h, b, len, (off_t)off, flags);
}

static bool fx_read_check(struct fx *x, uint64_t off, size_t len)
{
	uint8_t *b = malloc(len);
	REQUIRE(b);
	size_t want = off >= x->size ? 0 : (x->size - off < len ? x->size - off : len);
	ssize_t r = pc_pread(x->h, b, len, (off_t)off, 0);
	bool ok = r == (ssize_t)want && memcmp(b, x->model + off, want) == 0;
	if (!ok)
		fprintf(stderr, "   read %llu+%zu: got %zd (want %zu) or wrong bytes\n", (unsigned long long)off, len, r,
			want);
	free(b);
	return ok;
}

/* Scale offsets given for 4 KiB blocks to other block sizes, inside the
 * block at `base` (so 512-byte blocks are tested in the middle of a
 * page). */
struct geo {
	size_t bs;
	uint64_t base;
};

static struct geo geo_of(size_t bs)
{
	return (struct geo){ bs, bs == 4096 ? 0 : 5 * bs };
}

static uint64_t at(const struct geo *g, uint64_t off4k)
{
	return g->base + off4k * g->bs / 4096;
}

static size_t ln(const struct geo *g, size_t len4k)
{
	size_t l = len4k * g->bs / 4096;
	return l ? l : 1;
}

/* ------------------------------------- the checks, for one block size */

/* A partial overwrite, then a read of the block: no device read at write
 * time; the read merges (one read) and returns the right bytes. */
static void read_merges_partial_overwrite(size_t bs, const struct geo *g)
{
	for (int uncached = 0; uncached < 2; uncached++) {
		struct fx x;
		fx_start(&x, bs, FILE_SIZE, 0, 0);
		struct pc_stats s0 = tu_stats(x.c);
		CHECK(fx_write(&x, at(g, 1000), ln(g, 100), uncached ? PC_DONTCACHE : 0, 1) == (ssize_t)ln(g, 100));
		struct pc_stats s1 = tu_stats(x.c);
		CHECK(s1.deferred_rmw == s0.deferred_rmw + 1);
		CHECK(s1.dev_read_ios == s0.dev_read_ios);
		struct pc_stats fs;
		pc_file_stats(x.h, &fs);
		CHECK(fs.deferred_rmw == 1);
		CHECK(fx_read_check(&x, g->base, bs));
		struct pc_stats s2 = tu_stats(x.c);
		printf("   %s: read of the block: %llu device read(s), %llu merge(s)\n", uncached ? "PC_DONTCACHE" : "buffered",
		       (unsigned long long)(s2.dev_read_ios - s1.dev_read_ios),
		       (unsigned long long)(s2.rmw_reads - s1.rmw_reads));
		CHECK(s2.dev_read_ios == s1.dev_read_ios + 1);
		CHECK(s2.rmw_reads == s1.rmw_reads + 1);
		CHECK(fx_read_check(&x, g->base, bs)); /* now a hit */
		CHECK(pc_fsync(x.h) == 0);
		struct pc_stats s3 = tu_stats(x.c);
		CHECK(s3.dev_read_ios == s2.dev_read_ios);
		CHECK(s3.rmw_reads == s2.rmw_reads);
		CHECK(tu_verify_disk(x.path, x.model, x.size));
		fx_close(&x);
	}
}

/* A partial overwrite, then writeback: fsync, the flusher on its own or
 * memory pressure reads and merges once; the device holds the right bytes. */
static void writeback_merges_partial_overwrite(size_t bs, const struct geo *g)
{
	/* fsync merges. */
	struct fx x;
	fx_start(&x, bs, FILE_SIZE, 0, 0);
	CHECK(fx_write(&x, at(g, 1000), ln(g, 100), 0, 2) == (ssize_t)ln(g, 100));
	struct pc_stats s = tu_stats(x.c);
	CHECK(s.dev_read_ios == 0 && s.deferred_rmw == 1);
	CHECK(pc_fsync(x.h) == 0);
	s = tu_stats(x.c);
	CHECK(s.rmw_reads == 1);
	CHECK(s.dev_read_ios == 1);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	CHECK(fx_read_check(&x, 0, FILE_SIZE)); /* the rest is read now */
	fx_close(&x);

	/* The flusher on its own (age), not the writer.  A deferred partial
	 * block waits edge_expire_ms for a neighbour to complete it before
	 * background writeback reads and merges it (pagecache.h,
	 * edge_expire_ms): short here, and longer than the dirty expiry. */
	fx_expire_ms = 100;
	fx_edge_expire_ms = 300;
	bool opened = fx_open(&x, bs, FILE_SIZE, 0, 0);
	fx_expire_ms = 60000;
	fx_edge_expire_ms = 60000;
	if (!opened)
		TEST_SKIP_UNSUPPORTED("the file system refuses this block size for direct I/O");
	uint64_t t0 = tu_now_ms();
	CHECK(fx_write(&x, at(g, 1000), ln(g, 100), 0, 3) == (ssize_t)ln(g, 100));
	s = tu_stats(x.c);
	CHECK(s.dev_read_ios == 0);
	CHECK(TU_POLL(tu_stats(x.c).dirty_bytes == 0 && tu_stats(x.c).writeback_bytes == 0, 5000));
	uint64_t waited = tu_now_ms() - t0;
	printf("   flusher merged and wrote the partial block after %llu ms (dirty expiry 100, partial wait 300)\n",
	       (unsigned long long)waited);
	CHECK(waited >= 250);
	s = tu_stats(x.c);
	CHECK(s.rmw_reads == 1);
	CHECK(s.dev_read_ios == 1);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);

	/* Memory pressure: 1 MiB of cache, 4 MiB of partly written blocks
	 * (one per 4 KiB page): the flusher merges, eviction frees. */
	const size_t big = 4 * MiB, n = big / 4096;
	fx_start(&x, bs, big, 0, 1 * MiB);
	uint64_t inblk = at(g, 1000) - g->base; /* offset in the block */
	for (size_t i = 0; i < n; i++) {
		uint64_t off = i * 4096 + (g->base % 4096) + inblk;
		if (fx_write(&x, off, ln(g, 100), 0, 100 + i) != (ssize_t)ln(g, 100)) {
			CHECK(0);
			break;
		}
	}
	CHECK(pc_fsync(x.h) == 0);
	s = tu_stats(x.c);
	printf("   pressure: %zu partial writes, deferred %llu, merges %llu, device reads %llu, evictions %llu\n", n,
	       (unsigned long long)s.deferred_rmw, (unsigned long long)s.rmw_reads,
	       (unsigned long long)s.dev_read_ios, (unsigned long long)s.evictions);
	CHECK(s.deferred_rmw == n);
	CHECK(s.rmw_reads == n);
	CHECK(s.dev_read_ios == n);
	CHECK(s.evictions > 0);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	CHECK(fx_read_check(&x, 0, big));
	fx_close(&x);
}

/* Neighbouring writes that complete the block: nothing is ever read. */
static void completed_block_never_read(size_t bs, const struct geo *g)
{
	for (int uncached = 0; uncached < 2; uncached++) {
		int fl = uncached ? PC_DONTCACHE : 0;
		struct fx x;
		fx_start(&x, bs, FILE_SIZE, 0, 0);
		if (!uncached) {
			/* [1000,2500), then [2500,4096) and [0,1000) */
			CHECK(fx_write(&x, at(g, 1000), at(g, 2500) - at(g, 1000), fl, 4) > 0);
			CHECK(fx_write(&x, at(g, 2500), at(g, 4096) - at(g, 2500), fl, 5) > 0);
			CHECK(fx_write(&x, at(g, 0), at(g, 1000) - at(g, 0), fl, 6) > 0);
		} else {
			/* Uncached, two pieces: the second marks the block
			 * completed, so the flusher may take it at once. */
			CHECK(fx_write(&x, at(g, 1000), at(g, 4096) - at(g, 1000), fl, 4) > 0);
			CHECK(fx_write(&x, at(g, 0), at(g, 1000) - at(g, 0), fl, 6) > 0);
		}
		struct pc_stats s = tu_stats(x.c);
		CHECK(s.deferred_rmw == 1);
		CHECK(fx_read_check(&x, g->base, bs)); /* complete: a hit */
		CHECK(pc_fsync(x.h) == 0);
		s = tu_stats(x.c);
		printf("   %s: device reads %llu, merges %llu, cached after fsync %llu\n",
		       uncached ? "PC_DONTCACHE" : "buffered", (unsigned long long)s.dev_read_ios,
		       (unsigned long long)s.rmw_reads, (unsigned long long)s.cached_bytes);
		CHECK(s.dev_read_ios == 0);
		CHECK(s.rmw_reads == 0);
		CHECK(tu_verify_disk(x.path, x.model, x.size));
		fx_close(&x);
	}
	/* Two uncached neighbours, each with one partial edge in the block:
	 * no read, and the block is dropped once both are written. */
	struct fx x;
	fx_start(&x, bs, FILE_SIZE, 0, 0);
	uint64_t mid = at(g, 1000) + 4 * bs;
	uint64_t a_end = (mid + bs - 1) / bs * bs + 2 * bs, b_start = mid / bs * bs - 2 * bs;
	CHECK(fx_write(&x, mid, a_end - mid, PC_DONTCACHE, 7) > 0);
	CHECK(fx_write(&x, b_start, mid - b_start, PC_DONTCACHE, 8) > 0);
	CHECK(pc_fsync(x.h) == 0);
	struct pc_stats s = tu_stats(x.c);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(s.edge_completed == 1);
	CHECK(s.cached_bytes == 0);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);
}

/* A write that would leave two disjoint partial ranges in one block reads
 * then (once), and the result is right; overlapping and adjacent ranges
 * stay deferred. */
static void disjoint_partial_ranges_read_at_write(size_t bs, const struct geo *g)
{
	struct fx x;
	fx_start(&x, bs, FILE_SIZE, 0, 0);
	CHECK(fx_write(&x, at(g, 100), ln(g, 100), 0, 9) > 0);
	struct pc_stats s1 = tu_stats(x.c);
	CHECK(s1.dev_read_ios == 0 && s1.deferred_rmw == 1);
	CHECK(fx_write(&x, at(g, 3000), ln(g, 100), 0, 10) > 0);
	struct pc_stats s2 = tu_stats(x.c);
	CHECK(s2.dev_read_ios == 1);
	CHECK(s2.rmw_reads == 1);
	CHECK(fx_read_check(&x, g->base, bs));
	CHECK(pc_fsync(x.h) == 0);
	struct pc_stats s3 = tu_stats(x.c);
	CHECK(s3.dev_read_ios == 1);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);
	/* Overlapping and adjacent ranges stay deferred. */
	fx_start(&x, bs, FILE_SIZE, 0, 0);
	CHECK(fx_write(&x, at(g, 1000), at(g, 2000) - at(g, 1000), 0, 11) > 0);
	CHECK(fx_write(&x, at(g, 1500), at(g, 2500) - at(g, 1500), 0, 12) > 0); /* overlaps */
	CHECK(fx_write(&x, at(g, 500), at(g, 1000) - at(g, 500), 0, 13) > 0);   /* adjacent */
	s1 = tu_stats(x.c);
	CHECK(s1.dev_read_ios == 0);
	CHECK(pc_fsync(x.h) == 0);
	s2 = tu_stats(x.c);
	CHECK(s2.rmw_reads == 1 && s2.dev_read_ios == 1);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);
}

/* PC_DSYNC partial overwrites read at write time and are durable on
 * return. */
static void dsync_partial_overwrite_reads_at_write(size_t bs, const struct geo *g)
{
	for (int uncached = 0; uncached < 2; uncached++) {
		struct fx x;
		fx_start(&x, bs, FILE_SIZE, 0, 0);
		int fl = PC_DSYNC | (uncached ? PC_DONTCACHE : 0);
		CHECK(fx_write(&x, at(g, 1000), ln(g, 100), fl, 14) == (ssize_t)ln(g, 100));
		struct pc_stats s = tu_stats(x.c);
		CHECK(s.deferred_rmw == 0);
		CHECK(s.dev_read_ios == 1);
		CHECK(s.dirty_bytes == 0);
		CHECK(tu_verify_disk(x.path, x.model, x.size));
		CHECK(fx_read_check(&x, g->base, bs));
		fx_close(&x);
	}
}

/* PC_CFG_NO_DEFERRED_RMW reads at write time. */
static void no_deferred_rmw_reads_at_write(size_t bs, const struct geo *g)
{
	struct fx x;
	fx_start(&x, bs, FILE_SIZE, PC_CFG_NO_DEFERRED_RMW, 0);
	CHECK(fx_write(&x, at(g, 1000), ln(g, 100), 0, 15) == (ssize_t)ln(g, 100));
	struct pc_stats s = tu_stats(x.c);
	CHECK(s.deferred_rmw == 0);
	CHECK(s.dev_read_ios == 1);
	CHECK(fx_read_check(&x, g->base, bs));
	CHECK(pc_fsync(x.h) == 0);
	s = tu_stats(x.c);
	CHECK(s.dev_read_ios == 1);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);
}

/* Nothing is read for the uncovered part of a block in a hole or past the
 * end of the file. */
static void hole_or_past_eof_never_read(size_t bs, const struct geo *g)
{
	(void)g;
	struct fx x;
	/* A 6000-byte file (the last block only partly holds data). */
	fx_start(&x, bs, 6000, 0, 0);
	uint64_t last = 6000 / bs * bs; /* start of the block holding EOF */
	/* Overwrite the last block up to EOF: the rest of it is past EOF. */
	CHECK(fx_write(&x, last, 6000 - last, 0, 16) > 0);
	/* Extend it: a block past EOF partly written. */
	CHECK(fx_write(&x, 12000, 100, 0, 17) > 0);
	memset(x.model + 6000, 0, 6000);
	CHECK(pc_fsync(x.h) == 0);
	struct pc_stats s = tu_stats(x.c);
	printf("   overwrite up to EOF + write past EOF: device reads %llu, merges %llu, deferred %llu\n",
	       (unsigned long long)s.dev_read_ios, (unsigned long long)s.rmw_reads,
	       (unsigned long long)s.deferred_rmw);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);

	/* A hole in the middle of a file: punched with the file system. */
	fx_start(&x, bs, FILE_SIZE, 0, 0);
	int fd = open(x.path, O_RDWR);
	REQUIRE(fd >= 0);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 16384, 16384) == 0);
	close(fd);
	memset(x.model + 16384, 0, 16384);
	/* The cache was opened before the punch and holds nothing of it. */
	CHECK(fx_write(&x, 20000, 100, 0, 18) > 0);
	CHECK(fx_write(&x, 24576 + 5, 10, PC_DONTCACHE, 19) > 0);
	CHECK(pc_fsync(x.h) == 0);
	s = tu_stats(x.c);
	printf("   partial writes into a hole: device reads %llu, deferred %llu\n", (unsigned long long)s.dev_read_ios,
	       (unsigned long long)s.deferred_rmw);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.deferred_rmw == 0);
	CHECK(tu_verify_disk(x.path, x.model, x.size));
	fx_close(&x);
}

/* ------------------------------------------------------ the cases */

/* Whether the file system takes 512-byte direct I/O, asked once (with a
 * file opened and closed in a cache of 512-byte blocks); skip if not. */
static void need_block_size_512(void)
{
	static int ok = -1;
	if (ok < 0) {
		struct fx probe;
		ok = fx_open(&probe, 512, 4096, 0, 0);
		if (ok)
			fx_close(&probe);
	}
	if (!ok)
		TEST_SKIP_UNSUPPORTED("the file system refuses 512-byte direct I/O");
}

/* fn with blocks of bs bytes. */
static void with_block_size(size_t bs, void (*fn)(size_t bs, const struct geo *g))
{
	if (bs == 512)
		need_block_size_512();
	struct geo g = geo_of(bs);
	fn(bs, &g);
}

TEST_CASE(read_merges_partial_overwrite_bs4096)
{
	with_block_size(4096, read_merges_partial_overwrite);
}

TEST_CASE(read_merges_partial_overwrite_bs512)
{
	with_block_size(512, read_merges_partial_overwrite);
}

TEST_CASE(writeback_merges_partial_overwrite_bs4096)
{
	with_block_size(4096, writeback_merges_partial_overwrite);
}

TEST_CASE(writeback_merges_partial_overwrite_bs512)
{
	with_block_size(512, writeback_merges_partial_overwrite);
}

TEST_CASE(completed_block_never_read_bs4096)
{
	with_block_size(4096, completed_block_never_read);
}

TEST_CASE(completed_block_never_read_bs512)
{
	with_block_size(512, completed_block_never_read);
}

TEST_CASE(disjoint_partial_ranges_read_at_write_bs4096)
{
	with_block_size(4096, disjoint_partial_ranges_read_at_write);
}

TEST_CASE(disjoint_partial_ranges_read_at_write_bs512)
{
	with_block_size(512, disjoint_partial_ranges_read_at_write);
}

TEST_CASE(dsync_partial_overwrite_reads_at_write_bs4096)
{
	with_block_size(4096, dsync_partial_overwrite_reads_at_write);
}

TEST_CASE(dsync_partial_overwrite_reads_at_write_bs512)
{
	with_block_size(512, dsync_partial_overwrite_reads_at_write);
}

TEST_CASE(no_deferred_rmw_reads_at_write_bs4096)
{
	with_block_size(4096, no_deferred_rmw_reads_at_write);
}

TEST_CASE(no_deferred_rmw_reads_at_write_bs512)
{
	with_block_size(512, no_deferred_rmw_reads_at_write);
}

TEST_CASE(hole_or_past_eof_never_read_bs4096)
{
	with_block_size(4096, hole_or_past_eof_never_read);
}

TEST_CASE(hole_or_past_eof_never_read_bs512)
{
	with_block_size(512, hole_or_past_eof_never_read);
}
