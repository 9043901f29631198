/*
 * bench.h - what the files of pcbench share: the options of the run, the
 * I/O paths (kernel and pagecache, buffered, uncached, direct, +dsync),
 * the results and their report (tables, JSON), the progress line, the
 * dirty-bytes sampler and the SVG writer.
 *
 * One concern per file:
 *   main.c         options, the list of suites, --help
 *   paths.c        the I/O paths: open, write, read, close, what stays
 *                  cached; --only; the benchmark's caches
 *   sampler.c      peak and time series of dirty bytes and bytes written
 *   report.c       results, the tables printed, --json
 *   pairs.c        lines of two results (a base beside the figure judged)
 *                  for the old pcbench's workloads; medians of ratios
 *   progress.c     the progress line (terminal) or plain lines
 *   svg.c          a small SVG writer: line charts, grouped bars
 *   interleaved.c  suite interleaved (was edgebench)
 *   dontcache.c    suite dontcache
 *   fstime.c       suite fstime
 *   read.c         suite read: warm reads and hits, then cold sequential
 *   warm_reads.c   read's warm 4 KiB random reads (a), their file sizes
 *   hits.c         read's hits at memory speed (h), and the timed random
 *                  4 KiB reads that a and h share
 *   readahead.c    suite readahead (r)
 *   small_files.c  suite files (f)
 *   scratchfs.c    a fresh ext4 or XFS on a loop device (files)
 *   startup.c      suite startup (g)
 *   first_writes.c suite firstwrites (G)
 *   metadata.c     suite metadata (e)
 *   sqlite.c       suite sqlite (built with sqlite/, when SQLite is there)
 *   shared.c       suite shared: processes sharing one cache, beside
 *                  private caches and the kernel (fork()ed children)
 */
#ifndef PCBENCH_BENCH_H
#define PCBENCH_BENCH_H

#define _GNU_SOURCE
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

/* ------------------------------------------------------------ options */

enum bench_scale { SCALE_QUICK, SCALE_DEFAULT, SCALE_FULL };

#define BENCH_MAX_RECORDS 16

struct bench_opts {
	const char *dir;
	uint64_t mem;          /* pagecache memory_limit */
	double seconds;        /* timed phases of fixed length */
	enum bench_scale scale;
	bool quick;            /* scale == SCALE_QUICK (the old pcbench's --quick) */
	uint64_t total;        /* interleaved: bytes per run */
	uint64_t seq_total;    /* sequential writes and cold reads: bytes */
	int threads;           /* interleaved writers */
	int procs;             /* shared: processes */
	uint64_t shared_file;  /* shared: the read workload's file */
	uint64_t shared_record; /* shared: the writers' record size */
	uint64_t records[BENCH_MAX_RECORDS];
	int nrecords;
	uint64_t block_size;   /* pc_config.block_size; 0: the library's choice */
	uint64_t edge_budget;  /* pc_config.edge_budget_bytes; 0: the library's default */
	bool no_io_uring;      /* PC_CFG_NO_IO_URING */
	const char *only;      /* --only PATHS: comma-separated words, NULL: all */
	const char *json;      /* --json FILE */
	const char *svgdir;    /* --svg DIR */
	char devstat[128];     /* block device stat file of --dir, "" if none */
};

extern struct bench_opts bo;

/* ------------------------------------------------------------ paths */

/* One way of doing I/O.  Kernel paths use a plain descriptor (O_DIRECT for
 * the direct ones) and preadv2/pwritev2 with `flags` (RWF_*); pagecache
 * paths use a fresh cache of bo.mem and pc_pread/pc_pwrite with `flags`
 * (PC_*). */
struct bpath {
	const char *name;
	bool pc;
	bool odirect;          /* kernel: open with O_DIRECT */
	int flags;
};

enum {
	P_KBUF, P_KDC, P_KDC_DSYNC, P_KDIRECT, P_KDIRECT_DSYNC,
	P_PBUF, P_PDC, P_PDC_DSYNC, P_PDIRECT, P_PDIRECT_DSYNC,
	P_KBUF_DSYNC, P_PBUF_DSYNC,  /* buffered + dsync: interleaved's base for +dsync */
	P_COUNT
};
extern const struct bpath bpaths[P_COUNT];

/* An open file of one path. */
struct bfile {
	const struct bpath *p;
	int fd;                /* kernel paths */
	struct pc_cache *c;    /* pagecache paths: the cache (own or shared) */
	struct pc_file *pf;
	bool own_cache;
	char err[200];         /* the failed call, with errno */
};

/* --only: is this path selected? */
bool path_selected(const struct bpath *p);
/* --only: is the path of this name selected?  Also for the names of
 * results that are no path of bpaths (memcpy, pagecache-span, ...): a word
 * selects every name that contains it. */
bool name_selected(const char *name);
/* A configuration of `mem` bytes with `flags` (PC_CFG_*), and --block-size,
 * --edge-budget and --no-io-uring as the options say. */
void bench_config(struct pc_config *cfg, uint64_t mem, unsigned flags);
/* pc_cache_new(cfg); with PC_CFG_EAGER_MEMORY, its memory faulted in
 * before it returns (bench_wait_prefault). */
struct pc_cache *bench_cache_from(const struct pc_config *cfg);
/* A cache of bo.mem (and bo.block_size, bo.no_io_uring), its memory
 * faulted in before it is used; max_folio 0: the library's default. */
struct pc_cache *bench_cache_new(size_t max_folio, size_t block_size);
/* The same cache, returned at once: what a program that writes right
 * after pc_cache_new gets. */
struct pc_cache *bench_cache_new_unsettled(size_t max_folio, size_t block_size);
/* Wait (at most a minute) until a new cache has faulted its memory in. */
void bench_wait_prefault(struct pc_cache *c);
/* *d = b with the counters that grow (device I/O, hits, misses) less
 * a's: what happened between two pc_cache_stats. */
void bench_stats_delta(struct pc_stats *d, const struct pc_stats *a, const struct pc_stats *b);
/* Open `file` for path p (oflags of open(2)); `c` NULL makes a new cache
 * for a pagecache path.  0, or -1 with f->err set. */
int bf_open(struct bfile *f, const struct bpath *p, struct pc_cache *c, const char *file, int oflags);
ssize_t bf_pwrite(struct bfile *f, const void *buf, size_t n, uint64_t off);
ssize_t bf_pread(struct bfile *f, void *buf, size_t n, uint64_t off);
int bf_fsync(struct bfile *f);
/* Bytes of the file still cached: pagecache's cached_bytes, or the
 * kernel's resident pages of `file` (mincore).  NAN if unknown. */
double bf_cached(struct bfile *f, const char *file);
/* Close (and destroy an own cache).  0, or -1 with f->err set. */
int bf_close(struct bfile *f);
/* Record errno's story for `what` in f->err; returns -1. */
int bf_fail(struct bfile *f, const char *what);

/* ------------------------------------------------------------ sampler */

#define SAMPLE_MS 10
#define SAMPLE_MAX 20000

/* A thread that every SAMPLE_MS reads the dirty bytes (the kernel's
 * Dirty + Writeback of /proc/meminfo, or pagecache's dirty_bytes +
 * writeback_bytes of its stats) and the bytes written so far
 * (*written, added to by the writers); it keeps the peak and a series. */
struct sampler {
	pthread_t th;
	atomic_bool stop;
	struct pc_cache *c;            /* sample this cache, NULL: /proc/meminfo */
	_Atomic uint64_t *written;     /* may be NULL */
	uint64_t t0;
	int64_t baseline, peak;
	size_t n;
	float *t_s, *dirty_mib, *mib_s;  /* the series, n points */
};

void sampler_start(struct sampler *s, struct pc_cache *c, _Atomic uint64_t *written);
void sampler_stop(struct sampler *s);
void sampler_free(struct sampler *s);

/* ------------------------------------------------------------ results */

/* One measured result: a workload on a path.  NAN: not meaningful (null
 * in JSON). */
struct bres {
	char suite[24];
	char workload[96];
	char path[48];
	double mib_s, ops_s;
	double p50_us, p99_us, p999_us;
	double peak_dirty_bytes;
	double reads_per_write;
	double cached_after_bytes;
	double share;              /* competing writers: slower / faster */
	double writes;             /* write calls of the run */
	double device_reads_4k;    /* 4 KiB device reads of the run (pagecache:
	                              the library's count; kernel: /proc/self/io) */
	double proc_read_bytes;    /* interleaved: /proc/self/io read_bytes of the
	                              run, every path (see interleaved.c) */
	double value;              /* the figure judged, in `unit` */
	char unit[16];
	char target[480];          /* "" if none */
	int pass;                  /* -1 none, 0 FAIL, 1 PASS */
	bool part_unjudged;        /* some of the targets were not evaluated */
	/* report_pairs (not in JSON): the ratio judged where it was measured
	 * in pairs, the median of rounds' own ratios (NAN: value over the
	 * base's); and whether this is the base of its line */
	double ratio;
	bool is_base;
	char note[600];
	char error[300];
};

/* A new result, all figures NAN. */
struct bres *res_add(const char *suite, const char *workload, const char *path);
/* Append a target and its verdict (the result passes if all its targets
 * do). */
void res_target(struct bres *r, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void res_note(struct bres *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A target relative to `base` (a path) that could not be judged because
 * base was not run (--only) or failed: stated, marked not evaluated, the
 * verdict untouched (null in JSON when it is the only target). */
void res_target_na(struct bres *r, const char *base, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A target stated but not judged, for the reason `why` (the verdict
 * untouched, as res_target_na). */
void res_target_unjudged(struct bres *r, const char *why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The base result exists and has no error. */
bool res_base_ok(const struct bres *k);
/* The figure v (in r's unit) as r's value, and as its MiB/s (MiB/s,
 * KB/s) or ops/s (any other unit per second).  r may be NULL (a path
 * --only left out): nothing then. */
void res_figure(struct bres *r, double v);
/* r's value; NAN if r is NULL. */
double res_value(const struct bres *r);
/* The result of `workload` on path name `path` in `suite`, NULL if none. */
struct bres *res_find(const char *suite, const char *workload, const char *path);
/* Iteration: the i-th result, NULL past the end. */
struct bres *res_at(size_t i);
/* Print the table of one workload (every path measured), pagecache rows
 * beside the kernel's, each with its ratio to kernel-buffered's. */
void report_workload(const char *suite, const char *workload);
/* The table of the old pcbench for the results of `suite` (pairs.c):
 * each workload one line, its base (the kernel's column) beside the
 * figure judged (pagecache's), their ratio, target and verdict; then the
 * notes. */
void report_pairs(const char *suite);
/* The summary of PASS/FAIL, and --json. */
bool report_finish(int argc, char **argv); /* false: --json could not be written */

/* ------------------------------------------------------------ pairs */

/*
 * A line of the old pcbench's workloads (pairs.c): two results of one
 * workload, the base (kernel-buffered, or what else the line compares
 * with) and the figure judged (pagecache-buffered, or another), either
 * NULL where --only does not select its path (or the line has no base).
 * The results are report.c's like any other; this only points at them.
 */
struct pair {
	struct bres *base, *pc;
	const char *base_path; /* the base's path, for a target not judged */
};

/* The line's results, in `unit`, each added if --only selects it: first
 * the base (NULL: none), then pc. */
struct pair pair_add(const char *suite, const char *workload, const char *unit, const char *base,
		     const char *pc);
/* Whether anything of the line runs. */
bool pair_any(const struct pair *p);
/* The result the line's notes go to: pc's, else the base's (NULL: none). */
struct bres *pair_noted(const struct pair *p);
void pair_note(const struct pair *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A pagecache call failed: said on stderr and in the note, with errno;
 * pc's figure NAN. */
void pair_fail(const struct pair *p, const char *what);
/* The line's target, `target` (NULL: none): pc's figure at least `min`
 * times the base's (pc->ratio where measured in pairs); not evaluated
 * when --only left the base out; FAIL when pc has no figure.  Then a
 * result without a figure gets its error. */
void pair_judge(const struct pair *p, double min, const char *target);
/* The same for a target on pc's own figure, met or not (`ok`). */
void pair_judge_own(const struct pair *p, bool ok, const char *target);
/* A cache for the line: at least `min_mem` bytes (--mem if larger),
 * read-ahead up to readahead_max ((size_t)-1: the library's default),
 * its memory faulted in; NULL after a failure (noted). */
struct pc_cache *pair_cache(const struct pair *p, uint64_t min_mem, size_t readahead_max);
/* Close f and destroy c (either may be NULL), failures noted. */
void pair_finish_cache(const struct pair *p, struct pc_cache *c, struct pc_file *f);
/* The device I/O, hits and misses of d (a stats delta) into the note. */
void pair_note_io(const struct pair *p, const char *when, const struct pc_stats *d);
/* The median of num[i] / den[i] (the arrays are kept; den NULL: of
 * num[i] itself). */
double median_ratio(const double *num, const double *den, int n);

/* ------------------------------------------------------------ hits.c */

/* Threads reading random 4 KiB pieces of a warm file for bo.seconds (a,
 * h): through the kernel, pagecache, a span, or plain memory (hits.c). */
enum hit_kind { HIT_KERNEL, HIT_PAGECACHE, HIT_MEMCPY, HIT_SPAN, HIT_LOOKUP };
struct lk_handle;

struct hit_arg {
	enum hit_kind kind;
	int fd;
	struct pc_file *f;
	const char *mem;            /* HIT_MEMCPY: the buffer */
	const struct lk_handle *lk; /* HIT_LOOKUP: the way to mem's pieces */
	uint64_t npages;
	uint64_t deadline;
	unsigned seed;
	uint64_t ops;
	int err;                    /* errno of a failed call */
	pthread_barrier_t *start;
};

/* ops/s of nthreads running `proto`'s kind for bo.seconds; NAN on error. */
double hit_run(const struct hit_arg *proto, int nthreads);
/* hit_run of the kernel's pread, adding to *read_bytes what the process
 * read from the device meanwhile (there should be nothing). */
double kernel_hit_run(const struct hit_arg *proto, int nthreads, int64_t *read_bytes);
/* Read the whole file through the kernel (warming its cache). */
void kernel_read_all(int fd, char *buf, size_t chunk);
/* Open the file read-only in c and read it whole in 1 MiB reads (warm);
 * NULL after a failure (noted in p). */
struct pc_file *pc_open_warm(const struct pair *p, struct pc_cache *c, const char *path, char *buf);
/* The timed phases must be all hits: a device read means the file did
 * not fit (the benchmark's error, not the library's result); the note
 * says so.  False if pagecache read from the device (its figure is then
 * no figure). */
bool check_all_hits(const struct pair *p, const struct pc_stats *d, int64_t kernel_read_bytes);
/* h: hits of the file at path, fsize bytes, in suite read. */
void bench_hits(const char *path, uint64_t fsize);

/* ------------------------------------------------------------ progress */

/* Polls how far the step is: units done so far (bytes when the step has a
 * byte total). */
typedef uint64_t (*prog_poll_fn)(void *arg);

void prog_init(void);
void prog_suite(const char *suite, int index, int count, double est_s);
/* A step of `total` bytes; poll gives bytes done. */
void prog_step(const char *workload, const char *path, uint64_t total, prog_poll_fn poll, void *arg);
/* A timed phase of `ns` nanoseconds; poll (may be NULL) gives bytes done,
 * for the rate. */
void prog_step_timed(const char *workload, const char *path, uint64_t ns, prog_poll_fn poll, void *arg);
/* A step of `total` units ("files", "runs"), each done by prog_advance. */
void prog_step_count(const char *workload, const char *path, uint64_t total, const char *unit);
void prog_advance(uint64_t n);
void prog_step_done(void);
void prog_end(void);
/* Seconds the remaining suites are expected to take (for "time left"). */
void prog_plan(double total_s);

/* ------------------------------------------------------------ svg */

struct svg_series {
	const char *name;
	const float *x, *y;
	size_t n;
};

/* A line chart; logx: logarithmic x axis.  0, or -1 (with a warning). */
int svg_lines(const char *file, const char *title, const char *xlabel, const char *ylabel,
	      const struct svg_series *s, int ns, bool logx);
/* Grouped bars: ng groups of nb bars, vals[g * nb + b] (NAN: no bar). */
int svg_bars(const char *file, const char *title, const char *ylabel, const char *const *groups, int ng,
	     const char *const *bars, int nb, const double *vals);
/* bo.svgdir + "/" + name, or NULL without --svg. */
const char *svg_path(const char *name);

/* ------------------------------------------------------------ suites */

/* ------------------------------------------------------------ scratchfs */

/* A fresh file system on a loop device, mounted at mnt (scratchfs.c). */
struct scratchfs {
	char type[8];
	char image[PATH_MAX];
	char mnt[PATH_MAX];
	bool mounted;
};
/* Make and mount a fresh `type` (ext4, xfs) file system; false with the
 * reason in `why` when it cannot be (not root, no mkfs, no loop mount). */
bool scratchfs_make(struct scratchfs *s, const char *type, char *why, size_t len);
/* Unmount it and remove its image. */
void scratchfs_remove(struct scratchfs *s);

void suite_interleaved(void);
void suite_dontcache(void);
void suite_fstime(void);
void suite_read(void);
void suite_readahead(void);
void suite_files(void);
void suite_startup(void);
void suite_firstwrites(void);
void suite_metadata(void);
void suite_sqlite(void);
void suite_shared(void);
/* shared.c: the names of its rows that are no path of bpaths (--only
 * takes words of them too). */
#define SHARED_NPATHS 3
extern const char *const shared_paths[SHARED_NPATHS];
/* warm_reads.c: warm 4 KiB random reads (a) and hits (h), for suite_read */
void warm_reads(void);

/* The latency percentiles of n samples (sorted in place) into r, in us. */
void res_latency(struct bres *r, uint64_t *lat_ns, size_t n);

#endif /* PCBENCH_BENCH_H */
