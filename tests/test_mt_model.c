/*
 * test_mt_model.c - model-based differential test, many threads.
 *
 * T threads (PC_THREADS, default 4) work on one file.  Thread t owns the
 * stripes t, t+T, t+2T, ... of STRIPE bytes; STRIPE = 64 KiB + 1000 is not
 * a multiple of any block size, so neighbouring threads share the blocks at
 * every stripe boundary (edge blocks).  Each thread writes, reads, punches
 * and zeroes only bytes of its own stripes, with every per-call flag mix
 * (0, PC_DSYNC, PC_DONTCACHE, PC_DONTCACHE|PC_DSYNC, PC_DIRECT,
 * PC_DIRECT|PC_DSYNC; direct I/O both block aligned and not), and checks
 * every read against its own model (one byte array per thread, only its own
 * bytes meaningful), so no cross-thread locking is needed.  Some threads
 * call pc_fsync / pc_fdatasync concurrently, and fadvise DONTNEED/WILLNEED.
 *
 * The own-stripes cases run two phases on one file:
 *   shared phase: all threads share one struct pc_file.
 *   own phase:    each thread also opens its own pc_file of the same path
 *                 (same cache), uses mostly that one, and closes/reopens it
 *                 sometimes.
 *   After each phase the main thread reads the whole file through the
 *   cache, and at the end the backing file is read with plain O_DIRECT and
 *   compared with the model, size included; dirty_bytes must be 0.
 * The interleaved-records cases write records (record i at offset i*R by
 * thread i mod T, R = 6000 and 47008) with PC_DONTCACHE (and smaller rounds
 * with PC_DIRECT and PC_DONTCACHE|PC_DSYNC) to new files, then verify each
 * whole file through the cache and on disk.
 *
 * Each kind runs in two cache configurations, a case each: block 4096 /
 * 64 KiB folios / 4 MiB memory, and block 16384 / 256 KiB folios / 8 MiB
 * memory; if pc_open refuses a block size with EINVAL the case is skipped.
 *
 * Environment: PC_SEED (the base seed, printed; each configuration derives
 * its own from it and prints it), PC_THREADS, PC_OPS (random ops per thread
 * per phase, default 3000; PC_TEST_QUICK=1: 600), PC_MT_PHASES (the phases
 * the own-stripes cases run: "shared", "own" or both, the default).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <time.h>

#include "pagecache.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define STRIPE (65536ull + 1000ull)
#define STRIPES_PER_THREAD 8
#define POOL_SIZE (8 * MiB)
#define BUF_SIZE (STRIPE + 64 * KiB)
#define GUARD 64
#define MAX_THREADS 64

struct mtcfg {
	const char *name;
	size_t block_size, max_folio, memory_limit;
	unsigned flags;
};

static const struct mtcfg mtconfigs[] = {
	{ "bs4096-folio64K-mem4M", 4096, 64 * KiB, 4 * MiB, 0 },
	{ "bs16384-folio256K-mem8M", 16384, 256 * KiB, 8 * MiB, 0 },
};
#define NMTCONFIGS (sizeof(mtconfigs) / sizeof(mtconfigs[0]))

/* Shared, read-only while threads run. */
static const char *dir; /* the scratch directory */
static uint64_t base_seed;
static bool quick;
static uint8_t *pool;
static int nthreads;
static uint64_t fsize;
static uint64_t bs;
static uint64_t max_folio;
static uint64_t ops_per_phase;
static struct pc_cache *cache;
static struct pc_file *shared_f;
static char path[4200];
static const char *cfgname;
static const char *phases = "shared,own"; /* PC_MT_PHASES */
static enum { PHASE_SHARED, PHASE_OWN } phase;
static const char *const phase_names[] = { "shared", "own" };

static atomic_int failures;

struct thr {
	pthread_t tid;
	int t;
	uint64_t rng;
	uint8_t *model;  /* fsize bytes; only this thread's stripes used */
	uint8_t *buf;    /* read buffer, 4 KiB aligned */
	struct pc_file *own;
	uint64_t opno;
	bool failed;
	uint64_t nops[16];
};

static uint64_t rnd(struct thr *th, uint64_t n)
{
	return n ? tu_rand(&th->rng) % n : 0;
}

static void tfail(struct thr *th, const char *op, uint64_t off, uint64_t len, int flags, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void tfail(struct thr *th, const char *op, uint64_t off, uint64_t len, int flags, const char *fmt, ...)
{
	char msg[512], fb[64];
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr,
		"\n*** MISMATCH config %s %s phase thread %d op #%llu: %s off=%llu len=%llu end=%llu flags=%s: %s "
		"(errno %d %s)\n",
		cfgname, phase_names[phase], th->t, (unsigned long long)th->opno, op, (unsigned long long)off,
		(unsigned long long)len, (unsigned long long)(off + len), tu_flags_str(flags, fb, sizeof(fb)), msg, e,
		strerror(e));
	th->failed = true;
	atomic_fetch_add(&failures, 1);
}

/* Compare got with expected; report the first difference. */
static bool tcompare(struct thr *th, const char *op, uint64_t off, uint64_t len, int flags, const uint8_t *got,
		     const uint8_t *exp, uint64_t foff, uint64_t n)
{
	if (memcmp(got, exp, n) == 0)
		return true;
	uint64_t i = 0;
	while (got[i] == exp[i])
		i++;
	tfail(th, op, off, len, flags,
	      "first differing byte at file offset %llu (block %llu + %llu, stripe %llu + %llu): expected 0x%02x "
	      "got 0x%02x",
	      (unsigned long long)(foff + i), (unsigned long long)((foff + i) / bs),
	      (unsigned long long)((foff + i) % bs), (unsigned long long)((foff + i) / STRIPE),
	      (unsigned long long)((foff + i) % STRIPE), exp[i], got[i]);
	return false;
}

static int gen_flags(struct thr *th)
{
	return tu_io_flags_at(rnd(th, 100));
}

static uint64_t gen_len(struct thr *th)
{
	uint64_t p = rnd(th, 100);
	if (p < 30)
		return 1 + rnd(th, 64);
	if (p < 45)
		return 1 + rnd(th, 4096);
	if (p < 65) {
		uint64_t unit = rnd(th, 2) ? bs : 4096;
		uint64_t k = 1 + rnd(th, unit > 4096 ? 2 : 4);
		return k * unit - 1 + rnd(th, 3);
	}
	if (p < 90)
		return 1 + rnd(th, 64 * KiB);
	return 1 + rnd(th, STRIPE);
}

/* A range inside one of this thread's stripes, biased toward stripe edges
 * (blocks shared with the neighbours). */
static void gen_range(struct thr *th, uint64_t *offp, uint64_t *lenp)
{
	uint64_t k = (uint64_t)th->t + (uint64_t)nthreads * rnd(th, STRIPES_PER_THREAD);
	uint64_t s0 = k * STRIPE;
	uint64_t len = tu_min_u64(gen_len(th), STRIPE), off;
	uint64_t p = rnd(th, 100);
	if (p < 30)
		off = rnd(th, 3) ? 0 : rnd(th, bs); /* at the start edge */
	else if (p < 60)
		off = STRIPE - len - (rnd(th, 3) ? 0 : tu_min_u64(rnd(th, bs), STRIPE - len)); /* at the end edge */
	else
		off = rnd(th, STRIPE - len + 1);
	if (off + len > STRIPE)
		off = STRIPE - len;
	*offp = s0 + off;
	*lenp = len;
}

static struct pc_file *pick_file(struct thr *th)
{
	if (th->own && rnd(th, 5) != 0)
		return th->own;
	return shared_f;
}

static void do_write(struct thr *th, struct pc_file *f, bool vec)
{
	uint64_t off, len;
	gen_range(th, &off, &len);
	int flags = gen_flags(th);
	if ((flags & PC_DIRECT) && rnd(th, 2)) {
		/* aligned direct: only whole blocks inside the own range */
		uint64_t a = tu_round_up(off, bs), b = tu_round_down(off + len, bs);
		if (b > a) {
			off = a;
			len = b - a;
		}
	}
	struct iovec iov[4];
	int niov = vec ? 1 + (int)rnd(th, 4) : 1;
	uint64_t cuts[5] = { 0 };
	cuts[niov] = len;
	for (int i = 1; i < niov; i++)
		cuts[i] = rnd(th, len + 1);
	for (int i = 1; i < niov; i++)
		for (int j = i + 1; j < niov; j++)
			if (cuts[j] < cuts[i]) {
				uint64_t tmp = cuts[i];
				cuts[i] = cuts[j];
				cuts[j] = tmp;
			}
	bool aligned_mem = rnd(th, 2);
	for (int i = 0; i < niov; i++) {
		uint64_t sl = cuts[i + 1] - cuts[i];
		uint64_t po = rnd(th, POOL_SIZE - sl + 1);
		if (aligned_mem)
			po = tu_round_down(po, 4096);
		iov[i].iov_base = pool + po;
		iov[i].iov_len = sl;
	}
	ssize_t n = vec ? pc_pwritev(f, iov, niov, (off_t)off, flags)
			: pc_pwrite(f, iov[0].iov_base, len, (off_t)off, flags);
	if (n < 0 || (uint64_t)n != len) {
		tfail(th, vec ? "pc_pwritev" : "pc_pwrite", off, len, flags, "returned %zd, expected %llu", n,
		      (unsigned long long)len);
		return;
	}
	uint64_t o = off;
	for (int i = 0; i < niov; i++) {
		memcpy(th->model + o, iov[i].iov_base, iov[i].iov_len);
		o += iov[i].iov_len;
	}
}

static void do_read(struct thr *th, struct pc_file *f, bool vec)
{
	uint64_t off, len;
	gen_range(th, &off, &len);
	int flags = gen_flags(th);
	if ((flags & PC_DIRECT) && rnd(th, 2)) {
		uint64_t a = tu_round_up(off, bs), b = tu_round_down(off + len, bs);
		if (b > a) {
			off = a;
			len = b - a;
		}
	}
	uint8_t canary = (uint8_t)(0xa5 ^ th->opno);
	uint64_t mis = rnd(th, 2) ? 0 : rnd(th, 4096);
	uint8_t *buf = th->buf + mis;
	memset(buf, canary, len + GUARD);
	ssize_t n;
	const char *name = vec ? "pc_preadv" : "pc_pread";
	if (vec) {
		/* contiguous segments of buf (gaps are checked by the model tests) */
		struct iovec iov[4];
		int niov = 1 + (int)rnd(th, 4);
		uint64_t left = len, pos = 0;
		for (int i = 0; i < niov; i++) {
			uint64_t sl = i == niov - 1 ? left : rnd(th, left + 1);
			iov[i].iov_base = buf + pos;
			iov[i].iov_len = sl;
			pos += sl;
			left -= sl;
		}
		n = pc_preadv(f, iov, niov, (off_t)off, flags);
	} else {
		n = pc_pread(f, buf, len, (off_t)off, flags);
	}
	if (n < 0 || (uint64_t)n != len) {
		tfail(th, name, off, len, flags, "returned %zd, expected %llu", n, (unsigned long long)len);
		return;
	}
	for (unsigned i = 0; i < GUARD; i++)
		if (buf[len + i] != canary) {
			tfail(th, name, off, len, flags, "wrote past the end of the buffer");
			return;
		}
	tcompare(th, name, off, len, flags, buf, th->model + off, off, len);
}

static void do_zero(struct thr *th, struct pc_file *f, bool punch)
{
	uint64_t off, len;
	gen_range(th, &off, &len);
	int mode = (punch ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE) | FALLOC_FL_KEEP_SIZE;
	if (pc_fallocate(f, mode, (off_t)off, (off_t)len) != 0) {
		tfail(th, punch ? "punch" : "zero_range", off, len, 0, "pc_fallocate failed");
		return;
	}
	memset(th->model + off, 0, len);
}

static void *worker(void *arg)
{
	struct thr *th = arg;
	bool syncer = (th->t % 2) == 0;

	if (phase == PHASE_OWN) {
		th->own = pc_open(cache, path, O_RDWR | (th->t == 1 ? O_DSYNC : 0), 0644);
		if (!th->own) {
			tfail(th, "pc_open", 0, 0, 0, "own handle");
			return NULL;
		}
	}
	for (uint64_t i = 0; i < ops_per_phase && !th->failed; i++, th->opno++) {
		struct pc_file *f = pick_file(th);
		uint64_t p = rnd(th, 1000);
		if (p < 350) {
			th->nops[0]++;
			do_write(th, f, false);
		} else if (p < 450) {
			th->nops[1]++;
			do_write(th, f, true);
		} else if (p < 750) {
			th->nops[2]++;
			do_read(th, f, false);
		} else if (p < 830) {
			th->nops[3]++;
			do_read(th, f, true);
		} else if (p < 870) {
			th->nops[4]++;
			do_zero(th, f, true);
		} else if (p < 900) {
			th->nops[5]++;
			do_zero(th, f, false);
		} else if (p < 930) {
			th->nops[6]++;
			if (syncer) {
				int rc = rnd(th, 2) ? pc_fsync(f) : pc_fdatasync(f);
				if (rc != 0)
					tfail(th, "pc_fsync/pc_fdatasync", 0, 0, 0, "failed");
			}
		} else if (p < 975) {
			th->nops[7]++;
			uint64_t off, len;
			gen_range(th, &off, &len);
			int adv = rnd(th, 10) == 0 ? POSIX_FADV_NOREUSE
				  : rnd(th, 2)     ? POSIX_FADV_DONTNEED
						   : POSIX_FADV_WILLNEED;
			if (pc_fadvise(f, (off_t)off, (off_t)len, adv) != 0)
				tfail(th, "pc_fadvise", off, len, 0, "advice %d failed", adv);
		} else if (p < 985 && th->own) {
			th->nops[8]++;
			/* close and reopen the own handle while others work */
			if (pc_close(th->own) != 0)
				tfail(th, "pc_close", 0, 0, 0, "own handle");
			th->own = pc_open(cache, path, O_RDWR | (rnd(th, 4) == 0 ? O_DIRECT : 0), 0644);
			if (!th->own)
				tfail(th, "pc_open", 0, 0, 0, "own handle (reopen)");
		} else {
			th->nops[9]++;
			off_t s = pc_size(f);
			if (s != (off_t)fsize)
				tfail(th, "pc_size", 0, 0, 0, "returned %lld, expected %llu", (long long)s,
				      (unsigned long long)fsize);
		}
	}
	if (th->own) {
		if (pc_close(th->own) != 0)
			tfail(th, "pc_close", 0, 0, 0, "own handle at end of phase");
		th->own = NULL;
	}
	return NULL;
}

/* The combined model: each stripe from its owner. */
static void combine(struct thr *ths, uint8_t *all)
{
	for (uint64_t k = 0; k * STRIPE < fsize; k++) {
		struct thr *th = &ths[k % (uint64_t)nthreads];
		memcpy(all + k * STRIPE, th->model + k * STRIPE, STRIPE);
	}
}

/* Print where got differs from exp (file offset base): the runs of
 * differing bytes (gaps under 64 bytes merged; up to 6 printed), how many
 * bytes differ, the first and the last. */
static void report_diff(const char *what, const uint8_t *got, const uint8_t *exp, uint64_t base, uint64_t n)
{
	uint64_t first = UINT64_MAX, last = 0, count = 0, runs = 0;
	uint64_t rs = 0, re = 0; /* current run [rs, re) */
	bool in_run = false;
	for (uint64_t i = 0; i <= n; i++) {
		bool d = i < n && got[i] != exp[i];
		if (d) {
			if (first == UINT64_MAX)
				first = i;
			last = i;
			count++;
			if (in_run && i - re < 64) {
				re = i + 1;
				continue;
			}
		}
		if (in_run && (i == n || (d && i - re >= 64))) {
			if (runs < 6)
				fprintf(stderr, "    %s: differing run [%llu, %llu) (%llu bytes; starts at block %llu + %llu, "
					"record/stripe offset %llu)%s\n",
					what, (unsigned long long)(base + rs), (unsigned long long)(base + re),
					(unsigned long long)(re - rs), (unsigned long long)((base + rs) / bs),
					(unsigned long long)((base + rs) % bs), (unsigned long long)((base + rs) % STRIPE),
					got[rs] == 0 && got[re - 1] == 0 ? ", reads zeros" : "");
			runs++;
			in_run = false;
		}
		if (d && !in_run) {
			in_run = true;
			rs = i;
			re = i + 1;
		}
	}
	if (count)
		fprintf(stderr, "%s: %llu bytes differ in %llu runs, first at file offset %llu (expected 0x%02x got 0x%02x), "
			"last at %llu\n",
			what, (unsigned long long)count, (unsigned long long)runs, (unsigned long long)(base + first),
			exp[first], got[first], (unsigned long long)(base + last));
}

static bool verify_cached(struct pc_file *f, const uint8_t *exp, uint64_t size, const char *what)
{
	uint8_t *buf;
	bool ok = true;
	REQUIRE(posix_memalign((void **)&buf, 4096, MiB) == 0);
	off_t s = pc_size(f);
	if (s != (off_t)size) {
		fprintf(stderr, "%s: pc_size %lld, expected %llu\n", what, (long long)s, (unsigned long long)size);
		ok = false;
	}
	for (uint64_t off = 0; off < size && s == (off_t)size; off += MiB) {
		uint64_t want = tu_min_u64(MiB, size - off);
		ssize_t n = pc_pread(f, buf, MiB, (off_t)off, 0);
		if (n < 0 || (uint64_t)n != want) {
			fprintf(stderr, "%s: pc_pread at %llu returned %zd, expected %llu\n", what,
				(unsigned long long)off, n, (unsigned long long)want);
			ok = false;
			break;
		}
		if (memcmp(buf, exp + off, want) != 0) {
			report_diff(what, buf, exp + off, off, want);
			ok = false;
		}
	}
	free(buf);
	return ok;
}

/* The backing file, read with plain O_DIRECT: exactly exp[0, size). */
static bool verify_backing(const char *p, const uint8_t *exp, uint64_t size, const char *what)
{
	size_t dsize, got;
	uint8_t *disk = tu_load_backing(p, &dsize, &got);
	if (!disk)
		return false;
	bool ok = dsize == size && got == dsize;
	if (dsize != size)
		fprintf(stderr, "%s: backing st_size %zu, expected %llu\n", what, dsize, (unsigned long long)size);
	else if (got < dsize)
		fprintf(stderr, "%s: read %zu of the backing file's %zu bytes\n", what, got, dsize);
	if (ok && memcmp(disk, exp, size) != 0) {
		report_diff(what, disk, exp, 0, size);
		ok = false;
	}
	free(disk);
	return ok;
}

/* pc_open(path, O_CREAT | O_TRUNC) in the configuration's cache; a block
 * size that pc_open refuses here (EINVAL) skips the case. */
static struct pc_file *open_or_skip(const char *p)
{
	struct pc_file *f = pc_open(cache, p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f && errno == EINVAL) {
		static char why[128];
		snprintf(why, sizeof(why), "pc_open with block_size %llu fails with EINVAL here",
			 (unsigned long long)bs);
		unlink(p);
		CHECK(pc_cache_destroy(cache) == 0);
		cache = NULL;
		TEST_SKIP_UNSUPPORTED(why);
	}
	return f;
}

static uint64_t run_phase(struct thr *ths, int ph)
{
	phase = ph;
	for (int t = 0; t < nthreads; t++) {
		ths[t].failed = false;
		ths[t].own = NULL;
		REQUIRE(pthread_create(&ths[t].tid, NULL, worker, &ths[t]) == 0);
	}
	uint64_t ops = 0;
	for (int t = 0; t < nthreads; t++) {
		REQUIRE(pthread_join(ths[t].tid, NULL) == 0);
		ops += ops_per_phase;
	}
	return ops;
}

/* ------------------------------------------------ interleaved records */

struct recjob {
	pthread_t tid;
	int t;
	struct pc_file *f;
	uint64_t R, nrec;
	int flags;
	bool failed;
};

static const uint8_t *rec_data(uint64_t i, uint64_t R)
{
	return pool + (i * 1000003ull) % (POOL_SIZE - R);
}

static void *rec_worker(void *arg)
{
	struct recjob *j = arg;
	for (uint64_t i = (uint64_t)j->t; i < j->nrec; i += (uint64_t)nthreads) {
		ssize_t n = pc_pwrite(j->f, rec_data(i, j->R), j->R, (off_t)(i * j->R), j->flags);
		if (n != (ssize_t)j->R) {
			char fb[64];
			fprintf(stderr, "*** records R=%llu flags=%s: thread %d record %llu: pc_pwrite returned %zd (%s)\n",
				(unsigned long long)j->R, tu_flags_str(j->flags, fb, sizeof(fb)), j->t,
				(unsigned long long)i, n, strerror(errno));
			j->failed = true;
			atomic_fetch_add(&failures, 1);
			break;
		}
	}
	return NULL;
}

static uint64_t records_round(uint64_t R, uint64_t total, int flags)
{
	char p[4300], fb[64];
	snprintf(p, sizeof(p), "%s/records-%llu", dir, (unsigned long long)R);
	uint64_t nrec = total / R;
	uint64_t size = nrec * R;
	struct pc_file *f = open_or_skip(p);
	CHECK(f != NULL);
	if (!f)
		return 0;
	struct pc_stats s0, s1;
	pc_file_stats(f, &s0);
	struct recjob jobs[MAX_THREADS];
	double t0 = tu_now_s();
	for (int t = 0; t < nthreads; t++) {
		jobs[t] = (struct recjob){ .t = t, .f = f, .R = R, .nrec = nrec, .flags = flags };
		REQUIRE(pthread_create(&jobs[t].tid, NULL, rec_worker, &jobs[t]) == 0);
	}
	for (int t = 0; t < nthreads; t++)
		REQUIRE(pthread_join(jobs[t].tid, NULL) == 0);
	CHECK(pc_fsync(f) == 0);
	double t1 = tu_now_s();
	pc_file_stats(f, &s1);

	uint8_t *exp = malloc(size + 1);
	REQUIRE(exp);
	for (uint64_t i = 0; i < nrec; i++)
		memcpy(exp + i * R, rec_data(i, R), R);
	char what[128];
	snprintf(what, sizeof(what), "records R=%llu flags=%s (through the cache)", (unsigned long long)R,
		 tu_flags_str(flags, fb, sizeof(fb)));
	CHECK(verify_cached(f, exp, size, what));
	CHECK(pc_close(f) == 0);
	snprintf(what, sizeof(what), "records R=%llu flags=%s (backing file)", (unsigned long long)R,
		 tu_flags_str(flags, fb, sizeof(fb)));
	CHECK(verify_backing(p, exp, size, what));
	printf("  records R=%llu flags=%s: %llu records in %.2f s; device reads %llu ios (rmw_reads %llu), "
	       "edge kept/completed %llu/%llu, cached after fsync %llu B, write_errors %llu\n",
	       (unsigned long long)R, tu_flags_str(flags, fb, sizeof(fb)), (unsigned long long)nrec, t1 - t0,
	       (unsigned long long)(s1.dev_read_ios - s0.dev_read_ios), (unsigned long long)s1.rmw_reads,
	       (unsigned long long)s1.edge_kept, (unsigned long long)s1.edge_completed,
	       (unsigned long long)s1.cached_bytes, (unsigned long long)s1.write_errors);
	free(exp);
	unlink(p);
	return nrec;
}

/* ------------------------------------------------------------- cases */

/* The cases of a shared cache set this. */
static bool in_shared_cache;

/* The cache of configuration cfgno (the globals the workers read set for
 * it, a shared cache's when in_shared_cache); its seed from the base seed,
 * printed. */
static uint64_t start_config(int cfgno, const char *what)
{
	const struct mtcfg *mc = &mtconfigs[cfgno];
	struct pc_config cfg = tu_config(mc->memory_limit);
	cfg.block_size = mc->block_size;
	cfg.max_folio_size = mc->max_folio;
	cfg.flags |= mc->flags;
	char name[64];
	if (in_shared_cache) {
		/* A shared cache, used by this process's threads: what
		 * processes share (heap records, shared futex words, the
		 * descriptor server's thread) under ThreadSanitizer's eyes. */
		snprintf(name, sizeof(name), "mtmodel-%d-%d", (int)getpid(), cfgno);
		cfg.shared_name = name;
	}
	cfgname = mc->name;
	bs = mc->block_size;
	max_folio = mc->max_folio;
	uint64_t seed = base_seed + (uint64_t)cfgno * 0x51ed27ull;
	printf("config %d (%s), %s: seed %llu, %d threads\n", cfgno, mc->name, what, (unsigned long long)seed,
	       nthreads);
	fflush(stdout);
	cache = tu_cache_new(&cfg);
	return seed;
}

/* The shared and the own phase on one file, each thread in its own
 * stripes, checked against the threads' models. */
static uint64_t ops_run; /* operations of the cases run */
static double time_run;  /* and the time they took */

static void own_stripes(int cfgno)
{
	uint64_t seed = start_config(cfgno, "own stripes");
	printf("  %llu ops per thread per phase, phases %s\n", (unsigned long long)ops_per_phase, phases);
	snprintf(path, sizeof(path), "%s/mt-%d", dir, cfgno);
	shared_f = open_or_skip(path);
	CHECK(shared_f != NULL);
	if (!shared_f) {
		pc_cache_destroy(cache);
		return;
	}
	struct pc_stats st;
	pc_file_stats(shared_f, &st);
	bs = st.block_size ? st.block_size : mtconfigs[cfgno].block_size;
	fsize = (uint64_t)nthreads * STRIPES_PER_THREAD * STRIPE;
	/* the file has its final size from the start, so every read is whole */
	CHECK(pc_ftruncate(shared_f, (off_t)fsize) == 0);

	struct thr *ths = calloc((size_t)nthreads, sizeof(*ths));
	uint8_t *all = calloc(1, fsize);
	REQUIRE(ths && all);
	for (int t = 0; t < nthreads; t++) {
		ths[t].t = t;
		ths[t].rng = seed + (uint64_t)(t + 1) * 0x9e3779b97f4a7c15ull;
		ths[t].model = calloc(1, fsize);
		REQUIRE(ths[t].model);
		REQUIRE(posix_memalign((void **)&ths[t].buf, 4096, BUF_SIZE) == 0);
	}

	uint64_t ops = 0;
	double t0 = tu_now_s(), t1 = t0;
	int f0 = atomic_load(&failures);
	if (strstr(phases, "shared")) {
		ops += run_phase(ths, PHASE_SHARED);
		combine(ths, all);
		CHECK(verify_cached(shared_f, all, fsize, "after the shared phase (shared handle)"));
		t1 = tu_now_s();
	}
	if (strstr(phases, "own")) {
		/* on-disk blocks now (not holes): partial overwrites */
		CHECK(pc_fsync(shared_f) == 0);
		ops += run_phase(ths, PHASE_OWN);
		combine(ths, all);
		CHECK(verify_cached(shared_f, all, fsize, "after the own phase (own handles)"));
	}
	/* pc_close leaves write-back to the flusher: fsync, then compare. */
	CHECK(pc_fsync(shared_f) == 0);
	CHECK(pc_close(shared_f) == 0);
	shared_f = NULL;
	pc_cache_stats(cache, &st);
	CHECK(st.dirty_bytes == 0);
	CHECK(verify_backing(path, all, fsize, "after both phases"));
	double t2 = tu_now_s();
	CHECK(atomic_load(&failures) == f0);
	printf("  shared phase %.2f s, own phase %.2f s, %llu ops; evictions %llu, throttle_waits %llu, "
	       "dev reads %llu, rmw_reads %llu, deferred_rmw %llu, write_errors %llu\n",
	       t1 - t0, t2 - t1, (unsigned long long)ops, (unsigned long long)st.evictions,
	       (unsigned long long)st.throttle_waits, (unsigned long long)st.dev_read_ios,
	       (unsigned long long)st.rmw_reads, (unsigned long long)st.deferred_rmw,
	       (unsigned long long)st.write_errors);
	unlink(path);
	ops_run += ops;
	time_run += t2 - t0;

	CHECK(pc_cache_destroy(cache) == 0);
	cache = NULL;
	for (int t = 0; t < nthreads; t++) {
		free(ths[t].model);
		free(ths[t].buf);
	}
	free(ths);
	free(all);
}

/* Records side by side, each written whole by one thread, neighbours by
 * others: the blocks at record boundaries are written by two threads. */
static void interleaved_records(int cfgno)
{
	start_config(cfgno, "interleaved records");
	struct pc_stats st;
	int f0 = atomic_load(&failures);
	double t0 = tu_now_s();
	uint64_t big = quick ? 2 * MiB : 12 * MiB, small = quick ? 1 * MiB : 3 * MiB, n = 0;
	n += records_round(6000, big, PC_DONTCACHE);
	n += records_round(47008, big, PC_DONTCACHE);
	n += records_round(6000, small, PC_DIRECT);
	n += records_round(47008, small, PC_DONTCACHE | PC_DSYNC);
	n += records_round(6000, small, PC_DIRECT | PC_DSYNC);
	CHECK(atomic_load(&failures) == f0);
	pc_cache_stats(cache, &st);
	CHECK(st.dirty_bytes == 0);
	CHECK(pc_cache_destroy(cache) == 0);
	cache = NULL;
	printf("  %llu records in %.1f s\n", (unsigned long long)n, tu_now_s() - t0);
	ops_run += n;
	time_run += tu_now_s() - t0;
}

TEST_CASE(own_stripes_match_model_bs4096)
{
	own_stripes(0);
}

TEST_CASE(interleaved_records_bs4096)
{
	interleaved_records(0);
}

TEST_CASE(own_stripes_match_model_bs16384)
{
	own_stripes(1);
}

TEST_CASE(interleaved_records_bs16384)
{
	interleaved_records(1);
}

TEST_CASE(own_stripes_match_model_shared_cache)
{
	in_shared_cache = true;
	own_stripes(0);
	in_shared_cache = false;
}

TEST_CASE(interleaved_records_shared_cache)
{
	in_shared_cache = true;
	interleaved_records(0);
	in_shared_cache = false;
}

static void mt_model_setup(void)
{
	base_seed = test_seed("test_mt_model", 0x6d746d6f64656cull);
	quick = tu_quick();
	nthreads = 4;
	const char *e = getenv("PC_THREADS");
	if (e && *e)
		nthreads = atoi(e);
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	ops_per_phase = quick ? 600 : 3000;
	e = getenv("PC_OPS");
	if (e && *e)
		ops_per_phase = strtoull(e, NULL, 0);
	e = getenv("PC_MT_PHASES");
	if (e && *e)
		phases = e;

	REQUIRE(posix_memalign((void **)&pool, 4096, POOL_SIZE) == 0);
	uint64_t ps = base_seed ^ 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < POOL_SIZE; i += 8) {
		uint64_t v = tu_rand(&ps);
		memcpy(pool + i, &v, 8);
	}
	dir = test_dir("test_mt_model");
}

/* The total line is what scripts/soak.sh counts operations by. */
static void mt_model_teardown(void)
{
	printf("test_mt_model: %llu operations in %.1f s\n", (unsigned long long)ops_run, time_run);
	test_rmdir(dir);
	free(pool);
}

TEST_FIXTURE(mt_model_setup, mt_model_teardown)
