/*
 * test_fullfs.c - a full file system, for real: small ext4 and XFS file
 * systems on loop devices, filled up to a few MiB, written through the
 * cache in every write mode.  (Reliability issue: a writer filling a full
 * file system waited for ever in the dirty throttle.)
 *
 * Each scenario runs in a child process on a new file system (made, mounted
 * and filled for it: a filler file fallocated up to FREE_LEFT = 4 MiB
 * free; unmounted after it), with a watchdog: a scenario that does not
 * finish within PC_FULLFS_WATCHDOG seconds (default 60) fails with a
 * "HANG" line naming the call it was stuck in and the cache's counters.
 * The images: ext4 64 MiB, XFS 300 MiB (mkfs.xfs refuses less), 4 KiB
 * blocks.  Scenarios, for each file system, write (up to) 48 MiB of
 * 47008-byte records from offset 0, until the file system is full:
 *
 *   kernel/append, kernel/holes   the control: the same writes with plain
 *       pwrite on a normal descriptor, then fsync.  Documents the ground
 *       truth: the file system reports ENOSPC at write time (delayed
 *       allocation reserves space), fsync then succeeds, and once the
 *       filler is deleted everything written is there.
 *   append/MODE   through pagecache (memory_limit 128 MiB, the rest the
 *       defaults) into a new file, MODE one of dsync, direct, buffered,
 *       dontcache, nowait (PC_NOWAIT buffered writes; EAGAIN is retried):
 *       - the full file system is reported as ENOSPC (EIO allowed from a
 *         write the throttle held), by a write or at the latest by fsync;
 *         PC_DSYNC and PC_DIRECT writes report it themselves;
 *       - after a short write the next write fails; after a failed write a
 *         new write at the same offset fails too (nothing frees space);
 *       - every acknowledged byte reads back through the cache meanwhile
 *         (nothing dropped, PC_DONTCACHE data included); PC_DSYNC data is
 *         already on the device (plain O_DIRECT reads);
 *       - fsync while full is 0 or -1/ENOSPC;
 *       - the filler is deleted: the next fsync succeeds (it may first
 *         report, once, a writeback error counted before space came back:
 *         errseq semantics), a new record can be written, fsync, close and
 *         pc_cache_destroy succeed, and the backing file read with plain
 *         O_DIRECT reads holds every acknowledged byte.
 *   holes/MODE    the same into a file made 48 MiB long and sparse (plain
 *       ftruncate) before pc_open: the writes extend nothing, so space is
 *       not reserved as for extending writes and writeback meets ENOSPC
 *       (the failed data must stay dirty and cached until space returns).  In
 *       addition, while the file system is full and the victim's writes
 *       have failed, writers of other files are not stalled: 8 MiB written
 *       and fsynced on another device (the build tree) succeed, and a small
 *       write to another file of the full file system returns (data or
 *       ENOSPC); both are verified on disk at the end.
 *   destroy/open, destroy/closed   holes-file writes until the error, then
 *       pc_cache_destroy without freeing space (with the handle still
 *       open, resp. after pc_close, PC_DONTCACHE): it returns (the watchdog
 *       says if not), -1/ENOSPC when dirty data was left, else 0 with
 *       every acknowledged byte on disk.
 *
 * Needs root, /dev/loop-control, mkfs.ext4 (e2fsprogs) and mkfs.xfs
 * (xfsprogs, else the XFS scenarios are left out).  Without root or when no
 * loop device or mount works, it prints why and exits with SKIP_CODE (77,
 * the test's SKIP_RETURN_CODE).
 *
 * Cleanup: the test works in a private mount namespace, so its mounts are
 * invisible outside and die with the process whatever happens; the loop
 * devices are set up with LO_FLAGS_AUTOCLEAR, so they detach when their
 * file system is unmounted; a scenario's child dies with the parent.  On a
 * normal exit, SIGINT, SIGTERM or SIGHUP the parent unmounts and removes
 * its files itself.  Files live in PC_TEST_DIR/fullfs.PID (the image files
 * are sparse); a later run removes those of a run killed by SIGKILL.
 *
 * Environment: PC_FULLFS_WATCHDOG (seconds per scenario, default 60),
 * PC_FULLFS_MAX_HANGS (after this many hangs the remaining pagecache
 * scenarios are not run, to stay within CI's time; default 3, 0: no limit),
 * PC_FULLFS_ONLY (run only scenarios whose name, e.g. "ext4/holes/buffered",
 * contains this string), PC_TEST_QUICK=1 (only the buffered, dontcache
 * and direct modes).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define SKIP_CODE 77         /* SKIP_RETURN_CODE of this test (CMakeLists.txt) */
#define CHILD_HANG 3         /* a scenario's exit code when its watchdog fired */
#define REC 47008ull         /* record size (the case) */
#define TOTAL (48 * MiB)     /* bytes each scenario tries to write */
#define FREE_LEFT (4 * MiB)  /* free space left by the filler */
#define CACHE_MEM (128 * MiB)
#define OTHER_BYTES (8 * MiB) /* written to another device meanwhile */
#define SMALL_BYTES (64 * KiB) /* written to another file of the full fs */

extern char **environ;

/* ------------------------------------------------------ file systems */

struct fs {
	const char *type;     /* "ext4" or "xfs": mount(2)'s type */
	uint64_t image_size;
	bool usable;          /* it could be set up here */
	bool up;              /* mounted now */
	char image[3200];     /* sizes: top + a name fits, so does mnt + a name */
	char mnt[3200];
	char filler[3300];
	char loopdev[64];
};

/* XFS refuses file systems under 300 MB (xfsprogs >= 5.19); the image
 * files are sparse, so their size costs nothing until written. */
static struct fs fss[] = {
	{ .type = "ext4", .image_size = 64 * MiB },
	{ .type = "xfs", .image_size = 300 * MiB },
};
#define NFS (sizeof(fss) / sizeof(fss[0]))

static char top[3072]; /* PC_TEST_DIR/fullfs.PID: images, mount points, other files */
static char other_path[3100]; /* top/other: the file on another device */
static pid_t owner;        /* the parent: the only process that cleans up */
static volatile pid_t child_pid;

/* Run a tool (argv[0] looked up in PATH); its exit status, -1 if it could
 * not be started. */
static int run_tool(char *const argv[])
{
	pid_t pid;
	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool have_tool(const char *name)
{
	char *argv[] = { (char *)"sh", (char *)"-c", NULL, NULL };
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	argv[2] = cmd;
	return run_tool(argv) == 0;
}

/*
 * Attach `image` to a free loop device with LO_FLAGS_AUTOCLEAR (it detaches
 * itself when the last user, the mounted file system, goes away).  Returns
 * the open loop device (the caller closes it once the file system holds
 * it), or -1 with a reason printed.  Another process may take the device
 * LOOP_CTL_GET_FREE named first: LOOP_CONFIGURE then fails with EBUSY and
 * we ask again, as losetup does.
 */
static int loop_attach(const char *image, char *dev, size_t devlen)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		printf("test_fullfs: /dev/loop-control: %s\n", strerror(errno));
		return -1;
	}
	int backing = open(image, O_RDWR | O_CLOEXEC);
	REQUIRE(backing >= 0);
	int lfd = -1;
	for (int tries = 0; tries < 20 && lfd < 0; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			printf("test_fullfs: LOOP_CTL_GET_FREE: %s\n", strerror(errno));
			break;
		}
		snprintf(dev, devlen, "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			printf("test_fullfs: %s: %s\n", dev, strerror(errno));
			break;
		}
		struct loop_config lc;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)backing;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)lc.info.lo_file_name, LO_NAME_SIZE, "%s", image);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) != 0) {
			int e = errno;
			close(lfd);
			lfd = -1;
			if (e != EBUSY) {
				printf("test_fullfs: LOOP_CONFIGURE %s: %s\n", dev, strerror(e));
				break;
			}
		}
	}
	close(backing);
	close(ctl);
	return lfd;
}

static bool mkfs(struct fs *f)
{
	if (strcmp(f->type, "ext4") == 0) {
		/* -m 0: no blocks reserved for root (the test runs as root);
		 * 4 KiB blocks as on a real disk (mke2fs picks 1 KiB for small
		 * file systems). */
		char *argv[] = { "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", f->image, NULL };
		return run_tool(argv) == 0;
	}
	char *argv[] = { "mkfs.xfs", "-q", "-f", "-K", "-b", "size=4096", f->image, NULL };
	return run_tool(argv) == 0;
}

/* Make, attach and mount a new file system f under `top` (every scenario
 * gets a new one).  false (with the reason printed) when that cannot work. */
static bool fs_setup(struct fs *f)
{
	const char *mkfs_tool = strcmp(f->type, "ext4") == 0 ? "mkfs.ext4" : "mkfs.xfs";
	if (!have_tool(mkfs_tool)) {
		printf("test_fullfs: %s not found: no %s scenarios (install %s)\n", mkfs_tool, f->type,
		       strcmp(f->type, "ext4") == 0 ? "e2fsprogs" : "xfsprogs");
		return false;
	}
	snprintf(f->image, sizeof(f->image), "%s/%s.img", top, f->type);
	snprintf(f->mnt, sizeof(f->mnt), "%s/mnt-%s", top, f->type);
	test_path(f->filler, sizeof(f->filler), f->mnt, "filler");
	int fd = open(f->image, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)f->image_size) == 0);
	close(fd);
	if (!mkfs(f)) {
		printf("test_fullfs: %s on %s failed\n", mkfs_tool, f->image);
		unlink(f->image);
		return false;
	}
	int lfd = loop_attach(f->image, f->loopdev, sizeof(f->loopdev));
	if (lfd < 0) {
		unlink(f->image);
		return false;
	}
	REQUIRE(mkdir(f->mnt, 0755) == 0);
	if (mount(f->loopdev, f->mnt, f->type, 0, NULL) != 0) {
		printf("test_fullfs: mount %s (%s) on %s: %s\n", f->loopdev, f->type, f->mnt, strerror(errno));
		close(lfd); /* autoclear: the device detaches now */
		rmdir(f->mnt);
		unlink(f->image);
		return false;
	}
	close(lfd); /* the file system holds the device; it detaches at umount */
	f->up = true;
	return true;
}

/*
 * Unmount f and remove its image.  Async-signal-safe (system calls only):
 * also the SIGINT/SIGTERM path.  A killed scenario's io_uring may hold its
 * files for a moment after the child is gone, hence the retries; a lazy
 * unmount is the last resort (the device then detaches when the last file
 * closes).
 */
static void fs_teardown(struct fs *f, bool patient)
{
	if (!f->up)
		return;
	f->up = false;
	int tries = patient ? 50 : 1;
	while (umount2(f->mnt, 0) != 0) {
		if (errno != EBUSY || --tries <= 0) {
			umount2(f->mnt, MNT_DETACH);
			break;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	rmdir(f->mnt);
	unlink(f->image);
}

static void cleanup(void)
{
	if (getpid() != owner)
		return;
	for (size_t i = 0; i < NFS; i++)
		fs_teardown(&fss[i], true);
	if (top[0])
		test_rmdir(top);
}

static void parent_signal(int sig)
{
	if (getpid() != owner)
		_exit(1);
	if (child_pid > 0)
		kill(child_pid, SIGKILL);
	for (size_t i = 0; i < NFS; i++)
		fs_teardown(&fss[i], false);
	unlink(other_path);
	rmdir(top);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Remove what an earlier run killed by SIGKILL (ctest's timeout) left in
 * the test directory: fullfs.PID directories of processes that are gone
 * (their mounts and loop devices went with them; see private_mounts). */
static void remove_stale_dirs(void)
{
	const char *base = getenv("PC_TEST_DIR");
	if (!base || !*base)
		base = ".";
	DIR *d = opendir(base);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid;
		char rest;
		if (sscanf(e->d_name, "fullfs.%d%c", &pid, &rest) != 1 || pid <= 0 || kill(pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
		printf("test_fullfs: removing %s, left by a killed run\n", path);
		char *argv[] = { "rm", "-rf", "--one-file-system", path, NULL };
		run_tool(argv);
	}
	closedir(d);
}

/* A private mount namespace: our mounts do not show outside and are
 * unmounted by the kernel when the process dies, even by SIGKILL (ctest's
 * timeout).  Not fatal if refused: the explicit cleanup still runs. */
static void private_mounts(void)
{
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		printf("test_fullfs: no private mount namespace (%s); mounts are visible while it runs\n",
		       strerror(errno));
}

static uint64_t free_bytes(const char *mnt)
{
	struct statvfs sv;
	REQUIRE(statvfs(mnt, &sv) == 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

static void sync_fs(const char *mnt)
{
	int d = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	REQUIRE(d >= 0);
	REQUIRE(syncfs(d) == 0);
	close(d);
}

/*
 * Fill a fresh file system: a filler file allocated (fallocate: nothing
 * written) so that about FREE_LEFT bytes stay free.  Once more if the first
 * allocation left more than a MiB extra (metadata estimates).
 */
static bool fs_fill(struct fs *f)
{
	int fd = open(f->filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	uint64_t filled = 0, avail;
	for (int round = 0; round < 3 && (avail = free_bytes(f->mnt)) > FREE_LEFT + MiB; round++) {
		if (fallocate(fd, 0, (off_t)filled, (off_t)(avail - FREE_LEFT)) != 0) {
			printf("test_fullfs: fallocate filler on %s: %s\n", f->type, strerror(errno));
			break;
		}
		filled += avail - FREE_LEFT;
		REQUIRE(fsync(fd) == 0);
		sync_fs(f->mnt);
	}
	close(fd);
	avail = free_bytes(f->mnt);
	if (avail < FREE_LEFT / 2 || avail > FREE_LEFT + MiB) {
		printf("test_fullfs: could not leave %llu KiB free on %s (%llu KiB free)\n",
		       (unsigned long long)(FREE_LEFT / KiB), f->type, (unsigned long long)(avail / KiB));
		return false;
	}
	return true;
}

/* ---------------------------------------------------- inside a scenario */

static unsigned watchdog_s = 60; /* seconds a scenario may take */
static const char *scen_name = "";
static struct pc_cache *scen_cache; /* for the HANG report */
static const char *volatile step_what = "setup";
static volatile uint64_t step_off;

/* What the scenario is doing now: the watchdog names it if it hangs. */
static void step(const char *what, uint64_t off)
{
	step_what = what;
	step_off = off;
}

static void child_watchdog(int sig)
{
	(void)sig;
	struct pc_stats s;
	pc_cache_stats(scen_cache, &s); /* lock-free loads of counters */
	char msg[768];
	int n = snprintf(msg, sizeof(msg),
			 "HANG: %s did not finish in %u s; stuck in %s (offset %llu); cache: dirty %llu, "
			 "writeback %llu, write_errors %llu, throttle_waits %llu\n",
			 scen_name, watchdog_s, step_what, (unsigned long long)step_off, (unsigned long long)s.dirty_bytes,
			 (unsigned long long)s.writeback_bytes, (unsigned long long)s.write_errors,
			 (unsigned long long)s.throttle_waits);
	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(CHILD_HANG);
}

static struct pc_cache *new_cache(void)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = CACHE_MEM;
	step("pc_cache_new", 0);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	scen_cache = c;
	return c;
}

static int destroy_cache(struct pc_cache *c)
{
	step("pc_cache_destroy", 0);
	int r = pc_cache_destroy(c);
	int e = errno;
	scen_cache = NULL;
	errno = e;
	return r;
}

/* Errors a write may report on a full file system: ENOSPC, or EIO from a
 * writer the throttle held while writeback failed. */
static bool nospace_write_errno(int e)
{
	return e == ENOSPC || e == EIO;
}

/* The end of the record [.., end) holding offset off: records sit at
 * multiples of REC (after a short write the record's rest is written). */
static uint64_t record_end(uint64_t off, uint64_t limit)
{
	return tu_min_u64(tu_round_down(off, REC) + REC, limit);
}

static uint8_t scratch[REC];

/* First offset in [0, n) where b differs from pattern `seed` at file
 * offset off + i, or n. */
static size_t pattern_mismatch(const uint8_t *b, size_t n, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < n; i += sizeof(scratch)) {
		size_t len = (size_t)tu_min_u64(sizeof(scratch), n - i);
		tu_fill_pattern(scratch, len, seed, off + i);
		if (memcmp(b + i, scratch, len) != 0)
			for (size_t j = 0; j < len; j++)
				if (b[i + j] != scratch[j])
					return i + j;
	}
	return n;
}

/*
 * The backing file, read with plain O_DIRECT reads (no cache involved):
 * [0, ack) holds pattern `seed`, its size is within [size_min, size_max],
 * and every byte of [ack, size) is zero or the pattern (the rest of a
 * failed write may have reached the disk: POSIX allows it; noted).
 */
static void check_disk(const char *path, uint64_t seed, uint64_t ack, uint64_t size_min, uint64_t size_max)
{
	step("reading the backing file", 0);
	size_t size;
	uint8_t *disk = tu_read_backing(path, &size);
	if (size < size_min || size > size_max) {
		fprintf(stderr, "   %s: backing size %zu, expected %llu..%llu\n", path, size,
			(unsigned long long)size_min, (unsigned long long)size_max);
		CHECK(size >= size_min && size <= size_max);
	}
	size_t n = (size_t)tu_min_u64(ack, size);
	size_t bad = pattern_mismatch(disk, n, seed, 0);
	if (bad < n)
		fprintf(stderr, "   %s: acknowledged byte %zu is 0x%02x on disk, written 0x%02x\n", path, bad, disk[bad],
			tu_pattern_byte(seed, bad));
	CHECK(bad == n);
	size_t garbage = 0, leftover = 0;
	for (size_t i = n; i < size; i++) {
		if (!disk[i])
			continue;
		if (disk[i] == tu_pattern_byte(seed, i))
			leftover++;
		else if (!garbage++)
			fprintf(stderr, "   %s: unacknowledged byte %zu is 0x%02x: neither written nor zero\n", path, i,
				disk[i]);
	}
	CHECK(garbage == 0);
	if (leftover)
		printf("   note: %zu bytes of failed writes reached %s past the acknowledged %llu\n", leftover, path,
		       (unsigned long long)ack);
	free(disk);
}

/* Every acknowledged byte [0, ack) reads back through the cache. */
static void check_cached_reads(struct pc_file *h, uint64_t seed, uint64_t ack)
{
	uint8_t *buf = malloc(MiB);
	REQUIRE(buf);
	for (uint64_t off = 0; off < ack; off += MiB) {
		size_t len = (size_t)tu_min_u64(MiB, ack - off);
		step("pc_pread of acknowledged data", off);
		ssize_t r = pc_pread(h, buf, len, (off_t)off, 0);
		CHECK(r == (ssize_t)len);
		size_t bad = r == (ssize_t)len ? pattern_mismatch(buf, len, seed, off) : len;
		if (bad < len) {
			fprintf(stderr, "   read back through the cache: byte %llu is 0x%02x, written 0x%02x\n",
				(unsigned long long)(off + bad), buf[bad], tu_pattern_byte(seed, off + bad));
			CHECK(bad == len);
			break;
		}
	}
	free(buf);
}

/* pc_pwrite, retrying EAGAIN for PC_NOWAIT: such a writer must get the
 * error in the end, not EAGAIN for ever (the watchdog reports it if not). */
static ssize_t write_retrying(struct pc_file *h, const uint8_t *buf, size_t len, uint64_t off, int flags)
{
	for (;;) {
		step("pc_pwrite", off);
		ssize_t r = pc_pwrite(h, buf, len, (off_t)off, flags);
		if (r >= 0 || errno != EAGAIN || !(flags & PC_NOWAIT))
			return r;
		step("pc_pwrite PC_NOWAIT returning EAGAIN again and again", off);
		usleep(1000);
	}
}

/* pwrite on a plain descriptor (the kernel control), naming the step. */
static ssize_t kernel_write(int fd, const uint8_t *buf, size_t len, uint64_t off)
{
	step("pwrite (kernel)", off);
	return pwrite(fd, buf, len, (off_t)off);
}

/* The result of writing records until the file system runs out. */
struct wrun {
	uint64_t ack;      /* [0, ack) acknowledged: returned as written */
	uint64_t tried;    /* end of the furthest write attempted */
	int err;           /* the write error, 0 if every write succeeded */
	unsigned shorts;   /* short writes */
};

/*
 * Write pattern `seed` in records from offset 0 to `end` until a write
 * fails, through h (flags) or, when h is NULL, the plain descriptor fd.
 * CHECKs the rules of a write on a full file system: the error is ENOSPC
 * (or EIO); a short write (other than PC_NOWAIT's) is followed by a failing
 * write; and a new write at the failing offset fails again.
 */
static struct wrun write_until_error(struct pc_file *h, int fd, int flags, uint64_t seed, uint64_t end)
{
	struct wrun w = { 0, 0, 0, 0 };
	uint8_t *buf = malloc(REC);
	REQUIRE(buf);
	bool expect_failure = false;
	uint64_t off = 0;
	while (off < end) {
		size_t len = (size_t)(record_end(off, end) - off);
		tu_fill_pattern(buf, len, seed, off);
		ssize_t r = h ? write_retrying(h, buf, len, off, flags) : kernel_write(fd, buf, len, off);
		if (off + len > w.tried)
			w.tried = off + len;
		if (r < 0) {
			w.err = errno;
			break;
		}
		if (expect_failure) {
			fprintf(stderr, "   the write after a short write wrote %zd bytes at %llu\n", r,
				(unsigned long long)off);
			CHECK(!expect_failure);
		}
		off += (uint64_t)r;
		expect_failure = (size_t)r < len && !(flags & PC_NOWAIT);
		w.shorts += (size_t)r < len;
	}
	w.ack = off;
	if (w.err) {
		if (!nospace_write_errno(w.err))
			fprintf(stderr, "   write at %llu failed with %s\n", (unsigned long long)off, strerror(w.err));
		CHECK(nospace_write_errno(w.err));
		/* Nothing freed space: a new write there fails as well. */
		size_t len = (size_t)(record_end(off, end) - off);
		tu_fill_pattern(buf, len, seed, off);
		ssize_t r = h ? write_retrying(h, buf, len, off, flags) : kernel_write(fd, buf, len, off);
		if (r >= 0) {
			fprintf(stderr, "   a write right after %s wrote %zd bytes at %llu\n", strerror(w.err), r,
				(unsigned long long)off);
			w.ack += (uint64_t)r;
		}
		CHECK(r < 0 && nospace_write_errno(errno));
	}
	free(buf);
	return w;
}

static void print_run(const struct wrun *w)
{
	printf("   writes: %s after %.2f MiB acknowledged (%u short)\n", w->err ? strerror(w->err) : "no error",
	       (double)w->ack / MiB, w->shorts);
}

/* Delete the filler: space is back. */
static void free_space(const struct fs *f)
{
	step("deleting the filler", 0);
	uint64_t before = free_bytes(f->mnt);
	struct stat st;
	REQUIRE(stat(f->filler, &st) == 0);
	REQUIRE(unlink(f->filler) == 0);
	sync_fs(f->mnt);
	/* XFS frees a deleted file's blocks in the background. */
	step("waiting for the filler's space", 0);
	CHECK(TU_POLL(free_bytes(f->mnt) >= before + (uint64_t)st.st_size / 2, 10000));
	printf("   filler deleted: %llu MiB free\n", (unsigned long long)(free_bytes(f->mnt) / MiB));
}

static void victim_path(char *out, size_t n, const struct fs *f)
{
	test_path(out, n, f->mnt, "victim");
}

/* A file `size` bytes long, all hole, made with plain calls. */
static void make_sparse(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)size) == 0);
	close(fd);
}

/* Write one more record at w->ack now that there is space: it must be
 * accepted whole (the file is not stuck in its error). */
static void write_after_recovery(struct pc_file *h, int fd, int flags, uint64_t seed, struct wrun *w, uint64_t end)
{
	if (w->ack >= end)
		return;
	size_t len = (size_t)(record_end(w->ack, end) - w->ack);
	uint8_t *buf = malloc(len);
	REQUIRE(buf);
	tu_fill_pattern(buf, len, seed, w->ack);
	ssize_t r = h ? write_retrying(h, buf, len, w->ack, flags) : kernel_write(fd, buf, len, w->ack);
	CHECK(r == (ssize_t)len);
	if (r > 0)
		w->ack += (uint64_t)r;
	if (w->ack > w->tried)
		w->tried = w->ack;
	free(buf);
}

/* ------------------------------------------------- kernel control */

static void scenario_kernel(const struct fs *f, bool holes, uint64_t seed)
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

/* ------------------------------------------------ through pagecache */

/* pc_fsync while the file system is full: 0 (everything acknowledged had
 * its space) or ENOSPC; it must be ENOSPC if no write reported the error. */
static void fsync_while_full(struct pc_file *h, const struct wrun *w)
{
	step("pc_fsync while full", 0);
	errno = 0;
	int r = pc_fsync(h);
	int e = errno;
	printf("   pc_fsync while full: %s (dirty %.2f MiB)\n", r ? strerror(e) : "0",
	       (double)tu_stats(scen_cache).dirty_bytes / MiB);
	CHECK(r == 0 || e == ENOSPC);
	if (!w->err)
		CHECK(r == -1 && e == ENOSPC);
}

/*
 * Space is back: the next pc_fsync writes everything and succeeds.  It may
 * first report, once, a writeback error met before the space came back
 * (errseq: each handle sees every error once, and the flusher retries
 * failed data on its own), and only if the counter of failed device
 * writes grew between the last fsync and the space coming back; the fsync
 * after it must then succeed.
 */
static void fsync_after_space_returns(struct pc_file *h, const struct fs *f, uint64_t errors_at_last_fsync)
{
	free_space(f);
	step("waiting for writeback in flight", 0);
	(void)TU_POLL(tu_stats(scen_cache).writeback_bytes == 0, 5000);
	uint64_t errors_before = tu_stats(scen_cache).write_errors;
	step("pc_fsync after space came back", 0);
	errno = 0;
	int r = pc_fsync(h);
	int e = errno;
	if (r != 0) {
		bool stale = e == ENOSPC && errors_before > errors_at_last_fsync;
		printf("   first pc_fsync after freeing space: %s (%s)\n", strerror(e),
		       stale ? "an error from before the space came back" : "unexplained");
		CHECK(stale);
		step("second pc_fsync after space came back", 0);
		r = pc_fsync(h);
	}
	CHECK(r == 0);
}

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

/* append/MODE and holes/MODE: see the comment at the top. */
static void scenario_pagecache(const struct fs *f, bool holes, int flags, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	if (holes)
		make_sparse(path, TOTAL);
	struct pc_cache *c = new_cache();
	step("pc_open", 0);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | (holes ? 0 : O_TRUNC), 0644);
	REQUIRE(h);

	struct wrun w = write_until_error(h, -1, flags, seed, TOTAL);
	print_run(&w);
	if (flags & (PC_DSYNC | PC_DIRECT))
		CHECK(w.err != 0); /* data goes to the device in the call */
	if (!holes) /* past 1 MiB an append reserves its space: ENOSPC in the call */
		CHECK(w.err == ENOSPC);
	check_cached_reads(h, seed, w.ack);
	if (flags & PC_DSYNC) /* durable on return; the size may be rounded up */
		check_disk(path, seed, w.ack, holes ? TOTAL : w.ack, holes ? TOTAL : UINT64_MAX);
	fsync_while_full(h, &w);
	uint64_t errors_at_fsync = tu_stats(c).write_errors;

	bool small_ok = false;
	if (holes)
		others_not_stalled(c, f, seed, &small_ok);

	fsync_after_space_returns(h, f, errors_at_fsync);
	if (holes)
		reap_small_file(c, f);
	write_after_recovery(h, -1, flags, seed, &w, TOTAL);
	step("pc_fsync after the new write", 0);
	CHECK(pc_fsync(h) == 0);
	step("pc_close", 0);
	CHECK(pc_close(h) == 0);
	CHECK(destroy_cache(c) == 0);
	check_disk(path, seed, w.ack, holes ? TOTAL : w.ack, holes ? TOTAL : w.tried);
	if (holes)
		check_others_on_disk(f, seed, small_ok);
}

/* destroy/open, destroy/closed: pc_cache_destroy on the full file system. */
static void scenario_destroy(const struct fs *f, bool close_first, uint64_t seed)
{
	char path[PATH_MAX];
	victim_path(path, sizeof(path), f);
	make_sparse(path, TOTAL);
	int flags = close_first ? PC_DONTCACHE : 0;
	struct pc_cache *c = new_cache();
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

/* ------------------------------------------------------------ driver */

struct mode {
	const char *name;
	int flags;
	bool quick; /* also with PC_TEST_QUICK=1 */
};

static const struct mode modes[] = {
	{ "dsync", PC_DSYNC, false },
	{ "direct", PC_DIRECT, true },
	{ "buffered", 0, true },
	{ "dontcache", PC_DONTCACHE, true },
	{ "nowait", PC_NOWAIT, false },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

enum kind { KERNEL_APPEND, KERNEL_HOLES, PC_APPEND, PC_HOLES, DESTROY_OPEN, DESTROY_CLOSED };

static void run_scenario(const struct fs *f, enum kind k, const struct mode *m, uint64_t seed)
{
	switch (k) {
	case KERNEL_APPEND: scenario_kernel(f, false, seed); break;
	case KERNEL_HOLES: scenario_kernel(f, true, seed); break;
	case PC_APPEND: scenario_pagecache(f, false, m->flags, seed); break;
	case PC_HOLES: scenario_pagecache(f, true, m->flags, seed); break;
	case DESTROY_OPEN: scenario_destroy(f, false, seed); break;
	case DESTROY_CLOSED: scenario_destroy(f, true, seed); break;
	}
}

static unsigned max_hangs = 3, hangs, failures;
static char failed_names[4096];

static void parent_watchdog(int sig)
{
	(void)sig;
	/* The child's own watchdog did not end it (stuck in the kernel?). */
	if (child_pid > 0)
		kill(child_pid, SIGKILL);
}

/* Run one scenario in a child process on a new, filled file system f,
 * removed afterwards; false if it failed or hung. */
static bool run_child(struct fs *f, const char *name, enum kind k, const struct mode *m, uint64_t seed)
{
	bool ready = fs_setup(f) && fs_fill(f);
	if (!ready) {
		fprintf(stderr, "%s: could not set up a full %s file system\n", name, f->type);
		CHECK(ready);
		fs_teardown(f, true);
		return false;
	}
	printf("%s: %llu KiB free, seed %llu\n", name, (unsigned long long)(free_bytes(f->mnt) / KiB),
	       (unsigned long long)seed);
	fflush(stdout);
	double t0 = tu_now_s();
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		/* Die with the parent (even by SIGKILL): the mounts then go
		 * with the namespace. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != owner)
			_exit(1);
		scen_name = name;
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGALRM, child_watchdog);
		alarm(watchdog_s);
		run_scenario(f, k, m, seed);
		alarm(0);
		printf("   checks: %u passed, %u failed\n", tu_passed, tu_failed);
		fflush(stdout);
		fflush(stderr);
		_exit(tu_failed ? 1 : 0); /* _exit: the parent's atexit cleanup is not ours */
	}
	child_pid = pid;
	alarm(watchdog_s + 30);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		REQUIRE(errno == EINTR);
	alarm(0);
	child_pid = 0;
	fs_teardown(f, true);
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	bool hung = (WIFEXITED(st) && WEXITSTATUS(st) == CHILD_HANG) || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	if (hung)
		hangs++;
	if (!ok) {
		failures++;
		size_t len = strlen(failed_names);
		snprintf(failed_names + len, sizeof(failed_names) - len, " %s%s", name, hung ? "(HANG)" : "");
	}
	printf("%s: %s (%.1f s)\n", name,
	       ok ? "ok" : hung ? "FAILED: HANG" : WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "FAILED",
	       tu_now_s() - t0);
	CHECK(ok);
	return ok;
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	return s && *s ? (unsigned)strtoul(s, NULL, 0) : dflt;
}

/* In CI (CI set, as .ci/run's caller does) the full-disk rules must be
 * tested for real: what would be a skip elsewhere fails the test there. */
static bool ci_forbids_skip(void)
{
	const char *ci = getenv("CI");
	if (!ci || !*ci || strcmp(ci, "0") == 0 || strcmp(ci, "false") == 0)
		return false;
	printf("test_fullfs: FAILED: CI is set, so the skip above is a failure (run as root with loop devices, "
	       "mkfs.ext4 and mkfs.xfs)\n");
	return true;
}

/* Everything that must hold for the test to run here; false: skip. */
static bool can_run(void)
{
	if (geteuid() != 0) {
		printf("test_fullfs: SKIP: needs root (losetup, mkfs, mount)\n");
		return false;
	}
	if (access("/dev/loop-control", R_OK | W_OK) != 0) {
		printf("test_fullfs: SKIP: no /dev/loop-control (%s)\n", strerror(errno));
		return false;
	}
	return true;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!can_run())
		return ci_forbids_skip() ? 1 : SKIP_CODE;
	watchdog_s = env_uint("PC_FULLFS_WATCHDOG", 60);
	max_hangs = env_uint("PC_FULLFS_MAX_HANGS", 3);
	const char *only = getenv("PC_FULLFS_ONLY");
	bool quick = getenv("PC_TEST_QUICK") != NULL;

	owner = getpid();
	remove_stale_dirs();
	const char *d = test_dir("fullfs");
	REQUIRE(strlen(d) < sizeof(top));
	memcpy(top, d, strlen(d) + 1);
	test_path(other_path, sizeof(other_path), top, "other");
	atexit(cleanup);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = parent_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = parent_watchdog;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	private_mounts();

	/* Can each kind of file system be made, attached and mounted here? */
	unsigned usable = 0;
	for (size_t i = 0; i < NFS; i++) {
		usable += fss[i].usable = fs_setup(&fss[i]);
		fs_teardown(&fss[i], true);
	}
	for (size_t i = 0; i < NFS; i++)
		if (!fss[i].usable)
			printf("test_fullfs: SKIP: %s could not be set up on a loop device\n", fss[i].type);
	if (usable < NFS && ci_forbids_skip())
		return 1;
	if (!usable)
		return SKIP_CODE;

	struct plan {
		enum kind kind;
		const char *name;
		bool per_mode;
	} plan[] = {
		{ KERNEL_APPEND, "kernel/append", false }, { KERNEL_HOLES, "kernel/holes", false },
		{ PC_APPEND, "append", true },             { PC_HOLES, "holes", true },
		{ DESTROY_OPEN, "destroy/open", false },   { DESTROY_CLOSED, "destroy/closed", false },
	};
	double t0 = tu_now_s();
	uint64_t seed = 1;
	unsigned not_run = 0;
	for (size_t p = 0; p < sizeof(plan) / sizeof(plan[0]); p++) {
		for (size_t mi = 0; mi < (plan[p].per_mode ? NMODES : 1); mi++) {
			const struct mode *m = plan[p].per_mode ? &modes[mi] : NULL;
			if (m && quick && !m->quick)
				continue;
			for (size_t i = 0; i < NFS; i++) {
				struct fs *f = &fss[i];
				char name[128];
				snprintf(name, sizeof(name), "%s/%s%s%s", f->type, plan[p].name, m ? "/" : "",
					 m ? m->name : "");
				seed++;
				if (!f->usable || (only && !strstr(name, only)))
					continue;
				bool kernel = plan[p].kind == KERNEL_APPEND || plan[p].kind == KERNEL_HOLES;
				if (!kernel && max_hangs && hangs >= max_hangs) {
					not_run++;
					continue;
				}
				run_child(f, name, plan[p].kind, m, seed);
			}
		}
	}
	if (not_run)
		printf("test_fullfs: %u scenarios not run after %u hangs (PC_FULLFS_MAX_HANGS=0 runs them all)\n",
		       not_run, hangs);
	if (failures)
		printf("test_fullfs: failed:%s\n", failed_names);
	printf("test_fullfs: %.1f s\n", tu_now_s() - t0);
	CHECK(not_run == 0);
	return test_done();
}
