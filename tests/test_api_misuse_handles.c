/*
 * test_api_misuse_handles.c - every public call on a file handle, with
 * every kind of bad argument, returns what include/pagecache.h documents,
 * never crashes and never hangs.
 *
 * Each case is a table of rows, each row one call with its arguments and
 * the expected return and errno (api_misuse_util.h): pc_pread ..
 * pc_file_stats on a read-write, read-only, write-only, just-closed
 * (quarantined) and NULL handle: NULL buffers and iovecs, negative and
 * overflowing offsets and lengths, offsets past the file system's largest
 * file (EFBIG), iovcnt out of range, iovec totals over SSIZE_MAX, unknown
 * flags, fallocate modes and fadvise advice, reads at or past EOF and
 * zero-length calls (0); also pc_cache_stats, pc_cache_destroy and
 * pc_config_init with NULL.  Every row that fails prints one line.  After
 * the cases the file must hold exactly what it held before: no failed call
 * changed it (the fixture's teardown).
 */
#define _GNU_SOURCE
#include "api_misuse_util.h"

#include <limits.h>
#include <linux/falloc.h>
#include <sys/uio.h>

TEST_FIXTURE(misuse_fixture_setup, misuse_fixture_teardown)

/* The largest file, and one past it when that is an off_t (else
 * INT64_MAX, which is then past it by the length of any write). */
static off_t largest_file(void)
{
	return (off_t)fx.max_bytes;
}

static off_t past_largest_file(void)
{
	return fx.max_bytes < INT64_MAX ? (off_t)fx.max_bytes + 1 : INT64_MAX;
}

/* The library's largest file size is the kernel's: a plain ftruncate one
 * byte past it fails with EFBIG (nothing to check when it is INT64_MAX). */
static void check_max_bytes_is_the_kernels(void)
{
	if (fx.max_bytes == INT64_MAX)
		return;
	char p[4300];
	test_path(p, sizeof(p), fx.dir, "maxprobe");
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	errno = 0;
	CHECK(ftruncate(fd, (off_t)fx.max_bytes + 1) == -1 && errno == EFBIG);
	close(fd);
	unlink(p);
}

/* ------------------------------------------------------- handle calls */

static const char *const handle_names[] = { "rw", "ro", "wo", "closed", "NULL" };

enum call {
	PREAD, PWRITE, PREADV, PWRITEV, FSYNC, FDATASYNC, FTRUNCATE, FALLOCATE, SIZE, FADVISE, CLOSE,
	FILE_STATS,   /* returns 0 if *s came back all zero, else 1 */
	CACHE_STATS,  /* the same; H_NULL: NULL cache, else the fixture's */
	CACHE_DESTROY_NULL,
	CONFIG_INIT_NULL, /* returns 0: only "does not crash" */
};
static const char *const call_names[] = {
	"pc_pread", "pc_pwrite", "pc_preadv", "pc_pwritev", "pc_fsync", "pc_fdatasync", "pc_ftruncate",
	"pc_fallocate", "pc_size", "pc_fadvise", "pc_close", "pc_file_stats", "pc_cache_stats",
	"pc_cache_destroy", "pc_config_init",
};

/* The buffer of pc_pread/pc_pwrite, the stats of pc_*_stats. */
enum mem_kind { M_BUF, M_NULL };

/* The iovec array of the v-calls (reads point into fx.buf, writes into
 * fx.content at offset 0, so a write that goes through rewrites the same
 * bytes). */
enum iov_kind {
	V_ONE,        /* { buf, len } */
	V_NULL,       /* iov == NULL */
	V_NULL_BASE,  /* { buf, 10 }, { NULL, len } */
	V_ZERO_NULL,  /* { NULL, 0 }, { buf, len }: a NULL base with length 0 is fine */
	V_SUM_HALVES, /* { buf, SSIZE_MAX / 2 + 1 } twice: the total overflows ssize_t */
	V_SUM_PLUS1,  /* { buf, SSIZE_MAX }, { buf, 1 } */
	V_BYTES,      /* iovcnt entries of one byte each */
};
static const char *const iov_names[] = {
	"{buf,len}", "NULL", "{buf,10},{NULL,len}", "{NULL,0},{buf,len}", "{buf,SSIZE_MAX/2+1}x2",
	"{buf,SSIZE_MAX},{buf,1}", "{buf+i,1}...",
};

struct handle_row {
	enum call call;
	enum handle_kind h;
	enum mem_kind mem;
	enum iov_kind iov;
	int iovcnt;
	size_t len;   /* pread/pwrite bytes; the iovec length of V_ONE etc. */
	off_t off;    /* I/O, fallocate and fadvise offset; ftruncate length */
	off_t range;  /* fallocate and fadvise length */
	int arg;      /* I/O flags, fallocate mode, fadvise advice */
	long long ret;
	int err;
	const char *err_name;
};

static struct iovec iov_storage[IOV_MAX + 1];

static const struct iovec *build_iov(const struct handle_row *r, bool write)
{
	uint8_t *b = write ? fx.content : fx.buf;
	struct iovec *v = iov_storage;
	switch (r->iov) {
	case V_ONE:
		v[0] = (struct iovec){ b, r->len };
		break;
	case V_NULL:
		return NULL;
	case V_NULL_BASE:
		v[0] = (struct iovec){ b, 10 };
		v[1] = (struct iovec){ NULL, r->len };
		break;
	case V_ZERO_NULL:
		v[0] = (struct iovec){ NULL, 0 };
		v[1] = (struct iovec){ b, r->len };
		break;
	case V_SUM_HALVES:
		v[0] = v[1] = (struct iovec){ b, (size_t)SSIZE_MAX / 2 + 1 };
		break;
	case V_SUM_PLUS1:
		v[0] = (struct iovec){ b, SSIZE_MAX };
		v[1] = (struct iovec){ b, 1 };
		break;
	case V_BYTES:
		for (int i = 0; i < r->iovcnt && i <= IOV_MAX; i++)
			v[i] = (struct iovec){ b + i, 1 };
		break;
	}
	return v;
}

/* 0 if the n bytes at p are all zero, else 1. */
static long long nonzero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 1;
	return 0;
}

static long long stats_call(const struct handle_row *r)
{
	struct pc_stats s;
	memset(&s, 0xff, sizeof(s));
	struct pc_stats *sp = r->mem == M_NULL ? NULL : &s;
	if (r->call == FILE_STATS)
		pc_file_stats(fx.h[r->h], sp);
	else
		pc_cache_stats(r->h == H_NULL ? NULL : fx.c, sp);
	return sp ? nonzero(&s, sizeof(s)) : 0;
}

static long long run_handle_row(const struct handle_row *r)
{
	struct pc_file *h = fx.h[r->h];
	void *buf = r->mem == M_NULL ? NULL : fx.buf;
	const void *wbuf = r->mem == M_NULL ? NULL : fx.content;
	switch (r->call) {
	case PREAD: return pc_pread(h, buf, r->len, r->off, r->arg);
	case PWRITE: return pc_pwrite(h, wbuf, r->len, r->off, r->arg);
	case PREADV: return pc_preadv(h, build_iov(r, false), r->iovcnt, r->off, r->arg);
	case PWRITEV: return pc_pwritev(h, build_iov(r, true), r->iovcnt, r->off, r->arg);
	case FSYNC: return pc_fsync(h);
	case FDATASYNC: return pc_fdatasync(h);
	case FTRUNCATE: return pc_ftruncate(h, r->off);
	case FALLOCATE: return pc_fallocate(h, r->arg, r->off, r->range);
	case SIZE: return pc_size(h);
	case FADVISE: return pc_fadvise(h, r->off, r->range, r->arg);
	case CLOSE: return pc_close(h);
	case FILE_STATS:
	case CACHE_STATS: return stats_call(r);
	case CACHE_DESTROY_NULL: return pc_cache_destroy(NULL);
	case CONFIG_INIT_NULL: pc_config_init(NULL); return 0;
	}
	return -2;
}

/* The call as C, for the failure line. */
static void describe_handle_row(const struct handle_row *r, char *out, size_t n)
{
	const char *name = call_names[r->call];
	const char *h = handle_names[r->h];
	const char *mem = r->mem == M_NULL ? "NULL" : "buf";
	switch (r->call) {
	case PREAD:
	case PWRITE:
		snprintf(out, n, "%s(%s, %s, %zu, %lld, %#x)", name, h, mem, r->len, (long long)r->off, r->arg);
		break;
	case PREADV:
	case PWRITEV:
		snprintf(out, n, "%s(%s, %s [len %zu], %d, %lld, %#x)", name, h, iov_names[r->iov], r->len, r->iovcnt,
			 (long long)r->off, r->arg);
		break;
	case FTRUNCATE:
		snprintf(out, n, "%s(%s, %lld)", name, h, (long long)r->off);
		break;
	case FALLOCATE:
		snprintf(out, n, "%s(%s, mode %#x, %lld, %lld)", name, h, r->arg, (long long)r->off,
			 (long long)r->range);
		break;
	case FADVISE:
		snprintf(out, n, "%s(%s, %lld, %lld, advice %d)", name, h, (long long)r->off, (long long)r->range,
			 r->arg);
		break;
	case FILE_STATS:
	case CACHE_STATS:
		snprintf(out, n, "%s(%s, %s) [1: *s not all zero]", name, r->call == CACHE_STATS && r->h != H_NULL ?
			 "cache" : h, r->mem == M_NULL ? "NULL" : "&s");
		break;
	case CACHE_DESTROY_NULL:
	case CONFIG_INIT_NULL:
		snprintf(out, n, "%s(NULL)", name);
		break;
	default:
		snprintf(out, n, "%s(%s)", name, h);
		break;
	}
}
/* Each row's call, its outcome counted as one check. */
static void run_handle_rows(const struct handle_row *rows, size_t n)
{
	rows_watchdog();
	unsigned failed = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct handle_row *r = &rows[i];
		row_timer_start();
		errno = 0;
		long long got = run_handle_row(r);
		int got_err = errno;
		row_timer_stop();
		if (!outcome_ok(got, got_err, r->ret, r->err)) {
			char what[256];
			describe_handle_row(r, what, sizeof(what));
			report_row(i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
	}
	printf("%s: %zu rows, %u failed\n", tu_case_name(), n, failed);
}

/* ------------------------------------------------------------ the cases */

/* pc_pread on a NULL, closed or write-only handle: EBADF, even for no
 * bytes and no buffer. */
TEST_CASE(pread_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ PREAD, H_NULL, .len = 10, FAILS(EBADF) },
		{ PREAD, H_CLOSED, .len = 10, FAILS(EBADF) },
		{ PREAD, H_WO, .len = 10, FAILS(EBADF) },
		{ PREAD, H_WO, .len = 0, FAILS(EBADF) },
		{ PREAD, H_WO, M_NULL, .len = 0, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pread with no buffer (but for no bytes), a negative offset, unknown
 * flags, a length over SSIZE_MAX: EINVAL. */
TEST_CASE(pread_bad_arguments_einval)
{
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		{ PREAD, H_RW, M_NULL, .len = 10, FAILS(EINVAL) },
		{ PREAD, H_RW, M_NULL, .len = 0, GIVES(0) },
		{ PREAD, H_RW, .len = 10, .off = -1, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 0, .off = -1, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 10, .off = INT64_MIN, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 10, .arg = 0x10, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 10, .arg = 0x100, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 10, .arg = 0x40000000, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = 10, .arg = -1, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = ssize_max + 1, FAILS(EINVAL) },
		{ PREAD, H_RW, .len = SIZE_MAX, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pread at and past EOF: 0, whatever the offset and length (an offset
 * past the largest file, flags, off + len past INT64_MAX too); across
 * EOF, the bytes up to it. */
TEST_CASE(pread_stops_at_eof)
{
	const off_t max = largest_file();
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		{ PREAD, H_RO, .len = 10, .off = FILE_SIZE, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = FILE_SIZE + 1, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = 1 << 30, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = max, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = INT64_MAX, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = INT64_MAX - 5, GIVES(0) }, /* off + len overflows off_t */
		{ PREAD, H_RO, .len = ssize_max, .off = FILE_SIZE, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = FILE_SIZE, .arg = PC_NOWAIT | PC_DONTCACHE, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = FILE_SIZE, .arg = PC_DIRECT, GIVES(0) },
		{ PREAD, H_RO, .len = 10, .off = FILE_SIZE - 4, GIVES(4) },
		{ PREAD, H_RO, .len = 10, .off = 0, GIVES(10) },
		{ PREAD, H_RW, .len = 10, .off = 100, GIVES(10) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwrite on a NULL, closed or read-only handle: EBADF. */
TEST_CASE(pwrite_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ PWRITE, H_NULL, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_CLOSED, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_RO, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_RO, .len = 0, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwrite with no buffer (but for no bytes), a negative offset, unknown
 * flags, a length over SSIZE_MAX: EINVAL. */
TEST_CASE(pwrite_bad_arguments_einval)
{
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		{ PWRITE, H_RW, M_NULL, .len = 10, FAILS(EINVAL) },
		{ PWRITE, H_RW, M_NULL, .len = 0, GIVES(0) },
		{ PWRITE, H_WO, M_NULL, .len = 0, GIVES(0) },
		{ PWRITE, H_RW, .len = 10, .off = -1, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = 0, .off = -1, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = 10, .off = INT64_MIN, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = 10, .arg = 0x10, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = 10, .arg = 0x100, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = 10, .arg = -1, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = ssize_max + 1, FAILS(EINVAL) },
		{ PWRITE, H_RW, .len = SIZE_MAX, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwrite ending past the file system's largest file: EFBIG, that
 * largest size being the kernel's (check_max_bytes_is_the_kernels). */
TEST_CASE(pwrite_past_largest_file_efbig)
{
	check_max_bytes_is_the_kernels();
	const off_t max = largest_file();
	const off_t past_max = past_largest_file();
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		{ PWRITE, H_RW, .len = 1, .off = past_max, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 10, .off = max - 5, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 1, .off = INT64_MAX, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 10, .off = INT64_MAX - 5, FAILS(EFBIG) }, /* overflows off_t */
		{ PWRITE, H_RW, .len = ssize_max, .off = 1, FAILS(EFBIG) },
		{ PWRITE, H_WO, .len = 10, .off = INT64_MAX - 5, .arg = PC_DIRECT, FAILS(EFBIG) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwrite of no bytes: 0 at any offset, past the largest file too. */
TEST_CASE(pwrite_of_no_bytes_gives_zero)
{
	const struct handle_row rows[] = {
		{ PWRITE, H_RW, .len = 0, .off = INT64_MAX, GIVES(0) },
		{ PWRITE, H_RW, .len = 0, .off = FILE_SIZE + 4096, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_preadv on a NULL, closed or write-only handle: EBADF. */
TEST_CASE(preadv_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ PREADV, H_NULL, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_CLOSED, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_WO, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_WO, .iov = V_NULL, .iovcnt = 0, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_preadv with no iovecs, an iovcnt out of [0, IOV_MAX], a NULL base of
 * a non-empty iovec, a total over SSIZE_MAX, a negative offset or unknown
 * flags: EINVAL; no iovecs at all, IOV_MAX of them and a NULL base of an
 * empty one are fine. */
TEST_CASE(preadv_bad_iovecs_einval)
{
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		{ PREADV, H_RW, .iov = V_NULL, .iovcnt = 1, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_NULL, .iovcnt = 0, GIVES(0) },
		{ PREADV, H_RW, .iov = V_ONE, .iovcnt = -1, .len = 10, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_ONE, .iovcnt = INT_MIN, .len = 10, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_BYTES, .iovcnt = IOV_MAX + 1, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_BYTES, .iovcnt = INT_MAX, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_BYTES, .iovcnt = IOV_MAX, GIVES(IOV_MAX) },
		{ PREADV, H_RW, .iov = V_NULL_BASE, .iovcnt = 2, .len = 10, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_ZERO_NULL, .iovcnt = 2, .len = 10, GIVES(10) },
		{ PREADV, H_RW, .iov = V_SUM_HALVES, .iovcnt = 2, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_SUM_PLUS1, .iovcnt = 2, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = ssize_max + 1, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = -1, FAILS(EINVAL) },
		{ PREADV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .arg = 0x100, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_preadv at and past EOF: 0. */
TEST_CASE(preadv_past_eof_gives_zero)
{
	const struct handle_row rows[] = {
		{ PREADV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = FILE_SIZE, GIVES(0) },
		{ PREADV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = INT64_MAX, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwritev on a NULL, closed or read-only handle: EBADF. */
TEST_CASE(pwritev_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ PWRITEV, H_NULL, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_CLOSED, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_RO, .iov = V_NULL, .iovcnt = 0, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwritev with no iovecs, an iovcnt over IOV_MAX, a NULL base, a total
 * over SSIZE_MAX, a negative offset or unknown flags: EINVAL; no iovecs
 * at all and IOV_MAX of them are fine. */
TEST_CASE(pwritev_bad_iovecs_einval)
{
	const struct handle_row rows[] = {
		{ PWRITEV, H_RW, .iov = V_NULL, .iovcnt = 1, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_NULL, .iovcnt = 0, GIVES(0) },
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = -1, .len = 10, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_BYTES, .iovcnt = IOV_MAX + 1, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_BYTES, .iovcnt = IOV_MAX, GIVES(IOV_MAX) }, /* the same bytes again */
		{ PWRITEV, H_RW, .iov = V_NULL_BASE, .iovcnt = 2, .len = 10, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_SUM_HALVES, .iovcnt = 2, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_SUM_PLUS1, .iovcnt = 2, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = -1, FAILS(EINVAL) },
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .arg = -1, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_pwritev ending past the largest file: EFBIG; of no bytes there, 0. */
TEST_CASE(pwritev_past_largest_file_efbig)
{
	const off_t max = largest_file();
	const struct handle_row rows[] = {
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = max - 5, FAILS(EFBIG) },
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = INT64_MAX - 5, FAILS(EFBIG) },
		{ PWRITEV, H_WO, .iov = V_ONE, .iovcnt = 1, .len = 0, .off = INT64_MAX, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fsync and pc_fdatasync: EBADF on a NULL or closed handle, 0 on any
 * open one, read-only too. */
TEST_CASE(fsync_needs_an_open_handle)
{
	const struct handle_row rows[] = {
		{ FSYNC, H_NULL, FAILS(EBADF) },
		{ FSYNC, H_CLOSED, FAILS(EBADF) },
		{ FSYNC, H_RO, GIVES(0) },
		{ FSYNC, H_WO, GIVES(0) },
		{ FDATASYNC, H_NULL, FAILS(EBADF) },
		{ FDATASYNC, H_CLOSED, FAILS(EBADF) },
		{ FDATASYNC, H_RO, GIVES(0) },
		{ FDATASYNC, H_RW, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_ftruncate (.off is the length): EBADF on a NULL, closed or read-only
 * handle, EINVAL for a negative length, EFBIG past the largest file. */
TEST_CASE(ftruncate_bad_handle_or_length)
{
	const off_t past_max = past_largest_file();
	const struct handle_row rows[] = {
		{ FTRUNCATE, H_NULL, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_CLOSED, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_RO, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_RW, .off = -1, FAILS(EINVAL) },
		{ FTRUNCATE, H_RW, .off = INT64_MIN, FAILS(EINVAL) },
		{ FTRUNCATE, H_RW, .off = past_max, FAILS(EFBIG) },
		{ FTRUNCATE, H_RW, .off = FILE_SIZE, GIVES(0) },
		{ FTRUNCATE, H_WO, .off = FILE_SIZE, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fallocate on a NULL, closed or read-only handle: EBADF. */
TEST_CASE(fallocate_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ FALLOCATE, H_NULL, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_CLOSED, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_RO, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_RO, .arg = FALLOC_FL_KEEP_SIZE, .off = 0, .range = 4096, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fallocate of an empty or negative range, at a negative offset: EINVAL. */
TEST_CASE(fallocate_bad_range_einval)
{
	const struct handle_row rows[] = {
		{ FALLOCATE, H_RW, .off = 0, .range = 0, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = 0, .range = -1, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = 0, .range = INT64_MIN, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = -1, .range = 4096, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = INT64_MIN, .range = 4096, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, .range = 0, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fallocate ending past the largest file (or past INT64_MAX): EFBIG. */
TEST_CASE(fallocate_past_largest_file_efbig)
{
	const off_t max = largest_file();
	const off_t past_max = past_largest_file();
	const struct handle_row rows[] = {
		{ FALLOCATE, H_RW, .off = max - 5, .range = 10, FAILS(EFBIG) },
		{ FALLOCATE, H_RW, .off = past_max, .range = 1, FAILS(EFBIG) },
		{ FALLOCATE, H_RW, .off = INT64_MAX, .range = INT64_MAX, FAILS(EFBIG) }, /* overflows off_t */
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fallocate supports mode 0 and FALLOC_FL_KEEP_SIZE only: any other
 * mode, known to the kernel or not, is EOPNOTSUPP. */
TEST_CASE(fallocate_only_keep_size_mode)
{
	const struct handle_row rows[] = {
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_PUNCH_HOLE, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_COLLAPSE_RANGE, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_INSERT_RANGE, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = 0x40 /* FALLOC_FL_UNSHARE_RANGE */, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		  .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = 0x4000, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = -1, .range = 4096, FAILS(EOPNOTSUPP) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_KEEP_SIZE, .off = 0, .range = 4096, GIVES(0) },
		{ FALLOCATE, H_WO, .arg = FALLOC_FL_KEEP_SIZE, .off = 4096, .range = 4096, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_size: EBADF on a NULL or closed handle; the size on any open one. */
TEST_CASE(size_needs_an_open_handle)
{
	const struct handle_row rows[] = {
		{ SIZE, H_NULL, FAILS(EBADF) },
		{ SIZE, H_CLOSED, FAILS(EBADF) },
		{ SIZE, H_RO, GIVES(FILE_SIZE) },
		{ SIZE, H_WO, GIVES(FILE_SIZE) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fadvise on a NULL or closed handle: EBADF. */
TEST_CASE(fadvise_bad_handle_ebadf)
{
	const struct handle_row rows[] = {
		{ FADVISE, H_NULL, .arg = POSIX_FADV_DONTNEED, FAILS(EBADF) },
		{ FADVISE, H_CLOSED, .arg = POSIX_FADV_DONTNEED, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fadvise with an advice that does not exist, a negative offset or
 * length: EINVAL. */
TEST_CASE(fadvise_bad_advice_or_range_einval)
{
	const struct handle_row rows[] = {
		{ FADVISE, H_RW, .arg = 6, FAILS(EINVAL) },
		{ FADVISE, H_RW, .arg = 99, FAILS(EINVAL) },
		{ FADVISE, H_RW, .arg = -1, FAILS(EINVAL) },
		{ FADVISE, H_RW, .off = -1, .arg = POSIX_FADV_WILLNEED, FAILS(EINVAL) },
		{ FADVISE, H_RW, .range = -1, .arg = POSIX_FADV_WILLNEED, FAILS(EINVAL) },
		{ FADVISE, H_RW, .off = INT64_MIN, .arg = POSIX_FADV_DONTNEED, FAILS(EINVAL) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_fadvise with off + len past the largest offset: to the end of the
 * file; past EOF, and each advice on any open handle: 0. */
TEST_CASE(fadvise_range_past_end_is_fine)
{
	const struct handle_row rows[] = {
		{ FADVISE, H_RW, .off = INT64_MAX, .range = INT64_MAX, .arg = POSIX_FADV_WILLNEED, GIVES(0) },
		{ FADVISE, H_RW, .off = 4096, .range = INT64_MAX, .arg = POSIX_FADV_DONTNEED, GIVES(0) },
		{ FADVISE, H_RO, .off = FILE_SIZE, .range = 1 << 20, .arg = POSIX_FADV_WILLNEED, GIVES(0) },
		{ FADVISE, H_RO, .arg = POSIX_FADV_SEQUENTIAL, GIVES(0) },
		{ FADVISE, H_WO, .arg = POSIX_FADV_NORMAL, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_close of NULL, and a second close of a closed handle: EBADF. */
TEST_CASE(close_null_or_closed_ebadf)
{
	const struct handle_row rows[] = {
		{ CLOSE, H_NULL, FAILS(EBADF) },
		{ CLOSE, H_CLOSED, FAILS(EBADF) },
	};
	run_handle_rows(ROWS(rows));
}

/* The counters: NULL or closed objects leave *s zeroed, a NULL *s is
 * ignored, and an open one fills it. */
TEST_CASE(stats_of_null_or_closed_left_zeroed)
{
	const struct handle_row rows[] = {
		{ FILE_STATS, H_NULL, GIVES(0) },
		{ FILE_STATS, H_CLOSED, GIVES(0) },
		{ FILE_STATS, H_RW, M_NULL, GIVES(0) },
		{ FILE_STATS, H_RO, GIVES(1) },
		{ CACHE_STATS, H_NULL, GIVES(0) },
		{ CACHE_STATS, H_RW, M_NULL, GIVES(0) },
		{ CACHE_STATS, H_RW, GIVES(1) },
	};
	run_handle_rows(ROWS(rows));
}

/* pc_cache_destroy(NULL): EINVAL; pc_config_init(NULL) does not crash. */
TEST_CASE(cache_calls_with_null)
{
	const struct handle_row rows[] = {
		{ CACHE_DESTROY_NULL, H_NULL, FAILS(EINVAL) },
		{ CONFIG_INIT_NULL, H_NULL, GIVES(0) },
	};
	run_handle_rows(ROWS(rows));
}

