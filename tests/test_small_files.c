/*
 * test_small_files.c - many small files: a close that does not wait, and
 * descriptors bounded by the open files plus a few closed ones.
 *
 *   - closed files' data reaches the device with no fsync (the flusher
 *     writes it), with the exact size, and the lock is then released:
 *     another cache can open the file;
 *   - a write error met after the last close is reported to the fsync,
 *     fdatasync or close of a handle opened later, once, or else to
 *     pc_cache_destroy; kept also when the file has given up its
 *     descriptor and its data;
 *   - PC_CFG_CLOSE_TO_OPEN: the data is on the device when pc_close
 *     returns;
 *   - 100,000 files (10,000 with PC_TEST_QUICK or a sanitizer) created,
 *     written and closed one after another under RLIMIT_NOFILE 64: never
 *     EMFILE, and the descriptors held stay within the bound; all data on
 *     the device after pc_cache_destroy;
 *   - reopening a closed file finds its data cached (no device read, no
 *     open(2) while the cache keeps the descriptor), and a change made by
 *     another program meanwhile is seen (the cached data dropped);
 *   - a file unlinked while open frees its space at its last close; one
 *     unlinked after it, within the sweep's second;
 *   - PC_CFG_FLUSH_AT_EXIT: a process that writes, closes and exit()s
 *     without pc_cache_destroy leaves its data on the device, and a write
 *     error at that flush is said and kept for a later destroy;
 *   - a small closed file goes to the backing file in one write of exactly
 *     its bytes (through the kernel, no direct write of its blocks), a
 *     larger one in direct writes plus its tail; a create without O_EXCL
 *     of a file the cache holds reuses its cached data;
 *   - two threads creating one new name at once both open it;
 *   - a created file's descriptor goes O_DIRECT only at its first direct
 *     I/O.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define FILE_BYTES 5000u

/* The children that exit() (PC_CFG_FLUSH_AT_EXIT) want the exit guard
 * in place before the first cache. */
static const char *dir;

static void small_files_setup(void)
{
	tu_exit_guard();
	dir = test_dir("small_files");
}

static void small_files_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(small_files_setup, small_files_teardown)

/* A cache of 16 MiB, folios up to 64 KiB, with these flags and this
 * max_closed_files (0: derived from RLIMIT_NOFILE). */
static struct pc_cache *cache_with(unsigned flags, unsigned max_closed)
{
	struct pc_config cfg = tu_config(16 * MiB);
	cfg.max_folio_size = 64 * KiB;
	cfg.max_closed_files = max_closed;
	cfg.flags = flags;
	return tu_cache_new(&cfg);
}

static void name_of(char *out, size_t n, const char *prefix, unsigned i)
{
	snprintf(out, n, "%s/%s%u", dir, prefix, i);
}

/* Create, write FILE_BYTES and close through the cache. */
static bool write_small_file(struct pc_cache *c, const char *path, unsigned salt)
{
	uint8_t buf[FILE_BYTES];
	tu_fill_pattern(buf, sizeof(buf), salt, 0);
	struct pc_file *f = pc_open(c, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!f)
		return false;
	bool ok = pc_pwrite(f, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf);
	return pc_close(f) == 0 && ok;
}

/* The backing file, read directly, holds exactly that file. */
static bool on_device(const char *path, unsigned salt)
{
	uint8_t want[FILE_BYTES], got[FILE_BYTES + 1];
	tu_fill_pattern(want, sizeof(want), salt, 0);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, got, sizeof(got), 0);
	close(fd);
	return n == (ssize_t)FILE_BYTES && memcmp(got, want, FILE_BYTES) == 0;
}

/* Wait (10 s should do) for the flusher to bring the file to the device. */
static bool reaches_device(const char *path, unsigned salt)
{
	return TU_POLL(on_device(path, salt), 10000);
}

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;
	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 2 ? n - 3 : 0; /* ., .. and the DIR's own */
}

/* Descriptors of files that were unlinked. */
static unsigned deleted_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char link[300], target[4200];
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(link, target, sizeof(target) - 1);
		if (l > 0) {
			target[l] = 0;
			n += strstr(target, "(deleted)") != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* Wait (ms should do) for the descriptors of unlinked files to be `want`. */
static bool deleted_fds_drop_to(unsigned want, unsigned ms)
{
	return TU_POLL(deleted_fds() == want, ms);
}

TEST_CASE(flusher_writes_closed_files)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	for (unsigned i = 0; i < 50; i++) {
		name_of(path, sizeof(path), "flushed", i);
		CHECK(write_small_file(c, path, i));
	}
	for (unsigned i = 0; i < 50; i++) {
		name_of(path, sizeof(path), "flushed", i);
		CHECK(reaches_device(path, i)); /* exact size too */
	}
	/* Settled: the lock is gone, so another cache may open it. */
	struct pc_cache *other = cache_with(0, 0);
	name_of(path, sizeof(path), "flushed", 7);
	struct pc_file *f = NULL;
	CHECK(TU_POLL((f = pc_open(other, path, O_RDWR, 0)) != NULL, 5000));
	if (f)
		CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(other) == 0);
	struct pc_stats st;
	pc_cache_stats(c, &st);
	CHECK(st.dirty_bytes == 0);
	/* Each file written once, exactly its bytes (small: through the
	 * kernel in one write). */
	CHECK(st.dev_write_bytes == 50 * FILE_BYTES);
	CHECK(st.dev_write_ios == 50);
	CHECK(pc_cache_destroy(c) == 0);
}

static uint64_t write_errors_of(struct pc_cache *c)
{
	struct pc_stats s;
	pc_cache_stats(c, &s);
	return s.write_errors;
}

/* A new cache writes path (pattern salt) and closes it; the flusher's
 * write-back then fails with EIO (fault rule *id, still in force). */
static struct pc_cache *closed_file_meets_eio_in(const char *path, unsigned salt, int *id, unsigned max_closed)
{
	struct pc_cache *c = cache_with(0, max_closed);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL, .error = EIO, .file = f };
	*id = pc_fault_inject(c, &rule);
	REQUIRE(*id >= 0);
	uint8_t buf[FILE_BYTES];
	tu_fill_pattern(buf, sizeof(buf), salt, 0);
	CHECK(pc_pwrite(f, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	CHECK(pc_close(f) == 0);
	/* The fault fires before the failed write is recorded: wait for the
	 * record (write_errors counts it after the file's errseq has it), or
	 * a handle opened meanwhile would sample before the error. */
	CHECK(TU_POLL(write_errors_of(c) > 0, 10000));
	CHECK(pc_fault_count(c, *id) > 0);
	return c;
}

static struct pc_cache *closed_file_meets_eio(const char *path, unsigned salt, int *id)
{
	return closed_file_meets_eio_in(path, salt, id, 0);
}

/* Whether the process has a descriptor of path open (/proc/self/fd). */
static bool fd_open_on(const char *path)
{
	DIR *d = opendir("/proc/self/fd");
	REQUIRE(d);
	bool found = false;
	struct dirent *e;
	char link[300], target[4300];
	while (!found && (e = readdir(d))) {
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = 0;
			found = strcmp(target, path) == 0;
		}
	}
	closedir(d);
	return found;
}

/* A handle opened after the flusher met the error sees it once at its
 * sync call (pc_fsync or pc_fdatasync); the retried call writes the data,
 * and destroy has nothing left to report. */
static void later_handle_sync_reports(const char *path, unsigned salt, int (*sync)(struct pc_file *))
{
	int id;
	struct pc_cache *c = closed_file_meets_eio(path, salt, &id);
	CHECK(pc_fault_remove(c, id) == 0);
	struct pc_file *f = pc_open(c, path, O_RDWR, 0);
	REQUIRE(f);
	errno = 0;
	CHECK(sync(f) == -1 && errno == EIO);
	CHECK(sync(f) == 0);
	CHECK(on_device(path, salt));
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(error_after_close_reported_to_later_fsync)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	later_handle_sync_reports(path, 1, pc_fsync);
}

/* Destroy reports one nobody saw. */
TEST_CASE(error_after_close_reported_by_destroy)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	int id;
	struct pc_cache *c = closed_file_meets_eio(path, 1, &id);
	errno = 0;
	CHECK(pc_cache_destroy(c) == -1 && errno == EIO);
}

/* Also when the flusher's retry wrote the data after the fault cleared:
 * the error was never seen, so destroy still reports it. */
TEST_CASE(error_reported_by_destroy_after_retry_wrote)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	int id;
	struct pc_cache *c = closed_file_meets_eio(path, 2, &id);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(TU_POLL(on_device(path, 2), 10000)); /* the flusher retried it */
	errno = 0;
	CHECK(pc_cache_destroy(c) == -1 && errno == EIO);
}

/* A later handle's fdatasync reports it as fsync does, and so does its
 * close; either way destroy has nothing left to report. */
TEST_CASE(error_after_close_reported_to_later_fdatasync)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	later_handle_sync_reports(path, 4, pc_fdatasync);
}

TEST_CASE(error_after_close_reported_to_later_close)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	int id;
	struct pc_cache *c = closed_file_meets_eio(path, 5, &id);
	CHECK(pc_fault_remove(c, id) == 0);
	struct pc_file *f = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(f);
	errno = 0;
	CHECK(pc_close(f) == -1 && errno == EIO);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * The error is kept for a later handle also when the closed file has
 * given its descriptor up (past max_closed_files) and all of its data has
 * been evicted meanwhile: the mapping, which holds the errseq, stays
 * until the error is reported.
 */
TEST_CASE(error_kept_without_descriptor_or_data)
{
	char path[4200];
	name_of(path, sizeof(path), "eio", 0);
	int id;
	struct pc_cache *c = closed_file_meets_eio_in(path, 3, &id, 2);
	CHECK(pc_fault_remove(c, id) == 0);
	CHECK(TU_POLL(on_device(path, 3), 10000)); /* retried, written */
	/* Others push its descriptor out and its data out of memory. */
	static uint8_t big[4 * MiB];
	char other[4200];
	for (unsigned i = 0; i < 8; i++) {
		name_of(other, sizeof(other), "push", i);
		struct pc_file *o = pc_open(c, other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		REQUIRE(o);
		CHECK(pc_pwrite(o, big, sizeof(big), 0, 0) == (ssize_t)sizeof(big));
		CHECK(pc_close(o) == 0);
	}
	struct stat st;
	REQUIRE(stat(path, &st) == 0);
	struct pc_file_info info;
	CHECK(TU_POLL(!fd_open_on(path), 10000));
	CHECK(TU_POLL(pc_cache_file_info(c, st.st_dev, st.st_ino, &info) == 0 && info.cached_bytes == 0, 10000));
	usleep(1500 * 1000); /* a sweep of closed files runs meanwhile */
	struct pc_file *f = pc_open(c, path, O_RDWR, 0);
	REQUIRE(f);
	errno = 0;
	CHECK(pc_fsync(f) == -1 && errno == EIO);
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0); /* reported: nothing left to report */
	for (unsigned i = 0; i < 8; i++) {
		name_of(other, sizeof(other), "push", i);
		unlink(other);
	}
}

TEST_CASE(close_to_open_data_on_device_at_close)
{
	struct pc_cache *c = cache_with(PC_CFG_CLOSE_TO_OPEN, 0);
	char path[4200];
	for (unsigned i = 0; i < 20; i++) {
		name_of(path, sizeof(path), "cto", i);
		CHECK(write_small_file(c, path, 40 + i));
		CHECK(on_device(path, 40 + i)); /* no waiting here */
		/* Settled too (exact size, lock released): another process
		 * may open it through pagecache at once. */
		struct stat st;
		struct pc_file_info info;
		CHECK(stat(path, &st) == 0 && pc_cache_file_info(c, st.st_dev, st.st_ino, &info) == 0 &&
		      !info.unsettled);
	}
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(many_files_few_descriptors)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	unsigned nfiles = 10000; /* each file costs far more there */
#else
	unsigned nfiles = getenv("PC_TEST_QUICK") ? 10000 : 100000;
#endif
	struct rlimit old;
	REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
	struct rlimit low = { 64, old.rlim_max }; /* the soft limit only */
	unsigned base = open_fds();
	REQUIRE(base + 40 < 64);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
	/* max_closed_files from the limit: 64 / 4 = 16 (and as many with
	 * data still to write). */
	struct pc_cache *c = cache_with(0, 0);
	CHECK(c->cfg.max_closed_files == 16);
	char path[4200];
	unsigned failed = 0, most_fds = 0;
	for (unsigned i = 0; i < nfiles; i++) {
		name_of(path, sizeof(path), "many", i);
		if (!write_small_file(c, path, i) && failed++ < 5)
			fprintf(stderr, "file %u: %s\n", i, strerror(errno));
		if (i % 1000 == 0) {
			unsigned n = open_fds();
			most_fds = n > most_fds ? n : most_fds;
		}
	}
	CHECK(failed == 0);
	/* open files (none) + 16 settled + 16 still to write, + the ring's
	 * and the DIR's: well inside the limit. */
	CHECK(most_fds <= base + 16 + 16 + 4);
	CHECK(pc_cache_destroy(c) == 0);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
	unsigned bad = 0;
	for (unsigned i = 0; i < nfiles; i++) {
		name_of(path, sizeof(path), "many", i);
		if ((i % 97 == 0 || i + 10 >= nfiles) && !on_device(path, i))
			bad++;
		unlink(path);
	}
	CHECK(bad == 0);
	printf("%u files, at most %u descriptors (base %u)\n", nfiles, most_fds, base);
}

TEST_CASE(reopen_cached_and_revalidated)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	name_of(path, sizeof(path), "reopen", 0);
	CHECK(write_small_file(c, path, 5));
	CHECK(reaches_device(path, 5));
	CHECK(tu_settled(c, path));
	struct pc_stats before, after;
	pc_cache_stats(c, &before);
	uint8_t got[FILE_BYTES], want[FILE_BYTES];
	tu_fill_pattern(want, sizeof(want), 5, 0);
	for (int i = 0; i < 10; i++) {
		struct pc_file *f = pc_open(c, path, O_RDONLY, 0);
		REQUIRE(f);
		CHECK(pc_pread(f, got, sizeof(got), 0, 0) == (ssize_t)sizeof(got));
		CHECK(memcmp(got, want, sizeof(got)) == 0);
		CHECK(pc_close(f) == 0);
	}
	pc_cache_stats(c, &after);
	CHECK(after.dev_read_ios == before.dev_read_ios); /* all hits */

	/* Times set through the cache keep the data cached; set directly
	 * (a new ctime), they would not (the rewrite below shows that a
	 * change is still noticed). */
	struct stat bst;
	REQUIRE(stat(path, &bst) == 0);
	struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1000000000, .tv_nsec = 5 } };
	int pfd = open(path, O_PATH);
	REQUIRE(pfd >= 0);
	CHECK(pc_cache_file_set_times(c, pfd, tv) == 0);
	REQUIRE(stat(path, &bst) == 0);
	CHECK(bst.st_mtim.tv_sec == 1000000000 && bst.st_mtim.tv_nsec == 5);
	pc_cache_stats(c, &before);
	struct pc_file *t = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(t);
	CHECK(pc_pread(t, got, sizeof(got), 0, 0) == (ssize_t)sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
	/* Open: set, and still nothing read. */
	CHECK(pc_cache_file_set_times(c, pfd, tv) == 0);
	CHECK(pc_close(t) == 0);
	pc_cache_stats(c, &after);
	CHECK(after.dev_read_ios == before.dev_read_ios);
	errno = 0;
	CHECK(pc_cache_file_set_times(c, -1, tv) == -1 && errno == EBADF);
	errno = 0;
	CHECK(pc_cache_file_set_times(c, pfd, NULL) == -1 && errno == EINVAL);

	/* Another program rewrites it: the reopen sees the new data. */
	tu_fill_pattern(want, sizeof(want), 6, 0);
	int fd = open(path, O_WRONLY);
	REQUIRE(fd >= 0);
	CHECK(pwrite(fd, want, sizeof(want), 0) == (ssize_t)sizeof(want));
	close(fd);
	/* Times set through the cache after that do not hide the change. */
	CHECK(pc_cache_file_set_times(c, pfd, tv) == 0);
	close(pfd);
	struct pc_file *f = pc_open(c, path, O_RDONLY, 0);
	REQUIRE(f);
	CHECK(pc_pread(f, got, sizeof(got), 0, 0) == (ssize_t)sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
	CHECK(pc_close(f) == 0);

	/* A file this cache never wrote, only read: its data stays cached
	 * across reopens too. */
	char rpath[4200];
	name_of(rpath, sizeof(rpath), "reopen", 1);
	fd = open(rpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	CHECK(pwrite(fd, want, sizeof(want), 0) == (ssize_t)sizeof(want));
	close(fd);
	pc_cache_stats(c, &before);
	for (int i = 0; i < 5; i++) {
		struct pc_file *r = pc_open(c, rpath, O_RDONLY, 0);
		REQUIRE(r);
		CHECK(pc_pread(r, got, sizeof(got), 0, 0) == (ssize_t)sizeof(got));
		CHECK(pc_close(r) == 0);
	}
	pc_cache_stats(c, &after);
	CHECK(after.dev_read_ios - before.dev_read_ios <= 1); /* the first miss only */

	/* A reopen for writing that another cache's reader refuses leaves no
	 * lock behind: once that reader is gone, writers get in. */
	struct pc_cache *other = cache_with(0, 0);
	struct pc_file *reader = pc_open(other, rpath, O_RDONLY, 0);
	REQUIRE(reader);
	errno = 0;
	CHECK(pc_open(c, rpath, O_RDWR, 0) == NULL && errno == EBUSY);
	CHECK(pc_close(reader) == 0);
	struct pc_file *writer = pc_open(other, rpath, O_RDWR, 0);
	CHECK(writer != NULL);
	if (writer)
		CHECK(pc_close(writer) == 0);
	CHECK(pc_cache_destroy(other) == 0);

	/* A chmod since the last open(2): opened again, and refused when the
	 * mode forbids it to a caller without root's override. */
	CHECK(chmod(path, 0400) == 0);
	f = pc_open(c, path, O_RDONLY, 0);
	CHECK(f != NULL);
	if (f)
		CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(unlinked_file_space_freed)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	name_of(path, sizeof(path), "unlinked", 0);
	unsigned before = deleted_fds();
	/* Unlinked while open: freed at the last close. */
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	uint8_t *buf = calloc(1, 4 * MiB);
	REQUIRE(buf);
	CHECK(pc_pwrite(f, buf, 4 * MiB, 0, 0) == (ssize_t)(4 * MiB));
	CHECK(unlink(path) == 0);
	CHECK(deleted_fds() == before + 1);
	CHECK(pc_close(f) == 0);
	/* The sweep finds it within about a second (its data is never
	 * written: the file is gone). */
	CHECK(deleted_fds_drop_to(before, 3000));
	struct pc_stats st;
	pc_cache_stats(c, &st);
	CHECK(st.dirty_bytes == 0);

	/* Unlinked after the last close: the sweep frees it. */
	CHECK(write_small_file(c, path, 9));
	CHECK(reaches_device(path, 9));
	CHECK(unlink(path) == 0);
	CHECK(deleted_fds_drop_to(before, 5000));
	free(buf);
	CHECK(pc_cache_destroy(c) == 0);
}

/* PC_CFG_FLUSH_AT_EXIT: a child writes and closes files, then exit()s
 * without pc_cache_destroy; the exit handler writes them.  The children
 * here start threads (their caches): forked alone, they exit in full
 * (testutil.h, tu_fork_alone). */
TEST_CASE(flush_at_exit_writes_closed_files)
{
	char path[4200];
	pid_t pid = tu_fork_alone(120);
	if (pid == 0) {
		struct pc_cache *c = cache_with(PC_CFG_FLUSH_AT_EXIT, 0);
		for (unsigned i = 0; i < 20; i++) {
			name_of(path, sizeof(path), "atexit", i);
			if (!write_small_file(c, path, 70 + i))
				_exit(2);
		}
		exit(0); /* no pc_cache_destroy: the atexit handler writes */
	}
	CHECK(tu_wait_child(pid, 125) == 0);
	for (unsigned i = 0; i < 20; i++) {
		name_of(path, sizeof(path), "atexit", i);
		CHECK(on_device(path, 70 + i));
	}
}

/* A write error at the exit flush is said on stderr, and a destroy that
 * an earlier-registered exit handler runs afterwards still returns it. */
static struct pc_cache *exit_cache;
static void destroy_at_exit(void)
{
	errno = 0;
	int r = pc_cache_destroy(exit_cache);
	fprintf(stderr, "destroy after the exit flush: %d %d\n", r, r ? errno : 0);
}

TEST_CASE(flush_at_exit_error_said_and_kept)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	pid_t pid = tu_fork_alone(120);
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		atexit(destroy_at_exit); /* runs after the cache's own handler */
		exit_cache = cache_with(PC_CFG_FLUSH_AT_EXIT, 0);
		char path[4200];
		name_of(path, sizeof(path), "atexit_err", 0);
		struct pc_file *f = pc_open(exit_cache, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		/* Two failures (the closed tail's write through the kernel,
		 * which falls back to a direct write, and that one), then
		 * the writes go through. */
		struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL, .error = EIO, .file = f,
					 .count = 2 };
		uint8_t buf[FILE_BYTES];
		tu_fill_pattern(buf, sizeof(buf), 71, 0);
		int id = f ? pc_fault_inject(exit_cache, &rule) : -1;
		if (id < 0 || pc_pwrite(f, buf, sizeof(buf), 0, 0) != (ssize_t)sizeof(buf) || pc_close(f) != 0)
			_exit(2);
		/* The flusher meets both failures before the exit: the error
		 * is one nobody reported, which the exit flush's successful
		 * retry would otherwise have taken. */
		(void)TU_POLL(pc_fault_count(exit_cache, id) >= 2, 10000);
		exit(0);
	}
	close(fds[1]);
	char out[512] = { 0 };
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(out) - 1 && (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	CHECK(tu_wait_child(pid, 125) == 0);
	CHECK(strstr(out, "pagecache: write-back at exit failed: Input/output error") != NULL);
	char want[64];
	snprintf(want, sizeof(want), "destroy after the exit flush: -1 %d", EIO);
	CHECK(strstr(out, want) != NULL);
	if (!strstr(out, want) || getenv("PC_TEST_DEBUG"))
		fprintf(stderr, "child said: %s\n", out);
}

/* Create path with `bytes` bytes (pattern salt), close it, wait until it
 * is settled; the device writes and bytes that took go to *ios and
 * *written. */
static void write_closed_and_count(struct pc_cache *c, const char *path, size_t bytes, unsigned salt,
				   uint64_t *ios, uint64_t *written)
{
	uint8_t *buf = malloc(bytes);
	REQUIRE(buf);
	tu_fill_pattern(buf, bytes, salt, 0);
	struct pc_stats before, after;
	pc_cache_stats(c, &before);
	struct pc_file *f = pc_open(c, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	CHECK(pc_pwrite(f, buf, bytes, 0, 0) == (ssize_t)bytes);
	CHECK(pc_close(f) == 0);
	CHECK(tu_settled(c, path));
	pc_cache_stats(c, &after);
	*ios = after.dev_write_ios - before.dev_write_ios;
	*written = after.dev_write_bytes - before.dev_write_bytes;
	/* On the backing file, exactly. */
	uint8_t *got = malloc(bytes + 1);
	REQUIRE(got);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	CHECK(pread(fd, got, bytes + 1, 0) == (ssize_t)bytes);
	CHECK(memcmp(got, buf, bytes) == 0);
	close(fd);
	free(got);
	free(buf);
}

/*
 * Whether the file system still holds data of path only in the kernel's
 * page cache (an extent with FIEMAP_EXTENT_DELALLOC: ext4 and XFS
 * allocate at write-back).  -1: FIEMAP cannot tell here.
 */
static int kernel_delalloc(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	union {
		struct fiemap fm;
		char space[sizeof(struct fiemap) + 8 * sizeof(struct fiemap_extent)];
	} u;
	memset(&u, 0, sizeof(u));
	u.fm.fm_length = FIEMAP_MAX_OFFSET;
	u.fm.fm_extent_count = 8;
	int r = ioctl(fd, FS_IOC_FIEMAP, &u.fm);
	close(fd);
	if (r != 0)
		return -1;
	for (unsigned i = 0; i < u.fm.fm_mapped_extents; i++)
		if (u.fm.fm_extents[i].fe_flags & FIEMAP_EXTENT_DELALLOC)
			return 1;
	return 0;
}

TEST_CASE(small_closed_file_one_write)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	uint64_t ios, bytes;
	/* Three blocks and a tail: one write through the kernel. */
	name_of(path, sizeof(path), "oneio", 0);
	write_closed_and_count(c, path, 3 * 4096 + 904, 8, &ios, &bytes);
	CHECK(ios == 1);
	CHECK(bytes == 3 * 4096 + 904);
	/* Whole blocks only: one write as well. */
	name_of(path, sizeof(path), "oneio", 1);
	write_closed_and_count(c, path, 2 * 4096, 9, &ios, &bytes);
	CHECK(ios == 1);
	CHECK(bytes == 2 * 4096);
	/* pc_flush without wait before the close (a FUSE FLUSH): still one
	 * write of exactly the file, the close right after it taking it. */
	name_of(path, sizeof(path), "oneio", 3);
	{
		uint8_t buf[3 * 4096 + 904];
		tu_fill_pattern(buf, sizeof(buf), 11, 0);
		struct pc_stats b0, b1;
		pc_cache_stats(c, &b0);
		struct pc_file *fl = pc_open(c, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fl);
		CHECK(pc_pwrite(fl, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
		CHECK(pc_flush(fl, 0) == 0);
		CHECK(pc_close(fl) == 0);
		CHECK(tu_settled(c, path));
		pc_cache_stats(c, &b1);
		CHECK(b1.dev_write_ios - b0.dev_write_ios == 1);
		CHECK(b1.dev_write_bytes - b0.dev_write_bytes == sizeof(buf));
	}
	/* Still open, pc_flush without wait has it written soon (the flusher,
	 * within its expiry of a moment), without a close. */
	name_of(path, sizeof(path), "oneio", 4);
	{
		uint8_t buf[5000];
		tu_fill_pattern(buf, sizeof(buf), 12, 0);
		struct pc_file *fl = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		REQUIRE(fl);
		CHECK(pc_pwrite(fl, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
		CHECK(pc_flush(fl, 0) == 0);
		struct stat hst;
		REQUIRE(stat(path, &hst) == 0);
		struct pc_file_info info;
		CHECK(TU_POLL(pc_cache_file_info(c, hst.st_dev, hst.st_ino, &info) == 0 && info.dirty_bytes == 0, 10000));
		CHECK(pc_close(fl) == 0);
	}
	/* Larger than a small file: its blocks directly, then its tail. */
	name_of(path, sizeof(path), "oneio", 2);
	write_closed_and_count(c, path, 128 * KiB + 904, 10, &ios, &bytes);
	CHECK(ios >= 2);
	CHECK(bytes == 128 * KiB + 904);

	/* O_CREAT without O_EXCL of a file the cache holds: its cached data
	 * is served, nothing read from the device. */
	struct pc_stats before, after;
	pc_cache_stats(c, &before);
	name_of(path, sizeof(path), "oneio", 0);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT, 0644);
	REQUIRE(f);
	uint8_t want[3 * 4096 + 904], got[sizeof(want)];
	tu_fill_pattern(want, sizeof(want), 8, 0);
	CHECK(pc_pread(f, got, sizeof(got), 0, 0) == (ssize_t)sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
	CHECK(pc_close(f) == 0);
	pc_cache_stats(c, &after);
	CHECK(after.dev_read_ios == before.dev_read_ios);
	/* Destroy syncs what went through the kernel: nothing of it is left
	 * only in the kernel's cache (delayed allocation) once it returns. */
	name_of(path, sizeof(path), "oneio", 0);
	int before_destroy = kernel_delalloc(path);
	CHECK(pc_cache_destroy(c) == 0);
	if (before_destroy == 1)
		CHECK(kernel_delalloc(path) == 0);
	else
		printf("FIEMAP shows no delayed allocation here (%d): the sync at destroy is not observed\n",
		       before_destroy);
	for (unsigned i = 0; i < 5; i++) {
		name_of(path, sizeof(path), "oneio", i);
		unlink(path);
	}
}

/* Two threads of one cache create the same new name at once, again and
 * again: both get the one file, neither EBUSY (the create's lock is taken
 * under files_lock, where the second finds the first's mapping). */
struct race {
	struct pc_cache *c;
	pthread_barrier_t *bar;
	const char *path;
	bool unlinker;
	unsigned failures;
};

#define RACE_ROUNDS 300u

static void *race_opener(void *arg)
{
	struct race *r = arg;
	for (unsigned i = 0; i < RACE_ROUNDS; i++) {
		pthread_barrier_wait(r->bar);
		struct pc_file *f = pc_open(r->c, r->path, O_RDWR | O_CREAT, 0644);
		if (!f || pc_close(f) != 0)
			r->failures++;
		pthread_barrier_wait(r->bar);
		if (r->unlinker)
			unlink(r->path); /* the next round creates it again */
	}
	return NULL;
}

TEST_CASE(concurrent_creates_of_one_name)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	name_of(path, sizeof(path), "race", 0);
	unlink(path);
	pthread_barrier_t bar;
	REQUIRE(pthread_barrier_init(&bar, NULL, 2) == 0);
	struct race r[2] = { { c, &bar, path, true, 0 }, { c, &bar, path, false, 0 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, race_opener, &r[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(r[0].failures == 0);
	CHECK(r[1].failures == 0);
	pthread_barrier_destroy(&bar);
	CHECK(pc_cache_destroy(c) == 0);
	unlink(path);
}

/* A created file's descriptor: without O_DIRECT until the cache issues
 * I/O on it, so that a small closed file is written whole through it (no
 * second open); O_DIRECT from the first direct write or read on, never off
 * again, whoever gets there first. */
static bool fd_is_direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_DIRECT);
}

struct first_io {
	struct pc_file *f;
	pthread_barrier_t *go;
	unsigned idx;
};

static void *first_io_writer(void *arg)
{
	struct first_io *a = arg;
	uint8_t *buf = aligned_alloc(4096, 64 * KiB);
	tu_fill_pattern(buf, 64 * KiB, 40 + a->idx, 0);
	pthread_barrier_wait(a->go);
	ssize_t n = pc_pwrite(a->f, buf, 64 * KiB, (off_t)(a->idx * 64 * KiB), PC_DSYNC);
	free(buf);
	return (void *)(intptr_t)(n == (ssize_t)(64 * KiB));
}

TEST_CASE(created_descriptor_direct_from_first_io)
{
	struct pc_cache *c = cache_with(0, 0);
	char path[4200];
	uint8_t buf[FILE_BYTES], got[FILE_BYTES];
	/* Small and closed: written through its own descriptor, still
	 * buffered (one write, exactly the file). */
	name_of(path, sizeof(path), "fdmode", 0);
	tu_fill_pattern(buf, sizeof(buf), 30, 0);
	struct pc_file *f = pc_open(c, path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	REQUIRE(f);
	struct pc_mapping *m = f->m;
	CHECK(!fd_is_direct(mproc(m)->fd));
	CHECK(atomic_load(&mproc(m)->fd_mode) == FD_DIRECT_LATER);
	CHECK(pc_pwrite(f, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	struct pc_stats b0, b1;
	pc_cache_stats(c, &b0);
	CHECK(pc_close(f) == 0);
	CHECK(tu_settled(c, path));
	pc_cache_stats(c, &b1);
	CHECK(b1.dev_write_ios - b0.dev_write_ios == 1);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	CHECK(pread(fd, got, sizeof(got), 0) == (ssize_t)sizeof(got) && memcmp(got, buf, sizeof(got)) == 0);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size == FILE_BYTES);
	close(fd);

	/* Two threads' first writes race to give it O_DIRECT: both direct
	 * (DSYNC), both on the device, the descriptor direct from then on. */
	name_of(path, sizeof(path), "fdmode", 1);
	f = pc_open(c, path, O_RDWR | O_CREAT | O_EXCL, 0644);
	REQUIRE(f);
	m = f->m;
	CHECK(!fd_is_direct(mproc(m)->fd));
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 2);
	struct first_io a[2] = { { f, &go, 0 }, { f, &go, 1 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, first_io_writer, &a[i]) == 0);
	for (int i = 0; i < 2; i++) {
		void *ok;
		pthread_join(t[i], &ok);
		CHECK(ok != NULL);
	}
	pthread_barrier_destroy(&go);
	CHECK(fd_is_direct(mproc(m)->fd));
	CHECK(atomic_load(&mproc(m)->fd_mode) == FD_AS_OPENED);
	uint8_t *want = aligned_alloc(4096, 64 * KiB), *dev = aligned_alloc(4096, 64 * KiB);
	fd = open(path, O_RDONLY | O_DIRECT);
	REQUIRE(fd >= 0);
	for (unsigned i = 0; i < 2; i++) {
		tu_fill_pattern(want, 64 * KiB, 40 + i, 0);
		CHECK(pread(fd, dev, 64 * KiB, (off_t)(i * 64 * KiB)) == (ssize_t)(64 * KiB));
		CHECK(memcmp(dev, want, 64 * KiB) == 0);
	}
	close(fd);
	free(want);
	free(dev);
	CHECK(pc_close(f) == 0);

	/* A file the cache did not create gets O_DIRECT at open. */
	name_of(path, sizeof(path), "fdmode", 2);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	REQUIRE(fd >= 0);
	CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	close(fd);
	f = pc_open(c, path, O_RDWR | O_CREAT, 0644);
	REQUIRE(f);
	CHECK(fd_is_direct(mproc(f->m)->fd));
	CHECK(atomic_load(&mproc(f->m)->fd_mode) == FD_AS_OPENED);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
