/*
 * test_openat_seek.c - the calls a file system server needs: pc_openat
 * (directory-relative, O_NOFOLLOW), pc_lseek (SEEK_DATA / SEEK_HOLE over
 * cached data, checked against a model of the file's bytes), pc_flush
 * (errors reported once, writeback started or waited for) and
 * pc_cache_file_info (the cached size of a file by device and inode).
 */
#include "testutil.h"

#include <linux/falloc.h>
#include <sys/stat.h>

#define FSIZE (4u << 20)

TEST_SCRATCH_DIR("openat_seek")

/* Each case's cache: 64 MiB, its memory taken as it is needed. */
static struct pc_cache *lazy_memory_cache(void)
{
	struct pc_config cfg = tu_config(64u << 20);
	cfg.flags = PC_CFG_LAZY_MEMORY;
	return tu_cache_new(&cfg);
}

/* pc_openat opens and creates relative to a directory descriptor; with
 * O_NOFOLLOW a symlink as the last component is ELOOP and nothing is
 * created where it points; a bad descriptor or name is an error. */
TEST_CASE(openat_relative_nofollow_and_errors)
{
	struct pc_cache *c = lazy_memory_cache();
	int dfd = open(dir, O_PATH | O_DIRECTORY);
	REQUIRE(dfd >= 0);
	struct pc_file *f = pc_openat(c, dfd, "a", O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
	CHECK(f != NULL);
	CHECK(pc_pwrite(f, "hello", 5, 0, 0) == 5);
	CHECK(pc_close(f) == 0);
	char p[4200];
	test_path(p, sizeof(p), dir, "a");
	struct pc_file *g = pc_open(c, p, O_RDONLY, 0);
	char buf[8] = { 0 };
	CHECK(g && pc_pread(g, buf, 8, 0, 0) == 5 && memcmp(buf, "hello", 5) == 0);
	pc_close(g);
	/* A symlink as the last component: ELOOP with O_NOFOLLOW, nothing
	 * created where it points (an absolute path in this test's own
	 * directory: no name another run could share). */
	char *real = realpath(dir, NULL);
	REQUIRE(real);
	char target[4200];
	test_path(target, sizeof(target), real, "escape-target");
	free(real);
	CHECK(symlinkat(target, dfd, "link") == 0);
	errno = 0;
	CHECK(pc_openat(c, dfd, "link", O_RDWR | O_CREAT | O_NOFOLLOW, 0644) == NULL && errno == ELOOP);
	CHECK(access(target, F_OK) != 0);
	/* Followed without it (an existing target opens). */
	CHECK(symlinkat("a", dfd, "link2") == 0);
	g = pc_openat(c, dfd, "link2", O_RDONLY, 0);
	CHECK(g != NULL);
	pc_close(g);
	errno = 0;
	CHECK(pc_openat(c, -1, "a", O_RDONLY, 0) == NULL && errno == EBADF);
	errno = 0;
	CHECK(pc_openat(c, dfd, "nosuch", O_RDONLY, 0) == NULL && errno == ENOENT);
	close(dfd);
	CHECK(pc_cache_destroy(c) == 0);
}

/* SEEK_DATA at off: no nonzero byte of the model lies in [off, r). */
static void check_seek(struct pc_file *f, const uint8_t *model, uint64_t size, uint64_t off)
{
	off_t d = pc_lseek(f, (off_t)off, SEEK_DATA);
	uint64_t end = d < 0 ? size : (uint64_t)d;
	if (d < 0)
		CHECK(errno == ENXIO);
	CHECK(end >= off && end <= size);
	bool zeros = true;
	for (uint64_t i = off; i < end && i < size; i++)
		zeros &= model[i] == 0;
	CHECK(zeros);
	off_t h = pc_lseek(f, (off_t)off, SEEK_HOLE);
	CHECK(h >= (off_t)off && (uint64_t)h <= size);
	/* A hole reads as zeros: data is never reported as a hole. */
	bool hole_zero = true;
	for (uint64_t i = (uint64_t)h; i < size && i < (uint64_t)h + 4096; i++)
		hole_zero &= model[i] == 0;
	CHECK(hole_zero);
}

/* Random writes, punches, truncates, syncs and drops of a sparse file, with
 * SEEK_DATA / SEEK_HOLE checked against the model of its bytes. */
TEST_CASE(seek_data_and_hole_match_model)
{
	uint64_t seed = test_seed("test_openat_seek", 12345);
	struct pc_cache *c = lazy_memory_cache();
	char p[4200];
	test_path(p, sizeof(p), dir, "sparse");
	struct pc_file *f = pc_open(c, p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	uint8_t *model = calloc(1, FSIZE), *buf = malloc(1 << 20);
	REQUIRE(model && buf);
	uint64_t size = 0, s = seed;
	int rounds = tu_quick() ? 150 : 600;
	for (int i = 0; i < rounds; i++) {
		uint64_t r = tu_rand(&s) % 100;
		uint64_t off = tu_rand(&s) % (FSIZE - (1 << 18)), len = 1 + tu_rand(&s) % (1 << 17);
		if (r < 50) {
			for (uint64_t k = 0; k < len; k++)
				buf[k] = (uint8_t)(1 + tu_rand(&s) % 255);
			CHECK(pc_pwrite(f, buf, len, (off_t)off, 0) == (ssize_t)len);
			memcpy(model + off, buf, len);
			size = tu_max_u64(size, off + len);
		} else if (r < 65) {
			CHECK(pc_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0);
			if (off < size)
				memset(model + off, 0, tu_min_u64(len, size - off));
		} else if (r < 72) {
			uint64_t ns = tu_rand(&s) % FSIZE;
			CHECK(pc_ftruncate(f, (off_t)ns) == 0);
			if (ns < size)
				memset(model + ns, 0, size - ns);
			size = ns;
		} else if (r < 77) {
			CHECK(pc_fsync(f) == 0);
		} else if (r < 80) {
			CHECK(pc_fadvise(f, 0, 0, POSIX_FADV_DONTNEED) == 0);
		} else {
			CHECK((uint64_t)pc_lseek(f, 0, SEEK_END) == size);
			if (size)
				check_seek(f, model, size, tu_rand(&s) % size);
		}
	}
	errno = 0;
	CHECK(pc_lseek(f, (off_t)size, SEEK_DATA) == -1 && errno == ENXIO);
	errno = 0;
	CHECK(pc_lseek(f, (off_t)size + 5, SEEK_HOLE) == -1 && errno == ENXIO);
	errno = 0;
	CHECK(pc_lseek(f, 0, 99) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pc_lseek(NULL, 0, SEEK_DATA) == -1 && errno == EBADF);
	CHECK(pc_fsync(f) == 0); /* what is left is written */
	pc_close(f);
	free(model);
	free(buf);
	CHECK(pc_cache_destroy(c) == 0);
}

/* pc_flush starts write-back or waits for it and reports an error once;
 * pc_cache_file_info knows the file, open or closed, by device and inode. */
TEST_CASE(flush_writes_back_and_file_info_knows_size)
{
	struct pc_cache *c = lazy_memory_cache();
	char p[4200];
	test_path(p, sizeof(p), dir, "flush");
	struct pc_file *f = pc_open(c, p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	static char buf[1 << 16];
	memset(buf, 'x', sizeof(buf));
	CHECK(pc_pwrite(f, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	struct stat st;
	REQUIRE(stat(p, &st) == 0);
	struct pc_file_info info;
	CHECK(pc_cache_file_info(c, st.st_dev, st.st_ino, &info) == 0);
	CHECK(info.size == (off_t)sizeof(buf) && info.dirty_bytes > 0 && info.open_handles == 1 && !info.unsettled);
	/* wait = 0 starts write-back: the data reaches the device soon. */
	struct pc_stats s;
	pc_cache_stats(c, &s);
	uint64_t written0 = s.dev_write_bytes;
	CHECK(pc_flush(f, 0) == 0);
	CHECK(TU_POLL((pc_cache_stats(c, &s), s.dev_write_bytes >= written0 + sizeof(buf)), 2000));
	pc_file_stats(f, &s);
	CHECK(s.dirty_bytes == 0);
	/* wait = 1: on the device on return, error reported once. */
	CHECK(pc_pwrite(f, buf, 4096, 1 << 16, 0) == 4096);
	CHECK(pc_flush(f, 1) == 0);
	pc_file_stats(f, &s);
	CHECK(s.dirty_bytes == 0);
	struct pc_fault rule = { .ops = PC_FAULT_WRITE, .action = PC_FAULT_FAIL, .error = EIO, .file = f };
	int id = pc_fault_inject(c, &rule);
	CHECK(id >= 0);
	CHECK(pc_pwrite(f, buf, 4096, 0, 0) == 4096);
	errno = 0;
	CHECK(pc_flush(f, 1) == -1 && errno == EIO);
	pc_fault_remove(c, id);
	/* Reported once: the retry writes it and says nothing more. */
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_flush(f, 0) == 0);
	CHECK(pc_close(f) == 0);
	errno = 0;
	CHECK(pc_flush(f, 0) == -1 && errno == EBADF);
	/* The closed file is still known to the cache, with its size. */
	CHECK(pc_cache_file_info(c, st.st_dev, st.st_ino, &info) == 0 && info.size == (1 << 16) + 4096 &&
	      info.open_handles == 0);
	errno = 0;
	CHECK(pc_cache_file_info(c, st.st_dev, (ino_t)-3, &info) == -1 && errno == ENOENT);
	errno = 0;
	CHECK(pc_cache_file_info(NULL, 0, 0, &info) == -1 && errno == EINVAL);
	CHECK(pc_cache_destroy(c) == 0);
}
