/*
 * readahead.c - suite readahead, the old pcbench's r: read-ahead that
 * follows streams (issue 13), cold start each time, on a file of
 * --seq-total bytes:
 *   scan+hot: one thread scans the file in 128 KiB reads and after each
 *     makes 32 random 4 KiB reads of its first 64 MiB, all through one
 *     descriptor (kernel) or one handle (pagecache), and through two
 *     handles (scan, hot) as the base pagecache must match;
 *   quarters: 4 threads each scan their own quarter in 1 MiB reads
 *     through one shared descriptor / handle;
 *   uncached: a PC_DONTCACHE sequential 1 MiB read of the file against the
 *     kernel's buffered cold read; nothing may stay cached;
 *   cold miss: single random 4 KiB reads of the cold file, one at a time.
 * Each workload's runs interleave over STREAM_ROUNDS rounds, every run
 * cold (the file dropped from the kernel's cache, a fresh cache); --only
 * selects the runs of the paths it names.
 */
#include "bench.h"

#define STREAM_CHUNK (128 * 1024)
#define QUARTER_CHUNK BU_MiB
#define STREAM_HOT_READS 32
#define STREAM_HOT_BYTES (64 * BU_MiB)
#define STREAM_MISSES 2000
#define STREAM_ROUNDS 3

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
static struct pc_cache *stream_open(const struct pair *p, const char *path, struct stream_io *s, bool kernel,
				    int handles)
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
	struct pc_cache *c = pair_cache(p, 0, (size_t)-1);
	if (!c)
		return NULL;
	s->scan = pc_open(c, path, O_RDONLY, 0);
	s->hot = handles == 2 ? pc_open(c, path, O_RDONLY, 0) : s->scan;
	if (!s->scan || !s->hot)
		pair_fail(p, "pc_open(O_RDONLY)");
	return c;
}

static void stream_close(const struct pair *p, struct pc_cache *c, struct stream_io *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->hot && s->hot != s->scan && pc_close(s->hot) < 0)
		pair_fail(p, "pc_close");
	pair_finish_cache(p, c, s->scan);
}

/* One cold run of the scan with hot reads; MiB/s of the file scanned. */
static double stream_scan_hot_run(const struct pair *p, const char *path, uint64_t size, char *buf, bool kernel,
				  int handles)
{
	struct stream_io s;
	struct pc_cache *c = stream_open(p, path, &s, kernel, handles);
	double secs = NAN;

	if (kernel || (c && s.scan && s.hot))
		secs = stream_scan_hot(&s, size, buf);
	if (isnan(secs) && !kernel)
		pair_fail(p, "pc_pread (scan + hot reads)");
	const struct bres *noted = pair_noted(p);
	if (!kernel && c && handles == 1 && noted && !strstr(noted->note, "one handle:")) {
		struct pc_stats st;

		pc_cache_stats(c, &st);
		pair_note(p, "one handle: windows %" PRIu64 " by a miss, %" PRIu64 " by a mark, %" PRIu64
			  " random misses", st.ra_sync_windows, st.ra_async_windows, st.ra_random_reads);
	}
	if (!kernel)
		stream_close(p, c, &s);
	else
		close(s.fd);
	prog_advance(1);
	return (double)size / BU_MiB / secs;
}

/* scan+hot: the kernel, one handle and two handles, in an order that
 * rotates each round (see stream_rounds). */
static void bench_stream_scan_hot(const struct pair *hot, const struct pair *two, const char *path,
				  uint64_t size, char *buf)
{
	double v[3][STREAM_ROUNDS];
	/* kernel, one handle, two handles */
	const bool run[3] = { hot->base, hot->pc || two->pc, two->base };

	for (int i = 0; i < STREAM_ROUNDS; i++) {
		for (int j = 0; j < 3; j++) {
			int which = (i + j) % 3;

			if (!run[which])
				v[which][i] = NAN;
			else if (which == 0)
				v[0][i] = stream_scan_hot_run(hot, path, size, buf, true, 1);
			else if (which == 1)
				v[1][i] = stream_scan_hot_run(hot, path, size, buf, false, 1);
			else
				v[2][i] = stream_scan_hot_run(two, path, size, buf, false, 2);
		}
	}
	res_figure(hot->base, median_ratio(v[0], NULL, STREAM_ROUNDS));
	res_figure(hot->pc, median_ratio(v[1], NULL, STREAM_ROUNDS));
	res_figure(two->pc, median_ratio(v[1], NULL, STREAM_ROUNDS));
	res_figure(two->base, median_ratio(v[2], NULL, STREAM_ROUNDS));
	pair_note(two, "'kernel' column: pagecache with scan and hot reads on two handles; pagecache column: the "
		  "same one-handle measurement as the row above; medians of %d cold rounds, file %s", STREAM_ROUNDS,
		  bu_human(size));
	pair_judge(hot, 1.0, ">= 1.0x");
	pair_judge(two, 1 / 1.15, ">= 0.87x");
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
static double stream_quarters(const struct stream_io *s, uint64_t size, char *buf)
{
	struct quarter_arg a[4];
	pthread_t t[4];
	uint64_t q = size / 4 / QUARTER_CHUNK * QUARTER_CHUNK, t0 = bu_now_ns();
	bool failed = false;

	(void)buf;
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

/* One workload of p, kernel and pagecache interleaved over STREAM_ROUNDS
 * cold rounds (pagecache with `flags` on every read), each side that p
 * has; medians into p, and each round's ratio into `rounds`
 * (round_ratios) where both sides ran, else "".  Returns the most that
 * any pagecache round left cached. */
typedef double (*stream_fn)(const struct stream_io *s, uint64_t size, char *buf);
static uint64_t stream_rounds(const struct pair *p, const char *path, uint64_t size, char *buf, stream_fn fn,
			      int flags, const char *what, char *rounds, size_t rounds_len)
{
	double k[STREAM_ROUNDS], v[STREAM_ROUNDS];
	uint64_t cached = 0;
	struct stream_io s;

	/* Kernel first in even rounds, pagecache first in odd ones: a cache
	 * below both (the device's, the host's) favours neither. */
	for (int i = 0; i < 2 * STREAM_ROUNDS; i++) {
		int round = i / 2;

		if ((i % 2 == 0) == (round % 2 == 0)) {
			if (p->base) {
				stream_open(p, path, &s, true, 1);
				k[round] = fn(&s, size, buf);
				close(s.fd);
				prog_advance(1);
			}
			continue;
		}
		if (!p->pc)
			continue;
		struct pc_cache *c = stream_open(p, path, &s, false, 1);
		s.flags = flags;
		v[round] = c && s.scan ? fn(&s, size, buf) : NAN;
		if (isnan(v[round]))
			pair_fail(p, what);
		if (c) {
			struct pc_stats st;

			pc_cache_stats(c, &st);
			cached = cached > st.cached_bytes ? cached : st.cached_bytes;
		}
		stream_close(p, c, &s);
		prog_advance(1);
	}
	if (p->base)
		res_figure(p->base, median_ratio(k, NULL, STREAM_ROUNDS));
	if (p->pc)
		res_figure(p->pc, median_ratio(v, NULL, STREAM_ROUNDS));
	rounds[0] = '\0';
	if (p->base && p->pc)
		round_ratios(rounds, rounds_len, k, v);
	return cached;
}

static void bench_stream_quarters(const struct pair *p, const char *path, uint64_t size, char *buf)
{
	char rounds[96];

	stream_rounds(p, path, size, buf, stream_quarters, 0, "pc_pread (quarters)", rounds, sizeof(rounds));
	pair_note(p, "1 MiB reads, cold, medians of %d rounds, file %s%s%s", STREAM_ROUNDS, bu_human(size),
		  rounds[0] ? "; " : "", rounds);
	pair_judge(p, 1.0, ">= 1.0x");
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

static void bench_stream_uncached(const struct pair *p, const char *path, uint64_t size, char *buf)
{
	char rounds[96];
	uint64_t cached = stream_rounds(p, path, size, buf, stream_seq_read, PC_DONTCACHE, "pc_pread (PC_DONTCACHE)",
					rounds, sizeof(rounds));

	pair_note(p, "cold, medians of %d rounds, file %s (%.2gx memory_limit)", STREAM_ROUNDS, bu_human(size),
		  (double)size / (double)bo.mem);
	if (p->pc) {
		p->pc->cached_after_bytes = (double)cached;
		if (cached)
			res_figure(p->pc, NAN); /* the promise is that nothing stays */
		pair_note(p, "left cached after the read: %s", bu_human(cached));
	}
	pair_judge(p, 0.9, ">= 0.9x");
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

static void bench_stream_cold_misses(const struct pair *p, const char *path, uint64_t size, char *buf)
{
	char rounds[96], k[32] = "", v[32] = "";

	stream_rounds(p, path, size, buf, stream_cold_misses, 0, "pc_pread (cold miss)", rounds, sizeof(rounds));
	if (p->base)
		snprintf(k, sizeof(k), "kernel %.1f us", 1e6 / p->base->value);
	if (p->pc)
		snprintf(v, sizeof(v), "pagecache %.1f us", 1e6 / p->pc->value);
	pair_note(p, "%d reads one at a time, medians of %d rounds: %s%s%s per read", STREAM_MISSES, STREAM_ROUNDS, k,
		  k[0] && v[0] ? ", " : "", v);
	pair_judge(p, 1.0, ">= 1.0x");
}

void suite_readahead(void)
{
	static const char suite[] = "readahead";
	struct pair hot = pair_add(suite, "r. scan + hot reads, one handle", "MiB/s", "kernel-buffered",
				   "pagecache-buffered");
	struct pair two = pair_add(suite, "r. ... one handle vs two (in kernel column)", "MiB/s",
				   "pagecache-buffered-two-handles", "pagecache-buffered");
	struct pair quarters = pair_add(suite, "r. 4 threads, a quarter each, one handle", "MiB/s", "kernel-buffered",
					"pagecache-buffered");
	struct pair uncached = pair_add(suite, "r. uncached seq read vs kernel buffered", "MiB/s", "kernel-buffered",
					"pagecache-dontcache");
	struct pair misses = pair_add(suite, "r. cold random 4 KiB miss", "reads/s", "kernel-buffered",
				      "pagecache-buffered");
	char path[PATH_MAX];
	/* Cold runs in all: scan + hot (up to 3 kinds), then kernel and
	 * pagecache of quarters, uncached and cold misses, each
	 * STREAM_ROUNDS times. */
	uint64_t runs = STREAM_ROUNDS * ((hot.base != NULL) + (hot.pc || two.pc) + (two.base != NULL) +
					 (quarters.base != NULL) + (quarters.pc != NULL) + (uncached.base != NULL) +
					 (uncached.pc != NULL) + (misses.base != NULL) + (misses.pc != NULL));

	if (!runs) {
		printf("\n(readahead: not run: --only selects none of its paths)\n");
		return;
	}
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	bu_join(path, sizeof(path), bo.dir, "pcbench-stream.dat");
	prog_step_count("r. read-ahead streams", "kernel, pagecache", runs, "runs");
	bu_make_file(path, bo.seq_total, 3);
	bench_stream_scan_hot(&hot, &two, path, bo.seq_total, buf);
	bench_stream_quarters(&quarters, path, bo.seq_total, buf);
	bench_stream_uncached(&uncached, path, bo.seq_total, buf);
	bench_stream_cold_misses(&misses, path, bo.seq_total, buf);
	free(buf);
	prog_step_done();
	unlink(path);
	report_pairs(suite);
}
