/*
 * test_io_sync.c - synchronous vector I/O (src/io/sync_io.c), the calls
 * the queue falls back to and the layers above use directly: iovec
 * walking (empty iovecs, the caller's array left as it was), reads across
 * EOF, bad counts, the counters (the bytes asked for), a short write
 * continued until the error that stops it, and IOV_MAX iovecs.  The file
 * is buffered: any alignment.
 */
#include "io_util.h"

#include <limits.h>
#include <signal.h>
#include <sys/resource.h>

IO_FIXTURE("io_sync")

/* A buffered scratch file and two 64 KiB buffers, w holding pattern 9. */
struct vec_file {
	char path[4300];
	int fd;
	uint8_t *w, *r;
};

static void vec_open(struct vec_file *v)
{
	test_path(v->path, sizeof(v->path), dir, "vec");
	v->fd = open(v->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(v->fd >= 0);
	v->w = abuf(65536);
	v->r = abuf(65536);
	tu_fill_pattern(v->w, 65536, 9, 0);
}

static void vec_close(struct vec_file *v)
{
	close(v->fd);
	unlink(v->path);
	free(v->w);
	free(v->r);
}

TEST_CASE(vectors_walk_iovecs_to_eof)
{
	struct vec_file v;
	vec_open(&v);
	int bfd = v.fd;
	uint8_t *w = v.w, *r = v.r;

	struct iovec wv[3] = {{w, 100}, {w + 100, 0}, {w + 100, 20000}};
	struct iovec wv_copy[3];
	memcpy(wv_copy, wv, sizeof(wv));
	CHECK(sync_io_pwritev(NULL, bfd, wv, 3, 0, 0) == 20100);
	CHECK(memcmp(wv, wv_copy, sizeof(wv)) == 0);

	/* Read across EOF mid-iovec: total up to EOF, array untouched. */
	memset(r, 0, 65536);
	struct iovec rv[3] = {{r, 4096}, {r + 4096, 4096}, {r + 8192, 20000}};
	struct iovec rv_copy[3];
	memcpy(rv_copy, rv, sizeof(rv));
	CHECK(sync_io_preadv(NULL, bfd, rv, 3, 0) == 20100);
	CHECK(tu_is_pattern(r, 20100, 9, 0));
	CHECK(memcmp(rv, rv_copy, sizeof(rv)) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, 3, 20100) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, 0, 0) == 0);
	CHECK(sync_io_preadv(NULL, bfd, rv, -1, 0) == -EINVAL);
	CHECK(sync_io_preadv(NULL, bfd, rv, IOV_MAX + 1, 0) == -EINVAL);
	vec_close(&v);
}

/* With a cache, one read counted with the bytes asked for, not those
 * moved (the read ends at EOF). */
TEST_CASE(vectors_count_requested_bytes)
{
	struct vec_file v;
	vec_open(&v);
	REQUIRE(pwrite(v.fd, v.w, 20100, 0) == 20100);
	uint8_t *r = v.r;
	struct iovec rv[3] = {{r, 4096}, {r + 4096, 4096}, {r + 8192, 20000}};
	struct counters k0 = counters_now();
	CHECK(sync_io_preadv(cache, v.fd, rv, 3, 10000) == 10100);
	struct counters k1 = counters_now();
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + 28192);
	vec_close(&v);
}

/* A short write (file size limit) is continued, and the error that stops
 * it is reported, not a short count. */
TEST_CASE(short_write_continued_until_error)
{
	struct vec_file v;
	vec_open(&v);
	int bfd = v.fd;
	uint8_t *w = v.w, *r = v.r;
	struct sigaction sa = {.sa_handler = SIG_IGN}, old_sa;
	sigaction(SIGXFSZ, &sa, &old_sa);
	struct rlimit old_rl, rl;
	getrlimit(RLIMIT_FSIZE, &old_rl);
	rl = old_rl;
	rl.rlim_cur = 30000;
	if (setrlimit(RLIMIT_FSIZE, &rl) == 0) {
		struct iovec big[2] = {{w, 5000}, {w + 5000, 20000}};
		CHECK(sync_io_pwritev(NULL, bfd, big, 2, 10000, 0) == -EFBIG);
		/* the part below the limit was written */
		CHECK(pread(bfd, r, 20000, 10000) == 20000);
		CHECK(memcmp(r, w, 20000) == 0);
		struct iovec fits = {w, 9000};
		CHECK(sync_io_pwritev(NULL, bfd, &fits, 1, 20000, RWF_DSYNC) == 9000);
		setrlimit(RLIMIT_FSIZE, &old_rl);
	}
	sigaction(SIGXFSZ, &old_sa, NULL);
	vec_close(&v);
}

/* Many iovecs (IOV_MAX), each of 16 bytes. */
TEST_CASE(vectors_of_iov_max)
{
	struct vec_file v;
	vec_open(&v);
	uint8_t *w = v.w, *r = v.r;
	struct iovec *many = calloc(IOV_MAX, sizeof(*many));
	REQUIRE(many);
	for (int i = 0; i < IOV_MAX; i++)
		many[i] = (struct iovec){w + i * 16, 16};
	CHECK(sync_io_pwritev(NULL, v.fd, many, IOV_MAX, 0, 0) == IOV_MAX * 16);
	memset(r, 0, 65536);
	CHECK(pread(v.fd, r, IOV_MAX * 16, 0) == IOV_MAX * 16);
	CHECK(memcmp(r, w, IOV_MAX * 16) == 0);
	free(many);
	vec_close(&v);
}
