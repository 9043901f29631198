/*
 * read.c - suite read: the warm 4 KiB random reads and cache hits of the
 * old pcbench (a and h, warm_reads.c and hits.c: files in and out of the
 * CPU's cache, 1 and 2 threads, the bare memcpy of the same pattern as the
 * limit line), then a cold sequential read of a --seq-total file in 1 MiB
 * reads on every path: buffered with read-ahead, uncached (nothing may
 * stay cached), direct.
 *
 * Before each path's read the kernel's copy of the file is dropped
 * (fdatasync + fadvise(DONTNEED), and drop_caches when root) and
 * pagecache starts with a fresh cache.  Targets: pagecache-buffered
 * >= 0.9x kernel-buffered (the old pcbench's d); pagecache-dontcache
 * >= 0.9x kernel-buffered with nothing left cached (the old r's uncached
 * row).
 */
#include "bench.h"

static _Atomic uint64_t read_done;

static uint64_t read_poll(void *arg)
{
	(void)arg;
	return atomic_load_explicit(&read_done, memory_order_relaxed);
}

static void cold_read(const char *workload, const struct bpath *p, const char *file, char *buf)
{
	struct bres *r = res_add("read", workload, p->name);
	uint64_t got = 0, t0, calls = 0;
	struct bfile f;
	ssize_t n;

	bu_drop_file_cache(file, true);
	if (bf_open(&f, p, NULL, file, O_RDONLY) < 0) {
		snprintf(r->error, sizeof(r->error), "%s", f.err);
		return;
	}
	atomic_store(&read_done, 0);
	prog_step(workload, p->name, bo.seq_total, read_poll, NULL);
	t0 = bu_now_ns();
	while ((n = bf_pread(&f, buf, BU_MiB, got)) > 0) {
		got += (uint64_t)n;
		calls++;
		atomic_store_explicit(&read_done, got, memory_order_relaxed);
	}
	double secs = bu_secs(bu_now_ns() - t0);
	prog_step_done();
	if (n < 0 || got != bo.seq_total) {
		if (n >= 0)
			errno = EIO;
		bf_fail(&f, p->pc ? "pc_pread" : "preadv2");
		snprintf(r->error, sizeof(r->error), "%s after %" PRIu64 " bytes", f.err, got);
	} else {
		r->mib_s = r->value = (double)got / BU_MiB / secs;
		r->ops_s = (double)calls / secs; /* read calls that returned data */
		snprintf(r->unit, sizeof(r->unit), "MiB/s");
		r->cached_after_bytes = bf_cached(&f, file);
	}
	if (p->pc) {
		struct pc_stats st;

		pc_cache_stats(f.c, &st);
		res_note(r, "device reads %" PRIu64 " (%s), read-ahead windows %" PRIu64 " sync, %" PRIu64 " async",
			 st.dev_read_ios, bu_human(st.dev_read_bytes), st.ra_sync_windows, st.ra_async_windows);
	}
	bf_close(&f);
}

static void read_targets(const char *workload)
{
	struct bres *k = res_find("read", workload, "kernel-buffered");
	struct bres *b = res_find("read", workload, "pagecache-buffered");
	struct bres *u = res_find("read", workload, "pagecache-dontcache");
	bool kok = res_base_ok(k);

	if (b && !b->error[0]) {
		if (kok)
			res_target(b, b->mib_s >= 0.9 * k->mib_s, ">= 0.9x kernel-buffered");
		else
			res_target_na(b, "kernel-buffered", ">= 0.9x kernel-buffered");
	}
	if (u && !u->error[0]) {
		if (kok)
			res_target(u, u->mib_s >= 0.9 * k->mib_s, ">= 0.9x kernel-buffered");
		else
			res_target_na(u, "kernel-buffered", ">= 0.9x kernel-buffered");
		res_target(u, u->cached_after_bytes == 0, "nothing left cached");
	}
}

void suite_read(void)
{
	static const int paths[] = { P_KBUF, P_KDC, P_KDIRECT, P_PBUF, P_PDC, P_PDIRECT };
	char file[PATH_MAX], workload[96];
	char *buf = bu_alloc_aligned(BU_MiB, 4096);

	warm_reads();

	bu_join(file, sizeof(file), bo.dir, "pcbench-read.dat");
	bu_make_file(file, bo.seq_total, 5);
	snprintf(workload, sizeof(workload), "cold sequential read, 1 MiB reads, %s file", bu_human(bo.seq_total));
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (path_selected(&bpaths[paths[i]]))
			cold_read(workload, &bpaths[paths[i]], file, buf);
	read_targets(workload);
	report_workload("read", workload);
	unlink(file);
	free(buf);
}
