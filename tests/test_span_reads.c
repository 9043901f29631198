/*
 * test_span_reads.c - zero-copy read spans: pc_read_begin / pc_read_end
 * (include/pagecache.h, "Zero-copy access"): the bytes, the length (cut at
 * the folio's end and at the end of the file), the hit and miss counters,
 * a write seen through a held span, a span kept over pc_close, and
 * PC_DONTCACHE dropping only the folios it read in.
 */
#define _GNU_SOURCE
#include "testutil.h"

TEST_SCRATCH_DIR("span_reads")

#include "span_util.h"

/* Bytes, length, counters; a write seen through a held span, which also
 * outlives its handle. */
TEST_CASE(bytes_length_and_counters)
{
	struct env e;
	env_open(&e, "read", 4096, 64 * KiB, 8 * MiB, 0);
	size_t size = 256 * KiB + 1000;
	put(&e, 0, size, 3);
	drop(&e);
	struct pc_span s;

	/* A miss: read from the device, counted as a miss. */
	struct pc_stats a = fstats(&e);
	ssize_t n = pc_read_begin(e.h, 100, 8000, 0, &s);
	struct pc_stats b = fstats(&e);
	CHECK(n > 0 && n <= 8000 && s.len == (size_t)n);
	CHECK(n == (ssize_t)tu_min_u64(8000, folio_size_at(&e, 100) - 100));
	CHECK(tu_is_pattern(s.data, (size_t)n, 3, 100));
	CHECK(b.dev_read_ios > a.dev_read_ios);
	CHECK(b.miss_bytes - a.miss_bytes == (uint64_t)n && b.hit_bytes == a.hit_bytes);
	pc_read_end(&s);
	/* A hit: no device I/O, counted as a hit. */
	n = pc_read_begin(e.h, 100, 8000, 0, &s);
	struct pc_stats c2 = fstats(&e);
	CHECK(n > 0 && tu_is_pattern(s.data, (size_t)n, 3, 100));
	CHECK(c2.dev_read_ios == b.dev_read_ios);
	CHECK(c2.hit_bytes - b.hit_bytes == (uint64_t)n && c2.miss_bytes == b.miss_bytes);
	pc_read_end(&s);

	/* Cut at the folio's end: 64 KiB folios of the cached data. */
	drop(&e);
	put(&e, 0, 128 * KiB, 4);
	REQUIRE(folio_size_at(&e, 0) == 64 * KiB);
	CHECK(pc_read_begin(e.h, 64 * KiB - 100, 1000, 0, &s) == 100);
	CHECK(tu_is_pattern(s.data, 100, 4, 64 * KiB - 100));
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, 64 * KiB, 1 * MiB, 0, &s) == 64 * KiB);
	pc_read_end(&s);
	/* Cut at the end of the file. */
	CHECK(pc_read_begin(e.h, size - 300, 1000, 0, &s) == 300);
	CHECK(tu_is_pattern(s.data, 300, 3, size - 300));
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, size, 1000, 0, &s) == 0);
	pc_read_end(&s);

	/* Held while the range is written: the span sees it (shared mapping). */
	CHECK(pc_read_begin(e.h, 1000, 100, 0, &s) == 100);
	put(&e, 1000, 100, 5);
	CHECK(tu_is_pattern(s.data, 100, 5, 1000));
	pc_read_end(&s);

	/* PC_NOWAIT on a hit is fine. */
	CHECK(pc_read_begin(e.h, 1000, 100, PC_NOWAIT, &s) == 100);
	pc_read_end(&s);

	/* A span survives pc_close of its handle. */
	CHECK(pc_read_begin(e.h, 2000, 100, 0, &s) == 100);
	CHECK(pc_close(e.h) == 0);
	e.h = NULL;
	CHECK(tu_is_pattern(s.data, 100, 4, 2000));
	pc_read_end(&s);
	env_close(&e);
}

/* PC_DONTCACHE: dropped at pc_read_end when an uncached read made it. */
TEST_CASE(dontcache_drops_only_what_it_read)
{
	struct env e;
	env_open(&e, "dontcache", 4096, 64 * KiB, 8 * MiB, 0);
	put(&e, 0, 256 * KiB, 6);
	drop(&e);
	struct pc_span s, s2;
	uint64_t drops0 = tu_stats(e.c).dropbehind_drops;
	ssize_t n = pc_read_begin(e.h, 0, 4096, PC_DONTCACHE, &s);
	CHECK(n == 4096 && tu_is_pattern(s.data, 4096, 6, 0));
	CHECK(folio_size_at(&e, 0) != 0); /* cached while held */
	pc_read_end(&s);
	CHECK(folio_size_at(&e, 0) == 0);
	CHECK(tu_stats(e.c).dropbehind_drops == drops0 + 1);
	/* Two spans of one uncached folio: the last end drops it. */
	CHECK(pc_read_begin(e.h, 64 * KiB, 100, PC_DONTCACHE, &s) == 100);
	CHECK(pc_read_begin(e.h, 64 * KiB + 100, 100, PC_DONTCACHE, &s2) == 100);
	pc_read_end(&s);
	CHECK(folio_size_at(&e, 64 * KiB) != 0);
	pc_read_end(&s2);
	CHECK(folio_size_at(&e, 64 * KiB) == 0);
	/* A folio cached before stays cached. */
	uint8_t buf[100];
	CHECK(pc_pread(e.h, buf, 100, 128 * KiB, 0) == 100);
	CHECK(pc_read_begin(e.h, 128 * KiB, 100, PC_DONTCACHE, &s) == 100);
	pc_read_end(&s);
	CHECK(folio_size_at(&e, 128 * KiB) != 0);
	/* A cached span of an uncached folio keeps it. */
	CHECK(pc_read_begin(e.h, 192 * KiB, 100, PC_DONTCACHE, &s) == 100);
	CHECK(pc_read_begin(e.h, 192 * KiB, 100, 0, &s2) == 100);
	pc_read_end(&s2);
	pc_read_end(&s);
	CHECK(folio_size_at(&e, 192 * KiB) != 0);
	env_close(&e);
}
