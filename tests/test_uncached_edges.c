/*
 * test_uncached_edges.c - which folios an uncached (PC_DONTCACHE) write
 * keeps, and when they go:
 *
 *   - edge kept: the folio of a block a write covers only partly survives
 *     the write's writeback (done by the flusher on its own: fsync would
 *     drop a lone edge), the wholly covered part is dropped;
 *   - edge completed and dropped: the neighbouring write marks it, its
 *     writeback drops it; nothing is ever read from the device;
 *   - a lone edge is dropped at close and at fsync/fdatasync (dirty or
 *     clean), and those leave the backing size exact;
 *   - no edge is dropped by age while its file is open for writing: a
 *     dirty one is written after edge_expire_ms and kept, clean;
 *   - a block covered whole in two pieces is not kept: a pwritev whose
 *     iovec boundary falls inside a block, block granularity with blocks
 *     smaller than a page, unaligned PC_DIRECT writes (middle direct, ends
 *     uncached) and neighbouring direct writes completing each other;
 *   - PC_DONTCACHE|PC_DSYNC: durable on return (backing size at most
 *     rounded up to a block until fsync, zeros past the end), whole blocks
 *     already gone.
 *
 * State is checked through pc_cache_stats and, for single folios, through
 * mapping_lookup() and the folio flags.  The flusher runs asynchronously:
 * waits are polls with a bounded timeout, never bare sleeps.
 */
#include "uncached_util.h"

#include <sys/uio.h>

TEST_SCRATCH_DIR("uncached_edges")

/* After fsync/fdatasync of a file whose one lone edge (the folio at 4096)
 * was dirty: that edge counted as dropped once, gone, nothing dirty or
 * under writeback and nothing of the file cached.  The stats after. */
static struct pc_stats check_edge_synced_away(struct pc_cache *c, struct pc_file *h, uint64_t expired0)
{
	struct pc_stats s = tu_stats(c), fs;
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(!is_cached(h, 4096));
	CHECK(s.dirty_bytes == 0 && s.writeback_bytes == 0);
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	return s;
}

/* [0, 6000) uncached: block [0,4096) whole, [4096,8192) an edge, kept
 * through the writeback; [6000, 12000) completes it (dropped) and leaves
 * [8192,12288), the lone tail edge that close drops.  Nothing is read. */
TEST_CASE(edge_kept_until_completed)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	struct pc_file *h = open_new(c, dir, "edge_ab", path, sizeof(path));
	uint8_t buf[12000];
	tu_fill_pattern(buf, sizeof(buf), 1, 0);

	/* No fsync (it drops lone edges): the flusher writes the uncached
	 * data on its own, and that writeback must not drop the edge. */
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE) == 6000);
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_kept == 1);
	CHECK(is_edge(h, 4096));
	uint32_t fl = fstate(h, 0);
	/* The flusher may have cleaned and dropped it already. */
	CHECK(fl == NOT_CACHED || ((fl & PF_DROPBEHIND) && !(fl & PF_EDGE)));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 0), 2000));
	CHECK(is_kept_edge(h, 4096));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.dropbehind_drops >= 1);
	CHECK(s.edge_expired == 0);
	CHECK(disk_prefix_is(path, buf, 4096)); /* the dropped block was written */

	/* The neighbour [6000, 12000) completes [4096,8192) and leaves
	 * [8192,12288). */
	CHECK(pc_pwrite(h, buf + 6000, 6000, 6000, PC_DONTCACHE) == 6000);
	s = tu_stats(c);
	CHECK(s.edge_completed == 1);
	CHECK(s.edge_kept == 2);
	fl = fstate(h, 4096);
	CHECK(fl == NOT_CACHED || ((fl & PF_DROPBEHIND) && !(fl & PF_EDGE)));
	CHECK(is_edge(h, 8192));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 4096), 2000));
	CHECK(is_kept_edge(h, 8192));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(s.edge_expired == 0);
	CHECK(s.dirty_bytes <= 4096 && s.dirty_uncached_bytes == 0); /* at most the kept edge */
	CHECK(disk_prefix_is(path, buf, 8192));
	if (s.cached_bytes != 4096) {
		print_flags("after the completing write", h, 0);
		print_flags("after the completing write", h, 4096);
		print_flags("after the completing write", h, 8192);
	}

	/* The lone tail edge goes at close. */
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_close(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == 0);
	CHECK(s.folios == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(tu_verify_disk(path, buf, 12000));
	h = pc_open(c, path, O_RDWR, 0);
	REQUIRE(h);
	struct pc_stats fs;
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	uint8_t back[12000];
	CHECK(pc_pread(h, back, sizeof(back), 0, PC_DONTCACHE) == 12000);
	CHECK(memcmp(back, buf, sizeof(back)) == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 12000));
	CHECK(pc_cache_destroy(c) == 0);
}

/* A lone edge still dirty at close: written, then dropped. */
TEST_CASE(lone_dirty_edge_written_and_dropped_at_close)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[100];
	tu_fill_pattern(buf, sizeof(buf), 1, 0);
	struct pc_file *h = open_new(c, dir, "edge_c", path, sizeof(path));
	struct pc_stats s = tu_stats(c);
	uint64_t expired0 = s.edge_expired;
	uint64_t cached0 = s.cached_bytes, reads0 = s.dev_read_ios;
	CHECK(pc_pwrite(h, buf, 100, 0, PC_DONTCACHE) == 100);
	CHECK(is_edge(h, 0));
	CHECK(pc_close(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == cached0);
	CHECK(s.dev_read_ios == reads0);
	CHECK(tu_verify_disk(path, buf, 100));
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * pc_fsync drops a lone edge too ("at fsync/close of its file"), clean or
 * dirty, and makes the size exact.  A clean one: PC_DSYNC writes its
 * whole range, edge included, and keeps the edge until the fsync.
 */
TEST_CASE(lone_clean_edge_dropped_at_fsync)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[6000];
	tu_fill_pattern(buf, sizeof(buf), 1, 0);
	struct pc_stats s, fs, fs0;
	struct pc_file *h = open_new(c, dir, "edge_fsync", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE | PC_DSYNC) == 6000);
	uint32_t fl = fstate(h, 4096);
	CHECK(fl != NOT_CACHED && (fl & PF_EDGE) && !(fl & (PF_DIRTY | PF_WRITEBACK | PF_DROPBEHIND)));
	pc_file_stats(h, &fs0);
	CHECK(fs0.cached_bytes == 4096);
	s = tu_stats(c);
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(!is_cached(h, 4096));
	pc_file_stats(h, &fs);
	CHECK(fs.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 6000));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A dirty lone edge, left by the flusher's uncached writeback, goes at
 * fsync; one left by a write with nothing else dirty (so the flusher
 * leaves it) goes at fdatasync, written first. */
TEST_CASE(lone_dirty_edge_dropped_at_fsync_and_fdatasync)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[6100];
	tu_fill_pattern(buf, sizeof(buf), 1, 0);
	struct pc_file *h = open_new(c, dir, "edge_fsync2", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE) == 6000);
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 0), 2000));
	CHECK(is_kept_edge(h, 4096));
	struct pc_stats s = tu_stats(c);
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	s = check_edge_synced_away(c, h, expired0);
	CHECK(tu_verify_disk(path, buf, 6000));
	/* A dirty lone edge (nothing else dirty, so the flusher leaves it):
	 * pc_fdatasync writes it and drops it. */
	uint64_t reads0 = tu_stats(c).dev_read_ios;
	CHECK(pc_pwrite(h, buf + 6000, 100, 6000, PC_DONTCACHE) == 100);
	CHECK(is_edge(h, 4096));
	uint32_t fl = fstate(h, 4096);
	CHECK(fl != NOT_CACHED && (fl & PF_DIRTY));
	s = tu_stats(c);
	expired0 = s.edge_expired;
	CHECK(s.dev_read_ios == reads0); /* deferred: not read at write time */
	CHECK(pc_fdatasync(h) == 0);
	s = check_edge_synced_away(c, h, expired0);
	CHECK(tu_verify_disk(path, buf, 6100));
	/* The block held data on the device and was not cached: writeback
	 * merged it with one read. */
	CHECK(s.dev_read_ios == reads0 + 1);
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/*
 * Age drops nothing while the file is open for writing: an edge waits for
 * its neighbour however late it comes.  edge_expire_ms is 1 ms here and
 * the test waits many flusher rounds (every 100 ms), so a rule that
 * dropped edges by age would have dropped both.  A clean edge (made
 * durable by PC_DSYNC, which keeps it) stays as it is; a dirty one is
 * written by background writeback once older than edge_expire_ms and
 * stays cached, clean, still an edge.  The late neighbours then complete
 * them without a device read.
 */
TEST_CASE(edges_not_dropped_by_age_while_open)
{
	struct pc_config cfg = no_aging_config(4096);
	cfg.edge_expire_ms = 1;
	cfg.dirty_expire_ms = 50; /* the dirty edge is written, not dropped */
	struct pc_cache *c = tu_cache_new(&cfg);
	char path[4200], path2[4200];
	uint8_t buf[8192];
	tu_fill_pattern(buf, sizeof(buf), 2, 0);

	struct pc_file *h = open_new(c, dir, "edge_d1", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DONTCACHE | PC_DSYNC) == 6000); /* clean edge at 4096 */
	struct pc_file *h2 = open_new(c, dir, "edge_d2", path2, sizeof(path2));
	CHECK(pc_pwrite(h2, buf, 100, 0, PC_DONTCACHE) == 100);            /* dirty edge at 0 */
	/* The dirty edge is written by the flusher on its own (edge_expire_ms
	 * past), and kept. */
	CHECK(TU_POLL(tu_stats(c).dirty_bytes == 0 && tu_stats(c).writeback_bytes == 0, 5000));
	usleep(600 * 1000); /* six flusher rounds, 600 edge_expire_ms */
	CHECK(is_kept_edge(h, 4096));
	CHECK(is_kept_edge(h2, 0));
	uint32_t fl = fstate(h2, 0);
	CHECK(fl != NOT_CACHED && !(fl & PF_DIRTY));
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_expired == 0 && s.edge_evicted_budget == 0);
	CHECK(s.edge_kept == 2);
	CHECK(s.dev_read_ios == 0);

	/* The late neighbours complete them: nothing read, nothing left. */
	CHECK(pc_pwrite(h, buf + 6000, 2000, 6000, PC_DONTCACHE | PC_DSYNC) == 2000);
	CHECK(pc_pwrite(h2, buf + 100, 8092, 100, PC_DONTCACHE) == 8092);
	CHECK(wait_uncached_written(c));
	s = tu_stats(c);
	CHECK(s.edge_completed == 2);
	CHECK(s.dev_read_ios == 0);
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 0, 2000));
	CHECK(pc_close(h) == 0);
	CHECK(pc_close(h2) == 0);
	CHECK(tu_verify_disk(path, buf, 8000));
	CHECK(tu_verify_disk(path2, buf, 8192));
	CHECK(tu_stats(c).dev_read_ios == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* A pwritev whose iovec boundaries fall inside blocks: the blocks it
 * covers whole, in pieces, are not kept; only its partial tail is. */
TEST_CASE(whole_block_in_iovec_pieces_not_kept)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[20000];
	tu_fill_pattern(buf, sizeof(buf), 3, 0);

	/* pwritev [0,2000) + [2000,4096) at 0: one whole block. */
	struct pc_file *h = open_new(c, dir, "whole_iov", path, sizeof(path));
	struct iovec v[2] = { { buf, 2000 }, { buf + 2000, 2096 } };
	CHECK(pc_pwritev(h, v, 2, 0, PC_DONTCACHE) == 4096);
	struct pc_stats s = tu_stats(c);
	CHECK(s.edge_kept == 0);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 0));
	CHECK(s.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 4096));
	/* Three iovecs, boundaries inside blocks, two whole blocks + an edge.
	 * Written by the flusher (fsync would drop the lone edge). */
	struct iovec v3[3] = { { buf + 4096, 1 }, { buf + 4097, 5000 }, { buf + 9097, 4191 } };
	CHECK(pc_pwritev(h, v3, 3, 4096, PC_DONTCACHE) == 9192);
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(!is_cached(h, 4096) && !is_cached(h, 8192), 2000));
	CHECK(is_kept_edge(h, 12288));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.edge_kept == 1);
	CHECK(s.dev_read_ios == 0);
	CHECK(disk_prefix_is(path, buf, 12288));
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 13288));
	CHECK(pc_cache_destroy(c) == 0);
}

/* Unaligned PC_DIRECT: the aligned middle goes direct (never cached), the
 * ends are uncached edges, and the next direct write completes them. */
TEST_CASE(unaligned_direct_write_leaves_only_edges)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[20000];
	tu_fill_pattern(buf, sizeof(buf), 3, 0);

	/* Two iovecs with a boundary inside the aligned middle [0,8192)
	 * (direct, never cached), tail [8192,10000) an edge.  The edge is the
	 * only uncached data, still dirty: no fsync here (it would drop it);
	 * the middle is on the device already. */
	struct pc_file *h = open_new(c, dir, "whole_direct", path, sizeof(path));
	struct iovec d[2] = { { buf, 2000 }, { buf + 2000, 8000 } };
	CHECK(pc_pwritev(h, d, 2, 0, PC_DIRECT) == 10000);
	CHECK(!is_cached(h, 0) && !is_cached(h, 4096));
	CHECK(is_edge(h, 8192));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(disk_prefix_is(path, buf, 8192));
	uint64_t expired0 = s.edge_expired;
	/* The next unaligned direct write completes that edge with its head
	 * piece: it is dropped, and nothing was ever read. */
	CHECK(pc_pwrite(h, buf + 10000, 6384, 10000, PC_DIRECT) == 6384);
	s = tu_stats(c);
	CHECK(s.edge_completed == 1);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 8192));
	CHECK(s.cached_bytes == 0);
	CHECK(s.edge_expired == expired0); /* completed, not dropped as lone */
	CHECK(s.dev_read_ios == 0);
	CHECK(s.rmw_reads == 0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Neighbouring unaligned direct writes, all of it through edges: each
 * completes the one before, nothing is read and nothing stays. */
TEST_CASE(neighbouring_direct_writes_complete_edges)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[20000];
	tu_fill_pattern(buf, sizeof(buf), 3, 0);

	struct pc_file *h = open_new(c, dir, "direct_neigh", path, sizeof(path));
	struct pc_stats s = tu_stats(c);
	uint64_t reads0 = s.dev_read_ios, completed0 = s.edge_completed;
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_pwrite(h, buf, 6000, 0, PC_DIRECT) == 6000);
	CHECK(pc_pwrite(h, buf + 6000, 6000, 6000, PC_DIRECT) == 6000);
	CHECK(pc_pwrite(h, buf + 12000, 4384, 12000, PC_DIRECT) == 4384);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.edge_completed == completed0 + 2);
	CHECK(s.edge_expired == expired0);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == reads0);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* Blocks smaller than a page: the rule is per block, not per folio. */
TEST_CASE(whole_blocks_smaller_than_page_not_kept_512)
{
	struct pc_cache *c = no_aging_cache(512);
	char path[4200];
	uint8_t buf[20000];
	tu_fill_pattern(buf, sizeof(buf), 3, 0);
	test_path(path, sizeof(path), dir, "whole_512");
	struct pc_file *h = pc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!h) {
		fprintf(stderr, "pc_open with block size 512: %s\n", strerror(errno));
		CHECK(pc_cache_destroy(c) == 0);
		TEST_SKIP_UNSUPPORTED("block size 512 refused (the file system's direct I/O needs more alignment)");
	}
	/* Two iovecs inside one 512-byte block and one page. */
	struct iovec v5[2] = { { buf, 300 }, { buf + 300, 3796 } };
	CHECK(pc_pwritev(h, v5, 2, 0, PC_DONTCACHE) == 4096);
	CHECK(pc_fsync(h) == 0);
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 0);
	CHECK(tu_verify_disk(path, buf, 4096));
	/* [4096, 10240): every block it touches is covered whole, though the
	 * page [8192,12288) only partly: nothing is an edge, and the
	 * flusher's writeback drops it all (no fsync, which would drop an
	 * edge too and hide one). */
	uint64_t kept0 = tu_stats(c).edge_kept;
	CHECK(pc_pwrite(h, buf + 4096, 6144, 4096, PC_DONTCACHE) == 6144);
	CHECK(!is_edge(h, 8192));
	CHECK(wait_uncached_written(c));
	CHECK(TU_POLL(tu_stats(c).cached_bytes == 0, 2000));
	s = tu_stats(c);
	CHECK(s.dirty_bytes == 0);
	printf("   bs 512, block-aligned write ending mid-page: edge_kept +%llu, cached %llu after writeback\n",
	       (unsigned long long)(s.edge_kept - kept0), (unsigned long long)s.cached_bytes);
	CHECK(s.edge_kept == kept0);
	CHECK(s.cached_bytes == 0);
	CHECK(!is_cached(h, 8192));
	/* Its block-aligned neighbour [10240, 12288) then completes the page. */
	CHECK(pc_pwrite(h, buf + 10240, 2048, 10240, PC_DONTCACHE) == 2048);
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(tu_verify_disk(path, buf, 12288));
	/* Unaligned direct with 512-byte blocks: middle direct, ends edges;
	 * the neighbours complete them. */
	uint64_t cached_before = tu_stats(c).cached_bytes, reads_before = tu_stats(c).dev_read_ios;
	uint64_t completed0 = tu_stats(c).edge_completed;
	uint64_t expired0 = tu_stats(c).edge_expired;
	CHECK(pc_pwrite(h, buf + 12288, 1000, 12288, PC_DIRECT) == 1000);  /* [12288,13288) */
	CHECK(pc_pwrite(h, buf + 13288, 3000, 13288, PC_DIRECT) == 3000);  /* [13288,16288) */
	CHECK(pc_pwrite(h, buf + 16288, 96, 16288, PC_DIRECT) == 96);      /* to 16384 */
	CHECK(pc_fsync(h) == 0);
	s = tu_stats(c);
	CHECK(!is_cached(h, 12288));
	CHECK(s.edge_completed == completed0 + 2);
	CHECK(s.edge_expired == expired0);
	CHECK(s.cached_bytes == cached_before);
	CHECK(s.dev_read_ios == reads_before);
	CHECK(tu_verify_disk(path, buf, 16384));
	CHECK(pc_close(h) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}

/* PC_DONTCACHE|PC_DSYNC: durable on return, whole blocks already gone, the
 * edge kept until its neighbour completes it or fsync drops it. */
TEST_CASE(dontcache_dsync_durable_on_return)
{
	struct pc_cache *c = no_aging_cache(4096);
	char path[4200];
	uint8_t buf[20480];
	tu_fill_pattern(buf, sizeof(buf), 6, 0);
	struct pc_file *h = open_new(c, dir, "dsync", path, sizeof(path));
	CHECK(pc_pwrite(h, buf, 13288, 0, PC_DONTCACHE | PC_DSYNC) == 13288);
	/* The data, and a size that covers it, durable on return.  Until the
	 * next fsync/fdatasync/close the backing size may be rounded up to a
	 * block, the extra bytes zeros (pagecache.h, PC_DSYNC); pc_size is
	 * exact all along. */
	CHECK(tu_verify_disk_rounded(path, buf, 13288, 4096));
	CHECK(pc_size(h) == 13288);
	CHECK(!is_cached(h, 0) && !is_cached(h, 4096) && !is_cached(h, 8192));
	CHECK(is_edge(h, 12288));
	struct pc_stats s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.dirty_bytes == 0);
	/* The neighbour completes the edge: on return it is gone too. */
	CHECK(pc_pwrite(h, buf + 13288, 7000, 13288, PC_DONTCACHE | PC_DSYNC) == 7000);
	CHECK(tu_verify_disk_rounded(path, buf, 20288, 4096));
	CHECK(pc_size(h) == 20288);
	CHECK(!is_cached(h, 12288));
	CHECK(is_edge(h, 16384));
	s = tu_stats(c);
	CHECK(s.cached_bytes == 4096);
	CHECK(s.edge_completed == 1);
	CHECK(s.dev_read_ios == 0);
	/* fsync makes the size exact and drops the lone tail edge. */
	uint64_t expired0 = s.edge_expired;
	CHECK(pc_fsync(h) == 0);
	CHECK(tu_verify_disk(path, buf, 20288));
	CHECK(pc_size(h) == 20288);
	s = tu_stats(c);
	CHECK(s.edge_expired == expired0 + 1);
	CHECK(s.cached_bytes == 0);
	CHECK(s.dev_read_ios == 0);
	CHECK(pc_close(h) == 0);
	CHECK(tu_verify_disk(path, buf, 20288));
	CHECK(pc_cache_destroy(c) == 0);
}
