/*
 * test_fullfs_kernel.c - the control for the test_fullfs_* programs: what
 * the kernel itself does on a full ext4 or XFS file system (fullfs_util.h).
 * The writes of the other scenarios, 48 MiB of 47008-byte records, with
 * plain pwrite on a normal descriptor, then fsync; appending to a new file,
 * and writing into a file made 48 MiB long and sparse (ftruncate) first.
 * They document the ground truth the cache is held to: the file system
 * reports ENOSPC at write time (delayed allocation reserves space), fsync
 * then succeeds, and once the filler is deleted a new write succeeds and
 * everything written is on disk.
 *
 * Needs root and loop devices (skipped otherwise, a failure under CI).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>

#include "fullfs_util.h"

TEST_FIXTURE(fullfs_setup, fullfs_teardown)

/* holes: into a sparse file of TOTAL bytes, else appending to a new one. */
static void plain_writes(const struct fs *f, int holes, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	if (holes)
		make_sparse(path, TOTAL);
	int fd = open(path, O_RDWR | O_CREAT | (holes ? 0 : O_TRUNC) | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	struct wrun w = write_until_error(NULL, fd, 0, seed, TOTAL);
	print_run(&w);
	/* Ground truth: delayed allocation reserves space at write time. */
	CHECK(w.err == ENOSPC);
	step("fsync (kernel)", 0);
	int r = fsync(fd);
	printf("   fsync while full: %s\n", r ? strerror(errno) : "0");
	CHECK(r == 0);
	free_space(f);
	write_after_recovery(NULL, fd, 0, seed, &w, TOTAL);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
	check_disk(path, seed, w.ack, holes ? TOTAL : w.ack, holes ? TOTAL : w.tried);
}

TEST_CASE(append_enospc_at_write_ext4) { fullfs_run(EXT4, plain_writes, false, false); }
TEST_CASE(append_enospc_at_write_xfs) { fullfs_run(XFS, plain_writes, false, false); }
TEST_CASE(holes_enospc_at_write_ext4) { fullfs_run(EXT4, plain_writes, true, false); }
TEST_CASE(holes_enospc_at_write_xfs) { fullfs_run(XFS, plain_writes, true, false); }
