/*
 * fstime.c - suite fstime (seed iomap-subfolio-block-state): UnixBench
 * fstime "w", a cached file of 2000 blocks rewritten whole, sequentially
 * from offset 0, over and over for --seconds; KB/s (1024 bytes) as
 * UnixBench prints it, and MiB/s.
 *
 *   1 KiB writes, pagecache with 1 KiB blocks (block state per 1 KiB
 *     inside large folios: what the seed's sub-folio block state is for)
 *   1 KiB writes, pagecache with 4 KiB blocks (each write dirties part of
 *     a block)
 *   4 KiB overwrites of a 2000 x 4 KiB file cached in large folios
 *
 * Before the timed phase the file is read whole in 64 KiB reads, so that
 * both caches hold it in folios as large as their read-ahead makes them.
 * The kernel side is kernel-buffered on the file system's own blocks.
 * Target: pagecache >= 2x kernel-buffered (the old pcbench's b).
 */
#include "bench.h"

#define FSTIME_BLOCKS 2000

struct fstime_case {
	const char *name;
	size_t wsize;        /* write size = the file's block of fstime */
	size_t pc_block;     /* pagecache block_size */
};

static const struct fstime_case cases[] = {
	{ "1 KiB rewrites, 2000 blocks (fstime-w), pagecache 1 KiB blocks", 1024, 1024 },
	{ "1 KiB rewrites, 2000 blocks (fstime-w), pagecache 4 KiB blocks", 1024, 4096 },
	{ "4 KiB overwrites, 2000 blocks, large folios", 4096, 4096 },
};

static int read_whole(struct bfile *f, char *buf)
{
	uint64_t off = 0;
	ssize_t n;

	while ((n = bf_pread(f, buf, 64 * 1024, off)) > 0)
		off += (uint64_t)n;
	return n < 0 ? -1 : 0;
}

/* Bytes the running rewrite loop has written, for the progress line's
 * rate (updated with the clock check, every 64 writes). */
static _Atomic uint64_t rewritten;

static uint64_t rewritten_poll(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&rewritten, memory_order_relaxed);
}

/* Writes of `wsize` over the file from 0, again and again, for
 * bo.seconds; writes per second, or NAN on a failed write. */
static double rewrite_loop(struct bfile *f, const char *buf, size_t wsize)
{
	uint64_t count = 0, t0 = bu_now_ns(), deadline = t0 + (uint64_t)(bo.seconds * 1e9);

	atomic_store(&rewritten, 0);
	for (;;) {
		for (int blk = 0; blk < FSTIME_BLOCKS; blk++) {
			if (bf_pwrite(f, buf, wsize, (uint64_t)blk * wsize) != (ssize_t)wsize)
				return NAN;
			/* the clock is read every 64 writes, as before */
			if ((++count & 63) != 0)
				continue;
			atomic_store_explicit(&rewritten, count * wsize, memory_order_relaxed);
			if (bu_now_ns() >= deadline)
				return (double)count / bu_secs(bu_now_ns() - t0);
		}
	}
}

static void fstime_run(const struct fstime_case *fc, const struct bpath *p, const char *file, char *buf)
{
	struct bres *r = res_add("fstime", fc->name, p->name);
	struct pc_cache *c = NULL;
	struct bfile f;

	if (p->pc) {
		c = bench_cache_new(0, fc->pc_block);
		if (!c) {
			snprintf(r->error, sizeof(r->error), "pc_cache_new(block_size %zu): %s", fc->pc_block,
				 strerror(errno));
			return;
		}
	}
	if (bf_open(&f, p, c, file, O_RDWR) < 0) {
		snprintf(r->error, sizeof(r->error), "%s", f.err);
		goto out;
	}
	if (read_whole(&f, buf + 64 * 1024) < 0) {
		bf_fail(&f, "read (warming)");
		snprintf(r->error, sizeof(r->error), "%s", f.err);
		goto close;
	}
	prog_step_timed(fc->name, p->name, (uint64_t)(bo.seconds * 1e9), rewritten_poll, NULL);
	double wps = rewrite_loop(&f, buf, fc->wsize);
	prog_step_done();
	if (isnan(wps)) {
		bf_fail(&f, "write");
		snprintf(r->error, sizeof(r->error), "%s", f.err);
		goto close;
	}
	r->ops_s = wps;
	r->mib_s = wps * (double)fc->wsize / BU_MiB;
	r->value = wps * (double)fc->wsize / 1024;
	snprintf(r->unit, sizeof(r->unit), "KB/s");
	if (p->pc) {
		struct pc_stats st;

		pc_cache_stats(c, &st);
		res_note(r, "%.0f KB/s; block size %zu, folios %" PRIu64 " for %d KiB", r->value, fc->pc_block,
			 st.folios, (int)(FSTIME_BLOCKS * fc->wsize / 1024));
	} else {
		res_note(r, "%.0f KB/s", r->value);
	}
close:
	bf_close(&f);
out:
	if (c)
		pc_cache_destroy(c);
}

void suite_fstime(void)
{
	static const int paths[] = { P_KBUF, P_PBUF };
	char file[PATH_MAX];
	char *buf = bu_alloc_aligned(BU_MiB, 4096);

	memset(buf, 'w', 4096);
	bu_join(file, sizeof(file), bo.dir, "pcbench-fstime.dat");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bu_make_file(file, FSTIME_BLOCKS * cases[i].wsize, 7);
		for (size_t k = 0; k < 2; k++)
			if (path_selected(&bpaths[paths[k]]))
				fstime_run(&cases[i], &bpaths[paths[k]], file, buf);
		struct bres *kr = res_find("fstime", cases[i].name, "kernel-buffered");
		struct bres *pr = res_find("fstime", cases[i].name, "pagecache-buffered");
		if (pr && !pr->error[0]) {
			if (res_base_ok(kr))
				res_target(pr, pr->ops_s >= 2 * kr->ops_s, ">= 2x kernel-buffered");
			else
				res_target_na(pr, "kernel-buffered", ">= 2x kernel-buffered");
		}
		report_workload("fstime", cases[i].name);
	}
	unlink(file);
	free(buf);
}
