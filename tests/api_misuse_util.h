/*
 * api_misuse_util.h - what the test_api_misuse_* programs share: tables of
 * rows, each one public call with its arguments and the return and errno
 * that include/pagecache.h documents for it (errno checked exactly, and
 * not on success), a watchdog around each row's call, and the fixture of
 * the programs that call through handles: a file of known bytes open in a
 * small cache read-write, read-only, write-only and closed again.
 *
 * The fixture's teardown checks that no call of the rows changed the file
 * (its bytes through the cache and, after fsync, on the device), so a case
 * run alone is checked for that too.
 */
#ifndef PC_API_MISUSE_UTIL_H
#define PC_API_MISUSE_UTIL_H

#include "testutil.h"

#include "api/internal.h"

#include <signal.h>
#include <sys/syscall.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* Not a multiple of a block: EOF falls inside one. */
#define FILE_SIZE 8292

/* ------------------------------------------------------------- caches */

/* The small cache every row's call runs in (and pc_cache_new's rows
 * change one or two of its fields). */
static inline struct pc_config small_config(void)
{
	struct pc_config cfg = tu_config(4 * MiB);
	cfg.max_folio_size = 64 * KiB;
	cfg.flags = PC_CFG_LAZY_MEMORY;
	return cfg;
}

static inline struct pc_cache *small_cache(void)
{
	struct pc_config cfg = small_config();
	return tu_cache_new(&cfg);
}

/* ------------------------------------------------------------ fixture */

/* The handles a row can name. */
enum handle_kind { H_RW, H_RO, H_WO, H_CLOSED, H_NULL };

static struct {
	char dir[4096];
	char file[4200];
	struct pc_cache *c;
	struct pc_file *h[H_NULL + 1]; /* h[H_NULL] stays NULL */
	int64_t max_bytes;             /* the file system's largest file */
	uint8_t content[FILE_SIZE];    /* what the file holds */
	uint8_t buf[FILE_SIZE];        /* where reads go */
} fx;

static inline void misuse_fixture_setup(void)
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

/* No failed call changed the file: its bytes through the cache and, after
 * fsync, on the device are the ones written at the start.  Then the
 * handles and the cache go. */
static inline void misuse_fixture_teardown(void)
{
	CHECK(pc_size(fx.h[H_RW]) == FILE_SIZE);
	memset(fx.buf, 0, sizeof(fx.buf));
	CHECK(pc_pread(fx.h[H_RO], fx.buf, FILE_SIZE, 0, 0) == FILE_SIZE);
	CHECK(memcmp(fx.buf, fx.content, FILE_SIZE) == 0);
	CHECK(pc_fsync(fx.h[H_RW]) == 0);
	CHECK(tu_verify_disk(fx.file, fx.content, FILE_SIZE));
	CHECK(pc_close(fx.h[H_RW]) == 0);
	CHECK(pc_close(fx.h[H_RO]) == 0);
	CHECK(pc_close(fx.h[H_WO]) == 0);
	CHECK(pc_cache_destroy(fx.c) == 0);
	test_rmdir(fx.dir);
}

/* ----------------------------------------------------------- watchdog */

/*
 * SIGALRM without SA_RESTART interrupts a blocking open(2) (of a FIFO), so
 * a row that would hang fails with EINTR and the next row runs; if the row
 * is still running at the second alarm, the program fails there.  The
 * signal may land on one of the cache's threads: it is passed on to the
 * thread running the rows.  The harness sets its own SIGALRM handler
 * before each case, so each case installs this one (rows_watchdog).
 */
#define ROW_TIMEOUT_S 10
static volatile sig_atomic_t row_alarms;
static pid_t rows_tid;

static void row_alarm(int sig)
{
	if (syscall(SYS_gettid) != rows_tid) {
		syscall(SYS_tgkill, getpid(), rows_tid, sig);
		return;
	}
	if (++row_alarms >= 2) {
		static const char msg[] = "a call of the rows hung; failing\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(1);
	}
	alarm(ROW_TIMEOUT_S);
}

static inline void rows_watchdog(void)
{
	rows_tid = (pid_t)syscall(SYS_gettid);
	struct sigaction sa = { .sa_handler = row_alarm };
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0);
}

/* Around each row's call. */
static inline void row_timer_start(void)
{
	row_alarms = 0;
	alarm(ROW_TIMEOUT_S);
}

static inline void row_timer_stop(void)
{
	alarm(0);
}

/* --------------------------------------------------- expected results */

/* A row's expectation: ret, and errno when ret is -1. */
#define FAILS(e) .ret = -1, .err = (e), .err_name = #e
#define GIVES(r) .ret = (r), .err = 0, .err_name = NULL

/* Counted as a CHECK, without CHECK's own line: the row prints its own. */
static inline bool outcome_ok(long long got, int got_err, long long ret, int err)
{
	bool ok = got == ret && (ret != -1 || got_err == err);
	if (ok)
		tu_passed++;
	else
		tu_failed++;
	return ok;
}

/* The failure line of row i of the running case's table. */
static inline void report_row(unsigned i, const char *call, long long got, int got_err, long long ret,
			      const char *err_name)
{
	if (ret == -1)
		fprintf(stderr, "FAIL %s[%u] %s: got %lld errno %d (%s), expected -1 %s\n", tu_case_name(), i, call,
			got, got_err, strerror(got_err), err_name);
	else
		fprintf(stderr, "FAIL %s[%u] %s: got %lld errno %d (%s), expected %lld\n", tu_case_name(), i, call,
			got, got_err, strerror(got_err), ret);
}

#define ROWS(a) (a), sizeof(a) / sizeof((a)[0])

#endif
