/*
 * test_api_misuse_open.c - pc_open with every kind of bad argument returns
 * NULL with the errno include/pagecache.h documents, never crashes, never
 * hangs and creates nothing.
 *
 * Each case is a table of rows (api_misuse_util.h), each one pc_open call
 * and its expected errno: NULL cache or path, unknown flags, O_ACCMODE,
 * O_RDONLY|O_TRUNC, missing paths, O_EXCL on existing paths, directories,
 * a FIFO, /dev/null, a socket, a /proc file (no O_DIRECT), names too long,
 * a path through a file, a symlink loop, permission denied (as root: run
 * with the DAC-override capabilities dropped from the calling thread), the
 * file open in another cache (EBUSY); and the flags that are allowed.  A
 * handle that opens is closed at once.  No failed pc_open may create a
 * file, and after the cases the fixture's file must hold what it held
 * before (O_TRUNC rows that fail truncate nothing).  A watchdog fails a
 * row that hangs (opening a FIFO blocks in open(2)).
 */
#define _GNU_SOURCE
#include "api_misuse_util.h"

#include <limits.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/un.h>

/* --------------------------------------------------- what rows open */

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

static struct pc_cache *row_cache(enum cache_kind k)
{
	return k == C_FX ? fx.c : k == C_OTHER ? op.other : NULL;
}

/* 0 and the handle closed again, or -1. */
static long long run_open_row(const struct open_row *r)
{
	const char *path = r->p == P_NULL ? NULL : op.path[r->p];
	struct pc_file *h = pc_open(row_cache(r->c), path, r->flags, 0644);
	if (!h)
		return -1;
	int e = errno;
	CHECK(pc_close(h) == 0);
	errno = e;
	return 0;
}

static void open_fixture_setup(void)
{
	misuse_fixture_setup();
	open_paths_setup();
}

static void open_fixture_teardown(void)
{
	open_paths_teardown();
	misuse_fixture_teardown();
}

TEST_FIXTURE(open_fixture_setup, open_fixture_teardown)

/* Each row's call, its outcome counted as one check; rows that cannot run
 * here are said so (and the case skipped if none could). */
static void run_open_rows(const struct open_row *rows, size_t n)
{
	rows_watchdog();
	unsigned failed = 0, ran = 0;
	static char skipped[256];
	skipped[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct open_row *r = &rows[i];
		char what[512];
		snprintf(what, sizeof(what), "pc_open(%s, %s, %s)%s", cache_names[r->c], path_names[r->p],
			 r->flags_name, r->unprivileged ? " without DAC override" : "");
		if (op.skip[r->p]) {
			printf("skip %s[%u] %s: %s\n", tu_case_name(), i, what, op.skip[r->p]);
			snprintf(skipped, sizeof(skipped), "%s", op.skip[r->p]);
			continue;
		}
		if (r->unprivileged && !drop_dac_caps()) {
			snprintf(skipped, sizeof(skipped), "running as root and cannot drop CAP_DAC_OVERRIDE (%s)",
				 strerror(errno));
			printf("skip %s[%u] %s: %s\n", tu_case_name(), i, what, skipped);
			continue;
		}
		ran++;
		row_timer_start();
		errno = 0;
		long long got = run_open_row(r);
		int got_err = errno;
		row_timer_stop();
		if (r->unprivileged)
			restore_caps();
		bool ok = outcome_ok(got, got_err, r->ret, r->err);
		if (!ok) {
			report_row(i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
		/* A failed pc_open creates nothing (removed, so later rows still
		 * find the path missing). */
		if (r->p == P_MISSING && unlink(op.path[P_MISSING]) == 0) {
			fprintf(stderr, "FAIL %s[%u] %s created %s\n", tu_case_name(), i, what, op.path[P_MISSING]);
			tu_failed++;
			failed += ok;
		}
	}
	printf("%s: %zu rows, %u failed, %zu skipped\n", tu_case_name(), n, failed, n - ran);
	if (!ran && skipped[0])
		TEST_SKIP(skipped);
}

/* ------------------------------------------------------------ the cases */

/* pc_open with no cache or no path: EINVAL. */
TEST_CASE(open_null_cache_or_path_einval)
{
	const struct open_row rows[] = {
		{ C_NULL, P_FILE, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_NULL, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_NULL, P_NULL, FL(O_RDWR | O_CREAT), FAILS(EINVAL) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open with access mode 3, flags it does not support (O_APPEND,
 * O_NONBLOCK, O_PATH, O_DIRECTORY, O_NOFOLLOW, O_TMPFILE, O_ASYNC,
 * O_NOCTTY, unknown bits) or O_TRUNC without write access: EINVAL, and no
 * file created. */
TEST_CASE(open_unsupported_flags_einval)
{
	const struct open_row rows[] = {
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
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of an empty path, a missing file or directory, a dangling
 * symlink: ENOENT. */
TEST_CASE(open_missing_path_enoent)
{
	const struct open_row rows[] = {
		{ C_FX, P_EMPTY, FL(O_RDONLY), FAILS(ENOENT) },
		{ C_FX, P_EMPTY, FL(O_RDWR | O_CREAT), FAILS(ENOENT) },
		{ C_FX, P_MISSING, FL(O_RDONLY), FAILS(ENOENT) },
		{ C_FX, P_MISSING, FL(O_RDWR), FAILS(ENOENT) },
		{ C_FX, P_MISSING_DIR, FL(O_RDWR | O_CREAT), FAILS(ENOENT) },
		{ C_FX, P_DANGLING, FL(O_RDONLY), FAILS(ENOENT) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open with O_CREAT | O_EXCL of anything that exists, a dangling
 * symlink too: EEXIST. */
TEST_CASE(open_excl_on_existing_path_eexist)
{
	const struct open_row rows[] = {
		{ C_FX, P_FILE, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_DIR, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_FIFO, FL(O_WRONLY | O_CREAT | O_EXCL), FAILS(EEXIST) },
		{ C_FX, P_DANGLING, FL(O_RDWR | O_CREAT | O_EXCL), FAILS(EEXIST) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of a directory, or a symlink to one, in any mode: EISDIR. */
TEST_CASE(open_directory_eisdir)
{
	const struct open_row rows[] = {
		{ C_FX, P_DIR, FL(O_RDONLY), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_WRONLY), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_RDWR), FAILS(EISDIR) },
		{ C_FX, P_DIR, FL(O_RDONLY | O_CREAT), FAILS(EISDIR) },
		{ C_FX, P_DIR_LINK, FL(O_RDONLY), FAILS(EISDIR) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of a FIFO (without blocking in open(2)), a character device, a
 * socket, or a regular file on a file system without O_DIRECT (/proc):
 * EINVAL. */
TEST_CASE(open_not_regular_or_no_direct_einval)
{
	const struct open_row rows[] = {
		{ C_FX, P_FIFO, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_WRONLY), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_FIFO, FL(O_RDWR | O_CREAT), FAILS(EINVAL) },
		{ C_FX, P_DEVNULL, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_DEVNULL, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_SOCKET, FL(O_RDONLY), FAILS(EINVAL) },
		{ C_FX, P_SOCKET, FL(O_RDWR), FAILS(EINVAL) },
		{ C_FX, P_PROC, FL(O_RDONLY), FAILS(EINVAL) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of a path of PATH_MAX or more, or with a component over
 * NAME_MAX: ENAMETOOLONG; through a regular file: ENOTDIR; a symlink
 * loop: ELOOP. */
TEST_CASE(open_unresolvable_name_fails)
{
	const struct open_row rows[] = {
		{ C_FX, P_TOO_LONG, FL(O_RDONLY), FAILS(ENAMETOOLONG) },
		{ C_FX, P_TOO_LONG, FL(O_RDWR | O_CREAT), FAILS(ENAMETOOLONG) },
		{ C_FX, P_NAME_TOO_LONG, FL(O_RDWR | O_CREAT), FAILS(ENAMETOOLONG) },
		{ C_FX, P_THROUGH_FILE, FL(O_RDONLY), FAILS(ENOTDIR) },
		{ C_FX, P_THROUGH_FILE, FL(O_RDWR | O_CREAT), FAILS(ENOTDIR) },
		{ C_FX, P_LOOP, FL(O_RDONLY), FAILS(ELOOP) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of a file of mode 0, through a directory of mode 0, or creating
 * in a directory of mode 0555: EACCES (as root, with the DAC-override
 * capabilities dropped). */
TEST_CASE(open_without_permission_eacces)
{
	const struct open_row rows[] = {
		{ C_FX, P_NOPERM, FL(O_RDONLY), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_NOPERM, FL(O_RDWR), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_NOSEARCH, FL(O_RDONLY), .unprivileged = true, FAILS(EACCES) },
		{ C_FX, P_RODIR_NEW, FL(O_RDWR | O_CREAT), .unprivileged = true, FAILS(EACCES) },
	};
	run_open_rows(ROWS(rows));
}

/* pc_open of a file open (read-write) in another cache of this process:
 * EBUSY, for reading too: two caches must not share a file. */
TEST_CASE(open_file_open_in_other_cache_ebusy)
{
	const struct open_row rows[] = {
		{ C_OTHER, P_FILE, FL(O_RDWR), FAILS(EBUSY) },
		{ C_OTHER, P_FILE, FL(O_RDONLY), FAILS(EBUSY) },
	};
	run_open_rows(ROWS(rows));
}

/* What is allowed: O_CREAT on an existing file, O_DSYNC, O_DIRECT,
 * O_CLOEXEC, O_NOATIME, O_SYNC, O_CREAT | O_EXCL of a new file. */
TEST_CASE(open_supported_flags_open)
{
	const struct open_row rows[] = {
		{ C_FX, P_FILE, FL(O_RDONLY), OPENS },
		{ C_FX, P_FILE, FL(O_RDONLY | O_CREAT), OPENS },
		{ C_FX, P_FILE, FL(O_RDWR | O_DSYNC | O_DIRECT | O_CLOEXEC | O_NOATIME), OPENS },
		{ C_FX, P_FILE, FL(O_WRONLY | O_SYNC), OPENS },
		{ C_FX, P_NEW, FL(O_RDWR | O_CREAT | O_EXCL), OPENS },
	};
	run_open_rows(ROWS(rows));
}

