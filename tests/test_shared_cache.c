/*
 * test_shared_cache.c - shared caches (pc_config.shared_name) through the
 * public API, across processes: names, the object's mode and owner, the
 * creator's settings, another user, many processes on one file (opens,
 * writes seen, fsync, truncate), other caches kept out (EBUSY), what a
 * leaving process and the last one write back, and fork.
 *
 * Each case names its caches "pctest-<pid>-<tag>" and removes what is
 * left of their shared memory objects at its start and end, passed or
 * failed.  The processes of a case are children ("kids") that the parent
 * forks while it has no thread (tu_fork_alone: a kid starts a cache, and
 * with it threads, of its own) and drives step by step over pipes: the
 * parent says "go", the kid does its next step and says "done".  Nothing
 * waits on time.  A kid's failed check ends it with a message (status 2);
 * the parent then sees the kid's pipe close, kills the others and fails
 * the case.  Kids leave by _exit.  They meet in a MAP_SHARED area the
 * parent maps before it forks (struct area), which also holds what a file
 * must read as (the model).
 *
 * The shared memory object of cache NAME is "/pagecache-<NAME>"
 * (/dev/shm/pagecache-<NAME>): one namespace for every user, so that
 * another user's cache of a name is EACCES.  (docs/shared.md, 2.1, still
 * says "/pagecache-<euid>-<NAME>".)
 */
#include "testutil.h"

#include <grp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define KID_WATCHDOG_S 60u
#define KID_WAIT_S (KID_WATCHDOG_S + 5)
#define MAX_KIDS 6
#define NOBODY 65534
#define IMG_MAX (1 * MiB)

static const char *dir;

static void shared_setup(void)
{
	tu_exit_guard();
	/* A write to the pipe of a kid that died is EPIPE, not the end. */
	signal(SIGPIPE, SIG_IGN);
	dir = test_dir("shared_cache");
}

static void shared_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(shared_setup, shared_teardown)

/* ------------------------------------------------ names and objects */

/* The case's cache names (set before any fork: the kids inherit them). */
static char name1[256], name2[256];

/* The case's names "pctest-<pid>-<tag>" and "pctest-<pid>-<tag>-2", and
 * whatever an earlier run left of them gone. */
static void names_begin(const char *tag)
{
	snprintf(name1, sizeof(name1), "pctest-%d-%s", (int)getpid(), tag);
	snprintf(name2, sizeof(name2), "pctest-%d-%s-2", (int)getpid(), tag);
	tu_shm_unlink(name1);
	tu_shm_unlink(name2);
}

static void names_end(void)
{
	tu_shm_unlink(name1);
	tu_shm_unlink(name2);
}

/* The stat of cache `name`'s object, /dev/shm/pagecache-<name>, into *st
 * (may be NULL): false when there is none. */
static bool object_find(const char *name, struct stat *st)
{
	char path[600];
	struct stat s;
	snprintf(path, sizeof(path), "/dev/shm/pagecache-%s", name);
	if (stat(path, &s) != 0)
		return false;
	if (st)
		*st = s;
	return true;
}

/* ------------------------------------------------ the meeting area */

struct area {
	int result[8];     /* a kid's errno or outcome, for the parent */
	uint64_t val[8];   /* values passed on */
	char text[512];    /* a path or a name passed on */
	uint64_t size;     /* the model file's size */
	uint8_t img[IMG_MAX]; /* the model file's bytes (0 past size) */
};

static struct area *area;

static void area_new(void)
{
	area = mmap(NULL, sizeof(*area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(area != MAP_FAILED);
}

static void area_free(void)
{
	munmap(area, sizeof(*area));
	area = NULL;
}

/* The model: pattern `seed` written at [off, off + len). */
static void model_write(uint64_t off, size_t len, uint64_t seed)
{
	REQUIRE(off + len <= IMG_MAX);
	tu_fill_pattern(area->img + off, len, seed, off);
	if (off + len > area->size)
		area->size = off + len;
}

/* The model truncated (or extended with zeros) to size. */
static void model_truncate(uint64_t size)
{
	REQUIRE(size <= IMG_MAX);
	if (size < area->size)
		memset(area->img + size, 0, area->size - size);
	area->size = size;
}

/* ------------------------------------------------ kids */

struct kid {
	pid_t pid;
	int go;   /* the parent's end: "go" */
	int done; /* the parent's end: "done" */
};

static struct kid kids[MAX_KIDS];
static unsigned nkids;
static int kid_go_fd = -1, kid_done_fd = -1; /* a kid's own ends */
static unsigned kid_index;

/* In a kid: a check that failed ends it with a message naming it. */
#define KCHECK(cond)                                                                          \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "kid %u (pid %d): %s:%d: %s (errno %d %s)\n", kid_index, \
				(int)getpid(), __FILE__, __LINE__, #cond, errno, strerror(errno)); \
			_exit(2);                                                             \
		}                                                                             \
	} while (0)

/* In a kid: wait for the parent's "go" (its end closed: leave). */
static void kid_wait(void)
{
	char c;
	ssize_t r;
	do
		r = read(kid_go_fd, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(3);
}

/* In a kid: the step is done. */
static void kid_ack(void)
{
	char c = 1;
	if (write(kid_done_fd, &c, 1) != 1)
		_exit(3);
}

/* In a kid: the last step is done; leave. */
static _Noreturn void kid_end(void)
{
	kid_ack();
	_exit(0);
}

/* Kill and reap every kid, remove the case's objects, and end the case
 * failed: a kid ended before a step was done. */
static _Noreturn void kids_abort(unsigned k)
{
	fprintf(stderr, "kid %u ended before it finished its step (its message, if any, is above)\n", k);
	for (unsigned i = 0; i < nkids; i++) {
		kill(kids[i].pid, SIGKILL);
		int st = tu_wait_child(kids[i].pid, KID_WAIT_S);
		fprintf(stderr, "kid %u: exit status %d\n", i, st);
	}
	names_end();
	REQUIRE(!"a kid failed");
	abort();
}

/*
 * Fork kid number nkids, which runs fn(its number) and must leave by
 * _exit (kid_end).  The parent has no thread now (tu_fork_alone), so
 * that the kid may start a cache of its own under any sanitizer.
 */
static unsigned kid_start(void (*fn)(unsigned))
{
	REQUIRE(nkids < MAX_KIDS);
	int to_kid[2], from_kid[2];
	REQUIRE(pipe2(to_kid, O_CLOEXEC) == 0 && pipe2(from_kid, O_CLOEXEC) == 0);
	pid_t pid = tu_fork_alone(KID_WATCHDOG_S);
	if (pid == 0) {
		for (unsigned i = 0; i < nkids; i++) {
			close(kids[i].go);
			close(kids[i].done);
		}
		close(to_kid[1]);
		close(from_kid[0]);
		kid_go_fd = to_kid[0];
		kid_done_fd = from_kid[1];
		kid_index = nkids;
		nkids = 0;
		fn(kid_index);
		fprintf(stderr, "kid %u returned: it must leave by kid_end\n", kid_index);
		_exit(4);
	}
	close(to_kid[0]);
	close(from_kid[1]);
	kids[nkids] = (struct kid){ pid, to_kid[1], from_kid[0] };
	return nkids++;
}

/* Let kid k start its next step. */
static void go(unsigned k)
{
	char c = 1;
	if (write(kids[k].go, &c, 1) != 1)
		kids_abort(k);
}

/* Wait until kid k has done its step. */
static void done(unsigned k)
{
	char c;
	ssize_t r;
	do
		r = read(kids[k].done, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		kids_abort(k);
}

/* One step of kid k, waited for. */
static void step(unsigned k)
{
	go(k);
	done(k);
}

/* Every kid has left: each must have exited 0. */
static void kids_reap(void)
{
	for (unsigned i = 0; i < nkids; i++) {
		int st = tu_wait_child(kids[i].pid, KID_WAIT_S);
		if (st != 0)
			fprintf(stderr, "kid %u: exit status %d\n", i, st);
		CHECK(st == 0);
		close(kids[i].go);
		close(kids[i].done);
	}
	nkids = 0;
}

/* ------------------------------------------------ caches and files */

/* The creators' settings: 16 MiB, and dirty data that the flusher leaves
 * alone for 10 minutes (below the background limit), so that what is
 * written back is written back by the call under test. */
static struct pc_config creator_config(const char *name)
{
	struct pc_config cfg = tu_config(16 * MiB);
	cfg.dirty_expire_ms = 600000;
	cfg.shared_name = name;
	return cfg;
}

/* In a kid: create the cache of `name` (creator_config). */
static struct pc_cache *kid_create(const char *name)
{
	struct pc_config cfg = creator_config(name);
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	KCHECK(c);
	return c;
}

/* In a kid: attach to the cache of `name`, every setting left at its
 * default. */
static struct pc_cache *kid_attach(const char *name)
{
	struct pc_config cfg = tu_config(0);
	cfg.shared_name = name;
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	KCHECK(c);
	return c;
}

/* The path of file `file` in the scratch directory (a static buffer per
 * slot: slot 0 or 1). */
static const char *fpath(const char *file, int slot)
{
	static char path[2][4200];
	test_path(path[slot], sizeof(path[slot]), dir, file);
	return path[slot];
}

/* In a kid: open the file or fail. */
static struct pc_file *kid_open(struct pc_cache *c, const char *path, int flags)
{
	errno = 0;
	struct pc_file *f = pc_open(c, path, flags, 0644);
	KCHECK(f);
	return f;
}

/* In a kid: write pattern `seed` at [off, off + len) with flags, and into
 * the model. */
static void kid_write(struct pc_file *f, uint64_t off, size_t len, uint64_t seed, int flags)
{
	uint8_t *buf = malloc(len);
	KCHECK(buf);
	tu_fill_pattern(buf, len, seed, off);
	KCHECK(pc_pwrite(f, buf, len, (off_t)off, flags) == (ssize_t)len);
	free(buf);
	model_write(off, len, seed);
}

/* In a kid: the file reads as the model over [off, off + len), with
 * flags, and its size is the model's. */
static void kid_check_read(struct pc_file *f, uint64_t off, size_t len, int flags)
{
	KCHECK(pc_size(f) == (off_t)area->size);
	uint8_t *buf = malloc(len + 1);
	KCHECK(buf);
	uint64_t want = off >= area->size ? 0 : tu_min_u64(len, area->size - off);
	ssize_t n = pc_pread(f, buf, len, (off_t)off, flags);
	if (n != (ssize_t)want)
		fprintf(stderr, "kid %u: pc_pread(%zu at %llu, flags %d) = %zd, want %llu\n", kid_index, len,
			(unsigned long long)off, flags, n, (unsigned long long)want);
	KCHECK(n == (ssize_t)want);
	for (uint64_t i = 0; i < want; i++)
		if (buf[i] != area->img[off + i]) {
			fprintf(stderr, "kid %u: byte %llu is 0x%02x, want 0x%02x (flags %d)\n", kid_index,
				(unsigned long long)(off + i), buf[i], area->img[off + i], flags);
			KCHECK(!"a read differs from what was written");
		}
	free(buf);
}

/* The backing file, read with plain pread(2) (not through pagecache),
 * holds exactly want[0, size), its size included. */
static bool backing_equals(const char *path, const uint8_t *want, uint64_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return false;
	}
	struct stat st;
	bool ok = fstat(fd, &st) == 0;
	if (ok && (uint64_t)st.st_size != size) {
		fprintf(stderr, "%s: size %lld, want %llu\n", path, (long long)st.st_size, (unsigned long long)size);
		ok = false;
	}
	uint8_t *buf = malloc(size + 1);
	REQUIRE(buf);
	uint64_t got = 0;
	while (ok && got < size) {
		ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
		if (r <= 0) {
			fprintf(stderr, "%s: pread at %llu: %zd\n", path, (unsigned long long)got, r);
			ok = false;
			break;
		}
		got += (uint64_t)r;
	}
	for (uint64_t i = 0; ok && i < size; i++)
		if (buf[i] != want[i]) {
			fprintf(stderr, "%s: byte %llu is 0x%02x, want 0x%02x\n", path, (unsigned long long)i, buf[i],
				want[i]);
			ok = false;
		}
	free(buf);
	close(fd);
	return ok;
}

/* The model's file on the device, exactly. */
static bool backing_is_model(const char *path)
{
	return backing_equals(path, area->img, area->size);
}

/* A fresh empty file (plain open): the parent makes files before the
 * kids open them. */
static void make_empty(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	REQUIRE(fd >= 0);
	close(fd);
}

/* ------------------------------------------------ names */

static void kid_200_byte_name(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_config got;
	KCHECK(pc_cache_config(c, &got) == 0);
	KCHECK(got.shared_name && strlen(got.shared_name) == 200 && strcmp(got.shared_name, name1) == 0);
	struct pc_file *f = kid_open(c, fpath("name200", 0), O_RDWR);
	if (k == 0)
		kid_write(f, 5, 3000, 200, 0);
	else
		kid_check_read(f, 0, 8192, 0);
	kid_ack();
	kid_wait();
	KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* "", "a/b", ".", ".." and a 201-byte name are EINVAL (and make no
 * object); a 200-byte name makes a cache that a second process attaches
 * to and shares a file in. */
TEST_CASE(bad_names_einval_200_bytes_work)
{
	names_begin("names");
	char long_name[202];
	int n = snprintf(long_name, sizeof(long_name), "pctest-%d-", (int)getpid());
	memset(long_name + n, 'n', 201 - (size_t)n);
	long_name[201] = '\0';
	const char *bad[] = { "", "a/b", ".", "..", long_name };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pc_config cfg = creator_config(bad[i]);
		errno = 0;
		struct pc_cache *c = pc_cache_new(&cfg);
		if (c || errno != EINVAL)
			fprintf(stderr, "name \"%.20s%s\" (%zu bytes): %s\n", bad[i], strlen(bad[i]) > 20 ? "..." : "",
				strlen(bad[i]), c ? "a cache" : strerror(errno));
		CHECK(c == NULL && errno == EINVAL);
		if (c)
			pc_cache_destroy(c);
	}
	CHECK(!object_find(long_name, NULL));
	tu_shm_unlink(long_name);

	/* 200 bytes: name1 itself, built to that length. */
	n = snprintf(name1, sizeof(name1), "pctest-%d-", (int)getpid());
	memset(name1 + n, 'n', 200 - (size_t)n);
	name1[200] = '\0';
	tu_shm_unlink(name1);
	make_empty(fpath("name200", 0));
	area_new();
	kid_start(kid_200_byte_name);
	kid_start(kid_200_byte_name);
	step(0);
	CHECK(object_find(name1, NULL));
	step(1);
	step(1);
	step(0);
	kids_reap();
	CHECK(backing_is_model(fpath("name200", 0)));
	area_free();
	names_end();
}

/* ------------------------------------------------ the object */

static void kid_create_then_leave(unsigned k)
{
	(void)k;
	kid_wait();
	umask(0); /* 0600 is the cache's doing, not the umask's */
	struct pc_cache *c = kid_create(name1);
	struct pc_config got;
	KCHECK(pc_cache_config(c, &got) == 0);
	KCHECK(got.memory_limit == 16 * MiB);
	KCHECK(got.shared_name && strcmp(got.shared_name, name1) == 0);
	kid_ack();
	kid_wait();
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* The cache's shared memory object, /dev/shm/pagecache-<NAME>, is the
 * creating user's, mode 0600 (under umask 0), and goes with the last
 * process. */
TEST_CASE(object_is_the_creators_mode_0600)
{
	names_begin("object");
	kid_start(kid_create_then_leave);
	step(0);
	struct stat st;
	bool found = object_find(name1, &st);
	if (!found)
		fprintf(stderr, "no /dev/shm/pagecache-%s\n", name1);
	CHECK(found);
	if (found) {
		CHECK(S_ISREG(st.st_mode));
		CHECK((st.st_mode & 07777) == 0600);
		CHECK(st.st_uid == geteuid());
	}
	step(0);
	kids_reap();
	CHECK(!object_find(name1, NULL));
	names_end();
}

/* ------------------------------------------------ the creator's settings */

static void kid_creator_64m(unsigned k)
{
	(void)k;
	kid_wait();
	struct pc_config cfg = tu_config(64 * MiB);
	cfg.shared_name = name1;
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	KCHECK(c);
	struct pc_config got;
	KCHECK(pc_cache_config(c, &got) == 0);
	KCHECK(got.memory_limit == 64 * MiB);
	area->val[0] = got.memory_limit;
	area->val[1] = got.max_folio_size;
	area->val[2] = got.dirty_limit_bytes;
	area->val[3] = got.dirty_background_bytes;
	area->val[4] = got.edge_budget_bytes;
	kid_ack();
	kid_wait();
	/* The attachers changed nothing. */
	KCHECK(pc_cache_config(c, &got) == 0);
	KCHECK(got.memory_limit == 64 * MiB && got.max_folio_size == area->val[1]);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* An attacher's config reports the creator's settings and the name. */
static void check_attached_config(struct pc_cache *c)
{
	struct pc_config got;
	KCHECK(pc_cache_config(c, &got) == 0);
	KCHECK(got.memory_limit == area->val[0]);
	KCHECK(got.max_folio_size == area->val[1]);
	KCHECK(got.dirty_limit_bytes == area->val[2]);
	KCHECK(got.dirty_background_bytes == area->val[3]);
	KCHECK(got.edge_budget_bytes == area->val[4]);
	KCHECK(got.shared_name && strcmp(got.shared_name, name1) == 0);
}

static void kid_attacher_settings(unsigned k)
{
	(void)k;
	kid_wait();
	/* Explicit settings other than the creator's (and other than the
	 * defaults): EINVAL. */
	struct pc_config cfg = tu_config(32 * MiB);
	cfg.shared_name = name1;
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	KCHECK(c == NULL && errno == EINVAL);
	cfg = tu_config(0);
	cfg.shared_name = name1;
	cfg.max_folio_size = 64 * KiB;
	errno = 0;
	c = pc_cache_new(&cfg);
	KCHECK(c == NULL && errno == EINVAL);
	cfg = tu_config(0);
	cfg.shared_name = name1;
	cfg.dirty_limit_bytes = 2 * MiB;
	errno = 0;
	c = pc_cache_new(&cfg);
	KCHECK(c == NULL && errno == EINVAL);
	/* pc_config_init's defaults: attached, with the creator's settings. */
	cfg = tu_config(0);
	cfg.shared_name = name1;
	errno = 0;
	c = pc_cache_new(&cfg);
	KCHECK(c);
	check_attached_config(c);
	KCHECK(pc_cache_destroy(c) == 0);
	/* The creator's own values, set explicitly: attached too. */
	cfg = tu_config(64 * MiB);
	cfg.shared_name = name1;
	cfg.max_folio_size = (size_t)area->val[1];
	errno = 0;
	c = pc_cache_new(&cfg);
	KCHECK(c);
	check_attached_config(c);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* The creator's settings rule: an attacher that sets other values gets
 * EINVAL; one that leaves the defaults, or sets the same values, attaches
 * and pc_cache_config reports the creator's settings and the name. */
TEST_CASE(attacher_other_settings_einval_defaults_attach)
{
	names_begin("settings");
	area_new();
	kid_start(kid_creator_64m);
	kid_start(kid_attacher_settings);
	step(0);
	step(1);
	step(0);
	kids_reap();
	CHECK(!object_find(name1, NULL));
	area_free();
	names_end();
}

/* ------------------------------------------------ another user */

static void kid_nobody(unsigned k)
{
	(void)k;
	kid_wait();
	KCHECK(setgroups(0, NULL) == 0);
	KCHECK(setresgid(NOBODY, NOBODY, NOBODY) == 0);
	KCHECK(setresuid(NOBODY, NOBODY, NOBODY) == 0);
	/* Root's cache of name1: this user must not get it. */
	struct pc_config cfg = tu_config(0);
	cfg.shared_name = name1;
	errno = 0;
	struct pc_cache *c = pc_cache_new(&cfg);
	area->result[0] = c ? 0 : errno;
	if (c)
		pc_cache_destroy(c);
	kid_ack();
	/* Make the object that root's cache of name2 would use, as this
	 * user, before root does. */
	kid_wait();
	int fd = shm_open(area->text, O_RDWR | O_CREAT | O_EXCL, 0600);
	KCHECK(fd >= 0);
	KCHECK(ftruncate(fd, 4 << 20) == 0);
	close(fd);
	kid_end();
}

/* A cache another user made is not this user's: user nobody asking for
 * the name of root's cache gets EACCES, and root's cache goes on; an
 * object of the name that nobody made first is refused to root with
 * EACCES, not taken over. */
TEST_CASE(other_user_gets_eacces)
{
	if (geteuid() != 0)
		TEST_SKIP("needs root, to run a process as user nobody (65534)");
	names_begin("user");
	area_new();
	make_empty(fpath("user", 0));
	kid_start(kid_nobody);
	struct pc_config cfg = creator_config(name1);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	struct pc_file *f = pc_open(c, fpath("user", 0), O_RDWR, 0);
	REQUIRE(f);
	CHECK(pc_pwrite(f, "root", 4, 0, 0) == 4);
	step(0);
	int e = area->result[0];
	if (e != EACCES)
		fprintf(stderr, "user nobody's pc_cache_new of root's cache: %s\n", e ? strerror(e) : "a cache");
	CHECK(e == EACCES);
	struct stat st;
	CHECK(object_find(name1, &st) && st.st_uid == 0 && (st.st_mode & 07777) == 0600);
	char b[8];
	CHECK(pc_pread(f, b, sizeof(b), 0, 0) == 4 && memcmp(b, "root", 4) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);

	/* nobody makes the object of root's name2 first. */
	snprintf(area->text, sizeof(area->text), "/pagecache-%s", name2);
	step(0);
	cfg.shared_name = name2;
	errno = 0;
	c = pc_cache_new(&cfg);
	CHECK(c == NULL && errno == EACCES);
	if (c)
		pc_cache_destroy(c);
	CHECK(object_find(name2, &st) && st.st_uid == NOBODY); /* refused, not taken over */
	kids_reap();
	area_free();
	names_end();
}

/* ------------------------------------------------ one file, many processes */

/* Kids 0 (the creator), 1 and 2 open file "many": 0 and 1 O_RDWR (1 with
 * a second handle O_RDONLY), 2 O_RDONLY; each then reads what the parent
 * put there. */
static void kid_open_many(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("many", 0), k == 2 ? O_RDONLY : O_RDWR);
	struct pc_file *g = k == 1 ? kid_open(c, fpath("many", 0), O_RDONLY) : NULL;
	kid_ack();
	kid_wait();
	kid_check_read(f, 0, (size_t)area->size + 100, 0);
	if (g)
		kid_check_read(g, 1000, 70000, PC_DIRECT);
	kid_ack();
	kid_wait();
	KCHECK(pc_close(f) == 0);
	if (g)
		KCHECK(pc_close(g) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* Processes of one cache open one file at once, read-write and read-only:
 * no EBUSY between them, and each reads the file. */
TEST_CASE(processes_open_one_file_at_once)
{
	names_begin("many");
	area_new();
	static uint8_t data[300 * 1024 + 7];
	tu_fill_pattern(data, sizeof(data), 11, 0);
	tu_write_file(fpath("many", 0), data, sizeof(data));
	memcpy(area->img, data, sizeof(data));
	area->size = sizeof(data);
	for (unsigned i = 0; i < 3; i++)
		kid_start(kid_open_many);
	step(0);
	go(1);
	go(2); /* 1 and 2 attach and open at once */
	done(1);
	done(2);
	for (unsigned i = 0; i < 3; i++)
		go(i);
	for (unsigned i = 0; i < 3; i++)
		done(i);
	step(1);
	step(2);
	step(0);
	kids_reap();
	CHECK(backing_is_model(fpath("many", 0)));
	area_free();
	names_end();
}

/* Kid 0 writes buffered, kid 1 reads it and writes with PC_DIRECT, kid 2
 * reads both (PC_DONTCACHE and cached) and writes with PC_DONTCACHE past
 * the end, kid 0 reads everything with PC_DIRECT and writes with
 * PC_DSYNC, kid 1 reads that.  Each reads only after the write it must
 * see returned (the parent orders the steps). */
static void kid_write_read(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("wr", 0), O_RDWR);
	kid_ack();
	kid_wait();
	switch (k) {
	case 0:
		kid_write(f, 4095, 200001, 21, 0);
		break;
	case 1:
		kid_check_read(f, 0, (size_t)area->size, 0);
		kid_write(f, 100000, 50000, 22, PC_DIRECT);
		break;
	case 2:
		kid_check_read(f, 0, (size_t)area->size, PC_DONTCACHE);
		kid_check_read(f, 90001, 70000, 0);
		kid_write(f, 300000, 7, 23, PC_DONTCACHE);
		break;
	}
	kid_ack();
	kid_wait();
	switch (k) {
	case 0:
		kid_check_read(f, 0, (size_t)area->size + 4096, PC_DIRECT);
		kid_check_read(f, 123, 200000, 0);
		kid_write(f, 4000, 100, 24, PC_DSYNC);
		break;
	case 1:
	case 2:
		kid_check_read(f, 0, (size_t)area->size, 0);
		kid_check_read(f, 3999, 102, PC_DIRECT);
		break;
	}
	kid_ack();
	kid_wait();
	KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* A write that returned in one process is what a read that starts after
 * it in another process gets, whatever the flags of either. */
TEST_CASE(write_returned_is_read_in_other_process)
{
	names_begin("wr");
	area_new();
	make_empty(fpath("wr", 0));
	for (unsigned i = 0; i < 3; i++)
		kid_start(kid_write_read);
	for (unsigned i = 0; i < 3; i++)
		step(i);
	step(0);
	step(1);
	step(2);
	step(0);
	step(1);
	step(2);
	for (unsigned i = 0; i < 3; i++)
		step(i);
	kids_reap();
	CHECK(backing_is_model(fpath("wr", 0)));
	area_free();
	names_end();
}

/* Kid 0 writes (buffered, left dirty); kid 1 fsyncs; the parent reads
 * the backing file; then again with kid 1's read-only handle. */
static void kid_fsync_other(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("fsync", 0), O_RDWR);
	struct pc_file *ro = k == 1 ? kid_open(c, fpath("fsync", 0), O_RDONLY) : NULL;
	kid_ack();
	struct pc_stats st;
	if (k == 0) {
		kid_wait();
		kid_write(f, 1000, 300 * 1024, 31, 0);
		pc_file_stats(f, &st);
		KCHECK(st.dirty_bytes > 0); /* dirty: else nothing is tested */
		kid_ack();
		kid_wait(); /* kid 1 synced: nothing of the file is dirty */
		pc_file_stats(f, &st);
		KCHECK(st.dirty_bytes == 0);
		kid_write(f, 500000, 12345, 32, 0);
		kid_write(f, 77, 10, 33, 0);
		kid_ack();
	} else {
		kid_wait();
		KCHECK(pc_fsync(f) == 0);
		kid_ack();
		kid_wait();
		KCHECK(pc_fsync(ro) == 0); /* any handle syncs */
		kid_ack();
	}
	kid_wait();
	KCHECK(pc_close(f) == 0);
	if (ro)
		KCHECK(pc_close(ro) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* pc_fsync in one process writes back the dirty data another process
 * wrote, while that one is still attached and never synced. */
TEST_CASE(fsync_writes_back_other_process_data)
{
	names_begin("fsync");
	area_new();
	make_empty(fpath("fsync", 0));
	kid_start(kid_fsync_other);
	kid_start(kid_fsync_other);
	step(0);
	step(1);
	step(0); /* writes */
	step(1); /* fsyncs */
	CHECK(backing_is_model(fpath("fsync", 0)));
	step(0); /* writes again */
	step(1); /* fsyncs through the O_RDONLY handle */
	CHECK(backing_is_model(fpath("fsync", 0)));
	step(0);
	step(1);
	kids_reap();
	CHECK(backing_is_model(fpath("fsync", 0)));
	area_free();
	names_end();
}

/* Kid 0 writes 256 KiB and truncates to 10000; kid 1, which had read it
 * all, sees the size and no byte past it, and extends to 200000; kid 0
 * reads zeros there. */
static void kid_truncate(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("trunc", 0), O_RDWR);
	uint8_t b[16];
	if (k == 0)
		kid_write(f, 0, 256 * 1024, 41, 0);
	kid_ack();
	if (k == 0) {
		kid_wait();
		KCHECK(pc_ftruncate(f, 10000) == 0);
		model_truncate(10000);
		kid_check_read(f, 0, 20000, 0);
		kid_ack();
		kid_wait();
		kid_check_read(f, 0, 200000, 0);      /* zeros in [10000, 200000) */
		kid_check_read(f, 9000, 2000, PC_DIRECT);
		kid_check_read(f, 150000, 60000, PC_DONTCACHE);
		kid_ack();
	} else {
		kid_wait();
		kid_check_read(f, 0, 256 * 1024, 0); /* all of it cached here */
		kid_ack();
		kid_wait();
		KCHECK(pc_size(f) == 10000);
		KCHECK(pc_pread(f, b, sizeof(b), 10000, 0) == 0);
		KCHECK(pc_pread(f, b, sizeof(b), 50000, 0) == 0);
		KCHECK(pc_pread(f, b, sizeof(b), 9990, 0) == 10);
		kid_check_read(f, 0, 256 * 1024, 0);
		KCHECK(pc_ftruncate(f, 200000) == 0);
		model_truncate(200000);
		kid_check_read(f, 0, 200000, 0);
		kid_ack();
	}
	kid_wait();
	KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* pc_ftruncate in one process: another sees the new size at once, reads
 * nothing past it, and zeros in the cut range after the file grows back. */
TEST_CASE(truncate_seen_by_other_process)
{
	names_begin("trunc");
	area_new();
	make_empty(fpath("trunc", 0));
	kid_start(kid_truncate);
	kid_start(kid_truncate);
	step(0); /* creates, writes */
	step(1); /* attaches */
	step(1); /* reads all */
	step(0); /* truncates to 10000 */
	step(1); /* sees it, extends to 200000 */
	step(0); /* reads zeros */
	step(0);
	step(1);
	kids_reap();
	CHECK(backing_is_model(fpath("trunc", 0)));
	area_free();
	names_end();
}

/* ------------------------------------------------ other caches: EBUSY */

/* Kids 0 (creator, O_RDWR) and 1 (O_RDONLY) of name1 hold file "busy";
 * kid 2 (a private cache) and kid 3 (the cache of name2) try it. */
static void kid_busy_holder(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("busy", 0), k == 0 ? O_RDWR : O_RDONLY);
	kid_check_read(f, 0, 8192, 0);
	kid_ack();
	if (k == 0) {
		kid_wait(); /* kid 0 lets go of its handle: kid 1 still holds it */
		KCHECK(pc_close(f) == 0);
		kid_ack();
	}
	kid_wait();
	if (k == 1)
		KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* Both opens of the file are EBUSY. */
static void kid_busy_refused(struct pc_cache *c)
{
	int modes[] = { O_RDWR, O_RDONLY };
	for (unsigned i = 0; i < 2; i++) {
		errno = 0;
		struct pc_file *f = pc_open(c, fpath("busy", 0), modes[i], 0);
		if (f)
			pc_close(f);
		KCHECK(f == NULL && errno == EBUSY);
	}
}

static void kid_busy_other(unsigned k)
{
	kid_wait();
	struct pc_cache *c;
	if (k == 2) {
		struct pc_config cfg = tu_config(8 * MiB);
		c = pc_cache_new(&cfg);
	} else {
		struct pc_config cfg = creator_config(name2);
		c = pc_cache_new(&cfg);
	}
	KCHECK(c);
	kid_busy_refused(c);
	kid_ack();
	kid_wait();
	kid_busy_refused(c);
	kid_ack();
	/* Once every process of name1 has left, the file is free. */
	kid_wait();
	struct pc_file *f = kid_open(c, fpath("busy", 0), O_RDWR);
	kid_check_read(f, 0, 8192, 0);
	KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* A private cache, and a shared cache of another name, get EBUSY for a
 * file that the shared cache holds open (read-write or read-only), also
 * when only a process that opened it read-only, and not first, holds it;
 * once every process of that cache has left, they may open it. */
TEST_CASE(private_or_other_shared_cache_ebusy)
{
	names_begin("busy");
	area_new();
	static uint8_t data[10000];
	tu_fill_pattern(data, sizeof(data), 51, 0);
	tu_write_file(fpath("busy", 0), data, sizeof(data));
	memcpy(area->img, data, sizeof(data));
	area->size = sizeof(data);
	kid_start(kid_busy_holder);
	kid_start(kid_busy_holder);
	kid_start(kid_busy_other);
	kid_start(kid_busy_other);
	step(0);
	step(1);
	step(2);
	step(3);
	step(0); /* kid 0 closes its handle */
	step(2);
	step(3);
	step(0); /* kid 0 leaves */
	step(1); /* kid 1 leaves */
	step(2);
	step(3);
	kids_reap();
	CHECK(backing_is_model(fpath("busy", 0)));
	area_free();
	names_end();
}

/* ------------------------------------------------ leaving */

/* Kid 0 writes file "alone" (which kid 1 never opens) and leaves; kid 1,
 * still attached, then opens and reads it, and writes file "own". */
static void kid_leaver(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = NULL;
	if (k == 0) {
		f = kid_open(c, fpath("alone", 0), O_RDWR);
		kid_write(f, 0, 123457, 61, 0);
		kid_write(f, 300000, 5, 62, 0);
		struct pc_stats st;
		pc_file_stats(f, &st);
		KCHECK(st.dirty_bytes > 0);
		kid_ack();
		kid_wait();
		KCHECK(pc_cache_destroy(c) == 0); /* f is still open: destroy closes it */
		kid_end();
	}
	kid_ack();
	kid_wait();
	f = kid_open(c, fpath("alone", 0), O_RDONLY);
	kid_check_read(f, 0, (size_t)area->size + 10, 0);
	KCHECK(pc_close(f) == 0);
	struct pc_file *g = kid_open(c, fpath("own", 1), O_RDWR);
	static uint8_t buf[70000];
	tu_fill_pattern(buf, sizeof(buf), 63, 3);
	KCHECK(pc_pwrite(g, buf, sizeof(buf), 3, 0) == (ssize_t)sizeof(buf));
	kid_ack();
	kid_wait();
	KCHECK(pc_cache_destroy(c) == 0); /* g too */
	kid_end();
}

/* A process that leaves writes back the data of the files it alone
 * holds: once its pc_cache_destroy returned, the backing file has the
 * data and the exact size, while another process is still attached. */
TEST_CASE(leaver_writes_back_files_only_it_holds)
{
	names_begin("leaver");
	area_new();
	make_empty(fpath("alone", 0));
	make_empty(fpath("own", 1));
	kid_start(kid_leaver);
	kid_start(kid_leaver);
	step(0); /* creates, writes "alone" */
	step(1); /* attaches */
	step(0); /* leaves */
	CHECK(backing_is_model(fpath("alone", 0)));
	step(1); /* reads "alone", writes "own" */
	CHECK(object_find(name1, NULL)); /* kid 1 is still in it */
	step(1); /* leaves, last */
	kids_reap();
	CHECK(backing_is_model(fpath("alone", 0)));
	static uint8_t want[70003];
	tu_fill_pattern(want + 3, sizeof(want) - 3, 63, 3);
	CHECK(backing_equals(fpath("own", 1), want, sizeof(want)));
	CHECK(!object_find(name1, NULL));
	area_free();
	names_end();
}

/* Kids 0 and 1 both hold file "last"; kid 0 writes it, and writes and
 * closes file "closed", and leaves without syncing; kid 1 writes "last"
 * too and leaves last. */
static void kid_last(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("last", 0), O_RDWR);
	kid_ack();
	kid_wait();
	if (k == 0) {
		kid_write(f, 4097, 99999, 71, 0);
		kid_write(f, 1, 1, 72, 0);
		struct pc_file *g = kid_open(c, fpath("closed", 1), O_RDWR);
		static uint8_t buf[40000];
		tu_fill_pattern(buf, sizeof(buf), 73, 0);
		KCHECK(pc_pwrite(g, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
		KCHECK(pc_close(g) == 0);
		struct pc_stats st;
		pc_file_stats(f, &st);
		KCHECK(st.dirty_bytes > 0);
		KCHECK(pc_cache_destroy(c) == 0);
		kid_end();
	}
	kid_check_read(f, 0, (size_t)area->size, 0);
	kid_write(f, 200000, 3333, 74, 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

/* The last process to leave writes everything back: data another
 * process wrote and left without syncing, in a file both held and in a
 * file only the other one held and closed. */
TEST_CASE(last_leaver_writes_back_everything)
{
	names_begin("last");
	area_new();
	make_empty(fpath("last", 0));
	make_empty(fpath("closed", 1));
	kid_start(kid_last);
	kid_start(kid_last);
	step(0);
	step(1);
	step(0); /* writes, leaves */
	CHECK(object_find(name1, NULL)); /* kid 1 is still in it */
	step(1); /* writes, leaves last */
	kids_reap();
	CHECK(backing_is_model(fpath("last", 0)));
	static uint8_t want[40000];
	tu_fill_pattern(want, sizeof(want), 73, 0);
	CHECK(backing_equals(fpath("closed", 1), want, sizeof(want)));
	CHECK(!object_find(name1, NULL));
	area_free();
	names_end();
}

/* ------------------------------------------------ fork */

/* pc_pread on an inherited handle fails with EPERM, so do the other calls
 * on the inherited cache; pc_cache_destroy of it returns 0 and leaves the
 * parent's cache (and its object) alone; the child may then attach to the
 * name itself and see the parent's writes, and the parent sees the
 * child's. */
TEST_CASE(fork_child_eperm_then_attaches_itself)
{
	names_begin("fork");
	area_new();
	struct pc_config cfg = creator_config(name1);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	const char *path = fpath("fork", 0);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	static uint8_t buf[100000];
	tu_fill_pattern(buf, sizeof(buf), 81, 0);
	CHECK(pc_pwrite(f, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	model_write(0, sizeof(buf), 81);

	/* A child of a process with threads that starts threads of its own
	 * (a cache) is for the Release build only (testutil.h, tu_fork). */
	bool attach = !TU_SANITIZED;
	pid_t pid = tu_fork(KID_WATCHDOG_S);
	if (pid == 0) {
		kid_index = 0;
		uint8_t b[4096];
		errno = 0;
		KCHECK(pc_pread(f, b, sizeof(b), 0, 0) == -1 && errno == EPERM);
		errno = 0;
		KCHECK(pc_pwrite(f, b, sizeof(b), 0, 0) == -1 && errno == EPERM);
		errno = 0;
		KCHECK(pc_fsync(f) == -1 && errno == EPERM);
		struct pc_config got;
		errno = 0;
		KCHECK(pc_cache_config(c, &got) == -1 && errno == EPERM);
		errno = 0;
		KCHECK(pc_open(c, path, O_RDONLY, 0) == NULL && errno == EPERM);
		KCHECK(pc_close(f) == 0);
		KCHECK(pc_cache_destroy(c) == 0);
		KCHECK(object_find(name1, NULL)); /* the parent's still */
		if (attach) {
			struct pc_cache *mine = kid_attach(name1);
			struct pc_file *g = kid_open(mine, path, O_RDWR);
			kid_check_read(g, 0, sizeof(buf) + 1, 0);
			kid_write(g, 99000, 6000, 82, 0);
			KCHECK(pc_close(g) == 0);
			KCHECK(pc_cache_destroy(mine) == 0);
		}
		_exit(0);
	}
	CHECK(tu_wait_child(pid, KID_WAIT_S) == 0);
	/* The parent's cache works, and has the child's write. */
	CHECK(pc_size(f) == (off_t)area->size);
	static uint8_t back[110000];
	CHECK(pc_pread(f, back, sizeof(back), 0, 0) == (ssize_t)area->size);
	CHECK(memcmp(back, area->img, area->size) == 0);
	tu_fill_pattern(buf, 5000, 83, 50000);
	CHECK(pc_pwrite(f, buf, 5000, 50000, 0) == 5000);
	model_write(50000, 5000, 83);
	CHECK(pc_fsync(f) == 0);
	CHECK(backing_is_model(path));
	struct pc_config got;
	CHECK(pc_cache_config(c, &got) == 0 && got.shared_name && strcmp(got.shared_name, name1) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	CHECK(backing_is_model(path));
	CHECK(!object_find(name1, NULL));
	area_free();
	names_end();
}

/* ------------------------------------------------ fixes of the first review */

/* Kid 0 makes the cache (its memory faulted in by the calls that use it),
 * kid 1 attaches and reads a 1 MiB file through it: each process's count
 * of the memory its caches have yet to take stays its own, so a private
 * cache made afterwards in either process is not refused (ENOMEM). */
static void kid_budget(unsigned k)
{
	kid_wait();
	struct pc_cache *c;
	if (k == 0) {
		struct pc_config cfg = creator_config(name1);
		cfg.flags |= PC_CFG_LAZY_MEMORY;
		c = pc_cache_new(&cfg);
		KCHECK(c);
	} else {
		c = kid_attach(name1);
		struct pc_file *f = kid_open(c, fpath("budget", 0), O_RDONLY);
		kid_check_read(f, 0, (size_t)area->size, 0);
		KCHECK(pc_close(f) == 0);
	}
	kid_ack();
	kid_wait();
	struct pc_config pcfg = tu_config(16 * MiB);
	struct pc_cache *p = pc_cache_new(&pcfg);
	KCHECK(p);
	KCHECK(pc_cache_destroy(p) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

TEST_CASE(attacher_still_makes_private_caches)
{
	names_begin("budget");
	area_new();
	static uint8_t data[IMG_MAX];
	tu_fill_pattern(data, sizeof(data), 91, 0);
	tu_write_file(fpath("budget", 0), data, sizeof(data));
	memcpy(area->img, data, sizeof(data));
	area->size = sizeof(data);
	kid_start(kid_budget);
	kid_start(kid_budget);
	step(0);
	step(1);
	step(1);
	step(0);
	kids_reap();
	area_free();
	names_end();
}

/* A second pc_cache_new of a name this process is attached to: EBUSY (it
 * would be mapped where the first is), and the first still works. */
TEST_CASE(same_name_twice_in_one_process_ebusy)
{
	names_begin("twice");
	struct pc_config cfg = creator_config(name1);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	errno = 0;
	struct pc_cache *d = pc_cache_new(&cfg);
	CHECK(d == NULL && errno == EBUSY);
	struct pc_file *f = pc_open(c, fpath("twice", 0), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(f != NULL);
	CHECK(f && pc_pwrite(f, "x", 1, 0, 0) == 1);
	CHECK(f && pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	names_end();
}

/* Readers share a file as they do today: a private cache reads a file a
 * shared cache only reads (its description's lock is a read lock), and
 * the shared cache's first writer then gets EBUSY, as a private writer
 * would; once the private reader is gone it may write, and then the
 * private reader is refused. */
static void kid_readers(unsigned k)
{
	kid_wait();
	struct pc_cache *c;
	if (k == 1) {
		struct pc_config cfg = tu_config(8 * MiB);
		c = pc_cache_new(&cfg);
		KCHECK(c);
	} else {
		c = k == 0 ? kid_create(name1) : kid_attach(name1);
	}
	const char *path = fpath("readers", 0);
	struct pc_file *f = k == 2 ? NULL : kid_open(c, path, O_RDONLY);
	if (f)
		kid_check_read(f, 0, (size_t)area->size, 0);
	if (k == 2) {
		errno = 0;
		struct pc_file *w = pc_open(c, path, O_RDWR, 0);
		KCHECK(w == NULL && errno == EBUSY);
	}
	kid_ack();
	kid_wait();
	if (k == 1)
		KCHECK(pc_close(f) == 0); /* the private reader goes */
	if (k == 2) {
		struct pc_file *w = kid_open(c, path, O_RDWR);
		kid_write(w, 100, 1000, 92, 0);
		KCHECK(pc_close(w) == 0);
	}
	kid_ack();
	kid_wait();
	if (k == 1) {
		errno = 0;
		struct pc_file *r = pc_open(c, path, O_RDONLY, 0);
		KCHECK(r == NULL && errno == EBUSY);
	}
	if (k == 0)
		KCHECK(pc_close(f) == 0);
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

TEST_CASE(private_reader_beside_shared_readers)
{
	names_begin("readers");
	area_new();
	static uint8_t data[50000];
	tu_fill_pattern(data, sizeof(data), 93, 0);
	tu_write_file(fpath("readers", 0), data, sizeof(data));
	memcpy(area->img, data, sizeof(data));
	area->size = sizeof(data);
	kid_start(kid_readers);
	kid_start(kid_readers);
	kid_start(kid_readers);
	step(0);
	step(1);
	step(2);
	step(1); /* the private reader closes */
	step(2); /* the shared cache writes */
	step(0);
	step(2);
	step(1); /* refused, leaves */
	step(0);
	kids_reap();
	CHECK(backing_is_model(fpath("readers", 0)));
	area_free();
	names_end();
}

#define IDLE_FILES 20

/* This process's descriptors of the scratch files named "idle-*". */
static unsigned idle_descriptors(void)
{
	unsigned n = 0;
	char link[64], target[4300];
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		n += strstr(target, "/idle-") != NULL;
	}
	return n;
}

/* Kid 0 opens 20 files, kid 1 opens them too (it holds descriptors of the
 * same descriptions), kid 0 closes its handles: its descriptors go
 * within a sweep (a second), one holder being enough; kid 1's stay, and
 * its reads and the write-back at its leave are whole. */
static void kid_idle(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f[IDLE_FILES];
	for (unsigned i = 0; i < IDLE_FILES; i++) {
		char file[32];
		snprintf(file, sizeof(file), "idle-%u", i);
		f[i] = kid_open(c, fpath(file, 0), O_RDWR | O_CREAT);
		if (k == 0)
			KCHECK(pc_pwrite(f[i], file, strlen(file), 0, 0) == (ssize_t)strlen(file));
	}
	KCHECK(idle_descriptors() == IDLE_FILES);
	kid_ack();
	kid_wait();
	if (k == 0) {
		for (unsigned i = 0; i < IDLE_FILES; i++)
			KCHECK(pc_close(f[i]) == 0);
		KCHECK(TU_POLL(idle_descriptors() == 0, 3000));
	} else {
		KCHECK(idle_descriptors() == IDLE_FILES);
		for (unsigned i = 0; i < IDLE_FILES; i++) {
			char file[32], got[32] = "";
			snprintf(file, sizeof(file), "idle-%u", i);
			KCHECK(pc_pread(f[i], got, sizeof(got), 0, 0) == (ssize_t)strlen(file));
			KCHECK(memcmp(got, file, strlen(file)) == 0);
			KCHECK(pc_close(f[i]) == 0);
		}
	}
	kid_ack();
	kid_wait();
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

TEST_CASE(idle_holders_let_go_of_descriptors)
{
	names_begin("idle");
	kid_start(kid_idle);
	kid_start(kid_idle);
	step(0);
	step(1);
	step(0); /* closes, its descriptors go */
	step(1); /* still holds, reads, closes */
	step(0);
	step(1);
	kids_reap();
	for (unsigned i = 0; i < IDLE_FILES; i++) {
		char file[32], want[32];
		snprintf(file, sizeof(file), "idle-%u", i);
		snprintf(want, sizeof(want), "idle-%u", i);
		CHECK(backing_equals(fpath(file, 0), (const uint8_t *)want, strlen(want)));
		unlink(fpath(file, 0));
	}
	names_end();
}

/* Two members with dirty data in one file leave at the same moment: one
 * of them is the last out and writes everything back (a leaver that is
 * not last leaves the file to the other, which must then know itself
 * last).  Rounds, for the moment to fall anywhere. */
static void kid_leave_together(unsigned k)
{
	kid_wait();
	struct pc_cache *c = k == 0 ? kid_create(name1) : kid_attach(name1);
	struct pc_file *f = kid_open(c, fpath("together", 0), O_RDWR);
	kid_ack();
	kid_wait();
	kid_write(f, k * 70000 + 3, 60000, 95 + k, 0);
	kid_ack();
	kid_wait();
	KCHECK(pc_cache_destroy(c) == 0);
	kid_end();
}

TEST_CASE(members_leaving_at_once_write_back)
{
	for (unsigned round = 0; round < 10; round++) {
		names_begin("together");
		area_new();
		make_empty(fpath("together", 0));
		kid_start(kid_leave_together);
		kid_start(kid_leave_together);
		step(0);
		step(1);
		step(0);
		step(1);
		go(0);
		go(1);
		done(0);
		done(1);
		kids_reap();
		CHECK(backing_is_model(fpath("together", 0)));
		CHECK(!object_find(name1, NULL));
		area_free();
		names_end();
	}
}

/* A shared cache's memory is /dev/shm's: where that tmpfs has less room
 * than the cache's memory, pc_cache_new fails with ENOMEM at once, instead
 * of the process dying of SIGBUS once the cache fills (a container's
 * /dev/shm is 64 MiB by default).  In a mount namespace of the child's
 * own, with a 24 MiB /dev/shm. */
TEST_CASE(small_dev_shm_is_enomem_not_sigbus)
{
	if (geteuid() != 0)
		TEST_SKIP("needs root, to mount a small /dev/shm in a namespace of its own");
	names_begin("smallshm");
	pid_t pid = tu_fork(KID_WATCHDOG_S);
	if (pid == 0) {
		kid_index = 0;
		KCHECK(unshare(CLONE_NEWNS) == 0);
		KCHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
		KCHECK(mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=24m") == 0);
		struct pc_config cfg = creator_config(name1);
		cfg.memory_limit = 64 * MiB;
		errno = 0;
		KCHECK(pc_cache_new(&cfg) == NULL && errno == ENOMEM);
		KCHECK(!object_find(name1, NULL));
		/* One that fits is made, and filled. */
		cfg.memory_limit = 4 * MiB;
		struct pc_cache *c = pc_cache_new(&cfg);
		KCHECK(c);
		struct pc_file *f = kid_open(c, fpath("smallshm", 0), O_RDWR | O_CREAT | O_TRUNC);
		static uint8_t buf[1 << 20];
		for (unsigned i = 0; i < 16; i++) {
			tu_fill_pattern(buf, sizeof(buf), 97 + i, (uint64_t)i << 20);
			KCHECK(pc_pwrite(f, buf, sizeof(buf), (off_t)i << 20, 0) == (ssize_t)sizeof(buf));
		}
		KCHECK(pc_close(f) == 0);
		KCHECK(pc_cache_destroy(c) == 0);
		_exit(0);
	}
	CHECK(tu_wait_child(pid, KID_WAIT_S) == 0);
	unlink(fpath("smallshm", 0));
	names_end();
}

/* A fork child attaching by name while it still has its inherited copy of
 * the cache: EBUSY (the new attachment would be mapped at the address the
 * inherited pointer names, and a destroy of that pointer would take it);
 * once the copy is destroyed, the attach works. */
TEST_CASE(fork_child_destroys_its_copy_before_attaching)
{
	/* A child of a process with threads that starts threads of its own
	 * (a cache) is for the Release build only (testutil.h, tu_fork): the
	 * sanitizer builds check the refusal and the destroy. */
	bool attach = !TU_SANITIZED;
	names_begin("forkfirst");
	struct pc_config cfg = creator_config(name1);
	struct pc_cache *c = pc_cache_new(&cfg);
	REQUIRE(c);
	pid_t pid = tu_fork(KID_WATCHDOG_S);
	if (pid == 0) {
		kid_index = 0;
		errno = 0;
		KCHECK(pc_cache_new(&cfg) == NULL && errno == EBUSY);
		KCHECK(pc_cache_destroy(c) == 0);
		if (attach) {
			struct pc_cache *mine = pc_cache_new(&cfg);
			KCHECK(mine);
			struct pc_file *f = kid_open(mine, fpath("forkfirst", 0), O_RDWR | O_CREAT | O_TRUNC);
			KCHECK(pc_pwrite(f, "child", 5, 0, 0) == 5);
			KCHECK(pc_close(f) == 0);
			KCHECK(pc_cache_destroy(mine) == 0);
		}
		_exit(0);
	}
	CHECK(tu_wait_child(pid, KID_WAIT_S) == 0);
	if (attach) {
		struct pc_file *f = pc_open(c, fpath("forkfirst", 0), O_RDONLY, 0);
		char got[8] = "";
		CHECK(f && pc_pread(f, got, sizeof(got), 0, 0) == 5 && memcmp(got, "child", 5) == 0);
		CHECK(f && pc_close(f) == 0);
	}
	CHECK(pc_cache_destroy(c) == 0);
	unlink(fpath("forkfirst", 0));
	names_end();
}
