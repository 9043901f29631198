/*
 * test_fullfs_append.c - appending through pagecache to a new file on a
 * full ext4 or XFS file system (fullfs_util.h), in every write mode:
 * PC_DSYNC, PC_DIRECT, buffered, PC_DONTCACHE and PC_NOWAIT (buffered;
 * EAGAIN is retried).  Each case writes up to 48 MiB of 47008-byte records
 * until the file system is full, through a cache of 128 MiB:
 *
 *   - the full file system is reported as ENOSPC in the write call (past
 *     1 MiB an append reserves its space, as the kernel's control shows);
 *     PC_DSYNC and PC_DIRECT writes report it themselves;
 *   - after a short write the next write fails; after a failed write a new
 *     write at the same offset fails too (nothing frees space);
 *   - every acknowledged byte reads back through the cache meanwhile
 *     (nothing dropped, PC_DONTCACHE data included); PC_DSYNC data is
 *     already on the device (plain O_DIRECT reads);
 *   - fsync while full is 0 or -1/ENOSPC;
 *   - the filler is deleted: the next fsync succeeds (it may first report,
 *     once, a writeback error counted before space came back: errseq
 *     semantics), a new record can be written, fsync, close and
 *     pc_cache_destroy succeed, and the backing file read with plain
 *     O_DIRECT reads holds every acknowledged byte.
 *
 * Needs root and loop devices (skipped otherwise, a failure under CI).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>

#include "fullfs_util.h"

TEST_FIXTURE(fullfs_setup, fullfs_teardown)

/* Append with write flags `flags` until the file system is full; then
 * free space and finish. */
static void append_until_full(const struct fs *f, int flags, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	struct pc_cache *c = scenario_cache();
	step("pc_open", 0);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);

	struct wrun w = write_until_error(h, -1, flags, seed, TOTAL);
	print_run(&w);
	if (flags & (PC_DSYNC | PC_DIRECT))
		CHECK(w.err != 0); /* data goes to the device in the call */
	CHECK(w.err == ENOSPC); /* past 1 MiB an append reserves its space: ENOSPC in the call */
	check_cached_reads(h, seed, w.ack);
	if (flags & PC_DSYNC) /* durable on return; the size may be rounded up */
		check_disk(path, seed, w.ack, w.ack, UINT64_MAX);
	fsync_while_full(h, &w);
	uint64_t errors_at_fsync = tu_stats(c).write_errors;

	fsync_after_space_returns(h, f, errors_at_fsync);
	write_after_recovery(h, -1, flags, seed, &w, TOTAL);
	step("pc_fsync after the new write", 0);
	CHECK(pc_fsync(h) == 0);
	step("pc_close", 0);
	CHECK(pc_close(h) == 0);
	CHECK(destroy_cache(c) == 0);
	check_disk(path, seed, w.ack, w.ack, w.tried);
}

TEST_CASE(enospc_at_write_nothing_lost_dsync_ext4) { fullfs_run(EXT4, append_until_full, PC_DSYNC, true); }
TEST_CASE(enospc_at_write_nothing_lost_dsync_xfs) { fullfs_run(XFS, append_until_full, PC_DSYNC, true); }
TEST_CASE(enospc_at_write_nothing_lost_direct_ext4) { fullfs_run(EXT4, append_until_full, PC_DIRECT, true); }
TEST_CASE(enospc_at_write_nothing_lost_direct_xfs) { fullfs_run(XFS, append_until_full, PC_DIRECT, true); }
TEST_CASE(enospc_at_write_nothing_lost_buffered_ext4) { fullfs_run(EXT4, append_until_full, 0, true); }
TEST_CASE(enospc_at_write_nothing_lost_buffered_xfs) { fullfs_run(XFS, append_until_full, 0, true); }
TEST_CASE(enospc_at_write_nothing_lost_dontcache_ext4) { fullfs_run(EXT4, append_until_full, PC_DONTCACHE, true); }
TEST_CASE(enospc_at_write_nothing_lost_dontcache_xfs) { fullfs_run(XFS, append_until_full, PC_DONTCACHE, true); }
TEST_CASE(enospc_at_write_nothing_lost_nowait_ext4) { fullfs_run(EXT4, append_until_full, PC_NOWAIT, true); }
TEST_CASE(enospc_at_write_nothing_lost_nowait_xfs) { fullfs_run(XFS, append_until_full, PC_NOWAIT, true); }
