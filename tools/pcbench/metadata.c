/*
 * metadata.c - suite metadata, the old pcbench's e: the metadata
 * pagecache keeps per cached 4 KiB folio, measured from the cache's heap
 * and the process's (see bench_metadata()); target <= 2 % of the folio.  One result,
 * pagecache-buffered's, in bytes per folio (its share of the folio in
 * the table's ratio column).
 */
#include "bench.h"

#include <malloc.h>

/* Heap bytes in use: small chunks in every arena plus mmapped chunks. */
static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* The cache's own structures in its heap (pc_stats.meta_bytes). */
static uint64_t meta_bytes(struct pc_cache *c)
{
	struct pc_stats s;
	pc_cache_stats(c, &s);
	return s.meta_bytes;
}

/*
 * Metadata per cached 4 KiB folio, from what the cache allocated: its
 * own structures live in its segment's heap, which pc_cache_stats counts
 * (meta_bytes: the descriptor table, mappings, index nodes, block
 * states), and the little it keeps on malloc (domains, handles, I/O
 * queues) shows in the process's heap:
 *
 *   H0 = the process's heap before pc_cache_new()
 *   M1, H1 = after pc_cache_new()   -> cache metadata: the descriptor
 *            table (one descriptor per arena page), the file table
 *   M2, H2 = after pc_open() of the file (per-file state, reported, not
 *            counted per folio: it does not grow with the folios)
 *   M3, H3 = after reading every 4 KiB page of the file once, in a random
 *            order, with read-ahead disabled, so that every folio is one
 *            page -> index growth: radix-tree nodes (and any per-folio
 *            block state)
 *
 *   per folio = (M1 + H1 - H0) / (memory_limit / 4096)
 *             + (M3 - M2 + H3 - H2) / N
 *
 * where N is the number of folios cached (checked against pc_cache_stats:
 * folios == N and cached_bytes == N * 4096).  M is meta_bytes (heap
 * blocks, powers of two: index nodes come in 16 KiB chunks, so the growth
 * is counted by the chunk), H is glibc mallinfo2() uordblks + hblkhd.  The
 * folio memory itself is not metadata and is not counted; nor are thread
 * stacks or io_uring rings (per cache, not per folio).
 */
static void bench_metadata(const struct pair *p, const char *path, uint64_t fsize)
{
	uint64_t npages = fsize / 4096, arena_pages = bo.mem / 4096;
	uint64_t h0, h1, h2, h3, m1, m2, m3, *perm, i;
	char *buf = bu_alloc_aligned(4096, 4096);
	struct pc_stats s;
	struct pc_cache *c;
	struct pc_file *f = NULL;
	struct bu_rng rng;
	double per_folio = NAN;

	perm = malloc(npages * sizeof(*perm));
	if (!perm)
		bu_die("out of memory");
	for (i = 0; i < npages; i++)
		perm[i] = i;
	bu_rng_seed(&rng, 1234);
	for (i = npages - 1; i > 0; i--) {
		uint64_t j = bu_rng_below(&rng, i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}

	malloc_trim(0);
	h0 = heap_bytes();
	c = pair_cache(p, 0, 0);
	if (!c)
		goto out;
	h1 = heap_bytes();
	m1 = meta_bytes(c);
	f = pc_open(c, path, O_RDONLY, 0);
	if (!f) {
		pair_fail(p, "pc_open(O_RDONLY)");
		goto done;
	}
	h2 = heap_bytes();
	m2 = meta_bytes(c);
	for (i = 0; i < npages; i++) {
		ssize_t n = pc_pread(f, buf, 4096, (off_t)(perm[i] * 4096), 0);

		prog_advance(1);
		if (n != 4096) {
			if (n >= 0)
				errno = EIO;
			pair_fail(p, "pc_pread (4 KiB, distinct pages)");
			goto done;
		}
	}
	h3 = heap_bytes();
	m3 = meta_bytes(c);
	pc_cache_stats(c, &s);

	int64_t cache_meta = (int64_t)m1 + (int64_t)(h1 - h0);
	int64_t growth = (int64_t)(m3 - m2) + (int64_t)(h3 - h2);
	int64_t per_file = (int64_t)(m2 - m1) + (int64_t)(h2 - h1);
	per_folio = (double)cache_meta / (double)arena_pages + (double)growth / (double)npages;
	res_figure(p->pc, per_folio); /* judged as a share of the folio */
	pair_note(p, "%.1f B per 4 KiB folio = cache metadata %" PRId64 " B / %" PRIu64 " arena pages (%.1f B) + "
		  "index growth %" PRId64 " B / %" PRIu64 " folios (%.1f B); per-file state at pc_open %" PRId64 " B "
		  "(not per folio); stats: folios %" PRIu64 ", cached %s, device reads %" PRIu64,
		  per_folio, cache_meta, arena_pages, (double)cache_meta / (double)arena_pages, growth, npages,
		  (double)growth / (double)npages, per_file, s.folios, bu_human(s.cached_bytes), s.dev_read_ios);
	pair_note(p, "of which the cache's heap (meta_bytes) %s, %s, %s and malloc %" PRId64 " B, %" PRId64 " B, %" PRId64
		  " B (after pc_cache_new, pc_open, the reads)",
		  bu_human(m1), bu_human(m2), bu_human(m3), (int64_t)(h1 - h0), (int64_t)(h2 - h1), (int64_t)(h3 - h2));
	if (s.folios != npages || s.cached_bytes != npages * 4096)
		pair_note(p, "WARNING: expected %" PRIu64 " folios of 4 KiB", npages);
done:
	pair_finish_cache(p, c, f);
out:
	pair_judge_own(p, per_folio / 4096.0 * 100.0 <= 2.0, "<= 2 %");
	free(perm);
	free(buf);
}


void suite_metadata(void)
{
	struct pair p = pair_add("metadata", "e. metadata per cached 4 KiB folio", "B/folio", NULL,
				 "pagecache-buffered");
	char path[PATH_MAX];
	uint64_t size = bo.quick ? 16 * BU_MiB : 64 * BU_MiB;

	if (!p.pc) {
		printf("\n(metadata: not run: --only does not select pagecache-buffered)\n");
		return;
	}
	if (size > bo.mem / 2)
		size = (bo.mem / 2) & ~(uint64_t)4095;
	bu_join(path, sizeof(path), bo.dir, "pcbench-meta.dat");
	prog_step_count("e. metadata per folio", "pagecache-buffered", size / 4096, "reads");
	bu_make_file(path, size, 1);
	bench_metadata(&p, path, size);
	prog_step_done();
	unlink(path);
	report_pairs("metadata");
}
