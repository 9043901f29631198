/*
 * uncached_util.h - what the tests of uncached (PC_DONTCACHE) I/O share
 * (test_uncached_*.c): their cache configuration and a look at single
 * folios through mapping_lookup() and the folio flags.
 */
#ifndef PC_UNCACHED_UTIL_H
#define PC_UNCACHED_UTIL_H

#include "testutil.h"

#include "api/internal.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define NOT_CACHED 0xffffffffu

/*
 * 64 MiB, blocks of bs, and nothing written back by age (dirty data and
 * edges expire after 60 s): only what a test asks for, or the flusher's
 * uncached writeback, writes.  Close-to-open: the tests check what close
 * leaves cached and on the device at once (the default close leaves
 * write-back to the flusher).
 */
static inline struct pc_config no_aging_config(size_t bs)
{
	struct pc_config cfg = tu_config(64 * MiB);
	cfg.block_size = bs;
	cfg.dirty_expire_ms = 60000;
	cfg.edge_expire_ms = 60000;
	cfg.flags |= PC_CFG_CLOSE_TO_OPEN;
	return cfg;
}

/* A new cache of no_aging_config(bs) unchanged. */
static inline struct pc_cache *no_aging_cache(size_t bs)
{
	struct pc_config cfg = no_aging_config(bs);
	return tu_cache_new(&cfg);
}

/* no_aging_config without read-ahead: a buffered read caches only what
 * it asks for. */
static inline struct pc_cache *cache_without_readahead(void)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.readahead_max_bytes = 0;
	return tu_cache_new(&cfg);
}

/* Flags of the folio holding byte pos, or NOT_CACHED. */
static inline uint32_t fstate(struct pc_file *h, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(h->m, pos);
	if (!f)
		return NOT_CACHED;
	uint32_t fl = atomic_load(&f->flags);
	reclaim_release_folio(h->m->c, f); /* a user's: may be the last of a drop-behind folio */
	return fl;
}

static inline bool is_cached(struct pc_file *h, uint64_t pos)
{
	return fstate(h, pos) != NOT_CACHED;
}

/* A kept edge: cached, PF_EDGE, not drop-behind. */
static inline bool is_edge(struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	return fl != NOT_CACHED && (fl & PF_EDGE) && !(fl & PF_DROPBEHIND);
}

static inline void print_flags(const char *what, struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	if (fl == NOT_CACHED)
		printf("   %s: folio at %llu not cached\n", what, (unsigned long long)pos);
	else
		printf("   %s: folio at %llu flags 0x%x%s%s%s%s%s\n", what, (unsigned long long)pos, fl,
		       fl & PF_EDGE ? " EDGE" : "", fl & PF_DROPBEHIND ? " DROPBEHIND" : "",
		       fl & PF_DIRTY ? " DIRTY" : "", fl & PF_WRITEBACK ? " WRITEBACK" : "",
		       fl & PF_UPTODATE ? " UPTODATE" : "");
}

/* A kept edge after its neighbours' writeback: cached, PF_EDGE, neither
 * drop-behind nor under writeback (dirty, or clean if it was written). */
static inline bool is_kept_edge(struct pc_file *h, uint64_t pos)
{
	uint32_t fl = fstate(h, pos);
	bool ok = fl != NOT_CACHED && (fl & PF_EDGE) && (fl & PF_UPTODATE) && !(fl & (PF_DROPBEHIND | PF_WRITEBACK));
	if (!ok)
		print_flags("expected a kept edge", h, pos);
	return ok;
}

/* The backing file's first n bytes (a multiple of 4096) are expect[0, n). */
static inline bool disk_prefix_is(const char *path, const uint8_t *expect, size_t n)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return false;
	}
	uint8_t *buf = aligned_alloc(4096, n);
	REQUIRE(buf);
	ssize_t r = pread(fd, buf, n, 0);
	bool ok = r == (ssize_t)n && memcmp(buf, expect, n) == 0;
	if (!ok)
		fprintf(stderr, "   %s: first %zu bytes: read %zd, or wrong bytes\n", path, n, r);
	free(buf);
	close(fd);
	return ok;
}

/*
 * Wait, without fsync, until no drop-behind data is dirty and nothing is
 * under writeback.  no_aging_config sets dirty_expire_ms (and
 * edge_expire_ms) to 60 s, so only the flusher's uncached writeback (a
 * kick, or its round every 100 ms) can get there.  Kept edges are not
 * drop-behind: they may still be dirty (the flusher leaves them for the
 * neighbour that completes them).  5 s should do (TU_POLL).
 */
static inline bool wait_uncached_written(struct pc_cache *c)
{
	struct pc_stats s;
	if (TU_POLL((s = tu_stats(c), s.dirty_uncached_bytes == 0 && s.writeback_bytes == 0), 5000))
		return true;
	fprintf(stderr, "   uncached data not written without fsync: uncached dirty %llu, writeback %llu\n",
		(unsigned long long)s.dirty_uncached_bytes, (unsigned long long)s.writeback_bytes);
	return false;
}

/* A new empty file `name` in dir, open read-write; its path in path. */
static inline struct pc_file *open_new(struct pc_cache *c, const char *dir, const char *name, char *path,
				       size_t pathlen)
{
	test_path(path, pathlen, dir, name);
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(h);
	return h;
}

#endif
