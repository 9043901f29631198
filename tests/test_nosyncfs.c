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
 * Needs root, mount(8) with loop support and mkfs.ext4; exits 77 (skipped)
 * without them, except with CI set (as CI runs it), where a skip fails.
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

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static char dir[4200], img[4300], mnt[4300];

static bool setup_hidden_ext4(int *dirfd)
{
	char cmd[9000];
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	if (mkdir(mnt, 0755) != 0)
		return false;
	snprintf(cmd, sizeof(cmd), "truncate -s 64M '%s' && mkfs.ext4 -q -F -b 4096 '%s' >/dev/null 2>&1", img, img);
	if (run(cmd) != 0)
		return false;
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return false;
	snprintf(cmd, sizeof(cmd), "mount -o loop '%s' '%s' 2>/dev/null", img, mnt);
	if (run(cmd) != 0)
		return false;
	char sub[4400];
	snprintf(sub, sizeof(sub), "%s/d", mnt);
	if (mkdir(sub, 0755) != 0 || (*dirfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	/* The mount point's path now leads to the tmpfs: the cache finds no
	 * descriptor of the ext4 for syncfs. */
	return mount("tmpfs", mnt, "tmpfs", 0, "size=1m") == 0;
}

static void write_closed(struct pc_cache *c, int dirfd, const char *name, const char *data, size_t len)
{
	struct pc_file *f = pc_openat(c, dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	CHECK(pc_pwrite(f, data, len, 0, 0) == (ssize_t)len);
	CHECK(pc_close(f) == 0);
}

/* A closed file's end, written through the kernel, is on the device once
 * the file gives its descriptor up (long before the kernel's own 30 s
 * write-back would have written it). */
static void test_synced_when_descriptor_goes(int dirfd)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 16u << 20;
	cfg.max_closed_files = 1;
	cfg.dirty_expire_ms = 100;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	char data[5000];
	memset(data, 'a', sizeof(data));
	write_closed(c, dirfd, "f1", data, sizeof(data));
	/* The flusher writes f1 through the kernel: dirty there first. */
	long seen = 0;
	(void)TU_POLL((seen = kernel_unwritten(dirfd, "f1")) != 0, 5000);
	if (seen < 0) {
		printf("test_nosyncfs: no cachestat(2): skipped\n");
		pc_cache_destroy(c);
		exit(77);
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
}

/* A skip, or with CI set a failure: CI must run this test. */
static int skipped(void)
{
	if (getenv("CI")) {
		printf("test_nosyncfs: CI is set: a skip is a failure\n");
		return 1;
	}
	return 77;
}

int main(void)
{
	if (geteuid() != 0) {
		printf("test_nosyncfs: needs root (mount): skipped\n");
		return skipped();
	}
	tu_exit_guard();
	snprintf(dir, sizeof(dir), "%s", test_dir("nosyncfs"));
	/* The child (its own mount namespace) runs the test; a hang fails it. */
	pid_t pid = tu_fork_alone(300);
	if (pid == 0) {
		int dirfd;
		if (!setup_hidden_ext4(&dirfd)) {
			printf("test_nosyncfs: no loop mount here (%s): skipped\n", strerror(errno));
			fflush(stdout);
			_exit(77);
		}
		test_synced_when_descriptor_goes(dirfd);
		close(dirfd);
		umount2(mnt, MNT_DETACH); /* the tmpfs */
		umount2(mnt, MNT_DETACH); /* the ext4: its loop device goes with it */
		int rc = test_done();
		fflush(stdout);
		_exit(rc);
	}
	int st = tu_wait_child(pid, 310);
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	run(cmd);
	if (st == 77)
		return skipped();
	return st ? 1 : 0;
}
