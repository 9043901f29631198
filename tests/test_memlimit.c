/*
 * test_memlimit.c - folio memory never exceeds memory_limit, and dirty data
 * is written back, never dropped, under a working set 4x the limit.
 *
 * A cache of 4 MiB (largest folio 64 KiB) serves a 16 MiB file: sequential
 * writes of all of it, then random reads and writes of random sizes over
 * it, then a sequential read of all of it.  Every read is compared with an
 * in-memory model of the file, and after every operation pc_cache_stats
 * must show cached_bytes <= memory_limit and at least one folio (the
 * largest cached_bytes seen is printed).  At the end evictions must have
 * happened, and after pc_close and pc_cache_destroy the backing file, read
 * with plain O_DIRECT, must equal the model byte for byte.
 *
 * Then the metadata claim of the header: a folio descriptor is 64 bytes,
 * and the descriptors plus the index nodes of a file cached in 4 KiB folios
 * cost at most 2 % of the cached bytes, by the formula (64 bytes plus one
 * 64-slot index node per 64 pages, plus the nodes above) and as measured
 * (the radix tree's node counter, rt_test_nodes).
 *
 * Then the arena itself (arena.c): fresh memory is handed out from the
 * arena's start up, the order in which the background thread faults it
 * in, memory freed is reused first, and every page of an arena of any
 * size can be handed out once and merged back whole.
 *
 * And the memory the machine can back (pagecache.h, memory_limit): a
 * memory_limit above the machine's memory, or above what it has available
 * now, fails with ENOMEM, lazy or not; a sane one works; a second cache
 * that would need memory a first one has yet to take fails until the first
 * is destroyed; RLIMIT_AS and RLIMIT_DATA (in a child) make a cache that
 * does not fit under them fail with ENOMEM.
 *
 * PC_SEED replays the random part.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"

#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

#define MEM_LIMIT (4 * MiB)
#define FILE_SIZE (16 * MiB)
#define RANDOM_OPS 10000
#define MAX_RANDOM_LEN (192 * KiB)

/* radix.c's node counter (a test hook). */
extern _Atomic long rt_test_nodes;

/* tu_fork() (the children under an rlimit) wants the exit guard in place
 * before the first cache. */
static const char *dir;

static void memlimit_setup(void)
{
	tu_exit_guard();
	dir = test_dir("memlimit");
}

static void memlimit_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(memlimit_setup, memlimit_teardown)

/* The working set's state. */
static uint8_t *model;       /* what the file must hold */
static uint8_t *rdbuf;
static uint64_t rng;
static uint64_t max_cached, checks;
static unsigned limit_failures;

static void check_memory(struct pc_cache *c, const char *what, uint64_t op)
{
	struct pc_stats s;
	pc_cache_stats(c, &s);
	checks++;
	if (s.cached_bytes > max_cached)
		max_cached = s.cached_bytes;
	if (s.cached_bytes > MEM_LIMIT || s.folios == 0) {
		if (limit_failures++ < 5)
			fprintf(stderr, "%s op %llu: cached_bytes %llu (limit %llu), folios %llu\n", what,
				(unsigned long long)op, (unsigned long long)s.cached_bytes,
				(unsigned long long)MEM_LIMIT, (unsigned long long)s.folios);
	}
	CHECK(s.cached_bytes <= MEM_LIMIT);
	CHECK(s.folios > 0);
}

static void random_bytes(uint8_t *p, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t x = tu_rand(&rng);
		memcpy(p + i, &x, 8);
	}
	uint64_t x = tu_rand(&rng);
	for (; i < n; i++, x >>= 8)
		p[i] = (uint8_t)x;
}

static void verify_read(struct pc_file *h, uint64_t off, size_t len, const char *what, uint64_t op)
{
	memset(rdbuf, 0xa5, len);
	ssize_t r = pc_pread(h, rdbuf, len, (off_t)off, 0);
	CHECK(r == (ssize_t)len);
	if (r == (ssize_t)len && memcmp(rdbuf, model + off, len) != 0) {
		size_t i = 0;
		while (rdbuf[i] == model[off + i])
			i++;
		fprintf(stderr, "%s op %llu: read [%llu, +%zu) differs at byte %llu: got %02x, expected %02x\n",
			what, (unsigned long long)op, (unsigned long long)off, len,
			(unsigned long long)(off + i), rdbuf[i], model[off + i]);
		CHECK(!"read data matches the model");
	}
}

TEST_CASE(working_set_4x_within_limit_nothing_lost)
{
	rng = test_seed("test_memlimit", 0x6d656d6c696d6974ull);
	model = malloc(FILE_SIZE);
	rdbuf = malloc(FILE_SIZE < MiB ? FILE_SIZE : MiB);
	REQUIRE(model && rdbuf);
	char path[4300];
	test_path(path, sizeof(path), dir, "ws");
	struct pc_config cfg = tu_config(MEM_LIMIT);
	cfg.max_folio_size = 64 * KiB;
	struct pc_cache *c = tu_cache_new(&cfg);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	uint8_t *wbuf = malloc(MAX_RANDOM_LEN);
	REQUIRE(wbuf);
	uint64_t op = 0;

	/* Sequential writes of the whole file, 64 KiB each. */
	for (uint64_t off = 0; off < FILE_SIZE; off += 64 * KiB, op++) {
		random_bytes(model + off, 64 * KiB);
		CHECK(pc_pwrite(h, model + off, 64 * KiB, (off_t)off, 0) == (ssize_t)(64 * KiB));
		check_memory(c, "sequential write", op);
	}
	CHECK(pc_size(h) == (off_t)FILE_SIZE);

	/* Random reads and writes of 1 byte to 192 KiB over the whole file. */
	for (unsigned i = 0; i < RANDOM_OPS; i++, op++) {
		uint64_t r = tu_rand(&rng);
		size_t len;
		switch (r % 4) {
		case 0: len = 1 + (size_t)(tu_rand(&rng) % 512); break;
		case 1: len = 1 + (size_t)(tu_rand(&rng) % (8 * KiB)); break;
		case 2: len = 4 * KiB * (1 + (size_t)(tu_rand(&rng) % 16)); break;
		default: len = 1 + (size_t)(tu_rand(&rng) % MAX_RANDOM_LEN); break;
		}
		uint64_t off = tu_rand(&rng) % (FILE_SIZE - len + 1);
		if ((r >> 8) % 4 == 0)
			off &= ~(4 * KiB - 1); /* some aligned */
		if ((r >> 16) % 2) {
			random_bytes(wbuf, len);
			memcpy(model + off, wbuf, len);
			CHECK(pc_pwrite(h, wbuf, len, (off_t)off, 0) == (ssize_t)len);
			check_memory(c, "random write", op);
		} else {
			verify_read(h, off, len, "random read", op);
			check_memory(c, "random read", op);
		}
	}

	/* A sequential read of everything (read-ahead under pressure). */
	for (uint64_t off = 0; off < FILE_SIZE; off += MiB, op++) {
		verify_read(h, off, MiB, "sequential read", op);
		check_memory(c, "sequential read", op);
	}

	struct pc_stats s;
	pc_cache_stats(c, &s);
	printf("memlimit: %llu checks, max cached_bytes %llu of %llu (%.1f %%), evictions %llu, "
	       "device writes %llu MiB in %llu I/Os, reads %llu MiB, throttle waits %llu\n",
	       (unsigned long long)checks, (unsigned long long)max_cached, (unsigned long long)MEM_LIMIT,
	       100.0 * (double)max_cached / (double)MEM_LIMIT, (unsigned long long)s.evictions,
	       (unsigned long long)(s.dev_write_bytes / MiB), (unsigned long long)s.dev_write_ios,
	       (unsigned long long)(s.dev_read_bytes / MiB), (unsigned long long)s.throttle_waits);
	CHECK(max_cached <= MEM_LIMIT);
	CHECK(s.evictions > 0);
	/* The cache was used, not bypassed. */
	CHECK(max_cached >= MEM_LIMIT / 2);

	CHECK(pc_fsync(h) == 0);
	pc_cache_stats(c, &s);
	CHECK(s.dirty_bytes == 0);
	CHECK(s.writeback_bytes == 0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);

	/* Nothing dirty was dropped: the device holds the model. */
	int fd = open(path, O_RDONLY | O_DIRECT);
	REQUIRE(fd >= 0);
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0);
	CHECK(st.st_size == (off_t)FILE_SIZE);
	uint8_t *dbuf;
	REQUIRE(posix_memalign((void **)&dbuf, 4096, MiB) == 0);
	unsigned bad = 0;
	for (uint64_t off = 0; off < FILE_SIZE; off += MiB) {
		ssize_t r = pread(fd, dbuf, MiB, (off_t)off);
		CHECK(r == (ssize_t)MiB);
		if (r == (ssize_t)MiB && memcmp(dbuf, model + off, MiB) != 0) {
			size_t i = 0;
			while (dbuf[i] == model[off + i])
				i++;
			if (bad++ < 5)
				fprintf(stderr, "backing file differs from the model at byte %llu\n",
					(unsigned long long)(off + i));
		}
	}
	CHECK(bad == 0);
	close(fd);
	free(dbuf);
	free(wbuf);
	free(model);
	free(rdbuf);
	unlink(path);
}

/* --------------------------------------------------------------- metadata */

TEST_CASE(folio_metadata_within_2_percent)
{
	/* The descriptor. */
	CHECK(sizeof(struct pc_folio) == 64);
	printf("metadata: sizeof(struct pc_folio) %zu, sizeof(struct rt_node) %zu\n", sizeof(struct pc_folio),
	       sizeof(struct rt_node));

	/* By the formula: per 4 KiB page one descriptor, 1/64 of a leaf
	 * node, and the interior nodes above (1/64 of that again, and so
	 * on: a factor 64/63). */
	double per_page = (double)sizeof(struct pc_folio) + (double)sizeof(struct rt_node) / RT_SLOTS * 64.0 / 63.0;
	double pct = 100.0 * per_page / PC_PAGE_SIZE;
	printf("metadata: per 4 KiB folio %.1f bytes = %.2f %% (formula)\n", per_page, pct);
	CHECK(pct <= 2.0);

	/* The descriptor table of the whole arena. */
	struct pc_config cfg = tu_config(MEM_LIMIT);
	cfg.max_folio_size = 64 * KiB;
	cfg.block_size = 4096;
	struct pc_cache *c = tu_cache_new(&cfg);
	CHECK((uint64_t)c->npages * sizeof(struct pc_folio) * 50 <= c->arena_bytes);

	/* Measured: every 4 KiB page of 3 MiB written in a scrambled order,
	 * one 4 KiB folio each (no eviction: it fits in the limit). */
	char path[4300];
	test_path(path, sizeof(path), dir, "meta");
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	const unsigned pages = 768;
	long nodes0 = atomic_load(&rt_test_nodes);
	uint8_t page[4096];
	memset(page, 0x5a, sizeof(page));
	for (unsigned i = 0; i < pages; i++) {
		unsigned p = (i * 337u) % pages; /* 337 is prime to 768: a permutation */
		CHECK(pc_pwrite(h, page, sizeof(page), (off_t)p * 4096, 0) == 4096);
	}
	long nodes = atomic_load(&rt_test_nodes) - nodes0;
	struct pc_stats s;
	pc_cache_stats(c, &s);
	CHECK(s.folios == pages);
	CHECK(s.cached_bytes == (uint64_t)pages * 4096);
	CHECK(s.evictions == 0);
	uint64_t meta = s.folios * sizeof(struct pc_folio) + (uint64_t)nodes * sizeof(struct rt_node);
	double mpct = s.cached_bytes ? 100.0 * (double)meta / (double)s.cached_bytes : 100.0;
	printf("metadata: %llu folios of 4 KiB, %ld index nodes: %llu bytes = %.2f %% (measured)\n",
	       (unsigned long long)s.folios, nodes, (unsigned long long)meta, mpct);
	CHECK(nodes > 0);
	CHECK(mpct <= 2.0);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	unlink(path);
}

/* The scratch file "meta<i>". */
static void meta_file_path(char *path, size_t len, unsigned i)
{
	char name[32];
	snprintf(name, sizeof(name), "meta%u", i);
	test_path(path, len, dir, name);
}

/* pc_stats.meta_bytes counts the cache's own structures in its heap: the
 * descriptor table from the start, each file's mapping, the index nodes
 * a file's folios need. */
TEST_CASE(meta_bytes_counts_table_files_and_index)
{
	struct pc_config cfg = tu_config(MEM_LIMIT);
	cfg.max_folio_size = 64 * KiB;
	cfg.block_size = 4096;
	struct pc_cache *c = tu_cache_new(&cfg);
	struct pc_stats s0, s1, s2;
	pc_cache_stats(c, &s0);
	uint64_t table = (uint64_t)c->npages * sizeof(struct pc_folio);
	printf("meta_bytes: new cache %llu (descriptor table %llu)\n", (unsigned long long)s0.meta_bytes,
	       (unsigned long long)table);
	CHECK(s0.meta_bytes >= table);
	CHECK(s0.meta_bytes < table + c->arena_bytes / 16);

	enum { FILES = 64 };
	struct pc_file *h[FILES];
	for (unsigned i = 0; i < FILES; i++) {
		char path[4300];
		meta_file_path(path, sizeof(path), i);
		h[i] = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		REQUIRE(h[i]);
	}
	pc_cache_stats(c, &s1);
	printf("meta_bytes: %u files open %llu\n", (unsigned)FILES, (unsigned long long)s1.meta_bytes);
	CHECK(s1.meta_bytes >= s0.meta_bytes + FILES * sizeof(struct pc_mapping));

	const unsigned pages = 768;
	long nodes0 = atomic_load(&rt_test_nodes);
	uint8_t page[4096];
	memset(page, 0x5a, sizeof(page));
	for (unsigned i = 0; i < pages; i++) {
		unsigned p = (i * 337u) % pages; /* a permutation: 4 KiB folios */
		CHECK(pc_pwrite(h[0], page, sizeof(page), (off_t)p * 4096, 0) == 4096);
	}
	long nodes = atomic_load(&rt_test_nodes) - nodes0;
	pc_cache_stats(c, &s2);
	printf("meta_bytes: after %u folios (%ld index nodes) %llu\n", pages, nodes,
	       (unsigned long long)s2.meta_bytes);
	CHECK(nodes > 0);
	CHECK(s2.meta_bytes >= s1.meta_bytes + (uint64_t)nodes * sizeof(struct rt_node));
	for (unsigned i = 0; i < FILES; i++)
		CHECK(pc_close(h[i]) == 0);
	CHECK(pc_cache_destroy(c) == 0);
	for (unsigned i = 0; i < FILES; i++) {
		char path[4300];
		meta_file_path(path, sizeof(path), i);
		unlink(path);
	}
}

/* ------------------------------------------------------------- the arena */

/* A cache of `bytes` (folios up to max_folio), or NULL with errno:
 * whether it can be made is what these cases check. */
static struct pc_cache *try_cache(uint64_t bytes, size_t max_folio, unsigned flags)
{
	struct pc_config cfg = tu_config((size_t)bytes);
	cfg.max_folio_size = max_folio;
	cfg.flags = flags;
	return pc_cache_new(&cfg);
}

/* Fresh blocks come from the start up; a freed one is reused first. */
TEST_CASE(arena_fresh_from_start_freed_reused_first)
{
	struct pc_cache *c = try_cache(4 * MiB, 64 * KiB, PC_CFG_LAZY_MEMORY);
	REQUIRE(c);
	CHECK(arena_used_pages(c) == 0);
	uint32_t a = arena_alloc(c, 4), b = arena_alloc(c, 4);
	uint32_t p0 = arena_alloc(c, 0), p1 = arena_alloc(c, 0), q = arena_alloc(c, 1);
	CHECK(a == 0 && b == 16);
	CHECK(p0 == 32 && p1 == 33 && q == 34);
	CHECK(arena_used_pages(c) == 48);
	arena_free(c, a, 4);
	CHECK(arena_alloc(c, 4) == a);
	CHECK(arena_used_pages(c) == 48);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Every page of an arena that is no multiple of the largest folio is
 * handed out exactly once; freed, they merge back into largest blocks. */
TEST_CASE(arena_every_page_once_merged_back)
{
	const uint64_t bytes = 4 * MiB + 12 * KiB; /* a 3-page tail */
	struct pc_cache *c = try_cache(bytes, 64 * KiB, PC_CFG_LAZY_MEMORY);
	REQUIRE(c);
	uint32_t n = c->npages, got = 0, pfn;
	uint8_t *seen = calloc(n, 1);
	REQUIRE(seen);
	while ((pfn = arena_alloc(c, 0)) != PC_NONE) {
		CHECK(pfn < n && !seen[pfn]);
		if (pfn < n)
			seen[pfn] = 1;
		got++;
	}
	CHECK(got == n);
	CHECK(arena_used_pages(c) == n);
	for (pfn = 0; pfn < n; pfn++)
		arena_free(c, pfn, 0);
	unsigned big = 0;
	while (arena_alloc(c, 4) != PC_NONE)
		big++;
	CHECK(big == n / 16);
	printf("arena: %u pages handed out once each, merged back into %u blocks of 64 KiB\n", got, big);
	free(seen);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------- the machine's memory */

static bool fails_enomem(uint64_t bytes, unsigned flags)
{
	errno = 0;
	struct pc_cache *c = try_cache(bytes, 0, flags);
	if (c)
		pc_cache_destroy(c);
	return !c && errno == ENOMEM;
}

TEST_CASE(limit_beyond_machine_memory_fails)
{
	uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	CHECK(fails_enomem(phys + GiB, 0));
	CHECK(fails_enomem(phys + GiB, PC_CFG_LAZY_MEMORY));
	uint64_t avail = sysmem_available();
	printf("machine memory: %llu MiB, available now %llu MiB\n", (unsigned long long)(phys / MiB),
	       avail == UINT64_MAX ? 0ull : (unsigned long long)(avail / MiB));
	if (avail != UINT64_MAX)
		CHECK(fails_enomem(avail + avail / 4, PC_CFG_LAZY_MEMORY));
	struct pc_cache *c = try_cache(64 * MiB, 0, 0);
	CHECK(c != NULL);
	if (c)
		CHECK(pc_cache_destroy(c) == 0);
}

/* A cache counts against later ones by what it has yet to take: two that
 * fit only one at a time (lazy: neither takes its memory meanwhile). */
TEST_CASE(caches_share_available_memory)
{
	uint64_t avail = sysmem_available();
	if (avail == UINT64_MAX)
		TEST_SKIP("the available memory is not known");
	uint64_t big = tu_round_down(avail / 5 * 3, MiB);
	struct pc_cache *a = try_cache(big, 0, PC_CFG_LAZY_MEMORY);
	CHECK(a != NULL);
	CHECK(fails_enomem(big, PC_CFG_LAZY_MEMORY));
	if (a)
		CHECK(pc_cache_destroy(a) == 0);
	struct pc_cache *b = try_cache(big, 0, PC_CFG_LAZY_MEMORY);
	CHECK(b != NULL);
	if (b)
		CHECK(pc_cache_destroy(b) == 0);
}

/* A "Key:  N kB" line of /proc/self/status, in bytes. */
static uint64_t status_bytes(const char *key)
{
	FILE *fp = fopen("/proc/self/status", "re");
	REQUIRE(fp);
	char line[256];
	unsigned long long kb = 0;
	size_t klen = strlen(key);
	while (fgets(line, sizeof(line), fp))
		if (strncmp(line, key, klen) == 0)
			kb = strtoull(line + klen, NULL, 10);
	fclose(fp);
	return kb * KiB;
}

/* In a child: `resource` set to what the process maps now (`key` of
 * /proc/self/status) plus 256 MiB; a 1 GiB cache must fail with ENOMEM
 * and a 16 MiB one work.  Exit status: 0, or which step failed.  The
 * child starts the threads of its caches: forked alone (testutil.h). */
static void under_rlimit(int resource, const char *key)
{
	pid_t pid = tu_fork_alone(120);
	if (pid == 0) {
		uint64_t lim = status_bytes(key) + 256 * MiB;
		struct rlimit rl = { lim, lim };
		if (setrlimit(resource, &rl) != 0)
			_exit(10);
		if (!fails_enomem(GiB, PC_CFG_LAZY_MEMORY))
			_exit(11);
		if (!fails_enomem(GiB, 0))
			_exit(12);
		struct pc_cache *c = try_cache(16 * MiB, 0, 0);
		if (!c)
			_exit(13);
		_exit(pc_cache_destroy(c) == 0 ? 0 : 14);
	}
	int status = tu_wait_child(pid, 125);
	if (status)
		fprintf(stderr, "under %s: child exit status %d\n", key, status);
	CHECK(status == 0);
}

TEST_CASE(cache_fails_under_rlimit_as)
{
	under_rlimit(RLIMIT_AS, "VmSize:");
}

TEST_CASE(cache_fails_under_rlimit_data)
{
	under_rlimit(RLIMIT_DATA, "VmData:");
}
