/*
 * harness.h - named test cases (harness.c has the main).
 *
 * A test file holds cases, each named by the behaviour it checks:
 *
 *	TEST_CASE(edge_kept_until_completed)
 *	{
 *		...
 *		CHECK(got == want);
 *	}
 *
 * CMake registers every case as a CTest of its own, "<file>.<case>" (the
 * file's name without "test_"), so
 * `ctest -R '^uncached_edges\.edge_kept_until_completed$'` runs one.
 * The program takes case names as arguments (none: every case, in the
 * file's order) and `--list` prints them.  Each case runs in order in
 * one process with a watchdog; one that runs no CHECK fails: a case that
 * cannot fail checks nothing.
 *
 * CHECK() records a failure with its place and goes on; REQUIRE() ends
 * the program (the case fails).  TEST_SKIP("why") leaves the case as
 * skipped (exit status 77 when every case run was skipped), or failed
 * when the environment has CI set: CI's machine can run everything.
 * TEST_SKIP_UNSUPPORTED("why") is for what the kernel or file system says
 * it lacks (io_uring, 512-byte direct I/O): a skip under CI too.  A skip
 * outside a case (in a fixture) ends the program with 77 (1 under CI).
 * A child forked by a case must exit inside it: one that returns from
 * the case ends there, failed.
 * TEST_FIXTURE(setup, teardown) runs setup before the first case and
 * teardown after the last (a scratch directory, a loop device).
 */
#ifndef PC_HARNESS_H
#define PC_HARNESS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern unsigned tu_passed, tu_failed;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (cond) {                                                           \
			tu_passed++;                                                  \
		} else {                                                              \
			tu_failed++;                                                  \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d %s, if a call failed)\n", \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
		}                                                                     \
	} while (0)

/* Fatal: the test cannot go on. */
#define REQUIRE(cond)                                                                 \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s (errno %d %s)\n", \
				__FILE__, __LINE__, #cond, errno, strerror(errno));   \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

typedef void (*tu_case_fn)(void);

void tu_case_add(const char *name, tu_case_fn fn, int line);
void tu_fixture_add(void (*setup)(void), void (*teardown)(void));
/* The case now running (its name), for messages and watchdogs. */
const char *tu_case_name(void);
/* Leave the running case as skipped; does not return. */
_Noreturn void tu_case_skip(const char *why);
/* The same for what the kernel or file system lacks: a skip under CI too. */
_Noreturn void tu_case_skip_unsupported(const char *why);

/* Registration runs before main (a constructor), in any order: the
 * harness orders the cases by their line in the file. */
#define TEST_CASE(name)                                                          \
	static void tc_##name(void);                                             \
	__attribute__((constructor)) static void tc_add_##name(void)             \
	{                                                                        \
		tu_case_add(#name, tc_##name, __LINE__);                         \
	}                                                                        \
	static void tc_##name(void)

#define TEST_FIXTURE(setup, teardown)                                             \
	__attribute__((constructor)) static void tu_fixture_here(void)           \
	{                                                                        \
		tu_fixture_add(setup, teardown);                                 \
	}

#define TEST_SKIP(why) tu_case_skip(why)
#define TEST_SKIP_UNSUPPORTED(why) tu_case_skip_unsupported(why)

#endif
