/*
 * test_span_pins.c - a read span pins its folio (include/pagecache.h,
 * "Zero-copy access"): held while its folio is evicted around, truncated
 * away, punched away or dropped by fadvise(DONTNEED), and the memory
 * churned, the span still holds the old bytes.  Under ASan the span's
 * bytes are poisoned meanwhile, so any reuse of that memory by the library
 * (a copy into a new folio, a zero fill) stops the test with a
 * use-after-poison report.  Also with threads: spans taken and checked
 * while another thread truncates, punches and rewrites the file and a
 * third churns memory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

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

TEST_SCRATCH_DIR("span_pins")

#include "span_util.h"

enum { PIN_EVICT, PIN_TRUNCATE, PIN_PUNCH, PIN_DONTNEED };
static const char *pin_names[] = { "eviction", "truncate", "punch", "fadvise(DONTNEED)" };

/*
 * A read span held while its folio is evicted around or dropped by
 * fadvise(DONTNEED) (the folio stays in the file, never evicted while
 * pinned), or truncated or punched away (a new folio then holds the new
 * data), and the cache's memory reused many times over for other data:
 * the span keeps the old bytes.  The span's bytes are poisoned (ASan)
 * while the cache churns.
 */
static void span_survives(int how)
{
	struct env e;
	env_open(&e, "pin", 4096, 64 * KiB, 2 * MiB, 0);
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
	CHECK(tu_is_pattern(s.data, (size_t)n, 7, at));
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
	bool kept = tu_is_pattern(s.data, (size_t)n, 7, at);
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

TEST_CASE(span_survives_eviction)
{
	span_survives(PIN_EVICT);
}

TEST_CASE(span_survives_truncate)
{
	span_survives(PIN_TRUNCATE);
}

TEST_CASE(span_survives_punch)
{
	span_survives(PIN_PUNCH);
}

TEST_CASE(span_survives_fadvise_dontneed)
{
	span_survives(PIN_DONTNEED);
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
		bool ok = tu_is_pattern(s.data, (size_t)n, 9, at);
		POISON(s.data, (size_t)n);
		for (int i = 0; i < 20; i++)
			sched_yield();
		UNPOISON(s.data, (size_t)n);
		if (!ok || !tu_is_pattern(s.data, (size_t)n, 9, at))
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

TEST_CASE(spans_survive_truncates_and_churn_of_other_threads)
{
	struct env e;
	env_open(&e, "pinmt", 4096, 64 * KiB, 2 * MiB, 0);
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
