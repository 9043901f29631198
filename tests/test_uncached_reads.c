/*
 * test_uncached_reads.c - uncached (PC_DONTCACHE) reads and
 * POSIX_FADV_NOREUSE:
 *
 *   - uncached reads leave nothing cached: a lone read drops the folio it
 *     stops in; a sequential stream keeps it for its next read (nothing
 *     is read from the device twice), and a read ending at end of file
 *     drops it; data that was cached stays cached;
 *   - POSIX_FADV_NOREUSE makes plain I/O of the range uncached (until
 *     POSIX_FADV_NORMAL), and leaves I/O outside it cached.
 *
 * Single folios are looked at through mapping_lookup() and the folio
 * flags; the flusher's work is waited for with polls.
 */
#include "uncached_util.h"

TEST_SCRATCH_DIR("uncached_reads")

#define N_READ (1 * MiB)

/* Uncached reads of [0, n) left nothing cached (within 2 s); a failure
 * names the folios left. */
static void expect_nothing_cached(struct pc_cache *c, struct pc_file *h, uint64_t n, const char *what)
{
	if (!TU_POLL(tu_stats(c).cached_bytes == 0, 2000)) {
		CHECK(0);
		for (uint64_t p = 0; p < n; p += 4096)
			if (is_cached(h, p))
				print_flags(what, h, p);
	}
}

/* A file `name` of N_READ bytes of pattern 7, written with plain I/O: its
 * path in path, its bytes returned (the caller frees them). */
static uint8_t *data_file(const char *name, char *path, size_t pathlen)
{
	uint8_t *data = malloc(N_READ);
	REQUIRE(data);
	tu_fill_pattern(data, N_READ, 7, 0);
	test_path(path, pathlen, dir, name);
	tu_write_file(path, data, N_READ);
	return data;
}

/* Sequential uncached reads of the whole file (read-ahead on). */
TEST_CASE(sequential_uncached_reads_leave_nothing_cached)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	const size_t N = N_READ;
	uint8_t *data = data_file("uread", path, sizeof(path)), *back = malloc(N);
	REQUIRE(back);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	for (size_t off = 0; off < N; off += 64 * KiB)
		CHECK(pc_pread(h, back + off, 64 * KiB, (off_t)off, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data, N) == 0);
	struct pc_stats s = tu_stats(c);
	printf("   sequential: %llu read I/Os, %llu drops, %llu bytes left cached\n",
	       (unsigned long long)s.dev_read_ios, (unsigned long long)s.dropbehind_drops,
	       (unsigned long long)s.cached_bytes);
	expect_nothing_cached(c, h, N, "left by sequential uncached reads");
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(back);
}

/* Sequential uncached reads of 5000 bytes: the folio each one stops in is
 * kept for the next read (so nothing is read from the device twice) and
 * dropped once a read passes its end; nothing is left. */
TEST_CASE(short_sequential_reads_keep_folio_for_next)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	const size_t N = N_READ;
	uint8_t *data = data_file("uread", path, sizeof(path)), *back = malloc(N);
	REQUIRE(back);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	struct pc_stats s = tu_stats(c);
	uint64_t rbytes0 = s.dev_read_bytes;
	bool kept_ok = true;
	for (size_t off = 0; off < N; off += 5000) {
		size_t len = N - off < 5000 ? N - off : 5000;
		CHECK(pc_pread(h, back + off, len, (off_t)off, PC_DONTCACHE) == (ssize_t)len);
		uint64_t e = off + len;
		if (e % 4096 && kept_ok && !is_cached(h, e - 1)) {
			printf("   sequential 5000-byte reads: folio of byte %llu not kept for the next read\n",
			       (unsigned long long)(e - 1));
			kept_ok = false;
		}
	}
	CHECK(kept_ok);
	CHECK(memcmp(back, data, N) == 0);
	s = tu_stats(c);
	printf("   sequential 5000-byte reads: %llu bytes read from the device for %zu\n",
	       (unsigned long long)(s.dev_read_bytes - rbytes0), N);
	CHECK(s.dev_read_bytes - rbytes0 == N);
	expect_nothing_cached(c, h, N, "left by sequential 5000-byte uncached reads");
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(back);
}

/* One random uncached read in the middle (no read-ahead): it drops the
 * folio it stops in too. */
TEST_CASE(lone_uncached_read_drops_its_folios)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t *data = data_file("uread", path, sizeof(path)), *back = malloc(5000);
	REQUIRE(back);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	uint64_t cached0 = tu_stats(c).cached_bytes;
	CHECK(pc_pread(h, back, 5000, 300000, PC_DONTCACHE) == 5000);
	CHECK(memcmp(back, data + 300000, 5000) == 0);
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == cached0);
	if (s.cached_bytes != cached0) {
		print_flags("uncached read [300000,305000)", h, 300000);
		print_flags("uncached read [300000,305000)", h, 304999);
	}
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(back);
}

/* Cached data stays cached: an uncached read of it neither drops nor
 * marks it, nor reads the device. */
TEST_CASE(uncached_read_of_cached_data_keeps_it)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t *data = data_file("uread", path, sizeof(path)), *back = malloc(64 * KiB);
	REQUIRE(back);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	CHECK(pc_pread(h, back, 64 * KiB, 512 * KiB, 0) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data + 512 * KiB, 64 * KiB) == 0);
	uint64_t cached = tu_stats(c).cached_bytes, reads = tu_stats(c).dev_read_ios;
	CHECK(cached >= 64 * KiB);
	CHECK(pc_pread(h, back, 64 * KiB, 512 * KiB, PC_DONTCACHE) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, data + 512 * KiB, 64 * KiB) == 0);
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == cached);
	CHECK(s.dev_read_ios == reads);
	for (uint64_t p = 512 * KiB; p < 576 * KiB; p += 4096) {
		uint32_t fl = fstate(h, p);
		if (fl == NOT_CACHED || (fl & PF_DROPBEHIND)) {
			print_flags("cached, then read uncached", h, p);
			CHECK(0);
			break;
		}
	}
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(data);
	free(back);
}

/* A sequential uncached read that ends at end of file, inside a
 * folio: no later read can pass that folio's end, so it is dropped
 * now (pagecache.h, PC_DONTCACHE: "folios this call creates are
 * dropped once the call is done with them (reads: after copying
 * out)"). */
TEST_CASE(uncached_read_to_eof_drops_last_folio)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t data[12000], back[12000];
	tu_fill_pattern(data, sizeof(data), 7, 0);
	test_path(path, sizeof(path), dir, "uread_eof");
	tu_write_file(path, data, 12000);
	struct pc_file *h = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(h);
	CHECK(pc_pread(h, back, 12000, 0, PC_DONTCACHE) == 12000); /* at 0: a stream starts */
	CHECK(memcmp(back, data, 12000) == 0);
	CHECK(pc_pread(h, back, 4096, 12000, PC_DONTCACHE) == 0);
	struct pc_stats fs;
	bool eof_dropped = TU_POLL((pc_file_stats(h, &fs), fs.cached_bytes == 0), 1000);
	if (!eof_dropped)
		print_flags("sequential uncached read to EOF 12000", h, 8192);
	CHECK(eof_dropped);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* POSIX_FADV_NOREUSE over the whole file: plain writes and reads are
 * uncached (a partial block kept as an edge) until POSIX_FADV_NORMAL. */
TEST_CASE(noreuse_makes_plain_io_uncached)
{
	struct pc_cache *c = cache_without_readahead();
	char path[4200];
	const size_t N = 64 * KiB + 6000;
	uint8_t *buf = malloc(N), *back = malloc(N);
	REQUIRE(buf && back);
	tu_fill_pattern(buf, N, 8, 0);
	struct pc_file *h = open_new(c, dir, "noreuse", path, sizeof(path));
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_NOREUSE) == 0);
	CHECK(pc_pwrite(h, buf, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	uint32_t fl = fstate(h, 0);
	CHECK(fl == NOT_CACHED || (fl & PF_DROPBEHIND));
	CHECK(pc_pwrite(h, buf + 64 * KiB, 6000, 64 * KiB, 0) == 6000);
	CHECK(is_edge(h, 64 * KiB + 4096));
	/* Written by the flusher, not fsync (which would drop the edge). */
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 4096, 2000));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(is_kept_edge(h, 64 * KiB + 4096));
	CHECK(disk_prefix_is(path, buf, 64 * KiB + 4096));
	/* Plain reads of the range are uncached too. */
	CHECK(pc_pread(h, back, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	CHECK(memcmp(back, buf, 64 * KiB) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	/* NORMAL ends it. */
	CHECK(pc_fadvise(h, 0, 0, POSIX_FADV_NORMAL) == 0);
	CHECK(pc_pread(h, back, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096 + 64 * KiB);
	fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DROPBEHIND));
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, N));
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
	free(back);
}

/* A NOREUSE range elsewhere leaves this I/O cached. */
TEST_CASE(noreuse_elsewhere_leaves_io_cached)
{
	struct pc_cache *c = cache_without_readahead();
	char path[4200];
	const size_t N = 64 * KiB;
	uint8_t *buf = malloc(N);
	REQUIRE(buf);
	tu_fill_pattern(buf, N, 8, 0);
	struct pc_file *h = open_new(c, dir, "noreuse2", path, sizeof(path));
	CHECK(pc_fadvise(h, 1 * MiB, 64 * KiB, POSIX_FADV_NOREUSE) == 0);
	CHECK(pc_pwrite(h, buf, 64 * KiB, 0, 0) == (ssize_t)(64 * KiB));
	CHECK(pc_pwrite(h, buf, 64 * KiB, 1 * MiB, 0) == (ssize_t)(64 * KiB));
	uint32_t fl = fstate(h, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DROPBEHIND));
	fl = fstate(h, 1 * MiB);
	CHECK(fl == NOT_CACHED || (fl & PF_DROPBEHIND));
	CHECK(pc_fsync(h) == 0);
	CHECK(is_cached(h, 0));
	CHECK(!is_cached(h, 1 * MiB));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	free(buf);
}
