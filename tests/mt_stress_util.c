/*
 * mt_stress_util.h - the frame of the stress tests (test_mt_stress_*.c):
 * every call at once, from 2 to 64 threads, under a memory limit small
 * enough to force eviction and dirty throttling, with a stall watchdog.
 * This header holds the layout of the files, the workers' state, what the
 * watchdog and the failure reports print, the check of what a read
 * returned, and a round's set-up and end checks; mt_stress_calls.h holds
 * the calls the threads make and the run of a case.
 *
 * A case is a thread count and a cache configuration (the test file's: a
 * block size, a largest folio and a memory limit, with a dirty limit of an
 * eighth of it).  Each round builds a fresh cache and NFILES new files, and
 * every thread mixes, on all the files: pc_pread / pc_pwrite / pc_preadv /
 * pc_pwritev with flags 0, PC_DONTCACHE, PC_DSYNC, PC_DIRECT (aligned or
 * not) and combinations, some with PC_NOWAIT; pc_ftruncate; pc_fallocate in
 * every supported mode; pc_fsync / pc_fdatasync; pc_fadvise DONTNEED /
 * WILLNEED / NOREUSE / NORMAL; pc_open and pc_close of extra handles
 * (O_RDWR, O_DSYNC, O_DIRECT, O_RDONLY) of the same files; pc_size;
 * pc_cache_stats / pc_file_stats.
 *
 * What is exactly checkable despite the concurrency:
 *
 *   layout of each file (T threads, P = 1.5 MiB / T rounded down to
 *   4 KiB, plus 1000):
 *     [0, floor = T*P)          private regions: thread t alone writes,
 *                               punches and zeroes [t*P, (t+1)*P) and keeps
 *                               a model of it.  P is no multiple of a block,
 *                               so neighbours share the block at every
 *                               region boundary.
 *     [floor, floor + SHARED)   shared zone: everybody writes it (always the
 *                               file's one shared pattern, whose byte at an
 *                               offset is a function of the offset), punches,
 *                               zeroes and truncates it (sizes never below
 *                               floor, never above floor + SHARED).
 *
 *   - a read returns exactly the model wherever it covers the reader's own
 *     region; 0 or the shared pattern byte anywhere at or past floor (any
 *     other byte is data from the wrong place or garbage); its length is
 *     exact below floor (the size never goes below it), at least up to
 *     floor, and never past floor + SHARED;
 *   - a write returns its length (PC_NOWAIT: a short count or -1/EAGAIN,
 *     and then the model takes exactly the bytes it says it wrote);
 *     writes, truncates and fallocates through an O_RDONLY handle fail with
 *     EBADF; every other call returns 0;
 *   - pc_size stays in [floor, floor + SHARED]; the counters stay within
 *     the memory limit and the file's block size is the one it had;
 *   - at the end of a round: pc_fsync of every file is 0, every byte read
 *     through the cache passes the checks above for every thread's region,
 *     pc_close returns 0 and leaves nothing dirty, and the backing files
 *     (read with plain O_DIRECT) hold every private region exactly, the
 *     shared zones pass the check, and have exactly the last pc_size; the
 *     same once more after pc_cache_destroy (which returns 0).
 *
 * The watchdog thread: every worker bumps a global progress counter per
 * call and publishes the call it is in.  If the whole process makes no
 * progress for PC_STRESS_STALL_S seconds (default 10; 30 under sanitizers),
 * or the case exceeds its overall bound, it prints every thread's current
 * or last call, a backtrace of all threads (gdb, unless PC_STRESS_GDB=0),
 * and aborts.
 *
 * On the first failed check a thread prints the round, its seed, the call,
 * the first differing byte and its last HIST calls, and stops.
 *
 * Environment: PC_SEED; PC_TEST_QUICK=1 (a quarter of the operations);
 * PC_STRESS_OPS (operations of a case, shared by its threads; default
 * 10000, quick 3000, under sanitizers a quarter of that);
 * PC_STRESS_SECONDS=N (each case runs rounds, each with a new seed, for N
 * seconds instead: the soak); PC_STRESS_STALL_S; PC_STRESS_TIMEOUT_S (the
 * overall bound of a case); PC_STRESS_GDB=0; PC_STRESS_OWN_READS and
 * PC_STRESS_SKIP (mt_stress_calls.h).  A failure replays with the seed and
 * the case: PC_SEED=N ./test_mt_stress_... CASE.
 */
#ifndef PC_MT_STRESS_UTIL_H
#define PC_MT_STRESS_UTIL_H

#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#include "pagecache.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define NFILES 3
#define MAX_THREADS 64
#define PRIVATE_TOTAL (1536 * KiB) /* the private regions of one file */
#define SHARED (1536 * KiB)        /* the shared zone of one file */
#define MAX_IO (160 * KiB)      /* largest read or write */
#define READ_PAST (64 * KiB)    /* reads may start this far past the zone */
#define POOL_SIZE (4 * MiB)     /* random bytes private writes copy from */
#define BUF_SIZE (MAX_IO + 8 * KiB)
#define GUARD 64
#define HIST 12
#define MAIN_SLOT MAX_THREADS /* the main thread's slot in workers[] */

/* A cache configuration of the stress (the dirty limit: an eighth of the
 * memory limit).  `id` goes into the seeds of its rounds. */
struct scfg {
	const char *name;
	int id;
	size_t block_size, max_folio, memory_limit;
};

/* ------------------------------------------------------ operations */

enum op {
	OP_PREAD,
	OP_PREADV,
	OP_PWRITE,
	OP_PWRITEV,
	OP_FTRUNCATE,
	OP_FALLOC,
	OP_FALLOC_KEEP,
	OP_PUNCH,
	OP_ZERO,
	OP_ZERO_KEEP,
	OP_FSYNC,
	OP_FDATASYNC,
	OP_ADV_DONTNEED,
	OP_ADV_WILLNEED,
	OP_ADV_NOREUSE,
	OP_ADV_NORMAL,
	OP_OPEN,
	OP_CLOSE,
	OP_SIZE,
	OP_CACHE_STATS,
	OP_FILE_STATS,
	OP_COUNT,
	/* main thread only: not drawn at random */
	OP_FINAL = OP_COUNT,
	OP_NONE,
};

static const char *const op_names[] = {
	"pc_pread",          "pc_preadv",          "pc_pwrite",          "pc_pwritev",    "pc_ftruncate",
	"fallocate(0)",      "fallocate(KEEP)",    "fallocate(PUNCH)",   "fallocate(ZERO)",
	"fallocate(ZERO|KEEP)", "pc_fsync",        "pc_fdatasync",       "fadvise(DONTNEED)",
	"fadvise(WILLNEED)", "fadvise(NOREUSE)",   "fadvise(NORMAL)",    "pc_open",       "pc_close",
	"pc_size",           "pc_cache_stats",     "pc_file_stats",      "final checks",  "-",
};

/* Weights per operation (relative); PC_STRESS_SKIP zeroes some. */
static unsigned op_weight[OP_COUNT] = {
	[OP_PREAD] = 170,      [OP_PREADV] = 60,     [OP_PWRITE] = 200,      [OP_PWRITEV] = 70,
	[OP_FTRUNCATE] = 30,   [OP_FALLOC] = 8,      [OP_FALLOC_KEEP] = 8,   [OP_PUNCH] = 30,
	[OP_ZERO] = 20,        [OP_ZERO_KEEP] = 20,  [OP_FSYNC] = 8,         [OP_FDATASYNC] = 8,
	[OP_ADV_DONTNEED] = 25, [OP_ADV_WILLNEED] = 20, [OP_ADV_NOREUSE] = 6, [OP_ADV_NORMAL] = 6,
	[OP_OPEN] = 15,        [OP_CLOSE] = 15,      [OP_SIZE] = 15,         [OP_CACHE_STATS] = 8,
	[OP_FILE_STATS] = 8,
};

/* Where an I/O goes. */
enum target { TG_OWN, TG_SHARED, TG_FOREIGN, TG_ANY };
static const char target_ch[] = "osfa";

struct hist {
	int op, file, flags;
	char target;
	uint64_t off, len;
	long long ret;
	int err;
};

struct worker {
	pthread_t tid;
	int t;
	uint64_t seed; /* of this thread in this round */
	uint64_t rng;
	uint8_t *model[NFILES]; /* P bytes each: the own region of each file */
	uint8_t *buf;           /* reads land here, 4 KiB aligned */
	struct pc_file *extra[NFILES];
	int extra_oflags[NFILES];
	bool failed;
	uint64_t limit; /* operations to do (UINT64_MAX: until told to stop) */
	uint64_t done;
	uint64_t ops[OP_COUNT + 1];
	uint64_t eagain, short_nowait, ebadf_ro;
	struct hist hist[HIST];
	unsigned nhist;
	/* What the watchdog sees (relaxed atomics: only for the report). */
	_Atomic int cur_op, cur_file, cur_flags, in_call;
	_Atomic uint64_t cur_off, cur_len, cur_since_ms, cur_done;
};

/* ------------------------------------------------------ shared state */

/* The round: set by the main thread before it starts the workers. */
static int round_no;
static const struct scfg *rcfg;
static int nthreads;
static uint64_t P, floor_;
static uint64_t bs;
static struct pc_cache *cache;
static struct pc_file *main_f[NFILES];
static char paths[NFILES][4200];
static uint8_t *spat[NFILES]; /* shared pattern of the zone, SHARED bytes */
static uint8_t *pool;
static const char *stress_dir; /* the program's scratch directory */

static struct worker workers[MAX_THREADS + 1];
static _Atomic int slots_in_use; /* workers[0, n) are live (+ MAIN_SLOT) */
static _Atomic uint64_t progress;
static _Atomic bool stop_round;
static _Atomic bool watchdog_quit;
static atomic_int failures; /* of the case running */

static uint64_t stall_ms, overall_ms, t_start_ms;
static bool use_gdb = true;

static inline uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? tu_rand(&w->rng) % n : 0;
}

static inline const char *flags_str(int fl, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s%s%s", fl ? "" : "0", (fl & PC_DSYNC) ? "DSYNC " : "",
		 (fl & PC_NOWAIT) ? "NOWAIT " : "", (fl & PC_DONTCACHE) ? "DONTCACHE " : "",
		 (fl & PC_DIRECT) ? "DIRECT " : "");
	return buf;
}

static inline const char *oflags_str(int of)
{
	if ((of & O_ACCMODE) == O_RDONLY)
		return "O_RDONLY";
	if (of & O_DSYNC)
		return "O_RDWR|O_DSYNC";
	if (of & O_DIRECT)
		return "O_RDWR|O_DIRECT";
	return "O_RDWR";
}

/* ------------------------------------------------------ op tracking */

static inline void op_begin(struct worker *w, int op, int file, char target, uint64_t off, uint64_t len, int flags)
{
	struct hist *h = &w->hist[w->nhist++ % HIST];
	*h = (struct hist){ .op = op, .file = file, .flags = flags, .target = target, .off = off, .len = len,
			    .ret = 0, .err = 0 };
	atomic_store_explicit(&w->cur_op, op, memory_order_relaxed);
	atomic_store_explicit(&w->cur_file, file, memory_order_relaxed);
	atomic_store_explicit(&w->cur_flags, flags, memory_order_relaxed);
	atomic_store_explicit(&w->cur_off, off, memory_order_relaxed);
	atomic_store_explicit(&w->cur_len, len, memory_order_relaxed);
	atomic_store_explicit(&w->cur_since_ms, tu_now_ms(), memory_order_relaxed);
	atomic_store_explicit(&w->in_call, 1, memory_order_release);
}

static inline void op_end(struct worker *w, long long ret)
{
	int e = errno;
	struct hist *h = &w->hist[(w->nhist - 1) % HIST];
	h->ret = ret;
	h->err = ret < 0 ? e : 0;
	w->ops[h->op]++;
	w->done++;
	atomic_store_explicit(&w->cur_done, w->done, memory_order_relaxed);
	atomic_store_explicit(&w->cur_since_ms, tu_now_ms(), memory_order_relaxed);
	atomic_store_explicit(&w->in_call, 0, memory_order_release);
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
	errno = e;
}

static inline void print_hist(struct worker *w)
{
	unsigned n = w->nhist < HIST ? w->nhist : HIST;
	fprintf(stderr, "    thread %d, last %u calls (target o=own s=shared f=foreign a=any):\n", w->t, n);
	for (unsigned i = w->nhist - n; i < w->nhist; i++) {
		struct hist *h = &w->hist[i % HIST];
		char fb[64];
		fprintf(stderr, "      %-20s file %d %c off %llu len %llu end %llu flags %s-> %lld%s%s\n",
			op_names[h->op], h->file, h->target ? h->target : '-', (unsigned long long)h->off,
			(unsigned long long)h->len, (unsigned long long)(h->off + h->len),
			flags_str(h->flags, fb, sizeof(fb)), h->ret, h->ret < 0 ? " " : "",
			h->ret < 0 ? strerror(h->err) : "");
	}
}

static inline void wfail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failed check: report it with the context needed to replay, and stop. */
static inline void wfail(struct worker *w, const char *fmt, ...)
{
	char msg[600];
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct hist *h = &w->hist[(w->nhist - 1) % HIST];
	fprintf(stderr,
		"\n*** FAILED round %d (%s, %d threads, P %llu, floor %llu, block %llu) thread %d seed %llu op #%llu "
		"%s file %d: %s (errno %d %s)\n",
		round_no, rcfg->name, nthreads, (unsigned long long)P, (unsigned long long)floor_,
		(unsigned long long)bs, w->t, (unsigned long long)w->seed, (unsigned long long)w->done,
		op_names[h->op], h->file, msg, e, strerror(e));
	print_hist(w);
	w->failed = true;
	atomic_fetch_add(&failures, 1);
}

/* ------------------------------------------------------ the watchdog */

static inline void dump_threads(const char *why)
{
	uint64_t now = tu_now_ms();
	fprintf(stderr, "\n*** WATCHDOG: %s (round %d, %s, %d threads, %.1f s into the case)\n", why, round_no,
		rcfg ? rcfg->name : "-", nthreads, (double)(now - t_start_ms) / 1000.0);
	int n = atomic_load(&slots_in_use);
	for (int i = 0; i <= MAX_THREADS; i++) {
		if (i >= n && i != MAIN_SLOT)
			continue;
		struct worker *w = &workers[i];
		int op = atomic_load_explicit(&w->cur_op, memory_order_relaxed);
		if (op == OP_NONE)
			continue;
		char fb[64];
		bool in = atomic_load_explicit(&w->in_call, memory_order_acquire);
		fprintf(stderr, "  %s %2d: %s %-20s file %d off %llu len %llu flags %sfor %.1f s (%llu calls done)\n",
			i == MAIN_SLOT ? "main  " : "thread", i == MAIN_SLOT ? -1 : i, in ? "IN  " : "last",
			op_names[op], atomic_load_explicit(&w->cur_file, memory_order_relaxed),
			(unsigned long long)atomic_load_explicit(&w->cur_off, memory_order_relaxed),
			(unsigned long long)atomic_load_explicit(&w->cur_len, memory_order_relaxed),
			flags_str(atomic_load_explicit(&w->cur_flags, memory_order_relaxed), fb, sizeof(fb)),
			(double)(now - atomic_load_explicit(&w->cur_since_ms, memory_order_relaxed)) / 1000.0,
			(unsigned long long)atomic_load_explicit(&w->cur_done, memory_order_relaxed));
	}
	fflush(stderr);
	if (use_gdb && system("command -v gdb >/dev/null 2>&1") == 0) {
		char cmd[256];
		fprintf(stderr, "*** WATCHDOG: backtraces of all threads (gdb):\n");
		fflush(stderr);
		snprintf(cmd, sizeof(cmd),
			 "timeout 120 gdb -q -batch -p %d -ex 'set pagination off' -ex 'thread apply all bt' "
			 "</dev/null 1>&2",
			 (int)getpid());
		if (system(cmd) != 0)
			fprintf(stderr, "*** WATCHDOG: gdb failed\n");
	}
	fflush(stderr);
}

static inline void *watchdog_main(void *arg)
{
	(void)arg;
	uint64_t last = atomic_load(&progress), last_change = tu_now_ms();
	while (!atomic_load(&watchdog_quit)) {
		usleep(100 * 1000);
		uint64_t now = tu_now_ms(), p = atomic_load(&progress);
		if (p != last) {
			last = p;
			last_change = now;
		}
		char why[128];
		if (now - last_change > stall_ms)
			snprintf(why, sizeof(why), "no call completed for %.1f s", (double)(now - last_change) / 1000.0);
		else if (now - t_start_ms > overall_ms)
			snprintf(why, sizeof(why), "the case exceeded its bound of %.0f s", (double)overall_ms / 1000.0);
		else
			continue;
		dump_threads(why);
		fprintf(stderr, "*** WATCHDOG: aborting (replay: PC_SEED printed at the top)\n");
		abort();
	}
	return NULL;
}

/* ------------------------------------------------------ content checks */

static inline uint64_t own_start(int t)
{
	return (uint64_t)t * P;
}

/*
 * got[0, n) was read at file offset off.  The regions of the threads in
 * [t0, t1) must equal their models; bytes at and past floor must be 0 or
 * the shared pattern.  On the first bad byte: *bad = its offset and a
 * description in msg; returns false.
 */
static inline bool content_ok(int file, uint64_t off, const uint8_t *got, uint64_t n, int t0, int t1, uint64_t *bad,
		       char *msg, size_t msgsz)
{
	for (int t = t0; t < t1; t++) {
		uint64_t rs = own_start(t), s = off > rs ? off : rs, e = tu_min_u64(off + n, rs + P);
		if (s >= e)
			continue;
		const uint8_t *exp = workers[t].model[file] + (s - rs);
		if (memcmp(got + (s - off), exp, e - s) == 0)
			continue;
		uint64_t i = 0;
		while (got[s - off + i] == exp[i])
			i++;
		*bad = s + i;
		snprintf(msg, msgsz,
			 "private region of thread %d: byte at file offset %llu (region + %llu, block %llu + %llu) is "
			 "0x%02x, expected 0x%02x",
			 t, (unsigned long long)(s + i), (unsigned long long)(s + i - rs),
			 (unsigned long long)((s + i) / bs), (unsigned long long)((s + i) % bs), got[s - off + i],
			 exp[i]);
		return false;
	}
	for (uint64_t o = off > floor_ ? off : floor_; o < off + n; o++) {
		uint8_t b = got[o - off];
		if (o >= floor_ + SHARED) {
			*bad = o;
			snprintf(msg, msgsz, "data past the largest size %llu at offset %llu",
				 (unsigned long long)(floor_ + SHARED), (unsigned long long)o);
			return false;
		}
		if (b != 0 && b != spat[file][o - floor_]) {
			*bad = o;
			snprintf(msg, msgsz,
				 "shared zone: byte at file offset %llu (zone + %llu, block %llu + %llu) is 0x%02x, "
				 "expected 0 or 0x%02x",
				 (unsigned long long)o, (unsigned long long)(o - floor_), (unsigned long long)(o / bs),
				 (unsigned long long)(o % bs), b, spat[file][o - floor_]);
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------ a round */

static struct worker *const mainw = &workers[MAIN_SLOT];

/* A failed end-of-round check (main thread). */
static inline void main_fail(const char *what, int file, const char *msg)
{
	fprintf(stderr, "\n*** FAILED round %d (%s, %d threads, P %llu, floor %llu, block %llu): %s, file %d: %s\n",
		round_no, rcfg->name, nthreads, (unsigned long long)P, (unsigned long long)floor_,
		(unsigned long long)bs, what, file, msg);
	atomic_fetch_add(&failures, 1);
	CHECK(false);
}

/* Read [0, size) of a file through the cache into buf and check it all. */
static inline void verify_through_cache(int file, uint8_t *buf, uint64_t size)
{
	for (uint64_t off = 0; off < size; off += MiB) {
		uint64_t want = tu_min_u64(MiB, size - off);
		op_begin(mainw, OP_PREAD, file, 'a', off, want, 0);
		ssize_t n = pc_pread(main_f[file], buf + off, want, (off_t)off, 0);
		op_end(mainw, n);
		if (n != (ssize_t)want) {
			char msg[128];
			snprintf(msg, sizeof(msg), "pc_pread at %llu returned %zd, expected %llu (%s)",
				 (unsigned long long)off, n, (unsigned long long)want, strerror(errno));
			main_fail("final read through the cache", file, msg);
			return;
		}
	}
	uint64_t bad;
	char msg[400];
	if (!content_ok(file, 0, buf, size, 0, nthreads, &bad, msg, sizeof(msg)))
		main_fail("final read through the cache", file, msg);
}

/* The backing file, read with plain O_DIRECT: exactly `size` bytes that
 * pass the checks. */
static inline void verify_backing(int file, uint64_t size, const char *what)
{
	size_t dsize;
	uint8_t *disk = tu_read_backing(paths[file], &dsize);
	char msg[400];
	uint64_t bad;
	if (dsize != size) {
		snprintf(msg, sizeof(msg), "size %zu, expected the last pc_size %llu", dsize, (unsigned long long)size);
		main_fail(what, file, msg);
	} else if (!content_ok(file, 0, disk, size, 0, nthreads, &bad, msg, sizeof(msg))) {
		main_fail(what, file, msg);
	}
	free(disk);
}

/* Everything synced, checked through the cache, closed, destroyed, and
 * checked on disk.  Prints the cache's counters; returns its evictions. */
static inline uint64_t finish_round(void)
{
	uint64_t sizes[NFILES];
	uint8_t *buf = malloc(floor_ + SHARED);
	REQUIRE(buf);
	for (int i = 0; i < NFILES; i++) {
		op_begin(mainw, OP_FSYNC, i, 0, 0, 0, 0);
		int rc = pc_fsync(main_f[i]);
		op_end(mainw, rc);
		CHECK(rc == 0);
		off_t s = pc_size(main_f[i]);
		CHECK(s >= (off_t)floor_ && s <= (off_t)(floor_ + SHARED));
		sizes[i] = (uint64_t)s;
		verify_through_cache(i, buf, sizes[i]);
	}
	struct pc_stats st;
	pc_cache_stats(cache, &st);
	for (int i = 0; i < NFILES; i++) {
		op_begin(mainw, OP_CLOSE, i, 0, 0, 0, 0);
		int rc = pc_close(main_f[i]);
		op_end(mainw, rc);
		CHECK(rc == 0);
		main_f[i] = NULL;
	}
	/* The last close of a file wrote all of it back: nothing is dirty and
	 * the backing files are complete before pc_cache_destroy. */
	struct pc_stats after;
	pc_cache_stats(cache, &after);
	if (after.dirty_bytes || after.writeback_bytes) {
		char msg[128];
		snprintf(msg, sizeof(msg), "dirty_bytes %llu, writeback_bytes %llu",
			 (unsigned long long)after.dirty_bytes, (unsigned long long)after.writeback_bytes);
		main_fail("after the last pc_close of every file", -1, msg);
	}
	for (int i = 0; i < NFILES; i++)
		verify_backing(i, sizes[i], "backing file after the last pc_close");
	op_begin(mainw, OP_FINAL, -1, 0, 0, 0, 0);
	int rc = pc_cache_destroy(cache);
	op_end(mainw, rc);
	CHECK(rc == 0);
	cache = NULL;
	for (int i = 0; i < NFILES; i++) {
		verify_backing(i, sizes[i], "backing file after pc_cache_destroy");
		unlink(paths[i]);
	}
	free(buf);
	printf("  counters: evictions %llu, throttle_waits %llu, peak_dirty %llu, dev reads %llu, dev writes %llu, "
	       "rmw_reads %llu, deferred_rmw %llu, edge kept/completed/expired %llu/%llu/%llu, dropbehind %llu, "
	       "write_errors %llu\n",
	       (unsigned long long)st.evictions, (unsigned long long)st.throttle_waits,
	       (unsigned long long)st.peak_dirty_bytes, (unsigned long long)st.dev_read_ios,
	       (unsigned long long)st.dev_write_ios, (unsigned long long)st.rmw_reads,
	       (unsigned long long)st.deferred_rmw, (unsigned long long)st.edge_kept,
	       (unsigned long long)st.edge_completed, (unsigned long long)st.edge_expired,
	       (unsigned long long)st.dropbehind_drops, (unsigned long long)st.write_errors);
	return st.evictions;
}

/* Fresh cache and files for the round; P and floor from the thread count. */
static inline void setup_round(uint64_t seed)
{
	P = tu_round_down(PRIVATE_TOTAL / (uint64_t)nthreads, 4096) + 1000;
	floor_ = (uint64_t)nthreads * P;
	struct pc_config cfg = tu_config(rcfg->memory_limit);
	cfg.max_folio_size = rcfg->max_folio;
	cfg.block_size = rcfg->block_size;
	/* a small dirty limit: writers meet the throttle */
	cfg.dirty_limit_bytes = rcfg->memory_limit / 8;
	cache = tu_cache_new(&cfg);
	for (int i = 0; i < NFILES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "stress-%d", i);
		test_path(paths[i], sizeof(paths[i]), stress_dir, name);
		main_f[i] = pc_open(cache, paths[i], O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (!main_f[i] && errno == EINVAL && i == 0 && cfg.block_size) {
			/* this file system refuses the block size: its own */
			printf("  note: pc_open refuses block_size %zu here; using the file system's\n", cfg.block_size);
			REQUIRE(pc_cache_destroy(cache) == 0);
			cfg.block_size = 0;
			cache = tu_cache_new(&cfg);
			main_f[i] = pc_open(cache, paths[i], O_RDWR | O_CREAT | O_TRUNC, 0644);
		}
		REQUIRE(main_f[i]);
		REQUIRE(pc_ftruncate(main_f[i], (off_t)(floor_ + SHARED / 2)) == 0);
		tu_fill_pattern(spat[i], SHARED, tu_mix64(seed + (uint64_t)i + 1), floor_);
	}
	struct pc_stats st;
	pc_file_stats(main_f[0], &st);
	bs = st.block_size;
	REQUIRE(bs >= 512);
}

static inline void init_worker(struct worker *w, int t, uint64_t seed, uint64_t limit)
{
	uint8_t *buf = w->buf;
	memset(w, 0, sizeof(*w));
	w->t = t;
	w->buf = buf;
	w->seed = tu_mix64(seed ^ ((uint64_t)(t + 1) * 0x9e3779b97f4a7c15ull));
	if (!w->seed)
		w->seed = 1;
	w->rng = w->seed;
	w->limit = limit;
	atomic_store(&w->cur_op, OP_NONE);
	for (int i = 0; i < NFILES; i++) {
		w->model[i] = calloc(1, P); /* the files start as zeros */
		REQUIRE(w->model[i]);
	}
}


/* Add this round's counts of calls (and outcomes) to the totals. */
static inline uint64_t collect_counts(uint64_t totals[OP_COUNT + 1], uint64_t outcomes[3])
{
	uint64_t sum = 0;
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &workers[t];
		for (int i = 0; i < OP_COUNT; i++) {
			totals[i] += w->ops[i];
			sum += w->ops[i];
		}
		outcomes[0] += w->eagain;
		outcomes[1] += w->short_nowait;
		outcomes[2] += w->ebadf_ro;
	}
	return sum;
}

static inline void free_models(void)
{
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < NFILES; i++) {
			free(workers[t].model[i]);
			workers[t].model[i] = NULL;
		}
}

static inline void print_counts(const uint64_t totals[OP_COUNT + 1], const uint64_t outcomes[3])
{
	printf("operations by kind:\n");
	for (int i = 0; i < OP_COUNT; i++)
		printf("  %-22s %llu\n", op_names[i], (unsigned long long)totals[i]);
	printf("  (PC_NOWAIT: %llu EAGAIN, %llu short; %llu EBADF through O_RDONLY handles)\n",
	       (unsigned long long)outcomes[0], (unsigned long long)outcomes[1], (unsigned long long)outcomes[2]);
}

static inline uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *e = getenv(name);
	return e && *e ? strtoull(e, NULL, 0) : dflt;
}

#endif
