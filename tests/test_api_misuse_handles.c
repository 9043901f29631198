/*
 * test_api_misuse.c - every public call with every kind of bad argument
 * returns what include/pagecache.h documents, never crashes and never hangs.
 *
 * Three tables, each row one call with its arguments and the expected
 * return and errno (checked exactly; errno is not checked on success):
 *
 *   handle_rows  pc_pread .. pc_file_stats on a read-write, read-only,
 *                write-only, just-closed (quarantined) and NULL handle:
 *                NULL buffers and iovecs, negative and overflowing offsets
 *                and lengths, offsets past the file system's largest file
 *                (EFBIG), iovcnt out of range, iovec totals over SSIZE_MAX,
 *                unknown flags, fallocate modes and fadvise advice, reads
 *                at or past EOF and zero-length calls (0); also
 *                pc_cache_stats, pc_cache_destroy and pc_config_init with
 *                NULL.
 *   open_rows    pc_open: NULL cache or path, unknown flags, O_ACCMODE,
 *                O_RDONLY|O_TRUNC, missing paths, O_EXCL on existing
 *                paths, directories, a FIFO, /dev/null, a socket, a /proc
 *                file (no O_DIRECT), names too long, a path through a file,
 *                a symlink loop, permission denied (as root: run with the
 *                DAC-override capabilities dropped from the calling thread),
 *                the file open in another cache (EBUSY).
 *   config_rows  pc_cache_new with each pc_config field out of range.
 *
 * Every row that fails prints one line; the program then fails.  After
 * all rows the file must hold exactly what it held before (no failed call
 * changed it) and no failed pc_open may have created a file.  A watchdog
 * fails the test if a call hangs (opening a FIFO blocks in open(2)).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <limits.h>
#include <linux/capability.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* Not a multiple of a block: EOF falls inside one. */
#define FILE_SIZE 8292

/* ------------------------------------------------------------- fixture */

/* The objects a row can name. */
enum handle_kind { H_RW, H_RO, H_WO, H_CLOSED, H_NULL };
static const char *const handle_names[] = { "rw", "ro", "wo", "closed", "NULL" };

static struct {
	char dir[4096];
	char file[4200];
	struct pc_cache *c;
	struct pc_file *h[H_NULL + 1]; /* h[H_NULL] stays NULL */
	int64_t max_bytes;             /* the file system's largest file */
	uint8_t content[FILE_SIZE];    /* what the file holds */
	uint8_t buf[FILE_SIZE];        /* where reads go */
} fx;

static struct pc_cache *small_cache(void)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 4 * MiB;
	cfg.max_folio_size = 64 * KiB;
	cfg.flags = PC_CFG_LAZY_MEMORY;
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	return c;
}

static void fixture_setup(void)
{
	snprintf(fx.dir, sizeof(fx.dir), "%s", test_dir("api_misuse"));
	test_path(fx.file, sizeof(fx.file), fx.dir, "data");
	tu_fill_pattern(fx.content, FILE_SIZE, 7, 0);
	tu_write_file(fx.file, fx.content, FILE_SIZE);
	fx.c = small_cache();
	/* Read-write first: the shared mapping then has a readable descriptor. */
	fx.h[H_RW] = pc_open(fx.c, fx.file, O_RDWR, 0);
	fx.h[H_RO] = pc_open(fx.c, fx.file, O_RDONLY, 0);
	fx.h[H_WO] = pc_open(fx.c, fx.file, O_WRONLY, 0);
	fx.h[H_CLOSED] = pc_open(fx.c, fx.file, O_RDWR, 0);
	REQUIRE(fx.h[H_RW] && fx.h[H_RO] && fx.h[H_WO] && fx.h[H_CLOSED]);
	REQUIRE(pc_close(fx.h[H_CLOSED]) == 0); /* now in the quarantine */
	fx.max_bytes = fx.h[H_RW]->m->max_bytes;
	printf("file system's largest file: %lld bytes\n", (long long)fx.max_bytes);
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

/*
 * Watchdog.  SIGALRM without SA_RESTART interrupts a blocking open(2) (of a
 * FIFO), so a row that would hang fails with EINTR and the next row runs;
 * if the row is still running at the second alarm, the test fails there.
 * The signal may land on one of the cache's threads: it is passed on to the
 * main thread, the one running the rows.
 */
#define ROW_TIMEOUT_S 10
static volatile sig_atomic_t alarms;
static pid_t main_tid;

static void on_alarm(int sig)
{
	if (syscall(SYS_gettid) != main_tid) {
		syscall(SYS_tgkill, getpid(), main_tid, sig);
		return;
	}
	if (++alarms >= 2) {
		static const char msg[] = "test_api_misuse: a call hung; failing\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(1);
	}
	alarm(ROW_TIMEOUT_S);
}

static void watchdog_install(void)
{
	main_tid = (pid_t)syscall(SYS_gettid);
	struct sigaction sa = { .sa_handler = on_alarm };
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0);
}

/* Around each row's call. */
static void row_timer_start(void)
{
	alarms = 0;
	alarm(ROW_TIMEOUT_S);
}

static void row_timer_stop(void)
{
	alarm(0);
}

/* ------------------------------------------------------ expected results */

/* A row's expectation: ret, and errno when ret is -1. */
#define FAILS(e) .ret = -1, .err = (e), .err_name = #e
#define GIVES(r) .ret = (r), .err = 0, .err_name = NULL

/* Counted as a CHECK, without CHECK's own line: the row prints its own. */
static bool outcome_ok(long long got, int got_err, long long ret, int err)
{
	bool ok = got == ret && (ret != -1 || got_err == err);
	if (ok)
		tu_passed++;
	else
		tu_failed++;
	return ok;
}

static void report_row(const char *table, unsigned i, const char *call, long long got, int got_err, long long ret,
		       const char *err_name)
{
	if (ret == -1)
		fprintf(stderr, "FAIL %s[%u] %s: got %lld errno %d (%s), expected -1 %s\n", table, i, call, got,
			got_err, strerror(got_err), err_name);
	else
		fprintf(stderr, "FAIL %s[%u] %s: got %lld errno %d (%s), expected %lld\n", table, i, call, got,
			got_err, strerror(got_err), ret);
}

/* ------------------------------------------------------- handle calls */

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

static unsigned run_handle_rows(void)
{
	const off_t max = (off_t)fx.max_bytes;
	/* One past the largest file, when that is an off_t (else INT64_MAX,
	 * which is then past it by the length of any write). */
	const off_t past_max = fx.max_bytes < INT64_MAX ? max + 1 : INT64_MAX;
	const size_t ssize_max = SSIZE_MAX;
	const struct handle_row rows[] = {
		/* pc_pread: the handle. */
		{ PREAD, H_NULL, .len = 10, FAILS(EBADF) },
		{ PREAD, H_CLOSED, .len = 10, FAILS(EBADF) },
		{ PREAD, H_WO, .len = 10, FAILS(EBADF) },
		{ PREAD, H_WO, .len = 0, FAILS(EBADF) },
		{ PREAD, H_WO, M_NULL, .len = 0, FAILS(EBADF) },
		/* Buffer, offset, length, flags. */
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
		/* At and past EOF: 0, whatever the offset and length. */
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

		/* pc_pwrite: the handle. */
		{ PWRITE, H_NULL, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_CLOSED, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_RO, .len = 10, FAILS(EBADF) },
		{ PWRITE, H_RO, .len = 0, FAILS(EBADF) },
		/* Buffer, offset, length, flags. */
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
		/* Past the largest file. */
		{ PWRITE, H_RW, .len = 1, .off = past_max, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 10, .off = max - 5, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 1, .off = INT64_MAX, FAILS(EFBIG) },
		{ PWRITE, H_RW, .len = 10, .off = INT64_MAX - 5, FAILS(EFBIG) }, /* overflows off_t */
		{ PWRITE, H_RW, .len = ssize_max, .off = 1, FAILS(EFBIG) },
		{ PWRITE, H_WO, .len = 10, .off = INT64_MAX - 5, .arg = PC_DIRECT, FAILS(EFBIG) },
		/* Zero bytes: 0 at any offset. */
		{ PWRITE, H_RW, .len = 0, .off = INT64_MAX, GIVES(0) },
		{ PWRITE, H_RW, .len = 0, .off = FILE_SIZE + 4096, GIVES(0) },

		/* pc_preadv. */
		{ PREADV, H_NULL, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_CLOSED, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_WO, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PREADV, H_WO, .iov = V_NULL, .iovcnt = 0, FAILS(EBADF) },
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
		{ PREADV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = FILE_SIZE, GIVES(0) },
		{ PREADV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = INT64_MAX, GIVES(0) },

		/* pc_pwritev. */
		{ PWRITEV, H_NULL, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_CLOSED, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_RO, .iov = V_ONE, .iovcnt = 1, .len = 10, FAILS(EBADF) },
		{ PWRITEV, H_RO, .iov = V_NULL, .iovcnt = 0, FAILS(EBADF) },
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
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = max - 5, FAILS(EFBIG) },
		{ PWRITEV, H_RW, .iov = V_ONE, .iovcnt = 1, .len = 10, .off = INT64_MAX - 5, FAILS(EFBIG) },
		{ PWRITEV, H_WO, .iov = V_ONE, .iovcnt = 1, .len = 0, .off = INT64_MAX, GIVES(0) },

		/* pc_fsync, pc_fdatasync: any open handle, read-only too. */
		{ FSYNC, H_NULL, FAILS(EBADF) },
		{ FSYNC, H_CLOSED, FAILS(EBADF) },
		{ FSYNC, H_RO, GIVES(0) },
		{ FSYNC, H_WO, GIVES(0) },
		{ FDATASYNC, H_NULL, FAILS(EBADF) },
		{ FDATASYNC, H_CLOSED, FAILS(EBADF) },
		{ FDATASYNC, H_RO, GIVES(0) },
		{ FDATASYNC, H_RW, GIVES(0) },

		/* pc_ftruncate (.off is the length). */
		{ FTRUNCATE, H_NULL, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_CLOSED, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_RO, .off = 0, FAILS(EBADF) },
		{ FTRUNCATE, H_RW, .off = -1, FAILS(EINVAL) },
		{ FTRUNCATE, H_RW, .off = INT64_MIN, FAILS(EINVAL) },
		{ FTRUNCATE, H_RW, .off = past_max, FAILS(EFBIG) },
		{ FTRUNCATE, H_RW, .off = FILE_SIZE, GIVES(0) },
		{ FTRUNCATE, H_WO, .off = FILE_SIZE, GIVES(0) },

		/* pc_fallocate. */
		{ FALLOCATE, H_NULL, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_CLOSED, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_RO, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_RO, .arg = FALLOC_FL_KEEP_SIZE, .off = 0, .range = 4096, FAILS(EBADF) },
		{ FALLOCATE, H_RW, .off = 0, .range = 0, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = 0, .range = -1, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = 0, .range = INT64_MIN, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = -1, .range = 4096, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = INT64_MIN, .range = 4096, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .arg = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, .range = 0, FAILS(EINVAL) },
		{ FALLOCATE, H_RW, .off = max - 5, .range = 10, FAILS(EFBIG) },
		{ FALLOCATE, H_RW, .off = past_max, .range = 1, FAILS(EFBIG) },
		{ FALLOCATE, H_RW, .off = INT64_MAX, .range = INT64_MAX, FAILS(EFBIG) }, /* overflows off_t */
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

		/* pc_size. */
		{ SIZE, H_NULL, FAILS(EBADF) },
		{ SIZE, H_CLOSED, FAILS(EBADF) },
		{ SIZE, H_RO, GIVES(FILE_SIZE) },
		{ SIZE, H_WO, GIVES(FILE_SIZE) },

		/* pc_fadvise. */
		{ FADVISE, H_NULL, .arg = POSIX_FADV_DONTNEED, FAILS(EBADF) },
		{ FADVISE, H_CLOSED, .arg = POSIX_FADV_DONTNEED, FAILS(EBADF) },
		{ FADVISE, H_RW, .arg = 6, FAILS(EINVAL) },
		{ FADVISE, H_RW, .arg = 99, FAILS(EINVAL) },
		{ FADVISE, H_RW, .arg = -1, FAILS(EINVAL) },
		{ FADVISE, H_RW, .off = -1, .arg = POSIX_FADV_WILLNEED, FAILS(EINVAL) },
		{ FADVISE, H_RW, .range = -1, .arg = POSIX_FADV_WILLNEED, FAILS(EINVAL) },
		{ FADVISE, H_RW, .off = INT64_MIN, .arg = POSIX_FADV_DONTNEED, FAILS(EINVAL) },
		/* off + len past the largest offset: to the end of the file. */
		{ FADVISE, H_RW, .off = INT64_MAX, .range = INT64_MAX, .arg = POSIX_FADV_WILLNEED, GIVES(0) },
		{ FADVISE, H_RW, .off = 4096, .range = INT64_MAX, .arg = POSIX_FADV_DONTNEED, GIVES(0) },
		{ FADVISE, H_RO, .off = FILE_SIZE, .range = 1 << 20, .arg = POSIX_FADV_WILLNEED, GIVES(0) },
		{ FADVISE, H_RO, .arg = POSIX_FADV_SEQUENTIAL, GIVES(0) },
		{ FADVISE, H_WO, .arg = POSIX_FADV_NORMAL, GIVES(0) },

		/* pc_close: NULL, and a second close of a closed handle. */
		{ CLOSE, H_NULL, FAILS(EBADF) },
		{ CLOSE, H_CLOSED, FAILS(EBADF) },

		/* Counters: NULL or closed objects leave *s zeroed, NULL *s is
		 * ignored, and an open one fills it. */
		{ FILE_STATS, H_NULL, GIVES(0) },
		{ FILE_STATS, H_CLOSED, GIVES(0) },
		{ FILE_STATS, H_RW, M_NULL, GIVES(0) },
		{ FILE_STATS, H_RO, GIVES(1) },
		{ CACHE_STATS, H_NULL, GIVES(0) },
		{ CACHE_STATS, H_RW, M_NULL, GIVES(0) },
		{ CACHE_STATS, H_RW, GIVES(1) },

		/* The cache-level calls with NULL. */
		{ CACHE_DESTROY_NULL, H_NULL, FAILS(EINVAL) },
		{ CONFIG_INIT_NULL, H_NULL, GIVES(0) },
	};
	unsigned failed = 0;
	for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct handle_row *r = &rows[i];
		row_timer_start();
		errno = 0;
		long long got = run_handle_row(r);
		int got_err = errno;
		row_timer_stop();
		bool ok = outcome_ok(got, got_err, r->ret, r->err);
		if (!ok) {
			char what[256];
			describe_handle_row(r, what, sizeof(what));
			report_row("handle_rows", i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
	}
	printf("handle_rows: %zu rows, %u failed\n", sizeof(rows) / sizeof(rows[0]), failed);
	return failed;
}

/* ------------------------------------------------------------ pc_open */

enum cache_kind { C_FX, C_NULL, C_OTHER /* a second cache: the file is open in the first */ };
static const char *const cache_names[] = { "cache", "NULL", "other_cache" };

enum path_kind {
	P_FILE,          /* the fixture's regular file */
	P_NULL,
	P_EMPTY,         /* "" */
	P_MISSING,       /* never exists */
	P_MISSING_DIR,   /* missing/file */
	P_DIR,
	P_DIR_LINK,      /* a symlink to a directory */
	P_FIFO,
	P_DEVNULL,       /* a character device */
	P_SOCKET,
	P_PROC,          /* /proc/self/status: regular, no O_DIRECT */
	P_TOO_LONG,      /* PATH_MAX and more */
	P_NAME_TOO_LONG, /* one component of NAME_MAX + 1 */
	P_THROUGH_FILE,  /* data/x */
	P_LOOP,          /* a symlink to itself */
	P_DANGLING,      /* a symlink to a missing file */
	P_NOPERM,        /* a regular file of mode 0 */
	P_NOSEARCH,      /* a file in a directory of mode 0 */
	P_RODIR_NEW,     /* a new file in a directory of mode 0555 */
	P_NEW,           /* created by a row that succeeds */
	P_COUNT
};
static const char *const path_names[] = {
	"file", "NULL", "\"\"", "missing", "missing/file", "dir", "symlink-to-dir", "fifo", "/dev/null",
	"socket", "/proc/self/status", "path>=PATH_MAX", "name>NAME_MAX", "file/x", "symlink-loop",
	"dangling-symlink", "mode-0-file", "mode-0-dir/file", "mode-0555-dir/new", "new",
};

static struct {
	char path[P_COUNT][2 * PATH_MAX];
	const char *skip[P_COUNT]; /* why rows on this path cannot run */
	struct pc_cache *other;
} op;

static void make_path(enum path_kind k, const char *name)
{
	test_path(op.path[k], sizeof(op.path[k]), fx.dir, name);
}

static void open_paths_setup(void)
{
	snprintf(op.path[P_FILE], sizeof(op.path[P_FILE]), "%s", fx.file);
	op.path[P_EMPTY][0] = 0;
	make_path(P_MISSING, "missing");
	make_path(P_MISSING_DIR, "missing_dir/file");
	snprintf(op.path[P_DIR], sizeof(op.path[P_DIR]), "%s", fx.dir);
	make_path(P_DIR_LINK, "dir_link");
	REQUIRE(symlink(".", op.path[P_DIR_LINK]) == 0);
	make_path(P_FIFO, "fifo");
	REQUIRE(mkfifo(op.path[P_FIFO], 0644) == 0);
	snprintf(op.path[P_DEVNULL], sizeof(op.path[P_DEVNULL]), "/dev/null");
	snprintf(op.path[P_PROC], sizeof(op.path[P_PROC]), "/proc/self/status");

	make_path(P_SOCKET, "sock");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (strlen(op.path[P_SOCKET]) >= sizeof(sa.sun_path) || s < 0) {
		op.skip[P_SOCKET] = "the socket's path is too long for sun_path";
	} else {
		strcpy(sa.sun_path, op.path[P_SOCKET]);
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			op.skip[P_SOCKET] = "bind of a unix socket failed";
	}
	if (s >= 0)
		close(s); /* the socket file stays */

	/* "dir/aaaa...": PATH_MAX + 10 characters in all. */
	size_t n = (size_t)snprintf(op.path[P_TOO_LONG], sizeof(op.path[P_TOO_LONG]), "%s/", fx.dir);
	memset(op.path[P_TOO_LONG] + n, 'a', PATH_MAX + 10 - n);
	op.path[P_TOO_LONG][PATH_MAX + 10] = 0;
	n = (size_t)snprintf(op.path[P_NAME_TOO_LONG], sizeof(op.path[P_NAME_TOO_LONG]), "%s/", fx.dir);
	memset(op.path[P_NAME_TOO_LONG] + n, 'b', NAME_MAX + 1);
	op.path[P_NAME_TOO_LONG][n + NAME_MAX + 1] = 0;

	make_path(P_THROUGH_FILE, "data/x");
	make_path(P_LOOP, "loop");
	REQUIRE(symlink("loop", op.path[P_LOOP]) == 0);
	make_path(P_DANGLING, "dangling");
	REQUIRE(symlink("missing_target", op.path[P_DANGLING]) == 0);

	make_path(P_NOPERM, "noperm");
	tu_write_file(op.path[P_NOPERM], fx.content, 4096);
	REQUIRE(chmod(op.path[P_NOPERM], 0) == 0);
	char d[4300];
	test_path(d, sizeof(d), fx.dir, "nosearch");
	REQUIRE(mkdir(d, 0755) == 0);
	make_path(P_NOSEARCH, "nosearch/file");
	tu_write_file(op.path[P_NOSEARCH], fx.content, 4096);
	REQUIRE(chmod(d, 0) == 0);
	test_path(d, sizeof(d), fx.dir, "rodir");
	REQUIRE(mkdir(d, 0555) == 0);
	make_path(P_RODIR_NEW, "rodir/new");
	make_path(P_NEW, "new");
	op.other = small_cache();
}

/* Mode-0 directories must be searchable again for test_rmdir. */
static void open_paths_teardown(void)
{
	char d[4300];
	test_path(d, sizeof(d), fx.dir, "nosearch");
	chmod(d, 0755);
	test_path(d, sizeof(d), fx.dir, "rodir");
	chmod(d, 0755);
	CHECK(pc_cache_destroy(op.other) == 0);
}

/*
 * Root passes every permission check, so the EACCES rows run with
 * CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from the calling
 * thread's effective set (capabilities are per thread; pc_open opens the
 * file in the calling thread), and raised again right after.  A user other
 * than root needs nothing.
 */
static struct __user_cap_header_struct cap_hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
static struct __user_cap_data_struct saved_caps[_LINUX_CAPABILITY_U32S_3];

static bool drop_dac_caps(void)
{
	if (geteuid() != 0)
		return true;
	if (syscall(SYS_capget, &cap_hdr, saved_caps) != 0)
		return false;
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memcpy(d, saved_caps, sizeof(d));
	d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
	return syscall(SYS_capset, &cap_hdr, d) == 0;
}

static void restore_caps(void)
{
	if (geteuid() == 0)
		REQUIRE(syscall(SYS_capset, &cap_hdr, saved_caps) == 0);
}

struct open_row {
	enum cache_kind c;
	enum path_kind p;
	int flags;
	const char *flags_name;
	bool unprivileged; /* run without the DAC-override capabilities */
	long long ret;     /* 0: a handle (closed again at once), -1: NULL */
	int err;
	const char *err_name;
};
#define FL(f) .flags = (f), .flags_name = #f
#define OPENS GIVES(0)

static struct pc_cache *cache_of(enum cache_kind k)
{
	return k == C_FX ? fx.c : k == C_OTHER ? op.other : NULL;
}

/* 0 and the handle closed again, or -1. */
static long long run_open_row(const struct open_row *r)
{
	const char *path = r->p == P_NULL ? NULL : op.path[r->p];
	struct pc_file *h = pc_open(cache_of(r->c), path, r->flags, 0644);
	if (!h)
		return -1;
	int e = errno;
	CHECK(pc_close(h) == 0);
	errno = e;
	return 0;
}

static unsigned run_open_rows(void)
{
	const struct open_row rows[] = {
		/* NULL arguments. */
		{ C_NULL, P_FILE, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_NULL, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_NULL, P_NULL, FL(O_RDWR | O_CREAT), FAILS(EINVAL) },
		/* Flags: access mode 3, unknown flags, O_TRUNC without write access. */
		{ C_FX, P_FILE, FL(O_ACCMODE), FAILS(EINVAL) },
		{ C_FX, P_MISSING, FL(O_ACCMODE | O_CREAT), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDWR | O_APPEND), FAILS(EINVAL) },
		{ C_FX, P_MISSING, FL(O_RDWR | O_CREAT | O_APPEND), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDWR | O_NONBLOCK), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDONLY | O_PATH), FAILS(EINVAL) },
		{ C_FX, P_DIR, FL(O_RDONLY | O_DIRECTORY), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDONLY | O_NOFOLLOW), FAILS(EINVAL) },
		{ C_FX, P_DIR, FL(O_RDWR | O_TMPFILE), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDWR | O_ASYNC), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDWR | O_NOCTTY), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(0x40000000), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(-1), FAILS(EINVAL) },
		{ C_FX, P_FILE, FL(O_RDONLY | O_TRUNC), FAILS(EINVAL) },
		{ C_FX, P_MISSING, FL(O_RDONLY | O_CREAT | O_TRUNC), FAILS(EINVAL) },
		/* Missing paths. */
		{ C_FX, P_EMPTY, FL(O_RDONLY), FAILS(ENOENT) },
		{ C_FX, P_EMPTY, FL(O_RDWR | O_CREAT), FAILS(ENOENT) },
		{ C_FX, P_MISSING, FL(O_RDONLY), FAILS(ENOENT) },
		{ C_FX, P_MISSING, FL(O_RDWR), FAILS(ENOENT) },
		{ C_FX, P_MISSING_DIR, FL(O_RDWR | O_CREAT), FAILS(ENOENT) },
		{ C_FX, P_DANGLING, FL(O_RDONLY), FAILS(ENOENT) },
		/* O_CREAT | O_EXCL on anything that exists. */
		{ C_FX, P_FILE, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_DIR, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_FIFO, FL(O_WRONLY | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_DANGLING, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
		/* Directories. */
		{ C_FX, P_DIR, FL(O_RDONLY), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_WRONLY), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_RDWR), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_RDONLY | O_CREAT), FAILS(EISDIR) },
		{ C_FX, P_DIR_LINK, FL(O_RDONLY), FAILS(EISDIR) },
		/* Other non-regular files, and a file system without O_DIRECT. */
		{ C_FX, P_FIFO, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_WRONLY), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_RDWR | O_CREAT), FAILS(EINVAL) },
		{ C_FX, P_DEVNULL, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_DEVNULL, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_SOCKET, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_SOCKET, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_PROC, FL(O_RDONLY), FAILS(EINVAL) },
		/* Names. */
		{ C_FX, P_TOO_LONG, FL(O_RDONLY), FAILS(ENAMETOOLONG) },
		{ C_FX, P_TOO_LONG, FL(O_RDWR | O_CREAT), FAILS(ENAMETOOLONG) },
		{ C_FX, P_NAME_TOO_LONG, FL(O_RDWR | O_CREAT), FAILS(ENAMETOOLONG) },
		{ C_FX, P_THROUGH_FILE, FL(O_RDONLY), FAILS(ENOTDIR) },
		{ C_FX, P_THROUGH_FILE, FL(O_RDWR | O_CREAT), FAILS(ENOTDIR) },
		{ C_FX, P_LOOP, FL(O_RDONLY), FAILS(ELOOP) },
		/* Permissions. */
		{ C_FX, P_NOPERM, FL(O_RDONLY), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_NOPERM, FL(O_RDWR), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_NOSEARCH, FL(O_RDONLY), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_RODIR_NEW, FL(O_RDWR | O_CREAT), .unprivileged = true, FAILS(EACCES) },
		/* The file is open (read-write) in another cache of this process. */
		{ C_OTHER, P_FILE, FL(O_RDWR), FAILS(EBUSY) },
		{ C_OTHER, P_FILE, FL(O_RDONLY), FAILS(EBUSY) },
		/* What is allowed. */
		{ C_FX, P_FILE, FL(O_RDONLY), OPENS },
		{ C_FX, P_FILE, FL(O_RDONLY | O_CREAT), OPENS },
		{ C_FX, P_FILE, FL(O_RDWR | O_DSYNC | O_DIRECT | O_CLOEXEC | O_NOATIME), OPENS },
		{ C_FX, P_FILE, FL(O_WRONLY | O_SYNC), OPENS },
		{ C_FX, P_NEW, FL(O_RDWR | O_CREAT | O_EXCL), OPENS },
	};
	unsigned failed = 0;
	bool privileged_skip_printed = false;
	for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct open_row *r = &rows[i];
		char what[512];
		snprintf(what, sizeof(what), "pc_open(%s, %s, %s)%s", cache_names[r->c], path_names[r->p],
			 r->flags_name, r->unprivileged ? " without DAC override" : "");
		if (op.skip[r->p]) {
			printf("skip open_rows[%u] %s: %s\n", i, what, op.skip[r->p]);
			continue;
		}
		if (r->unprivileged && !drop_dac_caps()) {
			if (!privileged_skip_printed)
				printf("skip the EACCES rows: running as root and cannot drop CAP_DAC_OVERRIDE (%s)\n",
				       strerror(errno));
			privileged_skip_printed = true;
			continue;
		}
		row_timer_start();
		errno = 0;
		long long got = run_open_row(r);
		int got_err = errno;
		row_timer_stop();
		if (r->unprivileged)
			restore_caps();
		bool ok = outcome_ok(got, got_err, r->ret, r->err);
		if (!ok) {
			report_row("open_rows", i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
		/* A failed pc_open creates nothing (removed, so later rows still
		 * find the path missing). */
		if (r->p == P_MISSING && unlink(op.path[P_MISSING]) == 0) {
			fprintf(stderr, "FAIL open_rows[%u] %s created %s\n", i, what, op.path[P_MISSING]);
			tu_failed++;
			failed += ok;
		}
	}
	printf("open_rows: %zu rows, %u failed\n", sizeof(rows) / sizeof(rows[0]), failed);
	return failed;
}

/* ------------------------------------------------------ pc_cache_new */

struct cfg_set {
	const char *field;
	size_t off, size;
	uint64_t value;
};
#define SET(f, v) { #f, offsetof(struct pc_config, f), sizeof(((struct pc_config *)0)->f), (uint64_t)(v) }

struct config_row {
	struct cfg_set set[2]; /* on top of small_cache's config; unused ones have no field */
	long long ret;         /* 0: a cache (destroyed again at once), -1: NULL */
	int err;
	const char *err_name;
};

static void apply_set(struct pc_config *cfg, const struct cfg_set *s)
{
	char *p = (char *)cfg + s->off;
	if (s->size == sizeof(size_t))
		*(size_t *)p = (size_t)s->value;
	else
		*(unsigned *)p = (unsigned)s->value;
}

static long long run_config_row(const struct config_row *r)
{
	struct pc_config cfg;
	pc_config_init(&cfg);
	cfg.memory_limit = 4 * MiB;
	cfg.max_folio_size = 64 * KiB;
	cfg.flags = PC_CFG_LAZY_MEMORY;
	for (unsigned k = 0; k < 2 && r->set[k].field; k++)
		apply_set(&cfg, &r->set[k]);
	struct pc_cache *c = pc_cache_new(&cfg);
	if (!c)
		return -1;
	CHECK(pc_cache_destroy(c) == 0);
	return 0;
}

static unsigned run_config_rows(void)
{
	const uint64_t TiB = 1024 * 1024 * MiB;
	const struct config_row rows[] = {
		/* memory_limit: at least 1 MiB and 16 folios (after rounding
		 * down to 4 KiB), below 16 TiB; 0 is the default. */
		{ { SET(memory_limit, 512 * KiB), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, MiB - 4096), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, MiB + 4095), SET(max_folio_size, 4096) }, GIVES(0) },
		{ { SET(memory_limit, 2 * MiB), SET(max_folio_size, 256 * KiB) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 16 * TiB) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 16 * TiB - 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 0) }, GIVES(0) },
		/* max_folio_size: a power of two from 4 KiB to 2 MiB; 0 is the default. */
		{ { SET(max_folio_size, 1) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 2048) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 12 * KiB) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 4 * MiB), SET(memory_limit, 128 * MiB) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 0) }, GIVES(0) },
		/* block_size: 0, or a power of two from 512 to 64 KiB, at most max_folio_size. */
		{ { SET(block_size, 256) }, FAILS(EINVAL) },
		{ { SET(block_size, 1000) }, FAILS(EINVAL) },
		{ { SET(block_size, 128 * KiB), SET(max_folio_size, 256 * KiB) }, FAILS(EINVAL) },
		{ { SET(block_size, 8192), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(block_size, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(block_size, 64 * KiB) }, GIVES(0) },
		/* dirty_limit_bytes: at most half of memory_limit. */
		{ { SET(dirty_limit_bytes, 2 * MiB + 4096) }, FAILS(EINVAL) },
		{ { SET(dirty_limit_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(dirty_limit_bytes, 2 * MiB) }, GIVES(0) },
		/* dirty_background_bytes: at most dirty_limit_bytes (given or default). */
		{ { SET(dirty_background_bytes, MiB + 1), SET(dirty_limit_bytes, MiB) }, FAILS(EINVAL) },
		{ { SET(dirty_background_bytes, MiB) }, FAILS(EINVAL) }, /* default limit: 20 % of 4 MiB */
		{ { SET(dirty_background_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(dirty_background_bytes, MiB), SET(dirty_limit_bytes, MiB) }, GIVES(0) },
		/* writeback_threads: at most 64. */
		{ { SET(writeback_threads, 65) }, FAILS(EINVAL) },
		{ { SET(writeback_threads, UINT_MAX) }, FAILS(EINVAL) },
		{ { SET(writeback_threads, 64) }, GIVES(0) },
		/* queue_depth: at most 4096. */
		{ { SET(queue_depth, 4097) }, FAILS(EINVAL) },
		{ { SET(queue_depth, UINT_MAX) }, FAILS(EINVAL) },
		{ { SET(queue_depth, 4096) }, GIVES(0) },
		/* max_io_bytes: a multiple of 4 KiB from 4 KiB to 64 MiB. */
		{ { SET(max_io_bytes, 2048) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 4097) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 64 * MiB + 4096) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 64 * MiB) }, GIVES(0) },
		/* flags: only PC_CFG_*. */
		{ { SET(flags, 0x100) }, FAILS(EINVAL) },
		{ { SET(flags, 0x6f | PC_CFG_EAGER_MEMORY) }, GIVES(0) },
		{ { SET(flags, 0x7f) }, GIVES(0) },
		/* ... no thread and a thread that faults in all of it: */
		{ { SET(flags, PC_CFG_LAZY_MEMORY | PC_CFG_EAGER_MEMORY) }, FAILS(EINVAL) },
		/* max_closed_files: at most 1048576. */
		{ { SET(max_closed_files, (1u << 20) + 1) }, FAILS(EINVAL) },
		{ { SET(max_closed_files, 1u << 20) }, GIVES(0) },
		/* edge_budget_bytes: at most memory_limit / 2 (of 4 MiB here). */
		{ { SET(edge_budget_bytes, (2u << 20) + 1) }, FAILS(EINVAL) },
		{ { SET(edge_budget_bytes, 2u << 20) }, GIVES(0) },
		{ { SET(edge_budget_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(flags, 0x80000000u) }, FAILS(EINVAL) },
		{ { SET(flags, UINT_MAX) }, FAILS(EINVAL) },
		/* Fields with no error: limited (documented) or any value. */
		{ { SET(readahead_max_bytes, SIZE_MAX) }, GIVES(0) },
		{ { SET(uncached_kick_bytes, SIZE_MAX) }, GIVES(0) },
		{ { SET(dirty_expire_ms, UINT_MAX) }, GIVES(0) },
		{ { SET(edge_expire_ms, UINT_MAX) }, GIVES(0) },
	};
	unsigned failed = 0;
	for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct config_row *r = &rows[i];
		row_timer_start();
		errno = 0;
		long long got = run_config_row(r);
		int got_err = errno;
		row_timer_stop();
		bool ok = outcome_ok(got, got_err, r->ret, r->err);
		if (!ok) {
			char what[256];
			int n = snprintf(what, sizeof(what), "pc_cache_new(");
			for (unsigned k = 0; k < 2 && r->set[k].field; k++)
				n += snprintf(what + n, sizeof(what) - (size_t)n, "%s%s = %llu", k ? ", " : "",
					      r->set[k].field, (unsigned long long)r->set[k].value);
			snprintf(what + n, sizeof(what) - (size_t)n, ")");
			report_row("config_rows", i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
	}
	/* NULL: the defaults. */
	errno = 0;
	struct pc_cache *d = pc_cache_new(NULL);
	CHECK(d != NULL);
	if (d)
		CHECK(pc_cache_destroy(d) == 0);
	printf("config_rows: %zu rows, %u failed\n", sizeof(rows) / sizeof(rows[0]), failed);
	return failed;
}

/* --------------------------------------------------------------- main */

/* No failed call changed the file: its bytes through the cache and, after
 * fsync, on the device are the ones written at the start. */
static void check_file_unchanged(void)
{
	CHECK(pc_size(fx.h[H_RW]) == FILE_SIZE);
	memset(fx.buf, 0, sizeof(fx.buf));
	CHECK(pc_pread(fx.h[H_RO], fx.buf, FILE_SIZE, 0, 0) == FILE_SIZE);
	CHECK(memcmp(fx.buf, fx.content, FILE_SIZE) == 0);
	CHECK(pc_fsync(fx.h[H_RW]) == 0);
	CHECK(tu_verify_disk(fx.file, fx.content, FILE_SIZE));
}

int main(void)
{
	watchdog_install();
	fixture_setup();
	check_max_bytes_is_the_kernels();
	open_paths_setup();

	unsigned failed = run_handle_rows();
	failed += run_open_rows();
	failed += run_config_rows();

	check_file_unchanged();
	open_paths_teardown();
	CHECK(pc_close(fx.h[H_RW]) == 0);
	CHECK(pc_close(fx.h[H_RO]) == 0);
	CHECK(pc_close(fx.h[H_WO]) == 0);
	CHECK(pc_cache_destroy(fx.c) == 0);
	test_rmdir(fx.dir);
	if (failed)
		fprintf(stderr, "%u rows failed\n", failed);
	return test_done();
}
