/*
 * fullfs_util.h - full file systems, for real, for the test_fullfs_*
 * programs (fullfs_util.c): each case runs a scenario with fullfs_run(),
 * in a child process, on a new ext4 or XFS file system on a loop device,
 * filled so that 4 MiB stay free.  A scenario writes (up to) TOTAL bytes
 * of REC-byte records until the file system is full, through a cache or
 * with plain pwrite, frees the space and checks what reached the disk.
 *
 * A test file declares the fixture TEST_FIXTURE(fullfs_setup,
 * fullfs_teardown) and uses the helpers below; fullfs_util.c says what
 * the program needs (root, loop devices, mkfs.ext4, mkfs.xfs), how it
 * cleans up and the environment it reads.
 */
#ifndef PC_FULLFS_UTIL_H
#define PC_FULLFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pagecache.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define REC 47008ull         /* record size (the case) */
#define TOTAL (48 * MiB)     /* bytes each scenario tries to write */

/* A file system a scenario runs on: fullfs_run() hands it to the scenario
 * made, mounted at mnt and filled. */
struct fs {
	const char *type;     /* "ext4" or "xfs": mount(2)'s type */
	uint64_t image_size;
	enum { FS_UNTRIED, FS_WORKS, FS_FAILS } state; /* can it be set up here? */
	bool up;              /* mounted now */
	char why[512];        /* why the last set-up failed */
	char image[3200];     /* sizes: top + a name fits, so does mnt + a name */
	char mnt[3200];
	char filler[3300];
	char loopdev[64];
};

/* The file systems fullfs_run() takes, by index. */
enum { EXT4, XFS };

/* A file on another device than the full file system (the build tree's
 * scratch directory): writes there must go on meanwhile. */
extern char other_path[];

/* ------------------------------------------------------------ the runner */

/* The fixture: checks that the program can run here (root, loop devices;
 * if not, every case skips and says why), makes its directory and private
 * mount namespace, and cleans up at exit and on SIGINT, SIGTERM, SIGHUP. */
void fullfs_setup(void);
void fullfs_teardown(void);

/* A scenario: runs in the child, on f set up and filled; arg is its own,
 * seed the case's data pattern. */
typedef void (*fullfs_scenario)(const struct fs *f, int arg, uint64_t seed);

/*
 * The body of a case: runs scenario fn(arg) in a child process, with a
 * watchdog, on a new, filled file system (EXT4 or XFS), removed
 * afterwards; the case's one check is that the child's checks passed.
 * through_cache: a pagecache scenario, not run (a failure) once
 * PC_FULLFS_MAX_HANGS scenarios hung in this process (a run of several
 * cases: under CTest each case is a process of its own).
 */
void fullfs_run(int which, fullfs_scenario fn, int arg, bool through_cache);

/* ------------------------------------------------ inside a scenario */

/* Say what the scenario is doing now: its watchdog names it if it hangs. */
void step(const char *what, uint64_t off);

/* The scenario's cache (128 MiB, the rest the defaults), whose counters
 * go into a hang's report; destroy_cache() is pc_cache_destroy of it. */
struct pc_cache *scenario_cache(void);
int destroy_cache(struct pc_cache *c);

/* The path of the file a scenario writes on f. */
void victim_path(char *out, size_t n, const struct fs *f);

/* Make path a file `size` bytes long, all hole, with plain calls. */
void make_sparse(const char *path, uint64_t size);

/* Whether e is an error a write may report on a full file system:
 * ENOSPC, or EIO from a writer the throttle held while writeback failed. */
bool nospace_write_errno(int e);

/* The end of the record holding offset off (records sit at multiples of
 * REC), at most limit. */
uint64_t record_end(uint64_t off, uint64_t limit);

/* The result of writing records until the file system runs out. */
struct wrun {
	uint64_t ack;      /* [0, ack) acknowledged: returned as written */
	uint64_t tried;    /* end of the furthest write attempted */
	int err;           /* the write error, 0 if every write succeeded */
	unsigned shorts;   /* short writes */
};

/*
 * Write pattern `seed` in records from offset 0 to `end` until a write
 * fails, through h (pc_pwrite with flags; PC_NOWAIT's EAGAIN retried) or,
 * when h is NULL, with pwrite on fd.  CHECKs the rules of a write on a
 * full file system: the error is ENOSPC (or EIO); a short write (other
 * than PC_NOWAIT's) is followed by a failing write; and a new write at the
 * failing offset fails again.
 */
struct wrun write_until_error(struct pc_file *h, int fd, int flags, uint64_t seed, uint64_t end);

/* Print how the writes of w ended. */
void print_run(const struct wrun *w);

/* Write one more record at w->ack now that there is space (through h or,
 * h NULL, fd): CHECKs it is accepted whole; w grows by it. */
void write_after_recovery(struct pc_file *h, int fd, int flags, uint64_t seed, struct wrun *w, uint64_t end);

/* Delete f's filler: space is back (CHECKs that it shows, polling for
 * XFS, which frees a deleted file's blocks in the background). */
void free_space(const struct fs *f);

/*
 * CHECK the backing file at path, read with plain O_DIRECT (no cache
 * involved): [0, ack) holds pattern `seed`, its size is within
 * [size_min, size_max], and every byte of [ack, size) is zero or the
 * pattern (the rest of a failed write may have reached the disk: POSIX
 * allows it; noted).
 */
void check_disk(const char *path, uint64_t seed, uint64_t ack, uint64_t size_min, uint64_t size_max);

/* CHECK that every acknowledged byte [0, ack) of pattern seed reads back
 * through h. */
void check_cached_reads(struct pc_file *h, uint64_t seed, uint64_t ack);

/* pc_fsync of h while the file system is full: CHECKs it returns 0
 * (everything acknowledged had its space) or ENOSPC, and ENOSPC if no
 * write of w reported the error. */
void fsync_while_full(struct pc_file *h, const struct wrun *w);

/*
 * Free f's space (free_space), then CHECK that the next pc_fsync of h
 * writes everything and succeeds.  It may first report, once, a writeback
 * error met before the space came back (errseq: each handle sees every
 * error once), and only if the cache's count of failed device writes grew
 * past errors_at_last_fsync meanwhile; the fsync after it must succeed.
 */
void fsync_after_space_returns(struct pc_file *h, const struct fs *f, uint64_t errors_at_last_fsync);

#endif
