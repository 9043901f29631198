/*
 * benchutil.h - helpers of the benchmark program pcbench (tools/pcbench/).
 *
 * Header-only on purpose: the build makes one executable of every .c file in tools/,
 * so shared code cannot live in a .c file of its own.  Everything here is
 * `static` and marked unused so that a program using only part of it builds
 * without warnings.
 *
 * Contents: timing, a small PRNG, size parsing ("64M", "1G", "47008"),
 * aligned buffers, sorting and percentiles, dropping the kernel's cache of a
 * file, the backing block device's read-sector counter, kernel residency of a
 * file (mincore), /proc/meminfo fields, and a description of the run
 * (command line, file system, device, kernel).
 */
#ifndef PC_BENCHUTIL_H
#define PC_BENCHUTIL_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define BU_UNUSED __attribute__((unused))

#define BU_KiB ((uint64_t)1024)
#define BU_MiB ((uint64_t)1024 * 1024)
#define BU_GiB ((uint64_t)1024 * 1024 * 1024)

/* ------------------------------------------------------------ messages */

BU_UNUSED __attribute__((format(printf, 1, 2), noreturn))
static void bu_die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fflush(stdout);
	/* every message names the program, as the others do ("pcbench: ...") */
	if (strncmp(fmt, "pcbench", 7) != 0)
		fputs("pcbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (fmt[0] && fmt[strlen(fmt) - 1] == ':')
		fprintf(stderr, " %s (errno %d)", strerror(e), e);
	fputc('\n', stderr);
	exit(2);
}

BU_UNUSED __attribute__((format(printf, 1, 2)))
static void bu_warn(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fflush(stdout);
	/* every message names the program, as the others do ("pcbench: ...") */
	if (strncmp(fmt, "pcbench", 7) != 0)
		fputs("pcbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (fmt[0] && fmt[strlen(fmt) - 1] == ':')
		fprintf(stderr, " %s (errno %d)", strerror(e), e);
	fputc('\n', stderr);
	errno = e;
}

/* -------------------------------------------------------------- timing */

BU_UNUSED static uint64_t bu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

BU_UNUSED static double bu_secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

BU_UNUSED static void bu_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* ---------------------------------------------------------------- PRNG */

/* xorshift64*: fast, good enough to pick offsets; never returns with state 0. */
struct bu_rng {
	uint64_t s;
};

BU_UNUSED static void bu_rng_seed(struct bu_rng *r, uint64_t seed)
{
	r->s = seed ? seed : 0x9e3779b97f4a7c15ull;
}

BU_UNUSED static uint64_t bu_rng_next(struct bu_rng *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias is negligible). */
BU_UNUSED static uint64_t bu_rng_below(struct bu_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bu_rng_next(r) * n) >> 64);
}

BU_UNUSED static void bu_fill_random(void *buf, size_t len, uint64_t seed)
{
	struct bu_rng r;
	uint8_t *p = buf;
	size_t i;

	bu_rng_seed(&r, seed);
	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = bu_rng_next(&r);
		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)bu_rng_next(&r);
}

/* ------------------------------------------------------- size parsing */

/*
 * "4096", "64K", "64k", "64M", "64MiB", "1G", "1.5G", "2T": binary units.
 * Returns 0 and sets *out, or -1 on a malformed or overflowing value.
 */
BU_UNUSED static int bu_parse_size(const char *s, uint64_t *out)
{
	char *end;
	double mult = 1;
	double v;

	if (!s || !*s)
		return -1;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '-')
		return -1;
	errno = 0;
	if (strpbrk(s, ".eE")) {
		v = strtod(s, &end);
	} else {
		unsigned long long u = strtoull(s, &end, 10);
		v = (double)u;
		if (!*end) {
			if (errno)
				return -1;
			*out = u;
			return end == s ? -1 : 0;
		}
	}
	if (errno || end == s)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': mult = 1024.0; end++; break;
	case 'M': mult = 1024.0 * 1024; end++; break;
	case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
	case 'B': break;
	default: return -1;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -1;
	v *= mult;
	if (v < 0 || v >= 18446744073709551615.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/* As bu_parse_size, exiting with a message naming the option on error. */
BU_UNUSED static uint64_t bu_size_arg(const char *opt, const char *s)
{
	uint64_t v;

	if (bu_parse_size(s, &v) < 0)
		bu_die("%s: bad size '%s' (examples: 4096, 64K, 256M, 1G)", opt,
		       s ? s : "");
	return v;
}

/*
 * "47008,6000,49152" -> sizes.  Returns the count (at most max), exits on a
 * malformed list.
 */
BU_UNUSED static int bu_size_list_arg(const char *opt, const char *s,
				      uint64_t *out, int max)
{
	char *copy = strdup(s ? s : "");
	char *save = NULL, *tok;
	int n = 0;

	if (!copy)
		bu_die("out of memory");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			bu_die("%s: at most %d values", opt, max);
		out[n++] = bu_size_arg(opt, tok);
	}
	free(copy);
	if (n == 0)
		bu_die("%s: empty list", opt);
	return n;
}

/* "64 MiB", "1.50 GiB", "47008 B": exact multiples without decimals.  A
 * static buffer per call, rotating over 8, so a printf may use up to 8. */
BU_UNUSED static const char *bu_human(uint64_t bytes)
{
	static const struct { uint64_t unit; const char *name; } u[] = {
		{ BU_GiB, "GiB" }, { BU_MiB, "MiB" }, { BU_KiB, "KiB" },
	};
	static char bufs[8][32];
	static unsigned slot;
	char *b = bufs[slot++ % 8];
	size_t i;

	for (i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		if (bytes < u[i].unit)
			continue;
		if (bytes % u[i].unit == 0)
			snprintf(b, 32, "%" PRIu64 " %s", bytes / u[i].unit, u[i].name);
		else
			snprintf(b, 32, "%.2f %s", (double)bytes / (double)u[i].unit,
				 u[i].name);
		return b;
	}
	snprintf(b, 32, "%" PRIu64 " B", bytes);
	return b;
}

/* ------------------------------------------------------------- buffers */

/* Zeroed memory aligned to `align` (a power of two >= sizeof(void *)). */
BU_UNUSED static void *bu_alloc_aligned(size_t len, size_t align)
{
	void *p = NULL;
	int e = posix_memalign(&p, align, len ? len : align);

	if (e) {
		errno = e;
		bu_die("posix_memalign(%zu, %zu):", len, align);
	}
	memset(p, 0, len);
	return p;
}

/* ------------------------------------------------------ percentiles */

static int bu_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

BU_UNUSED static void bu_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), bu_cmp_u64);
}

BU_UNUSED static int bu_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (upper one of an even n); sorts v. */
BU_UNUSED static double bu_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bu_cmp_double);
	return v[n / 2];
}

/* Nearest-rank percentile of a sorted array, p in [0, 100]. */
BU_UNUSED static uint64_t bu_percentile(const uint64_t *sorted, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	if (p <= 0)
		return sorted[0];
	rank = (size_t)((p / 100.0) * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

/* ---------------------------------------------------- kernel page cache */

/*
 * Write `s` to /proc/sys/vm/drop_caches ("3": page cache, dentries and
 * inodes).  Only clean pages go, so callers fsync first.  Returns 0 when the
 * kernel accepted it, -1 otherwise (not root, read-only /proc, container).
 */
BU_UNUSED static int bu_drop_caches_global(void)
{
	int fd, ok;

	if (geteuid() != 0)
		return -1;
	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, "3\n", 2) == 2;
	close(fd);
	return ok ? 0 : -1;
}

/*
 * Drop the kernel's cache of one file: fdatasync (so its pages are clean),
 * posix_fadvise(DONTNEED) over the whole file and, if `global` and we are
 * root, drop_caches as well.  A missing file is not an error.  Returns 1 if
 * the global drop worked, 0 if only the fadvise was done, -1 on error.
 */
BU_UNUSED static int bu_drop_file_cache(const char *path, bool global)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0) {
		if (errno == ENOENT)
			return global && bu_drop_caches_global() == 0 ? 1 : 0;
		return -1;
	}
	(void)fdatasync(fd);
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
		ret = -1;
	close(fd);
	if (ret == 0 && global && bu_drop_caches_global() == 0)
		ret = 1;
	return ret;
}

/*
 * Bytes of the file resident in the kernel page cache (mmap + mincore,
 * counting pages of the system page size).  -1 on error; 0 for an empty file.
 */
BU_UNUSED static int64_t bu_kernel_resident_bytes(const char *path)
{
	long psz = sysconf(_SC_PAGESIZE);
	struct stat st;
	unsigned char *vec;
	int64_t res = 0;
	size_t npages, i;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	if (st.st_size == 0) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	npages = ((size_t)st.st_size + (size_t)psz - 1) / (size_t)psz;
	vec = malloc(npages);
	if (!vec) {
		munmap(map, (size_t)st.st_size);
		return -1;
	}
	if (mincore(map, (size_t)st.st_size, vec) < 0) {
		res = -1;
	} else {
		for (i = 0; i < npages; i++)
			res += vec[i] & 1;
		res *= psz;
	}
	free(vec);
	munmap(map, (size_t)st.st_size);
	return res;
}

/* ------------------------------------------------ block device counters */

/*
 * The block device a path lives on: /sys/dev/block/MAJ:MIN/stat of its
 * st_dev (for a partition that is the partition's own counters).  Fills
 * `statpath` and returns 0, or -1 if there is no such file (overlayfs, tmpfs,
 * NFS: an anonymous device).
 */
BU_UNUSED static int bu_dev_stat_path(const char *path, char *statpath, size_t len)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -1;
	snprintf(statpath, len, "/sys/dev/block/%u:%u/stat", major(st.st_dev),
		 minor(st.st_dev));
	return access(statpath, R_OK) == 0 ? 0 : -1;
}

/*
 * Field 3 of a block device stat file: sectors read (512-byte units,
 * whatever the device's sector size).  -1 if unreadable.
 */
BU_UNUSED static int64_t bu_dev_read_sectors(const char *statpath)
{
	unsigned long long f[3];
	FILE *fp;
	int n;

	if (!statpath || !*statpath)
		return -1;
	fp = fopen(statpath, "re");
	if (!fp)
		return -1;
	n = fscanf(fp, "%llu %llu %llu", &f[0], &f[1], &f[2]);
	fclose(fp);
	return n == 3 ? (int64_t)f[2] : -1;
}

/*
 * Bytes this process (all its threads, io_uring workers included) caused to
 * be read from block devices: read_bytes of /proc/self/io, counted when a
 * read is submitted to the block layer.  Unlike the device counters it is
 * not disturbed by other programs using the same disk.  -1 if unavailable.
 */
BU_UNUSED static int64_t bu_proc_read_bytes(void)
{
	char line[128];
	int64_t v = -1;
	FILE *fp = fopen("/proc/self/io", "re");

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		if (strncmp(line, "read_bytes:", 11) == 0)
			v = strtoll(line + 11, NULL, 10);
	fclose(fp);
	return v;
}

/* ----------------------------------------------------------- /proc/meminfo */

/* Sum of the named /proc/meminfo fields ("Dirty", "Writeback"), in bytes, or
 * -1.  names is NULL-terminated. */
BU_UNUSED static int64_t bu_meminfo_bytes(const char *const *names)
{
	char line[256];
	int64_t sum = 0;
	int found = 0;
	FILE *fp = fopen("/proc/meminfo", "re");

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		char *colon = strchr(line, ':');
		int i;

		if (!colon)
			continue;
		*colon = '\0';
		for (i = 0; names[i]; i++) {
			if (strcmp(line, names[i]) == 0) {
				sum += strtoll(colon + 1, NULL, 10) * 1024;
				found++;
			}
		}
	}
	fclose(fp);
	return found ? sum : -1;
}

/* ------------------------------------------------------ describing a run */

BU_UNUSED static void bu_print_cmdline(int argc, char **argv)
{
	int i;

	printf("command:");
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool plain = *a != '\0';
		const char *p;

		for (p = a; *p; p++)
			if (!isalnum((unsigned char)*p) && !strchr("-_./=,:+@%", *p))
				plain = false;
		if (plain) {
			printf(" %s", a);
		} else {
			printf(" '");
			for (p = a; *p; p++) {
				if (*p == '\'')
					printf("'\\''");
				else
					putchar(*p);
			}
			putchar('\'');
		}
	}
	putchar('\n');
}

BU_UNUSED static const char *bu_fs_name(unsigned long type)
{
	switch (type) {
	case 0xEF53: return "ext2/3/4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case 0x794c7630: return "overlayfs";
	case 0x6969: return "nfs";
	case 0x65735546: return "fuse";
	case 0x2FC12FC1: return "zfs";
	case 0xF2F52010: return "f2fs";
	case 0x858458f6: return "ramfs";
	case 0x4d44: return "vfat";
	case 0x5346544e: return "ntfs";
	case 0xCA451A4E: return "bcachefs";
	default: return "unknown";
	}
}

/*
 * Prints the file system of `dir` (statfs f_type and its mountinfo line: the
 * mount with the same device whose mount point is the longest prefix of the
 * directory's real path), its block device counters file, and the kernel.
 */
BU_UNUSED static void bu_print_environment(const char *dir)
{
	char real[PATH_MAX], best[1024] = "", line[1024], statpath[128];
	size_t bestlen = 0;
	struct statfs sfs;
	struct utsname u;
	struct stat st;
	FILE *fp;

	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	if (statfs(dir, &sfs) == 0)
		printf("dir: %s  file system: %s (f_type 0x%lx, f_bsize %ld)\n", real,
		       bu_fs_name((unsigned long)sfs.f_type),
		       (unsigned long)sfs.f_type, (long)sfs.f_bsize);
	else
		printf("dir: %s  file system: statfs failed: %s\n", real, strerror(errno));
	if (stat(dir, &st) == 0 && (fp = fopen("/proc/self/mountinfo", "re"))) {
		char want[32];

		snprintf(want, sizeof(want), "%u:%u", major(st.st_dev), minor(st.st_dev));
		while (fgets(line, sizeof(line), fp)) {
			char id[32], mnt[PATH_MAX];
			size_t ml;

			if (sscanf(line, "%*s %*s %31s %*s %4095s", id, mnt) != 2)
				continue;
			if (strcmp(id, want) != 0)
				continue;
			ml = strlen(mnt);
			if (strncmp(real, mnt, ml) != 0 ||
			    (ml > 1 && real[ml] != '\0' && real[ml] != '/'))
				continue;
			if (ml >= bestlen) {
				bestlen = ml;
				snprintf(best, sizeof(best), "%s", line);
			}
		}
		fclose(fp);
		best[strcspn(best, "\n")] = '\0';
		printf("mount: %s\n", best[0] ? best : "(not found in /proc/self/mountinfo)");
	}
	if (bu_dev_stat_path(dir, statpath, sizeof(statpath)) == 0)
		printf("device counters: %s\n", statpath);
	else
		printf("device counters: n/a (no /sys/dev/block entry for the device of %s)\n", dir);
	if (uname(&u) == 0)
		printf("kernel: %s %s %s %s\n", u.sysname, u.release, u.version, u.machine);
	printf("cpus online: %ld, euid: %u\n", sysconf(_SC_NPROCESSORS_ONLN),
	       (unsigned)geteuid());
}

/* path = dir + "/" + name, exits if it does not fit. */
BU_UNUSED static void bu_join(char *out, size_t len, const char *dir, const char *name)
{
	if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len)
		bu_die("path too long: %s/%s", dir, name);
}

/* Make `dir` (one level) if it does not exist. */
BU_UNUSED static void bu_mkdir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			bu_die("%s is not a directory", dir);
		return;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		bu_die("mkdir %s:", dir);
}

/* Write `len` bytes of a pattern to `path` (created or truncated) with a
 * normal descriptor in 1 MiB writes, then fsync.  Exits on error. */
BU_UNUSED static void bu_make_file(const char *path, uint64_t len, uint64_t seed)
{
	size_t chunk = BU_MiB;
	char *buf = bu_alloc_aligned(chunk, 4096);
	uint64_t off = 0;
	int fd;

	bu_fill_random(buf, chunk, seed);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		bu_die("open %s:", path);
	while (off < len) {
		size_t n = len - off < chunk ? (size_t)(len - off) : chunk;
		ssize_t w = pwrite(fd, buf, n, (off_t)off);

		if (w < 0)
			bu_die("pwrite %s at %" PRIu64 ":", path, off);
		off += (uint64_t)w;
		buf[0]++; /* not all chunks alike */
	}
	if (fsync(fd) < 0)
		bu_die("fsync %s:", path);
	close(fd);
	free(buf);
}

#endif /* PC_BENCHUTIL_H */
