/*
 * test_nosyncfs - closed small files on a file system whose mount point
 * the cache cannot open, so pc_cache_destroy has no syncfs for it
 * (fs_sync.c): what went through the kernel's page cache (a closed file
 * of at most 64 KiB) must be fdatasynced before the file's descriptor is
 * given up, else nothing would ever sync it or hear its error.
 *
 * Set-up, in a private mount namespace: a small ext4 on a loop device
 * (mount -o loop), a directory descriptor into it, then a tmpfs mounted
 * over its mount point, which hides the mount point's path while the
 * directory descriptor still reaches the ext4.  max_closed_files = 1, so
 * the second settled file makes the first give its descriptor up.
 *
 * Needs root, mount(8) with loop support, mkfs.ext4 and cachestat(2); the
 * case is skipped without them (TEST_SKIP: a failure where CI is set).  A
 * child in its own mount namespace runs it and reports its checks back.
 */
#include "testutil.h"

#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct cs_range {
	uint64_t off, len;
};
struct cs {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages of the file the kernel's page cache holds dirty or under
 * write-back; -1 if cachestat(2) is missing. */
static long kernel_unwritten(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct cs_range r = { 0, 0 };
	struct cs s;
	long n = syscall(__NR_cachestat, fd, &r, &s, 0) == 0 ? (long)(s.nr_dirty + s.nr_writeback) : -1;
	close(fd);
	return n;
}

/* The exit status of the shell command (errno left 0: a command's
 * failure is no system call's). */
static int run(const char *cmd)
{
	int st = system(cmd);
	errno = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static const char *dir;
static char img[4300], mnt[4300];

/* tu_fork needs the exit guard before any cache; the scratch directory
 * holds the image and the mount point. */
static void setup(void)
{
	tu_exit_guard();
	dir = test_dir("nosyncfs");
}

static void teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(setup, teardown)

/* What the child sends back: its checks, or why it could not run. */
struct child_report {
	unsigned passed, failed;
	char skip[200];
};

/* NULL, or the step that failed (errno set if a system call did). */
static const char *setup_hidden_ext4(int *dirfd)
{
	char cmd[9000];
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	if (mkdir(mnt, 0755) != 0)
		return "mkdir of the mount point";
	snprintf(cmd, sizeof(cmd), "truncate -s 64M '%s' && mkfs.ext4 -q -F -b 4096 '%s' >/dev/null 2>&1", img, img);
	if (run(cmd) != 0)
		return "no mkfs.ext4 (or truncate failed)";
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return "no private mount namespace";
	snprintf(cmd, sizeof(cmd), "mount -o loop '%s' '%s' 2>/dev/null", img, mnt);
	if (run(cmd) != 0)
		return "mount -o loop failed";
	char sub[4400];
	snprintf(sub, sizeof(sub), "%s/d", mnt);
	if (mkdir(sub, 0755) != 0 || (*dirfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return "mkdir in the ext4";
	/* The mount point's path now leads to the tmpfs: the cache finds no
	 * descriptor of the ext4 for syncfs. */
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0)
		return "mount of the tmpfs over it";
	return NULL;
}

static void write_closed(struct pc_cache *c, int dirfd, const char *name, const char *data, size_t len)
{
	struct pc_file *f = pc_openat(c, dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	CHECK(pc_pwrite(f, data, len, 0, 0) == (ssize_t)len);
	CHECK(pc_close(f) == 0);
}

/* In the child: why it cannot run, sent to the parent, then exit 77. */
static _Noreturn void child_skip(int report_fd, struct child_report *r, const char *why)
{
	snprintf(r->skip, sizeof(r->skip), "%s", why);
	ssize_t w = write(report_fd, r, sizeof(*r));
	(void)w;
	fflush(NULL);
	_exit(77);
}

/* The child's part: the hidden ext4, then the closed files.  Reports its
 * checks (those since the fork) on report_fd; never returns. */
static _Noreturn void run_hidden(int report_fd)
{
	struct child_report r = { 0 };
	unsigned passed0 = tu_passed, failed0 = tu_failed;
	int dirfd;
	const char *failed = setup_hidden_ext4(&dirfd);
	if (failed) {
		char why[200];
		snprintf(why, sizeof(why), "no hidden ext4 on a loop device here: %s%s%s%s", failed,
			 errno ? " (" : "", errno ? strerror(errno) : "", errno ? ")" : "");
		child_skip(report_fd, &r, why);
	}
	struct pc_config cfg = tu_config(16u << 20);
	cfg.max_closed_files = 1;
	cfg.dirty_expire_ms = 100;
	struct pc_cache *c = tu_cache_new(&cfg);
	char data[5000];
	memset(data, 'a', sizeof(data));
	write_closed(c, dirfd, "f1", data, sizeof(data));
	/* The flusher writes f1 through the kernel: dirty there first. */
	long seen = 0;
	(void)TU_POLL((seen = kernel_unwritten(dirfd, "f1")) != 0, 5000);
	if (seen < 0) {
		pc_cache_destroy(c);
		child_skip(report_fd, &r, "no cachestat(2)");
	}
	CHECK(seen > 0); /* else the test shows nothing */
	/* Two more closed files: f1, the oldest settled one, gives its
	 * descriptor up, and its kernel-written end is synced first. */
	write_closed(c, dirfd, "f2", data, sizeof(data));
	write_closed(c, dirfd, "f3", data, sizeof(data));
	CHECK(TU_POLL(kernel_unwritten(dirfd, "f1") == 0, 10000));
	CHECK(pc_cache_destroy(c) == 0);
	/* destroy fdatasynced what still had its descriptor */
	CHECK(kernel_unwritten(dirfd, "f2") == 0);
	CHECK(kernel_unwritten(dirfd, "f3") == 0);
	close(dirfd);
	umount2(mnt, MNT_DETACH); /* the tmpfs */
	umount2(mnt, MNT_DETACH); /* the ext4: its loop device goes with it */
	r.passed = tu_passed - passed0;
	r.failed = tu_failed - failed0;
	ssize_t w = write(report_fd, &r, sizeof(r));
	(void)w;
	fflush(NULL);
	_exit(r.failed ? 1 : 0);
}

/* A closed file's end, written through the kernel, is on the device once
 * the file gives its descriptor up (long before the kernel's own 30 s
 * write-back would have written it), and destroy syncs the rest. */
TEST_CASE(closed_file_synced_when_descriptor_given_up)
{
	if (geteuid() != 0)
		TEST_SKIP("needs root (mount)");
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	/* The child (its own mount namespace) runs the test; a hang fails it. */
	pid_t pid = tu_fork_alone(300);
	if (pid == 0) {
		close(pipefd[0]);
		run_hidden(pipefd[1]);
	}
	close(pipefd[1]);
	int st = tu_wait_child(pid, 310);
	static struct child_report r; /* static: the skip reason outlives the case */
	memset(&r, 0, sizeof(r));
	bool reported = read(pipefd[0], &r, sizeof(r)) == (ssize_t)sizeof(r);
	close(pipefd[0]);
	if (reported && st == 77)
		TEST_SKIP(r.skip);
	/* The child's checks are this case's. */
	tu_passed += r.passed;
	tu_failed += r.failed;
	if (!reported || st != (r.failed ? 1 : 0)) {
		fprintf(stderr, "the child ended with status %d%s\n", st,
			reported ? "" : " without reporting its checks");
		CHECK(0);
	}
}
