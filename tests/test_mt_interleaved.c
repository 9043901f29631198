/*
 * test_mt_interleaved.c - the interleaved-records workload (pcbench
 * interleaved) at small scale: uncached writers whose records share
 * blocks neither read the device nor leave anything cached.
 *
 * THREADS threads write records of R bytes to one file: record i at offset
 * i*R, by thread i mod THREADS, each thread in increasing order, until the
 * file holds about PC_IL_MIB MiB (default 32; 8 under TSan; a quarter of
 * that with PC_TEST_QUICK).  Records of 6000 and 47008 bytes share a block
 * with each neighbour at almost every boundary, so a cache that drops the
 * shared block after the first neighbour's writeback must read it back for
 * the second.
 *
 * A case is a pass, in a fresh cache, of one record size and one way of
 * writing: PC_DONTCACHE, PC_DONTCACHE|PC_DSYNC or PC_DIRECT (unaligned:
 * aligned middle direct, ends uncached), on a new file or over a file that
 * already holds other data (written and synced with plain I/O beforehand:
 * the deferred read-modify-write case).
 *
 * Checked: every write returns R; the file content (read with plain
 * O_DIRECT) is exactly the records; nothing is cached after the final fsync
 * (every drop-behind folio went when its writeback completed, and fsync
 * drops the lone edges no neighbour completed); and, from the library's own
 * counters, zero device reads (dev_read_ios and rmw_reads) for every pass
 * on a new file and for the PC_DONTCACHE pass over existing data:
 * uncached writers that together complete every block they touch need to
 * read nothing.  The other passes over existing data report their read counts
 * (PC_DSYNC must read a block it completes only partly; the no-reads goal
 * there is for writes without PC_DSYNC).
 *
 * Edge and dirty expiry are set long (30 s) so that only the edge and
 * deferred-RMW mechanisms are measured, not how a slow run (TSan) ages
 * data; the pass prints the times.
 */
#include "testutil.h"

#include "api/internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define THREADS 8

TEST_SCRATCH_DIR("interleaved")

/* ------------------------------------------------------------- writers */

struct writer {
	pthread_t tid;
	struct pc_file *h;
	size_t rec;
	int flags;
	uint64_t nrec;
	unsigned t;
	uint64_t seed;
	uint64_t failed_at; /* record + 1 of the first failure, 0 none */
	int err;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t *buf = malloc(w->rec);
	if (!buf) {
		w->err = ENOMEM;
		w->failed_at = 1;
		return NULL;
	}
	for (uint64_t i = w->t; i < w->nrec; i += THREADS) {
		uint64_t off = i * w->rec;
		tu_fill_pattern(buf, w->rec, w->seed, off);
		ssize_t r = pc_pwrite(w->h, buf, w->rec, (off_t)off, w->flags);
		if (r != (ssize_t)w->rec) {
			w->err = r < 0 ? errno : EIO;
			w->failed_at = i + 1;
			break;
		}
	}
	free(buf);
	return NULL;
}

/* --------------------------------------------------------------- files */

/* Write `size` bytes of pattern `seed` with plain I/O and fsync. */
static void prewrite(const char *path, uint64_t size, uint64_t seed)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	uint8_t *buf = malloc(MiB);
	REQUIRE(buf);
	for (uint64_t off = 0; off < size; off += MiB) {
		size_t n = size - off < MiB ? (size_t)(size - off) : MiB;
		tu_fill_pattern(buf, n, seed, off);
		REQUIRE(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n);
	}
	REQUIRE(fsync(fd) == 0);
	free(buf);
	close(fd);
}

/* The backing file, read with O_DIRECT, is exactly pattern `seed` of
 * `size` bytes. */
static bool verify(const char *path, uint64_t size, uint64_t seed)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return false;
	}
	struct stat st;
	bool ok = fstat(fd, &st) == 0 && (uint64_t)st.st_size == size;
	if (!ok)
		fprintf(stderr, "   %s: size %lld, expected %llu\n", path, (long long)st.st_size,
			(unsigned long long)size);
	uint8_t *got = aligned_alloc(4096, MiB), *want = malloc(MiB);
	REQUIRE(got && want);
	unsigned bad = 0; /* chunks with wrong bytes, first few reported */
	for (uint64_t off = 0; off < size; off += MiB) {
		size_t n = size - off < MiB ? (size_t)(size - off) : MiB;
		size_t rd = (n + 4095) & ~(size_t)4095;
		ssize_t r = pread(fd, got, rd, (off_t)off);
		if (r < (ssize_t)n) {
			fprintf(stderr, "   %s: O_DIRECT read at %llu returned %zd\n", path, (unsigned long long)off, r);
			ok = false;
			break;
		}
		tu_fill_pattern(want, n, seed, off);
		if (memcmp(got, want, n) != 0) {
			size_t i = 0, last = 0, nwrong = 0;
			while (got[i] == want[i])
				i++;
			for (size_t j = i; j < n; j++)
				if (got[j] != want[j]) {
					last = j;
					nwrong++;
				}
			if (bad++ < 8)
				fprintf(stderr, "   %s: %zu wrong bytes in %llu..%llu (first 0x%02x, expected 0x%02x)\n",
					path, nwrong, (unsigned long long)(off + i), (unsigned long long)(off + last),
					got[i], want[i]);
			ok = false;
		}
	}
	if (bad)
		fprintf(stderr, "   %s: %u MiB chunk(s) with wrong bytes\n", path, bad);
	free(got);
	free(want);
	close(fd);
	return ok;
}

/* --------------------------------------------------------------- passes */

static const char *flags_name(int flags)
{
	switch (flags) {
	case PC_DONTCACHE:
		return "DONTCACHE";
	case PC_DONTCACHE | PC_DSYNC:
		return "DONTCACHE|DSYNC";
	case PC_DIRECT:
		return "DIRECT";
	default:
		return "?";
	}
}

/* The bytes a pass writes: PC_IL_MIB MiB (default 32; 8 under TSan), a
 * quarter of that with PC_TEST_QUICK. */
static uint64_t pass_bytes(void)
{
	uint64_t total = (TU_TSAN ? 8 : 32) * MiB;
	const char *e = getenv("PC_IL_MIB");
	if (e && atoi(e) > 0)
		total = (uint64_t)atoi(e) * MiB;
	if (tu_quick())
		total /= 4;
	return total;
}

/* THREADS threads write records of `rec` bytes with `flags` on a new file, or
 * over one that holds other data (`existing`). */
static void run_pass(size_t rec, int flags, bool existing)
{
	uint64_t total = pass_bytes();
	printf("interleaved records: %d threads, %llu MiB, %s%s\n", THREADS, (unsigned long long)(total / MiB),
	       existing ? "over existing data" : "new file", TU_TSAN ? " (TSan)" : "");
	uint64_t nrec = total / rec, size = nrec * rec;
	uint64_t seed = 0x1000 + rec + (uint64_t)flags * 7 + (existing ? 1 : 0);
	char path[4200], name[64];
	snprintf(name, sizeof(name), "il_%zu_%d_%s", rec, flags, existing ? "old" : "new");
	test_path(path, sizeof(path), dir, name);
	if (existing)
		prewrite(path, size, seed ^ 0xABCDEF);
	else
		unlink(path);

	struct pc_config cfg = tu_config(128 * MiB);
	cfg.block_size = 4096;
	cfg.edge_expire_ms = 30000;
	cfg.dirty_expire_ms = 30000;
	struct pc_cache *c = tu_cache_new(&cfg);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT, 0644);
	REQUIRE(h);

	struct writer w[THREADS];
	double t0 = tu_now_s();
	for (unsigned t = 0; t < THREADS; t++) {
		w[t] = (struct writer){ .h = h, .rec = rec, .flags = flags, .nrec = nrec, .t = t, .seed = seed };
		REQUIRE(pthread_create(&w[t].tid, NULL, writer_main, &w[t]) == 0);
	}
	bool writes_ok = true;
	for (unsigned t = 0; t < THREADS; t++) {
		pthread_join(w[t].tid, NULL);
		if (w[t].failed_at) {
			fprintf(stderr, "   thread %u: record %llu failed: %s\n", t,
				(unsigned long long)(w[t].failed_at - 1), strerror(w[t].err));
			writes_ok = false;
		}
	}
	double t_write = tu_now_s() - t0;
	CHECK(writes_ok);
	CHECK(pc_fsync(h) == 0);
	double t_all = tu_now_s() - t0;
	struct pc_stats s;
	pc_cache_stats(c, &s);
	printf("   R=%-5zu %-15s %s: %llu writes, %.2f s (+fsync %.2f s), %.0f MiB/s; dev reads %llu (%.4f/write), "
	       "rmw_reads %llu, deferred %llu; edges kept %llu completed %llu expired %llu; drops %llu; "
	       "cached after fsync %llu\n",
	       rec, flags_name(flags), existing ? "existing" : "new file", (unsigned long long)nrec, t_write,
	       t_all - t_write, (double)size / MiB / t_all, (unsigned long long)s.dev_read_ios,
	       (double)s.dev_read_ios / (double)nrec, (unsigned long long)s.rmw_reads,
	       (unsigned long long)s.deferred_rmw, (unsigned long long)s.edge_kept,
	       (unsigned long long)s.edge_completed, (unsigned long long)s.edge_expired,
	       (unsigned long long)s.dropbehind_drops, (unsigned long long)s.cached_bytes);

	bool must_not_read = !existing || flags == PC_DONTCACHE;
	if (must_not_read) {
		CHECK(s.dev_read_ios == 0);
		CHECK(s.rmw_reads == 0);
	}
	if (s.cached_bytes != 0 || s.folios != 0)
		fprintf(stderr, "   left cached after the final fsync: %llu bytes in %llu folios\n",
			(unsigned long long)s.cached_bytes, (unsigned long long)s.folios);
	CHECK(s.cached_bytes == 0 && s.folios == 0);
	CHECK(s.dirty_bytes == 0 && s.dirty_uncached_bytes == 0);
	CHECK(pc_size(h) == (off_t)size);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	CHECK(verify(path, size, seed));
	unlink(path);
}

/* ------------------------------------------------------ one pass a case */

TEST_CASE(dontcache_records_6000_new_file)
{
	run_pass(6000, PC_DONTCACHE, false);
}

TEST_CASE(dontcache_dsync_records_6000_new_file)
{
	run_pass(6000, PC_DONTCACHE | PC_DSYNC, false);
}

TEST_CASE(direct_records_6000_new_file)
{
	run_pass(6000, PC_DIRECT, false);
}

TEST_CASE(dontcache_records_47008_new_file)
{
	run_pass(47008, PC_DONTCACHE, false);
}

TEST_CASE(dontcache_dsync_records_47008_new_file)
{
	run_pass(47008, PC_DONTCACHE | PC_DSYNC, false);
}

TEST_CASE(direct_records_47008_new_file)
{
	run_pass(47008, PC_DIRECT, false);
}

TEST_CASE(dontcache_records_6000_over_existing_data)
{
	run_pass(6000, PC_DONTCACHE, true);
}

TEST_CASE(dontcache_dsync_records_6000_over_existing_data)
{
	run_pass(6000, PC_DONTCACHE | PC_DSYNC, true);
}

TEST_CASE(direct_records_6000_over_existing_data)
{
	run_pass(6000, PC_DIRECT, true);
}

TEST_CASE(dontcache_records_47008_over_existing_data)
{
	run_pass(47008, PC_DONTCACHE, true);
}

TEST_CASE(dontcache_dsync_records_47008_over_existing_data)
{
	run_pass(47008, PC_DONTCACHE | PC_DSYNC, true);
}

TEST_CASE(direct_records_47008_over_existing_data)
{
	run_pass(47008, PC_DIRECT, true);
}
