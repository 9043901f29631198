/*
 * test_checks.c - the invariant checks of src/lib/check.h trip when an
 * invariant is broken, stay quiet when it holds, and are left out of
 * Release.
 *
 * Each case runs in a child of its own with its own cache, its stderr in a
 * file: a check that trips aborts the child, and the parent reads what it
 * said.  In a checking build (PC_CHECKS: Debug, sanitizers, fuzz) every
 * broken case must end in SIGABRT with the message named; in a build
 * without checks the same broken calls must run through (none of them
 * deadlocks a lone thread), which shows the checks cost Release nothing.
 */
#include "testutil.h"

#include "api/internal.h"
#include "lib/check.h"
#include "rw/write.h"

static const char *dir;

struct env {
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m;
};

static struct env env_open(void)
{
	struct pc_config cfg = { .memory_limit = 64ull << 20 };
	struct env e;
	char path[4200];

	test_path(path, sizeof(path), dir, "f");
	e.c = pc_cache_new(&cfg);
	REQUIRE(e.c);
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

/* ------------------------------------------------------------ the cases */

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
	leaf_lock(&e->c->lru_lock);
	tree_lock_shared(e->m);
	tree_unlock(e->m);
	leaf_unlock(&e->c->lru_lock);
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

/* PC_ASSERT of something false. */
static void assert_false(struct env *e)
{
	PC_ASSERT(e->m == NULL);
}

/* The documented order, every level in turn, and the "caller holds" calls
 * with their locks: nothing trips. */
static void right_order(struct env *e)
{
	files_lock(&e->c->files_lock);
	files_unlock(&e->c->files_lock);
	inval_lock_excl(e->m);
	REQUIRE(write_zeroes(e->m, 100, 10) == 0);
	struct pc_folio *f = mapping_lookup(e->m, 0);
	REQUIRE(f);
	folio_lock(f);
	assert_folio_locked(f);
	tree_lock_shared(e->m);
	leaf_lock(&e->c->lru_lock);
	leaf_lock(&e->c->arena_lock); /* leaves nest among themselves */
	leaf_unlock(&e->c->arena_lock);
	leaf_unlock(&e->c->lru_lock);
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

struct tcase {
	const char *name;
	void (*run)(struct env *e);
	const char *says; /* what a checking build prints before it aborts; NULL: runs through */
	bool undefined_unchecked; /* without checks the calls are undefined: not run there */
};

static const struct tcase cases[] = {
	{ "broken order: tree then inval", broken_order_tree_then_inval,
	  "takes: inval_lock while holding tree_lock", false },
	{ "broken order: leaf then tree", broken_order_leaf_then_tree, "takes: tree_lock while holding leaf lock", false },
	{ "wait under tree_lock", wait_under_tree_lock, "waits: tree_lock while holding tree_lock", false },
	{ "missing inval_lock", missing_inval_lock, "lock_held(&(m)->inval_lock)", false },
	{ "missing folio lock", missing_folio_lock, "folio_test((f), PF_LOCKED)", false },
	{ "unlock not held", unlock_not_held, "releases a lock this thread does not hold", true },
	{ "PC_ASSERT(false)", assert_false, "check failed at", false },
	{ "right order", right_order, NULL, false },
	{ "span across another file's write", span_across_other_write, NULL, false },
};

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

/* Run one case in a child with stderr in a file; returns its status
 * (tu_wait_child) and leaves what it said in *said. */
static int run_case(const struct tcase *t, char **said)
{
	char errpath[4200];
	test_path(errpath, sizeof(errpath), dir, "stderr");
	pid_t pid = tu_fork_alone(60);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(100);
		struct env e = env_open();
		t->run(&e);
		env_close(&e);
		exit(0);
	}
	int st = tu_wait_child(pid, 90);
	*said = slurp(errpath);
	unlink(errpath);
	return st;
}

static void check_case(const struct tcase *t)
{
	unsigned failed = tu_failed;
	char *said;
	int st = run_case(t, &said);
	bool trips = PC_CHECKS && t->says;
	if (trips) {
		/* 128 + SIGABRT, with the message. */
		CHECK(st == 128 + SIGABRT);
		CHECK(strstr(said, t->says) != NULL);
	} else {
		CHECK(st == 0);
		CHECK(strstr(said, "check failed") == NULL);
	}
	if (tu_failed != failed)
		fprintf(stderr, "case \"%s\" (checks %s): status %d, said:\n%s\n", t->name, PC_CHECKS ? "on" : "off", st,
			said);
}

static void check_warn_once(void)
{
	struct tcase t = { "PC_WARN_ONCE", warn_once, NULL, false };
	char *said;
	CHECK(run_case(&t, &said) == 0);
	const char *first = strstr(said, "warned at round");
	if (PC_CHECKS) {
		CHECK(first && strstr(first, "warned at round 0"));
		CHECK(first && !strstr(first + 1, "warned at round"));
	} else {
		CHECK(first == NULL);
	}
	CHECK(strstr(said, "never") == NULL);
}

int main(void)
{
	tu_exit_guard();
	dir = test_dir("test_checks");
	printf("checks %s in this build\n", PC_CHECKS ? "on" : "off");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned failed = tu_failed;
		if (!PC_CHECKS && cases[i].undefined_unchecked) {
			printf("%-32s skipped: undefined without checks\n", cases[i].name);
			continue;
		}
		check_case(&cases[i]);
		printf("%-32s %s\n", cases[i].name, tu_failed == failed ? "ok" : "FAILED");
	}
	check_warn_once();
	char path[4200];
	test_path(path, sizeof(path), dir, "f");
	unlink(path);
	rmdir(dir);
	return test_done();
}
