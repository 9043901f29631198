/*
 * harness.c - the main of every test program: runs the named cases that
 * TEST_CASE registered (harness.h), one by one, and says how each went.
 *
 *	test_x              every case, in the file's order
 *	test_x CASE...      those cases (an unknown name is an error: exit 2)
 *	test_x --list       the cases' names, one a line
 *
 * Exit status: 0 all passed, 1 a check failed, 77 every case run skipped
 * (CTest's SKIP_RETURN_CODE), 2 bad arguments.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

unsigned tu_passed, tu_failed;

/* Per-case bound: well inside CTest's TIMEOUT, so a hang names its case. */
#define CASE_WATCHDOG_S 600
#define MAX_CASES 256

struct test_case {
	const char *name;
	tu_case_fn fn;
	int line;
};

static struct test_case cases[MAX_CASES];
static unsigned nr_cases;
static void (*fixture_setup)(void);
static void (*fixture_teardown)(void);
static const char *running = "(none)";
static jmp_buf skip_jump;
static bool in_case;           /* skip_jump is set: a case runs */
static const char *skip_reason;
static bool skip_unsupported;  /* the kernel or file system lacks what it needs */
static pid_t harness_pid;      /* the process that runs the cases */

void tu_case_add(const char *name, tu_case_fn fn, int line)
{
	if (nr_cases == MAX_CASES) {
		fprintf(stderr, "harness: more than %d cases in one program\n", MAX_CASES);
		abort();
	}
	cases[nr_cases++] = (struct test_case){ name, fn, line };
}

void tu_fixture_add(void (*setup)(void), void (*teardown)(void))
{
	fixture_setup = setup;
	fixture_teardown = teardown;
}

const char *tu_case_name(void)
{
	return running;
}

/*
 * Under CI (the variable set) nothing may skip: the machine CI runs on
 * has root, loop devices and /dev/fuse, and a skip there hides a test.
 * What the kernel or file system says it lacks (io_uring, 512-byte direct
 * I/O) is the exception: TEST_SKIP_UNSUPPORTED stays a skip.  Outside a
 * case (a fixture, another thread) there is nothing to skip to: the
 * program ends, 77 or, under CI, 1.
 */
static _Noreturn void skip(const char *why, bool unsupported)
{
	const char *ci = getenv("CI");
	bool fail = ci && *ci && !unsupported;
	if (fail)
		fprintf(stderr, "%s: would be skipped (%s), but CI is set: a failure\n", running, why);
	if (!in_case || getpid() != harness_pid) {
		printf("[ SKIP ] %s: %s (outside a case: the program ends)\n", running, why);
		fflush(NULL);
		_exit(fail ? 1 : 77);
	}
	if (fail)
		tu_failed++;
	skip_reason = why;
	skip_unsupported = unsupported;
	longjmp(skip_jump, 1);
}

_Noreturn void tu_case_skip(const char *why)
{
	skip(why, false);
}

_Noreturn void tu_case_skip_unsupported(const char *why)
{
	skip(why, true);
}

static int by_line(const void *a, const void *b)
{
	return ((const struct test_case *)a)->line - ((const struct test_case *)b)->line;
}

static const struct test_case *find_case(const char *name)
{
	for (unsigned i = 0; i < nr_cases; i++)
		if (strcmp(cases[i].name, name) == 0)
			return &cases[i];
	return NULL;
}

static void watchdog_fired(int sig)
{
	(void)sig;
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%s: HANG (watchdog, %d s)\n", running, CASE_WATCHDOG_S);
	ssize_t r = write(2, msg, (size_t)n);
	(void)r;
	_exit(3);
}

/*
 * A child that a case forked must leave by exit or _exit inside the case.
 * One that returned from the case function would run the next cases and
 * the teardown (removing the parent's scratch directory) with checks the
 * parent never sees: it ends here, failed, and says so.
 */
static void leave_if_child(const struct test_case *tc)
{
	if (getpid() == harness_pid)
		return;
	fprintf(stderr, "%s: a forked child returned from the case: it must exit inside it\n", tc->name);
	fflush(NULL);
	_exit(1);
}

enum outcome { CASE_PASSED, CASE_FAILED, CASE_SKIPPED };

static enum outcome run_case(const struct test_case *tc)
{
	unsigned passed = tu_passed, failed = tu_failed;
	running = tc->name;
	printf("[ RUN  ] %s\n", tc->name);
	signal(SIGALRM, watchdog_fired);
	alarm(CASE_WATCHDOG_S);
	if (setjmp(skip_jump) == 0) {
		in_case = true;
		tc->fn();
		in_case = false;
		leave_if_child(tc);
	} else {
		in_case = false;
		alarm(0);
		if (tu_failed != failed) {
			printf("[ FAIL ] %s: %u checks failed, then skipped: %s\n", tc->name, tu_failed - failed,
			       skip_reason);
			return CASE_FAILED;
		}
		printf("[ SKIP ] %s: %s%s\n", tc->name, skip_reason,
		       skip_unsupported ? " (not supported here)" : "");
		return CASE_SKIPPED;
	}
	alarm(0);
	if (tu_failed != failed) {
		printf("[ FAIL ] %s: %u checks failed\n", tc->name, tu_failed - failed);
		return CASE_FAILED;
	}
	if (tu_passed == passed) {
		tu_failed++;
		printf("[ FAIL ] %s: ran no check\n", tc->name);
		return CASE_FAILED;
	}
	printf("[   OK ] %s (%u checks)\n", tc->name, tu_passed - passed);
	return CASE_PASSED;
}

int main(int argc, char **argv)
{
	harness_pid = getpid();
	setvbuf(stdout, NULL, _IOLBF, 0);
	qsort(cases, nr_cases, sizeof(cases[0]), by_line);
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (unsigned i = 0; i < nr_cases; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	const struct test_case *chosen[MAX_CASES];
	unsigned n = 0;
	for (int i = 1; i < argc; i++) {
		const struct test_case *tc = find_case(argv[i]);
		if (!tc || n == MAX_CASES) {
			fprintf(stderr, "%s: no case named \"%s\" (--list names them)\n", argv[0], argv[i]);
			return 2;
		}
		chosen[n++] = tc;
	}
	if (argc == 1)
		for (unsigned i = 0; i < nr_cases; i++)
			chosen[n++] = &cases[i];
	running = "(setup)";
	if (fixture_setup)
		fixture_setup();
	unsigned skipped = 0, failed = 0;
	for (unsigned i = 0; i < n; i++) {
		enum outcome o = run_case(chosen[i]);
		skipped += o == CASE_SKIPPED;
		failed += o == CASE_FAILED;
	}
	running = "(teardown)";
	if (fixture_teardown)
		fixture_teardown();
	printf("%u cases: %u passed, %u failed, %u skipped; %u checks passed, %u failed\n", n, n - failed - skipped,
	       failed, skipped, tu_passed, tu_failed);
	if (tu_failed)
		return 1;
	return n > 0 && skipped == n ? 77 : 0;
}
