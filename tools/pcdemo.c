/*
 * pcdemo - a small tour of the pagecache public API.
 *
 *   pcdemo [PATH]        (default: demo.dat in the current directory)
 *
 * Creates a cache with the default configuration, writes 8 MiB to PATH in
 * writes of odd sizes at odd offsets (some buffered, some PC_DONTCACHE, a few
 * overwrites), reads it all back in reads of odd sizes and compares, fsyncs,
 * prints the cache's counters, closes and destroys the cache.
 *
 * The file system of PATH must support O_DIRECT (tmpfs does not; the build
 * tree on ext4/xfs does).  Exit status 0 on success, 1 on any error or
 * mismatch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagecache.h"

#define DEMO_SIZE (8u << 20)

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* A size from 1 byte to about 96 KiB, rarely a multiple of 4 KiB. */
static size_t odd_size(void)
{
	return 1 + (size_t)(rnd() % (96 * 1024));
}

static void fill(unsigned char *p, size_t len, uint64_t off, unsigned gen)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;
		p[i] = (unsigned char)((o * 131u) ^ (o >> 9) ^ (gen * 0x5bu));
	}
}

static int write_all(struct pc_file *f, const unsigned char *buf, size_t len, uint64_t off, int flags)
{
	ssize_t n = pc_pwrite(f, buf, len, (off_t)off, flags);

	if (n < 0) {
		fprintf(stderr, "pcdemo: pc_pwrite(%zu bytes at %" PRIu64 "): %s\n", len, off,
			strerror(errno));
		return -1;
	}
	if ((size_t)n != len) {
		fprintf(stderr, "pcdemo: pc_pwrite short: %zd of %zu bytes at %" PRIu64 "\n", n, len, off);
		return -1;
	}
	return 0;
}

static void print_stats(const struct pc_stats *s)
{
	static const char *const rule = "  ------------------------  --------------------";
	struct row {
		const char *name;
		uint64_t value;
	} rows[] = {
		{ "dev_read_ios", s->dev_read_ios },
		{ "dev_read_bytes", s->dev_read_bytes },
		{ "dev_write_ios", s->dev_write_ios },
		{ "dev_write_bytes", s->dev_write_bytes },
		{ "cached_bytes", s->cached_bytes },
		{ "dirty_bytes", s->dirty_bytes },
		{ "dirty_uncached_bytes", s->dirty_uncached_bytes },
		{ "peak_dirty_bytes", s->peak_dirty_bytes },
		{ "writeback_bytes", s->writeback_bytes },
		{ "folios", s->folios },
		{ "evictions", s->evictions },
		{ "dropbehind_drops", s->dropbehind_drops },
		{ "edge_kept", s->edge_kept },
		{ "edge_completed", s->edge_completed },
		{ "edge_expired", s->edge_expired },
		{ "edge_evicted_budget", s->edge_evicted_budget },
		{ "deferred_rmw", s->deferred_rmw },
		{ "rmw_reads", s->rmw_reads },
		{ "hit_bytes", s->hit_bytes },
		{ "miss_bytes", s->miss_bytes },
		{ "throttle_waits", s->throttle_waits },
		{ "throttle_pauses", s->throttle_pauses },
		{ "flusher_kicks", s->flusher_kicks },
		{ "write_errors", s->write_errors },
		{ "io_uring", s->io_uring },
	};

	printf("  %-24s  %20s\n", "counter", "value");
	puts(rule);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("  %-24s  %20" PRIu64 "\n", rows[i].name, rows[i].value);
	puts(rule);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "demo.dat";
	struct pc_config cfg;
	struct pc_cache *cache;
	struct pc_file *f;
	struct pc_stats st;
	unsigned char *expect, *buf;
	uint64_t off;
	unsigned nwrites = 0, nreads = 0;
	int rc = 1;

	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
		fprintf(stderr, "usage: %s [PATH]   (default demo.dat)\n", argv[0]);
		return argc > 2 ? 1 : 0;
	}

	expect = malloc(DEMO_SIZE);
	buf = malloc(DEMO_SIZE);
	if (!expect || !buf) {
		fprintf(stderr, "pcdemo: out of memory\n");
		return 1;
	}

	pc_config_init(&cfg);
	cache = pc_cache_new(&cfg);
	if (!cache) {
		fprintf(stderr, "pcdemo: pc_cache_new: %s\n", strerror(errno));
		return 1;
	}
	f = pc_open(cache, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f) {
		int e = errno;
		fprintf(stderr, "pcdemo: pc_open(%s): %s\n", path, strerror(e));
		if (e == EINVAL)
			fprintf(stderr, "pcdemo: does the file system support O_DIRECT? "
					"(tmpfs does not; try a path on ext4 or xfs)\n");
		pc_cache_destroy(cache);
		goto out_free;
	}

	/* 1. Sequential writes of odd sizes; every third one uncached. */
	for (off = 0; off < DEMO_SIZE; nwrites++) {
		size_t len = odd_size();
		if (len > DEMO_SIZE - off)
			len = DEMO_SIZE - off;
		fill(expect + off, len, off, 0);
		if (write_all(f, expect + off, len, off, nwrites % 3 == 2 ? PC_DONTCACHE : 0))
			goto out_close;
		off += len;
	}
	/* 2. Overwrites at random unaligned offsets. */
	for (unsigned i = 0; i < 64; i++, nwrites++) {
		size_t len = odd_size();
		uint64_t at = rnd() % (DEMO_SIZE - len);
		fill(expect + at, len, at, i + 1);
		if (write_all(f, expect + at, len, at, i % 2 ? PC_DONTCACHE : 0))
			goto out_close;
	}
	if (pc_size(f) != (off_t)DEMO_SIZE) {
		fprintf(stderr, "pcdemo: pc_size is %jd, expected %u\n", (intmax_t)pc_size(f), DEMO_SIZE);
		goto out_close;
	}

	/* 3. Read it back in odd sizes and compare. */
	memset(buf, 0xee, DEMO_SIZE);
	for (off = 0; off < DEMO_SIZE; nreads++) {
		size_t len = odd_size();
		ssize_t n;
		if (len > DEMO_SIZE - off)
			len = DEMO_SIZE - off;
		n = pc_pread(f, buf + off, len, (off_t)off, 0);
		if (n < 0) {
			fprintf(stderr, "pcdemo: pc_pread(%zu at %" PRIu64 "): %s\n", len, off, strerror(errno));
			goto out_close;
		}
		if ((size_t)n != len) {
			fprintf(stderr, "pcdemo: pc_pread short: %zd of %zu at %" PRIu64 "\n", n, len, off);
			goto out_close;
		}
		off += len;
	}
	if (memcmp(buf, expect, DEMO_SIZE) != 0) {
		size_t i = 0;
		while (buf[i] == expect[i])
			i++;
		fprintf(stderr, "pcdemo: MISMATCH at byte %zu: read 0x%02x, wrote 0x%02x\n", i, buf[i],
			expect[i]);
		goto out_close;
	}

	/* 4. Make it durable. */
	if (pc_fsync(f) != 0) {
		fprintf(stderr, "pcdemo: pc_fsync: %s\n", strerror(errno));
		goto out_close;
	}

	printf("pcdemo: %s: %u writes and %u reads of odd sizes, %u bytes verified\n", path, nwrites,
	       nreads, DEMO_SIZE);
	pc_cache_stats(cache, &st);
	print_stats(&st);
	rc = 0;

out_close:
	if (pc_close(f) != 0) {
		fprintf(stderr, "pcdemo: pc_close: %s\n", strerror(errno));
		rc = 1;
	}
	if (pc_cache_destroy(cache) != 0) {
		fprintf(stderr, "pcdemo: pc_cache_destroy: %s\n", strerror(errno));
		rc = 1;
	}
out_free:
	free(expect);
	free(buf);
	return rc;
}
