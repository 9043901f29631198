/*
 * legacy.c - the workloads of the old pcbench (issue 2 and later), each
 * measured as it was: the kernel first, then pagecache (f: each side
 * alone, pagecache idle before the kernel's run), every pagecache
 * workload in a fresh cache of --mem bytes.  They are suites of pcbench
 * now, and their rows become results (kernel-buffered beside
 * pagecache-buffered, or what the row's base column is):
 *
 *   read (a, h)  4 KiB random reads from a warm cache, 1 thread, a file
 *                the CPU's cache holds (16 MiB) and one it does not
 *                (see out_of_llc_bytes()), target >= 2.5x; hits at memory
 *                speed, 1 and 2 threads on one handle against the
 *                kernel's pread (1 and 2 threads) and a bare memcpy of
 *                the same pattern, and the zero-copy
 *                pc_read_begin/pc_read_end pair (see bench_hits()); the
 *                large hit file is 128 MiB in a cache of 512 MiB.
 *   metadata (e) metadata per cached 4 KiB folio, measured from the heap
 *                (see measure_metadata()), target <= 2 %.
 *   files (f)    5000 files of 5000 bytes created, written and closed,
 *                then reopened, read and closed (see bench_small_files()),
 *                files/s, target >= 0.8x for both; the note says what
 *                each open, write/read and close cost per file on each side.
 *   startup (g)  pc_cache_new at memory_limit 256 MiB, 1 GiB, 8 GiB and
 *                MemAvailable - 2 GiB (slowest judged, <= 50 ms), and
 *                ENOMEM for a memory_limit the machine cannot back.
 *   firstwrites (G, never by default) the first writes into a new 8 GiB
 *                cache: fresh, fresh with PC_CFG_LAZY_MEMORY, and warm.
 *   readahead (r) read-ahead streams on a cold file of --seq-total bytes
 *                (see bench_streams()).
 *
 * The old b (fstime-w), c (sequential write + fsync) and d (cold
 * sequential read) are the fstime, dontcache and read suites' workloads on
 * every path now (fstime.c, dontcache.c, read.c).
 */
#include "bench.h"

#include <malloc.h>

/* One line of the table. */
struct row {
	const char *name;
	const char *unit;
	double kernel, pc;   /* NAN: not measured / failed */
	double ratio;        /* pc over kernel as measured in pairs (NAN: pc / kernel) */
	const char *target;  /* printed */
	double min_ratio;    /* PASS if pc/kernel >= this (when > 0) */
	double max_pct;      /* e: PASS if pc (a percentage) <= this */
	bool pct_row;
	double max_abs;      /* g: PASS if pc (an absolute figure) <= this (when > 0) */
	const char *base;    /* what the kernel column is: NULL, kernel-buffered */
	const char *pc_path; /* what the pagecache column is: NULL, pagecache-buffered */
	bool has_cached;     /* cached_after is measured */
	double cached_after; /* bytes the pagecache run left cached */
	char note[1024];
};

static struct row rows[64];
static int nrows;

/* A new line of the table, nothing measured yet. */
static struct row *add_row(const char *name, const char *unit, const char *target)
{
	struct row *r = &rows[nrows++];

	r->name = name;
	r->unit = unit;
	r->target = target;
	r->kernel = r->pc = r->ratio = NAN;
	return r;
}

/* A pagecache call failed: say which, with errno, for the report. */
#define PC_FAIL(r, what) do { \
		int e_ = errno; \
		fprintf(stderr, "pcbench: %s: %s failed: %s (errno %d)\n", \
			(r)->name, what, strerror(e_), e_); \
		snprintf((r)->note + strlen((r)->note), \
			 sizeof((r)->note) - strlen((r)->note), \
			 "%s%s failed: %s (errno %d)", (r)->note[0] ? "; " : "", \
			 what, strerror(e_), e_); \
		(r)->pc = NAN; \
	} while (0)

/* A cache of at least `min_mem` bytes (--mem if larger). */
static struct pc_cache *new_cache_of(struct row *r, size_t readahead_max, uint64_t min_mem)
{
	struct pc_config cfg;
	struct pc_cache *c;

	pc_config_init(&cfg);
	cfg.flags = PC_CFG_EAGER_MEMORY; /* a cache in use: see bench_cache_new */
	cfg.memory_limit = (size_t)(bo.mem > min_mem ? bo.mem : min_mem);
	if (readahead_max != (size_t)-1)
		cfg.readahead_max_bytes = readahead_max;
	c = pc_cache_new(&cfg);
	if (!c)
		PC_FAIL(r, "pc_cache_new");
	else
		bench_wait_prefault(c);
	return c;
}

static struct pc_cache *new_cache(struct row *r, size_t readahead_max)
{
	return new_cache_of(r, readahead_max, 0);
}

static void finish_cache(struct row *r, struct pc_cache *c, struct pc_file *f)
{
	if (f && pc_close(f) < 0)
		PC_FAIL(r, "pc_close");
	if (c && pc_cache_destroy(c) < 0)
		PC_FAIL(r, "pc_cache_destroy");
}

static void stats_delta(struct pc_stats *d, const struct pc_stats *a,
			const struct pc_stats *b)
{
	*d = *b;
	d->dev_read_ios = b->dev_read_ios - a->dev_read_ios;
	d->dev_read_bytes = b->dev_read_bytes - a->dev_read_bytes;
	d->dev_write_ios = b->dev_write_ios - a->dev_write_ios;
	d->dev_write_bytes = b->dev_write_bytes - a->dev_write_bytes;
	d->hit_bytes = b->hit_bytes - a->hit_bytes;
	d->miss_bytes = b->miss_bytes - a->miss_bytes;
}

static void note_io(struct row *r, const char *when, const struct pc_stats *d)
{
	size_t l = strlen(r->note);

	snprintf(r->note + l, sizeof(r->note) - l,
		 "%spagecache %s: device reads %" PRIu64 " (%s), writes %" PRIu64
		 " (%s), hit %s, miss %s, io_uring %u",
		 l ? "; " : "", when, d->dev_read_ios, bu_human(d->dev_read_bytes),
		 d->dev_write_ios, bu_human(d->dev_write_bytes),
		 bu_human(d->hit_bytes), bu_human(d->miss_bytes), d->io_uring);
}

/* Read the whole file through the kernel (warming its cache). */
static void kernel_read_all(int fd, char *buf, size_t chunk)
{
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, chunk, off)) > 0)
		off += n;
	if (n < 0)
		bu_die("pread:");
}

static int pc_read_all(struct pc_file *f, char *buf, size_t chunk)
{
	off_t off = 0;
	ssize_t n;

	while ((n = pc_pread(f, buf, chunk, off, 0)) > 0)
		off += n;
	return n < 0 ? -1 : 0;
}

/* Open the file read-only in c and read it whole in 1 MiB reads (warm);
 * NULL after a failure (noted in r). */
static struct pc_file *pc_open_warm(struct row *r, struct pc_cache *c, const char *path, char *buf)
{
	struct pc_file *f = pc_open(c, path, O_RDONLY, 0);

	if (!f) {
		PC_FAIL(r, "pc_open(O_RDONLY)");
		return NULL;
	}
	if (pc_read_all(f, buf, BU_MiB) < 0) {
		PC_FAIL(r, "pc_pread (warming, 1 MiB)");
		pc_close(f);
		return NULL;
	}
	return f;
}

/* ------------------------------------------- timed random 4 KiB reads */

/* Threads reading random 4 KiB pieces of a warm file for bo.seconds (a, h):
 * through the kernel, pagecache, a span, or plain memory. */
enum hit_kind { HIT_KERNEL, HIT_PAGECACHE, HIT_MEMCPY, HIT_SPAN, HIT_LOOKUP };

/*
 * HIT_LOOKUP: the bare memcpy again, but with its source found the way any
 * cache must find a cached piece before it can copy it: through memory,
 * here the dependent loads a hit on pagecache's index of a file of 256 KiB
 * folios makes (handle -> file -> root node [-> interior node, in a file
 * over 16 MiB] -> the 256 KiB piece), and nothing else: no check, no
 * count, no call.  Where the memcpy line computes its source from the
 * offset alone, this one shows what the lookup by itself costs on this
 * machine: a reference between the bare copy and a hit, not a target.
 */
#define LK_PIECE_SHIFT 18 /* 256 KiB pieces */
struct lk_node {
	const void *slot[64];
};
struct lk_file {
	const struct lk_node *root;
	bool two_levels; /* root -> interior nodes -> pieces, else root -> pieces */
};
struct lk_handle {
	const struct lk_file *file;
};

struct hit_arg {
	enum hit_kind kind;
	int fd;
	struct pc_file *f;
	const char *mem;       /* HIT_MEMCPY: the buffer */
	const struct lk_handle *lk; /* HIT_LOOKUP: the way to mem's pieces */
	uint64_t npages;
	uint64_t deadline;
	unsigned seed;
	uint64_t ops;
	int err;               /* errno of a failed call */
	pthread_barrier_t *start;
};

static int hit_one(struct hit_arg *a, char *buf, off_t off)
{
	switch (a->kind) {
	case HIT_KERNEL:
		return pread(a->fd, buf, 4096, off) == 4096 ? 0 : -1;
	case HIT_PAGECACHE:
		return pc_pread(a->f, buf, 4096, off, 0) == 4096 ? 0 : -1;
	case HIT_SPAN: {
		/* The zero-copy pair: a pointer to the cached bytes, no copy. */
		struct pc_span s;

		if (pc_read_begin(a->f, off, 4096, 0, &s) != 4096)
			return -1;
		pc_read_end(&s);
		return 0;
	}
	case HIT_MEMCPY:
		memcpy(buf, a->mem + off, 4096);
		/* Keep the copy from being optimised away. */
		__asm__ volatile("" : : "r"(buf) : "memory");
		return 0;
	case HIT_LOOKUP: {
		uint64_t piece = (uint64_t)off >> LK_PIECE_SHIFT;
		const struct lk_file *file = a->lk->file;
		const struct lk_node *n = file->root;
		if (file->two_levels)
			n = n->slot[(piece >> 6) & 63];
		const char *src = n->slot[piece & 63];

		memcpy(buf, src + (off & ((1 << LK_PIECE_SHIFT) - 1)), 4096);
		/* As above; the clobber also makes every iteration load the
		 * way again. */
		__asm__ volatile("" : : "r"(buf) : "memory");
		return 0;
	}
	}
	return -1;
}

static void *hit_thread(void *p)
{
	struct hit_arg *a = p;
	char *buf = bu_alloc_aligned(4096, 4096);
	struct bu_rng rng;

	bu_rng_seed(&rng, a->seed);
	pthread_barrier_wait(a->start);
	for (;;) {
		for (int i = 0; i < 256; i++) {
			off_t off = (off_t)(bu_rng_below(&rng, a->npages) * 4096);

			if (hit_one(a, buf, off) < 0) {
				a->err = errno ? errno : EIO;
				goto out;
			}
		}
		a->ops += 256;
		if (bu_now_ns() >= a->deadline)
			break;
	}
out:
	free(buf);
	return NULL;
}

/* ops/s of nthreads running `proto`'s kind for bo.seconds; NAN on error. */
static double hit_run(const struct hit_arg *proto, int nthreads)
{
	struct hit_arg a[2];
	pthread_t t[2];
	pthread_barrier_t start;
	uint64_t t0, ops = 0;
	int err = 0;

	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		a[i] = *proto;
		a[i].seed = 42 + (unsigned)i;
		a[i].start = &start;
		a[i].ops = 0;
		a[i].err = 0;
		a[i].deadline = UINT64_MAX;
	}
	t0 = bu_now_ns() + 1000000;
	for (int i = 0; i < nthreads; i++) {
		a[i].deadline = t0 + (uint64_t)(bo.seconds * 1e9);
		if (pthread_create(&t[i], NULL, hit_thread, &a[i]))
			bu_die("pthread_create:");
	}
	pthread_barrier_wait(&start);
	t0 = bu_now_ns();
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		ops += a[i].ops;
		if (a[i].err)
			err = a[i].err;
	}
	double secs = bu_secs(bu_now_ns() - t0);
	pthread_barrier_destroy(&start);
	if (err) {
		errno = err;
		return NAN;
	}
	return (double)ops / secs;
}

/* hit_run of the kernel's pread, adding to *read_bytes what the process
 * read from the device meanwhile (there should be nothing). */
static double kernel_hit_run(const struct hit_arg *proto, int nthreads, int64_t *read_bytes)
{
	int64_t r0 = bu_proc_read_bytes();
	double ops = hit_run(proto, nthreads);
	int64_t r1 = bu_proc_read_bytes();

	if (r0 >= 0 && r1 > r0)
		*read_bytes += r1 - r0;
	return ops;
}

/* The way to mem's 256 KiB pieces for HIT_LOOKUP, laid out like
 * pagecache's index of a file of 256 KiB folios (NULL if fsize is over
 * the 1 GiB it covers); lk_free frees it. */
static struct lk_handle *lk_build(const char *mem, uint64_t fsize)
{
	uint64_t pieces = fsize >> LK_PIECE_SHIFT;

	if (pieces > 64 * 64)
		return NULL;
	struct lk_handle *h = calloc(1, sizeof(*h));
	struct lk_file *f = calloc(1, sizeof(*f));
	struct lk_node *root = calloc(1, sizeof(*root));
	if (!h || !f || !root)
		bu_die("calloc:");
	f->root = root;
	h->file = f;
	f->two_levels = pieces > 64;
	if (!f->two_levels) {
		for (uint64_t i = 0; i < pieces; i++)
			root->slot[i] = mem + (i << LK_PIECE_SHIFT);
		return h;
	}
	for (uint64_t i = 0; i < pieces; i++) {
		struct lk_node *inner = (struct lk_node *)root->slot[i >> 6];
		if (!inner) {
			inner = calloc(1, sizeof(*inner));
			if (!inner)
				bu_die("calloc:");
			root->slot[i >> 6] = inner;
		}
		inner->slot[i & 63] = mem + (i << LK_PIECE_SHIFT);
	}
	return h;
}

static void lk_free(struct lk_handle *h)
{
	if (!h)
		return;
	struct lk_node *root = (struct lk_node *)h->file->root;
	for (int i = 0; h->file->two_levels && i < 64; i++)
		free((void *)root->slot[i]);
	free(root);
	free((void *)h->file);
	free(h);
}

/* ---------------------------------------------------------------- a */

/* The timed phases of a hit or warm-read row must be all hits: a device
 * read means the file did not fit (the benchmark's error, not the
 * library's result), and the row says so instead of a figure. */
static void check_all_hits(struct row *r, const struct pc_stats *d, int64_t kernel_read_bytes)
{
	size_t l = strlen(r->note);

	if (kernel_read_bytes > 0)
		snprintf(r->note + l, sizeof(r->note) - l, "%skernel: %s read from the device while timed "
			 "(/proc/self/io)", l ? "; " : "", bu_human((uint64_t)kernel_read_bytes));
	if (d->dev_read_ios && !isnan(r->pc)) {
		l = strlen(r->note);
		snprintf(r->note + l, sizeof(r->note) - l, "%sNOT ALL HITS: pagecache read %" PRIu64 " times from "
			 "the device while timed, so no figure", l ? "; " : "", d->dev_read_ios);
		r->pc = NAN;
	}
}

static void bench_random_reads(const char *path, uint64_t fsize, const char *why)
{
	struct row *r = add_row(NULL, "ops/s", ">= 2.5x");
	struct hit_arg proto = { .npages = fsize / 4096, .kind = HIT_KERNEL };
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	struct pc_stats s0, s1, d;
	struct pc_cache *c;

	/* Two sizes: one that the CPU's last-level cache holds (there the
	 * copy is cheap and the per-call cost shows), one that it does not
	 * (there both sides mostly wait for DRAM in the 4 KiB copy). */
	static char names[2][64];
	static int nth;
	char *name = names[nth++ % 2];
	snprintf(name, sizeof(names[0]), "a. 4 KiB random read, warm, %s file", bu_human(fsize));
	r->name = name;
	r->min_ratio = 2.5;
	snprintf(r->note, sizeof(r->note), "file %s%s%s%s, cache %s", bu_human(fsize), why ? " (" : "",
		 why ? why : "", why ? ")" : "", bu_human(bo.mem > 2 * fsize ? bo.mem : 2 * fsize));

	/* kernel */
	proto.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (proto.fd < 0)
		bu_die("open %s:", path);
	kernel_read_all(proto.fd, buf, BU_MiB);
	int64_t kr = 0;
	r->kernel = kernel_hit_run(&proto, 1, &kr);
	if (isnan(r->kernel))
		bu_die("kernel pread (4 KiB random):");
	close(proto.fd);

	/* pagecache: the whole file fits, with room (a --quick --mem is
	 * smaller than the file that outgrows the CPU's cache) */
	c = new_cache_of(r, (size_t)-1, 2 * fsize);
	if (!c)
		goto out;
	proto.kind = HIT_PAGECACHE;
	proto.f = pc_open_warm(r, c, path, buf);
	if (!proto.f)
		goto done;
	pc_cache_stats(c, &s0);
	r->pc = hit_run(&proto, 1);
	if (isnan(r->pc)) {
		PC_FAIL(r, "pc_pread (4 KiB random)");
		goto done;
	}
	pc_cache_stats(c, &s1);
	stats_delta(&d, &s0, &s1);
	note_io(r, "timed phase", &d);
	check_all_hits(r, &d, kr);
done:
	finish_cache(r, c, proto.f);
out:
	free(buf);
}

/* ---------------------------------------------------------------- g */

/*
 * g. start-up: how long pc_cache_new takes (default flags, so with the
 * background fault-in) at memory_limit 256 MiB, 1 GiB, 8 GiB and the
 * machine's available memory less 2 GiB; the slowest is judged (target
 * <= 50 ms at any size).  And a memory_limit above what the machine can
 * back must fail with ENOMEM (noted).
 */
/* Four sizes that must work and one too big to. */
#define STARTUP_CACHES 5

static double startup_ms(uint64_t bytes, int *err)
{
	struct pc_config cfg;
	struct pc_cache *c;
	uint64_t t0;
	double ms;

	pc_config_init(&cfg);
	cfg.memory_limit = (size_t)bytes;
	t0 = bu_now_ns();
	c = pc_cache_new(&cfg);
	ms = bu_secs(bu_now_ns() - t0) * 1e3;
	*err = c ? 0 : errno;
	if (c)
		pc_cache_destroy(c);
	return ms;
}

static uint64_t mem_available(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *fp = fopen("/proc/meminfo", "re");

	while (fp && fgets(line, sizeof(line), fp))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (fp)
		fclose(fp);
	return (uint64_t)kb * 1024;
}

static void bench_startup(void)
{
	struct row *r = add_row("g. pc_cache_new, slowest size", "ms", "<= 50 ms");
	uint64_t avail = mem_available();
	uint64_t sizes[4] = { 256 * BU_MiB, BU_GiB, 8 * BU_GiB,
			      avail > 4 * BU_GiB ? (avail - 2 * BU_GiB) & ~(BU_MiB - 1) : 2 * BU_GiB };
	double worst = 0;
	size_t l;
	int err;

	r->max_abs = 50;
	for (int i = 0; i < 4; i++) {
		double ms = startup_ms(sizes[i], &err);

		prog_advance(1);
		l = strlen(r->note);
		snprintf(r->note + l, sizeof(r->note) - l, "%s%s: %.2f ms%s%s", l ? ", " : "",
			 bu_human(sizes[i]), ms, err ? " " : "", err ? strerror(err) : "");
		if (err)
			worst = NAN;
		else if (!isnan(worst) && ms > worst)
			worst = ms;
	}
	uint64_t too_big = avail + 4 * BU_GiB;
	double ms = startup_ms(too_big, &err);
	prog_advance(1);
	l = strlen(r->note);
	snprintf(r->note + l, sizeof(r->note) - l, "; %s (MemAvailable + 4 GiB): %s after %.2f ms",
		 bu_human(too_big), err == ENOMEM ? "ENOMEM, as it must" : err ? strerror(err) : "CREATED (wrong)",
		 ms);
	if (err != ENOMEM)
		worst = NAN;
	r->pc = worst;
}

/* ---------------------------------------------------------------- G */

/*
 * G (only with --only G: it takes about 4 minutes and 8 GiB): the first
 * writes into a new cache.  Latency of 1 MiB pc_pwrite()s writing 4 GiB to
 * a new file in an 8 GiB cache: "fresh", right after pc_cache_new (the
 * background thread faults the memory in as the writes go, and the writes
 * fault what they outrun); "fresh, lazy" with PC_CFG_LAZY_MEMORY (every
 * write faults its folios in); and "warm", the first cache again after a
 * truncate to 0 and an fsync.  Twice: as fast as the writes go, and paced
 * at STARTUP_PACE MiB/s (a writer slower than the machine's fault-in rate).
 * A virtual machine whose host backs guest memory lazily keeps memory a
 * process freed backed for a while, which would flatter the next fresh
 * run: STARTUP_PAUSE_S seconds pass before each fresh run.
 */
#define STARTUP_WRITE_TOTAL (4 * BU_GiB)
#define STARTUP_CACHE (8 * BU_GiB)
#define STARTUP_PACE 256u /* MiB/s */
#define STARTUP_PAUSE_S 30u

/* 1 MiB writes of STARTUP_WRITE_TOTAL from offset 0, at most `pace` MiB/s
 * (0: as fast as they go); prints a line. */
static void first_writes_pass(const char *label, struct pc_file *f, const char *buf, unsigned pace)
{
	size_t n = STARTUP_WRITE_TOTAL / BU_MiB;
	uint64_t *lat = malloc(n * sizeof(*lat)), t0 = bu_now_ns();

	if (!lat)
		bu_die("out of memory");
	for (size_t i = 0; i < n; i++) {
		uint64_t due = pace ? t0 + i * 1000000000ull / pace : 0, t = bu_now_ns();

		if (t < due) {
			bu_sleep_ms((unsigned)((due - t) / 1000000));
			t = bu_now_ns();
		}
		if (pc_pwrite(f, buf, BU_MiB, (off_t)(i * BU_MiB), 0) != (ssize_t)BU_MiB)
			bu_die("pcbench: G: pc_pwrite:");
		lat[i] = bu_now_ns() - t;
		prog_advance(1);
	}
	double secs = bu_secs(bu_now_ns() - t0);

	if (pc_fsync(f) < 0)
		bu_die("pcbench: G: pc_fsync:");
	bu_sort_u64(lat, n);
	printf("  %-12s p50 %7.3f ms  p99 %7.3f ms  p99.9 %7.3f ms  max %7.3f ms  %7.1f MiB/s\n", label,
	       bu_percentile(lat, n, 50) / 1e6, bu_percentile(lat, n, 99) / 1e6,
	       bu_percentile(lat, n, 99.9) / 1e6, lat[n - 1] / 1e6, (double)STARTUP_WRITE_TOTAL / BU_MiB / secs);
	free(lat);
}

/* A fresh cache written right after creation; with `warm_too`, truncated
 * and written again. */
static void first_writes_run(const char *path, unsigned flags, const char *label, bool warm_too, const char *buf,
			     unsigned pace)
{
	struct pc_config cfg;
	struct pc_cache *c;
	struct pc_file *f;

	unlink(path);
	bu_sleep_ms(STARTUP_PAUSE_S * 1000);
	pc_config_init(&cfg);
	cfg.memory_limit = (size_t)STARTUP_CACHE;
	cfg.flags = flags;
	c = pc_cache_new(&cfg);
	if (!c)
		bu_die("pcbench: G: pc_cache_new(%s):", bu_human(STARTUP_CACHE));
	f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f)
		bu_die("pcbench: G: pc_open %s:", path);
	first_writes_pass(label, f, buf, pace);
	if (warm_too) {
		if (pc_ftruncate(f, 0) < 0 || pc_fsync(f) < 0)
			bu_die("pcbench: G: pc_ftruncate:");
		first_writes_pass("warm", f, buf, pace);
	}
	pc_close(f);
	pc_cache_destroy(c);
	unlink(path);
}

static void bench_first_writes(const char *path)
{
	char *buf = bu_alloc_aligned(BU_MiB, 4096);

	bu_fill_random(buf, BU_MiB, 7);
	printf("G. 1 MiB writes of %s to a new file, %s cache, right after pc_cache_new\n",
	       bu_human(STARTUP_WRITE_TOTAL), bu_human(STARTUP_CACHE));
	for (unsigned k = 0; k < 2; k++) {
		unsigned pace = k ? STARTUP_PACE : 0;

		if (pace)
			printf("  paced at %u MiB/s:\n", pace);
		first_writes_run(path, PC_CFG_LAZY_MEMORY, "fresh, lazy", false, buf, pace);
		first_writes_run(path, 0, "fresh", true, buf, pace);
	}
	free(buf);
}

/* ---------------------------------------------------------------- h */

/*
 * h. cache hits at memory speed (issue 10): warm 4 KiB random reads of a
 * 128 MiB file (twice the CPU's cache, 64 MiB at least, with --quick) and
 * of one the CPU's cache holds, through a 512 MiB cache, against the
 * kernel's pread of the same file and against the limit the memory allows:
 * a bare 4 KiB memcpy of the same random pattern out of a hugepage-backed
 * anonymous buffer of the same size.  One thread, then two threads sharing
 * one handle (and one kernel descriptor).  Then the zero-copy pair
 * (pc_read_begin + pc_read_end of the same 4 KiB, one thread) against the
 * kernel's pread.  Every thread uses its own random sequence; ops/s are
 * summed over the threads.
 */
static struct row *hit_row(const char *what, uint64_t fsize, const char *target, double min_ratio)
{
	/* 8 rows for each of 2 sizes, and room to spare: a name is reused
	 * only after 32 rows */
	static char names[32][80];
	static int next;
	char *name = names[next++ % 32];

	/* bench_hits runs for two file sizes: the size is in the name */
	snprintf(name, sizeof(names[0]), "h. 4 KiB %s, %s file", what, bu_human(fsize));
	struct row *r = add_row(name, "ops/s", target);

	r->min_ratio = min_ratio;
	return r;
}

/* Rounds of every kind of run, interleaved, so that a change of the
 * machine's speed (other guests, frequency) hits all of them alike.  The
 * ratios are the medians of each round's own ratios: the two runs a ratio
 * compares follow each other, so a spell of a slow machine (it comes and
 * goes within seconds here) slows both or neither, where a quotient of two
 * medians taken over different rounds moved by half either way between
 * runs of pcbench. */
#define HIT_ROUNDS 7

/* The median of the ratios num[i] / den[i] (the arrays are kept). */
static double median_ratio(const double *num, const double *den, int n)
{
	double q[n];

	for (int i = 0; i < n; i++)
		q[i] = num[i] / den[i];
	return bu_median(q, n);
}

static void bench_hits(const char *path, uint64_t fsize)
{
	struct row *rk = hit_row("hit, 1 thread (vs kernel)", fsize, ">= 2.5x", 2.5);
	struct row *rm = hit_row("hit, 1 thread (vs memcpy)", fsize, ">= 0.75x", 0.75);
	struct row *r2 = hit_row("hit, 2 threads (vs 1 thread)", fsize, ">= 1.8x", 1.8);
	struct row *rs = hit_row("span begin+end (vs kernel)", fsize, ">= 10x", 10);
	/* no target of its own: the kernel's 2 threads beside pagecache's */
	struct row *rk2 = hit_row("hit, 2 threads (vs kernel 2 threads)", fsize, NULL, 0);
	/* No target either: how far the machine itself scales the bare copy
	 * from one thread to two (memory bandwidth, what the host lets two
	 * vCPUs do), beside the 2-thread row's ratio.  Not a ceiling of it:
	 * a hit does more than copy, and that part scales further (2.2-2.6x
	 * where the bare copy scaled 1.7x). */
	struct row *rm2 = hit_row("memcpy, 2 threads (vs memcpy 1 thread)", fsize, NULL, 0);
	/* No targets: what the memory allows against the kernel (the most
	 * the 1-thread hit could reach), and what finding the source through
	 * memory costs the bare copy by itself (HIT_LOOKUP). */
	struct row *rmk = hit_row("memcpy, 1 thread (vs kernel)", fsize, NULL, 0);
	struct row *rl = hit_row("memcpy behind a lookup (vs memcpy)", fsize, NULL, 0);
	struct hit_arg mc = { .npages = fsize / 4096, .kind = HIT_MEMCPY };
	struct hit_arg kp = mc, pp = mc, sp = mc, lp = mc;

	rm->base = "memcpy";
	r2->base = "pagecache-buffered-1-thread";
	r2->pc_path = "pagecache-buffered-2-threads";
	rs->pc_path = "pagecache-span";
	rk2->base = "kernel-buffered-2-threads";
	rk2->pc_path = "pagecache-buffered-2-threads";
	rm2->base = "memcpy";
	rm2->pc_path = "memcpy-2-threads";
	rmk->pc_path = "memcpy";
	rl->base = "memcpy";
	rl->pc_path = "memcpy-behind-lookup";
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	double m1[HIT_ROUNDS], m2[HIT_ROUNDS], k1[HIT_ROUNDS], k2[HIT_ROUNDS], p1[HIT_ROUNDS], p2[HIT_ROUNDS], s1[HIT_ROUNDS],
		l1[HIT_ROUNDS];
	/* a cache of twice the file at least: every read a hit */
	uint64_t cmem = 2 * fsize > 512 * BU_MiB ? 2 * fsize : 512 * BU_MiB;
	int64_t kr = 0;
	struct pc_stats st0, st1, d;
	struct pc_config cfg;
	struct pc_cache *c;
	double secs = bo.seconds;

	/* The limit line: the same random pattern out of plain memory. */
	char *mem = mmap(NULL, fsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bu_die("mmap %s:", bu_human(fsize));
	madvise(mem, fsize, MADV_HUGEPAGE);
	memset(mem, 0x5a, fsize);
	mc.mem = mem;
	lp.kind = HIT_LOOKUP;
	lp.lk = lk_build(mem, fsize);
	if (!lp.lk)
		bu_die("pcbench: a %s file is over what the lookup line covers", bu_human(fsize));

	kp.kind = HIT_KERNEL;
	kp.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (kp.fd < 0)
		bu_die("open %s:", path);
	kernel_read_all(kp.fd, buf, BU_MiB);

	pc_config_init(&cfg);
	cfg.memory_limit = (size_t)cmem;
	/* Without the background fault-in of the other 384 MiB, which would
	 * otherwise run on one of the two cores during the first rounds: the
	 * warming read faults in all the memory the hits touch. */
	cfg.flags |= PC_CFG_LAZY_MEMORY;
	c = pc_cache_new(&cfg);
	if (!c) {
		PC_FAIL(rk, "pc_cache_new");
		goto out;
	}
	pp.kind = HIT_PAGECACHE;
	pp.f = pc_open_warm(rk, c, path, buf);
	if (!pp.f)
		goto out;
	sp = pp;
	sp.kind = HIT_SPAN;

	/* Each timed run lasts --seconds / HIT_ROUNDS. */
	bo.seconds = secs / HIT_ROUNDS;
	pc_cache_stats(c, &st0);
	/* Each round runs kernel 2 threads, memcpy 2, memcpy behind the
	 * lookup, memcpy 1, pagecache 1, kernel 1, pagecache 2, span.  Every
	 * pair a ratio compares follows each other (pagecache 1 vs memcpy 1
	 * and vs kernel 1, lookup vs memcpy 1) or has one run between them
	 * (pagecache 2 vs 1, memcpy 2 vs 1, span vs kernel 1), pagecache 2
	 * vs kernel 2 (no target) five: all in the same round. */
	for (int i = 0; i < HIT_ROUNDS; i++) {
		k2[i] = kernel_hit_run(&kp, 2, &kr);
		m2[i] = hit_run(&mc, 2);
		l1[i] = hit_run(&lp, 1);
		m1[i] = hit_run(&mc, 1);
		p1[i] = hit_run(&pp, 1);
		k1[i] = kernel_hit_run(&kp, 1, &kr);
		p2[i] = hit_run(&pp, 2);
		s1[i] = hit_run(&sp, 1);
		if (isnan(p1[i]) || isnan(p2[i]) || isnan(s1[i])) {
			PC_FAIL(rk, "pc_pread / pc_read_begin");
			goto out;
		}
	}
	bo.seconds = secs;
	pc_cache_stats(c, &st1);
	stats_delta(&d, &st0, &st1);
	note_io(rk, "timed phases", &d);
	/* How the file is cached (a file of small folios costs a hit more
	 * descriptor and index lines than one of large folios). */
	size_t nl = strlen(rk->note);
	snprintf(rk->note + nl, sizeof(rk->note) - nl, "; %" PRIu64 " folios cached", st1.folios);
	/* Ratios first: bu_median() sorts its array, which breaks the pairs. */
	rk->ratio = median_ratio(p1, k1, HIT_ROUNDS);
	rm->ratio = median_ratio(p1, m1, HIT_ROUNDS);
	r2->ratio = median_ratio(p2, p1, HIT_ROUNDS);
	rs->ratio = median_ratio(s1, k1, HIT_ROUNDS);
	rk2->ratio = median_ratio(p2, k2, HIT_ROUNDS);
	rm2->ratio = median_ratio(m2, m1, HIT_ROUNDS);
	rmk->ratio = median_ratio(m1, k1, HIT_ROUNDS);
	rl->ratio = median_ratio(l1, m1, HIT_ROUNDS);
	rmk->kernel = bu_median(k1, HIT_ROUNDS);
	rmk->pc = bu_median(m1, HIT_ROUNDS);
	rl->kernel = bu_median(m1, HIT_ROUNDS);
	rl->pc = bu_median(l1, HIT_ROUNDS);
	rm2->kernel = bu_median(m1, HIT_ROUNDS);
	rm2->pc = bu_median(m2, HIT_ROUNDS);
	rk->kernel = bu_median(k1, HIT_ROUNDS);
	rk2->kernel = bu_median(k2, HIT_ROUNDS);
	rk->pc = bu_median(p1, HIT_ROUNDS);
	rm->kernel = bu_median(m1, HIT_ROUNDS);
	rm->pc = rk->pc;
	r2->kernel = rk->pc;
	r2->pc = bu_median(p2, HIT_ROUNDS);
	rs->kernel = rk->kernel;
	rs->pc = bu_median(s1, HIT_ROUNDS);
	rk2->pc = bu_median(p2, HIT_ROUNDS);
	check_all_hits(rk, &d, kr);
	if (isnan(rk->pc))
		rm->pc = r2->kernel = r2->pc = rs->pc = rk2->pc = rk->ratio = rm->ratio = r2->ratio = rs->ratio =
			rk2->ratio = NAN;
	size_t l = strlen(rk->note);
	snprintf(rk->note + l, sizeof(rk->note) - l,
		 "%sfile %s, cache %s (PC_CFG_LAZY_MEMORY; at least twice the file, all hits); medians of %d "
		 "interleaved rounds (kernel 2 threads, memcpy 2 threads, memcpy behind a lookup, memcpy, pagecache, "
		 "kernel, pagecache 2 threads, span) of "
		 "%.2f s each; ratios: medians of the rounds' own ratios",
		 l ? "; " : "", bu_human(fsize), bu_human(cmem), HIT_ROUNDS, secs / HIT_ROUNDS);
	snprintf(rm->note, sizeof(rm->note), "\"kernel\" column: the bare memcpy of the same pattern (a 4 KiB "
		 "memcpy the compiler may inline: gcc makes it rep movsq), as in the other memcpy rows; pagecache "
		 "column: the same measurement as the vs-kernel row's");
	snprintf(r2->note, sizeof(r2->note), "\"kernel\" column: pagecache with 1 thread, the same measurement "
		 "as the vs-kernel row's pagecache column");
	snprintf(rs->note, sizeof(rs->note), "\"kernel\" column: the same measurement as the vs-kernel row's");
	snprintf(rm2->note, sizeof(rm2->note), "no target; the machine's own scaling of the bare copy, for "
		 "comparison with the 2-thread row");
	snprintf(rk2->note, sizeof(rk2->note), "no target; pagecache column: the same measurement as the "
		 "2-thread row's");
	snprintf(rmk->note, sizeof(rmk->note), "no target; the bare memcpy against the kernel's pread, both "
		 "the measurements of the rows above: the most a 1-thread hit could reach on this machine");
	snprintf(rl->note, sizeof(rl->note), "no target; the bare memcpy with its source found through %d "
		 "dependent loads (handle, file, root%s: what a hit on a file of 256 KiB folios loads), no check, "
		 "no count, no call: what finding the data costs the copy by itself", lp.lk->file->two_levels ? 4 : 3,
		 lp.lk->file->two_levels ? ", interior node" : "");
out:
	bo.seconds = secs;
	finish_cache(rk, c, pp.f);
	close(kp.fd);
	lk_free((struct lk_handle *)lp.lk);
	munmap(mem, fsize);
	free(buf);
}

/* ---------------------------------------------------------------- e */

/* Heap bytes in use: small chunks in every arena plus mmapped chunks. */
static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/*
 * Metadata per cached 4 KiB folio, from what the process allocated:
 *
 *   H0 = heap in use before pc_cache_new()
 *   H1 = after pc_cache_new()        -> cache metadata: the folio descriptor
 *        table (one descriptor per arena page) and the cache's fixed tables;
 *        plus anonymous memory pc_cache_new mapped outside malloc that is
 *        neither the arena nor a thread stack (the descriptor table is such
 *        a mapping), from /proc/self/maps
 *   H2 = after pc_open() of the file  (per-file state, reported, not counted
 *        per folio: it does not grow with the number of folios)
 *   H3 = after reading every 4 KiB page of the file once, in a random
 *        order, with read-ahead disabled, so that every folio is one page
 *        -> index growth: radix-tree nodes (and any per-folio block state)
 *
 *   per folio = (H1 - H0 + mapped) / (memory_limit / 4096)  +  (H3 - H2) / N
 *
 * where N is the number of folios cached (checked against pc_cache_stats:
 * folios == N and cached_bytes == N * 4096).  "Heap" is glibc mallinfo2()
 * uordblks + hblkhd: every malloc'ed byte in all arenas (with malloc's own
 * chunk headers) plus mmapped malloc chunks.  The folio memory itself (an
 * anonymous mmap of memory_limit bytes) is not metadata and is not counted;
 * nor are thread stacks or io_uring rings (per cache, not per folio).  If
 * the library mapped its descriptor table with mmap() instead of malloc()
 * it would be missed here, so the growth of anonymous mappings at
 * pc_cache_new beyond memory_limit, thread stacks and malloc is printed as
 * a cross-check.
 */
struct mapsum {
	uint64_t anon_rw;    /* private anonymous read-write mappings */
	uint64_t guarded;    /* of which directly above a PROT_NONE guard page
			      * (thread stacks) */
};

static void anon_mappings(struct mapsum *m)
{
	char line[512];
	unsigned long prev_end = 0;
	bool prev_guard = false;
	FILE *fp = fopen("/proc/self/maps", "re");

	memset(m, 0, sizeof(*m));
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		unsigned long lo, hi, inode;
		char perms[8], path[256] = "";
		int n = sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &lo, &hi,
			       perms, &inode, path);

		if (n < 4)
			continue;
		if (inode == 0 && (path[0] == '\0' || strcmp(path, "[heap]") == 0) &&
		    strcmp(perms, "rw-p") == 0) {
			m->anon_rw += hi - lo;
			if (prev_guard && prev_end == lo)
				m->guarded += hi - lo;
		}
		prev_guard = strcmp(perms, "---p") == 0 && hi - lo <= 64 * 1024;
		prev_end = hi;
	}
	fclose(fp);
}

static void bench_metadata(const char *path, uint64_t fsize)
{
	struct row *r = add_row("e. metadata per cached 4 KiB folio", "B/folio", "<= 2 %");
	uint64_t npages = fsize / 4096, arena_pages = bo.mem / 4096;
	uint64_t h0, h1, h2, h3, *perm, i;
	char *buf = bu_alloc_aligned(4096, 4096);
	struct mapsum m0, m1;
	struct pc_stats s;
	struct pc_cache *c;
	struct pc_file *f = NULL;
	struct bu_rng rng;
	double per_folio;
	size_t l;

	r->max_pct = 2.0;
	r->pct_row = true;

	perm = malloc(npages * sizeof(*perm));
	if (!perm)
		bu_die("out of memory");
	for (i = 0; i < npages; i++)
		perm[i] = i;
	bu_rng_seed(&rng, 1234);
	for (i = npages - 1; i > 0; i--) {
		uint64_t j = bu_rng_below(&rng, i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}

	malloc_trim(0);
	anon_mappings(&m0);
	h0 = heap_bytes();
	c = new_cache(r, 0);
	if (!c)
		goto out;
	h1 = heap_bytes();
	anon_mappings(&m1);
	f = pc_open(c, path, O_RDONLY, 0);
	if (!f) {
		PC_FAIL(r, "pc_open(O_RDONLY)");
		goto done;
	}
	h2 = heap_bytes();
	for (i = 0; i < npages; i++) {
		ssize_t n = pc_pread(f, buf, 4096, (off_t)(perm[i] * 4096), 0);

		prog_advance(1);
		if (n != 4096) {
			if (n >= 0)
				errno = EIO;
			PC_FAIL(r, "pc_pread (4 KiB, distinct pages)");
			goto done;
		}
	}
	h3 = heap_bytes();
	pc_cache_stats(c, &s);

	/* What pc_cache_new mapped outside malloc (the descriptor table is
	 * an anonymous mapping of its own), besides the arena and the
	 * threads' stacks, counts as cache metadata too. */
	int64_t mapped = (int64_t)(m1.anon_rw - m0.anon_rw) - (int64_t)(m1.guarded - m0.guarded) -
			 (int64_t)bo.mem - (int64_t)(h1 - h0);
	if (mapped < 0)
		mapped = 0;
	uint64_t cache_meta = (h1 - h0) + (uint64_t)mapped;
	per_folio = (double)cache_meta / (double)arena_pages +
		    (double)(int64_t)(h3 - h2) / (double)npages;
	r->pc = per_folio / 4096.0 * 100.0; /* the percentage is judged */
	snprintf(r->note, sizeof(r->note),
		 "%.1f B per 4 KiB folio = cache metadata %" PRId64 " B / %" PRIu64
		 " arena pages (%.1f B) + index growth %" PRId64 " B / %" PRIu64
		 " folios (%.1f B); per-file state at pc_open %" PRId64
		 " B (not per folio); stats: folios %" PRIu64 ", cached %s, "
		 "device reads %" PRIu64,
		 per_folio, (int64_t)cache_meta, arena_pages,
		 (double)cache_meta / (double)arena_pages,
		 (int64_t)(h3 - h2), npages, (double)(int64_t)(h3 - h2) / (double)npages,
		 (int64_t)(h2 - h1), s.folios, bu_human(s.cached_bytes), s.dev_read_ios);
	if (s.folios != npages || s.cached_bytes != npages * 4096) {
		l = strlen(r->note);
		snprintf(r->note + l, sizeof(r->note) - l,
			 "; WARNING: expected %" PRIu64 " folios of 4 KiB", npages);
	}
	{
		/* cross-check: anonymous memory mapped by pc_cache_new, split
		 * into the arena, thread stacks, malloc and the rest ("other",
		 * counted above as metadata: the descriptor table; malloc heaps
		 * grow in steps, so small noise is normal) */
		int64_t other = (int64_t)(m1.anon_rw - m0.anon_rw) -
				(int64_t)(m1.guarded - m0.guarded) - (int64_t)bo.mem -
				(int64_t)(h1 - h0);

		l = strlen(r->note);
		snprintf(r->note + l, sizeof(r->note) - l,
			 "; cross-check: anon rw mappings grew %s at pc_cache_new = "
			 "arena %s + thread stacks %s + malloc %s + other %" PRId64 " B",
			 bu_human(m1.anon_rw - m0.anon_rw), bu_human(bo.mem),
			 bu_human(m1.guarded - m0.guarded), bu_human(h1 - h0), other);
	}
done:
	finish_cache(r, c, f);
out:
	free(perm);
	free(buf);
}

/* ------------------------------------------------------------ output */

/* ---------------------------------------------------------------- f */

/*
 * f. Many small files (issue 14): FILES_N files of FILES_BYTES created,
 * written and closed one after another, then each reopened, read whole
 * and closed, the kernel first, then pagecache, each alone (see
 * files_side_by_side).  Files per second; target >= 0.8x for both.  The kernel's
 * files are closed without fsync (its close does not wait), and so are
 * pagecache's (pc_close leaves write-back to the flusher); pagecache's are
 * checked on the device after pc_cache_destroy (not timed).
 */
/* 5000 files; 500 in a --quick smoke run */
#define FILES_N (bo.quick ? 500u : 5000u)
#define FILES_BYTES 5000u

/*
 * Each side's files go in a directory of their own, made empty for it: in
 * one shared directory the side that runs second would create its files
 * in a directory already holding the first side's 5000 (a slower lookup
 * and insert on XFS), and compare worse for it.
 */
/* Where the files go: --dir, or the fresh file system of the run. */
static const char *files_top;

static void files_path(char *out, size_t len, const char *sub, unsigned i)
{
	char name[64];

	snprintf(name, sizeof(name), "%s/%u", sub, i);
	bu_join(out, len, files_top, name);
}

static void files_fill(char *buf, unsigned i)
{
	for (unsigned k = 0; k < FILES_BYTES; k++)
		buf[k] = (char)(i * 7 + k * 13);
}

/* Where one side's time per file went, summed over a run: the open, the
 * write or read, and the close (issue 14 asks what an open costs, not
 * only what the whole cycle does).  Timing each call adds two clock reads
 * per call (tens of nanoseconds) to both sides alike. */
struct files_calls {
	uint64_t open_ns, io_ns, close_ns;
};

/* Nanoseconds since *t, and *t moved to now. */
static uint64_t files_lap(uint64_t *t)
{
	uint64_t now = bu_now_ns(), d = now - *t;
	*t = now;
	return d;
}

static struct files_calls files_calls[2][2]; /* [create, reread][kernel, pagecache] */

static double files_kernel_create(char *buf, unsigned lo, unsigned hi)
{
	char path[PATH_MAX];
	struct files_calls *fc = &files_calls[0][0];
	uint64_t t0 = bu_now_ns();

	for (unsigned i = lo; i < hi; i++) {
		files_path(path, sizeof(path), "pcbench-files-kernel", i);
		files_fill(buf, i);
		uint64_t t = bu_now_ns();
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		fc->open_ns += files_lap(&t);
		if (fd < 0 || write(fd, buf, FILES_BYTES) != FILES_BYTES)
			bu_die("kernel files %s:", path);
		fc->io_ns += files_lap(&t);
		if (close(fd) != 0)
			bu_die("kernel files %s:", path);
		fc->close_ns += files_lap(&t);
		prog_advance(1);
	}
	return bu_secs(bu_now_ns() - t0);
}

static double files_kernel_reread(char *buf, unsigned lo, unsigned hi)
{
	char path[PATH_MAX];
	struct files_calls *fc = &files_calls[1][0];
	uint64_t t0 = bu_now_ns();

	for (unsigned i = lo; i < hi; i++) {
		files_path(path, sizeof(path), "pcbench-files-kernel", i);
		uint64_t t = bu_now_ns();
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		fc->open_ns += files_lap(&t);
		if (fd < 0 || read(fd, buf, FILES_BYTES) != FILES_BYTES)
			bu_die("kernel files %s:", path);
		fc->io_ns += files_lap(&t);
		if (close(fd) != 0)
			bu_die("kernel files %s:", path);
		fc->close_ns += files_lap(&t);
		prog_advance(1);
	}
	return bu_secs(bu_now_ns() - t0);
}

static double files_pc_create(struct row *r, struct pc_cache *c, char *buf, unsigned lo, unsigned hi)
{
	char path[PATH_MAX];
	struct files_calls *fc = &files_calls[0][1];
	uint64_t t0 = bu_now_ns();

	for (unsigned i = lo; i < hi; i++) {
		files_path(path, sizeof(path), "pcbench-files-pagecache", i);
		files_fill(buf, i);
		uint64_t t = bu_now_ns();
		struct pc_file *f = pc_open(c, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		fc->open_ns += files_lap(&t);
		if (!f) {
			PC_FAIL(r, "pc_open(O_CREAT)");
			return NAN;
		}
		if (pc_pwrite(f, buf, FILES_BYTES, 0, 0) != FILES_BYTES) {
			PC_FAIL(r, "pc_pwrite");
			pc_close(f);
			return NAN;
		}
		fc->io_ns += files_lap(&t);
		if (pc_close(f) != 0) {
			PC_FAIL(r, "pc_close");
			return NAN;
		}
		fc->close_ns += files_lap(&t);
		prog_advance(1);
	}
	return bu_secs(bu_now_ns() - t0);
}

static double files_pc_reread(struct row *r, struct pc_cache *c, char *buf, unsigned lo, unsigned hi)
{
	char path[PATH_MAX];
	struct files_calls *fc = &files_calls[1][1];
	uint64_t t0 = bu_now_ns();

	for (unsigned i = lo; i < hi; i++) {
		files_path(path, sizeof(path), "pcbench-files-pagecache", i);
		uint64_t t = bu_now_ns();
		struct pc_file *f = pc_open(c, path, O_RDONLY, 0);
		fc->open_ns += files_lap(&t);
		if (!f) {
			PC_FAIL(r, "pc_open(O_RDONLY)");
			return NAN;
		}
		ssize_t n = pc_pread(f, buf, FILES_BYTES, 0, 0);
		fc->io_ns += files_lap(&t);
		if (pc_close(f) != 0 || n != FILES_BYTES) {
			PC_FAIL(r, "pc_pread/pc_close");
			return NAN;
		}
		fc->close_ns += files_lap(&t);
		prog_advance(1);
	}
	return bu_secs(bu_now_ns() - t0);
}

/* The per-call figures of one phase, appended to its row's note. */
static void note_files_calls(struct row *r, unsigned phase, const char *io)
{
	size_t l = strlen(r->note);
	const struct files_calls *k = &files_calls[phase][0], *p = &files_calls[phase][1];
	double n = FILES_N * 1e3; /* ns summed over FILES_N files -> us per file */

	snprintf(r->note + l, sizeof(r->note) - l,
		 "%sper file: kernel open %.2f us, %s %.2f us, close %.2f us; pagecache open %.2f us, %s %.2f us, "
		 "close %.2f us",
		 l ? "; " : "", k->open_ns / n, io, k->io_ns / n, k->close_ns / n, p->open_ns / n, io, p->io_ns / n,
		 p->close_ns / n);
}

/* cachestat(2) (Linux 6.5): how much of a file the kernel's page cache
 * holds dirty or under write-back.  Declared here: glibc 2.36 has no
 * wrapper. */
struct files_cachestat_range {
	uint64_t off, len;
};
struct files_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

/* Pages of fd the kernel has not written yet; -1 if cachestat(2) is not
 * there. */
static long files_kernel_unwritten(int fd)
{
	struct files_cachestat_range r = { 0, 0 }; /* 0: to the end */
	struct files_cachestat cs;
	if (syscall(__NR_cachestat, fd, &r, &cs, 0) != 0)
		return -1;
	return (long)(cs.nr_dirty + cs.nr_writeback);
}

/*
 * Every pagecache file on the device once pc_cache_destroy returned: the
 * last partial block of a closed file goes through the kernel's page
 * cache (pagecache.h, pc_close), and destroy must have synced it, so the
 * kernel holds nothing of it dirty (cachestat(2); where that is missing,
 * the file system is synced here instead and the note says so).  Each
 * file's kernel pages are then dropped and it is read from the device.
 * Returns the files that differ or were not on the device.
 */
static unsigned files_verify(char *buf, char *want, bool *synced_here)
{
	char path[PATH_MAX];
	unsigned bad = 0;

	*synced_here = false;
	for (unsigned i = 0; i < FILES_N; i++) {
		files_path(path, sizeof(path), "pcbench-files-pagecache", i);
		files_fill(want, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		long unwritten = fd < 0 ? 0 : files_kernel_unwritten(fd);
		if (unwritten < 0 && !*synced_here) {
			if (syncfs(fd) != 0)
				bu_die("syncfs %s:", path);
			*synced_here = true;
		}
		if (fd >= 0)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, FILES_BYTES + 1);
		if (fd >= 0)
			close(fd);
		bad += unwritten > 0 || n != FILES_BYTES || memcmp(buf, want, FILES_BYTES) != 0;
	}
	return bad;
}

static void files_remove(void)
{
	static const char *const sides[] = { "pcbench-files-kernel", "pcbench-files-pagecache" };
	char path[PATH_MAX];

	for (unsigned s = 0; s < 2; s++) {
		for (unsigned i = 0; i < FILES_N; i++) {
			files_path(path, sizeof(path), sides[s], i);
			unlink(path);
		}
		bu_join(path, sizeof(path), files_top, sides[s]);
		rmdir(path);
	}
}

static void files_mkdirs(void)
{
	char path[PATH_MAX];

	bu_join(path, sizeof(path), files_top, "pcbench-files-kernel");
	bu_mkdir(path);
	bu_join(path, sizeof(path), files_top, "pcbench-files-pagecache");
	bu_mkdir(path);
}

/*
 * Each side does all FILES_N files in one timed run, the kernel first,
 * and nothing of the other side runs meanwhile: before each kernel run,
 * pagecache's cache is left idle (nothing dirty, nothing under write-back,
 * its closed files settled); the kernel's 25 MB of dirty data stays far
 * below its background threshold and younger than its 30 s expiry, so
 * its flusher does not run in pagecache's runs either.  (Alternating
 * batches let pagecache's flusher write its closed files during the
 * kernel's batches, which favoured pagecache.)  Pagecache runs second, on
 * a file system that has just taken the kernel's files: if anything, that
 * favours the kernel.
 */
static void files_wait_idle(struct pc_cache *c)
{
	struct pc_stats s;

	for (int i = 0; i < 3000; i++) {
		pc_cache_stats(c, &s);
		if (!s.dirty_bytes && !s.writeback_bytes)
			break;
		usleep(10000);
	}
	usleep(1200 * 1000); /* a flusher tick or two: settled, swept */
}

typedef double (*files_kernel_fn)(char *buf, unsigned lo, unsigned hi);
typedef double (*files_pc_fn)(struct row *r, struct pc_cache *c, char *buf, unsigned lo, unsigned hi);

/* Write back everything of the files' file system (untimed). */
static void files_sync_dir(void)
{
	int fd = open(files_top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || syncfs(fd) != 0)
		bu_die("syncfs %s:", files_top);
	close(fd);
}

/* Each phase of f is a step of the progress line of its own: the settling
 * waits (seconds, with nothing counted) as timed steps. */
static void files_side_by_side(struct row *r, struct pc_cache *c, char *buf, files_kernel_fn kernel,
			       files_pc_fn pc)
{
	prog_step_timed(r->name, "settling", 1500000000ull, NULL, NULL);
	files_wait_idle(c);
	prog_step_done();
	prog_step_count(r->name, "kernel, then pagecache", 2 * FILES_N, "files");
	r->kernel = FILES_N / kernel(buf, 0, FILES_N);
	/* The kernel's run leaves its files dirty and its journal full: its
	 * write-back would otherwise run during pagecache's run and be timed
	 * there (pagecache's own has ended before the kernel's run, above). */
	files_sync_dir();
	double tp = pc(r, c, buf, 0, FILES_N);
	r->pc = isnan(tp) ? NAN : FILES_N / tp;
	prog_step_done();
}

/* f1 and f2 on the file system of files_top, `fs` naming it in the rows. */
static void bench_small_files(const char *fs)
{
	struct row *rc = add_row(NULL, "files/s", ">= 0.8x"), *rr = add_row(NULL, "files/s", ">= 0.8x");
	char *buf = malloc(2 * FILES_BYTES + 2);
	struct pc_cache *c;

	static char names[4][80];
	static int next;
	char *n1 = names[next++ % 4], *n2 = names[next++ % 4];

	snprintf(n1, sizeof(names[0]), "f1. create+write+close %u x %u B%s%s", FILES_N, FILES_BYTES, *fs ? ", " : "",
		 fs);
	snprintf(n2, sizeof(names[0]), "f2. reopen+read+close %u x %u B%s%s", FILES_N, FILES_BYTES, *fs ? ", " : "",
		 fs);
	rc->name = n1;
	rr->name = n2;
	rc->min_ratio = rr->min_ratio = 0.8;
	files_remove();
	files_mkdirs();
	memset(files_calls, 0, sizeof(files_calls));
	c = new_cache(rc, (size_t)-1);
	if (!c)
		goto out;
	struct pc_stats s0, s1, d;
	files_side_by_side(rc, c, buf, files_kernel_create, files_pc_create);
	pc_cache_stats(c, &s0);
	if (!isnan(rc->pc))
		files_side_by_side(rr, c, buf, files_kernel_reread, files_pc_reread);
	else
		rr->pc = NAN;
	pc_cache_stats(c, &s1);
	stats_delta(&d, &s0, &s1);
	note_io(rr, "from the end of f1 to the end of f2 (f1's files written back while settling)", &d);
	prog_step_timed("f. small files", "destroy, verify", 2000000000ull, NULL,
			NULL);
	if (pc_cache_destroy(c) != 0)
		PC_FAIL(rc, "pc_cache_destroy");
	bool synced_here;
	unsigned bad = files_verify(buf, buf + FILES_BYTES + 1, &synced_here);
	prog_step_done();
	snprintf(rc->note, sizeof(rc->note), "after pc_cache_destroy%s, %u of %u files differ on the device or were left unwritten",
		 synced_here ? " and a syncfs (no cachestat(2) here)" : "", bad, FILES_N);
	note_files_calls(rc, 0, "write");
	note_files_calls(rr, 1, "read");
	if (bad)
		rc->pc = NAN;
out:
	files_remove();
	free(buf);
}

/* ---------------------------------------------------------------- r */

/*
 * r. read-ahead that follows streams (issue 13), cold start each time, on
 * a file of 4 x --mem bytes:
 *   scan+hot: one thread scans the file in 128 KiB reads and after each
 *     makes 32 random 4 KiB reads of its first 64 MiB, all through one
 *     descriptor (kernel) or one handle (pagecache), and through two
 *     handles (scan, hot) as the base pagecache must match;
 *   quarters: 4 threads each scan their own quarter in 1 MiB reads
 *     through one shared descriptor / handle;
 *   uncached: a PC_DONTCACHE sequential 1 MiB read of the file against the
 *     kernel's buffered cold read; nothing may stay cached;
 *   cold miss: single random 4 KiB reads of the cold file, one at a time.
 */
#define STREAM_CHUNK (128 * 1024)
#define QUARTER_CHUNK BU_MiB
#define STREAM_HOT_READS 32
#define STREAM_HOT_BYTES (64 * BU_MiB)
#define STREAM_MISSES 2000
#define STREAM_ROUNDS 3
/* Cold runs in all: scan + hot (3 kinds), then 2 (kernel, pagecache) of
 * quarters, uncached and cold misses, each STREAM_ROUNDS times. */
#define STREAM_RUNS (STREAM_ROUNDS * (3 + 3 * 2))

/* Where the reads of a stream workload go: a kernel descriptor, or a scan
 * handle and a hot-read handle (the same one, or two). */
struct stream_io {
	int fd;
	struct pc_file *scan, *hot;
	int flags;
};

static ssize_t stream_read(const struct stream_io *s, bool hot, char *buf, size_t len, uint64_t off)
{
	if (s->fd >= 0)
		return pread(s->fd, buf, len, (off_t)off);
	return pc_pread(hot ? s->hot : s->scan, buf, len, (off_t)off, s->flags);
}

/* The scan with hot reads; seconds, NAN on a failed read. */
static double stream_scan_hot(const struct stream_io *s, uint64_t size, char *buf)
{
	struct bu_rng rng;
	uint64_t hot = size < STREAM_HOT_BYTES ? size : STREAM_HOT_BYTES, t0 = bu_now_ns();

	bu_rng_seed(&rng, 13);
	for (uint64_t off = 0; off < size; off += STREAM_CHUNK) {
		if (stream_read(s, false, buf, STREAM_CHUNK, off) <= 0)
			return NAN;
		for (int i = 0; i < STREAM_HOT_READS; i++)
			if (stream_read(s, true, buf, 4096, bu_rng_next(&rng) % (hot / 4096) * 4096) != 4096)
				return NAN;
	}
	return bu_secs(bu_now_ns() - t0);
}

/* Open the kernel side cold, or a fresh cache with one or two handles. */
static struct pc_cache *stream_open(struct row *r, const char *path, struct stream_io *s, bool kernel, int handles)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	bu_drop_file_cache(path, true);
	if (kernel) {
		s->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0)
			bu_die("open %s:", path);
		return NULL;
	}
	struct pc_cache *c = new_cache(r, (size_t)-1);
	if (!c)
		return NULL;
	s->scan = pc_open(c, path, O_RDONLY, 0);
	s->hot = handles == 2 ? pc_open(c, path, O_RDONLY, 0) : s->scan;
	if (!s->scan || !s->hot)
		PC_FAIL(r, "pc_open(O_RDONLY)");
	return c;
}

static void stream_close(struct row *r, struct pc_cache *c, struct stream_io *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->hot && s->hot != s->scan && pc_close(s->hot) < 0)
		PC_FAIL(r, "pc_close");
	finish_cache(r, c, s->scan);
}

/* One cold run of the scan with hot reads; MiB/s of the file scanned. */
static double stream_scan_hot_run(struct row *r, const char *path, uint64_t size, char *buf, bool kernel,
				  int handles)
{
	struct stream_io s;
	struct pc_cache *c = stream_open(r, path, &s, kernel, handles);
	double secs = NAN;

	if (kernel || (c && s.scan && s.hot))
		secs = stream_scan_hot(&s, size, buf);
	if (isnan(secs) && !kernel)
		PC_FAIL(r, "pc_pread (scan + hot reads)");
	if (!kernel && c && handles == 1 && !strstr(r->note, "one handle:")) {
		struct pc_stats st;

		pc_cache_stats(c, &st);
		size_t l = strlen(r->note);
		snprintf(r->note + l, sizeof(r->note) - l,
			 "%sone handle: windows %" PRIu64 " by a miss, %" PRIu64 " by a mark, %" PRIu64
			 " random misses", l ? "; " : "", st.ra_sync_windows, st.ra_async_windows, st.ra_random_reads);
	}
	if (!kernel)
		stream_close(r, c, &s);
	else
		close(s.fd);
	prog_advance(1);
	return (double)size / BU_MiB / secs;
}

static void bench_stream_scan_hot(const char *path, uint64_t size, char *buf)
{
	struct row *rk = add_row("r. scan + hot reads, one handle", "MiB/s", ">= 1.0x");
	struct row *rh = add_row("r. ... one handle vs two (in kernel column)", "MiB/s", ">= 0.87x");
	double k[STREAM_ROUNDS], one[STREAM_ROUNDS], two[STREAM_ROUNDS];

	rk->min_ratio = 1.0;
	rh->min_ratio = 1 / 1.15;
	rh->base = "pagecache-buffered-two-handles";
	/* The order rotates each round (see stream_rounds). */
	for (int i = 0; i < STREAM_ROUNDS; i++) {
		for (int j = 0; j < 3; j++) {
			int which = (i + j) % 3;

			if (which == 0)
				k[i] = stream_scan_hot_run(rk, path, size, buf, true, 1);
			else if (which == 1)
				one[i] = stream_scan_hot_run(rk, path, size, buf, false, 1);
			else
				two[i] = stream_scan_hot_run(rh, path, size, buf, false, 2);
		}
	}
	rk->kernel = bu_median(k, STREAM_ROUNDS);
	rk->pc = rh->pc = bu_median(one, STREAM_ROUNDS);
	rh->kernel = bu_median(two, STREAM_ROUNDS);
	size_t l = strlen(rh->note);
	snprintf(rh->note + l, sizeof(rh->note) - l, "%s'kernel' column: pagecache with scan and hot reads on two "
		 "handles; pagecache column: the same one-handle measurement as the row above; medians of %d cold rounds, file %s", l ? "; " : "", STREAM_ROUNDS, bu_human(size));
}

struct quarter_arg {
	struct stream_io s;
	uint64_t from, to;
	int failed;
};

static void *quarter_thread(void *p)
{
	struct quarter_arg *a = p;
	char *buf = bu_alloc_aligned(QUARTER_CHUNK, 4096);

	for (uint64_t off = a->from; off < a->to && !a->failed; off += QUARTER_CHUNK)
		a->failed = stream_read(&a->s, false, buf, QUARTER_CHUNK, off) != QUARTER_CHUNK;
	free(buf);
	return NULL;
}

/* 4 threads scanning a quarter each through s; MiB/s, NAN on a failure. */
static double stream_quarters(const struct stream_io *s, uint64_t size)
{
	struct quarter_arg a[4];
	pthread_t t[4];
	uint64_t q = size / 4 / QUARTER_CHUNK * QUARTER_CHUNK, t0 = bu_now_ns();
	bool failed = false;

	for (int i = 0; i < 4; i++) {
		a[i] = (struct quarter_arg){ .s = *s, .from = i * q, .to = (i + 1) * q };
		if (pthread_create(&t[i], NULL, quarter_thread, &a[i]))
			bu_die("pthread_create:");
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		failed |= a[i].failed;
	}
	return failed ? NAN : (double)(4 * q) / BU_MiB / bu_secs(bu_now_ns() - t0);
}

/* "rounds (pagecache / kernel): 1.02x 0.97x 1.10x" into b. */
static void round_ratios(char *b, size_t len, const double *k, const double *p)
{
	size_t l = (size_t)snprintf(b, len, "rounds (pagecache / kernel):");
	for (int i = 0; i < STREAM_ROUNDS && l < len; i++)
		l += (size_t)snprintf(b + l, len - l, " %.2fx", p[i] / k[i]);
}

/* One workload of r, kernel and pagecache interleaved over STREAM_ROUNDS
 * cold rounds (pagecache with `flags` on every read); medians into r, and
 * each round's ratio into `rounds` (round_ratios) unless it is NULL.
 * Returns the most that any pagecache round left cached. */
typedef double (*stream_fn)(const struct stream_io *s, uint64_t size, char *buf);
static uint64_t stream_rounds(struct row *r, const char *path, uint64_t size, char *buf, stream_fn fn, int flags,
			      const char *what, char *rounds, size_t rounds_len)
{
	double k[STREAM_ROUNDS], p[STREAM_ROUNDS];
	uint64_t cached = 0;
	struct stream_io s;

	/* Kernel first in even rounds, pagecache first in odd ones: a cache
	 * below both (the device's, the host's) favours neither. */
	for (int i = 0; i < 2 * STREAM_ROUNDS; i++) {
		int round = i / 2;

		if ((i % 2 == 0) == (round % 2 == 0)) {
			stream_open(r, path, &s, true, 1);
			k[round] = fn(&s, size, buf);
			close(s.fd);
			prog_advance(1);
			continue;
		}
		struct pc_cache *c = stream_open(r, path, &s, false, 1);
		s.flags = flags;
		p[round] = c && s.scan ? fn(&s, size, buf) : NAN;
		if (isnan(p[round]))
			PC_FAIL(r, what);
		if (c) {
			struct pc_stats st;

			pc_cache_stats(c, &st);
			cached = cached > st.cached_bytes ? cached : st.cached_bytes;
		}
		stream_close(r, c, &s);
		prog_advance(1);
	}
	r->kernel = bu_median(k, STREAM_ROUNDS);
	r->pc = bu_median(p, STREAM_ROUNDS);
	if (rounds)
		round_ratios(rounds, rounds_len, k, p);
	return cached;
}

static double stream_quarters_fn(const struct stream_io *s, uint64_t size, char *buf)
{
	(void)buf;
	return stream_quarters(s, size);
}

static void bench_stream_quarters(const char *path, uint64_t size, char *buf)
{
	struct row *r = add_row("r. 4 threads, a quarter each, one handle", "MiB/s", ">= 1.0x");

	char rounds[96];

	r->min_ratio = 1.0;
	stream_rounds(r, path, size, buf, stream_quarters_fn, 0, "pc_pread (quarters)", rounds, sizeof(rounds));
	snprintf(r->note, sizeof(r->note), "1 MiB reads, cold, medians of %d rounds, file %s; %s", STREAM_ROUNDS,
		 bu_human(size), rounds);
}

/* A whole sequential read in 1 MiB pieces; MiB/s, NAN on a failure. */
static double stream_seq_read(const struct stream_io *s, uint64_t size, char *buf)
{
	uint64_t got = 0, t0 = bu_now_ns();
	ssize_t n;

	while (got < size && (n = stream_read(s, false, buf, BU_MiB, got)) > 0)
		got += (uint64_t)n;
	return got == size ? (double)size / BU_MiB / bu_secs(bu_now_ns() - t0) : NAN;
}

static void bench_stream_uncached(const char *path, uint64_t size, char *buf)
{
	struct row *r = add_row("r. uncached seq read vs kernel buffered", "MiB/s", ">= 0.9x");

	r->min_ratio = 0.9;
	r->pc_path = "pagecache-dontcache";
	uint64_t cached = stream_rounds(r, path, size, buf, stream_seq_read, PC_DONTCACHE, "pc_pread (PC_DONTCACHE)",
					NULL, 0);
	r->has_cached = true;
	r->cached_after = (double)cached;
	if (cached)
		r->pc = NAN; /* the promise is that nothing stays */
	snprintf(r->note, sizeof(r->note), "cold, medians of %d rounds, file %s (%.2gx memory_limit); left cached "
		 "after the read: %s", STREAM_ROUNDS, bu_human(size), (double)size / (double)bo.mem, bu_human(cached));
}

/* STREAM_MISSES single random 4 KiB reads of a cold file; reads/s. */
static double stream_cold_misses(const struct stream_io *s, uint64_t size, char *buf)
{
	struct bu_rng rng;
	uint64_t t0 = bu_now_ns();

	bu_rng_seed(&rng, 1313);
	for (int i = 0; i < STREAM_MISSES; i++)
		if (stream_read(s, false, buf, 4096, bu_rng_next(&rng) % (size / 4096) * 4096) != 4096)
			return NAN;
	return STREAM_MISSES / bu_secs(bu_now_ns() - t0);
}

static void bench_stream_cold_misses(const char *path, uint64_t size, char *buf)
{
	struct row *r = add_row("r. cold random 4 KiB miss", "reads/s", ">= 1.0x");

	r->min_ratio = 1.0;
	stream_rounds(r, path, size, buf, stream_cold_misses, 0, "pc_pread (cold miss)", NULL, 0);
	snprintf(r->note, sizeof(r->note), "%d reads one at a time, medians of %d rounds: kernel %.1f us, "
		 "pagecache %.1f us per read", STREAM_MISSES, STREAM_ROUNDS, 1e6 / r->kernel, 1e6 / r->pc);
}

static void bench_streams(const char *path, uint64_t size)
{
	char *buf = bu_alloc_aligned(BU_MiB, 4096);

	bench_stream_scan_hot(path, size, buf);
	bench_stream_quarters(path, size, buf);
	bench_stream_uncached(path, size, buf);
	bench_stream_cold_misses(path, size, buf);
	free(buf);
}

static void fmt_num(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else if (v >= 1e6)
		snprintf(b, len, "%.0f", v);
	else if (v >= 100)
		snprintf(b, len, "%.1f", v);
	else
		snprintf(b, len, "%.2f", v);
}

/* The row's ratio: the one measured in pairs if there is one (see
 * bench_hits), else the quotient of the two columns. */
static double row_ratio(const struct row *r)
{
	return isnan(r->ratio) ? r->pc / r->kernel : r->ratio;
}

/* Formats a row's pagecache figure and ratio; its verdict: 1 PASS, 0 FAIL. */
static int row_verdict(const struct row *r, char *p, size_t plen, char *ratio, size_t rlen)
{
	snprintf(ratio, rlen, "-");
	if (!r->target) {
		/* no target: the figures side by side */
		fmt_num(p, plen, r->pc);
		if (isnan(r->pc))
			snprintf(p, plen, "error");
		else if (!isnan(r->kernel) && r->kernel > 0)
			snprintf(ratio, rlen, "%.2fx", row_ratio(r));
		return -1;
	}
	if (r->max_abs > 0) {
		fmt_num(p, plen, r->pc);
		return !isnan(r->pc) && r->pc <= r->max_abs;
	}
	if (r->pct_row) {
		/* pc holds the percentage; show bytes per folio too */
		if (isnan(r->pc)) {
			snprintf(p, plen, "error");
			return 0;
		}
		snprintf(p, plen, "%.1f", r->pc * 4096.0 / 100.0);
		snprintf(ratio, rlen, "%.2f %%", r->pc);
		return r->pc <= r->max_pct;
	}
	if (isnan(r->pc) || isnan(r->kernel) || r->kernel <= 0) {
		snprintf(p, plen, isnan(r->pc) ? "error" : "-");
		if (!isnan(r->pc))
			fmt_num(p, plen, r->pc);
		return 0;
	}
	fmt_num(p, plen, r->pc);
	snprintf(ratio, rlen, "%.2fx", row_ratio(r));
	return row_ratio(r) >= r->min_ratio;
}

/* The figure of a row into the result's field for its unit. */
static void put_figure(struct bres *b, const struct row *r, double v)
{
	b->value = v;
	snprintf(b->unit, sizeof(b->unit), "%s", r->unit);
	if (!strcmp(r->unit, "MiB/s"))
		b->mib_s = v;
	else if (!strcmp(r->unit, "KB/s"))
		b->mib_s = v / 1024;
	else if (strstr(r->unit, "/s"))
		b->ops_s = v;
}

/* A row as results: its base (the kernel, unless the row says what else
 * its kernel column is) and pagecache with the target and verdict. */
static void row_results(const char *suite, const struct row *r, int verdict)
{
	if (!isnan(r->kernel) || r->base) {
		struct bres *k = res_add(suite, r->name, r->base ? r->base : "kernel-buffered");

		put_figure(k, r, r->kernel);
	}
	struct bres *b = res_add(suite, r->name, r->pc_path ? r->pc_path : "pagecache-buffered");

	put_figure(b, r, r->pc);
	if (r->pct_row)
		b->value = r->pc * 4096.0 / 100.0;  /* bytes per folio */
	snprintf(b->target, sizeof(b->target), "%s", r->target ? r->target : "");
	b->pass = verdict;
	if (r->has_cached)
		b->cached_after_bytes = r->cached_after;
	snprintf(b->note, sizeof(b->note), "%s", r->note);
	if (isnan(r->pc))
		snprintf(b->error, sizeof(b->error), "not measured (see note)");
}

/* The table of the rows added since `first`, as the old pcbench printed
 * it, and the same rows as results of `suite`. */
static void flush_rows(const char *suite, int first)
{
	int i, w = 42;

	/* the workload column as wide as its longest name */
	for (i = first; i < nrows; i++)
		if ((int)strlen(rows[i].name) > w)
			w = (int)strlen(rows[i].name);
	printf("\n-- %s\n%-*s %-8s %14s %14s %8s %8s %s\n", suite, w, "workload", "unit", "kernel", "pagecache",
	       "ratio", "target", "result");
	for (i = first; i < nrows; i++) {
		struct row *r = &rows[i];
		char k[32], p[32], ratio[32];
		int verdict = row_verdict(r, p, sizeof(p), ratio, sizeof(ratio));

		fmt_num(k, sizeof(k), r->kernel);
		printf("%-*s %-8s %14s %14s %8s %8s %s\n", w, r->name, r->unit, k, p, ratio,
		       r->target ? r->target : "-", verdict < 0 ? "-" : verdict ? "PASS" : "FAIL");
		row_results(suite, r, verdict);
	}
	for (i = first; i < nrows; i++)
		if (rows[i].note[0])
			printf("  %s: %s\n", rows[i].name, rows[i].note);
}

/* ------------------------------------------------------------ suites */

void legacy_only_note(const char *suite)
{
	if (bo.only)
		printf("(--only does not apply to %s: the old pcbench's workloads there always measure the kernel "
		       "beside pagecache, each row a pair)\n", suite);
}

static void legacy_file(char *out, size_t len, const char *name)
{
	bu_join(out, len, bo.dir, name);
}

/* The CPU's last-level cache in bytes (sysfs; 32 MiB when it cannot
 * say).  sysconf's figure can be the whole package's or wrong in a VM. */
static uint64_t llc_bytes(void)
{
	unsigned long long kib = 0;
	FILE *fp = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "re");

	if (!fp)
		fp = fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "re");
	if (fp && fscanf(fp, "%lluK", &kib) != 1)
		kib = 0;
	if (fp)
		fclose(fp);
	return kib ? kib * 1024 : 32 * BU_MiB;
}

/*
 * The file sizes of a and h.  The file "in the CPU's cache" is half the
 * last-level cache, 16 MiB at most.  The file "out of it" is twice the
 * LLC when that is at most OUT_OF_LLC_CAP (and 64 MiB at least), else
 * OUT_OF_LLC_DEFAULT: a VM can report an LLC of hundreds of MiB (480 MiB
 * here), and twice that would outgrow the cache of the hit rows, which
 * then measure misses.  --quick: 64 MiB.  The hits' large file is the
 * issue's 128 MiB (--quick: 64 MiB), and every hit and warm-read cache
 * holds at least twice its file, so that the timed phases are all hits
 * (the rows check it: no device reads while timed).
 */
#define OUT_OF_LLC_CAP (256 * BU_MiB)
#define OUT_OF_LLC_DEFAULT (128 * BU_MiB)

static char llc_why[160];

static uint64_t out_of_llc_bytes(uint64_t llc)
{
	if (bo.quick) {
		snprintf(llc_why, sizeof(llc_why), "--quick: 64 MiB (LLC reported %s)", bu_human(llc));
		return 64 * BU_MiB;
	}
	if (2 * llc <= OUT_OF_LLC_CAP) {
		uint64_t v = 2 * llc < 64 * BU_MiB ? 64 * BU_MiB : 2 * llc;
		snprintf(llc_why, sizeof(llc_why), "2x the LLC of %s, 64 MiB at least", bu_human(llc));
		return v;
	}
	snprintf(llc_why, sizeof(llc_why), "%s: the LLC reported (%s) is so large that 2x it would pass the "
		 "%s cap (a VM's figure)", bu_human(OUT_OF_LLC_DEFAULT), bu_human(llc), bu_human(OUT_OF_LLC_CAP));
	return OUT_OF_LLC_DEFAULT;
}

void legacy_warm_reads(void)
{
	char path[PATH_MAX];
	int first = nrows;
	uint64_t llc = llc_bytes(), rsmall = llc / 2 < 16 * BU_MiB ? llc / 2 : 16 * BU_MiB;
	uint64_t rbig = out_of_llc_bytes(llc);
	uint64_t hbig = bo.quick ? 64 * BU_MiB : 128 * BU_MiB;

	legacy_only_note("read's warm reads and hits (a, h)");

	printf("\nread: warm reads: files of %s (in the CPU's cache: half the LLC, 16 MiB at most) and %s (out of "
	       "it: %s); hits: %s and %s\n", bu_human(rsmall), bu_human(rbig), llc_why, bu_human(rsmall),
	       bu_human(hbig));
	legacy_file(path, sizeof(path), "pcbench-random.dat");
	prog_step_timed("a. 4 KiB random reads, warm", "kernel, pagecache", (uint64_t)(4 * bo.seconds * 1e9),
			NULL, NULL);
	bu_make_file(path, rsmall, 1);
	bench_random_reads(path, rsmall, NULL);
	bu_make_file(path, rbig, 1);
	bench_random_reads(path, rbig, llc_why);
	prog_step_done();
	prog_step_timed("h. 4 KiB hits", "memcpy, kernel, pagecache", (uint64_t)(2 * bo.seconds * 1e9), NULL,
			NULL);
	bu_make_file(path, rsmall, 1);
	bench_hits(path, rsmall);
	bu_make_file(path, hbig, 1);
	bench_hits(path, hbig);
	prog_step_done();
	unlink(path);
	flush_rows("read", first);
}

void suite_metadata(void)
{
	char path[PATH_MAX];
	int first = nrows;
	uint64_t size = bo.quick ? 16 * BU_MiB : 64 * BU_MiB;

	if (size > bo.mem / 2)
		size = (bo.mem / 2) & ~(uint64_t)4095;
	legacy_only_note("metadata");
	legacy_file(path, sizeof(path), "pcbench-meta.dat");
	prog_step_count("e. metadata per folio", "pagecache-buffered", size / 4096, "reads");
	bu_make_file(path, size, 1);
	bench_metadata(path, size);
	prog_step_done();
	unlink(path);
	flush_rows("metadata", first);
}

/* A legacy workload as one step of the progress line, its rows as the
 * suite's table and results. */
static void rows_suite(const char *suite, const char *step, void (*bench)(void), uint64_t units,
		       const char *unit)
{
	int first = nrows;

	legacy_only_note(suite);
	prog_step_count(step, "kernel, pagecache", units, unit);
	bench();
	prog_step_done();
	flush_rows(suite, first);
}

void suite_files(void)
{
	int first = nrows;

	legacy_only_note("files");
	/* As root: a fresh file system of each kind for the run (see
	 * scratchfs.c); otherwise --dir's, as it is. */
	static const char *const kinds[] = { "xfs", "ext4" };
	bool any = false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct scratchfs s;
		char why[256], label[32];

		if (!scratchfs_make(&s, kinds[i], why, sizeof(why))) {
			printf("(files: no fresh %s file system: %s)\n", kinds[i], why);
			continue;
		}
		files_top = s.mnt;
		snprintf(label, sizeof(label), "fresh %s", kinds[i]);
		bench_small_files(label); /* its phases are steps of their own */
		scratchfs_remove(&s);
		any = true;
	}
	if (!any) {
		printf("(files: on --dir's file system as it is)\n");
		files_top = bo.dir;
		bench_small_files("");
	}
	files_top = NULL;
	flush_rows("files", first);
}

void suite_startup(void)
{
	rows_suite("startup", "g. pc_cache_new", bench_startup, STARTUP_CACHES, "caches");
}

void suite_firstwrites(void)
{
	char path[PATH_MAX];

	legacy_only_note("firstwrites");
	legacy_file(path, sizeof(path), "pcbench-first.dat");
	prog_step_count("G. first writes into a new cache", "pagecache", 6 * STARTUP_WRITE_TOTAL / BU_MiB, "MiB");
	bench_first_writes(path);
	prog_step_done();
}

void suite_readahead(void)
{
	char path[PATH_MAX];
	int first = nrows;

	legacy_only_note("readahead");
	legacy_file(path, sizeof(path), "pcbench-stream.dat");
	prog_step_count("r. read-ahead streams", "kernel, pagecache", STREAM_RUNS, "runs");
	bu_make_file(path, bo.seq_total, 3);
	bench_streams(path, bo.seq_total);
	prog_step_done();
	unlink(path);
	flush_rows("readahead", first);
}
