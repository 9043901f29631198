/*
 * test_span_misuse.c - what the zero-copy span calls refuse
 * (include/pagecache.h, "Zero-copy access"): every bad argument and misuse
 * pc_read_begin / pc_read_end and pc_write_begin / pc_write_end catch
 * (EBADF, EINVAL, EFBIG, EAGAIN, ending twice ...), and EPERM in a child
 * of fork(), where ending the parent's spans touches nothing.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <limits.h>

/* tu_fork() wants the exit guard in place before the first cache. */
static const char *dir;

static void span_misuse_setup(void)
{
	tu_exit_guard();
	dir = test_dir("span_misuse");
}

static void span_misuse_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(span_misuse_setup, span_misuse_teardown)

#include "span_util.h"

/* Handles, arguments, ending and flags: each misuse fails with its errno
 * and leaves nothing to end. */
TEST_CASE(bad_calls_fail_with_errno)
{
	struct env e;
	env_open(&e, "errors", 4096, 64 * KiB, 4 * MiB, 0);
	put(&e, 0, 10000, 1);
	struct pc_span s;

	/* Handles. */
	errno = 0;
	CHECK(pc_read_begin(NULL, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(NULL, 0, 10, 0, &s) == -1 && errno == EBADF);
	struct pc_file *ro = pc_open(e.c, e.path, O_RDONLY, 0);
	struct pc_file *wo = pc_open(e.c, e.path, O_WRONLY, 0);
	struct pc_file *dio = pc_open(e.c, e.path, O_RDWR | O_DIRECT, 0);
	REQUIRE(ro && wo && dio);
	CHECK(pc_write_begin(ro, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(ro, 0, 0, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(wo, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(wo, 0, 0, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_read_begin(ro, 0, 10, 0, &s) == 10);
	pc_read_end(&s);
	CHECK(pc_write_begin(wo, 0, 10, 0, &s) == 10);
	CHECK(pc_write_end(&s, 0) == 0);
	/* O_DIRECT handle and PC_DIRECT: a pointer into the cache is not direct I/O. */
	CHECK(pc_read_begin(dio, 0, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(dio, 0, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 10, PC_DIRECT, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, PC_DIRECT, &s) == -1 && errno == EINVAL);
	CHECK(pc_close(dio) == 0);
	CHECK(pc_close(wo) == 0);
	CHECK(pc_close(ro) == 0);
	/* A closed handle (in the quarantine). */
	CHECK(pc_read_begin(ro, 0, 10, 0, &s) == -1 && errno == EBADF);
	CHECK(pc_write_begin(wo, 0, 10, 0, &s) == -1 && errno == EBADF);

	/* Arguments. */
	CHECK(pc_read_begin(e.h, 0, 10, 0, NULL) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, 0, NULL) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, -1, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, -1, 10, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 10, 0x100, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, 10, 0x100, &s) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, (size_t)SSIZE_MAX + 1, 0, &s) == -1 && errno == EINVAL);
	CHECK(pc_write_begin(e.h, 0, (size_t)SSIZE_MAX + 1, 0, &s) == -1 && errno == EINVAL);
	/* A failed begin leaves nothing to end: both end calls say so. */
	CHECK(s.data == NULL && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_write_end(&s, 0) == -1 && errno == EINVAL);
	/* EFBIG at the largest size; a span reaching past it is cut there. */
	off_t max = (off_t)e.m->max_bytes;
	CHECK(pc_write_begin(e.h, max, 1, 0, &s) == -1 && errno == EFBIG);
	CHECK(pc_write_begin(e.h, max + 12345, 1, 0, &s) == -1 && errno == EFBIG);
	CHECK(pc_write_begin(e.h, max - 10, 100, 0, &s) == 10);
	CHECK(pc_write_end(&s, 0) == 0);
	CHECK(pc_size(e.h) == 10000);
	/* len 0, and reads at or past the end: empty spans, ended for free. */
	CHECK(pc_write_begin(e.h, max, 0, 0, &s) == 0 && s.len == 0);
	CHECK(pc_write_end(&s, 1) == -1 && errno == EINVAL);
	CHECK(pc_write_end(&s, 0) == 0);
	CHECK(pc_read_begin(e.h, 5, 0, 0, &s) == 0 && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, 10000, 10, 0, &s) == 0 && s.len == 0);
	pc_read_end(&s);
	CHECK(pc_read_begin(e.h, INT64_MAX, 10, 0, &s) == 0);
	pc_read_end(&s);

	/* Ending: NULL, the wrong kind, twice, too much. */
	pc_read_end(NULL);
	CHECK(pc_write_end(NULL, 0) == -1 && errno == EINVAL);
	CHECK(pc_read_begin(e.h, 0, 100, 0, &s) == 100);
	CHECK(pc_write_end(&s, 0) == -1 && errno == EINVAL); /* a read span: still open */
	CHECK(s.len == 100 && s.data);
	pc_read_end(&s);
	pc_read_end(&s); /* twice: nothing */
	CHECK(s.data == NULL && s.len == 0);
	/* Every flag but PC_DIRECT is taken. */
	CHECK(pc_read_begin(e.h, 0, 100, PC_NOWAIT | PC_DONTCACHE | PC_DSYNC, &s) == 100);
	pc_read_end(&s);
	CHECK(pc_write_begin(e.h, 100, 50, 0, &s) == 50);
	memset(s.data, 'x', 50);
	CHECK(pc_write_end(&s, 51) == -1 && errno == EINVAL); /* still open */
	CHECK(pc_write_end(&s, 50) == 0);
	CHECK(pc_write_end(&s, 50) == -1 && errno == EINVAL); /* twice */
	pc_read_end(&s);
	uint8_t x[50];
	memset(x, 'x', 50);
	CHECK(reads_as(&e, 100, 50, x));

	/* PC_NOWAIT: not cached. */
	drop(&e);
	CHECK(pc_read_begin(e.h, 4096, 10, PC_NOWAIT, &s) == -1 && errno == EAGAIN);
	pc_read_end(&s);
	env_close(&e);
}

/* In a child of fork(): every begin is EPERM, ending the parent's spans
 * touches nothing (pc_write_end says EPERM). */
TEST_CASE(child_of_fork_gets_eperm)
{
	struct env e;
	env_open(&e, "fork", 4096, 64 * KiB, 4 * MiB, 0);
	put(&e, 0, 8192, 2);
	struct pc_span rs, ws;
	REQUIRE(pc_read_begin(e.h, 0, 4096, 0, &rs) == 4096);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_span s, wcopy;
		int bad = 0;
		bad += !(pc_read_begin(e.h, 0, 10, 0, &s) == -1 && errno == EPERM);
		bad += !(pc_write_begin(e.h, 0, 10, 0, &s) == -1 && errno == EPERM);
		pc_read_end(&rs);
		bad += !(rs.data == NULL);
		/* A write span the parent would hold: as a copy made here. */
		memset(&wcopy, 0, sizeof(wcopy));
		wcopy.priv.state = SPAN_WRITE;
		wcopy.priv.cache = e.c;
		wcopy.priv.len = 10;
		bad += !(pc_write_end(&wcopy, 10) == -1 && errno == EPERM);
		_exit(bad);
	}
	CHECK(tu_wait_child(pid, 65) == 0);
	/* The parent's span is untouched. */
	CHECK(tu_is_pattern(rs.data, 4096, 2, 0));
	pc_read_end(&rs);
	REQUIRE(pc_write_begin(e.h, 0, 10, 0, &ws) == 10);
	CHECK(pc_write_end(&ws, 0) == 0);
	env_close(&e);
}

