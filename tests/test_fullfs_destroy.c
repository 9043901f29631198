/*
 * test_fullfs_destroy.c - pc_cache_destroy on a full ext4 or XFS file
 * system (fullfs_util.h), without freeing space: 47008-byte records are
 * written into the holes of a file made 48 MiB long and sparse until the
 * error, then the cache is destroyed with the handle still open, or after
 * pc_close (PC_DONTCACHE writes).  It returns (the scenario's watchdog says
 * if not): -1/ENOSPC when dirty data was left (or, after the close, a
 * write-back error no handle reported), else 0 with every acknowledged
 * byte on disk.
 *
 * Needs root and loop devices (skipped otherwise, a failure under CI).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>

#include "fullfs_util.h"

TEST_FIXTURE(fullfs_setup, fullfs_teardown)

/* close_first: pc_close (PC_DONTCACHE writes) before the destroy, else the
 * handle stays open. */
static void destroy_while_full(const struct fs *f, int close_first, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	make_sparse(path, TOTAL);
	int flags = close_first ? PC_DONTCACHE : 0;
	struct pc_cache *c = scenario_cache();
	struct pc_file *h = pc_open(c, path, O_RDWR, 0644);
	REQUIRE(h);
	struct wrun w = write_until_error(h, -1, flags, seed, TOTAL);
	print_run(&w);
	if (close_first) {
		step("pc_close while full", 0);
		errno = 0;
		int r = pc_close(h);
		int e = errno;
		printf("   pc_close while full: %s\n", r ? strerror(e) : "0");
		CHECK(r == 0 || e == ENOSPC);
	}
	uint64_t dirty = tu_stats(c).dirty_bytes, werrs = tu_stats(c).write_errors;
	errno = 0;
	int r = destroy_cache(c);
	int e = errno;
	printf("   pc_cache_destroy with %.2f MiB dirty: %s\n", (double)dirty / MiB, r ? strerror(e) : "0");
	if (r == 0) {
		check_disk(path, seed, w.ack, TOTAL, TOTAL);
	} else {
		CHECK(e == ENOSPC);
		/* Data left, or an error of write-back after the close that
		 * no handle reported (destroy is the last to report it). */
		CHECK(dirty > 0 || (close_first && werrs > 0));
	}
}


TEST_CASE(destroy_returns_handle_open_ext4) { fullfs_run(EXT4, destroy_while_full, false, true); }
TEST_CASE(destroy_returns_handle_open_xfs) { fullfs_run(XFS, destroy_while_full, false, true); }
TEST_CASE(destroy_returns_after_close_ext4) { fullfs_run(EXT4, destroy_while_full, true, true); }
TEST_CASE(destroy_returns_after_close_xfs) { fullfs_run(XFS, destroy_while_full, true, true); }
