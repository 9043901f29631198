/*
 * test_checks.c - the invariant checks of src/lib/check.h trip when an
 * invariant is broken, stay quiet when it holds, and are left out of
 * Release.
 *
 * Each case runs in a child of its own with its own cache, its stderr in a
 * file: a check that trips aborts the child, and the parent reads what it
 * said.  In a checking build (PC_CHECKS: Debug, sanitizers, fuzz) every
 * broken case (named "..._trips") must end in SIGABRT with the message
 * named; in a build without checks the same broken calls must run through
 * (none of them deadlocks a lone thread), which shows the checks cost
 * Release nothing.  The fixture says "checks on in this build" or "checks
 * off in this build": CMake's pass expression for every checks.* test of
 * a checking build wants "on" (CMakeLists.txt).
 */
#include "testutil.h"

#include "api/internal.h"
#include "lib/check.h"
#include "rw/write.h"

static const char *dir;

/* The children come from tu_fork_alone, which wants tu_exit_guard called
 * first (testutil.h).  The line printed is what CMake's pass expression
 * looks for. */
static void checks_setup(void)
{
	tu_exit_guard();
	dir = test_dir("checks");
	printf("checks %s in this build\n", PC_CHECKS ? "on" : "off");
}

static void checks_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(checks_setup, checks_teardown)

struct env {
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m;
};

static struct env env_open(void)
{
	struct env e;
	char path[4200];

	test_path(path, sizeof(path), dir, "f");
	e.c = tu_cache_of(64ull << 20);
	e.h = pc_open(e.c, path, O_RDWR | O_CREAT, 0644);
	REQUIRE(e.h);
	e.m = e.h->m;
	char buf[8192];
	memset(buf, 'a', sizeof(buf));
	REQUIRE(pc_pwrite(e.h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	return e;
}

static void env_close(struct env *e)
{
	REQUIRE(pc_close(e->h) == 0);
	REQUIRE(pc_cache_destroy(e->c) == 0);
}

/* ------------------------------------------------- what the children do */

/* tree_lock before inval_lock: the documented order the other way round. */
static void broken_order_tree_then_inval(struct env *e)
{
	tree_lock_shared(e->m);
	inval_lock_shared(e->m);
	inval_unlock(e->m);
	tree_unlock(e->m);
}

/* A leaf lock (the LRU's) held while taking a file's tree_lock. */
static void broken_order_leaf_then_tree(struct env *e)
{
	cache_lock(e->c, &e->c->lru_lock, LOCK_LEAF);
	tree_lock_shared(e->m);
	tree_unlock(e->m);
	cache_unlock(e->c, &e->c->lru_lock);
}

/* Waiting for write-back (a folio flag) while holding tree_lock. */
static void wait_under_tree_lock(struct env *e)
{
	struct pc_folio *f = mapping_lookup(e->m, 0);
	REQUIRE(f);
	tree_lock_shared(e->m);
	folio_wait_clear(f, PF_WRITEBACK); /* not under write-back: returns at once */
	tree_unlock(e->m);
	reclaim_release_folio(e->c, f);
}

/* write_zeroes without inval_lock, which its callers must hold. */
static void missing_inval_lock(struct env *e)
{
	REQUIRE(write_zeroes(e->m, 100, 10) == 0);
}

/* Removing a folio from the index without its lock. */
static void missing_folio_lock(struct env *e)
{
	struct pc_folio *f = mapping_lookup(e->m, 0);
	REQUIRE(f);
	/* Clean first, so that only the lock is missing (fsync: no dirty
	 * data, nothing under write-back). */
	REQUIRE(pc_fsync(e->h) == 0);
	mapping_remove_folio(e->m, f);
	reclaim_release_folio(e->c, f);
}

/* Giving back a lock this thread never took. */
static void unlock_not_held(struct env *e)
{
	inval_unlock(e->m);
}

/* Only its record: what a build without checks can run of the above. */
static void note_give_not_held(struct env *e)
{
	lock_note_give(&e->m->inval_lock);
}

/* PC_ASSERT of something false. */
static void assert_false(struct env *e)
{
	PC_ASSERT(e->m == NULL);
}

/* The documented order, every level in turn, and the "caller holds" calls
 * with their locks: nothing trips. */
static void right_order(struct env *e)
{
	files_lock(e->c);
	files_unlock(e->c);
	inval_lock_excl(e->m);
	REQUIRE(write_zeroes(e->m, 100, 10) == 0);
	struct pc_folio *f = mapping_lookup(e->m, 0);
	REQUIRE(f);
	folio_lock(f);
	assert_folio_locked(f);
	tree_lock_shared(e->m);
	cache_lock(e->c, &e->c->lru_lock, LOCK_LEAF);
	cache_lock(e->c, &e->c->arena_lock, LOCK_LEAF); /* leaves nest among themselves */
	cache_unlock(e->c, &e->c->arena_lock);
	cache_unlock(e->c, &e->c->lru_lock);
	tree_unlock(e->m);
	folio_unlock(f);
	reclaim_release_folio(e->c, f);
	inval_unlock(e->m);
}

/* A write span holds its file's inval_lock across the caller's other
 * calls: a write to another file meanwhile takes that file's inval_lock,
 * of the same level, which the header allows.  The span's lock is the
 * span's, not a lock the thread's later calls nest in. */
static void span_across_other_write(struct env *e)
{
	char other[4200];
	test_path(other, sizeof(other), dir, "g");
	struct pc_file *g = pc_open(e->c, other, O_RDWR | O_CREAT, 0644);
	REQUIRE(g);
	struct pc_span s;
	REQUIRE(pc_write_begin(e->h, 0, 10, 0, &s) == 10);
	memset(s.data, 'b', 10);
	REQUIRE(pc_pwrite(g, "xyz", 3, 0, 0) == 3);
	REQUIRE(pc_write_end(&s, 10) == 0);
	char b[10];
	REQUIRE(pc_pread(e->h, b, 10, 0, 0) == 10 && b[0] == 'b' && b[9] == 'b');
	REQUIRE(pc_close(g) == 0);
	unlink(other);
}

/* PC_WARN_ONCE says so once, and returns its condition every time. */
static void warn_once(struct env *e)
{
	(void)e;
	int trues = 0;
	for (int i = 0; i < 3; i++)
		trues += PC_WARN_ONCE(i >= 0, "warned at round %d", i);
	REQUIRE(trues == 3);
	REQUIRE(!PC_WARN_ONCE(false, "never"));
}

/* ------------------------------------------------------------ the runner */

static char *slurp(const char *path)
{
	static char buf[65536];
	FILE *fp = fopen(path, "re");
	REQUIRE(fp);
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = 0;
	fclose(fp);
	return buf;
}

/* Run `run` in a child with stderr in a file, on a cache and file of its
 * own; returns its status (tu_wait_child) and leaves what it said in
 * *said.  The child never returns. */
static int run_in_child(void (*run)(struct env *e), char **said)
{
	char errpath[4200];
	test_path(errpath, sizeof(errpath), dir, "stderr");
	pid_t pid = tu_fork_alone(60);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(100);
		struct env e = env_open();
		run(&e);
		env_close(&e);
		exit(0);
	}
	int st = tu_wait_child(pid, 90);
	*said = slurp(errpath);
	unlink(errpath);
	return st;
}

/* A checking build must abort in `run` saying `says` (NULL: the calls are
 * right, and nothing trips); a build without checks must run through. */
static void check_trips(void (*run)(struct env *e), const char *says)
{
	unsigned failed = tu_failed;
	char *said;
	int st = run_in_child(run, &said);
	if (PC_CHECKS && says) {
		/* 128 + SIGABRT, with the message. */
		CHECK(st == 128 + SIGABRT);
		CHECK(strstr(said, says) != NULL);
	} else {
		CHECK(st == 0);
		CHECK(strstr(said, "check failed") == NULL);
	}
	if (tu_failed != failed)
		fprintf(stderr, "%s (checks %s): status %d, said:\n%s\n", tu_case_name(), PC_CHECKS ? "on" : "off", st,
			said);
}

/* ------------------------------------------------------------ the cases */

TEST_CASE(tree_lock_then_inval_lock_trips)
{
	check_trips(broken_order_tree_then_inval, "takes: inval_lock while holding tree_lock");
}

TEST_CASE(leaf_lock_then_tree_lock_trips)
{
	check_trips(broken_order_leaf_then_tree, "takes: tree_lock while holding leaf lock");
}

TEST_CASE(wait_under_tree_lock_trips)
{
	check_trips(wait_under_tree_lock, "waits: tree_lock while holding tree_lock");
}

TEST_CASE(missing_inval_lock_trips)
{
	check_trips(missing_inval_lock, "lock_held(&(m)->inval_lock)");
}

TEST_CASE(missing_folio_lock_trips)
{
	check_trips(missing_folio_lock, "folio_test((f), PF_LOCKED)");
}

/* Without checks, unlocking a lock not held is undefined: there the case
 * gives back only the record of the lock (what inval_unlock does first,
 * and all a checking build gets to), which must be nothing at all. */
TEST_CASE(unlock_not_held_trips)
{
	check_trips(PC_CHECKS ? unlock_not_held : note_give_not_held, "releases a lock this thread does not hold");
}

TEST_CASE(assert_false_trips)
{
	check_trips(assert_false, "check failed at");
}

TEST_CASE(documented_lock_order_is_quiet)
{
	check_trips(right_order, NULL);
}

TEST_CASE(write_span_across_other_files_write_is_quiet)
{
	check_trips(span_across_other_write, NULL);
}

/* PC_WARN_ONCE: a checking build says so once; none says it otherwise. */
TEST_CASE(warn_once_says_so_once)
{
	char *said;
	CHECK(run_in_child(warn_once, &said) == 0);
	const char *first = strstr(said, "warned at round");
	if (PC_CHECKS) {
		CHECK(first && strstr(first, "warned at round 0"));
		CHECK(first && !strstr(first + 1, "warned at round"));
	} else {
		CHECK(first == NULL);
	}
	CHECK(strstr(said, "never") == NULL);
}
