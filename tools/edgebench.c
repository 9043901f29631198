/*
 * edgebench - the tables of issue 3 (uncached writes, edge blocks,
 * writeback kick), side by side with the kernel in one run.
 *
 *   edgebench [--dir D] [--total BYTES] [--threads N] [--records LIST]
 *             [--seq-total BYTES] [--mem BYTES] [--block-size BYTES]
 *             [--skip-overwrite] [--skip-seq] [--skip-compete]
 *             [--no-io-uring] [--only WORD[,WORD...]]
 *
 * Table 1 (new file) - the table of seeds/dontcache-edge-pages.txt: N threads
 * (default 32) write interleaved records to one new file: record i, of R
 * bytes, at offset i*R, by thread i mod N, each thread writing its records
 * in increasing order, total/R records.  For every record size and every
 * path:
 *
 *   kernel buffered              pwritev2(flags 0) on a normal descriptor
 *   kernel uncached              pwritev2(RWF_DONTCACHE)
 *   kernel uncached+dsync        pwritev2(RWF_DONTCACHE | RWF_DSYNC)
 *   pagecache uncached           pc_pwrite(PC_DONTCACHE)
 *   pagecache uncached+dsync     pc_pwrite(PC_DONTCACHE | PC_DSYNC)
 *   pagecache direct             pc_pwrite(PC_DIRECT) (unaligned: aligned
 *                                middle with O_DIRECT, ends uncached)
 *   pagecache direct+dsync       pc_pwrite(PC_DIRECT | PC_DSYNC)
 *
 * Each run ends with fsync (pc_fsync) inside the timing.  Printed: MiB/s;
 * device 4 KiB reads per write counted by the library (dev_read_bytes / 4096
 * / writes; pagecache rows only) and by the block device (read sectors of
 * /sys/dev/block/MAJ:MIN/stat of the file's device, before and after the
 * run, * 512 / 4096 / writes; the device may be shared with other
 * programs, whose reads then show up here) and, as a third count immune to
 * other programs, by this process's read_bytes in /proc/self/io (block-layer
 * reads submitted by any of its threads); bytes left cached after the
 * fsync (pagecache: pc_cache_stats cached_bytes; kernel: the file's pages
 * resident in the kernel's page cache, by mmap + mincore).  Before each run
 * the file is dropped from the kernel's cache and deleted; every pagecache
 * run uses a fresh cache of --mem bytes.
 *
 * Table 2 (overwrite): the same over a file that already holds --total bytes
 * (written with 1 MiB writes and fsynced once before the table; before each
 * run its kernel cache is dropped: fdatasync + fadvise(DONTNEED) +
 * drop_caches when root).
 *
 * Table 3 (sequential): one writer, 1 MiB writes, --seq-total bytes to a new
 * file, then fsync: kernel buffered, kernel O_DIRECT, kernel RWF_DONTCACHE,
 * pagecache uncached (with its paced sleeps and limit waits).
 * MiB/s (with the fsync), p99 / p99.9 / max latency of the write calls, and
 * peak dirty bytes: for pagecache the library's peak_dirty_bytes; for the
 * kernel the highest Dirty + Writeback of /proc/meminfo sampled every 10 ms
 * by a thread (system-wide, so other programs' dirty data counts; the value
 * before the run is printed as the baseline).
 *
 * Table 4 (competing writers): two threads each write their own new file
 * with 1 MiB writes until one has written --seq-total / 2: kernel buffered
 * against kernel RWF_DONTCACHE, pagecache buffered against pagecache
 * PC_DONTCACHE, and pagecache buffered against itself as the baseline.
 * Each writer's MiB/s over the time both ran (write calls only, no fsync:
 * the kernel's buffered writer may not have written anything yet), its
 * p99 / p99.9 write latency, the aggregate, and the share (slower /
 * faster; 1.00 is fair).
 *
 * Targets, printed beside the figures: pagecache 0.000 library-counted
 * reads per write for records that are not multiples of 4 KiB (table 1: all
 * pagecache rows; table 2: pagecache uncached without DSYNC); pagecache
 * uncached MiB/s >= kernel buffered MiB/s of the same record size in the
 * same run; "almost nothing" (at most 1 % of the bytes written) cached after
 * the fsync on pagecache rows.  The exit status is 0 unless the arguments or
 * the setup (the directory) are bad; a failed call is reported with its
 * name and errno in the row.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "pagecache.h"
#include "benchutil.h"

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif

#define MAX_RECORDS 16
#define CACHED_UNKNOWN INT64_MIN

struct opts {
	const char *dir;
	uint64_t total;
	int threads;
	uint64_t records[MAX_RECORDS];
	int nrecords;
	uint64_t seq_total;
	uint64_t mem;
	uint64_t block_size;   /* pc_config.block_size; 0: the library's choice */
	bool skip_overwrite, skip_seq, skip_compete;
	bool no_io_uring;      /* PC_CFG_NO_IO_URING: the synchronous fallback */
	const char *only;      /* run only paths whose name contains this */
};

static struct opts o = {
	.dir = ".",
	.total = BU_GiB,
	.threads = 32,
	.seq_total = 4 * BU_GiB,
	.mem = 256 * BU_MiB,
};

static char devstat[128];      /* "" when the device has no counters */

enum kind { K_KERNEL, K_PC };

struct path_def {
	const char *name;
	enum kind kind;
	int flags;   /* RWF_* or PC_* */
};

static const struct path_def paths[] = {
	{ "kernel buffered", K_KERNEL, 0 },
	{ "kernel uncached", K_KERNEL, RWF_DONTCACHE },
	{ "kernel uncached+dsync", K_KERNEL, RWF_DONTCACHE | RWF_DSYNC },
	{ "pagecache uncached", K_PC, PC_DONTCACHE },
	{ "pagecache uncached+dsync", K_PC, PC_DONTCACHE | PC_DSYNC },
	{ "pagecache direct", K_PC, PC_DIRECT },
	{ "pagecache direct+dsync", K_PC, PC_DIRECT | PC_DSYNC },
};
#define NPATHS (int)(sizeof(paths) / sizeof(paths[0]))

/* The result of one run. */
struct result {
	bool ok;
	bool unsupported;      /* the kernel refused the flag (EOPNOTSUPP) */
	char err[256];         /* the failed call, with errno */
	uint64_t writes;
	double secs, mibs;
	double lib_rpw;        /* NAN for kernel rows */
	double dev_rpw;        /* NAN when the device has no counters */
	double proc_rpw;       /* /proc/self/io read_bytes; NAN if unavailable */
	int64_t cached;        /* bytes left cached after fsync; CACHED_UNKNOWN
				* when not measured; negative: the library's
				* counter wrapped below zero (shown as is) */
	struct pc_stats st;    /* pagecache rows: cache stats after fsync */
	uint64_t max_drift;    /* most records between slowest and fastest thread */
};

/* ------------------------------------------------------------ workers */

struct job {
	enum kind kind;
	int flags;
	int fd;
	struct pc_file *pf;
	uint64_t rsize, nrec;
	int nthreads;
	pthread_barrier_t bar;
	atomic_bool stop;
	atomic_int err_set;
	int err_no;
	char err_what[128];
};

struct worker {
	struct job *j;
	int t;
	char *buf;
	pthread_t th;
	atomic_uint_fast64_t done; /* records written, for the drift sampler */
	atomic_bool finished;
};

static void job_fail(struct job *j, const char *what, int e, uint64_t off)
{
	int expected = 0;

	if (atomic_compare_exchange_strong(&j->err_set, &expected, 1)) {
		j->err_no = e;
		snprintf(j->err_what, sizeof(j->err_what), "%s at offset %" PRIu64,
			 what, off);
	}
	atomic_store(&j->stop, true);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct job *j = w->j;
	uint64_t i;

	pthread_barrier_wait(&j->bar);
	for (i = (uint64_t)w->t; i < j->nrec; i += (uint64_t)j->nthreads) {
		uint64_t off = i * j->rsize;

		if (atomic_load_explicit(&j->stop, memory_order_relaxed))
			break;
		if (j->kind == K_KERNEL) {
			size_t done = 0;

			while (done < j->rsize) {
				struct iovec iov = { w->buf + done, j->rsize - done };
				ssize_t n = pwritev2(j->fd, &iov, 1, (off_t)(off + done),
						     j->flags);

				if (n <= 0) {
					job_fail(j, "pwritev2", n < 0 ? errno : EIO, off);
					atomic_store(&w->finished, true);
					return NULL;
				}
				done += (size_t)n;
			}
		} else {
			ssize_t n = pc_pwrite(j->pf, w->buf, j->rsize, (off_t)off,
					      j->flags);

			if (n != (ssize_t)j->rsize) {
				job_fail(j, "pc_pwrite", n < 0 ? errno : EIO, off);
				break;
			}
		}
		atomic_fetch_add_explicit(&w->done, 1, memory_order_relaxed);
	}
	atomic_store(&w->finished, true);
	return NULL;
}

/*
 * Wait for the workers, sampling how far apart they run.  Edge blocks are
 * completed by the neighbouring thread's record, so the spread between the
 * slowest and fastest running thread (in records) is how long an edge must
 * wait; it is printed with the run's details.
 */
static uint64_t wait_workers_sampling_drift(struct worker *w, int n)
{
	uint64_t max_drift = 0;
	for (;;) {
		uint64_t lo = UINT64_MAX, hi = 0;
		int running = 0;
		for (int t = 0; t < n; t++) {
			uint64_t d = atomic_load_explicit(&w[t].done, memory_order_relaxed);
			hi = d > hi ? d : hi;
			if (atomic_load(&w[t].finished))
				continue;
			running++;
			lo = d < lo ? d : lo;
		}
		if (!running)
			break;
		if (hi - lo > max_drift)
			max_drift = hi - lo;
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	for (int t = 0; t < n; t++)
		pthread_join(w[t].th, NULL);
	return max_drift;
}

static struct pc_cache *new_cache(void)
{
	struct pc_config cfg;

	pc_config_init(&cfg);
	cfg.memory_limit = (size_t)o.mem;
	cfg.block_size = (size_t)o.block_size;
	if (o.no_io_uring)
		cfg.flags |= PC_CFG_NO_IO_URING;
	return pc_cache_new(&cfg);
}

#define FAIL(res, what) do { \
		int e_ = errno; \
		snprintf((res)->err, sizeof((res)->err), "%s failed: %s (errno %d)", \
			 what, strerror(e_), e_); \
		fprintf(stderr, "edgebench: %s\n", (res)->err); \
	} while (0)

/*
 * One run of the interleaved workload on `file` (new or existing, already
 * prepared by the caller).
 */
static void run_interleaved(const struct path_def *p, const char *file,
			    uint64_t rsize, bool overwrite, struct result *res)
{
	struct job j;
	struct worker *w;
	struct pc_cache *c = NULL;
	struct pc_stats s0, s1;
	int64_t sec0, sec1, prb0, prb1;
	uint64_t t0, t1;
	int t, oflags = O_RDWR | O_CREAT | (overwrite ? 0 : O_EXCL);

	memset(res, 0, sizeof(*res));
	memset(&j, 0, sizeof(j));
	res->cached = CACHED_UNKNOWN;
	res->lib_rpw = NAN;
	res->dev_rpw = NAN;
	res->proc_rpw = NAN;
	j.kind = p->kind;
	j.flags = p->flags;
	j.fd = -1;
	j.rsize = rsize;
	j.nrec = o.total / rsize;
	j.nthreads = o.threads;
	res->writes = j.nrec;
	if (j.nrec == 0) {
		snprintf(res->err, sizeof(res->err), "--total below one record");
		return;
	}

	if (p->kind == K_KERNEL) {
		j.fd = open(file, oflags | O_CLOEXEC, 0644);
		if (j.fd < 0) {
			FAIL(res, "open");
			return;
		}
	} else {
		c = new_cache();
		if (!c) {
			FAIL(res, "pc_cache_new");
			return;
		}
		j.pf = pc_open(c, file, oflags, 0644);
		if (!j.pf) {
			FAIL(res, overwrite ? "pc_open(O_RDWR|O_CREAT)" :
					      "pc_open(O_RDWR|O_CREAT|O_EXCL)");
			pc_cache_destroy(c);
			return;
		}
		pc_cache_stats(c, &s0);
	}

	w = calloc((size_t)o.threads, sizeof(*w));
	if (!w)
		bu_die("out of memory");
	pthread_barrier_init(&j.bar, NULL, (unsigned)o.threads + 1);
	for (t = 0; t < o.threads; t++) {
		w[t].j = &j;
		w[t].t = t;
		w[t].buf = bu_alloc_aligned((size_t)rsize, 4096);
		bu_fill_random(w[t].buf, (size_t)rsize, (uint64_t)t + 1000);
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]) != 0)
			bu_die("pthread_create");
	}

	sec0 = bu_dev_read_sectors(devstat);
	prb0 = bu_proc_read_bytes();
	pthread_barrier_wait(&j.bar);
	t0 = bu_now_ns();
	res->max_drift = wait_workers_sampling_drift(w, o.threads);
	if (!atomic_load(&j.err_set)) {
		if (p->kind == K_KERNEL) {
			if (fsync(j.fd) < 0)
				job_fail(&j, "fsync", errno, 0);
		} else if (pc_fsync(j.pf) < 0) {
			job_fail(&j, "pc_fsync", errno, 0);
		}
	}
	t1 = bu_now_ns();
	sec1 = bu_dev_read_sectors(devstat);
	prb1 = bu_proc_read_bytes();

	if (atomic_load(&j.err_set)) {
		if (p->kind == K_KERNEL && j.err_no == EOPNOTSUPP)
			res->unsupported = true;
		snprintf(res->err, sizeof(res->err), "%s failed: %s (errno %d)",
			 j.err_what, strerror(j.err_no), j.err_no);
		if (!res->unsupported)
			fprintf(stderr, "edgebench: %s R=%" PRIu64 ": %s\n", p->name,
				rsize, res->err);
	} else {
		res->ok = true;
		res->secs = bu_secs(t1 - t0);
		res->mibs = (double)(j.nrec * rsize) / BU_MiB / res->secs;
		if (sec0 >= 0 && sec1 >= 0)
			res->dev_rpw = (double)(sec1 - sec0) * 512.0 / 4096.0 /
				       (double)j.nrec;
		if (prb0 >= 0 && prb1 >= 0)
			res->proc_rpw = (double)(prb1 - prb0) / 4096.0 /
					(double)j.nrec;
	}

	if (p->kind == K_KERNEL) {
		if (res->ok) {
			res->cached = bu_kernel_resident_bytes(file);
			if (res->cached < 0)
				res->cached = CACHED_UNKNOWN;
		}
		close(j.fd);
	} else {
		struct pc_stats fs;

		pc_file_stats(j.pf, &fs);
		pc_cache_stats(c, &s1);
		res->st = s1;
		res->st.block_size = fs.block_size;
		res->st.dev_read_ios -= s0.dev_read_ios;
		res->st.dev_read_bytes -= s0.dev_read_bytes;
		res->st.dev_write_ios -= s0.dev_write_ios;
		res->st.dev_write_bytes -= s0.dev_write_bytes;
		if (res->ok) {
			res->cached = (int64_t)s1.cached_bytes;
			res->lib_rpw = (double)res->st.dev_read_bytes / 4096.0 /
				       (double)j.nrec;
		}
		if (pc_close(j.pf) < 0 && res->ok) {
			FAIL(res, "pc_close");
			res->ok = false;
		}
		if (pc_cache_destroy(c) < 0 && res->ok) {
			FAIL(res, "pc_cache_destroy");
			res->ok = false;
		}
	}
	pthread_barrier_destroy(&j.bar);
	for (t = 0; t < o.threads; t++)
		free(w[t].buf);
	free(w);
}

/* ------------------------------------------------------------ tables */

static void fmt_rpw(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else
		snprintf(b, len, "%.3f", v);
}

static void fmt_cached(char *b, size_t len, int64_t v)
{
	if (v == CACHED_UNKNOWN)
		snprintf(b, len, "?");
	else if (v < 0)
		snprintf(b, len, "%" PRId64 "B!", v); /* counter below zero */
	else if (v >= (int64_t)BU_MiB)
		snprintf(b, len, "%.1f MiB", (double)v / BU_MiB);
	else if (v >= (int64_t)BU_KiB)
		snprintf(b, len, "%.1f KiB", (double)v / BU_KiB);
	else
		snprintf(b, len, "%" PRId64 " B", v);
}

static bool rpw_target_applies(const struct path_def *p, uint64_t rsize,
			       bool overwrite)
{
	if (p->kind != K_PC || rsize % 4096 == 0)
		return false;
	if (!overwrite)
		return true;
	return p->flags == PC_DONTCACHE;
}

struct verdicts {
	int pass, fail;
};

static void print_row_header(void)
{
	printf("%-7s %-26s %9s %8s %8s %8s %10s  %s\n", "record", "path", "MiB/s",
	       "lib r/w", "dev r/w", "proc r/w", "cached", "targets");
}

static void print_row(const struct path_def *p, uint64_t rsize, bool overwrite,
		      const struct result *r, double kbuf_mibs, struct verdicts *v)
{
	char mibs[32], lib[32], dev[32], prc[32], cached[32], tgt[256] = "";
	size_t l;

	if (!r->ok) {
		printf("%-7" PRIu64 " %-26s %9s %8s %8s %8s %10s  %s\n", rsize, p->name,
		       r->unsupported ? "unsupp." : "error", "-", "-", "-", "-",
		       r->err);
		if (p->kind == K_PC) {
			v->fail++;
		}
		return;
	}
	snprintf(mibs, sizeof(mibs), "%.1f", r->mibs);
	fmt_rpw(lib, sizeof(lib), r->lib_rpw);
	if (devstat[0])
		fmt_rpw(dev, sizeof(dev), r->dev_rpw);
	else
		snprintf(dev, sizeof(dev), "n/a");
	if (isnan(r->proc_rpw))
		snprintf(prc, sizeof(prc), "n/a");
	else
		fmt_rpw(prc, sizeof(prc), r->proc_rpw);
	fmt_cached(cached, sizeof(cached), r->cached);

	if (rpw_target_applies(p, rsize, overwrite)) {
		/* "0.000" as printed: below 0.0005 reads per write */
		bool ok = r->lib_rpw < 0.0005;

		l = strlen(tgt);
		snprintf(tgt + l, sizeof(tgt) - l, "lib r/w 0.000 %s; ",
			 ok ? "PASS" : "FAIL");
		ok ? v->pass++ : v->fail++;
	}
	if (p->kind == K_PC && p->flags == PC_DONTCACHE && !isnan(kbuf_mibs)) {
		bool ok = r->mibs >= kbuf_mibs;

		l = strlen(tgt);
		snprintf(tgt + l, sizeof(tgt) - l, ">= kernel buffered (%.1f) %s; ",
			 kbuf_mibs, ok ? "PASS" : "FAIL");
		ok ? v->pass++ : v->fail++;
	}
	if (p->kind == K_PC) {
		bool ok = r->cached >= 0 &&
			  (uint64_t)r->cached <= r->writes * rsize / 100;

		l = strlen(tgt);
		snprintf(tgt + l, sizeof(tgt) - l, "cached <= 1%% %s",
			 ok ? "PASS" : "FAIL");
		ok ? v->pass++ : v->fail++;
	}
	printf("%-7" PRIu64 " %-26s %9s %8s %8s %8s %10s  %s\n", rsize, p->name, mibs,
	       lib, dev, prc, cached, tgt);
}

static void print_details(const struct path_def *p, uint64_t rsize,
			  const struct result *r)
{
	const struct pc_stats *s = &r->st;

	if (!r->ok)
		return;
	printf("        %-26s R=%-6" PRIu64 " %.2f s, %" PRIu64 " writes; threads "
	       "drifted up to %" PRIu64 " records apart (%s of file)%s",
	       p->name, rsize, r->secs, r->writes, r->max_drift,
	       bu_human(r->max_drift * rsize * (uint64_t)o.threads),
	       p->kind == K_PC ? ";\n" : "\n");
	if (p->kind != K_PC)
		return;
	printf("        %-26s device reads %"
	       PRIu64 " (%s), writes %" PRIu64 " (%s); edges kept %" PRIu64
	       " completed %" PRIu64 " expired %" PRIu64 " evicted (budget) %" PRIu64
	       " evictions %" PRIu64 "; deferred rmw %" PRIu64
	       ", rmw reads %" PRIu64 "; drops %" PRIu64 ", kicks %" PRIu64
	       ", throttle waits %" PRIu64 ", peak dirty %s; io_uring %u, "
	       "block size %u\n",
	       "", s->dev_read_ios,
	       bu_human(s->dev_read_bytes), s->dev_write_ios,
	       bu_human(s->dev_write_bytes), s->edge_kept, s->edge_completed,
	       s->edge_expired, s->edge_evicted_budget, s->evictions, s->deferred_rmw, s->rmw_reads, s->dropbehind_drops,
	       s->flusher_kicks, s->throttle_waits, bu_human(s->peak_dirty_bytes),
	       s->io_uring, s->block_size);
}

/* Does the path name contain one of the comma-separated words of `list`? */
static bool name_selected(const char *name, const char *list)
{
	char word[64];
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n && n < sizeof(word)) {
			memcpy(word, p, n);
			word[n] = '\0';
			if (strstr(name, word))
				return true;
		}
		p += n + (p[n] == ',');
	}
	return false;
}

static void interleaved_table(bool overwrite, struct verdicts *v)
{
	char file[PATH_MAX];
	int ri, pi;
	static struct result res[MAX_RECORDS][NPATHS];

	bu_join(file, sizeof(file), o.dir, overwrite ? "edgebench-over.dat" :
						       "edgebench-new.dat");
	printf("\n== Table %d: %s: %d threads, interleaved records, %s per run, "
	       "fsync included ==\n", overwrite ? 2 : 1,
	       overwrite ? "overwrite of existing data" : "new file", o.threads,
	       bu_human(o.total));
	if (overwrite) {
		printf("(writing and syncing %s of existing data first)\n",
		       bu_human(o.total));
		unlink(file);
		bu_make_file(file, o.total, 77);
	}
	printf("4 KiB device reads per write counted three ways: lib r/w: the "
	       "library's dev_read_bytes/4096/writes; dev r/w: %s read "
	       "sectors*512/4096/writes (the whole device: other programs' reads "
	       "count too); proc r/w: /proc/self/io read_bytes/4096/writes (this "
	       "process only).  cached: bytes left cached after the fsync\n",
	       devstat[0] ? devstat : "(no device counters: n/a)");
	print_row_header();
	for (ri = 0; ri < o.nrecords; ri++) {
		uint64_t rsize = o.records[ri];
		double kbuf = NAN;

		for (pi = 0; pi < NPATHS; pi++) {
			const struct path_def *p = &paths[pi];
			struct result *r = &res[ri][pi];

			if (o.only && !name_selected(p->name, o.only))
				continue;
			if (overwrite) {
				int64_t left;

				if (bu_drop_file_cache(file, true) < 0)
					bu_warn("edgebench: dropping the cache of %s:", file);
				left = bu_kernel_resident_bytes(file);
				if (left > 0)
					printf("(warning: %s of the file still in the "
					       "kernel's cache after dropping it)\n",
					       bu_human((uint64_t)left));
			} else {
				(void)bu_drop_file_cache(file, false);
				if (unlink(file) < 0 && errno != ENOENT)
					bu_die("unlink %s:", file);
			}
			run_interleaved(p, file, rsize, overwrite, r);
			if (pi == 0 && r->ok)
				kbuf = r->mibs;
			print_row(p, rsize, overwrite, r, kbuf, v);
		}
		for (pi = 0; pi < NPATHS; pi++)
			print_details(&paths[pi], rsize, &res[ri][pi]);
	}
	unlink(file);
}

/* ------------------------------------------------------------ sequential */

enum seq_kind { SEQ_KBUF, SEQ_KDIRECT, SEQ_KDONTCACHE, SEQ_PC };

struct sampler {
	pthread_t th;
	atomic_bool stop;
	struct pc_cache *c;       /* sample the library too when set */
	int64_t peak_meminfo;     /* Dirty + Writeback */
	int64_t peak_lib;         /* dirty_bytes + writeback_bytes */
};

static void *sampler_main(void *arg)
{
	static const char *const names[] = { "Dirty", "Writeback", NULL };
	struct sampler *s = arg;

	while (!atomic_load(&s->stop)) {
		int64_t v = bu_meminfo_bytes(names);

		if (v > s->peak_meminfo)
			s->peak_meminfo = v;
		if (s->c) {
			struct pc_stats st;

			pc_cache_stats(s->c, &st);
			if ((int64_t)(st.dirty_bytes + st.writeback_bytes) > s->peak_lib)
				s->peak_lib = (int64_t)(st.dirty_bytes + st.writeback_bytes);
		}
		bu_sleep_ms(10);
	}
	return NULL;
}

static void seq_run(enum seq_kind kind, const char *file)
{
	static const char *const names[] = { "Dirty", "Writeback", NULL };
	static const char *const label[] = { "kernel buffered", "kernel O_DIRECT",
					     "kernel RWF_DONTCACHE", "pagecache uncached" };
	uint64_t n = o.seq_total / BU_MiB, i, t0 = 0, t1 = 0, *lat;
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	struct sampler smp;
	struct pc_cache *c = NULL;
	struct pc_file *pf = NULL;
	struct pc_stats st;
	int64_t baseline = 0;
	char err[256] = "";
	int fd = -1;

	memset(&smp, 0, sizeof(smp));
	lat = calloc(n ? n : 1, sizeof(*lat));
	if (!lat)
		bu_die("out of memory");
	bu_fill_random(buf, BU_MiB, 5);
	(void)bu_drop_file_cache(file, false);
	unlink(file);

	if (kind == SEQ_PC) {
		c = new_cache();
		if (c)
			pf = pc_open(c, file, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (!c || !pf) {
			int e = errno;

			snprintf(err, sizeof(err), "%s failed: %s (errno %d)",
				 !c ? "pc_cache_new" : "pc_open(O_WRONLY|O_CREAT|O_EXCL)",
				 strerror(e), e);
			goto report;
		}
		smp.c = c;
	} else {
		fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
				(kind == SEQ_KDIRECT ? O_DIRECT : 0), 0644);
		if (fd < 0) {
			int e = errno;

			snprintf(err, sizeof(err), "open%s failed: %s (errno %d)",
				 kind == SEQ_KDIRECT ? "(O_DIRECT)" : "", strerror(e), e);
			goto report;
		}
	}

	baseline = bu_meminfo_bytes(names);
	smp.peak_meminfo = baseline;
	if (pthread_create(&smp.th, NULL, sampler_main, &smp) != 0)
		bu_die("pthread_create");
	t0 = bu_now_ns();
	for (i = 0; i < n; i++) {
		uint64_t a = bu_now_ns();
		ssize_t w;

		if (kind == SEQ_PC) {
			w = pc_pwrite(pf, buf, BU_MiB, (off_t)(i * BU_MiB), PC_DONTCACHE);
		} else if (kind == SEQ_KDONTCACHE) {
			struct iovec v = { buf, BU_MiB };

			w = pwritev2(fd, &v, 1, (off_t)(i * BU_MiB), RWF_DONTCACHE);
		} else {
			w = pwrite(fd, buf, BU_MiB, (off_t)(i * BU_MiB));
		}
		lat[i] = bu_now_ns() - a;
		if (w != (ssize_t)BU_MiB) {
			int e = w < 0 ? errno : EIO;

			snprintf(err, sizeof(err), "%s at %" PRIu64 " failed: %s (errno %d)",
				 kind == SEQ_PC ? "pc_pwrite(PC_DONTCACHE)" : "pwrite",
				 i * BU_MiB, strerror(e), e);
			break;
		}
	}
	if (!err[0]) {
		if (kind == SEQ_PC ? pc_fsync(pf) < 0 : fsync(fd) < 0) {
			int e = errno;

			snprintf(err, sizeof(err), "%s failed: %s (errno %d)",
				 kind == SEQ_PC ? "pc_fsync" : "fsync", strerror(e), e);
		}
	}
	t1 = bu_now_ns();
	atomic_store(&smp.stop, true);
	pthread_join(smp.th, NULL);

report:
	if (err[0]) {
		fprintf(stderr, "edgebench: sequential %s: %s\n", label[kind], err);
		printf("%-20s %9s  %s\n", label[kind], "error", err);
	} else {
		char peak[160];

		bu_sort_u64(lat, n);
		if (kind == SEQ_PC) {
			pc_cache_stats(c, &st);
			snprintf(peak, sizeof(peak),
				 "%s (library peak_dirty_bytes; sampled dirty+writeback "
				 "%s; meminfo Dirty+Writeback peak %s)",
				 bu_human(st.peak_dirty_bytes), bu_human((uint64_t)smp.peak_lib),
				 bu_human((uint64_t)smp.peak_meminfo));
		} else {
			snprintf(peak, sizeof(peak),
				 "%s (meminfo Dirty+Writeback, 10 ms samples, system-wide; "
				 "baseline %s)",
				 bu_human((uint64_t)smp.peak_meminfo),
				 bu_human((uint64_t)(baseline > 0 ? baseline : 0)));
		}
		printf("%-20s %9.1f %10.0f %10.0f %10.0f %10.0f  %s\n", label[kind],
		       (double)(n * BU_MiB) / BU_MiB / bu_secs(t1 - t0),
		       (double)bu_percentile(lat, n, 50) / 1e3,
		       (double)bu_percentile(lat, n, 99) / 1e3,
		       (double)bu_percentile(lat, n, 99.9) / 1e3,
		       (double)lat[n - 1] / 1e3, peak);
		if (kind == SEQ_PC)
			printf("%-20s device writes %" PRIu64 " (%s), reads %" PRIu64
			       ", drops %" PRIu64 ", kicks %" PRIu64
			       ", throttle waits %" PRIu64 ", paced sleeps %" PRIu64
			       ", cached after fsync %s\n",
			       "", st.dev_write_ios, bu_human(st.dev_write_bytes),
			       st.dev_read_ios, st.dropbehind_drops, st.flusher_kicks,
			       st.throttle_waits, st.throttle_pauses, bu_human(st.cached_bytes));
	}
	if (pf && pc_close(pf) < 0) {
		int e = errno;

		fprintf(stderr, "edgebench: sequential: pc_close failed: %s (errno %d)\n",
			strerror(e), e);
	}
	if (c && pc_cache_destroy(c) < 0) {
		int e = errno;

		fprintf(stderr, "edgebench: sequential: pc_cache_destroy failed: %s "
			"(errno %d)\n", strerror(e), e);
	}
	if (fd >= 0)
		close(fd);
	unlink(file);
	free(lat);
	free(buf);
}

/* ------------------------------------------------------------ competing */

/*
 * Table 4: two writers at once, each on its own new file, 1 MiB sequential
 * writes, both stopping when either has written --seq-total / 2.  Each
 * writer's MiB/s is its bytes over the time both ran; the fair outcome is
 * equal shares whatever each one's I/O mode.
 */
struct competitor {
	const char *label;
	bool pc;               /* pagecache (else the kernel) */
	int flags;             /* PC_DONTCACHE or RWF_DONTCACHE, or 0 */
	int fd;
	struct pc_file *pf;
	char *buf;
	atomic_bool *stop;
	pthread_barrier_t *bar;
	uint64_t bytes, limit;
	uint64_t *lat;
	uint64_t nlat;
	int err;
	pthread_t th;
};

static void *competitor_main(void *arg)
{
	struct competitor *w = arg;
	pthread_barrier_wait(w->bar);
	while (!atomic_load(w->stop) && w->bytes < w->limit) {
		uint64_t a = bu_now_ns();
		ssize_t n;
		if (w->pc) {
			n = pc_pwrite(w->pf, w->buf, BU_MiB, (off_t)w->bytes, w->flags);
		} else {
			struct iovec v = { w->buf, BU_MiB };
			n = pwritev2(w->fd, &v, 1, (off_t)w->bytes, w->flags);
		}
		if (n != (ssize_t)BU_MiB) {
			w->err = n < 0 ? errno : EIO;
			break;
		}
		w->lat[w->nlat++] = bu_now_ns() - a;
		w->bytes += BU_MiB;
	}
	atomic_store(w->stop, true);
	return NULL;
}

static void competing_run(const char *pair, struct competitor w[2])
{
	uint64_t limit = o.seq_total / 2 / BU_MiB * BU_MiB;
	struct pc_cache *c = NULL;
	atomic_bool stop = false;
	pthread_barrier_t bar;
	char file[2][PATH_MAX];
	bool ok = true;

	pthread_barrier_init(&bar, NULL, 3);
	for (int i = 0; i < 2; i++) {
		char name[64];
		snprintf(name, sizeof(name), "edgebench-compete%d.dat", i);
		bu_join(file[i], sizeof(file[i]), o.dir, name);
		(void)bu_drop_file_cache(file[i], false);
		unlink(file[i]);
		w[i].stop = &stop;
		w[i].bar = &bar;
		w[i].limit = limit;
		w[i].buf = bu_alloc_aligned(BU_MiB, 4096);
		bu_fill_random(w[i].buf, BU_MiB, 11 + (uint64_t)i);
		w[i].lat = calloc(limit / BU_MiB + 1, sizeof(uint64_t));
		if (!w[i].lat)
			bu_die("out of memory");
		w[i].fd = -1;
		if (w[i].pc) {
			if (!c)
				c = new_cache();
			w[i].pf = c ? pc_open(c, file[i], O_WRONLY | O_CREAT | O_EXCL, 0644) : NULL;
			ok &= w[i].pf != NULL;
		} else {
			w[i].fd = open(file[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			ok &= w[i].fd >= 0;
		}
	}
	if (!ok) {
		printf("%-44s setup failed: %s\n", pair, strerror(errno));
	} else {
		for (int i = 0; i < 2; i++)
			if (pthread_create(&w[i].th, NULL, competitor_main, &w[i]) != 0)
				bu_die("pthread_create");
		pthread_barrier_wait(&bar);
		uint64_t t0 = bu_now_ns();
		for (int i = 0; i < 2; i++)
			pthread_join(w[i].th, NULL);
		double secs = bu_secs(bu_now_ns() - t0);
		double mibs[2];
		for (int i = 0; i < 2; i++) {
			mibs[i] = (double)w[i].bytes / BU_MiB / secs;
			bu_sort_u64(w[i].lat, w[i].nlat ? w[i].nlat : 1);
		}
		double lo = mibs[0] < mibs[1] ? mibs[0] : mibs[1];
		double hi = mibs[0] < mibs[1] ? mibs[1] : mibs[0];
		for (int i = 0; i < 2; i++) {
			if (w[i].err)
				printf("%-22s error: %s\n", w[i].label, strerror(w[i].err));
			else
				printf("%-22s %9.1f %10.0f %10.0f\n", w[i].label, mibs[i],
				       w[i].nlat ? (double)bu_percentile(w[i].lat, w[i].nlat, 99) / 1e3 : 0.0,
				       w[i].nlat ? (double)bu_percentile(w[i].lat, w[i].nlat, 99.9) / 1e3 : 0.0);
		}
		printf("   aggregate %.1f MiB/s, share %.2f (slower/faster)\n", mibs[0] + mibs[1],
		       hi > 0 ? lo / hi : 0.0);
	}
	for (int i = 0; i < 2; i++) {
		if (w[i].pf && pc_close(w[i].pf) < 0)
			fprintf(stderr, "edgebench: competing: pc_close: %s\n", strerror(errno));
		if (w[i].fd >= 0)
			close(w[i].fd);
		unlink(file[i]);
		free(w[i].lat);
		free(w[i].buf);
	}
	if (c && pc_cache_destroy(c) < 0)
		fprintf(stderr, "edgebench: competing: pc_cache_destroy: %s\n", strerror(errno));
	pthread_barrier_destroy(&bar);
}

static void competing_table(void)
{
	printf("\n== Table 4: competing writers, separate new files, 1 MiB writes, until "
	       "one has written %s; MiB/s over the time both ran (no fsync) ==\n",
	       bu_human(o.seq_total / 2 / BU_MiB * BU_MiB));
	printf("%-22s %9s %10s %10s\n", "writer", "MiB/s", "p99 us", "p99.9 us");
	struct competitor kk[2] = {
		{ .label = "kernel buffered", .pc = false, .flags = 0 },
		{ .label = "kernel uncached", .pc = false, .flags = RWF_DONTCACHE },
	};
	competing_run("kernel buffered vs kernel uncached", kk);
	struct competitor pp[2] = {
		{ .label = "pagecache buffered", .pc = true, .flags = 0 },
		{ .label = "pagecache uncached", .pc = true, .flags = PC_DONTCACHE },
	};
	competing_run("pagecache buffered vs pagecache uncached", pp);
	struct competitor bb[2] = {
		{ .label = "pagecache buffered", .pc = true, .flags = 0 },
		{ .label = "pagecache buffered 2", .pc = true, .flags = 0 },
	};
	competing_run("pagecache buffered vs pagecache buffered", bb);
}

static void seq_table(void)
{
	char file[PATH_MAX];

	bu_join(file, sizeof(file), o.dir, "edgebench-seq.dat");
	printf("\n== Table 3: one sequential writer, 1 MiB writes, %s, new file, "
	       "fsync included in MiB/s ==\n", bu_human(o.seq_total));
	printf("latency: per write call, CLOCK_MONOTONIC, microseconds\n");
	printf("%-20s %9s %10s %10s %10s %10s  %s\n", "path", "MiB/s", "p50 us",
	       "p99 us", "p99.9 us", "max us", "peak dirty");
	seq_run(SEQ_KBUF, file);
	seq_run(SEQ_KDIRECT, file);
	seq_run(SEQ_KDONTCACHE, file);
	seq_run(SEQ_PC, file);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: edgebench [--dir D] [--total BYTES] [--threads N]\n"
		"                 [--records LIST] [--seq-total BYTES] [--mem BYTES]\n"
		"                 [--block-size BYTES] [--skip-overwrite] [--skip-seq]\n"
		"                 [--no-io-uring] [--only TEXT] [--skip-compete]\n"
		"  --dir D            where the files go (default .)\n"
		"  --total BYTES      bytes per interleaved run (default 1G)\n"
		"  --threads N        writer threads (default 32)\n"
		"  --records LIST     record sizes (default 47008,6000,49152)\n"
		"  --seq-total BYTES  bytes of the sequential test (default 4G)\n"
		"  --mem BYTES        pagecache memory_limit (default 256M)\n"
		"  --block-size BYTES pagecache block_size (default 0: the library's\n"
		"                     choice, the file's direct-I/O alignment)\n"
		"  --skip-overwrite   skip table 2 (overwrite of existing data)\n"
		"  --skip-seq         skip table 3 (sequential writer)\n"
		"  --skip-compete     skip table 4 (competing writers)\n"
		"  --only TEXT        tables 1-2: run only the paths whose name contains TEXT\n"
		"                     (or one of several, comma-separated)\n"
		"  --no-io-uring      pagecache uses its synchronous I/O fallback\n");
}

int main(int argc, char **argv)
{
	enum { O_SKIP_OVER = 1000, O_SKIP_SEQ, O_SEQ_TOTAL, O_BLOCK_SIZE, O_ONLY, O_NO_URING, O_SKIP_COMPETE };
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "total", required_argument, NULL, 't' },
		{ "threads", required_argument, NULL, 'j' },
		{ "records", required_argument, NULL, 'r' },
		{ "seq-total", required_argument, NULL, O_SEQ_TOTAL },
		{ "mem", required_argument, NULL, 'm' },
		{ "block-size", required_argument, NULL, O_BLOCK_SIZE },
		{ "skip-overwrite", no_argument, NULL, O_SKIP_OVER },
		{ "skip-seq", no_argument, NULL, O_SKIP_SEQ },
		{ "only", required_argument, NULL, O_ONLY },
		{ "no-io-uring", no_argument, NULL, O_NO_URING },
		{ "skip-compete", no_argument, NULL, O_SKIP_COMPETE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct verdicts v = { 0, 0 };
	int ch, i;

	o.records[0] = 47008;
	o.records[1] = 6000;
	o.records[2] = 49152;
	o.nrecords = 3;
	while ((ch = getopt_long(argc, argv, "d:t:j:r:m:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': o.dir = optarg; break;
		case 't': o.total = bu_size_arg("--total", optarg); break;
		case 'j': {
			char *end;
			long n = strtol(optarg, &end, 10);

			if (*end || n < 1 || n > 4096)
				bu_die("--threads: 1 to 4096, not '%s'", optarg);
			o.threads = (int)n;
			break;
		}
		case 'r':
			o.nrecords = bu_size_list_arg("--records", optarg, o.records,
						      MAX_RECORDS);
			break;
		case O_SEQ_TOTAL: o.seq_total = bu_size_arg("--seq-total", optarg); break;
		case 'm': o.mem = bu_size_arg("--mem", optarg); break;
		case O_BLOCK_SIZE:
			o.block_size = bu_size_arg("--block-size", optarg);
			break;
		case O_SKIP_OVER: o.skip_overwrite = true; break;
		case O_SKIP_SEQ: o.skip_seq = true; break;
		case O_ONLY: o.only = optarg; break;
		case O_NO_URING: o.no_io_uring = true; break;
		case O_SKIP_COMPETE: o.skip_compete = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	for (i = 0; i < o.nrecords; i++)
		if (o.records[i] == 0 || o.records[i] > 64 * BU_MiB)
			bu_die("--records: sizes from 1 byte to 64 MiB");
	if (o.seq_total < BU_MiB)
		bu_die("--seq-total: at least 1 MiB");

	bu_mkdir(o.dir);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bu_print_cmdline(argc, argv);
	bu_print_environment(o.dir);
	if (bu_dev_stat_path(o.dir, devstat, sizeof(devstat)) < 0)
		devstat[0] = '\0';
	printf("pagecache memory_limit %s, block_size %s; records", bu_human(o.mem),
	       o.block_size ? bu_human(o.block_size) : "default");
	for (i = 0; i < o.nrecords; i++)
		printf("%s%" PRIu64, i ? "," : " ", o.records[i]);
	printf("; %d threads; %s per interleaved run; sequential %s\n", o.threads,
	       bu_human(o.total), bu_human(o.seq_total));
	printf("targets: pagecache 0.000 reads/write for records not a multiple of "
	       "4 KiB (table 1 all pagecache rows, table 2 pagecache uncached); "
	       "pagecache uncached MiB/s >= kernel buffered MiB/s; pagecache "
	       "cached after fsync <= 1%% of the bytes written\n");

	interleaved_table(false, &v);
	if (!o.skip_overwrite)
		interleaved_table(true, &v);
	if (!o.skip_seq)
		seq_table();
	if (!o.skip_compete)
		competing_table();

	printf("\ntargets: %d PASS, %d FAIL\n", v.pass, v.fail);
	return 0;
}
