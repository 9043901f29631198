/*
 * block_state_util.h - what test_block_state_dirty.c and
 * test_block_state_uptodate.c share: a file in a small cache of a given
 * block size, real folios of it to drive the block-state calls of
 * src/mem/block_state.c on, the table of folio shapes every folio rule runs
 * on, and comparisons of the per-block bits.
 *
 * The folios are taken with mapping_get_folio(GF_CREATE | GF_LOCK), so the
 * folio lock is held as the block-state calls require.  Such folios are
 * never accounted as dirty nor tagged, so each case clears and removes its
 * folio itself (put_folio) before the cache is destroyed.
 *
 * The shapes:
 *   - 512-byte blocks in a 4 KiB folio       (8 blocks, inline bitmaps)
 *   - 4096-byte blocks in a 32 KiB folio     (8 blocks, inline bitmaps)
 *   - 4096-byte blocks in a 256 KiB folio    (64 blocks: inline, full word)
 *   - 512-byte blocks in a 64 KiB folio      (128 blocks: out-of-line)
 *   - 512-byte blocks in a 256 KiB folio     (512 blocks: out-of-line)
 * so that "a folio with more than 64 blocks behaves the same" is every rule
 * again on the out-of-line bitmaps, with the block ranges chosen to
 * straddle the 64-bit word boundaries there.
 */
#ifndef PC_TEST_BLOCK_STATE_UTIL_H
#define PC_TEST_BLOCK_STATE_UTIL_H

#include "testutil.h"

#include "api/internal.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

/* The file's scratch directory (block_state_open_shapes makes it). */
static const char *dir;

/* A file of block size bs, opened through pc_open in a cache of its own. */
struct env {
	struct pc_cache *c;
	struct pc_file *h;
	struct pc_mapping *m;
	size_t bs;
	char path[4300];
	uint64_t next_pos; /* fresh, 1 MiB-aligned regions for the folios */
};

/* A new empty file `name` in a 4 MiB cache of block size bs, with folios
 * up to 256 KiB (the largest shape). */
static inline void env_open(struct env *e, size_t bs, const char *name)
{
	struct pc_config cfg = tu_config(4 * MiB);
	cfg.max_folio_size = 256 * KiB;
	cfg.block_size = bs;
	e->c = tu_cache_new(&cfg);
	test_path(e->path, sizeof(e->path), dir, name);
	e->h = pc_open(e->c, e->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(e->h);
	e->m = e->h->m;
	REQUIRE(e->m->block_size == bs);
	e->bs = bs;
	e->next_pos = 0;
}

static inline void env_close(struct env *e)
{
	CHECK(pc_close(e->h) == 0);
	CHECK(pc_cache_destroy(e->c) == 0);
	unlink(e->path);
}

/* A new locked folio of exactly `order` in a fresh region of the file. */
static inline struct pc_folio *new_folio(struct env *e, unsigned order)
{
	uint64_t pos = e->next_pos;
	e->next_pos += MiB;
	bool created = false;
	struct pc_folio *f = mapping_get_folio(e->m, pos, order, GF_CREATE | GF_LOCK, &created);
	REQUIRE(!IS_ERR_FOLIO(f) && f);
	REQUIRE(created);
	REQUIRE(f->order == order);
	REQUIRE(folio_pos(f) == pos);
	REQUIRE(folio_test(f, PF_LOCKED));
	REQUIRE(!folio_test(f, PF_UPTODATE | PF_DIRTY));
	return f;
}

/* Forget the folio: clean (it was never accounted), out of the index, freed. */
static inline void put_folio(struct env *e, struct pc_folio *f)
{
	bs_invalidate_blocks(e->m, f, 0, folio_size(f), false);
	folio_clear(f, PF_DIRTY);
	mapping_remove_folio(e->m, f);
	folio_unlock(f);
	folio_put(e->c, f);
}

/* ------------------------------------------------------ the folio shapes */

/* A folio shape to run every rule on. */
struct shape {
	struct env *e;
	unsigned order;
	const char *name;
};

/* The two files the shapes' folios come from, open from the fixture's
 * setup to its teardown. */
static struct env env512, env4k;

static const struct shape shapes[] = {
	{ &env512, 0, "512 B blocks, 4 KiB folio (8 blocks)" },
	{ &env4k, 3, "4 KiB blocks, 32 KiB folio (8 blocks)" },
	{ &env4k, 6, "4 KiB blocks, 256 KiB folio (64 blocks)" },
	{ &env512, 4, "512 B blocks, 64 KiB folio (128 blocks, out of line)" },
	{ &env512, 6, "512 B blocks, 256 KiB folio (512 blocks, out of line)" },
};

/* Fixture setup: the scratch directory `name` and the shapes' files. */
static inline void block_state_open_shapes(const char *name)
{
	dir = test_dir(name);
	env_open(&env512, 512, "bs512");
	env_open(&env4k, 4096, "bs4096");
}

/* Fixture teardown. */
static inline void block_state_close_shapes(void)
{
	env_close(&env512);
	env_close(&env4k);
	test_rmdir(dir);
}

/* Run a rule on every shape, saying how each went. */
static inline void for_each_shape(void (*rule)(const struct shape *))
{
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		unsigned before = tu_failed;
		rule(&shapes[i]);
		printf("  %s: %s\n", shapes[i].name, tu_failed == before ? "ok" : "FAILED");
	}
}

/* The block the rules work around: straddling a bitmap word boundary when
 * there is one (blocks 63, 64, 65, ...), else block 1. */
static inline unsigned pivot(unsigned n)
{
	return n > 64 ? 63 : 1;
}

/* ------------------------------------------------------ the block bits */

/* Compare the dirty or uptodate state of every block with want[] (one
 * entry per block); report the first difference, return how many differ. */
enum { ST_DIRTY, ST_UPTODATE };
static inline unsigned block_mismatches(struct env *e, struct pc_folio *f, int what, const bool *want,
					const char *label, int line)
{
	unsigned n = bs_nblocks(e->m, f), bad = 0;
	for (unsigned b = 0; b < n; b++) {
		bool got = what == ST_DIRTY ? bs_block_dirty(e->m, f, b) : bs_block_uptodate(e->m, f, b);
		if (got != want[b]) {
			if (!bad)
				fprintf(stderr, "line %d: %s: block %u of %u is %s%s, expected %s\n", line, label, b, n,
					got ? "" : "not ", what == ST_DIRTY ? "dirty" : "uptodate",
					want[b] ? "set" : "clear");
			bad++;
		}
	}
	return bad;
}
#define CHECK_DIRTY(e, f, want, label) CHECK(block_mismatches(e, f, ST_DIRTY, want, label, __LINE__) == 0)
#define CHECK_UPTODATE(e, f, want, label) CHECK(block_mismatches(e, f, ST_UPTODATE, want, label, __LINE__) == 0)

static inline void set_all(bool *v, unsigned n, bool x)
{
	for (unsigned i = 0; i < n; i++)
		v[i] = x;
}

static inline bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

#endif
