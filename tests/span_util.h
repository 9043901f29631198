/*
 * span_util.h - what the zero-copy span tests (test_span_*.c) share: one
 * file in a cache of its own, written, dropped and read back, and a look
 * at its folios.
 *
 * Include it after the file's scratch directory is declared
 * (TEST_SCRATCH_DIR, or a fixture of the file's own setting `dir`): the
 * files are made there.
 */
#ifndef PC_SPAN_UTIL_H
#define PC_SPAN_UTIL_H

#include "testutil.h"

#include "api/internal.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* One file, in a cache of its own. */
struct env {
	char path[4300];
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m; /* h's: its folios' block state is looked at */
	size_t bs;
};

/* A fresh file in a fresh cache of cfg; the case is skipped when the file
 * system refuses cfg's block size. */
static inline void env_open_cfg(struct env *e, const char *name, const struct pc_config *cfg)
{
	memset(e, 0, sizeof(*e));
	e->c = tu_cache_new(cfg);
	test_path(e->path, sizeof(e->path), dir, name);
	e->h = pc_open(e->c, e->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!e->h && errno == EINVAL && cfg->block_size) {
		printf("  block size %zu refused here\n", cfg->block_size);
		CHECK(pc_cache_destroy(e->c) == 0);
		TEST_SKIP_UNSUPPORTED("the file system refuses this block size");
	}
	REQUIRE(e->h);
	e->m = e->h->m;
	e->bs = e->m->block_size;
}

/* The spans' configuration: block size bs, folios up to max_folio, and no
 * background I/O behind the checks. */
static inline struct pc_config span_config(size_t bs, size_t max_folio, size_t memory, unsigned flags)
{
	struct pc_config cfg = tu_config(memory);
	cfg.max_folio_size = max_folio;
	cfg.block_size = bs;
	cfg.readahead_max_bytes = 0; /* device reads are those a case causes */
	cfg.dirty_expire_ms = 60000; /* no write-back behind the checks */
	cfg.edge_expire_ms = 60000;
	cfg.flags = flags;
	return cfg;
}

static inline void env_open(struct env *e, const char *name, size_t bs, size_t max_folio, size_t memory,
			    unsigned flags)
{
	struct pc_config cfg = span_config(bs, max_folio, memory, flags);
	env_open_cfg(e, name, &cfg);
}

static inline void env_close(struct env *e)
{
	if (e->h)
		CHECK(pc_close(e->h) == 0);
	CHECK(pc_cache_destroy(e->c) == 0);
	unlink(e->path);
}

static inline struct pc_stats fstats(struct env *e)
{
	struct pc_stats s;
	pc_file_stats(e->h, &s);
	return s;
}

/* Pattern `seed` at [off, off + len) through the cache. */
static inline void put(struct env *e, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len);
	REQUIRE(b);
	tu_fill_pattern(b, len, seed, off);
	REQUIRE(pc_pwrite(e->h, b, len, (off_t)off, 0) == (ssize_t)len);
	free(b);
}

/* Written back and out of the cache: the next access reads the device. */
static inline void drop(struct env *e)
{
	CHECK(pc_fsync(e->h) == 0);
	CHECK(pc_fadvise(e->h, 0, 0, POSIX_FADV_DONTNEED) == 0);
}

/* pc_pread of [off, off + len) must return exactly expect[0, len). */
static inline bool reads_as(struct env *e, uint64_t off, size_t len, const uint8_t *expect)
{
	uint8_t *b = malloc(len);
	REQUIRE(b);
	ssize_t n = pc_pread(e->h, b, len, (off_t)off, 0);
	bool ok = n == (ssize_t)len && memcmp(b, expect, len) == 0;
	if (!ok) {
		size_t i = 0;
		while (n > 0 && i < (size_t)n && i < len && b[i] == expect[i])
			i++;
		fprintf(stderr, "   read at %llu: %zd bytes (expected %zu), first difference at +%zu\n",
			(unsigned long long)off, n, len, i);
	}
	free(b);
	return ok;
}

/* The size of the folio cached at pos; 0: none. */
static inline size_t folio_size_at(struct env *e, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(e->m, pos);
	if (!f)
		return 0;
	size_t sz = folio_size(f);
	folio_put(e->c, f);
	return sz;
}

/* Read [from, to) of the file through the cache, all of it (memory churn). */
static inline void read_through(struct env *e, uint64_t from, uint64_t to)
{
	uint8_t *b = malloc(256 * KiB);
	REQUIRE(b);
	for (uint64_t o = from; o < to; o += 256 * KiB)
		REQUIRE(pc_pread(e->h, b, tu_min_u64(256 * KiB, to - o), (off_t)o, 0) >= 0);
	free(b);
}

#endif
