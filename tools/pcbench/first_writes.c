/*
 * first_writes.c - suite firstwrites, the old pcbench's G (only when named:
 * it takes about 4 minutes and 8 GiB): the first writes into a new cache.
 * Latency of 1 MiB pc_pwrite()s writing 4 GiB to a new file in an 8 GiB
 * cache: "fresh", right after pc_cache_new (the background thread faults
 * the memory in as the writes go, and the writes fault what they outrun);
 * "fresh, lazy" with PC_CFG_LAZY_MEMORY (every write faults its folios
 * in); and "warm", the first cache again after a truncate to 0 and an
 * fsync.  Twice: as fast as the writes go, and paced at STARTUP_PACE MiB/s
 * (a writer slower than the machine's fault-in rate).  A virtual machine
 * whose host backs guest memory lazily keeps memory a process freed
 * backed for a while, which would flatter the next fresh run:
 * STARTUP_PAUSE_S seconds pass before each fresh run.  Each pass is a
 * result of pagecache-buffered (no target), and a line as before.
 */
#include "bench.h"

#define STARTUP_WRITE_TOTAL (4 * BU_GiB)
#define STARTUP_CACHE (8 * BU_GiB)
#define STARTUP_PACE 256u /* MiB/s */
#define STARTUP_PAUSE_S 30u

/* 1 MiB writes of STARTUP_WRITE_TOTAL from offset 0, at most `pace` MiB/s
 * (0: as fast as they go); a result and a line. */
static void first_writes_pass(const char *label, struct pc_file *f, const char *buf, unsigned pace)
{
	size_t n = STARTUP_WRITE_TOTAL / BU_MiB;
	uint64_t *lat = malloc(n * sizeof(*lat)), t0 = bu_now_ns();
	char workload[96];

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
	char paced[32] = "";
	if (pace)
		snprintf(paced, sizeof(paced), ", paced at %u MiB/s", pace);
	snprintf(workload, sizeof(workload), "G. 1 MiB writes of %s, new %s cache%s: %s", bu_human(STARTUP_WRITE_TOTAL),
		 bu_human(STARTUP_CACHE), paced, label);
	struct bres *r = res_add("firstwrites", workload, "pagecache-buffered");
	res_latency(r, lat, n); /* sorts lat */
	snprintf(r->unit, sizeof(r->unit), "MiB/s");
	res_figure(r, (double)STARTUP_WRITE_TOTAL / BU_MiB / secs);
	r->ops_s = (double)n / secs;
	r->writes = (double)n;
	res_note(r, "max %.3f ms; fsync after the writes, not timed", lat[n - 1] / 1e6);
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
	bench_config(&cfg, STARTUP_CACHE, flags);
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

void suite_firstwrites(void)
{
	char path[PATH_MAX];

	if (!name_selected("pagecache-buffered")) {
		printf("\n(firstwrites: not run: --only does not select pagecache-buffered)\n");
		return;
	}
	bu_join(path, sizeof(path), bo.dir, "pcbench-first.dat");
	prog_step_count("G. first writes into a new cache", "pagecache", 6 * STARTUP_WRITE_TOTAL / BU_MiB, "MiB");
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
	prog_step_done();
}
