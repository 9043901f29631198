/*
 * interleaved.c - suite interleaved (was edgebench; the seed
 * dontcache-edge-pages): N threads (default 32) write interleaved records
 * to one file: record i, of R bytes, at offset i*R, by thread i mod N,
 * each thread writing its records in increasing order, --total/R records.
 * For every record size (default 47008, 6000, 49152) and every path:
 *
 *   kernel-buffered, kernel-buffered+dsync, kernel-dontcache,
 *   kernel-dontcache+dsync, kernel-direct, kernel-direct+dsync (O_DIRECT:
 *   aligned records only), pagecache-buffered, pagecache-buffered+dsync,
 *   pagecache-dontcache, pagecache-dontcache+dsync, pagecache-direct,
 *   pagecache-direct+dsync (unaligned: aligned middle with O_DIRECT, ends
 *   uncached).  buffered+dsync is the seed's base for the uncached
 *   +dsync write (the same write without RWF_DONTCACHE).
 *
 * Table 1 writes a new file; table 2 overwrites a file that already holds
 * --total bytes (written and fsynced once before the table, its kernel
 * cache dropped before each run: fdatasync + fadvise(DONTNEED) +
 * drop_caches when root).  Each run ends with fsync inside the timing.
 * Printed: MiB/s; 4 KiB device reads per write counted by the library
 * (pagecache rows), by the block device (read sectors of
 * /sys/dev/block/MAJ:MIN/stat, the whole device: other programs' reads
 * count too) and by this process's read_bytes in /proc/self/io (immune to
 * other programs); bytes left cached after the fsync (pagecache:
 * cached_bytes; kernel: the file's resident pages, mmap + mincore).  The
 * result's device_reads_4k is the count measured (the library's for
 * pagecache, the process's for the kernel) and its reads_per_write that
 * count over the writes; proc_read_bytes is the process's read_bytes on
 * every path (on ext4 it includes, for a file whose end is not
 * block-aligned, the tail block the file system reads under pc_fsync's
 * ftruncate: see cmake/pcbench_smoke.cmake).
 *
 * Targets: pagecache 0.000 library-counted reads per write for records
 * that are not multiples of 4 KiB (table 1: all pagecache rows; table 2:
 * pagecache-dontcache); pagecache-dontcache MiB/s >= kernel-buffered's of
 * the same record size in the same run; at most 1 % of the bytes written
 * left cached after the fsync on pagecache's uncached and direct rows.
 *
 * Over 600 lines: the workers, the three tables and their targets all
 * work on struct result and run_interleaved(); apart, they would share
 * them through bench.h, which is for what several suites share.
 */
#include "bench.h"

#define CACHED_UNKNOWN INT64_MIN

static const int il_paths[] = {
	P_KBUF, P_KBUF_DSYNC, P_KDC, P_KDC_DSYNC, P_KDIRECT, P_KDIRECT_DSYNC,
	P_PBUF, P_PBUF_DSYNC, P_PDC, P_PDC_DSYNC, P_PDIRECT, P_PDIRECT_DSYNC,
};
#define NPATHS (int)(sizeof(il_paths) / sizeof(il_paths[0]))

/* The result of one run. */
struct result {
	bool ok, skipped;
	bool unsupported;      /* the kernel refused the flag (EOPNOTSUPP) */
	char err[256];         /* the failed call, with errno */
	uint64_t writes;
	double secs, mibs;
	/* 4 KiB device reads of the run, counted (NAN: no such counter) and
	 * per write (the count over the writes) */
	double lib_reads, lib_rpw;   /* the library's dev_read_bytes; NAN for kernel rows */
	double dev_reads, dev_rpw;   /* the block device's read sectors */
	double proc_reads, proc_rpw; /* /proc/self/io read_bytes */
	double proc_read_bytes;      /* that count in bytes, as read */
	int64_t cached;        /* bytes left cached after fsync; CACHED_UNKNOWN
				* when not measured; negative: the library's
				* counter wrapped below zero (shown as is) */
	struct pc_stats st;    /* pagecache rows: cache stats after fsync */
	uint64_t max_drift;    /* most records between slowest and fastest thread */
	int64_t kernel_peak_dirty; /* kernel rows: peak Dirty + Writeback above the start */
};

/* ------------------------------------------------------------ workers */

struct job {
	struct bfile f;
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
		/* the kernel may write less than asked: the rest goes again */
		size_t done = 0;

		while (done < j->rsize) {
			ssize_t n = bf_pwrite(&j->f, w->buf + done, j->rsize - done, off + done);

			if (n <= 0 || (j->f.p->pc && (size_t)n != j->rsize)) {
				job_fail(j, j->f.p->pc ? "pc_pwrite" : "pwritev2", n < 0 ? errno : EIO, off);
				atomic_store(&w->finished, true);
				return NULL;
			}
			done += (size_t)n;
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


/* Progress: the bytes the workers have written so far. */
struct il_progress {
	struct worker *w;
	int n;
	uint64_t rsize;
};

static uint64_t il_poll(void *arg)
{
	struct il_progress *p = arg;
	uint64_t recs = 0;

	for (int t = 0; t < p->n; t++)
		recs += atomic_load_explicit(&p->w[t].done, memory_order_relaxed);
	return recs * p->rsize;
}

static void job_error(struct result *res, const struct job *j)
{
	if (!j->f.p->pc && j->err_no == EOPNOTSUPP)
		res->unsupported = true;
	snprintf(res->err, sizeof(res->err), "%s failed: %s (errno %d)", j->err_what, strerror(j->err_no),
		 j->err_no);
	if (!res->unsupported)
		fprintf(stderr, "pcbench: interleaved: %s R=%" PRIu64 ": %s\n", j->f.p->name, j->rsize, res->err);
}

/* What the run left: the library's stats (device reads since s0) or the
 * kernel's resident pages of the file. */
static void run_leftovers(struct job *j, const char *file, const struct pc_stats *s0, struct result *res)
{
	if (!j->f.p->pc) {
		if (res->ok) {
			res->cached = bu_kernel_resident_bytes(file);
			if (res->cached < 0)
				res->cached = CACHED_UNKNOWN;
		}
		return;
	}
	struct pc_stats fs, s1;

	pc_file_stats(j->f.pf, &fs);
	pc_cache_stats(j->f.c, &s1);
	bench_stats_delta(&res->st, s0, &s1);
	res->st.block_size = fs.block_size;
	if (res->ok) {
		res->cached = (int64_t)s1.cached_bytes;
		res->lib_reads = (double)res->st.dev_read_bytes / 4096.0;
		res->lib_rpw = res->lib_reads / (double)j->nrec;
	}
}

static void start_workers(struct job *j, struct worker *w)
{
	pthread_barrier_init(&j->bar, NULL, (unsigned)bo.threads + 1);
	for (int t = 0; t < bo.threads; t++) {
		w[t].j = j;
		w[t].t = t;
		w[t].buf = bu_alloc_aligned((size_t)j->rsize, 4096);
		bu_fill_random(w[t].buf, (size_t)j->rsize, (uint64_t)t + 1000);
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]) != 0)
			bu_die("pthread_create");
	}
}

/*
 * One run of the interleaved workload on `file` (new or existing, already
 * prepared by the caller).
 */
static void run_interleaved(const struct bpath *p, struct pc_cache *c, const char *file, uint64_t rsize,
			    uint64_t total, bool overwrite, struct result *res, const char *workload)
{
	struct job j;
	struct worker *w;
	struct pc_stats s0;
	int64_t sec0, sec1, prb0, prb1;
	uint64_t t0, t1;

	memset(res, 0, sizeof(*res));
	memset(&j, 0, sizeof(j));
	res->cached = CACHED_UNKNOWN;
	res->lib_rpw = res->dev_rpw = res->proc_rpw = NAN;
	res->lib_reads = res->dev_reads = res->proc_reads = res->proc_read_bytes = NAN;
	j.rsize = rsize;
	j.nrec = total / rsize;
	j.nthreads = bo.threads;
	res->writes = j.nrec;
	if (j.nrec == 0) {
		snprintf(res->err, sizeof(res->err), "--total below one record");
		return;
	}
	if (bf_open(&j.f, p, c, file, O_RDWR | O_CREAT | (overwrite ? 0 : O_EXCL)) < 0) {
		snprintf(res->err, sizeof(res->err), "%s", j.f.err);
		return;
	}
	if (p->pc)
		pc_cache_stats(j.f.c, &s0);

	w = calloc((size_t)bo.threads, sizeof(*w));
	if (!w)
		bu_die("out of memory");
	start_workers(&j, w);
	struct il_progress prog = { w, bo.threads, rsize };
	prog_step(workload, p->name, j.nrec * rsize, il_poll, &prog);

	sec0 = bu_dev_read_sectors(bo.devstat);
	prb0 = bu_proc_read_bytes();
	/* Kernel rows: the kernel's Dirty + Writeback, sampled (pagecache
	 * rows take their peak from the cache's own stats). */
	struct sampler smp;
	if (!p->pc)
		sampler_start(&smp, NULL, NULL);
	/* Before the workers are let go, not after (see dontcache.c). */
	t0 = bu_now_ns();
	pthread_barrier_wait(&j.bar);
	res->max_drift = wait_workers_sampling_drift(w, bo.threads);
	if (!atomic_load(&j.err_set) && bf_fsync(&j.f) < 0)
		job_fail(&j, p->pc ? "pc_fsync" : "fsync", errno, 0);
	t1 = bu_now_ns();
	sec1 = bu_dev_read_sectors(bo.devstat);
	prb1 = bu_proc_read_bytes();
	prog_step_done();
	if (!p->pc) {
		sampler_stop(&smp);
		res->kernel_peak_dirty = smp.peak > smp.baseline ? smp.peak - smp.baseline : 0;
		sampler_free(&smp);
	}

	if (atomic_load(&j.err_set)) {
		job_error(res, &j);
	} else {
		res->ok = true;
		res->secs = bu_secs(t1 - t0);
		res->mibs = (double)(j.nrec * rsize) / BU_MiB / res->secs;
		if (sec0 >= 0 && sec1 >= 0) {
			res->dev_reads = (double)(sec1 - sec0) * 512.0 / 4096.0;
			res->dev_rpw = res->dev_reads / (double)j.nrec;
		}
		if (prb0 >= 0 && prb1 >= 0) {
			res->proc_read_bytes = (double)(prb1 - prb0);
			res->proc_reads = res->proc_read_bytes / 4096.0;
			res->proc_rpw = res->proc_reads / (double)j.nrec;
		}
	}
	run_leftovers(&j, file, &s0, res);
	if (bf_close(&j.f) < 0 && res->ok) {
		snprintf(res->err, sizeof(res->err), "%s", j.f.err);
		res->ok = false;
	}
	pthread_barrier_destroy(&j.bar);
	for (int t = 0; t < bo.threads; t++)
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

static bool rpw_target_applies(const struct bpath *p, uint64_t rsize, bool overwrite)
{
	if (!p->pc || rsize % 4096 == 0)
		return false;
	if (!overwrite)
		return true;
	return p->flags == PC_DONTCACHE;
}

static void print_row_header(void)
{
	printf("%-7s %-26s %9s %8s %8s %8s %10s %-16s %s\n", "record", "path", "MiB/s", "lib r/w", "dev r/w",
	       "proc r/w", "cached", "vs k-buffered", "targets");
}

/* The targets of a pagecache row, into the result. */
static void row_targets(struct bres *b, const struct bpath *p, uint64_t rsize, bool overwrite,
			const struct result *r, double kbuf_mibs)
{
	if (rpw_target_applies(p, rsize, overwrite)) {
		/* Over existing data the last record may end inside a block
		 * that no neighbour completes: that block is read to merge,
		 * the one read the workload itself asks for. */
		double tail = overwrite && (r->writes * rsize) % 4096 ? 1 : 0;
		double reads = r->lib_reads;

		/* "0.000" as printed: below 0.0005 reads per write */
		res_target(b, (reads - tail) / (double)r->writes < 0.0005, "lib r/w 0.000%s",
			   tail ? " beyond the tail block" : "");
	}
	if (p == &bpaths[P_PDC] && !isnan(kbuf_mibs))
		res_target(b, r->mibs >= kbuf_mibs, ">= kernel-buffered (%.1f)", kbuf_mibs);
	else if (p == &bpaths[P_PDC])
		res_target_na(b, "kernel-buffered", ">= kernel-buffered");
	if (p->pc && p->flags & (PC_DONTCACHE | PC_DIRECT))
		res_target(b, r->cached >= 0 && (uint64_t)r->cached <= r->writes * rsize / 100, "cached <= 1%%");
}

/* The run as a result of the suite. */
static struct bres *row_result(const char *workload, const struct bpath *p, const struct result *r)
{
	struct bres *b = res_add("interleaved", workload, p->name);

	if (!r->ok) {
		snprintf(b->error, sizeof(b->error), "%s%s", r->unsupported ? "unsupported: " : "", r->err);
		return b;
	}
	b->mib_s = r->mibs;
	b->ops_s = (double)r->writes / r->secs;
	/* the count as measured; the ratio derived from it */
	b->device_reads_4k = p->pc ? r->lib_reads : r->proc_reads;
	b->writes = (double)r->writes;
	b->reads_per_write = b->device_reads_4k / (double)r->writes;
	b->proc_read_bytes = r->proc_read_bytes;
	b->cached_after_bytes = r->cached == CACHED_UNKNOWN ? NAN : (double)r->cached;
	b->value = r->mibs;
	snprintf(b->unit, sizeof(b->unit), "MiB/s");
	b->peak_dirty_bytes = p->pc ? (double)r->st.peak_dirty_bytes : (double)r->kernel_peak_dirty;
	res_note(b, "dev r/w %.3f, proc r/w %.3f, threads drifted up to %" PRIu64 " records apart", r->dev_rpw,
		 r->proc_rpw, r->max_drift);
	return b;
}

static void print_row(const char *workload, const struct bpath *p, uint64_t rsize, bool overwrite,
		      const struct result *r, double kbuf_mibs)
{
	char lib[32], dev[32], prc[32], cached[32], ratio[32] = "-";
	struct bres *b = row_result(workload, p, r);

	if (!r->ok) {
		printf("%-7" PRIu64 " %-26s %9s %8s %8s %8s %10s %7s  %s\n", rsize, p->name,
		       r->unsupported ? "unsupp." : "error", "-", "-", "-", "-", "-", r->err);
		if (p->pc)
			b->pass = 0;
		return;
	}
	fmt_rpw(lib, sizeof(lib), r->lib_rpw);
	if (bo.devstat[0])
		fmt_rpw(dev, sizeof(dev), r->dev_rpw);
	else
		snprintf(dev, sizeof(dev), "n/a");
	fmt_rpw(prc, sizeof(prc), r->proc_rpw);
	fmt_cached(cached, sizeof(cached), r->cached);
	if (!isnan(kbuf_mibs) && kbuf_mibs > 0 && strcmp(p->name, "kernel-buffered") != 0)
		snprintf(ratio, sizeof(ratio), "%.2fx", r->mibs / kbuf_mibs);
	row_targets(b, p, rsize, overwrite, r, kbuf_mibs);
	printf("%-7" PRIu64 " %-26s %9.1f %8s %8s %8s %10s %-16s %s%s%s\n", rsize, p->name, r->mibs, lib, dev, prc,
	       cached, ratio, b->target, b->pass < 0 ? "" : " ", b->pass < 0 ? "" : b->pass ? "PASS" : "FAIL");
}

static void print_details(const struct bpath *p, uint64_t rsize, const struct result *r)
{
	const struct pc_stats *s = &r->st;

	if (!r->ok)
		return;
	printf("        %-26s R=%-6" PRIu64 " %.2f s, %" PRIu64 " writes; threads "
	       "drifted up to %" PRIu64 " records apart (%s of file)%s",
	       p->name, rsize, r->secs, r->writes, r->max_drift,
	       bu_human(r->max_drift * rsize * (uint64_t)bo.threads), p->pc ? ";\n" : "\n");
	if (!p->pc)
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

/* Before each run: a new file is deleted; an existing one is dropped from
 * the kernel's cache. */
static void prepare_file(const char *file, bool overwrite)
{
	if (!overwrite) {
		(void)bu_drop_file_cache(file, false);
		if (unlink(file) < 0 && errno != ENOENT)
			bu_die("unlink %s:", file);
		return;
	}
	if (bu_drop_file_cache(file, true) < 0)
		bu_warn("pcbench: dropping the cache of %s:", file);
	int64_t left = bu_kernel_resident_bytes(file);
	if (left > 0)
		printf("(warning: %s of the file still in the kernel's cache after dropping it)\n",
		       bu_human((uint64_t)left));
}

/* O_DIRECT needs aligned records: the kernel's direct paths run only for
 * those. */
static bool path_applies(const struct bpath *p, uint64_t rsize)
{
	return path_selected(p) && (!p->odirect || rsize % 4096 == 0);
}

static void il_workload(char *b, size_t len, bool overwrite, uint64_t rsize)
{
	snprintf(b, len, "%s, %" PRIu64 " B records", overwrite ? "overwrite" : "new file", rsize);
}

static void interleaved_table(bool overwrite)
{
	char file[PATH_MAX], workload[96];
	static struct result res[BENCH_MAX_RECORDS][NPATHS];

	bu_join(file, sizeof(file), bo.dir, overwrite ? "pcbench-il-over.dat" : "pcbench-il-new.dat");
	printf("\n== interleaved, table %d: %s: %d threads, interleaved records, %s per run, fsync included ==\n",
	       overwrite ? 2 : 1, overwrite ? "overwrite of existing data" : "new file", bo.threads,
	       bu_human(bo.total));
	if (overwrite) {
		printf("(writing and syncing %s of existing data first)\n", bu_human(bo.total));
		unlink(file);
		bu_make_file(file, bo.total, 77);
	}
	printf("4 KiB device reads per write counted three ways: lib r/w: the library's dev_read_bytes/4096/writes; "
	       "dev r/w: %s read sectors*512/4096/writes (the whole device: other programs' reads count too); "
	       "proc r/w: /proc/self/io read_bytes/4096/writes (this process only).  cached: bytes left cached "
	       "after the fsync; vs k-buffered: MiB/s over kernel-buffered's\n",
	       bo.devstat[0] ? bo.devstat : "(no device counters: n/a)");
	print_row_header();
	for (int ri = 0; ri < bo.nrecords; ri++) {
		uint64_t rsize = bo.records[ri];
		double kbuf = NAN;

		il_workload(workload, sizeof(workload), overwrite, rsize);
		for (int pi = 0; pi < NPATHS; pi++) {
			const struct bpath *p = &bpaths[il_paths[pi]];
			struct result *r = &res[ri][pi];

			r->skipped = !path_applies(p, rsize);
			if (r->skipped)
				continue;
			prepare_file(file, overwrite);
			run_interleaved(p, NULL, file, rsize, bo.total, overwrite, r, workload);
			if (p == &bpaths[P_KBUF] && r->ok)
				kbuf = r->mibs;
			print_row(workload, p, rsize, overwrite, r, kbuf);
		}
		for (int pi = 0; pi < NPATHS; pi++)
			if (!res[ri][pi].skipped)
				print_details(&bpaths[il_paths[pi]], rsize, &res[ri][pi]);
	}
	unlink(file);
}

/* ------------------------------------------------------------ table 3 */

/*
 * Table 3: the first writes into a new cache (issue 34).  The uncached
 * writer of the tables above, FIRST_RECORD-byte records, on a cache of
 * --mem made just before the writes and given no time to fault its memory
 * in (what a program that writes right after pc_cache_new gets), against
 * kernel-buffered and against the same cache's later writes (the same
 * workload again, to a new file, once the cache's background fault-in has
 * nothing pending: a settled cache, on memory it has used once).  Every
 * round runs the three in that order, with a pause before the kernel's
 * run and the new cache (FIRST_PAUSE_US); each ratio is the median of the
 * rounds' own ratios, so that a slow spell of the machine slows both sides
 * of a ratio or neither.
 */
#define FIRST_RECORD 6000
#define FIRST_TOTAL (128 * BU_MiB)
#define FIRST_ROUNDS 5
/* Before the kernel's run and before the new cache: memory freed a while
 * ago is slow to touch again (a hypervisor with free page reporting takes
 * it back two seconds after it is freed; here first touch then costs
 * seconds a GiB), memory freed just now is not.  Without the pauses, each
 * run after the first would find memory that a program starting on an
 * idle machine does not, whichever side it is. */
#define FIRST_PAUSE_US (3 * 1000 * 1000)

/* --quick: one round, no pause (a smoke run). */
static int first_rounds;

/* The runs of a round, in the order they run. */
enum { FW_KERNEL, FW_FIRST, FW_LATER, FW_RUNS };

struct first_round {
	struct result run[FW_RUNS];
	double new_ms; /* pc_cache_new */
};

static void first_writes_round(const char *file, uint64_t total, struct first_round *r, const char *workload)
{
	prepare_file(file, false);
	if (!bo.quick)
		usleep(FIRST_PAUSE_US);
	run_interleaved(&bpaths[P_KBUF], NULL, file, FIRST_RECORD, total, false, &r->run[FW_KERNEL], workload);
	prepare_file(file, false);
	if (!bo.quick)
		usleep(FIRST_PAUSE_US);
	uint64_t t0 = bu_now_ns();
	struct pc_cache *c = bench_cache_new_unsettled(0, 0);
	r->new_ms = bu_secs(bu_now_ns() - t0) * 1e3;
	if (!c) {
		snprintf(r->run[FW_FIRST].err, sizeof(r->run[FW_FIRST].err), "pc_cache_new: %s", strerror(errno));
		r->run[FW_LATER] = r->run[FW_FIRST];
		return;
	}
	run_interleaved(&bpaths[P_PDC], c, file, FIRST_RECORD, total, false, &r->run[FW_FIRST], workload);
	prepare_file(file, false);
	/* Settled: used once, and nothing pending of its fault-in (the lead,
	 * for a default cache). */
	bench_wait_prefault(c);
	run_interleaved(&bpaths[P_PDC], c, file, FIRST_RECORD, total, false, &r->run[FW_LATER], workload);
	if (pc_cache_destroy(c) != 0 && r->run[FW_LATER].ok) {
		r->run[FW_LATER].ok = false;
		snprintf(r->run[FW_LATER].err, sizeof(r->run[FW_LATER].err), "pc_cache_destroy: %s", strerror(errno));
	}
}

/* The first failed run `which` of the rounds, NULL if none failed. */
static const struct result *first_failed(const struct first_round *r, int which)
{
	for (int i = 0; i < first_rounds; i++)
		if (!r[i].run[which].ok)
			return &r[i].run[which];
	return NULL;
}

/* The median over the rounds of run num's MiB/s over run den's, or (den
 * FW_RUNS) of num's MiB/s; NAN if a run failed. */
static double first_median(const struct first_round *r, int num, int den)
{
	double n[FIRST_ROUNDS], d[FIRST_ROUNDS];

	if (first_failed(r, num) || (den < FW_RUNS && first_failed(r, den)))
		return NAN;
	for (int i = 0; i < first_rounds; i++) {
		n[i] = r[i].run[num].mibs;
		d[i] = den < FW_RUNS ? r[i].run[den].mibs : 1.0;
	}
	return median_ratio(n, d, first_rounds);
}

/* The larger of two counts; unknown (NAN) if either is: a count not
 * measured in some round leaves the figure unknown, not that of the
 * rounds that measured it (fmax would drop the NAN). */
static double max_or_unknown(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

/* A result of table 3: the median MiB/s, or the first failed run's error. */
static struct bres *first_result(const char *workload, const char *path, const struct first_round *r, int which)
{
	struct bres *b = res_add("interleaved", workload, path);
	const struct result *failed = first_failed(r, which);

	if (failed) {
		snprintf(b->error, sizeof(b->error), "%s", failed->err);
		return b;
	}
	b->mib_s = b->value = first_median(r, which, FW_RUNS);
	snprintf(b->unit, sizeof(b->unit), "MiB/s");
	/* The reads are those of the round that read the most: one run's,
	 * as in the tables above. */
	b->device_reads_4k = b->proc_read_bytes = 0;
	for (int i = 0; i < first_rounds; i++) {
		const struct result *a = &r[i].run[which];

		double reads = which == FW_KERNEL ? a->proc_reads : a->lib_reads;

		b->device_reads_4k = max_or_unknown(b->device_reads_4k, reads);
		b->proc_read_bytes = max_or_unknown(b->proc_read_bytes, a->proc_read_bytes);
		b->writes = (double)a->writes;
	}
	b->reads_per_write = b->device_reads_4k / b->writes;
	return b;
}

static void first_writes_targets(struct bres *b, const struct first_round *r, double slowest_new)
{
	double vs_kernel = first_median(r, FW_FIRST, FW_KERNEL), vs_later = first_median(r, FW_FIRST, FW_LATER);

	if (isnan(vs_kernel))
		res_target_na(b, bpaths[P_KBUF].name, ">= 1.0x kernel-buffered");
	else
		res_target(b, vs_kernel >= 1.0, ">= 1.0x kernel-buffered (%.2fx)", vs_kernel);
	if (isnan(vs_later))
		res_target_unjudged(b, "the later writes failed", ">= 0.8x the later writes");
	else
		res_target(b, vs_later >= 0.8, ">= 0.8x the later writes (%.2fx)", vs_later);
	res_note(b, "the slowest pc_cache_new took %.2f ms", slowest_new);
}

static double run_mibs(const struct result *r)
{
	return r->ok ? r->mibs : NAN;
}

static void first_writes_table(void)
{
	static struct first_round r[FIRST_ROUNDS];
	char file[PATH_MAX], first[96], later[96];
	uint64_t total = bo.quick ? bo.total : FIRST_TOTAL;

	first_rounds = bo.quick ? 1 : FIRST_ROUNDS;
	double slowest_new = 0;

	bu_join(file, sizeof(file), bo.dir, "pcbench-il-first.dat");
	snprintf(first, sizeof(first), "first writes into a new cache, %d B records", FIRST_RECORD);
	snprintf(later, sizeof(later), "later writes, same cache, %d B records", FIRST_RECORD);
	printf("\n== interleaved, table 3: the first writes into a new cache: %d threads, %d B records, %s per run, "
	       "fsync included, %d rounds ==\n",
	       bo.threads, FIRST_RECORD, bu_human(total), first_rounds);
	printf("Each round: a %d s pause, kernel-buffered; the same pause, a new pagecache cache of %s (made right before the "
	       "writes, its memory not waited for) written with PC_DONTCACHE; the same workload again in that cache "
	       "once settled (later writes, a new file, its fault-in waited for).  MiB/s are medians; ratios are medians of each round's own ratio\n",
	       bo.quick ? 0 : FIRST_PAUSE_US / 1000000, bu_human(bo.mem));
	for (int i = 0; i < first_rounds; i++) {
		first_writes_round(file, total, &r[i], first);
		slowest_new = fmax(slowest_new, r[i].new_ms);
		printf("  round %d: kernel-buffered %.1f, new cache %.1f, later writes %.1f MiB/s; pc_cache_new %.2f ms\n",
		       i + 1, run_mibs(&r[i].run[FW_KERNEL]), run_mibs(&r[i].run[FW_FIRST]),
		       run_mibs(&r[i].run[FW_LATER]), r[i].new_ms);
	}
	unlink(file);
	struct bres *k = first_result(first, bpaths[P_KBUF].name, r, FW_KERNEL);
	struct bres *b = first_result(first, bpaths[P_PDC].name, r, FW_FIRST);
	struct bres *l = first_result(later, bpaths[P_PDC].name, r, FW_LATER);
	if (!b->error[0])
		first_writes_targets(b, r, slowest_new);
	if (!l->error[0])
		res_note(l, "the base of the new cache's '>= 0.8x the later writes'");
	printf("%-48s %9s  %s\n", "row", "MiB/s", "targets");
	printf("%-48s %9.1f\n", "kernel-buffered", k->value);
	printf("%-48s %9.1f  %s %s\n", "pagecache-dontcache, new cache", b->value, b->target,
	       b->error[0] ? b->error : b->pass ? "PASS" : "FAIL");
	printf("%-48s %9.1f\n", "pagecache-dontcache, later writes (same cache)", l->value);
}

/* The table as grouped bars: one group per record size, kernel beside
 * pagecache for each mode. */
static void interleaved_svg(bool overwrite)
{
	static const int order[] = { P_KBUF, P_PBUF, P_KBUF_DSYNC, P_PBUF_DSYNC, P_KDC, P_PDC, P_KDC_DSYNC, P_PDC_DSYNC,
				     P_KDIRECT, P_PDIRECT, P_KDIRECT_DSYNC, P_PDIRECT_DSYNC };
	const int nb = (int)(sizeof(order) / sizeof(order[0]));
	const char *bars[16], *groups[BENCH_MAX_RECORDS];
	static char gnames[BENCH_MAX_RECORDS][32];
	double vals[BENCH_MAX_RECORDS * 16];
	char workload[96];
	const char *file = svg_path(overwrite ? "interleaved-overwrite.svg" : "interleaved-new.svg");

	if (!file)
		return;
	for (int b = 0; b < nb; b++)
		bars[b] = bpaths[order[b]].name;
	for (int g = 0; g < bo.nrecords; g++) {
		snprintf(gnames[g], sizeof(gnames[g]), "%" PRIu64 " B records", bo.records[g]);
		groups[g] = gnames[g];
		il_workload(workload, sizeof(workload), overwrite, bo.records[g]);
		for (int b = 0; b < nb; b++) {
			struct bres *r = res_find("interleaved", workload, bars[b]);

			vals[g * nb + b] = r ? r->mib_s : NAN;
		}
	}
	char title[160];
	snprintf(title, sizeof(title), "interleaved: %d threads, %s, %s per run, fsync included (MiB/s)",
		 bo.threads, overwrite ? "overwrite" : "new file", bu_human(bo.total));
	svg_bars(file, title, "MiB/s", groups, bo.nrecords, bars, nb, vals);
}

void suite_interleaved(void)
{
	printf("\ninterleaved: pagecache memory_limit %s, block_size %s, edge budget %s; %d threads; %s per run\n",
	       bu_human(bo.mem), bo.block_size ? bu_human(bo.block_size) : "default",
	       bo.edge_budget ? bu_human(bo.edge_budget) : "default", bo.threads, bu_human(bo.total));
	interleaved_table(false);
	interleaved_table(true);
	if (path_selected(&bpaths[P_PDC]) && path_selected(&bpaths[P_KBUF]))
		first_writes_table();
	else
		printf("\n(interleaved, table 3 not run: it needs kernel-buffered and pagecache-dontcache)\n");
	interleaved_svg(false);
	interleaved_svg(true);
}
