/*
 * small_files.c - suite files, the old pcbench's f: many small files
 * (issue 14), FILES_N files of FILES_BYTES created, written and closed one
 * after another, then each reopened, read whole and closed, the kernel
 * first, then pagecache, each alone (see files_side_by_side).  Files per
 * second; target >= 0.8x for both.  The kernel's files are closed without
 * fsync (its close does not wait), and so are pagecache's (pc_close
 * leaves write-back to the flusher); pagecache's are checked on the
 * device after pc_cache_destroy (not timed).  As root, on a fresh XFS and
 * a fresh ext4 made for the run (scratchfs.c), else on --dir's file
 * system as it is.  --only selects the sides.
 */
#include "bench.h"

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

/* One file of f1 (create: created, written and closed) or f2 (reopened,
 * read whole and closed) through the kernel, each call timed into fc. */
static void files_kernel_one(const char *path, char *buf, bool create, struct files_calls *fc)
{
	uint64_t t = bu_now_ns();
	int fd = open(path, create ? O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0644);

	fc->open_ns += files_lap(&t);
	if (fd < 0 || (create ? write(fd, buf, FILES_BYTES) : read(fd, buf, FILES_BYTES)) != FILES_BYTES)
		bu_die("kernel files %s:", path);
	fc->io_ns += files_lap(&t);
	if (close(fd) != 0)
		bu_die("kernel files %s:", path);
	fc->close_ns += files_lap(&t);
}

/* The same through pagecache's cache c; false after a failure (noted in
 * p). */
static bool files_pc_one(const struct pair *p, struct pc_cache *c, const char *path, char *buf, bool create,
			 struct files_calls *fc)
{
	uint64_t t = bu_now_ns();
	struct pc_file *f = pc_open(c, path, create ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, create ? 0644 : 0);

	fc->open_ns += files_lap(&t);
	if (!f) {
		pair_fail(p, create ? "pc_open(O_CREAT)" : "pc_open(O_RDONLY)");
		return false;
	}
	ssize_t n = create ? pc_pwrite(f, buf, FILES_BYTES, 0, 0) : pc_pread(f, buf, FILES_BYTES, 0, 0);
	if (create && n != FILES_BYTES) {
		pair_fail(p, "pc_pwrite");
		pc_close(f);
		return false;
	}
	fc->io_ns += files_lap(&t);
	if (pc_close(f) != 0 || n != FILES_BYTES) {
		pair_fail(p, create ? "pc_close" : "pc_pread/pc_close");
		return false;
	}
	fc->close_ns += files_lap(&t);
	return true;
}

/* One side (0 kernel, 1 pagecache in c) of f1 (phase 0: FILES_N files
 * created, written and closed one after another) or f2 (phase 1: each
 * reopened, read whole and closed); seconds, NAN after a failure. */
static double files_side(const struct pair *p, struct pc_cache *c, char *buf, unsigned phase, unsigned side)
{
	char path[PATH_MAX];
	struct files_calls *fc = &files_calls[phase][side];
	bool create = phase == 0;
	uint64_t t0 = bu_now_ns();

	for (unsigned i = 0; i < FILES_N; i++) {
		files_path(path, sizeof(path), side ? "pcbench-files-pagecache" : "pcbench-files-kernel", i);
		if (create)
			files_fill(buf, i);
		if (!side)
			files_kernel_one(path, buf, create, fc);
		else if (!files_pc_one(p, c, path, buf, create, fc))
			return NAN;
		prog_advance(1);
	}
	return bu_secs(bu_now_ns() - t0);
}

/* The per-call figures of one phase, appended to its line's note, of
 * each side that ran. */
static void note_files_calls(const struct pair *p, unsigned phase, const char *io)
{
	static const char *const side[2] = { "kernel", "pagecache" };
	const struct bres *ran[2] = { p->base, p->pc };
	double n = FILES_N * 1e3; /* ns summed over FILES_N files -> us per file */
	bool first = true;

	for (int s = 0; s < 2; s++) {
		const struct files_calls *fc = &files_calls[phase][s];

		if (!ran[s])
			continue;
		pair_note(p, "%s%s open %.2f us, %s %.2f us, close %.2f us", first ? "per file: " : "", side[s],
			  fc->open_ns / n, io, fc->io_ns / n, fc->close_ns / n);
		first = false;
	}
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
static void files_side_by_side(const struct pair *p, struct pc_cache *c, char *buf, unsigned phase)
{
	const char *name = pair_noted(p)->workload;

	if (c) {
		prog_step_timed(name, "settling", 1500000000ull, NULL, NULL);
		files_wait_idle(c);
		prog_step_done();
	}
	prog_step_count(name, "kernel, then pagecache", ((p->base != NULL) + (p->pc != NULL)) * FILES_N, "files");
	if (p->base)
		res_figure(p->base, FILES_N / files_side(p, NULL, buf, phase, 0));
	if (p->pc) {
		/* The kernel's run leaves its files dirty and its journal
		 * full: its write-back would otherwise run during pagecache's
		 * run and be timed there (pagecache's own has ended before
		 * the kernel's run, above). */
		files_sync_dir();
		double tp = files_side(p, c, buf, phase, 1);
		res_figure(p->pc, isnan(tp) ? NAN : FILES_N / tp);
	}
	prog_step_done();
}

/* After f1 and f2: pagecache's cache destroyed and its files checked on
 * the device (untimed). */
static void files_destroy_verify(const struct pair *f1, struct pc_cache *c, char *buf)
{
	bool synced_here;

	prog_step_timed("f. small files", "destroy, verify", 2000000000ull, NULL, NULL);
	if (pc_cache_destroy(c) != 0)
		pair_fail(f1, "pc_cache_destroy");
	unsigned bad = files_verify(buf, buf + FILES_BYTES + 1, &synced_here);
	prog_step_done();
	pair_note(f1, "after pc_cache_destroy%s, %u of %u files differ on the device or were left unwritten",
		  synced_here ? " and a syncfs (no cachestat(2) here)" : "", bad, FILES_N);
	if (bad)
		res_figure(f1->pc, NAN);
}

/* f1 and f2 on the file system of files_top, `fs` naming it in the lines. */
static void bench_small_files(const char *fs)
{
	char n1[96], n2[96];

	snprintf(n1, sizeof(n1), "f1. create+write+close %u x %u B%s%s", FILES_N, FILES_BYTES, *fs ? ", " : "", fs);
	snprintf(n2, sizeof(n2), "f2. reopen+read+close %u x %u B%s%s", FILES_N, FILES_BYTES, *fs ? ", " : "", fs);
	struct pair f1 = pair_add("files", n1, "files/s", "kernel-buffered", "pagecache-buffered");
	struct pair f2 = pair_add("files", n2, "files/s", "kernel-buffered", "pagecache-buffered");
	char *buf = malloc(2 * FILES_BYTES + 2);
	struct pc_cache *c = NULL;
	struct pc_stats s0, s1, d;

	if (!buf)
		bu_die("out of memory");
	files_remove();
	files_mkdirs();
	memset(files_calls, 0, sizeof(files_calls));
	if (f1.pc && !(c = pair_cache(&f1, 0, (size_t)-1)))
		goto out;
	files_side_by_side(&f1, c, buf, 0);
	if (c)
		pc_cache_stats(c, &s0);
	if (!f1.pc || !isnan(f1.pc->value))
		files_side_by_side(&f2, c, buf, 1);
	else
		res_figure(f2.pc, NAN);
	if (c) {
		pc_cache_stats(c, &s1);
		bench_stats_delta(&d, &s0, &s1);
		pair_note_io(&f2, "from the end of f1 to the end of f2 (f1's files written back while settling)", &d);
		files_destroy_verify(&f1, c, buf);
	}
	note_files_calls(&f1, 0, "write");
	note_files_calls(&f2, 1, "read");
out:
	pair_judge(&f1, 0.8, ">= 0.8x");
	pair_judge(&f2, 0.8, ">= 0.8x");
	files_remove();
	free(buf);
}

void suite_files(void)
{
	if (!name_selected("kernel-buffered") && !name_selected("pagecache-buffered")) {
		printf("\n(files: not run: --only selects none of its paths)\n");
		return;
	}
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
	report_pairs("files");
}
