/*
 * test_mt_arena.c - the background fault-in of the folio arena (arena.c)
 * against everything that can meet it while it runs:
 *   - pc_cache_destroy: it returns (the thread stops within a step),
 *     nothing leaks (ASan), nothing races (TSan); caches destroyed at
 *     once, before the thread's first step, and in the middle of it;
 *   - writes and reads: writer threads fill and rewrite their regions of
 *     a file in a fresh cache, in misaligned records, reading each pass
 *     back; then the backing file, after destroy, holds the last pass;
 *   - fork(), right after pc_cache_new and after writes: the child's calls
 *     on the inherited cache and handle fail at once with EPERM and its
 *     pc_cache_destroy of the copy returns 0 (there is no thread to stop
 *     in the child); outside the sanitizers the child's own new cache
 *     works; the parent's cache goes on with exact data;
 * and how far it goes: it keeps a lead ahead of the memory handed out and
 * no more (an idle new cache faults in its lead only, and destroy wakes it
 * at once), follows the memory writes use, and runs to the end once all
 * of the arena is used, the descriptor table with it; PC_CFG_EAGER_MEMORY
 * faults all of it in unused; PC_CFG_LAZY_MEMORY starts no thread.
 * The large caches of the first three take min(1 GiB, a quarter of the
 * available memory) with PC_CFG_EAGER_MEMORY (the thread faults all of it
 * in, not only a lead), so that faulting them in takes long enough to meet
 * the calls above on any machine; no figure of time is asserted (the
 * harness's watchdog fails a hang).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define CHILD_WATCHDOG_S 30u
#define NWRITERS 2
#define REGION (24 * MiB)
#define RECORD (100 * KiB + 13) /* misaligned records across folios */
#define PASSES 2

static const char *dir;

/* tu_exit_guard before any cache: the fork case's children come from a
 * process whose threads run (testutil.h, tu_fork). */
static void arena_setup(void)
{
	tu_exit_guard();
	dir = test_dir("mt_arena");
}

static void arena_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(arena_setup, arena_teardown)

static uint64_t large_cache_bytes(void)
{
	uint64_t avail = sysmem_available();
	uint64_t want = avail == UINT64_MAX ? GiB : tu_min_u64(GiB, avail / 4);
	return tu_max_u64(64 * MiB, tu_round_down(want, MiB));
}

static struct pc_config config_with_flags(uint64_t bytes, unsigned flags)
{
	struct pc_config cfg = tu_config((size_t)bytes);
	cfg.flags = flags;
	return cfg;
}

static struct pc_cache *cache_with_flags(uint64_t bytes, unsigned flags)
{
	struct pc_config cfg = config_with_flags(bytes, flags);
	return tu_cache_new(&cfg);
}

static bool populating(struct pc_cache *c)
{
	return arena_populated_bytes(c) < c->arena_bytes;
}

/* A new cache of `bytes` (its fault-in starting) and a new file in it. */
static struct pc_file *new_cache_and_file(uint64_t bytes, const char *path, struct pc_cache **c)
{
	*c = cache_with_flags(bytes, PC_CFG_EAGER_MEMORY);
	struct pc_file *f = pc_open(*c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	return f;
}

/* ------------------------------------------------------------ destroy */

/* pc_cache_destroy while the arena is being faulted in: at once, and once
 * the thread has done a step. */
TEST_CASE(destroy_while_faulting_in)
{
	uint64_t bytes = large_cache_bytes();
	unsigned midway = 0;
	double slowest = 0;
	for (unsigned i = 0; i < 8; i++) {
		struct pc_cache *c = cache_with_flags(bytes, PC_CFG_EAGER_MEMORY);
		CHECK(cache_proc(c)->populate_running);
		/* Even rounds: at once (the thread may not have run yet); odd
		 * ones: once it has done a step. */
		if (i % 2)
			CHECK(TU_POLL(arena_populated_bytes(c) > 0, 10000));
		if (arena_populated_bytes(c) > 0 && populating(c))
			midway++;
		double t0 = tu_now_s();
		CHECK(pc_cache_destroy(c) == 0);
		double took = tu_now_s() - t0;
		if (took > slowest)
			slowest = took;
	}
	printf("8 caches of %llu MiB destroyed while being faulted in (%u of them midway), slowest "
	       "destroy %.0f us\n",
	       (unsigned long long)(bytes / MiB), midway, slowest * 1e6);
	CHECK(midway > 0);
}

/* ------------------------------------------------------ writes, reads */

struct writer {
	pthread_t t;
	struct pc_file *f;
	unsigned id;
	long bad_writes, bad_reads;
};

static uint64_t seed_of(unsigned id, unsigned pass)
{
	return 1000u * id + pass + 1;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t *buf = malloc(RECORD), *back = malloc(RECORD);
	REQUIRE(buf && back);
	uint64_t base = (uint64_t)w->id * REGION;
	for (unsigned pass = 0; pass < PASSES; pass++) {
		for (uint64_t at = 0; at < REGION; at += RECORD) {
			size_t n = (size_t)tu_min_u64(RECORD, REGION - at);
			tu_fill_pattern(buf, n, seed_of(w->id, pass), base + at);
			if (pc_pwrite(w->f, buf, n, (off_t)(base + at), 0) != (ssize_t)n)
				w->bad_writes++;
		}
		for (uint64_t at = 0; at < REGION; at += RECORD) {
			size_t n = (size_t)tu_min_u64(RECORD, REGION - at);
			tu_fill_pattern(buf, n, seed_of(w->id, pass), base + at);
			if (pc_pread(w->f, back, n, (off_t)(base + at), 0) != (ssize_t)n || memcmp(buf, back, n))
				w->bad_reads++;
		}
	}
	free(buf);
	free(back);
	return NULL;
}

/* Writers and readers while the arena is being faulted in: exact data, in
 * the cache and on the device. */
TEST_CASE(data_exact_while_faulting_in)
{
	uint64_t bytes = large_cache_bytes();
	char path[4200];
	test_path(path, sizeof(path), dir, "data");
	struct pc_cache *c;
	struct pc_file *f = new_cache_and_file(bytes, path, &c);
	size_t at_start = arena_populated_bytes(c);
	struct writer w[NWRITERS];
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i] = (struct writer){ .f = f, .id = i };
		REQUIRE(pthread_create(&w[i].t, NULL, writer_main, &w[i]) == 0);
	}
	for (unsigned i = 0; i < NWRITERS; i++) {
		pthread_join(w[i].t, NULL);
		CHECK(w[i].bad_writes == 0);
		CHECK(w[i].bad_reads == 0);
	}
	size_t at_end = arena_populated_bytes(c);
	printf("%u writers, %u passes of %llu MiB each; faulted in %zu MiB at the start, %zu MiB at the end "
	       "of %llu MiB\n",
	       NWRITERS, PASSES, (unsigned long long)(REGION / MiB), (size_t)(at_start / MiB), (size_t)(at_end / MiB),
	       (unsigned long long)(bytes / MiB));
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);

	size_t size = NWRITERS * REGION;
	uint8_t *want = malloc(size);
	REQUIRE(want);
	for (unsigned i = 0; i < NWRITERS; i++)
		tu_fill_pattern(want + (size_t)i * REGION, REGION, seed_of(i, PASSES - 1), (uint64_t)i * REGION);
	CHECK(tu_verify_disk(path, want, size));
	free(want);
	unlink(path);
}

/* --------------------------------------------------------------- fork */

/* In the child: exit statuses say which step failed.  The child's own
 * cache is faulted in by a thread of the child's. */
static int child_own_cache(unsigned n)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/child%u", dir, n);
	struct pc_config cfg = config_with_flags(16 * MiB, 0);
	struct pc_cache *c = pc_cache_new(&cfg);
	struct pc_file *f = c ? pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644) : NULL;
	if (!f)
		return 20;
	static uint8_t buf[MiB], back[MiB];
	tu_fill_pattern(buf, sizeof(buf), 77 + n, 0);
	if (pc_pwrite(f, buf, sizeof(buf), 0, 0) != (ssize_t)sizeof(buf) ||
	    pc_pread(f, back, sizeof(back), 0, 0) != (ssize_t)sizeof(back) || memcmp(buf, back, sizeof(buf)))
		return 21;
	int status = pc_close(f) == 0 && pc_cache_destroy(c) == 0 ? 0 : 22;
	unlink(path);
	return status;
}

static bool fails_eperm(ssize_t r)
{
	return r == -1 && errno == EPERM;
}

/* f: an inherited handle, or NULL (the parent had opened none yet). */
/* Forked while the parent's threads run: it leaves by _exit, never
 * through LeakSanitizer's check at exit (testutil.h, tu_fork). */
static void child_main(struct pc_cache *c, struct pc_file *f, const char *parent_file, unsigned n)
{
	uint8_t buf[4096];
	memset(buf, 1, sizeof(buf));
	errno = 0;
	if (pc_open(c, parent_file, O_RDONLY, 0) || errno != EPERM)
		_exit(10);
	if (f && (!fails_eperm(pc_pwrite(f, buf, sizeof(buf), 0, 0)) ||
		  !fails_eperm(pc_pread(f, buf, sizeof(buf), 0, 0))))
		_exit(11);
	/* Sanitizers do not survive threads started in the child of a
	 * process with threads (see test_mt_fork): Release tests this. */
	int status = TU_SANITIZED ? 0 : child_own_cache(n);
	/* TSan: no frees in the child (see test_mt_fork). */
	if (status || TU_TSAN)
		_exit(status);
	_exit((!f || pc_close(f) == 0) && pc_cache_destroy(c) == 0 ? 0 : 30);
}

/* Fork a child while the parent's cache is (perhaps) being faulted in;
 * true if it was. */
static bool fork_child(struct pc_cache *c, struct pc_file *f, const char *path, unsigned n)
{
	bool midway = populating(c);
	pid_t pid = tu_fork(CHILD_WATCHDOG_S);
	if (pid == 0)
		child_main(c, f, path, n);
	int status = tu_wait_child(pid, CHILD_WATCHDOG_S + 5);
	if (status)
		fprintf(stderr, "child %u: exit status %d\n", n, status);
	CHECK(status == 0);
	return midway;
}

/* Children forked while the parent's arena is being faulted in: their
 * calls on the inherited copy fail with EPERM, the parent's data stays
 * exact. */
TEST_CASE(fork_while_faulting_in)
{
	uint64_t bytes = large_cache_bytes();
	char path[4200];
	test_path(path, sizeof(path), dir, "parent");
	/* The first child comes right after pc_cache_new, before pc_open
	 * (which takes long under TSan): faulting in goes at up to 20 GiB/s
	 * where the machine has the memory at hand. */
	struct pc_cache *c = cache_with_flags(bytes, PC_CFG_EAGER_MEMORY);
	unsigned midway = fork_child(c, NULL, path, 0), nchildren = 4;
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	const size_t size = 8 * MiB;
	uint8_t *data = malloc(size), *back = malloc(size);
	REQUIRE(data && back);
	for (unsigned n = 1; n < nchildren; n++) {
		tu_fill_pattern(data, size, 500 + n, 0);
		CHECK(pc_pwrite(f, data, size, 0, 0) == (ssize_t)size);
		midway += fork_child(c, f, path, n);
		/* What the parent wrote before the fork is intact. */
		CHECK(pc_pread(f, back, size, 0, 0) == (ssize_t)size);
		CHECK(memcmp(data, back, size) == 0);
	}
	printf("%u children forked, %u of them while the parent's cache was being faulted in\n", nchildren,
	       midway);
	CHECK(midway > 0);
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	CHECK(tu_verify_disk(path, data, size));
	free(data);
	free(back);
	unlink(path);
}

/* ------------------------------------------------------- how far it goes */

/* Pages of the descriptor table, and of those the kernel has in memory
 * (mincore). */
static size_t table_pages(struct pc_cache *c)
{
	return ((size_t)c->npages * sizeof(struct pc_folio) + 4095) / 4096;
}

static size_t table_pages_resident(struct pc_cache *c)
{
	size_t bytes = (size_t)c->npages * sizeof(struct pc_folio);
	size_t pages = (bytes + 4095) / 4096, resident = 0;
	unsigned char *vec = malloc(pages);
	REQUIRE(vec);
	CHECK(mincore(c->folios, bytes, vec) == 0);
	for (size_t i = 0; i < pages; i++)
		resident += vec[i] & 1;
	free(vec);
	return resident;
}

/* Write `bytes` of new data to a new file through c and fsync it: the
 * cache hands out that much memory (or all of it, evicting). */
static void use_memory(struct pc_cache *c, const char *name, uint64_t bytes)
{
	char path[4200];
	test_path(path, sizeof(path), dir, name);
	struct pc_file *f = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	static uint8_t buf[MiB];
	memset(buf, 0x3c, sizeof(buf));
	for (uint64_t at = 0; at < bytes; at += sizeof(buf))
		CHECK(pc_pwrite(f, buf, sizeof(buf), (off_t)at, 0) == (ssize_t)sizeof(buf));
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_close(f) == 0);
	unlink(path);
}

/* The thread keeps its lead ahead of the memory handed out, and only
 * that: a cache whose working set stays small never faults in the rest
 * (an uncached writer's first writes would pay for it with a CPU). */
TEST_CASE(keeps_a_lead_and_no_more)
{
	const uint64_t bytes = 64 * MiB, step = 2 * MiB;
	struct pc_cache *c = cache_with_flags(bytes, 0);
	size_t lead = c->populate_lead;
	CHECK(lead >= step && lead < bytes);
	/* Idle: the lead, then nothing more. */
	CHECK(TU_POLL(tu_stats(c).prefault_pending_bytes == 0, 60000));
	size_t idle = arena_populated_bytes(c);
	CHECK(idle >= lead && idle < lead + step);
	CHECK(!atomic_load(&c->populate_ended));
	/* Using memory moves the goal: the thread follows with its lead. */
	use_memory(c, "lead", bytes / 2);
	size_t used = (size_t)arena_used_pages(c) << PC_PAGE_SHIFT;
	CHECK(used >= bytes / 2);
	CHECK(TU_POLL(arena_populated_bytes(c) >= tu_min_u64(used + lead, bytes), 60000));
	/* Destroy wakes the waiting thread (it would sleep for seconds on a
	 * lost wakeup; a generous bound, not a figure). */
	double t0 = tu_now_s();
	CHECK(pc_cache_destroy(c) == 0);
	double took = tu_now_s() - t0;
	CHECK(took < 5.0);
	printf("a %llu MiB cache: idle it faulted in %zu MiB (its lead %zu MiB); after %zu MiB used, %zu MiB; "
	       "destroy took %.0f us\n",
	       (unsigned long long)(bytes / MiB), idle / (size_t)MiB, lead / (size_t)MiB, used / (size_t)MiB,
	       (size_t)((tu_min_u64(used + lead, bytes)) / MiB), took * 1e6);
}

/* Once all of the arena has been handed out the thread runs to its end,
 * and faults in the descriptor table with it (a cache's first write
 * otherwise faulted in, and zeroed, a 2 MiB huge page of the table). */
TEST_CASE(runs_to_the_end_once_all_used)
{
	struct pc_cache *c = cache_with_flags(8 * MiB, 0);
	/* What pc_stats says is left is what the thread has yet to do,
	 * and 0 once it has ended. */
	struct pc_stats s = tu_stats(c);
	CHECK(s.prefault_pending_bytes <= c->arena_bytes);
	CHECK(s.prefault_pending_bytes == 0 || !atomic_load(&c->populate_ended));
	use_memory(c, "end", 2 * c->arena_bytes); /* evicts: all of it used */
	CHECK(arena_used_pages(c) == c->npages);
	CHECK(TU_POLL(arena_populated_bytes(c) == c->arena_bytes, 60000));
	CHECK(TU_POLL(atomic_load(&c->populate_ended), 10000));
	CHECK(tu_stats(c).prefault_pending_bytes == 0);
	CHECK(table_pages_resident(c) == table_pages(c));
	CHECK(pc_cache_destroy(c) == 0);
}

/* PC_CFG_EAGER_MEMORY: all of it at once, the descriptor table with it,
 * nothing used. */
TEST_CASE(eager_memory_faults_in_all_unused)
{
	struct pc_cache *c = cache_with_flags(8 * MiB, PC_CFG_EAGER_MEMORY);
	CHECK(TU_POLL(atomic_load(&c->populate_ended), 60000));
	CHECK(arena_populated_bytes(c) == c->arena_bytes);
	CHECK(arena_used_pages(c) == 0);
	CHECK(table_pages_resident(c) == table_pages(c));
	CHECK(pc_cache_destroy(c) == 0);
}

/* PC_CFG_LAZY_MEMORY: no thread, nothing faulted in ahead. */
TEST_CASE(lazy_memory_starts_no_thread)
{
	struct pc_cache *c = cache_with_flags(8 * MiB, PC_CFG_LAZY_MEMORY);
	CHECK(!cache_proc(c)->populate_running);
	CHECK(arena_populated_bytes(c) == 0);
	CHECK(tu_stats(c).prefault_pending_bytes == 0); /* nothing will run */
	CHECK(pc_cache_destroy(c) == 0);
}
