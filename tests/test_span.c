/*
 * test_span.c - zero-copy spans: pc_read_begin / pc_read_end and
 * pc_write_begin / pc_write_end (include/pagecache.h, "Zero-copy access").
 *
 *   errors     every bad argument and misuse the calls catch (EBADF,
 *              EINVAL, EFBIG, EAGAIN, EPERM after fork, ending twice ...)
 *   read       bytes, length (folio boundary, end of file), hit and miss
 *              counters, PC_DONTCACHE drops only what it created, writes
 *              seen through a held span, a span kept over pc_close
 *   pins       a read span held while its folio is evicted around,
 *              truncated away or punched away, and the memory churned:
 *              the span still holds the old bytes.  Under ASan the span's
 *              bytes are poisoned meanwhile, so any reuse of that memory by
 *              the library (a copy into a new folio, a zero fill) stops
 *              the test with a use-after-poison report.  Also with threads:
 *              spans taken and checked while another thread truncates,
 *              punches and rewrites the file and a third churns memory
 *   write      the exact dirty (and uptodate) blocks after a partial
 *              pc_write_end at a folio's start, middle and end and across
 *              the end of the file, on 512-byte and 4 KiB blocks
 *              (the seed's mkwrite rule: never the whole folio, never past
 *              EOF); what a caller stores past `copied` never becomes file
 *              data (new blocks, clean cached, dirty cached, uncached on
 *              the device, deferred partial blocks, disjoint ones, copied
 *              0), from the cache and from the device; PC_DSYNC durable at
 *              return; PC_DONTCACHE dropped after write-back;
 *              PC_CFG_NO_DEFERRED_RMW; the folio lock against other
 *              writers and truncate, PC_NOWAIT; the dirty throttle; a write
 *              span committed after another thread closed its handle
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <limits.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifdef TU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

static const char *dir;

/* One file, in a cache of its own. */
struct env {
	char path[4300];
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m; /* h's: its folios' block state is looked at */
	size_t bs;
};

/* A fresh file in a fresh cache; false (and a note) when the file system
 * refuses this block size. */
static bool env_open_cfg(struct env *e, const char *name, const struct pc_config *cfg)
{
	memset(e, 0, sizeof(*e));
	e->c = pc_cache_new(cfg);
	REQUIRE(e->c);
	test_path(e->path, sizeof(e->path), dir, name);
	e->h = pc_open(e->c, e->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!e->h && errno == EINVAL && cfg->block_size) {
		printf("  note: block size %zu refused here, skipped\n", cfg->block_size);
		CHECK(pc_cache_destroy(e->c) == 0);
		return false;
	}
	REQUIRE(e->h);
	e->m = e->h->m;
	e->bs = e->m->block_size;
	return true;
}

static void cfg_for(struct pc_config *cfg, size_t bs, size_t max_folio, size_t memory, unsigned flags)
{
	pc_config_init(cfg);
	cfg->memory_limit = memory;
	cfg->max_folio_size = max_folio;
	cfg->block_size = bs;
	cfg->readahead_max_bytes = 0; /* device reads are those a case causes */
	cfg->dirty_expire_ms = 60000; /* no write-back behind the checks */
	cfg->edge_expire_ms = 60000;
	cfg->flags = flags;
}

static bool env_open(struct env *e, const char *name, size_t bs, size_t max_folio, size_t memory, unsigned flags)
{
	struct pc_config cfg;
	cfg_for(&cfg, bs, max_folio, memory, flags);
	return env_open_cfg(e, name, &cfg);
}

static void env_close(struct env *e)
{
	if (e->h)
		CHECK(pc_close(e->h) == 0);
	CHECK(pc_cache_destroy(e->c) == 0);
	unlink(e->path);
}

static struct pc_stats fstats(struct env *e)
{
	struct pc_stats s;
	pc_file_stats(e->h, &s);
	return s;
}

/* Pattern `seed` at [off, off + len) through the cache. */
static void put(struct env *e, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len);
	REQUIRE(b);
	tu_fill_pattern(b, len, seed, off);
	REQUIRE(pc_pwrite(e->h, b, len, (off_t)off, 0) == (ssize_t)len);
	free(b);
}

/* Written back and out of the cache: the next access reads the device. */
static void drop(struct env *e)
{
	CHECK(pc_fsync(e->h) == 0);
	CHECK(pc_fadvise(e->h, 0, 0, POSIX_FADV_DONTNEED) == 0);
}

/* pc_pread of [off, off + len) must return exactly expect[0, len). */
static bool reads_as(struct env *e, uint64_t off, size_t len, const uint8_t *expect)
{
	uint8_t *b = malloc(len);
	REQUIRE(b);
	ssize_t n = pc_pread(e->h, b, len, (off_t)off, 0);
	bool ok = n == (ssize_t)len && memcmp(b, expect, len) == 0;
	if (!ok) {
		size_t i = 0;
		while (n > 0 && i < (size_t)n && i < len && b[i] == expect[i])
			i++;
		fprintf(stderr, "   read at %llu: %zd bytes (expected %zu), first difference at +%zu\n",
			(unsigned long long)off, n, len, i);
	}
	free(b);
	return ok;
}

static bool pattern_is(const uint8_t *p, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != tu_pattern_byte(seed, off + i))
			return false;
	return true;
}

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

static size_t folio_size_at(struct env *e, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(e->m, pos);
	if (!f)
		return 0;
	size_t sz = folio_size(f);
	folio_put(e->c, f);
	return sz;
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

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
	struct env e;
	REQUIRE(env_open(&e, "errors", 4096, 64 * KiB, 4 * MiB, 0));
	put(&e, 0, 10000, 1);
	struct pc_span s;

	/* Handles. */
	errno = 0;
	CHECK(pc_read_begin(NULL, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(NULL, 0, 10, 0, &s) == -1 && errno == EBADF);
	struct pc_file *ro = pc_open(e.c, e.path, O_RDONLY, 0);
	struct pc_file *wo = pc_open(e.c, e.path, O_WRONLY, 0);
	struct pc_file *dio = pc_open(e.c, e.path, O_RDWR | O_DIRECT, 0);
	REQUIRE(ro && wo && dio);
	CHECK(pc_write_begin(ro, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(ro, 0, 0, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(wo, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(wo, 0, 0, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(ro, 0, 10, 0, &s) == 10);
	pc_read_end(&s);
	CHECK(pc_write_begin(wo, 0, 10, 0, &s) == 10);
	CHECK(pc_write_end(&s, 0) == 0);
	/* O_DIRECT handle and PC_DIRECT: a pointer into the cache is not direct I/O. */
	CHECK(pc_read_begin(dio, 0, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(dio, 0, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 10, PC_DIRECT, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, PC_DIRECT, &s) == -1 && errno == EINVAL);
	CHECK(pc_close(dio) == 0);
	CHECK(pc_close(wo) == 0);
	CHECK(pc_close(ro) == 0);
	/* A closed handle (in the quarantine). */
	CHECK(pc_read_begin(ro, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(wo, 0, 10, 0, &s) == -1 && errno == EBADF);

	/* Arguments. */
	CHECK(pc_read_begin(e.h, 0, 10, 0, NULL) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, 0, NULL) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, -1, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, -1, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 10, 0x100, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, 0x100, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, (size_t)SSIZE_MAX + 1, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, (size_t)SSIZE_MAX + 1, 0, &s) == -1 && errno == EINVAL);
	/* A failed begin leaves nothing to end: both end calls say so. */
	CHECK(s.data == NULL && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_write_end(&s, 0) == -1 && errno == EINVAL);
	/* EFBIG at the largest size; a span reaching past it is cut there. */
	off_t max = (off_t)e.m->max_bytes;
	CHECK(pc_write_begin(e.h, max, 1, 0, &s) == -1 && errno == EFBIG);
	CHECK(pc_write_begin(e.h, max + 12345, 1, 0, &s) == -1 && errno == EFBIG);
	CHECK(pc_write_begin(e.h, max - 10, 100, 0, &s) == 10);
	CHECK(pc_write_end(&s, 0) == 0);
	CHECK(pc_size(e.h) == 10000);
	/* len 0, and reads at or past the end: empty spans, ended for free. */
	CHECK(pc_write_begin(e.h, max, 0, 0, &s) == 0 && s.len == 0);
	CHECK(pc_write_end(&s, 1) == -1 && errno == EINVAL);
	CHECK(pc_write_end(&s, 0) == 0);
	CHECK(pc_read_begin(e.h, 5, 0, 0, &s) == 0 && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, 10000, 10, 0, &s) == 0 && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, INT64_MAX, 10, 0, &s) == 0);
	pc_read_end(&s);

	/* Ending: NULL, the wrong kind, twice, too much. */
	pc_read_end(NULL);
	CHECK(pc_write_end(NULL, 0) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 100, 0, &s) == 100);
	CHECK(pc_write_end(&s, 0) == -1 && errno == EINVAL); /* a read span: still open */
	CHECK(s.len == 100 && s.data);
	pc_read_end(&s);
	pc_read_end(&s); /* twice: nothing */
	CHECK(s.data == NULL && s.len == 0);
	/* Every flag but PC_DIRECT is taken. */
	CHECK(pc_read_begin(e.h, 0, 100, PC_NOWAIT | PC_DONTCACHE | PC_DSYNC, &s) == 100);
	pc_read_end(&s);
	CHECK(pc_write_begin(e.h, 100, 50, 0, &s) == 50);
	memset(s.data, 'x', 50);
	CHECK(pc_write_end(&s, 51) == -1 && errno == EINVAL); /* still open */
	CHECK(pc_write_end(&s, 50) == 0);
	CHECK(pc_write_end(&s, 50) == -1 && errno == EINVAL); /* twice */
	pc_read_end(&s);
	uint8_t x[50];
	memset(x, 'x', 50);
	CHECK(reads_as(&e, 100, 50, x));

	/* PC_NOWAIT: not cached. */
	drop(&e);
	CHECK(pc_read_begin(e.h, 4096, 10, PC_NOWAIT, &s) == -1 && errno == EAGAIN);
	pc_read_end(&s);
	env_close(&e);
}

/* In a child of fork(): every begin is EPERM, ending the parent's spans
 * touches nothing (pc_write_end says EPERM). */
static void test_fork(void)
{
	struct env e;
	REQUIRE(env_open(&e, "fork", 4096, 64 * KiB, 4 * MiB, 0));
	put(&e, 0, 8192, 2);
	struct pc_span rs, ws;
	REQUIRE(pc_read_begin(e.h, 0, 4096, 0, &rs) == 4096);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_span s, wcopy;
		int bad = 0;
		bad += !(pc_read_begin(e.h, 0, 10, 0, &s) == -1 && errno == EPERM);
		bad += !(pc_write_begin(e.h, 0, 10, 0, &s) == -1 && errno == EPERM);
		pc_read_end(&rs);
		bad += !(rs.data == NULL);
		/* A write span the parent would hold: as a copy made here. */
		memset(&wcopy, 0, sizeof(wcopy));
		wcopy.priv.state = SPAN_WRITE;
		wcopy.priv.cache = e.c;
		wcopy.priv.len = 10;
		bad += !(pc_write_end(&wcopy, 10) == -1 && errno == EPERM);
		_exit(bad);
	}
	CHECK(tu_wait_child(pid, 65) == 0);
	/* The parent's span is untouched. */
	CHECK(pattern_is(rs.data, 4096, 2, 0));
	pc_read_end(&rs);
	REQUIRE(pc_write_begin(e.h, 0, 10, 0, &ws) == 10);
	CHECK(pc_write_end(&ws, 0) == 0);
	env_close(&e);
}

/* ------------------------------------------------------------------ read */

static void test_read(void)
{
	struct env e;
	REQUIRE(env_open(&e, "read", 4096, 64 * KiB, 8 * MiB, 0));
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
	CHECK(pattern_is(s.data, (size_t)n, 3, 100));
	CHECK(b.dev_read_ios > a.dev_read_ios);
	CHECK(b.miss_bytes - a.miss_bytes == (uint64_t)n && b.hit_bytes == a.hit_bytes);
	pc_read_end(&s);
	/* A hit: no device I/O, counted as a hit. */
	n = pc_read_begin(e.h, 100, 8000, 0, &s);
	struct pc_stats c2 = fstats(&e);
	CHECK(n > 0 && pattern_is(s.data, (size_t)n, 3, 100));
	CHECK(c2.dev_read_ios == b.dev_read_ios);
	CHECK(c2.hit_bytes - b.hit_bytes == (uint64_t)n && c2.miss_bytes == b.miss_bytes);
	pc_read_end(&s);

	/* Cut at the folio's end: 64 KiB folios of the cached data. */
	drop(&e);
	put(&e, 0, 128 * KiB, 4);
	REQUIRE(folio_size_at(&e, 0) == 64 * KiB);
	CHECK(pc_read_begin(e.h, 64 * KiB - 100, 1000, 0, &s) == 100);
	CHECK(pattern_is(s.data, 100, 4, 64 * KiB - 100));
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, 64 * KiB, 1 * MiB, 0, &s) == 64 * KiB);
	pc_read_end(&s);
	/* Cut at the end of the file. */
	CHECK(pc_read_begin(e.h, size - 300, 1000, 0, &s) == 300);
	CHECK(pattern_is(s.data, 300, 3, size - 300));
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, size, 1000, 0, &s) == 0);
	pc_read_end(&s);

	/* Held while the range is written: the span sees it (shared mapping). */
	CHECK(pc_read_begin(e.h, 1000, 100, 0, &s) == 100);
	put(&e, 1000, 100, 5);
	CHECK(pattern_is(s.data, 100, 5, 1000));
	pc_read_end(&s);

	/* PC_NOWAIT on a hit is fine. */
	CHECK(pc_read_begin(e.h, 1000, 100, PC_NOWAIT, &s) == 100);
	pc_read_end(&s);

	/* A span survives pc_close of its handle. */
	CHECK(pc_read_begin(e.h, 2000, 100, 0, &s) == 100);
	CHECK(pc_close(e.h) == 0);
	e.h = NULL;
	CHECK(pattern_is(s.data, 100, 4, 2000));
	pc_read_end(&s);
	env_close(&e);
}

/* PC_DONTCACHE: dropped at pc_read_end when an uncached read made it. */
static void test_read_dontcache(void)
{
	struct env e;
	REQUIRE(env_open(&e, "dontcache", 4096, 64 * KiB, 8 * MiB, 0));
	put(&e, 0, 256 * KiB, 6);
	drop(&e);
	struct pc_span s, s2;
	uint64_t drops0 = tu_stats(e.c).dropbehind_drops;
	ssize_t n = pc_read_begin(e.h, 0, 4096, PC_DONTCACHE, &s);
	CHECK(n == 4096 && pattern_is(s.data, 4096, 6, 0));
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

/* ------------------------------------------------------------------ pins */

enum { PIN_EVICT, PIN_TRUNCATE, PIN_PUNCH, PIN_DONTNEED };
static const char *pin_names[] = { "eviction", "truncate", "punch", "fadvise(DONTNEED)" };

/* Read [from, to) of the file through the cache, all of it (memory churn). */
static void read_through(struct env *e, uint64_t from, uint64_t to)
{
	uint8_t *b = malloc(256 * KiB);
	REQUIRE(b);
	for (uint64_t o = from; o < to; o += 256 * KiB)
		REQUIRE(pc_pread(e->h, b, tu_min_u64(256 * KiB, to - o), (off_t)o, 0) >= 0);
	free(b);
}

/*
 * A read span of pattern A held while its folio is evicted around,
 * truncated or punched away, and the cache's memory reused many times
 * over for other data: the span keeps pattern A.  The span's bytes are
 * poisoned (ASan) while the cache churns.
 */
static void test_pin(int how)
{
	struct env e;
	REQUIRE(env_open(&e, "pin", 4096, 64 * KiB, 2 * MiB, 0));
	const uint64_t fsize = 8 * MiB, at = 192 * KiB;
	uint8_t *data = malloc(fsize);
	REQUIRE(data);
	tu_fill_pattern(data, fsize, 7, 0);
	CHECK(pc_close(e.h) == 0);
	tu_write_file(e.path, data, fsize);
	e.h = pc_open(e.c, e.path, O_RDWR, 0);
	REQUIRE(e.h);
	e.m = e.h->m;

	struct pc_span s;
	ssize_t n = pc_read_begin(e.h, (off_t)at, 64 * KiB, 0, &s);
	REQUIRE(n > 0);
	CHECK(pattern_is(s.data, (size_t)n, 7, at));
	struct pc_folio *pinned = s.priv.folio;
	POISON(s.data, (size_t)n);
	uint64_t ev0 = tu_stats(e.c).evictions;
	bool stays = how == PIN_EVICT || how == PIN_DONTNEED; /* in the file */
	if (how == PIN_TRUNCATE)
		CHECK(pc_ftruncate(e.h, 0) == 0);
	else if (how == PIN_PUNCH)
		CHECK(pc_fallocate(e.h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 * MiB) == 0);
	else if (how == PIN_DONTNEED)
		CHECK(pc_fadvise(e.h, 0, 0, POSIX_FADV_DONTNEED) == 0);
	if (stays) {
		/* Everything but the span's own bytes, read four times over. */
		for (int i = 0; i < 4; i++) {
			read_through(&e, 0, at);
			read_through(&e, at + (uint64_t)n, fsize);
		}
	} else {
		/* New data where the span's folio was, then churn. */
		put(&e, 0, how == PIN_TRUNCATE ? fsize : 1 * MiB, 8);
		CHECK(pc_fsync(e.h) == 0);
		for (int i = 0; i < 4; i++)
			read_through(&e, 1 * MiB, fsize);
	}
	struct pc_stats st = tu_stats(e.c);
	CHECK(st.evictions - ev0 > 2 * MiB / (64 * KiB)); /* the memory was reused */
	UNPOISON(s.data, (size_t)n);
	bool kept = pattern_is(s.data, (size_t)n, 7, at);
	if (!kept)
		fprintf(stderr, "   pin under %s: the span's bytes changed\n", pin_names[how]);
	CHECK(kept);
	struct pc_folio *now = mapping_lookup(e.m, at);
	if (stays) {
		CHECK(now == pinned); /* never evicted, nor dropped, while pinned */
	} else {
		CHECK(now != pinned); /* out of the file ... */
		uint8_t *expect = malloc(64 * KiB);
		REQUIRE(expect);
		tu_fill_pattern(expect, (size_t)n, 8, at);
		CHECK(reads_as(&e, at, (size_t)n, expect)); /* ... which reads the new data */
		free(expect);
	}
	if (now)
		folio_put(e.c, now);
	CHECK(st.cached_bytes <= 2 * MiB);
	pc_read_end(&s);
	env_close(&e);
	free(data);
}

/*
 * With threads: spans held while another thread truncates or punches the
 * file away and rewrites it, and a third churns memory with another file.
 * Spans are begun only when the file is whole (`gate`: not between a
 * punch and its rewrite, where a span of the hole would see the rewrite
 * land in it, as through a shared mapping), so every span shows pattern 9,
 * and keeps showing it while the folio is taken out of the file, the file
 * written anew and the memory reused.  Its bytes are poisoned while held.
 */
struct pin_mt {
	struct env *e;
	struct pc_file *other;
	pthread_rwlock_t gate;
	_Atomic bool stop;
	_Atomic unsigned long spans, bad, truncates;
};

static void *pin_mt_reader(void *arg)
{
	struct pin_mt *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pc_span s;
		uint64_t at = 64 * KiB * (atomic_load(&p->spans) % 16);
		pthread_rwlock_rdlock(&p->gate);
		ssize_t n = pc_read_begin(p->e->h, (off_t)at, 64 * KiB, 0, &s);
		pthread_rwlock_unlock(&p->gate);
		if (n <= 0) {
			atomic_fetch_add(&p->bad, 1);
			break;
		}
		bool ok = pattern_is(s.data, (size_t)n, 9, at);
		POISON(s.data, (size_t)n);
		for (int i = 0; i < 20; i++)
			sched_yield();
		UNPOISON(s.data, (size_t)n);
		if (!ok || !pattern_is(s.data, (size_t)n, 9, at))
			atomic_fetch_add(&p->bad, 1);
		atomic_fetch_add(&p->spans, 1);
		pc_read_end(&s);
	}
	return NULL;
}

static void *pin_mt_churn(void *arg)
{
	struct pin_mt *p = arg;
	uint8_t *b = malloc(128 * KiB);
	REQUIRE(b);
	for (uint64_t i = 0; !atomic_load(&p->stop); i++) {
		uint64_t off = (i % 32) * 128 * KiB;
		tu_fill_pattern(b, 128 * KiB, 10 + i, off);
		REQUIRE(pc_pwrite(p->other, b, 128 * KiB, (off_t)off, 0) == (ssize_t)(128 * KiB));
		if (i % 8 == 7)
			REQUIRE(pc_fsync(p->other) == 0);
	}
	free(b);
	return NULL;
}

static void test_pin_threads(void)
{
	struct env e;
	REQUIRE(env_open(&e, "pinmt", 4096, 64 * KiB, 2 * MiB, 0));
	char other_path[4400];
	snprintf(other_path, sizeof(other_path), "%s.other", e.path);
	struct pin_mt p = { .e = &e };
	pthread_rwlock_init(&p.gate, NULL);
	p.other = pc_open(e.c, other_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(p.other);
	put(&e, 0, 1 * MiB, 9);
	pthread_t r, ch;
	REQUIRE(pthread_create(&r, NULL, pin_mt_reader, &p) == 0);
	REQUIRE(pthread_create(&ch, NULL, pin_mt_churn, &p) == 0);
	double until = tu_now_s() + (TU_SANITIZED ? 3.0 : 1.5);
	for (unsigned i = 0; tu_now_s() < until; i++) {
		/* Whole folios only go: a truncate to 0, a punch of all of it. */
		pthread_rwlock_wrlock(&p.gate);
		if (i % 2)
			CHECK(pc_ftruncate(e.h, 0) == 0);
		else
			CHECK(pc_fallocate(e.h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 * MiB) == 0);
		put(&e, 0, 1 * MiB, 9);
		pthread_rwlock_unlock(&p.gate);
		atomic_fetch_add(&p.truncates, 1);
		usleep(1000);
	}
	atomic_store(&p.stop, true);
	pthread_join(r, NULL);
	pthread_join(ch, NULL);
	printf("  threads: %lu spans checked across %lu truncates/punches, %lu bad\n", atomic_load(&p.spans),
	       atomic_load(&p.truncates), atomic_load(&p.bad));
	CHECK(atomic_load(&p.bad) == 0);
	CHECK(atomic_load(&p.spans) > 0 && atomic_load(&p.truncates) > 0);
	CHECK(pc_close(p.other) == 0);
	pthread_rwlock_destroy(&p.gate);
	unlink(other_path);
	env_close(&e);
}

/* ----------------------------------------------------------------- write */

static void test_write_basic(void)
{
	struct env e;
	REQUIRE(env_open(&e, "wbasic", 4096, 64 * KiB, 8 * MiB, 0));
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
static void test_dirty_ranges(size_t bs)
{
	struct env e;
	char name[32];
	snprintf(name, sizeof(name), "dirty%zu", bs);
	if (!env_open(&e, name, bs, 8 * bs < 4096 ? 4096 : 8 * bs, 8 * MiB, 0))
		return;
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

/*
 * What a caller stores past `copied` never becomes file data, whatever the
 * span covered: new blocks, clean cached data, dirty cached data, data on
 * the device only, a deferred partial block, one that cannot join it.
 * Each case is checked from the cache, then from the device.
 */
static void test_short_no_garbage(size_t bs, unsigned cfg_flags, int span_flags)
{
	struct env e;
	char name[48];
	snprintf(name, sizeof(name), "short%zu-%x-%x", bs, cfg_flags, (unsigned)span_flags);
	if (!env_open(&e, name, bs, 8 * bs < 4096 ? 4096 : 8 * bs, 8 * MiB, cfg_flags))
		return;
	const size_t fsz = 8 * bs;
	const uint64_t total = 8 * fsz;
	uint8_t *expect = calloc(1, total);
	REQUIRE(expect);
	struct pc_stats s0 = fstats(&e);
	/* The device holds pattern 30 everywhere but the last folio. */
	put(&e, 0, 7 * fsz, 30);
	drop(&e);
	tu_fill_pattern(expect, 7 * fsz, 30, 0);

	/* 0: new blocks past EOF; then the file is extended: zeros after the cut. */
	uint64_t P = 7 * fsz;
	size_t c;
	CHECK(span_write_n(&e, P, fsz, span_flags, 0, 31, bs + 13, &c) == 0);
	tu_fill_pattern(expect + P, c, 31, P);
	CHECK(pc_ftruncate(e.h, (off_t)total) == 0);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 1: clean cached data. */
	P = 0;
	read_through(&e, P, P + fsz);
	CHECK(span_write_n(&e, P, fsz, span_flags, 0, 32, 2 * bs + 5, &c) == 0);
	tu_fill_pattern(expect + P, c, 32, P);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 2: dirty cached data. */
	P = fsz;
	put(&e, P, fsz, 33);
	tu_fill_pattern(expect + P, fsz, 33, P);
	CHECK(span_write_n(&e, P + 1, fsz - 1, span_flags, 0, 34, 3 * bs + 7, &c) == 0);
	tu_fill_pattern(expect + P + 1, c, 34, P + 1);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 3: data only on the device (the folio is new, nothing read). */
	P = 2 * fsz;
	CHECK(span_write_n(&e, P + 7, fsz - 7, span_flags, 0, 35, bs / 2 + 3 * bs, &c) == 0);
	tu_fill_pattern(expect + P + 7, c, 35, P + 7);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 4: a deferred partial write in block 1, wholly past the cut.  The
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

	/* 5: the cut lands in a block holding a deferred partial write that
	 * the written bytes do not touch (two ranges: read to join them). */
	P = 4 * fsz;
	CHECK(span_write(&e, P, fsz, 0, fsz, 30, bs) == 0);
	tu_fill_pattern(ten, 10, 38, P + bs + 40);
	CHECK(pc_pwrite(e.h, ten, 10, (off_t)(P + bs + 40), span_flags & ~PC_NOWAIT) == 10);
	memcpy(expect + P + bs + 40, ten, 10);
	CHECK(span_write_n(&e, P + bs, 2 * bs, span_flags, 0, 39, 20, &c) == 0);
	tu_fill_pattern(expect + P + bs, c, 39, P + bs);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 6: copied 0 over dirty data: nothing changes. */
	P = 5 * fsz;
	put(&e, P, fsz, 40);
	tu_fill_pattern(expect + P, fsz, 40, P);
	uint64_t dirty = fstats(&e).dirty_bytes;
	CHECK(span_write(&e, P + 3, fsz - 3, span_flags, 0, 41, 0) == 0);
	CHECK(fstats(&e).dirty_bytes == dirty);
	CHECK(reads_as(&e, P, fsz, expect + P));

	/* 7: the cut on a block boundary. */
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

/* PC_DSYNC: durable at return (the backing file has it, read directly). */
static void test_write_dsync(void)
{
	struct env e;
	REQUIRE(env_open(&e, "dsync", 4096, 64 * KiB, 8 * MiB, 0));
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
static void test_write_dontcache(void)
{
	struct env e;
	REQUIRE(env_open(&e, "wdontcache", 4096, 64 * KiB, 8 * MiB, 0));
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
static void test_write_throttle(void)
{
	struct env e;
	struct pc_config cfg;
	cfg_for(&cfg, 4096, 64 * KiB, 4 * MiB, 0);
	cfg.dirty_limit_bytes = 512 * KiB;
	cfg.dirty_expire_ms = 0;
	REQUIRE(env_open_cfg(&e, "throttle", &cfg));
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
	int what; /* 0: pc_pwrite into the folio, 1: pc_ftruncate, 2: NOWAIT calls */
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

static void test_write_lock(void)
{
	struct env e;
	if (!env_open(&e, "wlock", 512, 4096, 8 * MiB, 0))
		return;
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

static void test_write_close(void)
{
	struct env e;
	REQUIRE(env_open(&e, "wclose", 4096, 64 * KiB, 8 * MiB, 0));
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

/* ------------------------------------------------------------------ main */

#define RUN(call)                                                                                \
	do {                                                                                     \
		unsigned before_ = tu_failed;                                                    \
		call;                                                                            \
		printf("%s: %s\n", #call, tu_failed == before_ ? "ok" : "FAILED");               \
		fflush(stdout);                                                                  \
	} while (0)

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_exit_guard();
	tu_watchdog("test_span", TU_SANITIZED ? 600 : 300);
	dir = test_dir("span");
	RUN(test_errors());
	RUN(test_fork());
	RUN(test_read());
	RUN(test_read_dontcache());
	RUN(test_pin(PIN_EVICT));
	RUN(test_pin(PIN_TRUNCATE));
	RUN(test_pin(PIN_PUNCH));
	RUN(test_pin(PIN_DONTNEED));
	RUN(test_pin_threads());
	RUN(test_write_basic());
	RUN(test_dirty_ranges(512));
	RUN(test_dirty_ranges(4096));
	RUN(test_short_no_garbage(512, 0, 0));
	RUN(test_short_no_garbage(4096, 0, 0));
	RUN(test_short_no_garbage(4096, 0, PC_DONTCACHE));
	RUN(test_short_no_garbage(512, 0, PC_DSYNC));
	RUN(test_short_no_garbage(512, PC_CFG_NO_DEFERRED_RMW, 0));
	RUN(test_short_no_garbage(512, PC_CFG_NO_DEFERRED_RMW, PC_NOWAIT));
	RUN(test_write_dsync());
	RUN(test_write_dontcache());
	RUN(test_write_throttle());
	RUN(test_write_lock());
	RUN(test_write_close());
	test_rmdir(dir);
	return test_done();
}
