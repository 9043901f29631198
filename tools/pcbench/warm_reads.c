/*
 * warm_reads.c - the warm part of suite read, the old pcbench's a and h:
 * 4 KiB random reads from a warm cache, 1 thread, of a file the CPU's
 * cache holds (16 MiB at most) and of one it does not (see
 * out_of_llc_bytes()), kernel-buffered beside pagecache-buffered, target
 * >= 2.5x; then the hits at memory speed of hits.c.  Each side alone: the
 * kernel first, then pagecache in a fresh cache of at least twice the
 * file.  --only selects the sides.
 */
#include "bench.h"

static void bench_random_reads(const char *path, uint64_t fsize, const char *why)
{
	char name[96];

	/* Two sizes: one that the CPU's last-level cache holds (there the
	 * copy is cheap and the per-call cost shows), one that it does not
	 * (there both sides mostly wait for DRAM in the 4 KiB copy). */
	snprintf(name, sizeof(name), "a. 4 KiB random read, warm, %s file", bu_human(fsize));
	struct pair p = pair_add("read", name, "ops/s", "kernel-buffered", "pagecache-buffered");
	struct hit_arg proto = { .npages = fsize / 4096, .kind = HIT_KERNEL };
	struct pc_stats s0, s1, d;
	struct pc_cache *c = NULL;
	int64_t kr = 0;

	if (!pair_any(&p))
		return;
	bu_make_file(path, fsize, 1);
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	pair_note(&p, "file %s%s%s%s, cache %s", bu_human(fsize), why ? " (" : "", why ? why : "", why ? ")" : "",
		  bu_human(bo.mem > 2 * fsize ? bo.mem : 2 * fsize));

	if (p.base) {
		proto.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (proto.fd < 0)
			bu_die("open %s:", path);
		kernel_read_all(proto.fd, buf, BU_MiB);
		res_figure(p.base, kernel_hit_run(&proto, 1, &kr));
		if (isnan(p.base->value))
			bu_die("kernel pread (4 KiB random):");
		close(proto.fd);
	}
	if (!p.pc) {
		check_all_hits(&p, NULL, kr);
		goto out;
	}

	/* pagecache: the whole file fits, with room (a --quick --mem is
	 * smaller than the file that outgrows the CPU's cache) */
	c = pair_cache(&p, 2 * fsize, (size_t)-1);
	if (!c)
		goto out;
	proto.kind = HIT_PAGECACHE;
	proto.f = pc_open_warm(&p, c, path, buf);
	if (!proto.f)
		goto done;
	pc_cache_stats(c, &s0);
	res_figure(p.pc, hit_run(&proto, 1));
	if (isnan(p.pc->value)) {
		pair_fail(&p, "pc_pread (4 KiB random)");
		goto done;
	}
	pc_cache_stats(c, &s1);
	bench_stats_delta(&d, &s0, &s1);
	pair_note_io(&p, "timed phase", &d);
	if (!check_all_hits(&p, &d, kr))
		res_figure(p.pc, NAN);
done:
	pair_finish_cache(&p, c, proto.f);
out:
	pair_judge(&p, 2.5, ">= 2.5x");
	free(buf);
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

void warm_reads(void)
{
	char path[PATH_MAX];
	uint64_t llc = llc_bytes(), rsmall = llc / 2 < 16 * BU_MiB ? llc / 2 : 16 * BU_MiB;
	uint64_t rbig = out_of_llc_bytes(llc);
	uint64_t hbig = bo.quick ? 64 * BU_MiB : 128 * BU_MiB;

	printf("\nread: warm reads: files of %s (in the CPU's cache: half the LLC, 16 MiB at most) and %s (out of "
	       "it: %s); hits: %s and %s\n", bu_human(rsmall), bu_human(rbig), llc_why, bu_human(rsmall),
	       bu_human(hbig));
	bu_join(path, sizeof(path), bo.dir, "pcbench-random.dat");
	prog_step_timed("a. 4 KiB random reads, warm", "kernel, pagecache", (uint64_t)(4 * bo.seconds * 1e9),
			NULL, NULL);
	bench_random_reads(path, rsmall, NULL);
	bench_random_reads(path, rbig, llc_why);
	prog_step_done();
	prog_step_timed("h. 4 KiB hits", "memcpy, kernel, pagecache", (uint64_t)(2 * bo.seconds * 1e9), NULL,
			NULL);
	bench_hits(path, rsmall);
	bench_hits(path, hbig);
	prog_step_done();
	unlink(path);
	report_pairs("read");
}
