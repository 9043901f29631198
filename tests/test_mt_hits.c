/*
 * test_mt_hits.c - cache hits served without locks (read_hit.c, the
 * lockless index walk of radix.c and the per-thread counters of counter.c).
 *
 *   - the index alone: a writer thread inserts and removes aligned items
 *     of 1 to 512 pages (those of 64 or more are held in interior slots,
 *     and a smaller removal splits them) in a tree with a node pool while
 *     reader threads walk it without the lock; every item a reader gets
 *     for index i must be one that covers i (items encode their range),
 *     and lookups with no writer active agree with the locked walk;
 *   - hits racing eviction and reuse: readers hit random pieces of file A
 *     while another thread drops A's folios (fadvise DONTNEED) and writes
 *     file B, whose different bytes then fill the freed memory; every byte
 *     a reader gets must be A's (a hit that copied from reused memory and
 *     did not notice would return B's bytes);
 *   - the same deterministically: a test hook frees A's folio and refills
 *     its memory with B's bytes after a hit has checked the folio and
 *     before it copies (or between its lookup and its checks); the read
 *     must still return A's bytes (the hit notices, declines, and the full
 *     read path reads A again), whether B's folio is at A's index or far
 *     from it;
 *   - counting: more threads than counter slots hit a file, twice over
 *     (threads exit and their slots are reused); hit_bytes of the cache
 *     and of the file are exactly what was read;
 *   - read-ahead marks: a cold file read sequentially in 4 KiB reads, most
 *     of them hits served without the handle, still goes to the device in
 *     windows (a few large reads), not one read per miss.
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "api/internal.h"
#include "radix_pool_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

TEST_SCRATCH_DIR("mt_hits")

/* ---------------------------------------------------------- the index */

/* An item covering [first, first + n): one per insert, never changed or
 * freed while readers run (the tree does not own items), so whatever a
 * reader finds it can check. */
struct item {
	uint64_t first, n;
};

#define INDEX_PAGES (1u << 14) /* a root of shift 12: folios held in slots of the level below it */

struct index_shared {
	struct rt_root tree;
	pthread_rwlock_t lock;
	struct item *items;
	long nitems;
	_Atomic bool stop;
	_Atomic long bad, looked, found;
};

static void *index_reader(void *arg)
{
	struct index_shared *s = arg;
	uint64_t seed = (uint64_t)pthread_self() | 1;
	while (!atomic_load(&s->stop)) {
		uint64_t i = tu_rand(&seed) % INDEX_PAGES;
		struct item *it;
		do {
			it = rt_lookup_lockless(&s->tree, i, rt_read_begin(&s->tree));
		} while (it == RT_RETRY);
		atomic_fetch_add(&s->looked, 1);
		if (!it)
			continue;
		atomic_fetch_add(&s->found, 1);
		if (it < s->items || it >= s->items + s->nitems || i < it->first || i >= it->first + it->n)
			atomic_fetch_add(&s->bad, 1);
	}
	return NULL;
}

static void index_writer_round(struct index_shared *s, uint64_t *seed, long *next)
{
	uint64_t n = 1ull << (tu_rand(seed) % 10); /* 1..512 pages, aligned: up to 8 interior slots */
	uint64_t first = (tu_rand(seed) % (INDEX_PAGES / n)) * n;
	/* Nodes for the change (the tree allocates none): only the writer
	 * takes from the pool or gives to it. */
	tp_fill(s->tree.pool, 2 * RT_INSERT_MAX_NODES);
	pthread_rwlock_wrlock(&s->lock);
	if (tu_rand(seed) % 2) {
		struct item *it = &s->items[(*next)++];
		it->first = first;
		it->n = n;
		(void)rt_insert(&s->tree, first, n, it); /* -EEXIST: range taken */
	} else {
		rt_remove(&s->tree, first, n);
	}
	pthread_rwlock_unlock(&s->lock);
}

/* Readers walking the index without its lock find only items that cover
 * the index they asked for, while a writer changes the tree. */
TEST_CASE(lockless_walk_finds_only_covering_items)
{
	static struct index_shared s;
	struct rt_pool pool;
	rt_pool_init(&pool, test_lockcx());
	rt_init(&s.tree, &pool);
	pthread_rwlock_init(&s.lock, NULL);
	long rounds = TU_SANITIZED ? 20000 : 200000;
	s.nitems = rounds + INDEX_PAGES;
	s.items = calloc((size_t)s.nitems, sizeof(*s.items));
	REQUIRE(s.items);
	/* Start half full, so that readers find items from the first walk. */
	long next = 0;
	for (uint64_t i = 0; i < INDEX_PAGES; i += 2) {
		struct item *it = &s.items[next++];
		it->first = i;
		it->n = 1;
		tp_fill(&pool, RT_INSERT_MAX_NODES);
		REQUIRE(rt_insert(&s.tree, i, 1, it) == 0);
	}
	pthread_t r[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&r[i], NULL, index_reader, &s) == 0);
	uint64_t seed = test_seed("test_mt_hits index", 7);
	/* Readers must be walking while the tree changes: wait for them to
	 * start, and go on (while items last) until they have looked a lot. */
	while (atomic_load(&s.looked) < 1000)
		sched_yield();
	long want = TU_SANITIZED ? 20000 : 200000;
	for (long k = 0; k < rounds && (k < rounds / 2 || atomic_load(&s.looked) < want); k++)
		index_writer_round(&s, &seed, &next);
	atomic_store(&s.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	CHECK(atomic_load(&s.bad) == 0);
	CHECK(atomic_load(&s.found) > 0);
	/* Quiet tree: the lockless walk agrees with the locked one. */
	long disagree = 0;
	for (uint64_t i = 0; i < INDEX_PAGES + 64; i++)
		if (rt_lookup_lockless(&s.tree, i, rt_read_begin(&s.tree)) != rt_lookup(&s.tree, i))
			disagree++;
	CHECK(disagree == 0);
	printf("index: %ld lookups, %ld found, %ld bad\n", atomic_load(&s.looked), atomic_load(&s.found),
	       atomic_load(&s.bad));
	rt_destroy(&s.tree);
	tp_destroy(&pool);
	pthread_rwlock_destroy(&s.lock);
	free(s.items);
}

/* ------------------------------------------------ eviction and reuse */

#define RACE_SIZE (8u << 20)

/* File A's bytes: tu_pattern_byte(A_SEED, off); file B's: all 0xEE. */
#define A_SEED 0xa11ceu
#define B_BYTE 0xEE

/* A file of `size` bytes, A's (a_pattern) or B's, on the device before a
 * cache sees it. */
static void make_file(const char *path, uint64_t size, bool a_pattern)
{
	uint8_t *buf = malloc(size);
	REQUIRE(buf);
	if (a_pattern)
		tu_fill_pattern(buf, size, A_SEED, 0);
	else
		memset(buf, B_BYTE, size);
	tu_write_file(path, buf, size);
	free(buf);
}

struct race_shared {
	struct pc_file *a, *b;
	_Atomic bool stop;
	_Atomic long bad, reads;
};

/* Whole-folio reads (256 KiB, the default max_folio_size), so that each
 * copy is long enough for eviction and reuse to land in the middle of it. */
#define HIT_READ (256u << 10)

static void *race_reader(void *arg)
{
	struct race_shared *s = arg;
	uint64_t seed = (uint64_t)pthread_self() | 1;
	uint8_t *buf = malloc(HIT_READ), *want = malloc(HIT_READ);
	REQUIRE(buf && want);
	while (!atomic_load(&s->stop)) {
		uint64_t off = (tu_rand(&seed) % (RACE_SIZE / HIT_READ)) * HIT_READ;
		ssize_t n = pc_pread(s->a, buf, HIT_READ, (off_t)off, 0);
		if (n != (ssize_t)HIT_READ) {
			atomic_fetch_add(&s->bad, 1);
			continue;
		}
		tu_fill_pattern(want, HIT_READ, A_SEED, off);
		if (memcmp(buf, want, HIT_READ) != 0)
			atomic_fetch_add(&s->bad, 1);
		atomic_fetch_add(&s->reads, 1);
	}
	free(buf);
	free(want);
	return NULL;
}

/* A cache of `mem` bytes with file A open read-only and file B open for
 * writing, each of `size` bytes. */
static struct pc_cache *open_a_and_b(const char *tag, uint64_t size, size_t mem, struct pc_file **a,
				     struct pc_file **b)
{
	char pa[4200], pb[4200], name[64];
	snprintf(name, sizeof(name), "%s-a", tag);
	test_path(pa, sizeof(pa), dir, name);
	snprintf(name, sizeof(name), "%s-b", tag);
	test_path(pb, sizeof(pb), dir, name);
	make_file(pa, size, true);
	make_file(pb, size, false);
	struct pc_cache *c = tu_cache_of(mem);
	*a = pc_open(c, pa, O_RDONLY, 0);
	*b = pc_open(c, pb, O_RDWR, 0);
	REQUIRE(*a && *b);
	return c;
}

/* Hits of A racing the drop of A's folios and writes of B into the
 * memory they freed return A's bytes only. */
TEST_CASE(hits_racing_reuse_return_own_bytes)
{
	static struct race_shared s;
	/* A and B do not both fit: B reuses A's memory. */
	struct pc_cache *c = open_a_and_b("race", RACE_SIZE, 12u << 20, &s.a, &s.b);
	pthread_t r[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&r[i], NULL, race_reader, &s) == 0);
	uint8_t *buf = malloc(HIT_READ);
	REQUIRE(buf);
	memset(buf, B_BYTE, HIT_READ);
	/* Drop a piece of A, write a piece of B into the memory it freed (a
	 * write fills the memory at once, a read only when the device has
	 * answered, mostly after the racing copy is over). */
	uint64_t seed = 11;
	int rounds = TU_SANITIZED ? 300 : 5000;
	for (int k = 0; k < rounds; k++) {
		off_t a_off = (off_t)((tu_rand(&seed) % (RACE_SIZE / HIT_READ)) * HIT_READ);
		off_t b_off = (off_t)((tu_rand(&seed) % (RACE_SIZE / HIT_READ)) * HIT_READ);
		CHECK(pc_fadvise(s.a, a_off, HIT_READ, POSIX_FADV_DONTNEED) == 0);
		CHECK(pc_fadvise(s.b, b_off, HIT_READ, POSIX_FADV_DONTNEED) == 0);
		CHECK(pc_pwrite(s.b, buf, HIT_READ, b_off, 0) == (ssize_t)HIT_READ);
	}
	atomic_store(&s.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	printf("reuse: %ld reads, %ld bad\n", atomic_load(&s.reads), atomic_load(&s.bad));
	CHECK(atomic_load(&s.bad) == 0);
	CHECK(atomic_load(&s.reads) > 0);
	free(buf);
	CHECK(pc_close(s.a) == 0);
	CHECK(pc_close(s.b) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* The hook of read_hit.c and what it does: drop the folio of A the hit is
 * about to copy from and write B over its memory (the arena hands the
 * folio just freed out first), at the point of the hit `hook_at` names. */
extern void (*read_hit_test_hook)(struct pc_mapping *m, uint64_t off, int at);
extern _Atomic long read_hit_discards;
enum { AFTER_LOOKUP, BEFORE_COPY }; /* read_hit.h's HIT_HOOK_* */
static struct pc_file *hook_a, *hook_b;
static uint8_t *hook_buf;
static int hook_calls, hook_at;
static off_t hook_b_off; /* where B's write lands: same index as A's, or not */
static struct pc_cache *hook_cache;
static bool hook_frees_only; /* no reuse: count the frees of a whole cycle */

static void reuse_under_copy(struct pc_mapping *m, uint64_t off, int at)
{
	(void)m;
	if (at != hook_at)
		return;
	read_hit_test_hook = NULL; /* once; and not for the calls below */
	hook_calls++;
	if (hook_frees_only) {
		/* As if the cache had freed enough folios meanwhile for this
		 * one's 15-bit generation to come round to its old value. */
		atomic_fetch_add(&hook_cache->folio_frees, (uint64_t)1 << (32 - PF_GEN_SHIFT - 1));
		return;
	}
	CHECK(pc_fadvise(hook_a, (off_t)(off & ~(uint64_t)(HIT_READ - 1)), HIT_READ, POSIX_FADV_DONTNEED) == 0);
	CHECK(pc_pwrite(hook_b, hook_buf, HIT_READ, hook_b_off, 0) == (ssize_t)HIT_READ);
	if (at == AFTER_LOOKUP) {
		/* B's folio as a hit takes it (uptodate, referenced): so the
		 * hit copies from it, and only the owner and index checks
		 * after the copy can see that it is not A's any more. */
		CHECK(pc_pread(hook_b, hook_buf, HIT_READ, hook_b_off, 0) == (ssize_t)HIT_READ);
		CHECK(pc_pread(hook_b, hook_buf, HIT_READ, hook_b_off, 0) == (ssize_t)HIT_READ);
	}
}

/*
 * One hit of A through the hook: A's folio is dropped and its memory
 * written with B's data at `at` (or, with frees_only, the cache's count of
 * frees jumps by a wrap's worth), and the hit must still return A's bytes.
 * Where the hit copies optimistically (not under TSan), the copy it made
 * is counted as thrown away: that is the check after the copy (the
 * generation before the copy, the owner and index after the lookup, the
 * count of frees) working, not a decline before it.
 */
static void hit_reused_under_it(const char *tag, off_t b_off, int at, bool frees_only)
{
	struct pc_cache *c = open_a_and_b(tag, HIT_READ, 16 * HIT_READ, &hook_a, &hook_b);
	hook_b_off = b_off;
	hook_at = at;
	hook_cache = c;
	hook_frees_only = frees_only;
	hook_calls = 0;
	hook_buf = malloc(HIT_READ);
	uint8_t *buf = malloc(HIT_READ);
	REQUIRE(hook_buf && buf);
	memset(hook_buf, B_BYTE, HIT_READ);
	CHECK(pc_pread(hook_a, buf, HIT_READ, 0, 0) == (ssize_t)HIT_READ);
	CHECK(pc_pread(hook_a, buf, HIT_READ, 0, 0) == (ssize_t)HIT_READ); /* referenced */
	long discards = atomic_load(&read_hit_discards);
	read_hit_test_hook = reuse_under_copy;
	memset(buf, 0, HIT_READ);
	CHECK(pc_pread(hook_a, buf, 4096, 4096, 0) == 4096);
	read_hit_test_hook = NULL;
	CHECK(hook_calls == 1);
	long bad = 0;
	for (size_t i = 0; i < 4096; i++)
		bad += buf[i] != tu_pattern_byte(A_SEED, 4096 + i);
	CHECK(bad == 0);
#if !defined(__SANITIZE_THREAD__)
	CHECK(atomic_load(&read_hit_discards) == discards + 1);
#else
	(void)discards; /* under TSan the hit copies under a reference */
#endif
	CHECK(pc_close(hook_a) == 0);
	CHECK(pc_close(hook_b) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(hook_buf);
	free(buf);
}

/* Reused during the copy: the generation check. */
TEST_CASE(hit_reused_during_copy_same_index)
{
	hit_reused_under_it("hook0", 0, BEFORE_COPY, false);
}

/* Reused for another index: the copy must not follow the new one. */
TEST_CASE(hit_reused_during_copy_other_index)
{
	hit_reused_under_it("hookfar", (off_t)16 << 30, BEFORE_COPY, false);
}

/* Reused between the lookup and the flags: the generation does not move
 * during the copy; the owner and index checks after it see the change. */
TEST_CASE(hit_reused_after_lookup_same_index)
{
	hit_reused_under_it("hooklk0", 0, AFTER_LOOKUP, false);
}

TEST_CASE(hit_reused_after_lookup_other_index)
{
	hit_reused_under_it("hooklkfar", (off_t)16 << 30, AFTER_LOOKUP, false);
}

/* A wrap's worth of frees during the copy: the count of frees. */
TEST_CASE(hit_declines_after_generation_wrap)
{
	hit_reused_under_it("hookwrap", 0, BEFORE_COPY, true);
}

/* ---------------------------------------------------------- counting */

#define COUNT_THREADS (PC_COUNTER_SLOTS + 4)
#define COUNT_READS 2000

struct count_arg {
	struct pc_file *f;
	long ok;
};

static void *count_reader(void *arg)
{
	struct count_arg *a = arg;
	uint8_t buf[4096];
	for (int i = 0; i < COUNT_READS; i++)
		if (pc_pread(a->f, buf, sizeof(buf), (off_t)((i % 256) * 4096), 0) == (ssize_t)sizeof(buf))
			a->ok++;
	return NULL;
}

/* More threads than counter slots, twice over: every hit byte counted,
 * in the cache's and the file's hit_bytes. */
TEST_CASE(hit_counts_exact_across_slot_reuse)
{
	char p[4200];
	test_path(p, sizeof(p), dir, "c");
	make_file(p, 1 << 20, true);
	struct pc_cache *c = tu_cache_new(NULL);
	struct pc_file *f = pc_open(c, p, O_RDONLY, 0);
	REQUIRE(f);
	uint8_t *buf = malloc(1 << 20);
	REQUIRE(buf);
	/* Warm, twice: the second pass is hits (and marks the folios
	 * referenced), so the counted phase below is hits only. */
	CHECK(pc_pread(f, buf, 1 << 20, 0, 0) == 1 << 20);
	CHECK(pc_pread(f, buf, 1 << 20, 0, 0) == 1 << 20);
	struct pc_stats c0, f0, c1, f1;
	pc_cache_stats(c, &c0);
	pc_file_stats(f, &f0);
	long ok = 0;
	for (int round = 0; round < 2; round++) {
		pthread_t t[COUNT_THREADS];
		struct count_arg a[COUNT_THREADS];
		for (int i = 0; i < COUNT_THREADS; i++) {
			a[i] = (struct count_arg){ .f = f };
			REQUIRE(pthread_create(&t[i], NULL, count_reader, &a[i]) == 0);
		}
		for (int i = 0; i < COUNT_THREADS; i++) {
			pthread_join(t[i], NULL);
			ok += a[i].ok;
		}
	}
	pc_cache_stats(c, &c1);
	pc_file_stats(f, &f1);
	CHECK(ok == 2L * COUNT_THREADS * COUNT_READS);
	CHECK(c1.hit_bytes - c0.hit_bytes == (uint64_t)ok * 4096);
	CHECK(f1.hit_bytes - f0.hit_bytes == (uint64_t)ok * 4096);
	CHECK(c1.miss_bytes == c0.miss_bytes);
	CHECK(c1.dev_read_ios == c0.dev_read_ios);
	free(buf);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------------ read-ahead */

/* A cold file read in 4 KiB pieces, most of them hits, goes to the
 * device in read-ahead windows. */
TEST_CASE(readahead_windows_through_hits)
{
	char p[4200];
	test_path(p, sizeof(p), dir, "d");
	const uint64_t size = 16u << 20;
	make_file(p, size, true);
	int fd = open(p, O_RDONLY);
	REQUIRE(fd >= 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	struct pc_cache *c = tu_cache_of(64u << 20);
	struct pc_file *f = pc_open(c, p, O_RDONLY, 0);
	REQUIRE(f);
	uint8_t buf[4096];
	long bad = 0;
	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		if (pc_pread(f, buf, sizeof(buf), (off_t)off, 0) != (ssize_t)sizeof(buf)) {
			bad++;
			continue;
		}
		for (size_t i = 0; i < sizeof(buf); i += 512)
			if (buf[i] != tu_pattern_byte(A_SEED, off + i)) {
				bad++;
				break;
			}
	}
	CHECK(bad == 0);
	struct pc_stats s;
	pc_file_stats(f, &s);
	/* 4096 reads of 4 KiB; windows grow to readahead_max_bytes.  One
	 * device read per read (the stream lost) would be thousands. */
	printf("read-ahead: %llu device reads for %llu 4 KiB reads, %llu bytes hit\n",
	       (unsigned long long)s.dev_read_ios, (unsigned long long)(size / 4096),
	       (unsigned long long)s.hit_bytes);
	CHECK(s.dev_read_ios > 0 && s.dev_read_ios <= 200);
	CHECK(s.hit_bytes >= size / 2);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
