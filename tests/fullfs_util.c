/*
 * fullfs_util.c - full file systems, for real, for the test_fullfs_*
 * programs (declared in fullfs_util.h): small ext4 and XFS file systems on
 * loop devices, filled up to a few MiB, and the writes and checks their
 * scenarios share.  (Reliability issue: a writer filling a full file
 * system waited for ever in the dirty throttle.)
 *
 * Each case runs its scenario with fullfs_run(): in a child process on a
 * new file system (made, mounted and filled for it: a filler file
 * fallocated up to FREE_LEFT = 4 MiB free; unmounted after it), with a
 * watchdog: a scenario that does not finish within PC_FULLFS_WATCHDOG
 * seconds (default 60) fails with a "HANG" line naming the call it was
 * stuck in and the cache's counters.  The images: ext4 64 MiB, XFS 300 MiB
 * (mkfs.xfs refuses less), 4 KiB blocks.  A scenario writes (up to) 48 MiB
 * of 47008-byte records from offset 0, until the file system is full
 * (write_until_error), through a cache of 128 MiB (the rest the defaults)
 * or, for the kernel's control, with plain pwrite; free_space() deletes
 * the filler, and check_disk() reads the file back with plain O_DIRECT.
 * The child's checks are its own: it says how many passed, and the case
 * has one check, that the child passed.
 *
 * Needs root, /dev/loop-control, mkfs.ext4 (e2fsprogs) and mkfs.xfs
 * (xfsprogs).  Without root or loop devices every case is skipped, with
 * the reason; a file system that cannot be made, attached or mounted the
 * first time skips the cases on it (TEST_SKIP: a failure under CI).
 *
 * Cleanup: the program works in a private mount namespace, so its mounts
 * are invisible outside and die with the process whatever happens; the
 * loop devices are set up with LO_FLAGS_AUTOCLEAR, so they detach when
 * their file system is unmounted; a scenario's child dies with the parent.
 * On a normal exit, SIGINT, SIGTERM or SIGHUP the parent unmounts and
 * removes its files itself.  Files live in PC_TEST_DIR/fullfs.PID (the
 * image files are sparse); a later run removes those of a run killed by
 * SIGKILL.
 *
 * Environment: PC_FULLFS_WATCHDOG (seconds per scenario, default 60),
 * PC_FULLFS_MAX_HANGS (after this many hangs in one process, its remaining
 * pagecache cases fail without running; default 3, 0: no limit).  The
 * count is the process's: it bounds a program run whole with many cases
 * (by hand, each hang costing PC_FULLFS_WATCHDOG seconds), never a case
 * under CTest, which runs each case in a process of its own: there a hang
 * costs that one case its watchdog's time, and every other case runs.
 *
 * Each test_fullfs_* file uses TEST_FIXTURE(fullfs_setup, fullfs_teardown)
 * and the helpers it needs.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "fullfs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#define CHILD_HANG 3         /* a scenario's exit code when its watchdog fired */
#define FREE_LEFT (4 * MiB)  /* free space left by the filler */
#define CACHE_MEM (128 * MiB)

extern char **environ;

/* ------------------------------------------------------ file systems */

/* XFS refuses file systems under 300 MB (xfsprogs >= 5.19); the image
 * files are sparse, so their size costs nothing until written. */
static struct fs fss[] = {
	[EXT4] = { .type = "ext4", .image_size = 64 * MiB },
	[XFS] = { .type = "xfs", .image_size = 300 * MiB },
};
#define NFS (sizeof(fss) / sizeof(fss[0]))

static char top[3072]; /* PC_TEST_DIR/fullfs.PID: images, mount points, other files */
char other_path[3100];     /* top/other: a file on another device */
static pid_t owner;        /* the parent: the only process that cleans up */
static volatile pid_t child_pid;
static const char *fullfs_why_not; /* set: no case can run here, and why */
static char fullfs_why_buf[256];

/* Say why setting up f failed (printed, and kept for the skip). */
__attribute__((format(printf, 2, 3))) static void fs_why(struct fs *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof(f->why), fmt, ap);
	va_end(ap);
	printf("fullfs: %s\n", f->why);
}

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
 * Attach f's image to a free loop device with LO_FLAGS_AUTOCLEAR (it detaches
 * itself when the last user, the mounted file system, goes away).  Returns
 * the open loop device (the caller closes it once the file system holds
 * it; its name in f->loopdev), or -1 with the reason in f->why.  Another process may take the device
 * LOOP_CTL_GET_FREE named first: LOOP_CONFIGURE then fails with EBUSY and
 * we ask again, as losetup does.
 */
static int loop_attach(struct fs *f)
{
	char *dev = f->loopdev;
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		fs_why(f, "/dev/loop-control: %s", strerror(errno));
		return -1;
	}
	int backing = open(f->image, O_RDWR | O_CLOEXEC);
	REQUIRE(backing >= 0);
	int lfd = -1;
	for (int tries = 0; tries < 20 && lfd < 0; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			fs_why(f, "LOOP_CTL_GET_FREE: %s", strerror(errno));
			break;
		}
		snprintf(dev, sizeof(f->loopdev), "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			fs_why(f, "%s: %s", dev, strerror(errno));
			break;
		}
		struct loop_config lc;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)backing;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		memcpy(lc.info.lo_file_name, f->image, strnlen(f->image, LO_NAME_SIZE - 1)); /* a name, cut */
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) != 0) {
			int e = errno;
			close(lfd);
			lfd = -1;
			if (e != EBUSY) {
				fs_why(f, "LOOP_CONFIGURE %s: %s", dev, strerror(e));
				break;
			}
		}
	}
	if (lfd < 0 && !f->why[0])
		fs_why(f, "no free loop device after 20 tries");
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
 * gets a new one).  false (the reason printed and in f->why) when that
 * cannot work. */
static bool fs_setup(struct fs *f)
{
	f->why[0] = 0;
	const char *mkfs_tool = strcmp(f->type, "ext4") == 0 ? "mkfs.ext4" : "mkfs.xfs";
	if (!have_tool(mkfs_tool)) {
		fs_why(f, "%s not found: no %s cases (install %s)", mkfs_tool, f->type,
		       strcmp(f->type, "ext4") == 0 ? "e2fsprogs" : "xfsprogs");
		return false;
	}
	snprintf(f->image, sizeof(f->image), "%s/%s.img", top, f->type);
	snprintf(f->mnt, sizeof(f->mnt), "%s/mnt-%s", top, f->type);
	snprintf(f->filler, sizeof(f->filler), "%s/mnt-%s/filler", top, f->type);
	int fd = open(f->image, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)f->image_size) == 0);
	close(fd);
	if (!mkfs(f)) {
		fs_why(f, "%s on %s failed", mkfs_tool, f->image);
		unlink(f->image);
		return false;
	}
	int lfd = loop_attach(f);
	if (lfd < 0) {
		unlink(f->image);
		return false;
	}
	REQUIRE(mkdir(f->mnt, 0755) == 0);
	if (mount(f->loopdev, f->mnt, f->type, 0, NULL) != 0) {
		fs_why(f, "mount %s (%s) on %s: %s", f->loopdev, f->type, f->mnt, strerror(errno));
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

/* Unmount everything and remove the files (the parent only; again: nothing). */
static void cleanup(void)
{
	if (getpid() != owner)
		return;
	for (size_t i = 0; i < NFS; i++)
		fs_teardown(&fss[i], true);
	if (top[0])
		test_rmdir(top);
	top[0] = 0;
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
		printf("fullfs: removing %s, left by a killed run\n", path);
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
		printf("fullfs: no private mount namespace (%s); mounts are visible while it runs\n",
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
			printf("fullfs: fallocate filler on %s: %s\n", f->type, strerror(errno));
			break;
		}
		filled += avail - FREE_LEFT;
		REQUIRE(fsync(fd) == 0);
		sync_fs(f->mnt);
	}
	close(fd);
	avail = free_bytes(f->mnt);
	if (avail < FREE_LEFT / 2 || avail > FREE_LEFT + MiB) {
		printf("fullfs: could not leave %llu KiB free on %s (%llu KiB free)\n",
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
void step(const char *what, uint64_t off)
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

/* The scenario's cache (CACHE_MEM, the rest the defaults): its counters
 * go into the HANG report. */
struct pc_cache *scenario_cache(void)
{
	struct pc_config cfg = tu_config(CACHE_MEM);
	step("pc_cache_new", 0);
	struct pc_cache *c = tu_cache_new(&cfg);
	scen_cache = c;
	return c;
}

int destroy_cache(struct pc_cache *c)
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
bool nospace_write_errno(int e)
{
	return e == ENOSPC || e == EIO;
}

/* The end of the record [.., end) holding offset off: records sit at
 * multiples of REC (after a short write the record's rest is written). */
uint64_t record_end(uint64_t off, uint64_t limit)
{
	return tu_min_u64(tu_round_down(off, REC) + REC, limit);
}

/*
 * The backing file, read with plain O_DIRECT reads (no cache involved):
 * [0, ack) holds pattern `seed`, its size is within [size_min, size_max],
 * and every byte of [ack, size) is zero or the pattern (the rest of a
 * failed write may have reached the disk: POSIX allows it; noted).
 */
void check_disk(const char *path, uint64_t seed, uint64_t ack, uint64_t size_min, uint64_t size_max)
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
	size_t bad = tu_pattern_mismatch(disk, n, seed, 0);
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
void check_cached_reads(struct pc_file *h, uint64_t seed, uint64_t ack)
{
	uint8_t *buf = malloc(MiB);
	REQUIRE(buf);
	for (uint64_t off = 0; off < ack; off += MiB) {
		size_t len = (size_t)tu_min_u64(MiB, ack - off);
		step("pc_pread of acknowledged data", off);
		ssize_t r = pc_pread(h, buf, len, (off_t)off, 0);
		CHECK(r == (ssize_t)len);
		size_t bad = r == (ssize_t)len ? tu_pattern_mismatch(buf, len, seed, off) : len;
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

/*
 * Write pattern `seed` in records from offset 0 to `end` until a write
 * fails, through h (flags) or, when h is NULL, the plain descriptor fd.
 * CHECKs the rules of a write on a full file system: the error is ENOSPC
 * (or EIO); a short write (other than PC_NOWAIT's) is followed by a failing
 * write; and a new write at the failing offset fails again.
 */
struct wrun write_until_error(struct pc_file *h, int fd, int flags, uint64_t seed, uint64_t end)
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

void print_run(const struct wrun *w)
{
	printf("   writes: %s after %.2f MiB acknowledged (%u short)\n", w->err ? strerror(w->err) : "no error",
	       (double)w->ack / MiB, w->shorts);
}

/* Delete the filler: space is back. */
void free_space(const struct fs *f)
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

void victim_path(char *out, size_t n, const struct fs *f)
{
	test_path(out, n, f->mnt, "victim");
}

/* A file `size` bytes long, all hole, made with plain calls. */
void make_sparse(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, (off_t)size) == 0);
	close(fd);
}

/* Write one more record at w->ack now that there is space: it must be
 * accepted whole (the file is not stuck in its error). */
void write_after_recovery(struct pc_file *h, int fd, int flags, uint64_t seed, struct wrun *w, uint64_t end)
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

/* --------------------------------------- shared by the pagecache cases */

/* pc_fsync while the file system is full: 0 (everything acknowledged had
 * its space) or ENOSPC; it must be ENOSPC if no write reported the error. */
void fsync_while_full(struct pc_file *h, const struct wrun *w)
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
void fsync_after_space_returns(struct pc_file *h, const struct fs *f, uint64_t errors_at_last_fsync)
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

/* ------------------------------------------------------------ the runner */

static unsigned max_hangs = 3, hangs; /* hangs: of this process's cases */

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	return s && *s ? (unsigned)strtoul(s, NULL, 0) : dflt;
}

/*
 * The fixture: whether anything can run here (root, loop devices: else
 * fullfs_why_not says why and every case skips), the program's directory,
 * its private mount namespace and the cleanup on exit and on signals.
 * Whether each kind of file system can be set up is learnt by the first
 * case that tries.
 */
void fullfs_setup(void)
{
	if (geteuid() != 0) {
		fullfs_why_not = "needs root (loop devices, mkfs, mount)";
		return;
	}
	if (access("/dev/loop-control", R_OK | W_OK) != 0) {
		snprintf(fullfs_why_buf, sizeof(fullfs_why_buf), "no /dev/loop-control (%s)", strerror(errno));
		fullfs_why_not = fullfs_why_buf;
		return;
	}
	watchdog_s = env_uint("PC_FULLFS_WATCHDOG", 60);
	max_hangs = env_uint("PC_FULLFS_MAX_HANGS", 3);
	owner = getpid();
	remove_stale_dirs();
	const char *d = test_dir("fullfs");
	REQUIRE(strlen(d) < sizeof(top));
	memcpy(top, d, strlen(d) + 1);
	test_path(other_path, sizeof(other_path), top, "other");
	atexit(cleanup); /* also after a REQUIRE's exit */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = parent_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	private_mounts();
}

void fullfs_teardown(void)
{
	cleanup();
}

/* The case's seed for its data: from its name, so each case writes its
 * own data, the same in every run. */
static uint64_t fullfs_seed(void)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (const char *p = tu_case_name(); *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	return h;
}

/*
 * Run scenario fn(arg) in a child process on a new, filled file system
 * fss[which], removed afterwards; the case's check: the child passed.
 * through_cache: a pagecache scenario, not run (a failure) once
 * PC_FULLFS_MAX_HANGS scenarios hung in this process (a run of several
 * cases: under CTest each case is a process of its own).
 */
void fullfs_run(int which, fullfs_scenario fn, int arg, bool through_cache)
{
	struct fs *f = &fss[which];
	const char *name = tu_case_name();
	if (fullfs_why_not)
		TEST_SKIP(fullfs_why_not);
	if (f->state == FS_FAILS)
		TEST_SKIP(f->why);
	if (through_cache && max_hangs && hangs >= max_hangs) {
		printf("%s: not run after %u hangs (PC_FULLFS_MAX_HANGS=0 runs it)\n", name, hangs);
		CHECK(hangs < max_hangs);
		return;
	}
	if (!fs_setup(f)) {
		if (f->state == FS_UNTRIED) {
			/* Never set up here: it cannot be, on this machine. */
			f->state = FS_FAILS;
			TEST_SKIP(f->why);
		}
		fprintf(stderr, "%s: could not set up a new %s file system this time: %s\n", name, f->type, f->why);
		CHECK(!"a file system that could be set up before");
		return;
	}
	f->state = FS_WORKS;
	if (!fs_fill(f)) {
		fprintf(stderr, "%s: could not fill the %s file system\n", name, f->type);
		CHECK(!"a full file system");
		fs_teardown(f, true);
		return;
	}
	uint64_t seed = fullfs_seed();
	printf("%s: %s, %llu KiB free, seed %llu\n", name, f->type, (unsigned long long)(free_bytes(f->mnt) / KiB),
	       (unsigned long long)seed);
	fflush(NULL);
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
		tu_passed = tu_failed = 0; /* the scenario's own, not the cases' before it */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGALRM, child_watchdog);
		alarm(watchdog_s);
		fn(f, arg, seed);
		alarm(0);
		printf("   checks: %u passed, %u failed\n", tu_passed, tu_failed);
		fflush(stdout);
		fflush(stderr);
		_exit(tu_failed ? 1 : 0); /* _exit: the parent's atexit cleanup is not ours */
	}
	child_pid = pid;
	/* The child's own watchdog ends it; if that does not (stuck in the
	 * kernel?), tu_wait_child kills it. */
	int st = tu_wait_child(pid, watchdog_s + 30);
	child_pid = 0;
	fs_teardown(f, true);
	bool hung = st == CHILD_HANG || st == 128 + SIGKILL;
	hangs += hung;
	printf("%s: %s (%.1f s)\n", name, st == 0 ? "ok" : hung ? "FAILED: HANG" : "FAILED", tu_now_s() - t0);
	CHECK(st == 0);
}
