/*
 * test_fullfs_holes.c - writing through pagecache into the holes of a file
 * on a full ext4 or XFS file system (fullfs_util.h), in every write mode:
 * PC_DSYNC, PC_DIRECT, buffered, PC_DONTCACHE and PC_NOWAIT (buffered;
 * EAGAIN is retried).  The file is made 48 MiB long and sparse (plain
 * ftruncate) before pc_open, and each case writes 47008-byte records into
 * it from offset 0 until the file system is full, through a cache of
 * 128 MiB.  The writes extend nothing, so space is not reserved as for
 * extending writes and write-back meets ENOSPC:
 *
 *   - the error is ENOSPC (EIO allowed from a write the throttle held), by
 *     a write or at the latest by fsync; PC_DSYNC and PC_DIRECT writes
 *     report it themselves;
 *   - after a short write the next write fails; after a failed write a new
 *     write at the same offset fails too (nothing frees space);
 *   - the failed data stays dirty and cached until space returns: every
 *     acknowledged byte reads back through the cache meanwhile; PC_DSYNC
 *     data is already on the device (plain O_DIRECT reads);
 *   - fsync while full is 0 or -1/ENOSPC;
 *   - writers of other files are not stalled meanwhile: 8 MiB written and
 *     fsynced on another device (the build tree) succeed, and a small write
 *     to another file of the full file system returns (data or ENOSPC);
 *   - the filler is deleted: the next fsync succeeds (it may first report,
 *     once, a writeback error counted before space came back: errseq
 *     semantics), a new record can be written, fsync, close and
 *     pc_cache_destroy succeed, and the backing files read with plain
 *     O_DIRECT reads hold every acknowledged byte, the other files' too.
 *
 * Needs root and loop devices (skipped otherwise, a failure under CI).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>

#include "fullfs_util.h"

#define OTHER_BYTES (8 * MiB) /* written to another device meanwhile */
#define SMALL_BYTES (64 * KiB) /* written to another file of the full fs */

TEST_FIXTURE(fullfs_setup, fullfs_teardown)

/*
 * Writers of other files are not stalled by the failing victim: OTHER_BYTES
 * to a file on another device (the build tree) written and fsynced, and a
 * small write to another file of the full file system, which returns with
 * the data or ENOSPC.  Both are checked on disk at the end (*small_ok: the
 * small write was acknowledged).
 */
static void others_not_stalled(struct pc_cache *c, const struct fs *f, uint64_t seed, bool *small_ok)
{
	char small[PATH_MAX];
	test_path(small, sizeof(small), f->mnt, "small");
	struct pc_file *o = pc_open(c, other_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(o);
	uint8_t *buf = malloc(SMALL_BYTES > REC ? SMALL_BYTES : REC);
	REQUIRE(buf);
	bool all = true;
	for (uint64_t off = 0; off < OTHER_BYTES && all; off = record_end(off, OTHER_BYTES)) {
		size_t len = (size_t)(record_end(off, OTHER_BYTES) - off);
		tu_fill_pattern(buf, len, seed + 1, off);
		step("pc_pwrite to another device", off);
		all = pc_pwrite(o, buf, len, (off_t)off, 0) == (ssize_t)len;
	}
	CHECK(all);
	step("pc_fsync of another device's file", 0);
	CHECK(pc_fsync(o) == 0);
	step("pc_close of another device's file", 0);
	CHECK(pc_close(o) == 0);

	/* A new file may be refused already (XFS needs room for inodes). */
	step("pc_open of another file of the full file system", 0);
	struct pc_file *s = pc_open(c, small, O_RDWR | O_CREAT | O_TRUNC, 0644);
	int e = errno;
	CHECK(s || e == ENOSPC);
	ssize_t r = -1;
	int cr = 0;
	if (s) {
		tu_fill_pattern(buf, SMALL_BYTES, seed + 2, 0);
		step("pc_pwrite to another file of the full file system", 0);
		r = pc_pwrite(s, buf, SMALL_BYTES, 0, 0);
		e = errno;
		CHECK(r == (ssize_t)SMALL_BYTES || (r == -1 && nospace_write_errno(e)));
		step("pc_close of another file of the full file system", 0);
		errno = 0;
		cr = pc_close(s);
		CHECK(cr == 0 || errno == ENOSPC);
	}
	*small_ok = r == (ssize_t)SMALL_BYTES;
	printf("   meanwhile: %llu MiB to another device written and fsynced; another file on the full fs: %s\n",
	       (unsigned long long)(OTHER_BYTES / MiB),
	       !s ? "pc_open ENOSPC" : !*small_ok ? "pc_pwrite failed" : cr ? "written, pc_close ENOSPC" : "written");
	free(buf);
}

static void check_others_on_disk(const struct fs *f, uint64_t seed, bool small_ok)
{
	char small[PATH_MAX];
	test_path(small, sizeof(small), f->mnt, "small");
	check_disk(other_path, seed + 1, OTHER_BYTES, OTHER_BYTES, OTHER_BYTES);
	if (small_ok)
		check_disk(small, seed + 2, SMALL_BYTES, SMALL_BYTES, SMALL_BYTES);
}

/*
 * The other file on the full file system was closed without waiting (the
 * default close): its write-back met ENOSPC while nobody had it open.  The
 * next handle's fsync reports that once (the kernel's rule for an error
 * nobody saw) and, space being back, writes it; then all is reported.
 */
static void reap_small_file(struct pc_cache *c, const struct fs *f)
{
	char small[PATH_MAX];
	test_path(small, sizeof(small), f->mnt, "small");
	struct pc_file *s = pc_open(c, small, O_RDWR, 0);
	if (!s)
		return; /* never created */
	step("pc_fsync of the other file after space returned", 0);
	errno = 0;
	int r = pc_fsync(s);
	CHECK(r == 0 || errno == ENOSPC);
	CHECK(pc_fsync(s) == 0);
	CHECK(pc_close(s) == 0);
}


/* Write into the holes with write flags `flags` until the file system is
 * full; the other writers meanwhile; then free space and finish. */
static void fill_holes_until_full(const struct fs *f, int flags, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	make_sparse(path, TOTAL);
	struct pc_cache *c = scenario_cache();
	step("pc_open", 0);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT, 0644);
	REQUIRE(h);

	struct wrun w = write_until_error(h, -1, flags, seed, TOTAL);
	print_run(&w);
	if (flags & (PC_DSYNC | PC_DIRECT))
		CHECK(w.err != 0); /* data goes to the device in the call */
	check_cached_reads(h, seed, w.ack);
	if (flags & PC_DSYNC) /* durable on return */
		check_disk(path, seed, w.ack, TOTAL, TOTAL);
	fsync_while_full(h, &w);
	uint64_t errors_at_fsync = tu_stats(c).write_errors;

	bool small_ok = false;
	others_not_stalled(c, f, seed, &small_ok);

	fsync_after_space_returns(h, f, errors_at_fsync);
	reap_small_file(c, f);
	write_after_recovery(h, -1, flags, seed, &w, TOTAL);
	step("pc_fsync after the new write", 0);
	CHECK(pc_fsync(h) == 0);
	step("pc_close", 0);
	CHECK(pc_close(h) == 0);
	CHECK(destroy_cache(c) == 0);
	check_disk(path, seed, w.ack, TOTAL, TOTAL);
	check_others_on_disk(f, seed, small_ok);
}

TEST_CASE(kept_dirty_others_go_on_dsync_ext4) { fullfs_run(EXT4, fill_holes_until_full, PC_DSYNC, true); }
TEST_CASE(kept_dirty_others_go_on_dsync_xfs) { fullfs_run(XFS, fill_holes_until_full, PC_DSYNC, true); }
TEST_CASE(kept_dirty_others_go_on_direct_ext4) { fullfs_run(EXT4, fill_holes_until_full, PC_DIRECT, true); }
TEST_CASE(kept_dirty_others_go_on_direct_xfs) { fullfs_run(XFS, fill_holes_until_full, PC_DIRECT, true); }
TEST_CASE(kept_dirty_others_go_on_buffered_ext4) { fullfs_run(EXT4, fill_holes_until_full, 0, true); }
TEST_CASE(kept_dirty_others_go_on_buffered_xfs) { fullfs_run(XFS, fill_holes_until_full, 0, true); }
TEST_CASE(kept_dirty_others_go_on_dontcache_ext4) { fullfs_run(EXT4, fill_holes_until_full, PC_DONTCACHE, true); }
TEST_CASE(kept_dirty_others_go_on_dontcache_xfs) { fullfs_run(XFS, fill_holes_until_full, PC_DONTCACHE, true); }
TEST_CASE(kept_dirty_others_go_on_nowait_ext4) { fullfs_run(EXT4, fill_holes_until_full, PC_NOWAIT, true); }
TEST_CASE(kept_dirty_others_go_on_nowait_xfs) { fullfs_run(XFS, fill_holes_until_full, PC_NOWAIT, true); }
