/*
 * test_mt_throttle.c - the dirty throttle.
 *
 * Cache: 16 MiB of memory, dirty_limit_bytes 2 MiB, dirty_background_bytes
 * 1 MiB, largest folio 256 KiB.
 *
 * Two writers held under the limit: two threads write 32 MiB each (64 MiB
 * in all, 32x the dirty limit) in 128 KiB block-aligned writes; a third
 * thread samples pc_cache_stats all along.  Checks:
 *   - writers were throttled: paced below the limit or made to wait at it
 *     (throttle_pauses + throttle_waits > 0);
 *   - dirty_bytes never exceeded dirty_limit + slack, and neither did the
 *     final peak_dirty_bytes nor dirty_bytes + writeback_bytes (sampled as a
 *     stable pair: two stats calls agreeing on both counters);
 *   - every byte reads back right, through the cache and, after close,
 *     from the backing file with plain O_DIRECT.
 * Two cases, each on a new cache (peak_dirty_bytes is per cache): with
 * blocking writes only, and with every fourth write PC_NOWAIT (which must
 * either write everything or fail with EAGAIN; on EAGAIN the writer writes
 * it again without PC_NOWAIT).
 *
 * The slack.  A blocking writer is checked against the limit (dirty +
 * writeback > dirty_limit) after it has written, not before, so each of
 * the two writers can have one whole write (128 KiB, block-aligned, so no
 * block rounding) in flight past a check that found the cache just under
 * the limit: 2 * 128 KiB.  The flusher counts a run as under writeback
 * before it takes it off the dirty count (so that neither counter goes
 * negative), so the sum can briefly count one run twice: at most one
 * folio, 256 KiB.  Bound: dirty_limit + 2 * max write size +
 * max_folio_size = 2.5 MiB.
 * With PC_NOWAIT writes mixed in, a writer gets two writes per check: a
 * PC_NOWAIT write is checked before it writes (EAGAIN if over the limit)
 * but cannot wait after it, and the writer's next (blocking) write is
 * only checked after it has written.  Bound: dirty_limit + 2 * 2 * max
 * write size + max_folio_size = 2.75 MiB.
 *
 * PC_NOWAIT with writeback held up (deterministic): the cache's fault hook
 * holds every device write at a gate, so the flusher, once started, cannot
 * clean anything.  One thread then writes 128 KiB with PC_NOWAIT until one
 * fails: it must fail with EAGAIN, and exactly when dirty + writeback
 * (everything written, as nothing is cleaned) is past the limit before it:
 * not earlier, not later.  On the way, with the flusher held inside its
 * first device write: a PC_NOWAIT write into the folio the flusher holds
 * locked fails with EAGAIN, and one that starts in a free folio and runs
 * into a folio under writeback comes back short, as RWF_NOWAIT: with the
 * bytes before that folio, never more, and never success with nothing.
 * Then the gate opens, fsync succeeds and the data is all there.
 *
 * Fair shares: an uncached writer of small writes and a buffered writer of
 * large ones, throttled together, each get a fair part (the comment at
 * FAIR_TOTAL).
 *
 * A close while the file's write-back waits for room on the device
 * (close_while_writeback_waits_leaves_file_unsettled): the file is not
 * settled until its data is written.
 *
 * Each case has a cache of its own.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define MEM_LIMIT (16 * MiB)
#define DIRTY_LIMIT (2 * MiB)
#define DIRTY_BG (1 * MiB)
#define MAX_FOLIO (256 * KiB)
#define WSIZE (128 * KiB)
#define PER_WRITER (32 * MiB)
#define NWRITERS 2
/* Writes past a check per writer: 1 blocking only, 2 with PC_NOWAIT. */
#define SLACK(per_writer) ((per_writer) * NWRITERS * WSIZE + MAX_FOLIO)

#define PAT_SIZE (2 * MiB)

static const char *dir;
static uint8_t *pat; /* PAT_SIZE + WSIZE random bytes */

/* The scratch directory and the random bytes every case writes. */
static void throttle_setup(void)
{
	dir = test_dir("mt_throttle");
	uint64_t seed = test_seed("test_mt_throttle", 0x7468726f74746c65ull);
	pat = malloc(PAT_SIZE + WSIZE);
	REQUIRE(pat);
	for (size_t i = 0; i + 8 <= PAT_SIZE + WSIZE; i += 8) {
		uint64_t x = tu_rand(&seed);
		memcpy(pat + i, &x, 8);
	}
}

static void throttle_teardown(void)
{
	free(pat);
	test_rmdir(dir);
}

TEST_FIXTURE(throttle_setup, throttle_teardown)

/* The bytes of the chunk of WSIZE at file offset off (chunk-aligned). */
static const uint8_t *chunk_data(uint64_t off, unsigned salt)
{
	uint64_t i = off / WSIZE;
	uint64_t start = ((i * 7919 + salt * 104729) * 4099) % PAT_SIZE;
	return pat + start;
}

/* ------------------------------------------------------------ the gate */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static int gate_blocked;       /* writes waiting at the gate now */
static long gate_held_total;   /* writes ever held */
/* Two writers and fair shares: every device write takes this long, so
 * that the writers (which only copy into memory) outrun writeback and are
 * throttled for sure, whatever the speed of the device or of a sanitizer
 * build. */
static _Atomic unsigned write_delay_us;

static int gate_hook(void *arg, int op, int fd, off_t off, size_t len)
{
	(void)arg, (void)fd, (void)off, (void)len;
	if (op != IO_WRITE)
		return 0;
	unsigned us = atomic_load(&write_delay_us);
	if (us) {
		struct timespec ts = { 0, (long)us * 1000L };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&gate_lock);
	if (gate_closed) {
		gate_blocked++;
		gate_held_total++;
		pthread_cond_broadcast(&gate_cv);
		while (gate_closed)
			pthread_cond_wait(&gate_cv, &gate_lock);
		gate_blocked--;
	}
	pthread_mutex_unlock(&gate_lock);
	return 0;
}

static void gate_set(bool closed)
{
	pthread_mutex_lock(&gate_lock);
	gate_closed = closed;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_lock);
}

/* Wait for `n` device writes to be held at the gate at once: `ms` should
 * do, TU_POLL_MIN_MS is the bound (a hang's, as TU_POLL's). */
static bool gate_wait_blocked(int n, unsigned ms)
{
	ms = (unsigned)tu_max_u64(ms, TU_POLL_MIN_MS);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&gate_lock);
	int r = 0;
	while (gate_blocked < n && r == 0)
		r = pthread_cond_timedwait(&gate_cv, &gate_lock, &ts);
	bool ok = gate_blocked >= n;
	pthread_mutex_unlock(&gate_lock);
	return ok;
}

/* The cache of the throttle cases: MEM_LIMIT, DIRTY_LIMIT, DIRTY_BG,
 * MAX_FOLIO, every device write through the gate. */
static struct pc_cache *cache_with_write_gate(void)
{
	struct pc_config cfg = tu_config(MEM_LIMIT);
	cfg.max_folio_size = MAX_FOLIO;
	cfg.dirty_limit_bytes = DIRTY_LIMIT;
	cfg.dirty_background_bytes = DIRTY_BG;
	struct pc_cache *c = tu_cache_new(&cfg);
	/* Before any file is open, so before any flusher thread exists. */
	cache_proc(c)->fault_hook = gate_hook;
	cache_proc(c)->fault_arg = NULL;
	return c;
}

/* ------------------------------------------- two writers under the limit */

struct writer {
	pthread_t t;
	struct pc_file *h;
	uint64_t start;
	unsigned salt;
	unsigned nowait_every; /* every n-th write PC_NOWAIT; 0: none */
	/* results, read by main after join */
	unsigned long writes, nowait_writes, nowait_eagain, nowait_short, nowait_bad_errno, errors;
	int first_errno;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	for (uint64_t off = w->start; off < w->start + PER_WRITER; off += WSIZE) {
		const uint8_t *src = chunk_data(off, w->salt);
		bool nowait = w->nowait_every && ((off / WSIZE) % w->nowait_every) == w->nowait_every - 1;
		size_t done = 0;
		if (nowait) {
			w->nowait_writes++;
			errno = 0;
			ssize_t r = pc_pwrite(w->h, src, WSIZE, (off_t)off, PC_NOWAIT);
			if (r == (ssize_t)WSIZE) {
				done = WSIZE;
			} else if (r < 0) {
				if (errno == EAGAIN)
					w->nowait_eagain++;
				else
					w->nowait_bad_errno++;
			} else {
				w->nowait_short++;
				done = (size_t)r;
			}
		}
		if (done < WSIZE) {
			ssize_t r = pc_pwrite(w->h, src + done, WSIZE - done, (off_t)(off + done), 0);
			if (r != (ssize_t)(WSIZE - done)) {
				if (!w->errors++)
					w->first_errno = errno;
			}
		}
		w->writes++;
	}
	return NULL;
}

struct sampler {
	pthread_t t;
	struct pc_cache *c;
	_Atomic bool stop;
	uint64_t max_dirty, max_sum, samples, stable;
};

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	struct timespec nap = { 0, 50 * 1000 };
	while (!atomic_load(&s->stop)) {
		struct pc_stats a, b;
		pc_cache_stats(s->c, &a);
		pc_cache_stats(s->c, &b);
		s->samples++;
		uint64_t d = a.dirty_bytes > b.dirty_bytes ? a.dirty_bytes : b.dirty_bytes;
		if (d > s->max_dirty)
			s->max_dirty = d;
		/* dirty and writeback are two loads: only a pair that two calls
		 * agree on is taken as one moment's sum. */
		if (a.dirty_bytes == b.dirty_bytes && a.writeback_bytes == b.writeback_bytes) {
			s->stable++;
			uint64_t sum = a.dirty_bytes + a.writeback_bytes;
			if (sum > s->max_sum)
				s->max_sum = sum;
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

static void verify_file(struct pc_file *h, const char *path, const struct writer *w)
{
	uint8_t *buf = malloc(WSIZE);
	REQUIRE(buf);
	unsigned bad = 0;
	for (int i = 0; i < NWRITERS; i++)
		for (uint64_t off = w[i].start; off < w[i].start + PER_WRITER; off += WSIZE) {
			ssize_t r = pc_pread(h, buf, WSIZE, (off_t)off, 0);
			if (r != (ssize_t)WSIZE || memcmp(buf, chunk_data(off, w[i].salt), WSIZE) != 0) {
				if (bad++ < 5)
					fprintf(stderr, "cache: chunk at %llu wrong (read %zd)\n",
						(unsigned long long)off, r);
			}
		}
	CHECK(bad == 0);
	free(buf);
	(void)path;
}

/* Every writer's chunks on the backing file, read with plain O_DIRECT. */
static void verify_backing(const char *path, const struct writer *w)
{
	size_t size, got;
	uint8_t *disk = tu_load_backing(path, &size, &got);
	REQUIRE(disk);
	unsigned bad = 0;
	for (int i = 0; i < NWRITERS; i++)
		for (uint64_t off = w[i].start; off < w[i].start + PER_WRITER; off += WSIZE) {
			size_t r = off < got ? (size_t)tu_min_u64(WSIZE, got - off) : 0;
			if (r != WSIZE || memcmp(disk + off, chunk_data(off, w[i].salt), WSIZE) != 0) {
				if (bad++ < 5)
					fprintf(stderr, "backing file: chunk at %llu wrong (read %zu)\n",
						(unsigned long long)off, r);
			}
		}
	CHECK(bad == 0);
	free(disk);
}

static void two_writers(struct pc_cache *c, unsigned nowait_every)
{
	char path[4300];
	test_path(path, sizeof(path), dir, "throttle");
	const uint64_t slack = SLACK(nowait_every ? 2 : 1);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	struct pc_stats s0;
	pc_cache_stats(c, &s0);

	atomic_store(&write_delay_us, 3000);
	struct sampler smp = { .c = c };
	REQUIRE(pthread_create(&smp.t, NULL, sampler_main, &smp) == 0);
	struct writer w[NWRITERS];
	memset(w, 0, sizeof(w));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NWRITERS; i++) {
		w[i].h = h;
		w[i].start = (uint64_t)i * PER_WRITER;
		w[i].salt = (unsigned)i + 1 + 2 * nowait_every;
		w[i].nowait_every = nowait_every;
		REQUIRE(pthread_create(&w[i].t, NULL, writer_main, &w[i]) == 0);
	}
	for (int i = 0; i < NWRITERS; i++)
		pthread_join(w[i].t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	atomic_store(&smp.stop, true);
	pthread_join(smp.t, NULL);
	atomic_store(&write_delay_us, 0);

	struct pc_stats s;
	pc_cache_stats(c, &s);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	unsigned long nw = 0, eagain = 0, shorts = 0, badno = 0, errs = 0;
	for (int i = 0; i < NWRITERS; i++) {
		nw += w[i].nowait_writes;
		eagain += w[i].nowait_eagain;
		shorts += w[i].nowait_short;
		badno += w[i].nowait_bad_errno;
		errs += w[i].errors;
		if (w[i].errors)
			fprintf(stderr, "writer %d: %lu failed writes, first errno %d\n", i, w[i].errors,
				w[i].first_errno);
	}
	printf("two writers%s: %llu MiB in %.2f s; throttle waits %llu; %llu samples (%llu stable pairs); "
	       "max dirty %llu KiB, max dirty+writeback %llu KiB, peak_dirty %llu KiB; "
	       "limit %llu KiB + slack %llu KiB; NOWAIT writes %lu: %lu EAGAIN, %lu short\n",
	       nowait_every ? " (every 4th PC_NOWAIT)" : "", (unsigned long long)(NWRITERS * PER_WRITER / MiB), secs,
	       (unsigned long long)(s.throttle_waits - s0.throttle_waits), (unsigned long long)smp.samples,
	       (unsigned long long)smp.stable, (unsigned long long)(smp.max_dirty / KiB),
	       (unsigned long long)(smp.max_sum / KiB), (unsigned long long)(s.peak_dirty_bytes / KiB),
	       (unsigned long long)(DIRTY_LIMIT / KiB), (unsigned long long)(slack / KiB), nw, eagain, shorts);

	CHECK(errs == 0);
	/* Paced below the limit (pace.c) or stopped at it: either way held. */
	CHECK(s.throttle_waits - s0.throttle_waits + s.throttle_pauses - s0.throttle_pauses > 0);
	CHECK(smp.samples > 0);
	CHECK(smp.max_dirty <= DIRTY_LIMIT + slack);
	CHECK(smp.stable > 0);
	CHECK(smp.max_sum <= DIRTY_LIMIT + slack);
	CHECK(s.peak_dirty_bytes <= DIRTY_LIMIT + slack);
	/* The throttle let dirty data build up (the flusher was not simply
	 * keeping everything clean): something above the background mark. */
	CHECK(s.peak_dirty_bytes > DIRTY_BG);
	CHECK(nowait_every == 0 || nw > 0);
	CHECK(badno == 0);  /* a failed PC_NOWAIT write fails with EAGAIN */
	CHECK(shorts == 0); /* and never writes part of the data */
	CHECK(pc_size(h) == (off_t)(NWRITERS * PER_WRITER));

	verify_file(h, path, w);
	CHECK(pc_fsync(h) == 0);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes == 0);
	CHECK(pc_close(h) == 0);
	verify_backing(path, w);
	unlink(path);
}

TEST_CASE(two_writers_held_under_dirty_limit)
{
	struct pc_cache *c = cache_with_write_gate();
	two_writers(c, 0);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(two_writers_with_nowait_held_under_dirty_limit)
{
	struct pc_cache *c = cache_with_write_gate();
	two_writers(c, 4);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------ PC_NOWAIT with write-back held up */

#define REGION (128 * KiB) /* the writes start here; the probe starts below */

TEST_CASE(nowait_write_fails_exactly_past_limit)
{
	struct pc_cache *c = cache_with_write_gate();
	char path[4300];
	test_path(path, sizeof(path), dir, "nowait");
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	struct pc_stats s;
	pc_cache_stats(c, &s);
	REQUIRE(s.dirty_bytes == 0 && s.writeback_bytes == 0);

	/* What the file must hold: [0, REGION + 4 MiB). */
	size_t msize = REGION + 4 * MiB;
	uint8_t *model = calloc(1, msize);
	REQUIRE(model);
	uint64_t model_end = 0;

	gate_set(true);
	unsigned ok = 0;
	bool probed = false, failed = false;
	int fail_errno = 0;
	ssize_t probe_short = -2, probe_locked = -2;
	int probe_short_errno = 0, probe_locked_errno = 0;
	for (unsigned i = 0; i < 32 && !failed; i++) {
		uint64_t off = REGION + (uint64_t)i * WSIZE;
		const uint8_t *src = chunk_data(off, 9);
		errno = 0;
		ssize_t r = pc_pwrite(h, src, WSIZE, (off_t)off, PC_NOWAIT);
		if (r == (ssize_t)WSIZE) {
			ok++;
			memcpy(model + off, src, WSIZE);
			if (off + WSIZE > model_end)
				model_end = off + WSIZE;
		} else {
			failed = true;
			fail_errno = r < 0 ? errno : 0;
			CHECK(r == -1);
			if (r > 0) /* short: keep the model right */
				memcpy(model + off, src, (size_t)r);
		}
		/* Past the background mark (9 writes: 1.125 MiB) the flusher
		 * starts; its first device write (the first 1 MiB) is held at
		 * the gate while it holds the next folio (the 9th write's)
		 * locked.  Probe then, while still under the limit. */
		if (!failed && !probed && ok == 9 && gate_wait_blocked(1, 5000)) {
			probed = true;
			pc_cache_stats(c, &s);
			printf("nowait: flusher held: dirty %llu KiB, writeback %llu KiB\n",
			       (unsigned long long)(s.dirty_bytes / KiB), (unsigned long long)(s.writeback_bytes / KiB));
			/* Into the folio the flusher holds locked: EAGAIN. */
			uint8_t small[1000];
			memset(small, 0x77, sizeof(small));
			errno = 0;
			probe_locked = pc_pwrite(h, small, sizeof(small), (off_t)(REGION + 8 * WSIZE + 100), PC_NOWAIT);
			probe_locked_errno = errno;
			if (probe_locked == (ssize_t)sizeof(small))
				memcpy(model + REGION + 8 * WSIZE + 100, small, sizeof(small));
			/* From a free folio below the region into its first
			 * folio, which is under writeback. */
			uint8_t big[WSIZE];
			memset(big, 0x3c, sizeof(big));
			errno = 0;
			probe_short = pc_pwrite(h, big, sizeof(big), (off_t)(REGION - WSIZE / 2), PC_NOWAIT);
			probe_short_errno = errno;
			if (probe_short > 0) {
				memcpy(model + REGION - WSIZE / 2, big, (size_t)probe_short);
				if (REGION - WSIZE / 2 + (uint64_t)probe_short > model_end)
					model_end = REGION - WSIZE / 2 + (uint64_t)probe_short;
			}
		}
	}
	pc_cache_stats(c, &s);
	long held;
	pthread_mutex_lock(&gate_lock);
	held = gate_held_total;
	pthread_mutex_unlock(&gate_lock);
	printf("nowait: %u writes of 128 KiB before the first failure (errno %d); dirty %llu KiB, writeback %llu "
	       "KiB; device writes held %ld; probe into a locked folio -> %zd (errno %d), probe into a folio "
	       "under writeback -> %zd (errno %d)\n",
	       ok, fail_errno, (unsigned long long)(s.dirty_bytes / KiB), (unsigned long long)(s.writeback_bytes / KiB),
	       held, probe_locked, probe_locked_errno, probe_short, probe_short_errno);
	gate_set(false);

	CHECK(probed);
	CHECK(failed);
	CHECK(fail_errno == EAGAIN);
	/* It failed because of the limit, exactly when past it (the probes'
	 * bytes, if they went in, count too). */
	uint64_t extra = (probe_short > 0 ? (uint64_t)probe_short : 0);
	CHECK((uint64_t)ok * WSIZE + extra > DIRTY_LIMIT);
	CHECK((uint64_t)(ok - 1) * WSIZE + extra <= DIRTY_LIMIT);
	CHECK(probe_locked == -1 && probe_locked_errno == EAGAIN);
	/* As RWF_NOWAIT: what went in before the folio under writeback (its
	 * first half, WSIZE / 2 bytes, in the free folio below), never more,
	 * and never nothing-with-success. */
	CHECK(probe_short == (ssize_t)(WSIZE / 2));

	CHECK(pc_fsync(h) == 0);
	CHECK(pc_size(h) == (off_t)model_end);
	uint8_t *buf = malloc(msize);
	REQUIRE(buf);
	CHECK(pc_pread(h, buf, msize, 0, 0) == (ssize_t)model_end);
	CHECK(memcmp(buf, model, model_end) == 0);
	CHECK(pc_close(h) == 0);

	int fd = open(path, O_RDONLY | O_DIRECT);
	REQUIRE(fd >= 0);
	uint8_t *dbuf;
	REQUIRE(posix_memalign((void **)&dbuf, 4096, msize) == 0);
	ssize_t r = pread(fd, dbuf, msize, 0);
	CHECK(r == (ssize_t)model_end);
	CHECK(r > 0 && memcmp(dbuf, model, (size_t)r) == 0);
	close(fd);
	free(dbuf);
	free(buf);
	free(model);
	unlink(path);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * Fair shares: a buffered writer of 512 KiB writes and an uncached
 * writer of 8 KiB writes (two files, one cache, a slow device so both are
 * throttled) run until they have written FAIR_TOTAL between them.  Neither
 * may get more than four times the bytes of the other: uncached writers
 * are throttled by the same limit as buffered ones, not harder (and not
 * made to write back themselves), and small writes are not starved by
 * large ones.
 */
#define FAIR_TOTAL (48 * MiB)

struct fair_writer {
	struct pc_file *h;
	size_t wsize;
	int flags;
	_Atomic uint64_t *total;
	uint64_t written;
	int errors;
	pthread_t t;
};

static void *fair_main(void *arg)
{
	struct fair_writer *w = arg;
	uint64_t off = 0;
	while (atomic_load(w->total) < FAIR_TOTAL) {
		/* The bytes do not matter here (the other cases check data). */
		if (pc_pwrite(w->h, pat, w->wsize, (off_t)off, w->flags) != (ssize_t)w->wsize) {
			w->errors++;
			break;
		}
		off += w->wsize;
		w->written += w->wsize;
		atomic_fetch_add(w->total, w->wsize);
	}
	return NULL;
}

TEST_CASE(uncached_and_buffered_writers_get_fair_shares)
{
	struct pc_cache *c = cache_with_write_gate();
	char pa[4300], pb[4300];
	test_path(pa, sizeof(pa), dir, "fair_buffered");
	test_path(pb, sizeof(pb), dir, "fair_uncached");
	_Atomic uint64_t total = 0;
	struct fair_writer w[2] = {
		{ .wsize = 512 * KiB, .flags = 0, .total = &total },
		{ .wsize = 8 * KiB, .flags = PC_DONTCACHE, .total = &total },
	};
	w[0].h = pc_open(c, pa, O_RDWR | O_CREAT | O_TRUNC, 0644);
	w[1].h = pc_open(c, pb, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(w[0].h && w[1].h);
	struct pc_stats s0, s1;
	pc_cache_stats(c, &s0);
	atomic_store(&write_delay_us, 20000);
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&w[i].t, NULL, fair_main, &w[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].t, NULL);
	atomic_store(&write_delay_us, 0);
	pc_cache_stats(c, &s1);
	printf("fair shares: buffered 512 KiB writes %llu KiB, uncached 8 KiB writes %llu KiB, "
	       "throttle waits %llu\n",
	       (unsigned long long)(w[0].written / KiB), (unsigned long long)(w[1].written / KiB),
	       (unsigned long long)(s1.throttle_waits - s0.throttle_waits));
	CHECK(w[0].errors == 0 && w[1].errors == 0);
	CHECK(s1.throttle_waits + s1.throttle_pauses > s0.throttle_waits + s0.throttle_pauses);
	CHECK(w[1].written * 4 >= w[0].written);
	CHECK(w[0].written * 4 >= w[1].written);
	CHECK(pc_close(w[0].h) == 0);
	CHECK(pc_close(w[1].h) == 0);
	unlink(pa);
	unlink(pb);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------ closing while write-back waits for room */

struct dsync_writer {
	pthread_t t;
	struct pc_file *h;
	off_t off;
	ssize_t res;
};

static void *dsync_writer_main(void *arg)
{
	struct dsync_writer *w = arg;
	w->res = pc_pwrite(w->h, pat + w->off, 64 * KiB, w->off, PC_DSYNC);
	return NULL;
}

/*
 * The flusher has taken a file's last dirty blocks into a request that
 * waits for room on the device (four PC_DSYNC writes of another file are
 * held at the gate, which fills the in-flight cap of 4 * max_io_bytes)
 * when the file's last handle closes.  Nothing of it is dirty any more,
 * but it is not clean either: its data has not reached the device, so the
 * close must not settle it (drop its lock, free its descriptor for reuse
 * while the request still writes through it).  A second cache's pc_open
 * sees the difference: EBUSY while the data is on its way, then, once the
 * gate opens and the data is written, the file opens and holds the data.
 */
TEST_CASE(close_while_writeback_waits_leaves_file_unsettled)
{
	struct pc_config cfg = tu_config(MEM_LIMIT);
	cfg.max_folio_size = 64 * KiB;
	cfg.max_io_bytes = 64 * KiB;      /* in-flight cap: 4 * 64 KiB */
	cfg.dirty_limit_bytes = DIRTY_LIMIT; /* / 8 = 256 KiB, the same */
	cfg.dirty_expire_ms = 20;        /* the flusher takes B soon */
	struct pc_cache *c = tu_cache_new(&cfg);
	cache_proc(c)->fault_hook = gate_hook;
	char pa[4200], pb[4200];
	test_path(pa, sizeof(pa), dir, "room-a");
	test_path(pb, sizeof(pb), dir, "room-b");
	struct pc_file *a = pc_open(c, pa, O_RDWR | O_CREAT | O_TRUNC, 0644);
	struct pc_file *b = pc_open(c, pb, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(a && b);
	gate_set(true);
	struct dsync_writer w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct dsync_writer){ .h = a, .off = (off_t)(i * 64 * KiB) };
		REQUIRE(pthread_create(&w[i].t, NULL, dsync_writer_main, &w[i]) == 0);
	}
	CHECK(gate_wait_blocked(4, 10000));
	CHECK(pc_pwrite(b, pat + MiB, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	struct pc_stats st;
	/* The flusher took it (nothing dirty) but could not send it. */
	CHECK(TU_POLL((pc_file_stats(b, &st), st.dirty_bytes == 0), 10000));
	pc_cache_stats(c, &st);
	CHECK(st.writeback_bytes >= 5 * 64 * KiB);
	CHECK(pc_close(b) == 0);

	struct pc_cache *other = tu_cache_new(&cfg);
	errno = 0;
	struct pc_file *ob = pc_open(other, pb, O_RDWR, 0);
	CHECK(ob == NULL && errno == EBUSY); /* still the first cache's */
	if (ob)
		pc_close(ob);

	gate_set(false);
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].t, NULL);
		CHECK(w[i].res == (ssize_t)(64 * KiB));
	}
	ob = NULL;
	CHECK(TU_POLL((ob = pc_open(other, pb, O_RDWR, 0)) != NULL, 10000)); /* settled once written */
	if (ob) {
		static uint8_t back[64 * KiB];
		CHECK(pc_pread(ob, back, sizeof(back), 0, PC_DIRECT) == (ssize_t)sizeof(back));
		CHECK(memcmp(back, pat + MiB, sizeof(back)) == 0);
		CHECK(pc_close(ob) == 0);
	}
	printf("close while write-back waits for room: the second cache got EBUSY, then the data\n");
	CHECK(pc_cache_destroy(other) == 0);
	CHECK(pc_close(a) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
