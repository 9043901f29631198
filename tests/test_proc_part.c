/*
 * test_proc_part.c - what a process keeps of a cache apart from what the
 * cache's processes share (docs/shared.md, sections 13 and 16): its
 * descriptors of each file, at the file's slot (src/mem/file_slots.c,
 * mproc in mapping.h), and its part of each write-back domain (flusher
 * threads, I/O queue, file system descriptor: dproc in wb/flusher.h).
 *
 *   - slots_are_distinct_and_hold_the_open_descriptor: 2500 files open
 *     at once (three chunks of the process's table; fewer, but more than
 *     a chunk, if RLIMIT_NOFILE's hard limit is lower) have distinct slots,
 *     each taken in the cache's bitmap, and each slot's entry holds a
 *     descriptor of that very file (same device and inode);
 *   - slot_is_freed_with_its_file: a file closed and unlinked leaves the
 *     cache (its closed mapping is swept): its slot's bit clears and its
 *     entry says "no descriptor"; a new file can take the slot;
 *   - domain_is_shared_and_its_threads_are_the_process_s: a file's
 *     domain lives in the cache's segment (with the mappings), its
 *     process part in the process's window (struct pc_proc) at the
 *     domain's index, holding this process's I/O queue and flusher
 *     threads; two files of one device share the domain;
 *   - fork_child_handles_refused_without_the_cache: in a child of fork()
 *     with nothing of the cache mapped (its window unmapped, as a shared
 *     cache's child has none), calls on inherited handles and spans fail
 *     with EPERM (pc_close and pc_read_end return) from the handle or
 *     span alone, and calls on the cache itself (stats, config, open,
 *     fault count, file info) from the process's list of segments.
 */
#include "testutil.h"

#include "api/internal.h"
#include "mem/segment.h"
#include "wb/flusher.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

static const char *dir;

static void file_slots_setup(void)
{
	tu_exit_guard();
	dir = test_dir("proc_part");
}

static void file_slots_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(file_slots_setup, file_slots_teardown)

static bool slot_taken(struct pc_cache *c, uint32_t slot)
{
	return (atomic_load(&c->file_slot_bits[slot / 64]) >> (slot % 64)) & 1;
}

enum { NFILES_MAX = 2500 };

/* How many files to hold open at once: up to NFILES_MAX, within the
 * descriptor limit (raised to the hard one), and more than a chunk. */
static int files_to_open(void)
{
	struct rlimit rl;
	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rlim_t n = rl.rlim_cur > 200 ? rl.rlim_cur - 100 : 0;
	return n > NFILES_MAX ? NFILES_MAX : (int)n;
}

TEST_CASE(slots_are_distinct_and_hold_the_open_descriptor)
{
	struct pc_cache *c = tu_cache_of(64ull << 20);
	static struct pc_file *h[NFILES_MAX];
	static bool seen[FILE_SLOTS];
	const int NFILES = files_to_open();
	if (NFILES <= (int)FILE_CHUNK)
		TEST_SKIP_UNSUPPORTED("RLIMIT_NOFILE leaves fewer descriptors than a chunk of the table");
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < NFILES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d", i);
		h[i] = tu_open_new(c, dir, name);
	}
	int distinct = 0, taken = 0, same_file = 0;
	for (int i = 0; i < NFILES; i++) {
		struct pc_mapping *m = h[i]->m;
		REQUIRE(m->slot < FILE_SLOTS);
		distinct += !seen[m->slot];
		seen[m->slot] = true;
		taken += slot_taken(c, m->slot);
		struct stat st;
		if (fstat(mproc(m)->fd, &st) == 0 && st.st_dev == m->dev && st.st_ino == m->ino)
			same_file++;
	}
	CHECK(distinct == NFILES);
	CHECK(taken == NFILES);
	CHECK(same_file == NFILES);
	for (int i = 0; i < NFILES; i++)
		REQUIRE(pc_close(h[i]) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

TEST_CASE(slot_is_freed_with_its_file)
{
	struct pc_cache *c = tu_cache_of(16ull << 20);
	struct pc_file *h = tu_open_new(c, dir, "gone");
	struct pc_mapping *m = h->m;
	uint32_t slot = m->slot;
	struct pc_file_procs *procs = m->procs;
	REQUIRE(pc_pwrite(h, "data", 4, 0, 0) == 4);
	REQUIRE(slot_taken(c, slot));
	REQUIRE(pc_close(h) == 0);
	char path[4200];
	test_path(path, sizeof(path), dir, "gone");
	REQUIRE(unlink(path) == 0);
	/* The flusher's rounds sweep closed files that were unlinked. */
	CHECK(TU_POLL(!slot_taken(c, slot), 10000));
	struct pc_mapping_proc *e = &procs->chunk[slot / FILE_CHUNK][slot % FILE_CHUNK];
	CHECK(e->fd == -1 && e->old_fd == -1);
	struct pc_file *h2 = tu_open_new(c, dir, "next");
	CHECK(slot_taken(c, h2->m->slot));
	CHECK(mproc(h2->m)->fd >= 0);
	REQUIRE(pc_close(h2) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

static bool in_segment(struct pc_cache *c, const void *p)
{
	const struct pc_segment *seg = cache_proc(c)->seg;
	uintptr_t base = (uintptr_t)segment_base(seg);
	return (uintptr_t)p >= base && (uintptr_t)p < base + segment_size(seg);
}

TEST_CASE(domain_is_shared_and_its_threads_are_the_process_s)
{
	struct pc_config cfg = tu_config(16ull << 20);
	cfg.writeback_threads = 2;
	struct pc_cache *c = tu_cache_new(&cfg);
	struct pc_file *a = tu_open_new(c, dir, "a");
	struct pc_file *b = tu_open_new(c, dir, "b");
	struct pc_domain *d = a->m->dom;
	CHECK(b->m->dom == d);
	CHECK(in_segment(c, d));
	CHECK(in_segment(c, a->m));
	CHECK(d->index < PC_MAX_DOMAINS);
	CHECK(d->procs == cache_proc(c)->domains);
	struct pc_domain_proc *dp = dproc(d);
	CHECK((void *)dp >= (void *)cache_proc(c) && (void *)dp < (void *)c); /* the window */
	CHECK(dp->ioq != NULL);
	CHECK(dp->nthreads == 2);
	CHECK(!dp->stop);
	/* The flushers run: a write left alone is written back by them. */
	REQUIRE(pc_pwrite(a, "flushed", 7, 0, 0) == 7);
	REQUIRE(pc_flush(a, 0) == 0);
	CHECK(TU_POLL(tu_stats(c).dirty_bytes == 0, 10000));
	REQUIRE(pc_close(a) == 0);
	REQUIRE(pc_close(b) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

#define FAILS_EPERM(expr) ((errno = 0, (expr) == -1) && errno == EPERM)

TEST_CASE(fork_child_handles_refused_without_the_cache)
{
	struct pc_cache *c = tu_cache_of(16ull << 20);
	struct pc_file *h = tu_open_new(c, dir, "forked");
	char buf[4096];
	memset(buf, 'f', sizeof(buf));
	REQUIRE(pc_pwrite(h, buf, sizeof(buf), 0, 0) == (ssize_t)sizeof(buf));
	struct pc_span sp;
	REQUIRE(pc_read_begin(h, 0, 100, 0, &sp) == 100);
	pid_t pid = tu_fork(30);
	if (pid == 0) {
		/* Nothing of the cache is left here: the segment is not
		 * inherited, and now its window is gone too. */
		if (munmap(cache_proc(c), CACHE_PROC_BYTES) != 0)
			_exit(2);
		int bad = 0;
		bad += !FAILS_EPERM(pc_pread(h, buf, sizeof(buf), 0, 0));
		bad += !FAILS_EPERM(pc_pwrite(h, buf, sizeof(buf), 0, 0));
		bad += !FAILS_EPERM(pc_fsync(h));
		bad += !FAILS_EPERM(pc_ftruncate(h, 0));
		bad += !FAILS_EPERM(pc_lseek(h, 0, SEEK_END));
		struct pc_stats st;
		memset(&st, 0xff, sizeof(st));
		pc_file_stats(h, &st);
		bad += st.dirty_bytes != 0;
		pc_read_end(&sp);
		bad += pc_close(h) != 0;
		/* The cache's own calls ask the process's list of segments. */
		memset(&st, 0xff, sizeof(st));
		pc_cache_stats(c, &st);
		bad += st.cached_bytes != 0;
		struct pc_config cfg;
		bad += !FAILS_EPERM(pc_cache_config(c, &cfg));
		errno = 0;
		bad += pc_open(c, "x", O_RDONLY, 0) != NULL || errno != EPERM;
		bad += pc_fault_count(c, 1) != 0;
		struct pc_file_info info;
		bad += !FAILS_EPERM(pc_cache_file_info(c, 0, 0, &info));
		_exit(bad ? 3 : 0);
	}
	CHECK(tu_wait_child(pid, 40) == 0);
	pc_read_end(&sp);
	REQUIRE(pc_close(h) == 0);
	REQUIRE(pc_cache_destroy(c) == 0);
}

