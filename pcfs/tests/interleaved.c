/*
 * interleaved.c - 32 threads write interleaved records of a size that is
 * not a multiple of 4 KiB to one file (record i by thread i % 32), fsync,
 * and the mount's counters must show no device read for any of it (the
 * neighbouring records complete each partial block: the "reads per
 * write" of pcbench's interleaved suite, expected 0.000) and nothing left
 * cached.  Then every record is read back and checked.  Run on a pcfs
 * mount with -o uncached=always.
 *
 *   pcfs-interleaved MOUNTPOINT RECORD_SIZE RECORDS
 *   pcfs-interleaved --kernel-dontcache DIR RECORD_SIZE RECORDS
 *
 * The second form is the comparison for scripts/pcfs-bench.sh: the same
 * writes with pwritev2(RWF_DONTCACHE) on a directory of a kernel file
 * system (no counters checked).  Both print MiB/s (writes and fsync).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 32

static const char *mnt;
static size_t rec;
static unsigned nrec;
static int fd;
static int rwf; /* RWF_DONTCACHE for the kernel comparison */

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif

static uint8_t byte_of(unsigned r, size_t i)
{
	return (uint8_t)(r * 131 + i * 7 + 1);
}

static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint8_t *b = malloc(rec);
	for (unsigned r = t; r < nrec; r += THREADS) {
		for (size_t i = 0; i < rec; i++)
			b[i] = byte_of(r, i);
		struct iovec v = { b, rec };
		if (pwritev2(fd, &v, 1, (off_t)r * (off_t)rec, rwf) != (ssize_t)rec) {
			perror("pwrite");
			exit(1);
		}
	}
	free(b);
	return NULL;
}

/* A counter from MOUNTPOINT/.pcfs-stats. */
static double stat_of(const char *key)
{
	char p[4096], line[256], k[128];
	snprintf(p, sizeof(p), "%s/.pcfs-stats", mnt);
	FILE *f = fopen(p, "r");
	double v = -1;
	if (!f) {
		perror(p);
		exit(1);
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %lf", k, &v) == 2 && !strcmp(k, key))
			break;
		else
			v = -1;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	bool kernel = argc == 5 && !strcmp(argv[1], "--kernel-dontcache");
	if (kernel) {
		rwf = RWF_DONTCACHE;
		argv++;
		argc--;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: pcfs-interleaved [--kernel-dontcache] DIR RECORD_SIZE RECORDS\n");
		return 2;
	}
	mnt = argv[1];
	rec = strtoul(argv[2], NULL, 10);
	nrec = (unsigned)strtoul(argv[3], NULL, 10);
	char path[4096];
	snprintf(path, sizeof(path), "%s/interleaved.%zu", mnt, rec);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	double reads0 = kernel ? 0 : stat_of("dev_read_bytes"), writes0 = kernel ? 0 : stat_of("fuse_writes");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t th[THREADS];
	for (unsigned t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	if (fsync(fd) != 0) {
		perror("fsync");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("MiB/s %.1f\n", (double)rec * nrec / secs / 1048576.0);
	if (kernel) {
		close(fd);
		unlink(path);
		return 0;
	}
	double reads = stat_of("dev_read_bytes") - reads0, writes = stat_of("fuse_writes") - writes0;
	double cached = stat_of("cached_bytes");
	double rpw = writes > 0 ? reads / 4096.0 / writes : -1;
	printf("records of %zu bytes: %u, write requests %.0f, device reads per write %.3f, cached after fsync %.0f\n",
	       rec, nrec, writes, rpw, cached);
	int bad = 0;
	if (writes < nrec || rpw < 0 || rpw >= 0.0005) {
		fprintf(stderr, "FAIL: device reads per write %.4f (want 0.000)\n", rpw);
		bad = 1;
	}
	if (cached != 0) {
		fprintf(stderr, "FAIL: %.0f bytes still cached after fsync\n", cached);
		bad = 1;
	}
	uint8_t *b = malloc(rec);
	for (unsigned r = 0; r < nrec; r++) {
		if (pread(fd, b, rec, (off_t)r * (off_t)rec) != (ssize_t)rec) {
			perror("pread");
			return 1;
		}
		for (size_t i = 0; i < rec; i++)
			if (b[i] != byte_of(r, i)) {
				fprintf(stderr, "FAIL: record %u byte %zu differs\n", r, i);
				return 1;
			}
	}
	free(b);
	close(fd);
	unlink(path);
	return bad;
}
