/*
 * test_written.c - what the cache knows of the backing file's holes
 * (src/lib/written.c) and how far it allocates ahead (backing_extend).
 *
 * The range set, against a bitmap model (ranges_*): merging of touching and
 * overlapping ranges, the base below which nothing is known, truncation,
 * reset, and giving up (everything "ask the file system") past the range
 * limit; the array as the caller's memory (a full one asks for room,
 * handed none it gives up); then random operations compared with the
 * model.
 *
 * Through the API, with the count of lseek(SEEK_DATA) calls:
 *   - partial writes into blocks past the size at open that we never wrote
 *     ask no lseek and read nothing, even below the end of written data;
 *   - a block we wrote back, then dropped, is never taken for a hole: a
 *     partial write there keeps the rest of the block (read back whole);
 *   - after ftruncate shrinks the file, blocks past the new size are holes
 *     again (no lseek), and read as zeros;
 *   - a file changed by someone else while the cache had it closed is no
 *     longer trusted: the change is read and merged, not zeroed.
 *
 * Allocation ahead: a sparse write far past the end of a new file
 * does not allocate the gap (st_blocks stays small), while a file written
 * whole is allocated as written.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include "api/internal.h"
#include "lockcx_util.h"

extern _Atomic long backend_test_hole_queries;

TEST_SCRATCH_DIR("written")

/* ----------------------------------------- the range set, by a model */

#define DOMAIN 4096u /* model: one bit per byte of [0, DOMAIN) */

struct model {
	uint8_t written[DOMAIN];
	uint64_t base;
};

static bool model_known_hole(const struct model *md, uint64_t s, uint64_t e)
{
	if (s < md->base)
		return false;
	for (uint64_t i = s; i < e && i < DOMAIN; i++)
		if (md->written[i])
			return false;
	return true;
}

static void model_add(struct model *md, uint64_t s, uint64_t e)
{
	for (uint64_t i = s; i < e && i < DOMAIN; i++)
		md->written[i] = 1;
}

static void model_truncate(struct model *md, uint64_t size)
{
	if (md->base > size)
		md->base = size;
	for (uint64_t i = size; i < DOMAIN; i++)
		md->written[i] = 0;
}

/* The caller's part (mem/mapping.c, mapping_written_add: written.c
 * allocates nothing), from malloc. */
static void add(struct pc_written *w, uint64_t s, uint64_t e)
{
	size_t cap;
	while ((cap = written_add(w, s, e)) != 0) {
		struct pc_range *r = calloc(cap, sizeof(*r));
		REQUIRE(r);
		free(written_grow(w, r, cap));
	}
}

static void destroy(struct pc_written *w)
{
	free(written_destroy(w));
}

/* The set's ranges must be sorted, disjoint and not touching. */
static bool ranges_canonical(const struct pc_written *w)
{
	for (size_t i = 0; i < w->n; i++) {
		if (w->r[i].start >= w->r[i].end)
			return false;
		if (i && w->r[i - 1].end >= w->r[i].start)
			return false;
	}
	return true;
}

TEST_CASE(ranges_merge_truncate_and_base)
{
	struct pc_written w;
	written_init(&w, 100, test_lockcx());
	/* Below the base: unknown, whatever we add. */
	CHECK(!written_known_hole(&w, 0, 10));
	CHECK(!written_known_hole(&w, 90, 110));
	CHECK(written_known_hole(&w, 100, 200));
	add(&w, 50, 120); /* clipped to the base */
	CHECK(w.n == 1 && w.r[0].start == 100 && w.r[0].end == 120);
	CHECK(!written_known_hole(&w, 110, 111));
	CHECK(written_known_hole(&w, 120, 130));
	/* Touching ranges merge; a gap keeps them apart. */
	add(&w, 120, 130);
	CHECK(w.n == 1 && w.r[0].end == 130);
	add(&w, 200, 210);
	add(&w, 150, 160);
	CHECK(w.n == 3 && ranges_canonical(&w));
	CHECK(written_known_hole(&w, 130, 150));
	CHECK(!written_known_hole(&w, 140, 151));
	/* One range bridging all three. */
	add(&w, 125, 205);
	CHECK(w.n == 1 && w.r[0].start == 100 && w.r[0].end == 210);
	/* Truncate into the middle of a range, then below the base. */
	written_truncate(&w, 150);
	CHECK(w.n == 1 && w.r[0].end == 150);
	CHECK(written_known_hole(&w, 150, 300));
	written_truncate(&w, 40);
	CHECK(w.n == 0 && w.base_end == 40);
	CHECK(written_known_hole(&w, 40, 4096));
	/* Reset: nothing known below the new base. */
	add(&w, 1000, 2000);
	written_reset(&w, UINT64_MAX);
	CHECK(w.n == 0 && !written_known_hole(&w, 5000, 6000));
	destroy(&w);
}

/* Past the range limit the set gives up: everything up to the last range
 * becomes "ask the file system", never "hole". */
TEST_CASE(ranges_give_up_past_limit)
{
	struct pc_written w;
	written_init(&w, 0, test_lockcx());
	uint64_t i;
	for (i = 0; i < 65536; i++)
		add(&w, i * 16, i * 16 + 8);
	CHECK(w.n == 65536);
	CHECK(written_known_hole(&w, 8, 16));
	add(&w, i * 16, i * 16 + 8); /* one too many */
	CHECK(w.n == 0 && w.base_end == i * 16 + 8);
	CHECK(!written_known_hole(&w, 8, 16));
	CHECK(written_known_hole(&w, i * 16 + 8, i * 16 + 100));
	destroy(&w);
}

/* The array is the caller's: a range that needs a slot when there is none
 * is not recorded but asks for room (4 ranges, then twice the capacity);
 * handed none, everything below the range's end is "ask the file
 * system". */
TEST_CASE(ranges_ask_the_caller_for_room)
{
	struct pc_written w;
	written_init(&w, 0, test_lockcx());
	CHECK(written_add(&w, 10, 20) == 4 && w.n == 0 && written_known_hole(&w, 10, 20));
	struct pc_range *r = calloc(4, sizeof(*r));
	REQUIRE(r);
	CHECK(written_grow(&w, r, 4) == NULL && w.r == r && w.cap == 4);
	CHECK(written_add(&w, 10, 20) == 0 && w.n == 1);
	uint64_t i;
	for (i = 1; i < 4; i++)
		CHECK(written_add(&w, i * 100, i * 100 + 10) == 0);
	CHECK(w.n == 4);
	CHECK(written_add(&w, 310, 320) == 0 && w.n == 4); /* touches the last: merged */
	CHECK(written_add(&w, 7000, 7010) == 8 && w.n == 4 && written_known_hole(&w, 7000, 7010));
	/* Another caller's array, as large, came first: this one goes back. */
	struct pc_range *r2 = calloc(8, sizeof(*r2)), *r3 = calloc(8, sizeof(*r3));
	REQUIRE(r2 && r3);
	CHECK(written_grow(&w, r2, 8) == r && w.r == r2);
	free(r);
	CHECK(written_grow(&w, r3, 8) == r3 && w.r == r2);
	free(r3);
	CHECK(w.n == 4 && w.r[3].start == 300 && w.r[3].end == 320 && ranges_canonical(&w));
	CHECK(written_known_hole(&w, 20, 100) && !written_known_hole(&w, 15, 16));
	/* No memory: below the end, nothing is known; past it, still. */
	written_give_up(&w, 7010);
	CHECK(w.n == 0 && w.base_end == 7010);
	CHECK(!written_known_hole(&w, 20, 100) && written_known_hole(&w, 7010, 8000));
	destroy(&w);
}

TEST_CASE(ranges_match_bitmap_model)
{
	uint64_t seed = test_seed("test_written ranges", 0x5eed0001);
	static struct model md;
	struct pc_written w;
	unsigned bad = 0;
	for (int round = 0; round < 20; round++) {
		memset(&md, 0, sizeof(md));
		md.base = tu_rand(&seed) % 512;
		written_init(&w, md.base, test_lockcx());
		for (int op = 0; op < 2000; op++) {
			uint64_t s = tu_rand(&seed) % DOMAIN, len = 1 + tu_rand(&seed) % 64;
			uint64_t e = s + len;
			switch (tu_rand(&seed) % 10) {
			case 0:
				written_truncate(&w, s);
				model_truncate(&md, s);
				break;
			case 1: case 2: case 3: case 4:
				add(&w, s, e);
				model_add(&md, s < md.base ? md.base : s, e);
				break;
			default:
				if (written_known_hole(&w, s, e) != model_known_hole(&md, s, e) && bad++ < 5)
					fprintf(stderr, "round %d op %d: [%llu, %llu) hole %d, model %d\n", round, op,
						(unsigned long long)s, (unsigned long long)e,
						written_known_hole(&w, s, e), model_known_hole(&md, s, e));
				break;
			}
			if (!ranges_canonical(&w) && bad++ < 5)
				fprintf(stderr, "round %d op %d: ranges not canonical\n", round, op);
		}
		destroy(&w);
	}
	CHECK(bad == 0);
}

/* ------------------------------------ holes through the API (lseek) */

#define BS 4096u

/* A cache of BS-byte blocks whose pc_close writes the file back. */
static struct pc_cache *close_to_open_cache(void)
{
	struct pc_config cfg = tu_config(16u << 20);
	cfg.block_size = BS;
	/* Other writers write the file after our close: close-to-open (the
	 * default close leaves our data to the flusher, unsettled). */
	cfg.flags = PC_CFG_LAZY_MEMORY | PC_CFG_CLOSE_TO_OPEN;
	return tu_cache_new(&cfg);
}

/* A new cache and a new empty file `name` in dir (its path in path). */
static struct pc_file *open_fresh(const char *name, char *path, size_t n, struct pc_cache **c)
{
	test_path(path, n, dir, name);
	*c = close_to_open_cache();
	struct pc_file *f = pc_open(*c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(f);
	return f;
}

/* A block read back: src at [s, s+len), zeros elsewhere. */
static bool block_is_zeros_but(const uint8_t *got, unsigned s, unsigned len, const uint8_t *src)
{
	for (unsigned i = 0; i < BS; i++)
		if (got[i] != (i >= s && i < s + len ? src[i - s] : 0))
			return false;
	return true;
}

static long hole_queries(void)
{
	return atomic_load(&backend_test_hole_queries);
}

TEST_CASE(own_holes_ask_no_lseek)
{
	char path[4200];
	struct pc_cache *c;
	struct pc_file *f = open_fresh("holes", path, sizeof(path), &c);
	uint8_t buf[3 * BS], got[3 * BS];
	/* Data far out: data_end moves past everything below. */
	tu_fill_pattern(buf, BS, 1, 0);
	CHECK(pc_pwrite(f, buf, BS, 64 * BS, 0) == BS);
	CHECK(pc_fsync(f) == 0);
	struct pc_stats s0, s1;
	pc_cache_stats(c, &s0);
	long q0 = hole_queries();
	/* Partial writes into blocks we never wrote, below data_end. */
	tu_fill_pattern(buf, 3 * BS, 2, 0);
	CHECK(pc_pwrite(f, buf, 100, 3 * BS + 10, 0) == 100);
	CHECK(pc_pwrite(f, buf, BS + 300, 10 * BS + 500, PC_DONTCACHE) == BS + 300);
	CHECK(hole_queries() == q0);
	pc_cache_stats(c, &s1);
	CHECK(s1.dev_read_ios == s0.dev_read_ios);
	CHECK(s1.deferred_rmw == s0.deferred_rmw);
	/* And the rest of those blocks reads as zeros. */
	CHECK(pc_pread(f, got, BS, 3 * BS, 0) == BS);
	CHECK(block_is_zeros_but(got, 10, 100, buf));
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A block we wrote, then dropped from the cache, is data, not a hole. */
TEST_CASE(written_block_never_taken_for_hole)
{
	char path[4200];
	struct pc_cache *c;
	struct pc_file *f = open_fresh("kept", path, sizeof(path), &c);
	uint8_t a[2 * BS], b[200], want[2 * BS], got[2 * BS];
	tu_fill_pattern(a, sizeof(a), 3, 0);
	CHECK(pc_pwrite(f, a, sizeof(a), 8 * BS, PC_DONTCACHE) == (ssize_t)sizeof(a));
	tu_fill_pattern(a, BS, 4, 0);
	CHECK(pc_pwrite(f, a, BS, 40 * BS, 0) == BS); /* data_end further out */
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_fadvise(f, 0, 0, POSIX_FADV_DONTNEED) == 0);
	tu_fill_pattern(b, sizeof(b), 5, 0);
	/* Buffered (deferred merge) and DSYNC (read at once) partial writes. */
	CHECK(pc_pwrite(f, b, 100, 8 * BS + 1000, 0) == 100);
	CHECK(pc_pwrite(f, b + 100, 100, 9 * BS + 2000, PC_DSYNC) == 100);
	tu_fill_pattern(want, sizeof(want), 3, 0);
	memcpy(want + 1000, b, 100);
	memcpy(want + BS + 2000, b + 100, 100);
	CHECK(pc_pread(f, got, sizeof(got), 8 * BS, 0) == (ssize_t)sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
	/* And on the device after writeback. */
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_fadvise(f, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(pc_pread(f, got, sizeof(got), 8 * BS, 0) == (ssize_t)sizeof(got));
	CHECK(memcmp(got, want, sizeof(got)) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

TEST_CASE(truncate_makes_holes_again)
{
	char path[4200];
	struct pc_cache *c;
	struct pc_file *f = open_fresh("trunc", path, sizeof(path), &c);
	static uint8_t big[64 * BS];
	uint8_t got[BS];
	tu_fill_pattern(big, sizeof(big), 6, 0);
	CHECK(pc_pwrite(f, big, sizeof(big), 0, 0) == (ssize_t)sizeof(big));
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_ftruncate(f, 4 * BS) == 0);
	CHECK(pc_pwrite(f, big, BS, 100 * BS, 0) == BS); /* data_end past the cut */
	CHECK(pc_fsync(f) == 0);
	CHECK(pc_fadvise(f, 0, 0, POSIX_FADV_DONTNEED) == 0);
	long q0 = hole_queries();
	CHECK(pc_pwrite(f, big, 50, 20 * BS + 7, 0) == 50);
	CHECK(hole_queries() == q0);
	CHECK(pc_pread(f, got, BS, 20 * BS, 0) == BS);
	CHECK(block_is_zeros_but(got, 7, 50, big));
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Someone else wrote while we had the file closed: trust nothing. */
TEST_CASE(foreign_change_is_merged_not_zeroed)
{
	char path[4200];
	struct pc_cache *c;
	struct pc_file *f = open_fresh("foreign", path, sizeof(path), &c);
	uint8_t a[BS], other[BS], got[BS], want[BS];
	tu_fill_pattern(a, BS, 7, 0);
	CHECK(pc_pwrite(f, a, BS, 30 * BS, 0) == BS);
	CHECK(pc_close(f) == 0); /* the mapping stays cached */
	CHECK(tu_settled(c, path)); /* written and unlocked: others may write */
	/* Another writer fills block 12, a hole to us. */
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0);
	tu_fill_pattern(other, BS, 8, 0);
	CHECK(pwrite(fd, other, BS, 12 * BS) == BS);
	CHECK(close(fd) == 0);
	f = pc_open(c, path, O_RDWR, 0);
	REQUIRE(f);
	CHECK(pc_pwrite(f, a, 64, 12 * BS + 128, 0) == 64);
	memcpy(want, other, BS);
	memcpy(want + 128, a, 64);
	CHECK(pc_pread(f, got, BS, 12 * BS, 0) == BS);
	CHECK(memcmp(got, want, BS) == 0);
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* ------------------------------------------------ allocation ahead */

TEST_CASE(sparse_write_does_not_allocate_gap)
{
	char path[4200];
	struct pc_cache *c;
	struct pc_file *f = open_fresh("sparse", path, sizeof(path), &c);
	uint8_t a[BS];
	tu_fill_pattern(a, BS, 9, 0);
	CHECK(pc_pwrite(f, a, BS, 1ll << 30, 0) == BS);
	CHECK(pc_pwrite(f, a, 100, 2ll << 30, PC_DONTCACHE) == 100);
	CHECK(pc_fsync(f) == 0);
	struct stat st;
	CHECK(stat(path, &st) == 0);
	CHECK(st.st_size == (2ll << 30) + 100);
	CHECK((uint64_t)st.st_blocks * 512 <= (1u << 20)); /* not the 2 GiB gap */
	CHECK(pc_close(f) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
