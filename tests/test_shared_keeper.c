/*
 * test_shared_keeper.c - pckeeper (tools/pckeeper.c), the program that
 * holds a shared cache so that it outlives the processes using it: data a
 * process wrote without fsync and left behind is still cached for the
 * next one, and the keeper, last out, writes it back; bad usage, bad names
 * and settings that conflict with the cache's creator are refused with the
 * exit status man/pckeeper.1 gives.
 *
 * The keeper's path comes from PCKEEPER (CMakeLists.txt sets it for these
 * cases).  It runs as a child whose standard output and error are pipes:
 * its line "pckeeper: holding shared cache NAME (N MiB)" says that the
 * cache is ready, EOF that it ended.  Each case names its caches
 * "pctest-keeper-<pid>-<n>" and unlinks what is left of them at its start
 * and end, passed or failed.
 */
#include "testutil.h"

#include <sys/mman.h>

static const char *dir;

static void keeper_setup(void)
{
	tu_exit_guard();
	dir = test_dir("shared_keeper");
}

static void keeper_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(keeper_setup, keeper_teardown)

#define MIB ((size_t)1 << 20)
/* Not a multiple of a block: the last block is a partial one. */
#define DATA_SIZE (MIB + 12345)
#define DATA_SEED 0x6b656570ULL

/* ------------------------------------------------ names */

/* The case's name number n: "pctest-keeper-<pid>-<n>". */
static void keeper_name(char *out, size_t len, int n)
{
	snprintf(out, len, "pctest-keeper-%d-%d", (int)getpid(), n);
}


/* ------------------------------------------------ the keeper process */

struct keeper {
	pid_t pid;
	int out, err;     /* read ends of its standard output and error */
	char line[512];   /* its first line of standard output, no newline */
	char said[4096];  /* its standard error, once it ended */
};

static const char *keeper_path(void)
{
	const char *p = getenv("PCKEEPER");
	if (!p || !*p)
		TEST_SKIP("PCKEEPER is not set (ctest sets it to the pckeeper binary)");
	if (access(p, X_OK) != 0)
		TEST_SKIP("PCKEEPER names no executable: build the target pckeeper");
	return p;
}

/* Start pckeeper with argv (argv[0] included) and read its first line of
 * output: the holding line, a usage line, or "" when it ended silently. */
static void keeper_start(struct keeper *k, char *const argv[])
{
	const char *path = keeper_path();
	int out[2], err[2];
	REQUIRE(pipe2(out, O_CLOEXEC) == 0);
	REQUIRE(pipe2(err, O_CLOEXEC) == 0);
	/* The watchdog's alarm survives the exec: a keeper that hangs past
	 * it dies of SIGALRM, which tu_wait_child names. */
	pid_t pid = tu_fork(300);
	if (pid == 0) {
		if (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(126);
		execv(path, argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	*k = (struct keeper){ .pid = pid, .out = out[0], .err = err[0] };
	size_t n = 0;
	for (;;) {
		char ch;
		ssize_t r = read(k->out, &ch, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || ch == '\n')
			break;
		if (n < sizeof(k->line) - 1)
			k->line[n++] = ch;
	}
	k->line[n] = '\0';
}

static bool keeper_holding(const struct keeper *k)
{
	return strncmp(k->line, "pckeeper: holding shared cache ", 31) == 0;
}

/* Stop a keeper that holds its cache (SIGTERM), wait for it, and collect
 * what it said on standard error (shown in the case's log).  Returns its
 * exit status as tu_wait_child gives it. */
static int keeper_finish(struct keeper *k)
{
	if (keeper_holding(k))
		kill(k->pid, SIGTERM);
	int status = tu_wait_child(k->pid, 330);
	size_t n = 0;
	for (;;) {
		ssize_t r = read(k->err, k->said + n, sizeof(k->said) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof(k->said) - 1)
			break;
	}
	k->said[n] = '\0';
	close(k->out);
	close(k->err);
	fprintf(stderr, "   pckeeper (exit %d) said on stderr: %s%s", status, n ? "\n" : "(nothing)\n", k->said);
	return status;
}

/* Run pckeeper with argv to its end (a keeper that unexpectedly holds a
 * cache is stopped): its exit status; its output stays in *k. */
static int keeper_run(struct keeper *k, char *const argv[])
{
	keeper_start(k, argv);
	if (keeper_holding(k))
		fprintf(stderr, "   pckeeper held a cache where it should have refused: %s\n", k->line);
	return keeper_finish(k);
}

/* ------------------------------------------------ processes using the cache */

/* A process's attachment to the shared cache `name`, with every setting
 * left to the cache; NULL said on stderr.  The keeper created it with
 * 64 MiB: an attacher must get that size, not the default. */
static struct pc_cache *attach(const char *who, const char *name)
{
	struct pc_config cfg = tu_config(0);
	cfg.shared_name = name;
	struct pc_cache *c = pc_cache_new(&cfg);
	if (!c) {
		fprintf(stderr, "%s: pc_cache_new(%s): %s\n", who, name, strerror(errno));
		return NULL;
	}
	return c;
}

/* Did the attachment get the keeper's settings?  Said on stderr if not. */
static bool has_keepers_memory(const char *who, struct pc_cache *c)
{
	struct pc_config got;
	if (pc_cache_config(c, &got) != 0) {
		fprintf(stderr, "%s: pc_cache_config: %s\n", who, strerror(errno));
		return false;
	}
	if (got.memory_limit != 64 * MIB) {
		fprintf(stderr, "%s: the cache has %zu bytes of memory, the keeper's 64 MiB expected: "
				"not attached to the keeper's cache\n", who, got.memory_limit);
		return false;
	}
	return true;
}

/* The writer child: attach, write the file without fsync, close, detach.
 * Its exit status: 0, or 1 with the reason on stderr. */
static int write_and_leave(const char *name, const char *path)
{
	int bad = 0;
	struct pc_cache *c = attach("writer", name);
	if (!c)
		return 1;
	if (!has_keepers_memory("writer", c))
		bad = 1;
	uint8_t *buf = malloc(DATA_SIZE);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!buf || !f) {
		fprintf(stderr, "writer: %s: %s\n", buf ? "pc_open" : "malloc", strerror(errno));
		bad = 1;
	} else {
		tu_fill_pattern(buf, DATA_SIZE, DATA_SEED, 0);
		ssize_t n = pc_pwrite(f, buf, DATA_SIZE, 0, 0);
		if (n != (ssize_t)DATA_SIZE) {
			fprintf(stderr, "writer: pc_pwrite: %zd of %zu bytes: %s\n", n, (size_t)DATA_SIZE,
				strerror(errno));
			bad = 1;
		}
	}
	if (f && pc_close(f) != 0) {
		fprintf(stderr, "writer: pc_close: %s\n", strerror(errno));
		bad = 1;
	}
	if (pc_cache_destroy(c) != 0) {
		fprintf(stderr, "writer: pc_cache_destroy: %s\n", strerror(errno));
		bad = 1;
	}
	free(buf);
	return bad;
}

/* The reader child: attach, read the file back; its bytes must be the
 * writer's and must come from the cache (no device read).  Exit status as
 * write_and_leave's. */
static int read_from_cache(const char *name, const char *path)
{
	int bad = 0;
	struct pc_cache *c = attach("reader", name);
	if (!c)
		return 1;
	if (!has_keepers_memory("reader", c))
		bad = 1;
	uint8_t *buf = malloc(DATA_SIZE + 1);
	struct pc_file *f = pc_open(c, path, O_RDONLY, 0);
	if (!buf || !f) {
		fprintf(stderr, "reader: %s: %s\n", buf ? "pc_open" : "malloc", strerror(errno));
		bad = 1;
	} else {
		struct pc_stats before, after;
		pc_cache_stats(c, &before);
		/* One byte more than the file: a short read shows its size. */
		ssize_t n = pc_pread(f, buf, DATA_SIZE + 1, 0, 0);
		pc_cache_stats(c, &after);
		if (n != (ssize_t)DATA_SIZE) {
			fprintf(stderr, "reader: pc_pread: %zd bytes, the file's %zu expected: %s\n", n,
				(size_t)DATA_SIZE, n < 0 ? strerror(errno) : "another size");
			bad = 1;
		} else if (!tu_is_pattern(buf, DATA_SIZE, DATA_SEED, 0)) {
			fprintf(stderr, "reader: byte %zu differs from what the writer wrote\n",
				tu_pattern_mismatch(buf, DATA_SIZE, DATA_SEED, 0));
			bad = 1;
		}
		if (after.dev_read_ios != before.dev_read_ios) {
			fprintf(stderr, "reader: %llu device reads (%llu bytes): the data was not cached\n",
				(unsigned long long)(after.dev_read_ios - before.dev_read_ios),
				(unsigned long long)(after.dev_read_bytes - before.dev_read_bytes));
			bad = 1;
		}
	}
	if (f && pc_close(f) != 0) {
		fprintf(stderr, "reader: pc_close: %s\n", strerror(errno));
		bad = 1;
	}
	if (pc_cache_destroy(c) != 0) {
		fprintf(stderr, "reader: pc_cache_destroy: %s\n", strerror(errno));
		bad = 1;
	}
	free(buf);
	return bad;
}

/* ------------------------------------------------ cases */

TEST_CASE(keeper_keeps_the_cache_for_the_next_process)
{
	char name[64], path[4200], want[256];
	keeper_name(name, sizeof(name), 1);
	tu_shm_unlink(name);
	test_path(path, sizeof(path), dir, "kept.dat");

	struct keeper k;
	keeper_start(&k, (char *[]){ "pckeeper", name, "--memory", "64M", NULL });
	snprintf(want, sizeof(want), "pckeeper: holding shared cache %s (64 MiB)", name);
	CHECK(strcmp(k.line, want) == 0);
	if (!keeper_holding(&k)) {
		fprintf(stderr, "   pckeeper's first line: \"%s\"\n", k.line);
		keeper_finish(&k);
		tu_shm_unlink(name);
		return;
	}

	/* Each process starts the cache's threads of its own: children of a
	 * process with none. */
	pid_t pid = tu_fork_alone(120);
	if (pid == 0)
		exit(write_and_leave(name, path));
	CHECK(tu_wait_child(pid, 150) == 0);
	pid = tu_fork_alone(120);
	if (pid == 0)
		exit(read_from_cache(name, path));
	CHECK(tu_wait_child(pid, 150) == 0);

	/* The keeper is the last out: its detach writes the file back, and
	 * the name goes with the cache. */
	CHECK(keeper_finish(&k) == 0);
	uint8_t *expect = malloc(DATA_SIZE);
	REQUIRE(expect);
	tu_fill_pattern(expect, DATA_SIZE, DATA_SEED, 0);
	CHECK(tu_verify_disk(path, expect, DATA_SIZE));
	CHECK(!tu_shm_exists(name));
	free(expect);
	unlink(path);
	tu_shm_unlink(name);
}

TEST_CASE(keeper_rejects_bad_usage)
{
	char name[64];
	keeper_name(name, sizeof(name), 2);
	tu_shm_unlink(name);
	struct keeper k;

	CHECK(keeper_run(&k, (char *[]){ "pckeeper", NULL }) == 2);
	CHECK(strstr(k.said, "usage: pckeeper") != NULL);
	CHECK(keeper_run(&k, (char *[]){ "pckeeper", name, "extra", NULL }) == 2);
	CHECK(keeper_run(&k, (char *[]){ "pckeeper", name, "--no-such-option", NULL }) == 2);
	CHECK(keeper_run(&k, (char *[]){ "pckeeper", name, "--memory", NULL }) == 2);
	/* Sizes: garbage, zero, a sign, a bad suffix, overflow. */
	static const char *const bad_sizes[] = { "garbage", "0", "0M", "-1", "+64M", " 64M", "64X", "64MB",
						 "0x40M", "99999999999999999999", "17179869184G" };
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		int st = keeper_run(&k, (char *[]){ "pckeeper", name, "--memory", (char *)bad_sizes[i], NULL });
		if (st != 2)
			fprintf(stderr, "   --memory \"%s\": exit %d, 2 expected\n", bad_sizes[i], st);
		CHECK(st == 2);
		CHECK(strstr(k.said, "--memory") != NULL);
	}
	CHECK(!tu_shm_exists(name));

	/* --help: the usage on standard output, exit 0, no cache. */
	CHECK(keeper_run(&k, (char *[]){ "pckeeper", "--help", NULL }) == 0);
	CHECK(strncmp(k.line, "usage: pckeeper", 15) == 0);

	/* Names the library refuses: exit 1, the name and the error said. */
	char long_name[202];
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	char slash[80];
	snprintf(slash, sizeof(slash), "%s/x", name);
	char *const bad_names[] = { slash, ".", "..", "", long_name };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		int st = keeper_run(&k, (char *[]){ "pckeeper", bad_names[i], "--memory", "8M", NULL });
		if (st != 1)
			fprintf(stderr, "   name \"%.40s\": exit %d, 1 expected\n", bad_names[i], st);
		CHECK(st == 1);
		CHECK(strstr(k.said, "Invalid argument") != NULL);
	}
	tu_shm_unlink(name);
}

TEST_CASE(keeper_reports_other_settings)
{
	char name[64], want[256];
	keeper_name(name, sizeof(name), 3);
	tu_shm_unlink(name);

	/* This process creates the cache: its 32 MiB rule. */
	struct pc_config cfg = tu_config(32 * MIB);
	cfg.shared_name = name;
	struct pc_cache *c = tu_cache_new(&cfg);

	/* Another size is a conflict: EINVAL, exit 1, explained. */
	struct keeper k;
	CHECK(keeper_run(&k, (char *[]){ "pckeeper", name, "--memory", "64M", NULL }) == 1);
	CHECK(strstr(k.said, "Invalid argument") != NULL);
	CHECK(strstr(k.said, "leave out --memory") != NULL);

	/* Without --memory the keeper takes the creator's settings. */
	keeper_start(&k, (char *[]){ "pckeeper", name, NULL });
	snprintf(want, sizeof(want), "pckeeper: holding shared cache %s (32 MiB)", name);
	CHECK(strcmp(k.line, want) == 0);
	CHECK(keeper_finish(&k) == 0);

	CHECK(pc_cache_destroy(c) == 0);
	CHECK(!tu_shm_exists(name));
	tu_shm_unlink(name);
}
